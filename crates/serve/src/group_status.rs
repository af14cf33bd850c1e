//! PodGroup status: the gang's `phase`, its pods counted by where they
//! are (`scheduled`, `running`, `succeeded`, `failed`), and its
//! `Scheduled` condition with the core's reason while it waits.
//!
//! Counts come from the pods as the API shows them ([`GroupPods`], fed by
//! the pod watch: finished pods are no job members in the snapshot, so it
//! cannot count them); the minimum, the pending reason and evictions come
//! from the snapshot and the cycle's decisions. Phases:
//!
//! | phase | when |
//! |---|---|
//! | `Evicting` | a member is terminating (reclaim, preemption, repair) |
//! | `Running` | running + succeeded pods ≥ minMember |
//! | `Scheduled` | bound (scheduled) + succeeded pods ≥ minMember |
//! | `Pending` | otherwise, while the gang has live pods |
//! | `Failed` | no live pods; at least one failed |
//! | `Succeeded` | no live pods; at least one succeeded, none failed |
//! | `Preempted` | no pods left; Trainyard evicted them for a higher-priority job |
//! | `Reclaimed` | no pods left; Trainyard evicted them for another queue's fair share |
//! | `Evicted` | no pods left; Trainyard evicted them (`IncompleteGang`, `WalltimeExceeded`) |
//! | `Deleted` | no pods left; they were deleted, not by Trainyard |
//! | `Pending` | also: no pod names the group yet (`WaitingForPods`) |
//!
//! While Trainyard evicts a group's pods, and once they are gone, an
//! `Evicted` condition names the rule and the message of the eviction;
//! it is what tells a group preempted from one deleted after a restart
//! (the status the API shows is read back).
//!
//! Pure: tested on plain values.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use trainyard_crd::keys::{KeyPlace, POD_GROUP_KEYS};
use trainyard_model::Snapshot;
use trainyard_sched::Decisions;

use crate::queue_status::condition;
use crate::relist::{Listing, object_key};

/// Where one pod of a group is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PodPlace {
    bound: bool,
    running: bool,
    succeeded: bool,
    failed: bool,
}

/// A group's pods by place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub scheduled: u32,
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
}

/// `namespace/name` of the pod's group, as the reader takes it:
/// Trainyard's key, then Kubernetes' `spec.schedulingGroup.podGroupName`,
/// then the peers' keys (docs/snapshot.md), from the pod's JSON.
pub fn group_of(pod: &Value) -> Option<String> {
    let meta = &pod["metadata"];
    let ns = meta["namespace"].as_str().unwrap_or("default");
    let get = |place: &str, key: &str| meta[place][key].as_str().filter(|v| !v.is_empty());
    let spec = || {
        pod["spec"]["schedulingGroup"]["podGroupName"]
            .as_str()
            .filter(|v| !v.is_empty())
    };
    POD_GROUP_KEYS
        .iter()
        .enumerate()
        .find_map(|(i, (key, place))| {
            let v = match place {
                KeyPlace::Label => get("labels", key),
                KeyPlace::Annotation => get("annotations", key),
                KeyPlace::LabelOrAnnotation => {
                    get("labels", key).or_else(|| get("annotations", key))
                }
            };
            let v = if i == 0 { v.or_else(spec) } else { v }?;
            Some(format!("{ns}/{v}"))
        })
}

/// The pods of every group, by place, kept from the pod watch's events
/// (a relist replaces what it no longer shows).
#[derive(Debug, Default)]
pub struct GroupPods {
    pods: BTreeMap<(String, String), (String, PodPlace)>,
    listing: Listing<(String, String)>,
}

impl GroupPods {
    pub fn list_start(&mut self) {
        self.listing.start();
    }

    pub fn list_done(&mut self) {
        self.listing.done(&mut self.pods);
    }

    pub fn applied(&mut self, pod: &Value) {
        let key = object_key(pod);
        self.listing.saw(&key);
        let Some(group) = group_of(pod) else {
            self.pods.remove(&key);
            return;
        };
        let phase = pod["status"]["phase"].as_str().unwrap_or("");
        let place = PodPlace {
            bound: pod["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty()),
            running: phase == "Running",
            succeeded: phase == "Succeeded",
            failed: phase == "Failed",
        };
        self.pods.insert(key, (group, place));
    }

    pub fn deleted(&mut self, pod: &Value) {
        self.pods.remove(&object_key(pod));
    }

    /// Counts per group (`namespace/name`).
    pub fn counts(&self) -> BTreeMap<&str, Counts> {
        let mut out: BTreeMap<&str, Counts> = BTreeMap::new();
        for (group, p) in self.pods.values() {
            let c = out.entry(group.as_str()).or_default();
            let finished = p.succeeded || p.failed;
            c.scheduled += u32::from(p.bound && !finished);
            c.running += u32::from(p.running);
            c.succeeded += u32::from(p.succeeded);
            c.failed += u32::from(p.failed);
        }
        out
    }
}

/// Trainyard's last eviction of a group's pods: the rule (`Preempted`,
/// `Reclaimed`, `IncompleteGang`, `WalltimeExceeded`), its message and
/// when (ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub reason: String,
    pub message: String,
    pub at_ms: i64,
}

