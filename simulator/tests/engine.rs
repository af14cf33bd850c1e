//! The engine against results computed by hand, plus conservation and
//! determinism properties.

use proptest::prelude::*;
use trainyard_model::{Node, QueueSpec, QueueTree, Timestamp};
use trainyard_sched::Config;
use trainyard_sim::spec::Fault;
use trainyard_sim::workload::parse_workload;
use trainyard_sim::{
    EvictionModel, JobState, LostWork, SimInput, SimJob, SimOptions, SimOutput, simulate,
};

const GI: u64 = 1 << 30;

fn run_with(
    nodes: &[Node],
    queues: &[&str],
    jobs: &[SimJob],
    faults: &[Fault],
    period_ms: u64,
) -> SimOutput {
    run_model(
        nodes,
        queues,
        jobs,
        faults,
        period_ms,
        EvictionModel::default(),
    )
}

fn run_model(
    nodes: &[Node],
    queues: &[&str],
    jobs: &[SimJob],
    faults: &[Fault],
    period_ms: u64,
    eviction: EvictionModel,
) -> SimOutput {
    let tree = QueueTree::build(queues.iter().map(|q| QueueSpec::new(*q)).collect()).unwrap();
    let opts = SimOptions {
        cycle_period_ms: period_ms,
        eviction,
        ..SimOptions::default()
    };
    simulate(
        SimInput {
            nodes,
            queues: &tree,
            jobs,
            faults,
        },
        &Config::default(),
        &opts,
        &mut |_| {},
    )
}

fn jobs(yaml_jobs: &str) -> Vec<SimJob> {
    parse_workload(
        &format!("kind: Workload\nspec:\n  jobs:\n{yaml_jobs}"),
        "test.yaml",
    )
    .unwrap()
}

/// (id, start s, end s) of each job, in submit order.
fn timeline(out: &SimOutput) -> Vec<(String, Option<i64>, Option<i64>)> {
    out.jobs
        .iter()
        .map(|j| {
            (
                j.id.clone(),
                j.start.map(|t| t.0 / 1000),
                j.end.map(|t| t.0 / 1000),
            )
        })
        .collect()
}

fn s(id: &str, start: i64, end: i64) -> (String, Option<i64>, Option<i64>) {
    (id.to_string(), Some(start), Some(end))
}

