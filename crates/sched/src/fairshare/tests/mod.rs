use super::*;
use proptest::prelude::*;
use trainyard_model::{Limits, QueueSpec};

const GI: u64 = 1 << 30;

fn gpus(n: u64) -> Resources {
    Resources::zero().with_gpus(n)
}

fn child(demand: Resources, quota: Resources, weight: u64, priority: i32) -> Child {
    Child {
        demand,
        quota,
        weight,
        priority,
    }
}

/// Fair shares by queue name.
fn shares(
    specs: Vec<QueueSpec>,
    capacity: Resources,
    demands: &[(&str, Resources)],
) -> BTreeMap<String, Resources> {
    let tree = QueueTree::build(specs).unwrap();
    let mut leaf = vec![Resources::zero(); tree.len()];
    for (name, d) in demands {
        leaf[tree.get(name).unwrap().0] = d.clone();
    }
    let fs = compute(&tree, &capacity, &leaf, None);
    tree.ids()
        .map(|q| (tree.name(q).to_string(), fs.fair[q.0].clone()))
        .collect()
}

#[test]
fn drf_paper_example() {
    // 9 CPUs, 18 GB; A runs <1 CPU, 4 GB> tasks, B runs <3 CPU, 1 GB> tasks,
    // both with more demand than fits. DRF: A gets 3 tasks, B gets 2, and
    // both end at a dominant share of 2/3.
    let total = Resources::new(9000, 18 * GI, 0);
    let a = child(
        Resources::new(1000, 4 * GI, 0).scaled(5),
        Resources::zero(),
        1,
        0,
    );
    let b = child(
        Resources::new(3000, GI, 0).scaled(5),
        Resources::zero(),
        1,
        0,
    );
    let s = split(&total, &[a.clone(), b.clone()]);
    assert_eq!(s[0].cpu, 3000, "A gets 3 CPUs = 3 tasks");
    assert_eq!(s[1].cpu, 6000, "B gets 6 CPUs = 2 tasks");
    // Step 2 gives A 12 GB and B 2 GB; the 4 GB nobody can use along its
    // demand vector are split equally by step 3 (both still want memory).
    // The exact values are whole bytes, so the shares are exactly these.
    assert_eq!(s[0].memory, 14 * GI, "{}", s[0]);
    assert_eq!(s[1].memory, 4 * GI, "{}", s[1]);
    assert_eq!(s[0].memory + s[1].memory, 18 * GI, "memory fully assigned");
    // Order of children does not matter.
    let r = split(&total, &[b, a]);
    assert_eq!((r[1].cpu, r[0].cpu), (3000, 6000));
}

#[test]
fn drf_without_leftover_redistribution_when_demands_are_met() {
    // A wants exactly 2 tasks: it is satisfied and B takes the rest it can use.
    let total = Resources::new(9000, 18 * GI, 0);
    let a = child(
        Resources::new(1000, 4 * GI, 0).scaled(2),
        Resources::zero(),
        1,
        0,
    );
    let b = child(
        Resources::new(3000, GI, 0).scaled(5),
        Resources::zero(),
        1,
        0,
    );
    let s = split(&total, &[a, b]);
    assert_eq!(s[0], Resources::new(2000, 8 * GI, 0));
    assert_eq!(s[1].cpu, 7000);
    assert_eq!(s[1].memory, 5 * GI, "B's memory demand is met in full");
}

