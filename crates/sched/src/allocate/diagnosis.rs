//! Why a pod fits on no node, kept up to date through the cycle.
//!
//! A failed gang is explained node by node (`Search::diagnose`): how many
//! nodes would take its failed pod, and why each other refuses. Jobs of
//! one pod shape that end at different times see held nodes differently
//! (`PodView::ends`) and everything else alike. So per (constraint set,
//! request) the cycle keeps each feasible node's verdict on capacity
//! alone, the counts over the nodes that are not held, and the held
//! nodes apart. A later diagnosis of the shape looks again only at the
//! nodes the state's change log names since the last one, then at the
//! held nodes with the job's end. The answer is the full scan's, exactly
//! (property test below).

use super::*;
use std::collections::BTreeSet;

/// One shape's verdicts (see the module docs).
pub(super) struct Diagnosis {
    /// How much of `ClusterState::changes` is reflected.
    seen: usize,
    /// Per node index: `None` when statically infeasible (counted in
    /// `StaticFilter::rejected`), else its verdict on capacity.
    verdict: Vec<Option<Result<(), FilterReason>>>,
    /// Over feasible nodes that are not held: how many fit, and the
    /// reasons of the others.
    fit: u32,
    reasons: BTreeMap<FilterReason, u32>,
    /// Feasible nodes that are held now, and the same as a mask.
    held: BTreeSet<u32>,
    is_held: Vec<bool>,
    /// Per node index: the look that last judged it (a node the log names
    /// twice is judged once).
    stamp: Vec<u32>,
    pass: u32,
}

impl Diagnosis {
    /// Every feasible node (`mask`) judged on `state` now.
    pub(super) fn new(
        state: &ClusterState,
        nodes: &[&Node],
        mask: &[bool],
        pod: &PodView<'_>,
    ) -> Self {
        let mut d = Diagnosis {
            seen: state.changes().len(),
            verdict: vec![None; mask.len()],
            fit: 0,
            reasons: BTreeMap::new(),
            held: BTreeSet::new(),
            is_held: vec![false; mask.len()],
            stamp: vec![0; mask.len()],
            pass: 0,
        };
        for (n, &feasible) in mask.iter().enumerate() {
            if feasible {
                d.judge(state, nodes, n, pod);
            }
        }
        d
    }

    /// Judges node `n` again (its old verdict taken out of the counts).
    fn judge(&mut self, state: &ClusterState, nodes: &[&Node], n: usize, pod: &PodView<'_>) {
        let Some(slot) = self.verdict.get_mut(n) else {
            return;
        };
        let was_held = std::mem::take(&mut self.is_held[n]);
        if was_held {
            self.held.remove(&(n as u32));
        }
        if let Some(old) = slot.take()
            && !was_held
        {
            match old {
                Ok(()) => self.fit -= 1,
                Err(r) => {
                    if let Some(c) = self.reasons.get_mut(&r) {
                        *c -= 1;
                        if *c == 0 {
                            self.reasons.remove(&r);
                        }
                    }
                }
            }
        }
        let ns = &state.nodes()[n];
        let v = ns.fit_capacity(nodes[n], pod);
        if ns.held_until == i64::MAX {
            match &v {
                Ok(()) => self.fit += 1,
                Err(r) => *self.reasons.entry(r.clone()).or_default() += 1,
            }
        } else {
            self.held.insert(n as u32);
            self.is_held[n] = true;
        }
        self.verdict[n] = Some(v);
    }

