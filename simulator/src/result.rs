//! What a simulation produces (job records and samples over time); the
//! summary computed from it is in [`summary`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use trainyard_model::{Resources, Timestamp};

use crate::preemption::{EvictionModel, LostWork};

/// Final state of a job at the end of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// All tasks ran to completion.
    Completed,
    /// Started, still running when the run ended.
    Running,
    /// Never started.
    Pending,
    /// Never schedulable as submitted (unknown queue, above a limit, ...).
    Rejected,
    /// Ended at its walltime, before its work was done (Slurm's
    /// `TIMEOUT`).
    TimedOut,
}

/// One job's life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: String,
    pub queue: String,
    pub priority: i32,
    /// Milli-GPU of all tasks.
    pub gpu_milli: u64,
    pub tasks: u32,
    pub submit: Timestamp,
    /// When its gang minimum was placed (the last time, after restarts).
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
    pub state: JobState,
    /// The last reason the core gave while the job waited.
    pub pending_reason: Option<String>,
    /// Times the job was restarted as a whole: a node under it failed, or
    /// an eviction took it below its gang minimum.
    pub restarts: u32,
    /// Milli-GPU of the gang minimum (the first `minMember` pods).
    #[serde(default)]
    pub min_gpu_milli: u64,
    /// Pods of this job the scheduler evicted (counted when evicted).
    #[serde(default)]
    pub evicted_pods: u32,
    /// Work lost to kills, in milli-GPU × ms (GPUs of the killed pods ×
    /// lost time, per the lost-work model).
    #[serde(default)]
    pub lost: LostGpu,
    /// How the job sits on the network topology, for jobs that started with
    /// two or more pods on a cluster with a topology (at the last start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<JobTopology>,
    /// The start of the first reservation the core made for the job
    /// while it waited (docs/scheduling.md, section 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_start: Option<Timestamp>,
}

/// Work lost to kills, in milli-GPU × ms, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LostGpu {
    /// Pods removed after an eviction (reclaim or preemption).
    pub evictions: u64,
    /// Jobs killed by a node failure.
    pub node_faults: u64,
    /// Pods evicted to move their job (consolidation).
    #[serde(default)]
    pub moves: u64,
}

impl LostGpu {
    pub fn total(&self) -> u64 {
        self.evictions
            .saturating_add(self.node_faults)
            .saturating_add(self.moves)
    }
}

/// Milli-GPU × ms in one GPU-hour.
pub const MILLI_GPU_MS_PER_GPU_HOUR: u64 = 1000 * 3_600_000;

/// Evictions the scheduler decided in one cycle (only cycles with some).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionSample {
    pub time: Timestamp,
    /// Pods evicted by reclaim (across queues).
    pub reclaim_pods: u32,
    /// Pods evicted by preemption (inside a queue).
    pub preempt_pods: u32,
    /// Distinct jobs with a pod evicted by reclaim.
    pub reclaim_jobs: u32,
    /// Distinct jobs with a pod evicted by preemption.
    pub preempt_jobs: u32,
    /// Pods moved by consolidation (evicted; their job restarts).
    #[serde(default)]
    pub move_pods: u32,
    /// Distinct jobs moved by consolidation.
    #[serde(default)]
    pub move_jobs: u32,
}

/// Where a gang sat on the fabric when it (last) started: the pods placed
/// then, in rank order. From the scheduler's `GangPlacement` when it
/// reported one, else computed from the binds with `Topology::span`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobTopology {
    /// Pods placed at the start.
    pub pods: u32,
    /// Distinct nodes.
    pub nodes: u32,
    /// Distinct leaf-level domains (leaf groups / ToRs).
    pub leaves: u32,
    /// Ring hops between different nodes (pod i → pod i+1, closing the ring).
    pub hops: u32,
    /// Hops whose traffic crosses a spine.
    pub spine_crossings: u32,
    /// Local rank r of every pod on the same rail.
    pub rail_aligned: bool,
    /// Tightest level with one domain holding every pod; `None`: only the
    /// whole cluster.
    pub level: Option<String>,
    /// Whether the gang sat in its tightest feasible domain level, as the
    /// scheduler reported; `None` when it reported no placement.
    pub in_tightest: Option<bool>,
    /// Run time added by the slowdown model, in parts per million of the
    /// job's duration (0 when the model is off).
    pub slowdown_ppm: u64,
    /// Run time added by the slowdown model, in ms.
    pub slowdown_ms: u64,
}

impl JobRecord {
    /// Wait in ms: start − submit, or end of run − submit if it never started.
    pub fn wait_ms(&self, end_of_run: Timestamp) -> i64 {
        self.start.unwrap_or(end_of_run).0 - self.submit.0
    }
    /// Job completion time in ms (end − submit), for completed jobs.
    pub fn jct_ms(&self) -> Option<i64> {
        self.end.map(|e| e.0 - self.submit.0)
    }
}

/// A queue's starved episodes: lengths (ms) of those that ended, and the
/// start of one still open.
pub type Episodes = (Vec<i64>, Option<Timestamp>);

/// One queue at one cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSample {
    pub time: Timestamp,
    /// Queue path.
    pub queue: String,
    /// The queue's own name (the name jobs use for a leaf).
    pub name: String,
    pub is_leaf: bool,
    pub demand: Resources,
    pub fair_share: Resources,
    pub allocated: Resources,
}

/// The cluster at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSample {
    pub time: Timestamp,
    /// Milli-GPU on nodes that are up.
    pub gpu_capacity: u64,
    pub gpu_allocated: u64,
    pub running_jobs: u32,
    pub pending_jobs: u32,
    /// With a topology: the largest gang (in GPUs) that could still be
    /// placed inside one leaf domain, i.e. the maximum over leaf-level
    /// domains of the wholly free GPUs on their nodes that are up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_free_leaf_gpus: Option<u32>,
    /// Free GPUs scattered: after the last cycle a job waited for room
    /// (no node arrangement fits it) although its minimum's GPUs were free
    /// in total.
    #[serde(default, skip_serializing_if = "is_false")]
    pub scattered: bool,
}

/// The topology a run used, for outputs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTopology {
    /// Level names, tightest first.
    pub levels: Vec<String>,
    /// Name of the level counted as "leaf".
    pub leaf_level: Option<String>,
    /// Number of domains of the leaf level.
    pub leaf_domains: u32,
    /// The slowdown model's `perSpineCrossing` in parts per million (0: off).
    pub slowdown_ppm: u64,
}

/// Everything one run produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimOutput {
    /// Name of the scheduler config used.
    pub policy: String,
    pub jobs: Vec<JobRecord>,
    pub queues: Vec<QueueSample>,
    pub cluster: Vec<ClusterSample>,
    pub cycles: u64,
    pub events: u64,
    pub start_time: Timestamp,
    pub end_time: Timestamp,
    /// The cluster's topology, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<RunTopology>,
    /// Cycles that evicted pods, in time order.
    #[serde(default)]
    pub evictions: Vec<EvictionSample>,
    /// The grace period and the run's lost-work model.
    #[serde(default)]
    pub eviction_model: EvictionModel,
    /// DRA claims the core allocated (with a node pool publishing DRA
    /// devices: one per pod placed on DRA GPUs or asking claims).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dra_claims: u64,
}

pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

pub(crate) fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

fn is_false(v: &bool) -> bool {
    !*v
}

mod summary;
pub use summary::*;
