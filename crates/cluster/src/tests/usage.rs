//! The usage history through the world state: a property test against a
//! recomputation from scratch, and the cases it found.

use proptest::prelude::*;
use trainyard_model::{Job, Resources, TaskState, Timestamp, Usage};

use super::*;

/// One step of the usage property test.
#[derive(Clone, Debug)]
enum UsageOp {
    /// Job `job` (in queue `queue`) with these tasks bound.
    Upsert {
        job: u8,
        queue: u8,
        bound: Vec<bool>,
    },
    Remove(u8),
    /// Assume a bind of the job's first task.
    Assume(u8),
    /// The world did everything assumed.
    Confirm,
    /// Sample after this many seconds.
    Sample(u32),
}

fn usage_op() -> impl Strategy<Value = UsageOp> {
    prop_oneof![
        (0u8..6, 0u8..3, prop::collection::vec(any::<bool>(), 1..4))
            .prop_map(|(job, queue, bound)| UsageOp::Upsert { job, queue, bound }),
        (0u8..6).prop_map(UsageOp::Remove),
        (0u8..6).prop_map(UsageOp::Assume),
        Just(UsageOp::Confirm),
        (0u32..5000).prop_map(UsageOp::Sample),
    ]
}

/// What every (queue, user) holds, recomputed from the jobs the state
/// shows, not from its ledger.
fn held_from_scratch(s: &ClusterState) -> crate::usage::Held {
    let mut held = crate::usage::Held::new();
    for j in s.jobs() {
        let user = j.id.split_once('/').map_or("", |(ns, _)| ns).to_string();
        for t in &j.tasks {
            if matches!(t.state, TaskState::Bound { .. }) {
                held.entry((j.queue.clone(), user.clone()))
                    .or_insert_with(Resources::zero)
                    .add(&t.requests);
            }
        }
    }
    held
}

/// A job's (queue, user), what it holds, and its account's (start, use)
/// when first seen.
type HeldNow = ((String, String), Resources, (i64, Usage));

proptest! {
    /// Sampling only the jobs that changed gives the history a full
    /// recount at every sample gives: the same closed buckets and the same
    /// decayed totals.
    #[test]
    fn incremental_usage_sampling_matches_a_full_recount(
        ops in prop::collection::vec(usage_op(), 1..60)
    ) {
        let hl = 3 * 3600;
        let mut s = ClusterState::new();
        s.apply(Change::Node(Node::new("n1", 64_000, 512 << 30, 64)));
        s.track_usage(crate::usage::UsageHistory::new(hl));
        let mut reference = crate::usage::UsageHistory::new(hl);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        // Per job holding something: (start, held, used so far), from the
        // jobs the state shows at each sample, not from its ledger.
        let mut open: BTreeMap<String, (i64, (String, String), Resources, Usage)> = BTreeMap::new();
        let (mut got_jobs, mut want_jobs) = (Vec::new(), Vec::new());
        let mut last = 0i64;
        let mut now = 0i64;
        let mut first_sample = true;
        for op in ops {
            match op {
                UsageOp::Upsert { job, queue, bound } => {
                    // The namespace is part of the id: one per job.
                    let mut j = Job::gang(format!("ns{}/j{job}", job % 2), format!("q{queue}"), vec![gpus(1); bound.len()]);
                    for (k, b) in bound.iter().enumerate() {
                        if *b {
                            j = bound_task(j, k);
                        }
                    }
                    s.apply(Change::Job(j));
                }
                UsageOp::Remove(job) => {
                    s.apply(Change::JobGone(format!("ns{}/j{job}", job % 2)));
                }
                UsageOp::Assume(job) => {
                    let id = format!("ns{}/j{job}", job % 2);
                    let task = s.job(&id).map(|j| j.tasks[0].key.clone());
                    if let Some(task) = task {
                        let d = Decisions {
                            binds: vec![Bind { job: id.into(), task, node: "n1".into(), gpus: vec![0] }],
                            ..Decisions::default()
                        };
                        s.assume(&d, Timestamp(now));
                    }
                }
                UsageOp::Confirm => s.confirm_assumed(),
                UsageOp::Sample(secs) => {
                    now += i64::from(secs) * 1000;
                    s.sample_usage(Timestamp(now));
                    reference.sample(Timestamp(now), held_from_scratch(&s));
                    for (_, (_, _, held, used)) in open.iter_mut() {
                        for (name, v) in held.iter() {
                            used.add_to(name.as_str(), u128::from(v) * u128::try_from(now - last).unwrap_or(0) / 1000);
                        }
                    }
                    last = now;
                    // Jobs held at the first sample count from their pods'
                    // start (the history began while they ran).
                    let mut held_now: BTreeMap<String, HeldNow> = BTreeMap::new();
                    for j in s.jobs() {
                        let mut r = Resources::zero();
                        let mut since = (now, Usage::new());
                        for t in &j.tasks {
                            if matches!(t.state, TaskState::Bound { .. }) {
                                r.add(&t.requests);
                                if let Some(st) = t.started.filter(|st| first_sample && st.0 < now) {
                                    since.0 = since.0.min(st.0);
                                    for (name, v) in t.requests.iter() {
                                        since.1.add_to(name.as_str(), u128::from(v) * u128::try_from(now - st.0).unwrap_or(0) / 1000);
                                    }
                                }
                            }
                        }
                        if !r.is_zero() {
                            let user = j.id.split_once('/').map_or("", |(ns, _)| ns).to_string();
                            held_now.insert(j.id.clone(), ((j.queue.clone(), user), r, since));
                        }
                    }
                    first_sample = false;
                    let ended: Vec<String> = open.keys().filter(|id| !held_now.contains_key(*id)).cloned().collect();
                    for id in ended {
                        if let Some((start, (queue, user), _, used)) = open.remove(&id) {
                            want_jobs.push(crate::usage::JobUsage { job: id, queue, user, start_ms: start, end_ms: now, used });
                        }
                    }
                    for (id, (key, r, (start, used))) in held_now {
                        let e = open.entry(id).or_insert_with(|| (start, key.clone(), r.clone(), used));
                        e.1 = key;
                        e.2 = r;
                    }
                    got_jobs.extend(s.take_finished_jobs());
                    let h = s.usage_history().expect("tracked");
                    got.extend(h.take_closed());
                    want.extend(reference.take_closed());
                    prop_assert_eq!(h.decayed_by_user(Timestamp(now)), reference.decayed_by_user(Timestamp(now)));
                    // The snapshot carries both, the queues' the sum of their users'.
                    let snap = s.snapshot();
                    prop_assert_eq!(&*snap.usage, &crate::usage::per_queue(&snap.user_usage));
                }
            }
        }
        let key = |b: &crate::usage::ClosedBucket| (b.start_s, b.queue.clone(), b.user.clone());
        got.sort_by_key(key);
        want.sort_by_key(key);
        prop_assert_eq!(got, want);
        // Per job: the same records, each job's use over its holding.
        let jkey = |j: &crate::usage::JobUsage| (j.end_ms, j.job.clone());
        got_jobs.sort_by_key(jkey);
        want_jobs.sort_by_key(jkey);
        prop_assert_eq!(got_jobs, want_jobs);
    }
}

