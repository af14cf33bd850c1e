//! What the simulated kubelet checks of a pod's `spec.resourceClaims` before
//! it starts the pod, standing in for the real kubelet's
//! `PrepareDynamicResources` (which it runs before the containers start and
//! retries while it fails). The test server has no DRA driver and calls no
//! `NodePrepareResources`; it only checks the API objects:
//!
//! * every claim exists: a `resourceClaimName` entry names it, a
//!   `resourceClaimTemplateName` entry's claim comes from the pod's
//!   `status.resourceClaimStatuses` (an entry with no `resourceClaimName`
//!   needs no claim) and must be owned by the pod;
//! * the claim named in the pod's `status.extendedResourceClaimStatus`
//!   (`resourceClaimName`: the claim the scheduler made for the pod's
//!   DRA-backed extended resources, KEP-5004) exists and is owned by the
//!   pod, as the kubelet prepares it with the pod's other claims;
//! * each claim has a `status.allocation` and its `status.reservedFor` has
//!   the pod's uid.
//!
//! Until then the pod stays `Pending` ([`Verdict::Wait`]): the kubelet sets
//! `PodReadyToStartContainers` `False` with reason
//! `FailedPrepareDynamicResources` and the message, and records a `Warning`
//! `FailedPrepareDynamicResources` event when the message changes (a real
//! kubelet reports the failure only in events; the condition's reason and
//! message are the test server's, to make the wait visible). It retries each
//! step. A pod whose claim is allocated with an `allocation.nodeSelector`
//! that does not select its node is rejected ([`Verdict::Reject`]): `Failed`
//! with reason `UnexpectedAdmissionError`, as the kubelet's resource managers
//! reject a pod they cannot give its devices (a real kubelet would instead
//! fail `NodePrepareResources` in the driver, which has no such device).

use serde_json::Value;

use super::CLAIMS;
use crate::kubelet::Rejection;
use crate::state::State;

/// The kubelet's verdict on a pod's claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No claims, or all allocated, reserved for the pod and on this node.
    Ready,
    /// Not yet: the message says which claim and why.
    Wait(String),
    /// Never on this node.
    Reject(Rejection),
}

/// The reason on the waiting pod's condition and event.
pub const WAIT_REASON: &str = "FailedPrepareDynamicResources";

/// Checks `pod`'s claims for a start on `node`.
pub fn check(st: &State, pod: &Value, node: &str) -> Verdict {
    let entries = pod["spec"]["resourceClaims"].as_array();
    let extended = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        .as_str()
        .filter(|n| !n.is_empty());
    if entries.is_none() && extended.is_none() {
        return Verdict::Ready;
    }
    let mut claims = Vec::new();
    for e in entries.into_iter().flatten() {
        let entry = e["name"].as_str().unwrap_or_default();
        let (claim_name, generated) = match (
            e["resourceClaimName"].as_str(),
            e["resourceClaimTemplateName"].as_str(),
        ) {
            (Some(n), _) => (n.to_string(), false),
            (None, Some(_)) => {
                let recorded = pod["status"]["resourceClaimStatuses"]
                    .as_array()
                    .and_then(|r| r.iter().find(|s| s["name"] == entry));
                match recorded {
                    None => {
                        return Verdict::Wait(format!(
                            "waiting for the ResourceClaim of pod claim {entry:?}: no entry in status.resourceClaimStatuses yet"
                        ));
                    }
                    Some(s) => match s["resourceClaimName"].as_str() {
                        Some(n) => (n.to_string(), true),
                        None => continue,
                    },
                }
            }
            (None, None) => continue,
        };
        claims.push((claim_name, generated));
    }
    // The claim made for the pod's DRA-backed extended resources
    // (KEP-5004), owned by the pod like a claim from a template.
    if let Some(name) = extended {
        claims.push((name.to_string(), true));
    }
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let node_obj = st.store.get("/nodes", "", node);
    for (claim_name, generated) in claims {
        let Some(claim) = st.store.get(CLAIMS, ns, &claim_name) else {
            return Verdict::Wait(format!(
                "failed to fetch ResourceClaim {claim_name} referenced by pod {ns}/{pod_name}: resourceclaims.resource.k8s.io {claim_name:?} not found"
            ));
        };
        let claim_uid = claim["metadata"]["uid"].as_str().unwrap_or_default();
        if generated && super::controller::owning_pod(claim).is_none_or(|(_, u)| u != uid) {
            return Verdict::Wait(format!(
                "ResourceClaim {claim_name} was not created for pod {ns}/{pod_name} (pod is not owner)"
            ));
        }
        let allocation = &claim["status"]["allocation"];
        if !allocation.is_object() {
            return Verdict::Wait(format!(
                "ResourceClaim {claim_name} ({claim_uid}) is not allocated"
            ));
        }
        let reserved = claim["status"]["reservedFor"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x["uid"] == uid));
        if !reserved {
            return Verdict::Wait(format!(
                "pod {ns}/{pod_name} ({uid}) is not allowed to use ResourceClaim {claim_name} ({claim_uid}): not in its status.reservedFor"
            ));
        }
        let selector = &allocation["nodeSelector"];
        if selector.is_object() && !node_obj.is_some_and(|n| node_selector_matches(selector, n)) {
            return Verdict::Reject(Rejection {
                reason: "UnexpectedAdmissionError".into(),
                message: format!(
                    "Allocate failed due to ResourceClaim {claim_name} is allocated to devices of other nodes (its status.allocation.nodeSelector does not select node {node}), which is unexpected"
                ),
            });
        }
    }
    Verdict::Ready
}

/// Whether a `v1.NodeSelector` selects `node`: any term whose
/// `matchExpressions` (labels) and `matchFields` (`metadata.name`) all hold.
/// An empty term selects nothing, as in Kubernetes.
pub fn node_selector_matches(selector: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let name = node["metadata"]["name"].as_str().unwrap_or_default();
    selector["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|term| {
            let exprs = term["matchExpressions"].as_array();
            let fields = term["matchFields"].as_array();
            if exprs.is_none_or(Vec::is_empty) && fields.is_none_or(Vec::is_empty) {
                return false;
            }
            let by_label = exprs
                .into_iter()
                .flatten()
                .all(|r| requirement(r, labels[r["key"].as_str().unwrap_or_default()].as_str()));
            let by_field = fields
                .into_iter()
                .flatten()
                .all(|r| r["key"] == "metadata.name" && requirement(r, Some(name)));
            by_label && by_field
        })
}

fn requirement(r: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = r["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let num = |s: &str| s.parse::<i64>().ok();
    match r["operator"].as_str().unwrap_or_default() {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(num), values.first().and_then(|v| num(v))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((value.and_then(num), values.first().and_then(|v| num(v))), (Some(a), Some(b)) if a < b)
        }
        _ => false,
    }
}
