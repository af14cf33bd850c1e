//! One scheduling cycle: canonicalise the snapshot, account what runs,
//! compute fair shares, then place gangs queue by queue.
//!
//! Order of work (see ARCHITECTURE.md, "one scheduling cycle"):
//! 1. **Minimums.** Repeatedly walk the queue tree from the root, at each
//!    level taking the child with the lowest `max over resources of
//!    allocated / fair share` (then name) among those with untried jobs;
//!    in the chosen leaf take the next job by priority (high first), then
//!    submission time, then id; try to place its gang minimum in one
//!    transaction (all or nothing). Every job is tried once per cycle.
//! 2. **Elastic.** The same walk over jobs whose minimum holds and that have
//!    more pending pods; each pod above the minimum is placed if it fits.
//!
//! A gang that does not fit is skipped and jobs behind it are still tried
//! (backfill). A starving one first gets a reservation (`reserve.rs`): the
//! nodes it could start on once running jobs end, held from then, so later
//! jobs use them only if they end before.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;

use trainyard_model::{
    Job, JobId, Node, NodeName, PlacementConstraints, QueueId, QueueTree, Resources, Snapshot,
    TaskState, Timestamp,
};

use crate::config::Config;
use crate::decisions::{
    Bind, CycleStats, Decisions, Eviction, FilterReason, GangPlacement, NominationDecision,
    PendingReason, Reservation,
};
use crate::fairshare;
use crate::plugins::{self, Predicate};
use crate::policy::DeviceChoice;
use crate::scoring::Scoring;
use crate::state::{ClusterState, GpuAsk, NodeState, PodView};
use minimum::{minimum_ask, prefer_nominated, select_minimum};

/// Runs one scheduling cycle. Pure: same inputs, same decisions, whatever
/// the order of nodes, jobs, tasks or queues in `snapshot`.
pub fn schedule(snapshot: &Snapshot, config: &Config, now: Timestamp) -> Decisions {
    let mut cycle = Cycle::new(snapshot, config, now);
    cycle.run_minimums();
    cycle.run_elastic();
    cycle.run_consolidation();
    // A job that evicts starts once its victims are gone: on held nodes it
    // must end by the hold's start from then, or it would start the
    // reservation late. (Judged so even where it binds at once, into room
    // of this cycle's binds it took back: stricter, never later.)
    if !cycle.ledger.hold_times.is_empty() {
        cycle.ledger.start_at = now.0.saturating_add(cycle.ledger.victim_wait_ms());
    }
    cycle.run_evictions();
    // The refill binds at once, into room this cycle's binds left.
    cycle.ledger.start_at = now.0;
    cycle.run_refill();
    cycle.finish()
}

/// Hashing for (job, task) index pairs: a multiply-xor mix instead of
/// SipHash (the keys are small integers the core made itself, so there is
/// nothing to defend against). Iteration order of these sets never
/// reaches output.
#[derive(Clone, Copy, Default)]
struct PairHasher(u64);

impl std::hash::Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

type PairHash = std::hash::BuildHasherDefault<PairHasher>;

/// Nodes that pass the static predicates for one constraint set, and the
/// reason of every node that does not.
struct StaticFilter {
    feasible: Vec<u32>,
    /// `feasible` as a mask over node indices.
    mask: Vec<bool>,
    rejected: BTreeMap<FilterReason, u32>,
}

/// Per-job work of this cycle.
struct JobWork<'s> {
    /// Position in `Cycle::jobs`.
    index: usize,
    job: &'s Job,
    leaf: QueueId,
    /// Indices into `job.tasks` of pending tasks, in placement order.
    pending: Vec<usize>,
    /// Bound tasks per sub-group name ("" for none).
    bound_by_sub: BTreeMap<&'s str, u32>,
    bound_total: u32,
    /// Set when the job cannot be scheduled at all this cycle.
    blocked: Option<PendingReason>,
    /// When its first pod that holds a node started (`Job::started_at`).
    started: Option<Timestamp>,
    /// Whether any of its pods is terminating.
    terminating: bool,
    /// Its walltime: declared, else its queue's default, else its queue's
    /// maximum (`QueueTree::walltime`); `None`: it has none.
    walltime: Option<u64>,
}

