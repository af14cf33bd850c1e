//! The service end to end against the test API server: objects go in
//! through kube-rs, the service watches, schedules and binds, and the test
//! reads the outcome from the API objects (not from the service's state).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio::sync::watch;
use trainyard_serve::{GPU_DEVICES_ANNOTATION, Progress, Settings};
use trainyard_testapi::{Config, TestApiServer};

fn client(server: &TestApiServer) -> Client {
    let config = kube::Config::new(server.url().parse().expect("url"));
    Client::try_from(config).expect("client")
}

async fn server() -> (TestApiServer, Client) {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        ..Config::default()
    })
    .await
    .expect("server starts");
    let client = client(&server);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for f in ["queues", "podgroups", "topologies"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../deploy/crds/{f}.trainyard.io.yaml"));
        let text = std::fs::read_to_string(p).expect("committed CRD");
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("a CRD");
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD accepted");
    }
    (server, client)
}

fn trainyard(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainyard.io", "v1alpha1", kind),
        plural,
    )
}

async fn create(client: &Client, ar: &ApiResource, namespace: Option<&str>, object: Value) {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let o: DynamicObject = serde_json::from_value(object).expect("object");
    api.create(&PostParams::default(), &o)
        .await
        .expect("created");
}

async fn node(client: &Client, name: &str, gpus: u32) {
    let api: Api<Node> = Api::all(client.clone());
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
    api.create(&PostParams::default(), &n)
        .await
        .expect("node created");
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
            "conditions": [{"type": "Ready", "status": "True"}]
        }})),
    )
    .await
    .expect("node status");
}

async fn gang(client: &Client, name: &str, queue: &str, pods: u32, gpus: u32) {
    create(
        client,
        &trainyard("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": "ml"},
               "spec": {"queue": queue, "minMember": pods}}),
    )
    .await;
    let api: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for i in 0..pods {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-{i}"), "namespace": "ml",
                         "labels": {"trainyard.io/pod-group": name}},
            "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                     "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                                   "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
        }))
        .expect("pod");
        api.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
}

/// Starts the service; returns its progress and the switch that stops it.
fn start(client: Client) -> (watch::Receiver<Progress>, watch::Sender<bool>) {
    let mut settings = Settings::default();
    settings.service.cycle_period_millis = 50;
    settings.service.debounce_millis = 10;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (progress_tx, progress_rx) = watch::channel(Progress::default());
    tokio::spawn(async move {
        trainyard_serve::run(client, settings, stop_rx, progress_tx)
            .await
            .expect("service runs");
    });
    (progress_rx, stop_tx)
}

/// Waits (on the service's progress, not a clock) until `done` holds.
async fn until(
    progress: &mut watch::Receiver<Progress>,
    what: &str,
    done: impl Fn(&Progress) -> bool,
) -> Progress {
    let result = {
        let wait = progress.wait_for(|p| done(p));
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .map(|r| r.map(|p| *p).map_err(|_| ()))
    };
    match result {
        Ok(Ok(p)) => p,
        Ok(Err(())) => panic!("the service stopped before {what}"),
        Err(_) => panic!("timed out waiting for {what}: {:?}", *progress.borrow()),
    }
}

/// Node and GPU devices of every bound pod, from the API.
async fn placements(client: &Client) -> BTreeMap<String, (String, Vec<u32>)> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let mut out = BTreeMap::new();
    for p in api.list(&ListParams::default()).await.expect("list") {
        let name = p.metadata.name.clone().unwrap_or_default();
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let gpus = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(GPU_DEVICES_ANNOTATION))
            .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        out.insert(name, (node, gpus));
    }
    out
}

/// Namespace `ml`, nodes n1 and n2 with 8 GPUs each, queue `team`.
async fn cluster(client: &Client) {
    let ns: Api<Namespace> = Api::all(client.clone());
    let ml: Namespace = serde_json::from_value(json!({"metadata": {"name": "ml"}})).expect("ns");
    ns.create(&PostParams::default(), &ml)
        .await
        .expect("namespace");
    node(client, "n1", 8).await;
    node(client, "n2", 8).await;
    create(
        client,
        &trainyard("Queue", "queues"),
        None,
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
               "metadata": {"name": "team"}, "spec": {"quota": {"nvidia.com/gpu": 16}}}),
    )
    .await;
}

