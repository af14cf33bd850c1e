//! The randomized fault test of issue 15: many seeded runs of the service
//! against the test API server with random faults, each ending with the
//! invariants read back from the API.
//!
//! Each run (seed `k`, a `ChaCha8Rng`; the server's fault rolls are seeded
//! with `k` too):
//!
//! * **Scenario.** Namespace `ml`, 3 to 5 nodes of 8 GPUs, one queue `q`
//!   whose quota never limits, and 3 to 7 gangs (`PodGroup` with
//!   `minMember` = its pod count, 1 to 4 pods of 1 to 8 GPUs each, all of a
//!   gang alike), so some fit and some do not. The service starts with
//!   `fast_settings()`, `gangRepairSeconds: 1`, `assumeTimeoutSeconds: 2`;
//!   in half the runs a node is deleted while the first binds are in
//!   flight (as the mid-bind step below).
//! * **Faults.** 6 to 14 random steps, each followed by 1 to 4 service
//!   cycles (waited on its `Progress`, never on a clock): API faults (429
//!   and 500 rates up to 0.15 each, latency up to 50 ms), faults cleared,
//!   watches dropped, the next 1 to 3 lists/watches answered 410, the
//!   scheduler restarted (stopped through its shutdown switch, waited until
//!   it has ended, a new one started; a start that fails at discovery
//!   under injected faults is started again, as Kubernetes restarts a pod),
//!   a random pod deleted, a random node deleted (at least two stay), a
//!   node deleted while a gang's binds are in flight (requests slowed to
//!   100 ms, the controller brings missing pods back, and as soon as a pod
//!   watch shows a pod bound while a member of its gang is not, that
//!   pod's node goes; a random node after 6 cycles without one), a
//!   kubelet step (binds run, deleted pods go), and a
//!   controller pass.
//!   The test is the pods' **controller**, as a Job or PyTorchJob would be:
//!   a pod of a gang that is gone (deleted by the test, evicted by the
//!   service) is created again under its name, and a pod bound to a node
//!   that no longer exists is deleted at once (the pod garbage collector).
//! * **Quiet.** Faults cleared; then rounds of a kubelet step, a controller
//!   pass and 3 cycles, until the pods (uid, node, terminating) have not
//!   changed for 3.5 s of rounds (longer than the repair and assume
//!   timeouts), at most 40 s.
//!
//! Checked from the API: nodes, pods and PodGroups listed through kube-rs
//! at the end (and, after every fault step, (1) and (2) on the server's
//! store through its handle, which no fault touches). A pod *holds* GPUs
//! when it is bound to a node that exists and is not terminating.
//!
//! 1. No node is over-committed: the GPU requests of the pods holding GPUs
//!    on a node sum to at most its allocatable `nvidia.com/gpu`.
//! 2. No GPU device is given twice: the `trainyard.io/gpu-indices` of the
//!    pods holding GPUs on a node are distinct, below its allocatable, and
//!    as many as the pod requests.
//! 3. No partial gang keeps running: no PodGroup has between 1 and
//!    `minMember - 1` pods holding GPUs, also a gang that ran whole and
//!    lost a member to a deleted node (no pod here ever finishes, so no
//!    gang is "finishing", which `repair.rs` leaves alone). Which gangs
//!    the test saw complete is printed on a failure.
//! 4. Every pod that fits is bound: the test computes, from the final
//!    nodes and pods (not from the service), each node's free GPUs
//!    (allocatable minus the GPUs held); every gang with a pod waiting has
//!    `k` = `minMember` minus its members holding GPUs still to place, all
//!    of `g` GPUs. It fits when `Σ floor(free/g) ≥ k` over the nodes; for
//!    identical pods that count is exact: any placement, in any order,
//!    places that many before no node has room. No gang that fits may be
//!    left waiting (there is one queue, no quota, no priority, and gang
//!    starvation blocking is off: nothing but room may keep it waiting).
//!
//! `TRAINYARD_FAULT_RUNS` (default 12) runs seeds `0..N`,
//! `TRAINYARD_FAULT_PARALLEL` (default 3) of them at once;
//! `TRAINYARD_FAULT_SEED=k` replays seed `k` alone. Timings still vary
//! between replays (the steps and scenario do not).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::runtime::watcher;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;
use trainyard_serve::{GPU_DEVICES_ANNOTATION, Progress, Settings};
use trainyard_testapi::{Faults, TestApiServer};

