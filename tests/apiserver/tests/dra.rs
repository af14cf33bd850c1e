//! Dynamic Resource Allocation (`resource.k8s.io/v1`, and `v1alpha3`
//! DeviceTaintRules) through kube-rs: discovery, CRUD, list/watch, the claim
//! status rules (409 on a stale resourceVersion, 422 on a changed allocation or
//! spec), the `resourceclaims/binding` authorization with RBAC on, the resource
//! claim controller (claims from templates, reservations of gone pods, the
//! deletion of generated claims) and the kubelet waiting on unallocated
//! claims. kubectl's view is in `kubectl_dra.rs`.

mod common;

use std::time::Duration;

use common::manual_server;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::resource::v1alpha3::DeviceTaintRule;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainyard_testapi::{Config, TestApiServer, UserInfo};

fn client(server: &TestApiServer, token: Option<&str>) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    config.auth_info.token = token.map(|t| t.to_string().into());
    Client::try_from(config).expect("client")
}

fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("object")
}

fn status(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other:?}"),
    }
}

fn causes(s: &Status) -> Vec<(String, String)> {
    s.details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| (c.field.clone(), c.message.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn node(name: &str) -> Node {
    obj(
        json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}),
    )
}

fn claim(name: &str) -> ResourceClaim {
    obj(json!({"metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}))
}

/// An allocation of one device on `node` for the request `gpu`.
fn allocation(node: &str, device: &str) -> Value {
    json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": device}]},
           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}})
}

fn reservation(pod: &Pod) -> Value {
    json!({"resource": "pods", "name": pod.name_any(), "uid": pod.uid().expect("uid")})
}

fn pod_with_claims(name: &str, claims: Value) -> Pod {
    obj(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
                 "resourceClaims": claims}}))
}

fn condition(pod: &Pod, ty: &str) -> Option<(String, String, String)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

async fn bind(server: &TestApiServer, pod: &str, node: &str) {
    let c = client(server, None);
    let req = http::Request::post(format!("/api/v1/namespaces/default/pods/{pod}/binding"))
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}}))
            .expect("json"),
        )
        .expect("request");
    let _: Value = c.request(req).await.expect("bind");
}

#[tokio::test]
async fn dra_kinds_are_discovered_created_listed_and_watched() {
    let server = manual_server().await;
    let c = client(&server, None);
    // Discovery: v1 preferred, v1alpha3 served beside it.
    let group: Value = c
        .request(
            http::Request::get("/apis/resource.k8s.io")
                .body(vec![])
                .expect("req"),
        )
        .await
        .expect("group");
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(versions, ["v1", "v1alpha3"]);
    let list: Value = c
        .request(
            http::Request::get("/apis/resource.k8s.io/v1")
                .body(vec![])
                .expect("req"),
        )
        .await
        .expect("resources");
    let res = |name: &str| {
        list["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == name))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(res("resourceclaims")["namespaced"], true);
    assert_eq!(res("resourceslices")["namespaced"], false);
    assert_eq!(res("deviceclasses")["kind"], "DeviceClass");
    assert_eq!(
        res("resourceclaimtemplates")["kind"],
        "ResourceClaimTemplate"
    );
    assert_eq!(
        res("resourceclaims/status")["verbs"],
        json!(["get", "patch", "update"])
    );
    assert!(
        res("resourceclaims/binding").is_null(),
        "binding is not an endpoint"
    );
    assert!(
        res("resourceclaims")["verbs"]
            .as_array()
            .expect("verbs")
            .contains(&json!("watch"))
    );

    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "default");
    let mut events = watcher(claims.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let classes: Api<DeviceClass> = Api::all(c.clone());
    classes
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}})))
        .await
        .expect("class");
    let slices: Api<ResourceSlice> = Api::all(c.clone());
    let slice: ResourceSlice = obj(json!({"metadata": {"name": "node-a-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-a", "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}));
    slices
        .create(&PostParams::default(), &slice)
        .await
        .expect("slice");
    let on_a = slices
        .list(&ListParams::default().fields("spec.nodeName=node-a"))
        .await
        .expect("list by node");
    assert_eq!(on_a.items.len(), 1);
    // Exactly one of the node fields, and the pool is immutable.
    let mut bad = slice.clone();
    bad.metadata.name = Some("bad".into());
    bad.spec.all_nodes = Some(true);
    let e = status(
        slices
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("two node fields"),
    );
    assert_eq!(e.code, 422);
    assert_eq!(causes(&e)[0].0, "spec");
    let e = status(
        slices
            .patch(
                "node-a-gpu",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"pool": {"name": "other"}}})),
            )
            .await
            .expect_err("pool renamed"),
    );
    assert_eq!(causes(&e)[0].0, "spec.pool.name");

    let templates: Api<ResourceClaimTemplate> = Api::namespaced(c.clone(), "default");
    templates
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})))
        .await
        .expect("template");
    let e = status(
        templates
            .patch("one-gpu", &PatchParams::default(), &Patch::Merge(json!({"spec": {"spec": {"devices": {"requests": [{"name": "x", "exactly": {"deviceClassName": "c"}}]}}}})))
            .await
            .expect_err("template spec is immutable"),
    );
    assert_eq!(causes(&e)[0], ("spec".into(), causes(&e)[0].1.clone()));
    assert!(causes(&e)[0].1.ends_with("field is immutable"));

    let taints: Api<DeviceTaintRule> = Api::all(c.clone());
    taints
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": "broken-gpu"},
            "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-1"},
                     "taint": {"key": "example.com/broken", "effect": "NoSchedule"}}})))
        .await
        .expect("taint rule");
    assert_eq!(
        taints
            .list(&ListParams::default())
            .await
            .expect("rules")
            .items
            .len(),
        1
    );

    // A status in the create body is dropped.
    let mut c1 = claim("c1");
    c1.status = Some(obj(json!({"allocation": allocation("node-a", "gpu-0")})));
    let created = claims
        .create(&PostParams::default(), &c1)
        .await
        .expect("claim");
    assert!(
        created
            .status
            .as_ref()
            .is_none_or(|s| s.allocation.is_none())
    );
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(e) = events.next().await {
            if e.expect("event").name_any() == "c1" {
                return true;
            }
        }
        false
    })
    .await
    .expect("watch event in time");
    assert!(seen);
    let l = claims.list(&ListParams::default()).await.expect("list");
    assert_eq!(l.items.len(), 1);
    assert!(l.metadata.resource_version.is_some());
}

