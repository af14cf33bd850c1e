//! The gRPC server: the Scheduler service, gRPC health checking
//! (`grpc.health.v1.Health`) and server reflection (`grpc.reflection.v1`,
//! and `v1alpha` for older clients), on a Unix socket and a TCP address
//! (loopback by default).
//!
//! [`routes`] builds every service in one place, behind the listener's
//! [`Guard`]: the Scheduler and reflection need a caller the guard lets
//! in; health does not (the kubelet's gRPC probes send no token, and it
//! tells only whether the scheduler serves). [`tcp_policy`] decides what
//! a TCP listener needs: off loopback, TLS (unless `--api-insecure`) and
//! bearer tokens.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use trainyard_serve::view::LiveView;

use crate::auth::Authorizer;
use crate::auth::guard::{Guard, Guarded};
use crate::pb::scheduler_server::SchedulerServer;
use crate::service::Api;
use crate::tls::{TlsError, TlsFiles};

/// Where the API listens; each `None` is off.
#[derive(Clone, Debug, Default)]
pub struct Listen {
    /// A Unix socket (created, and replaced when one is left over).
    pub socket: Option<PathBuf>,
    /// A TCP address.
    pub tcp: Option<SocketAddr>,
    /// How the TCP listener is secured.
    pub security: Security,
}

/// TLS and authentication of the TCP listener (the socket is trusted: its
/// mode, 0600, is its access control).
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// Serve TLS with this certificate and key.
    pub tls: Option<TlsFiles>,
    /// Allow a non-loopback address without TLS (`--api-insecure`):
    /// tokens are still required, and cross the network in clear text.
    pub insecure: bool,
    /// Require bearer tokens on loopback too (`--api-require-auth`).
    pub require_auth: bool,
    /// Authenticates tokens and judges permissions (TokenReview and
    /// SubjectAccessReview); needed when tokens are.
    pub authorizer: Option<Arc<dyn Authorizer>>,
}

/// What a TCP listener does, by [`tcp_policy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpMode {
    pub tls: bool,
    pub tokens: bool,
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
    #[error(
        "--api-listen {address} is not a loopback address, so the gRPC API needs TLS there: give --api-tls-cert and --api-tls-key (PEM files), or --api-insecure to serve without TLS behind something that encrypts (bearer tokens then cross the network in clear text)"
    )]
    NeedsTls { address: SocketAddr },
    #[error(
        "the gRPC API on {address} needs bearer tokens checked, but no authorizer was given (a bug: `trainyard serve` gives its Kubernetes client's)"
    )]
    NoAuthorizer { address: SocketAddr },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("the dashboard (/ui): {0}")]
    Ui(#[from] crate::json::JsonError),
}

/// What the TCP listener on `address` needs under `security`: off
/// loopback TLS (unless insecure is allowed) and tokens, always; on
/// loopback tokens only when required, TLS only when given.
pub fn tcp_policy(address: SocketAddr, security: &Security) -> Result<TcpMode, ServeError> {
    let loopback = address.ip().is_loopback();
    if !loopback && security.tls.is_none() && !security.insecure {
        return Err(ServeError::NeedsTls { address });
    }
    let tokens = !loopback || security.require_auth;
    if tokens && security.authorizer.is_none() {
        return Err(ServeError::NoAuthorizer { address });
    }
    Ok(TcpMode {
        tls: security.tls.is_some(),
        tokens,
    })
}

/// The service name health checks ask about for the Scheduler.
pub const SCHEDULER_SERVICE: &str = <SchedulerServer<Api> as NamedService>::NAME;

