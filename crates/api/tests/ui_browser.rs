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

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use support::browser::{Browser, browser_or_skip};
use support::{Running, cycle_until, start_cluster, start_service, unix_channel};
use tonic::transport::Channel;
use trainyard_api::pb;
use trainyard_api::pb::scheduler_client::SchedulerClient;
use trainyard_serve::view::CycleView;
use trainyard_testapi::TestApiServer;

const GPU: &str = "nvidia.com/gpu";
const GPU_INDICES: &str = "trainyard.io/gpu-indices";

// ------------------------------------------------------------------ the cluster

/// Trainyard's CRDs (deploy/crds), as the chart installs them.
fn install_crds(server: &TestApiServer) {
    for f in ["queues", "podgroups", "topologies"] {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../deploy/crds/{f}.trainyard.io.yaml"));
        let text = std::fs::read_to_string(&p).expect("a committed CRD");
        let crd: Value = serde_saphyr::from_str(&text).expect("a CRD");
        server.create(crd).expect("CRD created");
    }
}

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

/// Queues: every queue of ListQueues with its weight, job counts and per
/// resource the raw numbers; the invalid queue; conditions as the Queue
/// objects have them.
async fn check_queues(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    server: &TestApiServer,
    cycle: u64,
) {
    let queues = rpc
        .list_queues(pb::ListQueuesRequest {})
        .await
        .expect("queues")
        .into_inner();
    let at = queues.cycle.as_ref().map_or(cycle, |c| c.number);
    let page = browser.goto("#/queues", at).await;
    assert_eq!(page["view"], "queues", "{page}");
    assert!(page["error"].is_null(), "{page}");
    assert_eq!(
        s(&page["nav"]),
        r#"["queues","jobs","gpus","evictions"]"#,
        "the nav's views"
    );
    let shown = browser.read("queues").await;
    let rows = shown["data"].as_array().expect("queue rows").clone();
    let valid: Vec<&Value> = rows.iter().filter(|r| r["invalid"] != true).collect();
    let names: Vec<String> = valid.iter().map(|r| s(&r["name"])).collect();
    let want: Vec<String> = queues.queues.iter().map(|q| q.name.clone()).collect();
    assert_eq!(names, want, "the queues in ListQueues' (tree) order");
    for q in &queues.queues {
        let r = valid
            .iter()
            .find(|r| r["name"] == q.name.as_str())
            .expect("a row");
        let what = format!("queue {}: {r}", q.name);
        assert_eq!(s(&r["weight"]), q.weight.to_string(), "{what}");
        assert_eq!(s(&r["running"]), q.running_jobs.to_string(), "{what}");
        assert_eq!(s(&r["pending"]), q.pending_jobs.to_string(), "{what}");
        for res in &q.resources {
            let d = &r["resources"][&res.resource];
            assert!(d.is_object(), "{what}: no [data-resource={}]", res.resource);
            let limit = res.limit.as_ref();
            let want_limit = match limit {
                Some(l) if !l.unlimited => l.value.to_string(),
                _ => "unlimited".to_string(),
            };
            assert_eq!(s(&d["quota"]), res.quota.to_string(), "{what}: quota");
            assert_eq!(s(&d["limit"]), want_limit, "{what}: limit");
            assert_eq!(
                s(&d["fairShare"]),
                res.fair_share.to_string(),
                "{what}: fair share"
            );
            assert_eq!(
                s(&d["allocated"]),
                res.allocated.to_string(),
                "{what}: allocated"
            );
            assert_eq!(
                s(&d["pendingDemand"]),
                res.pending_demand.to_string(),
                "{what}: pending demand"
            );
        }
    }
    // The numbers this cluster must show (not only "as the RPC says").
    let team = |name: &str| queues.queues.iter().find(|q| q.name == name).expect(name);
    let gpu = |name: &str| {
        team(name)
            .resources
            .iter()
            .find(|r| r.resource == GPU)
            .cloned()
            .expect("a GPU row")
    };
    assert_eq!(
        gpu("team-a").allocated,
        8000,
        "two 4-GPU jobs of team a are left"
    );
    assert_eq!(gpu("team-b").allocated, 10_000, "b-big and tune");
    assert_eq!(gpu("capped").limit.as_ref().map(|l| l.value), Some(2000));
    assert_eq!(team("team-a").pending_jobs, 1);

    // The invalid queue: shown apart, marked.
    let orphan = rows
        .iter()
        .find(|r| r["name"] == "orphan")
        .expect("the invalid queue orphan is shown");
    assert_eq!(orphan["invalid"], true, "{orphan}");
    assert!(!want.contains(&"orphan".to_string()));

    // Conditions: each condition of each Queue object, as its status has it.
    for r in &rows {
        let name = s(&r["name"]);
        let Some(o) = server.get("trainyard.io/v1alpha1", "Queue", "", &name) else {
            continue;
        };
        let text = s(&r["conditions"]);
        for c in o["status"]["conditions"].as_array().into_iter().flatten() {
            for k in ["type", "status", "reason", "message"] {
                let v = s(&c[k]);
                assert!(
                    text.contains(&v),
                    "queue {name}: the conditions cell {text:?} lacks {k} {v:?}"
                );
            }
        }
    }
    shoot(browser, "queues").await;
}

