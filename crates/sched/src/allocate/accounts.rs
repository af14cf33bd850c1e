//! The cycle's accounting: which constraint set a task has, and what its
//! queue holds: charges, refunds, and the limit checks against them. Kept
//! on `World` (read-only) and `Ledger` (given the world), so each says
//! what it reads and what it changes.

use super::*;

impl World<'_> {
    /// Dense id of a constraint set (interned by value in `new`).
    pub(super) fn constraint_id(&self, c: &Arc<PlacementConstraints>) -> u32 {
        // Every task's constraints were interned in `new`.
        self.constraint_ids
            .get(&(Arc::as_ptr(c) as usize))
            .copied()
            .unwrap_or(u32::MAX)
    }
}

impl<'s> Ledger<'s> {
    /// Fails with the first queue on the leaf's path that `extra` would take above its limit.
    pub(super) fn check_limits(
        &self,
        w: &World<'_>,
        leaf: QueueId,
        extra: &Resources,
    ) -> Result<(), PendingReason> {
        for q in w.tree.ancestors(leaf) {
            let limit = &w.tree.spec(q).limit;
            if limit.is_unlimited() {
                continue;
            }
            let mut after = self.alloc[q.0].clone();
            after.add(extra);
            if let Some((resource, cap)) = limit.first_exceeded(&after) {
                return Err(PendingReason::QueueAtLimit {
                    queue: w.tree.path(q).to_string(),
                    used: self.alloc[q.0].get(&resource),
                    requested: extra.get(&resource),
                    resource,
                    limit: cap,
                });
            }
        }
        Ok(())
    }

    /// How many more copies of `req` the queues on the path allow.
    pub(super) fn limit_headroom(&self, w: &World<'_>, leaf: QueueId, req: &Resources) -> usize {
        let mut n = usize::MAX;
        for q in w.tree.ancestors(leaf) {
            for (r, cap) in w.tree.spec(q).limit.iter() {
                let left = cap.saturating_sub(self.alloc[q.0].get(r));
                if let Some(k) = left.checked_div(req.get(r)) {
                    n = n.min(k as usize);
                }
            }
        }
        n
    }

    /// Adds `add` to the allocation of `leaf` and every queue above it.
    pub(super) fn charge(
        &mut self,
        w: &World<'_>,
        leaf: QueueId,
        add: &Resources,
        non_preemptible: bool,
    ) {
        for q in w.tree.ancestors(leaf) {
            self.alloc[q.0].add(add);
            if non_preemptible {
                self.alloc_np[q.0].add(add);
            }
        }
        self.alloc[QueueTree::ROOT.0].add(add);
        if non_preemptible {
            self.alloc_np[QueueTree::ROOT.0].add(add);
        }
    }

    /// Removes `freed` from the allocation of `leaf` and every queue above.
    pub(super) fn uncharge(&mut self, w: &World<'_>, leaf: QueueId, freed: &Resources) {
        for q in w.tree.ancestors(leaf) {
            self.alloc[q.0].saturating_sub(freed);
        }
        self.alloc[QueueTree::ROOT.0].saturating_sub(freed);
    }
}