const NS: &str = "ml";
const GPU: &str = "nvidia.com/gpu";
const GROUP_LABEL: &str = "trainyard.io/pod-group";
/// Longest wait on the service (cycles, a stop) before the run fails.
const WAIT: Duration = Duration::from_secs(30);
/// The pods unchanged this long end the quiet phase.
const QUIET: Duration = Duration::from_millis(3500);
/// The quiet phase ends in this long or the run fails.
const QUIET_LIMIT: Duration = Duration::from_secs(40);

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_faults_keep_the_invariants() {
    let seeds: Vec<u64> = match env_u64("TRAINYARD_FAULT_SEED") {
        Some(k) => vec![k],
        None => (0..env_u64("TRAINYARD_FAULT_RUNS").unwrap_or(12)).collect(),
    };
    let parallel = env_u64("TRAINYARD_FAULT_PARALLEL").unwrap_or(3).max(1) as usize;
    let mut failures = Vec::new();
    for batch in seeds.chunks(parallel) {
        let runs: Vec<_> = batch
            .iter()
            .map(|&seed| (seed, tokio::spawn(run(seed))))
            .collect();
        for (seed, handle) in runs {
            if let Err(e) = handle.await {
                let message = if e.is_panic() {
                    let p = e.into_panic();
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "a panic".into())
                } else {
                    e.to_string()
                };
                eprintln!("seed {seed} FAILED: {message}");
                failures.push(format!(
                    "seed {seed}: {message}\n  replay: TRAINYARD_FAULT_SEED={seed} cargo test -p trainyard-serve --test faults"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n")
    );
}

/// A gang of the scenario: `pods` pods of `gpus` GPUs, `minMember` = `pods`.
#[derive(Clone, Debug)]
struct GangSpec {
    name: String,
    pods: u32,
    gpus: u32,
}

/// A pod as the API holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PodView {
    uid: String,
    gang: String,
    gpus: u32,
    node: Option<String>,
    terminating: bool,
    devices: Vec<u32>,
}

fn pod_view(v: &Value) -> PodView {
    let m = &v["metadata"];
    let gpus = v["spec"]["containers"][0]["resources"]["requests"][GPU]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    PodView {
        uid: m["uid"].as_str().unwrap_or_default().into(),
        gang: m["labels"][GROUP_LABEL].as_str().unwrap_or_default().into(),
        gpus,
        node: v["spec"]["nodeName"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(String::from),
        terminating: !m["deletionTimestamp"].is_null(),
        devices: m["annotations"][GPU_DEVICES_ANNOTATION]
            .as_str()
            .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
            .unwrap_or_default(),
    }
}

/// Nodes (allocatable GPUs) and pods of `ml`, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct View {
    nodes: BTreeMap<String, u32>,
    pods: BTreeMap<String, PodView>,
}

impl View {
    fn new(nodes: &[Value], pods: &[Value]) -> View {
        View {
            nodes: nodes
                .iter()
                .map(|n| {
                    let gpus = n["status"]["allocatable"][GPU]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    (
                        n["metadata"]["name"].as_str().unwrap_or_default().into(),
                        gpus,
                    )
                })
                .collect(),
            pods: pods
                .iter()
                .map(|p| {
                    (
                        p["metadata"]["name"].as_str().unwrap_or_default().into(),
                        pod_view(p),
                    )
                })
                .collect(),
        }
    }

    /// From the server's store (no request: faults do not touch it).
    fn of(server: &TestApiServer) -> View {
        let st = server.shared().lock();
        View::new(
            &st.store.list("/nodes", None),
            &st.store.list("/pods", Some(NS)),
        )
    }

    /// Through kube-rs, as any client sees the cluster.
    async fn listed(client: &Client) -> View {
        let nodes: Vec<Value> = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("list nodes")
            .items
            .into_iter()
            .map(|n| serde_json::to_value(n).expect("json"))
            .collect();
        let pods: Vec<Value> = Api::<Pod>::namespaced(client.clone(), NS)
            .list(&ListParams::default())
            .await
            .expect("list pods")
            .items
            .into_iter()
            .map(|p| serde_json::to_value(p).expect("json"))
            .collect();
        View::new(&nodes, &pods)
    }

    /// The node `p` holds GPUs on: bound to a node that exists, not
    /// terminating.
    fn holds<'a>(&self, p: &'a PodView) -> Option<&'a str> {
        p.node
            .as_deref()
            .filter(|n| self.nodes.contains_key(*n) && !p.terminating)
    }

    /// Pods holding GPUs, per node.
    fn held(&self) -> BTreeMap<&str, Vec<(&str, &PodView)>> {
        let mut out: BTreeMap<&str, Vec<(&str, &PodView)>> = BTreeMap::new();
        for (name, p) in &self.pods {
            if let Some(n) = self.holds(p) {
                out.entry(n).or_default().push((name.as_str(), p));
            }
        }
        out
    }

    /// Members of `gang` holding GPUs.
    fn holding(&self, gang: &str) -> u32 {
        self.pods
            .values()
            .filter(|p| p.gang == gang && self.holds(p).is_some())
            .count() as u32
    }

    /// Invariants 1 and 2: what breaks them.
    fn capacity_violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (node, pods) in self.held() {
            let alloc = self.nodes[node];
            let used: u32 = pods.iter().map(|(_, p)| p.gpus).sum();
            if used > alloc {
                out.push(format!(
                    "node {node} over-committed: {used} GPUs requested of {alloc} by {:?}",
                    pods.iter().map(|(n, p)| (*n, p.gpus)).collect::<Vec<_>>()
                ));
            }
            let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
            for (name, p) in &pods {
                if p.devices.len() != p.gpus as usize {
                    out.push(format!(
                        "{name} on {node} requests {} GPUs but holds devices {:?}",
                        p.gpus, p.devices
                    ));
                }
                for d in &p.devices {
                    if *d >= alloc {
                        out.push(format!("{name} on {node}: device {d} of {alloc}"));
                    }
                    if let Some(other) = seen.insert(*d, name) {
                        out.push(format!(
                            "node {node}: GPU device {d} given to {other} and {name}"
                        ));
                    }
                }
            }
        }
        out
    }

    /// Gangs that hold all `minMember` members.
    fn complete(&self, min: &BTreeMap<String, u32>) -> Vec<String> {
        min.iter()
            .filter(|(g, m)| self.holding(g) >= **m)
            .map(|(g, _)| g.clone())
            .collect()
    }
}

