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
//! plans, the refill), the reclaimed devices still free are taken by
//! stand-ins, given back after. Gangs within their shares, the reclaimer's
//! own side among them, use it as any free room. The next cycle it is free
//! room like any other.
//!
//! Whole devices only: a victim's share of a device, or a victim without
//! GPUs, leaves its room unmarked (GPUs are what gangs wait for). A
//! stand-in is one pod per node: while it is there, the node counts one
//! pod more (its pod limit) and one whole-GPU pod more (GPU Clustering's
//! tags) for the gang placed.

use super::*;
use trainyard_model::ResourceName;

/// A stand-in: node, GPUs it takes (milli-GPU), device slots.
pub(super) type StandIn = (usize, u64, Slots);

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

    /// Takes every whole device that a reclaim of this cycle freed and
    /// that is still free, by stand-ins; returns them for
    /// [`Ledger::give_back`]. Empty when there is none.
    pub(super) fn hide_reclaimed(&mut self, w: &World<'_>) -> Vec<StandIn> {
        let none = PlacementConstraints::default();
        // One stand-in per node, each device once (a slot reclaimed twice,
        // by a chain of reclaims, is listed twice).
        let mut free: BTreeMap<usize, std::collections::BTreeSet<usize>> = BTreeMap::new();
        for (n, slots) in &self.reclaimed {
            let state = &self.state.nodes()[*n];
            for &s in slots {
                if state.gpu_used.get(s) == Some(&0) {
                    free.entry(*n).or_default().insert(s);
                }
            }
        }
        let stand_ins: Vec<StandIn> = free
            .into_iter()
            .map(|(n, slots)| {
                let gpu = slots.len() as u64 * trainyard_model::resources::MILLI_PER_GPU;
                (n, gpu, slots.into_iter().collect())
            })
            .collect();
        for (n, gpu, slots) in &stand_ins {
            let req = Resources::new(0, 0, *gpu);
            let pod = stand_in(&req, slots.len(), &none);
            self.state.take(*n, w.nodes[*n], &pod, slots);
        }
        stand_ins
    }

    /// Gives back what [`Ledger::hide_reclaimed`] took.
    pub(super) fn give_back(&mut self, w: &World<'_>, stand_ins: Vec<StandIn>) {
        let none = PlacementConstraints::default();
        for (n, gpu, slots) in stand_ins {
            let req = Resources::new(0, 0, gpu);
            let pod = stand_in(&req, slots.len(), &none);
            self.state.give(n, w.nodes[n], &pod, &slots);
        }
    }
}

/// A pod of `devices` whole GPUs and nothing else that ends before any
/// reservation starts (so it leaves reservations' slack alone).
fn stand_in<'a>(req: &'a Resources, devices: usize, c: &'a PlacementConstraints) -> PodView<'a> {
    let mut pod = PodView::new(req, GpuAsk::Whole(devices as u32), c);
    pod.ends = i64::MIN;
    pod
}
