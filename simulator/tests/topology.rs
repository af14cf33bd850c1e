//! Network topology in the simulator: the cluster spec's `topology:` and
//! `slowdown:` sections, per-job placement metrics, the leaf fragmentation
//! series and the communication slowdown model.

use expect_test::expect;
use std::path::PathBuf;

use trainyard_model::{QueueSpec, QueueTree};
use trainyard_sched::Config;
use trainyard_sim::spec::{ClusterSpec, parse_cluster};
use trainyard_sim::workload::parse_workload;
use trainyard_sim::{JobState, SimInput, SimJob, SimOptions, SimOutput, output, report, simulate};

fn example(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sim")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn config(placement: &str) -> Config {
    serde_json::from_value(serde_json::json!({"topology": {"placement": placement}})).unwrap()
}

fn run(cluster: &ClusterSpec, jobs: &[SimJob], config: &Config) -> SimOutput {
    let mut names: Vec<&str> = jobs.iter().map(|j| j.queue.as_str()).collect();
    names.sort();
    names.dedup();
    let queues = QueueTree::build(names.into_iter().map(QueueSpec::new).collect()).unwrap();
    let opts = SimOptions {
        topology: cluster.topology.clone(),
        slowdown: cluster.slowdown,
        ..SimOptions::default()
    };
    simulate(
        SimInput {
            nodes: &cluster.nodes,
            queues: &queues,
            jobs,
            faults: &cluster.faults,
        },
        config,
        &opts,
        &mut |_| {},
    )
}

fn job_list(yaml_jobs: &str) -> Vec<SimJob> {
    parse_workload(
        &format!("kind: Workload\nspec:\n  jobs:\n{yaml_jobs}"),
        "w.yaml",
    )
    .unwrap()
}

fn cluster(nodes: u32, topology: &str) -> String {
    format!(
        "kind: ClusterSpec\nspec:\n  nodePools:\n  - {{name: n, count: {nodes}, cpu: \"64\", memory: 512Gi, gpu: {{count: 8, model: H100}}}}\n{topology}"
    )
}

#[test]
fn example_rail_cluster_has_eight_leaf_groups_in_two_blocks() {
    let c = parse_cluster(&example("rail-cluster.yaml"), "rail-cluster.yaml").unwrap();
    assert_eq!(c.nodes.len(), 128);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let t = c.topology.as_ref().expect("a topology");
    assert_eq!(t.level_names(), ["spineBlock", "leaf"]);
    let leaf = &t.levels()[t.leaf_level().expect("a leaf level")];
    assert_eq!(leaf.name, "leaf");
    assert_eq!(leaf.domains.len(), 8);
    assert!(leaf.domains.iter().all(|d| d.nodes.len() == 16));
    // Leaf groups are runs of 16 consecutive nodes; their rails g<g>-rail0..7.
    assert_eq!(leaf.domains[0].name, "g0-rail0..g0-rail7");
    let first: Vec<&str> = leaf.domains[0]
        .nodes
        .iter()
        .map(|&n| t.node_names()[n as usize].as_str())
        .collect();
    assert_eq!(first.first(), Some(&"h100-000"));
    assert_eq!(first.last(), Some(&"h100-015"));
    let blocks = &t.levels()[t.level_index("spineBlock").unwrap()];
    assert_eq!(blocks.domains.len(), 2);
    assert!(blocks.domains.iter().all(|d| d.nodes.len() == 64));
    assert_eq!(c.slowdown.per_spine_crossing_ppm, 250_000);
    // GPU i is on rail i and NUMA socket i / 4.
    let n = t.node_id("h100-017").unwrap();
    assert_eq!(t.gpu_numa(n, 3), Some(0));
    assert_eq!(t.gpu_numa(n, 4), Some(1));
}

