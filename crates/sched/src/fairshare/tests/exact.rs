//! An exact reference for weighted DRF water-filling: big integers and
//! rationals, no rounding, to check the fixed-point computation against.

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
            let s = *self.0.get(i).unwrap_or(&0) as u64 + *o.0.get(i).unwrap_or(&0) as u64 + carry;
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
