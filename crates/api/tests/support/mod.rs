//! Shared by the API's end-to-end tests (`crates/api/tests/e2e.rs`) and
//! the `trainyard` verbs' (`crates/cli/tests/remote_verbs.rs`, which
//! includes this file by path): the test API server with a namespace,
//! nodes and pods, and `trainyard serve`'s service run in-process over
//! it with the gRPC API on a Unix socket and a loopback port. [`secure`]:
//! the same with security on (TLS, tokens, RBAC), shared by
//! `crates/api/tests/security.rs` and the verbs' TLS test.
#![allow(dead_code)]

pub mod secure;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};
use trainyard_serve::view::{CycleView, LiveView};
use trainyard_testapi::{Config, TestApiServer};

/// The test API server (manual clock) and a client of it, with the
/// namespace `ml`.
pub async fn start_cluster() -> (TestApiServer, kube::Client) {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        ..Config::default()
    })
    .await
    .expect("server starts");
    let mut kc = kube::Config::new(server.url().parse().expect("url"));
    kc.default_retry = false;
    let client = kube::Client::try_from(kc).expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ml = serde_json::from_value(json!({"metadata": {"name": "ml"}})).expect("namespace");
    namespaces
        .create(&PostParams::default(), &ml)
        .await
        .expect("namespace created");
    (server, client)
}

/// A ready node with `gpus` GPUs, 64 CPUs, 512Gi.
pub async fn node(client: &kube::Client, name: &str, gpus: u32) {
    let api: Api<Node> = Api::all(client.clone());
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
    api.create(&PostParams::default(), &n)
        .await
        .expect("node created");
    let g = gpus.to_string();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": g},
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": g},
            "conditions": [{"type": "Ready", "status": "True"}]
        }})),
    )
    .await
    .expect("node status");
}

/// A pod of Trainyard's in `ml` asking `gpus` GPUs.
pub async fn pod(client: &kube::Client, name: &str, gpus: u32) {
    pod_in(client, "ml", name, gpus).await
}

/// A pod of Trainyard's in `ns` asking `gpus` GPUs.
pub async fn pod_in(client: &kube::Client, ns: &str, name: &str, gpus: u32) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                 "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                               "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .expect("pod");
    api.create(&PostParams::default(), &p)
        .await
        .expect("pod created");
}

/// The service and its API, running until [`Running::stop`].
pub struct Running {
    pub view: Arc<LiveView>,
    /// The API's Unix socket (none with [`start_service_with`]`(.., false, ..)`:
    /// the path is never made) and loopback port.
    pub socket: PathBuf,
    pub port: u16,
    pub dir: tempfile::TempDir,
    stop: watch::Sender<bool>,
    service: JoinHandle<Result<(), trainyard_serve::ServeError>>,
    api: JoinHandle<()>,
}

/// `trainyard serve`'s service over `client` (50 ms cycles, no leader
/// election, no HTTP), with the gRPC API on a socket in a scratch
/// directory and on a free loopback port.
pub async fn start_service(client: &kube::Client) -> Running {
    start_service_with(client, true, Default::default()).await
}

/// As [`start_service`], the socket only when `socket`, the loopback
/// port secured by `security`.
pub async fn start_service_with(
    client: &kube::Client,
    socket: bool,
    security: trainyard_api::server::Security,
) -> Running {
    start_service_full(client, socket, security, |_| {}).await
}

