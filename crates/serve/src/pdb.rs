//! PodDisruptionBudgets kept from the watch, so reclaim and preemption
//! choose victims the Eviction API will accept.
//!
//! The core knows no PDBs. Each cycle, a running job with a pod that a PDB
//! currently protects (its `status.disruptionsAllowed` is 0, its selector
//! matches the pod in the PDB's namespace) is shown to the core as not
//! preemptible, so the core looks for other victims. An eviction still
//! refused (the budget changed between the watch and the eviction: 429)
//! is a reason, not a crash: the write fails, its assumption is forgotten,
//! and the next cycle, with the PDB's new status, decides again. A job
//! protected this way keeps its queue's other rules (quota, fair share):
//! only its eligibility as a victim changes, for this cycle.
//!
//! Pure: tested on plain values.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;
use trainyard_model::{LabelSelector, LabelSelectorOperator, NodeSelectorRequirement, Snapshot};

/// One PDB: its selector and how many disruptions it allows now.
#[derive(Clone, Debug, PartialEq)]
struct Budget {
    selector: Option<LabelSelector>,
    allowed: i64,
}

/// The PDBs by `(namespace, name)`.
#[derive(Debug, Default)]
pub struct Pdbs {
    by_key: BTreeMap<(String, String), Budget>,
    listing: Option<BTreeSet<(String, String)>>,
}

fn key(o: &Value) -> (String, String) {
    let m = &o["metadata"];
    (
        m["namespace"].as_str().unwrap_or("default").to_string(),
        m["name"].as_str().unwrap_or("").to_string(),
    )
}

