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
//!   node the cheapest units that let a pod fit (`victims/by_node.rs`),
//!   else the shortest working prefix of the cost order; then minimised;
//!   then the victims' quota floors and the preemptor's limits (as they
//!   would be after the victims leave) are checked.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::{QueueId, QueueTree, Resources};

use super::PlacedList as UnitTasks;
use super::evict::{Minimum, Plan, Unit};
use super::{Cycle, Ledger, World};
use crate::decisions::EvictionKind;
use by_node::ByNode;

/// Leaf-domain scopes tried per preemptor, besides the whole cluster.
const DOMAIN_SCOPES: usize = 8;

/// Placement tries spent minimising one victim set.
const MINIMISE_TRIES: usize = 64;

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
            // A job evicted whole (`Job::evict_whole`) has no such pods.
            let elastic_pods = left > vj.min_member && !vj.evict_whole;
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

mod by_node;
