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
    let fs = compute(&tree, &capacity, &leaf);
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
    let fs = compute(&tree, cap, &leaf);
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

// ---- exact reference -----------------------------------------------------
//
// The same algorithm (steps 1–3 of the module doc) in exact rational
// arithmetic, with its own small unsigned big integer so that nothing here
// shares code or rounding with the implementation under test.

/// The exact split of `total` among `kids`, per resource of
/// [`dimensions`] (in that order), from the production inputs.
fn exact_split(total: &Resources, kids: &[Child]) -> (Vec<ResourceName>, Vec<Vec<exact::Q>>) {
    let dims = dimensions(total, kids);
    let ek: Vec<exact::Kid> = kids
        .iter()
        .map(|c| exact::Kid {
            demand: dims.iter().map(|d| c.demand.get(d) as u128).collect(),
            quota: dims.iter().map(|d| c.quota.get(d) as u128).collect(),
            weight: c.weight,
            priority: c.priority,
        })
        .collect();
    let et: Vec<exact::Q> = dims
        .iter()
        .map(|d| exact::Q::int(total.get(d) as u128))
        .collect();
    let ex = exact::split(&et, &ek);
    (dims, ex)
}

mod exact {
    use std::cmp::Ordering;

    /// Unsigned big integer, little-endian 32-bit limbs, no high zero limbs.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Big(Vec<u32>);

    impl Big {
        pub fn from_u128(mut v: u128) -> Big {
            let mut l = Vec::new();
            while v > 0 {
                l.push(v as u32);
                v >>= 32;
            }
            Big(l)
        }
        fn trim(mut self) -> Big {
            while self.0.last() == Some(&0) {
                self.0.pop();
            }
            self
        }
        pub fn is_zero(&self) -> bool {
            self.0.is_empty()
        }
        pub fn add(&self, o: &Big) -> Big {
            let n = self.0.len().max(o.0.len());
            let mut out = Vec::with_capacity(n + 1);
            let mut carry = 0u64;
            for i in 0..n {
                let s =
                    *self.0.get(i).unwrap_or(&0) as u64 + *o.0.get(i).unwrap_or(&0) as u64 + carry;
                out.push(s as u32);
                carry = s >> 32;
            }
            out.push(carry as u32);
            Big(out).trim()
        }
        /// `self - o`; panics if negative.
        pub fn sub(&self, o: &Big) -> Big {
            assert!(self.cmp(o) != Ordering::Less, "negative big integer");
            let mut out = Vec::with_capacity(self.0.len());
            let mut borrow = 0i64;
            for i in 0..self.0.len() {
                let mut s = self.0[i] as i64 - *o.0.get(i).unwrap_or(&0) as i64 - borrow;
                borrow = 0;
                if s < 0 {
                    s += 1 << 32;
                    borrow = 1;
                }
                out.push(s as u32);
            }
            Big(out).trim()
        }
        pub fn mul(&self, o: &Big) -> Big {
            if self.is_zero() || o.is_zero() {
                return Big(Vec::new());
            }
            let mut out = vec![0u32; self.0.len() + o.0.len()];
            for (i, &a) in self.0.iter().enumerate() {
                let mut carry = 0u64;
                for (j, &b) in o.0.iter().enumerate() {
                    let t = a as u64 * b as u64 + out[i + j] as u64 + carry;
                    out[i + j] = t as u32;
                    carry = t >> 32;
                }
                let mut k = i + o.0.len();
                while carry > 0 {
                    let t = out[k] as u64 + carry;
                    out[k] = t as u32;
                    carry = t >> 32;
                    k += 1;
                }
            }
            Big(out).trim()
        }
        pub fn cmp(&self, o: &Big) -> Ordering {
            self.0
                .len()
                .cmp(&o.0.len())
                .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
        }
        fn bits(&self) -> usize {
            match self.0.last() {
                None => 0,
                Some(&h) => self.0.len() * 32 - h.leading_zeros() as usize,
            }
        }
        fn bit(&self, i: usize) -> bool {
            self.0.get(i / 32).is_some_and(|l| (l >> (i % 32)) & 1 == 1)
        }
        fn shl1_or(&self, low: bool) -> Big {
            let mut out = Vec::with_capacity(self.0.len() + 1);
            let mut carry = low as u32;
            for &l in &self.0 {
                out.push((l << 1) | carry);
                carry = l >> 31;
            }
            out.push(carry);
            Big(out).trim()
        }
        fn shr(&self, n: usize) -> Big {
            let (w, b) = (n / 32, n % 32);
            if w >= self.0.len() {
                return Big(Vec::new());
            }
            let src = &self.0[w..];
            let mut out = Vec::with_capacity(src.len());
            for i in 0..src.len() {
                let lo = src[i] >> b;
                let hi = if b == 0 {
                    0
                } else {
                    src.get(i + 1).map_or(0, |h| h << (32 - b))
                };
                out.push(lo | hi);
            }
            Big(out).trim()
        }
        fn trailing_zeros(&self) -> usize {
            (0..self.bits()).find(|&i| self.bit(i)).unwrap_or(0)
        }
        /// (quotient, remainder) by binary long division.
        pub fn divrem(&self, d: &Big) -> (Big, Big) {
            assert!(!d.is_zero(), "division by zero");
            let nb = self.bits();
            let mut q = vec![0u32; self.0.len()];
            let mut r = Big(Vec::new());
            for i in (0..nb).rev() {
                r = r.shl1_or(self.bit(i));
                if r.cmp(d) != Ordering::Less {
                    r = r.sub(d);
                    q[i / 32] |= 1 << (i % 32);
                }
            }
            (Big(q).trim(), r)
        }
        /// Binary GCD.
        pub fn gcd(a: &Big, b: &Big) -> Big {
            if a.is_zero() {
                return b.clone();
            }
            if b.is_zero() {
                return a.clone();
            }
            let (za, zb) = (a.trailing_zeros(), b.trailing_zeros());
            let k = za.min(zb);
            let mut a = a.shr(za);
            let mut b = b.shr(zb);
            loop {
                // Both odd here.
                match a.cmp(&b) {
                    Ordering::Equal => break,
                    Ordering::Greater => std::mem::swap(&mut a, &mut b),
                    Ordering::Less => {}
                }
                b = b.sub(&a);
                b = b.shr(b.trailing_zeros());
            }
            let mut g = a;
            for _ in 0..k {
                g = g.shl1_or(false);
            }
            g
        }
        pub fn to_u128(&self) -> u128 {
            assert!(self.0.len() <= 4, "does not fit in u128");
            self.0
                .iter()
                .rev()
                .fold(0u128, |acc, &l| (acc << 32) | l as u128)
        }
    }

