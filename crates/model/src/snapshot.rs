//! The cluster snapshot: the whole input of one scheduling cycle.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
pub use trainyard_topology::Topology;

use crate::job::Job;
use crate::node::Node;
use crate::queue::QueueTree;
use crate::resources::Resources;

/// A pod Trainyard does not schedule (another scheduler's, a DaemonSet's)
/// that holds capacity on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalPod {
    pub name: String,
    pub node: String,
    pub requests: Resources,
    /// Device indices held, when known.
    pub gpus: Option<Vec<u32>>,
}

/// Everything one cycle needs. The core canonicalises order itself, so the
/// order of the vectors does not change decisions.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub nodes: Vec<Node>,
    pub queues: QueueTree,
    pub jobs: Vec<Job>,
    pub external: Vec<ExternalPod>,
    /// The network topology over the nodes, when known. Built and
    /// validated at the edge (snapshot loader, simulator) once; shared.
    #[serde(default)]
    pub topology: Option<Arc<Topology>>,
}
