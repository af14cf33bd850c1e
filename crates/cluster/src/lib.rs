//! The one incremental world state.
//!
//! Every consumer that turns "what happened" into the next cycle's input
//! goes through [`ClusterState`]: the snapshot CLI (read objects, apply
//! each, snapshot), the simulator (its events and the core's decisions)
//! and, later, the live service (watch events) and the store (replay).
//!
//! Three layers, kept apart:
//!
//! - the **world**: nodes, jobs, external pods, the queue tree and the
//!   topology as the last [`Change`]s reported them;
//! - the **assumed** decisions ([`ClusterState::assume`]): binds,
//!   evictions, nominations and withdrawals the scheduler made and the world has not
//!   yet confirmed, laid over the world's jobs so that nothing is placed
//!   twice; a world change that shows the decision's effect confirms it,
//!   [`ClusterState::forget_assumed`] drops what was never confirmed;
//! - the **writes still owed** ([`ClusterState::writes`]): what the I/O
//!   edge must still do for the assumed decisions.
//!
//! [`ClusterState::snapshot`] returns the world with the assumptions laid
//! over it, in canonical order (nodes by name, jobs by id, external pods
//! by name). Nodes, jobs and external pods are shared (`Arc`), so a
//! snapshot after one change costs one rebuilt job and a pointer copy per
//! object, not a rebuild of the cluster.
//!
//! Pure: no I/O, no clock (time is a parameter), deterministic.

mod assume;
mod decode;
mod index;
mod live;
pub mod moves;
mod objects;
pub mod runtimes;
mod tracking;
pub mod usage;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use trainyard_model::topology::Topology;
use trainyard_model::{ExternalPod, Job, Node, QueueTree, Resources, Snapshot, Task, TaskKey};

pub use assume::{Applied, Assumption, ClaimAssumption, ClaimWrite, Effect, Write};
pub use decode::Decoded;
pub use moves::{Held, Moves};
pub use objects::{ObjectChange, Problems};
use trainyard_ingest::LoadOptions;

/// One thing that happened in the world. Upserts carry the whole object as
/// the world has it now.
#[derive(Clone, Debug)]
pub enum Change {
    Node(Node),
    NodeGone(String),
    Job(Job),
    JobGone(String),
    External(ExternalPod),
    ExternalGone(String),
    Queues(QueueTree),
    Topology(Option<Arc<Topology>>),
    /// A Kubernetes-shaped object changed: its jobs are interpreted again
    /// (by `trainyard_ingest`) when the next snapshot is taken. A state fed
    /// objects takes its jobs, external pods, queue tree and topology from
    /// them; the job-level changes above are for worlds without objects
    /// (the simulator).
    Object(ObjectChange),
    /// The world is exactly this (a relist, a restart): everything not in
    /// it is gone. Assumptions on jobs still present are kept and checked
    /// against the new state.
    Resync(Snapshot),
}

/// A note about a change that was applied but looked wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning(pub String);

/// The world, the assumed decisions over it, and the writes still owed.
#[derive(Debug, Default)]
pub struct ClusterState {
    nodes: BTreeMap<String, Arc<Node>>,
    /// Jobs as the world reported them.
    jobs: BTreeMap<String, Arc<Job>>,
    /// Position of each task by key, per job (the same in the world's job
    /// and its view: assumptions never add or remove tasks).
    task_pos: BTreeMap<String, index::TaskIndex>,
    /// Jobs with assumptions: the world's job with them applied.
    views: BTreeMap<String, Arc<Job>>,
    assumed: BTreeMap<String, Vec<Assumption>>,
    writes: Vec<Write>,
    /// Jobs of which some task carries a nomination (world or view).
    nominated: BTreeSet<String>,
    external: BTreeMap<String, Arc<ExternalPod>>,
    queues: Arc<QueueTree>,
    topology: Option<Arc<Topology>>,
    /// DRA devices, claims and selector matches (`trainyard_model::dra`),
    /// as the last resync or the objects' last DRA build gave them.
    dra: Arc<trainyard_model::dra::Dra>,
    /// The objects the jobs come from, when the world is fed objects.
    objects: Option<Box<objects::Objects>>,
    /// The last snapshot, and what changed since: the next one is this one
    /// patched (a job replaced, inserted or removed by id), not rebuilt.
    cache: Option<Arc<Snapshot>>,
    stale: Stale,
    /// Usage history, when the time-decayed fair share is on
    /// ([`ClusterState::track_usage`]), and its decayed totals as of the
    /// last [`ClusterState::sample_usage`].
    usage: Option<usage::UsageHistory>,
    decayed: Arc<BTreeMap<String, trainyard_model::Usage>>,
    decayed_users: Arc<BTreeMap<String, BTreeMap<String, trainyard_model::Usage>>>,
    /// What each job counted into the usage history's holdings at the
    /// last sample, and the jobs changed since (kept only with a history).
    usage_counted: std::collections::HashMap<String, (usage::Key, Resources)>,
    usage_dirty: BTreeSet<String>,
    /// Whether the snapshot does not carry the decayed usage
    /// ([`ClusterState::publish_usage`]; carried by default); and whether
    /// it is due at the next sample whatever the recalculation period says.
    usage_hidden: bool,
    usage_publish_due: bool,
    /// Whether the next sample is the first since `track_usage`: job
    /// accounts it opens start when the jobs' pods did.
    usage_backdate: bool,
    /// Per job holding something: what it used so far (accounting).
    job_usage: std::collections::HashMap<String, JobAccount>,
    /// Jobs that stopped holding anything since the last
    /// [`ClusterState::take_finished_jobs`].
    finished_jobs: Vec<usage::JobUsage>,
    /// Observed runtimes ([`ClusterState::track_runtimes`]), measured by
    /// the job accounts, and as the snapshots carry them.
    runtimes: Option<runtimes::RuntimeHistory>,
    runtime_samples: Arc<BTreeMap<String, trainyard_model::RuntimeSamples>>,
}

