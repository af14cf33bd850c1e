//! Queue status from a cycle's decisions: what each Trainyard `Queue`
//! holds (`allocated`), asks for (`requested`: running plus pending,
//! capped by its limit), is owed (`fairShare`), and its pending and running
//! job counts, each over the queue and the queues below it, and its
//! conditions: `Ready` (in the tree), `OverQuota` (it holds more than its
//! quota of a resource: the share above quota is what reclaim may take
//! back), `AtLimit` (a job waits on this queue's limit). Written only when
//! it changed ([`StatusCache`]); the printer columns of `kubectl get tyq`
//! read it.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use trainyard_model::{ResourceName, Resources, Snapshot};
use trainyard_sched::{Decisions, PendingReason};

/// One condition as computed, before its `lastTransitionTime` is set from
/// the one last written ([`StatusCache`]).
pub fn condition(kind: &str, status: bool, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": if status { "True" } else { "False" },
           "reason": reason, "message": message})
}

/// `resources` as Kubernetes quantities by resource name: CPU and GPUs
/// from milli-units (`2`, `500m`), memory in bytes, other resources as
/// counts. Zero amounts are left out.
pub fn quantities(resources: &Resources) -> BTreeMap<String, String> {
    resources
        .iter()
        .map(|(name, v)| {
            let milli = matches!(
                name,
                trainyard_model::ResourceName::Cpu | trainyard_model::ResourceName::Gpu
            );
            let text = if milli && v % 1000 != 0 {
                format!("{v}m")
            } else if milli {
                (v / 1000).to_string()
            } else {
                v.to_string()
            };
            (name.to_string(), text)
        })
        .collect()
}

/// `amounts` with GPUs always named, `0` when none: the printer columns
/// of `kubectl get tyq` show a zero, not a blank.
fn with_gpus(mut amounts: BTreeMap<String, String>) -> BTreeMap<String, String> {
    amounts
        .entry(ResourceName::Gpu.to_string())
        .or_insert_with(|| "0".into());
    amounts
}

/// The `status` of every queue after a cycle, by queue name. Pure.
pub fn statuses(snapshot: &Snapshot, decisions: &Decisions) -> BTreeMap<String, Value> {
    // Queue name -> path, and the counts per path (a job counts for its
    // queue and every ancestor).
    let path_of: BTreeMap<&str, &str> = decisions
        .queues
        .iter()
        .map(|q| (q.name.as_str(), q.queue.as_str()))
        .collect();
    let mut pending: BTreeMap<String, u32> = BTreeMap::new();
    let mut running: BTreeMap<String, u32> = BTreeMap::new();
    let count = |map: &mut BTreeMap<String, u32>, path: &str| {
        let mut prefix = String::new();
        for part in path.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            *map.entry(prefix.clone()).or_default() += 1;
        }
    };
    for p in &decisions.pending {
        count(&mut pending, &p.queue);
    }
    for job in &snapshot.jobs {
        if job.tasks.iter().any(|t| !t.is_pending()) {
            let path = path_of
                .get(job.queue.as_str())
                .copied()
                .unwrap_or(job.queue.as_str());
            count(&mut running, path);
        }
    }
    // Queues (by path) a pending job waits on the limit of.
    let mut at_limit: BTreeMap<&str, &str> = BTreeMap::new();
    for p in &decisions.pending {
        if let PendingReason::QueueAtLimit { queue, .. } = &p.reason {
            at_limit.entry(queue.as_str()).or_insert(p.message.as_str());
        }
    }
    decisions
        .queues
        .iter()
        .map(|q| {
            let over: Vec<String> = q
                .allocated
                .iter()
                .filter(|(name, used)| {
                    let quota = q.quota.get(name);
                    (quota > 0 || *name == ResourceName::Gpu) && *used > quota
                })
                .map(|(name, used)| {
                    let one = |v: u64| {
                        let mut r = Resources::zero();
                        r.set(&name, v);
                        quantities(&r)
                            .remove(&name.to_string())
                            .unwrap_or_else(|| "0".into())
                    };
                    format!(
                        "{name} {} above quota {}",
                        one(used),
                        one(q.quota.get(&name))
                    )
                })
                .collect();
            let limit = at_limit.get(q.queue.as_str());
            let conditions = vec![
                condition(
                    "Ready",
                    true,
                    "InTree",
                    "the queue is in the tree and schedulable",
                ),
                if over.is_empty() {
                    condition("OverQuota", false, "WithinQuota", "allocated within quota")
                } else {
                    condition(
                        "OverQuota",
                        true,
                        "OverQuota",
                        &format!(
                            "{}; reclaim may take back the part above quota",
                            over.join(", ")
                        ),
                    )
                },
                match limit {
                    Some(message) => condition("AtLimit", true, "QueueAtLimit", message),
                    None => condition(
                        "AtLimit",
                        false,
                        "BelowLimit",
                        "no job waits on this queue's limit",
                    ),
                },
            ];
            let status = json!({
                "allocated": with_gpus(quantities(&q.allocated)),
                "requested": with_gpus(quantities(&q.demand)),
                "fairShare": with_gpus(quantities(&q.fair_share)),
                "pendingJobs": pending.get(&q.queue).copied().unwrap_or(0),
                "runningJobs": running.get(&q.queue).copied().unwrap_or(0),
                "conditions": conditions,
            });
            (q.name.clone(), status)
        })
        .collect()
}

