//! What a forecast's runs start from: the snapshot made ready for the
//! engine, the jobs as the engine's workload, and each run's runtimes.

use std::collections::BTreeMap;
use std::sync::Arc;

use trainyard_model::{Job, RuntimeSamples, Snapshot, Timestamp, Usage};
use trainyard_sched::Config;

use super::{MAX_DURATION_MS, SimJob, SimTask, draw, job_rng, node_of};

/// The snapshot and its jobs, ready to run forward.
pub(super) struct Prepared {
    /// The input snapshot with every task ranked (its index into the
    /// job's expanded tasks; ranks that are not 0..n are renumbered in
    /// task order) and every bound task with a start (`now` when it had
    /// none, which is what the core assumes).
    pub snapshot: Snapshot,
    /// The jobs as the engine's workload, in snapshot order; durations
    /// are set per run.
    pub jobs: Vec<SimJob>,
    /// By job index: the nodes its bound pods are on at `now` (sorted).
    pub running_nodes: Vec<Vec<String>>,
}

/// One run's runtimes.
pub(super) struct Durations {
    /// By job index: when a running job's current run ends (ms; `None`:
    /// never).
    pub ends: Vec<Option<i64>>,
    /// By job index: how long a pending job runs once started (ms).
    pub pending: Vec<u64>,
    /// Some runtime came from the observed runtimes (so sampled runs
    /// differ from the central one).
    pub estimated: bool,
}

pub(super) fn prepare(snapshot: &Snapshot, now: Timestamp) -> Prepared {
    let mut snap = snapshot.clone();
    let mut running_nodes = Vec::with_capacity(snap.jobs.len());
    let mut jobs = Vec::with_capacity(snap.jobs.len());
    for job in &mut snap.jobs {
        let n = job.tasks.len() as u32;
        let mut ranks: Vec<Option<u32>> = job.tasks.iter().map(|t| t.rank).collect();
        ranks.sort_unstable();
        let ranked = ranks.iter().enumerate().all(|(i, r)| *r == Some(i as u32));
        let unstarted = job
            .tasks
            .iter()
            .any(|t| !t.is_pending() && t.started.is_none());
        if !ranked || unstarted {
            let j = Arc::make_mut(job);
            for (i, t) in j.tasks.iter_mut().enumerate() {
                if !ranked {
                    t.rank = Some(i as u32);
                }
                if !t.is_pending() && t.started.is_none() {
                    t.started = Some(now);
                }
            }
        }
        debug_assert!(n == job.tasks.len() as u32);
        let mut on: Vec<String> = job
            .tasks
            .iter()
            .filter_map(|t| node_of(&t.state).map(str::to_string))
            .collect();
        on.sort_unstable();
        on.dedup();
        running_nodes.push(on);
        jobs.push(sim_job(job));
    }
    Prepared {
        snapshot: snap,
        jobs,
        running_nodes,
    }
}

/// Job `job` as the engine's workload unit: one task group per task, in
/// rank order.
pub(crate) fn sim_job(job: &Job) -> SimJob {
    let mut tasks: Vec<(u32, SimTask)> = job
        .tasks
        .iter()
        .map(|t| {
            (
                t.rank.unwrap_or(0),
                SimTask {
                    count: 1,
                    requests: t.requests.clone(),
                    subgroup: t.subgroup.clone(),
                    constraints: t.constraints.clone(),
                },
            )
        })
        .collect();
    tasks.sort_by_key(|t| t.0);
    SimJob {
        id: job.id.clone(),
        queue: job.queue.clone(),
        priority: job.priority,
        submit: job.submit_time,
        duration_ms: MAX_DURATION_MS,
        min_member: job.min_member,
        subgroups: job.subgroups.clone(),
        topology: job.topology.clone(),
        tasks: tasks.into_iter().map(|t| t.1).collect(),
        preemptible: job.preemptible,
        lost_work: None,
        walltime_seconds: job.walltime_seconds,
        rejected: None,
    }
}

