//! Topology-aware gang placement, through the one entry point `schedule`.
//! Each test builds a small rail-optimized fabric with the generator and
//! checks where the gang lands, and that topology-blind placement (the
//! baseline) does worse where it should.

use expect_test::expect;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use trainyard_model::topology::generate::{RailOptimized, add_nvlink_domains, rail_optimized};
use trainyard_model::topology::{NodeInput, Topology, TopologySpec};
use trainyard_model::{
    ExternalPod, Job, Node, QueueSpec, QueueTree, Resources, Snapshot, SubGroup, Timestamp,
    TopologyConstraint,
};
use trainyard_sched::{Config, Decisions, TopologyPlacement, schedule};

const GI: u64 = 1 << 30;

fn gpus(k: u64) -> Resources {
    Resources::new(1000, GI, 0).with_gpus(k)
}

/// Nodes named in order, 8 GPUs each, `per_group` nodes per leaf group.
fn cluster(names: &[&str], per_group: u32, nvlink: Option<u32>) -> (Vec<Node>, Arc<Topology>) {
    let nodes: Vec<Node> = names
        .iter()
        .map(|n| Node::new(*n, 128_000, 1024 * GI, 8))
        .collect();
    let mut spec: TopologySpec = rail_optimized(
        names,
        &RailOptimized {
            nodes_per_group: per_group,
            groups_per_block: 8,
            spines_per_block: 2,
            ..RailOptimized::default()
        },
    );
    if let Some(n) = nvlink {
        add_nvlink_domains(&mut spec, names, n);
    }
    let inputs: Vec<NodeInput> = nodes.iter().map(Node::topology_input).collect();
    let topo = Topology::build(&spec, &inputs).unwrap().unwrap();
    (nodes, Arc::new(topo))
}

/// A pod outside Trainyard holding `devs` on `node`.
fn busy(node: &str, devs: &[u32]) -> ExternalPod {
    ExternalPod {
        name: format!("other/{node}-{}", devs.len()),
        node: node.into(),
        requests: gpus(devs.len() as u64),
        gpus: Some(devs.to_vec()),
        ..Default::default()
    }
}

fn gang(id: &str, pods: usize, k: u64, topology: TopologyConstraint) -> Job {
    let mut j = Job::gang(id, "q", vec![gpus(k); pods]);
    j.topology = topology;
    for (i, t) in j.tasks.iter_mut().enumerate() {
        t.rank = Some(i as u32);
    }
    j
}

fn run(
    nodes: Vec<Node>,
    topo: &Arc<Topology>,
    external: Vec<ExternalPod>,
    jobs: Vec<Job>,
    placement: TopologyPlacement,
) -> Decisions {
    let snapshot = Snapshot::new(
        nodes,
        QueueTree::build(vec![QueueSpec::new("q")]).unwrap(),
        jobs,
    )
    .with_external(external)
    .with_topology(Some(Arc::clone(topo)));
    let mut config = Config::default();
    config.topology.placement = placement;
    schedule(&snapshot, &config, Timestamp(0))
}

/// (task, node, gpus) of every bind, sorted by task.
fn binds(d: &Decisions) -> Vec<(String, String, Vec<u32>)> {
    let mut v: Vec<_> = d
        .binds
        .iter()
        .map(|b| (b.task.to_string(), b.node.to_string(), b.gpus.clone()))
        .collect();
    v.sort();
    v
}

fn nodes_of(d: &Decisions) -> BTreeSet<String> {
    d.binds.iter().map(|b| b.node.to_string()).collect()
}

fn required(level: &str) -> TopologyConstraint {
    TopologyConstraint {
        required: Some(level.into()),
        ..TopologyConstraint::default()
    }
}

fn preferred(level: &str) -> TopologyConstraint {
    TopologyConstraint {
        preferred: Some(level.into()),
        ..TopologyConstraint::default()
    }
}

