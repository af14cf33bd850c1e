//! `trainyard-bench`: wall-clock benchmarks of the scheduling core on
//! seeded synthetic inputs, printed as Markdown tables (copy into
//! docs/benchmarks.md). Release build, single-threaded, median of N runs;
//! every run prints its input and the machine's load first.
//!
//! Suites (one per run; the allocate cycle when none is named):
//!
//! 1. the allocate cycle (default): fair share for 1,110 queues in a
//!    3-level tree, then one allocate cycle on `--nodes` empty nodes × 8
//!    GPUs (5,000) with `--gangs` pending gangs of 1–64 pods (2 per 5
//!    nodes: 2,000, about 20k pods) in 4 team queues, and a contended
//!    cycle with twice the gangs. `--scaling` runs a series of sizes
//!    instead, gangs growing with nodes, and fits the exponent.
//! 2. `--topology`: a gang of `--pods` ranked pods × 8 GPUs (32) placed on
//!    a `--nodes` (4,096) rail-optimized fabric, 60% loaded,
//!    topology-aware and blind; plus building the topology.
//! 3. `--reclaim`: reclaim for a 64-GPU gang in a full cluster of
//!    `--nodes` (1,000) running 5 jobs per node of another team.
//! 4. `--snapshot`: the world state at 5,000 nodes and 50,000 pods: full
//!    build against one change, one assumed bind and 1% churn.
//! 5. `--pod-rules`: the 2,000-gang cycle with every tenth gang asking for
//!    one pod per node (required pod anti-affinity).
//! 6. `--sim`: 100,000 synthetic jobs on 1,000 nodes, and the openb
//!    `default` trace when `../shared/data/openb` exists.
//! 7. `--load`: reading a `kubectl get -o yaml` dump of `--nodes`
//!    (20,000) nodes, alone and then with 4 pods per node: time, MB/s,
//!    peak memory and bytes of memory per byte of YAML.
//! 8. `--store`: the persisted state on redb and sled: a simulated year
//!    of usage history for `--queues` (2,000) queues (size, hourly commit,
//!    daily compaction), then per-cycle commits into it.
//! 9. `--reservations`: a cycle on `--nodes` (5,000) nodes, 98% full of
//!    running jobs with walltimes, the allocate suite's pending gangs plus
//!    `--large` (20) 64-GPU gangs that do not fit: with that many
//!    reservations against none, and the cost they add (reclaim and
//!    preemption off in both, so the walk is what is timed); then the same
//!    with the running jobs' walltimes removed and their ends estimated
//!    from 100 observed runtimes per queue, against reservations off on
//!    that same input.
//! 10. `--dra`: the allocate cycle at `--nodes` (5,000) with each
//!     node's 8 GPUs and 8 NICs published as DRA ResourceSlices and the
//!     GPUs serving `nvidia.com/gpu` (KEP-5004), against the same cluster
//!     and pods with device-plugin GPUs; runs alternate.
//! 11. `--api`: the gRPC API's answers (ExplainJob, ListJobs, ListQueues,
//!     WhatIf, GetSnapshot) on the latest cycle of `--nodes` (5,000)
//!     nodes with about 50,000 pods, and the cycle's time with a reader
//!     asking beside it.
//! 12. `--forecast`: one job's start-time forecast on the `--reservations`
//!     input (`--large` defaults to 20 there; give 8 for the documented
//!     run), with walltimes and with estimated ends.
//! 13. `--consolidation`: the cycle with consolidation on against off, on
//!     the allocate cluster and on the `--reservations` one with movable
//!     running jobs.

mod api;
mod consolidation;
mod forecast;
mod load;
mod store;
mod suites;

use std::time::{Duration, Instant};

use clap::{ArgGroup, Parser};
use trainyard_bench::{machine, workloads};
use trainyard_model::Timestamp;
use trainyard_sched::{Config, fairshare, schedule};

