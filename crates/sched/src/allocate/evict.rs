//! Reclaim (across queues) and preemption (inside a leaf queue): the pass.
//!
//! After the normal passes, every gang still pending for lack of room or at
//! a queue limit is considered in the same queue walk order; the victim
//! search is in `victims.rs`. Rules (see `docs/preemption.md`):
//!
//! - **Reclaim**: the preemptor's queue and the victim's queue are compared
//!   where their paths meet (children A and B of their lowest common
//!   ancestor). Every queue on the preemptor's side below the ancestor must
//!   end at or below its fair share; B must be above its fair share on a
//!   resource the gang needs, or, when the preemptor's side stays within
//!   its quota, above `min(quota, fair share)`; no queue on the victim's
//!   side may drop below `min(quota, fair share)`.
//! - **Preemption**: same leaf queue, strictly lower priority.
//! - **Limits** hold as they would after the victims leave; a
//!   non-preemptible preemptor stays within quota counting non-preemptible
//!   work only; `preemptionPolicy: Never` evicts nobody.
//! - Only preemptible jobs past their queue's minimum runtime, with no pod
//!   already terminating, are victims; binds of this cycle are victims for
//!   free (they are taken back, not evicted).
//! - A plan is applied (`evict/apply.rs`): victims leave their queues,
//!   evicted pods keep their room until they terminate, the preemptor is
//!   nominated (or bound at once when only this cycle's binds made room).
//!   The refill (`evict/refill.rs`) then offers what taken-back binds left
//!   to gangs still pending.

use std::collections::{BTreeSet, HashMap};

use trainyard_model::{QueueId, QueueTree, ResourceName, Resources, TaskState};

use super::{Cycle, Ledger, World, select_minimum};
use crate::decisions::{EvictionKind, PendingReason};

/// A gang's minimum: its tasks to place, their needs, and whether the
/// topology search places them.
pub(super) type Minimum = (Vec<usize>, Resources, bool);

/// What makes two victim searches alike: leaf, constraint set, pod
/// request, (priority, preemptible, preempts), and the end class that
/// decides which held nodes it may use (`Ledger::ends_of`).
type FailedSearch = (QueueId, u32, Resources, (i32, bool, bool), i64);

/// Rounds of the eviction pass in one cycle (see `run_evictions`).
const EVICTION_ROUNDS: usize = 4;

/// A set of bound tasks evicted together.
#[derive(Clone, Debug)]
pub(super) struct Unit {
    pub(super) job: usize,
    /// (task, node, device slots), as accounted.
    pub(super) tasks: super::PlacedList,
    pub(super) kind: EvictionKind,
    pub(super) elastic: bool,
    pub(super) priority: i32,
    /// Latest start among the unit's pods (ms); `i64::MIN` when unknown.
    pub(super) started: i64,
    pub(super) freed: Resources,
    /// The queue (B) whose fair share justified a reclaim, for the message.
    pub(super) over: Option<QueueId>,
    /// Every pod of the unit was bound by this cycle: taking it back only
    /// drops the binds, nothing is evicted.
    pub(super) fresh: bool,
}

impl Unit {
    pub(super) fn key(&self) -> (bool, i32, bool, std::cmp::Reverse<i64>, usize) {
        (
            !self.fresh,
            self.priority,
            !self.elastic,
            std::cmp::Reverse(self.started),
            self.tasks.len(),
        )
    }

    /// [`Unit::key`] then the job index (which orders as the job id: jobs
    /// are indexed in id order), packed into two integers that compare in
    /// the same order, for sorting many units cheaply.
    pub(super) fn packed_key(&self) -> (u128, u64) {
        let (stale, priority, whole, std::cmp::Reverse(started), pods) = self.key();
        let priority = (priority as i64 - i32::MIN as i64) as u128;
        let newest_first = u64::MAX - ((started as u64) ^ (1 << 63));
        let high = (stale as u128) << 127
            | priority << 95
            | (whole as u128) << 94
            | (newest_first as u128) << 30;
        (high, (pods as u64) << 32 | self.job as u64)
    }

