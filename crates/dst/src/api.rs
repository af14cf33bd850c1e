//! The simulated API server: the test API server's state and rules
//! (`trainyard-testapi`: resource versions, UID preconditions, a bound pod
//! not bound again, the Eviction API with PodDisruptionBudgets, graceful
//! deletion, CRD validation, the kubelet) called in-process, on a manual
//! clock, plus what the simulation needs around it: the streams the
//! service watches, and when each revision was made (for watch lag).

use serde_json::{Value, json};
use trainyard_serve::WorldEvent;
use trainyard_testapi::kubelet::KubeletConfig;
use trainyard_testapi::registry::ResourceDef;
use trainyard_testapi::state::{State, WriteOpts};
use trainyard_testapi::time::Clock;
use trainyard_testapi::{ApiError, eviction, kubelet};

/// The kinds the service watches, in the order of its streams
/// (`trainyard_serve::watch::KINDS`, those the model serves): storage key
/// and version; the last, the upstream `scheduling.k8s.io/v1beta1`
/// PodGroup, only in the upstream gangs dimension (discovery finds it
/// served).
pub const STREAMS_UPSTREAM: &[(&str, &str, &str, &str)] = &[
    ("/nodes", "v1", "", "Node"),
    ("/pods", "v1", "", "Pod"),
    ("/namespaces", "v1", "", "Namespace"),
    (
        "scheduling.k8s.io/priorityclasses",
        "v1",
        "scheduling.k8s.io",
        "PriorityClass",
    ),
    (
        "policy/poddisruptionbudgets",
        "v1",
        "policy",
        "PodDisruptionBudget",
    ),
    ("trainyard.io/queues", "v1alpha1", "trainyard.io", "Queue"),
    (
        "trainyard.io/podgroups",
        "v1alpha1",
        "trainyard.io",
        "PodGroup",
    ),
    (
        "scheduling.k8s.io/podgroups",
        "v1beta1",
        "scheduling.k8s.io",
        "PodGroup",
    ),
];

/// [`STREAMS_UPSTREAM`] without the upstream PodGroup.
pub const STREAMS: &[(&str, &str, &str, &str)] =
    STREAMS_UPSTREAM.split_at(STREAMS_UPSTREAM.len() - 1).0;

/// The streams the service watches: with the upstream PodGroup or not.
pub fn streams(
    upstream: bool,
) -> &'static [(&'static str, &'static str, &'static str, &'static str)] {
    if upstream { STREAMS_UPSTREAM } else { STREAMS }
}

/// The API server model.
pub struct Api {
    pub state: State,
    /// `(time in ms, revision)` after each step: which revision stood when.
    revisions: Vec<(i64, u64)>,
    /// Whether the service watches the upstream PodGroups (see
    /// [`streams`]).
    upstream: bool,
}

/// What a request came to.
pub type Answer = Result<(), String>;

fn err(e: &ApiError) -> String {
    format!("{} {}: {}", e.code, e.reason, e.message)
}

impl Api {
    /// A server with the default namespaces, `ml`, Trainyard's CRDs, and
    /// a history of `window` events (older revisions answer 410).
    pub fn new(seed: u64, window: usize, start_ms: i64) -> Api {
        let kubelet = KubeletConfig {
            enabled: true,
            start_delay: 1,
            stop_delay: 2,
        };
        let clock = Clock::Manual(start_ms.div_euclid(1000));
        let mut api = Api {
            state: State::new(window, clock, kubelet, seed),
            revisions: vec![(start_ms, 0)],
            upstream: false,
        };
        for crd in trainyard_crd::resources::crds() {
            let v = serde_json::to_value(crd).unwrap_or(Value::Null);
            let _ = api.create("apiextensions.k8s.io/customresourcedefinitions", None, v);
        }
        let _ = api.create("/namespaces", None, json!({"metadata": {"name": "ml"}}));
        api
    }

    /// Serves (to the service's watches) the upstream PodGroups or not.
    pub fn serve_upstream(&mut self, on: bool) {
        self.upstream = on;
    }

    pub fn def(&self, key: &str) -> Option<ResourceDef> {
        self.state.registry.by_key(key).cloned()
    }

    /// The kind stored under `key` and its first version.
    fn def_and_version(&self, key: &str) -> Result<(ResourceDef, String), String> {
        let def = self.def(key).ok_or_else(|| format!("no kind {key}"))?;
        let version = def
            .versions
            .first()
            .map(|v| v.name.clone())
            .unwrap_or_default();
        Ok((def, version))
    }

    /// Moves the server's clock (seconds) to `now_ms`, and notes the
    /// revision standing now.
    pub fn at(&mut self, now_ms: i64) {
        let secs = now_ms.div_euclid(1000);
        let cur = self.state.now();
        if secs > cur {
            self.state.clock.advance(secs - cur);
        }
        let rv = self.state.store.rv();
        if self.revisions.last().is_none_or(|(_, r)| *r != rv) {
            self.revisions.push((now_ms, rv));
        }
    }

    /// The revision that stood at `t_ms`.
    pub fn revision_at(&self, t_ms: i64) -> u64 {
        let i = self.revisions.partition_point(|(t, _)| *t <= t_ms);
        if i == 0 { 0 } else { self.revisions[i - 1].1 }
    }

    pub fn rv(&self) -> u64 {
        self.state.store.rv()
    }

