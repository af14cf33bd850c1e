use super::*;

// --- Topology, topology constraints and ranks (docs/topology-api.md) -------

/// A node with `gpus` devices and `labels` (a YAML flow mapping body).
fn topo_node(name: &str, gpus: u32, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{{labels}}}}}\nstatus: {{allocatable: {{cpu: \"64\", nvidia.com/gpu: \"{gpus}\"}}}}\n"
    )
}

/// A pod of group `g` in namespace ml asking for one GPU; `meta` is extra
/// metadata (`labels`/`annotations` lines).
fn gang_pod(name: &str, meta: &str) -> String {
    pod(
        name,
        meta,
        "  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]\n",
    )
}

/// Two rail-optimized nodes (each NIC on its own rail leaf) and a ToR node
/// labelled onto the same spine; n1 and n2 share an NVLink domain.
const RAIL_TOPOLOGY: &str = r#"apiVersion: trainyard.io/v1alpha1
kind: Topology
metadata: {name: fabric}
spec:
  switches:
  - {name: rail-0, kind: leaf}
  - {name: rail-1, kind: leaf}
  - {name: tor-b, kind: leaf}
  - {name: spine-0, kind: spine, block: b0}
  links:
  - {from: n1/nic0, to: rail-0}
  - {from: n1/nic1, to: rail-1}
  - {from: n2/nic0, to: rail-0}
  - {from: n2/nic1, to: rail-1}
  - {from: rail-0, to: spine-0}
  - {from: rail-1, to: spine-0}
  - {from: tor-b, to: spine-0}
  nodes:
  - node: n1
    gpus: [{index: 0, numa: 0}, {index: 1, numa: 1}]
"#;

fn rail_cluster(extra: &str) -> String {
    [
        RAIL_TOPOLOGY.to_string(),
        topo_node("n1", 2, "topology.trainyard.io/nvlink-domain: rack-a"),
        topo_node("n2", 2, "topology.trainyard.io/nvlink-domain: rack-a"),
        topo_node(
            "n3",
            2,
            "topology.trainyard.io/leaf: tor-b, topology.trainyard.io/gpu-numa: \"1,0\"",
        ),
        extra.to_string(),
    ]
    .iter()
    .filter(|d| !d.is_empty())
    .cloned()
    .collect::<Vec<_>>()
    .join("---\n")
}

#[test]
fn topology_document_with_switches_links_and_node_labels() {
    let loaded = load_one(&rail_cluster("")).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let t = loaded.snapshot.topology.as_ref().expect("a topology");
    assert_eq!(t.level_names(), ["spineBlock", "leaf", "nvlink"]);
    let leaf = &t.levels()[t.level_index("leaf").unwrap()];
    let domains: Vec<(&str, usize)> = leaf
        .domains
        .iter()
        .map(|d| (d.name.as_str(), d.nodes.len()))
        .collect();
    assert_eq!(domains, [("rail-0..rail-1", 2), ("tor-b", 1)]);
    let block = &t.levels()[t.level_index("spineBlock").unwrap()];
    assert_eq!(block.domains.len(), 1);
    assert_eq!(block.domains[0].nodes.len(), 3);
    let (n1, n2, n3) = (
        t.node_id("n1").unwrap(),
        t.node_id("n2").unwrap(),
        t.node_id("n3").unwrap(),
    );
    // Rails: GPU i of n1 and n2 on rail leaf i.
    assert_eq!(t.gpu_leaf(n1, 1), t.gpu_leaf(n2, 1));
    assert_ne!(t.gpu_leaf(n1, 0), t.gpu_leaf(n1, 1));
    // NUMA from the document (n1) and from the gpu-numa label (n3).
    assert_eq!(t.gpu_numa(n1, 1), Some(1));
    assert_eq!(t.gpu_numa(n3, 0), Some(1));
    assert_eq!(
        t.distance(n1, 0, n2, 0),
        trainyard_model::topology::Distance::SameNvlink
    );
    // Names that are not nodes of the snapshot are ignored, with warnings.
    let partial = load_one(&format!("{RAIL_TOPOLOGY}---\n{}", topo_node("n2", 2, ""))).unwrap();
    assert_eq!(
        partial.warnings,
        [
            "cluster.yaml: document 1: Topology fabric: spec.nodes: n1 is not a node of the cluster; ignored",
            "cluster.yaml: document 1: Topology fabric: spec.links[0]: n1 is neither a declared switch nor a node of the cluster; ignored",
            "cluster.yaml: document 1: Topology fabric: spec.links[1]: n1 is neither a declared switch nor a node of the cluster; ignored",
        ]
    );
    // Without a topology, the snapshot has none.
    let plain = load_one(&topo_node("n1", 2, "a: b")).unwrap();
    assert!(plain.snapshot.topology.is_none());
}

/// Label levels: block, then rack (widest first), from node labels.
const TREE_TOPOLOGY: &str = r#"apiVersion: trainyard.io/v1alpha1
kind: Topology
metadata: {name: tree}
spec:
  levels:
  - {name: block, nodeLabel: cloud.example.com/block}
  - {name: rack, nodeLabel: cloud.example.com/rack}
"#;

fn tree_cluster(extra: &[String]) -> String {
    let mut docs = vec![
        TREE_TOPOLOGY.to_string(),
        topo_node(
            "a1",
            4,
            "cloud.example.com/block: b0, cloud.example.com/rack: r1",
        ),
        topo_node(
            "a2",
            4,
            "cloud.example.com/block: b0, cloud.example.com/rack: r2",
        ),
        topo_node(
            "b1",
            4,
            "cloud.example.com/block: b1, cloud.example.com/rack: r1",
        ),
    ];
    docs.extend(extra.iter().cloned());
    docs.join("---\n")
}

#[test]
fn tree_levels_and_podgroup_constraints_by_name_and_label_key() {
    let group = r#"apiVersion: trainyard.io/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: ml}
spec:
  minMember: 2
  topology: {required: cloud.example.com/block, preferred: rack, maxLeaves: 1}
  subGroups:
  - {name: w, minMember: 2, topology: {required: cloud.example.com/rack}}
"#;
    let pods = [
        gang_pod(
            "w0",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/sub-group: w}\n",
        ),
        gang_pod(
            "w1",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/sub-group: w}\n",
        ),
    ];
    let mut docs = vec![group.to_string()];
    docs.extend(pods);
    let loaded = load_one(&tree_cluster(&docs)).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let s = &loaded.snapshot;
    let t = s.topology.as_ref().unwrap();
    assert_eq!(t.level_names(), ["block", "rack"]);
    // Racks are paths below blocks: b0/r1 and b1/r1 are different racks.
    let rack = &t.levels()[t.level_index("rack").unwrap()];
    let names: Vec<&str> = rack.domains.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["b0/r1", "b0/r2", "b1/r1"]);
    let j = &s.jobs[0];
    assert_eq!(
        j.topology,
        TopologyConstraint {
            required: Some("block".into()),
            preferred: Some("rack".into()),
            max_leaves: Some(1),
        }
    );
    assert_eq!(j.subgroups[0].topology.required.as_deref(), Some("rack"));
}

