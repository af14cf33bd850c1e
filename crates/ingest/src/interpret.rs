//! The loader's interpretation, object by object, for an incremental world
//! state (`trainyard_cluster`): which job a pod joins, a job from its pods
//! and its PodGroup, a pod of another scheduler as an external pod, the
//! queue tree from the Queues. [`crate::load`] composes the same pieces for
//! a whole set of files at once; a test checks that applying objects one by
//! one gives the snapshot a load of the same objects gives.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use trainyard_crd::{PodGroup, Queue, TopologyDocument};
use trainyard_model::topology::Topology;
use trainyard_model::{ExternalPod, Job, Node, QueueTree};

use crate::assemble::UsableTree;
use crate::assemble::{Ctx, GpuMemory, JobDraft, JobKey, build_job, member, reject_if_bad_queue};
use crate::dra::{DraObjects, PodClaims};
use crate::k8s::PodInfo;
use crate::read::{Loc, Reader};
use crate::{LoadError, LoadOptions, Source, topology};

/// Every object read from a set of sources, before any is interpreted.
#[derive(Debug, Default)]
pub struct Objects {
    pub nodes: Vec<(Loc, Node)>,
    pub pods: Vec<(Loc, PodInfo)>,
    pub priority_classes: BTreeMap<String, i32>,
    /// Priority classes with `preemptionPolicy: Never`.
    pub never_classes: BTreeSet<String>,
    pub queues: Vec<(Loc, Queue)>,
    pub pod_groups: Vec<(Loc, PodGroup)>,
    /// Kubernetes' `scheduling.k8s.io` Workloads (checked; their
    /// PodGroups carry what Trainyard reads of them).
    pub workloads: Vec<(Loc, trainyard_crd::podgroup::upstream::Workload)>,
    pub topology: Option<(Loc, TopologyDocument)>,
    /// DRA objects (`resource.k8s.io`).
    pub dra: DraObjects,
    /// Problems found while reading (bad documents, bad fields).
    pub errors: Vec<LoadError>,
    pub warnings: Vec<String>,
}

/// Reads every source into typed objects (no assembly).
pub fn read(sources: &[Source]) -> Objects {
    let mut reader = Reader::default();
    for s in sources {
        reader.read_source(s);
    }
    reader.objects
}

/// Reads one object that came alone, not from a file: an item of an API
/// list or the object of a watch event, as JSON. The same reader as
/// [`read`]'s, object for object, so a cluster read through the API and the
/// same objects in a file give the same values; messages name `origin`
/// (e.g. `watch pods`) where a file's name its source and document.
pub fn read_object(value: &serde_json::Value, origin: &str) -> Objects {
    let mut reader = Reader::default();
    reader.read_object(value, origin);
    reader.objects
}

/// What a pod is to the scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodRole {
    /// Ours, and not finished: a member of this job.
    Member(JobKey),
    /// Another scheduler's pod on a node: capacity held.
    External(ExternalPod),
    /// Finished, or pending for another scheduler.
    Ignored,
}

/// The pod's role (see [`PodRole`]), as the loader decides it.
pub fn pod_role(pod: &PodInfo, opts: &LoadOptions) -> PodRole {
    if pod.terminal {
        return PodRole::Ignored;
    }
    if pod.scheduler != opts.scheduler_name {
        return match &pod.node_name {
            Some(node) => PodRole::External(pod.external(node)),
            None => PodRole::Ignored,
        };
    }
    PodRole::Member(JobKey::of(pod))
}

/// The part of the loader that depends on the cluster as a whole (options,
/// priority classes, nodes and their topology), ready to interpret one job
/// at a time. Rebuilt when one of those changes.
pub struct Interpreter {
    cx: Ctx,
    memory: GpuMemory,
}

/// A job interpreted from its pods and PodGroup, with what was wrong.
#[derive(Clone, Debug)]
pub struct Interpreted {
    pub job: Job,
    /// Problems that a whole-file load would refuse; an incremental state
    /// rejects the job with them instead.
    pub errors: Vec<LoadError>,
    pub warnings: Vec<String>,
}

impl Interpreter {
    /// The context of `nodes`, `priority_classes` and the Topology document.
    /// Problems of the topology are returned with it.
    pub fn new(
        opts: &LoadOptions,
        nodes: &[(Loc, Node)],
        priority_classes: BTreeMap<String, i32>,
        never_classes: BTreeSet<String>,
        topology_doc: Option<&(Loc, TopologyDocument)>,
    ) -> (Interpreter, Vec<LoadError>, Vec<String>) {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        let topology = topology::build(nodes, topology_doc, &mut errors, &mut warnings);
        let cx = Ctx::new(opts, nodes, priority_classes, never_classes, topology);
        let memory = GpuMemory::of(nodes);
        (Interpreter { cx, memory }, errors, warnings)
    }

    /// What each pod of ours claims ([`crate::dra::build`]'s `pods`):
    /// read by [`Interpreter::job`] for the tasks' claims. Jobs whose
    /// pods' entries change must be interpreted again.
    pub fn set_pod_claims(&mut self, pods: Arc<BTreeMap<String, PodClaims>>) {
        self.cx.pod_claims = pods;
    }

    /// The topology built from the nodes and the document, if any.
    pub fn topology(&self) -> Option<Arc<Topology>> {
        self.cx.topology.topology.clone()
    }

    /// The job of `key` from its pods (each of whose role is
    /// `Member(key)`) and its PodGroup, if one exists.
    pub fn job(
        &mut self,
        key: &JobKey,
        pods: &[(Loc, PodInfo)],
        group: Option<&(Loc, PodGroup)>,
        strangers: &[(String, String)],
    ) -> Interpreted {
        let mut pods: Vec<(Loc, PodInfo)> = pods.to_vec();
        let opts = self.cx.opts.clone();
        self.memory
            .set_shares(&mut pods, &opts, &mut self.cx.warnings);
        let mut draft = JobDraft {
            namespace: key.namespace.clone(),
            group: key.group.then(|| key.name.clone()),
            members: Vec::with_capacity(pods.len()),
            strangers: strangers.to_vec(),
        };
        for (loc, pod) in pods {
            let (_, m) = member(&mut self.cx, loc, pod);
            draft.members.push(m);
        }
        let job = build_job(&mut self.cx, draft, group);
        self.cx.flush_unresolved();
        Interpreted {
            job,
            errors: std::mem::take(&mut self.cx.errors),
            warnings: std::mem::take(&mut self.cx.warnings),
        }
    }
}

/// The tree of every Queue that can be used, and why each other one
/// cannot ([`UsableTree`]): the one rule of files and live watches.
pub fn usable_tree(queues: &[(Loc, Queue)], default_used: bool, opts: &LoadOptions) -> UsableTree {
    crate::assemble::usable_queue_tree(queues, default_used, opts)
}

/// Marks `job` rejected when its queue does not exist, is not a leaf, or
/// was left out of the tree (with that queue's reason).
pub fn check_queue_usable(tree: &QueueTree, excluded: &BTreeMap<String, String>, job: &mut Job) {
    if let Some(why) = excluded.get(&job.queue) {
        job.rejected = Some(format!(
            "queue {:?} is invalid and not scheduled: {why}; fix the Queue (kubectl describe queue {})",
            job.queue, job.queue
        ));
        return;
    }
    reject_if_bad_queue(tree, job);
}
