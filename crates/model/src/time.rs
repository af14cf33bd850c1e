//! Time as a plain value. The core never reads a clock: callers pass `now`.

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch (UTC).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const fn from_secs(secs: i64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }
    pub const fn millis(self) -> i64 {
        self.0
    }
    /// Whole seconds elapsed from `earlier` to `self` (0 if `earlier` is later).
    pub const fn secs_since(self, earlier: Timestamp) -> u64 {
        let d = self.0.saturating_sub(earlier.0);
        if d <= 0 { 0 } else { (d / 1000) as u64 }
    }
}
