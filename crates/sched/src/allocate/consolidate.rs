//! Consolidation: running jobs moved out of the way of a waiting gang
//! whose free room is scattered (docs/consolidation.md).
//!
//! After the allocation passes and before reclaim and preemption, each gang
//! still pending for lack of room whose minimum fits the free capacity of
//! its feasible nodes in total is offered moves, in the usual walk order:
//!
//! - **Movable**: a job with bound pods only from before this cycle, every
//!   pod with a controller (a bare pod would not come back), preemptible
//!   (a PodDisruptionBudget that allows no disruption makes it not so),
//!   past its queue's minimum runtime, no pod terminating, not moved within
//!   `noMoveSeconds`, not moved already this cycle.
//! - **A plan**: the movable jobs on a set of candidate nodes leave them
//!   (whole: every pod of a job moves, so no gang breaks), the gang is
//!   placed, then every moved job is placed whole, with its own
//!   constraints and topology, on nodes none of the moved jobs leaves (its
//!   replacement pods must not wait for another move). A job placed back
//!   where it was is not moved. Every moved job is placed in the same
//!   cycle, so no queue's allocation drops.
//! - **The cheapest**: candidate sets are the cheapest nodes to clear
//!   (work the movable pods there have done), alone and as growing
//!   prefixes, at most `maxAttempts` per gang; the plan losing the least
//!   work (pod-seconds run), then moving the fewest pods, wins.
//! - **Applied**: the moved pods are evicted (`consolidate`), their room
//!   stays theirs until they terminate, the moved jobs' new room is taken
//!   (their replacements' hold, `Decisions::moves`), the gang is nominated
//!   onto its room and says `consolidating: ...`.
//!
//! A gang that fits in total but gets no plan keeps its reason, and its
//! message says why consolidation did not help.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use trainyard_model::{JobId, NodeName, Resources};

use super::evict::{Minimum, Unit};
use super::{Cycle, Placed, PlacedList};
use crate::decisions::{EvictionKind, Move, MovedPod, NominationDecision, PendingReason};

/// A job that may move, and what moving it costs.
struct Movable {
    job: usize,
    /// Its pods as accounted (task, node, device slots).
    pods: PlacedList,
    /// Pod-seconds its pods have run (the work a move loses when the
    /// job restarts without a checkpoint).
    work: u64,
}

/// Why a running job on a candidate node may not move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stuck {
    NotPreemptible,
    BarePods,
    MinRuntime,
    Terminating,
    MovedRecently,
    BoundThisCycle,
}

impl Stuck {
    fn says(self) -> &'static str {
        match self {
            Stuck::NotPreemptible => "not preemptible (or protected by a PodDisruptionBudget)",
            Stuck::BarePods => "bare pods (no controller would recreate them)",
            Stuck::MinRuntime => "within their queue's minimum runtime",
            Stuck::Terminating => "already terminating",
            Stuck::MovedRecently => "moved recently (consolidation.noMoveSeconds)",
            Stuck::BoundThisCycle => "placed by this cycle",
        }
    }
}

/// Every job with bound pods, movable or not (and why), and the jobs on
/// each node.
struct Census {
    /// By job index (`None`: no bound pods).
    jobs: Vec<Option<Result<Movable, Stuck>>>,
    on: Vec<Vec<usize>>,
    /// Per node: its movable jobs and the work they did.
    nodes: Vec<NodeCensus>,
    /// Per constraint set (static filter): its candidate nodes and why
    /// the jobs on its nodes may not move, made when first asked.
    by_key: HashMap<u32, KeyCensus>,
}

/// What the nodes of one static filter offer.
struct KeyCensus {
    /// (work, node, movable jobs) of the nodes with any, cheapest first.
    cands: Vec<(u64, usize, usize)>,
    /// Jobs on those nodes that may not move, by reason (each once).
    stuck: BTreeMap<Stuck, u32>,
}

