//! `cargo run --release -p trainyard-bench [-- --runs N]`
//!
//! Benchmarks of the scheduling core on seeded synthetic inputs, printed as
//! a Markdown table (copy into docs/benchmarks.md). Wall-clock timing of a
//! release build, the median of N runs; single-threaded.
//!
//! 1. Fair share for 1,110 queues in a 3-level tree (10 × 10 × 10 leaves,
//!    with quotas, limits, weights, priorities).
//! 2. One allocate cycle on 5,000 nodes × 8 GPUs with 2,000 pending gangs of
//!    1–64 pods (about 20k pods), in 4 team queues.
//! 3. `--topology`: placing one 256-GPU gang (32 pods × 8 GPUs) on a
//!    4,096-node rail-optimized fabric (32,768 GPUs; 32 nodes per leaf
//!    group, 8 groups per spine block), 60% loaded, topology-aware and
//!    blind; plus building the topology (done once, at the edge).
//! 4. `--reclaim`: reclaim for a 64-GPU gang (8 pods × 8 GPUs) in a full
//!    1,000-node cluster running 5,000 jobs of another team: one whole
//!    cycle, median time, and the process's peak resident memory.
//! 5. `--snapshot`: the one world state (`trainyard_cluster`) at 5,000
//!    nodes and 50,000 pods (12,500 jobs of 1–7 pods, half of them bound,
//!    PodGroups for the gangs): a full build (every object applied to a
//!    fresh state, then a snapshot) against one pod changed (bound to a
//!    node) and a snapshot, against one assumed bind and a snapshot, and
//!    against 1% churn (500 pods bound, added or deleted) and a snapshot.
//! 6. `--pod-rules`: the 2,000-gang allocate cycle of (2), with every
//!    tenth gang asking for one pod per node (required pod anti-affinity
//!    on its own label, topology key `kubernetes.io/hostname`): what pods
//!    with rules between pods pay, and that the others do not.
//! 7. `--sim`: a simulation of 100,000 synthetic jobs on 1,000 nodes × 8
//!    GPUs; and, when `../shared/data/openb` exists, the full openb
//!    `default` trace on its 1,213 nodes. Reports wall time and events/s.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainyard_model::{
    Job, Limits, Node, QueueSpec, QueueTree, ResourceName, Resources, Snapshot, Timestamp,
};
use trainyard_sched::{Config, fairshare, schedule};

const GI: u64 = 1 << 30;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn fairshare_tree(rng: &mut ChaCha8Rng) -> (QueueTree, Vec<Resources>, Resources) {
    let mut specs = Vec::new();
    for a in 0..10 {
        let top = format!("org{a}");
        specs.push(
            QueueSpec::new(&top)
                .quota(Resources::new(0, 0, 0).with_gpus(400))
                .weight(rng.random_range(1..4)),
        );
        for b in 0..10 {
            let mid = format!("{top}-t{b}");
            specs.push(
                QueueSpec::new(&mid)
                    .parent(&top)
                    .quota(Resources::zero().with_gpus(40))
                    .priority(rng.random_range(0..2)),
            );
            for c in 0..10 {
                let mut leaf = QueueSpec::new(format!("{mid}-q{c}"))
                    .parent(&mid)
                    .quota(Resources::zero().with_gpus(4))
                    .weight(rng.random_range(0..4));
                if rng.random_bool(0.3) {
                    leaf = leaf.limit(
                        Limits::unlimited().cap(ResourceName::Gpu, rng.random_range(8..64) * 1000),
                    );
                }
                specs.push(leaf);
            }
        }
    }
    let tree = QueueTree::build(specs).expect("generated tree is valid");
    let mut demand = vec![Resources::zero(); tree.len()];
    for q in tree.ids() {
        if tree.is_leaf(q) {
            let g = rng.random_range(0..48u64);
            demand[q.0] = Resources::new(g * 12_000, g * 100 * GI, g * 1000);
        }
    }
    (
        tree,
        demand,
        Resources::new(40_000 * 12_000, 40_000 * 100 * GI, 40_000 * 1000),
    )
}

