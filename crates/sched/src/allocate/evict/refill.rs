//! The refill: after the eviction pass took back binds of this cycle,
//! the room they leave is offered once more to gangs still pending.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::QueueId;

use crate::allocate::Cycle;
use crate::decisions::PendingReason;

impl Cycle<'_> {
    /// After binds of this cycle were taken back, the room they leave
    /// (beyond what the preemptors took) is offered once more to gangs
    /// still pending for lack of room, in the usual walk order. No eviction
    /// follows: what binds here is what a later pass would have bound.
    pub(in crate::allocate) fn run_refill(&mut self) {
        if self.outcome.yields == 0 {
            return;
        }
        // Capacity grew: failures of this cycle no longer predict others.
        self.memo.failed_shapes.clear();
        // Evicted pods hold their room until they terminate.
        for (v, t, n, slots) in std::mem::take(&mut self.ledger.releasing) {
            let pod = self.world.pod_of(self.ledger.jobs[v].job, v, t);
            self.ledger.state.take(n, self.world.nodes[n], &pod, &slots);
        }
        // Not a running job whose elastic pod was taken back: the refill
        // places gang minimums only, and its reason says why it lost it.
        let retry: BTreeSet<usize> = self
            .pending_where(|r| r.is_lack_of_room() || matches!(r, PendingReason::Yielded { .. }))
            .into_iter()
            .filter(|&j| !self.ledger.jobs[j].minimum_holds())
            .collect();
        let mut walk = self.ledger.build_walk(
            &self.world,
            |jw| retry.contains(&jw.index),
            crate::allocate::minimum_ask,
        );
        // Per leaf, the highest-priority gang the kept room would have
        // fitted: gangs of lower priority in its leaf do not get that room
        // either, or the next cycle would preempt them for it.
        let mut kept_for: BTreeMap<QueueId, (i32, usize)> = BTreeMap::new();
        while let Some(leaf) = self.ledger.pick_leaf(&self.world, &mut walk) {
            let Some(j) = self.world.pop_job(leaf, &mut walk) else {
                break;
            };
            let (jleaf, priority) = (self.ledger.jobs[j].leaf, self.ledger.jobs[j].job.priority);
            // Room reclaims of this cycle freed is not for a gang that
            // would end above its fair share (`allocate/reclaimed.rs`).
            let above = !self.ledger.reclaimed.is_empty()
                && self
                    .minimum_of(j)
                    .is_some_and(|min| self.ledger.above_fair_with(&self.world, jleaf, &min.1));
            let behind = kept_for
                .get(&jleaf)
                .filter(|(p, k)| {
                    *p > priority
                        && self.world.config.preemption.preempt
                        // A minimum runtime would protect it next cycle.
                        && self.world.min_runtime(jleaf).is_none_or(|m| m == 0)
                        && self.ledger.jobs[j].job.preemptible
                        && self.ledger.jobs[*k].job.preempts
                })
                .map(|&(_, k)| k);
            let hidden = if above || behind.is_some() {
                self.ledger.hide_reclaimed(&self.world)
            } else {
                Vec::new()
            };
            if !hidden.is_empty() {
                self.memo.failed_shapes.clear();
            }
            let kept = !hidden.is_empty();
            let tried = self.try_gang(j);
            if kept {
                self.ledger.give_back(&self.world, hidden);
                self.memo.failed_shapes.clear();
            }
            match tried {
                Ok(()) => {
                    self.outcome.pending.remove(&j);
                    self.note_elastic_left(j);
                }
                // The obstacle now (a limit reached meanwhile, say), except
                // for a taken-back job, whose reason says why it lost its room.
                Err(reason) => {
                    // Only where room was missing: a limit reached or a
                    // topology rejection says so itself.
                    let reason = if kept && reason.is_lack_of_room() {
                        let kept_reason = if above {
                            self.kept_room_reason(j)
                        } else {
                            let fits = self.minimum_of(j).is_some_and(|min| self.fits_now(j, &min));
                            behind.filter(|_| fits).map(|k| {
                                PendingReason::ReclaimedRoomKeptForPriority {
                                    job: self.ledger.jobs[k].job.id.clone(),
                                    priority: self.ledger.jobs[k].job.priority,
                                    own_priority: priority,
                                }
                            })
                        };
                        // The walk pops a leaf's gangs highest priority
                        // first: the first kept is the one to keep.
                        if above && kept_reason.is_some() {
                            kept_for.entry(jleaf).or_insert((priority, j));
                        }
                        kept_reason.unwrap_or(reason)
                    } else {
                        reason
                    };
                    if !matches!(
                        self.outcome.pending.get(&j),
                        Some(PendingReason::Yielded { .. })
                    ) {
                        self.outcome.pending.insert(j, reason);
                    }
                }
            }
        }
    }
}
