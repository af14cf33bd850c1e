//! The SVG chart kit of the HTML reports: a line chart with axes, ticks,
//! legend and downsampling, the palette and dash styles, and the number
//! and text helpers it needs. Knows nothing of simulations; the pages
//! (`report`, `fgd_report`) decide what to draw.

use crate::output::fmt_fixed;

/// Okabe–Ito colorblind-safe palette (yellow replaced by near-black, which
/// reads better on white).
pub(crate) const PALETTE: [&str; 7] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#222222",
];
/// Most points drawn per line; longer series are bucketed.
pub(crate) const MAX_POINTS: usize = 1000;

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
    pub(crate) fn attr(self) -> String {
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
    pub(crate) fn css(self) -> &'static str {
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

pub(crate) fn legend_layout(series: &[Series], width: f64) -> Vec<LegendRow> {
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
pub(crate) fn downsample(
    pts: &[(f64, f64)],
    sx: impl Fn(f64) -> f64,
    left: f64,
    pw: f64,
) -> Vec<(f64, f64)> {
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
pub(crate) fn nice_step(range: f64, target: usize) -> f64 {
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
pub(crate) fn linear_ticks(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last.min(first + 100))
        .map(|i| i as f64 * step)
        .collect()
}

pub(crate) fn decimals_for(step: f64) -> usize {
    if step >= 1.0 {
        0
    } else {
        ((-step.log10()).ceil().max(0.0) as usize).min(6)
    }
}

/// A tick label: fixed decimals, thousands as `k` from 10 000.
pub(crate) fn num(v: f64, decimals: usize) -> String {
    if v.abs() >= 10_000.0 && decimals == 0 {
        let k = v / 1000.0;
        let d = if (k - k.round()).abs() < 1e-9 { 0 } else { 1 };
        return format!("{}k", fmt_fixed(k, d));
    }
    fmt_fixed(v, decimals)
}

/// Pixel coordinate with one decimal.
pub(crate) fn f1(v: f64) -> String {
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

pub(crate) fn ellipsize(s: &str, max: usize) -> String {
    let max = max.max(4);
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}