/// Jobs: the count and every row against ListJobs (state, queue, pods,
/// reason, placement from the cluster's pods, age), then filtered by the
/// hash and by the filter inputs against ListJobs with the same filter.
async fn check_jobs(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    client: &kube::Client,
    cycle: u64,
) {
    let placed = placements(client).await;
    let cases: [(&str, pb::ListJobsRequest); 5] = [
        ("#/jobs", pb::ListJobsRequest::default()),
        (
            "#/jobs?state=pending",
            pb::ListJobsRequest {
                state: pb::JobState::Pending as i32,
                ..Default::default()
            },
        ),
        (
            "#/jobs?queue=team-b",
            pb::ListJobsRequest {
                queue: "team-b".into(),
                ..Default::default()
            },
        ),
        (
            "#/jobs?namespace=research",
            pb::ListJobsRequest {
                namespace: "research".into(),
                ..Default::default()
            },
        ),
        (
            "#/jobs?user=ml&state=running",
            pb::ListJobsRequest {
                user: "ml".into(),
                state: pb::JobState::Running as i32,
                ..Default::default()
            },
        ),
    ];
    for (hash, req) in cases {
        let jobs = rpc.list_jobs(req).await.expect("jobs").into_inner();
        let at = jobs.cycle.as_ref().map_or(cycle, |c| c.number);
        // A fresh view (the hash changes the view's parameters only when
        // the view is mounted): through another view.
        browser.goto("#/queues", 0).await;
        let page = browser.goto(hash, at).await;
        assert!(page["error"].is_null(), "{hash}: {page}");
        compare_jobs(browser, hash, &jobs, &placed).await;
        if hash == "#/jobs" {
            shoot(browser, "jobs").await;
        }
    }

    // The filter inputs, typed: the table follows.
    browser.goto("#/queues", 0).await;
    browser.goto("#/jobs", 0).await;
    let jobs = rpc
        .list_jobs(pb::ListJobsRequest {
            namespace: "research".into(),
            ..Default::default()
        })
        .await
        .expect("jobs")
        .into_inner();
    browser
        .cmd(json!({"fill": "#filter-namespace", "text": "research"}))
        .await;
    browser
        .cmd(json!({"wait": "#jobs-count", "attr": "data-count", "value": jobs.jobs.len().to_string()}))
        .await;
    browser
        .cmd(json!({"wait": "tr[data-job=\"ml/wait\"]", "gone": true}))
        .await;
    compare_jobs(browser, "namespace typed", &jobs, &placed).await;
    let hash = browser.read("page").await["page"]["hash"].clone();
    assert!(
        s(&hash).contains("namespace=research"),
        "the filter is kept in the hash: {hash}"
    );
    browser
        .cmd(json!({"fill": "#filter-namespace", "text": ""}))
        .await;
    let pending = rpc
        .list_jobs(pb::ListJobsRequest {
            state: pb::JobState::Pending as i32,
            ..Default::default()
        })
        .await
        .expect("jobs")
        .into_inner();
    browser
        .cmd(json!({"select": "#filter-state", "value": "pending"}))
        .await;
    browser
        .cmd(json!({"wait": "#jobs-count", "attr": "data-count", "value": pending.jobs.len().to_string()}))
        .await;
    browser
        .cmd(json!({"wait": "tr[data-job=\"ml/b-big\"]", "gone": true}))
        .await;
    compare_jobs(browser, "state selected", &pending, &placed).await;
}

