//! Reclaim and preemption through `schedule`: who is evicted, why, and
//! where the preemptor is nominated. Times are milliseconds; `NOW` is 10 h.

mod common;

use expect_test::expect;
use std::sync::Arc;

use trainyard_model::topology::generate::{RailOptimized, rail_optimized};
use trainyard_model::topology::{NodeInput, Topology};
use trainyard_model::{
    ExternalPod, Job, Node, QueueSpec, QueueTree, Resources, Snapshot, TaskState, Timestamp,
};
use trainyard_sched::{Config, Decisions, schedule};

const GI: u64 = 1 << 30;
const NOW: Timestamp = Timestamp(10 * 3_600_000);
const MIN: i64 = 60_000;

fn gpus(k: u64) -> Resources {
    Resources::new(1000, GI, 0).with_gpus(k)
}

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node::new(format!("n{i}"), 128_000, 1024 * GI, 8))
        .collect()
}

/// A running job of one pod per (node, devices), started `ago` minutes ago.
fn running(id: &str, queue: &str, pods: &[(&str, &[u32])], ago: i64) -> Job {
    let reqs: Vec<Resources> = pods.iter().map(|(_, d)| gpus(d.len() as u64)).collect();
    let mut j = Job::gang(id, queue, reqs);
    for (t, (node, devs)) in j.tasks.iter_mut().zip(pods) {
        t.state = TaskState::Bound {
            node: node.to_string(),
            gpus: Some(devs.to_vec()),
        };
        t.started = Some(Timestamp(NOW.0 - ago * MIN));
    }
    j.submit_time = Timestamp(NOW.0 - ago * MIN - MIN);
    j
}

fn pending(id: &str, queue: &str, pods: usize, k: u64) -> Job {
    let mut j = Job::gang(id, queue, vec![gpus(k); pods]);
    j.submit_time = Timestamp(NOW.0 - MIN);
    j
}

fn run(nodes: Vec<Node>, queues: Vec<QueueSpec>, jobs: Vec<Job>) -> Decisions {
    run_with(nodes, queues, jobs, Vec::new(), None)
}

fn run_with(
    nodes: Vec<Node>,
    queues: Vec<QueueSpec>,
    jobs: Vec<Job>,
    external: Vec<ExternalPod>,
    topology: Option<Arc<Topology>>,
) -> Decisions {
    let s = Snapshot::new(nodes, QueueTree::build(queues).unwrap(), jobs)
        .with_external(external)
        .with_topology(topology);
    schedule(&s, &Config::default(), NOW)
}

fn evicted(d: &Decisions) -> Vec<String> {
    let mut v: Vec<String> = d.evictions.iter().map(|e| e.task.to_string()).collect();
    v.sort();
    v
}

/// The withdrawn nominations as (pod, node), in decision order.
fn withdrawn(d: &Decisions) -> Vec<(String, String)> {
    d.withdrawals
        .iter()
        .map(|w| (w.task.to_string(), w.node.to_string()))
        .collect()
}

fn q(name: &str, quota: u64) -> QueueSpec {
    QueueSpec::new(name).quota(Resources::zero().with_gpus(quota))
}

#[test]
fn basic_reclaim_evicts_exactly_enough() {
    // Team a fills 16 GPUs with four 4-GPU jobs; b (quota 8) wants one
    // 8-GPU pod. Fair shares are 8/8: the two most recently started jobs
    // of a that free one node go.
    let jobs = vec![
        running("a/j1", "a", &[("n0", &[0, 1, 2, 3])], 400),
        running("a/j2", "a", &[("n0", &[4, 5, 6, 7])], 300),
        running("a/j3", "a", &[("n1", &[0, 1, 2, 3])], 200),
        running("a/j4", "a", &[("n1", &[4, 5, 6, 7])], 100),
        pending("b/big", "b", 1, 8),
    ];
    let d = run(nodes(2), vec![q("a", 8), q("b", 8)], jobs);
    assert_eq!(evicted(&d), ["a/j3-0", "a/j4-0"]);
    assert!(d.binds.is_empty());
    assert_eq!(d.nominations.len(), 1);
    assert_eq!(d.nominations[0].node, "n1");
    expect!["reclaimed for b/big (b): a above fair share (nvidia.com/gpu 16/8)"]
        .assert_eq(&d.evictions[0].message);
    expect!["waiting for 2 evicted pod(s) to terminate; room reserved on n1"]
        .assert_eq(&d.pending[0].message);
}

#[test]
fn reclaim_that_would_not_fit_evicts_nothing() {
    // Half of each node is held outside Trainyard; a's jobs hold the other
    // halves. Evicting both frees 4 + 4 GPUs on two nodes: an 8-GPU pod
    // still does not fit, so nobody is evicted.
    let ext = ["n0", "n1"]
        .iter()
        .map(|n| ExternalPod {
            name: format!("other/{n}"),
            node: n.to_string(),
            requests: gpus(4),
            gpus: Some(vec![4, 5, 6, 7]),
            ..Default::default()
        })
        .collect();
    let jobs = vec![
        running("a/j1", "a", &[("n0", &[0, 1, 2, 3])], 100),
        running("a/j2", "a", &[("n1", &[0, 1, 2, 3])], 100),
        pending("b/big", "b", 1, 8),
    ];
    let d = run_with(nodes(2), vec![q("a", 0), q("b", 8)], jobs, ext, None);
    assert!(d.evictions.is_empty(), "{:?}", d.evictions);
    assert!(d.nominations.is_empty());
    assert!(
        d.pending[0]
            .message
            .starts_with("gang needs 8 × nvidia.com/gpu")
    );
}

