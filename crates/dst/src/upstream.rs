//! Kubernetes' own gangs under simulation (a later dimension, on for about
//! half the seeds, from a stream of its own): the simulated API server
//! serves `scheduling.k8s.io/v1beta1` PodGroups, so the service watches
//! them (as its discovery picks v1beta1), and some of the gangs the users
//! make are made as Kubernetes makes them: a v1beta1 PodGroup (`gang`
//! with `minCount` the gang's minimum, or `basic`; sometimes
//! `disruptionMode: {all: {}}`) and pods naming it by
//! `spec.schedulingGroup.podGroupName`. Sometimes the pods come before
//! their group; sometimes the controller lowers a waiting group's
//! `minCount`. The service's status writes land on the groups, and the
//! invariants on them are checked from the API's objects.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use crate::check::Checks;
use crate::sim::{Ev, Sim};

/// Where the simulated upstream PodGroups are stored.
pub const KEY: &str = "scheduling.k8s.io/podgroups";
/// The condition that says the group was scheduled (v1beta1).
pub const SCHEDULED: &str = "PodGroupInitiallyScheduled";
const DISRUPTION: &str = trainyard_serve::upstream_status::DISRUPTION_TARGET;

/// The dimension's settings (per mille of the gangs the users make).
#[derive(Clone, Debug)]
pub struct UpstreamGangs {
    /// Gangs made as Kubernetes makes them.
    pub share_permille: u32,
    /// Of those: pods created before their PodGroup.
    pub pods_first_permille: u32,
    /// Of those with a gang minimum above 1: `minCount` lowered while the
    /// group waits.
    pub lower_permille: u32,
    /// `disruptionMode: {all: {}}`.
    pub all_permille: u32,
    /// `schedulingPolicy: {basic: {}}` (a minimum of 1).
    pub basic_permille: u32,
}

impl UpstreamGangs {
    /// Draws the dimension from its own stream: on for about half the
    /// seeds.
    pub fn draw(rng: &mut ChaCha8Rng) -> Option<UpstreamGangs> {
        let on = rng.random_bool(0.5);
        let u = UpstreamGangs::draw_settings(rng);
        on.then_some(u)
    }

    fn draw_settings(rng: &mut ChaCha8Rng) -> UpstreamGangs {
        UpstreamGangs {
            share_permille: rng.random_range(300..800),
            pods_first_permille: rng.random_range(100..400),
            lower_permille: rng.random_range(100..400),
            all_permille: rng.random_range(200..600),
            basic_permille: rng.random_range(0..150),
        }
    }

    /// The settings seed `seed` draws, whether or not it draws the
    /// dimension on.
    pub fn forced(seed: u64) -> Option<UpstreamGangs> {
        let mut rng = crate::upstream_stream(seed);
        let _ = rng.random_bool(0.5);
        Some(UpstreamGangs::draw_settings(&mut rng))
    }

    pub fn summary(&self) -> String {
        format!(
            "on ({}‰ of gangs, pods first {}‰, minCount lowered {}‰, disruptionMode all {}‰, basic {}‰)",
            self.share_permille,
            self.pods_first_permille,
            self.lower_permille,
            self.all_permille,
            self.basic_permille
        )
    }
}

/// What the dimension did in a run, and the tallies of what is counted
/// rather than failed.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Upstream PodGroups created; of them after their pods; with
    /// `minCount` lowered.
    pub groups: u64,
    pub pods_first: u64,
    pub lowered: u64,
    /// Status patches that landed on upstream PodGroups.
    pub statuses: u64,
    /// Groups whose `PodGroupInitiallyScheduled` turned True.
    pub scheduled: u64,
    /// Members bound (binds that landed).
    pub bound: u64,
    /// Groups the service evicted pods of (reclaim, preemption,
    /// consolidation); of them, those whose `DisruptionTarget` turned
    /// True afterwards.
    pub disrupted: u64,
    pub disruption_shown: u64,
    /// `disruptionMode: {all: {}}` groups 10 s after the service's first
    /// eviction of one of their pods: of the pods bound when it landed,
    /// none left bound and running, or some.
    pub all_whole: u64,
    pub all_partial: u64,
}

impl Tally {
    pub fn add(&mut self, o: &Tally) {
        self.groups += o.groups;
        self.pods_first += o.pods_first;
        self.lowered += o.lowered;
        self.statuses += o.statuses;
        self.scheduled += o.scheduled;
        self.bound += o.bound;
        self.disrupted += o.disrupted;
        self.disruption_shown += o.disruption_shown;
        self.all_whole += o.all_whole;
        self.all_partial += o.all_partial;
    }

