//! The dashboard's browser benchmark (issue 48): how long each view takes
//! to render in headless Chromium, and whether updates freeze the page,
//! on a cluster of 5,000 nodes and 50,000 pods.
//!
//! ```sh
//! scripts/ui-bench.sh                      # = cargo run --release -p trainyard-api --example ui_bench
//! cargo run --release -p trainyard-api --example ui_bench -- --nodes 500 --pods 5000 --rounds 3
//! ```
//!
//! The test API server (in-process, manual clock) is filled directly
//! (its `create`, no HTTP): N nodes of 8 GPUs with topology labels
//! (spine block of 500 nodes › leaf of 32 › NVLink domain of 8), 8 queues
//! whose quotas add up to the cluster (so nothing is reclaimed), and P
//! one-GPU pods, as many already bound (`spec.nodeName`, their GPU index,
//! running) as there are GPUs, the rest pending in 40 namespaces. The
//! service runs in-process with its default 1 s cycle. The dashboard is
//! opened in Chromium through `tests/ui/driver.py` (Playwright) at
//! 1400×900: each view once, its first render read from
//! `window.__trainyard.render` (the page's own timing: from the view's
//! mount to the first paint after its data is drawn, fetches included),
//! then, with the jobs page, the GPU map and the queues open, R rounds of
//! a node's pods ending (8 bound pods deleted: 8 pending ones bind): each
//! update the page makes (`window.__trainyard.updates`: refresh time and
//! the longest frame while it ran) is collected. Prints a Markdown table.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::browser::Browser;
use support::{start_cluster, start_service_tuned};
use trainyard_testapi::TestApiServer;

const GPU: &str = "nvidia.com/gpu";
const QUEUES: usize = 8;
const NAMESPACES: usize = 40;

struct Args {
    nodes: usize,
    pods: usize,
    rounds: usize,
}

fn args() -> Args {
    let mut a = Args {
        nodes: 5000,
        pods: 50_000,
        rounds: 5,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).and_then(|v| v.parse().ok());
        match (argv[i].as_str(), v) {
            ("--nodes", Some(v)) => a.nodes = v,
            ("--pods", Some(v)) => a.pods = v,
            ("--rounds", Some(v)) => a.rounds = v,
            (other, _) => {
                eprintln!(
                    "ui_bench: unknown or incomplete argument {other}\nusage: ui_bench [--nodes N] [--pods P] [--rounds R]"
                );
                std::process::exit(2);
            }
        }
        i += 2;
    }
    a
}

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// Pod `k`'s queue and namespace.
fn home(k: usize) -> (String, String) {
    (
        format!("team-{}", k % QUEUES),
        format!("ns-{:02}", k % NAMESPACES),
    )
}

