//! The HTML report: one self-contained page (inline CSS and SVG, no script,
//! no external assets) comparing one or several runs of the same workload.
//!
//! The page shows a table of the key summary numbers per policy, then:
//! 1. GPU allocation over time against capacity;
//! 2. per leaf queue, allocated GPUs against fair share (small multiples);
//! 3. the wait-time distribution (CDF) of each queue, one chart per policy;
//! 4. pending jobs over time;
//! 5. Jain's fairness index over time;
//! 6. evicted pods over time (cumulative, reclaim and preemption);
//! 7. with a topology, the largest gang that fits in one leaf over time;
//!
//! and a per-queue table. All text is HTML-escaped, all numbers have fixed
//! precision and long series are downsampled deterministically, so the same
//! input gives the same bytes.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::Timestamp;
use trainyard_model::resources::MILLI_PER_GPU;

use crate::chart::*;
use crate::output::{fmt_duration, fmt_fixed, fmt_percent};
use crate::result::{JobState, SimOutput, Stats, Summary};

/// Color of reference lines (capacity, single-policy fair share).
const REFERENCE: &str = "#555555";
/// Wait-time axis ticks, log scale: 1 s to 30 days (the axis extends to
/// the longest wait when it is longer).
const WAIT_TICKS: [(f64, &str); 8] = [
    (1.0, "1s"),
    (10.0, "10s"),
    (60.0, "1m"),
    (600.0, "10m"),
    (3600.0, "1h"),
    (86_400.0, "1d"),
    (604_800.0, "1w"),
    (2_592_000.0, "30d"),
];

/// The time unit of the x axis for a run of `span_ms`.
fn time_unit(span_ms: i64) -> (f64, &'static str) {
    if span_ms <= 3 * 3_600_000 {
        (60_000.0, "minutes")
    } else if span_ms <= 3 * 86_400_000 {
        (3_600_000.0, "hours")
    } else {
        (86_400_000.0, "days")
    }
}

/// Turns samples of a step function into chart points relative to
/// `start`, extended to `end` so the last value shows how long it held.
fn step_points(
    samples: impl Iterator<Item = (Timestamp, f64)>,
    start: Timestamp,
    end: Timestamp,
    unit_ms: f64,
) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = samples
        .map(|(t, v)| ((t.0 - start.0) as f64 / unit_ms, v))
        .collect();
    if let Some(&(x, y)) = pts.last() {
        let xe = (end.0 - start.0) as f64 / unit_ms;
        if xe > x {
            pts.push((xe, y));
        }
    }
    pts
}

fn gpus_f(milli: u64) -> f64 {
    milli as f64 / MILLI_PER_GPU as f64
}

/// Line width of the `i`th of `n` policies: earlier ones are drawn wider so
/// that identical lines of several policies all stay visible.
fn policy_stroke(i: usize, n: usize) -> f64 {
    1.8 + n.saturating_sub(i + 1).min(3) as f64 * 1.3
}

