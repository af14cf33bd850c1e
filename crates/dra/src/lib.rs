//! DRA device selectors (`resource.k8s.io/v1` `CELDeviceSelector`):
//! compile and evaluate their CEL expressions against devices, and
//! compute which devices each selector set accepts, per node, as the
//! [`DeviceMask`](trainyard_model::dra::DeviceMask)s the core reads.
//!
//! The CEL environment is the one Kubernetes documents for DRA:
//!
//! - `device.driver` (string), `device.allowMultipleAllocations` (bool);
//! - `device.attributes["<domain>"].<name>`: int, bool, string, or a
//!   semantic version (the `semver` type of the Kubernetes library, so
//!   `isGreaterThan`, `compareTo` and `== semver("1.2.3")` work);
//! - `device.capacity["<domain>"].<name>`: a Kubernetes quantity
//!   (`compareTo`, `isGreaterThan`, `asInteger`, ...);
//! - an unknown domain reads as an empty map, a missing name in it is an
//!   evaluation error (`no such key`); `has(...)`, `in` and the optional
//!   syntax (`[?...]`, `.?name`, `orValue`) test for presence;
//! - `cel.bind(name, init, body)`;
//! - the Kubernetes string, list, quantity and semver libraries.
//!
//! Limits: an expression longer than [`MAX_EXPRESSION_LEN`] bytes is
//! refused, as is one whose static cost estimate exceeds [`MAX_COST`];
//! evaluation runs on a budget of [`MAX_COST`] steps (see [`cost`]).
//!
//! Rule: pure, no I/O; depends on the model only.

pub mod cost;
mod env;
mod error;
mod matches;
mod selector;

pub use env::{DeviceInput, Evaluator};
pub use error::SelectorError;
pub use matches::{CompiledSet, MatchCache, NodeMatch, assemble, compute_matches, matches_on_node};
pub use selector::Selector;

/// The longest expression accepted, in bytes (Kubernetes:
/// `CELSelectorExpressionMaxLength`, 10 Ki).
pub const MAX_EXPRESSION_LEN: usize = 10 * 1024;

/// The cost budget of one expression: the static estimate may not exceed
/// it, and evaluation on one device stops when it is spent (the figure
/// of Kubernetes' `CELSelectorExpressionMaxCost`; the units are ours,
/// see [`cost`]).
pub const MAX_COST: u64 = 1_000_000;
