//! The experiment's results: cells of (workload, policy), their CSV,
//! JSON and Markdown, and the checks against the published means.

use super::*;

/// All runs of one (workload, policy) pair.
#[derive(Clone, Debug)]
pub struct Cell {
    pub workload: String,
    pub policy: GpuStrategy,
    pub runs: Vec<RunResult>,
}

/// Which curve of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    Unallocated,
    FragPct,
    FragRatio,
}

impl RunResult {
    pub fn curve(&self, c: Curve) -> &[Option<f64>] {
        match c {
            Curve::Unallocated => &self.unallocated,
            Curve::FragPct => &self.frag_pct,
            Curve::FragRatio => &self.frag_ratio,
        }
    }
}

impl Cell {
    /// Values of a curve at one bin over the runs that have it.
    pub fn at(&self, c: Curve, bin: usize) -> Vec<f64> {
        self.runs
            .iter()
            .filter_map(|r| r.curve(c).get(bin).copied().flatten())
            .collect()
    }

    /// Mean ± sd over seeds of the unallocated GPU % at 100% arrived.
    pub fn headline(&self) -> (f64, f64) {
        mean_sd(&self.at(Curve::Unallocated, 100))
    }

    /// (bin, p25, median, p75) of a curve over seeds.
    pub fn quartiles(&self, c: Curve) -> Vec<(usize, f64, f64, f64)> {
        (0..BINS)
            .filter_map(|b| {
                let v = self.at(c, b);
                (!v.is_empty())
                    .then(|| (b, quantile(&v, 0.25), quantile(&v, 0.5), quantile(&v, 0.75)))
            })
            .collect()
    }
}

fn f2(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        String::new()
    }
}

/// One row per run.
pub fn runs_csv(cells: &[Cell]) -> String {
    let mut s = String::from(
        "workload,policy,seed,pods,failed,unallocated_95,unallocated_100,unallocated_130,frag_pct_100\n",
    );
    for c in cells {
        for r in &c.runs {
            let at = |v: &[Option<f64>], b: usize| {
                v.get(b).copied().flatten().map(f2).unwrap_or_default()
            };
            s.push_str(&format!(
                "{},{},{},{},{},{},{},{},{}\n",
                c.workload,
                c.policy.as_str(),
                r.seed,
                r.pods,
                r.failed,
                at(&r.unallocated, 95),
                at(&r.unallocated, 100),
                at(&r.unallocated, 130),
                at(&r.frag_pct, 100),
            ));
        }
    }
    s
}

/// Per (workload, policy, bin): median and quartiles over seeds of the
/// unallocated and fragmented GPU %, and the median fragmentation ratio.
pub fn curves_csv(cells: &[Cell]) -> String {
    let mut s = String::from(
        "workload,policy,arrived_pct,unallocated_p25,unallocated_median,unallocated_p75,frag_pct_p25,frag_pct_median,frag_pct_p75,frag_ratio_median\n",
    );
    for c in cells {
        let u = c.quartiles(Curve::Unallocated);
        let f = c.quartiles(Curve::FragPct);
        let r = c.quartiles(Curve::FragRatio);
        for b in 0..BINS {
            let find = |v: &[(usize, f64, f64, f64)]| v.iter().find(|x| x.0 == b).copied();
            let (Some(u), Some(f)) = (find(&u), find(&f)) else {
                continue;
            };
            let r = find(&r).map(|x| f2(x.2)).unwrap_or_default();
            s.push_str(&format!(
                "{},{},{b},{},{},{},{},{},{},{r}\n",
                c.workload,
                c.policy.as_str(),
                f2(u.1),
                f2(u.2),
                f2(u.3),
                f2(f.1),
                f2(f.2),
                f2(f.3),
            ));
        }
    }
    s
}

/// The workloads of `cells`, in first-seen order.
pub fn workloads(cells: &[Cell]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for c in cells {
        if !out.contains(&c.workload.as_str()) {
            out.push(&c.workload);
        }
    }
    out
}

