//! Running jobs by expected end, sorted only as far as a reservation's
//! projection reads (docs/scheduling.md, section 2).
//!
//! A projection gives back the jobs that end first, and most reservations
//! find room after a few hundred of many thousands: sorting them all, and
//! merging each bind of the cycle into the whole order, cost more than the
//! projections themselves. So the order keeps a sorted prefix, in whole
//! groups of equal end times, and an unsorted pool of the later jobs, and
//! sorts more of the pool in (a selection, then a sort of what was
//! selected) only when a reader asks for more groups.

/// Jobs (by index) with their expected end (ms): `sorted` holds, by end
/// then index, every job ending by its last end; `pool` the rest, in no
/// order, every one ending strictly later.
#[derive(Debug, Default)]
pub(super) struct EndOrder {
    sorted: Vec<(i64, usize)>,
    /// Prefix lengths of `sorted` that end a group of equal end times,
    /// ascending; the last is `sorted.len()`.
    cuts: Vec<usize>,
    pool: Vec<(i64, usize)>,
}

/// How many jobs an extension sorts in at least (it doubles the prefix
/// when that is more).
const CHUNK: usize = 256;

impl EndOrder {
    /// An order over `jobs` (end, index), none sorted yet.
    pub(super) fn new(jobs: Vec<(i64, usize)>) -> Self {
        EndOrder {
            sorted: Vec::new(),
            cuts: Vec::new(),
            pool: jobs,
        }
    }

    /// Whether no job is listed at all.
    pub(super) fn is_empty(&self) -> bool {
        self.sorted.is_empty() && self.pool.is_empty()
    }

    /// The sorted prefix.
    pub(super) fn sorted(&self) -> &[(i64, usize)] {
        &self.sorted
    }

    /// The groups of the sorted prefix, as prefix lengths.
    pub(super) fn cuts(&self) -> &[usize] {
        &self.cuts
    }

    /// The end time of group `k` of the sorted prefix (it must have one).
    pub(super) fn group_end(&self, k: usize) -> i64 {
        self.sorted[self.cuts[k] - 1].0
    }

    /// Adds jobs: into the prefix those that end by its last end (its
    /// groups then recounted), into the pool the rest.
    pub(super) fn add(&mut self, jobs: impl IntoIterator<Item = (i64, usize)>) {
        let mut into_prefix = false;
        for (end, v) in jobs {
            match self.sorted.last() {
                Some(&(last, _)) if end <= last => {
                    let at = self.sorted.partition_point(|e| *e < (end, v));
                    self.sorted.insert(at, (end, v));
                    into_prefix = true;
                }
                _ => self.pool.push((end, v)),
            }
        }
        if into_prefix {
            let s = &self.sorted;
            self.cuts = (1..=s.len())
                .filter(|&i| i == s.len() || s[i].0 != s[i - 1].0)
                .collect();
        }
    }

