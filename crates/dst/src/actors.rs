//! The world around the scheduler: users creating and deleting gangs and
//! pods (valid and not), Queues and PriorityClasses; another scheduler
//! binding its pods by `spec.nodeName`; nodes added, removed, cordoned
//! and tainted; finished pods cleaned up as a Job controller would.

use rand::Rng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};
use trainyard_testapi::kubelet::RUN_SECONDS;

use crate::check::{gpus_of, node_gpus};
use crate::sim::{Ev, Sim};
use crate::upstream::{Gang, gang_of};

impl Sim {
    /// Creates the cluster: nodes, PriorityClasses, two team Queues.
    pub fn populate(&mut self) {
        for i in 0..self.faults.nodes {
            self.add_node(&format!("gpu-{i}"));
        }
        // KAI's convention: below 100 preemptible (`train` is 50).
        for (name, value) in [("low", 50), ("high", 1000)] {
            let pc = json!({"metadata": {"name": name}, "value": value});
            let _ = self
                .api
                .create("scheduling.k8s.io/priorityclasses", None, pc);
        }
        let gpus = (self.faults.nodes as u32 * self.faults.gpus_per_node) / 2;
        for team in ["team-a", "team-b"] {
            let q = json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
                "metadata": {"name": team}, "spec": {"quota": {"nvidia.com/gpu": gpus.to_string()}}});
            if let Err(e) = self.api.create("trainyard.io/queues", None, q) {
                self.note(format!("queue {team} refused: {e}"));
            }
        }
    }

    fn add_node(&mut self, name: &str) {
        let g = self.faults.gpus_per_node.to_string();
        let node = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": g},
                       "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": g},
                       "conditions": [{"type": "Ready", "status": "True"}]}});
        if let Err(e) = self.api.create("/nodes", None, node) {
            self.note(format!("node {name} refused: {e}"));
        }
    }

    fn priority(&mut self) -> &'static str {
        if self.rng.random_bool(0.3) {
            "high"
        } else {
            "low"
        }
    }

    pub(crate) fn pod(
        &mut self,
        name: &str,
        gpus: i64,
        group: Option<(&str, &str)>,
        scheduler: &str,
    ) -> Value {
        let run = self.rng.random_range(10..240).to_string();
        let (group, priority) = match group {
            Some((g, p)) => (Some(g), p),
            None => (None, self.priority()),
        };
        let mut labels = json!({});
        if let Some(g) = group {
            labels["trainyard.io/pod-group"] = json!(g);
        }
        let queue = ["team-a", "team-b", "default"]
            .choose(&mut self.rng)
            .copied()
            .unwrap_or("default");
        if group.is_none() && queue != "default" {
            labels["trainyard.io/queue"] = json!(queue);
        }
        json!({"metadata": {"name": name, "namespace": "ml", "labels": labels,
                "annotations": {RUN_SECONDS: run}},
            "spec": {"schedulerName": scheduler, "priorityClassName": priority,
                "terminationGracePeriodSeconds": self.rng.random_range(0..5),
                "containers": [{"name": "c", "image": "train:1",
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
    }

    /// One user or actor action, then the next one's time.
    pub(crate) fn act(&mut self) {
        let next = self.now + self.rng.random_range(100..2000);
        if next < self.quiet_from {
            self.at(next, Ev::Actor);
        }
        if let Some(c) = &self.faults.consolidation
            && self.moving_rng.random_range(0..1000) < c.workload_permille
        {
            self.consolidation_workload();
            return;
        }
        // With consolidation, the other users act less: a cluster
        // flooded with small pending pods has no scattered free room.
        if self.faults.consolidation.is_some() && self.moving_rng.random_bool(0.6) {
            return;
        }
        let roll = self.rng.random_range(0..100);
        match roll {
            0..=29 => self.new_gang(),
            30..=44 => self.new_pod(),
            45..=54 => self.delete_some_pod(),
            55..=59 => self.delete_some_gang(),
            60..=69 => self.clean_finished(),
            70..=79 if self.faults.other_scheduler => self.other_scheduler(),
            80..=87 if self.faults.node_churn => self.churn_node(),
            88..=90 => self.invalid_object(),
            _ => {}
        }
    }

    fn new_gang(&mut self) {
        let id = self.rng.random_range(0..1_000_000);
        let name = format!("g{id}");
        let per = *[1i64, 2, 4, 8].choose(&mut self.rng).unwrap_or(&1);
        let per = per.min(i64::from(self.faults.gpus_per_node));
        let size = self.rng.random_range(2..=8);
        let min = if self.rng.random_bool(0.8) {
            size
        } else {
            self.rng.random_range(1..=size)
        };
        let queue = ["team-a", "team-b", "default"]
            .choose(&mut self.rng)
            .copied()
            .unwrap_or("default");
        if let Some(u) = &self.faults.upstream
            && self.upstream_rng.random_range(0..1000) < u.share_permille
        {
            self.new_upstream_gang(&format!("u{name}"), per, size, min, queue);
            return;
        }
        let group = json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml"}, "spec": {"queue": queue, "minMember": min}});
        if let Err(e) = self.api.create("trainyard.io/podgroups", Some("ml"), group) {
            self.note(format!("podgroup {name} refused: {e}"));
            return;
        }
        let priority = self.priority();
        for i in 0..size {
            let pod = self.pod(
                &format!("{name}-{i}"),
                per,
                Some((&name, priority)),
                "trainyard",
            );
            let _ = self.api.create("/pods", Some("ml"), pod);
        }
        self.note(format!(
            "user: gang {name}, {size} × {per} GPUs, minMember {min}, queue {queue}"
        ));
    }

    fn new_pod(&mut self) {
        let name = format!("p{}", self.rng.random_range(0..1_000_000));
        let gpus = self
            .rng
            .random_range(1..=i64::from(self.faults.gpus_per_node));
        let pod = self.pod(&name, gpus, None, "trainyard");
        let _ = self.api.create("/pods", Some("ml"), pod);
        self.note(format!("user: pod {name}, {gpus} GPUs"));
    }

    fn delete_some_pod(&mut self) {
        let pods = self.api.list("/pods");
        let Some(p) = pods.choose(&mut self.rng) else {
            return;
        };
        let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
        let grace = self.rng.random_range(0..5);
        let _ = self.api.delete("/pods", "ml", &name, Some(grace));
        self.note(format!("user: delete pod {name}"));
    }

    fn delete_some_gang(&mut self) {
        // The upstream groups (none but with their dimension) after
        // Trainyard's.
        let mut groups = self.api.list("trainyard.io/podgroups");
        groups.extend(self.api.list(crate::upstream::KEY));
        let Some(g) = groups.choose(&mut self.rng) else {
            return;
        };
        let name = g["metadata"]["name"].as_str().unwrap_or("").to_string();
        let gang = if g["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("scheduling.k8s.io"))
        {
            Gang::Upstream(name.clone())
        } else {
            Gang::Trainyard(name.clone())
        };
        self.delete_gang(&gang);
        self.note(format!("user: delete gang {name}"));
    }

    fn delete_gang(&mut self, gang: &Gang) {
        for p in self.api.list("/pods") {
            if gang_of(&p).as_ref() == Some(gang) {
                let pod = p["metadata"]["name"].as_str().unwrap_or("").to_string();
                let _ = self.api.delete("/pods", "ml", &pod, Some(1));
            }
        }
        let key = match gang {
            Gang::Trainyard(_) => "trainyard.io/podgroups",
            Gang::Upstream(_) => crate::upstream::KEY,
        };
        let _ = self.api.delete(key, "ml", gang.name(), None);
    }

    /// Deletes finished pods, and groups whose pods all finished.
    fn clean_finished(&mut self) {
        for p in self.api.list("/pods") {
            if matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
                let pod = p["metadata"]["name"].as_str().unwrap_or("").to_string();
                let _ = self.api.delete("/pods", "ml", &pod, Some(0));
            }
        }
        let pods = self.api.list("/pods");
        for g in self.api.list("trainyard.io/podgroups") {
            let name = g["metadata"]["name"].as_str().unwrap_or("");
            // A controller's gang (consolidation runs) lives while its
            // controller does: its pods may all be moved at once.
            if name.starts_with("cg") {
                continue;
            }
            if !pods
                .iter()
                .any(|p| p["metadata"]["labels"]["trainyard.io/pod-group"].as_str() == Some(name))
            {
                let _ = self.api.delete("trainyard.io/podgroups", "ml", name, None);
            }
        }
        for g in self.api.list(crate::upstream::KEY) {
            let gang = Gang::Upstream(g["metadata"]["name"].as_str().unwrap_or("").to_string());
            if !pods.iter().any(|p| gang_of(p).as_ref() == Some(&gang)) {
                let _ = self
                    .api
                    .delete(crate::upstream::KEY, "ml", gang.name(), None);
            }
        }
    }

    /// The pod garbage collector: pods bound to a node that no longer
    /// exists (a bind can name a node deleted meanwhile: the API does not
    /// check) are deleted at once, as kube-controller-manager's PodGC does
    /// for orphaned pods.
    pub(crate) fn pod_gc(&mut self) {
        let nodes: std::collections::BTreeSet<String> = self
            .api
            .state
            .store
            .iter("/nodes")
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        let orphans: Vec<String> = self
            .api
            .state
            .store
            .iter("/pods")
            .filter(|p| {
                p["spec"]["nodeName"]
                    .as_str()
                    .is_some_and(|n| !n.is_empty() && !nodes.contains(n))
            })
            .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        for pod in orphans {
            let _ = self.api.delete("/pods", "ml", &pod, Some(0));
            self.note(format!("pod GC: {pod} deleted (its node is gone)"));
        }
    }

    /// Another scheduler creates a pod and binds it by `spec.nodeName`
    /// (through `pods/binding`) where the API's objects say it fits.
    pub(crate) fn other_scheduler(&mut self) {
        let pods = self.api.list("/pods");
        let mut room: Vec<(String, i64)> = Vec::new();
        for n in self.api.list("/nodes") {
            let nm = n["metadata"]["name"].as_str().unwrap_or("").to_string();
            let used: i64 = pods
                .iter()
                .filter(|p| p["spec"]["nodeName"].as_str() == Some(nm.as_str()))
                .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
                .map(gpus_of)
                .sum();
            if node_gpus(&n) > used {
                room.push((nm, node_gpus(&n) - used));
            }
        }
        // kube-scheduler's default scoring (LeastAllocated): the emptiest
        // node, ties broken at random.
        let most = room.iter().map(|(_, f)| *f).max().unwrap_or(0);
        room.retain(|(_, f)| *f == most);
        let Some((node, free)) = room.choose(&mut self.rng).cloned() else {
            return;
        };
        let gpus = self.rng.random_range(1..=free);
        let name = format!("other{}", self.rng.random_range(0..1_000_000));
        let pod = self.pod(&name, gpus, None, "other-scheduler");
        let Ok(made) = self.api.create("/pods", Some("ml"), pod) else {
            return;
        };
        let uid = made["metadata"]["uid"].as_str().unwrap_or("").to_string();
        if self.api.bind("ml", &name, &uid, &node, Value::Null).is_ok() {
            self.checks.other_bound.insert(uid, self.api.rv());
            self.note(format!(
                "other scheduler: {name} ({gpus} GPUs) bound to {node}"
            ));
        }
    }

    fn churn_node(&mut self) {
        let nodes = self.api.list("/nodes");
        match self.rng.random_range(0..4) {
            0 => {
                let name = format!("gpu-{}", self.rng.random_range(100..1000));
                self.add_node(&name);
                self.note(format!("node {name} added"));
            }
            1 if nodes.len() > 1 => {
                let Some(n) = nodes.choose(&mut self.rng) else {
                    return;
                };
                let name = n["metadata"]["name"].as_str().unwrap_or("").to_string();
                let _ = self.api.delete("/nodes", "", &name, None);
                // The pod garbage collector removes the pods of a node gone.
                for p in self.api.list("/pods") {
                    if p["spec"]["nodeName"].as_str() == Some(name.as_str()) {
                        let pod = p["metadata"]["name"].as_str().unwrap_or("").to_string();
                        let _ = self.api.delete("/pods", "ml", &pod, Some(0));
                    }
                }
                self.note(format!("node {name} removed"));
            }
            2 | 3 => {
                let Some(mut n) = nodes.choose(&mut self.rng).cloned() else {
                    return;
                };
                let name = n["metadata"]["name"].as_str().unwrap_or("").to_string();
                let cordon = !n["spec"]["unschedulable"].as_bool().unwrap_or(false);
                n["spec"]["unschedulable"] = json!(cordon);
                if self.rng.random_bool(0.3) {
                    n["spec"]["taints"] = if cordon {
                        json!([{"key": "maintenance", "effect": "NoSchedule"}])
                    } else {
                        json!([])
                    };
                }
                let _ = self.api.update("/nodes", n, false);
                self.note(format!(
                    "node {name} {}",
                    if cordon { "cordoned" } else { "uncordoned" }
                ));
            }
            _ => {}
        }
    }

    /// Objects a user gets wrong: a group with a minimum of zero, a pod
    /// naming a queue that does not exist, a Queue with a bad quota.
    fn invalid_object(&mut self) {
        let id = self.rng.random_range(0..1_000_000);
        match self.rng.random_range(0..3) {
            0 => {
                let g = json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": format!("bad{id}"), "namespace": "ml"}, "spec": {"minMember": 0}});
                let r = self.api.create("trainyard.io/podgroups", Some("ml"), g);
                self.note(format!(
                    "user: podgroup with minMember 0: {}",
                    r.err().unwrap_or_else(|| "accepted".into())
                ));
            }
            1 => {
                let mut pod = self.pod(&format!("lost{id}"), 1, None, "trainyard");
                pod["metadata"]["labels"]["trainyard.io/queue"] = json!("no-such-queue");
                let _ = self.api.create("/pods", Some("ml"), pod);
                self.note(format!("user: pod lost{id} in a queue that does not exist"));
            }
            _ => {
                let q = json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
                    "metadata": {"name": format!("q{id}")}, "spec": {"quota": {"nvidia.com/gpu": "lots"}}});
                let r = self.api.create("trainyard.io/queues", None, q);
                self.note(format!(
                    "user: queue with quota 'lots': {}",
                    r.err().unwrap_or_else(|| "accepted".into())
                ));
            }
        }
    }
}
