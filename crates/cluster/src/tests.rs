use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use trainyard_model::{Job, Node, Resources, Snapshot, TaskKey, TaskState, Timestamp, Usage};
use trainyard_sched::{Bind, Decisions, Eviction, EvictionKind, NominationDecision, Withdrawal};

use crate::{Change, ClusterState, Write};

fn gpus(n: u64) -> Resources {
    Resources::new(1000, 1 << 30, 0).with_gpus(n)
}

fn job(id: &str, tasks: usize) -> Job {
    Job::gang(id, "q", vec![gpus(1); tasks])
}

fn bound(mut j: Job, task: usize, node: &str) -> Job {
    j.tasks[task].state = TaskState::Bound {
        node: node.to_string(),
        gpus: Some(vec![0]),
    };
    j.tasks[task].started = Some(Timestamp(0));
    j
}

fn world() -> ClusterState {
    let mut s = ClusterState::new();
    for n in ["n2", "n1"] {
        s.apply(Change::Node(Node::new(n, 8000, 64 << 30, 8)));
    }
    s.apply(Change::Job(job("b", 2)));
    s.apply(Change::Job(job("a", 1)));
    s
}

fn bind(job: &str, task: &str, node: &str) -> Bind {
    Bind {
        job: job.into(),
        task: TaskKey::named(task),
        node: node.into(),
        gpus: vec![3],
    }
}

fn state(s: &ClusterState, job: &str, task: &str) -> String {
    let (_, t) = s.task(job, &TaskKey::named(task)).expect("task exists");
    let mut out = match &t.state {
        TaskState::Pending => "pending".to_string(),
        TaskState::Bound { node, .. } => format!("bound@{node}"),
    };
    if t.terminating {
        out.push_str(" terminating");
    }
    if let Some(n) = &t.nomination {
        out.push_str(&format!(" nominated@{}since{}", n.node, n.since.0));
    }
    out
}

#[test]
fn snapshot_is_canonical_and_shares_unchanged_objects() {
    let mut s = world();
    let first = s.snapshot();
    let ids: Vec<&str> = first.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    let names: Vec<&str> = first.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2"]);

    s.apply(Change::Job(bound(job("b", 2), 0, "n1")));
    let second = s.snapshot();
    assert!(Arc::ptr_eq(&first.jobs[0], &second.jobs[0]), "job a shared");
    assert!(
        !Arc::ptr_eq(&first.jobs[1], &second.jobs[1]),
        "job b rebuilt"
    );
    assert!(
        Arc::ptr_eq(&first.nodes[0], &second.nodes[0]),
        "nodes shared"
    );
    assert!(
        Arc::ptr_eq(&first.queues, &second.queues),
        "queue tree shared"
    );
}

#[test]
fn an_assumed_bind_holds_until_the_world_shows_it() {
    let mut s = world();
    let d = Decisions {
        binds: vec![bind("b", "b-0", "n1"), bind("zz", "zz-0", "n1")],
        ..Decisions::default()
    };
    let applied = s.assume(&d, Timestamp(5));
    assert_eq!(applied.binds, [0], "an unknown job's bind does not apply");
    assert_eq!(state(&s, "b", "b-0"), "bound@n1");
    assert_eq!(s.writes(), [Write::Bind(bind("b", "b-0", "n1"))]);
    // The world's job is still pending (the watch lags): still assumed.
    s.apply(Change::Job(job("b", 2)));
    assert_eq!(state(&s, "b", "b-0"), "bound@n1");
    let snap = s.snapshot();
    assert!(!snap.jobs[1].tasks[0].is_pending());
    // The world shows the bind: confirmed, nothing assumed any more.
    s.apply(Change::Job(bound(job("b", 2), 0, "n1")));
    assert_eq!(s.assumed().count(), 0);
    assert_eq!(state(&s, "b", "b-0"), "bound@n1");
    // The write is still owed until the edge takes it.
    assert_eq!(s.take_writes().len(), 1);
    assert!(s.writes().is_empty());
}