    /// Sorts more of the pool into the prefix (at least [`CHUNK`] jobs or
    /// as many as it holds, and all of the last group), keeping only the
    /// jobs `keep` accepts (it is told of each once, and may note those it
    /// refuses). Whether the prefix grew by at least one group.
    pub(super) fn extend(&mut self, mut keep: impl FnMut(usize) -> bool) -> bool {
        loop {
            if self.pool.is_empty() {
                return false;
            }
            let m = CHUNK.max(self.sorted.len()).min(self.pool.len());
            let mut chunk: Vec<(i64, usize)> = if m < self.pool.len() {
                self.pool.select_nth_unstable(m - 1);
                let last = self.pool[m - 1].0;
                let mut chunk: Vec<(i64, usize)> = self.pool.drain(..m).collect();
                // The rest of the boundary group comes along.
                let mut i = 0;
                while i < self.pool.len() {
                    if self.pool[i].0 == last {
                        chunk.push(self.pool.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
                chunk
            } else {
                std::mem::take(&mut self.pool)
            };
            chunk.retain(|e| keep(e.1));
            if chunk.is_empty() {
                continue;
            }
            chunk.sort_unstable();
            let from = self.sorted.len();
            self.sorted.extend(chunk);
            for i in from + 1..=self.sorted.len() {
                if i == self.sorted.len() || self.sorted[i].0 != self.sorted[i - 1].0 {
                    self.cuts.push(i);
                }
            }
            return true;
        }
    }

    /// Extends until the prefix has more than `k` groups or the pool is
    /// empty; whether it has.
    pub(super) fn has_group(&mut self, k: usize, mut keep: impl FnMut(usize) -> bool) -> bool {
        while self.cuts.len() <= k {
            if !self.extend(&mut keep) {
                return false;
            }
        }
        true
    }

    /// Extends until every job ending by `t` is in the prefix.
    pub(super) fn cover(&mut self, t: i64, mut keep: impl FnMut(usize) -> bool) {
        while self.sorted.last().is_none_or(|e| e.0 < t) {
            if !self.extend(&mut keep) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reads the whole order group by group, extending as it goes.
    fn read_all(o: &mut EndOrder, mut keep: impl FnMut(usize) -> bool) -> Vec<(i64, usize)> {
        let mut k = 0;
        while o.has_group(k, &mut keep) {
            k += 1;
        }
        assert_eq!(o.cuts.len(), k);
        o.sorted.clone()
    }

    proptest! {
        /// Read in rounds, with jobs added between them (as the cycle
        /// binds) and a refusal that changes between rounds (as jobs stop
        /// holding nodes), the order comes out as the full sort of what
        /// was kept, with a cut after every group; every job it refused
        /// was told to `keep` once, and only those.
        #[test]
        fn reads_as_a_full_sort(
            listed in proptest::collection::vec(0i64..400, 0..900),
            rounds in proptest::collection::vec(
                (0usize..300, proptest::collection::vec(0i64..400, 0..30), 0usize..7),
                0..4,
            ),
        ) {
            let listed: Vec<(i64, usize)> = listed.into_iter().zip(0..).collect();
            let mut o = EndOrder::new(listed.clone());
            let mut all = listed.clone();
            let mut refused: Vec<usize> = Vec::new();
            let mut asked = std::collections::BTreeSet::new();
            // A job is refused when its index is 3 mod 7 in round `r`'s
            // rule; added jobs (indices from 10,000) are never refused.
            let mut rule = 0usize;
            let mut next = 10_000usize;
            for (read, added, r) in rounds {
                rule = r;
                let mut keep = |v: usize| {
                    assert!(asked.insert(v), "job {v} asked twice");
                    let k = v >= 10_000 || rule == 0 || v % 7 != rule;
                    if !k {
                        refused.push(v);
                    }
                    k
                };
                for k in 0..read {
                    o.has_group(k, &mut keep);
                }
                let added: Vec<(i64, usize)> = added
                    .into_iter()
                    .map(|e| {
                        next += 1;
                        (e, next)
                    })
                    .collect();
                all.extend(added.iter().copied());
                o.add(added);
            }
            let got = read_all(&mut o, |v| {
                let k = v >= 10_000 || rule == 0 || v % 7 != rule;
                if !k {
                    refused.push(v);
                }
                k
            });
            let mut want: Vec<(i64, usize)> =
                all.into_iter().filter(|e| !refused.contains(&e.1)).collect();
            want.sort_unstable();
            prop_assert_eq!(&got, &want);
            let cuts: Vec<usize> = (1..=got.len())
                .filter(|&i| i == got.len() || got[i].0 != got[i - 1].0)
                .collect();
            prop_assert_eq!(&o.cuts, &cuts);
        }
    }

    #[test]
    fn cover_brings_in_every_job_ending_by_the_time() {
        let jobs: Vec<(i64, usize)> = (0..2000).map(|v| (((v * 7919) % 1000) as i64, v)).collect();
        let mut o = EndOrder::new(jobs.clone());
        o.cover(300, |_| true);
        let by_300 = jobs.iter().filter(|e| e.0 <= 300).count();
        assert!(o.sorted().len() >= by_300);
        assert!(o.sorted()[..by_300].iter().all(|e| e.0 <= 300));
        assert!(o.sorted().is_sorted());
        // The pool only holds later jobs.
        assert!(
            o.pool
                .iter()
                .all(|e| e.0 > o.sorted().last().map_or(i64::MIN, |l| l.0))
        );
    }
}
