//! The dashboard's HTTP side end to end, without a browser: the page's
//! files and `/ui/api/*` on the API's TCP port of `trainyard serve`'s
//! service (in-process, over the test API server), read over plain
//! HTTP/1.1 as a browser sends it, each answer compared with the RPC's
//! own (gRPC, on the same service); the errors; the event stream.
//! The browser's view of the same is `ui_browser.rs`.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{node, pod, quiet_after_run, start_cluster, start_service, unix_channel};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use trainyard_api::pb;
use trainyard_api::pb::scheduler_client::SchedulerClient;

type Rpc = SchedulerClient<tonic::transport::Channel>;

/// An HTTP/1.1 answer: status, headers (lower-case names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// `GET path` on 127.0.0.1:`port` over HTTP/1.1, read to the end.
async fn get(port: u16, path: &str) -> Answer {
    send(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
        b"",
    )
    .await
}

/// `head` (a request line and headers) and `body` sent to
/// 127.0.0.1:`port`, the answer read to the end.
async fn send(port: u16, head: &str, body: &[u8]) -> Answer {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let req = format!("{head}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    s.write_all(body).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut raw))
        .await
        .expect("an answer within 30 s")
        .expect("read");
    let text = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v == "chunked");
    let body = if chunked {
        unchunk(body)
    } else {
        body.to_string()
    };
    Answer {
        status,
        headers,
        body,
    }
}