/// One job's running account.
#[derive(Clone, Debug)]
struct JobAccount {
    start_ms: i64,
    /// Accrued up to here.
    since_ms: i64,
    used: trainyard_model::Usage,
    /// The scheduler evicted some of its pods during this run
    /// ([`ClusterState::mark_evicted`]): its runtime is not the job's own.
    evicted: bool,
}

/// What changed since the cached snapshot.
#[derive(Debug, Default)]
struct Stale {
    jobs: BTreeSet<String>,
    nodes: bool,
    external: bool,
    meta: bool,
    usage: bool,
    runtimes: bool,
}

impl ClusterState {
    pub fn new() -> Self {
        ClusterState::default()
    }

    /// A state fed Kubernetes-shaped objects ([`Change::Object`]),
    /// interpreted with `opts`.
    pub fn for_objects(opts: LoadOptions) -> Self {
        ClusterState {
            objects: Some(Box::new(objects::Objects::new(opts))),
            ..ClusterState::default()
        }
    }

    /// A state holding exactly `snapshot`'s world.
    pub fn from_snapshot(snapshot: Snapshot) -> Self {
        let mut s = ClusterState::new();
        s.apply(Change::Resync(snapshot));
        s
    }

    /// Applies one change. A job upsert confirms the assumptions its new
    /// state shows (and drops those about tasks it no longer has).
    pub fn apply(&mut self, change: Change) -> Vec<Warning> {
        let mut warnings = Vec::new();
        match change {
            Change::Node(n) => {
                self.stale.nodes = true;
                self.nodes.insert(n.name.clone(), Arc::new(n));
            }
            Change::NodeGone(name) => {
                self.stale.nodes = true;
                if self.nodes.remove(&name).is_none() {
                    warnings.push(Warning(format!(
                        "node {name} is not known; nothing removed"
                    )));
                }
            }
            Change::Job(job) => self.upsert_job(Arc::new(job)),
            Change::JobGone(id) => {
                self.touch(&id);
                if self.jobs.remove(&id).is_none() {
                    warnings.push(Warning(format!("job {id} is not known; nothing removed")));
                }
                self.task_pos.remove(&id);
                self.views.remove(&id);
                self.assumed.remove(&id);
                self.nominated.remove(&id);
            }
            Change::External(p) => {
                self.stale.external = true;
                self.external.insert(p.name.clone(), Arc::new(p));
            }
            Change::ExternalGone(name) => {
                self.stale.external = true;
                if self.external.remove(&name).is_none() {
                    warnings.push(Warning(format!("pod {name} is not known; nothing removed")));
                }
            }
            Change::Queues(tree) => {
                self.stale.meta = true;
                self.queues = Arc::new(tree);
            }
            Change::Topology(t) => {
                self.stale.meta = true;
                self.topology = t;
            }
            Change::Object(c) => {
                match &c {
                    ObjectChange::Node(_, n) => {
                        self.stale.nodes = true;
                        self.nodes.insert(n.name.clone(), Arc::new((**n).clone()));
                    }
                    ObjectChange::NodeGone(name) => {
                        self.stale.nodes = true;
                        self.nodes.remove(name);
                    }
                    _ => {}
                }
                let layer = self
                    .objects
                    .get_or_insert_with(|| Box::new(objects::Objects::new(LoadOptions::default())));
                match layer.apply(c) {
                    Some(Ok(p)) => {
                        self.stale.external = true;
                        self.external.insert(p.name.clone(), Arc::new(p));
                    }
                    Some(Err(name)) => {
                        self.stale.external = true;
                        self.external.remove(&name);
                    }
                    None => {}
                }
            }
            Change::Resync(snap) => {
                self.cache = None;
                let Snapshot {
                    nodes,
                    queues,
                    jobs,
                    external,
                    topology,
                    // Usage and runtimes are not part of the world's
                    // objects: the state's own histories keep them.
                    usage: _,
                    user_usage: _,
                    runtimes: _,
                    dra,
                } = snap;
                self.dra = dra;
                self.stale.meta = true;
                self.nodes.clear();
                for n in nodes {
                    if let Some(old) = self.nodes.insert(n.name.clone(), n) {
                        warnings.push(Warning(format!(
                            "node {} appears twice; the last is kept",
                            old.name
                        )));
                    }
                }
                let keep: BTreeSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
                let gone: Vec<String> = self
                    .jobs
                    .keys()
                    .filter(|id| !keep.contains(id.as_str()))
                    .cloned()
                    .collect();
                for id in gone {
                    self.apply(Change::JobGone(id));
                }
                for j in jobs {
                    self.upsert_job(j);
                }
                self.external = external.into_iter().map(|p| (p.name.clone(), p)).collect();
                self.queues = queues;
                self.topology = topology;
            }
        }
        warnings
    }

