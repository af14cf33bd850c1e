//! How the simulator plays out the scheduler's evictions: the grace period
//! and the lost-work model.
//!
//! When a cycle's decisions evict a pod (reclaim or preemption), the pod
//! keeps its capacity and is marked `terminating` for the grace period,
//! then it is killed. A pod killed after running `e` ms of its current run
//! loses, under the lost-work model:
//!
//! - `restart`: everything, `lost = e`;
//! - `checkpoint: {every: I}`: the work since its last checkpoint,
//!   `lost = e mod I` (checkpoints are taken every `I` of run time, counted
//!   from the start of the current run).
//!
//! What was checkpointed, `saved = e − lost`, is not run again. The same
//! model applies to jobs killed by node failures. All arithmetic is in
//! integer milliseconds.
//!
//! ```yaml
//! # In a Workload or WorkloadGenerator document:
//! spec:
//!   preemption:
//!     graceSeconds: 30                 # default 30; seconds or a duration ("1m")
//!     lostWork: restart                # default; or {checkpoint: {every: 30m}}
//! ```
//!
//! Jobs and generator templates may set their own `lostWork`, and
//! `preemptible: false`.

use serde::{Deserialize, Serialize};

use crate::spec::{MAX_DURATION_MS, parse_duration_ms};

/// Default grace period between an eviction and the pod's removal.
pub const DEFAULT_GRACE_MS: u64 = 30_000;

/// What a killed run loses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LostWork {
    /// All work since the start of the run is lost.
    #[default]
    Restart,
    /// A checkpoint every `every_ms` of run time; the work since the last
    /// one is lost. `every_ms` is at least 1.
    #[serde(rename_all = "camelCase")]
    Checkpoint { every_ms: u64 },
}

/// The message for a lost-work value that cannot be read.
const LOST_WORK_SYNTAX: &str =
    "expected \"restart\" or \"checkpoint:<interval>\" (e.g. \"checkpoint:30m\")";

impl LostWork {
    /// Work lost (ms) when a run that has run `elapsed_ms` is killed.
    pub fn lost_ms(self, elapsed_ms: u64) -> u64 {
        match self {
            LostWork::Restart => elapsed_ms,
            LostWork::Checkpoint { every_ms } => elapsed_ms.checked_rem(every_ms).unwrap_or(0),
        }
    }

    /// Work kept by checkpoints (ms) when a run of `elapsed_ms` is killed.
    pub fn saved_ms(self, elapsed_ms: u64) -> u64 {
        elapsed_ms - self.lost_ms(elapsed_ms)
    }

    /// Parses the command-line form: `restart` or `checkpoint:<interval>`
    /// (an interval as in durations: `90`, `"15m"`, `"1.5h"`).
    pub fn parse_str(s: &str) -> Result<LostWork, String> {
        let t = s.trim();
        if t == "restart" {
            return Ok(LostWork::Restart);
        }
        match t.strip_prefix("checkpoint:") {
            Some(every) => Self::checkpoint(&serde_json::Value::String(every.trim().to_string())),
            None => Err(format!("{LOST_WORK_SYNTAX}, got {s:?}")),
        }
    }

    /// Parses the document form: `restart`, `{checkpoint: {every: 30m}}`,
    /// or the command-line string form. Errors come with the path below
    /// the value (e.g. `checkpoint.every`), possibly empty.
    pub fn parse_value(v: &serde_json::Value) -> Result<LostWork, (String, String)> {
        match v {
            serde_json::Value::String(s) => Self::parse_str(s).map_err(|e| (String::new(), e)),
            serde_json::Value::Object(m) => {
                let mut keys = m.keys();
                match (keys.next().map(String::as_str), keys.next()) {
                    (Some("restart"), None) => Ok(LostWork::Restart),
                    (Some("checkpoint"), None) => {
                        let every = match &m["checkpoint"] {
                            serde_json::Value::Object(c) => {
                                if let Some(k) = c.keys().find(|k| *k != "every") {
                                    return Err((
                                        "checkpoint".into(),
                                        format!("unknown field `{k}`, expected `every`"),
                                    ));
                                }
                                c.get("every").ok_or_else(|| {
                                    (
                                        "checkpoint".to_string(),
                                        "missing field `every`".to_string(),
                                    )
                                })?
                            }
                            other => {
                                return Err((
                                    "checkpoint".into(),
                                    format!("expected {{every: <interval>}}, got {other}"),
                                ));
                            }
                        };
                        Self::checkpoint(every).map_err(|e| ("checkpoint.every".into(), e))
                    }
                    _ => Err((
                        String::new(),
                        format!(
                            "expected restart or {{checkpoint: {{every: <interval>}}}}, got {v}"
                        ),
                    )),
                }
            }
            other => Err((
                String::new(),
                format!("expected restart or {{checkpoint: {{every: <interval>}}}}, got {other}"),
            )),
        }
    }

    fn checkpoint(every: &serde_json::Value) -> Result<LostWork, String> {
        let every_ms = parse_duration_ms(every)?;
        if every_ms == 0 {
            return Err("expected a positive checkpoint interval, got 0".into());
        }
        Ok(LostWork::Checkpoint { every_ms })
    }

