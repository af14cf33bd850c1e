//! The dashboard's JSON endpoints (docs/ui.md): each asks the RPC handler
//! the view shows (as the caller), prints its answer, and adds what the
//! view needs beside it.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde_json::{Value, json};
use tonic::Status;
use trainyard_model::{Job, TaskState};
use trainyard_serve::view::CycleView;

use super::{Ui, UiState, error, json};
use crate::auth::{Caller, Visible};
use crate::pb;
use crate::pb::scheduler_server::Scheduler;

mod jobs;
pub use jobs::{AllForecasts, forecast, forecasts, job, jobs, print_jobs, what_if};

/// The forecast of every pending job is made again at most this often
/// (it runs the engine forward).
pub const FORECAST_EVERY_MS: i64 = 30_000;
/// Its look-ahead: a day.
const FORECAST_HORIZON_SECONDS: u64 = 24 * 3600;
/// The store's usage is asked again at most this often.
const USAGE_EVERY_MS: i64 = 60_000;
/// Hours of usage shown.
const USAGE_HOURS: i64 = 6;

type Params = Query<BTreeMap<String, String>>;

/// The parameters of `endpoint`, refusing any but `known`.
fn params<'a>(
    q: &'a BTreeMap<String, String>,
    endpoint: &str,
    known: &[&str],
) -> Result<impl Fn(&str) -> &'a str, Status> {
    if let Some(k) = q.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(Status::invalid_argument(format!(
            "{endpoint}: unknown parameter {k}; expected {}",
            known.join(", ")
        )));
    }
    Ok(move |k: &str| q.get(k).map_or("", String::as_str))
}

fn answer_text(r: Result<String, Status>) -> Response {
    match r {
        Ok(t) => super::json_text(t),
        Err(s) => error(s),
    }
}

fn answer(r: Result<Value, Status>) -> Response {
    match r {
        Ok(v) => json(&v),
        Err(s) => error(s),
    }
}

/// What `caller` sees of the jobs `ids` (by their namespaces).
async fn visible_of<'a>(
    caller: &Caller,
    ids: impl Iterator<Item = &'a str>,
) -> Result<Visible, Status> {
    let names: std::collections::BTreeSet<&str> = ids.map(crate::auth::namespace_of).collect();
    caller.visible(names).await
}

impl Ui {
    fn print<M: prost::Message>(&self, m: &M, name: &str) -> Result<Value, Status> {
        self.printer
            .value(m, name)
            .map_err(|e| Status::internal(e.to_string()))
    }

    fn latest(&self) -> Option<Arc<CycleView>> {
        self.view.latest().borrow().clone()
    }
}

pub async fn whoami(ui: UiState, headers: HeaderMap) -> Response {
    answer(
        async {
            let caller = ui.caller(&headers).await?;
            let (user, trusted) = match &caller {
                Caller::Trusted => (String::new(), true),
                Caller::User { identity, .. } => (identity.user.clone(), false),
            };
            Ok(json!({"user": user, "trusted": trusted, "scheduler": ui.view.scheduler_name}))
        }
        .await,
    )
}

pub async fn queues(ui: UiState, headers: HeaderMap) -> Response {
    answer(
        async {
            let caller = ui.caller(&headers).await?;
            let r = ui
                .api
                .list_queues(Ui::request(&caller, pb::ListQueuesRequest {}))
                .await?
                .into_inner();
            let mut v = ui.print(&r, "ListQueuesResponse")?;
            let listed: std::collections::BTreeSet<&str> =
                r.queues.iter().map(|q| q.name.as_str()).collect();
            let mut conditions = serde_json::Map::new();
            let mut invalid = Vec::new();
            for o in ui.view.objects() {
                if o["kind"] != "Queue" {
                    continue;
                }
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                let conds = o["status"]["conditions"].clone();
                let conds = if conds.is_array() { conds } else { json!([]) };
                if listed.contains(name) {
                    conditions.insert(name.to_string(), conds);
                } else {
                    let parent = o["spec"]["parentQueue"]
                        .as_str()
                        .or(o["spec"]["parent"].as_str())
                        .unwrap_or_default();
                    invalid.push(json!({"name": name, "parent": parent, "conditions": conds}));
                }
            }
            v["conditions"] = Value::Object(conditions);
            v["invalid"] = Value::Array(invalid);
            v["history"] = match ui.record.lock() {
                Ok(r) => r.history(),
                Err(p) => p.into_inner().history(),
            };
            v["usage"] = ui.usage().await;
            Ok(v)
        }
        .await,
    )
}

