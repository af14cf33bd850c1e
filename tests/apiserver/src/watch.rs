//! Watches: a stream of newline-separated `{"type", "object"}` events.
//!
//! * no `resourceVersion` or `"0"`: synthetic `ADDED` for the current objects, then changes;
//! * `resourceVersion=N`: the retained history after N, then changes; `ERROR` 410 if N
//!   is older than the compaction window (as kube-apiserver does, inside a 200 stream);
//! * `sendInitialEvents=true` (streaming list): `ADDED` for the current objects, then a
//!   `BOOKMARK` annotated `k8s.io/initial-events-end: "true"`;
//! * `allowWatchBookmarks=true`: periodic `BOOKMARK`s carrying the last revision seen;
//! * objects moving into or out of the selectors become `ADDED`/`DELETED`;
//! * `timeoutSeconds` ends the stream; so do dropped-watch faults.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::Shared;
use crate::error::{ApiError, ApiResult};
use crate::http::Req;
use crate::routes::{Output, Target, selectors};
use crate::selector::{FieldSelector, LabelSelector};
use crate::state::State;
use crate::store::{Event, EventType, too_old};
use crate::table::to_table;

/// A watch request's parameters.
#[derive(Debug, Clone)]
pub struct WatchParams {
    label: LabelSelector,
    field: FieldSelector,
    rv: Option<u64>,
    bookmarks: bool,
    initial_events: bool,
    timeout: Option<Duration>,
}

impl WatchParams {
    /// Reads the query.
    pub fn from_req(r: &Req, t: &Target) -> ApiResult<Self> {
        let (label, field) = selectors(t, r)?;
        let rv = match r.q("resourceVersion").filter(|s| !s.is_empty()) {
            Some(s) => Some(
                s.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
            ),
            None => None,
        };
        let initial_events = r.flag("sendInitialEvents");
        let bookmarks = r.flag("allowWatchBookmarks");
        if initial_events && (!bookmarks || r.q("resourceVersionMatch") != Some("NotOlderThan")) {
            return Err(ApiError::invalid("ListOptions.meta.k8s.io", "meta.k8s.io", "", vec![crate::error::Cause {
                reason: "FieldValueForbidden".into(),
                message: "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan and allowWatchBookmarks".into(),
                field: "sendInitialEvents".into(),
            }]));
        }
        let timeout = r
            .q("timeoutSeconds")
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|s| *s > 0)
            .map(Duration::from_secs);
        Ok(WatchParams {
            label,
            field,
            rv,
            bookmarks,
            initial_events,
            timeout,
        })
    }

    fn matches(&self, ns: Option<&str>, o: &Value) -> bool {
        ns.is_none_or(|n| o["metadata"]["namespace"].as_str() == Some(n))
            && self.label.matches(o)
            && self.field.matches(o)
    }
}

struct Sink {
    tx: mpsc::Sender<Bytes>,
    out: Output,
    t: Target,
    shared: Arc<Shared>,
}

impl Sink {
    async fn send(&self, ty: &str, obj: Value) -> bool {
        let obj = match (ty, self.out) {
            ("ERROR" | "BOOKMARK", _) | (_, Output::Json) => obj,
            (_, Output::Meta) => {
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
            }
            (_, Output::Table(inc)) => {
                let now = self.shared.lock().now();
                let rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                to_table(&self.t.def, &self.t.version, &[obj], &rv, None, inc, now)
            }
        };
        let mut line = serde_json::to_vec(&json!({"type": ty, "object": obj})).unwrap_or_default();
        line.push(b'\n');
        self.tx.send(Bytes::from(line)).await.is_ok()
    }

    async fn bookmark(&self, rv: u64, end_of_initial: bool) -> bool {
        let mut md = json!({"resourceVersion": rv.to_string()});
        if end_of_initial {
            md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.t.def.kind, "apiVersion": self.t.def.api_version(&self.t.version), "metadata": md});
        self.send("BOOKMARK", obj).await
    }

    async fn error(&self, e: &ApiError) {
        self.send("ERROR", e.to_status()).await;
    }
}

