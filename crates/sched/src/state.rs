//! Mutable per-cycle state: what is free on each node, device by device,
//! with an undo log so a gang's tentative placements can be rolled back.

use trainyard_model::dra::ClaimNeed;
use trainyard_model::resources::MILLI_PER_GPU;
use trainyard_model::{GpuDevice, Node, PlacementConstraints, Resources, Task};

use crate::dra::DraState;

use crate::decisions::FilterReason;

/// How a task uses GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuAsk {
    None,
    /// This many whole, otherwise unused devices.
    Whole(u32),
    /// A share (milli-GPU, 1..=999) of one device that others may share.
    Fraction(u16),
    /// A share of one device sized by its memory: this many bytes, i.e.
    /// `ceil(bytes × 1000 / device memory)` milli-GPU of that device.
    Memory(u64),
}

impl GpuAsk {
    /// Classifies a task's GPU request; `Err` for amounts above one GPU that
    /// are not whole, and for a zero memory share.
    pub fn of(req: &Resources, c: &PlacementConstraints) -> Result<GpuAsk, String> {
        if let Some(bytes) = c.gpu_memory {
            return if bytes == 0 {
                Err("a GPU memory share of 0 bytes".to_string())
            } else {
                Ok(GpuAsk::Memory(bytes))
            };
        }
        let g = req.gpu;
        if g == 0 {
            Ok(GpuAsk::None)
        } else if g.is_multiple_of(MILLI_PER_GPU) {
            u32::try_from(g / MILLI_PER_GPU)
                .map(GpuAsk::Whole)
                .map_err(|_| format!("{g} milli-GPU is too many GPUs"))
        } else if g < MILLI_PER_GPU {
            // g < 1000 fits in u16.
            Ok(GpuAsk::Fraction(g as u16))
        } else {
            Err(format!(
                "nvidia.com/gpu {} is neither whole GPUs nor a fraction of one",
                trainyard_model::ResourceName::Gpu.format_amount(g)
            ))
        }
    }

    /// Whether the task shares one device with others.
    pub fn is_shared(self) -> bool {
        matches!(self, GpuAsk::Fraction(_) | GpuAsk::Memory(_))
    }

    /// Milli-GPU this ask takes on one device `dev` (1000 for whole GPUs);
    /// `None` when the device can never serve it (memory unknown or too small).
    pub fn milli_on(self, dev: &GpuDevice) -> Option<u16> {
        match self {
            GpuAsk::None => Some(0),
            GpuAsk::Whole(_) => Some(FULL),
            GpuAsk::Fraction(m) => Some(m),
            GpuAsk::Memory(bytes) => {
                if dev.memory_bytes == 0 {
                    return None;
                }
                let m = (bytes as u128 * MILLI_PER_GPU as u128).div_ceil(dev.memory_bytes as u128);
                // m ≥ 1 because bytes ≥ 1; at most 1000 means it fits on one device.
                (m <= MILLI_PER_GPU as u128).then_some(m as u16)
            }
        }
    }

    /// The affinity tag GPU Clustering groups pods by: shared pods, or the
    /// number of whole devices. `None` for CPU-only pods.
    pub fn tag(self) -> Option<GpuTag> {
        match self {
            GpuAsk::None => None,
            GpuAsk::Whole(k) => Some(GpuTag::Whole(k)),
            GpuAsk::Fraction(_) | GpuAsk::Memory(_) => Some(GpuTag::Shared),
        }
    }
}

/// Pod classes GPU Clustering keeps together on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GpuTag {
    Shared,
    Whole(u32),
}

