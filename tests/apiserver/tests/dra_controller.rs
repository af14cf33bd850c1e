//! The resource claim controller (claims generated from templates and
//! recorded on the pod, reservations of gone pods dropped, the last one
//! deallocating a scheduler-allocated claim, generated claims deleted with
//! their pod) and the simulated kubelet waiting on unallocated or unreserved
//! claims and refusing a claim allocated on another node, through kube-rs
//! against a manual clock (each `tick` runs the controller and the kubelet).

mod common;

use common::dra::*;
use common::manual_server;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn template_claims_are_generated_reserved_started_and_cleaned_up() {
    let server = manual_server().await;
    let c = client(&server, None);
    let nodes: Api<Node> = Api::all(c.clone());
    nodes
        .create(&PostParams::default(), &node("node-a"))
        .await
        .expect("node");
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(c.clone(), "default");
    templates
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": "one-gpu"},
            "spec": {"metadata": {"labels": {"team": "ml"}, "annotations": {"note": "from-template"}},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})))
        .await
        .expect("template");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "default");
    let p = pods
        .create(
            &PostParams::default(),
            &pod_with_claims(
                "trainer",
                json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
            ),
        )
        .await
        .expect("pod");

    // The controller runs with the kubelet step.
    assert!(
        claims
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    server.tick();
    let generated = claims
        .list(&ListParams::default())
        .await
        .expect("list")
        .items;
    assert_eq!(generated.len(), 1);
    let gc = &generated[0];
    let name = gc.name_any();
    let suffix = name.strip_prefix("trainer-gpu-").expect("name prefix");
    assert_eq!(suffix.len(), 5);
    assert!(
        suffix
            .chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit())
    );
    let owner = &gc.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Pod", "trainer")
    );
    assert_eq!(Some(owner.uid.as_str()), p.uid().as_deref());
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert_eq!(
        gc.annotations()["resource.kubernetes.io/pod-claim-name"],
        "gpu"
    );
    assert_eq!(gc.annotations()["note"], "from-template");
    assert_eq!(gc.labels()["team"], "ml");
    assert_eq!(
        gc.spec
            .as_ref()
            .and_then(|s| s.devices.as_ref())
            .and_then(|d| d.requests.as_ref())
            .map(Vec::len),
        Some(1)
    );
    let p = pods.get("trainer").await.expect("pod");
    let st = p
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .expect("claim statuses");
    assert_eq!(
        (st[0].name.as_str(), st[0].resource_claim_name.as_deref()),
        ("gpu", Some(name.as_str()))
    );
    server.tick();
    assert_eq!(
        claims
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1,
        "no second claim"
    );

    // Bound but not allocated: the kubelet waits.
    bind(&server, "trainer", "node-a").await;
    server.tick();
    let waiting = pods.get("trainer").await.expect("pod");
    assert_eq!(
        waiting.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let (s, reason, msg) = condition(&waiting, "PodReadyToStartContainers").expect("condition");
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("False", "FailedPrepareDynamicResources")
    );
    assert!(msg.contains("is not allocated"), "{msg}");
    // Allocated but not reserved for the pod: still waiting.
    claims
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}}),
            ),
        )
        .await
        .expect("finalizer");
    claims
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocation": allocation("node-a", "gpu-0")}})),
        )
        .await
        .expect("allocate");
    server.tick();
    let (_, _, msg) = condition(
        &pods.get("trainer").await.expect("pod"),
        "PodReadyToStartContainers",
    )
    .expect("condition");
    assert!(msg.contains("is not allowed to use ResourceClaim"), "{msg}");
    claims
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"reservedFor": [reservation(&p)]}})),
        )
        .await
        .expect("reserve");
    server.tick();
    let running = pods.get("trainer").await.expect("pod");
    assert_eq!(
        running.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );

    // Deleting the pod (graceful: it is bound) and letting the kubelet remove
    // it drops the reservation and the allocation, then the claim.
    pods.delete("trainer", &DeleteParams::default())
        .await
        .expect("delete");
    server.advance(1);
    assert!(pods.get_opt("trainer").await.expect("get").is_none());
    server.tick();
    assert!(
        claims.get_opt(&name).await.expect("get").is_none(),
        "generated claim deleted with its pod"
    );
}

#[tokio::test]
async fn reservations_of_gone_pods_are_dropped_and_the_last_one_deallocates() {
    let server = manual_server().await;
    let c = client(&server, None);
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "default");
    let uses = json!([{"name": "gpu", "resourceClaimName": "shared"}]);
    let a = pods
        .create(&PostParams::default(), &pod_with_claims("a", uses.clone()))
        .await
        .expect("a");
    let b = pods
        .create(&PostParams::default(), &pod_with_claims("b", uses))
        .await
        .expect("b");
    for (name, finalizer) in [("shared", true), ("kept", false)] {
        let mut cl = claim(name);
        if finalizer {
            cl.metadata.finalizers = Some(vec!["resource.kubernetes.io/delete-protection".into()]);
        }
        claims
            .create(&PostParams::default(), &cl)
            .await
            .expect("claim");
        claims
            .patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": {
                "allocation": allocation("node-a", "gpu-0"), "reservedFor": [reservation(&a), reservation(&b)]}})))
            .await
            .expect("allocate and reserve");
    }
    // Unbound pods go at once.
    pods.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    server.tick();
    for name in ["shared", "kept"] {
        let cl = claims.get(name).await.expect("claim");
        let r = cl
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.clone())
            .expect("reservedFor");
        assert_eq!(
            r.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
            ["b"],
            "{name}"
        );
    }
    pods.delete("b", &DeleteParams::default())
        .await
        .expect("delete b");
    server.tick();
    // With the scheduler's finalizer: deallocated and the finalizer removed.
    let shared = claims.get("shared").await.expect("shared claim stays");
    let st = shared.status.clone().unwrap_or_default();
    assert!(st.allocation.is_none() && st.reserved_for.is_none_or(|r| r.is_empty()));
    assert!(shared.finalizers().is_empty());
    // Without it (not allocated by a scheduler): the allocation stays.
    let kept = claims.get("kept").await.expect("kept");
    assert!(
        kept.status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .is_some()
    );
    assert!(
        kept.status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .is_none_or(|r| r.is_empty())
    );
}

