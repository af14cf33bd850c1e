//! `/metrics`, `/healthz` and `/readyz` over plain HTTP/1.1
//! (`service.httpAddress`).
//!
//! - `/metrics`: the Prometheus exposition ([`crate::metrics`]): the
//!   OpenMetrics text format when the scraper's `Accept` asks for
//!   `application/openmetrics-text`, else Prometheus' text format 0.0.4.
//! - `/healthz` (liveness): 200 while the cycle loop turns (its heartbeat
//!   is younger than [`Health::stale_after`]), else 503: a stuck loop is
//!   restarted by the kubelet.
//! - `/readyz` (readiness): 200 once every watcher finished its first list
//!   and this replica's role (leader or standby) is known; standbys are
//!   ready too (their caches are warm). Else 503 with what is missing.
//! - `/usage?from=S&to=S&by=queue|namespace|both|job`: the accounting of
//!   this replica's store, with the period still open and the running
//!   jobs, as JSON (`trainyard usage --server`), asked of
//!   the store's thread, since the running service holds the store locked.
//!   `from` and `to` are Unix seconds (default: the last 7 days); 404 when
//!   the service keeps no store.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::time::{Duration, Instant};

use crate::leader::Role;
use crate::metrics::Metrics;
use crate::persist::UsageBy;

/// What the probes read; the cycle loop and the elector write it.
#[derive(Debug)]
pub struct Health {
    synced: AtomicBool,
    role: AtomicU8,
    heartbeat: Mutex<Instant>,
    /// `/healthz` fails when the loop has not turned for this long.
    pub stale_after: Duration,
}

impl Health {
    pub fn new(stale_after: Duration) -> Health {
        Health {
            synced: AtomicBool::new(false),
            role: AtomicU8::new(0),
            heartbeat: Mutex::new(Instant::now()),
            stale_after,
        }
    }

    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Relaxed);
    }

    pub fn set_role(&self, role: Role) {
        let v = match role {
            Role::Unknown => 0,
            Role::Leader => 1,
            Role::Standby => 2,
        };
        self.role.store(v, Ordering::Relaxed);
    }

    /// Whether this replica leads (or runs without election).
    pub fn leading(&self) -> bool {
        self.role.load(Ordering::Relaxed) == 1
    }

    pub fn beat(&self) {
        *self.heartbeat.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// `/healthz`: `Ok` or why not.
    pub fn live(&self) -> Result<(), String> {
        let at = *self.heartbeat.lock().unwrap_or_else(|e| e.into_inner());
        let age = at.elapsed();
        if age > self.stale_after {
            return Err(format!(
                "the cycle loop has not turned for {} ms",
                age.as_millis()
            ));
        }
        Ok(())
    }

    /// `/readyz`: `Ok` or what is missing.
    pub fn ready(&self) -> Result<(), String> {
        let mut missing = Vec::new();
        if !self.synced.load(Ordering::Relaxed) {
            missing.push("the watches have not all finished their first list");
        }
        if self.role.load(Ordering::Relaxed) == 0 {
            missing.push("the leader election has not answered yet");
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing.join("; "))
        }
    }
}

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// The answer to one request.
pub fn respond<B>(req: &Request<B>, health: &Health, metrics: &Metrics) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "only GET and HEAD\n".into(),
        );
    }
    let probe = |r: Result<(), String>| match r {
        Ok(()) => text(StatusCode::OK, PLAIN, "ok\n".into()),
        Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, format!("{why}\n")),
    };
    match req.uri().path() {
        "/metrics" => {
            let openmetrics = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains("application/openmetrics-text"));
            if openmetrics {
                text(
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    metrics.openmetrics(),
                )
            } else {
                text(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    metrics.prometheus_text(),
                )
            }
        }
        "/healthz" | "/livez" => probe(health.live()),
        "/readyz" => probe(health.ready()),
        path => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            format!("{path}: not found; try /metrics, /healthz, /readyz or /usage\n"),
        ),
    }
}

/// A `/usage` question, handed to the service's loop: it adds what is
/// not in the store yet (the period still open, the running jobs) and
/// hands both to the store's thread, which answers on `reply`.
#[derive(Debug)]
pub struct UsageAsk {
    pub from_s: i64,
    pub to_s: i64,
    pub by: UsageBy,
    pub reply: tokio::sync::oneshot::Sender<Result<Vec<crate::persist::UsageRow>, String>>,
}