fn cluster(rng: &mut ChaCha8Rng, nodes: usize, gangs: usize) -> Snapshot {
    let nodes: Vec<Node> = (0..nodes)
        .map(|i| Node::new(format!("node-{i:05}"), 192_000, 2048 * GI, 8))
        .collect();
    let queues = vec![
        QueueSpec::new("research").quota(Resources::zero().with_gpus(16_000)),
        QueueSpec::new("llm")
            .parent("research")
            .quota(Resources::zero().with_gpus(12_000))
            .weight(2),
        QueueSpec::new("vision")
            .parent("research")
            .quota(Resources::zero().with_gpus(4_000)),
        QueueSpec::new("prod")
            .quota(Resources::zero().with_gpus(16_000))
            .priority(1),
        QueueSpec::new("dev"),
    ];
    let leaves = ["llm", "vision", "prod", "dev"];
    let jobs: Vec<Job> = (0..gangs)
        .map(|i| {
            let r: f64 = rng.random();
            let pods = if r < 0.6 {
                rng.random_range(1..=4)
            } else if r < 0.9 {
                rng.random_range(8..=16)
            } else {
                rng.random_range(32..=64)
            };
            let gpus = [1u64, 1, 1, 2, 2, 4][rng.random_range(0..6)];
            let req = Resources::new(gpus * 12_000, gpus * 100 * GI, 0).with_gpus(gpus);
            let mut job = Job::gang(
                format!("ns/job-{i:05}"),
                leaves[i % leaves.len()],
                vec![req; pods],
            );
            job.priority = rng.random_range(0..3);
            job.submit_time = Timestamp(i as i64 * 1000);
            job
        })
        .collect();
    Snapshot::new(
        nodes,
        QueueTree::build(queues).expect("generated tree is valid"),
        jobs,
    )
}

/// The `--pod-rules` benchmark: see the module docs.
fn pod_rules_bench(runs: usize) -> anyhow::Result<()> {
    use std::sync::Arc;
    use trainyard_model::{LabelSelector, NamespaceFilter, PodAffinityTerm, PodRules};
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    // The same draws as the main benchmark, so the cluster is the same.
    let _ = fairshare_tree(&mut rng);
    println!("| benchmark | input | median time | throughput |");
    println!("|---|---|---|---|");
    for every in [0usize, 10] {
        let mut snap = cluster(&mut ChaCha8Rng::seed_from_u64(7), 5000, 2000);
        let mut ruled = 0;
        if every > 0 {
            for (i, job) in snap.jobs.iter_mut().enumerate() {
                if i % every != 0 {
                    continue;
                }
                ruled += 1;
                let job = Arc::make_mut(job);
                let app = format!("job-{i}");
                let c = Arc::new(trainyard_model::PlacementConstraints {
                    pod_rules: PodRules {
                        anti_affinity: vec![PodAffinityTerm {
                            selector: Some(LabelSelector {
                                match_labels: [("app".to_string(), app.clone())].into(),
                                ..Default::default()
                            }),
                            namespaces: NamespaceFilter {
                                all: true,
                                ..Default::default()
                            },
                            topology_key: "kubernetes.io/hostname".into(),
                        }],
                        ..Default::default()
                    },
                    ..Default::default()
                });
                for t in &mut job.tasks {
                    t.labels.insert("app".into(), app.clone());
                    t.constraints = Arc::clone(&c);
                }
            }
        }
        let pods: usize = snap.jobs.iter().map(|j| j.tasks.len()).sum();
        let cfg = Config::default();
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            let d = schedule(&snap, &cfg, Timestamp(0));
            times.push(t.elapsed());
            last = Some(d);
        }
        let time = median(times);
        let d = last.expect("at least one run");
        println!(
            "| allocate cycle, {ruled} gangs one pod per node | 5,000 nodes × 8 GPUs, {} gangs, {} pods ({} bound, {} pending) | {:.1} ms | {:.0} pods placed/s |",
            snap.jobs.len(),
            pods,
            d.stats.pods_bound,
            d.pending.len(),
            time.as_secs_f64() * 1e3,
            d.stats.pods_bound as f64 / time.as_secs_f64()
        );
    }
    Ok(())
}

