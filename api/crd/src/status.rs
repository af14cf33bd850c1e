//! The `status` of Trainyard's resources: what the scheduler reports back
//! through the API (the status subresource), never read as input.
//!
//! Quantities are Kubernetes quantities in canonical form (`16`, `500m`,
//! `64Gi`), keyed by resource name, as `Node.status.allocatable` is.
//! Conditions are `metav1.Condition`s: `type`, `status`, `reason`,
//! `message`, `lastTransitionTime`, `observedGeneration`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `status` of a `Queue`, written by the scheduler after each cycle that
/// changed it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// Resources held by the queue's running and bound pods (this queue and
    /// the queues below it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, crate::RawQuantity>")]
    pub allocated: BTreeMap<String, Quantity>,
    /// Resources asked for by its pending jobs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, crate::RawQuantity>")]
    pub requested: BTreeMap<String, Quantity>,
    /// The queue's fair share per resource in the last cycle: its quota
    /// plus its weighted part of what other queues left over (hierarchical
    /// weighted DRF).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, crate::RawQuantity>")]
    pub fair_share: BTreeMap<String, Quantity>,
    /// Jobs waiting in this queue (and the queues below it).
    #[serde(default)]
    pub pending_jobs: u32,
    /// Jobs with pods bound or running.
    #[serde(default)]
    pub running_jobs: u32,
    /// `Ready` (the queue is valid and in the tree), `OverQuota` (it uses
    /// more than its quota), `AtLimit` (a job waits on its limit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["type"]
    ))]
    pub conditions: Vec<Condition>,
    /// `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Where a gang is in its life.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum PodGroupPhase {
    /// Waiting: its minimum is not placed (see the `Scheduled` condition).
    Pending,
    /// Its minimum is placed and bound; not all pods run yet.
    Scheduled,
    /// At least its minimum runs.
    Running,
    /// Its pods finished successfully.
    Succeeded,
    /// Its pods failed.
    Failed,
    /// Reclaim, preemption or a repair is evicting it.
    Evicting,
    /// No pods are left: preemption (a higher-priority job) took them.
    Preempted,
    /// No pods are left: reclaim (another queue taking back its quota)
    /// took them.
    Reclaimed,
    /// No pods are left: they were evicted for another cause (a repair of
    /// an incomplete gang, a walltime, a rule between pods, a drain).
    Evicted,
    /// No pods are left: they were deleted (not by Trainyard).
    Deleted,
}

impl PodGroupPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            PodGroupPhase::Pending => "Pending",
            PodGroupPhase::Scheduled => "Scheduled",
            PodGroupPhase::Running => "Running",
            PodGroupPhase::Succeeded => "Succeeded",
            PodGroupPhase::Failed => "Failed",
            PodGroupPhase::Evicting => "Evicting",
            PodGroupPhase::Preempted => "Preempted",
            PodGroupPhase::Reclaimed => "Reclaimed",
            PodGroupPhase::Evicted => "Evicted",
            PodGroupPhase::Deleted => "Deleted",
        }
    }
}

/// `status` of a `PodGroup`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PodGroupPhase>,
    /// When `phase` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_transition_time: Option<Time>,
    /// Pods bound to a node (running or not).
    #[serde(default)]
    pub scheduled: u32,
    /// Pods running.
    #[serde(default)]
    pub running: u32,
    /// Pods that finished successfully.
    #[serde(default)]
    pub succeeded: u32,
    /// Pods that failed.
    #[serde(default)]
    pub failed: u32,
    /// `Scheduled`: `False` while the gang waits, with the core's pending
    /// reason (`reason`, e.g. `Unschedulable`, `QueueLimit`,
    /// `GangIncomplete`) and its message; `True` once its minimum is bound.
    /// `Evicted`: `True` while Trainyard evicts the group's pods and once
    /// they are gone, with the rule (`Preempted`, `Reclaimed`,
    /// `IncompleteGang`, `WalltimeExceeded`) and its message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["type"]
    ))]
    pub conditions: Vec<Condition>,
    /// `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `status` of a `Topology`: what the scheduler built from it and the
/// nodes' labels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyStatus {
    /// Levels, tightest first, with their number of domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<TopologyLevelStatus>,
    /// Nodes placed in the topology.
    #[serde(default)]
    pub nodes: u32,
    /// `Ready`: `True` when the topology was built; `False` with the
    /// problems otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["type"]
    ))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// One level of a built topology.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevelStatus {
    pub name: String,
    pub domains: u32,
}