#[test]
fn example_run_reports_topology_metrics() {
    let c = parse_cluster(&example("rail-cluster.yaml"), "rail-cluster.yaml").unwrap();
    // The first few hours of the example workload, for debug builds.
    let workload = example("rail-workload.yaml")
        .replace("count: 144", "count: 20")
        .replace("count: 120", "count: 16")
        .replace("count: 156", "count: 20")
        .replace("count: 2160", "count: 200");
    let jobs = parse_workload(&workload, "rail-workload.yaml").unwrap();
    let mut summaries = Vec::new();
    for policy in ["aware", "blind"] {
        let out = run(&c, &jobs, &config(policy));
        let s = out.summary();
        let csv = output::jobs_csv(&out);
        let header = csv.lines().next().unwrap();
        assert!(
            header.ends_with(
                ",pending_reason,nodes,leaves,spine_crossings,hops,rail_aligned,level,in_tightest,slowdown_s"
            ),
            "{header}"
        );
        let t = s.topology.as_ref().expect("topology summary");
        assert_eq!(t.leaf_domains, 8);
        assert_eq!(t.gangs, 36, "every pretrain and tp4 job is a gang");
        assert_eq!(out.jobs.iter().filter(|j| j.topology.is_some()).count(), 36);
        // Gang rows carry the metrics, single-pod rows leave them empty.
        let gang = out.jobs.iter().find(|j| j.id.starts_with("llm/")).unwrap();
        let row = csv.lines().find(|l| l.starts_with(&gang.id)).unwrap();
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), 23, "{row}");
        assert!(cells[15..].iter().all(|c| !c.is_empty()), "{row}");
        let dev = csv.lines().find(|l| l.starts_with("dev/")).unwrap();
        assert!(dev.ends_with(",,,,,,,,"), "{dev}");
        assert!(
            out.cluster
                .iter()
                .all(|c| c.largest_free_leaf_gpus.is_some_and(|g| g <= 128))
        );
        assert!(out.cluster[0].largest_free_leaf_gpus == Some(128));
        let html = report::report_html(&[(&out, &s)], "topology");
        assert!(html.contains("Topology fragmentation"));
        assert!(html.contains("Gangs in one leaf"));
        // Spine crossings stretch the run: slowdown column matches the model.
        for j in out.jobs.iter().filter_map(|j| j.topology.as_ref()) {
            assert!(j.spine_crossings <= j.hops);
            assert_eq!(
                j.slowdown_ppm,
                250_000 * j.spine_crossings as u64 / j.hops.max(1) as u64
            );
        }
        summaries.push(s);
    }
    let table = output::summary_table(&summaries);
    for row in [
        "gangs (2+ pods)",
        "gangs on 2+ nodes",
        "gangs in one leaf",
        "leaves per gang",
        "spine crossings/gang",
        "rail-aligned gangs",
        "in tightest domain",
        "slowdown mean",
        "largest 1-leaf gang",
    ] {
        let line = table
            .lines()
            .find(|l| l.trim_start().starts_with(row))
            .unwrap_or_else(|| panic!("no row {row:?} in\n{table}"));
        assert!(line[row.len()..].split_whitespace().count() >= 2, "{line}");
    }
    let json = output::comparison_json(&summaries);
    assert!(json.contains("\"oneLeafShare\""));
    assert!(json.contains("\"meanLargestFreeLeafGpus\""));
}

#[test]
fn no_topology_no_columns() {
    let c = parse_cluster(&example("cluster.yaml"), "cluster.yaml").unwrap();
    assert!(c.topology.is_none());
    let jobs = job_list(
        "  - {name: a, queue: q, submit: 0, duration: 10, tasks: [{count: 2, requests: {nvidia.com/gpu: 8}}]}\n",
    );
    let out = run(&c, &jobs, &Config::default());
    let csv = output::jobs_csv(&out);
    assert!(csv.starts_with("id,queue,priority,gpus,tasks,submit_s,start_s,end_s,wait_s,jct_s,state,restarts,evicted_pods,lost_gpu_hours,pending_reason\n"));
    let s = out.summary();
    assert!(s.topology.is_none());
    assert!(!output::summary_json(&s).contains("topology"));
    assert!(!output::summary_table(&[s]).contains("gangs"));
}

