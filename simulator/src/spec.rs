//! Simulator input documents: the cluster spec (node pools, faults) and the
//! shared value syntax (quantities, durations).
//!
//! ```yaml
//! apiVersion: trainyard.io/v1alpha1
//! kind: ClusterSpec
//! metadata: {name: h100-64}
//! spec:
//!   nodePools:
//!   - name: h100
//!     count: 64
//!     namePattern: "h100-{index:03}"     # {index} or {index:0N}; default "<name>-{index:03}"
//!     cpu: "224"
//!     memory: 2Ti
//!     pods: 110                           # optional max pods
//!     cpuSockets: 2                       # recorded as label trainyard.io/cpu-sockets
//!     gpu: {count: 8, model: NVIDIA-H100-80GB-HBM3, memory: 80Gi}
//!     labels: {topology.kubernetes.io/zone: a}
//!     taints: [{key: dedicated, value: infer, effect: NoSchedule}]
//!     dra: {gpus: true, nics: 8}         # optional: GPUs (and NICs) as DRA ResourceSlices
//!                                         # (driver: gpu.nvidia.com, nicDriver: nic.example.com)
//!   faults:                               # optional
//!   - {at: 6h, node: h100-003, event: down}
//!   - {at: 8h, node: h100-003, event: up}
//!   topology:                             # optional network fabric, one of:
//!     railOptimized: {rails: 8, nodesPerGroup: 32, groupsPerBlock: 4, spinesPerBlock: 8, numaSockets: 2}
//!     # leafSpine: {nodesPerLeaf: 16, leavesPerBlock: 8, spinesPerBlock: 4, numaSockets: 2}
//!     # spec: {switches: [...], links: [...], ...}   # a TopologySpec, as in a Topology document
//!     nvlinkDomainSize: 18                # optional, consecutive nodes per NVLink domain
//!   slowdown: {perSpineCrossing: 0.25}    # optional communication slowdown model
//! ```
//!
//! Generated fabrics cover every node of every pool, in node-name order;
//! each node's GPU count comes from its pool.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use trainyard_crd::{API_VERSION, RawQuantity};
use trainyard_ingest::{LoadError, Source};
use trainyard_model::topology::generate::{self, LeafSpine, RailOptimized};
use trainyard_model::topology::{NodeInput, Topology, TopologySpec};
use trainyard_model::{GpuDevice, Node, ResourceName, Resources, Taint, TaintEffect, Timestamp};

/// Every problem found in a simulator input document (never empty). Each
/// names what the snapshot loader's errors name: the file, the document,
/// the object, the field path and what was expected, one per line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SpecError(pub Vec<LoadError>);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        trainyard_crd::write_lines(f, &self.0)
    }
}

impl From<LoadError> for SpecError {
    fn from(e: LoadError) -> Self {
        SpecError(vec![e])
    }
}

impl SpecError {
    /// One problem at `field` (empty: the document as a whole) of the one
    /// document of `source`.
    pub fn new(source: &str, field: &str, message: impl Into<String>) -> Self {
        SpecError(vec![LoadError {
            source_name: source.to_string(),
            document: Some(1),
            object: None,
            field: (!field.is_empty()).then(|| field.to_string()),
            message: message.into(),
        }])
    }

    /// One problem with the file as a whole (no document).
    pub fn file(source: &str, message: impl Into<String>) -> Self {
        SpecError(vec![LoadError {
            source_name: source.to_string(),
            document: None,
            object: None,
            field: None,
            message: message.into(),
        }])
    }

    /// Names `doc` and `object` in every problem that is inside a document
    /// and names no object yet.
    pub fn within(self, doc: usize, object: &str) -> Self {
        let mut e = self.in_document(doc);
        for p in &mut e.0 {
            if p.document.is_some() && p.object.is_none() {
                p.object = Some(object.to_string());
            }
        }
        e
    }

    /// Names `doc` in every problem that is inside a document.
    pub fn in_document(mut self, doc: usize) -> Self {
        for p in &mut self.0 {
            if p.document.is_some() {
                p.document = Some(doc);
            }
        }
        self
    }
}

/// Most problems reported for one document; the rest are summarised.
pub const MAX_PROBLEMS_PER_DOCUMENT: usize = 20;

/// Deserializes `value` into `T` and, when that fails, reports every type
/// problem of the document, not just the first: field path (`spec.jobs[3].
/// tasks[0].count`) and a plain message (the snapshot loader's words: no
/// Rust type names) ([`trainyard_crd::de::from_value_all`], with the
/// simulator's wording of one-key "kind" mappings). At most `max`
/// problems are returned.
pub fn from_value_all<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    max: usize,
) -> Result<T, Vec<(String, String)>> {
    trainyard_crd::de::from_value_all(value, max, plain).map_err(|(problems, _)| problems)
}

