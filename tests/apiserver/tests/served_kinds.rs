//! The kinds the server stores without their controllers — batch/v1 Jobs,
//! apps/v1 ReplicaSets and StatefulSets, v1 ReplicationControllers,
//! PersistentVolumes and claims, the storage.k8s.io kinds and events.k8s.io
//! Events — through kube-rs reflectors (as a client-go program's informers
//! list and watch them) and kubectl; lists at `resourceVersion=0` answered in
//! one page as from kube-apiserver's watch cache; protobuf bodies refused
//! with a 415 Status.

mod common;

use std::fmt::Debug;
use std::time::Duration;

use common::{Kubectl, fixture, kubectl_or_skip, manual_server};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event as CoreEvent, PersistentVolume, PersistentVolumeClaim, Pod,
    ReplicationController,
};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainyard_testapi::TestApiServer;

fn client(server: &TestApiServer) -> Client {
    let config = kube::Config::new(server.url().parse().expect("url"));
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

fn fields(s: &Status) -> Vec<String> {
    s.details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

/// Woken on every event any reflector of this process applies.
static CHANGED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Waits until `check` holds, re-checking after each reflector event; fails
/// after 20 s without it.
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
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

/// A reflector over `api` (an informer's list, then watch), driven on a
/// background task; returns once its first list has filled the store, as an
/// informer's cache sync does (fails after 10 s).
async fn informer<K>(api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let writer = reflector::store::Writer::default();
    let reader = writer.as_reader();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    tokio::spawn(stream.for_each(|_| async {
        CHANGED.notify_waiters();
    }));
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready())
        .await
        .unwrap_or_else(|_| panic!("{} informer never synced", K::kind(&Default::default())))
        .expect("store ready");
    reader
}

fn names<K: Resource + Clone>(s: &Store<K>) -> Vec<String>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let mut v: Vec<String> = s.state().iter().map(|o| o.name_any()).collect();
    v.sort();
    v
}

/// A raw GET through kube's client (kube-rs itself never sends
/// `resourceVersion=0` together with `limit`).
async fn get_raw(c: &Client, path: &str, accept: Option<&str>) -> Result<Value, kube::Error> {
    let mut req = http::Request::get(path);
    if let Some(a) = accept {
        req = req.header("Accept", a);
    }
    c.request::<Value>(req.body(Vec::new()).expect("request"))
        .await
}

