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
            format!("{path}: not found; try /metrics, /healthz or /readyz\n"),
        ),
    }
}

/// Binds `addr` (errors here are the caller's to report).
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let addr: SocketAddr = addr.parse().map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}"))
    })?;
    TcpListener::bind(addr).await
}

/// Serves on `listener` until the task is aborted.
pub async fn serve(listener: TcpListener, health: Arc<Health>, metrics: Arc<Metrics>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("http: accept: {e}");
                continue;
            }
        };
        let (health, metrics) = (Arc::clone(&health), Arc::clone(&metrics));
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let r = respond(&req, &health, &metrics);
                async move { Ok::<_, Infallible>(r) }
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
