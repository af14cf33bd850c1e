//! Extension points: node predicates and node scorers.
//!
//! Combination rules, fixed and documented:
//! - **Predicates: all must pass.** They run in the order of
//!   [`default_predicates`]; the first failure is the node's reason. The
//!   resource/device fit check always runs after them and is not a plugin
//!   (it is the core's own accounting).
//! - **Scores add with weights.** The GPU policy ([`crate::policy`]) and
//!   the CPU/memory [`Scorer`] each return 0..=1000; the node score is
//!   Σ weight × score. The highest score wins; then the policy's tie-break
//!   value; then the node whose name sorts first. Devices are the GPU
//!   policy's choice.
//!
//! Predicates here depend only on the task's constraints and the node's
//! static description, so the core evaluates them once per distinct
//! constraint set per cycle.

use trainyard_model::{Node, PlacementConstraints, Resources};

use crate::config::Strategy;
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

struct GpuModel;
impl Predicate for GpuModel {
    fn name(&self) -> &'static str {
        "GpuModel"
    }
    fn filter(&self, task: &PlacementConstraints, node: &Node) -> Result<(), FilterReason> {
        if task.gpu_models.is_empty() || node.gpus.iter().any(|d| task.gpu_model_allowed(&d.model))
        {
            Ok(())
        } else {
            Err(FilterReason::GpuModelMismatch)
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
        Box::new(GpuModel),
    ]
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

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::{Taint, TaintEffect};

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
