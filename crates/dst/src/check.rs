//! The invariants, read from the simulated API server's objects (never
//! from a replica's own state): after every step, at every bind and send,
//! and at the end of a run.
//!
//! - no node bound beyond its allocatable by Trainyard (a node another
//!   scheduler filled after Trainyard decided is that race's, which only
//!   the kubelet's admission settles, as in a real cluster);
//! - no GPU device given to two pods;
//! - no pod bound twice, and no pod decided again by a process that was
//!   told its bind landed;
//! - no write sent by a replica without the Lease while another runs;
//! - no gang left partly bound past `gangRepairSeconds` plus a retry;
//! - every eviction names its reason and beneficiary;
//! - on a quiet cluster, every pending gang that fits is bound (liveness).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use trainyard_serve::GPU_DEVICES_ANNOTATION;
use trainyard_serve::leader::Role;

use crate::api::Api;
use crate::faults::Faults;
use crate::replica::{Replica, Request, Sent};
use crate::upstream::{Gang, gang_of};

#[derive(Default)]
pub struct Checks {
    pub violations: Vec<String>,
    /// Runs whose statuses were compared with the pods at the end.
    pub status_checks: u64,
    pub cycles: u64,
    pub binds: u64,
    pub evictions: u64,
    /// Pods the kubelet refused (`OutOf...`): a race with the other
    /// scheduler, not a violation.
    pub refused: u64,
    /// Pods the other scheduler bound, by uid: the revision of the bind.
    pub other_bound: BTreeMap<String, u64>,
    /// The node each pod was first seen bound to, by uid.
    nodes_of: BTreeMap<String, String>,
    /// Why liveness was not judged at the end, if it was not.
    pub unjudged: Option<String>,
    /// The last cycle's pending reasons, by job (`namespace/name`).
    pub reasons: BTreeMap<String, String>,
    /// Gangs partly bound, since when (ms, counted while a leader runs).
    partial: BTreeMap<String, i64>,
    last_step: i64,
    /// Jobs a replica asked to evict a member of, or had a member bound,
    /// since the last step (an eviction may then wait in its writer's
    /// queue): their partial-gang timers start again.
    pub evicting: BTreeSet<String>,
    /// Jobs a write of which lost its answer, and how long the service
    /// holds what it may have done (ms).
    pub held: BTreeMap<String, i64>,
    /// The watches' lag (ms).
    pub watch_lag_ms: i64,
    /// The leading process (replica, epoch) the timers count for.
    leader: Option<(usize, u64)>,
    /// The consolidation dimension, when on.
    pub consolidation: Option<crate::consolidation::Consolidation>,
    /// What consolidation did.
    pub tally: crate::consolidation::Tally,
    pub(crate) moving: crate::consolidation::Tracking,
    /// The upstream gangs dimension's state and tally.
    pub upstream: crate::upstream::Tracking,
}

/// Whether `pod` holds room on its node: bound, and not finished.
fn holds(pod: &Value) -> bool {
    pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty())
        && !matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        )
}

