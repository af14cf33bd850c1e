//! Room a reclaim freed that its reclaimer did not use.
//!
//! A reclaim evicts whole units (a gang's minimum, an elastic pod), so it
//! often frees more than its reclaimer takes. Given to a queue that ends
//! above its fair share, that rest is room taken from the victims' queues
//! beyond what the reclaim rule allows: the next cycle the victims' side,
//! now below its share, reclaims it back, and the two alternate (an
//! eviction loop of period two, docs/preemption.md). So for the rest of
//! the cycle, a gang that would leave a queue on its path above its fair
//! share does not see that room: while it is placed (the eviction pass's
//! plans, the refill), the reclaimed devices still free are withheld
//! (counted as used), and given back after. Gangs within their shares,
//! the reclaimer's own side among them, use it as any free room. The next
//! cycle it is free room like any other.
//!
//! Whole devices only: a victim's share of a device, or a victim without
//! GPUs, leaves its room unmarked (GPUs are what gangs wait for).
//! Withholding adds no pod: the node's pod count (its pod limit) and GPU
//! Clustering's tags stay those of the pods there.

use super::*;
use trainyard_model::ResourceName;

/// Devices withheld on a node: node, device slots.
pub(super) type Withheld = (usize, Vec<usize>);

impl Ledger<'_> {
    /// Whether adding `needs` to `leaf` would take a queue on its path
    /// above its fair share on a resource the gang asks for.
    pub(super) fn above_fair_with(&self, w: &World<'_>, leaf: QueueId, needs: &Resources) -> bool {
        self.first_above_fair(w, leaf, needs).is_some()
    }

    /// The first queue on `leaf`'s path (leaf first) that `needs` would
    /// take above its fair share, with the resource, what it would hold
    /// and its fair share.
    pub(super) fn first_above_fair(
        &self,
        w: &World<'_>,
        leaf: QueueId,
        needs: &Resources,
    ) -> Option<(QueueId, ResourceName, u64, u64)> {
        w.tree.ancestors(leaf).find_map(|q| {
            needs.iter().find_map(|(r, want)| {
                let (with, fair) = (self.alloc[q.0].get(&r) + want, w.fair[q.0].get(&r));
                (want > 0 && with > fair).then_some((q, r, with, fair))
            })
        })
    }

    /// Withholds every whole device that a reclaim of this cycle freed and
    /// that is still free; returns them for [`Ledger::give_back`]. Empty
    /// when there is none.
    pub(super) fn hide_reclaimed(&mut self, w: &World<'_>) -> Vec<Withheld> {
        // Per node, each device once (a slot reclaimed twice, by a chain
        // of reclaims, is listed twice).
        let mut by_node: BTreeMap<usize, std::collections::BTreeSet<usize>> = BTreeMap::new();
        for (n, slots) in &self.reclaimed {
            by_node.entry(*n).or_default().extend(slots.iter().copied());
        }
        by_node
            .into_iter()
            .filter_map(|(n, slots)| {
                let slots: Vec<usize> = slots.into_iter().collect();
                let taken = self.state.withhold(n, w.nodes[n], &slots);
                (!taken.is_empty()).then_some((n, taken))
            })
            .collect()
    }

    /// Gives back what [`Ledger::hide_reclaimed`] withheld.
    pub(super) fn give_back(&mut self, w: &World<'_>, withheld: Vec<Withheld>) {
        for (n, slots) in withheld {
            self.state.release(n, w.nodes[n], &slots);
        }
    }
}
