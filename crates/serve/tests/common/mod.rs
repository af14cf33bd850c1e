//! Helpers of the end-to-end tests: a test API server with Trainyard's
//! CRDs, objects created through kube-rs, the service started in-process,
//! and outcomes read back from the API.
//!
//! With `TRAINYARD_E2E_KUBECONFIG=FILE`, [`env`] gives the tests that
//! need no fault controls a real cluster instead (docs/serve.md, "The
//! end-to-end suite on a real cluster"): a disposable one with KWOK, whose
//! fake nodes the tests create. They run one at a time there, each on a
//! clean slate (its objects from an earlier test are deleted first). Tests
//! that need the test server's controls (faults, cut watches, the manual
//! kubelet clock) call [`skip_on_cluster`] and print why they skip.

#![allow(dead_code)] // each test file uses some of them

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

/// A client of the test API server. Like the service's own
/// ([`trainyard_serve::connect`]), it has no retry layer: kube's default
/// one retries a 429 with backoff for seconds, and an eviction that a
/// PodDisruptionBudget refuses answers 429, so a service given a retrying
/// client would wait where the real one decides again.
pub fn client(server: &TestApiServer) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// The real cluster of `TRAINYARD_E2E_KUBECONFIG`, if set.
pub fn cluster_kubeconfig() -> Option<String> {
    std::env::var("TRAINYARD_E2E_KUBECONFIG")
        .ok()
        .filter(|v| !v.is_empty())
}

/// True (after printing why) when the suite runs against a real cluster
/// and `test` needs the test server's controls.
pub fn skip_on_cluster(test: &str, needs: &str) -> bool {
    if cluster_kubeconfig().is_some() {
        eprintln!(
            "SKIPPED on TRAINYARD_E2E_KUBECONFIG: {test} needs {needs}, which only the test API server has"
        );
        return true;
    }
    false
}

/// Where a test runs: the test API server, or the real cluster (one test
/// at a time).
pub struct Env {
    pub test: Option<TestApiServer>,
    client: Client,
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

/// Label on every node the tests create (a real cluster's cleanup finds
/// them by it).
pub const E2E_LABEL: &str = "trainyard.io/e2e";

impl Env {
    /// Runs the kubelet one step: on the test server, bound pods start and
    /// deleted ones go; a real cluster's (KWOK's) kubelets do that alone.
    pub fn tick(&self) {
        if let Some(t) = &self.test {
            t.tick();
        }
    }

    /// Deletes a pod or node (the test server's handle, or the API).
    pub async fn delete(&self, kind: &str, namespace: &str, name: &str) {
        if let Some(t) = &self.test {
            t.delete("v1", kind, namespace, name).expect("deleted");
            return;
        }
        let dp = kube::api::DeleteParams::default();
        match kind {
            "Pod" => {
                Api::<Pod>::namespaced(self.client.clone(), namespace)
                    .delete(name, &dp)
                    .await
                    .expect("pod deleted");
            }
            _ => {
                Api::<Node>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .expect("node deleted");
            }
        }
    }
}

/// The test API server, or with `TRAINYARD_E2E_KUBECONFIG` the real
/// cluster cleaned of earlier tests' objects; Trainyard's CRDs installed.
pub async fn env() -> (Env, Client) {
    env_serving(trainyard_testapi::WorkloadApis::default()).await
}

/// [`env`], the test API server serving these versions of Kubernetes'
/// `scheduling.k8s.io` Workload and PodGroup (a real cluster serves what
/// it serves).
pub async fn env_serving(apis: trainyard_testapi::WorkloadApis) -> (Env, Client) {
    let Some(path) = cluster_kubeconfig() else {
        let (server, client) = server_serving(apis).await;
        let env = Env {
            test: Some(server),
            client: client.clone(),
            _turn: None,
        };
        return (env, client);
    };
    static TURN: std::sync::OnceLock<std::sync::Arc<tokio::sync::Mutex<()>>> =
        std::sync::OnceLock::new();
    let turn = TURN
        .get_or_init(|| std::sync::Arc::new(tokio::sync::Mutex::new(())))
        .clone()
        .lock_owned()
        .await;
    // The service's own way to a cluster (`trainyard serve --kubeconfig`).
    let mut config =
        trainyard_serve::connect::kube_config(&trainyard_serve::connect::ClusterOptions {
            kubeconfig: Some(path.into()),
            context: None,
        })
        .await
        .unwrap_or_else(|e| panic!("TRAINYARD_E2E_KUBECONFIG: {e}"));
    config.default_retry = false;
    let client = Client::try_from(config).expect("client");
    install_crds(&client).await;
    clean(&client).await;
    let env = Env {
        test: None,
        client: client.clone(),
        _turn: Some(turn),
    };
    (env, client)
}

/// Deletes what earlier tests left: pods, PodGroups and PDBs of `ml`,
/// Trainyard Queues, and the nodes the tests created.
async fn clean(client: &Client) {
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let all = ListParams::default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let _ = pods.delete_collection(&now, &all).await;
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "ml", &trainyard("PodGroup", "podgroups"));
    let _ = groups.delete_collection(&now, &all).await;
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), "ml");
    let _ = pdbs.delete_collection(&now, &all).await;
    // Events name pods by name: an earlier test's would pass for this one's.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "ml");
    let _ = events.delete_collection(&now, &all).await;
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &trainyard("Queue", "queues"));
    let _ = queues.delete_collection(&now, &all).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let _ = nodes
        .delete_collection(&now, &ListParams::default().labels(E2E_LABEL))
        .await;
}

