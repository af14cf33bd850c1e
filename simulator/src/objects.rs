//! Workloads from a Kubernetes object dump: `kubectl get pods,podgroups -A
//! -o yaml` style `List`s, or multi-document files of Pods and group
//! objects, as a cluster serves them.
//!
//! The objects are read by the snapshot loader ([`trainyard_ingest::load`],
//! the one conversion of Kubernetes objects into jobs), and each job whose
//! pods are all pending becomes a [`SimJob`] (the forecasts' conversion,
//! `forecast::plan::sim_job`). The objects carry no run time: it comes
//! from the annotation [`DURATION_ANNOTATION`] of the job's group object
//! (any PodGroup kind) or, when the group has none, the longest of its
//! pods', else from a default (`--default-duration`).

use std::collections::BTreeMap;

use trainyard_ingest::{LoadError, LoadOptions, Source};
use trainyard_model::{GroupProblem, Timestamp};
use trainyard_sched::PendingReason;

use crate::SimJob;
use crate::spec::SpecError;

/// The annotation giving a job's run time (a duration such as `2h`), on
/// its PodGroup or its pods.
pub const DURATION_ANNOTATION: &str = "trainyard.io/duration";

/// The jobs of a dump, and what was skipped or assumed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectWorkload {
    /// Sorted by (submit, id).
    pub jobs: Vec<SimJob>,
    /// One message each.
    pub warnings: Vec<String>,
}

/// Whether `text` is a Kubernetes object dump rather than a simulator
/// `Workload` or `WorkloadGenerator` document: it parses, holds at least
/// one object with a `kind`, and no document is Trainyard's `Workload` or
/// `WorkloadGenerator` (`apiVersion: trainyard.io/...`; Kubernetes' own
/// `scheduling.k8s.io` Workload is an object). Text that does not parse is
/// not a dump: the workload reader reports its errors.
pub fn is_object_dump(text: &str, source: &str) -> bool {
    let Ok(docs) = trainyard_ingest::parse_documents(&Source::new(source, text)) else {
        return false;
    };
    let mut any = false;
    for doc in docs.iter().filter(|d| !d.is_null()) {
        let kind = doc["kind"].as_str().unwrap_or("");
        let api = doc["apiVersion"].as_str().unwrap_or("");
        if matches!(kind, "Workload" | "WorkloadGenerator")
            && (api.is_empty() || api.starts_with("trainyard.io/"))
        {
            return false;
        }
        any |= !kind.is_empty();
    }
    any
}