/// `report.html` for one or several runs of the same workload, in the given
/// order (the first run's policy gets the first palette color).
pub fn report_html(runs: &[(&SimOutput, &Summary)], title: &str) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str(&format!("<title>{}</title>\n", esc(title)));
    h.push_str(STYLE);
    h.push_str("</head>\n<body>\n<main>\n");
    h.push_str(&format!("<header>\n<h1>{}</h1>\n", esc(title)));
    if runs.is_empty() {
        h.push_str("<p class=\"sub\">No runs to show.</p>\n</header>\n</main>\n</body>\n</html>\n");
        return h;
    }
    let jobs: u64 = runs[0].1.jobs;
    let span_ms = runs
        .iter()
        .map(|(o, _)| o.end_time.0 - o.start_time.0)
        .max()
        .unwrap_or(0)
        .max(0);
    let policies: Vec<&str> = runs.iter().map(|(o, _)| o.policy.as_str()).collect();
    h.push_str(&format!(
        "<p class=\"sub\">{} · {} jobs · {} simulated</p>\n</header>\n",
        esc(&if policies.len() == 1 {
            format!("policy {}", policies[0])
        } else {
            format!("{} policies: {}", policies.len(), policies.join(", "))
        }),
        jobs,
        esc(&fmt_duration(span_ms as f64 / 1000.0)),
    ));

    h.push_str("<section>\n<h2>Summary</h2>\n");
    h.push_str(&summary_html(runs));
    h.push_str("</section>\n");

    let (unit_ms, unit_name) = time_unit(span_ms);
    let x_max = if span_ms > 0 {
        span_ms as f64 / unit_ms
    } else {
        1.0
    };
    let time_label = format!("time since start ({unit_name})");
    let several = runs.len() > 1;

    // 1. GPU allocation.
    h.push_str("<section>\n<h2>GPU allocation</h2>\n");
    h.push_str("<p class=\"note\">GPUs allocated to jobs over time; the dashed line is the GPU capacity of nodes that are up.</p>\n");
    let mut chart = LineChart::new(
        "Allocated GPUs vs capacity",
        &time_label,
        "GPUs",
        1100.0,
        320.0,
    );
    chart.x_domain = Some((0.0, x_max));
    let mut capacities: Vec<(usize, Vec<(f64, f64)>)> = Vec::new();
    for (i, (o, _)) in runs.iter().enumerate() {
        let cap = step_points(
            o.cluster.iter().map(|c| (c.time, gpus_f(c.gpu_capacity))),
            o.start_time,
            o.end_time,
            unit_ms,
        );
        if !capacities.iter().any(|(_, c)| *c == cap) {
            capacities.push((i, cap));
        }
    }
    let distinct_caps = capacities.len();
    for (i, cap) in capacities {
        chart.series.push(Series {
            name: if distinct_caps > 1 {
                format!("capacity ({})", runs[i].0.policy)
            } else {
                "capacity".to_string()
            },
            points: cap,
            dash: Dash::Interleaved {
                index: i,
                of: runs.len(),
            },
            color: if distinct_caps > 1 {
                style(i).0
            } else {
                REFERENCE
            },
            stroke: 1.5,
        });
    }
    for (i, (o, _)) in runs.iter().enumerate() {
        chart.series.push(Series {
            name: if several {
                format!("allocated ({})", o.policy)
            } else {
                "allocated".to_string()
            },
            points: step_points(
                o.cluster.iter().map(|c| (c.time, gpus_f(c.gpu_allocated))),
                o.start_time,
                o.end_time,
                unit_ms,
            ),
            dash: Dash::Solid,
            color: style(i).0,
            stroke: policy_stroke(i, runs.len()),
        });
    }
    h.push_str(&chart.render());
    h.push_str("</section>\n");

    // 2. Per leaf queue: allocated vs fair share.
    let leaves: BTreeSet<&str> = runs
        .iter()
        .flat_map(|(o, _)| o.queues.iter())
        .filter(|s| s.is_leaf)
        .map(|s| s.queue.as_str())
        .collect();
    h.push_str("<section>\n<h2>Leaf queues: allocated GPUs vs fair share</h2>\n");
    h.push_str("<p class=\"note\">One chart per leaf queue; solid lines are allocated GPUs, dashed lines the queue's fair share. Each chart has its own y scale.</p>\n");
    h.push_str("<div class=\"legend\">");
    for (i, (o, _)) in runs.iter().enumerate() {
        let (color, fair_color) = if several {
            (style(i).0, style(i).0)
        } else {
            (style(0).0, REFERENCE)
        };
        let suffix = if several {
            format!(" ({})", o.policy)
        } else {
            String::new()
        };
        h.push_str(&legend_item(
            color,
            Dash::Solid,
            &format!("allocated{suffix}"),
        ));
        h.push_str(&legend_item(
            fair_color,
            Dash::Dashed,
            &format!("fair share{suffix}"),
        ));
    }
    h.push_str("</div>\n");
    if leaves.is_empty() {
        h.push_str("<p class=\"empty\">No queue samples.</p>\n");
    }
    h.push_str("<div class=\"grid small\">\n");
    let per_run_leaf: Vec<BTreeMap<&str, Vec<&crate::result::QueueSample>>> = runs
        .iter()
        .map(|(o, _)| {
            let mut m: BTreeMap<&str, Vec<&crate::result::QueueSample>> = BTreeMap::new();
            for s in o.queues.iter().filter(|s| s.is_leaf) {
                m.entry(s.queue.as_str()).or_default().push(s);
            }
            m
        })
        .collect();
    for q in &leaves {
        let mut chart = LineChart::new(q, &time_label, "GPUs", 360.0, 230.0);
        chart.legend = false;
        chart.x_domain = Some((0.0, x_max));
        for (i, (o, _)) in runs.iter().enumerate() {
            let samples = per_run_leaf[i].get(q).map(Vec::as_slice).unwrap_or(&[]);
            let suffix = if several {
                format!(" ({})", o.policy)
            } else {
                String::new()
            };
            chart.series.push(Series {
                name: format!("fair share{suffix}"),
                points: step_points(
                    samples.iter().map(|s| (s.time, gpus_f(s.fair_share.gpu))),
                    o.start_time,
                    o.end_time,
                    unit_ms,
                ),
                dash: Dash::Interleaved {
                    index: i,
                    of: runs.len(),
                },
                color: if several { style(i).0 } else { REFERENCE },
                stroke: 1.5,
            });
            chart.series.push(Series {
                name: format!("allocated{suffix}"),
                points: step_points(
                    samples.iter().map(|s| (s.time, gpus_f(s.allocated.gpu))),
                    o.start_time,
                    o.end_time,
                    unit_ms,
                ),
                dash: Dash::Solid,
                color: style(i).0,
                stroke: policy_stroke(i, runs.len()),
            });
        }
        h.push_str(&format!("<figure>{}</figure>\n", chart.render()));
    }
    h.push_str("</div>\n</section>\n");

    // 3. Wait-time CDF per queue, one chart per policy.
    let job_queues: BTreeSet<&str> = runs
        .iter()
        .flat_map(|(o, _)| o.jobs.iter())
        .map(|j| j.queue.as_str())
        .collect();
    let queue_index: BTreeMap<&str, usize> = job_queues
        .iter()
        .enumerate()
        .map(|(i, q)| (*q, i))
        .collect();
    h.push_str("<section>\n<h2>Wait time distribution</h2>\n");
    h.push_str("<p class=\"note\">Fraction of each queue's jobs (rejected jobs excluded) that had started within a given wait; waits under 1 s are drawn at 1 s. A curve that ends below 1 means jobs of that queue were still waiting when the run ended.</p>\n");
    h.push_str(if several {
        "<div class=\"grid half\">\n"
    } else {
        "<div>\n"
    });
    // One x domain for all policies, so their charts compare directly.
    let max_wait = runs
        .iter()
        .flat_map(|(o, _)| o.jobs.iter())
        .filter(|j| j.state != JobState::Rejected)
        .filter_map(|j| j.start.map(|st| (st.0 - j.submit.0) as f64 / 1000.0))
        .fold(60.0, f64::max);
    let x_hi = WAIT_TICKS
        .iter()
        .map(|t| t.0)
        .find(|t| *t >= max_wait)
        .unwrap_or(max_wait);
    for (o, _) in runs {
        let (width, height) = if several {
            (545.0, 340.0)
        } else {
            (1100.0, 360.0)
        };
        let mut chart = LineChart::new(
            &if several {
                format!("Wait time CDF: {}", o.policy)
            } else {
                "Wait time CDF".to_string()
            },
            "wait (log scale)",
            "fraction of jobs",
            width,
            height,
        );
        chart.log_x = true;
        let mut by_queue: BTreeMap<&str, (usize, Vec<f64>)> = BTreeMap::new();
        for j in o.jobs.iter().filter(|j| j.state != JobState::Rejected) {
            let e = by_queue.entry(j.queue.as_str()).or_default();
            e.0 += 1;
            if let Some(st) = j.start {
                e.1.push(((st.0 - j.submit.0) as f64 / 1000.0).max(1.0));
            }
        }
        chart.x_domain = Some((1.0, x_hi));
        chart.y_domain = Some((0.0, 1.0));
        chart.x_ticks = Some(
            WAIT_TICKS
                .iter()
                .map(|(v, l)| (*v, l.to_string()))
                .collect(),
        );
        for (q, (n, mut waits)) in by_queue {
            waits.sort_by(f64::total_cmp);
            let mut pts = vec![(1.0, 0.0)];
            for (k, w) in waits.iter().enumerate() {
                pts.push((*w, (k + 1) as f64 / n as f64));
            }
            let last_y = pts.last().map(|p| p.1).unwrap_or(0.0);
            pts.push((x_hi, last_y));
            let (color, dash) = style(queue_index.get(q).copied().unwrap_or(0));
            chart.series.push(Series {
                name: q.to_string(),
                points: pts,
                dash,
                color,
                stroke: 1.8,
            });
        }
        h.push_str(&format!("<figure>{}</figure>\n", chart.render()));
    }
    h.push_str("</div>\n</section>\n");

    // 4. Pending jobs.
    h.push_str("<section>\n<h2>Pending jobs</h2>\n");
    h.push_str(
        "<p class=\"note\">Jobs submitted and not yet started, at each scheduling cycle.</p>\n",
    );
    let mut chart = LineChart::new("Pending jobs", &time_label, "jobs", 1100.0, 280.0);
    chart.x_domain = Some((0.0, x_max));
    for (i, (o, _)) in runs.iter().enumerate() {
        chart.series.push(Series {
            name: if several {
                o.policy.clone()
            } else {
                "pending".to_string()
            },
            points: step_points(
                o.cluster.iter().map(|c| (c.time, c.pending_jobs as f64)),
                o.start_time,
                o.end_time,
                unit_ms,
            ),
            dash: Dash::Solid,
            color: style(i).0,
            stroke: policy_stroke(i, runs.len()),
        });
    }
    h.push_str(&chart.render());
    h.push_str("</section>\n");

    // 5. Jain's index over time.
    h.push_str("<section>\n<h2>Fairness over time</h2>\n");
    h.push_str("<p class=\"note\">Jain's index of allocated ÷ fair share (GPU) across the leaf queues with GPU demand: 1 when every such queue has the same share of its fair share, 1/n when one queue has everything. The summary's Jain's fairness is its time-weighted mean.</p>\n");
    let mut chart = LineChart::new("Jain's fairness index", &time_label, "index", 1100.0, 280.0);
    chart.x_domain = Some((0.0, x_max));
    chart.y_domain = Some((0.0, 1.0));
    for (i, (o, _)) in runs.iter().enumerate() {
        // Gaps (no leaf with demand) are drawn as 1, like a fair cluster.
        chart.series.push(Series {
            name: if several {
                o.policy.clone()
            } else {
                "Jain's index".to_string()
            },
            points: step_points(
                o.jain_series()
                    .into_iter()
                    .map(|(t, j)| (t, j.unwrap_or(1.0))),
                o.start_time,
                o.end_time,
                unit_ms,
            ),
            dash: Dash::Solid,
            color: style(i).0,
            stroke: policy_stroke(i, runs.len()),
        });
    }
    h.push_str(&chart.render());
    h.push_str("</section>\n");

    // 6. Evictions over time.
    h.push_str("<section>\n<h2>Evictions</h2>\n");
    if runs.iter().all(|(o, _)| o.evictions.is_empty()) {
        h.push_str("<p class=\"empty\">No pods were evicted.</p>\n");
    } else {
        h.push_str("<p class=\"note\">Pods evicted so far (when the scheduler evicted them): solid lines reclaim (across queues), dashed lines preemption (inside a queue); a kind no run used is left out.</p>\n");
        let mut chart = LineChart::new(
            "Evicted pods, cumulative",
            &time_label,
            "pods",
            1100.0,
            280.0,
        );
        chart.x_domain = Some((0.0, x_max));
        for (i, (o, _)) in runs.iter().enumerate() {
            let suffix = if several {
                format!(" ({})", o.policy)
            } else {
                String::new()
            };
            for (kind, dash, f) in [
                (
                    "reclaim",
                    Dash::Solid,
                    (|e: &crate::result::EvictionSample| e.reclaim_pods)
                        as fn(&crate::result::EvictionSample) -> u32,
                ),
                (
                    "preemption",
                    Dash::Dashed,
                    |e: &crate::result::EvictionSample| e.preempt_pods,
                ),
            ] {
                if runs
                    .iter()
                    .all(|(o, _)| o.evictions.iter().all(|e| f(e) == 0))
                {
                    continue;
                }
                let mut total = 0u64;
                let mut samples = vec![(o.start_time, 0.0)];
                for e in &o.evictions {
                    total += f(e) as u64;
                    samples.push((e.time, total as f64));
                }
                chart.series.push(Series {
                    name: format!("{kind}{suffix}"),
                    points: step_points(samples.into_iter(), o.start_time, o.end_time, unit_ms),
                    dash,
                    color: style(i).0,
                    stroke: policy_stroke(i, runs.len()),
                });
            }
        }
        h.push_str(&chart.render());
    }
    h.push_str("</section>\n");

    // 7. Topology fragmentation.
    if runs
        .iter()
        .any(|(o, _)| o.cluster.iter().any(|c| c.largest_free_leaf_gpus.is_some()))
    {
        h.push_str("<section>\n<h2>Topology fragmentation</h2>\n");
        h.push_str("<p class=\"note\">The largest gang that could still be placed inside one leaf domain: the most wholly free GPUs on the up nodes of any one leaf group (or ToR). Higher means large gangs can still start without crossing a spine.</p>\n");
        let mut chart = LineChart::new(
            "Largest gang that fits in one leaf",
            &time_label,
            "GPUs",
            1100.0,
            280.0,
        );
        chart.x_domain = Some((0.0, x_max));
        for (i, (o, _)) in runs.iter().enumerate() {
            chart.series.push(Series {
                name: if several {
                    o.policy.clone()
                } else {
                    "largest 1-leaf gang".to_string()
                },
                points: step_points(
                    o.cluster
                        .iter()
                        .filter_map(|c| Some((c.time, c.largest_free_leaf_gpus? as f64))),
                    o.start_time,
                    o.end_time,
                    unit_ms,
                ),
                dash: Dash::Solid,
                color: style(i).0,
                stroke: policy_stroke(i, runs.len()),
            });
        }
        h.push_str(&chart.render());
        h.push_str("</section>\n");
    }

    h.push_str("<section>\n<h2>Per queue</h2>\n");
    h.push_str(&per_queue_html(runs));
    h.push_str("</section>\n");
    h.push_str("<footer>Generated by <code>trainyard simulate</code>.</footer>\n");
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

