//! Start-time forecasts: when will a pending job start, and where.
//!
//! [`forecast`] runs the simulator's engine ([`crate::engine`]) forward
//! from a snapshot of a running cluster, through the same core
//! ([`trainyard_sched::schedule`]) every cycle: no job arrives; each
//! running job ends at its walltime (declared, else its queue's default or
//! maximum, `QueueTree::walltime`), else at the end the reservations
//! estimate from its queue's observed runtimes
//! (`reservations.runtimeEstimate`: the `percentile` of the runtimes
//! longer than it has run), else never; a pending job that starts runs
//! its walltime, else its queue's estimate, else forever. That run is the
//! **central** one: its first cycle is the live cycle, so its reservations
//! are the core's, and a reserved job starts in it no later than its
//! reservation (rounded up to the cycle period) unless the core re-plans
//! later cycles otherwise: a gang ranked ahead that had no reservation
//! gets one, or an estimated end the core revises as the job runs lets it
//! backfill past the old reservation (docs/forecasts.md).
//!
//! The range comes from `samples` more runs, each drawing the runtime of
//! every job without a walltime (running ones: among the observed
//! runtimes longer than it has run, uniformly; pending ones: among all)
//! from a ChaCha8 stream seeded by the seed, the run and the job's id.
//! Jobs with walltimes end at them in every run, so with walltimes only
//! every run equals the central one and just that one runs. The start's
//! p10, p50 and p90 are taken over the sampled runs (nearest rank; a run
//! in which the job does not start within the horizon counts as later
//! than any start); its nodes and the running jobs it waits for come from
//! the run at the median.
//!
//! Bounded: each run stops at `now + horizon_seconds`, after
//! `max_cycles` cycles, or when every job asked about has started,
//! whichever comes first. See docs/forecasts.md.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use trainyard_model::{Job, Node, Snapshot, TaskState, Timestamp};
use trainyard_sched::{Config, Decisions, PendingJob, Reservation, schedule};

use crate::engine::resume::{Resume, Stop, run_resumed};
use crate::engine::{SimInput, SimOptions};
use crate::job::{SimJob, SimTask};
use crate::spec::MAX_DURATION_MS;

pub mod eval;
pub(crate) mod plan;
pub mod render;
#[cfg(test)]
mod tests;

/// How far and how often to run forward.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForecastOptions {
    /// Each run stops this long after `now` (seconds); a job not started
    /// by then is reported as not starting within the horizon.
    pub horizon_seconds: u64,
    /// Each run stops after this many cycles (the first, at `now`,
    /// included); `capped` then says so.
    pub max_cycles: u64,
    /// Sampled runs for the range, beyond the central run (0: the central
    /// run only, and the range is its start). Run only when some job's
    /// runtime is estimated.
    pub samples: u32,
    /// Seed of the sampled runtimes.
    pub seed: u64,
    /// Cycles run at multiples of this period (ms) after the first, as in
    /// `trainyard simulate --period`; 0 runs one at every change.
    pub cycle_period_ms: u64,
    /// Far ahead, cycles are further apart: at a lead of `L` after `now`
    /// they run at multiples of about `L / stretch` (never closer than the
    /// period), so a start `L` ahead is known to about `L / stretch`, and
    /// a run costs about `stretch` cycles per factor of e of look-ahead
    /// beyond `stretch` periods. 0: every change within the period gets
    /// its cycle, as in `trainyard simulate` (exact, and costly on large
    /// clusters).
    pub stretch: u32,
    /// Grace period of pods evicted in the run (ms).
    pub grace_ms: u64,
    /// The jobs to forecast (ids); `None`: every pending job. Runs stop
    /// once these have started, so asking for one job is cheaper.
    pub jobs: Option<Vec<String>>,
    /// Most threads the runs take (0: one per core). The answer is the
    /// same whatever the number; the live service leaves a core to the
    /// scheduling cycle.
    #[serde(default)]
    pub threads: u32,
}