/// One task as placement sees it: its request, how it uses GPUs, which GPU
/// models it accepts, and a salt that makes the Random policy's choices
/// differ between pods (and only between pods).
#[derive(Clone, Copy, Debug)]
pub struct PodView<'a> {
    pub req: &'a Resources,
    pub ask: GpuAsk,
    /// Allowed GPU models; empty = any.
    pub models: &'a [String],
    pub salt: u64,
    /// The pod's member id when the cycle checks rules between pods
    /// (`crate::podrules`): taking the pod lists it on its node.
    pub member: Option<u32>,
    /// When the pod's job would end if it started now (ms; its walltime),
    /// as the cycle's reservations classify it: a node held for a
    /// reservation from time `H` takes the pod only when `ends <= H`
    /// (conservative backfill). `i64::MAX`: no walltime, or no reservation
    /// to compare with.
    pub ends: i64,
    /// The pod's DRA claims (`PlacementConstraints::claims`): placed only
    /// where they can be allocated, and allocated when taken.
    pub claims: &'a [ClaimNeed],
}

impl<'a> PodView<'a> {
    /// The view of a task as its request and constraints say. A malformed
    /// GPU request counts as none: such tasks are blocked before any
    /// placement, so only pods already holding capacity get here with one.
    pub fn of_task(task: &'a Task) -> Self {
        let ask = GpuAsk::of(&task.requests, &task.constraints).unwrap_or(GpuAsk::None);
        PodView::new(&task.requests, ask, &task.constraints)
    }

    pub fn new(req: &'a Resources, ask: GpuAsk, c: &'a PlacementConstraints) -> Self {
        PodView {
            req,
            ask,
            models: &c.gpu_models,
            salt: 0,
            member: None,
            ends: i64::MAX,
            claims: &c.claims,
        }
    }

    fn model_ok(&self, dev: &GpuDevice) -> bool {
        self.models.is_empty() || self.models.contains(&dev.model)
    }
}

/// What is free on one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeState {
    pub free: Resources,
    pub pods: u32,
    /// Milli-GPU in use per device slot (position in `Node::gpus`).
    pub gpu_used: Vec<u16>,
    /// GPU pods on the node by class (GPU Clustering's affinity tags), sorted.
    pub tags: Vec<(GpuTag, u32)>,
    /// Member ids of the pods on the node, when the cycle checks rules
    /// between pods (`crate::podrules`); empty otherwise.
    pub members: Vec<u32>,
    /// The earliest start (ms) of a reservation that holds the node: a
    /// pod whose job ends later (`PodView::ends`) may take only what the
    /// reservation leaves over, `held_slack`. `i64::MAX`: not held.
    pub held_until: i64,
    /// While held: what stays free on the node at `held_until` once the
    /// reservation's pods are placed, as the projection found it, less
    /// what pods that end later took since. Pods that end by
    /// `held_until` do not count: they are gone by then.
    pub held_slack: Resources,
    /// The node's DRA devices and what is in use, when the snapshot has
    /// DRA objects (`crate::dra`).
    pub dra: Option<Box<DraState>>,
}

const FULL: u16 = MILLI_PER_GPU as u16;

impl NodeState {
    pub fn new(node: &Node) -> NodeState {
        NodeState {
            free: node.allocatable.clone(),
            pods: 0,
            gpu_used: vec![0; node.gpus.len()],
            tags: Vec::new(),
            members: Vec::new(),
            held_until: i64::MAX,
            held_slack: Resources::zero(),
            dra: None,
        }
    }

    /// Whether the pod's DRA claims (and the claims of the extended
    /// resources the node's devices serve) can be allocated here now.
    pub fn claims_fit(&self, pod: &PodView) -> bool {
        match &self.dra {
            None => pod.claims.is_empty(),
            Some(d) => d.fits_pod(pod.req, pod.claims),
        }
    }

    /// On a node whose DRA devices are its GPUs: each slot is in use
    /// exactly when its device is (by a pod on the slot, a reservation, or
    /// a claim), so what claims take is no slot's, and the reverse.
    pub fn sync_gpu_slots(&mut self) {
        let Some(d) = self.dra.as_ref() else { return };
        if !d.backs_gpu() {
            return;
        }
        for (k, u) in self.gpu_used.iter_mut().enumerate() {
            let busy = d.slot_in_use(k);
            if busy && *u == 0 {
                *u = FULL;
            } else if !busy && *u == FULL {
                *u = 0;
            }
        }
    }