#[tokio::test]
async fn claim_status_writes_conflict_and_keep_the_allocation_immutable() {
    let server = manual_server().await;
    let c = client(&server, None);
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "default");
    let p = pods
        .create(
            &PostParams::default(),
            &pod_with_claims("p", json!([{"name": "gpu", "resourceClaimName": "c"}])),
        )
        .await
        .expect("pod");
    let created = claims
        .create(&PostParams::default(), &claim("c"))
        .await
        .expect("claim");

    // The spec is immutable; a status on the main resource is ignored.
    let e = status(
        claims
            .patch("c", &PatchParams::default(), &Patch::Merge(json!({"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "other"}}]}}})))
            .await
            .expect_err("spec change"),
    );
    assert_eq!((e.code, causes(&e)[0].0.as_str()), (422, "spec"));
    let after = claims
        .patch("c", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}, "status": {"allocation": allocation("node-a", "gpu-0")}})))
        .await
        .expect("main-resource patch");
    assert!(after.status.as_ref().is_none_or(|s| s.allocation.is_none()));

    // reservedFor needs an allocation.
    let e = status(
        claims
            .patch_status(
                "c",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"reservedFor": [reservation(&p)]}})),
            )
            .await
            .expect_err("reservation without allocation"),
    );
    assert_eq!(causes(&e)[0].0, "status.reservedFor");
    assert!(
        causes(&e)[0]
            .1
            .contains("may not be specified when `allocated` is not set")
    );

    // A status write with a stale resourceVersion: 409.
    let mut stale = created.clone();
    stale.status = Some(obj(json!({"allocation": allocation("node-a", "gpu-0")})));
    let e = status(
        claims
            .replace_status("c", &PostParams::default(), &stale)
            .await
            .expect_err("stale"),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    let e = status(
        claims
            .patch_status(
                "c",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"resourceVersion": created.resource_version()},
                "status": {"allocation": allocation("node-a", "gpu-0")}}),
                ),
            )
            .await
            .expect_err("stale patch"),
    );
    assert_eq!(e.code, 409);

    // Allocate and reserve in one write, with the current resourceVersion.
    let mut fresh = claims.get("c").await.expect("get");
    fresh.status = Some(obj(
        json!({"allocation": allocation("node-a", "gpu-0"), "reservedFor": [reservation(&p)]}),
    ));
    let allocated = claims
        .replace_status("c", &PostParams::default(), &fresh)
        .await
        .expect("allocate");
    assert!(
        allocated
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .is_some()
    );

    // The allocation cannot change while set, nor be cleared while reserved.
    let e = status(
        claims
            .patch_status(
                "c",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"allocation": allocation("node-a", "gpu-1")}})),
            )
            .await
            .expect_err("re-allocation"),
    );
    assert_eq!(e.code, 422);
    assert_eq!(causes(&e)[0].0, "status.allocation");
    assert!(causes(&e)[0].1.ends_with("field is immutable"));
    let e = status(
        claims
            .patch_status(
                "c",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"allocation": null}})),
            )
            .await
            .expect_err("clear while reserved"),
    );
    assert_eq!(causes(&e)[0].0, "status.reservedFor");

    // reservedFor: unique by uid, at most 256.
    let r = reservation(&p);
    let e = status(
        claims
            .patch_status(
                "c",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"reservedFor": [r, r]}})),
            )
            .await
            .expect_err("duplicate"),
    );
    assert_eq!(causes(&e)[0].0, "status.reservedFor[1]");
    assert!(causes(&e)[0].1.starts_with("Duplicate value"));
    let many: Vec<Value> = (0..257)
        .map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("uid-{i}")}))
        .collect();
    let e = status(
        claims
            .patch_status(
                "c",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"reservedFor": many}})),
            )
            .await
            .expect_err("too many"),
    );
    assert_eq!(
        causes(&e)[0],
        (
            "status.reservedFor".into(),
            "Too many: 257: must have at most 256 items".into()
        )
    );

    // Cleared together with reservedFor: allowed; then a new allocation.
    claims
        .patch_status(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocation": null, "reservedFor": null}})),
        )
        .await
        .expect("deallocate");
    let again = claims
        .patch_status(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocation": allocation("node-a", "gpu-1")}})),
        )
        .await
        .expect("allocate again");
    let state = again
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .expect("devices");
    assert_eq!(state.results.expect("results")[0].device, "gpu-1");
    // A result must name a request of the claim.
    let mut bad = allocation("node-a", "gpu-0");
    bad["devices"]["results"][0]["request"] = json!("nope");
    claims
        .patch_status(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocation": null}})),
        )
        .await
        .expect("deallocate");
    let e = status(
        claims
            .patch_status(
                "c",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"allocation": bad}})),
            )
            .await
            .expect_err("unknown request"),
    );
    assert_eq!(
        causes(&e)[0].0,
        "status.allocation.devices.results[0].request"
    );
}

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
            .devices
            .as_ref()
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