#[test]
fn slowdown_stretches_gangs_that_cross_a_spine() {
    // Two nodes, one per leaf, one leaf per spine block: a 2-node gang's
    // one hop crosses a spine, so it runs 1 + 0.25 × 1/1 = 1.25 × as long.
    let text = cluster(
        2,
        "  topology: {leafSpine: {nodesPerLeaf: 1, leavesPerBlock: 1, spinesPerBlock: 1}}\n  slowdown: {perSpineCrossing: 0.25}\n",
    );
    let c = parse_cluster(&text, "c.yaml").unwrap();
    let jobs = job_list(
        "  - {name: a, queue: q, submit: 0, duration: 1h, tasks: [{count: 2, requests: {nvidia.com/gpu: 8}}]}\n  - {name: b, queue: q, submit: 2h, duration: 1h, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}\n",
    );
    let out = run(&c, &jobs, &Config::default());
    let a = &out.jobs[0];
    let t = a.topology.as_ref().unwrap();
    assert_eq!(
        (t.nodes, t.leaves, t.hops, t.spine_crossings, t.rail_aligned),
        (2, 2, 1, 1, true)
    );
    assert_eq!(t.level, None, "only the whole cluster holds both");
    assert_eq!((t.slowdown_ppm, t.slowdown_ms), (250_000, 900_000));
    assert_eq!(a.end.unwrap().0 - a.start.unwrap().0, 4_500_000);
    // A single-pod job is not stretched and has no topology record.
    let b = &out.jobs[1];
    assert!(b.topology.is_none());
    assert_eq!(b.end.unwrap().0 - b.start.unwrap().0, 3_600_000);
    let s = out.summary().topology.unwrap();
    assert_eq!((s.gangs, s.multi_node_gangs), (1, 1));
    assert_eq!((s.one_leaf_share, s.mean_spine_crossings), (0.0, 1.0));
    assert_eq!(s.mean_slowdown_percent, 25.0);

    // Off (the default without `slowdown:`): no change.
    let text = cluster(
        2,
        "  topology: {leafSpine: {nodesPerLeaf: 1, leavesPerBlock: 1, spinesPerBlock: 1}}\n",
    );
    let c = parse_cluster(&text, "c.yaml").unwrap();
    let out = run(&c, &jobs, &Config::default());
    assert_eq!(
        out.jobs[0].end.unwrap().0 - out.jobs[0].start.unwrap().0,
        3_600_000
    );
    // Same leaf: no crossing, no slowdown.
    let text = cluster(
        2,
        "  topology: {leafSpine: {nodesPerLeaf: 2, leavesPerBlock: 1, spinesPerBlock: 1}}\n  slowdown: {perSpineCrossing: 0.25}\n",
    );
    let c = parse_cluster(&text, "c.yaml").unwrap();
    let out = run(&c, &jobs, &Config::default());
    let t = out.jobs[0].topology.as_ref().unwrap();
    assert_eq!((t.leaves, t.spine_crossings, t.slowdown_ms), (1, 0, 0));
    assert_eq!(t.level.as_deref(), Some("leaf"));
    assert_eq!(
        out.jobs[0].end.unwrap().0 - out.jobs[0].start.unwrap().0,
        3_600_000
    );
}

#[test]
fn largest_free_leaf_follows_binds_finishes_and_faults() {
    // Four 8-GPU nodes, two per leaf: 16 GPUs per leaf. One node of each
    // leaf is down from 5h to 6h.
    let text = cluster(
        4,
        "  topology: {leafSpine: {nodesPerLeaf: 2, leavesPerBlock: 2, spinesPerBlock: 1}}\n  faults:\n  - {at: 5h, node: n-000, event: down}\n  - {at: 5h, node: n-002, event: down}\n  - {at: 6h, node: n-000, event: up}\n  - {at: 6h, node: n-002, event: up}\n",
    );
    let c = parse_cluster(&text, "c.yaml").unwrap();
    let jobs = job_list(
        "  - {name: big, queue: q, submit: 65, duration: 1h, tasks: [{count: 3, requests: {nvidia.com/gpu: 8}}]}\n  - {name: one, queue: q, submit: 2h, duration: 1h, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}\n  - {name: late, queue: q, submit: 4h, duration: 3h, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}\n",
    );
    let out = run(&c, &jobs, &Config::default());
    let at = |ms: i64| {
        out.cluster
            .iter()
            .rev()
            .find(|s| s.time.0 <= ms)
            .and_then(|s| s.largest_free_leaf_gpus)
    };
    assert_eq!(
        at(65_000),
        Some(16),
        "nothing placed before the first cycle"
    );
    // 24 GPUs over two leaves: one leaf full, 8 left in the other.
    assert_eq!(at(1_800_000), Some(8));
    // One GPU used in one leaf: the other is still wholly free.
    assert_eq!(at(2 * 3_600_000 + 20_000), Some(16));
    assert_eq!(at(3 * 3_600_000 + 20_000), Some(16));
    assert_eq!(at(4 * 3_600_000 - 1), Some(16));
    // From 5h each leaf has one node up; `late` holds one GPU on one of them.
    assert_eq!(at(5 * 3_600_000 + 20_000), Some(8));
    assert_eq!(at(6 * 3_600_000 + 20_000), Some(16));
    assert!(out.jobs.iter().all(|j| j.state == JobState::Completed));
    let s = out.summary().topology.unwrap();
    assert!(s.mean_largest_free_leaf_gpus > 8.0 && s.mean_largest_free_leaf_gpus < 16.0);
}

