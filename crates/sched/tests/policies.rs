//! The six GPU placement policies of the FGD paper (plus Trainyard's
//! binpack/spread), checked against small hand-computed cases taken from
//! `FGD-EXPERIMENT.md` (§4: scores, device choice, tie-breaking; §6: the
//! worked FGD example).
//!
//! Conventions: a policy's `Scored::score` is the paper's 0..=100 score
//! times 10. The Placer breaks ties by node name, so nodes are named so that
//! name order = the intended rank. Every placer here scores with the GPU
//! policy alone (GPU weight 1, CPU/memory weight 0). Memory never binds.

use std::collections::BTreeMap;
use std::sync::Arc;

use trainyard_model::{Node, PlacementConstraints, Resources};
use trainyard_sched::config::{
    GpuScorerConfig, GpuStrategy, ScorerConfig, ScoringConfig, Strategy, TypicalPodsConfig,
};
use trainyard_sched::fragmentation::{TypicalPod, TypicalPods, sigmoid_percent};
use trainyard_sched::placer::Placer;
use trainyard_sched::policy::{self, DeviceChoice, PolicyContext, Scored};
use trainyard_sched::state::{GpuAsk, NodeState, PodView};

const MEM: u64 = 1 << 40;

// ---------------------------------------------------------------------------
// Helpers

fn node(name: &str, cpu: u64, gpus: u32, model: &str) -> Node {
    let mut n = Node::new(name, cpu, MEM, gpus);
    for d in &mut n.gpus {
        d.model = model.to_string();
    }
    n
}

/// A pod request: CPU millicores and milli-GPU (k × 1000 for whole GPUs).
fn req(cpu: u64, gpu_milli: u64) -> Resources {
    Resources::new(cpu, 0, gpu_milli)
}

fn any_model() -> Arc<PlacementConstraints> {
    Arc::new(PlacementConstraints::default())
}

fn only_models(models: &[&str]) -> Arc<PlacementConstraints> {
    let mut gpu_models: Vec<String> = models.iter().map(|m| m.to_string()).collect();
    gpu_models.sort();
    Arc::new(PlacementConstraints {
        gpu_models,
        ..PlacementConstraints::default()
    })
}

fn config(strategy: GpuStrategy, seed: u64) -> ScoringConfig {
    ScoringConfig {
        gpu: GpuScorerConfig {
            strategy,
            weight: 1,
        },
        cpu_memory: ScorerConfig {
            strategy: Strategy::Binpack,
            weight: 0,
        },
        typical_pods: TypicalPodsConfig::default(),
        random_seed: seed,
    }
}

fn placer(strategy: GpuStrategy, nodes: Vec<Node>, typical: TypicalPods) -> Placer {
    Placer::new(nodes, &config(strategy, 0), typical)
}

/// Places one pod; returns the node's name and the device indices.
fn place(
    p: &mut Placer,
    r: &Resources,
    c: &Arc<PlacementConstraints>,
    salt: u64,
) -> Option<(String, Vec<u32>)> {
    let shape = p.shape(r, c).expect("valid shape");
    p.place(shape, salt)
        .map(|pl| (p.nodes()[pl.node].name.clone(), pl.gpus))
}

fn placed(name: &str, gpus: &[u32]) -> Option<(String, Vec<u32>)> {
    Some((name.to_string(), gpus.to_vec()))
}

fn index_of(p: &Placer, name: &str) -> usize {
    p.nodes()
        .iter()
        .position(|n| n.name == name)
        .expect("node exists")
}

/// Calls the policy directly on one node state (the pod must fit there).
fn score_salted(
    strategy: GpuStrategy,
    ctx: &PolicyContext,
    node: &Node,
    state: &NodeState,
    r: &Resources,
    c: &PlacementConstraints,
    salt: u64,
) -> Scored {
    let ask = GpuAsk::of(r, c).expect("valid ask");
    let mut pod = PodView::new(r, ask, c);
    pod.salt = salt;
    assert!(
        state.fits(node, &pod),
        "pod {r:?} must fit on {}",
        node.name
    );
    policy::policy(strategy).score(ctx, node, state, &pod)
}

fn score(
    strategy: GpuStrategy,
    ctx: &PolicyContext,
    node: &Node,
    state: &NodeState,
    r: &Resources,
) -> Scored {
    score_salted(
        strategy,
        ctx,
        node,
        state,
        r,
        &PlacementConstraints::default(),
        0,
    )
}

/// (score, devices) of a direct policy call.
fn sd(
    strategy: GpuStrategy,
    ctx: &PolicyContext,
    node: &Node,
    state: &NodeState,
    r: &Resources,
) -> (u64, DeviceChoice) {
    let s = score(strategy, ctx, node, state, r);
    (s.score, s.devices)
}

/// A state of `node` after the given pods took the given device slots.
fn state_after(node: &Node, pods: &[(Resources, &[usize])]) -> NodeState {
    let c = PlacementConstraints::default();
    let mut s = NodeState::new(node);
    for (r, slots) in pods {
        let pod = PodView::new(r, GpuAsk::of(r, &c).unwrap(), &c);
        assert!(s.fits(node, &pod));
        s.take(node, &pod, slots);
    }
    s
}

fn device_free(state: &NodeState) -> Vec<u16> {
    (0..state.gpu_used.len())
        .map(|j| state.device_free(j))
        .collect()
}

/// Fragmentation numerator of a node state (over `denominator()`).
fn frag(t: &TypicalPods, node: &Node, state: &NodeState) -> u64 {
    t.frag_numerator(node, state.free.cpu, &device_free(state))
}

fn assert_close(got: f64, want: f64) {
    assert!((got - want).abs() < 1e-3, "got {got}, want {want}");
}

/// The policies whose device choice is "best" (§4.0), plus binpack/spread.
const BEST_POLICIES: [GpuStrategy; 6] = [
    GpuStrategy::Binpack,
    GpuStrategy::Spread,
    GpuStrategy::DotProd,
    GpuStrategy::Clustering,
    GpuStrategy::Packing,
    GpuStrategy::BestFit,
];

/// The paper's six policies plus binpack/spread (Trainyard's own policy is
/// not specified by the paper and is left out of policy-specific checks).
const PAPER_AND_BINPACK: [GpuStrategy; 8] = [
    GpuStrategy::Binpack,
    GpuStrategy::Spread,
    GpuStrategy::Random,
    GpuStrategy::DotProd,
    GpuStrategy::Clustering,
    GpuStrategy::Packing,
    GpuStrategy::BestFit,
    GpuStrategy::Fgd,
];

// ---------------------------------------------------------------------------
// §6: the worked FGD example

/// The §6 mini trace, pod by pod (20 pods, no model constraints), in an
/// interleaved order so the counting is exercised.
fn mini_trace_typical() -> TypicalPods {
    let a = || TypicalPod::new(4000, 500, 1, "", 1); // A ×8, sharing
    let b = || TypicalPod::new(8000, 1000, 1, "", 1); // B ×6
    let c = || TypicalPod::new(2000, 0, 0, "", 1); // C ×4, CPU-only
    let d = || TypicalPod::new(16000, 1000, 2, "", 1); // D ×1
    let e = || TypicalPod::new(1000, 250, 1, "", 1); // E ×1
    let trace = vec![
        e(),
        a(),
        b(),
        c(),
        a(),
        b(),
        c(),
        a(),
        b(),
        d(),
        a(),
        b(),
        c(),
        a(),
        b(),
        a(),
        c(),
        a(),
        b(),
        a(),
    ];
    assert_eq!(trace.len(), 20);
    TypicalPods::from_classes(trace, 95)
}

