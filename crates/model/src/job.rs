//! Tasks (pods) and jobs (gangs).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::TaskKey;
use crate::node::{Node, NodeSelectorTerm, Taint, TaintEffect, Toleration};
use crate::podrules::PodRules;
use crate::resources::Resources;
use crate::time::Timestamp;

/// Where a task may run. Tasks of one job usually share one `Arc` of this,
/// which lets the core evaluate node filters once per distinct value.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PlacementConstraints {
    /// `spec.nodeSelector`: every label must match exactly.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: at least one term must match (empty = none).
    pub required_affinity: Vec<NodeSelectorTerm>,
    pub tolerations: Vec<Toleration>,
    /// GPU models the task may use (exact `GpuDevice::model` strings, sorted,
    /// no duplicates). Empty: any model.
    pub gpu_models: Vec<String>,
    /// A GPU share sized by device memory (bytes) instead of milli-GPU: on a
    /// device with `M` bytes the task takes `ceil(gpu_memory × 1000 / M)`
    /// milli-GPU of that one device, which others may share. Devices with
    /// unknown memory (0) or less memory than asked never qualify. The
    /// task's `requests.gpu` is then only the nominal share used for queue
    /// demand and limits before placement; see `docs/gpu-sharing.md`.
    pub gpu_memory: Option<u64>,
    /// Hard constraints the task asks for that Trainyard does not support
    /// yet (e.g. `resourceClaims`). A task with any is never placed; its job
    /// stays pending with an unsupported-feature reason.
    pub unsupported: Vec<String>,
    /// What the pod waits for before it can be placed at all, e.g. a
    /// ResourceClaim that does not exist yet (`waiting for ResourceClaim
    /// ml/x to be created`): its job pends with these words, and is tried
    /// again when the world changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
    /// Rules about other pods: inter-pod (anti-)affinity, topology spread,
    /// host ports (`crate::podrules`). Empty for most tasks.
    #[serde(default, skip_serializing_if = "PodRules::is_empty")]
    pub pod_rules: PodRules,
    /// What the pod's DRA claims ask, by value (`crate::dra::ClaimNeed`);
    /// the claims themselves are `Task::claims`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<crate::dra::ClaimNeed>,
    /// Whole GPUs of the task's `requests.gpu` that its own DRA claims ask
    /// (devices of a class serving `nvidia.com/gpu`, see
    /// [`crate::dra::ClaimSpec::whole_devices`]). They count in quotas and
    /// are placed on GPU slots as any GPU is (rails, NVLink domains,
    /// fragmentation); the claim gets the devices of the slots chosen, and
    /// no extended-resource claim is made for them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub claimed_gpus: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl PlacementConstraints {
    pub fn selector_matches(&self, node: &Node) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
    }

    pub fn affinity_matches(&self, node: &Node) -> bool {
        self.required_affinity.is_empty() || self.required_affinity.iter().any(|t| t.matches(node))
    }

    /// Whether a device of this model may serve the task.
    pub fn gpu_model_allowed(&self, model: &str) -> bool {
        self.gpu_models.is_empty() || self.gpu_models.iter().any(|m| m == model)
    }

    /// The first `NoSchedule`/`NoExecute` taint of `node` this task does not tolerate.
    pub fn untolerated_taint<'n>(&self, node: &'n Node) -> Option<&'n Taint> {
        node.taints.iter().find(|t| {
            t.effect != TaintEffect::PreferNoSchedule
                && !self.tolerations.iter().any(|tol| tol.tolerates(t))
        })
    }
}

/// Whether a task already holds resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    /// Waiting to be placed.
    Pending,
    /// Bound to a node (running, or bound and starting). `gpus` are the
    /// device indices it holds when known; when `None`, the core assigns the
    /// lowest free devices deterministically for accounting.
    Bound {
        node: String,
        gpus: Option<Vec<u32>>,
    },
}

/// The grace period Kubernetes gives a pod that sets none (its API server
/// defaults `terminationGracePeriodSeconds` to 30).
pub const DEFAULT_GRACE_SECONDS: u64 = 30;

