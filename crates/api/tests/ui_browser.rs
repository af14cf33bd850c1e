//! The dashboard (`/ui`) in headless Chromium (Playwright, through
//! `tests/ui/driver.py`), against `trainyard serve`'s service run
//! in-process over the test API server: what each view shows, read from
//! the DOM (the attributes of the DOM contract, docs/ui.md), compared with
//! the gRPC API's own answers (ListQueues, ListJobs, ExplainJob, WhatIf,
//! ForecastStart, WatchDecisions) and with the cluster's objects — never
//! with the page's JSON. A job becoming bound updates the open page
//! without a reload; the keyboard reaches and opens jobs; over TLS with
//! tokens the page asks for a token and shows a user only what they may
//! see.
//!
//! Without Chromium or Playwright (scripts/install-browser.sh) each test
//! prints `SKIPPED:` and the reason; with `TRAINYARD_REQUIRE_TOOLS=1` it
//! fails. `TRAINYARD_UI_SCREENSHOTS=DIR` writes one PNG per view (1400×900)
//! into DIR (scripts/ui-screenshots.sh: docs/ui/).

mod support;
#[path = "ui_browser/views.rs"]
mod views;

use views::{check_evictions, check_gpus, check_job, check_jobs, check_queues, compare_jobs};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use support::browser::{Browser, browser_or_skip};
use support::{Running, cycle_until, install_crds, start_cluster, start_service, unix_channel};
use tonic::transport::Channel;
use trainyard_api::pb;
use trainyard_api::pb::scheduler_client::SchedulerClient;
use trainyard_serve::view::CycleView;
use trainyard_testapi::TestApiServer;

const GPU: &str = "nvidia.com/gpu";
const GPU_INDICES: &str = "trainyard.io/gpu-indices";

// ------------------------------------------------------------------ the cluster

/// A ready node with `gpus` GPUs under leaf switch `leaf` of spine block
/// `b0` (topology labels: the GPU map groups nodes by them).
fn topo_node(server: &TestApiServer, name: &str, gpus: u32, leaf: &str) {
    let g = gpus.to_string();
    server
        .create(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "topology.trainyard.io/spine-block": "b0",
                "topology.trainyard.io/leaf": leaf}},
            "status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: g},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: g},
                "conditions": [{"type": "Ready", "status": "True"}]}}))
        .expect("node created");
}

/// A queue: `quota` GPUs guaranteed, `limit` at most (None: unlimited),
/// under `parent` when given.
fn queue(server: &TestApiServer, name: &str, quota: u32, limit: Option<u32>, parent: Option<&str>) {
    let mut spec = json!({"quota": {GPU: quota}, "overQuotaWeight": 1});
    if let Some(l) = limit {
        spec["limit"] = json!({GPU: l});
    }
    if let Some(p) = parent {
        spec["parent"] = json!(p);
    }
    server
        .create(
            json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name}, "spec": spec}),
        )
        .expect("queue created");
}

/// A one-pod job of Trainyard's in `ns`, queue `queue`, asking `gpus`.
fn job(server: &TestApiServer, ns: &str, name: &str, queue: &str, gpus: u32) {
    server
        .create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"trainyard.io/queue": queue}},
            "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                "resources": {"requests": {GPU: gpus.to_string()}, "limits": {GPU: gpus.to_string()}}}]}}))
        .expect("pod created");
}

fn queue_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainyard.io", "v1alpha1", "Queue"),
        "queues",
    )
}

/// Jobs `bound` have every pod bound, jobs `pending` none; no bind,
/// eviction or write is under way (so the answers stay as they are).
fn quiet(c: &CycleView, bound: &[&str], pending: &[&str]) -> bool {
    let state = |id: &str| {
        c.snapshot
            .jobs
            .iter()
            .find(|j| j.id == id)
            .map(|j| j.tasks.iter().all(|t| !t.is_pending()))
    };
    bound.iter().all(|id| state(id) == Some(true))
        && pending.iter().all(|id| state(id) == Some(false))
        && c.decisions.binds.is_empty()
        && c.decisions.evictions.is_empty()
        && c.writes_in_flight == 0
}

