//! Stable hashes: the same value on every platform and Rust version
//! (unlike `std`'s hashers), for seeds and salts that outputs depend on.

/// 64-bit FNV-1a of `bytes`: a tiny, stable hash whose value is the same on
/// every platform and Rust version (unlike `std`'s hashers).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// A stable 64-bit hash of a task name: the Random policy's salt.
pub fn salt_of(name: &str) -> u64 {
    fnv1a64(name.as_bytes())
}
