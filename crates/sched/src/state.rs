//! Mutable per-cycle state: what is free on each node, device by device,
//! with an undo log so a gang's tentative placements can be rolled back.

use trainyard_model::resources::MILLI_PER_GPU;
use trainyard_model::{GpuDevice, Node, PlacementConstraints, Resources, Task};

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
        }
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
        match pod.ask {
            GpuAsk::None => true,
            GpuAsk::Whole(n) => self.usable_whole(node, pod) >= n,
            _ => (0..self.gpu_used.len()).any(|j| self.share_on(node, j, pod).is_some()),
        }
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
mod tests {
    use super::*;

    fn none() -> PlacementConstraints {
        PlacementConstraints::default()
    }

    fn view<'a>(req: &'a Resources, c: &'a PlacementConstraints) -> PodView<'a> {
        PodView::new(req, GpuAsk::of(req, c).unwrap(), c)
    }

    #[test]
    fn classify_requests() {
        let c = none();
        assert_eq!(GpuAsk::of(&Resources::zero(), &c), Ok(GpuAsk::None));
        assert_eq!(
            GpuAsk::of(&Resources::zero().with_gpus(4), &c),
            Ok(GpuAsk::Whole(4))
        );
        assert_eq!(
            GpuAsk::of(&Resources::new(0, 0, 250), &c),
            Ok(GpuAsk::Fraction(250))
        );
        assert!(
            GpuAsk::of(&Resources::new(0, 0, 1500), &c)
                .unwrap_err()
                .contains("1.5")
        );
        let mem = PlacementConstraints {
            gpu_memory: Some(10 << 30),
            ..none()
        };
        assert_eq!(
            GpuAsk::of(&Resources::new(0, 0, 125), &mem),
            Ok(GpuAsk::Memory(10 << 30))
        );
        let zero = PlacementConstraints {
            gpu_memory: Some(0),
            ..none()
        };
        assert!(GpuAsk::of(&Resources::zero(), &zero).is_err());
    }

    #[test]
    fn whole_gpus_take_lowest_free_devices_and_never_mix_with_shared() {
        let node = Node::new("n", 64_000, 1 << 40, 4);
        let c = none();
        let mut s = NodeState::new(&node);
        let frac = Resources::new(0, 0, 500);
        let pod = view(&frac, &c);
        let slots = s.best_devices(&node, &pod);
        assert_eq!(slots, vec![0]);
        s.take(&node, &pod, &slots);
        assert_eq!(s.free.gpu, 3500);
        assert_eq!(s.tags, vec![(GpuTag::Shared, 1)]);
        // A second fraction packs onto the shared device.
        let f300 = Resources::new(0, 0, 300);
        assert_eq!(s.best_devices(&node, &view(&f300, &c)), vec![0]);
        let whole = Resources::zero().with_gpus(3);
        assert_eq!(s.fit(&node, &view(&whole, &c)), Ok(()));
        assert_eq!(s.best_devices(&node, &view(&whole, &c)), vec![1, 2, 3]);
        // 3.5 GPUs free in total: four whole ones are not there.
        let four = Resources::zero().with_gpus(4);
        assert_eq!(
            s.fit(&node, &view(&four, &c)),
            Err(FilterReason::Insufficient(
                trainyard_model::ResourceName::Gpu
            ))
        );
        // Half of device 0 and half of device 1 shared: 3 GPUs free in
        // total but only 2 whole devices; shared devices are never handed
        // out whole.
        s.take(&node, &pod, &[1]);
        let three = Resources::zero().with_gpus(3);
        assert_eq!(s.free.gpu, 3000);
        assert_eq!(
            s.fit(&node, &view(&three, &c)),
            Err(FilterReason::GpuDevicesFragmented)
        );
    }

    #[test]
    fn withheld_devices_count_as_used_without_a_pod() {
        let mut node = Node::new("n", 64_000, 1 << 40, 4);
        node.max_pods = Some(2);
        let c = none();
        let mut s = NodeState::new(&node);
        let one = Resources::zero().with_gpus(1);
        s.take(&node, &view(&one, &c), &[0]);
        // Device 0 is used: withholding skips it and takes 2 and 3.
        assert_eq!(s.withhold(&node, &[0, 2, 3]), vec![2, 3]);
        assert_eq!(s.gpu_used, vec![FULL, 0, FULL, FULL]);
        assert_eq!(s.free.gpu, 1000);
        // No pod was added: the pod limit (2) still has room for one, and
        // the tags are the running pod's alone.
        assert_eq!(s.pods, 1);
        assert_eq!(s.tags, vec![(GpuTag::Whole(1), 1)]);
        assert_eq!(s.best_devices(&node, &view(&one, &c)), vec![1]);
        let two = Resources::zero().with_gpus(2);
        assert!(s.fit(&node, &view(&two, &c)).is_err());
        s.release(&node, &[2, 3]);
        assert_eq!(s.gpu_used, vec![FULL, 0, 0, 0]);
        assert_eq!(s.free.gpu, 3000);
        assert_eq!(s.fit(&node, &view(&two, &c)), Ok(()));
    }

