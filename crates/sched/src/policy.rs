//! GPU placement policies: the typed scoring plugins that rank nodes for a
//! pod *and* choose its devices.
//!
//! Combination rule (fixed, documented in `docs/gpu-sharing.md`): the node
//! score is `w_gpu × policy score + w_cpuMemory × CpuMemory score`; the
//! highest wins; among equal scores the higher [`Scored::tiebreak`] wins
//! (only Random sets one); then the node whose name sorts first. The device
//! choice is always the GPU policy's.
//!
//! The six policies of the FGD paper follow `FGD-EXPERIMENT.md` §4 exactly,
//! including every integer truncation, with exact integer arithmetic where
//! the original uses floating point. Their 0..=100 scores are multiplied by
//! 10 to fill the common 0..=1000 range; that changes no order or tie.

use trainyard_model::Node;

use crate::config::GpuStrategy;
use crate::fragmentation::{TypicalPods, sigmoid_percent};
use crate::hash::fnv1a64;
use crate::plugins::SCORE_MAX;
use crate::state::{GpuAsk, NodeState, PodView};

/// Cluster-wide inputs some policies need.
#[derive(Clone, Debug)]
pub struct PolicyContext {
    /// Largest node CPU (millicores): DotProd and BestFit normalise by it.
    pub max_cpu: u64,
    /// Largest node GPU capacity (milli-GPU): DotProd, BestFit and GPU
    /// Clustering normalise by it.
    pub max_gpu: u64,
    /// The typical pod mix FGD (and Trainyard's policy) measure
    /// fragmentation against.
    pub typical: TypicalPods,
    /// Seed of the Random policy.
    pub seed: u64,
}

impl PolicyContext {
    /// Normalisers from a node list.
    pub fn for_nodes<'a>(
        nodes: impl IntoIterator<Item = &'a Node>,
        typical: TypicalPods,
        seed: u64,
    ) -> Self {
        let (mut max_cpu, mut max_gpu) = (1, 1);
        for n in nodes {
            max_cpu = max_cpu.max(n.allocatable.cpu);
            max_gpu = max_gpu.max(n.gpus.len() as u64 * 1000);
        }
        PolicyContext {
            max_cpu,
            max_gpu,
            typical,
            seed,
        }
    }
}

/// Which devices a pod takes on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeviceChoice {
    /// CPU-only pod.
    None,
    /// One shared device slot.
    One(usize),
    /// The lowest-indexed whole free devices (every policy's choice for
    /// whole-GPU pods).
    LowestWhole,
}

impl DeviceChoice {
    /// The device slots, on the node's current state.
    pub fn slots(self, node: &Node, state: &NodeState, pod: &PodView) -> Vec<usize> {
        match (self, pod.ask) {
            (DeviceChoice::None, _) => Vec::new(),
            (DeviceChoice::One(j), _) => vec![j],
            (DeviceChoice::LowestWhole, GpuAsk::Whole(k)) => state.lowest_whole(node, pod, k),
            (DeviceChoice::LowestWhole, _) => state.best_devices(node, pod),
        }
    }
}

/// A policy's verdict on one node for one pod that fits there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scored {
    /// 0..=[`SCORE_MAX`].
    pub score: u64,
    /// Higher wins among equal total scores.
    pub tiebreak: u64,
    pub devices: DeviceChoice,
}

