//! RFC 3339 timestamps (as Kubernetes writes `creationTimestamp`).

use trainyard_model::Timestamp;

/// A timestamp that is not RFC 3339.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid timestamp {text:?} ({reason}); expected RFC 3339 such as \"2024-01-01T00:00:00Z\""
)]
pub struct TimestampError {
    pub text: String,
    pub reason: String,
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Parses `2026-11-22T03:49:51Z`, `2026-11-22T03:49:51.123456Z`,
/// `2026-11-22T05:49:51+02:00` (also `t`/space separator and `z`).
/// Fractions beyond milliseconds are truncated.
pub fn parse_rfc3339(s: &str) -> Result<Timestamp, TimestampError> {
    let fail = |reason: &str| TimestampError {
        text: s.to_string(),
        reason: reason.to_string(),
    };
    let b = s.as_bytes();
    let num = |from: usize, len: usize, what: &str| -> Result<i64, TimestampError> {
        let part = b.get(from..from + len).ok_or_else(|| fail("too short"))?;
        if !part.iter().all(u8::is_ascii_digit) {
            return Err(fail(&format!("{what} is not a number")));
        }
        Ok(part
            .iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, want: &[u8], what: &str| -> Result<(), TimestampError> {
        match b.get(at) {
            Some(c) if want.contains(c) => Ok(()),
            _ => Err(fail(&format!("expected {what} at position {}", at + 1))),
        }
    };
    let year = num(0, 4, "year")?;
    sep(4, b"-", "'-'")?;
    let month = num(5, 2, "month")?;
    sep(7, b"-", "'-'")?;
    let day = num(8, 2, "day")?;
    sep(10, b"Tt ", "'T'")?;
    let hour = num(11, 2, "hour")?;
    sep(13, b":", "':'")?;
    let minute = num(14, 2, "minute")?;
    sep(16, b":", "':'")?;
    let second = num(17, 2, "second")?;
    if !(1..=12).contains(&month) {
        return Err(fail("month out of range"));
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err(fail("day out of range"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(fail("time of day out of range"));
    }
    let mut pos = 19;
    let mut millis = 0i64;
    if b.get(pos) == Some(&b'.') {
        pos += 1;
        let start = pos;
        while b.get(pos).is_some_and(u8::is_ascii_digit) {
            if pos - start < 3 {
                millis = millis * 10 + i64::from(b[pos] - b'0');
            }
            pos += 1;
        }
        if pos == start {
            return Err(fail("empty fraction of a second"));
        }
        for _ in (pos - start)..3 {
            millis *= 10;
        }
    }
    let offset_minutes = match b.get(pos) {
        Some(b'Z' | b'z') => {
            pos += 1;
            0
        }
        Some(c @ (b'+' | b'-')) => {
            let sign = if *c == b'-' { -1 } else { 1 };
            let oh = num(pos + 1, 2, "offset hour")?;
            sep(pos + 3, b":", "':' in the offset")?;
            let om = num(pos + 4, 2, "offset minute")?;
            if oh > 23 || om > 59 {
                return Err(fail("offset out of range"));
            }
            pos += 6;
            sign * (oh * 60 + om)
        }
        _ => return Err(fail("missing time zone ('Z' or an offset like +02:00)")),
    };
    if pos != b.len() {
        return Err(fail("unexpected text after the time zone"));
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(Timestamp(secs * 1000 + millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        parse_rfc3339(s).unwrap().0
    }

    #[test]
    fn known_epochs() {
        assert_eq!(ms("1970-01-01T00:00:00Z"), 0);
        assert_eq!(ms("2024-01-01T00:00:00Z"), 1_704_067_200_000);
        assert_eq!(ms("2000-02-29T12:00:00Z"), 951_825_600_000);
        assert_eq!(ms("2026-11-22T03:49:51Z"), 1_795_319_391_000);
        assert_eq!(ms("1969-12-31T23:59:59Z"), -1000);
        assert_eq!(ms("2038-01-19T03:14:07Z"), 2_147_483_647_000);
    }

    #[test]
    fn fractions_and_offsets() {
        assert_eq!(ms("2024-01-01T00:00:00.5Z"), 1_704_067_200_500);
        assert_eq!(ms("2024-01-01T00:00:00.123456789Z"), 1_704_067_200_123);
        assert_eq!(ms("2024-01-01T02:00:00+02:00"), 1_704_067_200_000);
        assert_eq!(ms("2023-12-31T19:30:00-04:30"), 1_704_067_200_000);
        assert_eq!(ms("2024-01-01t00:00:00z"), 1_704_067_200_000);
        assert_eq!(ms("2024-01-01 00:00:00Z"), 1_704_067_200_000);
    }

    #[test]
    fn bad_input() {
        for bad in [
            "",
            "2024-01-01",
            "2024-01-01T00:00:00",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+0200",
            "2024-01-01T00:00:00Zjunk",
            "2024-1-01T00:00:00Z",
            "yesterday",
            "２０２４-01-01T00:00:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_rfc3339("2024-13-01T00:00:00Z")
                .unwrap_err()
                .to_string(),
            "invalid timestamp \"2024-13-01T00:00:00Z\" (month out of range); expected RFC 3339 such as \"2024-01-01T00:00:00Z\""
        );
    }
}