#[test]
fn elastic_job_shrinks_instead_of_dying() {
    // a runs an elastic job, minMember 2, four 4-GPU pods; the two most
    // recently started sit on n1. b's 8-GPU pod takes them; the gang keeps
    // its minimum.
    let mut elastic = running(
        "a/el",
        "a",
        &[
            ("n0", &[0, 1, 2, 3]),
            ("n0", &[4, 5, 6, 7]),
            ("n1", &[0, 1, 2, 3]),
            ("n1", &[4, 5, 6, 7]),
        ],
        300,
    );
    elastic.min_member = 2;
    elastic.tasks[2].started = Some(Timestamp(NOW.0 - 20 * MIN));
    elastic.tasks[3].started = Some(Timestamp(NOW.0 - 10 * MIN));
    let d = run(
        nodes(2),
        vec![q("a", 8), q("b", 8)],
        vec![elastic, pending("b/big", "b", 1, 8)],
    );
    assert_eq!(evicted(&d), ["a/el-2", "a/el-3"]);
    assert!(
        d.evictions[0]
            .message
            .ends_with("; elastic pod above minMember 2")
    );
}

#[test]
fn minimum_runtime_protects_young_jobs() {
    // Queue a protects jobs for 1 h. j-new (10 min) would be the cheaper
    // victim, but only j-old (2 h) may go.
    let jobs = vec![
        running("a/j-old", "a", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 120),
        running("a/j-new", "a", &[("n1", &[0, 1, 2, 3, 4, 5, 6, 7])], 10),
        pending("b/big", "b", 1, 8),
    ];
    let d = run(
        nodes(2),
        vec![q("a", 8).min_runtime(3600), q("b", 8)],
        jobs.clone(),
    );
    assert_eq!(evicted(&d), ["a/j-old-0"]);
    // Without protection, the most recently started goes.
    let d = run(nodes(2), vec![q("a", 8), q("b", 8)], jobs);
    assert_eq!(evicted(&d), ["a/j-new-0"]);
}

#[test]
fn three_level_tree_takes_only_from_the_right_cousin() {
    // org1 (quota 8) = x (4) + y (4); org2 (quota 8) = z (8). y uses 8, z
    // uses its 8. x wants 4: compared under org1, y is above its fair share
    // (8 > 4); z is at its share and across org1's own share, so the more
    // recently started z job is not touched.
    let queues = vec![
        q("org1", 8),
        q("x", 4).parent("org1"),
        q("y", 4).parent("org1"),
        q("org2", 8),
        q("z", 8).parent("org2"),
    ];
    let jobs = vec![
        running("y/j1", "y", &[("n0", &[0, 1, 2, 3])], 300),
        running("y/j2", "y", &[("n0", &[4, 5, 6, 7])], 200),
        running("z/j1", "z", &[("n1", &[0, 1, 2, 3, 4, 5, 6, 7])], 5),
        pending("x/small", "x", 1, 4),
    ];
    let d = run(nodes(2), queues, jobs);
    assert_eq!(evicted(&d), ["y/j2-0"]);
    expect!["reclaimed for x/small (org1/x): org1/y above fair share (nvidia.com/gpu 8/4)"]
        .assert_eq(&d.evictions[0].message);
}

#[test]
fn victims_that_free_one_leaf_beat_a_scattered_set() {
    // Two leaf groups of two nodes, all full with a's 8-GPU jobs. The two
    // most recently started are on different leaves (n1, n2). b's 2-node
    // gang could use them, but a set freeing one whole leaf is chosen.
    let names = ["n0", "n1", "n2", "n3"];
    let ns = nodes(4);
    let spec = rail_optimized(
        &names,
        &RailOptimized {
            nodes_per_group: 2,
            ..RailOptimized::default()
        },
    );
    let inputs: Vec<NodeInput> = ns.iter().map(Node::topology_input).collect();
    let topo = Arc::new(Topology::build(&spec, &inputs).unwrap().unwrap());
    let all: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7];
    let jobs = vec![
        running("a/j0", "a", &[("n0", all)], 400),
        running("a/j1", "a", &[("n1", all)], 50),
        running("a/j2", "a", &[("n2", all)], 40),
        running("a/j3", "a", &[("n3", all)], 300),
        pending("b/pair", "b", 2, 8),
    ];
    let d = run_with(
        ns,
        vec![q("a", 16), q("b", 16)],
        jobs,
        Vec::new(),
        Some(topo),
    );
    let e = evicted(&d);
    assert!(
        e == ["a/j0-0", "a/j1-0"] || e == ["a/j2-0", "a/j3-0"],
        "one leaf freed, got {e:?}"
    );
    // The cheaper of the two leaves: less work lost (j2 + j3: 340 min
    // against j0 + j1: 450 min).
    assert_eq!(e, ["a/j2-0", "a/j3-0"]);
}

