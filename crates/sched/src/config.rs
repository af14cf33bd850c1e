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

/// The GPU placement policy: ranks nodes for a pod and picks its devices.
/// See `docs/gpu-sharing.md` for each one's exact rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GpuStrategy {
    /// Fullest node first (keeps whole nodes free).
    Binpack,
    /// Emptiest node first.
    Spread,
    /// Uniformly random feasible node (seeded; FGD paper's 01-Random).
    Random,
    /// FGD paper's 02-DotProd.
    DotProd,
    /// FGD paper's 03-GpuClustering.
    Clustering,
    /// FGD paper's 04-GpuPacking.
    Packing,
    /// FGD paper's 05-BestFit.
    BestFit,
    /// Fragmentation Gradient Descent (FGD paper's 06-FGD).
    Fgd,
    /// Trainyard's own: fragmentation-aware with look-ahead; the default.
    Trainyard,
}

impl GpuStrategy {
    pub const ALL: [GpuStrategy; 9] = [
        GpuStrategy::Binpack,
        GpuStrategy::Spread,
        GpuStrategy::Random,
        GpuStrategy::DotProd,
        GpuStrategy::Clustering,
        GpuStrategy::Packing,
        GpuStrategy::BestFit,
        GpuStrategy::Fgd,
        GpuStrategy::Trainyard,
    ];

    /// The name used in config files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuStrategy::Binpack => "binpack",
            GpuStrategy::Spread => "spread",
            GpuStrategy::Random => "random",
            GpuStrategy::DotProd => "dotProd",
            GpuStrategy::Clustering => "clustering",
            GpuStrategy::Packing => "packing",
            GpuStrategy::BestFit => "bestFit",
            GpuStrategy::Fgd => "fgd",
            GpuStrategy::Trainyard => "trainyard",
        }
    }

    /// Parses a name as written in config (case-insensitive).
    pub fn parse(s: &str) -> Option<GpuStrategy> {
        GpuStrategy::ALL
            .into_iter()
            .find(|g| g.as_str().eq_ignore_ascii_case(s))
    }

    /// Whether the policy measures fragmentation against typical pods.
    pub fn uses_typical_pods(self) -> bool {
        matches!(self, GpuStrategy::Fgd | GpuStrategy::Trainyard)
    }
}

/// The GPU policy and its weight in the node score.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuScorerConfig {
    pub strategy: GpuStrategy,
    /// 0–100. Node score = Σ weight × scorer score (each scorer 0–1000).
    #[serde(deserialize_with = "weight")]
    pub weight: u32,
}

/// One class of pod in a configured typical mix (FGD, Trainyard policy).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypicalPodConfig {
    /// CPU request in millicores.
    pub cpu_milli: u64,
    /// Milli-GPU per device: 0 (CPU-only), 1..=999 (shared), 1000 (whole).
    #[serde(default)]
    pub gpu_milli: u16,
    /// Whole devices (with `gpuMilli: 1000`); 1 for shared pods.
    #[serde(default)]
    pub gpus: u32,
    /// Allowed GPU models; empty = any.
    #[serde(default)]
    pub models: Vec<String>,
    /// Relative frequency.
    pub count: u64,
}

/// Where the typical pod mix comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TypicalPodsConfig {
    /// Explicit classes. Empty (the default): derived each cycle from the
    /// tasks in the snapshot, running and pending.
    pub pods: Vec<TypicalPodConfig>,
    /// Keep the most frequent classes until they cover this percentage of
    /// pods (1–100).
    #[serde(deserialize_with = "percent")]
    pub coverage_percent: u32,
}

impl Default for TypicalPodsConfig {
    fn default() -> Self {
        TypicalPodsConfig {
            pods: Vec::new(),
            coverage_percent: crate::fragmentation::DEFAULT_COVERAGE_PERCENT,
        }
    }
}

/// One scorer: its strategy and its weight in the sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScorerConfig {
    pub strategy: Strategy,
    /// 0–100. Node score = Σ weight × scorer score (each scorer 0–1000).
    #[serde(deserialize_with = "weight")]
    pub weight: u32,
}

