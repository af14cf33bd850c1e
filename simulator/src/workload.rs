//! Workloads: an explicit job list, or a seeded synthetic generator.
//!
//! Job list (`kind: Workload`):
//!
//! ```yaml
//! apiVersion: trainyard.io/v1alpha1
//! kind: Workload
//! spec:
//!   jobs:
//!   - name: pretrain-1          # unique; id is "<namespace>/<name>", namespace default "sim"
//!     queue: llm
//!     submit: 2h                # seconds or "15m" / "2h" / "1d"
//!     duration: 6h              # run time of every task once started
//!     priority: 0
//!     minMember: 16             # default: all tasks
//!     topology: {preferred: leaf, required: spineBlock, maxLeaves: 2}  # optional, level names of the cluster's topology
//!     subGroups: [{name: workers, minMember: 16, topology: {required: leaf}}]
//!     preemptible: true         # default: priority below 100
//!     lostWork: {checkpoint: {every: 30m}}   # optional; default: spec.preemption.lostWork
//!     tasks:
//!     - {count: 16, subGroup: workers, requests: {cpu: "96", memory: 1Ti, nvidia.com/gpu: 8}}
//!   preemption: {graceSeconds: 30, lostWork: restart}   # optional, see crate::preemption
//! ```
//!
//! Generator (`kind: WorkloadGenerator`): job templates with an arrival
//! process, distributions for gang size and duration, and a seed.
//!
//! ```yaml
//! apiVersion: trainyard.io/v1alpha1
//! kind: WorkloadGenerator
//! spec:
//!   seed: 42
//!   templates:
//!   - name: dev
//!     queue: research
//!     count: 500
//!     arrival: {poisson: {perHour: 20}}          # or {every: 10m}, or {times: [0, 60, 3600]}
//!     start: 0                                   # first possible arrival
//!     pods: {fixed: 1}                           # fixed | uniform {min,max} | choice [..] | exponential {mean, max} | logNormal {median, sigma, max}
//!     podRequests: {cpu: "12", memory: 100Gi, nvidia.com/gpu: 1}
//!     duration: {logNormal: {median: 30m, sigma: 1.0}}  # fixed | uniform | exponential {mean} | logNormal
//!     priority: 0
//!     topology: {preferred: leaf}                # optional, as in a job list
//!     preemptible: true                          # optional, as in a job list
//!     lostWork: restart                          # optional, as in a job list
//!   preemption: {graceSeconds: 30, lostWork: {checkpoint: {every: 1h}}}   # optional
//! ```
//!
//! Each template draws from its own random stream (derived from the seed
//! and the template's name), so adding, removing or reordering templates
//! does not change the jobs of the others. Same seed, same jobs.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use trainyard_crd::RawQuantity;
use trainyard_crd::preemption::default_preemptible;
use trainyard_model::{PlacementConstraints, SubGroup, Timestamp, TopologyConstraint};

use crate::job::{SimJob, SimTask};
use crate::preemption::{LostWork, PreemptionSettings};
use crate::spec::{
    Bounded, Document, MAX_DURATION_MS, MAX_JOBS, MAX_JOBS_PER_TEMPLATE, MAX_TASKS_PER_JOB,
    MAX_WORKLOAD_TASKS, SpecError, parse_doc, parse_duration_ms, resources, typed,
};

/// A task count: 1 to [`MAX_TASKS_PER_JOB`].
type TaskCount = Bounded<1, MAX_TASKS_PER_JOB>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Doc {
    #[serde(default)]
    api_version: Option<String>,
    kind: String,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    spec: serde_json::Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobListSpec {
    jobs: Vec<JobDoc>,
    #[serde(default)]
    preemption: Option<PreemptionDoc>,
}

/// `spec.preemption`: the grace period and the lost-work model of the
/// workload's jobs (see [`crate::preemption`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PreemptionDoc {
    #[serde(default)]
    grace_seconds: Option<serde_json::Value>,
    #[serde(default)]
    lost_work: Option<serde_json::Value>,
}

impl PreemptionDoc {
    fn settings(
        doc: Option<&PreemptionDoc>,
        source: &str,
    ) -> Result<PreemptionSettings, SpecError> {
        let Some(d) = doc else {
            return Ok(PreemptionSettings::default());
        };
        let grace_ms = d
            .grace_seconds
            .as_ref()
            .map(|v| {
                parse_duration_ms(v)
                    .map_err(|e| SpecError::new(source, "spec.preemption.graceSeconds", e))
            })
            .transpose()?;
        let lost_work = d
            .lost_work
            .as_ref()
            .map(|v| lost_work(v, "spec.preemption.lostWork", source))
            .transpose()?;
        Ok(PreemptionSettings {
            grace_ms,
            lost_work,
        })
    }
}

