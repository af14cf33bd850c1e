//! Node scoring as placement uses it: the configured GPU policy plus the
//! CPU/memory scorer, combined by the one rule of [`crate::plugins`].
//! Both the scheduling cycle and the one-shot [`crate::placer::Placer`]
//! evaluate nodes through [`Scoring::evaluate`].

use trainyard_model::{Node, Snapshot, TaskState};

use crate::config::{ScoringConfig, TypicalPodsConfig};
use crate::fragmentation::{TypicalPod, TypicalPods};
use crate::plugins::{CpuMemoryScorer, Scorer};
use crate::policy::{self, DeviceChoice, GpuPolicy, PolicyContext};
use crate::state::{GpuAsk, NodeState, PodView};

/// A node's evaluation for one pod that fits on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evaluation {
    /// Σ weight × score.
    pub total: u64,
    /// Higher wins among equal totals (then the lower node index).
    pub tiebreak: u64,
    pub devices: DeviceChoice,
}

/// The configured scorers with the cluster-wide context they need.
pub struct Scoring {
    policy: Box<dyn GpuPolicy>,
    gpu_weight: u64,
    cpu_memory: Option<(CpuMemoryScorer, u64)>,
    pub ctx: PolicyContext,
}

impl Scoring {
    /// Scoring for one cycle over `nodes`. The typical pod mix is the
    /// configured one, or (when none is configured and the policy needs
    /// one) derived from every task in the snapshot.
    pub fn new(cfg: &ScoringConfig, nodes: &[&Node], snapshot: &Snapshot) -> Scoring {
        let typical = if !cfg.gpu.strategy.uses_typical_pods() {
            TypicalPods::default()
        } else if cfg.typical_pods.pods.is_empty() {
            typical_from_snapshot(snapshot, cfg.typical_pods.coverage_percent)
        } else {
            typical_from_config(&cfg.typical_pods)
        };
        Scoring::with_typical(cfg, nodes.iter().copied(), typical)
    }

    /// Scoring with an explicit typical pod mix.
    pub fn with_typical<'a>(
        cfg: &ScoringConfig,
        nodes: impl IntoIterator<Item = &'a Node>,
        typical: TypicalPods,
    ) -> Scoring {
        let cm = cfg.cpu_memory;
        Scoring {
            policy: policy::policy(cfg.gpu.strategy),
            gpu_weight: cfg.gpu.weight as u64,
            cpu_memory: (cm.weight > 0).then_some((CpuMemoryScorer(cm.strategy), cm.weight as u64)),
            ctx: PolicyContext::for_nodes(nodes, typical, cfg.random_seed),
        }
    }

    /// Whether evaluations depend on the pod's salt (not cacheable across pods).
    pub fn uses_salt(&self) -> bool {
        self.policy.uses_salt()
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// `None` when the pod does not fit on the node now.
    pub fn evaluate(&self, node: &Node, state: &NodeState, pod: &PodView) -> Option<Evaluation> {
        if !state.fits(node, pod) {
            return None;
        }
        let s = self.policy.score(&self.ctx, node, state, pod);
        let mut total = self.gpu_weight * s.score;
        if let Some((scorer, w)) = &self.cpu_memory {
            total += w * scorer.score(node, state, pod.req);
        }
        Some(Evaluation {
            total,
            tiebreak: s.tiebreak,
            devices: s.devices,
        })
    }
}

impl Scoring {
    /// An evaluation with the pod-rule scores added (their sum, each
    /// 0..=1000), weighted by [`crate::plugins::POD_RULES_WEIGHT`]: the
    /// same Σ weight × score rule.
    pub fn with_pod_rules(&self, mut e: Evaluation, rule_score: u64) -> Evaluation {
        e.total += crate::plugins::POD_RULES_WEIGHT * rule_score;
        e
    }
}

pub use crate::hash::{fnv1a64, salt_of};

/// The typical mix of a configured class list.
pub fn typical_from_config(cfg: &TypicalPodsConfig) -> TypicalPods {
    TypicalPods::from_classes(
        cfg.pods.iter().map(|p| {
            let devices = if p.gpu_milli == 0 { 0 } else { p.gpus.max(1) };
            TypicalPod::new(
                p.cpu_milli,
                p.gpu_milli,
                devices,
                &p.models.join("|"),
                p.count,
            )
        }),
        cfg.coverage_percent,
    )
}

/// The typical mix of every task in the snapshot (running and pending) and
/// of pods outside Trainyard.
pub fn typical_from_snapshot(snapshot: &Snapshot, coverage_percent: u32) -> TypicalPods {
    let mut classes = Vec::new();
    let class = |req: &trainyard_model::Resources, c: &trainyard_model::PlacementConstraints| {
        let (milli, devices) = match GpuAsk::of(req, c) {
            Ok(GpuAsk::Whole(k)) => (1000, k),
            Ok(GpuAsk::Fraction(m)) => (m, 1),
            Ok(GpuAsk::Memory(_)) => (req.gpu.clamp(1, 1000) as u16, 1),
            _ => (0, 0),
        };
        TypicalPod::new(req.cpu, milli, devices, &c.gpu_models.join("|"), 1)
    };
    for job in &snapshot.jobs {
        for t in &job.tasks {
            if matches!(t.state, TaskState::Pending | TaskState::Bound { .. }) {
                classes.push(class(&t.requests, &t.constraints));
            }
        }
    }
    let none = trainyard_model::PlacementConstraints::default();
    for p in &snapshot.external {
        classes.push(class(&p.requests, &none));
    }
    TypicalPods::from_classes(classes, coverage_percent)
}