/// What a group's status is made from, besides the snapshot and the
/// cycle's decisions.
pub struct Inputs<'a, B: Fn(&str) -> Option<Value>> {
    /// [`GroupPods::counts`] of this cycle.
    pub counts: &'a BTreeMap<&'a str, Counts>,
    /// Every group object (`namespace/name`), with or without pods.
    pub groups: &'a [String],
    /// Trainyard's last eviction per group.
    pub evicted: &'a BTreeMap<String, Evicted>,
    /// The status last written or shown by the API, per group.
    pub before: B,
}

/// Phases of a group with no pods left that say what took them.
const GONE: [&str; 4] = ["Preempted", "Reclaimed", "Evicted", "Deleted"];

/// The `status` of every group job of the snapshot, every group with
/// finished pods and every group object with no pods, by
/// `namespace/name`, without transition times
/// ([`crate::queue_status::StatusCache`] sets them).
pub fn statuses<B: Fn(&str) -> Option<Value>>(
    snapshot: &Snapshot,
    decisions: &Decisions,
    inputs: &Inputs<'_, B>,
) -> BTreeMap<String, Value> {
    let counts = inputs.counts;
    let pending: BTreeMap<&str, (&str, &str)> = decisions
        .pending
        .iter()
        .map(|p| (p.job.as_str(), (p.reason.code(), p.message.as_str())))
        .collect();
    let mut out = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for job in &snapshot.jobs {
        let id = job.id.as_str();
        seen.insert(id);
        let c = counts.get(id).copied().unwrap_or_default();
        let min = job.min_member;
        let phase = if job.tasks.iter().any(|t| t.terminating) {
            "Evicting"
        } else if c.running + c.succeeded >= min && c.running > 0 {
            "Running"
        } else if c.scheduled + c.succeeded >= min && c.scheduled > 0 {
            "Scheduled"
        } else {
            "Pending"
        };
        let scheduled = match pending.get(id) {
            Some((code, message)) if phase == "Pending" => {
                condition("Scheduled", false, code, message)
            }
            _ if phase == "Pending" => condition(
                "Scheduled",
                false,
                "Binding",
                &format!(
                    "{} of minMember {min} pods bound",
                    c.scheduled + c.succeeded
                ),
            ),
            _ => condition(
                "Scheduled",
                true,
                "Scheduled",
                &format!(
                    "minMember {min} bound ({} pods bound, {} running)",
                    c.scheduled, c.running
                ),
            ),
        };
        let mut st = status(phase, c, scheduled);
        if phase == "Evicting"
            && let Some(e) = inputs.evicted.get(id)
        {
            push_evicted(&mut st, e);
        }
        out.insert(id.to_string(), st);
    }
    for (&id, &c) in counts {
        if seen.contains(id) {
            continue;
        }
        // No live member left: the gang finished.
        let (phase, why) = if c.failed > 0 {
            (
                "Failed",
                format!("{} pods failed, {} succeeded", c.failed, c.succeeded),
            )
        } else {
            ("Succeeded", format!("{} pods succeeded", c.succeeded))
        };
        let done = condition("Scheduled", true, phase, &why);
        out.insert(id.to_string(), status(phase, c, done));
    }
    for id in inputs.groups {
        if !seen.contains(id.as_str()) && !counts.contains_key(id.as_str()) {
            let before = (inputs.before)(id);
            out.insert(id.clone(), without_pods(inputs.evicted.get(id), before));
        }
    }
    out
}