    fn upsert_job(&mut self, job: Arc<Job>) {
        let id = job.id.clone();
        self.task_pos.insert(id.clone(), index::TaskIndex::of(&job));
        self.jobs.insert(id.clone(), job);
        self.reconcile(&id);
    }

    /// Changes the world's job `id` in place (a world that is its own API
    /// server, such as the simulator, changes what it owns without copying
    /// the job); assumptions are checked against the result as after a
    /// [`Change::Job`]. Returns whether the job exists.
    pub fn update_job(&mut self, id: &str, f: impl FnOnce(&mut Job)) -> bool {
        let Some(job) = self.jobs.get_mut(id) else {
            return false;
        };
        let job = Arc::make_mut(job);
        f(job);
        let index = index::TaskIndex::of(job);
        self.task_pos.insert(id.to_string(), index);
        self.reconcile(id);
        true
    }

    /// The job as the next snapshot has it (the world's, with assumptions).
    pub fn job(&self, id: &str) -> Option<&Job> {
        self.views
            .get(id)
            .or_else(|| self.jobs.get(id))
            .map(|j| &**j)
    }

    /// A task of a job by key, with its position in the job's tasks.
    pub fn task(&self, job: &str, task: &TaskKey) -> Option<(usize, &Task)> {
        let j = self.job(job)?;
        let k = self.task_pos.get(job)?.get(j, task)?;
        Some((k, &j.tasks[k]))
    }

