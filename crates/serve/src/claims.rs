//! DRA claims written before their pods' binds: the finalizer
//! `resource.kubernetes.io/delete-protection` (a write of the claim),
//! then `status.allocation` and the pods appended to `status.reservedFor`
//! (a write of its `status` subresource), each a JSON merge patch
//! conditional on the claim's `metadata.resourceVersion` (the one the
//! watch last showed, then the one the finalizer's write returned), so a
//! stale view never overwrites the claim: kube-apiserver answers 409
//! Conflict. A claim allocated before gets only the reservation, just as
//! conditional. This is what kube-scheduler's DynamicResources plugin
//! writes in PreBind.
//!
//! A claim this service wrote whose pods are then not bound (another
//! claim of the gang failed, or every bind of its pods did) is released:
//! its allocation and reservations cleared (for a claim it allocated) or
//! its reservations put back as they were (for one it joined), then the
//! finalizer it added removed. The bodies are built by pure functions,
//! tested below; the requests by [`write`] and [`release`].

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use trainyard_cluster::ClaimWrite;

use crate::conn::Conn;
use crate::machine::units::ClaimSeen;

/// The finalizer kube-scheduler adds before it writes an allocation; the
/// claim controller removes it once it has cleared the allocation of a
/// claim no pod reserves.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// A quantity in milli-units as the API writes it: whole units when they
/// are, else with the `m` suffix.
fn quantity(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// `status.allocation` for `c` (which allocates) at `at` (RFC 3339):
/// the results, and a node selector on `metadata.name` as kube-scheduler
/// writes it.
pub fn allocation(c: &ClaimWrite, at: &str) -> Value {
    let results: Vec<Value> = c
        .allocation
        .iter()
        .flatten()
        .map(|d| {
            let mut r = json!({
                "request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device,
            });
            if d.admin_access {
                r["adminAccess"] = true.into();
            }
            if !d.consumed.is_empty() {
                // The model qualifies names published without a domain
                // with the driver's; the API names them as published.
                let prefix = format!("{}/", d.driver);
                let consumed: serde_json::Map<String, Value> = d
                    .consumed
                    .iter()
                    .map(|(k, v)| {
                        let name = k.strip_prefix(&prefix).unwrap_or(k);
                        (name.to_string(), quantity(*v).into())
                    })
                    .collect();
                r["consumedCapacity"] = consumed.into();
            }
            r
        })
        .collect();
    json!({
        "devices": {"results": results},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [c.node.to_string()]}
        ]}]},
        "allocationTimestamp": at,
    })
}

/// The reservations after `c`: those shown, then its pods not among them.
pub fn reserved_for(c: &ClaimWrite, seen: &ClaimSeen) -> Vec<Value> {
    let mut out = seen.reserved_for.clone();
    for p in &c.pods {
        let there = out
            .iter()
            .any(|r| r["resource"] == "pods" && r["uid"].as_str() == Some(p.uid.as_str()));
        if !there {
            out.push(json!({"resource": "pods", "name": p.name, "uid": p.uid}));
        }
    }
    out
}

/// The finalizer patch, conditional on `rv`; `None` when the claim has
/// it already or only joins.
pub fn finalizer_patch(c: &ClaimWrite, seen: &ClaimSeen, rv: &str) -> Option<Value> {
    if c.allocation.is_none() || seen.finalizers.iter().any(|f| f == DELETE_PROTECTION) {
        return None;
    }
    let mut finalizers = seen.finalizers.clone();
    finalizers.push(DELETE_PROTECTION.to_string());
    Some(json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers}}))
}

/// The status patch of `c`, conditional on `rv`.
pub fn status_patch(c: &ClaimWrite, seen: &ClaimSeen, rv: &str, at: &str) -> Value {
    let mut status = json!({"reservedFor": reserved_for(c, seen)});
    if c.allocation.is_some() {
        status["allocation"] = allocation(c, at);
    }
    json!({"metadata": {"resourceVersion": rv}, "status": status})
}

/// The status patch that undoes `c`, conditional on `rv`: a claim it
/// allocated loses its allocation and reservations (an allocation is
/// cleared only with them), one it joined gets its reservations back.
pub fn release_patch(c: &ClaimWrite, seen: &ClaimSeen, rv: &str) -> Value {
    let status = if c.allocation.is_some() {
        json!({"allocation": null, "reservedFor": null})
    } else {
        json!({"reservedFor": seen.reserved_for})
    };
    json!({"metadata": {"resourceVersion": rv}, "status": status})
}

/// The patch that removes the finalizer `c` added, conditional on `rv`.
pub fn unfinalize_patch(c: &ClaimWrite, seen: &ClaimSeen, rv: &str) -> Option<Value> {
    finalizer_patch(c, seen, rv)?;
    Some(json!({"metadata": {"resourceVersion": rv, "finalizers": seen.finalizers}}))
}

