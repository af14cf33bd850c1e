//! One tick: a leader's cycle (forget, snapshot, schedule, assume, write,
//! repair, report, status, admit, checkpoint), or a standby's usage
//! sample.

use trainyard_model::Timestamp;

use super::{Command, Observed, Rule, Service, StatusKind, ms, period_ms};

/// How long an eviction by Trainyard is what a group's status says took
/// its pods: pods of a group gone later than this after its last eviction
/// count as deleted.
const EVICTED_MEMORY_MS: i64 = 15 * 60 * 1000;

impl Service {
    pub(super) fn tick(&mut self, now: Timestamp, out: &mut Vec<Command>) {
        if now < self.next_cycle || self.reading_checkpoint {
            return;
        }
        self.next_cycle = Timestamp(now.0.saturating_add(period_ms(&self.live)));
        if !self.synced() {
            return;
        }
        if !self.leading {
            // A standby records usage too, from the bound pods it watches:
            // its store's accounting has no hole when it takes over.
            // Metrics stay the leader's.
            self.record_usage(now, false, out);
            return;
        }
        if !self.resumed && self.live.store.checkpoint_seconds > 0 {
            self.resumed = true;
            self.reading_checkpoint = true;
            out.push(Command::ReadCheckpoint);
            return;
        }
        self.resumed = true;
        let first_cycle = std::mem::replace(&mut self.fresh, false);
        self.cycle(now, first_cycle, out);
    }

    fn cycle(&mut self, now: Timestamp, first_cycle: bool, out: &mut Vec<Command>) {
        let mut phases = Vec::new();
        let total = (self.stopwatch)();
        if self.units.journal && !self.open_intents.is_empty() {
            self.recover(now, out);
        }
        // Unconfirmed assumptions are forgotten after the timeout, counted
        // from the writes still queued or in flight (theirs are not due).
        let timeout = ms(self.live.assume_timeout_seconds.saturating_mul(1000));
        let due = Timestamp(now.0.saturating_sub(timeout));
        let due = self.units.oldest().map_or(due, |t| due.min(t));
        self.world.state.forget_assumed(due);
        let t = (self.stopwatch)();
        let scheduler = &self.settings.scheduler;
        self.world
            .state
            .publish_usage(scheduler.fair_share.usage_half_life_seconds.is_some());
        self.world
            .state
            .track_runtimes(scheduler.reservations.estimate().map(|e| e.samples));
        self.record_usage(now, true, out);
        if first_cycle {
            self.world.state.recalc_usage(now);
        }
        let (snapshot, protected) = self.pdbs.protect(self.world.state.snapshot());
        self.done.protected = protected.len() as u64;
        // Consolidation's moves: the planned room held for the moved jobs'
        // replacements (`trainyard_cluster::Moves`).
        let scheduler = &self.settings.scheduler;
        let (snapshot, held) = self.moves.hold(
            snapshot,
            now,
            scheduler.preemption.nomination_timeout_seconds,
            scheduler.consolidation.no_move_seconds,
        );
        for job in &held.expired {
            tracing::warn!(
                job = %job,
                "consolidation: the moved job's replacement pods did not come in time; the room held for them is released"
            );
        }
        phases.push(("snapshot", (self.stopwatch)().saturating_sub(t)));
        let t = (self.stopwatch)();
        let decisions = trainyard_sched::schedule(&snapshot, &self.settings.scheduler, now);
        phases.push(("schedule", (self.stopwatch)().saturating_sub(t)));
        self.moves.record(&snapshot, &decisions, now);
        // A plan a restart would forget goes into the checkpoint at once.
        self.moves_unsaved |= !decisions.moves.is_empty();
        let t = (self.stopwatch)();
        self.world.state.assume(&decisions, now);
        let reasons = self.reporter.changes(&snapshot, &decisions);
        let writes = self.world.state.take_writes();
        let queued = writes.len();
        let nominate = self.live.nominate_before_bind;
        let world = &self.world;
        out.extend(
            self.units
                .make(
                    now,
                    writes,
                    nominate,
                    |claim| world.claim(claim).cloned(),
                    |c| world.extended_claim(c),
                )
                .into_iter()
                .map(Command::Unit),
        );
        phases.push(("assume", (self.stopwatch)().saturating_sub(t)));
        let t = (self.stopwatch)();
        self.decision_log.log(&snapshot, &decisions);
        self.rules(&snapshot, now, out);
        self.done.cycles += 1;
        self.done.reports += reasons.len() as u64;
        if !reasons.is_empty() {
            out.push(Command::Report {
                changes: reasons,
                now,
            });
        }
        self.default_queue(out);
        self.statuses(&snapshot, &decisions, now, out);
        self.upstream_statuses(&snapshot, &decisions, now, out);
        self.admit(&snapshot, &decisions, out);
        phases.push(("write", (self.stopwatch)().saturating_sub(t)));
        phases.push(("total", (self.stopwatch)().saturating_sub(total)));
        // After the cycle: the decayed totals (for the next cycle) when
        // due, and the checkpoint.
        self.world.state.recalc_usage(now);
        self.checkpoint(&snapshot, now, out);
        self.done.pending = decisions.pending.len() as u64;
        if queued > 0 {
            tracing::info!(
                writes = queued,
                in_flight = self.units.in_flight(),
                pending = self.done.pending,
                "cycle {}",
                self.done.cycles
            );
        }
        out.push(Command::Observe(Box::new(Observed {
            snapshot,
            decisions: std::sync::Arc::new(decisions),
            now,
            phases,
            invalid_queues: self.invalid_queues.clone(),
        })));
    }

