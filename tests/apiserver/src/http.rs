//! The HTTP layer: hyper 1 over plain TCP, request parsing, the response body type
//! (whole or streamed), fault injection and the `/testapi/*` control endpoints.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use rand::Rng;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::Shared;
use crate::error::ApiError;

/// A response body: whole, or a stream of chunks (watches).
pub enum ResBody {
    /// All at once.
    Full(Option<Bytes>),
    /// Chunks until the sender is dropped.
    Stream(mpsc::Receiver<Bytes>),
}

impl Body for ResBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ResBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ResBody::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ResBody::Full(None))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            ResBody::Full(Some(b)) => hyper::body::SizeHint::with_exact(b.len() as u64),
            ResBody::Full(None) => hyper::body::SizeHint::with_exact(0),
            ResBody::Stream(_) => hyper::body::SizeHint::default(),
        }
    }
}

/// A parsed request.
#[derive(Debug, Clone)]
pub struct Req {
    /// Method.
    pub method: Method,
    /// Path segments (percent-decoded).
    pub segs: Vec<String>,
    /// Query parameters (last wins).
    pub query: BTreeMap<String, String>,
    /// `Accept` header.
    pub accept: String,
    /// `Content-Type` header.
    pub content_type: String,
    /// Body.
    pub body: Bytes,
    /// The authenticated user (`None` when authentication is off).
    pub user: Option<crate::auth::UserInfo>,
}

impl Req {
    /// A query parameter.
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    /// A boolean query parameter (`true`/`1`).
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true" | "1"))
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, ApiError> {
        if self.body.is_empty() {
            return Ok(Value::Null);
        }
        if self.content_type.contains("protobuf") || self.content_type.contains("cbor") {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                // kube-apiserver's wording, then why (it would decode these).
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json (the test API server accepts only JSON bodies; got {})",
                    self.content_type
                ),
            ));
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding body: {e}")))
    }
}

