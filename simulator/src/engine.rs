//! The discrete-event engine.
//!
//! Events (task finishes, removals of evicted pods, node failures and
//! recoveries, job arrivals and scheduling cycles) sit in one priority
//! queue ordered by (time, kind, sequence number). At equal times,
//! finishes come first, then removals, then node events, then arrivals,
//! then the cycle; the sequence number breaks the remaining ties in
//! insertion order, so runs are deterministic.
//!
//! A cycle runs when something changed (an arrival, a finish, a node
//! event). It runs at the next multiple of the cycle
//! period, so changes within one period share one cycle, as in a real
//! periodic scheduler. Stretches with nothing to do cost nothing: the clock
//! jumps to the next event. Each cycle calls the production entry point
//! [`trainyard_sched::schedule`] on the simulator's snapshot.
//!
//! Job life:
//! - A gang starts when the core binds its minimum; every task runs for the
//!   job's duration from its own start (elastic pods bound later end later).
//! - The job ends when its last running task ends. Once any task has ended,
//!   the job stops growing: its still-pending elastic pods are dropped.
//! - A node failure kills every job with a task on that node; the job goes
//!   back to pending as a whole (gang semantics) and starts over, losing
//!   work per the lost-work model ([`crate::preemption`]).
//! - Bound tasks carry their start (`Task::started`). A pod the core evicts
//!   is marked `terminating` (it keeps its capacity) and removed after the
//!   grace period: if the rest of its job still holds the gang minimum it
//!   goes back to pending alone (an elastic pod), else the whole job
//!   restarts as after a node failure. Nominations from the core are kept
//!   on the preemptor's pending tasks until they bind or time out.
//! - Time alone changes decisions when a nomination expires or a running
//!   job passes its queue's minimum runtime: the engine wakes up then.
//! - A job keeps the last reason the core gave while it waited, so
//!   `jobs.csv` says why each job waited, even after it ran.
//! - A job the core rejects for good (unknown queue, above a queue limit,
//!   unsupported feature, malformed request), or one with a pod larger than
//!   every node or a minimum larger than the whole cluster, is recorded as
//!   rejected with its reason and never retried.
//!
//! With a network topology ([`SimOptions::topology`]), the snapshot carries
//! it, every gang that starts with two or more pods gets a [`JobTopology`]
//! (the scheduler's `GangPlacement` when it reports one, else
//! `Topology::span` of the binds in rank order), the optional
//! [`Slowdown`] stretches its run time once at that start, and cluster
//! samples record the largest gang that could still fit in one leaf.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;

use trainyard_cluster::{Applied, Change, ClusterState};
use trainyard_model::topology::Topology;
use trainyard_model::{
    Job, Node, QueueId, QueueTree, Resources, Snapshot, Task, TaskState, Timestamp,
};
use trainyard_sched::{Config, Decisions, EvictionKind, GangPlacement, PendingReason, schedule};

use crate::job::{SimJob, task_index};
use crate::preemption::{EvictionModel, LostWork, work_after_kill};
use crate::result::{
    ClusterSample, EvictionSample, JobRecord, JobState, JobTopology, LostGpu, QueueSample,
    RunTopology, SimOutput,
};
use crate::spec::{Fault, MAX_DURATION_MS, Slowdown};

/// How to run a simulation.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Name of the policy (scheduler config) in outputs.
    pub policy: String,
    /// Cycles are aligned to multiples of this period (ms); 0 runs a cycle
    /// at the very time of every change.
    pub cycle_period_ms: u64,
    /// Stop at this simulated time (jobs still running are reported so).
    pub until: Option<Timestamp>,
    /// The cluster's network topology over the input nodes (from the
    /// cluster spec): put in the snapshot, and used for placement metrics.
    pub topology: Option<Arc<Topology>>,
    /// Communication slowdown model; off by default.
    pub slowdown: Slowdown,
    /// Grace period of evicted pods and the lost-work model (30 s,
    /// `restart` by default).
    pub eviction: EvictionModel,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            policy: "default".into(),
            cycle_period_ms: 10_000,
            until: None,
            topology: None,
            slowdown: Slowdown::default(),
            eviction: EvictionModel::default(),
        }
    }
}

/// The scheduling function a simulation calls every cycle:
/// [`trainyard_sched::schedule`], or a wrapper around it (tests,
/// what-if experiments).
pub type ScheduleFn<'f> = dyn FnMut(&Snapshot, &Config, Timestamp) -> Decisions + 'f;

/// What the simulation runs on.
#[derive(Clone, Copy, Debug)]
pub struct SimInput<'a> {
    pub nodes: &'a [Node],
    pub queues: &'a QueueTree,
    /// Jobs in any order.
    pub jobs: &'a [SimJob],
    pub faults: &'a [Fault],
}

/// Reported to the progress callback every [`PROGRESS_EVERY`] events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub events: u64,
    pub now: Timestamp,
    pub jobs_finished: u64,
    pub jobs_total: u64,
}

pub const PROGRESS_EVERY: u64 = 2048;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Tasks (indices into the SimJob's expanded tasks) of a job end, if
    /// they are still the ones bound at `since` (an evicted elastic pod
    /// bound again has a later start).
    Finish {
        job: usize,
        epoch: u32,
        since: i64,
        tasks: Vec<u32>,
    },
    /// Evicted tasks (index, start in ms) are removed: their grace period
    /// is over.
    Evict {
        job: usize,
        epoch: u32,
        tasks: Vec<(u32, i64)>,
    },
    Node {
        index: usize,
        up: bool,
    },
    Arrival {
        job: usize,
    },
    Cycle,
}

impl Event {
    fn class(&self) -> u8 {
        match self {
            Event::Finish { .. } => 0,
            Event::Evict { .. } => 1,
            Event::Node { .. } => 2,
            Event::Arrival { .. } => 3,
            Event::Cycle => 4,
        }
    }
}

