//! The gRPC server: the Scheduler service, gRPC health checking
//! (`grpc.health.v1.Health`) and server reflection (`grpc.reflection.v1`,
//! and `v1alpha` for older clients), on a Unix socket and a TCP address
//! (loopback by default).
//!
//! [`routes`] builds every service in one place: authentication and
//! authorization (a later part) are interceptors added there.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use trainyard_serve::view::LiveView;

use crate::pb::scheduler_server::SchedulerServer;
use crate::service::Api;

/// Where the API listens; each `None` is off.
#[derive(Clone, Debug, Default)]
pub struct Listen {
    /// A Unix socket (created, and replaced when one is left over).
    pub socket: Option<PathBuf>,
    /// A TCP address.
    pub tcp: Option<SocketAddr>,
}

/// The API could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("serving the gRPC API on {address} (--api-socket, --api-listen): {error}")]
    Bind {
        address: String,
        error: std::io::Error,
    },
    #[error("building the reflection service: {0}")]
    Reflection(String),
}

/// The service name health checks ask about for the Scheduler.
pub const SCHEDULER_SERVICE: &str = <SchedulerServer<Api> as NamedService>::NAME;

/// Every service of the API over `view`, and the health reporter that
/// [`follow_readiness`] keeps up.
pub fn routes(view: Arc<LiveView>) -> Result<(Routes, HealthReporter), ServeError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    let reflection = |b: tonic_reflection::server::Builder<'static>| {
        b.register_encoded_file_descriptor_set(crate::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let v1 = reflection(tonic_reflection::server::Builder::configure())
        .build_v1()
        .map_err(|e| ServeError::Reflection(e.to_string()))?;
    let v1alpha = reflection(tonic_reflection::server::Builder::configure())
        .build_v1alpha()
        .map_err(|e| ServeError::Reflection(e.to_string()))?;
    let routes = Routes::new(SchedulerServer::new(Api::new(view)))
        .add_service(health_service)
        .add_service(v1)
        .add_service(v1alpha);
    Ok((routes, health))
}

/// Health follows the view: the whole server (`""`) serves once every
/// watch listed (as `/readyz`); the Scheduler once this replica leads
/// and ran a cycle. Returns when the view's senders are gone.
pub async fn follow_readiness(view: Arc<LiveView>, health: HealthReporter) {
    let mut ready = view.readiness();
    let mut latest = view.latest();
    loop {
        let r = *ready.borrow_and_update();
        let cycled = latest.borrow_and_update().is_some();
        let status = |on: bool| {
            if on {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            }
        };
        health.set_service_status("", status(r.synced)).await;
        health
            .set_service_status(SCHEDULER_SERVICE, status(r.synced && r.leader && cycled))
            .await;
        tokio::select! {
            changed = ready.changed() => if changed.is_err() { return },
            changed = latest.changed() => if changed.is_err() { return },
        }
    }
}

/// Serves the API on `listen` until `shutdown` turns true (or its sender
/// is gone). Binds first, so an address in use fails the start.
pub async fn serve(
    view: Arc<LiveView>,
    listen: &Listen,
    shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, ServeError> {
    let (routes, health) = routes(view.clone())?;
    let mut tasks = Vec::new();
    let stop = |mut s: watch::Receiver<bool>| async move {
        let _ = s.wait_for(|stop| *stop).await;
    };
    if let Some(path) = &listen.socket {
        let listener = bind_socket(path).map_err(|error| ServeError::Bind {
            address: path.display().to_string(),
            error,
        })?;
        tracing::info!(socket = %path.display(), "serving the gRPC API");
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
        let server = tonic::transport::Server::builder().add_routes(routes.clone());
        let s = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = server.serve_with_incoming_shutdown(incoming, stop(s)).await {
                tracing::error!("the gRPC API on its socket stopped: {e}");
            }
        }));
    }
    if let Some(addr) = listen.tcp {
        let listener =
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|error| ServeError::Bind {
                    address: addr.to_string(),
                    error,
                })?;
        let local = listener.local_addr().map_or(addr, |a| a);
        tracing::info!(address = %local, "serving the gRPC API");
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let server = tonic::transport::Server::builder().add_routes(routes);
        let s = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = server.serve_with_incoming_shutdown(incoming, stop(s)).await {
                tracing::error!("the gRPC API on {local} stopped: {e}");
            }
        }));
    }
    let health = tokio::spawn(follow_readiness(view, health));
    let socket = listen.socket.clone();
    Ok(tokio::spawn(async move {
        stop(shutdown).await;
        health.abort();
        // Calls in progress get a moment to finish (a WatchDecisions
        // stream ends with the service's view).
        for t in tasks {
            if tokio::time::timeout(std::time::Duration::from_secs(2), t)
                .await
                .is_err()
            {
                tracing::warn!("stopping: gRPC calls still open after 2 s are cut");
            }
        }
        if let Some(p) = socket {
            let _ = std::fs::remove_file(p);
        }
    }))
}

/// A Unix socket at `path`, replacing a socket left there by a process
/// gone (never one still answering, nor another kind of file), readable
/// and writable by this user only.
fn bind_socket(path: &std::path::Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_socket()
    {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another process serves on this socket",
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}
