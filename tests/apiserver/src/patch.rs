//! Patches: JSON merge patch (RFC 7386), a strategic merge patch for the built-in
//! kinds, and JSON patch (RFC 6902).
//!
//! The strategic merge patch knows the merge keys kubectl needs for pods and
//! generic metadata (`containers`/`initContainers`/`env`/`volumes`/... by `name`,
//! `ports` by `containerPort` (a Service's by `port`), `volumeMounts` by `mountPath`, `conditions` by `type`,
//! `ownerReferences` by `uid`, `finalizers` as a set); every other list is replaced.
//! It understands `$patch: delete|replace|merge`, `$deleteFromPrimitiveList/<f>` and
//! ignores `$setElementOrder/<f>` and `$retainKeys` (element order is kept as merged).

use serde_json::{Map, Value};

use crate::error::ApiError;

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "hostAliases" => {
            if field == "hostAliases" {
                "ip"
            } else {
                "name"
            }
        }
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

const SET_LISTS: &[&str] = &["finalizers"];

/// Strategic merge patch of `patch` into `target`.
pub fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut c = p.clone();
        c.remove("$patch");
        *target = Value::Object(c);
        return Ok(());
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return Ok(());
    };
    for (k, v) in p {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Some(del)) = (t.get_mut(field), v.as_array()) {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match v {
            Value::Object(_) => strategic_merge(t.entry(k.clone()).or_insert(Value::Null), v)?,
            Value::Array(items) => {
                let cur = t.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                // A Service's ports merge by `port`, a container's by `containerPort`.
                let key = match merge_key(k) {
                    Some("containerPort")
                        if items.iter().all(|i| i.get("containerPort").is_none()) =>
                    {
                        Some("port")
                    }
                    other => other,
                };
                if let (Some(key), Value::Array(existing)) = (key, &mut *cur) {
                    merge_list(existing, items, key)?;
                } else if let (true, Value::Array(existing)) =
                    (SET_LISTS.contains(&k.as_str()), &mut *cur)
                {
                    for i in items {
                        if !existing.contains(i) {
                            existing.push(i.clone());
                        }
                    }
                } else {
                    *cur = v.clone();
                }
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(())
}

fn merge_list(existing: &mut Vec<Value>, items: &[Value], key: &str) -> Result<(), ApiError> {
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *existing = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        return Ok(());
    }
    for item in items {
        let Some(kv) = item.get(key) else {
            return Err(ApiError::bad_request(format!(
                "map: {item} does not contain declared merge key: {key}"
            )));
        };
        let pos = existing.iter().position(|e| e.get(key) == Some(kv));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge(&mut existing[i], item)?,
            (None, false) => {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, item)?;
                existing.push(fresh);
            }
        }
    }
    Ok(())
}

fn unescape(tok: &str) -> String {
    tok.replace("~1", "/").replace("~0", "~")
}

fn pointer_parent<'a>(doc: &'a mut Value, path: &str) -> Result<(&'a mut Value, String), ApiError> {
    let bad = || {
        ApiError::new(
            422,
            "Invalid",
            format!(
                "the server rejected our request due to an error in our request: doc is missing path: \"{path}\""
            ),
        )
    };
    let (parent, last) = path.rsplit_once('/').ok_or_else(bad)?;
    let p = doc.pointer_mut(parent).ok_or_else(bad)?;
    Ok((p, unescape(last)))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), ApiError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = pointer_parent(doc, path)?;
    match parent {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            let idx = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| ApiError::bad_request(format!("invalid index {last}")))?
            };
            if idx > a.len() {
                return Err(ApiError::bad_request(format!("index {idx} out of bounds")));
            }
            a.insert(idx, value);
            Ok(())
        }
        _ => Err(ApiError::bad_request(format!("cannot add at {path}"))),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, ApiError> {
    let (parent, last) = pointer_parent(doc, path)?;
    let missing = || {
        ApiError::new(
            422,
            "Invalid",
            format!(
                "the server rejected our request due to an error in our request: doc is missing path: \"{path}\""
            ),
        )
    };
    match parent {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => {
            let idx = last.parse::<usize>().map_err(|_| missing())?;
            if idx >= a.len() {
                return Err(missing());
            }
            Ok(a.remove(idx))
        }
        _ => Err(missing()),
    }
}

/// RFC 6902 JSON patch.
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), ApiError> {
    let ops = ops
        .as_array()
        .ok_or_else(|| ApiError::bad_request("json patch must be an array"))?;
    for op in ops {
        let path = op["path"].as_str().unwrap_or_default();
        match op["op"].as_str().unwrap_or_default() {
            "add" => add(doc, path, op["value"].clone())?,
            "remove" => {
                remove(doc, path)?;
            }
            "replace" => {
                remove(doc, path)?;
                add(doc, path, op["value"].clone())?;
            }
            "move" | "copy" => {
                let from = op["from"].as_str().unwrap_or_default();
                let v = if op["op"] == "move" {
                    remove(doc, from)?
                } else {
                    doc.pointer(from)
                        .cloned()
                        .ok_or_else(|| ApiError::bad_request(format!("missing path {from}")))?
                };
                add(doc, path, v)?;
            }
            "test" => {
                if doc.pointer(path) != Some(&op["value"]) {
                    return Err(ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: testing value {path} failed"
                        ),
                    ));
                }
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unexpected json patch op {other:?}"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn smp_merges_containers_by_name() {
        let mut pod = json!({"metadata": {"labels": {"a": "1"}, "finalizers": ["x"]}, "spec": {"containers": [{"name": "c", "image": "i1"}, {"name": "d", "image": "i"}]}});
        let patch = json!({"metadata": {"labels": {"b": "2", "a": null}, "finalizers": ["y"]}, "spec": {"$setElementOrder/containers": [{"name": "c"}], "containers": [{"name": "c", "image": "i2"}, {"name": "d", "$patch": "delete"}]}});
        assert!(strategic_merge(&mut pod, &patch).is_ok());
        assert_eq!(pod["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(pod["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(
            pod["spec"]["containers"],
            json!([{"name": "c", "image": "i2"}])
        );
    }

    #[test]
    fn merge_and_json_patch() {
        let mut o = json!({"a": {"b": 1, "c": [1, 2]}});
        merge_patch(&mut o, &json!({"a": {"b": null, "c": [3]}}));
        assert_eq!(o, json!({"a": {"c": [3]}}));
        assert!(json_patch(&mut o, &json!([{"op": "add", "path": "/a/c/-", "value": 4}, {"op": "replace", "path": "/a/c/0", "value": 0}])).is_ok());
        assert_eq!(o, json!({"a": {"c": [0, 4]}}));
        assert!(
            json_patch(
                &mut o,
                &json!([{"op": "test", "path": "/a/c/0", "value": 9}])
            )
            .is_err()
        );
    }
}