fn container() -> Value {
    json!([{"name": "main", "image": "busybox:1.36"}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_stored_listed_and_watched_but_never_run() {
    let server = manual_server().await;
    let c = client(&server);
    let pp = PostParams::default();
    let jobs: Api<Job> = Api::default_namespaced(c.clone());
    let s_jobs = informer(jobs.clone(), watcher::Config::default().any_semantic()).await;

    let job = jobs
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "pi"}, "spec": {"template": {"spec": {
                "restartPolicy": "Never", "schedulerName": "trainyard", "containers": container()}}}})),
        )
        .await
        .expect("job created");
    // kube-apiserver's defaults and generated selector.
    let uid = job.uid().expect("uid");
    let spec = job.spec.clone().expect("spec");
    let selector = spec
        .selector
        .and_then(|s| s.match_labels)
        .unwrap_or_default();
    assert_eq!(
        selector.get("batch.kubernetes.io/controller-uid"),
        Some(&uid)
    );
    let labels = spec
        .template
        .metadata
        .and_then(|m| m.labels)
        .unwrap_or_default();
    assert_eq!(
        labels
            .get("batch.kubernetes.io/job-name")
            .map(String::as_str),
        Some("pi")
    );
    assert_eq!(labels.get("controller-uid"), Some(&uid));
    assert_eq!(job.labels().get("job-name").map(String::as_str), Some("pi"));
    assert_eq!(
        (
            spec.completions,
            spec.parallelism,
            spec.backoff_limit,
            spec.suspend
        ),
        (Some(1), Some(1), Some(6), Some(false))
    );
    until("the job in the informer", || names(&s_jobs) == ["pi"]).await;

    // No Job controller: however long the clock runs, no pod is created and
    // the Job never progresses.
    server.advance(600);
    let pods: Api<Pod> = Api::all(c.clone());
    assert!(
        pods.list(&ListParams::default())
            .await
            .expect("pods")
            .items
            .is_empty()
    );
    let now = jobs.get("pi").await.expect("job");
    assert_eq!(now.status.clone().unwrap_or_default(), Default::default());

    // A test writes the status it needs through /status; main-resource
    // writes keep it.
    jobs.patch_status(
        "pi",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"succeeded": 1, "startTime": "2026-01-01T00:00:00Z",
            "completionTime": "2026-01-01T00:00:30Z",
            "conditions": [{"type": "Complete", "status": "True"}]}}),
        ),
    )
    .await
    .expect("status");
    jobs.patch(
        "pi",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}, "status": {"succeeded": 9}})),
    )
    .await
    .expect("labels");
    until("the status in the informer", || {
        s_jobs
            .state()
            .first()
            .and_then(|j| j.status.as_ref()?.succeeded)
            == Some(1)
            && s_jobs
                .state()
                .first()
                .is_some_and(|j| j.labels().contains_key("team"))
    })
    .await;
    // The field label kube-apiserver serves for Jobs.
    let done = jobs
        .list(&ListParams::default().fields("status.successful=1"))
        .await
        .expect("field selector");
    assert_eq!(done.items.len(), 1);

    // Validation: 422 naming the field.
    let e = status(
        jobs.create(
            &pp,
            &obj(json!({"metadata": {"name": "always"}, "spec": {"template": {"spec": {"containers": container()}}}})),
        )
        .await
        .expect_err("a Job's pods may not restart Always"),
    );
    assert_eq!(
        (e.code, fields(&e)),
        (422, vec!["spec.template.spec.restartPolicy".to_string()])
    );
    assert!(
        e.message
            .ends_with("Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""),
        "{}",
        e.message
    );
    let e = status(
        jobs.patch(
            "pi",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"selector": {"matchLabels": {"app": "other"}}}})),
        )
        .await
        .expect_err("selector is immutable"),
    );
    assert!(fields(&e).contains(&"spec.selector".to_string()), "{e:?}");

    jobs.delete("pi", &DeleteParams::default())
        .await
        .expect("delete");
    until("the delete in the informer", || names(&s_jobs).is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_sets_stateful_sets_and_replication_controllers_are_served() {
    let server = manual_server().await;
    let c = client(&server);
    let pp = PostParams::default();
    let rss: Api<ReplicaSet> = Api::default_namespaced(c.clone());
    let stss: Api<StatefulSet> = Api::default_namespaced(c.clone());
    let rcs: Api<ReplicationController> = Api::default_namespaced(c.clone());
    // What kube-scheduler's informers list and watch (all namespaces).
    let s_rs = informer(
        Api::<ReplicaSet>::all(c.clone()),
        watcher::Config::default(),
    )
    .await;
    let s_sts = informer(
        Api::<StatefulSet>::all(c.clone()),
        watcher::Config::default().any_semantic(),
    )
    .await;
    let s_rc = informer(
        Api::<ReplicationController>::all(c.clone()),
        watcher::Config::default(),
    )
    .await;

    let template = |app: &str| json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": container()}});
    let rs = rss
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "web"}, "spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "web"}}, "template": template("web")}})),
        )
        .await
        .expect("replicaset");
    assert_eq!(rs.status.map(|s| s.replicas), Some(0));
    let sts = stss
        .create(
            &pp,
            &obj(
                json!({"metadata": {"name": "db"}, "spec": {"serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}}, "template": template("db")}}),
            ),
        )
        .await
        .expect("statefulset");
    let spec = sts.spec.expect("spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("OrderedReady"));
    assert_eq!(
        spec.update_strategy.and_then(|u| u.type_).as_deref(),
        Some("RollingUpdate")
    );
    let rc = rcs
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "legacy"}, "spec": {"template": template("legacy")}})),
        )
        .await
        .expect("replicationcontroller");
    // v1 defaults the selector and the labels from the template.
    let want = Some([("app".to_string(), "legacy".to_string())].into());
    assert_eq!(rc.spec.and_then(|s| s.selector), want);
    assert_eq!(rc.metadata.labels, want);

    until("the informers", || {
        names(&s_rs) == ["web"] && names(&s_sts) == ["db"] && names(&s_rc) == ["legacy"]
    })
    .await;
    // No controller: no pods; status is the test's to write.
    server.advance(60);
    let pods: Api<Pod> = Api::all(c.clone());
    assert!(
        pods.list(&ListParams::default())
            .await
            .expect("pods")
            .items
            .is_empty()
    );
    rss.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 3, "readyReplicas": 3}})),
    )
    .await
    .expect("status");
    until("the status in the informer", || {
        s_rs.state()
            .first()
            .and_then(|r| r.status.as_ref()?.ready_replicas)
            == Some(3)
    })
    .await;

    // Validation.
    let e = status(
        rss.create(
            &pp,
            &obj(json!({"metadata": {"name": "bad"}, "spec": {
            "selector": {"matchLabels": {"app": "x"}}, "template": template("y")}})),
        )
        .await
        .expect_err("selector must match"),
    );
    assert_eq!(fields(&e), ["spec.template.metadata.labels"]);
    let e = status(
        stss.patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"serviceName": "other"}})),
        )
        .await
        .expect_err("serviceName is immutable"),
    );
    assert_eq!(fields(&e), ["spec"]);
    assert!(
        e.message
            .contains("updates to statefulset spec for fields other than"),
        "{}",
        e.message
    );
    let e = status(
        rcs.create(&pp, &obj(json!({"metadata": {"name": "norestart"}, "spec": {"template": {
            "metadata": {"labels": {"app": "n"}}, "spec": {"restartPolicy": "Never", "containers": container()}}}})))
            .await
            .expect_err("restartPolicy must be Always"),
    );
    assert_eq!(fields(&e), ["spec.template.spec.restartPolicy"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_kinds_are_served_as_a_schedulers_informers_need_them() {
    let server = manual_server().await;
    let c = client(&server);
    let pp = PostParams::default();
    let pvs: Api<PersistentVolume> = Api::all(c.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::default_namespaced(c.clone());
    let scs: Api<StorageClass> = Api::all(c.clone());
    let vas: Api<VolumeAttachment> = Api::all(c.clone());
    // kube-scheduler's informers for its volume plugins: each must sync.
    let any = || watcher::Config::default().any_semantic();
    let s_pv = informer(pvs.clone(), any()).await;
    let s_pvc = informer(Api::<PersistentVolumeClaim>::all(c.clone()), any()).await;
    let s_sc = informer(scs.clone(), any()).await;
    let s_csinode = informer(Api::<CSINode>::all(c.clone()), any()).await;
    let s_csidriver = informer(Api::<CSIDriver>::all(c.clone()), any()).await;
    let s_cap = informer(Api::<CSIStorageCapacity>::all(c.clone()), any()).await;
    let s_va = informer(vas.clone(), any()).await;

    let sc = scs
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})),
        )
        .await
        .expect("storageclass");
    assert_eq!(sc.reclaim_policy.as_deref(), Some("Delete"));
    assert_eq!(sc.volume_binding_mode.as_deref(), Some("Immediate"));
    let e = status(
        scs.patch(
            "fast",
            &PatchParams::default(),
            &Patch::Merge(json!({"parameters": {"type": "ssd"}})),
        )
        .await
        .expect_err("parameters are immutable"),
    );
    assert_eq!(fields(&e), ["parameters"]);

    let pv = pvs
        .create(&pp, &obj(json!({"metadata": {"name": "pv-a"}, "spec": {"capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"], "storageClassName": "fast", "hostPath": {"path": "/data"}}})))
        .await
        .expect("persistentvolume");
    assert!(pv.metadata.namespace.is_none(), "cluster-scoped");
    assert_eq!(
        pv.spec
            .and_then(|s| s.persistent_volume_reclaim_policy)
            .as_deref(),
        Some("Retain")
    );
    assert_eq!(pv.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    let e = status(
        pvs.create(&pp, &obj(json!({"metadata": {"name": "pv-b"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}})))
            .await
            .expect_err("a volume needs a source"),
    );
    assert_eq!(fields(&e), ["spec"]);
    let pvc = pvcs
        .create(
            &pp,
            &obj(
                json!({"metadata": {"name": "scratch"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "storageClassName": "fast", "resources": {"requests": {"storage": "5Gi"}}}}),
            ),
        )
        .await
        .expect("persistentvolumeclaim");
    assert_eq!(pvc.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    assert_eq!(
        pvc.spec.and_then(|s| s.volume_mode).as_deref(),
        Some("Filesystem")
    );

    // No PV controller: the test binds, as that controller would.
    let merge = |v: Value| Patch::Merge(v);
    pvcs.patch(
        "scratch",
        &PatchParams::default(),
        &merge(json!({"spec": {"volumeName": "pv-a"}})),
    )
    .await
    .expect("bind the claim");
    pvcs.patch_status(
        "scratch",
        &PatchParams::default(),
        &merge(json!({"status": {"phase": "Bound",
        "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}}})),
    )
    .await
    .expect("claim status");
    pvs.patch(
        "pv-a",
        &PatchParams::default(),
        &merge(json!({"spec": {"claimRef": {"namespace": "default", "name": "scratch"}}})),
    )
    .await
    .expect("claim ref");
    pvs.patch_status(
        "pv-a",
        &PatchParams::default(),
        &merge(json!({"status": {"phase": "Bound"}})),
    )
    .await
    .expect("volume status");
    let e = status(
        pvcs.patch(
            "scratch",
            &PatchParams::default(),
            &merge(json!({"spec": {"accessModes": ["ReadWriteMany"]}})),
        )
        .await
        .expect_err("a claim's spec is immutable"),
    );
    assert_eq!(fields(&e), ["spec"]);

    Api::<CSINode>::all(c.clone())
        .create(&pp, &obj(json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1"}]}})))
        .await
        .expect("csinode");
    let driver = Api::<CSIDriver>::all(c.clone())
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "csi.example.com"}, "spec": {}})),
        )
        .await
        .expect("csidriver");
    assert_eq!(driver.spec.attach_required, Some(true));
    Api::<CSIStorageCapacity>::default_namespaced(c.clone())
        .create(&pp, &obj(json!({"metadata": {"name": "cap-n1"}, "storageClassName": "fast", "capacity": "100Gi",
            "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": "n1"}}})))
        .await
        .expect("csistoragecapacity");
    let va = vas
        .create(
            &pp,
            &obj(
                json!({"metadata": {"name": "va-1"}, "spec": {"attacher": "csi.example.com",
            "nodeName": "n1", "source": {"persistentVolumeName": "pv-a"}}}),
            ),
        )
        .await
        .expect("volumeattachment");
    assert_eq!(va.status.map(|s| s.attached), Some(false));
    vas.patch_status(
        "va-1",
        &PatchParams::default(),
        &merge(json!({"status": {"attached": true}})),
    )
    .await
    .expect("attach");

    until("every storage informer", || {
        names(&s_pv) == ["pv-a"]
            && names(&s_pvc) == ["scratch"]
            && names(&s_sc) == ["fast"]
            && names(&s_csinode) == ["n1"]
            && names(&s_csidriver) == ["csi.example.com"]
            && names(&s_cap) == ["cap-n1"]
            && s_va
                .state()
                .first()
                .and_then(|v| Some(v.status.as_ref()?.attached))
                == Some(true)
            && s_pvc
                .state()
                .first()
                .and_then(|p| p.status.as_ref()?.phase.clone())
                .as_deref()
                == Some("Bound")
            && s_pv
                .state()
                .first()
                .and_then(|p| p.status.as_ref()?.phase.clone())
                .as_deref()
                == Some("Bound")
    })
    .await;
    // A cluster-scoped kind has no namespaced path.
    let e = status(
        get_raw(&c, "/api/v1/namespaces/default/persistentvolumes", None)
            .await
            .expect_err("404"),
    );
    assert_eq!(e.code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_k8s_io_events_are_the_core_events() {
    let server = manual_server().await;
    let c = client(&server);
    let pp = PostParams::default();
    let v1: Api<EventV1> = Api::default_namespaced(c.clone());
    let core: Api<CoreEvent> = Api::default_namespaced(c.clone());
    let s_v1 = informer(
        Api::<EventV1>::all(c.clone()),
        watcher::Config::default().fields("regarding.name=p1"),
    )
    .await;
    // What kube-scheduler's event recorder sends.
    let scheduled = json!({"metadata": {"name": "p1.17a"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-host",
        "action": "Binding", "reason": "Scheduled", "type": "Normal",
        "note": "Successfully assigned default/p1 to n1",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "p1", "namespace": "default"}});
    let made = v1
        .create(&pp, &obj(scheduled.clone()))
        .await
        .expect("events.k8s.io event");
    assert_eq!(
        made.note.as_deref(),
        Some("Successfully assigned default/p1 to n1")
    );
    let seen = core
        .get("p1.17a")
        .await
        .expect("the same event through core/v1");
    assert_eq!(
        seen.message.as_deref(),
        Some("Successfully assigned default/p1 to n1")
    );
    assert_eq!(seen.involved_object.name.as_deref(), Some("p1"));
    assert_eq!(
        seen.reporting_component.as_deref(),
        Some("default-scheduler")
    );
    core.create(&pp, &obj(json!({"metadata": {"name": "p1.core"}, "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"},
        "reason": "Started", "message": "Started container", "type": "Normal", "source": {"component": "kubelet"}})))
        .await
        .expect("core event");
    core.create(&pp, &obj(json!({"metadata": {"name": "p2.core"}, "involvedObject": {"kind": "Pod", "name": "p2", "namespace": "default"},
        "reason": "Started", "message": "m", "type": "Normal"})))
        .await
        .expect("core event");
    let through_v1 = v1
        .get("p1.core")
        .await
        .expect("a core event through events.k8s.io");
    assert_eq!(through_v1.note.as_deref(), Some("Started container"));
    assert_eq!(
        through_v1.regarding.and_then(|r| r.name).as_deref(),
        Some("p1")
    );
    until("both events of p1 in the informer", || {
        names(&s_v1) == ["p1.17a", "p1.core"]
    })
    .await;
    let by_core_label = core
        .list(&ListParams::default().fields("involvedObject.name=p1"))
        .await
        .expect("core field selector");
    assert_eq!(by_core_label.items.len(), 2);

    // A recurring event: the recorder patches its series.
    v1.patch(
        "p1.17a",
        &PatchParams::default(),
        &Patch::Strategic(
            json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}}),
        ),
    )
    .await
    .expect("series");
    assert_eq!(
        core.get("p1.17a")
            .await
            .expect("event")
            .series
            .and_then(|s| s.count),
        Some(2)
    );

    // events.k8s.io's own create validation, and its resource in errors.
    let mut bad = scheduled.clone();
    bad["metadata"]["name"] = json!("bad");
    for f in ["reportingController", "action"] {
        bad.as_object_mut().expect("object").remove(f);
    }
    let e = status(v1.create(&pp, &obj(bad)).await.expect_err("422"));
    assert_eq!(fields(&e), ["reportingController", "action"]);
    assert!(
        e.message
            .starts_with("Event.events.k8s.io \"bad\" is invalid"),
        "{}",
        e.message
    );
    let e = status(v1.create(&pp, &obj(scheduled)).await.expect_err("409"));
    assert_eq!(e.message, "events.events.k8s.io \"p1.17a\" already exists");

    v1.delete("p1.17a", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(core.get_opt("p1.17a").await.expect("get").is_none());
    until("the delete in the informer", || names(&s_v1) == ["p1.core"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_at_resource_version_zero_come_whole_in_one_page() {
    let server = manual_server().await;
    let c = client(&server);
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let jobs: Api<Job> = Api::default_namespaced(c.clone());
    for n in ["a", "b", "c"] {
        cms.create(&pp, &obj(json!({"metadata": {"name": n}})))
            .await
            .expect("configmap");
        jobs.create(
            &pp,
            &obj(
                json!({"metadata": {"name": n}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": container()}}}}),
            ),
        )
        .await
        .expect("job");
    }
    let count = |v: &Value| v["items"].as_array().map_or(0, Vec::len);
    for base in [
        "/api/v1/namespaces/default/configmaps",
        "/apis/batch/v1/jobs",
    ] {
        // Without resourceVersion=0: pages, with a continue token.
        let paged = get_raw(&c, &format!("{base}?limit=1"), None)
            .await
            .expect("list");
        assert_eq!(count(&paged), 1, "{paged}");
        assert!(paged["metadata"]["continue"].is_string(), "{paged}");
        assert_eq!(paged["metadata"]["remainingItemCount"], 2);
        let at_rv = get_raw(
            &c,
            &format!("{base}?limit=1&resourceVersion=3&resourceVersionMatch=NotOlderThan"),
            None,
        )
        .await
        .expect("list");
        assert_eq!(count(&at_rv), 1, "{at_rv}");
        // resourceVersion=0, what a client-go reflector sends first (with
        // limit=500): answered whole from the watch cache, limit ignored.
        for q in [
            "resourceVersion=0&limit=1",
            "resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=1",
        ] {
            let whole = get_raw(&c, &format!("{base}?{q}"), None)
                .await
                .expect("list");
            assert_eq!(count(&whole), 3, "{q}: {whole}");
            assert!(whole["metadata"].get("continue").is_none(), "{q}: {whole}");
            assert!(
                whole["metadata"].get("remainingItemCount").is_none(),
                "{q}: {whole}"
            );
            assert_eq!(
                whole["metadata"]["resourceVersion"],
                server.resource_version().to_string()
            );
        }
        let table = get_raw(
            &c,
            &format!("{base}?resourceVersion=0&limit=1"),
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
        )
        .await
        .expect("table");
        assert_eq!(table["rows"].as_array().map_or(0, Vec::len), 3, "{table}");
    }
    let e = status(
        get_raw(
            &c,
            "/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=Exact",
            None,
        )
        .await
        .expect_err("Exact at 0 is refused"),
    );
    assert_eq!(
        (e.code, fields(&e)),
        (422, vec!["resourceVersionMatch".to_string()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_bodies_are_refused_with_a_415_status() {
    let server = manual_server().await;
    let c = client(&server);
    for path in [
        "/api/v1/namespaces/default/configmaps",
        "/apis/batch/v1/namespaces/default/jobs",
    ] {
        let req = http::Request::post(path)
            .header("Content-Type", "application/vnd.kubernetes.protobuf")
            .header(
                "Accept",
                "application/vnd.kubernetes.protobuf, application/json",
            )
            .body(b"k8s\x00\n\x0c\n\x02v1\x12\x06Binding".to_vec())
            .expect("request");
        let e = status(c.request::<Value>(req).await.expect_err("415"));
        assert_eq!(
            (e.code, e.reason.as_str(), e.status),
            (
                415,
                "UnsupportedMediaType",
                Some(kube::core::response::StatusSummary::Failure)
            )
        );
        assert!(
            e.message
                .contains("accepted media types include: application/json")
                && e.message.contains("application/vnd.kubernetes.protobuf"),
            "{}",
            e.message
        );
    }
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    assert!(
        cms.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}

fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_job_and_storage_kinds_and_shows_their_tables() {
    let Some(bin) =
        kubectl_or_skip("kubectl_creates_a_job_and_storage_kinds_and_shows_their_tables")
    else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "served-kinds");
    let out = k
        .ok(&[
            "create",
            "-f",
            &fixture("workloads.yaml").display().to_string(),
        ])
        .await;
    for made in [
        "job.batch/pi created",
        "replicaset.apps/web created",
        "statefulset.apps/db created",
        "replicationcontroller/legacy created",
        "storageclass.storage.k8s.io/fast created",
        "persistentvolume/pv-a created",
        "persistentvolumeclaim/scratch created",
    ] {
        assert!(out.contains(made), "{made}: {out}");
    }

    let jobs = k.ok(&["get", "jobs"]).await;
    assert_eq!(
        header(&jobs),
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
        "{jobs}"
    );
    assert_eq!(row(&jobs, "pi")[..3], ["pi", "Running", "0/2"], "{jobs}");
    let wide = k.ok(&["get", "job", "pi", "-o", "wide"]).await;
    assert!(
        wide.contains("perl:5.34") && wide.contains("batch.kubernetes.io/controller-uid="),
        "{wide}"
    );
    // No Job controller: no pods, however long the clock runs.
    server.advance(600);
    let pods = k.run(&["get", "pods"]).await;
    assert!(
        pods.ok && pods.stdout.is_empty() && pods.stderr.contains("No resources found"),
        "{pods:?}"
    );
    let waited = k
        .run(&["wait", "--for=condition=complete", "job/pi", "--timeout=1s"])
        .await;
    assert!(
        !waited.ok && waited.stderr.contains("timed out"),
        "{waited:?}"
    );

    let rs = k.ok(&["get", "rs"]).await;
    assert_eq!(
        header(&rs),
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        "{rs}"
    );
    assert_eq!(row(&rs, "web")[..4], ["web", "3", "0", "0"], "{rs}");
    let sts = k.ok(&["get", "sts"]).await;
    assert_eq!(header(&sts), ["NAME", "READY", "AGE"], "{sts}");
    assert_eq!(row(&sts, "db")[..2], ["db", "0/2"], "{sts}");
    let rc = k.ok(&["get", "rc"]).await;
    assert_eq!(row(&rc, "legacy")[..4], ["legacy", "1", "0", "0"], "{rc}");
    let all = k.ok(&["get", "all"]).await;
    for name in [
        "job.batch/pi",
        "replicaset.apps/web",
        "statefulset.apps/db",
        "replicationcontroller/legacy",
    ] {
        assert!(all.contains(name), "{name}: {all}");
    }

    let pv = k.ok(&["get", "pv"]).await;
    assert_eq!(
        header(&pv),
        [
            "NAME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "RECLAIM",
            "POLICY",
            "STATUS",
            "CLAIM",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "REASON",
            "AGE"
        ],
        "{pv}"
    );
    assert_eq!(
        row(&pv, "pv-a")[..7],
        [
            "pv-a", "10Gi", "RWO,ROX", "Retain", "Pending", "fast", "<unset>"
        ],
        "{pv}"
    );
    let pvc = k.ok(&["get", "pvc"]).await;
    assert_eq!(
        header(&pvc),
        [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "AGE"
        ],
        "{pvc}"
    );
    assert_eq!(
        row(&pvc, "scratch")[..4],
        ["scratch", "Pending", "fast", "<unset>"],
        "{pvc}"
    );
    let sc = k.ok(&["get", "sc"]).await;
    assert_eq!(
        row(&sc, "fast")[..6],
        [
            "fast",
            "(default)",
            "csi.example.com",
            "Delete",
            "WaitForFirstConsumer",
            "true"
        ],
        "{sc}"
    );

    // Discovery names every kind, with kube-apiserver's short names.
    let resources = k.ok(&["api-resources", "--no-headers"]).await;
    for want in [
        ["jobs", "batch/v1", "true", "Job"].as_slice(),
        &["replicasets", "rs", "apps/v1", "true", "ReplicaSet"],
        &["statefulsets", "sts", "apps/v1", "true", "StatefulSet"],
        &[
            "replicationcontrollers",
            "rc",
            "v1",
            "true",
            "ReplicationController",
        ],
        &["persistentvolumes", "pv", "v1", "false", "PersistentVolume"],
        &[
            "persistentvolumeclaims",
            "pvc",
            "v1",
            "true",
            "PersistentVolumeClaim",
        ],
        &[
            "storageclasses",
            "sc",
            "storage.k8s.io/v1",
            "false",
            "StorageClass",
        ],
        &["csinodes", "storage.k8s.io/v1", "false", "CSINode"],
        &["csidrivers", "storage.k8s.io/v1", "false", "CSIDriver"],
        &[
            "csistoragecapacities",
            "storage.k8s.io/v1",
            "true",
            "CSIStorageCapacity",
        ],
        &[
            "volumeattachments",
            "storage.k8s.io/v1",
            "false",
            "VolumeAttachment",
        ],
        &["events", "ev", "events.k8s.io/v1", "true", "Event"],
    ] {
        assert!(
            resources
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == want),
            "{want:?}: {resources}"
        );
    }

    let out = k.ok(&["delete", "job", "pi"]).await;
    assert!(out.contains("job.batch \"pi\" deleted"), "{out}");
}
