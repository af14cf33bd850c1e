//! Nodes ranked by score for one pod shape, kept current from the cluster
//! state's change log.
//!
//! `place_run` needs, pod after pod, the best node for a pod shape. Scoring
//! every feasible node for every gang costs O(nodes) per gang, and a cycle
//! with thousands of gangs of a few shapes scores the same unchanged nodes
//! again and again. A [`Ranked`] holds one shape's evaluation of every
//! feasible node in score order, and before each use looks again only at
//! the nodes that [`ClusterState::changes`] lists since it last looked.
//!
//! The ranking is exactly the order `place_run` uses without it (total
//! score, then tiebreak, then the lower node index), over evaluations of
//! the current state, so the choice of node is the same: it is a cache, not
//! a second placement rule. It is used only where an evaluation depends on
//! the node's state and the pod shape alone (no per-pod salt, no rail
//! window preference, no scope); `place_run` scores directly otherwise.
//!
//! Jobs of one shape that end at different times see held nodes
//! differently (`PodView::ends`). The ranking is of the shape as if no
//! hold refused it (built with [`Ranked::pod`]), and [`Ranked::best`]
//! passes over the held nodes that refuse the job at hand, so one ranking
//! serves every end.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use trainyard_model::Node;

use crate::policy::DeviceChoice;
use crate::scoring::Scoring;
use crate::state::{ClusterState, PodView};

/// Order of nodes for one shape: total score, tiebreak, then the lower node
/// index first (the largest key is the best node).
type Key = (u64, u64, Reverse<u32>);

/// One pod shape's evaluation of every feasible node, best last.
#[derive(Debug)]
pub(super) struct Ranked {
    /// How much of the change log the ranking reflects.
    seen: usize,
    /// Per node index: its key and device choice when the pod fits there.
    entry: Vec<Option<(Key, DeviceChoice)>>,
    order: BTreeSet<Key>,
    /// Per node index: the refresh that last looked at it (skips repeats
    /// of one node in the log).
    stamp: Vec<u32>,
    pass: u32,
}