/// Every service of the API, the Scheduler (`api`) and reflection behind
/// `guard`, health answering from `health` (which [`follow_readiness`]
/// keeps up; one reporter serves every listener).
pub fn routes(api: Api, guard: Guard, health: &HealthReporter) -> Result<Routes, ServeError> {
    let health_service = tonic_health::pb::health_server::HealthServer::new(
        tonic_health::server::HealthService::from_health_reporter(health.clone()),
    );
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
    Ok(
        Routes::new(Guarded::new(SchedulerServer::new(api), guard.clone()))
            .add_service(health_service)
            .add_service(Guarded::new(v1, guard.clone()))
            .add_service(Guarded::new(v1alpha, guard)),
    )
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
/// is gone). Binds first, so an address in use, or a TCP listener its
/// policy refuses, fails the start.
pub async fn serve(
    view: Arc<LiveView>,
    listen: &Listen,
    shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, ServeError> {
    let (health, _) = tonic_health::server::health_reporter();
    // One API for every listener and the dashboard: one heavy call at a
    // time over all of them.
    let api = Api::new(view.clone());
    let mut tasks = Vec::new();
    let stop = |mut s: watch::Receiver<bool>| async move {
        let _ = s.wait_for(|stop| *stop).await;
    };
    if let Some(addr) = listen.tcp {
        // Checked before anything binds.
        let mode = tcp_policy(addr, &listen.security)?;
        let guard = match (&listen.security.authorizer, mode.tokens) {
            (Some(a), true) => Guard::Tokens(a.clone()),
            _ => Guard::Trusted,
        };
        let acceptor = match (&listen.security.tls, mode.tls) {
            (Some(files), true) => Some(crate::tls::acceptor(files)?),
            _ => None,
        };
        let listener =
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|error| ServeError::Bind {
                    address: addr.to_string(),
                    error,
                })?;
        let local = listener.local_addr().map_or(addr, |a| a);
        tracing::info!(address = %local, tls = mode.tls, tokens = mode.tokens, "serving the gRPC API");
        // The dashboard beside the services, behind the same guard; a
        // browser speaks HTTP/1.1 (gRPC clients still HTTP/2).
        let ui = crate::ui::router(api.clone(), view.clone(), guard.clone(), shutdown.clone())?;
        let routes = routes(api.clone(), guard, &health)?;
        let routes = Routes::from(routes.into_axum_router().merge(ui));
        let server = tonic::transport::Server::builder()
            .accept_http1(true)
            .add_routes(routes);
        tracing::info!(
            "the dashboard: {}://{local}/ui",
            if mode.tls { "https" } else { "http" }
        );
        let s = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            let done = match acceptor {
                Some(acceptor) => {
                    let incoming = crate::tls::incoming(listener, acceptor);
                    server.serve_with_incoming_shutdown(incoming, stop(s)).await
                }
                None => {
                    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                    server.serve_with_incoming_shutdown(incoming, stop(s)).await
                }
            };
            if let Err(e) = done {
                tracing::error!("the gRPC API on {local} stopped: {e}");
            }
        }));
    }
    if let Some(path) = &listen.socket {
        let listener = bind_socket(path).map_err(|error| ServeError::Bind {
            address: path.display().to_string(),
            error,
        })?;
        tracing::info!(socket = %path.display(), "serving the gRPC API");
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
        let routes = routes(api.clone(), Guard::Trusted, &health)?;
        let server = tonic::transport::Server::builder().add_routes(routes);
        let s = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = server.serve_with_incoming_shutdown(incoming, stop(s)).await {
                tracing::error!("the gRPC API on its socket stopped: {e}");
            }
        }));
    }
    let health = tokio::spawn(follow_readiness(view, health));
    let socket = listen.socket.clone();
    Ok(tokio::spawn(async move {
        stop(shutdown).await;
        health.abort();
        // Calls in progress get a moment to finish (the dashboard's
        // event streams end at `shutdown`; a WatchDecisions stream ends
        // with the service's view), then are cut.
        for mut t in tasks {
            if tokio::time::timeout(std::time::Duration::from_secs(2), &mut t)
                .await
                .is_err()
            {
                tracing::warn!("stopping: gRPC calls still open after 2 s are cut");
                t.abort();
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