    /// Non-negative rational, always reduced, denominator > 0.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Q {
        n: Big,
        d: Big,
    }

    impl Q {
        pub fn int(v: u128) -> Q {
            Q {
                n: Big::from_u128(v),
                d: Big::from_u128(1),
            }
        }
        pub fn zero() -> Q {
            Q::int(0)
        }
        fn new(n: Big, d: Big) -> Q {
            let g = Big::gcd(&n, &d);
            if g.0 == [1] {
                return Q { n, d };
            }
            Q {
                n: n.divrem(&g).0,
                d: d.divrem(&g).0,
            }
        }
        pub fn is_zero(&self) -> bool {
            self.n.is_zero()
        }
        pub fn add(&self, o: &Q) -> Q {
            Q::new(self.n.mul(&o.d).add(&o.n.mul(&self.d)), self.d.mul(&o.d))
        }
        /// Panics if negative.
        pub fn sub(&self, o: &Q) -> Q {
            Q::new(self.n.mul(&o.d).sub(&o.n.mul(&self.d)), self.d.mul(&o.d))
        }
        pub fn mul(&self, o: &Q) -> Q {
            Q::new(self.n.mul(&o.n), self.d.mul(&o.d))
        }
        pub fn div(&self, o: &Q) -> Q {
            assert!(!o.is_zero(), "rational division by zero");
            Q::new(self.n.mul(&o.d), self.d.mul(&o.n))
        }
        pub fn cmp(&self, o: &Q) -> Ordering {
            self.n.mul(&o.d).cmp(&o.n.mul(&self.d))
        }
        pub fn min(&self, o: &Q) -> Q {
            if self.cmp(o) == Ordering::Greater {
                o.clone()
            } else {
                self.clone()
            }
        }
        pub fn floor(&self) -> u128 {
            self.n.divrem(&self.d).0.to_u128()
        }
        pub fn ceil(&self) -> u128 {
            let (q, r) = self.n.divrem(&self.d);
            q.to_u128() + (!r.is_zero()) as u128
        }
    }

    impl std::fmt::Display for Q {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let (q, r) = self.n.divrem(&self.d);
            if r.is_zero() {
                write!(f, "{}", q.to_u128())
            } else {
                write!(
                    f,
                    "{}+{}/{}",
                    q.to_u128(),
                    r.to_u128_lossy(),
                    self.d.to_u128_lossy()
                )
            }
        }
    }

    impl Big {
        fn to_u128_lossy(&self) -> String {
            if self.0.len() <= 4 {
                self.to_u128().to_string()
            } else {
                format!("<{} bits>", self.bits())
            }
        }
    }

    /// One child: demand, quota, weight, priority (as [`super::Child`]).
    pub struct Kid {
        pub demand: Vec<u128>,
        pub quota: Vec<u128>,
        pub weight: u64,
        pub priority: i32,
    }

    /// Real-valued water-fill: child `i` gets `min(cap[i], level × w[i])`
    /// for the largest level that fits in `capacity`; weight 0 gets nothing.
    pub fn waterfill(capacity: &Q, cap: &[Q], w: &[u64]) -> Vec<Q> {
        let n = cap.len();
        let mut out = vec![Q::zero(); n];
        let mut unsat: Vec<usize> = (0..n).filter(|&i| w[i] > 0 && !cap[i].is_zero()).collect();
        let mut left = capacity.clone();
        loop {
            let wsum: u128 = unsat.iter().map(|&i| w[i] as u128).sum();
            if wsum == 0 {
                return out;
            }
            let level = left.div(&Q::int(wsum));
            let sat = unsat
                .iter()
                .position(|&i| cap[i].cmp(&level.mul(&Q::int(w[i] as u128))) != Ordering::Greater);
            match sat {
                Some(p) => {
                    let i = unsat.remove(p);
                    out[i] = cap[i].clone();
                    left = left.sub(&cap[i]);
                }
                None => {
                    for &i in &unsat {
                        out[i] = level.mul(&Q::int(w[i] as u128));
                    }
                    return out;
                }
            }
        }
    }

    fn bands(kids: &[Kid]) -> Vec<Vec<usize>> {
        let mut p: Vec<i32> = kids.iter().map(|k| k.priority).collect();
        p.sort_unstable_by(|a, b| b.cmp(a));
        p.dedup();
        p.iter()
            .map(|&pr| {
                (0..kids.len())
                    .filter(|&i| kids[i].priority == pr)
                    .collect()
            })
            .collect()
    }

    /// Exact weighted DRF progressive filling (step 2) of `remaining` among
    /// children wanting `want[j]`, dominant shares against `base`.
    fn drf(base: &[Q], remaining: &[Q], want: &[Vec<Q>], w: &[u64]) -> Vec<Vec<Q>> {
        let m = base.len();
        let k = want.len();
        let mut got = vec![vec![Q::zero(); m]; k];
        let mut exhausted: Vec<bool> = remaining.iter().map(Q::is_zero).collect();
        // rate[j][d]: growth per unit of level; sat[j]: level where j is done.
        let mut rate: Vec<Option<Vec<Q>>> = vec![None; k];
        let mut sat: Vec<Q> = vec![Q::zero(); k];
        for j in 0..k {
            let mut s: Option<Q> = None;
            let mut blocked = false;
            for d in 0..m {
                if want[j][d].is_zero() {
                    continue;
                }
                if base[d].is_zero() || exhausted[d] {
                    blocked = true;
                    continue;
                }
                let share = want[j][d].div(&base[d]);
                if s.as_ref().is_none_or(|b| share.cmp(b) == Ordering::Greater) {
                    s = Some(share);
                }
            }
            let Some(s) = s else { continue };
            if blocked {
                continue;
            }
            // Never more than the whole base of any resource: a dominant
            // share above 1 is scaled down to 1 along the same vector.
            let one = Q::int(1);
            let (target, sdom) = if s.cmp(&one) == Ordering::Greater {
                (want[j].iter().map(|v| v.div(&s)).collect::<Vec<_>>(), one)
            } else {
                (want[j].clone(), s)
            };
            let wj = Q::int(w[j] as u128);
            rate[j] = Some(target.iter().map(|t| t.mul(&wj).div(&sdom)).collect());
            sat[j] = sdom.div(&wj);
        }
        let mut live: Vec<bool> = rate.iter().map(Option::is_some).collect();
        loop {
            let ids: Vec<usize> = (0..k).filter(|&j| live[j]).collect();
            if ids.is_empty() {
                return got;
            }
            let mut event = ids
                .iter()
                .map(|&j| sat[j].clone())
                .reduce(|a, b| a.min(&b))
                .unwrap();
            let mut hit: Vec<Option<Q>> = vec![None; m];
            for d in 0..m {
                if exhausted[d] {
                    continue;
                }
                let mut r = Q::zero();
                for &j in &ids {
                    r = r.add(&rate[j].as_ref().unwrap()[d]);
                }
                if r.is_zero() {
                    continue;
                }
                let mut used = Q::zero();
                for j in 0..k {
                    if !live[j] {
                        used = used.add(&got[j][d]);
                    }
                }
                let l = remaining[d].sub(&used).div(&r);
                event = event.min(&l);
                hit[d] = Some(l);
            }
            for d in 0..m {
                if hit[d]
                    .as_ref()
                    .is_some_and(|l| l.cmp(&event) != Ordering::Greater)
                {
                    exhausted[d] = true;
                }
            }
            for &j in &ids {
                let r = rate[j].as_ref().unwrap();
                let done = sat[j].cmp(&event) != Ordering::Greater;
                let blocked = (0..m).any(|d| exhausted[d] && !r[d].is_zero());
                if done || blocked {
                    let lvl = if done { sat[j].clone() } else { event.clone() };
                    got[j] = r.iter().map(|v| v.mul(&lvl)).collect();
                    live[j] = false;
                }
            }
        }
    }

    /// Exact steps 1–3 for one parent: `total[d]` per resource, result per
    /// child per resource.
    pub fn split(total: &[Q], kids: &[Kid]) -> Vec<Vec<Q>> {
        let m = total.len();
        let k = kids.len();
        let mut share = vec![vec![Q::zero(); m]; k];
        let mut remaining = total.to_vec();
        // Step 1.
        for d in 0..m {
            let g: Vec<Q> = kids
                .iter()
                .map(|c| Q::int(c.quota[d].min(c.demand[d])))
                .collect();
            let sum = g.iter().fold(Q::zero(), |a, b| a.add(b));
            let given = if sum.cmp(&total[d]) != Ordering::Greater {
                g
            } else {
                let w: Vec<u64> = kids.iter().map(|c| c.quota[d] as u64).collect();
                waterfill(&total[d], &g, &w)
            };
            for i in 0..k {
                remaining[d] = remaining[d].sub(&given[i]);
                share[i][d] = given[i].clone();
            }
        }
        let demand = |i: usize, d: usize| Q::int(kids[i].demand[d]);
        // Step 2.
        for band in bands(kids) {
            let active: Vec<usize> = band.into_iter().filter(|&i| kids[i].weight > 0).collect();
            let want: Vec<Vec<Q>> = active
                .iter()
                .map(|&i| (0..m).map(|d| demand(i, d).sub(&share[i][d])).collect())
                .collect();
            let w: Vec<u64> = active.iter().map(|&i| kids[i].weight).collect();
            let got = drf(total, &remaining, &want, &w);
            for (j, &i) in active.iter().enumerate() {
                for d in 0..m {
                    share[i][d] = share[i][d].add(&got[j][d]);
                    remaining[d] = remaining[d].sub(&got[j][d]);
                }
            }
        }
        // Step 3.
        for d in 0..m {
            for band in bands(kids) {
                if remaining[d].is_zero() {
                    break;
                }
                let caps: Vec<Q> = band
                    .iter()
                    .map(|&i| demand(i, d).sub(&share[i][d]))
                    .collect();
                if caps.iter().all(Q::is_zero) {
                    continue;
                }
                let mut w: Vec<u64> = band.iter().map(|&i| kids[i].weight).collect();
                if band
                    .iter()
                    .zip(&caps)
                    .all(|(&i, c)| c.is_zero() || kids[i].weight == 0)
                {
                    w = vec![1; band.len()];
                }
                let given = waterfill(&remaining[d], &caps, &w);
                for (&i, v) in band.iter().zip(given) {
                    share[i][d] = share[i][d].add(&v);
                    remaining[d] = remaining[d].sub(&v);
                }
            }
        }
        share
    }
}

