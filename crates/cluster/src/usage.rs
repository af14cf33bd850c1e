//! Usage history: what each (leaf queue, user) held over time, in time
//! buckets, and its time-decayed total, the input of the time-decayed fair
//! share (`fairShare.usageHalfLifeSeconds`, docs/fair-share.md).
//!
//! Held resources change only when a job does: [`UsageHistory::held_mut`]
//! first accrues what the key held until now, then hands out its held
//! resources to change. So a cycle pays for the jobs that changed, not for
//! every job and queue. [`UsageHistory::advance`] moves the clock: when a
//! bucket ends, every held key is accrued to the boundary and the bucket is
//! *closed*: folded into the decayed total (`decayed · 2^(-Δt/halfLife) +
//! bucket`) and handed to whoever keeps history
//! ([`UsageHistory::take_closed`]: the store, the accounting). So the
//! decayed total costs one entry per (queue, user), whatever the history's
//! length, and [`UsageHistory::restore`] rebuilds it from the closed
//! buckets a store kept.
//!
//! The decayed totals the core sees are recomputed once per *recalculation
//! period* (five minutes, or the bucket if shorter), as Slurm recomputes
//! its fair-share factors every `PriorityCalcPeriod` (five minutes by
//! default): with a half-life of days, minutes of staleness change no
//! share, and the snapshot is not rebuilt every cycle.
//!
//! The user is the job's namespace (the part of its id before `/`).
//! Integers only: usage in resource·seconds (`Usage`), decay by
//! [`exp2_neg_q32`]. Pure: time is a parameter.

use std::collections::BTreeMap;

use trainyard_model::{Resources, Timestamp, Usage, exp2_neg_q32};

/// A (leaf queue, user) pair.
pub type Key = (String, String);

/// What each (leaf queue, user) holds.
pub type Held = BTreeMap<Key, Resources>;

/// How often, at most, the decayed totals are recomputed (seconds).
pub const RECALC_PERIOD_S: u64 = 300;

/// The half-life of a history kept for the accounting (and the observed
/// runtimes) when the time-decayed fair share is off: it sets only the
/// buckets' width (an hour) and how long a store keeps them (eight
/// half-lives, 56 days).
pub const ACCOUNTING_HALF_LIFE_S: u64 = 7 * 86_400;

/// One closed bucket: `[start_s, start_s + width_s)` of (queue, user).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClosedBucket {
    pub queue: String,
    pub user: String,
    pub start_s: i64,
    pub width_s: u32,
    pub used: Usage,
}

/// What one job used from when it first held something until it held
/// nothing (ended, evicted, deleted): one accounting record. A job that
/// holds something again later gets another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobUsage {
    pub job: String,
    pub queue: String,
    pub user: String,
    pub start_ms: i64,
    pub end_ms: i64,
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

/// What a key holds now, and the time (ms) up to which it is accrued.
#[derive(Clone, Debug)]
struct Holding {
    held: Resources,
    since_ms: i64,
}

/// The history's state: see the module docs.
#[derive(Clone, Debug)]
pub struct UsageHistory {
    half_life_s: u64,
    bucket_s: u64,
    recalc_s: u64,
    /// The latest time the history was told of (ms): held changes and
    /// advances before it are taken as happening at it.
    clock_ms: Option<i64>,
    /// The open bucket's start (seconds) as of the last advance.
    open_bucket: Option<i64>,
    /// The recalculation period of the last [`UsageHistory::advance`] that
    /// reported one due.
    recalc_period: Option<i64>,
    holding: BTreeMap<Key, Holding>,
    entries: BTreeMap<Key, Entry>,
    closed: Vec<ClosedBucket>,
}

