//! The service's observability as an operator's tools see it: the real
//! `/metrics` exposition of a running service (against the test API
//! server, over plain HTTP on `service.httpAddress`) is accepted by
//! `promtool check metrics` and holds the metrics docs/operations.md
//! describes, with the values of what the service did; `/healthz` and
//! `/readyz` answer 200 once it runs; the OpenMetrics format is served on
//! request. And a changed settings file is reloaded when valid and refused
//! (and counted) when not.
//!
//! Without `promtool` (Debian's `prometheus` package;
//! `scripts/install-test-tools.sh` unpacks it) the exposition test prints
//! `SKIPPED: ...` and returns; with `TRAINYARD_REQUIRE_TOOLS` set it fails.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::sync::watch;
use trainyard_serve::metrics::Metrics;
use trainyard_serve::{Progress, Settings};

// ---------------------------------------------------------------- tools

/// `promtool` if it runs (on PATH or in the user bin dir the install
/// script fills); else prints why the caller skips (or fails when tools
/// are required) and gives `None`.
fn promtool_or_skip(test: &str) -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("promtool")];
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".local/bin/promtool"));
    }
    for c in candidates {
        let ok = Command::new(&c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(c);
        }
    }
    let reason = format!(
        "promtool not found ({test}; install it with scripts/install-test-tools.sh, which unpacks Debian's prometheus package)"
    );
    assert!(
        std::env::var_os("TRAINYARD_REQUIRE_TOOLS").is_none(),
        "TRAINYARD_REQUIRE_TOOLS is set but {reason}"
    );
    println!("SKIPPED: {reason}");
    eprintln!("SKIPPED: {reason}");
    None
}

/// `promtool check metrics` on `body` (its stdin): the exit status and
/// what it printed.
fn check_metrics(promtool: &Path, body: &str) -> (bool, String) {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("promtool reads the exposition");
    let out = child.wait_with_output().expect("promtool ends");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

// ---------------------------------------------------------------- HTTP

/// A free port on 127.0.0.1 (bound, read and let go).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

/// `GET path` over HTTP/1.1 (`Connection: close`), on a blocking thread.
async fn get(port: u16, path: &str, accept: Option<&str>) -> Answer {
    let path = path.to_string();
    let accept = accept.map(str::to_string);
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connects");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let accept = accept
            .map(|a| format!("Accept: {a}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{accept}Connection: close\r\n\r\n"
        )
        .expect("request sent");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).expect("answer read");
        let raw = String::from_utf8(raw).expect("UTF-8 answer");
        let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
        let mut lines = head.lines();
        let status_line = lines.next().expect("status line");
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("status line {status_line:?}"));
        let headers: BTreeMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        if let Some(len) = headers.get("content-length") {
            assert_eq!(len.parse::<usize>().ok(), Some(body.len()), "{path}");
        }
        Answer {
            status,
            headers,
            body: body.to_string(),
        }
    })
    .await
    .expect("the HTTP thread")
}

// ---------------------------------------------------------------- exposition

/// One sample: metric name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a text exposition (comments skipped); label values
/// unescaped.
fn samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => panic!("sample line {line:?}"),
        };
        let mut labels = BTreeMap::new();
        let rest = if let Some(body) = rest.strip_prefix('{') {
            let mut chars = body.char_indices();
            let mut key = String::new();
            let end = loop {
                let (i, c) = chars.next().unwrap_or_else(|| panic!("{line:?}"));
                match c {
                    '}' => break i,
                    ',' | ' ' => {}
                    '=' => {
                        assert_eq!(chars.next().map(|x| x.1), Some('"'), "{line:?}");
                        let mut value = String::new();
                        loop {
                            match chars.next().map(|x| x.1) {
                                Some('\\') => match chars.next().map(|x| x.1) {
                                    Some('n') => value.push('\n'),
                                    Some(c) => value.push(c),
                                    None => panic!("{line:?}"),
                                },
                                Some('"') => break,
                                Some(c) => value.push(c),
                                None => panic!("{line:?}"),
                            }
                        }
                        labels.insert(std::mem::take(&mut key), value);
                    }
                    c => key.push(c),
                }
            };
            &body[end + 1..]
        } else {
            rest
        };
        let value = rest
            .split_whitespace()
            .next()
            .unwrap_or_else(|| panic!("no value: {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value of {line:?}")),
        };
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    out
}

