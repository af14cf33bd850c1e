//! Trainyard's data model.
//!
//! Everything the scheduling core reasons about: integer resource vectors,
//! nodes with their GPU devices one by one, tasks (pods) with placement
//! constraints, jobs (gangs) with sub-groups, the queue tree, and the cluster
//! snapshot that bundles them. This crate is pure: no I/O, no clock, no
//! global state. Parsing user-facing documents lives in `trainyard-crd` and
//! `trainyard-ingest`; scheduling lives in `trainyard-sched`.

pub mod dra;
pub mod ids;
pub mod job;
pub mod node;
pub mod podrules;
pub mod queue;
pub mod resources;
pub mod runtimes;
pub mod snapshot;
pub mod time;
pub mod usage;

pub use ids::{JobId, NodeName, TaskKey};
pub use job::{
    DEFAULT_GRACE_SECONDS, GroupProblem, Job, Nomination, PlacementConstraints, SubGroup, Task,
    TaskState, TopologyConstraint,
};
pub use node::{
    GpuDevice, LabelSelectorOperator, Node, NodeSelectorRequirement, NodeSelectorTerm, Taint,
    TaintEffect, Toleration, TolerationOperator,
};
pub use podrules::{
    HostPort, InclusionPolicy, LabelSelector, NamespaceFilter, PodAffinityTerm, PodRules,
    SpreadConstraint, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
pub use queue::{QueueError, QueueId, QueueSpec, QueueTree};
pub use resources::{Limits, ResourceName, Resources};
pub use runtimes::RuntimeSamples;
pub use snapshot::{ExternalPod, Snapshot};
pub use time::{Timestamp, format_seconds, format_utc_minute};
pub use trainyard_topology as topology;
pub use usage::{Usage, exp2_neg_q32};
