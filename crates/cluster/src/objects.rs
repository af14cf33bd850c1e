//! Kubernetes-shaped objects kept by key, and the jobs interpreted from
//! them, rebuilt only where something changed.
//!
//! The interpretation is `trainyard_ingest`'s, the same the whole-file
//! loader uses; this layer decides *what* to interpret again: the job of a
//! changed pod or PodGroup; every job when the context changes (nodes'
//! labels or GPUs, priority classes, the Topology document); the queue
//! check of every job when the queue tree changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use trainyard_crd::{PodGroup, Queue, TopologyDocument};
use trainyard_ingest::dra::{DeviceClass, DraKind, DraObject, DraObjects, PodClaims};
use trainyard_ingest::{
    Interpreter, JobKey, LoadError, LoadOptions, Loc, PodInfo, PodRole,
    check_queue_usable as check_queue_in, pod_role, usable_tree,
};
use trainyard_model::dra::Dra;
use trainyard_model::{Job, Node, QueueTree};

/// A change to one Kubernetes-shaped object, as read (see
/// `trainyard_ingest::read`) or, later, watched.
#[derive(Clone, Debug)]
pub enum ObjectChange {
    Node(Loc, Box<Node>),
    NodeGone(String),
    Pod(Loc, Box<PodInfo>),
    PodGone {
        namespace: String,
        name: String,
    },
    PodGroup(Loc, Box<PodGroup>),
    PodGroupGone {
        namespace: String,
        name: String,
    },
    Queue(Loc, Box<Queue>),
    QueueGone(String),
    PriorityClass {
        name: String,
        value: i32,
        never: bool,
    },
    PriorityClassGone(String),
    /// The Topology document (at most one), or none.
    Topology(Option<Box<(Loc, TopologyDocument)>>),
    /// A DRA object (ResourceSlice, DeviceClass, ResourceClaim,
    /// ResourceClaimTemplate, DeviceTaintRule), added or changed.
    Dra(Loc, Box<DraObject>),
    /// The DRA object of `kind` with `key` (`name`, or `namespace/name`
    /// for claims and templates) is gone.
    DraGone {
        kind: DraKind,
        key: String,
    },
}

/// What is wrong with the objects: what a whole-file load would refuse
/// (`errors`) or warn about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problems {
    pub errors: Vec<LoadError>,
    pub warnings: Vec<String>,
}

type PodName = (String, String);

/// What the layer hands back to the world state after a refresh.
#[derive(Debug, Default)]
pub(crate) struct Refreshed {
    /// Jobs to upsert (interpreted and queue-checked) and job ids gone.
    pub jobs: Vec<Arc<Job>>,
    pub gone: Vec<String>,
    pub tree: Option<QueueTree>,
    /// The topology, when the context was rebuilt.
    pub topology: Option<Option<Arc<trainyard_model::topology::Topology>>>,
    /// The DRA part, when it was rebuilt.
    pub dra: Option<Arc<Dra>>,
}

