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
    /// jobs `keep` accepts. Whether the prefix grew by at least one group.
    pub(super) fn extend(&mut self, keep: impl Fn(usize) -> bool) -> bool {
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
    pub(super) fn has_group(&mut self, k: usize, keep: impl Fn(usize) -> bool) -> bool {
        while self.cuts.len() <= k {
            if !self.extend(&keep) {
                return false;
            }
        }
        true
    }

    /// Extends until every job ending by `t` is in the prefix.
    pub(super) fn cover(&mut self, t: i64, keep: impl Fn(usize) -> bool) {
        while self.sorted.last().is_none_or(|e| e.0 < t) {
            if !self.extend(&keep) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The whole order, read group by group with extensions, is the full
    /// sort of what was listed and inserted (less what `keep` refused),
    /// with a cut after every group.
    fn read_all(o: &mut EndOrder, keep: impl Fn(usize) -> bool) -> Vec<(i64, usize)> {
        let mut k = 0;
        while o.has_group(k, &keep) {
            k += 1;
        }
        assert_eq!(o.cuts.len(), k);
        o.sorted.clone()
    }

    proptest! {
        #[test]
        fn reads_as_a_full_sort(
            listed in proptest::collection::vec(0i64..40, 0..700),
            later in proptest::collection::vec(0i64..40, 0..50),
            read_first in 0usize..6,
            refused in 0usize..7,
        ) {
            // Jobs inserted later (indices from 1000) are always kept.
            let keep = |v: usize| v >= 1000 || refused == 0 || v % 7 != refused;
            let listed: Vec<(i64, usize)> = listed.into_iter().zip(0..).collect();
            let later: Vec<(i64, usize)> = later.into_iter().zip(1000..).collect();
            let mut o = EndOrder::new(listed.clone());
            // Some groups read, then jobs bound later come in.
            for k in 0..read_first {
                o.has_group(k, keep);
            }
            o.add(later.iter().copied());
            let got = read_all(&mut o, keep);
            let mut want: Vec<(i64, usize)> =
                listed.iter().chain(&later).filter(|e| keep(e.1)).copied().collect();
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
