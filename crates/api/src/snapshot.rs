//! `GetSnapshot`: the objects the scheduler watches, as one `List` in the
//! format `trainyard schedule` and `trainyard simulate --cluster` read
//! (docs/snapshot.md), with the config and the time of the cycle.

use std::sync::Arc;

use serde_json::Value;
use trainyard_serve::view::CycleView;

use crate::{ApiError, convert, pb};

/// `objects` as a `kind: List` YAML document, in block style.
///
/// Written by [`block`] rather than a general YAML serializer: a cluster
/// of 5,000 nodes and 50,000 pods is some 100 MB of YAML, and the general
/// writer took seconds for it (docs/benchmarks.md).
pub fn objects_yaml(objects: &[Arc<Value>]) -> String {
    // About 2 KB per object: one allocation, not a doubling series.
    let mut out = String::with_capacity(objects.len().saturating_mul(2048) + 64);
    out.push_str("apiVersion: v1\nitems:");
    if objects.is_empty() {
        out.push_str(" []");
    }
    for o in objects {
        out.push_str("\n- ");
        match &**o {
            Value::Object(m) if !m.is_empty() => block(o, 2, &mut out),
            Value::Array(a) if !a.is_empty() => {
                out.pop();
                block(o, 2, &mut out);
            }
            _ => scalar(o, &mut out),
        }
    }
    out.push_str("\nkind: List\n");
    out
}

/// Appends `v` as block-style YAML at `indent` spaces, after a key (or a
/// list dash) already written: scalars and empty collections go on the
/// same line, others start on the next (a top-level map too: the caller
/// drops that first line break). Strings are double-quoted with
/// JSON's escapes, which YAML's double-quoted style reads alike, so no
/// value changes type (`"8"`, `"yes"`, `"null"` stay strings).
pub fn block(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 || !out.ends_with("- ") {
                    out.push('\n');
                    pad(out, indent);
                }
                key(k, out);
                out.push(':');
                nested(x, indent + 2, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for x in a {
                out.push('\n');
                pad(out, indent);
                out.push_str("- ");
                match x {
                    Value::Object(m) if !m.is_empty() => block(x, indent + 2, out),
                    Value::Array(inner) if !inner.is_empty() => {
                        // A list in a list: on the dash's line, one deeper.
                        out.pop();
                        block(x, indent + 2, out);
                    }
                    _ => scalar(x, out),
                }
            }
        }
        _ => scalar(v, out),
    }
}

/// A map's value after `key:`.
fn nested(x: &Value, indent: usize, out: &mut String) {
    match x {
        Value::Object(m) if !m.is_empty() => block(x, indent, out),
        // Lists sit at the key's indentation, as kubectl writes them.
        Value::Array(a) if !a.is_empty() => block(x, indent - 2, out),
        _ => {
            out.push(' ');
            scalar(x, out);
        }
    }
}

fn scalar(v: &Value, out: &mut String) {
    match v {
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
        Value::String(s) => key(s, out),
        // JSON's forms of these are YAML's.
        _ => out.push_str(&v.to_string()),
    }
}

/// A string (key or value), plain when no YAML reader can take it for
/// anything else (a letter first, then letters, digits and `_-./`; not a
/// word YAML 1.1 reads as a boolean or null), else double-quoted.
fn key(k: &str, out: &mut String) {
    let plain = k.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b))
        && !matches!(
            k.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null"
        );
    if plain {
        out.push_str(k);
    } else {
        out.push_str(&Value::String(k.to_string()).to_string());
    }
}

fn pad(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// The response: the objects, the cycle's config and time.
pub fn response(
    c: &CycleView,
    objects: Vec<Arc<Value>>,
) -> Result<pb::GetSnapshotResponse, ApiError> {
    let config_yaml = serde_saphyr::to_string(&*c.config)
        .map_err(|e| ApiError::Unavailable(format!("the config could not be written: {e}")))?;
    Ok(pb::GetSnapshotResponse {
        cycle: Some(convert::cycle(c)),
        objects_yaml: objects_yaml(&objects),
        config_yaml,
        now: trainyard_serve::report::rfc3339(c.now),
        writes_in_flight: u32::try_from(c.writes_in_flight).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Whatever the values, the YAML reads back as the same value.
    #[test]
    fn block_yaml_reads_back_as_written() {
        let v = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"kind": "Pod", "metadata": {"name": "p", "labels": {"a/b": "yes", "on": "8", "": "x", "x: y": "- z"},
              "annotations": {"k": "line1\nline2 \"q\" \\ tab\t é ✓", "n": "null", "e": ""}},
             "spec": {"containers": [{"name": "c", "args": ["--a=1", "#b", " lead", "trail "], "resources": {}}],
                      "nested": [[1, 2], [], [{"a": 1}]], "empty": [], "nothing": null, "t": true, "f": -1.5, "big": 18446744073709551615u64}},
            {}, [], "s", 0
        ]});
        let items: Vec<Arc<Value>> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .cloned()
            .map(Arc::new)
            .collect();
        let text = objects_yaml(&items);
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
        expect_test::expect![[r##"
            apiVersion: v1
            items:
            - kind: Pod
              metadata:
                annotations:
                  e: ""
                  k: "line1\nline2 \"q\" \\ tab\t é ✓"
                  "n": "null"
                labels:
                  "": x
                  a/b: "yes"
                  "on": "8"
                  "x: y": "- z"
                name: p
              spec:
                big: 18446744073709551615
                containers:
                - args:
                  - "--a=1"
                  - "#b"
                  - " lead"
                  - "trail "
                  name: c
                  resources: {}
                empty: []
                f: -1.5
                nested:
                -
                  - 1
                  - 2
                - []
                -
                  - a: 1
                nothing: null
                t: true
            - {}
            - []
            - s
            - 0
            kind: List
        "##]]
        .assert_eq(&text);
    }
}
