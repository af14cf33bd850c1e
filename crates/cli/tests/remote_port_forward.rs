//! The verbs that ask the running scheduler, reaching it through the
//! kubeconfig's cluster: no `--server`, no `TRAINYARD_SERVER`, only
//! `--kubeconfig` (which also keeps the CLI off the default socket, so a
//! scheduler on this machine cannot answer instead). `trainyard serve` runs
//! as a process with its API on `127.0.0.57:50051`, the `status.podIP` of
//! a scheduler pod object in `trainyard-system`; the test API server's
//! `pods/portforward` forwards there. The Lease's holder is chosen over the
//! first pod by name; no running scheduler pod is an error saying what to do.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use trainyard_testapi::{Config, TestApiServer};

mod common;
mod remote_common;
use common::gpu_node_and_pod;
use remote_common::{Said, bin, run_program, stable};

/// The scheduler pod's IP: a loopback address no other test uses.
const POD_IP: &str = "127.0.0.57";
/// A scheduler pod's IP where nothing listens (the pod that is not the leader).
const IDLE_IP: &str = "127.0.0.58";
const NS: &str = "trainyard-system";

/// A scheduler pod in [`NS`] with the chart's labels, `Running` at `ip` on
/// a node that does not exist (the simulated kubelet leaves it be).
async fn scheduler_pod(pods: &Api<Pod>, name: &str, ip: &str) {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "app.kubernetes.io/part-of": "trainyard",
            "app.kubernetes.io/component": "scheduler"}},
        "spec": {"nodeName": "control-plane-1",
                 "containers": [{"name": "trainyard", "image": "trainyard:test"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    phase(pods, name, "Running", ip).await;
}

async fn phase(pods: &Api<Pod>, name: &str, phase: &str, ip: &str) {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase, "podIP": ip, "podIPs": [{"ip": ip}]}})),
    )
    .await
    .expect("pod status");
}

/// `trainyard serve`, its API on `POD_IP:50051` only (`--api-socket ""`:
/// no Unix socket, so nothing but the port-forward reaches it).
fn serve(kubeconfig: &Path) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(["serve", "--leader-elect=false", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--api-socket", ""])
        .args([
            "--http-address",
            "",
            "--api-listen",
            &format!("{POD_IP}:50051"),
        ])
        .env_remove("TRAINYARD_LOG")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("trainyard serve starts")
}

/// `trainyard ARGS --kubeconfig K`: through the cluster.
async fn through_cluster(kubeconfig: &Path, args: &[&str]) -> Said {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.push("--kubeconfig".into());
    all.push(kubeconfig.display().to_string());
    run_program(bin(), all, vec![]).await
}

/// `trainyard ARGS --server http://POD_IP:50051`: straight to the API.
async fn direct(args: &[&str]) -> Said {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.push("--server".into());
    all.push(format!("http://{POD_IP}:50051"));
    run_program(bin(), all, vec![]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbs_reach_the_scheduler_by_port_forward_through_the_kubeconfig() {
    let server = TestApiServer::start(Config::default())
        .await
        .expect("the test API server starts");
    let client = kube::Client::try_from(kube::Config::new(
        server.url().parse().expect("the server's URL"),
    ))
    .expect("a client");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");

    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NS}})).expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let scheduler_pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    // No scheduler pod yet: where it was looked for, and what to do.
    let said = through_cluster(&kubeconfig, &["queues"]).await;
    assert!(!said.ok);
    assert_eq!(
        said.stderr,
        "error: no running scheduler pod in namespace trainyard-system (labels app.kubernetes.io/part-of=trainyard,app.kubernetes.io/component=scheduler); is Trainyard installed there? pass --scheduler-namespace NS, or --server ADDR\n"
    );

    // Two scheduler pods: `trainyard-a` first by name, with nothing at its
    // IP; `trainyard-b`, the Lease's holder, where the API is.
    scheduler_pod(&scheduler_pods, "trainyard-a", IDLE_IP).await;
    scheduler_pod(&scheduler_pods, "trainyard-b", POD_IP).await;
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "trainyard"},
        "spec": {"holderIdentity": "trainyard-b", "leaseDurationSeconds": 15}
    }))
    .expect("lease");
    Api::<Lease>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");

    let mut child = serve(&kubeconfig);
    let pods = gpu_node_and_pod(&client, 2).await;
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
    // Straight to the API until its cycle has seen the bind.
    let mut want = None;
    for _ in 0..100 {
        let said = direct(&["queues"]).await;
        if said.ok && said.stdout.contains("default       1        1        0") {
            want = Some(said.stdout);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let want = want.expect("the scheduler answered with the bound pod within 10 s");

    // Through the cluster: the same table.
    let said = through_cluster(&kubeconfig, &["queues"]).await;
    assert!(said.ok, "{}{}", said.stdout, said.stderr);
    assert_eq!(stable(&said.stdout), stable(&want));
    assert!(
        said.stdout.starts_with("QUEUE    WEIGHT"),
        "{}",
        said.stdout
    );

    // Another verb: the job, as the API says it.
    let said = through_cluster(&kubeconfig, &["jobs", "-A"]).await;
    assert!(said.ok, "{}{}", said.stdout, said.stderr);
    assert_eq!(
        stable(&said.stdout),
        stable(&direct(&["jobs", "-A"]).await.stdout)
    );
    assert!(said.stdout.contains("train-0"), "{}", said.stdout);

    // The leader gone (its pod failed): the other pod, where nothing
    // listens; the error names it and says what to do. (Not the error
    // channel's text: kube-rs 5's forwarder fails on the client's pending
    // write once the server has closed, before it hands the text on, so
    // the cause is HTTP/2's "broken pipe".)
    phase(&scheduler_pods, "trainyard-b", "Failed", POD_IP).await;
    let said = through_cluster(&kubeconfig, &["queues"]).await;
    assert!(!said.ok);
    assert!(
        said.stderr.starts_with(
            "error: cannot reach the scheduler at pod trainyard-system/trainyard-a port 50051 (port-forward): "
        ) && said.stderr.ends_with(
            "(is `trainyard serve` running? pass --server or set TRAINYARD_SERVER)\n"
        ),
        "{}",
        said.stderr
    );

    // No running scheduler pod at all.
    phase(&scheduler_pods, "trainyard-a", "Failed", IDLE_IP).await;
    let said = through_cluster(&kubeconfig, &["queues"]).await;
    assert!(!said.ok);
    assert!(
        said.stderr
            .starts_with("error: no running scheduler pod in namespace trainyard-system"),
        "{}",
        said.stderr
    );
    child.kill().await.expect("killed");
}