#[test]
fn fgd_example_typical_pods_keep_four_classes_and_drop_e() {
    let t = mini_trace_typical();
    // Counts 8, 6, 4, 1, 1; D and E tie on count and D (16000 CPU) is the
    // larger key, so it comes first. Cut-off 0.95 × 20 = 19: cumulative
    // 8, 14, 18, 19 → reached at D; E is dropped.
    assert_eq!(
        t.pods(),
        &[
            TypicalPod::new(4000, 500, 1, "", 8),
            TypicalPod::new(8000, 1000, 1, "", 6),
            TypicalPod::new(2000, 0, 0, "", 4),
            TypicalPod::new(16000, 1000, 2, "", 1),
        ]
    );
    // p = 8/19, 6/19, 4/19, 1/19.
    assert_eq!(t.denominator(), 19);
    assert!(!t.pods().iter().any(|p| p.gpu_milli == 250));
}

fn example_nodes() -> (Node, Node) {
    // "0000-"/"0001-" are the rank prefixes the experiment gives: N1 wins ties.
    (
        node("0000-n1", 16000, 2, "T4"),
        node("0001-n2", 32000, 4, "T4"),
    )
}

#[test]
fn fgd_example_initial_fragmentation() {
    let t = mini_trace_typical();
    let (n1, n2) = example_nodes();
    // N1: A, B, D are Q3 with no device too small (A: 2 devices ≥ 500 and
    // 16000 ≥ 4000; B: 2 ≥ 1000, 16000 ≥ 8000; D: 2 free devices, 16000 ≥
    // 16000) → 0. Only C (CPU-only) counts: 4 × 2000 = 8000.
    assert_eq!(frag(&t, &n1, &NodeState::new(&n1)), 8000);
    // N2: only C: 4 × 4000 = 16000.
    assert_eq!(frag(&t, &n2, &NodeState::new(&n2)), 16000);
    assert_close(8000.0 / 19.0, 421.0526);
    assert_close(16000.0 / 19.0, 842.1053);
    // F of an empty 8-GPU node with plenty of CPU: only C → 4 × 8000.
    let big = node("big", 128_000, 8, "T4");
    assert_eq!(frag(&t, &big, &NodeState::new(&big)), 32000);
    // A node without GPUs has no fragment.
    let cpu = node("cpu", 128_000, 0, "");
    assert_eq!(frag(&t, &cpu, &NodeState::new(&cpu)), 0);
}

