//! `pods/portforward` over WebSocket, as kube-apiserver and the kubelet
//! serve it to kube-rs (`Api::<Pod>::portforward`) and to client-go's
//! WebSocket executor.
//!
//! `GET /api/v1/namespaces/NS/pods/NAME/portforward?ports=P1,P2` with an
//! HTTP/1.1 `Upgrade: websocket`. The subprotocol is chosen as the
//! kubelet's `wsstream` does: the first one the client lists that the
//! server supports, `v4.channel.k8s.io` (binary channels; kube-rs asks
//! `v5.channel.k8s.io, v4.channel.k8s.io` and gets v4: the kubelet has no v5
//! for port-forward) or none at all (no header: binary, as the kubelet's
//! `""` protocol). Per port `i` (in the order asked), channel `2i` carries
//! data and `2i+1` errors; the first frame on each is `[channel, port as
//! u16 little-endian]`, every later one `[channel, bytes...]`.
//!
//! Where the bytes go: the pod's `status.podIP` at the port. A kubelet
//! dials `localhost:PORT` inside the pod's network namespace; here tests
//! give their pods loopback IPs (`127.0.0.7`) and listen there. One TCP
//! connection per port per WebSocket (as the kubelet); a dial that fails,
//! or a read from the pod that fails, is written as text on the port's
//! error channel. When every port's connection has ended, the server
//! closes the WebSocket; when the client closes it, the connections to the
//! pod are closed.
//!
//! Refusals (a `Status`, no upgrade): no such pod (404, kube-apiserver's
//! `pods "NAME" not found`); a pod without `spec.nodeName` (400, kube-apiserver's
//! `pod NAME does not have a host assigned`); no `ports` (400, the kubelet's
//! `query parameter "port" is required`, kube-apiserver turns `ports` into
//! the kubelet's `port`); a pod that is not `Running` or has no
//! `status.podIP` (400 here; a real cluster answers what its kubelet and
//! runtime say: 404 `pod does not exist` from a kubelet that does not have
//! the pod, 500 from a runtime whose sandbox is not running); a subprotocol
//! the server does not speak (400, `wsstream`'s `requested protocol(s) are
//! not supported`). Not implemented: SPDY (kubectl's `port-forward` speaks
//! SPDY/3.1, directly or tunnelled over WebSocket as
//! `SPDY/3.1+portforward.k8s.io`), refused with 400; the base64 protocol;
//! the kubelet's idle timeout.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use hyper::upgrade::OnUpgrade;
use hyper::{HeaderMap, Method, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::Shared;
use crate::error::ApiError;
use crate::http::{Req, ResBody};

/// The binary channel protocol (the kubelet's `v4BinaryWebsocketProtocol`).
pub const V4_CHANNEL: &str = "v4.channel.k8s.io";

/// The namespace and pod of a `pods/portforward` request, if it is one.
pub fn target(r: &Req) -> Option<(&str, &str)> {
    match r.segs.as_slice() {
        [api, v1, namespaces, ns, pods, name, sub]
            if api == "api"
                && v1 == "v1"
                && namespaces == "namespaces"
                && pods == "pods"
                && sub == "portforward" =>
        {
            Some((ns, name))
        }
        _ => None,
    }
}

/// Whether the request asks to upgrade to a WebSocket (`Upgrade:
/// websocket`, case-insensitive, as `wsstream.IsWebSocketRequest`).
pub fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get_all(hyper::header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("websocket"))
        })
}

