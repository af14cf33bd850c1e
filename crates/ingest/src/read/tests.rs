//! The streaming reader against the references it must equal: the fast
//! event reader against serde-saphyr's values, the token replay against
//! deserializing a `serde_json::Value`; and that a List is read one item
//! at a time.

use serde::de::DeserializeSeed;
use serde_json::{Value, json};

use super::split::{Findings, Record, Splitter};
use super::{Reader, fast, object, parse_documents, yaml_options};
use crate::Source;
use crate::k8s::{K8sNode, K8sPod, K8sPriorityClass};

/// What the fast reader sees in `text`, or `None` where it declines:
/// every object handed over (as values), and what the documents gave.
fn fast_read(text: &str) -> Option<(Vec<Value>, Vec<Findings>)> {
    let options = yaml_options(text.len());
    let mut splitter = Splitter::default();
    let docs = fast::read(text, options.budget.as_ref()?, &mut splitter)?;
    Some((splitter.seen, docs))
}

/// The same through serde-saphyr's deserializer: the reference. (How it
/// records values is `Value`'s own way, checked against `Value` below.)
fn reference_read(text: &str) -> (Vec<Value>, Vec<Findings>) {
    let docs = serde_saphyr::from_multiple_with_options::<super::split::Document>(
        text,
        yaml_options(text.len()),
    )
    .expect("parses");
    let seen = docs.iter().flat_map(|d| d.seen.clone()).collect();
    (seen, docs.into_iter().map(|d| d.found).collect())
}

fn assert_fast_equals_reference(text: &str) {
    let (seen, found) = fast_read(text).unwrap_or_else(|| panic!("declined:\n{text}"));
    let (ref_seen, ref_found) = reference_read(text);
    assert_eq!(seen, ref_seen, "{text}");
    assert_eq!(format!("{found:?}"), format!("{ref_found:?}"), "{text}");
}

/// Plain scalars whose YAML 1.2 type takes care: numbers in every radix,
/// with underscores, signs and leading zeros, out of range, booleans and
/// nulls in every spelling, and strings that look like numbers.
const SCALARS: &[&str] = &[
    "0",
    "00",
    "0123",
    "-0",
    "+0",
    "-00",
    "+12",
    "-12",
    "1_000",
    "1__0",
    "_1",
    "1_",
    "0x1F",
    "0X1f",
    "0x",
    "0xG",
    "0x_1",
    "0o17",
    "0O17",
    "0o8",
    "0b101",
    "0b102",
    "-0x10",
    "+0x10",
    "-0b1",
    "1e5",
    "1E+5",
    "1e",
    "e5",
    ".5",
    "5.",
    "-.5",
    "+.5",
    "1.5e-3",
    "0.0",
    "-0.0",
    "1e308",
    "1e-400",
    "1_000.5",
    "99999999999999999999",
    "-99999999999999999999",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "0xFFFFFFFFFFFFFFFFF",
    "-0x8000000000000000",
    "true",
    "True",
    "TRUE",
    "tRue",
    "false",
    "False",
    "FALSE",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Yes",
    "null",
    "Null",
    "NULL",
    "nULL",
    "~",
    "10.1.2.3",
    "1.7.22",
    "191450m",
    "2055978848Ki",
    "128Gi",
    "6f1c0000-0000-4000-8000-000000000001",
    "v1.35.0",
    "1-2",
    "--1",
    "+-1",
    "-",
    "+",
    ".",
    "0.",
    "1.2.3",
    "12:30",
    "2024-01-01",
    "2026-11-01T10:00:00Z",
    "x",
    "hello world",
    "a:b",
    "a,b",
    "a]",
    "${X}",
    "é",
    "١٢٣",
    "0x١",
];

