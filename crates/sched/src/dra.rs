//! DRA devices of one node during a cycle: what is free, and the search
//! that allocates a pod's claims there, inside the same transaction as
//! the pod's CPU, memory and GPUs (a [`DraState`] lives in its
//! [`crate::state::NodeState`] and is saved and rolled back with it).
//!
//! Selectors were evaluated at the edge: a request's devices are a
//! [`DeviceMask`] per node. What is decided here is which of them, given
//! what is in use, counters (partitionable devices), consumable capacity,
//! taints, `All` mode, admin access and the claim's constraints. The
//! search backtracks over requests and devices within a bounded number
//! of steps, and when a pod does not fit beside the allocations this
//! cycle made on the node, it tries again with all of them allocated
//! together: an earlier pod's device choice is revisited, so a gang that
//! fits is placed (kubernetes#138765).

use std::collections::BTreeMap;
use std::sync::Arc;

use trainyard_model::dra::{
    AllocatedDevice, AllocationMode, Claim, ClaimNeed, ClaimSpec, DeviceMask, Dra, NodeDevices,
    SubRequest, taint_blocks,
};

/// Most steps one allocation search may take: a pod whose claims need
/// more is treated as not fitting the node (and said so).
pub const SEARCH_STEPS: u32 = 20_000;

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
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (node, st)) in nodes.iter().zip(states.iter_mut()).enumerate() {
        let devices = dra.nodes.get(&node.name).cloned().unwrap_or_default();
        let dn = Arc::new(DraNode::new(&node.name, devices, dra));
        st.dra = Some(Box::new(DraState::new(dn, world.clone())));
        index.insert(node.name.as_str(), i);
    }
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

/// The GPU slots of a bound pod's extended-resource claim (KEP-5004) on
/// a node whose DRA devices are its GPUs: the slots of the claim's
/// devices, so the pod is accounted on the devices it holds.
pub fn claimed_slots(
    task: &trainyard_model::Task,
    state: &crate::state::NodeState,
) -> Option<Vec<u32>> {
    let d = state.dra.as_ref()?;
    if !d.backs_gpu() {
        return None;
    }
    let key = task.constraints.claims.iter().find_map(|c| match c {
        ClaimNeed::Extended(k) => Some(k),
        _ => None,
    })?;
    let a = d.world.claims.get(key)?.allocation.as_ref()?;
    let slots: Vec<u32> = a
        .devices
        .iter()
        .filter_map(|r| {
            let dev = d.node.devices.position(&r.driver, &r.pool, &r.device)?;
            d.node
                .gpu_slots
                .iter()
                .position(|&s| s as usize == dev)
                .map(|k| k as u32)
        })
        .collect();
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

/// A device chosen for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pick {
    pub device: u32,
    /// The request, `req/sub` for a `firstAvailable` choice (shared: a
    /// node's state is copied on every change, picks with it).
    pub request: Arc<str>,
    pub admin: bool,
    /// Capacity consumed on a device others may share.
    pub consumed: Vec<(String, u64)>,
}

/// Whose allocation a [`Fresh`] entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A pod's own claim, by value: pods of one spec on one node are
    /// interchangeable, so the output gives each such pod one of them.
    Own(Arc<ClaimSpec>),
    /// A claim by key (shared by pods, or a PodGroup's).
    Shared(String),
}

/// An allocation this cycle made on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fresh {
    pub owner: Owner,
    /// Shared: the node's state, and this with it, is copied on every
    /// change of the node.
    pub picks: Arc<[Pick]>,
}

/// What is in use on one node's devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraState {
    pub node: Arc<DraNode>,
    pub world: Arc<DraWorld>,
    /// What is in use of the devices.
    avail: Avail,
    /// Allocations made this cycle, in order.
    pub fresh: smallvec::SmallVec<[Fresh; 8]>,
    /// Claims allocated on this node and the pods here holding them.
    holders: BTreeMap<String, u32>,
}

/// A set of devices, one bit each, inline up to 128 devices (a node's
/// state is copied on every change).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Bits(smallvec::SmallVec<[u64; 2]>);

impl Bits {
    fn with_len(n: usize) -> Self {
        Bits(smallvec::smallvec![0; n.div_ceil(64)])
    }
    fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    fn insert(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }
    fn remove(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }
}

