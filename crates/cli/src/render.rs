//! Human-readable rendering of decisions: plain aligned columns like
//! `kubectl get`, no borders, so the output pipes well into grep and awk.
//!
//! Tables fit the terminal: with a width ([`terminal_width`]: `COLUMNS`,
//! else the terminal's when stdout is one), long cells (a pending job's
//! reason, an eviction's) wrap inside their column; without one (a pipe, a
//! file) every cell is whole, on one line. Either way no line ends in
//! blanks, so a long reason in one row does not pad every other row to its
//! length.

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};
use trainyard_model::{ResourceName, Resources};
use trainyard_sched::Decisions;

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().map(Cell::new));
    t
}

/// How wide tables may be: `COLUMNS` when it is set to a number, else the
/// terminal's width when stdout is a terminal; `None`: no limit.
pub fn terminal_width() -> Option<u16> {
    use std::io::IsTerminal;
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w > 0)
    {
        return Some(w);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| w.0)
}

/// `t` as text: wrapped to `width` when given; no line ends in blanks.
pub fn fit(t: &mut Table, width: Option<u16>) -> String {
    if let Some(w) = width {
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(w);
    }
    let text = t.to_string();
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line.trim_end());
    }
    out
}

fn right(s: String) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}

/// Device indices as `0,1,2`, or `-` for none.
fn gpu_list(gpus: &[u32]) -> String {
    if gpus.is_empty() {
        return "-".into();
    }
    let list: Vec<String> = gpus.iter().map(|g| g.to_string()).collect();
    list.join(",")
}

/// Resources to show in the fair-share table, GPU first.
fn shown_resources(d: &Decisions) -> Vec<ResourceName> {
    let mut all = Resources::zero();
    for q in &d.queues {
        for r in [&q.quota, &q.fair_share, &q.allocated, &q.demand] {
            all.add(r);
        }
    }
    let mut names: Vec<ResourceName> = all.names().collect();
    names.sort_by_key(|n| match n {
        ResourceName::Gpu => 0,
        ResourceName::Cpu => 1,
        ResourceName::Memory => 2,
        ResourceName::Extended(_) => 3,
    });
    names
}

/// `trainyard schedule --output json`: the decisions, and after them a
/// note of the units of their numbers ([`units`], docs/cli.md).
#[derive(serde::Serialize)]
pub struct WithUnits<'a> {
    #[serde(flatten)]
    pub decisions: &'a Decisions,
    pub units: serde_json::Value,
}

/// The units of the numbers in the decisions' JSON: per resource name,
/// those of the amounts in `queues[]` (`quota`, `limit`, `fairShare`,
/// `allocated`, `demand`), `other` for every other resource (the
/// snapshot's conversions, docs/snapshot.md "Quantities and units");
/// `reservations[].start` and `startsInSeconds`; the GPU lists.
pub fn units() -> serde_json::Value {
    serde_json::json!({
        "resources": {
            "cpu": "millicores (1000 = one core)",
            "memory": "bytes",
            "nvidia.com/gpu": "milli-GPU (1000 = one GPU)",
            "other": "count",
        },
        "reservations.start": "milliseconds since 1970-01-01T00:00:00Z",
        "reservations.startsInSeconds": "seconds",
        "gpus": "device indices on the node (binds, nominations)",
    })
}

