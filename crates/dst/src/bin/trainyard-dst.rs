//! `trainyard-dst`: runs seeds of the service's deterministic simulation.
//!
//! ```text
//! trainyard-dst --seed 42 --trace        # replay one seed, print its trace
//! trainyard-dst --from 0 --count 1000    # a campaign
//! trainyard-dst --minutes 60 --jobs 2    # a timed campaign on 2 threads
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Parser;

/// Deterministic simulation of `trainyard serve`: the real state machine
/// against a simulated API server, kubelets, users, another scheduler,
/// crashes, a second replica and clocks that jump. Every run is one seed;
/// a failing seed prints its faults and the end of its event trace, and
/// replays exactly with `--seed N --trace`.
#[derive(Parser)]
#[command(name = "trainyard-dst")]
struct Args {
    /// Run this one seed.
    #[arg(long)]
    seed: Option<u64>,
    /// First seed of a campaign.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Seeds in a campaign (unless --minutes).
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// Run a campaign for this many minutes instead of --count seeds.
    #[arg(long)]
    minutes: Option<f64>,
    /// Threads (default: all cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Simulated seconds per seed.
    #[arg(long, default_value_t = 600)]
    seconds: i64,
    /// Print the whole trace of a single seed.
    #[arg(long)]
    trace: bool,
    /// Only seeds whose fault mix has a store, crashes and another
    /// scheduler (the bind journal's world), skipping the others.
    #[arg(long)]
    journal_only: bool,
    /// Lines of trace printed for a failing seed.
    #[arg(long, default_value_t = 40)]
    tail: usize,
    /// With --seed: users change policy (PDBs, Queues, PriorityClasses)
    /// or not, whatever the seed draws; `false` replays a seed named
    /// before that dimension existed, in the world it was found in.
    #[arg(long, value_name = "BOOL")]
    policy_churn: Option<bool>,
    /// With --seed: consolidation off (`false`), whatever the seed draws
    /// (`true`: the seed's draw of its settings, on).
    #[arg(long, value_name = "BOOL")]
    consolidation: Option<bool>,
    /// With --seed: upstream gangs off (`false`), whatever the seed draws
    /// (`true`: the seed's draw of their settings, on).
    #[arg(long, value_name = "BOOL")]
    upstream_gangs: Option<bool>,
}

/// A run's consolidation, for people.
fn moves(t: &trainyard_dst::consolidation::Tally) -> String {
    format!(
        "{} pods of {} jobs moved for {} gangs; {} replacements ({} bound on the planned node, {} elsewhere while held), {} evicted pods never replaced; {} moved again within noMoveSeconds by another process",
        t.moved_pods,
        t.moved_jobs,
        t.gangs,
        t.replacements,
        t.on_plan,
        t.elsewhere,
        t.never_replaced,
        t.forgotten
    )
}