/// One pod of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Unique name, `namespace/pod`: the key as displayed, used for order
    /// and in messages.
    pub name: String,
    /// The pod's typed identity, carried into the decisions.
    #[serde(default)]
    pub key: TaskKey,
    /// Sub-group this task belongs to, if the job has sub-groups.
    pub subgroup: Option<String>,
    /// Effective requests (what Kubernetes would account for the pod).
    pub requests: Resources,
    pub constraints: Arc<PlacementConstraints>,
    pub state: TaskState,
    /// When the pod started running (bound tasks), if known.
    #[serde(default)]
    pub started: Option<Timestamp>,
    /// Being deleted (evicted or finishing): still holds its capacity, is
    /// never chosen as a victim again.
    #[serde(default)]
    pub terminating: bool,
    /// How long the pod may take to go once evicted (seconds): its
    /// `terminationGracePeriodSeconds`; `None`, unknown:
    /// [`DEFAULT_GRACE_SECONDS`] is assumed. A preemptor starts only once
    /// its victims are gone, so room it takes on nodes held for a
    /// reservation must stay free of it until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_seconds: Option<u64>,
    /// Capacity reserved for this pending task after evictions made room
    /// for it: the node, and when the nomination was made.
    #[serde(default)]
    pub nomination: Option<Nomination>,
    /// Rank index inside the gang (e.g. JobSet's or PyTorchJob's replica
    /// index), when known: neighbouring ranks are placed close together.
    #[serde(default)]
    pub rank: Option<u32>,
    /// The pod's labels: what other pods' affinity, anti-affinity and
    /// spread selectors match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The pod's controller (`Kind/name`, e.g. `ReplicaSet/web-7d9`): what
    /// recreates it once it is deleted; `None`, a bare pod, gone for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// The pod's DRA claims (`spec.resourceClaims`), in order; each names
    /// a claim of `Snapshot::dra`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<crate::dra::PodClaim>,
}

impl Task {
    pub fn is_pending(&self) -> bool {
        self.state == TaskState::Pending
    }
}

/// A pending task's reserved node (Kubernetes `status.nominatedNodeName`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nomination {
    pub node: String,
    pub since: Timestamp,
    /// GPU indices on `node` the preemptor was placed on, when known (from
    /// the decisions, or the pod's `trainyard.io/gpu-indices` annotation):
    /// the room held for it is exactly these devices, so two preemptors
    /// nominated to one node never take each other's.
    #[serde(default)]
    pub gpus: Option<Vec<u32>>,
}

/// A named part of a gang with its own minimum (e.g. "workers", "ps").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubGroup {
    pub name: String,
    pub min_member: u32,
    /// Where the sub-group's pods may sit, inside the gang's own domain.
    #[serde(default)]
    pub topology: TopologyConstraint,
}

/// Topology constraints of a gang or a sub-group. Level names are those of
/// the cluster's [`Topology`](trainyard_topology::Topology).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyConstraint {
    /// Never cross this level: every pod in one domain of it, else the gang
    /// stays pending with a reason.
    #[serde(default)]
    pub required: Option<String>,
    /// Try one domain of this level first; fall back to wider ones.
    #[serde(default)]
    pub preferred: Option<String>,
    /// At most this many leaf domains (leaf groups / ToRs), like Slurm's
    /// `--switches`.
    #[serde(default)]
    pub max_leaves: Option<u32>,
}

impl TopologyConstraint {
    pub fn is_empty(&self) -> bool {
        self.required.is_none() && self.preferred.is_none() && self.max_leaves.is_none()
    }
}

/// A job: a gang of tasks placed all-or-nothing up to `min_member`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Unique id, `namespace/name`.
    pub id: String,
    /// Leaf queue name.
    pub queue: String,
    /// Higher runs first within a queue.
    pub priority: i32,
    pub submit_time: Timestamp,
    /// Tasks that must be placed together (running tasks count). Tasks
    /// beyond it are elastic.
    pub min_member: u32,
    pub subgroups: Vec<SubGroup>,
    /// Topology constraints of the whole gang.
    #[serde(default)]
    pub topology: TopologyConstraint,
    /// May be evicted by reclaim or preemption. A job that is not runs only
    /// within its queues' quotas. See `docs/preemption.md` for the default.
    #[serde(default = "yes")]
    pub preemptible: bool,
    /// May evict other jobs (reclaim or preemption) to make room. `false`
    /// when its PriorityClass or a pod says `preemptionPolicy: Never`: it
    /// still runs where room is free, it never makes room.
    #[serde(default = "yes")]
    pub preempts: bool,
    pub tasks: Vec<Task>,
    /// A pending job evicts nobody (reclaim or preemption) until it has
    /// waited this long since `submit_time`, so an autoscaler can add
    /// nodes first. `None`: its queue's, inherited from the nearest
    /// ancestor, else the core's `preemption.delaySeconds`.
    #[serde(default)]
    pub preemption_delay_seconds: Option<u64>,
    /// The longest the job may run, from its start (seconds), as it
    /// declared it: the shortest of the PodGroup's `spec.walltime` and its
    /// pods' `activeDeadlineSeconds`. `None`: its queue's default
    /// (`QueueSpec::default_walltime_seconds`), else its queue's maximum,
    /// else no limit (`QueueTree::walltime`). A job
    /// running past its walltime is ended (the simulator; the service when
    /// `enforceWalltime` is on).
    #[serde(default)]
    pub walltime_seconds: Option<u64>,
    /// Set when the job can never be scheduled as submitted (e.g. its queue
    /// does not exist): the core reports it and places nothing.
    pub rejected: Option<String>,
    /// Set when the job's Kubernetes PodGroup (`scheduling.k8s.io`)
    /// keeps it from being placed: the group does not exist yet, or the
    /// pods contradict it. The core reports it and places nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_problem: Option<GroupProblem>,
    /// Evicted whole or not at all (a Kubernetes PodGroup's
    /// `disruptionMode` `all`, v1alpha2's `PodGroup`): reclaim and
    /// preemption never take only its pods above the minimum. Otherwise
    /// those pods may go one by one, and the gang's minimum goes whole.
    #[serde(default, skip_serializing_if = "is_false")]
    pub evict_whole: bool,
    /// When consolidation last moved it (`None`: never, or long enough
    /// ago): a job moved is not moved again within the configured period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_at: Option<Timestamp>,
}

