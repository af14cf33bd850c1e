//! Reservations and conservative backfill through the whole engine: a
//! reserved gang starts when its reservation said, and no later.

use proptest::prelude::*;
use trainyard_model::{Node, QueueSpec, QueueTree, Timestamp};
use trainyard_sched::Config;
use trainyard_sim::workload::parse_workload;
use trainyard_sim::{JobRecord, SimInput, SimOptions, SimOutput, simulate};

const GI: u64 = 1 << 30;

fn run(nodes: usize, workload: &str, config: &Config) -> SimOutput {
    let nodes: Vec<Node> = (0..nodes)
        .map(|i| Node::new(format!("n{i}"), 64_000, 512 * GI, 8))
        .collect();
    let jobs = parse_workload(
        &format!("kind: Workload\nspec:\n  jobs:\n{workload}"),
        "test.yaml",
    )
    .unwrap();
    let tree = QueueTree::build(vec![QueueSpec::new("q")]).unwrap();
    simulate(
        SimInput {
            nodes: &nodes,
            queues: &tree,
            jobs: &jobs,
            faults: &[],
        },
        config,
        &SimOptions {
            cycle_period_ms: 1000,
            ..SimOptions::default()
        },
        &mut |_| {},
    )
}

fn job(line: (&str, i64, u32, u64, u64)) -> String {
    let (name, submit, gpus, duration, walltime) = line;
    format!(
        "  - {{name: {name}, queue: q, submit: {submit}, duration: {duration}, walltime: {walltime}, tasks: [{{count: 1, requests: {{nvidia.com/gpu: {gpus}}}}}]}}\n"
    )
}

fn gang(submit: i64, pods: u32, duration: u64) -> String {
    format!(
        "  - {{name: llm, queue: q, submit: {submit}, duration: {duration}, walltime: {duration}, tasks: [{{count: {pods}, requests: {{nvidia.com/gpu: 8}}}}]}}\n"
    )
}

fn record<'a>(out: &'a SimOutput, id: &str) -> &'a JobRecord {
    out.jobs
        .iter()
        .find(|j| j.id == id)
        .unwrap_or_else(|| panic!("no job {id}"))
}

/// Eight 8-GPU nodes full of 1-GPU jobs (accurate walltimes, the last
/// ending at 3000 s), a 64-GPU gang submitted at 10 s, then a 1-GPU job
/// of 20 minutes every minute. The gang reserves the whole cluster from
/// 3000 s and starts exactly then; 1-GPU jobs that end by then are
/// backfilled, the rest wait. Without reservations the stream keeps
/// taking the GPUs that free up and the gang starts only after it dries
/// up.
#[test]
fn a_64_gpu_gang_behind_a_stream_of_1_gpu_jobs_starts_at_its_predicted_time() {
    let mut w = String::new();
    for k in 0..64u64 {
        // 600 s to 3000 s, the last one (k = 63) exactly 3000 s.
        let d = if k == 63 { 3000 } else { 600 + (k * 37) % 2400 };
        w.push_str(&job((&format!("init-{k:02}"), 0, 1, d, d)));
    }
    w.push_str(&gang(10, 8, 3600));
    for k in 0..100i64 {
        w.push_str(&job((
            &format!("stream-{k:03}"),
            20 + 60 * k,
            1,
            1200,
            1200,
        )));
    }
    let on = run(8, &w, &Config::default());
    let llm = record(&on, "sim/llm");
    assert_eq!(llm.reserved_start, Some(Timestamp::from_secs(3000)));
    assert_eq!(llm.start, Some(Timestamp::from_secs(3000)));
    // Backfilled: stream jobs that started before the gang, each ending
    // by its reservation.
    let backfilled: Vec<&JobRecord> = on
        .jobs
        .iter()
        .filter(|j| j.id.starts_with("sim/stream") && j.start.is_some_and(|s| s.0 < 3_000_000))
        .collect();
    assert!(!backfilled.is_empty());
    assert!(
        backfilled
            .iter()
            .all(|j| j.start.is_some_and(|s| s.0 + 1_200_000 <= 3_000_000))
    );

    let mut off = Config::default();
    off.reservations.max_gangs = 0;
    let off = run(8, &w, &off);
    let llm_off = record(&off, "sim/llm");
    assert_eq!(llm_off.reserved_start, None);
    let start_off = llm_off.start.map_or(i64::MAX, |s| s.0);
    assert!(
        start_off > 3_000_000 + 3_000_000,
        "without reservations the gang should starve behind the stream; it started at {start_off} ms"
    );
}

/// One initial job: whole node (8 GPUs) or one GPU, its run time, and the
/// slack its walltime adds (accurate: the job never runs past it).
fn initial() -> impl Strategy<Value = (bool, u64, u64)> {
    (any::<bool>(), 100u64..5000, 0u64..300)
}