#[test]
fn preemption_inside_a_queue_by_priority_only() {
    // Same queue: a priority-10 job is evicted for a priority-100 job; an
    // equal-priority job is never a victim. Built as the loader builds them:
    // priority 100 is not preemptible, so it runs only within quota, and
    // only non-preemptible work counts against it (8 + 8 <= 16).
    let low = running("a/low", "a", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 100).with_priority(10);
    let peer = running("a/peer", "a", &[("n1", &[0, 1, 2, 3, 4, 5, 6, 7])], 5).with_priority(100);
    let urgent = pending("a/urgent", "a", 1, 8).with_priority(100);
    assert!(!peer.preemptible && !urgent.preemptible && low.preemptible);
    let d = run(nodes(2), vec![q("a", 16)], vec![low, peer, urgent]);
    assert_eq!(evicted(&d), ["a/low-0"]);
    expect!["preempted by a/urgent (priority 100 > 10) in queue a"]
        .assert_eq(&d.evictions[0].message);
}

/// A plan that needs no victims of its own (the room an earlier plan of
/// the cycle freed is enough) says how many pods it waits for: those
/// leaving its nodes.
#[test]
fn a_plan_on_room_another_plan_freed_waits_for_the_pods_leaving() {
    let jobs = vec![
        running("a/big", "a", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 100),
        running("a/other", "a", &[("n1", &[0, 1, 2, 3, 4, 5, 6, 7])], 100),
        pending("a/one", "a", 1, 4).with_priority(10),
        pending("a/two", "a", 1, 4).with_priority(10),
    ];
    let d = run(nodes(2), vec![q("a", 16)], jobs);
    // One 8-GPU job goes for both: the second gang needs no victims.
    assert_eq!(d.evictions.len(), 1, "{:?}", evicted(&d));
    let node = d.evictions[0].node.to_string();
    let mut waits: Vec<String> = d
        .pending
        .iter()
        .map(|p| format!("{}: {}", p.job, p.message))
        .collect();
    waits.sort();
    assert_eq!(
        waits,
        [
            format!("a/one: waiting for 1 evicted pod(s) to terminate; room reserved on {node}"),
            format!("a/two: waiting for 1 evicted pod(s) to terminate; room reserved on {node}"),
        ]
    );
}

#[test]
fn non_preemptible_jobs_are_never_victims_and_run_within_quota() {
    let mut keep = running("a/keep", "a", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 100);
    keep.preemptible = false;
    let jobs = vec![keep, pending("b/big", "b", 1, 8)];
    let d = run(nodes(1), vec![q("a", 0), q("b", 8)], jobs);
    assert!(d.evictions.is_empty());
    // A non-preemptible job over its queue's quota does not start.
    let mut over = pending("a/over", "a", 1, 8);
    over.preemptible = false;
    let d = run(nodes(1), vec![q("a", 4)], vec![over]);
    assert!(d.binds.is_empty());
    expect!["not preemptible, so it runs only within quota: queue a would have nvidia.com/gpu 0 + 8 > quota 4"].assert_eq(&d.pending[0].message);
}

#[test]
fn a_build_job_preempts_train_work_in_its_queue_at_quota() {
    // The team's quota is 8 and its train job holds all 8 GPUs; a build
    // job (priority 100, not preemptible) needs 8. Only non-preemptible
    // work counts against the quota, so it may run, and preempts.
    let train = running("t/train", "t", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 60).with_priority(50);
    let build = pending("t/build", "t", 1, 8).with_priority(100);
    let d = run(nodes(1), vec![q("t", 8)], vec![train, build.clone()]);
    assert_eq!(evicted(&d), ["t/train-0"]);
    // A second build job would take non-preemptible work above the quota.
    let first = running("t/b1", "t", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 60).with_priority(100);
    let d = run(nodes(2), vec![q("t", 8)], vec![first, build]);
    assert!(d.binds.is_empty() && d.evictions.is_empty());
    expect!["not preemptible, so it runs only within quota: queue t would have nvidia.com/gpu 8 + 8 > quota 8"].assert_eq(&d.pending[0].message);
}

#[test]
fn preemption_policy_never_waits_for_free_room() {
    let low = running("a/low", "a", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 100).with_priority(10);
    let mut polite = pending("a/polite", "a", 1, 8).with_priority(50);
    polite.preempts = false;
    let d = run(nodes(1), vec![q("a", 8)], vec![low.clone(), polite.clone()]);
    assert!(d.evictions.is_empty());
    // With free room it runs as usual.
    let d = run(nodes(2), vec![q("a", 16)], vec![low, polite]);
    assert_eq!(d.binds.len(), 1);
}

#[test]
fn a_queue_at_its_limit_preempts_its_own_lower_priority_job() {
    let low = running("a/low", "a", &[("n0", &[0, 1, 2, 3])], 100).with_priority(10);
    let high = pending("a/high", "a", 1, 4).with_priority(50);
    let limited = QueueSpec::new("a")
        .limit(trainyard_model::Limits::unlimited().cap(trainyard_model::ResourceName::Gpu, 4000));
    let d = run(
        nodes(1),
        vec![limited.clone()],
        vec![low.clone(), high.clone()],
    );
    assert_eq!(evicted(&d), ["a/low-0"]);
    // A victim outside the limited queue frees nothing of its limit.
    let other = running("b/x", "b", &[("n0", &[4, 5, 6, 7])], 100);
    let at_limit = running("a/peer", "a", &[("n0", &[0, 1, 2, 3])], 100).with_priority(50);
    let d = run(
        nodes(1),
        vec![limited, q("b", 0)],
        vec![at_limit, other, high],
    );
    assert!(d.evictions.is_empty());
    assert!(
        d.pending[0].message.starts_with("queue a at limit"),
        "{}",
        d.pending[0].message
    );
}