fn claims(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
    ));
    Api::namespaced_with(client.clone(), namespace, &ar)
}

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

/// The resourceVersion an answer carries (empty when none: the next
/// conditional write then fails, never lands blind).
fn rv_of(o: &DynamicObject) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}

/// Writes `c` (the finalizer, then the status) over the claim as `seen`;
/// the claim's resourceVersion after it.
pub async fn write(
    conn: &Conn,
    c: &ClaimWrite,
    seen: &ClaimSeen,
    at: &str,
) -> Result<String, kube::Error> {
    let (ns, name) = split(&c.claim);
    let mut rv = seen.resource_version.clone();
    if let Some(body) = finalizer_patch(c, seen, &rv) {
        let api = claims(conn.client().await?, ns);
        let o = api
            .patch(name, &PatchParams::default(), &Patch::Merge(body))
            .await?;
        rv = rv_of(&o);
    }
    let api = claims(conn.client().await?, ns);
    let o = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(status_patch(c, seen, &rv, at)),
        )
        .await?;
    Ok(rv_of(&o))
}

/// Releases `c`, written over `seen` and now at `rv`.
pub async fn release(
    conn: &Conn,
    c: &ClaimWrite,
    seen: &ClaimSeen,
    rv: &str,
) -> Result<(), kube::Error> {
    let (ns, name) = split(&c.claim);
    let api = claims(conn.client().await?, ns);
    let o = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(release_patch(c, seen, rv)),
        )
        .await?;
    if let Some(body) = unfinalize_patch(c, seen, &rv_of(&o)) {
        let api = claims(conn.client().await?, ns);
        api.patch(name, &PatchParams::default(), &Patch::Merge(body))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use trainyard_model::TaskKey;
    use trainyard_model::dra::AllocatedDevice;

    use super::*;

    fn write(allocation: bool) -> ClaimWrite {
        ClaimWrite {
            job: "ml/g".into(),
            claim: "ml/p-0-gpu-abcde".into(),
            node: "n1".into(),
            pods: vec![TaskKey {
                namespace: "ml".into(),
                name: "p-0".into(),
                uid: "u0".into(),
            }],
            allocation: allocation.then(|| {
                vec![AllocatedDevice {
                    request: "gpu".into(),
                    driver: "gpu.example.com".into(),
                    pool: "n1".into(),
                    device: "gpu-3".into(),
                    admin_access: false,
                    consumed: [("gpu.example.com/memory".to_string(), 40_000)].into(),
                }]
            }),
            extended: Vec::new(),
        }
    }

    #[test]
    fn an_allocation_is_written_as_kube_scheduler_writes_it() {
        let seen = ClaimSeen {
            resource_version: "7".into(),
            finalizers: vec!["other".into()],
            ..ClaimSeen::default()
        };
        let c = write(true);
        assert_eq!(
            finalizer_patch(&c, &seen, "7"),
            Some(json!({"metadata": {"resourceVersion": "7",
                "finalizers": ["other", DELETE_PROTECTION]}}))
        );
        assert_eq!(
            status_patch(&c, &seen, "8", "2026-01-01T00:00:00Z"),
            json!({"metadata": {"resourceVersion": "8"}, "status": {
                "reservedFor": [{"resource": "pods", "name": "p-0", "uid": "u0"}],
                "allocation": {
                    "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                        "pool": "n1", "device": "gpu-3", "consumedCapacity": {"memory": "40"}}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
                    "allocationTimestamp": "2026-01-01T00:00:00Z"}}})
        );
        assert_eq!(
            release_patch(&c, &seen, "9"),
            json!({"metadata": {"resourceVersion": "9"},
                   "status": {"allocation": null, "reservedFor": null}})
        );
        assert_eq!(
            unfinalize_patch(&c, &seen, "10"),
            Some(json!({"metadata": {"resourceVersion": "10", "finalizers": ["other"]}}))
        );
    }

    #[test]
    fn a_join_appends_to_the_reservations_and_puts_them_back_on_release() {
        let other = json!({"resource": "pods", "name": "q", "uid": "uq"});
        let seen = ClaimSeen {
            resource_version: "3".into(),
            finalizers: vec![DELETE_PROTECTION.into()],
            reserved_for: vec![other.clone()],
            allocated: true,
            ..ClaimSeen::default()
        };
        let c = write(false);
        assert_eq!(finalizer_patch(&c, &seen, "3"), None);
        assert_eq!(
            status_patch(&c, &seen, "3", "t"),
            json!({"metadata": {"resourceVersion": "3"}, "status": {"reservedFor": [
                other, {"resource": "pods", "name": "p-0", "uid": "u0"}]}})
        );
        assert_eq!(
            release_patch(&c, &seen, "4")["status"],
            json!({"reservedFor": [{"resource": "pods", "name": "q", "uid": "uq"}]})
        );
        assert_eq!(unfinalize_patch(&c, &seen, "4"), None);
    }
}