    /// Whether `nvidia.com/gpu` on this node is served by DRA devices
    /// (KEP-5004): whole GPUs are then allocated as claims, shares not
    /// at all, and the node has no device-plugin devices.
    pub fn gpu_backed(&self) -> bool {
        self.dra.as_ref().is_some_and(|d| d.backs_gpu())
    }

    pub fn free_whole_gpus(&self) -> u32 {
        self.gpu_used.iter().filter(|u| **u == 0).count() as u32
    }

    /// Free milli-GPU of device slot `j`.
    pub fn device_free(&self, j: usize) -> u16 {
        FULL - self.gpu_used[j].min(FULL)
    }

    /// Free milli-GPU of every device slot.
    pub fn device_frees(&self) -> Vec<u16> {
        (0..self.gpu_used.len())
            .map(|j| self.device_free(j))
            .collect()
    }

    /// Milli-GPU the pod would take on device slot `j` if it can go there now.
    pub fn share_on(&self, node: &Node, j: usize, pod: &PodView) -> Option<u16> {
        let dev = &node.gpus[j];
        if !pod.model_ok(dev) {
            return None;
        }
        let used = self.gpu_used[j];
        match pod.ask {
            GpuAsk::None => None,
            GpuAsk::Whole(_) => (used == 0).then_some(FULL),
            ask => ask.milli_on(dev).filter(|m| used + m <= FULL),
        }
    }

    /// Whole free devices the pod may use (model filter applied).
    fn usable_whole(&self, node: &Node, pod: &PodView) -> u32 {
        (0..self.gpu_used.len())
            .filter(|&j| self.gpu_used[j] == 0 && pod.model_ok(&node.gpus[j]))
            .count() as u32
    }

    fn non_gpu_fits(&self, pod: &PodView) -> bool {
        if pod.ask.is_shared() || pod.ask == GpuAsk::None {
            // The device check decides GPUs; a memory share's `req.gpu` is
            // nominal, and a CPU-only pod asks for none.
            pod.req.fits_in_except_gpu(&self.free)
        } else {
            pod.req.fits_in(&self.free)
        }
    }

    /// Whether a reservation holding the node lets the pod take it: the
    /// pod's job ends by the reservation's start, or the pod fits in what
    /// the reservation leaves over.
    /// Whether the node's hold (if any) lets the pod in: its job ends by
    /// the hold's start, or it fits in what the reservation leaves over.
    /// Always true on a node that is not held.
    pub fn hold_allows(&self, pod: &PodView) -> bool {
        if pod.ends <= self.held_until {
            return true;
        }
        // A share may land on a device the reservation counted as whole:
        // against the slack it takes one whole device.
        if pod.ask.is_shared() {
            pod.req.fits_in_except_gpu(&self.held_slack) && self.held_slack.gpu >= MILLI_PER_GPU
        } else {
            pod.req.fits_in(&self.held_slack)
        }
    }

    /// Whether the pod fits now: the hot path of placement, same answer as
    /// [`fit`](Self::fit) without building a reason.
    pub fn fits(&self, node: &Node, pod: &PodView) -> bool {
        if !self.hold_allows(pod) {
            return false;
        }
        if node.max_pods.is_some_and(|max| self.pods >= max) || !self.non_gpu_fits(pod) {
            return false;
        }
        let gpus = match pod.ask {
            GpuAsk::None => true,
            GpuAsk::Fraction(_) | GpuAsk::Memory(_) if self.gpu_backed() => false,
            GpuAsk::Whole(n) => self.usable_whole(node, pod) >= n,
            _ => (0..self.gpu_used.len()).any(|j| self.share_on(node, j, pod).is_some()),
        };
        gpus && self.claims_fit(pod)
    }

    /// Whether the pod fits now; the first reason when it does not.
    pub fn fit(&self, node: &Node, pod: &PodView) -> Result<(), FilterReason> {
        if !self.hold_allows(pod) {
            return Err(FilterReason::Reserved);
        }
        self.fit_capacity(node, pod)
    }

