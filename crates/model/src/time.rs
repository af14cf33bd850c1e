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

/// `t` to the minute in UTC for people: `14:20 UTC` when it falls on the
/// same UTC day as `now`, else `2026-11-28 14:20 UTC`.
pub fn format_utc_minute(t: Timestamp, now: Timestamp) -> String {
    let day = |ms: i64| ms.div_euclid(86_400_000);
    let minute = t.0.rem_euclid(86_400_000) / 60_000;
    let clock = format!("{:02}:{:02} UTC", minute / 60, minute % 60);
    if day(t.0) == day(now.0) {
        return clock;
    }
    let (y, m, d) = civil_from_days(day(t.0));
    format!("{y:04}-{m:02}-{d:02} {clock}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (the
/// inverse of counting days from a date; era arithmetic, exact for every
/// `i64` day a timestamp can hold).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
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
    use super::{Timestamp, format_utc_minute};

    #[test]
    fn minutes_in_utc_name_the_day_only_when_it_differs() {
        // 2026-11-22T14:20:00Z and 2024-02-29T23:59:00Z.
        let t = Timestamp::from_secs(1_795_357_200);
        let same_day = Timestamp::from_secs(1_795_310_000);
        assert_eq!(format_utc_minute(t, same_day), "14:20 UTC");
        assert_eq!(
            format_utc_minute(t, Timestamp::from_secs(1_795_200_000)),
            "2026-11-22 14:20 UTC"
        );
        let leap = Timestamp::from_secs(1_709_251_140);
        assert_eq!(format_utc_minute(leap, t), "2024-02-29 23:59 UTC");
        assert_eq!(format_utc_minute(Timestamp(0), t), "1970-01-01 00:00 UTC");
    }

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
