//! Benchmarks of the live service through the test API server over loopback
//! (issue 15).
//!
//! ```sh
//! cargo bench -p trainyard-serve --bench live -- <scenario> [options]
//! cargo bench -p trainyard-serve --bench live -- --help
//! ```
//!
//! Each scenario starts the test API server (`trainyard_testapi`) as a
//! child process (this binary run again with a hidden `__testapi`
//! argument), so its CPU time and memory are its own; creates the objects
//! through kube-rs with bounded concurrency; starts the service
//! (`trainyard_serve::run`) in this process on its own tokio runtime
//! (threads named `serve`), with short cycles; and measures from the API:
//! a watch of pods with `spec.nodeName` set (field selector
//! `spec.nodeName!=`, threads named `bench`), client-side timestamps.
//! Inputs are seeded (SplitMix64), so every run creates the same objects.
//! Every wait has a timeout and a stall check that fail with the counts
//! seen so far. Results are printed as a Markdown table, with CPU seconds
//! per process (server) and per runtime (service, harness) read from
//! `/proc`, resident memory, and the load average.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};
use trainyard_serve::{Progress, Settings};

type Res<T> = Result<T, String>;

const HELP: &str = "\
live: benchmarks of trainyard-serve through the test API server over loopback

USAGE: cargo bench -p trainyard-serve --bench live -- <scenario> [options]

SCENARIOS
  throughput   N nodes x 8 GPUs; P pods in gangs created first (not timed), then the
               service starts: pods bound per second, service RSS  (5000 nodes, 50000 pods)
  latency      the service runs; pods arrive in gangs at --rate pods/s: creation-to-bind
               p50/p99  (5000 nodes, 20000 pods, 1000/s)
  kai-fill     500 nodes x 8 GPUs; 4000 one-GPU jobs submitted: time until all bound
  kai-gang     500 nodes x 8 GPUs; one 512-pod gang (1 GPU each): time until all bound
  kai-reclaim  500 nodes x 8 GPUs full of queue a (quota 0); queue b (quota 8) submits
               one 1-GPU pod, --rounds times: time until it is bound (eviction included)
  server-binds the test server alone: a trivial client binds P pending pods (binding only,
               then patch + binding + Event as the service does), --bind-concurrency at once
  kai          kai-fill, kai-gang, kai-reclaim

OPTIONS
  --nodes N              nodes (8 GPUs each)
  --pods N               pods
  --rate R               arrival rate, pods/s (latency)
  --rounds N             reclaim rounds (kai-reclaim, default 5)
  --seed S               input seed (default 15)
  --bind-concurrency N   the service's bindConcurrency (default 16, the service's default)
  --nominate M           the service's nominateBeforeBind: gangs (default), always, never
  --create-concurrency N creations in flight (default 32)
  --cycle-ms N           the service's cyclePeriodMillis (default 100; debounce 10 ms)
  --timeout S            give up after S seconds of measuring (default 600)
  --stall S              give up when nothing was bound for S seconds (default 60)
";

#[derive(Clone, Debug)]
struct Args {
    scenario: String,
    nodes: Option<usize>,
    pods: Option<usize>,
    rate: f64,
    rounds: usize,
    seed: u64,
    bind_concurrency: usize,
    nominate: trainyard_serve::write::NominateBeforeBind,
    create_concurrency: usize,
    cycle_ms: u64,
    timeout: Duration,
    stall: Duration,
}

fn parse_args(args: &[String]) -> Res<Args> {
    let mut a = Args {
        scenario: String::new(),
        nodes: None,
        pods: None,
        rate: 1000.0,
        rounds: 5,
        seed: 15,
        bind_concurrency: 16,
        nominate: Default::default(),
        create_concurrency: 32,
        cycle_ms: 100,
        timeout: Duration::from_secs(600),
        stall: Duration::from_secs(60),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| -> Res<String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let num = |name: &str, v: String| -> Res<u64> {
            v.parse().map_err(|_| format!("{name}: not a number: {v}"))
        };
        match arg.as_str() {
            "--bench" => {} // cargo bench passes it
            "-h" | "--help" => return Err(String::new()),
            "--nodes" => a.nodes = Some(num(arg, value(arg)?)? as usize),
            "--pods" => a.pods = Some(num(arg, value(arg)?)? as usize),
            "--rate" => {
                let v = value(arg)?;
                a.rate = v
                    .parse()
                    .map_err(|_| format!("--rate: not a number: {v}"))?;
            }
            "--rounds" => a.rounds = num(arg, value(arg)?)? as usize,
            "--seed" => a.seed = num(arg, value(arg)?)?,
            "--bind-concurrency" => a.bind_concurrency = num(arg, value(arg)?)? as usize,
            "--nominate" => {
                let v = value(arg)?;
                a.nominate = serde_json::from_value(serde_json::Value::String(v.clone()))
                    .map_err(|_| format!("--nominate: gangs, always or never, not {v}"))?;
            }
            "--create-concurrency" => a.create_concurrency = num(arg, value(arg)?)? as usize,
            "--cycle-ms" => a.cycle_ms = num(arg, value(arg)?)?,
            "--timeout" => a.timeout = Duration::from_secs(num(arg, value(arg)?)?),
            "--stall" => a.stall = Duration::from_secs(num(arg, value(arg)?)?),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if a.scenario.is_empty() => a.scenario = s.to_string(),
            s => {
                return Err(format!(
                    "one scenario at a time (got {} and {s})",
                    a.scenario
                ));
            }
        }
    }
    if a.scenario.is_empty() {
        return Err(String::new());
    }
    Ok(a)
}

