use super::*;
use expect_test::expect;
use proptest::prelude::*;
use std::collections::BTreeSet;

use trainyard_model::{Limits, QueueSpec, ResourceName, SubGroup, Task};

mod reserve;

const GI: u64 = 1 << 30;

fn gpu_task(gpus: u64) -> Resources {
    Resources::new(1000, GI, 0).with_gpus(gpus)
}

fn snapshot(nodes: Vec<Node>, queues: Vec<QueueSpec>, jobs: Vec<Job>) -> Snapshot {
    Snapshot::new(nodes, QueueTree::build(queues).unwrap(), jobs)
}

fn run(s: &Snapshot) -> Decisions {
    schedule(s, &Config::default(), Timestamp(0))
}

fn bound_jobs(d: &Decisions) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for b in &d.binds {
        *m.entry(b.job.to_string()).or_default() += 1;
    }
    m
}

#[test]
fn gang_that_fits_only_partially_binds_nothing() {
    let nodes = (0..2)
        .map(|i| Node::new(format!("n{i}"), 64_000, 512 * GI, 8))
        .collect();
    let big = Job::gang("ml/big", "q", vec![gpu_task(8); 3]);
    let small = Job::gang("ml/small", "q", vec![gpu_task(4)]);
    let d = run(&snapshot(
        nodes,
        vec![QueueSpec::new("q")],
        vec![big, small],
    ));
    let b = bound_jobs(&d);
    assert_eq!(b.get("ml/big"), None, "no partial gang");
    assert_eq!(
        b.get("ml/small"),
        Some(&1),
        "smaller job behind it still runs"
    );
    let p = &d.pending[0];
    assert_eq!(p.job, "ml/big");
    assert!(
        p.message.starts_with(
            "gang needs 24 × nvidia.com/gpu in 3 pod(s); 2 placed, then pod ml/big-2 did not fit"
        ),
        "{}",
        p.message
    );
}

#[test]
fn repeated_failing_shape_reports_its_own_pods() {
    // The second gang of the same shape hits the failed-shape cache; its
    // reason must still name its own pod and its own totals.
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let a = Job::gang("ml/a", "q", vec![gpu_task(8); 2]);
    let mut b = Job::gang("ml/b", "q", vec![gpu_task(8); 3]);
    b.submit_time = Timestamp(5);
    let d = run(&snapshot(nodes, vec![QueueSpec::new("q")], vec![a, b]));
    assert!(d.binds.is_empty());
    assert!(
        d.pending[0]
            .message
            .starts_with("gang needs 16 × nvidia.com/gpu in 2 pod(s); 1 placed, then pod ml/a-1"),
        "{}",
        d.pending[0].message
    );
    assert!(
        d.pending[1]
            .message
            .starts_with("gang needs 24 × nvidia.com/gpu in 3 pod(s); 1 placed, then pod ml/b-1"),
        "{}",
        d.pending[1].message
    );
}

#[test]
fn whole_gpu_tasks_get_specific_devices() {
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let jobs = vec![
        Job::gang("a/x", "q", vec![gpu_task(3)]),
        Job::gang("a/y", "q", vec![gpu_task(2)]),
    ];
    let d = run(&snapshot(nodes, vec![QueueSpec::new("q")], jobs));
    let gpus: Vec<_> = d
        .binds
        .iter()
        .map(|b| (b.task.name.as_str(), b.gpus.clone()))
        .collect();
    assert_eq!(gpus, vec![("a/x-0", vec![0, 1, 2]), ("a/y-0", vec![3, 4])]);
}

#[test]
fn running_tasks_hold_their_devices() {
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 4)];
    let mut running = Job::gang("a/run", "q", vec![gpu_task(2)]);
    running.tasks[0].state = TaskState::Bound {
        node: "n0".into(),
        gpus: Some(vec![1, 2]),
    };
    let jobs = vec![running, Job::gang("a/new", "q", vec![gpu_task(2)])];
    let d = run(&snapshot(nodes, vec![QueueSpec::new("q")], jobs));
    assert_eq!(d.binds.len(), 1);
    assert_eq!(d.binds[0].gpus, vec![0, 3]);
}