#[test]
fn two_level_tree_with_quotas_limits_and_weights() {
    // 64 GPUs. org-a quota 32, org-b quota 16, both want 64:
    // quotas first (32, 16), then the 16 left split 1:1 → a 40, b 24.
    // Inside org-a (40): a1 quota 16 wants 10 → 10; a2 quota 16 weight 3;
    // a3 no quota, weight 1, limit 2 → demand capped at 2.
    // Over quota: 40 - 10 - 16 = 14 left for a2 (w3) and a3 (w1): the even
    // split would be 10.5 / 3.5, but a3 is capped at 2, so a2 gets 12.
    let specs = vec![
        QueueSpec::new("org-a").quota(gpus(32)),
        QueueSpec::new("org-b").quota(gpus(16)),
        QueueSpec::new("a1").parent("org-a").quota(gpus(16)),
        QueueSpec::new("a2")
            .parent("org-a")
            .quota(gpus(16))
            .weight(3),
        QueueSpec::new("a3")
            .parent("org-a")
            .limit(Limits::unlimited().cap(ResourceName::Gpu, 2000)),
    ];
    let s = shares(
        specs,
        gpus(64),
        &[
            ("a1", gpus(10)),
            ("a2", gpus(100)),
            ("a3", gpus(100)),
            ("org-b", gpus(64)),
        ],
    );
    assert_eq!(s["org-a"].gpu, 40_000);
    assert_eq!(s["org-b"].gpu, 24_000);
    assert_eq!(s["a1"].gpu, 10_000);
    assert_eq!(s["a2"].gpu, 28_000);
    assert_eq!(s["a3"].gpu, 2_000);
}

#[test]
fn weights_split_over_quota_in_ratio() {
    // 30 GPUs, no quotas, weights 2:1 → 20 / 10 (milli-GPU exact).
    let specs = vec![QueueSpec::new("a").weight(2), QueueSpec::new("b")];
    let s = shares(specs, gpus(30), &[("a", gpus(100)), ("b", gpus(100))]);
    assert_eq!((s["a"].gpu, s["b"].gpu), (20_000, 10_000));
    // 10 GPUs at 2:1 do not divide: 6.666 / 3.333 GPUs, in milli-GPU with
    // the odd milli to the larger remainder.
    let specs = vec![QueueSpec::new("a").weight(2), QueueSpec::new("b")];
    let s = shares(specs, gpus(10), &[("a", gpus(100)), ("b", gpus(100))]);
    assert_eq!((s["a"].gpu, s["b"].gpu), (6_667, 3_333));
}

#[test]
fn three_level_tree() {
    // 96 GPUs. research (quota 64) > {nlp (quota 48) > {llm q32, asr q16 w2, mt q0}, cv q16}; prod quota 32.
    // Demands: llm 80, asr 40, mt 40, cv 8, prod 8.
    // Root: research g=min(64, 80+40+40+8=168)=64, prod g=8; 24 left, only research wants → research 88.
    // research (88): nlp g=48, cv g=8 (demand 8) → 32 left, nlp wants → nlp 80.
    // nlp (80): llm g=32, asr g=16, mt g=0 → 32 left; over-quota weights llm1 asr2 mt1;
    //   remaining demands llm 48, asr 24, mt 40 → equal level: 8/16/8 → llm 40, asr 32, mt 8.
    let specs = vec![
        QueueSpec::new("research").quota(gpus(64)),
        QueueSpec::new("prod").quota(gpus(32)),
        QueueSpec::new("nlp").parent("research").quota(gpus(48)),
        QueueSpec::new("cv").parent("research").quota(gpus(16)),
        QueueSpec::new("llm").parent("nlp").quota(gpus(32)),
        QueueSpec::new("asr")
            .parent("nlp")
            .quota(gpus(16))
            .weight(2),
        QueueSpec::new("mt").parent("nlp"),
    ];
    let s = shares(
        specs,
        gpus(96),
        &[
            ("llm", gpus(80)),
            ("asr", gpus(40)),
            ("mt", gpus(40)),
            ("cv", gpus(8)),
            ("prod", gpus(8)),
        ],
    );
    let g = |q: &str| s[q].gpu / 1000;
    assert_eq!((g("research"), g("prod")), (88, 8));
    assert_eq!((g("nlp"), g("cv")), (80, 8));
    assert_eq!((g("llm"), g("asr"), g("mt")), (40, 32, 8));
}

