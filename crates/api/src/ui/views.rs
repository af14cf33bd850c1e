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

/// A job state by the name the dashboard's filter uses.
fn state(name: &str) -> Result<i32, Status> {
    Ok(match name {
        "" => 0,
        "pending" => pb::JobState::Pending as i32,
        "partial" => pb::JobState::Partial as i32,
        "running" => pb::JobState::Running as i32,
        "terminating" => pb::JobState::Terminating as i32,
        "rejected" => pb::JobState::Rejected as i32,
        other => {
            return Err(Status::invalid_argument(format!(
                "/ui/api/jobs: state={other}: expected one of pending, partial, running, terminating, rejected"
            )));
        }
    })
}

/// What the job list shows beside ListJobs' fields: where its pods are
/// (bound before or by this cycle), when the first started, its walltime.
fn extras(job: &Job, binds: &[&trainyard_sched::Bind]) -> Value {
    let mut nodes: Vec<&str> = Vec::new();
    let mut gpus = 0u64;
    let mut start = i64::MAX;
    for t in &job.tasks {
        let node = match &t.state {
            TaskState::Bound { node, .. } => Some(node.as_str()),
            TaskState::Pending => binds
                .iter()
                .find(|b| b.task == t.key)
                .map(|b| b.node.as_str()),
        };
        if let Some(n) = node {
            if !nodes.contains(&n) {
                nodes.push(n);
            }
            gpus += t.requests.gpu;
        }
        if let Some(s) = t.started {
            start = start.min(s.0);
        }
    }
    nodes.sort_unstable();
    let placement = if nodes.is_empty() {
        Value::Null
    } else {
        json!({"nodes": nodes, "gpus": gpus / 1000})
    };
    json!({
        "placement": placement,
        "startMs": if start == i64::MAX { 0 } else { start },
        "walltimeSeconds": job.walltime_seconds.unwrap_or(0),
        "user": job.id.split_once('/').map_or("", |(ns, _)| ns),
    })
}

/// [`extras`] of each of `jobs` (by position; none without a cycle or
/// for a job not in it).
fn extras_of<'a>(
    c: Option<&'a CycleView>,
    jobs: &'a [pb::Job],
) -> impl FnMut(usize) -> serde_json::Map<String, Value> + 'a {
    let by_id: HashMap<&str, &Job> = c
        .map(|c| {
            c.snapshot
                .jobs
                .iter()
                .map(|j| (j.id.as_str(), &**j))
                .collect()
        })
        .unwrap_or_default();
    let mut binds: HashMap<&str, Vec<&trainyard_sched::Bind>> = HashMap::new();
    for b in c.iter().flat_map(|c| &c.decisions.binds) {
        binds.entry(b.job.as_str()).or_default().push(b);
    }
    let mut id = String::new();
    move |i| {
        let Some(j) = jobs.get(i) else {
            return serde_json::Map::new();
        };
        id.clear();
        id.push_str(&j.namespace);
        id.push('/');
        id.push_str(&j.name);
        let Some(job) = by_id.get(id.as_str()) else {
            return serde_json::Map::new();
        };
        match extras(job, binds.get(id.as_str()).map_or(&[], Vec::as_slice)) {
            Value::Object(add) => add,
            _ => serde_json::Map::new(),
        }
    }
}

pub async fn jobs(ui: UiState, headers: HeaderMap, Query(q): Params) -> Response {
    answer_text(
        async {
            let p = params(&q, "/ui/api/jobs", &["queue", "namespace", "user", "state"])?;
            let caller = ui.caller(&headers).await?;
            let req = pb::ListJobsRequest {
                queue: p("queue").to_string(),
                namespace: p("namespace").to_string(),
                state: state(p("state"))?,
                user: p("user").to_string(),
            };
            let r = ui
                .api
                .list_jobs(Ui::request(&caller, req))
                .await?
                .into_inner();
            // Tens of thousands of jobs take a while to print: off the
            // async threads, which the service's shell shares.
            let (printer, latest) = (ui.printer.clone(), ui.latest());
            tokio::task::spawn_blocking(move || {
                let extra = extras_of(latest.as_deref(), &r.jobs);
                printer
                    .text_with_extras(&r, "ListJobsResponse", "jobs", extra)
                    .map_err(|e| Status::internal(e.to_string()))
            })
            .await
            .map_err(|e| Status::internal(format!("printing the jobs failed: {e}")))?
        }
        .await,
    )
}

/// Every pending job's forecast, as `/ui/api/forecasts` prints it.
#[derive(Debug)]
pub struct AllForecasts {
    cycle: pb::Cycle,
    until: i64,
    jobs: BTreeMap<String, Value>,
}

