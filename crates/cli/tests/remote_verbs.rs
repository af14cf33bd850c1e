//! The verbs that ask the running scheduler, end to end: `trainyard
//! serve`'s service (in-process) against the test API server, its gRPC
//! API on a Unix socket and on loopback, and the real `trainyard` binary
//! run for each verb; its output checked against the API's own answers
//! (our tonic client). Also: `trainyard snapshot` replayed by `trainyard
//! schedule`, the errors (scheduler unreachable, job not found), and the
//! binary as the kubectl plugin `kubectl-trainyard` (with kubectl when it
//! is installed; skipped with the reason when not, a failure under
//! `TRAINYARD_REQUIRE_TOOLS`). And the verbs over TLS against the API
//! with security on (`support::secure`, as `crates/api/tests/security.rs`):
//! tokens from `--token`, `TRAINYARD_TOKEN` and a kubeconfig user, RBAC
//! per namespace, no token, a CA that did not sign the certificate.

mod remote_common;
#[path = "../../api/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use expect_test::expect;
use remote_common::{Said, bin, run_program, stable};
use support::{Running, node, pod, quiet_after_run, start_cluster, start_service, unix_channel};
use trainyard_api::pb;
use trainyard_api::pb::scheduler_client::SchedulerClient;

type Rpc = SchedulerClient<tonic::transport::Channel>;

