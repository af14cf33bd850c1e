//! Node pools publishing their GPUs (and NICs) as DRA devices: jobs are
//! placed on them without overcommitting a node across cycles, faults keep
//! the devices, runs are deterministic, and on an uncontended workload
//! DRA on and off place the same jobs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use trainyard_ingest::{LoadOptions, Source};
use trainyard_model::{QueueSpec, QueueTree, Snapshot, TaskState, Timestamp};
use trainyard_sched::{Config, Decisions, schedule};
use trainyard_sim::spec::{ClusterSpec, parse_cluster};
use trainyard_sim::workload::parse_workload;
use trainyard_sim::{
    JobState, SimInput, SimJob, SimOptions, SimOutput, output, report, simulate_with,
};

fn example(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sim")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Two pools of 8 GPUs: `dra` nodes (GPUs and 8 NICs as DRA devices,
/// when `on`) and `plain` ones (device plugin), with a fault on a DRA
/// node.
fn cluster(on: bool, dra_nodes: u32, plain_nodes: u32, fault: bool) -> ClusterSpec {
    let dra = if on { ", dra: {nics: 8}" } else { "" };
    let faults = if fault {
        "  faults:\n  - {at: 2h, node: dra-001, event: down}\n  - {at: 3h, node: dra-001, event: up}\n"
    } else {
        ""
    };
    let text = format!(
        "kind: ClusterSpec
spec:
  nodePools:
  - {{name: dra, count: {dra_nodes}, cpu: 96, memory: 1Ti, gpu: {{count: 8, model: NVIDIA-H100-80GB-HBM3, memory: 80Gi}}{dra}}}
  - {{name: plain, count: {plain_nodes}, cpu: 96, memory: 1Ti, gpu: {{count: 8, model: NVIDIA-H100-80GB-HBM3}}}}
{faults}"
    );
    parse_cluster(&text, "c.yaml").unwrap()
}

/// Jobs of 1, 2, 4 and 8 GPUs and gangs of 2 × 8, arriving over hours.
fn workload(per_hour: u32, count: u32) -> Vec<SimJob> {
    let text = format!(
        "kind: WorkloadGenerator
spec:
  seed: 7
  templates:
  - name: small
    queue: q
    count: {count}
    arrival: {{poisson: {{perHour: {per_hour}}}}}
    pods: {{fixed: 1}}
    podRequests: {{cpu: 4, memory: 16Gi, nvidia.com/gpu: 1}}
    duration: {{logNormal: {{median: 40m, sigma: 0.8}}}}
  - name: half
    queue: q
    count: {count}
    arrival: {{poisson: {{perHour: {per_hour}}}}}
    pods: {{choice: [1, 2]}}
    podRequests: {{cpu: 8, memory: 64Gi, nvidia.com/gpu: 4}}
    duration: {{logNormal: {{median: 1h, sigma: 0.5}}}}
  - name: gang
    queue: q
    count: {gangs}
    arrival: {{poisson: {{perHour: {gang_rate}}}}}
    pods: {{fixed: 2}}
    podRequests: {{cpu: 16, memory: 128Gi, nvidia.com/gpu: 8}}
    duration: {{logNormal: {{median: 2h, sigma: 0.5}}}}
",
        gangs = count.div_ceil(4),
        gang_rate = per_hour.div_ceil(4),
    );
    parse_workload(&text, "w.yaml").unwrap()
}

/// What the wrapped scheduler saw: per cycle, GPUs held on each node
/// before the cycle and after its binds (milli-GPU), and the DRA devices
/// its claims allocated per node.
#[derive(Default)]
struct Seen {
    cycles: u32,
    /// Most milli-GPU held on a node after a cycle's binds, by node.
    peak: BTreeMap<String, u64>,
    /// Claims allocated, by node.
    claims: BTreeMap<String, u64>,
    /// Binds by node.
    binds: BTreeMap<String, u64>,
}

fn run(spec: &ClusterSpec, jobs: &[SimJob], seen: &mut Seen) -> SimOutput {
    let tree = QueueTree::build(vec![QueueSpec::new("q")]).unwrap();
    let capacity: BTreeMap<String, u64> = spec
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.gpus.len() as u64 * 1000))
        .collect();
    let mut check = |snap: &Snapshot, config: &Config, now: Timestamp| -> Decisions {
        let d = schedule(snap, config, now);
        seen.cycles += 1;
        let mut held: BTreeMap<&str, u64> = BTreeMap::new();
        let mut requests = BTreeMap::new();
        for job in &snap.jobs {
            for t in job.tasks.iter() {
                requests.insert((job.id.as_str(), t.name.as_str()), t.requests.gpu);
                if let TaskState::Bound { node, .. } = &t.state {
                    *held.entry(node.as_str()).or_default() += t.requests.gpu;
                }
            }
        }
        let before = held.clone();
        for b in &d.binds {
            let gpu = requests
                .get(&(b.job.as_str(), b.task.name.as_str()))
                .copied()
                .expect("a bound task is in the snapshot");
            *held.entry(b.node.as_str()).or_default() += gpu;
            *seen.binds.entry(b.node.to_string()).or_default() += 1;
        }
        for (node, h) in &held {
            let cap = capacity.get(*node).copied().unwrap_or(0);
            assert!(*h <= cap, "{node}: {h} milli-GPU held of {cap} at {now:?}");
            let p = seen.peak.entry(node.to_string()).or_default();
            *p = (*p).max(*h);
        }
        // Each cycle's claims: devices distinct per node, and no more than
        // the node's GPUs left free by the pods bound before the cycle.
        let mut fresh: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for c in &d.claims {
            let Some(devices) = &c.allocation else {
                continue;
            };
            assert_eq!(c.extended, ["nvidia.com/gpu"], "{}", c.claim);
            *seen.claims.entry(c.node.to_string()).or_default() += 1;
            fresh
                .entry(c.node.as_str())
                .or_default()
                .extend(devices.iter().map(|a| format!("{}/{}", a.driver, a.device)));
        }
        for (node, mut devices) in fresh {
            let n = devices.len();
            devices.sort();
            devices.dedup();
            assert_eq!(
                devices.len(),
                n,
                "{node}: a device allocated twice in one cycle"
            );
            let free = (capacity[node] - before.get(node).copied().unwrap_or(0)) / 1000;
            assert!(
                n as u64 <= free,
                "{node}: {n} devices allocated, {free} free"
            );
            assert!(devices.iter().all(|d| d.starts_with("gpu.nvidia.com/gpu-")));
        }
        d
    };
    simulate_with(
        SimInput {
            nodes: &spec.nodes,
            queues: &tree,
            jobs,
            faults: &spec.faults,
        },
        &Config::default(),
        &SimOptions::default(),
        &mut check,
        &mut |_| {},
    )
}