#[test]
fn bad_topology_input_names_file_and_field() {
    let err = |topology: &str| {
        parse_cluster(&cluster(4, topology), "c.yaml")
            .unwrap_err()
            .to_string()
    };
    let rail = |r: u32, g: u32| {
        format!(
            "  topology: {{railOptimized: {{rails: {r}, nodesPerGroup: {g}, groupsPerBlock: 1, spinesPerBlock: 2}}}}\n"
        )
    };
    expect!["c.yaml: document 1: ClusterSpec: spec.topology.railOptimized.rails: expected a whole number from 1 to 64, found 0"].assert_eq(&err(&rail(0, 2)));
    expect!["c.yaml: document 1: ClusterSpec: spec.topology.railOptimized.nodesPerGroup: expected a whole number from 1 to 4294967295, found 0"].assert_eq(&err(&rail(8, 0)));
    expect!["c.yaml: document 1: ClusterSpec: spec.topology.railOptimized.rails: expected a whole number from 1 to 64, found 65"].assert_eq(&err(&rail(65, 2)));
    expect!["c.yaml: document 1: ClusterSpec: spec.topology.leafSpine.leavesPerBlock: expected a whole number from 1 to 4294967295, found 0"].assert_eq(&err("  topology: {leafSpine: {nodesPerLeaf: 2, leavesPerBlock: 0, spinesPerBlock: 1}}\n"));
    expect!["c.yaml: document 1: ClusterSpec: spec.topology.leafSpine.numaSockets: expected a whole number from 1 to 64, found 0"].assert_eq(&err(
            "  topology: {leafSpine: {nodesPerLeaf: 2, leavesPerBlock: 1, spinesPerBlock: 1, numaSockets: 0}}\n"
        ));
    expect!["c.yaml: document 1: ClusterSpec: spec.topology.nvlinkDomainSize: expected a whole number from 1 to 4294967295, found 0"].assert_eq(&err("  topology: {nvlinkDomainSize: 0}\n"));
    let both = "  topology:\n    leafSpine: {nodesPerLeaf: 2, leavesPerBlock: 1, spinesPerBlock: 1}\n    railOptimized: {rails: 8, nodesPerGroup: 2, groupsPerBlock: 1, spinesPerBlock: 2}\n";
    expect!["c.yaml: document 1: ClusterSpec: spec.topology: give exactly one of railOptimized, leafSpine or spec (nvlinkDomainSize may be added to any, or stand alone)"].assert_eq(&err(both));
    expect!["c.yaml: document 1: ClusterSpec: spec.topology: give exactly one of railOptimized, leafSpine or spec (nvlinkDomainSize may be added to any, or stand alone)"].assert_eq(&err("  topology: {}\n"));
    let e = err(
        "  topology: {leafSpine: {nodesPerLeaf: 2, leavesPerBlock: 1, spinesPerBlock: 1, racks: 3}}\n",
    );
    assert!(
        e.starts_with(
            "c.yaml: document 1: ClusterSpec: spec.topology.leafSpine.racks: unknown field `racks`"
        ),
        "{e}"
    );
    let e = err("  topology: {railOptimized: {rails: 8}}\n");
    assert!(
        e.starts_with("c.yaml: document 1: ClusterSpec: spec.topology.railOptimized: missing field `nodesPerGroup`"),
        "{e}"
    );
    // An explicit spec: the topology's own error, under spec.topology.spec.
    expect![[r#"c.yaml: document 1: ClusterSpec: spec.topology.spec: links[0] (n-000 → tor9): no leaf switch named "tor9" is declared"#]].assert_eq(&err(
            "  topology:\n    spec:\n      switches: [{name: tor1, kind: leaf}]\n      links: [{from: n-000, to: tor9}]\n"
        ));
    expect![[r#"c.yaml: document 1: ClusterSpec: spec.topology.spec: switches: switch "tor1" is declared twice"#]].assert_eq(&err(
            "  topology:\n    spec:\n      switches: [{name: tor1, kind: leaf}, {name: tor1, kind: spine}]\n"
        ));
    let e = err("  topology:\n    spec:\n      switches: [{name: tor1, kind: router}]\n");
    assert!(
        e.starts_with("c.yaml: document 1: ClusterSpec: spec.topology.spec.switches[0].kind: unknown variant `router`"),
        "{e}"
    );
    // The slowdown model.
    let generated =
        "  topology: {leafSpine: {nodesPerLeaf: 2, leavesPerBlock: 1, spinesPerBlock: 1}}\n";
    expect!["c.yaml: document 1: ClusterSpec: spec.slowdown.perSpineCrossing: expected a non-negative number like 0.25, got -0.5"].assert_eq(&err(&format!(
            "{generated}  slowdown: {{perSpineCrossing: -0.5}}\n"
        )));
    expect!["c.yaml: document 1: ClusterSpec: spec.slowdown.perSpineCrossing: expected at most six decimal places (parts per million), got 0.1234567"].assert_eq(&err(&format!(
            "{generated}  slowdown: {{perSpineCrossing: 0.1234567}}\n"
        )));
    expect!["c.yaml: document 1: ClusterSpec: spec.slowdown.perSpineCrossing: expected at most 100, got 101"].assert_eq(&err(&format!(
            "{generated}  slowdown: {{perSpineCrossing: 101}}\n"
        )));
    expect!["c.yaml: document 1: ClusterSpec: spec.slowdown: the slowdown model needs a network topology (spec.topology)"].assert_eq(&err("  slowdown: {perSpineCrossing: 0.25}\n"));
    // Zero is allowed and means off.
    let c = parse_cluster(
        &cluster(
            4,
            &format!("{generated}  slowdown: {{perSpineCrossing: 0}}\n"),
        ),
        "c.yaml",
    )
    .unwrap();
    assert!(c.slowdown.is_off());
}