/// A `metav1.LabelSelector` from JSON; `None` when it selects nothing
/// (absent, as the Eviction API treats it) or cannot be read.
fn selector(v: &Value) -> Option<LabelSelector> {
    if !v.is_object() {
        return None;
    }
    let match_labels = v["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let mut match_expressions = Vec::new();
    for e in v["matchExpressions"].as_array().into_iter().flatten() {
        let operator = match e["operator"].as_str()? {
            "In" => LabelSelectorOperator::In,
            "NotIn" => LabelSelectorOperator::NotIn,
            "Exists" => LabelSelectorOperator::Exists,
            "DoesNotExist" => LabelSelectorOperator::DoesNotExist,
            _ => return None,
        };
        match_expressions.push(NodeSelectorRequirement {
            key: e["key"].as_str()?.to_string(),
            operator,
            values: e["values"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    Some(LabelSelector {
        match_labels,
        match_expressions,
    })
}

impl Pdbs {
    pub fn list_start(&mut self) {
        self.listing = Some(BTreeSet::new());
    }

    pub fn list_done(&mut self) {
        if let Some(seen) = self.listing.take() {
            self.by_key.retain(|k, _| seen.contains(k));
        }
    }

    pub fn applied(&mut self, pdb: &Value) {
        let k = key(pdb);
        if let Some(seen) = &mut self.listing {
            seen.insert(k.clone());
        }
        let budget = Budget {
            selector: selector(&pdb["spec"]["selector"]),
            // Until the disruption controller has written a status, the
            // budget allows nothing (as the Eviction API then answers).
            allowed: pdb["status"]["disruptionsAllowed"].as_i64().unwrap_or(0),
        };
        self.by_key.insert(k, budget);
    }

    pub fn deleted(&mut self, pdb: &Value) {
        self.by_key.remove(&key(pdb));
    }

    /// `snapshot` with every running job that has a pod a PDB protects now
    /// marked not preemptible (shared otherwise); the ids of those jobs.
    pub fn protect(&self, snapshot: Arc<Snapshot>) -> (Arc<Snapshot>, Vec<String>) {
        let blocking: Vec<(&str, &LabelSelector)> = self
            .by_key
            .iter()
            .filter(|(_, b)| b.allowed <= 0)
            .filter_map(|((ns, _), b)| Some((ns.as_str(), b.selector.as_ref()?)))
            .collect();
        if blocking.is_empty() {
            return (snapshot, Vec::new());
        }
        let protected: Vec<usize> = snapshot
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| {
                j.preemptible
                    && j.tasks.iter().any(|t| {
                        !t.is_pending()
                            && !t.terminating
                            && blocking
                                .iter()
                                .any(|(ns, sel)| t.key.namespace == *ns && sel.matches(&t.labels))
                    })
            })
            .map(|(i, _)| i)
            .collect();
        if protected.is_empty() {
            return (snapshot, Vec::new());
        }
        let mut s = (*snapshot).clone();
        let mut ids = Vec::new();
        for i in protected {
            Arc::make_mut(&mut s.jobs[i]).preemptible = false;
            ids.push(s.jobs[i].id.clone());
        }
        (Arc::new(s), ids)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use trainyard_ingest::{LoadOptions, Source};

    use super::*;

    #[test]
    fn a_pod_under_a_budget_with_no_disruption_left_protects_its_job() {
        let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '8', memory: 64Gi, pods: '110', nvidia.com/gpu: '8'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ml, labels: {app: db}}\nspec: {schedulerName: trainyard, nodeName: n1, containers: [{name: c}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ml, labels: {app: web}}\nspec: {schedulerName: trainyard, nodeName: n1, containers: [{name: c}]}\n";
        let loaded =
            trainyard_ingest::load(&[Source::new("t.yaml", text)], &LoadOptions::default())
                .expect("loads");
        let snap = Arc::new(loaded.snapshot);
        let mut pdbs = Pdbs::default();
        let pdb = |allowed: i64, op: &str| {
            json!({"metadata": {"name": "p", "namespace": "ml"},
                   "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": op, "values": ["db"]}]}},
                   "status": {"disruptionsAllowed": allowed}})
        };
        pdbs.applied(&pdb(1, "In"));
        let (same, ids) = pdbs.protect(snap.clone());
        assert!(
            Arc::ptr_eq(&same, &snap) && ids.is_empty(),
            "one disruption allowed"
        );
        pdbs.applied(&pdb(0, "In"));
        let (s, ids) = pdbs.protect(snap.clone());
        assert_eq!(ids, ["ml/a"]);
        assert!(
            !s.jobs
                .iter()
                .find(|j| j.id == "ml/a")
                .expect("a")
                .preemptible
        );
        assert!(
            Arc::ptr_eq(&s.jobs[1], &snap.jobs[1]),
            "the other job is shared"
        );
        pdbs.applied(&pdb(0, "NotIn"));
        assert_eq!(pdbs.protect(snap.clone()).1, ["ml/b"]);
        // Another namespace's budget does not apply.
        let mut other = pdb(0, "In");
        other["metadata"]["namespace"] = json!("web");
        pdbs.deleted(&pdb(0, "In"));
        pdbs.applied(&other);
        assert!(pdbs.protect(snap).1.is_empty());
    }

    /// Consolidation honours budgets: scenario 83's 6 + 6 case, eval-b a
    /// bare pod (never moved), so only moving eval-a would make room for
    /// train. A budget with no disruption left over eval-a's pod protects
    /// it: nothing moves, and train's message says why; with one
    /// disruption allowed, eval-a moves.
    #[test]
    fn consolidation_moves_no_job_a_budget_protects() {
        let text = "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: team}\nspec: {}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '96', memory: 1Ti, pods: '110', nvidia.com/gpu: '8'}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n2}\nstatus: {allocatable: {cpu: '96', memory: 1Ti, pods: '110', nvidia.com/gpu: '8'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: eval-a-0, namespace: ml, labels: {trainyard.io/queue: team, app: eval}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: eval-a, uid: u1, controller: true}]}\nspec: {schedulerName: trainyard, nodeName: n1, containers: [{name: c, resources: {requests: {cpu: '4', nvidia.com/gpu: '2'}}}]}\nstatus: {phase: Running, startTime: '2026-11-22T09:50:00Z'}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: eval-b-0, namespace: ml, labels: {trainyard.io/queue: team}}\nspec: {schedulerName: trainyard, nodeName: n2, containers: [{name: c, resources: {requests: {cpu: '4', nvidia.com/gpu: '2'}}}]}\nstatus: {phase: Running, startTime: '2026-11-22T08:00:00Z'}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: train, namespace: ml, labels: {trainyard.io/queue: team}, creationTimestamp: '2026-11-22T09:55:00Z'}\nspec: {schedulerName: trainyard, containers: [{name: c, resources: {requests: {cpu: '16', nvidia.com/gpu: '8'}}}]}\n";
        let loaded =
            trainyard_ingest::load(&[Source::new("t.yaml", text)], &LoadOptions::default())
                .expect("loads");
        let snap = Arc::new(loaded.snapshot);
        let mut cfg = trainyard_sched::Config::default();
        cfg.consolidation.enabled = true;
        let now = trainyard_model::Timestamp::from_secs(1_795_860_000);
        let budget = |allowed: i64| {
            json!({"metadata": {"name": "eval", "namespace": "ml"},
                   "spec": {"selector": {"matchLabels": {"app": "eval"}}},
                   "status": {"disruptionsAllowed": allowed}})
        };
        let mut pdbs = Pdbs::default();
        pdbs.applied(&budget(0));
        let (s, ids) = pdbs.protect(snap.clone());
        assert_eq!(ids, ["ml/eval-a-0"]);
        let d = trainyard_sched::schedule(&s, &cfg, now);
        assert!(
            d.moves.is_empty() && d.evictions.is_empty(),
            "{:?}",
            d.moves
        );
        let train = d
            .pending
            .iter()
            .find(|p| p.job.as_str() == "ml/train")
            .expect("train waits");
        assert!(
            train.message.contains(
                "consolidation refused: the jobs on the nodes it could use are not movable: 1 job(s) not preemptible (or protected by a PodDisruptionBudget), 1 job(s) bare pods"
            ),
            "{}",
            train.message
        );
        pdbs.applied(&budget(1));
        let (s, _) = pdbs.protect(snap);
        let d = trainyard_sched::schedule(&s, &cfg, now);
        let moved: Vec<&str> = d.moves.iter().map(|m| m.job.as_str()).collect();
        assert_eq!(moved, ["ml/eval-a-0"]);
    }
}
