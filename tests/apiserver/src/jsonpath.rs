//! The small JSONPath evaluator (client-go's dialect as far as tests need it)
//! that CRD printer columns and field selectors use: fields (with `\.`
//! escapes), `['quoted']` keys, indexes (negative from the end), `[*]`/`.*`, and
//! `[?(@.a.b=="x")]` / `!=` filters.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter(Vec<String>, bool, Value),
}

fn parse_path(path: &str) -> Option<Vec<Step>> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let chars: Vec<char> = p.chars().collect();
    let mut i = 0;
    let mut steps = Vec::new();
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                let name = field_name(&chars, &mut i);
                if !name.is_empty() {
                    steps.push(if name == "*" {
                        Step::All
                    } else {
                        Step::Field(name)
                    });
                }
            }
            '[' => {
                let close =
                    (i..chars.len()).find(|&j| chars[j] == ']' && !in_quotes(&chars[i..j]))?;
                let inner: String = chars[i + 1..close].iter().collect();
                i = close + 1;
                let inner = inner.trim();
                if inner == "*" {
                    steps.push(Step::All);
                } else if let Some(f) = inner.strip_prefix("?(").and_then(|x| x.strip_suffix(')')) {
                    let (lhs, eq, rhs) = if let Some((l, r)) = f.split_once("!=") {
                        (l, false, r)
                    } else {
                        let (l, r) = f.split_once("==")?;
                        (l, true, r)
                    };
                    let lhs = lhs.trim().strip_prefix("@.")?;
                    let rhs = rhs.trim();
                    let val =
                        if let Some(s) = rhs.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
                            Value::String(s.into())
                        } else if let Some(s) =
                            rhs.strip_prefix('\'').and_then(|x| x.strip_suffix('\''))
                        {
                            Value::String(s.into())
                        } else {
                            serde_json::from_str(rhs).ok()?
                        };
                    steps.push(Step::Filter(
                        lhs.split('.').map(String::from).collect(),
                        eq,
                        val,
                    ));
                } else if let Some(s) = inner
                    .strip_prefix('\'')
                    .and_then(|x| x.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|x| x.strip_suffix('"')))
                {
                    steps.push(Step::Field(s.replace("\\.", ".")));
                } else {
                    steps.push(Step::Index(inner.parse().ok()?));
                }
            }
            _ => steps.push(Step::Field(field_name(&chars, &mut i))),
        }
    }
    Some(steps)
}

/// A field name from `chars[*i]` up to the next unescaped `.` or `[`; a
/// backslash escapes the next character, as in
/// `.metadata.labels.kubernetes\.io/hostname` (client-go's JSONPath).
fn field_name(chars: &[char], i: &mut usize) -> String {
    let mut name = String::new();
    while *i < chars.len() && chars[*i] != '.' && chars[*i] != '[' {
        if chars[*i] == '\\' && *i + 1 < chars.len() {
            *i += 1;
        }
        name.push(chars[*i]);
        *i += 1;
    }
    name
}

fn in_quotes(s: &[char]) -> bool {
    s.iter().filter(|c| **c == '"' || **c == '\'').count() % 2 == 1
}

/// Every value the JSONPath selects (empty if none or if the path does not parse).
pub fn jsonpath_all(obj: &Value, path: &str) -> Vec<Value> {
    let Some(steps) = parse_path(path) else {
        return Vec::new();
    };
    let mut cur = vec![obj.clone()];
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            match &step {
                Step::Field(f) => {
                    if let Some(x) = v.get(f.as_str()) {
                        next.push(x.clone());
                    }
                }
                Step::Index(n) => {
                    if let Some(a) = v.as_array() {
                        let idx = if *n < 0 { a.len() as i64 + n } else { *n };
                        if let Some(x) = usize::try_from(idx).ok().and_then(|i| a.get(i)) {
                            next.push(x.clone());
                        }
                    }
                }
                Step::All => match v {
                    Value::Array(a) => next.extend(a),
                    Value::Object(m) => next.extend(m.into_iter().map(|(_, x)| x)),
                    _ => {}
                },
                Step::Filter(path, eq, want) => {
                    if let Some(a) = v.as_array() {
                        for item in a {
                            let mut got = item;
                            for p in path {
                                got = &got[p.as_str()];
                            }
                            if (got == want) == *eq {
                                next.push(item.clone());
                            }
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

/// The first value the JSONPath selects.
pub fn jsonpath_first(obj: &Value, path: &str) -> Option<Value> {
    jsonpath_all(obj, path).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jsonpath_filters_and_indexes() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}, "metadata": {"labels": {"a.b/c": "x"}}});
        assert_eq!(
            jsonpath_first(&o, r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(json!("True"))
        );
        assert_eq!(
            jsonpath_first(&o, ".status.conditions[0].type"),
            Some(json!("A"))
        );
        assert_eq!(
            jsonpath_first(&o, ".status.conditions[-1].type"),
            Some(json!("Ready"))
        );
        assert_eq!(jsonpath_all(&o, ".status.conditions[*].type").len(), 2);
        assert_eq!(
            jsonpath_first(&o, ".metadata.labels['a.b/c']"),
            Some(json!("x"))
        );
        assert_eq!(
            jsonpath_first(&o, r".metadata.labels.a\.b/c"),
            Some(json!("x"))
        );
        assert_eq!(jsonpath_first(&o, ".spec.missing"), None);
    }
}