/// `trainyard ARGS --server unix://SOCKET`, which must succeed.
async fn ok(socket: &Path, args: &[&str]) -> Said {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.push("--server".into());
    all.push(format!("unix://{}", socket.display()));
    let said = run_program(bin(), all, vec![]).await;
    assert!(
        said.ok,
        "trainyard {args:?} failed:\n{}{}",
        said.stdout, said.stderr
    );
    said
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_verb_answers_as_the_api_does() {
    let (_server, client) = start_cluster().await;
    node(&client, "n1", 8).await;
    pod(&client, "run", 4).await;
    pod(&client, "wait", 6).await;
    let running = start_service(&client).await;
    let socket = running.socket.clone();
    quiet_after_run(&running.view).await;
    let mut rpc = SchedulerClient::new(unix_channel(socket.clone()).await);

    queues(&running, &mut rpc).await;
    jobs(&running, &mut rpc).await;
    explain(&running, &mut rpc).await;
    forecast(&running, &mut rpc).await;
    whatif_and_watch(&running).await;
    snapshot_and_usage(&running).await;

    // Errors say what to do: a job not found, with the closest names.
    let said = run_program(
        bin(),
        [
            "explain",
            "ml/waitt",
            "--server",
            &format!("unix://{}", socket.display()),
        ]
        .map(String::from)
        .to_vec(),
        vec![],
    )
    .await;
    assert!(!said.ok);
    expect![[r#"
        error: no job ml/waitt in the scheduler's latest cycle; did you mean ml/wait?
    "#]]
    .assert_eq(&said.stderr);

    // TRAINYARD_SERVER, over TCP.
    let env = vec![(
        "TRAINYARD_SERVER".to_string(),
        format!("http://127.0.0.1:{}", running.port),
    )];
    let said = run_program(
        bin(),
        vec!["jobs".into(), "-n".into(), "ml".into()],
        env.clone(),
    )
    .await;
    assert!(said.ok, "{}", said.stderr);
    assert!(said.stdout.starts_with("NAME  QUEUE"), "{}", said.stdout);

    // As the kubectl plugin.
    plugin(env).await;

    running.stop().await;

    // The scheduler gone: where it was looked for, and what to do.
    let said = run_program(
        bin(),
        [
            "queues",
            "--server",
            &format!("unix://{}", socket.display()),
        ]
        .map(String::from)
        .to_vec(),
        vec![],
    )
    .await;
    assert!(!said.ok);
    assert_eq!(
        said.stderr,
        format!(
            "error: cannot reach the scheduler at unix://{}: No such file or directory (os error 2) (is `trainyard serve` running? pass --server or set TRAINYARD_SERVER)\n",
            socket.display()
        )
    );
}

/// queues: the table, and JSON/YAML with the API's fields.
async fn queues(running: &Running, rpc: &mut Rpc) {
    let socket = running.socket.as_path();
    // queues: the table, and JSON/YAML with the API's fields.
    let said = ok(socket, &["queues"]).await;
    expect![[r#"
        QUEUE    WEIGHT  RUNNING  PENDING  RESOURCE        QUOTA  LIMIT  FAIR SHARE  ALLOCATED  PENDING DEMAND  USAGE (H)
        default       1        1        1  nvidia.com/gpu      0      -           8          4               6        0.0
    "#]]
    .assert_eq(&stable(&said.stdout));
    let api = rpc
        .list_queues(pb::ListQueuesRequest {})
        .await
        .expect("queues")
        .into_inner();
    let json: serde_json::Value =
        serde_json::from_str(&ok(socket, &["queues", "-o", "json"]).await.stdout).expect("JSON");
    let yaml: serde_json::Value =
        serde_saphyr::from_str(&ok(socket, &["queues", "-o", "yaml"]).await.stdout).expect("YAML");
    for out in [&json, &yaml] {
        let paths: Vec<&str> = out["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .filter_map(|q| q["path"].as_str())
            .collect();
        let want: Vec<&str> = api.queues.iter().map(|q| q.path.as_str()).collect();
        assert_eq!(paths, want);
        let gpu = &out["queues"][0]["resources"][0];
        assert_eq!(gpu["resource"], "nvidia.com/gpu");
        assert_eq!(gpu["allocated"], "4000", "{out}");
        assert_eq!(gpu["limit"]["unlimited"], true);
    }
}

/// jobs: every namespace, one, a state, a queue, a user; none found.
async fn jobs(running: &Running, rpc: &mut Rpc) {
    let socket = running.socket.as_path();
    // jobs: every namespace, one, a state, a queue, a user; none found.
    let said = ok(socket, &["jobs", "-A"]).await;
    expect![[r#"
        NAMESPACE  NAME  QUEUE    STATE    PODS  GPUS  AGE  REASON
        ml         run   default  Running  1/1   4/4   AGE   -
        ml         wait  default  Pending  0/1   0/6   AGE   Unschedulable
    "#]]
    .assert_eq(&stable(&said.stdout));
    let said = ok(
        socket,
        &["jobs", "-n", "ml", "--state", "pending", "-o", "json"],
    )
    .await;
    let json: serde_json::Value = serde_json::from_str(&said.stdout).expect("JSON");
    let api = rpc
        .list_jobs(pb::ListJobsRequest {
            namespace: "ml".into(),
            state: pb::JobState::Pending as i32,
            ..Default::default()
        })
        .await
        .expect("jobs")
        .into_inner();
    assert_eq!(json["jobs"].as_array().map(Vec::len), Some(api.jobs.len()));
    assert_eq!(json["jobs"][0]["name"], "wait");
    assert_eq!(json["jobs"][0]["state"], "JOB_STATE_PENDING");
    assert_eq!(json["jobs"][0]["reason"], api.jobs[0].reason.as_str());
    let said = ok(
        socket,
        &[
            "jobs", "-A", "--queue", "default", "--user", "ml", "--state", "running",
        ],
    )
    .await;
    assert_eq!(
        said.stdout
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
            .collect::<Vec<_>>(),
        ["run"]
    );
    let said = ok(socket, &["jobs", "-n", "elsewhere"]).await;
    assert_eq!(
        (said.stdout.as_str(), said.stderr.as_str()),
        ("", "No jobs found in elsewhere namespace.\n")
    );
}

/// explain: readable, and the API's answer as JSON.
/// `trainyard forecast`: the API's answer, as a table and as JSON; a
/// running job needs none; a bad horizon is refused before any call.
async fn forecast(running: &Running, rpc: &mut Rpc) {
    let socket = running.socket.as_path();
    let api = rpc
        .forecast_start(pb::ForecastStartRequest {
            job: Some(pb::forecast_start_request::Job::Existing(
                pb::ExplainJobRequest {
                    namespace: "ml".into(),
                    name: "wait".into(),
                },
            )),
            horizon_seconds: 3600,
        })
        .await
        .expect("forecast")
        .into_inner();
    assert_eq!(api.job, "ml/wait");
    assert!(!api.running);
    let said = ok(
        socket,
        &["forecast", "ml/wait", "--horizon", "1h", "-o", "json"],
    )
    .await;
    let json: serde_json::Value = serde_json::from_str(&said.stdout).expect("JSON");
    assert_eq!(json["job"], "ml/wait");
    assert_eq!(json["starts"], api.starts);
    // Times are absolute, from the cycle each answer was made on; a cycle
    // may run between the two calls, so compare them to their cycle.
    let api_now = api.cycle.as_ref().map_or(0, |c| c.time_ms);
    let num = |v: &serde_json::Value| v.as_str().and_then(|s| s.parse::<i64>().ok());
    let cli_now = num(&json["cycle"]["timeMs"]).expect("cycle time");
    assert_eq!(api.horizon_ms - api_now, 3_600_000);
    assert_eq!(
        num(&json["horizonMs"]).map(|h| h - cli_now),
        Some(3_600_000)
    );
    let api_cycle = api.cycle.as_ref().map_or(0, |c| c.number);
    if num(&json["cycle"]["number"]) == i64::try_from(api_cycle).ok() {
        assert_eq!(json["p50Ms"], api.p50_ms.to_string());
    } else if api.starts {
        assert!(num(&json["p50Ms"]).is_some_and(|p| p >= cli_now), "{json}");
    }
    let said = ok(socket, &["forecast", "wait", "-n", "ml", "--horizon", "1h"]).await;
    assert!(said.stdout.starts_with("Job:"), "{}", said.stdout);
    assert!(said.stdout.contains("ml/wait"), "{}", said.stdout);
    let starts = if api.starts {
        "(in "
    } else {
        "not within the look-ahead"
    };
    let line = said.stdout.lines().find(|l| l.starts_with("Starts:"));
    assert!(line.is_some_and(|l| l.contains(starts)), "{}", said.stdout);
    let said = ok(socket, &["forecast", "ml/run"]).await;
    assert!(
        said.stdout.contains("running already: nothing to forecast"),
        "{}",
        said.stdout
    );
    let said = run_program(
        bin(),
        [
            "forecast",
            "ml/wait",
            "--horizon",
            "soon",
            "--server",
            &format!("unix://{}", socket.display()),
        ]
        .map(String::from)
        .to_vec(),
        vec![],
    )
    .await;
    assert!(!said.ok);
    assert!(said.stderr.contains("--horizon"), "{}", said.stderr);
}

async fn explain(running: &Running, rpc: &mut Rpc) {
    let socket = running.socket.as_path();
    // explain: readable, and the API's answer as JSON.
    let said = ok(socket, &["explain", "ml/wait"]).await;
    expect![[r#"
        Job:     ml/wait
        Queue:   default
        State:   Pending (0/1 pods bound, minimum 1; 0/6 GPUs)
        Reason:  Unschedulable
        Cause:   room: no node has room for it
        Message: gang needs 6 × nvidia.com/gpu in 1 pod(s); 0/1 nodes fit: 1 insufficient nvidia.com/gpu
        Nodes:   0/1 nodes are available: 1 insufficient nvidia.com/gpu.
        Cycle:   N at TIME

        Nodes refused (0 of 1 fit):
          NODES  REASON
              1  insufficient nvidia.com/gpu

        To fit:
          - room for pod ml/wait: 0 of the 1 pods the gang needs were placed before it did not fit
          - more free nvidia.com/gpu on a node (1 nodes have too little for pod ml/wait), or ask for less nvidia.com/gpu per pod
    "#]]
    .assert_eq(&stable(&said.stdout));
    let said = ok(socket, &["explain", "wait", "-n", "ml", "-o", "json"]).await;
    let json: serde_json::Value = serde_json::from_str(&said.stdout).expect("JSON");
    let api = rpc
        .explain_job(pb::ExplainJobRequest {
            namespace: "ml".into(),
            name: "wait".into(),
        })
        .await
        .expect("explained")
        .into_inner();
    assert_eq!(json["summary"], api.summary.as_str());
    assert_eq!(json["cause"], "CAUSE_ROOM");
    assert_eq!(
        json["toFit"].as_array().map(Vec::len),
        Some(api.to_fit.len())
    );
}

/// whatif (resized, and from a file) and watch.
async fn whatif_and_watch(running: &Running) {
    let socket = running.socket.as_path();
    // whatif: resized, and from a file; nothing is created.
    let said = ok(socket, &["whatif", "ml/wait", "--gpus", "4"]).await;
    expect![[r#"
        ml/wait would start now.

        Binds:
          POD      NODE  GPUS
          ml/wait  n1    4,5,6,7

        (computed on a copy of cycle N at TIME; nothing was changed)
    "#]]
    .assert_eq(&stable(&said.stdout));
    let file = running.dir.path().join("try.yaml");
    std::fs::write(&file, "apiVersion: v1\nkind: Pod\nmetadata: {name: try, namespace: ml}\nspec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: '2'}}}]}\n").expect("written");
    let said = ok(
        socket,
        &["whatif", "-f", &file.display().to_string(), "-o", "yaml"],
    )
    .await;
    let yaml: serde_json::Value = serde_saphyr::from_str(&said.stdout).expect("YAML");
    assert_eq!(
        (yaml["job"].as_str(), yaml["fits"].as_bool()),
        (Some("ml/try"), Some(true)),
        "{}",
        said.stdout
    );
    let said = ok(socket, &["whatif", "ml/wait", "--gpus", "16"]).await;
    assert!(
        said.stdout.starts_with("ml/wait would wait: "),
        "{}",
        said.stdout
    );

    // watch: the latest cycle's reasons, as lines and as JSON.
    let said = ok(socket, &["watch", "--cycles", "1"]).await;
    expect![[r#"
        TIME cycle N pending ml/wait (queue default) Unschedulable: gang needs 6 × nvidia.com/gpu in 1 pod(s); 0/1 nodes fit: 1 insufficient nvidia.com/gpu
    "#]]
    .assert_eq(&stable(&said.stdout));
    let said = ok(socket, &["watch", "--cycles", "1", "-o", "json"]).await;
    let json: serde_json::Value = serde_json::from_str(said.stdout.trim()).expect("one JSON line");
    assert_eq!(json["reasons"][0]["job"], "ml/wait");
}

/// snapshot replayed by `trainyard schedule`; usage against the API.
async fn snapshot_and_usage(running: &Running) {
    let socket = running.socket.as_path();
    // snapshot, replayed by `trainyard schedule` as it says: the live
    // cycle's decisions (nothing in flight, so the same).
    let snap = running.dir.path().join("snap.yaml");
    let config = running.dir.path().join("config.yaml");
    let said = ok(
        socket,
        &[
            "snapshot",
            "-o",
            &snap.display().to_string(),
            "--config-out",
            &config.display().to_string(),
        ],
    )
    .await;
    let replay = said
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("replay: trainyard "))
        .expect("says how to replay");
    let mut args: Vec<String> = replay.split(' ').map(str::to_string).collect();
    args.extend(["-o".into(), "json".into()]);
    let replayed = run_program(bin(), args, vec![]).await;
    assert!(replayed.ok, "{}", replayed.stderr);
    let decisions: serde_json::Value = serde_json::from_str(&replayed.stdout).expect("JSON");
    let latest = running.view.latest().borrow().clone().expect("a cycle");
    assert!(
        latest.decisions.binds.is_empty() && latest.writes_in_flight == 0,
        "still quiet"
    );
    assert_eq!(decisions["binds"], serde_json::json!([]));
    assert_eq!(
        decisions["pending"],
        serde_json::to_value(&latest.decisions.pending).expect("pending as JSON")
    );

    // usage against the API: the queues' time-decayed usage now.
    let said = ok(socket, &["usage"]).await;
    expect![[r#"
        time-decayed usage (what the fair share weighs) at cycle N, TIME
        QUEUE    GPU-HOURS  CPU CORE-HOURS  MEMORY GIB-HOURS  GPUS NOW  CPU NOW  MEMORY NOW
        default        0.0             0.0               0.0         4        0           0
    "#]]
    .assert_eq(&stable(&said.stdout));
    let said = ok(socket, &["usage", "-o", "json"]).await;
    let json: serde_json::Value = serde_json::from_str(&said.stdout).expect("JSON");
    assert_eq!(json["queues"][0]["path"], "default");
}

/// `kubectl-trainyard` (a link to the binary) behaves as `trainyard`,
/// and says `kubectl trainyard` in its help; `kubectl trainyard jobs`
/// runs it when kubectl is installed.
async fn plugin(env: Vec<(String, String)>) {
    let dir = tempfile::tempdir().expect("a plugin dir");
    let link = dir.path().join("kubectl-trainyard");
    std::os::unix::fs::symlink(bin(), &link).expect("a link");
    let said = run_program(link.clone(), vec!["jobs".into(), "--help".into()], vec![]).await;
    assert!(said.ok, "{}", said.stderr);
    assert!(
        said.stdout
            .contains("Usage: kubectl trainyard jobs [OPTIONS]"),
        "{}",
        said.stdout
    );
    let said = run_program(link, ["jobs", "-A"].map(String::from).to_vec(), env.clone()).await;
    assert!(said.ok, "{}", said.stderr);
    assert!(said.stdout.contains("ml         wait"), "{}", said.stdout);

    let Some(kubectl) = kubectl() else {
        assert!(
            std::env::var_os("TRAINYARD_REQUIRE_TOOLS").is_none(),
            "TRAINYARD_REQUIRE_TOOLS is set but kubectl is not installed"
        );
        eprintln!(
            "SKIPPED: `kubectl trainyard` (kubectl is not on PATH nor in the Python user base; scripts/install-test-tools.sh installs it)"
        );
        return;
    };
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut env = env;
    env.push(("PATH".into(), path));
    let said = run_program(
        kubectl,
        ["trainyard", "jobs", "-A"].map(String::from).to_vec(),
        env,
    )
    .await;
    assert!(
        said.ok,
        "kubectl trainyard jobs -A:\n{}{}",
        said.stdout, said.stderr
    );
    assert!(said.stdout.contains("ml         wait"), "{}", said.stdout);
}

/// kubectl on PATH, else in the Python user base's bin (where
/// scripts/install-test-tools.sh puts it).
fn kubectl() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("kubectl"))
            .find(|k| k.is_file())
    });
    on_path.or_else(|| {
        let base = Command::new("python3")
            .args(["-m", "site", "--user-base"])
            .output()
            .ok()?;
        let k = PathBuf::from(String::from_utf8_lossy(&base.stdout).trim()).join("bin/kubectl");
        k.is_file().then_some(k)
    })
}
