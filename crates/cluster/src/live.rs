//! The usage of the period still open, for reports asked of a running
//! service (`/usage`): what the history and the job accounts hold beyond
//! the closed buckets and finished jobs handed on so far.

use crate::{ClusterState, usage};

impl ClusterState {
    /// The usage not yet handed on, as of `now`, for a report of the
    /// period still open: the usage history's live buckets
    /// ([`usage::UsageHistory::live`]; none without a history), and each
    /// job still holding something with what it used so far (its account
    /// up to `now`, `end_ms` = `now`), by job id. As of the last
    /// [`ClusterState::record_usage`]: a change since counts from the next.
    pub fn live_usage(
        &self,
        now: trainyard_model::Timestamp,
    ) -> (Vec<usage::ClosedBucket>, Vec<usage::JobUsage>) {
        let Some(h) = self.usage.as_ref() else {
            return (Vec::new(), Vec::new());
        };
        let mut running: Vec<usage::JobUsage> = self
            .job_usage
            .iter()
            .filter_map(|(id, acc)| {
                let ((queue, user), held) = self.usage_counted.get(id)?;
                let mut used = acc.used.clone();
                let dt = u128::try_from(now.0 - acc.since_ms).unwrap_or(0);
                used.add_held_ms(held, dt);
                Some(usage::JobUsage {
                    job: id.clone(),
                    queue: queue.clone(),
                    user: user.clone(),
                    start_ms: acc.start_ms,
                    end_ms: now.0.max(acc.start_ms),
                    used,
                })
            })
            .collect();
        running.sort_by(|a, b| a.job.cmp(&b.job));
        (h.live(now), running)
    }
}
