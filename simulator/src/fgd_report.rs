//! The FGD experiment's report: a self-contained HTML page with the results
//! table and, per workload, the unallocated-GPU and fragmentation curves
//! (median over seeds) of every policy against the arrived workload.

use trainyard_sched::GpuStrategy;

use crate::chart::{LineChart, Series, esc, style};
use crate::fgd::{self, Cell, Curve, Reference, paper_label};
use crate::report::STYLE;

fn chart(cells: &[&Cell], curve: Curve, title: &str, y_label: &str, from: usize) -> String {
    let mut c = LineChart::new(
        title,
        "arrived workload (% of GPU capacity)",
        y_label,
        540.0,
        300.0,
    );
    c.step = false;
    c.x_domain = Some((from as f64, 130.0));
    for (i, cell) in cells.iter().enumerate() {
        let (color, dash) = style(i);
        c.series.push(Series {
            name: paper_label(cell.policy).to_string(),
            points: cell
                .quartiles(curve)
                .into_iter()
                .filter(|(b, ..)| *b >= from)
                .map(|(b, _, m, _)| (b as f64, m))
                .collect(),
            dash,
            color,
            stroke: if cell.policy == GpuStrategy::Trainyard {
                2.5
            } else {
                1.5
            },
        });
    }
    c.render()
}

/// The whole page.
pub fn report_html(cells: &[Cell], reference: Option<&Reference>) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<title>FGD experiment</title>\n");
    h.push_str(STYLE);
    h.push_str(
        "</head>\n<body>\n<main>\n<header>\n<h1>GPU sharing: the FGD experiment on openb</h1>\n",
    );
    let seeds = cells.first().map_or(0, |c| c.runs.len());
    h.push_str(&format!(
        "<p class=\"sub\">{} workloads · {} policies · {seeds} seeds each · arrival-only replay, inflated to 130% of GPU capacity</p>\n</header>\n",
        fgd::workloads(cells).len(),
        fgd::policies(cells).len()
    ));
    h.push_str("<section>\n<h2>Unallocated GPU % at 100% arrived (mean ± sd)</h2>\n<table>\n<tr><th>workload</th>");
    let ps = fgd::policies(cells);
    for p in &ps {
        h.push_str(&format!("<th>{}</th>", esc(paper_label(*p))));
    }
    h.push_str("</tr>\n");
    for w in fgd::workloads(cells) {
        h.push_str(&format!("<tr><td>{}</td>", esc(w)));
        let row: Vec<Option<&Cell>> = ps
            .iter()
            .map(|p| cells.iter().find(|c| c.workload == w && c.policy == *p))
            .collect();
        let best = row
            .iter()
            .flatten()
            .map(|c| c.headline().0)
            .fold(f64::INFINITY, f64::min);
        for (p, c) in ps.iter().zip(row) {
            match c {
                Some(c) => {
                    let (m, sd) = c.headline();
                    let published = reference
                        .and_then(|r| r.get(&(w.to_string(), paper_label(*p).to_string())))
                        .map(|(pm, _)| format!("<br><span class=\"note\">pub {pm:.2}</span>"))
                        .unwrap_or_default();
                    let b = if m == best {
                        " style=\"font-weight:bold\""
                    } else {
                        ""
                    };
                    h.push_str(&format!("<td{b}>{m:.2} ± {sd:.2}{published}</td>"));
                }
                None => h.push_str("<td></td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n</section>\n");
    for w in fgd::workloads(cells) {
        let these: Vec<&Cell> = cells.iter().filter(|c| c.workload == w).collect();
        h.push_str(&format!(
            "<section>\n<h2>{}</h2>\n<div class=\"charts\">\n",
            esc(w)
        ));
        h.push_str(&chart(
            &these,
            Curve::Unallocated,
            "Unallocated GPU (median over seeds)",
            "% of GPUs",
            80,
        ));
        h.push_str(&chart(
            &these,
            Curve::FragPct,
            "Fragmented GPU (median over seeds)",
            "% of GPUs",
            0,
        ));
        h.push_str("</div>\n</section>\n");
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}