#[test]
fn oversubscribed_quotas_scale_in_proportion_to_quota() {
    // 10 GPUs; quotas 8/8/4 (sum 20); demands 8/3/10 → g = 8/3/4 (15 > 10).
    // Proportional to quota: 4/4/2, b capped at 3 → the 7 left go 8:4 → a 4.67, c 2.33 (milli exact).
    let specs = vec![
        QueueSpec::new("a").quota(gpus(8)),
        QueueSpec::new("b").quota(gpus(8)),
        QueueSpec::new("c").quota(gpus(4)),
    ];
    let s = shares(
        specs,
        gpus(10),
        &[("a", gpus(8)), ("b", gpus(3)), ("c", gpus(10))],
    );
    assert_eq!(s["b"].gpu, 3000);
    assert_eq!(s["a"].gpu, 4667);
    assert_eq!(s["c"].gpu, 2333);
}

#[test]
fn higher_priority_takes_over_quota_first() {
    let specs = vec![QueueSpec::new("hi").priority(10), QueueSpec::new("lo")];
    let s = shares(specs, gpus(16), &[("hi", gpus(12)), ("lo", gpus(12))]);
    assert_eq!((s["hi"].gpu, s["lo"].gpu), (12_000, 4_000));
}

#[test]
fn zero_weight_gets_no_over_quota_unless_nobody_else_wants_it() {
    let specs = vec![
        QueueSpec::new("a").weight(0).quota(gpus(2)),
        QueueSpec::new("b"),
    ];
    let s = shares(specs.clone(), gpus(10), &[("a", gpus(10)), ("b", gpus(10))]);
    assert_eq!((s["a"].gpu, s["b"].gpu), (2_000, 8_000));
    let s = shares(specs, gpus(10), &[("a", gpus(10)), ("b", gpus(3))]);
    assert_eq!(
        (s["a"].gpu, s["b"].gpu),
        (7_000, 3_000),
        "idle capacity is not wasted"
    );
}

#[test]
fn three_queue_memory_share_is_never_above_exact() {
    // Issue 12, point 5 (also scenario 46). org > {x (weight 3), y (weight 2)};
    // 48 CPUs, 3·10¹⁰ B, 40 GPUs. x wants <14, 63·10⁹, 14>, y <96, 45·10⁹, 12>.
    // Both are scaled to a dominant share of 1; memory runs out at t = 2/9
    // with x at exactly 2·10¹⁰ B and y at exactly 10¹⁰ B. The old binary
    // search gave y 10,000,000,002 B.
    let specs = vec![
        QueueSpec::new("org"),
        QueueSpec::new("x").parent("org").weight(3),
        QueueSpec::new("y").parent("org").weight(2),
    ];
    let s = shares(
        specs,
        Resources::new(48_000, 30_000_000_000, 40_000),
        &[
            ("x", Resources::new(14_000, 63_000_000_000, 14_000)),
            ("y", Resources::new(96_000, 45_000_000_000, 12_000)),
        ],
    );
    assert_eq!(s["org"], Resources::new(48_000, 30_000_000_000, 26_000));
    assert_eq!(s["x"], Resources::new(14_000, 20_000_000_000, 14_000));
    assert_eq!(s["y"], Resources::new(34_000, 10_000_000_000, 12_000));
}

#[test]
fn exhausted_resource_stays_exhausted_for_lower_bands() {
    // h (priority 1) uses up the CPU; fixed-point crumbs of it may be
    // left, but in exact arithmetic nothing is, so c (priority 0), which
    // needs CPU, gets no GPUs along its vector in step 2 (each millicore
    // would "buy" 5,000 milli-GPU). Step 3 gives h all the GPUs it wants.
    let total = Resources::new(600_000_000, 0, 10_000_000_000);
    let h = child(
        Resources::new(7_000_000_000_000_000_000, 0, 1_000_000_000_000_000),
        Resources::new(70_000_000, 0, 9_000),
        3,
        1,
    );
    let c = child(
        Resources::new(80_000_000, 0, 400_000_000_000_000),
        Resources::new(90, 0, 0),
        3,
        0,
    );
    let s = split(&total, &[h, c]);
    assert_eq!(s[1].gpu, 0, "{}", s[1]);
    assert_eq!(s[0].gpu, 10_000_000_000);
    assert_eq!(s[0].cpu + s[1].cpu, 600_000_000);
}

