//! One-shot placement: pods arrive one at a time and each is placed at
//! once or fails, with nothing leaving. This is the FGD experiment's replay
//! loop and the building block for incremental simulation.
//!
//! It uses the cycle's own pieces: the static predicates, [`NodeState`]
//! accounting and [`Scoring::evaluate`], with the same winner rule (highest
//! total, then tie-break value, then the node whose name sorts first). What
//! it adds is a cache: an evaluation depends only on the node's state and
//! the pod's shape, so it is kept per (shape, node) until that node changes.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::Arc;

use trainyard_model::{Node, PlacementConstraints, Resources};

use crate::config::ScoringConfig;
use crate::decisions::FilterReason;
use crate::fragmentation::TypicalPods;
use crate::plugins::{self, Predicate};
use crate::scoring::{Evaluation, Scoring};
use crate::state::{GpuAsk, NodeState, PodView};

/// An interned pod shape: request plus constraints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShapeId(u32);

struct Shape {
    req: Resources,
    ask: GpuAsk,
    constraints: Arc<PlacementConstraints>,
    /// Nodes passing the static predicates, ascending.
    feasible: Vec<u32>,
    /// Per position in `feasible`: (node version + 1, evaluation); 0 = empty.
    cache: Vec<(u32, Option<Evaluation>)>,
}

/// Where a pod went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Index into [`Placer::nodes`].
    pub node: usize,
    /// Device indices (`GpuDevice::index`) the pod holds.
    pub gpus: Vec<u32>,
}

/// A request the core cannot place as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid request: {0}")]
pub struct InvalidShape(pub String);

/// A cluster that pods are placed into one by one.
pub struct Placer {
    nodes: Vec<Node>,
    states: Vec<NodeState>,
    versions: Vec<u32>,
    predicates: Vec<Box<dyn Predicate>>,
    scoring: Scoring,
    shapes: Vec<Shape>,
    shape_ids: HashMap<(Resources, Arc<PlacementConstraints>), ShapeId>,
}

impl Placer {
    /// An empty cluster. Nodes are ordered by name (the tie-break order);
    /// `typical` is the mix fragmentation-aware policies measure against.
    pub fn new(mut nodes: Vec<Node>, scoring: &ScoringConfig, typical: TypicalPods) -> Placer {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes.dedup_by(|b, a| a.name == b.name);
        let scoring = Scoring::with_typical(scoring, &nodes, typical);
        Placer {
            states: nodes.iter().map(NodeState::new).collect(),
            versions: vec![0; nodes.len()],
            nodes,
            predicates: plugins::default_predicates(),
            scoring,
            shapes: Vec::new(),
            shape_ids: HashMap::new(),
        }
    }

    /// Nodes in placement (name) order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn state(&self, n: usize) -> &NodeState {
        &self.states[n]
    }

    pub fn scoring(&self) -> &Scoring {
        &self.scoring
    }

    /// Interns a pod shape; evaluates the static predicates once for it.
    pub fn shape(
        &mut self,
        req: &Resources,
        constraints: &Arc<PlacementConstraints>,
    ) -> Result<ShapeId, InvalidShape> {
        let key = (req.clone(), Arc::clone(constraints));
        if let Some(id) = self.shape_ids.get(&key) {
            return Ok(*id);
        }
        let ask = GpuAsk::of(req, constraints).map_err(InvalidShape)?;
        let feasible: Vec<u32> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                self.predicates
                    .iter()
                    .all(|p| p.filter(constraints, n).is_ok())
            })
            .map(|(i, _)| i as u32)
            .collect();
        let id = ShapeId(self.shapes.len() as u32);
        self.shapes.push(Shape {
            req: req.clone(),
            ask,
            constraints: Arc::clone(constraints),
            cache: vec![(0, None); feasible.len()],
            feasible,
        });
        self.shape_ids.insert(key, id);
        Ok(id)
    }

    /// Places one pod of `shape` on the best node now, or returns `None`
    /// when no node fits it (nothing changes then). `salt` distinguishes
    /// pods for the Random policy.
    pub fn place(&mut self, shape: ShapeId, salt: u64) -> Option<Placement> {
        let cacheable = !self.scoring.uses_salt();
        let sh = &mut self.shapes[shape.0 as usize];
        let mut pod = PodView::new(&sh.req, sh.ask, &sh.constraints);
        pod.salt = salt;
        let mut best: Option<(u64, u64, Reverse<u32>, Evaluation)> = None;
        for (pos, &n) in sh.feasible.iter().enumerate() {
            let ni = n as usize;
            let v = self.versions[ni].wrapping_add(1);
            let eval = if cacheable && sh.cache[pos].0 == v {
                sh.cache[pos].1
            } else {
                let e = self
                    .scoring
                    .evaluate(&self.nodes[ni], &self.states[ni], &pod);
                if cacheable {
                    sh.cache[pos] = (v, e);
                }
                e
            };
            if let Some(e) = eval {
                let key = (e.total, e.tiebreak, Reverse(n), e);
                if best
                    .as_ref()
                    .is_none_or(|b| (key.0, key.1, key.2) > (b.0, b.1, b.2))
                {
                    best = Some(key);
                }
            }
        }
        let (_, _, Reverse(n), e) = best?;
        let n = n as usize;
        let node = &self.nodes[n];
        let slots = e.devices.slots(node, &self.states[n], &pod);
        self.states[n].take(node, &pod, &slots);
        // Versions only need to differ from the cached one; wrapping after
        // 2³² placements on one node could at worst reuse a stale entry.
        self.versions[n] = self.versions[n].wrapping_add(1);
        Some(Placement {
            node: n,
            gpus: slots.iter().map(|&s| node.gpus[s].index).collect(),
        })
    }

    /// Why a shape fits nowhere: the reason of every node, counted.
    pub fn diagnose(&self, shape: ShapeId) -> Vec<(FilterReason, u32)> {
        let sh = &self.shapes[shape.0 as usize];
        let pod = PodView::new(&sh.req, sh.ask, &sh.constraints);
        let mut out: std::collections::BTreeMap<FilterReason, u32> = Default::default();
        for (i, n) in self.nodes.iter().enumerate() {
            let r = match self
                .predicates
                .iter()
                .try_for_each(|p| p.filter(&sh.constraints, n))
            {
                Err(r) => Err(r),
                Ok(()) => self.states[i].fit(n, &pod),
            };
            if let Err(r) = r {
                *out.entry(r).or_default() += 1;
            }
        }
        out.into_iter().collect()
    }
}
