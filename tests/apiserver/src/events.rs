//! `events.k8s.io/v1` Events: the core Events seen through the newer API.
//!
//! kube-apiserver keeps one storage for both: an Event created through
//! `events.k8s.io/v1` is listed by `kubectl get events` (core/v1) and the
//! other way round. The server does the same: objects are stored in the core
//! shape and converted on the way in and out (`regarding` ⇄ `involvedObject`,
//! `note` ⇄ `message`, `reportingController` ⇄ `reportingComponent`,
//! `deprecatedSource`/`deprecatedFirstTimestamp`/`deprecatedLastTimestamp`/
//! `deprecatedCount` ⇄ `source`/`firstTimestamp`/`lastTimestamp`/`count`),
//! and field selectors are read through the same renaming.
//!
//! Creates through `events.k8s.io/v1` are validated as kube-apiserver
//! validates them (`eventTime`, `reportingController`, `reportingInstance`,
//! `action`, `reason` required, `type` Normal or Warning, the deprecated
//! fields unset); updates are not checked beyond the common rules.

use serde_json::{Map, Value, json};

use crate::error::Cause;

/// (events.k8s.io/v1 field, core/v1 field)
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: Value, to_core: bool) -> Value {
    let Value::Object(m) = obj else {
        return obj;
    };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = RENAMES.iter().find_map(|(new, old)| {
            let (from, to) = if to_core { (new, old) } else { (old, new) };
            (k == *from).then_some(*to)
        });
        out.insert(renamed.map_or(k, String::from), v);
    }
    Value::Object(out)
}

/// An `events.k8s.io/v1` Event in the core shape it is stored in.
pub fn to_core(obj: Value) -> Value {
    let mut o = rename(obj, true);
    if o.get("involvedObject").is_none_or(Value::is_null) {
        o["involvedObject"] = json!({});
    }
    o
}

/// A stored (core) Event in the `events.k8s.io/v1` shape.
pub fn to_v1(obj: Value) -> Value {
    rename(obj, false)
}

/// The core field an `events.k8s.io/v1` field selector label reads.
pub fn core_field_label(label: &str) -> String {
    if let Some(rest) = label.strip_prefix("regarding.") {
        return format!("involvedObject.{rest}");
    }
    match label {
        "reportingController" => "reportingComponent".into(),
        other => other.into(),
    }
}

fn required(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

fn invalid(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: \"\": {detail}"),
        field: field.into(),
    }
}

fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Object(m) => m.values().all(empty),
        _ => false,
    }
}

/// kube-apiserver's checks of an Event created through `events.k8s.io/v1`
/// (`ValidateEventCreate`), on the object in that API's shape; `ns` is the
/// namespace it is created in.
pub fn create_causes(obj: &Value, ns: &str) -> Vec<Cause> {
    let mut c = Vec::new();
    let regarding_ns = obj["regarding"]["namespace"].as_str().unwrap_or("");
    if regarding_ns.is_empty() && ns != "default" && ns != "kube-system" {
        c.push(invalid(
            "involvedObject.namespace",
            "does not match event.namespace",
        ));
    }
    for f in [
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        if obj[f].as_str().is_none_or(str::is_empty) {
            c.push(required(f));
        }
    }
    if obj["eventTime"].as_str().is_none_or(str::is_empty) {
        c.push(required("eventTime"));
    }
    let ty = obj["type"].as_str().unwrap_or("");
    if ty != "Normal" && ty != "Warning" {
        c.push(invalid("type", &format!("has invalid value: {ty}")));
    }
    for f in [
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
        "deprecatedSource",
    ] {
        if !empty(&obj[f]) {
            c.push(invalid(f, "needs to be unset"));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_convert_both_ways_and_selectors_follow() {
        let v1 = json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"}, "note": "n",
            "reportingController": "default-scheduler", "reportingInstance": "i", "action": "Binding",
            "reason": "Scheduled", "type": "Normal", "eventTime": "2026-01-01T00:00:00.000000Z"});
        let core = to_core(v1.clone());
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "n");
        assert_eq!(core["reportingComponent"], "default-scheduler");
        assert!(core.get("regarding").is_none());
        assert_eq!(to_v1(core), v1);
        assert!(create_causes(&v1, "default").is_empty());
        assert_eq!(core_field_label("regarding.name"), "involvedObject.name");
        assert_eq!(
            core_field_label("reportingController"),
            "reportingComponent"
        );
        assert_eq!(core_field_label("type"), "type");
        let fields: Vec<String> = create_causes(
            &json!({"regarding": {}, "type": "Bad", "deprecatedCount": 2}),
            "team",
        )
        .into_iter()
        .map(|c| c.field)
        .collect();
        assert_eq!(
            fields,
            [
                "involvedObject.namespace",
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
                "eventTime",
                "type",
                "deprecatedCount"
            ]
        );
    }
}
