//! The discrete-event engine.
//!
//! Events (task finishes, node failures and recoveries, job arrivals and
//! scheduling cycles) sit in one priority queue ordered by (time, kind,
//! sequence number). At equal times, finishes come first, then node events,
//! then arrivals, then the cycle; the sequence number breaks the remaining
//! ties in insertion order, so runs are deterministic.
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
//!   back to pending as a whole (gang semantics) and starts over.
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
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;

use trainyard_model::topology::Topology;
use trainyard_model::{Job, Node, QueueId, QueueTree, Resources, Snapshot, TaskState, Timestamp};
use trainyard_sched::{Config, GangPlacement, PendingReason, schedule};

use crate::job::{SimJob, task_index};
use crate::result::{
    ClusterSample, JobRecord, JobState, JobTopology, QueueSample, RunTopology, SimOutput,
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
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            policy: "default".into(),
            cycle_period_ms: 10_000,
            until: None,
            topology: None,
            slowdown: Slowdown::default(),
        }
    }
}

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
    /// Tasks (indices into the SimJob's expanded tasks) of a job end.
    Finish {
        job: usize,
        epoch: u32,
        tasks: Vec<u32>,
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
            Event::Node { .. } => 1,
            Event::Arrival { .. } => 2,
            Event::Cycle => 3,
        }
    }
}

/// Runtime state of one job.
struct Rt {
    record: JobRecord,
    /// Index into `snapshot.jobs` while active.
    slot: Option<usize>,
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
    /// Run time of the tasks of the current start (duration plus slowdown).
    run_ms: u64,
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
    snapshot: Snapshot,
    node_up: Vec<bool>,
    rt: Vec<Rt>,
    /// SimJob index of each `snapshot.jobs` entry.
    slot_job: Vec<usize>,
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
    needs_compaction: bool,
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
}