/// One simulation with the default config and options.
fn run_sim(
    nodes: &[Node],
    queues: &QueueTree,
    jobs: &[trainyard_sim::SimJob],
) -> trainyard_sim::SimOutput {
    trainyard_sim::simulate(
        trainyard_sim::SimInput {
            nodes,
            queues,
            jobs,
            faults: &[],
        },
        &Config::default(),
        &trainyard_sim::SimOptions::default(),
        &mut |_| {},
    )
}

fn sim_bench() -> anyhow::Result<()> {
    println!("| simulation | input | wall time | events | cycles | events/s |");
    println!("|---|---|---|---|---|---|");
    let nodes: Vec<Node> = (0..1000)
        .map(|i| Node::new(format!("n{i:04}"), 192_000, 2048 * GI, 8))
        .collect();
    let queues = QueueTree::build(vec![
        QueueSpec::new("a").quota(Resources::zero().with_gpus(3000)),
        QueueSpec::new("b").quota(Resources::zero().with_gpus(3000)),
        QueueSpec::new("c"),
    ])
    .expect("valid tree");
    let generator = r#"
kind: WorkloadGenerator
spec:
  seed: 42
  templates:
  - {name: dev, queue: a, count: 60000, arrival: {poisson: {perHour: 150}}, podRequests: {cpu: "12", memory: 100Gi, nvidia.com/gpu: 1}, duration: {logNormal: {median: 30m, sigma: 1.0}}}
  - {name: node, queue: b, count: 30000, arrival: {poisson: {perHour: 75}}, podRequests: {cpu: "96", memory: 1000Gi, nvidia.com/gpu: 8}, duration: {logNormal: {median: 2h, sigma: 0.8}}}
  - {name: gang, queue: c, count: 10000, arrival: {poisson: {perHour: 25}}, pods: {choice: [2, 4, 8]}, podRequests: {cpu: "96", memory: 1000Gi, nvidia.com/gpu: 8}, duration: {logNormal: {median: 4h, sigma: 0.6}}}
"#;
    let jobs = trainyard_sim::workload::parse_workload(generator, "bench")?;
    let t = Instant::now();
    let out = run_sim(&nodes, &queues, &jobs);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "| synthetic | {} jobs, 1,000 nodes × 8 GPUs, 10 s cycle period | {secs:.2} s | {} | {} | {:.0} |",
        jobs.len(),
        out.events,
        out.cycles,
        out.events as f64 / secs
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/openb");
    let nodes_csv = dir.join("openb_node_list_gpu_node.csv");
    let pods_csv = dir.join("openb_pod_list_default.csv");
    if nodes_csv.exists() && pods_csv.exists() {
        let t = Instant::now();
        let nodes =
            trainyard_sim::openb::parse_nodes(&std::fs::read_to_string(&nodes_csv)?, "nodes")?;
        let opts = trainyard_sim::openb::ImportOptions {
            queue_rule: "hash:a,b,c".parse().map_err(|e| anyhow::anyhow!("{e}"))?,
            ..Default::default()
        };
        let import =
            trainyard_sim::openb::parse_pods(&std::fs::read_to_string(&pods_csv)?, "pods", &opts)?;
        let queues = QueueTree::build(vec![
            QueueSpec::new("a"),
            QueueSpec::new("b"),
            QueueSpec::new("c"),
        ])
        .expect("valid tree");
        let out = run_sim(&nodes, &queues, &import.jobs);
        let secs = t.elapsed().as_secs_f64();
        println!(
            "| openb default (import + replay) | {} pods ({} replayed), {} nodes | {secs:.2} s | {} | {} | {:.0} |",
            import.report.rows,
            import.jobs.len(),
            nodes.len(),
            out.events,
            out.cycles,
            out.events as f64 / secs
        );
    } else {
        println!("| openb default | ../shared/data/openb not found: skipped | | | | |");
    }
    Ok(())
}

