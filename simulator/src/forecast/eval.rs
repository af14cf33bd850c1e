//! Forecasts measured against what happened: one simulation run, and at
//! its cycles a forecast of each job when it arrives (the first cycle
//! that sees it) and again `later_ms` after (the first cycle from then on
//! at which it is still pending), each compared with the cycle that first
//! bound it. A cycle's forecast covers every job due one then in one
//! forward run (each run stops once they have all started). The forecasts
//! know nothing of later arrivals: that is what they are measured for.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use trainyard_model::{Snapshot, Timestamp};
use trainyard_sched::{Config, Decisions, schedule};

use super::{ForecastOptions, forecast};
use crate::engine::{Progress, SimInput, SimOptions, simulate_with};
use crate::result::{SIZE_CLASSES, SimOutput};

/// How to evaluate.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// The forecasts' options (`jobs` is set per cycle; the cycle period
    /// and grace period are the simulation's).
    pub forecast: ForecastOptions,
    /// The second forecast, this long after arrival (ms).
    pub later_ms: u64,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            forecast: ForecastOptions {
                samples: 4,
                ..ForecastOptions::default()
            },
            later_ms: 3_600_000,
        }
    }
}

/// One forecast of one job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taken {
    /// When it was made.
    pub at: Timestamp,
    /// The end of its horizon.
    pub until: Timestamp,
    pub expected: Option<Timestamp>,
    pub p10: Option<Timestamp>,
    pub p50: Option<Timestamp>,
    pub p90: Option<Timestamp>,
}

/// A job's forecasts and its real start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    pub job: String,
    pub gpu_milli: u64,
    pub pods: u32,
    pub submit: Timestamp,
    /// The first cycle that bound it.
    pub started: Option<Timestamp>,
    pub at_arrival: Option<Taken>,
    pub later: Option<Taken>,
}

/// The simulation and the observations, by job id.
#[derive(Clone, Debug)]
pub struct Evaluation {
    pub sim: SimOutput,
    pub observations: Vec<Observation>,
    /// Forecast calls made (cycles with a job due one) and their cycles.
    pub forecasts: u64,
    pub forecast_cycles: u64,
}

/// Runs the simulation with forecasts taken along the way.
pub fn evaluate(
    input: SimInput<'_>,
    config: &Config,
    sim: &SimOptions,
    eval: &EvalOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Evaluation {
    let mut obs: BTreeMap<String, Observation> = BTreeMap::new();
    let mut calls = 0u64;
    let mut cycles = 0u64;
    let fopts = ForecastOptions {
        cycle_period_ms: sim.cycle_period_ms,
        grace_ms: sim.eviction.grace_ms,
        ..eval.forecast.clone()
    };
    let mut scheduler = |snap: &Snapshot, cfg: &Config, now: Timestamp| -> Decisions {
        let mut arriving: BTreeSet<String> = BTreeSet::new();
        let mut due: Vec<String> = Vec::new();
        for j in &snap.jobs {
            if !j.tasks.iter().all(|t| t.is_pending()) {
                continue;
            }
            match obs.get(&j.id) {
                None => {
                    arriving.insert(j.id.clone());
                    due.push(j.id.clone());
                }
                Some(o) if o.started.is_none() && o.later.is_none() => {
                    if now.0 >= o.submit.0.saturating_add(eval.later_ms as i64) {
                        due.push(j.id.clone());
                    }
                }
                Some(_) => {}
            }
            if arriving.contains(&j.id) {
                obs.insert(
                    j.id.clone(),
                    Observation {
                        job: j.id.clone(),
                        gpu_milli: j.tasks.iter().map(|t| t.requests.gpu).sum(),
                        pods: j.tasks.len() as u32,
                        submit: j.submit_time,
                        started: None,
                        at_arrival: None,
                        later: None,
                    },
                );
            }
        }
        if !due.is_empty() {
            let o = ForecastOptions {
                jobs: Some(due),
                ..fopts.clone()
            };
            let f = forecast(snap, cfg, now, &o);
            calls += 1;
            cycles += f.cycles;
            let until = f.until;
            for jf in f.jobs {
                let taken = Taken {
                    at: now,
                    until,
                    expected: jf.expected,
                    p10: jf.p10,
                    p50: jf.p50,
                    p90: jf.p90,
                };
                if let Some(o) = obs.get_mut(&jf.job) {
                    if arriving.contains(&jf.job) {
                        o.at_arrival = Some(taken);
                    } else {
                        o.later = Some(taken);
                    }
                }
            }
        }
        let d = schedule(snap, cfg, now);
        for b in &d.binds {
            if let Some(o) = obs.get_mut(b.job.as_str()) {
                o.started.get_or_insert(now);
            }
        }
        d
    };
    let out = simulate_with(input, config, sim, &mut scheduler, progress);
    Evaluation {
        sim: out,
        observations: obs.into_values().collect(),
        forecasts: calls,
        forecast_cycles: cycles,
    }
}

/// Which forecast of a job a row is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum When {
    AtArrival,
    Later,
}

