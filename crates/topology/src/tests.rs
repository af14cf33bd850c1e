use std::collections::BTreeMap;

use super::*;
use crate::generate::{LeafSpine, RailOptimized, add_nvlink_domains, leaf_spine, rail_optimized};

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("n{i:02}")).collect()
}

fn inputs<'a>(names: &'a [String], labels: &'a [BTreeMap<String, String>]) -> Vec<NodeInput<'a>> {
    names
        .iter()
        .zip(labels)
        .map(|(n, l)| NodeInput {
            name: n,
            labels: l,
            gpus: 8,
        })
        .collect()
}

fn rail(nodes: usize, per_group: u32, groups_per_block: u32) -> Topology {
    let names = names(nodes);
    let labels = vec![BTreeMap::new(); nodes];
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let spec = rail_optimized(
        &refs,
        &RailOptimized {
            nodes_per_group: per_group,
            groups_per_block,
            spines_per_block: 2,
            ..RailOptimized::default()
        },
    );
    Topology::build(&spec, &inputs(&names, &labels))
        .unwrap()
        .unwrap()
}

#[test]
fn rail_optimized_levels_and_distances() {
    // 16 nodes, 4 per leaf group, 2 groups per spine block: 4 groups, 2 blocks.
    let t = rail(16, 4, 2);
    let names: Vec<&str> = t.levels().iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["leaf", "spineBlock"]);
    assert_eq!(t.levels()[0].domains.len(), 4);
    assert_eq!(t.levels()[1].domains.len(), 2);
    assert_eq!(t.levels()[0].domains[0].name, "g0-rail0..g0-rail7");
    assert_eq!(t.levels()[0].domains[0].nodes, vec![0, 1, 2, 3]);
    assert_eq!(t.levels()[0].domains[0].parent, Some(0));
    assert_eq!(t.levels()[0].domains[2].parent, Some(1));
    // Same node, same rail in a group, other rail, other group, other block.
    assert_eq!(t.distance(0, 0, 0, 5), Distance::SameNode);
    assert_eq!(t.distance(0, 3, 1, 3), Distance::SameLeaf);
    assert_eq!(t.distance(0, 3, 1, 4), Distance::SameBlock);
    assert_eq!(t.distance(0, 3, 4, 3), Distance::SameBlock);
    assert_eq!(t.distance(0, 3, 8, 3), Distance::AcrossSpines);
    // NUMA: GPUs 0-3 on socket 0, 4-7 on socket 1.
    assert_eq!(t.gpu_numa(0, 3), Some(0));
    assert_eq!(t.gpu_numa(0, 4), Some(1));
    // The graph: 8 NICs per node, each cabled to a different leaf.
    let node0 = t
        .graph()
        .node_indices()
        .find(|&v| t.graph()[v] == Vertex::Node { name: "n00".into() })
        .unwrap();
    let nics = t
        .graph()
        .neighbors(node0)
        .filter(|&v| matches!(t.graph()[v], Vertex::Nic { .. }))
        .count();
    assert_eq!(nics, 8);
}

#[test]
fn span_counts_leaves_crossings_and_rails() {
    let t = rail(16, 4, 2);
    // Two pods of 4 GPUs on two nodes of one group, same indices: aligned, no crossing.
    let aligned = t.span(&[(0, vec![0, 1, 2, 3]), (1, vec![0, 1, 2, 3])]);
    assert_eq!(
        (
            aligned.nodes,
            aligned.leaves,
            aligned.hops,
            aligned.spine_crossings
        ),
        (2, 1, 1, 0)
    );
    assert!(aligned.rail_aligned);
    assert_eq!(aligned.level, Some(0));
    // Different indices: GPU r of one pod is on another rail than GPU r of the other.
    let skew = t.span(&[(0, vec![0, 1, 2, 3]), (1, vec![4, 5, 6, 7])]);
    assert_eq!(skew.spine_crossings, 1);
    assert!(skew.rail_aligned, "disjoint sets still partition the GPUs");
    let overlap = t.span(&[(0, vec![0, 1, 2, 3]), (1, vec![2, 3, 4, 5])]);
    assert!(!overlap.rail_aligned);
    // Four pods over two groups: ring n0 → n1 → n4 → n5 → n0 crosses twice.
    let two = t.span(&[
        (0, vec![0, 1, 2, 3, 4, 5, 6, 7]),
        (1, vec![0, 1, 2, 3, 4, 5, 6, 7]),
        (4, vec![0, 1, 2, 3, 4, 5, 6, 7]),
        (5, vec![0, 1, 2, 3, 4, 5, 6, 7]),
    ]);
    assert_eq!((two.leaves, two.hops, two.spine_crossings), (2, 4, 2));
    assert_eq!(two.level, Some(1));
    let far = t.span(&[(0, vec![0]), (8, vec![0])]);
    assert_eq!(far.level, None);
}

