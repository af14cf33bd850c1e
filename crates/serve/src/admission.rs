//! Queue-admission gating: jobs wait *gated* while their queue has no room
//! for them, so a cluster autoscaler (which ignores gated pods) never adds
//! nodes for a job that its queue's limit would keep waiting anyway.
//!
//! With `service.admissionGating` on, users create their pods with the
//! scheduling gate `trainyard.io/admission` (in the pod template). Each
//! cycle the service admits gated jobs, highest priority first, then
//! oldest, while every queue on the job's path has room for all of the
//! job's pods: its allocation, plus the pending jobs already admitted (not
//! gated), plus this job, within the queue's `limit`; and, for a job that
//! is not preemptible (it runs only within quota), within its `quota`
//! too. Admitting removes the gate from every gated pod of the job at once
//! (a gang is admitted whole), with a precondition on the pod's
//! `resourceVersion` so another controller's change is not overwritten.
//! Queues without limits admit everything: the job then waits for
//! capacity, which an autoscaler can add.
//!
//! Pure except for the write ([`ungate`]): [`GatedPods`] is fed from the
//! pod watch, [`admit`] decides from the snapshot and the cycle's
//! decisions.

use std::collections::BTreeMap;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use trainyard_crd::keys::ADMISSION_GATE;
use trainyard_model::{QueueId, Resources, Snapshot};
use trainyard_sched::Decisions;

/// A gated pod: its job and its gates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gated {
    /// `namespace/name` of its job (its group's, else its own).
    pub job: String,
    /// Its gates as last seen, ours included, in order.
    pub gates: Vec<String>,
    /// Its uid (empty when the object has none).
    pub uid: String,
}

/// Pods of the service's scheduler that carry the admission gate, by
/// `(namespace, name)`.
#[derive(Debug, Default)]
pub struct GatedPods {
    pub pods: BTreeMap<(String, String), Gated>,
    listing: Option<Vec<(String, String)>>,
}

fn key(pod: &Value) -> (String, String) {
    let m = &pod["metadata"];
    (
        m["namespace"].as_str().unwrap_or("default").to_string(),
        m["name"].as_str().unwrap_or("").to_string(),
    )
}

impl GatedPods {
    pub fn list_start(&mut self) {
        self.listing = Some(Vec::new());
    }

    pub fn list_done(&mut self) {
        if let Some(mut seen) = self.listing.take() {
            seen.sort();
            self.pods.retain(|k, _| seen.binary_search(k).is_ok());
        }
    }

    /// A pod as listed or changed; `scheduler` is the service's name.
    pub fn applied(&mut self, pod: &Value, scheduler: &str) {
        let k = key(pod);
        if let Some(seen) = &mut self.listing {
            seen.push(k.clone());
        }
        let gates: Vec<&str> = pod["spec"]["schedulingGates"]
            .as_array()
            .map(|l| l.iter().filter_map(|g| g["name"].as_str()).collect())
            .unwrap_or_default();
        let ours = pod["spec"]["schedulerName"].as_str() == Some(scheduler);
        if !ours || !gates.contains(&ADMISSION_GATE) {
            self.pods.remove(&k);
            return;
        }
        let job = crate::group_status::group_of(pod).unwrap_or_else(|| format!("{}/{}", k.0, k.1));
        let gated = Gated {
            job,
            gates: gates.iter().map(|g| g.to_string()).collect(),
            uid: pod["metadata"]["uid"].as_str().unwrap_or("").to_string(),
        };
        self.pods.insert(k, gated);
    }

    pub fn deleted(&mut self, pod: &Value) {
        self.pods.remove(&key(pod));
    }
}

/// The gated pods to admit this cycle, by job in admission order.
pub fn admit(
    snapshot: &Snapshot,
    decisions: &Decisions,
    gated: &GatedPods,
) -> Vec<(String, Vec<(String, String)>)> {
    if gated.pods.is_empty() {
        return Vec::new();
    }
    let mut by_job: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    for (k, g) in &gated.pods {
        by_job.entry(g.job.as_str()).or_default().push(k.clone());
    }
    let tree = &snapshot.queues;
    // What each queue holds or is committed to: its allocation after this
    // cycle, plus the pending jobs already admitted (no pod gated).
    let mut load: BTreeMap<QueueId, Resources> = decisions
        .queues
        .iter()
        .map(|q| (q.id, q.allocated.clone()))
        .collect();
    // Allocations are after this cycle's binds: those tasks are not
    // pending any more.
    let bound_now: std::collections::BTreeSet<&trainyard_model::TaskKey> =
        decisions.binds.iter().map(|b| &b.task).collect();
    let mut candidates = Vec::new();
    for job in &snapshot.jobs {
        let Some(leaf) = tree.get(&job.queue) else {
            continue;
        };
        if by_job.contains_key(job.id.as_str()) {
            candidates.push((job, leaf));
            continue;
        }
        let mut pending = Resources::zero();
        for t in job
            .tasks
            .iter()
            .filter(|t| t.is_pending() && !bound_now.contains(&t.key))
        {
            pending.add(&t.requests);
        }
        for q in tree.ancestors(leaf) {
            load.entry(q).or_insert_with(Resources::zero).add(&pending);
        }
    }
    candidates.sort_by(|(a, _), (b, _)| {
        b.priority
            .cmp(&a.priority)
            .then(a.submit_time.cmp(&b.submit_time))
            .then(a.id.cmp(&b.id))
    });
    let mut out = Vec::new();
    for (job, leaf) in candidates {
        let needs = job.total_requests();
        let fits = tree.ancestors(leaf).all(|q| {
            let mut after = load.get(&q).cloned().unwrap_or_else(Resources::zero);
            after.add(&needs);
            let spec = tree.spec(q);
            let within_quota = job.preemptible
                || needs
                    .iter()
                    .all(|(r, _)| after.get(&r) <= spec.quota.get(&r));
            spec.limit.first_exceeded(&after).is_none() && within_quota
        });
        if !fits {
            continue;
        }
        for q in tree.ancestors(leaf) {
            load.entry(q).or_insert_with(Resources::zero).add(&needs);
        }
        if let Some(pods) = by_job.remove(job.id.as_str()) {
            out.push((job.id.clone(), pods));
        }
    }
    out
}

