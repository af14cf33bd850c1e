//! Reclaim (across queues) and preemption (inside a leaf queue).
//!
//! After the normal passes, every gang still pending for lack of room is
//! considered in the same queue walk order. For each, the cheapest set of
//! victims that really makes it fit is searched inside the cycle's
//! transaction: victims are given back tentatively, the gang is placed by
//! the same search as always, and everything is rolled back unless the
//! result is used. Rules, all enforced here (see `docs/preemption.md`):
//!
//! - **Reclaim**: the preemptor's queue and the victim's queue are compared
//!   where their paths meet (children A and B of their lowest common
//!   ancestor). Every queue on the preemptor's side below the ancestor must
//!   end at or below its fair share; B must be above its fair share on a
//!   resource the gang needs; no queue on the victim's side may drop below
//!   `min(quota, fair share)` (that is `min(quota, demand)` unless quotas
//!   add up to more than the cluster).
//! - **Preemption**: same leaf queue, strictly lower priority.
//! - Only preemptible jobs past their queue's minimum runtime, with no pod
//!   already terminating, are victims.
//! - **Gang-aware units**: elastic pods above `minMember` (most recently
//!   started first) are units of one pod; the rest of a gang is one unit.
//! - **Cheapest first**: units by priority, elastic before whole gangs,
//!   most recently started, fewest pods; then the set is minimised (every
//!   unit whose removal still lets the gang fit is dropped), tried within
//!   each leaf domain and over the whole cluster, and the cheapest result
//!   wins, a one-leaf set before a scattered one at equal priority.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::{QueueId, QueueTree, ResourceName, Resources, TaskState};

use super::{Cycle, Placed, select_minimum};
use crate::decisions::{Eviction, EvictionKind, NominationDecision, PendingReason};
use crate::state::{GpuAsk, PodView};

/// Leaf-domain scopes tried per preemptor, besides the whole cluster.
const DOMAIN_SCOPES: usize = 8;

/// Placement tries spent minimising one victim set.
const MINIMISE_TRIES: usize = 64;

/// Freeing one node for one pod: (cost: max priority, pods, lost work),
/// copies of the pod that then fit, node, units (indices into the pool).
type NodeOption = ((i32, usize, u64), u32, usize, Vec<usize>);

/// A set of bound tasks evicted together.
#[derive(Clone, Debug)]
struct Unit {
    job: usize,
    /// (task, node, device slots), as accounted.
    tasks: Vec<Placed>,
    kind: EvictionKind,
    elastic: bool,
    priority: i32,
    /// Latest start among the unit's pods (ms); `i64::MIN` when unknown.
    started: i64,
    freed: Resources,
    /// The queue (B) whose fair share justified a reclaim, for the message.
    over: Option<QueueId>,
    /// Every pod of the unit was bound by this cycle: taking it back only
    /// drops the binds, nothing is evicted.
    fresh: bool,
}

impl Unit {
    fn key(&self) -> (bool, i32, bool, std::cmp::Reverse<i64>, usize) {
        (
            !self.fresh,
            self.priority,
            !self.elastic,
            std::cmp::Reverse(self.started),
            self.tasks.len(),
        )
    }

    /// The priority a plan pays for this unit (none for a fresh one).
    fn cost_priority(&self) -> i32 {
        if self.fresh { i32::MIN } else { self.priority }
    }

    /// Pods really evicted (none for a fresh unit).
    fn evicted_pods(&self) -> usize {
        if self.fresh { 0 } else { self.tasks.len() }
    }
}

/// A victim set that works, and what it costs.
struct Plan {
    units: Vec<Unit>,
    /// (max victim priority, 0 = one leaf domain / 1 = cluster, pods,
    /// work lost in pod-seconds).
    cost: (i32, u8, usize, u64),
}

impl<'s> Cycle<'s> {
    /// Gives back the capacity reserved for job `j`'s nominated tasks (it is
    /// being placed now). Inside the caller's transaction.
    pub(super) fn release_reservations(&mut self, j: usize) {
        let res = std::mem::take(&mut self.reserved[j]);
        let job = self.jobs[j].job;
        for (t, n, slots) in &res {
            let task = &job.tasks[*t];
            let ask = GpuAsk::of(&task.requests, &task.constraints).unwrap_or(GpuAsk::None);
            let pod = PodView::new(&task.requests, ask, &task.constraints);
            self.state.give(*n, self.nodes[*n], &pod, slots);
        }
    }

    /// Non-preemptible jobs run only within quota: GPUs always, other
    /// resources where the queue has a quota. Only what non-preemptible
    /// jobs hold counts against it (as in KAI-Scheduler): preemptible work
    /// in the queue can always be evicted to make room, so it never stands
    /// in the way, and evicting it never changes this check.
    pub(super) fn check_quota_for_non_preemptible(
        &self,
        leaf: QueueId,
        needs: &Resources,
    ) -> Result<(), PendingReason> {
        for q in self.tree.ancestors(leaf) {
            let quota = &self.tree.spec(q).quota;
            for (r, want) in needs.iter() {
                if want == 0 || (r != ResourceName::Gpu && quota.get(&r) == 0) {
                    continue;
                }
                let used = self.alloc_np[q.0].get(&r);
                if used + want > quota.get(&r) {
                    return Err(PendingReason::NonPreemptibleOverQuota {
                        queue: self.tree.path(q).to_string(),
                        used,
                        requested: want,
                        quota: quota.get(&r),
                        resource: r,
                    });
                }
            }
        }
        Ok(())
    }