#[test]
fn fgd_example_steps_one_to_five() {
    let t = mini_trace_typical();
    let (n1, n2) = example_nodes();
    // Given in reverse: the Placer must order nodes by name itself.
    let mut p = placer(GpuStrategy::Fgd, vec![n2.clone(), n1.clone()], t.clone());
    let ctx = PolicyContext::for_nodes(p.nodes(), t.clone(), 0);
    let (i1, i2) = (index_of(&p, "0000-n1"), index_of(&p, "0001-n2"));
    let none = any_model();
    // All Δ below are numerators over 19; the sigmoid argument is
    // Δ / (19 × 1000).
    let den = t.denominator() * 1000;

    // Step 1 — P1 (4000, 500, 1), sharing.
    // N1 dev 0: c = 12000, g = [500, 1000]: A 0; B: dev 0 too small → 6 ×
    // 500 = 3000; C: 4 × 1500 = 6000; D: 1 free device → Q1, 1 × 1500.
    // After 10500, Δ = 8000 − 10500 = −2500 → σ(−0.131579) = 0.46715 → 46.
    // Dev 1 gives the same after-state.
    assert_eq!(t.frag_numerator(&n1, 12000, &[500, 1000]), 10500);
    assert_eq!(t.frag_numerator(&n1, 12000, &[1000, 500]), 10500);
    // N2 dev j: c = 28000, g = [500, 1000, 1000, 1000]: A 0; B 3000; C 4 ×
    // 3500 = 14000; D: Q3, dev 0 too small → 500. After 17500, Δ = 16000 −
    // 17500 = −1500 → σ(−0.078947) = 0.48027 → 48, the same for every j →
    // device 0.
    assert_eq!(
        t.frag_numerator(&n2, 28000, &[500, 1000, 1000, 1000]),
        17500
    );
    assert_eq!(sigmoid_percent(-2500, den), 46);
    assert_eq!(sigmoid_percent(-1500, den), 48);
    let p1 = req(4000, 500);
    let fgd = GpuStrategy::Fgd;
    assert_eq!(
        sd(fgd, &ctx, &n1, p.state(i1), &p1),
        (460, DeviceChoice::One(0))
    );
    assert_eq!(
        sd(fgd, &ctx, &n2, p.state(i2), &p1),
        (480, DeviceChoice::One(0))
    );
    assert_eq!(place(&mut p, &p1, &none, 1), placed("0001-n2", &[0]));
    assert_eq!(frag(&t, &n2, p.state(i2)), 17500); // 921.053
    assert_close(17500.0 / 19.0, 921.053);

    // Step 2 — P2 (8000, 1000, 1).
    // N1: [0, 1000], c = 8000: A 0; B 0 (8000 ≥ 8000); C 4 × 1000; D Q1 1000
    // → 5000 (263.158); Δ = 8000 − 5000 = +3000 → σ(0.157895) → 53.
    // N2: dev 1 (lowest whole free) → [500, 0, 1000, 1000], c = 20000: A 0;
    // B 6 × 500; C 4 × 2500; D 500 → 13500 (710.526); Δ = 17500 − 13500 =
    // +4000 → σ(0.210526) → 55.
    assert_eq!(t.frag_numerator(&n1, 8000, &[0, 1000]), 5000);
    assert_eq!(sigmoid_percent(3000, den), 53);
    assert_eq!(sigmoid_percent(4000, den), 55);
    let p2 = req(8000, 1000);
    assert_eq!(
        sd(fgd, &ctx, &n1, p.state(i1), &p2),
        (530, DeviceChoice::LowestWhole)
    );
    assert_eq!(
        sd(fgd, &ctx, &n2, p.state(i2), &p2),
        (550, DeviceChoice::LowestWhole)
    );
    assert_eq!(place(&mut p, &p2, &none, 2), placed("0001-n2", &[1]));
    assert_eq!(frag(&t, &n2, p.state(i2)), 13500);
    assert_close(13500.0 / 19.0, 710.526);

    // Step 3 — P3 (2000, 300, 1), sharing.
    // N1 dev 0/1: [700, 1000], c = 14000: A 0; B 6 × 700 = 4200; C 4 × 1700
    // = 6800; D Q1 1700 → 12700 (668.421); Δ = −4700 → σ(−0.247368) → 43.
    // N2 dev 0 → [200, 0, 1000, 1000], c = 18000: A 8 × 200 = 1600; B 6 ×
    // 200 = 1200; C 4 × 2200 = 8800; D 200 → 11800 (621.053); Δ = 13500 −
    // 11800 = +1700 → σ(0.089474) → 52.
    // N2 dev 2 (or 3) → [500, 0, 700, 1000]: A 0; B 6 × 1200 = 7200; C 8800;
    // D Q2 2200 → 18200 (957.895); Δ = −4700 → 43. Dev 1 is full.
    assert_eq!(t.frag_numerator(&n1, 14000, &[700, 1000]), 12700);
    assert_eq!(t.frag_numerator(&n2, 18000, &[200, 0, 1000, 1000]), 11800);
    assert_eq!(t.frag_numerator(&n2, 18000, &[500, 0, 700, 1000]), 18200);
    assert_eq!(t.frag_numerator(&n2, 18000, &[500, 0, 1000, 700]), 18200);
    assert_eq!(sigmoid_percent(-4700, den), 43);
    assert_eq!(sigmoid_percent(1700, den), 52);
    let p3 = req(2000, 300);
    assert_eq!(
        sd(fgd, &ctx, &n1, p.state(i1), &p3),
        (430, DeviceChoice::One(0))
    );
    assert_eq!(
        sd(fgd, &ctx, &n2, p.state(i2), &p3),
        (520, DeviceChoice::One(0))
    );
    assert_eq!(place(&mut p, &p3, &none, 3), placed("0001-n2", &[0]));
    assert_eq!(frag(&t, &n2, p.state(i2)), 11800);

    // Step 4 — P4 (12000, CPU-only).
    // N1: c = 4000, [1000, 1000]: A 0 (4000 ≥ 4000); B Q4 6 × 2000 = 12000;
    // C 4 × 2000 = 8000; D Q4 2000 → 22000 (1157.895); Δ = −14000 → 32.
    // N2: c = 6000, [200, 0, 1000, 1000]: A 8 × 200 = 1600; B Q4 6 × 2200 =
    // 13200; C 8800; D Q4 2200 → 25800 (1357.895); Δ = 11800 − 25800 =
    // −14000 → 32. Tie → N1 by rank (name).
    assert_eq!(t.frag_numerator(&n2, 6000, &[200, 0, 1000, 1000]), 25800);
    assert_eq!(sigmoid_percent(-14000, den), 32);
    let p4 = req(12000, 0);
    assert_eq!(
        sd(fgd, &ctx, &n1, p.state(i1), &p4),
        (320, DeviceChoice::None)
    );
    assert_eq!(
        sd(fgd, &ctx, &n2, p.state(i2), &p4),
        (320, DeviceChoice::None)
    );
    assert_eq!(place(&mut p, &p4, &none, 4), placed("0000-n1", &[]));
    assert_eq!(frag(&t, &n1, p.state(i1)), 22000);

    // Step 5 — P5 (8000, 1000, 2). N1 has 4000 CPU < 8000: infeasible.
    // N2: devices 2, 3 → [200, 0, 0, 0], c = 10000: A 8 × 200; B 6 × 200;
    // C 4 × 200; D 200 → 3800 (200.000); Δ = 11800 − 3800 = +8000 →
    // σ(0.421053) = 0.60373 → 60.
    let p5 = req(8000, 2000);
    {
        let c = PlacementConstraints::default();
        let pod = PodView::new(&p5, GpuAsk::of(&p5, &c).unwrap(), &c);
        assert!(!p.state(i1).fits(&n1, &pod));
    }
    assert_eq!(sigmoid_percent(8000, den), 60);
    assert_eq!(
        sd(fgd, &ctx, &n2, p.state(i2), &p5),
        (600, DeviceChoice::LowestWhole)
    );
    assert_eq!(place(&mut p, &p5, &none, 5), placed("0001-n2", &[2, 3]));

    // Final state.
    let (s1, s2) = (p.state(i1), p.state(i2));
    assert_eq!(s1.free.cpu, 4000);
    assert_eq!(device_free(s1), vec![1000, 1000]);
    assert_eq!(s2.free.cpu, 10000);
    assert_eq!(device_free(s2), vec![200, 0, 0, 0]);
    assert_eq!(frag(&t, &n1, s1), 22000);
    assert_eq!(frag(&t, &n2, s2), 3800);
    assert_close(22000.0 / 19.0, 1157.895);
    assert_close(3800.0 / 19.0, 200.000);
}

// ---------------------------------------------------------------------------
// FGD: node choice, device choice, ties

/// Typical mix {S = (1000, 500, 1) ×1, W = (1000, 1000, 1) ×1}: denominator
/// 2, so the sigmoid argument is Δ / 2000.
fn share_and_whole_typical() -> TypicalPods {
    let t = TypicalPods::from_classes(
        [
            TypicalPod::new(1000, 500, 1, "", 1),
            TypicalPod::new(1000, 1000, 1, "", 1),
        ],
        95,
    );
    assert_eq!(t.denominator(), 2);
    t
}

#[test]
fn fgd_share_prefers_node_where_it_fills_a_half_used_device() {
    let t = share_and_whole_typical();
    let a = node("a", 64000, 2, "T4");
    let b = node("b", 64000, 2, "V100");
    let ctx = PolicyContext::for_nodes([&a, &b], t.clone(), 0);
    let pod = req(1000, 500);

    // a fresh [1000, 1000]: before 0. Either device → [500, 1000]: S fits
    // (0); W fits on the other device, dev 0 too small → 500. Δ = −500 →
    // σ(−0.25) = 0.43782 → 43, device 0 (equal scores → lowest index).
    let sa = NodeState::new(&a);
    assert_eq!(frag(&t, &a, &sa), 0);
    assert_eq!(
        sd(GpuStrategy::Fgd, &ctx, &a, &sa, &pod),
        (430, DeviceChoice::One(0))
    );

    // b with [500, 1000] (a share on dev 0): before: W's small device 500 →
    // 500. dev 0 → [0, 1000]: S 0, W 0 → after 0, Δ = +500 → σ(0.25) =
    // 0.56218 → 56. dev 1 → [500, 500]: S 0; W no device → 1000; Δ = −500 →
    // 43. Node score 56, device 0.
    let sb = state_after(&b, &[(req(1000, 500), &[0])]);
    assert_eq!(frag(&t, &b, &sb), 500);
    assert_eq!(t.frag_numerator(&b, 62000, &[500, 500]), 1000);
    assert_eq!(
        sd(GpuStrategy::Fgd, &ctx, &b, &sb, &pod),
        (560, DeviceChoice::One(0))
    );

    // Through the Placer: a pod restricted to V100 can only go to b (dev 0:
    // both devices equal → lowest index); the next unrestricted share then
    // prefers b's half-used device (56) over a (43) although a sorts first.
    let mut p = placer(GpuStrategy::Fgd, vec![b.clone(), a.clone()], t);
    assert_eq!(
        place(&mut p, &pod, &only_models(&["V100"]), 0),
        placed("b", &[0])
    );
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("b", &[0]));
    // b is now [0, 1000]; the third share: a → [500, 1000] is Δ −500 (43);
    // b dev 1 → [0, 500]: before 0, after W 500 → Δ −500 (43) → tie → a.
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("a", &[0]));
}

