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
        self.plan(claims, &[]).is_ok()
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
        self.plan(claims, &[]).err()
    }

    /// Allocates the claims (call after [`fits`](Self::fits)), taking the
    /// devices in `prefer` first where they serve: the devices of the GPU
    /// slots the core chose for the pod, so a claim's GPUs are those slots.
    pub fn take(&mut self, claims: &[ClaimNeed], prefer: &[u32]) {
        if let (Some((sel, k)), [ClaimNeed::Own(spec)]) = (self.plain(claims), claims)
            && self.free_in(sel) >= k
            && let Some(mask) = self.node.masks.get(sel as usize)
        {
            // The hot path: the free matching devices fewest requests want.
            let mut free: Vec<usize> = mask
                .iter()
                .filter(|&d| !self.avail.used.contains(d))
                .collect();
            free.sort_by_key(|&d| (!prefer.contains(&(d as u32)), self.node.demand[d], d));
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
        let Ok(plan) = self.plan(claims, prefer) else {
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
        s.take(claims, &[]);
        if !claims.iter().any(|c| matches!(c, ClaimNeed::Own(_))) {
            // Shared claims only: each further pod joins them.
            return max;
        }
        let mut n = 1;
        while n < max && s.fits(claims) {
            s.take(claims, &[]);
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
    fn plan(&self, claims: &[ClaimNeed], prefer: &[u32]) -> Result<Plan, Miss> {
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
        let mut search = Search::new(self, &specs, prefer);
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
                let Ok(picks) = Search::new(&base, &all, prefer).run() else {
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

mod search;
mod world;

use search::Search;
pub use search::split_request;
pub use world::{DraNode, DraWorld, EXTENDED_REQUEST, attach, claimed_slots, extended_amount};

#[cfg(test)]
mod tests;
