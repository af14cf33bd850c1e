//! Dynamic Resource Allocation (`resource.k8s.io/v1`, and `v1alpha3`
//! DeviceTaintRules) through kube-rs: discovery, CRUD, list/watch, the claim
//! status rules (409 on a stale resourceVersion, 422 on a changed allocation or
//! spec) and the `resourceclaims/binding` authorization with RBAC on. The
//! resource claim controller and the kubelet's checks are in
//! `dra_controller.rs`; kubectl's view is in `kubectl_dra.rs`.

mod common;

use std::time::Duration;

use common::dra::*;
use common::manual_server;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::resource::v1alpha3::DeviceTaintRule;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use trainyard_testapi::{Config, TestApiServer, UserInfo};

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