impl Default for ForecastOptions {
    fn default() -> Self {
        ForecastOptions {
            horizon_seconds: 7 * 86_400,
            max_cycles: 2_000,
            samples: 8,
            seed: 42,
            cycle_period_ms: 10_000,
            stretch: 20,
            grace_ms: 30_000,
            jobs: None,
            threads: 0,
        }
    }
}

/// Forecasts of the pending jobs of one snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forecasts {
    pub now: Timestamp,
    /// `now` plus the horizon: starts after it are not known.
    pub until: Timestamp,
    /// Runs made: the central one plus the sampled ones (1 when no
    /// runtime is estimated).
    pub runs: u32,
    /// Cycles over all runs.
    pub cycles: u64,
    /// Some run stopped at `max_cycles`, before its jobs started or the
    /// horizon: a job reported as not starting may start later.
    pub capped: bool,
    /// By job id.
    pub jobs: Vec<JobForecast>,
}

/// When and where one pending job is expected to start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobForecast {
    pub job: String,
    /// The queue it names.
    pub queue: String,
    /// Its start in the central run (walltimes, else the reservations'
    /// estimate); `None`: not within the horizon.
    pub expected: Option<Timestamp>,
    /// The range over the sampled runs (`None`: after the horizon); all
    /// three equal `expected` when nothing is sampled.
    pub p10: Option<Timestamp>,
    pub p50: Option<Timestamp>,
    pub p90: Option<Timestamp>,
    /// The nodes its pods are bound to when it starts, in the run at the
    /// median, by name.
    pub nodes: Vec<String>,
    /// Jobs running at `now` that must end first: in the run at the
    /// median, they end by its start on a node it then takes. By end,
    /// then id.
    pub waits_for: Vec<WaitsFor>,
    /// The core's reservation for it at `now`, if it has one: the first
    /// answer, which the central run keeps (it starts no later) unless
    /// the core re-plans it later (docs/forecasts.md).
    pub reservation: Option<Reservation>,
    /// The core's reason at `now` (`None` when the first cycle binds it).
    pub pending_now: Option<PendingJob>,
    /// When it does not start in the central run: the core's last reason
    /// there, at the end of the run.
    pub reason_at_end: Option<String>,
}

/// A running job the forecast job waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitsFor {
    pub job: String,
    /// When it ends in that run.
    pub ends: Timestamp,
    /// The nodes it frees that the forecast job takes.
    pub nodes: Vec<String>,
}

/// Why a what-if job cannot be forecast.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ForecastError {
    #[error("job {0} is already in the snapshot; give the what-if job another name")]
    Duplicate(String),
    #[error("what-if job {job} has a bound pod ({task}); every pod must be pending")]
    Bound { job: String, task: String },
    #[error("what-if job {0} has no pods")]
    Empty(String),
}

/// Forecasts the start of the pending jobs of `snapshot` (those of
/// `opts.jobs`, else all) by running the engine forward from `now`.
pub fn forecast(
    snapshot: &Snapshot,
    config: &Config,
    now: Timestamp,
    opts: &ForecastOptions,
) -> Forecasts {
    let prepared = plan::prepare(snapshot, now);
    run_all(&prepared, config, now, opts)
}