impl UsageHistory {
    /// A history whose usage halves every `half_life_s` seconds (at least
    /// one). Buckets are `half_life / 64` wide, from a minute to an hour.
    pub fn new(half_life_s: u64) -> Self {
        let half_life_s = half_life_s.max(1);
        let bucket_s = (half_life_s / 64).clamp(60, 3600);
        UsageHistory {
            half_life_s,
            bucket_s,
            recalc_s: bucket_s.min(RECALC_PERIOD_S),
            clock_ms: None,
            open_bucket: None,
            recalc_period: None,
            holding: BTreeMap::new(),
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

    /// How often [`UsageHistory::advance`] reports the decayed totals due.
    pub fn recalc_s(&self) -> u64 {
        self.recalc_s
    }

    fn bucket_start(&self, t_s: i64) -> i64 {
        t_s.div_euclid(self.bucket_s as i64) * self.bucket_s as i64
    }

    /// `now`, or the history's clock if that is later (time never runs
    /// backwards inside the history).
    fn at(&self, now: Timestamp) -> i64 {
        self.clock_ms.map_or(now.0, |c| c.max(now.0))
    }

    /// What `key` holds, to change in place: what it held so far is first
    /// counted up to `now`, so a change counts from `now` on.
    pub fn held_mut(&mut self, now: Timestamp, key: &Key) -> &mut Resources {
        let now_ms = self.at(now);
        self.clock_ms = Some(now_ms);
        let (prev, since) = match self.holding.get_mut(key) {
            Some(h) => {
                let since = h.since_ms;
                h.since_ms = now_ms;
                (h.held.clone(), since)
            }
            None => (Resources::zero(), now_ms),
        };
        if !prev.is_zero() {
            self.accrue(key, &prev, since, now_ms);
        }
        &mut self
            .holding
            .entry(key.clone())
            .or_insert_with(|| Holding {
                held: Resources::zero(),
                since_ms: now_ms,
            })
            .held
    }

    /// What `key` holds now.
    pub fn held(&self, key: &Key) -> Option<&Resources> {
        self.holding
            .get(key)
            .map(|h| &h.held)
            .filter(|r| !r.is_zero())
    }

    /// Moves the history's clock to `now`: closes every bucket that ended
    /// by then (accruing what is held up to the boundary) and forgets keys
    /// that hold nothing and whose usage decayed to nothing. Returns
    /// whether a new recalculation period began: the decayed totals
    /// ([`UsageHistory::decayed`]) are then due.
    pub fn advance(&mut self, now: Timestamp) -> bool {
        let now_ms = self.at(now);
        self.clock_ms = Some(now_ms);
        let now_s = now_ms.div_euclid(1000);
        let open_now = self.bucket_start(now_s);
        if self.open_bucket.is_none_or(|b| b < open_now) {
            self.open_bucket = Some(open_now);
            // Accrue every holding up to now (split at the boundaries), then
            // close every bucket that ended, held or not.
            let keys: Vec<Key> = self.holding.keys().cloned().collect();
            for key in &keys {
                self.held_mut(Timestamp(now_ms), key);
            }
            let keys: Vec<Key> = self.entries.keys().cloned().collect();
            for key in keys {
                self.close_until(&key, open_now);
            }
            self.holding.retain(|_, h| !h.held.is_zero());
            // Entries that hold nothing and whose total has decayed to
            // nothing (33 half-lives: the factor is 0 in Q32) go.
            let gone_after = 33 * self.half_life_s as i64;
            let holding = &self.holding;
            self.entries.retain(|k, e| {
                holding.contains_key(k)
                    || !e.open.is_zero()
                    || (!e.decayed.is_zero() && now_s - e.decayed_at < gone_after)
            });
        }
        let period = now_s.div_euclid(self.recalc_s as i64);
        let due = self.recalc_period != Some(period);
        self.recalc_period = Some(period);
        due
    }

    /// Records that `held` is what every (queue, user) holds from `now`
    /// on (what is not in it holds nothing), then advances to `now`; what
    /// was held before counts for the time since. Returns what
    /// [`UsageHistory::advance`] returns. A convenience for callers that
    /// know whole maps; [`UsageHistory::held_mut`] is the incremental way.
    pub fn sample(&mut self, now: Timestamp, held: Held) -> bool {
        let gone: Vec<Key> = self
            .holding
            .keys()
            .filter(|k| !held.contains_key(*k))
            .cloned()
            .collect();
        for key in &gone {
            *self.held_mut(now, key) = Resources::zero();
        }
        for (key, r) in held {
            let h = self.held_mut(now, &key);
            if *h != r {
                *h = r;
            }
        }
        self.advance(now)
    }

    /// Adds `r` held over `[t0, t1)` (ms) to `key`'s buckets.
    fn accrue(&mut self, key: &Key, r: &Resources, t0: i64, t1: i64) {
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
            e.open.add_held_ms(r, dt);
            t = until;
        }
    }

    /// Closes `key`'s open bucket if it starts before `open_start`, and
    /// moves the open bucket there.
    fn close_until(&mut self, key: &Key, open_start: i64) {
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

    /// Decayed usage per leaf queue at `now`: the sum of its users'
    /// ([`UsageHistory::decayed_by_user`]).
    pub fn decayed(&self, now: Timestamp) -> BTreeMap<String, Usage> {
        per_queue(&self.decayed_by_user(now))
    }

    /// Decayed usage per leaf queue and user at `now`: each user's closed
    /// total decayed to `now`, plus its open bucket and what it holds
    /// since it was last accrued (not yet decayed).
    pub fn decayed_by_user(&self, now: Timestamp) -> BTreeMap<String, BTreeMap<String, Usage>> {
        let now_ms = self.at(now);
        let now_s = now_ms.div_euclid(1000);
        // Most entries were decayed last at the same bucket boundary: one
        // factor per age.
        let mut factors: BTreeMap<i64, u64> = BTreeMap::new();
        // Entries and holdings are both ordered by (queue, user): merged,
        // they give the output in order, so the maps are built from sorted
        // runs (no search per key).
        let mut grouped: Vec<(String, Vec<(String, Usage)>)> = Vec::new();
        let mut entries = self.entries.iter().peekable();
        let mut holding = self.holding.iter().peekable();
        loop {
            let key: &Key = match (entries.peek(), holding.peek()) {
                (Some((a, _)), Some((b, _))) => (*a).min(*b),
                (Some((a, _)), None) => a,
                (None, Some((b, _))) => b,
                (None, None) => break,
            };
            let mut d = Usage::new();
            if let Some((_, e)) = entries.next_if(|(k, _)| *k == key) {
                d = e.decayed.clone();
                if now_s > e.decayed_at && !d.is_zero() {
                    let age = now_s - e.decayed_at;
                    let f = *factors
                        .entry(age)
                        .or_insert_with(|| exp2_neg_q32(age as u128, u128::from(self.half_life_s)));
                    d.scale_q32(f);
                }
                d.add(&e.open);
            }
            if let Some((_, h)) = holding.next_if(|(k, _)| *k == key)
                && now_ms > h.since_ms
                && !h.held.is_zero()
            {
                d.add_held_ms(&h.held, (now_ms - h.since_ms) as u128);
            }
            if d.is_zero() {
                continue;
            }
            let (queue, user) = key;
            match grouped.last_mut() {
                Some((q, users)) if q == queue => users.push((user.clone(), d)),
                _ => grouped.push((queue.clone(), vec![(user.clone(), d)])),
            }
        }
        grouped
            .into_iter()
            .map(|(q, users)| (q, users.into_iter().collect()))
            .collect()
    }

    /// The latest time (seconds) this history knows of: its clock, else
    /// the end of its newest closed bucket (a history restored from a
    /// store); `None` when it knows nothing.
    pub fn known_until_s(&self) -> Option<i64> {
        let clock = self.clock_ms.map(|c| c.div_euclid(1000));
        let newest = self.entries.values().map(|e| e.decayed_at).max();
        clock.max(newest)
    }

    /// What was used and is not in a closed bucket handed on yet, as of
    /// `now`: the buckets that ended since the last advance (and those
    /// not yet taken), then each key's open bucket from its start to
    /// `now` (`width_s` is that span, at least a second), with what is
    /// held counted up to `now`. For a report of the period still open
    /// (`/usage`); the history itself does not change.
    pub fn live(&self, now: Timestamp) -> Vec<ClosedBucket> {
        let mut h = self.clone();
        h.advance(now);
        // What is held is accrued at changes and bucket ends only: up to
        // now here.
        let now_ms = h.at(now);
        let keys: Vec<Key> = h.holding.keys().cloned().collect();
        for key in &keys {
            h.held_mut(Timestamp(now_ms), key);
        }
        let now_s = now_ms.div_euclid(1000);
        let mut out = std::mem::take(&mut h.closed);
        for ((queue, user), e) in &h.entries {
            if e.open.is_zero() {
                continue;
            }
            out.push(ClosedBucket {
                queue: queue.clone(),
                user: user.clone(),
                start_s: e.open_start,
                width_s: u32::try_from((now_s - e.open_start).max(1)).unwrap_or(u32::MAX),
                used: e.open.clone(),
            });
        }
        out
    }

    /// The buckets closed since the last call, in the order they closed.
    pub fn take_closed(&mut self) -> Vec<ClosedBucket> {
        std::mem::take(&mut self.closed)
    }

    /// A history rebuilt from the closed buckets a store kept (any order);
    /// nothing is held until told otherwise.
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

/// Per leaf queue, the sum of its users' usage.
pub fn per_queue(by_user: &BTreeMap<String, BTreeMap<String, Usage>>) -> BTreeMap<String, Usage> {
    by_user
        .iter()
        .map(|(q, users)| {
            let mut sum = Usage::new();
            for u in users.values() {
                sum.add(u);
            }
            (q.clone(), sum)
        })
        .collect()
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
    fn a_late_change_counts_from_the_clock_and_idle_entries_go() {
        let mut h = UsageHistory::new(60);
        h.sample(Timestamp(10_000), held(1));
        // Older than the clock: taken as happening at 10 s, not before.
        h.sample(Timestamp(5_000), held(4));
        h.sample(Timestamp(20_000), BTreeMap::new());
        assert_eq!(gpu_s(&h.decayed(Timestamp(20_000)), "a"), 4000 * 10);
        // 33+ half-lives later the usage has decayed to nothing.
        h.sample(Timestamp(20_000 + 60 * 40 * 1000), BTreeMap::new());
        assert!(h.decayed(Timestamp(20_000 + 60 * 40 * 1000)).is_empty());
        assert!(h.entries.is_empty());
        assert!(h.holding.is_empty());
    }

    #[test]
    fn held_changes_count_from_when_they_happen_without_a_sample_between() {
        let mut h = UsageHistory::new(64 * 3600);
        let key = ("a".to_string(), "ns".to_string());
        h.advance(Timestamp(0));
        *h.held_mut(Timestamp(0), &key) = Resources::zero().with_gpus(2);
        // 2 GPUs for 30 min, then 6 for 30 min, then nothing.
        h.held_mut(Timestamp(1_800_000), &key)
            .add(&Resources::zero().with_gpus(4));
        *h.held_mut(Timestamp(3_600_000), &key) = Resources::zero();
        assert!(h.advance(Timestamp(3_600_000)));
        let closed = h.take_closed();
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].used.get(&ResourceName::Gpu), (2000 + 6000) * 1800);
        assert!(h.held(&key).is_none());
    }

    #[test]
    fn held_time_is_counted_across_buckets_before_any_advance() {
        let mut h = UsageHistory::new(64 * 3600);
        let key = ("a".to_string(), "ns".to_string());
        *h.held_mut(Timestamp(0), &key) = Resources::zero().with_gpus(1);
        // Still held, never changed: what the decayed totals show grows.
        let at_90 = gpu_s(&h.decayed(Timestamp(5_400_000)), "a");
        assert_eq!(at_90, 1000 * 5400);
        h.advance(Timestamp(7_200_000));
        let closed = h.take_closed();
        assert_eq!(
            closed.iter().map(|b| b.start_s).collect::<Vec<_>>(),
            vec![0, 3600]
        );
        assert_eq!(h.held(&key), Some(&Resources::zero().with_gpus(1)));
    }

    #[test]
    fn the_open_period_is_reported_live_without_changing_the_history() {
        let mut h = UsageHistory::new(7 * 86_400);
        assert_eq!(h.bucket_s(), 3600);
        // 60 GPUs from 10:00 (36_000 s), sampled at 10:01; five minutes in.
        h.sample(Timestamp(36_000_000), held(60));
        h.sample(Timestamp(36_060_000), held(60));
        assert!(h.take_closed().is_empty());
        let live = h.live(Timestamp(36_300_000));
        assert_eq!(live.len(), 1);
        assert_eq!(
            (live[0].start_s, live[0].width_s),
            (36_000, 300),
            "the hour's bucket, from its start to now"
        );
        assert_eq!(live[0].used.get(&ResourceName::Gpu), 60_000 * 300);
        // Nothing changed: the same answer again, and the bucket closes
        // with the whole hour.
        assert_eq!(h.live(Timestamp(36_300_000)), live);
        // Past the hour without a sample: the ended hour is closed in the
        // answer, and the new one is open.
        let later = h.live(Timestamp(39_900_000));
        assert_eq!(
            later
                .iter()
                .map(|b| (b.start_s, b.width_s, b.used.get(&ResourceName::Gpu)))
                .collect::<Vec<_>>(),
            vec![(36_000, 3600, 60_000 * 3600), (39_600, 300, 60_000 * 300)]
        );
        assert!(h.take_closed().is_empty());
    }

    #[test]
    fn recalculation_is_due_once_per_period() {
        let mut h = UsageHistory::new(7 * 86_400);
        assert_eq!(h.recalc_s(), RECALC_PERIOD_S);
        assert!(h.advance(Timestamp(0)));
        assert!(!h.advance(Timestamp(1_000)));
        assert!(!h.advance(Timestamp(299_999)));
        assert!(h.advance(Timestamp(300_000)));
        assert!(!h.advance(Timestamp(301_000)));
        // A short half-life recalculates every bucket.
        assert_eq!(UsageHistory::new(3600).recalc_s(), 60);
    }
}