#[derive(Default)]
pub(crate) struct Objects {
    opts: LoadOptions,
    nodes: BTreeMap<String, (Loc, Node)>,
    classes: BTreeMap<String, (i32, bool)>,
    topology_doc: Option<(Loc, TopologyDocument)>,
    queues: BTreeMap<String, (Loc, Queue)>,
    pods: BTreeMap<PodName, (Loc, PodInfo)>,
    groups: BTreeMap<PodName, (Loc, PodGroup)>,
    /// The job each member pod joins.
    job_of: BTreeMap<PodName, JobKey>,
    /// Pods of other schedulers naming a Kubernetes PodGroup by
    /// `spec.schedulingGroup.podGroupName`: the group's job is refused
    /// while any does (`SchedulerError`). By group, then pod, with its
    /// schedulerName; and each such pod's group.
    strangers: BTreeMap<PodName, BTreeMap<PodName, String>>,
    stranger_of: BTreeMap<PodName, PodName>,
    members: BTreeMap<JobKey, BTreeSet<PodName>>,
    /// Interpreted jobs before the queue check, by key.
    interpreted: BTreeMap<JobKey, Arc<Job>>,
    /// Problems of each job's interpretation.
    job_problems: BTreeMap<JobKey, Problems>,
    /// Problems of the context (topology) and of the queue tree.
    context_problems: Problems,
    tree_problems: Vec<LoadError>,
    dirty: BTreeSet<JobKey>,
    context_dirty: bool,
    queues_dirty: bool,
    interpreter: Option<Interpreter>,
    tree: QueueTree,
    /// Queues left out of the tree, by name, with the reason.
    excluded: BTreeMap<String, String>,
    default_used: bool,
    /// DRA objects, and whether the DRA part must be built again (a DRA
    /// object changed, or a pod that has or had claims).
    dra: DraObjects,
    dra_dirty: bool,
    /// What the last build gave: each pod of ours' claims, the classes,
    /// the warnings.
    pod_claims: Arc<BTreeMap<String, PodClaims>>,
    device_classes: BTreeMap<String, DeviceClass>,
    dra_problems: Problems,
    /// Selector matches of earlier builds (`trainyard_dra::MatchCache`).
    dra_matches: trainyard_dra::MatchCache,
    /// The last DRA part built: nodes whose DRA devices serve extended
    /// resources (GPUs slot by slot) are interpreted with them, so the
    /// topology counts their GPUs as files and the simulator do.
    last_dra: Arc<trainyard_model::dra::Dra>,
    /// Claims assumed allocated or reserved, laid over `dra`'s claims at
    /// each build (`crate::assume`).
    claims_assumed: crate::assume::ClaimsAssumed,
}

impl Objects {
    pub(crate) fn new(opts: LoadOptions) -> Objects {
        Objects {
            opts,
            context_dirty: true,
            queues_dirty: true,
            ..Objects::default()
        }
    }

    pub(crate) fn opts(&self) -> &LoadOptions {
        &self.opts
    }

    /// The claims assumed (a change builds the DRA part again at the next
    /// refresh).
    pub(crate) fn claims_assumed_mut(&mut self) -> &mut crate::assume::ClaimsAssumed {
        &mut self.claims_assumed
    }

    pub(crate) fn claims_assumed(&self) -> &crate::assume::ClaimsAssumed {
        &self.claims_assumed
    }