async fn compare_jobs(
    browser: &mut Browser,
    what: &str,
    jobs: &pb::ListJobsResponse,
    placed: &BTreeMap<String, (String, Vec<u32>)>,
) {
    let shown = browser.read("jobs").await;
    let d = &shown["data"];
    assert_eq!(
        d["count"].as_u64(),
        Some(jobs.jobs.len() as u64),
        "{what}: #jobs-count against ListJobs: {d}"
    );
    let rows = d["rows"].as_array().expect("rows");
    let ids: BTreeSet<String> = rows.iter().map(|r| s(&r["job"])).collect();
    let want: BTreeSet<String> = jobs
        .jobs
        .iter()
        .map(|j| format!("{}/{}", j.namespace, j.name))
        .collect();
    assert_eq!(ids, want, "{what}: the rows (few jobs: all in view)");
    for j in &jobs.jobs {
        let id = format!("{}/{}", j.namespace, j.name);
        let r = rows.iter().find(|r| r["job"] == id.as_str()).expect("row");
        let w = format!("{what}: {id}: {r}");
        assert_eq!(s(&r["state"]), state_name(j.state), "{w}");
        assert_eq!(s(&r["queue"]), j.queue, "{w}");
        assert_eq!(s(&r["pods"]), format!("{}/{}", j.pods_bound, j.pods), "{w}");
        let reason = s(&r["reason"]);
        assert!(
            reason.contains(&j.reason) && reason.contains(j.message.trim()),
            "{w}: reason {:?} {:?}",
            j.reason,
            j.message
        );
        // Where its pods are: the cluster's bound pods of this job (one
        // pod per job here, named as the job).
        let nodes = placed.get(&id).map(|(n, _)| n.clone()).unwrap_or_default();
        assert_eq!(s(&r["placement"]), nodes, "{w}: placement");
        let age: i64 = s(&r["ageSeconds"]).parse().expect("data-seconds");
        assert!(
            (age - j.age_seconds as i64).abs() <= 120,
            "{w}: age {age} against {}",
            j.age_seconds
        );
    }
}