#[test]
fn four_gpu_pods_get_the_same_rails_on_four_nodes() {
    // One leaf group of five nodes, each half used: n0 has GPUs 4-7 free,
    // the others 0-3. A topology-blind bin-packer takes n0 first (all tie).
    let names = ["n0", "n1", "n2", "n3", "n4"];
    let (nodes, topo) = cluster(&names, 8, None);
    let mut ext = vec![busy("n0", &[0, 1, 2, 3])];
    for n in &names[1..] {
        ext.push(busy(n, &[4, 5, 6, 7]));
    }
    let job = gang("ml/ring", 4, 4, TopologyConstraint::default());
    let d = run(
        nodes.clone(),
        &topo,
        ext.clone(),
        vec![job.clone()],
        TopologyPlacement::Aware,
    );
    let b = binds(&d);
    assert_eq!(b.len(), 4);
    assert!(
        b.iter()
            .all(|(_, n, g)| n != "n0" && g == &vec![0, 1, 2, 3]),
        "{b:?}"
    );
    let p = &d.placements[0];
    assert!(p.span.rail_aligned);
    assert_eq!(p.span.spine_crossings, 0);
    assert_eq!(p.level.as_deref(), Some("leaf"));

    let blind = run(nodes, &topo, ext, vec![job], TopologyPlacement::Blind);
    let bp = &blind.placements[0];
    assert!(nodes_of(&blind).contains("n0"), "{:?}", binds(&blind));
    assert!(bp.span.spine_crossings > 0, "{bp:?}");
}

#[test]
fn small_pods_stay_on_one_numa_socket() {
    // GPUs 0-2 busy: a 2-GPU pod takes 4,5 (socket 1), not 3,4 (across sockets).
    let (nodes, topo) = cluster(&["n0"], 8, None);
    let d = run(
        nodes,
        &topo,
        vec![busy("n0", &[0, 1, 2])],
        vec![gang("ml/small", 1, 2, TopologyConstraint::default())],
        TopologyPlacement::Aware,
    );
    assert_eq!(binds(&d)[0].2, vec![4, 5]);
}

#[test]
fn required_level_pends_with_a_reason_preferred_falls_back() {
    // Two leaf groups of two nodes; one node of each is full.
    let names = ["a0", "a1", "b0", "b1"];
    let (nodes, topo) = cluster(&names, 2, None);
    let ext = vec![
        busy("a0", &[0, 1, 2, 3, 4, 5, 6, 7]),
        busy("b0", &[0, 1, 2, 3, 4, 5, 6, 7]),
    ];
    let d = run(
        nodes.clone(),
        &topo,
        ext.clone(),
        vec![gang("ml/strict", 2, 8, required("leaf"))],
        TopologyPlacement::Aware,
    );
    assert!(d.binds.is_empty());
    expect!["gang needs 16 GPUs within one leaf; largest free leaf has 8 (g0-rail0..g0-rail7)"]
        .assert_eq(&d.pending[0].message);
    let d = run(
        nodes,
        &topo,
        ext,
        vec![gang("ml/loose", 2, 8, preferred("leaf"))],
        TopologyPlacement::Aware,
    );
    assert_eq!(nodes_of(&d), BTreeSet::from(["a1".into(), "b1".into()]));
    let p = &d.placements[0];
    assert_eq!((p.span.leaves, p.level.as_deref()), (2, Some("spineBlock")));
    assert_eq!(p.tightest_feasible.as_deref(), Some("spineBlock"));
    assert!(p.in_tightest);
}

#[test]
fn gang_larger_than_a_leaf_spans_two_with_neighbouring_ranks_together() {
    // Three groups of two empty nodes; a gang of three 8-GPU pods needs two
    // leaves: ranks 0,1 share one, rank 2 the other.
    let names = ["a0", "a1", "b0", "b1", "c0", "c1"];
    let (nodes, topo) = cluster(&names, 2, None);
    let mut job = gang("ml/wide", 3, 8, TopologyConstraint::default());
    // Names out of rank order: rank decides, not the name.
    job.tasks[0].rank = Some(2);
    job.tasks[2].rank = Some(0);
    let d = run(
        nodes,
        &topo,
        Vec::new(),
        vec![job],
        TopologyPlacement::Aware,
    );
    let p = &d.placements[0];
    assert_eq!(p.span.leaves, 2);
    let by_task: BTreeMap<String, String> = d
        .binds
        .iter()
        .map(|b| (b.task.to_string(), b.node.to_string()))
        .collect();
    let group = |n: &str| n.chars().next();
    // Ranks 0 and 1 (tasks -2 and -1) share a leaf group; rank 2 is alone.
    assert_eq!(group(&by_task["ml/wide-2"]), group(&by_task["ml/wide-1"]));
    assert_ne!(group(&by_task["ml/wide-0"]), group(&by_task["ml/wide-1"]));
}