/// No GPU device of a node is given to two bound pods.
fn devices_distinct(placed: &BTreeMap<String, (String, Vec<u32>)>) {
    let mut per_node: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (node, gpus) in placed.values() {
        per_node.entry(node).or_default().extend(gpus);
    }
    for (node, gpus) in &per_node {
        let distinct: BTreeSet<&u32> = gpus.iter().collect();
        assert_eq!(
            distinct.len(),
            gpus.len(),
            "{node}: a GPU given twice: {gpus:?}"
        );
        assert!(gpus.iter().all(|g| *g < 8), "{node}: {gpus:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_and_dropped_watches_lose_nothing_and_bind_nothing_twice() {
    let (server, client) = server().await;
    cluster(&client).await;
    gang(&client, "first", "team", 2, 4).await;
    let (mut progress, stop) = start(client.clone());
    until(&mut progress, "the first gang's binds", |p| {
        p.written.binds == 2
    })
    .await;
    stop.send_replace(true);

    // A new scheduler process: it learns the first gang's binds from the
    // API, not from memory; its watches are cut and its lists expire.
    let (mut progress, _stop) = start(client.clone());
    until(&mut progress, "a cycle of the new scheduler", |p| {
        p.cycles >= 1
    })
    .await;
    server.drop_watches();
    server.force_410(2);
    gang(&client, "second", "team", 2, 4).await;
    let bound = until(&mut progress, "the second gang's binds", |p| {
        p.written.binds == 2
    })
    .await;
    let later = bound.cycles + 3;
    let end = until(&mut progress, "three more cycles", |p| p.cycles >= later).await;
    assert_eq!((end.written.binds, end.written.failed), (2, 0), "{end:?}");

    let placed = placements(&client).await;
    let names: BTreeSet<&str> = placed.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["first-0", "first-1", "second-0", "second-1"])
    );
    devices_distinct(&placed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_fits_binds_whole_and_one_that_does_not_binds_nothing() {
    let (_server, client) = server().await;
    cluster(&client).await;
    gang(&client, "fits", "team", 4, 4).await;
    gang(&client, "too-big", "team", 3, 8).await;

    let (mut progress, stop) = start(client.clone());
    let bound = until(&mut progress, "the fitting gang's binds", |p| {
        p.written.binds == 4
    })
    .await;
    // A few more cycles: nothing else may be bound, nothing twice.
    let later = bound.cycles + 3;
    let end = until(&mut progress, "three more cycles", |p| p.cycles >= later).await;
    assert_eq!(end.written.binds, 4, "{end:?}");
    assert_eq!(end.written.failed, 0, "{end:?}");

    let placed = placements(&client).await;
    let names: BTreeSet<&str> = placed.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["fits-0", "fits-1", "fits-2", "fits-3"])
    );
    for (_, gpus) in placed.values() {
        assert_eq!(gpus.len(), 4, "{placed:?}");
    }
    devices_distinct(&placed);

    // The gang that does not fit: every pod says why, once.
    assert_eq!(end.reports, 3, "{end:?}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let waiting = pods.get("too-big-0").await.expect("pod");
    let condition = waiting
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("a PodScheduled condition");
    assert_eq!(condition.status, "False");
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    let message = condition.message.unwrap_or_default();
    assert!(message.contains("gang"), "{message}");
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "ml");
    let failed: Vec<_> = events
        .list(&ListParams::default().fields("involvedObject.name=too-big-0"))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .collect();
    assert_eq!(failed.len(), 1, "one event while the reason stays the same");
    let scheduled = events
        .list(&ListParams::default().fields("involvedObject.name=fits-0,reason=Scheduled"))
        .await
        .expect("events")
        .items;
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    let node = &placed["fits-0"].0;
    assert_eq!(
        scheduled[0].message.as_deref(),
        Some(format!("Successfully assigned ml/fits-0 to {node}").as_str())
    );
    assert_eq!(failed[0].message.as_deref(), Some(message.as_str()));

    // The queue's status, as `kubectl get tyq` shows it.
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &trainyard("Queue", "queues"));
    let team = queues.get("team").await.expect("queue");
    let status = &team.data["status"];
    assert_eq!(status["allocated"]["nvidia.com/gpu"], "16", "{status}");
    assert_eq!(status["fairShare"]["nvidia.com/gpu"], "16", "{status}");
    assert_eq!(status["runningJobs"], 1, "{status}");
    assert_eq!(status["pendingJobs"], 1, "{status}");
    assert!(end.queue_statuses >= 1, "{end:?}");
    stop.send_replace(true);
}
