//! Durations as users write them: a number of seconds (`90`, `1.5`) or a
//! number with one unit (`"500ms"`, `"90s"`, `"30m"`, `"2h"`, `"1.5d"`).
//!
//! The syntax is the simulator's (`trainyard_sim::spec::parse_duration_ms`):
//! units `ms`, `s`, `m`, `h`, `d`, a decimal number with at most millisecond
//! precision kept (further digits are truncated), spaces around the number
//! and unit allowed, at most 100 years. Converted exactly, without floats.

use std::fmt;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize, Serializer};

/// Longest duration accepted (100 years), in milliseconds.
pub const MAX_DURATION_MS: u64 = 100 * 365 * 86_400_000;

/// What a duration must look like, for messages.
const EXPECTED: &str = "expected a number of seconds, or a number with a unit (ms, s, m, h or d), such as 90, \"30m\" or \"2h\"";

/// A duration that cannot be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("duration {0:?} is negative; expected zero or more")]
    Negative(String),
    #[error("invalid duration {0:?}; {EXPECTED}")]
    Invalid(String),
    #[error("invalid duration {text:?}: unknown unit {unit:?}; expected ms, s, m, h or d")]
    UnknownUnit { text: String, unit: String },
    #[error("duration {0:?} is too large; expected at most 100 years")]
    TooLarge(String),
}

/// Parses a duration into milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, DurationError> {
    let s = text.trim();
    if s.starts_with('-') {
        return Err(DurationError::Negative(text.to_string()));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = (&s[..split], s[split..].trim());
    let factor: u64 = match unit {
        "" | "s" => 1000,
        "ms" => 1,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ if num.is_empty() => return Err(DurationError::Invalid(text.to_string())),
        u => {
            return Err(DurationError::UnknownUnit {
                text: text.to_string(),
                unit: u.to_string(),
            });
        }
    };
    let invalid = || DurationError::Invalid(text.to_string());
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(invalid());
    }
    let too_large = || DurationError::TooLarge(text.to_string());
    let int: u64 = if int.is_empty() {
        0
    } else {
        // Only digits here, so a failure is an overflow.
        int.parse().map_err(|_| too_large())?
    };
    // The fraction, exactly: at most 9 digits are read, enough for
    // nanoseconds of a second and for any unit down to `ms`.
    let digits = &frac[..frac.len().min(9)];
    let frac_ms = if digits.is_empty() {
        0
    } else {
        let scale = 10u64.pow(digits.len() as u32);
        let f: u64 = digits.parse().map_err(|_| invalid())?;
        // f < 10^9 and factor ≤ 86_400_000: the product fits in u64.
        f * factor / scale
    };
    int.checked_mul(factor)
        .and_then(|ms| ms.checked_add(frac_ms))
        .filter(|ms| *ms <= MAX_DURATION_MS)
        .ok_or_else(too_large)
}

/// Parses a duration into whole seconds, rounding a fraction of a second up
/// (`"1500ms"` is 2 seconds).
pub fn parse_duration_seconds(text: &str) -> Result<u64, DurationError> {
    parse_duration_ms(text).map(|ms| ms.div_ceil(1000))
}

/// A duration as written (a YAML number or a string), checked by
/// [`RawDuration::seconds`] or [`parse_duration_ms`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawDuration(pub String);

impl RawDuration {
    /// Whole seconds, a fraction rounded up.
    pub fn seconds(&self) -> Result<u64, DurationError> {
        parse_duration_seconds(&self.0)
    }