#[test]
fn fast_reader_matches_serde_saphyr_on_scalars() {
    for s in SCALARS {
        for text in [
            format!("k: {s}\n"),
            format!("- {s}\n"),
            format!("{s}\n"),
            format!("k: '{s}'\n"),
            format!("k: \"{s}\"\n"),
            format!("{{\"k\": [{s}]}}"),
            format!("{s}: v\n"),
        ] {
            // Keys that read as null are errors (serde-saphyr's).
            if let Some(found) = fast_read(&text) {
                let (seen, ref_found) = reference_read(&text);
                assert_eq!(found.0, seen, "{text}");
                assert_eq!(format!("{:?}", found.1), format!("{ref_found:?}"), "{text}");
            }
        }
    }
    // It reads every one of them that parses as a value (`k: -` does not),
    // but the floats that are not finite, which serde-saphyr decides.
    for s in SCALARS {
        let text = format!("k: {s}\n");
        let parses = parse_documents(&Source::new("t.yaml", &text)).is_ok();
        assert_eq!(fast_read(&text).is_some(), parses, "{s}");
    }
    for s in [".inf", "-.Inf", ".NaN", "1e999", "inf", "nan", "Infinity"] {
        assert!(fast_read(&format!("k: {s}\n")).is_none(), "{s}");
    }
}

/// A List as kubectl prints it, keys sorted, and one with its keys in
/// another order.
const KUBECTL_LIST: &str = r#"apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    labels: {kubernetes.io/hostname: n1, nvidia.com/gpu.product: H100}
    name: n1
  spec: {taints: [{effect: NoSchedule, key: gpu, value: "true"}]}
  status:
    allocatable: {cpu: 191450m, memory: 2055978848Ki, nvidia.com/gpu: "8", pods: "110"}
- apiVersion: v1
  kind: Pod
  metadata: {name: p1, namespace: ml, labels: {app: x}}
  spec:
    schedulerName: trainyard
    priority: -5
    containers:
    - name: c
      command: [python, train.py, --epochs=10]
      resources: {requests: {cpu: "16", memory: 128Gi, nvidia.com/gpu: 1}}
    terminationGracePeriodSeconds: 30
    securityContext: {}
  status: {phase: Running, podIP: 10.1.2.3}
- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata: {name: high}
  value: 1000
  preemptionPolicy: Never
- apiVersion: trainyard.io/v1alpha1
  kind: Queue
  metadata: {name: team-a}
  spec: {quota: {nvidia.com/gpu: 16}}
- kind: ConfigMap
  apiVersion: v1
  metadata: {name: cm}
  data:
    script: |
      #!/bin/sh
      echo "hi"
    folded: >
      one
      two
    multi: a
      b c
kind: List
metadata:
  resourceVersion: ""
"#;

#[test]
fn fast_reader_matches_serde_saphyr_on_documents() {
    let texts = [
        KUBECTL_LIST.to_string(),
        // kind after items: the List is held whole.
        "items: [{kind: Node, apiVersion: v1, metadata: {name: a}}]\napiVersion: v1\nkind: List\n"
            .to_string(),
        // Typed lists, nested lists, items that are not objects.
        r#"{"apiVersion": "v1", "kind": "NodeList", "items": [
            {"metadata": {"name": "b"}, "status": {"allocatable": {"cpu": "4"}}},
            {"kind": "List", "apiVersion": "v1", "items": [{"kind": "Pod", "metadata": {"name": "q"}}]},
            7, "x", null, [1, 2], {"metadata": {"name": "c"}, "kind": null, "apiVersion": 3}
        ]}"#
        .to_string(),
        "apiVersion: v1\nkind: List\nitems: null\n".to_string(),
        "apiVersion: v1\nkind: List\nitems: {a: 1}\n".to_string(),
        "apiVersion: v1\nkind: List\nitems: []\n".to_string(),
        "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n- - nested\n".to_string(),
        // Empty documents, explicit ends, directives, comments.
        "---\n---\n# only a comment\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n...\n---\n~\n---\nnull\n".to_string(),
        "%YAML 1.2\n---\napiVersion: v1 # comment\nkind: Node\nmetadata:\n  name: n\n".to_string(),
        // Keys out of order, unicode, empty collections, scalars as documents.
        "metadata: {name: z, namespace: é}\nkind: Pod\napiVersion: v1\nspec: {containers: [], tolerations: {}}\n".to_string(),
        "--- hello\n--- 3\n--- ''\n--- []\n".to_string(),
        "kind: [a]\n---\nkind: ''\n---\nkind: Node\napiVersion: {v: 1}\n---\nmetadata: {name: x}\n"
            .to_string(),
        String::new(),
        "# nothing\n".to_string(),
    ];
    for text in &texts {
        assert_fast_equals_reference(text);
    }
}