fn pod_json(k: usize, on: Option<(usize, usize)>) -> Value {
    let (queue, ns) = home(k);
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("job-{k:05}"), "namespace": ns,
                     "labels": {"trainyard.io/queue": queue}},
        "spec": {"schedulerName": "trainyard", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "train:1",
                   "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}});
    if let Some((node, gpu)) = on {
        p["spec"]["nodeName"] = json!(node_name(node));
        p["metadata"]["annotations"] = json!({"trainyard.io/gpu-indices": gpu.to_string()});
        p["status"] = json!({"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}]});
    }
    p
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

/// Namespaces, queues whose quotas add up to the cluster, `a.nodes`
/// nodes with topology labels, and `a.pods` one-GPU pods, the first
/// `bound` of them bound, created on `server` directly.
fn fill_cluster(server: &TestApiServer, a: &Args, gpus: usize, bound: usize) {
    support::install_crds(server);
    for n in 0..NAMESPACES {
        server
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n:02}")}}))
            .expect("namespace");
    }
    for q in 0..QUEUES {
        server
            .create(
                json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
                "metadata": {"name": format!("team-{q}")},
                "spec": {"quota": {GPU: gpus / QUEUES}, "overQuotaWeight": 1}}),
            )
            .expect("queue");
    }
    for i in 0..a.nodes {
        server
            .create(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node_name(i), "labels": {
                    "topology.trainyard.io/spine-block": format!("block-{}", i / 500),
                    "topology.trainyard.io/leaf": format!("leaf-{:03}", i / 32),
                    "topology.trainyard.io/nvlink-domain": format!("nvl-{:03}", i / 8)}},
                "status": {
                    "allocatable": {"cpu": "128", "memory": "2Ti", "pods": "110", GPU: "8"},
                    "capacity": {"cpu": "128", "memory": "2Ti", "pods": "110", GPU: "8"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}))
            .expect("node");
    }
    // Bound pods fill GPU g of node n in order; the queues take turns, so
    // each holds its quota.
    for k in 0..a.pods {
        let on = (k < bound).then_some((k / 8, k % 8));
        server.create(pod_json(k, on)).expect("pod");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let gpus = a.nodes * 8;
    let bound = a.pods.min(gpus);
    println!(
        "ui_bench: {} nodes ({} GPUs), {} pods ({} bound, {} pending), {} update rounds; {} CPUs",
        a.nodes,
        gpus,
        a.pods,
        bound,
        a.pods - bound,
        a.rounds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let t = Instant::now();
    let (server, client) = start_cluster().await;
    fill_cluster(&server, &a, gpus, bound);
    println!(
        "created {} nodes and {} pods in {:.1} s",
        a.nodes,
        a.pods,
        t.elapsed().as_secs_f64()
    );

    // ---- the service, its default 1 s cycle
    let t = Instant::now();
    let running = start_service_tuned(&client, |s| {
        s.service.cycle_period_millis = 1000;
        s.service.debounce_millis = 100;
    })
    .await;
    let first = support::cycle_until(&running.view, "a first cycle with every pod", |c| {
        c.snapshot.jobs.len() >= a.pods
    })
    .await;
    println!(
        "first full cycle ({}) after {:.1} s",
        first.number,
        t.elapsed().as_secs_f64()
    );

    let base = format!("http://127.0.0.1:{}", running.port);
    let mut browser = match Browser::start(&base, false).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "ui_bench: the browser cannot be had: {} (scripts/install-browser.sh)",
                e.0
            );
            std::process::exit(1);
        }
    };
    browser.timeout = Duration::from_secs(180);
    println!("chromium {}", browser.chromium);

    let pending_job = {
        let k = bound; // the first pending pod
        let (_, ns) = home(k);
        format!("{ns}/job-{k:05}")
    };
    let shown = first_renders(&mut browser, first.number, &pending_job).await;
    let endpoints = endpoint_times(&mut browser, &pending_job).await;
    let (rounds_done, updates) = update_rounds(&mut browser, &running, &server, a.rounds).await;
    let reclaims = evictions_view(&mut browser, &running, &client).await;
    print_tables(&shown, &updates, &endpoints, rounds_done);
    println!(
        "evictions view after team-0's quota was taken away: {} rows shown in {:.0} ms (driver's wall clock)",
        reclaims.1, reclaims.0
    );
    browser.quit().await;
    running.stop().await;
}

/// What the first renders gave: per view the driver's wall clock, the
/// GPU map with `pending_job` picked, and the page's own render times.
struct Shown {
    wall: Vec<(String, f64)>,
    gpus_job_ms: f64,
    render: Value,
}

