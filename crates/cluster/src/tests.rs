use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use trainyard_model::{Job, Node, Resources, Snapshot, TaskKey, TaskState, Timestamp};
use trainyard_sched::{Bind, Decisions, Eviction, EvictionKind, NominationDecision, Withdrawal};

use crate::{Change, ClusterState, Write};

mod dra;
mod usage;

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

/// An eviction decided for a pod whose bind has not landed (the bind is
/// still queued) holds while the world shows the pod pending: dropped, the
/// pod would read bound and not terminating, and every cycle would decide
/// (and queue) the same eviction again (found by the service's simulation,
/// seed 17 with status writes: 373 writes queued).
#[test]
fn an_eviction_laid_over_an_unlanded_bind_is_not_moot_while_the_bind_is_on_its_way() {
    let mut s = world();
    s.assume(
        &Decisions {
            binds: vec![bind("b", "b-0", "n1")],
            ..Decisions::default()
        },
        Timestamp(5),
    );
    let evict = Decisions {
        evictions: vec![eviction("b", "b-0")],
        ..Decisions::default()
    };
    assert_eq!(s.assume(&evict, Timestamp(6)).evictions, [0]);
    assert_eq!(state(&s, "b", "b-0"), "bound@n1 terminating");
    // A change of the job that still shows b-0 pending (its bind queued).
    s.apply(Change::Job(job("b", 2)));
    assert_eq!(state(&s, "b", "b-0"), "bound@n1 terminating");
    assert_eq!(s.assumed().count(), 2);
    assert_eq!(
        s.assume(&evict, Timestamp(7)).evictions,
        Vec::<usize>::new(),
        "not decided again"
    );
    // The bind lands, then the eviction: nothing assumed any more.
    s.apply(Change::Job(bound(job("b", 2), 0, "n1")));
    assert_eq!(state(&s, "b", "b-0"), "bound@n1 terminating");
    let mut gone = bound(job("b", 2), 0, "n1");
    gone.tasks[0].terminating = true;
    s.apply(Change::Job(gone));
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
