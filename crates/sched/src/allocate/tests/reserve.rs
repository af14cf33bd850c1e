//! Reservations and conservative backfill (`allocate/reserve.rs`).

use super::*;

#[test]
fn a_starving_gang_reserves_and_only_jobs_that_end_in_time_backfill() {
    // Two 8-GPU nodes; n1 runs another team's job until 01:00 (started at
    // 00:00 with a 1 h walltime, before the gang was submitted at 00:01:40,
    // so it is no backfill). Now is 00:30: the 2 x 8-GPU gang fits
    // only once that job ends, so it reserves both nodes from 01:00. Of
    // the 1-GPU jobs behind it, only the one that ends by then starts.
    let nodes = vec![
        Node::new("n0", 64_000, 512 * GI, 8),
        Node::new("n1", 64_000, 512 * GI, 8),
    ];
    let mut running = Job::gang("b/run", "b", vec![gpu_task(8)]);
    running.tasks[0].state = TaskState::Bound {
        node: "n1".into(),
        gpus: None,
    };
    running.tasks[0].started = Some(Timestamp::from_secs(0));
    running.walltime_seconds = Some(3600);
    let mut big = Job::gang("a/big", "a", vec![gpu_task(8); 2]);
    big.submit_time = Timestamp::from_secs(100);
    let small = |name: &str, at: i64, walltime: Option<u64>| {
        let mut j = Job::gang(name, "a", vec![gpu_task(1)]);
        j.submit_time = Timestamp::from_secs(at);
        j.walltime_seconds = walltime;
        j
    };
    let s = snapshot(
        nodes,
        vec![QueueSpec::new("a"), QueueSpec::new("b")],
        vec![
            big,
            small("a/short", 110, Some(600)),
            small("a/long", 120, Some(7200)),
            small("a/none", 130, None),
            running,
        ],
    );
    let now = Timestamp::from_secs(1800);
    let d = schedule(&s, &Config::default(), now);
    let bound = bound_jobs(&d);
    assert_eq!(bound.keys().collect::<Vec<_>>(), ["a/short"]);
    assert_eq!(d.reservations.len(), 1);
    assert_eq!(d.reservations[0].start, Timestamp::from_secs(3600));
    let messages: Vec<String> = d
        .pending
        .iter()
        .map(|p| format!("{}: {}", p.job.0, p.message))
        .collect();
    expect![[r#"
        [
            "a/big: reserved 2 nodes from 01:00 UTC; 1 job backfilled ahead of it",
            "a/long: gang needs 1 × nvidia.com/gpu in 1 pod(s); 0/2 nodes fit: 2 held for a reservation",
            "a/none: gang needs 1 × nvidia.com/gpu in 1 pod(s); 0/2 nodes fit: 2 held for a reservation",
        ]
    "#]]
    .assert_debug_eq(&messages);
    // A later cycle with the same cluster says the same (no countdown):
    // the service rewrites pod conditions only when the message changes.
    let later = schedule(&s, &Config::default(), Timestamp::from_secs(1900));
    assert_eq!(later.pending[0].message, d.pending[0].message);
    // Turned off, the cycle backfills as before: every small job starts.
    let mut off = Config::default();
    off.reservations.max_gangs = 0;
    let d = schedule(&s, &off, now);
    assert_eq!(bound_jobs(&d).len(), 3);
    assert!(d.reservations.is_empty());
}

#[test]
fn a_job_bound_later_in_the_cycle_ends_in_the_next_projection() {
    // Three 8-GPU nodes at 00:30: b/r0 on n0 until 02:00, b/r1 on n1
    // until 03:00, n2 free. a/u has one pod on a node the snapshot lacks
    // (started 00:00, 1 h walltime) and one pending. The walk meets a/g1
    // (2 x 8 GPUs) first: it reserves n0 and n2 from 02:00, its projection
    // reading past a/u, which holds no node yet. a/u then starts on n2 (it
    // ends at 01:00, before the hold). a/g2 (8 GPUs for 30 min) fits once
    // a/u ends: it reserves n2 from 01:00, not n1 from 03:00.
    let nodes = vec![
        Node::new("n0", 64_000, 512 * GI, 8),
        Node::new("n1", 64_000, 512 * GI, 8),
        Node::new("n2", 64_000, 512 * GI, 8),
    ];
    let running = |id: &str, node: &str, walltime: u64| {
        let mut j = Job::gang(id, "b", vec![gpu_task(8)]);
        j.tasks[0].state = TaskState::Bound {
            node: node.into(),
            gpus: None,
        };
        j.tasks[0].started = Some(Timestamp::from_secs(0));
        j.walltime_seconds = Some(walltime);
        j
    };
    let mut u = Job::gang("a/u", "a", vec![gpu_task(8); 2]);
    u.tasks[0].state = TaskState::Bound {
        node: "ghost".into(),
        gpus: None,
    };
    u.tasks[0].started = Some(Timestamp::from_secs(0));
    u.walltime_seconds = Some(3600);
    u.submit_time = Timestamp::from_secs(200);
    let mut g1 = Job::gang("a/g1", "a", vec![gpu_task(8); 2]);
    g1.submit_time = Timestamp::from_secs(100);
    g1.walltime_seconds = Some(3600);
    let mut g2 = Job::gang("a/g2", "a", vec![gpu_task(8)]);
    g2.submit_time = Timestamp::from_secs(300);
    g2.walltime_seconds = Some(1800);
    let s = snapshot(
        nodes,
        vec![QueueSpec::new("a"), QueueSpec::new("b")],
        vec![
            running("b/r0", "n0", 7200),
            running("b/r1", "n1", 10_800),
            u,
            g1,
            g2,
        ],
    );
    let d = schedule(&s, &Config::default(), Timestamp::from_secs(1800));
    assert_eq!(bound_jobs(&d).keys().collect::<Vec<_>>(), ["a/u"]);
    let got: Vec<String> = d
        .reservations
        .iter()
        .map(|r| {
            let nodes: Vec<&str> = r.nodes.iter().map(|n| n.0.as_str()).collect();
            format!("{} {} {:?}", r.job.0, r.start.0 / 1000, nodes)
        })
        .collect();
    assert_eq!(got, ["a/g1 7200 [\"n0\", \"n2\"]", "a/g2 3600 [\"n2\"]"]);
}

#[test]
fn running_jobs_without_a_walltime_end_by_their_queues_observed_runtimes() {
    // Two 8-GPU nodes at 01:00. b/r0 (6 GPUs on n0) started at 00:00,
    // b/r1 (6 GPUs on n1) at 00:30; neither declares a walltime. Queue b's
    // jobs were observed to run 1 h, 2 h, ... 10 h. With the median:
    // b/r0 has run 1 h, so it is judged by the nine runs longer (2..10 h),
    // whose median is 6 h: it ends at 06:00; b/r1 has run 30 min, judged
    // by all ten (median 5 h): it ends at 05:30. The gang a/big (2 x 8
    // GPUs) reserves both nodes from 06:00. A 1-GPU job that ends in time
    // is backfilled; one without a walltime is not (an estimate never
    // lets a job use held nodes).
    let nodes = vec![
        Node::new("n0", 64_000, 512 * GI, 8),
        Node::new("n1", 64_000, 512 * GI, 8),
    ];
    let running = |id: &str, node: &str, started: i64| {
        let mut j = Job::gang(id, "b", vec![gpu_task(6)]);
        j.tasks[0].state = TaskState::Bound {
            node: node.into(),
            gpus: None,
        };
        j.tasks[0].started = Some(Timestamp::from_secs(started));
        j
    };
    let mut big = Job::gang("a/big", "a", vec![gpu_task(8); 2]);
    big.submit_time = Timestamp::from_secs(100);
    let mut short = Job::gang("a/short", "a", vec![gpu_task(1)]);
    short.submit_time = Timestamp::from_secs(200);
    short.walltime_seconds = Some(3600);
    let mut none = Job::gang("a/none", "a", vec![gpu_task(1)]);
    none.submit_time = Timestamp::from_secs(300);
    let mut s = snapshot(
        nodes,
        vec![QueueSpec::new("a"), QueueSpec::new("b")],
        vec![
            running("b/r0", "n0", 0),
            running("b/r1", "n1", 1800),
            big,
            short,
            none,
        ],
    );
    let hours: Vec<i64> = (1..=10).map(|h| h * 3_600_000).collect();
    s.runtimes = Arc::new(BTreeMap::from([("b".to_string(), hours.clone().into())]));
    let mut median = Config::default();
    median.reservations.runtime_estimate = Some(crate::config::RuntimeEstimateConfig {
        percentile: 50,
        ..Default::default()
    });
    let now = Timestamp::from_secs(3600);
    let summary = |d: &Decisions| {
        let mut out: Vec<String> = d
            .reservations
            .iter()
            .map(|r| {
                let nodes: Vec<&str> = r.nodes.iter().map(|n| n.0.as_str()).collect();
                format!("reserved {} {} {:?}", r.job.0, r.start.0 / 1000, nodes)
            })
            .collect();
        out.extend(bound_jobs(d).keys().map(|j| format!("bound {j}")));
        out
    };
    let d = schedule(&s, &median, now);
    assert_eq!(
        summary(&d),
        ["reserved a/big 21600 [\"n0\", \"n1\"]", "bound a/short"]
    );
    let none_reason = d.pending.iter().find(|p| p.job.0 == "a/none");
    expect![[r#"
        "gang needs 1 × nvidia.com/gpu in 1 pod(s); 0/2 nodes fit: 2 held for a reservation"
    "#]]
    .assert_debug_eq(&none_reason.map(|p| p.message.as_str()).unwrap_or(""));
    // The default, the 90th percentile: b/r0 by 2..10 h ends at 10:00,
    // b/r1 by 1..10 h at 09:30.
    let d = schedule(&s, &Config::default(), now);
    assert_eq!(d.reservations[0].start, Timestamp::from_secs(36_000));
    // With fewer runtimes than minSamples (10), or none, or the estimate
    // off, the running jobs' ends are unknown: no reservation, and both
    // small jobs start.
    let mut off = Config::default();
    off.reservations.runtime_estimate = None;
    let few = {
        let mut f = s.clone();
        f.runtimes = Arc::new(BTreeMap::from([(
            "b".to_string(),
            hours[1..].to_vec().into(),
        )]));
        f
    };
    let none_kept = {
        let mut f = s.clone();
        f.runtimes = Arc::default();
        f
    };
    for (what, snap, config) in [
        ("off", &s, &off),
        ("nine runtimes", &few, &Config::default()),
        ("no runtimes", &none_kept, &Config::default()),
    ] {
        assert_eq!(
            summary(&schedule(snap, config, now)),
            ["bound a/none", "bound a/short"],
            "{what}"
        );
    }
}

#[test]
fn a_share_counts_as_a_whole_device_against_a_reservation() {
    // One 8-GPU node: a 6-GPU job on devices 2-7 until 01:00, two short
    // half-GPU shares on devices 0 and 1 until 00:10. A 7-GPU pod
    // reserves the node from 01:00, leaving one device over. Of two
    // half-GPU shares without a walltime, only one may start: each could
    // land on a device the reservation needs whole.
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let bound = |id: &str, req: Resources, gpus: Vec<u32>, walltime: u64| {
        let mut j = Job::gang(id, "b", vec![req]);
        j.tasks[0].state = TaskState::Bound {
            node: "n0".into(),
            gpus: Some(gpus),
        };
        j.tasks[0].started = Some(Timestamp::from_secs(0));
        j.walltime_seconds = Some(walltime);
        j
    };
    let share = || Resources::new(500, GI, 500);
    let mut big = Job::gang("a/big", "a", vec![gpu_task(7)]);
    big.submit_time = Timestamp::from_secs(100);
    let mut long1 = Job::gang("a/long1", "a", vec![share()]);
    long1.submit_time = Timestamp::from_secs(110);
    let mut long2 = Job::gang("a/long2", "a", vec![share()]);
    long2.submit_time = Timestamp::from_secs(120);
    let s = snapshot(
        nodes,
        vec![QueueSpec::new("a"), QueueSpec::new("b")],
        vec![
            bound("b/six", gpu_task(6), (2..8).collect(), 3600),
            bound("b/s0", share(), vec![0], 600),
            bound("b/s1", share(), vec![1], 600),
            big,
            long1,
            long2,
        ],
    );
    let d = schedule(&s, &Config::default(), Timestamp::from_secs(300));
    assert_eq!(d.reservations.len(), 1);
    assert_eq!(d.reservations[0].start, Timestamp::from_secs(3600));
    assert_eq!(bound_jobs(&d).keys().collect::<Vec<_>>(), ["a/long1"]);
    let long2 = d.pending.iter().find(|p| p.job.0 == "a/long2");
    assert!(
        long2.is_some_and(|p| p.message.contains("held for a reservation")),
        "{:?}",
        d.pending
    );
}

#[test]
fn a_gang_that_can_never_fit_reserves_nothing() {
    // 2 x 8 GPUs on one 8-GPU node never fits: no reservation, and the
    // small job behind it runs.
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let big = Job::gang("a/big", "a", vec![gpu_task(8); 2]);
    let mut small = Job::gang("a/small", "a", vec![gpu_task(1)]);
    small.submit_time = Timestamp::from_secs(10);
    let s = snapshot(nodes, vec![QueueSpec::new("a")], vec![big, small]);
    let d = schedule(&s, &Config::default(), Timestamp::from_secs(3600));
    assert_eq!(bound_jobs(&d).get("a/small"), Some(&1));
    assert!(d.reservations.is_empty());
}

/// A nominee's own room: one 8-GPU node; `b/run` (not preemptible) holds
/// 4 GPUs until 02:00; `a/p` (priority 5, no walltime) has the other 4
/// held for its nominated pod; `a/g` (priority 10) needs 4 and is walked
/// first. `a/g` reserves from 02:00, counting `a/p`'s room as taken for
/// good (it has no end), so the hold leaves nothing over. `a/p` must
/// still get its own room: the reservation never counted on it. Before,
/// it was refused ("held for a reservation") and its room stood idle
/// until its nomination timed out.
#[test]
fn a_nominee_keeps_its_own_room_under_a_reservation_that_counted_it_taken() {
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let mut run = Job::gang("b/run", "b", vec![gpu_task(4)]);
    run.tasks[0].state = TaskState::Bound {
        node: "n0".into(),
        gpus: None,
    };
    run.tasks[0].started = Some(Timestamp::from_secs(0));
    run.walltime_seconds = Some(7200);
    run.preemptible = false;
    let mut p = Job::gang("a/p", "a", vec![gpu_task(4)]);
    p.priority = 5;
    p.submit_time = Timestamp::from_secs(10);
    p.tasks[0].nomination = Some(trainyard_model::Nomination {
        node: "n0".into(),
        since: Timestamp::from_secs(1700),
        gpus: None,
    });
    let mut g = Job::gang("a/g", "a", vec![gpu_task(4)]);
    g.priority = 10;
    g.submit_time = Timestamp::from_secs(100);
    let s = snapshot(
        nodes,
        vec![QueueSpec::new("a"), QueueSpec::new("b")],
        vec![run, p, g],
    );
    // Evictions off: with them, `a/g` takes `a/p`'s bind of this cycle
    // back (priority 10 > 5), which is another rule.
    let mut config = Config::default();
    config.preemption.preempt = false;
    config.preemption.reclaim = false;
    let d = schedule(&s, &config, Timestamp::from_secs(1800));
    let bound = bound_jobs(&d);
    assert_eq!(bound.keys().collect::<Vec<_>>(), ["a/p"], "{:?}", d.pending);
    assert_eq!(d.reservations.len(), 1);
    assert_eq!(d.reservations[0].job.0, "a/g");
    assert_eq!(d.reservations[0].start, Timestamp::from_secs(7200));
}
