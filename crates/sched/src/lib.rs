//! Trainyard's scheduling core.
//!
//! One entry point, [`schedule`]: a [`Snapshot`](trainyard_model::Snapshot),
//! a [`Config`] and the current time in, [`Decisions`] out. The core is pure:
//! no I/O, no clock, no global state, no async runtime. The simulator and the
//! Kubernetes adapter both call [`schedule`].

pub mod allocate;
pub mod config;
pub mod decisions;
pub mod dra;
pub mod fairshare;
pub mod fragmentation;
pub mod hash;
pub mod placer;
pub mod plugins;
pub mod podrules;
pub mod policy;
pub mod scoring;
pub mod state;

pub use allocate::holdings::{DeviceHolders, NodeHoldings, free_devices_for, holdings};
pub use allocate::schedule;
pub use config::{
    Config, ConfigError, ConsolidationConfig, GpuScorerConfig, GpuStrategy, ReservationConfig,
    ScorerConfig, ScoringConfig, Strategy, TopologyConfig, TopologyPlacement, TypicalPodConfig,
    TypicalPodsConfig,
};
pub use decisions::{
    Bind, ClaimDecision, CycleStats, Decisions, Eviction, EvictionKind, FilterReason,
    GangPlacement, Move, MovedPod, NominationDecision, PendingJob, PendingReason, QueueReport,
    Reservation, Withdrawal,
};
