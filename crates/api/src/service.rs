//! The RPCs of `trainyard.v1alpha1.Scheduler`, over the service's live
//! view.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::broadcast;
use tonic::{Request, Response, Status};
use trainyard_sched::PendingJob;
use trainyard_serve::view::{CycleView, LiveView};

use crate::auth::{self, Caller, Permission, Visible};
use crate::pb::scheduler_server::Scheduler;
use crate::{ApiError, convert, explain, forecast, pb, snapshot, whatif};

/// The API's state: the view it reads.
#[derive(Clone, Debug)]
pub struct Api {
    view: Arc<LiveView>,
    /// One heavy call (WhatIf, ForecastStart, GetSnapshot) runs at a time;
    /// the others wait their turn, so that callers never take more cores
    /// from the scheduling cycle than one call does.
    heavy: Arc<tokio::sync::Semaphore>,
}

impl Api {
    pub fn new(view: Arc<LiveView>) -> Api {
        Api {
            view,
            heavy: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }

    /// `f` off the async threads, after the heavy calls before it.
    pub(crate) async fn heavy<T: Send + 'static>(
        &self,
        what: &str,
        f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, Status> {
        let _turn = self
            .heavy
            .acquire()
            .await
            .map_err(|_| Status::unavailable("the API is shutting down"))?;
        Ok(tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| Status::internal(format!("{what} failed: {e}")))??)
    }

    /// The latest cycle, or UNAVAILABLE before the first.
    pub(crate) fn latest(&self) -> Result<Arc<CycleView>, ApiError> {
        self.view.latest().borrow().clone().ok_or_else(|| {
            let r = *self.view.readiness().borrow();
            ApiError::Unavailable(if !r.synced {
                "the scheduler has not finished reading the cluster yet; try again in a moment"
                    .into()
            } else if !r.leader {
                "this scheduler replica is a standby and runs no cycle; ask the leader".into()
            } else {
                "the scheduler has not run its first cycle yet; try again in a moment".into()
            })
        })
    }
}

/// The pending entries of a cycle, by job id.
fn pending_by_job(c: &CycleView) -> BTreeMap<&str, &PendingJob> {
    c.decisions
        .pending
        .iter()
        .map(|p| (p.job.as_str(), p))
        .collect()
}

/// The queues of cycle `c`, top-down.
pub fn list_queues(c: &CycleView) -> pb::ListQueuesResponse {
    let usage = convert::usage_per_queue(&c.snapshot);
    let jobs = convert::jobs_per_queue(&c.snapshot, &c.decisions);
    let none = BTreeMap::new();
    pb::ListQueuesResponse {
        cycle: Some(convert::cycle(c)),
        queues: c
            .decisions
            .queues
            .iter()
            .map(|q| {
                let u = usage.get(&q.id).unwrap_or(&none);
                let j = jobs.get(&q.id).copied().unwrap_or_default();
                convert::queue(&c.snapshot, q, u, j)
            })
            .collect(),
    }
}

