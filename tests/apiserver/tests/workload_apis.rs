//! `scheduling.k8s.io` Workloads and PodGroups through kube-rs: the v1beta1
//! typed API (create, get, list, watch, status by merge, apply and strategic
//! merge patch, spec and status kept apart), v1alpha2 as `DynamicObject`s
//! (the v1_37 types have no v1alpha2), the 422s, pods' `schedulingGroup`,
//! `podgroups/status` as its own RBAC subresource, and the discovery matrix
//! of `Config::workload_apis`.

mod common;

use common::dra::{causes, client, obj, status};
use common::manual_server;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use trainyard_testapi::{ADMIN_TOKEN, Config, TestApiServer, UserInfo, WorkloadApis};

const T: &str = "2026-01-01T00:00:00Z";

fn workload(name: &str, min: i64) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": name},
        "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": min}}}]}})
}

fn pod_group(name: &str, min: i64) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"workloadRef": {"workloadName": "train", "templateName": "workers"},
                 "schedulingPolicy": {"gang": {"minCount": min}}, "disruptionMode": {"all": {}}},
        "status": {"conditions": [{"type": "Forged", "status": "True", "reason": "ByClient", "lastTransitionTime": T}]}})
}

fn condition(ty: &str, st: &str, reason: &str) -> Value {
    json!({"type": ty, "status": st, "reason": reason, "message": "m", "lastTransitionTime": T})
}

fn condition_types(pg: &PodGroup) -> Vec<(String, String)> {
    pg.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect()
        })
        .unwrap_or_default()
}

async fn server_with(apis: WorkloadApis) -> TestApiServer {
    TestApiServer::start(Config {
        manual_clock: true,
        workload_apis: apis,
        ..Config::default()
    })
    .await
    .expect("server starts")
}

fn alpha(c: &Client, kind: &str) -> Api<DynamicObject> {
    let plural = if kind == "PodGroup" {
        "podgroups"
    } else {
        "workloads"
    };
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.k8s.io", "v1alpha2", kind),
        plural,
    );
    Api::namespaced_with(c.clone(), "default", &ar)
}

async fn get_json(c: &Client, path: &str) -> Result<Value, kube::Error> {
    c.request(http::Request::get(path).body(vec![]).expect("request"))
        .await
}

/// The next watch event that is not a bookmark.
async fn next_change<S>(watch: &mut S) -> WatchEvent<PodGroup>
where
    S: futures::Stream<Item = Result<WatchEvent<PodGroup>, kube::Error>> + Unpin,
{
    loop {
        match watch.try_next().await.expect("event") {
            Some(WatchEvent::Bookmark(_)) => continue,
            Some(e) => return e,
            None => panic!("watch ended"),
        }
    }
}