/// Where `/usage` asks: the service's loop, when the service keeps a
/// store (`service.store.path`); `None`: it keeps none.
pub type UsageSource = Option<tokio::sync::mpsc::Sender<UsageAsk>>;

/// What `/usage` says without a store.
pub const NO_STORE: &str = "/usage: this scheduler keeps no usage history: set service.store.path in its settings (the Helm chart: --set store.enabled=true) and restart it (docs/persistence.md, \"Accounting\")";

/// The window and grouping `/usage` was asked for, or what is wrong with
/// the query.
pub fn usage_query(query: Option<&str>, now_s: i64) -> Result<(i64, i64, UsageBy), String> {
    let (mut from, mut to, mut by) = (None, None, UsageBy::Queue);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let secs = |v: &str| {
            v.parse::<i64>()
                .map_err(|_| format!("{k}={v:?}: expected Unix seconds (an integer)"))
        };
        match k {
            "from" => from = Some(secs(v)?),
            "to" => to = Some(secs(v)?),
            "by" => {
                by = UsageBy::parse(v).ok_or_else(|| {
                    format!("by={v:?}: expected one of queue, namespace, both, job")
                })?
            }
            _ => return Err(format!("{k}: unknown parameter; expected from, to, by")),
        }
    }
    let to = to.unwrap_or(now_s);
    let from = from.unwrap_or(to.saturating_sub(7 * 86_400));
    if from > to {
        return Err(format!("from={from} is after to={to}"));
    }
    Ok((from, to, by))
}

/// The answer to `/usage`.
async fn usage(query: Option<&str>, source: UsageSource, leading: bool) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (from, to, by) = match usage_query(query, now_s) {
        Ok(q) => q,
        Err(e) => return text(StatusCode::BAD_REQUEST, PLAIN, format!("/usage: {e}\n")),
    };
    let Some(source) = source else {
        return text(StatusCode::NOT_FOUND, PLAIN, format!("{NO_STORE}\n"));
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    let ask = UsageAsk {
        from_s: from,
        to_s: to,
        by,
        reply,
    };
    let stopping = || "the service is stopping".to_string();
    let rows = match source.send(ask).await {
        Ok(()) => answer.await.unwrap_or_else(|_| Err(stopping())),
        Err(_) => Err(stopping()),
    };
    match rows {
        Ok(rows) => {
            let body = serde_json::json!({
                "from": from, "to": to, "by": by.as_str(), "leading": leading, "rows": rows,
            });
            text(StatusCode::OK, "application/json", format!("{body}\n"))
        }
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            PLAIN,
            format!("/usage: {e}\n"),
        ),
    }
}

/// What `/usage` answers.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct UsageAnswer {
    pub from: i64,
    pub to: i64,
    /// Whether the replica that answered leads: a standby's store holds
    /// only what was recorded while it led.
    pub leading: bool,
    pub rows: Vec<crate::persist::UsageRow>,
}

/// `host:port` of an `http://` address (or of a bare `host:port`).
pub fn authority(server: &str) -> Result<&str, String> {
    let rest = match server.split_once("://") {
        Some(("http", rest)) => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "{scheme}:// is not supported; expected http://HOST:PORT (kubectl port-forward to the scheduler's httpAddress)"
            ));
        }
        None => server,
    };
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') || !host.contains(':') {
        return Err("expected http://HOST:PORT, e.g. http://127.0.0.1:8080".into());
    }
    Ok(host)
}

/// Asks the running scheduler at `server` (`http://HOST:PORT`) for its
/// usage report over `[from_s, to_s)` (`trainyard usage --server`).
pub async fn ask_usage(
    server: &str,
    from_s: i64,
    to_s: i64,
    by: UsageBy,
) -> Result<UsageAnswer, String> {
    use http_body_util::{BodyExt, Empty};
    let host = authority(server)?.to_string();
    let path = format!("/usage?from={from_s}&to={to_s}&by={}", by.as_str());
    let stream = tokio::net::TcpStream::connect(&host)
        .await
        .map_err(|e| format!("cannot connect to {host}: {e}"))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{host}: {e}"))?;
    let conn = tokio::spawn(conn);
    let req = Request::get(&path)
        .header(header::HOST, &host)
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let answer = async {
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("{host}: {e}"))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{host}: {e}"))?
            .to_bytes();
        Ok::<_, String>((status, body))
    }
    .await;
    conn.abort();
    let (status, body) = answer?;
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err(format!("{status}: {}", text.trim()));
    }
    serde_json::from_str(&text)
        .map_err(|e| format!("/usage answered what is not a usage report: {e}"))
}