impl JobWork<'_> {
    /// Its gang minimum holds through bound pods (every sub-group's too):
    /// what it still has pending are elastic pods.
    fn minimum_holds(&self) -> bool {
        self.bound_total >= self.job.min_member
            && self.job.subgroups.iter().all(|sg| {
                self.bound_by_sub
                    .get(sg.name.as_str())
                    .copied()
                    .unwrap_or(0)
                    >= sg.min_member
            })
    }
}

/// A node in `place_run`'s heap: window rank (rail plans), total score,
/// tie-break, node index (lower first), device choice.
type Candidate = (Reverse<usize>, u64, u64, Reverse<u32>, DeviceChoice);

/// A tentative placement: task index, node index, device slots.
type Placed = (usize, usize, Slots);

/// Device slots a pod holds (positions in `Node::gpus`): inline up to
/// eight, the devices of most GPU nodes, so accounting a bound pod
/// allocates nothing.
pub(crate) type Slots = smallvec::SmallVec<[usize; 8]>;

/// The placed pods of one job (or victim unit): inline when one, as most
/// are, so a cycle over many running jobs allocates nothing per job.
type PlacedList = smallvec::SmallVec<[Placed; 1]>;

/// One cycle's data, split by how it is used (see each part).
struct Cycle<'s> {
    world: World<'s>,
    ledger: Ledger<'s>,
    outcome: Outcome,
    memo: Memo,
}

/// What the cycle reads and never changes once built: config, time, queue
/// tree, nodes (canonical order), predicates and scoring, the topology
/// index, fair shares and demands, and which jobs hold a nomination.
struct World<'s> {
    config: &'s Config,
    now: Timestamp,
    tree: &'s QueueTree,
    nodes: Vec<&'s Node>,
    predicates: Vec<Box<dyn Predicate>>,
    scoring: Scoring,
    topo: Option<topo::TopoIndex>,
    fair: Vec<Resources>,
    demand: Vec<Resources>,
    /// Per leaf queue, each user's (namespace's) dominant share of the
    /// leaf's decayed usage (Q32): jobs of one priority go less-used user
    /// first. Empty unless the time-decayed fair share is on.
    user_shares: Vec<BTreeMap<&'s str, u128>>,
    /// Jobs with an unexpired nomination: they wait, they do not evict again.
    nominated: Vec<bool>,
    /// Constraint sets interned by value: `Arc` pointer → dense id, so
    /// equal constraints share one filter evaluation even across jobs.
    constraint_ids: HashMap<usize, u32, PairHash>,
    /// Rules between pods: `None` when no pod of the snapshot has any, and
    /// then nothing about them is computed (`allocate/ruled.rs`).
    rules: Option<crate::podrules::RuleIndex<'s>>,
    /// Per job: member id of its task 0 (task `t` is this + `t`), when
    /// `rules` is set.
    member_base: Vec<u32>,
    pod_predicates: Vec<Box<dyn plugins::PodPredicate>>,
    pod_scorers: Vec<Box<dyn plugins::PodScorer>>,
    /// Observed runtimes, for the ends of running jobs without a walltime.
    estimates: reserve::Estimates<'s>,
}