#[test]
fn a_nominated_job_waits_and_keeps_its_room() {
    // b/big was nominated to n1 a minute ago; n1 is free now. An older
    // pending job of the same queue, tried first, must not take n1.
    let mut big = pending("b/big", "b", 1, 8);
    big.tasks[0].nomination = Some(trainyard_model::Nomination {
        node: "n1".into(),
        since: Timestamp(NOW.0 - MIN),
        gpus: None,
    });
    big.submit_time = Timestamp(NOW.0);
    let mut sneaky = pending("b/sneaky", "b", 1, 8);
    sneaky.submit_time = Timestamp(0);
    let jobs = vec![
        running("a/j0", "a", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 100),
        sneaky,
        big,
    ];
    let d = run(nodes(2), vec![q("a", 8), q("b", 8)], jobs);
    let b: Vec<(String, String)> = d
        .binds
        .iter()
        .map(|b| (b.task.to_string(), b.node.to_string()))
        .collect();
    assert_eq!(b, [("b/big-0".to_string(), "n1".to_string())]);
    assert_eq!(d.pending[0].job, "b/sneaky");
}

#[test]
fn a_nominated_job_whose_victims_cannot_make_its_room_evicts_elsewhere() {
    // b/big was nominated on n0 for 8 GPUs, evicting a/x and a/y there.
    // a/x is terminating; a/y's eviction was refused (a disruption budget)
    // and a/y now counts as no victim. Waiting for a/x would free only 4
    // GPUs: b/big reclaims n1 instead, at once.
    let mut big = pending("b/big", "b", 1, 8);
    big.tasks[0].nomination = Some(trainyard_model::Nomination {
        node: "n0".into(),
        since: Timestamp(NOW.0 - MIN),
        gpus: None,
    });
    let mut x = running("a/x", "a", &[("n0", &[0, 1, 2, 3])], 100);
    x.tasks[0].terminating = true;
    let mut y = running("a/y", "a", &[("n0", &[4, 5, 6, 7])], 100);
    y.preemptible = false;
    let jobs = |y: Job| {
        vec![
            x.clone(),
            y,
            running("a/z", "a", &[("n1", &[0, 1, 2, 3])], 100),
            running("a/w", "a", &[("n1", &[4, 5, 6, 7])], 100),
            big.clone(),
        ]
    };
    let d = run(nodes(2), vec![q("a", 8), q("b", 8)], jobs(y.clone()));
    assert_eq!(evicted(&d), ["a/w-0", "a/z-0"]);
    assert_eq!(d.nominations.len(), 1);
    assert_eq!(d.nominations[0].node.to_string(), "n1");
    // Nominated again elsewhere: nothing to withdraw.
    assert!(d.withdrawals.is_empty(), "{:?}", d.withdrawals);
    // With a/y terminating too, the room is coming: b/big waits.
    y.tasks[0].terminating = true;
    let d = run(nodes(2), vec![q("a", 8), q("b", 8)], jobs(y));
    assert!(d.evictions.is_empty(), "{:?}", evicted(&d));
    // Waiting for its victims, it keeps its nomination.
    assert!(d.withdrawals.is_empty(), "{:?}", d.withdrawals);
    assert!(
        d.pending[0]
            .message
            .starts_with("waiting for 2 evicted pod(s)"),
        "{}",
        d.pending[0].message
    );
}

#[test]
fn a_stale_nomination_never_takes_another_preemptors_devices() {
    // a/early was nominated on n0 devices 0-3 but its bind was taken back,
    // and a/other now runs on devices 0-1. b/late was nominated on devices
    // 4-7 afterwards. a/early comes first in job order; its own devices are
    // no longer free, so it must not take 4-7: b/late binds now.
    let nominated = |id: &str, queue: &str, devs: &[u32]| {
        let mut j = pending(id, queue, 1, 4);
        j.tasks[0].nomination = Some(trainyard_model::Nomination {
            node: "n0".into(),
            since: Timestamp(NOW.0 - MIN),
            gpus: Some(devs.to_vec()),
        });
        j
    };
    let jobs = vec![
        nominated("a/early", "a", &[0, 1, 2, 3]),
        running("a/other", "a", &[("n0", &[0, 1])], 1),
        nominated("b/late", "b", &[4, 5, 6, 7]),
    ];
    let d = run(nodes(1), vec![q("a", 4), q("b", 4)], jobs);
    let b: Vec<(String, String)> = d
        .binds
        .iter()
        .map(|b| (b.task.to_string(), b.node.to_string()))
        .collect();
    assert_eq!(b, [("b/late-0".to_string(), "n0".to_string())]);
    assert_eq!(d.pending[0].job, "a/early");
}