#[test]
fn forgetting_an_unconfirmed_bind_frees_the_task_and_drops_its_write() {
    let mut s = world();
    let d = Decisions {
        binds: vec![bind("b", "b-0", "n1")],
        ..Decisions::default()
    };
    s.assume(&d, Timestamp(5));
    let d = Decisions {
        binds: vec![bind("b", "b-1", "n2")],
        ..Decisions::default()
    };
    s.assume(&d, Timestamp(9));
    let gone = s.forget_assumed(Timestamp(6));
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].0, "b");
    assert_eq!(gone[0].1.task, "b-0");
    assert_eq!(state(&s, "b", "b-0"), "pending");
    assert_eq!(state(&s, "b", "b-1"), "bound@n2");
    assert_eq!(s.writes(), [Write::Bind(bind("b", "b-1", "n2"))]);
}

#[test]
fn a_bind_the_api_accepted_is_not_forgotten_for_its_age() {
    // Decided at 5, landed long after (a slow API, a queue of binds), the
    // watch not yet showing it: it still holds its node at 100.
    let mut s = world();
    let d = Decisions {
        binds: vec![bind("b", "b-0", "n1"), bind("b", "b-1", "n2")],
        ..Decisions::default()
    };
    s.assume(&d, Timestamp(5));
    let writes = s.take_writes();
    assert!(s.write_landed(&writes[0]));
    let gone = s.forget_assumed(Timestamp(100));
    assert_eq!(gone.len(), 1, "only the bind not landed is forgotten");
    assert_eq!(gone[0].1.task, "b-1");
    assert_eq!(state(&s, "b", "b-0"), "bound@n1");
    assert_eq!(state(&s, "b", "b-1"), "pending");
}

#[test]
fn a_failed_write_is_forgotten_alone_and_the_task_is_pending_again() {
    let mut s = world();
    let d = Decisions {
        binds: vec![bind("b", "b-0", "n1"), bind("b", "b-1", "n2")],
        ..Decisions::default()
    };
    s.assume(&d, Timestamp(5));
    let writes = s.take_writes();
    assert!(s.forget_write(&writes[1]), "the second bind failed");
    assert!(!s.forget_write(&writes[1]), "forgotten once");
    assert_eq!(state(&s, "b", "b-0"), "bound@n1");
    assert_eq!(state(&s, "b", "b-1"), "pending");
    let snap = s.snapshot();
    let b = snap.jobs.iter().find(|j| j.id == "b").expect("job b");
    assert_eq!(b.pending_count(), 1, "the snapshot shows it pending");
    assert_eq!(s.assumed().count(), 1);
}

#[test]
fn a_bind_of_a_task_that_is_not_pending_is_not_assumed() {
    let mut s = world();
    s.apply(Change::Job(bound(job("b", 2), 0, "n2")));
    let d = Decisions {
        binds: vec![bind("b", "b-0", "n1")],
        ..Decisions::default()
    };
    assert!(s.assume(&d, Timestamp(5)).binds.is_empty());
    assert_eq!(state(&s, "b", "b-0"), "bound@n2");
    assert!(s.writes().is_empty());
}

fn eviction(job: &str, task: &str) -> Eviction {
    Eviction {
        job: job.into(),
        task: TaskKey::named(task),
        node: "n2".into(),
        kind: EvictionKind::Preempt,
        preemptor: "a".into(),
        message: "preempted".into(),
    }
}

#[test]
fn evictions_apply_to_running_tasks_once() {
    let mut s = world();
    s.apply(Change::Job(bound(job("b", 2), 0, "n2")));
    let d = Decisions {
        evictions: vec![
            eviction("b", "b-0"),
            eviction("b", "b-1"),
            eviction("b", "b-0"),
        ],
        ..Decisions::default()
    };
    let applied = s.assume(&d, Timestamp(5));
    assert_eq!(
        applied.evictions,
        [0],
        "pending b-1 and the repeat do not apply"
    );
    assert_eq!(state(&s, "b", "b-0"), "bound@n2 terminating");
    // The pod is gone in the world: the job comes back without it running.
    s.apply(Change::Job(job("b", 2)));
    assert_eq!(state(&s, "b", "b-0"), "pending");
    assert_eq!(s.assumed().count(), 0);
}

