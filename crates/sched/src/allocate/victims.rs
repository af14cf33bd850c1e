//! The victim search of reclaim and preemption: which running units a
//! pending gang may take (the rules of `docs/preemption.md`), and the
//! cheapest set of them that really makes it fit, proven by placing the
//! gang inside the cycle's transaction and rolled back unless used.
//!
//! - **Units**: elastic pods above `minMember` (most recently started
//!   first) are units of one pod; the rest of a gang is one unit; units
//!   bound by this cycle are free (taking the rest of such a job back
//!   takes back all its binds: `Cycle::with_orphans`).
//! - **Search**, per scope (each leaf domain, then the cluster): node by
//!   node the cheapest units that let a pod fit, else the shortest working
//!   prefix of the cost order; then minimised; then the victims' quota
//!   floors and the preemptor's limits (as they would be after the victims
//!   leave) are checked.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::resources::MILLI_PER_GPU;
use trainyard_model::{QueueId, QueueTree, Resources};

use super::PlacedList as UnitTasks;
use super::evict::{Minimum, Plan, Unit};
use super::place::Search;
use super::{Cycle, Ledger, World};
use crate::decisions::EvictionKind;
use crate::state::{NodeState, PodView};

/// Leaf-domain scopes tried per preemptor, besides the whole cluster.
const DOMAIN_SCOPES: usize = 8;

/// Placement tries spent minimising one victim set.
const MINIMISE_TRIES: usize = 64;

/// Room on one node for pods of the gang: (cost: max priority of the pods
/// evicted, pods evicted, lost work, max priority of the binds of this
/// cycle taken back, `i64::MIN` for none: below any priority, even
/// `i32::MIN`), copies of the pod it adds, node, units it adds (indices
/// into the pool).
type NodeOption = ((i32, usize, u64, i64), u32, usize, Vec<usize>);