    /// The pass: see the module docs.
    pub(super) fn run_evictions(&mut self) {
        let cfg = self.config.preemption;
        if !cfg.reclaim && !cfg.preempt {
            return;
        }
        let waiting: BTreeSet<usize> = self
            .pending
            .iter()
            .filter(|(j, r)| {
                self.jobs[**j].blocked.is_none()
                    && matches!(
                        r,
                        PendingReason::Unschedulable { .. }
                            | PendingReason::TopologyUnfit { .. }
                            | PendingReason::TooManyLeaves { .. }
                            // Victims under the limited queue free the limit too.
                            | PendingReason::QueueAtLimit { .. }
                    )
            })
            .map(|(j, _)| *j)
            .collect();
        if waiting.is_empty() {
            return;
        }
        // Candidate victims: jobs with bound pods at the start of the cycle.
        self.running = (0..self.jobs.len())
            .filter(|&v| !self.bound_at[v].is_empty() && self.jobs[v].job.preemptible)
            .collect();
        let ids: BTreeSet<&str> = waiting
            .iter()
            .map(|&j| self.jobs[j].job.id.as_str())
            .collect();
        let mut walk = self.build_walk(|jw| ids.contains(jw.job.id.as_str()), super::minimum_ask);
        while let Some(leaf) = self.pick_leaf(&mut walk) {
            let Some(j) = self.pop_job(leaf, &mut walk) else {
                break;
            };
            if self.nominated[j] {
                let job = self.jobs[j].job;
                let nodes: BTreeSet<String> = job
                    .tasks
                    .iter()
                    .filter_map(|t| t.nomination.as_ref().map(|n| n.node.clone()))
                    .collect();
                let victims = self
                    .jobs
                    .iter()
                    .flat_map(|jw| jw.job.tasks.iter())
                    .filter(|t| {
                        t.terminating
                            && matches!(&t.state, TaskState::Bound { node, .. } if nodes.contains(node))
                    })
                    .count() as u32;
                // While its victims terminate it waits. Once they are gone
                // and it still did not fit (a job of higher priority in its
                // queue took the room), it is an ordinary pending gang.
                if victims > 0 {
                    self.pending.insert(
                        j,
                        PendingReason::WaitingForVictims {
                            victims,
                            nodes: nodes.into_iter().collect(),
                        },
                    );
                    continue;
                }
            }
            let found = if self.jobs[j].job.preempts {
                self.find_victims(j)
            } else {
                Err("its PriorityClass says preemptionPolicy: Never".into())
            };
            match found {
                Ok(plan) => {
                    self.apply_plan(j, plan);
                    Self::walk_changed(&mut walk);
                }
                Err(refused) => self.explain_in_quota(j, refused),
            }
        }
    }

    /// The gang minimum of `j`, its needs, and whether it uses the topology search.
    fn minimum_of(&self, j: usize) -> Option<(Vec<usize>, Resources, bool)> {
        let jw = &self.jobs[j];
        let job = jw.job;
        let chosen = select_minimum(job, &jw.pending, &jw.bound_by_sub, jw.bound_total).ok()?;
        if chosen.is_empty() {
            return None;
        }
        let mut needs = Resources::zero();
        for &t in &chosen {
            needs.add(&job.tasks[t].requests);
        }
        let constrained =
            !job.topology.is_empty() || job.subgroups.iter().any(|sg| !sg.topology.is_empty());
        let topo_search = self.topology_aware() && (chosen.len() > 1 || constrained);
        Some((chosen, needs, topo_search))
    }

    /// Minimum runtime of a leaf queue, inherited from the nearest ancestor.
    fn min_runtime(&self, leaf: QueueId) -> Option<u64> {
        self.tree
            .ancestors(leaf)
            .find_map(|q| self.tree.spec(q).min_runtime_seconds)
    }

    /// Path from `leaf` up to (excluding) the root, leaf first.
    fn path(&self, leaf: QueueId) -> Vec<QueueId> {
        self.tree.ancestors(leaf).collect()
    }

    /// Reclaim check between the preemptor's leaf `q` and a victim leaf
    /// `v`: `Some(B)` when allowed, B being the victim side's child of the
    /// lowest common ancestor.
    fn reclaim_allowed(&self, q: QueueId, v: QueueId, needs: &Resources) -> Option<QueueId> {
        let pq = self.path(q);
        let pv = self.path(v);
        let lca = pq.iter().find(|x| pv.contains(x)).copied();
        let below = |p: &[QueueId]| -> Vec<QueueId> {
            match lca {
                Some(l) => p.iter().copied().take_while(|x| *x != l).collect(),
                None => p.to_vec(),
            }
        };
        let (side_q, side_v) = (below(&pq), below(&pv));
        let b = *side_v.last()?;
        // The preemptor's side must end at or below its fair share.
        for x in &side_q {
            for (r, want) in needs.iter() {
                if want > 0 && self.alloc[x.0].get(&r) + want > self.fair[x.0].get(&r) {
                    return None;
                }
            }
        }
        // B must be above its fair share on a resource the gang needs. Or,
        // when the gang keeps the preemptor's side within its quota, B may
        // hold as little as its floor `min(quota, fair share)`: work within
        // quota takes back over-quota room even from a queue exactly at its
        // fair share (free capacity may be there but split across nodes).
        // Either way the preemptor's side ends at or below its fair share,
        // so B cannot take it back: no loop.
        let over = needs
            .iter()
            .any(|(r, want)| want > 0 && self.alloc[b.0].get(&r) > self.fair[b.0].get(&r));
        let lent = || {
            side_q.iter().all(|x| self.within_quota(*x, needs))
                && needs.iter().any(|(r, want)| {
                    let floor = self.tree.spec(b).quota.get(&r).min(self.fair[b.0].get(&r));
                    want > 0 && self.alloc[b.0].get(&r) > floor
                })
        };
        (over || lent()).then_some(b)
    }