#[tokio::test]
async fn v1beta1_pod_groups_are_created_watched_and_get_status_apart_from_spec() {
    let server = manual_server().await;
    let c = client(&server, None);
    let workloads: Api<Workload> = Api::default_namespaced(c.clone());
    let groups: Api<PodGroup> = Api::default_namespaced(c.clone());
    workloads
        .create(&PostParams::default(), &obj(workload("train", 4)))
        .await
        .expect("workload");
    let mut watch = groups
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();

    // Create: the status a client sends is dropped.
    let pg = groups
        .create(&PostParams::default(), &obj(pod_group("train-0", 4)))
        .await
        .expect("pod group");
    assert_eq!(pg.metadata.generation, Some(1));
    assert!(condition_types(&pg).is_empty(), "status dropped on create");
    let spec = &pg.spec;
    assert_eq!(
        spec.workload_ref.as_ref().map(|r| r.template_name.as_str()),
        Some("workers")
    );
    assert!(
        spec.disruption_mode
            .as_ref()
            .is_some_and(|d| d.all.is_some())
    );
    match next_change(&mut watch).await {
        WatchEvent::Added(o) => assert_eq!(o.name_any(), "train-0"),
        _ => panic!("expected ADDED"),
    }
    let listed = groups.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        groups.get("train-0").await.expect("get").name_any(),
        "train-0"
    );

    // Status by merge patch: the spec in the same patch is ignored, no new generation.
    let patch = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 9}}},
        "status": {"conditions": [condition("PodGroupInitiallyScheduled", "False", "Unschedulable")]}});
    let pg = groups
        .patch_status("train-0", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("status patch");
    assert_eq!(
        condition_types(&pg),
        [("PodGroupInitiallyScheduled".into(), "False".into())]
    );
    assert_eq!(
        pg.spec.scheduling_policy.gang.as_ref().map(|g| g.min_count),
        Some(4)
    );
    assert_eq!(pg.metadata.generation, Some(1));
    match next_change(&mut watch).await {
        WatchEvent::Modified(o) => assert_eq!(condition_types(&o).len(), 1),
        _ => panic!("expected MODIFIED"),
    }

    // Strategic merge: conditions are a list-map keyed by `type`.
    let smp = json!({"status": {"conditions": [condition("DisruptionTarget", "True", "PreemptionByScheduler")]}});
    let pg = groups
        .patch_status("train-0", &PatchParams::default(), &Patch::Strategic(&smp))
        .await
        .expect("strategic status patch");
    assert_eq!(
        condition_types(&pg),
        [
            ("PodGroupInitiallyScheduled".into(), "False".into()),
            ("DisruptionTarget".into(), "True".into())
        ]
    );

    // Apply (server-side apply as the server implements it) on status.
    let apply = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "train-0"},
        "status": {"conditions": [condition("PodGroupInitiallyScheduled", "True", "Scheduled")]}});
    let pg = groups
        .patch_status(
            "train-0",
            &PatchParams::apply("kube-scheduler").force(),
            &Patch::Apply(&apply),
        )
        .await
        .expect("apply status");
    assert_eq!(
        condition_types(&pg),
        [("PodGroupInitiallyScheduled".into(), "True".into())]
    );

    // A spec write keeps the stored status and bumps the generation:
    // minCount is mutable in v1beta1.
    let mut next = pg.clone();
    next.spec.scheduling_policy.gang = Some(obj(json!({"minCount": 6})));
    next.status = Some(obj(json!({"conditions": []})));
    let pg = groups
        .replace("train-0", &PostParams::default(), &next)
        .await
        .expect("scale the gang");
    assert_eq!(
        pg.spec.scheduling_policy.gang.as_ref().map(|g| g.min_count),
        Some(6)
    );
    assert_eq!(pg.metadata.generation, Some(2));
    assert_eq!(condition_types(&pg).len(), 1, "status kept");
}