impl Ui {
    /// GPU-hours per queue over each of the last hours, from the store's
    /// accounting (`/usage`); `null` when the service keeps no store.
    async fn usage(&self) -> Value {
        let Some(source) = self.view.usage_source() else {
            return Value::Null;
        };
        let now_ms = self.latest().map_or(0, |c| c.now.0);
        {
            let cached = self.usage_cache.lock().await;
            if let Some((at, v)) = &*cached
                && now_ms - at < USAGE_EVERY_MS
                && now_ms >= *at
            {
                return v.clone();
            }
        }
        let to = now_ms.div_euclid(1000);
        let mut hours = Vec::new();
        for h in (0..USAGE_HOURS).rev() {
            let (from_s, to_s) = (to - (h + 1) * 3600, to - h * 3600);
            let (reply, rx) = tokio::sync::oneshot::channel();
            let ask = trainyard_serve::http::UsageAsk {
                from_s,
                to_s,
                by: trainyard_serve::persist::UsageBy::Queue,
                reply,
            };
            if source.send(ask).await.is_err() {
                return Value::Null;
            }
            let rows = match rx.await {
                Ok(Ok(rows)) => rows,
                Ok(Err(e)) => return json!({"error": e}),
                Err(_) => return Value::Null,
            };
            let queues: serde_json::Map<String, Value> = rows
                .iter()
                .map(|r| {
                    // Milli-GPU·seconds to GPU-hours, for people.
                    let gpu_hours = r.gpu_milli_seconds as f64 / 3_600_000.0;
                    (r.queue.clone(), json!({"gpuHours": gpu_hours}))
                })
                .collect();
            hours.push(json!({"fromS": from_s, "toS": to_s, "queues": queues}));
        }
        let v = json!({"hours": hours});
        *self.usage_cache.lock().await = Some((now_ms, v.clone()));
        v
    }
}

pub async fn gpus(ui: UiState, headers: HeaderMap, Query(q): Params) -> Response {
    answer_text(
        async {
            let p = params(&q, "/ui/api/gpus", &["job"])?;
            let caller = ui.caller(&headers).await?;
            let c = ui.api.latest()?;
            let job = p("job").to_string();
            if !job.is_empty() {
                let ns = crate::auth::namespace_of(&job);
                let what = format!("see where job {job} could go");
                caller
                    .require(&crate::auth::Permission::get_pods(ns), &what)
                    .await?;
            }
            let holdings = ui.holdings(&c).await?;
            let held = super::gpus::holders(&holdings);
            let planned = c.decisions.reservations.iter().map(|r| r.job.as_str());
            let nominated = c.decisions.nominations.iter().map(|n| n.job.as_str());
            let named = held.iter().copied().chain(planned).chain(nominated);
            let v = visible_of(&caller, named).await?;
            let fit = if job.is_empty() {
                None
            } else {
                let (cc, id) = (c.clone(), job.clone());
                let found = ui
                    .api
                    .heavy("the free devices", move || {
                        Ok(trainyard_sched::free_devices_for(
                            &cc.snapshot,
                            &cc.config,
                            cc.now,
                            &id,
                        ))
                    })
                    .await?;
                // None once it has no pending pod (it started, say): the
                // map is drawn without a fit.
                found
            };
            // 40,000 devices at 5,000 nodes: off the async threads.
            tokio::task::spawn_blocking(move || {
                let fit = fit.as_ref().map(|f| (job.as_str(), f.as_slice()));
                super::gpus::map(&c, &holdings, &v, fit).to_string()
            })
            .await
            .map_err(|e| Status::internal(format!("drawing the GPU map failed: {e}")))
        }
        .await,
    )
}

