//! The scheduler's values as the API's messages: one function per
//! message. Amounts stay integers in the scheduler's units, each named.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::{Job, QueueId, ResourceName, Snapshot};
use trainyard_sched::decisions::{Bind, Eviction, EvictionKind, NominationDecision};
use trainyard_sched::{Decisions, PendingJob, PendingReason, QueueReport};
use trainyard_serve::view::CycleView;

use crate::pb;

/// The unit of a resource's amounts: `m`, `By`, `mGPU` or `1`.
pub fn unit(r: &ResourceName) -> &'static str {
    match r {
        ResourceName::Cpu => "m",
        ResourceName::Memory => "By",
        ResourceName::Gpu => "mGPU",
        ResourceName::Extended(_) => "1",
    }
}

pub fn cycle(c: &CycleView) -> pb::Cycle {
    pb::Cycle {
        number: c.number,
        time_ms: c.now.0,
    }
}

pub fn amount(r: &ResourceName, value: u64) -> pb::Amount {
    pb::Amount {
        resource: r.to_string(),
        unit: unit(r).to_string(),
        value,
    }
}

pub fn limit(value: Option<u64>) -> pb::Limit {
    pb::Limit {
        unlimited: value.is_none(),
        value: value.unwrap_or(0),
    }
}

/// One resource's row of queue `q`; `usage` in unit·seconds.
pub fn queue_resource(q: &QueueReport, r: &ResourceName, usage: u128) -> pb::QueueResource {
    let (allocated, demand) = (q.allocated.get(r), q.demand.get(r));
    pb::QueueResource {
        resource: r.to_string(),
        unit: unit(r).to_string(),
        quota: q.quota.get(r),
        limit: Some(limit(q.limit.get(r))),
        fair_share: q.fair_share.get(r),
        allocated,
        demand,
        pending_demand: demand.saturating_sub(allocated),
        decayed_usage: usage.to_string(),
    }
}

/// Running and pending jobs per leaf queue of `snapshot`'s tree, after
/// the cycle's `decisions`.
pub fn jobs_per_queue(snapshot: &Snapshot, decisions: &Decisions) -> BTreeMap<QueueId, (u32, u32)> {
    let pending: BTreeSet<&str> = decisions.pending.iter().map(|p| p.job.as_str()).collect();
    let mut out: BTreeMap<QueueId, (u32, u32)> = BTreeMap::new();
    for j in &snapshot.jobs {
        let Some(id) = snapshot.queues.get(&j.queue) else {
            continue;
        };
        let e = out.entry(id).or_default();
        if pending.contains(j.id.as_str()) && !j.tasks.iter().any(|t| !t.is_pending()) {
            e.1 += 1;
        } else {
            e.0 += 1;
        }
    }
    out
}

/// Queue `q` of the cycle's table; `usage` its decayed usage by resource
/// name (its leaves' summed), `jobs` its (running, pending) jobs.
pub fn queue(
    snapshot: &Snapshot,
    q: &QueueReport,
    usage: &BTreeMap<String, u128>,
    jobs: (u32, u32),
) -> pb::Queue {
    let mut names: BTreeSet<ResourceName> = BTreeSet::new();
    for r in [&q.quota, &q.fair_share, &q.allocated, &q.demand] {
        names.extend(r.names());
    }
    names.extend(q.limit.iter().map(|(r, _)| r.clone()));
    names.extend(usage.keys().map(|k| ResourceName::parse(k)));
    let spec = (q.id.0 < snapshot.queues.len()).then(|| snapshot.queues.spec(q.id));
    pb::Queue {
        name: q.name.clone(),
        path: q.queue.clone(),
        parent: q.parent.clone().unwrap_or_default(),
        depth: q.depth,
        leaf: spec.is_some() && snapshot.queues.is_leaf(q.id),
        weight: spec.map_or(1, |s| s.over_quota_weight),
        priority: spec.map_or(0, |s| s.priority),
        resources: names
            .iter()
            .map(|r| {
                let u = usage.get(r.as_str()).copied().unwrap_or(0);
                queue_resource(q, r, u)
            })
            .collect(),
        running_jobs: jobs.0,
        pending_jobs: jobs.1,
    }
}

/// Decayed usage per queue of the tree (leaves' own, summed up to the
/// top), by resource name.
pub fn usage_per_queue(snapshot: &Snapshot) -> BTreeMap<QueueId, BTreeMap<String, u128>> {
    let tree = &snapshot.queues;
    let mut out: BTreeMap<QueueId, BTreeMap<String, u128>> = BTreeMap::new();
    for (leaf, usage) in snapshot.usage.iter() {
        let Some(id) = tree.get(leaf) else {
            continue;
        };
        for at in std::iter::once(id).chain(tree.ancestors(id)) {
            let row = out.entry(at).or_default();
            for (r, v) in usage.iter() {
                *row.entry(r.to_string()).or_default() += v;
            }
        }
    }
    out
}

/// The job's state after the cycle: its own pods, this cycle's binds of
/// it, its evictions, its pending entry.
pub fn job_state(
    job: &Job,
    bound: u32,
    evicted: bool,
    pending: Option<&PendingJob>,
) -> pb::JobState {
    let rejected = job.rejected.is_some()
        || matches!(
            pending.map(|p| &p.reason),
            Some(PendingReason::Rejected { .. })
        );
    if rejected {
        pb::JobState::Rejected
    } else if evicted || job.tasks.iter().any(|t| t.terminating) {
        pb::JobState::Terminating
    } else if bound == 0 {
        pb::JobState::Pending
    } else if bound as usize >= job.tasks.len() {
        pb::JobState::Running
    } else {
        pb::JobState::Partial
    }
}