fn pod_json(name: &str, gang: &str, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": NS, "labels": {GROUP_LABEL: gang}},
           "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                    "resources": {"requests": {GPU: gpus.to_string()},
                                  "limits": {GPU: gpus.to_string()}}}]}})
}

/// The pods' controller (a Job, a PyTorchJob) and the pod garbage
/// collector, through the server's handle: a pod bound to a node that is
/// gone is deleted at once; a pod of a gang that is gone is created again.
/// Returns what it did.
fn controller(server: &TestApiServer, gangs: &[GangSpec]) -> Vec<String> {
    let mut done = Vec::new();
    let view = View::of(server);
    for (name, p) in &view.pods {
        if p.node.as_ref().is_some_and(|n| !view.nodes.contains_key(n)) {
            let mut st = server.shared().lock();
            let (def, _) = st.def_for("v1", "Pod").expect("pods served");
            st.delete(&def, NS, name, Some(0), None, None)
                .expect("pod on a gone node deleted");
            done.push(format!("gc {name}"));
        }
    }
    for g in gangs {
        for i in 0..g.pods {
            let name = format!("{}-{i}", g.name);
            if server.get("v1", "Pod", NS, &name).is_none() {
                server
                    .create(pod_json(&name, &g.name, g.gpus))
                    .expect("pod created again");
                done.push(format!("recreate {name}"));
            }
        }
    }
    done
}

/// The service, started again when it fails to start (discovery under
/// injected faults), as Kubernetes restarts a pod that exits.
struct Service {
    progress: watch::Receiver<Progress>,
    stop: watch::Sender<bool>,
}

impl Service {
    fn start(client: Client, settings: Settings) -> Service {
        let (stop, stop_rx) = watch::channel(false);
        let (progress_tx, progress) = watch::channel(Progress::default());
        tokio::spawn(async move {
            loop {
                let result = trainyard_serve::run(
                    client.clone(),
                    settings.clone(),
                    stop_rx.clone(),
                    progress_tx.clone(),
                )
                .await;
                match result {
                    Ok(()) => return,
                    Err(e) if *stop_rx.borrow() => {
                        eprintln!("service ended while stopping: {e}");
                        return;
                    }
                    Err(e) => eprintln!("service failed to start ({e}); starting again"),
                }
            }
        });
        Service { progress, stop }
    }

