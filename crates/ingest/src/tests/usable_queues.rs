//! The live rule for Queues the tree cannot use: each is left out with
//! the offline reader's reason, and the rest is built.

use super::*;

fn usable(text: &str) -> UsableTree {
    let objects = read(&[Source::new("queues.yaml", text)]);
    assert!(objects.errors.is_empty(), "{:?}", objects.errors);
    usable_tree(&objects.queues, true, &LoadOptions::default())
}

fn excluded(u: &UsableTree) -> String {
    u.excluded
        .iter()
        .map(|(q, why)| format!("{q}: {why}"))
        .collect::<Vec<_>>()
        .join("\n")
}

const Q: &str = "apiVersion: trainyard.io/v1alpha1\nkind: Queue\n";

#[test]
fn bad_queues_are_left_out_with_their_reasons_and_the_rest_is_built() {
    let text = [
        "metadata: {name: team}\nspec: {quota: {nvidia.com/gpu: 8}}",
        "metadata: {name: loop-a}\nspec: {parent: loop-b}",
        "metadata: {name: loop-b}\nspec: {parent: loop-a}",
        "metadata: {name: orphan}\nspec: {parent: nope}",
        "metadata: {name: below-orphan}\nspec: {parent: orphan}",
        "metadata: {name: org}\nspec: {quota: {nvidia.com/gpu: 4}}",
        "metadata: {name: kid}\nspec: {parent: org, quota: {nvidia.com/gpu: 8}}",
        "metadata: {name: neg}\nspec: {quota: {nvidia.com/gpu: -8}}",
        "metadata: {name: words}\nspec: {quota: {nvidia.com/gpu: 8 GPUs}}",
    ]
    .map(|d| format!("{Q}{d}"))
    .join("\n---\n");
    let u = usable(&text);
    expect![[r#"
        below-orphan: its parent queue "orphan" is excluded (spec.parent: queue "orphan": parent "nope" does not exist)
        kid: its parent queue "org" is excluded (spec.quota.nvidia.com/gpu: children of queue "org" (kid) have quotas summing to 8 nvidia.com/gpu, above the parent's quota of 4)
        loop-a: spec.parent: queues loop-a -> loop-b -> loop-a form a cycle through their parents
        loop-b: spec.parent: queues loop-a -> loop-b -> loop-a form a cycle through their parents
        neg: spec.quota.nvidia.com/gpu: quantity "-8" is negative; expected an amount of zero or more
        org: spec.quota.nvidia.com/gpu: children of queue "org" (kid) have quotas summing to 8 nvidia.com/gpu, above the parent's quota of 4
        orphan: spec.parent: queue "orphan": parent "nope" does not exist
        words: spec.quota.nvidia.com/gpu: invalid quantity "8 GPUs"; expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as "500m", "8" or "64Gi""#]]
    .assert_eq(&excluded(&u));
    assert!(u.tree.get("team").is_some(), "the valid queue is scheduled");
    assert!(u.tree.get("default").is_some(), "the default queue too");
    assert_eq!(
        u.errors.len(),
        7,
        "each problem once (a cycle is one; a queue below an excluded one too): {:?}",
        u.errors
    );
}