#[test]
fn fifo_on_one_node_exact_waits_and_jcts() {
    // One 8-GPU node, three 8-GPU jobs: each waits for the one before.
    // j1: 0 → 100; j2 (submit 10): 100 → 150, wait 90, JCT 140;
    // j3 (submit 20): 150 → 180, wait 130, JCT 160.
    let nodes = [Node::new("n1", 64_000, 512 * GI, 8)];
    let js = jobs(
        "  - {name: j1, queue: q, submit: 0, duration: 100, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
  - {name: j2, queue: q, submit: 10, duration: 50, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
  - {name: j3, queue: q, submit: 20, duration: 30, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
",
    );
    for period in [0, 10_000] {
        let out = run_with(&nodes, &["q"], &js, &[], period);
        assert_eq!(
            timeline(&out),
            vec![
                s("sim/j1", 0, 100),
                s("sim/j2", 100, 150),
                s("sim/j3", 150, 180)
            ],
            "period {period}"
        );
        let waits: Vec<i64> = out
            .jobs
            .iter()
            .map(|j| j.wait_ms(out.end_time) / 1000)
            .collect();
        let jcts: Vec<i64> = out
            .jobs
            .iter()
            .map(|j| j.jct_ms().unwrap() / 1000)
            .collect();
        assert_eq!(waits, [0, 90, 130]);
        assert_eq!(jcts, [100, 140, 160]);
        let sum = out.summary();
        assert_eq!(sum.completed, 3);
        assert_eq!(sum.wait_seconds.mean, 73.333);
        assert_eq!(out.end_time, Timestamp(180_000));
    }
}

/// A start that would run past its walltime is ended there: the job is
/// timed out (Slurm's TIMEOUT) and frees its GPUs for the next. The
/// walltime is the job's own, else the nearest queue default.
#[test]
fn a_job_past_its_walltime_is_ended_and_counted() {
    let nodes = [Node::new("n1", 64_000, 512 * GI, 8)];
    let js = jobs(
        "  - {name: long, queue: q, submit: 0, duration: 100, walltime: 40, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
  - {name: ok, queue: q, submit: 1, duration: 30, walltime: 30, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
  - {name: dflt, queue: q, submit: 2, duration: 500, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
",
    );
    let mut q = QueueSpec::new("q");
    q.default_walltime_seconds = Some(60);
    let tree = QueueTree::build(vec![q]).unwrap();
    let out = simulate(
        SimInput {
            nodes: &nodes,
            queues: &tree,
            jobs: &js,
            faults: &[],
        },
        &Config::default(),
        &SimOptions {
            cycle_period_ms: 0,
            ..SimOptions::default()
        },
        &mut |_| {},
    );
    assert_eq!(
        timeline(&out),
        vec![
            s("sim/long", 0, 40),
            s("sim/ok", 40, 70),
            s("sim/dflt", 70, 130)
        ]
    );
    let states: Vec<JobState> = out.jobs.iter().map(|j| j.state).collect();
    assert_eq!(
        states,
        [JobState::TimedOut, JobState::Completed, JobState::TimedOut]
    );
    let sum = out.summary();
    assert_eq!((sum.completed, sum.timed_out), (1, 2));
    // A kill restarts the clock: down at 30 s, up at 35 s, the job starts
    // again at 35 s and is ended at its walltime from there (85 s).
    let js = jobs(
        "  - {name: w, queue: q, submit: 0, duration: 100, walltime: 50, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
",
    );
    let faults = [
        Fault {
            at: Timestamp(30_000),
            node: "n1".into(),
            up: false,
        },
        Fault {
            at: Timestamp(35_000),
            node: "n1".into(),
            up: true,
        },
    ];
    let out = run_with(&nodes, &["q"], &js, &faults, 0);
    assert_eq!(
        out.jobs[0].end,
        Some(Timestamp(85_000)),
        "{:?}",
        out.jobs[0]
    );
    assert_eq!(out.jobs[0].state, JobState::TimedOut);
    // A walltime of zero, or both walltime and a factor, are refused.
    let bad = parse_workload(
        "kind: Workload\nspec:\n  jobs:\n  - {name: z, queue: q, submit: 0, duration: 10, walltime: 0, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}\n",
        "w.yaml",
    );
    assert!(
        bad.as_ref().is_err_and(|e| e
            .to_string()
            .contains("walltime: expected a duration above zero")),
        "{bad:?}"
    );
    // A generator's factor: each job's own duration times it, rounded up.
    let gen_with = |extra: &str| {
        parse_workload(
            &format!(
                "kind: WorkloadGenerator\nspec:\n  seed: 3\n  templates:\n  - {{name: t, queue: q, count: 5, arrival: {{every: 1m}}, pods: {{fixed: 1}}, podRequests: {{nvidia.com/gpu: 1}}, duration: {{exponential: {{mean: 10m}}}}{extra}}}\n"
            ),
            "gen.yaml",
        )
    };
    let generated = gen_with(", walltimeFactor: 2").unwrap();
    for j in &generated {
        assert_eq!(
            j.walltime_seconds,
            Some((j.duration_ms * 2).div_ceil(1000)),
            "{}",
            j.id
        );
    }
    let both = gen_with(", walltime: 1h, walltimeFactor: 2");
    assert!(
        both.as_ref().is_err_and(|e| e
            .to_string()
            .contains("expected either walltime or walltimeFactor, not both")),
        "{both:?}"
    );
}

#[test]
fn cycle_period_batches_changes() {
    // With a 60 s period, the job submitted at 10 s waits for the 60 s cycle.
    let nodes = [Node::new("n1", 64_000, 512 * GI, 8)];
    let js = jobs(
        "  - {name: a, queue: q, submit: 10, duration: 100, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}\n",
    );
    let out = run_with(&nodes, &["q"], &js, &[], 60_000);
    assert_eq!(timeline(&out), vec![s("sim/a", 60, 160)]);
    // One placing cycle; the finish at 160 leaves nothing to place, so the
    // engine records the queue's drop to 0 without a cycle.
    assert_eq!(out.cycles, 1);
    let last = out.queues.last().unwrap();
    assert_eq!((last.queue.as_str(), last.allocated.gpu), ("q", 0));
}

#[test]
fn gang_waits_for_a_finish_while_a_small_job_backfills() {
    // Two 8-GPU nodes. big (8 GPUs, 0 → 100). gang: 2 × 8 GPUs at 5 s needs
    // both nodes: waits until 100, runs 100 → 150. small (1 GPU) at 6 s
    // backfills on the free node at once: 6 → 16.
    let nodes = [
        Node::new("n1", 64_000, 512 * GI, 8),
        Node::new("n2", 64_000, 512 * GI, 8),
    ];
    let js = jobs(
        "  - {name: big, queue: q, submit: 0, duration: 100, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
  - {name: gang, queue: q, submit: 5, duration: 50, tasks: [{count: 2, requests: {nvidia.com/gpu: 8}}]}
  - {name: small, queue: q, submit: 6, duration: 10, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}
",
    );
    let out = run_with(&nodes, &["q"], &js, &[], 0);
    assert_eq!(
        timeline(&out),
        vec![
            s("sim/big", 0, 100),
            s("sim/gang", 100, 150),
            s("sim/small", 6, 16)
        ]
    );
    let gang = &out.jobs[1];
    assert_eq!(gang.state, JobState::Completed);
    // The reason it waited is kept for jobs.csv.
    let reason = gang.pending_reason.as_deref().unwrap();
    assert!(
        reason.starts_with(
            "gang needs 16 × nvidia.com/gpu in 2 pod(s); 1 placed, then pod sim/gang#1 did not fit"
        ),
        "{reason}"
    );
    assert_eq!(out.jobs[0].pending_reason, None, "big never waited");
}

#[test]
fn elastic_job_grows_when_capacity_frees() {
    // One 8-GPU node. x: 4 GPUs for 50 s. e: 4 pods × 2 GPUs, minMember 2,
    // 100 s. At 0: x and e's minimum (2 pods) fill the node. At 50 x ends,
    // the cycle it triggers adds e's 2 elastic pods (50 → 150). e's first
    // pods end at 100; the job ends with its last pod at 150.
    let nodes = [Node::new("n1", 64_000, 512 * GI, 8)];
    let js = jobs(
        "  - {name: x, queue: q, submit: 0, duration: 50, tasks: [{count: 1, requests: {nvidia.com/gpu: 4}}]}
  - {name: e, queue: q, submit: 0, duration: 100, minMember: 2, tasks: [{count: 4, requests: {nvidia.com/gpu: 2}}]}
",
    );
    let out = run_with(&nodes, &["q"], &js, &[], 0);
    assert_eq!(timeline(&out), vec![s("sim/e", 0, 150), s("sim/x", 0, 50)]);
    // GPU-seconds: x 4×50, e 2×2×100 + 2×2×100 = 1,000 GPU-s.
    assert_eq!(gpu_ms(&out), 1_000 * 1_000 * 1_000);
    assert_eq!(out.cluster.last().unwrap().gpu_allocated, 0);
}

#[test]
fn node_failure_restarts_the_gang() {
    // A 2-node gang starts at 0 for 100 s; n2 fails at 30 s and returns at
    // 50 s: the gang restarts at 50 and ends at 150.
    let nodes = [
        Node::new("n1", 64_000, 512 * GI, 8),
        Node::new("n2", 64_000, 512 * GI, 8),
    ];
    let js = jobs(
        "  - {name: g, queue: q, submit: 0, duration: 100, tasks: [{count: 2, requests: {nvidia.com/gpu: 8}}]}\n",
    );
    let faults = [
        Fault {
            at: Timestamp(30_000),
            node: "n2".into(),
            up: false,
        },
        Fault {
            at: Timestamp(50_000),
            node: "n2".into(),
            up: true,
        },
    ];
    let out = run_with(&nodes, &["q"], &js, &faults, 0);
    assert_eq!(timeline(&out), vec![s("sim/g", 50, 150)]);
    assert_eq!(out.jobs[0].restarts, 1);
    let capacity_at_40 = out
        .cluster
        .iter()
        .rev()
        .find(|c| c.time.0 <= 40_000)
        .unwrap();
    assert_eq!(capacity_at_40.gpu_capacity, 8000);
    assert_eq!(capacity_at_40.gpu_allocated, 0);
}

#[test]
fn impossible_jobs_are_rejected_with_reasons() {
    let nodes = [Node::new("n1", 64_000, 512 * GI, 8)];
    let js = jobs(
        "  - {name: nine, queue: q, submit: 0, duration: 10, tasks: [{count: 1, requests: {nvidia.com/gpu: 9}}]}
  - {name: huge, queue: q, submit: 0, duration: 10, tasks: [{count: 2, requests: {nvidia.com/gpu: 8}}]}
  - {name: lost, queue: nope, submit: 0, duration: 10, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}
  - {name: ok, queue: q, submit: 0, duration: 10, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}
",
    );
    let out = run_with(&nodes, &["q"], &js, &[], 0);
    let by_id = |id: &str| out.jobs.iter().find(|j| j.id == id).unwrap();
    assert_eq!(by_id("sim/nine").state, JobState::Rejected);
    assert!(
        by_id("sim/nine")
            .pending_reason
            .as_deref()
            .unwrap()
            .contains("more than any node has")
    );
    assert!(
        by_id("sim/huge")
            .pending_reason
            .as_deref()
            .unwrap()
            .contains("more than the whole cluster has (8)")
    );
    assert_eq!(
        by_id("sim/lost").pending_reason.as_deref(),
        Some("rejected: queue \"nope\" does not exist")
    );
    assert_eq!(by_id("sim/ok").state, JobState::Completed);
    assert_eq!(out.summary().rejected, 3);
}

/// GPU-milliseconds from the cluster samples (the step function).
fn gpu_ms(out: &SimOutput) -> u128 {
    let mut total = 0u128;
    for w in out.cluster.windows(2) {
        total += w[0].gpu_allocated as u128 * (w[1].time.0 - w[0].time.0) as u128;
    }
    total
}

fn random_workload(seed: u64, n: u32) -> Vec<SimJob> {
    let text = format!(
        "kind: WorkloadGenerator
spec:
  seed: {seed}
  templates:
  - {{name: dev, queue: a, count: {n}, arrival: {{poisson: {{perHour: 120}}}}, pods: {{uniform: {{min: 1, max: 3}}}}, podRequests: {{nvidia.com/gpu: 1}}, duration: {{exponential: {{mean: 10m}}}}}}
  - {{name: gang, queue: b, count: {m}, arrival: {{poisson: {{perHour: 10}}}}, pods: {{choice: [2, 4]}}, podRequests: {{nvidia.com/gpu: 8}}, duration: {{logNormal: {{median: 30m, sigma: 0.7}}}}}}
",
        m = n / 5 + 1
    );
    parse_workload(&text, "gen.yaml").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn gpu_seconds_are_conserved_and_runs_are_deterministic(
        seed in 0u64..1000,
        n in 5u32..60,
        period in prop::sample::select(vec![0u64, 10_000, 60_000]),
        grace in prop::sample::select(vec![0u64, 30_000, 600_000]),
        checkpoint in prop::option::of(1u64..3_600_000),
    ) {
        let nodes: Vec<Node> = (0..6).map(|i| Node::new(format!("n{i}"), 256_000, 2048 * GI, 8)).collect();
        let js = random_workload(seed, n);
        let model = EvictionModel {
            grace_ms: grace,
            lost_work: checkpoint.map_or(LostWork::Restart, |every_ms| LostWork::Checkpoint { every_ms }),
        };
        // Two queues without quotas: reclaim evicts whichever is above its
        // fair share when the other waits.
        let out = run_model(&nodes, &["a", "b"], &js, &[], period, model);
        // Every job completes (nothing is too large), and allocated
        // GPU-time equals Σ duration × GPUs plus the work lost to
        // evictions (evicted pods run on through their grace period).
        prop_assert!(out.jobs.iter().all(|j| j.state == JobState::Completed));
        let lost: u128 = out.jobs.iter().map(|j| j.lost.total() as u128).sum();
        let expected: u128 = js.iter().map(|j| j.duration_ms as u128 * j.gpu_milli() as u128).sum();
        prop_assert_eq!(gpu_ms(&out), expected + lost);
        // Evicted pods and lost work are consistent.
        let s = out.summary();
        prop_assert_eq!(s.preemption.evicted_pods, out.jobs.iter().map(|j| j.evicted_pods as u64).sum::<u64>());
        if s.preemption.evicted_pods == 0 {
            prop_assert_eq!(lost, 0);
        }
        // Never above capacity.
        prop_assert!(out.cluster.iter().all(|c| c.gpu_allocated <= c.gpu_capacity));
        // Queue samples (from cycles or from the idle path) agree with the
        // cluster: at every cluster sample, the leaves' latest allocations
        // add up to the allocated GPUs. Queue samples are taken at cycles,
        // so this holds exactly when cycles run at the instant of a change.
        if period == 0 {
        let mut latest: std::collections::BTreeMap<&str, u64> = Default::default();
        let mut qi = 0;
        for c in &out.cluster {
            while qi < out.queues.len() && out.queues[qi].time <= c.time {
                let q = &out.queues[qi];
                if q.is_leaf {
                    latest.insert(&q.queue, q.allocated.gpu);
                }
                qi += 1;
            }
            prop_assert_eq!(latest.values().sum::<u64>(), c.gpu_allocated, "at {:?}", c.time);
        }
        }
        // Same inputs, same output.
        let again = run_model(&nodes, &["a", "b"], &js, &[], period, model);
        prop_assert_eq!(out, again);
    }
}