// ---- fair share against the exact reference -----------------------------

/// An amount drawn either round (a multiple of a power of ten) or ragged.
fn amount(max: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        (0u64..=10, 0u32..=11).prop_map(move |(m, e)| (m * 10u64.pow(e)).min(max)),
        0u64..=max,
    ]
}

/// A random tree of depth ≤ 3 with ≤ 4 children per queue, CPU, memory
/// in bytes (up to 2·10¹¹) and milli-GPU; quotas may be oversubscribed.
fn arb_exact_case() -> impl Strategy<Value = (Vec<QueueSpec>, Resources, Vec<(String, Resources)>)>
{
    let res = |max_cpu: u64, max_mem: u64, max_gpu: u64| {
        (amount(max_cpu), amount(max_mem), amount(max_gpu))
            .prop_map(|(c, m, g)| Resources::new(c, m, g))
    };
    let queue = (
        res(64_000, 100_000_000_000, 16_000),  // quota
        res(256_000, 200_000_000_000, 64_000), // demand (leaves)
        0u64..4,                               // weight
        0i32..2,                               // priority
        proptest::option::weighted(0.2, res(256_000, 200_000_000_000, 64_000)), // limit
    );
    (
        1usize..=4,
        proptest::collection::vec(0usize..=4, 4),
        proptest::collection::vec(0usize..=3, 16),
        proptest::collection::vec(queue, 1 + 4 + 16 + 48),
        res(512_000, 1_000_000_000_000, 128_000),
        proptest::bool::ANY,
    )
        .prop_map(|(ntop, nmid, nlow, params, cap, no_cpu)| {
            let mut specs = Vec::new();
            let mut leaves = Vec::new();
            let mut next = params.into_iter();
            // Quotas are cut to fit the parent's (a valid tree); the root's
            // children may oversubscribe the capacity.
            let mut add = |name: String, parent: Option<(&str, &Resources, u64)>, leaf: bool| {
                let (quota, demand, w, prio, limit) = next.next().unwrap();
                let strip = |mut r: Resources| {
                    if no_cpu {
                        r.cpu = 0;
                    }
                    r
                };
                let mut quota = strip(quota);
                if let Some((_, pq, n)) = parent {
                    quota = Resources::new(
                        quota.cpu.min(pq.cpu / n),
                        quota.memory.min(pq.memory / n),
                        quota.gpu.min(pq.gpu / n),
                    );
                }
                let mut spec = QueueSpec::new(&name)
                    .quota(quota.clone())
                    .weight(w as u32)
                    .priority(prio);
                if let Some((p, _, _)) = parent {
                    spec = spec.parent(p);
                }
                if let Some(l) = limit {
                    let mut lim = Limits::unlimited();
                    for (r, v) in l.iter() {
                        lim = lim.cap(r.clone(), v.max(quota.get(&r)));
                    }
                    spec = spec.limit(lim);
                }
                specs.push(spec);
                if leaf {
                    leaves.push((name, strip(demand)));
                }
                quota
            };
            for t in 0..ntop {
                let top = format!("t{t}");
                let tq = add(top.clone(), None, nmid[t] == 0);
                for c in 0..nmid[t] {
                    let mid = format!("{top}c{c}");
                    let n = nlow[t * 4 + c];
                    let mq = add(mid.clone(), Some((&top, &tq, nmid[t] as u64)), n == 0);
                    for g in 0..n {
                        add(format!("{mid}g{g}"), Some((&mid, &mq, n as u64)), true);
                    }
                }
            }
            let mut cap = cap;
            if no_cpu {
                cap.cpu = 0;
            }
            (specs, cap, leaves)
        })
}