/// Benchmarks of Trainyard's scheduling core, printed as Markdown tables.
///
/// With no suite named, times one allocate cycle: `--nodes` empty nodes ×
/// 8 GPUs and `--gangs` pending gangs (by default 2 per 5 nodes, about 4
/// pods per node). Build with `--release`; numbers from a debug build mean
/// nothing. Every run prints its input and the machine's load first:
/// compare numbers only at a similar load.
///
/// Examples:
///
///   trainyard-bench                          # 5,000 nodes, 2,000 gangs
///
///   trainyard-bench --nodes 20000            # 8,000 gangs, ~80,000 pods
///
///   trainyard-bench --scaling                # 1,000 … 50,000 nodes, exponent
///
///   trainyard-bench --reclaim --nodes 10000  # reclaim in a full cluster
///
///   trainyard-bench --topology --pods 128    # a 1,024-GPU gang on rails
#[derive(Parser, Debug)]
#[command(name = "trainyard-bench", version, verbatim_doc_comment)]
#[command(group(ArgGroup::new("suite").args(["topology", "reclaim", "snapshot", "pod_rules", "sim", "load", "store", "reservations", "dra", "api", "forecast", "consolidation"])))]
struct Args {
    /// Nodes in the cluster (each 192 cores, 2 TiB, 8 GPUs). Default per
    /// suite: allocate 5,000, topology 4,096, reclaim 1,000, load 20,000.
    #[arg(long, value_name = "N")]
    nodes: Option<usize>,
    /// Pending gangs in the allocate cycle (default: 2 per 5 nodes).
    #[arg(long, value_name = "N", conflicts_with = "suite")]
    gangs: Option<usize>,
    /// Pods of 8 GPUs in the topology suite's gang (default 32).
    #[arg(long, value_name = "N")]
    pods: Option<usize>,
    /// Runs per measurement; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 5)]
    runs: usize,
    /// Time the allocate cycle at a series of sizes (gangs growing with
    /// nodes) and print the fitted exponent of time against nodes.
    #[arg(long, conflicts_with_all = ["suite", "gangs", "nodes"])]
    scaling: bool,
    /// The node counts of `--scaling`.
    #[arg(long, value_name = "N,N,…", value_delimiter = ',', default_values_t = [1000usize, 2000, 5000, 10000, 20000, 50000])]
    sizes: Vec<usize>,
    /// Topology-aware gang placement on a rail-optimized fabric.
    #[arg(long)]
    topology: bool,
    /// Reclaim for a 64-GPU gang in a full cluster.
    #[arg(long)]
    reclaim: bool,
    /// The world state: full build against incremental changes.
    #[arg(long)]
    snapshot: bool,
    /// The allocate cycle with rules between pods.
    #[arg(long)]
    pod_rules: bool,
    /// The simulator: synthetic and openb replays.
    #[arg(long)]
    sim: bool,
    /// Loading a `kubectl get -o yaml` dump.
    #[arg(long)]
    load: bool,
    /// The persisted state (usage history, journal) on both backends.
    #[arg(long)]
    store: bool,
    /// Leaf queues of `--store`.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    queues: usize,
    /// Simulated days of `--store`.
    #[arg(long, value_name = "N", default_value_t = 365)]
    days: u64,
    /// Jobs ending per day in `--store` (one accounting record each).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    jobs_per_day: u64,
    /// A cycle with reservations for starving gangs against one without.
    #[arg(long)]
    reservations: bool,
    /// The allocate cycle with the GPUs (and NICs) published as DRA
    /// ResourceSlices, against the same cluster with device-plugin GPUs.
    #[arg(long)]
    dra: bool,
    /// The gRPC API's answers on a large cluster's latest cycle, and the
    /// cycle with a reader beside it.
    #[arg(long)]
    api: bool,
    /// One job's start-time forecast (trainyard_sim::forecast).
    #[arg(long)]
    forecast: bool,
    /// The cycle with consolidation on against off.
    #[arg(long)]
    consolidation: bool,
    /// Starving 64-GPU gangs of `--reservations` and `--forecast`.
    #[arg(long, value_name = "N", default_value_t = 20)]
    large: usize,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    // Before anything allocates: the service runs with it, so the numbers do.
    let allocator = trainyard_runtime::keep_freed_memory();
    let args = Args::parse();
    anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; build with --release for meaningful numbers");
    }
    println!("{}; allocator {allocator:?}\n", machine::describe());
    if args.sim {
        return suites::sim_bench();
    }
    if args.topology {
        return suites::topology_bench(
            args.runs,
            args.nodes.unwrap_or(4096),
            args.pods.unwrap_or(32),
        );
    }
    if args.reclaim {
        return suites::reclaim_bench(args.runs, args.nodes.unwrap_or(1000));
    }
    if args.reservations {
        return suites::reservations_bench(args.runs, args.nodes.unwrap_or(5000), args.large);
    }
    if args.consolidation {
        return consolidation::consolidation_bench(
            args.runs,
            args.nodes.unwrap_or(5000),
            args.large,
        );
    }
    if args.forecast {
        return forecast::forecast_bench(args.runs, args.nodes.unwrap_or(5000), args.large);
    }
    if args.snapshot {
        return suites::snapshot_bench(args.runs);
    }
    if args.dra {
        return suites::dra_bench(args.runs, args.nodes.unwrap_or(5000));
    }
    if args.api {
        return api::api_bench(args.runs, args.nodes.unwrap_or(5000));
    }
    if args.pod_rules {
        return suites::pod_rules_bench(args.runs);
    }
    if args.store {
        anyhow::ensure!(
            args.queues > 0 && args.days > 0,
            "--queues and --days must be at least 1"
        );
        return store::store_bench(args.queues, args.days, args.jobs_per_day);
    }
    if args.load {
        return load::load_bench(args.runs, args.nodes.unwrap_or(20_000));
    }
    if args.scaling {
        return scaling(args.runs, &args.sizes);
    }
    allocate(args.runs, args.nodes.unwrap_or(5000), args.gangs)
}