#[test]
fn fast_reader_declines_what_it_does_not_handle() {
    for text in [
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: !custom {b: 1}\n",
        "base: &b {x: 1}\nc:\n  <<: *b\n",
        "? [a]\n: b\n",
        "null: 1\n",
        "~: 1\n",
        "a: 1\na: 2\n",
        "a: {b: 1, b: 2}\n",
        "a: [unclosed\n",
        "a: .inf\n",
    ] {
        assert!(fast_read(text).is_none(), "{text}");
    }
}

/// Every path of a JSON value, as (key or index) steps.
fn paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                at.push(json!(k));
                paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                at.push(json!(i));
                paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn replaced(v: &Value, path: &[Value], with: &Value) -> Value {
    let mut v = v.clone();
    let mut here = &mut v;
    for step in path {
        here = match step {
            Value::String(k) => &mut here[k.as_str()],
            Value::Number(n) => &mut here[n.as_u64().unwrap_or(0) as usize],
            _ => unreachable!(),
        };
    }
    *here = with.clone();
    v
}

/// `value` recorded as tokens, replayed: `T` and its error exactly as
/// deserializing the `Value` gives them.
fn compare<T: serde::de::DeserializeOwned>(
    value: &Value,
    show: impl Fn(T) -> String,
) -> (String, String) {
    let mut splitter = Splitter::default();
    Record(&mut splitter).deserialize(value).expect("records");
    let tokens = splitter.tokens();
    assert_eq!(&tokens.to_value(0), value);
    let replayed = object::typed::<T>(tokens, 0, "Obj o").map(&show);
    let direct = trainyard_crd::from_value::<T>(value, "Obj o").map(&show);
    (format!("{replayed:?}"), format!("{direct:?}"))
}

#[test]
fn recording_a_value_gives_it_back() {
    for text in [
        KUBECTL_LIST,
        "a: [1, -2, 1.5, null, true, x, {}]\nb: {z: 1, a: 2}\n",
    ] {
        for doc in parse_documents(&Source::new("t.yaml", text)).expect("parses") {
            let mut splitter = Splitter::default();
            Record(&mut splitter).deserialize(&doc).expect("records");
            assert_eq!(splitter.tokens().to_value(0), doc);
        }
    }
}