impl Prepared {
    /// Indices of the pending jobs (no pod bound) among `ids` (all when
    /// `None`), in snapshot order.
    pub fn targets(&self, ids: Option<&[String]>) -> Vec<usize> {
        let wanted: Option<std::collections::BTreeSet<&str>> =
            ids.map(|ids| ids.iter().map(String::as_str).collect());
        self.snapshot
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| j.tasks.iter().all(|t| t.is_pending()))
            .filter(|(_, j)| wanted.as_ref().is_none_or(|w| w.contains(j.id.as_str())))
            .map(|(i, _)| i)
            .collect()
    }

    /// Whether sampled runs would differ from the central one.
    pub fn has_spread(&self, config: &Config, now: Timestamp) -> bool {
        self.durations(config, now, None).estimated
    }

    /// Each job's runtime for one run: the central one (`sample` `None`),
    /// or sampled run `s` of seed `seed`.
    pub fn durations(
        &self,
        config: &Config,
        now: Timestamp,
        sample: Option<(u64, u32)>,
    ) -> Durations {
        let tree = &self.snapshot.queues;
        let est = config.reservations.estimate();
        let estimates: BTreeMap<&str, &RuntimeSamples> = match est {
            Some(e) => self
                .snapshot
                .runtimes
                .iter()
                .filter(|(q, s)| {
                    tree.get(q).is_some_and(|id| tree.is_leaf(id))
                        && s.len() >= e.min_samples as usize
                })
                .map(|(q, s)| (q.as_str(), s))
                .collect(),
            None => BTreeMap::new(),
        };
        let pct = est.map_or(90, |e| e.percentile);
        let mut estimated = false;
        // The runtime of a job of queue `q` that has run `elapsed` ms.
        let mut runtime = |id: &str, q: &str, elapsed: i64| -> Option<i64> {
            let s = estimates.get(q)?;
            let r = match sample {
                None => s.conditional_percentile(elapsed, pct),
                Some((seed, k)) => {
                    let longer = &s.as_slice()[s.first_longer(elapsed)..];
                    draw(&mut job_rng(seed, k, id), longer)
                }
            };
            estimated |= r.is_some();
            r
        };
        let mut ends = vec![None; self.jobs.len()];
        let mut pending = vec![MAX_DURATION_MS; self.jobs.len()];
        for (i, job) in self.snapshot.jobs.iter().enumerate() {
            let wall = tree
                .walltime(&job.queue, job.walltime_seconds)
                .map(|s| s.min(MAX_DURATION_MS / 1000) as i64 * 1000);
            match job.started_at() {
                Some(start) => {
                    let start = start.0.min(now.0);
                    let end = wall
                        .map(|w| start.saturating_add(w))
                        .filter(|e| *e >= now.0)
                        .or_else(|| {
                            runtime(&job.id, &job.queue, now.0 - start)
                                .map(|r| start.saturating_add(r))
                        });
                    // Ending at `now` would free the room before the
                    // first cycle, which the live cycle did not see.
                    ends[i] = end.map(|e| e.max(now.0 + 1));
                }
                None => {
                    if let Some(d) = wall.or_else(|| runtime(&job.id, &job.queue, 0)) {
                        pending[i] = (d.max(1) as u64).min(MAX_DURATION_MS);
                    }
                }
            }
        }
        Durations {
            ends,
            pending,
            estimated,
        }
    }

    /// The snapshot's decayed usage, held through the runs when the
    /// time-decayed fair share is on (the engine's world does not carry
    /// a history from before `now`).
    pub fn frozen_usage(&self, config: &Config) -> Option<FrozenUsage> {
        let s = &self.snapshot;
        (config.fair_share.usage_half_life_seconds.is_some()
            && !(s.usage.is_empty() && s.user_usage.is_empty()))
        .then(|| (s.usage.clone(), s.user_usage.clone()))
    }
}

/// Decayed usage per queue and per queue and user.
pub(super) type FrozenUsage = (
    Arc<BTreeMap<String, Usage>>,
    Arc<BTreeMap<String, BTreeMap<String, Usage>>>,
);