/// One later arrival: submit time, GPUs, run time, slack.
fn arrival() -> impl Strategy<Value = (i64, u32, u64, u64)> {
    (
        2i64..6000,
        prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
        50u64..3000,
        0u64..300,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// With walltimes that hold (no job runs past its own) and no later
    /// arrival of higher rank (one queue, one priority, all submitted
    /// after the gang), a reserved gang starts no later than its first
    /// reservation said.
    #[test]
    fn a_reserved_gang_starts_no_later_than_its_reservation(
        nodes in 2usize..6,
        init in prop::collection::vec(initial(), 1..40),
        arrivals in prop::collection::vec(arrival(), 0..40),
    ) {
        // Initial jobs that all start at once: whole-node jobs first (one
        // per node at most), then 1-GPU jobs into what is left.
        let mut w = String::new();
        let whole_wanted = init.iter().filter(|j| j.0).count().min(nodes);
        let mut whole = 0usize;
        let mut ones = 0usize;
        for (i, (is_whole, run, slack)) in init.iter().enumerate() {
            if *is_whole && whole < whole_wanted {
                w.push_str(&job((&format!("a-{i:02}"), 0, 8, *run, run + slack)));
                whole += 1;
            } else if !*is_whole && ones < (nodes - whole_wanted) * 8 {
                w.push_str(&job((&format!("b-{i:02}"), 0, 1, *run, run + slack)));
                ones += 1;
            }
        }
        prop_assume!(whole + ones > 0);
        w.push_str(&gang(1, nodes as u32, 600));
        for (i, (at, gpus, run, slack)) in arrivals.iter().enumerate() {
            w.push_str(&job((&format!("c-{i:02}"), *at, *gpus, *run, run + slack)));
        }
        let out = run(nodes, &w, &Config::default());
        // Every initial job started at once (none outranks the gang).
        for j in out.jobs.iter().filter(|j| j.submit.0 == 0) {
            prop_assert_eq!(j.start, Some(Timestamp(0)), "{} did not start at once", &j.id);
        }
        let llm = record(&out, "sim/llm");
        // It needs every node and one is busy at 1 s, and every running
        // job has a walltime: it is reserved at its first try.
        let Some(reserved) = llm.reserved_start else {
            return Err(TestCaseError::fail("the gang got no reservation"));
        };
        let start = llm.start;
        prop_assert!(
            start.is_some_and(|s| s <= reserved),
            "gang reserved from {} ms started at {:?}",
            reserved.0,
            start
        );
    }
}

/// No job declares a walltime. Sixty-four 1-GPU jobs of 20 minutes fill
/// eight 8-GPU nodes from 0 s; a 1-GPU job of 20 minutes arrives every
/// 20 s from 10 s, and a 64-GPU gang at 600 s. When the first jobs end at
/// 1200 s, queue q has 64 observed runtimes of 1200 s, so the stream jobs
/// that start then (those submitted before the gang, walked first) are
/// expected to end at 2400 s: the gang reserves the cluster from 2400 s,
/// the later stream jobs (no walltime) stay off the held nodes, and the
/// gang starts then. Without the estimate no running job's end is known,
/// nothing is reserved, and the gang waits until the stream dries up.
#[test]
fn without_walltimes_the_observed_runtimes_give_the_gang_its_reservation() {
    let line = |name: &str, submit: i64, pods: u32, gpus: u32| {
        format!(
            "  - {{name: {name}, queue: q, submit: {submit}, duration: 1200, tasks: [{{count: {pods}, requests: {{nvidia.com/gpu: {gpus}}}}}]}}\n"
        )
    };
    let mut w = String::new();
    for k in 0..64 {
        w.push_str(&line(&format!("init-{k:02}"), 0, 1, 1));
    }
    w.push_str(&line("llm", 600, 8, 8));
    for k in 0..300i64 {
        w.push_str(&line(&format!("stream-{k:03}"), 10 + 20 * k, 1, 1));
    }
    let on = run(8, &w, &Config::default());
    let llm = record(&on, "sim/llm");
    assert_eq!(llm.reserved_start, Some(Timestamp::from_secs(2400)));
    assert_eq!(llm.start, Some(Timestamp::from_secs(2400)));

    let mut off = Config::default();
    off.reservations.runtime_estimate = None;
    let off = run(8, &w, &off);
    let llm_off = record(&off, "sim/llm");
    assert_eq!(llm_off.reserved_start, None);
    let start_off = llm_off.start.map_or(i64::MAX, |s| s.0);
    assert!(
        start_off > 6_000_000,
        "without the estimate the gang should starve behind the stream; it started at {start_off} ms"
    );
}