fn nomination(task: &str, node: &str) -> NominationDecision {
    NominationDecision {
        job: "b".into(),
        task: TaskKey::named(task),
        node: node.into(),
        gpus: vec![1],
    }
}

#[test]
fn a_nomination_keeps_its_first_time_on_a_node_and_expires() {
    let mut s = world();
    let d = Decisions {
        nominations: vec![nomination("b-0", "n1")],
        ..Decisions::default()
    };
    assert_eq!(s.assume(&d, Timestamp(1_000)).nominations, [0]);
    s.confirm_assumed();
    s.take_writes();
    assert!(s.any_nominations());
    // Renewed on the same node: same time, nothing owed.
    assert_eq!(s.assume(&d, Timestamp(9_000)).nominations, [0]);
    assert!(s.writes().is_empty());
    assert_eq!(state(&s, "b", "b-0"), "pending nominated@n1since1000");
    // Moved to another node: a new time and a write.
    let moved = Decisions {
        nominations: vec![nomination("b-0", "n2")],
        ..Decisions::default()
    };
    s.assume(&moved, Timestamp(10_000));
    assert_eq!(state(&s, "b", "b-0"), "pending nominated@n2since10000");
    assert_eq!(s.writes().len(), 1);
    // Ten seconds later, with a ten-second timeout: gone.
    s.expire_nominations(Timestamp(19_999), 10);
    assert_eq!(state(&s, "b", "b-0"), "pending nominated@n2since10000");
    s.expire_nominations(Timestamp(20_000), 10);
    assert_eq!(state(&s, "b", "b-0"), "pending");
    assert!(!s.any_nominations());
    assert_eq!(s.assumed().count(), 0);
}

#[test]
fn a_withdrawal_holds_until_the_world_shows_no_nomination() {
    let mut s = world();
    let d = Decisions {
        nominations: vec![nomination("b-0", "n1")],
        ..Decisions::default()
    };
    s.assume(&d, Timestamp(1_000));
    s.confirm_assumed();
    s.take_writes();
    let withdraw = Decisions {
        withdrawals: vec![Withdrawal {
            job: "b".into(),
            task: TaskKey::named("b-0"),
            node: "n1".into(),
        }],
        ..Decisions::default()
    };
    assert_eq!(s.assume(&withdraw, Timestamp(2_000)).withdrawals, [0]);
    assert_eq!(state(&s, "b", "b-0"), "pending");
    assert!(matches!(s.writes(), [Write::Withdraw(w)] if w.task.name == "b-0"));
    // The world still shows it: the job stays among the nominated until
    // the world confirms.
    assert!(s.any_nominations());
    assert_eq!(s.assumed().count(), 1);
    // Nothing left to withdraw: applies, owes nothing.
    s.take_writes();
    s.confirm_assumed();
    assert!(!s.any_nominations());
    assert_eq!(s.assume(&withdraw, Timestamp(3_000)).withdrawals, [0]);
    assert!(s.writes().is_empty());
    assert_eq!(s.assumed().count(), 0);
}