/// The `status` of each queue left out of the tree (`invalid`: name ->
/// reason): `Ready` `False` with the reason, and what its jobs hold and
/// ask as the pods say (its bound pods keep running; nothing new is
/// placed for it). Pure.
pub fn invalid_statuses(
    snapshot: &Snapshot,
    invalid: &BTreeMap<String, String>,
) -> BTreeMap<String, Value> {
    invalid
        .iter()
        .map(|(name, why)| {
            let mut allocated = Resources::zero();
            let mut requested = Resources::zero();
            let (mut running, mut pending) = (0u32, 0u32);
            for job in snapshot.jobs.iter().filter(|j| &j.queue == name) {
                let mut bound = false;
                for t in &job.tasks {
                    requested.add(&t.requests);
                    if !t.is_pending() {
                        allocated.add(&t.requests);
                        bound = true;
                    }
                }
                if bound {
                    running += 1;
                } else {
                    pending += 1;
                }
            }
            let status = json!({
                "allocated": with_gpus(quantities(&allocated)),
                "requested": with_gpus(quantities(&requested)),
                "fairShare": with_gpus(BTreeMap::new()),
                "pendingJobs": pending,
                "runningJobs": running,
                "conditions": [condition("Ready", false, "Invalid", &format!(
                    "not scheduled: {why}; its bound pods keep running, its pending jobs wait until the Queue is fixed"
                ))],
            });
            (name.clone(), status)
        })
        .collect()
}

/// The statuses last written (of Queues, of PodGroups), to write only
/// what changed. A status is compared with the one last written or, when
/// none was (a restart, a new leader, a failed write), with the one the
/// API shows. Transition times are carried from that same status: a
/// condition (or `phase`) whose status did not change keeps its
/// `lastTransitionTime` (`phaseTransitionTime`), else it takes `at`.
#[derive(Debug, Default)]
pub struct StatusCache {
    written: BTreeMap<String, Value>,
}

/// `status` with transition times from `before` where nothing changed,
/// else `at`.
fn with_times(mut status: Value, before: Option<&Value>, at: &str) -> Value {
    if let Some(conditions) = status["conditions"].as_array_mut() {
        for c in conditions {
            let old = before
                .and_then(|b| b["conditions"].as_array())
                .and_then(|l| l.iter().find(|o| o["type"] == c["type"]))
                .filter(|o| o["status"] == c["status"] && o["lastTransitionTime"].is_string());
            c["lastTransitionTime"] = match old {
                Some(o) => o["lastTransitionTime"].clone(),
                None => at.into(),
            };
        }
    }
    if status.get("phase").is_some() {
        let same = before
            .is_some_and(|b| b["phase"] == status["phase"] && b["phaseTransitionTime"].is_string());
        status["phaseTransitionTime"] = match before {
            Some(b) if same => b["phaseTransitionTime"].clone(),
            _ => at.into(),
        };
    }
    status
}