/// For every parent, the children's shares against the exact split of the
/// parent's (integer) share: `(queue, resource, share, exact)` per child.
fn against_exact(
    tree: &QueueTree,
    cap: &Resources,
    fs: &FairShares,
) -> Vec<(String, ResourceName, u64, exact::Q)> {
    let mut out = Vec::new();
    for p in tree.top_down() {
        let children = tree.children(p);
        if children.is_empty() {
            continue;
        }
        let total = if p == QueueTree::ROOT {
            cap.clone()
        } else {
            fs.fair[p.0].clone()
        };
        let kids: Vec<Child> = children
            .iter()
            .map(|c| {
                let s = tree.spec(*c);
                Child {
                    demand: fs.demand[c.0].clone(),
                    quota: s.quota.clone(),
                    weight: s.over_quota_weight as u64,
                    priority: s.priority,
                }
            })
            .collect();
        let (dims, ex) = exact_split(&total, &kids);
        for (i, c) in children.iter().enumerate() {
            for (di, d) in dims.iter().enumerate() {
                out.push((
                    tree.name(*c).to_string(),
                    d.clone(),
                    fs.fair[c.0].get(d),
                    ex[i][di].clone(),
                ));
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The promise of docs/fair-share.md: every child's share of every
    /// resource is the exact real-valued split of its parent's share,
    /// rounded down or up.
    #[test]
    fn shares_are_the_exact_split_rounded((specs, cap, leaves) in arb_exact_case()) {
        let (tree, fs) = run(&specs, &cap, &leaves);
        for (q, r, got, ex) in against_exact(&tree, &cap, &fs) {
            let (lo, hi) = (ex.floor(), ex.ceil());
            prop_assert!(
                lo <= got as u128 && got as u128 <= hi,
                "{q} {r}: share {got}, exact {ex}"
            );
        }
    }
}

#[test]
fn exact_reference_big_integers() {
    use exact::{Big, Q};
    let a = Big::from_u128(u128::MAX - 12345);
    let b = Big::from_u128(987_654_321_987_654_321);
    let (q, r) = a.mul(&b).add(&Big::from_u128(77)).divrem(&b);
    assert_eq!((q, r), (a, Big::from_u128(77)));
    assert_eq!(
        Big::gcd(
            &Big::from_u128(2 * 3 * 5 * 7 * 1024),
            &Big::from_u128(3 * 7 * 11 * 64)
        ),
        Big::from_u128(3 * 7 * 64)
    );
    let third = Q::int(1).div(&Q::int(3));
    assert_eq!(third.add(&third).add(&third), Q::int(1));
    assert_eq!(Q::int(10).div(&Q::int(4)).floor(), 2);
    assert_eq!(Q::int(10).div(&Q::int(4)).ceil(), 3);
    // The worked example of oversubscribed quotas: 7 GPUs split 8 : 4 once
    // b is capped at 3.
    let w = exact::waterfill(&Q::int(10), &[Q::int(8), Q::int(3), Q::int(4)], &[8, 8, 4]);
    assert_eq!(w[1], Q::int(3));
    assert_eq!(w[0], Q::int(14).div(&Q::int(3)));
    assert_eq!(w[2], Q::int(7).div(&Q::int(3)));
}

/// One parent's split with amounts from a few units up to 9·10¹⁷ in any
/// resource, so that demand vectors mix tiny and huge amounts (the case
/// where an error in the scarce resource is magnified in the others).
fn arb_wide_split() -> impl Strategy<Value = (Resources, Vec<Child>)> {
    let amt = || (0u64..=9, 0u32..=17).prop_map(|(m, e)| m * 10u64.pow(e));
    let res = move || (amt(), amt(), amt()).prop_map(|(c, m, g)| Resources::new(c, m, g));
    (
        res(),
        proptest::collection::vec((res(), res(), 0u64..4, 0i32..2), 2..5),
    )
        .prop_map(|(total, kids)| {
            let kids = kids
                .into_iter()
                .map(|(quota, demand, w, p)| child(demand, quota, w, p))
                .collect();
            (total, kids)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The same promise for one split with amounts up to 9·10¹⁷ units.
    #[test]
    fn wide_amounts_split_is_the_exact_split_rounded((total, kids) in arb_wide_split()) {
        let s = split(&total, &kids);
        let (dims, ex) = exact_split(&total, &kids);
        for (i, share) in s.iter().enumerate() {
            for (di, d) in dims.iter().enumerate() {
                let got = share.get(d) as u128;
                prop_assert!(
                    ex[i][di].floor() <= got && got <= ex[i][di].ceil(),
                    "child {i} {d}: share {got}, exact {}", ex[i][di]
                );
            }
        }
    }
}
