//! One cycle: the core on the world's snapshot, its decisions assumed
//! and confirmed, then the simulator's bookkeeping, and when to wake up.

use super::*;

impl Engine<'_> {
    pub(super) fn cycle(&mut self, scheduler: &mut ScheduleFn<'_>, now: Timestamp) {
        self.dirty = false;
        // Nominations as old as the timeout are ignored by the core from
        // then on; clearing them keeps the snapshot tidy.
        self.world
            .expire_nominations(now, self.config.preemption.nomination_timeout_seconds);
        // Usage held since the last cycle, and the decayed totals the
        // snapshot carries (with `fairShare.usageHalfLifeSeconds`).
        self.world.sample_usage(now);
        let mut snapshot = self.world.snapshot();
        if self.config.consolidation.enabled {
            // The room planned for moved jobs, held until they are back.
            snapshot = self
                .moves
                .hold(snapshot, now, self.hold_seconds(), self.no_move_seconds())
                .0;
        }
        let d = scheduler(&snapshot, self.config, now);
        if !d.moves.is_empty() {
            self.moves.record(&snapshot, &d, now);
        }
        // Released before the world changes, so no job is copied on write.
        drop(snapshot);
        self.cycles += 1;
        // The simulator is its own API server: the decisions are done at
        // once (what `assume` and a confirming world would leave; a test in
        // the cluster crate checks the two agree).
        let applied = self.world.apply_decisions(&d, now);
        self.dra_claims += d.claims.iter().filter(|c| c.allocation.is_some()).count() as u64;
        // What is held from now on includes this cycle's binds.
        self.world.sample_usage(now);
        // The simulator keeps no accounting records: dropped, so a long
        // run's history does not grow.
        self.world.take_finished_jobs();
        if let Some(h) = self.world.usage_history() {
            h.take_closed();
        }

        // Binds, grouped by job.
        let mut started: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        // Pods placed per job: (task index, node, GPU indices).
        let mut placed: BTreeMap<usize, Vec<PlacedPod>> = BTreeMap::new();
        for &i in &applied.binds {
            let b = &d.binds[i];
            let Some(&j) = self.by_id.get(b.job.as_str()) else {
                continue;
            };
            let Some((_, task)) = self.world.task(b.job.as_str(), &b.task) else {
                continue;
            };
            // The simulator ranks a job's tasks by their index.
            let Some(ti) = task.rank else {
                continue;
            };
            let gpu = task.requests.gpu;
            let rt = &mut self.rt[j];
            if rt.bound == 0 {
                // A start (the first, or after a kill): the walltime
                // counts from here.
                rt.run_start_ms = now.0;
                rt.timed_out = false;
            }
            rt.bound += 1;
            rt.gpu_bound += gpu;
            rt.bound_req.add(&task.requests);
            if let Some(q) = rt.leaf {
                self.leaf_alloc[q.0].add(&task.requests);
            }
            self.gpu_allocated += gpu;
            if let Some(lf) = &mut self.leaf_free {
                lf.change(&self.nodes, &self.node_up, b.node.as_str(), &b.gpus, true);
            }
            started.entry(j).or_default().push(ti);
            if self.opts.topology.is_some() {
                placed
                    .entry(j)
                    .or_default()
                    .push((ti, b.node.as_str(), b.gpus.as_slice()));
            }
        }
        let gang_placements: HashMap<&str, &GangPlacement> =
            d.placements.iter().map(|p| (p.job.as_str(), p)).collect();
        for (j, tasks) in started {
            let rt = &mut self.rt[j];
            if rt.record.start.is_none() {
                rt.record.start = Some(now);
                rt.record.state = JobState::Running;
                self.pending -= 1;
                self.running += 1;
                let duration = rt.work_ms;
                rt.record.topology = match (&self.opts.topology, placed.get_mut(&j)) {
                    (Some(topo), Some(pods)) if pods.len() >= 2 => Some(job_topology(
                        topo,
                        gang_placements.get(rt.record.id.as_str()).copied(),
                        pods,
                        &self.opts.slowdown,
                        duration,
                    )),
                    _ => None,
                };
                let extra = rt.record.topology.as_ref().map_or(0, |t| t.slowdown_ms);
                rt.run_ms = duration.saturating_add(extra).min(MAX_DURATION_MS);
            }
            // Each task runs `run_ms` from its start, less what an earlier
            // run of it (an elastic pod evicted alone) kept by checkpoints.
            let mut by_end: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
            for ti in tasks {
                let left = rt.run_ms - rt.saved.get(&ti).copied().unwrap_or(0).min(rt.run_ms);
                // Ended at the walltime, counted from the job's start (a
                // pod bound later, elastic, ends with the others).
                let left = match rt.walltime_ms {
                    Some(w) => {
                        let to_limit = (rt.run_start_ms + w as i64 - now.0).max(0) as u64;
                        if to_limit < left {
                            rt.timed_out = true;
                        }
                        left.min(to_limit)
                    }
                    None => left,
                };
                by_end.entry(now.0 + left as i64).or_default().push(ti);
            }
            let epoch = rt.epoch;
            for (at, tasks) in by_end {
                self.push(
                    at,
                    Event::Finish {
                        job: j,
                        epoch,
                        since: now.0,
                        tasks,
                    },
                );
            }
        }
        self.apply_evictions(&d, &applied, now);
        for r in &d.reservations {
            if let Some(&j) = self.by_id.get(r.job.as_str()) {
                self.rt[j].record.reserved_start.get_or_insert(r.start);
            }
        }
        // Free GPUs on nodes that are up, summed only when a job waits for
        // room (most cycles place what they can).
        let mut free_gpu: Option<u64> = None;
        self.scattered = false;
        for p in &d.pending {
            let Some(&j) = self.by_id.get(p.job.as_str()) else {
                continue;
            };
            if !self.scattered && self.rt[j].record.start.is_none() {
                let min = self.rt[j].record.min_gpu_milli;
                self.scattered = min > 0
                    && matches!(
                        p.reason,
                        PendingReason::Unschedulable { .. }
                            | PendingReason::TopologyUnfit { .. }
                            | PendingReason::TooManyLeaves { .. }
                            | PendingReason::InQuotaNoRoom { .. }
                            | PendingReason::Consolidating { .. }
                    )
                    && min
                        <= *free_gpu.get_or_insert_with(|| {
                            self.gpu_capacity().saturating_sub(self.gpu_allocated)
                        });
            }
            let rt = &mut self.rt[j];
            if rt.record.start.is_some() {
                continue; // elastic remainder of a running job
            }
            rt.record.pending_reason = Some(p.message.clone());
            let permanent = matches!(
                p.reason,
                PendingReason::Rejected { .. }
                    | PendingReason::ExceedsQueueLimit { .. }
                    | PendingReason::ExceedsMaxWalltime { .. }
                    | PendingReason::Unsupported { .. }
                    | PendingReason::InvalidRequest { .. }
            );
            if permanent {
                rt.record.state = JobState::Rejected;
                rt.live = false;
                self.live.remove(p.job.as_str());
                self.world.apply(Change::JobGone(p.job.0.clone()));
                self.pending -= 1;
                self.finished += 1;
            }
        }
        // Running jobs that could still grow wake later changes.
        self.elastic_waiting = self.count_elastic_waiting();
        // Queue samples, only when a queue's numbers changed. A cycle that
        // evicts reports the victims' capacity as the preemptor's already;
        // the samples keep what is held (victims hold it through their
        // grace period, the preemptor binds later).
        let held = (!d.evictions.is_empty()).then(|| self.queue_alloc());
        for q in &d.queues {
            let allocated = match &held {
                Some(held) => held
                    .get(q.id.0)
                    .cloned()
                    .unwrap_or_else(|| q.allocated.clone()),
                None => q.allocated.clone(),
            };
            let now_vals = (q.demand.clone(), q.fair_share.clone(), allocated);
            if self.last_queue.get(&q.queue) != Some(&now_vals) {
                self.queues.push(QueueSample {
                    time: now,
                    queue: q.queue.clone(),
                    name: q.name.clone(),
                    is_leaf: self.leaf_paths.contains(q.queue.as_str()),
                    demand: now_vals.0.clone(),
                    fair_share: now_vals.1.clone(),
                    allocated: now_vals.2.clone(),
                });
                self.last_queue.insert(q.queue.clone(), now_vals);
            }
        }
        // A gang becoming starving (it may then reserve) changes decisions
        // with time alone: wake up then.
        let r = self.config.reservations;
        if r.max_gangs > 0 && r.starving_after_seconds > 0 && self.pending > 0 {
            let s = r.starving_after_seconds;
            let wake = self
                .world
                .jobs()
                .filter(|j| j.tasks.iter().all(|t| t.is_pending()))
                .map(|j| j.submit_time.0 + s as i64 * 1000)
                .filter(|w| *w > now.0)
                .min();
            let wake = wake.map(|w| {
                let period = self.period_at(w);
                if period > 0 {
                    (w + period - 1) / period * period
                } else {
                    w
                }
            });
            if let Some(w) = wake
                && self.next_cycle.is_none()
            {
                self.next_cycle = Some(w);
                self.push(w, Event::Cycle);
            }
        }
        // Nominations expire, and running jobs pass their queue's minimum
        // runtime (becoming possible victims), with time alone.
        if self.pending > 0 || self.elastic_waiting > 0 {
            let wake = self.next_time_change(now);
            if let Some(w) = wake {
                self.wake_at(w);
            }
        }
    }

    /// How long a move's room is held for its replacements: the
    /// nomination timeout, as in the live service.
    pub(super) fn hold_seconds(&self) -> u64 {
        self.config.preemption.nomination_timeout_seconds
    }

    /// How long a moved job stays unmovable.
    pub(super) fn no_move_seconds(&self) -> u64 {
        self.config.consolidation.no_move_seconds
    }

    /// Schedules a cycle at `at` (rounded up to the period) unless one is
    /// due no later.
    pub(super) fn wake_at(&mut self, at: i64) {
        let period = self.period_at(at);
        let at = if period > 0 {
            (at + period - 1) / period * period
        } else {
            at
        };
        if self.next_cycle.is_none_or(|c| at < c) {
            self.next_cycle = Some(at);
            self.push(at, Event::Cycle);
        }
    }

    /// The earliest moment after `now` when a nomination expires or a
    /// running preemptible job passes its queue's minimum runtime (only
    /// while reclaim or preemption is on).
    pub(super) fn next_time_change(&self, now: Timestamp) -> Option<i64> {
        let mut next: Option<i64> = None;
        let mut take = |w: i64| {
            if w > now.0 && next.is_none_or(|n| w < n) {
                next = Some(w);
            }
        };
        let cfg = &self.config.preemption;
        let timeout = (cfg.nomination_timeout_seconds.min(MAX_DURATION_MS / 1000) * 1000) as i64;
        let victims =
            (cfg.reclaim || cfg.preempt) && self.min_runtime_ms.iter().any(Option::is_some);
        if self.config.consolidation.enabled
            && let Some(w) =
                self.moves
                    .next_change(now, self.hold_seconds(), self.no_move_seconds())
        {
            take(w.0);
        }
        let nominations = self.world.any_nominations();
        if !nominations && !victims {
            return next;
        }
        for (job, rt) in self.live_jobs() {
            if nominations {
                for t in &job.tasks {
                    if let Some(n) = &t.nomination {
                        take(n.since.0.saturating_add(timeout));
                    }
                }
            }
            if victims
                && job.preemptible
                && rt.bound > 0
                && let Some(min) = rt.leaf.and_then(|q| self.min_runtime_ms[q.0])
                && let Some(last) = job.tasks.iter().filter_map(|t| t.started).max()
            {
                take(last.0.saturating_add(min));
            }
        }
        next
    }

    /// Running jobs (not winding down) with pending elastic pods.
    pub(super) fn count_elastic_waiting(&self) -> u32 {
        self.live_jobs()
            .filter(|(job, rt)| {
                rt.live
                    && rt.record.start.is_some()
                    && !rt.winding_down
                    && job.tasks.iter().any(|t| t.is_pending())
            })
            .count() as u32
    }

    /// The cycle's evictions: each evicted pod is marked terminating now
    /// (it keeps its capacity, and the core never picks it again) and is
    /// removed when the grace period is over.
    pub(super) fn apply_evictions(&mut self, d: &Decisions, applied: &Applied, now: Timestamp) {
        if applied.evictions.is_empty() {
            return;
        }
        let mut per_job: BTreeMap<usize, Vec<(u32, i64)>> = BTreeMap::new();
        let mut sample = EvictionSample {
            time: now,
            ..EvictionSample::default()
        };
        let mut jobs: BTreeSet<(EvictionKind, usize)> = BTreeSet::new();
        for &i in &applied.evictions {
            let e = &d.evictions[i];
            let Some(&j) = self.by_id.get(e.job.as_str()) else {
                continue;
            };
            let Some((_, task)) = self.world.task(e.job.as_str(), &e.task) else {
                continue;
            };
            let Some(ti) = task.rank else {
                continue;
            };
            per_job
                .entry(j)
                .or_default()
                .push((ti, task.started.map_or(i64::MIN, |s| s.0)));
            self.rt[j].record.evicted_pods += 1;
            if e.kind == EvictionKind::Consolidate {
                self.rt[j].moving = true;
            }
            match e.kind {
                EvictionKind::Reclaim => sample.reclaim_pods += 1,
                EvictionKind::Preempt => sample.preempt_pods += 1,
                EvictionKind::Consolidate => sample.move_pods += 1,
            }
            jobs.insert((e.kind, j));
        }
        if per_job.is_empty() {
            return;
        }
        for (kind, _) in &jobs {
            match kind {
                EvictionKind::Reclaim => sample.reclaim_jobs += 1,
                EvictionKind::Preempt => sample.preempt_jobs += 1,
                EvictionKind::Consolidate => sample.move_jobs += 1,
            }
        }
        self.evictions.push(sample);
        let at = now.0.saturating_add(self.opts.eviction.grace_ms as i64);
        for (j, tasks) in per_job {
            let epoch = self.rt[j].epoch;
            self.push(
                at,
                Event::Evict {
                    job: j,
                    epoch,
                    tasks,
                },
            );
        }
    }
}