/// What is in use of a node's devices: the part of [`DraState`] that a
/// search changes as it tries devices (and copies, cheaply).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Avail {
    /// Devices allocated (bit per device), but by admin access.
    used: Bits,
    /// Capacity consumed on shared devices: (device, capacity) → amount.
    consumed: BTreeMap<(u32, String), u64>,
    /// Per counter slot: what is left.
    left: Vec<u64>,
}

impl Avail {
    fn counters_allow(&self, node: &DraNode, d: usize) -> bool {
        node.draws[d]
            .iter()
            .all(|&(slot, v)| self.left.get(slot).is_some_and(|l| *l >= v))
    }

    fn apply(&mut self, node: &DraNode, p: &Pick) {
        let d = p.device as usize;
        if p.admin {
            return;
        }
        if node.devices.devices[d].multi {
            for (cap, v) in &p.consumed {
                *self.consumed.entry((p.device, cap.clone())).or_default() += v;
            }
        } else {
            self.used.insert(d);
        }
        for &(slot, v) in &node.draws[d] {
            if let Some(l) = self.left.get_mut(slot) {
                *l = l.saturating_sub(v);
            }
        }
    }

    fn unapply(&mut self, node: &DraNode, p: &Pick) {
        let d = p.device as usize;
        if p.admin {
            return;
        }
        if node.devices.devices[d].multi {
            for (cap, v) in &p.consumed {
                if let Some(c) = self.consumed.get_mut(&(p.device, cap.clone())) {
                    *c = c.saturating_sub(*v);
                }
            }
        } else {
            self.used.remove(d);
        }
        for &(slot, v) in &node.draws[d] {
            if let (Some(l), Some(t)) = (self.left.get_mut(slot), node.totals.get(slot)) {
                *l = (*l + v).min(*t);
            }
        }
    }
}

/// Why a pod's claims cannot be allocated on a node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Miss {
    /// The node publishes no devices.
    NoDevices,
    /// A claim is allocated on another node.
    Elsewhere(String),
    /// Not enough devices for a request of a claim: (request name,
    /// selector set, devices wanted; 0 for `All`).
    Request(String, u32, u32),
    /// A claim the pod names is not in the snapshot.
    UnknownClaim(String),
    /// The search gave up.
    TooManySteps,
}

impl DraState {
    pub fn new(node: Arc<DraNode>, world: Arc<DraWorld>) -> Self {
        let n = node.devices.devices.len();
        DraState {
            avail: Avail {
                used: Bits::with_len(n),
                consumed: BTreeMap::new(),
                left: node.totals.clone(),
            },
            fresh: smallvec::SmallVec::new(),
            holders: BTreeMap::new(),
            node,
            world,
        }
    }

    /// Marks an allocation that exists already (a claim's
    /// `status.allocation` on this node), held by `holders` pods.
    pub fn account_existing(&mut self, key: &str, devices: &[AllocatedDevice], holders: u32) {
        let picks: Vec<Pick> = devices.iter().filter_map(|a| self.pick_of(a)).collect();
        for p in &picks {
            self.apply(p);
        }
        self.holders.insert(key.to_string(), holders);
    }

    /// An allocation result as a pick of this node's device (capacity
    /// names qualified with the device's driver when written without a
    /// domain); `None` for a device the node does not publish.
    fn pick_of(&self, a: &AllocatedDevice) -> Option<Pick> {
        let d = self.node.devices.position(&a.driver, &a.pool, &a.device)?;
        let consumed = a
            .consumed
            .iter()
            .map(|(k, v)| {
                let k = if k.contains('/') {
                    k.clone()
                } else {
                    format!("{}/{k}", a.driver)
                };
                (k, *v)
            })
            .collect();
        Some(Pick {
            device: d as u32,
            request: Arc::clone(&a.request),
            admin: a.admin_access,
            consumed,
        })
    }

    /// Whether claim `key` is allocated on this node (before or in this
    /// cycle).
    pub fn holds(&self, key: &str) -> bool {
        self.holders.contains_key(key)
    }

    /// Makes the allocations so far part of what is in use: bound pods'
    /// claims are not this cycle's decisions.
    pub fn settle(&mut self) {
        self.fresh.clear();
    }

