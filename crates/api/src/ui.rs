//! The dashboard (`/ui`): one page (HTML, script, stylesheet compiled
//! in) and its JSON under `/ui/api/`, served on the API's TCP listener
//! beside the gRPC services, behind the same [`Guard`]. Read-only.
//!
//! The JSON answers come from the same RPC handlers as the API ([`Api`],
//! called with the caller the guard found, so what a caller may see is
//! decided once), printed as proto3 JSON ([`crate::json`]); what no RPC
//! has is here: the queues' history, recent evictions and each job's
//! events ([`record`], kept from the published cycles), the GPU map
//! ([`gpus`]), and a server-sent stream of cycles. docs/ui.md lists
//! every endpoint.

pub mod gpus;
pub mod record;
mod views;

pub use views::print_jobs;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tonic::{Code, Request, Status};
use trainyard_serve::view::LiveView;

use crate::auth::Caller;
use crate::auth::guard::Guard;
use crate::json::Printer;
use crate::service::Api;

/// The page's files (`crates/api/ui/`), compiled in by the build script:
/// path under `/ui/`, content type, content.
const FILES: &[(&str, &str, &str)] = include!(concat!(env!("OUT_DIR"), "/ui_files.rs"));

/// What the dashboard's handlers share.
pub struct Ui {
    api: Api,
    view: Arc<LiveView>,
    guard: Guard,
    printer: Printer,
    record: Arc<Mutex<record::Record>>,
    /// The GPU holdings of the last cycle asked for (they take a cycle's
    /// set-up to compute): cycle number and holdings.
    holdings: Mutex<Option<(u64, Arc<Vec<trainyard_sched::NodeHoldings>>)>>,
    /// Every pending job's forecast, made at most every
    /// [`views::FORECAST_EVERY_MS`] of cycle time: (cycle time it was made on, answer).
    forecasts: tokio::sync::Mutex<Option<(i64, Arc<views::AllForecasts>)>>,
    /// The store's usage per hour, asked at most every few minutes:
    /// (cycle time it was asked at, answer).
    usage_cache: tokio::sync::Mutex<Option<(i64, serde_json::Value)>>,
    /// Turns true when the server stops: event streams end.
    stop: tokio::sync::watch::Receiver<bool>,
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ui").finish_non_exhaustive()
    }
}

/// The dashboard's routes over `api` (the API's own handlers, sharing
/// their one-heavy-call-at-a-time limit) and `view`, behind `guard`.
/// Starts the task that keeps the record of cycles; it, and every event
/// stream, ends when `stop` turns true.
pub fn router(
    api: Api,
    view: Arc<LiveView>,
    guard: Guard,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Router, crate::json::JsonError> {
    let record = Arc::new(Mutex::new(record::Record::default()));
    tokio::spawn(keep_record(view.cycles(), record.clone(), stop.clone()));
    let ui = Arc::new(Ui {
        api,
        view,
        guard,
        printer: Printer::new(false)?,
        record,
        holdings: Mutex::new(None),
        forecasts: tokio::sync::Mutex::new(None),
        usage_cache: tokio::sync::Mutex::new(None),
        stop,
    });
    let mut r = Router::new();
    for (path, kind, body) in FILES {
        let serve = get(move || async move { file(kind, body) });
        if *path == "index.html" {
            r = r.route("/ui", serve.clone()).route("/ui/", serve);
        } else {
            r = r.route(&format!("/ui/{path}"), serve);
        }
    }
    Ok(r.route("/ui/api/whoami", get(views::whoami))
        .route("/ui/api/queues", get(views::queues))
        .route("/ui/api/jobs", get(views::jobs))
        .route("/ui/api/forecasts", get(views::forecasts))
        .route("/ui/api/job", get(views::job))
        .route("/ui/api/forecast", get(views::forecast))
        .route("/ui/api/whatif", get(views::what_if))
        .route("/ui/api/gpus", get(views::gpus))
        .route("/ui/api/evictions", get(views::evictions))
        .route("/ui/api/stream", get(views::stream))
        .route("/ui/api/{*rest}", get(not_found))
        .with_state(ui))
}

/// Follows the published cycles into `record` until the view is gone or
/// `stop` turns true. A cycle's queue sample (a walk over every job) is
/// made outside the lock that the handlers read under.
async fn keep_record(
    mut cycles: tokio::sync::broadcast::Receiver<Arc<trainyard_serve::view::CycleView>>,
    record: Arc<Mutex<record::Record>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::sync::broadcast::error::RecvError;
    let lock = || match record.lock() {
        Ok(r) => r,
        // A panic while holding it left the record whole: every change
        // is made in one call.
        Err(poisoned) => poisoned.into_inner(),
    };
    loop {
        let next = tokio::select! {
            next = cycles.recv() => next,
            _ = stop.wait_for(|s| *s) => return,
        };
        match next {
            Ok(c) => {
                let due = lock().sample_due(&c);
                let sample = due.then(|| record::sample_of(&c));
                lock().take(&c, sample);
            }
            Err(RecvError::Lagged(n)) => {
                tracing::debug!("the dashboard's record missed {n} cycles");
            }
            Err(RecvError::Closed) => return,
        }
    }
}

fn file(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
                ),
            ),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        body,
    )
        .into_response()
}

