//! What a cycle reads of the DRA part of the snapshot: the claims and
//! selector sets (`DraWorld`), each node's devices and masks (`DraNode`),
//! and the DRA state every node starts the cycle with (`attach`).

use super::*;

/// What a cycle reads of the DRA part of the snapshot, shared by nodes.
#[derive(Debug, PartialEq, Eq)]
pub struct DraWorld {
    pub claims: BTreeMap<String, Arc<Claim>>,
    /// Per selector set: why no device can be allocated for it (an
    /// evaluation error, an unknown class), if so.
    pub selector_problem: Vec<Option<String>>,
    /// Per selector set: its class (for messages).
    pub selector_class: Vec<String>,
    pub selector_text: Vec<Vec<String>>,
    /// The claims of DRA-backed extended resources (KEP-5004), by
    /// (selector set, device count): one request `request-0` of that many
    /// devices, shared by every pod asking as much.
    pub extended: BTreeMap<(u32, u64), Arc<ClaimSpec>>,
}

/// The request name of a pod's extended-resource claim.
pub const EXTENDED_REQUEST: &str = "request-0";

impl DraWorld {
    /// The claim spec of `count` devices of the selector set `selector`.
    pub fn extended_spec(selector: u32, count: u64, class: &str) -> ClaimSpec {
        ClaimSpec {
            requests: vec![trainyard_model::dra::DeviceRequest {
                name: EXTENDED_REQUEST.to_string(),
                alternatives: vec![SubRequest {
                    name: EXTENDED_REQUEST.to_string(),
                    class: class.to_string(),
                    selector,
                    mode: AllocationMode::ExactCount(u32::try_from(count).unwrap_or(u32::MAX)),
                    admin_access: false,
                    tolerations: Vec::new(),
                    capacity: BTreeMap::new(),
                }],
            }],
            constraints: Vec::new(),
        }
    }

    pub fn new(dra: &Dra) -> Self {
        let selector_problem = dra
            .selectors
            .iter()
            .enumerate()
            .map(|(i, s)| match dra.matches.get(i) {
                None => Some(format!(
                    "the selectors of class {} were not evaluated",
                    s.class
                )),
                Some(m) if m.unknown_class => {
                    Some(format!("device class {} does not exist", s.class))
                }
                Some(m) => m.error.clone(),
            })
            .collect();
        DraWorld {
            claims: dra.claims.clone(),
            selector_problem,
            selector_class: dra.selectors.iter().map(|s| s.class.clone()).collect(),
            selector_text: dra
                .selectors
                .iter()
                .map(|s| s.expressions.clone())
                .collect(),
            extended: BTreeMap::new(),
        }
    }
}

/// One node's devices as the cycle reads them.
#[derive(Debug, PartialEq, Eq)]
pub struct DraNode {
    pub devices: Arc<NodeDevices>,
    /// Per selector set: the devices it accepts here.
    pub masks: Vec<DeviceMask>,
    /// Per device: how many selector sets accept it. The search tries
    /// the devices fewest requests want first, leaving the sought-after
    /// ones to those that need them.
    pub demand: Vec<u32>,
    /// Per device: (counter slot, amount) it consumes while allocated.
    pub draws: Vec<Vec<(usize, u64)>>,
    /// Per counter slot: its set's total.
    pub totals: Vec<u64>,
    /// Extended resources but GPUs the node's devices serve (KEP-5004):
    /// resource and the class's selector set.
    pub backed: Vec<(trainyard_model::ResourceName, u32)>,
    /// When the node's devices serve `nvidia.com/gpu`: the devices of
    /// GPU slot `k` (`Node::gpus`, made by `Dra::with_extended`), so whole
    /// GPUs are placed as device-plugin GPUs are (rails, NVLink,
    /// fragmentation) and the claim gets the devices of the slots chosen.
    pub gpu_slots: Vec<u32>,
    /// No device draws counters, is shared or tainted: a claim of one
    /// plain request is then a count of free matching devices.
    pub simple: bool,
}

impl DraNode {
    pub fn new(name: &str, devices: Arc<NodeDevices>, dra: &Dra) -> Self {
        let n = devices.devices.len();
        let masks: Vec<DeviceMask> = dra
            .matches
            .iter()
            .map(|m| {
                m.by_node
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| DeviceMask::with_len(n))
            })
            .collect();
        let demand = (0..n)
            .map(|d| masks.iter().filter(|m| m.contains(d)).count() as u32)
            .collect();
        let mut slots: BTreeMap<(usize, &str), usize> = BTreeMap::new();
        let mut totals = Vec::new();
        for (s, set) in devices.counter_sets.iter().enumerate() {
            for (c, v) in &set.counters {
                slots.insert((s, c.as_str()), totals.len());
                totals.push(*v);
            }
        }
        let draws = devices
            .devices
            .iter()
            .map(|d| {
                let mut out = Vec::new();
                for u in &d.consumes {
                    let Some(s) = devices.counter_set(&d.driver, &d.pool, &u.set) else {
                        // A counter set the pool does not publish: the
                        // device can never be allocated (slot past the end).
                        out.push((usize::MAX, 1));
                        continue;
                    };
                    for (c, v) in &u.counters {
                        out.push((
                            slots.get(&(s, c.as_str())).copied().unwrap_or(usize::MAX),
                            *v,
                        ));
                    }
                }
                out
            })
            .collect();
        let mut backed = Vec::new();
        let mut gpu_slots = Vec::new();
        for b in dra.backed.get(name).into_iter().flatten() {
            let resource = trainyard_model::ResourceName::parse(&b.resource);
            if resource == trainyard_model::ResourceName::Gpu {
                if let Some(mask) = masks.get(b.selector as usize) {
                    gpu_slots = mask.iter().map(|d| d as u32).collect();
                }
            } else {
                backed.push((resource, b.selector));
            }
        }
        let simple = devices
            .devices
            .iter()
            .all(|d| d.consumes.is_empty() && d.taints.is_empty() && !d.multi);
        DraNode {
            devices,
            masks,
            demand,
            draws,
            totals,
            backed,
            gpu_slots,
            simple,
        }
    }
}

