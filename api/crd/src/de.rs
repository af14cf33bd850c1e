//! Serde helpers shared by Trainyard's document types.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

/// Deserializes a scalar written as a string or a number as its text, for
/// values parsed later so that every bad one of an object is reported at
/// once (quantities, durations). `expecting` is what a type error says was
/// expected; `what` names the value when a number is not finite.
pub fn scalar_text<'de, D: Deserializer<'de>>(
    d: D,
    expecting: &'static str,
    what: &'static str,
) -> Result<String, D::Error> {
    struct V {
        expecting: &'static str,
        what: &'static str,
    }
    impl Visitor<'_> for V {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.expecting)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u128<E: de::Error>(self, v: u128) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i128<E: de::Error>(self, v: i128) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            if !v.is_finite() {
                return Err(E::custom(format!(
                    "invalid {} {v}; expected a finite number",
                    self.what
                )));
            }
            // Display of f64 is the shortest exact round-trip text, without exponent.
            Ok(v.to_string())
        }
    }
    d.deserialize_any(V { expecting, what })
}

/// Deserializes an explicit `null` as `T::default()` (Kubernetes output
/// often writes `labels: null` or `resources: {}`, and YAML `spec:` with no
/// value is `null`).
pub fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Rewrites a serde error message in the words of the documents instead of
/// Rust's: `invalid type: null, expected struct QueueSpecDoc` becomes
/// `expected a mapping, found null`, and `invalid value: integer `-1`,
/// expected u32` becomes `expected a whole number from 0 to 4294967295,
/// found -1`. Other messages (unknown or missing fields, custom messages)
/// are returned unchanged.
pub fn plain_message(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.rsplit_once(", expected ")
        {
            return format!(
                "expected {}, found {}",
                plain_expected(expected),
                plain_found(found)
            );
        }
    }
    if let Some(rest) = message.strip_prefix("invalid length ")
        && let Some((len, expected)) = rest.split_once(", expected ")
    {
        return format!("expected {}, found {len} entries", plain_expected(expected));
    }
    message.to_string()
}

/// What serde says it expected, in plain words.
fn plain_expected(expected: &str) -> String {
    fn range(min: i128, max: u128) -> String {
        format!("a whole number from {min} to {max}")
    }
    match expected {
        "u8" => range(0, u8::MAX.into()),
        "u16" => range(0, u16::MAX.into()),
        "u32" => range(0, u32::MAX.into()),
        "u64" | "usize" => range(0, u64::MAX.into()),
        "i8" => range(i8::MIN.into(), 127),
        "i16" => range(i16::MIN.into(), 32_767),
        "i32" => range(i32::MIN.into(), 2_147_483_647),
        "i64" | "isize" => range(i64::MIN.into(), 9_223_372_036_854_775_807),
        "u128" | "i128" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        "a map" => "a mapping".to_string(),
        "option" => "a value or null".to_string(),
        "unit" => "null".to_string(),
        _ => {
            // Derived `expecting` texts name the Rust type.
            if expected.starts_with("struct ") || expected.starts_with("map ") {
                "a mapping".to_string()
            } else if expected.starts_with("tuple struct ") || expected.starts_with("tuple ") {
                "a sequence".to_string()
            } else if expected.starts_with("enum ")
                || expected.starts_with("internally tagged enum ")
                || expected.starts_with("adjacently tagged enum ")
                || expected.starts_with("unit struct ")
                || expected.starts_with("newtype struct ")
                || expected.contains("::")
            {
                "a value of another type".to_string()
            } else {
                expected.to_string()
            }
        }
    }
}

/// What serde says it found (`serde::de::Unexpected`), in plain words.
fn plain_found(found: &str) -> String {
    for prefix in ["integer ", "floating point ", "boolean ", "char "] {
        if let Some(v) = found.strip_prefix(prefix) {
            return v.trim_matches('`').to_string();
        }
    }
    if let Some(s) = found.strip_prefix("string ") {
        return s.to_string();
    }
    match found {
        "map" => "a mapping".to_string(),
        "sequence" => "a sequence".to_string(),
        "unit" | "null" => "null".to_string(),
        "Option value" => "a value".to_string(),
        _ => found.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_name_no_rust_types() {
        for (serde, plain) in [
            (
                "invalid type: null, expected struct QueueSpecDoc",
                "expected a mapping, found null",
            ),
            (
                "invalid value: integer `-1`, expected u32",
                "expected a whole number from 0 to 4294967295, found -1",
            ),
            (
                "invalid type: string \"high\", expected i32",
                "expected a whole number from -2147483648 to 2147483647, found \"high\"",
            ),
            (
                "invalid type: map, expected a sequence",
                "expected a sequence, found a mapping",
            ),
            (
                "invalid type: floating point `1.5`, expected u32",
                "expected a whole number from 0 to 4294967295, found 1.5",
            ),
            (
                "invalid type: integer `81559`, expected a string",
                "expected a string, found 81559",
            ),
            (
                "invalid type: string \"yes\", expected a boolean",
                "expected true or false, found \"yes\"",
            ),
            (
                "invalid type: sequence, expected a map",
                "expected a mapping, found a sequence",
            ),
            (
                "unknown field `quotas`, expected one of `parent`, `quota`",
                "unknown field `quotas`, expected one of `parent`, `quota`",
            ),
            ("missing field `effect`", "missing field `effect`"),
        ] {
            assert_eq!(plain_message(serde), plain, "{serde}");
        }
    }
}