    /// The priority a plan pays for this unit (none for a fresh one).
    pub(super) fn cost_priority(&self) -> i32 {
        if self.fresh { i32::MIN } else { self.priority }
    }

    /// Pods really evicted (none for a fresh unit).
    pub(super) fn evicted_pods(&self) -> usize {
        if self.fresh { 0 } else { self.tasks.len() }
    }
}

/// A victim set that works, and what it costs.
pub(super) struct Plan {
    pub(super) units: Vec<Unit>,
    /// (max victim priority, 0 = one leaf domain / 1 = cluster, pods,
    /// work lost in pod-seconds, max priority of binds of this cycle taken
    /// back); evicted pods only in the first four.
    pub(super) cost: (i32, u8, usize, u64, i32),
}

impl<'s> Cycle<'s> {
    /// Jobs that can be scheduled at all and are pending for a reason
    /// `which` accepts.
    pub(super) fn pending_where(&self, which: impl Fn(&PendingReason) -> bool) -> BTreeSet<usize> {
        self.outcome
            .pending
            .iter()
            .filter(|(j, r)| self.ledger.jobs[**j].blocked.is_none() && which(r))
            .map(|(j, _)| *j)
            .collect()
    }

    /// The pass: see the module docs.
    pub(super) fn run_evictions(&mut self) {
        let cfg = self.world.config.preemption;
        if !cfg.reclaim && !cfg.preempt {
            return;
        }
        // Victims under a limited queue free its limit too.
        let waiting = self.pending_where(|r| {
            r.is_lack_of_room() || matches!(r, PendingReason::QueueAtLimit { .. })
        });
        // Jobs whose binds a plan takes back get their own turn in a later
        // round of the same cycle: what they could reclaim now, the next
        // cycle would. Rounds are few: a taken-back job cannot take back
        // from the one that took from it (reclaim leaves the taker within
        // its fair share; preemption needs strictly higher priority).
        let mut round = waiting;
        let mut fresh_only: BTreeSet<usize> = BTreeSet::new();
        for _ in 0..EVICTION_ROUNDS {
            if round.is_empty() {
                break;
            }
            let refused = self.eviction_round(&round, &fresh_only);
            // A nominated preemptor that lost its bind evicts no running pod
            // again in the same cycle (its victims are gone already), but it
            // may take back binds of this cycle, which cost nothing: else
            // the next cycle would preempt what this one bound meanwhile.
            // Also again: gangs that found nothing in a leaf where this round
            // bound or took back pods (the room there changed), and every
            // gang that found nothing when this round left a queue on the
            // path of a changed leaf above its fair share (new victims for
            // every other queue's reclaim: the next cycle would find them).
            let changed: BTreeSet<QueueId> = std::mem::take(&mut self.outcome.changed_leaves);
            let above_fair = changed.iter().any(|&leaf| {
                self.world.tree.ancestors(leaf).any(|q| {
                    self.ledger.alloc[q.0]
                        .iter()
                        .any(|(r, v)| v > self.world.fair[q.0].get(&r))
                })
            });
            let yielded: BTreeSet<usize> = std::mem::take(&mut self.outcome.yielded)
                .into_iter()
                .filter(|j| {
                    matches!(
                        self.outcome.pending.get(j),
                        Some(PendingReason::Yielded { .. })
                    )
                })
                .collect();
            // For the rest of the cycle.
            fresh_only.extend(yielded.iter().copied().filter(|&j| self.world.nominated[j]));
            round = yielded
                .into_iter()
                .chain(
                    refused
                        .into_iter()
                        .filter(|j| above_fair || changed.contains(&self.ledger.jobs[*j].leaf)),
                )
                .collect();
        }
    }

