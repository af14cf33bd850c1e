//! Text outputs of a run: per-job and per-queue CSV tables, JSON summaries
//! and a terminal comparison table.
//!
//! Every function returns a `String`; the CLI writes the files. Output is
//! deterministic: the same input gives the same bytes (integer-based or
//! fixed-precision number formatting, ordered maps only, no clock).
//!
//! Units:
//! * times are seconds since the run's `start_time`, with exactly three
//!   decimals (millisecond precision);
//! * GPUs are whole devices (`1.5` = 1500 milli-GPU), CPU is cores, memory
//!   is GiB (2³⁰ bytes), every other resource is its raw integer count;
//!   amounts have at most three decimals, trailing zeros trimmed.

use comfy_table::{Cell, CellAlignment, Table, presets};
use trainyard_model::resources::MILLI_PER_GPU;
use trainyard_model::{ResourceName, Resources, Timestamp};

use crate::result::{
    JobState, MILLI_GPU_MS_PER_GPU_HOUR, SimOutput, Stats, Summary, TopologySummary,
};

/// Header of [`jobs_csv`].
pub const JOBS_CSV_HEADER: [&str; 15] = [
    "id",
    "queue",
    "priority",
    "gpus",
    "tasks",
    "submit_s",
    "start_s",
    "end_s",
    "wait_s",
    "jct_s",
    "state",
    "restarts",
    "evicted_pods",
    "lost_gpu_hours",
    "pending_reason",
];

/// Columns [`jobs_csv`] adds when the run had a network topology.
pub const JOBS_CSV_TOPOLOGY_HEADER: [&str; 8] = [
    "nodes",
    "leaves",
    "spine_crossings",
    "hops",
    "rail_aligned",
    "level",
    "in_tightest",
    "slowdown_s",
];

/// Header of [`queues_csv`].
pub const QUEUES_CSV_HEADER: [&str; 7] = [
    "time_s",
    "queue",
    "resource",
    "unit",
    "demand",
    "fair_share",
    "allocated",
];

/// `jobs.csv`: one row per job, in the order of `out.jobs`.
///
/// Columns: `id, queue, priority`; `gpus` (whole GPUs, up to three
/// decimals); `tasks`; `submit_s, start_s, end_s` (seconds since the start
/// of the run, three decimals); `wait_s` (start − submit, empty if the job
/// never started); `jct_s` (end − submit, empty unless completed); `state`
/// (`completed`, `running`, `pending`, `rejected`); `restarts` (whole-job
/// restarts after a node failure or an eviction below the gang minimum);
/// `evicted_pods` (pods the scheduler evicted); `lost_gpu_hours` (GPUs ×
/// lost time of its killed pods, by evictions and node failures, three
/// decimals); `pending_reason` (the last reason the scheduler gave while
/// the job waited, empty if none). Absent values are empty cells; cells are quoted
/// as CSV requires.
///
/// With a network topology, [`JOBS_CSV_TOPOLOGY_HEADER`] follows, filled
/// for jobs that started with two or more pods (at their last start):
/// `nodes`, `leaves` (leaf domains), `spine_crossings` and `hops` (of the
/// ring over the pods in rank order), `rail_aligned` (`true`/`false`),
/// `level` (tightest level with one domain holding the gang, `cluster` if
/// none), `in_tightest` (`true`/`false` as the scheduler reported, empty if
/// it did not), `slowdown_s` (run time added by the slowdown model).
pub fn jobs_csv(out: &SimOutput) -> String {
    let rel = |t: Timestamp| millis_as_secs(t.0 - out.start_time.0);
    let with_topology = out.topology.is_some();
    let mut w = csv::Writer::from_writer(Vec::new());
    if with_topology {
        write_row(
            &mut w,
            JOBS_CSV_HEADER.iter().chain(&JOBS_CSV_TOPOLOGY_HEADER),
        );
    } else {
        write_row(&mut w, JOBS_CSV_HEADER);
    }
    for j in &out.jobs {
        let mut row = vec![
            j.id.clone(),
            j.queue.clone(),
            j.priority.to_string(),
            gpus(j.gpu_milli),
            j.tasks.to_string(),
            rel(j.submit),
            j.start.map(rel).unwrap_or_default(),
            j.end.map(rel).unwrap_or_default(),
            j.start
                .map(|s| millis_as_secs(s.0 - j.submit.0))
                .unwrap_or_default(),
            j.jct_ms().map(millis_as_secs).unwrap_or_default(),
            state_name(j.state).to_string(),
            j.restarts.to_string(),
            j.evicted_pods.to_string(),
            decimal(j.lost.total(), MILLI_GPU_MS_PER_GPU_HOUR),
            j.pending_reason.clone().unwrap_or_default(),
        ];
        if with_topology {
            match &j.topology {
                Some(t) => row.extend([
                    t.nodes.to_string(),
                    t.leaves.to_string(),
                    t.spine_crossings.to_string(),
                    t.hops.to_string(),
                    t.rail_aligned.to_string(),
                    t.level.clone().unwrap_or_else(|| "cluster".into()),
                    t.in_tightest.map(|b| b.to_string()).unwrap_or_default(),
                    millis_as_secs(t.slowdown_ms as i64),
                ]),
                None => row.extend(std::iter::repeat_n(
                    String::new(),
                    JOBS_CSV_TOPOLOGY_HEADER.len(),
                )),
            }
        }
        write_row(&mut w, row);
    }
    finish(w)
}

