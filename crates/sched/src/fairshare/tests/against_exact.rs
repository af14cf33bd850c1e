//! Fair shares against the exact reference: properties and examples.

use super::*;

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
