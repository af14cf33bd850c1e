//! The status of the upstream `scheduling.k8s.io` PodGroup (Kubernetes
//! 1.36 `v1alpha2`, 1.37 `v1beta1`; KEP-4671, KEP-5832) for the groups
//! whose pods Trainyard schedules. kube-scheduler writes it only for the
//! groups it schedules, so for pods with `schedulerName: trainyard`
//! Trainyard must.
//!
//! Two condition types are Trainyard's to write; every other field of the
//! status (`resourceClaimStatuses`) and every condition of another type
//! is left as the API shows it:
//!
//! | condition | status / reason | when |
//! |---|---|---|
//! | scheduled (`PodGroupInitiallyScheduled` in v1beta1, `PodGroupScheduled` in v1alpha2) | `True` / `Scheduled` | bound + succeeded pods (not terminating) ≥ the group's minimum |
//! | | `False` / `SchedulerError` | the core's pending code is `SchedulerError` (the pods disagree on `schedulerName` or priority) |
//! | | `False` / `Unschedulable` | the core's pending message, for any other wait |
//! | | as it was | binds in flight, or no pod left: nothing new to say |
//! | `DisruptionTarget` | `True` / `PreemptionByScheduler` | Trainyard evicted the group's pods (reclaim, preemption, consolidation) |
//! | | `False` / `Scheduled` | the minimum is bound again with pods other than the evicted ones |
//!
//! In v1beta1 the scheduled condition never goes back to `False` once
//! `True` (as the API documents it), also when the `True` is read back
//! from the API after a restart; in v1alpha2 it follows the group.
//!
//! A group is Trainyard's when one of its pods (`spec.schedulingGroup.
//! podGroupName`) has Trainyard's `schedulerName`, or the snapshot has a
//! job with its id (`namespace/name`) and no pod of another scheduler
//! names it. A group none of whose pods is Trainyard's is never written
//! (kube-scheduler's, or not started).
//!
//! Conditions follow metav1.Condition: `lastTransitionTime` kept while
//! the status stays the same, `observedGeneration` the group's
//! `metadata.generation`. `conditions` is a list-map keyed by type, but a
//! merge patch replaces lists whole: the patch carries the list the API
//! shows with Trainyard's two types replaced.
//!
//! Pure: tested on plain values.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use trainyard_sched::{EvictionKind, decisions::Eviction};

use crate::queue_status::condition;

/// The API group of the upstream Workload and PodGroup.
pub const GROUP: &str = "scheduling.k8s.io";

/// The type of the condition that says Trainyard evicted the group.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// The pending code of a group whose pods disagree on `schedulerName` or
/// priority (the core's `PendingReason::code()`).
pub const SCHEDULER_ERROR: &str = "SchedulerError";

/// The version of `scheduling.k8s.io` Trainyard watches and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum UpstreamVersion {
    /// Kubernetes 1.37.
    V1Beta1,
    /// Kubernetes 1.36 (feature gate `GenericWorkload`).
    V1Alpha2,
}

impl UpstreamVersion {
    /// Every version, the preferred first.
    pub const ALL: [UpstreamVersion; 2] = [UpstreamVersion::V1Beta1, UpstreamVersion::V1Alpha2];

    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamVersion::V1Beta1 => "v1beta1",
            UpstreamVersion::V1Alpha2 => "v1alpha2",
        }
    }

    pub fn parse(version: &str) -> Option<UpstreamVersion> {
        UpstreamVersion::ALL
            .into_iter()
            .find(|v| v.as_str() == version)
    }

    /// The type of the condition that says the group was scheduled.
    pub fn scheduled_type(self) -> &'static str {
        match self {
            UpstreamVersion::V1Beta1 => "PodGroupInitiallyScheduled",
            UpstreamVersion::V1Alpha2 => "PodGroupScheduled",
        }
    }

    /// Whether the scheduled condition stays `True` once it is.
    pub fn sticky(self) -> bool {
        self == UpstreamVersion::V1Beta1
    }

    /// The version to watch among those the server serves the PodGroup
    /// in: v1beta1, else v1alpha2, else none.
    pub fn pick<'a>(served: impl IntoIterator<Item = &'a str>) -> Option<UpstreamVersion> {
        let served: Vec<&str> = served.into_iter().collect();
        UpstreamVersion::ALL
            .into_iter()
            .find(|v| served.contains(&v.as_str()))
    }
}