/// Runs a simulation to completion (or `opts.until`).
pub fn simulate(
    input: SimInput<'_>,
    config: &Config,
    opts: &SimOptions,
    progress: &mut dyn FnMut(&Progress),
) -> SimOutput {
    let mut e = Engine::new(input, config, opts);
    e.run(progress);
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
            snapshot: Snapshot {
                nodes: input.nodes.to_vec(),
                queues: input.queues.clone(),
                jobs: Vec::new(),
                external: Vec::new(),
                topology: opts.topology.clone(),
            },
            node_up: vec![true; input.nodes.len()],
            rt: Vec::with_capacity(input.jobs.len()),
            slot_job: Vec::new(),
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
            needs_compaction: false,
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
                slot: None,
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

    fn run(&mut self, progress: &mut dyn FnMut(&Progress)) {
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
                    Event::Finish { job, epoch, tasks } => {
                        changed |= self.finish_tasks(job, epoch, &tasks, now)
                    }
                    Event::Node { index, up } => changed |= self.node_event(index, up),
                    Event::Arrival { job } => {
                        self.arrive(job);
                        changed = true;
                    }
                    Event::Cycle => {
                        // A cycle superseded by an earlier one is stale.
                        if self.next_cycle == Some(t) {
                            self.next_cycle = None;
                            self.cycle(now);
                            moved = true;
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
            self.cycle(now);
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
            preemptible: true,
            tasks,
            rejected: None,
        };
        self.rt[j].slot = Some(self.snapshot.jobs.len());
        self.snapshot.jobs.push(job);
        self.slot_job.push(j);
        self.pending += 1;
    }

    fn finish_tasks(&mut self, j: usize, epoch: u32, tasks: &[u32], now: Timestamp) -> bool {
        if self.rt[j].epoch != epoch {
            return false;
        }
        let Some(slot) = self.rt[j].slot else {
            return false;
        };
        let job = &mut self.snapshot.jobs[slot];
        let mut freed = 0u64;
        let mut ended = 0u32;
        let mut freed_req = Resources::zero();
        let leaf_free = &mut self.leaf_free;
        let (nodes, up) = (self.input.nodes, &self.node_up);
        job.tasks.retain(|t| {
            let done = task_index(&t.name).is_some_and(|i| tasks.contains(&i));
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
        let rt = &mut self.rt[j];
        rt.winding_down = true;
        rt.bound -= ended.min(rt.bound);
        rt.gpu_bound -= freed.min(rt.gpu_bound);
        rt.bound_req.saturating_sub(&freed_req);
        if let Some(q) = rt.leaf {
            self.leaf_alloc[q.0].saturating_sub(&freed_req);
        }
        self.gpu_allocated -= freed.min(self.gpu_allocated);
        if rt.bound == 0 {
            rt.record.end = Some(now);
            rt.record.state = JobState::Completed;
            rt.slot = None;
            self.running -= 1;
            self.finished += 1;
            self.needs_compaction = true;
        }
        true
    }

    fn node_event(&mut self, index: usize, up: bool) -> bool {
        if self.node_up[index] == up {
            return false;
        }
        self.node_up[index] = up;
        if let Some(lf) = &mut self.leaf_free {
            lf.node(index, up);
        }
        let name = self.input.nodes[index].name.clone();
        if up {
            self.snapshot.nodes.push(self.input.nodes[index].clone());
            self.snapshot.nodes.sort_by(|a, b| a.name.cmp(&b.name));
            return true;
        }
        self.snapshot.nodes.retain(|n| n.name != name);
        // Every job with a task on the node restarts from scratch.
        for slot in 0..self.snapshot.jobs.len() {
            let j = self.slot_job[slot];
            if self.rt[j].slot != Some(slot) {
                continue;
            }
            let hit = self.snapshot.jobs[slot]
                .tasks
                .iter()
                .any(|t| matches!(&t.state, TaskState::Bound { node, .. } if *node == name));
            if !hit {
                continue;
            }
            if let Some(lf) = &mut self.leaf_free {
                for t in &self.snapshot.jobs[slot].tasks {
                    if let TaskState::Bound {
                        node,
                        gpus: Some(g),
                    } = &t.state
                    {
                        lf.change(self.input.nodes, &self.node_up, node, g, false);
                    }
                }
            }
            let rt = &mut self.rt[j];
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
            rt.run_ms = self.input.jobs[j].duration_ms;
            rt.record.state = JobState::Pending;
            let was_winding = rt.winding_down;
            rt.winding_down = false;
            self.running -= 1;
            self.pending += 1;
            // Back to the job as submitted.
            let sj = &self.input.jobs[j];
            let job = &mut self.snapshot.jobs[slot];
            if was_winding {
                job.min_member = sj.min_member;
                job.subgroups = sj.subgroups.clone();
            }
            job.tasks = sj.pending_tasks();
        }
        true
    }

    /// Drops completed and rejected jobs from the snapshot.
    fn compact(&mut self) {
        if !self.needs_compaction {
            return;
        }
        self.needs_compaction = false;
        let mut keep_jobs = Vec::with_capacity(self.snapshot.jobs.len());
        let mut keep_slots = Vec::with_capacity(self.slot_job.len());
        for (job, j) in std::mem::take(&mut self.snapshot.jobs)
            .into_iter()
            .zip(std::mem::take(&mut self.slot_job))
        {
            if self.rt[j].slot.is_some() {
                self.rt[j].slot = Some(keep_jobs.len());
                keep_jobs.push(job);
                keep_slots.push(j);
            }
        }
        self.snapshot.jobs = keep_jobs;
        self.slot_job = keep_slots;
    }

    fn cycle(&mut self, now: Timestamp) {
        self.dirty = false;
        self.compact();
        let d = schedule(&self.snapshot, self.config, now);
        self.cycles += 1;

        // Apply binds, grouped by job.
        let mut started: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        // Pods placed per job: (task index, node, GPU indices).
        let mut placed: BTreeMap<usize, Vec<PlacedPod>> = BTreeMap::new();
        for b in &d.binds {
            let (Some(&j), Some(ti)) = (self.by_id.get(&b.job), task_index(&b.task)) else {
                continue;
            };
            let Some(slot) = self.rt[j].slot else {
                continue;
            };
            let Some(task) = self.snapshot.jobs[slot]
                .tasks
                .iter_mut()
                .find(|t| t.name == b.task)
            else {
                continue;
            };
            task.state = TaskState::Bound {
                node: b.node.clone(),
                gpus: Some(b.gpus.clone()),
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
                let duration = self.input.jobs[j].duration_ms;
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
            let at = now.0 + rt.run_ms as i64;
            let epoch = rt.epoch;
            self.push(
                at,
                Event::Finish {
                    job: j,
                    epoch,
                    tasks,
                },
            );
        }
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
                rt.slot = None;
                self.pending -= 1;
                self.finished += 1;
                self.needs_compaction = true;
            }
        }
        // Running jobs that could still grow wake later changes.
        self.elastic_waiting = self
            .snapshot
            .jobs
            .iter()
            .enumerate()
            .filter(|(slot, job)| {
                let rt = &self.rt[self.slot_job[*slot]];
                rt.slot == Some(*slot)
                    && rt.record.start.is_some()
                    && !rt.winding_down
                    && job.tasks.iter().any(|t| t.is_pending())
            })
            .count() as u32;
        // Queue samples, only when a queue's numbers changed.
        for q in &d.queues {
            let now_vals = (q.demand.clone(), q.fair_share.clone(), q.allocated.clone());
            if self.last_queue.get(&q.queue) != Some(&now_vals) {
                self.queues.push(QueueSample {
                    time: now,
                    queue: q.queue.clone(),
                    is_leaf: self.leaf_paths.contains(q.queue.as_str()),
                    demand: q.demand.clone(),
                    fair_share: q.fair_share.clone(),
                    allocated: q.allocated.clone(),
                });
                self.last_queue.insert(q.queue.clone(), now_vals);
            }
        }
        // A starving gang changes decisions with time alone: wake up then.
        if let Some(s) = self.config.gang_starvation_seconds
            && self.pending > 0
        {
            let wake = self
                .snapshot
                .jobs
                .iter()
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
    }

    /// Queue samples when nothing is pending: demand = fair share =
    /// allocation = running requests, per queue (inner queues sum their
    /// children). Written only for queues whose numbers changed.
    fn sample_queues_idle(&mut self, now: Timestamp) {
        let tree = &self.snapshot.queues;
        let mut alloc = self.leaf_alloc.clone();
        for q in tree.top_down().into_iter().rev() {
            if let Some(p) = tree.parent(q)
                && p != QueueTree::ROOT
            {
                let a = alloc[q.0].clone();
                alloc[p.0].add(&a);
            }
        }
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
