//! Applying a victim plan: the victims leave their queues (binds of this
//! cycle are taken back, other pods evicted), and the preemptor is bound
//! at once or nominated onto the room they leave.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::{JobId, NodeName, QueueId, QueueTree, ResourceName, Resources};

use super::{Plan, Unit};
use crate::allocate::Cycle;
use crate::decisions::{Eviction, EvictionKind, NominationDecision, PendingReason};

impl Cycle<'_> {
    /// Commits a plan: victims leave, the preemptor is placed and nominated.
    pub(super) fn apply_plan(&mut self, j: usize, mut plan: Plan) -> bool {
        let Some((chosen, needs, topo_search)) = self.minimum_of(j) else {
            return false;
        };
        self.with_orphans(&mut plan);
        let mark = self.ledger.state.begin();
        let refs: Vec<&Unit> = plan.units.iter().collect();
        self.ledger.give_units(&self.world, &refs);
        let placed = match self.place_chosen(j, &chosen, &needs, topo_search) {
            Ok(p) => p,
            Err(_) => {
                // The search proved this fits; a different result means the
                // state changed under it, so do nothing rather than evict.
                self.ledger.state.rollback(mark);
                return false;
            }
        };
        // Room that evicted pods leave stays free for the rest of the pass,
        // so later preemptors can be nominated onto what is left of it; but
        // it is not free yet: whoever is placed there waits (nomination),
        // and the refill does not see it.
        let touches_releasing = placed.iter().any(|(_, n, _)| {
            self.ledger.releasing.iter().any(|(_, _, m, _)| m == n)
                || plan
                    .units
                    .iter()
                    .any(|u| !u.fresh && u.tasks.iter().any(|(_, m, _)| m == n))
        });
        // A second turn binds at once or not at all: not on a node where
        // pods are still leaving.
        if self.ledger.fresh_only && touches_releasing {
            self.ledger.state.rollback(mark);
            return false;
        }
        for u in plan.units.iter().filter(|u| !u.fresh) {
            for (t, n, slots) in &u.tasks {
                self.ledger.releasing.push((u.job, *t, *n, slots.clone()));
            }
        }
        let me = self.ledger.jobs[j].job;
        let my_leaf = self.ledger.jobs[j].leaf;
        let mut victims = 0u32;
        // Messages describe the queues before any of this plan's evictions.
        let mut messages: Vec<String> = Vec::with_capacity(plan.units.len());
        for u in &plan.units {
            let vw = &self.ledger.jobs[u.job];
            let vj = vw.job;
            let vleaf = vw.leaf;
            let message = match u.kind {
                EvictionKind::Reclaim => {
                    let b = u.over.unwrap_or(vleaf);
                    let above_fair = needs.iter().any(|(r, want)| {
                        want > 0 && self.ledger.alloc[b.0].get(&r) > self.world.fair[b.0].get(&r)
                    });
                    if !above_fair {
                        // Reclaimed under the in-quota rule (`reclaim_allowed`).
                        let r = ResourceName::Gpu;
                        let (a, quota) = (
                            self.ledger.alloc[b.0].get(&r),
                            self.world.tree.spec(b).quota.get(&r),
                        );
                        format!(
                            "reclaimed for {} ({}): {} above its quota ({r} {}, quota {}) and {} within its quota",
                            me.id,
                            self.world.tree.path(my_leaf),
                            self.world.tree.path(b),
                            r.format_amount(a),
                            r.format_amount(quota),
                            self.world.tree.path(my_leaf)
                        )
                    } else {
                        // The resource with the highest allocated / fair share.
                        let mut shown: Option<(ResourceName, u64, u64)> = None;
                        for (r, want) in needs.iter() {
                            if want == 0 {
                                continue;
                            }
                            let (a, f) =
                                (self.ledger.alloc[b.0].get(&r), self.world.fair[b.0].get(&r));
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
                            self.world.tree.path(my_leaf),
                            self.world.tree.path(b)
                        )
                    }
                }
                EvictionKind::Preempt => format!(
                    "preempted by {} (priority {} > {}) in queue {}",
                    me.id,
                    me.priority,
                    vj.priority,
                    self.world.tree.path(vleaf)
                ),
                // Consolidation applies its own plans (`consolidate.rs`).
                EvictionKind::Consolidate => format!("moved to make room for {}", me.id),
            };
            messages.push(if u.elastic {
                format!("{message}; elastic pod above minMember {}", vj.min_member)
            } else {
                message
            });
        }
        for (u, message) in plan.units.iter().zip(messages) {
            let vj = self.ledger.jobs[u.job].job;
            let vleaf = self.ledger.jobs[u.job].leaf;
            let mut yielded = false;
            for (t, n, _) in &u.tasks {
                if self.ledger.fresh.remove(&(u.job, *t)) {
                    // Bound by this cycle: the bind is simply not made.
                    if let Some(i) = self.ledger.bind_index.remove(&(u.job, *t)) {
                        self.outcome.dropped_binds.insert(i);
                    }
                    self.outcome.stats.pods_bound = self.outcome.stats.pods_bound.saturating_sub(1);
                    self.ledger.jobs[u.job].pending.push(*t);
                    yielded = true;
                    continue;
                }
                self.outcome.evictions.push(Eviction {
                    job: JobId(vj.id.clone()),
                    task: vj.tasks[*t].key.clone(),
                    node: NodeName(self.world.nodes[*n].name.clone()),
                    kind: u.kind,
                    preemptor: JobId(me.id.clone()),
                    message: message.clone(),
                });
                victims += 1;
            }
            if yielded {
                self.outcome.changed_leaves.insert(vleaf);
                self.outcome.stats.gangs_placed = self
                    .outcome
                    .stats
                    .gangs_placed
                    .saturating_sub(u32::from(!u.elastic));
                // Back in placement order (rank, then name), as `new` made it.
                let vjob = self.ledger.jobs[u.job].job;
                self.ledger.jobs[u.job].pending.sort_by(|&a, &b| {
                    let (ta, tb) = (&vjob.tasks[a], &vjob.tasks[b]);
                    (ta.rank.is_none(), ta.rank, &ta.name).cmp(&(
                        tb.rank.is_none(),
                        tb.rank,
                        &tb.name,
                    ))
                });
                self.outcome.yields += 1;
                self.outcome.yielded.push(u.job);
                if !u.elastic {
                    self.outcome.placements.retain(|p| p.job != vj.id);
                }
                self.outcome.pending.insert(
                    u.job,
                    PendingReason::Yielded {
                        preemptor: me.id.clone(),
                        message: message.clone(),
                    },
                );
            }
            // The victim's capacity leaves its queues now.
            for q in self.world.tree.ancestors(vleaf) {
                self.ledger.alloc[q.0].saturating_sub(&u.freed);
            }
            self.ledger.alloc[QueueTree::ROOT.0].saturating_sub(&u.freed);
            let gone: BTreeSet<usize> = u.tasks.iter().map(|p| p.0).collect();
            let vw = &mut self.ledger.jobs[u.job];
            vw.bound_total = vw.bound_total.saturating_sub(gone.len() as u32);
            self.ledger.bound_at[u.job].retain(|p| !gone.contains(&p.0));
        }
        // Room a reclaim freed that its victims' queues could take back
        // within their fair shares (`allocate/reclaimed.rs`).
        let mut back: BTreeMap<QueueId, bool> = BTreeMap::new();
        for u in plan
            .units
            .iter()
            .filter(|u| u.kind == EvictionKind::Reclaim)
        {
            let vleaf = self.ledger.jobs[u.job].leaf;
            let could = match back.get(&vleaf) {
                Some(&c) => c,
                None => {
                    let c = self.could_take_back(vleaf);
                    back.insert(vleaf, c);
                    c
                }
            };
            if could {
                let job = self.ledger.jobs[u.job].job;
                for (t, n, slots) in &u.tasks {
                    // Whole devices only: a share leaves the rest of its
                    // device to others.
                    let task = &job.tasks[*t];
                    if matches!(
                        crate::state::GpuAsk::of(&task.requests, &task.constraints),
                        Ok(crate::state::GpuAsk::Whole(_))
                    ) {
                        self.ledger.reclaimed.push((*n, slots.clone()));
                    }
                }
            }
        }
        if victims == 0 && !touches_releasing {
            // Only binds of this cycle made room: the gang binds now.
            let bound = self.ledger.jobs[j].bound_total as usize;
            if placed.len() + bound > 1
                && let Some(gp) = self.ledger.gang_placement(&self.world, j, &placed, None)
            {
                self.outcome.placements.push(gp);
            }
            self.outcome.stats.gangs_placed += 1;
            self.outcome.changed_leaves.insert(my_leaf);
            self.record(j, placed);
            self.outcome.pending.remove(&j);
            self.note_elastic_left(j);
            self.outcome.yields += 1;
            return true;
        }
        // The preemptor's room is held for it for the rest of the cycle and
        // counted for its queue; it binds once the victims are gone.
        self.ledger
            .charge(&self.world, my_leaf, &needs, !me.preemptible);
        let mut nodes: BTreeSet<String> = BTreeSet::new();
        for (t, n, slots) in &placed {
            let node = self.world.nodes[*n];
            nodes.insert(node.name.clone());
            self.outcome.nominations.push(NominationDecision {
                job: JobId(me.id.clone()),
                task: me.tasks[*t].key.clone(),
                node: NodeName(node.name.clone()),
                gpus: slots.iter().map(|&s| node.gpus[s].index).collect(),
            });
        }
        self.outcome.stats.evictions += victims;
        // Nominated onto room earlier plans freed, without victims of its
        // own: it waits for the pods leaving its nodes.
        let waits_for = if victims > 0 {
            victims
        } else {
            let ns: BTreeSet<usize> = placed.iter().map(|(_, n, _)| *n).collect();
            self.ledger
                .releasing
                .iter()
                .filter(|(_, _, n, _)| ns.contains(n))
                .count() as u32
        };
        self.outcome.pending.insert(
            j,
            PendingReason::WaitingForVictims {
                victims: waits_for,
                nodes: nodes.into_iter().collect(),
            },
        );
        true
    }

    /// A plan that takes back the minimum of a job this cycle bound takes
    /// back the rest of its binds too (its pods above the minimum, units
    /// of their own): alone they would be a partial gang. The room they
    /// leave only adds to what the plan proved enough.
    fn with_orphans(&mut self, plan: &mut Plan) {
        let mut extra = Vec::new();
        for u in plan.units.iter().filter(|u| u.fresh && !u.elastic) {
            let v = u.job;
            let rest: crate::allocate::PlacedList = self.ledger.bound_at[v]
                .iter()
                .filter(|(t, _, _)| {
                    self.ledger.fresh.contains(&(v, *t))
                        && !plan
                            .units
                            .iter()
                            .any(|p| p.job == v && p.tasks.iter().any(|(pt, _, _)| pt == t))
                })
                .cloned()
                .collect();
            if rest.is_empty() {
                continue;
            }
            let vj = self.ledger.jobs[v].job;
            let mut freed = Resources::zero();
            for (t, _, _) in &rest {
                freed.add(&vj.tasks[*t].requests);
            }
            extra.push(Unit {
                job: v,
                tasks: rest,
                kind: u.kind,
                elastic: true,
                priority: u.priority,
                started: self.world.now.0,
                freed,
                over: u.over,
                fresh: true,
            });
        }
        plan.units.extend(extra);
    }
}