fn print_failure(r: &trainyard_dst::Report, tail: usize) {
    println!(
        "seed {} FAILED after {} s simulated, {} steps",
        r.seed, r.seconds, r.steps
    );
    println!("  faults: {}", r.faults.summary());
    for v in &r.violations {
        println!("  violation: {v}");
    }
    println!("  last {} events:", tail.min(r.trace.len()));
    for line in r.trace.iter().skip(r.trace.len().saturating_sub(tail)) {
        println!("    {line}");
    }
    println!(
        "  replay: cargo run --release -p trainyard-dst -- --seed {} --trace",
        r.seed
    );
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(seed) = args.seed {
        let given = args.policy_churn.is_some()
            || args.consolidation.is_some()
            || args.upstream_gangs.is_some();
        let faults = given.then(|| {
            let mut f = trainyard_dst::faults_of(seed);
            if let Some(on) = args.policy_churn {
                f.policy_churn = on;
            }
            match args.consolidation {
                Some(false) => f.consolidation = None,
                Some(true) if f.consolidation.is_none() => {
                    f.consolidation = trainyard_dst::consolidation::Consolidation::forced(seed);
                }
                _ => {}
            }
            match args.upstream_gangs {
                Some(false) => f.upstream = None,
                Some(true) if f.upstream.is_none() => {
                    f.upstream = trainyard_dst::upstream::UpstreamGangs::forced(seed);
                }
                _ => {}
            }
            f
        });
        let r = trainyard_dst::run(seed, args.seconds, faults);
        if args.trace {
            for line in &r.trace {
                println!("{line}");
            }
        }
        if r.violations.is_empty() {
            println!(
                "seed {seed}: ok ({} s simulated, {} steps, {} cycles, {} binds, {} evictions, {} refused by kubelets)\n  faults: {}",
                r.seconds,
                r.steps,
                r.cycles,
                r.binds,
                r.evictions,
                r.refused,
                r.faults.summary()
            );
            if r.faults.consolidation.is_some() {
                println!("  consolidation: {}", moves(&r.moves));
            }
            if r.faults.upstream.is_some() {
                println!("  upstream gangs: {}", r.upstream.summary());
            }
            return Ok(());
        }
        print_failure(&r, args.tail);
        bail!("seed {seed} violated an invariant");
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let deadline = args
        .minutes
        .map(|m| Instant::now() + Duration::from_secs_f64(m * 60.0));
    let next = Arc::new(AtomicU64::new(args.from));
    let end = args.from.saturating_add(args.count);
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(Mutex::new(Vec::new()));
    let totals = Arc::new(Mutex::new((0u64, 0u64, 0u64, 0u64, 0u128, 0u64)));
    // Consolidation: seeds with it on, seeds with moves, the sum.
    let moving = Arc::new(Mutex::new((
        0u64,
        0u64,
        trainyard_dst::consolidation::Tally::default(),
    )));
    // Upstream gangs: seeds with it on, the sum.
    let gangs = Arc::new(Mutex::new((
        0u64,
        trainyard_dst::upstream::Tally::default(),
    )));
    let started = Instant::now();
    let threads: Vec<_> = (0..jobs)
        .map(|_| {
            let (next, stop, failed, totals, moving, gangs) = (
                next.clone(),
                stop.clone(),
                failed.clone(),
                totals.clone(),
                moving.clone(),
                gangs.clone(),
            );
            let (seconds, tail, journal_only) = (args.seconds, args.tail, args.journal_only);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break;
                    }
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if deadline.is_none() && seed >= end {
                        break;
                    }
                    if journal_only {
                        let f = trainyard_dst::faults_of(seed);
                        if !(f.store && f.crash_every_ms.is_some() && f.other_scheduler) {
                            continue;
                        }
                    }
                    let r = trainyard_dst::run(seed, seconds, None);
                    {
                        let mut t = totals.lock().unwrap_or_else(|e| e.into_inner());
                        t.0 += 1;
                        t.1 += r.binds;
                        t.2 += r.evictions;
                        t.3 += r.steps;
                        t.4 += r.machine_ns;
                        t.5 += r.cycles;
                    }
                    if r.faults.consolidation.is_some() {
                        let mut m = moving.lock().unwrap_or_else(|e| e.into_inner());
                        m.0 += 1;
                        m.1 += u64::from(r.moves.moved_pods > 0);
                        m.2.add(&r.moves);
                    }
                    if r.faults.upstream.is_some() {
                        let mut g = gangs.lock().unwrap_or_else(|e| e.into_inner());
                        g.0 += 1;
                        g.1.add(&r.upstream);
                    }
                    if !r.violations.is_empty() {
                        print_failure(&r, tail);
                        failed.lock().unwrap_or_else(|e| e.into_inner()).push(seed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let (seeds, binds, evictions, steps, machine_ns, cycles) =
        *totals.lock().unwrap_or_else(|e| e.into_inner());
    let failed = failed.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{seeds} seeds ({} simulated s each) in {secs:.0} s on {jobs} threads ({:.0} seeds/min): {binds} binds, {evictions} evictions, {steps} steps; the service's state machine {:.0} µs per bind, {:.0} µs per cycle ({cycles} cycles); {} failed{}",
        args.seconds,
        seeds as f64 / secs * 60.0,
        machine_ns as f64 / 1000.0 / binds.max(1) as f64,
        machine_ns as f64 / 1000.0 / cycles.max(1) as f64,
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {failed:?}")
        }
    );
    let (on, with_moves, tally) = moving.lock().unwrap_or_else(|e| e.into_inner()).clone();
    println!(
        "consolidation on in {on} seeds, moves in {with_moves}: {}",
        moves(&tally)
    );
    let (on, tally) = gangs.lock().unwrap_or_else(|e| e.into_inner()).clone();
    println!("upstream gangs on in {on} seeds: {}", tally.summary());
    if !failed.is_empty() {
        bail!("{} seeds violated an invariant", failed.len());
    }
    Ok(())
}
