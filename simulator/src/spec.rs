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
use std::sync::Arc;

use serde::Deserialize;
use trainyard_api::RawQuantity;
use trainyard_model::topology::generate::{self, LeafSpine, RailOptimized};
use trainyard_model::topology::{NodeInput, Topology, TopologySpec};
use trainyard_model::{GpuDevice, Node, ResourceName, Resources, Taint, TaintEffect, Timestamp};

/// A problem in a simulator input document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {location}{message}")]
pub struct SpecError {
    pub source_name: String,
    /// `field.path: ` or empty.
    pub location: String,
    pub message: String,
}

impl SpecError {
    pub fn new(source: &str, field: &str, message: impl Into<String>) -> Self {
        SpecError {
            source_name: source.to_string(),
            location: if field.is_empty() {
                String::new()
            } else {
                format!("{field}: ")
            },
            message: message.into(),
        }
    }
}

/// Parses one YAML (or JSON) document into `T`, with the field path in errors.
pub fn parse_doc<T: serde::de::DeserializeOwned>(text: &str, source: &str) -> Result<T, SpecError> {
    // YAML 1.2 booleans only: a pool or node named `n` stays a string.
    let options = serde_saphyr::options! { strict_booleans: true };
    let value: serde_json::Value = serde_saphyr::from_str_with_options(text, options)
        .map_err(|e| SpecError::new(source, "", format!("invalid YAML: {e}")))?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        SpecError::new(source, &path, e.into_inner().to_string())
    })
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