/// Runs the kubelet (pods start, evicted pods go) until `done` holds
/// for a published cycle; the clock moves past grace periods when the
/// kubelet alone does not get there.
async fn kubelet_until(
    server: &TestApiServer,
    running: &Running,
    what: &str,
    done: impl Fn(&CycleView) -> bool,
) -> std::sync::Arc<CycleView> {
    let start = std::time::Instant::now();
    let mut advanced = false;
    loop {
        server.tick();
        if let Some(c) = running.view.latest().borrow().clone()
            && done(&c)
        {
            return c;
        }
        if !advanced && start.elapsed() > Duration::from_secs(3) {
            server.advance(31);
            advanced = true;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Bound pods as the cluster has them: `ns/pod` → (node, GPU indices).
async fn placements(client: &kube::Client) -> BTreeMap<String, (String, Vec<u32>)> {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut out = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await.expect("pods") {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let gpus = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(GPU_INDICES))
            .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        let id = format!(
            "{}/{}",
            p.metadata.namespace.unwrap_or_default(),
            p.metadata.name.unwrap_or_default()
        );
        out.insert(id, (node, gpus));
    }
    out
}

fn state_name(s: i32) -> &'static str {
    pb::JobState::try_from(s).map_or("?", |s| s.as_str_name())
}

fn screenshots_dir() -> Option<PathBuf> {
    std::env::var_os("TRAINYARD_UI_SCREENSHOTS")
        .filter(|d| !d.is_empty())
        .map(|d| {
            let d = PathBuf::from(d);
            // Relative to the repository root (where the script runs), not
            // to the crate (where cargo runs tests).
            if d.is_absolute() {
                d
            } else {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../..")
                    .join(d)
            }
        })
}

async fn shoot(browser: &mut Browser, name: &str) {
    if let Some(dir) = screenshots_dir() {
        let path = dir.join(format!("{name}.png"));
        let r = browser.screenshot(&path).await;
        eprintln!("screenshot {}: {} bytes", path.display(), r["bytes"]);
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

// ------------------------------------------------------------------ the test

/// The kinds of a job page's events, as the driver read them.
fn event_kinds(d: &Value) -> Vec<String> {
    d["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| s(&e["kind"]))
        .collect()
}

/// The marker set in `window` before is still there: no reload.
async fn assert_not_reloaded(browser: &mut Browser) {
    assert_eq!(
        browser
            .cmd(json!({"eval": "() => window.__notReloaded === true"}))
            .await,
        true,
        "the page was not reloaded"
    );
}

/// Nodes n1, n2 (8 GPUs, leaf tor-1) and n3 (8 GPUs, leaf tor-2), all in
/// spine block b0; queues team-a and team-b (8 GPUs of quota each),
/// capped (no quota, at most 2 GPUs) and orphan (its parent does not
/// exist: invalid). Team a borrows n1 and n2 (four 4-GPU jobs); team b's
/// 8-GPU `ml/b-big` reclaims two of them (evictions to show). Then
/// `research/tune` (team-b, 2 GPUs) runs on n3; `ml/wait` (team-a, 12
/// GPUs: no node is that big) and `ml/capped` (capped, 4 GPUs: over its
/// queue's limit) wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_view_shows_what_the_api_answers_and_follows_the_cluster() {
    let (server, client) = start_cluster().await;
    install_crds(&server);
    server
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}}))
        .expect("namespace");
    topo_node(&server, "n1", 8, "tor-1");
    topo_node(&server, "n2", 8, "tor-1");
    queue(&server, "team-a", 8, None, None);
    queue(&server, "team-b", 8, None, None);
    queue(&server, "capped", 0, Some(2), None);
    queue(&server, "orphan", 1, None, Some("nowhere"));
    for i in 0..4 {
        job(&server, "ml", &format!("a-{i}"), "team-a", 4);
    }
    let running = start_service(&client).await;
    let mut rpc = SchedulerClient::new(unix_channel(running.socket.clone()).await);
    // Every cycle's decisions, from the start: the evictions the page must show.
    let mut decisions = rpc
        .watch_decisions(pb::WatchDecisionsRequest { latest: false })
        .await
        .expect("a decision stream")
        .into_inner();
    let a_all = ["ml/a-0", "ml/a-1", "ml/a-2", "ml/a-3"];
    kubelet_until(&server, &running, "team a's four jobs bound", |c| {
        quiet(c, &a_all, &[])
    })
    .await;
    server.tick(); // they run (reclaim evicts running pods)
    job(&server, "ml", "b-big", "team-b", 8);
    kubelet_until(&server, &running, "b-big bound after the reclaim", |c| {
        quiet(c, &["ml/b-big"], &[])
            && c.snapshot
                .jobs
                .iter()
                .filter(|j| j.id.to_string().starts_with("ml/a-"))
                .count()
                == 2
    })
    .await;
    topo_node(&server, "n3", 8, "tor-2");
    job(&server, "research", "tune", "team-b", 2);
    job(&server, "ml", "wait", "team-a", 12);
    job(&server, "ml", "capped", "capped", 4);
    let live = kubelet_until(
        &server,
        &running,
        "tune bound, wait and capped waiting",
        |c| quiet(c, &["ml/b-big", "research/tune"], &["ml/wait", "ml/capped"]),
    )
    .await;
    let cycle = live.number;

    // The evictions the scheduler made, as WatchDecisions told them.
    let mut victims: Vec<pb::Victim> = Vec::new();
    while victims.len() < 2 {
        let m = tokio::time::timeout(Duration::from_secs(30), decisions.message())
            .await
            .expect("decisions within 30 s")
            .expect("no stream error")
            .expect("the stream goes on");
        victims.extend(m.evictions);
    }
    assert!(victims.iter().all(|v| v.kind == "reclaim"), "{victims:?}");

    let base = format!("http://127.0.0.1:{}", running.port);
    let Some(mut browser) = browser_or_skip(&base, false, "the dashboard in a browser").await
    else {
        running.stop().await;
        return;
    };
    eprintln!("chromium {}", browser.chromium);

    check_queues(&mut browser, &mut rpc, &server, cycle).await;
    check_jobs(&mut browser, &mut rpc, &client, cycle).await;
    check_job(&mut browser, &mut rpc, &client, cycle, &victims).await;
    check_gpus(&mut browser, &mut rpc, &client, cycle).await;
    check_evictions(&mut browser, &victims, cycle).await;
    check_keyboard(&mut browser).await;
    check_updates(&mut browser, &mut rpc, &server, &client, &running).await;

    let timing = browser.cmd(json!({"timing": true})).await;
    eprintln!("window.__trainyard.render: {}", timing["render"]);
    for view in ["queues", "jobs", "job", "gpus", "evictions"] {
        assert!(
            timing["render"][view].as_f64().is_some(),
            "window.__trainyard.render.{view} is set: {timing}"
        );
    }
    assert!(
        timing["updates"].as_array().is_some_and(|u| !u.is_empty()),
        "updates are timed: {timing}"
    );
    browser.quit().await;
    running.stop().await;
}