/// Scores a node for a pod and picks its devices. Called only for nodes the
/// pod fits on (`NodeState::fits`). Must be a pure function of its
/// arguments.
pub trait GpuPolicy: Send + Sync {
    fn name(&self) -> &'static str;
    fn score(&self, ctx: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored;
    /// Whether the score depends on `pod.salt` (callers must not cache it
    /// across pods then).
    fn uses_salt(&self) -> bool {
        false
    }
}

/// The policy a strategy names.
pub fn policy(strategy: GpuStrategy) -> Box<dyn GpuPolicy> {
    match strategy {
        GpuStrategy::Binpack => Box::new(Binpack { spread: false }),
        GpuStrategy::Spread => Box::new(Binpack { spread: true }),
        GpuStrategy::Random => Box::new(Random),
        GpuStrategy::DotProd => Box::new(DotProd),
        GpuStrategy::Clustering => Box::new(Clustering),
        GpuStrategy::Packing => Box::new(Packing),
        GpuStrategy::BestFit => Box::new(BestFit),
        GpuStrategy::Fgd => Box::new(Fgd),
        GpuStrategy::Trainyard => Box::new(Trainyard),
    }
}

fn whole_or_best(node: &Node, state: &NodeState, pod: &PodView) -> DeviceChoice {
    match pod.ask {
        GpuAsk::None => DeviceChoice::None,
        GpuAsk::Whole(_) => DeviceChoice::LowestWhole,
        _ => state
            .best_devices(node, pod)
            .first()
            .map_or(DeviceChoice::None, |&j| DeviceChoice::One(j)),
    }
}

/// Milli-GPU the pod takes in total, as the paper's scores count it
/// (`k × u`; a memory share counts its nominal `requests.gpu`).
fn pod_gpu(pod: &PodView) -> u64 {
    match pod.ask {
        GpuAsk::None => 0,
        GpuAsk::Whole(k) => k as u64 * 1000,
        GpuAsk::Fraction(m) => m as u64,
        GpuAsk::Memory(_) => pod.req.gpu.min(1000),
    }
}

fn gfree(state: &NodeState) -> u64 {
    state
        .gpu_used
        .iter()
        .map(|u| 1000 - (*u).min(1000) as u64)
        .sum()
}

/// Trainyard's original scorer: binpack prefers the node left with the
/// fewest free GPUs, spread the most; CPU-only pods prefer nodes without
/// free GPUs under both. Devices: "best".
struct Binpack {
    spread: bool,
}

impl GpuPolicy for Binpack {
    fn name(&self) -> &'static str {
        if self.spread { "spread" } else { "binpack" }
    }
    fn score(&self, _: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored {
        let devices = whole_or_best(node, state, pod);
        let total = node.gpus.len() as u64 * 1000;
        let want = pod_gpu(pod);
        let free_after = gfree(state).saturating_sub(want);
        let score = match (free_after.min(total) * SCORE_MAX).checked_div(total) {
            None if want == 0 => SCORE_MAX,
            None => 0,
            Some(free_frac) if want == 0 || !self.spread => SCORE_MAX - free_frac,
            Some(free_frac) => free_frac,
        };
        Scored {
            score,
            tiebreak: 0,
            devices,
        }
    }
}

fn mix(seed: u64, salt: u64, a: u64, b: u64) -> u64 {
    // FNV-1a over the four words, then a SplitMix64 finaliser: cheap and
    // well spread, and the same on every platform.
    let mut bytes = [0u8; 32];
    for (chunk, w) in bytes.chunks_exact_mut(8).zip([seed, salt, a, b]) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    let mut x = fnv1a64(&bytes);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn name_hash(node: &Node) -> u64 {
    fnv1a64(node.name.as_bytes())
}

/// 01-Random: every feasible node scores 0 and a per-(pod, node) hash of
/// the seed breaks the tie, which picks uniformly among feasible nodes.
/// Shared pods go to a uniformly chosen device they fit on.
struct Random;

impl GpuPolicy for Random {
    fn name(&self) -> &'static str {
        "random"
    }
    fn uses_salt(&self) -> bool {
        true
    }
    fn score(&self, ctx: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored {
        let nh = name_hash(node);
        let devices = match pod.ask {
            GpuAsk::None => DeviceChoice::None,
            GpuAsk::Whole(_) => DeviceChoice::LowestWhole,
            _ => (0..node.gpus.len())
                .filter(|&j| state.share_on(node, j, pod).is_some())
                .max_by_key(|&j| mix(ctx.seed, pod.salt, nh, j as u64 + 1))
                .map_or(DeviceChoice::None, DeviceChoice::One),
        };
        Scored {
            score: 0,
            tiebreak: mix(ctx.seed, pod.salt, nh, 0),
            devices,
        }
    }
}

/// 02-DotProd: `⌊100 (1 − a·b / 2)⌋` with a = the node's free (CPU, GPU)
/// and b = the pod's request, each normalised by the largest node.
/// Higher for a *smaller* dot product, as in the paper's artifact.
struct DotProd;

impl GpuPolicy for DotProd {
    fn name(&self) -> &'static str {
        "dotProd"
    }
    fn score(&self, ctx: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored {
        let (mc, mg) = (ctx.max_cpu as u128, ctx.max_gpu as u128);
        let a = state.free.cpu as u128 * pod.req.cpu as u128 * mg * mg
            + gfree(state) as u128 * pod_gpu(pod) as u128 * mc * mc;
        let den = mc * mc * mg * mg;
        // 100 (1 − a / (2 den)) = (200 den − 100 a) / (2 den), floored at 0.
        let num = (200 * den).saturating_sub(100 * a);
        let paper = (num / (2 * den)) as u64;
        Scored {
            score: paper.min(100) * 10,
            tiebreak: 0,
            devices: whole_or_best(node, state, pod),
        }
    }
}

/// 03-GPU Clustering: keep pods of one class (shared, or k whole GPUs)
/// together. CPU-only pods score 0 everywhere.
struct Clustering;

impl GpuPolicy for Clustering {
    fn name(&self) -> &'static str {
        "clustering"
    }
    fn score(&self, ctx: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored {
        let devices = whole_or_best(node, state, pod);
        let Some(tag) = pod.ask.tag() else {
            return Scored {
                score: 0,
                tiebreak: 0,
                devices,
            };
        };
        let used = ctx.max_gpu.saturating_sub(gfree(state));
        let base = 25 * used / ctx.max_gpu.max(1);
        let distinct = state.tags.iter().filter(|(_, c)| *c > 0).count();
        let has = state.tags.iter().any(|(t, c)| *t == tag && *c > 0);
        let paper = base
            + match (has, distinct) {
                (true, 1) => 75,
                (true, _) => 50,
                (false, 0) => 25,
                (false, _) => 0,
            };
        Scored {
            score: paper.min(100) * 10,
            tiebreak: 0,
            devices,
        }
    }
}

/// 04-GPU Packing: prefer partly used devices (tightest first), then
/// partly used nodes, then idle nodes, smaller idle nodes first. CPU-only
/// pods score 0 everywhere.
struct Packing;

impl GpuPolicy for Packing {
    fn name(&self) -> &'static str {
        "packing"
    }
    fn score(&self, _: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored {
        let devices = whole_or_best(node, state, pod);
        if pod.ask == GpuAsk::None {
            return Scored {
                score: 0,
                tiebreak: 0,
                devices,
            };
        }
        let g = node.gpus.len() as u64;
        let full = state.free_whole_gpus() as u64;
        let paper = if full == g {
            (33u64.saturating_sub(full)).max(full)
        } else {
            let k = match pod.ask {
                GpuAsk::Whole(k) => k as usize,
                _ => 1,
            };
            // Devices in ascending free order (stable), first k that fit.
            let mut order: Vec<(u16, usize)> = (0..node.gpus.len())
                .map(|j| (state.device_free(j), j))
                .collect();
            order.sort();
            let chosen: Vec<(u16, usize)> = order
                .into_iter()
                .filter(|&(_, j)| state.share_on(node, j, pod).is_some())
                .take(k)
                .collect();
            let nf = chosen.iter().filter(|(f, _)| *f == 1000).count() as u64;
            if nf > 0 {
                50u64.saturating_sub(nf).max(33)
            } else {
                let r: u64 = chosen.iter().map(|(f, _)| *f as u64 * 100 / 1000).sum();
                100u64.saturating_sub(r / 10).max(50)
            }
        };
        Scored {
            score: paper.min(100) * 10,
            tiebreak: 0,
            devices,
        }
    }
}

/// 05-BestFit: `⌊100 (1 − s)⌋`, s = half the node's leftover CPU share plus
/// half its leftover GPU share after placing the pod.
struct BestFit;

impl GpuPolicy for BestFit {
    fn name(&self) -> &'static str {
        "bestFit"
    }
    fn score(&self, ctx: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored {
        let (mc, mg) = (ctx.max_cpu as u128, ctx.max_gpu as u128);
        let cpu_left = state.free.cpu.saturating_sub(pod.req.cpu) as u128;
        let gpu_left = gfree(state).saturating_sub(pod_gpu(pod)) as u128;
        // 100 − 50 cpu_left/mc − 50 gpu_left/mg, over the denominator mc·mg.
        let num = (100 * mc * mg).saturating_sub(50 * cpu_left * mg + 50 * gpu_left * mc);
        let paper = (num / (mc * mg)) as u64;
        Scored {
            score: paper.min(100) * 10,
            tiebreak: 0,
            devices: whole_or_best(node, state, pod),
        }
    }
}

/// Free milli-GPU per device after the pod takes `devices`.
fn free_after(node: &Node, state: &NodeState, pod: &PodView, devices: DeviceChoice) -> Vec<u16> {
    let mut free: Vec<u16> = state.device_frees();
    match devices {
        DeviceChoice::None => {}
        DeviceChoice::One(j) => {
            let m = state.share_on(node, j, pod).unwrap_or(0);
            free[j] = free[j].saturating_sub(m);
        }
        DeviceChoice::LowestWhole => {
            for j in DeviceChoice::LowestWhole.slots(node, state, pod) {
                free[j] = 0;
            }
        }
    }
    free
}

/// The FGD evaluation shared by [`Fgd`] and [`Trainyard`]: for each
/// candidate device choice, the fragmentation numerator after placing.
/// Returns (choice, Δ numerator = before − after), best Δ first by the
/// FGD rule (for shared pods the lowest slot among equal *scores*).
fn fgd_candidates(
    t: &TypicalPods,
    node: &Node,
    state: &NodeState,
    pod: &PodView,
) -> Vec<(DeviceChoice, i128)> {
    let before_free: Vec<u16> = state.device_frees();
    let before = t.frag_numerator(node, state.free.cpu, &before_free) as i128;
    let cpu_after = state.free.cpu.saturating_sub(pod.req.cpu);
    match pod.ask {
        GpuAsk::None | GpuAsk::Whole(_) => {
            let choice = if pod.ask == GpuAsk::None {
                DeviceChoice::None
            } else {
                DeviceChoice::LowestWhole
            };
            let free = free_after(node, state, pod, choice);
            let after = t.frag_numerator(node, cpu_after, &free) as i128;
            vec![(choice, before - after)]
        }
        _ => {
            let mut out: Vec<(DeviceChoice, i128)> = Vec::new();
            // Devices with the same free amount and model give the same
            // after-state: evaluate each distinct one once.
            let mut seen: Vec<(u16, &str, i128)> = Vec::new();
            for j in 0..node.gpus.len() {
                if state.share_on(node, j, pod).is_none() {
                    continue;
                }
                let key = (state.device_free(j), node.gpus[j].model.as_str());
                let delta = match seen.iter().find(|s| (s.0, s.1) == key) {
                    Some(s) => s.2,
                    None => {
                        let free = free_after(node, state, pod, DeviceChoice::One(j));
                        let d = before - t.frag_numerator(node, cpu_after, &free) as i128;
                        seen.push((key.0, key.1, d));
                        d
                    }
                };
                out.push((DeviceChoice::One(j), delta));
            }
            out
        }
    }
}

/// 06-FGD: the score is `⌊100 σ(Δ / 1000)⌋` where Δ (milli-GPU) is how much
/// the node's fragmentation drops when the pod is placed; for a shared pod,
/// the best device's score (lowest slot among equal scores).
struct Fgd;

impl GpuPolicy for Fgd {
    fn name(&self) -> &'static str {
        "fgd"
    }
    fn score(&self, ctx: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored {
        let den = ctx.typical.denominator() * 1000;
        let mut best: Option<(u64, DeviceChoice)> = None;
        for (choice, delta) in fgd_candidates(&ctx.typical, node, state, pod) {
            let s = sigmoid_percent(delta, den);
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, choice));
            }
        }
        let (paper, devices) = best.unwrap_or((0, DeviceChoice::None));
        Scored {
            score: paper * 10,
            tiebreak: 0,
            devices,
        }
    }
}