#[test]
fn dra_pool_places_jobs_and_never_overcommits_a_node() {
    let spec = cluster(true, 3, 1, true);
    let jobs = workload(6, 24);
    let mut seen = Seen::default();
    let out = run(&spec, &jobs, &mut seen);
    let done = out
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Completed)
        .count();
    assert_eq!(done, jobs.len(), "every job completes");
    assert!(seen.cycles > 20, "{} cycles", seen.cycles);
    // The DRA nodes got pods, each with a claim of DRA devices; the plain
    // node got pods and no claim.
    for n in ["dra-000", "dra-001", "dra-002"] {
        assert!(
            seen.claims.get(n).copied().unwrap_or(0) > 0,
            "claims on {n}"
        );
        assert_eq!(
            seen.claims.get(n),
            seen.binds.get(n),
            "a claim per pod on {n}"
        );
        assert!(seen.peak[n] == 8000, "{n} filled at some time");
    }
    assert!(seen.binds.get("plain-000").copied().unwrap_or(0) > 0);
    assert_eq!(seen.claims.get("plain-000"), None);
    let claims: u64 = seen.claims.values().sum();
    assert_eq!(out.summary().dra_claims, claims);
    // The fault: capacity drops by the DRA node's 8 GPUs for an hour and
    // comes back, and the node is used again after it returned.
    let cap = |t: i64| {
        out.cluster
            .iter()
            .take_while(|c| c.time.0 <= t)
            .last()
            .map(|c| c.gpu_capacity)
    };
    assert_eq!(cap(3_600_000), Some(32_000));
    assert_eq!(cap(9_000_000), Some(24_000));
    assert_eq!(cap(11_000_000), Some(32_000));
    assert!(
        out.jobs.iter().any(|j| j.restarts > 0),
        "a job on the failed node restarted"
    );
}

#[test]
fn dra_on_and_off_place_the_same_jobs_when_uncontended() {
    // Few arrivals on a large cluster: every job starts at the first cycle
    // after it arrives, with or without DRA.
    let jobs = workload(1, 6);
    let mut placed = Vec::new();
    for on in [true, false] {
        let out = run(&cluster(on, 4, 2, false), &jobs, &mut Seen::default());
        let s = out.summary();
        assert_eq!(s.dra_claims > 0, on);
        placed.push((
            out.jobs.iter().filter(|j| j.start.is_some()).count(),
            s.completed,
            s.wait_seconds.clone(),
            s.jct_seconds.clone(),
        ));
    }
    assert_eq!(placed[0].0, jobs.len());
    assert_eq!(placed[0], placed[1]);
}