/// The keyboard: `g j` goes to the jobs, Tab reaches a row, ↓ moves,
/// Enter opens the job.
async fn check_keyboard(browser: &mut Browser) {
    browser.goto("#/queues", 0).await;
    browser
        .cmd(json!({"eval": "() => document.activeElement && document.activeElement.blur()"}))
        .await;
    browser.cmd(json!({"press": "g"})).await;
    browser.cmd(json!({"press": "j"})).await;
    let page = browser.cmd(json!({"wait_view": "jobs"})).await;
    assert_eq!(page["view"], "jobs", "g j: {page}");
    let mut row = None;
    for _ in 0..40 {
        browser.cmd(json!({"press": "Tab"})).await;
        let f = browser.cmd(json!({"focused": true})).await;
        if f["tag"] == "TR" && !f["job"].is_null() {
            row = Some(s(&f["job"]));
            break;
        }
    }
    let first = row.expect("Tab reaches a job row within 40 presses");
    browser.cmd(json!({"press": "ArrowDown"})).await;
    let f = browser.cmd(json!({"focused": true})).await;
    let second = s(&f["job"]);
    assert!(
        f["tag"] == "TR" && second != first,
        "↓ moves to the next row: {f}"
    );
    browser.cmd(json!({"press": "Enter"})).await;
    let page = browser.cmd(json!({"wait_view": "job"})).await;
    assert_eq!(page["view"], "job", "Enter opens the job: {page}");
    let shown = browser.read("job").await;
    assert_eq!(s(&shown["data"]["job"]), second, "the focused row's job");
}