    /// Whether the nominated pending tasks of job `j` that hold no room
    /// yet fit their nominated nodes once the terminating pods there are
    /// gone: per node, its free capacity plus what those pods hold covers
    /// what the tasks ask.
    fn room_once_victims_go(&self, j: usize) -> bool {
        let job = self.ledger.jobs[j].job;
        let held: BTreeSet<usize> = self.ledger.reserved[j].iter().map(|(t, _, _)| *t).collect();
        let mut need: std::collections::BTreeMap<usize, Resources> = Default::default();
        for &t in &self.ledger.jobs[j].pending {
            let task = &job.tasks[t];
            let Some(nom) = &task.nomination else {
                continue;
            };
            if held.contains(&t) {
                continue;
            }
            let Ok(n) = self
                .world
                .nodes
                .binary_search_by(|node| node.name.as_str().cmp(nom.node.as_str()))
            else {
                return false;
            };
            need.entry(n)
                .or_insert_with(Resources::zero)
                .add(&task.requests);
        }
        need.iter().all(|(&n, asked)| {
            let name = self.world.nodes[n].name.as_str();
            let mut room = self.ledger.state.nodes()[n].free.clone();
            for t in self.ledger.jobs.iter().flat_map(|jw| jw.job.tasks.iter()) {
                if t.terminating
                    && matches!(&t.state, TaskState::Bound { node, .. } if node.as_str() == name)
                {
                    room.add(&t.requests);
                }
            }
            asked.fits_in(&room)
        })
    }