/// What placements and evictions change, and roll back together: per-job
/// progress, free capacity per node and device (with its undo and change
/// logs), queue allocations, where each job's pods sit, this cycle's binds
/// by (job, task), capacity reserved for nominations and released by
/// evictions.
struct Ledger<'s> {
    jobs: Vec<JobWork<'s>>,
    state: ClusterState,
    alloc: Vec<Resources>,
    /// Per queue, what its non-preemptible jobs hold (the quota check of
    /// non-preemptible jobs counts only these, as KAI-Scheduler does).
    alloc_np: Vec<Resources>,
    /// Where each job's bound tasks sit (task, node, device slots),
    /// including those bound this cycle.
    bound_at: Vec<PlacedList>,
    /// (job, task) bound by this cycle. The eviction pass may take them
    /// back for free (the bind is simply not made), so a job bound now is
    /// never what the next cycle evicts.
    fresh: std::collections::HashSet<(usize, usize), PairHash>,
    /// Position in `binds` of each (job, task) bound by this cycle.
    bind_index: HashMap<(usize, usize), usize, PairHash>,
    /// Capacity held for each job's nominated pending tasks.
    reserved: Vec<Vec<Placed>>,
    /// Pods evicted by this cycle (job, task, node, device slots): their
    /// room is free for nominations, not for binds.
    releasing: Vec<(usize, usize, usize, Slots)>,
    /// Where reclaims of this cycle freed room (node, device slots of a
    /// victim pod), hidden from gangs that would end above their fair
    /// share (`allocate/reclaimed.rs`).
    reclaimed: Vec<(usize, Slots)>,
    /// Jobs the running victim search has already counted as gone.
    set_aside: std::collections::BTreeSet<usize>,
    /// Jobs consolidation moved this cycle: `bound_at` says where their
    /// replacements go; nothing moves or evicts them again this cycle.
    moved: std::collections::BTreeSet<usize>,
    /// While set, the victim search takes binds of this cycle only (a
    /// nominated preemptor's second turn, `run_evictions`).
    fresh_only: bool,
    /// While a victim search runs: per queue on the preemptor's path and
    /// resource, what victims below that queue must free for the gang to
    /// stay within the queue's limit.
    victim_need: Vec<(QueueId, trainyard_model::ResourceName, u64)>,
    /// Preemptible jobs with bound pods (victim candidates), set by the
    /// eviction pass.
    running: Vec<usize>,
    /// Reservations made this cycle, in the order made (`reserve.rs`).
    holds: Vec<reserve::Hold>,
    /// Their start times (ms), ascending, without repeats.
    hold_times: Vec<i64>,
    /// The time placements are for (ms): now; now plus
    /// [`Ledger::victim_wait_ms`] in the eviction pass (a job that evicts
    /// starts once its victims are gone); or a reservation's projected
    /// start while it is searched for (reservations are made only in the
    /// first pass, which is why the projection sets it back to now).
    start_at: i64,
    /// Running jobs, and jobs with room held for nominated pods, by
    /// expected end (listed at set-up when reservations are on, sorted as
    /// far as reservations read).
    ends: ends::EndOrder,
    /// Jobs listed in `ends` (or known to have no expected end): those
    /// running at set-up and those bound since that `end_seen` covers.
    end_known: Vec<bool>,
    /// While a reserved gang's victim search runs with its own holds
    /// lifted: the node counts it sees are not kept (`copies_now`).
    holds_lifted: bool,
    /// Jobs this cycle bound pods of, in order (repeats allowed).
    bound_log: Vec<usize>,
    /// `bound_log` added to `ends` so far.
    end_seen: usize,
}

/// What the cycle decides, becoming `Decisions`: binds, gang placements,
/// evictions, nominations, pending reasons, warnings and counters.
struct Outcome {
    binds: Vec<Bind>,
    placements: Vec<GangPlacement>,
    evictions: Vec<Eviction>,
    nominations: Vec<NominationDecision>,
    pending: BTreeMap<usize, PendingReason>,
    warnings: Vec<String>,
    stats: CycleStats,
    /// Binds of this cycle taken back by the eviction pass.
    yields: u32,
    /// Positions in `binds` of binds taken back (left out of the decisions).
    dropped_binds: std::collections::HashSet<usize>,
    /// Jobs whose binds were taken back in the current eviction round.
    yielded: Vec<usize>,
    /// Leaves where the current eviction round bound or took back pods.
    changed_leaves: std::collections::BTreeSet<QueueId>,
    /// Jobs moved by consolidation.
    moves: Vec<crate::decisions::Move>,
    /// Gangs consolidation could not help although they fit the free
    /// capacity in total: why, added to their message.
    consolidation_notes: BTreeMap<usize, String>,
}

