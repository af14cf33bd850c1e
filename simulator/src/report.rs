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

use crate::output::{fmt_duration, fmt_fixed, fmt_percent};
use crate::result::{JobState, SimOutput, Stats, Summary};

/// Okabe–Ito colorblind-safe palette (yellow replaced by near-black, which
/// reads better on white).
pub(crate) const PALETTE: [&str; 7] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#222222",
];
/// Color of reference lines (capacity, single-policy fair share).
const REFERENCE: &str = "#555555";
/// Most points drawn per line; longer series are bucketed.
const MAX_POINTS: usize = 1000;
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

/// How a line is stroked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dash {
    Solid,
    Dashed,
    Dotted,
    /// Dashed, with the dashes of `of` such lines interleaved so that
    /// identical lines (say, the same fair share under two policies) show
    /// alternating colors instead of hiding each other.
    Interleaved {
        index: usize,
        of: usize,
    },
}

impl Dash {
    fn attr(self) -> String {
        match self {
            Dash::Solid => String::new(),
            Dash::Dashed => " stroke-dasharray=\"6 4\"".to_string(),
            Dash::Dotted => " stroke-dasharray=\"1.5 3\" stroke-linecap=\"round\"".to_string(),
            Dash::Interleaved { index, of } if of > 1 => {
                let period = 6 * of;
                format!(
                    " stroke-dasharray=\"6 {}\" stroke-dashoffset=\"{}\"",
                    period - 6,
                    (period - 6 * (index % of)) % period
                )
            }
            Dash::Interleaved { .. } => Dash::Dashed.attr(),
        }
    }
    fn css(self) -> &'static str {
        match self {
            Dash::Solid => "solid",
            Dash::Dashed | Dash::Interleaved { .. } => "dashed",
            Dash::Dotted => "dotted",
        }
    }
}

/// The style of the `i`th of many lines: palette color, then dash pattern
/// once the palette is used up.
pub(crate) fn style(i: usize) -> (&'static str, Dash) {
    let dash = match (i / PALETTE.len()) % 3 {
        0 => Dash::Solid,
        1 => Dash::Dashed,
        _ => Dash::Dotted,
    };
    (PALETTE[i % PALETTE.len()], dash)
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    pub(crate) dash: Dash,
    pub(crate) color: &'static str,
    /// Stroke width in pixels.
    pub(crate) stroke: f64,
}

/// A small SVG line chart with axes, gridlines, tick labels and a legend.
#[derive(Clone, Debug)]
pub(crate) struct LineChart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) series: Vec<Series>,
    /// Logarithmic x axis (x ≤ 0 is drawn at the left edge).
    pub(crate) log_x: bool,
    /// Draw as step functions: each value holds until the next point.
    pub(crate) step: bool,
    /// Fixed domains; from the data when absent (y from zero).
    pub(crate) x_domain: Option<(f64, f64)>,
    pub(crate) y_domain: Option<(f64, f64)>,
    /// Fixed x ticks (value, label); nice linear ticks when absent.
    pub(crate) x_ticks: Option<Vec<(f64, String)>>,
    /// Draw a legend inside the chart.
    pub(crate) legend: bool,
    pub(crate) width: f64,
    pub(crate) height: f64,
}

impl LineChart {
    pub(crate) fn new(
        title: &str,
        x_label: &str,
        y_label: &str,
        width: f64,
        height: f64,
    ) -> LineChart {
        LineChart {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            series: Vec::new(),
            log_x: false,
            step: true,
            x_domain: None,
            y_domain: None,
            x_ticks: None,
            legend: true,
            width,
            height,
        }
    }