/// Whole GPUs a pod asks.
pub fn gpus_of(pod: &Value) -> i64 {
    pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["resources"]["requests"]["nvidia.com/gpu"].as_str())
                .filter_map(|q| q.parse::<i64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

pub fn node_gpus(node: &Value) -> i64 {
    node["status"]["allocatable"]["nvidia.com/gpu"]
        .as_str()
        .and_then(|q| q.parse().ok())
        .unwrap_or(0)
}

fn uid(o: &Value) -> String {
    o["metadata"]["uid"].as_str().unwrap_or("").to_string()
}

fn name(o: &Value) -> String {
    o["metadata"]["name"].as_str().unwrap_or("").to_string()
}

impl Checks {
    pub(crate) fn violate(&mut self, trace: &mut Vec<String>, what: String) {
        trace.push(format!("VIOLATION: {what}"));
        self.violations.push(what);
    }

    /// A replica's clock stepped back by `ms` (when positive): the partial
    /// gangs' timers allow for it.
    pub fn clock_stepped_back(&mut self, ms: i64) {
        if ms > 0 {
            for t in self.partial.values_mut() {
                *t -= ms;
            }
        }
    }

    /// A write is sent: by a replica that holds the Lease (when two run),
    /// and not a bind this process was told already landed.
    pub fn on_send(
        &mut self,
        r: usize,
        sent: &Sent,
        api: &Api,
        replicas: &[Replica],
        trace: &mut Vec<String>,
    ) {
        if replicas.len() > 1 {
            let lease = api.get("coordination.k8s.io/leases", "default", "trainyard");
            let holder = lease
                .as_ref()
                .and_then(|l| l["spec"]["holderIdentity"].as_str())
                .unwrap_or("");
            if holder != replicas[r].identity {
                let what = crate::exec::describe(&sent.request);
                let held = if holder.is_empty() {
                    "nobody".to_string()
                } else {
                    holder.to_string()
                };
                self.violate(
                    trace,
                    format!(
                        "replica {r} ({}) sent a write without the Lease (held by {held}): {what}",
                        replicas[r].identity
                    ),
                );
            }
        }
        if let Request::Write {
            write: trainyard_cluster::Write::Bind(b),
            ..
        } = &sent.request
            && replicas[r].acked.contains(&b.task.uid)
        {
            self.violate(trace, format!("pod {} decided twice by replica {r}: its bind had landed and the process was told so", b.task.name));
        }
    }

    /// A bind landed: the node must hold every pod bound there that
    /// Trainyard could know of when it decided.
    pub fn on_bind(
        &mut self,
        r: usize,
        sent: &Sent,
        node: &str,
        api: &Api,
        trace: &mut Vec<String>,
    ) {
        self.binds += 1;
        let (_, pod_name, _) = sent.request.pod();
        // A member bound is progress: a gang still being bound (a slow
        // queue of binds) is not one left partly bound.
        if let Request::Write { write, .. } = &sent.request {
            self.evicting.insert(write.target().0.to_string());
        }
        let (ns, _, _) = sent.request.pod();
        if let Some(pod) = api.get("/pods", &ns, &pod_name) {
            self.on_upstream_bind(&pod, sent.decided_rv, trace);
        }
        let Some(n) = api.get("/nodes", "", node) else {
            return;
        };
        let cap = node_gpus(&n);
        let mut used = 0;
        let mut known = 0;
        for p in api
            .list("/pods")
            .iter()
            .filter(|p| holds(p) && p["spec"]["nodeName"] == node)
        {
            let g = gpus_of(p);
            used += g;
            // Bound by another scheduler after this bind was decided: a
            // race the kubelet's admission settles.
            let later = self
                .other_bound
                .get(&uid(p))
                .is_some_and(|rv| *rv > sent.decided_rv);
            if !later {
                known += g;
            }
        }
        if known > cap {
            self.violate(trace, format!("node {node} over-committed by replica {r}'s bind of {pod_name}: {known} of {cap} GPUs bound (by pods it could know of; {used} in all)"));
        }
    }

    /// An eviction landed: it must say why and for whom.
    pub fn on_evict(
        &mut self,
        pod: &str,
        message: &str,
        beneficiary: &str,
        trace: &mut Vec<String>,
    ) {
        self.evictions += 1;
        if message.is_empty() || beneficiary.is_empty() {
            self.violate(
                trace,
                format!("pod {pod} evicted without a reason or beneficiary"),
            );
        }
    }

    /// After every step: devices, pods bound twice, partial gangs.
    pub fn after_step(
        &mut self,
        api: &Api,
        replicas: &[Replica],
        now: i64,
        trace: &mut Vec<String>,
    ) {
        let pods: Vec<&Value> = api.state.store.iter("/pods").collect();
        let mut devices: BTreeMap<(String, String), String> = BTreeMap::new();
        for p in pods.iter().filter(|p| holds(p)) {
            let node = p["spec"]["nodeName"].as_str().unwrap_or("").to_string();
            let u = uid(p);
            match self.nodes_of.get(&u) {
                Some(was) if *was != node => {
                    let what = format!("pod {} bound twice: to {was}, then to {node}", name(p));
                    self.violate(trace, what);
                }
                Some(_) => {}
                None => {
                    self.nodes_of.insert(u, node.clone());
                }
            }
            let Some(list) = p["metadata"]["annotations"][GPU_DEVICES_ANNOTATION].as_str() else {
                continue;
            };
            for d in list.split(',').filter(|d| !d.is_empty()) {
                if let Some(other) = devices.insert((node.clone(), d.to_string()), name(p)) {
                    let what = format!(
                        "GPU {d} of node {node} given to two pods: {other} and {}",
                        name(p)
                    );
                    self.violate(trace, what);
                }
            }
        }
        self.refused = pods
            .iter()
            .filter(|p| {
                p["status"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("OutOf"))
            })
            .count() as u64;
        let leading = replicas.iter().any(|r| {
            r.up && r.machine.as_ref().is_some_and(|m| m.leading())
                && r.elector.as_ref().is_none_or(|e| e.role == Role::Leader)
        });
        // The repair timer lives in the leader's memory: a new leading
        // process starts it again (docs/service-simulation.md).
        let leader = replicas.iter().enumerate().find_map(|(i, r)| {
            let leads = r.up
                && r.machine.as_ref().is_some_and(|m| m.leading())
                && r.elector.as_ref().is_none_or(|e| e.role == Role::Leader);
            leads.then_some((i, r.epoch))
        });
        if leader != self.leader {
            self.leader = leader;
            self.partial.clear();
        }
        let dt = if leading { now - self.last_step } else { 0 };
        self.last_step = now;
        self.upstream_step(&pods, now, trace);
        self.track_pending(api.rv(), &pods);
        self.gangs(api, &pods, replicas, dt, trace);
    }

    fn gangs(
        &mut self,
        api: &Api,
        pods: &[&Value],
        replicas: &[Replica],
        dt: i64,
        trace: &mut Vec<String>,
    ) {
        let Some(s) = replicas.first().map(|r| &r.settings.service) else {
            return;
        };
        // The member's termination (≤ 5 s here), the watch's lag, the
        // repair's wait, and three cycles; an eviction asked for a member
        // starts it again (a refused one is asked again after
        // `assumeTimeoutSeconds`).
        let limit = s.gang_repair_seconds as i64 * 1000
            + self.watch_lag_ms
            + 5000
            + 3 * s.cycle_period_millis as i64;
        let mut partial_now = BTreeSet::new();
        // Trainyard's PodGroups and the upstream ones (their minimum
        // `minCount`, 1 for `basic`); members found as the reader finds
        // them (`upstream::gang_of`).
        let groups = api
            .list("trainyard.io/podgroups")
            .into_iter()
            .map(|g| {
                let min = g["spec"]["minMember"].as_i64().unwrap_or(1);
                (Gang::Trainyard(name(&g)), min)
            })
            .chain(
                api.list(crate::upstream::KEY)
                    .into_iter()
                    .map(|g| (Gang::Upstream(name(&g)), crate::upstream::min_count(&g))),
            );
        for (gang, min) in groups {
            let gname = gang.name().to_string();
            let members: Vec<&Value> = pods
                .iter()
                .copied()
                .filter(|p| gang_of(p).as_ref() == Some(&gang))
                .collect();
            let finished = members
                .iter()
                .any(|p| matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")));
            let bound = members
                .iter()
                .filter(|p| holds(p) && p["metadata"]["deletionTimestamp"].is_null())
                .count() as i64;
            if finished || bound == 0 || bound >= min {
                continue;
            }
            partial_now.insert(gname.clone());
            let job = format!("ml/{gname}");
            let asked = self.evicting.remove(&job);
            let held = self.held.remove(&job);
            let t = self.partial.entry(gname.clone()).or_default();
            *t = if asked { 0 } else { *t + dt };
            if let Some(hold) = held {
                *t = (*t).min(-hold);
            }
            if *t > limit {
                if std::env::var("DST_DEBUG").is_ok() {
                    for m in &members {
                        eprintln!("member {}", m);
                    }
                }
                let what = format!(
                    "gang {gname} left partly bound ({bound} of minMember {min}) for {} s of leading time",
                    *t / 1000
                );
                self.violate(trace, what);
            }
        }
        self.partial.retain(|g, _| partial_now.contains(g));
        self.evicting.clear();
        self.held.clear();
    }

    /// At the end, after the quiet period: every pending gang that fits
    /// the free GPUs is bound.
    pub fn at_end(&mut self, api: &Api, _replicas: &[Replica], _faults: &Faults) {
        let pods = api.list("/pods");
        let mut free: Vec<i64> = Vec::new();
        for n in api.list("/nodes") {
            let cordoned = n["spec"]["unschedulable"].as_bool().unwrap_or(false);
            let tainted = n["spec"]["taints"]
                .as_array()
                .is_some_and(|t| !t.is_empty());
            if cordoned || tainted {
                continue;
            }
            let nm = name(&n);
            let used: i64 = pods
                .iter()
                .filter(|p| holds(p) && p["spec"]["nodeName"] == nm.as_str())
                .map(gpus_of)
                .sum();
            free.push(node_gpus(&n) - used);
        }
        // Pending pods of ours by job: (pending, GPUs each, minimum,
        // preemptible).
        let mut waiting: BTreeMap<String, (i64, i64, i64, bool)> = BTreeMap::new();
        let live = |p: &&Value| p["metadata"]["deletionTimestamp"].is_null();
        let group_of = |p: &Value| gang_of(p).map(|g| g.name().to_string());
        for p in pods.iter().filter(live).filter(|p| {
            p["spec"]["schedulerName"] == "trainyard"
                && p["spec"]["nodeName"].as_str().is_none_or(str::is_empty)
                && p["status"]["phase"].as_str().is_none_or(|ph| ph == "Pending")
                // A pod in a queue that does not exist waits, with a reason.
                && p["metadata"]["labels"]["trainyard.io/queue"] != "no-such-queue"
        }) {
            let (job, min, queue) = match gang_of(p) {
                Some(Gang::Trainyard(g)) => {
                    let Some(group) = api.get("trainyard.io/podgroups", "ml", &g) else {
                        continue;
                    };
                    let queue = group["spec"]["queue"].as_str().map(str::to_string);
                    (g, group["spec"]["minMember"].as_i64().unwrap_or(1), queue)
                }
                // An upstream gang's queue is its pods' label; a gang whose
                // group does not exist (yet) waits for it.
                Some(Gang::Upstream(g)) => {
                    let Some(group) = api.get(crate::upstream::KEY, "ml", &g) else {
                        continue;
                    };
                    let queue = p["metadata"]["labels"]["trainyard.io/queue"]
                        .as_str()
                        .map(str::to_string);
                    (g, crate::upstream::min_count(&group), queue)
                }
                None => (
                    name(p),
                    1,
                    p["metadata"]["labels"]["trainyard.io/queue"]
                        .as_str()
                        .map(str::to_string),
                ),
            };
            // A job whose Queue a user deleted (policy churn) and did not
            // create again waits, with a reason, as one naming a queue that
            // never existed.
            if let Some(q) = queue.filter(|q| q != "default")
                && api.get("trainyard.io/queues", "", &q).is_none()
            {
                continue;
            }
            let low = p["spec"]["priorityClassName"] == "low";
            let e = waiting.entry(job).or_insert((0, gpus_of(p), min, low));
            e.0 += 1;
            e.1 = e.1.max(gpus_of(p));
        }
        // A gang with fewer live pods than its minimum waits for them.
        waiting.retain(|job, w| {
            let members = pods
                .iter()
                .filter(live)
                .filter(|p| group_of(p).as_deref() == Some(job.as_str()) || name(p) == *job)
                .count() as i64;
            w.1 > 0 && members >= w.2
        });
        let room = |each: i64| free.iter().map(|f| f / each).sum::<i64>();
        // A job that cannot fit may hold room for itself (a reservation):
        // then what the others may use is the scheduler's business.
        if let Some((job, _)) = waiting.iter().find(|(_, w)| room(w.1) < w.0) {
            self.unjudged = Some(format!("{job} does not fit the free GPUs"));
            return;
        }
        for (job, (count, each, _, low)) in waiting {
            // A job not preemptible (high priority) runs only within its
            // queue's quota: only preemptible jobs are judged.
            if low && room(each) >= count {
                let why = self
                    .reasons
                    .get(&format!("ml/{job}"))
                    .cloned()
                    .unwrap_or_else(|| "no reason given".into());
                self.violations.push(format!(
                    "liveness: {job} ({count} pods × {each} GPUs) still pending on a quiet cluster with room for {} such pods: {why}",
                    room(each)
                ));
            }
        }
    }
}