#[test]
fn queue_at_limit_is_reported() {
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let queues = vec![
        QueueSpec::new("team-a"),
        QueueSpec::new("nlp")
            .parent("team-a")
            .limit(Limits::unlimited().cap(ResourceName::Gpu, 4000)),
    ];
    let mut first = Job::gang("a/one", "nlp", vec![gpu_task(4)]);
    first.submit_time = Timestamp(1);
    let mut second = Job::gang("a/two", "nlp", vec![gpu_task(2)]);
    second.submit_time = Timestamp(2);
    let d = run(&snapshot(nodes, queues, vec![first, second]));
    assert_eq!(bound_jobs(&d).get("a/one"), Some(&1));
    expect!["queue team-a/nlp at limit nvidia.com/gpu 4/4 (gang needs 2 more)"]
        .assert_eq(&d.pending[0].message);
}

#[test]
fn gang_above_a_queue_limit_is_flagged_and_adds_no_demand() {
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let queues = vec![
        QueueSpec::new("small").limit(Limits::unlimited().cap(ResourceName::Gpu, 2000)),
        QueueSpec::new("other"),
    ];
    let jobs = vec![
        Job::gang("a/big", "small", vec![gpu_task(4)]),
        Job::gang("b/x", "other", vec![gpu_task(1)]),
    ];
    let d = run(&snapshot(nodes, queues, jobs));
    expect!["gang minimum needs 4 nvidia.com/gpu, above the limit 2 of queue small; it can never run there"].assert_eq(&d.pending[0].message);
    let small = d.queues.iter().find(|q| q.queue == "small").unwrap();
    assert_eq!(small.demand.gpu, 0);
    assert_eq!(small.fair_share.gpu, 0);
}

#[test]
fn drf_example_allocates_three_and_two() {
    // One node with 9 CPUs and 18 GB; A's tasks <1 CPU, 4 GB>, B's <3 CPU, 1 GB>.
    let node = Node::new("n0", 9000, 18 * GI, 0);
    let a: Vec<Job> = (0..6)
        .map(|i| Job::gang(format!("a/{i}"), "a", vec![Resources::new(1000, 4 * GI, 0)]))
        .collect();
    let b: Vec<Job> = (0..6)
        .map(|i| Job::gang(format!("b/{i}"), "b", vec![Resources::new(3000, GI, 0)]))
        .collect();
    let jobs = a.into_iter().chain(b).collect();
    let d = run(&snapshot(
        vec![node],
        vec![QueueSpec::new("a"), QueueSpec::new("b")],
        jobs,
    ));
    let count = |q: &str| d.binds.iter().filter(|x| x.job.starts_with(q)).count();
    assert_eq!((count("a/"), count("b/")), (3, 2));
}

#[test]
fn subgroup_minimums_are_placed_first_and_checked() {
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let mut job = Job::gang("a/ps", "q", vec![gpu_task(1); 4]);
    job.subgroups = vec![
        SubGroup {
            name: "ps".into(),
            min_member: 1,
            topology: Default::default(),
        },
        SubGroup {
            name: "worker".into(),
            min_member: 2,
            topology: Default::default(),
        },
    ];
    job.min_member = 3;
    for (i, t) in job.tasks.iter_mut().enumerate() {
        t.subgroup = Some(if i == 3 { "ps" } else { "worker" }.into());
    }
    let d = run(&snapshot(
        nodes.clone(),
        vec![QueueSpec::new("q")],
        vec![job.clone()],
    ));
    // 3 for the minimum (ps-3 first, then two workers), then the 4th elastically.
    let order: Vec<_> = d.binds.iter().map(|b| b.task.name.as_str()).collect();
    assert_eq!(order, ["a/ps-3", "a/ps-0", "a/ps-1", "a/ps-2"]);

    job.tasks.truncate(3); // no ps pod at all
    let d = run(&snapshot(nodes, vec![QueueSpec::new("q")], vec![job]));
    assert!(d.binds.is_empty());
    expect!["sub-group ps has 0 pod(s), fewer than its minMember 1"]
        .assert_eq(&d.pending[0].message);
}

