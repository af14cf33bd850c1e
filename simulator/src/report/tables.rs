//! The report's tables: the summary per policy (with the topology rows)
//! and the per-queue table.

use super::*;

/// Which value of a row is best, for highlighting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Better {
    Lower,
    Higher,
    Neither,
}

pub(super) fn summary_html(runs: &[(&SimOutput, &Summary)]) -> String {
    let stat = |s: &Stats, v: f64| -> (String, Option<f64>) {
        if s.count == 0 {
            ("–".to_string(), None)
        } else {
            (fmt_duration(v), Some(v))
        }
    };
    let count = |v: u64| (v.to_string(), Some(v as f64));
    type RowFn<'a> = Box<dyn Fn(&Summary) -> (String, Option<f64>) + 'a>;
    let rows: Vec<(&str, Better, RowFn)> = vec![
        ("Jobs", Better::Neither, Box::new(|s| count(s.jobs))),
        (
            "Completed",
            Better::Higher,
            Box::new(|s| count(s.completed)),
        ),
        (
            "Running at end",
            Better::Neither,
            Box::new(|s| count(s.running_at_end)),
        ),
        (
            "Pending at end",
            Better::Lower,
            Box::new(|s| count(s.pending_at_end)),
        ),
        ("Rejected", Better::Neither, Box::new(|s| count(s.rejected))),
        (
            "Wait, mean",
            Better::Lower,
            Box::new(|s| stat(&s.wait_seconds, s.wait_seconds.mean)),
        ),
        (
            "Wait, p50",
            Better::Lower,
            Box::new(|s| stat(&s.wait_seconds, s.wait_seconds.p50)),
        ),
        (
            "Wait, p95",
            Better::Lower,
            Box::new(|s| stat(&s.wait_seconds, s.wait_seconds.p95)),
        ),
        (
            "Wait, p99",
            Better::Lower,
            Box::new(|s| stat(&s.wait_seconds, s.wait_seconds.p99)),
        ),
        (
            "JCT, mean",
            Better::Lower,
            Box::new(|s| stat(&s.jct_seconds, s.jct_seconds.mean)),
        ),
        (
            "JCT, p95",
            Better::Lower,
            Box::new(|s| stat(&s.jct_seconds, s.jct_seconds.p95)),
        ),
        (
            "GPU allocation",
            Better::Higher,
            Box::new(|s| {
                (
                    fmt_percent(s.gpu_allocation_ratio),
                    Some(s.gpu_allocation_ratio),
                )
            }),
        ),
        (
            "Jain's fairness",
            Better::Higher,
            Box::new(|s| (fmt_fixed(s.jain_fairness, 3), Some(s.jain_fairness))),
        ),
        (
            "Simulated time",
            Better::Neither,
            Box::new(|s| (fmt_duration(s.simulated_seconds), None)),
        ),
        ("Cycles", Better::Neither, Box::new(|s| count(s.cycles))),
        ("Events", Better::Neither, Box::new(|s| count(s.events))),
        (
            "Reclaims (jobs)",
            Better::Neither,
            Box::new(|s| count(s.preemption.reclaims)),
        ),
        (
            "Preemptions (jobs)",
            Better::Neither,
            Box::new(|s| count(s.preemption.preemptions)),
        ),
        (
            "Evicted pods",
            Better::Neither,
            Box::new(|s| count(s.preemption.evicted_pods)),
        ),
        (
            "Lost GPU-hours",
            Better::Lower,
            Box::new(|s| {
                (
                    fmt_fixed(s.preemption.lost_gpu_hours, 1),
                    Some(s.preemption.lost_gpu_hours),
                )
            }),
        ),
        (
            "Starved episodes",
            Better::Lower,
            Box::new(|s| count(s.preemption.starved_episodes)),
        ),
        (
            "Time to fair share, mean",
            Better::Lower,
            Box::new(|s| {
                let t = &s.preemption.time_to_fair_share_seconds;
                stat(t, t.mean)
            }),
        ),
        (
            "Time to fair share, p95",
            Better::Lower,
            Box::new(|s| {
                let t = &s.preemption.time_to_fair_share_seconds;
                stat(t, t.p95)
            }),
        ),
        (
            "Queues starved at end",
            Better::Lower,
            Box::new(|s| count(s.preemption.starved_at_end)),
        ),
    ];
    let mut rows = rows;
    let mut groups = vec![
        ("Jobs", 0..5),
        ("Wait and completion time", 5..11),
        ("Cluster", 11..16),
        ("Reclaim and preemption", 16..24),
    ];
    if runs.iter().any(|(_, s)| s.topology.is_some()) {
        let first = rows.len();
        rows.extend(topology_rows());
        groups.push(("Topology (gangs: jobs of 2+ pods)", first..rows.len()));
    }
    let mut rows: Vec<Option<(&str, Better, RowFn)>> = rows.into_iter().map(Some).collect();
    let mut h = String::from("<div class=\"tables\">\n");
    for (caption, range) in groups {
        h.push_str(&format!(
            "<table class=\"cmp\">\n<thead><tr><th class=\"cap\">{}</th>",
            esc(caption)
        ));
        for (i, (o, _)) in runs.iter().enumerate() {
            h.push_str(&format!(
                "<th class=\"num\"><span class=\"dot\" style=\"background:{}\"></span>{}</th>",
                style(i).0,
                esc(&o.policy)
            ));
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for (label, better, f) in rows[range].iter_mut().filter_map(Option::take) {
            let cells: Vec<(String, Option<f64>)> = runs.iter().map(|(_, s)| f(s)).collect();
            let vals: Vec<f64> = cells.iter().filter_map(|c| c.1).collect();
            let best = match better {
                _ if runs.len() < 2 || vals.len() < 2 => None,
                Better::Lower => vals.iter().copied().reduce(f64::min),
                Better::Higher => vals.iter().copied().reduce(f64::max),
                Better::Neither => None,
            };
            let all_equal = vals.windows(2).all(|w| w[0] == w[1]);
            h.push_str(&format!("<tr><th>{}</th>", esc(label)));
            for (text, v) in cells {
                let cls = match (best, v) {
                    (Some(b), Some(v)) if !all_equal && v == b => "num best",
                    _ => "num",
                };
                h.push_str(&format!("<td class=\"{cls}\">{}</td>", esc(&text)));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody>\n</table>\n");
    }
    h.push_str("</div>\n");
    if runs.len() > 1 {
        h.push_str("<p class=\"note\">Bold: best value of the row.</p>\n");
    }
    h
}

type TopoRow<'a> = (
    &'static str,
    Better,
    Box<dyn Fn(&Summary) -> (String, Option<f64>) + 'a>,
);

/// Rows of the summary's topology table; `–` without a topology or gangs.
fn topology_rows<'a>() -> Vec<TopoRow<'a>> {
    fn cell(
        s: &Summary,
        per_gang: bool,
        f: impl Fn(&crate::result::TopologySummary) -> (String, Option<f64>),
    ) -> (String, Option<f64>) {
        match &s.topology {
            Some(t) if !per_gang || t.gangs > 0 => f(t),
            _ => ("–".to_string(), None),
        }
    }
    let pct = |v: f64| (fmt_percent(v), Some(v));
    vec![
        (
            "Gangs",
            Better::Neither,
            Box::new(|s| cell(s, false, |t| (t.gangs.to_string(), Some(t.gangs as f64)))),
        ),
        (
            "Gangs on 2+ nodes",
            Better::Neither,
            Box::new(|s| {
                cell(s, false, |t| {
                    (
                        t.multi_node_gangs.to_string(),
                        Some(t.multi_node_gangs as f64),
                    )
                })
            }),
        ),
        (
            "Gangs in one leaf",
            Better::Higher,
            Box::new(move |s| cell(s, true, |t| pct(t.one_leaf_share))),
        ),
        (
            "Leaves per gang",
            Better::Lower,
            Box::new(|s| {
                cell(s, true, |t| {
                    (fmt_fixed(t.mean_leaves, 2), Some(t.mean_leaves))
                })
            }),
        ),
        (
            "Spine crossings per gang",
            Better::Lower,
            Box::new(|s| {
                cell(s, true, |t| {
                    (
                        fmt_fixed(t.mean_spine_crossings, 2),
                        Some(t.mean_spine_crossings),
                    )
                })
            }),
        ),
        (
            "Rail-aligned gangs",
            Better::Higher,
            Box::new(move |s| cell(s, true, |t| pct(t.rail_aligned_share))),
        ),
        (
            "In tightest feasible domain",
            Better::Higher,
            Box::new(move |s| {
                cell(s, true, |t| match t.in_tightest_share {
                    Some(v) => pct(v),
                    None => ("–".to_string(), None),
                })
            }),
        ),
        (
            "Slowdown, mean",
            Better::Lower,
            Box::new(move |s| cell(s, true, |t| pct(t.mean_slowdown_percent / 100.0))),
        ),
        (
            "Largest 1-leaf gang, mean",
            Better::Higher,
            Box::new(|s| {
                cell(s, false, |t| {
                    (
                        format!("{} GPUs", fmt_fixed(t.mean_largest_free_leaf_gpus, 1)),
                        Some(t.mean_largest_free_leaf_gpus),
                    )
                })
            }),
        ),
    ]
}

pub(super) fn per_queue_html(runs: &[(&SimOutput, &Summary)]) -> String {
    let queues: BTreeSet<&str> = runs
        .iter()
        .flat_map(|(_, s)| s.per_queue.keys())
        .map(String::as_str)
        .collect();
    if queues.is_empty() {
        return "<p class=\"empty\">No jobs.</p>\n".to_string();
    }
    let cols = [
        "jobs",
        "completed",
        "wait p50",
        "wait p95",
        "share ratio",
        "evicted pods",
        "to fair share",
    ];
    let mut h = String::from("<div class=\"scroll\">\n<table class=\"cmp queues\">\n<thead>");
    if runs.len() > 1 {
        h.push_str("<tr><th></th>");
        for (i, (o, _)) in runs.iter().enumerate() {
            h.push_str(&format!(
                "<th colspan=\"{}\" class=\"group\"><span class=\"dot\" style=\"background:{}\"></span>{}</th>",
                cols.len(),
                style(i).0,
                esc(&o.policy)
            ));
        }
        h.push_str("</tr>");
    }
    h.push_str("<tr><th>queue</th>");
    for i in 0..runs.len() {
        for (k, c) in cols.iter().enumerate() {
            let cls = if k == 0 && i > 0 { "num sep" } else { "num" };
            h.push_str(&format!("<th class=\"{cls}\">{c}</th>"));
        }
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for q in queues {
        h.push_str(&format!("<tr><th>{}</th>", esc(q)));
        for (i, (_, s)) in runs.iter().enumerate() {
            let sep = if i > 0 { " sep" } else { "" };
            match s.per_queue.get(q) {
                Some(qs) => {
                    let w = |v: f64| {
                        if qs.wait_seconds.count == 0 {
                            "–".to_string()
                        } else {
                            fmt_duration(v)
                        }
                    };
                    let fair = match crate::output::to_fair_share(qs).as_str() {
                        "-" => "–".to_string(),
                        t => t.to_string(),
                    };
                    h.push_str(&format!(
                        "<td class=\"num{sep}\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                        qs.jobs,
                        qs.completed,
                        esc(&w(qs.wait_seconds.p50)),
                        esc(&w(qs.wait_seconds.p95)),
                        fmt_fixed(qs.mean_share_ratio, 2),
                        qs.evicted_pods,
                        esc(&fair),
                    ));
                }
                None => {
                    h.push_str(&format!("<td class=\"num{sep}\">–</td>"));
                    h.push_str(&"<td class=\"num\">–</td>".repeat(cols.len() - 1));
                }
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n</div>\n");
    h.push_str("<p class=\"note\">Share ratio: time-weighted mean of allocated ÷ fair share (GPU) while the queue had GPU demand; 1.00 means the queue got exactly its fair share. Evicted pods: pods of the queue's jobs evicted. To fair share: mean time from becoming starved (pending GPU demand, more than one gang below fair share) to being within one gang of it.</p>\n");
    h
}