    pub fn summary(&self) -> String {
        format!(
            "{} upstream PodGroups ({} after their pods, {} with minCount lowered), {} members bound, {} status writes, {} turned PodGroupInitiallyScheduled; {} groups evicted by the service, {} of them shown DisruptionTarget True; disruptionMode all: {} evicted whole, {} with pods left running 10 s after",
            self.groups,
            self.pods_first,
            self.lowered,
            self.bound,
            self.statuses,
            self.scheduled,
            self.disrupted,
            self.disruption_shown,
            self.all_whole,
            self.all_partial
        )
    }
}

/// The gang a pod belongs to, by the reader's precedence: Trainyard's
/// label `trainyard.io/pod-group`, then `spec.schedulingGroup.
/// podGroupName` (the simulated users make no peers' pods: the peers'
/// keys come after both in the reader and are never set here).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Gang {
    /// A `trainyard.io/v1alpha1` PodGroup's name.
    Trainyard(String),
    /// A `scheduling.k8s.io` PodGroup's name.
    Upstream(String),
}

impl Gang {
    pub fn name(&self) -> &str {
        match self {
            Gang::Trainyard(n) | Gang::Upstream(n) => n,
        }
    }
}

/// The gang of `pod` (see [`Gang`]).
pub fn gang_of(pod: &Value) -> Option<Gang> {
    if let Some(g) = pod["metadata"]["labels"]["trainyard.io/pod-group"]
        .as_str()
        .filter(|g| !g.is_empty())
    {
        return Some(Gang::Trainyard(g.to_string()));
    }
    pod["spec"]["schedulingGroup"]["podGroupName"]
        .as_str()
        .filter(|g| !g.is_empty())
        .map(|g| Gang::Upstream(g.to_string()))
}

/// The minimum of an upstream PodGroup: `gang.minCount`, 1 for `basic`.
pub fn min_count(group: &Value) -> i64 {
    group["spec"]["schedulingPolicy"]["gang"]["minCount"]
        .as_i64()
        .unwrap_or(1)
}

