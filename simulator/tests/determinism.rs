//! Same inputs and seed → byte-identical outputs, on the bundled examples.

use std::path::PathBuf;

use trainyard_sched::Config;
use trainyard_sim::spec::parse_cluster;
use trainyard_sim::workload::parse_workload;
use trainyard_sim::{SimInput, SimOptions, output, report, simulate};
use trainyard_snapshot::{LoadOptions, Source};

fn example(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sim")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// All deterministic output files of one run, concatenated.
fn run_once(workload: &str) -> (String, trainyard_sim::SimOutput) {
    let cluster = parse_cluster(&example("cluster.yaml"), "cluster.yaml").unwrap();
    let queues = trainyard_snapshot::load(
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
