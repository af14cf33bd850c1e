//! A simulated kubelet. Each step, per pod bound to an existing node:
//! * `Pending` → admission, once `start_delay` seconds have passed since binding.
//!   Like a real kubelet (`canAdmitPod`, the resource fit of
//!   `pkg/kubelet/lifecycle/predicate.go`), it admits only a pod that fits: one
//!   more pod within the node's `status.allocatable` `pods`, and each of `cpu`,
//!   `memory` and every extended resource (a name with a `/`) the pod requests
//!   within allocatable minus the requests of the pods already admitted there
//!   (see [`admission`]; a resource the node does not list is allocatable 0).
//!   An admitted pod goes `Running` (conditions, `startTime`, `podIP`,
//!   `containerStatuses` set as a kubelet would, a `Started` event per
//!   container); a rejected one goes `Failed` with `status.reason`
//!   `OutOf<resource>` (`OutOfnvidia.com/gpu`, `OutOfcpu`, `OutOfmemory`,
//!   `OutOfpods`), `status.message` `Pod was rejected: Node didn't have enough
//!   resource: ...`, a `startTime`, only the conditions the kubelet does not own
//!   (`PodScheduled`), and a `Warning` event with that reason; it never runs;
//! * `Running` → `Succeeded` (or `Failed` when the annotation
//!   `testapi.trainyard.io/exit-code` is non-zero) once the pod has run for the
//!   seconds in its annotation [`RUN_SECONDS`];
//! * pods marked for deletion are removed once `min(grace, stop_delay)` seconds
//!   have passed since the deletion request.
//!
//! Admission order: a step first finishes and removes pods, then admits the
//! pods due to start. The pods `Running` on a node count as used; the pods
//! due in the same step are admitted by creation timestamp, then name (then
//! namespace), each admitted one counting as used for the next.
//!
//! A pod's requests are, per resource, the larger of the sum over its
//! containers and the largest init container (restartable init containers,
//! sidecars, add to both as in `PodRequests`), plus `spec.overhead`; a limit
//! stands in for a missing request, as kube-apiserver's defaulting would have
//! set it. Quantities are parsed exactly ([`crate::quantity`]). Not checked:
//! `ephemeral-storage`, `hugepages-*`, host ports, node affinity, taints. Unlike
//! a real kubelet, which drops requests of extended resources its node does
//! not list, an extended resource the node lacks counts as allocatable 0.
//!
//! With a manual clock nothing happens until the clock is advanced (or `tick` is
//! called), so tests drive it deterministically.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use crate::registry::ResourceDef;
use crate::state::State;
use crate::store::{EventType, obj_key};
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
    // kube-controller-manager's resource claim controller runs with the
    // kubelet, enabled or not (see `crate::dra::controller`).
    let claims = crate::dra::controller::step(state);
    if !state.kubelet.enabled {
        return claims;
    }
    let Some(def) = state.registry.by_key("/pods").cloned() else {
        return 0;
    };
    let now = state.now();
    let plan = plan(state, now);
    let changed = plan.remove.len() + plan.finish.len() + plan.due.len();
    for pod in plan.remove {
        state.store.commit("/pods", EventType::Deleted, pod);
    }
    for pod in plan.finish {
        state.store.commit(&def.key(), EventType::Modified, pod);
    }
    // After the finishes and removals: what they free is free for admission.
    admit_and_start(state, &def, plan.due, now);
    claims + changed + crate::eviction::refresh_pdbs(state)
}

/// What a step does to the pods bound to existing nodes.
#[derive(Default)]
struct Plan {
    /// Terminating pods whose time is up.
    remove: Vec<Value>,
    /// Running pods that finish, in their finished form.
    finish: Vec<Value>,
    /// Pending pods due to start (as stored) and their nodes.
    due: Vec<(Value, String)>,
}

/// Decides on references and copies only the pods that change: a step over
/// tens of thousands of pods where nothing happens costs a scan, not a copy
/// of every pod. No decision here reads another pod; admission, which does,
/// comes after ([`admit_and_start`]).
fn plan(state: &State, now: i64) -> Plan {
    let mut plan = Plan::default();
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
                plan.remove.push(pod.clone());
            }
            continue;
        }
        match pod["status"]["phase"].as_str().unwrap_or("Pending") {
            "Pending" if due(state, pod, now) => plan.due.push((pod.clone(), node.to_string())),
            "Running" => plan.finish.extend(finish(pod, now)),
            _ => {}
        }
    }
    plan
}

