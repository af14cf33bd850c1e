//! Who may be evicted for whom: the queue path, minimum runtimes, the
//! reclaim rule between two leaves, quotas and limits as they would be
//! after victims leave, and the cost of a victim (work lost). These read
//! only the cycle's world and ledger, so they are theirs and take what
//! they read explicitly.

use super::evict::Unit;
use super::*;
use crate::decisions::EvictionKind;
use trainyard_model::ResourceName;

impl World<'_> {
    /// Minimum runtime of a leaf queue, inherited from the nearest ancestor.
    pub(super) fn min_runtime(&self, leaf: QueueId) -> Option<u64> {
        self.tree
            .ancestors(leaf)
            .find_map(|q| self.tree.spec(q).min_runtime_seconds)
    }

    /// Why `job` (of leaf queue `leaf`) may not evict yet: it has waited
    /// less than its preemption delay (its own, else its queue's inherited
    /// from the nearest ancestor, else the config's).
    pub(super) fn preemption_delay_left(&self, job: &Job, leaf: QueueId) -> Option<String> {
        let delay = job
            .preemption_delay_seconds
            .or_else(|| {
                self.tree
                    .ancestors(leaf)
                    .find_map(|q| self.tree.spec(q).preemption_delay_seconds)
            })
            .unwrap_or(self.config.preemption.delay_seconds);
        let waited = self.now.secs_since(job.submit_time);
        (waited < delay).then(|| {
            format!("it evicts nobody before it has waited {delay} s (preemption delay), {waited} s so far")
        })
    }

    /// Path from `leaf` up to (excluding) the root, leaf first.
    pub(super) fn path(&self, leaf: QueueId) -> Vec<QueueId> {
        self.tree.ancestors(leaf).collect()
    }

    /// Work a unit loses, in pod-seconds (0 when its start is unknown).
    pub(super) fn lost_work(&self, u: &Unit) -> u64 {
        if u.started == i64::MIN {
            return 0;
        }
        (self.now.0.saturating_sub(u.started).max(0) as u64 / 1000) * u.tasks.len() as u64
    }
}

impl<'s> Ledger<'s> {
    /// Reclaim check between the preemptor's leaf `q` and a victim leaf
    /// `v`: `Some(B)` when allowed, B being the victim side's child of the
    /// lowest common ancestor.
    pub(super) fn reclaim_allowed(
        &self,
        w: &World<'_>,
        q: QueueId,
        v: QueueId,
        needs: &Resources,
    ) -> Option<QueueId> {
        let pq = w.path(q);
        let pv = w.path(v);
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
                if want > 0 && self.alloc[x.0].get(&r) + want > w.fair[x.0].get(&r) {
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
            .any(|(r, want)| want > 0 && self.alloc[b.0].get(&r) > w.fair[b.0].get(&r));
        let lent = || {
            side_q.iter().all(|x| self.within_quota(w, *x, needs))
                && needs.iter().any(|(r, want)| {
                    let floor = w.tree.spec(b).quota.get(&r).min(w.fair[b.0].get(&r));
                    want > 0 && self.alloc[b.0].get(&r) > floor
                })
        };
        (over || lent()).then_some(b)
    }

    /// Whether queue `x` stays within its quota with `needs` added: on GPUs
    /// (which the gang must ask for) and on every resource `x` has a quota
    /// for.
    pub(super) fn within_quota(&self, w: &World<'_>, x: QueueId, needs: &Resources) -> bool {
        let quota = &w.tree.spec(x).quota;
        needs.gpu > 0
            && needs.iter().all(|(r, want)| {
                let q = quota.get(&r);
                want == 0
                    || (r != ResourceName::Gpu && q == 0)
                    || self.alloc[x.0].get(&r) + want <= q
            })
    }

    /// The position of the last unit of `set` that takes its queue side
    /// below `min(quota, demand)`, if any.
    pub(super) fn first_floor_breaker(&self, w: &World<'_>, set: &[&Unit]) -> Option<usize> {
        let mut freed: BTreeMap<usize, Resources> = BTreeMap::new();
        let mut breaker = None;
        for (i, u) in set.iter().enumerate() {
            if !self.quota_kept(w, &freed, u) {
                breaker = Some(i);
            }
            for q in w.tree.ancestors(self.jobs[u.job].leaf) {
                freed
                    .entry(q.0)
                    .or_insert_with(Resources::zero)
                    .add(&u.freed);
            }
        }
        breaker
    }

    /// Whether the victim side keeps `min(quota, demand)` with `extra` freed too.
    pub(super) fn quota_kept(
        &self,
        w: &World<'_>,
        freed: &BTreeMap<usize, Resources>,
        unit: &Unit,
    ) -> bool {
        if unit.kind == EvictionKind::Preempt {
            return true;
        }
        let leaf = self.jobs[unit.job].leaf;
        for q in w.tree.ancestors(leaf) {
            let spec = w.tree.spec(q);
            let mut out = freed.get(&q.0).cloned().unwrap_or_else(Resources::zero);
            out.add(&unit.freed);
            for (r, gone) in out.iter() {
                // The quota, as far as the fair share honours it (it is
                // below the quota only where demand is, or where quotas
                // add up to more than the cluster).
                let floor = spec.quota.get(&r).min(w.fair[q.0].get(&r));
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
    pub(super) fn limits_freed(&self, w: &World<'_>, units: &[&Unit]) -> bool {
        self.victim_need.iter().all(|(q, r, need)| {
            let freed: u64 = units
                .iter()
                .filter(|u| w.tree.ancestors(self.jobs[u.job].leaf).any(|a| a == *q))
                .map(|u| u.freed.get(r))
                .sum();
            freed >= *need
        })
    }
}
