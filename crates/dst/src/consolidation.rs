//! Consolidation under simulation (a later dimension, on for about half
//! the seeds, from a stream of its own): the scheduler runs with
//! `consolidation.enabled`, a short `noMoveSeconds` and a nomination
//! timeout shorter than the quiet period; the users make fragments
//! (ReplicaSets of 1–4 GPU pods that run long, whole-node pods and gangs
//! pending); a ReplicaSet-like controller replaces the pods evicted from
//! under it (a new name, the same owner and spec, after a seeded delay:
//! sometimes never, sometimes about when the service's hold of the
//! planned room times out); and the moves are checked from the API's
//! objects when their evictions land.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use trainyard_testapi::kubelet::RUN_SECONDS;

use crate::check::{Checks, gpus_of, node_gpus};
use crate::replica::Sent;
use crate::sim::{Ev, Sim};

/// The consolidation dimension of a run: the scheduler's settings and
/// how the controller replaces evicted pods.
#[derive(Clone, Debug)]
pub struct Consolidation {
    /// `consolidation.noMoveSeconds`.
    pub no_move_seconds: u64,
    /// `preemption.nominationTimeoutSeconds` (how long a move's room is
    /// held for the replacements): shorter than the quiet period, so that
    /// a hold whose replacements never came is released before the end.
    pub nomination_timeout_seconds: u64,
    /// Of the evicted pods: replaced never (per mille; the hold times
    /// out), replaced about when the hold times out (per mille); the rest
    /// within 0.2–5 s.
    pub never_permille: u32,
    pub late_permille: u32,
    /// Of the user's actions: a consolidation-shaped workload (per mille).
    pub workload_permille: u32,
}

impl Consolidation {
    /// Draws the dimension from its own stream: on for about half the
    /// seeds.
    pub fn draw(rng: &mut ChaCha8Rng) -> Option<Consolidation> {
        let on = rng.random_bool(0.5);
        let c = Consolidation::draw_settings(rng);
        on.then_some(c)
    }

    fn draw_settings(rng: &mut ChaCha8Rng) -> Consolidation {
        Consolidation {
            no_move_seconds: [10u64, 30, 60, 120][rng.random_range(0..4)],
            nomination_timeout_seconds: [15u64, 30, 60][rng.random_range(0..3)],
            never_permille: rng.random_range(0..250),
            late_permille: rng.random_range(0..350),
            workload_permille: rng.random_range(300..700),
        }
    }

    /// The settings seed `seed` draws, whether or not it draws the
    /// dimension on.
    pub fn forced(seed: u64) -> Option<Consolidation> {
        let mut rng = crate::consolidation_stream(seed);
        let _ = rng.random_bool(0.5);
        Some(Consolidation::draw_settings(&mut rng))
    }
}

/// What consolidation did in a run.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Pods evicted for consolidation (the evictions that landed).
    pub moved_pods: u64,
    /// Jobs moved (by the process and cycle that decided it).
    pub moved_jobs: u64,
    /// Gangs the room was made for.
    pub gangs: u64,
    /// Replacement pods the controller created; evicted pods it never
    /// replaced.
    pub replacements: u64,
    pub never_replaced: u64,
    /// Replacements bound while their controller's move was held: on a
    /// node the move planned, or elsewhere.
    pub on_plan: u64,
    pub elsewhere: u64,
    /// A controller moved again within `noMoveSeconds` by another process
    /// (a restart or a new leader forgets the moves: documented).
    pub forgotten: u64,
}

impl Tally {
    /// Adds another run's.
    pub fn add(&mut self, o: &Tally) {
        self.moved_pods += o.moved_pods;
        self.moved_jobs += o.moved_jobs;
        self.gangs += o.gangs;
        self.replacements += o.replacements;
        self.never_replaced += o.never_replaced;
        self.on_plan += o.on_plan;
        self.elsewhere += o.elsewhere;
        self.forgotten += o.forgotten;
    }
}