/// Each view opened once, then the GPU map with `pending_job` picked.
async fn first_renders(browser: &mut Browser, first: u64, pending_job: &str) -> Shown {
    let views = [
        ("queues", "#/queues".to_string()),
        ("jobs", "#/jobs".to_string()),
        ("job", format!("#/job/{pending_job}")),
        ("gpus", "#/gpus".to_string()),
        ("evictions", "#/evictions".to_string()),
    ];
    let mut wall = Vec::new();
    for (view, hash) in &views {
        let t = Instant::now();
        let page = browser
            .cmd(json!({"goto": hash, "min_cycle": first, "timeout": 170_000}))
            .await;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        assert!(page["error"].is_null(), "{view}: {page}");
        wall.push((view.to_string(), ms));
        let dom = browser
            .cmd(json!({"eval": "() => document.getElementsByTagName('*').length"}))
            .await;
        println!("{view}: shown in {ms:.0} ms (driver's wall clock), {dom} elements");
    }
    // The GPU map with a pending job picked (its fitting devices outlined).
    let t = Instant::now();
    browser.goto("#/queues", 0).await;
    let picked = browser
        .cmd(json!({"goto": format!("#/gpus?job={pending_job}"), "timeout": 170_000}))
        .await;
    assert!(picked["error"].is_null(), "{picked}");
    let gpus_job_ms = t.elapsed().as_secs_f64() * 1000.0;
    let timing = browser.cmd(json!({"timing": true})).await;
    let render = timing["render"].clone();

    Shown {
        wall,
        gpus_job_ms,
        render,
    }
}

/// Each endpoint fetched from the page: its size, fetch and parse times.
async fn endpoint_times(browser: &mut Browser, pending_job: &str) -> Vec<(String, Value)> {
    let mut endpoints = Vec::new();
    for ep in [
        "queues".to_string(),
        "jobs".to_string(),
        "forecasts".to_string(),
        format!(
            "job?namespace={}&name={}",
            pending_job.split('/').next().unwrap_or_default(),
            pending_job.split('/').nth(1).unwrap_or_default()
        ),
        "gpus".to_string(),
        "evictions?limit=1000".to_string(),
    ] {
        let r = browser
            .cmd(json!({"eval": format!(
                "async () => {{ const t0 = performance.now(); const r = await fetch('/ui/api/{ep}'); const txt = await r.text(); const t1 = performance.now(); JSON.parse(txt); return {{ bytes: txt.length, fetchMs: t1 - t0, parseMs: performance.now() - t1 }}; }}"
            ), "timeout": 170_000}))
            .await;
        endpoints.push((ep, r));
    }

    endpoints
}

/// `rounds` rounds per view (jobs, GPUs, queues) of a node's 8 pods
/// ending and 8 pending pods binding there; the updates the page timed.
async fn update_rounds(
    browser: &mut Browser,
    running: &support::Running,
    server: &TestApiServer,
    rounds: usize,
) -> (usize, Vec<Value>) {
    let mut rounds_done = 0;
    let mut victim_node = 0;
    for view in ["jobs", "gpus", "queues"] {
        browser.goto(&format!("#/{view}"), 0).await;
        for _ in 0..rounds {
            let before = running
                .view
                .latest()
                .borrow()
                .clone()
                .map_or(0, |c| c.number);
            let node = node_name(victim_node);
            for g in 0..8 {
                let k = victim_node * 8 + g;
                let (_, ns) = home(k);
                let _ = server.delete("v1", "Pod", &ns, &format!("job-{k:05}"));
            }
            victim_node += 1;
            server.tick();
            // The node's GPUs taken again by pending pods, shown by the page.
            let c = support::cycle_until(&running.view, "the freed node's GPUs taken again", |c| {
                c.number > before && c.decisions.binds.iter().any(|b| b.node == node.as_str())
            })
            .await;
            browser
                .cmd(json!({"wait": "main#view", "attr": "data-cycle", "min": c.number, "timeout": 170_000}))
                .await;
            rounds_done += 1;
        }
    }
    let timing = browser.cmd(json!({"timing": true})).await;
    let updates = timing["updates"].as_array().cloned().unwrap_or_default();

    (rounds_done, updates)
}