    /// Whether queue `x` stays within its quota with `needs` added: on GPUs
    /// (which the gang must ask for) and on every resource `x` has a quota
    /// for.
    pub(super) fn within_quota(&self, x: QueueId, needs: &Resources) -> bool {
        let quota = &self.tree.spec(x).quota;
        needs.gpu > 0
            && needs.iter().all(|(r, want)| {
                let q = quota.get(&r);
                want == 0
                    || (r != ResourceName::Gpu && q == 0)
                    || self.alloc[x.0].get(&r) + want <= q
            })
    }

    /// Victim units for preemptor `j`, cheapest first.
    fn victim_units(&self, j: usize, needs: &Resources) -> Vec<Unit> {
        let cfg = self.config.preemption;
        let jw = &self.jobs[j];
        let me = jw.job;
        let mut units = Vec::new();
        // Every reclaim needs the preemptor's own leaf to end at or below
        // its fair share: when it would not, only preemption is possible
        // (cheap exit for the many pending jobs of a full queue).
        let leaf_fits_share = needs.iter().all(|(r, want)| {
            want == 0 || self.alloc[jw.leaf.0].get(&r) + want <= self.fair[jw.leaf.0].get(&r)
        });
        let reclaim = cfg.reclaim && leaf_fits_share;
        if !reclaim && !cfg.preempt {
            return units;
        }
        for &v in &self.running {
            let vw = &self.jobs[v];
            let vj = vw.job;
            if v == j
                || vw.leaf == QueueTree::ROOT
                || self.set_aside.contains(&v)
                || self.bound_at[v].is_empty()
                || !vj.preemptible
                || vj.tasks.iter().any(|t| t.terminating)
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
                match self.reclaim_allowed(jw.leaf, vw.leaf, needs) {
                    Some(b) => (EvictionKind::Reclaim, Some(b)),
                    None => continue,
                }
            };
            let started = self.job_started(v);
            // Minimum runtime protects pods that run; fresh binds have no
            // start (`job_started` skips them), so they are never protected.
            if let Some(min) = self.min_runtime(vw.leaf)
                && started != i64::MIN
                && self.now.0.saturating_sub(started) < (min as i64).saturating_mul(1000)
            {
                continue;
            }
            // Elastic pods first (most recently started), respecting
            // sub-group minimums; the rest is the gang.
            let mut bound: Vec<Placed> = self.bound_at[v].clone();
            bound.sort_by_key(|(t, _, _)| {
                (
                    std::cmp::Reverse(self.task_started(v, *t)),
                    std::cmp::Reverse(vj.tasks[*t].name.clone()),
                )
            });
            // A job placed whole by this cycle is one unit: taking its
            // binds back costs nothing, and a part of it would leave a
            // partial gang.
            let all_fresh = bound.iter().all(|(t, _, _)| self.fresh.contains(&(v, *t)));
            if all_fresh && self.nominated[v] && kind == EvictionKind::Reclaim {
                // A preemptor binding on the room its victims left: another
                // queue taking it back would waste their eviction. (A job
                // of higher priority in its own queue may still take it.)
                continue;
            }
            let mut left = if all_fresh { 0 } else { bound.len() as u32 };
            let mut per_sub: BTreeMap<&str, u32> = BTreeMap::new();
            for (t, _, _) in &bound {
                *per_sub
                    .entry(vj.tasks[*t].subgroup.as_deref().unwrap_or(""))
                    .or_default() += 1;
            }
            let mut gang = Vec::new();
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
                        started: self.task_started(v, p.0),
                        fresh: self.fresh.contains(&(v, p.0)),
                        tasks: vec![p],
                        kind,
                        elastic: true,
                        priority: vj.priority,
                        over,
                    });
                } else {
                    gang.push(p);
                }
            }
            if !gang.is_empty() {
                let mut freed = Resources::zero();
                let mut started = i64::MIN;
                for (t, _, _) in &gang {
                    freed.add(&vj.tasks[*t].requests);
                    started = started.max(self.task_started(v, *t));
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
        units.sort_by(|a, b| {
            a.key().cmp(&b.key()).then_with(|| {
                let name = |u: &Unit| &self.jobs[u.job].job.tasks[u.tasks[0].0].name;
                (&self.jobs[a.job].job.id, name(a)).cmp(&(&self.jobs[b.job].job.id, name(b)))
            })
        });
        units
    }

    /// Latest start of a job's running pods (ms), `i64::MIN` when unknown
    /// (pods bound by this cycle have not started).
    fn job_started(&self, v: usize) -> i64 {
        let job = self.jobs[v].job;
        self.bound_at[v]
            .iter()
            .filter(|(t, _, _)| !self.fresh.contains(&(v, *t)))
            .filter_map(|(t, _, _)| job.tasks[*t].started.map(|s| s.0))
            .max()
            .unwrap_or(i64::MIN)
    }

    /// When task `t` of job `v` started (ms): now for a pod bound by this
    /// cycle (so it sorts as the most recent), `i64::MIN` when unknown.
    fn task_started(&self, v: usize, t: usize) -> i64 {
        if self.fresh.contains(&(v, t)) {
            return self.now.0;
        }
        self.jobs[v].job.tasks[t].started.map_or(i64::MIN, |s| s.0)
    }

    /// Gives back every task of `units` (inside the open transaction).
    fn give_units(&mut self, units: &[&Unit]) {
        for u in units {
            let job = self.jobs[u.job].job;
            for (t, n, slots) in &u.tasks {
                let task = &job.tasks[*t];
                let ask = GpuAsk::of(&task.requests, &task.constraints).unwrap_or(GpuAsk::None);
                let pod = PodView::new(&task.requests, ask, &task.constraints);
                self.state.give(*n, self.nodes[*n], &pod, slots);
            }
        }
    }

    /// A working victim set from `pool` (cheapest first), minimised: every
    /// unit the gang does not need is dropped, most expensive first (at most
    /// [`MINIMISE_TRIES`] tries, so huge sets are minimised from the top).
    ///
    /// Candidates come node by node first: for each node, the cheapest units
    /// on it that let one pod of the gang fit there; the cheapest nodes are
    /// taken until they hold the gang. If that set does not work (mixed
    /// shapes, topology), the shortest working prefix of `pool` is found by
    /// binary search.
    fn greedy_minimal<'u>(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
        topo_search: bool,
        pool: &[&'u Unit],
        total_free: &Resources,
    ) -> Option<Vec<&'u Unit>> {
        let by_node = self.node_centric(j, chosen, pool);
        let mut taken: Vec<&Unit> = if !by_node.is_empty()
            && self.fits_without(j, chosen, needs, topo_search, &by_node)
        {
            by_node
        } else {
            let mut all_free = total_free.clone();
            for u in pool {
                all_free.add(&u.freed);
            }
            if !needs.fits_in(&all_free) || !self.fits_without(j, chosen, needs, topo_search, pool)
            {
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

    /// Node by node, the cheapest units (of `pool`, cheapest first) whose
    /// departure lets one pod of the gang's main shape fit; the cheapest
    /// nodes until the gang's pods are covered. Empty when no cover exists.
    fn node_centric<'u>(&mut self, j: usize, chosen: &[usize], pool: &[&'u Unit]) -> Vec<&'u Unit> {
        let job = self.jobs[j].job;
        let head = &job.tasks[chosen[0]];
        let ask = GpuAsk::of(&head.requests, &head.constraints).unwrap_or(GpuAsk::None);
        let pod = PodView::new(&head.requests, ask, &head.constraints);
        let key = self.static_filter(&head.constraints);
        let Some(mask) = self.filters.get(&key).map(|f| f.mask.clone()) else {
            return Vec::new();
        };
        let mut on_node: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, u) in pool.iter().enumerate() {
            for (_, n, _) in &u.tasks {
                let list = on_node.entry(*n).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
        let mut options: Vec<NodeOption> = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            if !mask[n] {
                continue;
            }
            let mut st = self.state.nodes[n].clone();
            let mut copies = st.copies(node, &pod);
            let mut used: Vec<usize> = Vec::new();
            if copies == 0 {
                for &i in on_node.get(&n).map(Vec::as_slice).unwrap_or(&[]) {
                    let u = pool[i];
                    let vj = self.jobs[u.job].job;
                    for (t, m, slots) in &u.tasks {
                        if *m == n {
                            let task = &vj.tasks[*t];
                            let a = GpuAsk::of(&task.requests, &task.constraints)
                                .unwrap_or(GpuAsk::None);
                            st.give(
                                node,
                                &PodView::new(&task.requests, a, &task.constraints),
                                slots,
                            );
                        }
                    }
                    used.push(i);
                    copies = st.copies(node, &pod);
                    if copies > 0 {
                        break;
                    }
                }
            }
            if copies == 0 {
                continue;
            }
            let prio = used
                .iter()
                .map(|&i| pool[i].cost_priority())
                .max()
                .unwrap_or(i32::MIN);
            let pods: usize = used.iter().map(|&i| pool[i].evicted_pods()).sum();
            let lost: u64 = used.iter().map(|&i| self.lost_work(pool[i])).sum();
            options.push(((prio, pods, lost), copies, n, used));
        }
        options.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut covered = 0usize;
        let mut picked: BTreeSet<usize> = BTreeSet::new();
        for (_, copies, _, used) in options {
            if covered >= chosen.len() {
                break;
            }
            covered += copies as usize;
            picked.extend(used);
        }
        if covered < chosen.len() {
            return Vec::new();
        }
        // Pool order is cost order.
        picked.into_iter().map(|i| pool[i]).collect()
    }

    /// Work a unit loses, in pod-seconds (0 when its start is unknown).
    fn lost_work(&self, u: &Unit) -> u64 {
        if u.started == i64::MIN {
            return 0;
        }
        (self.now.0.saturating_sub(u.started).max(0) as u64 / 1000) * u.tasks.len() as u64
    }

    /// The position of the last unit of `set` that takes its queue side
    /// below `min(quota, demand)`, if any.
    fn first_floor_breaker(&self, set: &[&Unit]) -> Option<usize> {
        let mut freed: BTreeMap<usize, Resources> = BTreeMap::new();
        let mut breaker = None;
        for (i, u) in set.iter().enumerate() {
            if !self.quota_kept(&freed, u) {
                breaker = Some(i);
            }
            for q in self.tree.ancestors(self.jobs[u.job].leaf) {
                freed
                    .entry(q.0)
                    .or_insert_with(Resources::zero)
                    .add(&u.freed);
            }
        }
        breaker
    }

    /// Whether the victim side keeps `min(quota, demand)` with `extra` freed too.
    fn quota_kept(&self, freed: &BTreeMap<usize, Resources>, unit: &Unit) -> bool {
        if unit.kind == EvictionKind::Preempt {
            return true;
        }
        let leaf = self.jobs[unit.job].leaf;
        for q in self.tree.ancestors(leaf) {
            let spec = self.tree.spec(q);
            let mut out = freed.get(&q.0).cloned().unwrap_or_else(Resources::zero);
            out.add(&unit.freed);
            for (r, gone) in out.iter() {
                // The quota, as far as the fair share honours it (it is
                // below the quota only where demand is, or where quotas
                // add up to more than the cluster).
                let floor = spec.quota.get(&r).min(self.fair[q.0].get(&r));
                if gone > 0 && self.alloc[q.0].get(&r).saturating_sub(gone) < floor {
                    return false;
                }
            }
            if Some(q) == unit.over {
                break;
            }
        }
        true
    }

    /// Whether `units` free what the preemptor's limits need
    /// ([`Cycle::victim_need`]).
    fn limits_freed(&self, units: &[&Unit]) -> bool {
        self.victim_need.iter().all(|(q, r, need)| {
            let freed: u64 = units
                .iter()
                .filter(|u| self.tree.ancestors(self.jobs[u.job].leaf).any(|a| a == *q))
                .map(|u| u.freed.get(r))
                .sum();
            freed >= *need
        })
    }

    /// Whether the gang fits with exactly `units` gone (state restored after).
    fn fits_without(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
        topo_search: bool,
        units: &[&Unit],
    ) -> bool {
        if !self.limits_freed(units) {
            return false;
        }
        let mark = self.state.begin();
        self.give_units(units);
        let ok = self.place_chosen(j, chosen, needs, topo_search).is_ok();
        self.state.rollback(mark);
        ok
    }

    /// The cheapest victim set that makes gang `j` fit, if any.
    /// Reclaim first (the queue gets back what it lent), and only if no
    /// reclaim works, preemption inside the queue.
    fn find_victims(&mut self, j: usize) -> Result<Plan, String> {
        // Jobs of lower priority in the preemptor's own leaf that this
        // cycle bound (backfill behind it): had the preemptor been placed
        // first, they would not hold its queue's share or room. The search
        // runs first with them set aside (their binds taken back); if that
        // finds a plan, they are part of it.
        let leaf = self.jobs[j].leaf;
        let me = self.jobs[j].job;
        let behind: Vec<usize> = (0..self.jobs.len())
            .filter(|&v| {
                v != j
                    && self.jobs[v].leaf == leaf
                    && self.jobs[v].job.preemptible
                    && self.jobs[v].job.priority < me.priority
                    && !self.bound_at[v].is_empty()
                    && self.bound_at[v]
                        .iter()
                        .all(|(t, _, _)| self.fresh.contains(&(v, *t)))
            })
            .collect();
        if behind.is_empty() {
            return self.search_victims(j);
        }
        let units: Vec<Unit> = behind.iter().map(|&v| self.fresh_unit(v, j)).collect();
        let mark = self.state.begin();
        let refs: Vec<&Unit> = units.iter().collect();
        self.give_units(&refs);
        for u in &units {
            self.uncharge(leaf, &u.freed);
        }
        self.set_aside = behind.iter().copied().collect();
        let found = self.search_victims(j);
        self.set_aside.clear();
        for u in &units {
            self.charge(leaf, &u.freed, false);
        }
        self.state.rollback(mark);
        match found {
            Ok(mut plan) => {
                plan.units.extend(units);
                Ok(plan)
            }
            Err(_) => self.search_victims(j),
        }
    }

    /// Job `v`'s binds of this cycle as one unit, taken back for `j`.
    fn fresh_unit(&self, v: usize, j: usize) -> Unit {
        let vj = self.jobs[v].job;
        let tasks = self.bound_at[v].clone();
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
            started: self.now.0,
            freed,
            over: None,
            fresh: true,
        }
    }

    /// Removes `freed` from the allocation of `leaf` and every queue above.
    fn uncharge(&mut self, leaf: QueueId, freed: &Resources) {
        for q in self.tree.ancestors(leaf) {
            self.alloc[q.0].saturating_sub(freed);
        }
        self.alloc[QueueTree::ROOT.0].saturating_sub(freed);
    }

    /// The victim search proper (see [`Cycle::find_victims`]).
    fn search_victims(&mut self, j: usize) -> Result<Plan, String> {
        let Some((chosen, needs, topo_search)) = self.minimum_of(j) else {
            return Err("its minimum is already placed".into());
        };
        let leaf = self.jobs[j].leaf;
        if !self.jobs[j].job.preemptible
            && let Err(e) = self.check_quota_for_non_preemptible(leaf, &needs)
        {
            return Err(e.to_string());
        }
        // Limits are checked as they would be after the victims leave:
        // what the gang would take a queue over its limit by must be freed
        // by victims below that queue.
        self.victim_need.clear();
        for q in self.tree.ancestors(leaf) {
            for (r, cap) in self.tree.spec(q).limit.iter() {
                let after = self.alloc[q.0].get(r) + needs.get(r);
                if after > cap {
                    self.victim_need.push((q, r.clone(), after - cap));
                }
            }
        }
        let all = self.victim_units(j, &needs);
        if all.is_empty() {
            return Err(self.why_no_victims(j, &needs));
        }
        let mut why = String::new();
        for kind in [EvictionKind::Reclaim, EvictionKind::Preempt] {
            let units: Vec<Unit> = all.iter().filter(|u| u.kind == kind).cloned().collect();
            if units.is_empty() {
                continue;
            }
            match self.find_among(j, &chosen, &needs, topo_search, units) {
                Ok(plan) => return Ok(plan),
                Err(e) => why = e,
            }
        }
        Err(why)
    }

    /// A gang within its queues' quotas that still has no room gets a
    /// reason saying so, with the free capacity and why reclaim did not
    /// make room: quota is guaranteed only where it can be placed.
    fn explain_in_quota(&mut self, j: usize, refused: String) {
        let detail = match self.pending.get(&j) {
            Some(
                r @ (PendingReason::Unschedulable { .. }
                | PendingReason::TopologyUnfit { .. }
                | PendingReason::TooManyLeaves { .. }),
            ) => r.to_string(),
            _ => return,
        };
        let Some((chosen, needs, _)) = self.minimum_of(j) else {
            return;
        };
        let leaf = self.jobs[j].leaf;
        if !self
            .tree
            .ancestors(leaf)
            .all(|x| self.within_quota(x, &needs))
        {
            return;
        }
        // Free GPUs on the nodes the gang's first pod may use at all.
        let head = self.jobs[j].job.tasks[chosen[0]].constraints.clone();
        let key = self.static_filter(&head);
        let mask = self
            .filters
            .get(&key)
            .map(|f| f.mask.clone())
            .unwrap_or_default();
        let (mut free, mut largest, mut usable) = (0u64, 0u64, 0u32);
        for (n, st) in self.state.nodes.iter().enumerate() {
            if mask.get(n).copied().unwrap_or(false) {
                usable += 1;
                free += st.free.gpu;
                largest = largest.max(st.free.gpu);
            }
        }
        self.pending.insert(
            j,
            PendingReason::InQuotaNoRoom {
                needs: needs.gpu,
                pods: chosen.len() as u32,
                free,
                largest,
                usable,
                nodes: self.nodes.len() as u32,
                refused,
                detail,
            },
        );
    }

    /// Why no running job may be taken for gang `j`, counted by obstacle.
    fn why_no_victims(&self, j: usize, needs: &Resources) -> String {
        let cfg = self.config.preemption;
        if !cfg.reclaim && !cfg.preempt {
            return "reclaim and preemption are off".into();
        }
        let jw = &self.jobs[j];
        let (mut shares, mut fixed, mut young, mut lower) = (0u32, 0u32, 0u32, 0u32);
        for (v, vw) in self.jobs.iter().enumerate() {
            if v == j || self.bound_at[v].is_empty() || vw.leaf == QueueTree::ROOT {
                continue;
            }
            if !vw.job.preemptible {
                fixed += 1;
            } else if vw.leaf == jw.leaf {
                if vw.job.priority >= jw.job.priority || !cfg.preempt {
                    lower += 1;
                } else {
                    young += 1;
                }
            } else if !cfg.reclaim || self.reclaim_allowed(jw.leaf, vw.leaf, needs).is_none() {
                shares += 1;
            } else {
                young += 1;
            }
        }
        let mut parts = Vec::new();
        if shares > 0 {
            parts.push(format!(
                "{shares} job(s) in queues not above their fair share or quota"
            ));
        }
        if fixed > 0 {
            parts.push(format!("{fixed} not preemptible"));
        }
        if lower > 0 {
            parts.push(format!("{lower} in its own queue without lower priority"));
        }
        if young > 0 {
            parts.push(format!(
                "{young} within their minimum runtime or terminating"
            ));
        }
        if parts.is_empty() {
            return "no job runs that could be taken".into();
        }
        format!("no job may be taken: {}", parts.join(", "))
    }

    /// The cheapest working victim set among `units`, over the scopes.
    fn find_among(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
        topo_search: bool,
        units: Vec<Unit>,
    ) -> Result<Plan, String> {
        let (chosen, needs) = (chosen.to_vec(), needs.clone());
        let mut why = "evicting every job it may take still leaves no room where it fits";
        // Scopes: leaf domains (victims all inside one), then the cluster.
        let mut scopes: Vec<(u8, Option<BTreeSet<usize>>)> = Vec::new();
        if let Some(ti) = &self.topo
            && self.topology_aware()
            && let Some(lf) = ti.topo.leaf_level()
        {
            let mut by_domain: BTreeMap<u32, (u64, BTreeSet<usize>)> = BTreeMap::new();
            for n in 0..self.nodes.len() {
                if let Some(d) = ti.domain_of[lf][n] {
                    let e = by_domain.entry(d).or_default();
                    e.0 += self.state.nodes[n].free.gpu;
                    e.1.insert(n);
                }
            }
            for u in &units {
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
            for st in &self.state.nodes {
                r.add(&st.free);
            }
            r
        };
        let mut best: Option<Plan> = None;
        for (rank, scope) in scopes {
            let pool: Vec<&Unit> = units
                .iter()
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
                match self.first_floor_breaker(&taken) {
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
            if victim_jobs.len() > self.config.preemption.max_victim_jobs as usize {
                why = "it would need more victim jobs than preemption.maxVictimJobs";
                continue;
            }
            let lost: u64 = taken.iter().map(|u| self.lost_work(u)).sum();
            let cost = (
                taken
                    .iter()
                    .map(|u| u.cost_priority())
                    .max()
                    .unwrap_or(i32::MIN),
                rank,
                taken.iter().map(|u| u.evicted_pods()).sum(),
                lost,
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

    /// After binds of this cycle were taken back, the room they leave
    /// (beyond what the preemptors took) is offered once more to gangs
    /// still pending for lack of room, in the usual walk order. No eviction
    /// follows: what binds here is what a later pass would have bound.
    pub(super) fn run_refill(&mut self) {
        if self.yields == 0 {
            return;
        }
        // Capacity grew: failures of this cycle no longer predict others.
        self.failed_shapes.clear();
        let retry: BTreeSet<usize> = self
            .pending
            .iter()
            .filter(|(j, r)| {
                self.jobs[**j].blocked.is_none()
                    && matches!(
                        r,
                        PendingReason::Unschedulable { .. }
                            | PendingReason::TopologyUnfit { .. }
                            | PendingReason::TooManyLeaves { .. }
                            | PendingReason::Yielded { .. }
                    )
            })
            .map(|(j, _)| *j)
            .collect();
        let mut walk = self.build_walk(|jw| retry.contains(&jw.index), super::minimum_ask);
        while let Some(leaf) = self.pick_leaf(&mut walk) {
            let Some(j) = self.pop_job(leaf, &mut walk) else {
                break;
            };
            if self.try_gang(j).is_ok() {
                self.pending.remove(&j);
                self.note_elastic_left(j);
            }
        }
    }

    /// A gang placed after the elastic pass: its pods above the minimum
    /// wait for the next cycle.
    fn note_elastic_left(&mut self, j: usize) {
        let left = self.jobs[j].pending.len() as u32;
        if left > 0 {
            self.pending.insert(
                j,
                PendingReason::ElasticPending {
                    placed: 0,
                    pending: left,
                    detail: "the gang was placed after the elastic pass; they are tried next cycle"
                        .into(),
                },
            );
        }
    }

    /// Commits a plan: victims leave, the preemptor is placed and nominated.
    fn apply_plan(&mut self, j: usize, plan: Plan) {
        let Some((chosen, needs, topo_search)) = self.minimum_of(j) else {
            return;
        };
        let mark = self.state.begin();
        let refs: Vec<&Unit> = plan.units.iter().collect();
        self.give_units(&refs);
        let placed = match self.place_chosen(j, &chosen, &needs, topo_search) {
            Ok(p) => p,
            Err(_) => {
                // The search proved this fits; a different result means the
                // state changed under it, so do nothing rather than evict.
                self.state.rollback(mark);
                return;
            }
        };
        self.state.rollback(mark);
        // Evicted pods hold their room until they terminate: only taken-back
        // binds of this cycle free theirs. The preemptor's placement is
        // held on top, so nothing else lands on room it was promised.
        let mark = self.state.begin();
        let fresh: Vec<&Unit> = plan.units.iter().filter(|u| u.fresh).collect();
        self.give_units(&fresh);
        let me = self.jobs[j].job;
        for (t, n, slots) in &placed {
            let task = &me.tasks[*t];
            let ask = GpuAsk::of(&task.requests, &task.constraints).unwrap_or(GpuAsk::None);
            let pod = PodView::new(&task.requests, ask, &task.constraints);
            self.state.take(*n, self.nodes[*n], &pod, slots);
        }
        self.state.commit(mark);
        let me = self.jobs[j].job;
        let my_leaf = self.jobs[j].leaf;
        let mut victims = 0u32;
        // Messages describe the queues before any of this plan's evictions.
        let mut messages: Vec<String> = Vec::with_capacity(plan.units.len());
        for u in &plan.units {
            let vw = &self.jobs[u.job];
            let vj = vw.job;
            let vleaf = vw.leaf;
            let message = match u.kind {
                EvictionKind::Reclaim => {
                    let b = u.over.unwrap_or(vleaf);
                    let above_fair = needs.iter().any(|(r, want)| {
                        want > 0 && self.alloc[b.0].get(&r) > self.fair[b.0].get(&r)
                    });
                    if !above_fair {
                        // Reclaimed under the in-quota rule (`reclaim_allowed`).
                        let r = ResourceName::Gpu;
                        let (a, quota) = (self.alloc[b.0].get(&r), self.tree.spec(b).quota.get(&r));
                        format!(
                            "reclaimed for {} ({}): {} above its quota ({r} {}, quota {}) and {} within its quota",
                            me.id,
                            self.tree.path(my_leaf),
                            self.tree.path(b),
                            r.format_amount(a),
                            r.format_amount(quota),
                            self.tree.path(my_leaf)
                        )
                    } else {
                        // The resource with the highest allocated / fair share.
                        let mut shown: Option<(ResourceName, u64, u64)> = None;
                        for (r, want) in needs.iter() {
                            if want == 0 {
                                continue;
                            }
                            let (a, f) = (self.alloc[b.0].get(&r), self.fair[b.0].get(&r));
                            let better = match &shown {
                                None => true,
                                Some((_, sa, sf)) => {
                                    trainyard_model::resources::cmp_ratio(a, f, *sa, *sf)
                                        == std::cmp::Ordering::Greater
                                }
                            };
                            if better {
                                shown = Some((r, a, f));
                            }
                        }
                        let detail = shown
                            .map(|(r, a, f)| {
                                format!(" ({r} {}/{})", r.format_amount(a), r.format_amount(f))
                            })
                            .unwrap_or_default();
                        format!(
                            "reclaimed for {} ({}): {} above fair share{detail}",
                            me.id,
                            self.tree.path(my_leaf),
                            self.tree.path(b)
                        )
                    }
                }
                EvictionKind::Preempt => format!(
                    "preempted by {} (priority {} > {}) in queue {}",
                    me.id,
                    me.priority,
                    vj.priority,
                    self.tree.path(vleaf)
                ),
            };
            messages.push(if u.elastic {
                format!("{message}; elastic pod above minMember {}", vj.min_member)
            } else {
                message
            });
        }
        for (u, message) in plan.units.iter().zip(messages) {
            let vj = self.jobs[u.job].job;
            let vleaf = self.jobs[u.job].leaf;
            let mut yielded = false;
            for (t, n, _) in &u.tasks {
                if self.fresh.remove(&(u.job, *t)) {
                    // Bound by this cycle: the bind is simply not made.
                    let name = &vj.tasks[*t].name;
                    self.binds.retain(|b| !(b.job == vj.id && &b.task == name));
                    self.stats.pods_bound = self.stats.pods_bound.saturating_sub(1);
                    self.jobs[u.job].pending.push(*t);
                    yielded = true;
                    continue;
                }
                self.evictions.push(Eviction {
                    job: vj.id.clone(),
                    task: vj.tasks[*t].name.clone(),
                    node: self.nodes[*n].name.clone(),
                    kind: u.kind,
                    preemptor: me.id.clone(),
                    message: message.clone(),
                });
                victims += 1;
            }
            if yielded {
                self.yields += 1;
                if !u.elastic {
                    self.placements.retain(|p| p.job != vj.id);
                }
                self.pending.insert(
                    u.job,
                    PendingReason::Yielded {
                        preemptor: me.id.clone(),
                        message: message.clone(),
                    },
                );
            }
            // The victim's capacity leaves its queues now.
            for q in self.tree.ancestors(vleaf) {
                self.alloc[q.0].saturating_sub(&u.freed);
            }
            self.alloc[QueueTree::ROOT.0].saturating_sub(&u.freed);
            let gone: BTreeSet<usize> = u.tasks.iter().map(|p| p.0).collect();
            let vw = &mut self.jobs[u.job];
            vw.bound_total = vw.bound_total.saturating_sub(gone.len() as u32);
            self.bound_at[u.job].retain(|p| !gone.contains(&p.0));
        }
        if victims == 0 {
            // Only binds of this cycle made room: the gang binds now.
            let bound = self.jobs[j].bound_total as usize;
            if placed.len() + bound > 1
                && let Some(gp) = self.gang_placement(j, &placed, None)
            {
                self.placements.push(gp);
            }
            self.stats.gangs_placed += 1;
            self.record(j, placed);
            self.pending.remove(&j);
            self.note_elastic_left(j);
            self.yields += 1;
            return;
        }
        // The preemptor's room is held for it for the rest of the cycle and
        // counted for its queue; it binds once the victims are gone.
        self.charge(my_leaf, &needs, !me.preemptible);
        let mut nodes: BTreeSet<String> = BTreeSet::new();
        for (t, n, slots) in &placed {
            let node = self.nodes[*n];
            nodes.insert(node.name.clone());
            self.nominations.push(NominationDecision {
                job: me.id.clone(),
                task: me.tasks[*t].name.clone(),
                node: node.name.clone(),
                gpus: slots.iter().map(|&s| node.gpus[s].index).collect(),
            });
        }
        self.stats.evictions += victims;
        self.pending.insert(
            j,
            PendingReason::WaitingForVictims {
                victims,
                nodes: nodes.into_iter().collect(),
            },
        );
    }
}
