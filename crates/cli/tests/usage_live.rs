//! `trainyard usage --server` against `trainyard serve` running as a
//! process on the test API server: the hour still open and the jobs still
//! running are counted, and a scheduler without a store says which
//! setting keeps one.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use trainyard_testapi::{Config, TestApiServer};

mod common;
use common::{free_port, gpu_node_and_pod};

fn trainyard(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(args)
        .env_remove("COLUMNS")
        .env_remove("TRAINYARD_SERVER")
        .output()
        .expect("binary runs")
}

fn serve(kubeconfig: &Path, settings: &Path, port: u16) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(["serve", "--leader-elect=false", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--config")
        .arg(settings)
        .args(["--http-address", &format!("127.0.0.1:{port}")])
        .env_remove("TRAINYARD_LOG")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("trainyard serve starts")
}

/// `trainyard usage --server` until it answers (the service starts).
async fn ask(args: Vec<String>) -> Output {
    for _ in 0..100 {
        let a = args.clone();
        let out = tokio::task::spawn_blocking(move || {
            trainyard(&a.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .expect("ran");
        if !String::from_utf8_lossy(&out.stderr).contains("cannot connect") {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the service never answered on its --http-address");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_asked_of_a_running_scheduler_counts_the_open_hour_and_running_jobs() {
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

    // Without a store: /usage says which setting keeps one.
    let plain = dir.path().join("plain.yaml");
    std::fs::write(&plain, "service: {cyclePeriodMillis: 100}\n").expect("settings");
    let port = free_port();
    let mut child = serve(&kubeconfig, &plain, port);
    let url = format!("http://127.0.0.1:{port}");
    let out = ask(vec!["usage".into(), "--server".into(), url.clone()]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "error: --server {url}: 404 Not Found: /usage: this scheduler keeps no usage history: set service.store.path in its settings (the Helm chart: --set store.enabled=true) and restart it (docs/persistence.md, \"Accounting\")\n"
        )
    );
    child.kill().await.expect("killed");

    // With a store: 8 GPUs bound for a few seconds, no bucket closed yet.
    let settings = dir.path().join("serve.yaml");
    std::fs::write(
        &settings,
        format!(
            "service:\n  cyclePeriodMillis: 100\n  store: {{path: {}}}\n",
            dir.path().join("state.redb").display()
        ),
    )
    .expect("settings");
    let port = free_port();
    let mut child = serve(&kubeconfig, &settings, port);
    let pods = gpu_node_and_pod(&client, 8).await;
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
    let url = format!("http://127.0.0.1:{port}");
    let base = |extra: &[&str]| -> Vec<String> {
        ["usage", "--server", &url, "--since", "1h"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    // The pod runs from when the kubelet started it: ask again until the
    // running job has used a second's worth of its 8 GPUs (a condition
    // polled every 50 ms, for at most 30 s; not a fixed wait).
    let mut used = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        let out = ask(base(&["--by", "job", "--output", "json"])).await;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        used = v["rows"][0]["gpu_milli_seconds"].as_u64().unwrap_or(0);
        if used >= 8_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(used >= 8_000, "the running job's usage grows: {used}");
    let out = ask(base(&["--output", "json"])).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0]["queue"], "default");
    // 8 GPUs for at least a second: 8,000 milli-GPU·s or more.
    let gpu = rows[0]["gpu_milli_seconds"].as_u64().expect("a number");
    assert!(gpu >= 8_000, "{v}");
    // By job: the job still running, with what it used so far.
    let out = ask(base(&["--by", "job", "--output", "json"])).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let jobs = v["rows"].as_array().expect("rows");
    assert_eq!(jobs.len(), 1, "{v}");
    assert_eq!(jobs[0]["job"], "default/train-0");
    assert_eq!(jobs[0]["running"], true);
    assert!(jobs[0].get("end_s").is_none(), "{v}");
    assert!(jobs[0]["gpu_milli_seconds"].as_u64() >= Some(8_000), "{v}");
    let out = ask(base(&["--by", "job"])).await;
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table
        .lines()
        .find(|l| l.contains("default/train-0"))
        .unwrap_or_else(|| panic!("no row for the running job in\n{table}"));
    assert!(row.contains(" running "), "{row}");
    child.kill().await.expect("killed");
}

#[test]
fn usage_without_a_source_says_how_to_use_each_and_an_unreachable_server_names_the_store() {
    let out = trainyard(&["usage"]);
    let err = String::from_utf8_lossy(&out.stderr);
    expect_test::expect![[r#"
        error: trainyard usage needs where the usage history is:
          --server URL  a running scheduler's /usage, with the hour still open and the jobs still running;
                        for the leader in the cluster (docs/persistence.md, "Accounting"):
                          kubectl -n trainyard-system port-forward pod/$(kubectl -n trainyard-system get lease trainyard -o jsonpath='{.spec.holderIdentity}') 8080 &
                          trainyard usage --server http://127.0.0.1:8080
          --store PATH  a store file: the scheduler's service.store.path (a copy, or a stopped replica's)
          --server unix:///tmp/trainyard-api.sock  the scheduler's gRPC API: each queue's time-decayed usage now
                        (also taken from TRAINYARD_SERVER when it is set)
    "#]]
    .assert_eq(&err);
    let port = free_port();
    let out = trainyard(&["usage", "--server", &format!("http://127.0.0.1:{port}")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("? Its store file can be read with --store PATH instead"),
        "{err}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("none.redb");
    let out = trainyard(&["usage", "--store", missing.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a running scheduler is asked with --server URL instead"),
        "{err}"
    );
}
