//! Same inputs and seed → byte-identical outputs, on the bundled examples.

use std::path::PathBuf;

use trainyard_ingest::{LoadOptions, Source};
use trainyard_sched::Config;
use trainyard_sim::spec::parse_cluster;
use trainyard_sim::workload::parse_workload;
use trainyard_sim::{SimInput, SimOptions, output, report, simulate};

fn example(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sim")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// All deterministic output files of one run, concatenated.
fn run_once(workload: &str) -> (String, trainyard_sim::SimOutput) {
    let cluster = parse_cluster(&example("cluster.yaml"), "cluster.yaml").unwrap();
    let queues = trainyard_ingest::load(
        &[Source::new("queues.yaml", example("queues.yaml"))],
        &LoadOptions::default(),
    )
    .unwrap()
    .snapshot
    .queues;
    let jobs = parse_workload(workload, "workload.yaml").unwrap();
    let out = simulate(
        SimInput {
            nodes: &cluster.nodes,
            queues: &queues,
            jobs: &jobs,
            faults: &cluster.faults,
        },
        &Config::default(),
        &SimOptions::default(),
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
fn two_runs_give_the_same_bytes() {
    // The example workload, cut to a day of arrivals to keep debug builds quick.
    let workload = example("workload.yaml")
        .replace("count: 1500", "count: 200")
        .replace("count: 600", "count: 80")
        .replace("count: 300", "count: 40")
        .replace("count: 120", "count: 16")
        .replace(
            "count: 80\n    arrival: {poisson: {perHour: 0.5}}",
            "count: 10\n    arrival: {poisson: {perHour: 0.5}}",
        );
    let (a, out) = run_once(&workload);
    let (b, _) = run_once(&workload);
    assert!(a == b, "outputs differ between two runs");
    // The run did real work: jobs completed, the node fault happened.
    assert!(out.jobs.iter().filter(|j| j.end.is_some()).count() > 100);
    assert!(
        out.cluster.iter().any(|c| c.gpu_capacity == 63 * 8000),
        "node fault visible in capacity"
    );
    // A different seed gives different jobs.
    let (c, _) = run_once(&workload.replace("seed: 42", "seed: 43"));
    assert!(a != c);
}

#[test]
fn reclaim_example_gives_the_same_bytes_and_evicts() {
    let cluster = parse_cluster(&example("teams-cluster.yaml"), "teams-cluster.yaml").unwrap();
    let queues = trainyard_ingest::load(
        &[Source::new(
            "teams-queues.yaml",
            example("teams-queues.yaml"),
        )],
        &LoadOptions::default(),
    )
    .unwrap()
    .snapshot
    .queues;
    let w = trainyard_sim::workload::parse_workload_spec(
        &example("teams-workload.yaml"),
        "teams-workload.yaml",
    )
    .unwrap();
    let run = |policy: &str| {
        let config: Config = serde_saphyr::from_str(&example(policy)).unwrap();
        let opts = SimOptions {
            policy: policy.into(),
            eviction: w.preemption.over(trainyard_sim::EvictionModel::default()),
            ..SimOptions::default()
        };
        let out = simulate(
            SimInput {
                nodes: &cluster.nodes,
                queues: &queues,
                jobs: &w.jobs,
                faults: &cluster.faults,
            },
            &config,
            &opts,
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
        (text, s)
    };
    let (a, on) = run("reclaim-on.yaml");
    let (b, _) = run("reclaim-on.yaml");
    assert!(a == b, "outputs differ between two runs");
    let (_, off) = run("reclaim-off.yaml");
    assert!(on.preemption.reclaims > 0, "{:?}", on.preemption);
    assert!(on.preemption.lost_gpu_hours > 0.0);
    assert_eq!(off.preemption.evicted_pods, 0);
    assert_eq!(on.preemption.lost_work, "checkpoint");
    assert_eq!(on.preemption.checkpoint_every_seconds, Some(3600.0));
    // Reclaim gets starved teams to their share sooner.
    assert!(
        on.preemption.time_to_fair_share_seconds.mean
            < off.preemption.time_to_fair_share_seconds.mean
    );
}