#[test]
fn kai_topology_and_kai_podgroup_constraint() {
    let kai = r#"apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata: {name: cluster-topology}
spec:
  levels:
  - nodeLabel: cloud.example.com/block
  - nodeLabel: cloud.example.com/rack
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: g, namespace: ml}
spec:
  minMember: 1
  queue: default
  topologyConstraint:
    topology: other-topology
    requiredTopologyLevel: cloud.example.com/block
    preferredTopologyLevel: cloud.example.com/rack
"#;
    let mut docs = vec![kai.to_string()];
    docs.extend(["a1", "b1"].map(|n| {
        topo_node(
            n,
            4,
            "cloud.example.com/block: b0, cloud.example.com/rack: r1",
        )
    }));
    docs.push(gang_pod("p", "  annotations: {pod-group-name: g}\n"));
    let loaded = load_one(&docs.join("---\n")).unwrap();
    let t = loaded.snapshot.topology.as_ref().unwrap();
    assert_eq!(
        t.level_names(),
        ["cloud.example.com/block", "cloud.example.com/rack"]
    );
    let j = &loaded.snapshot.jobs[0];
    assert_eq!(
        j.topology.required.as_deref(),
        Some("cloud.example.com/block")
    );
    assert_eq!(
        j.topology.preferred.as_deref(),
        Some("cloud.example.com/rack")
    );
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 2: PodGroup ml/g: spec.topologyConstraint.topology names Topology \"other-topology\", but the snapshot's Topology is \"cluster-topology\"; using it"
        ]
    );
}