/// Most tasks one job may have, and most jobs one template may generate.
pub const MAX_TASKS_PER_JOB: u32 = 100_000;
pub const MAX_JOBS_PER_TEMPLATE: u32 = 10_000_000;

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
    nvlink_domain_size: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RailDoc {
    rails: u32,
    nodes_per_group: u32,
    groups_per_block: u32,
    spines_per_block: u32,
    #[serde(default = "one")]
    numa_sockets: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LeafSpineDoc {
    nodes_per_leaf: u32,
    leaves_per_block: u32,
    spines_per_block: u32,
    #[serde(default = "one")]
    numa_sockets: u32,
}

fn one() -> u32 {
    1
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
    count: u32,
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
    count: u32,
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
    let doc: ClusterDoc = parse_doc(text, source)?;
    if doc.kind != "ClusterSpec" {
        return Err(SpecError::new(
            source,
            "kind",
            format!("expected ClusterSpec, got {:?}", doc.kind),
        ));
    }
    if let Some(v) = &doc.api_version
        && v != trainyard_api::API_VERSION
    {
        return Err(SpecError::new(
            source,
            "apiVersion",
            format!("expected {:?}, got {v:?}", trainyard_api::API_VERSION),
        ));
    }
    let name = doc
        .metadata
        .as_ref()
        .and_then(|m| m.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or("cluster")
        .to_string();
    let mut nodes = Vec::new();
    let mut seen = BTreeMap::new();
    for (pi, pool) in doc.spec.node_pools.iter().enumerate() {
        let f = |field: &str| format!("spec.nodePools[{pi}].{field}");
        if pool.count == 0 {
            return Err(SpecError::new(
                source,
                &f("count"),
                "expected at least 1 node",
            ));
        }
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
                if g.count > 64 {
                    return Err(SpecError::new(
                        source,
                        &f("gpu.count"),
                        format!("expected at most 64 GPUs per node, got {}", g.count),
                    ));
                }
                (g.count, g.model.clone(), mem)
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
        for i in 0..pool.count {
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
                    .insert(trainyard_api::keys::NODE_GPU_PRODUCT.into(), model.clone());
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
    let field = |f: &str| format!("spec.topology.{f}");
    let range = |f: &str, v: u32, max: u32| -> Result<u32, SpecError> {
        if v == 0 {
            Err(SpecError::new(source, &field(f), "expected at least 1"))
        } else if v > max {
            Err(SpecError::new(
                source,
                &field(f),
                format!("expected at most {max}, got {v}"),
            ))
        } else {
            Ok(v)
        }
    };
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
            rails: range("railOptimized.rails", r.rails, MAX_RAILS)?,
            nodes_per_group: range("railOptimized.nodesPerGroup", r.nodes_per_group, u32::MAX)?,
            groups_per_block: range("railOptimized.groupsPerBlock", r.groups_per_block, u32::MAX)?,
            spines_per_block: range(
                "railOptimized.spinesPerBlock",
                r.spines_per_block,
                MAX_SPINES_PER_BLOCK,
            )?,
            gpus_per_node: max_gpus,
            numa_sockets: range(
                "railOptimized.numaSockets",
                r.numa_sockets,
                MAX_NUMA_SOCKETS,
            )?,
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
            nodes_per_leaf: range("leafSpine.nodesPerLeaf", l.nodes_per_leaf, u32::MAX)?,
            leaves_per_block: range("leafSpine.leavesPerBlock", l.leaves_per_block, u32::MAX)?,
            spines_per_block: range(
                "leafSpine.spinesPerBlock",
                l.spines_per_block,
                MAX_SPINES_PER_BLOCK,
            )?,
            gpus_per_node: max_gpus,
            numa_sockets: range("leafSpine.numaSockets", l.numa_sockets, MAX_NUMA_SOCKETS)?,
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
        let n = range("nvlinkDomainSize", n, u32::MAX)?;
        generate::add_nvlink_domains(&mut spec, &names, n);
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
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let d = |s: &str| parse_duration_ms(&serde_json::Value::String(s.into()));
        assert_eq!(parse_duration_ms(&serde_json::json!(90)), Ok(90_000));
        assert_eq!(d("15m"), Ok(900_000));
        assert_eq!(d("1.5h"), Ok(5_400_000));
        assert_eq!(d("250ms"), Ok(250));
        assert_eq!(d("2d"), Ok(172_800_000));
        assert!(d("-5s").unwrap_err().contains("non-negative"));
        assert!(d("5y").unwrap_err().contains("unknown duration unit"));
        assert!(parse_duration_ms(&serde_json::json!(-3)).is_err());
        assert!(
            d("100000000000d")
                .unwrap_err()
                .contains("at most 100 years")
        );
    }

    #[test]
    fn slowdown_is_exact_and_rounds_down() {
        let p = |v: serde_json::Value| Slowdown::parse(&v);
        assert_eq!(
            p(serde_json::json!(0.25)).unwrap().per_spine_crossing_ppm,
            250_000
        );
        assert_eq!(
            p(serde_json::json!("1.5")).unwrap().per_spine_crossing_ppm,
            1_500_000
        );
        assert_eq!(
            p(serde_json::json!(0.000001))
                .unwrap()
                .per_spine_crossing_ppm,
            1
        );
        assert_eq!(
            p(serde_json::json!(100)).unwrap().per_spine_crossing_ppm,
            100_000_000
        );
        assert!(p(serde_json::json!(100.5)).is_err());
        assert!(p(serde_json::json!("abc")).is_err());
        assert!(p(serde_json::json!(".")).is_err());
        assert!(p(serde_json::json!(true)).is_err());
        assert!(p(serde_json::json!("-0.5")).is_err());
        assert_eq!(
            p(serde_json::json!("2.5e-1"))
                .unwrap()
                .per_spine_crossing_ppm,
            250_000
        );
        assert_eq!(
            p(serde_json::json!("0.2500000"))
                .unwrap()
                .per_spine_crossing_ppm,
            250_000
        );
        assert_eq!(p(serde_json::json!(0)).unwrap(), Slowdown::default());
        assert!(
            p(serde_json::json!(1e300))
                .unwrap_err()
                .contains("at most 100")
        );
        assert!(
            p(serde_json::json!("1e-7"))
                .unwrap_err()
                .contains("six decimal")
        );
        let s = p(serde_json::json!(0.25)).unwrap();
        // 1 h, 3 of 4 hops cross: 3600000 × 250000 × 3 / 4000000 = 675000.
        assert_eq!(s.extra_ms(3_600_000, 3, 4), 675_000);
        // 7 ms × 0.25 × 1/3 = 0.583… ms → 0.
        assert_eq!(s.extra_ms(7, 1, 3), 0);
        // 1001 ms × 0.25 = 250.25 → 250.
        assert_eq!(s.extra_ms(1001, 1, 1), 250);
        assert_eq!(s.extra_ms(3_600_000, 0, 4), 0);
        assert_eq!(s.extra_ms(3_600_000, 0, 0), 0);
        assert_eq!(s.factor_ppm(1, 3), 83_333);
        assert_eq!(Slowdown::default().extra_ms(3_600_000, 4, 4), 0);
        // Bounded like every duration.
        let big = p(serde_json::json!(100)).unwrap();
        assert_eq!(big.extra_ms(MAX_DURATION_MS, 1, 1), MAX_DURATION_MS);
    }

    #[test]
    fn node_names() {
        assert_eq!(node_name("h100-{index:03}", 7).unwrap(), "h100-007");
        assert_eq!(node_name("n{index}", 12).unwrap(), "n12");
        assert!(node_name("fixed", 1).is_err());
    }

    #[test]
    fn cluster_spec_expands_pools() {
        let text = r#"
apiVersion: trainyard.io/v1alpha1
kind: ClusterSpec
metadata: {name: tiny}
spec:
  nodePools:
  - {name: gpu, count: 2, cpu: "96", memory: 1Ti, cpuSockets: 2, gpu: {count: 8, model: H100, memory: 80Gi}}
  - {name: cpu, count: 1, cpu: "64", memory: 256Gi, taints: [{key: k, value: v, effect: NoSchedule}]}
  faults:
  - {at: 1h, node: gpu-001, event: down}
"#;
        let c = parse_cluster(text, "c.yaml").unwrap();
        let names: Vec<_> = c.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["cpu-000", "gpu-000", "gpu-001"]);
        assert_eq!(c.nodes[1].allocatable.gpu, 8000);
        assert_eq!(c.nodes[1].gpus[3].memory_bytes, 80 << 30);
        assert_eq!(c.nodes[1].labels["nvidia.com/gpu.product"], "H100");
        assert_eq!(
            c.faults,
            vec![Fault {
                at: Timestamp(3_600_000),
                node: "gpu-001".into(),
                up: false
            }]
        );
    }

    #[test]
    fn cluster_spec_errors_name_file_and_field() {
        let bad = "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: g, count: 1, cpu: 12x, memory: 1Gi}\n";
        let e = parse_cluster(bad, "c.yaml").unwrap_err().to_string();
        assert!(
            e.starts_with("c.yaml: spec.nodePools[0].cpu: invalid quantity"),
            "{e}"
        );
        let bad = "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: g, count: 1, cpu: 1, memory: 1Gi, gpus: 8}\n";
        let e = parse_cluster(bad, "c.yaml").unwrap_err().to_string();
        assert!(
            e.contains("spec.nodePools[0]") && e.contains("unknown field `gpus`"),
            "{e}"
        );
        let bad = "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: g, count: 1, cpu: 1, memory: 1Gi}\n  faults: [{at: 1h, node: nope, event: down}]\n";
        let e = parse_cluster(bad, "c.yaml").unwrap_err().to_string();
        assert_eq!(
            e,
            "c.yaml: spec.faults[0].node: no node named \"nope\" in the node pools"
        );
    }
}