/// The `--topology` benchmark: see the module docs.
fn topology_bench(runs: usize) -> anyhow::Result<()> {
    use std::sync::Arc;
    use trainyard_model::ExternalPod;
    use trainyard_model::topology::generate::{RailOptimized, rail_optimized};
    use trainyard_model::topology::{NodeInput, Topology};
    use trainyard_sched::TopologyPlacement;

    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let nodes: Vec<Node> = (0..4096)
        .map(|i| Node::new(format!("n{i:04}"), 192_000, 2048 * GI, 8))
        .collect();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let t = Instant::now();
    let spec = rail_optimized(
        &names,
        &RailOptimized {
            nodes_per_group: 32,
            groups_per_block: 8,
            ..RailOptimized::default()
        },
    );
    let inputs: Vec<NodeInput> = nodes.iter().map(Node::topology_input).collect();
    let topo = Topology::build(&spec, &inputs)?.ok_or_else(|| anyhow::anyhow!("no topology"))?;
    let build = t.elapsed();
    // Load: 40% of nodes full, 20% half (a random 4-GPU window), 40% free.
    let mut external = Vec::new();
    for n in &nodes {
        let r: f64 = rng.random();
        let devs: Vec<u32> = if r < 0.4 {
            (0..8).collect()
        } else if r < 0.6 {
            let w = rng.random_range(0..2u32) * 4;
            (w..w + 4).collect()
        } else {
            continue;
        };
        external.push(ExternalPod {
            name: format!("load/{}", n.name),
            node: n.name.clone(),
            requests: Resources::new(8_000 * devs.len() as u64, 100 * GI, 0)
                .with_gpus(devs.len() as u64),
            gpus: Some(devs),
            ..Default::default()
        });
    }
    let mut gang = Job::gang(
        "ml/llm-256",
        "q",
        vec![Resources::new(96_000, 1000 * GI, 0).with_gpus(8); 32],
    );
    for (i, t) in gang.tasks.iter_mut().enumerate() {
        t.rank = Some(i as u32);
    }
    let base = Snapshot::new(
        nodes,
        QueueTree::build(vec![QueueSpec::new("q")]).expect("valid tree"),
        Vec::new(),
    )
    .with_external(external)
    .with_topology(Some(Arc::new(topo)));
    let mut with_gang = base.clone();
    with_gang.jobs.push(Arc::new(gang));
    println!("| benchmark | input | median time | result |");
    println!("|---|---|---|---|");
    println!(
        "| build topology | 4,096 nodes, 8 rails, 128 leaf groups, 16 spine blocks | {:.1} ms | {} vertices, {} edges |",
        build.as_secs_f64() * 1e3,
        base.topology.as_ref().map_or(0, |t| t.graph().node_count()),
        base.topology.as_ref().map_or(0, |t| t.graph().edge_count()),
    );
    for placement in [TopologyPlacement::Aware, TopologyPlacement::Blind] {
        let mut cfg = Config::default();
        cfg.topology.placement = placement;
        let time = |snap: &Snapshot| {
            let mut times = Vec::new();
            let mut last = None;
            for _ in 0..runs.max(1) * 4 {
                let t = Instant::now();
                let d = schedule(snap, &cfg, Timestamp(0));
                times.push(t.elapsed());
                last = Some(d);
            }
            (median(times), last)
        };
        let (empty, _) = time(&base);
        let (full, d) = time(&with_gang);
        let d = d.ok_or_else(|| anyhow::anyhow!("no run"))?;
        let p = d.placements.first();
        println!(
            "| cycle with a 256-GPU gang, {placement:?} | 4,096 nodes × 8 GPUs, 60% loaded | {:.2} ms (cycle without the gang: {:.2} ms) | {} pods bound; {} leaves, {} spine crossings, level {} |",
            full.as_secs_f64() * 1e3,
            empty.as_secs_f64() * 1e3,
            d.binds.len(),
            p.map_or(0, |p| p.span.leaves),
            p.map_or(0, |p| p.span.spine_crossings),
            p.and_then(|p| p.level.clone())
                .unwrap_or_else(|| "cluster".into()),
        );
    }
    Ok(())
}