/// What a handler answers.
pub enum Reply {
    /// JSON with a status code.
    Json(u16, Value),
    /// A watch stream.
    Stream(mpsc::Receiver<Bytes>),
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Self {
        Reply::Json(e.code, e.to_status())
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The server's TLS settings: the self-signed certificate in `src/tls/`
/// (CN `trainyard-testapi`, SANs `127.0.0.1` and `localhost`, valid to 2126).
pub fn tls_acceptor() -> Option<tokio_rustls::TlsAcceptor> {
    use tokio_rustls::rustls;
    let cert = rustls::pki_types::CertificateDer::from(crate::TLS_CERT_DER.to_vec());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        TLS_KEY_DER.to_vec(),
    ));
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(vec![cert], key))
        .map_err(|e| tracing::warn!(error = %e, "TLS disabled"))
        .ok()?;
    Some(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

const TLS_KEY_DER: &[u8] = include_bytes!("tls/key.der");

/// Serves until the listener fails. Each connection is its own task. A
/// connection that opens with a TLS handshake (first byte 0x16) is served over
/// TLS, any other as plain HTTP, on the same port.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let tls = tls_acceptor();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, req).await) }
            });
            let mut first = [0u8; 1];
            let is_tls = matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 0x16);
            let result = match (is_tls, tls) {
                (true, Some(acceptor)) => match acceptor.accept(stream).await {
                    Ok(s) => {
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                            .with_upgrades()
                            .await
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                },
                _ => {
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .with_upgrades()
                        .await
                }
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
}

async fn handle(shared: Arc<Shared>, mut req: Request<Incoming>) -> Response<ResBody> {
    // A WebSocket upgrade (`pods/portforward`) is taken before the request
    // is split; only the port-forward handler uses it.
    let upgrade =
        crate::portforward::is_websocket(req.headers()).then(|| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    let body = match http_body_collect(body).await {
        Ok(b) => b,
        Err(e) => {
            return respond(Reply::from(ApiError::bad_request(format!(
                "reading body: {e}"
            ))));
        }
    };
    let header = |h: hyper::header::HeaderName| {
        parts
            .headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let path = parts.uri.path().to_string();
    let r = Req {
        method: parts.method.clone(),
        segs: path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(decode)
            .collect(),
        query: parse_query(parts.uri.query().unwrap_or("")),
        accept: header(hyper::header::ACCEPT),
        content_type: header(hyper::header::CONTENT_TYPE),
        body,
        user: None,
    };
    tracing::debug!(method = %r.method, path = %path, query = ?r.query, "request");
    if r.segs.first().map(String::as_str) == Some("testapi") {
        return respond(control(&shared, &r));
    }
    if let Some(e) = inject_faults(&shared).await {
        return respond(Reply::from(e));
    }
    let mut r = r;
    match authenticate_and_authorize(
        &shared,
        &r,
        &header(hyper::header::AUTHORIZATION),
        &parts.headers,
    ) {
        Ok(user) => r.user = user,
        Err(e) => return respond(Reply::from(e)),
    }
    if crate::portforward::target(&r).is_some() {
        return crate::portforward::handle(&shared, &r, &parts.headers, upgrade)
            .unwrap_or_else(|e| respond(Reply::from(e)));
    }
    respond(crate::routes::route(shared, r).await)
}

/// Authentication, then RBAC authorization of the request's attributes (both
/// only when [`crate::Config::rbac`] is on).
fn authenticate_and_authorize(
    shared: &Shared,
    r: &Req,
    authorization: &str,
    headers: &hyper::HeaderMap,
) -> Result<Option<crate::auth::UserInfo>, ApiError> {
    let st = shared.lock();
    let Some(user) = crate::auth::authenticate(&st, authorization)? else {
        return Ok(None);
    };
    let attrs = crate::auth::attributes(r);
    if headers
        .keys()
        .any(|h| h.as_str().starts_with("impersonate-"))
    {
        return Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "users \"{}\" is forbidden: User \"{}\" cannot impersonate: impersonation is not supported by the test API server",
                headers
                    .get("impersonate-user")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or(""),
                user.name
            ),
        ));
    }
    let d = crate::rbac::authorize(&st, &user, &attrs);
    if !d.allowed {
        tracing::debug!(user = %user.name, ?attrs, reason = %d.reason, "forbidden");
        return Err(crate::rbac::forbidden(&user, &attrs, &d.reason));
    }
    // kube-apiserver ≥ 1.35 (`AuthorizePodWebsocketUpgradeCreatePermission`,
    // on by default): a WebSocket upgrade of pods/exec, attach or
    // portforward is a GET (verb `get`) and needs `create` as well, the
    // verb of the same request over SPDY (a POST).
    if attrs.resource == "pods"
        && matches!(
            attrs.subresource.as_str(),
            "exec" | "attach" | "portforward"
        )
        && attrs.verb == "get"
        && crate::portforward::is_websocket(headers)
    {
        let create = crate::auth::Attributes {
            verb: "create".into(),
            ..attrs
        };
        let d = crate::rbac::authorize(&st, &user, &create);
        if !d.allowed {
            tracing::debug!(user = %user.name, attrs = ?create, reason = %d.reason, "forbidden");
            return Err(crate::rbac::forbidden(&user, &create, &d.reason));
        }
    }
    Ok(Some(user))
}

async fn http_body_collect(mut body: Incoming) -> Result<Bytes, hyper::Error> {
    let mut buf = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(d) = frame?.into_data() {
            buf.extend_from_slice(&d);
        }
    }
    Ok(Bytes::from(buf))
}

async fn inject_faults(shared: &Shared) -> Option<ApiError> {
    let mut paused = shared.paused.subscribe();
    if *paused.borrow_and_update() {
        /// Counts a request held by the pause until it goes on or is
        /// dropped (its client went away).
        struct Held<'a>(&'a Shared);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                self.0.held.send_modify(|h| *h -= 1);
            }
        }
        shared.held.send_modify(|h| *h += 1);
        let _held = Held(shared);
        while *paused.borrow_and_update() {
            if paused.changed().await.is_err() {
                break;
            }
        }
    }
    let (latency, err) = {
        let mut st = shared.lock();
        let f = st.faults.clone();
        let roll: f64 = st.rng.random();
        let err = if roll < f.rate_429 {
            Some(ApiError::too_many_requests(
                "the server has received too many requests and has asked us to try again later (injected)",
                1,
            ))
        } else if roll < f.rate_429 + f.rate_500 {
            Some(ApiError::internal(
                "an error on the server (\"injected fault\") has prevented the request from succeeding",
            ))
        } else {
            None
        };
        (f.latency_ms, err)
    };
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    err
}