/// `queues.csv`, long format: one row per queue sample per resource that is
/// non-zero in any of demand, fair share or allocated (GPU first, then CPU,
/// memory and other resources by name).
///
/// Columns: `time_s` (seconds since the start of the run, three decimals),
/// `queue` (path), `resource` (Kubernetes name), `unit` (`gpus`, `cores`,
/// `GiB` or `count`), then `demand`, `fair_share` and `allocated` in that
/// unit (at most three decimals, trailing zeros trimmed).
pub fn queues_csv(out: &SimOutput) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    write_row(&mut w, QUEUES_CSV_HEADER);
    for s in &out.queues {
        let time = millis_as_secs(s.time.0 - out.start_time.0);
        let mut any = s.demand.clone();
        any.add(&s.fair_share);
        any.add(&s.allocated);
        for name in ordered_names(&any) {
            write_row(
                &mut w,
                [
                    time.clone(),
                    s.queue.clone(),
                    name.as_str().to_string(),
                    unit_name(&name).to_string(),
                    amount_in_unit(&name, s.demand.get(&name)),
                    amount_in_unit(&name, s.fair_share.get(&name)),
                    amount_in_unit(&name, s.allocated.get(&name)),
                ],
            );
        }
    }
    finish(w)
}

/// `summary.json`: the summary as pretty-printed JSON with a trailing newline.
pub fn summary_json(s: &Summary) -> String {
    let mut text = serde_json::to_string_pretty(s).expect("a summary always serializes");
    text.push('\n');
    text
}

/// `comparison.json`: the summaries of several runs, in the given order, as
/// a pretty-printed JSON array with a trailing newline.
pub fn comparison_json(s: &[Summary]) -> String {
    let mut text = serde_json::to_string_pretty(s).expect("summaries always serialize");
    text.push('\n');
    text
}

