//! What the world held over time, kept by [`ClusterState`]: the usage
//! history (decayed usage in every snapshot, per-job accounting records)
//! and the observed runtimes of the reservations' estimate.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use trainyard_model::Resources;

use crate::{ClusterState, JobAccount, runtimes, usage};

impl ClusterState {
    /// Keeps a usage history from now on (or this one, restored from a
    /// store), sampled by [`ClusterState::sample_usage`]; its decayed
    /// totals go into every snapshot's `usage`.
    pub fn track_usage(&mut self, history: usage::UsageHistory) {
        self.usage = Some(history);
        self.usage_counted.clear();
        self.job_usage.clear();
        self.usage_dirty = self.jobs.keys().cloned().collect();
        self.usage_backdate = true;
    }

    /// Whether the snapshot carries the decayed usage (on by default).
    /// The core reads it only with the time-decayed fair share on; off,
    /// the history still keeps buckets and job accounts, but the decayed
    /// totals are not recomputed every recalculation period. Turned on,
    /// they are computed at the next sample.
    pub fn publish_usage(&mut self, on: bool) {
        if on != self.usage_hidden {
            return;
        }
        self.usage_hidden = !on;
        if on {
            self.usage_publish_due = true;
        } else {
            self.decayed = Arc::default();
            self.decayed_users = Arc::default();
            self.stale.usage = true;
        }
    }

    /// Keeps the latest `window` runtimes of each leaf queue's jobs that
    /// end on their own (`Some`), or none (`None`, and the snapshots carry
    /// none); what `reservations.runtimeEstimate` reads. Runtimes are
    /// measured by the job accounts of the usage history, from when a job
    /// first held something to when it held nothing, at the samples
    /// ([`ClusterState::sample_usage`]); without a history one is kept from
    /// now on, its decayed totals not published. A run during which the
    /// scheduler evicted any of the job's pods is not counted. Called
    /// again with a window, the runtimes kept stay (the oldest dropped
    /// past the new window).
    pub fn track_runtimes(&mut self, window: Option<u32>) {
        match (window, self.runtimes.as_mut()) {
            (None, None) => {}
            (None, Some(_)) => {
                self.runtimes = None;
                self.runtime_samples = Arc::default();
                self.stale.runtimes = true;
            }
            (Some(w), Some(h)) => {
                if h.window() != w.max(1) as usize {
                    h.set_window(w);
                    self.runtime_samples = Arc::new(h.samples());
                    self.stale.runtimes = true;
                }
            }
            (Some(w), None) => {
                if self.usage.is_none() {
                    self.track_usage(usage::UsageHistory::new(usage::ACCOUNTING_HALF_LIFE_S));
                    self.publish_usage(false);
                }
                self.runtimes = Some(runtimes::RuntimeHistory::new(w));
            }
        }
    }

    /// The observed runtimes kept, per queue in the order they ended
    /// (what a checkpoint carries); `None` when they are not tracked.
    pub fn runtimes_recent(&self) -> Option<BTreeMap<String, Vec<i64>>> {
        self.runtimes.as_ref().map(runtimes::RuntimeHistory::recent)
    }

    /// Runtimes observed before this history began (a checkpoint's, per
    /// queue, oldest first): put ahead of those kept, within the window.
    /// Ignored when runtimes are not tracked.
    pub fn restore_runtimes(&mut self, older: &BTreeMap<String, Vec<i64>>) {
        let Some(h) = self.runtimes.as_mut() else {
            return;
        };
        for (queue, ms) in older {
            h.restore_older(queue, ms);
        }
        self.runtime_samples = Arc::new(h.samples());
        self.stale.runtimes = true;
    }

    /// How many observed runtimes are kept, over all queues (none when
    /// they are not tracked).
    pub fn runtimes_kept(&self) -> usize {
        self.runtime_samples.values().map(|r| r.len()).sum()
    }

    /// Job `id`'s current run was cut short by something other than the
    /// job itself: the scheduler evicted its pods by a rule of its own
    /// outside the core's decisions (a gang repair, a walltime), or its
    /// node failed (the simulator). It does not count as an observed
    /// runtime. Evictions assumed or applied from [`Decisions`], and binds
    /// forgotten unconfirmed, are marked already.
    pub fn mark_evicted(&mut self, id: &str) {
        if let Some(acc) = self.job_usage.get_mut(id) {
            acc.evicted = true;
        }
    }

    /// The usage history, when one is kept.
    pub fn usage_history(&mut self) -> Option<&mut usage::UsageHistory> {
        self.usage.as_mut()
    }

    /// Marks job `id` changed for the next snapshot (and the next usage
    /// sample). Every change of a job's world state or view goes through
    /// here.
    pub(crate) fn touch(&mut self, id: &str) {
        self.stale.jobs.insert(id.to_string());
        if self.usage.is_some() {
            self.usage_dirty.insert(id.to_string());
        }
    }

    /// [`ClusterState::record_usage`], then [`ClusterState::recalc_usage`]:
    /// the history told what is held, and the decayed totals the next
    /// snapshot carries updated when due. Does nothing without a history.
    pub fn sample_usage(&mut self, now: trainyard_model::Timestamp) {
        self.record_usage(now);
        self.recalc_usage(now);
    }

