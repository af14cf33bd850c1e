//! Evictions, lost work and nominations in the engine, with exact numbers.
//!
//! Most tests turn the core's own reclaim and preemption off and inject
//! evictions and nominations with a wrapper around `schedule`, so that the
//! timing is known exactly; `metrics_of_a_real_reclaim` lets the core
//! decide.

use expect_test::expect;
use std::cell::RefCell;

use trainyard_model::{
    Node, Nomination, QueueSpec, QueueTree, Resources, Snapshot, TaskKey, Timestamp,
};
use trainyard_sched::{Config, Decisions, Eviction, EvictionKind, NominationDecision, schedule};
use trainyard_sim::workload::{parse_workload, parse_workload_spec};
use trainyard_sim::{
    EvictionModel, JobState, LostWork, SimInput, SimJob, SimOptions, SimOutput, output, simulate,
    simulate_with,
};

const GI: u64 = 1 << 30;

fn jobs(yaml_jobs: &str) -> Vec<SimJob> {
    parse_workload(
        &format!("kind: Workload\nspec:\n  jobs:\n{yaml_jobs}"),
        "test.yaml",
    )
    .unwrap()
}

/// The core with its own reclaim and preemption off.
fn no_evictions() -> Config {
    let mut c = Config::default();
    c.preemption.reclaim = false;
    c.preemption.preempt = false;
    c
}

fn opts(lost_work: LostWork) -> SimOptions {
    SimOptions {
        eviction: EvictionModel {
            grace_ms: 30_000,
            lost_work,
        },
        ..SimOptions::default()
    }
}

/// Runs `jobs` on one 8-GPU node, queues `a` and `b`, with `inject`
/// adding decisions after the core's at each cycle. Returns the output
/// and what `watch` recorded at each cycle (time, value).
fn run<T>(
    jobs: &[SimJob],
    config: &Config,
    opts: &SimOptions,
    inject: impl Fn(Timestamp, &mut Decisions),
    watch: impl Fn(&Snapshot) -> T,
) -> (SimOutput, Vec<(i64, T)>) {
    let nodes = [Node::new("n1", 64_000, 512 * GI, 8)];
    let tree = QueueTree::build(vec![QueueSpec::new("a"), QueueSpec::new("b")]).unwrap();
    let seen = RefCell::new(Vec::new());
    let mut sched = |s: &Snapshot, c: &Config, now: Timestamp| {
        seen.borrow_mut().push((now.0 / 1000, watch(s)));
        let mut d = schedule(s, c, now);
        inject(now, &mut d);
        d
    };
    let out = simulate_with(
        SimInput {
            nodes: &nodes,
            queues: &tree,
            jobs,
            faults: &[],
        },
        config,
        opts,
        &mut sched,
        &mut |_| {},
    );
    (out, seen.into_inner())
}

fn evict(job: &str, task: &str) -> Eviction {
    Eviction {
        job: job.into(),
        task: TaskKey::named(task),
        node: "n1".into(),
        kind: EvictionKind::Reclaim,
        preemptor: "sim/p".into(),
        message: "test".into(),
    }
}

/// (start s, end s, restarts, evicted pods, lost milli-GPU·ms) of a job.
fn life(out: &SimOutput, id: &str) -> (Option<i64>, Option<i64>, u32, u32, u64) {
    let j = out.jobs.iter().find(|j| j.id == id).unwrap();
    (
        j.start.map(|t| t.0 / 1000),
        j.end.map(|t| t.0 / 1000),
        j.restarts,
        j.evicted_pods,
        j.lost.evictions,
    )
}

/// A: 8 GPUs for 1000 s from 0, evicted at 100 s (X, CPU only, arrives
/// then for a cycle). B (8 GPUs, 10 s) arrives at 115 s and forces a cycle
/// at 120 s, inside the grace period.
const GANG: &str = "  - {name: a, queue: a, submit: 0, duration: 1000, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
  - {name: b, queue: a, submit: 115, duration: 10, tasks: [{count: 1, requests: {nvidia.com/gpu: 8}}]}
  - {name: x, queue: b, submit: 100, duration: 5, tasks: [{count: 1, requests: {cpu: 1}}]}
";

fn evict_a_at_100(now: Timestamp, d: &mut Decisions) {
    if now.0 == 100_000 {
        d.evictions.push(evict("sim/a", "sim/a#0"));
    }
}

