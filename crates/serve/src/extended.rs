//! The claim of a pod's DRA-backed extended resources (KEP-5004), made
//! before the pod's bind as kube-scheduler's DynamicResources plugin makes
//! it in PreBind (`bindClaim` in
//! `pkg/scheduler/framework/plugins/dynamicresources`):
//!
//! 1. **Create** the ResourceClaim in the pod's namespace (POST):
//!    `generateName: <pod>-extended-resources-`, a controller owner
//!    reference to the pod, the annotation
//!    `resource.kubernetes.io/extended-resource-claim: "true"`, and one
//!    request `request-0`, `exactly` `count` devices of the class whose
//!    `extendedResourceName` the pod asks;
//! 2. **Allocate** it as every other claim ([`crate::claims::write`]):
//!    the finalizer, then `status.allocation` and `reservedFor` the pod,
//!    each conditional on the resourceVersion the last write returned;
//! 3. **Record** it in the pod's `status.extendedResourceClaimStatus`
//!    (`resourceClaimName`, and `requestMappings` naming `request-0` for
//!    each container asking a resource it serves), a merge patch of the
//!    pod's `status` subresource.
//!
//! Only then is the pod bound. When a step fails, or the claim is released
//! later (another claim of the gang failed, or the bind did), the claim
//! is deleted, its finalizer removed first, as kube-scheduler's Unreserve
//! deletes it. The bodies are pure functions, tested below.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use trainyard_cluster::ClaimWrite;

use crate::claims::DELETE_PROTECTION;
use crate::conn::Conn;
use crate::machine::units::{ClaimSeen, ExtendedClaim};

/// The annotation that marks the claim of a pod's extended resources
/// (`resourceapi.ExtendedResourceClaimAnnotation`).
pub const ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// The claim's one request (the core allocates it as such).
pub const REQUEST: &str = "request-0";

/// Each container's `(name, resource)` for the extended resources (names
/// with a `/`) it asks more than 0 of, init containers first, resources in
/// name order; a limit stands in for a request not stated, as
/// kube-apiserver defaults it.
pub fn asks(pod: &Value) -> Vec<(String, String)> {
    let spec = &pod["spec"];
    let mut out = Vec::new();
    let containers = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(spec["containers"].as_array().into_iter().flatten());
    for c in containers {
        let name = c["name"].as_str().unwrap_or_default();
        let mut resources: Vec<&str> = Vec::new();
        for part in ["requests", "limits"] {
            let Some(m) = c["resources"][part].as_object() else {
                continue;
            };
            for (r, q) in m {
                if r.contains('/') && !zero(q) && !resources.contains(&r.as_str()) {
                    resources.push(r);
                }
            }
        }
        resources.sort_unstable();
        out.extend(
            resources
                .into_iter()
                .map(|r| (name.to_string(), r.to_string())),
        );
    }
    out
}

/// Whether a quantity is zero (extended resources are whole numbers).
fn zero(q: &Value) -> bool {
    match q {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.trim_start_matches(['+', '0']).is_empty(),
        _ => true,
    }
}

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

/// The ResourceClaim to create for `c` (a claim the cycle decided for a
/// pod's extended resources).
pub fn claim_body(c: &ClaimWrite, e: &ExtendedClaim) -> Value {
    let (ns, pod, uid) = match c.pods.first() {
        Some(p) => (p.namespace.as_str(), p.name.as_str(), p.uid.as_str()),
        None => (split(&c.claim).0, "", ""),
    };
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": format!("{pod}-extended-resources-"),
            "namespace": ns,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid, "controller": true,
            }],
            "annotations": {ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": [{
            "name": REQUEST,
            "exactly": {
                "deviceClassName": e.class,
                "allocationMode": "ExactCount",
                "count": e.count,
            },
        }]}},
    })
}

/// The merge patch of the pod's `status` that records claim `name`.
pub fn pod_status_patch(name: &str, e: &ExtendedClaim) -> Value {
    let mappings: Vec<Value> = e
        .mappings
        .iter()
        .map(|(container, resource)| {
            json!({"containerName": container, "resourceName": resource, "requestName": REQUEST})
        })
        .collect();
    json!({"status": {"extendedResourceClaimStatus": {
        "requestMappings": mappings,
        "resourceClaimName": name,
    }}})
}

/// The patch that takes the finalizer off a claim about to be deleted.
pub fn unfinalize_patch(seen: &ClaimSeen) -> Value {
    let rest: Vec<&String> = seen
        .finalizers
        .iter()
        .filter(|f| *f != DELETE_PROTECTION)
        .collect();
    json!({"metadata": {"finalizers": rest}})
}

fn api(client: &kube::Client, namespace: &str, group: &str, kind: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind));
    Api::namespaced_with(client.clone(), namespace, &ar)
}

/// A claim created: its write (named as the API named it), as the create
/// answered, and its resourceVersion after the allocation was written.
#[derive(Clone, Debug)]
pub struct Made {
    pub write: ClaimWrite,
    pub seen: ClaimSeen,
    pub rv: String,
}