impl Ui {
    /// The device holders of cycle `c`, computed once per cycle.
    async fn holdings(
        &self,
        c: &Arc<CycleView>,
    ) -> Result<Arc<Vec<trainyard_sched::NodeHoldings>>, Status> {
        let kept = match self.holdings.lock() {
            Ok(h) => h.clone(),
            Err(p) => p.into_inner().clone(),
        };
        if let Some((n, h)) = kept
            && n == c.number
        {
            return Ok(h);
        }
        let cc = c.clone();
        let h = self
            .api
            .heavy("the GPU map", move || {
                Ok(trainyard_sched::holdings(&cc.snapshot, &cc.config, cc.now))
            })
            .await?;
        let h = Arc::new(h);
        match self.holdings.lock() {
            Ok(mut k) => *k = Some((c.number, h.clone())),
            Err(p) => *p.into_inner() = Some((c.number, h.clone())),
        }
        Ok(h)
    }
}

pub async fn evictions(ui: UiState, headers: HeaderMap, Query(q): Params) -> Response {
    answer(
        async {
            let p = params(&q, "/ui/api/evictions", &["limit"])?;
            let limit = match p("limit") {
                "" => super::record::EVICTIONS,
                l => l.parse::<usize>().map_err(|_| {
                    Status::invalid_argument(format!(
                        "/ui/api/evictions: limit={l}: expected a whole number"
                    ))
                })?,
            };
            let caller = ui.caller(&headers).await?;
            let all: Vec<super::record::EvictionRecord> = match ui.record.lock() {
                Ok(r) => r.evictions.iter().rev().cloned().collect(),
                Err(p) => p.into_inner().evictions.iter().rev().cloned().collect(),
            };
            let named = all
                .iter()
                .flat_map(|e| [e.job.as_str(), e.preemptor.as_str()]);
            let v = visible_of(&caller, named).await?;
            let shown: Vec<Value> = all
                .into_iter()
                .filter(|e| v.shows_job(&e.job) || v.shows_job(&e.preemptor))
                .take(limit)
                .map(|e| serde_json::to_value(e.shown(&v)).unwrap_or(Value::Null))
                .collect();
            let cycle = ui.latest().map_or(Value::Null, |c| {
                super::cycle_json(&crate::convert::cycle(&c))
            });
            Ok(json!({"cycle": cycle, "evictions": shown}))
        }
        .await,
    )
}

pub async fn stream(ui: UiState, headers: HeaderMap) -> Response {
    let caller = match ui.caller(&headers).await {
        Ok(c) => c,
        Err(s) => return error(s),
    };
    let req = Ui::request(&caller, pb::WatchDecisionsRequest { latest: true });
    let decisions = match ui.api.watch_decisions(req).await {
        Ok(r) => r.into_inner(),
        Err(s) => return error(s),
    };
    use axum::response::IntoResponse;
    use futures::StreamExt;
    let mut stop = ui.stop.clone();
    let stopping = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    Sse::new(cycles(decisions).take_until(stopping))
        .keep_alive(
            KeepAlive::new()
                .interval(Duration::from_secs(15))
                .text("keep-alive"),
        )
        .into_response()
}

/// One `cycle` event per message of a WatchDecisions stream.
fn cycles(
    decisions: impl Stream<Item = Result<pb::CycleDecisions, Status>> + Send + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    use futures::StreamExt;
    decisions.map(|m| {
        Ok(match m {
            Ok(m) => {
                let mut jobs: Vec<&str> = m
                    .binds
                    .iter()
                    .map(|b| b.job.as_str())
                    .chain(m.evictions.iter().map(|e| e.job.as_str()))
                    .chain(m.reasons.iter().map(|r| r.job.as_str()))
                    .collect();
                jobs.sort_unstable();
                jobs.dedup();
                let cycle = m.cycle.unwrap_or_default();
                let data = json!({
                    "cycle": super::cycle_json(&cycle),
                    "binds": m.binds.len(),
                    "evictions": m.evictions.len(),
                    "pending": m.pending,
                    "missed": m.missed,
                    "jobs": jobs,
                });
                Event::default().event("cycle").data(data.to_string())
            }
            Err(s) => Event::default()
                .event("error")
                .data(json!({"error": s.message()}).to_string()),
        })
    })
}
