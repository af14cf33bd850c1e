//! Extension points: node predicates and node scorers.
//!
//! Combination rules, fixed and documented:
//! - **Predicates: all must pass.** They run in the order of
//!   [`default_predicates`]; the first failure is the node's reason. The
//!   resource/device fit check always runs after them and is not a plugin
//!   (it is the core's own accounting).
//! - **Scorers: scores add with weights.** Each scorer returns 0..=1000; the
//!   node score is Σ weight × score. The highest score wins; ties go to the
//!   node whose name sorts first.
//!
//! Predicates here depend only on the task's constraints and the node's
//! static description, so the core evaluates them once per distinct
//! constraint set per cycle.

use trainyard_model::{Node, PlacementConstraints, Resources};

use crate::config::{ScorerConfig, ScoringConfig, Strategy};
use crate::decisions::FilterReason;
use crate::state::NodeState;

/// Highest score one scorer may return.
pub const SCORE_MAX: u64 = 1000;

/// A static node filter.
pub trait Predicate: Send + Sync {
    fn name(&self) -> &'static str;
    fn filter(&self, task: &PlacementConstraints, node: &Node) -> Result<(), FilterReason>;
}

/// Ranks a node for a task that fits on it.
pub trait Scorer: Send + Sync {
    fn name(&self) -> &'static str;
    /// 0..=[`SCORE_MAX`]; `state` is the node before placing `req`.
    fn score(&self, node: &Node, state: &NodeState, req: &Resources) -> u64;
}

struct Unschedulable;
impl Predicate for Unschedulable {
    fn name(&self) -> &'static str {
        "NodeUnschedulable"
    }
    fn filter(&self, _: &PlacementConstraints, node: &Node) -> Result<(), FilterReason> {
        if node.unschedulable {
            Err(FilterReason::Unschedulable)
        } else {
            Ok(())
        }
    }
}

struct NodeSelector;
impl Predicate for NodeSelector {
    fn name(&self) -> &'static str {
        "NodeSelector"
    }
    fn filter(&self, task: &PlacementConstraints, node: &Node) -> Result<(), FilterReason> {
        if task.selector_matches(node) {
            Ok(())
        } else {
            Err(FilterReason::NodeSelectorMismatch)
        }
    }
}

struct NodeAffinity;
impl Predicate for NodeAffinity {
    fn name(&self) -> &'static str {
        "NodeAffinity"
    }
    fn filter(&self, task: &PlacementConstraints, node: &Node) -> Result<(), FilterReason> {
        if task.affinity_matches(node) {
            Ok(())
        } else {
            Err(FilterReason::NodeAffinityMismatch)
        }
    }
}

struct TaintToleration;
impl Predicate for TaintToleration {
    fn name(&self) -> &'static str {
        "TaintToleration"
    }
    fn filter(&self, task: &PlacementConstraints, node: &Node) -> Result<(), FilterReason> {
        match task.untolerated_taint(node) {
            Some(t) => Err(FilterReason::UntoleratedTaint(t.to_string())),
            None => Ok(()),
        }
    }
}

/// The built-in predicates, in evaluation order.
pub fn default_predicates() -> Vec<Box<dyn Predicate>> {
    vec![
        Box::new(Unschedulable),
        Box::new(NodeSelector),
        Box::new(NodeAffinity),
        Box::new(TaintToleration),
    ]
}

/// Scores GPU use. For a task asking for GPUs, `binpack` prefers the node
/// left with the fewest free GPUs, `spread` the most. For a task asking for
/// none, both prefer nodes without free GPUs (GPU-less nodes score highest),
/// so CPU pods do not sit on GPU capacity others need.
pub struct GpuScorer(pub Strategy);