fn legend_item(color: &str, dash: Dash, name: &str) -> String {
    format!(
        "<span class=\"item\"><span class=\"swatch\" style=\"border-top: 3px {} {color}\"></span>{}</span>",
        dash.css(),
        esc(name)
    )
}

pub(crate) const STYLE: &str = r#"<style>
:root { color-scheme: light; }
body { margin: 0; background: #f6f7f9; color: #222; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1140px; margin: 0 auto; padding: 24px 20px 40px; }
header h1 { margin: 0 0 4px; font-size: 24px; font-weight: 650; }
.sub { margin: 0 0 8px; color: #555; }
section { background: #fff; border: 1px solid #e2e4e8; border-radius: 8px; padding: 16px 18px; margin: 16px 0; }
h2 { margin: 0 0 6px; font-size: 17px; font-weight: 620; }
.note { margin: 0 0 10px; color: #666; font-size: 12.5px; }
.empty { color: #888; font-style: italic; }
svg { display: block; width: 100%; height: auto; }
figure { margin: 0; }
.grid { display: grid; gap: 10px 14px; }
.grid.small { grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); }
.grid.half { grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); }
.legend { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 0 0 10px; font-size: 12.5px; color: #333; }
.legend .item { display: flex; align-items: center; gap: 6px; }
.legend .swatch { display: block; width: 22px; height: 0; }
.tables { display: flex; flex-wrap: wrap; gap: 8px 28px; align-items: flex-start; }
table.cmp { border-collapse: collapse; font-variant-numeric: tabular-nums; }
table.cmp th.cap { color: #666; font-weight: 600; font-size: 12.5px; text-transform: uppercase; letter-spacing: 0.03em; }
table.cmp th, table.cmp td { padding: 4px 12px; border-bottom: 1px solid #eceef1; text-align: left; white-space: nowrap; }
table.cmp thead th { border-bottom: 2px solid #d5d8dd; font-weight: 600; }
table.cmp tbody th { font-weight: 500; color: #444; }
table.cmp .num { text-align: right; }
table.cmp .group { text-align: center; }
table.cmp .sep { border-left: 1px solid #d5d8dd; }
table.cmp .best { font-weight: 700; }
table.queues { font-size: 13px; }
.scroll { overflow-x: auto; }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 6px; vertical-align: baseline; }
footer { color: #888; font-size: 12px; text-align: center; margin-top: 20px; }
</style>
"#;

mod tables;

use tables::{per_queue_html, summary_html};

#[cfg(test)]
mod tests;