/// Runtime state of one job.
struct Rt {
    record: JobRecord,
    /// In the world (arrived, not yet ended or rejected).
    live: bool,
    /// Restart counter: finish events of an older epoch are stale.
    epoch: u32,
    bound: u32,
    /// Milli-GPU of the job's bound tasks.
    gpu_bound: u64,
    /// Requests of the job's bound tasks.
    bound_req: Resources,
    /// The job's leaf queue, if it exists.
    leaf: Option<QueueId>,
    /// A task has ended: no more growth.
    winding_down: bool,
    /// Run time of the tasks of the current start (work plus slowdown).
    run_ms: u64,
    /// Work (ms of the duration) the next start has to do: the duration,
    /// less what checkpoints kept through earlier kills.
    work_ms: u64,
    /// Run time kept by checkpoints of elastic pods evicted alone, by task
    /// index; such a pod runs `run_ms` less this once bound again.
    saved: BTreeMap<u32, u64>,
    /// The job's lost-work model.
    lost_work: LostWork,
}

/// Why a job restarts as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kill {
    NodeFault,
    Eviction,
}

/// Wholly free GPUs per leaf domain, kept up to date bind by bind.
struct LeafFree {
    /// Input node index by name.
    node_index: HashMap<String, usize>,
    /// Tasks holding each device (by position in `Node::gpus`), per node.
    holders: Vec<Vec<u32>>,
    /// Devices with no holder, per node (up or not).
    free: Vec<u32>,
    /// Leaf domain of each node.
    leaf_of: Vec<Option<usize>>,
    /// Σ `free` over the domain's nodes that are up.
    leaf_free: Vec<u64>,
}

impl LeafFree {
    fn new(nodes: &[Node], topo: &Topology) -> Option<LeafFree> {
        let level = &topo.levels()[topo.leaf_level()?];
        let leaf_of: Vec<Option<usize>> = nodes
            .iter()
            .map(|n| {
                let id = topo.node_id(&n.name)?;
                level
                    .of_node
                    .get(id as usize)
                    .copied()
                    .flatten()
                    .map(|d| d as usize)
            })
            .collect();
        let free: Vec<u32> = nodes.iter().map(|n| n.gpus.len() as u32).collect();
        let mut leaf_free = vec![0u64; level.domains.len()];
        for (n, d) in leaf_of.iter().enumerate() {
            if let Some(d) = d {
                leaf_free[*d] += free[n] as u64;
            }
        }
        Some(LeafFree {
            node_index: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.clone(), i))
                .collect(),
            holders: nodes.iter().map(|n| vec![0; n.gpus.len()]).collect(),
            free,
            leaf_of,
            leaf_free,
        })
    }

    /// A task on `node` takes (`take`) or gives back the devices `gpus`.
    fn change(&mut self, nodes: &[Node], up: &[bool], node: &str, gpus: &[u32], take: bool) {
        let Some(&n) = self.node_index.get(node) else {
            return;
        };
        for g in gpus {
            let Some(pos) = nodes[n].gpus.iter().position(|d| d.index == *g) else {
                continue;
            };
            let h = &mut self.holders[n][pos];
            let was_free = *h == 0;
            if take {
                *h += 1;
            } else {
                *h = h.saturating_sub(1);
            }
            let now_free = *h == 0;
            if was_free == now_free {
                continue;
            }
            if now_free {
                self.free[n] += 1;
            } else {
                self.free[n] = self.free[n].saturating_sub(1);
            }
            if up[n]
                && let Some(d) = self.leaf_of[n]
            {
                if now_free {
                    self.leaf_free[d] += 1;
                } else {
                    self.leaf_free[d] = self.leaf_free[d].saturating_sub(1);
                }
            }
        }
    }

    /// Node `n` went down or came back.
    fn node(&mut self, n: usize, up: bool) {
        if let Some(d) = self.leaf_of[n] {
            if up {
                self.leaf_free[d] += self.free[n] as u64;
            } else {
                self.leaf_free[d] = self.leaf_free[d].saturating_sub(self.free[n] as u64);
            }
        }
    }

    fn largest(&self) -> u32 {
        self.leaf_free
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .min(u32::MAX as u64) as u32
    }
}

struct Engine<'a> {
    input: SimInput<'a>,
    config: &'a Config,
    opts: &'a SimOptions,
    heap: BinaryHeap<Reverse<(i64, u8, u64, Event)>>,
    seq: u64,
    /// The simulated world, through the one incremental cluster state the
    /// CLI and the service use: arrivals, finishes, removals and node
    /// events are applied as changes, the core's decisions are assumed and
    /// confirmed at once (the simulator is its own API server).
    world: ClusterState,
    node_up: Vec<bool>,
    rt: Vec<Rt>,
    by_id: HashMap<String, usize>,
    next_cycle: Option<i64>,
    gpu_allocated: u64,
    running: u32,
    pending: u32,
    finished: u64,
    cycles: u64,
    events: u64,
    queues: Vec<QueueSample>,
    last_queue: BTreeMap<String, (Resources, Resources, Resources)>,
    cluster: Vec<ClusterSample>,
    end: Timestamp,
    /// Something changed since the last cycle ran.
    dirty: bool,
    /// Requests of bound tasks per leaf queue (by `QueueId`).
    leaf_alloc: Vec<Resources>,
    /// Running jobs that still have pending elastic pods (as of the last cycle).
    elastic_waiting: u32,
    /// Paths of the leaf queues (queue reports name queues by path).
    leaf_paths: std::collections::BTreeSet<String>,
    /// Free GPUs per leaf domain, with a topology that has a leaf level.
    leaf_free: Option<LeafFree>,
    /// Cycles that evicted pods.
    evictions: Vec<EvictionSample>,
    /// Minimum runtime (ms) of each queue, inherited; by `QueueId`.
    min_runtime_ms: Vec<Option<i64>>,
    /// Time of the last cycle and how many ran at that time.
    cycles_now: (i64, u32),
}

/// Most cycles run at one moment of virtual time; later ones are deferred
/// by one period (so that decisions undoing each other with a zero grace
/// period cannot hold the clock).
pub const MAX_CYCLES_AT_ONE_TIME: u32 = 100;

/// Runs a simulation to completion (or `opts.until`).
pub fn simulate(
    input: SimInput<'_>,
    config: &Config,
    opts: &SimOptions,
    progress: &mut dyn FnMut(&Progress),
) -> SimOutput {
    simulate_with(input, config, opts, &mut schedule, progress)
}