    /// One walk of the eviction pass over the gangs `round`; returns those
    /// that found no victims.
    fn eviction_round(
        &mut self,
        round: &BTreeSet<usize>,
        fresh_only: &BTreeSet<usize>,
    ) -> Vec<usize> {
        let mut refused_jobs = Vec::new();
        // Candidate victims: jobs with bound pods (bound before this cycle,
        // or by it).
        self.ledger.running = (0..self.ledger.jobs.len())
            .filter(|&v| {
                !self.ledger.bound_at[v].is_empty()
                    && self.ledger.jobs[v].job.preemptible
                    && !self.ledger.moved.contains(&v)
            })
            .collect();
        let mut walk = self.ledger.build_walk(
            &self.world,
            |jw| round.contains(&jw.index),
            super::minimum_ask,
        );
        let mut failed: HashMap<FailedSearch, (usize, String)> = HashMap::new();
        while let Some(leaf) = self.ledger.pick_leaf(&self.world, &mut walk) {
            let Some(j) = self.world.pop_job(leaf, &mut walk) else {
                break;
            };
            let second_turn = fresh_only.contains(&j);
            if self.world.nominated[j] && !second_turn {
                let job = self.ledger.jobs[j].job;
                let nodes: BTreeSet<String> = job
                    .tasks
                    .iter()
                    .filter_map(|t| t.nomination.as_ref().map(|n| n.node.clone()))
                    .collect();
                let victims = self
                    .ledger.jobs
                    .iter()
                    .flat_map(|jw| jw.job.tasks.iter())
                    .filter(|t| {
                        t.terminating
                            && matches!(&t.state, TaskState::Bound { node, .. } if nodes.contains(node))
                    })
                    .count() as u32;
                // While its victims terminate it waits, if their going
                // makes the room it was nominated for. Otherwise (a victim
                // the Eviction API refused, or a job of higher priority in
                // its queue took the room) it is an ordinary pending gang
                // now, not after the victims are gone.
                if victims > 0 && self.room_once_victims_go(j) {
                    self.outcome.pending.insert(
                        j,
                        PendingReason::WaitingForVictims {
                            victims,
                            nodes: nodes.into_iter().collect(),
                        },
                    );
                    continue;
                }
            }
            // A gang still inside its preemption delay evicts nobody (an
            // autoscaler may add the room first); not cached as a failed
            // search, which would speak for gangs that waited long enough.
            if let Some(refused) = self
                .world
                .preemption_delay_left(self.ledger.jobs[j].job, self.ledger.jobs[j].leaf)
            {
                if let Some(min) = self.minimum_of(j) {
                    self.explain_in_quota(j, refused, &min);
                }
                refused_jobs.push(j);
                continue;
            }
            // A gang of the same shape, leaf and priority that already
            // found no victims this round, with no more pods, says the same
            // for this one (more pods need more room, and a larger gang is
            // allowed no more victims).
            // The gang minimum, chosen once for everything below.
            let Some(min) = self.minimum_of(j) else {
                continue;
            };
            // A second turn searches fewer victims: it neither speaks for
            // other gangs nor is spoken for.
            let key = if second_turn {
                None
            } else {
                self.ledger.failed_search_key(&self.world, j, &min)
            };
            if let Some((k, n)) = &key
                && let Some((m, why)) = failed.get(k)
                && n >= m
            {
                let why = why.clone();
                self.explain_in_quota(j, why, &min);
                refused_jobs.push(j);
                continue;
            }
            // Its own reservation's nodes are its to use (lifted for good
            // when a plan applies); the caches are not kept meanwhile.
            let lifted = self.ledger.state.begin();
            let holding = self.ledger.has_hold(j);
            self.ledger.release_holds(&self.world, j);
            self.ledger.holds_lifted = holding;
            // Room reclaims of this cycle freed is not for a gang that
            // would end above its fair share (`allocate/reclaimed.rs`).
            let hidden = if !self.ledger.reclaimed.is_empty()
                && self
                    .ledger
                    .above_fair_with(&self.world, self.ledger.jobs[j].leaf, &min.1)
            {
                self.ledger.hide_reclaimed(&self.world)
            } else {
                Vec::new()
            };
            if !hidden.is_empty() {
                self.memo.room_seen.clear();
                self.memo.copies_seen.clear();
            }
            self.ledger.fresh_only = second_turn;
            let found = if self.ledger.jobs[j].job.preempts {
                self.find_victims(j, &min)
            } else {
                Err("its PriorityClass says preemptionPolicy: Never".into())
            };
            self.ledger.holds_lifted = false;
            match found {
                Ok(plan) => {
                    if self.apply_plan(j, plan) {
                        self.ledger.holds.retain(|h| h.job != j);
                        self.ledger.give_back(&self.world, hidden);
                    } else {
                        // Gives back the withheld devices too.
                        self.ledger.state.rollback(lifted);
                    }
                    walk.changed();
                    failed.clear();
                    self.memo.room_seen.clear();
                    self.memo.copies_seen.clear();
                }
                Err(refused) => {
                    if !hidden.is_empty() {
                        self.memo.room_seen.clear();
                        self.memo.copies_seen.clear();
                    }
                    self.ledger.state.rollback(lifted);
                    refused_jobs.push(j);
                    if let Some((k, n)) = key {
                        let e = failed.entry(k).or_insert((n, refused.clone()));
                        if n < e.0 {
                            *e = (n, refused.clone());
                        }
                    }
                    self.explain_in_quota(j, refused, &min)
                }
            }
            self.ledger.fresh_only = false;
        }
        refused_jobs
    }

    /// For a gang the refill did not place while reclaimed room was kept
    /// from it: the reason, when it would fit with that room.
    fn kept_room_reason(&mut self, j: usize) -> Option<PendingReason> {
        let min = self.minimum_of(j)?;
        let leaf = self.ledger.jobs[j].leaf;
        let (q, resource, with_gang, fair_share) =
            self.ledger.first_above_fair(&self.world, leaf, &min.1)?;
        self.fits_now(j, &min)
            .then(|| PendingReason::ReclaimedRoomKept {
                queue: self.world.tree.path(q).to_string(),
                resource,
                with_gang,
                fair_share,
            })
    }

