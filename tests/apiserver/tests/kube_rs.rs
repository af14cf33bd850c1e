//! kube-rs (kube 5, k8s-openapi 0.29) against an in-process server: reflectors over
//! every built-in kind and a CRD's DynamicObject, recovery from dropped watches and
//! forced 410s, streaming lists, CRUD, patches, binding and eviction with PDBs.

mod common;

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::{ApiResource, GroupVersionKind, Status};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainyard_testapi::TestApiServer;

use common::manual_server;

fn client(server: &TestApiServer) -> Client {
    let config = kube::Config::new(server.url().parse().expect("url"));
    Client::try_from(config).expect("client")
}

/// A client without kube's default retry layer, which retries 429 (eviction refused
/// by a PDB included) up to 15 times with exponential backoff.
fn client_no_retry(server: &TestApiServer) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("object")
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other:?}"),
    }
}

/// Woken on every event any reflector of this process applies.
static CHANGED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Waits until `check` holds, re-checking after each reflector event (no
/// polling); fails after 20 s without it.
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        // Registered before the check, so an event between the check and
        // the wait is not missed.
        let changed = CHANGED.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if check() {
            return;
        }
        let timed_out = tokio::time::Instant::now() >= deadline
            || tokio::time::timeout_at(deadline, changed).await.is_err();
        assert!(!timed_out, "timed out waiting for {what}");
    }
}

/// A reflector over `api`, driven on a background task.
fn reflect<K>(api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    reflect_dyn(api, config, Default::default())
}

/// A reflector for kinds known only at run time (DynamicObject).
fn reflect_dyn<K>(api: Api<K>, config: watcher::Config, dt: K::DynamicType) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let writer = reflector::store::Writer::new(dt);
    let reader = writer.as_reader();
    // Backoff on errors, as a controller runs it: without it a watcher
    // retries a failing list (a forced 410, a 500) in a tight loop.
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    tokio::spawn(stream.for_each(|_| async {
        CHANGED.notify_waiters();
    }));
    reader
}

fn names<K: Resource + Clone>(s: &Store<K>) -> Vec<String>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let mut v: Vec<String> = s
        .state()
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect();
    v.sort();
    v
}

fn node(name: &str) -> Node {
    obj(
        json!({"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}],
        "allocatable": {"nvidia.com/gpu": "4", "pods": "110"}, "addresses": [{"type": "InternalIP", "address": "192.0.2.20"}]}}),
    )
}