pub async fn forecasts(ui: UiState, headers: HeaderMap) -> Response {
    answer(
        async {
            let caller = ui.caller(&headers).await?;
            let all = ui.all_forecasts().await?;
            let names = all
                .jobs
                .keys()
                .map(|id| crate::auth::namespace_of(id))
                .collect::<std::collections::BTreeSet<_>>();
            let v: Visible = match &caller {
                Caller::Trusted => Visible::All,
                _ => caller.visible(names.iter().copied()).await?,
            };
            let jobs: serde_json::Map<String, Value> = all
                .jobs
                .iter()
                .filter(|(id, _)| v.shows_job(id))
                .map(|(id, f)| (id.clone(), f.clone()))
                .collect();
            Ok(json!({
                "cycle": {"number": all.cycle.number, "timeMs": all.cycle.time_ms},
                "horizonMs": all.until,
                "jobs": jobs,
            }))
        }
        .await,
    )
}

impl Ui {
    /// The forecast of every pending job, made again when the one kept is
    /// older than [`FORECAST_EVERY_MS`] of cycle time.
    async fn all_forecasts(&self) -> Result<Arc<AllForecasts>, Status> {
        let mut kept = self.forecasts.lock().await;
        let c = self
            .latest()
            .ok_or_else(|| Status::unavailable("the scheduler has not run its first cycle yet"))?;
        if let Some((at, f)) = &*kept
            && c.now.0 - at < FORECAST_EVERY_MS
            && c.now.0 >= *at
        {
            return Ok(f.clone());
        }
        let cycle = crate::convert::cycle(&c);
        let at = c.now.0;
        let made = self
            .api
            .heavy("the forecasts", move || {
                let mut opts = crate::forecast::options("", FORECAST_HORIZON_SECONDS);
                opts.jobs = None;
                let all = trainyard_sim::forecast::forecast(&c.snapshot, &c.config, c.now, &opts);
                let jobs = all
                    .jobs
                    .iter()
                    .map(|j| {
                        let ms = |t: Option<trainyard_model::Timestamp>| t.map_or(0, |t| t.0);
                        let f = json!({
                            "starts": j.expected.is_some() || j.p50.is_some(),
                            "expectedMs": ms(j.expected),
                            "p50Ms": ms(j.p50),
                            "p90Ms": ms(j.p90),
                        });
                        (j.job.clone(), f)
                    })
                    .collect();
                Ok(AllForecasts {
                    cycle,
                    until: all.until.0,
                    jobs,
                })
            })
            .await?;
        let made = Arc::new(made);
        *kept = Some((at, made.clone()));
        Ok(made)
    }
}

pub async fn job(ui: UiState, headers: HeaderMap, Query(q): Params) -> Response {
    answer(
        async {
            let p = params(&q, "/ui/api/job", &["namespace", "name"])?;
            let caller = ui.caller(&headers).await?;
            let req = pb::ExplainJobRequest {
                namespace: p("namespace").to_string(),
                name: p("name").to_string(),
            };
            let r = ui
                .api
                .explain_job(Ui::request(&caller, req))
                .await?
                .into_inner();
            let explained = ui.print(&r, "ExplainJobResponse")?;
            let mut job = explained["job"].clone();
            let id = format!("{}/{}", p("namespace"), p("name"));
            let mut pods = Vec::new();
            if let Some(c) = ui.latest()
                && let Some(j) = c.snapshot.jobs.iter().find(|j| j.id == id)
            {
                let binds: Vec<&trainyard_sched::Bind> = c
                    .decisions
                    .binds
                    .iter()
                    .filter(|b| b.job.as_str() == id)
                    .collect();
                if let (Some(o), Value::Object(add)) = (job.as_object_mut(), extras(j, &binds)) {
                    o.extend(add);
                }
                pods = pods_of(j, &binds);
            }
            let (events, evictions) = match ui.record.lock() {
                Ok(r) => (r.events_of(&id), r.evictions_of(&id)),
                Err(p) => {
                    let r = p.into_inner();
                    (r.events_of(&id), r.evictions_of(&id))
                }
            };
            Ok(json!({
                "cycle": explained["cycle"],
                "job": job,
                "explain": if r.pending { explained } else { Value::Null },
                "pods": pods,
                "events": events,
                "evictions": evictions,
            }))
        }
        .await,
    )
}

/// A job's pods: where each is (or is bound by this cycle), its devices,
/// its start and nomination.
fn pods_of(j: &Job, binds: &[&trainyard_sched::Bind]) -> Vec<Value> {
    j.tasks
        .iter()
        .map(|t| {
            let (node, gpus, state) = match &t.state {
                TaskState::Bound { node, gpus } => (
                    node.clone(),
                    gpus.clone().unwrap_or_default(),
                    if t.terminating {
                        "Terminating"
                    } else {
                        "Bound"
                    },
                ),
                TaskState::Pending => match binds.iter().find(|b| b.task == t.key) {
                    Some(b) => (b.node.to_string(), b.gpus.clone(), "Bound"),
                    None => (String::new(), Vec::new(), "Pending"),
                },
            };
            let name = t.name.split_once('/').map_or(t.name.as_str(), |(_, n)| n);
            json!({
                "name": name,
                "node": node,
                "gpus": gpus,
                "state": state,
                "startMs": t.started.map_or(0, |s| s.0),
                "nominated": t.nomination.as_ref().map_or(String::new(), |n| n.node.clone()),
            })
        })
        .collect()
}

