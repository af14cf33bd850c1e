//! The selector corpus (`corpus.yaml`): expressions from the Kubernetes
//! DRA documentation, API reference and tests, and from the NVIDIA DRA
//! driver for GPUs, each evaluated on a device with its expected result.

use std::collections::BTreeMap;

use serde::Deserialize;
use trainyard_dra::{Selector, SelectorError};
use trainyard_model::dra::{AttrValue, Device, DeviceCapacity};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Corpus {
    #[allow(dead_code)]
    sources: BTreeMap<String, String>,
    devices: BTreeMap<String, DeviceSpec>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    source: String,
    expression: String,
    /// A device of `devices` by name, or one inline.
    device: DeviceRef,
    expect: Expect,
    /// For `expect: error`: a part of the message.
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Expect {
    True,
    False,
    /// Refused when compiled (syntax, length, static cost).
    Invalid,
    /// Fails when evaluated on the device.
    Error,
    /// Stopped by the evaluation budget.
    Cost,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum DeviceRef {
    Named(String),
    Inline(DeviceSpec),
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct DeviceSpec {
    driver: String,
    /// Names without a domain take the driver's, as in a ResourceSlice.
    #[serde(default)]
    attributes: BTreeMap<String, Attr>,
    /// Kubernetes quantities.
    #[serde(default)]
    capacity: BTreeMap<String, String>,
    #[serde(default, rename = "allowMultipleAllocations")]
    multi: bool,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum Attr {
    Int(i64),
    Bool(bool),
    String(String),
    Version(String),
}

fn qualify(name: &str, driver: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("{driver}/{name}")
    }
}

/// A Kubernetes quantity in milli-units (the suffixes the corpus uses).
fn milli(q: &str) -> u64 {
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let factor: u64 = match suffix {
        "" => 1000,
        "m" => 1,
        "k" => 1000 * 1000,
        "M" => 1000 * 1_000_000,
        "G" => 1000 * 1_000_000_000,
        "Ki" => 1000 << 10,
        "Mi" => 1000 << 20,
        "Gi" => 1000 << 30,
        "Ti" => 1000 << 40,
        other => panic!("quantity suffix {other:?} in {q:?}"),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let mut v = whole.parse::<u64>().unwrap() * factor;
    let mut scale = factor;
    for d in frac.chars() {
        scale /= 10;
        v += u64::from(d.to_digit(10).unwrap()) * scale;
    }
    v
}

fn device(spec: &DeviceSpec) -> Device {
    Device {
        driver: spec.driver.as_str().into(),
        pool: "pool".into(),
        name: "device".into(),
        attributes: spec
            .attributes
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Attr::Int(i) => AttrValue::Int(*i),
                    Attr::Bool(b) => AttrValue::Bool(*b),
                    Attr::String(s) => AttrValue::String(s.clone()),
                    Attr::Version(s) => AttrValue::Version(s.clone()),
                };
                (qualify(k, &spec.driver), v)
            })
            .collect(),
        capacity: spec
            .capacity
            .iter()
            .map(|(k, q)| {
                (
                    qualify(k, &spec.driver),
                    DeviceCapacity {
                        value: milli(q),
                        policy: None,
                    },
                )
            })
            .collect(),
        consumes: Vec::new(),
        taints: Vec::new(),
        multi: spec.multi,
    }
}

#[test]
fn quantities_in_the_corpus_are_read_exactly() {
    assert_eq!(milli("64Gi"), (64 * 1000) << 30);
    assert_eq!(milli("1.5"), 1500);
    assert_eq!(milli("500m"), 500);
    assert_eq!(milli("4864Mi"), (4864 * 1000) << 20);
}

#[test]
fn corpus() {
    let corpus: Corpus =
        serde_saphyr::from_str(include_str!("corpus.yaml")).expect("corpus.yaml parses");
    let mut failures = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for case in &corpus.cases {
        assert!(
            seen.insert(case.name.clone()),
            "duplicate case {}",
            case.name
        );
        assert!(
            case.source
                .split(',')
                .all(|s| corpus.sources.contains_key(s.trim())),
            "{}: unknown source {}",
            case.name,
            case.source
        );
        let spec = match &case.device {
            DeviceRef::Named(n) => corpus
                .devices
                .get(n)
                .unwrap_or_else(|| panic!("{}: no device {n}", case.name))
                .clone(),
            DeviceRef::Inline(d) => d.clone(),
        };
        let outcome = Selector::compile(&case.expression).and_then(|s| s.matches(&device(&spec)));
        let got = match &outcome {
            Ok(true) => Expect::True,
            Ok(false) => Expect::False,
            Err(
                SelectorError::TooLong { .. }
                | SelectorError::Syntax { .. }
                | SelectorError::Unsupported { .. }
                | SelectorError::TooComplex { .. },
            ) => Expect::Invalid,
            Err(SelectorError::CostLimit { .. }) => Expect::Cost,
            Err(_) => Expect::Error,
        };
        let message = outcome.as_ref().err().map(ToString::to_string);
        let text_ok = match (&case.error, &message) {
            (Some(want), Some(m)) => m.contains(want.as_str()),
            (Some(_), None) => false,
            (None, _) => true,
        };
        if got != case.expect || !text_ok {
            failures.push(format!(
                "{}: want {:?}{}, got {:?}{}",
                case.name,
                case.expect,
                case.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default(),
                got,
                message.map(|m| format!(": {m}")).unwrap_or_default()
            ));
        }
        if let Some(m) = outcome.as_ref().err() {
            // Messages are for users: no Rust debug output.
            let text = m.to_string();
            for debug in ["Int(", "String(", "Map(", "List(", "Opaque", "Value::"] {
                assert!(!text.contains(debug), "{}: {text}", case.name);
            }
        }
    }
    assert!(corpus.cases.len() >= 40, "{} cases", corpus.cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases fail:\n{}",
        failures.len(),
        corpus.cases.len(),
        failures.join("\n")
    );
}