    /// [`RawDuration::seconds`], refusing zero (a walltime): `Err` says
    /// what was expected.
    pub fn positive_seconds(&self) -> Result<u64, String> {
        match self.seconds() {
            Ok(0) => Err(format!("{:?}: expected a duration above zero", self.0)),
            Ok(s) => Ok(s),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl fmt::Display for RawDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for RawDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::de::scalar_text(
            d,
            "a duration such as 90 (seconds), \"30m\" or \"2h\"",
            "duration",
        )
        .map(RawDuration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> u64 {
        parse_duration_ms(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn units_and_fractions() {
        assert_eq!(ms("90"), 90_000);
        assert_eq!(ms("90s"), 90_000);
        assert_eq!(ms("500ms"), 500);
        assert_eq!(ms("30m"), 1_800_000);
        assert_eq!(ms("2h"), 7_200_000);
        assert_eq!(ms("1d"), 86_400_000);
        assert_eq!(ms("1.5h"), 5_400_000);
        assert_eq!(ms(".5s"), 500);
        assert_eq!(ms("5."), 5000);
        assert_eq!(ms(" 15 m "), 900_000);
        assert_eq!(ms("+3s"), 3000);
        assert_eq!(ms("0"), 0);
        // Below a millisecond is truncated.
        assert_eq!(ms("0.0015s"), 1);
        assert_eq!(ms("1.123456789123s"), 1123);
        assert_eq!(ms("36500d"), MAX_DURATION_MS);
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(parse_duration_seconds("1500ms"), Ok(2));
        assert_eq!(parse_duration_seconds("1h"), Ok(3600));
        assert_eq!(parse_duration_seconds("0.001"), Ok(1));
        assert_eq!(parse_duration_seconds("0"), Ok(0));
    }

    #[test]
    fn bad_durations() {
        for (text, message) in [
            ("-5m", "duration \"-5m\" is negative; expected zero or more"),
            (
                "",
                "invalid duration \"\"; expected a number of seconds, or a number with a unit (ms, s, m, h or d), such as 90, \"30m\" or \"2h\"",
            ),
            (
                "soon",
                "invalid duration \"soon\"; expected a number of seconds, or a number with a unit (ms, s, m, h or d), such as 90, \"30m\" or \"2h\"",
            ),
            (
                "1.2.3s",
                "invalid duration \"1.2.3s\"; expected a number of seconds, or a number with a unit (ms, s, m, h or d), such as 90, \"30m\" or \"2h\"",
            ),
            (
                "h",
                "invalid duration \"h\"; expected a number of seconds, or a number with a unit (ms, s, m, h or d), such as 90, \"30m\" or \"2h\"",
            ),
            (
                "5w",
                "invalid duration \"5w\": unknown unit \"w\"; expected ms, s, m, h or d",
            ),
            (
                "1h30m",
                "invalid duration \"1h30m\": unknown unit \"h30m\"; expected ms, s, m, h or d",
            ),
            (
                "36501d",
                "duration \"36501d\" is too large; expected at most 100 years",
            ),
            (
                "99999999999999999999999",
                "duration \"99999999999999999999999\" is too large; expected at most 100 years",
            ),
        ] {
            assert_eq!(
                parse_duration_ms(text).unwrap_err().to_string(),
                message,
                "{text}"
            );
        }
    }

    #[test]
    fn reads_numbers_and_strings() {
        let d: RawDuration = serde_json::from_value(serde_json::json!(90)).unwrap();
        assert_eq!(d.seconds(), Ok(90));
        let d: RawDuration = serde_json::from_value(serde_json::json!(1.5)).unwrap();
        assert_eq!(d.seconds(), Ok(2));
        let d: RawDuration = serde_json::from_value(serde_json::json!(-1)).unwrap();
        assert_eq!(
            d.seconds().unwrap_err().to_string(),
            "duration \"-1\" is negative; expected zero or more"
        );
        let d: RawDuration = serde_json::from_value(serde_json::json!("2h")).unwrap();
        assert_eq!(d.seconds(), Ok(7200));
        let e = serde_json::from_value::<RawDuration>(serde_json::json!(true)).unwrap_err();
        assert_eq!(
            crate::de::plain_message(&e.to_string()),
            "expected a duration such as 90 (seconds), \"30m\" or \"2h\", found true"
        );
    }
}