/// Errors of one kind of forecast for one class of jobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorRow {
    pub when: When,
    /// `≤1`, `2-8`, `9-64`, `65+` (GPUs), `all`, or `waited 10m+` (jobs
    /// of any size that waited at least ten minutes).
    pub class: String,
    /// Jobs with a forecast that started in the run.
    pub jobs: u64,
    /// Of those, forecast not to start within the horizon.
    pub beyond_horizon: u64,
    /// Jobs with a forecast that never started in the run (left out).
    pub never_started: u64,
    /// |p50 − real start|, median and 90th percentile (seconds).
    pub median_abs_s: f64,
    pub p90_abs_s: f64,
    /// p50 − real start, median (seconds): below 0, forecasts are early.
    pub median_signed_s: f64,
    /// |expected (the central run) − real start|, median (seconds).
    pub expected_median_abs_s: f64,
    /// Share of jobs that started within [p10, p90] (0–1).
    pub in_range: f64,
}

/// The error table: for each kind of forecast, each size class, then all
/// jobs and those that waited ten minutes or more.
pub fn errors(obs: &[Observation]) -> Vec<ErrorRow> {
    let mut rows = Vec::new();
    for when in [When::AtArrival, When::Later] {
        let of = |o: &Observation| match when {
            When::AtArrival => o.at_arrival.clone(),
            When::Later => o.later.clone(),
        };
        let mut classes: Vec<(String, Vec<&Observation>)> = SIZE_CLASSES
            .iter()
            .enumerate()
            .map(|(i, (name, max))| {
                let min = if i == 0 { 0 } else { SIZE_CLASSES[i - 1].1 + 1 };
                let list = obs
                    .iter()
                    .filter(|o| o.gpu_milli >= min && o.gpu_milli <= *max)
                    .collect();
                (name.to_string(), list)
            })
            .collect();
        classes.push(("all".into(), obs.iter().collect()));
        classes.push((
            "waited 10m+".into(),
            obs.iter()
                .filter(|o| o.started.is_none_or(|s| s.0 - o.submit.0 >= 600_000))
                .collect(),
        ));
        for (class, list) in classes {
            rows.push(row(
                when,
                class,
                list.into_iter().filter_map(|o| Some((o, of(o)?))),
            ));
        }
    }
    rows
}

fn row<'o>(
    when: When,
    class: String,
    list: impl Iterator<Item = (&'o Observation, Taken)>,
) -> ErrorRow {
    let (mut abs, mut signed, mut exp) = (Vec::new(), Vec::new(), Vec::new());
    let (mut jobs, mut beyond, mut never, mut inside) = (0u64, 0u64, 0u64, 0u64);
    for (o, t) in list {
        let Some(real) = o.started else {
            never += 1;
            continue;
        };
        jobs += 1;
        // Not within the horizon: counted as the horizon's end.
        let p50 = t.p50.unwrap_or(t.until);
        let e = (p50.0 - real.0) / 1000;
        if t.p50.is_none() {
            beyond += 1;
        }
        abs.push(e.unsigned_abs() as f64);
        signed.push(e as f64);
        let ex = t.expected.unwrap_or(t.until);
        exp.push(((ex.0 - real.0) / 1000).unsigned_abs() as f64);
        if t.p10.is_some_and(|a| a <= real) && t.p90.is_none_or(|b| real <= b) {
            inside += 1;
        }
    }
    ErrorRow {
        when,
        class,
        jobs,
        beyond_horizon: beyond,
        never_started: never,
        median_abs_s: pct(&mut abs, 50),
        p90_abs_s: pct(&mut abs, 90),
        median_signed_s: pct(&mut signed, 50),
        expected_median_abs_s: pct(&mut exp, 50),
        in_range: if jobs == 0 {
            0.0
        } else {
            inside as f64 / jobs as f64
        },
    }
}

/// Nearest-rank percentile; 0 for none.
fn pct(xs: &mut [f64], p: usize) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let rank = (p * xs.len()).div_ceil(100).max(1);
    xs[rank - 1]
}