/// A `lostWork` value at `field`.
fn lost_work(v: &serde_json::Value, field: &str, source: &str) -> Result<LostWork, SpecError> {
    LostWork::parse_value(v).map_err(|(sub, e)| {
        let at = if sub.is_empty() {
            field.to_string()
        } else {
            format!("{field}.{sub}")
        };
        SpecError::new(source, &at, e)
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct JobDoc {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    queue: String,
    submit: serde_json::Value,
    duration: serde_json::Value,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    min_member: Option<TaskCount>,
    #[serde(default)]
    sub_groups: Vec<SubGroupDoc>,
    #[serde(default)]
    topology: Option<TopologyDoc>,
    tasks: Vec<TaskDoc>,
    #[serde(default)]
    preemptible: Option<bool>,
    #[serde(default)]
    lost_work: Option<serde_json::Value>,
    /// The job's declared walltime (a duration); absent: its queue's.
    #[serde(default)]
    walltime: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SubGroupDoc {
    name: String,
    /// 0 allowed, as in a PodGroup's `subGroups`.
    min_member: Bounded<0, MAX_TASKS_PER_JOB>,
    #[serde(default)]
    topology: Option<TopologyDoc>,
}

/// `topology:` of a job, sub-group or template: level names of the
/// cluster's topology (checked by the scheduler, which rejects unknown ones).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TopologyDoc {
    #[serde(default)]
    required: Option<String>,
    #[serde(default)]
    preferred: Option<String>,
    #[serde(default)]
    max_leaves: Option<Bounded<1, { u32::MAX }>>,
}

impl TopologyDoc {
    fn constraint(
        doc: Option<&TopologyDoc>,
        field: &str,
        source: &str,
    ) -> Result<TopologyConstraint, SpecError> {
        let Some(d) = doc else {
            return Ok(TopologyConstraint::default());
        };
        for (name, v) in [("required", &d.required), ("preferred", &d.preferred)] {
            if v.as_deref().is_some_and(|s| s.trim().is_empty()) {
                return Err(SpecError::new(
                    source,
                    &format!("{field}.{name}"),
                    "expected a level name",
                ));
            }
        }
        Ok(TopologyConstraint {
            required: d.required.clone(),
            preferred: d.preferred.clone(),
            max_leaves: d.max_leaves.map(|m| m.0),
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TaskDoc {
    count: TaskCount,
    requests: BTreeMap<String, RawQuantity>,
    #[serde(default)]
    sub_group: Option<String>,
    #[serde(default)]
    node_selector: BTreeMap<String, String>,
}

/// A workload document: its jobs and its `spec.preemption` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Sorted by (submit, id).
    pub jobs: Vec<SimJob>,
    pub preemption: PreemptionSettings,
}

/// Reads a workload document: a `Workload` job list or a `WorkloadGenerator`.
/// Jobs come back sorted by (submit, id).
pub fn parse_workload(text: &str, source: &str) -> Result<Vec<SimJob>, SpecError> {
    parse_workload_spec(text, source).map(|w| w.jobs)
}

/// Like [`parse_workload`], with the document's `spec.preemption`.
pub fn parse_workload_spec(text: &str, source: &str) -> Result<Workload, SpecError> {
    let (d, doc): (Document, Doc) = parse_doc(text, source, &["Workload", "WorkloadGenerator"])?;
    workload(doc, source).map_err(|e| e.within(d.number, &d.object))
}

fn workload(doc: Doc, source: &str) -> Result<Workload, SpecError> {
    let _ = (&doc.api_version, &doc.metadata);
    let (mut jobs, preemption) = match doc.kind.as_str() {
        "Workload" => {
            let spec: JobListSpec = typed(&doc.spec, source, "spec")?;
            let p = PreemptionDoc::settings(spec.preemption.as_ref(), source)?;
            (job_list(spec, source)?, p)
        }
        "WorkloadGenerator" => {
            let spec: GeneratorSpec = typed(&doc.spec, source, "spec")?;
            let p = PreemptionDoc::settings(spec.preemption.as_ref(), source)?;
            (generate(spec, source)?, p)
        }
        k => {
            return Err(SpecError::new(
                source,
                "kind",
                format!("expected Workload or WorkloadGenerator, found {k:?}"),
            ));
        }
    };
    jobs.sort_by(|a, b| a.submit.cmp(&b.submit).then(a.id.cmp(&b.id)));
    Ok(Workload { jobs, preemption })
}

fn constraints(
    sel: &BTreeMap<String, String>,
    cache: &mut BTreeMap<BTreeMap<String, String>, Arc<PlacementConstraints>>,
) -> Arc<PlacementConstraints> {
    cache
        .entry(sel.clone())
        .or_insert_with(|| {
            Arc::new(PlacementConstraints {
                node_selector: sel.clone(),
                ..PlacementConstraints::default()
            })
        })
        .clone()
}

fn job_list(spec: JobListSpec, source: &str) -> Result<Vec<SimJob>, SpecError> {
    if spec.jobs.len() > MAX_JOBS as usize {
        return Err(SpecError::new(
            source,
            "spec.jobs",
            format!(
                "expected at most {MAX_JOBS} jobs, found {}",
                spec.jobs.len()
            ),
        ));
    }
    let mut all_tasks: u64 = 0;
    let mut out = Vec::with_capacity(spec.jobs.len());
    let mut ids = BTreeMap::new();
    let mut cache = BTreeMap::new();
    for (i, j) in spec.jobs.into_iter().enumerate() {
        let f = |field: &str| format!("spec.jobs[{i}].{field}");
        let id = format!("{}/{}", j.namespace.as_deref().unwrap_or("sim"), j.name);
        if let Some(prev) = ids.insert(id.clone(), i) {
            return Err(SpecError::new(
                source,
                &f("name"),
                format!("job {id} is also defined at spec.jobs[{prev}]"),
            ));
        }
        let submit =
            parse_duration_ms(&j.submit).map_err(|e| SpecError::new(source, &f("submit"), e))?;
        let duration = parse_duration_ms(&j.duration)
            .map_err(|e| SpecError::new(source, &f("duration"), e))?;
        let walltime_seconds = j
            .walltime
            .as_ref()
            .map(|v| walltime_s(v).map_err(|e| SpecError::new(source, &f("walltime"), e)))
            .transpose()?;
        if j.tasks.is_empty() {
            return Err(SpecError::new(
                source,
                &f("tasks"),
                "expected at least one task group",
            ));
        }
        let mut tasks = Vec::new();
        for (ti, t) in j.tasks.iter().enumerate() {
            if let Some(sg) = &t.sub_group
                && !j.sub_groups.iter().any(|s| &s.name == sg)
            {
                return Err(SpecError::new(
                    source,
                    &f(&format!("tasks[{ti}].subGroup")),
                    format!("sub-group {sg:?} is not in subGroups"),
                ));
            }
            tasks.push(SimTask {
                count: t.count.0,
                requests: resources(&t.requests, &f(&format!("tasks[{ti}].requests")), source)?,
                subgroup: t.sub_group.clone(),
                constraints: constraints(&t.node_selector, &mut cache),
            });
        }
        let total: u64 = tasks.iter().map(|t| t.count as u64).sum();
        if total > MAX_TASKS_PER_JOB as u64 {
            return Err(SpecError::new(
                source,
                &f("tasks"),
                format!("expected at most {MAX_TASKS_PER_JOB} tasks in one job, got {total}"),
            ));
        }
        let total = total as u32;
        let min_member = j.min_member.map_or(total, |m| m.0);
        if min_member > total {
            return Err(SpecError::new(
                source,
                &f("minMember"),
                format!(
                    "expected a whole number from 1 to {total} (the job's task count), found {min_member}"
                ),
            ));
        }
        all_tasks += u64::from(total);
        if all_tasks > MAX_WORKLOAD_TASKS {
            return Err(SpecError::new(
                source,
                &f("tasks"),
                format!(
                    "expected at most {MAX_WORKLOAD_TASKS} tasks in the whole workload; the jobs up to this one have {all_tasks}"
                ),
            ));
        }
        let topology = TopologyDoc::constraint(j.topology.as_ref(), &f("topology"), source)?;
        let mut subgroups = Vec::with_capacity(j.sub_groups.len());
        for (si, s) in j.sub_groups.into_iter().enumerate() {
            let topology = TopologyDoc::constraint(
                s.topology.as_ref(),
                &f(&format!("subGroups[{si}].topology")),
                source,
            )?;
            subgroups.push(SubGroup {
                name: s.name,
                min_member: s.min_member.0,
                topology,
            });
        }
        let lost = j
            .lost_work
            .as_ref()
            .map(|v| lost_work(v, &f("lostWork"), source))
            .transpose()?;
        out.push(SimJob {
            id,
            queue: j.queue,
            priority: j.priority,
            submit: Timestamp(submit as i64),
            duration_ms: duration,
            min_member,
            subgroups,
            topology,
            tasks,
            preemptible: j.preemptible.unwrap_or(default_preemptible(j.priority)),
            lost_work: lost,
            walltime_seconds,
            rejected: None,
        });
    }
    Ok(out)
}

/// A walltime: a duration above zero, in whole seconds (rounded up).
fn walltime_s(v: &serde_json::Value) -> Result<u64, String> {
    match parse_duration_ms(v)? {
        0 => Err("expected a duration above zero".into()),
        ms => Ok(ms.div_ceil(1000)),
    }
}

/// Whole seconds of a run time (ms) × `factor`, rounded up: a walltime
/// that overestimates the run `factor` times, as users' do.
fn walltime_of(duration_ms: u64, factor: f64) -> u64 {
    ((duration_ms as f64 * factor) / 1000.0).ceil() as u64
}

/// Checks a walltime factor: a number from 1 to 1000 (a walltime below
/// the run time would end every job early).
pub fn check_walltime_factor(x: f64) -> Result<f64, String> {
    if (1.0..=1000.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("expected a number from 1 to 1000, found {x}"))
    }
}

/// Gives every job that declares no walltime one of its run time ×
/// `factor` (`trainyard simulate --walltime-factor`); jobs with their own
/// keep it.
pub fn set_walltimes(jobs: &mut [SimJob], factor: f64) {
    for j in jobs.iter_mut().filter(|j| j.walltime_seconds.is_none()) {
        j.walltime_seconds = Some(walltime_of(j.duration_ms, factor));
    }
}

mod generate;
use generate::{GeneratorSpec, generate};

#[cfg(test)]
mod tests;