/// The subprotocols the client offers, in its order (one header of
/// comma-separated names, or several headers).
fn offered(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(hyper::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// What to forward to, checked before the upgrade.
struct Forward {
    ns: String,
    name: String,
    uid: String,
    ip: IpAddr,
    ports: Vec<u16>,
    protocol: Option<&'static str>,
    accept: String,
}

/// Answers a `pods/portforward` request: `101 Switching Protocols` and the
/// forwarding on the upgraded connection, or a `Status`.
pub fn handle(
    shared: &Arc<Shared>,
    r: &Req,
    headers: &HeaderMap,
    upgrade: Option<OnUpgrade>,
) -> Result<Response<ResBody>, ApiError> {
    let Some((ns, name)) = target(r) else {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    };
    let f = check(shared, r, headers, ns, name)?;
    let Some(upgrade) = upgrade else {
        // `check` refused every request that is not a WebSocket upgrade,
        // and `http::handle` takes the upgrade of every one that is.
        return Err(ApiError::internal("the connection cannot be upgraded"));
    };
    let mut b = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(hyper::header::CONNECTION, "Upgrade")
        .header(hyper::header::UPGRADE, "websocket")
        .header(hyper::header::SEC_WEBSOCKET_ACCEPT, f.accept.as_str());
    if let Some(p) = f.protocol {
        b = b.header(hyper::header::SEC_WEBSOCKET_PROTOCOL, p);
    }
    let response = b
        .body(ResBody::Full(None))
        .map_err(|e| ApiError::internal(format!("the upgrade response: {e}")))?;
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None)
                        .await;
                session(ws, f).await;
            }
            Err(e) => tracing::debug!(error = %e, "port-forward: the upgrade failed"),
        }
    });
    Ok(response)
}