/// The deterministic outputs of the DRA example cluster with the example
/// workload cut to a day.
fn example_run() -> (String, SimOutput) {
    let spec = parse_cluster(&example("dra-cluster.yaml"), "dra-cluster.yaml").unwrap();
    let queues = trainyard_ingest::load(
        &[Source::new("queues.yaml", example("queues.yaml"))],
        &LoadOptions::default(),
    )
    .unwrap()
    .snapshot
    .queues;
    let workload = example("workload.yaml")
        .replace("count: 1500", "count: 60")
        .replace("count: 600", "count: 24")
        .replace("count: 300", "count: 12")
        .replace("count: 120", "count: 6")
        .replace(
            "count: 80\n    arrival: {poisson: {perHour: 0.5}}",
            "count: 4\n    arrival: {poisson: {perHour: 0.5}}",
        );
    let jobs = parse_workload(&workload, "workload.yaml").unwrap();
    let out = simulate_with(
        SimInput {
            nodes: &spec.nodes,
            queues: &queues,
            jobs: &jobs,
            faults: &spec.faults,
        },
        &Config::default(),
        &SimOptions::default(),
        &mut schedule,
        &mut |_| {},
    );
    let s = out.summary();
    let text = [
        output::jobs_csv(&out),
        output::queues_csv(&out),
        output::summary_json(&s),
        report::report_html(&[(&out, &s)], "determinism"),
    ]
    .join("\n=====\n");
    (text, out)
}

#[test]
fn dra_runs_give_the_same_bytes() {
    let (a, out) = example_run();
    let (b, _) = example_run();
    assert!(a == b, "outputs differ between two runs");
    assert!(out.jobs.iter().filter(|j| j.end.is_some()).count() > 50);
    assert!(out.summary().dra_claims > 50);
    assert!(a.contains("\"draClaims\""));
}

/// A rail-optimized fabric (the rail example cluster cut to 32 nodes)
/// with its GPUs published as DRA devices places the same gangs on the
/// same nodes, rails and spine crossings as with device-plugin GPUs: the
/// topology counts a node's DRA GPUs, and the claims get the devices of
/// the slots the rules chose.
#[test]
fn dra_on_a_rail_fabric_places_as_device_plugin_gpus_do() {
    let text = example("rail-cluster.yaml").replace("count: 128", "count: 32");
    let jobs = parse_workload(
        "kind: WorkloadGenerator
spec:
  seed: 11
  templates:
  - name: single
    queue: q
    count: 40
    arrival: {poisson: {perHour: 20}}
    pods: {choice: [1, 2]}
    podRequests: {cpu: 8, memory: 64Gi, nvidia.com/gpu: 4}
    duration: {logNormal: {median: 1h, sigma: 0.5}}
  - name: ring
    queue: q
    count: 16
    arrival: {poisson: {perHour: 6}}
    pods: {choice: [2, 4, 8]}
    podRequests: {cpu: 16, memory: 128Gi, nvidia.com/gpu: 8}
    duration: {logNormal: {median: 2h, sigma: 0.5}}
",
        "w.yaml",
    )
    .unwrap();
    let tree = QueueTree::build(vec![QueueSpec::new("q")]).unwrap();
    let mut outs = Vec::new();
    for on in [false, true] {
        let spec_text = if on {
            text.replace(
                "      node.kubernetes.io/instance-type: p5.48xlarge\n",
                "      node.kubernetes.io/instance-type: p5.48xlarge\n    dra: {nics: 8}\n",
            )
        } else {
            text.clone()
        };
        let spec = parse_cluster(&spec_text, "rail-cluster.yaml").unwrap();
        let opts = SimOptions {
            topology: spec.topology.clone(),
            slowdown: spec.slowdown,
            ..SimOptions::default()
        };
        let out = trainyard_sim::simulate(
            SimInput {
                nodes: &spec.nodes,
                queues: &tree,
                jobs: &jobs,
                faults: &spec.faults,
            },
            &Config::default(),
            &opts,
            &mut |_| {},
        );
        assert_eq!(out.summary().dra_claims > 0, on);
        outs.push(out);
    }
    let view = |o: &SimOutput| -> Vec<String> {
        o.jobs
            .iter()
            .map(|j| {
                format!(
                    "{} start {:?} topology {}",
                    j.id,
                    j.start,
                    serde_json::to_string(&j.topology).unwrap()
                )
            })
            .collect()
    };
    let (off, on) = (view(&outs[0]), view(&outs[1]));
    let gangs = outs[1].jobs.iter().filter(|j| j.topology.is_some()).count();
    assert!(gangs >= 8, "only {gangs} multi-pod jobs started");
    assert_eq!(off, on);
}