/// What to send for one stored event, given the watch's filter.
fn translate(p: &WatchParams, t: &Target, e: &Event) -> Option<(&'static str, Value)> {
    if e.resource != t.def.key() {
        return None;
    }
    let ns = t.ns.as_deref();
    let now_in = p.matches(ns, &e.object);
    let was_in = e.prev.as_ref().is_some_and(|o| p.matches(ns, o));
    let present = |o: &Value| State::present(&t.def, &t.version, o.clone());
    match e.ty {
        EventType::Added => now_in.then(|| ("ADDED", present(&e.object))),
        EventType::Deleted => was_in.then(|| ("DELETED", present(&e.object))),
        EventType::Modified => match (was_in, now_in) {
            (true, true) => Some(("MODIFIED", present(&e.object))),
            (false, true) => Some(("ADDED", present(&e.object))),
            (true, false) => Some(("DELETED", present(&e.object))),
            (false, false) => None,
        },
    }
}

/// Starts a watch; the receiver is the response body.
pub fn start(
    shared: Arc<Shared>,
    t: Target,
    p: WatchParams,
    out: Output,
) -> ApiResult<mpsc::Receiver<Bytes>> {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let sink = Sink {
        tx,
        out,
        t: t.clone(),
        shared: shared.clone(),
    };
    // Snapshot and subscription under one lock: no change falls between them.
    let (initial, replay, start_rv, live, forced) = {
        let mut st = shared.lock();
        let forced = if st.faults.force_410 > 0 {
            st.faults.force_410 -= 1;
            Some(too_old(p.rv.unwrap_or(0), st.store.rv()))
        } else {
            None
        };
        let current = st.store.rv();
        let (initial, replay) = match (p.initial_events, p.rv) {
            (true, _) | (false, None | Some(0)) => {
                let objs: Vec<Value> = st
                    .store
                    .list(&t.def.key(), t.ns.as_deref())
                    .into_iter()
                    .filter(|o| p.matches(t.ns.as_deref(), o))
                    .collect();
                (objs, Ok(Vec::new()))
            }
            (false, Some(rv)) => (Vec::new(), st.store.events_after(rv)),
        };
        (initial, replay, current, st.store.subscribe(), forced)
    };
    let mut drops = shared.drop_watches.subscribe();
    drops.borrow_and_update();
    let interval = shared.bookmark_interval;
    tokio::spawn(async move {
        if let Some(e) = forced {
            sink.error(&e).await;
            return;
        }
        let replay = match replay {
            Ok(r) => r,
            Err(e) => {
                sink.error(&e).await;
                return;
            }
        };
        let mut last_rv = start_rv;
        for o in initial {
            if !sink
                .send("ADDED", State::present(&sink.t.def, &sink.t.version, o))
                .await
            {
                return;
            }
        }
        if p.initial_events && !sink.bookmark(start_rv, true).await {
            return;
        }
        for e in replay {
            if let Some((ty, o)) = translate(&p, &sink.t, &e)
                && !sink.send(ty, o).await
            {
                return;
            }
        }
        run_live(&sink, &p, live, &mut drops, interval, &mut last_rv).await;
    });
    Ok(rx)
}

async fn run_live(
    sink: &Sink,
    p: &WatchParams,
    mut live: broadcast::Receiver<Arc<Event>>,
    drops: &mut tokio::sync::watch::Receiver<u64>,
    interval: Duration,
    last_rv: &mut u64,
) {
    let deadline = p.timeout.map(|d| tokio::time::Instant::now() + d);
    let mut ticker = tokio::time::interval(interval);
    ticker.tick().await;
    loop {
        let timeout = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ev = live.recv() => match ev {
                Ok(e) => {
                    *last_rv = e.rv;
                    if let Some((ty, o)) = translate(p, &sink.t, &e)
                        && !sink.send(ty, o).await {
                            return;
                        }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    sink.error(&ApiError::expired(format!("too old resource version: {last_rv}"))).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if p.bookmarks => {
                if !sink.bookmark(*last_rv, false).await {
                    return;
                }
            }
            _ = drops.changed() => return,
            _ = sink.tx.closed() => return,
            _ = timeout => return,
        }
    }
}