#[test]
fn fgd_device_tie_is_lowest_index_among_equal_truncated_scores() {
    // One typical class X = (1000, 650, 1): denominator 1, argument Δ / 1000.
    let t = TypicalPods::from_classes([TypicalPod::new(1000, 650, 1, "", 1)], 95);
    let n = node("n", 16000, 2, "T4");
    let ctx = PolicyContext::for_nodes([&n], t.clone(), 0);
    // Free [700, 600]: X fits dev 0, dev 1 too small → before 600.
    let s = state_after(&n, &[(req(1000, 300), &[0]), (req(1000, 400), &[1])]);
    assert_eq!(device_free(&s), vec![700, 600]);
    assert_eq!(frag(&t, &n, &s), 600);

    // Share 10: dev 0 → [690, 600]: small 600, Δ 0 → 50; dev 1 → [700, 590]:
    // small 590, Δ +10 → σ(0.01) = 0.5025 → 50. Equal scores → dev 0, even
    // though dev 1 has the larger Δ.
    assert_eq!(sigmoid_percent(10, 1000), 50);
    assert_eq!(
        sd(GpuStrategy::Fgd, &ctx, &n, &s, &req(1000, 10)),
        (500, DeviceChoice::One(0))
    );
    // Share 50: dev 0 → [650, 600]: Δ 0 → 50; dev 1 → [700, 550]: Δ +50 →
    // σ(0.05) = 0.5125 → 51 → dev 1 (strictly higher).
    assert_eq!(sigmoid_percent(50, 1000), 51);
    assert_eq!(
        sd(GpuStrategy::Fgd, &ctx, &n, &s, &req(1000, 50)),
        (510, DeviceChoice::One(1))
    );
}

#[test]
fn fgd_node_tie_goes_to_first_name() {
    let t = mini_trace_typical();
    // Three identical fresh nodes (16000 CPU, 2 GPUs, before 8000 as N1):
    // equal scores for any pod. CPU-only 2000: after c = 14000: A, B still
    // fit; D now lacks CPU (14000 < 16000) → Q1, 1 × 2000; C 4 × 2000 →
    // 10000, Δ = −2000 → σ(−0.105263) = 0.47371 → 47.
    let nodes = vec![
        node("c", 16000, 2, "T4"),
        node("a", 16000, 2, "T4"),
        node("b", 16000, 2, "T4"),
    ];
    let ctx = PolicyContext::for_nodes(&nodes, t.clone(), 0);
    assert_eq!(
        sd(
            GpuStrategy::Fgd,
            &ctx,
            &nodes[0],
            &NodeState::new(&nodes[0]),
            &req(2000, 0)
        ),
        (470, DeviceChoice::None)
    );
    assert_eq!(sigmoid_percent(-2000, 19000), 47);
    let mut p = placer(GpuStrategy::Fgd, nodes, t);
    assert_eq!(
        place(&mut p, &req(2000, 0), &any_model(), 0),
        placed("a", &[])
    );
    // a now has 14000 CPU (F 10000) and the others 16000 (F 8000). A whole
    // 1-GPU pod (8000 CPU): a → [0, 1000], c = 6000: A 0; B Q4 6 × 1000; C
    // 4 × 1000; D Q1 1000 → 11000, Δ = 10000 − 11000 = −1000 → 48. b, c →
    // [0, 1000], c = 8000: A 0; B 0; C 4000; D Q1 1000 → 5000, Δ = +3000 →
    // 53 → tie b/c → b, device 0.
    assert_eq!(sigmoid_percent(-1000, 19000), 48);
    assert_eq!(sigmoid_percent(3000, 19000), 53);
    assert_eq!(
        place(&mut p, &req(8000, 1000), &any_model(), 0),
        placed("b", &[0])
    );
}

// ---------------------------------------------------------------------------
// Binpack / Spread (Trainyard's own scorers, not in the paper)

#[test]
fn binpack_and_spread_scores() {
    let n = node("n", 64000, 4, "T4");
    let ctx = PolicyContext::for_nodes([&n], TypicalPods::default(), 0);
    // A share of 500 on dev 0 → Gfree 3500 of 4000.
    let s = state_after(&n, &[(req(1000, 500), &[0])]);
    // Share 500: free after 3000 → 3000 × 1000 / 4000 = 750 → binpack 250,
    // spread 750.
    let share = req(1000, 500);
    assert_eq!(score(GpuStrategy::Binpack, &ctx, &n, &s, &share).score, 250);
    assert_eq!(score(GpuStrategy::Spread, &ctx, &n, &s, &share).score, 750);
    // One whole GPU: free after 2500 → 625 → binpack 375, spread 625.
    let whole = req(1000, 1000);
    assert_eq!(score(GpuStrategy::Binpack, &ctx, &n, &s, &whole).score, 375);
    assert_eq!(score(GpuStrategy::Spread, &ctx, &n, &s, &whole).score, 625);
    // CPU-only: free 3500 → 875; both prefer nodes without free GPUs → 125.
    let cpu = req(1000, 0);
    assert_eq!(score(GpuStrategy::Binpack, &ctx, &n, &s, &cpu).score, 125);
    assert_eq!(score(GpuStrategy::Spread, &ctx, &n, &s, &cpu).score, 125);
}

#[test]
fn binpack_placement_and_name_tie_break() {
    // 1-GPU pods. a (8 GPUs): free after 7000/8000 → 875 → 125; b, c (2
    // GPUs): 1000/2000 → 500 → 500. b and c tie → b.
    let nodes = vec![
        node("c", 64000, 2, "T4"),
        node("a", 64000, 8, "T4"),
        node("b", 64000, 2, "T4"),
    ];
    let mut p = placer(GpuStrategy::Binpack, nodes, TypicalPods::default());
    let one = req(1000, 1000);
    assert_eq!(place(&mut p, &one, &any_model(), 0), placed("b", &[0]));
    // b: free after 0 → 1000 (best); c 500; a 125.
    assert_eq!(place(&mut p, &one, &any_model(), 0), placed("b", &[1]));
    // b is full: c 500 > a 125.
    assert_eq!(place(&mut p, &one, &any_model(), 0), placed("c", &[0]));
}

#[test]
fn spread_placement_and_name_tie_break() {
    // 1-GPU pods. a (2 GPUs): 500; b, c (8 GPUs): 875 → tie → b.
    let nodes = vec![
        node("c", 64000, 8, "T4"),
        node("b", 64000, 8, "T4"),
        node("a", 64000, 2, "T4"),
    ];
    let mut p = placer(GpuStrategy::Spread, nodes, TypicalPods::default());
    let one = req(1000, 1000);
    assert_eq!(place(&mut p, &one, &any_model(), 0), placed("b", &[0]));
    // b: 6000/8000 → 750; c 875 → c.
    assert_eq!(place(&mut p, &one, &any_model(), 0), placed("c", &[0]));
    // b and c both 750 > a 500 → b (name), next lowest free device.
    assert_eq!(place(&mut p, &one, &any_model(), 0), placed("b", &[1]));
}