/// Node scoring: the GPU policy and CPU/memory are scored separately.
/// Any field may be left out; it then keeps its default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ScoringConfig {
    pub gpu: GpuScorerConfig,
    pub cpu_memory: ScorerConfig,
    /// The typical pod mix for `fgd` and `trainyard`.
    pub typical_pods: TypicalPodsConfig,
    /// Seed of the `random` policy.
    pub random_seed: u64,
}

impl Default for ScoringConfig {
    fn default() -> Self {
        ScoringConfig {
            gpu: GpuScorerConfig {
                strategy: GpuStrategy::Binpack,
                weight: 10,
            },
            cpu_memory: ScorerConfig {
                strategy: Strategy::Binpack,
                weight: 1,
            },
            typical_pods: TypicalPodsConfig::default(),
            random_seed: 0,
        }
    }
}

/// Scheduler configuration (`kind: SchedulerConfig` file, or defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    pub scoring: ScoringConfig,
    /// Reservations for starving gangs and conservative backfill.
    pub reservations: ReservationConfig,
    /// `gangStarvationSeconds` was replaced by `reservations`: reading it
    /// fails with the migration (docs/scheduling.md, section 2).
    #[serde(rename = "gangStarvationSeconds", skip_serializing)]
    pub replaced_gang_starvation_seconds: Replaced,
    /// How gangs use the cluster's network topology (when it has one).
    pub topology: TopologyConfig,
    /// Reclaim across queues and preemption inside a queue.
    pub preemption: PreemptionConfig,
    /// How past usage weighs in the fair share.
    pub fair_share: FairShareConfig,
    /// Moving running jobs so that a gang fits scattered free room.
    pub consolidation: ConsolidationConfig,
}

/// `consolidation:` in the scheduler config (docs/consolidation.md).
///
/// A gang that fits the free capacity in total but not on the nodes may
/// have running jobs moved out of its way: each moved job is evicted and
/// placed whole elsewhere in the same cycle (its replacement pods are
/// held that room), so no queue's allocation drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ConsolidationConfig {
    pub enabled: bool,
    /// Jobs moved per cycle at most, over every gang helped.
    pub max_moved_jobs: u32,
    /// Gangs helped per cycle at most.
    pub max_gangs: u32,
    /// A job moved is not moved again for this long (seconds).
    pub no_move_seconds: u64,
    /// Candidate node sets tried per cycle at most, over every gang (each
    /// is one placement of the gang and of every job it would move);
    /// gangs of a shape that found no plan are not tried again.
    pub max_attempts: u32,
}

impl Default for ConsolidationConfig {
    fn default() -> Self {
        ConsolidationConfig {
            enabled: false,
            max_moved_jobs: 4,
            max_gangs: 1,
            no_move_seconds: 3_600,
            max_attempts: 32,
        }
    }
}

/// `reservations:` in the scheduler config (docs/scheduling.md, section 2).
///
/// A gang that has waited `starvingAfterSeconds` and still does not fit
/// gets a reservation: the earliest time at which it could start, and the
/// nodes, found by letting running jobs end at their walltimes and placing
/// it again. From then on, a later job may use those nodes only if its own
/// walltime ends before that time (conservative backfill, as Slurm's
/// `sched/backfill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ReservationConfig {
    /// Reservations made per cycle at most, for the gangs the walk meets
    /// first (its highest-ranked). 0 turns reservations off.
    #[serde(deserialize_with = "max_gangs")]
    pub max_gangs: u32,
    /// Seconds a gang must have waited (since submission) before it gets a
    /// reservation. 0: from its first failed try.
    pub starving_after_seconds: u64,
    /// Where a running job has no walltime (declared, or its queue's
    /// default or maximum), or runs past it, its end is estimated from the
    /// runtimes its leaf queue's jobs were observed to run. `None`: such a
    /// job is never expected to end. Only the projection of running jobs'
    /// ends reads it: a job without a walltime still never takes held
    /// room (only a held node's room the reservation leaves over). On by
    /// default (`runtimeEstimate: null` turns it off).
    pub runtime_estimate: Option<RuntimeEstimateConfig>,
}

