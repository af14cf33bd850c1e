//! `trainyard serve` as a process, the way the kubelet runs it: started
//! with a settings file (leader election on) against the test API server,
//! it takes the Lease and binds a pod; on SIGTERM it stops, releases the
//! Lease and exits 0.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use trainyard_testapi::{Config, TestApiServer};

mod common;
use common::gpu_node_and_pod;

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("trainyard")
        .await
        .expect("lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_service_releases_the_lease_and_exits_zero() {
    let server = TestApiServer::start(Config::default())
        .await
        .expect("the test API server starts");
    let client = kube::Client::try_from(kube::Config::new(
        server.url().parse().expect("the server's URL"),
    ))
    .expect("a client");
    let dir = std::env::temp_dir().join(format!("trainyard-sigterm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let settings = dir.join("serve.yaml");
    std::fs::write(
        &settings,
        "service:\n  cyclePeriodMillis: 100\n  httpAddress: ''\n  leaderElection:\n    enabled: true\n    identity: sigterm-test\n    leaseNamespace: default\n    leaseDurationSeconds: 15\n    renewDeadlineSeconds: 10\n    retryPeriodSeconds: 1\n",
    )
    .expect("settings");

    let pods = gpu_node_and_pod(&client, 2).await;

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .arg("serve")
        .arg("--config")
        .arg(&settings)
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("TRAINYARD_LOG")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("trainyard serve starts");

    let bound = |p: Option<&Pod>| {
        p.and_then(|p| p.spec.as_ref())
            .is_some_and(|s| s.node_name.is_some())
    };
    tokio::time::timeout(
        Duration::from_secs(30),
        kube::runtime::wait::await_condition(pods.clone(), "train-0", bound),
    )
    .await
    .expect("the pod is bound within 30 s")
    .expect("the pod watch");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    assert_eq!(holder(&leases).await.as_deref(), Some("sigterm-test"));

    let pid = child.id().expect("a running child");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("it exits within 30 s of SIGTERM")
        .expect("its exit status");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(holder(&leases).await, None, "the lease is released");
    let _ = std::fs::remove_dir_all(&dir);
}
