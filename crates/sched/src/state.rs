//! Mutable per-cycle state: what is free on each node, device by device,
//! with an undo log so a gang's tentative placements can be rolled back.

use trainyard_model::resources::MILLI_PER_GPU;
use trainyard_model::{Node, Resources};

use crate::decisions::FilterReason;

/// How a task uses GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuAsk {
    None,
    /// This many whole, otherwise unused devices.
    Whole(u32),
    /// A share (milli-GPU, 1..=999) of one device that others may share.
    Fraction(u16),
}

impl GpuAsk {
    /// Classifies a request; `Err` for amounts above one GPU that are not whole.
    pub fn of(req: &Resources) -> Result<GpuAsk, String> {
        let g = req.gpu;
        if g == 0 {
            Ok(GpuAsk::None)
        } else if g.is_multiple_of(MILLI_PER_GPU) {
            u32::try_from(g / MILLI_PER_GPU)
                .map(GpuAsk::Whole)
                .map_err(|_| format!("{g} milli-GPU is too many GPUs"))
        } else if g < MILLI_PER_GPU {
            // g < 1000 fits in u16.
            Ok(GpuAsk::Fraction(g as u16))
        } else {
            Err(format!(
                "nvidia.com/gpu {} is neither whole GPUs nor a fraction of one",
                trainyard_model::ResourceName::Gpu.format_amount(g)
            ))
        }
    }
}

/// What is free on one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeState {
    pub free: Resources,
    pub pods: u32,
    /// Milli-GPU in use per device slot (position in `Node::gpus`).
    pub gpu_used: Vec<u16>,
}

const FULL: u16 = MILLI_PER_GPU as u16;

impl NodeState {
    pub fn new(node: &Node) -> NodeState {
        NodeState {
            free: node.allocatable.clone(),
            pods: 0,
            gpu_used: vec![0; node.gpus.len()],
        }
    }

    pub fn free_whole_gpus(&self) -> u32 {
        self.gpu_used.iter().filter(|u| **u == 0).count() as u32
    }

    /// Whether a task with `req` fits now: the hot path of placement, same
    /// answer as [`fit`](Self::fit) without building a reason.
    pub fn fits(&self, node: &Node, req: &Resources, ask: GpuAsk) -> bool {
        if node.max_pods.is_some_and(|max| self.pods >= max) || !req.fits_in(&self.free) {
            return false;
        }
        match ask {
            GpuAsk::None => true,
            GpuAsk::Whole(n) => self.free_whole_gpus() >= n,
            GpuAsk::Fraction(m) => self.gpu_used.iter().any(|u| *u + m <= FULL),
        }
    }

    /// Whether a task with `req` (classified as `ask`) fits now; the first
    /// reason when it does not.
    pub fn fit(&self, node: &Node, req: &Resources, ask: GpuAsk) -> Result<(), FilterReason> {
        if let Some(max) = node.max_pods
            && self.pods >= max
        {
            return Err(FilterReason::TooManyPods);
        }
        if let Some(r) = req.first_excess(&self.free) {
            return Err(FilterReason::Insufficient(r));
        }
        match ask {
            GpuAsk::None => Ok(()),
            GpuAsk::Whole(n) => {
                if self.free_whole_gpus() >= n {
                    Ok(())
                } else if (self.gpu_used.len() as u32) < n {
                    Err(FilterReason::Insufficient(
                        trainyard_model::ResourceName::Gpu,
                    ))
                } else {
                    Err(FilterReason::GpuDevicesFragmented)
                }
            }
            GpuAsk::Fraction(m) => {
                if self.gpu_used.iter().any(|u| *u + m <= FULL) {
                    Ok(())
                } else {
                    Err(FilterReason::GpuDevicesFragmented)
                }
            }
        }
    }

    /// Device slots a fitting task would take: the lowest free slots for
    /// whole GPUs; for a fraction, the fullest shared device it fits on, else
    /// the lowest free one. Call only after [`fit`](Self::fit) succeeded.
    pub fn choose_gpus(&self, ask: GpuAsk) -> Vec<usize> {
        match ask {
            GpuAsk::None => Vec::new(),
            GpuAsk::Whole(n) => self
                .gpu_used
                .iter()
                .enumerate()
                .filter(|(_, u)| **u == 0)
                .map(|(i, _)| i)
                .take(n as usize)
                .collect(),
            GpuAsk::Fraction(m) => {
                let shared = self
                    .gpu_used
                    .iter()
                    .enumerate()
                    .filter(|(_, u)| **u > 0 && **u + m <= FULL)
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
                    .map(|(i, _)| i);
                shared
                    .or_else(|| self.gpu_used.iter().position(|u| *u == 0))
                    .into_iter()
                    .collect()
            }
        }
    }

    /// Takes `req` and the given device slots.
    pub fn take(&mut self, req: &Resources, ask: GpuAsk, slots: &[usize]) {
        self.free.saturating_sub(req);
        self.pods += 1;
        for &s in slots {
            if let Some(u) = self.gpu_used.get_mut(s) {
                *u = match ask {
                    GpuAsk::Fraction(m) => (*u + m).min(FULL),
                    _ => FULL,
                };
            }
        }
    }
}

