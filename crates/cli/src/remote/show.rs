//! The scheduler's answers for people: kubectl-like tables (no borders,
//! upper-case headers, amounts as Kubernetes quantities: `4` GPUs,
//! `500m` CPU, `512Gi` memory, ages as `5m`, `3h`, `2d`), and text for
//! one job. Pure functions of the messages, so tests pin them.

use comfy_table::{Cell, CellAlignment, Table, presets};
use trainyard_api::pb;

use crate::render::fit;

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().map(Cell::new));
    // As kubectl: the first column starts the line.
    if let Some(c) = t.column_mut(0) {
        c.set_padding((0, 1));
    }
    t
}

fn right(t: &mut Table, columns: &[usize]) {
    for &i in columns {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// An amount in the scheduler's unit as kubectl shows a quantity:
/// milli-units as whole ones when they are (`4`, else `1500m`), bytes in
/// the largest binary unit that holds them exactly (`512Gi`).
pub fn quantity(unit: &str, value: u64) -> String {
    match unit {
        "mGPU" => milli_decimal(value),
        "m" => {
            if value.is_multiple_of(1000) {
                (value / 1000).to_string()
            } else {
                format!("{value}m")
            }
        }
        "By" => {
            for (shift, suffix) in [(50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")] {
                if value != 0 && value.is_multiple_of(1u64 << shift) {
                    return format!("{}{suffix}", value >> shift);
                }
            }
            value.to_string()
        }
        _ => value.to_string(),
    }
}

/// Thousandths as a decimal without trailing zeros: `4`, `0.5`, `16.25`.
fn milli_decimal(m: u64) -> String {
    if m.is_multiple_of(1000) {
        (m / 1000).to_string()
    } else {
        format!("{}.{:03}", m / 1000, m % 1000)
            .trim_end_matches('0')
            .to_string()
    }
}

/// Decayed usage (unit·seconds, a decimal string) in the resource's
/// usual unit by the hour: GPU-hours, core-hours, GiB-hours, count-hours;
/// one decimal.
pub fn usage_hours(unit: &str, unit_seconds: &str) -> String {
    let Ok(v) = unit_seconds.parse::<u128>() else {
        return unit_seconds.to_string();
    };
    let per: u128 = match unit {
        "m" | "mGPU" => 1000,
        "By" => 1 << 30,
        _ => 1,
    };
    // Tenths of an hour, rounded down.
    let tenths = v * 10 / (per * 3600);
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// A duration as kubectl's AGE column shows it.
pub fn age(seconds: u64) -> String {
    let (s, m, h, d) = (seconds, seconds / 60, seconds / 3600, seconds / 86_400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 && s % 60 != 0 => format!("{m}m{}s", s % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 != 0 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 && h % 24 != 0 => format!("{d}d{}h", h % 24),
        _ if d < 730 => format!("{d}d"),
        _ => format!("{}y", d / 365),
    }
}

/// The resource order of tables: GPUs, CPU, memory, then by name.
fn resource_rank(r: &str) -> (u8, &str) {
    match r {
        "nvidia.com/gpu" => (0, r),
        "cpu" => (1, r),
        "memory" => (2, r),
        _ => (3, r),
    }
}

/// `trainyard queues`: one row per queue and resource, the queue's own
/// columns on its first row; children indented under their parent.
pub fn queues(resp: &pb::ListQueuesResponse, width: Option<u16>) -> String {
    let mut t = table(&[
        "QUEUE",
        "WEIGHT",
        "RUNNING",
        "PENDING",
        "RESOURCE",
        "QUOTA",
        "LIMIT",
        "FAIR SHARE",
        "ALLOCATED",
        "PENDING DEMAND",
        "USAGE (H)",
    ]);
    for q in &resp.queues {
        let mut resources: Vec<&pb::QueueResource> = q.resources.iter().collect();
        resources.sort_by(|a, b| resource_rank(&a.resource).cmp(&resource_rank(&b.resource)));
        let name = format!("{}{}", "  ".repeat(q.depth as usize), q.name);
        let own = [
            name,
            q.weight.to_string(),
            q.running_jobs.to_string(),
            q.pending_jobs.to_string(),
        ];
        if resources.is_empty() {
            let mut row = own.to_vec();
            row.extend(std::iter::repeat_n("-".to_string(), 7));
            t.add_row(row);
            continue;
        }
        for (i, r) in resources.iter().enumerate() {
            let mut row = if i == 0 {
                own.to_vec()
            } else {
                vec![String::new(); 4]
            };
            let limit = match &r.limit {
                Some(l) if !l.unlimited => quantity(&r.unit, l.value),
                _ => "-".to_string(),
            };
            row.extend([
                r.resource.clone(),
                quantity(&r.unit, r.quota),
                limit,
                quantity(&r.unit, r.fair_share),
                quantity(&r.unit, r.allocated),
                quantity(&r.unit, r.pending_demand),
                usage_hours(&r.unit, &r.decayed_usage),
            ]);
            t.add_row(row);
        }
    }
    right(&mut t, &[1, 2, 3, 5, 6, 7, 8, 9, 10]);
    fit(&mut t, width) + "\n"
}

/// A job state as a word: `Pending`, `Running`, ...
pub fn state(s: i32) -> &'static str {
    match pb::JobState::try_from(s).unwrap_or(pb::JobState::Unspecified) {
        pb::JobState::Unspecified => "Unknown",
        pb::JobState::Pending => "Pending",
        pb::JobState::Partial => "Partial",
        pb::JobState::Running => "Running",
        pb::JobState::Terminating => "Terminating",
        pb::JobState::Rejected => "Rejected",
    }
}

/// GPUs held/asked: `4/8`, `0.5/1`.
fn gpus(held_milli: u64, asked_milli: u64) -> String {
    format!(
        "{}/{}",
        milli_decimal(held_milli),
        milli_decimal(asked_milli)
    )
}

/// `trainyard jobs`: NAME, QUEUE, STATE, PODS (bound/all), GPUS
/// (held/asked), AGE, REASON; NAMESPACE first with `-A`.
pub fn jobs(resp: &pb::ListJobsResponse, namespaces: bool, width: Option<u16>) -> String {
    let mut header = Vec::new();
    if namespaces {
        header.push("NAMESPACE");
    }
    header.extend(["NAME", "QUEUE", "STATE", "PODS", "GPUS", "AGE", "REASON"]);
    let mut t = table(&header);
    for j in &resp.jobs {
        let mut row = Vec::new();
        if namespaces {
            row.push(j.namespace.clone());
        }
        row.extend([
            j.name.clone(),
            j.queue.clone(),
            state(j.state).to_string(),
            format!("{}/{}", j.pods_bound, j.pods),
            gpus(j.gpu_milli_bound, j.gpu_milli),
            age(j.age_seconds),
            if j.reason.is_empty() {
                "-".into()
            } else {
                j.reason.clone()
            },
        ]);
        t.add_row(row);
    }
    fit(&mut t, width) + "\n"
}

/// A cause as people act on it.
pub fn cause(c: i32) -> &'static str {
    match pb::Cause::try_from(c).unwrap_or(pb::Cause::Unspecified) {
        pb::Cause::Unspecified => "-",
        pb::Cause::Room => "room: no node has room for it",
        pb::Cause::Quota => "quota: a queue's limit (or quota) holds it back",
        pb::Cause::FairShare => "fair share: room is kept for queues below their share",
        pb::Cause::Topology => "topology: no domain of the required level holds the gang",
        pb::Cause::Gang => "gang: fewer pods than its minimum can be placed",
        pb::Cause::Reservation => "reservation: room is reserved for it from a later time",
        pb::Cause::Preemption => "preemption: it waits for evicted pods to go",
        pb::Cause::Request => "request: it cannot be honoured as written",
    }
}

/// `key: value` lines, the values aligned.
fn fields(rows: &[(&str, String)]) -> String {
    let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    rows.iter()
        .map(|(k, v)| format!("{:<w$} {v}\n", format!("{k}:")))
        .collect()
}

fn cycle(c: &Option<pb::Cycle>) -> String {
    match c {
        Some(c) => format!(
            "{} at {}",
            c.number,
            trainyard_serve::report::rfc3339(trainyard_model::Timestamp(c.time_ms))
        ),
        None => "-".into(),
    }
}

fn reservation(r: &pb::Reservation) -> String {
    let mut s = format!(
        "from {} (in {}) on {}",
        trainyard_serve::report::rfc3339(trainyard_model::Timestamp(r.start_ms)),
        age(r.starts_in_seconds),
        r.nodes.join(",")
    );
    if !r.domain.is_empty() {
        s.push_str(&format!(" in {}", r.domain));
    }
    if r.backfilled > 0 {
        s.push_str(&format!(
            "; {} job(s) backfilled on its nodes",
            r.backfilled
        ));
    }
    s
}

/// `trainyard forecast`: when and where, the range, whom it waits for,
/// the core's reason now.
pub fn forecast(f: &pb::ForecastStartResponse) -> String {
    let at = |ms: i64| trainyard_serve::report::rfc3339(trainyard_model::Timestamp(ms));
    let now = f.cycle.as_ref().map_or(0, |c| c.time_ms);
    let inn = |ms: i64| age(u64::try_from((ms - now) / 1000).unwrap_or(0));
    let mut rows = vec![("Job", f.job.clone())];
    if f.running {
        rows.push(("Starts", "running already: nothing to forecast".into()));
        rows.push(("Cycle", cycle(&f.cycle)));
        return fields(&rows);
    }
    if f.starts {
        rows.push((
            "Starts",
            format!("{} (in {})", at(f.expected_ms), inn(f.expected_ms)),
        ));
        if (f.p10_ms, f.p90_ms) != (f.expected_ms, f.expected_ms) {
            rows.push((
                "Range",
                format!(
                    "{} .. {} (10th-90th percentile; median {})",
                    at(f.p10_ms),
                    at(f.p90_ms),
                    at(f.p50_ms)
                ),
            ));
        }
        rows.push(("Nodes", f.nodes.join(",")));
    } else {
        let mut why = format!("not within the look-ahead (until {})", at(f.horizon_ms));
        if f.capped {
            why.push_str("; the forecast stopped at its cycle cap, it may start later");
        }
        rows.push(("Starts", why));
        if !f.reason_at_horizon.is_empty() {
            rows.push(("Then", f.reason_at_horizon.clone()));
        }
    }
    if !f.reason.is_empty() {
        rows.push(("Now", format!("{}: {}", f.reason, f.message)));
    }
    if let Some(r) = &f.reservation {
        rows.push(("Reservation", reservation(r)));
    }
    rows.push(("Cycle", cycle(&f.cycle)));
    let mut out = fields(&rows);
    if !f.waits_for.is_empty() {
        let mut t = table(&["WAITS FOR", "ENDS", "NODES"]);
        for w in &f.waits_for {
            t.add_row([w.job.clone(), at(w.ends_ms), w.nodes.join(",")]);
        }
        out.push_str(&format!("\n{t}\n"));
    }
    out
}

/// `trainyard explain`: the job, why it waits (reason, cause, message),
/// the nodes by reason, what would have to change, its reservation.
pub fn explain(e: &pb::ExplainJobResponse) -> String {
    let mut rows = Vec::new();
    if let Some(j) = &e.job {
        rows.push(("Job", format!("{}/{}", j.namespace, j.name)));
        rows.push(("Queue", j.queue.clone()));
        rows.push((
            "State",
            format!(
                "{} ({}/{} pods bound, minimum {}; {} GPUs)",
                state(j.state),
                j.pods_bound,
                j.pods,
                j.min_member,
                gpus(j.gpu_milli_bound, j.gpu_milli)
            ),
        ));
    }
    if !e.pending {
        rows.push(("Pending", "no: nothing of it waits".into()));
        rows.push(("Cycle", cycle(&e.cycle)));
        return fields(&rows);
    }
    rows.push(("Reason", e.reason.clone()));
    rows.push(("Cause", cause(e.cause).into()));
    rows.push(("Message", e.message.clone()));
    if !e.summary.is_empty() {
        rows.push(("Nodes", e.summary.clone()));
    }
    if let Some(r) = &e.reservation {
        rows.push(("Reservation", reservation(r)));
    }
    rows.push(("Cycle", cycle(&e.cycle)));
    let mut out = fields(&rows);
    if !e.node_reasons.is_empty() {
        let mut t = table(&["NODES", "REASON"]);
        for r in &e.node_reasons {
            t.add_row([r.nodes.to_string(), r.reason.clone()]);
        }
        right(&mut t, &[0]);
        out.push_str(&format!(
            "\nNodes refused ({} of {} fit):\n",
            e.nodes_fit, e.nodes_total
        ));
        for line in fit(&mut t, None).lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    if !e.to_fit.is_empty() {
        out.push_str("\nTo fit:\n");
        for s in &e.to_fit {
            out.push_str(&format!("  - {s}\n"));
        }
    }
    out
}

fn placements(title: &str, ps: &[pb::Placement]) -> String {
    if ps.is_empty() {
        return String::new();
    }
    let mut t = table(&["POD", "NODE", "GPUS"]);
    for p in ps {
        let g: Vec<String> = p.gpus.iter().map(u32::to_string).collect();
        let g = if g.is_empty() {
            "-".into()
        } else {
            g.join(",")
        };
        t.add_row([p.pod.clone(), p.node.clone(), g]);
    }
    format!("\n{title}:\n{}\n", indent(&fit(&mut t, None)))
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `trainyard whatif`: whether it fits now, where, whom it evicts, and
/// which other jobs it moves.
pub fn whatif(w: &pb::WhatIfResponse) -> String {
    let mut out = if w.fits && w.evictions.is_empty() {
        format!("{} would start now.\n", w.job)
    } else if w.fits {
        format!(
            "{} would start once {} pod(s) are evicted.\n",
            w.job,
            w.evictions.len()
        )
    } else {
        format!("{} would wait: {}: {}\n", w.job, w.reason, w.message)
    };
    if let Some(r) = &w.reservation {
        out.push_str(&format!("Reservation: {}\n", reservation(r)));
    }
    out.push_str(&placements("Binds", &w.binds));
    out.push_str(&placements(
        "Nominated (once the evicted pods are gone)",
        &w.nominations,
    ));
    if !w.evictions.is_empty() {
        let mut t = table(&["JOB", "POD", "NODE", "KIND", "WHY"]);
        for v in &w.evictions {
            t.add_row([
                v.job.clone(),
                v.pod.clone(),
                v.node.clone(),
                v.kind.clone(),
                v.message.clone(),
            ]);
        }
        out.push_str(&format!("\nEvictions:\n{}\n", indent(&fit(&mut t, None))));
    }
    if !w.displaced.is_empty() {
        out.push_str(&format!(
            "\nOther jobs placed differently: {}\n",
            w.displaced.join(", ")
        ));
    }
    let on = match &w.cycle {
        Some(_) => format!("cycle {}", cycle(&w.cycle)),
        None => "the latest cycle".into(),
    };
    out.push_str(&format!(
        "\n(computed on a copy of {on}; nothing was changed)\n"
    ));
    out
}

/// `trainyard watch`: a cycle's decisions, one line each.
pub fn watch(d: &pb::CycleDecisions) -> String {
    let (n, time) = match &d.cycle {
        Some(c) => (
            c.number,
            trainyard_serve::report::rfc3339(trainyard_model::Timestamp(c.time_ms)),
        ),
        None => (0, "-".into()),
    };
    let at = format!("{time} cycle {n}");
    let mut out = String::new();
    if d.missed > 0 {
        out.push_str(&format!(
            "{at} missed {} cycle(s): this reader fell behind\n",
            d.missed
        ));
    }
    for b in &d.binds {
        let g: Vec<String> = b.gpus.iter().map(u32::to_string).collect();
        let g = if g.is_empty() {
            String::new()
        } else {
            format!(" gpus {}", g.join(","))
        };
        out.push_str(&format!("{at} bind {} {} -> {}{g}\n", b.job, b.pod, b.node));
    }
    for v in &d.evictions {
        out.push_str(&format!(
            "{at} evict {} {} on {} ({}): {}\n",
            v.job, v.pod, v.node, v.kind, v.message
        ));
    }
    for r in &d.reasons {
        if r.reason.is_empty() {
            out.push_str(&format!(
                "{at} waits-no-more {} (queue {})\n",
                r.job, r.queue
            ));
        } else {
            out.push_str(&format!(
                "{at} pending {} (queue {}) {}: {}\n",
                r.job, r.queue, r.reason, r.message
            ));
        }
    }
    out
}

#[cfg(test)]
#[path = "show_tests.rs"]
mod tests;