#[test]
fn waterfill_is_exact() {
    assert_eq!(waterfill(10, &[3, 100, 100], &[1, 1, 1]), vec![3, 4, 3]);
    assert_eq!(waterfill(100, &[3, 5], &[1, 1]), vec![3, 5]);
    assert_eq!(waterfill(7, &[100, 100], &[0, 1]), vec![0, 7]);
    assert_eq!(waterfill(0, &[1, 1], &[1, 1]), vec![0, 0]);
}

// ---- properties ----------------------------------------------------------

/// A random valid tree of depth ≤ 3 with consistent quotas, plus demands.
fn arb_case() -> impl Strategy<Value = (Vec<QueueSpec>, Resources, Vec<(String, Resources)>)> {
    let top = 1usize..4;
    (
        top,
        proptest::collection::vec(
            (
                0u64..6,
                0u64..4,
                1u64..4,
                0u64..64,
                0u64..200,
                0i32..2,
                proptest::bool::ANY,
            ),
            12,
        ),
        8u64..128,
        128u64..512,
    )
        .prop_map(|(ntop, params, cap_gpu, cap_cpu)| {
            let mut specs = Vec::new();
            let mut leaves = Vec::new();
            let mut pi = 0;
            let mut next = || {
                let p = params[pi % params.len()];
                pi += 1;
                p
            };
            // Quotas shrink by level so children always fit in parents.
            for t in 0..ntop {
                let (q, nkids, w, dg, dc, prio, lim) = next();
                let tq = q.min(cap_gpu / ntop as u64 / 2);
                let name = format!("t{t}");
                let mut spec = QueueSpec::new(&name)
                    .quota(Resources::new(tq * 1000, 0, tq * 1000))
                    .weight(w as u32)
                    .priority(prio);
                if lim {
                    spec = spec
                        .limit(Limits::unlimited().cap(ResourceName::Gpu, (tq + dg / 2) * 1000));
                }
                specs.push(spec);
                if nkids == 0 {
                    leaves.push((name, Resources::new(dc * 1000, 0, dg * 1000)));
                    continue;
                }
                for c in 0..nkids {
                    let (_, _, w2, dg2, dc2, prio2, _) = next();
                    let cq = tq / nkids;
                    let cname = format!("t{t}c{c}");
                    specs.push(
                        QueueSpec::new(&cname)
                            .parent(&name)
                            .quota(Resources::new(cq * 1000, 0, cq * 1000))
                            .weight(w2 as u32)
                            .priority(prio2),
                    );
                    leaves.push((cname, Resources::new(dc2 * 1000, 0, dg2 * 1000)));
                }
            }
            (
                specs,
                Resources::new(cap_cpu * 1000, 0, cap_gpu * 1000),
                leaves,
            )
        })
}