#[test]
fn replay_matches_value() {
    let docs = parse_documents(&Source::new("t.yaml", KUBECTL_LIST)).expect("parses");
    let items = docs[0]["items"].as_array().cloned().unwrap_or_default();
    let replacements = [
        json!(null),
        json!(true),
        json!(1),
        json!(-1),
        json!(1.5),
        json!("x"),
        json!("NoSchedule"),
        json!([]),
        json!({}),
        json!(["x"]),
        json!({"a": 1}),
        json!({"Exists": null}),
    ];
    let mut checked = 0;
    for item in &items[..3] {
        let mut all = Vec::new();
        paths(item, &mut Vec::new(), &mut all);
        for path in &all {
            for with in &replacements {
                let v = replaced(item, path, with);
                let pairs = [
                    compare::<K8sNode>(&v, |n| {
                        let mut w = Vec::new();
                        let r = n.convert(&mut w);
                        format!("{r:?} {w:?}")
                    }),
                    compare::<K8sPod>(&v, |p| {
                        let mut w = Vec::new();
                        let r = p.convert(&mut w);
                        format!("{r:?} {w:?}")
                    }),
                    compare::<K8sPriorityClass>(&v, |p| {
                        format!("{} {} {}", p.metadata.name, p.value, p.preemption_policy.0)
                    }),
                    compare::<Value>(&v, |v| v.to_string()),
                ];
                for (replayed, direct) in pairs {
                    assert_eq!(replayed, direct, "{v}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

#[test]
fn replay_matches_value_for_other_shapes() {
    use std::collections::BTreeMap;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)] // read by Debug only
    enum E {
        Unit,
        New(u8),
        Tuple(u8, String),
        Struct { a: Option<i64> },
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)] // read by Debug only
    struct S(u8, String);

    let values = [
        json!("Unit"),
        json!({"New": 3}),
        json!({"New": -3}),
        json!({"Tuple": [1, "a"]}),
        json!({"Tuple": []}),
        json!({"Struct": {"a": null}}),
        json!({"Struct": [5]}),
        json!({"Unit": null}),
        json!({"Unit": 1}),
        json!({"a": 1, "b": 2}),
        json!("Nope"),
        json!([1, "a"]),
        json!([1, "a", 3]),
        json!({"1": "x", "20": "y"}),
        json!(1.5),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(null),
        json!("é"),
    ];
    for v in &values {
        let pairs = [
            compare::<E>(v, |e| format!("{e:?}")),
            compare::<Vec<E>>(&json!([v]), |e| format!("{e:?}")),
            compare::<S>(v, |s| format!("{s:?}")),
            compare::<Option<u8>>(v, |o| format!("{o:?}")),
            compare::<BTreeMap<u32, String>>(v, |m| format!("{m:?}")),
            compare::<BTreeMap<String, Value>>(v, |m| format!("{m:?}")),
            compare::<(f32, char)>(v, |t| format!("{t:?}")),
            compare::<Vec<u8>>(v, |b| format!("{b:?}")),
            compare::<bool>(v, |b| format!("{b:?}")),
            compare::<()>(v, |u| format!("{u:?}")),
            compare::<String>(v, |s| s),
        ];
        for (replayed, direct) in pairs {
            assert_eq!(replayed, direct, "{v}");
        }
    }
}

/// A List of `n` nodes, the fields of each in kubectl's (sorted) order or
/// with `kind` last.
fn node_list(n: usize, kind_last: bool) -> String {
    let mut s = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..n {
        if kind_last {
            s.push_str(&format!(
                "- metadata: {{name: n{i}}}\n  status: {{allocatable: {{cpu: \"8\", nvidia.com/gpu: \"8\"}}}}\n  apiVersion: v1\n  kind: Node\n"
            ));
        } else {
            s.push_str(&format!(
                "- apiVersion: v1\n  kind: Node\n  metadata: {{name: n{i}}}\n  status: {{allocatable: {{cpu: \"8\", nvidia.com/gpu: \"8\"}}}}\n"
            ));
        }
    }
    s
}

fn reader_of(text: &str) -> Reader {
    let mut reader = Reader::default();
    reader.read_source(&Source::new("dump.yaml", text));
    reader
}

#[test]
fn a_list_is_read_one_item_at_a_time() {
    // The most tokens held at once does not grow with the List: one item
    // is held, then forgotten.
    let small = reader_of(&node_list(3, false));
    let large = reader_of(&node_list(2000, false));
    assert_eq!(large.objects.nodes.len(), 2000);
    assert!(large.objects.errors.is_empty());
    assert_eq!(large.peak_tokens, small.peak_tokens);
    assert!(large.peak_tokens < 40, "{}", large.peak_tokens);
    // Items with their kind after other keys stream too; only the List's
    // own kind must come before `items`.
    let kind_last = reader_of(&node_list(2000, true));
    assert_eq!(kind_last.objects.nodes.len(), 2000);
    assert_eq!(kind_last.peak_tokens, large.peak_tokens);
    // serde-saphyr's path (taken here for the anchor) streams the same way.
    let anchored = reader_of(&format!(
        "{}- apiVersion: v1\n  kind: Node\n  metadata: &m {{name: last}}\n",
        node_list(2000, false)
    ));
    assert_eq!(anchored.objects.nodes.len(), 2001);
    assert_eq!(anchored.peak_tokens, large.peak_tokens);
}

#[test]
fn a_list_whose_kind_comes_after_its_items_is_held_and_read_the_same() {
    let sorted = node_list(50, false);
    let items_first = format!(
        "items:\n{}apiVersion: v1\nkind: List\n",
        sorted.split_once("items:\n").map_or("", |(_, i)| i)
    );
    let (a, b) = (reader_of(&sorted), reader_of(&items_first));
    assert!(b.peak_tokens > 50 * 10, "held whole: {}", b.peak_tokens);
    assert_eq!(format!("{:?}", a.objects), format!("{:?}", b.objects));
}

#[test]
fn a_bad_item_in_a_long_list_spoils_only_itself() {
    let text = node_list(500, false).replacen(
        "metadata: {name: n250}\n  status: {allocatable: {cpu: \"8\"",
        "metadata: {name: n250}\n  status: {allocatable: {cpu: [8]",
        1,
    );
    let r = reader_of(&text);
    assert_eq!(r.objects.nodes.len(), 499);
    let errors: Vec<String> = r.objects.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .starts_with("dump.yaml: document 1: Node n250: items[250].status.allocatable.cpu: "),
        "{errors:?}"
    );
    // A syntax error at the very end leaves nothing of the source, as
    // before: one error, no objects.
    let broken = reader_of(&format!("{}- {{unclosed: [\n", node_list(500, false)));
    assert!(broken.objects.nodes.is_empty());
    assert_eq!(broken.objects.errors.len(), 1);
    assert!(
        broken.objects.errors[0]
            .to_string()
            .starts_with("dump.yaml: invalid YAML: "),
        "{:?}",
        broken.objects.errors
    );
}

#[test]
fn what_the_fast_reader_declines_still_loads() {
    // Anchors and merge keys, duplicate and null keys: serde-saphyr's
    // deserializer reads (or refuses) them, as before.
    let anchored = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: a}\n  status: &s {allocatable: {cpu: \"4\"}}\n- apiVersion: v1\n  kind: Node\n  metadata: {name: b}\n  status: *s\n";
    let r = reader_of(anchored);
    assert_eq!(r.objects.nodes.len(), 2);
    assert_eq!(r.objects.nodes[1].1.allocatable.cpu, 4000);
    for bad in [
        "apiVersion: v1\nkind: Node\nmetadata: {name: a, name: b}\n",
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nnull: 1\n",
    ] {
        let r = reader_of(bad);
        assert!(r.objects.nodes.is_empty(), "{bad}");
        assert_eq!(r.objects.errors.len(), 1, "{bad}");
        assert!(
            r.objects.errors[0].message.starts_with("invalid YAML: "),
            "{:?}",
            r.objects.errors
        );
    }
}

#[test]
fn a_watched_object_is_read_as_a_file_object() {
    let docs = parse_documents(&Source::new("t.yaml", KUBECTL_LIST)).expect("parses");
    let mut watched = Reader::default();
    watched.read_object(&docs[0], "watch");
    let file = reader_of(KUBECTL_LIST);
    let shown = |r: &Reader| {
        format!(
            "{:?} {:?} {:?} {:?}",
            r.objects.nodes.iter().map(|(_, n)| n).collect::<Vec<_>>(),
            r.objects.pods.iter().map(|(_, p)| p).collect::<Vec<_>>(),
            r.objects.priority_classes,
            r.objects.queues.iter().map(|(_, q)| q).collect::<Vec<_>>(),
        )
    };
    assert_eq!(shown(&watched), shown(&file));
    assert_eq!(watched.objects.nodes.len(), 1);
    assert_eq!(watched.objects.warnings.len(), file.objects.warnings.len());
}
