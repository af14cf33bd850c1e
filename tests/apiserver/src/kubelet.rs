//! A simulated kubelet. Each step, per pod bound to an existing node:
//! * `Pending` → `Running` once `start_delay` seconds have passed since binding
//!   (conditions, `startTime`, `podIP`, `containerStatuses` set as a kubelet would);
//! * `Running` → `Succeeded` (or `Failed` when the annotation
//!   `testapi.trainyard.io/exit-code` is non-zero) once the pod has run for the
//!   seconds in its annotation [`RUN_SECONDS`];
//! * pods marked for deletion are removed once `min(grace, stop_delay)` seconds
//!   have passed since the deletion request.
//!
//! With a manual clock nothing happens until the clock is advanced (or `tick` is
//! called), so tests drive it deterministically.

use serde_json::{Value, json};

use crate::registry::ResourceDef;
use crate::state::State;
use crate::store::EventType;
use crate::time::{format_rfc3339, parse_rfc3339};

/// The annotation holding how many seconds a pod runs before it succeeds.
pub const RUN_SECONDS: &str = "testapi.trainyard.io/run-seconds";
/// The annotation holding the exit code a finished pod reports (non-zero → `Failed`).
pub const EXIT_CODE: &str = "testapi.trainyard.io/exit-code";

/// Simulated kubelet settings.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Whether the kubelet runs at all.
    pub enabled: bool,
    /// Seconds from binding to Running.
    pub start_delay: i64,
    /// Seconds a terminating pod takes to stop (capped by its grace period).
    pub stop_delay: i64,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            enabled: true,
            start_delay: 0,
            stop_delay: 0,
        }
    }
}

fn ts(v: &Value) -> Option<i64> {
    v.as_str().and_then(parse_rfc3339)
}

fn cond(t: &str, status: &str, at: &str) -> Value {
    json!({"type": t, "status": status, "lastProbeTime": null, "lastTransitionTime": at})
}

/// Runs one kubelet step at the state's current time. Returns how many pods changed.
pub fn step(state: &mut State) -> usize {
    if !state.kubelet.enabled {
        return 0;
    }
    let Some(def) = state.registry.by_key("/pods").cloned() else {
        return 0;
    };
    let now = state.now();
    // Decide on references and copy only the pods that change: a step
    // over tens of thousands of pods where nothing happens costs a scan,
    // not a copy of every pod. No decision reads another pod, so deciding
    // all before committing any is the same as committing as we go.
    enum Step {
        Remove(Value),
        Update(Value, String, bool),
    }
    let mut steps = Vec::new();
    for pod in state.store.iter("/pods") {
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if node.is_empty() || state.store.get("/nodes", "", node).is_none() {
            continue;
        }
        if let Some(del) = ts(&pod["metadata"]["deletionTimestamp"]) {
            let grace = pod["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(0);
            let asked = del - grace;
            let finalizers = pod["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if now >= asked + grace.min(state.kubelet.stop_delay) && !finalizers {
                steps.push(Step::Remove(pod.clone()));
            }
            continue;
        }
        let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
        let next = match phase {
            "Pending" => start(state, pod, node, now),
            "Running" => finish(pod, now),
            _ => None,
        };
        if let Some(p) = next {
            steps.push(Step::Update(p, node.to_string(), phase == "Pending"));
        }
    }
    let changed = steps.len();
    for step in steps {
        match step {
            Step::Remove(pod) => {
                state.store.commit("/pods", EventType::Deleted, pod);
            }
            Step::Update(p, node, started) => {
                let p = state.store.commit(&def.key(), EventType::Modified, p);
                if started {
                    record_started(state, &p, &node, now);
                }
            }
        }
    }
    changed + crate::eviction::refresh_pdbs(state)
}

fn start(state: &State, pod: &Value, node: &str, now: i64) -> Option<Value> {
    let scheduled = pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .and_then(|c| ts(&c["lastTransitionTime"]))
        .or_else(|| ts(&pod["metadata"]["creationTimestamp"]))?;
    if now < scheduled + state.kubelet.start_delay {
        return None;
    }
    let at = format_rfc3339(now);
    let mut p = pod.clone();
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let ip_tail: u32 = uid
        .bytes()
        .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    let statuses: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    json!({"name": c["name"], "image": c["image"], "imageID": format!("docker-pullable://{}", c["image"].as_str().unwrap_or("")),
                       "containerID": format!("containerd://{uid}-{}", c["name"].as_str().unwrap_or("")),
                       "ready": true, "started": true, "restartCount": 0, "state": {"running": {"startedAt": at}}})
                })
                .collect()
        })
        .unwrap_or_default();
    let host_ip = state.store.get("/nodes", "", node).and_then(|n| {
        n["status"]["addresses"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
            .map(|x| x["address"].clone())
    });
    let sched_at = pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .map_or(json!(at), |c| c["lastTransitionTime"].clone());
    p["status"]["phase"] = json!("Running");
    p["status"]["startTime"] = json!(at);
    p["status"]["podIP"] = json!(format!(
        "10.{}.{}.{}",
        (ip_tail >> 16) & 0xff,
        (ip_tail >> 8) & 0xff,
        (ip_tail & 0xfe) + 1
    ));
    p["status"]["hostIP"] = host_ip.unwrap_or(json!("192.0.2.1"));
    p["status"]["containerStatuses"] = json!(statuses);
    let mut sched = cond("PodScheduled", "True", "");
    sched["lastTransitionTime"] = sched_at;
    p["status"]["conditions"] = json!([
        cond("PodReadyToStartContainers", "True", &at),
        cond("Initialized", "True", &at),
        cond("Ready", "True", &at),
        cond("ContainersReady", "True", &at),
        sched,
    ]);
    Some(p)
}

