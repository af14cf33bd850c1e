//! Consolidation through `schedule`, on random clusters: the invariants of
//! docs/consolidation.md recomputed from the snapshot and the decisions
//! (never from the core's own ledger). Times are milliseconds.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use trainyard_model::{
    Job, Node, Nomination, QueueSpec, QueueTree, Resources, Snapshot, TaskState, Timestamp,
};
use trainyard_sched::{Config, Decisions, EvictionKind, schedule};

const GI: u64 = 1 << 30;
const NOW: Timestamp = Timestamp(10 * 3_600_000);
const MIN: i64 = 60_000;

fn gpus(k: u64) -> Resources {
    Resources::new(1000, GI, 0).with_gpus(k)
}

fn config() -> Config {
    let mut c = Config::default();
    c.preemption.reclaim = false;
    c.preemption.preempt = false;
    c.consolidation.enabled = true;
    c.consolidation.max_moved_jobs = 3;
    c.consolidation.max_gangs = 2;
    c
}

fn queues() -> QueueTree {
    QueueTree::build(vec![QueueSpec::new("a"), QueueSpec::new("b")]).expect("two queues")
}

/// A cluster of `nodes` 8-GPU nodes where the running jobs (GPUs per pod,
/// pods, queue) sit where the core placed them one by one (so devices are
/// consistent), each started some minutes ago and owned by a controller.
fn filled(nodes: usize, running: &[(u64, usize, bool, i64)]) -> Snapshot {
    let nodes: Vec<Node> = (0..nodes)
        .map(|i| Node::new(format!("n{i}"), 128_000, 1024 * GI, 8))
        .collect();
    let mut jobs: Vec<Job> = Vec::new();
    for (i, &(k, pods, in_a, ago)) in running.iter().enumerate() {
        let mut j = Job::gang(
            format!("ns/run-{i:02}"),
            if in_a { "a" } else { "b" },
            vec![gpus(k); pods],
        );
        j.submit_time = Timestamp(NOW.0 - ago * MIN - MIN);
        let snap = Snapshot::new(nodes.clone(), queues(), {
            let mut all = jobs.clone();
            all.push(j.clone());
            all
        });
        let mut c = Config::default();
        // Spread: the running jobs scatter the free room.
        c.scoring.gpu.strategy = trainyard_sched::GpuStrategy::Spread;
        let d = schedule(&snap, &c, Timestamp(NOW.0 - ago * MIN));
        let binds: Vec<_> = d.binds.iter().filter(|b| b.job.as_str() == j.id).collect();
        if binds.len() != pods {
            continue;
        }
        for (t, b) in j.tasks.iter_mut().zip(binds) {
            t.state = TaskState::Bound {
                node: b.node.to_string(),
                gpus: Some(b.gpus.clone()),
            };
            t.started = Some(Timestamp(NOW.0 - ago * MIN));
            t.controller = Some(format!("ReplicaSet/run-{i:02}"));
        }
        jobs.push(j);
    }
    Snapshot::new(nodes, queues(), jobs)
}

/// GPUs of the bound (or placed) pods per queue.
fn per_queue(s: &Snapshot, d: Option<&Decisions>) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    let evicted: BTreeSet<String> = d
        .map(|d| d.evictions.iter().map(|e| e.task.to_string()).collect())
        .unwrap_or_default();
    let moved: BTreeSet<String> = d
        .map(|d| {
            d.moves
                .iter()
                .flat_map(|m| m.pods.iter().map(|p| p.task.to_string()))
                .collect()
        })
        .unwrap_or_default();
    for j in &s.jobs {
        for t in &j.tasks {
            let name = t.key.to_string();
            let here = !t.is_pending() && (!evicted.contains(&name) || moved.contains(&name));
            let bound_now = d.is_some_and(|d| d.binds.iter().any(|b| b.task == t.key));
            if here || bound_now {
                *out.entry(j.queue.clone()).or_default() += t.requests.gpu;
            }
        }
    }
    out
}

/// Device use per node after the cycle, as the decisions leave it: pods
/// that stay, binds, the moved jobs' new places and the nominations.
fn devices_after(s: &Snapshot, d: &Decisions) -> BTreeMap<String, Vec<u32>> {
    let moved: BTreeSet<String> = d
        .moves
        .iter()
        .flat_map(|m| m.pods.iter().map(|p| p.task.to_string()))
        .collect();
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for j in &s.jobs {
        for t in &j.tasks {
            if let TaskState::Bound {
                node,
                gpus: Some(g),
            } = &t.state
                && !moved.contains(&t.key.to_string())
            {
                out.entry(node.clone()).or_default().extend(g);
            }
        }
    }
    for b in &d.binds {
        out.entry(b.node.to_string()).or_default().extend(&b.gpus);
    }
    for m in &d.moves {
        for p in &m.pods {
            out.entry(p.to.to_string()).or_default().extend(&p.gpus);
        }
    }
    out
}

