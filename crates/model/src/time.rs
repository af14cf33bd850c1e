//! Time as a plain value. The core never reads a clock: callers pass `now`.

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch (UTC).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

/// Seconds for people, in the largest units that keep it exact:
/// `90s`, `45m`, `1h30m`, `2d`, `1d12h`.
pub fn format_seconds(s: u64) -> String {
    let units = [(86_400, "d"), (3600, "h"), (60, "m"), (1, "s")];
    if s == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    let mut left = s;
    for (size, name) in units {
        if left >= size {
            out.push_str(&format!("{}{name}", left / size));
            left %= size;
        }
    }
    out
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn seconds_read_as_people_write_them() {
        let f = super::format_seconds;
        assert_eq!(
            [
                f(0),
                f(90),
                f(2700),
                f(5400),
                f(172_800),
                f(129_600),
                f(86_461)
            ],
            ["0s", "1m30s", "45m", "1h30m", "2d", "1d12h", "1d1m1s"]
        );
    }
}