/// A terminal table of the key numbers of one or several runs (one column
/// per policy), followed by a per-queue table for each run.
///
/// Durations are shown for people (`42s`, `3m12s`, `1h05m`, `2d4h`); `-`
/// means no job contributed to that number.
pub fn summary_table(runs: &[Summary]) -> String {
    let mut out = String::new();
    if runs.is_empty() {
        out.push_str("no runs\n");
        return out;
    }
    let mut header = vec!["METRIC".to_string()];
    header.extend(runs.iter().map(|r| r.policy.clone()));
    let mut t = table(header);
    let mut row = |label: &str, f: &dyn Fn(&Summary) -> String| {
        let mut cells = vec![Cell::new(label)];
        cells.extend(runs.iter().map(|r| right(f(r))));
        t.add_row(cells);
    };
    row("jobs", &|r| r.jobs.to_string());
    row("completed", &|r| r.completed.to_string());
    row("running at end", &|r| r.running_at_end.to_string());
    row("pending at end", &|r| r.pending_at_end.to_string());
    row("rejected", &|r| r.rejected.to_string());
    row("wait mean", &|r| stat(&r.wait_seconds, r.wait_seconds.mean));
    row("wait p50", &|r| stat(&r.wait_seconds, r.wait_seconds.p50));
    row("wait p95", &|r| stat(&r.wait_seconds, r.wait_seconds.p95));
    row("wait p99", &|r| stat(&r.wait_seconds, r.wait_seconds.p99));
    let classes: Vec<String> = {
        let mut seen: Vec<String> = Vec::new();
        for r in runs {
            for c in &r.wait_by_size {
                if !seen.contains(&c.class) {
                    seen.push(c.class.clone());
                }
            }
        }
        seen
    };
    for class in &classes {
        row(&format!("wait p50/p95/p99, {class} GPUs"), &|r| match r
            .wait_by_size
            .iter()
            .find(|c| &c.class == class)
        {
            Some(c) => {
                let w = &c.wait_seconds;
                let never = if c.never_started > 0 {
                    format!(" ({} never started)", c.never_started)
                } else {
                    String::new()
                };
                format!(
                    "{} / {} / {}{never}",
                    stat(w, w.p50),
                    stat(w, w.p95),
                    stat(w, w.p99)
                )
            }
            None => "-".into(),
        });
    }
    if runs.iter().any(|r| r.reserved_jobs > 0 || r.timed_out > 0) {
        row("reserved jobs", &|r| r.reserved_jobs.to_string());
        row("timed out", &|r| r.timed_out.to_string());
    }
    row("JCT mean", &|r| stat(&r.jct_seconds, r.jct_seconds.mean));
    row("JCT p95", &|r| stat(&r.jct_seconds, r.jct_seconds.p95));
    row("GPU allocation", &|r| fmt_percent(r.gpu_allocation_ratio));
    if runs.iter().any(|r| r.scattered_share > 0.0) {
        row("time GPUs scattered", &|r| fmt_percent(r.scattered_share));
    }
    row("Jain's fairness", &|r| fmt_fixed(r.jain_fairness, 3));
    row("reclaims (jobs)", &|r| r.preemption.reclaims.to_string());
    row("preemptions (jobs)", &|r| {
        r.preemption.preemptions.to_string()
    });
    row("evicted pods", &|r| r.preemption.evicted_pods.to_string());
    row("lost GPU-hours", &|r| {
        fmt_fixed(r.preemption.lost_gpu_hours, 1)
    });
    if runs.iter().any(|r| r.preemption.moves > 0) {
        row("moved jobs", &|r| r.preemption.moves.to_string());
        row("moved pods", &|r| r.preemption.moved_pods.to_string());
        row("GPU-hours lost to moves", &|r| {
            fmt_fixed(r.preemption.move_lost_gpu_hours, 1)
        });
    }
    row("starved episodes", &|r| {
        r.preemption.starved_episodes.to_string()
    });
    row("to fair share mean", &|r| {
        let t = &r.preemption.time_to_fair_share_seconds;
        stat(t, t.mean)
    });
    row("to fair share p95", &|r| {
        let t = &r.preemption.time_to_fair_share_seconds;
        stat(t, t.p95)
    });
    row("starved at end", &|r| {
        r.preemption.starved_at_end.to_string()
    });
    if runs.iter().any(|r| r.topology.is_some()) {
        row("gangs (2+ pods)", &|r| {
            topo_cell(r, false, |t| t.gangs.to_string())
        });
        row("gangs on 2+ nodes", &|r| {
            topo_cell(r, false, |t| t.multi_node_gangs.to_string())
        });
        row("gangs in one leaf", &|r| {
            topo_cell(r, true, |t| fmt_percent(t.one_leaf_share))
        });
        row("leaves per gang", &|r| {
            topo_cell(r, true, |t| fmt_fixed(t.mean_leaves, 2))
        });
        row("spine crossings/gang", &|r| {
            topo_cell(r, true, |t| fmt_fixed(t.mean_spine_crossings, 2))
        });
        row("rail-aligned gangs", &|r| {
            topo_cell(r, true, |t| fmt_percent(t.rail_aligned_share))
        });
        row("in tightest domain", &|r| {
            topo_cell(r, true, |t| {
                t.in_tightest_share
                    .map(fmt_percent)
                    .unwrap_or_else(|| "-".into())
            })
        });
        row("slowdown mean", &|r| {
            topo_cell(r, true, |t| fmt_percent(t.mean_slowdown_percent / 100.0))
        });
        row("largest 1-leaf gang", &|r| {
            topo_cell(r, false, |t| {
                format!("{} GPUs", fmt_fixed(t.mean_largest_free_leaf_gpus, 1))
            })
        });
    }
    row("simulated time", &|r| fmt_duration(r.simulated_seconds));
    row("cycles", &|r| r.cycles.to_string());
    row("events", &|r| r.events.to_string());
    out.push_str(&t.trim_fmt());
    out.push('\n');

    for r in runs {
        if runs.len() > 1 {
            out.push_str(&format!("\nPER QUEUE: {}\n", r.policy));
        } else {
            out.push_str("\nPER QUEUE\n");
        }
        if r.per_queue.is_empty() {
            out.push_str("no queues\n");
            continue;
        }
        let mut t = table(
            [
                "QUEUE",
                "JOBS",
                "COMPLETED",
                "WAIT P50",
                "WAIT P95",
                "SHARE RATIO",
                "EVICTED PODS",
                "TO FAIR SHARE",
            ]
            .map(String::from)
            .to_vec(),
        );
        for (name, q) in &r.per_queue {
            t.add_row(vec![
                Cell::new(name),
                right(q.jobs.to_string()),
                right(q.completed.to_string()),
                right(stat(&q.wait_seconds, q.wait_seconds.p50)),
                right(stat(&q.wait_seconds, q.wait_seconds.p95)),
                right(fmt_fixed(q.mean_share_ratio, 2)),
                right(q.evicted_pods.to_string()),
                right(to_fair_share(q)),
            ]);
        }
        out.push_str(&t.trim_fmt());
        out.push('\n');
    }
    out
}