/// Admits the pods due to start, in admission order (creation timestamp, name,
/// namespace), against what the pods already running on their nodes hold, and
/// starts or rejects each.
fn admit_and_start(state: &mut State, def: &ResourceDef, mut due: Vec<(Value, String)>, now: i64) {
    if due.is_empty() {
        return;
    }
    due.sort_by_cached_key(|(pod, _)| {
        let (ns, name) = obj_key(pod);
        (ts(&pod["metadata"]["creationTimestamp"]), name, ns)
    });
    let nodes: BTreeSet<&str> = due.iter().map(|(_, node)| node.as_str()).collect();
    let mut used: HashMap<String, Amounts> = HashMap::new();
    for (node, pod) in admitted(state).filter(|(node, _)| nodes.contains(node)) {
        charge(used.entry(node.to_string()).or_default(), &pod_amounts(pod));
    }
    for (pod, node) in due {
        match crate::dra::kubelet::check(state, &pod, &node) {
            crate::dra::kubelet::Verdict::Ready => {}
            crate::dra::kubelet::Verdict::Wait(msg) => {
                wait_for_claims(state, def, &pod, &node, &msg, now);
                continue;
            }
            crate::dra::kubelet::Verdict::Reject(r) => {
                let p = rejected(&pod, &r, now);
                let p = state.store.commit(&def.key(), EventType::Modified, p);
                record_event(state, &p, &node, now, Event::rejected(&r));
                continue;
            }
        }
        let wants = pod_amounts(&pod);
        let used = used.entry(node.clone()).or_default();
        match judge(state, &node, used, &wants) {
            Ok(()) => {
                charge(used, &wants);
                let p = running(state, &pod, &node, now);
                let p = state.store.commit(&def.key(), EventType::Modified, p);
                record_started(state, &p, &node, now);
            }
            Err(r) => {
                let p = rejected(&pod, &r, now);
                let p = state.store.commit(&def.key(), EventType::Modified, p);
                record_event(state, &p, &node, now, Event::rejected(&r));
            }
        }
    }
}

/// Leaves a pod whose claims are not ready `Pending`, with
/// `PodReadyToStartContainers` `False` (reason `FailedPrepareDynamicResources`,
/// the message) and a `Warning` event when the message changes.
fn wait_for_claims(
    state: &mut State,
    def: &ResourceDef,
    pod: &Value,
    node: &str,
    msg: &str,
    now: i64,
) {
    use crate::dra::kubelet::WAIT_REASON;
    let mut conds: Vec<Value> = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let same = conds.iter().any(|c| {
        c["type"] == "PodReadyToStartContainers"
            && c["reason"] == WAIT_REASON
            && c["message"] == msg
    });
    if same {
        return;
    }
    conds.retain(|c| c["type"] != "PodReadyToStartContainers");
    let mut c = cond("PodReadyToStartContainers", "False", &format_rfc3339(now));
    c["reason"] = json!(WAIT_REASON);
    c["message"] = json!(msg);
    conds.push(c);
    let mut p = pod.clone();
    p["status"]["conditions"] = json!(conds);
    let p = state.store.commit(&def.key(), EventType::Modified, p);
    let ev = Event {
        reason: WAIT_REASON.into(),
        message: format!("Failed to prepare dynamic resources: {msg}"),
        kind: "Warning",
        field_path: None,
    };
    record_event(state, &p, node, now, ev);
}

/// Why the kubelet refused a pod: its `status.reason` (`OutOfcpu`,
/// `OutOfnvidia.com/gpu`, ...) and the admission message (`Node didn't have
/// enough resource: cpu, requested: 2000, used: 7000, capacity: 8000`), which
/// the pod's `status.message` carries after `Pod was rejected: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// `OutOf<resource>` (or `InvalidNodeInfo` for a node that does not exist).
    pub reason: String,
    /// The admission message, as the kubelet's event carries it.
    pub message: String,
}

impl Rejection {
    /// The pod's `status.message`: `Pod was rejected: ` and the message.
    pub fn status_message(&self) -> String {
        format!("Pod was rejected: {}", self.message)
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for Rejection {}

/// Whether the simulated kubelet of `node` admits `pod` now, against the pods
/// it has admitted there (those `Running` on `node`, other than `pod`). Pure:
/// reads `state`, changes nothing. Checks one more pod against allocatable
/// `pods`, then the pod's `cpu`, `memory` and extended resources (names with
/// a `/`, in name order) it requests more than 0 of; the first that does not
/// fit is the rejection. `cpu` is compared in millicores, the rest in whole
/// units (bytes for memory), each rounded up as the kubelet rounds.
pub fn admission(state: &State, pod: &Value, node: &str) -> Result<(), Rejection> {
    let me = obj_key(pod);
    let mut used = Amounts::new();
    for (_, other) in admitted(state).filter(|(n, p)| *n == node && obj_key(p) != me) {
        charge(&mut used, &pod_amounts(other));
    }
    judge(state, node, &used, &pod_amounts(pod))
}

/// Per resource, what a pod requests, in millis (`"1"` is 1000): the larger
/// of the sum over `spec.containers` and the largest `spec.initContainers`
/// entry (a restartable init container, `restartPolicy: Always`, adds to the
/// containers' sum and to every later init container, as in Kubernetes'
/// `PodRequests`), plus `spec.overhead`. A container's limit stands in for a
/// request it does not state (kube-apiserver's defaulting). Unparsable
/// quantities count as 0.
pub fn pod_requests(pod: &Value) -> BTreeMap<String, i128> {
    let spec = &pod["spec"];
    let mut reqs = Amounts::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        add(&mut reqs, &container_requests(c));
    }
    let mut sidecars = Amounts::new();
    let mut init = Amounts::new();
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let mut own = container_requests(c);
        if c["restartPolicy"] == "Always" {
            add(&mut reqs, &own);
            add(&mut sidecars, &own);
            own = sidecars.clone();
        } else {
            add(&mut own, &sidecars);
        }
        for (r, v) in own {
            let m = init.entry(r).or_default();
            *m = (*m).max(v);
        }
    }
    for (r, v) in init {
        let m = reqs.entry(r).or_default();
        *m = (*m).max(v);
    }
    add(&mut reqs, &quantities(&spec["overhead"]));
    reqs
}