/// The JSON merge patch (RFC 7386) that turns each of `olds` into `new`:
/// `new` with `null` for every key an old object has and `new` lacks, at
/// every level of nested objects (an empty `allocated: {}` removes
/// nothing in a merge patch; `allocated: {"nvidia.com/gpu": null}` does).
/// Arrays are replaced whole.
pub fn merge_patch(olds: &[&Value], new: &Value) -> Value {
    let Some(fields) = new.as_object() else {
        return new.clone();
    };
    let mut out = serde_json::Map::new();
    for (k, v) in fields {
        let below: Vec<&Value> = olds.iter().filter_map(|o| o.get(k)).collect();
        let v = if v.is_object() && below.iter().any(|b| b.is_object()) {
            merge_patch(&below, v)
        } else {
            v.clone()
        };
        out.insert(k.clone(), v);
    }
    for old in olds {
        for k in old.as_object().into_iter().flat_map(|o| o.keys()) {
            if !fields.contains_key(k) {
                out.insert(k.clone(), Value::Null);
            }
        }
    }
    Value::Object(out)
}

/// Applies the JSON merge patch `patch` onto `target` (RFC 7386), as the
/// API server does: what tests and the service's simulation use to land
/// the patches [`merge_patch`] makes.
pub fn apply_merge_patch(target: &mut Value, patch: &Value) {
    let Some(fields) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    for (k, v) in fields {
        if v.is_null() {
            if let Some(m) = target.as_object_mut() {
                m.remove(k);
            }
        } else {
            apply_merge_patch(&mut target[k], v);
        }
    }
}