/// Peak resident memory of this process (`VmHWM`), in MiB, where Linux tells.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The `--reclaim` benchmark: see the module docs.
fn reclaim_bench(runs: usize) -> anyhow::Result<()> {
    use trainyard_model::TaskState;

    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let nodes: Vec<Node> = (0..1000)
        .map(|i| Node::new(format!("n{i:04}"), 192_000, 2048 * GI, 8))
        .collect();
    let splits: [&[u32]; 3] = [&[1, 1, 2, 2, 2], &[1, 1, 1, 1, 4], &[1, 1, 1, 2, 3]];
    let mut jobs = Vec::with_capacity(5001);
    for n in &nodes {
        let split = splits[rng.random_range(0..splits.len())];
        let mut next = 0u32;
        for &k in split {
            let id = format!("a/j{:05}", jobs.len());
            let mut job = Job::gang(
                id,
                "a",
                vec![Resources::new(8_000 * k as u64, 64 * GI, 0).with_gpus(k as u64)],
            );
            job.priority = rng.random_range(0..3);
            job.submit_time = Timestamp(0);
            job.tasks[0].state = TaskState::Bound {
                node: n.name.clone(),
                gpus: Some((next..next + k).collect()),
            };
            job.tasks[0].started = Some(Timestamp(rng.random_range(0..36_000_000)));
            next += k;
            jobs.push(job);
        }
    }
    let mut gang = Job::gang(
        "b/llm-64",
        "b",
        vec![Resources::new(96_000, 1000 * GI, 0).with_gpus(8); 8],
    );
    gang.submit_time = Timestamp(36_000_000);
    jobs.push(gang);
    let snap = Snapshot::new(
        nodes,
        QueueTree::build(vec![
            QueueSpec::new("a").quota(Resources::zero().with_gpus(4000)),
            QueueSpec::new("b").quota(Resources::zero().with_gpus(4000)),
        ])
        .expect("valid tree"),
        jobs,
    );
    let cfg = Config::default();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) * 4 {
        let t = Instant::now();
        let d = schedule(&snap, &cfg, Timestamp(36_000_000));
        times.push(t.elapsed());
        last = Some(d);
    }
    let d = last.ok_or_else(|| anyhow::anyhow!("no run"))?;
    let victims: std::collections::BTreeSet<&str> =
        d.evictions.iter().map(|e| e.job.as_str()).collect();
    let nodes: std::collections::BTreeSet<&str> =
        d.nominations.iter().map(|n| n.node.as_str()).collect();
    println!("| benchmark | input | median time | peak RSS | result |");
    println!("|---|---|---|---|---|");
    println!(
        "| reclaim for a 64-GPU gang | 1,000 nodes × 8 GPUs, full, {} running jobs | {:.1} ms | {} | {} pods of {} jobs evicted; gang nominated on {} nodes |",
        snap.jobs.len() - 1,
        median(times).as_secs_f64() * 1e3,
        peak_rss_mib().map_or("n/a".into(), |m| format!("{m:.0} MiB")),
        d.evictions.len(),
        victims.len(),
        nodes.len(),
    );
    Ok(())
}

