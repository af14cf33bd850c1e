//! The kinds the server stores without their controllers — batch/v1 Jobs,
//! apps/v1 ReplicaSets and StatefulSets, v1 ReplicationControllers,
//! PersistentVolumes and claims, the storage.k8s.io kinds and events.k8s.io
//! Events — through kube-rs reflectors, as a client-go program's informers
//! list and watch them. kubectl's view of them is in `kubectl.rs`
//! (`kubectl_creates_a_job_and_storage_kinds_and_shows_their_tables`).

mod common;

use std::fmt::Debug;
use std::time::Duration;

use common::manual_server;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController,
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
    let spec = sts.spec;
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
