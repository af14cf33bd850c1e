//! Validation of custom resources against a CRD's structural `openAPIV3Schema`:
//! types, `required`, `enum`, numeric bounds, string/array/map lengths, `pattern`,
//! `x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields`, `nullable`,
//! defaulting (`default`) and pruning of unknown fields, as the real server does.
//! CEL rules (`x-kubernetes-validations`, transition rules included) are evaluated
//! with `kube-cel` once the structural checks pass.
//!
//! Also the few checks of built-in objects the server performs (names, pod containers).

use serde_json::{Map, Value};

use crate::error::Cause;

/// What a schema walk found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Validation failures.
    pub causes: Vec<Cause>,
    /// Paths of fields pruned as unknown (reported as errors under `fieldValidation=Strict`).
    pub pruned: Vec<String>,
}

fn join(path: &str, seg: &str) -> String {
    if path.is_empty() {
        seg.to_string()
    } else {
        format!("{path}.{seg}")
    }
}

fn invalid(out: &mut Outcome, path: &str, value: &Value, msg: String) {
    out.causes.push(Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {msg}", short(value)),
        field: path.into(),
    });
}

fn short(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Applies defaults, prunes unknown fields and validates `obj` against `schema`.
/// The root's `apiVersion`, `kind` and `metadata` are never pruned.
pub fn check(obj: &mut Value, schema: &Value) -> Outcome {
    let mut out = Outcome::default();
    walk(obj, schema, "", true, &mut out);
    out
}

fn walk(v: &mut Value, s: &Value, path: &str, root: bool, out: &mut Outcome) {
    if v.is_null() {
        if s["nullable"] != Value::Bool(true) && !path.is_empty() {
            invalid(out, path, v, "must not be null".into());
        }
        return;
    }
    let int_or_string = s["x-kubernetes-int-or-string"] == Value::Bool(true);
    let ty = s["type"].as_str().unwrap_or("");
    let got = type_name(v);
    let type_ok = if int_or_string {
        matches!(got, "integer" | "string")
    } else {
        match ty {
            "" => true,
            "number" => matches!(got, "integer" | "number"),
            t => t == got,
        }
    };
    if !type_ok {
        let want = if int_or_string {
            "integer or string".to_string()
        } else {
            format!("\"{ty}\"")
        };
        out.causes.push(Cause {
            reason: "FieldValueTypeInvalid".into(),
            message: format!(
                "Invalid value: \"{got}\": {path} in body must be of type {}",
                want.trim_matches('"')
            ),
            field: path.into(),
        });
        return;
    }
    if let Some(allowed) = s["enum"].as_array()
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
        out.causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                short(v),
                list.join(", ")
            ),
            field: path.into(),
        });
    }
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = s["minimum"].as_f64() {
                let excl = s["exclusiveMinimum"] == Value::Bool(true);
                if x < min || (excl && x == min) {
                    let rel = if excl {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    invalid(
                        out,
                        path,
                        v,
                        format!("{path} in body should be {rel} {}", s["minimum"]),
                    );
                }
            }
            if let Some(max) = s["maximum"].as_f64() {
                let excl = s["exclusiveMaximum"] == Value::Bool(true);
                if x > max || (excl && x == max) {
                    let rel = if excl {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    invalid(
                        out,
                        path,
                        v,
                        format!("{path} in body should be {rel} {}", s["maximum"]),
                    );
                }
            }
            if let Some(m) = s["multipleOf"].as_f64()
                && m > 0.0
                && (x / m).fract() != 0.0
            {
                invalid(
                    out,
                    path,
                    v,
                    format!("{path} in body should be a multiple of {m}"),
                );
            }
        }
        Value::String(st) => {
            let st = st.clone();
            let v = &Value::String(st.clone());
            let len = st.chars().count() as u64;
            if let Some(min) = s["minLength"].as_u64()
                && len < min
            {
                invalid(
                    out,
                    path,
                    v,
                    format!("{path} in body should be at least {min} chars long"),
                );
            }
            if let Some(max) = s["maxLength"].as_u64()
                && len > max
            {
                out.causes.push(Cause {
                    reason: "FieldValueTooLong".into(),
                    message: format!("Too long: may not be more than {max} bytes"),
                    field: path.into(),
                });
            }
            if let Some(p) = s["pattern"].as_str() {
                match regex::Regex::new(p) {
                    Ok(re) if !re.is_match(&st) => {
                        invalid(out, path, v, format!("{path} in body should match '{p}'"))
                    }
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(min) = s["minItems"].as_u64()
                && (items.len() as u64) < min
            {
                invalid(
                    out,
                    path,
                    &Value::Null,
                    format!("{path} in body should have at least {min} items"),
                );
            }
            if let Some(max) = s["maxItems"].as_u64()
                && items.len() as u64 > max
            {
                out.causes.push(Cause {
                    reason: "FieldValueTooMany".into(),
                    message: format!("Too many: {}: must have at most {max} items", items.len()),
                    field: path.into(),
                });
            }
            if let Some(is) = s.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item, is, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        Value::Object(m) => object(m, s, path, root, out),
        _ => {}
    }
}

fn object(m: &mut Map<String, Value>, s: &Value, path: &str, root: bool, out: &mut Outcome) {
    let props = s["properties"].as_object();
    // Defaults first, as the real server defaults before validating.
    if let Some(props) = props {
        for (k, ps) in props {
            if !m.contains_key(k)
                && let Some(d) = ps.get("default")
            {
                m.insert(k.clone(), d.clone());
            }
        }
    }
    if let Some(req) = s["required"].as_array() {
        for r in req.iter().filter_map(Value::as_str) {
            if !m.contains_key(r) {
                out.causes.push(Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: join(path, r),
                });
            }
        }
    }
    let preserve = s["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true);
    let additional = s.get("additionalProperties");
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        let child_path = join(path, &k);
        if root && (k == "apiVersion" || k == "kind" || k == "metadata") {
            continue;
        }
        let child_schema = props.and_then(|p| p.get(&k)).or(match additional {
            Some(Value::Object(a)) => {
                Some(additional.unwrap_or(&Value::Null)).filter(|_| !a.is_empty())
            }
            _ => None,
        });
        match child_schema {
            Some(cs) => {
                if let Some(v) = m.get_mut(&k) {
                    walk(v, cs, &child_path, false, out);
                }
            }
            None if preserve || additional == Some(&Value::Bool(true)) => {}
            None => {
                m.remove(&k);
                out.pruned.push(child_path);
            }
        }
    }
    if let Some(min) = s["minProperties"].as_u64()
        && (m.len() as u64) < min
    {
        invalid(
            out,
            path,
            &Value::Null,
            format!("{path} in body should have at least {min} properties"),
        );
    }
    if let Some(max) = s["maxProperties"].as_u64()
        && m.len() as u64 > max
    {
        invalid(
            out,
            path,
            &Value::Null,
            format!("{path} in body should have at most {max} properties"),
        );
    }
}

/// Evaluates a schema's CEL rules on `obj` (`old` for transition rules on updates).
pub fn cel_causes(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    if !has_cel(schema) {
        return Vec::new();
    }
    match kube_cel::Validator::new().validate(schema, obj, old) {
        Ok(()) => Vec::new(),
        Err(errs) => errs
            .into_vec()
            .into_iter()
            .map(|e| Cause {
                reason: e
                    .reason
                    .clone()
                    .unwrap_or_else(|| "FieldValueInvalid".into()),
                message: format!("Invalid value: \"object\": {}", e.message),
                field: e.field_path.clone(),
            })
            .collect(),
    }
}

/// CEL rules of a CRD version schema that do not compile (the CRD is rejected).
pub fn cel_compile_causes(schema: &Value, field: &str) -> Vec<Cause> {
    if !has_cel(schema) {
        return Vec::new();
    }
    kube_cel::compile_schema(schema)
        .compilation_errors()
        .into_iter()
        .map(|e| Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: \"string\": compilation failed: {e}"),
            field: field.into(),
        })
        .collect()
}