fn condition<'a>(group: &'a Value, kind: &str) -> Option<&'a Value> {
    group["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The checker's state for the upstream groups.
#[derive(Default)]
pub struct Tracking {
    /// Groups by name: the revision they were first created at.
    pub created: BTreeMap<String, u64>,
    /// Groups by name: the pods (uid) whose bind landed.
    bound: BTreeMap<String, BTreeSet<String>>,
    /// Group objects (uid) whose scheduled condition was seen True.
    scheduled: BTreeSet<String>,
    /// Groups (name) the service evicted pods of, and whether their
    /// `DisruptionTarget` turned True since.
    disrupted: BTreeMap<String, bool>,
    /// `disruptionMode: all` groups to look at: name → when, and the
    /// pods (uid) bound when the first eviction landed.
    all_due: BTreeMap<String, (i64, BTreeSet<String>)>,
    all_seen: BTreeSet<String>,
    pub tally: Tally,
}

impl Checks {
    /// A bind of Trainyard's landed on `pod` (decided at revision
    /// `decided_rv`): a pod of an upstream group is bound only once its
    /// group existed when the bind was decided.
    pub fn on_upstream_bind(&mut self, pod: &Value, decided_rv: u64, trace: &mut Vec<String>) {
        let Some(Gang::Upstream(g)) = gang_of(pod) else {
            return;
        };
        let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
        match self.upstream.created.get(&g) {
            Some(rv) if *rv <= decided_rv => {}
            Some(rv) => self.violate(
                trace,
                format!(
                    "pod {name} of upstream PodGroup {g} bound by a decision at revision {decided_rv}, before its group existed (created at revision {rv})"
                ),
            ),
            None => self.violate(
                trace,
                format!("pod {name} of upstream PodGroup {g} bound while its group never existed"),
            ),
        }
        let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
        if self.upstream.bound.entry(g).or_default().insert(uid) {
            self.upstream.tally.bound += 1;
        }
    }

    /// An eviction of the service's core (reclaim, preemption,
    /// consolidation) landed on `pod`.
    pub fn on_upstream_evict(&mut self, api: &crate::api::Api, pod: &Value, now: i64) {
        let Some(Gang::Upstream(g)) = gang_of(pod) else {
            return;
        };
        let group = api.get(KEY, "ml", &g);
        if !self.upstream.disrupted.contains_key(&g) {
            // The service writes the condition with the cycle's decisions,
            // before their evictions land: it may be shown already.
            let shown = group
                .as_ref()
                .and_then(|o| condition(o, DISRUPTION))
                .is_some_and(|c| c["status"] == "True");
            self.upstream.disrupted.insert(g.clone(), shown);
            self.upstream.tally.disrupted += 1;
            self.upstream.tally.disruption_shown += u64::from(shown);
        }
        let all = group
            .as_ref()
            .is_some_and(|o| o["spec"]["disruptionMode"]["all"].is_object());
        if all && !self.upstream.all_seen.contains(&g) {
            self.upstream.all_seen.insert(g.clone());
            let gang = Some(Gang::Upstream(g.clone()));
            let bound: BTreeSet<String> = api
                .state
                .store
                .iter("/pods")
                .filter(|p| {
                    gang_of(p) == gang
                        && p["spec"]["nodeName"]
                            .as_str()
                            .is_some_and(|n| !n.is_empty())
                })
                .filter_map(|p| p["metadata"]["uid"].as_str().map(str::to_string))
                .collect();
            self.upstream.all_due.insert(g, (now + 10_000, bound));
        }
    }

    /// Status patches landed on upstream groups `changes` (keys
    /// `namespace/name`): the scheduled condition never turns False once
    /// True, and turns True first only with minCount members bound.
    pub fn on_upstream_statuses(
        &mut self,
        api: &crate::api::Api,
        changes: &[(String, Value)],
        trace: &mut Vec<String>,
    ) {
        for (key, _) in changes {
            let (ns, name) = key.split_once('/').unwrap_or(("", key.as_str()));
            let Some(g) = api.get(KEY, ns, name) else {
                continue;
            };
            self.upstream.tally.statuses += 1;
            let uid = g["metadata"]["uid"].as_str().unwrap_or("").to_string();
            let status = condition(&g, SCHEDULED).and_then(|c| c["status"].as_str());
            let was = self.upstream.scheduled.contains(&uid);
            match status {
                Some("True") if !was => {
                    self.upstream.scheduled.insert(uid);
                    self.upstream.tally.scheduled += 1;
                    // Members bound so far, the evicted and finished
                    // included: minCount only decreases here, so the
                    // minimum the writer read was at least this one.
                    let bound = self.upstream.bound.get(name).map_or(0, BTreeSet::len) as i64;
                    let min = min_count(&g);
                    if bound < min {
                        self.violate(
                            trace,
                            format!(
                                "upstream PodGroup {name} shown {SCHEDULED} True with {bound} members ever bound, below minCount {min}"
                            ),
                        );
                    }
                }
                Some(s) if was && s != "True" => self.violate(
                    trace,
                    format!("upstream PodGroup {name}: {SCHEDULED} back to {s} after True"),
                ),
                _ => {}
            }
            let shown = condition(&g, DISRUPTION).is_some_and(|c| c["status"] == "True");
            if shown && let Some(seen) = self.upstream.disrupted.get_mut(name) {
                if !*seen {
                    self.upstream.tally.disruption_shown += 1;
                }
                *seen = true;
            }
        }
    }

    /// After a step: the `disruptionMode: all` groups due a look.
    pub fn upstream_step(&mut self, pods: &[&Value], now: i64, trace: &mut Vec<String>) {
        if self.upstream.all_due.first_key_value().is_none() {
            return;
        }
        let due: Vec<String> = self
            .upstream
            .all_due
            .iter()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(g, _)| g.clone())
            .collect();
        for g in due {
            let Some((_, then)) = self.upstream.all_due.remove(&g) else {
                continue;
            };
            // Only the pods bound when the eviction landed: members bound
            // since (the gang's pending pods) are no part of what it took.
            let left: Vec<&str> = pods
                .iter()
                .filter(|p| {
                    p["metadata"]["uid"]
                        .as_str()
                        .is_some_and(|u| then.contains(u))
                        && p["spec"]["nodeName"]
                            .as_str()
                            .is_some_and(|n| !n.is_empty())
                        && p["metadata"]["deletionTimestamp"].is_null()
                        && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
                })
                .filter_map(|p| p["metadata"]["name"].as_str())
                .collect();
            if !left.is_empty() {
                trace.push(format!(
                    "tally: upstream PodGroup {g} (disruptionMode all) has pods bound then still running 10 s after the service's first eviction of one: {}",
                    left.join(", ")
                ));
                self.upstream.tally.all_partial += 1;
            } else {
                self.upstream.tally.all_whole += 1;
            }
        }
    }
}

