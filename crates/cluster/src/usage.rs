//! Usage history: what each (leaf queue, user) held over time, in time
//! buckets, and its time-decayed total, the input of the time-decayed fair
//! share (`fairShare.usageHalfLifeSeconds`, docs/fair-share.md).
//!
//! Sampled once per cycle ([`UsageHistory::sample`]): what was held at
//! the previous sample counts for the time since, split at bucket
//! boundaries. A bucket that ends is *closed*: it is folded into the
//! decayed total (`decayed · 2^(-Δt/halfLife) + bucket`) and handed to
//! whoever keeps history ([`UsageHistory::take_closed`]: the store, the
//! accounting). So the decayed total costs one entry per (queue, user),
//! whatever the history's length, and [`UsageHistory::restore`] rebuilds
//! it from the closed buckets a store kept.
//!
//! The user is the job's namespace (the part of its id before `/`).
//! Integers only: usage in resource·seconds (`Usage`), decay by
//! [`exp2_neg_q32`]. Pure: time is a parameter.

use std::collections::BTreeMap;

use trainyard_model::{Resources, Timestamp, Usage, exp2_neg_q32};

/// What each (leaf queue, user) holds.
pub type Held = BTreeMap<(String, String), Resources>;

/// One closed bucket: `[start_s, start_s + width_s)` of (queue, user).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClosedBucket {
    pub queue: String,
    pub user: String,
    pub start_s: i64,
    pub width_s: u32,
    pub used: Usage,
}

#[derive(Clone, Debug, Default)]
struct Entry {
    /// Start of the open bucket, seconds.
    open_start: i64,
    /// Usage in the open bucket.
    open: Usage,
    /// Decayed total of the closed buckets, as of `decayed_at`.
    decayed: Usage,
    decayed_at: i64,
}

/// The history's state: see the module docs.
#[derive(Clone, Debug)]
pub struct UsageHistory {
    half_life_s: u64,
    bucket_s: u64,
    /// The last sample's time (ms) and what was held then.
    last: Option<(i64, Held)>,
    entries: BTreeMap<(String, String), Entry>,
    closed: Vec<ClosedBucket>,
}

impl UsageHistory {
    /// A history whose usage halves every `half_life_s` seconds (at least
    /// one). Buckets are `half_life / 64` wide, from a minute to an hour.
    pub fn new(half_life_s: u64) -> Self {
        let half_life_s = half_life_s.max(1);
        UsageHistory {
            half_life_s,
            bucket_s: (half_life_s / 64).clamp(60, 3600),
            last: None,
            entries: BTreeMap::new(),
            closed: Vec::new(),
        }
    }

    pub fn half_life_s(&self) -> u64 {
        self.half_life_s
    }

    pub fn bucket_s(&self) -> u64 {
        self.bucket_s
    }

    fn bucket_start(&self, t_s: i64) -> i64 {
        t_s.div_euclid(self.bucket_s as i64) * self.bucket_s as i64
    }

    /// Records that `held` ((leaf queue, user) → resources) is what is
    /// held from `now` on; what the previous sample held counts for the
    /// time between them. A sample older than the last is ignored.
    pub fn sample(&mut self, now: Timestamp, held: Held) {
        let now_ms = now.0;
        if let Some((t0, prev)) = self.last.take() {
            if now_ms < t0 {
                self.last = Some((t0, prev));
                return;
            }
            for (key, r) in &prev {
                self.accrue(key, r, t0, now_ms);
            }
        }
        // Close every bucket that ended by now, held or not.
        let now_s = now_ms.div_euclid(1000);
        let open_now = self.bucket_start(now_s);
        let keys: Vec<(String, String)> = self.entries.keys().cloned().collect();
        for key in keys {
            self.close_until(&key, open_now);
        }
        // Entries that hold nothing and whose total has decayed to nothing
        // (33 half-lives: the factor is 0 in Q32) go.
        let gone_after = 33 * self.half_life_s as i64;
        let last_held = &held;
        self.entries.retain(|k, e| {
            last_held.contains_key(k)
                || !e.open.is_zero()
                || (!e.decayed.is_zero() && now_s - e.decayed_at < gone_after)
        });
        self.last = Some((now_ms, held));
    }

