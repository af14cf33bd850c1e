//! The ClusterSpec document: node pools, faults, the generated topology
//! and the slowdown model.

use super::*;

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
    #[serde(default)]
    dra: Option<DraDoc>,
}

/// `nodePools[i].dra`: the pool's GPUs (and NICs) published as DRA
/// ResourceSlices instead of through a device plugin.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DraDoc {
    #[serde(default)]
    gpus: Option<bool>,
    #[serde(default)]
    nics: Option<Bounded<0, { crate::dra::MAX_NICS_PER_NODE }>>,
    #[serde(default)]
    driver: Option<String>,
    #[serde(default)]
    nic_driver: Option<String>,
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
pub(super) fn node_name(pattern: &str, index: u32) -> Result<String, String> {
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
    // The first pool publishing GPUs / NICs through DRA, with its driver.
    let mut drivers: [Option<(usize, String)>; 2] = [None, None];
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
        let dra_labels = match &pool.dra {
            Some(d) => {
                let p = dra_pool(d, gpus, &f, source)?;
                for (slot, field, driver, used) in [
                    (0, "dra.driver", &p.gpu_driver, p.gpus),
                    (1, "dra.nicDriver", &p.nic_driver, p.nics > 0),
                ] {
                    if !used {
                        continue;
                    }
                    if let Some((prev, other)) = &drivers[1 - slot]
                        && other == driver
                    {
                        return Err(SpecError::new(
                            source,
                            &f(field),
                            format!(
                                "\"{driver}\" is the {} driver of nodePools[{prev}]; GPUs and NICs need drivers of their own",
                                if slot == 0 { "NIC" } else { "GPU" }
                            ),
                        ));
                    }
                    match &drivers[slot] {
                        Some((prev, other)) if other != driver => {
                            return Err(SpecError::new(
                                source,
                                &f(field),
                                format!(
                                    "\"{driver}\" differs from \"{other}\" of nodePools[{prev}]; all pools publish their devices of one kind with one driver (one DeviceClass)"
                                ),
                            ));
                        }
                        Some(_) => {}
                        None => drivers[slot] = Some((pi, driver.clone())),
                    }
                }
                p.labels()
            }
            None => BTreeMap::new(),
        };
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
            node.labels
                .extend(dra_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
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

/// Checks a pool's `dra` section: what it publishes and with which
/// drivers.
fn dra_pool(
    d: &DraDoc,
    gpus: u32,
    f: &dyn Fn(&str) -> String,
    source: &str,
) -> Result<crate::dra::DraPublish, SpecError> {
    let p = crate::dra::DraPublish {
        gpus: d.gpus.unwrap_or(true),
        nics: d.nics.map_or(0, |n| n.0),
        gpu_driver: d
            .driver
            .clone()
            .unwrap_or_else(|| crate::dra::DEFAULT_GPU_DRIVER.to_string()),
        nic_driver: d
            .nic_driver
            .clone()
            .unwrap_or_else(|| crate::dra::DEFAULT_NIC_DRIVER.to_string()),
    };
    if p.gpus && gpus == 0 {
        return Err(SpecError::new(
            source,
            &f("dra.gpus"),
            "the pool has no GPUs to publish (gpu.count is 0 or missing); set gpus: false to publish NICs only",
        ));
    }
    if !p.gpus && p.nics == 0 {
        return Err(SpecError::new(
            source,
            &f("dra"),
            "publishes no devices; set gpus: true or nics above 0",
        ));
    }
    for (field, driver) in [
        ("dra.driver", &p.gpu_driver),
        ("dra.nicDriver", &p.nic_driver),
    ] {
        if let Err(e) = driver_name(driver) {
            return Err(SpecError::new(source, &f(field), e));
        }
    }
    if p.gpus && p.nics > 0 && p.gpu_driver == p.nic_driver {
        return Err(SpecError::new(
            source,
            &f("dra.nicDriver"),
            format!(
                "\"{}\" is also the GPU driver; GPUs and NICs need drivers of their own",
                p.nic_driver
            ),
        ));
    }
    Ok(p)
}

/// A DRA driver's name: a DNS subdomain of at most 63 characters
/// (`resource.k8s.io/v1`), lowercase letters, digits, `-` and `.`.
fn driver_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected a driver name such as gpu.nvidia.com (a DNS subdomain: lowercase letters, digits, '-' and '.', at most 63 characters), found \"{name}\""
        ))
    }
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
    let inputs: Vec<NodeInput> = nodes.iter().map(Node::topology_input).collect();
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
