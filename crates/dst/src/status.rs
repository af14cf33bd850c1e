//! What users read, checked like the rest (issue 43): with the later
//! dimensions on (`Faults::policy_churn`), the service's status writes
//! land on the API's Queues and PodGroups as merge patches, and at the
//! end of a run (kubelets stopped for its last seconds, so the pods hold
//! still while the service cycles) each Queue's allocated GPUs and each
//! PodGroup's bound count must equal what the pods say.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::Api;
use crate::check::{Checks, gpus_of};

/// Seconds at the end of a run without kubelet steps: the pods hold
/// still, the service's cycles catch up.
pub const SETTLE_MS: i64 = 5_000;

/// Writes `status` patches onto the objects of `key` (`name` or
/// `namespace/name`), as `PATCH .../status` does; a gone object is
/// skipped (a 404).
/// Returns the writes the API refused (`key: error`).
pub fn write(api: &mut Api, resource: &str, changes: &[(String, Value)]) -> Vec<String> {
    let mut refused = Vec::new();
    for (key, patch) in changes {
        let (ns, name) = key.split_once('/').unwrap_or(("", key.as_str()));
        let Some(mut obj) = api.get(resource, ns, name) else {
            continue;
        };
        trainyard_serve::queue_status::apply_merge_patch(&mut obj["status"], patch);
        if let Err(e) = api.update(resource, obj, true) {
            refused.push(format!("{key}: {e}"));
        }
    }
    refused
}

fn bound_live(p: &Value) -> bool {
    p["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty())
        && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

impl Checks {
    /// Each Queue's `allocated` GPUs and each PodGroup's `scheduled` as
    /// the pods say (Trainyard's pods, bound, not finished; a queue or
    /// group with a pod still terminating is not compared: what it holds
    /// is the scheduler's to decide until the pod is gone).
    pub fn statuses_follow_the_pods(&mut self, api: &Api) {
        let pods: Vec<Value> = api
            .list("/pods")
            .into_iter()
            .filter(|p| p["spec"]["schedulerName"] == "trainyard")
            .collect();
        let groups: BTreeMap<String, Value> = api
            .list("trainyard.io/podgroups")
            .into_iter()
            .map(|g| (g["metadata"]["name"].as_str().unwrap_or("").to_string(), g))
            .collect();
        let mut held: BTreeMap<String, i64> = BTreeMap::new();
        let mut bound: BTreeMap<String, u64> = BTreeMap::new();
        let mut unsettled: Vec<String> = Vec::new();
        for p in &pods {
            // The gang as the reader finds it (`upstream::gang_of`): an
            // upstream gang's queue is its pods' label, and its status is
            // not a Trainyard PodGroup's.
            let gang = crate::upstream::gang_of(p);
            let group = match &gang {
                Some(crate::upstream::Gang::Trainyard(g)) => Some(g.as_str()),
                _ => None,
            };
            let by_label = || {
                p["metadata"]["labels"]["trainyard.io/queue"]
                    .as_str()
                    .unwrap_or("default")
            };
            let queue = match &gang {
                Some(crate::upstream::Gang::Trainyard(g)) => match groups.get(g) {
                    Some(obj) => obj["spec"]["queue"].as_str().unwrap_or("default"),
                    // A pod whose group does not exist is no member.
                    None => continue,
                },
                Some(crate::upstream::Gang::Upstream(g)) => {
                    if api.get(crate::upstream::KEY, "ml", g).is_none() {
                        continue;
                    }
                    by_label()
                }
                None => by_label(),
            };
            if !p["metadata"]["deletionTimestamp"].is_null() {
                unsettled.push(queue.to_string());
                unsettled.extend(group.map(str::to_string));
                continue;
            }
            if bound_live(p) {
                *held.entry(queue.to_string()).or_default() += gpus_of(p);
                if let Some(g) = group {
                    *bound.entry(g.to_string()).or_default() += 1;
                }
            }
        }
        for q in api.list("trainyard.io/queues") {
            let name = q["metadata"]["name"].as_str().unwrap_or("").to_string();
            if unsettled.contains(&name) || q["status"].is_null() {
                continue;
            }
            let shown = q["status"]["allocated"]["nvidia.com/gpu"]
                .as_str()
                .and_then(|v| v.parse::<i64>().ok());
            let want = held.get(&name).copied().unwrap_or(0);
            if shown != Some(want) {
                self.violations.push(format!(
                    "Queue {name} status says {} GPUs allocated, its pods hold {want}: {}",
                    shown.map_or("no".to_string(), |v| v.to_string()),
                    q["status"]
                ));
            }
        }
        for (name, g) in &groups {
            if unsettled.contains(name) || g["status"].is_null() {
                continue;
            }
            let shown = g["status"]["scheduled"].as_u64();
            let want = bound.get(name).copied().unwrap_or(0);
            if shown != Some(want) {
                self.violations.push(format!(
                    "PodGroup {name} status says {} pods scheduled, {want} are bound: {}",
                    shown.map_or("no".to_string(), |v| v.to_string()),
                    g["status"]
                ));
            }
        }
        self.status_checks += 1;
    }
}