/// Caches of the cycle: interned constraint sets and their static
/// filters, failed shapes, per-shape node rankings, room counts of the
/// eviction pass. Never the source of truth: each can be recomputed.
struct Memo {
    filters: HashMap<u32, StaticFilter>,
    /// Single-shape gangs that failed: (constraint id, request) → smallest
    /// pod count that failed, and its reason. Capacity only shrinks within a
    /// cycle, so a gang of that shape and at least that size fails too.
    failed_shapes: HashMap<ShapeKey, (u32, PendingReason)>,
    /// Request shapes (constraint id, request) interned as they are met,
    /// each with its dense id and its GPU ask, classified once per cycle.
    shapes: HashMap<(u32, Resources), (u32, GpuAsk)>,
    /// Per shape id: the shape's ranking of nodes, built at its second run
    /// of the cycle (`None` after the first).
    ranked: HashMap<u32, Option<ranked::Ranked>, PairHash>,
    /// Per (constraint id, request): why its pod fits on no node, kept up
    /// to date from the state's change log (`allocate/diagnosis.rs`).
    diagnoses: HashMap<(u32, Resources), diagnosis::Diagnosis>,
    /// Free GPUs, most on one node, and usable nodes per constraint set, as
    /// the eviction pass last counted them (cleared when a plan applies).
    room_seen: HashMap<u32, (u64, u64, u32)>,
    /// Copies per node of a pod shape, as the eviction pass last counted
    /// them (cleared with `room_seen`).
    copies_seen: HashMap<ShapeKey, std::rc::Rc<Vec<u32>>>,
    /// Per (constraint id, request): copies of the pod per node and their
    /// sum, as of a position of the state's change log and for an end
    /// class (the reservation search's count, `reserve.rs`). Only held
    /// nodes count differently for another end class.
    reserve_copies: HashMap<(u32, Resources), ReserveCopies>,
    /// (constraint id, pod request, gang needs) → whether such a gang
    /// would fit on its nodes were they empty.
    ever_fits: HashMap<(u32, Resources, Resources), bool>,
    /// Per static filter: the allocatable of its feasible nodes, summed.
    filter_capacity: HashMap<u32, Resources>,
}

/// A pod shape as the caches key it: constraint id, request, and the end
/// class that decides which held nodes it may use (`Ledger::ends_of`).
type ShapeKey = (u32, Resources, i64);

/// [`Memo::reserve_copies`]' entry.
struct ReserveCopies {
    /// How much of the state's change log it has read.
    seen: usize,
    /// The end class (`PodView::ends`) the held nodes were counted for.
    ends: i64,
    per_node: Vec<i64>,
    total: i64,
}

impl<'s> Cycle<'s> {
    fn run_minimums(&mut self) {
        for (i, jw) in self.ledger.jobs.iter().enumerate() {
            // A job with nothing pending is not pending, blocked or not
            // (a running job whose queue became invalid keeps running).
            if let Some(r) = &jw.blocked
                && !jw.pending.is_empty()
            {
                self.outcome.pending.insert(i, r.clone());
            }
        }
        let mut walk = self.ledger.build_walk(
            &self.world,
            |jw| jw.blocked.is_none() && !jw.pending.is_empty(),
            minimum_ask,
        );
        while let Some(leaf) = self.ledger.pick_leaf(&self.world, &mut walk) {
            let Some(j) = self.world.pop_job(leaf, &mut walk) else {
                break;
            };
            self.outcome.stats.jobs_considered += 1;
            if let Err(reason) = self.try_gang(j) {
                let reserve = self.wants_reservation(j, &reason);
                self.outcome.pending.insert(j, reason);
                if let Some(min) = reserve {
                    self.reserve(j, min);
                }
            }
        }
    }