impl<'s> Cycle<'s> {
    /// A working victim set from `pool` (cheapest first), minimised: every
    /// unit the gang does not need is dropped, most expensive first (at most
    /// [`MINIMISE_TRIES`] tries, so huge sets are minimised from the top).
    ///
    /// Candidates come node by node first: for each node, the cheapest units
    /// on it that let one pod of the gang fit there; the cheapest nodes are
    /// taken until they hold the gang. If that set does not work (mixed
    /// shapes, topology), the shortest working prefix of `pool` is found by
    /// binary search.
    pub(super) fn greedy_minimal<'u>(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
        topo_search: bool,
        pool: &[&'u Unit],
        total_free: &Resources,
    ) -> Option<Vec<&'u Unit>> {
        let on_node = ByNode::of(pool, self.world.nodes.len());
        // Not even all of it together would hold the gang: nothing to try.
        let mut all_free = total_free.clone();
        all_free.add(&on_node.freed);
        if !needs.fits_in(&all_free) {
            return None;
        }
        if !topo_search && !self.search().could_cover(j, chosen, pool, &on_node) {
            return None;
        }
        let by_node = self.search().node_centric(j, chosen, pool, &on_node);
        let mut taken: Vec<&Unit> =
            if !by_node.is_empty() && self.fits_without(j, chosen, needs, topo_search, &by_node) {
                by_node
            } else {
                if !self.fits_without(j, chosen, needs, topo_search, pool) {
                    return None;
                }
                // Shortest prefix that works (fitting only grows with it).
                let (mut lo, mut hi) = (1usize, pool.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if self.fits_without(j, chosen, needs, topo_search, &pool[..mid]) {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                pool[..hi].to_vec()
            };
        let mut i = taken.len();
        let mut tries = 0;
        while i > 0 && tries < MINIMISE_TRIES {
            i -= 1;
            tries += 1;
            let mut without = taken.clone();
            without.remove(i);
            if self.fits_without(j, chosen, needs, topo_search, &without) {
                taken = without;
            }
        }
        Some(taken)
    }

    /// Whether the gang fits with exactly `units` gone (state restored after).
    pub(super) fn fits_without(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
        topo_search: bool,
        units: &[&Unit],
    ) -> bool {
        if !self.ledger.limits_freed(&self.world, units) {
            return false;
        }
        let mark = self.ledger.state.begin();
        self.ledger.give_units(&self.world, units);
        let ok = self
            .place_chosen_or(j, chosen, needs, topo_search, false)
            .is_ok();
        self.ledger.state.rollback(mark);
        ok
    }

    /// The cheapest victim set that makes gang `j` fit, if any.
    /// Reclaim first (the queue gets back what it lent), and only if no
    /// reclaim works, preemption inside the queue.
    pub(super) fn find_victims(&mut self, j: usize, min: &Minimum) -> Result<Plan, String> {
        // Jobs of lower priority in the preemptor's own leaf that this
        // cycle bound (backfill behind it): had the preemptor been placed
        // first, they would not hold its queue's share or room. The search
        // runs first with them set aside (their binds taken back); if that
        // finds a plan, they are part of it.
        let leaf = self.ledger.jobs[j].leaf;
        let me = self.ledger.jobs[j].job;
        let behind: Vec<usize> = self
            .ledger
            .running
            .iter()
            .copied()
            .filter(|&v| {
                v != j
                    && self.ledger.jobs[v].leaf == leaf
                    && self.ledger.jobs[v].job.preemptible
                    && self.ledger.jobs[v].job.priority < me.priority
                    && !self.ledger.bound_at[v].is_empty()
                    && self.ledger.bound_at[v]
                        .iter()
                        .all(|(t, _, _)| self.ledger.fresh.contains(&(v, *t)))
            })
            .collect();
        if behind.is_empty() {
            return self.search_victims(j, min);
        }
        let units: Vec<Unit> = behind
            .iter()
            .map(|&v| self.ledger.fresh_unit(&self.world, v, j))
            .collect();
        let mark = self.ledger.state.begin();
        let refs: Vec<&Unit> = units.iter().collect();
        self.ledger.give_units(&self.world, &refs);
        for u in &units {
            self.ledger.uncharge(&self.world, leaf, &u.freed);
        }
        self.ledger.set_aside = behind.iter().copied().collect();
        let found = self.search_victims(j, min);
        self.ledger.set_aside.clear();
        for u in &units {
            self.ledger.charge(&self.world, leaf, &u.freed, false);
        }
        self.ledger.state.rollback(mark);
        match found {
            Ok(mut plan) => {
                plan.units.extend(units);
                Ok(plan)
            }
            Err(_) => self.search_victims(j, min),
        }
    }

    /// The victim search proper (see [`Cycle::find_victims`]).
    pub(super) fn search_victims(&mut self, j: usize, min: &Minimum) -> Result<Plan, String> {
        let (chosen, needs, topo_search) = (&min.0, &min.1, min.2);
        let leaf = self.ledger.jobs[j].leaf;
        if !self.ledger.jobs[j].job.preemptible
            && let Err(e) = self
                .ledger
                .check_quota_for_non_preemptible(&self.world, leaf, needs)
        {
            return Err(e.to_string());
        }
        // Limits are checked as they would be after the victims leave:
        // what the gang would take a queue over its limit by must be freed
        // by victims below that queue.
        self.ledger.victim_need.clear();
        for q in self.world.tree.ancestors(leaf) {
            for (r, cap) in self.world.tree.spec(q).limit.iter() {
                let after = self.ledger.alloc[q.0].get(r) + needs.get(r);
                if after > cap {
                    self.ledger.victim_need.push((q, r.clone(), after - cap));
                }
            }
        }
        // With this cycle's lower-priority binds of its leaf set aside, the
        // gang may fit as it is.
        if !self.ledger.set_aside.is_empty()
            && self.fits_without(j, chosen, needs, topo_search, &[])
        {
            return Ok(Plan {
                units: Vec::new(),
                cost: (i32::MIN, 0, 0, 0, i32::MIN),
            });
        }
        let (all, by_kind) = self.ledger.victim_units(&self.world, j, needs);
        if all.is_empty() {
            // Said only where it is shown (`explain_in_quota`).
            return Err(String::new());
        }
        let mut why = String::new();
        for order in by_kind {
            let units: Vec<&Unit> = order
                .iter()
                .map(|&i| &all[i as usize])
                .filter(|u| u.fresh || !self.ledger.fresh_only)
                .collect();
            if units.is_empty() {
                continue;
            }
            match self.find_among(j, chosen, needs, topo_search, &units) {
                Ok(plan) => return Ok(plan),
                Err(e) => why = e,
            }
        }
        Err(why)
    }

    /// The cheapest working victim set among `units` (cheapest first),
    /// over the scopes.
    pub(super) fn find_among(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
        topo_search: bool,
        units: &[&Unit],
    ) -> Result<Plan, String> {
        let (chosen, needs) = (chosen.to_vec(), needs.clone());
        let mut why = "evicting every job it may take still leaves no room where it fits";
        // Scopes: leaf domains (victims all inside one), then the cluster.
        let mut scopes: Vec<(u8, Option<BTreeSet<usize>>)> = Vec::new();
        if let Some(ti) = &self.world.topo
            && self.world.topology_aware()
            && let Some(lf) = ti.topo.leaf_level()
        {
            let mut by_domain: BTreeMap<u32, (u64, BTreeSet<usize>)> = BTreeMap::new();
            for n in 0..self.world.nodes.len() {
                if let Some(d) = ti.domain_of[lf][n] {
                    let e = by_domain.entry(d).or_default();
                    e.0 += self.ledger.state.nodes()[n].free.gpu;
                    e.1.insert(n);
                }
            }
            for u in units {
                let ds: BTreeSet<Option<u32>> = u
                    .tasks
                    .iter()
                    .map(|(_, n, _)| ti.domain_of[lf][*n])
                    .collect();
                if ds.len() == 1
                    && let Some(Some(d)) = ds.into_iter().next()
                    && let Some(e) = by_domain.get_mut(&d)
                {
                    e.0 += u.freed.gpu;
                }
            }
            let mut doms: Vec<(u64, u32, BTreeSet<usize>)> = by_domain
                .into_iter()
                .filter(|(_, (room, _))| *room >= needs.gpu)
                .map(|(d, (room, nodes))| (room, d, nodes))
                .collect();
            doms.sort_by_key(|(room, d, _)| (*room, *d));
            for (_, _, nodes) in doms.into_iter().take(DOMAIN_SCOPES) {
                scopes.push((0, Some(nodes)));
            }
        }
        scopes.push((1, None));

        let total_free: Resources = {
            let mut r = Resources::zero();
            for st in self.ledger.state.nodes() {
                r.add(&st.free);
            }
            r
        };
        let mut best: Option<Plan> = None;
        for (rank, scope) in scopes {
            let pool: Vec<&Unit> = units
                .iter()
                .copied()
                .filter(|u| match &scope {
                    None => true,
                    Some(nodes) => u.tasks.iter().all(|(_, n, _)| nodes.contains(n)),
                })
                .collect();
            // Greedy, cheapest units until the gang fits; then minimise;
            // then check the victims' quota floors. A set that breaks a
            // floor loses its most expensive offending unit from the pool
            // and the search runs again (a few times at most).
            let mut pool = pool;
            let mut found: Option<Vec<&Unit>> = None;
            for _ in 0..8 {
                let Some(taken) =
                    self.greedy_minimal(j, &chosen, &needs, topo_search, &pool, &total_free)
                else {
                    break;
                };
                match self.ledger.first_floor_breaker(&self.world, &taken) {
                    None => {
                        found = Some(taken);
                        break;
                    }
                    Some(bad) => {
                        why = "the victims it would need would take their queue below its quota";
                        let bad_ptr: *const Unit = taken[bad];
                        pool.retain(|u| !std::ptr::eq(*u, bad_ptr));
                    }
                }
            }
            let Some(taken) = found else {
                continue;
            };
            let victim_jobs: BTreeSet<usize> =
                taken.iter().filter(|u| !u.fresh).map(|u| u.job).collect();
            if victim_jobs.len() > self.world.config.preemption.max_victim_jobs as usize {
                why = "it would need more victim jobs than preemption.maxVictimJobs";
                continue;
            }
            let lost: u64 = taken.iter().map(|u| self.world.lost_work(u)).sum();
            let cost = (
                taken
                    .iter()
                    .map(|u| u.cost_priority())
                    .max()
                    .unwrap_or(i32::MIN),
                rank,
                taken.iter().map(|u| u.evicted_pods()).sum(),
                lost,
                taken
                    .iter()
                    .filter(|u| u.fresh)
                    .map(|u| u.priority)
                    .max()
                    .unwrap_or(i32::MIN),
            );
            if best.as_ref().is_none_or(|b| cost < b.cost) {
                best = Some(Plan {
                    units: taken.into_iter().cloned().collect(),
                    cost,
                });
            }
        }
        best.ok_or_else(|| why.to_string())
    }
}

/// For each node, the positions in `pool` of the units with a pod there,
/// in pool order (cost order), and which of their pods sit there: arrays
/// grouped by node (so giving a unit back on one node costs its pods
/// there, not all its pods).
pub(super) struct ByNode {
    /// `units[start[n]..start[n + 1]]` are node `n`'s.
    start: Vec<u32>,
    units: Vec<u32>,
    /// `pods[pod_start[n]..pod_start[n + 1]]`: (unit position, index into
    /// its `tasks`) of node `n`'s pods, in pool order.
    pod_start: Vec<u32>,
    pods: Vec<(u32, u32)>,
    /// What the whole pool frees (summed in the same pass over it).
    pub(super) freed: Resources,
}

impl ByNode {
    pub(super) fn of(pool: &[&Unit], nodes: usize) -> ByNode {
        // Counting sort by node: count, prefix sums, fill in pool order.
        let mut start = vec![0u32; nodes + 1];
        let mut pod_start = vec![0u32; nodes + 1];
        let mut last = vec![u32::MAX; nodes];
        let mut freed = Resources::zero();
        for (i, u) in pool.iter().enumerate() {
            freed.add(&u.freed);
            for (_, n, _) in &u.tasks {
                pod_start[*n + 1] += 1;
                if last[*n] != i as u32 {
                    last[*n] = i as u32;
                    start[*n + 1] += 1;
                }
            }
        }
        for n in 0..nodes {
            start[n + 1] += start[n];
            pod_start[n + 1] += pod_start[n];
        }
        let mut fill: Vec<u32> = start[..nodes].to_vec();
        let mut pod_fill: Vec<u32> = pod_start[..nodes].to_vec();
        let mut units = vec![0u32; start[nodes] as usize];
        let mut pods = vec![(0u32, 0u32); pod_start[nodes] as usize];
        last.fill(u32::MAX);
        for (i, u) in pool.iter().enumerate() {
            for (k, (_, n, _)) in u.tasks.iter().enumerate() {
                pods[pod_fill[*n] as usize] = (i as u32, k as u32);
                pod_fill[*n] += 1;
                if last[*n] != i as u32 {
                    last[*n] = i as u32;
                    units[fill[*n] as usize] = i as u32;
                    fill[*n] += 1;
                }
            }
        }
        ByNode {
            start,
            units,
            pod_start,
            pods,
            freed,
        }
    }