/// Creates, allocates and records the claim `c` with `e`. A step that
/// fails after the create deletes the claim again.
pub async fn write(
    conn: &Conn,
    c: &ClaimWrite,
    e: &ExtendedClaim,
    at: &str,
) -> Result<Made, kube::Error> {
    let ns = split(&c.claim).0;
    let pod = c.pods.first().map(|p| p.name.as_str()).unwrap_or_default();
    let body: DynamicObject =
        serde_json::from_value(claim_body(c, e)).map_err(kube::Error::SerdeError)?;
    let created = api(conn.client().await?, ns, "resource.k8s.io", "ResourceClaim")
        .create(&PostParams::default(), &body)
        .await?;
    let name = created.metadata.name.clone().unwrap_or_default();
    let seen = ClaimSeen::of(&serde_json::to_value(&created).map_err(kube::Error::SerdeError)?);
    let write = ClaimWrite {
        claim: format!("{ns}/{name}"),
        ..c.clone()
    };
    tracing::info!("created ResourceClaim {ns}/{name} for the extended resources of {ns}/{pod}");
    let done = async {
        let rv = crate::claims::write(conn, &write, &seen, at).await?;
        api(conn.client().await?, ns, "", "Pod")
            .patch_status(
                pod,
                &PatchParams::default(),
                &Patch::Merge(pod_status_patch(&name, e)),
            )
            .await?;
        Ok::<String, kube::Error>(rv)
    }
    .await;
    match done {
        Ok(rv) => Ok(Made { write, seen, rv }),
        Err(err) => {
            if let Err(e) = delete(conn, &write.claim, &seen).await {
                tracing::warn!(
                    "delete ResourceClaim {}: {}",
                    write.claim,
                    crate::conn::plain(&e)
                );
            }
            Err(err)
        }
    }
}

/// Deletes the claim `key` made for extended resources, its finalizer
/// taken off first (`seen`: the finalizers it had before this service
/// added one).
pub async fn delete(conn: &Conn, key: &str, seen: &ClaimSeen) -> Result<(), kube::Error> {
    let (ns, name) = split(key);
    let claims = api(conn.client().await?, ns, "resource.k8s.io", "ResourceClaim");
    match claims
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(unfinalize_patch(seen)),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    }
    match claims.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use trainyard_model::TaskKey;
    use trainyard_model::dra::AllocatedDevice;

    use super::*;

    #[test]
    fn the_claim_is_made_as_kube_scheduler_makes_it() {
        let c = ClaimWrite {
            job: "ml/g".into(),
            claim: "ml/p-0-extended-resources".into(),
            node: "n1".into(),
            pods: vec![TaskKey {
                namespace: "ml".into(),
                name: "p-0".into(),
                uid: "u0".into(),
            }],
            allocation: Some(vec![AllocatedDevice {
                request: REQUEST.into(),
                driver: "gpu.example.com".into(),
                pool: "n1".into(),
                device: "gpu-3".into(),
                admin_access: false,
                consumed: Default::default(),
            }]),
            extended: vec!["nvidia.com/gpu".into()],
        };
        let e = ExtendedClaim {
            class: "gpu".into(),
            count: 1,
            mappings: vec![("main".into(), "nvidia.com/gpu".into())],
        };
        let body = claim_body(&c, &e);
        assert_eq!(
            body["metadata"],
            json!({"generateName": "p-0-extended-resources-", "namespace": "ml",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p-0",
                    "uid": "u0", "controller": true}],
                "annotations": {ANNOTATION: "true"}})
        );
        assert_eq!(
            body["spec"],
            json!({"devices": {"requests": [{"name": "request-0", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}})
        );
        assert_eq!(
            pod_status_patch("p-0-extended-resources-x7k2q", &e),
            json!({"status": {"extendedResourceClaimStatus": {
                "requestMappings": [{"containerName": "main", "resourceName": "nvidia.com/gpu",
                    "requestName": "request-0"}],
                "resourceClaimName": "p-0-extended-resources-x7k2q"}}})
        );
        let seen = ClaimSeen {
            finalizers: vec!["other".into(), DELETE_PROTECTION.into()],
            ..ClaimSeen::default()
        };
        assert_eq!(
            unfinalize_patch(&seen),
            json!({"metadata": {"finalizers": ["other"]}})
        );
    }

    #[test]
    fn the_containers_asking_extended_resources_are_mapped() {
        let pod = json!({"spec": {
        "initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4",
                "example.com/nic": 1}}},
            {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "0"}}},
            {"name": "c"},
        ]}});
        assert_eq!(
            asks(&pod),
            [
                ("init".to_string(), "nvidia.com/gpu".to_string()),
                ("a".into(), "example.com/nic".into()),
                ("a".into(), "nvidia.com/gpu".into()),
            ]
        );
    }
}