/// [`simulate`] with another scheduling function, e.g. a wrapper around
/// [`trainyard_sched::schedule`] that adds or removes decisions.
pub fn simulate_with(
    input: SimInput<'_>,
    config: &Config,
    opts: &SimOptions,
    scheduler: &mut ScheduleFn<'_>,
    progress: &mut dyn FnMut(&Progress),
) -> SimOutput {
    let mut e = Engine::new(input, config, opts);
    e.run(scheduler, progress);
    e.finish()
}

impl<'a> Engine<'a> {
    fn new(input: SimInput<'a>, config: &'a Config, opts: &'a SimOptions) -> Self {
        let mut order: Vec<usize> = (0..input.jobs.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&input.jobs[a], &input.jobs[b]);
            x.submit.cmp(&y.submit).then(x.id.cmp(&y.id))
        });
        let mut e = Engine {
            input,
            config,
            opts,
            heap: BinaryHeap::new(),
            seq: 0,
            world: ClusterState::from_snapshot(Snapshot {
                nodes: input.nodes.iter().cloned().map(Arc::new).collect(),
                queues: Arc::new(input.queues.clone()),
                jobs: Vec::new(),
                external: Vec::new(),
                topology: opts.topology.clone(),
            }),
            node_up: vec![true; input.nodes.len()],
            rt: Vec::with_capacity(input.jobs.len()),
            by_id: HashMap::with_capacity(input.jobs.len()),
            next_cycle: None,
            gpu_allocated: 0,
            running: 0,
            pending: 0,
            finished: 0,
            cycles: 0,
            events: 0,
            queues: Vec::new(),
            last_queue: BTreeMap::new(),
            cluster: Vec::new(),
            end: Timestamp(0),
            dirty: false,
            leaf_alloc: vec![Resources::zero(); input.queues.len()],
            elastic_waiting: 0,
            leaf_paths: input
                .queues
                .ids()
                .filter(|q| input.queues.is_leaf(*q))
                .map(|q| input.queues.path(q).to_string())
                .collect(),
            leaf_free: opts
                .topology
                .as_deref()
                .and_then(|t| LeafFree::new(input.nodes, t)),
            evictions: Vec::new(),
            min_runtime_ms: (0..input.queues.len())
                .map(|q| {
                    input
                        .queues
                        .ancestors(QueueId(q))
                        .find_map(|a| input.queues.spec(a).min_runtime_seconds)
                        .map(|s| (s.min(MAX_DURATION_MS / 1000) * 1000) as i64)
                })
                .collect(),
            cycles_now: (i64::MIN, 0),
        };
        // Largest node and whole cluster, to reject what can never fit.
        let mut total = Resources::zero();
        for n in input.nodes {
            total.add(&n.allocatable);
        }
        for (i, j) in input.jobs.iter().enumerate() {
            let mut record = JobRecord {
                id: j.id.clone(),
                queue: j.queue.clone(),
                priority: j.priority,
                gpu_milli: j.gpu_milli(),
                tasks: j.task_count(),
                submit: j.submit,
                start: None,
                end: None,
                state: JobState::Pending,
                pending_reason: None,
                restarts: 0,
                min_gpu_milli: j.min_requests().gpu,
                evicted_pods: 0,
                lost: LostGpu::default(),
                topology: None,
            };
            if let Some(reason) = too_large(j, input.nodes, &total) {
                record.state = JobState::Rejected;
                record.pending_reason = Some(reason);
            }
            match e.by_id.entry(j.id.clone()) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(i);
                }
                std::collections::hash_map::Entry::Occupied(_) => {
                    record.state = JobState::Rejected;
                    record.pending_reason = Some(format!("duplicate job id {}", j.id));
                }
            }
            if record.state == JobState::Rejected {
                e.finished += 1;
            }
            e.rt.push(Rt {
                record,
                live: false,
                epoch: 0,
                bound: 0,
                gpu_bound: 0,
                bound_req: Resources::zero(),
                leaf: input
                    .queues
                    .get(&j.queue)
                    .filter(|q| input.queues.is_leaf(*q)),
                winding_down: false,
                run_ms: j.duration_ms,
                work_ms: j.duration_ms,
                saved: BTreeMap::new(),
                lost_work: j.lost_work.unwrap_or(opts.eviction.lost_work),
            });
        }
        for i in order {
            if e.rt[i].record.state != JobState::Rejected {
                e.push(input.jobs[i].submit.0, Event::Arrival { job: i });
            }
        }
        let index: HashMap<&str, usize> = input
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        for f in input.faults {
            if let Some(&i) = index.get(f.node.as_str()) {
                e.push(f.at.0, Event::Node { index: i, up: f.up });
            }
        }
        e
    }

    fn push(&mut self, at: i64, ev: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at, ev.class(), self.seq, ev)));
    }

    fn run(&mut self, scheduler: &mut ScheduleFn<'_>, progress: &mut dyn FnMut(&Progress)) {
        let mut now = self
            .heap
            .peek()
            .map(|Reverse((t, _, _, _))| Timestamp(*t))
            .unwrap_or(Timestamp(0));
        self.sample_cluster(now);
        let total = self.input.jobs.len() as u64;
        while let Some(Reverse((t, _, _, _))) = self.heap.peek() {
            let t = *t;
            // Every job has ended or been rejected: later faults or idle
            // cycles would only stretch the run.
            if self.finished >= total && self.opts.until.is_none() {
                break;
            }
            if self.opts.until.is_some_and(|u| t > u.0) {
                now = self.opts.until.unwrap_or(now);
                break;
            }
            now = Timestamp(t);
            // `changed`: something a cycle should look at; `moved`: the
            // cluster sample may differ.
            let mut changed = false;
            let mut moved = false;
            while let Some(Reverse((t2, _, _, _))) = self.heap.peek() {
                if *t2 != t {
                    break;
                }
                let Some(Reverse((_, _, _, ev))) = self.heap.pop() else {
                    break;
                };
                self.events += 1;
                if self.events.is_multiple_of(PROGRESS_EVERY) {
                    progress(&Progress {
                        events: self.events,
                        now,
                        jobs_finished: self.finished,
                        jobs_total: self.input.jobs.len() as u64,
                    });
                }
                match ev {
                    Event::Finish {
                        job,
                        epoch,
                        since,
                        tasks,
                    } => changed |= self.finish_tasks(job, epoch, since, &tasks, now),
                    Event::Evict { job, epoch, tasks } => {
                        changed |= self.remove_evicted(job, epoch, &tasks, now)
                    }
                    Event::Node { index, up } => changed |= self.node_event(index, up, now),
                    Event::Arrival { job } => {
                        self.arrive(job);
                        changed = true;
                    }
                    Event::Cycle => {
                        // A cycle superseded by an earlier one is stale.
                        if self.next_cycle == Some(t) {
                            self.next_cycle = None;
                            self.cycles_now = if self.cycles_now.0 == t {
                                (t, self.cycles_now.1 + 1)
                            } else {
                                (t, 1)
                            };
                            if self.cycles_now.1 > MAX_CYCLES_AT_ONE_TIME {
                                // Decisions that undo each other at once
                                // (evictions with no grace period): go on
                                // one period later.
                                let later = t + (self.opts.cycle_period_ms as i64).max(1);
                                self.next_cycle = Some(later);
                                self.push(later, Event::Cycle);
                            } else {
                                self.cycle(scheduler, now);
                                moved = true;
                            }
                        }
                    }
                }
            }
            // A cycle runs on every change, pending jobs or not: it also
            // re-samples the queues (allocation falls as tasks finish) and
            // lets running elastic jobs grow.
            let mut needs_cycle = changed;
            if changed && self.pending == 0 && self.elastic_waiting == 0 {
                // Nothing can be placed: a cycle would decide nothing.
                // Every queue's demand, fair share and allocation are its
                // running requests (all demand fits), so record them here.
                self.sample_queues_idle(now);
                needs_cycle = false;
            }
            self.dirty |= needs_cycle;
            if needs_cycle {
                let period = self.opts.cycle_period_ms as i64;
                let at = if period > 0 {
                    (t + period - 1) / period * period
                } else {
                    t
                };
                if self.next_cycle.is_none_or(|c| at < c) {
                    self.next_cycle = Some(at);
                    self.push(at, Event::Cycle);
                }
            }
            if changed || moved {
                self.sample_cluster(now);
            }
        }
        // One closing cycle, so the queue samples see the last finishes.
        if self.dirty && self.opts.until.is_none() {
            self.cycle(scheduler, now);
            self.sample_cluster(now);
        }
        self.end = now;
    }
}