/// Binds `addr` (errors here are the caller's to report).
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let addr: SocketAddr = addr.parse().map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}"))
    })?;
    TcpListener::bind(addr).await
}

/// Serves on `listener` until the task is aborted.
pub async fn serve(
    listener: TcpListener,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    usage_source: UsageSource,
) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("http: accept: {e}");
                continue;
            }
        };
        let (health, metrics) = (Arc::clone(&health), Arc::clone(&metrics));
        let usage_source = usage_source.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let asked = (req.uri().path() == "/usage" && req.method() == http::Method::GET)
                    .then(|| {
                        (
                            req.uri().query().map(str::to_string),
                            usage_source.clone(),
                            health.leading(),
                        )
                    });
                let r = match asked {
                    Some(_) => None,
                    None => Some(respond(&req, &health, &metrics)),
                };
                async move {
                    Ok::<_, Infallible>(match (r, asked) {
                        (Some(r), _) => r,
                        (None, Some((q, source, leading))) => {
                            usage(q.as_deref(), source, leading).await
                        }
                        // One of the two is always set.
                        (None, None) => text(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "text/plain",
                            String::new(),
                        ),
                    })
                }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("http: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, accept: Option<&str>) -> Request<()> {
        let mut b = Request::builder().uri(path);
        if let Some(a) = accept {
            b = b.header(header::ACCEPT, a);
        }
        b.body(()).expect("a request")
    }

    #[test]
    fn server_addresses_are_http_host_and_port() {
        assert_eq!(authority("http://127.0.0.1:8080"), Ok("127.0.0.1:8080"));
        assert_eq!(authority("http://sched:8080/"), Ok("sched:8080"));
        assert_eq!(authority("localhost:9"), Ok("localhost:9"));
        for bad in ["https://x:1", "http://x", "http://x:1/usage", ""] {
            assert!(authority(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn usage_queries_name_what_is_wrong() {
        assert_eq!(
            usage_query(None, 1_000_000),
            Ok((1_000_000 - 7 * 86_400, 1_000_000, UsageBy::Queue))
        );
        assert_eq!(
            usage_query(Some("from=5&to=9&by=job"), 0),
            Ok((5, 9, UsageBy::Job))
        );
        assert_eq!(
            usage_query(Some("from=x"), 0),
            Err("from=\"x\": expected Unix seconds (an integer)".into())
        );
        assert_eq!(
            usage_query(Some("by=team"), 0),
            Err("by=\"team\": expected one of queue, namespace, both, job".into())
        );
        assert_eq!(
            usage_query(Some("since=7d"), 0),
            Err("since: unknown parameter; expected from, to, by".into())
        );
        assert_eq!(
            usage_query(Some("from=9&to=5"), 0),
            Err("from=9 is after to=5".into())
        );
    }

    #[test]
    fn probes_say_what_is_missing() {
        let h = Health::new(Duration::from_secs(60));
        let m = Metrics::new();
        let r = respond(&get("/readyz", None), &h, &m);
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        h.set_synced(true);
        h.set_role(Role::Standby);
        assert_eq!(
            respond(&get("/readyz", None), &h, &m).status(),
            StatusCode::OK
        );
        assert_eq!(
            respond(&get("/healthz", None), &h, &m).status(),
            StatusCode::OK
        );
        let stale = Health::new(Duration::ZERO);
        assert!(stale.live().is_err());
        assert_eq!(
            respond(&get("/nope", None), &h, &m).status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn metrics_in_either_format() {
        let h = Health::new(Duration::from_secs(60));
        let m = Metrics::new();
        let r = respond(&get("/metrics", None), &h, &m);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let r = respond(
            &get(
                "/metrics",
                Some("application/openmetrics-text;version=1.0.0"),
            ),
            &h,
            &m,
        );
        assert!(
            r.headers()[header::CONTENT_TYPE]
                .to_str()
                .is_ok_and(|v| v.starts_with("application/openmetrics-text"))
        );
    }
}