/// `reservations.runtimeEstimate:` in the scheduler config
/// (docs/scheduling.md, section 2).
///
/// A running job with no walltime that has run `e` seconds is expected to
/// run, in all, the `percentile` of the runtimes longer than `e` among the
/// last `samples` jobs of its leaf queue that ended on their own (not
/// evicted by the scheduler). With fewer than `minSamples` runtimes, or
/// none longer than `e`, its end stays unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RuntimeEstimateConfig {
    /// Runtimes kept per leaf queue, the latest (1 to 10,000).
    #[serde(deserialize_with = "estimate_samples")]
    pub samples: u32,
    /// Runtimes a queue needs before its jobs' ends are estimated (1 to
    /// `samples`).
    #[serde(deserialize_with = "estimate_samples")]
    pub min_samples: u32,
    /// Which percentile of the longer runtimes (1 to 100; nearest rank).
    #[serde(deserialize_with = "estimate_percentile")]
    pub percentile: u8,
}

impl Default for RuntimeEstimateConfig {
    fn default() -> Self {
        RuntimeEstimateConfig {
            samples: 100,
            min_samples: 10,
            percentile: 90,
        }
    }
}

/// Most runtimes kept per queue accepted in config.
pub const MAX_RUNTIME_SAMPLES: u32 = 10_000;

fn estimate_samples<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1, MAX_RUNTIME_SAMPLES)
}

fn estimate_percentile<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    // In range, so the cast cannot truncate.
    in_range(d, 1, 100).map(|p| p as u8)
}

impl ReservationConfig {
    /// The runtime estimate in force: none when reservations are off.
    pub fn estimate(&self) -> Option<RuntimeEstimateConfig> {
        self.runtime_estimate.filter(|_| self.max_gangs > 0)
    }
}

impl Default for ReservationConfig {
    fn default() -> Self {
        ReservationConfig {
            max_gangs: 8,
            starving_after_seconds: 0,
            runtime_estimate: Some(RuntimeEstimateConfig::default()),
        }
    }
}

/// Most reservations per cycle accepted in config.
pub const MAX_RESERVATIONS: u32 = 1000;

fn max_gangs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 0, MAX_RESERVATIONS)
}

/// A config key that was replaced: it is never written, and reading any
/// value of it fails with what to write instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replaced;

impl<'de> Deserialize<'de> for Replaced {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "replaced by `reservations` (docs/scheduling.md, section 2): \
             write `reservations: {starvingAfterSeconds: N}` instead, with the same N; \
             a starving gang now reserves nodes and lets only jobs that end in time use them, \
             instead of blocking its queue",
        ))
    }
}

/// `fairShare:` in the scheduler config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FairShareConfig {
    /// Time-decayed fair share: when set, usage counts for half as much
    /// after this many seconds, and over-quota capacity is divided by
    /// weight times `2^(-U/S)` (U: the queue's share of its siblings'
    /// decayed usage, S: its share of their weights), so a queue that used
    /// more than its entitlement lately yields to one that waited. `None`
    /// (the default): weights alone, as before (docs/fair-share.md).
    pub usage_half_life_seconds: Option<u64>,
}

/// `preemption:` in the scheduler config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PreemptionConfig {
    /// A pending job of a queue below its fair share may evict jobs of
    /// queues above theirs (compared where their paths meet).
    pub reclaim: bool,
    /// A pending job may evict strictly lower-priority jobs of its own
    /// leaf queue.
    pub preempt: bool,
    /// Capacity freed for a preemptor stays reserved for it this long
    /// (seconds) while its victims terminate.
    pub nomination_timeout_seconds: u64,
    /// At most this many jobs are evicted for one preemptor; a gang that
    /// would need more waits instead.
    pub max_victim_jobs: u32,
    /// A pending job evicts nobody until it has waited this long (seconds
    /// since submission), unless its PodGroup or queue says otherwise, so
    /// a cluster autoscaler can add nodes first. 0: no delay.
    pub delay_seconds: u64,
}

