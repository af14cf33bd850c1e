//! Instruction counts of the scheduling core under valgrind (gungraun's
//! callgrind), checked against the committed baseline
//! `crates/bench/baseline/instructions.toml` by
//! `scripts/check-instructions.sh` (see docs/benchmarks.md).
//!
//! Each benchmark builds its input in a setup function, which callgrind
//! does not count; only the measured call is counted. The input is handed
//! back with the result, so dropping either is not counted either.
//!
//! Run: `cargo bench -p trainyard-bench --bench instructions`
//! (needs valgrind and `gungraun-runner` of the same version as the
//! `gungraun` dev-dependency; `scripts/install-test-tools.sh` installs it).

use std::hint::black_box;
use std::sync::Arc;

use gungraun::{
    Callgrind, EventKind, LibraryBenchmarkConfig, library_benchmark, library_benchmark_group, main,
};
use trainyard_bench::workloads::{self, GI};
use trainyard_model::{Node, QueueSpec, QueueTree, Resources, Snapshot, Timestamp};
use trainyard_sched::{Config, Decisions, schedule};
use trainyard_sim::{SimInput, SimJob, SimOptions, SimOutput, simulate};

/// One scheduling cycle's input: the snapshot and the time to schedule at,
/// with the default config.
struct Cycle {
    snap: Snapshot,
    now: Timestamp,
    config: Config,
}

impl Cycle {
    fn new(snap: Snapshot, now: Timestamp) -> Self {
        Cycle {
            snap,
            now,
            config: Config::default(),
        }
    }
}

/// The allocate cycle of `trainyard-bench`: `nodes` empty nodes × 8 GPUs
/// and `gangs_for(nodes)` pending gangs.
fn allocate(nodes: usize) -> Cycle {
    let snap =
        workloads::allocate_cluster(workloads::ALLOCATE_SEED, nodes, workloads::gangs_for(nodes));
    Cycle::new(snap, Timestamp(0))
}

/// `trainyard-bench --reclaim` at 1,000 nodes: a full cluster and a
/// 64-GPU gang whose queue is owed its quota.
fn reclaim(nodes: usize) -> Cycle {
    let (snap, now) = workloads::reclaim_cluster(11, nodes);
    Cycle::new(snap, now)
}

/// `trainyard-bench --topology`: a 60%-loaded rail-optimized fabric of
/// `nodes` nodes and a ranked gang of `pods` 8-GPU pods pending on it;
/// the default config places topology-aware.
fn topology((nodes, pods): (usize, usize)) -> Cycle {
    let (mut snap, gang) = workloads::rail_fabric(7, nodes, pods);
    snap.jobs.push(Arc::new(gang));
    Cycle::new(snap, Timestamp(0))
}

// One scheduling cycle: the measured call. One function for every cycle
// input (identical functions would be folded into one by the linker, and
// callgrind would see one name for all of them).
#[library_benchmark]
#[bench::allocate_nodes_1000(args = (1000), setup = allocate)]
#[bench::allocate_nodes_5000(args = (5000), setup = allocate)]
#[bench::reclaim_nodes_1000(args = (1000), setup = reclaim)]
#[bench::topology_rail_4096_gang_32(args = ((4096, 32)), setup = topology)]
fn cycle(input: Cycle) -> (Cycle, Decisions) {
    let d = schedule(black_box(&input.snap), &input.config, input.now);
    (input, d)
}

/// A simulator replay's input: nodes × 8 GPUs, three queues, and a seeded
/// generated workload.
struct Replay {
    nodes: Vec<Node>,
    queues: QueueTree,
    jobs: Vec<SimJob>,
}

/// `trainyard-bench --sim`'s synthetic workload scaled down to `nodes`
/// nodes × 8 GPUs and `jobs` jobs (60% one-GPU jobs, 30% whole-node jobs,
/// 10% gangs of 2, 4 or 8 whole nodes; seed 42), arriving at a rate per
/// node that keeps the cluster busy enough that jobs queue.
fn replay_input((nodes, jobs): (usize, usize)) -> Replay {
    let nodes: Vec<Node> = (0..nodes)
        .map(|i| Node::new(format!("n{i:04}"), 192_000, 2048 * GI, 8))
        .collect();
    let gpus = nodes.len() as u64 * 8;
    // Invariant: three fixed, valid queue specs.
    let queues = QueueTree::build(vec![
        QueueSpec::new("a").quota(Resources::zero().with_gpus(gpus * 3 / 8)),
        QueueSpec::new("b").quota(Resources::zero().with_gpus(gpus * 3 / 8)),
        QueueSpec::new("c"),
    ])
    .expect("valid tree");
    // Arrivals per hour per 128 nodes: 20 one-GPU, 10 whole-node, 3 gangs.
    let rate = |per_128: f64| per_128 * nodes.len() as f64 / 128.0;
    let generator = format!(
        r#"
kind: WorkloadGenerator
spec:
  seed: 42
  templates:
  - {{name: dev, queue: a, count: {dev}, arrival: {{poisson: {{perHour: {dev_rate}}}}}, podRequests: {{cpu: "12", memory: 100Gi, nvidia.com/gpu: 1}}, duration: {{logNormal: {{median: 30m, sigma: 1.0}}}}}}
  - {{name: node, queue: b, count: {node}, arrival: {{poisson: {{perHour: {node_rate}}}}}, podRequests: {{cpu: "96", memory: 1000Gi, nvidia.com/gpu: 8}}, duration: {{logNormal: {{median: 2h, sigma: 0.8}}}}}}
  - {{name: gang, queue: c, count: {gang}, arrival: {{poisson: {{perHour: {gang_rate}}}}}, pods: {{choice: [2, 4, 8]}}, podRequests: {{cpu: "96", memory: 1000Gi, nvidia.com/gpu: 8}}, duration: {{logNormal: {{median: 4h, sigma: 0.6}}}}}}
"#,
        dev = jobs * 6 / 10,
        node = jobs * 3 / 10,
        gang = jobs - jobs * 6 / 10 - jobs * 3 / 10,
        dev_rate = rate(20.0),
        node_rate = rate(10.0),
        gang_rate = rate(3.0),
    );
    // Invariant: the generator above is a valid workload document.
    let jobs =
        trainyard_sim::workload::parse_workload(&generator, "bench").expect("valid workload");
    Replay {
        nodes,
        queues,
        jobs,
    }
}

// One whole simulation (every cycle, event and sample): the measured call.
#[library_benchmark]
#[bench::nodes_64_jobs_1000(args = ((64, 1000)), setup = replay_input)]
fn replay(input: Replay) -> (Replay, SimOutput) {
    let out = simulate(
        SimInput {
            nodes: black_box(&input.nodes),
            queues: &input.queues,
            jobs: &input.jobs,
            faults: &[],
        },
        &Config::default(),
        &SimOptions::default(),
        &mut |_| {},
    );
    (input, out)
}

library_benchmark_group!(name = core, benchmarks = [cycle, replay]);

// Only instructions are counted: without the cache simulation callgrind
// runs about twice as fast, and the check reads nothing else.
main!(
    config = LibraryBenchmarkConfig::default()
        .tool(Callgrind::with_args(["--cache-sim=no"]).format([EventKind::Ir]));
    library_benchmark_groups = core
);
