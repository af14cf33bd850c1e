//! The resource claim controller of kube-controller-manager
//! (`pkg/controller/resourceclaim`), run on each kubelet step (see
//! [`crate::kubelet::step`]: with a manual clock nothing happens until the test
//! advances or ticks; with the real clock every `kubelet_period`):
//!
//! * for a pod (not being deleted, not terminal) whose `spec.resourceClaims[]`
//!   entry names a `resourceClaimTemplateName` and has no entry in
//!   `status.resourceClaimStatuses`, it creates a ResourceClaim in the pod's
//!   namespace from the template: `generateName` `<pod>-<claim>-` (cut to 57
//!   characters) with the server's seeded 5-character suffix, an owner
//!   reference to the pod (`controller`, `blockOwnerDeletion`), the template's
//!   labels and annotations plus `resource.kubernetes.io/pod-claim-name`, the
//!   template's `spec.spec`; then records `{name, resourceClaimName}` in the
//!   pod's `status.resourceClaimStatuses`. A claim it generated earlier for the
//!   same pod and entry is reused. A missing template is retried next step;
//! * for a claim whose `status.reservedFor` names pods (`resource: pods`)
//!   that are gone, replaced (other uid) or done (terminal, or deleted while
//!   unscheduled), it removes those entries; when none remain and the claim
//!   has the scheduler's `resource.kubernetes.io/delete-protection` finalizer,
//!   it clears `status.allocation` in the same status write and then removes
//!   the finalizer. Reservations for other consumers are kept;
//! * a claim being deleted, with that finalizer and no reservations, loses its
//!   allocation and the finalizer;
//! * an unreserved claim generated for a pod (controller owner reference to a
//!   `v1` Pod) whose pod is done, replaced or gone is deleted. Upstream the
//!   garbage collector deletes it when the pod is gone; the test server has no
//!   garbage collector, so this controller stands in for it here.

use serde_json::{Value, json};

use super::{CLAIMS, FINALIZER, POD_CLAIM_NAME, TEMPLATES};
use crate::registry::ResourceDef;
use crate::state::{State, WriteOpts};
use crate::store::{EventType, obj_key};

/// One pass of the controller. Returns how many objects it wrote.
pub fn step(st: &mut State) -> usize {
    let (Some(pods), Some(claims)) = (
        st.registry.by_key("/pods").cloned(),
        st.registry.by_key(CLAIMS).cloned(),
    ) else {
        return 0;
    };
    let mut changed = 0;
    let todo: Vec<Value> = st
        .store
        .iter("/pods")
        .filter(|p| needs_claims(p))
        .cloned()
        .collect();
    for pod in todo {
        changed += sync_pod(st, &pods, &claims, pod);
    }
    let todo: Vec<(String, String)> = st
        .store
        .iter(CLAIMS)
        .filter(|c| {
            c["status"]["reservedFor"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
                || owning_pod(c).is_some()
                || c["metadata"]["deletionTimestamp"].is_string()
        })
        .map(obj_key)
        .collect();
    for (ns, name) in todo {
        // A claim may need more than one write (status, finalizer, delete).
        for _ in 0..3 {
            match sync_claim(st, &claims, &ns, &name) {
                0 => break,
                n => changed += n,
            }
        }
    }
    changed
}

/// Whether a pod is done: terminal, or deleted before it was scheduled.
fn is_done(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) || (pod["metadata"]["deletionTimestamp"].is_string()
        && pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty))
}

/// The template entries of a pod's `spec.resourceClaims` without a status entry.
fn missing_entries(pod: &Value) -> Vec<(String, String)> {
    let recorded = &pod["status"]["resourceClaimStatuses"];
    pod["spec"]["resourceClaims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let name = e["name"].as_str()?;
            let tpl = e["resourceClaimTemplateName"].as_str()?;
            let done = recorded
                .as_array()
                .is_some_and(|r| r.iter().any(|s| s["name"] == name));
            (!done).then(|| (name.to_string(), tpl.to_string()))
        })
        .collect()
}

fn needs_claims(pod: &Value) -> bool {
    pod["spec"]["resourceClaims"].is_array()
        && pod["metadata"]["deletionTimestamp"].is_null()
        && !is_done(pod)
        && !missing_entries(pod).is_empty()
}

