//! The cluster snapshot: the whole input of one scheduling cycle.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
pub use trainyard_topology::Topology;

use crate::job::Job;
use crate::node::Node;
use crate::podrules::PodRules;
use crate::queue::QueueTree;
use crate::resources::Resources;
use crate::runtimes::RuntimeSamples;
use crate::usage::Usage;

/// A pod Trainyard does not schedule (another scheduler's, a DaemonSet's)
/// that holds capacity on a node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalPod {
    pub name: String,
    pub node: String,
    pub requests: Resources,
    /// Device indices held, when known.
    pub gpus: Option<Vec<u32>>,
    /// The pod's namespace (its rules' default namespace and what other
    /// pods' terms filter on).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The pod's labels, for other pods' affinity and spread selectors.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Its own rules that bind others: required anti-affinity (symmetry)
    /// and host ports.
    #[serde(default, skip_serializing_if = "PodRules::is_empty")]
    pub pod_rules: Arc<PodRules>,
}

/// Everything one cycle needs. The core canonicalises order itself, so the
/// order of the vectors does not change decisions.
///
/// Nodes, jobs, external pods and the queue tree are shared (`Arc`): a
/// world state that changed one job
/// since the last snapshot builds that job again and shares the others, so
/// taking a snapshot costs what changed, not the cluster
/// (`trainyard_cluster::ClusterState::snapshot`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub nodes: Vec<Arc<Node>>,
    pub queues: Arc<QueueTree>,
    pub jobs: Vec<Arc<Job>>,
    pub external: Vec<Arc<ExternalPod>>,
    /// The network topology over the nodes, when known. Built and
    /// validated at the edge (snapshot loader, simulator) once; shared.
    #[serde(default)]
    pub topology: Option<Arc<Topology>>,
    /// Decayed usage by leaf queue name (`trainyard_cluster::usage`):
    /// what the fair share weighs over-quota capacity by when
    /// `fairShare.usageHalfLifeSeconds` is set. Missing queues used
    /// nothing.
    /// Shared: the cluster state publishes it once per recalculation
    /// period, and every snapshot until the next shares it.
    #[serde(default, skip_serializing_if = "empty")]
    pub usage: Arc<BTreeMap<String, Usage>>,
    /// The same, by leaf queue and then user (the job's namespace): what
    /// orders the jobs of one priority inside a leaf when the time-decayed
    /// fair share is on (the users' shares of their leaf's usage).
    #[serde(default, skip_serializing_if = "empty")]
    pub user_usage: Arc<BTreeMap<String, BTreeMap<String, Usage>>>,
    /// Observed runtimes by leaf queue name
    /// (`trainyard_cluster::ClusterState::track_runtimes`): what
    /// `reservations.runtimeEstimate` projects a running job's end from
    /// when it declares no walltime. Shared like `usage`.
    #[serde(default, skip_serializing_if = "empty")]
    pub runtimes: Arc<BTreeMap<String, RuntimeSamples>>,
    /// Dynamic Resource Allocation: devices per node, claims, selector
    /// matches (`crate::dra`). Empty on clusters without DRA.
    #[serde(default, skip_serializing_if = "dra_empty")]
    pub dra: Arc<crate::dra::Dra>,
}

fn dra_empty(d: &Arc<crate::dra::Dra>) -> bool {
    d.is_empty()
}

fn empty<K, V>(m: &Arc<BTreeMap<K, V>>) -> bool {
    m.is_empty()
}

impl Snapshot {
    /// A snapshot of owned values, shared from now on.
    pub fn new(nodes: Vec<Node>, queues: QueueTree, jobs: Vec<Job>) -> Self {
        Snapshot {
            nodes: nodes.into_iter().map(Arc::new).collect(),
            queues: Arc::new(queues),
            jobs: jobs.into_iter().map(Arc::new).collect(),
            external: Vec::new(),
            topology: None,
            usage: Arc::default(),
            user_usage: Arc::default(),
            runtimes: Arc::default(),
            dra: Arc::default(),
        }
    }

    pub fn with_external(mut self, external: Vec<ExternalPod>) -> Self {
        self.external = external.into_iter().map(Arc::new).collect();
        self
    }

    pub fn with_topology(mut self, topology: Option<Arc<Topology>>) -> Self {
        self.topology = topology;
        self
    }
}