    /// The service's own rules after the core: gangs left incomplete are
    /// repaired, jobs past their walltime evicted or told.
    fn rules(
        &mut self,
        snapshot: &trainyard_model::Snapshot,
        now: Timestamp,
        out: &mut Vec<Command>,
    ) {
        let counts = self.group_pods.counts();
        let finishing = |id: &str| counts.get(id).is_some_and(|c| c.succeeded + c.failed > 0);
        let live = &self.live;
        for e in self.repair.check(
            snapshot,
            now,
            live.gang_repair_seconds,
            live.assume_timeout_seconds,
            finishing,
        ) {
            out.push(Command::Evict {
                rule: Rule::Repair,
                eviction: e,
                intent: None,
            });
        }
        if live.enforce_walltime {
            for e in self
                .expiry
                .check(snapshot, now, live.assume_timeout_seconds)
            {
                out.push(Command::Evict {
                    rule: Rule::Walltime,
                    eviction: e,
                    intent: None,
                });
            }
        } else {
            let at = crate::report::rfc3339(now);
            for n in self.expiry.notices(snapshot, now) {
                out.push(Command::Event(crate::events::Record {
                    task: n.task,
                    type_: "Warning",
                    reason: "WalltimePassed",
                    message: n.message,
                    at: at.clone(),
                }));
                self.done.walltime_notices += 1;
            }
        }
    }

    fn statuses(
        &mut self,
        snapshot: &trainyard_model::Snapshot,
        decisions: &trainyard_sched::Decisions,
        now: Timestamp,
        out: &mut Vec<Command>,
    ) {
        let at = crate::report::rfc3339(now);
        if let Some(stream) = self.streams.queue {
            let mut all = crate::queue_status::statuses(snapshot, decisions);
            let invalid = self.world.state.excluded_queues();
            self.say_invalid_queues(&invalid);
            all.extend(crate::queue_status::invalid_statuses(snapshot, &invalid));
            let world = &self.world;
            let changes = self.queue_statuses.changes(all, &at, |name| {
                world
                    .holds(stream, "Queue", "", name)
                    .then(|| world.status_of(stream, "Queue", "", name).cloned())
                    .map(Option::unwrap_or_default)
            });
            self.done.queue_statuses += changes.len() as u64;
            if !changes.is_empty() {
                out.push(Command::Statuses {
                    kind: StatusKind::Queue,
                    changes,
                });
            }
        }
        if let Some(stream) = self.streams.group {
            self.note_evictions(decisions, now, out);
            let mut groups: Vec<String> = self
                .world
                .names(stream, "PodGroup")
                .into_iter()
                .map(|(ns, name)| format!("{ns}/{name}"))
                .collect();
            groups.sort();
            self.evicted
                .retain(|id, _| groups.binary_search(id).is_ok());
            let counts = self.group_pods.counts();
            let world = &self.world;
            let shown = |key: &str| {
                let (ns, name) = key.split_once('/')?;
                world
                    .holds(stream, "PodGroup", ns, name)
                    .then(|| world.status_of(stream, "PodGroup", ns, name).cloned())
                    .map(Option::unwrap_or_default)
            };
            let cache = &self.group_statuses;
            // Groups with no pods whose status already says so are
            // skipped (groups with pods come from the snapshot and the
            // counts, whatever this list holds).
            let evicted = &self.evicted;
            let groups: Vec<String> = groups
                .into_iter()
                .filter(|id| {
                    evicted.contains_key(id)
                        || !cache
                            .last(id)
                            .is_some_and(crate::group_status::settled_without_pods)
                })
                .collect();
            let inputs = crate::group_status::Inputs {
                counts: &counts,
                groups: &groups,
                evicted: &self.evicted,
                before: |key: &str| cache.last(key).cloned().or_else(|| shown(key)),
            };
            let all = crate::group_status::statuses(snapshot, decisions, &inputs);
            let changes = self.group_statuses.changes(all, &at, shown);
            self.done.group_statuses += changes.len() as u64;
            if !changes.is_empty() {
                out.push(Command::Statuses {
                    kind: StatusKind::PodGroup,
                    changes,
                });
            }
        }
    }

