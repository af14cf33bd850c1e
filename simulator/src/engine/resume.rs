//! A run that starts from a snapshot of a world already running, instead
//! of from an empty cluster: what start-time forecasts run forward
//! ([`crate::forecast`]). The jobs of the snapshot are in the world at
//! once (none arrives later); running jobs end at the times the caller
//! gives; the first cycle runs at `now`; the run stops when every target
//! job has started (or been rejected), at `opts.until`, or after a number
//! of cycles.

use super::*;

/// When a resumed run stops before every job has ended.
#[derive(Clone, Debug)]
pub(crate) struct Stop {
    /// Indices (into the input jobs) of the jobs whose start is wanted.
    pub targets: Vec<usize>,
    /// Most cycles to run.
    pub max_cycles: u64,
    /// The run stopped because it reached `max_cycles`.
    pub capped: bool,
    /// Cycles further ahead are further apart: at time `t` they align to
    /// multiples of the period stretched to at least `(t − now) /
    /// stretch` (rounded down to a multiple of the period), so a run costs
    /// about `stretch` cycles per factor of e of look-ahead. 0: the
    /// period throughout.
    pub stretch: u32,
    /// The run's start (ms).
    pub from: i64,
}

/// What a resumed run starts from.
pub(crate) struct Resume<'s> {
    /// The world: its jobs are `input.jobs` in the same order, every task
    /// with a `rank` (its index into the job's expanded tasks) and every
    /// bound task with its `started`.
    pub snapshot: Snapshot,
    pub now: Timestamp,
    /// The end (ms) of each running job's current run, by job index
    /// (`None`: it does not end); after `now`.
    pub ends: &'s [Option<i64>],
    pub stop: Stop,
}

/// What a resumed run leaves: every job's record (in input order), the
/// cycles run, and whether the cycle cap stopped it.
pub(crate) struct Resumed {
    pub records: Vec<JobRecord>,
    pub cycles: u64,
    pub capped: bool,
}

/// Runs the world of `r.snapshot` forward from `r.now` with `scheduler`.
pub(crate) fn run_resumed(
    input: SimInput<'_>,
    config: &Config,
    opts: &SimOptions,
    r: Resume<'_>,
    scheduler: &mut ScheduleFn<'_>,
) -> Resumed {
    let mut e = Engine::new(input, config, opts);
    e.resume(r);
    e.run(scheduler, &mut |_| {});
    let capped = e.stop.as_ref().is_some_and(|s| s.capped);
    Resumed {
        records: e.rt.into_iter().map(|r| r.record).collect(),
        cycles: e.cycles,
        capped,
    }
}

impl Engine<'_> {
    /// Replaces the (empty) world [`Engine::new`] set up, and its queued
    /// arrivals, by the snapshot's world.
    fn resume(&mut self, r: Resume<'_>) {
        let Resume {
            snapshot,
            now,
            ends,
            stop,
        } = r;
        self.heap.clear();
        // Metrics of leaf domains are not needed forward, and would have
        // to be rebuilt from the running jobs.
        self.leaf_free = None;
        self.nodes = snapshot.nodes.iter().map(|n| (**n).clone()).collect();
        self.node_up = vec![true; self.nodes.len()];
        let runtimes: BTreeMap<String, Vec<i64>> = snapshot
            .runtimes
            .iter()
            .map(|(q, s)| (q.clone(), s.as_slice().to_vec()))
            .collect();
        let jobs = snapshot.jobs.clone();
        // The decayed usage is not tracked forward: the caller holds the
        // snapshot's (see `crate::forecast`).
        self.world = ClusterState::from_snapshot(snapshot);
        self.world
            .track_runtimes(self.config.reservations.estimate().map(|r| r.samples));
        self.world.restore_runtimes(&runtimes);
        let grace_ms = self.opts.eviction.grace_ms as i64;
        for (j, job) in jobs.iter().enumerate() {
            // A job that can never fit stays: the core says why, every
            // cycle (a snapshot's ids are unique, so none is a duplicate).
            if self.rt[j].record.state == JobState::Rejected {
                self.rt[j].record.state = JobState::Pending;
                self.rt[j].record.pending_reason = None;
                self.finished -= 1;
            }
            self.rt[j].live = true;
            self.live.insert(job.id.clone(), j);
            let bound: Vec<&Task> = job.tasks.iter().filter(|t| !t.is_pending()).collect();
            if bound.is_empty() {
                self.pending += 1;
                continue;
            }
            self.running += 1;
            let start = job.started_at().unwrap_or(now);
            let end = ends.get(j).copied().flatten();
            let rt = &mut self.rt[j];
            rt.record.start = Some(start);
            rt.record.state = JobState::Running;
            rt.run_start_ms = start.0;
            if let Some(end) = end {
                rt.run_ms = (end - start.0).max(0) as u64;
                rt.work_ms = rt.run_ms;
            }
            let mut by_start: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
            let mut evicted: Vec<(u32, i64)> = Vec::new();
            for t in &bound {
                rt.bound += 1;
                rt.gpu_bound += t.requests.gpu;
                rt.bound_req.add(&t.requests);
                self.gpu_allocated += t.requests.gpu;
                if let Some(q) = rt.leaf {
                    self.leaf_alloc[q.0].add(&t.requests);
                }
                let (Some(rank), Some(s)) = (t.rank, t.started) else {
                    continue;
                };
                if t.terminating {
                    evicted.push((rank, s.0));
                } else {
                    by_start.entry(s.0).or_default().push(rank);
                }
            }
            if let Some(end) = end {
                for (since, tasks) in by_start {
                    self.push(
                        end,
                        Event::Finish {
                            job: j,
                            epoch: 0,
                            since,
                            tasks,
                        },
                    );
                }
            }
            if !evicted.is_empty() {
                self.push(
                    now.0.saturating_add(grace_ms),
                    Event::Evict {
                        job: j,
                        epoch: 0,
                        tasks: evicted,
                    },
                );
            }
        }
        self.elastic_waiting = self.count_elastic_waiting();
        self.next_cycle = Some(now.0);
        self.push(now.0, Event::Cycle);
        self.stop = Some(stop);
    }

    /// The period (ms) cycles align to at `t`: the run's, stretched far
    /// ahead in a resumed run ([`Stop::stretch`]).
    pub(super) fn period_at(&self, t: i64) -> i64 {
        let base = self.opts.cycle_period_ms as i64;
        match &self.stop {
            Some(s) if s.stretch > 0 && base > 0 => {
                let lead = (t - s.from).max(0) / i64::from(s.stretch);
                (lead / base).max(1) * base
            }
            _ => base,
        }
    }

    /// Whether a resumed run has what it was run for, or ran its cycles.
    pub(super) fn stop_now(&mut self) -> bool {
        let Some(stop) = &mut self.stop else {
            return false;
        };
        if self.cycles >= stop.max_cycles {
            stop.capped = true;
            return true;
        }
        stop.targets.iter().all(|&j| {
            let r = &self.rt[j].record;
            r.start.is_some() || r.state == JobState::Rejected
        })
    }
}