/// A cycle's binds and evictions by job, built once per answer (a
/// listing of every job would otherwise scan them once per job).
#[derive(Debug, Default)]
pub struct ByJob<'a> {
    binds: BTreeMap<&'a str, Vec<&'a Bind>>,
    evicted: std::collections::BTreeSet<&'a str>,
}

impl<'a> ByJob<'a> {
    pub fn new(d: &'a trainyard_sched::Decisions) -> ByJob<'a> {
        Self::of(d, |_| true)
    }

    /// Job `id`'s only (one job's answer).
    pub fn for_job(d: &'a trainyard_sched::Decisions, id: &str) -> ByJob<'a> {
        Self::of(d, |job| job == id)
    }

    fn of(d: &'a trainyard_sched::Decisions, keep: impl Fn(&str) -> bool) -> ByJob<'a> {
        let mut binds: BTreeMap<&str, Vec<&Bind>> = BTreeMap::new();
        for b in d.binds.iter().filter(|b| keep(b.job.as_str())) {
            binds.entry(b.job.as_str()).or_default().push(b);
        }
        ByJob {
            binds,
            evicted: d
                .evictions
                .iter()
                .map(|e| e.job.as_str())
                .filter(|j| keep(j))
                .collect(),
        }
    }
}

/// Job `job` after cycle `c` (whose binds and evictions `by` holds).
pub fn job(c: &CycleView, by: &ByJob<'_>, job: &Job, pending: Option<&PendingJob>) -> pb::Job {
    let binds: &[&Bind] = by.binds.get(job.id.as_str()).map_or(&[], Vec::as_slice);
    let evicted = by.evicted.contains(job.id.as_str());
    let mut bound = 0u32;
    let mut gpu_bound = 0u64;
    for t in &job.tasks {
        if !t.is_pending() || binds.iter().any(|b| b.task == t.key) {
            bound += 1;
            gpu_bound += t.requests.get(&ResourceName::Gpu);
        }
    }
    let (namespace, name) = job.id.split_once('/').unwrap_or(("", job.id.as_str()));
    pb::Job {
        name: name.to_string(),
        namespace: namespace.to_string(),
        queue: job.queue.clone(),
        state: job_state(job, bound, evicted, pending) as i32,
        pods_bound: bound,
        pods: u32::try_from(job.tasks.len()).unwrap_or(u32::MAX),
        min_member: job.min_member,
        gpu_milli: job.total_requests().get(&ResourceName::Gpu),
        gpu_milli_bound: gpu_bound,
        priority: job.priority,
        reason: pending
            .map(|p| p.reason.code().to_string())
            .unwrap_or_default(),
        message: pending.map(|p| p.message.clone()).unwrap_or_default(),
        age_seconds: u64::try_from((c.now.0 - job.submit_time.0) / 1000).unwrap_or(0),
        submit_time_ms: job.submit_time.0,
    }
}

pub fn bind(b: &Bind) -> pb::Bind {
    pb::Bind {
        job: b.job.to_string(),
        pod: b.task.to_string(),
        node: b.node.to_string(),
        gpus: b.gpus.clone(),
    }
}

pub fn placement(b: &Bind) -> pb::Placement {
    pb::Placement {
        pod: b.task.to_string(),
        node: b.node.to_string(),
        gpus: b.gpus.clone(),
    }
}

pub fn nomination(n: &NominationDecision) -> pb::Placement {
    pb::Placement {
        pod: n.task.to_string(),
        node: n.node.to_string(),
        gpus: n.gpus.clone(),
    }
}

pub fn victim(e: &Eviction) -> pb::Victim {
    pb::Victim {
        job: e.job.to_string(),
        pod: e.task.to_string(),
        node: e.node.to_string(),
        kind: match e.kind {
            EvictionKind::Reclaim => "reclaim",
            EvictionKind::Preempt => "preempt",
            EvictionKind::Consolidate => "consolidate",
        }
        .to_string(),
        message: e.message.clone(),
    }
}

/// The reservation a pending reason holds, if any.
pub fn reservation(reason: &PendingReason) -> Option<pb::Reservation> {
    match reason {
        PendingReason::Reserved {
            start,
            starts_in_seconds,
            nodes,
            domain,
            backfilled,
            ..
        } => Some(pb::Reservation {
            start_ms: start.0,
            starts_in_seconds: *starts_in_seconds,
            nodes: nodes.clone(),
            domain: domain.clone().unwrap_or_default(),
            backfilled: *backfilled,
        }),
        _ => None,
    }
}

/// A job's pending entry as a change (`None`: it no longer waits).
pub fn reason_change(job: &str, queue: &str, p: Option<&PendingJob>) -> pb::ReasonChange {
    pb::ReasonChange {
        job: job.to_string(),
        queue: queue.to_string(),
        reason: p.map(|p| p.reason.code().to_string()).unwrap_or_default(),
        message: p.map(|p| p.message.clone()).unwrap_or_default(),
    }
}

#[cfg(test)]
pub(crate) mod tests;
