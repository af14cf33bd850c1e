//! Users changing policy while jobs run (`Faults::policy_churn`):
//! PodDisruptionBudgets over gangs, Queue quotas and weights changed, a
//! Queue deleted and recreated, a PriorityClass deleted and recreated
//! with another value. Draws from the run's later stream only, so a run
//! with the dimension off is the run it was before the dimension existed.

use rand::Rng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use crate::sim::{Ev, Sim};

impl Sim {
    /// One policy change, then the next one's time.
    pub(crate) fn change_policy(&mut self) {
        let next = self.now + self.later_rng.random_range(2_000..20_000);
        if next < self.quiet_from {
            self.at(next, Ev::Policy);
        }
        match self.later_rng.random_range(0..100) {
            0..=29 => self.budget_a_gang(),
            30..=44 => self.drop_a_budget(),
            45..=64 => self.change_a_quota(),
            65..=74 => self.recreate_a_queue(),
            75..=84 => self.pod_with_a_node(),
            _ => self.recreate_high_priority(),
        }
    }

    /// A PodDisruptionBudget over one gang's pods, as a training
    /// operator or a cautious user makes one: `minAvailable` some or all
    /// of the gang, or `maxUnavailable: 0`.
    fn budget_a_gang(&mut self) {
        let groups = self.api.list("trainyard.io/podgroups");
        let Some(g) = groups.choose(&mut self.later_rng) else {
            return;
        };
        let name = g["metadata"]["name"].as_str().unwrap_or("").to_string();
        let min = g["spec"]["minMember"].as_i64().unwrap_or(1).max(1);
        let limit = match self.later_rng.random_range(0..3) {
            0 => json!({"maxUnavailable": 0}),
            1 => json!({"minAvailable": min}),
            _ => json!({"minAvailable": format!("{}%", self.later_rng.random_range(10..=100))}),
        };
        let mut spec = json!({"selector": {"matchLabels": {"trainyard.io/pod-group": name}}});
        if let (Some(s), Some(l)) = (spec.as_object_mut(), limit.as_object()) {
            s.extend(l.clone());
        }
        let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": format!("{name}-pdb"), "namespace": "ml"}, "spec": spec});
        let r = self
            .api
            .create("policy/poddisruptionbudgets", Some("ml"), pdb);
        self.note(format!(
            "user: PodDisruptionBudget over gang {name} ({}): {}",
            compact(&limit),
            r.err().unwrap_or_else(|| "created".into())
        ));
    }

    fn drop_a_budget(&mut self) {
        let pdbs = self.api.list("policy/poddisruptionbudgets");
        let Some(b) = pdbs.choose(&mut self.later_rng) else {
            return;
        };
        let name = b["metadata"]["name"].as_str().unwrap_or("").to_string();
        let _ = self
            .api
            .delete("policy/poddisruptionbudgets", "ml", &name, None);
        self.note(format!("user: PodDisruptionBudget {name} deleted"));
    }

