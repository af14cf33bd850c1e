//! The API end to end: `trainyard serve`'s service (in-process) against
//! the test API server, its gRPC API on a Unix socket and on loopback,
//! each RPC called with our tonic client and with Python `grpcio` (a
//! client that is not ours; skipped with the reason when it cannot be
//! imported, a failure under `TRAINYARD_REQUIRE_TOOLS`). A snapshot from
//! `GetSnapshot`, replayed with the core, gives the live cycle's decisions.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint};
use trainyard_api::pb;
use trainyard_api::pb::scheduler_client::SchedulerClient;
use trainyard_serve::view::{CycleView, LiveView};
use trainyard_testapi::{Config, TestApiServer};

async fn node(client: &kube::Client, name: &str, gpus: u32) {
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

async fn pod(client: &kube::Client, name: &str, gpus: u32) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                 "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                               "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .expect("pod");
    api.create(&PostParams::default(), &p)
        .await
        .expect("pod created");
}

/// A tonic channel over the Unix socket at `path`.
async fn unix_channel(path: std::path::PathBuf) -> Channel {
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
async fn cycle_until(
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

/// A loopback port free now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_answers_from_the_live_scheduler() {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        ..Config::default()
    })
    .await
    .expect("server starts");
    let mut kc = kube::Config::new(server.url().parse().expect("url"));
    kc.default_retry = false;
    let client = kube::Client::try_from(kc).expect("client");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ml = serde_json::from_value(json!({"metadata": {"name": "ml"}})).expect("namespace");
    namespaces
        .create(&PostParams::default(), &ml)
        .await
        .expect("namespace created");
    node(&client, "n1", 8).await;
    pod(&client, "run", 4).await;
    pod(&client, "wait", 6).await;

    let mut settings = trainyard_serve::Settings::default();
    settings.service.cycle_period_millis = 50;
    settings.service.debounce_millis = 10;
    settings.service.http_address = String::new();
    settings.service.leader_election.enabled = false;
    let view = Arc::new(LiveView::new("trainyard", "default"));
    let dir = tempfile::tempdir().expect("a scratch dir");
    let socket = dir.path().join("api.sock");
    let port = free_port();
    let (stop, shutdown) = watch::channel(false);
    let (progress, _p) = watch::channel(trainyard_serve::Progress::default());
    let listen = trainyard_api::server::Listen {
        socket: Some(socket.clone()),
        tcp: Some(format!("127.0.0.1:{port}").parse().expect("address")),
        ..Default::default()
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
    let channel = unix_channel(socket.clone()).await;
    let mut rpc = SchedulerClient::new(channel.clone());
    let mut stream = rpc
        .watch_decisions(pb::WatchDecisionsRequest { latest: true })
        .await
        .expect("a decision stream")
        .into_inner();

    // Quiet: `run` bound and seen bound, `wait` waiting, nothing in flight.
    let live = cycle_until(&view, "a quiet cycle after run's bind", |c| {
        let bound = c
            .snapshot
            .jobs
            .iter()
            .any(|j| j.id == "ml/run" && !j.tasks[0].is_pending());
        bound && c.decisions.binds.is_empty() && c.writes_in_flight == 0
    })
    .await;

    // WatchDecisions: run's bind, then wait's reason, in some message.
    let mut seen_bind = false;
    let mut seen_reason = false;
    while !(seen_bind && seen_reason) {
        let m = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("a cycle's decisions within 30 s")
            .expect("no stream error")
            .expect("the stream goes on");
        seen_bind |= m.binds.iter().any(|b| b.pod == "ml/run" && b.node == "n1");
        seen_reason |= m
            .reasons
            .iter()
            .any(|r| r.job == "ml/wait" && r.reason == "Unschedulable");
    }

    // ListQueues: the default queue, GPUs in milli-GPU.
    let queues = rpc
        .list_queues(pb::ListQueuesRequest {})
        .await
        .expect("queues")
        .into_inner();
    let q = queues
        .queues
        .iter()
        .find(|q| q.path == "default")
        .expect("the default queue");
    let gpu = q
        .resources
        .iter()
        .find(|r| r.resource == "nvidia.com/gpu")
        .expect("a GPU row");
    assert_eq!((gpu.unit.as_str(), gpu.allocated), ("mGPU", 4000), "{q:?}");
    assert!(gpu.limit.as_ref().is_some_and(|l| l.unlimited), "{gpu:?}");

    // ListJobs, filtered.
    let req = pb::ListJobsRequest {
        state: pb::JobState::Pending as i32,
        ..Default::default()
    };
    let jobs = rpc.list_jobs(req).await.expect("jobs").into_inner();
    let names: Vec<&str> = jobs.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["wait"]);

    // ExplainJob: the breakdown and what would have to change.
    let why = rpc
        .explain_job(pb::ExplainJobRequest {
            namespace: "ml".into(),
            name: "wait".into(),
        })
        .await
        .expect("explained")
        .into_inner();
    assert_eq!(
        why.summary,
        "0/1 nodes are available: 1 insufficient nvidia.com/gpu."
    );
    assert_eq!(why.cause, pb::Cause::Room as i32);
    assert!(!why.to_fit.is_empty());
    let unknown = rpc
        .explain_job(pb::ExplainJobRequest {
            namespace: "ml".into(),
            name: "waitt".into(),
        })
        .await
        .expect_err("no such job");
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    assert!(
        unknown.message().contains("did you mean ml/wait?"),
        "{}",
        unknown.message()
    );

    // WhatIf: wait at 4 GPUs fits beside run; nothing changes live.
    let resize = pb::Resize {
        namespace: "ml".into(),
        name: "wait".into(),
        gpus_per_pod: 4,
        ..Default::default()
    };
    let what = rpc
        .what_if(pb::WhatIfRequest {
            job: Some(pb::what_if_request::Job::Resize(resize)),
        })
        .await
        .expect("a what-if")
        .into_inner();
    assert!(what.fits, "{what:?}");
    assert_eq!(what.binds.len(), 1);
    let objects = "apiVersion: v1\nkind: Pod\nmetadata: {name: try, namespace: ml}\nspec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: '2'}}}]}\n";
    let what = rpc
        .what_if(pb::WhatIfRequest {
            job: Some(pb::what_if_request::Job::Objects(objects.into())),
        })
        .await
        .expect("a what-if of objects")
        .into_inner();
    assert!(what.fits, "{what:?}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    assert!(
        pods.get_opt("try").await.expect("get").is_none(),
        "a what-if creates nothing"
    );

    // GetSnapshot, replayed by the core as `trainyard schedule` does,
    // gives the live cycle's decisions.
    let snap = rpc
        .get_snapshot(pb::GetSnapshotRequest {})
        .await
        .expect("snapshot")
        .into_inner();
    let latest = view.latest().borrow().clone().expect("a cycle");
    assert!(
        latest.decisions.binds.is_empty() && latest.writes_in_flight == 0,
        "still quiet"
    );
    let loaded = trainyard_ingest::load(
        &[trainyard_ingest::Source::new(
            "snapshot.yaml",
            snap.objects_yaml.clone(),
        )],
        &trainyard_ingest::LoadOptions::default(),
    )
    .expect("the snapshot loads as `trainyard schedule` loads it");
    let config: trainyard_sched::Config =
        serde_saphyr::from_str(&snap.config_yaml).expect("the config reads back");
    let mut world = trainyard_cluster::ClusterState::from_snapshot(loaded.snapshot);
    let now = trainyard_model::Timestamp(snap.cycle.as_ref().expect("cycle").time_ms);
    let replay = trainyard_sched::schedule(&world.snapshot(), &config, now);
    assert_eq!(replay.binds, latest.decisions.binds);
    assert_eq!(replay.evictions, latest.decisions.evictions);
    assert_eq!(replay.pending, latest.decisions.pending);
    assert_eq!(replay.queues, latest.decisions.queues);
    let _ = live;

    // A client that is not ours, over TCP.
    python_client(port).await;

    // Health: the Scheduler serves (this replica leads and cycles).
    stop.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), service).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), api).await;
    assert!(!socket.exists(), "the socket is removed at stop");
}

/// Python `grpcio` with reflection calls the API on `port`.
async fn python_client(port: u16) {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import grpc, grpc_reflection"])
        .output();
    let missing = match &probe {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Some(format!("python3 cannot run: {e}")),
    };
    if let Some(reason) = missing {
        assert!(
            std::env::var_os("TRAINYARD_REQUIRE_TOOLS").is_none(),
            "TRAINYARD_REQUIRE_TOOLS is set but Python grpcio cannot be imported: {reason}"
        );
        eprintln!(
            "SKIPPED: the Python grpcio client part (scripts/install-test-tools.sh installs grpcio and grpcio-reflection): {reason}"
        );
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc_client.py");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(script)
            .args([&format!("127.0.0.1:{port}"), "ml", "wait"])
            .output()
    })
    .await
    .expect("joined")
    .expect("python3 runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the Python client failed:\n{said}");
    assert!(said.contains("health: SERVING"), "{said}");
    assert!(said.contains("explain: Unschedulable"), "{said}");
    assert!(said.contains("unknown job: NOT_FOUND"), "{said}");
}
