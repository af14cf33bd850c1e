//! What one cycle decides: binds, pending reasons, the fair-share table.

use serde::{Deserialize, Serialize};
use trainyard_model::{JobId, Limits, NodeName, QueueId, Resources, TaskKey, Timestamp};

mod reasons;

pub use reasons::{FilterReason, PendingReason};

/// Put task `task` of job `job` on `node`, holding GPU devices `gpus`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    pub job: JobId,
    pub task: TaskKey,
    pub node: NodeName,
    /// GPU device indices on the node (empty when the task asks for no GPU).
    pub gpus: Vec<u32>,
}

/// Why a pod is evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EvictionKind {
    /// Across queues: the victim's queue is above its fair share.
    Reclaim,
    /// Inside a leaf queue: the victim has lower priority.
    Preempt,
    /// Moved (consolidation): its job is placed whole elsewhere in the
    /// same cycle (`Decisions::moves`) so that a waiting gang fits.
    Consolidate,
}

/// One pod to evict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Eviction {
    pub job: JobId,
    pub task: TaskKey,
    pub node: NodeName,
    pub kind: EvictionKind,
    /// The job the room is made for.
    pub preemptor: JobId,
    /// For people, e.g. `reclaimed for team-b/llm-70b: team-a above fair
    /// share (nvidia.com/gpu 48/32)`.
    pub message: String,
}

/// A running job moved by consolidation: its pods are evicted and its
/// replacement pods (new pods from the same owner, in the same job) go to
/// the room planned for them, held until they come.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Move {
    pub job: JobId,
    /// The gang the room is made for.
    pub for_job: JobId,
    /// Each evicted pod and where its replacement goes.
    pub pods: Vec<MovedPod>,
    /// For people: `team-b/eval-3 (4 GPUs) from gpu-17 to gpu-22`.
    pub message: String,
}

/// One pod of a moved job: where it was, where its replacement goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedPod {
    pub task: TaskKey,
    pub from: NodeName,
    pub to: NodeName,
    /// GPU device indices held on `to`.
    pub gpus: Vec<u32>,
}

/// A preemptor's pod and the node (and devices) reserved for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NominationDecision {
    pub job: JobId,
    pub task: TaskKey,
    pub node: NodeName,
    pub gpus: Vec<u32>,
}

/// A pending pod's nomination that the cycle does not keep: the pod was
/// neither bound nor nominated again, its job is not waiting for its
/// victims to go, no room is held for it (the room it named went to
/// others), and no pod on its node is going (or the nomination has
/// lapsed: `nominationTimeoutSeconds`). The drivers clear
/// the pod's `status.nominatedNodeName`, as kube-scheduler clears a
/// nomination when the pod's preemption finds nothing or when a pod of
/// higher priority is nominated onto its room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Withdrawal {
    pub job: JobId,
    pub task: TaskKey,
    /// The node the withdrawn nomination named.
    pub node: NodeName,
}

/// Where a gang placed this cycle sits on the topology.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GangPlacement {
    pub job: JobId,
    /// Leaves, spine crossings and rail alignment of the pods placed now
    /// (together with the gang's pods already running), in rank order.
    pub span: trainyard_model::topology::Span,
    /// Name of the tightest level with one domain holding all of them;
    /// `None`: only the whole cluster.
    pub level: Option<String>,
    /// The tightest level where one domain had room for the gang when it
    /// was placed; `None`: none did (or the gang has one pod).
    pub tightest_feasible: Option<String>,
    /// Whether the gang sits in its tightest feasible domain level.
    pub in_tightest: bool,
}

/// A job left pending, with its reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingJob {
    pub job: JobId,
    /// Queue path (`org/team`).
    pub queue: String,
    /// The queue's id in this snapshot's tree; `None` when the job names a
    /// queue that does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_id: Option<QueueId>,
    pub reason: PendingReason,
    /// `reason` as a sentence.
    pub message: String,
}

/// One row of the fair-share table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueReport {
    /// The queue's id in this snapshot's tree.
    pub id: QueueId,
    /// Its own name (the last part of the path).
    pub name: String,
    /// `org/team` path.
    pub queue: String,
    pub parent: Option<String>,
    pub depth: u32,
    pub quota: Resources,
    pub limit: Limits,
    pub fair_share: Resources,
    /// Allocation after this cycle's binds.
    pub allocated: Resources,
    /// Running + pending requests, capped by the limit.
    pub demand: Resources,
}

/// A reservation held by a starving gang (see `PendingReason::Reserved`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub job: JobId,
    /// Queue path.
    pub queue: String,
    /// When its minimum is expected to fit.
    pub start: Timestamp,
    /// `start` minus the cycle's time, in seconds.
    pub starts_in_seconds: u64,
    /// The nodes held for it, by name.
    pub nodes: Vec<NodeName>,
    /// The tightest topology domain holding them (`leaf g3`).
    pub domain: Option<String>,
    /// Jobs on those nodes that started after it was submitted (or this
    /// cycle) and end by `start`.
    pub backfilled: u32,
}

/// Counters of one cycle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleStats {
    pub nodes: u32,
    pub jobs_considered: u32,
    pub gangs_placed: u32,
    pub pods_bound: u32,
    /// Pods evicted by reclaim or preemption.
    #[serde(default)]
    pub evictions: u32,
}

/// Everything one scheduling cycle decided.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decisions {
    pub binds: Vec<Bind>,
    /// How each gang placed this cycle sits on the network topology (only
    /// when the snapshot has one), in placement order.
    #[serde(default)]
    pub placements: Vec<GangPlacement>,
    /// Pods to evict so that a waiting gang fits (reclaim or preemption).
    #[serde(default)]
    pub evictions: Vec<Eviction>,
    /// Where the preemptors' pods go once their victims are gone: the
    /// capacity is reserved for them (`status.nominatedNodeName`).
    #[serde(default)]
    pub nominations: Vec<NominationDecision>,
    /// Running jobs moved by consolidation (their pods are in `evictions`,
    /// kind `consolidate`), in the order they were planned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<Move>,
    /// Nominations of pending pods the cycle does not keep, in job order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withdrawals: Vec<Withdrawal>,
    /// Reservations of starving gangs, in the order they were made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<Reservation>,
    pub pending: Vec<PendingJob>,
    pub queues: Vec<QueueReport>,
    /// Inconsistencies in the input the cycle worked around.
    pub warnings: Vec<String>,
    pub stats: CycleStats,
    /// DRA claims the binds need written before they are made: a fresh
    /// allocation, or a claim allocated already that a bound pod joins
    /// (`status.reservedFor`). In bind order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimDecision>,
}

/// A claim to allocate or reserve for the pods of this cycle's binds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimDecision {
    /// `namespace/name`.
    pub claim: String,
    pub node: NodeName,
    /// The pods of this cycle's binds that use it (`reservedFor`).
    pub pods: Vec<TaskKey>,
    /// The devices allocated by this cycle; `None` when the claim was
    /// allocated before and the pods only join it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Vec<trainyard_model::dra::AllocatedDevice>>,
    /// Set for the claim of a pod's DRA-backed extended resources
    /// (KEP-5004), which does not exist yet: the resources it serves (its
    /// request is `request-0`). `claim` is then `namespace/<pod>-extended-resources`,
    /// the name the claim is to be created with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extended: Vec<String>,
}