/// Amounts per resource: millis from [`pod_requests`], or the units the
/// kubelet compares in ([`units`]).
type Amounts = BTreeMap<String, i128>;

/// The pods the simulated kubelet has admitted (those `Running`) and their nodes.
fn admitted(state: &State) -> impl Iterator<Item = (&str, &Value)> {
    state.store.iter("/pods").filter_map(|p| {
        let node = p["spec"]["nodeName"].as_str()?;
        (p["status"]["phase"] == "Running").then_some((node, p))
    })
}

/// Whether `wants` (units) fits on `node` beside `used` (units, with `pods`).
fn judge(state: &State, node: &str, used: &Amounts, wants: &Amounts) -> Result<(), Rejection> {
    let Some(n) = state.store.get("/nodes", "", node) else {
        return Err(Rejection {
            reason: "InvalidNodeInfo".into(),
            message: "Kubelet cannot get node info.".into(),
        });
    };
    let allocatable = &n["status"]["allocatable"];
    let short = |r: &str, requested: i128| {
        let capacity = allocatable
            .get(r)
            .and_then(quantity)
            .map_or(0, |m| units(r, m));
        let used = used.get(r).copied().unwrap_or(0);
        (requested > capacity - used).then(|| Rejection {
            reason: format!("OutOf{r}"),
            message: format!(
                "Node didn't have enough resource: {r}, requested: {requested}, used: {used}, capacity: {capacity}"
            ),
        })
    };
    if let Some(r) = short("pods", 1) {
        return Err(r);
    }
    let extended = wants.keys().filter(|r| r.contains('/')).map(String::as_str);
    for r in ["cpu", "memory"].into_iter().chain(extended) {
        let want = wants.get(r).copied().unwrap_or(0);
        if want > 0
            && let Some(rej) = short(r, want)
        {
            return Err(rej);
        }
    }
    Ok(())
}

