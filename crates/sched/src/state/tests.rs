//! Unit and property tests of the per-cycle state: GPU ask classification,
//! device choice, withholding, and the undo log's rollback.

use super::*;

fn none() -> PlacementConstraints {
    PlacementConstraints::default()
}

fn view<'a>(req: &'a Resources, c: &'a PlacementConstraints) -> PodView<'a> {
    PodView::new(req, GpuAsk::of(req, c).unwrap(), c)
}

#[test]
fn classify_requests() {
    let c = none();
    assert_eq!(GpuAsk::of(&Resources::zero(), &c), Ok(GpuAsk::None));
    assert_eq!(
        GpuAsk::of(&Resources::zero().with_gpus(4), &c),
        Ok(GpuAsk::Whole(4))
    );
    assert_eq!(
        GpuAsk::of(&Resources::new(0, 0, 250), &c),
        Ok(GpuAsk::Fraction(250))
    );
    assert!(
        GpuAsk::of(&Resources::new(0, 0, 1500), &c)
            .unwrap_err()
            .contains("1.5")
    );
    let mem = PlacementConstraints {
        gpu_memory: Some(10 << 30),
        ..none()
    };
    assert_eq!(
        GpuAsk::of(&Resources::new(0, 0, 125), &mem),
        Ok(GpuAsk::Memory(10 << 30))
    );
    let zero = PlacementConstraints {
        gpu_memory: Some(0),
        ..none()
    };
    assert!(GpuAsk::of(&Resources::zero(), &zero).is_err());
}

#[test]
fn whole_gpus_take_lowest_free_devices_and_never_mix_with_shared() {
    let node = Node::new("n", 64_000, 1 << 40, 4);
    let c = none();
    let mut s = NodeState::new(&node);
    let frac = Resources::new(0, 0, 500);
    let pod = view(&frac, &c);
    let slots = s.best_devices(&node, &pod);
    assert_eq!(slots, vec![0]);
    s.take(&node, &pod, &slots);
    assert_eq!(s.free.gpu, 3500);
    assert_eq!(s.tags, vec![(GpuTag::Shared, 1)]);
    // A second fraction packs onto the shared device.
    let f300 = Resources::new(0, 0, 300);
    assert_eq!(s.best_devices(&node, &view(&f300, &c)), vec![0]);
    let whole = Resources::zero().with_gpus(3);
    assert_eq!(s.fit(&node, &view(&whole, &c)), Ok(()));
    assert_eq!(s.best_devices(&node, &view(&whole, &c)), vec![1, 2, 3]);
    // 3.5 GPUs free in total: four whole ones are not there.
    let four = Resources::zero().with_gpus(4);
    assert_eq!(
        s.fit(&node, &view(&four, &c)),
        Err(FilterReason::Insufficient(
            trainyard_model::ResourceName::Gpu
        ))
    );
    // Half of device 0 and half of device 1 shared: 3 GPUs free in
    // total but only 2 whole devices; shared devices are never handed
    // out whole.
    s.take(&node, &pod, &[1]);
    let three = Resources::zero().with_gpus(3);
    assert_eq!(s.free.gpu, 3000);
    assert_eq!(
        s.fit(&node, &view(&three, &c)),
        Err(FilterReason::GpuDevicesFragmented)
    );
}

#[test]
fn withheld_devices_count_as_used_without_a_pod() {
    let mut node = Node::new("n", 64_000, 1 << 40, 4);
    node.max_pods = Some(2);
    let c = none();
    let mut s = NodeState::new(&node);
    let one = Resources::zero().with_gpus(1);
    s.take(&node, &view(&one, &c), &[0]);
    // Device 0 is used: withholding skips it and takes 2 and 3.
    assert_eq!(s.withhold(&node, &[0, 2, 3]), vec![2, 3]);
    assert_eq!(s.gpu_used, vec![FULL, 0, FULL, FULL]);
    assert_eq!(s.free.gpu, 1000);
    // No pod was added: the pod limit (2) still has room for one, and
    // the tags are the running pod's alone.
    assert_eq!(s.pods, 1);
    assert_eq!(s.tags, vec![(GpuTag::Whole(1), 1)]);
    assert_eq!(s.best_devices(&node, &view(&one, &c)), vec![1]);
    let two = Resources::zero().with_gpus(2);
    assert!(s.fit(&node, &view(&two, &c)).is_err());
    s.release(&node, &[2, 3]);
    assert_eq!(s.gpu_used, vec![FULL, 0, 0, 0]);
    assert_eq!(s.free.gpu, 3000);
    assert_eq!(s.fit(&node, &view(&two, &c)), Ok(()));
}