/// The value of the sample `name` whose labels include `labels`; panics
/// naming what the exposition had when there is none or several.
fn value(all: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = all
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    match found.as_slice() {
        [one] => one.value,
        [] => panic!(
            "no sample {name}{labels:?}; the exposition has: {:?}",
            all.iter()
                .filter(|s| s.name == name)
                .map(|s| &s.labels)
                .collect::<Vec<_>>()
        ),
        many => panic!("{} samples {name}{labels:?}: {many:?}", many.len()),
    }
}

// ---------------------------------------------------------------- the service

struct Running {
    port: u16,
    progress: watch::Receiver<Progress>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The service with leader election (one replica: it leads), its HTTP
/// endpoints on a free port, its client's requests counted in its metrics.
fn start_observed(server: &trainyard_testapi::TestApiServer) -> Running {
    let metrics = Arc::new(Metrics::new());
    let config = kube::Config::new(server.url().parse().expect("url"));
    let client = trainyard_serve::client_for(config, metrics.clone()).expect("client");
    let port = free_port();
    let mut settings = fast_settings();
    settings.service.http_address = format!("127.0.0.1:{port}");
    let le = &mut settings.service.leader_election;
    le.enabled = true;
    le.identity = "observed-0".into();
    le.lease_namespace = "default".into();
    le.lease_duration_seconds = 3;
    le.renew_deadline_seconds = 2;
    le.retry_period_seconds = 1;
    let Spawned {
        progress,
        stop,
        task,
    } = spawn_service(client, settings, metrics, Default::default());
    Running {
        port,
        progress,
        stop,
        task,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_passes_promtool_and_holds_what_the_service_did() {
    let Some(promtool) = promtool_or_skip("the /metrics exposition test") else {
        return;
    };
    let (server, client) = server().await;
    cluster(&client).await;
    // Binds: 2 pods of 4 GPUs. Pending: 3 pods of 8 GPUs, on 16 GPUs of
    // which 8 are taken.
    gang(&client, "fits", "team", 2, 4).await;
    gang(&client, "too-big", "team", 3, 8).await;
    let mut svc = start_observed(&server);
    let done = until(
        &mut svc.progress,
        "the fitting gang's binds and a cycle that leaves the other pending",
        |p| p.leader && p.written.binds == 2 && p.pending == 1,
    )
    .await;

    // The service really leads through the Lease.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let holder = leases
        .get("trainyard")
        .await
        .expect("the Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("observed-0"));

    // Probes: synced and leading, so ready; the loop turns, so live.
    for path in ["/readyz", "/healthz"] {
        let a = get(svc.port, path, None).await;
        assert_eq!((a.status, a.body.as_str()), (200, "ok\n"), "{path}");
    }
    let a = get(svc.port, "/nope", None).await;
    assert_eq!(a.status, 404, "{}", a.body);
    // No store here: `/usage` says which setting keeps one.
    let a = get(svc.port, "/usage", None).await;
    assert_eq!(
        (a.status, a.body.as_str()),
        (
            404,
            format!("{}\n", trainyard_serve::http::NO_STORE).as_str()
        )
    );
    assert!(a.body.contains("set service.store.path"), "{}", a.body);

    // Prometheus' text format by default, and promtool accepts it.
    let a = get(svc.port, "/metrics", None).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.headers.get("content-type").map(String::as_str),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = a.body;
    let (ok, said) = check_metrics(&promtool, &text);
    assert!(
        ok && said.trim().is_empty(),
        "promtool check metrics refused the exposition:\n{said}\n--- exposition:\n{text}"
    );

    let all = samples(&text);
    let v = |name: &str, labels: &[(&str, &str)]| value(&all, name, labels);
    // Writes.
    assert!(v("trainyard_binds_total", &[]) >= done.written.binds as f64);
    assert_eq!(v("trainyard_binds_total", &[]), 2.0);
    assert!(
        !all.iter()
            .any(|s| s.name == "trainyard_bind_failures_total"),
        "no bind failed, so no failure series: {text}"
    );
    assert_eq!(
        v("trainyard_pod_scheduling_latency_seconds_count", &[]),
        2.0
    );
    assert!(v("trainyard_cycles_total", &[]) >= done.cycles as f64);
    assert_eq!(v("trainyard_events_dropped_total", &[]), 0.0);
    assert!(v("trainyard_writes_in_flight", &[]) >= 0.0);
    // Pending gangs by the core's reason: the one that does not fit.
    let pending: Vec<&Sample> = all
        .iter()
        .filter(|s| s.name == "trainyard_pending_gangs")
        .collect();
    assert_eq!(
        pending
            .iter()
            .map(|s| (s.labels["reason"].as_str(), s.value))
            .collect::<Vec<_>>(),
        [("Unschedulable", 1.0)],
        "{text}"
    );
    // The queue, per resource with its unit: quota 16 GPUs, 8 held, the
    // pending gang's 24 asked for.
    let gpu = [
        ("queue", "team"),
        ("resource", "nvidia.com/gpu"),
        ("unit", "device"),
    ];
    assert_eq!(v("trainyard_queue_quota", &gpu), 16.0);
    assert_eq!(v("trainyard_queue_allocated", &gpu), 8.0);
    assert_eq!(v("trainyard_queue_pending_demand", &gpu), 24.0);
    assert!(v("trainyard_queue_fair_share", &gpu) >= 8.0);
    let age = v(
        "trainyard_queue_oldest_pending_gang_age_seconds",
        &[("queue", "team")],
    );
    assert!((0.0..600.0).contains(&age), "age {age}");
    // No job ended on its own: no runtime for the estimate yet.
    assert_eq!(
        v("trainyard_queue_observed_runtimes", &[("queue", "team")]),
        0.0
    );
    // No running job has a walltime or an estimate: nothing is reserved.
    assert_eq!(
        v("trainyard_queue_reserved_gangs", &[("queue", "team")]),
        0.0
    );
    assert_eq!(v("trainyard_reserved_nodes", &[]), 0.0);
    // No running job has a walltime, so none is past it.
    assert_eq!(v("trainyard_jobs_past_walltime", &[]), 0.0);
    // Cycle phases: each observed once per cycle, the total above the core.
    let cycles = v("trainyard_cycles_total", &[]);
    for phase in ["snapshot", "schedule", "assume", "write", "total"] {
        let n = v(
            "trainyard_cycle_duration_seconds_count",
            &[("phase", phase)],
        );
        assert!(
            n >= cycles,
            "phase {phase}: {n} observations, {cycles} cycles"
        );
        let inf = v(
            "trainyard_cycle_duration_seconds_bucket",
            &[("phase", phase), ("le", "+Inf")],
        );
        assert_eq!(inf, n, "phase {phase}: +Inf bucket and count");
    }
    assert!(
        v(
            "trainyard_cycle_duration_seconds_sum",
            &[("phase", "total")]
        ) >= v(
            "trainyard_cycle_duration_seconds_sum",
            &[("phase", "schedule")]
        )
    );
    // API requests, by verb and resource as kube-apiserver names them.
    let binds = [("verb", "create"), ("resource", "pods/binding")];
    assert_eq!(
        v("trainyard_api_request_duration_seconds_count", &binds),
        2.0
    );
    assert_eq!(
        v(
            "trainyard_api_requests_total",
            &[
                ("verb", "create"),
                ("resource", "pods/binding"),
                ("code", "201")
            ]
        ),
        2.0
    );
    assert!(
        v(
            "trainyard_api_request_duration_seconds_count",
            &[("verb", "list"), ("resource", "pods")]
        ) >= 1.0
    );
    assert!(
        v(
            "trainyard_api_request_duration_seconds_count",
            &[("verb", "watch"), ("resource", "pods")]
        ) >= 1.0
    );
    // The Lease: looked for (404), then created by this replica.
    assert!(
        v(
            "trainyard_api_requests_total",
            &[("verb", "get"), ("resource", "leases"), ("code", "404")]
        ) >= 1.0
    );
    assert_eq!(
        v(
            "trainyard_api_requests_total",
            &[("verb", "create"), ("resource", "leases"), ("code", "201")]
        ),
        1.0
    );
    // Leader and build.
    assert_eq!(v("trainyard_leader", &[]), 1.0);
    assert_eq!(
        v(
            "trainyard_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );

    // OpenMetrics when asked for, ending in # EOF.
    let a = get(
        svc.port,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(
        a.headers
            .get("content-type")
            .is_some_and(|c| c.starts_with("application/openmetrics-text; version=1.0.0")),
        "{:?}",
        a.headers
    );
    assert!(a.body.ends_with("# EOF\n"), "{}", a.body);
    assert!(a.body.contains("# TYPE trainyard_binds counter\n"));
    assert!(a.body.contains("\ntrainyard_binds_total 2\n"));
    // promtool reads only the 0.0.4 text format: the OpenMetrics
    // exposition (counter families without `_total`) is what it refuses,
    // so the check above can fail.
    let (ok, said) = check_metrics(&promtool, &a.body);
    assert!(!ok, "promtool accepted the OpenMetrics body: {said}");

    svc.stop.send_replace(true);
    tokio::time::timeout(Duration::from_secs(10), &mut svc.task)
        .await
        .expect("the service stops")
        .expect("the service task");
    // On stop the Lease is let go (a standby would take over at once).
    let holder = leases
        .get("trainyard")
        .await
        .expect("the Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder, None, "the Lease is released on stop");
}

// ---------------------------------------------------------------- reload

/// Replaces `path`'s content at once (a new file renamed over it), as a
/// ConfigMap volume swaps its files: a reader never sees half a file.
fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).expect("written");
    std::fs::rename(&tmp, path).expect("renamed");
}

/// `trainyard_config_reloads_total{result}` in `metrics`' exposition (0
/// when the series is not there yet).
fn reloads(metrics: &Metrics, result: &str) -> f64 {
    samples(&metrics.prometheus_text())
        .iter()
        .find(|s| {
            s.name == "trainyard_config_reloads_total"
                && s.labels.get("result").map(String::as_str) == Some(result)
        })
        .map_or(0.0, |s| s.value)
}

/// Waits (polling the metrics, with a deadline) until `done` holds.
async fn until_metrics(metrics: &Metrics, what: &str, done: impl Fn(&Metrics) -> bool) {
    let wait = async {
        while !done(metrics) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .is_err()
    {
        panic!(
            "timed out waiting for {what}; metrics:\n{}",
            metrics.prometheus_text()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_settings_file_is_reloaded_when_valid_and_refused_when_not() {
    let dir = std::env::temp_dir().join(format!("trainyard-reload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("config.yaml");
    let first = "service:\n  cyclePeriodMillis: 1000\n";
    std::fs::write(&path, first).expect("written");
    let settings = Settings::parse(first, "config.yaml").expect("valid");
    let metrics = Arc::new(Metrics::new());
    let (tx, mut rx) = watch::channel(settings);
    let watcher = tokio::spawn(trainyard_serve::reload::watch_file(
        path.clone(),
        first.to_string(),
        Duration::from_millis(20),
        tx,
        metrics.clone(),
        None,
    ));

    // A valid change: the receiver gets it, counted as ok.
    replace(
        &path,
        "service:\n  cyclePeriodMillis: 250\nscheduler:\n  reservations: {starvingAfterSeconds: 600}\n",
    );
    tokio::time::timeout(Duration::from_secs(10), rx.changed())
        .await
        .expect("the valid settings arrive in time")
        .expect("the watcher runs");
    let got = rx.borrow_and_update().clone();
    assert_eq!(got.service.cycle_period_millis, 250);
    assert_eq!(got.scheduler.reservations.starving_after_seconds, 600);
    assert_eq!(reloads(&metrics, "ok"), 1.0);
    assert_eq!(reloads(&metrics, "invalid"), 0.0);

    // An invalid change (a field that does not exist): counted, not sent.
    replace(&path, "service:\n  cyclePeriodMilis: 10\n");
    until_metrics(&metrics, "the invalid reload to be counted", |m| {
        reloads(m, "invalid") == 1.0
    })
    .await;
    // The refusal is counted where a valid file would have been sent, so
    // nothing can still be on its way.
    assert!(
        !rx.has_changed().expect("the watcher runs"),
        "invalid settings were sent: {:?}",
        rx.borrow().service
    );
    assert_eq!(rx.borrow().service.cycle_period_millis, 250);
    assert_eq!(reloads(&metrics, "ok"), 1.0);

    // Out of range is refused too; a valid file after that is taken.
    replace(&path, "service:\n  cyclePeriodMillis: 0\n");
    until_metrics(&metrics, "the second invalid reload", |m| {
        reloads(m, "invalid") == 2.0
    })
    .await;
    assert!(!rx.has_changed().expect("the watcher runs"));
    replace(&path, "service:\n  cyclePeriodMillis: 500\n");
    tokio::time::timeout(Duration::from_secs(10), rx.changed())
        .await
        .expect("the next valid settings arrive in time")
        .expect("the watcher runs");
    assert_eq!(rx.borrow_and_update().service.cycle_period_millis, 500);
    assert_eq!(reloads(&metrics, "ok"), 2.0);
    assert_eq!(reloads(&metrics, "invalid"), 2.0);

    // The watcher ends when nobody listens any more.
    drop(rx);
    tokio::time::timeout(Duration::from_secs(10), watcher)
        .await
        .expect("the watcher stops without receivers")
        .expect("the watcher task");
    let _ = std::fs::remove_dir_all(&dir);
}