async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for f in ["queues", "podgroups", "topologies"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../deploy/crds/{f}.trainyard.io.yaml"));
        let text = std::fs::read_to_string(p).expect("committed CRD");
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("a CRD");
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("CRD {f} not accepted: {e}"),
        }
    }
}

/// The test API server (with a manual clock), with Trainyard's CRDs.
pub async fn server() -> (TestApiServer, Client) {
    server_serving(trainyard_testapi::WorkloadApis::default()).await
}

/// [`server`], serving these versions of Kubernetes' gang API.
pub async fn server_serving(apis: trainyard_testapi::WorkloadApis) -> (TestApiServer, Client) {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        workload_apis: apis,
        ..Config::default()
    })
    .await
    .expect("server starts");
    let client = client(&server);
    install_crds(&client).await;
    (server, client)
}

pub fn trainyard(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainyard.io", "v1alpha1", kind),
        plural,
    )
}

/// Creates `object`; the object as the server made it.
pub async fn create(
    client: &Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    object: Value,
) -> Value {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let o: DynamicObject = serde_json::from_value(object).expect("object");
    let made = api
        .create(&PostParams::default(), &o)
        .await
        .expect("created");
    serde_json::to_value(made).expect("an object is JSON")
}

pub async fn node(client: &Client, name: &str, gpus: u32) {
    let api: Api<Node> = Api::all(client.clone());
    // On a real cluster, a KWOK fake node (KWOK keeps it Ready and runs
    // its pods).
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name,
        "labels": {E2E_LABEL: "true", "type": "kwok"},
        "annotations": {"kwok.x-k8s.io/node": "fake"}}}))
    .expect("node");
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

pub async fn gang(client: &Client, name: &str, queue: &str, pods: u32, gpus: u32) {
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
pub fn start(client: Client) -> (watch::Receiver<Progress>, watch::Sender<bool>) {
    start_with(client, fast_settings())
}

/// Settings with short cycles for tests.
pub fn fast_settings() -> Settings {
    let mut settings = Settings::default();
    settings.service.cycle_period_millis = 50;
    settings.service.debounce_millis = 10;
    // Tests run side by side: no fixed port.
    settings.service.http_address = String::new();
    // One replica per test (the tests of election turn it on).
    settings.service.leader_election.enabled = false;
    settings
}

/// Fast settings with leader election on a Lease in `default` (3 s
/// lease, 1 s retry) as replica `identity`.
pub fn leader_settings(identity: &str) -> Settings {
    let mut s = fast_settings();
    let le = &mut s.service.leader_election;
    le.enabled = true;
    le.identity = identity.into();
    le.lease_namespace = "default".into();
    le.lease_duration_seconds = 3;
    le.renew_deadline_seconds = 2;
    le.retry_period_seconds = 1;
    s
}

/// Starts the service with `settings`.
pub fn start_with(
    client: Client,
    settings: Settings,
) -> (watch::Receiver<Progress>, watch::Sender<bool>) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (progress_tx, progress_rx) = watch::channel(Progress::default());
    tokio::spawn(async move {
        trainyard_serve::run(client, settings, stop_rx, progress_tx)
            .await
            .expect("service runs");
    });
    (progress_rx, stop_tx)
}