#[test]
fn a_newer_nomination_wins_devices_an_older_one_still_names() {
    // Two minutes ago a/early (one 4-GPU pod) was nominated on n0 devices
    // 0-3. A minute ago a/urgent (priority 10, two 4-GPU pods) took that
    // room back and was nominated on all of n0; a/early's nomination is
    // still there (this cycle withdraws it). Both name free devices now, and
    // a/early comes first in job order: the newer nomination must hold
    // first, so a/urgent binds whole and a/early waits.
    let nominate = |j: &mut Job, ago: i64, devs: &[&[u32]]| {
        for (t, d) in j.tasks.iter_mut().zip(devs) {
            t.nomination = Some(trainyard_model::Nomination {
                node: "n0".into(),
                since: Timestamp(NOW.0 - ago),
                gpus: Some(d.to_vec()),
            });
        }
    };
    let mut early = pending("a/early", "a", 1, 4);
    early.submit_time = Timestamp(0);
    nominate(&mut early, 2 * MIN, &[&[0, 1, 2, 3]]);
    let mut urgent = pending("a/urgent", "a", 2, 4).with_priority(10);
    urgent.submit_time = Timestamp(NOW.0);
    nominate(&mut urgent, MIN, &[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
    let d = run(nodes(1), vec![q("a", 8)], vec![early, urgent]);
    let b: Vec<String> = d.binds.iter().map(|b| b.task.to_string()).collect();
    assert_eq!(b, ["a/urgent-0", "a/urgent-1"]);
    assert_eq!(d.pending.len(), 1);
    assert_eq!(d.pending[0].job, "a/early");
    // Its room went to a/urgent: the drivers clear its nomination.
    assert_eq!(withdrawn(&d), [("a/early-0".to_string(), "n0".to_string())]);
}

#[test]
fn room_held_for_a_nominated_pod_stays_its_own_after_a_failed_try() {
    // A minute ago a/big (priority 10, two 8-GPU pods) was nominated on n0
    // (free, so its room is held) and n1, where its victim a/gone is still
    // terminating. The cycle's try of the gang fails on n1 and rolls back:
    // n0's room must still be a/big's then, so the victims' going is all
    // it waits for. Lost, n0 would look taken by nobody, and a/big would
    // search victims as an ordinary pending gang.
    let mut big = pending("a/big", "a", 2, 8).with_priority(10);
    for (t, node) in big.tasks.iter_mut().zip(["n0", "n1"]) {
        t.nomination = Some(trainyard_model::Nomination {
            node: node.into(),
            since: Timestamp(NOW.0 - MIN),
            gpus: Some((0..8).collect()),
        });
    }
    let mut gone = running("a/gone", "a", &[("n1", &[0, 1, 2, 3, 4, 5, 6, 7])], 100);
    gone.tasks[0].terminating = true;
    let low = running("a/low", "a", &[("n2", &[0, 1, 2, 3, 4, 5, 6, 7])], 100);
    let d = run(nodes(3), vec![q("a", 24)], vec![gone, low, big]);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
    assert!(d.evictions.is_empty(), "{:?}", evicted(&d));
    assert_eq!(d.pending.len(), 1);
    assert_eq!(d.pending[0].job, "a/big");
    assert!(
        d.pending[0]
            .message
            .starts_with("waiting for 1 evicted pod(s)"),
        "{}",
        d.pending[0].message
    );
    assert!(d.withdrawals.is_empty(), "{:?}", d.withdrawals);
}

#[test]
fn a_nomination_whose_search_finds_nothing_is_withdrawn() {
    // a/late was nominated on n0, but a/x (its own priority, so no victim)
    // holds n0 now, and n1 is full too: its victim search finds nothing,
    // and the cycle withdraws the nomination, as kube-scheduler clears a
    // pod's nominatedNodeName when its preemption finds nothing.
    let mut late = pending("a/late", "a", 1, 8);
    late.tasks[0].nomination = Some(trainyard_model::Nomination {
        node: "n0".into(),
        since: Timestamp(NOW.0 - MIN),
        gpus: None,
    });
    let jobs = vec![
        running("a/x", "a", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 100),
        running("a/y", "a", &[("n1", &[0, 1, 2, 3, 4, 5, 6, 7])], 100),
        late,
    ];
    let d = run(nodes(2), vec![q("a", 16)], jobs);
    assert!(d.binds.is_empty() && d.evictions.is_empty(), "{d:?}");
    assert_eq!(withdrawn(&d), [("a/late-0".to_string(), "n0".to_string())]);
}

#[test]
fn a_nomination_keeps_its_held_room_or_a_node_where_a_pod_is_going() {
    let nominate = |j: &mut Job, t: usize, node: &str| {
        j.tasks[t].nomination = Some(trainyard_model::Nomination {
            node: node.into(),
            since: Timestamp(NOW.0 - MIN),
            gpus: None,
        });
    };
    let full = |id: &str, node: &str| running(id, "a", &[(node, &[0, 1, 2, 3, 4, 5, 6, 7])], 100);
    // a/big's first pod has its room held on free n0; the second's room on
    // n1 went to a/x (its own priority: no victim). The gang cannot be
    // placed: the second nomination is withdrawn, the held one kept.
    let mut big = pending("a/big", "a", 2, 8);
    nominate(&mut big, 0, "n0");
    nominate(&mut big, 1, "n1");
    let d = run(nodes(2), vec![q("a", 16)], vec![full("a/x", "n1"), big]);
    assert!(d.binds.is_empty() && d.evictions.is_empty(), "{d:?}");
    assert_eq!(withdrawn(&d), [("a/big-1".to_string(), "n1".to_string())]);
    // a/late's room on n0 is half terminating (a/t), half a/x's: it does
    // not wait for its victims (their going is not enough) and finds none
    // to take, but a pod on its node is going, so it keeps its nomination.
    let half_going = |ago: i64| {
        let mut late = pending("a/late", "a", 1, 8);
        late.tasks[0].nomination = Some(trainyard_model::Nomination {
            node: "n0".into(),
            since: Timestamp(NOW.0 - ago),
            gpus: None,
        });
        let mut t = running("a/t", "a", &[("n0", &[0, 1, 2, 3])], 100);
        t.tasks[0].terminating = true;
        let x = running("a/x", "a", &[("n0", &[4, 5, 6, 7])], 100);
        let d = run(
            nodes(2),
            vec![q("a", 16)],
            vec![t, x, full("a/y", "n1"), late],
        );
        assert!(d.binds.is_empty() && d.evictions.is_empty(), "{d:?}");
        d
    };
    let d = half_going(MIN);
    let p = d
        .pending
        .iter()
        .find(|p| p.job == "a/late")
        .expect("a/late pending");
    assert!(!p.message.starts_with("waiting for"), "{}", p.message);
    assert!(d.withdrawals.is_empty(), "{:?}", d.withdrawals);
    // The same nomination made ten minutes ago has lapsed (timeout 300 s):
    // it holds and waits for nothing, so it is withdrawn even though a pod
    // on its node is going.
    let d = half_going(10 * MIN);
    assert_eq!(withdrawn(&d), [("a/late-0".to_string(), "n0".to_string())]);
}

// ---- many cycles, nothing else changing -----------------------------------

/// Room a reclaim freed beyond its reclaimer's need is kept, for the rest
/// of the cycle, from gangs that take a queue above its fair share, when
/// the victims' queue could take it back within its own share: else the
/// next cycle would reclaim it back, and the two would alternate (the
/// period-two loop of docs/preemption.md, case `cdc5d1a0…` in
/// `preemption.proptest-regressions`).
#[test]
fn room_a_reclaim_freed_is_kept_from_queues_above_their_share() {
    // Weights 3, 3, 2 on 16 GPUs: fair shares a 6, b 6, c 4 (no quotas,
    // so no floor protects b). b runs 8 GPUs on n0 (above its share); a's 2-GPU job (a at 4/6) reclaims them, leaving 6 GPUs of
    // n0 to others once the pod is gone.
    let cycle = |b_small: bool| {
        let mut jobs = vec![
            running("a/run", "a", &[("n1", &[0, 1, 2, 3])], 100),
            running("b/big", "b", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 100),
            running("c/run", "c", &[("n1", &[4, 5, 6])], 100),
            running("c/low", "c", &[("n1", &[7])], 100).with_priority(-1),
            pending("a/small", "a", 1, 2),
            pending("c/more", "c", 1, 2),
        ];
        // c/more outranks c/low: it may preempt, so it searches.
        if b_small {
            jobs.push(pending("b/small", "b", 1, 4));
        }
        let w = |name: &str, weight: u32| QueueSpec::new(name).weight(weight);
        run(nodes(2), vec![w("a", 3), w("b", 3), w("c", 2)], jobs)
    };
    let nominated = |d: &Decisions| -> Vec<String> {
        let mut v: Vec<String> = d
            .nominations
            .iter()
            .map(|n| format!("{}@{}", n.task, n.node))
            .collect();
        v.sort();
        v
    };
    // b has a 4-GPU job that fits its share: c (at its fair share 4
    // already) gets nothing of the 6 GPUs; the next cycle walks b, below
    // its share, first.
    let d = cycle(true);
    assert_eq!(evicted(&d), ["b/big-0"]);
    assert_eq!(nominated(&d), ["a/small-0@n0"]);
    let c = d
        .pending
        .iter()
        .find(|p| p.job == "c/more")
        .expect("c/more pending");
    assert!(
        c.message.starts_with("gang needs 2 × nvidia.com/gpu"),
        "{}",
        c.message
    );
    // Without a job b could run within its share, nothing would reclaim
    // the room back: c is nominated onto it.
    let d = cycle(false);
    assert_eq!(evicted(&d), ["b/big-0"]);
    assert_eq!(nominated(&d), ["a/small-0@n0", "c/more-0@n0"]);
}

mod cycles {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;
    use trainyard_model::{Job, Nomination, QueueSpec, QueueTree, Snapshot, TaskState, Timestamp};
    use trainyard_sched::{Config, Decisions, schedule};

    use super::{gpus, nodes, q};

    /// One job: queue index, pods, GPUs per pod, priority, minMember share.
    type JobSpec = (usize, usize, u64, i32, bool);

    fn build(specs: &[JobSpec]) -> Vec<Job> {
        specs
            .iter()
            .enumerate()
            .map(|(i, (queue, pods, k, prio, elastic))| {
                let mut j = Job::gang(
                    format!("q{queue}/j{i:02}"),
                    format!("q{queue}"),
                    vec![gpus(*k); *pods],
                );
                j = j.with_priority(*prio);
                j.submit_time = Timestamp(i as i64 * 1000);
                if *elastic && *pods > 1 {
                    j.min_member = 1;
                }
                j
            })
            .collect()
    }

    /// Applies a cycle's decisions, as a cluster with instant evictions would.
    fn apply(jobs: &mut [Job], d: &Decisions, now: Timestamp) {
        let mut by_task: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for (j, job) in jobs.iter().enumerate() {
            for (t, task) in job.tasks.iter().enumerate() {
                by_task.insert(Box::leak(task.name.clone().into_boxed_str()), (j, t));
            }
        }
        let evicted: BTreeSet<&str> = d.evictions.iter().map(|e| e.task.name.as_str()).collect();
        for e in &d.evictions {
            let (j, t) = by_task[e.task.name.as_str()];
            let job = &mut jobs[j];
            // A gang that drops below its minimum restarts whole.
            let left = job
                .tasks
                .iter()
                .filter(|x| !x.is_pending() && !evicted.contains(x.name.as_str()))
                .count() as u32;
            if left < job.min_member {
                for x in &mut job.tasks {
                    x.state = TaskState::Pending;
                    x.started = None;
                }
            } else {
                job.tasks[t].state = TaskState::Pending;
                job.tasks[t].started = None;
            }
        }
        for b in &d.binds {
            let (j, t) = by_task[b.task.name.as_str()];
            let task = &mut jobs[j].tasks[t];
            task.state = TaskState::Bound {
                node: b.node.to_string(),
                gpus: Some(b.gpus.clone()),
            };
            task.started = Some(now);
            task.nomination = None;
        }
        for n in &d.nominations {
            let (j, t) = by_task[n.task.name.as_str()];
            jobs[j].tasks[t].nomination = Some(Nomination {
                node: n.node.to_string(),
                since: now,
                gpus: Some(n.gpus.clone()),
            });
        }
        for w in &d.withdrawals {
            let (j, t) = by_task[w.task.name.as_str()];
            jobs[j].tasks[t].nomination = None;
        }
    }

    fn state_of(jobs: &[Job]) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = jobs
            .iter()
            .flat_map(|j| j.tasks.iter())
            .filter_map(|t| match (&t.state, &t.nomination) {
                (TaskState::Bound { node, .. }, _) => Some((t.name.clone(), node.clone())),
                (TaskState::Pending, Some(n)) => {
                    Some((t.name.clone(), format!("nominated {}", n.node)))
                }
                (TaskState::Pending, None) => None,
            })
            .collect();
        v.sort();
        v
    }

    /// The quota floor protects a victim gang: q0 (quota 9) runs two
    /// 8-GPU jobs on 16 GPUs (fair share 12); q2 (fair share 4) waits for a
    /// 4-GPU pod. Evicting either job would take q0 to 8 < 9, so nothing is
    /// evicted.
    #[test]
    fn quota_floor_protects_a_victim_gang() {
        let tree = QueueTree::build(vec![q("q0", 9), q("q2", 7)]).unwrap();
        let mut jobs = build(&[(0, 1, 8, 0, false), (0, 1, 8, 0, false)]);
        for (j, node) in jobs.iter_mut().zip(["n0", "n1"]) {
            j.tasks[0].state = TaskState::Bound {
                node: node.into(),
                gpus: Some((0..8).collect()),
            };
            j.tasks[0].started = Some(Timestamp(0));
        }
        let mut wants = Job::gang("q2/small", "q2", vec![gpus(4)]);
        wants.submit_time = Timestamp(1);
        jobs.push(wants);
        let snap = Snapshot::new(nodes(2), tree, jobs);
        let d = schedule(&snap, &Config::default(), Timestamp(3_600_000));
        assert!(d.evictions.is_empty());
        let fair: Vec<u64> = d.queues.iter().map(|r| r.fair_share.gpu).collect();
        assert_eq!(fair, [12000, 4000]);
    }

    static EVICTIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// The property below must exercise evictions, or it proves nothing.
    #[test]
    fn the_random_cases_do_evict() {
        reclaim_and_preemption_settle();
        assert!(
            EVICTIONS.load(std::sync::atomic::Ordering::Relaxed) >= 20,
            "only {} evictions over all cases",
            EVICTIONS.load(std::sync::atomic::Ordering::Relaxed)
        );
    }

    proptest! {
        // A fixed seed, as for the quiet-cluster property: random seeds
        // find, about once in 3,000 cases, cases of docs/preemption.md's
        // known limits (a nominated gang that does not bind in the next
        // cycle; a queue left more than a gang below its fair share), and
        // a test that fails at random says nothing about the change that
        // ran it. Change the seed here (or raise PROPTEST_CASES) to
        // explore other cases.
        #![proptest_config(ProptestConfig {
            cases: 64,
            // `PROPTEST_RANDOM=1` explores random seeds, `PROPTEST_SEED=N`
            // runs seed N (`tests/common`).
            rng_seed: crate::common::seed(0x7365_7474_6c65),
            ..ProptestConfig::default()
        })]

        #[test]
        fn reclaim_and_preemption_settle(
            node_count in 2usize..5,
            quotas in proptest::collection::vec(0u64..17, 3),
            with_quotas in any::<bool>(),
            specs in proptest::collection::vec(
                (0usize..3, 1usize..4, prop_oneof![Just(1u64), Just(2), Just(4), Just(8)], 0i32..3, any::<bool>()),
                2..10,
            ),
        ) {
            // With quotas, or with over-quota weights only (quota 0).
            let queues: Vec<QueueSpec> = quotas
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    if with_quotas {
                        q(&format!("q{i}"), *g)
                    } else {
                        QueueSpec::new(format!("q{i}")).weight((*g % 4 + 1) as u32)
                    }
                })
                .collect();
            let tree = QueueTree::build(queues).unwrap();
            // Queue 0 arrives first and fills what it can; the other queues
            // arrive at cycle 3, and priority-2 jobs of every queue at cycle
            // 6: reclaim, then preemption.
            let all = build(&specs);
            let arrival = |s: &JobSpec| if s.3 == 2 { 6 } else if s.0 == 0 { 0 } else { 3 };
            let mut jobs: Vec<Job> = Vec::new();
            let mut history: Vec<(Vec<(String, String)>, bool)> = Vec::new();
            let mut last: Option<Decisions> = None;
            let mut quiet_since = 0;
            let mut evictions = 0usize;
            for cycle in 0..40i64 {
                let now = Timestamp(1_000_000 + cycle * 60_000);
                for (spec, job) in specs.iter().zip(&all) {
                    if arrival(spec) == cycle {
                        jobs.push(job.clone());
                    }
                }
                let snap = Snapshot::new(nodes(node_count), tree.clone(), jobs.clone());
                let d = schedule(&snap, &Config::default(), now);
                if std::env::var("TRACE").is_ok() { eprintln!("cycle {cycle}: binds {:?}\n  evict {:?}\n  nom {:?}\n  pending {:?}", d.binds.iter().map(|b| format!("{}@{}{:?}", b.task, b.node, b.gpus)).collect::<Vec<_>>(), d.evictions.iter().map(|e| format!("{}@{} {}", e.task, e.node, e.message)).collect::<Vec<_>>(), d.nominations.iter().map(|e| format!("{}@{}{:?}", e.task, e.node, e.gpus)).collect::<Vec<_>>(), d.pending.iter().map(|p| format!("{} {}", p.job, p.message)).collect::<Vec<_>>()); }
                // Every preemptor of the previous cycle binds now (its
                // victims are gone and its room was reserved), unless the
                // cycle takes that bind back for a gang with a better claim
                // (reason `yielded`; a bind of this cycle is never evicted).
                if let Some(prev) = &last {
                    let nominated: BTreeSet<&str> = prev.nominations.iter().map(|n| n.task.name.as_str()).collect();
                    let bound: BTreeSet<&str> = d.binds.iter().map(|b| b.task.name.as_str()).collect();
                    for t in &nominated {
                        let yielded = d.pending.iter().any(|p| {
                            t.starts_with(p.job.as_str())
                                && matches!(p.reason, trainyard_sched::PendingReason::Yielded { .. })
                        });
                        prop_assert!(bound.contains(t) || yielded, "cycle {cycle}: nominated {t} did not bind: {:?}", d.pending.iter().filter(|p| t.starts_with(p.job.as_str())).map(|p| p.message.clone()).collect::<Vec<_>>());
                    }
                }
                let evicting = !d.evictions.is_empty();
                evictions += d.evictions.len();
                apply(&mut jobs, &d, now);
                let state = state_of(&jobs);
                // No state repeats with evictions in between.
                let mut evictions_since = evicting;
                for (old, ev) in history.iter().rev() {
                    if evictions_since && *old == state {
                        prop_assert!(false, "cycle {cycle}: state repeats after evictions: {state:?}");
                    }
                    evictions_since |= *ev;
                }
                history.push((state, evicting));
                if evicting || !d.binds.is_empty() {
                    quiet_since = cycle + 1;
                }
                EVICTIONS.fetch_add(d.evictions.len(), std::sync::atomic::Ordering::Relaxed);
                last = Some(d);
            }
            prop_assert!(quiet_since < 40, "still changing after 40 cycles ({evictions} evictions)");
            // Within one gang of fair share: a queue with pending work has at
            // least its fair share minus one gang, the larger of its own
            // pending gangs and the running gangs of queues above their
            // share (a gang is evicted whole or not at all). Checked without
            // quotas: a quota floor may rightly keep a victim gang running
            // (see `quota_floor_can_keep_a_queue_below_its_share`).
            let d = last.unwrap();
            if with_quotas {
                return Ok(());
            }
            let over: BTreeSet<&str> = d
                .queues
                .iter()
                .filter(|r| r.allocated.gpu > r.fair_share.gpu)
                .map(|r| r.queue.as_str())
                .collect();
            let running_gang = jobs
                .iter()
                .filter(|j| over.contains(j.queue.as_str()))
                .map(|j| j.tasks.iter().filter(|t| !t.is_pending()).map(|t| t.requests.gpu).sum::<u64>())
                .max()
                .unwrap_or(0);
            for row in &d.queues {
                let pending_gang = jobs
                    .iter()
                    .filter(|j| j.queue == row.queue && j.tasks.iter().any(|t| t.is_pending()))
                    .map(|j| j.tasks.iter().map(|t| t.requests.gpu).sum::<u64>())
                    .max();
                if let Some(g) = pending_gang {
                    let g = g.max(running_gang);
                    prop_assert!(
                        row.allocated.gpu + g >= row.fair_share.gpu,
                        "queue {} allocated {} + gang {} < fair {}",
                        row.queue, row.allocated.gpu, g, row.fair_share.gpu
                    );
                }
            }
        }
    }
}