    /// Whether the node's devices serve `nvidia.com/gpu` (KEP-5004).
    pub fn backs_gpu(&self) -> bool {
        !self.node.gpu_slots.is_empty()
    }

    /// Marks the devices of GPU slots in use (a pod placed on them, or a
    /// reservation withholding them) or free again.
    pub fn mark_slots(&mut self, slots: &[usize], used: bool) {
        for &k in slots {
            if let Some(&d) = self.node.gpu_slots.get(k) {
                if used {
                    self.avail.used.insert(d as usize);
                } else {
                    self.avail.used.remove(d as usize);
                }
            }
        }
    }

    /// Per GPU slot, whether its device is in use (empty on other nodes).
    pub fn busy_slots(&self) -> smallvec::SmallVec<[bool; 8]> {
        (0..self.node.gpu_slots.len())
            .map(|k| self.slot_in_use(k))
            .collect()
    }

    /// Whether the device of GPU slot `k` is in use (by a pod on the slot
    /// or by a claim).
    pub fn slot_in_use(&self, k: usize) -> bool {
        self.node
            .gpu_slots
            .get(k)
            .is_some_and(|&d| self.avail.used.contains(d as usize))
    }

    /// The pod's claims here: its own, and the claims of the extended
    /// resources it asks that the node's devices serve.
    pub fn needs<'p>(
        &self,
        req: &trainyard_model::Resources,
        claims: &'p [ClaimNeed],
    ) -> std::borrow::Cow<'p, [ClaimNeed]> {
        if self.node.backed.is_empty() || claims.iter().any(|c| matches!(c, ClaimNeed::Extended(_)))
        {
            return std::borrow::Cow::Borrowed(claims);
        }
        let mut out: Vec<ClaimNeed> = claims.to_vec();
        for (resource, sel) in &self.node.backed {
            let amount = extended_amount(req, resource);
            if amount == 0 {
                continue;
            }
            let spec = self
                .world
                .extended
                .get(&(*sel, amount))
                .cloned()
                .unwrap_or_else(|| {
                    let class = self
                        .world
                        .selector_class
                        .get(*sel as usize)
                        .map_or("", String::as_str);
                    Arc::new(DraWorld::extended_spec(*sel, amount, class))
                });
            out.push(ClaimNeed::Own(spec));
        }
        std::borrow::Cow::Owned(out)
    }

    /// Whether the claims fit now (the hot path).
    pub fn fits(&self, claims: &[ClaimNeed]) -> bool {
        if let Some((sel, k)) = self.plain(claims) {
            // The hot path: free matching devices counted. When too few,
            // only revisiting this cycle's allocations here could help.
            if self.free_in(sel) >= k {
                return true;
            }
            if self.fresh.is_empty() {
                return false;
            }
        }
        self.plan(claims).is_ok()
    }

    /// Whether the pod with request `req` and `claims` fits: [`fits`]
    /// over [`needs`], without building the list in the common cases.
    pub fn fits_pod(&self, req: &trainyard_model::Resources, claims: &[ClaimNeed]) -> bool {
        if claims.is_empty() {
            match self.node.backed.as_slice() {
                [] => return true,
                [(resource, sel)] => {
                    let amount = extended_amount(req, resource);
                    if amount == 0 {
                        return true;
                    }
                    if let Some(spec) = self.world.extended.get(&(*sel, amount)) {
                        return self.fits(std::slice::from_ref(&ClaimNeed::Own(Arc::clone(spec))));
                    }
                }
                _ => {}
            }
        }
        let needs = self.needs(req, claims);
        needs.is_empty() || self.fits(&needs)
    }

    /// `claims` as (selector set, count) when they are one claim of one
    /// plain request on a node of plain devices (the hot path).
    fn plain(&self, claims: &[ClaimNeed]) -> Option<(u32, u32)> {
        let [ClaimNeed::Own(spec)] = claims else {
            return None;
        };
        if !self.node.simple || !spec.constraints.is_empty() {
            return None;
        }
        let [r] = spec.requests.as_slice() else {
            return None;
        };
        let [a] = r.alternatives.as_slice() else {
            return None;
        };
        if a.admin_access || !a.capacity.is_empty() {
            return None;
        }
        if self
            .world
            .selector_problem
            .get(a.selector as usize)?
            .is_some()
        {
            return None;
        }
        match a.mode {
            AllocationMode::ExactCount(k) => Some((a.selector, k)),
            AllocationMode::All => None,
        }
    }

    /// Free devices of selector set `sel` here.
    fn free_in(&self, sel: u32) -> u32 {
        let Some(mask) = self.node.masks.get(sel as usize) else {
            return 0;
        };
        mask.0
            .iter()
            .zip(self.avail.used.0.iter().chain(std::iter::repeat(&0u64)))
            .map(|(m, u)| (m & !u).count_ones())
            .sum()
    }

    /// The reason the claims do not fit, if they do not.
    pub fn miss(&self, claims: &[ClaimNeed]) -> Option<Miss> {
        self.plan(claims).err()
    }

    /// Allocates the claims (call after [`fits`](Self::fits)).
    pub fn take(&mut self, claims: &[ClaimNeed]) {
        if let (Some((sel, k)), [ClaimNeed::Own(spec)]) = (self.plain(claims), claims)
            && self.free_in(sel) >= k
            && let Some(mask) = self.node.masks.get(sel as usize)
        {
            // The hot path: the free matching devices fewest requests want.
            let mut free: Vec<usize> = mask
                .iter()
                .filter(|&d| !self.avail.used.contains(d))
                .collect();
            free.sort_by_key(|&d| (self.node.demand[d], d));
            let name: Arc<str> = Arc::from(spec.requests[0].alternatives[0].name.as_str());
            let picks: Vec<Pick> = free
                .into_iter()
                .take(k as usize)
                .map(|d| Pick {
                    device: d as u32,
                    request: Arc::clone(&name),
                    admin: false,
                    consumed: Vec::new(),
                })
                .collect();
            for p in &picks {
                self.apply(p);
            }
            self.fresh.push(Fresh {
                owner: Owner::Own(Arc::clone(spec)),
                picks: picks.into(),
            });
            return;
        }
        let Ok(plan) = self.plan(claims) else {
            return;
        };
        for key in &plan.joins {
            *self.holders.entry(key.clone()).or_default() += 1;
        }
        if plan.joint {
            // Earlier allocations of the cycle chosen again, together.
            for f in std::mem::take(&mut self.fresh) {
                for p in f.picks.iter() {
                    self.unapply(p);
                }
            }
        }
        for (owner, picks) in plan.allocations {
            for p in &picks {
                self.apply(p);
            }
            if let Owner::Shared(key) = &owner {
                self.holders.entry(key.clone()).or_insert(1);
            }
            self.fresh.push(Fresh {
                owner,
                picks: picks.into(),
            });
        }
    }

    /// Gives back what [`take`](Self::take) took for a pod with `claims`
    /// (or what a pod bound before holds): its own allocations, and a
    /// shared claim's once its last holder here is gone.
    pub fn give(&mut self, claims: &[ClaimNeed]) {
        for need in claims {
            match need {
                ClaimNeed::Own(spec) => {
                    let at = self
                        .fresh
                        .iter()
                        .rposition(|f| matches!(&f.owner, Owner::Own(s) if s == spec));
                    if let Some(at) = at {
                        let f = self.fresh.remove(at);
                        for p in f.picks.iter() {
                            self.unapply(p);
                        }
                    }
                }
                ClaimNeed::Shared(key) | ClaimNeed::Extended(key) => {
                    let Some(h) = self.holders.get_mut(key) else {
                        continue;
                    };
                    *h = h.saturating_sub(1);
                    if *h > 0 {
                        continue;
                    }
                    self.holders.remove(key);
                    if let Some(at) = self
                        .fresh
                        .iter()
                        .position(|f| matches!(&f.owner, Owner::Shared(k) if k == key))
                    {
                        let f = self.fresh.remove(at);
                        for p in f.picks.iter() {
                            self.unapply(p);
                        }
                    } else if let Some(a) = self
                        .world
                        .claims
                        .get(key)
                        .and_then(|c| c.allocation.clone())
                    {
                        // Allocated before this cycle: its devices are
                        // free once the claim is released.
                        for a in &a.devices {
                            if let Some(p) = self.pick_of(a) {
                                self.unapply(&p);
                            }
                        }
                    }
                }
            }
        }
    }

    /// How many pods with `claims` fit one after another (at most `max`).
    pub fn copies(&self, claims: &[ClaimNeed], max: u32) -> u32 {
        if claims.is_empty() {
            return max;
        }
        if !self.fits(claims) {
            return 0;
        }
        let mut s = self.clone();
        s.take(claims);
        if !claims.iter().any(|c| matches!(c, ClaimNeed::Own(_))) {
            // Shared claims only: each further pod joins them.
            return max;
        }
        let mut n = 1;
        while n < max && s.fits(claims) {
            s.take(claims);
            n += 1;
        }
        n
    }

    /// Free devices a request's selector set accepts here (for messages).
    pub fn free_matching(&self, selector: u32) -> (u32, u32) {
        let Some(mask) = self.node.masks.get(selector as usize) else {
            return (0, 0);
        };
        let total = mask.count();
        let free = mask
            .iter()
            .filter(|&d| !self.avail.used.contains(d) && self.counters_allow(d))
            .count() as u32;
        (free, total)
    }

    fn counters_allow(&self, d: usize) -> bool {
        self.avail.counters_allow(&self.node, d)
    }

    fn apply(&mut self, p: &Pick) {
        self.avail.apply(&self.node, p);
    }

    fn unapply(&mut self, p: &Pick) {
        self.avail.unapply(&self.node, p);
    }

    /// The allocations the claims need here, or why there are none.
    fn plan(&self, claims: &[ClaimNeed]) -> Result<Plan, Miss> {
        let mut needs: Vec<(Owner, &ClaimSpec)> = Vec::new();
        let mut joins = Vec::new();
        for need in claims {
            match need {
                ClaimNeed::Own(spec) => needs.push((Owner::Own(spec.clone()), spec)),
                ClaimNeed::Shared(key) | ClaimNeed::Extended(key) => {
                    if self.holders.contains_key(key) {
                        joins.push(key.clone());
                        continue;
                    }
                    let Some(claim) = self.world.claims.get(key) else {
                        return Err(Miss::UnknownClaim(key.clone()));
                    };
                    match &claim.allocation {
                        // Allocated on another node (here it would be among
                        // the holders); usable from any node otherwise.
                        Some(a) => {
                            if let Some(n) = &a.node {
                                return Err(Miss::Elsewhere(format!("{key} on {n}")));
                            }
                        }
                        None => needs.push((Owner::Shared(key.clone()), &claim.spec)),
                    }
                }
            }
        }
        if needs.is_empty() {
            return Ok(Plan {
                allocations: Vec::new(),
                joins,
                joint: false,
            });
        }
        let specs: Vec<&ClaimSpec> = needs.iter().map(|(_, s)| *s).collect();
        let mut search = Search::new(self, &specs);
        let first = search.run();
        let picks = match first {
            Ok(p) => p,
            Err(miss) if self.fresh.is_empty() || miss == Miss::TooManySteps => return Err(miss),
            Err(miss) => {
                // Revisit: this cycle's allocations here and the new ones,
                // chosen together.
                let mut base = self.clone();
                for f in &self.fresh {
                    for p in f.picks.iter() {
                        base.unapply(p);
                    }
                }
                let mut all: Vec<&ClaimSpec> = Vec::new();
                let mut owners: Vec<Owner> = Vec::new();
                for f in &self.fresh {
                    let spec: &ClaimSpec = match &f.owner {
                        Owner::Own(s) => s,
                        Owner::Shared(k) => match self.world.claims.get(k) {
                            Some(c) => &c.spec,
                            None => return Err(miss),
                        },
                    };
                    all.push(spec);
                    owners.push(f.owner.clone());
                }
                all.extend(specs.iter().copied());
                owners.extend(needs.iter().map(|(o, _)| o.clone()));
                let Ok(picks) = Search::new(&base, &all).run() else {
                    return Err(miss);
                };
                return Ok(Plan {
                    allocations: owners.into_iter().zip(picks).collect(),
                    joins,
                    joint: true,
                });
            }
        };
        Ok(Plan {
            allocations: needs.into_iter().map(|(o, _)| o).zip(picks).collect(),
            joins,
            joint: false,
        })
    }
}