    /// Creates `obj` of the kind stored under `key`.
    pub fn create(&mut self, key: &str, ns: Option<&str>, obj: Value) -> Result<Value, String> {
        let (def, version) = self.def_and_version(key)?;
        self.state
            .create(&def, &version, ns, obj, &WriteOpts::default())
            .map_err(|e| err(&e))
    }

    /// Replaces `obj` (main resource, or its `status`), conditional on its
    /// resourceVersion when it carries one.
    pub fn update(&mut self, key: &str, obj: Value, status: bool) -> Result<Value, String> {
        let (def, version) = self.def_and_version(key)?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        self.state
            .update(
                &def,
                &version,
                (&ns, &name),
                obj,
                status,
                &WriteOpts::default(),
            )
            .map_err(|e| err(&e))
    }

    pub fn get(&self, key: &str, ns: &str, name: &str) -> Option<Value> {
        self.state.store.get(key, ns, name).cloned()
    }

    pub fn list(&self, key: &str) -> Vec<Value> {
        self.state.store.list(key, None)
    }

    /// Deletes an object (graceful for pods: `grace` seconds).
    pub fn delete(&mut self, key: &str, ns: &str, name: &str, grace: Option<i64>) -> Answer {
        let def = self.def(key).ok_or_else(|| format!("no kind {key}"))?;
        self.state
            .delete(&def, ns, name, grace, None, None)
            .map(|_| ())
            .map_err(|e| err(&e))
    }

    /// `pods/binding`, with the UID precondition and annotations.
    pub fn bind(&mut self, ns: &str, name: &str, uid: &str, node: &str, notes: Value) -> Answer {
        let def = self.def("/pods").ok_or("no pods")?;
        let mut meta = json!({"name": name, "namespace": ns});
        if !uid.is_empty() {
            meta["uid"] = json!(uid);
        }
        if notes.is_object() {
            meta["annotations"] = notes;
        }
        let body = json!({"metadata": meta, "target": {"kind": "Node", "name": node}});
        eviction::binding(&mut self.state, &def, ns, name, &body)
            .map(|_| ())
            .map_err(|e| err(&e))
    }

    /// `pods/eviction`, conditional on the pod's UID.
    pub fn evict(&mut self, ns: &str, name: &str, uid: &str) -> Answer {
        let def = self.def("/pods").ok_or("no pods")?;
        let mut body = json!({"metadata": {"name": name, "namespace": ns}});
        if !uid.is_empty() {
            body["deleteOptions"] = json!({"preconditions": {"uid": uid}});
        }
        eviction::evict(&mut self.state, &def, ns, name, &body)
            .map(|_| ())
            .map_err(|e| err(&e))
    }

    /// Sets or clears a pod's `status.nominatedNodeName`, conditional on
    /// its UID.
    pub fn nominate(&mut self, ns: &str, name: &str, uid: &str, node: Option<&str>) -> Answer {
        let Some(mut pod) = self.get("/pods", ns, name) else {
            return Err(format!("404 NotFound: pods \"{name}\" not found"));
        };
        if !uid.is_empty() && pod["metadata"]["uid"].as_str() != Some(uid) {
            return Err("409 Conflict: UID precondition".into());
        }
        pod["status"]["nominatedNodeName"] = node.map_or(Value::Null, |n| json!(n));
        self.update("/pods", pod, true).map(|_| ())
    }

    /// Records an Event about a pod (as the service's Event sink does).
    pub fn event(&mut self, ns: &str, pod: &str, reason: &str, message: &str) {
        let ev = json!({
            "metadata": {"generateName": format!("{pod}.")},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": ns},
            "reason": reason, "message": message, "type": "Normal",
            "source": {"component": "trainyard"},
        });
        let _ = self.create("/events", Some(ns), ev);
    }

    /// One kubelet step at the server's clock.
    pub fn kubelet(&mut self) -> usize {
        kubelet::step(&mut self.state)
    }

    /// The watch events of the service's streams after revision `after`,
    /// up to revision `upto`; `None` when `after` was compacted (410).
    pub fn events(&self, after: u64, upto: u64) -> Option<Vec<WorldEvent>> {
        let history = self.state.store.events_after(after).ok()?;
        let mut out = Vec::new();
        for e in history.iter().filter(|e| e.rv <= upto) {
            let Some(stream) = streams(self.upstream)
                .iter()
                .position(|s| s.0 == e.resource)
            else {
                continue;
            };
            let object = self.present(stream, e.object.clone());
            out.push(match e.ty {
                trainyard_testapi::store::EventType::Deleted => {
                    WorldEvent::Deleted { stream, object }
                }
                _ => WorldEvent::Applied { stream, object },
            });
        }
        Some(out)
    }

    /// A full list of every stream, as a watcher's (re)list delivers it.
    pub fn relist(&self) -> Vec<WorldEvent> {
        let mut out = Vec::new();
        for (stream, (key, ..)) in streams(self.upstream).iter().enumerate() {
            out.push(WorldEvent::ListStart { stream });
            for o in self.list(key) {
                out.push(WorldEvent::Applied {
                    stream,
                    object: self.present(stream, o),
                });
            }
            out.push(WorldEvent::ListDone { stream });
        }
        out
    }

    fn present(&self, stream: usize, o: Value) -> Value {
        let (key, version, ..) = streams(self.upstream)[stream];
        match self.state.registry.by_key(key) {
            Some(def) => State::present(def, version, o),
            None => o,
        }
    }
}