    #[test]
    fn withholding_is_undone_by_rollback() {
        let node = Node::new("n", 64_000, 1 << 40, 8);
        let mut cs = ClusterState::new(vec![NodeState::new(&node)]);
        let before = cs.nodes()[0].clone();
        let mark = cs.begin();
        assert_eq!(cs.withhold(0, &node, &[4, 5, 6, 7]), vec![4, 5, 6, 7]);
        assert_eq!(cs.nodes()[0].free.gpu, 4000);
        cs.rollback(mark);
        assert_eq!(cs.nodes()[0], before);
    }

    #[test]
    fn memory_shares_are_sized_by_each_device() {
        let mut node = Node::new("n", 64_000, 1 << 40, 2);
        node.gpus[0].memory_bytes = 16 << 30;
        node.gpus[1].memory_bytes = 80 << 30;
        let c = PlacementConstraints {
            gpu_memory: Some(20 << 30),
            ..none()
        };
        let req = Resources::new(1000, 0, 250);
        let pod = view(&req, &c);
        let mut s = NodeState::new(&node);
        // 20 GiB does not fit a 16 GiB device; on 80 GiB it is 250 milli.
        assert_eq!(s.share_on(&node, 0, &pod), None);
        assert_eq!(s.share_on(&node, 1, &pod), Some(250));
        assert_eq!(s.best_devices(&node, &pod), vec![1]);
        s.take(&node, &pod, &[1]);
        assert_eq!(s.gpu_used, vec![0, 250]);
        assert_eq!(s.free.gpu, 1750);
        // 10 GiB on 16 GiB is ceil(625) milli.
        let small = PlacementConstraints {
            gpu_memory: Some(10 << 30),
            ..none()
        };
        assert_eq!(s.share_on(&node, 0, &view(&req, &small)), Some(625));
        // No device knows its memory: the share never fits.
        let blind = Node::new("b", 64_000, 1 << 40, 1);
        assert_eq!(
            NodeState::new(&blind).fit(&blind, &pod),
            Err(FilterReason::GpuMemoryTooSmall)
        );
    }

    #[test]
    fn model_constraints_pick_devices_of_allowed_models() {
        let mut node = Node::new("n", 64_000, 1 << 40, 2);
        node.gpus[0].model = "T4".into();
        node.gpus[1].model = "A10".into();
        let c = PlacementConstraints {
            gpu_models: vec!["A10".into()],
            ..none()
        };
        let one = Resources::zero().with_gpus(1);
        let s = NodeState::new(&node);
        assert_eq!(s.best_devices(&node, &view(&one, &c)), vec![1]);
        let two = Resources::zero().with_gpus(2);
        assert_eq!(
            s.fit(&node, &view(&two, &c)),
            Err(FilterReason::Insufficient(
                trainyard_model::ResourceName::Gpu
            ))
        );
        let v100 = PlacementConstraints {
            gpu_models: vec!["V100".into()],
            ..none()
        };
        assert_eq!(
            s.fit(&node, &view(&one, &v100)),
            Err(FilterReason::GpuModelMismatch)
        );
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn fast_fit_agrees_with_fit(
            used in prop::collection::vec(prop_oneof![Just(0u16), 1u16..1000, Just(1000u16)], 0..9),
            free_cpu in 0u64..10_000, pods in 0u32..4, max_pods in prop::option::of(0u32..4),
            cpu in 0u64..10_000, gpu in prop_oneof![Just(0u64), 1u64..1000, (1u64..9).prop_map(|g| g * 1000)],
            mem_share in prop::option::of(1u64..(20u64 << 30)),
        ) {
            let mut node = Node::new("n", 10_000, 1 << 30, used.len() as u32);
            for (i, d) in node.gpus.iter_mut().enumerate() {
                d.memory_bytes = if i % 3 == 2 { 0 } else { (8u64 << 30) * (1 + i as u64 % 2) };
            }
            node.max_pods = max_pods;
            let free_gpu: u64 = used.iter().map(|u| 1000 - *u as u64).sum();
            let s = NodeState { free: Resources::new(free_cpu, 1 << 30, free_gpu), pods, gpu_used: used, tags: Vec::new(), members: Vec::new(), held_until: i64::MAX, held_slack: Resources::zero() };
            let req = Resources::new(cpu, 0, gpu);
            let c = PlacementConstraints { gpu_memory: mem_share, ..PlacementConstraints::default() };
            let pod = view(&req, &c);
            prop_assert_eq!(s.fits(&node, &pod), s.fit(&node, &pod).is_ok());
            if s.fits(&node, &pod) {
                // The chosen devices can take the pod, and taking it never
                // overfills a device.
                let slots = s.best_devices(&node, &pod);
                let mut t = s.clone();
                t.take(&node, &pod, &slots);
                prop_assert!(t.gpu_used.iter().all(|u| *u <= 1000));
            }
        }
    }