    /// Applies one change; returns the external pod it adds (`Some(Ok)`) or
    /// removes (`Some(Err(name))`), if any.
    pub(crate) fn apply(
        &mut self,
        change: ObjectChange,
    ) -> Option<Result<trainyard_model::ExternalPod, String>> {
        match change {
            ObjectChange::Node(loc, node) => {
                let same_context = self
                    .nodes
                    .get(&node.name)
                    .is_some_and(|(_, old)| old.labels == node.labels && old.gpus == node.gpus);
                if !same_context {
                    self.context_dirty = true;
                }
                self.nodes.insert(node.name.clone(), (loc, *node));
            }
            ObjectChange::NodeGone(name) => {
                if self.nodes.remove(&name).is_some() {
                    self.context_dirty = true;
                }
            }
            ObjectChange::Pod(loc, pod) => {
                let name = (pod.namespace.clone(), pod.name.clone());
                let had_claims = self.pods.get(&name).is_some_and(|(_, p)| !p.dra.is_empty());
                self.dra_dirty |= had_claims || !pod.dra.is_empty();
                let was_external = self.leave(&name);
                let role = pod_role(&pod, &self.opts);
                if !matches!(role, PodRole::Member(_))
                    && !pod.terminal
                    && let Some(g) = &pod.scheduling_group
                {
                    let group = (pod.namespace.clone(), g.clone());
                    self.strangers
                        .entry(group.clone())
                        .or_default()
                        .insert(name.clone(), pod.scheduler.clone());
                    self.dirty.insert(group_job(&group));
                    self.stranger_of.insert(name.clone(), group);
                }
                let out = match role {
                    PodRole::Member(key) => {
                        self.members
                            .entry(key.clone())
                            .or_default()
                            .insert(name.clone());
                        self.job_of.insert(name.clone(), key.clone());
                        self.dirty.insert(key);
                        was_external.then(|| Err(pod.key()))
                    }
                    PodRole::External(p) => Some(Ok(p)),
                    PodRole::Ignored => was_external.then(|| Err(pod.key())),
                };
                self.pods.insert(name, (loc, *pod));
                return out;
            }
            ObjectChange::PodGone { namespace, name } => {
                let key = (namespace, name);
                let was_external = self.leave(&key);
                if let Some((_, p)) = self.pods.remove(&key) {
                    self.dra_dirty |= !p.dra.is_empty();
                }
                return was_external.then(|| Err(format!("{}/{}", key.0, key.1)));
            }
            ObjectChange::PodGroup(loc, pg) => {
                let key = (pg.namespace().to_string(), pg.metadata.name.clone());
                self.dirty.insert(group_job(&key));
                self.groups.insert(key, (loc, *pg));
            }
            ObjectChange::PodGroupGone { namespace, name } => {
                let key = (namespace, name);
                self.dirty.insert(group_job(&key));
                self.groups.remove(&key);
            }
            ObjectChange::Queue(loc, q) => {
                self.queues.insert(q.metadata.name.clone(), (loc, *q));
                self.queues_dirty = true;
            }
            ObjectChange::QueueGone(name) => {
                self.queues_dirty |= self.queues.remove(&name).is_some();
            }
            ObjectChange::PriorityClass { name, value, never } => {
                if self.classes.insert(name, (value, never)) != Some((value, never)) {
                    self.context_dirty = true;
                }
            }
            ObjectChange::PriorityClassGone(name) => {
                self.context_dirty |= self.classes.remove(&name).is_some();
            }
            ObjectChange::Topology(doc) => {
                self.topology_doc = doc.map(|d| *d);
                self.context_dirty = true;
            }
            ObjectChange::Dra(loc, object) => {
                self.dra.upsert(loc, *object);
                self.dra_dirty = true;
            }
            ObjectChange::DraGone { kind, key } => {
                self.dra_dirty |= self.dra.remove(kind, &key);
            }
        }
        None
    }

    /// DeviceClasses by name, as of the last refresh.
    pub(crate) fn device_classes(&self) -> &BTreeMap<String, DeviceClass> {
        &self.device_classes
    }

    /// Builds the DRA part again (the loader's one construction, over
    /// every pod): the jobs of pods whose claims resolve differently are
    /// marked for interpretation.
    fn rebuild_dra(&mut self, out: &mut Refreshed) {
        self.dra_dirty = false;
        let (replaced, shown) = self.claims_assumed.lay_over(&mut self.dra, &self.pods);
        let nodes = &self.nodes;
        let node_has = |node: &str, resource: &str| {
            nodes.get(node).is_some_and(|(_, n)| {
                n.allocatable
                    .get(&trainyard_model::ResourceName::parse(resource))
                    > 0
            })
        };
        let built = trainyard_ingest::dra::build_with(
            &self.dra,
            self.pods
                .iter()
                .map(|(k, (_, p))| shown.get(k).unwrap_or(p)),
            &self.opts,
            &node_has,
            &mut self.dra_matches,
        );
        crate::assume::put_back(&mut self.dra, replaced);
        let old = &self.pod_claims;
        let changed: BTreeSet<&String> = old
            .keys()
            .chain(built.pods.keys())
            .filter(|k| old.get(*k) != built.pods.get(*k))
            .collect();
        for pod in changed {
            if let Some((ns, name)) = pod.split_once('/')
                && let Some(key) = self.job_of.get(&(ns.to_string(), name.to_string()))
            {
                self.dirty.insert(key.clone());
            }
        }
        self.pod_claims = Arc::new(built.pods);
        self.device_classes = built.classes;
        self.dra_problems = Problems {
            errors: Vec::new(),
            warnings: built.warnings,
        };
        if built.dra.backed != self.last_dra.backed {
            // The nodes' GPU slots changed: the topology counts them.
            self.context_dirty = true;
        }
        let dra = Arc::new(built.dra);
        self.last_dra = Arc::clone(&dra);
        out.dra = Some(dra);
        if let Some(interp) = self.interpreter.as_mut() {
            interp.set_pod_claims(Arc::clone(&self.pod_claims));
        }
    }