    /// The positions of the units with a pod on node `n`.
    pub(super) fn on(&self, n: usize) -> &[u32] {
        match (self.start.get(n), self.start.get(n + 1)) {
            (Some(&a), Some(&b)) => &self.units[a as usize..b as usize],
            _ => &[],
        }
    }

    /// (unit position, index into its `tasks`) of the pods on node `n`,
    /// grouped by unit in the order of [`ByNode::on`].
    pub(super) fn pods_on(&self, n: usize) -> &[(u32, u32)] {
        match (self.pod_start.get(n), self.pod_start.get(n + 1)) {
            (Some(&a), Some(&b)) => &self.pods[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Gives back into `st`, a copy of node `n`'s state, the pods of unit
    /// `pool[i]` on that node.
    fn give(
        &self,
        (l, w): (&Ledger<'_>, &World<'_>),
        st: &mut NodeState,
        n: usize,
        pool: &[&Unit],
        i: usize,
    ) {
        let (Some(&a), Some(&b)) = (self.pod_start.get(n), self.pod_start.get(n + 1)) else {
            return;
        };
        let u = pool[i];
        let vj = l.jobs[u.job].job;
        for &(ui, k) in &self.pods[a as usize..b as usize] {
            if ui as usize == i {
                let (t, _, slots) = &u.tasks[k as usize];
                st.give(w.nodes[n], &w.pod_of(vj, u.job, *t), slots);
            }
        }
    }
}

impl<'s> Ledger<'s> {
    /// When task `t` of job `v` started (ms): now for a pod bound by this
    /// cycle (so it sorts as the most recent), `i64::MIN` when unknown.
    pub(super) fn task_started(&self, w: &World<'_>, v: usize, t: usize) -> i64 {
        if self.fresh.contains(&(v, t)) {
            return w.now.0;
        }
        self.jobs[v].job.tasks[t].started.map_or(i64::MIN, |s| s.0)
    }

    /// Job `v`'s binds of this cycle as one unit, taken back for `j`.
    pub(super) fn fresh_unit(&self, w: &World<'_>, v: usize, j: usize) -> Unit {
        let vj = self.jobs[v].job;
        let tasks: UnitTasks = self.bound_at[v].clone();
        let mut freed = Resources::zero();
        for (t, _, _) in &tasks {
            freed.add(&vj.tasks[*t].requests);
        }
        debug_assert!(self.jobs[v].leaf == self.jobs[j].leaf);
        Unit {
            job: v,
            tasks,
            kind: EvictionKind::Preempt,
            elastic: false,
            priority: vj.priority,
            started: w.now.0,
            freed,
            over: None,
            fresh: true,
        }
    }

    /// Gives back every task of `units` (inside the open transaction).
    pub(super) fn give_units(&mut self, w: &World<'_>, units: &[&Unit]) {
        for u in units {
            let job = self.jobs[u.job].job;
            for (t, n, slots) in &u.tasks {
                let pod = w.pod_of(job, u.job, *t);
                self.state.give(*n, w.nodes[*n], &pod, slots);
            }
        }
    }

    /// Latest start of a job's running pods (ms), `i64::MIN` when unknown
    /// (pods bound by this cycle have not started).
    pub(super) fn job_started(&self, v: usize) -> i64 {
        let job = self.jobs[v].job;
        self.bound_at[v]
            .iter()
            .filter(|(t, _, _)| !self.fresh.contains(&(v, *t)))
            .filter_map(|(t, _, _)| job.tasks[*t].started.map(|s| s.0))
            .max()
            .unwrap_or(i64::MIN)
    }
}

impl<'s> Ledger<'s> {
    /// Victim units for preemptor `j`, and the positions of the reclaim
    /// units, then of the preemption units, cheapest first (units are not
    /// moved into that order: they are many, and large).
    pub(super) fn victim_units(
        &self,
        w: &World<'_>,
        j: usize,
        needs: &Resources,
    ) -> (Vec<Unit>, [Vec<u32>; 2]) {
        let cfg = w.config.preemption;
        let jw = &self.jobs[j];
        let me = jw.job;
        let mut units = Vec::with_capacity(self.running.len());
        // Every reclaim needs the preemptor's own leaf to end at or below
        // its fair share: when it would not, only preemption is possible
        // (cheap exit for the many pending jobs of a full queue).
        let leaf_fits_share = needs.iter().all(|(r, want)| {
            want == 0 || self.alloc[jw.leaf.0].get(&r) + want <= w.fair[jw.leaf.0].get(&r)
        });
        let reclaim = cfg.reclaim && leaf_fits_share;
        if !reclaim && !cfg.preempt {
            return (units, [Vec::new(), Vec::new()]);
        }
        // The reclaim rule depends on the two leaves only.
        let mut reclaim_by_leaf: BTreeMap<QueueId, Option<QueueId>> = BTreeMap::new();
        for &v in &self.running {
            let vw = &self.jobs[v];
            let vj = vw.job;
            if v == j
                || vw.leaf == QueueTree::ROOT
                || self.bound_at[v].is_empty()
                || !vj.preemptible
            {
                continue;
            }
            let (kind, over) = if vw.leaf == jw.leaf {
                if !cfg.preempt || vj.priority >= me.priority {
                    continue;
                }
                (EvictionKind::Preempt, None)
            } else {
                if !reclaim {
                    continue;
                }
                let allowed = *reclaim_by_leaf
                    .entry(vw.leaf)
                    .or_insert_with(|| self.reclaim_allowed(w, jw.leaf, vw.leaf, needs));
                match allowed {
                    Some(b) => (EvictionKind::Reclaim, Some(b)),
                    None => continue,
                }
            };
            if self.set_aside.contains(&v) || vj.tasks.iter().any(|t| t.terminating) {
                continue;
            }
            let started = self.job_started(v);
            // Minimum runtime protects pods that run; fresh binds have no
            // start (`job_started` skips them), so they are never protected.
            if let Some(min) = w.min_runtime(vw.leaf)
                && started != i64::MIN
                && w.now.0.saturating_sub(started) < (min as i64).saturating_mul(1000)
            {
                continue;
            }
            // Elastic pods first (most recently started), respecting
            // sub-group minimums; the rest is the gang.
            let mut bound: UnitTasks = self.bound_at[v].clone();
            // Most recently started first, then name (descending).
            bound.sort_by(|(a, _, _), (b, _, _)| {
                self.task_started(w, v, *b)
                    .cmp(&self.task_started(w, v, *a))
                    .then_with(|| vj.tasks[*b].name.cmp(&vj.tasks[*a].name))
            });
            // Pods above the minimum are units of their own, whether they
            // run or were bound by this cycle: taking back part of a job
            // this cycle placed leaves it at its minimum or more (taking it
            // back whole can break the floor of its queue, where part of it
            // would not, and the next cycle would then evict that part).
            let mut left = bound.len() as u32;
            let mut per_sub: BTreeMap<&str, u32> = BTreeMap::new();
            // Without pods above the minimum every pod is the gang's (the
            // common case, and the cheap one).
            let elastic_pods = left > vj.min_member;
            if elastic_pods {
                for (t, _, _) in &bound {
                    *per_sub
                        .entry(vj.tasks[*t].subgroup.as_deref().unwrap_or(""))
                        .or_default() += 1;
                }
            }
            let mut gang = UnitTasks::new();
            if !elastic_pods {
                gang = bound;
            } else {
                for p in bound {
                    let task = &vj.tasks[p.0];
                    let sub = task.subgroup.as_deref().unwrap_or("");
                    let sub_min = vj
                        .subgroups
                        .iter()
                        .find(|s| s.name == sub)
                        .map_or(0, |s| s.min_member);
                    let have = per_sub.get(sub).copied().unwrap_or(0);
                    if left > vj.min_member && have > sub_min {
                        left -= 1;
                        if let Some(h) = per_sub.get_mut(sub) {
                            *h -= 1;
                        }
                        units.push(Unit {
                            job: v,
                            freed: task.requests.clone(),
                            started: self.task_started(w, v, p.0),
                            fresh: self.fresh.contains(&(v, p.0)),
                            tasks: smallvec::smallvec![p],
                            kind,
                            elastic: true,
                            priority: vj.priority,
                            over,
                        });
                    } else {
                        gang.push(p);
                    }
                }
            }
            if !gang.is_empty() {
                let mut freed = Resources::zero();
                let mut started = i64::MIN;
                for (t, _, _) in &gang {
                    freed.add(&vj.tasks[*t].requests);
                    started = started.max(self.task_started(w, v, *t));
                }
                let fresh = gang.iter().all(|(t, _, _)| self.fresh.contains(&(v, *t)));
                units.push(Unit {
                    job: v,
                    fresh,
                    tasks: gang,
                    kind,
                    elastic: false,
                    priority: vj.priority,
                    started,
                    freed,
                    over,
                });
            }
        }
        // Ties by job id, then the first pod's name: jobs are indexed in
        // id order (`setup`), so the index compares as the id does.
        // Sorted as packed integer keys, then the units moved once into
        // that order.
        let mut order: Vec<super::radix::Keyed> = units
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let (high, low) = u.packed_key();
                (high, low, i as u32)
            })
            .collect();
        super::radix::sort_stable(&mut order);
        // Equal packed keys (units of one job): by the first pod's name.
        let name = |k: &super::radix::Keyed| {
            let u = &units[k.2 as usize];
            &self.jobs[u.job].job.tasks[u.tasks[0].0].name
        };
        for run in order.chunk_by_mut(|a, b| (a.0, a.1) == (b.0, b.1)) {
            if run.len() > 1 {
                run.sort_by(|a, b| name(a).cmp(name(b)));
            }
        }
        let mut by_kind = [Vec::new(), Vec::new()];
        for (_, _, i) in order {
            by_kind[usize::from(units[i as usize].kind != EvictionKind::Reclaim)].push(i);
        }
        (units, by_kind)
    }
}

impl Search<'_, '_> {
    /// Copies of a pod that fit on each node as the state is now, for one
    /// constraint set and request; kept until the room changes (a plan is
    /// applied), and not kept while binds are set aside.
    pub(super) fn copies_now(
        &mut self,
        key: u32,
        req: &Resources,
        pod: &PodView,
    ) -> std::rc::Rc<Vec<u32>> {
        let cache = self.l.set_aside.is_empty() && !self.l.holds_lifted;
        if cache && let Some(v) = self.m.copies_seen.get(&(key, req.clone(), pod.ends)) {
            return std::rc::Rc::clone(v);
        }
        let v: std::rc::Rc<Vec<u32>> = std::rc::Rc::new(
            self.w
                .nodes
                .iter()
                .enumerate()
                .map(|(n, node)| self.l.state.nodes()[n].copies(node, pod))
                .collect(),
        );
        if cache {
            self.m
                .copies_seen
                .insert((key, req.clone(), pod.ends), std::rc::Rc::clone(&v));
        }
        v
    }