    /// [`fit`](Self::fit) but for the node's hold: what the pod's end
    /// (`PodView::ends`) does not change.
    pub fn fit_capacity(&self, node: &Node, pod: &PodView) -> Result<(), FilterReason> {
        if self.gpu_backed() && pod.ask.is_shared() {
            return Err(FilterReason::Devices(
                "nvidia.com/gpu here is DRA devices, allocated whole".to_string(),
            ));
        }
        self.fit_non_dra(node, pod)?;
        match &self.dra {
            None if pod.claims.is_empty() => Ok(()),
            None => Err(FilterReason::Devices("no DRA devices".to_string())),
            Some(d) => {
                let needs = d.needs(pod.req, pod.claims);
                match d.miss(&needs) {
                    None => Ok(()),
                    Some(m) => Err(crate::dra::miss_reason(d, &m)),
                }
            }
        }
    }

    fn fit_non_dra(&self, node: &Node, pod: &PodView) -> Result<(), FilterReason> {
        if let Some(max) = node.max_pods
            && self.pods >= max
        {
            return Err(FilterReason::TooManyPods);
        }
        if !self.non_gpu_fits(pod) {
            let mut r = pod.req.clone();
            if pod.ask.is_shared() {
                r.gpu = 0;
            }
            if let Some(name) = r.first_excess(&self.free) {
                return Err(FilterReason::Insufficient(name));
            }
        }
        if pod.ask == GpuAsk::None {
            return Ok(());
        }
        let allowed: Vec<usize> = (0..node.gpus.len())
            .filter(|&j| pod.model_ok(&node.gpus[j]))
            .collect();
        if allowed.is_empty() {
            return Err(if node.gpus.is_empty() {
                FilterReason::Insufficient(trainyard_model::ResourceName::Gpu)
            } else {
                FilterReason::GpuModelMismatch
            });
        }
        match pod.ask {
            GpuAsk::None => Ok(()),
            GpuAsk::Whole(n) => {
                if self.usable_whole(node, pod) >= n {
                    Ok(())
                } else if (allowed.len() as u32) < n {
                    Err(FilterReason::Insufficient(
                        trainyard_model::ResourceName::Gpu,
                    ))
                } else {
                    Err(FilterReason::GpuDevicesFragmented)
                }
            }
            ask => {
                if allowed
                    .iter()
                    .any(|&j| self.share_on(node, j, pod).is_some())
                {
                    Ok(())
                } else if allowed
                    .iter()
                    .all(|&j| ask.milli_on(&node.gpus[j]).is_none())
                {
                    Err(FilterReason::GpuMemoryTooSmall)
                } else {
                    Err(FilterReason::GpuDevicesFragmented)
                }
            }
        }
    }

    /// How many copies of the pod fit now, each taking its own devices: exact
    /// for whole-GPU and CPU-only pods, for shares an upper bound that
    /// ignores how they would pack across devices. Sizes topology domains.
    pub fn copies(&self, node: &Node, pod: &PodView) -> u32 {
        let n = self.copies_non_dra(node, pod);
        match &self.dra {
            Some(d) if n > 0 => {
                let needs = d.needs(pod.req, pod.claims);
                if needs.is_empty() {
                    n
                } else {
                    d.copies(&needs, n)
                }
            }
            _ => n,
        }
    }

    fn copies_non_dra(&self, node: &Node, pod: &PodView) -> u32 {
        if !self.fits(node, pod) {
            return 0;
        }
        let mut n = node
            .max_pods
            .map_or(u32::MAX, |max| max.saturating_sub(self.pods));
        for (r, want) in pod.req.iter() {
            if want == 0 || (r == trainyard_model::ResourceName::Gpu && pod.ask != GpuAsk::None) {
                continue;
            }
            let k = self.free.get(&r) / want;
            n = n.min(u32::try_from(k).unwrap_or(u32::MAX));
        }
        match pod.ask {
            GpuAsk::None => n,
            GpuAsk::Whole(k) => n.min(self.usable_whole(node, pod) / k.max(1)),
            ask => {
                let mut shares = 0u32;
                for (j, dev) in node.gpus.iter().enumerate() {
                    if !pod.model_ok(dev) || self.gpu_used[j] >= FULL {
                        continue;
                    }
                    if let Some(m) = ask.milli_on(dev).filter(|m| *m > 0) {
                        shares += u32::from(self.device_free(j) / m);
                    }
                }
                n.min(shares)
            }
        }
    }