    /// Takes pod `name` out of its job (marking the job dirty); returns
    /// whether it was an external pod.
    fn leave(&mut self, name: &PodName) -> bool {
        if let Some(group) = self.stranger_of.remove(name) {
            if let Some(s) = self.strangers.get_mut(&group) {
                s.remove(name);
                if s.is_empty() {
                    self.strangers.remove(&group);
                }
            }
            self.dirty.insert(group_job(&group));
        }
        if let Some(key) = self.job_of.remove(name) {
            if let Some(m) = self.members.get_mut(&key) {
                m.remove(name);
            }
            self.dirty.insert(key);
            return false;
        }
        self.pods
            .get(name)
            .is_some_and(|(_, p)| matches!(pod_role(p, &self.opts), PodRole::External(_)))
    }

    /// Interprets again what changed since the last refresh.
    pub(crate) fn refresh(&mut self) -> Refreshed {
        let mut out = Refreshed::default();
        // DRA first: the nodes it serves GPUs on are part of the context.
        if self.claims_assumed.take_changed() | self.dra_dirty {
            self.rebuild_dra(&mut out);
        }
        if self.context_dirty || self.interpreter.is_none() {
            self.context_dirty = false;
            let nodes: Vec<(Loc, Node)> = self
                .nodes
                .values()
                .map(|(loc, n)| {
                    let n = match self.last_dra.backed.get(&n.name) {
                        None => n.clone(),
                        Some(_) => {
                            let one = self.last_dra.with_extended(&[Arc::new(n.clone())]);
                            one.into_iter()
                                .next()
                                .map_or_else(|| n.clone(), Arc::unwrap_or_clone)
                        }
                    };
                    (loc.clone(), n)
                })
                .collect();
            let classes = self
                .classes
                .iter()
                .map(|(k, (v, _))| (k.clone(), *v))
                .collect();
            let never = self
                .classes
                .iter()
                .filter(|(_, (_, n))| *n)
                .map(|(k, _)| k.clone())
                .collect();
            let (interp, errors, warnings) = Interpreter::new(
                &self.opts,
                &nodes,
                classes,
                never,
                self.topology_doc.as_ref(),
            );
            out.topology = Some(interp.topology());
            self.context_problems = Problems { errors, warnings };
            let mut interp = interp;
            interp.set_pod_claims(Arc::clone(&self.pod_claims));
            self.interpreter = Some(interp);
            self.dirty.extend(self.members.keys().cloned());
            self.dirty.extend(self.interpreted.keys().cloned());
        }
        let Some(interp) = self.interpreter.as_mut() else {
            return out;
        };
        let dirty = std::mem::take(&mut self.dirty);
        for key in &dirty {
            let pods: Vec<(Loc, PodInfo)> = self
                .members
                .get(key)
                .into_iter()
                .flatten()
                .filter_map(|p| self.pods.get(p).cloned())
                .collect();
            if pods.is_empty() {
                self.members.remove(key);
                self.job_problems.remove(key);
                self.interpreted.remove(key);
                continue;
            }
            let group = key
                .group
                .then(|| self.groups.get(&(key.namespace.clone(), key.name.clone())))
                .flatten();
            let strangers: Vec<(String, String)> = if key.group {
                self.strangers
                    .get(&(key.namespace.clone(), key.name.clone()))
                    .into_iter()
                    .flatten()
                    .map(|((ns, pod), scheduler)| (format!("{ns}/{pod}"), scheduler.clone()))
                    .collect()
            } else {
                Vec::new()
            };
            let mut done = interp.job(key, &pods, group, &strangers);
            if let Some(first) = done.errors.first() {
                done.job.rejected = Some(if done.errors.len() == 1 {
                    first.to_string()
                } else {
                    format!("{first} (and {} more problems)", done.errors.len() - 1)
                });
            }
            self.job_problems.insert(
                key.clone(),
                Problems {
                    errors: done.errors,
                    warnings: done.warnings,
                },
            );
            self.interpreted.insert(key.clone(), Arc::new(done.job));
        }
        // The implicit default queue exists while a job uses it.
        let default_used = self
            .interpreted
            .values()
            .any(|j| j.queue == self.opts.default_queue);
        let tree_changed = self.queues_dirty || default_used != self.default_used;
        if tree_changed {
            self.queues_dirty = false;
            self.default_used = default_used;
            let queues: Vec<(Loc, Queue)> = self.queues.values().cloned().collect();
            // One bad Queue never stops the others: it is left out with
            // its reason, its jobs pend with that reason.
            let usable = usable_tree(&queues, default_used, &self.opts);
            self.tree = usable.tree;
            self.excluded = usable.excluded;
            self.tree_problems = usable.errors;
            out.tree = Some(self.tree.clone());
        }
        // The world's job of each id touched: a group-less pod and a group
        // of the same name share the id `namespace/name`; the group-less
        // pod keeps it, as in a whole-file load, and the group is refused.
        // A new tree touches every job (its queue may have changed), and
        // the dirty ones always: a job whose last pod went is no longer
        // among the interpreted, and must still be reported gone.
        let mut touched: BTreeSet<(String, String)> = dirty
            .iter()
            .map(|k| (k.namespace.clone(), k.name.clone()))
            .collect();
        if tree_changed {
            touched.extend(
                self.interpreted
                    .keys()
                    .map(|k| (k.namespace.clone(), k.name.clone())),
            );
        }
        for (namespace, name) in touched {
            let [alone, group] = [false, true].map(|group| JobKey {
                namespace: namespace.clone(),
                group,
                name: name.clone(),
            });
            let (winner, loser) = match (self.interpreted.get(&alone), self.interpreted.get(&group))
            {
                (Some(j), other) => (j, other.map(|_| &group)),
                (None, Some(j)) => (j, None),
                (None, None) => {
                    out.gone.push(alone.id());
                    continue;
                }
            };
            let mut job = Arc::clone(winner);
            if job.rejected.is_none() {
                let mut checked = (*job).clone();
                check_queue_in(&self.tree, &self.excluded, &mut checked);
                if checked.rejected.is_some() {
                    job = Arc::new(checked);
                }
            }
            out.jobs.push(job);
            if let Some(loser) = loser
                && let Some(p) = self.job_problems.get_mut(loser)
            {
                p.errors.push(LoadError {
                    source_name: String::new(),
                    document: None,
                    object: Some(format!("PodGroup {}", loser.id())),
                    field: None,
                    message: format!(
                        "job id {:?} is used both by group-less pod {} and by group {:?}; rename the pod or the group",
                        loser.id(),
                        loser.id(),
                        loser.name
                    ),
                });
            }
        }
        out
    }

    /// Queues left out of the tree, by name, with the reason.
    pub(crate) fn excluded_queues(&self) -> &BTreeMap<String, String> {
        &self.excluded
    }

    /// Every problem: the context's, the queue tree's, then each job's in
    /// key order.
    pub(crate) fn problems(&self) -> Problems {
        let mut p = self.context_problems.clone();
        p.warnings
            .extend(self.dra_problems.warnings.iter().cloned());
        p.errors.extend(self.tree_problems.iter().cloned());
        for jp in self.job_problems.values() {
            p.errors.extend(jp.errors.iter().cloned());
            p.warnings.extend(jp.warnings.iter().cloned());
        }
        p
    }
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects")
            .field("nodes", &self.nodes.len())
            .field("pods", &self.pods.len())
            .field("groups", &self.groups.len())
            .field("queues", &self.queues.len())
            .field("jobs", &self.interpreted.len())
            .field("dirty", &self.dirty.len())
            .finish_non_exhaustive()
    }
}

fn group_job(key: &PodName) -> JobKey {
    JobKey {
        namespace: key.0.clone(),
        group: true,
        name: key.1.clone(),
    }
}