/// The jobs of cycle `c` that `f` selects, by id.
pub fn list_jobs(c: &CycleView, f: &pb::ListJobsRequest) -> pb::ListJobsResponse {
    let pending = pending_by_job(c);
    let by = convert::ByJob::new(&c.decisions);
    let tree = &c.snapshot.queues;
    let in_queue = |leaf: &str| {
        if f.queue.is_empty() {
            return true;
        }
        let path = tree.get(leaf).map_or(leaf, |id| tree.path(id));
        path == f.queue
            || path
                .strip_prefix(f.queue.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    };
    let mut jobs: Vec<pb::Job> = c
        .snapshot
        .jobs
        .iter()
        .filter(|j| in_queue(&j.queue))
        .map(|j| convert::job(c, &by, j, pending.get(j.id.as_str()).copied()))
        .filter(|j| f.namespace.is_empty() || j.namespace == f.namespace)
        .filter(|j| f.user.is_empty() || j.namespace == f.user)
        .filter(|j| f.state == 0 || j.state == f.state)
        .collect();
    jobs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    pb::ListJobsResponse {
        cycle: Some(convert::cycle(c)),
        jobs,
    }
}

/// Why job `namespace/name` waits in cycle `c`.
pub fn explain_job(
    c: &CycleView,
    r: &pb::ExplainJobRequest,
) -> Result<pb::ExplainJobResponse, ApiError> {
    let id = format!("{}/{}", r.namespace, r.name);
    let Some(job) = c.snapshot.jobs.iter().find(|j| j.id == id) else {
        return Err(ApiError::job_not_found(&c.snapshot, &r.namespace, &r.name));
    };
    let pending = pending_by_job(c).get(id.as_str()).copied();
    let mut out = match pending {
        Some(p) => explain::explain(p),
        None => pb::ExplainJobResponse {
            message: "not pending: every pod the job asked for is placed".into(),
            ..Default::default()
        },
    };
    out.cycle = Some(convert::cycle(c));
    out.job = Some(convert::job(
        c,
        &convert::ByJob::for_job(&c.decisions, &id),
        job,
        pending,
    ));
    Ok(out)
}

/// The decisions of cycle `c` as a message, with the pending reasons
/// that changed since `last` (updated).
pub fn cycle_decisions(
    c: &CycleView,
    last: &mut BTreeMap<String, (String, String)>,
    missed: u64,
) -> pb::CycleDecisions {
    let d = &c.decisions;
    let mut reasons = Vec::new();
    let mut now: BTreeMap<String, (String, String)> = BTreeMap::new();
    for p in &d.pending {
        let id = p.job.to_string();
        if last.get(&id).map(|(_, m)| m) != Some(&p.message) {
            reasons.push(convert::reason_change(&id, &p.queue, Some(p)));
        }
        now.insert(id, (p.queue.clone(), p.message.clone()));
    }
    for (id, (queue, _)) in last.iter() {
        if !now.contains_key(id) {
            reasons.push(convert::reason_change(id, queue, None));
        }
    }
    *last = now;
    pb::CycleDecisions {
        cycle: Some(convert::cycle(c)),
        binds: d.binds.iter().map(convert::bind).collect(),
        evictions: d.evictions.iter().map(convert::victim).collect(),
        reasons,
        pending: u32::try_from(d.pending.len()).unwrap_or(u32::MAX),
        missed,
    }
}

type DecisionStream = Pin<Box<dyn Stream<Item = Result<pb::CycleDecisions, Status>> + Send>>;

/// What a `WatchDecisions` stream remembers between cycles.
struct Watching {
    cycles: broadcast::Receiver<Arc<CycleView>>,
    first: Option<Arc<CycleView>>,
    last: BTreeMap<String, (String, String)>,
    caller: Caller,
}

/// `m` with only what `caller` may see by name.
async fn visible_decisions(
    caller: &Caller,
    mut m: pb::CycleDecisions,
) -> Result<pb::CycleDecisions, Status> {
    let namespaces: Vec<String> = m
        .binds
        .iter()
        .map(|b| &b.job)
        .chain(m.evictions.iter().map(|e| &e.job))
        .chain(m.reasons.iter().map(|r| &r.job))
        .map(|id| auth::namespace_of(id).to_string())
        .collect();
    let v = caller
        .visible(namespaces.iter().map(String::as_str))
        .await?;
    auth::filter_decisions(&mut m, &v);
    Ok(m)
}

fn watch_stream(w: Watching) -> DecisionStream {
    Box::pin(futures::stream::unfold(w, |mut w| async move {
        if let Some(c) = w.first.take() {
            let m = cycle_decisions(&c, &mut w.last, 0);
            return Some((visible_decisions(&w.caller, m).await, w));
        }
        let mut missed = 0;
        loop {
            match w.cycles.recv().await {
                Ok(c) => {
                    let m = cycle_decisions(&c, &mut w.last, missed);
                    return Some((visible_decisions(&w.caller, m).await, w));
                }
                Err(broadcast::error::RecvError::Lagged(n)) => missed += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }))
}

/// The namespaces of a what-if's objects (`default` for those naming
/// none, as the loader reads them).
fn object_namespaces(text: &str, scheduler_name: &str) -> Result<Vec<String>, ApiError> {
    let mut out: Vec<String> = whatif::documents(text, scheduler_name)?
        .iter()
        .map(|d| {
            d["metadata"]["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or("default")
                .to_string()
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

#[tonic::async_trait]
impl Scheduler for Api {
    async fn list_queues(
        &self,
        r: Request<pb::ListQueuesRequest>,
    ) -> Result<Response<pb::ListQueuesResponse>, Status> {
        // Any caller let in: queue totals name no job.
        Caller::of(&r)?;
        let c = self.latest()?;
        Ok(Response::new(list_queues(&c)))
    }

    async fn list_jobs(
        &self,
        r: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let caller = Caller::of(&r)?;
        let f = r.get_ref();
        for ns in [&f.namespace, &f.user] {
            if !ns.is_empty() {
                let what = format!("list the jobs of namespace {ns}");
                caller.require(&Permission::list_pods(ns), &what).await?;
            }
        }
        let c = self.latest()?;
        let mut out = list_jobs(&c, f);
        let v = caller
            .visible(out.jobs.iter().map(|j| j.namespace.as_str()))
            .await?;
        auth::filter_jobs(&mut out, &v);
        Ok(Response::new(out))
    }

    async fn explain_job(
        &self,
        r: Request<pb::ExplainJobRequest>,
    ) -> Result<Response<pb::ExplainJobResponse>, Status> {
        let caller = Caller::of(&r)?;
        let q = r.get_ref();
        // Before the lookup: NOT_FOUND would tell what exists there.
        let what = format!("explain job {}/{}", q.namespace, q.name);
        caller
            .require(&Permission::get_pods(&q.namespace), &what)
            .await?;
        let c = self.latest()?;
        Ok(Response::new(explain_job(&c, q)?))
    }

    async fn what_if(
        &self,
        r: Request<pb::WhatIfRequest>,
    ) -> Result<Response<pb::WhatIfResponse>, Status> {
        let caller = Caller::of(&r)?;
        let r = r.into_inner();
        let namespaces = match &r.job {
            Some(pb::what_if_request::Job::Resize(z)) => vec![z.namespace.clone()],
            Some(pb::what_if_request::Job::Objects(text)) => {
                object_namespaces(text, &self.view.scheduler_name)?
            }
            None => Vec::new(),
        };
        require_in(&caller, &namespaces, "run a what-if of a job").await?;
        let c = self.latest()?;
        let view = self.view.clone();
        // A cycle's worth of work.
        let mut answer = self
            .heavy("the what-if", move || what_if(&view, &c, r))
            .await?;
        let v = visible(&caller, auth::what_if_namespaces(&answer)).await?;
        auth::redact_what_if(&mut answer, &v);
        Ok(Response::new(answer))
    }

    async fn forecast_start(
        &self,
        r: Request<pb::ForecastStartRequest>,
    ) -> Result<Response<pb::ForecastStartResponse>, Status> {
        let caller = Caller::of(&r)?;
        let r = r.into_inner();
        let namespaces = match &r.job {
            Some(pb::forecast_start_request::Job::Existing(e)) => vec![e.namespace.clone()],
            Some(pb::forecast_start_request::Job::Objects(text)) => {
                object_namespaces(text, &self.view.scheduler_name)?
            }
            None => Vec::new(),
        };
        require_in(&caller, &namespaces, "forecast the start of a job").await?;
        let c = self.latest()?;
        let view = self.view.clone();
        // The engine runs cycles forward.
        let mut answer = self
            .heavy("the forecast", move || forecast_start(&view, &c, r))
            .await?;
        let named = answer
            .waits_for
            .iter()
            .map(|w| auth::namespace_of(&w.job))
            .collect();
        let v = visible(&caller, named).await?;
        auth::redact_forecast(&mut answer, &v);
        Ok(Response::new(answer))
    }

    async fn get_snapshot(
        &self,
        r: Request<pb::GetSnapshotRequest>,
    ) -> Result<Response<pb::GetSnapshotResponse>, Status> {
        let caller = Caller::of(&r)?;
        caller
            .require(
                &Permission::list_pods_everywhere(),
                "read the snapshot (every object the scheduler sees)",
            )
            .await?;
        let c = self.latest()?;
        let view = self.view.clone();
        let answer = self
            .heavy("the snapshot", move || {
                snapshot::response(&c, view.objects())
            })
            .await?;
        Ok(Response::new(answer))
    }

    type WatchDecisionsStream = DecisionStream;

    async fn watch_decisions(
        &self,
        r: Request<pb::WatchDecisionsRequest>,
    ) -> Result<Response<DecisionStream>, Status> {
        let caller = Caller::of(&r)?;
        let cycles = self.view.cycles();
        let first = if r.get_ref().latest {
            self.view.latest().borrow().clone()
        } else {
            None
        };
        Ok(Response::new(watch_stream(Watching {
            cycles,
            first,
            last: BTreeMap::new(),
            caller,
        })))
    }
}

/// The latest cycle's snapshot with the jobs `text`'s objects make (read
/// as the service reads pods), and their ids.
fn with_objects(
    view: &LiveView,
    c: &CycleView,
    text: &str,
) -> Result<(trainyard_model::Snapshot, Vec<String>), ApiError> {
    let docs = whatif::documents(text, &view.scheduler_name)?;
    let mut opts = trainyard_ingest::LoadOptions {
        scheduler_name: view.scheduler_name.clone(),
        ..trainyard_ingest::LoadOptions::default()
    };
    // `defaultQueue: ""` infers no groups; pods still go to the loader's
    // default (as the service's world reads them).
    if !view.default_queue.is_empty() {
        opts.default_queue = view.default_queue.clone();
    }
    whatif::with_objects(&c.snapshot, view.objects(), docs, &opts)
}

/// Refuses unless the caller may `get pods` in every one of `namespaces`
/// (`what`: the action, for the message).
async fn require_in(caller: &Caller, namespaces: &[String], what: &str) -> Result<(), Status> {
    for ns in namespaces {
        let what = format!("{what} in namespace {ns}");
        caller.require(&Permission::get_pods(ns), &what).await?;
    }
    Ok(())
}

/// Which of the `named` namespaces the caller may see jobs of.
async fn visible(
    caller: &Caller,
    named: std::collections::BTreeSet<&str>,
) -> Result<Visible, Status> {
    match caller {
        Caller::Trusted => Ok(Visible::All),
        _ => caller.visible(named.iter().copied()).await,
    }
}

/// A start-time forecast on the view's latest cycle `c`: of a job it
/// knows, or of the job `objects` make, as if submitted now.
pub fn forecast_start(
    view: &LiveView,
    c: &CycleView,
    r: pb::ForecastStartRequest,
) -> Result<pb::ForecastStartResponse, ApiError> {
    match r.job {
        Some(pb::forecast_start_request::Job::Existing(e)) => {
            let id = format!("{}/{}", e.namespace, e.name);
            forecast::forecast(c, &c.snapshot, &id, r.horizon_seconds)
        }
        Some(pb::forecast_start_request::Job::Objects(text)) => {
            let (mut copy, ids) = with_objects(view, c, &text)?;
            let [id] = ids.as_slice() else {
                return Err(ApiError::Invalid(format!(
                    "a forecast is of one job; the objects make {} ({})",
                    ids.len(),
                    ids.join(", ")
                )));
            };
            // Submitted now, behind the jobs that wait already.
            for j in copy.jobs.iter_mut().filter(|j| j.id == *id) {
                std::sync::Arc::make_mut(j).submit_time = c.now;
            }
            forecast::forecast(c, &copy, id, r.horizon_seconds)
        }
        None => Err(ApiError::Invalid(
            "a forecast needs a job: `existing` (namespace and name) or `objects` (a PodGroup with its pods)"
                .into(),
        )),
    }
}

/// A what-if on the view's latest cycle `c`.
pub fn what_if(
    view: &LiveView,
    c: &CycleView,
    r: pb::WhatIfRequest,
) -> Result<pb::WhatIfResponse, ApiError> {
    let (copy, jobs) = match r.job {
        Some(pb::what_if_request::Job::Resize(z)) => {
            let (copy, id) = whatif::resized(&c.snapshot, &z)?;
            (copy, vec![id])
        }
        Some(pb::what_if_request::Job::Objects(text)) => with_objects(view, c, &text)?,
        None => {
            return Err(ApiError::Invalid(
                "a what-if needs a job: `objects` (a PodGroup with its pods) or `resize`".into(),
            ));
        }
    };
    Ok(whatif::run(c, &copy, &jobs))
}