// ---------------------------------------------------------------------------
// 01-Random

fn random_cluster() -> Vec<Node> {
    vec![
        node("d", 64000, 4, "T4"),
        node("b", 64000, 4, "T4"),
        node("e-nogpu", 64000, 0, ""),
        node("a", 64000, 4, "T4"),
        node("f-nocpu", 0, 4, "T4"),
        node("c", 64000, 4, "T4"),
    ]
}

#[test]
fn random_picks_only_feasible_nodes_and_every_one_about_uniformly() {
    let mut p = Placer::new(
        random_cluster(),
        &config(GpuStrategy::Random, 42),
        TypicalPods::default(),
    );
    // 2000 pods of (1 milli-CPU, 1 milli-GPU): a–d always fit (4000 milli
    // each); e has no GPU and f no CPU, so they never do.
    let pod = req(1, 1);
    let mut nodes: BTreeMap<String, u32> = BTreeMap::new();
    let mut devices: BTreeMap<(String, u32), u32> = BTreeMap::new();
    for salt in 0..2000u64 {
        let (name, gpus) = place(&mut p, &pod, &any_model(), salt).expect("fits");
        assert_eq!(gpus.len(), 1);
        *nodes.entry(name.clone()).or_default() += 1;
        *devices.entry((name, gpus[0])).or_default() += 1;
    }
    assert_eq!(
        nodes.keys().cloned().collect::<Vec<_>>(),
        vec!["a", "b", "c", "d"]
    );
    for (name, count) in &nodes {
        // Expected 500 each (25%); accept 15%..=35% (300..=700).
        assert!((300..=700).contains(count), "{name}: {count} of 2000");
        // Devices: uniform among those that fit (all 4 here): ~25% each.
        for j in 0..4 {
            let d = devices.get(&(name.clone(), j)).copied().unwrap_or(0);
            assert!(
                d * 10 >= *count && d * 10 <= *count * 4,
                "{name} dev {j}: {d} of {count}"
            );
        }
    }
}

#[test]
fn random_is_deterministic_for_seed_and_salt() {
    let run = |seed: u64| -> Vec<Option<(String, Vec<u32>)>> {
        let mut p = Placer::new(
            random_cluster(),
            &config(GpuStrategy::Random, seed),
            TypicalPods::default(),
        );
        (0..100u64)
            .map(|i| place(&mut p, &req(1, 100), &any_model(), i * 7919 + 3))
            .collect()
    };
    let first = run(7);
    assert_eq!(first, run(7));
    assert!(first.iter().all(Option::is_some));
    assert_ne!(first, run(8), "another seed gives another sequence");

    // The same (seed, salt) on a fresh cluster picks the same node, and the
    // choice does not depend on other nodes' load.
    let one = |salt: u64| {
        let mut p = Placer::new(
            random_cluster(),
            &config(GpuStrategy::Random, 7),
            TypicalPods::default(),
        );
        place(&mut p, &req(1, 100), &any_model(), salt)
    };
    assert_eq!(one(3), first[0].clone());
    assert_eq!(one(3), one(3));

    // Direct call: score 0 everywhere, tiebreak a pure function of
    // (seed, salt, node).
    let nodes = random_cluster();
    let ctx = PolicyContext::for_nodes(&nodes, TypicalPods::default(), 7);
    let c = PlacementConstraints::default();
    let s = NodeState::new(&nodes[0]);
    let a = score_salted(
        GpuStrategy::Random,
        &ctx,
        &nodes[0],
        &s,
        &req(1, 100),
        &c,
        9,
    );
    let b = score_salted(
        GpuStrategy::Random,
        &ctx,
        &nodes[0],
        &s,
        &req(1, 100),
        &c,
        9,
    );
    assert_eq!(a, b);
    assert_eq!(a.score, 0);
    assert!(policy::policy(GpuStrategy::Random).uses_salt());
}

#[test]
fn random_share_device_is_uniform_over_fitting_devices() {
    let n = node("n", 64000, 4, "T4");
    let ctx = PolicyContext::for_nodes([&n], TypicalPods::default(), 1);
    // Free [500, 1000, 200, 1000]; a 300 share fits devices 0, 1, 3 only.
    let s = state_after(&n, &[(req(1, 500), &[0]), (req(1, 800), &[2])]);
    assert_eq!(device_free(&s), vec![500, 1000, 200, 1000]);
    let c = PlacementConstraints::default();
    let mut counts = [0u32; 4];
    for salt in 0..1200u64 {
        let sc = score_salted(GpuStrategy::Random, &ctx, &n, &s, &req(1, 300), &c, salt);
        match sc.devices {
            DeviceChoice::One(j) => counts[j] += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(counts[2], 0, "device 2 is too small");
    for j in [0, 1, 3] {
        // Expected 400 each; accept 20%..=46%.
        assert!((240..=560).contains(&counts[j]), "dev {j}: {counts:?}");
    }
}

#[test]
fn random_whole_gpu_pods_take_lowest_free_devices() {
    let mut p = Placer::new(
        vec![node("n", 64000, 4, "T4")],
        &config(GpuStrategy::Random, 5),
        TypicalPods::default(),
    );
    // A share lands on a random device j; a 2-GPU pod then takes the two
    // lowest fully free devices other than j.
    let (_, share) = place(&mut p, &req(1000, 500), &any_model(), 11).unwrap();
    let j = share[0];
    let want: Vec<u32> = (0..4).filter(|&d| d != j).take(2).collect();
    assert_eq!(
        place(&mut p, &req(1000, 2000), &any_model(), 12),
        placed("n", &want)
    );
    // The remaining whole device.
    let last: Vec<u32> = (0..4).filter(|&d| d != j && !want.contains(&d)).collect();
    assert_eq!(
        place(&mut p, &req(1000, 1000), &any_model(), 13),
        placed("n", &last)
    );
}

// ---------------------------------------------------------------------------
// 02-DotProd

/// An 8-GPU, 128000-CPU node: PolicyContext::for_nodes then gives the
/// paper's MAXCPU = 128000 and MAXGPU = 8000.
fn openb_max_node(name: &str) -> Node {
    node(name, 128_000, 8, "T4")
}

#[test]
fn dotprod_scores_and_exact_boundary() {
    let n = openb_max_node("n");
    let ctx = PolicyContext::for_nodes([&n], TypicalPods::default(), 0);
    assert_eq!((ctx.max_cpu, ctx.max_gpu), (128_000, 8_000));
    let dp = GpuStrategy::DotProd;

    // Fresh: a = (1, 1). Pod (32000, 1 GPU): b = (0.25, 0.125); dot = 0.375
    // → 100 (1 − 0.1875) = 81.25 → 81.
    let fresh = NodeState::new(&n);
    assert_eq!(
        sd(dp, &ctx, &n, &fresh, &req(32000, 1000)),
        (810, DeviceChoice::LowestWhole)
    );
    // Pod (96000, 0): dot = 0.75 → 100 (1 − 0.375) = 62.5 → 62.
    assert_eq!(
        sd(dp, &ctx, &n, &fresh, &req(96000, 0)),
        (620, DeviceChoice::None)
    );

    // Exactly 75: node c = 64000, Gfree = 4000 → a = (0.5, 0.5); pod
    // (64000, 4 GPUs) → b = (0.5, 0.5); dot = 0.5 → 100 (1 − 0.25) = 75.
    let half = state_after(&n, &[(req(64000, 4000), &[0, 1, 2, 3])]);
    assert_eq!(half.free.cpu, 64000);
    assert_eq!(
        sd(dp, &ctx, &n, &half, &req(64000, 4000)),
        (750, DeviceChoice::LowestWhole)
    );
    // One milli-CPU more free on the node: a0 = 64001/128000, dot = 0.5 +
    // 0.5/128000 → 74.9998 → 74.
    let more = state_after(&n, &[(req(63999, 4000), &[0, 1, 2, 3])]);
    assert_eq!(more.free.cpu, 64001);
    assert_eq!(score(dp, &ctx, &n, &more, &req(64000, 4000)).score, 740);
    // One milli-CPU less asked: dot = 0.5 − 0.5/128000 → 75.0002 → 75.
    assert_eq!(score(dp, &ctx, &n, &half, &req(63999, 4000)).score, 750);
}

#[test]
fn dotprod_placement_and_name_tie_break() {
    // a = (128000, 8 GPUs), b = c = (64000, 4 GPUs). Pod (32000, 1 GPU),
    // b = (0.25, 0.125). a: dot 0.375 → 81.25 → 81. b, c: (0.5, 0.5) → dot
    // 0.1875 → 90.625 → 90 → tie → b.
    let nodes = vec![
        node("c", 64000, 4, "T4"),
        openb_max_node("a"),
        node("b", 64000, 4, "T4"),
    ];
    let mut p = placer(GpuStrategy::DotProd, nodes, TypicalPods::default());
    let pod = req(32000, 1000);
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("b", &[0]));
    // b: (0.25, 0.375) → dot 0.0625 + 0.046875 = 0.109375 → 94.53 → 94.
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("b", &[1]));
    // b has no CPU left: c 90 > a 81.
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("c", &[0]));
}

