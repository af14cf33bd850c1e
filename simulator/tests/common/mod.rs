//! Access to `../shared/data` (the openb traces and the FGD paper's table)
//! for the tests that replay them.

use std::io::Write;
use std::path::PathBuf;

/// Set (to `1`) where the data must be present, as in CI: a missing file
/// then fails the test instead of skipping it.
pub const REQUIRE: &str = "TRAINYARD_REQUIRE_DATA";

/// The path of `../shared/data/<rel>` when it exists. Otherwise the test
/// is skipped visibly: a `SKIPPED` line goes straight to the terminal (not
/// through the test harness's capture, so it shows for passing tests
/// too); with `TRAINYARD_REQUIRE_DATA=1` it fails instead.
pub fn shared_path(test: &str, rel: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data")
        .join(rel);
    if path.exists() {
        return Some(path);
    }
    let why = format!("{} does not exist", path.display());
    if std::env::var(REQUIRE).is_ok_and(|v| v == "1") {
        panic!("{test}: {why}, and {REQUIRE}=1 requires it");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {why}; set {REQUIRE}=1 to make this a failure"
    );
    None
}

/// The text of `../shared/data/<rel>` (see [`shared_path`]); a file that
/// exists but cannot be read fails the test.
#[allow(dead_code)] // not every test file reads text
pub fn shared_data(test: &str, rel: &str) -> Option<String> {
    let path = shared_path(test, rel)?;
    Some(
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{test}: {} exists but: {e}", path.display())),
    )
}