    /// For a gang of one pod shape: whether the nodes could hold all its
    /// pods with every unit of `pool` gone (an upper bound, no placement).
    /// Gangs of several shapes always could, as far as this says.
    pub(super) fn could_cover(
        &mut self,
        j: usize,
        chosen: &[usize],
        pool: &[&Unit],
        on_node: &ByNode,
    ) -> bool {
        let job = self.l.jobs[j].job;
        if !super::one_shape(job, chosen) {
            return true;
        }
        let head = &job.tasks[chosen[0]];
        let mut pod = PodView::of_task(head);
        pod.ends = self.l.ends_of(j);
        let key = self.m.static_filter(self.w, &head.constraints);
        let Some(mask) = self.m.filters.get(&key).map(|f| f.mask.clone()) else {
            return true;
        };
        let now = self.copies_now(key, &head.requests, &pod);
        let mut total = 0usize;
        for (n, node) in self.w.nodes.iter().enumerate() {
            if !mask[n] {
                continue;
            }
            let here = on_node.on(n);
            total += match here.is_empty() {
                true => now[n] as usize,
                false => {
                    let mut st = self.l.state.nodes()[n].clone();
                    for &i in here {
                        on_node.give((&*self.l, self.w), &mut st, n, pool, i as usize);
                    }
                    st.copies(node, &pod) as usize
                }
            };
            if total >= chosen.len() {
                return true;
            }
        }
        false
    }