    /// Places the gang minimum of job `j` in one transaction.
    fn try_gang(&mut self, j: usize) -> Result<(), PendingReason> {
        let jw = &self.ledger.jobs[j];
        let job = jw.job;
        let held = self.ledger.held_tasks(j);
        let chosen = select_minimum(job, &jw.pending, &jw.bound_by_sub, jw.bound_total, &held)?;
        if chosen.is_empty() {
            // Minimum already holds through running tasks: elastic pass.
            return Ok(());
        }
        let mut needs = Resources::zero();
        for &t in &chosen {
            needs.add(&job.tasks[t].requests);
        }
        self.ledger.check_limits(&self.world, jw.leaf, &needs)?;
        if !job.preemptible {
            self.ledger
                .check_quota_for_non_preemptible(&self.world, jw.leaf, &needs)?;
        }

        // Same shape throughout? Then the failed-shape cache applies.
        let first = &job.tasks[chosen[0]];
        let single_shape = one_shape(job, &chosen);
        let shape_key = (
            self.world.constraint_id(&first.constraints),
            first.requests.clone(),
            self.ledger.ends_of(j),
        );
        // Topology constraints: checked here, where the topology is known.
        let constrained =
            !job.topology.is_empty() || job.subgroups.iter().any(|sg| !sg.topology.is_empty());
        let aware = self.world.topology_aware();
        if constrained
            && self.world.config.topology.placement == crate::config::TopologyPlacement::Aware
        {
            let check = match &self.world.topo {
                None => Err(
                    "the job has topology constraints but the cluster has no topology".to_string(),
                ),
                Some(ti) => ti.check(&job.topology, "gang").and_then(|()| {
                    job.subgroups.iter().try_for_each(|sg| {
                        ti.check(&sg.topology, &format!("sub-group {}", sg.name))
                    })
                }),
            };
            if let Err(message) = check {
                return Err(PendingReason::Rejected { message });
            }
        }
        let topo_search = aware && (chosen.len() > 1 || constrained);
        // The failed-shape cache holds for unconstrained gangs only: a
        // constrained one may fail for its own constraint.
        // Nor for a job with reserved room: releasing it adds capacity.
        // Nor for pods under rules between pods: placements of others
        // may make room for them (affinity), not only take it.
        let cacheable = single_shape
            && !constrained
            && self.ledger.reserved[j].is_empty()
            && !self.ledger.has_hold(j)
            && !chosen.iter().any(|&t| self.world.affected(j, t));
        if cacheable
            && let Some((n, reason)) = self.memo.failed_shapes.get(&shape_key)
            && chosen.len() as u32 >= *n
        {
            // Same shape, at least as large, on no more capacity: it would
            // fail at the same pod. Restate the reason for this job.
            let mut reason = reason.clone();
            if let PendingReason::Unschedulable {
                needs: r_needs,
                pods_needed,
                pods_placed,
                failed_pod,
                ..
            } = &mut reason
            {
                *r_needs = needs.clone();
                *pods_needed = chosen.len() as u32;
                let at = (*pods_placed as usize).min(chosen.len() - 1);
                *failed_pod = job.tasks[chosen[at]].name.clone();
            }
            return Err(reason);
        }

        let tightest = if self.world.topo.is_some() && chosen.len() > 1 {
            self.tightest_feasible(j, &chosen)
        } else {
            None
        };
        let mark = self.ledger.state.begin();
        self.ledger.release_reservations(&self.world, j);
        self.ledger.release_holds(&self.world, j);
        self.ledger.credit_own_room(&self.world, j);
        let placed = match self.place_chosen(j, &chosen, &needs, topo_search) {
            Ok(p) => p,
            Err(reason) => {
                self.ledger.state.rollback(mark);
                if cacheable && matches!(reason, PendingReason::Unschedulable { .. }) {
                    let e = self
                        .memo
                        .failed_shapes
                        .entry(shape_key)
                        .or_insert((chosen.len() as u32, reason.clone()));
                    if chosen.len() as u32 <= e.0 {
                        *e = (chosen.len() as u32, reason.clone());
                    }
                }
                return Err(reason);
            }
        };
        // Placed: its reservation and nominated room (if any) are done with.
        self.ledger.holds.retain(|h| h.job != j);
        self.ledger.reservations_used(j);
        self.outcome.stats.gangs_placed += 1;
        let bound = self.ledger.jobs[j].bound_total as usize;
        if chosen.len() + bound > 1
            && let Some(gp) = self
                .ledger
                .gang_placement(&self.world, j, &placed, tightest)
        {
            self.outcome.placements.push(gp);
        }
        self.record(j, placed);
        Ok(())
    }

    /// Places the chosen pods of job `j` inside the open transaction: by
    /// the topology search or run by run over the whole cluster. On error the
    /// caller rolls back.
    fn place_chosen(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
        topo_search: bool,
    ) -> Result<Vec<Placed>, PendingReason> {
        self.place_chosen_or(j, chosen, needs, topo_search, true)
    }