    /// Whether every device slot in `slots` is wholly free and allowed for the pod.
    pub fn whole_free(&self, node: &Node, pod: &PodView, slots: &[usize]) -> bool {
        slots.iter().all(|&j| {
            self.gpu_used.get(j) == Some(&0) && node.gpus.get(j).is_some_and(|d| pod.model_ok(d))
        })
    }

    /// The "best" device choice: the lowest whole free devices for whole
    /// GPUs; for a share, the device left with the least free capacity
    /// that still fits it (lowest slot on ties; fully free devices qualify).
    /// Call only after [`fits`](Self::fits) succeeded.
    pub fn best_devices(&self, node: &Node, pod: &PodView) -> Vec<usize> {
        match pod.ask {
            GpuAsk::None => Vec::new(),
            GpuAsk::Whole(n) => self.lowest_whole(node, pod, n),
            _ => {
                let mut best: Option<(u16, usize)> = None;
                for j in 0..self.gpu_used.len() {
                    if let Some(m) = self.share_on(node, j, pod) {
                        let left = self.device_free(j) - m;
                        if best.is_none_or(|(b, _)| left < b) {
                            best = Some((left, j));
                        }
                    }
                }
                best.map(|(_, j)| j).into_iter().collect()
            }
        }
    }

    /// The `n` lowest-indexed whole free devices the pod may use.
    pub fn lowest_whole(&self, node: &Node, pod: &PodView, n: u32) -> Vec<usize> {
        (0..self.gpu_used.len())
            .filter(|&j| self.gpu_used[j] == 0 && pod.model_ok(&node.gpus[j]))
            .take(n as usize)
            .collect()
    }

    /// Milli-GPU the pod is charged on `slots` (sum over the devices).
    pub fn charged_gpu(node: &Node, pod: &PodView, slots: &[usize]) -> u64 {
        slots
            .iter()
            .map(|&j| {
                node.gpus
                    .get(j)
                    .and_then(|d| pod.ask.milli_on(d))
                    .unwrap_or(0) as u64
            })
            .sum()
    }

    /// Takes the pod's request and the given device slots.
    pub fn take(&mut self, node: &Node, pod: &PodView, slots: &[usize]) {
        let gpu = match pod.ask {
            GpuAsk::None => pod.req.gpu,
            _ => Self::charged_gpu(node, pod, slots),
        };
        self.free.saturating_sub_charged(pod.req, gpu);
        if pod.ends > self.held_until {
            // Still there when the reservation starts (a share as a whole
            // device, as `hold_allows` counts it).
            let held = if pod.ask.is_shared() {
                MILLI_PER_GPU
            } else {
                gpu
            };
            self.held_slack.saturating_sub_charged(pod.req, held);
        }
        self.pods += 1;
        for &s in slots {
            if let (Some(u), Some(dev)) = (self.gpu_used.get_mut(s), node.gpus.get(s)) {
                let m = pod.ask.milli_on(dev).unwrap_or(FULL);
                *u = (*u + m).min(FULL);
            }
        }
        if let Some(tag) = pod.ask.tag() {
            match self.tags.binary_search_by(|(t, _)| t.cmp(&tag)) {
                Ok(i) => self.tags[i].1 += 1,
                Err(i) => self.tags.insert(i, (tag, 1)),
            }
        }
        if let Some(m) = pod.member {
            self.members.push(m);
        }
        if let Some(d) = self.dra.as_mut() {
            let needs = d.needs(pod.req, pod.claims).into_owned();
            let before = d.busy_slots();
            if !needs.is_empty() {
                // A claim's GPUs are the slots chosen for the pod.
                let prefer: smallvec::SmallVec<[u32; 8]> = slots
                    .iter()
                    .filter_map(|&k| d.node.gpu_slots.get(k).copied())
                    .collect();
                d.take(&needs, &prefer);
            }
            if d.backs_gpu() {
                d.mark_slots(slots, true);
                // Slots whose devices this pod's claims took.
                let after = d.busy_slots();
                for (k, u) in self.gpu_used.iter_mut().enumerate() {
                    if after.get(k) == Some(&true) && before.get(k) == Some(&false) {
                        *u = FULL;
                    }
                }
            }
        }
    }
}