/// The name and uid of the pod a claim was generated for.
pub fn owning_pod(claim: &Value) -> Option<(String, String)> {
    claim["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true && o["apiVersion"] == "v1" && o["kind"] == "Pod")
        .map(|o| {
            (
                o["name"].as_str().unwrap_or_default().to_string(),
                o["uid"].as_str().unwrap_or_default().to_string(),
            )
        })
}

fn sync_pod(st: &mut State, pods: &ResourceDef, claims: &ResourceDef, pod: Value) -> usize {
    let (ns, pod_name) = obj_key(&pod);
    let uid = pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut changed = 0;
    let mut recorded: Vec<Value> = pod["status"]["resourceClaimStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (entry, tpl_name) in missing_entries(&pod) {
        let existing = st.store.list(CLAIMS, Some(&ns)).into_iter().find(|c| {
            owning_pod(c).is_some_and(|(_, u)| u == uid)
                && c["metadata"]["annotations"][POD_CLAIM_NAME] == entry.as_str()
        });
        let claim = match existing {
            Some(c) => c,
            None => {
                let Some(tpl) = st.store.get(TEMPLATES, &ns, &tpl_name).cloned() else {
                    tracing::debug!(%ns, pod = %pod_name, template = %tpl_name, "resource claim template not found");
                    continue;
                };
                let mut generate = format!("{pod_name}-{entry}-");
                if generate.len() > 57 {
                    generate.truncate(57);
                }
                let tmeta = &tpl["spec"]["metadata"];
                let mut annotations = tmeta["annotations"].clone();
                if !annotations.is_object() {
                    annotations = json!({});
                }
                annotations[POD_CLAIM_NAME] = json!(entry);
                let mut metadata = json!({
                    "generateName": generate,
                    "namespace": ns,
                    "annotations": annotations,
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid,
                                         "controller": true, "blockOwnerDeletion": true}],
                });
                if tmeta["labels"].is_object() {
                    metadata["labels"] = tmeta["labels"].clone();
                }
                let obj = json!({"metadata": metadata, "spec": tpl["spec"]["spec"].clone()});
                match st.create(claims, "v1", Some(&ns), obj, &WriteOpts::default()) {
                    Ok(c) => {
                        changed += 1;
                        c
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, %ns, pod = %pod_name, "creating a resource claim failed");
                        continue;
                    }
                }
            }
        };
        recorded.push(json!({"name": entry, "resourceClaimName": claim["metadata"]["name"]}));
    }
    if recorded.as_slice()
        != pod["status"]["resourceClaimStatuses"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
    {
        // Re-read: the pod may have changed while claims were created (it
        // cannot here, under one lock, but keep the write on the latest).
        if let Some(mut p) = st.store.get("/pods", &ns, &pod_name).cloned() {
            p["status"]["resourceClaimStatuses"] = json!(recorded);
            st.store.commit(&pods.key(), EventType::Modified, p);
            changed += 1;
        }
    }
    changed
}

/// Whether a `reservedFor` entry still holds: a consumer other than a pod, or
/// a pod that exists with that uid and is not done.
fn keeps(st: &State, ns: &str, r: &Value) -> bool {
    let is_pod = r["resource"] == "pods" && r["apiGroup"].as_str().is_none_or(str::is_empty);
    if !is_pod {
        return true;
    }
    let name = r["name"].as_str().unwrap_or_default();
    st.store
        .get("/pods", ns, name)
        .is_some_and(|p| p["metadata"]["uid"] == r["uid"] && !is_done(p))
}

fn sync_claim(st: &mut State, claims: &ResourceDef, ns: &str, name: &str) -> usize {
    let Some(claim) = st.store.get(CLAIMS, ns, name).cloned() else {
        return 0;
    };
    let reserved: Vec<Value> = claim["status"]["reservedFor"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let valid: Vec<Value> = reserved
        .iter()
        .filter(|r| keeps(st, ns, r))
        .cloned()
        .collect();
    let has_finalizer = claim["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER));
    let deleting = claim["metadata"]["deletionTimestamp"].is_string();
    let allocated = claim["status"]["allocation"].is_object();
    let opts = WriteOpts::default();
    let write_status = |st: &mut State, mut c: Value, valid: &[Value], dealloc: bool| {
        if let Some(s) = c["status"].as_object_mut() {
            if valid.is_empty() {
                s.remove("reservedFor");
            } else {
                s.insert("reservedFor".into(), json!(valid));
            }
            if dealloc {
                s.remove("allocation");
            }
        }
        st.update(claims, "v1", (ns, name), c, true, &opts)
    };
    let warn = |e: crate::error::ApiError, what: &str| {
        tracing::warn!(error = %e, %ns, claim = %name, "{what} failed");
        0
    };
    let shrunk = valid.len() < reserved.len();
    if shrunk || (has_finalizer && deleting && valid.is_empty()) {
        // Drop the reservations of gone pods; with none left, deallocate a
        // claim the scheduler allocated (it has the finalizer), then drop the
        // finalizer in the same sync (which removes a deleted claim).
        let mut c = claim;
        let mut n = 0;
        if shrunk || allocated {
            let dealloc = valid.is_empty() && has_finalizer;
            c = match write_status(st, c, &valid, dealloc) {
                Ok(c) => c,
                Err(e) => return warn(e, "updating a resource claim's status"),
            };
            n += 1;
        }
        if has_finalizer && c["status"]["allocation"].is_null() {
            if let Some(f) = c["metadata"]["finalizers"].as_array_mut() {
                f.retain(|x| x != FINALIZER);
            }
            match st.update(claims, "v1", (ns, name), c, false, &opts) {
                Ok(_) => n += 1,
                Err(e) => return n + warn(e, "removing a resource claim's finalizer"),
            }
        }
        return n;
    }
    if valid.is_empty()
        && !deleting
        && let Some((pod_name, pod_uid)) = owning_pod(&claim)
    {
        let gone = match st.store.get("/pods", ns, &pod_name) {
            Some(p) => p["metadata"]["uid"] != pod_uid.as_str() || is_done(p),
            None => true,
        };
        if gone {
            return match st.delete(claims, ns, name, None, None, None) {
                Ok(_) => 1,
                Err(e) => warn(e, "deleting a generated resource claim"),
            };
        }
    }
    0
}