    /// A team's quota, limit or weight changed, within and beyond what
    /// the team holds (a quota cut below its allocation is the common
    /// case reclaim meets).
    fn change_a_quota(&mut self) {
        let queues = self.api.list("trainyard.io/queues");
        let Some(mut q) = queues
            .iter()
            .filter(|q| {
                q["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("team-"))
            })
            .collect::<Vec<_>>()
            .choose(&mut self.later_rng)
            .map(|q| (*q).clone())
        else {
            return;
        };
        let total = self.faults.nodes as u32 * self.faults.gpus_per_node;
        let quota = self.later_rng.random_range(0..=total);
        q["spec"]["quota"] = json!({"nvidia.com/gpu": quota.to_string()});
        if self.later_rng.random_bool(0.3) {
            let limit = self.later_rng.random_range(quota..=total.max(quota));
            q["spec"]["limit"] = json!({"nvidia.com/gpu": limit.to_string()});
        } else if let Some(spec) = q["spec"].as_object_mut() {
            spec.remove("limit");
        }
        q["spec"]["weight"] = json!(self.later_rng.random_range(1..=4));
        let name = q["metadata"]["name"].as_str().unwrap_or("").to_string();
        let r = self.api.update("trainyard.io/queues", q, false);
        self.note(format!(
            "user: queue {name} quota {quota} GPUs: {}",
            r.err().unwrap_or_else(|| "updated".into())
        ));
    }

    /// A team's Queue deleted (its jobs' queue is then missing) and, half
    /// the time, created again at once with another quota.
    fn recreate_a_queue(&mut self) {
        let team = if self.later_rng.random_bool(0.5) {
            "team-a"
        } else {
            "team-b"
        };
        let _ = self.api.delete("trainyard.io/queues", "", team, None);
        let again = self.later_rng.random_bool(0.5);
        if again {
            let total = self.faults.nodes as u32 * self.faults.gpus_per_node;
            let quota = self.later_rng.random_range(0..=total);
            let q = json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
                "metadata": {"name": team}, "spec": {"quota": {"nvidia.com/gpu": quota.to_string()}}});
            let _ = self.api.create("trainyard.io/queues", None, q);
        }
        self.note(format!(
            "user: queue {team} deleted{}",
            if again { " and created again" } else { "" }
        ));
        if !again {
            let next = self.now + self.later_rng.random_range(1_000..30_000);
            if next < self.quiet_from {
                self.at(next, Ev::Policy);
            }
        }
    }

    /// PriorityClass `high` deleted and created again with another value
    /// (a value cannot change in place); pods keep the priority they were
    /// admitted with, new pods take the new one.
    fn recreate_high_priority(&mut self) {
        let _ = self
            .api
            .delete("scheduling.k8s.io/priorityclasses", "", "high", None);
        let value = self.later_rng.random_range(100..5_000);
        let pc = json!({"metadata": {"name": "high"}, "value": value});
        let r = self
            .api
            .create("scheduling.k8s.io/priorityclasses", None, pc);
        self.note(format!(
            "user: PriorityClass high recreated with value {value}: {}",
            r.err().unwrap_or_else(|| "created".into())
        ));
    }
}

impl Sim {
    /// A pod created with `spec.nodeName` already set, as a DaemonSet's
    /// controller or a static pod's kubelet makes it: no scheduler binds
    /// it, and it takes 1 or 2 GPUs where the API's objects show room (a
    /// race with Trainyard's binds that only the kubelet's admission
    /// settles, as for the other scheduler).
    fn pod_with_a_node(&mut self) {
        let pods = self.api.list("/pods");
        let nodes = self.api.list("/nodes");
        let Some(n) = nodes.choose(&mut self.later_rng) else {
            return;
        };
        let node = n["metadata"]["name"].as_str().unwrap_or("").to_string();
        let used: i64 = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"].as_str() == Some(node.as_str()))
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .map(crate::check::gpus_of)
            .sum();
        let free = crate::check::node_gpus(n) - used;
        if free < 1 {
            return;
        }
        let gpus = self.later_rng.random_range(1..=free.min(2));
        let name = format!("agent{}", self.later_rng.random_range(0..1_000_000));
        let pod = serde_json::json!({"metadata": {"name": name, "namespace": "ml",
                "annotations": {trainyard_testapi::kubelet::RUN_SECONDS: "60"}},
            "spec": {"nodeName": node, "schedulerName": "default-scheduler",
                "containers": [{"name": "agent", "image": "agent:1",
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}});
        match self.api.create("/pods", Some("ml"), pod) {
            Ok(made) => {
                let uid = made["metadata"]["uid"].as_str().unwrap_or("").to_string();
                self.checks.other_bound.insert(uid, self.api.rv());
                self.note(format!(
                    "user: pod {name} created on node {node} ({gpus} GPUs)"
                ));
            }
            Err(e) => self.note(format!("user: pod {name} on node {node} refused: {e}")),
        }
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
