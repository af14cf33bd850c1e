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
//! **Rounding.** Everything is integer arithmetic. Step 1 is an exact
//! integer water-fill. Steps 2 and 3 keep amounts in fixed point (`ONE` =
//! 2⁶⁰ per unit) and find the water level by binary search to 2⁻⁶⁰ of a
//! dominant share, summing usage in fixed point *before* rounding; the
//! result is rounded once, per resource, at the end (largest fractional
//! parts up). The promise, checked against an exact rational
//! implementation in the tests: each child's share of each resource is the
//! exact real-valued result of steps 1–3 for its parent's share, rounded
//! down or up. The fixed-point residual behind it stays below a unit for
//! amounts up to about 10¹⁷ units; it is not zero (docs/fair-share.md).
//!
//! The old code summed per-child amounts already rounded down when testing
//! a level, so the level overshot by up to one unit of the scarce resource
//! per child, and each child carried that overshoot into its other
//! resources at its own demand ratio (a megabyte of memory per milli-GPU
//! turns one milli-GPU of slack into a megabyte above the exact share).

use std::collections::BTreeMap;

use trainyard_model::{QueueId, QueueTree, ResourceName, Resources, Usage, exp2_neg_q32};

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
/// ignored. `usage[q]`, when given, is leaf queue `q`'s decayed usage: the
/// over-quota weights of each set of siblings are then scaled by
/// [`usage_factors`] (time-decayed fair share). The result does not depend
/// on anything but these values.
pub fn compute(
    tree: &QueueTree,
    capacity: &Resources,
    leaf_demand: &[Resources],
    usage: Option<&[Usage]>,
) -> FairShares {
    let n = tree.len();
    let order = tree.top_down();
    // Usage of each subtree, bottom-up.
    let subtree_usage: Option<Vec<Usage>> = usage.map(|leaf| {
        let mut u = vec![Usage::new(); n];
        for &q in order.iter().rev() {
            u[q.0] = if tree.is_leaf(q) {
                leaf.get(q.0).cloned().unwrap_or_default()
            } else {
                let mut sum = Usage::new();
                for c in tree.children(q) {
                    sum.add(&u[c.0]);
                }
                sum
            };
        }
        u
    });
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
        let weights = effective_weights(tree, children, subtree_usage.as_deref());
        let kids: Vec<Child> = children
            .iter()
            .zip(weights)
            .map(|(c, weight)| {
                let spec = tree.spec(*c);
                Child {
                    demand: demand[c.0].clone(),
                    quota: spec.quota.clone(),
                    weight,
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

/// The over-quota weights of `children`: their specs' weights, each times
/// its [`usage_factors`] entry when usage is given and some sibling used
/// anything.
fn effective_weights(tree: &QueueTree, children: &[QueueId], usage: Option<&[Usage]>) -> Vec<u64> {
    let raw: Vec<u64> = children
        .iter()
        .map(|c| u64::from(tree.spec(*c).over_quota_weight))
        .collect();
    let Some(usage) = usage else {
        return raw;
    };
    let used: Vec<&Usage> = children.iter().map(|c| &usage[c.0]).collect();
    if used.iter().all(|u| u.is_zero()) {
        return raw;
    }
    let f = usage_factors(&raw, &used);
    raw.iter().zip(f).map(|(w, f)| w * f).collect()
}

/// One in Q10, the fair-share factor's unit.
pub const FACTOR_ONE: u64 = 1 << 10;

/// How steeply past usage lowers a weight: `F = 2^(-k·U/S)` with this `k`
/// (docs/fair-share.md, "Time-decayed fair share", says why 4: Slurm's
/// factor, `k = 1`, orders jobs there; used as a weight it is too gentle
/// to give a team that waited its time back, measured).
pub const USAGE_STEEPNESS: u128 = 4;

/// The fair-share factor for each of a set of siblings, in Q10 (1024 is
/// one): `F = 2^(-k·U/S)` with `k` = [`USAGE_STEEPNESS`], where
/// `S = w / Σw` is the sibling's share of the weights and `U` its share of
/// the siblings' decayed usage, taken in the resource where that share is
/// largest (its dominant usage share). This is Slurm's classic fair-share
/// factor `2^(-U/S)` raised to the power `k`. A sibling that used nothing
/// has `F = 1`; one that used exactly its entitlement, `1/16`; twice it,
/// `1/256`. Never below `1/1024`, so a weight above zero stays above
/// zero. Integers only.
pub fn usage_factors(weights: &[u64], usage: &[&Usage]) -> Vec<u64> {
    let wsum: u128 = weights.iter().map(|w| u128::from(*w)).sum();
    weights
        .iter()
        .zip(dominant_usage_shares(usage))
        .map(|(&w, share)| {
            if w == 0 || wsum == 0 {
                return FACTOR_ONE;
            }
            // U / S = share · Σw / (w · 2³²).
            let f = exp2_neg_q32(share * wsum * USAGE_STEEPNESS, u128::from(w) << 32);
            (f >> 22).max(1)
        })
        .collect()
}

/// Each one's dominant usage share among `usage`, in Q32 (2³² is all of
/// it): its share of the total in the resource where that share is
/// largest. The siblings' `U` of [`usage_factors`], and the order of users
/// inside a leaf queue (the allocate walk: less used first).
pub fn dominant_usage_shares(usage: &[&Usage]) -> Vec<u128> {
    // Per resource, the total.
    let mut totals: BTreeMap<&str, u128> = BTreeMap::new();
    for u in usage {
        for (r, v) in u.iter() {
            let e = totals.entry(r).or_default();
            *e = e.saturating_add(v);
        }
    }
    usage
        .iter()
        .map(|u| {
            u.iter()
                .map(|(r, v)| share_q32(v, totals.get(r).copied().unwrap_or(0)))
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// `part / whole` in Q32 (at most one), rounded down, without overflow.
fn share_q32(part: u128, whole: u128) -> u128 {
    if whole == 0 {
        return 0;
    }
    let part = part.min(whole);
    // Keep `part · 2³²` inside u128.
    let sh = (128 - part.leading_zeros()).saturating_sub(96);
    ((part >> sh) << 32) / (whole >> sh).max(1)
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
    let m = dims.len();
    let totals: Vec<u64> = dims.iter().map(|d| total.get(d)).collect();
    let demand: Vec<Vec<u64>> = kids
        .iter()
        .map(|c| dims.iter().map(|d| c.demand.get(d)).collect())
        .collect();

    // Step 1: quotas, exact integer water-fill. A child cut below
    // `min(quota, demand)` in an oversubscribed resource still wants it
    // while none is left, so step 2 cannot grow it (even if its rounded
    // share happens to reach its demand).
    let mut share = vec![vec![0u128; m]; k];
    let mut cut = vec![false; k];
    for (di, dim) in dims.iter().enumerate() {
        let t = totals[di];
        let g: Vec<u64> = kids
            .iter()
            .map(|c| c.quota.get(dim).min(c.demand.get(dim)))
            .collect();
        let sum: u128 = g.iter().map(|v| *v as u128).sum();
        let given = if sum <= t as u128 {
            g
        } else {
            let w: Vec<u64> = kids.iter().map(|c| c.quota.get(dim)).collect();
            let (given, saturated) = waterfill_flags(t, &g, &w);
            for i in 0..k {
                cut[i] |= g[i] > 0 && !saturated[i];
            }
            given
        };
        for (s, v) in share.iter_mut().zip(given) {
            s[di] = v as u128 * ONE;
        }
    }
    let mut remaining: Vec<u128> = (0..m)
        .map(|di| {
            let used: u128 = share.iter().map(|s| s[di]).sum();
            (totals[di] as u128 * ONE).saturating_sub(used)
        })
        .collect();
    let bands = priority_bands(kids);

    // Step 2: over-quota by weighted DRF, priority bands high to low. A
    // resource that a band used up stays used up for the bands below,
    // even if fixed-point crumbs of it are left (step 3 hands those out):
    // in exact arithmetic nothing is left, so nobody who needs it can grow.
    let mut exhausted: Vec<bool> = remaining.iter().map(|r| *r == 0).collect();
    for band in &bands {
        let active: Vec<usize> = band
            .iter()
            .copied()
            .filter(|&i| kids[i].weight > 0 && !cut[i])
            .collect();
        // Whole units: a child in this band has had only step 1 so far.
        let want: Vec<Vec<u64>> = active
            .iter()
            .map(|&i| {
                (0..m)
                    .map(|di| demand[i][di].saturating_sub((share[i][di] / ONE) as u64))
                    .collect()
            })
            .collect();
        let weights: Vec<u64> = active.iter().map(|&i| kids[i].weight).collect();
        let got = drf_fill(&totals, &remaining, &mut exhausted, &want, &weights);
        for (j, &i) in active.iter().enumerate() {
            for di in 0..m {
                share[i][di] += got[j][di];
                remaining[di] = remaining[di].saturating_sub(got[j][di]);
            }
        }
    }

    // Step 3: leftovers per resource.
    for di in 0..m {
        for band in &bands {
            let left = remaining[di];
            if left == 0 {
                break;
            }
            let caps: Vec<u128> = band
                .iter()
                .map(|&i| (demand[i][di] as u128 * ONE).saturating_sub(share[i][di]))
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
            let given = waterfill_fixed(left, &caps, &w);
            for (&i, v) in band.iter().zip(given) {
                share[i][di] += v;
                remaining[di] = remaining[di].saturating_sub(v);
            }
        }
    }

    // One rounding per resource, at the end.
    let mut out = vec![Resources::zero(); k];
    for (di, dim) in dims.iter().enumerate() {
        let values: Vec<u128> = share.iter().map(|s| s[di]).collect();
        let caps: Vec<u64> = demand.iter().map(|d| d[di]).collect();
        for (o, v) in out.iter_mut().zip(round_shares(totals[di], &values, &caps)) {
            o.set(dim, v);
        }
    }
    out
}

/// Fixed point of steps 2 and 3: one unit of a resource is `ONE`. With
/// amounts below 2⁶⁴ units, every product below fits in a `u128`.
const ONE: u128 = 1 << 60;

/// Rounds one resource's fixed-point shares to whole units: each child gets
/// its value rounded down or up, the rounded-up ones being those with the
/// largest fractional parts (earliest first on ties), so that the sum is
/// the fixed-point sum rounded to the nearest unit, never above `total`,
/// and no child goes above its demand `cap`.
fn round_shares(total: u64, values: &[u128], cap: &[u64]) -> Vec<u64> {
    let sum: u128 = values.iter().sum();
    let target = ((sum + ONE / 2) / ONE).min(total as u128);
    // Below `cap` (a u64) because every value is at most `cap · ONE`.
    let mut out: Vec<u64> = values.iter().map(|v| (v / ONE) as u64).collect();
    let mut extra = target.saturating_sub(out.iter().map(|v| *v as u128).sum());
    let mut order: Vec<usize> = (0..values.len())
        .filter(|&i| !values[i].is_multiple_of(ONE))
        .collect();
    order.sort_by(|&a, &b| (values[b] % ONE).cmp(&(values[a] % ONE)).then(a.cmp(&b)));
    // Then, only if fixed-point error left more to hand out than there
    // are fractional parts, anyone below demand.
    order.extend(0..values.len());
    for i in order {
        if extra == 0 {
            break;
        }
        if out[i] < cap[i] {
            out[i] += 1;
            extra -= 1;
        }
    }
    out
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
    waterfill_flags(capacity, cap, weight).0
}

/// [`waterfill`], also telling which children reached their cap because
/// their exact share covers it (not by a rounding unit).
fn waterfill_flags(capacity: u64, cap: &[u64], weight: &[u64]) -> (Vec<u64>, Vec<bool>) {
    let n = cap.len();
    let mut saturated = vec![false; n];
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
            saturated[i] = true;
            left -= cap[i] as u128;
            wsum -= weight[i] as u128;
            pos += 1;
        } else {
            break;
        }
    }
    let rest = &idx[pos..];
    if rest.is_empty() || wsum == 0 {
        return (out, saturated);
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
    (out, saturated)
}

/// Real-valued water-fill in fixed point: child `i` gets
/// `min(cap[i], level × weight[i])` for the largest level that fits,
/// rounded down to a fixed-point step (so at most one step short each).
fn waterfill_fixed(capacity: u128, cap: &[u128], weight: &[u64]) -> Vec<u128> {
    let n = cap.len();
    let mut out = vec![0u128; n];
    let mut idx: Vec<usize> = (0..n).filter(|&i| weight[i] > 0 && cap[i] > 0).collect();
    idx.sort_by(|&a, &b| {
        wide_cmp(cap[a], weight[b] as u128, cap[b], weight[a] as u128).then(a.cmp(&b))
    });
    let mut left = capacity;
    let mut wsum: u128 = idx.iter().map(|&i| weight[i] as u128).sum();
    let mut pos = 0;
    while pos < idx.len() {
        let i = idx[pos];
        if wide_cmp(cap[i], wsum, left, weight[i] as u128) != std::cmp::Ordering::Greater {
            out[i] = cap[i];
            left -= cap[i];
            wsum -= weight[i] as u128;
            pos += 1;
        } else {
            break;
        }
    }
    if wsum == 0 {
        return out;
    }
    for &i in &idx[pos..] {
        out[i] = mul_div(left, weight[i] as u128, wsum);
    }
    out
}

/// `a · b` as a 256-bit number (high, low).
fn wide_mul(a: u128, b: u128) -> (u128, u128) {
    const M: u128 = u64::MAX as u128;
    let (a1, a0) = (a >> 64, a & M);
    let (b1, b0) = (b >> 64, b & M);
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 64) + (p01 & M) + (p10 & M);
    let lo = (p00 & M) | (mid << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (hi, lo)
}

/// Compares `a · b` with `c · d` exactly.
fn wide_cmp(a: u128, b: u128, c: u128, d: u128) -> std::cmp::Ordering {
    wide_mul(a, b).cmp(&wide_mul(c, d))
}

/// `⌊a · b / c⌋` for `c > 0` and a result that fits in a `u128` (here
/// always `b ≤ c`).
fn mul_div(a: u128, b: u128, c: u128) -> u128 {
    if let Some(p) = a.checked_mul(b) {
        return p / c;
    }
    // Long division of the 256-bit product, one bit at a time; rare
    // (weights in the billions or amounts near 2⁶⁴ units).
    let (hi, lo) = wide_mul(a, b);
    let (mut q, mut r) = (0u128, 0u128);
    for bit in (0..256).rev() {
        let b = if bit >= 128 {
            (hi >> (bit - 128)) & 1
        } else {
            (lo >> bit) & 1
        };
        // r < c, so 2r + b < 2c; track the bit shifted out of r.
        let top = r >> 127;
        r = (r << 1) | b;
        if top == 1 || r >= c {
            r = r.wrapping_sub(c);
            if bit < 128 {
                q |= 1 << bit;
            }
        }
    }
    q
}

/// Weighted DRF progressive filling (step 2) of `remaining` (fixed point)
/// among children wanting `want[j]` (whole units) with weights
/// `weight[j] > 0`; dominant shares are measured against `base`. A child
/// needing an `exhausted` resource cannot grow; resources this call uses
/// up are marked exhausted. Returns what each child gets, in fixed point.
///
/// The water level `L` is a dominant share per unit of weight, in steps of
/// `1/ONE`. At level `L` child `j` has the fraction
/// `ψ = min(1, min(L·w, 1) · base_D / want_D)` of its wanted vector, where
/// `D` is its dominant resource (a dominant share is never more than 1).
/// Usage is summed in fixed point before any rounding, so the level found
/// is the exact one to within one step, and no resource can run over by
/// more than the fixed-point crumbs of the children.
fn drf_fill(
    base: &[u64],
    remaining: &[u128],
    exhausted: &mut [bool],
    want: &[Vec<u64>],
    weight: &[u64],
) -> Vec<Vec<u128>> {
    let k = want.len();
    let m = base.len();
    let mut got = vec![vec![0u128; m]; k];
    if k == 0 {
        return got;
    }
    // Per child: (want_D, base_D) of its dominant resource, and the level
    // at which it is done.
    let mut dominant: Vec<Option<(u128, u128)>> = vec![None; k];
    let mut done_at: Vec<u128> = vec![0; k];
    for j in 0..k {
        let mut best: Option<(u128, u128)> = None;
        let mut blocked = false;
        for di in 0..m {
            let r = want[j][di] as u128;
            if r == 0 {
                continue;
            }
            let b = base[di] as u128;
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
        // Dominant share of the whole want, capped at 1, rounded up so
        // that at `done_at` the fraction `ψ` is exactly its maximum.
        let dom = (dr * ONE).div_ceil(db).min(ONE);
        done_at[j] = dom.div_ceil(weight[j] as u128);
        dominant[j] = Some((dr, db));
    }
    // What child `j` gets at full progress, in fixed point: its want, or,
    // if that is more than the whole base of its dominant resource, its
    // want scaled down to a dominant share of 1 (computed once, exactly
    // rounded, so huge wants lose no precision along the way).
    let target: Vec<Option<Vec<u128>>> = (0..k)
        .map(|j| match dominant[j] {
            Some((dr, db)) if dr > db => Some(
                (0..m)
                    .map(|di| mul_div(want[j][di] as u128 * ONE, db, dr))
                    .collect(),
            ),
            _ => None, // the want itself
        })
        .collect();
    // Progress of child `j` at `level`, from 0 to `ONE`.
    let psi = |j: usize, level: u128| -> u128 {
        let Some((dr, db)) = dominant[j] else {
            return 0;
        };
        let x = level.saturating_mul(weight[j] as u128).min(ONE);
        if dr > db {
            x
        } else {
            // x ≤ 2⁶⁰ and db < 2⁶⁴: no overflow.
            (x * db / dr).min(ONE)
        }
    };
    // `target · f / ONE` without overflow: target < 2¹²⁴, f ≤ 2⁶⁰.
    let alloc = |j: usize, f: u128, di: usize| -> u128 {
        match &target[j] {
            Some(t) => (t[di] / ONE) * f + (t[di] % ONE) * f / ONE,
            // want < 2⁶⁴ and f ≤ 2⁶⁰.
            None => want[j][di] as u128 * f,
        }
    };
    let mut frozen: Vec<Option<u128>> = vec![None; k];
    let mut lambda_lo: u128 = 0;
    loop {
        let live: Vec<usize> = (0..k)
            .filter(|&j| dominant[j].is_some() && frozen[j].is_none())
            .collect();
        if live.is_empty() {
            break;
        }
        // Usage of every resource at `level`, exact in fixed point.
        let usage = |level: u128| -> Vec<u128> {
            let mut u = vec![0u128; m];
            for j in 0..k {
                let f = match frozen[j] {
                    Some(f) => f,
                    None if dominant[j].is_some() => psi(j, level),
                    None => continue,
                };
                for (di, ud) in u.iter_mut().enumerate() {
                    *ud = ud.saturating_add(alloc(j, f, di));
                }
            }
            u
        };
        let fits = |u: &[u128]| u.iter().zip(remaining).all(|(a, r)| a <= r);
        let lambda_hi = live.iter().map(|&j| done_at[j]).max().unwrap_or(0);
        if fits(&usage(lambda_hi)) {
            for &j in &live {
                frozen[j] = Some(ONE);
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
        let at = usage(lo);
        let over = usage(lo + 1);
        let mut newly = false;
        // The exact level lies between `lo` and `lo + 1`, at the fraction
        // `num / den` of the step where the first resource runs out.
        let (mut num, mut den) = (0u128, 1u128);
        for di in 0..m {
            if !exhausted[di] && over[di] > remaining[di] {
                exhausted[di] = true;
                let (n, d) = (remaining[di] - at[di], over[di] - at[di]);
                if !newly || wide_cmp(n, den, num, d).is_lt() {
                    (num, den) = (n, d);
                }
                newly = true;
            }
        }
        for &j in &live {
            let blocked = (0..m).any(|di| exhausted[di] && want[j][di] > 0);
            let satisfied = lo >= done_at[j];
            if satisfied || !newly {
                frozen[j] = Some(psi(j, lo));
            } else if blocked {
                // Frozen at the exact level rather than the step below it,
                // so a fine resource's step does not show up, times the
                // demand ratio, in a coarse one. Usage is linear within the
                // step (up to rounding), so nothing runs over.
                let (a, b) = (psi(j, lo), psi(j, lo + 1));
                frozen[j] = Some(a + mul_div(b - a, num, den));
            }
        }
        lambda_lo = lo;
    }
    for (j, g) in got.iter_mut().enumerate() {
        if let Some(f) = frozen[j] {
            for (di, v) in g.iter_mut().enumerate() {
                *v = alloc(j, f, di);
            }
        }
    }
    got
}

#[cfg(test)]
mod tests;
