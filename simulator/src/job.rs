//! The simulator's workload unit.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use trainyard_model::{PlacementConstraints, Resources, SubGroup, Timestamp};

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
    pub tasks: Vec<SimTask>,
}

impl SimJob {
    pub fn task_count(&self) -> u32 {
        self.tasks.iter().map(|t| t.count).sum()
    }

    /// Total GPUs (milli-GPU) of all tasks.
    pub fn gpu_milli(&self) -> u64 {
        self.tasks
            .iter()
            .map(|t| t.requests.gpu * t.count as u64)
            .sum()
    }
}