#[test]
fn evicted_gang_terminates_for_the_grace_period_then_restarts() {
    let js = jobs(GANG);
    let (out, seen) = run(
        &js,
        &no_evictions(),
        &opts(LostWork::Restart),
        evict_a_at_100,
        |s| {
            let a = s.jobs.iter().find(|j| j.id == "sim/a")?;
            let t = &a.tasks[0];
            Some((t.is_pending(), t.terminating, t.started.map(|v| v.0 / 1000)))
        },
    );
    let at = |t: i64| seen.iter().find(|(s, _)| *s == t).map(|(_, v)| *v);
    // Bound from 0; at 120 s terminating but still holding the node, so B waits.
    assert_eq!(at(100), Some(Some((false, false, Some(0)))));
    assert_eq!(at(120), Some(Some((false, true, Some(0)))));
    // Removed at 130 s (100 + 30): back to pending, bound again at once.
    assert_eq!(at(130), Some(Some((true, false, None))));
    // Restart: the full 1000 s again; 8 GPUs × 130 s lost.
    assert_eq!(
        life(&out, "sim/a"),
        (Some(130), Some(1130), 1, 1, 8000 * 130_000)
    );
    assert_eq!(life(&out, "sim/b").0, Some(1130));
    let s = out.summary();
    assert_eq!(s.preemption.reclaims, 1);
    assert_eq!(s.preemption.evicted_pods, 1);
    assert_eq!(s.preemption.lost_gpu_hours, 0.289); // 8 × 130 / 3600
    assert_eq!(s.preemption.grace_seconds, 30.0);
    assert_eq!(s.preemption.lost_work, "restart");
}

#[test]
fn grace_period_is_configurable() {
    let js = jobs(GANG);
    // (A zero grace period removes the pod in the same instant; the
    // injected eviction must then not repeat in the cycle that follows.)
    // (removed at, bound again at the next cycle, on the 10 s period)
    for (grace, gone, back) in [(0, 100, 100), (45_000, 145, 150), (600_000, 700, 700)] {
        let o = SimOptions {
            eviction: EvictionModel {
                grace_ms: grace,
                lost_work: LostWork::Restart,
            },
            ..SimOptions::default()
        };
        let once = std::cell::Cell::new(false);
        let inject = |now: Timestamp, d: &mut Decisions| {
            if now.0 == 100_000 && !once.replace(true) {
                d.evictions.push(evict("sim/a", "sim/a#0"));
            }
        };
        let (out, _) = run(&js, &no_evictions(), &o, inject, |_| ());
        assert_eq!(
            life(&out, "sim/a"),
            (
                Some(back),
                Some(back + 1000),
                1,
                1,
                8000 * gone as u64 * 1000
            ),
            "grace {grace} ms"
        );
    }
}

#[test]
fn evictions_undone_at_once_do_not_hold_the_clock() {
    // The same pod evicted in every cycle at 100 s with no grace period:
    // after MAX_CYCLES_AT_ONE_TIME cycles the engine moves on.
    let js = jobs(GANG);
    let o = SimOptions {
        eviction: EvictionModel {
            grace_ms: 0,
            lost_work: LostWork::Restart,
        },
        ..SimOptions::default()
    };
    let (out, _) = run(&js, &no_evictions(), &o, evict_a_at_100, |_| ());
    let a = out.jobs.iter().find(|j| j.id == "sim/a").unwrap();
    assert_eq!(a.restarts, trainyard_sim::engine::MAX_CYCLES_AT_ONE_TIME);
    assert_eq!(a.start, Some(Timestamp(110_000)));
}