/// Removes the admission gate from one pod (its other gates stay): a JSON
/// patch that first tests the uid and the gates are still those last seen (a
/// namesake created since is not admitted), so a gate
/// another controller removed meanwhile is not put back (the API refuses
/// adding gates; the test fails instead and the next cycle retries).
pub async fn ungate(
    conn: &crate::conn::Conn,
    namespace: &str,
    name: &str,
    gated: &Gated,
) -> Result<(), kube::Error> {
    let seen: Vec<Value> = gated.gates.iter().map(|g| json!({"name": g})).collect();
    let others: Vec<Value> = gated
        .gates
        .iter()
        .filter(|g| *g != ADMISSION_GATE)
        .map(|g| json!({"name": g}))
        .collect();
    let mut ops = vec![
        json!({"op": "test", "path": "/spec/schedulingGates", "value": seen}),
        json!({"op": "replace", "path": "/spec/schedulingGates", "value": others}),
    ];
    if !gated.uid.is_empty() {
        // The pod seen, not a namesake created since.
        ops.insert(
            0,
            json!({"op": "test", "path": "/metadata/uid", "value": gated.uid}),
        );
    }
    let ops = Value::Array(ops);
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(conn.client().await?.clone(), namespace)
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use trainyard_ingest::{LoadOptions, Source};

    use super::*;

    fn pod(name: &str, gpus: u32, gated: bool, node: Option<&str>, created: &str) -> String {
        let gates = if gated {
            "[{name: trainyard.io/admission}, {name: other.io/x}]"
        } else {
            "[]"
        };
        let node = node.map(|n| format!("nodeName: {n}, ")).unwrap_or_default();
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, resourceVersion: '7', labels: {{trainyard.io/queue: team}}, creationTimestamp: '{created}'}}\nspec: {{schedulerName: trainyard, {node}schedulingGates: {gates}, containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '{gpus}'}}}}}}]}}\n"
        )
    }

    #[test]
    fn gated_jobs_are_admitted_in_order_while_the_queue_limit_has_room() {
        let mut text = String::from(
            "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: team}\nspec: {quota: {nvidia.com/gpu: 8}, limit: {nvidia.com/gpu: 16}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '64', memory: 512Gi, pods: '110', nvidia.com/gpu: '32'}}\n",
        );
        text.push_str(&pod(
            "running",
            4,
            false,
            Some("n1"),
            "2026-11-22T08:00:00Z",
        ));
        text.push_str(&pod("waiting", 4, false, None, "2026-11-22T08:30:00Z"));
        text.push_str(&pod("first", 8, true, None, "2026-11-22T09:00:00Z"));
        text.push_str(&pod("second", 4, true, None, "2026-11-22T09:10:00Z"));
        let loaded =
            trainyard_ingest::load(&[Source::new("t.yaml", &text)], &LoadOptions::default())
                .expect("loads");
        let d = trainyard_sched::schedule(
            &loaded.snapshot,
            &Default::default(),
            trainyard_model::Timestamp::from_secs(1_800_000_000),
        );
        let mut gated = GatedPods::default();
        for doc in trainyard_ingest::parse_documents(&Source::new("t.yaml", &text)).expect("yaml") {
            gated.applied(&doc, "trainyard");
        }
        assert_eq!(gated.pods.len(), 2);
        let g = &gated.pods[&("ml".to_string(), "first".to_string())];
        assert_eq!(g.gates, ["trainyard.io/admission", "other.io/x"]);
        // 4 running + 4 admitted pending + 8 = 16: first fits the limit;
        // second (4 more) does not.
        let admitted = admit(&loaded.snapshot, &d, &gated);
        let jobs: Vec<&str> = admitted.iter().map(|(j, _)| j.as_str()).collect();
        assert_eq!(jobs, ["ml/first"]);
    }
}
