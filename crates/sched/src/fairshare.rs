//! Hierarchical weighted-DRF fair share.
//!
//! Computed top-down every cycle. For a parent with fair share `F` and its
//! children with (limit-capped) demand `d`:
//!
//! 1. **Quota.** Each child first gets `g = min(quota, d)` per resource. If
//!    the `g`s of a resource add up to more than `F`, that resource is split
//!    in proportion to quota instead, never giving a child more than its `g`
//!    ([`waterfill`], remainders to the earliest children in name order).
//! 2. **Over-quota, weighted DRF.** The remainder goes to children with
//!    unmet demand, priority band by priority band (higher first). Within a
//!    band it is split by progressive filling: every child grows along its
//!    remaining-demand vector `r = d - g` so that (dominant share of what it
//!    got above quota, measured against `F`) / `overQuotaWeight` rises at the
//!    same rate for all. A child stops when its demand is met or when a
//!    resource it needs is exhausted. Weight 0 means no over-quota share in
//!    this step.
//! 3. **Leftovers.** Whatever step 2 could not hand out along demand vectors
//!    (a child blocked on one exhausted resource still wants others) is
//!    split per resource among children still wanting it, by priority band
//!    and then by weight, so nothing is left unassigned while a child below
//!    its limit wants it.
//! 4. Recurse into each child with its result as `F`.
//!
//! Everything is integer arithmetic. Step 2 finds the water level by binary
//! search on a fixed-point scale of 10⁹ per unit of dominant share, so a
//! child's share can fall short of the exact real-valued result by at most
//! one unit per resource plus a 10⁻⁹ relative error; step 3 hands those
//! crumbs back out.

use std::collections::BTreeMap;

use trainyard_model::{QueueTree, ResourceName, Resources};

/// Fixed-point scale of dominant shares: 1.0 = `SCALE`.
const SCALE: u128 = 1_000_000_000;

/// Result of [`compute`]: per queue id (root included), its fair share and
/// its limit-capped demand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FairShares {
    pub fair: Vec<Resources>,
    pub demand: Vec<Resources>,
}

/// Computes fair shares for every queue.
///
/// `capacity` is what the root may hand out. `leaf_demand[q]` is the demand
/// (running + pending requests) of leaf queue `q`; entries for non-leaves are
/// ignored. The result does not depend on anything but these values.
pub fn compute(tree: &QueueTree, capacity: &Resources, leaf_demand: &[Resources]) -> FairShares {
    let n = tree.len();
    let order = tree.top_down();
    // Demand bottom-up, each capped by the queue's own limit.
    let mut demand = vec![Resources::zero(); n];
    for &q in order.iter().rev() {
        let raw = if tree.is_leaf(q) {
            leaf_demand.get(q.0).cloned().unwrap_or_default()
        } else {
            let mut sum = Resources::zero();
            for c in tree.children(q) {
                sum.add(&demand[c.0]);
            }
            sum
        };
        demand[q.0] = if q == QueueTree::ROOT {
            raw
        } else {
            tree.spec(q).limit.clamp(&raw)
        };
    }

    let mut fair = vec![Resources::zero(); n];
    fair[QueueTree::ROOT.0] = capacity.min(&demand[QueueTree::ROOT.0]);
    // The root hands out the whole capacity, not just what is demanded:
    // children are capped by their own demand anyway.
    let root_total = capacity.clone();
    for &p in &order {
        let children = tree.children(p);
        if children.is_empty() {
            continue;
        }
        let total = if p == QueueTree::ROOT {
            root_total.clone()
        } else {
            fair[p.0].clone()
        };
        let kids: Vec<Child> = children
            .iter()
            .map(|c| {
                let spec = tree.spec(*c);
                Child {
                    demand: demand[c.0].clone(),
                    quota: spec.quota.clone(),
                    weight: spec.over_quota_weight as u64,
                    priority: spec.priority,
                }
            })
            .collect();
        let shares = split(&total, &kids);
        for (c, share) in children.iter().zip(shares) {
            fair[c.0] = share;
        }
    }
    FairShares { fair, demand }
}

/// One child as the split sees it.
#[derive(Clone, Debug)]
pub struct Child {
    pub demand: Resources,
    pub quota: Resources,
    pub weight: u64,
    pub priority: i32,
}