    pub(crate) fn render(&self) -> String {
        let series: Vec<(&Series, Vec<(f64, f64)>)> = self
            .series
            .iter()
            .map(|s| {
                let mut pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                (s, pts)
            })
            .collect();
        let all = || series.iter().flat_map(|(_, p)| p.iter().copied());
        let has_data = all().next().is_some();

        // Domains.
        let (mut x0, mut x1) = self.x_domain.unwrap_or_else(|| {
            let lo = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
            let hi = all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
            if lo.is_finite() && hi.is_finite() {
                (lo, hi)
            } else {
                (0.0, 1.0)
            }
        });
        if self.log_x {
            x0 = x0.max(1e-9);
            if x1 <= x0 {
                x1 = x0 * 10.0;
            }
        } else if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let (y0, y1, y_step) = match self.y_domain {
            Some((lo, hi)) => {
                let hi = if hi > lo { hi } else { lo + 1.0 };
                (lo, hi, nice_step(hi - lo, 5))
            }
            None => {
                let max = all().map(|p| p.1).fold(0.0, f64::max);
                let max = if max > 0.0 { max * 1.04 } else { 1.0 };
                let step = nice_step(max, 5);
                (0.0, (max / step).ceil() * step, step)
            }
        };
        let y_ticks = linear_ticks(y0, y1, y_step);
        let y_decimals = decimals_for(y_step);
        let y_labels: Vec<String> = y_ticks.iter().map(|v| num(*v, y_decimals)).collect();
        let x_ticks: Vec<(f64, String)> = match &self.x_ticks {
            Some(t) => t
                .iter()
                .filter(|(v, _)| *v >= x0 - 1e-9 && *v <= x1 + 1e-9)
                .cloned()
                .collect(),
            None => {
                let step = nice_step(x1 - x0, ((self.width / 90.0) as usize).clamp(2, 10));
                let d = decimals_for(step);
                linear_ticks(x0, x1, step)
                    .into_iter()
                    .map(|v| (v, num(v, d)))
                    .collect()
            }
        };

        // Layout.
        let legend_rows = if self.legend {
            legend_layout(&self.series, self.width - 24.0)
        } else {
            Vec::new()
        };
        let legend_h = legend_rows.iter().map(|r| r.1).fold(0.0, f64::max);
        let label_w = y_labels.iter().map(|l| l.len()).max().unwrap_or(1) as f64 * 6.4;
        let left = 30.0 + label_w;
        let right = self.width - 14.0;
        let top = 34.0 + legend_h;
        let bottom = self.height - 42.0;
        let (pw, ph) = (right - left, (bottom - top).max(10.0));
        let bottom = top + ph;
        let height = self.height.max(bottom + 42.0);
        let (lx0, lx1) = if self.log_x {
            (x0.log10(), x1.log10())
        } else {
            (x0, x1)
        };
        let sx = |x: f64| -> f64 {
            let v = if self.log_x { x.max(x0).log10() } else { x };
            (left + (v - lx0) / (lx1 - lx0) * pw).clamp(left, right)
        };
        let sy = |y: f64| -> f64 { (bottom - (y - y0) / (y1 - y0) * ph).clamp(top, bottom) };

        let mut s = String::new();
        s.push_str(&format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{t}\" font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\" font-size=\"11\">\n",
            w = f1(self.width),
            h = f1(height),
            t = esc(&self.title),
        ));
        s.push_str(&format!("<title>{}</title>\n", esc(&self.title)));
        s.push_str(&format!(
            "<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"600\" fill=\"#222\">{}</text>\n",
            f1(12.0),
            esc(&ellipsize(&self.title, ((self.width - 20.0) / 7.4) as usize)),
        ));

        // Legend.
        for (entries, _) in &legend_rows {
            for (i, x, y) in entries {
                let ser = &self.series[*i];
                s.push_str(&format!(
                    "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"{}/>",
                    f1(*x),
                    f1(y - 4.0),
                    f1(x + 20.0),
                    f1(y - 4.0),
                    ser.color,
                    ser.dash.attr(),
                ));
                s.push_str(&format!(
                    "<text x=\"{}\" y=\"{}\" fill=\"#333\">{}</text>\n",
                    f1(x + 25.0),
                    f1(*y),
                    esc(&ser.name),
                ));
            }
        }

        // Grid and ticks.
        s.push_str("<g stroke=\"#e6e6e6\" stroke-width=\"1\">");
        for v in &y_ticks {
            let y = sy(*v);
            s.push_str(&format!(
                "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
                f1(left),
                f1(y),
                f1(right),
                f1(y)
            ));
        }
        for (v, _) in &x_ticks {
            let x = sx(*v);
            s.push_str(&format!(
                "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
                f1(x),
                f1(top),
                f1(x),
                f1(bottom)
            ));
        }
        s.push_str("</g>\n<g fill=\"#555\">");
        for (v, label) in y_ticks.iter().zip(&y_labels) {
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                f1(left - 6.0),
                f1(sy(*v) + 3.5),
                esc(label)
            ));
        }
        for (v, label) in &x_ticks {
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                f1(sx(*v)),
                f1(bottom + 15.0),
                esc(label)
            ));
        }
        s.push_str("</g>\n");
        s.push_str(&format!(
            "<path d=\"M{l},{t}V{b}H{r}\" fill=\"none\" stroke=\"#888\" stroke-width=\"1\"/>\n",
            l = f1(left),
            t = f1(top),
            b = f1(bottom),
            r = f1(right),
        ));
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
            f1(left + pw / 2.0),
            f1(bottom + 33.0),
            esc(&self.x_label)
        ));
        s.push_str(&format!(
            "<text transform=\"translate({} {}) rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
            f1(12.0),
            f1(top + ph / 2.0),
            esc(&self.y_label)
        ));

        // Lines.
        for (ser, pts) in &series {
            if pts.is_empty() {
                continue;
            }
            let pts = downsample(pts, sx, left, pw);
            let mut d = String::new();
            for (i, (x, y)) in pts.iter().enumerate() {
                let (px, py) = (sx(*x), sy(*y));
                if i == 0 {
                    d.push_str(&format!("M{},{}", f1(px), f1(py)));
                } else if self.step {
                    d.push_str(&format!("H{}V{}", f1(px), f1(py)));
                } else {
                    d.push_str(&format!("L{},{}", f1(px), f1(py)));
                }
            }
            if pts.len() == 1 {
                // A lone point: draw a short tick so it is visible.
                d.push_str("h2");
            }
            s.push_str(&format!(
                "<path d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" stroke-linejoin=\"round\"{}><title>{}</title></path>\n",
                ser.color,
                f1(ser.stroke),
                ser.dash.attr(),
                esc(&ser.name),
            ));
        }
        if !has_data {
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#999\" font-size=\"13\">no data</text>\n",
                f1(left + pw / 2.0),
                f1(top + ph / 2.0)
            ));
        }
        s.push_str("</svg>\n");
        s
    }
}