fn bound_task(mut j: Job, task: usize) -> Job {
    j.tasks[task].state = TaskState::Bound {
        node: "n1".to_string(),
        gpus: Some(vec![task as u32]),
    };
    j.tasks[task].started = Some(Timestamp(0));
    j
}

/// With the decayed usage unpublished (the service with the time-decayed
/// fair share off) the snapshot carries none and nothing is recomputed;
/// published again, the next sample computes it, period boundary or not.
#[test]
fn unpublished_usage_is_not_in_the_snapshot_until_published_again() {
    let mut s = ClusterState::new();
    s.apply(Change::Node(Node::new("n1", 64_000, 512 << 30, 8)));
    s.track_usage(crate::usage::UsageHistory::new(3600));
    s.apply(Change::Job(bound_task(
        Job::gang("ns/a", "q", vec![gpus(2)]),
        0,
    )));
    s.publish_usage(false);
    s.sample_usage(Timestamp(0));
    s.sample_usage(Timestamp(3_600_000));
    assert!(s.snapshot().usage.is_empty());
    // Buckets still close (the accounting), and the job's account runs.
    assert!(!s.usage_history().expect("tracked").take_closed().is_empty());
    s.publish_usage(true);
    // Not on a recalculation boundary: due anyway.
    s.sample_usage(Timestamp(3_600_000 + 1_000));
    let snap = s.snapshot();
    assert_eq!(snap.usage.len(), 1, "{:?}", snap.usage);
    s.publish_usage(false);
    assert!(s.snapshot().usage.is_empty());
}

/// Recording what changed never moves the published totals; the
/// recalculation does, once per period, and the snapshots in between share
/// the same totals.
#[test]
fn recording_usage_leaves_the_totals_to_the_recalculation_once_per_period() {
    let mut s = ClusterState::new();
    s.apply(Change::Node(Node::new("n1", 64_000, 512 << 30, 8)));
    s.track_usage(crate::usage::UsageHistory::new(7 * 86_400));
    s.apply(Change::Job(bound_task(
        Job::gang("ns/a", "q", vec![gpus(2)]),
        0,
    )));
    s.record_usage(Timestamp(0));
    assert!(s.usage_recalc_due(), "nothing published yet");
    assert!(s.recalc_usage(Timestamp(0)));
    assert!(!s.recalc_usage(Timestamp(0)), "done for this period");
    // 2 GPUs held for 100 s: recorded, not yet published.
    s.record_usage(Timestamp(100_000));
    assert!(!s.usage_recalc_due());
    let before = s.snapshot();
    assert!(before.usage.is_empty(), "{:?}", before.usage);
    // A new period: due; published; the next snapshots share one map.
    let period_ms = crate::usage::RECALC_PERIOD_S as i64 * 1000;
    s.record_usage(Timestamp(period_ms));
    assert!(s.usage_recalc_due());
    assert!(s.recalc_usage(Timestamp(period_ms)));
    let a = s.snapshot();
    let gpu_s = a.usage["q"].get(&trainyard_model::ResourceName::Gpu);
    assert_eq!(gpu_s, 2_000 * crate::usage::RECALC_PERIOD_S as u128);
    s.record_usage(Timestamp(period_ms + 1_000));
    let b = s.snapshot();
    assert!(std::sync::Arc::ptr_eq(&a.usage, &b.usage));
    assert!(std::sync::Arc::ptr_eq(&a.user_usage, &b.user_usage));
}