impl Engine<'_> {
    fn arrive(&mut self, j: usize) {
        let sj = &self.input.jobs[j];
        let tasks = sj.pending_tasks();
        let job = Job {
            id: sj.id.clone(),
            queue: sj.queue.clone(),
            priority: sj.priority,
            submit_time: sj.submit,
            min_member: sj.min_member,
            subgroups: sj.subgroups.clone(),
            topology: sj.topology.clone(),
            preemptible: sj.preemptible,
            preempts: true,
            tasks,
            rejected: None,
        };
        self.rt[j].live = true;
        self.world.apply(Change::Job(job));
        self.pending += 1;
    }

    fn finish_tasks(
        &mut self,
        j: usize,
        epoch: u32,
        since: i64,
        tasks: &[u32],
        now: Timestamp,
    ) -> bool {
        if self.rt[j].epoch != epoch || !self.rt[j].live {
            return false;
        }
        let Some(job) = self.world.job(&self.rt[j].record.id) else {
            return false;
        };
        // Still the tasks bound at `since`: an elastic pod evicted alone is
        // pending or bound again later, and its old finish is stale.
        let is_done = |t: &Task| {
            !t.is_pending()
                && t.started == Some(Timestamp(since))
                && task_index(&t.name).is_some_and(|i| tasks.contains(&i))
        };
        if !job.tasks.iter().any(is_done) {
            return false;
        }
        let mut job = job.clone();
        let mut freed = 0u64;
        let mut ended = 0u32;
        let mut freed_req = Resources::zero();
        let leaf_free = &mut self.leaf_free;
        let (nodes, up) = (self.input.nodes, &self.node_up);
        job.tasks.retain(|t| {
            let done = is_done(t);
            if done {
                freed += t.requests.gpu;
                freed_req.add(&t.requests);
                ended += 1;
                if let (
                    Some(lf),
                    TaskState::Bound {
                        node,
                        gpus: Some(g),
                    },
                ) = (leaf_free.as_mut(), &t.state)
                {
                    lf.change(nodes, up, node, g, false);
                }
            }
            !done
        });
        // The job stops growing: drop pending elastic pods, no minimum left.
        job.tasks.retain(|t| !t.is_pending());
        job.min_member = 0;
        job.subgroups.clear();
        self.world.apply(Change::Job(job));
        let rt = &mut self.rt[j];
        for i in tasks {
            rt.saved.remove(i);
        }
        rt.winding_down = true;
        rt.bound -= ended.min(rt.bound);
        rt.gpu_bound -= freed.min(rt.gpu_bound);
        rt.bound_req.saturating_sub(&freed_req);
        if let Some(q) = rt.leaf {
            self.leaf_alloc[q.0].saturating_sub(&freed_req);
        }
        self.gpu_allocated -= freed.min(self.gpu_allocated);
        if rt.bound == 0 {
            self.complete(j, now);
        }
        true
    }

    /// Job `j`'s last task has ended.
    fn complete(&mut self, j: usize, now: Timestamp) {
        let rt = &mut self.rt[j];
        rt.record.end = Some(now);
        rt.record.state = JobState::Completed;
        rt.live = false;
        self.world.apply(Change::JobGone(rt.record.id.clone()));
        self.running -= 1;
        self.finished += 1;
    }

    fn node_event(&mut self, index: usize, up: bool, now: Timestamp) -> bool {
        if self.node_up[index] == up {
            return false;
        }
        self.node_up[index] = up;
        if let Some(lf) = &mut self.leaf_free {
            lf.node(index, up);
        }
        let name = self.input.nodes[index].name.clone();
        if up {
            self.world
                .apply(Change::Node(self.input.nodes[index].clone()));
            return true;
        }
        self.world.apply(Change::NodeGone(name.clone()));
        // Every job with a task on the node restarts.
        let hit: Vec<usize> = self
            .world
            .jobs()
            .filter(|job| {
                job.tasks
                    .iter()
                    .any(|t| matches!(&t.state, TaskState::Bound { node, .. } if *node == name))
            })
            .filter_map(|job| self.by_id.get(&job.id).copied())
            .collect();
        for j in hit {
            self.restart(j, now, Kill::NodeFault);
        }
        true
    }

    /// The running job in `slot` is killed as a whole and goes back to
    /// pending (gang semantics): its bound tasks lose work per the
    /// lost-work model, and the next start does what checkpoints did not
    /// keep.
    fn restart(&mut self, j: usize, now: Timestamp, why: Kill) {
        let model = self.rt[j].lost_work;
        let mut lost = 0u64;
        let Some(job) = self.world.job(&self.rt[j].record.id) else {
            return;
        };
        let mut job = job.clone();
        for t in &job.tasks {
            if let TaskState::Bound { node, gpus } = &t.state {
                let elapsed = t.started.map_or(0, |s| (now.0 - s.0).max(0) as u64);
                lost = lost.saturating_add(t.requests.gpu.saturating_mul(model.lost_ms(elapsed)));
                if let (Some(lf), Some(g)) = (&mut self.leaf_free, gpus) {
                    lf.change(self.input.nodes, &self.node_up, node, g, false);
                }
            }
        }
        let rt = &mut self.rt[j];
        match why {
            Kill::NodeFault => {
                rt.record.lost.node_faults = rt.record.lost.node_faults.saturating_add(lost)
            }
            Kill::Eviction => {
                rt.record.lost.evictions = rt.record.lost.evictions.saturating_add(lost)
            }
        }
        // Checkpoints of the gang count from its start.
        let elapsed = rt.record.start.map_or(0, |s| (now.0 - s.0).max(0) as u64);
        rt.work_ms = work_after_kill(rt.work_ms, rt.run_ms, model.saved_ms(elapsed));
        rt.run_ms = rt.work_ms;
        rt.saved.clear();
        self.gpu_allocated -= rt.gpu_bound.min(self.gpu_allocated);
        if let Some(q) = rt.leaf {
            self.leaf_alloc[q.0].saturating_sub(&rt.bound_req);
        }
        rt.bound_req = Resources::zero();
        rt.epoch += 1;
        rt.bound = 0;
        rt.gpu_bound = 0;
        rt.record.restarts += 1;
        rt.record.start = None;
        rt.record.topology = None;
        rt.record.state = JobState::Pending;
        let was_winding = rt.winding_down;
        rt.winding_down = false;
        self.running -= 1;
        self.pending += 1;
        // Back to the job as submitted.
        let sj = &self.input.jobs[j];
        if was_winding {
            job.min_member = sj.min_member;
            job.subgroups = sj.subgroups.clone();
        }
        job.tasks = sj.pending_tasks();
        self.world.apply(Change::Job(job));
    }

    /// The grace period of evicted `tasks` (index, start) of job `j` is
    /// over: the ones still there are killed. If the rest of the job still
    /// holds its gang minimum (and every sub-group's), they go back to
    /// pending and the job runs on; otherwise the whole job restarts, as
    /// after a node failure. Pods of a job that is winding down (a task has
    /// ended) are dropped, as its pending elastic pods are.
    fn remove_evicted(
        &mut self,
        j: usize,
        epoch: u32,
        tasks: &[(u32, i64)],
        now: Timestamp,
    ) -> bool {
        if self.rt[j].epoch != epoch || !self.rt[j].live {
            return false;
        }
        let Some(job) = self.world.job(&self.rt[j].record.id) else {
            return false;
        };
        let is_gone = |t: &Task| {
            t.terminating
                && !t.is_pending()
                && task_index(&t.name).is_some_and(|i| {
                    tasks
                        .iter()
                        .any(|(x, s)| *x == i && t.started.map_or(i64::MIN, |v| v.0) == *s)
                })
        };
        let gone: Vec<usize> = (0..job.tasks.len())
            .filter(|&k| is_gone(&job.tasks[k]))
            .collect();
        if gone.is_empty() {
            return false;
        }
        let winding = self.rt[j].winding_down;
        if !winding {
            let stays = |t: &Task| !t.is_pending() && !is_gone(t);
            let left = job.tasks.iter().filter(|t| stays(t)).count() as u32;
            let groups_ok = job.subgroups.iter().all(|sg| {
                job.tasks
                    .iter()
                    .filter(|t| stays(t) && t.subgroup.as_deref() == Some(sg.name.as_str()))
                    .count() as u32
                    >= sg.min_member
            });
            if left < job.min_member || !groups_ok {
                self.restart(j, now, Kill::Eviction);
                return true;
            }
        }
        // Kill the pods one by one; the job keeps running.
        let mut job = job.clone();
        let model = self.rt[j].lost_work;
        for &k in gone.iter().rev() {
            let t = &mut job.tasks[k];
            let elapsed = t.started.map_or(0, |s| (now.0 - s.0).max(0) as u64);
            let lost = t.requests.gpu.saturating_mul(model.lost_ms(elapsed));
            let req = t.requests.clone();
            let held = std::mem::replace(&mut t.state, TaskState::Pending);
            t.started = None;
            t.terminating = false;
            t.nomination = None;
            let ti = task_index(&t.name);
            if winding {
                job.tasks.remove(k);
            }
            if let (
                Some(lf),
                TaskState::Bound {
                    node,
                    gpus: Some(g),
                },
            ) = (&mut self.leaf_free, &held)
            {
                lf.change(self.input.nodes, &self.node_up, node, g, false);
            }
            let rt = &mut self.rt[j];
            rt.record.lost.evictions = rt.record.lost.evictions.saturating_add(lost);
            if let Some(ti) = ti {
                if winding {
                    rt.saved.remove(&ti);
                } else {
                    let kept = model.saved_ms(elapsed);
                    let s = rt.saved.entry(ti).or_default();
                    *s = s.saturating_add(kept);
                }
            }
            rt.bound = rt.bound.saturating_sub(1);
            rt.gpu_bound = rt.gpu_bound.saturating_sub(req.gpu);
            rt.bound_req.saturating_sub(&req);
            if let Some(q) = rt.leaf {
                self.leaf_alloc[q.0].saturating_sub(&req);
            }
            self.gpu_allocated = self.gpu_allocated.saturating_sub(req.gpu);
        }
        self.world.apply(Change::Job(job));
        if winding && self.rt[j].bound == 0 {
            self.complete(j, now);
        }
        // A running job with pending pods again may grow.
        self.elastic_waiting = self.count_elastic_waiting();
        true
    }

    fn cycle(&mut self, scheduler: &mut ScheduleFn<'_>, now: Timestamp) {
        self.dirty = false;
        // Nominations as old as the timeout are ignored by the core from
        // then on; clearing them keeps the snapshot tidy.
        self.world
            .expire_nominations(now, self.config.preemption.nomination_timeout_seconds);
        let snapshot = self.world.snapshot();
        let d = scheduler(&snapshot, self.config, now);
        // Released before the world changes, so no job is copied on write.
        drop(snapshot);
        self.cycles += 1;
        // The simulator is its own API server: every write the decisions
        // owe is done at once, and the world confirms them.
        let applied = self.world.assume(&d, now);
        self.world.take_writes();
        self.world.confirm_assumed();

        // Binds, grouped by job.
        let mut started: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        // Pods placed per job: (task index, node, GPU indices).
        let mut placed: BTreeMap<usize, Vec<PlacedPod>> = BTreeMap::new();
        for &i in &applied.binds {
            let b = &d.binds[i];
            let Some(ti) = task_index(&b.task) else {
                continue;
            };
            let Some(&j) = self.by_id.get(&b.job) else {
                continue;
            };
            let Some((_, task)) = self.world.task(&b.job, &b.task) else {
                continue;
            };
            let gpu = task.requests.gpu;
            let rt = &mut self.rt[j];
            rt.bound += 1;
            rt.gpu_bound += gpu;
            rt.bound_req.add(&task.requests);
            if let Some(q) = rt.leaf {
                self.leaf_alloc[q.0].add(&task.requests);
            }
            self.gpu_allocated += gpu;
            if let Some(lf) = &mut self.leaf_free {
                lf.change(self.input.nodes, &self.node_up, &b.node, &b.gpus, true);
            }
            started.entry(j).or_default().push(ti);
            if self.opts.topology.is_some() {
                placed
                    .entry(j)
                    .or_default()
                    .push((ti, b.node.as_str(), b.gpus.as_slice()));
            }
        }
        let gang_placements: HashMap<&str, &GangPlacement> =
            d.placements.iter().map(|p| (p.job.as_str(), p)).collect();
        for (j, tasks) in started {
            let rt = &mut self.rt[j];
            if rt.record.start.is_none() {
                rt.record.start = Some(now);
                rt.record.state = JobState::Running;
                self.pending -= 1;
                self.running += 1;
                let duration = rt.work_ms;
                rt.record.topology = match (&self.opts.topology, placed.get_mut(&j)) {
                    (Some(topo), Some(pods)) if pods.len() >= 2 => Some(job_topology(
                        topo,
                        gang_placements.get(rt.record.id.as_str()).copied(),
                        pods,
                        &self.opts.slowdown,
                        duration,
                    )),
                    _ => None,
                };
                let extra = rt.record.topology.as_ref().map_or(0, |t| t.slowdown_ms);
                rt.run_ms = duration.saturating_add(extra).min(MAX_DURATION_MS);
            }
            // Each task runs `run_ms` from its start, less what an earlier
            // run of it (an elastic pod evicted alone) kept by checkpoints.
            let mut by_end: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
            for ti in tasks {
                let left = rt.run_ms - rt.saved.get(&ti).copied().unwrap_or(0).min(rt.run_ms);
                by_end.entry(now.0 + left as i64).or_default().push(ti);
            }
            let epoch = rt.epoch;
            for (at, tasks) in by_end {
                self.push(
                    at,
                    Event::Finish {
                        job: j,
                        epoch,
                        since: now.0,
                        tasks,
                    },
                );
            }
        }
        self.apply_evictions(&d, &applied, now);
        for p in &d.pending {
            let Some(&j) = self.by_id.get(&p.job) else {
                continue;
            };
            let rt = &mut self.rt[j];
            if rt.record.start.is_some() {
                continue; // elastic remainder of a running job
            }
            rt.record.pending_reason = Some(p.message.clone());
            let permanent = matches!(
                p.reason,
                PendingReason::Rejected { .. }
                    | PendingReason::ExceedsQueueLimit { .. }
                    | PendingReason::Unsupported { .. }
                    | PendingReason::InvalidRequest { .. }
            );
            if permanent {
                rt.record.state = JobState::Rejected;
                rt.live = false;
                self.world.apply(Change::JobGone(p.job.clone()));
                self.pending -= 1;
                self.finished += 1;
            }
        }
        // Running jobs that could still grow wake later changes.
        self.elastic_waiting = self.count_elastic_waiting();
        // Queue samples, only when a queue's numbers changed. A cycle that
        // evicts reports the victims' capacity as the preemptor's already;
        // the samples keep what is held (victims hold it through their
        // grace period, the preemptor binds later).
        let held = (!d.evictions.is_empty()).then(|| self.queue_alloc());
        for q in &d.queues {
            let allocated = match &held {
                Some(held) => {
                    let name = q.queue.rsplit('/').next().unwrap_or(&q.queue);
                    match self.world.queues().get(name) {
                        Some(id) => held[id.0].clone(),
                        None => q.allocated.clone(),
                    }
                }
                None => q.allocated.clone(),
            };
            let now_vals = (q.demand.clone(), q.fair_share.clone(), allocated);
            if self.last_queue.get(&q.queue) != Some(&now_vals) {
                self.queues.push(QueueSample {
                    time: now,
                    queue: q.queue.clone(),
                    is_leaf: self.leaf_paths.contains(q.queue.as_str()),
                    demand: now_vals.0.clone(),
                    fair_share: now_vals.1.clone(),
                    allocated: now_vals.2.clone(),
                });
                self.last_queue.insert(q.queue.clone(), now_vals);
            }
        }
        // A starving gang changes decisions with time alone: wake up then.
        if let Some(s) = self.config.gang_starvation_seconds
            && self.pending > 0
        {
            let wake = self
                .world
                .jobs()
                .filter(|j| j.tasks.iter().all(|t| t.is_pending()))
                .map(|j| j.submit_time.0 + s as i64 * 1000)
                .filter(|w| *w > now.0)
                .min();
            let period = self.opts.cycle_period_ms as i64;
            let wake = wake.map(|w| {
                if period > 0 {
                    (w + period - 1) / period * period
                } else {
                    w
                }
            });
            if let Some(w) = wake
                && self.next_cycle.is_none()
            {
                self.next_cycle = Some(w);
                self.push(w, Event::Cycle);
            }
        }
        // Nominations expire, and running jobs pass their queue's minimum
        // runtime (becoming possible victims), with time alone.
        if self.pending > 0 || self.elastic_waiting > 0 {
            let wake = self.next_time_change(now);
            if let Some(w) = wake {
                self.wake_at(w);
            }
        }
    }

    /// Schedules a cycle at `at` (rounded up to the period) unless one is
    /// due no later.
    fn wake_at(&mut self, at: i64) {
        let period = self.opts.cycle_period_ms as i64;
        let at = if period > 0 {
            (at + period - 1) / period * period
        } else {
            at
        };
        if self.next_cycle.is_none_or(|c| at < c) {
            self.next_cycle = Some(at);
            self.push(at, Event::Cycle);
        }
    }

    /// The earliest moment after `now` when a nomination expires or a
    /// running preemptible job passes its queue's minimum runtime (only
    /// while reclaim or preemption is on).
    fn next_time_change(&self, now: Timestamp) -> Option<i64> {
        let mut next: Option<i64> = None;
        let mut take = |w: i64| {
            if w > now.0 && next.is_none_or(|n| w < n) {
                next = Some(w);
            }
        };
        let cfg = &self.config.preemption;
        let timeout = (cfg.nomination_timeout_seconds.min(MAX_DURATION_MS / 1000) * 1000) as i64;
        let victims =
            (cfg.reclaim || cfg.preempt) && self.min_runtime_ms.iter().any(Option::is_some);
        let nominations = self.world.any_nominations();
        if !nominations && !victims {
            return None;
        }
        for job in self.world.jobs() {
            let Some(rt) = self.by_id.get(&job.id).map(|&j| &self.rt[j]) else {
                continue;
            };
            if nominations {
                for t in &job.tasks {
                    if let Some(n) = &t.nomination {
                        take(n.since.0.saturating_add(timeout));
                    }
                }
            }
            if victims
                && job.preemptible
                && rt.bound > 0
                && let Some(min) = rt.leaf.and_then(|q| self.min_runtime_ms[q.0])
                && let Some(last) = job.tasks.iter().filter_map(|t| t.started).max()
            {
                take(last.0.saturating_add(min));
            }
        }
        next
    }

    /// Running jobs (not winding down) with pending elastic pods.
    fn count_elastic_waiting(&self) -> u32 {
        self.world
            .jobs()
            .filter(|job| {
                let Some(rt) = self.by_id.get(&job.id).map(|&j| &self.rt[j]) else {
                    return false;
                };
                rt.live
                    && rt.record.start.is_some()
                    && !rt.winding_down
                    && job.tasks.iter().any(|t| t.is_pending())
            })
            .count() as u32
    }

    /// The cycle's evictions: each evicted pod is marked terminating now
    /// (it keeps its capacity, and the core never picks it again) and is
    /// removed when the grace period is over.
    fn apply_evictions(&mut self, d: &Decisions, applied: &Applied, now: Timestamp) {
        if applied.evictions.is_empty() {
            return;
        }
        let mut per_job: BTreeMap<usize, Vec<(u32, i64)>> = BTreeMap::new();
        let mut sample = EvictionSample {
            time: now,
            ..EvictionSample::default()
        };
        let mut jobs: BTreeSet<(EvictionKind, usize)> = BTreeSet::new();
        for &i in &applied.evictions {
            let e = &d.evictions[i];
            let Some(ti) = task_index(&e.task) else {
                continue;
            };
            let Some(&j) = self.by_id.get(&e.job) else {
                continue;
            };
            let Some((_, task)) = self.world.task(&e.job, &e.task) else {
                continue;
            };
            per_job
                .entry(j)
                .or_default()
                .push((ti, task.started.map_or(i64::MIN, |s| s.0)));
            self.rt[j].record.evicted_pods += 1;
            match e.kind {
                EvictionKind::Reclaim => sample.reclaim_pods += 1,
                EvictionKind::Preempt => sample.preempt_pods += 1,
            }
            jobs.insert((e.kind, j));
        }
        if per_job.is_empty() {
            return;
        }
        for (kind, _) in &jobs {
            match kind {
                EvictionKind::Reclaim => sample.reclaim_jobs += 1,
                EvictionKind::Preempt => sample.preempt_jobs += 1,
            }
        }
        self.evictions.push(sample);
        let at = now.0.saturating_add(self.opts.eviction.grace_ms as i64);
        for (j, tasks) in per_job {
            let epoch = self.rt[j].epoch;
            self.push(
                at,
                Event::Evict {
                    job: j,
                    epoch,
                    tasks,
                },
            );
        }
    }

    /// Queue samples when nothing is pending: demand = fair share =
    /// allocation = running requests, per queue (inner queues sum their
    /// children). Written only for queues whose numbers changed.
    fn sample_queues_idle(&mut self, now: Timestamp) {
        let alloc = self.queue_alloc();
        let tree = self.world.queues();
        for q in tree.top_down().into_iter().skip(1) {
            let path = tree.path(q).to_string();
            let a = &alloc[q.0];
            let vals = (a.clone(), a.clone(), a.clone());
            if self.last_queue.get(&path) != Some(&vals) {
                self.queues.push(QueueSample {
                    time: now,
                    queue: path.clone(),
                    is_leaf: tree.is_leaf(q),
                    demand: a.clone(),
                    fair_share: a.clone(),
                    allocated: a.clone(),
                });
                self.last_queue.insert(path, vals);
            }
        }
    }

    /// Requests of the bound tasks of each queue (inner queues sum their
    /// children), by `QueueId`.
    fn queue_alloc(&self) -> Vec<Resources> {
        let tree = self.world.queues();
        let mut alloc = self.leaf_alloc.clone();
        for q in tree.top_down().into_iter().rev() {
            if let Some(p) = tree.parent(q)
                && p != QueueTree::ROOT
            {
                let a = alloc[q.0].clone();
                alloc[p.0].add(&a);
            }
        }
        alloc
    }

    fn sample_cluster(&mut self, now: Timestamp) {
        let capacity: u64 = self
            .input
            .nodes
            .iter()
            .zip(&self.node_up)
            .filter(|(_, up)| **up)
            .map(|(n, _)| n.allocatable.gpu)
            .sum();
        let s = ClusterSample {
            time: now,
            gpu_capacity: capacity,
            gpu_allocated: self.gpu_allocated,
            running_jobs: self.running,
            pending_jobs: self.pending,
            largest_free_leaf_gpus: self.leaf_free.as_ref().map(LeafFree::largest),
        };
        match self.cluster.last_mut() {
            Some(last) if last.time == now => *last = s,
            Some(last)
                if (
                    last.gpu_capacity,
                    last.gpu_allocated,
                    last.running_jobs,
                    last.pending_jobs,
                    last.largest_free_leaf_gpus,
                ) == (
                    s.gpu_capacity,
                    s.gpu_allocated,
                    s.running_jobs,
                    s.pending_jobs,
                    s.largest_free_leaf_gpus,
                ) => {}
            _ => self.cluster.push(s),
        }
    }

    fn finish(self) -> SimOutput {
        let end = self.end;
        let start = self
            .input
            .jobs
            .iter()
            .map(|j| j.submit)
            .min()
            .unwrap_or(Timestamp(0));
        // Jobs whose arrival lies after the end (cut by --until) never
        // entered the simulation: they are left out.
        let mut jobs: Vec<JobRecord> = self
            .rt
            .into_iter()
            .map(|r| r.record)
            .filter(|r| r.submit <= end || r.state == JobState::Rejected)
            .collect();
        jobs.sort_by(|a, b| a.submit.cmp(&b.submit).then(a.id.cmp(&b.id)));
        SimOutput {
            policy: self.opts.policy.clone(),
            jobs,
            queues: self.queues,
            cluster: self.cluster,
            cycles: self.cycles,
            events: self.events,
            start_time: start,
            end_time: end,
            topology: self.opts.topology.as_deref().map(|t| {
                let leaf = t.leaf_level().map(|l| &t.levels()[l]);
                RunTopology {
                    levels: t.levels().iter().map(|l| l.name.clone()).collect(),
                    leaf_level: leaf.map(|l| l.name.clone()),
                    leaf_domains: leaf.map_or(0, |l| l.domains.len() as u32),
                    slowdown_ppm: self.opts.slowdown.per_spine_crossing_ppm,
                }
            }),
            evictions: self.evictions,
            eviction_model: self.opts.eviction,
        }
    }
}