/// Mean time to fair share of a queue, `-` without ended episodes, with
/// the episode still open at the end, if any (`1h05m, starved 2h at end`).
pub(crate) fn to_fair_share(q: &crate::result::QueueSummary) -> String {
    let t = &q.time_to_fair_share_seconds;
    let mean = stat(t, t.mean);
    if q.starved_at_end_seconds > 0.0 {
        format!(
            "{mean}, starved {} at end",
            fmt_duration(q.starved_at_end_seconds)
        )
    } else {
        mean
    }
}

/// A topology metric of a run, `-` without a topology (or, with
/// `per_gang`, without gangs).
fn topo_cell(r: &Summary, per_gang: bool, f: impl Fn(&TopologySummary) -> String) -> String {
    match &r.topology {
        Some(t) if !per_gang || t.gangs > 0 => f(t),
        _ => "-".to_string(),
    }
}

/// A borderless table; every column but the first is right-aligned,
/// header included.
fn table(header: Vec<String>) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.into_iter().enumerate().map(
        |(i, h)| {
            if i == 0 { Cell::new(h) } else { right(h) }
        },
    ));
    t
}

fn right(s: String) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}

/// A statistic for people, or `-` when nothing was measured.
fn stat(s: &Stats, v: f64) -> String {
    if s.count == 0 {
        "-".to_string()
    } else {
        fmt_duration(v)
    }
}

fn write_row<I, T>(w: &mut csv::Writer<Vec<u8>>, row: I)
where
    I: IntoIterator<Item = T>,
    T: AsRef<[u8]>,
{
    w.write_record(row)
        .expect("writing CSV to memory cannot fail");
}

fn finish(w: csv::Writer<Vec<u8>>) -> String {
    let bytes = w.into_inner().expect("flushing CSV to memory cannot fail");
    String::from_utf8(bytes).expect("CSV of UTF-8 strings is UTF-8")
}

/// The lowercase name of a job state, as in JSON.
pub(crate) fn state_name(s: JobState) -> &'static str {
    match s {
        JobState::Completed => "completed",
        JobState::Running => "running",
        JobState::Pending => "pending",
        JobState::Rejected => "rejected",
        JobState::TimedOut => "timed_out",
    }
}

/// Milliseconds as seconds with exactly three decimals, exact.
pub(crate) fn millis_as_secs(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let a = ms.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// Milli-GPU as whole GPUs, up to three decimals.
pub(crate) fn gpus(milli: u64) -> String {
    decimal(milli, MILLI_PER_GPU)
}

/// `amount / unit` rounded to three decimals, trailing zeros trimmed.
pub(crate) fn decimal(amount: u64, unit: u64) -> String {
    let unit = unit.max(1) as u128;
    let scaled = (amount as u128 * 1000 + unit / 2) / unit;
    let (whole, frac) = (scaled / 1000, scaled % 1000);
    if frac == 0 {
        return whole.to_string();
    }
    let mut s = format!("{whole}.{frac:03}");
    while s.ends_with('0') {
        s.pop();
    }
    s
}

/// Non-zero resources of `r`: GPU first, then CPU, memory, others by name.
fn ordered_names(r: &Resources) -> Vec<ResourceName> {
    let mut names: Vec<ResourceName> = r.names().collect();
    names.sort_by_key(|n| match n {
        ResourceName::Gpu => 0,
        ResourceName::Cpu => 1,
        ResourceName::Memory => 2,
        ResourceName::Extended(_) => 3,
    });
    names
}

fn unit_name(n: &ResourceName) -> &'static str {
    match n {
        ResourceName::Gpu => "gpus",
        ResourceName::Cpu => "cores",
        ResourceName::Memory => "GiB",
        ResourceName::Extended(_) => "count",
    }
}