/// The full report: binds, pending jobs, fair-share table, warnings;
/// tables fitted to `width` ([`fit`]).
pub fn render(d: &Decisions, width: Option<u16>) -> String {
    let mut out = String::new();
    let jobs_bound: std::collections::BTreeSet<&str> =
        d.binds.iter().map(|b| b.job.as_str()).collect();
    out.push_str(&format!(
        "BINDS: {} pod(s) of {} job(s) on {} node(s) considered\n",
        d.binds.len(),
        jobs_bound.len(),
        d.stats.nodes
    ));
    if !d.binds.is_empty() {
        let mut t = table(&["JOB", "POD", "NODE", "GPUS"]);
        for b in &d.binds {
            t.add_row(vec![
                Cell::new(&b.job),
                Cell::new(&b.task),
                Cell::new(&b.node),
                Cell::new(gpu_list(&b.gpus)),
            ]);
        }
        out.push_str(&fit(&mut t, width));
        out.push('\n');
    }
    if !d.evictions.is_empty() {
        out.push_str(&format!("\nEVICTIONS: {} pod(s)\n", d.evictions.len()));
        let mut t = table(&["JOB", "POD", "NODE", "FOR", "REASON"]);
        for e in &d.evictions {
            t.add_row(vec![
                Cell::new(&e.job),
                Cell::new(&e.task),
                Cell::new(&e.node),
                Cell::new(&e.preemptor),
                Cell::new(&e.message),
            ]);
        }
        out.push_str(&fit(&mut t, width));
        out.push('\n');
    }
    if !d.moves.is_empty() {
        let pods: usize = d.moves.iter().map(|m| m.pods.len()).sum();
        out.push_str(&format!(
            "\nMOVES (consolidation; the replacements' room is held): {pods} pod(s) of {} job(s)\n",
            d.moves.len()
        ));
        let mut t = table(&["JOB", "POD", "FROM", "TO", "GPUS", "FOR"]);
        for m in &d.moves {
            for p in &m.pods {
                t.add_row(vec![
                    Cell::new(&m.job),
                    Cell::new(&p.task),
                    Cell::new(&p.from),
                    Cell::new(&p.to),
                    Cell::new(gpu_list(&p.gpus)),
                    Cell::new(&m.for_job),
                ]);
            }
        }
        out.push_str(&fit(&mut t, width));
        out.push('\n');
    }
    if !d.nominations.is_empty() {
        out.push_str(&format!(
            "\nNOMINATED (room reserved while victims terminate): {} pod(s)\n",
            d.nominations.len()
        ));
        let mut t = table(&["JOB", "POD", "NODE", "GPUS"]);
        for n in &d.nominations {
            t.add_row(vec![
                Cell::new(&n.job),
                Cell::new(&n.task),
                Cell::new(&n.node),
                Cell::new(gpu_list(&n.gpus)),
            ]);
        }
        out.push_str(&fit(&mut t, width));
        out.push('\n');
    }
    if !d.withdrawals.is_empty() {
        out.push_str(&format!(
            "\nNOMINATIONS WITHDRAWN (the pod can no longer use that room): {} pod(s)\n",
            d.withdrawals.len()
        ));
        let mut t = table(&["JOB", "POD", "NODE"]);
        for w in &d.withdrawals {
            t.add_row(vec![
                Cell::new(&w.job),
                Cell::new(&w.task),
                Cell::new(&w.node),
            ]);
        }
        out.push_str(&fit(&mut t, width));
        out.push('\n');
    }
    if !d.placements.is_empty() {
        out.push_str(&format!(
            "\nTOPOLOGY: {} gang(s) placed\n",
            d.placements.len()
        ));
        let mut t = table(&[
            "JOB",
            "NODES",
            "LEAVES",
            "LEVEL",
            "TIGHTEST FREE",
            "SPINE CROSSINGS",
            "RAILS",
        ]);
        for p in &d.placements {
            t.add_row(vec![
                Cell::new(&p.job),
                right(p.span.nodes.to_string()),
                right(p.span.leaves.to_string()),
                Cell::new(p.level.as_deref().unwrap_or("cluster")),
                Cell::new(format!(
                    "{}{}",
                    p.tightest_feasible.as_deref().unwrap_or("cluster"),
                    if p.in_tightest { "" } else { " (not used)" }
                )),
                right(format!("{}/{}", p.span.spine_crossings, p.span.hops)),
                Cell::new(if p.span.rail_aligned {
                    "aligned"
                } else {
                    "mixed"
                }),
            ]);
        }
        out.push_str(&fit(&mut t, width));
        out.push('\n');
    }
    if !d.reservations.is_empty() {
        out.push_str(&format!(
            "\nRESERVATIONS (nodes held for starving gangs; only jobs ending before START may use them): {}\n",
            d.reservations.len()
        ));
        let mut t = table(&[
            "JOB",
            "QUEUE",
            "START",
            "IN",
            "NODES",
            "WHERE",
            "BACKFILLED",
        ]);
        for r in &d.reservations {
            let now = trainyard_model::Timestamp(r.start.0 - r.starts_in_seconds as i64 * 1000);
            let names: Vec<&str> = r.nodes.iter().map(|n| n.0.as_str()).collect();
            let shown = if names.len() > 4 {
                format!("{},... ({} in all)", names[..3].join(","), names.len())
            } else {
                names.join(",")
            };
            t.add_row(vec![
                Cell::new(&r.job),
                Cell::new(&r.queue),
                Cell::new(trainyard_model::format_utc_minute(r.start, now)),
                right(trainyard_model::format_seconds(r.starts_in_seconds)),
                Cell::new(shown),
                Cell::new(r.domain.as_deref().unwrap_or("cluster")),
                right(r.backfilled.to_string()),
            ]);
        }
        out.push_str(&fit(&mut t, width));
        out.push('\n');
    }
    out.push_str(&format!("\nPENDING: {} job(s)\n", d.pending.len()));
    if !d.pending.is_empty() {
        let mut t = table(&["JOB", "QUEUE", "REASON"]);
        for p in &d.pending {
            t.add_row(vec![
                Cell::new(&p.job),
                Cell::new(&p.queue),
                Cell::new(&p.message),
            ]);
        }
        out.push_str(&fit(&mut t, width));
        out.push('\n');
    }
    out.push_str("\nFAIR SHARE (after this cycle)\n");
    let mut t = table(&[
        "QUEUE",
        "RESOURCE",
        "QUOTA",
        "FAIR SHARE",
        "ALLOCATED",
        "DEMAND",
        "LIMIT",
    ]);
    let names = shown_resources(d);
    for q in &d.queues {
        let label = format!("{}{}", "  ".repeat(q.depth as usize), q.name);
        let mut first = true;
        for r in &names {
            let vals = [&q.quota, &q.fair_share, &q.allocated, &q.demand].map(|v| v.get(r));
            let limit = q.limit.get(r);
            if vals.iter().all(|v| *v == 0) && limit.is_none() && !first {
                continue;
            }
            t.add_row(vec![
                Cell::new(if first { label.clone() } else { String::new() }),
                Cell::new(r.as_str()),
                right(r.format_amount(vals[0])),
                right(r.format_amount(vals[1])),
                right(r.format_amount(vals[2])),
                right(r.format_amount(vals[3])),
                right(
                    limit
                        .map(|l| r.format_amount(l))
                        .unwrap_or_else(|| "-".into()),
                ),
            ]);
            first = false;
        }
    }
    out.push_str(&fit(&mut t, width));
    out.push('\n');
    if !d.warnings.is_empty() {
        let grouped = group_warnings(&d.warnings);
        if grouped.len() == d.warnings.len() {
            out.push_str(&format!("\nWARNINGS: {}\n", d.warnings.len()));
        } else {
            out.push_str(&format!(
                "\nWARNINGS: {} ({} kinds; --output json lists each)\n",
                d.warnings.len(),
                grouped.len()
            ));
        }
        for w in &grouped {
            out.push_str(&format!("  {w}\n"));
        }
    }
    out
}

