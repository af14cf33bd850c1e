//! Label and field selectors, parsed as kube-apiserver parses them.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::error::ApiError;
use crate::table::jsonpath_first;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelReq {
    /// `k=v`, `k==v`.
    Eq(String, String),
    /// `k!=v` (also true when the key is absent).
    NotEq(String, String),
    /// `k in (a,b)`.
    In(String, BTreeSet<String>),
    /// `k notin (a,b)` (also true when the key is absent).
    NotIn(String, BTreeSet<String>),
    /// `k`.
    Exists(String),
    /// `!k`.
    NotExists(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(pub Vec<LabelReq>);

fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn set_of(s: &str) -> Option<BTreeSet<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (x,y),!f`.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let bad = |p: &str| ApiError::bad_request(format!("unable to parse requirement: {p}"));
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let r = if let Some(k) = part.strip_prefix('!') {
                LabelReq::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                LabelReq::NotIn(k.trim().into(), set_of(v).ok_or_else(|| bad(&part))?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                LabelReq::In(k.trim().into(), set_of(v).ok_or_else(|| bad(&part))?)
            } else {
                LabelReq::Exists(part.trim().to_string())
            };
            let key = match &r {
                LabelReq::Eq(k, _)
                | LabelReq::NotEq(k, _)
                | LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Exists(k)
                | LabelReq::NotExists(k) => k,
            };
            if !valid_key(key) {
                return Err(bad(&part));
            }
            reqs.push(r);
        }
        Ok(LabelSelector(reqs))
    }

    /// Builds the selector of a `metav1.LabelSelector` object (matchLabels/matchExpressions).
    pub fn from_object(sel: &Value) -> Self {
        let mut reqs = Vec::new();
        if let Some(m) = sel["matchLabels"].as_object() {
            for (k, v) in m {
                reqs.push(LabelReq::Eq(
                    k.clone(),
                    v.as_str().unwrap_or_default().into(),
                ));
            }
        }
        if let Some(exprs) = sel["matchExpressions"].as_array() {
            for e in exprs {
                let k = e["key"].as_str().unwrap_or_default().to_string();
                let vals: BTreeSet<String> = e["values"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                reqs.push(match e["operator"].as_str().unwrap_or_default() {
                    "In" => LabelReq::In(k, vals),
                    "NotIn" => LabelReq::NotIn(k, vals),
                    "Exists" => LabelReq::Exists(k),
                    _ => LabelReq::NotExists(k),
                });
            }
        }
        LabelSelector(reqs)
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, set) => get(k).is_some_and(|x| set.contains(x)),
            LabelReq::NotIn(k, set) => get(k).is_none_or(|x| !set.contains(x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: `(path, equal?, value)` requirements.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `a=b,c!=d`, rejecting labels not in `allowed` (plus metadata.name/namespace).
    pub fn parse(s: &str, allowed: &[String]) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let k = k.trim();
            if k != "metadata.name" && k != "metadata.namespace" && !allowed.iter().any(|a| a == k)
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {k}"
                )));
            }
            reqs.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the object satisfies every requirement. Absent fields read as "".
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let got = field_value(obj, path);
            (got == *want) == *eq
        })
    }
}

fn field_value(obj: &Value, path: &str) -> String {
    let v = if path == "source" {
        obj["source"]["component"].clone()
    } else {
        jsonpath_first(obj, &format!(".{path}")).unwrap_or(Value::Null)
    };
    match v {
        Value::String(s) => s,
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_operators() {
        let o = json!({"metadata": {"labels": {"app": "a", "tier": "gpu"}}});
        let m = |s: &str| {
            LabelSelector::parse(s)
                .map(|l| l.matches(&o))
                .unwrap_or(false)
        };
        assert!(m("app=a,tier in (gpu, cpu)"));
        assert!(m("app==a,!missing,tier"));
        assert!(!m("app!=a"));
        assert!(m("tier notin (cpu),missing notin (x)"));
        assert!(!m("tier notin (gpu)"));
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn field_labels_checked() {
        let allowed = vec!["spec.nodeName".to_string()];
        let o = json!({"metadata": {"name": "p"}, "spec": {}});
        let f =
            FieldSelector::parse("spec.nodeName=,metadata.name=p", &allowed).unwrap_or_default();
        assert!(f.matches(&o));
        assert!(FieldSelector::parse("spec.foo=x", &allowed).is_err());
    }
}