impl Default for PreemptionConfig {
    fn default() -> Self {
        PreemptionConfig {
            reclaim: true,
            preempt: true,
            nomination_timeout_seconds: 300,
            max_victim_jobs: 512,
            delay_seconds: 0,
        }
    }
}

/// Whether gang placement searches the topology.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TopologyPlacement {
    /// Tightest domain that fits, rail-aligned GPUs, neighbouring ranks
    /// together, required/preferred levels honoured (the default).
    #[default]
    Aware,
    /// Ignore the topology entirely, constraints included: plain node
    /// scoring. For comparisons only.
    Blind,
}

/// `topology:` in the scheduler config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TopologyConfig {
    pub placement: TopologyPlacement,
}

/// A whole number in `min..=max`; the error says that range (not the
/// range of the Rust type), so the file's reader sees the bound that holds.
fn in_range<'de, D: serde::Deserializer<'de>>(d: D, min: u32, max: u32) -> Result<u32, D::Error> {
    struct V(u32, u32);
    impl serde::de::Visitor<'_> for V {
        type Value = u32;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "a whole number from {} to {}", self.0, self.1)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u32, E> {
            u32::try_from(v)
                .ok()
                .filter(|v| (self.0..=self.1).contains(v))
                .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u32, E> {
            match u64::try_from(v) {
                Ok(u) => self.visit_u64(u),
                Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(v), &self)),
            }
        }
    }
    d.deserialize_u64(V(min, max))
}

/// A scorer weight, 0..=[`MAX_WEIGHT`].
fn weight<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 0, MAX_WEIGHT)
}

/// A percentage, 1..=100.
fn percent<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1, 100)
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
        if let Some(h) = self.fair_share.usage_half_life_seconds
            && !(60..=366 * 86_400).contains(&h)
        {
            return Err(ConfigError {
                field: "fairShare.usageHalfLifeSeconds",
                message: format!(
                    "expected seconds from 60 (a minute) to 31622400 (a year), found {h}"
                ),
            });
        }
        if let Some(e) = self.reservations.runtime_estimate
            && e.min_samples > e.samples
        {
            return Err(ConfigError {
                field: "reservations.runtimeEstimate.minSamples",
                message: format!(
                    "expected at most `samples` ({}), found {}",
                    e.samples, e.min_samples
                ),
            });
        }
        for (field, weight) in [
            ("scoring.gpu.weight", self.scoring.gpu.weight),
            ("scoring.cpuMemory.weight", self.scoring.cpu_memory.weight),
        ] {
            if weight > MAX_WEIGHT {
                return Err(ConfigError {
                    field,
                    message: format!(
                        "expected a whole number from 0 to {MAX_WEIGHT}, found {weight}"
                    ),
                });
            }
        }
        let tp = &self.scoring.typical_pods;
        if !(1..=100).contains(&tp.coverage_percent) {
            return Err(ConfigError {
                field: "scoring.typicalPods.coveragePercent",
                message: format!(
                    "expected a whole number from 1 to 100, found {}",
                    tp.coverage_percent
                ),
            });
        }
        for (i, p) in tp.pods.iter().enumerate() {
            let bad = |message: String| ConfigError {
                field: "scoring.typicalPods.pods",
                message: format!("entry {i}: {message}"),
            };
            if p.gpu_milli > 1000 {
                return Err(bad(format!(
                    "gpuMilli is per device, expected a whole number from 0 to 1000, found {}",
                    p.gpu_milli
                )));
            }
            if p.gpu_milli > 0 && p.gpu_milli < 1000 && p.gpus > 1 {
                return Err(bad(format!(
                    "a shared pod ({} milli-GPU) uses one device, found gpus: {}",
                    p.gpu_milli, p.gpus
                )));
            }
            if p.count == 0 {
                return Err(bad(
                    "count: expected a whole number of at least 1, found 0".to_string()
                ));
            }
        }
        Ok(())
    }
}
