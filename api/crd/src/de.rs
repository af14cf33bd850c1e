//! Serde helpers shared by Trainyard's document types.

use std::collections::BTreeMap;
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

/// One step of a field path, in the coordinates of the original document.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Key(String),
    Index(usize),
}

fn path_text(steps: &[Step]) -> String {
    let mut s = String::new();
    for step in steps {
        match step {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Type problems of a document: (field path, plain message), in document
/// order as far as it is known.
pub type Problems = Vec<(String, String)>;

/// Deserializes `value` into `T` and, when that fails, reports every type
/// problem of the document, not just the first: field path (`spec.jobs[3].
/// tasks[0].count`) and a plain message (`plain`, usually
/// [`plain_message`]: the snapshot loader's words, no Rust type names).
/// Every reader of a document that reports all its problems at once (the
/// simulator's inputs, the scheduler's and the service's settings) goes
/// through here.
///
/// How: after each failure the offending field is removed and the document
/// is read again. A problem that only follows from a removal (a required
/// field now missing) is not reported; the object holding it is removed
/// too. Sequence elements keep their original indices in the paths. At
/// most `max` problems are returned, with the document read without the
/// offending fields when it could be (so that checks beyond the types can
/// report theirs too).
pub fn from_value_all<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    max: usize,
    plain: impl Fn(&str) -> String,
) -> Result<T, (Problems, Option<T>)> {
    let first = match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    let mut value = value.clone();
    // Original indices removed from each sequence (keyed by its original path).
    let mut removed: BTreeMap<Vec<Step>, Vec<usize>> = BTreeMap::new();
    let mut reported: Vec<Vec<Step>> = Vec::new();
    let mut problems: Vec<(Vec<Step>, String)> = Vec::new();
    let mut next = Some(first);
    let mut without: Option<T> = None;
    // Every round removes one node of the (finite) tree; the bound is a
    // second guard.
    for _ in 0..max.saturating_mul(64).max(64) {
        let Some(e) = next.take() else { break };
        let segments: Vec<serde_path_to_error::Segment> = e.path().iter().cloned().collect();
        let message = e.into_inner().to_string();
        // Translate to original coordinates.
        let mut orig: Vec<Step> = Vec::new();
        for seg in &segments {
            match seg {
                serde_path_to_error::Segment::Seq { index } => {
                    let gone = removed.get(&orig).map(Vec::as_slice).unwrap_or(&[]);
                    let mut i = *index;
                    for g in gone {
                        if *g <= i {
                            i += 1;
                        }
                    }
                    orig.push(Step::Index(i));
                }
                serde_path_to_error::Segment::Map { key } => orig.push(Step::Key(key.clone())),
                serde_path_to_error::Segment::Enum { variant } => {
                    orig.push(Step::Key(variant.clone()))
                }
                serde_path_to_error::Segment::Unknown => break,
            }
        }
        let consequence = reported.iter().any(|r| r.starts_with(&orig));
        if !consequence {
            problems.push((orig.clone(), plain(&message)));
            reported.push(orig.clone());
            if problems.len() >= max {
                break;
            }
        }
        // An unknown field: remove just that key.
        let unknown = message
            .strip_prefix("unknown field `")
            .and_then(|r| r.split_once('`'))
            .map(|(k, _)| k.to_string());
        let pruned = match unknown {
            Some(k) if !consequence => {
                let parent = lookup_mut(&mut value, &segments);
                parent
                    .and_then(serde_json::Value::as_object_mut)
                    .and_then(|m| m.remove(&k))
                    .is_some()
                    || prune(&mut value, &segments, &orig, &mut removed)
            }
            _ => prune(&mut value, &segments, &orig, &mut removed),
        };
        if !pruned {
            break;
        }
        match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(t) => without = Some(t),
            Err(e) => next = Some(e),
        }
    }
    // In document order as far as it is known (mappings are read sorted by key).
    problems.sort();
    let problems = problems
        .into_iter()
        .map(|(steps, message)| (path_text(&steps), message))
        .collect();
    Err((problems, without))
}

/// The node at `segments`, if it exists.
fn lookup_mut<'v>(
    mut v: &'v mut serde_json::Value,
    segments: &[serde_path_to_error::Segment],
) -> Option<&'v mut serde_json::Value> {
    for seg in segments {
        v = match seg {
            serde_path_to_error::Segment::Seq { index } => v.as_array_mut()?.get_mut(*index)?,
            serde_path_to_error::Segment::Map { key }
            | serde_path_to_error::Segment::Enum { variant: key } => {
                v.as_object_mut()?.get_mut(key)?
            }
            serde_path_to_error::Segment::Unknown => return None,
        };
    }
    Some(v)
}

/// Removes the node at `segments` (`orig`: the same path in original
/// coordinates); false when there is none (or it is the root).
fn prune(
    value: &mut serde_json::Value,
    segments: &[serde_path_to_error::Segment],
    orig: &[Step],
    removed: &mut BTreeMap<Vec<Step>, Vec<usize>>,
) -> bool {
    let Some((last, parent)) = segments.split_last() else {
        return false;
    };
    let Some(parent) = lookup_mut(value, parent) else {
        return false;
    };
    match last {
        serde_path_to_error::Segment::Seq { index } => {
            let Some(items) = parent.as_array_mut() else {
                return false;
            };
            if *index >= items.len() {
                return false;
            }
            items.remove(*index);
            if let Some((Step::Index(i), array)) = orig.split_last() {
                let gone = removed.entry(array.to_vec()).or_default();
                gone.push(*i);
                gone.sort_unstable();
            }
            true
        }
        serde_path_to_error::Segment::Map { key }
        | serde_path_to_error::Segment::Enum { variant: key } => {
            parent.as_object_mut().and_then(|m| m.remove(key)).is_some()
        }
        serde_path_to_error::Segment::Unknown => false,
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