/// The policies of `cells`, in first-seen order.
pub fn policies(cells: &[Cell]) -> Vec<GpuStrategy> {
    let mut out = Vec::new();
    for c in cells {
        if !out.contains(&c.policy) {
            out.push(c.policy);
        }
    }
    out
}

/// Published policies whose every cell must be within 1 percentage point.
pub const STRICT: [GpuStrategy; 4] = [
    GpuStrategy::Random,
    GpuStrategy::BestFit,
    GpuStrategy::Packing,
    GpuStrategy::Fgd,
];

/// The check of one cell against the published mean.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub workload: String,
    pub policy: GpuStrategy,
    pub ours: f64,
    pub published: f64,
    pub published_sd: f64,
}

impl Check {
    pub fn delta(&self) -> f64 {
        self.ours - self.published
    }
    /// Within 1 percentage point (the acceptance bound for strict policies).
    pub fn within_1pp(&self) -> bool {
        self.delta().abs() <= 1.0
    }
}

/// Every cell with a published value, compared.
pub fn checks(cells: &[Cell], reference: &Reference) -> Vec<Check> {
    cells
        .iter()
        .filter_map(|c| {
            let (pm, ps) =
                reference.get(&(c.workload.clone(), paper_label(c.policy).to_string()))?;
            Some(Check {
                workload: c.workload.clone(),
                policy: c.policy,
                ours: c.headline().0,
                published: *pm,
                published_sd: *ps,
            })
        })
        .collect()
}