    /// How many feasible nodes take `pod` (with its end) and why the others
    /// refuse, after looking again at the nodes changed since the last
    /// call; `rejected` are the static filter's reasons, added in.
    pub(super) fn counts(
        &mut self,
        state: &ClusterState,
        nodes: &[&Node],
        pod: &PodView<'_>,
        rejected: &BTreeMap<FilterReason, u32>,
    ) -> (u32, BTreeMap<FilterReason, u32>) {
        let changes = state.changes();
        if self.seen < changes.len() {
            self.pass += 1;
            for &n in &changes[self.seen..] {
                let n = n as usize;
                if self.verdict.get(n).is_some_and(|v| v.is_some()) && self.stamp[n] != self.pass {
                    self.stamp[n] = self.pass;
                    self.judge(state, nodes, n, pod);
                }
            }
            self.seen = changes.len();
        }
        let mut fit = self.fit;
        let mut reasons = self.reasons.clone();
        for (r, c) in rejected {
            *reasons.entry(r.clone()).or_default() += c;
        }
        for &n in &self.held {
            let n = n as usize;
            let v = if state.nodes()[n].hold_allows(pod) {
                self.verdict[n].clone().unwrap_or(Ok(()))
            } else {
                Err(FilterReason::Reserved)
            };
            match v {
                Ok(()) => fit += 1,
                Err(r) => *reasons.entry(r).or_default() += 1,
            }
        }
        (fit, reasons)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One change to the state: take a pod of `gpus` on a node, hold a
    /// node from a time with some slack, or roll back the last few.
    #[derive(Clone, Debug)]
    enum Op {
        Take(usize, u64),
        Hold(usize, i64, u64),
        Rollback,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0usize..6, 1u64..5).prop_map(|(n, g)| Op::Take(n, g)),
            1 => (0usize..6, 1i64..5, 0u64..4).prop_map(|(n, t, g)| Op::Hold(n, t, g)),
            1 => Just(Op::Rollback),
        ]
    }

    fn full_scan(
        state: &ClusterState,
        nodes: &[&Node],
        mask: &[bool],
        pod: &PodView<'_>,
        rejected: &BTreeMap<FilterReason, u32>,
    ) -> (u32, BTreeMap<FilterReason, u32>) {
        let mut fit = 0;
        let mut reasons = rejected.clone();
        for (n, &ok) in mask.iter().enumerate() {
            if !ok {
                continue;
            }
            match state.nodes()[n].fit(nodes[n], pod) {
                Ok(()) => fit += 1,
                Err(r) => *reasons.entry(r).or_default() += 1,
            }
        }
        (fit, reasons)
    }

    proptest! {
        /// After any takes, holds and rollbacks, asked with any end, the
        /// kept diagnosis equals a scan of every node with `fit`.
        #[test]
        fn the_kept_diagnosis_equals_a_full_scan(
            ops in proptest::collection::vec(op(), 0..30),
            asks in proptest::collection::vec((0usize..8, 1u64..6, 0i64..6), 1..8),
            infeasible in 0usize..6,
        ) {
            let owned: Vec<Node> = (0..6)
                .map(|i| Node::new(format!("n{i}"), 64_000, 512 << 30, if i == 5 { 0 } else { 8 }))
                .collect();
            let nodes: Vec<&Node> = owned.iter().collect();
            let mut state = ClusterState::new(owned.iter().map(NodeState::new).collect());
            let mask: Vec<bool> = (0..6).map(|n| n != infeasible).collect();
            let rejected = BTreeMap::from([(FilterReason::GpuModelMismatch, 1)]);
            let take_req = |g: u64| Resources::new(1000, 1 << 30, 0).with_gpus(g);
            let mut kept: BTreeMap<u64, Diagnosis> = BTreeMap::new();
            let mut marks = vec![state.begin()];
            let mut ops = ops.into_iter();
            for (after, gpus, ends) in asks {
                for o in ops.by_ref().take(after) {
                    match o {
                        Op::Take(n, g) => {
                            let r = take_req(g);
                            let c = PlacementConstraints::default();
                            let pod = PodView::new(&r, GpuAsk::Whole(g as u32), &c);
                            let free: Vec<usize> = (0..8)
                                .filter(|&d| state.nodes()[n].gpu_used.get(d).is_some_and(|u| *u == 0))
                                .take(g as usize)
                                .collect();
                            if free.len() == g as usize && state.nodes()[n].fits(nodes[n], &pod) {
                                marks.push(state.begin());
                                state.take(n, nodes[n], &pod, &free);
                            }
                        }
                        Op::Hold(n, t, g) => {
                            marks.push(state.begin());
                            state.hold(n, t * 1000, Resources::zero().with_gpus(g));
                        }
                        Op::Rollback => {
                            if let Some(m) = marks.pop() {
                                state.rollback(m);
                            }
                        }
                    }
                }
                let r = take_req(gpus);
                let c = PlacementConstraints::default();
                let mut pod = PodView::new(&r, GpuAsk::Whole(gpus as u32), &c);
                pod.ends = if ends == 5 { i64::MAX } else { ends * 1000 };
                let d = kept
                    .entry(gpus)
                    .or_insert_with(|| Diagnosis::new(&state, &nodes, &mask, &pod));
                let got = d.counts(&state, &nodes, &pod, &rejected);
                prop_assert_eq!(got, full_scan(&state, &nodes, &mask, &pod, &rejected));
            }
        }
    }
}