/// The 422 causes of a request.
async fn invalid<T>(
    f: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Vec<(String, String)> {
    let s: Status = match f.await {
        Ok(_) => panic!("accepted"),
        Err(e) => status(e),
    };
    assert_eq!(s.code, 422, "{}", s.message);
    causes(&s)
}

fn fields(c: &[(String, String)]) -> Vec<&str> {
    c.iter().map(|(f, _)| f.as_str()).collect()
}

#[tokio::test]
async fn invalid_workloads_and_pod_groups_get_422_naming_the_field() {
    let server = manual_server().await;
    let c = client(&server, None);
    let pp = PostParams::default();
    let groups: Api<DynamicObject> = Api::default_namespaced_with(
        c.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("scheduling.k8s.io", "v1beta1", "PodGroup"),
            "podgroups",
        ),
    );
    let pg = |spec: Value| -> DynamicObject {
        obj(
            json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "bad"}, "spec": spec}),
        )
    };
    let c1 = invalid(groups.create(&pp, &pg(json!({"schedulingPolicy": {}})))).await;
    assert_eq!(fields(&c1), ["spec.schedulingPolicy"]);
    assert!(
        c1[0].1.contains("must specify one of: `basic`, `gang`"),
        "{}",
        c1[0].1
    );
    let both = json!({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}});
    let c2 = invalid(groups.create(&pp, &pg(both))).await;
    assert!(c2[0].1.contains("multiple fields are set"), "{}", c2[0].1);
    let c3 = invalid(groups.create(
        &pp,
        &pg(json!({"schedulingPolicy": {"gang": {"minCount": 0}}})),
    ))
    .await;
    assert_eq!(fields(&c3), ["spec.schedulingPolicy.gang.minCount"]);
    let c4 = invalid(groups.create(&pp, &pg(json!({"schedulingPolicy": {"basic": {}}, "disruptionMode": {}, "workloadRef": {"workloadName": "w"}})))).await;
    assert_eq!(
        fields(&c4),
        ["spec.disruptionMode", "spec.workloadRef.templateName"]
    );

    // Immutable: the reference and the policy kind; minCount is not.
    let good = json!({"schedulingPolicy": {"gang": {"minCount": 2}}, "workloadRef": {"workloadName": "w", "templateName": "t"}});
    let mut created = groups.create(&pp, &pg(good)).await.expect("valid group");
    created.data["spec"]["workloadRef"]["templateName"] = json!("other");
    created.data["spec"]["schedulingPolicy"] = json!({"basic": {}});
    let c5 = invalid(groups.replace("bad", &pp, &created)).await;
    assert_eq!(
        fields(&c5),
        [
            "spec.schedulingPolicy.basic",
            "spec.schedulingPolicy.gang",
            "spec.workloadRef"
        ]
    );
    assert!(c5[2].1.contains("field is immutable"), "{}", c5[2].1);

    // Status conditions are metav1.Conditions.
    let bad = json!({"status": {"conditions": [
        condition("PodGroupInitiallyScheduled", "Maybe", "x y"),
        {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "R"}]}});
    let c6 =
        invalid(groups.patch_status("bad", &PatchParams::default(), &Patch::Merge(&bad))).await;
    assert_eq!(
        fields(&c6),
        [
            "status.conditions[0].status",
            "status.conditions[0].reason",
            "status.conditions[1].type",
            "status.conditions[1].lastTransitionTime"
        ]
    );

    // Workloads: 1 to 8 templates, unique DNS-label names.
    let workloads: Api<Workload> = Api::default_namespaced(c.clone());
    let w = |templates: Vec<Value>| -> Workload {
        obj(json!({"metadata": {"name": "w"}, "spec": {"podGroupTemplates": templates}}))
    };
    let t = |name: &str| json!({"name": name, "schedulingPolicy": {"basic": {}}});
    let c7 = invalid(workloads.create(&pp, &w(vec![]))).await;
    assert_eq!(fields(&c7), ["spec"]);
    let nine: Vec<Value> = (0..9).map(|i| t(&format!("t{i}"))).collect();
    let c8 = invalid(workloads.create(&pp, &w(nine))).await;
    assert_eq!(fields(&c8), ["spec.podGroupTemplates"]);
    let c9 = invalid(workloads.create(&pp, &w(vec![t("a"), t("a"), t("Not_A_Label")]))).await;
    assert_eq!(
        fields(&c9),
        [
            "spec.podGroupTemplates[1]",
            "spec.podGroupTemplates[2].name"
        ]
    );
    let mut made = workloads
        .create(&pp, &w(vec![t("a"), t("b")]))
        .await
        .expect("workload");
    if let Some(ts) = made.spec.pod_group_templates.as_mut() {
        ts.pop();
    }
    let c10 = invalid(workloads.replace("w", &pp, &made)).await;
    assert_eq!(fields(&c10), ["spec.podGroupTemplates"]);

    // v1alpha2: a string disruption mode, and the whole spec immutable.
    let groups = alpha(&c, "PodGroup");
    let apg = |mode: &str, min: i64| -> DynamicObject {
        obj(
            json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "a"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min}}, "disruptionMode": mode}}),
        )
    };
    let c11 = invalid(groups.create(&pp, &apg("Single", 2))).await;
    assert_eq!(fields(&c11), ["spec.disruptionMode"]);
    assert!(c11[0].1.contains("\"Pod\", \"PodGroup\""), "{}", c11[0].1);
    let made = groups
        .create(&pp, &apg("PodGroup", 2))
        .await
        .expect("alpha group");
    let mut more = made.clone();
    more.data["spec"]["schedulingPolicy"]["gang"]["minCount"] = json!(3);
    let c12 = invalid(groups.replace("a", &pp, &more)).await;
    assert_eq!(fields(&c12), ["spec.schedulingPolicy"]);
}