fn amount_in_unit(n: &ResourceName, v: u64) -> String {
    match n {
        ResourceName::Gpu => decimal(v, MILLI_PER_GPU),
        ResourceName::Cpu => decimal(v, 1000),
        ResourceName::Memory => decimal(v, 1 << 30),
        ResourceName::Extended(_) => v.to_string(),
    }
}

/// `v` with `decimals` decimals; `-` when not finite; never `-0`.
pub(crate) fn fmt_fixed(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let s = format!("{v:.decimals$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

/// A ratio as a percentage with one decimal: `0.8125` → `81.3%`.
pub(crate) fn fmt_percent(ratio: f64) -> String {
    if !ratio.is_finite() {
        return "-".to_string();
    }
    format!("{}%", fmt_fixed(ratio * 100.0, 1))
}

/// Seconds for people: `0s`, `2.5s`, `42s`, `3m12s`, `1h05m`, `2d4h`.
pub(crate) fn fmt_duration(secs: f64) -> String {
    if !secs.is_finite() {
        return "-".to_string();
    }
    if secs < 0.0 {
        return format!("-{}", fmt_duration(-secs));
    }
    if secs < 9.95 {
        let s = fmt_fixed(secs, 1);
        let s = s.strip_suffix(".0").unwrap_or(&s);
        return format!("{s}s");
    }
    let total = secs.round() as u64;
    let (d, h, m, s) = (
        total / 86_400,
        total % 86_400 / 3600,
        total % 3600 / 60,
        total % 60,
    );
    if total < 60 {
        format!("{s}s")
    } else if total < 3600 {
        format!("{m}m{s:02}s")
    } else if total < 86_400 {
        format!("{h}h{m:02}m")
    } else {
        format!("{d}d{h}h")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::result::{ClusterSample, JobRecord, LostGpu, QueueSample, QueueSummary};

    fn ts(ms: i64) -> Timestamp {
        Timestamp(ms)
    }

    fn two_jobs() -> SimOutput {
        SimOutput {
            policy: "drf".into(),
            jobs: vec![
                JobRecord {
                    id: "team-a/train-1".into(),
                    queue: "root/a".into(),
                    priority: 10,
                    gpu_milli: 8000,
                    tasks: 2,
                    submit: ts(1_000_500),
                    start: Some(ts(1_003_000)),
                    end: Some(ts(1_063_250)),
                    state: JobState::Completed,
                    pending_reason: None,
                    restarts: 1,
                    min_gpu_milli: 8000,
                    evicted_pods: 2,
                    // 2 GPUs × 1 h evicted, 1 GPU × 15 min node fault.
                    lost: LostGpu {
                        evictions: 7_200_000_000,
                        node_faults: 900_000_000,
                        moves: 0,
                    },
                    topology: None,
                    reserved_start: None,
                },
                JobRecord {
                    id: "team-b/\"big\" eval".into(),
                    queue: "root/b".into(),
                    priority: -1,
                    gpu_milli: 1500,
                    tasks: 1,
                    submit: ts(1_010_000),
                    start: None,
                    end: None,
                    state: JobState::Pending,
                    pending_reason: Some("queue over fair share, nodes: 0/4 fit".into()),
                    restarts: 0,
                    min_gpu_milli: 0,
                    evicted_pods: 0,
                    lost: Default::default(),
                    topology: None,
                    reserved_start: None,
                },
            ],
            queues: vec![QueueSample {
                time: ts(1_002_000),
                queue: "root/a".into(),
                name: "a".into(),
                is_leaf: true,
                demand: Resources::new(4000, 3 << 29, 8000),
                fair_share: Resources::new(2500, 1 << 30, 4000),
                allocated: Resources::new(0, 0, 8000),
            }],
            cluster: vec![ClusterSample {
                time: ts(1_000_000),
                gpu_capacity: 16_000,
                gpu_allocated: 8000,
                running_jobs: 1,
                pending_jobs: 1,
                largest_free_leaf_gpus: None,
                scattered: false,
            }],
            cycles: 7,
            events: 12,
            start_time: ts(1_000_000),
            end_time: ts(1_100_000),
            topology: None,
            evictions: vec![],
            eviction_model: Default::default(),
            dra_claims: 0,
        }
    }

    #[test]
    fn jobs_csv_exact() {
        assert_eq!(
            jobs_csv(&two_jobs()),
            "id,queue,priority,gpus,tasks,submit_s,start_s,end_s,wait_s,jct_s,state,restarts,evicted_pods,lost_gpu_hours,pending_reason\n\
             team-a/train-1,root/a,10,8,2,0.500,3.000,63.250,2.500,62.750,completed,1,2,2.25,\n\
             \"team-b/\"\"big\"\" eval\",root/b,-1,1.5,1,10.000,,,,,pending,0,0,0,\"queue over fair share, nodes: 0/4 fit\"\n"
        );
        let empty = SimOutput {
            jobs: vec![],
            ..two_jobs()
        };
        assert_eq!(jobs_csv(&empty), format!("{}\n", JOBS_CSV_HEADER.join(",")));
    }

    #[test]
    fn queues_csv_exact() {
        assert_eq!(
            queues_csv(&two_jobs()),
            "time_s,queue,resource,unit,demand,fair_share,allocated\n\
             2.000,root/a,nvidia.com/gpu,gpus,8,4,8\n\
             2.000,root/a,cpu,cores,4,2.5,0\n\
             2.000,root/a,memory,GiB,1.5,1,0\n"
        );
    }

    #[test]
    fn json_is_pretty_and_ends_with_newline() {
        let s = two_jobs().summary();
        let j = summary_json(&s);
        assert!(j.starts_with("{\n  \"policy\": \"drf\","));
        assert!(j.ends_with("}\n"));
        let back: Summary = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
        let c = comparison_json(&[s.clone(), s.clone()]);
        assert!(c.starts_with("[\n  {\n"));
        assert!(c.ends_with("]\n"));
        let back: Vec<Summary> = serde_json::from_str(&c).unwrap();
        assert_eq!(back, vec![s.clone(), s]);
        assert_eq!(comparison_json(&[]), "[]\n");
    }

    #[test]
    fn table_single_and_several() {
        let s = two_jobs().summary();
        let t = summary_table(std::slice::from_ref(&s));
        assert!(t.contains("METRIC"), "{t}");
        assert!(t.contains("drf"));
        assert!(t.contains("50.0%"), "{t}");
        assert!(t.contains("PER QUEUE\n"));
        assert!(t.contains("root/b"));
        assert!(t.lines().all(|l| !l.ends_with(' ')));

        let mut other = s.clone();
        other.policy = "fifo".into();
        other.per_queue = BTreeMap::from([(
            "root/x".to_string(),
            QueueSummary {
                jobs: 3,
                ..Default::default()
            },
        )]);
        let t2 = summary_table(&[s, other]);
        assert!(t2.contains("PER QUEUE: drf"));
        assert!(t2.contains("PER QUEUE: fifo"));
        let header = t2.lines().next().unwrap();
        assert!(header.contains("drf") && header.contains("fifo"), "{t2}");
        assert_eq!(summary_table(&[]), "no runs\n");
        // Deterministic.
        assert_eq!(
            t2,
            summary_table(&[two_jobs().summary(), {
                let mut o = two_jobs().summary();
                o.policy = "fifo".into();
                o.per_queue = BTreeMap::from([(
                    "root/x".to_string(),
                    QueueSummary {
                        jobs: 3,
                        ..Default::default()
                    },
                )]);
                o
            }])
        );
    }

    #[test]
    fn durations_for_people() {
        let cases = [
            (0.0, "0s"),
            (2.5, "2.5s"),
            (42.0, "42s"),
            (192.0, "3m12s"),
            (3900.0, "1h05m"),
            (2.0 * 86_400.0 + 4.0 * 3600.0 + 59.0, "2d4h"),
            (f64::NAN, "-"),
        ];
        for (v, want) in cases {
            assert_eq!(fmt_duration(v), want, "{v}");
        }
        assert_eq!(fmt_percent(0.8127), "81.3%");
        assert_eq!(fmt_fixed(-0.0001, 2), "0.00");
        assert_eq!(decimal(1 << 29, 1 << 30), "0.5");
        assert_eq!(decimal(1, 3), "0.333");
        assert_eq!(millis_as_secs(-1500), "-1.500");
    }
}