/// Why a Kubernetes PodGroup keeps its job from being placed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum GroupProblem {
    /// Pods name a PodGroup (`spec.schedulingGroup.podGroupName`) that
    /// does not exist yet: they wait for it, as with kube-scheduler.
    Missing { group: String },
    /// The pods name different schedulers or priorities: kube-scheduler
    /// refuses such a group (`SchedulerError`).
    Mismatch { message: String },
}

impl Job {
    /// When the job started: the earliest start of its bound tasks that
    /// say (`None` when none does).
    pub fn started_at(&self) -> Option<Timestamp> {
        self.tasks
            .iter()
            .filter(|t| !t.is_pending())
            .filter_map(|t| t.started)
            .min()
    }

    /// Sum of the requests of all tasks (running and pending).
    pub fn total_requests(&self) -> Resources {
        let mut r = Resources::zero();
        for t in &self.tasks {
            r.add(&t.requests);
        }
        r
    }

    /// Sum of the requests of bound tasks.
    pub fn bound_requests(&self) -> Resources {
        let mut r = Resources::zero();
        for t in self.tasks.iter().filter(|t| !t.is_pending()) {
            r.add(&t.requests);
        }
        r
    }

    pub fn pending_count(&self) -> usize {
        self.tasks.iter().filter(|t| t.is_pending()).count()
    }

    /// A job with one task per request, all pending, no sub-groups,
    /// `min_member` = number of tasks. Convenient for tests and generators.
    pub fn gang(
        id: impl Into<String>,
        queue: impl Into<String>,
        task_requests: Vec<Resources>,
    ) -> Job {
        let id = id.into();
        let constraints = Arc::new(PlacementConstraints::default());
        let tasks: Vec<Task> = task_requests
            .into_iter()
            .enumerate()
            .map(|(i, requests)| Task {
                claims: Vec::new(),
                name: format!("{id}-{i}"),
                key: TaskKey::named(format!("{id}-{i}")),
                subgroup: None,
                requests,
                constraints: Arc::clone(&constraints),
                state: TaskState::Pending,
                started: None,
                terminating: false,
                grace_seconds: None,
                nomination: None,
                rank: None,
                labels: BTreeMap::new(),
                controller: None,
            })
            .collect();
        Job {
            moved_at: None,
            min_member: tasks.len() as u32,
            id,
            queue: queue.into(),
            priority: 0,
            submit_time: Timestamp(0),
            subgroups: Vec::new(),
            topology: TopologyConstraint::default(),
            preemptible: default_preemptible(0),
            preempts: true,
            tasks,
            preemption_delay_seconds: None,
            walltime_seconds: None,
            rejected: None,
            group_problem: None,
            evict_whole: false,
        }
    }

    /// Sets the priority and, as the snapshot loader does when nothing
    /// says otherwise, the preemptibility that goes with it
    /// ([`default_preemptible`]). Tests and generators build jobs this way
    /// so that they behave like loaded ones.
    pub fn with_priority(mut self, priority: i32) -> Job {
        self.priority = priority;
        self.preemptible = default_preemptible(priority);
        self
    }
}

/// Priority from which a job is not preemptible by default, after
/// KAI-Scheduler's convention (its `build` class is 100, `train` 50).
pub const NON_PREEMPTIBLE_PRIORITY: i32 = 100;

/// Preemptibility of a job whose PodGroup and pods do not say: below
/// [`NON_PREEMPTIBLE_PRIORITY`] it is preemptible.
pub fn default_preemptible(priority: i32) -> bool {
    priority < NON_PREEMPTIBLE_PRIORITY
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn yes() -> bool {
    true
}