#[test]
fn withholding_is_undone_by_rollback() {
    let node = Node::new("n", 64_000, 1 << 40, 8);
    let mut cs = ClusterState::new(vec![NodeState::new(&node)]);
    let before = cs.nodes()[0].clone();
    let mark = cs.begin();
    assert_eq!(cs.withhold(0, &node, &[4, 5, 6, 7]), vec![4, 5, 6, 7]);
    assert_eq!(cs.nodes()[0].free.gpu, 4000);
    cs.rollback(mark);
    assert_eq!(cs.nodes()[0], before);
}

#[test]
fn memory_shares_are_sized_by_each_device() {
    let mut node = Node::new("n", 64_000, 1 << 40, 2);
    node.gpus[0].memory_bytes = 16 << 30;
    node.gpus[1].memory_bytes = 80 << 30;
    let c = PlacementConstraints {
        gpu_memory: Some(20 << 30),
        ..none()
    };
    let req = Resources::new(1000, 0, 250);
    let pod = view(&req, &c);
    let mut s = NodeState::new(&node);
    // 20 GiB does not fit a 16 GiB device; on 80 GiB it is 250 milli.
    assert_eq!(s.share_on(&node, 0, &pod), None);
    assert_eq!(s.share_on(&node, 1, &pod), Some(250));
    assert_eq!(s.best_devices(&node, &pod), vec![1]);
    s.take(&node, &pod, &[1]);
    assert_eq!(s.gpu_used, vec![0, 250]);
    assert_eq!(s.free.gpu, 1750);
    // 10 GiB on 16 GiB is ceil(625) milli.
    let small = PlacementConstraints {
        gpu_memory: Some(10 << 30),
        ..none()
    };
    assert_eq!(s.share_on(&node, 0, &view(&req, &small)), Some(625));
    // No device knows its memory: the share never fits.
    let blind = Node::new("b", 64_000, 1 << 40, 1);
    assert_eq!(
        NodeState::new(&blind).fit(&blind, &pod),
        Err(FilterReason::GpuMemoryTooSmall)
    );
}

#[test]
fn model_constraints_pick_devices_of_allowed_models() {
    let mut node = Node::new("n", 64_000, 1 << 40, 2);
    node.gpus[0].model = "T4".into();
    node.gpus[1].model = "A10".into();
    let c = PlacementConstraints {
        gpu_models: vec!["A10".into()],
        ..none()
    };
    let one = Resources::zero().with_gpus(1);
    let s = NodeState::new(&node);
    assert_eq!(s.best_devices(&node, &view(&one, &c)), vec![1]);
    let two = Resources::zero().with_gpus(2);
    assert_eq!(
        s.fit(&node, &view(&two, &c)),
        Err(FilterReason::Insufficient(
            trainyard_model::ResourceName::Gpu
        ))
    );
    let v100 = PlacementConstraints {
        gpu_models: vec!["V100".into()],
        ..none()
    };
    assert_eq!(
        s.fit(&node, &view(&one, &v100)),
        Err(FilterReason::GpuModelMismatch)
    );
}

use proptest::prelude::*;

proptest! {
    #[test]
    fn fast_fit_agrees_with_fit(
        used in prop::collection::vec(prop_oneof![Just(0u16), 1u16..1000, Just(1000u16)], 0..9),
        free_cpu in 0u64..10_000, pods in 0u32..4, max_pods in prop::option::of(0u32..4),
        cpu in 0u64..10_000, gpu in prop_oneof![Just(0u64), 1u64..1000, (1u64..9).prop_map(|g| g * 1000)],
        mem_share in prop::option::of(1u64..(20u64 << 30)),
    ) {
        let mut node = Node::new("n", 10_000, 1 << 30, used.len() as u32);
        for (i, d) in node.gpus.iter_mut().enumerate() {
            d.memory_bytes = if i % 3 == 2 { 0 } else { (8u64 << 30) * (1 + i as u64 % 2) };
        }
        node.max_pods = max_pods;
        let free_gpu: u64 = used.iter().map(|u| 1000 - *u as u64).sum();
        let s = NodeState { free: Resources::new(free_cpu, 1 << 30, free_gpu), pods, gpu_used: used, tags: Vec::new(), members: Vec::new(), held_until: i64::MAX, held_slack: Resources::zero(), dra: None };
        let req = Resources::new(cpu, 0, gpu);
        let c = PlacementConstraints { gpu_memory: mem_share, ..PlacementConstraints::default() };
        let pod = view(&req, &c);
        prop_assert_eq!(s.fits(&node, &pod), s.fit(&node, &pod).is_ok());
        if s.fits(&node, &pod) {
            // The chosen devices can take the pod, and taking it never
            // overfills a device.
            let slots = s.best_devices(&node, &pod);
            let mut t = s.clone();
            t.take(&node, &pod, &slots);
            prop_assert!(t.gpu_used.iter().all(|u| *u <= 1000));
        }
    }
}

