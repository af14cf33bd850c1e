//! The `--forecast` benchmark: one job's start-time forecast
//! (`trainyard_sim::forecast`) on the `--reservations` input: `--nodes`
//! (5,000) nodes, 98% full of running jobs, the allocate suite's pending
//! gangs and `--large` 64-GPU gangs that do not fit. Forecasts the last
//! large gang (it reserves) and the last small pending job, with the
//! running jobs' walltimes and then with their ends estimated from 100
//! observed runtimes per queue (so sampled runs are made too). The
//! target: under 2 s for one job.

use std::time::{Duration, Instant};

use trainyard_bench::workloads;
use trainyard_model::Snapshot;
use trainyard_sched::Config;
use trainyard_sim::forecast::{ForecastOptions, forecast};

pub fn forecast_bench(runs: usize, nodes: usize, large: usize) -> anyhow::Result<()> {
    let (snap, now) = workloads::reservation_cluster(13, nodes, large.max(1));
    let est = workloads::estimated_ends(&snap, 13);
    let config = Config::default();
    let pods: usize = snap.jobs.iter().map(|j| j.tasks.len()).sum();
    let running = snap
        .jobs
        .iter()
        .filter(|j| j.tasks.iter().any(|t| !t.is_pending()))
        .count();
    let big = format!("big/llm-{:03}", large.max(1) - 1);
    let small = snap
        .jobs
        .iter()
        .rev()
        .find(|j| !j.id.starts_with("big/") && j.tasks.iter().all(|t| t.is_pending()))
        .map(|j| j.id.clone())
        .ok_or_else(|| anyhow::anyhow!("no small pending job"))?;
    println!(
        "input: {} nodes × 8 GPUs, {pods} pods in {} jobs ({running} running), default config\n",
        snap.nodes.len(),
        snap.jobs.len()
    );
    println!("| forecast of one job | ends of running jobs | median time | runs, cycles | start (central; p10–p90) | core's reservation |");
    println!("|---|---|---|---|---|---|");
    for (input, ends) in [(&snap, "walltimes"), (&est, "estimated, 8 sampled runs")] {
        for id in [&big, &small] {
            one(input, &config, now, id, ends, runs)?;
        }
    }
    Ok(())
}

fn one(
    snap: &Snapshot,
    config: &Config,
    now: trainyard_model::Timestamp,
    id: &str,
    ends: &str,
    runs: usize,
) -> anyhow::Result<()> {
    let opts = ForecastOptions {
        jobs: Some(vec![id.to_string()]),
        ..ForecastOptions::default()
    };
    let mut times: Vec<Duration> = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        last = Some(forecast(snap, config, now, &opts));
        times.push(t.elapsed());
    }
    times.sort();
    let f = last.ok_or_else(|| anyhow::anyhow!("no run"))?;
    let j = f
        .jobs
        .first()
        .ok_or_else(|| anyhow::anyhow!("{id} was not forecast"))?;
    let rel = |t: Option<trainyard_model::Timestamp>| {
        t.map_or("-".to_string(), |t| format!("+{}s", (t.0 - now.0) / 1000))
    };
    println!(
        "| {id} | {ends} | {:.0} ms | {}, {} | {} ({}–{}) | {} |",
        times[times.len() / 2].as_secs_f64() * 1e3,
        f.runs,
        f.cycles,
        rel(j.expected),
        rel(j.p10),
        rel(j.p90),
        rel(j.reservation.as_ref().map(|r| r.start)),
    );
    Ok(())
}
