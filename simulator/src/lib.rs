//! Trainyard's trace-driven simulator.
//!
//! Runs the production scheduling core ([`trainyard_sched::schedule`]) on a
//! virtual clock: jobs arrive, cycles place them, tasks finish, nodes fail
//! and return. Everything is deterministic: the same inputs and seed give
//! byte-identical outputs. The library reads and writes text only; the
//! `trainyard simulate` command does the file I/O.

pub mod chart;
pub mod dra;
pub mod engine;
pub mod fgd;
pub mod fgd_report;
pub mod forecast;
pub mod job;
pub mod objects;
pub mod openb;
pub mod output;
pub mod preemption;
pub mod report;
pub mod result;
pub mod spec;
pub mod workload;

pub use engine::{Progress, ScheduleFn, SimInput, SimOptions, simulate, simulate_with};
pub use job::{SimJob, SimTask};
pub use preemption::{EvictionModel, LostWork};
pub use result::{
    ClusterSample, EvictionSample, JobRecord, JobState, JobTopology, LostGpu, PreemptionSummary,
    QueueSample, RunTopology, SimOutput, Stats, Summary, TopologySummary,
};
pub use spec::Slowdown;