// ---------------------------------------------------------------------------
// 03-GpuClustering

#[test]
fn clustering_four_cases_with_base() {
    let big = openb_max_node("big");
    let four = node("four", 64000, 4, "T4");
    let ctx = PolicyContext::for_nodes([&big, &four], TypicalPods::default(), 0);
    let cl = GpuStrategy::Clustering;
    let share = req(1000, 300);
    // base = (25 × (8000 − Gfree)) div 8000.

    // Only the shared tag, pod shared: Gfree 7500 → base 12500 div 8000 = 1
    // → 1 + 75 = 76.
    let s = state_after(&big, &[(req(1000, 500), &[0])]);
    assert_eq!(score(cl, &ctx, &big, &s, &share).score, 760);
    // Shared and 1-GPU tags, pod shared: Gfree 6500 → base 37500 div 8000 =
    // 4 → 4 + 50 = 54.
    let s = state_after(&big, &[(req(1000, 500), &[0]), (req(1000, 1000), &[1])]);
    assert_eq!(score(cl, &ctx, &big, &s, &share).score, 540);
    // The same node for a 1-GPU pod: it hosts its tag, D = 2 → 54.
    assert_eq!(score(cl, &ctx, &big, &s, &req(1000, 1000)).score, 540);
    // No tag at all: fresh 8-GPU node → 0 + 25 = 25.
    assert_eq!(
        score(cl, &ctx, &big, &NodeState::new(&big), &share).score,
        250
    );
    // A CPU-only pod adds no tag: still 25.
    let s = state_after(&big, &[(req(1000, 0), &[])]);
    assert!(s.tags.is_empty());
    assert_eq!(score(cl, &ctx, &big, &s, &share).score, 250);
    // Fresh 4-GPU node in a cluster whose largest node has 8 GPUs: Gfree
    // 4000 → base 100000 div 8000 = 12 (12.5 truncated) → 37.
    assert_eq!(
        score(cl, &ctx, &four, &NodeState::new(&four), &share).score,
        370
    );
    // Only another tag (2-GPU), pod shared: Gfree 6000 → base 50000 div
    // 8000 = 6 → 6 + 0 = 6.
    let s = state_after(&big, &[(req(1000, 2000), &[0, 1])]);
    assert_eq!(score(cl, &ctx, &big, &s, &share).score, 60);
    // Only the 1-GPU tag, 1-GPU pod: Gfree 7000 → 25000 div 8000 = 3 → 78.
    let s = state_after(&big, &[(req(1000, 1000), &[0])]);
    assert_eq!(score(cl, &ctx, &big, &s, &req(1000, 1000)).score, 780);
    // CPU-only pods: 0 everywhere.
    assert_eq!(score(cl, &ctx, &big, &s, &req(1000, 0)).score, 0);
    assert_eq!(
        score(cl, &ctx, &four, &NodeState::new(&four), &req(1000, 0)).score,
        0
    );
}

#[test]
fn clustering_placement_and_name_tie_break() {
    let nodes = vec![
        openb_max_node("c"),
        openb_max_node("b"),
        openb_max_node("a"),
    ];
    let mut p = placer(GpuStrategy::Clustering, nodes, TypicalPods::default());
    let any = any_model();
    // 1-GPU pod: all fresh → 25 each → a, device 0.
    assert_eq!(place(&mut p, &req(1000, 1000), &any, 0), placed("a", &[0]));
    // Share 500: a hosts only 1-GPU → base 25000 div 8000 = 3 → 3; b, c 25
    // → b, device 0 (all free 1000 → lowest index).
    assert_eq!(place(&mut p, &req(1000, 500), &any, 0), placed("b", &[0]));
    // Share 500: b → base 12500 div 8000 = 1, + 75 = 76 → b, device 0 (the
    // smallest free that fits: 500).
    assert_eq!(place(&mut p, &req(1000, 500), &any, 0), placed("b", &[0]));
    // 2-GPU: a 3 (other tag), b base 25000 div 8000 = 3 (other tag), c 25 →
    // c.
    assert_eq!(
        place(&mut p, &req(1000, 2000), &any, 0),
        placed("c", &[0, 1])
    );
    // CPU-only: 0 everywhere → a.
    assert_eq!(place(&mut p, &req(1000, 0), &any, 0), placed("a", &[]));
}

// ---------------------------------------------------------------------------
// 04-GpuPacking