/// Forecasts a job that is not in `snapshot`, as if it were submitted at
/// `now` (its `submit_time` is set so), with the snapshot's pending jobs
/// ahead of it as the core ranks them. Only `job` is forecast.
pub fn forecast_what_if(
    snapshot: &Snapshot,
    config: &Config,
    now: Timestamp,
    job: Job,
    opts: &ForecastOptions,
) -> Result<JobForecast, ForecastError> {
    if snapshot.jobs.iter().any(|j| j.id == job.id) {
        return Err(ForecastError::Duplicate(job.id));
    }
    if job.tasks.is_empty() {
        return Err(ForecastError::Empty(job.id));
    }
    if let Some(t) = job.tasks.iter().find(|t| !t.is_pending()) {
        return Err(ForecastError::Bound {
            job: job.id.clone(),
            task: t.name.clone(),
        });
    }
    let id = job.id.clone();
    let mut with = snapshot.clone();
    let mut job = job;
    job.submit_time = now;
    let at = with.jobs.partition_point(|j| j.id < id);
    with.jobs.insert(at, Arc::new(job));
    let opts = ForecastOptions {
        jobs: Some(vec![id.clone()]),
        ..opts.clone()
    };
    let mut f = forecast(&with, config, now, &opts);
    // The job is pending in the snapshot, so it has a forecast.
    let found = f.jobs.iter().position(|j| j.job == id);
    Ok(match found {
        Some(i) => f.jobs.swap_remove(i),
        None => JobForecast::empty(id, String::new()),
    })
}

impl JobForecast {
    fn empty(job: String, queue: String) -> Self {
        JobForecast {
            job,
            queue,
            expected: None,
            p10: None,
            p50: None,
            p90: None,
            nodes: Vec::new(),
            waits_for: Vec::new(),
            reservation: None,
            pending_now: None,
            reason_at_end: None,
        }
    }
}

/// What one run found about the jobs asked for and the running ones.
struct RunResult {
    /// By target: start (ms) and the nodes bound then.
    starts: Vec<Option<(i64, Vec<String>)>>,
    /// By job index: when it ended in the run.
    ends: Vec<Option<i64>>,
    /// By target: the core's last reason, when it did not start.
    last_reason: Vec<Option<String>>,
    cycles: u64,
    capped: bool,
    /// The first cycle's (the live cycle's) answer for the targets.
    at_now: AtNow,
}

/// By target: the core's reservation and reason in a run's first cycle.
#[derive(Default)]
struct AtNow {
    reservation: Vec<Option<Reservation>>,
    pending: Vec<Option<PendingJob>>,
}

impl AtNow {
    fn of(d: &Decisions, targets: usize, ids: &BTreeMap<&str, usize>) -> Self {
        let mut a = AtNow {
            reservation: vec![None; targets],
            pending: vec![None; targets],
        };
        for r in &d.reservations {
            if let Some(&k) = ids.get(r.job.0.as_str()) {
                a.reservation[k] = Some(r.clone());
            }
        }
        for p in &d.pending {
            if let Some(&k) = ids.get(p.job.0.as_str()) {
                a.pending[k] = Some(p.clone());
            }
        }
        a
    }
}

/// The central run and the sampled runs, and their answer.
fn run_all(
    p: &plan::Prepared,
    config: &Config,
    now: Timestamp,
    opts: &ForecastOptions,
) -> Forecasts {
    let until = Timestamp(
        now.0
            .saturating_add((opts.horizon_seconds.min(MAX_DURATION_MS / 1000) * 1000) as i64),
    );
    let targets = p.targets(opts.jobs.as_deref());
    let samples = if opts.samples > 0 && p.has_spread(config, now) {
        opts.samples
    } else {
        0
    };
    let mut results = run_parallel(samples + 1, opts.threads, |run| {
        let sample = (run > 0).then_some(run);
        run_once(p, config, now, until, opts, &targets, sample)
    });
    let central = results.remove(0);
    let sampled = results;
    let runs = 1 + sampled.len() as u32;
    let cycles = central.cycles + sampled.iter().map(|r| r.cycles).sum::<u64>();
    let capped = central.capped || sampled.iter().any(|r| r.capped);
    let jobs = targets
        .iter()
        .enumerate()
        .map(|(k, &j)| answer(p, &central, &sampled, k, j))
        .collect();
    Forecasts {
        now,
        until,
        runs,
        cycles,
        capped,
        jobs,
    }
}