    /// Node by node, the cheapest units (of `pool`, cheapest first) whose
    /// departure lets one pod of the gang's main shape fit; the cheapest
    /// nodes until the gang's pods are covered. Empty when no cover exists.
    ///
    /// Nodes that need earlier victims given back (nothing fits there now,
    /// no bind of this cycle to take back) are costly to evaluate, so they
    /// are evaluated in the order of a lower bound on their cost's
    /// priority ([`Search::cost_bound`]), and no longer once the nodes
    /// already evaluated below the next bound cover the gang: every node
    /// left would sort after them, so the choice is the one a full pass
    /// makes.
    pub(super) fn node_centric<'u>(
        &mut self,
        j: usize,
        chosen: &[usize],
        pool: &[&'u Unit],
        on_node: &ByNode,
    ) -> Vec<&'u Unit> {
        let job = self.l.jobs[j].job;
        let head = &job.tasks[chosen[0]];
        let mut pod = PodView::of_task(head);
        pod.ends = self.l.ends_of(j);
        let key = self.m.static_filter(self.w, &head.constraints);
        let Some(mask) = self.m.filters.get(&key).map(|f| f.mask.clone()) else {
            return Vec::new();
        };
        let now = self.copies_now(key, &head.requests, &pod);
        let Some(first) = self.w.nodes.first() else {
            return Vec::new();
        };
        let mut scratch = (NodeState::new(first), NodeState::new(first));
        let mut options: Vec<NodeOption> = Vec::new();
        // (bound, node) of the nodes left for later.
        let mut deferred: Vec<(i32, usize)> = Vec::new();
        for n in 0..self.w.nodes.len() {
            if !mask[n] {
                continue;
            }
            let here = on_node.on(n);
            let fresh_here = here.iter().any(|&i| pool[i as usize].fresh);
            if now[n] == 0 && !here.is_empty() && !fresh_here {
                if let Some(bound) = self.cost_bound(n, &pod, pool, on_node) {
                    deferred.push((bound, n));
                }
                continue;
            }
            options.extend(self.node_options(n, &pod, now[n], pool, on_node, &mut scratch));
        }
        deferred.sort_unstable();
        // Copies of the options so far, by their cost's priority.
        let mut by_priority: BTreeMap<i32, u64> = BTreeMap::new();
        for o in &options {
            *by_priority.entry(o.0.0).or_default() += u64::from(o.1);
        }
        let want = chosen.len() as u64;
        let mut next = 0;
        while let Some(&(bound, _)) = deferred.get(next) {
            let below: u64 = by_priority.range(..bound).map(|(_, c)| *c).sum();
            if below >= want {
                break;
            }
            while let Some(&(b, n)) = deferred.get(next)
                && b == bound
            {
                next += 1;
                for o in self.node_options(n, &pod, 0, pool, on_node, &mut scratch) {
                    *by_priority.entry(o.0.0).or_default() += u64::from(o.1);
                    options.push(o);
                }
            }
        }
        // Debug builds (the test suite) check the bound against the full
        // pass: every node left evaluated, the same choice.
        #[cfg(debug_assertions)]
        {
            let mut all = options.clone();
            for &(_, n) in &deferred[next..] {
                all.extend(self.node_options(n, &pod, 0, pool, on_node, &mut scratch));
            }
            debug_assert_eq!(
                Self::cheapest_cover(all, want),
                Self::cheapest_cover(options.clone(), want),
                "the bounded node-centric search chose differently from the full pass"
            );
        }
        // Pool order is cost order.
        Self::cheapest_cover(options, want)
            .map(|picked| picked.into_iter().map(|i| pool[i]).collect())
            .unwrap_or_default()
    }

