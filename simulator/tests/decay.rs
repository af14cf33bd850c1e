//! The time-decayed fair share over a simulated month
//! (`examples/sim/decay-*.yaml`, docs/fair-share.md "Time-decayed fair
//! share"): three teams of equal weight, one idle for three weeks and then
//! flooding the cluster. With decay on, the spread of the teams' monthly
//! GPU-hours per weight (largest over smallest) is at most half of the
//! spread with decay off, and GPU allocation stays within one point.

use std::path::PathBuf;

use trainyard_ingest::{LoadOptions, Source};
use trainyard_sched::Config;
use trainyard_sim::spec::parse_cluster;
use trainyard_sim::{SimInput, SimOptions, Summary, simulate};

fn example(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sim")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const MONTH_MS: i64 = 30 * 86_400_000;

#[test]
fn decay_halves_the_monthly_spread_at_the_same_allocation() {
    let cluster = parse_cluster(&example("decay-cluster.yaml"), "decay-cluster.yaml").unwrap();
    let queues = trainyard_ingest::load(
        &[Source::new(
            "decay-queues.yaml",
            example("decay-queues.yaml"),
        )],
        &LoadOptions::default(),
    )
    .unwrap()
    .snapshot
    .queues;
    let w = trainyard_sim::workload::parse_workload_spec(
        &example("decay-workload.yaml"),
        "decay-workload.yaml",
    )
    .unwrap();
    let run = |policy: &str| -> Summary {
        let config: Config = serde_saphyr::from_str(&example(policy)).unwrap();
        let opts = SimOptions {
            policy: policy.into(),
            until: Some(trainyard_model::Timestamp(MONTH_MS)),
            eviction: w.preemption.over(trainyard_sim::EvictionModel::default()),
            ..SimOptions::default()
        };
        simulate(
            SimInput {
                nodes: &cluster.nodes,
                queues: &queues,
                jobs: &w.jobs,
                faults: &cluster.faults,
            },
            &config,
            &opts,
            &mut |_| {},
        )
        .summary()
    };
    // GPU-hours per weight of each team, and the spread.
    let per_weight = |s: &Summary| -> Vec<(String, f64)> {
        ["bursty", "steady-a", "steady-b"]
            .iter()
            .map(|q| {
                let id = queues.get(q).unwrap();
                let weight = f64::from(queues.spec(id).over_quota_weight);
                (q.to_string(), s.per_queue[*q].gpu_hours / weight)
            })
            .collect()
    };
    let spread = |v: &[(String, f64)]| {
        let max = v.iter().map(|x| x.1).fold(f64::MIN, f64::max);
        let min = v.iter().map(|x| x.1).fold(f64::MAX, f64::min);
        max / min
    };
    // The two runs on two threads (a debug build takes minutes each).
    let (off, on) = std::thread::scope(|sc| {
        let off = sc.spawn(|| run("decay-off.yaml"));
        let on = run("decay-on.yaml");
        (off.join().unwrap(), on)
    });
    let (v_off, v_on) = (per_weight(&off), per_weight(&on));
    let (s_off, s_on) = (spread(&v_off), spread(&v_on));
    println!("GPU-hours per weight, decay off: {v_off:?} (spread {s_off:.2})");
    println!("GPU-hours per weight, decay on:  {v_on:?} (spread {s_on:.2})");
    println!(
        "GPU allocation: off {:.4}, on {:.4}",
        off.gpu_allocation_ratio, on.gpu_allocation_ratio
    );
    // The bursty team really returned and wanted more than a third.
    assert!(off.per_queue["bursty"].jobs > 1000);
    assert!(
        s_off > 3.0,
        "the workload makes the teams unequal without decay: {s_off}"
    );
    assert!(
        s_on <= s_off / 2.0,
        "decay on: spread {s_on:.2}, off: {s_off:.2}"
    );
    assert!(
        (on.gpu_allocation_ratio - off.gpu_allocation_ratio).abs() <= 0.01,
        "allocation {} vs {}",
        on.gpu_allocation_ratio,
        off.gpu_allocation_ratio
    );
    // Weekly GPU-hours add up to the month's.
    for s in [&off, &on] {
        for q in s.per_queue.values() {
            let weeks: f64 = q.gpu_hours_by_week.iter().sum();
            assert!((weeks - q.gpu_hours).abs() < 0.01 * q.gpu_hours.max(1.0));
        }
    }
}
