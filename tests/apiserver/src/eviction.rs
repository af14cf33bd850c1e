//! `pods/binding`, `pods/eviction` and the PodDisruptionBudget arithmetic
//! (a stand-in for the disruption controller, which keeps PDB status current).

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceDef;
use crate::selector::LabelSelector;
use crate::state::State;
use crate::store::EventType;

/// A PDB's numbers against the pods it selects.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Pods selected.
    pub expected: i64,
    /// Selected pods that are Running, Ready and not terminating.
    pub healthy: i64,
    /// Healthy pods required.
    pub desired: i64,
}

impl Budget {
    /// Disruptions the budget allows now.
    pub fn allowed(&self) -> i64 {
        (self.healthy - self.desired).max(0)
    }
}

/// Whether a pod counts as healthy for disruption budgets.
pub fn healthy(pod: &Value) -> bool {
    pod["metadata"]["deletionTimestamp"].is_null()
        && pod["status"]["phase"] == "Running"
        && pod["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn scaled(v: &Value, total: i64, round_up: bool) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let p: f64 = s.strip_suffix('%')?.parse().ok()?;
            let x = p * total as f64 / 100.0;
            Some(if round_up { x.ceil() } else { x.floor() } as i64)
        }
        _ => None,
    }
}

/// Computes a PDB's budget over the pods of its namespace.
pub fn budget(pdb: &Value, pods: &[Value]) -> Budget {
    let sel = LabelSelector::from_object(&pdb["spec"]["selector"]);
    let matching: Vec<&Value> = pods
        .iter()
        .filter(|p| {
            !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) && sel.matches(p)
        })
        .collect();
    let expected = matching.len() as i64;
    let healthy_n = matching.iter().filter(|p| healthy(p)).count() as i64;
    let desired = if let Some(m) = scaled(&pdb["spec"]["minAvailable"], expected, true) {
        m
    } else if let Some(u) = scaled(&pdb["spec"]["maxUnavailable"], expected, true) {
        (expected - u).max(0)
    } else {
        expected
    };
    Budget {
        expected,
        healthy: healthy_n,
        desired,
    }
}

/// Recomputes every PDB's status; commits the ones that changed. Returns how many.
pub fn refresh_pdbs(state: &mut State) -> usize {
    let mut n = 0;
    for pdb in state.store.list("policy/poddisruptionbudgets", None) {
        let ns = pdb["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let b = budget(&pdb, &state.store.list("/pods", Some(&ns)));
        let mut next = pdb.clone();
        next["status"]["expectedPods"] = json!(b.expected);
        next["status"]["currentHealthy"] = json!(b.healthy);
        next["status"]["desiredHealthy"] = json!(b.desired);
        next["status"]["disruptionsAllowed"] = json!(b.allowed());
        next["status"]["observedGeneration"] = pdb["metadata"]["generation"].clone();
        if next != pdb {
            state
                .store
                .commit("policy/poddisruptionbudgets", EventType::Modified, next);
            n += 1;
        }
    }
    n
}

/// `POST pods/{name}/binding`.
pub fn binding(
    state: &mut State,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    body: &Value,
) -> ApiResult<Value> {
    let pod = state
        .store
        .get(&def.key(), ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let target = body["target"]["name"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                "Binding",
                "",
                name,
                vec![Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "target.name".into(),
                }],
            )
        })?;
    if let Some(uid) = body["metadata"]["uid"].as_str()
        && Some(uid) != pod["metadata"]["uid"].as_str()
    {
        return Err(ApiError::conflict(
            "",
            "pods",
            name,
            "Precondition failed: UID in precondition does not match the UID of the object",
        ));
    }
    if pod["metadata"]["deletionTimestamp"].is_string() {
        return Err(ApiError::conflict(
            "",
            "pods",
            name,
            "pod is being deleted, cannot be assigned to a host",
        ));
    }
    if let Some(cur) = pod["spec"]["nodeName"].as_str().filter(|s| !s.is_empty()) {
        return Err(ApiError::conflict(
            "",
            "pods",
            name,
            &format!("pod {name} is already assigned to node \"{cur}\""),
        ));
    }
    // kube-apiserver copies the Binding's annotations onto the pod in the
    // same write that sets `spec.nodeName` (a scheduler's way to hand a
    // node agent what it chose, atomically with the bind).
    let mut pod = pod;
    if let Some(notes) = body["metadata"]["annotations"].as_object()
        && !notes.is_empty()
    {
        if !pod["metadata"]["annotations"].is_object() {
            pod["metadata"]["annotations"] = Value::Object(Default::default());
        }
        for (k, v) in notes {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    crate::kubelet::bind(state, def, &pod, target);
    Ok(crate::error::success_status(201))
}

/// `POST pods/{name}/eviction`.
pub fn evict(
    state: &mut State,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    body: &Value,
) -> ApiResult<Value> {
    let pod = state
        .store
        .get(&def.key(), ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let grace = body["deleteOptions"]["gracePeriodSeconds"].as_i64();
    let ignore_pdb = pod["metadata"]["deletionTimestamp"].is_string()
        || matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed" | "Pending") | None
        );
    if !ignore_pdb {
        let pods = state.store.list("/pods", Some(ns));
        let pdbs: Vec<Value> = state
            .store
            .list("policy/poddisruptionbudgets", Some(ns))
            .into_iter()
            .filter(|b| {
                LabelSelector::from_object(&b["spec"]["selector"]).matches(&pod)
                    && !b["spec"]["selector"].is_null()
            })
            .collect();
        if pdbs.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = pdbs.first() {
            let b = budget(pdb, &pods);
            let pod_healthy = healthy(&pod);
            let always_allow = pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
            let forbidden = if pod_healthy {
                b.allowed() < 1
            } else {
                !always_allow && b.healthy < b.desired
            };
            if forbidden {
                let pdb_name = pdb["metadata"]["name"].as_str().unwrap_or_default();
                let mut e = ApiError::too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    10,
                );
                e.retry_after = None;
                e.causes.push(Cause {
                    reason: "DisruptionBudget".into(),
                    message: format!("The disruption budget {pdb_name} needs {} healthy pods and has {} currently", b.desired, b.healthy),
                    field: String::new(),
                });
                return Err(e);
            }
        }
    }
    state.delete(
        def,
        ns,
        name,
        grace,
        body["deleteOptions"]["preconditions"]["uid"].as_str(),
        body["deleteOptions"]["preconditions"]["resourceVersion"].as_str(),
    )?;
    refresh_pdbs(state);
    Ok(crate::error::success_status(201))
}