fn pod(name: &str, labels: Value) -> Pod {
    obj(
        json!({"metadata": {"name": name, "labels": labels}, "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "img"}]}}),
    )
}

async fn bind(pods: &Api<Pod>, name: &str, node: &str) -> Result<Status, kube::Error> {
    let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    pods.create_subresource::<Value, Status>("binding", name, &PostParams::default(), &b)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflectors_list_and_watch_every_builtin_kind() {
    let server = manual_server().await;
    let c = client(&server);
    let nodes: Api<Node> = Api::all(c.clone());
    let nss: Api<Namespace> = Api::all(c.clone());
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let events: Api<CoreEvent> = Api::default_namespaced(c.clone());
    let pcs: Api<PriorityClass> = Api::all(c.clone());
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(c.clone());
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-node-lease");
    let pp = PostParams::default();
    // Objects before the reflectors start (seen by the initial list) ...
    nodes.create(&pp, &node("n1")).await.expect("node");
    pods.create(&pp, &pod("p1", json!({"app": "a"})))
        .await
        .expect("pod");
    let s_nodes = reflect(nodes.clone(), watcher::Config::default());
    let s_ns = reflect(nss.clone(), watcher::Config::default());
    let s_pods = reflect(Api::<Pod>::all(c.clone()), watcher::Config::default());
    let s_events = reflect(events.clone(), watcher::Config::default());
    let s_pcs = reflect(pcs.clone(), watcher::Config::default().any_semantic());
    let s_pdbs = reflect(pdbs.clone(), watcher::Config::default().page_size(1));
    let s_leases = reflect(leases.clone(), watcher::Config::default());
    let s_gpu = reflect(
        pods.clone(),
        watcher::Config::default()
            .labels("app=a")
            .fields("spec.schedulerName=trainyard"),
    );
    until("initial lists", || {
        names(&s_nodes) == ["n1"] && names(&s_pods) == ["p1"] && names(&s_ns).len() == 4
    })
    .await;
    // ... and after (seen by the watches).
    nodes.create(&pp, &node("n2")).await.expect("node");
    nss.create(&pp, &obj(json!({"metadata": {"name": "team-a"}})))
        .await
        .expect("ns");
    pods.create(&pp, &pod("p2", json!({"app": "b"})))
        .await
        .expect("pod");
    events
        .create(&pp, &obj(json!({"metadata": {"name": "p1.1"}, "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"}, "reason": "Scheduled", "message": "m", "type": "Normal"})))
        .await
        .expect("event");
    pcs.create(&pp, &obj(json!({"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "PreemptLowerPriority"}))).await.expect("pc");
    for n in ["b1", "b2"] {
        pdbs.create(&pp, &obj(json!({"metadata": {"name": n}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": n}}}}))).await.expect("pdb");
    }
    leases.create(&pp, &obj(json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}))).await.expect("lease");
    until("watched creations", || {
        names(&s_nodes) == ["n1", "n2"]
            && names(&s_ns).contains(&"team-a".to_string())
            && names(&s_pods) == ["p1", "p2"]
            && names(&s_events) == ["p1.1"]
            && names(&s_pcs) == ["high"]
            && names(&s_pdbs) == ["b1", "b2"]
            && names(&s_leases) == ["n1"]
    })
    .await;
    assert_eq!(names(&s_gpu), ["p1"], "selectors filter the watch");
    // A pod created with a priority class gets its value.
    pods.create(&pp, &obj(json!({"metadata": {"name": "p3", "labels": {"app": "a"}}, "spec": {"priorityClassName": "high", "containers": [{"name": "c", "image": "i"}]}}))).await.expect("pod");
    assert_eq!(
        pods.get("p3")
            .await
            .expect("get")
            .spec
            .and_then(|s| s.priority),
        Some(1000)
    );
    // Relabeling moves a pod out of a selector's view (DELETED for that watch).
    pods.patch(
        "p1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "z"}}})),
    )
    .await
    .expect("patch");
    until("selector exit", || names(&s_gpu).is_empty()).await;
    // Lease renewals (update with resourceVersion) and deletes flow through.
    let mut l = leases.get("n1").await.expect("lease");
    l.spec.as_mut().expect("spec").holder_identity = Some("n2".into());
    leases.replace("n1", &pp, &l).await.expect("renew");
    until("lease renewal", || {
        s_leases
            .state()
            .first()
            .and_then(|l| l.spec.as_ref()?.holder_identity.clone())
            == Some("n2".into())
    })
    .await;
    nodes
        .delete("n2", &DeleteParams::default())
        .await
        .expect("delete node");
    until("node delete", || names(&s_nodes) == ["n1"]).await;
}

fn widget_crd() -> CustomResourceDefinition {
    let text = std::fs::read_to_string(common::fixture("widget-crd.yaml")).expect("fixture");
    // The fixture is YAML for kubectl; here the same CRD as JSON.
    assert!(text.contains("widgets.testapi.trainyard.io"));
    obj(
        json!({"metadata": {"name": "widgets.testapi.trainyard.io"}, "spec": {"group": "testapi.trainyard.io", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
        "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "required": ["size"], "properties": {
                    "size": {"type": "string", "enum": ["small", "large"]},
                    "weight": {"type": "integer", "minimum": 0, "maximum": 100}}},
                "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_dynamic_objects_validation_status_and_watch() {
    let server = manual_server().await;
    let c = client(&server);
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .expect("crd");
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("testapi.trainyard.io", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
    let store = reflect_dyn(widgets.clone(), watcher::Config::default(), ar.clone());
    let w = |name: &str, spec: Value| -> DynamicObject {
        obj(
            json!({"apiVersion": "testapi.trainyard.io/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec, "status": {"phase": "Ignored"}}),
        )
    };
    let created = widgets
        .create(
            &PostParams::default(),
            &w("a", json!({"size": "small", "weight": 3, "junk": true})),
        )
        .await
        .expect("create");
    assert_eq!(
        created.data["spec"],
        json!({"size": "small", "weight": 3}),
        "unknown fields pruned"
    );
    assert!(
        created.data.get("status").is_none(),
        "status ignored on create with a status subresource"
    );
    until("widget watched", || names(&store) == ["a"]).await;

    // 422 naming the field.
    let err = widgets
        .create(
            &PostParams::default(),
            &w("b", json!({"size": "medium", "weight": 101})),
        )
        .await
        .expect_err("invalid");
    let kube::Error::Api(st) = err else {
        panic!("api error")
    };
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
    let fields: Vec<String> = st
        .details
        .expect("details")
        .causes
        .iter()
        .map(|c| c.field.clone())
        .collect();
    assert_eq!(fields, ["spec.size", "spec.weight"]);
    let missing = widgets
        .create(&PostParams::default(), &w("c", json!({})))
        .await
        .expect_err("required");
    assert_eq!(code(missing), 422);

    // Status subresource: main updates ignore status, /status updates only
    // status (a custom resource's take the stored metadata whole, so even
    // another uid is not compared).
    widgets
        .patch_status(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"uid": "other"}, "status": {"phase": "Ready"}, "spec": {"weight": 50}})),
        )
        .await
        .expect("status");
    let a = widgets.get("a").await.expect("get");
    assert_eq!(
        (
            a.data["status"]["phase"].clone(),
            a.data["spec"]["weight"].clone()
        ),
        (json!("Ready"), json!(3))
    );
    widgets
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Nope"}, "spec": {"weight": 4}})),
        )
        .await
        .expect("patch");
    let a = widgets.get("a").await.expect("get");
    assert_eq!(
        (
            a.data["status"]["phase"].clone(),
            a.data["spec"]["weight"].clone()
        ),
        (json!("Ready"), json!(4))
    );
    assert_eq!(
        a.metadata.generation,
        Some(2),
        "spec change bumps generation"
    );
    // Strategic merge patch is refused for custom resources, as the real server does.
    let smp = widgets
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"weight": 5}})),
        )
        .await
        .expect_err("smp");
    assert_eq!(code(smp), 415);
    // Server-side apply (as a merge patch) creates and updates.
    let pa = PatchParams::apply("test");
    widgets.patch("d", &pa, &Patch::Apply(json!({"apiVersion": "testapi.trainyard.io/v1", "kind": "Widget", "metadata": {"name": "d"}, "spec": {"size": "large"}}))).await.expect("apply");
    until("applied widget watched", || names(&store) == ["a", "d"]).await;

    // Deleting the CRD removes its objects and its discovery.
    crds.delete("widgets.testapi.trainyard.io", &DeleteParams::default())
        .await
        .expect("delete crd");
    let gone = widgets
        .list(&ListParams::default())
        .await
        .expect_err("no longer served");
    assert_eq!(code(gone), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_recover_from_dropped_watches_forced_410_and_compaction() {
    let server = manual_server().await;
    let c = client(&server);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let pp = PostParams::default();
    pods.create(&pp, &pod("p0", json!({}))).await.expect("pod");
    let store = reflect(pods.clone(), watcher::Config::default());
    let streaming = reflect(pods.clone(), watcher::Config::default().streaming_lists());
    until("initial", || {
        names(&store) == ["p0"] && names(&streaming) == ["p0"]
    })
    .await;

    server.drop_watches();
    pods.create(&pp, &pod("p1", json!({}))).await.expect("pod");
    until("after dropped watches", || {
        names(&store) == ["p0", "p1"] && names(&streaming) == ["p0", "p1"]
    })
    .await;

    server.force_410(2);
    server.drop_watches();
    pods.create(&pp, &pod("p2", json!({}))).await.expect("pod");
    pods.delete("p0", &DeleteParams::default())
        .await
        .expect("delete unbound pod");
    until("after forced 410", || {
        names(&store) == ["p1", "p2"] && names(&streaming) == ["p1", "p2"]
    })
    .await;
    assert_eq!(server.faults().force_410, 0, "both forced 410s were served");

    // Compaction: a watch from before it gets 410 and the watcher relists.
    server.compact();
    server.drop_watches();
    pods.create(&pp, &pod("p3", json!({}))).await.expect("pod");
    until("after compaction", || names(&store) == ["p1", "p2", "p3"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_kubelet_and_eviction_with_pdb() {
    let server = manual_server().await;
    let c = client_no_retry(&server);
    let nodes: Api<Node> = Api::all(c.clone());
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(c.clone());
    let pp = PostParams::default();
    nodes.create(&pp, &node("gpu-1")).await.expect("node");
    for n in ["t0", "t1"] {
        pods.create(&pp, &pod(n, json!({"job": "train"})))
            .await
            .expect("pod");
        bind(&pods, n, "gpu-1").await.expect("bind");
    }
    let again = bind(&pods, "t0", "gpu-1").await.expect_err("second bind");
    assert_eq!(code(again), 409);
    // The Binding's annotations land on the pod with the bind, as
    // kube-apiserver copies them.
    pods.create(&pp, &pod("t2", json!({"job": "other"})))
        .await
        .expect("pod");
    let b = json!({"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": "t2", "annotations": {"example.com/devices": "0,1"}},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}});
    pods.create_subresource::<Value, Status>("binding", "t2", &pp, &b)
        .await
        .expect("bind with annotations");
    let t2 = pods.get("t2").await.expect("get");
    assert_eq!(
        t2.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("example.com/devices"))
            .map(String::as_str),
        Some("0,1")
    );
    assert_eq!(t2.spec.and_then(|s| s.node_name).as_deref(), Some("gpu-1"));
    pods.delete("t2", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete");
    let p = pods.get("t0").await.expect("get");
    assert_eq!(
        p.spec.as_ref().and_then(|s| s.node_name.clone()).as_deref(),
        Some("gpu-1")
    );
    let conds = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    assert_eq!(
        p.status.and_then(|s| s.phase).as_deref(),
        Some("Pending"),
        "kubelet waits for the clock"
    );
    server.advance(1);
    let listed = pods
        .list(&ListParams::default().fields("status.phase=Running,spec.nodeName=gpu-1"))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 2);

    pdbs.create(&pp, &obj(json!({"metadata": {"name": "train"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"job": "train"}}}}))).await.expect("pdb");
    let refused = pods
        .evict("t0", &EvictParams::default())
        .await
        .expect_err("pdb forbids");
    let kube::Error::Api(st) = refused else {
        panic!("api error")
    };
    assert_eq!((st.code, st.reason.as_str()), (429, "TooManyRequests"));
    pdbs.patch(
        "train",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
    )
    .await
    .expect("relax");
    pods.evict("t0", &EvictParams::default())
        .await
        .expect("evicted");
    let t0 = pods.get("t0").await.expect("terminating");
    assert!(t0.metadata.deletion_timestamp.is_some());
    assert_eq!(t0.metadata.deletion_grace_period_seconds, Some(30));
    // t1 is now the only healthy pod: a second eviction would break the budget.
    assert_eq!(
        code(
            pods.evict("t1", &EvictParams::default())
                .await
                .expect_err("budget")
        ),
        429
    );
    server.tick();
    assert_eq!(
        code(pods.get("t0").await.expect_err("removed by the kubelet")),
        404
    );
    let pdb = pdbs.get("train").await.expect("pdb");
    let st = pdb.status.expect("status");
    assert_eq!(
        (
            st.current_healthy,
            st.desired_healthy,
            st.disruptions_allowed
        ),
        (Some(1), Some(1), Some(0))
    );

    // Run-to-completion through the annotation.
    let mut done = pod("job", json!({}));
    done.metadata.annotations = Some(
        [(
            trainyard_testapi::kubelet::RUN_SECONDS.to_string(),
            "60".to_string(),
        )]
        .into(),
    );
    pods.create(&pp, &done).await.expect("pod");
    bind(&pods, "job", "gpu-1").await.expect("bind");
    server.advance(1);
    server.advance(59);
    assert_eq!(
        pods.get("job")
            .await
            .expect("get")
            .status
            .and_then(|s| s.phase)
            .as_deref(),
        Some("Running")
    );
    server.advance(1);
    assert_eq!(
        pods.get("job")
            .await
            .expect("get")
            .status
            .and_then(|s| s.phase)
            .as_deref(),
        Some("Succeeded")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_patches_pagination_and_faults() {
    let server = manual_server().await;
    let c = client(&server);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let pp = PostParams::default();
    for i in 0..5 {
        pods.create(&pp, &pod(&format!("p{i}"), json!({"i": i.to_string()})))
            .await
            .expect("pod");
    }
    let generated: Pod = pods.create(&pp, &obj(json!({"metadata": {"generateName": "gen-"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}))).await.expect("generateName");
    let gname = generated.metadata.name.clone().unwrap_or_default();
    assert!(gname.starts_with("gen-") && gname.len() == 9, "{gname}");
    assert!(generated.metadata.uid.is_some() && generated.metadata.creation_timestamp.is_some());

    // Optimistic concurrency.
    let stale = pods.get("p0").await.expect("get");
    pods.patch(
        "p0",
        &PatchParams::default(),
        &Patch::Strategic(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .expect("smp");
    assert_eq!(
        code(pods.replace("p0", &pp, &stale).await.expect_err("stale")),
        409
    );
    // Strategic merge: containers merged by name.
    pods.patch(
        "p0",
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "image": "img2"}]}})),
    )
    .await
    .expect("image");
    let p0 = pods.get("p0").await.expect("get");
    let cs = p0.spec.expect("spec").containers;
    assert_eq!((cs.len(), cs[0].image.as_deref()), (1, Some("img2")));
    assert_eq!(
        p0.metadata
            .labels
            .expect("labels")
            .get("x")
            .map(String::as_str),
        Some("1")
    );
    // JSON patch; pod spec fields other than images are immutable.
    pods.patch(
        "p0",
        &PatchParams::default(),
        &Patch::<Value>::Json(
            serde_json::from_value(
                json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]),
            )
            .expect("ops"),
        ),
    )
    .await
    .expect("json patch");
    let forbidden = pods
        .patch(
            "p0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "sneaky"}})),
        )
        .await
        .expect_err("immutable");
    assert_eq!(code(forbidden), 422);
    // A uid in a patch makes it conditional on that object: a namesake
    // (another uid) answers 422 for the main resource and its status, the
    // same uid patches.
    let uid = p0.metadata.uid.clone().expect("uid");
    for (status, body) in [
        (
            false,
            json!({"metadata": {"uid": "not-p0", "labels": {"y": "1"}}}),
        ),
        (
            true,
            json!({"metadata": {"uid": "not-p0"}, "status": {"nominatedNodeName": "n1"}}),
        ),
    ] {
        let patch = Patch::Merge(body);
        let refused = if status {
            pods.patch_status("p0", &PatchParams::default(), &patch)
                .await
        } else {
            pods.patch("p0", &PatchParams::default(), &patch).await
        };
        let e = refused.expect_err("uid precondition");
        assert!(
            matches!(&e, kube::Error::Api(s) if s.code == 422 && s.message.contains("metadata.uid") && s.message.contains("field is immutable")),
            "{e}"
        );
    }
    let nominated = pods
        .patch_status(
            "p0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"uid": uid}, "status": {"nominatedNodeName": "n1"}})),
        )
        .await
        .expect("same uid");
    assert_eq!(
        nominated
            .status
            .and_then(|s| s.nominated_node_name)
            .as_deref(),
        Some("n1")
    );
    assert_eq!(
        nominated.metadata.labels.and_then(|l| l.get("y").cloned()),
        None
    );
    // A PUT's uid is a precondition: 409, as a stale resourceVersion.
    let mut namesake = pods.get("p0").await.expect("get");
    namesake.metadata.uid = Some("not-p0".into());
    let e = pods
        .replace("p0", &pp, &namesake)
        .await
        .expect_err("uid precondition");
    assert!(
        matches!(&e, kube::Error::Api(s) if s.code == 409 && s.message.contains("Precondition failed: UID in precondition: not-p0")),
        "{e}"
    );
    assert_eq!(
        code(
            pods.create(&pp, &pod("p1", json!({})))
                .await
                .expect_err("exists")
        ),
        409
    );
    assert_eq!(
        code(
            Api::<Pod>::namespaced(c.clone(), "nope")
                .create(&pp, &pod("x", json!({})))
                .await
                .expect_err("no ns")
        ),
        404
    );

    // Pagination with limit/continue over a consistent snapshot.
    let first = pods
        .list(&ListParams::default().limit(4))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 4);
    let token = first.metadata.continue_.clone().expect("continue token");
    pods.create(&pp, &pod("zz-late", json!({})))
        .await
        .expect("pod");
    let second = pods
        .list(&ListParams::default().limit(4).continue_token(&token))
        .await
        .expect("page 2");
    let late: Vec<String> = second
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(late.len(), 2, "snapshot excludes the late pod: {late:?}");
    assert!(second.metadata.continue_.is_none());
    server.compact();
    assert_eq!(
        code(
            pods.list(&ListParams::default().limit(4).continue_token(&token))
                .await
                .expect_err("expired")
        ),
        410
    );
    let sel = pods
        .list(&ListParams::default().labels("i in (1,2),i!=2"))
        .await
        .expect("labels");
    assert_eq!(sel.items.len(), 1);
    assert_eq!(
        code(
            pods.list(&ListParams::default().fields("spec.bogus=1"))
                .await
                .expect_err("bad field")
        ),
        400
    );

    // Faults: 500s and 429s at rate 1, then healthy again.
    server.set_faults(trainyard_testapi::Faults {
        rate_500: 1.0,
        ..Default::default()
    });
    assert_eq!(code(pods.get("p1").await.expect_err("500")), 500);
    server.set_faults(trainyard_testapi::Faults::default());
    assert!(pods.get("p1").await.is_ok());
    server.force_410(1);
    assert_eq!(
        code(pods.list(&ListParams::default()).await.expect_err("forced")),
        410
    );
    assert!(pods.list(&ListParams::default()).await.is_ok());
}
