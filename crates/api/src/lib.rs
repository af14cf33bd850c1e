//! Trainyard's gRPC API, `trainyard.v1alpha1.Scheduler`, at the I/O edge:
//! it reads the running service's live view
//! ([`trainyard_serve::view::LiveView`]: the latest cycle's snapshot,
//! decisions and config, the watched objects, readiness) and answers from
//! what the core decided, or by running the core on a copy
//! (`WhatIf`). It never changes the service or the cluster.
//!
//! - [`convert`]: the scheduler's values as messages, one function per
//!   message;
//! - [`explain`]: a pending reason grouped by cause, its breakdown over
//!   nodes, what would have to change;
//! - [`whatif`]: the core on a copy of the snapshot;
//! - [`forecast`]: the simulator's forecast of one job's start;
//! - [`snapshot`]: the watched objects in the format `trainyard schedule`
//!   reads;
//! - [`service`]: the RPCs; [`server`]: the server (health, reflection,
//!   the Unix socket and loopback listeners), built in one function;
//! - [`auth`]: who calls and what they may see (bearer tokens through
//!   TokenReview, permissions through SubjectAccessReview) when the API
//!   is exposed; [`tls`]: its TLS (rustls);
//! - [`ui`]: the dashboard at `/ui` on the TCP listener, its JSON from
//!   the same handlers; [`json`]: messages as proto3 JSON.

pub mod auth;
pub mod convert;
pub mod explain;
pub mod forecast;
pub mod json;
pub mod server;
pub mod service;
pub mod snapshot;
pub mod tls;
pub mod ui;
pub mod whatif;

/// The generated messages, server and client.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod pb {
    tonic::include_proto!("trainyard.v1alpha1");
}

/// The encoded file descriptor set of the protos, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/trainyard_descriptor.bin"));

/// Why a call was refused; each becomes its gRPC status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No cycle ran yet (or this replica does not lead).
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
}

impl ApiError {
    /// Job `namespace/name` is not in `snapshot`: says so, with the
    /// names that come closest.
    pub fn job_not_found(
        snapshot: &trainyard_model::Snapshot,
        namespace: &str,
        name: &str,
    ) -> ApiError {
        let near: Vec<&str> = snapshot
            .jobs
            .iter()
            .map(|j| j.id.as_str())
            .filter(|id| {
                let (ns, n) = id.split_once('/').unwrap_or(("", id));
                (ns == namespace && (n.contains(name) || name.contains(n)))
                    || (!name.is_empty() && n == name)
            })
            .take(3)
            .collect();
        let hint = if near.is_empty() {
            String::new()
        } else {
            format!("; did you mean {}?", near.join(", "))
        };
        ApiError::NotFound(format!(
            "no job {namespace}/{name} in the scheduler's latest cycle{hint}"
        ))
    }
}

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> tonic::Status {
        match e {
            ApiError::Unavailable(m) => tonic::Status::unavailable(m),
            ApiError::NotFound(m) => tonic::Status::not_found(m),
            ApiError::Invalid(m) => tonic::Status::invalid_argument(m),
        }
    }
}