#[test]
fn packing_case_values() {
    let n1 = node("g1", 64000, 1, "T4");
    let n2 = node("g2", 64000, 2, "T4");
    let n4 = node("g4", 64000, 4, "T4");
    let n8 = node("g8", 64000, 8, "T4");
    let n9 = node("g9", 64000, 9, "T4");
    let ctx = PolicyContext::for_nodes([&n1, &n2, &n4, &n8, &n9], TypicalPods::default(), 0);
    let pk = GpuStrategy::Packing;
    let share = req(1000, 500);

    // Case 3, idle nodes: max(33 − G, G) = 32, 31, 29, 25 for 1, 2, 4, 8.
    for (n, want) in [(&n1, 320), (&n2, 310), (&n4, 290), (&n8, 250)] {
        let s = NodeState::new(n);
        assert_eq!(score(pk, &ctx, n, &s, &share).score, want, "{}", n.name);
        assert_eq!(
            score(pk, &ctx, n, &s, &req(1000, 1000)).score,
            want,
            "{}",
            n.name
        );
    }
    assert_eq!(
        score(pk, &ctx, &n8, &NodeState::new(&n8), &req(1000, 8000)).score,
        250
    );

    // Case 2 (a fresh device needed): device 0 has 200 free, the rest 1000.
    // Share 500: sorted free (200, 1000, ...), first that fits is a fresh
    // one → nf = 1 → max(50 − 1, 33) = 49, device 1 (smallest free that
    // fits, lowest index).
    let s4 = state_after(&n4, &[(req(1000, 800), &[0])]);
    assert_eq!(sd(pk, &ctx, &n4, &s4, &share), (490, DeviceChoice::One(1)));
    assert_eq!(score(pk, &ctx, &n4, &s4, &req(1000, 1000)).score, 490);
    // 2-GPU: nf = 2 → 48; 4-GPU on 8-GPU node: 46; 8-GPU on a 9-GPU node: 42.
    assert_eq!(score(pk, &ctx, &n4, &s4, &req(1000, 2000)).score, 480);
    let s8 = state_after(&n8, &[(req(1000, 800), &[0])]);
    assert_eq!(score(pk, &ctx, &n8, &s8, &req(1000, 4000)).score, 460);
    let s9 = state_after(&n9, &[(req(1000, 800), &[0])]);
    assert_eq!(score(pk, &ctx, &n9, &s9, &req(1000, 8000)).score, 420);

    // Case 1 (partial device only): 100 − ⌊free% / 10⌋.
    // Free 500, share 300: r = 500·100 div 1000 = 50 → 100 − 5 = 95.
    let s = state_after(&n4, &[(req(1000, 500), &[0])]);
    assert_eq!(
        sd(pk, &ctx, &n4, &s, &req(1000, 300)),
        (950, DeviceChoice::One(0))
    );
    // Free 990: r = 99 → 100 − 9 = 91.
    let s = state_after(&n4, &[(req(1000, 10), &[0])]);
    assert_eq!(score(pk, &ctx, &n4, &s, &req(1000, 300)).score, 910);
    // Free 95, share 50: r = 9500 div 1000 = 9 → 100 − 0 = 100.
    let s = state_after(&n4, &[(req(1000, 905), &[0])]);
    assert_eq!(score(pk, &ctx, &n4, &s, &req(1000, 50)).score, 1000);
    // Free 105, share 100: r = 10 → 99.
    let s = state_after(&n4, &[(req(1000, 895), &[0])]);
    assert_eq!(score(pk, &ctx, &n4, &s, &req(1000, 100)).score, 990);
    // Free [200, 500, 300, 1000], share 250: sorted 200, 300, 500, 1000; the
    // first that fits is device 2 (300) → r = 30 → 97, device 2.
    let s = state_after(
        &n4,
        &[
            (req(1000, 800), &[0]),
            (req(1000, 500), &[1]),
            (req(1000, 700), &[2]),
        ],
    );
    assert_eq!(
        sd(pk, &ctx, &n4, &s, &req(1000, 250)),
        (970, DeviceChoice::One(2))
    );

    // CPU-only: 0 on every node.
    assert_eq!(
        score(pk, &ctx, &n1, &NodeState::new(&n1), &req(1000, 0)).score,
        0
    );
    assert_eq!(score(pk, &ctx, &n4, &s, &req(1000, 0)).score, 0);
}

#[test]
fn packing_placement_and_name_tie_break() {
    let nodes = vec![
        node("c", 64000, 4, "T4"),
        node("a", 64000, 8, "T4"),
        node("b", 64000, 4, "T4"),
    ];
    let mut p = placer(GpuStrategy::Packing, nodes, TypicalPods::default());
    let any = any_model();
    // Share 300, all idle: a 25; b, c 29 → b, device 0.
    assert_eq!(place(&mut p, &req(1000, 300), &any, 0), placed("b", &[0]));
    // Share 300: b case 1, free 700 → 100 − 7 = 93 → b, device 0.
    assert_eq!(place(&mut p, &req(1000, 300), &any, 0), placed("b", &[0]));
    // 1-GPU: b case 2 (nf = 1) → 49 > c 29 > a 25 → b, device 1.
    assert_eq!(place(&mut p, &req(1000, 1000), &any, 0), placed("b", &[1]));
    // CPU-only: 0 everywhere → a.
    assert_eq!(place(&mut p, &req(1000, 0), &any, 0), placed("a", &[]));
    // A 1-GPU idle node beats an 8-GPU idle one (32 > 25) though it sorts
    // last.
    let mut p = placer(
        GpuStrategy::Packing,
        vec![node("a", 64000, 8, "T4"), node("z", 64000, 1, "T4")],
        TypicalPods::default(),
    );
    assert_eq!(place(&mut p, &req(1000, 500), &any, 0), placed("z", &[0]));
}

// ---------------------------------------------------------------------------
// 05-BestFit

#[test]
fn bestfit_scores_and_exact_boundary() {
    let n = openb_max_node("n");
    let ctx = PolicyContext::for_nodes([&n], TypicalPods::default(), 0);
    let bf = GpuStrategy::BestFit;
    // s = (c_n − c_p)/128000 × 0.5 + (Gfree − R)/8000 × 0.5; raw = ⌊100 (1 − s)⌋.
    // Node c = 96000, Gfree = 6000 (2 GPUs taken).
    let s = state_after(&n, &[(req(32000, 2000), &[0, 1])]);
    assert_eq!(
        (
            s.free.cpu,
            device_free(&s).iter().map(|&f| f as u64).sum::<u64>()
        ),
        (96000, 6000)
    );
    // Pod (64000, 4 GPUs): cpu left 32000 → 0.125, GPU left 2000 → 0.125; s
    // = 0.25 → exactly 75 (not 74).
    assert_eq!(
        sd(bf, &ctx, &n, &s, &req(64000, 4000)),
        (750, DeviceChoice::LowestWhole)
    );
    // 63999 CPU: cpu left 32001 → 74.9996 → 74.
    assert_eq!(score(bf, &ctx, &n, &s, &req(63999, 4000)).score, 740);
    // 64001 CPU: cpu left 31999 → 75.0004 → 75.
    assert_eq!(score(bf, &ctx, &n, &s, &req(64001, 4000)).score, 750);
    // Fresh node, pod (32000, 1 GPU): 96000 → 0.375, 7000 → 0.4375; s =
    // 0.8125 → 18.75 → 18.
    assert_eq!(
        score(bf, &ctx, &n, &NodeState::new(&n), &req(32000, 1000)).score,
        180
    );
    // CPU-only (R = 0) on the same fresh node, 64000 CPU: 0.25 + 0.5 → 25.
    assert_eq!(
        sd(bf, &ctx, &n, &NodeState::new(&n), &req(64000, 0)),
        (250, DeviceChoice::None)
    );
}