    /// The units of the cheapest options that together hold `want` pods,
    /// `None` when all of them do not.
    fn cheapest_cover(mut options: Vec<NodeOption>, want: u64) -> Option<BTreeSet<usize>> {
        options.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut covered = 0u64;
        let mut picked: BTreeSet<usize> = BTreeSet::new();
        for (_, copies, _, used) in options {
            if covered >= want {
                break;
            }
            covered += u64::from(copies);
            picked.extend(used);
        }
        (covered >= want).then_some(picked)
    }

    /// The options node `n` offers (see [`Search::node_centric`]), cheapest
    /// first: binds of this cycle taken back in cost order (lowest priority
    /// first), one option at each cost where that lets more copies fit;
    /// else the cheapest prefix of its other units after which one copy
    /// fits. Each option counts the copies and units it adds to the ones
    /// before it, and costs strictly more than they do, so a cover taking
    /// the options cheapest first always takes a node's options in order.
    /// `now`: copies that fit as the node is; `scratch`: two node states
    /// whose allocations are reused from node to node.
    fn node_options(
        &self,
        n: usize,
        pod: &PodView,
        now: u32,
        pool: &[&Unit],
        on_node: &ByNode,
        scratch: &mut (NodeState, NodeState),
    ) -> Vec<NodeOption> {
        let node = self.w.nodes[n];
        let here = on_node.on(n);
        let mut options: Vec<NodeOption> = Vec::new();
        if now > 0 {
            options.push(((i32::MIN, 0, 0, i64::MIN), now, n, Vec::new()));
        }
        if here.is_empty() {
            // No candidate here: what fits now is all there is.
            return options;
        }
        let (st, with) = (&mut scratch.0, &mut scratch.1);
        st.clone_from(&self.l.state.nodes()[n]);
        // Binds of this cycle cost nothing but their priority: their room
        // counts as free where it lets more pods of the gang fit, lower
        // priority going back first (pool order), so a gang that needs
        // only the room of low-priority binds does not take back a
        // higher-priority one beside them.
        let fresh: Vec<usize> = here
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| pool[i].fresh)
            .collect();
        if !fresh.is_empty() {
            with.clone_from(st);
            let mut copies = now;
            let mut pending: Vec<usize> = Vec::new();
            for (k, &i) in fresh.iter().enumerate() {
                on_node.give((self.l, self.w), with, n, pool, i);
                pending.push(i);
                let priority = pool[i].priority;
                // Options only where the cost rises: the next unit has a
                // higher priority, or this is the last.
                let rises = fresh
                    .get(k + 1)
                    .is_none_or(|&x| pool[x].priority > priority);
                if !rises {
                    continue;
                }
                let more = with.copies(node, pod);
                if more > copies {
                    options.push((
                        (i32::MIN, 0, 0, i64::from(priority)),
                        more - copies,
                        n,
                        std::mem::take(&mut pending),
                    ));
                    copies = more;
                }
            }
        }
        if !options.is_empty() {
            return options;
        }
        let mut used: Vec<usize> = Vec::new();
        let mut copies = 0;
        for i in here.iter().map(|&i| i as usize).filter(|&i| !pool[i].fresh) {
            on_node.give((self.l, self.w), st, n, pool, i);
            used.push(i);
            copies = st.copies(node, pod);
            if copies > 0 {
                break;
            }
        }
        if copies == 0 {
            return options;
        }
        let prio = used
            .iter()
            .map(|&i| pool[i].cost_priority())
            .max()
            .unwrap_or(i32::MIN);
        let pods: usize = used.iter().map(|&i| pool[i].evicted_pods()).sum();
        let lost: u64 = used.iter().map(|&i| self.w.lost_work(pool[i])).sum();
        options.push(((prio, pods, lost, i64::MIN), copies, n, used));
        options
    }

