//! One structured log line per decision (target `trainyard::decision`):
//! each bind and eviction (job, queue, pod, node), and each pending job
//! when its reason changes (job, queue, reason code, the core's message),
//! so a job that waits for hours with the same reason is one line, not one
//! per cycle. With `--log-format json` each line is one JSON object.

use std::collections::{BTreeMap, HashMap};

use trainyard_model::Snapshot;
use trainyard_sched::{Decisions, PendingJob};

/// The message last logged per pending job.
#[derive(Debug, Default)]
pub struct DecisionLog {
    logged: BTreeMap<String, String>,
}

impl DecisionLog {
    /// The pending jobs whose message differs from the one last logged;
    /// forgets jobs no longer pending. Pure.
    pub fn changed<'d>(&mut self, d: &'d Decisions) -> Vec<&'d PendingJob> {
        let mut now: BTreeMap<String, String> = BTreeMap::new();
        let mut out = Vec::new();
        for p in &d.pending {
            let id = p.job.to_string();
            if self.logged.get(&id) != Some(&p.message) {
                out.push(p);
            }
            now.insert(id, p.message.clone());
        }
        self.logged = now;
        out
    }

    /// Logs the cycle's decisions.
    pub fn log(&mut self, snapshot: &Snapshot, d: &Decisions) {
        let changed = self.changed(d);
        if d.binds.is_empty() && d.evictions.is_empty() && changed.is_empty() {
            return;
        }
        let queues: HashMap<&str, &str> = snapshot
            .jobs
            .iter()
            .map(|j| (j.id.as_str(), j.queue.as_str()))
            .collect();
        let queue_of = |job: &str| queues.get(job).copied().unwrap_or("");
        for b in &d.binds {
            tracing::info!(target: "trainyard::decision", decision = "bind", job = %b.job, queue = queue_of(b.job.as_str()), pod = %b.task, node = %b.node, gpus = ?b.gpus);
        }
        for e in &d.evictions {
            tracing::info!(target: "trainyard::decision", decision = "evict", job = %e.job, queue = queue_of(e.job.as_str()), pod = %e.task, node = %e.node, preemptor = %e.preemptor, "{}", e.message);
        }
        for p in changed {
            tracing::info!(target: "trainyard::decision", decision = "pending", job = %p.job, queue = %p.queue, reason = p.reason.code(), "{}", p.message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{NODE, decide, pod};

    fn cycle(log: &mut DecisionLog, text: &str) -> Vec<String> {
        let (_, d) = decide(text);
        log.changed(&d).iter().map(|p| p.job.to_string()).collect()
    }

    #[test]
    fn a_pending_job_is_logged_when_its_reason_changes_not_every_cycle() {
        let mut log = DecisionLog::default();
        let text = format!("{NODE}{}{}", pod("big", 16), pod("small", 1));
        assert_eq!(cycle(&mut log, &text), ["ml/big"]);
        assert!(cycle(&mut log, &text).is_empty(), "same reason: no line");
        let without = format!("{NODE}{}", pod("small", 1));
        assert!(cycle(&mut log, &without).is_empty());
        assert_eq!(cycle(&mut log, &text), ["ml/big"], "back: logged again");
    }
}