#[test]
fn label_contract_builds_the_same_fabric() {
    let names = names(4);
    let labels: Vec<BTreeMap<String, String>> = (0..4)
        .map(|i| {
            let g = i / 2;
            let rails: Vec<String> = (0..8).map(|r| format!("g{g}-rail{r}")).collect();
            BTreeMap::from([
                (labels::RAILS.to_string(), rails.join(",")),
                (labels::SPINE_BLOCK.to_string(), "block0".to_string()),
                (labels::GPU_NUMA.to_string(), "0,0,0,0,1,1,1,1".to_string()),
                (labels::NVLINK_DOMAIN.to_string(), format!("rack{}", i / 2)),
            ])
        })
        .collect();
    let t = Topology::build(&TopologySpec::default(), &inputs(&names, &labels))
        .unwrap()
        .unwrap();
    let lv: Vec<&str> = t.levels().iter().map(|l| l.name.as_str()).collect();
    assert_eq!(lv, ["nvlink", "leaf", "spineBlock"]);
    assert_eq!(t.levels()[1].domains.len(), 2);
    assert_eq!(t.distance(0, 2, 1, 2), Distance::SameNvlink);
    assert_eq!(t.distance(0, 2, 2, 2), Distance::SameBlock);
    assert_eq!(t.gpu_numa(3, 5), Some(1));
    // No topology at all: None.
    let plain = vec![BTreeMap::new(); 4];
    assert!(
        Topology::build(&TopologySpec::default(), &inputs(&names, &plain))
            .unwrap()
            .is_none()
    );
}

#[test]
fn tree_levels_from_labels_nest_by_path() {
    let names = names(4);
    // rack "r1" exists in two blocks: distinct domains, because the path differs.
    let labels: Vec<BTreeMap<String, String>> =
        [("b0", "r1"), ("b0", "r1"), ("b1", "r1"), ("b1", "r2")]
            .iter()
            .map(|(b, r)| {
                BTreeMap::from([
                    ("example.com/block".to_string(), b.to_string()),
                    ("example.com/rack".to_string(), r.to_string()),
                ])
            })
            .collect();
    let spec = TopologySpec {
        levels: vec![
            LevelSpec {
                name: "block".into(),
                node_label: Some("example.com/block".into()),
                ..LevelSpec::default()
            },
            LevelSpec {
                name: "rack".into(),
                node_label: Some("example.com/rack".into()),
                ..LevelSpec::default()
            },
        ],
        ..TopologySpec::default()
    };
    let t = Topology::build(&spec, &inputs(&names, &labels))
        .unwrap()
        .unwrap();
    assert_eq!(t.level_names(), ["block", "rack"]);
    let racks: Vec<&str> = t.levels()[0]
        .domains
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(racks, ["b0/r1", "b1/r1", "b1/r2"]);
    assert_eq!(t.leaf_level(), Some(0));
    assert_eq!(t.distance(0, 0, 1, 0), Distance::SameLeaf);
    assert_eq!(t.distance(2, 0, 3, 0), Distance::SameBlock);
    assert_eq!(t.distance(0, 0, 3, 0), Distance::AcrossSpines);
    // Serialises and builds back to the same levels.
    let json = serde_json_like(&t);
    assert!(json.contains("example.com/rack"));
}

/// Round-trips through the serde data model without a format crate.
fn serde_json_like(t: &Topology) -> String {
    let src: TopologySource = t.clone().into();
    let back = Topology::try_from(src.clone()).unwrap();
    assert_eq!(back.levels(), t.levels());
    format!("{src:?}")
}

fn err(spec: TopologySpec, labels: Vec<BTreeMap<String, String>>) -> String {
    let names = names(labels.len());
    Topology::build(&spec, &inputs(&names, &labels))
        .unwrap_err()
        .to_string()
}