    /// [`Cycle::place_chosen`]; with `explain` false a failure outside the
    /// topology search is not diagnosed (its reason counts no nodes and
    /// names no filters): for callers that only ask whether it fits, such
    /// as the victim search, which would otherwise pay a scan of every
    /// node for each victim set it tries.
    fn place_chosen_or(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
        topo_search: bool,
        explain: bool,
    ) -> Result<Vec<Placed>, PendingReason> {
        if topo_search {
            return self.place_gang_topology(j, chosen, needs);
        }
        let job = self.ledger.jobs[j].job;
        let aware = self.world.topology_aware();
        let mut placed: Vec<Placed> = Vec::with_capacity(chosen.len());
        let mut start = 0;
        while start < chosen.len() {
            let head = &job.tasks[chosen[start]];
            let end = run_end(job, chosen, start);
            // With a topology, whole-GPU pods smaller than a node take an
            // aligned, NUMA-local window of devices when one is free.
            let plan = if aware {
                Some(self.ledger.rail_plan(
                    &self.world,
                    head.requests.clone(),
                    &head.constraints,
                    &[],
                    false,
                ))
            } else {
                None
            };
            if let Err(fail_at) =
                self.search()
                    .place_run(&chosen[start..end], j, &mut placed, None, plan.as_ref())
            {
                let failed_task = &job.tasks[chosen[start + fail_at]];
                let (nodes_fit, filters) = if explain {
                    self.search().diagnose_task(j, chosen[start + fail_at])
                } else {
                    (0, BTreeMap::new())
                };
                return Err(PendingReason::Unschedulable {
                    needs: needs.clone(),
                    pods_needed: chosen.len() as u32,
                    pods_placed: placed.len() as u32,
                    failed_pod: failed_task.name.clone(),
                    nodes_total: self.world.nodes.len() as u32,
                    nodes_fit,
                    filters,
                });
            }
            start = end;
        }
        Ok(placed)
    }

    /// Whether job `j`'s minimum (`needs`, its first pod task `t`) could
    /// fit on its nodes if they were empty: only such a gang gets a
    /// reservation.
    fn could_ever_fit(&mut self, j: usize, t: usize, needs: &Resources) -> bool {
        let task = &self.ledger.jobs[j].job.tasks[t];
        let key = self.memo.static_filter(&self.world, &task.constraints);
        let memo_key = (key, task.requests.clone(), needs.clone());
        if let Some(&known) = self.memo.ever_fits.get(&memo_key) {
            return known;
        }
        let Some(filter) = self.memo.filters.get(&key) else {
            return false;
        };
        let nodes = &self.world.nodes;
        // The feasible nodes' capacity depends on the filter only.
        let capacity = self.memo.filter_capacity.entry(key).or_insert_with(|| {
            let mut c = Resources::zero();
            for &n in &filter.feasible {
                c.add(&nodes[n as usize].allocatable);
            }
            c
        });
        let fits = needs.fits_in(capacity)
            && filter
                .feasible
                .iter()
                .any(|&n| task.requests.fits_in(&nodes[n as usize].allocatable));
        self.memo.ever_fits.insert(memo_key, fits);
        fits
    }

    /// Commits placements of job `j`: binds and queue allocation.
    fn record(&mut self, j: usize, placed: Vec<Placed>) {
        if !placed.is_empty() {
            self.ledger.bound_log.push(j);
        }
        let jw = &mut self.ledger.jobs[j];
        let job = jw.job;
        let mut add = Resources::zero();
        for (t, n, slots) in placed {
            let task = &job.tasks[t];
            let node = self.world.nodes[n];
            let mut charged = task.requests.clone();
            if task.constraints.gpu_memory.is_some() {
                // A memory share is charged what it takes on its device.
                let pod = PodView::of_task(task);
                charged.gpu = NodeState::charged_gpu(node, &pod, &slots);
            }
            add.add(&charged);
            jw.pending.retain(|&p| p != t);
            jw.bound_total += 1;
            self.ledger.bound_at[j].push((t, n, slots.clone()));
            self.ledger.fresh.insert((j, t));
            *jw.bound_by_sub
                .entry(task.subgroup.as_deref().unwrap_or(""))
                .or_default() += 1;
            self.ledger
                .bind_index
                .insert((j, t), self.outcome.binds.len());
            self.outcome.binds.push(Bind {
                job: JobId(job.id.clone()),
                task: task.key.clone(),
                node: NodeName(node.name.clone()),
                gpus: slots.iter().map(|&s| node.gpus[s].index).collect(),
            });
            self.outcome.stats.pods_bound += 1;
        }
        let leaf = jw.leaf;
        self.ledger
            .charge(&self.world, leaf, &add, !job.preemptible);
    }

    // ---- pass 2: elastic pods ----------------------------------------