impl Census {
    fn of_nodes(&self, feasible: &[u32]) -> KeyCensus {
        let mut cands: Vec<(u64, usize, usize)> = feasible
            .iter()
            .map(|&n| n as usize)
            .filter(|&n| !self.nodes[n].movable.is_empty())
            .map(|n| (self.nodes[n].work, n, self.nodes[n].movable.len()))
            .collect();
        cands.sort_unstable();
        let mut seen: std::collections::HashSet<usize> = std::collections::HashSet::new();
        let mut stuck: BTreeMap<Stuck, u32> = BTreeMap::new();
        for &n in feasible {
            for &v in &self.on[n as usize] {
                if let Some(Some(Err(s))) = self.jobs.get(v)
                    && seen.insert(v)
                {
                    *stuck.entry(*s).or_default() += 1;
                }
            }
        }
        KeyCensus { cands, stuck }
    }
}

#[derive(Default)]
struct NodeCensus {
    movable: Vec<usize>,
    work: u64,
}

/// What is left of a cycle's consolidation.
struct Budget {
    /// Jobs that may still move.
    moves: u32,
    /// Candidate node sets that may still be tried.
    attempts: u32,
}

/// A plan for one gang: the jobs moved and where everything goes.
struct MovePlan {
    /// The jobs that leave their nodes for the search (those placed back
    /// where they were included), with their pods.
    chosen: Vec<(usize, PlacedList)>,
    /// The jobs that move: their pods, and where the replacements go.
    moved: Vec<(usize, PlacedList, Vec<Placed>)>,
    gang: Vec<Placed>,
    /// (work lost, pods moved).
    cost: (u64, usize),
}