/// A job becoming bound updates the open page, with no reload: the job
/// page of `ml/wait` when a 16-GPU node is added, then the jobs page
/// when `capped`'s limit is raised.
async fn check_updates(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    server: &TestApiServer,
    client: &kube::Client,
    running: &Running,
) {
    let page = browser.goto("#/job/ml/wait", 0).await;
    browser
        .cmd(json!({"eval": "() => { window.__notReloaded = true; return true; }"}))
        .await;
    let before = page["live"].as_u64().unwrap_or(0);
    topo_node(server, "n4", 16, "tor-2");
    browser
        .cmd(json!({"wait": "#job-state", "attr": "data-state", "value": "JOB_STATE_RUNNING", "timeout": 30000}))
        .await;
    browser
        .cmd(json!({"wait": "#job-pods tr[data-pod=\"wait\"] td[data-field=\"node\"]", "visible": true}))
        .await;
    let shown = browser.read("job").await;
    let d = &shown["data"];
    assert_eq!(s(&d["pods"][0]["node"]), "n4", "{d}");
    assert!(
        shown["page"]["live"].as_u64().unwrap_or(0) > before,
        "#live[data-cycle] moved on: {} then {}",
        before,
        shown["page"]["live"]
    );
    let kinds = event_kinds(d);
    assert!(
        kinds.iter().any(|k| k == "Bound"),
        "the Bound event shows: {kinds:?}"
    );
    assert_not_reloaded(browser).await;
    let placed = placements(client).await;
    assert_eq!(placed["ml/wait"].0, "n4");

    // The jobs page, open, while ml/capped's queue is given room.
    browser.goto("#/jobs", 0).await;
    let row = browser.read("jobs").await;
    let capped = row["data"]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["job"] == "ml/capped")
        .cloned()
        .expect("ml/capped's row");
    assert_eq!(capped["state"], "JOB_STATE_PENDING", "{capped}");
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &queue_resource());
    queues
        .patch(
            "capped",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"limit": {GPU: 8}}})),
        )
        .await
        .expect("capped's limit raised");
    browser
        .cmd(json!({"wait": "tr[data-job=\"ml/capped\"] td[data-field=\"state\"]", "attr": "data-state",
                    "value": "JOB_STATE_RUNNING", "timeout": 30000}))
        .await;
    let c = cycle_until(&running.view, "capped bound", |c| {
        quiet(c, &["ml/capped"], &[])
    })
    .await;
    let jobs = rpc
        .list_jobs(pb::ListJobsRequest::default())
        .await
        .expect("jobs")
        .into_inner();
    browser
        .cmd(json!({"wait": "main#view", "attr": "data-cycle", "min": c.number, "timeout": 30000}))
        .await;
    let placed = placements(client).await;
    compare_jobs(browser, "after capped's bind", &jobs, &placed).await;
    assert_not_reloaded(browser).await;
}