/// `namespace/name` of the upstream PodGroup a pod names
/// (`spec.schedulingGroup.podGroupName`).
pub fn group_of(pod: &Value) -> Option<String> {
    let name = pod["spec"]["schedulingGroup"]["podGroupName"]
        .as_str()
        .filter(|n| !n.is_empty())?;
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    Some(format!("{ns}/{name}"))
}

type PodKey = (String, String);

use crate::relist::{Listing, object_key as pod_key};

/// Where one pod of an upstream group is, and whose it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Place {
    ours: bool,
    bound: bool,
    succeeded: bool,
    finished: bool,
    terminating: bool,
}

/// An upstream group's pods as the watch shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Members {
    /// Pods with Trainyard's `schedulerName`, and with another's.
    pub ours: u32,
    pub others: u32,
    /// Bound, neither finished nor terminating.
    pub bound: u32,
    pub terminating: u32,
    pub succeeded: u32,
    /// The pods counted in `bound`.
    pub live: BTreeSet<PodKey>,
}

/// The pods of every upstream group, kept from the pod watch's events (a
/// relist replaces what it no longer shows).
#[derive(Debug, Default)]
pub struct UpstreamPods {
    pods: BTreeMap<PodKey, (String, Place)>,
    listing: Listing<PodKey>,
}

impl UpstreamPods {
    pub fn list_start(&mut self) {
        self.listing.start();
    }

    pub fn list_done(&mut self) {
        self.listing.done(&mut self.pods);
    }

    /// A pod as listed or changed; `scheduler` is Trainyard's
    /// `schedulerName`.
    pub fn applied(&mut self, pod: &Value, scheduler: &str) {
        let key = pod_key(pod);
        self.listing.saw(&key);
        let Some(group) = group_of(pod) else {
            self.pods.remove(&key);
            return;
        };
        let phase = pod["status"]["phase"].as_str().unwrap_or("");
        let name = pod["spec"]["schedulerName"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or("default-scheduler");
        let place = Place {
            ours: name == scheduler,
            bound: pod["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty()),
            succeeded: phase == "Succeeded",
            finished: matches!(phase, "Succeeded" | "Failed"),
            terminating: !pod["metadata"]["deletionTimestamp"].is_null(),
        };
        self.pods.insert(key, (group, place));
    }

    pub fn deleted(&mut self, pod: &Value) {
        self.pods.remove(&pod_key(pod));
    }

    /// Each group's members, by `namespace/name`.
    pub fn members(&self) -> BTreeMap<&str, Members> {
        let mut out: BTreeMap<&str, Members> = BTreeMap::new();
        for (key, (group, p)) in &self.pods {
            let m = out.entry(group.as_str()).or_default();
            if p.ours {
                m.ours += 1;
            } else {
                m.others += 1;
            }
            m.succeeded += u32::from(p.succeeded);
            if p.finished {
                continue;
            }
            if p.terminating {
                m.terminating += 1;
            } else if p.bound {
                m.bound += 1;
                m.live.insert(key.clone());
            }
        }
        out
    }
}

/// An upstream PodGroup as the watch shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSeen {
    pub generation: Option<i64>,
    /// `schedulingPolicy.gang.minCount`; 1 for a basic policy.
    pub min_count: u32,
    /// `status.conditions` as the API shows them.
    pub conditions: Vec<Value>,
}

impl GroupSeen {
    pub fn of(object: &Value) -> GroupSeen {
        let min = object["spec"]["schedulingPolicy"]["gang"]["minCount"]
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(1);
        GroupSeen {
            generation: object["metadata"]["generation"].as_i64(),
            min_count: min.max(1),
            conditions: object["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        }
    }
}

/// The upstream PodGroups, by `namespace/name`, kept from their watch.
#[derive(Debug, Default)]
pub struct UpstreamGroups {
    pub groups: BTreeMap<String, GroupSeen>,
    listing: Listing<String>,
}

fn group_key(o: &Value) -> String {
    let (ns, name) = pod_key(o);
    format!("{ns}/{name}")
}

impl UpstreamGroups {
    pub fn list_start(&mut self) {
        self.listing.start();
    }

    pub fn list_done(&mut self) {
        self.listing.done(&mut self.groups);
    }

    pub fn applied(&mut self, object: &Value) {
        let key = group_key(object);
        self.listing.saw(&key);
        self.groups.insert(key, GroupSeen::of(object));
    }

    pub fn deleted(&mut self, object: &Value) {
        self.groups.remove(&group_key(object));
    }
}

/// Trainyard's eviction of a group's pods, kept until the group's
/// minimum is bound again with other pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disrupted {
    pub message: String,
    /// The evicted pods.
    pub pods: BTreeSet<PodKey>,
    pub at_ms: i64,
}

/// Records this cycle's evictions by the core (reclaim, preemption,
/// consolidation) of the groups in `groups`.
pub fn note_evictions(
    disrupted: &mut BTreeMap<String, Disrupted>,
    evictions: &[Eviction],
    groups: &BTreeMap<String, GroupSeen>,
    now_ms: i64,
) {
    let mut fresh: BTreeMap<&str, Vec<&Eviction>> = BTreeMap::new();
    for e in evictions {
        if groups.contains_key(e.job.as_str()) {
            fresh.entry(e.job.as_str()).or_default().push(e);
        }
    }
    for (job, list) in fresh {
        let Some(first) = list.first() else { continue };
        let what = match first.kind {
            EvictionKind::Reclaim => "reclaimed",
            EvictionKind::Preempt => "preempted",
            EvictionKind::Consolidate => "moved (consolidation)",
        };
        let message = format!(
            "Trainyard {what} {} of the group's pods for {}: {}",
            list.len(),
            first.preemptor,
            first.message
        );
        let pods = list
            .iter()
            .map(|e| (e.task.namespace.clone(), e.task.name.clone()))
            .collect();
        disrupted.insert(
            job.to_string(),
            Disrupted {
                message,
                pods,
                at_ms: now_ms,
            },
        );
    }
}

/// What one group's conditions are made from.
#[derive(Clone, Copy, Debug)]
pub struct Group<'a> {
    /// The group's minimum (the job's, else the PodGroup's `minCount`).
    pub min: u32,
    pub members: &'a Members,
    /// The core's pending code and message, when the job waits.
    pub pending: Option<(&'a str, &'a str)>,
    /// Trainyard's last eviction of the group, not cleared yet.
    pub disrupted: Option<&'a Disrupted>,
    /// Trainyard's conditions as last written or, when none were, as the
    /// API shows them.
    pub before: &'a [Value],
}

/// Trainyard's conditions of one group this cycle (without times and
/// generation); `None` where the condition stays as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Wanted {
    pub scheduled: Option<Value>,
    pub disruption: Option<Value>,
}