impl Cycle<'_> {
    /// The pass: see the module docs.
    pub(super) fn run_consolidation(&mut self) {
        let cfg = self.world.config.consolidation;
        if !cfg.enabled || cfg.max_moved_jobs == 0 || cfg.max_gangs == 0 {
            return;
        }
        let waiting = self.pending_where(|r| r.is_lack_of_room());
        if waiting.is_empty() {
            return;
        }
        let mut census = self.census();
        // Nothing may move anywhere, and nothing runs that a user could
        // make movable (only this cycle's binds): no gang can be helped,
        // and there is nothing to tell.
        if census.nodes.iter().all(|c| c.movable.is_empty())
            && census
                .jobs
                .iter()
                .flatten()
                .all(|e| matches!(e, Err(Stuck::BoundThisCycle)))
        {
            return;
        }
        let mut walk = self.ledger.build_walk(
            &self.world,
            |jw| waiting.contains(&jw.index),
            super::minimum_ask,
        );
        let mut budget = Budget {
            moves: cfg.max_moved_jobs,
            attempts: cfg.max_attempts.max(1),
        };
        let mut gangs_left = cfg.max_gangs;
        // Gangs of one shape (constraint set, pod request, pods) that found
        // no plan speak for the others of that shape.
        let mut failed: HashMap<(u32, Resources, usize), String> = HashMap::new();
        // Free capacity per constraint set, summed once (until a plan
        // changes it): most gangs share a few sets.
        let mut free_by_key: HashMap<u32, Resources> = HashMap::new();
        while let Some(leaf) = self.ledger.pick_leaf(&self.world, &mut walk) {
            let Some(j) = self.world.pop_job(leaf, &mut walk) else {
                break;
            };
            if budget.moves == 0 || budget.attempts == 0 || gangs_left == 0 {
                break;
            }
            // A nominated gang waits for its own victims.
            if self.world.nominated[j] {
                continue;
            }
            let Some(min) = self.minimum_of(j) else {
                continue;
            };
            let Some(free) = self.fits_in_total(j, &min, &mut free_by_key) else {
                continue;
            };
            let shape = {
                let head = &self.ledger.jobs[j].job.tasks[min.0[0]];
                let key = self.world.constraint_id(&head.constraints);
                (key, head.requests.clone(), min.0.len())
            };
            let found = if let Some(why) = failed.get(&shape) {
                Err(why.clone())
            } else {
                let lifted = self.ledger.state.begin();
                let holding = self.ledger.has_hold(j);
                self.ledger.release_holds(&self.world, j);
                self.ledger.holds_lifted = holding;
                let found = self.plan_moves(j, &min, &mut census, &mut budget);
                self.ledger.holds_lifted = false;
                if found.is_err() {
                    self.ledger.state.rollback(lifted);
                }
                found.map(|p| (p, lifted))
            };
            match found {
                Ok((plan, lifted)) => {
                    let moves = plan.moved.len() as u32;
                    if !self.apply_moves(j, &min, plan) {
                        // The search proved it; a different result means
                        // the state changed under it: move nothing.
                        self.ledger.state.rollback(lifted);
                        continue;
                    }
                    budget.moves = budget.moves.saturating_sub(moves);
                    gangs_left -= 1;
                    free_by_key.clear();
                    failed.clear();
                    census = self.census();
                    self.ledger.holds.retain(|h| h.job != j);
                    walk.changed();
                    self.memo.room_seen.clear();
                    self.memo.copies_seen.clear();
                }
                Err(why) => {
                    failed.insert(shape, why.clone());
                    let gpus = |m: u64| trainyard_model::ResourceName::Gpu.format_amount(m);
                    let note = if min.1.gpu > 0 {
                        format!(
                            "{} GPUs free but scattered; consolidation refused: {why}",
                            gpus(free.gpu)
                        )
                    } else {
                        format!("the room is free but scattered; consolidation refused: {why}")
                    };
                    self.outcome.consolidation_notes.insert(j, note);
                }
            }
        }
    }

    /// The free capacity of the nodes gang `j` may use, when its minimum
    /// fits it in total (`None`: it does not, and no move would help).
    fn fits_in_total(
        &mut self,
        j: usize,
        min: &Minimum,
        cache: &mut HashMap<u32, Resources>,
    ) -> Option<Resources> {
        let job = self.ledger.jobs[j].job;
        let head = &job.tasks[*min.0.first()?];
        let key = self.memo.static_filter(&self.world, &head.constraints);
        if let std::collections::hash_map::Entry::Vacant(slot) = cache.entry(key) {
            let feasible = &self.memo.filters.get(&key)?.feasible;
            let mut free = Resources::zero();
            for &n in feasible {
                free.add(&self.ledger.state.nodes()[n as usize].free);
            }
            slot.insert(free);
        }
        let free = cache.get(&key)?;
        min.1.fits_in(free).then(|| free.clone())
    }

    /// Every job with bound pods: whether it may move (and what moving it
    /// costs) or why not; and the jobs on each node. Made once per pass,
    /// again after a plan applies.
    fn census(&self) -> Census {
        let w = &self.world;
        let period_ms = (w.config.consolidation.no_move_seconds as i64).saturating_mul(1000);
        let mut jobs: Vec<Option<Result<Movable, Stuck>>> = Vec::new();
        jobs.resize_with(self.ledger.bound_at.len(), || None);
        let mut on: Vec<Vec<usize>> = vec![Vec::new(); w.nodes.len()];
        for (v, placed) in self.ledger.bound_at.iter().enumerate() {
            if placed.is_empty() {
                continue;
            }
            for (_, n, _) in placed {
                if on[*n].last() != Some(&v) {
                    on[*n].push(v);
                }
            }
            let vw = &self.ledger.jobs[v];
            let vj = vw.job;
            let why = if self.ledger.moved.contains(&v) {
                Some(Stuck::MovedRecently)
            } else if placed
                .iter()
                .any(|(t, _, _)| self.ledger.fresh.contains(&(v, *t)))
            {
                Some(Stuck::BoundThisCycle)
            } else if !vj.preemptible {
                Some(Stuck::NotPreemptible)
            } else if vj.tasks.iter().any(|t| t.terminating) {
                Some(Stuck::Terminating)
            } else if placed
                .iter()
                .any(|(t, _, _)| vj.tasks[*t].controller.is_none())
            {
                Some(Stuck::BarePods)
            } else if vj
                .moved_at
                .is_some_and(|m| w.now.0.saturating_sub(m.0) < period_ms)
            {
                Some(Stuck::MovedRecently)
            } else {
                let started = self.ledger.job_started(v);
                match w.min_runtime(vw.leaf) {
                    Some(min)
                        if started != i64::MIN
                            && w.now.0.saturating_sub(started)
                                < (min as i64).saturating_mul(1000) =>
                    {
                        Some(Stuck::MinRuntime)
                    }
                    _ => None,
                }
            };
            let entry = match why {
                Some(s) => Err(s),
                None => Ok(Movable {
                    job: v,
                    pods: placed.clone(),
                    work: placed
                        .iter()
                        .filter_map(|(t, _, _)| vj.tasks[*t].started)
                        .map(|s| (w.now.0.saturating_sub(s.0).max(0) / 1000) as u64)
                        .sum(),
                }),
            };
            jobs[v] = Some(entry);
        }
        let nodes = on
            .iter()
            .map(|vs| {
                let mut c = NodeCensus::default();
                for v in vs {
                    if let Some(Ok(m)) = &jobs[*v] {
                        c.movable.push(*v);
                        c.work += m.work;
                    }
                }
                c
            })
            .collect();
        Census {
            jobs,
            on,
            nodes,
            by_key: Default::default(),
        }
    }

    /// The cheapest plan of moves for gang `j`, or why there is none.
    fn plan_moves(
        &mut self,
        j: usize,
        min: &Minimum,
        census: &mut Census,
        budget: &mut Budget,
    ) -> Result<MovePlan, String> {
        let job = self.ledger.jobs[j].job;
        let head = &job.tasks[min.0[0]];
        let key = self.memo.static_filter(&self.world, &head.constraints);
        if !census.by_key.contains_key(&key) {
            let Some(filter) = self.memo.filters.get(&key) else {
                return Err("no node may hold its pods".into());
            };
            let k = census.of_nodes(&filter.feasible);
            census.by_key.insert(key, k);
        }
        let census = &*census;
        let Some(mine) = census.by_key.get(&key) else {
            return Err("no node may hold its pods".into());
        };
        // The feasible nodes with something movable, within the budget;
        // only the cheapest few can matter (a plan moves few jobs).
        let limit = budget.moves as usize;
        let mut cands: Vec<(u64, usize)> = mine
            .cands
            .iter()
            .filter(|(_, _, count)| *count <= limit)
            .map(|(w, n, _)| (*w, *n))
            .collect();
        if cands.is_empty() {
            return Err(if mine.cands.is_empty() {
                refusal(&mine.stuck)
            } else {
                format!(
                    "it would move more than the {} job(s) left this cycle (consolidation.maxMovedJobs)",
                    budget.moves
                )
            });
        }
        let keep = (4 * limit + 8).min(cands.len());
        if keep < cands.len() {
            cands.select_nth_unstable(keep - 1);
            cands.truncate(keep);
        }
        cands.sort_unstable();
        let mut movable: BTreeMap<usize, &Movable> = BTreeMap::new();
        let mut per_node: BTreeMap<usize, (u64, BTreeSet<usize>)> = BTreeMap::new();
        for &(work, n) in &cands {
            let ids: BTreeSet<usize> = census.nodes[n].movable.iter().copied().collect();
            for v in &ids {
                if let Some(Some(Ok(m))) = census.jobs.get(*v) {
                    movable.insert(*v, m);
                }
            }
            per_node.insert(n, (work, ids));
        }
        let feasible: BTreeSet<usize> = cands.iter().map(|(_, n)| *n).collect();
        let mut order: Vec<(u64, usize)> = per_node.iter().map(|(n, (w, _))| (*w, *n)).collect();
        order.sort_unstable();

        // Candidate sets: each node alone (only for a gang that one node
        // could hold), then growing prefixes of the order, as far as the
        // jobs they move stay within the cycle's budget.
        let one_node = self
            .world
            .nodes
            .iter()
            .enumerate()
            .filter(|(n, _)| feasible.contains(n))
            .any(|(_, node)| min.1.fits_in(&node.allocatable));
        let mut sets: Vec<BTreeSet<usize>> = Vec::new();
        if one_node {
            for (_, n) in &order {
                if per_node[n].1.len() <= budget.moves as usize {
                    sets.push(per_node[n].1.clone());
                }
            }
        }
        let mut union: BTreeSet<usize> = BTreeSet::new();
        for (k, (_, n)) in order.iter().enumerate() {
            union.extend(per_node[n].1.iter().copied());
            if union.len() > budget.moves as usize {
                break;
            }
            if k > 0 || !one_node {
                sets.push(union.clone());
            }
        }
        let mut best: Option<MovePlan> = None;
        let mut last_err = if sets.is_empty() {
            format!(
                "it would move more than the {} job(s) left this cycle (consolidation.maxMovedJobs)",
                budget.moves
            )
        } else {
            String::from("no set of moves made room for it")
        };
        for jobs in sets {
            if budget.attempts == 0 {
                if best.is_none() {
                    last_err = "this cycle's search is spent (consolidation.maxAttempts); the next cycle tries again".into();
                }
                break;
            }
            budget.attempts -= 1;
            let chosen: Vec<&Movable> = jobs.iter().map(|v| movable[v]).collect();
            match self.try_moves(j, min, &chosen) {
                Ok(plan) => {
                    if best.as_ref().is_none_or(|b| plan.cost < b.cost) {
                        best = Some(plan);
                    }
                }
                Err(e) => last_err = e,
            }
        }
        best.ok_or(last_err)
    }

    /// One candidate plan: `moved` leave, the gang is placed, each moved job
    /// is placed whole away from the nodes they left. The state is left as
    /// it was.
    fn try_moves(
        &mut self,
        j: usize,
        min: &Minimum,
        moved: &[&Movable],
    ) -> Result<MovePlan, String> {
        let mark = self.ledger.state.begin();
        let units: Vec<Unit> = moved.iter().map(|m| self.unit_of(m)).collect();
        let refs: Vec<&Unit> = units.iter().collect();
        self.ledger.give_units(&self.world, &refs);
        let result = self.place_all(j, min, moved);
        self.ledger.state.rollback(mark);
        result
    }

    /// Places the gang, then each moved job (largest first); see
    /// [`Cycle::try_moves`].
    fn place_all(
        &mut self,
        j: usize,
        min: &Minimum,
        moved: &[&Movable],
    ) -> Result<MovePlan, String> {
        let (chosen, needs, topo) = min;
        let gang = self
            .place_chosen_or(j, chosen, needs, *topo, false)
            .map_err(|r| format!("even with the movable jobs gone it does not fit: {r}"))?;
        let left: BTreeSet<usize> = moved
            .iter()
            .flat_map(|m| m.pods.iter().map(|(_, n, _)| *n))
            .collect();
        let mut order: Vec<&&Movable> = moved.iter().collect();
        order.sort_by_key(|m| {
            let req: u64 = m
                .pods
                .iter()
                .map(|(t, _, _)| self.ledger.jobs[m.job].job.tasks[*t].requests.gpu)
                .sum();
            (std::cmp::Reverse(req), m.job)
        });
        let mut plan = MovePlan {
            chosen: moved.iter().map(|m| (m.job, m.pods.clone())).collect(),
            moved: Vec::new(),
            gang,
            cost: (0, 0),
        };
        // The free devices of the nodes being emptied are fenced off while
        // the moved jobs are placed: their room there is not free until
        // the moved pods are gone, and a replacement must not wait for
        // another move (nor for its own job's old pods). The fence goes
        // before returning, so a committed plan keeps none of it.
        let fence: Vec<(usize, Vec<usize>)> = left
            .iter()
            .map(|&n| {
                let node = &self.world.nodes[n];
                let slots: Vec<usize> = (0..node.gpus.len()).collect();
                (n, self.ledger.state.withhold(n, node, &slots))
            })
            .collect();
        let placed = self.place_movers(&order, &left, &mut plan);
        for (n, slots) in fence {
            if !slots.is_empty() {
                self.ledger.state.release(n, self.world.nodes[n], &slots);
            }
        }
        placed.map(|()| plan)
    }

    /// Places each moved job whole (see [`Cycle::place_all`]), adding the
    /// moves to `plan`.
    fn place_movers(
        &mut self,
        order: &[&&Movable],
        left: &BTreeSet<usize>,
        plan: &mut MovePlan,
    ) -> Result<(), String> {
        for m in order.iter().copied() {
            let vj = self.ledger.jobs[m.job].job;
            let tasks: Vec<usize> = m.pods.iter().map(|(t, _, _)| *t).collect();
            let mut needs = Resources::zero();
            for &t in &tasks {
                needs.add(&vj.tasks[t].requests);
            }
            let constrained =
                !vj.topology.is_empty() || vj.subgroups.iter().any(|sg| !sg.topology.is_empty());
            let topo = self.world.topology_aware() && (tasks.len() > 1 || constrained);
            let to = self
                .place_chosen_or(m.job, &tasks, &needs, topo, false)
                .map_err(|_| {
                    format!(
                        "{} could not be placed whole elsewhere (a moved job must be, so that no queue loses allocation)",
                        vj.id
                    )
                })?;
            let back = to.iter().all(|p| m.pods.iter().any(|q| q == p));
            if back {
                // Where it was: not a move.
                continue;
            }
            if to.iter().any(|(_, n, _)| left.contains(n)) {
                return Err(format!(
                    "{} would have to wait for another move (its only room is on a node being emptied)",
                    vj.id
                ));
            }
            plan.cost.0 += m.work;
            plan.cost.1 += m.pods.len();
            plan.moved.push((m.job, m.pods.clone(), to));
        }
        if plan.moved.is_empty() {
            return Err("no job needed to move".into());
        }
        Ok(())
    }

    /// Job `m`'s pods as an eviction unit.
    fn unit_of(&self, m: &Movable) -> Unit {
        let vj = self.ledger.jobs[m.job].job;
        let mut freed = Resources::zero();
        for (t, _, _) in &m.pods {
            freed.add(&vj.tasks[*t].requests);
        }
        Unit {
            job: m.job,
            tasks: m.pods.clone(),
            kind: EvictionKind::Consolidate,
            elastic: false,
            priority: vj.priority,
            started: self.ledger.job_started(m.job),
            freed,
            over: None,
            fresh: false,
        }
    }

    /// Commits a plan (see the module docs): it is made again on the live
    /// state, as the search made it, so that every placement's side
    /// effects (devices, claims) are the search's. `false`, and nothing
    /// changed, if it came out otherwise.
    fn apply_moves(&mut self, j: usize, min: &Minimum, plan: MovePlan) -> bool {
        let me = self.ledger.jobs[j].job;
        let my_leaf = self.ledger.jobs[j].leaf;
        let movables: Vec<Movable> = plan
            .chosen
            .iter()
            .map(|(v, pods)| Movable {
                job: *v,
                pods: pods.clone(),
                work: 0,
            })
            .collect();
        let mark = self.ledger.state.begin();
        let units: Vec<Unit> = movables.iter().map(|m| self.unit_of(m)).collect();
        let refs: Vec<&Unit> = units.iter().collect();
        self.ledger.give_units(&self.world, &refs);
        let chosen: Vec<&Movable> = movables.iter().collect();
        match self.place_all(j, min, &chosen) {
            Ok(again) if again.gang == plan.gang && again.moved == plan.moved => {}
            _ => {
                self.ledger.state.rollback(mark);
                return false;
            }
        }
        let name = |n: usize| self.world.nodes[n].name.clone();
        let gang_nodes: BTreeSet<usize> = plan.gang.iter().map(|(_, n, _)| *n).collect();
        let mut notes = Vec::new();
        for (v, from, to) in &plan.moved {
            let vj = self.ledger.jobs[*v].job;
            let gpus: u64 = from.iter().map(|(t, _, _)| vj.tasks[*t].requests.gpu).sum();
            let olds: BTreeSet<String> = from.iter().map(|(_, n, _)| name(*n)).collect();
            let news: BTreeSet<String> = to.iter().map(|(_, n, _)| name(*n)).collect();
            let what = if gpus > 0 {
                format!(
                    "{} ({} GPUs)",
                    vj.id,
                    trainyard_model::ResourceName::Gpu.format_amount(gpus)
                )
            } else {
                format!("{} ({} pod(s))", vj.id, from.len())
            };
            let note = format!(
                "{what} from {} to {}",
                olds.into_iter().collect::<Vec<_>>().join(", "),
                news.into_iter().collect::<Vec<_>>().join(", ")
            );
            let message = format!("moved to make room for {} (consolidation): {note}", me.id);
            let mut pods = Vec::with_capacity(from.len());
            for ((t, n, slots), (t2, n2, slots2)) in from.iter().zip(to) {
                debug_assert_eq!(t, t2, "a moved pod keeps its task");
                self.ledger.releasing.push((*v, *t, *n, slots.clone()));
                self.outcome.evictions.push(crate::decisions::Eviction {
                    job: JobId(vj.id.clone()),
                    task: vj.tasks[*t].key.clone(),
                    node: NodeName(name(*n)),
                    kind: EvictionKind::Consolidate,
                    preemptor: JobId(me.id.clone()),
                    message: message.clone(),
                });
                let node = self.world.nodes[*n2];
                pods.push(MovedPod {
                    task: vj.tasks[*t].key.clone(),
                    from: NodeName(name(*n)),
                    to: NodeName(node.name.clone()),
                    gpus: slots2.iter().map(|&s| node.gpus[s].index).collect(),
                });
            }
            self.outcome.stats.evictions += from.len() as u32;
            // The job stays in its queues (its replacements are held their
            // room); for the rest of the cycle it sits where it goes, and
            // nothing moves or evicts it again.
            self.ledger.bound_at[*v] = to.iter().cloned().collect();
            self.ledger.moved.insert(*v);
            self.outcome.moves.push(Move {
                job: JobId(vj.id.clone()),
                for_job: JobId(me.id.clone()),
                pods,
                message,
            });
            notes.push(note);
        }
        // The gang's room is held for it and counted for its queue.
        self.ledger
            .charge(&self.world, my_leaf, &min.1, !me.preemptible);
        for (t, n, slots) in &plan.gang {
            let node = self.world.nodes[*n];
            self.outcome.nominations.push(NominationDecision {
                job: JobId(me.id.clone()),
                task: me.tasks[*t].key.clone(),
                node: NodeName(node.name.clone()),
                gpus: slots.iter().map(|&s| node.gpus[s].index).collect(),
            });
        }
        let freed: BTreeSet<usize> = plan
            .moved
            .iter()
            .flat_map(|(_, from, _)| from.iter().map(|(_, n, _)| *n))
            .filter(|n| gang_nodes.contains(n))
            .collect();
        self.outcome.pending.insert(
            j,
            PendingReason::Consolidating {
                moves: notes,
                frees: freed.into_iter().map(name).collect(),
            },
        );
        true
    }
}

/// Why no job on the candidate nodes may move, most common first.
fn refusal(stuck: &BTreeMap<Stuck, u32>) -> String {
    if stuck.is_empty() {
        return "no running job on the nodes it could use may move".into();
    }
    let mut by: Vec<(&Stuck, &u32)> = stuck.iter().collect();
    by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = by
        .iter()
        .map(|(s, n)| format!("{n} job(s) {}", s.says()))
        .collect();
    format!(
        "the jobs on the nodes it could use are not movable: {}",
        parts.join(", ")
    )
}