    /// Waits for `n` more cycles.
    async fn cycles(&mut self, n: u64, ctx: &str) -> Progress {
        let target = self.progress.borrow().cycles + n;
        let result = {
            let wait = self.progress.wait_for(|p| p.cycles >= target);
            tokio::time::timeout(WAIT, wait)
                .await
                .map(|r| r.map(|p| *p).map_err(|_| ()))
        };
        match result {
            Ok(Ok(p)) => p,
            Ok(Err(())) => panic!("{ctx}: the service ended while waiting for {n} cycles"),
            Err(_) => panic!(
                "{ctx}: no {n} cycles in {WAIT:?}: {:?}",
                *self.progress.borrow()
            ),
        }
    }

    /// Stops the service and waits until it has ended (its progress
    /// channel closes), so two never run at once.
    async fn stop(mut self, ctx: &str) {
        self.stop.send_replace(true);
        let closed = async { while self.progress.changed().await.is_ok() {} };
        if tokio::time::timeout(WAIT, closed).await.is_err() {
            panic!("{ctx}: the service did not stop in {WAIT:?}");
        }
    }
}

/// Slows every request, makes the controller bring back missing pods
/// (something to bind), waits (on a pod watch, at most 6 cycles) for a pod
/// to be bound while a member of its gang is not yet (the gang's binds in
/// flight) and deletes that pod's node then, as `e2e_binds.rs` does (a
/// random node after 6 cycles without one).
async fn node_deleted_mid_bind(
    server: &TestApiServer,
    client: &Client,
    gangs: &[GangSpec],
    service: &mut Service,
    rng: &mut ChaCha8Rng,
    ever_complete: &mut BTreeSet<String>,
    ctx: &str,
) -> String {
    let before = server.faults();
    server.set_faults(Faults {
        latency_ms: 100,
        ..Faults::default()
    });
    let mut events = watcher(
        Api::<Pod>::namespaced(client.clone(), NS),
        watcher::Config::default(),
    )
    .boxed();
    // Only changes after the watch's first list.
    loop {
        match tokio::time::timeout(WAIT, events.next()).await {
            Ok(Some(Ok(watcher::Event::InitDone))) => break,
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => panic!("{ctx}: the pod watch did not list"),
        }
    }
    let recreated = controller(server, gangs);
    // A member just bound while a member of its gang is not yet: its
    // node goes, so the gang is left incomplete without having been whole.
    let in_flight = async {
        while let Some(e) = events.next().await {
            let Ok(watcher::Event::Apply(p)) = e else {
                continue;
            };
            let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            let gang = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(GROUP_LABEL))
                .cloned()
                .unwrap_or_default();
            let view = View::of(server);
            let unbound = view
                .pods
                .values()
                .any(|q| q.gang == gang && q.node.is_none() && !q.terminating);
            if unbound && view.nodes.contains_key(&node) {
                return Some((p.metadata.name.unwrap_or_default(), node));
            }
        }
        None
    };
    let seen = tokio::select! {
        p = in_flight => p,
        _ = service.cycles(6, ctx) => None,
    };
    let view = View::of(server);
    let min: BTreeMap<String, u32> = gangs.iter().map(|g| (g.name.clone(), g.pods)).collect();
    ever_complete.extend(view.complete(&min));
    let nodes: Vec<&String> = view.nodes.keys().collect();
    let deleted = if nodes.len() > 2 {
        let name = match &seen {
            Some((_, node)) => node,
            None => *nodes.choose(rng).expect("a node"),
        };
        server.delete("v1", "Node", "", name).expect("node deleted");
        format!("node {name} deleted")
    } else {
        "no node to delete".into()
    };
    server.set_faults(before);
    format!("controller {recreated:?}, bind in flight {seen:?}, {deleted}")
}

fn random_faults(rng: &mut ChaCha8Rng) -> Faults {
    Faults {
        latency_ms: rng.random_range(0..=50),
        rate_429: rng.random_range(0.0..=0.15),
        rate_500: rng.random_range(0.0..=0.15),
        ..Faults::default()
    }
}