#[tokio::test]
async fn v1alpha2_is_served_as_dynamic_objects_with_its_own_storage() {
    let server = manual_server().await;
    let c = client(&server, None);
    let pp = PostParams::default();
    let workloads = alpha(&c, "Workload");
    let w: DynamicObject = obj(
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload", "metadata": {"name": "train"},
        "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]}}),
    );
    workloads.create(&pp, &w).await.expect("alpha workload");
    let groups = alpha(&c, "PodGroup");
    let g: DynamicObject = obj(
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "train-0"},
        "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "workers"}},
                 "schedulingPolicy": {"gang": {"minCount": 2}}}}),
    );
    let made = groups.create(&pp, &g).await.expect("alpha group");
    assert_eq!(
        made.types.as_ref().map(|t| t.api_version.as_str()),
        Some("scheduling.k8s.io/v1alpha2")
    );
    let patch =
        json!({"status": {"conditions": [condition("PodGroupScheduled", "True", "Scheduled")]}});
    let got = groups
        .patch_status("train-0", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("alpha status");
    assert_eq!(
        got.data["status"]["conditions"][0]["type"],
        "PodGroupScheduled"
    );
    assert_eq!(
        groups
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
    // No conversion: v1beta1 has a storage of its own.
    let beta: Api<PodGroup> = Api::default_namespaced(c.clone());
    assert!(
        beta.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    assert_eq!(
        status(beta.get("train-0").await.expect_err("absent")).code,
        404
    );
}

#[tokio::test]
async fn pods_name_their_pod_group_once() {
    let server = manual_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&server, None));
    let pod = |group: &str| -> Pod {
        obj(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}],
            "schedulingGroup": {"podGroupName": group}}}),
        )
    };
    let pp = PostParams::default();
    let c = invalid(pods.create(&pp, &pod("Bad_Name"))).await;
    assert_eq!(fields(&c), ["spec.schedulingGroup.podGroupName"]);
    // The group need not exist.
    let made = pods.create(&pp, &pod("train-0")).await.expect("pod");
    let group = made.spec.as_ref().and_then(|s| s.scheduling_group.as_ref());
    assert_eq!(
        group.and_then(|g| g.pod_group_name.as_deref()),
        Some("train-0")
    );
    let patch = json!({"spec": {"schedulingGroup": {"podGroupName": "train-1"}}});
    let c = invalid(pods.patch("p", &PatchParams::default(), &Patch::Merge(&patch))).await;
    assert_eq!(fields(&c), ["spec"]);
}

#[tokio::test]
async fn pod_group_status_is_its_own_rbac_subresource() {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        rbac: true,
        ..Config::default()
    })
    .await
    .expect("server");
    let admin = client(&server, Some(ADMIN_TOKEN));
    let role = |name: &str, resources: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": "default"},
            "rules": [{"apiGroups": ["scheduling.k8s.io"], "resources": resources, "verbs": ["get", "list", "create", "patch", "update"]}]})
    };
    let binding = |name: &str, user: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]})
    };
    for o in [
        role("groups", json!(["podgroups"])),
        binding("groups", "controller"),
        role("status", json!(["podgroups/status"])),
        binding("status", "scheduler"),
    ] {
        server.create(o).expect("rbac object");
    }
    Api::<PodGroup>::default_namespaced(admin)
        .create(&PostParams::default(), &obj(pod_group("g", 2)))
        .await
        .expect("group");
    let controller: Api<PodGroup> = Api::default_namespaced(client(
        &server,
        Some(&server.user_token(UserInfo::new("controller", &[]))),
    ));
    let scheduler: Api<PodGroup> = Api::default_namespaced(client(
        &server,
        Some(&server.user_token(UserInfo::new("scheduler", &[]))),
    ));
    let st = json!({"status": {"conditions": [condition("PodGroupInitiallyScheduled", "True", "Scheduled")]}});
    let spec = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}});
    let pp = PatchParams::default();
    let denied = status(
        controller
            .patch_status("g", &pp, &Patch::Merge(&st))
            .await
            .expect_err("podgroups does not cover podgroups/status"),
    );
    assert_eq!(denied.code, 403);
    assert!(
        denied.message.contains("resource \"podgroups/status\""),
        "{}",
        denied.message
    );
    controller
        .patch("g", &pp, &Patch::Merge(&spec))
        .await
        .expect("controller scales the gang");
    scheduler
        .patch_status("g", &pp, &Patch::Merge(&st))
        .await
        .expect("scheduler writes status");
    let denied = status(
        scheduler
            .patch("g", &pp, &Patch::Merge(&spec))
            .await
            .expect_err("podgroups/status does not cover podgroups"),
    );
    assert_eq!(denied.code, 403);
}