#[test]
fn checkpoints_keep_work_and_lose_the_rest() {
    let js = jobs(GANG);
    // Every 40 s: killed at 130 s, checkpoints at 40, 80, 120; 10 s lost,
    // 120 s kept, so the restart runs 880 s.
    let (out, _) = run(
        &js,
        &no_evictions(),
        &opts(LostWork::Checkpoint { every_ms: 40_000 }),
        evict_a_at_100,
        |_| (),
    );
    assert_eq!(
        life(&out, "sim/a"),
        (Some(130), Some(1010), 1, 1, 8000 * 10_000)
    );
    let s = out.summary();
    assert_eq!(s.preemption.lost_gpu_hours, 0.022); // 8 × 10 / 3600
    assert_eq!(s.preemption.lost_work, "checkpoint");
    assert_eq!(s.preemption.checkpoint_every_seconds, Some(40.0));
    // jobs.csv: restarts, evicted pods, lost GPU-hours.
    let csv = output::jobs_csv(&out);
    assert!(
        csv.lines().any(|l| l.starts_with(
            "sim/a,a,0,8,1,0.000,130.000,1010.000,130.000,1010.000,completed,1,1,0.022,"
        )),
        "{csv}"
    );
    // A job's own model beats the run's.
    let own = jobs(&GANG.replace(
        "duration: 1000,",
        "duration: 1000, lostWork: {checkpoint: {every: 1m}},",
    ));
    let (out, _) = run(
        &own,
        &no_evictions(),
        &opts(LostWork::Restart),
        evict_a_at_100,
        |_| (),
    );
    // 130 s: checkpoint at 60 and 120; 10 s lost, restart runs 880 s.
    assert_eq!(
        life(&out, "sim/a"),
        (Some(130), Some(1010), 1, 1, 8000 * 10_000)
    );
}

#[test]
fn evicted_elastic_pod_goes_back_to_pending_while_the_job_runs() {
    // E: 4 pods × 2 GPUs, minMember 2, 1000 s. X (CPU only) arrives at
    // 100 s for a cycle; pod #3 is evicted then.
    let js = jobs(
        "  - {name: e, queue: a, submit: 0, duration: 1000, minMember: 2, tasks: [{count: 4, requests: {nvidia.com/gpu: 2}}]}
  - {name: x, queue: b, submit: 100, duration: 5, tasks: [{count: 1, requests: {cpu: 1}}]}
",
    );
    let inject = |now: Timestamp, d: &mut Decisions| {
        if now.0 == 100_000 {
            d.evictions.push(evict("sim/e", "sim/e#3"));
        }
    };
    for (model, end, lost) in [
        (LostWork::Restart, 1130, 2000 * 130_000),
        (
            LostWork::Checkpoint { every_ms: 40_000 },
            1010,
            2000 * 10_000,
        ),
    ] {
        let (out, seen) = run(&js, &no_evictions(), &opts(model), inject, |s| {
            s.jobs
                .iter()
                .find(|j| j.id == "sim/e")
                .map(|j| j.tasks.iter().filter(|t| !t.is_pending()).count())
        });
        // Three pods keep running through the removal at 130 s; the fourth
        // binds again in the cycle that follows.
        let at = |t: i64| seen.iter().find(|(s, _)| *s == t).map(|(_, v)| *v);
        assert_eq!(at(130), Some(Some(3)), "{model:?}");
        let e = out.jobs.iter().find(|j| j.id == "sim/e").unwrap();
        assert_eq!(e.state, JobState::Completed);
        // Never restarted: it started at 0 and ends when the last pod does.
        assert_eq!(
            life(&out, "sim/e"),
            (Some(0), Some(end), 0, 1, lost),
            "{model:?}"
        );
    }
}

#[test]
fn eviction_below_the_minimum_restarts_the_whole_gang() {
    // Minimum 4 of 4: losing one pod restarts all four.
    let js = jobs(
        "  - {name: g, queue: a, submit: 0, duration: 1000, tasks: [{count: 4, requests: {nvidia.com/gpu: 2}}]}
  - {name: x, queue: b, submit: 100, duration: 5, tasks: [{count: 1, requests: {cpu: 1}}]}
",
    );
    let inject = |now: Timestamp, d: &mut Decisions| {
        if now.0 == 100_000 {
            d.evictions.push(evict("sim/g", "sim/g#1"));
        }
    };
    let (out, _) = run(
        &js,
        &no_evictions(),
        &opts(LostWork::Restart),
        inject,
        |_| (),
    );
    // All 8 GPUs × 130 s are lost, not only the evicted pod's.
    assert_eq!(
        life(&out, "sim/g"),
        (Some(130), Some(1130), 1, 1, 8000 * 130_000)
    );
}

