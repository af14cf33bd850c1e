//! Observed job runtimes: what the reservations estimate a running job's
//! end from when it declares no walltime.

use serde::{Deserialize, Serialize};

/// The runtimes (ms) of a leaf queue's last jobs that ended on their own
/// (not evicted by the scheduler), ascending. Kept by
/// `trainyard_cluster::ClusterState::track_runtimes`; read by the core's
/// reservations (`reservations.runtimeEstimate`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<i64>", into = "Vec<i64>")]
pub struct RuntimeSamples {
    /// Ascending, each at least 0.
    sorted_ms: Vec<i64>,
}

impl From<Vec<i64>> for RuntimeSamples {
    /// Any list: negatives count as 0, and the list is sorted.
    fn from(mut ms: Vec<i64>) -> Self {
        for m in &mut ms {
            *m = (*m).max(0);
        }
        ms.sort_unstable();
        RuntimeSamples { sorted_ms: ms }
    }
}

impl From<RuntimeSamples> for Vec<i64> {
    fn from(s: RuntimeSamples) -> Self {
        s.sorted_ms
    }
}

impl RuntimeSamples {
    /// The samples, ascending.
    pub fn as_slice(&self) -> &[i64] {
        &self.sorted_ms
    }

    pub fn len(&self) -> usize {
        self.sorted_ms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted_ms.is_empty()
    }

    /// The `percentile` (1–100, nearest rank) of the runtimes longer than
    /// `elapsed_ms`: how long a job that has run `elapsed_ms` is expected
    /// to run in all, judged by the jobs that ran longer. `None` when none
    /// ran longer. Always more than `elapsed_ms`.
    pub fn conditional_percentile(&self, elapsed_ms: i64, percentile: u8) -> Option<i64> {
        self.percentile_from(self.first_longer(elapsed_ms), percentile)
    }

    /// Where the runtimes longer than `elapsed_ms` begin.
    pub fn first_longer(&self, elapsed_ms: i64) -> usize {
        self.sorted_ms.partition_point(|&x| x <= elapsed_ms)
    }

    /// The `percentile` (nearest rank) of the runtimes from position
    /// `first` on; `None` when there are none. What
    /// [`RuntimeSamples::conditional_percentile`] gives for the elapsed
    /// times whose [`RuntimeSamples::first_longer`] is `first`.
    pub fn percentile_from(&self, first: usize, percentile: u8) -> Option<i64> {
        let s = &self.sorted_ms;
        let longer = s.len().checked_sub(first).filter(|&n| n > 0)?;
        let p = usize::from(percentile.clamp(1, 100));
        // Nearest rank: the smallest sample with at least p% at or below it.
        let rank = (p * longer).div_ceil(100).max(1);
        Some(s[first + rank - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_is_of_the_runs_longer_than_the_elapsed_time() {
        let s = RuntimeSamples::from((1..=10).rev().map(|m| m * 1000).collect::<Vec<_>>());
        assert_eq!(s.as_slice()[0], 1000);
        assert_eq!(s.conditional_percentile(0, 90), Some(9000));
        assert_eq!(s.conditional_percentile(0, 100), Some(10_000));
        assert_eq!(s.conditional_percentile(0, 1), Some(1000));
        assert_eq!(s.conditional_percentile(0, 50), Some(5000));
        // Ran 6 s: of 7..10 s, the 90th percentile is the 4th.
        assert_eq!(s.conditional_percentile(6000, 90), Some(10_000));
        assert_eq!(s.conditional_percentile(6000, 50), Some(8000));
        assert_eq!(s.conditional_percentile(9999, 50), Some(10_000));
        // Longer than every run: no estimate.
        assert_eq!(s.conditional_percentile(10_000, 90), None);
        assert_eq!(
            RuntimeSamples::default().conditional_percentile(0, 90),
            None
        );
    }

    #[test]
    fn equal_runtimes_are_passed_together() {
        let s = RuntimeSamples::from(vec![1000, 2000, 2000, 2000, 5000]);
        assert_eq!(s.first_longer(999), 0);
        assert_eq!(s.first_longer(1000), 1);
        // Ran 2 s: every 2-s run is behind it, not some of them.
        assert_eq!(s.first_longer(2000), 4);
        assert_eq!(s.conditional_percentile(2000, 50), Some(5000));
        assert_eq!(s.percentile_from(1, 50), Some(2000));
        assert_eq!(s.percentile_from(5, 50), None);
        assert_eq!(s.percentile_from(6, 50), None);
    }

    #[test]
    fn a_read_list_is_sorted_and_clamped() {
        let s: RuntimeSamples = serde_json::from_str("[5, -3, 2]").unwrap();
        assert_eq!(s.as_slice(), &[0, 2, 5]);
        assert_eq!(serde_json::to_string(&s).unwrap(), "[0,2,5]");
    }
}