/// Job: `ml/wait` (pending) against ExplainJob, ForecastStart and its
/// pod; the what-if form against WhatIf; `ml/b-big`'s evictions (made
/// for it) against WatchDecisions.
async fn check_job(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    client: &kube::Client,
    cycle: u64,
    victims: &[pb::Victim],
) {
    let why = rpc
        .explain_job(pb::ExplainJobRequest {
            namespace: "ml".into(),
            name: "wait".into(),
        })
        .await
        .expect("explained")
        .into_inner();
    let page = browser.goto("#/job/ml/wait", cycle).await;
    assert!(page["error"].is_null(), "{page}");
    // The forecast is asked on load for a pending job.
    browser
        .cmd(json!({"wait": "#job-forecast[data-starts]", "timeout": 60000}))
        .await;
    let shown = browser.read("job").await;
    let d = &shown["data"];
    assert_eq!(d["job"], "ml/wait", "{d}");
    let job = why.job.as_ref().expect("the job");
    assert_eq!(s(&d["state"]), state_name(job.state), "{d}");
    assert_eq!(s(&d["state"]), "JOB_STATE_PENDING");
    let cause = pb::Cause::try_from(why.cause)
        .expect("a cause")
        .as_str_name();
    assert_eq!(s(&d["cause"]), cause, "#job-explain[data-cause]: {d}");
    let explain = s(&d["explain"]);
    assert!(
        explain.contains(&why.summary),
        "{explain:?} lacks {:?}",
        why.summary
    );
    assert!(
        explain.contains(&why.reason),
        "{explain:?} lacks {:?}",
        why.reason
    );
    let reasons = d["nodeReasons"].as_array().expect("node reasons");
    assert_eq!(reasons.len(), why.node_reasons.len(), "{d}");
    for (li, nr) in reasons.iter().zip(&why.node_reasons) {
        let li = s(li);
        assert!(
            li.contains(&nr.reason) && li.contains(&nr.nodes.to_string()),
            "{li:?} against {nr:?}"
        );
    }
    let pods = d["pods"].as_array().expect("pods");
    assert_eq!(pods.len(), 1, "{d}");
    assert_eq!(pods[0]["pod"], "wait");
    assert_eq!(s(&pods[0]["node"]), "", "not bound: no node");
    // The forecast: as ForecastStart answers (its default look-ahead, as
    // the page asks it).
    let fc = rpc
        .forecast_start(pb::ForecastStartRequest {
            job: Some(pb::forecast_start_request::Job::Existing(
                pb::ExplainJobRequest {
                    namespace: "ml".into(),
                    name: "wait".into(),
                },
            )),
            horizon_seconds: 0,
        })
        .await
        .expect("a forecast")
        .into_inner();
    assert_eq!(
        s(&d["forecast"]["starts"]),
        fc.starts.to_string(),
        "#job-forecast[data-starts] against ForecastStart: {d} / {fc:?}"
    );
    if fc.starts {
        let p50: i64 = s(&d["forecast"]["p50Ms"]).parse().expect("data-p50-ms");
        assert!(
            (p50 - fc.p50_ms).abs() <= 120_000,
            "{p50} against {}",
            fc.p50_ms
        );
    }
    // Events: it is pending, and says so.
    let kinds: Vec<String> = d["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| s(&e["kind"]))
        .collect();
    assert!(kinds.iter().any(|k| k == "Pending"), "{kinds:?}");
    // The form starts from the job's own sizes.
    assert_eq!(s(&d["whatif"]["pods"]), job.pods.to_string());
    assert_eq!(
        s(&d["whatif"]["gpus"]),
        (job.gpu_milli / 1000 / u64::from(job.pods)).to_string()
    );
    shoot(browser, "job").await;

    // What if it asked 8 GPUs in 2 pods: as WhatIf answers.
    for (pods, gpus, min) in [(2u32, 4u32, 2u32), (1, 6, 1)] {
        browser
            .cmd(json!({"fill": "#whatif-pods", "text": pods}))
            .await;
        browser
            .cmd(json!({"fill": "#whatif-gpus", "text": gpus}))
            .await;
        browser
            .cmd(json!({"fill": "#whatif-min", "text": min}))
            .await;
        browser.cmd(json!({"eval": "() => { const r = document.querySelector('#whatif-result'); delete r.dataset.fits; r.textContent = ''; }"})).await;
        browser.cmd(json!({"click": "#whatif-run"})).await;
        browser
            .cmd(json!({"wait": "#whatif-result[data-fits]", "timeout": 30000}))
            .await;
        let what = rpc
            .what_if(pb::WhatIfRequest {
                job: Some(pb::what_if_request::Job::Resize(pb::Resize {
                    namespace: "ml".into(),
                    name: "wait".into(),
                    pods,
                    min_member: min,
                    gpus_per_pod: gpus,
                })),
            })
            .await
            .expect("a what-if")
            .into_inner();
        let shown = browser.read("job").await;
        let wi = &shown["data"]["whatif"];
        let w = format!("what-if {pods}×{gpus} (min {min}): {wi} / {what:?}");
        assert_eq!(s(&wi["fits"]), what.fits.to_string(), "{w}");
        let start = what.reservation.as_ref().map_or(0, |r| r.start_ms);
        if !what.fits && start != 0 {
            assert_eq!(s(&wi["startMs"]), start.to_string(), "{w}");
        }
        let text = s(&wi["text"]);
        if what.fits {
            for p in what.binds.iter().chain(&what.nominations) {
                assert!(text.contains(&p.node), "{w}: node {}", p.node);
            }
            for v in &what.evictions {
                assert!(text.contains(&v.pod), "{w}: victim {}", v.pod);
            }
        } else {
            assert!(text.contains(&what.reason), "{w}");
        }
    }

    // b-big: bound where the cluster has it; the evictions made for it.
    let placed = placements(client).await;
    browser.goto("#/job/ml/b-big", cycle).await;
    browser
        .cmd(json!({"wait": "#job-evictions tr[data-eviction]"}))
        .await;
    let shown = browser.read("job").await;
    let d = &shown["data"];
    assert_eq!(s(&d["state"]), "JOB_STATE_RUNNING", "{d}");
    assert_eq!(s(&d["pods"][0]["node"]), placed["ml/b-big"].0, "{d}");
    assert_eq!(s(&d["cause"]), "", "nothing pending: no cause");
    let ids: BTreeSet<String> = d["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .map(|e| s(&e["id"]))
        .collect();
    let pods: BTreeSet<String> = ids
        .iter()
        .map(|i| i.split_once(':').map_or(i.clone(), |(_, p)| p.to_string()))
        .collect();
    let want: BTreeSet<String> = victims.iter().map(|v| v.pod.clone()).collect();
    assert_eq!(pods, want, "b-big's evictions against WatchDecisions: {d}");
    let kinds: BTreeSet<String> = d["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| s(&e["kind"]))
        .collect();
    assert!(kinds.contains("Bound"), "{kinds:?}");
}

/// GPUs: every node and device against the cluster's bound pods (node
/// and GPU indices of each), the nodes inside their topology domains
/// (node labels), and the devices where a picked pending job would fit.
async fn check_gpus(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    client: &kube::Client,
    cycle: u64,
) {
    let placed = placements(client).await;
    let jobs = rpc
        .list_jobs(pb::ListJobsRequest::default())
        .await
        .expect("jobs")
        .into_inner();
    // The cluster's holders per device: node → device → jobs.
    let mut holders: BTreeMap<(String, u32), BTreeSet<String>> = BTreeMap::new();
    for (pod, (node, gpus)) in &placed {
        for g in gpus {
            holders
                .entry((node.clone(), *g))
                .or_default()
                .insert(format!("{pod}:1000"));
        }
    }
    let page = browser.goto("#/gpus?job=ml/capped", cycle).await;
    assert!(page["error"].is_null(), "{page}");
    browser
        .cmd(json!({"wait": "#gpu-job option[value=\"ml/wait\"]"}))
        .await;
    let shown = browser.read("gpus").await;
    let d = &shown["data"];
    assert!(d["legend"] == true, "#gpu-legend");
    assert_eq!(d["selected"], "ml/capped", "{d}");
    // The select offers the pending jobs ListJobs has.
    let options: BTreeSet<String> = d["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(s)
        .collect();
    let pending: BTreeSet<String> = jobs
        .jobs
        .iter()
        .filter(|j| j.state == pb::JobState::Pending as i32)
        .map(|j| format!("{}/{}", j.namespace, j.name))
        .collect();
    assert_eq!(options, pending, "#gpu-job's options");
    let nodes = d["nodes"].as_array().expect("nodes");
    let names: BTreeSet<String> = nodes.iter().map(|n| s(&n["node"])).collect();
    assert_eq!(
        names,
        ["n1", "n2", "n3"].map(String::from).into(),
        "every node once"
    );
    let mut fit = BTreeSet::new();
    for n in nodes {
        let node = s(&n["node"]);
        let devs = n["devices"].as_array().expect("devices");
        assert_eq!(devs.len(), 8, "{node}: 8 devices");
        // Every node is Ready and schedulable.
        assert_eq!(
            (&n["notReady"], &n["cordoned"]),
            (&json!(false), &json!(false)),
            "{node} is ready and not cordoned: {n}"
        );
        for dev in devs {
            let k = dev["device"].as_u64().expect("index") as u32;
            let shown: BTreeSet<String> = s(&dev["holders"])
                .split(',')
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect();
            let want = holders.get(&(node.clone(), k)).cloned().unwrap_or_default();
            assert_eq!(shown, want, "{node} GPU {k}: data-holders");
            if dev["fit"] == true {
                assert!(want.is_empty(), "{node} GPU {k}: fit but held");
                fit.insert((node.clone(), k));
            }
        }
        // Inside its leaf and its spine block (the node labels).
        let within: Vec<String> = n["within"]
            .as_array()
            .expect("domains")
            .iter()
            .map(|p| s(&p[1]))
            .collect();
        let leaf = if node == "n3" { "tor-2" } else { "tor-1" };
        assert!(
            within.iter().any(|w| w.contains(leaf)) && within.iter().any(|w| w.contains("b0")),
            "{node} inside {within:?}"
        );
    }
    let levels: BTreeSet<String> = d["domains"]
        .as_array()
        .expect("domains")
        .iter()
        .map(|x| s(&x["level"]))
        .collect();
    assert!(levels.len() >= 2, "two topology levels: {levels:?}");
    // ml/capped (4 GPUs) would fit on n3's six free devices (its queue's
    // limit is no node's filter); n1 and n2 are full.
    let n3_free: BTreeSet<(String, u32)> = (0..8)
        .filter(|k| !holders.contains_key(&("n3".to_string(), *k)))
        .map(|k| ("n3".to_string(), k))
        .collect();
    assert_eq!(fit, n3_free, "the devices outlined for ml/capped");
    shoot(browser, "gpus").await;
}

/// Evictions: the reclaims, as WatchDecisions told them.
async fn check_evictions(browser: &mut Browser, victims: &[pb::Victim], cycle: u64) {
    browser.goto("#/evictions", cycle).await;
    let shown = browser.read("evictions").await;
    let rows = shown["data"].as_array().expect("rows").clone();
    assert_eq!(rows.len(), victims.len(), "{rows:?}");
    for v in victims {
        let r = rows
            .iter()
            .find(|r| s(&r["id"]).ends_with(&format!(":{}", v.pod)))
            .unwrap_or_else(|| panic!("no row for {}: {rows:?}", v.pod));
        let w = format!("{r} / {v:?}");
        assert!(s(&r["job"]).contains(&v.job), "{w}");
        assert!(s(&r["kind"]).contains(&v.kind), "{w}");
        assert_eq!(s(&r["node"]), v.node, "{w}");
        assert!(s(&r["message"]).contains(v.message.trim()), "{w}");
        assert!(s(&r["preemptor"]).contains("ml/b-big"), "{w}");
    }
    shoot(browser, "evictions").await;
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
    let kinds: Vec<String> = d["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| s(&e["kind"]))
        .collect();
    assert!(
        kinds.iter().any(|k| k == "Bound"),
        "the Bound event shows: {kinds:?}"
    );
    assert_eq!(
        browser
            .cmd(json!({"eval": "() => window.__notReloaded === true"}))
            .await,
        true,
        "the page was not reloaded"
    );
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
    assert_eq!(
        browser
            .cmd(json!({"eval": "() => window.__notReloaded === true"}))
            .await,
        true,
        "the page was not reloaded"
    );
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