fn run(
    specs: &[QueueSpec],
    cap: &Resources,
    leaves: &[(String, Resources)],
) -> (QueueTree, FairShares) {
    let tree = QueueTree::build(specs.to_vec()).unwrap();
    let mut leaf = vec![Resources::zero(); tree.len()];
    for (n, d) in leaves {
        leaf[tree.get(n).unwrap().0] = d.clone();
    }
    let fs = compute(&tree, cap, &leaf, None);
    (tree, fs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn children_never_exceed_parent_nor_demand((specs, cap, leaves) in arb_case()) {
        let (tree, fs) = run(&specs, &cap, &leaves);
        for q in tree.top_down() {
            let parent_total = if q == QueueTree::ROOT { cap.clone() } else { fs.fair[q.0].clone() };
            let mut sum = Resources::zero();
            for c in tree.children(q) {
                sum.add(&fs.fair[c.0]);
                prop_assert!(fs.fair[c.0].fits_in(&fs.demand[c.0]), "{} above demand", tree.name(*c));
                if let Some((r, lim)) = tree.spec(*c).limit.first_exceeded(&fs.fair[c.0]) {
                    prop_assert!(false, "{} above limit {r} {lim}", tree.name(*c));
                }
            }
            prop_assert!(sum.fits_in(&parent_total), "children of {} sum {} > {}", tree.name(q), sum, parent_total);
        }
    }

    #[test]
    fn quota_is_guaranteed_when_consistent((specs, cap, leaves) in arb_case()) {
        let (tree, fs) = run(&specs, &cap, &leaves);
        // Consistent at the root: top-level quotas fit in capacity (by construction of arb_case).
        for q in tree.ids() {
            let quota = &tree.spec(q).quota;
            for (r, qv) in quota.iter() {
                if fs.demand[q.0].get(&r) >= qv {
                    prop_assert!(fs.fair[q.0].get(&r) >= qv, "{} gets {} < quota {}", tree.name(q), fs.fair[q.0].get(&r), qv);
                }
            }
        }
    }

    #[test]
    fn work_conserving((specs, cap, leaves) in arb_case()) {
        let (tree, fs) = run(&specs, &cap, &leaves);
        for q in tree.top_down() {
            let total = if q == QueueTree::ROOT { cap.clone() } else { fs.fair[q.0].clone() };
            let mut sum = Resources::zero();
            for c in tree.children(q) { sum.add(&fs.fair[c.0]); }
            for (r, t) in total.iter() {
                if sum.get(&r) < t {
                    for c in tree.children(q) {
                        prop_assert_eq!(fs.fair[c.0].get(&r), fs.demand[c.0].get(&r),
                            "{} left idle under {} while {} wants more", r, tree.name(q), tree.name(*c));
                    }
                }
            }
        }
    }

    #[test]
    fn order_does_not_matter((specs, cap, leaves) in arb_case(), seed in 0u64..1000) {
        let (tree, fs) = run(&specs, &cap, &leaves);
        let mut shuffled = specs.clone();
        // Deterministic shuffle from the seed.
        let n = shuffled.len();
        for i in 0..n { shuffled.swap(i, (seed as usize * 7919 + i * 31) % n); }
        let mut rl = leaves.clone();
        rl.reverse();
        let (tree2, fs2) = run(&shuffled, &cap, &rl);
        for q in tree.ids() {
            let q2 = tree2.get(tree.name(q)).unwrap();
            prop_assert_eq!(&fs.fair[q.0], &fs2.fair[q2.0]);
        }
    }

    #[test]
    fn equal_queues_get_equal_shares(n in 2usize..6, quota in 0u64..8, demand in 0u64..64, cap in 1u64..64, w in 1u32..4) {
        let specs: Vec<_> = (0..n).map(|i| QueueSpec::new(format!("q{i}")).quota(gpus(quota.min(cap / n as u64))).weight(w)).collect();
        let leaves: Vec<_> = (0..n).map(|i| (format!("q{i}"), Resources::new(demand * 500, 0, demand * 1000))).collect();
        let (tree, fs) = run(&specs, &Resources::new(cap * 1000, 0, cap * 1000), &leaves);
        let vals: Vec<u64> = tree.ids().map(|q| fs.fair[q.0].gpu).collect();
        let (mn, mx) = (vals.iter().min().unwrap(), vals.iter().max().unwrap());
        prop_assert!(mx - mn <= 1, "unequal shares {:?}", vals);
    }
}

mod against_exact;
mod decay;
mod exact;
