//! Benchmarks of Trainyard's scheduling core.
//!
//! Two kinds, over the same seeded inputs ([`workloads`]):
//!
//! - `trainyard-bench` (src/main.rs): wall-clock timing of a release build,
//!   median of N runs, with the input and the machine's load printed;
//!   `--scaling` runs a series of cluster sizes and fits the exponent.
//! - `cargo bench -p trainyard-bench --bench instructions`: instruction
//!   counts under valgrind (gungraun), which the machine's load does not
//!   distort, checked against a committed baseline (see
//!   docs/benchmarks.md).

pub mod machine;
pub mod workloads;