/// The checker's consolidation state.
#[derive(Default)]
pub struct Tracking {
    /// Jobs with a pending pod of ours: the revision spans `(after,
    /// until)` in which they may have been pending (`until`: first
    /// revision checked without; `None`: still pending).
    pending: BTreeMap<String, Vec<(u64, Option<u64>)>>,
    open: BTreeSet<String>,
    rv: u64,
    /// By controller (`namespace/Kind/name`): the moves decided, as
    /// (replica, epoch, the replica's clock ms).
    moved: BTreeMap<String, Vec<(usize, u64, i64)>>,
    /// Pods (uid) whose consolidation eviction landed (a retried one
    /// counts once).
    evicted: BTreeSet<String>,
    jobs: BTreeSet<(String, usize, u64, i64)>,
    gangs: BTreeSet<String>,
    /// By controller: the nodes its moves planned, each held until
    /// (simulation ms, about: from when its eviction landed).
    planned: BTreeMap<String, Vec<(i64, String)>>,
}

/// A pod's controller (`namespace/Kind/name`), from its ownerReferences.
pub fn controller_of(pod: &Value) -> Option<String> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"].as_bool() == Some(true))
        .map(|o| {
            format!(
                "{}/{}/{}",
                pod["metadata"]["namespace"].as_str().unwrap_or("default"),
                o["kind"].as_str().unwrap_or(""),
                o["name"].as_str().unwrap_or("")
            )
        })
}

fn finished(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// The job a pod of ours belongs to, as the service names it: its gang
/// as the reader finds it (`upstream::gang_of`: Trainyard's label, then
/// `spec.schedulingGroup.podGroupName`), else the pod.
fn job_of(pod: &Value) -> String {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let gang = crate::upstream::gang_of(pod);
    let name = gang
        .as_ref()
        .map(crate::upstream::Gang::name)
        .or(pod["metadata"]["name"].as_str())
        .unwrap_or("");
    format!("{ns}/{name}")
}

impl Checks {
    /// After every step (consolidation runs): which jobs have a pending
    /// pod of ours, by revision.
    pub(crate) fn track_pending(&mut self, rv: u64, pods: &[&Value]) {
        if self.consolidation.is_none() {
            return;
        }
        let now: BTreeSet<String> = pods
            .iter()
            .filter(|p| {
                p["spec"]["schedulerName"] == "trainyard"
                    && p["spec"]["nodeName"].as_str().is_none_or(str::is_empty)
                    && p["metadata"]["deletionTimestamp"].is_null()
                    && !finished(p)
            })
            .map(|p| job_of(p))
            .collect();
        let t = &mut self.moving;
        for job in now.difference(&t.open) {
            t.pending.entry(job.clone()).or_default().push((t.rv, None));
        }
        for job in t.open.difference(&now) {
            if let Some(last) = t.pending.get_mut(job).and_then(|s| s.last_mut()) {
                last.1 = Some(rv);
            }
        }
        t.open = now;
        t.rv = rv;
    }

    fn was_pending(&self, job: &str, rv: u64) -> bool {
        self.moving.pending.get(job).is_some_and(|spans| {
            spans
                .iter()
                .any(|(after, until)| rv > *after && until.is_none_or(|u| rv < u))
        })
    }

    /// A consolidation eviction landed (`pod`: the pod as it was before):
    /// the gang it makes room for had a pending pod at the revision the
    /// move was decided from; the moved pod had a controller and was
    /// preemptible; its controller was not moved by the same process
    /// within `noMoveSeconds`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_consolidate(
        &mut self,
        (r, epoch): (usize, u64),
        sent: &Sent,
        eviction: &trainyard_sched::decisions::Eviction,
        pod: Option<&Value>,
        now: i64,
        trace: &mut Vec<String>,
    ) {
        let Some(c) = self.consolidation.clone() else {
            return;
        };
        let name = &eviction.task.name;
        let gang = eviction.preemptor.to_string();
        let Some(pod) = pod else { return };
        let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
        if !self.moving.evicted.insert(uid) {
            return;
        }
        let t = &mut self.moving;
        t.jobs
            .insert((eviction.job.to_string(), r, epoch, sent.decided_ms));
        t.gangs.insert(gang.clone());
        self.tally.moved_pods += 1;
        self.tally.moved_jobs = t.jobs.len() as u64;
        self.tally.gangs = t.gangs.len() as u64;
        if gang == eviction.job.as_str() {
            self.violate(
                trace,
                format!("pod {name} moved by consolidation for its own job {gang}"),
            );
        }
        if !self.was_pending(&gang, sent.decided_rv) {
            self.violate(trace, format!(
                "pod {name} evicted for consolidation for {gang}, which had no pending pod at revision {} (the one replica {r} decided from)",
                sent.decided_rv
            ));
        }
        if pod["spec"]["priorityClassName"] != "low" {
            self.violate(
                trace,
                format!(
                    "pod {name} (priority class {}) moved by consolidation: not preemptible",
                    pod["spec"]["priorityClassName"]
                ),
            );
        }
        let Some(controller) = controller_of(pod) else {
            self.violate(
                trace,
                format!("bare pod {name} moved by consolidation: no controller recreates it"),
            );
            return;
        };
        let period = c.no_move_seconds as i64 * 1000;
        let before = self.moving.moved.entry(controller.clone()).or_default();
        let mut again = None;
        for &(r0, e0, t0) in before.iter() {
            let dt = sent.decided_ms - t0;
            if dt != 0 && dt.abs() < period {
                if (r0, e0) == (r, epoch) {
                    again = Some(dt);
                } else {
                    self.tally.forgotten += 1;
                }
            }
        }
        before.push((r, epoch, sent.decided_ms));
        if let Some(dt) = again {
            self.violate(trace, format!(
                "{controller} moved again by consolidation ({name}) by the same process (replica {r}) {} s after its last move, within noMoveSeconds {}",
                dt.abs() as f64 / 1000.0,
                c.no_move_seconds
            ));
        }
        // Where its replacement should go: "... from n1 to n2".
        if let Some(to) = eviction.message.rsplit(" to ").next() {
            let until = now + c.nomination_timeout_seconds as i64 * 1000;
            let planned = self.moving.planned.entry(controller).or_default();
            planned.retain(|(t, _)| *t >= now);
            planned.extend(to.split(", ").map(|n| (until, n.to_string())));
        }
    }

    /// A bind of a replacement pod landed (consolidation runs): on a node
    /// its controller's move planned, or elsewhere, while held.
    pub(crate) fn on_replacement_bound(&mut self, pod: &Value, node: &str, now: i64) {
        if self.consolidation.is_none() || pod["metadata"]["annotations"][REPLACES].is_null() {
            return;
        }
        let Some(c) = controller_of(pod) else { return };
        let Some(planned) = self.moving.planned.get(&c) else {
            return;
        };
        let held: Vec<&String> = planned
            .iter()
            .filter(|(t, _)| *t >= now)
            .map(|(_, n)| n)
            .collect();
        if held.is_empty() {
            return;
        }
        if held.iter().any(|n| *n == node) {
            self.tally.on_plan += 1;
        } else {
            self.tally.elsewhere += 1;
        }
    }
}