/// The status of a group none of whose pods exist: what took them, from
/// Trainyard's eviction or the status written before; else deleted (it
/// had pods) or waiting for its first pod.
fn without_pods(evicted: Option<&Evicted>, before: Option<Value>) -> Value {
    let before = before.unwrap_or(Value::Null);
    let shown = before["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == "Evicted"))
        .map(|c| Evicted {
            reason: c["reason"].as_str().unwrap_or("").to_string(),
            message: c["message"].as_str().unwrap_or("").to_string(),
            at_ms: 0,
        });
    let prior = before["phase"].as_str().unwrap_or("");
    let had_pods = matches!(prior, "Running" | "Scheduled" | "Evicting")
        || ["scheduled", "running"]
            .iter()
            .any(|k| before[*k].as_u64().unwrap_or(0) > 0);
    let zero = Counts::default();
    match evicted.cloned().or(shown) {
        Some(e) => {
            let phase = match e.reason.as_str() {
                "Preempted" => "Preempted",
                "Reclaimed" => "Reclaimed",
                _ => "Evicted",
            };
            let why = format!(
                "no pods left: Trainyard evicted them ({}): {}",
                e.reason, e.message
            );
            let mut st = status(phase, zero, condition("Scheduled", false, phase, &why));
            push_evicted(&mut st, &e);
            st
        }
        None if GONE.contains(&prior) => {
            let kept = before["conditions"]
                .as_array()
                .and_then(|l| l.iter().find(|c| c["type"] == "Scheduled"))
                .cloned()
                .unwrap_or_else(|| condition("Scheduled", false, prior, "no pods left"));
            status(prior, zero, kept)
        }
        None if had_pods => status(
            "Deleted",
            zero,
            condition(
                "Scheduled",
                false,
                "Deleted",
                "no pods left: they were deleted, not by Trainyard; the group is scheduled again when its pods are created again",
            ),
        ),
        None => status(
            "Pending",
            zero,
            condition(
                "Scheduled",
                false,
                "WaitingForPods",
                "no pod names this group yet",
            ),
        ),
    }
}

/// Whether `status`, last written for a group with no pods, is what the
/// group keeps while it has none (what took its pods, or waiting for its
/// first): such a group needs no status work until a pod or an eviction
/// of it appears (a cycle then skips it; thousands of finished groups
/// cost nothing).
pub fn settled_without_pods(status: &Value) -> bool {
    let phase = status["phase"].as_str().unwrap_or("");
    let waiting = phase == "Pending"
        && status["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Scheduled"))
            .is_some_and(|c| c["reason"] == "WaitingForPods");
    (GONE.contains(&phase) || waiting)
        && status["scheduled"].as_u64() == Some(0)
        && status["running"].as_u64() == Some(0)
}

fn push_evicted(status: &mut Value, e: &Evicted) {
    if let Some(list) = status["conditions"].as_array_mut() {
        list.push(condition("Evicted", true, &e.reason, &e.message));
    }
}