#[test]
fn a_pod_that_finishes_in_its_grace_period_completes() {
    // A ends at 120 s, inside the grace period of an eviction at 100 s.
    let js = jobs(&GANG.replace("duration: 1000", "duration: 120"));
    let (out, _) = run(
        &js,
        &no_evictions(),
        &opts(LostWork::Restart),
        evict_a_at_100,
        |_| (),
    );
    assert_eq!(life(&out, "sim/a"), (Some(0), Some(120), 0, 1, 0));
}

#[test]
fn nominations_are_set_kept_cleared_and_expired() {
    // A holds the node until `a_end`; P (8 GPUs) arrives at 100 s and is
    // nominated to n1 then (and again at 120 s, which keeps the first
    // time). Y arrives at 115 s and 400 s for cycles.
    let workload = |a_end: u32| {
        jobs(&format!(
            "  - {{name: a, queue: a, submit: 0, duration: {a_end}, tasks: [{{count: 1, requests: {{nvidia.com/gpu: 8}}}}]}}
  - {{name: p, queue: b, submit: 100, duration: 50, tasks: [{{count: 1, requests: {{nvidia.com/gpu: 8}}}}]}}
  - {{name: y, queue: a, submit: 115, duration: 1, tasks: [{{count: 1, requests: {{cpu: 1}}}}]}}
  - {{name: z, queue: a, submit: 400, duration: 1, tasks: [{{count: 1, requests: {{cpu: 1}}}}]}}
"
        ))
    };
    // The nomination names room A holds, with nothing there going: the
    // core withdraws it at its next cycle (checked last). For the timing of
    // binds and expiry, the injected nomination stands as a preemptor's
    // would while its victims terminate: the core's withdrawal is dropped.
    let inject_with = |keep: bool| {
        move |now: Timestamp, d: &mut Decisions| {
            if keep {
                d.withdrawals.retain(|w| w.task.name != "sim/p#0");
            }
            if now.0 == 100_000 || now.0 == 120_000 {
                d.nominations.push(NominationDecision {
                    job: "sim/p".into(),
                    task: TaskKey::named("sim/p#0"),
                    node: "n1".into(),
                    gpus: (0..8).collect(),
                });
            }
        }
    };
    let inject = inject_with(true);
    let watch = |s: &Snapshot| {
        let p = s.jobs.iter().find(|j| j.id == "sim/p")?;
        Some((p.tasks[0].is_pending(), p.tasks[0].nomination.clone()))
    };
    let nominated = |since: i64| {
        Some(Nomination {
            node: "n1".into(),
            since: Timestamp(since * 1000),
            gpus: Some((0..8).collect()),
        })
    };

    // Timeout 60 s, A runs 1000 s: the nomination expires at 160 s, and
    // the engine wakes up for it (nothing else happens then).
    let mut config = no_evictions();
    config.preemption.nomination_timeout_seconds = 60;
    let (out, seen) = run(
        &workload(1000),
        &config,
        &opts(LostWork::Restart),
        inject,
        watch,
    );
    let at = |t: i64| seen.iter().find(|(s, _)| *s == t).map(|(_, v)| v.clone());
    assert_eq!(at(120), Some(Some((true, nominated(100)))));
    assert_eq!(at(160), Some(Some((true, None))), "{seen:?}");
    assert_eq!(life(&out, "sim/p").0, Some(1000));

    // Timeout 300 s, A ends at 150 s: P binds then, which clears it.
    config.preemption.nomination_timeout_seconds = 300;
    let (out, seen) = run(
        &workload(150),
        &config,
        &opts(LostWork::Restart),
        inject,
        watch,
    );
    let at = |t: i64| seen.iter().find(|(s, _)| *s == t).map(|(_, v)| v.clone());
    assert_eq!(at(150), Some(Some((true, nominated(100)))));
    assert_eq!(life(&out, "sim/p").0, Some(150));
    assert_eq!(at(400), Some(None), "P is done by 400 s");
    let (_, seen) = run(
        &workload(150)
            .into_iter()
            .map(|mut j| {
                if j.id == "sim/p" {
                    j.duration_ms = 1_000_000;
                }
                j
            })
            .collect::<Vec<_>>(),
        &config,
        &opts(LostWork::Restart),
        inject,
        watch,
    );
    let at = |t: i64| seen.iter().find(|(s, _)| *s == t).map(|(_, v)| v.clone());
    assert_eq!(at(400), Some(Some((false, None))));

    // As the core decides: the cycle at 120 s, the first to see the
    // nomination of 100 s, withdraws it (A holds its room, nothing there is
    // going), and the withdrawal is applied after that cycle's nominations,
    // so the next cycle sees none.
    config.preemption.nomination_timeout_seconds = 300;
    let (_, seen) = run(
        &workload(1000),
        &config,
        &opts(LostWork::Restart),
        inject_with(false),
        watch,
    );
    let at = |t: i64| seen.iter().find(|(s, _)| *s == t).map(|(_, v)| v.clone());
    assert_eq!(at(120), Some(Some((true, nominated(100)))), "{seen:?}");
    assert_eq!(at(130), Some(Some((true, None))), "{seen:?}");
}