impl StatusCache {
    /// The merge patches for the objects of `now` whose status differs
    /// from the one last written (or, when none was, from the one the API
    /// shows), with transition times set as of `at` (RFC 3339).
    /// `observed(name)` is the status the API shows (`Value::Null` for
    /// none), or `None` for an object the service does not write (not
    /// one of Trainyard's own, or gone).
    pub fn changes(
        &mut self,
        now: BTreeMap<String, Value>,
        at: &str,
        observed: impl Fn(&str) -> Option<Value>,
    ) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (name, status) in now {
            // Unchanged since written: nothing to read or write (the
            // common case, without a copy of what the API shows).
            if let Some(w) = self.written.get(&name)
                && with_times(status.clone(), Some(w), at) == *w
            {
                continue;
            }
            let Some(shown) = observed(&name) else {
                continue;
            };
            let written = self.written.get(&name);
            let before = written.unwrap_or(&shown);
            let status = with_times(status, Some(before).filter(|b| b.is_object()), at);
            if written == Some(&status) {
                continue;
            }
            if written.is_none() && shown == status {
                // The API shows it already (written before a restart).
                self.written.insert(name, status);
                continue;
            }
            let mut olds = vec![&shown];
            olds.extend(written);
            let patch = merge_patch(&olds, &status);
            self.written.insert(name.clone(), status);
            out.push((name, patch));
        }
        out
    }

    /// The status last written for `name`, if any.
    pub fn last(&self, name: &str) -> Option<&Value> {
        self.written.get(name)
    }

    /// Forgets what was written for `name`, so it is compared with what
    /// the API shows again (after a failed write).
    pub fn forget(&mut self, name: &str) {
        self.written.remove(name);
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn quantities_in_kubernetes_form() {
        let mut r = Resources::zero();
        r.cpu = 2500;
        r.memory = 64 << 30;
        r.gpu = 8000;
        let q = quantities(&r);
        assert_eq!(q["cpu"], "2500m");
        assert_eq!(q["memory"], (64u64 << 30).to_string());
        assert_eq!(q["nvidia.com/gpu"], "8");
    }

    #[test]
    fn counts_roll_up_and_unchanged_statuses_are_not_written_again() {
        let text = "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: org}\nspec: {quota: {nvidia.com/gpu: 8}}\n---\napiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: team}\nspec: {parent: org, quota: {nvidia.com/gpu: 8}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '8', memory: 64Gi, pods: '110', nvidia.com/gpu: '8'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ml, labels: {trainyard.io/queue: team}}\nspec: {schedulerName: trainyard, nodeName: n1, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '2'}}}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ml, labels: {trainyard.io/queue: team}}\nspec: {schedulerName: trainyard, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '16'}}}]}\n";
        let (snapshot, d) = crate::testkit::decide(text);
        let all = statuses(&snapshot, &d);
        assert_eq!(all["team"]["runningJobs"], 1);
        assert_eq!(all["team"]["pendingJobs"], 1);
        assert_eq!(all["org"]["runningJobs"], 1, "counted for the parent too");
        assert_eq!(all["org"]["pendingJobs"], 1);
        assert_eq!(all["team"]["allocated"]["nvidia.com/gpu"], "2");
        assert_eq!(all["team"]["fairShare"]["nvidia.com/gpu"], "8");

        let conditions: Vec<String> = all["team"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| {
                format!(
                    "{}={} {}: {}",
                    c["type"].as_str().unwrap_or(""),
                    c["status"].as_str().unwrap_or(""),
                    c["reason"].as_str().unwrap_or(""),
                    c["message"].as_str().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(
            conditions,
            [
                "Ready=True InTree: the queue is in the tree and schedulable",
                "OverQuota=False WithinQuota: allocated within quota",
                "AtLimit=False BelowLimit: no job waits on this queue's limit"
            ]
        );

        let mut w = StatusCache::default();
        let first = w.changes(all.clone(), "t1", |n| (n != "org").then_some(Value::Null));
        assert_eq!(
            first.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["team"]
        );
        assert_eq!(first[0].1["conditions"][0]["lastTransitionTime"], "t1");
        assert!(
            w.changes(all.clone(), "t2", |_| Some(Value::Null))
                .iter()
                .all(|(n, _)| n == "org")
        );
        assert!(
            w.changes(all.clone(), "t3", |_| Some(Value::Null))
                .is_empty()
        );
        // One condition flips: it alone takes the new time.
        let mut flipped = all;
        flipped.get_mut("team").expect("team")["conditions"][1] = condition(
            "OverQuota",
            true,
            "OverQuota",
            "nvidia.com/gpu 9 above quota 8",
        );
        let changed = w.changes(flipped, "t4", |_| Some(Value::Null));
        assert_eq!(changed.len(), 1);
        let c = &changed[0].1["conditions"];
        assert_eq!(c[0]["lastTransitionTime"], "t1");
        assert_eq!(c[1]["lastTransitionTime"], "t4");
    }

    #[test]
    fn a_map_emptied_is_patched_with_nulls_and_a_restart_keeps_the_times() {
        let mut w = StatusCache::default();
        let busy = json!({"allocated": {"nvidia.com/gpu": "8", "cpu": "4"}, "runningJobs": 1,
            "conditions": [condition("Ready", true, "InTree", "ok")]});
        let shown = w.changes(BTreeMap::from([("q".to_string(), busy)]), "t1", |_| {
            Some(Value::Null)
        });
        let shown = shown[0].1.clone();
        // The queue's last job is gone: GPUs 0, no CPU left.
        let idle = json!({"allocated": {"nvidia.com/gpu": "0"}, "runningJobs": 0,
            "conditions": [condition("Ready", true, "InTree", "ok")]});
        let patch = w.changes(
            BTreeMap::from([("q".to_string(), idle.clone())]),
            "t2",
            |_| Some(shown.clone()),
        );
        assert_eq!(
            patch[0].1["allocated"],
            json!({"nvidia.com/gpu": "0", "cpu": null}),
            "the CPU amount is removed, not left behind"
        );
        assert_eq!(patch[0].1["conditions"][0]["lastTransitionTime"], "t1");

        // After a restart the API's status is the reference: unchanged,
        // nothing is written; its transition time is kept.
        let mut after = StatusCache::default();
        let mut on_api = shown.clone();
        apply_merge_patch(&mut on_api, &patch[0].1);
        assert_eq!(on_api["allocated"], json!({"nvidia.com/gpu": "0"}));
        assert!(
            after
                .changes(
                    BTreeMap::from([("q".to_string(), idle.clone())]),
                    "t3",
                    |_| { Some(on_api.clone()) }
                )
                .is_empty()
        );
        let flipped = json!({"allocated": {"nvidia.com/gpu": "0"}, "runningJobs": 0,
            "conditions": [condition("Ready", false, "Invalid", "bad")]});
        let mut again = StatusCache::default();
        let p = again.changes(BTreeMap::from([("q".to_string(), flipped)]), "t4", |_| {
            Some(on_api.clone())
        });
        assert_eq!(p[0].1["conditions"][0]["lastTransitionTime"], "t4");
    }
}