fn control(shared: &Arc<Shared>, r: &Req) -> Reply {
    let what = r.segs.get(1).map(String::as_str).unwrap_or("");
    match (r.method.clone(), what) {
        (Method::GET, "faults") => Reply::Json(200, shared.lock().faults.to_json()),
        (Method::PUT | Method::POST | Method::PATCH, "faults") => match r.json() {
            Ok(v) => {
                let f = {
                    let mut st = shared.lock();
                    st.faults.merge_json(&v);
                    st.faults.clone()
                };
                shared.paused.send_replace(f.paused);
                Reply::Json(200, f.to_json())
            }
            Err(e) => e.into(),
        },
        (Method::POST, "drop-watches") => {
            shared.drop_watches.send_modify(|g| *g += 1);
            Reply::Json(200, json!({"dropped": true}))
        }
        (Method::POST, "advance") => {
            let secs: i64 = r.q("seconds").and_then(|s| s.parse().ok()).unwrap_or(0);
            let changed = shared.advance(secs);
            Reply::Json(
                200,
                json!({"now": crate::time::format_rfc3339(shared.lock().now()), "changed": changed}),
            )
        }
        (Method::POST, "tick") => {
            let changed = shared.tick();
            Reply::Json(200, json!({"changed": changed}))
        }
        (Method::POST, "compact") => {
            shared.lock().store.compact_all();
            Reply::Json(200, json!({"compacted": shared.lock().store.compacted()}))
        }
        (Method::POST, "tokens") => mint_token(shared, r).unwrap_or_else(Reply::from),
        _ => ApiError::new(404, "NotFound", "unknown control endpoint").into(),
    }
}

/// `POST /testapi/tokens?serviceaccount=NS/NAME` or `?user=NAME&groups=G1,G2`:
/// a bearer token for that identity, with the identity.
fn mint_token(shared: &Shared, r: &Req) -> Result<Reply, ApiError> {
    let mut st = shared.lock();
    if let Some(sa) = r.q("serviceaccount") {
        let (ns, name) = sa
            .split_once('/')
            .ok_or_else(|| ApiError::bad_request("serviceaccount must be NAMESPACE/NAME"))?;
        let (token, user) = crate::auth::mint_service_account_token(&mut st, ns, name)?;
        return Ok(Reply::Json(
            200,
            json!({"token": token, "user": user.to_json()}),
        ));
    }
    let name = r
        .q("user")
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ApiError::bad_request("give serviceaccount=NS/NAME or user=NAME"))?;
    let groups: Vec<&str> = r
        .q("groups")
        .unwrap_or("")
        .split(',')
        .filter(|g| !g.is_empty())
        .collect();
    let user = crate::auth::UserInfo::new(name, &groups);
    let token = crate::auth::mint_user_token(&mut st, user.clone());
    Ok(Reply::Json(
        200,
        json!({"token": token, "user": user.to_json()}),
    ))
}

/// Turns a reply into a hyper response.
pub fn respond(reply: Reply) -> Response<ResBody> {
    let (code, body, ct, retry) = match reply {
        Reply::Json(code, v) => {
            let retry = v["details"]["retryAfterSeconds"].as_u64();
            let mut s = serde_json::to_vec(&v).unwrap_or_default();
            s.push(b'\n');
            (
                code,
                ResBody::Full(Some(Bytes::from(s))),
                "application/json",
                retry,
            )
        }
        Reply::Stream(rx) => (200, ResBody::Stream(rx), "application/json", None),
    };
    let mut b = Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(hyper::header::CONTENT_TYPE, ct)
        .header("Cache-Control", "no-cache, private");
    if let Some(r) = retry {
        b = b.header(hyper::header::RETRY_AFTER, r.to_string());
    }
    match b.body(body) {
        Ok(resp) => resp,
        Err(_) => Response::new(ResBody::Full(None)),
    }
}
