//! What the property tests of this directory share.

use proptest::test_runner::RngSeed;

/// The seed of a property's cases: `fixed` unless the environment asks
/// otherwise. `PROPTEST_RANDOM=1` draws a new seed each run (to explore);
/// `PROPTEST_SEED=N` runs seed `N` (to compare two builds on the same
/// cases, seed by seed). The fixed default keeps a test that fails at
/// random from saying nothing about the change that ran it.
pub fn seed(fixed: u64) -> RngSeed {
    if std::env::var_os("PROPTEST_RANDOM").is_some() {
        return RngSeed::Random;
    }
    match std::env::var("PROPTEST_SEED") {
        Ok(s) => RngSeed::Fixed(
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("PROPTEST_SEED={s:?}: expected an unsigned integer")),
        ),
        Err(_) => RngSeed::Fixed(fixed),
    }
}
