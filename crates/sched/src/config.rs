//! Typed scheduler configuration, validated at load.

use serde::{Deserialize, Serialize};

/// How a scorer ranks nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Prefer the fullest node that fits (keeps whole nodes free).
    Binpack,
    /// Prefer the emptiest node (spreads load).
    Spread,
}

/// One scorer: its strategy and its weight in the sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScorerConfig {
    pub strategy: Strategy,
    /// 0–100. Node score = Σ weight × scorer score (each scorer 0–1000).
    pub weight: u32,
}

/// Node scoring: GPU and CPU/memory are scored separately. Either may be
/// left out; it then keeps its default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ScoringConfig {
    pub gpu: ScorerConfig,
    pub cpu_memory: ScorerConfig,
}

impl Default for ScoringConfig {
    fn default() -> Self {
        ScoringConfig {
            gpu: ScorerConfig {
                strategy: Strategy::Binpack,
                weight: 10,
            },
            cpu_memory: ScorerConfig {
                strategy: Strategy::Binpack,
                weight: 1,
            },
        }
    }
}

/// Scheduler configuration (`kind: SchedulerConfig` file, or defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    pub scoring: ScoringConfig,
    /// A gang pending at least this long (seconds since submission) that
    /// still does not fit blocks later jobs *of its own leaf queue* for the
    /// rest of the cycle, so small jobs of the same team cannot starve it
    /// forever. `None` (the default) disables blocking: jobs behind a gang
    /// that does not fit are always tried (backfill).
    pub gang_starvation_seconds: Option<u64>,
}

/// A configuration value out of range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("config field {field}: {message}")]
pub struct ConfigError {
    pub field: &'static str,
    pub message: String,
}

/// Largest scorer weight accepted.
pub const MAX_WEIGHT: u32 = 100;

impl Config {
    /// Checks ranges that the types cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, s) in [
            ("scoring.gpu.weight", self.scoring.gpu),
            ("scoring.cpuMemory.weight", self.scoring.cpu_memory),
        ] {
            if s.weight > MAX_WEIGHT {
                return Err(ConfigError {
                    field,
                    message: format!("expected 0..={MAX_WEIGHT}, got {}", s.weight),
                });
            }
        }
        Ok(())
    }
}
