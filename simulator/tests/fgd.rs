//! The FGD experiment on the real openb traces (`../shared/data/openb`),
//! checked against the paper's published means (`../shared/data/fgd-reference.md`).
//! One seed per policy keeps this fast in a debug build; the full
//! 17 × 6 × 10 table is `docs/fgd/results.md`. Without the data each test
//! prints a `SKIPPED` line to the terminal and returns (or fails, with
//! `TRAINYARD_REQUIRE_DATA=1`, as in CI); the unit tests in `src/fgd.rs`
//! cover the logic.

mod common;

use trainyard_sched::GpuStrategy;
use trainyard_sim::fgd::{Experiment, paper_label, parse_pods, parse_reference};
use trainyard_sim::openb::parse_nodes;

fn data(name: &str) -> Option<String> {
    common::shared_data(name, name)
}

fn experiment(workload: &str) -> Option<Experiment> {
    let nodes = parse_nodes(&data("openb/openb_node_list_gpu_node.csv")?, "nodes")
        .expect("the node list parses");
    let name = format!("openb/openb_pod_list_{workload}.csv");
    let pods = parse_pods(&data(&name)?, &name).expect("the trace parses");
    Some(Experiment::new(nodes, pods))
}

#[test]
fn one_seed_lands_within_one_point_of_the_published_means() {
    let (Some(e), Some(md)) = (experiment("default"), data("fgd-reference.md")) else {
        return;
    };
    let reference = parse_reference(&md, "fgd-reference.md").expect("table A parses");
    assert_eq!(e.gpus(), 6212);
    // §4.6.1: 35 typical classes on `default`, the first with 1047 pods.
    assert_eq!(e.typical().pods().len(), 35);
    assert_eq!(e.typical().pods()[0].count, 1047);
    let mut got = Vec::new();
    for policy in [GpuStrategy::BestFit, GpuStrategy::Fgd] {
        let r = e.run(policy, 42);
        let ours = r.unallocated[100].expect("bin 100 is filled");
        let (published, _) = reference[&("default".to_string(), paper_label(policy).to_string())];
        assert!(
            (ours - published).abs() <= 1.0,
            "{policy:?}: ours {ours:.2} vs published {published:.2}"
        );
        got.push(ours);
    }
    assert!(got[1] < got[0], "FGD beats BestFit: {got:?}");
}

#[test]
fn trainyard_beats_fgd_on_the_cpu_heavy_mix() {
    let Some(e) = experiment("cpu250") else {
        return;
    };
    let fgd = e.run(GpuStrategy::Fgd, 42).unallocated[100].expect("bin 100");
    let ours = e.run(GpuStrategy::Trainyard, 42).unallocated[100].expect("bin 100");
    assert!(ours < fgd - 0.5, "trainyard {ours:.2} vs fgd {fgd:.2}");
}