    /// Every job, in id order, as the next snapshot has it.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs
            .iter()
            .map(|(id, j)| &**self.views.get(id).unwrap_or(j))
    }

    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name).map(|n| &**n)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values().map(|n| &**n)
    }

    pub fn queues(&self) -> &QueueTree {
        &self.queues
    }

    /// Whether some pending task carries a nomination.
    pub fn any_nominations(&self) -> bool {
        !self.nominated.is_empty()
    }

    /// Interprets again the objects that changed since the last refresh
    /// (nothing to do for a world without objects).
    pub fn refresh(&mut self) {
        let Some(layer) = self.objects.as_mut() else {
            return;
        };
        let r = layer.refresh();
        for id in r.gone {
            self.apply(Change::JobGone(id));
        }
        for job in r.jobs {
            self.upsert_job(job);
        }
        if let Some(tree) = r.tree {
            self.stale.meta = true;
            self.queues = Arc::new(tree);
        }
        if let Some(t) = r.topology {
            self.stale.meta = true;
            self.topology = t;
        }
        if let Some(d) = r.dra {
            self.stale.meta = true;
            self.dra = d;
        }
    }

    /// DeviceClasses by name, when fed objects (the core does not read
    /// them: the snapshot's selector sets carry their selectors).
    pub fn device_classes(&self) -> BTreeMap<String, trainyard_ingest::dra::DeviceClass> {
        self.objects
            .as_ref()
            .map(|o| o.device_classes().clone())
            .unwrap_or_default()
    }

    /// What is wrong with the objects fed so far (after a refresh): what a
    /// whole-file load would refuse or warn about. Empty for a world
    /// without objects.
    pub fn problems(&self) -> Problems {
        self.objects
            .as_ref()
            .map(|o| o.problems())
            .unwrap_or_default()
    }

    /// Queues left out of the tree (a bad spec, a parent cycle, an
    /// unknown or excluded parent, quotas above a limit or a parent), by
    /// name, with the reason; empty without objects.
    pub fn excluded_queues(&self) -> BTreeMap<String, String> {
        self.objects
            .as_ref()
            .map(|o| o.excluded_queues().clone())
            .unwrap_or_default()
    }

    /// The options objects are interpreted with, when fed objects.
    pub fn load_options(&self) -> Option<&LoadOptions> {
        self.objects.as_ref().map(|o| o.opts())
    }

    /// The next cycle's input: the world with the assumptions laid over
    /// it, nodes by name, jobs by id, external pods by name. Refreshes the
    /// objects first; shares every object with this state. The last
    /// snapshot is kept and patched where something changed since (a job
    /// replaced, inserted or removed by id), so a caller that drops it
    /// before the next change pays for the changes only.
    pub fn snapshot(&mut self) -> Arc<Snapshot> {
        self.refresh();
        let stale = std::mem::take(&mut self.stale);
        let Some(mut cache) = self.cache.take() else {
            let snap = Arc::new(Snapshot {
                dra: self.dra.clone(),
                nodes: self
                    .dra
                    .with_extended(&self.nodes.values().cloned().collect::<Vec<_>>()),
                queues: self.queues.clone(),
                jobs: self
                    .jobs
                    .iter()
                    .map(|(id, j)| self.views.get(id).unwrap_or(j).clone())
                    .collect(),
                external: self.external.values().cloned().collect(),
                topology: self.topology.clone(),
                usage: self.decayed.clone(),
                user_usage: self.decayed_users.clone(),
                runtimes: self.runtime_samples.clone(),
            });
            self.cache = Some(Arc::clone(&snap));
            return snap;
        };
        let changed = stale.nodes
            || stale.external
            || stale.meta
            || stale.usage
            || stale.runtimes
            || !stale.jobs.is_empty();
        if changed {
            // Copied only if the last snapshot is still held elsewhere.
            let s = Arc::make_mut(&mut cache);
            if stale.nodes || stale.meta {
                // DRA devices may serve extended resources (KEP-5004).
                s.nodes = self
                    .dra
                    .with_extended(&self.nodes.values().cloned().collect::<Vec<_>>());
            }
            if stale.external {
                s.external = self.external.values().cloned().collect();
            }
            if stale.meta {
                s.queues = self.queues.clone();
                s.topology = self.topology.clone();
                s.dra = self.dra.clone();
            }
            if stale.usage {
                s.usage = self.decayed.clone();
                s.user_usage = self.decayed_users.clone();
            }
            if stale.runtimes {
                s.runtimes = self.runtime_samples.clone();
            }
            let now = |id: &str| self.views.get(id).or_else(|| self.jobs.get(id));
            if stale.jobs.len() <= PATCH_IN_PLACE {
                for id in &stale.jobs {
                    match (now(id), s.jobs.binary_search_by(|j| j.id.as_str().cmp(id))) {
                        (Some(j), Ok(p)) => s.jobs[p] = Arc::clone(j),
                        (Some(j), Err(p)) => s.jobs.insert(p, Arc::clone(j)),
                        (None, Ok(p)) => {
                            s.jobs.remove(p);
                        }
                        (None, Err(_)) => {}
                    }
                }
            } else {
                // Many changes: one merge of the two sorted lists, rather
                // than a shift of the whole list per insert or removal.
                let old = std::mem::take(&mut s.jobs);
                let mut out = Vec::with_capacity(old.len() + stale.jobs.len());
                let mut changed = stale.jobs.iter().peekable();
                for j in old {
                    while let Some(id) = changed.next_if(|id| id.as_str() < j.id.as_str()) {
                        out.extend(now(id).cloned());
                    }
                    if changed.next_if(|id| **id == j.id).is_some() {
                        out.extend(now(&j.id).cloned());
                    } else {
                        out.push(j);
                    }
                }
                out.extend(changed.filter_map(|id| now(id).cloned()));
                s.jobs = out;
            }
        }
        self.cache = Some(Arc::clone(&cache));
        cache
    }
}

/// Up to this many changed jobs, the last snapshot's job list is patched
/// in place (a search each); above it, merged with the changes in one pass.
const PATCH_IN_PLACE: usize = 16;

#[cfg(test)]
mod tests;