/// Whether a CRD schema uses CEL rules anywhere.
pub fn has_cel(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("x-kubernetes-validations") || m.values().any(has_cel),
        Value::Array(a) => a.iter().any(has_cel),
        _ => false,
    }
}

/// DNS-1123 subdomain check for `metadata.name` (most kinds).
pub fn name_causes(name: &str) -> Vec<Cause> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if ok {
        Vec::new()
    } else {
        vec![Cause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
            field: "metadata.name".into(),
        }]
    }
}

/// The checks of a pod's spec the real server makes that tests lean on.
pub fn pod_causes(pod: &Value) -> Vec<Cause> {
    let mut c = Vec::new();
    match pod["spec"]["containers"].as_array() {
        Some(cs) if !cs.is_empty() => {
            for (i, ct) in cs.iter().enumerate() {
                if ct["name"].as_str().is_none_or(str::is_empty) {
                    c.push(Cause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value".into(),
                        field: format!("spec.containers[{i}].name"),
                    });
                }
                if ct["image"].as_str().is_none_or(str::is_empty) {
                    c.push(Cause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value".into(),
                        field: format!("spec.containers[{i}].image"),
                    });
                }
            }
        }
        _ => c.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.containers".into(),
        }),
    }
    // `spec.schedulingGroup` (Kubernetes 1.36): the PodGroup a pod belongs
    // to, which need not exist yet; immutable like the rest of the spec.
    let group = &pod["spec"]["schedulingGroup"];
    if !group.is_null() {
        let at = "spec.schedulingGroup.podGroupName";
        match group["podGroupName"].as_str() {
            None | Some("") => c.push(Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value".into(),
                field: at.into(),
            }),
            Some(n) => c.extend(crate::scheduling::dns_subdomain(at, n)),
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "string", "enum": ["small", "large"]},
            "weight": {"type": "integer", "minimum": 0, "maximum": 100},
            "port": {"x-kubernetes-int-or-string": true},
            "mode": {"type": "string", "default": "fast", "pattern": "^[a-z]+$"},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}}})
    }

    #[test]
    fn validates_defaults_and_prunes() {
        let mut o = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"}, "spec": {"size": "small", "weight": 5, "port": "http", "junk": 1, "extra": {"any": 1}}});
        let out = check(&mut o, &schema());
        assert!(out.causes.is_empty(), "{:?}", out.causes);
        assert_eq!(out.pruned, vec!["spec.junk".to_string()]);
        assert_eq!(o["spec"]["mode"], "fast");
        assert_eq!(o["spec"]["extra"]["any"], 1);
    }

    #[test]
    fn cel_rules_and_transition_rules() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min must not exceed max"}],
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"},
                "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}}}}});
        let ok = json!({"spec": {"min": 1, "max": 2, "name": "a"}});
        assert!(cel_causes(&schema, &ok, None).is_empty());
        let bad = json!({"spec": {"min": 3, "max": 2, "name": "a"}});
        let causes = cel_causes(&schema, &bad, None);
        assert_eq!(causes.len(), 1);
        assert!(
            causes[0].message.contains("min must not exceed max"),
            "{causes:?}"
        );
        assert_eq!(causes[0].field, "spec");
        let renamed = json!({"spec": {"min": 1, "max": 2, "name": "b"}});
        let causes = cel_causes(&schema, &renamed, Some(&ok));
        assert!(
            causes.iter().any(|c| c.message.contains("immutable")),
            "{causes:?}"
        );
        assert!(
            cel_compile_causes(
                &json!({"x-kubernetes-validations": [{"rule": "self.("}]}),
                "f"
            )
            .len()
                == 1
        );
    }

    #[test]
    fn reports_field_paths() {
        let mut o = json!({"spec": {"size": "huge", "weight": -1, "port": 1.5, "mode": "A"}});
        let out = check(&mut o, &schema());
        let fields: Vec<&str> = out.causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["spec.mode", "spec.port", "spec.size", "spec.weight"]
        );
        let mut missing = json!({"spec": {}});
        assert_eq!(check(&mut missing, &schema()).causes[0].field, "spec.size");
    }
}
