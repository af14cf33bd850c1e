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

/// Deserializes `value` into `T` and, when that fails, reports every type
/// problem of the document, not just the first: field path (`spec.jobs[3].
/// tasks[0].count`) and a plain message ([`trainyard_crd::de::plain_message`],
/// the snapshot loader's words: no Rust type names).
///
/// How: after each failure the offending field is removed and the document
/// is read again. A problem that only follows from a removal (a required
/// field now missing) is not reported; the object holding it is removed
/// too. Sequence elements keep their original indices in the paths. At
/// most `max` problems are returned.
pub fn from_value_all<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    max: usize,
) -> Result<T, Vec<(String, String)>> {
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
        next = serde_path_to_error::deserialize::<_, T>(&value).err();
    }
    // In document order as far as it is known (mappings are read sorted by key).
    problems.sort();
    Err(problems
        .into_iter()
        .map(|(steps, message)| (path_text(&steps), message))
        .collect())
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClusterDoc {
    #[serde(default)]
    api_version: Option<String>,
    kind: String,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    spec: ClusterSpecDoc,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClusterSpecDoc {
    node_pools: Vec<PoolDoc>,
    #[serde(default)]
    faults: Vec<FaultDoc>,
    #[serde(default)]
    topology: Option<TopologyDoc>,
    #[serde(default)]
    slowdown: Option<SlowdownDoc>,
}

/// `spec.topology`: a generated fabric or an explicit spec.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TopologyDoc {
    #[serde(default)]
    rail_optimized: Option<RailDoc>,
    #[serde(default)]
    leaf_spine: Option<LeafSpineDoc>,
    #[serde(default)]
    spec: Option<TopologySpec>,
    #[serde(default)]
    nvlink_domain_size: Option<Bounded<1, { u32::MAX }>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RailDoc {
    rails: Bounded<1, MAX_RAILS>,
    nodes_per_group: Bounded<1, { u32::MAX }>,
    groups_per_block: Bounded<1, { u32::MAX }>,
    spines_per_block: Bounded<1, MAX_SPINES_PER_BLOCK>,
    #[serde(default = "one")]
    numa_sockets: Bounded<1, MAX_NUMA_SOCKETS>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LeafSpineDoc {
    nodes_per_leaf: Bounded<1, { u32::MAX }>,
    leaves_per_block: Bounded<1, { u32::MAX }>,
    spines_per_block: Bounded<1, MAX_SPINES_PER_BLOCK>,
    #[serde(default = "one")]
    numa_sockets: Bounded<1, MAX_NUMA_SOCKETS>,
}

fn one<const MAX: u32>() -> Bounded<1, MAX> {
    Bounded(1)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SlowdownDoc {
    per_spine_crossing: serde_json::Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PoolDoc {
    name: String,
    count: Bounded<1, MAX_NODES>,
    #[serde(default)]
    name_pattern: Option<String>,
    cpu: RawQuantity,
    memory: RawQuantity,
    #[serde(default)]
    pods: Option<u32>,
    #[serde(default)]
    cpu_sockets: Option<u32>,
    #[serde(default)]
    gpu: Option<GpuDoc>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    taints: Vec<TaintDoc>,
    #[serde(default)]
    extended: BTreeMap<String, RawQuantity>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuDoc {
    count: Bounded<0, MAX_GPUS_PER_NODE>,
    #[serde(default)]
    model: String,
    #[serde(default)]
    memory: Option<RawQuantity>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaintDoc {
    key: String,
    #[serde(default)]
    value: String,
    effect: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultDoc {
    at: serde_json::Value,
    node: String,
    event: String,
}

/// A node failure or recovery at a point in simulated time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub at: Timestamp,
    pub node: String,
    pub up: bool,
}

/// A parsed cluster: nodes sorted by name, the fault schedule, and the
/// network topology with its slowdown model when the spec gives them.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub name: String,
    pub nodes: Vec<Node>,
    pub faults: Vec<Fault>,
    /// The validated fabric over `nodes` (from `spec.topology`).
    pub topology: Option<Arc<Topology>>,
    /// `spec.slowdown`; off when absent.
    pub slowdown: Slowdown,
    /// What the topology build ignored (e.g. names of unknown nodes).
    pub warnings: Vec<String>,
}

/// The communication slowdown model: a multi-node job's run time is
/// multiplied by `1 + perSpineCrossing × spine_crossings / hops` (no
/// change when `hops` is 0), computed once when the job starts.
///
/// The factor is kept exactly, in parts per million; the extra run time
/// is rounded down to the millisecond (see [`Slowdown::extra_ms`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slowdown {
    /// `perSpineCrossing` × 1,000,000. Zero: the model is off.
    pub per_spine_crossing_ppm: u64,
}

/// Largest `perSpineCrossing` accepted (a hundredfold slowdown).
pub const MAX_SLOWDOWN_PER_CROSSING: u64 = 100;

impl Slowdown {
    /// Parses `perSpineCrossing`: a non-negative decimal number (or numeric
    /// string) with at most six fraction digits, at most
    /// [`MAX_SLOWDOWN_PER_CROSSING`].
    pub fn parse(v: &serde_json::Value) -> Result<Slowdown, String> {
        let text = match v {
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::String(s) => s.trim().to_string(),
            other => return Err(format!("expected a number like 0.25, got {other}")),
        };
        let bad = || format!("expected a non-negative number like 0.25, got {text}");
        let too_large = || format!("expected at most {MAX_SLOWDOWN_PER_CROSSING}, got {text}");
        // Exact decimal: mantissa digits and an optional exponent (YAML
        // floats such as 0.000001 reach us as "1e-6").
        let (mantissa, exp) = match text.split_once(['e', 'E']) {
            Some((m, e)) => (m, e.parse::<i64>().map_err(|_| bad())?),
            None => (text.as_str(), 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if (int.is_empty() && frac.is_empty())
            || !int.chars().all(|c| c.is_ascii_digit())
            || !frac.chars().all(|c| c.is_ascii_digit())
            || exp.unsigned_abs() > 1000
        {
            return Err(bad());
        }
        // value = digits × 10^(scale − 6), in ppm: digits × 10^scale.
        let mut digits = format!("{int}{frac}");
        let mut scale = exp - frac.len() as i64 + 6;
        while digits.ends_with('0') {
            digits.pop();
            scale += 1;
        }
        let digits = digits.trim_start_matches('0');
        if digits.is_empty() {
            return Ok(Slowdown::default());
        }
        if scale < 0 {
            return Err(format!(
                "expected at most six decimal places (parts per million), got {text}"
            ));
        }
        if digits.len() as i64 + scale > 12 {
            return Err(too_large());
        }
        let ppm = digits
            .parse::<u64>()
            .ok()
            .and_then(|d| d.checked_mul(10u64.pow(scale as u32)))
            .ok_or_else(too_large)?;
        if ppm > MAX_SLOWDOWN_PER_CROSSING * 1_000_000 {
            return Err(too_large());
        }
        Ok(Slowdown {
            per_spine_crossing_ppm: ppm,
        })
    }

    pub fn is_off(&self) -> bool {
        self.per_spine_crossing_ppm == 0
    }

    /// Extra run time in ms for a job of `duration_ms` whose ring has
    /// `hops` inter-node hops, `crossings` of them across a spine:
    /// `⌊duration × ppm × crossings / (hops × 10⁶)⌋`, exact integer
    /// arithmetic, rounded down to the millisecond. Zero when `hops` is 0.
    pub fn extra_ms(&self, duration_ms: u64, crossings: u32, hops: u32) -> u64 {
        if hops == 0 || crossings == 0 || self.is_off() {
            return 0;
        }
        let num = duration_ms as u128 * self.per_spine_crossing_ppm as u128 * crossings as u128;
        let den = hops as u128 * 1_000_000;
        (num / den).min(MAX_DURATION_MS as u128) as u64
    }

    /// The added run time in parts per million for this span (for metrics).
    pub fn factor_ppm(&self, crossings: u32, hops: u32) -> u64 {
        if hops == 0 {
            return 0;
        }
        self.per_spine_crossing_ppm * crossings as u64 / hops as u64
    }
}

/// Expands `{index}` / `{index:0N}` in a node name pattern.
fn node_name(pattern: &str, index: u32) -> Result<String, String> {
    let start = pattern
        .find("{index")
        .ok_or_else(|| format!("namePattern {pattern:?} has no {{index}} placeholder"))?;
    let end = pattern[start..]
        .find('}')
        .map(|e| start + e)
        .ok_or_else(|| format!("namePattern {pattern:?}: unclosed {{"))?;
    let spec = &pattern[start + "{index".len()..end];
    let formatted = match spec {
        "" => index.to_string(),
        s if s.starts_with(":0") => {
            let width: usize = s[2..]
                .parse()
                .map_err(|_| format!("namePattern {pattern:?}: expected {{index:0N}}"))?;
            format!("{index:0width$}")
        }
        _ => {
            return Err(format!(
                "namePattern {pattern:?}: expected {{index}} or {{index:0N}}"
            ));
        }
    };
    Ok(format!(
        "{}{formatted}{}",
        &pattern[..start],
        &pattern[end + 1..]
    ))
}

/// Parses a `ClusterSpec` document.
pub fn parse_cluster(text: &str, source: &str) -> Result<ClusterSpec, SpecError> {
    let (d, doc): (Document, ClusterDoc) = parse_doc(text, source, &["ClusterSpec"])?;
    cluster(doc, source).map_err(|e| e.within(d.number, &d.object))
}

fn cluster(doc: ClusterDoc, source: &str) -> Result<ClusterSpec, SpecError> {
    let _ = (&doc.api_version, &doc.kind);
    let name = doc
        .metadata
        .as_ref()
        .and_then(|m| m.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or("cluster")
        .to_string();
    let total: u64 = doc.spec.node_pools.iter().map(|p| p.count.0 as u64).sum();
    if total > MAX_NODES as u64 {
        return Err(SpecError::new(
            source,
            "spec.nodePools",
            format!("expected at most {MAX_NODES} nodes in all pools together, found {total}"),
        ));
    }
    let mut nodes = Vec::new();
    let mut seen = BTreeMap::new();
    for (pi, pool) in doc.spec.node_pools.iter().enumerate() {
        let f = |field: &str| format!("spec.nodePools[{pi}].{field}");
        let cpu = quantity(&ResourceName::Cpu, &pool.cpu)
            .map_err(|e| SpecError::new(source, &f("cpu"), e))?;
        let memory = quantity(&ResourceName::Memory, &pool.memory)
            .map_err(|e| SpecError::new(source, &f("memory"), e))?;
        let (gpus, model, gpu_mem) = match &pool.gpu {
            None => (0, String::new(), 0),
            Some(g) => {
                let mem = match &g.memory {
                    Some(m) => quantity(&ResourceName::Memory, m)
                        .map_err(|e| SpecError::new(source, &f("gpu.memory"), e))?,
                    None => 0,
                };
                (g.count.0, g.model.clone(), mem)
            }
        };
        let mut taints = Vec::new();
        for (ti, t) in pool.taints.iter().enumerate() {
            let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
                SpecError::new(
                    source,
                    &f(&format!("taints[{ti}].effect")),
                    format!(
                        "expected NoSchedule, PreferNoSchedule or NoExecute, got {:?}",
                        t.effect
                    ),
                )
            })?;
            taints.push(Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect,
            });
        }
        let extended = resources(&pool.extended, &f("extended"), source)?;
        let pattern = pool
            .name_pattern
            .clone()
            .unwrap_or_else(|| format!("{}-{{index:03}}", pool.name));
        for i in 0..pool.count.0 {
            let name =
                node_name(&pattern, i).map_err(|e| SpecError::new(source, &f("namePattern"), e))?;
            if let Some(prev) = seen.insert(name.clone(), pi) {
                return Err(SpecError::new(
                    source,
                    &f("namePattern"),
                    format!("node name {name:?} also produced by nodePools[{prev}]"),
                ));
            }
            let mut node = Node::new(name, cpu, memory, gpus);
            node.allocatable.add(&extended);
            for d in &mut node.gpus {
                *d = GpuDevice {
                    index: d.index,
                    model: model.clone(),
                    memory_bytes: gpu_mem,
                };
            }
            node.max_pods = pool.pods;
            node.labels = pool.labels.clone();
            node.labels
                .insert("trainyard.io/node-pool".into(), pool.name.clone());
            if gpus > 0 && !model.is_empty() {
                node.labels
                    .insert(trainyard_crd::keys::NODE_GPU_PRODUCT.into(), model.clone());
            }
            if let Some(s) = pool.cpu_sockets {
                node.labels
                    .insert("trainyard.io/cpu-sockets".into(), s.to_string());
            }
            node.taints = taints.clone();
            nodes.push(node);
        }
    }
    let mut faults = Vec::new();
    for (fi, fd) in doc.spec.faults.iter().enumerate() {
        let at = parse_duration_ms(&fd.at)
            .map_err(|e| SpecError::new(source, &format!("spec.faults[{fi}].at"), e))?;
        if !seen.contains_key(&fd.node) {
            return Err(SpecError::new(
                source,
                &format!("spec.faults[{fi}].node"),
                format!("no node named {:?} in the node pools", fd.node),
            ));
        }
        let up = match fd.event.as_str() {
            "down" => false,
            "up" => true,
            e => {
                return Err(SpecError::new(
                    source,
                    &format!("spec.faults[{fi}].event"),
                    format!("expected down or up, got {e:?}"),
                ));
            }
        };
        faults.push(Fault {
            at: Timestamp(at as i64),
            node: fd.node.clone(),
            up,
        });
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let (topology, warnings) = match &doc.spec.topology {
        Some(t) => build_topology(t, &nodes, source)?,
        None => (None, Vec::new()),
    };
    let slowdown = match &doc.spec.slowdown {
        Some(sd) => {
            let s = Slowdown::parse(&sd.per_spine_crossing)
                .map_err(|e| SpecError::new(source, "spec.slowdown.perSpineCrossing", e))?;
            if topology.is_none() && !s.is_off() {
                return Err(SpecError::new(
                    source,
                    "spec.slowdown",
                    "the slowdown model needs a network topology (spec.topology)",
                ));
            }
            s
        }
        None => Slowdown::default(),
    };
    Ok(ClusterSpec {
        name,
        nodes,
        faults,
        topology,
        slowdown,
        warnings,
    })
}

/// Largest fabric parameters accepted (links grow with their product).
const MAX_RAILS: u32 = 64;
const MAX_SPINES_PER_BLOCK: u32 = 1024;
const MAX_NUMA_SOCKETS: u32 = 64;

/// `spec.topology` → a validated [`Topology`] over `nodes` (sorted by name).
fn build_topology(
    t: &TopologyDoc,
    nodes: &[Node],
    source: &str,
) -> Result<(Option<Arc<Topology>>, Vec<String>), SpecError> {
    let given =
        t.rail_optimized.is_some() as u8 + t.leaf_spine.is_some() as u8 + t.spec.is_some() as u8;
    if given > 1 || (given == 0 && t.nvlink_domain_size.is_none()) {
        return Err(SpecError::new(
            source,
            "spec.topology",
            "give exactly one of railOptimized, leafSpine or spec (nvlinkDomainSize may be added to any, or stand alone)",
        ));
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let max_gpus = nodes.iter().map(|n| n.gpus.len() as u32).max().unwrap_or(0);
    let mut spec = TopologySpec::default();
    if let Some(r) = &t.rail_optimized {
        let p = RailOptimized {
            rails: r.rails.0,
            nodes_per_group: r.nodes_per_group.0,
            groups_per_block: r.groups_per_block.0,
            spines_per_block: r.spines_per_block.0,
            gpus_per_node: max_gpus,
            numa_sockets: r.numa_sockets.0,
        };
        spec = generate::rail_optimized(&names, &p);
        fix_affinity(&mut spec, nodes, max_gpus, |name, gpus| {
            generate::rail_optimized(
                &[name],
                &RailOptimized {
                    gpus_per_node: gpus,
                    ..p
                },
            )
        });
    } else if let Some(l) = &t.leaf_spine {
        let p = LeafSpine {
            nodes_per_leaf: l.nodes_per_leaf.0,
            leaves_per_block: l.leaves_per_block.0,
            spines_per_block: l.spines_per_block.0,
            gpus_per_node: max_gpus,
            numa_sockets: l.numa_sockets.0,
        };
        spec = generate::leaf_spine(&names, &p);
        fix_affinity(&mut spec, nodes, max_gpus, |name, gpus| {
            generate::leaf_spine(
                &[name],
                &LeafSpine {
                    gpus_per_node: gpus,
                    ..p
                },
            )
        });
    } else if let Some(s) = &t.spec {
        spec = s.clone();
    }
    if let Some(n) = t.nvlink_domain_size {
        generate::add_nvlink_domains(&mut spec, &names, n.0);
    }
    let inputs: Vec<NodeInput> = nodes
        .iter()
        .map(|n| NodeInput {
            name: &n.name,
            labels: &n.labels,
            gpus: n.gpus.len() as u32,
        })
        .collect();
    let at = if t.spec.is_some() {
        "spec.topology.spec"
    } else {
        "spec.topology"
    };
    let topo =
        Topology::build(&spec, &inputs).map_err(|e| SpecError::new(source, at, e.to_string()))?;
    let warnings = topo
        .as_ref()
        .map(|t| {
            t.warnings()
                .iter()
                .map(|w| format!("{source}: {w}"))
                .collect()
        })
        .unwrap_or_default();
    Ok((topo.map(Arc::new), warnings))
}

/// Generators take one GPU count for all nodes: regenerate the GPU
/// affinity of nodes with fewer GPUs than the largest.
fn fix_affinity(
    spec: &mut TopologySpec,
    nodes: &[Node],
    max_gpus: u32,
    one: impl Fn(&str, u32) -> TopologySpec,
) {
    for (entry, node) in spec.nodes.iter_mut().zip(nodes) {
        let gpus = node.gpus.len() as u32;
        if gpus != max_gpus
            && entry.node == node.name
            && let Some(fixed) = one(&node.name, gpus).nodes.into_iter().next()
        {
            *entry = fixed;
        }
    }
}

#[cfg(test)]
mod tests;