#[test]
fn bestfit_placement_and_name_tie_break() {
    // a = (128000, 8 GPUs): pod (32000, 1 GPU) → 18 (above). b = c =
    // (64000, 4 GPUs): 32000 → 0.125, 3000 → 0.1875; s = 0.3125 → 68.75 →
    // 68 → tie → b.
    let nodes = vec![
        node("c", 64000, 4, "T4"),
        openb_max_node("a"),
        node("b", 64000, 4, "T4"),
    ];
    let mut p = placer(GpuStrategy::BestFit, nodes, TypicalPods::default());
    let pod = req(32000, 1000);
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("b", &[0]));
    // b: cpu left 0, GPU left 2000 → s = 0.125 → 87.5 → 87.
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("b", &[1]));
    // b has no CPU left: c 68 > a 18.
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("c", &[0]));
}

// ---------------------------------------------------------------------------
// Device choice shared by the "best" policies

#[test]
fn best_device_choice_for_shares_is_smallest_fitting_free_lowest_index() {
    let n = node("n", 64000, 4, "T4");
    let ctx = PolicyContext::for_nodes([&n], TypicalPods::default(), 0);
    // Free [500, 300, 300, 1000].
    let s = state_after(
        &n,
        &[
            (req(1, 500), &[0]),
            (req(1, 700), &[1]),
            (req(1, 700), &[2]),
        ],
    );
    assert_eq!(device_free(&s), vec![500, 300, 300, 1000]);
    for strategy in BEST_POLICIES {
        let dev = |m: u64| score(strategy, &ctx, &n, &s, &req(1, m)).devices;
        // 200: smallest free ≥ 200 is 300 (devices 1 and 2) → 1.
        assert_eq!(dev(200), DeviceChoice::One(1), "{strategy:?}");
        // 400: 500 (device 0) beats 1000.
        assert_eq!(dev(400), DeviceChoice::One(0), "{strategy:?}");
        // 600: only device 3.
        assert_eq!(dev(600), DeviceChoice::One(3), "{strategy:?}");
    }

    // The same through the Placer (one node, so only devices matter):
    // 500 → dev 0 (all free, lowest); 700 → dev 1 (dev 0 has only 500);
    // 700 → dev 2; then 200 → dev 1 (300 free, tie with dev 2).
    for strategy in BEST_POLICIES {
        let mut p = placer(strategy, vec![n.clone()], TypicalPods::default());
        let any = any_model();
        let seq: Vec<_> = [500, 700, 700, 200]
            .into_iter()
            .map(|m| place(&mut p, &req(1, m), &any, 0))
            .collect();
        assert_eq!(
            seq,
            vec![
                placed("n", &[0]),
                placed("n", &[1]),
                placed("n", &[2]),
                placed("n", &[1]),
            ],
            "{strategy:?}"
        );
    }
}

#[test]
fn whole_gpu_pods_take_lowest_indexed_free_devices_under_every_policy() {
    let n = node("n", 64000, 4, "T4");
    let t = mini_trace_typical();
    let ctx = PolicyContext::for_nodes([&n], t, 0);
    // Device 1 holds a share: free devices are 0, 2, 3.
    let s = state_after(&n, &[(req(1, 500), &[1])]);
    let c = PlacementConstraints::default();
    let two = req(1000, 2000);
    let pod = PodView::new(&two, GpuAsk::of(&two, &c).unwrap(), &c);
    for strategy in PAPER_AND_BINPACK {
        let sc = score(strategy, &ctx, &n, &s, &two);
        assert_eq!(sc.devices.slots(&n, &s, &pod), vec![0, 2], "{strategy:?}");
    }

    // §1.3: a multi-GPU share (1.5 GPUs) is rejected, never placed.
    let mut p = placer(GpuStrategy::Fgd, vec![n.clone()], mini_trace_typical());
    assert!(p.shape(&req(1000, 1500), &any_model()).is_err());
}

// ---------------------------------------------------------------------------
// GPU model restriction

#[test]
fn restricted_pod_never_lands_on_another_model() {
    let typical = mini_trace_typical();
    for strategy in GpuStrategy::ALL {
        let nodes = vec![
            node("c-a10", 64000, 8, "A10"),
            node("a-t4", 64000, 1, "T4"),
            node("b-t4", 64000, 4, "T4"),
        ];
        let mut p = Placer::new(nodes, &config(strategy, 3), typical.clone());
        let a10 = only_models(&["A10"]);
        // 16 shares of 500 fill the A10 node exactly; every one goes there.
        for salt in 0..16 {
            let (name, gpus) = place(&mut p, &req(1000, 500), &a10, salt).expect("fits on A10");
            assert_eq!(name, "c-a10", "{strategy:?}");
            assert!(gpus.iter().all(|&g| g < 8));
        }
        // The A10 node is full: the 17th fails although the T4 nodes are idle.
        assert_eq!(
            place(&mut p, &req(1000, 500), &a10, 99),
            None,
            "{strategy:?}"
        );
        // Whole-GPU pods likewise.
        assert_eq!(
            place(&mut p, &req(1000, 1000), &a10, 100),
            None,
            "{strategy:?}"
        );
    }

    // Packing ranks the idle 1-GPU T4 node (32) above the idle 8-GPU A10
    // node (25): an unrestricted share goes to T4, a restricted one to A10.
    let nodes = vec![node("a-t4", 64000, 1, "T4"), node("b-a10", 64000, 8, "A10")];
    let ctx = PolicyContext::for_nodes(&nodes, TypicalPods::default(), 0);
    let pod = req(1000, 500);
    assert_eq!(
        score(
            GpuStrategy::Packing,
            &ctx,
            &nodes[0],
            &NodeState::new(&nodes[0]),
            &pod
        )
        .score,
        320
    );
    assert_eq!(
        score(
            GpuStrategy::Packing,
            &ctx,
            &nodes[1],
            &NodeState::new(&nodes[1]),
            &pod
        )
        .score,
        250
    );
    let mut p = placer(GpuStrategy::Packing, nodes.clone(), TypicalPods::default());
    assert_eq!(
        place(&mut p, &pod, &only_models(&["A10"]), 0),
        placed("b-a10", &[0])
    );
    let mut p = placer(GpuStrategy::Packing, nodes, TypicalPods::default());
    assert_eq!(place(&mut p, &pod, &any_model(), 0), placed("a-t4", &[0]));
}

#[test]
fn typical_pod_with_a_model_counts_other_models_as_fragment() {
    // Spec "A10||T4": empty pieces dropped, order kept in the spec string.
    let tp = TypicalPod::new(1000, 500, 1, "T4||A10", 1);
    assert_eq!(tp.spec, "T4|A10");
    assert_eq!(tp.models, vec!["A10".to_string(), "T4".to_string()]);

    let t = TypicalPods::from_classes([TypicalPod::new(1000, 500, 1, "A10", 1)], 95);
    // On a T4 node the class has no access (NA): all free GPU is fragment.
    let t4 = node("t4", 64000, 2, "T4");
    assert_eq!(frag(&t, &t4, &NodeState::new(&t4)), 2000);
    // On an A10 node it fits (Q3) and nothing is too small: 0.
    let a10 = node("a10", 64000, 2, "A10");
    assert_eq!(frag(&t, &a10, &NodeState::new(&a10)), 0);
}