/// A job already running when the history begins (a restart, a takeover)
/// is recorded from its pods' start, not from the first sample; the
/// queue's buckets count from the first sample only.
#[test]
fn a_job_running_when_the_history_begins_is_recorded_from_its_start() {
    let mut s = ClusterState::new();
    s.apply(Change::Node(Node::new("n1", 64_000, 512 << 30, 8)));
    let mut j = bound_task(Job::gang("ns/a", "q", vec![gpus(2), gpus(2)]), 0);
    j = bound_task(j, 1);
    j.tasks[0].started = Some(Timestamp(1_000_000));
    j.tasks[1].started = Some(Timestamp(3_000_000));
    s.apply(Change::Job(j));
    s.track_usage(crate::usage::UsageHistory::new(7 * 86_400));
    s.sample_usage(Timestamp(5_000_000));
    s.apply(Change::JobGone("ns/a".into()));
    s.sample_usage(Timestamp(6_000_000));
    let rec = s.take_finished_jobs();
    assert_eq!(rec.len(), 1, "{rec:?}");
    assert_eq!((rec[0].start_ms, rec[0].end_ms), (1_000_000, 6_000_000));
    // 2 GPUs for 5,000 s, 2 more for 3,000 s (milli-GPU·s).
    let gpu = trainyard_model::ResourceName::Gpu;
    assert_eq!(rec[0].used.get(&gpu), 2_000 * 5_000 + 2_000 * 3_000);
    // The queue's history: 4 GPUs for the 1,000 s it saw.
    let d = s
        .usage_history()
        .expect("tracked")
        .decayed(Timestamp(6_000_000));
    assert_eq!(d["q"].get(&gpu), 4_000 * 1_000);
    // Later jobs count from the sample that first sees them.
    let mut k = bound_task(Job::gang("ns/b", "q", vec![gpus(1)]), 0);
    k.tasks[0].started = Some(Timestamp(0));
    s.apply(Change::Job(k));
    s.sample_usage(Timestamp(7_000_000));
    s.apply(Change::JobGone("ns/b".into()));
    s.sample_usage(Timestamp(8_000_000));
    let rec = s.take_finished_jobs();
    assert_eq!(
        (rec[0].start_ms, rec[0].used.get(&gpu)),
        (7_000_000, 1_000 * 1_000)
    );
}

/// Five minutes of 60 busy GPUs, asked of the live state before any bucket
/// closed: the queue's open bucket and the running job's account say so;
/// once the job ends, its record is a finished one and nothing is running.
#[test]
fn the_open_period_and_running_jobs_are_reported_live() {
    let mut s = ClusterState::new();
    s.apply(Change::Node(Node::new("n1", 64_000, 512 << 30, 8)));
    s.track_usage(crate::usage::UsageHistory::new(7 * 86_400));
    let mut j = Job::gang("ns/big", "q", (0..60).map(|_| gpus(1)).collect());
    for t in 0..60 {
        j = bound_task(j, t);
    }
    s.sample_usage(Timestamp(36_000_000));
    s.apply(Change::Job(j));
    s.sample_usage(Timestamp(36_000_000));
    s.sample_usage(Timestamp(36_060_000));
    let gpu = trainyard_model::ResourceName::Gpu;
    let (buckets, running) = s.live_usage(Timestamp(36_300_000));
    assert_eq!(buckets.len(), 1, "{buckets:?}");
    assert_eq!(
        (
            buckets[0].queue.as_str(),
            buckets[0].user.as_str(),
            buckets[0].start_s,
            buckets[0].width_s
        ),
        ("q", "ns", 36_000, 300)
    );
    assert_eq!(buckets[0].used.get(&gpu), 60_000 * 300);
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(
        (
            running[0].job.as_str(),
            running[0].start_ms,
            running[0].end_ms
        ),
        ("ns/big", 36_000_000, 36_300_000)
    );
    assert_eq!(running[0].used.get(&gpu), 60_000 * 300);
    // Asking changes nothing.
    assert!(s.take_finished_jobs().is_empty());
    s.apply(Change::JobGone("ns/big".into()));
    s.sample_usage(Timestamp(36_600_000));
    assert_eq!(s.take_finished_jobs().len(), 1);
    assert!(s.live_usage(Timestamp(36_600_000)).1.is_empty());
}
