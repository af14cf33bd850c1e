//! `--store`: the persisted state's cost, on both backends (redb, sled).
//!
//! A simulated year of usage history for `--queues` leaf queues (one user
//! each), written as the service writes it: every hour one commit of the
//! hour's closed buckets (one per queue) and of the accounting records of
//! the jobs that ended in it (`--jobs-per-day`), every day a compaction (hourly
//! buckets older than 2 days merged into days, buckets older than 56 days,
//! eight 7-day half-lives, dropped; then the file shrunk). Then 2,000 cycles each committing what
//! a busy cycle changes (five pending gangs' records, one bind intent
//! opened and the previous closed) into the year-old store. Prints the
//! store's size after each quarter, the hourly commit, the compaction and
//! the per-cycle commit (median and 99th percentile).

use std::time::{Duration, Instant};

use trainyard_store::{
    Backend, Batch, GangRecord, JournalBind, JournalRecord, JournalState, Records, UsageKey,
    UsageRecord,
};

fn pct(mut v: Vec<Duration>, p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

pub fn store_bench(queues: usize, days: u64, jobs_per_day: u64) -> anyhow::Result<()> {
    sampling(queues);
    println!(
        "| backend | store after 91 / 182 / 273 / {days} days | hourly commit ({queues} buckets, {} job records), median | daily compaction, median | cycle commit, median / p99 |",
        jobs_per_day / 24
    );
    println!("|---|---|---|---|---|");
    for backend in [Backend::Redb, Backend::Sled] {
        let path = std::env::temp_dir().join(format!(
            "trainyard-bench-store-{}-{}",
            std::process::id(),
            backend.name()
        ));
        let result = run(backend, &path, (queues, days, jobs_per_day));
        // Removed whatever happened: a file (redb) or a directory (sled).
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir_all(&path);
        let (sizes, hourly, daily, cycle) = result?;
        println!(
            "| {} | {} | {} | {} | {} / {} |",
            backend.name(),
            sizes
                .iter()
                .map(|b| format!("{:.1} MiB", *b as f64 / (1 << 20) as f64))
                .collect::<Vec<_>>()
                .join(" / "),
            ms(pct(hourly, 50)),
            ms(pct(daily.clone(), 50)),
            ms(pct(cycle.clone(), 50)),
            ms(pct(cycle, 99)),
        );
    }
    Ok(())
}

/// The cycle's side of it: telling the usage history what changed and
/// taking the snapshot that carries the decayed usage, in a full cluster
/// of 5,000 nodes whose 25,000 running jobs are spread over `queues`
/// queues (and as many namespaces), one cycle a second, with churn: every
/// cycle 125 jobs end or start again (outside the timed part, as the
/// watch applies them between cycles).
fn sampling(queues: usize) {
    use std::sync::Arc;
    use trainyard_cluster::usage::UsageHistory;
    use trainyard_cluster::{Change, ClusterState};
    use trainyard_model::Timestamp;

    let (mut snap, _) = trainyard_bench::workloads::reclaim_cluster(11, 5000);
    for (i, j) in snap.jobs.iter_mut().enumerate() {
        let mut job = (**j).clone();
        let q = i % queues;
        job.queue = format!("team-{q:04}");
        job.id = format!("ns-{q:04}/{}", job.id.replace('/', "-"));
        *j = Arc::new(job);
    }
    let all: Vec<Arc<trainyard_model::Job>> = snap.jobs.clone();
    let jobs = all.len();
    let mut state = ClusterState::from_snapshot(snap);
    state.track_usage(UsageHistory::new(7 * 86_400));
    let churn = 125;
    let (mut times, mut recalcs, mut snaps) = (Vec::new(), Vec::new(), Vec::new());
    let mut first_sample = Duration::ZERO;
    let cycles = 3000i64;
    for cycle in 0..cycles {
        let first = (cycle as usize / 2 * churn) % jobs;
        for j in all.iter().cycle().skip(first).take(churn) {
            if cycle % 2 == 0 {
                state.apply(Change::JobGone(j.id.clone()));
            } else {
                state.apply(Change::Job((**j).clone()));
            }
        }
        // In the cycle, as the service does: the changed jobs recorded,
        // closed buckets and finished jobs taken, the snapshot.
        let now = Timestamp(cycle * 1000);
        let t = Instant::now();
        state.record_usage(now);
        if let Some(h) = state.usage_history() {
            std::hint::black_box(h.take_closed());
        }
        std::hint::black_box(state.take_finished_jobs());
        let took = t.elapsed();
        let t = Instant::now();
        let snap = state.snapshot();
        let snapshot = t.elapsed();
        std::hint::black_box(snap.usage.len());
        drop(snap);
        // After the cycle: the decayed totals, once per recalculation
        // period (and at the first sample, which counts every job; that
        // one is reported apart).
        let t = Instant::now();
        let recalculated = state.recalc_usage(now);
        let recalc = t.elapsed();
        if cycle == 0 {
            first_sample = took + snapshot + recalc;
            continue;
        }
        times.push(took);
        snaps.push(snapshot);
        if recalculated {
            recalcs.push(recalc);
        }
    }
    println!("| per cycle | input | time |");
    println!("|---|---|---|");
    println!(
        "| in the cycle: usage recorded (the jobs that changed) | 5000 nodes, {jobs} running jobs, {queues} queues, {churn} jobs ending or starting per cycle, {cycles} cycles at 1 s | median {} / p99 {} / max {} |",
        ms(pct(times.clone(), 50)),
        ms(pct(times.clone(), 99)),
        ms(times.iter().copied().max().unwrap_or_default()),
    );
    println!(
        "| after the cycle: the decayed totals recalculated (once in {} cycles: {} times) | | median {} / max {} |",
        trainyard_cluster::usage::RECALC_PERIOD_S,
        recalcs.len(),
        ms(pct(recalcs.clone(), 50)),
        ms(recalcs.iter().copied().max().unwrap_or_default()),
    );
    println!(
        "| the first sample (counts every running job once), recorded, snapshot and recalculated | | {} |",
        ms(first_sample),
    );
    println!(
        "| for comparison: the snapshot every cycle takes anyway (patched for the changed jobs; after a recalculation it takes the new totals) | | median {} / p99 {} / max {} |\n",
        ms(pct(snaps.clone(), 50)),
        ms(pct(snaps.clone(), 99)),
        ms(snaps.iter().copied().max().unwrap_or_default()),
    );
}

type Measured = (Vec<u64>, Vec<Duration>, Vec<Duration>, Vec<Duration>);

fn run(
    backend: Backend,
    path: &std::path::Path,
    (queues, days, jobs_per_day): (usize, u64, u64),
) -> anyhow::Result<Measured> {
    let mut store = trainyard_store::open(path, backend)?;
    let names: Vec<String> = (0..queues).map(|q| format!("org/team-{q:04}")).collect();
    let (mut hourly, mut daily, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    for hour in 0..days as i64 * 24 {
        let start_s = hour * 3600;
        let mut b = Batch::default();
        for (q, name) in names.iter().enumerate() {
            let key = UsageKey {
                queue: name.clone(),
                user: format!("ns-{q:04}"),
                start_s,
            };
            // 0–64 GPUs held through the hour, and CPU and memory with them.
            let gpus = ((q as u128 * 7 + hour as u128) % 65) * 1000;
            let rec = UsageRecord {
                width_s: 3600,
                cpu: gpus * 20 * 3600,
                memory: gpus * (200 << 20) * 3600,
                gpu: gpus * 3600,
                ..UsageRecord::default()
            };
            b.usage(&key, &rec)?;
        }
        for j in 0..jobs_per_day / 24 {
            let q = (j as usize * 13 + hour as usize) % queues;
            let rec = trainyard_store::JobRecord {
                job: format!("ns-{q:04}/train-{hour}-{j}"),
                queue: names[q].clone(),
                user: format!("ns-{q:04}"),
                start_s: start_s - 7200,
                end_s: start_s + (j as i64 * 3600 / (jobs_per_day / 24).max(1) as i64),
                cpu: 8 * 20_000 * 7200,
                memory: 8 * (200 << 30) * 7200,
                gpu: 8_000 * 7200,
                ..trainyard_store::JobRecord::default()
            };
            b.job(&rec, 0)?;
        }
        let t = Instant::now();
        store.apply(&b)?;
        hourly.push(t.elapsed());
        if hour % 24 == 23 {
            let now = start_s + 3600;
            let t = Instant::now();
            // The service's default: 14 days of job records.
            store.drop_jobs_before(now - 14 * 86_400)?;
            store.compact_usage(now - 2 * 86_400, 86_400, now - 56 * 86_400)?;
            store.shrink()?;
            daily.push(t.elapsed());
        }
        let day = hour / 24 + 1;
        if hour % 24 == 23 && (day % 91 == 0 || day == days as i64) && sizes.len() < 4 {
            sizes.push(store.size_on_disk()?);
        }
    }
    let mut cycle = Vec::new();
    for i in 0..2000u64 {
        let mut b = Batch::default();
        for g in 0..5 {
            b.gang(
                &format!("ns-{:04}/job-{}", (i * 5 + g) % queues as u64, i % 97),
                &GangRecord {
                    enqueued_s: i as i64,
                    attempts: (i % 7) as u32,
                    ..GangRecord::default()
                },
            );
        }
        b.intent(
            i,
            &JournalRecord {
                gang: format!("ns-0001/job-{i}"),
                opened_s: i as i64,
                binds: (0..8)
                    .map(|p| JournalBind {
                        pod: format!("ns-0001/job-{i}-{p}"),
                        uid: format!("uid-{i}-{p}"),
                        node: format!("node-{:05}", (i * 8 + p) % 5000),
                        gpus: (0..8).collect(),
                    })
                    .collect(),
                state: JournalState::Open,
            },
        );
        if i > 0 {
            b.close_intent(i - 1);
        }
        let t = Instant::now();
        store.apply(&b)?;
        cycle.push(t.elapsed());
    }
    Ok((sizes, hourly, daily, cycle))
}