/// A serde message in the documents' words: [`trainyard_crd::de::plain_message`],
/// plus the wording of a one-key "kind" mapping (`pods: {fixed: 8}`,
/// `arrival: {every: 10m}`), which serde describes as an enum.
fn plain(message: &str) -> String {
    const KIND: &str = "a mapping with one key naming the kind";
    if message.ends_with(": map, expected map with a single key") {
        return format!("expected {KIND}, found several keys");
    }
    trainyard_crd::de::plain_message(
        &message.replace("expected string or map", &format!("expected {KIND}")),
    )
}

/// Turns [`from_value_all`]'s problems into errors at `prefix` (the path of
/// `value` in the document) of `source`.
pub fn field_errors(source: &str, prefix: &str, problems: Vec<(String, String)>) -> SpecError {
    let n = problems.len();
    let mut errors: Vec<LoadError> = problems
        .into_iter()
        .flat_map(|(path, message)| {
            let field = match (prefix.is_empty(), path.is_empty()) {
                (_, true) => prefix.to_string(),
                (true, false) => path,
                (false, false) if path.starts_with('[') => format!("{prefix}{path}"),
                (false, false) => format!("{prefix}.{path}"),
            };
            SpecError::new(source, &field, message).0
        })
        .collect();
    if n >= MAX_PROBLEMS_PER_DOCUMENT
        && let Some(last) = errors.last_mut()
    {
        last.message.push_str(&format!(
            " (stopped after {MAX_PROBLEMS_PER_DOCUMENT} problems)"
        ));
    }
    SpecError(errors)
}

/// Deserializes `value` (at `prefix` in the document) into `T`, reporting
/// every type problem (see [`from_value_all`]).
pub fn typed<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    source: &str,
    prefix: &str,
) -> Result<T, SpecError> {
    from_value_all(value, MAX_PROBLEMS_PER_DOCUMENT).map_err(|p| field_errors(source, prefix, p))
}

/// The one document of a simulator input file, checked the way the
/// snapshot loader checks documents: YAML 1.2 (`no` is a string, not
/// `false`), syntax errors with the file, line and column, a file that is
/// empty or holds several documents named as such, a mapping with the
/// expected `kind` and `apiVersion` (optional; `trainyard.io/v1alpha1`).
pub struct Document {
    pub value: serde_json::Value,
    /// 1-based number of the document in the file.
    pub number: usize,
    pub kind: String,
    /// `Kind name`, or `Kind` when the document has no `metadata.name`.
    pub object: String,
}

/// Reads the one document of `text`, whose `kind` must be one of `kinds`.
pub fn read_document(text: &str, source: &str, kinds: &[&str]) -> Result<Document, SpecError> {
    let expected = match kinds {
        [one] => format!("a {one} document (apiVersion: {API_VERSION}, kind: {one})"),
        _ => format!(
            "a {} document (apiVersion: {API_VERSION})",
            kinds.join(" or ")
        ),
    };
    let docs = trainyard_ingest::parse_documents(&Source::new(source, text))?;
    let mut present = trainyard_ingest::present_documents(docs);
    let Some((number, value)) = present.next() else {
        return Err(SpecError::file(
            source,
            format!("is empty; expected {expected}"),
        ));
    };
    if let Some((extra, _)) = present.next() {
        return Err(SpecError::new(
            source,
            "",
            format!("expected one document per file ({expected}), found a second one"),
        )
        .in_document(extra));
    }
    let at = |field: &str, message: String| SpecError::new(source, field, message);
    if !value.is_object() {
        let found = match &value {
            serde_json::Value::Bool(_) => "a boolean",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Array(_) => "a sequence",
            _ => "something else",
        };
        return Err(at("", format!("expected {expected}, found {found}")).in_document(number));
    }
    let kind = match value.get("kind") {
        Some(serde_json::Value::String(k)) if kinds.contains(&k.as_str()) => k.clone(),
        None | Some(serde_json::Value::Null) => {
            return Err(
                at("kind", format!("missing; expected {}", kinds.join(" or "))).in_document(number),
            );
        }
        Some(other) => {
            return Err(at(
                "kind",
                format!("expected {}, found {other}", kinds.join(" or ")),
            )
            .in_document(number));
        }
    };
    let name = value
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .filter(|n| !n.is_empty());
    let object = match name {
        Some(n) => format!("{kind} {n}"),
        None => kind.clone(),
    };
    match value.get("apiVersion") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::String(v)) if v == API_VERSION => {}
        Some(other) => {
            return Err(at(
                "apiVersion",
                format!("expected {API_VERSION:?}, found {other}"),
            )
            .within(number, &object));
        }
    }
    Ok(Document {
        value,
        number,
        kind,
        object,
    })
}

/// Parses the one document of `text` into `T` (a document type with
/// `kind`), every type problem reported with the field path.
pub fn parse_doc<T: serde::de::DeserializeOwned>(
    text: &str,
    source: &str,
    kinds: &[&str],
) -> Result<(Document, T), SpecError> {
    let doc = read_document(text, source, kinds)?;
    let typed: T = typed(&doc.value, source, "").map_err(|e| e.within(doc.number, &doc.object))?;
    Ok((doc, typed))
}