/// Gives every node its DRA state when the snapshot has DRA objects,
/// with the devices of claims allocated before this cycle in use (held
/// by the pods outside the snapshot that they are reserved for; bound
/// tasks add themselves as they are accounted).
pub fn attach(
    snapshot: &trainyard_model::Snapshot,
    nodes: &[&trainyard_model::Node],
    states: &mut [crate::state::NodeState],
) {
    let dra = &snapshot.dra;
    if dra.is_empty() {
        return;
    }
    let mut world = DraWorld::new(dra);
    // The extended-resource claims pods may need: every (set, amount) of a
    // backed resource some pod asks.
    let mut sets: BTreeMap<&str, Vec<(u32, &str)>> = BTreeMap::new();
    for list in dra.backed.values() {
        for b in list {
            let e = sets.entry(b.resource.as_str()).or_default();
            if !e.iter().any(|(s, _)| *s == b.selector) {
                e.push((b.selector, b.class.as_str()));
            }
        }
    }
    for job in &snapshot.jobs {
        for t in job.tasks.iter() {
            for (resource, list) in &sets {
                let name = trainyard_model::ResourceName::parse(resource);
                let amount = extended_amount(&t.requests, &name);
                if amount == 0 {
                    continue;
                }
                for (sel, class) in list {
                    world
                        .extended
                        .entry((*sel, amount))
                        .or_insert_with(|| Arc::new(DraWorld::extended_spec(*sel, amount, class)));
                }
            }
        }
    }
    let world = Arc::new(world);
    for (node, st) in nodes.iter().zip(states.iter_mut()) {
        let devices = dra.nodes.get(&node.name).cloned().unwrap_or_default();
        let dn = Arc::new(DraNode::new(&node.name, devices, dra));
        st.dra = Some(Box::new(DraState::new(dn, world.clone())));
    }
    if dra.claims.values().all(|c| c.allocation.is_none()) {
        return;
    }
    let index: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let bound: std::collections::BTreeSet<&str> = snapshot
        .jobs
        .iter()
        .flat_map(|j| j.tasks.iter())
        .filter(|t| !t.is_pending())
        .map(|t| t.name.as_str())
        .collect();
    for (key, claim) in &dra.claims {
        let Some(a) = &claim.allocation else { continue };
        let Some(n) = a.node.as_deref().and_then(|n| index.get(n)) else {
            continue;
        };
        let outside = claim
            .reserved_for
            .iter()
            .filter(|p| !bound.contains(p.as_str()))
            .count() as u32;
        if let Some(d) = states[*n].dra.as_mut() {
            d.account_existing(key, &a.devices, outside);
        }
    }
}

/// The GPU slots of a bound pod's claims on a node whose DRA devices are
/// its GPUs: the slots of the devices allocated to its extended-resource
/// claim (KEP-5004) or, for GPUs asked through its own claims, to those,
/// so the pod is accounted on the devices it holds.
pub fn claimed_slots(
    task: &trainyard_model::Task,
    state: &crate::state::NodeState,
) -> Option<Vec<u32>> {
    let d = state.dra.as_ref()?;
    if !d.backs_gpu() {
        return None;
    }
    let own = task.constraints.claimed_gpus > 0;
    let keys = task
        .constraints
        .claims
        .iter()
        .filter_map(|need| match need {
            ClaimNeed::Extended(k) => Some(k.as_str()),
            ClaimNeed::Shared(k) if own => Some(k.as_str()),
            _ => None,
        });
    let mut slots: Vec<u32> = Vec::new();
    for key in keys {
        let Some(a) = d.world.claims.get(key).and_then(|c| c.allocation.as_ref()) else {
            continue;
        };
        slots.extend(a.devices.iter().filter_map(|r| {
            let dev = d.node.devices.position(&r.driver, &r.pool, &r.device)?;
            d.node
                .gpu_slots
                .iter()
                .position(|&s| s as usize == dev)
                .map(|k| k as u32)
        }));
    }
    slots.sort_unstable();
    slots.dedup();
    (!slots.is_empty()).then_some(slots)
}

/// Devices a request of `resource` asks: whole GPUs for `nvidia.com/gpu`
/// (a share asks none: DRA-backed GPUs are allocated whole), the count
/// for others.
pub fn extended_amount(
    req: &trainyard_model::Resources,
    resource: &trainyard_model::ResourceName,
) -> u64 {
    let v = req.get(resource);
    if *resource == trainyard_model::ResourceName::Gpu {
        if v.is_multiple_of(trainyard_model::resources::MILLI_PER_GPU) {
            v / trainyard_model::resources::MILLI_PER_GPU
        } else {
            0
        }
    } else {
        v
    }
}