// ---------------------------------------------------------------- inputs

/// SplitMix64: a seeded, dependency-free generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Debug)]
struct Gang {
    name: String,
    queue: String,
    pods: usize,
    /// GPUs per pod (0: a CPU-only gang).
    gpus: u32,
}

/// Gangs of 1–8 pods adding up to `pods`, in queues q0–q3; `gpu_percent`
/// of the gangs ask one GPU per pod, the rest are CPU-only.
fn gangs(pods: usize, seed: u64, gpu_percent: u64) -> Vec<Gang> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    let mut left = pods;
    while left > 0 {
        let size = (1 + rng.below(8) as usize).min(left);
        let gpus = u32::from(rng.below(100) < gpu_percent);
        out.push(Gang {
            name: format!("g{:05}", out.len()),
            queue: format!("q{}", out.len() % 4),
            pods: size,
            gpus,
        });
        left -= size;
    }
    out
}

fn pod_json(name: &str, queue: &str, group: Option<&str>, gpus: u32) -> Value {
    let mut labels = json!({"trainyard.io/queue": queue});
    if let Some(g) = group {
        labels["trainyard.io/pod-group"] = json!(g);
    }
    let (cpu, mem) = if gpus > 0 {
        ("8", "64Gi")
    } else {
        ("2", "8Gi")
    };
    let mut requests = json!({"cpu": cpu, "memory": mem});
    let mut limits = json!({});
    if gpus > 0 {
        requests["nvidia.com/gpu"] = json!(gpus.to_string());
        limits["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    json!({
        "metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                 "resources": {"requests": requests, "limits": limits}}]}
    })
}

fn group_json(g: &Gang) -> Value {
    json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
           "metadata": {"name": g.name, "namespace": "ml"},
           "spec": {"queue": g.queue, "minMember": g.pods}})
}

/// The pods of `g` (a one-pod gang is a job of its own, without a PodGroup).
fn gang_pods(g: &Gang) -> Vec<Value> {
    let group = (g.pods > 1).then_some(g.name.as_str());
    (0..g.pods)
        .map(|i| pod_json(&format!("{}-{i}", g.name), &g.queue, group, g.gpus))
        .collect()
}

// ------------------------------------------------------ the server child

struct Server {
    child: Child,
    url: String,
}

impl Server {
    /// Starts this binary again as the test API server; `start_delay` is
    /// the simulated kubelet's (seconds from bind to Running), `None`: no
    /// kubelet. (Each kubelet step reads every pod under the server's one
    /// lock, every 100 ms: at 50,000 pods that alone fills a core.)
    fn spawn(start_delay: Option<i64>) -> Res<Server> {
        let start_delay = start_delay.map_or("off".to_string(), |d| d.to_string());
        use std::io::BufRead;
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut child = Command::new(exe)
            .args(["__testapi", &start_delay])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the test API server: {e}"))?;
        let out = child.stdout.take().ok_or("no stdout of the server")?;
        let mut line = String::new();
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| format!("reading the server's URL: {e}"))?;
        let url = line.trim().to_string();
        if !url.starts_with("http://") {
            return Err(format!("the test API server did not start: {line:?}"));
        }
        Ok(Server { child, url })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Closing its stdin ends it; kill in case it is stuck.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child: serves until its stdin closes (the parent exited).
fn run_testapi(start_delay: Option<i64>) -> Res<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut config = trainyard_testapi::Config::default();
        match start_delay {
            Some(d) => config.kubelet.start_delay = d,
            None => config.kubelet.enabled = false,
        }
        let server = trainyard_testapi::TestApiServer::start(config)
            .await
            .map_err(|e| e.to_string())?;
        println!("{}", server.url());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            let _ = tx.send(());
        });
        let _ = rx.await;
        drop(server);
        Ok(())
    })
}

// ------------------------------------------------------------- /proc

/// Clock ticks per second of /proc/*/stat (Linux's USER_HZ, 100 on every
/// mainstream configuration).
const TICKS: f64 = 100.0;

/// utime + stime of one stat line, in seconds, and its command name.
fn stat_cpu(text: &str) -> Option<(String, f64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 2..].split_whitespace().collect();
    // Fields after the comm: state is field 3, utime 14, stime 15.
    let utime: f64 = rest.get(11)?.parse().ok()?;
    let stime: f64 = rest.get(12)?.parse().ok()?;
    Some((comm, (utime + stime) / TICKS))
}

/// CPU seconds of a process.
fn process_cpu(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| stat_cpu(&t))
        .map_or(0.0, |(_, s)| s)
}

/// CPU seconds of this process's threads whose name starts with `prefix`.
fn threads_cpu(prefix: &str) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|t| stat_cpu(&t))
        .filter(|(c, _)| c.starts_with(prefix))
        .map(|(_, s)| s)
        .sum()
}

/// (VmRSS, VmHWM) in MiB of a process (`self` or a pid).
fn memory(pid: &str) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// CPU seconds of the server, the service and the harness.
#[derive(Clone, Copy, Debug, Default)]
struct Cpu {
    server: f64,
    service: f64,
    harness: f64,
}