#[test]
fn metrics_of_a_real_reclaim() {
    // Quotas 4 and 4 on 8 GPUs. a fills the node with eight 1-GPU jobs;
    // b asks for 4 GPUs at 100 s and the core reclaims four of a's jobs.
    let js = jobs(
        &(0..8)
            .map(|i| format!("  - {{name: a{i}, queue: a, submit: 0, duration: 1000, tasks: [{{count: 1, requests: {{nvidia.com/gpu: 1}}}}]}}\n"))
            .chain(["  - {name: b, queue: b, submit: 100, duration: 500, tasks: [{count: 1, requests: {nvidia.com/gpu: 4}}]}\n".to_string()])
            .collect::<String>(),
    );
    let nodes = [Node::new("n1", 64_000, 512 * GI, 8)];
    let four = Resources::zero().with_gpus(4);
    let tree = QueueTree::build(vec![
        QueueSpec::new("a").quota(four.clone()),
        QueueSpec::new("b").quota(four),
    ])
    .unwrap();
    let out = simulate(
        SimInput {
            nodes: &nodes,
            queues: &tree,
            jobs: &js,
            faults: &[],
        },
        &Config::default(),
        &opts(LostWork::Restart),
        &mut |_| {},
    );
    // b waits for the grace period only.
    assert_eq!(life(&out, "sim/b").0, Some(130));
    let s = out.summary();
    assert_eq!(
        (
            s.preemption.reclaims,
            s.preemption.preemptions,
            s.preemption.evicted_pods
        ),
        (4, 0, 4)
    );
    // 4 pods × 1 GPU × 130 s.
    assert_eq!(s.preemption.lost_gpu_hours, 0.144);
    assert_eq!(s.per_queue["a"].evicted_pods, 4);
    assert_eq!(s.per_queue["a"].lost_gpu_hours, 0.144);
    // b is starved from 100 s (0 of a fair share of 4, gang 4) to 130 s.
    assert_eq!(s.per_queue["b"].starved_episodes, 1);
    assert_eq!(s.per_queue["b"].time_to_fair_share_seconds.mean, 30.0);
    assert_eq!(s.preemption.time_to_fair_share_seconds.count, 1);
    assert_eq!(s.preemption.starved_at_end, 0);
    let restarted: Vec<_> = out.jobs.iter().filter(|j| j.restarts == 1).collect();
    assert_eq!(restarted.len(), 4);
    assert!(
        restarted
            .iter()
            .all(|j| j.evicted_pods == 1 && j.lost.evictions == 130_000_000)
    );
    // The outputs carry them.
    assert_eq!(out.evictions.len(), 1);
    assert_eq!(out.evictions[0].time, Timestamp(100_000));
    let json = output::summary_json(&s);
    for key in [
        "\"preemption\"",
        "\"reclaims\": 4",
        "\"evictedPods\": 4",
        "\"lostGpuHours\": 0.144",
        "\"timeToFairShareSeconds\"",
        "\"starvedEpisodes\": 1",
    ] {
        assert!(json.contains(key), "{key} in {json}");
    }
    let table = output::summary_table(std::slice::from_ref(&s));
    for row in [
        "reclaims (jobs)",
        "evicted pods",
        "lost GPU-hours",
        "to fair share mean",
    ] {
        assert!(table.contains(row), "{row} in {table}");
    }
    let html = trainyard_sim::report::report_html(&[(&out, &s)], "t");
    assert!(html.contains("Evicted pods, cumulative"));
    assert!(html.contains("Jain&#39;s fairness index"));
    // The same with the core's reclaim off: b waits for a's jobs.
    let mut off = Config::default();
    off.preemption.reclaim = false;
    let out = simulate(
        SimInput {
            nodes: &nodes,
            queues: &tree,
            jobs: &js,
            faults: &[],
        },
        &off,
        &opts(LostWork::Restart),
        &mut |_| {},
    );
    assert_eq!(life(&out, "sim/b").0, Some(1000));
    let s = out.summary();
    assert_eq!(s.preemption.evicted_pods, 0);
    assert_eq!(s.per_queue["b"].time_to_fair_share_seconds.mean, 900.0);
}