#[test]
fn a_partly_used_leaf_is_chosen_over_an_empty_one() {
    // Group 0 (a*) is empty; group 1 has b0 busy and b1, b2 free. A 2-node
    // gang fits in both; the partly used leaf is the best fit. Blind
    // bin-packing sees equal nodes and takes a0, a1 by name.
    let names = ["a0", "a1", "a2", "b0", "b1", "b2"];
    let (nodes, topo) = cluster(&names, 3, None);
    let ext = vec![busy("b0", &[0, 1, 2, 3, 4, 5, 6, 7])];
    let job = gang("ml/two", 2, 8, TopologyConstraint::default());
    let d = run(
        nodes.clone(),
        &topo,
        ext.clone(),
        vec![job.clone()],
        TopologyPlacement::Aware,
    );
    assert_eq!(nodes_of(&d), BTreeSet::from(["b1".into(), "b2".into()]));
    let blind = run(nodes, &topo, ext, vec![job], TopologyPlacement::Blind);
    assert_eq!(nodes_of(&blind), BTreeSet::from(["a0".into(), "a1".into()]));
}

#[test]
fn nvlink_domain_is_the_tightest_level() {
    // One leaf group of four nodes, NVLink domains {n0,n1} and {n2,n3}; n1
    // is half used, so only {n2,n3} holds two 8-GPU pods.
    let names = ["n0", "n1", "n2", "n3"];
    let (nodes, topo) = cluster(&names, 4, Some(2));
    let ext = vec![busy("n1", &[0, 1, 2, 3])];
    let job = gang("ml/nvl", 2, 8, TopologyConstraint::default());
    let d = run(
        nodes.clone(),
        &topo,
        ext.clone(),
        vec![job.clone()],
        TopologyPlacement::Aware,
    );
    assert_eq!(nodes_of(&d), BTreeSet::from(["n2".into(), "n3".into()]));
    assert_eq!(d.placements[0].level.as_deref(), Some("nvlink"));
    let blind = run(nodes, &topo, ext, vec![job], TopologyPlacement::Blind);
    assert_eq!(blind.placements[0].level.as_deref(), Some("leaf"));
    assert!(!blind.placements[0].in_tightest);
}

#[test]
fn max_leaves_caps_the_spread() {
    let names = ["a0", "a1", "b0", "b1"];
    let (nodes, topo) = cluster(&names, 2, None);
    let job = gang(
        "ml/capped",
        3,
        8,
        TopologyConstraint {
            max_leaves: Some(1),
            ..TopologyConstraint::default()
        },
    );
    let d = run(
        nodes,
        &topo,
        Vec::new(),
        vec![job],
        TopologyPlacement::Aware,
    );
    assert!(d.binds.is_empty());
    expect!["gang needs 24 GPUs over at least 2 leaves; maxLeaves is 1"]
        .assert_eq(&d.pending[0].message);
}

#[test]
fn sub_groups_each_inside_one_leaf() {
    // Two groups of three nodes; a0 busy. Two sub-groups of two 8-GPU pods,
    // each required inside one leaf: one per group, never split.
    let names = ["a0", "a1", "a2", "b0", "b1", "b2"];
    let (nodes, topo) = cluster(&names, 3, None);
    let mut job = Job::gang("ml/sg", "q", vec![gpus(8); 4]);
    job.topology = required("spineBlock");
    job.subgroups = ["x", "y"]
        .iter()
        .map(|n| SubGroup {
            name: n.to_string(),
            min_member: 2,
            topology: required("leaf"),
        })
        .collect();
    for (i, t) in job.tasks.iter_mut().enumerate() {
        t.subgroup = Some(if i < 2 { "x" } else { "y" }.into());
    }
    let d = run(
        nodes,
        &topo,
        vec![busy("a0", &[0, 1, 2, 3, 4, 5, 6, 7])],
        vec![job],
        TopologyPlacement::Aware,
    );
    assert_eq!(d.binds.len(), 4, "{:?}", d.pending);
    let group_of = |task: &str| {
        d.binds
            .iter()
            .find(|b| b.task == task)
            .map(|b| b.node.chars().next())
    };
    assert_eq!(group_of("ml/sg-0"), group_of("ml/sg-1"));
    assert_eq!(group_of("ml/sg-2"), group_of("ml/sg-3"));
}