    /// `restart` or `checkpoint`, for outputs.
    pub fn name(self) -> &'static str {
        match self {
            LostWork::Restart => "restart",
            LostWork::Checkpoint { .. } => "checkpoint",
        }
    }
}

/// The run's eviction model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionModel {
    /// Time from the eviction to the pod's removal (ms); it keeps its
    /// capacity meanwhile.
    pub grace_ms: u64,
    /// For jobs that do not set their own.
    pub lost_work: LostWork,
}

impl Default for EvictionModel {
    fn default() -> Self {
        EvictionModel {
            grace_ms: DEFAULT_GRACE_MS,
            lost_work: LostWork::Restart,
        }
    }
}

/// `spec.preemption` of a workload document: what it sets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreemptionSettings {
    pub grace_ms: Option<u64>,
    pub lost_work: Option<LostWork>,
}

impl PreemptionSettings {
    /// `base` with the settings given here.
    pub fn over(self, base: EvictionModel) -> EvictionModel {
        EvictionModel {
            grace_ms: self.grace_ms.unwrap_or(base.grace_ms),
            lost_work: self.lost_work.unwrap_or(base.lost_work),
        }
    }
}

/// Work (ms of the job's duration) still to do after a kill: a run of
/// `run_ms` that was doing `work_ms` of work kept `saved_ms` of run time by
/// checkpoints. With the slowdown model a run is longer than its work, so
/// saved run time converts back to work in proportion, rounded down:
/// `work − ⌊saved × work / run⌋` (just `work − saved` when `run = work`).
/// At least 1 ms remains.
pub fn work_after_kill(work_ms: u64, run_ms: u64, saved_ms: u64) -> u64 {
    if run_ms == 0 || saved_ms == 0 {
        return work_ms;
    }
    let done = (saved_ms.min(run_ms) as u128 * work_ms as u128 / run_ms as u128) as u64;
    work_ms.saturating_sub(done).clamp(1, MAX_DURATION_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lost_and_saved() {
        assert_eq!(LostWork::Restart.lost_ms(5_000_000), 5_000_000);
        assert_eq!(LostWork::Restart.saved_ms(5_000_000), 0);
        let c = LostWork::Checkpoint {
            every_ms: 1_800_000,
        };
        // 83 min run: checkpoints at 30 and 60 min; 23 min lost.
        assert_eq!(c.lost_ms(4_980_000), 1_380_000);
        assert_eq!(c.saved_ms(4_980_000), 3_600_000);
        assert_eq!(c.lost_ms(1_799_999), 1_799_999);
        assert_eq!(c.lost_ms(1_800_000), 0);
        assert_eq!(c.lost_ms(0), 0);
    }

    #[test]
    fn work_after_a_kill() {
        // No slowdown: work − saved.
        assert_eq!(work_after_kill(7_200_000, 7_200_000, 3_600_000), 3_600_000);
        assert_eq!(work_after_kill(7_200_000, 7_200_000, 0), 7_200_000);
        // 25% slowdown: 1 h of work runs 75 min; 30 min saved = 24 min of work.
        assert_eq!(work_after_kill(3_600_000, 4_500_000, 1_800_000), 2_160_000);
        // Never below 1 ms.
        assert_eq!(work_after_kill(10, 10, 10), 1);
    }

    #[test]
    fn parsing() {
        assert_eq!(LostWork::parse_str("restart"), Ok(LostWork::Restart));
        assert_eq!(
            LostWork::parse_str("checkpoint:30m"),
            Ok(LostWork::Checkpoint {
                every_ms: 1_800_000
            })
        );
        assert_eq!(
            LostWork::parse_str("resume"),
            Err(
                "expected \"restart\" or \"checkpoint:<interval>\" (e.g. \"checkpoint:30m\"), got \"resume\""
                    .into()
            )
        );
        assert_eq!(
            LostWork::parse_str("checkpoint:0"),
            Err("expected a positive checkpoint interval, got 0".into())
        );
        assert_eq!(
            LostWork::parse_value(&json!({"checkpoint": {"every": "1h"}})),
            Ok(LostWork::Checkpoint {
                every_ms: 3_600_000
            })
        );
        assert_eq!(
            LostWork::parse_value(&json!("restart")),
            Ok(LostWork::Restart)
        );
        assert_eq!(
            LostWork::parse_value(&json!({"checkpoint": {"every": "-5m"}})),
            Err((
                "checkpoint.every".into(),
                "expected a non-negative duration, got \"-5m\"".into()
            ))
        );
        assert_eq!(
            LostWork::parse_value(&json!({"checkpoint": {"each": "5m"}})),
            Err((
                "checkpoint".into(),
                "unknown field `each`, expected `every`".into()
            ))
        );
        assert_eq!(
            LostWork::parse_value(&json!(3)),
            Err((
                String::new(),
                "expected restart or {checkpoint: {every: <interval>}}, got 3".into()
            ))
        );
    }
}