/// team-0's quota taken away, so the other teams' pending jobs reclaim
/// its pods; once a cycle has decided evictions, the evictions view is
/// opened: its time (driver's wall clock, ms) and the rows it shows.
async fn evictions_view(
    browser: &mut Browser,
    running: &support::Running,
    client: &kube::Client,
) -> (f64, u64) {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    use kube::core::{ApiResource, GroupVersionKind};
    let queues: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("trainyard.io", "v1alpha1", "Queue"),
            "queues",
        ),
    );
    queues
        .patch(
            "team-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"quota": {GPU: 0}}})),
        )
        .await
        .expect("team-0's quota taken away");
    // A reclaim over 10,000 pending jobs can take a long cycle.
    let mut latest = running.view.latest();
    let wait = latest.wait_for(|c| {
        c.as_ref()
            .is_some_and(|c| !c.decisions.evictions.is_empty())
    });
    let c = match tokio::time::timeout(Duration::from_secs(170), wait).await {
        Ok(Ok(c)) => c.clone().expect("a cycle"),
        _ => {
            println!("evictions view: no cycle reclaimed within 170 s of team-0's quota going");
            return (f64::NAN, 0);
        }
    };
    browser.goto("#/queues", 0).await;
    let t = Instant::now();
    let shown = browser
        .cmd(json!({"goto": "#/evictions", "min_cycle": c.number, "timeout": 170_000}))
        .await;
    assert!(shown["error"].is_null(), "{shown}");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let rows = browser
        .cmd(json!({"eval": "() => document.querySelectorAll('table#evictions tr[data-eviction]').length"}))
        .await;
    (ms, rows.as_u64().unwrap_or(0))
}

/// The tables docs/benchmarks.md records.
fn print_tables(
    shown: &Shown,
    updates: &[Value],
    endpoints: &[(String, Value)],
    rounds_done: usize,
) {
    println!();
    println!(
        "| view | first render (ms, `__trainyard.render`) | shown (ms, driver) | updates | update ms: median / max | longest frame during an update (ms): median / max |"
    );
    println!("|---|---:|---:|---:|---|---|");
    for (view, ms) in &shown.wall {
        let ups: Vec<&Value> = updates
            .iter()
            .filter(|u| u["view"] == view.as_str())
            .collect();
        let mut t: Vec<f64> = ups.iter().filter_map(|u| u["ms"].as_f64()).collect();
        let mut f: Vec<f64> = ups
            .iter()
            .filter_map(|u| u["longestFrameMs"].as_f64())
            .collect();
        let (tm, tx) = (median(&mut t), max(&t));
        let (fm, fx) = (median(&mut f), max(&f));
        let upd = if ups.is_empty() {
            ("–".to_string(), "–".to_string())
        } else {
            (format!("{tm:.0} / {tx:.0}"), format!("{fm:.0} / {fx:.0}"))
        };
        println!(
            "| {view} | {} | {ms:.0} | {} | {} | {} |",
            shown.render[view.as_str()],
            ups.len(),
            upd.0,
            upd.1
        );
    }
    println!(
        "| gpus, a pending job picked | – | {:.0} | | | |",
        shown.gpus_job_ms
    );
    println!();
    println!("| endpoint | JSON bytes | fetch (ms, in the page) | JSON.parse (ms) |");
    println!("|---|---:|---:|---:|");
    for (ep, r) in endpoints {
        println!(
            "| `/ui/api/{}` | {} | {:.0} | {:.0} |",
            ep.split('?').next().unwrap_or_default(),
            r["bytes"],
            r["fetchMs"].as_f64().unwrap_or(f64::NAN),
            r["parseMs"].as_f64().unwrap_or(f64::NAN)
        );
    }
    println!();
    println!(
        "{rounds_done} rounds of 8 pods ending and 8 binding; {} updates timed in all",
        updates.len()
    );
    let slow: Vec<String> = shown
        .render
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.as_f64().is_some_and(|ms| ms >= 2000.0))
        .map(|(k, v)| format!("{k} {v} ms"))
        .collect();
    println!(
        "render under 2 s: {}",
        if slow.is_empty() {
            "every view".to_string()
        } else {
            format!("MISSED by {}", slow.join(", "))
        }
    );
}
