//! Reclaim and preemption through `schedule`: who is evicted, why, and
//! where the preemptor is nominated. Times are milliseconds; `NOW` is 10 h.

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
    let s = Snapshot {
        nodes,
        queues: QueueTree::build(queues).unwrap(),
        jobs,
        external,
        topology,
    };
    schedule(&s, &Config::default(), NOW)
}

fn evicted(d: &Decisions) -> Vec<String> {
    let mut v: Vec<String> = d.evictions.iter().map(|e| e.task.clone()).collect();
    v.sort();
    v
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
    assert_eq!(
        d.evictions[0].message,
        "reclaimed for b/big (b): a above fair share (nvidia.com/gpu 16/8)"
    );
    assert_eq!(
        d.pending[0].message,
        "waiting for 2 evicted pod(s) to terminate; room reserved on n1"
    );
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
    assert!(d.pending[0].message.starts_with("gang needs 8 × nvidia.com/gpu"));
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
    assert!(d.evictions[0].message.ends_with("; elastic pod above minMember 2"));
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
    assert_eq!(
        d.evictions[0].message,
        "reclaimed for x/small (org1/x): org1/y above fair share (nvidia.com/gpu 8/4)"
    );
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
    let inputs: Vec<NodeInput> = ns
        .iter()
        .map(|n| NodeInput {
            name: &n.name,
            labels: &n.labels,
            gpus: 8,
        })
        .collect();
    let topo = Arc::new(Topology::build(&spec, &inputs).unwrap().unwrap());
    let all: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7];
    let jobs = vec![
        running("a/j0", "a", &[("n0", all)], 400),
        running("a/j1", "a", &[("n1", all)], 50),
        running("a/j2", "a", &[("n2", all)], 40),
        running("a/j3", "a", &[("n3", all)], 300),
        pending("b/pair", "b", 2, 8),
    ];
    let d = run_with(ns, vec![q("a", 16), q("b", 16)], jobs, Vec::new(), Some(topo));
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
    // equal-priority job is never a victim.
    let mut low = running("a/low", "a", &[("n0", &[0, 1, 2, 3, 4, 5, 6, 7])], 100);
    low.priority = 10;
    let mut peer = running("a/peer", "a", &[("n1", &[0, 1, 2, 3, 4, 5, 6, 7])], 5);
    peer.priority = 100;
    let mut urgent = pending("a/urgent", "a", 1, 8);
    urgent.priority = 100;
    let d = run(nodes(2), vec![q("a", 16)], vec![low, peer, urgent]);
    assert_eq!(evicted(&d), ["a/low-0"]);
    assert_eq!(
        d.evictions[0].message,
        "preempted by a/urgent (priority 100 > 10) in queue a"
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
    assert_eq!(
        d.pending[0].message,
        "not preemptible, so it runs only within quota: queue a would have nvidia.com/gpu 0 + 8 > quota 4"
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
    let b: Vec<(String, String)> = d.binds.iter().map(|b| (b.task.clone(), b.node.clone())).collect();
    assert_eq!(b, [("b/big-0".to_string(), "n1".to_string())]);
    assert_eq!(d.pending[0].job, "b/sneaky");
}