impl Cpu {
    fn now(server: u32) -> Cpu {
        let service = threads_cpu("serve");
        // Every other thread of this process: the main thread, `bench`.
        let all = process_cpu(std::process::id());
        Cpu {
            server: process_cpu(server),
            service,
            harness: all - service,
        }
    }
    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            server: self.server - before.server,
            service: self.service - before.service,
            harness: self.harness - before.harness,
        }
    }
    fn text(self, wall: Duration) -> String {
        format!(
            "server {:.1} s, service {:.1} s, harness {:.1} s CPU in {:.1} s",
            self.server,
            self.service,
            self.harness,
            wall.as_secs_f64()
        )
    }
}

// ------------------------------------------------------------- the API

fn client(url: &str) -> Res<Client> {
    let uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let mut config = kube::Config::new(uri);
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(120));
    Client::try_from(config).map_err(|e| format!("client: {e}"))
}

fn trainyard(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainyard.io", "v1alpha1", kind),
        plural,
    )
}

/// Trainyard's CRDs, namespace `ml`, `nodes` nodes of 8 GPUs, and the
/// queues `(name, GPU quota)`.
async fn setup(c: &Client, nodes: usize, queues: &[(&str, u64)], conc: usize) -> Res<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    for f in ["queues", "podgroups", "topologies"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../deploy/crds/{f}.trainyard.io.yaml"));
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        crds.create(&PostParams::default(), &crd)
            .await
            .map_err(|e| format!("CRD {f}: {e}"))?;
    }
    let ns: Api<Namespace> = Api::all(c.clone());
    let ml: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "ml"}})).map_err(|e| e.to_string())?;
    ns.create(&PostParams::default(), &ml)
        .await
        .map_err(|e| format!("namespace: {e}"))?;
    let qs: Api<DynamicObject> = Api::all_with(c.clone(), &trainyard("Queue", "queues"));
    for (name, quota) in queues {
        let q: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {"quota": {"nvidia.com/gpu": quota}}}))
        .map_err(|e| e.to_string())?;
        qs.create(&PostParams::default(), &q)
            .await
            .map_err(|e| format!("queue {name}: {e}"))?;
    }
    let api: Api<Node> = Api::all(c.clone());
    futures::stream::iter(0..nodes)
        .map(|i| {
            let api = api.clone();
            async move {
                let name = format!("node-{i:05}");
                let n: Node = serde_json::from_value(json!({"metadata": {"name": name,
                    "labels": {"kubernetes.io/hostname": name}}}))
                .map_err(|e| e.to_string())?;
                api.create(&PostParams::default(), &n)
                    .await
                    .map_err(|e| format!("node {name}: {e}"))?;
                let res =
                    json!({"cpu": "192", "memory": "2048Gi", "pods": "110", "nvidia.com/gpu": "8"});
                api.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"allocatable": res, "capacity": res,
                        "conditions": [{"type": "Ready", "status": "True"}]}})),
                )
                .await
                .map_err(|e| format!("node {name} status: {e}"))?;
                Ok::<(), String>(())
            }
        })
        .buffer_unordered(conc.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Creates a gang (its PodGroup, then its pods at once); returns each
/// pod's name and the instant its creation returned.
async fn create_gang(c: &Client, g: &Gang) -> Res<Vec<(String, Instant)>> {
    if g.pods > 1 {
        let groups: Api<DynamicObject> =
            Api::namespaced_with(c.clone(), "ml", &trainyard("PodGroup", "podgroups"));
        let o: DynamicObject = serde_json::from_value(group_json(g)).map_err(|e| e.to_string())?;
        groups
            .create(&PostParams::default(), &o)
            .await
            .map_err(|e| format!("PodGroup {}: {e}", g.name))?;
    }
    let api: Api<Pod> = Api::namespaced(c.clone(), "ml");
    let creates = gang_pods(g).into_iter().map(|p| {
        let api = api.clone();
        async move {
            let pod: Pod = serde_json::from_value(p).map_err(|e| e.to_string())?;
            let name = pod.name_any();
            api.create(&PostParams::default(), &pod)
                .await
                .map_err(|e| format!("pod {name}: {e}"))?;
            Ok::<_, String>((name, Instant::now()))
        }
    });
    futures::future::try_join_all(creates).await
}

/// Creates every gang, `conc` gangs at once.
async fn create_gangs(c: &Client, gangs: &[Gang], conc: usize) -> Res<Vec<(String, Instant)>> {
    let done: Vec<Vec<(String, Instant)>> = futures::stream::iter(gangs)
        .map(|g| create_gang(c, g))
        .buffer_unordered(conc.max(1))
        .try_collect()
        .await?;
    Ok(done.into_iter().flatten().collect())
}

/// The number of the scenario running.
static SCENARIO: AtomicUsize = AtomicUsize::new(0);

/// Pods seen bound (first time, client clock) and pods seen deleted, from
/// a watch of namespace `ml` with `spec.nodeName!=`.
#[derive(Default)]
struct Binds {
    at: Mutex<HashMap<String, Instant>>,
    count: AtomicUsize,
    deleted: AtomicUsize,
    notify: Notify,
    /// The scenario it watches for ([`SCENARIO`]).
    scenario: usize,
}

impl Binds {
    fn start(c: &Client) -> Arc<Binds> {
        let binds = Arc::new(Binds {
            scenario: SCENARIO.load(Ordering::SeqCst),
            ..Binds::default()
        });
        let b = binds.clone();
        let api: Api<Pod> = Api::namespaced(c.clone(), "ml");
        tokio::spawn(async move {
            let config = watcher::Config::default().fields("spec.nodeName!=");
            let mut events = watcher(api, config).boxed();
            while let Some(e) = events.next().await {
                if b.over() {
                    return;
                }
                match e {
                    Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => {
                        let bound = p.spec.as_ref().is_some_and(|s| s.node_name.is_some());
                        if bound {
                            let mut at = b.at.lock().unwrap_or_else(|e| e.into_inner());
                            if let std::collections::hash_map::Entry::Vacant(v) =
                                at.entry(p.name_any())
                            {
                                v.insert(Instant::now());
                                b.count.fetch_add(1, Ordering::SeqCst);
                                b.notify.notify_waiters();
                            }
                        }
                    }
                    Ok(watcher::Event::Delete(_)) => {
                        b.deleted.fetch_add(1, Ordering::SeqCst);
                        b.notify.notify_waiters();
                    }
                    Ok(_) => {}
                    Err(_) if b.over() => return,
                    Err(e) => eprintln!("harness watch: {e}"),
                }
            }
        });
        binds
    }

    /// Its scenario ended (its server is gone): the watch stops quietly.
    fn over(&self) -> bool {
        SCENARIO.load(Ordering::SeqCst) != self.scenario
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    fn get(&self, name: &str) -> Option<Instant> {
        self.at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    }

    fn last(&self) -> Option<Instant> {
        self.at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .max()
            .copied()
    }

    fn first(&self) -> Option<Instant> {
        self.at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .min()
            .copied()
    }

    /// Waits until `done` holds; fails after `timeout`, or when the count
    /// has not moved for `stall`.
    async fn wait(
        &self,
        what: &str,
        done: impl Fn(&Binds) -> bool,
        timeout: Duration,
        stall: Duration,
        progress: Option<&watch::Receiver<Progress>>,
    ) -> Res<()> {
        let start = Instant::now();
        let mut last = (self.count(), self.deleted.load(Ordering::SeqCst), start);
        loop {
            let notified = self.notify.notified();
            if done(self) {
                return Ok(());
            }
            let state = (self.count(), self.deleted.load(Ordering::SeqCst));
            if (state.0, state.1) != (last.0, last.1) {
                last = (state.0, state.1, Instant::now());
            }
            let service = progress.map(|p| format!("; service: {:?}", *p.borrow()));
            if start.elapsed() > timeout {
                return Err(format!(
                    "timed out after {:?} waiting for {what}: {} pods seen bound, {} deleted{}",
                    timeout,
                    state.0,
                    state.1,
                    service.unwrap_or_default()
                ));
            }
            if last.2.elapsed() > stall {
                return Err(format!(
                    "stalled for {:?} waiting for {what}: {} pods seen bound, {} deleted{}",
                    stall,
                    state.0,
                    state.1,
                    service.unwrap_or_default()
                ));
            }
            let _ = tokio::time::timeout(Duration::from_millis(500), notified).await;
        }
    }
}

/// The service, in this process on its own runtime (threads `serve`).
struct Service {
    rt: Option<tokio::runtime::Runtime>,
    stop: watch::Sender<bool>,
    progress: watch::Receiver<Progress>,
}

impl Service {
    fn start(url: &str, args: &Args) -> Res<Service> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("serve")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let mut settings = Settings::default();
        settings.service.cycle_period_millis = args.cycle_ms;
        settings.service.debounce_millis = 10;
        settings.service.http_address = String::new();
        settings.service.bind_concurrency = args.bind_concurrency;
        settings.service.nominate_before_bind = args.nominate;
        let (stop, stop_rx) = watch::channel(false);
        let (progress_tx, progress) = watch::channel(Progress::default());
        let url = url.to_string();
        rt.spawn(async move {
            // The client is built here, so its connections live on this runtime.
            let c = match client(&url) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("service client: {e}");
                    return;
                }
            };
            if let Err(e) = trainyard_serve::run(c, settings, stop_rx, progress_tx).await {
                eprintln!("the service stopped: {e}");
            }
        });
        Ok(Service {
            rt: Some(rt),
            stop,
            progress,
        })
    }

    /// Waits for the first cycle (every watcher listed).
    async fn ready(&mut self, timeout: Duration) -> Res<()> {
        let wait = self.progress.wait_for(|p| p.cycles > 0);
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err("the service stopped before its first cycle".into()),
            Err(_) => Err(format!("the service ran no cycle within {timeout:?}")),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

// ---------------------------------------------------------- the report

struct Row {
    scenario: String,
    input: String,
    measure: String,
    value: String,
    target: String,
    met: String,
    notes: String,
}

fn row(
    scenario: &str,
    input: &str,
    measure: &str,
    value: String,
    target: &str,
    met: Option<bool>,
    notes: String,
) -> Row {
    Row {
        scenario: scenario.into(),
        input: input.into(),
        measure: measure.into(),
        value,
        target: target.into(),
        met: match met {
            Some(true) => "met".into(),
            Some(false) => "missed".into(),
            None => String::new(),
        },
        notes,
    }
}

fn print(rows: &[Row]) {
    println!("\n| scenario | input | measure | value | target | | CPU, memory, load |");
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.scenario, r.input, r.measure, r.value, r.target, r.met, r.notes
        );
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    if v.is_empty() {
        return Duration::ZERO;
    }
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

// ---------------------------------------------------------- scenarios

async fn throughput(a: &Args) -> Res<Vec<Row>> {
    let nodes = a.nodes.unwrap_or(5000);
    let pods = a.pods.unwrap_or(50_000);
    // No kubelet: the server's work is the scheduler's (see Server::spawn).
    let server = Server::spawn(None)?;
    let c = client(&server.url)?;
    let queues = [
        ("q0", 10_000),
        ("q1", 10_000),
        ("q2", 10_000),
        ("q3", 10_000),
    ];
    let t = Instant::now();
    setup(&c, nodes, &queues, a.create_concurrency).await?;
    let gangs = gangs(pods, a.seed, 70);
    let gpu_pods: usize = gangs.iter().filter(|g| g.gpus > 0).map(|g| g.pods).sum();
    if gpu_pods > nodes * 8 {
        return Err(format!(
            "{gpu_pods} one-GPU pods do not fit {nodes} nodes x 8 GPUs"
        ));
    }
    create_gangs(&c, &gangs, a.create_concurrency).await?;
    let created = t.elapsed();
    let binds = Binds::start(&c);
    let mem_before = memory("self");
    let load_at = load();
    eprintln!(
        "throughput: created {nodes} nodes, {} gangs, {pods} pods in {created:?}; load {load_at}",
        gangs.len()
    );
    let cpu0 = Cpu::now(server.pid());
    let t0 = Instant::now();
    let svc = Service::start(&server.url, a)?;
    binds
        .wait(
            "every pod bound",
            |b| b.count() >= pods,
            a.timeout,
            a.stall,
            Some(&svc.progress),
        )
        .await?;
    let wall = t0.elapsed();
    let cpu = Cpu::now(server.pid()).since(cpu0);
    let first = binds.first().map_or(Duration::ZERO, |f| f - t0);
    let last = binds.last().map_or(wall, |l| l - t0);
    let (rss, hwm) = memory("self");
    let (srss, _) = memory(&server.pid().to_string());
    let p = *svc.progress.borrow();
    let input = format!(
        "{nodes} nodes × 8 GPUs, {} gangs of 1–8, {pods} pods ({gpu_pods} with 1 GPU)",
        gangs.len()
    );
    let rate = pods as f64 / last.as_secs_f64();
    let steady = pods as f64 / (last - first).as_secs_f64().max(1e-9);
    let notes = format!(
        "{}; {} cycles, {} failed writes; load {}",
        cpu.text(wall),
        p.cycles,
        p.written.failed,
        load()
    );
    Ok(vec![
        row(
            "throughput",
            &input,
            "pods bound/s, service start to last bind seen",
            format!(
                "{rate:.0}/s ({pods} in {}; first bind at {}, then {steady:.0}/s)",
                secs(last),
                secs(first)
            ),
            "≥ 5,000/s",
            Some(rate >= 5000.0),
            notes,
        ),
        row(
            "memory",
            &input,
            "service process RSS after all binds (VmRSS / VmHWM)",
            format!(
                "{rss:.0} / {hwm:.0} MiB (before the service: {:.0} MiB)",
                mem_before.0
            ),
            "< 1 GiB",
            Some(hwm < 1024.0),
            format!("test server process: {srss:.0} MiB RSS"),
        ),
    ])
}

async fn latency(a: &Args) -> Res<Vec<Row>> {
    let nodes = a.nodes.unwrap_or(5000);
    let pods = a.pods.unwrap_or(20_000);
    let server = Server::spawn(None)?;
    let c = client(&server.url)?;
    let queues = [
        ("q0", 10_000),
        ("q1", 10_000),
        ("q2", 10_000),
        ("q3", 10_000),
    ];
    setup(&c, nodes, &queues, a.create_concurrency).await?;
    let gangs = gangs(pods, a.seed, 100);
    if pods > nodes * 8 {
        return Err(format!(
            "{pods} one-GPU pods do not fit {nodes} nodes x 8 GPUs"
        ));
    }
    let binds = Binds::start(&c);
    let mut svc = Service::start(&server.url, a)?;
    svc.ready(Duration::from_secs(120)).await?;
    eprintln!(
        "latency: {} gangs, {pods} pods at {}/s; load {}",
        gangs.len(),
        a.rate,
        load()
    );
    let cpu0 = Cpu::now(server.pid());
    let t0 = Instant::now();
    let tokio_t0 = tokio::time::Instant::now();
    let created: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let inflight = Arc::new(tokio::sync::Semaphore::new(a.create_concurrency.max(1)));
    let mut before = 0usize;
    let mut tasks = Vec::new();
    for g in gangs.clone() {
        let at = tokio_t0 + Duration::from_secs_f64(before as f64 / a.rate);
        before += g.pods;
        tokio::time::sleep_until(at).await;
        let permit = inflight
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let (c, created, errors) = (c.clone(), created.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            match create_gang(&c, &g).await {
                Ok(v) => created.lock().unwrap_or_else(|e| e.into_inner()).extend(v),
                Err(e) => errors.lock().unwrap_or_else(|e| e.into_inner()).push(e),
            }
            drop(permit);
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())?;
    }
    let arrival = t0.elapsed();
    if let Some(e) = errors.lock().unwrap_or_else(|e| e.into_inner()).first() {
        return Err(format!("creating pods: {e}"));
    }
    binds
        .wait(
            "every pod bound",
            |b| b.count() >= pods,
            a.timeout,
            a.stall,
            Some(&svc.progress),
        )
        .await?;
    let wall = t0.elapsed();
    let cpu = Cpu::now(server.pid()).since(cpu0);
    let mut lat: Vec<Duration> = created
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(|(n, at)| binds.get(n).map(|b| b.saturating_duration_since(*at)))
        .collect();
    let n = lat.len();
    let (p50, p99, max) = (pct(&mut lat, 0.5), pct(&mut lat, 0.99), pct(&mut lat, 1.0));
    let p = *svc.progress.borrow();
    Ok(vec![row(
        "latency",
        &format!(
            "{nodes} nodes × 8 GPUs, {} gangs of 1–8, {pods} pods of 1 GPU at {:.0} pods/s (achieved {:.0}/s)",
            gangs.len(),
            a.rate,
            pods as f64 / arrival.as_secs_f64()
        ),
        "creation-to-bind, p50 / p99 / max",
        format!(
            "{:.0} / {:.0} / {:.0} ms ({n} pods)",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        ),
        "p99 < 1 s",
        Some(p99 < Duration::from_secs(1)),
        format!(
            "{}; {} cycles, {} pending reports, {} failed writes; load {}",
            cpu.text(wall),
            p.cycles,
            p.reports,
            p.written.failed,
            load()
        ),
    )])
}

/// 500 nodes × 8 GPUs, queues, the service running.
async fn kai_cluster(
    a: &Args,
    queues: &[(&str, u64)],
) -> Res<(Server, Client, Arc<Binds>, Service)> {
    let server = Server::spawn(Some(0))?;
    let c = client(&server.url)?;
    setup(&c, a.nodes.unwrap_or(500), queues, a.create_concurrency).await?;
    let binds = Binds::start(&c);
    let mut svc = Service::start(&server.url, a)?;
    svc.ready(Duration::from_secs(120)).await?;
    Ok((server, c, binds, svc))
}

fn one_gpu_jobs(n: usize, queue: &str, prefix: &str) -> Vec<Gang> {
    (0..n)
        .map(|i| Gang {
            name: format!("{prefix}{i:05}"),
            queue: queue.into(),
            pods: 1,
            gpus: 1,
        })
        .collect()
}

async fn kai_fill(a: &Args) -> Res<Vec<Row>> {
    let jobs = a.pods.unwrap_or(4000);
    let (server, c, binds, svc) = kai_cluster(a, &[("q0", 4000)]).await?;
    let load_at = load();
    let cpu0 = Cpu::now(server.pid());
    let t0 = Instant::now();
    create_gangs(&c, &one_gpu_jobs(jobs, "q0", "j"), a.create_concurrency).await?;
    let created = t0.elapsed();
    binds
        .wait(
            "every job bound",
            |b| b.count() >= jobs,
            a.timeout,
            a.stall,
            Some(&svc.progress),
        )
        .await?;
    let wall = t0.elapsed();
    let cpu = Cpu::now(server.pid()).since(cpu0);
    let last = binds.last().map_or(wall, |l| l - t0);
    let p = *svc.progress.borrow();
    Ok(vec![row(
        "kai-fill",
        &format!(
            "{} nodes × 8 GPUs, {jobs} one-GPU jobs",
            a.nodes.unwrap_or(500)
        ),
        "first creation to last bind seen (creation alone)",
        format!("{} ({})", secs(last), secs(created)),
        "< 10 s (KAI: 6 min 38 s)",
        Some(last < Duration::from_secs(10)),
        format!(
            "{}; {} cycles; load {load_at} → {}",
            cpu.text(wall),
            p.cycles,
            load()
        ),
    )])
}

async fn kai_gang(a: &Args) -> Res<Vec<Row>> {
    let size = a.pods.unwrap_or(512);
    let (server, c, binds, svc) = kai_cluster(a, &[("q0", 4000)]).await?;
    let load_at = load();
    let g = Gang {
        name: "big".into(),
        queue: "q0".into(),
        pods: size,
        gpus: 1,
    };
    let cpu0 = Cpu::now(server.pid());
    let t0 = Instant::now();
    // The whole gang in flight at once, bounded like every other creation.
    let groups: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), "ml", &trainyard("PodGroup", "podgroups"));
    let o: DynamicObject = serde_json::from_value(group_json(&g)).map_err(|e| e.to_string())?;
    groups
        .create(&PostParams::default(), &o)
        .await
        .map_err(|e| format!("PodGroup: {e}"))?;
    let api: Api<Pod> = Api::namespaced(c.clone(), "ml");
    let created: Vec<Instant> = futures::stream::iter(gang_pods(&g))
        .map(|p| {
            let api = api.clone();
            async move {
                let pod: Pod = serde_json::from_value(p).map_err(|e| e.to_string())?;
                api.create(&PostParams::default(), &pod)
                    .await
                    .map_err(|e| format!("pod: {e}"))?;
                Ok::<_, String>(Instant::now())
            }
        })
        .buffer_unordered(a.create_concurrency.max(1))
        .try_collect()
        .await?;
    let last_created = created.iter().max().copied().unwrap_or(t0);
    binds
        .wait(
            "the gang bound",
            |b| b.count() >= size,
            a.timeout,
            a.stall,
            Some(&svc.progress),
        )
        .await?;
    let wall = t0.elapsed();
    let cpu = Cpu::now(server.pid()).since(cpu0);
    let last = binds.last().unwrap_or(t0 + wall);
    Ok(vec![row(
        "kai-gang",
        &format!(
            "{} nodes × 8 GPUs, empty; one {size}-pod gang of 1 GPU each",
            a.nodes.unwrap_or(500)
        ),
        "last pod created to last bind seen (first creation to last bind)",
        format!(
            "{} ({})",
            secs(last.saturating_duration_since(last_created)),
            secs(last - t0)
        ),
        "< 1 s (KAI: 48.7 s)",
        Some(last.saturating_duration_since(last_created) < Duration::from_secs(1)),
        format!("{}; load {load_at} → {}", cpu.text(wall), load()),
    )])
}