/// A service run in-process by [`spawn_service`].
pub struct Spawned {
    pub progress: watch::Receiver<Progress>,
    pub stop: watch::Sender<bool>,
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts the service with `settings` through `run_with`: its metrics in
/// `metrics`, Events about itself on `own` (default: none), two seconds to
/// drain at stop.
pub fn spawn_service(
    client: Client,
    settings: Settings,
    metrics: std::sync::Arc<trainyard_serve::metrics::Metrics>,
    own: trainyard_serve::reload::Own,
) -> Spawned {
    let (stop, shutdown) = watch::channel(false);
    let (tx, progress) = watch::channel(Progress::default());
    let task = tokio::spawn(async move {
        trainyard_serve::run_with(
            client,
            settings,
            trainyard_serve::Options {
                shutdown,
                progress: tx,
                reload: None,
                metrics,
                drain: Duration::from_secs(2),
                own,
                view: None,
            },
        )
        .await
        .expect("service runs");
    });
    Spawned {
        progress,
        stop,
        task,
    }
}

/// Waits (on the service's progress, not a clock) until `done` holds.
pub async fn until(
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

/// The first `n` Events of `namespace` that `pick` selects, by name, as a
/// watch (its first list included) delivers them: Events are written by a
/// task of their own, after the writes they report, so a test waits for
/// them rather than listing once. Fails after 30 s.
pub async fn events_until(
    client: &Client,
    namespace: &str,
    n: usize,
    pick: impl Fn(&k8s_openapi::api::core::v1::Event) -> bool,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), namespace);
    let mut stream = watcher(events, watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut seen = BTreeMap::new();
    let wait = async {
        while seen.len() < n {
            match stream.next().await {
                Some(Ok(e)) if pick(&e) => {
                    seen.insert(e.metadata.name.clone().unwrap_or_default(), e);
                }
                Some(_) => {}
                None => break,
            }
        }
    };
    if tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .is_err()
    {
        panic!("timed out waiting for {n} Events in {namespace}: {seen:?}");
    }
    seen.into_values().collect()
}

/// Node and GPU devices of every bound pod, from the API.
pub async fn placements(client: &Client) -> BTreeMap<String, (String, Vec<u32>)> {
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

/// Creates namespace `name` (kept from an earlier test on a real cluster).
pub async fn namespace(client: &Client, name: &str) {
    let ns: Api<Namespace> = Api::all(client.clone());
    let o: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    match ns.create(&PostParams::default(), &o).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
}

/// Namespace `ml`, nodes n1 and n2 with 8 GPUs each, queue `team`.
pub async fn cluster(client: &Client) {
    namespace(client, "ml").await;
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
pub fn devices_distinct(placed: &BTreeMap<String, (String, Vec<u32>)>) {
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

/// One pod as a watch event showed it: name, nominated node, bound node.
pub type Seen = (String, Option<String>, Option<String>);

/// What a watch of the pods in `ml` saw, in order: (pod, nominated node,
/// bound node) per event. Start it before the service; read it when done.
pub struct PodHistory {
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodHistory {
    pub async fn start(client: &Client) -> PodHistory {
        use futures::StreamExt;
        use kube::runtime::watcher;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let api: Api<Pod> = Api::namespaced(client.clone(), "ml");
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            let mut ready = Some(ready_tx);
            while let Some(e) = events.next().await {
                let pods = match e {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => vec![p],
                    Ok(watcher::Event::InitDone) => {
                        if let Some(r) = ready.take() {
                            let _ = r.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                for p in pods {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let nominated = p
                        .status
                        .as_ref()
                        .and_then(|s| s.nominated_node_name.clone());
                    let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                    s.lock()
                        .expect("not poisoned")
                        .push((name, nominated, node));
                }
            }
        });
        ready_rx.await.expect("the pod watch lists");
        PodHistory { seen, task }
    }

    /// The events seen so far.
    pub fn events(&self) -> Vec<Seen> {
        self.seen.lock().expect("not poisoned").clone()
    }
}

impl Drop for PodHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The pod `ml/{pod}` of a one-pod job bound by `bound` goes on its own
/// (deleted, then stopped by the kubelet) two cycles later, once a usage
/// sample has seen it run; waits until `runtimes` observed runtimes are
/// kept.
pub async fn pod_ends_on_its_own(
    server: &TestApiServer,
    progress: &mut watch::Receiver<Progress>,
    bound: Progress,
    pod: &str,
    runtimes: u64,
) {
    until(progress, "two more cycles", |p| {
        p.cycles >= bound.cycles + 2
    })
    .await;
    server
        .delete("v1", "Pod", "ml", pod)
        .unwrap_or_else(|e| panic!("{pod} not deleted: {e}"));
    server.tick();
    until(progress, "its runtime observed", |p| p.runtimes == runtimes).await;
}

/// kubectl on PATH or where `scripts/install-test-tools.sh` puts it
/// (`~/.local/bin`); `None` lets a test print its skip, unless
/// `TRAINYARD_REQUIRE_TOOLS=1`, which makes a missing kubectl a failure.
pub fn find_kubectl() -> Option<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(std::path::PathBuf::from(home).join(".local/bin"));
    }
    let found = dirs
        .into_iter()
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file());
    if found.is_none() && std::env::var("TRAINYARD_REQUIRE_TOOLS").as_deref() == Ok("1") {
        panic!(
            "kubectl not found and TRAINYARD_REQUIRE_TOOLS=1 (run scripts/install-test-tools.sh)"
        );
    }
    found
}