#[test]
fn explicit_spec_and_mixed_gpu_counts() {
    // An explicit TopologySpec, written as in a Topology document.
    let text = cluster(
        4,
        "  topology:\n    spec:\n      switches:\n      - {name: tor-a, kind: leaf}\n      - {name: tor-b, kind: leaf}\n      - {name: sp, kind: spine}\n      links:\n      - {from: n-000, to: tor-a}\n      - {from: n-001, to: tor-a}\n      - {from: n-002, to: tor-b}\n      - {from: n-003, to: tor-b}\n      - {from: tor-a, to: sp}\n      - {from: tor-b, to: sp}\n",
    );
    let c = parse_cluster(&text, "c.yaml").unwrap();
    let t = c.topology.unwrap();
    assert_eq!(t.levels()[t.leaf_level().unwrap()].domains.len(), 2);

    // Generators over pools with different GPU counts (and a CPU pool),
    // plus NVLink domains.
    let text = "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: a, count: 3, cpu: \"64\", memory: 512Gi, gpu: {count: 8}}\n  - {name: b, count: 2, cpu: \"64\", memory: 512Gi, gpu: {count: 4}}\n  - {name: c, count: 1, cpu: \"64\", memory: 512Gi}\n  topology:\n    railOptimized: {rails: 8, nodesPerGroup: 4, groupsPerBlock: 1, spinesPerBlock: 2, numaSockets: 2}\n    nvlinkDomainSize: 2\n";
    let c = parse_cluster(text, "c.yaml").unwrap();
    let t = c.topology.unwrap();
    assert_eq!(t.level_names(), ["spineBlock", "leaf", "nvlink"]);
    let b0 = t.node_id("b-000").unwrap();
    assert_eq!((t.gpu_numa(b0, 1), t.gpu_numa(b0, 2)), (Some(0), Some(1)));
    assert_eq!(t.gpu_numa(b0, 4), None);
}