/// The annotation a replacement pod carries: the pod it replaces.
pub const REPLACES: &str = "dst.trainyard.io/replaces";

impl Sim {
    /// A user action shaped for consolidation (runs with it on): a
    /// ReplicaSet of 1–4 GPU pods that run long, a whole-node pod or gang
    /// pending, or a gang whose pods a controller owns.
    pub(crate) fn consolidation_workload(&mut self) {
        let gpn = i64::from(self.faults.gpus_per_node);
        let id = self.moving_rng.random_range(0..1_000_000);
        let queue = *["team-a", "team-b", "default"]
            .choose(&mut self.moving_rng)
            .unwrap_or(&"default");
        let priority = if self.moving_rng.random_bool(0.85) {
            "low"
        } else {
            "high"
        };
        // The users fill the cluster with small pods, free holes by
        // scaling a ReplicaSet down, and keep whole-node pods waiting.
        let pods = self.api.list("/pods");
        let capacity: i64 = self.api.list("/nodes").iter().map(node_gpus).sum();
        let live = |p: &&Value| p["metadata"]["deletionTimestamp"].is_null() && !finished(p);
        let demand: i64 = pods.iter().filter(live).map(gpus_of).sum();
        let waiting = pods
            .iter()
            .filter(live)
            .filter(|p| {
                p["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("big"))
                    && p["spec"]["nodeName"].as_str().is_none_or(str::is_empty)
            })
            .count();
        let roll = self.moving_rng.random_range(0..100);
        let action = if roll >= 85 {
            roll
        } else if demand < capacity * 9 / 10 {
            0
        } else if waiting < 2 && roll < 60 {
            55
        } else {
            let bound: Vec<String> = pods
                .iter()
                .filter(live)
                .filter(|p| {
                    p["spec"]["nodeName"]
                        .as_str()
                        .is_some_and(|n| !n.is_empty())
                        && p["metadata"]["labels"]["trainyard.io/pod-group"].is_null()
                        && controller_of(p).is_some()
                })
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            if let Some(name) = bound.choose(&mut self.moving_rng).cloned() {
                // Scaled down: the controller deletes it, no replacement.
                self.owned.remove(&name);
                let _ = self.api.delete("/pods", "ml", &name, Some(1));
                self.note(format!("user: ReplicaSet scaled down, {name} deleted"));
            }
            return;
        };
        match action {
            0..=54 => {
                let rs = format!("rs{id}");
                let replicas = self.moving_rng.random_range(1..=3);
                let gpus = self.moving_rng.random_range(1..=(gpn / 2).max(1));
                for _ in 0..replicas {
                    let name = format!("{rs}-{:05}", self.moving_rng.random_range(0..100_000));
                    let pod = self.owned_pod(&name, &rs, gpus, None, queue, priority);
                    let _ = self.api.create("/pods", Some("ml"), pod);
                }
                self.note(format!(
                    "user: ReplicaSet {rs}, {replicas} × {gpus} GPUs, {priority}, queue {queue}"
                ));
            }
            55..=84 => {
                let size = if self.moving_rng.random_bool(0.6) {
                    1
                } else {
                    2
                };
                let name = format!("big{id}");
                if size > 1 && !self.create_group(&name, queue, size) {
                    return;
                }
                for i in 0..size {
                    let pod_name = if size > 1 {
                        format!("{name}-{i}")
                    } else {
                        name.clone()
                    };
                    let mut labels = json!({});
                    if size > 1 {
                        labels["trainyard.io/pod-group"] = json!(name);
                    } else if queue != "default" {
                        labels["trainyard.io/queue"] = json!(queue);
                    }
                    let run = self.moving_rng.random_range(30..200).to_string();
                    let pod = json!({"metadata": {"name": pod_name, "namespace": "ml", "labels": labels,
                            "annotations": {RUN_SECONDS: run}},
                        "spec": {"schedulerName": "trainyard", "priorityClassName": "low",
                            "terminationGracePeriodSeconds": self.moving_rng.random_range(0..3),
                            "containers": [{"name": "c", "image": "train:1",
                            "resources": {"requests": {"nvidia.com/gpu": gpn.to_string()},
                                          "limits": {"nvidia.com/gpu": gpn.to_string()}}}]}});
                    let _ = self.api.create("/pods", Some("ml"), pod);
                }
                self.note(format!(
                    "user: whole-node {} {name}, {size} × {gpn} GPUs, queue {queue}",
                    if size > 1 { "gang" } else { "pod" }
                ));
            }
            _ => {
                let name = format!("cg{id}");
                let size = self.moving_rng.random_range(2..=3);
                let gpus = self.moving_rng.random_range(1..=(gpn / 4).max(1));
                if !self.create_group(&name, queue, size) {
                    return;
                }
                for i in 0..size {
                    let pod = self.owned_pod(
                        &format!("{name}-{i}"),
                        &name,
                        gpus,
                        Some(&name),
                        queue,
                        priority,
                    );
                    let _ = self.api.create("/pods", Some("ml"), pod);
                }
                self.note(format!(
                    "user: gang {name} owned by a controller, {size} × {gpus} GPUs, {priority}, queue {queue}"
                ));
            }
        }
    }

    /// A PodGroup `name` of `size` members in `queue`; whether the API
    /// took it.
    fn create_group(&mut self, name: &str, queue: &str, size: impl Into<i64>) -> bool {
        let group = json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"queue": queue, "minMember": size.into()}});
        self.api
            .create("trainyard.io/podgroups", Some("ml"), group)
            .is_ok()
    }

    /// A pod owned by ReplicaSet `rs`, running long.
    fn owned_pod(
        &mut self,
        name: &str,
        rs: &str,
        gpus: i64,
        group: Option<&str>,
        queue: &str,
        priority: &str,
    ) -> Value {
        let mut labels = json!({"app": rs});
        match group {
            Some(g) => labels["trainyard.io/pod-group"] = json!(g),
            None if queue != "default" => labels["trainyard.io/queue"] = json!(queue),
            None => {}
        }
        let run = self.moving_rng.random_range(120..600).to_string();
        json!({"metadata": {"name": name, "namespace": "ml", "labels": labels,
                "annotations": {RUN_SECONDS: run},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                    "uid": format!("uid-{rs}"), "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"schedulerName": "trainyard", "priorityClassName": priority,
                "terminationGracePeriodSeconds": self.moving_rng.random_range(0..4),
                "containers": [{"name": "c", "image": "eval:1",
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
    }

    /// The ReplicaSet controller, after each kubelet step: a pod it owns
    /// that is deleted (terminating or gone) without having finished is
    /// replaced after a seeded delay (a new name, the same owner, labels
    /// and spec, unbound), or, sometimes, never.
    pub(crate) fn replicaset_controller(&mut self) {
        let Some(c) = self.faults.consolidation.clone() else {
            return;
        };
        let mut seen = BTreeSet::new();
        let mut deleted = Vec::new();
        for p in self.api.state.store.iter("/pods") {
            let Some(name) = p["metadata"]["name"].as_str() else {
                continue;
            };
            if controller_of(p).is_none() {
                continue;
            }
            seen.insert(name.to_string());
            // A controller's gang deleted by its user: the workload ended.
            let orphan = p["metadata"]["labels"]["trainyard.io/pod-group"]
                .as_str()
                .is_some_and(|g| self.api.get("trainyard.io/podgroups", "ml", g).is_none());
            if finished(p) || orphan {
                self.owned.remove(name);
            } else if !p["metadata"]["deletionTimestamp"].is_null() {
                if let Some(t) = self.owned.remove(name) {
                    deleted.push((name.to_string(), t));
                }
            } else if !self.owned.contains_key(name) {
                self.owned.insert(name.to_string(), template(p));
            }
        }
        let gone: Vec<String> = self
            .owned
            .keys()
            .filter(|n| !seen.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(t) = self.owned.remove(&name) {
                deleted.push((name, t));
            }
        }
        for (name, mut t) in deleted {
            // No faults in the quiet period: a controller replaces at once.
            let roll = self.moving_rng.random_range(0..1000);
            let delay = if self.quiet() {
                self.moving_rng.random_range(200..3000)
            } else if roll < c.never_permille {
                self.checks.tally.never_replaced += 1;
                self.note(format!("controller: {name} deleted, never replaced"));
                continue;
            } else if roll < c.never_permille + c.late_permille {
                let timeout = c.nomination_timeout_seconds as i64 * 1000;
                self.moving_rng
                    .random_range(timeout * 7 / 10..timeout * 13 / 10)
            } else {
                self.moving_rng.random_range(200..5000)
            };
            t["metadata"]["annotations"][REPLACES] = json!(name);
            self.note(format!(
                "controller: {name} deleted, replaced in {:.1} s",
                delay as f64 / 1000.0
            ));
            self.at(self.now + delay, Ev::Replace(Box::new(t)));
        }
    }

    /// The controller creates a replacement pod from `template`.
    pub(crate) fn replace(&mut self, mut pod: Value) {
        // A pod created in the run's last seconds could not be judged by
        // the liveness check (it would still be on its way).
        if self.now > self.end - 30_000 {
            return;
        }
        // Its gang deleted meanwhile by its user: the workload ended.
        if let Some(g) = pod["metadata"]["labels"]["trainyard.io/pod-group"].as_str()
            && self.api.get("trainyard.io/podgroups", "ml", g).is_none()
        {
            return;
        }
        let rs = pod["metadata"]["ownerReferences"][0]["name"]
            .as_str()
            .unwrap_or("rs")
            .to_string();
        let name = format!("{rs}-{:05}", self.moving_rng.random_range(0..100_000));
        pod["metadata"]["name"] = json!(name);
        match self.api.create("/pods", Some("ml"), pod) {
            Ok(_) => {
                self.checks.tally.replacements += 1;
                self.note(format!("controller: replacement {name} created"));
            }
            Err(e) => self.note(format!("controller: replacement {name} refused: {e}")),
        }
    }
}

/// A replacement for `pod`: its owner, labels, run time and spec, without
/// node, priority value or anything the server or scheduler set.
fn template(pod: &Value) -> Value {
    let mut spec = pod["spec"].clone();
    if let Some(s) = spec.as_object_mut() {
        s.remove("nodeName");
        s.remove("priority");
    }
    spec["schedulerName"] = json!("trainyard");
    let mut annotations = json!({});
    if let Some(run) = pod["metadata"]["annotations"][RUN_SECONDS].as_str() {
        annotations[RUN_SECONDS] = json!(run);
    }
    json!({"metadata": {"namespace": "ml", "labels": pod["metadata"]["labels"].clone(),
            "annotations": annotations,
            "ownerReferences": pod["metadata"]["ownerReferences"].clone()},
        "spec": spec})
}
