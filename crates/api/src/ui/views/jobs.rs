//! The job list, a job's page, the forecasts and the what-if
//! (docs/ui.md: `/ui/api/jobs`, `job`, `forecasts`, `forecast`, `whatif`).

use super::*;

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

/// Where task `t` is: its node and known devices, bound before this
/// cycle or by one of its `binds`; `None` while it waits.
fn placed<'a>(
    t: &'a trainyard_model::Task,
    binds: &[&'a trainyard_sched::Bind],
) -> Option<(&'a str, &'a [u32])> {
    match &t.state {
        TaskState::Bound { node, gpus } => Some((node.as_str(), gpus.as_deref().unwrap_or(&[]))),
        TaskState::Pending => binds
            .iter()
            .find(|b| b.task == t.key)
            .map(|b| (b.node.as_str(), b.gpus.as_slice())),
    }
}

/// What the job list shows beside ListJobs' fields: where its pods are
/// (bound before or by this cycle), when the first started, its walltime.
fn extras(job: &Job, binds: &[&trainyard_sched::Bind]) -> Value {
    let mut nodes: Vec<&str> = Vec::new();
    let mut gpus = 0u64;
    let mut start = i64::MAX;
    for t in &job.tasks {
        if let Some((n, _)) = placed(t, binds) {
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
        json!({"nodes": nodes, "gpuMilli": gpus})
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
            tokio::task::spawn_blocking(move || print_jobs(&printer, latest.as_deref(), &r))
                .await
                .map_err(|e| Status::internal(format!("printing the jobs failed: {e}")))?
        }
        .await,
    )
}

/// ListJobs' answer `r` as `/ui/api/jobs` prints it: each job with its
/// [`extras`] from cycle `latest`.
pub fn print_jobs(
    printer: &crate::json::Printer,
    latest: Option<&CycleView>,
    r: &pb::ListJobsResponse,
) -> Result<String, Status> {
    let extra = extras_of(latest, &r.jobs);
    printer
        .text_with_extras(r, "ListJobsResponse", "jobs", extra)
        .map_err(|e| Status::internal(e.to_string()))
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
            let v = visible_of(&caller, all.jobs.keys().map(String::as_str)).await?;
            let jobs: serde_json::Map<String, Value> = all
                .jobs
                .iter()
                .filter(|(id, _)| v.shows_job(id))
                .map(|(id, f)| (id.clone(), f.clone()))
                .collect();
            Ok(json!({
                "cycle": super::super::cycle_json(&all.cycle),
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
        let c = self.api.latest()?;
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
            // Other jobs they name are shown as far as the caller may see.
            let named = events
                .iter()
                .flat_map(|e| e.names.iter().map(String::as_str))
                .chain(
                    evictions
                        .iter()
                        .flat_map(|e| [e.job.as_str(), e.preemptor.as_str()]),
                );
            let v = visible_of(&caller, named).await?;
            let events: Vec<_> = events.into_iter().map(|e| e.shown(&v)).collect();
            let evictions: Vec<_> = evictions.into_iter().map(|e| e.shown(&v)).collect();
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
            let at = placed(t, binds);
            let (node, gpus) = at.unwrap_or(("", &[]));
            let state = match (at, t.terminating) {
                (None, _) => "Pending",
                (Some(_), true) => "Terminating",
                (Some(_), false) => "Bound",
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