    /// Adds `r` held over `[t0, t1)` (ms) to `key`'s buckets.
    fn accrue(&mut self, key: &(String, String), r: &Resources, t0: i64, t1: i64) {
        let mut t = t0;
        while t < t1 {
            let start = self.bucket_start(t.div_euclid(1000));
            let end_ms = (start + self.bucket_s as i64) * 1000;
            let until = t1.min(end_ms);
            self.close_until(key, start);
            let e = self.entries.entry(key.clone()).or_insert_with(|| Entry {
                open_start: start,
                decayed_at: start,
                ..Entry::default()
            });
            let dt = (until - t) as u128;
            for (name, v) in r.iter() {
                e.open.add_to(name.as_str(), u128::from(v) * dt / 1000);
            }
            t = until;
        }
    }

    /// Closes `key`'s open bucket if it starts before `open_start`, and
    /// moves the open bucket there.
    fn close_until(&mut self, key: &(String, String), open_start: i64) {
        let hl = self.half_life_s;
        let width = self.bucket_s;
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        if e.open_start >= open_start {
            return;
        }
        let end = e.open_start + width as i64;
        if !e.open.is_zero() {
            decay_to(&mut e.decayed, &mut e.decayed_at, end, hl);
            e.decayed.add(&e.open);
            self.closed.push(ClosedBucket {
                queue: key.0.clone(),
                user: key.1.clone(),
                start_s: e.open_start,
                width_s: width as u32,
                used: std::mem::take(&mut e.open),
            });
        }
        e.open_start = open_start;
    }

    /// Decayed usage per leaf queue at `now`: each user's closed total
    /// decayed to `now`, plus its open bucket (not yet decayed).
    pub fn decayed(&self, now: Timestamp) -> BTreeMap<String, Usage> {
        let now_s = now.0.div_euclid(1000);
        let mut out: BTreeMap<String, Usage> = BTreeMap::new();
        for ((queue, _), e) in &self.entries {
            let mut d = e.decayed.clone();
            let mut at = e.decayed_at;
            decay_to(&mut d, &mut at, now_s, self.half_life_s);
            d.add(&e.open);
            if !d.is_zero() {
                out.entry(queue.clone()).or_default().add(&d);
            }
        }
        out
    }

    /// The buckets closed since the last call, in the order they closed.
    pub fn take_closed(&mut self) -> Vec<ClosedBucket> {
        std::mem::take(&mut self.closed)
    }

    /// A history rebuilt from the closed buckets a store kept (any order);
    /// nothing is held until the next sample.
    pub fn restore(half_life_s: u64, buckets: impl IntoIterator<Item = ClosedBucket>) -> Self {
        let mut h = UsageHistory::new(half_life_s);
        let mut sorted: Vec<ClosedBucket> = buckets.into_iter().collect();
        sorted.sort_by(|a, b| (a.start_s, &a.queue, &a.user).cmp(&(b.start_s, &b.queue, &b.user)));
        for b in sorted {
            let end = b.start_s + i64::from(b.width_s);
            let next_open = h.bucket_start(end);
            let e = h.entries.entry((b.queue, b.user)).or_insert_with(|| Entry {
                open_start: end,
                decayed_at: end,
                ..Entry::default()
            });
            decay_to(&mut e.decayed, &mut e.decayed_at, end, h.half_life_s);
            e.decayed.add(&b.used);
            e.open_start = e.open_start.max(next_open);
        }
        h
    }
}