    /// For a node where nothing fits now and every unit is an earlier
    /// bind: a lower bound on the priority of the cost
    /// [`Search::node_options`] finds there, or `None` when no prefix of its
    /// units can make room. The bound walks the units in pool order,
    /// adding what each could give back on this node at most (requests;
    /// for GPUs, a whole device per slot, which is the most any pod is
    /// charged on one), until CPU, memory and (for whole-GPU pods) GPUs
    /// would suffice: the option needs at least that prefix.
    fn cost_bound(&self, n: usize, pod: &PodView, pool: &[&Unit], on_node: &ByNode) -> Option<i32> {
        let st = &self.l.state.nodes()[n];
        let (mut cpu, mut memory, mut gpu) = (st.free.cpu, st.free.memory, st.free.gpu);
        let whole = matches!(pod.ask, crate::state::GpuAsk::Whole(_));
        let mut bound = i32::MIN;
        let pods = on_node.pods_on(n);
        let mut p = 0;
        for &i in on_node.on(n) {
            let u = pool[i as usize];
            bound = bound.max(u.cost_priority());
            // Unit i's pods on this node (the same pool order as units).
            while let Some(&(ui, k)) = pods.get(p)
                && ui == i
            {
                p += 1;
                let (t, _, slots) = &u.tasks[k as usize];
                let req = if u.tasks.len() == 1 {
                    &u.freed
                } else {
                    &self.l.jobs[u.job].job.tasks[*t].requests
                };
                cpu = cpu.saturating_add(req.cpu);
                memory = memory.saturating_add(req.memory);
                gpu = gpu.saturating_add(slots.len() as u64 * MILLI_PER_GPU);
            }
            if pod.req.cpu <= cpu && pod.req.memory <= memory && (!whole || pod.req.gpu <= gpu) {
                return Some(bound);
            }
        }
        None
    }
}