impl NodeState {
    /// Withholds the wholly free devices among `slots` from what is placed
    /// next: they count as used and their GPUs as taken, with no pod added
    /// (its pod limit and GPU Clustering's tags stay as they are). Returns
    /// the slots withheld, for [`release`](Self::release).
    pub fn withhold(&mut self, node: &Node, slots: &[usize]) -> Vec<usize> {
        let mut taken = Vec::with_capacity(slots.len());
        for &s in slots {
            if node.gpus.get(s).is_some()
                && let Some(u) = self.gpu_used.get_mut(s)
                && *u == 0
            {
                *u = FULL;
                self.free.gpu = self.free.gpu.saturating_sub(MILLI_PER_GPU);
                taken.push(s);
            }
        }
        if let Some(d) = self.dra.as_mut() {
            d.mark_slots(&taken, true);
        }
        taken
    }

    /// Gives back devices [`withhold`](Self::withhold) took.
    pub fn release(&mut self, node: &Node, slots: &[usize]) {
        for &s in slots {
            if node.gpus.get(s).is_some()
                && let Some(u) = self.gpu_used.get_mut(s)
                && *u == FULL
            {
                *u = 0;
                self.free.gpu = (self.free.gpu + MILLI_PER_GPU).min(node.allocatable.gpu);
            }
        }
        if let Some(d) = self.dra.as_mut() {
            d.mark_slots(slots, false);
        }
    }

    /// Gives back what [`take`](Self::take) took for the pod on `slots`
    /// (a victim leaving, a reservation released).
    pub fn give(&mut self, node: &Node, pod: &PodView, slots: &[usize]) {
        let gpu = match pod.ask {
            GpuAsk::None => pod.req.gpu,
            _ => Self::charged_gpu(node, pod, slots),
        };
        // Never above allocatable, whatever the input claimed.
        self.free
            .add_charged_capped(pod.req, gpu, &node.allocatable);
        self.pods = self.pods.saturating_sub(1);
        for &s in slots {
            if let (Some(u), Some(dev)) = (self.gpu_used.get_mut(s), node.gpus.get(s)) {
                let m = pod.ask.milli_on(dev).unwrap_or(FULL);
                *u = u.saturating_sub(m);
            }
        }
        if let Some(tag) = pod.ask.tag()
            && let Ok(i) = self.tags.binary_search_by(|(t, _)| t.cmp(&tag))
        {
            self.tags[i].1 -= 1;
            if self.tags[i].1 == 0 {
                self.tags.remove(i);
            }
        }
        if let Some(m) = pod.member
            && let Some(i) = self.members.iter().position(|&x| x == m)
        {
            self.members.swap_remove(i);
        }
        if let Some(d) = self.dra.as_mut() {
            let needs = d.needs(pod.req, pod.claims).into_owned();
            let before = d.busy_slots();
            if !needs.is_empty() {
                d.give(&needs);
            }
            if d.backs_gpu() {
                d.mark_slots(slots, false);
                // Slots whose devices this pod's claims gave back.
                let after = d.busy_slots();
                for (k, u) in self.gpu_used.iter_mut().enumerate() {
                    if after.get(k) == Some(&false) && before.get(k) == Some(&true) {
                        *u = 0;
                    }
                }
            }
        }
    }
}