#[test]
fn a_withdrawal_replaces_an_unconfirmed_nomination_and_can_be_forgotten() {
    let withdraw = Decisions {
        withdrawals: vec![Withdrawal {
            job: "b".into(),
            task: TaskKey::named("b-0"),
            node: "n1".into(),
        }],
        ..Decisions::default()
    };
    let nominate = Decisions {
        nominations: vec![nomination("b-0", "n1")],
        ..Decisions::default()
    };
    // Nominated, not yet written, then withdrawn: only the withdrawal is
    // assumed and owed, and a world echo that shows no nomination settles
    // it without bringing the nomination back.
    let mut s = world();
    s.assume(&nominate, Timestamp(1_000));
    s.assume(&withdraw, Timestamp(2_000));
    assert_eq!(s.assumed().count(), 1);
    assert!(
        matches!(s.writes(), [Write::Withdraw(_)]),
        "{:?}",
        s.writes()
    );
    s.apply(Change::Job(job("b", 2)));
    assert_eq!(state(&s, "b", "b-0"), "pending");
    assert_eq!(s.assumed().count(), 0);
    assert!(!s.any_nominations());
    // A withdrawal whose write failed is forgotten: the world's nomination
    // shows again.
    let mut s = world();
    s.assume(&nominate, Timestamp(1_000));
    s.confirm_assumed();
    s.take_writes();
    s.assume(&withdraw, Timestamp(2_000));
    let w = s.take_writes();
    assert_eq!(state(&s, "b", "b-0"), "pending");
    assert!(s.forget_write(&w[0]));
    assert_eq!(state(&s, "b", "b-0"), "pending nominated@n1since1000");
    assert!(s.any_nominations());
}

#[test]
fn confirming_makes_the_views_the_world() {
    let mut s = world();
    let d = Decisions {
        binds: vec![bind("a", "a-0", "n1")],
        ..Decisions::default()
    };
    s.assume(&d, Timestamp(5));
    s.confirm_assumed();
    assert_eq!(s.assumed().count(), 0);
    assert_eq!(state(&s, "a", "a-0"), "bound@n1");
    // A later world upsert of the same job replaces it as it is.
    s.apply(Change::Job(job("a", 1)));
    assert_eq!(state(&s, "a", "a-0"), "pending");
}

#[test]
fn deletes_and_resync_remove_what_the_world_no_longer_has() {
    let mut s = world();
    let d = Decisions {
        binds: vec![bind("b", "b-0", "n1")],
        ..Decisions::default()
    };
    s.assume(&d, Timestamp(5));
    assert!(s.apply(Change::JobGone("b".into())).is_empty());
    assert_eq!(s.assumed().count(), 0);
    assert_eq!(s.apply(Change::JobGone("b".into())).len(), 1, "warns");
    s.apply(Change::Resync(Snapshot::new(
        vec![Node::new("n9", 8000, 64 << 30, 8)],
        Default::default(),
        vec![job("c", 1)],
    )));
    let snap = s.snapshot();
    let ids: Vec<&str> = snap.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["c"]);
    let names: Vec<&str> = snap.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n9"]);
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(u8, u8, bool),
    Gone(u8),
    Bind(u8, u8, u8),
    Forget(i64),
    Confirm,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..6, 1u8..4, any::<bool>()).prop_map(|(j, n, b)| Op::Upsert(j, n, b)),
        (0u8..6).prop_map(Op::Gone),
        (0u8..6, 0u8..4, 0u8..2).prop_map(|(j, t, n)| Op::Bind(j, t, n)),
        (0i64..40).prop_map(Op::Forget),
        Just(Op::Confirm),
    ]
}