fn find<'a>(list: &'a [Value], kind: &str) -> Option<&'a Value> {
    list.iter().find(|c| c["type"] == kind)
}

/// Trainyard's two conditions of a group in `version`.
pub fn wanted(version: UpstreamVersion, g: &Group<'_>) -> Wanted {
    let min = g.min.max(1);
    let m = g.members;
    let placed = m.bound + m.succeeded;
    let kind = version.scheduled_type();
    let was_true = find(g.before, kind).is_some_and(|c| c["status"] == "True");
    let scheduled = if version.sticky() && was_true {
        None
    } else if placed >= min {
        Some(condition(
            kind,
            true,
            "Scheduled",
            &format!("{placed} pods bound of minCount {min}"),
        ))
    } else {
        match g.pending {
            Some((code, message)) if code == SCHEDULER_ERROR => {
                Some(condition(kind, false, SCHEDULER_ERROR, message))
            }
            Some((_, message)) => Some(condition(kind, false, "Unschedulable", message)),
            None => None,
        }
    };
    // Bound again with pods other than those evicted: the disruption is
    // over (after a restart, with no memory of the pods, the minimum bound
    // and none terminating).
    let rebound = match g.disrupted {
        Some(d) => m.live.iter().filter(|p| !d.pods.contains(p)).count() >= min as usize,
        None => m.bound >= min && m.terminating == 0,
    };
    let disruption = match g.disrupted {
        Some(d) if !rebound => Some(condition(
            DISRUPTION_TARGET,
            true,
            "PreemptionByScheduler",
            &d.message,
        )),
        _ if rebound
            && (g.disrupted.is_some()
                || find(g.before, DISRUPTION_TARGET).is_some_and(|c| c["status"] == "True")) =>
        {
            Some(condition(
                DISRUPTION_TARGET,
                false,
                "Scheduled",
                &format!("the group's minimum ({min}) is bound again since Trainyard evicted it"),
            ))
        }
        _ => None,
    };
    Wanted {
        scheduled,
        disruption,
    }
}