#[test]
fn elastic_pods_wait_for_other_gangs_minimums() {
    // min 1 of 4 pods × 4 GPUs; another gang needs 8 GPUs; 12 GPUs in total.
    let nodes = vec![
        Node::new("n0", 64_000, 512 * GI, 8),
        Node::new("n1", 64_000, 512 * GI, 4),
    ];
    let mut elastic = Job::gang("a/elastic", "a", vec![gpu_task(4); 4]);
    elastic.min_member = 1;
    let gang = Job::gang("b/gang", "b", vec![gpu_task(8)]);
    let d = run(&snapshot(
        nodes,
        vec![QueueSpec::new("a"), QueueSpec::new("b")],
        vec![elastic, gang],
    ));
    let b = bound_jobs(&d);
    assert_eq!(b.get("b/gang"), Some(&1));
    assert_eq!(b.get("a/elastic"), Some(&1));
    let p = d.pending.iter().find(|p| p.job == "a/elastic").unwrap();
    assert!(
        p.message
            .starts_with("0 elastic pod(s) placed, 3 still pending"),
        "{}",
        p.message
    );
}

#[test]
fn limit_check_uses_the_same_minimum_as_placement() {
    // minMember 1 met by the sub-group's 1-GPU pod; the 16-GPU pod is elastic.
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let mut job = Job::gang("a/sg", "q", vec![gpu_task(16), gpu_task(1)]);
    job.tasks[0].name = "a/sg-a-elastic".into();
    job.tasks[0].key = trainyard_model::TaskKey::named("a/sg-a-elastic");
    job.tasks[1].name = "a/sg-z-min".into();
    job.tasks[1].key = trainyard_model::TaskKey::named("a/sg-z-min");
    job.tasks[1].subgroup = Some("s".into());
    job.subgroups = vec![SubGroup {
        name: "s".into(),
        min_member: 1,
        topology: Default::default(),
    }];
    job.min_member = 1;
    let queues = vec![QueueSpec::new("q").limit(Limits::unlimited().cap(ResourceName::Gpu, 8000))];
    let d = run(&snapshot(nodes, queues, vec![job]));
    assert_eq!(d.binds.len(), 1);
    assert_eq!(d.binds[0].task, "a/sg-z-min");
}