    /// Whether gang `j`'s minimum `min` fits as the state is now (tried,
    /// then rolled back).
    fn fits_now(&mut self, j: usize, (chosen, needs, topo_search): &Minimum) -> bool {
        let mark = self.ledger.state.begin();
        let fits = self
            .place_chosen_or(j, chosen, needs, *topo_search, false)
            .is_ok();
        self.ledger.state.rollback(mark);
        fits
    }

    /// Whether a pending gang of leaf `leaf` would fit its minimum within
    /// the fair shares of the queues on its path: after a reclaim from
    /// `leaf`, room given to a queue above its share is what the next
    /// cycle would reclaim back for such a gang.
    fn could_take_back(&self, leaf: QueueId) -> bool {
        (0..self.ledger.jobs.len()).any(|v| {
            let jw = &self.ledger.jobs[v];
            jw.leaf == leaf
                && jw.blocked.is_none()
                && !jw.pending.is_empty()
                && !jw.minimum_holds()
                && self
                    .minimum_of(v)
                    .is_some_and(|min| !self.ledger.above_fair_with(&self.world, leaf, &min.1))
        })
    }

    /// The gang minimum of `j`, its needs, and whether it uses the topology search.
    pub(super) fn minimum_of(&self, j: usize) -> Option<Minimum> {
        let jw = &self.ledger.jobs[j];
        let job = jw.job;
        let held = self.ledger.held_tasks(j);
        let chosen =
            select_minimum(job, &jw.pending, &jw.bound_by_sub, jw.bound_total, &held).ok()?;
        if chosen.is_empty() {
            return None;
        }
        let mut needs = Resources::zero();
        for &t in &chosen {
            needs.add(&job.tasks[t].requests);
        }
        let constrained =
            !job.topology.is_empty() || job.subgroups.iter().any(|sg| !sg.topology.is_empty());
        let topo_search = self.world.topology_aware() && (chosen.len() > 1 || constrained);
        Some((chosen, needs, topo_search))
    }

    /// A gang within its queues' quotas that still has no room gets a
    /// reason saying so, with the free capacity and why reclaim did not
    /// make room: quota is guaranteed only where it can be placed.
    fn explain_in_quota(&mut self, j: usize, refused: String, min: &Minimum) {
        let detail = match self.outcome.pending.get(&j) {
            Some(r) if r.is_lack_of_room() => r.to_string(),
            _ => return,
        };
        let (chosen, needs, _) = min;
        let leaf = self.ledger.jobs[j].leaf;
        if !self
            .world
            .tree
            .ancestors(leaf)
            .all(|x| self.ledger.within_quota(&self.world, x, needs))
        {
            return;
        }
        // No candidate at all: say why (counted only here, where it shows).
        let refused = if refused.is_empty() {
            self.ledger.why_no_victims(&self.world, j, needs)
        } else {
            refused
        };
        // Free GPUs on the nodes the gang's first pod may use at all
        // (counted once per constraint set until a plan changes the room).
        let head = self.ledger.jobs[j].job.tasks[chosen[0]].constraints.clone();
        let key = self.memo.static_filter(&self.world, &head);
        let (free, largest, usable) = match self.memo.room_seen.get(&key) {
            Some(r) => *r,
            None => {
                let (mut free, mut largest, mut usable) = (0u64, 0u64, 0u32);
                if let Some(f) = self.memo.filters.get(&key) {
                    for &n in &f.feasible {
                        let st = &self.ledger.state.nodes()[n as usize];
                        usable += 1;
                        free += st.free.gpu;
                        largest = largest.max(st.free.gpu);
                    }
                }
                self.memo.room_seen.insert(key, (free, largest, usable));
                (free, largest, usable)
            }
        };
        if usable == 0 {
            // No node may ever take it (selectors, taints, models): the
            // first reason says so, and no reclaim could change that.
            return;
        }
        self.outcome.pending.insert(
            j,
            PendingReason::InQuotaNoRoom {
                needs: needs.gpu,
                pods: chosen.len() as u32,
                free,
                largest,
                usable,
                nodes: self.world.nodes.len() as u32,
                refused,
                detail,
            },
        );
    }