    fn run_elastic(&mut self) {
        let mut walk = self.ledger.build_walk(
            &self.world,
            |jw| jw.blocked.is_none() && !jw.pending.is_empty() && jw.minimum_holds(),
            |jw| {
                jw.pending
                    .first()
                    .map(|&t| jw.job.tasks[t].requests.clone())
                    .unwrap_or_default()
            },
        );
        while let Some(leaf) = self.ledger.pick_leaf(&self.world, &mut walk) {
            let Some(j) = self.world.pop_job(leaf, &mut walk) else {
                break;
            };
            let job = self.ledger.jobs[j].job;
            // Pods with room held for them first (their nominations), then
            // the other nominated ones, then the rest in placement order.
            let all = &self.ledger.jobs[j].pending;
            let pending: Vec<usize> = if all.iter().any(|&t| job.tasks[t].nomination.is_some()) {
                prefer_nominated(job, all, &self.ledger.held_tasks(j))
            } else {
                all.clone()
            };
            // Room held for its nominated pods is its own to use now.
            self.ledger.release_reservations(&self.world, j);
            self.ledger.release_holds(&self.world, j);
            self.ledger.credit_own_room(&self.world, j);
            self.ledger.reservations_used(j);
            let mut placed_total = 0u32;
            let mut failure: Option<String> = None;
            let mut start = 0;
            while start < pending.len() && failure.is_none() {
                let head = &job.tasks[pending[start]];
                let end = run_end(job, &pending, start);
                let room = self
                    .ledger
                    .limit_headroom(&self.world, leaf, &head.requests);
                let take_to = end.min(start.saturating_add(room));
                if take_to == start {
                    let reason = self
                        .ledger
                        .check_limits(&self.world, leaf, &head.requests)
                        .err();
                    failure = Some(
                        reason
                            .map(|r| r.to_string())
                            .unwrap_or_else(|| "queue limit".into()),
                    );
                    break;
                }
                let mut placed = Vec::new();
                let result =
                    self.search()
                        .place_run(&pending[start..take_to], j, &mut placed, None, None);
                placed_total += placed.len() as u32;
                self.record(j, placed);
                if let Err(pos) = result {
                    let (fit, filters) = self.search().diagnose_task(j, pending[start + pos]);
                    let mut items: Vec<_> = filters.into_iter().collect();
                    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    let parts: Vec<String> =
                        items.iter().map(|(r, n)| format!("{n} {r}")).collect();
                    failure = Some(format!(
                        "{fit}/{} nodes fit: {}",
                        self.world.nodes.len(),
                        parts.join(", ")
                    ));
                } else if take_to < end {
                    let reason = self
                        .ledger
                        .check_limits(&self.world, leaf, &head.requests)
                        .err();
                    failure = Some(
                        reason
                            .map(|r| r.to_string())
                            .unwrap_or_else(|| "queue limit".into()),
                    );
                }
                start = end;
            }
            if let Some(detail) = failure {
                let left = self.ledger.jobs[j].pending.len() as u32;
                self.outcome.pending.insert(
                    j,
                    PendingReason::ElasticPending {
                        placed: placed_total,
                        pending: left,
                        detail,
                    },
                );
            }
        }
    }
}

/// Whether the tasks `chosen` of `job` are all of one shape: the same
/// request and the same constraint set (the failed-shape caches and the
/// victim search's cover bound hold only for such gangs).
fn one_shape(job: &Job, chosen: &[usize]) -> bool {
    run_end(job, chosen, 0) == chosen.len()
}

/// Whether two tasks are of one shape: the same request and the same
/// (interned) constraint set, so one placement search serves both.
fn same_shape(a: &trainyard_model::Task, b: &trainyard_model::Task) -> bool {
    a.requests == b.requests && Arc::ptr_eq(&a.constraints, &b.constraints)
}

/// The end of the run of tasks of one shape that starts at `tasks[start]`:
/// the first index after `start` whose task differs from it, or the end.
pub(super) fn run_end(job: &Job, tasks: &[usize], start: usize) -> usize {
    let head = &job.tasks[tasks[start]];
    tasks[start + 1..]
        .iter()
        .position(|&t| !same_shape(&job.tasks[t], head))
        .map_or(tasks.len(), |i| start + 1 + i)
}

mod accounts;
mod consolidate;
mod diagnosis;
mod ends;
mod evict;
pub mod holdings;
mod minimum;
mod output;
mod place;
mod radix;
mod ranked;
mod reclaimed;
mod reserve;
mod ruled;
mod setup;
#[cfg(test)]
mod tests;
mod topo;
mod victim_rules;
mod victims;
mod walk;
