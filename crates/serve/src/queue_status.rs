//! Queue status from a cycle's decisions: what each Trainyard `Queue`
//! holds (`allocated`), asks for (`requested`: running plus pending,
//! capped by its limit), is owed (`fairShare`), and its pending and running
//! job counts, each over the queue and the queues below it. Written only
//! when it changed; the printer columns of `kubectl get tyq` read it.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use trainyard_model::{Resources, Snapshot};
use trainyard_sched::Decisions;

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
    decisions
        .queues
        .iter()
        .map(|q| {
            let status = json!({
                "allocated": quantities(&q.allocated),
                "requested": quantities(&q.demand),
                "fairShare": quantities(&q.fair_share),
                "pendingJobs": pending.get(&q.queue).copied().unwrap_or(0),
                "runningJobs": running.get(&q.queue).copied().unwrap_or(0),
            });
            (q.name.clone(), status)
        })
        .collect()
}

/// The statuses last written, to write only what changed.
#[derive(Debug, Default)]
pub struct QueueStatuses {
    written: BTreeMap<String, Value>,
}

impl QueueStatuses {
    /// The queues of `now` whose status differs from the one last written
    /// and that `writable` accepts (Trainyard's own Queue objects).
    pub fn changes(
        &mut self,
        now: BTreeMap<String, Value>,
        writable: impl Fn(&str) -> bool,
    ) -> Vec<(String, Value)> {
        let changed: Vec<(String, Value)> = now
            .into_iter()
            .filter(|(name, s)| writable(name) && self.written.get(name) != Some(s))
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
    use trainyard_ingest::{LoadOptions, Source};

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
        let loaded =
            trainyard_ingest::load(&[Source::new("t.yaml", text)], &LoadOptions::default())
                .expect("loads");
        let d = trainyard_sched::schedule(
            &loaded.snapshot,
            &Default::default(),
            trainyard_model::Timestamp::from_secs(1_800_000_000),
        );
        let all = statuses(&loaded.snapshot, &d);
        assert_eq!(all["team"]["runningJobs"], 1);
        assert_eq!(all["team"]["pendingJobs"], 1);
        assert_eq!(all["org"]["runningJobs"], 1, "counted for the parent too");
        assert_eq!(all["org"]["pendingJobs"], 1);
        assert_eq!(all["team"]["allocated"]["nvidia.com/gpu"], "2");
        assert_eq!(all["team"]["fairShare"]["nvidia.com/gpu"], "8");

        let mut w = QueueStatuses::default();
        let first = w.changes(all.clone(), |n| n != "org");
        assert_eq!(
            first.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["team"]
        );
        assert!(
            w.changes(all.clone(), |_| true)
                .iter()
                .all(|(n, _)| n == "org")
        );
        assert!(w.changes(all, |_| true).is_empty());
    }
}