/// Decays `d` (as of `*at`) to `to`, seconds; never backwards.
fn decay_to(d: &mut Usage, at: &mut i64, to: i64, half_life_s: u64) {
    if to > *at {
        if !d.is_zero() {
            d.scale_q32(exp2_neg_q32((to - *at) as u128, u128::from(half_life_s)));
        }
        *at = to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::ResourceName;

    fn held(gpus: u64) -> Held {
        BTreeMap::from([(
            ("a".to_string(), "ns".to_string()),
            Resources::zero().with_gpus(gpus),
        )])
    }

    fn gpu_s(u: &BTreeMap<String, Usage>, q: &str) -> u128 {
        u.get(q).map_or(0, |u| u.get(&ResourceName::Gpu))
    }

    #[test]
    fn held_time_accrues_and_closed_buckets_hand_it_on_exactly() {
        let mut h = UsageHistory::new(64 * 3600);
        assert_eq!(h.bucket_s(), 3600);
        h.sample(Timestamp(0), held(2));
        // 2 GPUs for 2.5 hours.
        h.sample(Timestamp(9_000_000), held(0));
        let closed = h.take_closed();
        assert_eq!(closed.len(), 2);
        assert_eq!(
            closed.iter().map(|b| b.start_s).collect::<Vec<_>>(),
            vec![0, 3600]
        );
        assert!(
            closed
                .iter()
                .all(|b| b.used.get(&ResourceName::Gpu) == 2000 * 3600)
        );
        // Decayed now: two closed hours (slightly decayed) + the open half hour.
        let d = gpu_s(&h.decayed(Timestamp(9_000_000)), "a");
        let undecayed = 2000 * 9000;
        assert!(d < undecayed && d > undecayed * 99 / 100, "{d}");
    }

    #[test]
    fn usage_halves_every_half_life() {
        let hl = 7 * 86_400;
        let mut h = UsageHistory::new(hl);
        h.sample(Timestamp(0), held(8));
        h.sample(Timestamp(3_600_000), held(0));
        let at = |s: u64| gpu_s(&h.decayed(Timestamp((3600 + s as i64) * 1000)), "a");
        let base = at(0);
        assert_eq!(base, 8000 * 3600);
        let one = at(hl);
        let two = at(2 * hl);
        assert!(
            one.abs_diff(base / 2) <= base / 100_000,
            "{one} vs {}",
            base / 2
        );
        assert!(
            two.abs_diff(base / 4) <= base / 100_000,
            "{two} vs {}",
            base / 4
        );
    }

    #[test]
    fn restoring_from_closed_buckets_gives_the_same_decayed_usage() {
        let hl = 3 * 3600;
        let mut h = UsageHistory::new(hl);
        let mut all = Vec::new();
        for step in 0..40i64 {
            h.sample(Timestamp(step * 700_000), held((step % 5) as u64));
            all.extend(h.take_closed());
        }
        // At a bucket boundary nothing is open, so both agree exactly.
        let end = 40 * 700_000;
        let boundary = (end / 1000 / h.bucket_s() as i64 + 1) * h.bucket_s() as i64 * 1000;
        h.sample(Timestamp(boundary), BTreeMap::new());
        all.extend(h.take_closed());
        let restored = UsageHistory::restore(hl, all.into_iter().rev());
        let later = Timestamp(boundary + 5_000_000);
        assert_eq!(h.decayed(later), restored.decayed(later));
        assert!(gpu_s(&h.decayed(later), "a") > 0);
    }

    #[test]
    fn an_old_sample_is_ignored_and_idle_entries_go() {
        let mut h = UsageHistory::new(60);
        h.sample(Timestamp(10_000), held(1));
        h.sample(Timestamp(5_000), held(4));
        h.sample(Timestamp(20_000), BTreeMap::new());
        assert_eq!(gpu_s(&h.decayed(Timestamp(20_000)), "a"), 1000 * 10);
        // 33+ half-lives later the usage has decayed to nothing.
        h.sample(Timestamp(20_000 + 60 * 40 * 1000), BTreeMap::new());
        assert!(h.decayed(Timestamp(20_000 + 60 * 40 * 1000)).is_empty());
        assert!(h.entries.is_empty());
    }
}
