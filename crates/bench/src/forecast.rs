//! The `--forecast` benchmark: one job's start-time forecast
//! (`trainyard_sim::forecast`) on the `--reservations` input: `--nodes`
//! (5,000) nodes, 98% full of running jobs, the allocate suite's pending
//! gangs and `--large` 64-GPU gangs that do not fit. Forecasts the job
//! the live cycle reserves first, with the running jobs' walltimes (a cap
//! of 20 cycles, then the default 2,000) and then with their ends
//! estimated from 100 observed runtimes per queue (8 sampled runs too; 20
//! cycles each, then uncapped), on every core and on one thread. The
//! target: under 2 s for one job.

use std::time::{Duration, Instant};

use trainyard_bench::workloads;
use trainyard_model::Snapshot;
use trainyard_sched::Config;
use trainyard_sim::forecast::{ForecastOptions, forecast};

pub fn forecast_bench(runs: usize, nodes: usize, large: usize) -> anyhow::Result<()> {
    let (snap, now) = workloads::reservation_cluster(13, nodes, large.max(1));
    let est = workloads::estimated_ends(&snap, 13);
    // As in `--reservations`: no reclaim or preemption, so the starving
    // gangs reserve.
    let mut config = Config::default();
    config.preemption.reclaim = false;
    config.preemption.preempt = false;
    let pods: usize = snap.jobs.iter().map(|j| j.tasks.len()).sum();
    let running = snap
        .jobs
        .iter()
        .filter(|j| j.tasks.iter().any(|t| !t.is_pending()))
        .count();
    println!(
        "input: {} nodes × 8 GPUs, {pods} pods in {} jobs ({running} running), reclaim and preemption off\n",
        snap.nodes.len(),
        snap.jobs.len()
    );
    // The live cycle: its first reservation is the job forecast.
    let t = Instant::now();
    let d = trainyard_sched::schedule(&snap, &config, now);
    let cycle = t.elapsed();
    let id = d
        .reservations
        .first()
        .map(|r| r.job.0.clone())
        .unwrap_or_else(|| format!("big/llm-{:03}", large.max(1) - 1));
    println!(
        "one cycle: {:.0} ms, {} reservations; forecast job {id}\n",
        cycle.as_secs_f64() * 1e3,
        d.reservations.len()
    );
    println!(
        "| forecast of one job | ends of running jobs | max cycles | threads | median time | runs, cycles (capped) | per cycle | start (central; p10–p90) | core's reservation |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for cap in [20u64, 2000] {
        one(&snap, &config, now, &id, "walltimes", runs, cap, 0)?;
    }
    // Every core, then one thread (what the live service gives a forecast
    // on a 2-core machine: every core but one).
    for (cap, threads) in [(20u64, 0), (2000, 0), (2000, 1)] {
        one(
            &est,
            &config,
            now,
            &id,
            "estimated, 8 sampled runs",
            runs,
            cap,
            threads,
        )?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn one(
    snap: &Snapshot,
    config: &Config,
    now: trainyard_model::Timestamp,
    id: &str,
    ends: &str,
    runs: usize,
    max_cycles: u64,
    threads: u32,
) -> anyhow::Result<()> {
    let opts = ForecastOptions {
        jobs: Some(vec![id.to_string()]),
        max_cycles,
        threads,
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
    let median = times[times.len() / 2].as_secs_f64();
    println!(
        "| {id} | {ends} | {max_cycles} | {} | {:.0} ms | {}, {}{} | {:.0} ms | {} ({}–{}) | {} |",
        if threads == 0 {
            format!(
                "all ({})",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            )
        } else {
            threads.to_string()
        },
        median * 1e3,
        f.runs,
        f.cycles,
        if f.capped { " (capped)" } else { "" },
        median * 1e3 / f.cycles.max(1) as f64,
        rel(j.expected),
        rel(j.p10),
        rel(j.p90),
        rel(j.reservation.as_ref().map(|r| r.start)),
    );
    Ok(())
}