/// The `--snapshot` benchmark: see the module docs.
fn snapshot_bench(runs: usize) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    use trainyard_cluster::{Change, ClusterState, ObjectChange};
    use trainyard_ingest::{LoadOptions, Source};

    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut text = String::new();
    let nodes = 5000;
    for i in 0..nodes {
        writeln!(
            text,
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: node-{i:05}, labels: {{pool: p{}}}}}\nstatus: {{allocatable: {{cpu: \"192\", memory: 2048Gi, pods: \"110\", nvidia.com/gpu: \"8\"}}}}",
            i % 10
        )?;
    }
    for q in ["a", "b", "c", "d"] {
        writeln!(
            text,
            "---\napiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {{name: {q}}}\nspec: {{quota: {{nvidia.com/gpu: 8000}}}}"
        )?;
    }
    let mut pods = 0usize;
    let mut job = 0usize;
    let mut changed: Option<String> = None;
    // For the 1% churn rows: pending pods as they read once bound, and
    // the bound pods (namespace, name) a round may delete.
    let mut to_bind: Vec<String> = Vec::new();
    let mut to_delete: Vec<(String, String)> = Vec::new();
    while pods < 50_000 {
        let size = rng.random_range(1..=7usize).min(50_000 - pods);
        let queue = ["a", "b", "c", "d"][job % 4];
        let bound = job.is_multiple_of(2);
        let group = format!("g{job:05}");
        if size > 1 {
            writeln!(
                text,
                "---\napiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: {group}, namespace: ns{}}}\nspec: {{queue: {queue}, minMember: {size}}}",
                job % 20
            )?;
        }
        for k in 0..size {
            let node = (pods + k) / 8 % nodes;
            let mut pod = format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {group}-{k}, namespace: ns{}, creationTimestamp: \"2026-11-22T06:00:00Z\", labels: {{trainyard.io/queue: {queue}",
                job % 20
            );
            if size > 1 {
                write!(pod, ", trainyard.io/pod-group: {group}")?;
            }
            pod.push_str("}}\nspec:\n  schedulerName: trainyard\n");
            if bound {
                writeln!(pod, "  nodeName: node-{node:05}")?;
            }
            pod.push_str("  containers: [{name: c, resources: {requests: {cpu: \"8\", memory: 64Gi, nvidia.com/gpu: \"1\"}}}]");
            if bound {
                to_delete.push((format!("ns{}", job % 20), format!("{group}-{k}")));
            } else {
                to_bind.push(pod.replace(
                    "  schedulerName: trainyard\n",
                    &format!(
                        "  schedulerName: trainyard\n  nodeName: node-{:05}\n",
                        (pods + k) % nodes
                    ),
                ));
            }
            if !bound && changed.is_none() && size > 4 {
                // The pod the incremental runs bind.
                changed = Some(pod.replace(
                    "  schedulerName: trainyard\n",
                    "  schedulerName: trainyard\n  nodeName: node-00000\n",
                ));
            }
            writeln!(text, "{pod}")?;
        }
        pods += size;
        job += 1;
    }
    let changed = changed.ok_or_else(|| anyhow::anyhow!("no pending gang of 5+ pods"))?;
    let t = Instant::now();
    let objects = trainyard_ingest::read(&[Source::new("bench", &text)]);
    let read_time = t.elapsed();
    anyhow::ensure!(
        objects.errors.is_empty(),
        "bench input: {:?}",
        objects.errors.first()
    );
    let mut all: Vec<ObjectChange> = Vec::new();
    all.extend(
        objects
            .nodes
            .into_iter()
            .map(|(l, n)| ObjectChange::Node(l, Box::new(n))),
    );
    all.extend(
        objects
            .queues
            .into_iter()
            .map(|(l, q)| ObjectChange::Queue(l, Box::new(q))),
    );
    all.extend(
        objects
            .pod_groups
            .into_iter()
            .map(|(l, g)| ObjectChange::PodGroup(l, Box::new(g))),
    );
    all.extend(
        objects
            .pods
            .into_iter()
            .map(|(l, p)| ObjectChange::Pod(l, Box::new(p))),
    );
    let one = trainyard_ingest::read(&[Source::new("change", &changed)]);
    let (loc, pod) = one
        .pods
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("the changed pod did not read"))?;
    let one = ObjectChange::Pod(loc, Box::new(pod));

    let build = || {
        let mut s = ClusterState::for_objects(LoadOptions::default());
        for c in &all {
            s.apply(Change::Object(c.clone()));
        }
        let snap = s.snapshot();
        (s, snap)
    };
    let mut full = Vec::new();
    let mut world = None;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let (s, snap) = build();
        full.push(t.elapsed());
        std::hint::black_box(&snap);
        world = Some(s);
    }
    let mut world = world.ok_or_else(|| anyhow::anyhow!("no run"))?;
    let base = world.snapshot();
    let jobs = base.jobs.len();
    drop(base);
    // One pod bound: its job is interpreted again, everything else shared.
    let mut incr = Vec::new();
    for _ in 0..runs.max(1) * 20 {
        let t = Instant::now();
        world.apply(Change::Object(one.clone()));
        let snap = world.snapshot();
        incr.push(t.elapsed());
        std::hint::black_box(&snap);
    }
    // One assumed bind (the scheduler's own decision) and a snapshot.
    let pending = world
        .jobs()
        .find_map(|j| {
            j.tasks
                .iter()
                .find(|t| t.is_pending())
                .map(|t| (j.id.clone(), t.key.clone()))
        })
        .ok_or_else(|| anyhow::anyhow!("no pending pod"))?;
    let mut assume = Vec::new();
    for _ in 0..runs.max(1) * 20 {
        let d = trainyard_sched::Decisions {
            binds: vec![trainyard_sched::Bind {
                job: pending.0.clone().into(),
                task: pending.1.clone(),
                node: "node-00001".into(),
                gpus: vec![0],
            }],
            ..trainyard_sched::Decisions::default()
        };
        let t = Instant::now();
        world.assume(&d, Timestamp(0));
        let snap = world.snapshot();
        assume.push(t.elapsed());
        std::hint::black_box(&snap);
        world.forget_assumed(Timestamp(1));
    }
    // 1% churn per cycle: 500 of the 50,000 pods, a third bound by the
    // world (a pending pod arrives again with `spec.nodeName`), a third
    // added (new one-pod jobs), a third deleted; each round touches
    // different pods. The text is read before the clock starts.
    let churn = 500usize;
    let rounds = runs.max(1) * 4;
    let (n_bind, n_add) = (churn / 3, churn / 3);
    let n_del = churn - n_bind - n_add;
    anyhow::ensure!(
        to_bind.len() >= rounds * n_bind && to_delete.len() >= rounds * n_del,
        "not enough pods for {rounds} churn rounds"
    );
    let mut churn_times = Vec::new();
    let mut churn_jobs = 0usize;
    for r in 0..rounds {
        let mut text = String::new();
        for p in &to_bind[r * n_bind..(r + 1) * n_bind] {
            writeln!(text, "{p}")?;
        }
        for i in 0..n_add {
            writeln!(
                text,
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: churn-{r}-{i}, namespace: ns{}, creationTimestamp: \"2026-11-22T06:00:00Z\", labels: {{trainyard.io/queue: {}}}}}\nspec:\n  schedulerName: trainyard\n  containers: [{{name: c, resources: {{requests: {{cpu: \"8\", memory: 64Gi, nvidia.com/gpu: \"1\"}}}}}}]",
                i % 20,
                ["a", "b", "c", "d"][i % 4]
            )?;
        }
        let read = trainyard_ingest::read(&[Source::new("churn", &text)]);
        anyhow::ensure!(
            read.errors.is_empty(),
            "churn input: {:?}",
            read.errors.first()
        );
        let mut changes: Vec<Change> = read
            .pods
            .into_iter()
            .map(|(l, p)| Change::Object(ObjectChange::Pod(l, Box::new(p))))
            .collect();
        for (ns, name) in &to_delete[r * n_del..(r + 1) * n_del] {
            let gone = ObjectChange::gone("Pod", Some(ns), name)
                .ok_or_else(|| anyhow::anyhow!("no deletion change for pods"))?;
            changes.push(Change::Object(gone));
        }
        anyhow::ensure!(changes.len() == churn, "{} churn changes", changes.len());
        let t = Instant::now();
        for c in changes {
            world.apply(c);
        }
        let snap = world.snapshot();
        churn_times.push(t.elapsed());
        churn_jobs = snap.jobs.len();
        std::hint::black_box(&snap);
    }
    let churn_time = median(churn_times);
    let (full, incr, assume) = (median(full), median(incr), median(assume));
    println!("| world state | input | median time | vs full build |");
    println!("|---|---|---|---|");
    println!(
        "| read the text (not timed below) | {nodes} nodes, {pods} pods, {jobs} jobs, {} MB of YAML | {:.0} ms | |",
        text.len() / 1_000_000,
        read_time.as_secs_f64() * 1e3
    );
    println!(
        "| full build: apply every object, snapshot | {nodes} nodes, {pods} pods, {jobs} jobs | {:.1} ms | 1× |",
        full.as_secs_f64() * 1e3
    );
    println!(
        "| one pod bound by the world, snapshot | one job of 5–7 pods interpreted again | {:.3} ms | {:.0}× cheaper |",
        incr.as_secs_f64() * 1e3,
        full.as_secs_f64() / incr.as_secs_f64()
    );
    println!(
        "| one bind assumed, snapshot | one job's view rebuilt | {:.3} ms | {:.0}× cheaper |",
        assume.as_secs_f64() * 1e3,
        full.as_secs_f64() / assume.as_secs_f64()
    );
    println!(
        "| 1% churn, snapshot | {churn} pods ({n_bind} bound by the world, {n_add} added, {n_del} deleted), {rounds} rounds, {churn_jobs} jobs after | {:.2} ms | {:.0}× cheaper |",
        churn_time.as_secs_f64() * 1e3,
        full.as_secs_f64() / churn_time.as_secs_f64()
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--sim") {
        return sim_bench();
    }
    let runs_arg: usize = match args.iter().position(|a| a == "--runs") {
        Some(i) => args.get(i + 1).map(|s| s.parse()).transpose()?.unwrap_or(5),
        None => 5,
    };
    if args.iter().any(|a| a == "--topology") {
        return topology_bench(runs_arg);
    }
    if args.iter().any(|a| a == "--reclaim") {
        return reclaim_bench(runs_arg);
    }
    if args.iter().any(|a| a == "--snapshot") {
        return snapshot_bench(runs_arg);
    }
    if args.iter().any(|a| a == "--pod-rules") {
        return pod_rules_bench(runs_arg);
    }
    let runs: usize = match args.iter().position(|a| a == "--runs") {
        Some(i) => args.get(i + 1).map(|s| s.parse()).transpose()?.unwrap_or(5),
        None => 5,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(42);

    let (tree, demand, cap) = fairshare_tree(&mut rng);
    let mut times = Vec::new();
    for _ in 0..runs.max(1) * 4 {
        let t = Instant::now();
        let fs = fairshare::compute(&tree, &cap, &demand);
        times.push(t.elapsed());
        std::hint::black_box(fs);
    }
    let fs_time = median(times);

    println!("| benchmark | input | median time | throughput |");
    println!("|---|---|---|---|");
    println!(
        "| fair share | {} queues, 3 levels | {:.3} ms | |",
        tree.len() - 1,
        fs_time.as_secs_f64() * 1e3
    );
    for (label, gangs) in [
        ("allocate cycle", 2000),
        ("allocate cycle, contended", 4000),
    ] {
        let snap = cluster(&mut rng, 5000, gangs);
        let pods: usize = snap.jobs.iter().map(|j| j.tasks.len()).sum();
        let cfg = Config::default();
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            let d = schedule(&snap, &cfg, Timestamp(0));
            times.push(t.elapsed());
            last = Some(d);
        }
        let alloc_time = median(times);
        let d = last.expect("at least one run");
        println!(
            "| {label} | 5,000 nodes × 8 GPUs, {} gangs, {} pods ({} bound, {} gangs placed, {} pending) | {:.1} ms | {:.0} pods placed/s |",
            snap.jobs.len(),
            pods,
            d.stats.pods_bound,
            d.stats.gangs_placed,
            d.pending.len(),
            alloc_time.as_secs_f64() * 1e3,
            d.stats.pods_bound as f64 / alloc_time.as_secs_f64()
        );
    }
    Ok(())
}