async fn kai_reclaim(a: &Args) -> Res<Vec<Row>> {
    let nodes = a.nodes.unwrap_or(500);
    let fill = nodes * 8;
    let (server, c, binds, svc) = kai_cluster(a, &[("a", 0), ("b", 8)]).await?;
    // A second watch with the service's parameters (all namespaces, no
    // selector): which deletions does a watcher like the service's see?
    let gone: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let gone = gone.clone();
        let api: Api<Pod> = Api::all(c.clone());
        let scenario = SCENARIO.load(Ordering::SeqCst);
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(e) = events.next().await {
                if SCENARIO.load(Ordering::SeqCst) != scenario {
                    return;
                }
                match e {
                    Ok(watcher::Event::Delete(p)) => gone
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(p.name_any()),
                    Err(e) => eprintln!("cluster-wide harness watch: {e}"),
                    _ => {}
                }
            }
        });
    }
    create_gangs(&c, &one_gpu_jobs(fill, "a", "a"), a.create_concurrency).await?;
    binds
        .wait(
            "the cluster full",
            |b| b.count() >= fill,
            a.timeout,
            a.stall,
            Some(&svc.progress),
        )
        .await?;
    let load_at = load();
    let cpu0 = Cpu::now(server.pid());
    let t0 = Instant::now();
    let mut times = Vec::new();
    for r in 0..a.rounds.max(1) {
        let g = Gang {
            name: format!("b{r:03}"),
            queue: "b".into(),
            pods: 1,
            gpus: 1,
        };
        let deleted = binds.deleted.load(Ordering::SeqCst);
        let created = create_gang(&c, &g).await?;
        let (name, at) = created.first().cloned().ok_or("no pod created")?;
        if let Err(e) = binds
            .wait(
                &format!("{name} bound"),
                |b| b.get(&name).is_some(),
                a.timeout,
                a.stall,
                Some(&svc.progress),
            )
            .await
        {
            let seen = gone.lock().unwrap_or_else(|e| e.into_inner()).join(" ");
            return Err(format!(
                "{e}\n{}\ndeletions seen by a cluster-wide watch like the service's: {seen}",
                explain(&c, &name).await
            ));
        }
        let bound = binds.get(&name).unwrap_or(at);
        times.push(bound.saturating_duration_since(at));
        let evicted = binds.deleted.load(Ordering::SeqCst) - deleted;
        eprintln!(
            "reclaim round {r}: {:?}, {evicted} pod(s) of queue a gone",
            bound.saturating_duration_since(at)
        );
    }
    let wall = t0.elapsed();
    let cpu = Cpu::now(server.pid()).since(cpu0);
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    let max = times.iter().max().copied().unwrap_or_default();
    let p = *svc.progress.borrow();
    Ok(vec![row(
        "kai-reclaim",
        &format!(
            "{nodes} nodes × 8 GPUs full ({fill} one-GPU pods of queue a, quota 0); queue b (quota 8) submits one 1-GPU pod, {} rounds",
            times.len()
        ),
        "creation to bind seen, mean (max)",
        format!("{} ({})", secs(mean), secs(max)),
        "< 2 s (KAI: 13.9 s)",
        Some(mean < Duration::from_secs(2)),
        format!(
            "{}; {} evictions written; load {load_at} → {}",
            cpu.text(wall),
            p.written.evictions,
            load()
        ),
    )])
}