/// As [`start_service_with`], the settings changed by `tune` first.
pub async fn start_service_full(
    client: &kube::Client,
    socket: bool,
    security: trainyard_api::server::Security,
    tune: impl FnOnce(&mut trainyard_serve::Settings),
) -> Running {
    let mut settings = trainyard_serve::Settings::default();
    settings.service.cycle_period_millis = 50;
    settings.service.debounce_millis = 10;
    settings.service.http_address = String::new();
    settings.service.leader_election.enabled = false;
    tune(&mut settings);
    let view = Arc::new(LiveView::new("trainyard", "default"));
    let dir = tempfile::tempdir().expect("a scratch dir");
    let socket_path = dir.path().join("api.sock");
    let port = free_port();
    let (stop, shutdown) = watch::channel(false);
    let (progress, _p) = watch::channel(trainyard_serve::Progress::default());
    let listen = trainyard_api::server::Listen {
        socket: socket.then(|| socket_path.clone()),
        tcp: Some(format!("127.0.0.1:{port}").parse().expect("address")),
        security,
    };
    let api = trainyard_api::server::serve(view.clone(), &listen, shutdown.clone())
        .await
        .expect("the API starts");
    let service = tokio::spawn(trainyard_serve::run_with(
        client.clone(),
        settings,
        trainyard_serve::Options {
            shutdown,
            progress,
            reload: None,
            metrics: Arc::new(trainyard_serve::metrics::Metrics::new()),
            drain: Duration::from_secs(2),
            own: Default::default(),
            view: Some(view.clone()),
        },
    ));
    Running {
        view,
        socket: socket_path,
        port,
        dir,
        stop,
        service,
        api,
    }
}

impl Running {
    /// Stops the service and the API; the socket is removed.
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.service).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.api).await;
        assert!(!self.socket.exists(), "the socket is removed at stop");
    }
}

/// A tonic channel over the Unix socket at `path`.
pub async fn unix_channel(path: PathBuf) -> Channel {
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(s))
            }
        }))
        .await
        .expect("connects to the API's socket")
}

/// Waits for a cycle that `done` accepts.
pub async fn cycle_until(
    view: &LiveView,
    what: &str,
    done: impl Fn(&CycleView) -> bool,
) -> Arc<CycleView> {
    let mut latest = view.latest();
    let wait = latest.wait_for(|c| c.as_ref().is_some_and(|c| done(c)));
    match tokio::time::timeout(Duration::from_secs(30), wait).await {
        Ok(Ok(c)) => c.clone().expect("a cycle"),
        _ => {
            let c = view.latest().borrow().clone();
            let state = c.map(|c| {
                let jobs: Vec<String> = c
                    .snapshot
                    .jobs
                    .iter()
                    .map(|j| {
                        format!(
                            "{} pending={}",
                            j.id,
                            j.tasks.iter().filter(|t| t.is_pending()).count()
                        )
                    })
                    .collect();
                format!(
                    "cycle {} binds {} in flight {} jobs {jobs:?}",
                    c.number,
                    c.decisions.binds.len(),
                    c.writes_in_flight
                )
            });
            panic!("timed out waiting for {what}; latest: {state:?}")
        }
    }
}

/// A cycle where `ml/run` is bound and seen bound and nothing is in
/// flight (so the answers stay as they are).
pub async fn quiet_after_run(view: &LiveView) -> Arc<CycleView> {
    cycle_until(view, "a quiet cycle after run's bind", |c| {
        let bound = c
            .snapshot
            .jobs
            .iter()
            .any(|j| j.id == "ml/run" && !j.tasks[0].is_pending());
        bound && c.decisions.binds.is_empty() && c.writes_in_flight == 0
    })
    .await
}

/// A loopback port free now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The dashboard in headless Chromium (`tests/ui/driver.py`), for the
/// browser tests and the browser benchmark.
pub mod browser;

/// As [`start_service`], with the service's settings changed by `tune`
/// first (the browser benchmark: the default 1 s cycle period; a store).
pub async fn start_service_tuned(
    client: &kube::Client,
    tune: impl FnOnce(&mut trainyard_serve::Settings),
) -> Running {
    start_service_full(client, true, Default::default(), tune).await
}

/// Trainyard's CRDs (deploy/crds), as the chart installs them, created
/// on `server` directly.
pub fn install_crds(server: &TestApiServer) {
    for f in ["queues", "podgroups", "topologies"] {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../deploy/crds/{f}.trainyard.io.yaml"));
        let text = std::fs::read_to_string(&p).expect("a committed CRD");
        let crd: serde_json::Value = serde_saphyr::from_str(&text).expect("a CRD");
        server.create(crd).expect("CRD created");
    }
}
