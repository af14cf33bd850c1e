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
//! - A job the core moves (consolidation) is evicted like any victim and
//!   restarts whole after the grace period, losing work by the same
//!   model (counted apart, as lost to moves); meanwhile its planned room
//!   is held for it and its restarted pods are nominated there, as the
//!   live service does ([`trainyard_cluster::Moves`]).
//! - Time alone changes decisions when a nomination expires, a running
//!   job passes its queue's minimum runtime, a move's hold times out or
//!   a moved job's no-move period ends: the engine wakes up then.
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

use trainyard_cluster::{Applied, Change, ClusterState, Moves};
use trainyard_model::dra::Dra;
use trainyard_model::topology::Topology;
use trainyard_model::{
    Job, Node, QueueId, QueueTree, Resources, Snapshot, Task, TaskState, Timestamp,
};
use trainyard_sched::{Config, Decisions, EvictionKind, GangPlacement, PendingReason, schedule};

use crate::job::SimJob;
use crate::preemption::{EvictionModel, LostWork, work_after_kill};
use crate::result::{
    ClusterSample, EvictionSample, JobRecord, JobState, JobTopology, LostGpu, QueueSample,
    RunTopology, SimOutput,
};
use crate::spec::{Fault, MAX_DURATION_MS, Slowdown};

mod cycle;
mod leaf_free;
mod life;
pub(crate) mod resume;
mod samples;

use leaf_free::LeafFree;

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
    /// The walltime of each start (ms): declared, else the queue's default,
    /// else the queue's maximum (`QueueTree::walltime`).
    walltime_ms: Option<u64>,
    /// The current start ends at the walltime, before its work is done.
    timed_out: bool,
    /// When the current start began (ms): the walltime counts from it.
    run_start_ms: i64,
    /// Its pods are being evicted to move it (consolidation): the work
    /// they lose counts as lost to moves.
    moving: bool,
}

/// Why a job restarts as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kill {
    NodeFault,
    Eviction,
    /// An eviction that moves the job (consolidation).
    Move,
}

struct Engine<'a> {
    input: SimInput<'a>,
    /// The input nodes as the world has them: those whose labels publish
    /// DRA devices ([`crate::dra`]) without device-plugin GPUs and with
    /// `nvidia.com/gpu` served by their devices. A node that recovers
    /// comes back as it is here, with its devices (the world's `Dra`
    /// never changes: a node that is down is not in the snapshot, so
    /// neither are its devices).
    nodes: Vec<Node>,
    /// Claims the core allocated (`Decisions::claims` with devices).
    dra_claims: u64,
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
    /// The jobs in the world, by id (the world's order), each with its
    /// index into `rt`: walking both together needs no lookup.
    live: BTreeMap<String, usize>,
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
    /// When a run resumed from a snapshot stops early (forecasts).
    stop: Option<resume::Stop>,
    /// After the last cycle, a job waited for room although its
    /// minimum's GPUs were free in total ([`ClusterSample::scattered`]).
    scattered: bool,
    /// Consolidation's open moves: the room planned for moved jobs, held
    /// until they are bound there again (the live service keeps the same).
    moves: Moves,
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
        let (nodes, dra) = published(input.nodes);
        let mut e = Engine {
            input,
            config,
            opts,
            heap: BinaryHeap::new(),
            seq: 0,
            world: ClusterState::from_snapshot(Snapshot {
                dra: Arc::new(dra),
                nodes: nodes.iter().cloned().map(Arc::new).collect(),
                queues: Arc::new(input.queues.clone()),
                jobs: Vec::new(),
                external: Vec::new(),
                topology: opts.topology.clone(),
                usage: Default::default(),
                user_usage: Default::default(),
                runtimes: Default::default(),
            }),
            node_up: vec![true; nodes.len()],
            rt: Vec::with_capacity(input.jobs.len()),
            by_id: HashMap::with_capacity(input.jobs.len()),
            live: BTreeMap::new(),
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
                .and_then(|t| LeafFree::new(&nodes, t)),
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
            stop: None,
            moves: Moves::default(),
            scattered: false,
            nodes,
            dra_claims: 0,
        };
        // The time-decayed fair share needs a usage history.
        if let Some(h) = config.fair_share.usage_half_life_seconds {
            e.world
                .track_usage(trainyard_cluster::usage::UsageHistory::new(h));
        }
        // The reservations' runtime estimate needs the observed runtimes.
        e.world
            .track_runtimes(config.reservations.estimate().map(|r| r.samples));
        // Largest node and whole cluster, to reject what can never fit.
        let mut total = Resources::zero();
        for n in &e.nodes {
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
                reserved_start: None,
            };
            if let Some(reason) = &j.rejected {
                record.state = JobState::Rejected;
                record.pending_reason = Some(reason.clone());
            } else if let Some(reason) = too_large(j, &e.nodes, &total) {
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
                walltime_ms: input
                    .queues
                    .walltime(&j.queue, j.walltime_seconds)
                    .map(|s| s.saturating_mul(1000)),
                timed_out: false,
                run_start_ms: 0,
                moving: false,
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

    /// The world's jobs with their runtime state, in id order.
    fn live_jobs(&self) -> impl Iterator<Item = (&Job, &Rt)> {
        self.world.jobs().zip(self.live.values()).map(|(job, &j)| {
            debug_assert_eq!(job.id, self.rt[j].record.id, "world and live agree");
            (job, &self.rt[j])
        })
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
            if self.stop_now() {
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
                let period = self.period_at(t);
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
        if self.dirty && self.opts.until.is_none() && self.stop.is_none() {
            self.cycle(scheduler, now);
            self.sample_cluster(now);
        }
        self.end = now;
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

/// The input nodes with the DRA devices their labels publish
/// ([`crate::dra::publish`]), and the DRA part of the snapshot.
fn published(nodes: &[Node]) -> (Vec<Node>, Dra) {
    if !nodes
        .iter()
        .any(|n| crate::dra::DraPublish::from_labels(n).is_some())
    {
        return (nodes.to_vec(), Dra::default());
    }
    let arcs: Vec<Arc<Node>> = nodes.iter().cloned().map(Arc::new).collect();
    let p = crate::dra::publish(&arcs, &crate::dra::DraPublish::from_labels);
    for w in &p.warnings {
        tracing::warn!("simulated DRA devices: {w}");
    }
    let nodes = p
        .nodes
        .into_iter()
        .map(|n| Arc::try_unwrap(n).unwrap_or_else(|n| (*n).clone()))
        .collect();
    (nodes, p.dra)
}

/// Why a job can never run on these nodes, if so.
fn too_large(j: &SimJob, nodes: &[Node], total: &Resources) -> Option<String> {
    for t in &j.tasks {
        let fits_somewhere = nodes.iter().any(|n| {
            // GPUs served by DRA devices (KEP-5004): no device-plugin
            // devices, allocated whole only.
            let dra_gpus = n.gpus.is_empty() && n.allocatable.gpu > 0;
            let devices = if dra_gpus {
                n.allocatable.gpu / trainyard_model::resources::MILLI_PER_GPU
            } else {
                n.gpus.len() as u64
            };
            t.requests.fits_in(&n.allocatable)
                && match t.requests.whole_gpus() {
                    Some(g) => g <= devices,
                    None => !dra_gpus,
                }
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