/// All nodes' state plus the undo log of the open transaction and the log
/// of changed nodes.
///
/// Every change goes through [`ClusterState::take`], [`ClusterState::give`]
/// or [`ClusterState::rollback`], and each appends the node it touched to
/// [`ClusterState::changes`]. A reader that remembers how much of the log it
/// has seen (a ranking of nodes for one pod shape, say) knows exactly which
/// nodes to look at again.
#[derive(Debug, Default)]
pub struct ClusterState {
    nodes: Vec<NodeState>,
    undo: Vec<(usize, NodeState)>,
    changes: Vec<u32>,
    /// Per node, where in `undo` its latest saved state is (stale once
    /// popped: `undo` no longer reaches it or holds another node there).
    saved_at: Vec<usize>,
    /// `undo`'s length at the latest [`ClusterState::begin`]: a node saved
    /// at or after it needs no second copy, since rolling back to any
    /// mark still open restores its oldest copy since that mark.
    last_begin: std::cell::Cell<usize>,
}

/// A point to roll back to. A change is kept by not rolling back to its
/// mark; a rollback to an earlier mark still undoes it (a placement kept
/// inside a trial that is rolled back as a whole, as a reservation's
/// projection or a victim check does), so the log keeps every copy until
/// the cycle ends.
#[derive(Clone, Copy, Debug)]
pub struct Mark(usize);

impl ClusterState {
    pub fn new(nodes: Vec<NodeState>) -> Self {
        ClusterState {
            saved_at: vec![usize::MAX; nodes.len()],
            nodes,
            undo: Vec::new(),
            changes: Vec::new(),
            last_begin: std::cell::Cell::new(0),
        }
    }

    /// Every node's current state, by node index.
    pub fn nodes(&self) -> &[NodeState] {
        &self.nodes
    }

    /// Indices of the nodes changed so far, in order (a node appears once
    /// per change).
    pub fn changes(&self) -> &[u32] {
        &self.changes
    }

    pub fn begin(&self) -> Mark {
        self.last_begin.set(self.undo.len());
        Mark(self.undo.len())
    }

    /// Before node `n` changes: its state into the undo log, unless a
    /// copy made since the latest mark is there already; the change
    /// logged.
    fn save(&mut self, n: usize) {
        let at = self.saved_at[n];
        let saved = at >= self.last_begin.get() && self.undo.get(at).is_some_and(|(m, _)| *m == n);
        if !saved {
            self.saved_at[n] = self.undo.len();
            self.undo.push((n, self.nodes[n].clone()));
        }
        self.changes.push(n as u32);
    }

    /// Places on node `n`, recording the previous state for rollback.
    pub fn take(&mut self, n: usize, node: &Node, pod: &PodView, slots: &[usize]) {
        self.save(n);
        self.nodes[n].take(node, pod, slots);
    }

    /// [`NodeState::withhold`] on node `n`, recorded for rollback.
    pub fn withhold(&mut self, n: usize, node: &Node, slots: &[usize]) -> Vec<usize> {
        // Nothing free to withhold: no change to log.
        if !slots
            .iter()
            .any(|&s| self.nodes[n].gpu_used.get(s) == Some(&0))
        {
            return Vec::new();
        }
        self.save(n);
        self.nodes[n].withhold(node, slots)
    }

    /// [`NodeState::release`] on node `n`, recorded for rollback.
    pub fn release(&mut self, n: usize, node: &Node, slots: &[usize]) {
        self.save(n);
        self.nodes[n].release(node, slots);
    }

    /// Frees on node `n`, recording the previous state for rollback.
    pub fn give(&mut self, n: usize, node: &Node, pod: &PodView, slots: &[usize]) {
        self.save(n);
        self.nodes[n].give(node, pod, slots);
    }

    /// Holds node `n` for reservations from `until` (ms), leaving `slack`
    /// to pods that end later (`i64::MAX`: not held); recorded for
    /// rollback.
    pub fn hold(&mut self, n: usize, until: i64, slack: Resources) {
        self.save(n);
        self.nodes[n].held_until = until;
        self.nodes[n].held_slack = slack;
    }

    /// Restores every node changed since `mark`.
    pub fn rollback(&mut self, mark: Mark) {
        while self.undo.len() > mark.0 {
            if let Some((n, prev)) = self.undo.pop() {
                self.changes.push(n as u32);
                self.nodes[n] = prev;
            }
        }
    }
}

#[cfg(test)]
mod tests;