/// A chunked body's content.
fn unchunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_answers_as_the_rpcs_do() {
    let (_server, client) = start_cluster().await;
    node(&client, "n1", 8).await;
    pod(&client, "run", 4).await;
    pod(&client, "wait", 6).await;
    let running = start_service(&client).await;
    let port = running.port;
    let mut rpc = SchedulerClient::new(unix_channel(running.socket.clone()).await);
    quiet_after_run(&running.view).await;

    page_and_queues(port, &mut rpc).await;
    jobs_and_a_job(port, &mut rpc).await;
    the_map_and_errors(port).await;
    who_is_trusted(port).await;

    // The stream: a cycle event with the latest cycle, as a browser reads it.
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    s.write_all(
        b"GET /ui/api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n",
    )
    .await
    .expect("write");
    let mut lines = BufReader::new(s).lines();
    let mut event = None;
    let read = async {
        while let Some(l) = lines.next_line().await.expect("read") {
            if let Some(data) = l.strip_prefix("data: ") {
                event = Some(serde_json::from_str::<Value>(data).expect("JSON data"));
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("an event within 30 s");
    let event = event.expect("a cycle event");
    assert!(event["cycle"]["number"].as_u64().is_some_and(|n| n > 0));
    assert_eq!(event["pending"], 1);

    // The stream ends when the server stops (below).
    let reading = tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    // The gRPC API still answers on the same port (HTTP/2).
    let tcp = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    SchedulerClient::new(tcp)
        .list_queues(pb::ListQueuesRequest {})
        .await
        .expect("gRPC on the dashboard's port");
    running.stop().await;
    tokio::time::timeout(Duration::from_secs(10), reading)
        .await
        .expect("the event stream ends when the server stops")
        .expect("read");
}

/// The page and its files (no token on loopback); the queues against ListQueues.
async fn page_and_queues(port: u16, rpc: &mut Rpc) {
    // The page and its files, without a token on loopback.
    let page = get(port, "/ui").await;
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").starts_with("text/html"));
    assert!(page.body.contains("<html"), "{}", page.body);
    assert!(
        !page.body.contains("http://") && !page.body.contains("https://"),
        "no external resource: {}",
        page.body
    );
    assert!(
        page.header("content-security-policy")
            .contains("default-src 'self'")
    );
    let script = get(port, "/ui/app.js").await;
    assert_eq!(script.status, 200);
    assert!(script.header("content-type").starts_with("text/javascript"));

    // Queues: ListQueues' queues, field by field.
    let api = rpc
        .list_queues(pb::ListQueuesRequest {})
        .await
        .expect("queues")
        .into_inner();
    let ui = get(port, "/ui/api/queues").await.json();
    let q = &ui["queues"][0];
    assert_eq!(q["name"], api.queues[0].name.as_str());
    let gpu = |r: &Value| r["resource"] == "nvidia.com/gpu";
    let r = q["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| gpu(r)))
        .expect("GPUs");
    let a = api.queues[0]
        .resources
        .iter()
        .find(|r| r.resource == "nvidia.com/gpu")
        .expect("GPUs");
    assert_eq!(r["allocated"], a.allocated);
    assert_eq!(r["allocated"], 4000);
    assert_eq!(r["pendingDemand"], a.pending_demand);
    assert_eq!(r["fairShare"], a.fair_share);
    assert!(
        ui["history"]["times"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(
        ui["history"]["queues"]["default"]["nvidia.com/gpu"]["allocated"]
            .as_array()
            .and_then(|s| s.last().cloned()),
        Some(Value::from(4000))
    );
    assert_eq!(ui["usage"], Value::Null, "no store, no usage history");
}

/// Jobs against ListJobs, a job against ExplainJob, a what-if against WhatIf.
async fn jobs_and_a_job(port: u16, rpc: &mut Rpc) {
    // Jobs: ListJobs' jobs, and where the running one is.
    let api = rpc
        .list_jobs(pb::ListJobsRequest::default())
        .await
        .expect("jobs")
        .into_inner();
    let ui = get(port, "/ui/api/jobs").await.json();
    let jobs = ui["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), api.jobs.len());
    for (u, a) in jobs.iter().zip(&api.jobs) {
        assert_eq!(u["name"], a.name.as_str());
        assert_eq!(
            u["state"],
            pb::JobState::try_from(a.state)
                .expect("a state")
                .as_str_name()
        );
        assert_eq!(u["reason"], a.reason.as_str());
        assert_eq!(u["message"], a.message.as_str());
    }
    let run = jobs.iter().find(|j| j["name"] == "run").expect("run");
    assert_eq!(run["placement"]["nodes"][0], "n1");
    assert_eq!(run["placement"]["gpuMilli"], 4000);
    let pending = get(port, "/ui/api/jobs?state=pending").await.json();
    assert_eq!(pending["jobs"].as_array().map(Vec::len), Some(1));
    assert_eq!(pending["jobs"][0]["name"], "wait");

    // A job: ExplainJob's answer, its pods, its events.
    let api = rpc
        .explain_job(pb::ExplainJobRequest {
            namespace: "ml".into(),
            name: "wait".into(),
        })
        .await
        .expect("explain")
        .into_inner();
    let ui = get(port, "/ui/api/job?namespace=ml&name=wait").await.json();
    assert_eq!(ui["explain"]["summary"], api.summary.as_str());
    assert_eq!(ui["explain"]["nodesTotal"], api.nodes_total);
    assert_eq!(ui["pods"][0]["state"], "Pending");
    assert!(
        ui["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["kind"] == "Pending")),
        "{}",
        ui["events"]
    );
    let ui = get(port, "/ui/api/job?namespace=ml&name=run").await.json();
    assert_eq!(ui["explain"], Value::Null);
    assert_eq!(ui["pods"][0]["node"], "n1");
    assert!(
        ui["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["kind"] == "Bound")),
        "{}",
        ui["events"]
    );

    // What-if: WhatIf's answer for the job resized.
    let api = rpc
        .what_if(pb::WhatIfRequest {
            job: Some(pb::what_if_request::Job::Resize(pb::Resize {
                namespace: "ml".into(),
                name: "wait".into(),
                pods: 1,
                min_member: 0,
                gpus_per_pod: 4,
            })),
        })
        .await
        .expect("what-if")
        .into_inner();
    let ui = get(
        port,
        "/ui/api/whatif?namespace=ml&name=wait&pods=1&gpusPerPod=4",
    )
    .await
    .json();
    assert_eq!(ui["fits"], api.fits);
    assert!(api.fits, "4 GPUs fit beside run's 4");
    assert_eq!(ui["binds"][0]["node"], "n1");
}

/// The GPU map; errors named, as JSON, with the HTTP status of the gRPC code.
async fn the_map_and_errors(port: u16) {
    // The GPU map: run's four devices, the rest free; wait fits nowhere.
    let ui = get(port, "/ui/api/gpus?job=ml/wait").await.json();
    assert_eq!(ui["nodes"][0]["name"], "n1");
    let devices = ui["nodes"][0]["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 8);
    let held = devices
        .iter()
        .filter(|d| d.as_array().is_some_and(|h| !h.is_empty()))
        .count();
    assert_eq!(held, 4);
    assert_eq!(ui["jobs"][0], "ml/run");
    assert_eq!(ui["fit"]["nodes"], serde_json::json!({}));

    // Errors: named, as JSON, with the HTTP status of the gRPC code.
    let missing = get(port, "/ui/api/job?namespace=ml&name=waitt").await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json()["error"],
        "no job ml/waitt in the scheduler's latest cycle; did you mean ml/wait?"
    );
    let bad = get(port, "/ui/api/jobs?state=sleeping").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["code"], "INVALID_ARGUMENT");
    let unknown = get(port, "/ui/api/jobs?colour=red").await;
    assert_eq!(
        unknown.json()["error"],
        "/ui/api/jobs: unknown parameter colour; expected queue, namespace, user, state"
    );
    assert_eq!(get(port, "/ui/api/nope").await.status, 404);

    // A job with nothing pending: the map, without a fit.
    let ui = get(port, "/ui/api/gpus?job=ml/run").await;
    assert_eq!(ui.status, 200);
    assert_eq!(ui.json()["fit"], Value::Null);
}

/// What a trusted listener answers, and that gRPC stays HTTP/2.
async fn who_is_trusted(port: u16) {
    // The trusted loopback listener answers loopback names only, and no
    // page of another site (DNS rebinding, cross-site reads).
    let rebound = send(
        port,
        "GET /ui/api/jobs HTTP/1.1\r\nHost: attacker.example:50051\r\n",
        b"",
    )
    .await;
    assert_eq!(rebound.status, 403, "{}", rebound.body);
    assert!(rebound.body.contains("not for attacker.example:50051"));
    let cross = send(
        port,
        "GET /ui/api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nSec-Fetch-Site: cross-site\r\n",
        b"",
    )
    .await;
    assert_eq!(cross.status, 403, "{}", cross.body);
    assert_eq!(
        send(
            port,
            "GET /ui/api/whoami HTTP/1.1\r\nHost: localhost:1\r\n",
            b""
        )
        .await
        .status,
        200
    );
    // gRPC is HTTP/2 only: over HTTP/1.1 an RPC is refused.
    let rpc_over_http1 = send(
        port,
        "POST /trainyard.v1alpha1.Scheduler/ListQueues HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/grpc\r\nContent-Length: 5\r\n",
        &[0; 5],
    )
    .await;
    assert_eq!(rpc_over_http1.header("grpc-status"), "12", "UNIMPLEMENTED");
}

/// With a store, the queues' usage per hour comes from its accounting
/// (`/usage`'s): the running job's GPU time is in the last hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_usage_history_comes_from_the_store() {
    let (_server, client) = start_cluster().await;
    node(&client, "n1", 8).await;
    pod(&client, "run", 4).await;
    pod(&client, "wait", 6).await;
    let store = tempfile::tempdir().expect("a scratch dir");
    let path = store.path().join("trainyard.redb").display().to_string();
    let running = support::start_service_tuned(&client, |s| s.service.store.path = path).await;
    quiet_after_run(&running.view).await;
    // Accounting counts whole seconds: two of them run first (cycles, not
    // a sleep, tell the time).
    support::cycle_until(&running.view, "run started 2 s ago", |c| {
        c.snapshot
            .jobs
            .iter()
            .find(|j| j.id == "ml/run")
            .and_then(|j| j.tasks[0].started)
            .is_some_and(|t| c.now.0 - t.0 >= 2_000)
    })
    .await;
    let ui = get(running.port, "/ui/api/queues").await.json();
    let hours = ui["usage"]["hours"].as_array().expect("hours");
    assert_eq!(hours.len(), 6, "{}", ui["usage"]);
    for pair in hours.windows(2) {
        assert_eq!(pair[0]["toS"], pair[1]["fromS"]);
        assert_eq!(
            pair[1]["toS"]
                .as_i64()
                .zip(pair[1]["fromS"].as_i64())
                .map(|(t, f)| t - f),
            Some(3600)
        );
    }
    let last = hours[5]["queues"]["default"]["gpuHours"]
        .as_f64()
        .expect("the default queue's GPU-hours");
    assert!(last > 0.0, "run's 4 GPUs held for a while: {}", ui["usage"]);
    running.stop().await;
}