impl Ranked {
    /// The pod as the ranking evaluates it: `pod` with an end that every
    /// hold lets in.
    pub(super) fn pod<'a>(pod: &PodView<'a>) -> PodView<'a> {
        let mut p = *pod;
        p.ends = i64::MIN;
        p
    }

    /// Evaluates every node of `feasible` on the current state.
    pub(super) fn build(
        scoring: &Scoring,
        nodes: &[&Node],
        state: &ClusterState,
        feasible: &[u32],
        pod: &PodView,
    ) -> Ranked {
        let mut ranked = Ranked {
            seen: state.changes().len(),
            entry: vec![None; nodes.len()],
            order: BTreeSet::new(),
            stamp: vec![0; nodes.len()],
            pass: 0,
        };
        for &n in feasible {
            ranked.update(scoring, nodes, state, n as usize, pod);
        }
        ranked
    }

    /// Looks again at the nodes changed since the last look; `mask` says
    /// which nodes are feasible for the shape at all.
    pub(super) fn refresh(
        &mut self,
        scoring: &Scoring,
        nodes: &[&Node],
        state: &ClusterState,
        mask: &[bool],
        pod: &PodView,
    ) {
        let log = state.changes();
        if self.seen >= log.len() {
            return;
        }
        self.pass += 1;
        for &n in &log[self.seen..] {
            let n = n as usize;
            if self.stamp[n] == self.pass || !mask[n] {
                continue;
            }
            self.stamp[n] = self.pass;
            self.update(scoring, nodes, state, n, pod);
        }
        self.seen = log.len();
    }

    /// Re-evaluates node `n` after a change that the caller made itself
    /// (the ranking was current before it): the ranking is current again.
    pub(super) fn changed_here(
        &mut self,
        scoring: &Scoring,
        nodes: &[&Node],
        state: &ClusterState,
        n: usize,
        pod: &PodView,
    ) {
        self.update(scoring, nodes, state, n, pod);
        self.seen = state.changes().len();
    }

    /// Whether the ranking reflects every change so far.
    pub(super) fn is_current(&self, state: &ClusterState) -> bool {
        self.seen == state.changes().len()
    }

    /// The best node for `pod` now (the shape with its own end), and its
    /// device choice: the ranking's best whose hold lets it in.
    pub(super) fn best(
        &self,
        state: &ClusterState,
        pod: &PodView,
    ) -> Option<(usize, DeviceChoice)> {
        self.order.iter().rev().find_map(|&(_, _, Reverse(n))| {
            let n = n as usize;
            if state.nodes()[n].hold_allows(pod) {
                self.entry[n].map(|(_, d)| (n, d))
            } else {
                None
            }
        })
    }

    fn update(
        &mut self,
        scoring: &Scoring,
        nodes: &[&Node],
        state: &ClusterState,
        n: usize,
        pod: &PodView,
    ) {
        if let Some((key, _)) = self.entry[n].take() {
            self.order.remove(&key);
        }
        if let Some(e) = scoring.evaluate(nodes[n], &state.nodes()[n], pod) {
            let key = (e.total, e.tiebreak, Reverse(n as u32));
            self.order.insert(key);
            self.entry[n] = Some((key, e.devices));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ScoringConfig;
    use crate::fragmentation::TypicalPods;
    use crate::state::{GpuAsk, NodeState};
    use trainyard_model::{PlacementConstraints, Resources};

    /// The best node by scoring every node directly, as `place_run` does
    /// without a ranking.
    fn best_by_scan(
        scoring: &Scoring,
        nodes: &[&Node],
        state: &ClusterState,
        pod: &PodView,
    ) -> Option<usize> {
        (0..nodes.len())
            .filter_map(|n| {
                scoring
                    .evaluate(nodes[n], &state.nodes()[n], pod)
                    .map(|e| ((e.total, e.tiebreak, Reverse(n as u32)), n))
            })
            .max()
            .map(|(_, n)| n)
    }

    #[test]
    fn follows_takes_gives_and_rollbacks() {
        let owned: Vec<Node> = (0..6)
            .map(|i| Node::new(format!("n{i}"), 64_000, 512 << 30, 8))
            .collect();
        let nodes: Vec<&Node> = owned.iter().collect();
        let mut state = ClusterState::new(owned.iter().map(NodeState::new).collect());
        let scoring = Scoring::with_typical(
            &ScoringConfig::default(),
            owned.iter(),
            TypicalPods::default(),
        );
        let c = PlacementConstraints::default();
        let one = Resources::new(1000, 1 << 30, 0).with_gpus(1);
        let four = Resources::new(4000, 4 << 30, 0).with_gpus(4);
        let pod1 = PodView::new(&one, GpuAsk::of(&one, &c).unwrap(), &c);
        let pod4 = PodView::new(&four, GpuAsk::of(&four, &c).unwrap(), &c);
        let feasible: Vec<u32> = (0..6).collect();
        let mask = vec![true; 6];
        let mut r1 = Ranked::build(&scoring, &nodes, &state, &feasible, &pod1);
        let mut r4 = Ranked::build(&scoring, &nodes, &state, &feasible, &pod4);
        let mut marks = Vec::new();
        // A fixed sequence of takes, gives and rollbacks over both shapes.
        for step in 0..40usize {
            let n = (step * 7) % 6;
            match step % 5 {
                0 | 1 | 3 => {
                    let pod = if step % 2 == 0 { &pod4 } else { &pod1 };
                    if state.nodes()[n].fits(nodes[n], pod) {
                        let slots = state.nodes()[n].best_devices(nodes[n], pod);
                        if step % 3 == 0 {
                            marks.push(state.begin());
                        }
                        state.take(n, nodes[n], pod, &slots);
                    }
                }
                2 => {
                    if let Some(m) = marks.pop() {
                        state.rollback(m);
                    }
                }
                _ => {}
            }
            r1.refresh(&scoring, &nodes, &state, &mask, &pod1);
            r4.refresh(&scoring, &nodes, &state, &mask, &pod4);
            assert!(r1.is_current(&state) && r4.is_current(&state));
            assert_eq!(
                r1.best(&state, &pod1).map(|b| b.0),
                best_by_scan(&scoring, &nodes, &state, &pod1),
                "1-GPU shape, step {step}"
            );
            assert_eq!(
                r4.best(&state, &pod4).map(|b| b.0),
                best_by_scan(&scoring, &nodes, &state, &pod4),
                "4-GPU shape, step {step}"
            );
        }
        // The cluster fills up: nothing fits, and the ranking says so.
        for n in 0..6 {
            while state.nodes()[n].fits(nodes[n], &pod1) {
                let slots = state.nodes()[n].best_devices(nodes[n], &pod1);
                state.take(n, nodes[n], &pod1, &slots);
                r1.changed_here(&scoring, &nodes, &state, n, &pod1);
            }
        }
        assert_eq!(r1.best(&state, &pod1), None);
        r4.refresh(&scoring, &nodes, &state, &mask, &pod4);
        assert_eq!(r4.best(&state, &pod4), None);
    }
}