#[test]
fn invalid_topologies_name_the_problem() {
    let none = vec![BTreeMap::new(); 3];
    let leaf = |n: &str| SwitchSpec {
        name: n.into(),
        kind: SwitchKind::Leaf,
        block: None,
    };
    let link = |a: &str, b: &str| LinkSpec {
        from: a.into(),
        to: b.into(),
    };
    // Dangling link.
    let e = err(
        TopologySpec {
            switches: vec![leaf("l0")],
            links: vec![link("n00", "l0"), link("n01", "l9")],
            ..TopologySpec::default()
        },
        none.clone(),
    );
    assert_eq!(
        e,
        "links[1] (n01 → l9): no leaf switch named \"l9\" is declared"
    );
    // Leaf linked to a leaf.
    let e = err(
        TopologySpec {
            switches: vec![leaf("l0"), leaf("l1")],
            links: vec![link("l0", "l1")],
            ..TopologySpec::default()
        },
        none.clone(),
    );
    assert!(e.contains("a leaf links up to a spine"), "{e}");
    // Node in two domains of a tree level.
    let e = err(
        TopologySpec {
            levels: vec![LevelSpec {
                name: "rack".into(),
                domains: vec![
                    DomainSpec {
                        name: "r0".into(),
                        nodes: vec!["n00".into(), "n01".into()],
                    },
                    DomainSpec {
                        name: "r1".into(),
                        nodes: vec!["n01".into()],
                    },
                ],
                ..LevelSpec::default()
            }],
            ..TopologySpec::default()
        },
        none.clone(),
    );
    assert_eq!(
        e,
        "level \"rack\": node \"n01\" is in two domains, \"r0\" and \"r1\""
    );
    // Levels that do not nest.
    let e = err(
        TopologySpec {
            levels: vec![
                LevelSpec {
                    name: "block".into(),
                    domains: vec![
                        DomainSpec {
                            name: "b0".into(),
                            nodes: vec!["n00".into()],
                        },
                        DomainSpec {
                            name: "b1".into(),
                            nodes: vec!["n01".into()],
                        },
                    ],
                    ..LevelSpec::default()
                },
                LevelSpec {
                    name: "rack".into(),
                    domains: vec![DomainSpec {
                        name: "r0".into(),
                        nodes: vec!["n00".into(), "n01".into()],
                    }],
                    ..LevelSpec::default()
                },
            ],
            ..TopologySpec::default()
        },
        none.clone(),
    );
    assert!(
        e.starts_with("level \"rack\": domain \"r0\" is not inside one domain of level \"block\""),
        "{e}"
    );
    // A level with two sources, and a fabric level with no fabric.
    let e = err(
        TopologySpec {
            levels: vec![LevelSpec {
                name: "x".into(),
                node_label: Some("a".into()),
                fabric: Some(FabricLevel::Leaf),
                ..LevelSpec::default()
            }],
            ..TopologySpec::default()
        },
        none.clone(),
    );
    assert!(
        e.starts_with("levels[0] (\"x\"): give exactly one of"),
        "{e}"
    );
    let e = err(
        TopologySpec {
            levels: vec![LevelSpec {
                name: "nvl".into(),
                fabric: Some(FabricLevel::Nvlink),
                ..LevelSpec::default()
            }],
            ..TopologySpec::default()
        },
        none.clone(),
    );
    assert!(e.contains("no NVLink domains"), "{e}");
    // A malformed label.
    let mut bad = none.clone();
    bad[1].insert(labels::GPU_NUMA.into(), "0,0,1".into());
    let e = err(TopologySpec::default(), bad);
    assert_eq!(
        e,
        "node n01: label topology.trainyard.io/gpu-numa=\"0,0,1\": expected 8 comma-separated integers, one per GPU (GPU 0 first)"
    );
}

#[test]
fn tor_fabric_and_nvlink_racks() {
    let names = names(8);
    let labels = vec![BTreeMap::new(); 8];
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut spec = leaf_spine(
        &refs,
        &LeafSpine {
            nodes_per_leaf: 4,
            leaves_per_block: 1,
            spines_per_block: 2,
            gpus_per_node: 8,
            numa_sockets: 2,
        },
    );
    add_nvlink_domains(&mut spec, &refs, 2);
    let t = Topology::build(&spec, &inputs(&names, &labels))
        .unwrap()
        .unwrap();
    assert_eq!(t.level_names(), ["spineBlock", "leaf", "nvlink"]);
    // Every GPU of a ToR node reaches the same leaf: any two GPUs share it.
    assert_eq!(t.distance(0, 1, 2, 6), Distance::SameLeaf);
    assert_eq!(t.distance(0, 1, 1, 6), Distance::SameNvlink);
    assert_eq!(t.distance(0, 1, 4, 1), Distance::AcrossSpines);
    assert_eq!(t.common_level(&[0, 1]), Some(0));
    assert_eq!(t.common_level(&[0, 3]), Some(1));
}