/// The world after the cycle's moves: a moved job's pods run on their new
/// nodes (as its replacements will), moved at `NOW`; nominated pods carry
/// their nominations; evicted pods of other kinds are gone.
fn after(s: &Snapshot, d: &Decisions) -> Snapshot {
    let mut s2 = s.clone();
    for job in &mut s2.jobs {
        let j = std::sync::Arc::make_mut(job);
        if let Some(m) = d.moves.iter().find(|m| m.job.as_str() == j.id) {
            for t in &mut j.tasks {
                if let Some(p) = m.pods.iter().find(|p| p.task == t.key) {
                    t.state = TaskState::Bound {
                        node: p.to.to_string(),
                        gpus: Some(p.gpus.clone()),
                    };
                    t.started = Some(NOW);
                }
            }
            j.moved_at = Some(NOW);
        }
        for t in &mut j.tasks {
            if let Some(n) = d.nominations.iter().find(|n| n.task == t.key) {
                t.nomination = Some(Nomination {
                    node: n.node.to_string(),
                    since: NOW,
                    gpus: Some(n.gpus.clone()),
                });
            }
        }
    }
    s2
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// A cycle that only consolidates (reclaim and preemption off) lowers
    /// no queue's allocation, moves whole jobs only, gives every moved pod
    /// a place, never puts two pods on one device, nominates each helped
    /// gang, and the next cycle (within `noMoveSeconds`) moves none of the
    /// jobs it moved.
    #[test]
    fn consolidation_keeps_allocations_and_moves_whole_jobs_once(
        nodes in 2usize..6,
        running in prop::collection::vec((1u64..4, 1usize..3, any::<bool>(), 5i64..300), 3..14),
        gang in (50u64..=100, 1usize..3, any::<bool>()),
    ) {
        let mut s = filled(nodes, &running);
        // The gang asks for a share of the free GPUs (so that it often fits
        // in total and not on any node).
        let (pct, pods, in_a) = gang;
        let used: u64 = s.jobs.iter().flat_map(|j| j.tasks.iter()).map(|t| t.requests.gpu).sum::<u64>() / 1000;
        let free = nodes as u64 * 8 - used;
        let k = (free * pct / 100 / pods as u64).clamp(1, 8);
        let mut g = Job::gang("ns/gang", if in_a { "a" } else { "b" }, vec![gpus(k); pods]);
        g.submit_time = Timestamp(NOW.0 - MIN);
        s.jobs.push(std::sync::Arc::new(g));
        let cfg = config();
        let d = schedule(&s, &cfg, NOW);

        // Every eviction is a move's, and every moved job moves whole.
        for e in &d.evictions {
            prop_assert_eq!(e.kind, EvictionKind::Consolidate);
            prop_assert!(d.moves.iter().any(|m| m.job == e.job && m.pods.iter().any(|p| p.task == e.task)));
        }
        for m in &d.moves {
            let job = s.jobs.iter().find(|j| j.id == m.job.as_str()).expect("moved job exists");
            let bound: BTreeSet<String> = job.tasks.iter().filter(|t| !t.is_pending()).map(|t| t.key.to_string()).collect();
            let moved: BTreeSet<String> = m.pods.iter().map(|p| p.task.to_string()).collect();
            prop_assert_eq!(&bound, &moved, "{} moves whole", m.job);
            let evicted: BTreeSet<String> = d.evictions.iter().filter(|e| e.job == m.job).map(|e| e.task.to_string()).collect();
            prop_assert_eq!(&evicted, &moved);
            // The gang it made room for is nominated, every pod of its minimum.
            let noms = d.nominations.iter().filter(|n| n.job == m.for_job).count();
            prop_assert!(noms >= 1, "{} nominated", m.for_job);
        }
        // No moved pod lands on a node a moved job leaves: that room is
        // not free until the moved pods are gone.
        let left: BTreeSet<&str> = d.moves.iter().flat_map(|m| m.pods.iter().map(|p| p.from.as_str())).collect();
        for m in &d.moves {
            for p in &m.pods {
                prop_assert!(!left.contains(p.to.as_str()), "{} moved onto {}, which a moved job leaves", m.job, p.to);
            }
        }
        // No queue loses allocation.
        let before = per_queue(&s, None);
        let later = per_queue(&s, Some(&d));
        for (q, g) in &before {
            prop_assert!(later.get(q).copied().unwrap_or(0) >= *g, "queue {} lost allocation", q);
        }
        // Devices: none held twice (the nominated gang waits for moved
        // pods to leave, so its devices may be theirs until then).
        for (node, devs) in devices_after(&s, &d) {
            let distinct: BTreeSet<u32> = devs.iter().copied().collect();
            prop_assert_eq!(distinct.len(), devs.len(), "a device held twice on {}", node);
            prop_assert!(distinct.iter().all(|&g| g < 8));
        }
        // The next cycle moves none of them again.
        if !d.moves.is_empty() {
            let s2 = after(&s, &d);
            let d2 = schedule(&s2, &cfg, Timestamp(NOW.0 + MIN));
            for m in &d2.moves {
                prop_assert!(!d.moves.iter().any(|m1| m1.job == m.job), "{} moved twice", m.job);
            }
        }
    }
}

/// With consolidation off, the same case moves nothing.
#[test]
fn off_by_default() {
    let mut s = filled(2, &[(2, 1, false, 10), (2, 1, false, 120)]);
    let mut g = Job::gang("ns/gang", "a", vec![gpus(8)]);
    g.submit_time = Timestamp(NOW.0 - MIN);
    s.jobs.push(std::sync::Arc::new(g));
    let mut c = Config::default();
    c.preemption.reclaim = false;
    let d = schedule(&s, &c, NOW);
    assert!(d.moves.is_empty() && d.evictions.is_empty());
    let d = schedule(&s, &config(), NOW);
    assert_eq!(d.moves.len(), 1, "{:?}", d.pending);
    assert_eq!(d.moves[0].job.as_str(), "ns/run-00", "less work lost");
}