/// All nodes' state plus the undo log of the open transaction.
#[derive(Debug, Default)]
pub struct ClusterState {
    pub nodes: Vec<NodeState>,
    undo: Vec<(usize, NodeState)>,
}

/// A point to roll back to.
#[derive(Clone, Copy, Debug)]
pub struct Mark(usize);

impl ClusterState {
    pub fn new(nodes: Vec<NodeState>) -> Self {
        ClusterState {
            nodes,
            undo: Vec::new(),
        }
    }

    pub fn begin(&self) -> Mark {
        Mark(self.undo.len())
    }

    /// Places on node `n`, recording the previous state for rollback.
    pub fn take(&mut self, n: usize, req: &Resources, ask: GpuAsk, slots: &[usize]) {
        self.undo.push((n, self.nodes[n].clone()));
        self.nodes[n].take(req, ask, slots);
    }

    /// Restores every node changed since `mark`.
    pub fn rollback(&mut self, mark: Mark) {
        while self.undo.len() > mark.0 {
            if let Some((n, prev)) = self.undo.pop() {
                self.nodes[n] = prev;
            }
        }
    }

    /// Keeps every change since `mark`.
    pub fn commit(&mut self, mark: Mark) {
        self.undo.truncate(mark.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_requests() {
        assert_eq!(GpuAsk::of(&Resources::zero()), Ok(GpuAsk::None));
        assert_eq!(
            GpuAsk::of(&Resources::zero().with_gpus(4)),
            Ok(GpuAsk::Whole(4))
        );
        assert_eq!(
            GpuAsk::of(&Resources::new(0, 0, 250)),
            Ok(GpuAsk::Fraction(250))
        );
        assert!(
            GpuAsk::of(&Resources::new(0, 0, 1500))
                .unwrap_err()
                .contains("1.5")
        );
    }

    #[test]
    fn whole_gpus_take_lowest_free_devices_and_never_mix_with_shared() {
        let node = Node::new("n", 64_000, 1 << 40, 4);
        let mut s = NodeState::new(&node);
        let frac = Resources::new(0, 0, 500);
        let ask = GpuAsk::of(&frac).unwrap();
        let slots = s.choose_gpus(ask);
        assert_eq!(slots, vec![0]);
        s.take(&frac, ask, &slots);
        // A second fraction packs onto the shared device.
        assert_eq!(s.choose_gpus(GpuAsk::Fraction(300)), vec![0]);
        let whole = Resources::zero().with_gpus(3);
        assert_eq!(s.fit(&node, &whole, GpuAsk::Whole(3)), Ok(()));
        assert_eq!(s.choose_gpus(GpuAsk::Whole(3)), vec![1, 2, 3]);
        // 3.5 GPUs free in total, but only 3 whole devices.
        s.free.gpu = 3500;
        let four = Resources::zero().with_gpus(4);
        assert_eq!(
            s.fit(&node, &four, GpuAsk::Whole(4)),
            Err(FilterReason::Insufficient(
                trainyard_model::ResourceName::Gpu
            ))
        );
        s.free.gpu = 4000;
        assert_eq!(
            s.fit(&node, &four, GpuAsk::Whole(4)),
            Err(FilterReason::GpuDevicesFragmented)
        );
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn fast_fit_agrees_with_fit(
            used in prop::collection::vec(prop_oneof![Just(0u16), 1u16..1000, Just(1000u16)], 0..9),
            free_cpu in 0u64..10_000, pods in 0u32..4, max_pods in prop::option::of(0u32..4),
            cpu in 0u64..10_000, gpu in prop_oneof![Just(0u64), 1u64..1000, (1u64..9).prop_map(|g| g * 1000)],
        ) {
            let mut node = Node::new("n", 10_000, 1 << 30, used.len() as u32);
            node.max_pods = max_pods;
            let free_gpu: u64 = used.iter().map(|u| 1000 - *u as u64).sum();
            let s = NodeState { free: Resources::new(free_cpu, 1 << 30, free_gpu), pods, gpu_used: used };
            let req = Resources::new(cpu, 0, gpu);
            let ask = GpuAsk::of(&req).unwrap();
            prop_assert_eq!(s.fits(&node, &req, ask), s.fit(&node, &req, ask).is_ok());
        }
    }

    #[test]
    fn rollback_restores_exactly() {
        let node = Node::new("n", 8000, 1 << 30, 8);
        let mut c = ClusterState::new(vec![NodeState::new(&node)]);
        let before = c.nodes.clone();
        let m = c.begin();
        let r = Resources::new(1000, 0, 0).with_gpus(2);
        c.take(0, &r, GpuAsk::Whole(2), &[0, 1]);
        c.take(0, &r, GpuAsk::Whole(2), &[2, 3]);
        assert_eq!(c.nodes[0].free_whole_gpus(), 4);
        c.rollback(m);
        assert_eq!(c.nodes, before);
    }
}