#[test]
fn workload_topology_constraints_reach_the_scheduler() {
    let jobs = job_list(
        "  - {name: a, queue: q, submit: 0, duration: 10, topology: {required: leaf, maxLeaves: 1}, subGroups: [{name: w, minMember: 2, topology: {preferred: leaf}}], tasks: [{count: 2, subGroup: w, requests: {nvidia.com/gpu: 8}}]}\n  - {name: b, queue: q, submit: 0, duration: 10, topology: {required: rack}, tasks: [{count: 2, requests: {nvidia.com/gpu: 8}}]}\n",
    );
    assert_eq!(jobs[0].topology.required.as_deref(), Some("leaf"));
    assert_eq!(jobs[0].topology.max_leaves, Some(1));
    assert_eq!(
        jobs[0].subgroups[0].topology.preferred.as_deref(),
        Some("leaf")
    );
    let text = cluster(
        4,
        "  topology: {leafSpine: {nodesPerLeaf: 2, leavesPerBlock: 1, spinesPerBlock: 1}}\n",
    );
    let c = parse_cluster(&text, "c.yaml").unwrap();
    let out = run(&c, &jobs, &Config::default());
    let a = out.jobs.iter().find(|j| j.id == "sim/a").unwrap();
    assert_eq!(a.state, JobState::Completed);
    assert_eq!(a.topology.as_ref().unwrap().leaves, 1);
    let b = out.jobs.iter().find(|j| j.id == "sim/b").unwrap();
    assert_eq!(b.state, JobState::Rejected);
    assert!(
        b.pending_reason
            .as_deref()
            .is_some_and(|r| r.contains("rack")),
        "{:?}",
        b.pending_reason
    );

    // Errors name file and field.
    let err = |jobs: &str| {
        parse_workload(&format!("kind: Workload\nspec:\n  jobs:\n{jobs}"), "w.yaml")
            .unwrap_err()
            .to_string()
    };
    expect!["w.yaml: document 1: Workload: spec.jobs[0].topology.maxLeaves: expected a whole number from 1 to 4294967295, found 0"].assert_eq(&err(
            "  - {name: a, queue: q, submit: 0, duration: 10, topology: {maxLeaves: 0}, tasks: [{count: 1, requests: {cpu: 1}}]}\n"
        ));
    expect!["w.yaml: document 1: Workload: spec.jobs[0].subGroups[0].topology.required: expected a level name"].assert_eq(&err(
            "  - {name: a, queue: q, submit: 0, duration: 10, subGroups: [{name: w, minMember: 1, topology: {required: \"\"}}], tasks: [{count: 1, subGroup: w, requests: {cpu: 1}}]}\n"
        ));
    let e = err(
        "  - {name: a, queue: q, submit: 0, duration: 10, topology: {needed: leaf}, tasks: [{count: 1, requests: {cpu: 1}}]}\n",
    );
    assert!(
        e.contains("spec.jobs[0].topology") && e.contains("unknown field `needed`"),
        "{e}"
    );
    // Generator templates carry theirs to every job.
    let generated = "kind: WorkloadGenerator\nspec:\n  seed: 1\n  templates:\n  - {name: t, queue: q, count: 3, arrival: {every: 1m}, pods: {fixed: 2}, podRequests: {nvidia.com/gpu: 8}, duration: {fixed: 1m}, topology: {preferred: leaf, maxLeaves: 2}}\n";
    let jobs = parse_workload(generated, "g.yaml").unwrap();
    assert!(jobs.iter().all(
        |j| j.topology.preferred.as_deref() == Some("leaf") && j.topology.max_leaves == Some(2)
    ));
    let e = parse_workload(&generated.replace("maxLeaves: 2", "maxLeaves: 0"), "g.yaml")
        .unwrap_err()
        .to_string();
    expect!["g.yaml: document 1: WorkloadGenerator: spec.templates[0].topology.maxLeaves: expected a whole number from 1 to 4294967295, found 0"].assert_eq(&e);
}

#[test]
fn topology_runs_are_deterministic() {
    let c = parse_cluster(&example("rail-cluster.yaml"), "rail-cluster.yaml").unwrap();
    let workload = example("rail-workload.yaml")
        .replace("count: 144", "count: 12")
        .replace("count: 120", "count: 12")
        .replace("count: 156", "count: 10")
        .replace("count: 2160", "count: 100");
    let jobs = parse_workload(&workload, "w.yaml").unwrap();
    let text = |placement: &str| {
        let out = run(&c, &jobs, &config(placement));
        let s = out.summary();
        [
            output::jobs_csv(&out),
            output::summary_json(&s),
            report::report_html(&[(&out, &s)], "t"),
        ]
        .join("\n=====\n")
    };
    assert!(text("blind") == text("blind"));
    assert!(text("aware") == text("aware"));
}