#[tokio::test]
async fn the_kubelet_refuses_a_pod_whose_claim_is_allocated_on_another_node() {
    let server = manual_server().await;
    let c = client(&server, None);
    let nodes: Api<Node> = Api::all(c.clone());
    nodes
        .create(&PostParams::default(), &node("node-a"))
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "default");
    let p = pods
        .create(
            &PostParams::default(),
            &pod_with_claims("p", json!([{"name": "gpu", "resourceClaimName": "c"}])),
        )
        .await
        .expect("pod");
    claims
        .create(&PostParams::default(), &claim("c"))
        .await
        .expect("claim");
    claims
        .patch_status(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
            "allocation": allocation("node-b", "gpu-0"), "reservedFor": [reservation(&p)]}})),
        )
        .await
        .expect("allocate on node-b");
    bind(&server, "p", "node-a").await;
    server.tick();
    let p = pods.get("p").await.expect("pod");
    let s = p.status.expect("status");
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("UnexpectedAdmissionError"));
    assert!(
        s.message
            .unwrap_or_default()
            .contains("does not select node node-a")
    );
}

/// With the real clock the controller runs every kubelet period: a watch sees
/// the generated claim, then the pod's recorded status, without a tick.
#[tokio::test]
async fn with_the_real_clock_a_watch_sees_the_generated_claim() {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let server = trainyard_testapi::TestApiServer::start(trainyard_testapi::Config::default())
        .await
        .expect("server");
    let c = client(&server, None);
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut claim_events = watcher(claims.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut pod_events = watcher(pods.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(c.clone(), "default");
    templates
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})),
        )
        .await
        .expect("template");
    pods.create(
        &PostParams::default(),
        &pod_with_claims(
            "w",
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        ),
    )
    .await
    .expect("pod");
    let deadline = std::time::Duration::from_secs(10);
    let claim = tokio::time::timeout(deadline, async {
        while let Some(e) = claim_events.next().await {
            let cl = e.expect("claim event");
            if cl.name_any().starts_with("w-gpu-") {
                return cl;
            }
        }
        panic!("claim watch ended");
    })
    .await
    .expect("generated claim seen in time");
    let recorded = tokio::time::timeout(deadline, async {
        while let Some(e) = pod_events.next().await {
            let p = e.expect("pod event");
            if let Some(s) = p.status.and_then(|s| s.resource_claim_statuses) {
                return s;
            }
        }
        panic!("pod watch ended");
    })
    .await
    .expect("pod status seen in time");
    assert_eq!(
        recorded[0].resource_claim_name.as_deref(),
        Some(claim.name_any().as_str())
    );
}

/// A pod asking `nvidia.com/gpu` on a node without it, whose DRA-backed
/// extended resources (KEP-5004) the scheduler served with a claim of its
/// own: the pod status subresource keeps `status.extendedResourceClaimStatus`,
/// and the kubelet starts the pod only once that claim is allocated and
/// reserved for it, not counting the mapped resource against allocatable.
#[tokio::test]
async fn a_pod_whose_extended_resource_claim_is_ready_is_started() {
    use kube::api::DynamicObject;
    use kube::core::{ApiResource, GroupVersionKind};
    let server = manual_server().await;
    let c = client(&server, None);
    let nodes: Api<Node> = Api::all(c.clone());
    nodes
        .create(&PostParams::default(), &node("node-a"))
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let raw_pods: Api<DynamicObject> = Api::namespaced_with(
        c.clone(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod")),
    );
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "default");
    let p = pods
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "trainer"},
                "spec": {"containers": [{"name": "main", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})),
        )
        .await
        .expect("pod");
    let made = claims
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"generateName": "trainer-extended-resources-",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer",
                    "uid": p.uid().expect("uid"), "controller": true}]},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}})),
        )
        .await
        .expect("claim");
    let name = made.name_any();
    assert!(name.starts_with("trainer-extended-resources-"), "{name}");
    let recorded = json!({"requestMappings": [{"containerName": "main",
        "resourceName": "nvidia.com/gpu", "requestName": "gpu"}], "resourceClaimName": name});
    raw_pods
        .patch_status(
            "trainer",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"extendedResourceClaimStatus": recorded}})),
        )
        .await
        .expect("pod status");
    let shown = raw_pods.get("trainer").await.expect("pod");
    assert_eq!(
        shown.data["status"]["extendedResourceClaimStatus"],
        recorded
    );

    // Bound, the claim not allocated yet: the kubelet waits for it.
    bind(&server, "trainer", "node-a").await;
    server.tick();
    let waiting = pods.get("trainer").await.expect("pod");
    let (_, reason, msg) = condition(&waiting, "PodReadyToStartContainers").expect("condition");
    assert_eq!(reason, "FailedPrepareDynamicResources");
    assert!(
        msg.contains(&format!("ResourceClaim {name}")) && msg.contains("is not allocated"),
        "{msg}"
    );
    claims
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"allocation": allocation("node-a", "gpu-0"),
                "reservedFor": [reservation(&p)]}}),
            ),
        )
        .await
        .expect("allocate");
    server.tick();
    let running = pods.get("trainer").await.expect("pod");
    assert_eq!(
        running.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running"),
        "{:?}",
        running.status
    );
}