#[test]
fn workload_preemption_settings_and_errors() {
    let w = parse_workload_spec(
        "kind: WorkloadGenerator
spec:
  seed: 1
  preemption: {graceSeconds: 45, lostWork: {checkpoint: {every: 30m}}}
  templates:
  - {name: t, queue: q, count: 2, arrival: {every: 1m}, podRequests: {nvidia.com/gpu: 1}, duration: {fixed: 1h}, preemptible: false, lostWork: restart}
  - {name: hi, queue: q, count: 1, arrival: {every: 1m}, podRequests: {nvidia.com/gpu: 1}, duration: {fixed: 1h}, priority: 100}
",
        "g.yaml",
    )
    .unwrap();
    let model = w.preemption.over(EvictionModel::default());
    assert_eq!(
        model,
        EvictionModel {
            grace_ms: 45_000,
            lost_work: LostWork::Checkpoint {
                every_ms: 1_800_000
            }
        }
    );
    assert!(w.jobs.iter().all(|j| !j.preemptible));
    assert_eq!(
        w.jobs
            .iter()
            .filter(|j| j.lost_work == Some(LostWork::Restart))
            .count(),
        2
    );
    // Defaults: 30 s, restart; preemptible below priority 100.
    let plain = parse_workload_spec(
        "kind: Workload\nspec:\n  jobs:\n  - {name: a, queue: q, submit: 0, duration: 1, tasks: [{count: 1, requests: {cpu: 1}}]}\n",
        "w.yaml",
    )
    .unwrap();
    assert_eq!(
        plain.preemption.over(EvictionModel::default()),
        EvictionModel::default()
    );
    assert!(plain.jobs[0].preemptible && plain.jobs[0].lost_work.is_none());

    let err = |spec: &str| {
        parse_workload_spec(
            &format!("kind: Workload\nspec:\n  jobs:\n  - {{name: a, queue: q, submit: 0, duration: 1, tasks: [{{count: 1, requests: {{cpu: 1}}}}]}}\n{spec}"),
            "w.yaml",
        )
        .unwrap_err()
        .to_string()
    };
    expect!["w.yaml: document 1: Workload: spec.preemption.lostWork.checkpoint.every: expected a positive checkpoint interval, got 0"].assert_eq(&err("  preemption: {lostWork: {checkpoint: {every: 0}}}\n"));
    expect!["w.yaml: document 1: Workload: spec.preemption.graceSeconds: expected a non-negative duration, got -5"].assert_eq(&err("  preemption: {graceSeconds: -5}\n"));
    expect![[r#"w.yaml: document 1: Workload: spec.preemption.lostWork: expected "restart" or "checkpoint:<interval>" (e.g. "checkpoint:30m"), got "resume""#]].assert_eq(&err("  preemption: {lostWork: resume}\n"));
    expect![[r#"w.yaml: document 1: Workload: spec.preemption.lostWork.checkpoint: expected {every: <interval>}, got "30m""#]].assert_eq(&err("  preemption: {lostWork: {checkpoint: 30m}}\n"));
    expect!["w.yaml: document 1: Workload: spec.preemption.grace: unknown field `grace`, expected `graceSeconds` or `lostWork`"].assert_eq(&err("  preemption: {grace: 30}\n"));
    let e = parse_workload(
        "kind: Workload\nspec:\n  jobs:\n  - {name: a, queue: q, submit: 0, duration: 1, lostWork: {restart: {}, checkpoint: {every: 1m}}, tasks: [{count: 1, requests: {cpu: 1}}]}\n",
        "w.yaml",
    )
    .unwrap_err()
    .to_string();
    expect![[r#"w.yaml: document 1: Workload: spec.jobs[0].lostWork: expected restart or {checkpoint: {every: <interval>}}, got {"checkpoint":{"every":"1m"},"restart":{}}"#]].assert_eq(&e);
}