// ------------------------------------------------------------------ secured

/// Over TLS with tokens: without a token the page shows the token form
/// and no data; with alice's token, only namespace `a`'s jobs (as
/// ListJobs answers alice over TLS), and the GPU map hides the others'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secured_dashboard_asks_for_a_token_and_shows_only_what_the_user_may_see() {
    use support::secure::{SecureRunning, secure_cluster, start_secure_service};
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

    let cluster = secure_cluster().await;
    let SecureRunning {
        running,
        certificates,
        certificates_dir: _dir,
    } = start_secure_service(&cluster).await;
    let port = running.port;
    let base = format!("https://127.0.0.1:{port}");
    let Some(mut browser) =
        browser_or_skip(&base, true, "the secured dashboard in a browser").await
    else {
        running.stop().await;
        return;
    };

    // No token: the form, and no job.
    let page = browser.goto("#/jobs", 0).await;
    assert_eq!(page["token_form"], true, "the token form opens: {page}");
    browser
        .cmd(json!({"wait": "#token-input", "visible": true}))
        .await;
    let shown = browser.read("jobs").await;
    assert_eq!(
        shown["data"]["rows"],
        json!([]),
        "no data without a token: {shown}"
    );
    let page = browser.read("page").await["page"].clone();
    assert!(page["cycle"].is_null(), "nothing rendered: {page}");

    // Alice's token, typed into the form.
    browser
        .cmd(json!({"fill": "#token-input", "text": cluster.alice}))
        .await;
    browser
        .cmd(json!({"click": "#token-form button[type=submit]"}))
        .await;
    let page = browser
        .cmd(json!({"wait_view": "jobs", "timeout": 30000}))
        .await;
    assert!(
        page["error"].is_null() && !page["cycle"].is_null(),
        "{page}"
    );
    assert_eq!(page["token_form"], false, "{page}");
    browser
        .cmd(json!({"wait": "#whoami", "visible": true}))
        .await;

    // What alice may see, from the API over TLS with her token.
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(
            std::fs::read(&certificates.ca).expect("CA"),
        ))
        .domain_name("localhost");
    let channel = Endpoint::from_shared(base.clone())
        .expect("endpoint")
        .tls_config(tls)
        .expect("TLS config")
        .connect()
        .await
        .expect("connects over TLS");
    let mut rpc = SchedulerClient::new(channel);
    let mut req = tonic::Request::new(pb::ListJobsRequest::default());
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", cluster.alice).parse().expect("header"),
    );
    let jobs = rpc.list_jobs(req).await.expect("alice's jobs").into_inner();
    assert!(!jobs.jobs.is_empty() && jobs.jobs.iter().all(|j| j.namespace == "a"));
    browser
        .cmd(json!({"wait": "#jobs-count", "attr": "data-count", "value": jobs.jobs.len().to_string()}))
        .await;
    let shown = browser.read("jobs").await;
    let ids: BTreeSet<String> = shown["data"]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| s(&r["job"]))
        .collect();
    let want: BTreeSet<String> = jobs
        .jobs
        .iter()
        .map(|j| format!("{}/{}", j.namespace, j.name))
        .collect();
    assert_eq!(ids, want, "alice sees namespace a's jobs only");
    let who = browser.read("page").await;
    assert!(s(&who["page"]["whoami"]).contains("alice"), "{who}");

    // The GPU map: no job of namespace b named.
    browser.goto("#/gpus", 0).await;
    let shown = browser.read("gpus").await;
    for n in shown["data"]["nodes"].as_array().expect("nodes") {
        for d in n["devices"].as_array().expect("devices") {
            let h = s(&d["holders"]);
            assert!(
                !h.contains("b/"),
                "alice sees b's job on {}: {h}",
                n["node"]
            );
        }
    }
    browser.quit().await;
    tokio::time::timeout(Duration::from_secs(20), running.stop())
        .await
        .expect("stops");
}