    /// Tells the usage history what every (leaf queue, user) holds at
    /// `now` (bound tasks of the world with the assumed decisions laid
    /// over it; the user is the job's namespace), from the jobs changed
    /// since the last sample only. Costs the jobs that changed. When a
    /// recalculation period ([`usage::RECALC_PERIOD_S`]) began, the
    /// decayed totals become due ([`ClusterState::recalc_usage`]).
    pub fn record_usage(&mut self, now: trainyard_model::Timestamp) {
        if self.usage.is_none() {
            return;
        }
        self.refresh();
        let dirty = std::mem::take(&mut self.usage_dirty);
        let Some(h) = self.usage.as_mut() else {
            return;
        };
        let mut runtimes_changed: BTreeSet<String> = BTreeSet::new();
        for id in dirty {
            let job = self.views.get(&id).or_else(|| self.jobs.get(&id));
            let counted = job.and_then(|j| {
                let mut r = Resources::zero();
                for t in &j.tasks {
                    if matches!(t.state, trainyard_model::TaskState::Bound { .. }) {
                        r.add(&t.requests);
                    }
                }
                let user = j.id.split_once('/').map_or("", |(ns, _)| ns);
                (!r.is_zero()).then(|| ((j.queue.clone(), user.to_string()), r))
            });
            let before = self.usage_counted.get(&id);
            if before == counted.as_ref() {
                continue;
            }
            if let Some((key, r)) = before {
                h.held_mut(now, key).saturating_sub(r);
                // The job's own account, up to now, at what it held.
                if let Some(acc) = self.job_usage.get_mut(&id) {
                    let dt = u128::try_from(now.0 - acc.since_ms).unwrap_or(0);
                    acc.used.add_held_ms(r, dt);
                    acc.since_ms = acc.since_ms.max(now.0);
                }
            }
            match counted {
                Some((key, r)) => {
                    h.held_mut(now, &key).add(&r);
                    let backdate = self.usage_backdate;
                    self.job_usage.entry(id.clone()).or_insert_with(|| {
                        // Running before the history began (a restart, a
                        // takeover): the job's own account starts when its
                        // pods did, so its record covers its whole run. The
                        // queues' buckets count from now (what came before
                        // is in the store that recorded it).
                        let mut acc = JobAccount {
                            start_ms: now.0,
                            since_ms: now.0,
                            used: trainyard_model::Usage::new(),
                            evicted: false,
                        };
                        if backdate && let Some(j) = job {
                            for t in &j.tasks {
                                if let (trainyard_model::TaskState::Bound { .. }, Some(s)) =
                                    (&t.state, t.started)
                                    && s.0 < now.0
                                {
                                    acc.start_ms = acc.start_ms.min(s.0);
                                    acc.used.add_held_ms(&t.requests, (now.0 - s.0) as u128);
                                }
                            }
                        }
                        acc
                    });
                    self.usage_counted.insert(id, (key, r));
                }
                None => {
                    if let Some((key, _)) = self.usage_counted.remove(&id)
                        && let Some(acc) = self.job_usage.remove(&id)
                    {
                        let end_ms = now.0.max(acc.start_ms);
                        if !acc.evicted
                            && let Some(r) = self.runtimes.as_mut()
                        {
                            r.record(&key.0, end_ms - acc.start_ms);
                            runtimes_changed.insert(key.0.clone());
                        }
                        self.finished_jobs.push(usage::JobUsage {
                            job: id,
                            queue: key.0,
                            user: key.1,
                            start_ms: acc.start_ms,
                            end_ms,
                            used: acc.used,
                        });
                    }
                }
            }
        }
        if h.advance(now) {
            self.usage_publish_due = true;
        }
        if !runtimes_changed.is_empty()
            && let Some(r) = &self.runtimes
        {
            // Only the queues a run ended in are sorted again.
            let published = Arc::make_mut(&mut self.runtime_samples);
            for q in runtimes_changed {
                if let Some(s) = r.samples_of(&q) {
                    published.insert(q, s);
                }
            }
            self.stale.runtimes = true;
        }
        self.usage_backdate = false;
    }

    /// Whether the decayed totals are due: a recalculation period began,
    /// or the publication was just turned on, or none was published yet.
    pub fn usage_recalc_due(&self) -> bool {
        self.usage.is_some() && !self.usage_hidden && self.usage_publish_due
    }

    /// Recomputes the decayed totals the next snapshot carries, when due
    /// ([`ClusterState::usage_recalc_due`]); returns whether it did. Costs
    /// every (queue, user) of the history: a service runs it after a cycle,
    /// not inside one, as Slurm's decay runs beside its scheduling loop.
    pub fn recalc_usage(&mut self, now: trainyard_model::Timestamp) -> bool {
        if !self.usage_recalc_due() {
            return false;
        }
        self.usage_publish_due = false;
        if let Some(h) = self.usage.as_ref() {
            let by_user = h.decayed_by_user(now);
            // Not compared with the last: decay changes every non-zero
            // total between two recalculations, and the snapshot takes
            // the new maps by pointer.
            if !(by_user.is_empty() && self.decayed_users.is_empty()) {
                self.decayed = Arc::new(usage::per_queue(&by_user));
                self.decayed_users = Arc::new(by_user);
                self.stale.usage = true;
            }
        }
        true
    }

    /// The jobs that stopped holding anything (ended, were evicted or
    /// deleted) since the last call, with what each used while it held
    /// something: the accounting's per-job records.
    pub fn take_finished_jobs(&mut self) -> Vec<usage::JobUsage> {
        std::mem::take(&mut self.finished_jobs)
    }
}