/// The pod's status and its Events, for an error message.
async fn explain(c: &Client, name: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(c.clone(), "ml");
    let status = match pods.get(name).await {
        Ok(p) => serde_json::to_string(&p.status).unwrap_or_default(),
        Err(e) => format!("{e}"),
    };
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "ml");
    let lp = kube::api::ListParams::default().fields(&format!("involvedObject.name={name}"));
    let events = match events.list(&lp).await {
        Ok(l) => l
            .items
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.clone().unwrap_or_default(),
                    e.message.clone().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n  "),
        Err(e) => format!("{e}"),
    };
    let node = pods
        .get(name)
        .await
        .ok()
        .and_then(|p| p.status.and_then(|s| s.nominated_node_name));
    let on_node = match node {
        Some(n) => {
            let lp = kube::api::ListParams::default().fields(&format!("spec.nodeName={n}"));
            match Api::<Pod>::all(c.clone()).list(&lp).await {
                Ok(l) => format!(
                    "pods the API shows on {n}: {}",
                    l.items
                        .iter()
                        .map(|p| p.name_any())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                Err(e) => format!("{e}"),
            }
        }
        None => String::new(),
    };
    format!("{name} status: {status}\n{name} events:\n  {events}\n{on_node}")
}

/// How fast the test server alone accepts binds from a trivial client.
async fn server_binds(a: &Args) -> Res<Vec<Row>> {
    let pods = a.pods.unwrap_or(20_000);
    let server = Server::spawn(None)?;
    let c = client(&server.url)?;
    setup(&c, 8, &[("q0", 100)], a.create_concurrency).await?;
    let jobs = one_gpu_jobs(pods * 2, "q0", "s");
    create_gangs(&c, &jobs, a.create_concurrency).await?;
    let binds = Binds::start(&c);
    binds
        .wait("the watch", |_| true, a.timeout, a.stall, None)
        .await?;
    let mut rows = Vec::new();
    for (variant, batch) in [
        ("binding only", &jobs[..pods]),
        (
            "annotation patch + binding + Event, as the service",
            &jobs[pods..],
        ),
    ] {
        let full = variant.starts_with("annotation");
        let load_at = load();
        let cpu0 = Cpu::now(server.pid());
        let before = binds.count();
        let t0 = Instant::now();
        let api: Api<Pod> = Api::namespaced(c.clone(), "ml");
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "ml");
        futures::stream::iter(batch.iter().enumerate())
            .map(|(i, g)| {
                let (api, events) = (api.clone(), events.clone());
                async move {
                    let name = format!("{}-0", g.name);
                    let node = format!("node-{:05}", i % 8);
                    if full {
                        api.patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"metadata": {"annotations": {"trainyard.io/gpu-indices": "0"}}})),
                        )
                        .await
                        .map_err(|e| format!("patch {name}: {e}"))?;
                    }
                    let binding = json!({"apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": name, "namespace": "ml"},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
                    api.create_subresource::<Value, Value>("binding", &name, &PostParams::default(), &binding)
                        .await
                        .map_err(|e| format!("bind {name}: {e}"))?;
                    if full {
                        let ev: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
                            "metadata": {"generateName": format!("{name}."), "namespace": "ml"},
                            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": "ml"},
                            "reason": "Scheduled", "message": format!("Successfully assigned ml/{name} to {node}"),
                            "type": "Normal", "source": {"component": "bench"}, "count": 1}))
                        .map_err(|e| e.to_string())?;
                        events
                            .create(&PostParams::default(), &ev)
                            .await
                            .map_err(|e| format!("event {name}: {e}"))?;
                    }
                    Ok::<(), String>(())
                }
            })
            .buffer_unordered(a.bind_concurrency.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        let written = t0.elapsed();
        binds
            .wait(
                "the binds seen",
                |b| b.count() >= before + batch.len(),
                a.timeout,
                a.stall,
                None,
            )
            .await?;
        let wall = t0.elapsed();
        let cpu = Cpu::now(server.pid()).since(cpu0);
        rows.push(row(
            "server-binds",
            &format!(
                "{pods} pending pods, {variant}, {} at once",
                a.bind_concurrency
            ),
            "binds/s written (last seen by the watch)",
            format!(
                "{:.0}/s ({:.0}/s)",
                batch.len() as f64 / written.as_secs_f64(),
                batch.len() as f64 / wall.as_secs_f64()
            ),
            "",
            None,
            format!(
                "{} ({:.0} µs server CPU per bind); load {load_at} → {}",
                cpu.text(wall),
                cpu.server * 1e6 / batch.len() as f64,
                load()
            ),
        ));
    }
    Ok(rows)
}