async fn scenario(client: &Client, rng: &mut ChaCha8Rng) -> Vec<GangSpec> {
    let ns: Api<Namespace> = Api::all(client.clone());
    let ml: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns");
    ns.create(&PostParams::default(), &ml)
        .await
        .expect("namespace");
    for i in 0..rng.random_range(3..=5) {
        node(client, &format!("n{i}"), 8).await;
    }
    create(
        client,
        &trainyard("Queue", "queues"),
        None,
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
               "metadata": {"name": "q"}, "spec": {"quota": {GPU: 1000}}}),
    )
    .await;
    let mut gangs = Vec::new();
    for i in 0..rng.random_range(3..=7) {
        let g = GangSpec {
            name: format!("g{i}"),
            pods: rng.random_range(1..=4),
            gpus: rng.random_range(1..=8),
        };
        gang(client, &g.name, "q", g.pods, g.gpus).await;
        gangs.push(g);
    }
    gangs
}

async fn run(seed: u64) {
    let started = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (server, client) = server().await;
    server.shared().lock().rng = ChaCha8Rng::seed_from_u64(seed);
    let gangs = scenario(&client, &mut rng).await;
    let min: BTreeMap<String, u32> = gangs.iter().map(|g| (g.name.clone(), g.pods)).collect();
    let mut settings = fast_settings();
    settings.service.gang_repair_seconds = 1;
    settings.service.assume_timeout_seconds = 2;
    // Half the runs lose a node while the first binds are in flight.
    let early = rng.random_bool(0.5);
    if early {
        server.set_faults(Faults {
            latency_ms: 100,
            ..Faults::default()
        });
    }
    let mut service = Service::start(client.clone(), settings.clone());
    let mut log: Vec<String> = vec![format!("gangs {gangs:?}")];
    let mut ever_complete: BTreeSet<String> = BTreeSet::new();
    let ctx = |log: &[String]| format!("seed {seed}, steps {log:?}");
    if early {
        let here = format!("{} (first binds)", ctx(&log));
        let what = node_deleted_mid_bind(
            &server,
            &client,
            &gangs,
            &mut service,
            &mut rng,
            &mut ever_complete,
            &here,
        )
        .await;
        server.set_faults(Faults::default());
        log.push(format!("first binds: {what}"));
    }
    service.cycles(1, &ctx(&log)).await;

    let steps = rng.random_range(6..=14);
    for step in 0..steps {
        ever_complete.extend(View::of(&server).complete(&min));
        let what = match rng.random_range(0..10) {
            0 => {
                let f = random_faults(&mut rng);
                let s = format!(
                    "faults 429 {:.2} 500 {:.2} latency {} ms",
                    f.rate_429, f.rate_500, f.latency_ms
                );
                server.set_faults(f);
                s
            }
            1 => {
                server.set_faults(Faults::default());
                "faults cleared".into()
            }
            2 => {
                server.drop_watches();
                "watches dropped".into()
            }
            3 => {
                let n = rng.random_range(1..=3);
                server.force_410(n);
                format!("410 x{n}")
            }
            4 => {
                let here = format!("{} (restart)", ctx(&log));
                service.stop(&here).await;
                service = Service::start(client.clone(), settings.clone());
                "scheduler restarted".into()
            }
            5 => {
                let view = View::of(&server);
                ever_complete.extend(view.complete(&min));
                let live: Vec<&String> = view
                    .pods
                    .iter()
                    .filter(|(_, p)| !p.terminating)
                    .map(|(n, _)| n)
                    .collect();
                match live.choose(&mut rng) {
                    Some(name) => {
                        server.delete("v1", "Pod", NS, name).expect("pod deleted");
                        format!("pod {name} deleted (on {:?})", view.pods[*name].node)
                    }
                    None => "no pod to delete".into(),
                }
            }
            6 => {
                let view = View::of(&server);
                ever_complete.extend(view.complete(&min));
                let nodes: Vec<&String> = view.nodes.keys().collect();
                if nodes.len() > 2 {
                    let name = *nodes.choose(&mut rng).expect("a node");
                    server.delete("v1", "Node", "", name).expect("node deleted");
                    format!("node {name} deleted")
                } else {
                    "no node to delete".into()
                }
            }
            7 => format!("kubelet step: {} changed", server.tick()),
            8 => {
                let here = format!("{} (mid-bind)", ctx(&log));
                node_deleted_mid_bind(
                    &server,
                    &client,
                    &gangs,
                    &mut service,
                    &mut rng,
                    &mut ever_complete,
                    &here,
                )
                .await
            }
            _ => format!("controller: {:?}", controller(&server, &gangs)),
        };
        let cycles = rng.random_range(1..=4);
        log.push(format!("{step}: {what}, {cycles} cycles"));
        service.cycles(cycles, &ctx(&log)).await;
        let bad = View::of(&server).capacity_violations();
        assert!(bad.is_empty(), "{}: {bad:#?}", ctx(&log));
    }

    // Quiet: no faults; the kubelet and the controller keep going.
    server.set_faults(Faults::default());
    log.push("quiet".into());
    let began = Instant::now();
    let mut last: Option<BTreeMap<String, PodView>> = None;
    let mut since = Instant::now();
    loop {
        ever_complete.extend(View::of(&server).complete(&min));
        server.tick();
        controller(&server, &gangs);
        service.cycles(3, &ctx(&log)).await;
        let pods = View::of(&server).pods;
        if last.as_ref() != Some(&pods) {
            last = Some(pods);
            since = Instant::now();
        } else if since.elapsed() >= QUIET {
            break;
        }
        assert!(
            began.elapsed() < QUIET_LIMIT,
            "{}: not quiet in {QUIET_LIMIT:?}; pods {:#?}",
            ctx(&log),
            View::of(&server).pods
        );
    }

    // From the API, through kube-rs.
    let view = View::listed(&client).await;
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &trainyard("PodGroup", "podgroups"));
    let min_member: BTreeMap<String, u32> = groups
        .list(&ListParams::default())
        .await
        .expect("list podgroups")
        .items
        .into_iter()
        .map(|g| {
            let m = g.data["spec"]["minMember"].as_u64().unwrap_or(1) as u32;
            (g.metadata.name.unwrap_or_default(), m)
        })
        .collect();
    assert_eq!(min_member, min, "{}: the PodGroups", ctx(&log));
    ever_complete.extend(view.complete(&min_member));
    let mut bad = view.capacity_violations();
    // The controller's work is done: every gang is whole, no pod leaving.
    for g in &gangs {
        let members = view.pods.values().filter(|p| p.gang == g.name).count() as u32;
        if members != g.pods
            || view
                .pods
                .values()
                .any(|p| p.gang == g.name && p.terminating)
        {
            bad.push(format!(
                "(test) gang {} not whole at the end: {:?}",
                g.name,
                view.pods
                    .iter()
                    .filter(|(_, p)| p.gang == g.name)
                    .collect::<Vec<_>>()
            ));
        }
    }
    let mut free: BTreeMap<&str, u32> = view.nodes.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    for (node, pods) in view.held() {
        let used: u32 = pods.iter().map(|(_, p)| p.gpus).sum();
        let f = free.get_mut(node).expect("a node");
        *f = f.saturating_sub(used);
    }
    for g in &gangs {
        let m = min_member[&g.name];
        let holding = view.holding(&g.name);
        if holding > 0 && holding < m {
            bad.push(format!(
                "gang {} runs partial: {holding} of minMember {m} hold GPUs past the repair timeout",
                g.name
            ));
        }
        let waiting = view
            .pods
            .values()
            .any(|p| p.gang == g.name && p.node.is_none() && !p.terminating);
        let missing = m.saturating_sub(holding);
        let room: u32 = free.values().map(|f| f / g.gpus).sum();
        if waiting && missing > 0 && room >= missing {
            bad.push(format!(
                "gang {} waits ({missing} pods of {} GPUs to place) though they fit: free GPUs {free:?}",
                g.name, g.gpus
            ));
        }
    }
    let end = *service.progress.borrow();
    assert!(
        bad.is_empty(),
        "{}: {bad:#?}\npods {:#?}\nprogress {end:?}",
        ctx(&log),
        view.pods
    );
    let bound = gangs
        .iter()
        .filter(|g| view.holding(&g.name) >= min_member[&g.name])
        .count();
    let mid_bind = log
        .iter()
        .filter(|l| l.contains("bind in flight Some"))
        .count();
    eprintln!(
        "seed {seed}: {} steps ({mid_bind} node deletions mid-bind), {bound} of {} gangs bound, {} nodes left, {} repairs, {} binds, {} failed writes (last instance), {:.1} s",
        steps,
        gangs.len(),
        view.nodes.len(),
        end.repairs,
        end.written.binds,
        end.written.failed,
        started.elapsed().as_secs_f64()
    );
    if std::env::var("TRAINYARD_FAULT_SEED").is_ok() {
        eprintln!(
            "{}\nseen complete: {ever_complete:?}\npods {:#?}",
            ctx(&log),
            view.pods
        );
    }
    service.stop(&ctx(&log)).await;
}
