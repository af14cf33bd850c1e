//! The suites other than the allocate cycle: see the crate docs of main.rs.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainyard_bench::workloads::GI;
use trainyard_bench::{machine, workloads};
use trainyard_model::{Node, QueueSpec, QueueTree, Resources, Snapshot, Timestamp};
use trainyard_sched::{Config, schedule};

use crate::median;

/// The `--pod-rules` benchmark: see the module docs.
pub fn pod_rules_bench(runs: usize) -> anyhow::Result<()> {
    use std::sync::Arc;
    use trainyard_model::{LabelSelector, NamespaceFilter, PodAffinityTerm, PodRules};
    println!("| benchmark | input | median time | throughput |");
    println!("|---|---|---|---|");
    for every in [0usize, 10] {
        let mut snap = workloads::allocate_cluster(workloads::ALLOCATE_SEED, 5000, 2000);
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

pub fn sim_bench() -> anyhow::Result<()> {
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
pub fn topology_bench(runs: usize, nodes: usize, pods: usize) -> anyhow::Result<()> {
    use std::sync::Arc;
    use trainyard_sched::TopologyPlacement;

    let (mut base, gang) = workloads::rail_fabric(7, nodes, pods);
    let t = Instant::now();
    let topo = workloads::rail_topology(&base.nodes);
    let build = t.elapsed();
    base = base.with_topology(Some(Arc::new(topo)));
    let mut with_gang = base.clone();
    with_gang.jobs.push(Arc::new(gang));
    let gpus = nodes * 8;
    println!("| benchmark | input | median time | result |");
    println!("|---|---|---|---|");
    println!(
        "| build topology | {nodes} nodes, 8 rails, {} leaf groups, {} spine blocks | {:.1} ms | {} vertices, {} edges |",
        nodes.div_ceil(32),
        nodes.div_ceil(32 * 8),
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
            "| cycle with a {}-GPU gang, {placement:?} | {nodes} nodes × 8 GPUs ({gpus} GPUs), 60% loaded | {:.2} ms (cycle without the gang: {:.2} ms) | {} pods bound; {} leaves, {} spine crossings, level {} |",
            pods * 8,
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

/// The `--reclaim` benchmark: see the module docs.
pub fn reclaim_bench(runs: usize, nodes: usize) -> anyhow::Result<()> {
    let (snap, now) = workloads::reclaim_cluster(11, nodes);
    let cfg = Config::default();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) * 4 {
        let t = Instant::now();
        let d = schedule(&snap, &cfg, now);
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
        "| reclaim for a 64-GPU gang | {} nodes × 8 GPUs, full, {} running jobs | {:.1} ms | {} | {} pods of {} jobs evicted; gang nominated on {} nodes |",
        snap.nodes.len(),
        snap.jobs.len() - 1,
        median(times).as_secs_f64() * 1e3,
        machine::peak_rss_mib().map_or("n/a".into(), |m| format!("{m:.0} MiB")),
        d.evictions.len(),
        victims.len(),
        nodes.len(),
    );
    Ok(())
}

/// The `--dra` benchmark: see the module docs.
pub fn dra_bench(runs: usize, nodes: usize) -> anyhow::Result<()> {
    let gangs = nodes * 2 / 5;
    let t = Instant::now();
    let plugin = workloads::allocate_cluster(workloads::ALLOCATE_SEED, nodes, gangs);
    let dra = workloads::dra_cluster(workloads::ALLOCATE_SEED, nodes, gangs);
    let built = t.elapsed();
    let cfg = Config::default();
    let now = trainyard_model::Timestamp(0);
    let (mut tp, mut td) = (Vec::new(), Vec::new());
    let (mut dp, mut dd) = (None, None);
    // The previous run's decisions are dropped after the clock stops:
    // the cycle is the call, and its output outlives it in the service.
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let d = schedule(&plugin, &cfg, now);
        tp.push(t.elapsed());
        dp = Some(d);
        let t = Instant::now();
        let d = schedule(&dra, &cfg, now);
        td.push(t.elapsed());
        dd = Some(d);
    }
    let (dp, dd) = (
        dp.ok_or_else(|| anyhow::anyhow!("no run"))?,
        dd.ok_or_else(|| anyhow::anyhow!("no run"))?,
    );
    let devices: usize = dd
        .claims
        .iter()
        .map(|c| c.allocation.as_ref().map_or(0, Vec::len))
        .sum();
    let (mp, md) = (median(tp), median(td));
    println!("| benchmark | input | median time | binds | result |");
    println!("|---|---|---|---|---|");
    println!(
        "| allocate cycle, device-plugin GPUs | {} nodes × 8 GPUs, {} gangs | {:.1} ms | {} | |",
        plugin.nodes.len(),
        gangs,
        mp.as_secs_f64() * 1e3,
        dp.binds.len(),
    );
    println!(
        "| allocate cycle, DRA GPUs + NICs (KEP-5004) | same, 16 devices per node as ResourceSlices | {:.1} ms | {} | {} claims, {} devices; {:.2}× the device-plugin cycle; DRA part built in {:.1} s |",
        md.as_secs_f64() * 1e3,
        dd.binds.len(),
        dd.claims.len(),
        devices,
        md.as_secs_f64() / mp.as_secs_f64().max(1e-9),
        built.as_secs_f64(),
    );
    Ok(())
}

/// The `--reservations` benchmark: see the module docs. The four runs
/// alternate, so a change of load hits them alike. Each reservations row
/// is compared with reservations off on its own input (the estimated
/// input is a copy of the other without walltimes: its memory differs).
pub fn reservations_bench(runs: usize, nodes: usize, large: usize) -> anyhow::Result<()> {
    let (snap, now) = workloads::reservation_cluster(13, nodes, large);
    let est = workloads::estimated_ends(&snap, 13);
    let mut on = Config::default();
    on.preemption.reclaim = false;
    on.preemption.preempt = false;
    on.reservations.max_gangs = u32::try_from(large)?;
    let mut off = on.clone();
    off.reservations.max_gangs = 0;
    let (mut t_on, mut t_off, mut t_est, mut t_est_off) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut d_on, mut d_off, mut d_est, mut d_est_off) = (None, None, None, None);
    for _ in 0..runs.max(1) * 4 {
        let t = Instant::now();
        d_off = Some(schedule(&snap, &off, now));
        t_off.push(t.elapsed());
        let t = Instant::now();
        d_on = Some(schedule(&snap, &on, now));
        t_on.push(t.elapsed());
        let t = Instant::now();
        d_est = Some(schedule(&est, &on, now));
        t_est.push(t.elapsed());
        let t = Instant::now();
        d_est_off = Some(schedule(&est, &off, now));
        t_est_off.push(t.elapsed());
    }
    let no_run = || anyhow::anyhow!("no run");
    let (d_on, d_off, d_est, d_est_off) = (
        d_on.ok_or_else(no_run)?,
        d_off.ok_or_else(no_run)?,
        d_est.ok_or_else(no_run)?,
        d_est_off.ok_or_else(no_run)?,
    );
    let (m_on, m_off, m_est, m_est_off) = (
        median(t_on).as_secs_f64(),
        median(t_off).as_secs_f64(),
        median(t_est).as_secs_f64(),
        median(t_est_off).as_secs_f64(),
    );
    let running = snap
        .jobs
        .iter()
        .filter(|j| j.tasks.iter().any(|t| !t.is_pending()))
        .count();
    println!("| benchmark | input | median time | result |");
    println!("|---|---|---|---|");
    let input = format!(
        "{} nodes × 8 GPUs, 98% full ({running} running jobs), {} pending jobs, no reclaim",
        snap.nodes.len(),
        snap.jobs.len() - running
    );
    let off_row = |what: &str, m: f64, d: &trainyard_sched::Decisions| {
        println!(
            "| cycle, reservations off{what} | {input} | {:.1} ms | {} pods bound |",
            m * 1e3,
            d.binds.len()
        );
    };
    let row = |what: &str, m: f64, off: f64, d: &trainyard_sched::Decisions| {
        println!(
            "| cycle, up to {large} reservations{what} | {input} | {:.1} ms | {} reservations, {} pods bound; **{:+.1}%** |",
            m * 1e3,
            d.reservations.len(),
            d.binds.len(),
            (m / off - 1.0) * 100.0
        );
    };
    off_row("", m_off, &d_off);
    row("", m_on, m_off, &d_on);
    let estimated =
        ", running jobs' ends estimated (no walltimes; 100 observed runtimes per queue)";
    off_row(estimated, m_est_off, &d_est_off);
    row(estimated, m_est, m_est_off, &d_est);
    Ok(())
}

/// The `--snapshot` benchmark: see the module docs.
pub fn snapshot_bench(runs: usize) -> anyhow::Result<()> {
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