async fn run(a: Args) -> Res<Vec<Row>> {
    let mut rows = Vec::new();
    let scenarios: Vec<&str> = match a.scenario.as_str() {
        "kai" => vec!["kai-fill", "kai-gang", "kai-reclaim"],
        s => vec![s],
    };
    let mut failed = false;
    for s in scenarios {
        eprintln!("{s}: load {}", load());
        let result = match s {
            "throughput" => throughput(&a).await,
            "latency" => latency(&a).await,
            "kai-fill" => kai_fill(&a).await,
            "kai-gang" => kai_gang(&a).await,
            "kai-reclaim" => kai_reclaim(&a).await,
            "server-binds" => server_binds(&a).await,
            other => return Err(format!("unknown scenario {other}; see --help")),
        };
        SCENARIO.fetch_add(1, Ordering::SeqCst);
        match result {
            Ok(r) => rows.extend(r),
            Err(e) => {
                // The other scenarios still run; the failure is a row and the exit code.
                eprintln!("live bench {s}: {e}");
                let first = e.lines().next().unwrap_or_default().replace('|', "/");
                rows.push(row(s, "", "failed", first, "", Some(false), load()));
                failed = true;
            }
        }
    }
    print(&rows);
    if failed {
        return Err("a scenario failed (above)".into());
    }
    Ok(Vec::new())
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("__testapi") {
        let delay = argv.get(1).and_then(|d| d.parse().ok());
        if let Err(e) = run_testapi(delay) {
            eprintln!("test API server: {e}");
            std::process::exit(1);
        }
        return;
    }
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            print!("{HELP}");
            return;
        }
        Err(e) => {
            eprintln!("{e}\n\n{HELP}");
            std::process::exit(2);
        }
    };
    // RUST_LOG=trainyard_serve=info shows the service's cycles; quiet by default.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = rt.block_on(run(args.clone()));
    rt.shutdown_background();
    match result {
        Ok(_) => {}
        Err(e) => {
            eprintln!("live bench {}: {e}", args.scenario);
            std::process::exit(1);
        }
    }
}