#[test]
fn unknown_level_is_rejected_with_the_levels_listed() {
    let (nodes, topo) = cluster(&["n0", "n1"], 2, None);
    let d = run(
        nodes,
        &topo,
        Vec::new(),
        vec![gang("ml/typo", 2, 8, required("rack"))],
        TopologyPlacement::Aware,
    );
    expect![[r#"rejected: gang topology.required: no level "rack" in the cluster topology (levels, widest first: spineBlock, leaf)"#]].assert_eq(&d.pending[0].message);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// On random fabrics and loads: no device is handed out twice, gangs are
    /// all or nothing, and a gang with a required leaf sits in one leaf.
    #[test]
    fn topology_placement_keeps_the_invariants(
        groups in 1usize..4,
        per_group in 1usize..4,
        load in proptest::collection::vec(0u32..9, 12),
        gangs in proptest::collection::vec((1usize..5, prop_oneof![Just(1u64), Just(2), Just(4), Just(8)], any::<bool>()), 1..5),
    ) {
        let names: Vec<String> = (0..groups * per_group).map(|i| format!("n{i:02}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let (nodes, topo) = cluster(&refs, per_group as u32, None);
        let ext: Vec<ExternalPod> = names
            .iter()
            .zip(&load)
            .filter(|(_, l)| **l > 0)
            .map(|(n, l)| busy(n, &(0..*l.min(&8)).collect::<Vec<_>>()))
            .collect();
        let jobs: Vec<Job> = gangs
            .iter()
            .enumerate()
            .map(|(i, (pods, k, req))| {
                gang(
                    &format!("ml/g{i}"),
                    *pods,
                    *k,
                    if *req { required("leaf") } else { TopologyConstraint::default() },
                )
            })
            .collect();
        let d = run(nodes, &topo, ext.clone(), jobs.clone(), TopologyPlacement::Aware);
        let mut used: BTreeSet<(String, u32)> = BTreeSet::new();
        for e in &ext {
            for g in e.gpus.iter().flatten() {
                used.insert((e.node.to_string(), *g));
            }
        }
        for b in &d.binds {
            for g in &b.gpus {
                prop_assert!(*g < 8);
                prop_assert!(used.insert((b.node.to_string(), *g)), "GPU {g} of {} twice", b.node);
            }
        }
        for (job, (pods, _, req)) in jobs.iter().zip(&gangs) {
            let mine: Vec<_> = d.binds.iter().filter(|b| b.job == job.id).collect();
            prop_assert!(mine.is_empty() || mine.len() == *pods, "partial gang {}", job.id);
            if *req && !mine.is_empty() {
                let leaves: BTreeSet<u32> = mine
                    .iter()
                    .map(|b| topo.levels()[0].of_node[topo.node_id(&b.node).unwrap() as usize].unwrap())
                    .collect();
                prop_assert_eq!(leaves.len(), 1);
            }
        }
    }
}

/// A reservation's projection tries the gang's placement by the topology
/// search and rolls it back: none of it may stay in the cycle's state.
/// Four nodes, one leaf group of four: n1 to n3 run 8-GPU jobs until
/// 01:00, 02:00 and 03:00; n0 is free. At 00:30 the 2 x 8-GPU gang does
/// not fit and reserves n0 and n1 from 01:00; the 1-GPU job behind it
/// ends by 00:40 and is backfilled onto n0, with or without a topology.
#[test]
fn a_reservations_trial_placement_leaves_nothing_behind() {
    let (nodes, topo) = cluster(&["n0", "n1", "n2", "n3"], 4, None);
    let running = |id: &str, node: &str, walltime: u64| {
        let mut j = Job::gang(id, "q", vec![gpus(8)]);
        j.tasks[0].state = trainyard_model::TaskState::Bound {
            node: node.into(),
            gpus: None,
        };
        j.tasks[0].started = Some(Timestamp::from_secs(0));
        j.walltime_seconds = Some(walltime);
        j
    };
    let mut big = gang("q/big", 2, 8, TopologyConstraint::default());
    big.submit_time = Timestamp::from_secs(100);
    let mut small = Job::gang("q/small", "q", vec![gpus(1)]);
    small.submit_time = Timestamp::from_secs(200);
    small.walltime_seconds = Some(600);
    let jobs = vec![
        running("q/r1", "n1", 3600),
        running("q/r2", "n2", 7200),
        running("q/r3", "n3", 10_800),
        big,
        small,
    ];
    for with_topology in [false, true] {
        let snapshot = Snapshot::new(
            nodes.clone(),
            QueueTree::build(vec![QueueSpec::new("q")]).unwrap(),
            jobs.clone(),
        )
        .with_topology(with_topology.then(|| Arc::clone(&topo)));
        let d = schedule(&snapshot, &Config::default(), Timestamp::from_secs(1800));
        assert_eq!(
            binds(&d)
                .iter()
                .map(|(t, n, _)| (t.as_str(), n.as_str()))
                .collect::<Vec<_>>(),
            [("q/small-0", "n0")],
            "topology {with_topology}: {d:?}"
        );
        let held: Vec<(String, i64)> = d
            .reservations
            .iter()
            .map(|r| (r.job.to_string(), r.start.0 / 1000))
            .collect();
        assert_eq!(
            held,
            [("q/big".to_string(), 3600)],
            "topology {with_topology}"
        );
    }
}
