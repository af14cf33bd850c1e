//! The time-decayed fair share: `usage_factors` and its effect on
//! `compute`.

use super::*;

use trainyard_model::QueueSpec;

fn gpu_usage(gpu_seconds: u128) -> Usage {
    let mut u = Usage::new();
    u.add_to("nvidia.com/gpu", gpu_seconds * 1000);
    u
}

#[test]
fn factors_are_two_to_the_minus_four_usage_over_shares() {
    // Three siblings of equal weight: S = 1/3 each. Usage shares 0, 1/3,
    // 2/3: U/S = 0, 1, 2, so F = 1, 1/16, 1/256.
    let u = [gpu_usage(0), gpu_usage(100), gpu_usage(200)];
    let f = usage_factors(&[1, 1, 1], &[&u[0], &u[1], &u[2]]);
    assert_eq!(f, vec![FACTOR_ONE, FACTOR_ONE / 16, FACTOR_ONE / 256]);
    // Weights 1 and 3 (S = 1/4, 3/4), equal usage (U = 1/2 each): U/S =
    // 2 and 2/3, so F = 1/256 and 2^(-8/3) = 0.157.
    let f = usage_factors(&[1, 3], &[&u[1], &u[1]]);
    assert_eq!(f[0], FACTOR_ONE / 256);
    assert_eq!(f[1], 161, "2^(-8/3) · 1024 = 161.3");
    // A hog's factor is small but never zero.
    let f = usage_factors(&[1, 1000], &[&gpu_usage(1_000_000), &gpu_usage(0)]);
    assert_eq!(f, vec![1, FACTOR_ONE]);
    // The dominant usage share counts: b used all the memory (U/S = 2).
    let mut mem = gpu_usage(100);
    mem.add_to("memory", 1 << 40);
    let f = usage_factors(&[1, 1], &[&gpu_usage(100), &mem]);
    assert_eq!(f, vec![FACTOR_ONE / 16, FACTOR_ONE / 256]);
}

fn three_teams() -> QueueTree {
    QueueTree::build(vec![
        QueueSpec::new("steady-a"),
        QueueSpec::new("steady-b"),
        QueueSpec::new("bursty"),
    ])
    .unwrap()
}

#[test]
fn a_team_that_waited_gets_more_of_the_over_quota_capacity() {
    let tree = three_teams();
    let q = |n: &str| tree.get(n).unwrap().0;
    let mut demand = vec![Resources::zero(); tree.len()];
    for n in ["steady-a", "steady-b", "bursty"] {
        demand[q(n)] = Resources::zero().with_gpus(512);
    }
    let cap = Resources::zero().with_gpus(512);
    let off = compute(&tree, &cap, &demand, None);
    assert_eq!(off.fair[q("bursty")].gpu, 170_667);
    let mut usage = vec![Usage::new(); tree.len()];
    usage[q("steady-a")] = gpu_usage(1_000_000);
    usage[q("steady-b")] = gpu_usage(1_000_000);
    let on = compute(&tree, &cap, &demand, Some(&usage));
    // U/S = 1.5 for the steady teams: F = 2^-6 = 16/1024; the bursty
    // team's is 1024: it gets 512,000 · 1024/1056 = 496,484.8 milli-GPU
    // (97%).
    assert_eq!(on.fair[q("bursty")].gpu, 496_485);
    // The rest split equally (one milli-GPU of rounding to the first name).
    assert_eq!(on.fair[q("steady-a")].gpu, 7_758);
    assert_eq!(on.fair[q("steady-b")].gpu, 7_757);
    // Usage given but all zero: exactly the weights alone.
    let zero = vec![Usage::new(); tree.len()];
    assert_eq!(compute(&tree, &cap, &demand, Some(&zero)), off);
}

proptest! {
    /// More usage never buys a larger share: raising one leaf's usage,
    /// all else equal, never raises its fair share in any resource.
    #[test]
    fn more_usage_never_raises_a_share(
        used in prop::collection::vec(0u128..1_000_000, 3),
        extra in 1u128..1_000_000,
        who in 0usize..3,
        weights in prop::collection::vec(1u32..5, 3),
        wants in prop::collection::vec(1u64..400, 3),
    ) {
        let tree = QueueTree::build(
            ["a", "b", "c"]
                .iter()
                .zip(&weights)
                .map(|(n, w)| QueueSpec::new(*n).weight(*w))
                .collect(),
        )
        .unwrap();
        let ids: Vec<usize> = ["a", "b", "c"].iter().map(|n| tree.get(n).unwrap().0).collect();
        let mut demand = vec![Resources::zero(); tree.len()];
        let mut usage = vec![Usage::new(); tree.len()];
        for i in 0..3 {
            demand[ids[i]] = Resources::zero().with_gpus(wants[i]);
            usage[ids[i]] = gpu_usage(used[i]);
        }
        let cap = Resources::zero().with_gpus(256);
        let before = compute(&tree, &cap, &demand, Some(&usage));
        usage[ids[who]] = gpu_usage(used[who] + extra);
        let after = compute(&tree, &cap, &demand, Some(&usage));
        prop_assert!(after.fair[ids[who]].gpu <= before.fair[ids[who]].gpu,
            "{} -> {}", before.fair[ids[who]].gpu, after.fair[ids[who]].gpu);
        // The whole capacity (or all demand) is still handed out.
        let sum = |fs: &FairShares| ids.iter().map(|&i| fs.fair[i].gpu).sum::<u64>();
        prop_assert_eq!(sum(&after), sum(&before));
    }
}