/// Places legend entries in rows no wider than `width`: per row, the
/// entries `(series index, x, baseline y)` and the row's bottom.
type LegendRow = (Vec<(usize, f64, f64)>, f64);

fn legend_layout(series: &[Series], width: f64) -> Vec<LegendRow> {
    let mut rows: Vec<LegendRow> = Vec::new();
    let mut x = 12.0;
    let mut row = 0usize;
    for (i, s) in series.iter().enumerate() {
        let w = 25.0 + s.name.chars().count().min(60) as f64 * 6.2 + 16.0;
        if x > 12.0 && x + w > width {
            row += 1;
            x = 12.0;
        }
        if rows.len() <= row {
            rows.push((Vec::new(), 0.0));
        }
        let y = 40.0 + row as f64 * 16.0;
        rows[row].0.push((i, x, y));
        rows[row].1 = 22.0 + row as f64 * 16.0;
        x += w;
    }
    rows
}

/// Keeps at most [`MAX_POINTS`] points: points are bucketed by their pixel
/// x; each bucket becomes its first x with its largest y (so spikes of a
/// step series survive), and the last point is always kept.
fn downsample(pts: &[(f64, f64)], sx: impl Fn(f64) -> f64, left: f64, pw: f64) -> Vec<(f64, f64)> {
    if pts.len() <= MAX_POINTS {
        return pts.to_vec();
    }
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(MAX_POINTS + 1);
    let mut current: Option<usize> = None;
    for &(x, y) in pts {
        let b = (((sx(x) - left) / pw * MAX_POINTS as f64).floor().max(0.0) as usize)
            .min(MAX_POINTS - 1);
        if current == Some(b) {
            if let Some(last) = out.last_mut()
                && y > last.1
            {
                last.1 = y;
            }
        } else {
            out.push((x, y));
            current = Some(b);
        }
    }
    if let (Some(&lp), Some(&lo)) = (pts.last(), out.last())
        && lp != lo
    {
        out.push(lp);
    }
    out
}

/// A step of 1, 2 or 5 × 10ⁿ giving about `target` intervals over `range`.
fn nice_step(range: f64, target: usize) -> f64 {
    if !(range.is_finite() && range > 0.0) {
        return 1.0;
    }
    let raw = range / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm < 1.5 {
        1.0
    } else if norm < 3.0 {
        2.0
    } else if norm < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Multiples of `step` within `[lo, hi]`.
fn linear_ticks(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last.min(first + 100))
        .map(|i| i as f64 * step)
        .collect()
}

fn decimals_for(step: f64) -> usize {
    if step >= 1.0 {
        0
    } else {
        ((-step.log10()).ceil().max(0.0) as usize).min(6)
    }
}

/// A tick label: fixed decimals, thousands as `k` from 10 000.
fn num(v: f64, decimals: usize) -> String {
    if v.abs() >= 10_000.0 && decimals == 0 {
        let k = v / 1000.0;
        let d = if (k - k.round()).abs() < 1e-9 { 0 } else { 1 };
        return format!("{}k", fmt_fixed(k, d));
    }
    fmt_fixed(v, decimals)
}

/// Pixel coordinate with one decimal.
fn f1(v: f64) -> String {
    fmt_fixed(v, 1)
}

/// Escapes text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn ellipsize(s: &str, max: usize) -> String {
    let max = max.max(4);
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

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

/// Which value of a row is best, for highlighting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Better {
    Lower,
    Higher,
    Neither,
}

fn summary_html(runs: &[(&SimOutput, &Summary)]) -> String {
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

fn per_queue_html(runs: &[(&SimOutput, &Summary)]) -> String {
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

#[cfg(test)]
mod tests;
