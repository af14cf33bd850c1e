//! Why a pod waits, told where people look: the pod's `PodScheduled=False`
//! condition (what `kubectl describe pod` and `kubectl get pod -o wide`
//! show) and a `FailedScheduling` Event, both with the core's message for
//! the pod's job. Written only when the message changes, so a pod that
//! waits for hours with the same reason costs two writes, not two per
//! cycle.

use std::collections::BTreeMap;

use crate::conn::Conn;
use crate::events::{EventSink, Record};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use trainyard_model::{Snapshot, TaskKey};
use trainyard_sched::Decisions;

/// The messages last reported per pending pod.
#[derive(Debug, Default)]
pub struct Reporter {
    reported: BTreeMap<TaskKey, String>,
}

impl Reporter {
    /// The pending pods whose message differs from the one last reported,
    /// with the new message; forgets pods no longer pending. Pure.
    pub fn changes(
        &mut self,
        snapshot: &Snapshot,
        decisions: &Decisions,
    ) -> Vec<(TaskKey, String)> {
        let messages: BTreeMap<&str, &str> = decisions
            .pending
            .iter()
            .map(|p| {
                let job: &str = &p.job;
                (job, p.message.as_str())
            })
            .collect();
        let mut now: BTreeMap<TaskKey, String> = BTreeMap::new();
        for job in &snapshot.jobs {
            let id: &str = &job.id;
            let Some(message) = messages.get(id) else {
                continue;
            };
            for task in job.tasks.iter().filter(|t| t.is_pending()) {
                now.insert(task.key.clone(), (*message).to_string());
            }
        }
        let changed = now
            .iter()
            .filter(|(k, m)| self.reported.get(*k) != Some(*m))
            .map(|(k, m)| (k.clone(), m.clone()))
            .collect();
        self.reported = now;
        changed
    }
}

/// RFC 3339 in UTC, to the second, as the API writes times.
pub fn rfc3339(now: trainyard_model::Timestamp) -> String {
    match k8s_openapi::jiff::Timestamp::from_second(now.0.div_euclid(1000)) {
        Ok(t) => t.to_string(),
        Err(_) => "1970-01-01T00:00:00Z".to_string(),
    }
}

/// Writes the condition for each of `changes` and records its Event;
/// returns how many condition writes failed (logged).
pub async fn write(
    conn: &Conn,
    events: &EventSink,
    changes: Vec<(TaskKey, String)>,
    now: trainyard_model::Timestamp,
    concurrency: usize,
) -> u64 {
    let at = rfc3339(now);
    let results: Vec<bool> = futures::stream::iter(changes)
        .map(|(task, message)| {
            let at = at.clone();
            async move {
                let ns = crate::write::namespace(&task);
                let mut condition = json!({"status": {"conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": message, "lastTransitionTime": at, "lastProbeTime": null
                }]}});
                if !task.uid.is_empty() {
                    // The pod decided on, not a namesake (422 on another uid).
                    condition["metadata"] = json!({"uid": task.uid});
                }
                let status = match conn.client().await {
                    Ok(client) => Api::<Pod>::namespaced(client.clone(), ns)
                        .patch_status(
                            &task.name,
                            &PatchParams::default(),
                            &Patch::Strategic(condition),
                        )
                        .await
                        .map(|_| ()),
                    Err(e) => Err(e),
                };
                if let Err(e) = status {
                    tracing::warn!("condition of {task}: {e}");
                    return false;
                }
                events.record(Record {
                    task,
                    type_: "Warning",
                    reason: "FailedScheduling",
                    message,
                    at,
                });
                true
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.iter().filter(|ok| !**ok).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{NODE, decide, pod};

    fn cycle(r: &mut Reporter, text: &str) -> Vec<(String, String)> {
        let (snapshot, d) = decide(text);
        r.changes(&snapshot, &d)
            .into_iter()
            .map(|(k, m)| (k.to_string(), m))
            .collect()
    }

    #[test]
    fn reports_a_reason_once_until_it_changes() {
        let mut r = Reporter::default();
        let text = format!("{NODE}{}{}", pod("big", 16), pod("small", 1));
        let first = cycle(&mut r, &text);
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].0, "ml/big");
        assert!(cycle(&mut r, &text).is_empty(), "same reason: nothing new");
        // The pod goes (deleted); it comes back: reported again.
        let without = format!("{NODE}{}", pod("small", 1));
        assert!(cycle(&mut r, &without).is_empty());
        assert_eq!(cycle(&mut r, &text).len(), 1);
    }
}