#[tokio::test]
async fn status_writes_of_allocation_need_the_binding_subresource_with_rbac() {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        rbac: true,
        ..Config::default()
    })
    .await
    .expect("server");
    let admin = client(&server, Some(trainyard_testapi::ADMIN_TOKEN));
    let claims: Api<ResourceClaim> = Api::namespaced(admin.clone(), "default");
    claims
        .create(&PostParams::default(), &claim("c"))
        .await
        .expect("claim");
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(admin.clone());
    roles
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": "claim-status"},
            "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaims/status"], "verbs": ["get", "patch", "update"]}]})))
        .await
        .expect("role");
    bindings
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": "sched-claim-status"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "claim-status"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "sched"}]})))
        .await
        .expect("binding");
    let token = server.user_token(UserInfo::new("sched", &[]));
    let sched: Api<ResourceClaim> = Api::namespaced(client(&server, Some(&token)), "default");
    let write = json!({"status": {"allocation": allocation("node-a", "gpu-0")}});
    let e = status(
        sched
            .patch_status("c", &PatchParams::default(), &Patch::Merge(write.clone()))
            .await
            .expect_err("no binding permission"),
    );
    assert_eq!(e.code, 422);
    let (field, msg) = causes(&e)[0].clone();
    assert_eq!(field, "status");
    assert!(
        msg.contains("requires resource=\"resourceclaims/binding\", verb=\"patch\" permission")
            && msg.contains("cannot patch resource \"resourceclaims/binding\" in API group \"resource.k8s.io\" at the cluster scope"),
        "{msg}"
    );
    roles
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": "claim-binding"},
            "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": ["patch", "update"]}]})))
        .await
        .expect("role");
    bindings
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": "sched-claim-binding"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "claim-binding"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "sched"}]})))
        .await
        .expect("binding");
    let done = sched
        .patch_status("c", &PatchParams::default(), &Patch::Merge(write))
        .await
        .expect("allowed with resourceclaims/binding");
    assert!(done.status.and_then(|s| s.allocation).is_some());
    // A status write that leaves allocation and reservedFor alone needs nothing more.
    sched
        .patch_status(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("no-op status write");
}
