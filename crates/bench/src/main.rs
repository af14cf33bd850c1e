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
    Snapshot {
        nodes,
        queues: QueueTree::build(queues).expect("generated tree is valid"),
        jobs,
        external: Vec::new(),
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
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