proptest! {
    /// The snapshot equals the world rebuilt from scratch out of the
    /// changes (the last upsert of each job not deleted since), with the
    /// binds still assumed laid over it: recomputed here from the
    /// operations, not read from the state.
    #[test]
    fn snapshot_equals_a_rebuild_from_the_changes(ops in prop::collection::vec(op(), 1..40)) {
        let mut s = ClusterState::new();
        let mut model: BTreeMap<String, Job> = BTreeMap::new();
        // Assumed binds not yet confirmed or forgotten: (job, task) -> (node, at).
        let mut assumed: BTreeMap<(String, String), (String, i64)> = BTreeMap::new();
        for (step, op) in ops.into_iter().enumerate() {
            let now = step as i64;
            match op {
                Op::Upsert(j, n, b) => {
                    let id = format!("j{j}");
                    let mut job = job(&id, n as usize);
                    if b {
                        job = bound(job, 0, "n0");
                    }
                    // The world decides: assumptions on tasks it bound or
                    // no longer has are settled.
                    let names: Vec<String> = job.tasks.iter().filter(|t| t.is_pending()).map(|t| t.name.clone()).collect();
                    assumed.retain(|(aj, at), _| aj != &id || names.contains(at));
                    s.apply(Change::Job(job.clone()));
                    model.insert(id, job);
                }
                Op::Gone(j) => {
                    let id = format!("j{j}");
                    s.apply(Change::JobGone(id.clone()));
                    model.remove(&id);
                    assumed.retain(|(aj, _), _| aj != &id);
                }
                Op::Bind(j, t, n) => {
                    let (id, task) = (format!("j{j}"), format!("j{j}-{t}"));
                    let d = Decisions { binds: vec![bind(&id, &task, &format!("n{n}"))], ..Decisions::default() };
                    let applied = s.assume(&d, Timestamp(now));
                    let pending = model.get(&id).and_then(|m| m.tasks.iter().find(|x| x.name == task)).is_some_and(|x| x.is_pending())
                        && !assumed.contains_key(&(id.clone(), task.clone()));
                    prop_assert_eq!(applied.binds.len() == 1, pending);
                    if pending {
                        assumed.insert((id, task), (format!("n{n}"), now));
                    }
                }
                Op::Forget(t) => {
                    s.forget_assumed(Timestamp(t));
                    assumed.retain(|_, (_, at)| *at >= t);
                }
                Op::Confirm => {
                    s.confirm_assumed();
                    for ((j, t), (node, at)) in std::mem::take(&mut assumed) {
                        if let Some(m) = model.get_mut(&j) && let Some(x) = m.tasks.iter_mut().find(|x| x.name == t) {
                            x.state = TaskState::Bound { node, gpus: Some(vec![3]) };
                            x.started = Some(Timestamp(at));
                        }
                    }
                }
            }
            let snap = s.snapshot();
            let mut expect = model.clone();
            for ((j, t), (node, at)) in &assumed {
                if let Some(x) = expect.get_mut(j).and_then(|m| m.tasks.iter_mut().find(|x| &x.name == t)) {
                    x.state = TaskState::Bound { node: node.clone(), gpus: Some(vec![3]) };
                    x.started = Some(Timestamp(*at));
                }
            }
            let got: Vec<Job> = snap.jobs.iter().map(|j| (**j).clone()).collect();
            let want: Vec<Job> = expect.into_values().collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!(s.assumed().count(), assumed.len());
        }
    }
}

proptest! {
    /// The simulator's path (`apply_decisions`) and the service's
    /// (`assume`, then the world confirms all) end in the same world.
    #[test]
    fn applying_decisions_equals_assuming_and_confirming(
        steps in prop::collection::vec(
            (prop::collection::vec((0u8..4, 0u8..3, 0u8..3, 0u8..2), 0..6), 0i64..5),
            1..8,
        )
    ) {
        let mut a = world();
        let mut b = world();
        a.apply(Change::Job(job("c", 3)));
        b.apply(Change::Job(job("c", 3)));
        for (k, (decisions, gap)) in steps.into_iter().enumerate() {
            let now = Timestamp(k as i64 * 10 + gap);
            let mut d = Decisions::default();
            for (kind, j, t, n) in decisions {
                let id = ["a", "b", "c"][j as usize];
                let task = format!("{id}-{t}");
                let node = format!("n{}", n + 1);
                match kind {
                    0 => d.binds.push(bind(id, &task, &node)),
                    1 => d.evictions.push(Eviction { job: id.into(), ..eviction(id, &task) }),
                    2 => d.nominations.push(NominationDecision {
                        job: id.into(),
                        ..nomination(&task, &node)
                    }),
                    _ => d.withdrawals.push(Withdrawal {
                        job: id.into(),
                        task: TaskKey::named(task.as_str()),
                        node: node.as_str().into(),
                    }),
                }
            }
            let applied_a = a.apply_decisions(&d, now);
            let applied_b = b.assume(&d, now);
            b.take_writes();
            b.confirm_assumed();
            prop_assert_eq!(&applied_a.binds, &applied_b.binds);
            prop_assert_eq!(&applied_a.evictions, &applied_b.evictions);
            prop_assert_eq!(&applied_a.nominations, &applied_b.nominations);
            prop_assert_eq!(&applied_a.withdrawals, &applied_b.withdrawals);
            let (sa, sb) = (a.snapshot(), b.snapshot());
            let ja: Vec<Job> = sa.jobs.iter().map(|j| (**j).clone()).collect();
            let jb: Vec<Job> = sb.jobs.iter().map(|j| (**j).clone()).collect();
            prop_assert_eq!(ja, jb);
            prop_assert_eq!(a.any_nominations(), b.any_nominations());
        }
    }
}