/// Milli-GPU of fragmentation change per point of [`Trainyard`]'s score
/// for CPU-only pods.
pub const TRAINYARD_CPU_MILLI_PER_POINT: i128 = 16;

/// Trainyard's policy: FGD for GPU pods; CPU-only pods are scored by the
/// fragmentation they cause at a finer resolution than FGD's sigmoid.
///
/// FGD scores a pod by `⌊100 σ(Δ/1000)⌋`. A CPU-only pod can never lower
/// fragmentation (Δ ≤ 0), so under FGD every harmless node scores 50 and
/// every harm below about 40 milli-GPU scores 49: the pod goes to the
/// lowest-ranked of many nodes with quite different harms, and on
/// CPU-heavy mixes CPU pods strand GPUs that GPU pods later cannot use
/// (their CPU is gone). Here a CPU-only pod scores `500 + Δ/16` (Δ in
/// milli-GPU; 0..=1000), so it goes to the node where it strands the least
/// GPU, to 16 milli-GPU. GPU pods keep FGD's score and device choice
/// exactly, which the experiment showed hard to improve on: every finer or
/// packing-style tie-break we tried for them was worse (see
/// `docs/gpu-sharing.md`).
struct Trainyard;

impl GpuPolicy for Trainyard {
    fn name(&self) -> &'static str {
        "trainyard"
    }
    fn score(&self, ctx: &PolicyContext, node: &Node, state: &NodeState, pod: &PodView) -> Scored {
        if pod.ask != GpuAsk::None {
            return Fgd.score(ctx, node, state, pod);
        }
        let den = ctx.typical.denominator() as i128 * TRAINYARD_CPU_MILLI_PER_POINT;
        let delta = fgd_candidates(&ctx.typical, node, state, pod)
            .first()
            .map_or(0, |c| c.1);
        Scored {
            score: (500 + delta / den).clamp(0, SCORE_MAX as i128) as u64,
            tiebreak: 0,
            devices: DeviceChoice::None,
        }
    }
}