impl Scorer for GpuScorer {
    fn name(&self) -> &'static str {
        "Gpu"
    }
    fn score(&self, node: &Node, state: &NodeState, req: &Resources) -> u64 {
        let total = node.allocatable.gpu;
        if total == 0 {
            return if req.gpu == 0 { SCORE_MAX } else { 0 };
        }
        let free_after = state.free.gpu.saturating_sub(req.gpu);
        let free_frac = free_after.min(total) * SCORE_MAX / total;
        if req.gpu == 0 {
            return SCORE_MAX - free_frac;
        }
        match self.0 {
            Strategy::Binpack => SCORE_MAX - free_frac,
            Strategy::Spread => free_frac,
        }
    }
}

/// Scores CPU and memory together: the mean over the two of the used
/// (binpack) or free (spread) fraction after placing the task.
pub struct CpuMemoryScorer(pub Strategy);

impl Scorer for CpuMemoryScorer {
    fn name(&self) -> &'static str {
        "CpuMemory"
    }
    fn score(&self, node: &Node, state: &NodeState, req: &Resources) -> u64 {
        let frac = |free: u64, total: u64, want: u64| -> u64 {
            if total == 0 {
                return 0;
            }
            let free_after = free.saturating_sub(want).min(total);
            match free_after.checked_mul(SCORE_MAX) {
                Some(x) => x / total,
                // Beyond ~18 PB: widen.
                None => (free_after as u128 * SCORE_MAX as u128 / total as u128) as u64,
            }
        };
        let cpu_free = frac(state.free.cpu, node.allocatable.cpu, req.cpu);
        let mem_free = frac(state.free.memory, node.allocatable.memory, req.memory);
        let free = (cpu_free + mem_free) / 2;
        match self.0 {
            Strategy::Binpack => SCORE_MAX - free,
            Strategy::Spread => free,
        }
    }
}

/// The scorers a config asks for, with their weights.
pub fn scorers(cfg: &ScoringConfig) -> Vec<(Box<dyn Scorer>, u64)> {
    let mut out: Vec<(Box<dyn Scorer>, u64)> = Vec::new();
    let ScorerConfig { strategy, weight } = cfg.gpu;
    if weight > 0 {
        out.push((Box::new(GpuScorer(strategy)), weight as u64));
    }
    let ScorerConfig { strategy, weight } = cfg.cpu_memory;
    if weight > 0 {
        out.push((Box::new(CpuMemoryScorer(strategy)), weight as u64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::{Taint, TaintEffect};

    #[test]
    fn gpu_binpack_prefers_fuller_nodes_and_spread_emptier() {
        let node = Node::new("n", 64_000, 1 << 40, 8);
        let mut busy = NodeState::new(&node);
        busy.free.gpu = 2000;
        let idle = NodeState::new(&node);
        let req = Resources::zero().with_gpus(1);
        let bp = GpuScorer(Strategy::Binpack);
        let sp = GpuScorer(Strategy::Spread);
        assert!(bp.score(&node, &busy, &req) > bp.score(&node, &idle, &req));
        assert!(sp.score(&node, &busy, &req) < sp.score(&node, &idle, &req));
        // CPU-only pods prefer GPU-less nodes under both strategies.
        let cpu_node = Node::new("c", 64_000, 1 << 40, 0);
        let cpu_req = Resources::new(1000, 0, 0);
        assert_eq!(
            sp.score(&cpu_node, &NodeState::new(&cpu_node), &cpu_req),
            SCORE_MAX
        );
        assert_eq!(sp.score(&node, &idle, &cpu_req), 0);
    }

    #[test]
    fn taint_predicate_names_the_taint() {
        let mut node = Node::new("n", 1000, 1, 0);
        node.taints.push(Taint {
            key: "dedicated".into(),
            value: "infer".into(),
            effect: TaintEffect::NoSchedule,
        });
        let r = TaintToleration.filter(&PlacementConstraints::default(), &node);
        assert_eq!(
            r.unwrap_err().to_string(),
            "untolerated taint dedicated=infer"
        );
        node.taints[0].effect = TaintEffect::PreferNoSchedule;
        assert!(
            TaintToleration
                .filter(&PlacementConstraints::default(), &node)
                .is_ok()
        );
    }
}