/// One allocate cycle's measurement.
struct Cycle {
    gangs: usize,
    pods: usize,
    bound: usize,
    placed: usize,
    pending: usize,
    evicted: usize,
    time: Duration,
}

fn time_cycle(runs: usize, nodes: usize, gangs: usize) -> Cycle {
    let snap = workloads::allocate_cluster(workloads::ALLOCATE_SEED, nodes, gangs);
    let pods: usize = snap.jobs.iter().map(|j| j.tasks.len()).sum();
    let cfg = Config::default();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        let d = schedule(&snap, &cfg, Timestamp(0));
        times.push(t.elapsed());
        last = Some(d);
    }
    let d = last.unwrap_or_default();
    Cycle {
        gangs,
        pods,
        bound: d.stats.pods_bound as usize,
        placed: d.stats.gangs_placed as usize,
        pending: d.pending.len(),
        evicted: d.evictions.len(),
        time: median(times),
    }
}

fn allocate(runs: usize, nodes: usize, gangs: Option<usize>) -> anyhow::Result<()> {
    let gangs = gangs.unwrap_or_else(|| workloads::gangs_for(nodes));
    println!(
        "input: {nodes} nodes × 8 GPUs, {gangs} pending gangs (seed {}), {runs} runs\n",
        workloads::ALLOCATE_SEED
    );
    let (tree, demand, cap) = workloads::fairshare_tree(42);
    let mut times = Vec::new();
    for _ in 0..runs * 4 {
        let t = Instant::now();
        let fs = fairshare::compute(&tree, &cap, &demand, None);
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
        ("allocate cycle", gangs),
        ("allocate cycle, contended", gangs * 2),
    ] {
        let c = time_cycle(runs, nodes, gangs);
        println!(
            "| {label} | {nodes} nodes × 8 GPUs, {} gangs, {} pods ({} bound, {} gangs placed, {} pending, {} pods evicted) | {:.1} ms | {:.0} pods placed/s |",
            c.gangs,
            c.pods,
            c.bound,
            c.placed,
            c.pending,
            c.evicted,
            c.time.as_secs_f64() * 1e3,
            c.bound as f64 / c.time.as_secs_f64()
        );
    }
    Ok(())
}

fn scaling(runs: usize, sizes: &[usize]) -> anyhow::Result<()> {
    anyhow::ensure!(
        !sizes.is_empty(),
        "--scaling needs at least one size in --sizes"
    );
    println!(
        "input: allocate cycle, nodes × 8 GPUs empty, {}/{} pending gangs per node (seed {}), {runs} runs per size\n",
        workloads::GANGS_PER_NODE.0,
        workloads::GANGS_PER_NODE.1,
        workloads::ALLOCATE_SEED
    );
    println!(
        "| nodes | gangs | pending pods | bound | median cycle | pods placed/s | exponent from previous |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut points = Vec::new();
    for &nodes in sizes {
        let c = time_cycle(runs, nodes, workloads::gangs_for(nodes));
        let secs = c.time.as_secs_f64();
        let local = points
            .last()
            .and_then(|&p| machine::fitted_exponent(&[p, (nodes as f64, secs)]))
            .map_or(String::new(), |k| format!("{k:.2}"));
        println!(
            "| {nodes} | {} | {} | {} | {:.1} ms | {:.0} | {local} |",
            c.gangs,
            c.pods,
            c.bound,
            secs * 1e3,
            c.bound as f64 / secs
        );
        points.push((nodes as f64, secs));
    }
    if sizes.len() >= 2 {
        let k = machine::fitted_exponent(&points)
            .ok_or_else(|| anyhow::anyhow!("no exponent: a time was zero"))?;
        println!(
            "\nfitted exponent (least squares on log time against log nodes, {} … {} nodes): {k:.2}",
            sizes[0],
            sizes[sizes.len() - 1]
        );
    }
    println!("{}", machine::describe());
    Ok(())
}