fn status(phase: &str, c: Counts, scheduled: Value) -> Value {
    json!({
        "phase": phase,
        "scheduled": c.scheduled,
        "running": c.running,
        "succeeded": c.succeeded,
        "failed": c.failed,
        "conditions": [scheduled],
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, node: Option<&str>, phase: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ml", "labels": {"trainyard.io/pod-group": "g"}},
               "spec": {"nodeName": node}, "status": {"phase": phase}})
    }

    fn plain(
        snapshot: &Snapshot,
        d: &Decisions,
        counts: &BTreeMap<&str, Counts>,
    ) -> BTreeMap<String, Value> {
        let inputs = Inputs {
            counts,
            groups: &[],
            evicted: &BTreeMap::new(),
            before: |_: &str| None,
        };
        statuses(snapshot, d, &inputs)
    }

    #[test]
    fn a_group_without_pods_says_what_took_them() {
        let empty = Snapshot::new(Vec::new(), Default::default(), Vec::new());
        let none = Decisions::default();
        let groups = [
            "ml/new".to_string(),
            "ml/pre".to_string(),
            "ml/del".to_string(),
            "ml/was".to_string(),
        ];
        let evicted = BTreeMap::from([(
            "ml/pre".to_string(),
            Evicted {
                reason: "Preempted".into(),
                message: "preempted for ml/urgent (priority 1000 above 50)".into(),
                at_ms: 1,
            },
        )]);
        let running = json!({"phase": "Running", "scheduled": 3, "running": 3,
            "conditions": [{"type": "Scheduled", "status": "True"}]});
        // Written before a restart: preempted, its Evicted condition on it.
        let was = json!({"phase": "Reclaimed", "scheduled": 0, "running": 0,
            "conditions": [{"type": "Scheduled", "status": "False", "reason": "Reclaimed"},
                           {"type": "Evicted", "status": "True", "reason": "Reclaimed", "message": "reclaimed for team-b"}]});
        let counts = BTreeMap::new();
        let inputs = Inputs {
            counts: &counts,
            groups: &groups,
            evicted: &evicted,
            before: |id: &str| match id {
                "ml/pre" | "ml/del" => Some(running.clone()),
                "ml/was" => Some(was.clone()),
                _ => None,
            },
        };
        let s = statuses(&empty, &none, &inputs);
        let line = |id: &str| {
            let g = &s[id];
            format!(
                "{} {}/{} {}",
                g["phase"].as_str().unwrap_or(""),
                g["scheduled"],
                g["running"],
                g["conditions"][0]["reason"].as_str().unwrap_or("")
            )
        };
        assert_eq!(line("ml/new"), "Pending 0/0 WaitingForPods");
        assert_eq!(line("ml/pre"), "Preempted 0/0 Preempted");
        assert_eq!(s["ml/pre"]["conditions"][1]["type"], "Evicted");
        assert_eq!(line("ml/del"), "Deleted 0/0 Deleted");
        assert_eq!(line("ml/was"), "Reclaimed 0/0 Reclaimed");
    }

    #[test]
    fn kubernetes_scheduling_group_comes_after_trainyards_key() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ml",
                          "annotations": {"scheduling.k8s.io/group-name": "volcano"}},
                         "spec": {"schedulingGroup": {"podGroupName": "upstream"}}});
        assert_eq!(group_of(&pod).as_deref(), Some("ml/upstream"));
        let pod = json!({"metadata": {"name": "a", "namespace": "ml",
                          "labels": {"trainyard.io/pod-group": "ours"}},
                         "spec": {"schedulingGroup": {"podGroupName": "upstream"}}});
        assert_eq!(group_of(&pod).as_deref(), Some("ml/ours"));
    }

    #[test]
    fn the_group_key_is_read_as_the_reader_reads_it() {
        let volcano = json!({"metadata": {"name": "p", "namespace": "a",
            "annotations": {"scheduling.k8s.io/group-name": "v"}}});
        assert_eq!(group_of(&volcano).as_deref(), Some("a/v"));
        let both = json!({"metadata": {"name": "p",
            "labels": {"trainyard.io/pod-group": "t"},
            "annotations": {"scheduling.k8s.io/group-name": "v"}}});
        assert_eq!(group_of(&both).as_deref(), Some("default/t"));
        assert_eq!(group_of(&json!({"metadata": {"name": "p"}})), None);
    }

    #[test]
    fn phases_follow_the_pods_and_a_relist_forgets_what_it_did_not_show() {
        let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '8', memory: 64Gi, pods: '110', nvidia.com/gpu: '8'}}\n---\napiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {minMember: 2}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ml, labels: {trainyard.io/pod-group: g}}\nspec: {schedulerName: trainyard, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '16'}}}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ml, labels: {trainyard.io/pod-group: g}}\nspec: {schedulerName: trainyard, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '1'}}}]}\n";
        let (snapshot, d) = crate::testkit::decide(text);
        let mut pods = GroupPods::default();
        pods.applied(&pod("a", None, "Pending"));
        pods.applied(&pod("b", None, "Pending"));
        let s = plain(&snapshot, &d, &pods.counts());
        let g = &s["ml/g"];
        assert_eq!(g["phase"], "Pending");
        assert_eq!(g["conditions"][0]["status"], "False");
        assert_eq!(g["conditions"][0]["reason"], "NeverFits", "{g}");

        // Both bound and running (as the API shows them; the snapshot is
        // the loaded one).
        pods.applied(&pod("a", Some("n1"), "Running"));
        pods.applied(&pod("b", Some("n1"), "Running"));
        let none = trainyard_sched::Decisions::default();
        let g = &plain(&snapshot, &none, &pods.counts())["ml/g"];
        assert_eq!(
            (g["phase"].as_str(), g["running"].as_u64()),
            (Some("Running"), Some(2))
        );

        // Finished: the pods leave the snapshot, the counts stay.
        pods.applied(&pod("a", Some("n1"), "Succeeded"));
        pods.applied(&pod("b", Some("n1"), "Failed"));
        let empty = Snapshot::new(Vec::new(), Default::default(), Vec::new());
        let g = &plain(&empty, &none, &pods.counts())["ml/g"];
        assert_eq!(g["phase"], "Failed");
        assert_eq!(
            (g["succeeded"].as_u64(), g["failed"].as_u64()),
            (Some(1), Some(1))
        );

        pods.list_start();
        pods.applied(&pod("a", Some("n1"), "Succeeded"));
        pods.list_done();
        let g = &plain(&empty, &none, &pods.counts())["ml/g"];
        assert_eq!(g["phase"], "Succeeded");
    }
}
