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
//!
//! Rules between pods (inter-pod affinity and anti-affinity, topology
//! spread, host ports) read where the other pods are now, so they are a
//! second kind of each: a [`PodPredicate`] and a [`PodScorer`], over the
//! counts of a [`PodCheck`]. They run only for pods that have such rules
//! or that other pods' rules select, after the static predicates and the
//! fit check, in the order of [`default_pod_predicates`]; all must pass,
//! the first failure is the node's reason. Each pod scorer gives 0..=1000
//! after normalising over the candidate nodes (as kube-scheduler does),
//! and their sum is added to the node score with weight
//! [`POD_RULES_WEIGHT`] ([`crate::scoring::Scoring::with_pod_rules`]).

use trainyard_model::{Node, PlacementConstraints, Resources};

use crate::config::Strategy;
use crate::decisions::FilterReason;
use crate::podrules::PodCheck;
use crate::state::{ClusterState, NodeState};

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

/// Weight of the pod-rule scores in the node score. The GPU policy's
/// default weight is 10 and CPU/memory's 1 (each scorer 0..=1000): at 20,
/// a preference between pods (preferred affinity, ScheduleAnyway spread)
/// outweighs packing, as in kube-scheduler, where InterPodAffinity and
/// PodTopologySpread weigh 2 against NodeResourcesFit's 1.
pub const POD_RULES_WEIGHT: u64 = 20;

/// A node filter that reads where pods are now.
pub trait PodPredicate: Send + Sync {
    fn name(&self) -> &'static str;
    fn filter(&self, check: &PodCheck, state: &ClusterState, n: usize) -> Result<(), FilterReason>;
}

/// Ranks candidate nodes by where pods are now: a raw value per node
/// (`None`: the scorer does not apply there, it scores 0), normalised
/// over the candidates to 0..=[`SCORE_MAX`].
pub trait PodScorer: Send + Sync {
    fn name(&self) -> &'static str;
    /// Whether the scorer has anything to say for this pod at all.
    fn applies(&self, check: &PodCheck) -> bool;
    fn raw(&self, check: &PodCheck, n: usize) -> Option<i64>;
    /// The score of `raw` given the least and greatest raw value over the
    /// candidates.
    fn normalize(&self, raw: Option<i64>, min: i64, max: i64) -> u64;
}

struct NodePorts;
impl PodPredicate for NodePorts {
    fn name(&self) -> &'static str {
        "NodePorts"
    }
    fn filter(&self, check: &PodCheck, state: &ClusterState, n: usize) -> Result<(), FilterReason> {
        if check.ports_free(state, n) {
            Ok(())
        } else {
            Err(FilterReason::HostPortInUse)
        }
    }
}

struct InterPodAffinity;
impl PodPredicate for InterPodAffinity {
    fn name(&self) -> &'static str {
        "InterPodAffinity"
    }
    fn filter(&self, check: &PodCheck, _: &ClusterState, n: usize) -> Result<(), FilterReason> {
        if !check.not_closed(n) {
            Err(FilterReason::ExistingPodAntiAffinity)
        } else if !check.anti_affinity_ok(n) {
            Err(FilterReason::PodAntiAffinity)
        } else if !check.affinity_ok(n) {
            Err(FilterReason::PodAffinity)
        } else {
            Ok(())
        }
    }
}

impl PodScorer for InterPodAffinity {
    fn name(&self) -> &'static str {
        "InterPodAffinity"
    }
    fn applies(&self, check: &PodCheck) -> bool {
        check.has_affinity_score()
    }
    fn raw(&self, check: &PodCheck, n: usize) -> Option<i64> {
        Some(check.affinity_raw(n))
    }
    /// kube-scheduler: `MaxNodeScore × (s − min) / (max − min)`, 0 when
    /// all are equal.
    fn normalize(&self, raw: Option<i64>, min: i64, max: i64) -> u64 {
        match raw {
            Some(s) if max > min => ((s - min) as u64 * SCORE_MAX) / (max - min) as u64,
            _ => 0,
        }
    }
}

struct PodTopologySpread;
impl PodPredicate for PodTopologySpread {
    fn name(&self) -> &'static str {
        "PodTopologySpread"
    }
    fn filter(&self, check: &PodCheck, _: &ClusterState, n: usize) -> Result<(), FilterReason> {
        if check.spread_ok(n) {
            Ok(())
        } else {
            Err(FilterReason::TopologySpread)
        }
    }
}

impl PodScorer for PodTopologySpread {
    fn name(&self) -> &'static str {
        "PodTopologySpread"
    }
    fn applies(&self, check: &PodCheck) -> bool {
        check.spread_raw_applies()
    }
    fn raw(&self, check: &PodCheck, n: usize) -> Option<i64> {
        check.spread_raw(n)
    }
    /// kube-scheduler: fewer matching pods is better,
    /// `MaxNodeScore × (max + min − s) / max`; a node without the keys
    /// scores 0.
    fn normalize(&self, raw: Option<i64>, min: i64, max: i64) -> u64 {
        match raw {
            None => 0,
            Some(_) if max <= 0 => SCORE_MAX,
            Some(s) => ((max + min - s).max(0) as u64 * SCORE_MAX) / max as u64,
        }
    }
}

/// The built-in pod-rule predicates, in evaluation order.
pub fn default_pod_predicates() -> Vec<Box<dyn PodPredicate>> {
    vec![
        Box::new(NodePorts),
        Box::new(InterPodAffinity),
        Box::new(PodTopologySpread),
    ]
}

/// The built-in pod-rule scorers.
pub fn default_pod_scorers() -> Vec<Box<dyn PodScorer>> {
    vec![Box::new(InterPodAffinity), Box::new(PodTopologySpread)]
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