/// A pod bound in this cycle: (task index = rank, node, GPU indices).
type PlacedPod<'d> = (u32, &'d str, &'d [u32]);

/// Where a gang that starts now sits: the scheduler's placement when it
/// reported one, else the span of `pods` (sorted here into rank order,
/// which is the task index).
fn job_topology(
    topo: &Topology,
    reported: Option<&GangPlacement>,
    pods: &mut [PlacedPod],
    slowdown: &Slowdown,
    duration_ms: u64,
) -> JobTopology {
    pods.sort_by_key(|p| p.0);
    let (span, level, in_tightest) = match reported {
        Some(gp) => (gp.span.clone(), gp.level.clone(), Some(gp.in_tightest)),
        None => {
            let list: Vec<(u32, Vec<u32>)> = pods
                .iter()
                .filter_map(|(_, node, gpus)| Some((topo.node_id(node)?, gpus.to_vec())))
                .collect();
            let span = topo.span(&list);
            let level = span
                .level
                .and_then(|l| topo.levels().get(l as usize))
                .map(|l| l.name.clone());
            (span, level, None)
        }
    };
    JobTopology {
        pods: pods.len() as u32,
        nodes: span.nodes,
        leaves: span.leaves,
        hops: span.hops,
        spine_crossings: span.spine_crossings,
        rail_aligned: span.rail_aligned,
        level,
        in_tightest,
        slowdown_ppm: slowdown.factor_ppm(span.spine_crossings, span.hops),
        slowdown_ms: slowdown.extra_ms(duration_ms, span.spine_crossings, span.hops),
    }
}

/// Why a job can never run on these nodes, if so.
fn too_large(j: &SimJob, nodes: &[Node], total: &Resources) -> Option<String> {
    for t in &j.tasks {
        let fits_somewhere = nodes.iter().any(|n| {
            t.requests.fits_in(&n.allocatable)
                && t.requests
                    .whole_gpus()
                    .is_none_or(|g| g as usize <= n.gpus.len())
        });
        if !fits_somewhere {
            return Some(format!(
                "a pod asks for {}, more than any node has",
                t.requests
            ));
        }
    }
    // The minimum: the first min_member tasks in order.
    let mut min = Resources::zero();
    let mut left = j.min_member;
    for t in &j.tasks {
        let n = t.count.min(left);
        min.add(&t.requests.scaled(n as u64));
        left -= n;
    }
    if let Some(r) = min.first_excess(total) {
        return Some(format!(
            "the gang minimum needs {} {r}, more than the whole cluster has ({})",
            r.format_amount(min.get(&r)),
            r.format_amount(total.get(&r))
        ));
    }
    None
}