/// A whole number in `MIN..=MAX`, for sizes and counts. Out-of-range values
/// are rejected while reading, with the range in the message (`expected a
/// whole number from 1 to 100000, found 10000000`), so sizes that would
/// exhaust memory never reach the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bounded<const MIN: u32, const MAX: u32>(pub u32);

impl<'de, const MIN: u32, const MAX: u32> serde::Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const MIN: u32, const MAX: u32>;
        impl<const MIN: u32, const MAX: u32> serde::de::Visitor<'_> for V<MIN, MAX> {
            type Value = Bounded<MIN, MAX>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a whole number from {MIN} to {MAX}")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                if (MIN as u64..=MAX as u64).contains(&v) {
                    Ok(Bounded(v as u32))
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                match u64::try_from(v) {
                    Ok(u) => self.visit_u64(u),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(v), &self)),
                }
            }
        }
        d.deserialize_u64(V::<MIN, MAX>)
    }
}

/// A duration: a number of seconds, or a string with unit `ms`, `s`, `m`,
/// `h` or `d` (e.g. `90`, `"15m"`, `"1.5h"`). Returned in milliseconds.
pub fn parse_duration_ms(v: &serde_json::Value) -> Result<u64, String> {
    let (num, unit) = match v {
        serde_json::Value::Number(n) => (n.to_string(), "s".to_string()),
        serde_json::Value::String(s) => {
            let s = s.trim();
            if s.starts_with('-') {
                return Err(format!("expected a non-negative duration, got {v}"));
            }
            let split = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            let unit = if split == s.len() { "s" } else { &s[split..] };
            (s[..split].to_string(), unit.trim().to_string())
        }
        other => {
            return Err(format!(
                "expected a duration like 90, \"15m\" or \"2h\", got {other}"
            ));
        }
    };
    let factor: u64 = match unit.as_str() {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        u => {
            return Err(format!(
                "unknown duration unit {u:?}; expected ms, s, m, h or d"
            ));
        }
    };
    // Exact decimal: integer part and up to 3 fraction digits of the unit.
    let (int, frac) = num.split_once('.').unwrap_or((&num, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(format!("expected a non-negative duration, got {v}"));
    }
    let int: u64 = if int.is_empty() {
        0
    } else {
        int.parse()
            .map_err(|_| format!("expected a non-negative duration, got {v}"))?
    };
    let mut frac_ms: u64 = 0;
    if !frac.is_empty() {
        if !frac.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("expected a non-negative duration, got {v}"));
        }
        let digits: String = frac.chars().take(9).collect();
        let scale = 10u64.pow(digits.len() as u32);
        let f: u64 = digits.parse().unwrap_or(0);
        frac_ms = f.saturating_mul(factor) / scale;
    }
    int.checked_mul(factor)
        .and_then(|v| v.checked_add(frac_ms))
        .filter(|ms| *ms <= MAX_DURATION_MS)
        .ok_or_else(|| format!("duration {v} is too large; expected at most 100 years"))
}

/// Longest duration or time accepted anywhere (100 years), so sums of
/// submit times and durations can never overflow.
pub const MAX_DURATION_MS: u64 = 100 * 365 * 86_400_000;

/// Size bounds of simulator inputs. Anything larger is rejected while
/// reading, with the bound in the message, instead of exhausting memory.
/// Most nodes in one pool and in a whole cluster.
pub const MAX_NODES: u32 = 100_000;
/// Most GPU devices on one node.
pub const MAX_GPUS_PER_NODE: u32 = 64;
/// Most tasks (pods) one job may have.
pub const MAX_TASKS_PER_JOB: u32 = 100_000;
/// Most jobs in one workload (a job list, or all templates of a generator).
pub const MAX_JOBS: u32 = 1_000_000;
/// Most jobs one generator template may generate.
pub const MAX_JOBS_PER_TEMPLATE: u32 = MAX_JOBS;
/// Most tasks (pods) in one workload, all jobs together.
pub const MAX_WORKLOAD_TASKS: u64 = 10_000_000;

/// Converts a quantity for resource `name` to its integer unit.
pub fn quantity(name: &ResourceName, q: &RawQuantity) -> Result<u64, String> {
    q.parse()
        .and_then(|p| p.to_resource_units(name))
        .map_err(|e| e.to_string())
}

/// Parses a `{resource: quantity}` map into `Resources`.
pub fn resources(
    map: &BTreeMap<String, RawQuantity>,
    field: &str,
    source: &str,
) -> Result<Resources, SpecError> {
    let mut r = Resources::zero();
    for (k, v) in map {
        let name = ResourceName::parse(k);
        let amount =
            quantity(&name, v).map_err(|e| SpecError::new(source, &format!("{field}.{k}"), e))?;
        r.set(&name, amount);
    }
    Ok(r)
}

mod cluster;

pub use cluster::*;

#[cfg(test)]
mod tests;
