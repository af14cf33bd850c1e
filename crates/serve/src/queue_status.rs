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
                "allocated": quantities(&q.allocated),
                "requested": quantities(&q.demand),
                "fairShare": quantities(&q.fair_share),
                "pendingJobs": pending.get(&q.queue).copied().unwrap_or(0),
                "runningJobs": running.get(&q.queue).copied().unwrap_or(0),
                "conditions": conditions,
            });
            (q.name.clone(), status)
        })
        .collect()
}

/// The statuses last written (of Queues, of PodGroups), to write only
/// what changed. Transition times are carried: a condition (or `phase`)
/// whose status is the one last written keeps its `lastTransitionTime`
/// (`phaseTransitionTime`), else it takes `at`.
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
                .filter(|o| o["status"] == c["status"]);
            c["lastTransitionTime"] = match old {
                Some(o) => o["lastTransitionTime"].clone(),
                None => at.into(),
            };
        }
    }
    if status.get("phase").is_some() {
        let same = before.is_some_and(|b| b["phase"] == status["phase"]);
        status["phaseTransitionTime"] = match before {
            Some(b) if same => b["phaseTransitionTime"].clone(),
            _ => at.into(),
        };
    }
    status
}

impl StatusCache {
    /// The objects of `now` whose status differs from the one last written
    /// and that `writable` accepts (Trainyard's own objects), with
    /// transition times set as of `at` (RFC 3339).
    pub fn changes(
        &mut self,
        now: BTreeMap<String, Value>,
        at: &str,
        writable: impl Fn(&str) -> bool,
    ) -> Vec<(String, Value)> {
        let changed: Vec<(String, Value)> = now
            .into_iter()
            .filter(|(name, _)| writable(name))
            .map(|(name, s)| {
                let s = with_times(s, self.written.get(&name), at);
                (name, s)
            })
            .filter(|(name, s)| self.written.get(name) != Some(s))
            .collect();
        for (name, s) in &changed {
            self.written.insert(name.clone(), s.clone());
        }
        changed
    }

    /// Forgets what was written for `name`, so it is written again (after
    /// a failed write).
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
        let first = w.changes(all.clone(), "t1", |n| n != "org");
        assert_eq!(
            first.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["team"]
        );
        assert_eq!(first[0].1["conditions"][0]["lastTransitionTime"], "t1");
        assert!(
            w.changes(all.clone(), "t2", |_| true)
                .iter()
                .all(|(n, _)| n == "org")
        );
        assert!(w.changes(all.clone(), "t3", |_| true).is_empty());
        // One condition flips: it alone takes the new time.
        let mut flipped = all;
        flipped.get_mut("team").expect("team")["conditions"][1] = condition(
            "OverQuota",
            true,
            "OverQuota",
            "nvidia.com/gpu 9 above quota 8",
        );
        let changed = w.changes(flipped, "t4", |_| true);
        assert_eq!(changed.len(), 1);
        let c = &changed[0].1["conditions"];
        assert_eq!(c[0]["lastTransitionTime"], "t1");
        assert_eq!(c[1]["lastTransitionTime"], "t4");
    }
}