#[test]
fn jobs_on_unknown_or_non_leaf_queues_are_rejected() {
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    let queues = vec![QueueSpec::new("org"), QueueSpec::new("t").parent("org")];
    let jobs = vec![
        Job::gang("a/x", "org", vec![gpu_task(1)]),
        Job::gang("a/y", "nope", vec![gpu_task(1)]),
    ];
    let d = run(&snapshot(nodes, queues, jobs));
    assert!(d.binds.is_empty());
    expect![[
        r#"rejected: queue "org" is not a leaf queue (children: t); submit jobs to a leaf queue"#
    ]]
    .assert_eq(&d.pending[0].message);
    expect![[r#"rejected: queue "nope" does not exist"#]].assert_eq(&d.pending[1].message);
}

// ---- properties ---------------------------------------------------------

fn arb_snapshot() -> impl Strategy<Value = Snapshot> {
    let nodes = proptest::collection::vec((0u32..3, 1u64..5), 1..8);
    let jobs = proptest::collection::vec(
        (0usize..3, 1usize..5, 0u64..5, 0u32..3, 0i32..3, 0usize..2),
        0..25,
    );
    let limits = proptest::collection::vec(proptest::option::of(0u64..24), 3);
    (nodes, jobs, limits).prop_map(|(nodes, jobs, limits)| {
        let nodes: Vec<Node> = nodes
            .into_iter()
            .enumerate()
            .map(|(i, (g, cpu))| {
                Node::new(format!("n{i}"), cpu * 8000, 256 * GI, [0, 4, 8][g as usize])
            })
            .collect();
        let mut queues = vec![QueueSpec::new("org").quota(Resources::zero().with_gpus(8))];
        for (i, lim) in limits.iter().enumerate() {
            let mut q = QueueSpec::new(format!("q{i}"))
                .quota(Resources::zero().with_gpus(i as u64))
                .weight(i as u32 + 1);
            if i < 2 {
                q = q.parent("org");
            }
            if let Some(l) = lim {
                q = q.limit(Limits::unlimited().cap(ResourceName::Gpu, (*l).max(i as u64) * 1000));
            }
            queues.push(q);
        }
        let jobs = jobs
            .into_iter()
            .enumerate()
            .map(|(i, (q, pods, gpus, extra, prio, frac))| {
                let req = if frac == 1 && gpus == 1 {
                    Resources::new(500, GI, 500)
                } else {
                    Resources::new(2000, 8 * GI, 0).with_gpus(gpus)
                };
                let mut job = Job::gang(
                    format!("j{i:02}"),
                    format!("q{q}"),
                    vec![req; pods + extra as usize],
                );
                job.min_member = pods as u32;
                job.priority = prio;
                job.submit_time = Timestamp(i as i64);
                job
            })
            .collect();
        Snapshot::new(nodes, QueueTree::build(queues).unwrap(), jobs)
    })
}

fn check_invariants(s: &Snapshot, d: &Decisions) -> Result<(), TestCaseError> {
    // No overcommitted node, no device handed out twice to whole-GPU tasks.
    let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
    let mut devices: BTreeMap<(&str, u32), u64> = BTreeMap::new();
    let tasks: BTreeMap<&str, &Task> = s
        .jobs
        .iter()
        .flat_map(|j| j.tasks.iter())
        .map(|t| (t.name.as_str(), t))
        .collect();
    for b in &d.binds {
        let t = tasks[b.task.name.as_str()];
        used.entry(b.node.as_str()).or_default().add(&t.requests);
        for g in &b.gpus {
            *devices.entry((b.node.as_str(), *g)).or_default() += if t.requests.gpu >= 1000 {
                1000
            } else {
                t.requests.gpu
            };
        }
        prop_assert_eq!(b.gpus.len() as u64, t.requests.gpu.div_ceil(1000));
    }
    for n in &s.nodes {
        if let Some(u) = used.get(n.name.as_str()) {
            prop_assert!(
                u.fits_in(&n.allocatable),
                "node {} overcommitted: {} > {}",
                n.name,
                u,
                n.allocatable
            );
        }
    }
    for ((node, g), milli) in devices {
        prop_assert!(milli <= 1000, "device {node}/{g} over-used: {milli}");
    }
    // No partial gang.
    for job in &s.jobs {
        let n = d.binds.iter().filter(|b| b.job == job.id).count() as u32;
        prop_assert!(
            n == 0 || n >= job.min_member,
            "partial gang {}: {n}/{}",
            job.id,
            job.min_member
        );
    }
    // No queue over its limit: each queue's use recomputed from the input
    // (bound tasks that stay), the binds and the evictions, charged to the
    // job's leaf and every ancestor; never read from the core's own
    // ledger or queue table.
    let tree = &s.queues;
    let mut use_of = vec![Resources::zero(); tree.len()];
    let leaf_of: BTreeMap<&str, _> = s
        .jobs
        .iter()
        .filter_map(|j| tree.get(&j.queue).map(|q| (j.id.as_str(), q)))
        .collect();
    let evicted: BTreeSet<&str> = d.evictions.iter().map(|e| e.task.name.as_str()).collect();
    let mut charge = |job: &str, r: &Resources| {
        if let Some(&leaf) = leaf_of.get(job) {
            for q in tree.ancestors(leaf) {
                use_of[q.0].add(r);
            }
        }
    };
    for j in &s.jobs {
        for t in &j.tasks {
            if !t.is_pending() && !evicted.contains(t.name.as_str()) {
                charge(&j.id, &t.requests);
            }
        }
    }
    for b in &d.binds {
        charge(&b.job, &tasks[b.task.name.as_str()].requests);
    }
    for q in tree.ids() {
        if let Some((r, cap)) = tree.spec(q).limit.first_exceeded(&use_of[q.0]) {
            prop_assert!(
                false,
                "queue {} over its limit: {r} {} > {cap}",
                tree.name(q),
                use_of[q.0].get(&r)
            );
        }
    }
    // Every job is bound (at least its minimum) or has a reason.
    for job in &s.jobs {
        let bound = d.binds.iter().filter(|b| b.job == job.id).count();
        let pending = d.pending.iter().any(|p| p.job == job.id);
        prop_assert!(
            bound == job.tasks.len() || pending,
            "job {} neither fully bound nor pending",
            job.id
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn allocation_invariants(s in arb_snapshot()) {
        let d = run(&s);
        check_invariants(&s, &d)?;
    }

    #[test]
    fn input_order_does_not_matter(s in arb_snapshot()) {
        let d1 = run(&s);
        let mut r = s.clone();
        r.nodes.reverse();
        r.jobs.reverse();
        for j in &mut r.jobs { std::sync::Arc::make_mut(j).tasks.reverse(); }
        let d2 = run(&r);
        prop_assert_eq!(d1, d2);
    }

    #[test]
    fn nothing_fitting_is_left_pending(s in arb_snapshot()) {
        // Backfill: after the cycle, no pending one-pod whole-GPU job (not
        // held back by a limit) would fit on any node.
        let d = run(&s);
        let tasks: BTreeMap<&str, &Task> = s.jobs.iter().flat_map(|j| j.tasks.iter()).map(|t| (t.name.as_str(), t)).collect();
        let mut used: BTreeMap<&str, (Resources, std::collections::BTreeSet<u32>)> = BTreeMap::new();
        for b in &d.binds {
            let e = used.entry(b.node.as_str()).or_default();
            e.0.add(&tasks[b.task.name.as_str()].requests);
            e.1.extend(b.gpus.iter().copied());
        }
        // Room a reclaim freed is kept from gangs that take a queue above
        // its fair share, for this cycle: only when this cycle reclaimed.
        let reclaimed = d.evictions.iter().any(|e| e.kind == crate::decisions::EvictionKind::Reclaim)
            || d.pending.iter().any(|p| matches!(&p.reason, PendingReason::Yielded { message, .. } if message.starts_with("reclaimed for")));
        for p in &d.pending {
            let job = s.jobs.iter().find(|j| j.id == p.job).unwrap();
            if matches!(p.reason, PendingReason::ReclaimedRoomKept { .. }) {
                prop_assert!(reclaimed, "{} pending ({}) but nothing was reclaimed", job.id, p.message);
                continue;
            }
            let PendingReason::Unschedulable { .. } = p.reason else { continue };
            if job.min_member != 1 || job.tasks[0].requests.gpu % 1000 != 0 { continue; }
            let req = &job.tasks[0].requests;
            for n in &s.nodes {
                let (u, devs) = used.get(n.name.as_str()).cloned().unwrap_or_default();
                let mut free = n.allocatable.clone();
                free.saturating_sub(&u);
                let fits = req.fits_in(&free) && (n.gpus.len() - devs.len()) as u64 >= req.gpu / 1000;
                prop_assert!(!fits, "{} pending ({}) but fits on {}", job.id, p.message, n.name);
            }
        }
    }
}

#[test]
fn with_decay_the_user_who_used_less_of_the_leaf_goes_first_among_equals() {
    use trainyard_model::Usage;
    let nodes = vec![Node::new("n0", 64_000, 512 * GI, 8)];
    // Same queue, same priority; heavy's job is older.
    let mut heavy = Job::gang("heavy/train", "q", vec![gpu_task(8)]);
    heavy.submit_time = Timestamp(0);
    let mut light = Job::gang("light/train", "q", vec![gpu_task(8)]);
    light.submit_time = Timestamp(10_000);
    let mut high = Job::gang("heavy/urgent", "q", vec![gpu_task(8)]);
    high.submit_time = Timestamp(20_000);
    high.priority = 100;
    let mut s = snapshot(nodes, vec![QueueSpec::new("q")], vec![heavy, light]);
    let gpu_hours = |h: u64| Usage::of(&Resources::zero().with_gpus(8), h * 3600);
    s.user_usage = std::sync::Arc::new(BTreeMap::from([(
        "q".to_string(),
        BTreeMap::from([
            ("heavy".to_string(), gpu_hours(100)),
            ("light".to_string(), gpu_hours(5)),
        ]),
    )]));
    let mut decay = Config::default();
    decay.fair_share.usage_half_life_seconds = Some(7 * 86_400);
    let now = Timestamp(30_000);
    // Off: submission order.
    let d = schedule(&s, &Config::default(), now);
    assert_eq!(bound_jobs(&d).keys().collect::<Vec<_>>(), ["heavy/train"]);
    // On: the less-used user first.
    let d = schedule(&s, &decay, now);
    assert_eq!(bound_jobs(&d).keys().collect::<Vec<_>>(), ["light/train"]);
    // Priority still comes first.
    let mut s2 = s.clone();
    s2.jobs.push(Arc::new(high));
    s2.jobs.sort_by(|a, b| a.id.cmp(&b.id));
    let d = schedule(&s2, &decay, now);
    assert_eq!(bound_jobs(&d).keys().collect::<Vec<_>>(), ["heavy/urgent"]);
    // A user with no recorded usage counts as having used nothing.
    std::sync::Arc::make_mut(&mut s.user_usage)
        .get_mut("q")
        .expect("q")
        .remove("light");
    let d = schedule(&s, &decay, now);
    assert_eq!(bound_jobs(&d).keys().collect::<Vec<_>>(), ["light/train"]);
}