/// Reads a Kubernetes object dump into the simulator's jobs.
///
/// Submit times are the jobs' (PodGroup or earliest pod
/// `creationTimestamp`) relative to the earliest in the file; jobs without
/// one arrive at 0. Jobs with a bound pod are skipped (the engine starts
/// from an empty cluster), with one warning saying how many. Jobs whose
/// Kubernetes PodGroup is missing or contradicted by its pods are kept
/// and rejected with that reason. Queues are the simulator's (`--queues`,
/// else one per queue named), so the loader's queue checks do not apply.
/// `default_duration_ms` is the run time of jobs without the
/// [`DURATION_ANNOTATION`]; without it such jobs are an error naming them.
pub fn parse_objects(
    text: &str,
    source: &str,
    default_duration_ms: Option<u64>,
) -> Result<ObjectWorkload, SpecError> {
    let src = Source::new(source, text);
    let annotations = duration_annotations(&src)?;
    let loaded = trainyard_ingest::load(std::slice::from_ref(&src), &LoadOptions::default())
        .map_err(|e| SpecError(e.0))?;
    let mut warnings = loaded.warnings;
    let snapshot = loaded.snapshot;
    if !snapshot.nodes.is_empty() {
        warnings.push(format!(
            "{source}: {} Node(s) ignored; the simulated cluster is --cluster",
            snapshot.nodes.len()
        ));
    }
    if !snapshot.external.is_empty() {
        warnings.push(format!(
            "{source}: {} pod(s) of other schedulers ignored",
            snapshot.external.len()
        ));
    }
    let mut bound = Vec::new();
    let mut missing = Vec::new();
    let mut jobs = Vec::new();
    for job in &snapshot.jobs {
        if job.tasks.iter().any(|t| !t.is_pending()) {
            bound.push(job.id.as_str());
            continue;
        }
        let duration = annotations.groups.get(&job.id).copied().or_else(|| {
            job.tasks
                .iter()
                .filter_map(|t| {
                    let key = format!("{}/{}", t.key.namespace, t.key.name);
                    annotations.pods.get(&key).copied()
                })
                .max()
        });
        let rejected = match &job.group_problem {
            Some(GroupProblem::Missing { group }) => Some(
                PendingReason::WaitingForPodGroup {
                    group: group.clone(),
                }
                .to_string(),
            ),
            Some(GroupProblem::Mismatch { message }) => Some(message.clone()),
            None => None,
        };
        // A rejected job never runs: it needs no run time.
        let duration_ms = match duration.or(default_duration_ms) {
            Some(d) => d,
            None if rejected.is_some() => 0,
            None => {
                missing.push(job.id.as_str());
                0
            }
        };
        let mut sim = crate::forecast::plan::sim_job(job);
        sim.duration_ms = duration_ms;
        sim.rejected = rejected;
        jobs.push(sim);
    }
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(10).copied().collect();
        let more = missing.len() - shown.len();
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        return Err(SpecError::file(
            source,
            format!(
                "{} job(s) have no run time: {}{more}; expected the annotation {DURATION_ANNOTATION} (a duration such as \"2h\") on their PodGroup or pods, or give --default-duration",
                missing.len(),
                shown.join(", ")
            ),
        ));
    }
    if !bound.is_empty() {
        warnings.push(format!(
            "{source}: {} job(s) with bound pods skipped (the simulation starts from an empty cluster): {}",
            bound.len(),
            bound.join(", ")
        ));
    }
    if jobs.is_empty() {
        return Err(SpecError::file(
            source,
            "has no pending jobs; expected Pods (or Lists of them) whose pods are all pending, with their PodGroups",
        ));
    }
    // Relative to the earliest known submit time; none known: 0.
    let earliest = jobs
        .iter()
        .map(|j| j.submit.0)
        .filter(|t| *t != 0)
        .min()
        .unwrap_or(0);
    for j in &mut jobs {
        j.submit = Timestamp(if j.submit.0 == 0 {
            0
        } else {
            j.submit.0 - earliest
        });
    }
    jobs.sort_by(|a, b| a.submit.cmp(&b.submit).then(a.id.cmp(&b.id)));
    Ok(ObjectWorkload { jobs, warnings })
}

/// The [`DURATION_ANNOTATION`] values of the dump's objects, in ms.
#[derive(Default)]
struct Annotations {
    /// Of group objects (any `PodGroup` kind), by `namespace/name`.
    groups: BTreeMap<String, u64>,
    /// Of Pods, by `namespace/name`.
    pods: BTreeMap<String, u64>,
}

fn duration_annotations(src: &Source) -> Result<Annotations, SpecError> {
    let docs = trainyard_ingest::parse_documents(src).map_err(SpecError::from)?;
    let mut out = Annotations::default();
    let mut errors = Vec::new();
    for (number, doc) in trainyard_ingest::present_documents(docs) {
        for object in trainyard_ingest::split_objects(vec![doc]) {
            let kind = object["kind"].as_str().unwrap_or("");
            let into = match kind {
                "Pod" => &mut out.pods,
                "PodGroup" => &mut out.groups,
                _ => continue,
            };
            let Some(value) = object["metadata"]["annotations"].get(DURATION_ANNOTATION) else {
                continue;
            };
            let meta = &object["metadata"];
            let namespace = meta["namespace"].as_str().unwrap_or("default");
            let name = meta["name"].as_str().unwrap_or("");
            let key = format!("{namespace}/{name}");
            let parsed = match value.as_str() {
                Some(s) => trainyard_crd::duration::parse_duration_ms(s).map_err(|e| e.to_string()),
                None => Err(format!(
                    "expected a duration string such as \"2h\", found {value}"
                )),
            };
            match parsed {
                Ok(ms) => {
                    into.insert(key, ms);
                }
                Err(message) => errors.push(LoadError {
                    source_name: src.name.clone(),
                    document: Some(number),
                    object: Some(format!("{kind} {key}")),
                    field: Some(format!("metadata.annotations[\"{DURATION_ANNOTATION}\"]")),
                    message,
                }),
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(SpecError(errors))
    }
}