    /// A gang placed after the elastic pass: its pods above the minimum
    /// wait for the next cycle.
    fn note_elastic_left(&mut self, j: usize) {
        let left = self.ledger.jobs[j].pending.len() as u32;
        if left > 0 {
            self.outcome.pending.insert(
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
}

impl<'s> Ledger<'s> {
    /// Non-preemptible jobs run only within quota: GPUs always, other
    /// resources where the queue has a quota. Only what non-preemptible
    /// jobs hold counts against it (as in KAI-Scheduler): preemptible work
    /// in the queue can always be evicted to make room, so it never stands
    /// in the way, and evicting it never changes this check.
    pub(super) fn check_quota_for_non_preemptible(
        &self,
        w: &World<'_>,
        leaf: QueueId,
        needs: &Resources,
    ) -> Result<(), PendingReason> {
        for q in w.tree.ancestors(leaf) {
            let quota = &w.tree.spec(q).quota;
            for (r, want) in needs.iter() {
                if want == 0 || (r != ResourceName::Gpu && quota.get(&r) == 0) {
                    continue;
                }
                let used = self.alloc_np[q.0].get(&r);
                if used + want > quota.get(&r) {
                    return Err(PendingReason::NonPreemptibleOverQuota {
                        queue: w.tree.path(q).to_string(),
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

    /// Why no running job may be taken for gang `j`, counted by obstacle.
    pub(super) fn why_no_victims(&self, w: &World<'_>, j: usize, needs: &Resources) -> String {
        let cfg = w.config.preemption;
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
            } else if !cfg.reclaim || self.reclaim_allowed(w, jw.leaf, vw.leaf, needs).is_none() {
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

    /// Pending tasks of job `j` whose nominated room is held for them.
    pub(super) fn held_tasks(&self, j: usize) -> Vec<usize> {
        self.reserved[j].iter().map(|p| p.0).collect()
    }

    /// Gives back the capacity reserved for job `j`'s nominated tasks (it is
    /// being placed now), inside the caller's transaction. The list of whose
    /// room it was stays: a rollback takes the capacity back, and the room
    /// must still be `j`'s then. Once the placement is kept, the caller ends
    /// the reservations with [`Ledger::reservations_used`].
    pub(super) fn release_reservations(&mut self, w: &World<'_>, j: usize) {
        let job = self.jobs[j].job;
        for (t, n, slots) in &self.reserved[j] {
            let pod = w.pod_of(job, j, *t);
            self.state.give(*n, w.nodes[*n], &pod, slots);
        }
    }

    /// Job `j`'s released reservations are spent: its placement was kept.
    pub(super) fn reservations_used(&mut self, j: usize) {
        self.reserved[j].clear();
    }

    /// What decides a victim search for a gang of one pod shape without
    /// topology constraints, and its pod count; `None` for other gangs.
    pub(super) fn failed_search_key(
        &mut self,
        w: &World<'_>,
        j: usize,
        min: &Minimum,
    ) -> Option<(FailedSearch, usize)> {
        let chosen = &min.0;
        let job = self.jobs[j].job;
        let first = &job.tasks[chosen[0]];
        let constrained =
            !job.topology.is_empty() || job.subgroups.iter().any(|sg| !sg.topology.is_empty());
        if constrained
            || !super::one_shape(job, chosen)
            || w.nominated[j]
            || !self.reserved[j].is_empty()
            || self.has_hold(j)
        {
            return None;
        }
        let key = (
            self.jobs[j].leaf,
            w.constraint_id(&first.constraints),
            first.requests.clone(),
            (job.priority, job.preemptible, job.preempts),
            self.ends_of(j),
        );
        Some((key, chosen.len()))
    }
}

mod apply;
mod refill;