    /// Once per term as leader: the default queue as a Queue object when
    /// none exists (`createDefaultQueue`).
    fn default_queue(&mut self, out: &mut Vec<Command>) {
        let name = &self.live.default_queue;
        let Some(stream) = self.streams.queue else {
            return;
        };
        if self.default_queue_asked || !self.live.create_default_queue || name.is_empty() {
            return;
        }
        self.default_queue_asked = true;
        let shown = self.world.holds(stream, "Queue", "", name)
            || self
                .world
                .unreadable
                .keys()
                .any(|k| k.0 == "Queue" && k.2 == *name);
        if !shown {
            out.push(Command::CreateQueue { name: name.clone() });
        }
    }

    /// Logs each queue that became invalid (with its reason) or valid
    /// again, once per change, at the default level.
    fn say_invalid_queues(&mut self, now: &std::collections::BTreeMap<String, String>) {
        for (name, why) in now {
            if self.invalid_queues.get(name) != Some(why) {
                tracing::warn!(queue = %name, "queue {name} is invalid and not scheduled: {why}");
            }
        }
        for name in self.invalid_queues.keys() {
            if !now.contains_key(name) {
                tracing::info!(queue = %name, "queue {name} is valid again");
            }
        }
        self.invalid_queues = now.clone();
    }

    /// Remembers this cycle's evictions by group (the core's reclaims and
    /// preemptions, the rules' repairs and walltime evictions), for the
    /// groups' status; forgets those older than [`EVICTED_MEMORY_MS`].
    fn note_evictions(
        &mut self,
        decisions: &trainyard_sched::Decisions,
        now: Timestamp,
        out: &[Command],
    ) {
        let note = |reason: &str, message: &str| crate::group_status::Evicted {
            reason: reason.to_string(),
            message: message.to_string(),
            at_ms: now.0,
        };
        for e in &decisions.evictions {
            let reason = match e.kind {
                trainyard_sched::EvictionKind::Reclaim => "Reclaimed",
                trainyard_sched::EvictionKind::Preempt => "Preempted",
                trainyard_sched::EvictionKind::Consolidate => "Consolidated",
            };
            self.evicted
                .insert(e.job.to_string(), note(reason, &e.message));
        }
        for c in out {
            if let Command::Evict { rule, eviction, .. } = c {
                let reason = rule.labels().1;
                self.evicted
                    .insert(eviction.job.clone(), note(reason, &eviction.message));
            }
        }
        self.evicted
            .retain(|_, e| now.0.saturating_sub(e.at_ms) <= EVICTED_MEMORY_MS);
    }

    fn admit(
        &mut self,
        snapshot: &trainyard_model::Snapshot,
        decisions: &trainyard_sched::Decisions,
        out: &mut Vec<Command>,
    ) {
        if !self.live.admission_gating {
            return;
        }
        for (job, pods) in crate::admission::admit(snapshot, decisions, &self.gated) {
            tracing::info!("admitting {job}: its queue has room");
            for pod in pods {
                // Put back by `Input::Ungated` when the write fails.
                if let Some(gated) = self.gated.pods.remove(&pod) {
                    out.push(Command::Ungate { pod, gated });
                }
            }
        }
    }

    /// Every `checkpointSeconds`, the leader's checkpoint (one write at a
    /// time; tried again one interval later, not every cycle).
    fn checkpoint(
        &mut self,
        snapshot: &trainyard_model::Snapshot,
        now: Timestamp,
        out: &mut Vec<Command>,
    ) {
        let every_ms = ms(self.live.store.checkpoint_seconds.saturating_mul(1000));
        let due = every_ms > 0
            && !self.checkpoint_busy
            && (self.moves_unsaved || self.last_checkpoint.is_none_or(|t| now.0 - t.0 >= every_ms));
        if !due {
            return;
        }
        // Only the leaf queues that still exist (a deleted queue's would
        // be carried from leader to leader).
        let mut runtimes = self.world.state.runtimes_recent().unwrap_or_default();
        runtimes.retain(|q, _| {
            snapshot
                .queues
                .get(q)
                .is_some_and(|id| snapshot.queues.is_leaf(id))
        });
        let intents = self.open_intents();
        if let Some(h) = self.world.state.usage_history() {
            let mut ck = crate::checkpoint::Checkpoint::take(h, now, &intents, runtimes);
            ck.moves = self.moves.clone();
            self.moves_unsaved = false;
            out.push(Command::WriteCheckpoint(Box::new(ck)));
            self.checkpoint_busy = true;
            self.last_checkpoint = Some(now);
        }
    }

    /// Tells the usage history what the jobs that changed hold at `now`;
    /// the closed buckets and finished jobs go to the store (and, for the
    /// leader, the metrics).
    pub(super) fn record_usage(&mut self, now: Timestamp, leader: bool, out: &mut Vec<Command>) {
        let state = &mut self.world.state;
        state.record_usage(now);
        self.done.usage_samples += 1;
        let closed = state
            .usage_history()
            .map(|h| h.take_closed())
            .unwrap_or_default();
        self.done.runtimes = state.runtimes_kept() as u64;
        let finished = state.take_finished_jobs();
        self.done.accounted += finished.len() as u64;
        if !closed.is_empty() || !finished.is_empty() {
            out.push(Command::Usage {
                closed,
                finished,
                leader,
            });
        }
    }
}