/// `f(0..runs)`, in that order, computed on up to `threads` threads (0:
/// as many as the machine has cores): the runs are independent and each
/// is determined by its number, so the answer does not depend on the
/// threads. Run 0 (the central run, often the longest) starts first.
fn run_parallel<T: Send>(runs: u32, threads: u32, f: impl Fn(u32) -> T + Sync) -> Vec<T> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = match threads {
        0 => cores,
        n => n as usize,
    }
    .min(runs as usize);
    if threads <= 1 {
        return (0..runs).map(f).collect();
    }
    let next = std::sync::atomic::AtomicU32::new(0);
    let mut out: Vec<(u32, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let run = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if run >= runs {
                            return mine;
                        }
                        mine.push((run, f(run)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(mine) => mine,
                // A run that panicked is a bug in the engine or the core:
                // carry it to the caller as the sequential code would.
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    out.sort_by_key(|(run, _)| *run);
    out.into_iter().map(|(_, t)| t).collect()
}

/// One forward run: the central one (`sample` `None`) or a sampled one.
fn run_once(
    p: &plan::Prepared,
    config: &Config,
    now: Timestamp,
    until: Timestamp,
    opts: &ForecastOptions,
    targets: &[usize],
    sample: Option<u32>,
) -> RunResult {
    let durations = p.durations(config, now, sample.map(|s| (opts.seed, s)));
    let jobs: Vec<SimJob> = p
        .jobs
        .iter()
        .zip(&durations.pending)
        .map(|(j, d)| SimJob {
            duration_ms: *d,
            ..j.clone()
        })
        .collect();
    let sim_opts = SimOptions {
        policy: "forecast".into(),
        cycle_period_ms: opts.cycle_period_ms,
        until: Some(until),
        topology: p.snapshot.topology.clone(),
        eviction: crate::EvictionModel {
            grace_ms: opts.grace_ms,
            ..Default::default()
        },
        ..SimOptions::default()
    };
    let nodes: Vec<Node> = p.snapshot.nodes.iter().map(|n| (**n).clone()).collect();
    let input = SimInput {
        nodes: &nodes,
        queues: &p.snapshot.queues,
        jobs: &jobs,
        faults: &[],
    };
    let target_ids: BTreeMap<&str, usize> = targets
        .iter()
        .enumerate()
        .map(|(k, &j)| (p.jobs[j].id.as_str(), k))
        .collect();
    let mut bound: Vec<Option<Vec<String>>> = vec![None; targets.len()];
    let mut at_now: Option<AtNow> = None;
    let frozen = p.frozen_usage(config);
    let mut scheduler = |snap: &Snapshot, cfg: &Config, at: Timestamp| -> Decisions {
        let d = match &frozen {
            Some((usage, users)) => {
                let mut s = snap.clone();
                s.usage = usage.clone();
                s.user_usage = users.clone();
                schedule(&s, cfg, at)
            }
            None => schedule(snap, cfg, at),
        };
        let mut this: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
        for b in &d.binds {
            if let Some(&k) = target_ids.get(b.job.as_str())
                && bound[k].is_none()
            {
                this.entry(k).or_default().insert(b.node.to_string());
            }
        }
        for (k, nodes) in this {
            bound[k] = Some(nodes.into_iter().collect());
        }
        if at_now.is_none() {
            at_now = Some(AtNow::of(&d, targets.len(), &target_ids));
        }
        d
    };
    let resumed = run_resumed(
        input,
        config,
        &sim_opts,
        Resume {
            snapshot: p.snapshot.clone(),
            now,
            ends: &durations.ends,
            stop: Stop {
                targets: targets.to_vec(),
                max_cycles: opts.max_cycles.max(1),
                capped: false,
                stretch: opts.stretch,
                from: now.0,
            },
        },
        &mut scheduler,
    );
    let rec = &resumed.records;
    RunResult {
        starts: targets
            .iter()
            .enumerate()
            .map(|(k, &j)| {
                let start = rec[j].start.filter(|s| *s <= until)?;
                Some((start.0, bound[k].take().unwrap_or_default()))
            })
            .collect(),
        ends: rec.iter().map(|r| r.end.map(|e| e.0)).collect(),
        last_reason: targets
            .iter()
            .map(|&j| {
                let r = &rec[j];
                r.start
                    .is_none()
                    .then(|| r.pending_reason.clone())
                    .flatten()
            })
            .collect(),
        cycles: resumed.cycles,
        capped: resumed.capped,
        at_now: at_now.unwrap_or_default(),
    }
}

/// The nearest-rank `pct` of `starts`, a `None` (not started) counting as
/// later than any start.
fn quantile(starts: &[Option<i64>], pct: usize) -> (Option<i64>, usize) {
    let mut order: Vec<usize> = (0..starts.len()).collect();
    order.sort_by_key(|&i| (starts[i].is_none(), starts[i], i));
    let rank = (pct * starts.len()).div_ceil(100).max(1);
    let i = order[(rank - 1).min(order.len() - 1)];
    (starts[i], i)
}

/// The forecast of target `k` (job index `j`).
fn answer(
    p: &plan::Prepared,
    central: &RunResult,
    sampled: &[RunResult],
    k: usize,
    j: usize,
) -> JobForecast {
    let id = &p.jobs[j].id;
    let mut f = JobForecast::empty(id.clone(), p.jobs[j].queue.clone());
    f.reservation = central.at_now.reservation.get(k).cloned().flatten();
    f.pending_now = central.at_now.pending.get(k).cloned().flatten();
    f.expected = central.starts[k].as_ref().map(|s| Timestamp(s.0));
    f.reason_at_end = central.last_reason[k].clone();
    let (runs, median): (&[RunResult], usize) = if sampled.is_empty() {
        (std::slice::from_ref(central), 0)
    } else {
        let starts: Vec<Option<i64>> = sampled
            .iter()
            .map(|r| r.starts[k].as_ref().map(|s| s.0))
            .collect();
        f.p10 = quantile(&starts, 10).0.map(Timestamp);
        f.p90 = quantile(&starts, 90).0.map(Timestamp);
        (sampled, quantile(&starts, 50).1)
    };
    if sampled.is_empty() {
        (f.p10, f.p50, f.p90) = (f.expected, f.expected, f.expected);
    }
    let run = &runs[median];
    let Some((start, nodes)) = &run.starts[k] else {
        return f;
    };
    f.p50 = Some(Timestamp(*start));
    f.nodes = nodes.clone();
    let taken: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
    for (i, on) in p.running_nodes.iter().enumerate() {
        let Some(end) = run.ends[i] else { continue };
        if on.is_empty() || end > *start {
            continue;
        }
        let shared: Vec<String> = on
            .iter()
            .filter(|n| taken.contains(n.as_str()))
            .cloned()
            .collect();
        if !shared.is_empty() {
            f.waits_for.push(WaitsFor {
                job: p.jobs[i].id.clone(),
                ends: Timestamp(end),
                nodes: shared,
            });
        }
    }
    f.waits_for
        .sort_by(|a, b| a.ends.cmp(&b.ends).then(a.job.cmp(&b.job)));
    f
}

/// A task's node, when it is bound.
fn node_of(state: &TaskState) -> Option<&str> {
    match state {
        TaskState::Bound { node, .. } => Some(node.as_str()),
        _ => None,
    }
}

/// A seeded stream for one job in one sampled run.
fn job_rng(seed: u64, sample: u32, id: &str) -> ChaCha8Rng {
    let h = crate::openb::fnv1a64(id.as_bytes());
    ChaCha8Rng::seed_from_u64(seed ^ h.rotate_left(17) ^ (u64::from(sample) << 32))
}

/// A uniform draw among `xs`.
fn draw(rng: &mut ChaCha8Rng, xs: &[i64]) -> Option<i64> {
    (!xs.is_empty()).then(|| xs[rng.random_range(0..xs.len())])
}