/// Splits `total` among `kids` by steps 1–3 of the module doc. The order of
/// `kids` only breaks exact ties (earlier first); callers pass them sorted
/// by name.
pub fn split(total: &Resources, kids: &[Child]) -> Vec<Resources> {
    let dims = dimensions(total, kids);
    let k = kids.len();
    // Step 1: quotas.
    let mut share = vec![Resources::zero(); k];
    for dim in &dims {
        let t = total.get(dim);
        let g: Vec<u64> = kids
            .iter()
            .map(|c| c.quota.get(dim).min(c.demand.get(dim)))
            .collect();
        let sum: u128 = g.iter().map(|v| *v as u128).sum();
        let given = if sum <= t as u128 {
            g
        } else {
            let w: Vec<u64> = kids.iter().map(|c| c.quota.get(dim)).collect();
            waterfill(t, &g, &w)
        };
        for (s, v) in share.iter_mut().zip(given) {
            s.set(dim, v);
        }
    }
    let mut remaining = total.clone();
    for s in &share {
        remaining.saturating_sub(s);
    }

    // Step 2: over-quota by weighted DRF, priority bands high to low.
    for band in priority_bands(kids) {
        let active: Vec<usize> = band.into_iter().filter(|&i| kids[i].weight > 0).collect();
        let want: Vec<Resources> = active
            .iter()
            .map(|&i| {
                let mut r = kids[i].demand.clone();
                r.saturating_sub(&share[i]);
                r
            })
            .collect();
        let weights: Vec<u64> = active.iter().map(|&i| kids[i].weight).collect();
        let got = drf_fill(total, &remaining, &dims, &want, &weights);
        for (j, &i) in active.iter().enumerate() {
            share[i].add(&got[j]);
            remaining.saturating_sub(&got[j]);
        }
    }

    // Step 3: leftovers per resource.
    for dim in &dims {
        for band in priority_bands(kids) {
            let left = remaining.get(dim);
            if left == 0 {
                break;
            }
            let caps: Vec<u64> = band
                .iter()
                .map(|&i| kids[i].demand.get(dim).saturating_sub(share[i].get(dim)))
                .collect();
            if caps.iter().all(|c| *c == 0) {
                continue;
            }
            let mut w: Vec<u64> = band.iter().map(|&i| kids[i].weight).collect();
            if band
                .iter()
                .zip(&caps)
                .all(|(&i, cap)| *cap == 0 || kids[i].weight == 0)
            {
                // Only weight-0 children want it: share equally rather than waste it.
                w = vec![1; band.len()];
            }
            let given = waterfill(left, &caps, &w);
            for (&i, v) in band.iter().zip(given) {
                let cur = share[i].get(dim);
                share[i].set(dim, cur + v);
                remaining.set(dim, remaining.get(dim) - v);
            }
        }
    }
    share
}

/// Resource names present in the total or in any demand, in a fixed order.
fn dimensions(total: &Resources, kids: &[Child]) -> Vec<ResourceName> {
    let mut set: BTreeMap<ResourceName, ()> = BTreeMap::new();
    for n in total.names() {
        set.insert(n, ());
    }
    for c in kids {
        for n in c.demand.names() {
            set.insert(n, ());
        }
    }
    set.into_keys().collect()
}

/// Child indices grouped by priority, highest first; each group in input order.
fn priority_bands(kids: &[Child]) -> Vec<Vec<usize>> {
    let mut bands: BTreeMap<std::cmp::Reverse<i32>, Vec<usize>> = BTreeMap::new();
    for (i, c) in kids.iter().enumerate() {
        bands
            .entry(std::cmp::Reverse(c.priority))
            .or_default()
            .push(i);
    }
    bands.into_values().collect()
}

/// Splits `capacity` so that child `i` gets `min(cap[i], level × weight[i])`
/// for the largest level that fits, exactly in integers. Children with
/// weight 0 get nothing. Units left by rounding go one each to the children
/// with the largest fractional part (earliest first on ties); no child ever
/// gets more than its cap, and the sum is `min(capacity, Σ cap of weighted
/// children)`.
pub fn waterfill(capacity: u64, cap: &[u64], weight: &[u64]) -> Vec<u64> {
    let n = cap.len();
    let mut out = vec![0u64; n];
    let mut idx: Vec<usize> = (0..n).filter(|&i| weight[i] > 0 && cap[i] > 0).collect();
    // Ascending by cap/weight: those saturate first.
    idx.sort_by(|&a, &b| {
        (cap[a] as u128 * weight[b] as u128)
            .cmp(&(cap[b] as u128 * weight[a] as u128))
            .then(a.cmp(&b))
    });
    let mut left = capacity as u128;
    let mut wsum: u128 = idx.iter().map(|&i| weight[i] as u128).sum();
    let mut pos = 0;
    while pos < idx.len() {
        let i = idx[pos];
        // Saturates when its proportional share of what is left covers its cap.
        if cap[i] as u128 * wsum <= left * weight[i] as u128 {
            out[i] = cap[i];
            left -= cap[i] as u128;
            wsum -= weight[i] as u128;
            pos += 1;
        } else {
            break;
        }
    }
    let rest = &idx[pos..];
    if rest.is_empty() || wsum == 0 {
        return out;
    }
    let mut handed = 0u128;
    let mut fracs: Vec<(u128, usize)> = Vec::with_capacity(rest.len());
    for &i in rest {
        let num = left * weight[i] as u128;
        let v = num / wsum;
        out[i] = v as u64;
        handed += v;
        fracs.push((num % wsum, i));
    }
    let mut extra = left - handed;
    fracs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in fracs {
        if extra == 0 {
            break;
        }
        // Strictly below cap here (it did not saturate), so +1 stays within it.
        if out[i] < cap[i] {
            out[i] += 1;
            extra -= 1;
        }
    }
    out
}