fn check(
    shared: &Shared,
    r: &Req,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
) -> Result<Forward, ApiError> {
    let (uid, node, phase, ip) = {
        let st = shared.lock();
        let pod = st
            .store
            .get("/pods", ns, name)
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        (
            s(&pod["metadata"]["uid"]),
            s(&pod["spec"]["nodeName"]),
            s(&pod["status"]["phase"]),
            s(&pod["status"]["podIP"]),
        )
    };
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    if !is_websocket(headers) {
        let why = match headers
            .get(hyper::header::UPGRADE)
            .and_then(|v| v.to_str().ok())
        {
            Some(u) if u.to_ascii_uppercase().starts_with("SPDY") => format!(
                "unable to upgrade: {u} is not supported by the test API server, which forwards ports over WebSocket ({V4_CHANNEL}) only"
            ),
            _ => "unable to upgrade: missing upgrade headers in request".to_string(),
        };
        return Err(ApiError::bad_request(why));
    }
    // Only a WebSocket request carries its ports in the query (SPDY names
    // them per stream), so only it is checked for them, as the kubelet does.
    let ports = ports(r)?;
    if r.method != Method::GET {
        return Err(ApiError::bad_request(format!(
            "unable to upgrade: a WebSocket upgrade is a GET, not a {}",
            r.method
        )));
    }
    if phase != "Running" || ip.is_empty() {
        let phase = if phase.is_empty() { "Pending" } else { &phase };
        return Err(ApiError::bad_request(format!(
            "pod {name} is not running (status.phase {phase}{}); the test API server forwards only to a Running pod with a status.podIP",
            if ip.is_empty() {
                ", no status.podIP"
            } else {
                ""
            }
        )));
    }
    let ip: IpAddr = ip.parse().map_err(|_| {
        ApiError::internal(format!(
            "pod {name}: status.podIP {ip} is not an IP address"
        ))
    })?;
    let key = headers
        .get(hyper::header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::bad_request("unable to upgrade: missing Sec-WebSocket-Key"))?;
    let version = headers
        .get(hyper::header::SEC_WEBSOCKET_VERSION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if version.trim() != "13" {
        return Err(ApiError::bad_request(format!(
            "unable to upgrade: unsupported Sec-WebSocket-Version {version:?} (13 is)"
        )));
    }
    let offered = offered(headers);
    let protocol = if offered.is_empty() {
        None
    } else if offered.iter().any(|p| p == V4_CHANNEL) {
        Some(V4_CHANNEL)
    } else {
        return Err(ApiError::bad_request(format!(
            "requested protocol(s) are not supported: [{}]; supports [{V4_CHANNEL}]",
            offered.join(" ")
        )));
    };
    Ok(Forward {
        ns: ns.to_string(),
        name: name.to_string(),
        uid,
        ip,
        ports,
        protocol,
        accept: derive_accept_key(key.as_bytes()),
    })
}

/// `ports=P1,P2` (kube-apiserver's `PodPortForwardOptions`), checked as the
/// kubelet checks its `port` parameters.
fn ports(r: &Req) -> Result<Vec<u16>, ApiError> {
    let s = r
        .q("ports")
        .ok_or_else(|| ApiError::bad_request("query parameter \"port\" is required"))?;
    if s.is_empty() {
        return Err(ApiError::bad_request(
            "query parameter \"port\" cannot be empty",
        ));
    }
    // Two channels per port, numbered in a byte (the kubelet's too).
    if s.split(',').count() > 127 {
        return Err(ApiError::bad_request(
            "at most 127 ports can be forwarded at once (their channels are numbered in a byte)",
        ));
    }
    s.split(',')
        .map(|p| match p.trim().parse::<u16>() {
            Ok(0) => Err(ApiError::bad_request(format!("port \"{s}\" must be > 0"))),
            Ok(p) => Ok(p),
            Err(e) => Err(ApiError::bad_request(format!(
                "unable to parse \"{s}\" as a port: {e}"
            ))),
        })
        .collect()
}

/// Channel `ch`'s frame: the channel byte, then `data`.
fn frame(ch: u8, data: &[u8]) -> Message {
    let mut b = Vec::with_capacity(data.len() + 1);
    b.push(ch);
    b.extend_from_slice(data);
    Message::binary(b)
}

async fn session<S>(ws: WebSocketStream<S>, f: Forward)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let pod = format!("{}/{}", f.ns, f.name);
    // At most 127 ports (see `ports`): every channel fits its byte.
    let ports = f.ports.clone();
    for (i, port) in ports.iter().enumerate() {
        let ch = (2 * i) as u8;
        for c in [ch, ch + 1] {
            if sink.send(frame(c, &port.to_le_bytes())).await.is_err() {
                return;
            }
        }
    }
    let (tx, mut rx) = mpsc::channel::<Message>(16);
    let mut writers: Vec<Option<OwnedWriteHalf>> = Vec::with_capacity(ports.len());
    let mut readers = Vec::with_capacity(ports.len());
    for (i, &port) in ports.iter().enumerate() {
        let ch = (2 * i) as u8;
        let fail = |why: String| {
            format!(
                "error forwarding port {port} to pod {pod}, uid {}: {why}",
                f.uid
            )
        };
        match TcpStream::connect((f.ip, port)).await {
            Ok(s) => {
                let (mut r, w) = s.into_split();
                writers.push(Some(w));
                let tx = tx.clone();
                let fail = fail(String::new());
                readers.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; 32 * 1024];
                    loop {
                        let m = match r.read(&mut buf).await {
                            Ok(0) => break,
                            Ok(n) => frame(ch, &buf[..n]),
                            Err(e) => frame(ch + 1, format!("{fail}{e}").as_bytes()),
                        };
                        let end = matches!(&m, Message::Binary(b) if b.first() == Some(&(ch + 1)));
                        if tx.send(m).await.is_err() || end {
                            break;
                        }
                    }
                }));
            }
            Err(e) => {
                tracing::debug!(%pod, port, error = %e, "port-forward: cannot connect");
                writers.push(None);
                let text = fail(format!(
                    "failed to connect to {}:{port} (the pod's status.podIP): {e}",
                    f.ip
                ));
                if sink.send(frame(ch + 1, text.as_bytes())).await.is_err() {
                    return;
                }
            }
        }
    }
    drop(tx);
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(m) => {
                    if sink.send(m).await.is_err() {
                        break;
                    }
                }
                // Every port's connection has ended.
                None => {
                    let _ = sink.send(Message::Close(None)).await;
                    break;
                }
            },
            msg = stream.next() => match msg {
                Some(Ok(Message::Binary(b))) => to_pod(&mut writers, b).await,
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    for r in readers {
        r.abort();
    }
    for w in writers.iter_mut().flatten() {
        let _ = w.shutdown().await;
    }
    let _ = sink.close().await;
    tracing::debug!(%pod, "port-forward ended");
}

/// A client frame to its port's connection: data channels only (the
/// kubelet reads nothing on the error channels); an unknown channel is
/// dropped.
async fn to_pod(writers: &mut [Option<OwnedWriteHalf>], b: Bytes) {
    let Some((&ch, data)) = b.split_first() else {
        return;
    };
    if ch % 2 != 0 || data.is_empty() {
        return;
    }
    if let Some(Some(w)) = writers.get_mut(usize::from(ch / 2))
        && w.write_all(data).await.is_err()
    {
        // The pod closed its side; what it still sends comes through.
        writers[usize::from(ch / 2)] = None;
    }
}
