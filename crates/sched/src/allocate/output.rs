//! The end of a cycle: what it decided, made `Decisions`, with the
//! nominations it withdraws and the queue table.

use std::collections::{HashMap, HashSet};

use trainyard_model::{JobId, NodeName, QueueId, QueueTree, TaskKey, TaskState};

use super::Cycle;
use crate::decisions::{Bind, ClaimDecision};
use crate::decisions::{Decisions, PendingJob, PendingReason, QueueReport, Withdrawal};

impl Cycle<'_> {
    /// The nominations of pods still pending that the cycle does not keep
    /// ([`Withdrawal`]): a pod keeps its nomination when it is nominated
    /// again, when its job waits for its victims to go, while room is
    /// still held for it (the room it names was free, and no one took it),
    /// or while a pod on its nominated node is going (terminating, or
    /// evicted by this cycle), as kube-scheduler keeps a nomination while
    /// lower-priority pods terminate on its node. So a nomination is
    /// withdrawn when its room went to others and nothing there is going.
    fn withdrawals(&self) -> Vec<Withdrawal> {
        // Most cycles have no nominated pending pod: nothing to index then.
        let nominated: Vec<usize> = (0..self.ledger.jobs.len())
            .filter(|&j| {
                self.ledger.jobs[j]
                    .job
                    .tasks
                    .iter()
                    .any(|t| t.nomination.is_some() && t.is_pending())
            })
            .collect();
        if nominated.is_empty() {
            return Vec::new();
        }
        let kept: HashSet<(&str, &TaskKey)> = self
            .outcome
            .binds
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.outcome.dropped_binds.contains(i))
            .map(|(_, b)| (b.job.as_str(), &b.task))
            .chain(
                self.outcome
                    .nominations
                    .iter()
                    .map(|n| (n.job.as_str(), &n.task)),
            )
            .collect();
        let going: HashSet<&str> = self
            .ledger
            .jobs
            .iter()
            .flat_map(|jw| jw.job.tasks.iter())
            .filter(|t| t.terminating)
            .filter_map(|t| match &t.state {
                TaskState::Bound { node, .. } => Some(node.as_str()),
                _ => None,
            })
            .chain(self.outcome.evictions.iter().map(|e| e.node.0.as_str()))
            .collect();
        // A lapsed nomination holds nothing and waits for nothing: it is
        // withdrawn even while a pod on its node is going.
        let timeout = self.world.config.preemption.nomination_timeout_seconds;
        let mut out = Vec::new();
        for j in nominated {
            let job = self.ledger.jobs[j].job;
            if matches!(
                self.outcome.pending.get(&j),
                Some(PendingReason::WaitingForVictims { .. })
            ) {
                continue;
            }
            let held = self.ledger.held_tasks(j);
            for (t, task) in job.tasks.iter().enumerate() {
                if let Some(nom) = &task.nomination
                    && task.is_pending()
                    && !held.contains(&t)
                    && (self.world.now.secs_since(nom.since) >= timeout
                        || !going.contains(nom.node.as_str()))
                    && !kept.contains(&(job.id.as_str(), &task.key))
                {
                    out.push(Withdrawal {
                        job: JobId(job.id.clone()),
                        task: task.key.clone(),
                        node: NodeName(nom.node.clone()),
                    });
                }
            }
        }
        out
    }

    /// The claims this cycle's binds need: each node's fresh allocations
    /// given to the pods bound there (a pod's own claims by value: pods of
    /// one spec on one node are interchangeable), and claims allocated
    /// before that bound pods join.
    fn claim_decisions(&self, binds: &[(&Bind, Option<(usize, usize)>)]) -> Vec<ClaimDecision> {
        use trainyard_model::dra::ClaimNeed;
        if binds.is_empty() || self.ledger.state.nodes().iter().all(|s| s.dra.is_none()) {
            return Vec::new();
        }
        // Per node: which fresh entries are given out already.
        let mut given: HashMap<usize, Vec<bool>> = HashMap::new();
        let mut out: Vec<ClaimDecision> = Vec::with_capacity(binds.len());
        let mut at: HashMap<String, usize> = HashMap::new();
        let request: std::sync::Arc<str> = crate::dra::EXTENDED_REQUEST.into();
        let gpu = trainyard_model::ResourceName::Gpu.to_string();
        for &(b, origin) in binds {
            let Some((j, t)) = origin else {
                continue;
            };
            let task = &self.ledger.jobs[j].job.tasks[t];
            let Some((_, n, slots)) = self.ledger.bound_at[j].iter().find(|p| p.0 == t) else {
                continue;
            };
            let n = *n;
            let Some(dra) = self.ledger.state.nodes()[n].dra.as_ref() else {
                continue;
            };
            for (need, pc) in task.constraints.claims.iter().zip(&task.claims) {
                if let Some(&k) = at.get(&pc.claim) {
                    out[k].pods.push(b.task.clone());
                    continue;
                }
                let flags = given
                    .entry(n)
                    .or_insert_with(|| vec![false; dra.fresh.len()]);
                let fresh = dra.fresh.iter().enumerate().position(|(i, f)| {
                    !flags[i]
                        && match (&f.owner, need) {
                            (crate::dra::Owner::Own(a), ClaimNeed::Own(b)) => **a == **b,
                            (crate::dra::Owner::Shared(a), ClaimNeed::Shared(b)) => *a == *b,
                            _ => false,
                        }
                });
                let allocation = fresh.map(|i| {
                    flags[i] = true;
                    crate::dra::results(&dra.node.devices, &dra.fresh[i].picks)
                });
                at.insert(pc.claim.clone(), out.len());
                out.push(ClaimDecision {
                    claim: pc.claim.clone(),
                    node: b.node.clone(),
                    pods: vec![b.task.clone()],
                    allocation,
                    extended: Vec::new(),
                });
            }
            // The claim of the extended resources the node's devices serve
            // (KEP-5004), unless the pod has it already: GPUs by the slots
            // the pod was placed on, others by this cycle's allocations.
            if task
                .constraints
                .claims
                .iter()
                .any(|c| matches!(c, ClaimNeed::Extended(_)))
            {
                continue;
            }
            let mut devices = Vec::with_capacity(slots.len());
            let mut extended = Vec::new();
            // GPUs asked through the pod's own claims are in those claims.
            if dra.backs_gpu() && task.requests.gpu > 0 && task.constraints.claimed_gpus == 0 {
                devices.extend(slots.iter().filter_map(|&k| {
                    let d = *dra.node.gpu_slots.get(k)?;
                    crate::dra::device_result(&dra.node.devices, d as usize, &request)
                }));
                extended.push(gpu.clone());
            }
            for (resource, sel) in &dra.node.backed {
                let amount = crate::dra::extended_amount(&task.requests, resource);
                let Some(spec) = dra.world.extended.get(&(*sel, amount)) else {
                    continue;
                };
                let flags = given
                    .entry(n)
                    .or_insert_with(|| vec![false; dra.fresh.len()]);
                let Some(i) = dra.fresh.iter().enumerate().position(|(i, f)| {
                    !flags[i] && matches!(&f.owner, crate::dra::Owner::Own(a) if a == spec)
                }) else {
                    continue;
                };
                flags[i] = true;
                devices.extend(crate::dra::results(&dra.node.devices, &dra.fresh[i].picks));
                extended.push(resource.to_string());
            }
            if !extended.is_empty() {
                out.push(ClaimDecision {
                    claim: format!("{}-extended-resources", task.name),
                    node: b.node.clone(),
                    pods: vec![b.task.clone()],
                    allocation: Some(devices),
                    extended,
                });
            }
        }
        out
    }

    pub(super) fn finish(mut self) -> Decisions {
        let reservations = self.finish_reservations();
        let withdrawals = self.withdrawals();
        let mut origin: Vec<Option<(usize, usize)>> = vec![None; self.outcome.binds.len()];
        for (&jt, &pos) in &self.ledger.bind_index {
            if let Some(o) = origin.get_mut(pos) {
                *o = Some(jt);
            }
        }
        let kept: Vec<(&Bind, Option<(usize, usize)>)> = self
            .outcome
            .binds
            .iter()
            .zip(origin)
            .enumerate()
            .filter(|(i, _)| !self.outcome.dropped_binds.contains(i))
            .map(|(_, x)| x)
            .collect();
        let claims = self.claim_decisions(&kept);
        let binds: Vec<Bind> = std::mem::take(&mut self.outcome.binds)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !self.outcome.dropped_binds.contains(i))
            .map(|(_, b)| b)
            .collect();
        let notes = std::mem::take(&mut self.outcome.consolidation_notes);
        let pending = self
            .outcome
            .pending
            .into_iter()
            .map(|(j, reason)| {
                let jw = &self.ledger.jobs[j];
                let message = match notes.get(&j) {
                    // Unless reclaim or preemption made room after all.
                    Some(note)
                        if !matches!(
                            reason,
                            PendingReason::WaitingForVictims { .. }
                                | PendingReason::Consolidating { .. }
                        ) =>
                    {
                        format!("{reason}; {note}")
                    }
                    _ => reason.to_string(),
                };
                PendingJob {
                    job: JobId(jw.job.id.clone()),
                    queue: self.world.queue_label(jw),
                    queue_id: (jw.leaf != QueueTree::ROOT).then_some(jw.leaf),
                    message,
                    reason,
                }
            })
            .collect();
        let mut queues = Vec::new();
        let mut stack: Vec<(QueueId, u32)> = self
            .world
            .tree
            .children(QueueTree::ROOT)
            .iter()
            .rev()
            .map(|q| (*q, 0))
            .collect();
        while let Some((q, depth)) = stack.pop() {
            let spec = self.world.tree.spec(q);
            queues.push(QueueReport {
                id: q,
                name: self.world.tree.name(q).to_string(),
                queue: self.world.tree.path(q).to_string(),
                parent: spec.parent.clone(),
                depth,
                quota: spec.quota.clone(),
                limit: spec.limit.clone(),
                fair_share: self.world.fair[q.0].clone(),
                allocated: self.ledger.alloc[q.0].clone(),
                demand: self.world.demand[q.0].clone(),
            });
            stack.extend(
                self.world
                    .tree
                    .children(q)
                    .iter()
                    .rev()
                    .map(|c| (*c, depth + 1)),
            );
        }
        Decisions {
            claims,
            binds,
            placements: self.outcome.placements,
            evictions: self.outcome.evictions,
            nominations: self.outcome.nominations,
            moves: self.outcome.moves,
            withdrawals,
            reservations,
            pending,
            queues,
            warnings: self.outcome.warnings,
            stats: self.outcome.stats,
        }
    }
}