#[test]
fn rollback_restores_exactly() {
    let node = Node::new("n", 8000, 1 << 30, 8);
    let c = none();
    let mut cs = ClusterState::new(vec![NodeState::new(&node)]);
    let before = cs.nodes.clone();
    let m = cs.begin();
    let r = Resources::new(1000, 0, 0).with_gpus(2);
    let pod = view(&r, &c);
    cs.take(0, &node, &pod, &[0, 1]);
    cs.take(0, &node, &pod, &[2, 3]);
    assert_eq!(cs.nodes[0].free_whole_gpus(), 4);
    cs.rollback(m);
    assert_eq!(cs.nodes, before);
}

/// One step of a random transaction script.
#[derive(Clone, Debug)]
enum Op {
    Begin,
    Take(usize, usize),
    Give(usize),
    Hold(usize, i64),
    Rollback,
    /// The innermost mark dropped, its changes kept.
    Keep,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Op::Begin),
        (0..3usize, 0..8usize).prop_map(|(n, g)| Op::Take(n, g)),
        (0..3usize).prop_map(Op::Give),
        (0..3usize, 0..100i64).prop_map(|(n, t)| Op::Hold(n, t)),
        Just(Op::Rollback),
        Just(Op::Keep),
    ]
}

proptest::proptest! {
    /// Whatever the nesting of marks, the state after each step is the
    /// one a plain undo log gives (every change saving a copy of its
    /// node): a node's copy is made once per mark, however often it
    /// changes, and rolling back to any open mark restores the nodes
    /// as they were then, with the changes kept under inner marks
    /// dropped since undone too.
    #[test]
    fn the_undo_log_keeps_one_copy_per_mark_and_restores_as_before(
        ops in proptest::collection::vec(op(), 1..80)
    ) {
        let node = Node::new("n", 8000, 1 << 30, 8);
        let c = none();
        let r = Resources::new(100, 0, 0).with_gpus(1);
        let pod = view(&r, &c);
        let mut cs = ClusterState::new(vec![NodeState::new(&node); 3]);
        // The plain log: nodes, and a copy per change.
        let mut plain_nodes = cs.nodes.clone();
        let mut plain_undo: Vec<(usize, NodeState)> = Vec::new();
        // Open marks, innermost last: this log's, the plain one's, and
        // the nodes as they were when it was taken.
        let mut open: Vec<(Mark, usize, Vec<NodeState>)> = Vec::new();
        for op in ops {
            match op {
                Op::Begin => open.push((cs.begin(), plain_undo.len(), cs.nodes.clone())),
                Op::Take(n, g) => {
                    if plain_nodes[n].gpu_used[g] == 0 {
                        cs.take(n, &node, &pod, &[g]);
                        plain_undo.push((n, plain_nodes[n].clone()));
                        plain_nodes[n].take(&node, &pod, &[g]);
                    }
                }
                Op::Give(n) => {
                    if let Some(g) = plain_nodes[n].gpu_used.iter().position(|u| *u > 0) {
                        cs.give(n, &node, &pod, &[g]);
                        plain_undo.push((n, plain_nodes[n].clone()));
                        plain_nodes[n].give(&node, &pod, &[g]);
                    }
                }
                Op::Hold(n, t) => {
                    cs.hold(n, t, Resources::zero());
                    plain_undo.push((n, plain_nodes[n].clone()));
                    plain_nodes[n].held_until = t;
                    plain_nodes[n].held_slack = Resources::zero();
                }
                Op::Rollback => {
                    if let Some((m, pm, then)) = open.pop() {
                        cs.rollback(m);
                        proptest::prop_assert_eq!(&cs.nodes, &then);
                        while plain_undo.len() > pm {
                            if let Some((n, prev)) = plain_undo.pop() {
                                plain_nodes[n] = prev;
                            }
                        }
                    }
                }
                Op::Keep => {
                    open.pop();
                }
            }
            proptest::prop_assert_eq!(&cs.nodes, &plain_nodes);
        }
    }
}
