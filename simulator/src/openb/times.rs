//! Replaying the trace in time: time columns borrowed for the
//! `multigpu*` lists, and arrivals sped up.
//!
//! The four `multigpu*` lists are re-samplings of `default` with more
//! multi-GPU pods: every `default` pod is in them under its own name, the
//! extra pods are new names, and no row carries `gpu_spec`, `qos` or
//! times. To replay one in time, [`TraceTimes`] takes those columns from
//! a full list (`default`):
//!
//! - a pod that the full list has (by name) takes its row's `gpu_spec`,
//!   `qos`, arrival and run time;
//! - an extra pod takes `gpu_spec`, `qos` and run time from a row of the
//!   full list with the same GPU request, and its arrival from any row of
//!   the full list, each row chosen by a stable hash of the pod's name
//!   (so the choice is the same on every run and platform);
//! - a pod that the full list has but could not import (one that never
//!   ran) is skipped for the same reason;
//! - an extra pod whose GPU request no row of the full list has is
//!   skipped as [`SKIP_NO_TIME_SOURCE`].
//!
//! The published trace spans about 149 days on a cluster it fills to
//! about 2% (a replay of `default` never contends). `arrival_speedup`
//! divides every arrival time by a whole factor, leaving run times as
//! recorded: the same pods, arriving that many times more densely. Both
//! are synthetic completions of the trace, said so wherever their
//! results are quoted.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::*;

/// A row of a full list whose columns a time-less pod borrows.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Source {
    models: Vec<String>,
    qos: String,
    submit: Timestamp,
    duration_ms: u64,
}

/// Columns a `multigpu*` list lacks, from a full list of the trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceTimes {
    /// Where the full list came from, for messages.
    pub source: String,
    rows: Vec<Source>,
    by_name: HashMap<String, usize>,
    /// Rows by GPU request (milli-GPU), in file order.
    by_gpu: BTreeMap<u64, Vec<usize>>,
    /// Pods of the full list it could not import (never scheduled, ...),
    /// with the reason: the same pod in a time-less list is skipped so.
    skipped: HashMap<String, String>,
}

/// Skip reason of an extra pod whose GPU request no row of the time
/// source has.
pub const SKIP_NO_TIME_SOURCE: &str = "no row of the time source with this GPU request";

impl TraceTimes {
    /// Reads a full pod list (the 11 columns of [`POD_COLUMNS`]); rows it
    /// could not import are not sources.
    pub fn parse(text: &str, source: &str) -> Result<TraceTimes, OpenbError> {
        let full = POD_COLUMNS.join(",");
        let (header, rows) = read_csv(text, source, &full)?;
        if !header.fields.iter().eq(POD_COLUMNS) {
            return Err(OpenbError::Header {
                input: source.to_string(),
                line: header.line,
                expected: format!("`{full}` (a list with times, such as default)"),
                found: joined(&header.fields),
            });
        }
        let mut t = TraceTimes {
            source: source.to_string(),
            ..TraceTimes::default()
        };
        let mut seen = BTreeSet::new();
        for row in rows {
            let row = row?;
            let pod = match check_pod_row(&row.fields, true, &mut seen, None) {
                Ok(pod) => pod,
                Err(reason) => {
                    if let Some(name) = row.fields.get(0).filter(|n| !n.is_empty()) {
                        t.skipped.entry(name.to_string()).or_insert(reason);
                    }
                    continue;
                }
            };
            let i = t.rows.len();
            t.by_name.insert(pod.name.to_string(), i);
            t.by_gpu.entry(pod.requests.gpu).or_default().push(i);
            t.rows.push(Source {
                models: pod.models,
                qos: pod.qos.to_string(),
                submit: pod.submit,
                duration_ms: pod.duration_ms,
            });
        }
        if t.rows.is_empty() {
            return Err(OpenbError::Options {
                input: source.to_string(),
                problem: "the time source has no row with times".to_string(),
            });
        }
        Ok(t)
    }

    /// Rows of the time source.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it has no rows (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// `(models, qos, submit, duration)` for pod `name` requesting `gpu`
    /// milli-GPU (see the module documentation); `Err` is the skip reason.
    pub(super) fn lend(
        &self,
        name: &str,
        gpu: u64,
    ) -> Result<(Vec<String>, String, Timestamp, u64), String> {
        if let Some(&i) = self.by_name.get(name) {
            let s = &self.rows[i];
            return Ok((s.models.clone(), s.qos.clone(), s.submit, s.duration_ms));
        }
        if let Some(reason) = self.skipped.get(name) {
            return Err(reason.clone());
        }
        let same = self
            .by_gpu
            .get(&gpu)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| SKIP_NO_TIME_SOURCE.to_string())?;
        let pick = |salt: &str, n: usize| {
            (fnv1a64(format!("{salt}/{name}").as_bytes()) % n as u64) as usize
        };
        let shape = &self.rows[same[pick("shape", same.len())]];
        let arrival = &self.rows[pick("arrival", self.rows.len())];
        Ok((
            shape.models.clone(),
            shape.qos.clone(),
            arrival.submit,
            shape.duration_ms,
        ))
    }
}