/// A pod's requests in the units the kubelet compares ([`units`]), without
/// `pods` (each pod counts as one, see [`charge`]) and without the
/// extended resources its `status.extendedResourceClaimStatus` maps to
/// its DRA claim (KEP-5004: DRA devices serve them, not the node's
/// allocatable).
fn pod_amounts(pod: &Value) -> Amounts {
    let by_dra: BTreeSet<&str> = pod["status"]["extendedResourceClaimStatus"]["requestMappings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["resourceName"].as_str())
        .collect();
    pod_requests(pod)
        .into_iter()
        .filter(|(r, _)| r != "pods" && !by_dra.contains(r.as_str()))
        .map(|(r, m)| {
            let u = units(&r, m);
            (r, u)
        })
        .collect()
}

/// Millis in the unit the kubelet compares `resource` in: millicores for
/// `cpu`, whole units rounded up for the rest (`Quantity.Value`).
fn units(resource: &str, millis: i128) -> i128 {
    if resource == "cpu" {
        millis
    } else {
        millis / 1000 + i128::from(millis % 1000 > 0)
    }
}

/// Adds an admitted pod's `wants` (units) and the pod itself to `used`.
fn charge(used: &mut Amounts, wants: &Amounts) {
    add(used, wants);
    *used.entry("pods".into()).or_default() += 1;
}

fn add(to: &mut Amounts, more: &Amounts) {
    for (r, v) in more {
        *to.entry(r.clone()).or_default() += v;
    }
}

/// A container's requests in millis, a limit standing in for a missing request.
fn container_requests(c: &Value) -> Amounts {
    let mut r = quantities(&c["resources"]["limits"]);
    r.extend(quantities(&c["resources"]["requests"]));
    r
}

/// A resource list (`{"cpu": "2", ...}`) in millis.
fn quantities(list: &Value) -> Amounts {
    list.as_object()
        .into_iter()
        .flatten()
        .map(|(r, q)| (r.clone(), quantity(q).unwrap_or(0)))
        .collect()
}

/// A quantity in millis, from a string or (as some tests write it) a number.
fn quantity(q: &Value) -> Option<i128> {
    match q {
        Value::String(s) => crate::quantity::parse_millis(s),
        Value::Number(n) => crate::quantity::parse_millis(&n.to_string()),
        _ => None,
    }
}

/// The pod as a kubelet leaves one it rejected: `Failed` with the reason and
/// message, a start time, its QoS class, and only the conditions the kubelet
/// does not own (`PodScheduled`); no IPs, no container statuses.
fn rejected(pod: &Value, r: &Rejection, now: i64) -> Value {
    const KUBELET_OWNED: [&str; 4] = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
    ];
    let old = &pod["status"];
    let kept: Vec<Value> = old["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| !KUBELET_OWNED.iter().any(|k| c["type"] == *k))
        .cloned()
        .collect();
    let mut status = Map::new();
    status.insert("phase".into(), json!("Failed"));
    status.insert("reason".into(), json!(r.reason));
    status.insert("message".into(), json!(r.status_message()));
    let start = old.get("startTime").cloned();
    status.insert(
        "startTime".into(),
        start.unwrap_or(json!(format_rfc3339(now))),
    );
    if let Some(q) = old.get("qosClass") {
        status.insert("qosClass".into(), q.clone());
    }
    if !kept.is_empty() {
        status.insert("conditions".into(), json!(kept));
    }
    let mut p = pod.clone();
    p["status"] = Value::Object(status);
    p
}

/// When the pod was bound (its `PodScheduled` condition), else created.
fn scheduled_at(pod: &Value) -> Option<i64> {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .and_then(|c| ts(&c["lastTransitionTime"]))
        .or_else(|| ts(&pod["metadata"]["creationTimestamp"]))
}

/// Whether a bound `Pending` pod is due to start (`start_delay` after binding).
fn due(state: &State, pod: &Value, now: i64) -> bool {
    scheduled_at(pod).is_some_and(|at| now >= at + state.kubelet.start_delay)
}

/// The pod as a kubelet reports it once its containers run.
fn running(state: &State, pod: &Value, node: &str, now: i64) -> Value {
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
    p
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

/// An event the kubelet records about a pod.
struct Event {
    reason: String,
    message: String,
    kind: &'static str,
    /// `spec.containers{NAME}` for a container's event; none for the pod's.
    field_path: Option<String>,
}

impl Event {
    /// The `Warning` a kubelet records when it rejects a pod.
    fn rejected(r: &Rejection) -> Self {
        Event {
            reason: r.reason.clone(),
            message: r.message.clone(),
            kind: "Warning",
            field_path: None,
        }
    }
}

/// Records the `Started` events a kubelet emits for a pod's containers.
fn record_started(state: &mut State, pod: &Value, node: &str, now: i64) {
    let names: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect();
    for cname in names {
        let ev = Event {
            reason: "Started".into(),
            message: format!("Started container {cname}"),
            kind: "Normal",
            field_path: Some(format!("spec.containers{{{cname}}}")),
        };
        record_event(state, pod, node, now, ev);
    }
}

/// Records an event from the kubelet of `node` about `pod`.
fn record_event(state: &mut State, pod: &Value, node: &str, now: i64, ev: Event) {
    let Some(events) = state.registry.by_key("/events").cloned() else {
        return;
    };
    let ns = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let at = format_rfc3339(now);
    let mut involved = json!({"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns,
        "uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"]});
    if let Some(f) = ev.field_path {
        involved["fieldPath"] = json!(f);
    }
    let obj = json!({
        "metadata": {"generateName": format!("{name}.")},
        "involvedObject": involved,
        "reason": ev.reason, "message": ev.message, "type": ev.kind,
        "source": {"component": "kubelet", "host": node}, "reportingComponent": "kubelet", "reportingInstance": node,
        "firstTimestamp": at, "lastTimestamp": at, "count": 1,
    });
    if let Err(e) = state.create(
        &events,
        "v1",
        Some(&ns),
        obj,
        &crate::state::WriteOpts::default(),
    ) {
        tracing::warn!(error = %e, "recording a kubelet event failed");
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
    // kube-apiserver ≥ 1.34 clears the nomination in the same write
    // (KEP-5278, kubernetes#132443): a bound pod is nominated nowhere.
    if let Some(status) = p["status"].as_object_mut() {
        status.remove("nominatedNodeName");
    }
    state.store.commit(&def.key(), EventType::Modified, p)
}

#[cfg(test)]
mod tests;