/// The allocations a pod's claims need on a node.
struct Plan {
    allocations: Vec<(Owner, Vec<Pick>)>,
    /// Shared claims already here that the pod joins.
    joins: Vec<String>,
    /// Whether `allocations` replace every fresh allocation of the node.
    joint: bool,
}

/// One backtracking search over the requests of some claims.
struct Search<'a> {
    st: &'a DraState,
    avail: Avail,
    specs: &'a [&'a ClaimSpec],
    /// Per claim: the picks so far.
    picks: Vec<Vec<Pick>>,
    steps: u32,
    /// The deepest request that failed (for the reason).
    miss: Option<Miss>,
}

impl<'a> Search<'a> {
    fn new(st: &'a DraState, specs: &'a [&'a ClaimSpec]) -> Self {
        Search {
            st,
            avail: st.avail.clone(),
            specs,
            picks: vec![Vec::new(); specs.len()],
            steps: 0,
            miss: None,
        }
    }

    fn run(&mut self) -> Result<Vec<Vec<Pick>>, Miss> {
        if self.st.node.devices.devices.is_empty() {
            return Err(Miss::NoDevices);
        }
        if self.request(0, 0) {
            Ok(std::mem::take(&mut self.picks))
        } else if self.steps >= SEARCH_STEPS {
            Err(Miss::TooManySteps)
        } else {
            Err(self.miss.clone().unwrap_or(Miss::NoDevices))
        }
    }

    fn request(&mut self, c: usize, r: usize) -> bool {
        let Some(spec) = self.specs.get(c) else {
            return true;
        };
        let Some(req) = spec.requests.get(r) else {
            return self.request(c + 1, 0);
        };
        for alt in &req.alternatives {
            if let Some(p) = self.st.world.selector_problem.get(alt.selector as usize)
                && p.is_some()
            {
                self.note(&req.name, alt);
                continue;
            }
            let cands = self.candidates(c, &req.name, alt);
            let ok = match alt.mode {
                AllocationMode::ExactCount(k) => {
                    self.choose(c, r, &req.name, alt, &cands, 0, k as usize)
                }
                AllocationMode::All => self.take_all(c, r, &req.name, alt, &cands),
            };
            if ok {
                return true;
            }
            self.note(&req.name, alt);
            if self.steps >= SEARCH_STEPS {
                return false;
            }
        }
        false
    }

    fn note(&mut self, request: &str, alt: &SubRequest) {
        if self.miss.is_none() {
            let wanted = match alt.mode {
                AllocationMode::ExactCount(k) => k,
                AllocationMode::All => 0,
            };
            self.miss = Some(Miss::Request(request.to_string(), alt.selector, wanted));
        }
    }

    /// Devices the alternative may take now, fewest-wanted first.
    fn candidates(&self, c: usize, request: &str, alt: &SubRequest) -> Vec<usize> {
        let node = &self.st.node;
        let Some(mask) = node.masks.get(alt.selector as usize) else {
            return Vec::new();
        };
        let mut out: Vec<usize> = mask
            .iter()
            .filter(|&d| self.available(c, d, request, alt).is_some())
            .collect();
        out.sort_by_key(|&d| (node.demand[d], d));
        out
    }

    /// The capacity the alternative would consume on device `d`, if it
    /// may take it now.
    fn available(
        &self,
        c: usize,
        d: usize,
        request: &str,
        alt: &SubRequest,
    ) -> Option<Vec<(String, u64)>> {
        let dev = &self.st.node.devices.devices[d];
        if dev.taints.iter().any(|t| taint_blocks(t, &alt.tolerations)) {
            return None;
        }
        // A device serves one request of one claim once.
        if self.picks[c].iter().any(|p| p.device as usize == d) {
            return None;
        }
        let _ = request;
        if alt.admin_access {
            return Some(Vec::new());
        }
        if !self.avail.counters_allow(&self.st.node, d) {
            return None;
        }
        if dev.multi {
            let mut consumed = Vec::new();
            for (name, cap) in &dev.capacity {
                let asked = asked_capacity(alt, &dev.driver, name);
                let charge = match &cap.policy {
                    Some(p) => p.charge(asked)?,
                    None => asked.unwrap_or(cap.value),
                };
                let used = self
                    .avail
                    .consumed
                    .get(&(d as u32, name.clone()))
                    .copied()
                    .unwrap_or(0);
                if used.checked_add(charge)? > cap.value {
                    return None;
                }
                consumed.push((name.clone(), charge));
            }
            // A capacity asked that the device does not have.
            if alt
                .capacity
                .keys()
                .any(|k| device_capacity(dev, k).is_none())
            {
                return None;
            }
            return Some(consumed);
        }
        if self.avail.used.contains(d) {
            return None;
        }
        for (name, asked) in &alt.capacity {
            if device_capacity(dev, name).is_none_or(|cap| cap.value < *asked) {
                return None;
            }
        }
        Some(Vec::new())
    }

    /// Whether device `d` keeps claim `c`'s constraints with its picks.
    fn constraints_hold(&self, c: usize, d: usize, request: &str, alt: &SubRequest) -> bool {
        let dev = &self.st.node.devices.devices[d];
        for k in &self.specs[c].constraints {
            if !(k.covers(request) || k.covers(&alt.name)) {
                continue;
            }
            let Some(v) = dev.attribute(&k.attribute) else {
                return false;
            };
            for p in &self.picks[c] {
                let (req, sub) = split_request(&p.request);
                if !(k.covers(req) || k.covers(sub)) {
                    continue;
                }
                let other = self.st.node.devices.devices[p.device as usize].attribute(&k.attribute);
                let same = other == Some(v);
                if k.distinct == same {
                    return false;
                }
            }
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn choose(
        &mut self,
        c: usize,
        r: usize,
        request: &str,
        alt: &SubRequest,
        cands: &[usize],
        from: usize,
        k: usize,
    ) -> bool {
        if k == 0 {
            return self.request(c, r + 1);
        }
        for i in from..cands.len() {
            if cands.len() - i < k {
                return false;
            }
            self.steps += 1;
            if self.steps >= SEARCH_STEPS {
                return false;
            }
            let d = cands[i];
            // Availability may have changed with this claim's earlier
            // picks (counters, shared capacity).
            let Some(consumed) = self.available(c, d, request, alt) else {
                continue;
            };
            if !self.constraints_hold(c, d, request, alt) {
                continue;
            }
            let pick = Pick {
                device: d as u32,
                request: Arc::from(alt.name.as_str()),
                admin: alt.admin_access,
                consumed,
            };
            self.avail.apply(&self.st.node, &pick);
            self.picks[c].push(pick);
            if self.choose(c, r, request, alt, cands, i + 1, k - 1) {
                return true;
            }
            if let Some(p) = self.picks[c].pop() {
                self.avail.unapply(&self.st.node, &p);
            }
        }
        false
    }

    /// `All` mode: every device the selectors accept, none of them in
    /// use (unless admin access), at least one.
    fn take_all(
        &mut self,
        c: usize,
        r: usize,
        request: &str,
        alt: &SubRequest,
        cands: &[usize],
    ) -> bool {
        let Some(mask) = self.st.node.masks.get(alt.selector as usize) else {
            return false;
        };
        let all: Vec<usize> = mask
            .iter()
            .filter(|&d| {
                let dev = &self.st.node.devices.devices[d];
                !dev.taints.iter().any(|t| taint_blocks(t, &alt.tolerations))
            })
            .collect();
        if all.is_empty() || all.len() != cands.len() {
            return false;
        }
        let before = self.picks[c].len();
        for d in all {
            self.steps += 1;
            let Some(consumed) = self.available(c, d, request, alt) else {
                self.undo_to(c, before);
                return false;
            };
            if !self.constraints_hold(c, d, request, alt) {
                self.undo_to(c, before);
                return false;
            }
            let pick = Pick {
                device: d as u32,
                request: Arc::from(alt.name.as_str()),
                admin: alt.admin_access,
                consumed,
            };
            self.avail.apply(&self.st.node, &pick);
            self.picks[c].push(pick);
        }
        if self.request(c, r + 1) {
            return true;
        }
        self.undo_to(c, before);
        false
    }

    fn undo_to(&mut self, c: usize, len: usize) {
        while self.picks[c].len() > len {
            if let Some(p) = self.picks[c].pop() {
                self.avail.unapply(&self.st.node, &p);
            }
        }
    }
}

/// A node's reason in device terms: for too few devices, the request,
/// class, selectors and counts, which a pending reason sums over nodes.
pub fn miss_reason(st: &DraState, miss: &Miss) -> crate::decisions::FilterReason {
    use crate::decisions::FilterReason;
    match miss {
        Miss::NoDevices => FilterReason::Devices("no DRA devices".to_string()),
        Miss::Elsewhere(what) => {
            FilterReason::Devices(format!("claim {what} is allocated on another node"))
        }
        Miss::UnknownClaim(key) => FilterReason::Devices(format!("claim {key} does not exist")),
        Miss::TooManySteps => {
            FilterReason::Devices(format!("device search gave up after {SEARCH_STEPS} steps"))
        }
        Miss::Request(request, selector, wanted) => {
            let w = &st.world;
            let at = *selector as usize;
            if let Some(Some(problem)) = w.selector_problem.get(at) {
                return FilterReason::Devices(format!("request {request}: {problem}"));
            }
            let class = w.selector_class.get(at).cloned().unwrap_or_default();
            let (free, total) = st.free_matching(*selector);
            let exprs = w
                .selector_text
                .get(at)
                .map(|e| e.join(" && "))
                .unwrap_or_default();
            let matching = if exprs.is_empty() {
                String::new()
            } else {
                format!(" matching {exprs}")
            };
            if *wanted == 0 {
                return FilterReason::Devices(format!(
                    "request {request}: {free} of {total} devices of class {class}{matching} free, all wanted"
                ));
            }
            if free >= *wanted {
                // Enough devices, but no choice keeps the claim's
                // constraints (or the node's other claims).
                return FilterReason::Devices(format!(
                    "request {request}: {free} free devices of class {class}{matching}, but no {wanted} that keep the claim's constraints"
                ));
            }
            FilterReason::DeviceCount {
                request: request.clone(),
                class,
                matching,
                wanted: *wanted,
                free,
            }
        }
    }
}

/// A capacity of the device by the name a request uses: fully qualified,
/// or without a domain for the device's driver's.
fn device_capacity<'d>(
    dev: &'d trainyard_model::dra::Device,
    name: &str,
) -> Option<&'d trainyard_model::dra::DeviceCapacity> {
    if name.contains('/') {
        dev.capacity.get(name)
    } else {
        dev.capacity.get(&format!("{}/{name}", dev.driver))
    }
}

/// What the request asks of the device's capacity `qualified`: by that
/// name, or without a domain when the domain is the driver's.
fn asked_capacity(alt: &SubRequest, driver: &str, qualified: &str) -> Option<u64> {
    alt.capacity.get(qualified).copied().or_else(|| {
        let short = qualified.strip_prefix(driver)?.strip_prefix('/')?;
        alt.capacity.get(short).copied()
    })
}

/// `req/sub` → (`req`, `req/sub`); `req` → (`req`, `req`).
pub fn split_request(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((req, _)) => (req, name),
        None => (name, name),
    }
}

/// Device `d` of `node` as an allocation result for `request`.
pub fn device_result(node: &NodeDevices, d: usize, request: &Arc<str>) -> Option<AllocatedDevice> {
    let dev = node.devices.get(d)?;
    Some(AllocatedDevice {
        request: Arc::clone(request),
        driver: dev.driver.clone(),
        pool: dev.pool.clone(),
        device: dev.name.clone(),
        admin_access: false,
        consumed: BTreeMap::new(),
    })
}

/// The devices of picks, as allocation results name them.
pub fn results(node: &NodeDevices, picks: &[Pick]) -> Vec<AllocatedDevice> {
    picks
        .iter()
        .filter_map(|p| {
            let d = node.devices.get(p.device as usize)?;
            Some(AllocatedDevice {
                request: Arc::clone(&p.request),
                driver: d.driver.clone(),
                pool: d.pool.clone(),
                device: d.name.clone(),
                admin_access: p.admin,
                consumed: p.consumed.iter().cloned().collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
