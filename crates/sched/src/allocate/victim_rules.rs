//! Who may be evicted for whom: the queue path, minimum runtimes, the
//! reclaim rule between two leaves, quotas and limits as they would be
//! after victims leave, and the cost of a victim (work lost).

use super::evict::Unit;
use super::*;
use crate::decisions::EvictionKind;
use trainyard_model::ResourceName;

impl<'s> Cycle<'s> {
    /// Minimum runtime of a leaf queue, inherited from the nearest ancestor.
    pub(super) fn min_runtime(&self, leaf: QueueId) -> Option<u64> {
        self.world
            .tree
            .ancestors(leaf)
            .find_map(|q| self.world.tree.spec(q).min_runtime_seconds)
    }

    /// Path from `leaf` up to (excluding) the root, leaf first.
    pub(super) fn path(&self, leaf: QueueId) -> Vec<QueueId> {
        self.world.tree.ancestors(leaf).collect()
    }

    /// Reclaim check between the preemptor's leaf `q` and a victim leaf
    /// `v`: `Some(B)` when allowed, B being the victim side's child of the
    /// lowest common ancestor.
    pub(super) fn reclaim_allowed(
        &self,
        q: QueueId,
        v: QueueId,
        needs: &Resources,
    ) -> Option<QueueId> {
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
                if want > 0 && self.ledger.alloc[x.0].get(&r) + want > self.world.fair[x.0].get(&r)
                {
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
        let over = needs.iter().any(|(r, want)| {
            want > 0 && self.ledger.alloc[b.0].get(&r) > self.world.fair[b.0].get(&r)
        });
        let lent = || {
            side_q.iter().all(|x| self.within_quota(*x, needs))
                && needs.iter().any(|(r, want)| {
                    let floor = self
                        .world
                        .tree
                        .spec(b)
                        .quota
                        .get(&r)
                        .min(self.world.fair[b.0].get(&r));
                    want > 0 && self.ledger.alloc[b.0].get(&r) > floor
                })
        };
        (over || lent()).then_some(b)
    }

    /// Whether queue `x` stays within its quota with `needs` added: on GPUs
    /// (which the gang must ask for) and on every resource `x` has a quota
    /// for.
    pub(super) fn within_quota(&self, x: QueueId, needs: &Resources) -> bool {
        let quota = &self.world.tree.spec(x).quota;
        needs.gpu > 0
            && needs.iter().all(|(r, want)| {
                let q = quota.get(&r);
                want == 0
                    || (r != ResourceName::Gpu && q == 0)
                    || self.ledger.alloc[x.0].get(&r) + want <= q
            })
    }

    /// Work a unit loses, in pod-seconds (0 when its start is unknown).
    pub(super) fn lost_work(&self, u: &Unit) -> u64 {
        if u.started == i64::MIN {
            return 0;
        }
        (self.world.now.0.saturating_sub(u.started).max(0) as u64 / 1000) * u.tasks.len() as u64
    }

    /// The position of the last unit of `set` that takes its queue side
    /// below `min(quota, demand)`, if any.
    pub(super) fn first_floor_breaker(&self, set: &[&Unit]) -> Option<usize> {
        let mut freed: BTreeMap<usize, Resources> = BTreeMap::new();
        let mut breaker = None;
        for (i, u) in set.iter().enumerate() {
            if !self.quota_kept(&freed, u) {
                breaker = Some(i);
            }
            for q in self.world.tree.ancestors(self.ledger.jobs[u.job].leaf) {
                freed
                    .entry(q.0)
                    .or_insert_with(Resources::zero)
                    .add(&u.freed);
            }
        }
        breaker
    }

    /// Whether the victim side keeps `min(quota, demand)` with `extra` freed too.
    pub(super) fn quota_kept(&self, freed: &BTreeMap<usize, Resources>, unit: &Unit) -> bool {
        if unit.kind == EvictionKind::Preempt {
            return true;
        }
        let leaf = self.ledger.jobs[unit.job].leaf;
        for q in self.world.tree.ancestors(leaf) {
            let spec = self.world.tree.spec(q);
            let mut out = freed.get(&q.0).cloned().unwrap_or_else(Resources::zero);
            out.add(&unit.freed);
            for (r, gone) in out.iter() {
                // The quota, as far as the fair share honours it (it is
                // below the quota only where demand is, or where quotas
                // add up to more than the cluster).
                let floor = spec.quota.get(&r).min(self.world.fair[q.0].get(&r));
                if gone > 0 && self.ledger.alloc[q.0].get(&r).saturating_sub(gone) < floor {
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
    pub(super) fn limits_freed(&self, units: &[&Unit]) -> bool {
        self.ledger.victim_need.iter().all(|(q, r, need)| {
            let freed: u64 = units
                .iter()
                .filter(|u| {
                    self.world
                        .tree
                        .ancestors(self.ledger.jobs[u.job].leaf)
                        .any(|a| a == *q)
                })
                .map(|u| u.freed.get(r))
                .sum();
            freed >= *need
        })
    }
}