pub async fn forecast(ui: UiState, headers: HeaderMap, Query(q): Params) -> Response {
    answer(
        async {
            let p = params(
                &q,
                "/ui/api/forecast",
                &["namespace", "name", "horizonSeconds"],
            )?;
            let horizon = match p("horizonSeconds") {
                "" => 0,
                h => h.parse::<u64>().map_err(|_| {
                    Status::invalid_argument(format!(
                        "/ui/api/forecast: horizonSeconds={h}: expected whole seconds"
                    ))
                })?,
            };
            let caller = ui.caller(&headers).await?;
            let req = pb::ForecastStartRequest {
                job: Some(pb::forecast_start_request::Job::Existing(
                    pb::ExplainJobRequest {
                        namespace: p("namespace").to_string(),
                        name: p("name").to_string(),
                    },
                )),
                horizon_seconds: horizon,
            };
            let r = ui
                .api
                .forecast_start(Ui::request(&caller, req))
                .await?
                .into_inner();
            ui.print(&r, "ForecastStartResponse")
        }
        .await,
    )
}

pub async fn what_if(ui: UiState, headers: HeaderMap, Query(q): Params) -> Response {
    answer(
        async {
            let p = params(
                &q,
                "/ui/api/whatif",
                &["namespace", "name", "pods", "gpusPerPod", "minMember"],
            )?;
            let number = |k: &str| -> Result<u32, Status> {
                match p(k) {
                    "" => Ok(0),
                    v => v.parse::<u32>().map_err(|_| {
                        Status::invalid_argument(format!(
                            "/ui/api/whatif: {k}={v}: expected a whole number"
                        ))
                    }),
                }
            };
            let resize = pb::Resize {
                namespace: p("namespace").to_string(),
                name: p("name").to_string(),
                pods: number("pods")?,
                min_member: number("minMember")?,
                gpus_per_pod: number("gpusPerPod")?,
            };
            let caller = ui.caller(&headers).await?;
            let req = pb::WhatIfRequest {
                job: Some(pb::what_if_request::Job::Resize(resize)),
            };
            let r = ui
                .api
                .what_if(Ui::request(&caller, req))
                .await?
                .into_inner();
            ui.print(&r, "WhatIfResponse")
        }
        .await,
    )
}

pub async fn gpus(ui: UiState, headers: HeaderMap, Query(q): Params) -> Response {
    answer_text(
        async {
            let p = params(&q, "/ui/api/gpus", &["job"])?;
            let caller = ui.caller(&headers).await?;
            let c = ui.latest().ok_or_else(|| {
                Status::unavailable("the scheduler has not run its first cycle yet")
            })?;
            let job = p("job").to_string();
            if !job.is_empty() {
                let ns = crate::auth::namespace_of(&job);
                let what = format!("see where job {job} could go");
                caller
                    .require(&crate::auth::Permission::get_pods(ns), &what)
                    .await?;
            }
            let holdings = ui.holdings(&c).await?;
            let v = match &caller {
                Caller::Trusted => Visible::All,
                _ => {
                    let held = super::gpus::holders(&holdings);
                    let mut names: Vec<&str> = held
                        .iter()
                        .map(|id| crate::auth::namespace_of(id))
                        .collect();
                    names.extend(
                        c.decisions
                            .reservations
                            .iter()
                            .map(|r| crate::auth::namespace_of(r.job.as_str())),
                    );
                    names.extend(
                        c.decisions
                            .nominations
                            .iter()
                            .map(|n| crate::auth::namespace_of(n.job.as_str())),
                    );
                    names.sort_unstable();
                    names.dedup();
                    caller.visible(names).await?
                }
            };
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
                match found {
                    Some(f) => Some(f),
                    None => {
                        return Err(Status::not_found(format!(
                            "job {job} has no pending pod in the scheduler's latest cycle"
                        )));
                    }
                }
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
            let v = match &caller {
                Caller::Trusted => Visible::All,
                _ => {
                    let names: std::collections::BTreeSet<&str> = all
                        .iter()
                        .flat_map(|e| [e.job.as_str(), e.preemptor.as_str()])
                        .map(crate::auth::namespace_of)
                        .collect();
                    caller.visible(names).await?
                }
            };
            let shown: Vec<Value> = all
                .into_iter()
                .filter(|e| v.shows_job(&e.job) || v.shows_job(&e.preemptor))
                .take(limit)
                .map(|mut e| {
                    // One side may be hidden: named by its queue only.
                    if !v.shows_job(&e.job) {
                        e.job = String::new();
                        e.pod = String::new();
                        e.message = String::new();
                    }
                    if !v.shows_job(&e.preemptor) {
                        e.preemptor = String::new();
                        e.message = String::new();
                    }
                    serde_json::to_value(e).unwrap_or(Value::Null)
                })
                .collect();
            let cycle = ui.latest().map(|c| crate::convert::cycle(&c));
            let cycle = cycle.map_or(
                Value::Null,
                |c| json!({"number": c.number, "timeMs": c.time_ms}),
            );
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
    Sse::new(cycles(decisions))
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
                    "cycle": {"number": cycle.number, "timeMs": cycle.time_ms},
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