fn finish(pod: &Value, now: i64) -> Option<Value> {
    let secs: i64 = pod["metadata"]["annotations"][RUN_SECONDS]
        .as_str()?
        .trim()
        .parse()
        .ok()?;
    let started = ts(&pod["status"]["startTime"])?;
    if now < started + secs {
        return None;
    }
    let code: i64 = pod["metadata"]["annotations"][EXIT_CODE]
        .as_str()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let at = format_rfc3339(now);
    let mut p = pod.clone();
    p["status"]["phase"] = json!(if code == 0 { "Succeeded" } else { "Failed" });
    let reason = if code == 0 { "Completed" } else { "Error" };
    if let Some(cs) = p["status"]["containerStatuses"].as_array_mut() {
        for c in cs {
            let started_at = c["state"]["running"]["startedAt"].clone();
            c["ready"] = json!(false);
            c["started"] = json!(false);
            c["state"] = json!({"terminated": {"exitCode": code, "reason": reason, "startedAt": started_at, "finishedAt": at}});
        }
    }
    if let Some(cs) = p["status"]["conditions"].as_array_mut() {
        for c in cs {
            if c["type"] == "Ready" || c["type"] == "ContainersReady" {
                c["status"] = json!("False");
                c["reason"] = json!("PodCompleted");
                c["lastTransitionTime"] = json!(at);
            }
        }
    }
    Some(p)
}

/// Records the `Started` events a kubelet emits for a pod's containers.
fn record_started(state: &mut State, pod: &Value, node: &str, now: i64) {
    let Some(events) = state.registry.by_key("/events").cloned() else {
        return;
    };
    let ns = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let at = format_rfc3339(now);
    for c in pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let cname = c["name"].as_str().unwrap_or_default();
        let ev = json!({
            "metadata": {"generateName": format!("{name}.")},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns,
                "uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"],
                "fieldPath": format!("spec.containers{{{cname}}}")},
            "reason": "Started", "message": format!("Started container {cname}"), "type": "Normal",
            "source": {"component": "kubelet", "host": node}, "reportingComponent": "kubelet", "reportingInstance": node,
            "firstTimestamp": at, "lastTimestamp": at, "count": 1,
        });
        if let Err(e) = state.create(
            &events,
            "v1",
            Some(&ns),
            ev,
            &crate::state::WriteOpts::default(),
        ) {
            tracing::warn!(error = %e, "recording a kubelet event failed");
        }
    }
}

/// Marks a pod bound to `node` (what `pods/binding` does).
pub fn bind(state: &mut State, def: &ResourceDef, pod: &Value, node: &str) -> Value {
    let at = format_rfc3339(state.now());
    let mut p = pod.clone();
    p["spec"]["nodeName"] = json!(node);
    let mut conds: Vec<Value> = p["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conds.retain(|c| c["type"] != "PodScheduled");
    conds.push(cond("PodScheduled", "True", &at));
    p["status"]["conditions"] = json!(conds);
    state.store.commit(&def.key(), EventType::Modified, p)
}
