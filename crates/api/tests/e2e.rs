//! The API end to end: `trainyard serve`'s service (in-process) against
//! the test API server, its gRPC API on a Unix socket and on loopback,
//! each RPC called with our tonic client and with Python `grpcio` (a
//! client that is not ours; skipped with the reason when it cannot be
//! imported, a failure under `TRAINYARD_REQUIRE_TOOLS`). A snapshot from
//! `GetSnapshot`, replayed with the core, gives the live cycle's decisions.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use support::{node, pod, quiet_after_run, start_cluster, start_service, unix_channel};
use trainyard_api::pb;
use trainyard_api::pb::scheduler_client::SchedulerClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_answers_from_the_live_scheduler() {
    let (_server, client) = start_cluster().await;
    node(&client, "n1", 8).await;
    pod(&client, "run", 4).await;
    pod(&client, "wait", 6).await;
    let running = start_service(&client).await;
    let (view, port) = (running.view.clone(), running.port);
    let channel = unix_channel(running.socket.clone()).await;
    let mut rpc = SchedulerClient::new(channel.clone());
    let mut stream = rpc
        .watch_decisions(pb::WatchDecisionsRequest { latest: true })
        .await
        .expect("a decision stream")
        .into_inner();

    // Quiet: `run` bound and seen bound, `wait` waiting, nothing in flight.
    let live = quiet_after_run(&view).await;

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
    running.stop().await;
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
