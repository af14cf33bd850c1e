//! The simulator's workload unit.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use trainyard_model::{
    PlacementConstraints, Resources, SubGroup, Task, TaskKey, TaskState, Timestamp,
    TopologyConstraint,
};

use crate::preemption::LostWork;

/// One group of identical tasks of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimTask {
    pub count: u32,
    pub requests: Resources,
    pub subgroup: Option<String>,
    pub constraints: Arc<PlacementConstraints>,
}

/// A job to replay: when it arrives, where it queues, what it asks for and
/// how long its tasks run once started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimJob {
    /// Unique id (`namespace/name` style).
    pub id: String,
    pub queue: String,
    pub priority: i32,
    pub submit: Timestamp,
    /// Run time of every task, in milliseconds, from the task's start.
    pub duration_ms: u64,
    /// Gang minimum; defaults to the number of tasks.
    pub min_member: u32,
    pub subgroups: Vec<SubGroup>,
    /// Topology constraints of the whole gang (level names of the cluster's
    /// topology); none by default.
    #[serde(default)]
    pub topology: TopologyConstraint,
    pub tasks: Vec<SimTask>,
    /// May be evicted by reclaim or preemption. Workloads default to
    /// preemptible below priority 100, as snapshots do
    /// (`trainyard_crd::preemption::default_preemptible`).
    #[serde(default = "yes")]
    pub preemptible: bool,
    /// What the job loses when it is killed; `None`: the run's model
    /// ([`crate::preemption::EvictionModel`]).
    #[serde(default)]
    pub lost_work: Option<LostWork>,
    /// The longest the job may run from a start (seconds), as declared;
    /// `None`: its queue's default walltime, else its queue's maximum, else
    /// none. A start that would
    /// run past it is ended there: the job is `timed_out`.
    #[serde(default)]
    pub walltime_seconds: Option<u64>,
    /// Why the job can never run as submitted, when its input says so
    /// (e.g. a Kubernetes object dump whose PodGroup is missing or whose
    /// pods disagree): the engine records it rejected with this reason
    /// and never submits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

fn yes() -> bool {
    true
}

impl SimJob {
    pub fn task_count(&self) -> u32 {
        self.tasks.iter().map(|t| t.count).sum()
    }

    /// The job's tasks, all pending, named `<id>#<n>` in order, each
    /// taking `grace_seconds` to go once evicted.
    pub fn pending_tasks(&self, grace_seconds: u64) -> Vec<Task> {
        let mut tasks = Vec::with_capacity(self.task_count() as usize);
        for group in &self.tasks {
            for _ in 0..group.count {
                let name = task_name(&self.id, tasks.len() as u32);
                tasks.push(Task {
                    claims: Vec::new(),
                    key: TaskKey::named(name.clone()),
                    name,
                    subgroup: group.subgroup.clone(),
                    requests: group.requests.clone(),
                    constraints: group.constraints.clone(),
                    state: TaskState::Pending,
                    started: None,
                    terminating: false,
                    grace_seconds: Some(grace_seconds),
                    nomination: None,
                    rank: Some(tasks.len() as u32),
                    labels: Default::default(),
                    // Every simulated job has a controller that
                    // recreates its pods (consolidation may move it).
                    controller: Some(format!("SimJob/{}", self.id)),
                });
            }
        }
        tasks
    }

    /// Requests of the gang minimum: the first `min_member` tasks in order.
    pub fn min_requests(&self) -> Resources {
        let mut min = Resources::zero();
        let mut left = self.min_member;
        for t in &self.tasks {
            let n = t.count.min(left);
            min.add(&t.requests.scaled(n as u64));
            left -= n;
        }
        min
    }

    /// Total GPUs (milli-GPU) of all tasks.
    pub fn gpu_milli(&self) -> u64 {
        self.tasks
            .iter()
            .map(|t| t.requests.gpu * t.count as u64)
            .sum()
    }
}

/// Name of task `i` of job `job`.
pub fn task_name(job: &str, i: u32) -> String {
    format!("{job}#{i}")
}