#[test]
fn kueue_annotations_name_levels_by_label_key() {
    let ann = |name: &str, level: &str| {
        gang_pod(
            name,
            &format!(
                "  labels: {{trainyard.io/pod-group: g}}\n  annotations: {{kueue.x-k8s.io/podset-required-topology: {level}, kueue.x-k8s.io/podset-preferred-topology: topology.trainyard.io/nvlink-domain}}\n"
            ),
        )
    };
    let loaded = load_one(&rail_cluster(&format!(
        "{}---\n{}",
        ann("a", "topology.trainyard.io/leaf"),
        ann("b", "topology.trainyard.io/leaf")
    )))
    .unwrap();
    let j = &loaded.snapshot.jobs[0];
    assert_eq!(j.topology.required.as_deref(), Some("leaf"));
    assert_eq!(j.topology.preferred.as_deref(), Some("nvlink"));
    assert_eq!(j.topology.max_leaves, None);

    // Pods of one gang must agree.
    let e = errors_of(&rail_cluster(&format!(
        "{}---\n{}",
        ann("a", "topology.trainyard.io/leaf"),
        ann("b", "spineBlock")
    )));
    expect![[r#"cluster.yaml: document 6: Pod ml/b: metadata.annotations.kueue.x-k8s.io/podset-required-topology: "spineBlock" differs from kueue.x-k8s.io/podset-required-topology="topology.trainyard.io/leaf" on Pod ml/a; all pods of a gang must name the same topology level"#]].assert_eq(&e);
}

#[test]
fn ranks_from_each_key() {
    let docs: Vec<String> = [
        ("own", "labels: {trainyard.io/rank: \"7\", training.kubeflow.org/replica-index: \"1\"}"),
        ("own-ann", "annotations: {trainyard.io/rank: \"3\"}"),
        ("kubeflow", "labels: {training.kubeflow.org/replica-index: \"2\"}"),
        (
            "jobset",
            "labels: {jobset.sigs.k8s.io/job-index: \"1\", batch.kubernetes.io/job-completion-index: \"4\"}",
        ),
        ("indexed", "labels: {batch.kubernetes.io/job-completion-index: \"5\"}"),
        ("indexed-ann", "annotations: {batch.kubernetes.io/job-completion-index: \"6\"}"),
        ("none", "labels: {app: x}"),
    ]
    .iter()
    .map(|(n, m)| gang_pod(n, &format!("  {m}\n")))
    .collect();
    let loaded = load_one(&docs.join("---\n")).unwrap();
    let rank = |n: &str| task(&loaded, &format!("ml/{n}")).rank;
    assert_eq!(rank("own"), Some(7));
    assert_eq!(rank("own-ann"), Some(3));
    assert_eq!(rank("kubeflow"), Some(2));
    assert_eq!(rank("jobset"), Some(65_536 + 4));
    assert_eq!(rank("indexed"), Some(5));
    assert_eq!(rank("indexed-ann"), Some(6));
    assert_eq!(rank("none"), None);
}

#[test]
fn topology_bad_input_names_file_object_and_field() {
    // Unknown level, listing the valid ones widest first.
    let group = |topology: &str| {
        format!(
            "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: g, namespace: ml}}\nspec: {{topology: {topology}}}\n---\n{}",
            gang_pod("p", "  labels: {trainyard.io/pod-group: g}\n")
        )
    };
    expect![[r#"cluster.yaml: document 5: PodGroup ml/g: spec.topology.required: unknown topology level "rack"; expected one of spineBlock, leaf, nvlink (a level name, or the node label key of a label level)"#]].assert_eq(&errors_of(&rail_cluster(&group("{required: rack}"))));
    // A constraint without any topology.
    expect![[r#"
        cluster.yaml: document 1: PodGroup ml/g: spec.topology.preferred: "leaf" names a topology level, but the cluster has no topology (no Topology document and no topology.trainyard.io/ node labels)
        cluster.yaml: document 1: PodGroup ml/g: spec.topology.maxLeaves: maxLeaves needs a topology, but the cluster has no topology (no Topology document and no topology.trainyard.io/ node labels)"#]].assert_eq(&errors_of(&group("{preferred: leaf, maxLeaves: 2}")));
    // maxLeaves 0.
    expect!["cluster.yaml: document 5: PodGroup ml/g: spec.topology.maxLeaves: must be at least 1, found 0"].assert_eq(&errors_of(&rail_cluster(&group("{maxLeaves: 0}"))));
    // A link to a switch nobody declared.
    let dangling =
        RAIL_TOPOLOGY.replace("{from: tor-b, to: spine-0}", "{from: tor-b, to: spine-9}");
    expect![[r#"cluster.yaml: document 1: Topology fabric: spec.links[6]: tor-b → spine-9: no spine switch named "spine-9" is declared"#]].assert_eq(&errors_of(&format!("{dangling}---\n{}", topo_node("n1", 2, ""))));
    // Two Topology documents.
    let e = load(
        &[
            Source::new("a.yaml", RAIL_TOPOLOGY),
            Source::new("b.yaml", format!("---\n{TREE_TOPOLOGY}")),
        ],
        &LoadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    expect!["b.yaml: document 1: Topology tree: a snapshot has at most one Topology document; Topology fabric is already defined in a.yaml: document 1"].assert_eq(&e);
    // A rank that is not a whole number.
    expect![[r#"cluster.yaml: document 1: Pod ml/p: metadata.labels.training.kubeflow.org/replica-index: bad rank: "two" is not a whole number; expected an index from 0 to 4294967295"#]].assert_eq(&errors_of(&gang_pod(
            "p",
            "  labels: {training.kubeflow.org/replica-index: two}\n"
        )));
    expect![[r#"cluster.yaml: document 1: Pod ml/p: metadata.annotations.trainyard.io/rank: bad rank: "-1" is not a whole number; expected an index from 0 to 4294967295"#]].assert_eq(&errors_of(&gang_pod(
            "p",
            "  annotations: {trainyard.io/rank: \"-1\"}\n"
        )));
    // A gpu-numa label with the wrong number of entries.
    expect![[r#"cluster.yaml: document 1: Node n1: metadata.labels.topology.trainyard.io/gpu-numa: "0,1": expected 4 comma-separated integers, one per GPU (GPU 0 first)"#]].assert_eq(&errors_of(&topo_node(
            "n1",
            4,
            "topology.trainyard.io/leaf: tor-a, topology.trainyard.io/gpu-numa: \"0,1\""
        )));
    // A strict spec: unknown fields name their path.
    let e = errors_of(&RAIL_TOPOLOGY.replace("kind: spine, block: b0", "kind: spine, blok: b0"));
    assert!(
        e.starts_with(
            "cluster.yaml: document 1: Topology fabric: spec.switches[3].blok: unknown field `blok`"
        ),
        "{e}"
    );
}

#[test]
fn topology_build_errors_point_at_their_source() {
    // A duplicate switch and a bad level, in the document.
    let dup = RAIL_TOPOLOGY.replace(
        "  - {name: tor-b, kind: leaf}\n",
        "  - {name: tor-b, kind: leaf}\n  - {name: rail-0, kind: spine}\n",
    );
    expect![[r#"cluster.yaml: document 1: Topology fabric: spec.switches[3].name: switch "rail-0" is declared twice"#]].assert_eq(&errors_of(&format!("{dup}---\n{}", topo_node("n1", 2, ""))));
    let level = format!(
        "{}  levels:\n  - {{name: leaf, fabric: leaf, nodeLabel: x}}\n---\n{}",
        RAIL_TOPOLOGY,
        topo_node("n1", 2, "")
    );
    expect![[r#"cluster.yaml: document 1: Topology fabric: spec.levels[0]: level "leaf": give exactly one of nodeLabel, fabric (spineBlock, leaf or nvlink) or domains"#]].assert_eq(&errors_of(&level));
    // GPU affinity for a GPU the node does not have.
    let affinity = RAIL_TOPOLOGY.replace("{index: 1, numa: 1}", "{index: 5, numa: 1}");
    expect![[r#"cluster.yaml: document 1: Topology fabric: spec.nodes[0].gpus: node "n1": GPU 5: the node has 2 GPUs (indices 0..2)"#]].assert_eq(&errors_of(&format!("{affinity}---\n{}", topo_node("n1", 2, ""))));
    // A node label linking the node to what the document says is a spine.
    expect!["cluster.yaml: document 2: Node n9: metadata.labels.topology.trainyard.io/leaf: n9 → spine-0: nodes and NICs link to leaf switches, not to spines"].assert_eq(&errors_of(&format!(
            "{RAIL_TOPOLOGY}---\n{}",
            topo_node("n9", 2, "topology.trainyard.io/leaf: spine-0")
        )));
    // Labels only: an NVLink domain across two leaves does not nest.
    let e = errors_of(&format!(
        "{}---\n{}",
        topo_node(
            "n1",
            2,
            "topology.trainyard.io/leaf: l1, topology.trainyard.io/nvlink-domain: d"
        ),
        topo_node(
            "n2",
            2,
            "topology.trainyard.io/leaf: l2, topology.trainyard.io/nvlink-domain: d"
        ),
    ));
    expect![[r#"cluster.yaml: document 2: Node n2: level "nvlink": domain "d" is not inside one domain of level "leaf" (its nodes "n1" and "n2" are in different ones); levels must nest (levels from the nodes' topology.trainyard.io/ labels)"#]].assert_eq(&e);
    // Explicit domains that do not nest.
    let nested = "apiVersion: trainyard.io/v1alpha1\nkind: Topology\nmetadata: {name: f}\nspec:\n  levels:\n  - {name: block, domains: [{name: b0, nodes: [a1]}, {name: b1, nodes: [b1]}]}\n  - {name: rack, domains: [{name: r1, nodes: [a1, b1]}]}\n";
    expect![[r#"cluster.yaml: document 1: Topology f: spec.levels[1]: level "rack": domain "r1" is not inside one domain of level "block" (its nodes "a1" and "b1" are in different ones); levels must nest"#]].assert_eq(&errors_of(&format!(
            "{nested}---\n{}---\n{}",
            topo_node("a1", 1, ""),
            topo_node("b1", 1, "")
        )));
    // KAI levels naming one label twice.
    let kai = "apiVersion: kai.scheduler/v1alpha1\nkind: Topology\nmetadata: {name: t}\nspec: {levels: [{nodeLabel: rack}, {nodeLabel: rack}]}\n";
    expect![[r#"cluster.yaml: document 1: Topology t: spec.levels[1]: level "rack": two levels have this name"#]].assert_eq(&errors_of(kai));
}

#[test]
fn pod_annotations_versus_the_podgroup_and_bad_ranks() {
    let group = "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {topology: {required: leaf}}\n";
    let p = gang_pod(
        "p",
        "  labels: {trainyard.io/pod-group: g}\n  annotations: {kueue.x-k8s.io/podset-required-topology: spineBlock, kai.scheduler/topology-preferred-placement: nvlink}\n",
    );
    let loaded = load_one(&rail_cluster(&format!("{group}---\n{p}"))).unwrap();
    let j = &loaded.snapshot.jobs[0];
    assert_eq!(j.topology.required.as_deref(), Some("leaf"));
    assert_eq!(j.topology.preferred.as_deref(), Some("nvlink"));
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 5: PodGroup ml/g: its pods' annotation kueue.x-k8s.io/podset-required-topology=\"spineBlock\" differs from spec.topology.required=\"leaf\"; using \"leaf\""
        ]
    );
    // An annotation naming no level.
    let p = gang_pod(
        "p",
        "  annotations: {kueue.x-k8s.io/podset-preferred-topology: cloud/rack}\n",
    );
    expect![[r#"cluster.yaml: document 5: Pod ml/p: metadata.annotations.kueue.x-k8s.io/podset-preferred-topology: unknown topology level "cloud/rack"; expected one of spineBlock, leaf, nvlink (a level name, or the node label key of a label level)"#]].assert_eq(&errors_of(&rail_cluster(&p)));
    // A PodGroup no pod joins still has its levels checked.
    let lonely = "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {name: lonely, namespace: ml}\nspec: {subGroups: [{name: w, topology: {required: rack}}]}\n";
    expect![[r#"cluster.yaml: document 5: PodGroup ml/lonely: spec.subGroups[0].topology.required: unknown topology level "rack"; expected one of spineBlock, leaf, nvlink (a level name, or the node label key of a label level)"#]].assert_eq(&errors_of(&rail_cluster(lonely)));
    // A preference wider than the requirement does nothing.
    let p = gang_pod(
        "p",
        "  annotations: {kueue.x-k8s.io/podset-required-topology: leaf, kueue.x-k8s.io/podset-preferred-topology: spineBlock}\n",
    );
    assert_eq!(
        load_one(&rail_cluster(&p)).unwrap().warnings,
        [
            "cluster.yaml: document 5: Pod ml/p: preferred level \"spineBlock\" is wider than required level \"leaf\"; the preference has no effect"
        ]
    );
    // JobSet indices that do not combine into a rank.
    expect!["cluster.yaml: document 1: Pod ml/p: metadata.labels.batch.kubernetes.io/job-completion-index: bad rank: 70000 is too large to combine with jobset.sigs.k8s.io/job-index=1; expected below 65536 (rank = job index × 65536 + completion index)"].assert_eq(&errors_of(&gang_pod(
            "p",
            "  labels: {jobset.sigs.k8s.io/job-index: \"1\", batch.kubernetes.io/job-completion-index: \"70000\"}\n"
        )));
    expect!["cluster.yaml: document 1: Pod ml/p: metadata.labels.jobset.sigs.k8s.io/job-index: bad rank: 70000 is too large; expected below 65536 (rank = job index × 65536 + completion index)"].assert_eq(&errors_of(&gang_pod(
            "p",
            "  labels: {jobset.sigs.k8s.io/job-index: \"70000\", batch.kubernetes.io/job-completion-index: \"0\"}\n"
        )));
}