/// Warnings with repeats folded, in order of first appearance: identical
/// messages become one with `(×N)`, and messages that differ only in
/// numbers (the same warning for pod `train-0` … `train-1999`, for
/// `items[0]` … `items[1999]`) become the first one with `(and N more like
/// it)`.
pub fn group_warnings(warnings: &[String]) -> Vec<String> {
    // Key: the message with every run of digits replaced by `#`.
    fn shape(w: &str) -> String {
        let mut s = String::with_capacity(w.len());
        let mut in_digits = false;
        for c in w.chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    s.push('#');
                }
                in_digits = true;
            } else {
                s.push(c);
                in_digits = false;
            }
        }
        s
    }
    // (first message, copies of it, others of the same shape)
    let mut groups: Vec<(&str, usize, usize)> = Vec::new();
    let mut by_shape: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for w in warnings {
        match by_shape.get(&shape(w)) {
            Some(&g) => {
                let group = &mut groups[g];
                if group.0 == w.as_str() {
                    group.1 += 1;
                } else {
                    group.2 += 1;
                }
            }
            None => {
                by_shape.insert(shape(w), groups.len());
                groups.push((w.as_str(), 1, 0));
            }
        }
    }
    groups
        .into_iter()
        .map(|(w, same, alike)| {
            let mut line = w.to_string();
            if same > 1 {
                line.push_str(&format!(" (×{same})"));
            }
            if alike > 0 {
                line.push_str(&format!(" (and {alike} more like it)"));
            }
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_grouped() {
        let mut w: Vec<String> = (0..2000)
            .map(|i| {
                format!("s.yaml: document 1 (items[{i}]): Pod ml/big-{i}: ignored: spec.overhead")
            })
            .collect();
        w.push("node n1 appears twice; the first is used".into());
        w.push("node n1 appears twice; the first is used".into());
        w.push("pod x is bound to unknown node n9; its capacity is not counted".into());
        assert_eq!(
            group_warnings(&w),
            [
                "s.yaml: document 1 (items[0]): Pod ml/big-0: ignored: spec.overhead (and 1999 more like it)",
                "node n1 appears twice; the first is used (×2)",
                "pod x is bound to unknown node n9; its capacity is not counted",
            ]
        );
        let same = vec!["a warning".to_string(); 3];
        assert_eq!(group_warnings(&same), ["a warning (×3)"]);
        assert!(group_warnings(&[]).is_empty());
    }
}