/// Trainyard's conditions as last written, per group, to write only what
/// changed (compared, when nothing was written, with what the API shows).
#[derive(Debug, Default)]
pub struct UpstreamCache {
    written: BTreeMap<String, Vec<Value>>,
}

/// Whether `kind` is one of Trainyard's two condition types in `version`.
fn ours(version: UpstreamVersion, kind: &Value) -> bool {
    kind == version.scheduled_type() || kind == DISRUPTION_TARGET
}

impl UpstreamCache {
    /// Trainyard's conditions of `id` as last written, else as `shown`.
    pub fn before(&self, version: UpstreamVersion, id: &str, shown: &[Value]) -> Vec<Value> {
        match self.written.get(id) {
            Some(w) => w.clone(),
            None => shown
                .iter()
                .filter(|c| ours(version, &c["type"]))
                .cloned()
                .collect(),
        }
    }

    /// The status patch (`{"conditions": [...]}`) that writes `wanted`
    /// for group `id`, or `None` when it is written (or shown) already.
    /// `shown` is the group's conditions as the API shows them,
    /// `generation` its `metadata.generation`, `at` the time (RFC 3339).
    pub fn change(
        &mut self,
        version: UpstreamVersion,
        id: &str,
        wanted: Wanted,
        seen: &GroupSeen,
        at: &str,
    ) -> Option<Value> {
        let before = self.before(version, id, &seen.conditions);
        let mut mine: Vec<Value> = before.clone();
        let mut changed = false;
        for mut c in [wanted.scheduled, wanted.disruption].into_iter().flatten() {
            let old = find(&before, c["type"].as_str().unwrap_or(""));
            c["lastTransitionTime"] = match old {
                Some(o) if o["status"] == c["status"] && o["lastTransitionTime"].is_string() => {
                    o["lastTransitionTime"].clone()
                }
                _ => at.into(),
            };
            if let Some(g) = seen.generation {
                c["observedGeneration"] = g.into();
            }
            if old == Some(&c) {
                continue;
            }
            changed = true;
            match mine.iter_mut().find(|o| o["type"] == c["type"]) {
                Some(slot) => *slot = c,
                None => mine.push(c),
            }
        }
        if !changed {
            // Shown already (after a restart): remembered, not written.
            self.written.entry(id.to_string()).or_insert(before);
            return None;
        }
        // The list the API shows, Trainyard's types replaced in place (or
        // added): other writers' conditions stay.
        let mut list: Vec<Value> = seen
            .conditions
            .iter()
            .map(|c| match c["type"].as_str() {
                Some(kind) if ours(version, &c["type"]) => find(&mine, kind).unwrap_or(c).clone(),
                _ => c.clone(),
            })
            .collect();
        for c in &mine {
            if find(&seen.conditions, c["type"].as_str().unwrap_or("")).is_none() {
                list.push(c.clone());
            }
        }
        self.written.insert(id.to_string(), mine);
        Some(json!({ "conditions": list }))
    }

    /// Forgets what was written for `id` (after a failed write, or when
    /// the group is gone or no longer Trainyard's).
    pub fn forget(&mut self, id: &str) {
        self.written.remove(id);
    }

    /// Keeps only the groups `keep` says.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.written.retain(|id, _| keep(id));
    }
}

/// Everything the machine keeps for the upstream groups.
#[derive(Debug, Default)]
pub struct Upstream {
    pub pods: UpstreamPods,
    pub groups: UpstreamGroups,
    pub cache: UpstreamCache,
    pub disrupted: BTreeMap<String, Disrupted>,
}

/// Whether group `id` is Trainyard's: a pod of ours names it, or the
/// snapshot has its job and no other scheduler's pod names it.
pub fn is_ours(members: Option<&Members>, has_job: bool) -> bool {
    match members {
        Some(m) => m.ours > 0 || (has_job && m.others == 0),
        None => has_job,
    }
}

#[cfg(test)]
#[path = "upstream_status_tests.rs"]
mod tests;