/// The results as Markdown: one table of ours (mean ± sd), one of the
/// published values when given, the deviations, and the verdicts.
pub fn results_markdown(cells: &[Cell], reference: Option<&Reference>, command: &str) -> String {
    let ws = workloads(cells);
    let ps = policies(cells);
    let mut s = String::new();
    s.push_str("# FGD experiment: unallocated GPU % at 100% arrived (mean ± sd over seeds)\n\n");
    s.push_str(&format!("Produced by:\n\n```\n{command}\n```\n\n"));
    let seeds: Vec<u64> = cells
        .first()
        .map(|c| c.runs.iter().map(|r| r.seed).collect())
        .unwrap_or_default();
    s.push_str(&format!(
        "Seeds: {seeds:?}. Lower is better.\n\n## Ours\n\n"
    ));
    let header = |s: &mut String| {
        s.push_str("| workload |");
        for p in &ps {
            s.push_str(&format!(" {} |", paper_label(*p)));
        }
        s.push_str("\n|---|");
        for _ in &ps {
            s.push_str("---|");
        }
        s.push('\n');
    };
    header(&mut s);
    let cell = |w: &str, p: GpuStrategy| cells.iter().find(|c| c.workload == w && c.policy == p);
    for w in &ws {
        s.push_str(&format!("| {w} |"));
        let best = ps
            .iter()
            .filter_map(|p| cell(w, *p).map(|c| c.headline().0))
            .fold(f64::INFINITY, f64::min);
        for p in &ps {
            match cell(w, *p) {
                Some(c) => {
                    let (m, sd) = c.headline();
                    if m == best {
                        s.push_str(&format!(" **{} ± {}** |", f2(m), f2(sd)));
                    } else {
                        s.push_str(&format!(" {} ± {} |", f2(m), f2(sd)));
                    }
                }
                None => s.push_str(" |"),
            }
        }
        s.push('\n');
    }
    let Some(reference) = reference else {
        return s;
    };
    s.push_str("\n## Published (FGD paper artifact)\n\n");
    header(&mut s);
    for w in &ws {
        s.push_str(&format!("| {w} |"));
        for p in &ps {
            match reference.get(&(w.to_string(), paper_label(*p).to_string())) {
                Some((m, sd)) => s.push_str(&format!(" {} ± {} |", f2(*m), f2(*sd))),
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    s.push_str("\n## Ours − published (percentage points)\n\n");
    header(&mut s);
    let all = checks(cells, reference);
    for w in &ws {
        s.push_str(&format!("| {w} |"));
        for p in &ps {
            match all.iter().find(|c| c.workload == *w && c.policy == *p) {
                Some(c) => {
                    let mark = if STRICT.contains(p) && !c.within_1pp() {
                        " ✗"
                    } else {
                        ""
                    };
                    s.push_str(&format!(" {:+.2}{mark} |", c.delta()));
                }
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    let strict: Vec<&Check> = all.iter().filter(|c| STRICT.contains(&c.policy)).collect();
    let misses: Vec<&&Check> = strict.iter().filter(|c| !c.within_1pp()).collect();
    s.push_str(&format!(
        "\n**Acceptance (Random, BestFit, GpuPacking, FGD within 1 pp of the published mean): {} of {} cells pass.**\n",
        strict.len() - misses.len(),
        strict.len()
    ));
    for m in &misses {
        s.push_str(&format!(
            "- miss: {} {}: ours {} vs published {} ± {} ({:+.2})\n",
            m.workload,
            paper_label(m.policy),
            f2(m.ours),
            f2(m.published),
            f2(m.published_sd),
            m.delta()
        ));
    }
    let others: Vec<&Check> = all.iter().filter(|c| !STRICT.contains(&c.policy)).collect();
    if !others.is_empty() {
        let max = others.iter().map(|c| c.delta().abs()).fold(0.0, f64::max);
        s.push_str(&format!(
            "- DotProd and GpuClustering (not in the acceptance bound): largest deviation {max:.2} pp.\n"
        ));
    }
    if let Some(order) = default_ordering(cells) {
        s.push_str(&format!(
            "\nOrdering on `default` (worst to best): {order}.\n"
        ));
    }
    if ps.contains(&GpuStrategy::Trainyard) && ps.contains(&GpuStrategy::Fgd) {
        let mut wins = 0;
        let mut lines = Vec::new();
        for w in &ws {
            if let (Some(t), Some(f)) = (cell(w, GpuStrategy::Trainyard), cell(w, GpuStrategy::Fgd))
            {
                let (tm, fm) = (t.headline().0, f.headline().0);
                if tm < fm {
                    wins += 1;
                } else {
                    lines.push(format!(
                        "- Trainyard not below FGD on {w}: {} vs {}\n",
                        f2(tm),
                        f2(fm)
                    ));
                }
            }
        }
        s.push_str(&format!(
            "\n**Trainyard below FGD on {wins} of {} workloads.**\n",
            ws.len()
        ));
        for l in lines {
            s.push_str(&l);
        }
    }
    s
}

/// The `default` workload's policies from most to least unallocated GPU.
pub fn default_ordering(cells: &[Cell]) -> Option<String> {
    let mut v: Vec<(f64, GpuStrategy)> = cells
        .iter()
        .filter(|c| c.workload == "default" && PAPER_POLICIES.contains(&c.policy))
        .map(|c| (c.headline().0, c.policy))
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| b.0.total_cmp(&a.0));
    Some(
        v.iter()
            .map(|(m, p)| format!("{} {}", paper_label(*p), f2(*m)))
            .collect::<Vec<_>>()
            .join(" > "),
    )
}

/// Machine-readable summary: per cell the headline and per-seed values.
pub fn summary_json(cells: &[Cell], reference: Option<&Reference>) -> String {
    let rows: Vec<serde_json::Value> = cells
        .iter()
        .map(|c| {
            let (m, sd) = c.headline();
            let published = reference
                .and_then(|r| r.get(&(c.workload.clone(), paper_label(c.policy).to_string())))
                .map(|(m, s)| serde_json::json!({"mean": m, "sd": s}));
            serde_json::json!({
                "workload": c.workload,
                "policy": c.policy.as_str(),
                "unallocatedAt100": {"mean": (m * 1e4).round() / 1e4, "sd": (sd * 1e4).round() / 1e4},
                "perSeed": c.runs.iter().map(|r| serde_json::json!({
                    "seed": r.seed, "pods": r.pods, "failed": r.failed,
                    "unallocatedAt100": r.unallocated[100],
                })).collect::<Vec<_>>(),
                "published": published,
            })
        })
        .collect();
    let mut s =
        serde_json::to_string_pretty(&serde_json::json!({ "cells": rows })).unwrap_or_default();
    s.push('\n');
    s
}