    #[test]
    fn rollback_restores_exactly() {
        let node = Node::new("n", 8000, 1 << 30, 8);
        let c = none();
        let mut cs = ClusterState::new(vec![NodeState::new(&node)]);
        let before = cs.nodes.clone();
        let m = cs.begin();
        let r = Resources::new(1000, 0, 0).with_gpus(2);
        let pod = view(&r, &c);
        cs.take(0, &node, &pod, &[0, 1]);
        cs.take(0, &node, &pod, &[2, 3]);
        assert_eq!(cs.nodes[0].free_whole_gpus(), 4);
        cs.rollback(m);
        assert_eq!(cs.nodes, before);
    }

    /// One step of a random transaction script.
    #[derive(Clone, Debug)]
    enum Op {
        Begin,
        Take(usize, usize),
        Give(usize),
        Hold(usize, i64),
        Rollback,
        /// The innermost mark dropped, its changes kept.
        Keep,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Op::Begin),
            (0..3usize, 0..8usize).prop_map(|(n, g)| Op::Take(n, g)),
            (0..3usize).prop_map(Op::Give),
            (0..3usize, 0..100i64).prop_map(|(n, t)| Op::Hold(n, t)),
            Just(Op::Rollback),
            Just(Op::Keep),
        ]
    }

    proptest::proptest! {
        /// Whatever the nesting of marks, the state after each step is the
        /// one a plain undo log gives (every change saving a copy of its
        /// node): a node's copy is made once per mark, however often it
        /// changes, and rolling back to any open mark restores the nodes
        /// as they were then, with the changes kept under inner marks
        /// dropped since undone too.
        #[test]
        fn the_undo_log_keeps_one_copy_per_mark_and_restores_as_before(
            ops in proptest::collection::vec(op(), 1..80)
        ) {
            let node = Node::new("n", 8000, 1 << 30, 8);
            let c = none();
            let r = Resources::new(100, 0, 0).with_gpus(1);
            let pod = view(&r, &c);
            let mut cs = ClusterState::new(vec![NodeState::new(&node); 3]);
            // The plain log: nodes, and a copy per change.
            let mut plain_nodes = cs.nodes.clone();
            let mut plain_undo: Vec<(usize, NodeState)> = Vec::new();
            // Open marks, innermost last: this log's, the plain one's, and
            // the nodes as they were when it was taken.
            let mut open: Vec<(Mark, usize, Vec<NodeState>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Begin => open.push((cs.begin(), plain_undo.len(), cs.nodes.clone())),
                    Op::Take(n, g) => {
                        if plain_nodes[n].gpu_used[g] == 0 {
                            cs.take(n, &node, &pod, &[g]);
                            plain_undo.push((n, plain_nodes[n].clone()));
                            plain_nodes[n].take(&node, &pod, &[g]);
                        }
                    }
                    Op::Give(n) => {
                        if let Some(g) = plain_nodes[n].gpu_used.iter().position(|u| *u > 0) {
                            cs.give(n, &node, &pod, &[g]);
                            plain_undo.push((n, plain_nodes[n].clone()));
                            plain_nodes[n].give(&node, &pod, &[g]);
                        }
                    }
                    Op::Hold(n, t) => {
                        cs.hold(n, t, Resources::zero());
                        plain_undo.push((n, plain_nodes[n].clone()));
                        plain_nodes[n].held_until = t;
                        plain_nodes[n].held_slack = Resources::zero();
                    }
                    Op::Rollback => {
                        if let Some((m, pm, then)) = open.pop() {
                            cs.rollback(m);
                            proptest::prop_assert_eq!(&cs.nodes, &then);
                            while plain_undo.len() > pm {
                                if let Some((n, prev)) = plain_undo.pop() {
                                    plain_nodes[n] = prev;
                                }
                            }
                        }
                    }
                    Op::Keep => {
                        open.pop();
                    }
                }
                proptest::prop_assert_eq!(&cs.nodes, &plain_nodes);
            }
        }
    }
}