/// Weighted DRF progressive filling of `remaining` among children wanting
/// `want[j]` with weights `weight[j] > 0`; dominant shares are measured
/// against `base`. Returns what each child gets.
fn drf_fill(
    base: &Resources,
    remaining: &Resources,
    dims: &[ResourceName],
    want: &[Resources],
    weight: &[u64],
) -> Vec<Resources> {
    let k = want.len();
    let mut got = vec![Resources::zero(); k];
    if k == 0 {
        return got;
    }
    // Direction vectors, scaled so their dominant share is at most 1:
    // a child can never get more than `base` of anything, and scaling keeps
    // the direction (so the DRF outcome) while bounding the arithmetic.
    let mut dir: Vec<Vec<u128>> = vec![vec![0; dims.len()]; k];
    let mut dom: Vec<u128> = vec![0; k];
    let mut active: Vec<bool> = vec![false; k];
    let mut exhausted: Vec<bool> = dims.iter().map(|d| remaining.get(d) == 0).collect();
    for j in 0..k {
        // Dominant share of the raw demand, exactly: max r/base as a fraction.
        let mut best: Option<(u128, u128)> = None; // (r, base) of the dominant dim
        let mut blocked = false;
        for (di, d) in dims.iter().enumerate() {
            let r = want[j].get(d) as u128;
            if r == 0 {
                continue;
            }
            let b = base.get(d) as u128;
            if b == 0 || exhausted[di] {
                blocked = true;
                continue;
            }
            if best.is_none_or(|(br, bb)| r * bb > br * b) {
                best = Some((r, b));
            }
        }
        let Some((dr, db)) = best else { continue };
        if blocked {
            continue;
        }
        let over = dr > db; // dominant share above 1: scale down by db/dr
        for (di, d) in dims.iter().enumerate() {
            let r = want[j].get(d) as u128;
            dir[j][di] = if over { r * db / dr } else { r };
        }
        dom[j] = if over {
            SCALE
        } else {
            (dr * SCALE).div_ceil(db)
        };
        active[j] = dom[j] > 0 && dir[j].iter().any(|v| *v > 0);
    }

    let w: Vec<u128> = weight.iter().map(|v| *v as u128).collect();
    let alloc_at = |j: usize, lambda: u128, di: usize| -> u128 {
        let lw = lambda * w[j];
        if lw >= dom[j] {
            dir[j][di]
        } else {
            dir[j][di] * lw / dom[j]
        }
    };
    let mut frozen: Vec<Option<Vec<u128>>> = vec![None; k];
    let mut lambda_lo: u128 = 0;
    loop {
        let live: Vec<usize> = (0..k)
            .filter(|&j| active[j] && frozen[j].is_none())
            .collect();
        if live.is_empty() {
            break;
        }
        let usage = |lambda: u128| -> Vec<u128> {
            (0..dims.len())
                .map(|di| {
                    let mut s: u128 = 0;
                    for j in 0..k {
                        if let Some(f) = &frozen[j] {
                            s += f[di];
                        } else if active[j] {
                            s += alloc_at(j, lambda, di);
                        }
                    }
                    s
                })
                .collect()
        };
        let fits = |u: &[u128]| {
            dims.iter()
                .enumerate()
                .all(|(di, d)| u[di] <= remaining.get(d) as u128)
        };
        // Level at which every live child is satisfied.
        let lambda_hi = live
            .iter()
            .map(|&j| dom[j].div_ceil(w[j]))
            .max()
            .unwrap_or(0);
        if fits(&usage(lambda_hi)) {
            for &j in &live {
                frozen[j] = Some(
                    (0..dims.len())
                        .map(|di| alloc_at(j, lambda_hi, di))
                        .collect(),
                );
            }
            break;
        }
        // Largest feasible level in [lambda_lo, lambda_hi).
        let (mut lo, mut hi) = (lambda_lo, lambda_hi);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(&usage(mid)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let over = usage(lo + 1);
        let mut newly = false;
        for (di, d) in dims.iter().enumerate() {
            if !exhausted[di] && over[di] > remaining.get(d) as u128 {
                exhausted[di] = true;
                newly = true;
            }
        }
        for &j in &live {
            let blocked = (0..dims.len()).any(|di| exhausted[di] && dir[j][di] > 0);
            let satisfied = lo * w[j] >= dom[j];
            if blocked || satisfied || !newly {
                frozen[j] = Some((0..dims.len()).map(|di| alloc_at(j, lo, di)).collect());
            }
        }
        lambda_lo = lo;
    }
    for j in 0..k {
        if let Some(f) = &frozen[j] {
            for (di, d) in dims.iter().enumerate() {
                // Bounded by `remaining`, which is a u64.
                got[j].set(d, f[di] as u64);
            }
        }
    }
    got
}

#[cfg(test)]
mod tests;