async fn not_found(axum::extract::Path(rest): axum::extract::Path<String>) -> Response {
    error(Status::not_found(format!(
        "/ui/api/{rest}: no such endpoint; see docs/ui.md for the list"
    )))
}

/// A refusal or failure as the dashboard reads it: `{"error", "code"}`
/// with the HTTP status of the gRPC code.
pub fn error(s: Status) -> Response {
    let (http, code) = match s.code() {
        Code::Unauthenticated => (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED"),
        Code::PermissionDenied => (StatusCode::FORBIDDEN, "PERMISSION_DENIED"),
        Code::NotFound => (StatusCode::NOT_FOUND, "NOT_FOUND"),
        Code::InvalidArgument => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
        Code::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
    };
    let body = serde_json::json!({"error": s.message(), "code": code});
    let mut r = (http, json_body(body.to_string())).into_response();
    if http == StatusCode::UNAUTHORIZED {
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// A cycle as the dashboard's JSON names it.
pub fn cycle_json(c: &crate::pb::Cycle) -> serde_json::Value {
    serde_json::json!({"number": c.number, "timeMs": c.time_ms})
}

/// `v` as a JSON response.
pub fn json(v: &serde_json::Value) -> Response {
    json_text(v.to_string())
}

/// JSON `text` as a response.
pub fn json_text(text: String) -> Response {
    (StatusCode::OK, json_body(text)).into_response()
}

fn json_body(text: String) -> ([(header::HeaderName, HeaderValue); 2], String) {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        text,
    )
}

impl Ui {
    /// The caller of a request with `headers`, as the gRPC listener's
    /// guard lets it in. A trusted listener (loopback without tokens)
    /// answers only requests addressed to a loopback name, and none a
    /// browser marks cross-site: a page elsewhere whose name was made to
    /// point at 127.0.0.1 (DNS rebinding) reads nothing.
    async fn caller(&self, headers: &HeaderMap) -> Result<Caller, Status> {
        let caller = self.guard.caller(headers).await?;
        if let Caller::Trusted = caller {
            local_only(headers)?;
        }
        Ok(caller)
    }

    /// `m` as a request of `caller`, for the RPC handlers.
    fn request<T>(caller: &Caller, m: T) -> Request<T> {
        let mut r = Request::new(m);
        r.extensions_mut().insert(caller.clone());
        r
    }
}

/// Refuses a request to a trusted listener that names a host other than
/// a loopback one (`localhost`, `127.x.x.x`, `[::1]`, any port), or that a
/// browser says comes from another site.
fn local_only(headers: &HeaderMap) -> Result<(), Status> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    let loopback = name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    // HTTP/2 clients send `:authority`, which hyper gives as the URI's,
    // not a Host header: those are not browsers on plain HTTP.
    if !loopback && !host.is_empty() {
        return Err(Status::permission_denied(format!(
            "this listener trusts local callers only; it answers requests for localhost or 127.0.0.1, not for {host} (open the dashboard at http://127.0.0.1:PORT/ui, or expose the API with tokens: docs/grpc.md)"
        )));
    }
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
    {
        return Err(Status::permission_denied(
            "this listener trusts local callers only, and this request came from another site",
        ));
    }
    Ok(())
}

/// The state handlers receive.
type UiState = State<Arc<Ui>>;
