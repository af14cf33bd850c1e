//! The evaluation's outputs: the error table (Markdown, for the terminal
//! and docs/forecasts.md) and one CSV row per job.

use super::eval::{ErrorRow, Observation, Taken, When};
use crate::output::{fmt_duration, millis_as_secs};

/// The error table as Markdown: one row per kind of forecast and class.
pub fn errors_markdown(rows: &[ErrorRow]) -> String {
    let mut s = String::from(
        "| forecast | jobs | n | beyond horizon | median abs. error | p90 abs. error | median signed | in p10–p90 | central: median abs. |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let when = match r.when {
            When::AtArrival => "at arrival",
            When::Later => "1 h later",
        };
        s.push_str(&format!(
            "| {when} | {} | {} | {} | {} | {} | {} | {:.0}% | {} |\n",
            r.class,
            r.jobs,
            r.beyond_horizon,
            fmt_duration(r.median_abs_s),
            fmt_duration(r.p90_abs_s),
            signed(r.median_signed_s),
            r.in_range * 100.0,
            fmt_duration(r.expected_median_abs_s),
        ));
    }
    s
}

/// A signed duration for people: `-1h05m`, `+12s`, `0s`.
fn signed(secs: f64) -> String {
    if secs == 0.0 {
        "0s".into()
    } else if secs < 0.0 {
        format!("-{}", fmt_duration(-secs))
    } else {
        format!("+{}", fmt_duration(secs))
    }
}

/// One row per job: its size, submission, real start, and both
/// forecasts (times in seconds; empty when none).
pub fn observations_csv(obs: &[Observation]) -> String {
    let mut s = String::from(
        "job,gpus,pods,submit_s,started_s,arrival_at_s,arrival_expected_s,arrival_p10_s,arrival_p50_s,arrival_p90_s,later_at_s,later_expected_s,later_p10_s,later_p50_s,later_p90_s\n",
    );
    let t =
        |x: Option<trainyard_model::Timestamp>| x.map(|t| millis_as_secs(t.0)).unwrap_or_default();
    let taken = |x: &Option<Taken>| match x {
        Some(k) => format!(
            "{},{},{},{},{}",
            millis_as_secs(k.at.0),
            t(k.expected),
            t(k.p10),
            t(k.p50),
            t(k.p90)
        ),
        None => ",,,,".into(),
    };
    for o in obs {
        let id = if o.job.contains([',', '"']) {
            format!("\"{}\"", o.job.replace('"', "\"\""))
        } else {
            o.job.clone()
        };
        s.push_str(&format!(
            "{id},{},{},{},{},{},{}\n",
            crate::output::gpus(o.gpu_milli),
            o.pods,
            millis_as_secs(o.submit.0),
            t(o.started),
            taken(&o.at_arrival),
            taken(&o.later)
        ));
    }
    s
}
