//! Consolidation in the engine: a moved job restarts on the room planned
//! for it, which is held meanwhile; the gang it made room for starts; the
//! work lost is counted apart, as lost to moves.

use std::cell::RefCell;

use trainyard_model::{Node, QueueSpec, QueueTree, Snapshot, TaskState, Timestamp};
use trainyard_sched::{Config, schedule};
use trainyard_sim::workload::parse_workload;
use trainyard_sim::{
    EvictionModel, LostWork, SimInput, SimJob, SimOptions, SimOutput, simulate_with,
};

const GI: u64 = 1 << 30;

fn jobs(yaml_jobs: &str) -> Vec<SimJob> {
    parse_workload(
        &format!("kind: Workload\nspec:\n  jobs:\n{yaml_jobs}"),
        "test.yaml",
    )
    .unwrap()
}

/// Two 8-GPU nodes. f1 and f2 (6 GPUs, 100 s) fill n1 and n2 so that e1
/// and e2 (2 GPUs, 5000 s) land one on each; when the fillers end at
/// 100 s, 12 GPUs are free as 6 + 6 and `big` (8 GPUs in one pod) does
/// not fit. `thief` (6 GPUs) arrives at 110 s, inside the moved pod's
/// grace period.
const JOBS: &str = "  - {name: f1, queue: a, submit: 0, duration: 100, tasks: [{count: 1, requests: {nvidia.com/gpu: 6}}]}
  - {name: f2, queue: a, submit: 0, duration: 100, tasks: [{count: 1, requests: {nvidia.com/gpu: 6}}]}
  - {name: e1, queue: a, submit: 10, duration: 5000, tasks: [{count: 1, requests: {nvidia.com/gpu: 2}}]}
  - {name: e2, queue: a, submit: 20, duration: 5000, tasks: [{count: 1, requests: {nvidia.com/gpu: 2}}]}
  - {name: big, queue: a, submit: 95, duration: 1000, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
  - {name: thief, queue: a, submit: 110, duration: 300, tasks: [{count: 1, requests: {nvidia.com/gpu: 6}}]}
";

/// (job, node) of the e-jobs' bound pods.
type Placed = Vec<(String, String)>;

/// Runs [`JOBS`] with consolidation on or off; returns the output and,
/// at each cycle, where the e-jobs' pods were bound.
fn run(enabled: bool) -> (SimOutput, Vec<(i64, Placed)>) {
    let nodes = [
        Node::new("n1", 64_000, 512 * GI, 8),
        Node::new("n2", 64_000, 512 * GI, 8),
    ];
    let tree = QueueTree::build(vec![QueueSpec::new("a")]).unwrap();
    let mut config = Config::default();
    config.consolidation.enabled = enabled;
    let opts = SimOptions {
        eviction: EvictionModel {
            grace_ms: 30_000,
            lost_work: LostWork::Restart,
        },
        ..SimOptions::default()
    };
    let seen = RefCell::new(Vec::new());
    let mut sched = |s: &Snapshot, c: &Config, now: Timestamp| {
        let placed = s
            .jobs
            .iter()
            .filter(|j| j.id.starts_with("sim/e"))
            .flat_map(|j| {
                j.tasks.iter().filter_map(|t| match &t.state {
                    TaskState::Bound { node, .. } if !t.terminating => {
                        Some((j.id.to_string(), node.clone()))
                    }
                    _ => None,
                })
            })
            .collect();
        seen.borrow_mut().push((now.0 / 1000, placed));
        schedule(s, c, now)
    };
    let jobs = jobs(JOBS);
    let out = simulate_with(
        SimInput {
            nodes: &nodes,
            queues: &tree,
            jobs: &jobs,
            faults: &[],
        },
        &config,
        &opts,
        &mut sched,
        &mut |_| {},
    );
    (out, seen.into_inner())
}

fn start(out: &SimOutput, id: &str) -> Option<i64> {
    let j = out.jobs.iter().find(|j| j.id == id).unwrap();
    j.start.map(|t| t.0 / 1000)
}

#[test]
fn a_moved_job_restarts_on_its_held_room_and_the_gang_starts() {
    let (off, _) = run(false);
    // Without moves, big waits for an e-job to end.
    assert_eq!(start(&off, "sim/big"), Some(5010));

    let (on, seen) = run(true);
    let moved: Vec<_> = on.jobs.iter().filter(|j| j.lost.moves > 0).collect();
    assert_eq!(moved.len(), 1, "one e-job moved");
    let moved = moved[0];
    assert_eq!((moved.restarts, moved.evicted_pods), (1, 1));
    // Moved at 100 s, removed after the 30 s grace: 2 GPUs × the time it
    // ran until then are lost (restart model), all of it to moves (e1
    // started at 10 s, e2 at 20 s).
    let ran = if moved.id == "sim/e1" {
        120_000
    } else {
        110_000
    };
    assert_eq!(moved.lost.moves, 2000 * ran, "{}", moved.id);
    assert_eq!(moved.lost.evictions, 0);
    // Removed after the 30 s grace, bound again at once, on the node the
    // other e-job is on.
    assert_eq!(moved.start.map(|t| t.0 / 1000), Some(130));
    let at_130 = &seen
        .iter()
        .find(|(t, _)| *t > 130)
        .expect("a cycle after 130 s")
        .1;
    let nodes: Vec<&str> = at_130.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(nodes.len(), 2, "{at_130:?}");
    assert_eq!(nodes[0], nodes[1], "both e-jobs on one node: {at_130:?}");
    // The gang starts on the vacated node once the moved pod is gone.
    assert_eq!(start(&on, "sim/big"), Some(130));
    // The thief, arriving during the grace period, did not take the
    // moved job's room: it waits for the fillers' successors to end.
    assert!(start(&on, "sim/thief").is_some_and(|s| s > 130));

    let s = on.summary();
    assert_eq!((s.preemption.moves, s.preemption.moved_pods), (1, 1));
    assert!(s.preemption.move_lost_gpu_hours > 0.0);
    assert_eq!(s.preemption.lost_gpu_hours, 0.0);
    // While big waited with 12 GPUs free, they were scattered.
    assert!(off.summary().scattered_share > on.summary().scattered_share);
}

#[test]
fn moves_are_deterministic() {
    let (a, _) = run(true);
    let (b, _) = run(true);
    assert_eq!(a, b);
}