#[test]
fn a_job_whose_last_pod_goes_is_gone_even_when_the_queue_tree_changes_too() {
    // The only job uses the implicit default queue: its going changes the
    // tree (the default queue goes with it). Also when a Queue changes in
    // the same refresh.
    for queue_change in [false, true] {
        let mut s = ClusterState::for_objects(trainyard_ingest::LoadOptions::default());
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "a", "namespace": "ml", "uid": "u-a"},
               "spec": {"schedulerName": "trainyard",
                        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}});
        let queue = serde_json::json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
               "metadata": {"name": "other"}, "spec": {}});
        for o in [&pod, &queue] {
            for c in crate::Decoded::object(o, "t").changes {
                s.apply(Change::Object(c));
            }
        }
        assert_eq!(s.snapshot().jobs.len(), 1);
        s.apply(Change::Object(
            crate::ObjectChange::gone("Pod", Some("ml"), "a").expect("a pod change"),
        ));
        if queue_change {
            for c in crate::Decoded::object(&queue, "t").changes {
                s.apply(Change::Object(c));
            }
        }
        let jobs: Vec<String> = s.snapshot().jobs.iter().map(|j| j.id.clone()).collect();
        assert!(jobs.is_empty(), "queue change {queue_change}: {jobs:?}");
    }
}

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

/// A snapshot patched for many changed jobs at once (merged) and for a
/// few (in place) lists the same jobs, in the same order, as one built
/// from scratch.
#[test]
fn a_snapshot_patched_for_many_changes_equals_one_built_afresh() {
    let mut s = ClusterState::new();
    s.apply(Change::Node(Node::new("n1", 64_000, 512 << 30, 8)));
    for i in 0..60 {
        s.apply(Change::Job(Job::gang(
            format!("ns/j{i:02}"),
            "q",
            vec![gpus(1)],
        )));
    }
    let _ = s.snapshot();
    for changes in [40usize, 3] {
        // Removals, updates and inserts interleaved by id.
        for i in 0..changes {
            let _ = match i % 3 {
                0 => s.apply(Change::JobGone(format!("ns/j{:02}", i))),
                1 => s.apply(Change::Job(Job::gang(
                    format!("ns/j{:02}", i),
                    "q",
                    vec![gpus(2)],
                ))),
                _ => s.apply(Change::Job(Job::gang(
                    format!("ns/k{i:02}"),
                    "q",
                    vec![gpus(1)],
                ))),
            };
        }
        let patched = s.snapshot();
        let mut fresh = ClusterState::new();
        fresh.apply(Change::Node(Node::new("n1", 64_000, 512 << 30, 8)));
        for j in s.jobs() {
            fresh.apply(Change::Job(j.clone()));
        }
        let want = fresh.snapshot();
        let ids = |sn: &trainyard_model::Snapshot| -> Vec<(String, u64)> {
            sn.jobs
                .iter()
                .map(|j| (j.id.clone(), j.tasks[0].requests.gpu))
                .collect()
        };
        assert_eq!(ids(&patched), ids(&want), "{changes} changes");
    }
}