/// What discovery says about `scheduling.k8s.io`: the group's versions and
/// the resources of each Workload API version.
#[tokio::test]
async fn discovery_reflects_the_served_workload_api_versions() {
    let cases: [(WorkloadApis, &[&str]); 4] = [
        (WorkloadApis::NONE, &["v1"]),
        (WorkloadApis::V1ALPHA2, &["v1", "v1alpha2"]),
        (WorkloadApis::V1BETA1, &["v1", "v1beta1"]),
        (WorkloadApis::BOTH, &["v1", "v1beta1", "v1alpha2"]),
    ];
    for (apis, want) in cases {
        let server = server_with(apis).await;
        let c = client(&server, None);
        let all = get_json(&c, "/apis").await.expect("/apis");
        let group = all["groups"]
            .as_array()
            .and_then(|gs| gs.iter().find(|g| g["name"] == "scheduling.k8s.io"))
            .cloned()
            .expect("scheduling.k8s.io listed");
        let group_doc = get_json(&c, "/apis/scheduling.k8s.io")
            .await
            .expect("group");
        for g in [&group, &group_doc] {
            let versions: Vec<&str> = g["versions"]
                .as_array()
                .expect("versions")
                .iter()
                .filter_map(|v| v["version"].as_str())
                .collect();
            assert_eq!(versions, want);
            // The group's preferred version stays v1 (PriorityClass), as in kube.
            assert_eq!(g["preferredVersion"]["version"], "v1", "{}", want.join(","));
        }
        let v1 = get_json(&c, "/apis/scheduling.k8s.io/v1")
            .await
            .expect("v1");
        assert_eq!(v1["resources"][0]["name"], "priorityclasses");
        for (v, on) in [("v1alpha2", apis.v1alpha2), ("v1beta1", apis.v1beta1)] {
            let doc = get_json(&c, &format!("/apis/scheduling.k8s.io/{v}")).await;
            if !on {
                assert_eq!(status(doc.expect_err("not served")).code, 404, "{v}");
                let list = get_json(
                    &c,
                    &format!("/apis/scheduling.k8s.io/{v}/namespaces/default/podgroups"),
                )
                .await;
                assert_eq!(status(list.expect_err("not served")).code, 404, "{v}");
                continue;
            }
            let doc = doc.expect("served");
            let names: Vec<&str> = doc["resources"]
                .as_array()
                .expect("resources")
                .iter()
                .filter_map(|r| r["name"].as_str())
                .collect();
            assert_eq!(names, ["podgroups", "podgroups/status", "workloads"], "{v}");
            assert_eq!(doc["resources"][0]["namespaced"], true);
        }
        // kube-rs discovery: PodGroups at their most stable served version.
        let disc = kube::Discovery::new(c.clone())
            .filter(&["scheduling.k8s.io"])
            .run()
            .await
            .expect("discovery");
        let recommended = disc
            .groups()
            .flat_map(|g| g.resources_by_stability())
            .find(|(ar, _)| ar.plural == "podgroups")
            .map(|(ar, _)| ar.version);
        let expect = match (apis.v1beta1, apis.v1alpha2) {
            (true, _) => Some("v1beta1".to_string()),
            (false, true) => Some("v1alpha2".to_string()),
            _ => None,
        };
        assert_eq!(recommended, expect, "{}", want.join(","));
    }
}