impl Sim {
    /// A user's gang made as Kubernetes makes it (see the module).
    pub(crate) fn new_upstream_gang(
        &mut self,
        name: &str,
        per: i64,
        size: i64,
        min: i64,
        queue: &str,
    ) {
        let Some(u) = self.faults.upstream.clone() else {
            return;
        };
        let rng = &mut self.upstream_rng;
        let basic = rng.random_range(0..1000) < u.basic_permille;
        let all = rng.random_range(0..1000) < u.all_permille;
        let pods_first = rng.random_range(0..1000) < u.pods_first_permille;
        let lower = !basic && min > 1 && rng.random_range(0..1000) < u.lower_permille;
        let policy = if basic {
            json!({"basic": {}})
        } else {
            json!({"gang": {"minCount": min}})
        };
        let mut spec = json!({"schedulingPolicy": policy});
        if all {
            spec["disruptionMode"] = json!({"all": {}});
        }
        let group = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml"}, "spec": spec});
        if !pods_first && !self.create_upstream_group(group.clone()) {
            return;
        }
        let priority = if self.rng.random_bool(0.3) {
            "high"
        } else {
            "low"
        };
        for i in 0..size {
            let mut pod = self.pod(&format!("{name}-{i}"), per, None, "trainyard");
            let labels = &mut pod["metadata"]["labels"];
            if let Some(l) = labels.as_object_mut() {
                l.remove("trainyard.io/queue");
            }
            if queue != "default" {
                labels["trainyard.io/queue"] = json!(queue);
            }
            pod["spec"]["priorityClassName"] = json!(priority);
            pod["spec"]["schedulingGroup"] = json!({"podGroupName": name});
            if let Err(e) = self.api.create("/pods", Some("ml"), pod) {
                self.note(format!("pod {name}-{i} refused: {e}"));
            }
        }
        let later = self.upstream_rng.random_range(500..15_000);
        if pods_first {
            self.checks.upstream.tally.pods_first += 1;
            self.at(self.now + later, Ev::UpstreamGroup(Box::new(group)));
        }
        if lower {
            let t = self.now + later + self.upstream_rng.random_range(1000..30_000);
            self.at(t, Ev::LowerMin(name.to_string()));
        }
        self.note(format!(
            "user: upstream gang {name}, {size} × {per} GPUs, {}{}, queue {queue}{}",
            if basic {
                "basic".to_string()
            } else {
                format!("minCount {min}")
            },
            if all { ", disruptionMode all" } else { "" },
            if pods_first {
                format!(", its PodGroup in {later} ms")
            } else {
                String::new()
            }
        ));
    }

    /// Creates an upstream PodGroup; whether the API took it.
    pub(crate) fn create_upstream_group(&mut self, group: Value) -> bool {
        let name = group["metadata"]["name"].as_str().unwrap_or("").to_string();
        match self.api.create(KEY, Some("ml"), group) {
            Ok(_) => {
                let rv = self.api.rv();
                self.checks.upstream.created.entry(name).or_insert(rv);
                self.checks.upstream.tally.groups += 1;
                true
            }
            Err(e) => {
                self.note(format!("upstream PodGroup {name} refused: {e}"));
                false
            }
        }
    }

    /// The controller creates a group whose pods came first (unless its
    /// user deleted every pod meanwhile).
    pub(crate) fn upstream_group_arrives(&mut self, group: Value) {
        let name = group["metadata"]["name"].as_str().unwrap_or("").to_string();
        let any = self
            .api
            .state
            .store
            .iter("/pods")
            .any(|p| gang_of(p) == Some(Gang::Upstream(name.clone())));
        if any && self.create_upstream_group(group) {
            self.note(format!("controller: upstream PodGroup {name} created"));
        }
    }

    /// The controller lowers a waiting group's `minCount` (v1beta1 allows
    /// it): to 1..minCount-1, when the scheduled condition is not True.
    pub(crate) fn lower_min(&mut self, name: &str) {
        let Some(mut g) = self.api.get(KEY, "ml", name) else {
            return;
        };
        let min = min_count(&g);
        let scheduled = condition(&g, SCHEDULED).is_some_and(|c| c["status"] == "True");
        if min <= 1 || scheduled || g["spec"]["schedulingPolicy"]["gang"].is_null() {
            return;
        }
        let to = self.upstream_rng.random_range(1..min);
        g["spec"]["schedulingPolicy"]["gang"]["minCount"] = json!(to);
        match self.api.update(KEY, g, false) {
            Ok(_) => {
                self.checks.upstream.tally.lowered += 1;
                self.note(format!(
                    "controller: upstream PodGroup {name} minCount {min} → {to}"
                ));
            }
            Err(e) => self.note(format!(
                "controller: upstream PodGroup {name} minCount refused: {e}"
            )),
        }
    }
}
