//! `--api`: the gRPC API's answers (`trainyard-api`) on the latest cycle
//! of a large cluster, timed as the service computes them (the functions
//! the RPCs call, without the transport), and the cost they put on the
//! scheduling cycle when a reader works beside it.
//!
//! The cluster: `--nodes` (5,000) nodes × 8 GPUs and one pending gang per
//! node (about 50,000 pods); the cycle that places what fits is the
//! "latest cycle" the API reads. GetSnapshot writes one object per node
//! and per pod; the pods carry what a training pod's spec usually holds
//! (environment, volumes, conditions: about 2 KB of YAML each), without
//! `managedFields`, as the service keeps them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trainyard_api::{pb, service, snapshot};
use trainyard_bench::workloads;
use trainyard_model::{Snapshot, Timestamp};
use trainyard_sched::{Config, schedule};
use trainyard_serve::view::{CycleView, LiveView};

/// The suite; see the module documentation.
pub fn api_bench(runs: usize, nodes: usize) -> anyhow::Result<()> {
    let snap = Arc::new(workloads::allocate_cluster(
        workloads::ALLOCATE_SEED,
        nodes,
        nodes,
    ));
    let cfg = Config::default();
    let now = Timestamp(0);
    let pods: usize = snap.jobs.iter().map(|j| j.tasks.len()).sum();
    let mut cycle_alone = Vec::new();
    let mut decisions = None;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let d = schedule(&snap, &cfg, now);
        cycle_alone.push(t.elapsed());
        decisions = Some(d);
    }
    let decisions = decisions.ok_or_else(|| anyhow::anyhow!("no run"))?;
    let view = LiveView::new("trainyard", "default");
    let c = Arc::new(CycleView {
        number: 1,
        now,
        snapshot: Arc::clone(&snap),
        decisions: Arc::new(decisions),
        config: Arc::new(cfg.clone()),
        writes_in_flight: 0,
    });
    let objects = objects(&snap);
    let cycle = median(cycle_alone.clone());
    println!(
        "input: {} nodes × 8 GPUs, {} jobs, {pods} pods; {} bound and {} pending jobs after the cycle\n",
        snap.nodes.len(),
        snap.jobs.len(),
        c.decisions.binds.len(),
        c.decisions.pending.len(),
    );
    println!(
        "| call | runs | median | p99 | against the cycle ({:.1} ms) |",
        ms(cycle)
    );
    println!("|---|---|---|---|---|");
    // ExplainJob: every pending job (at most 2,000), one call each.
    let ids: Vec<(String, String)> = c
        .decisions
        .pending
        .iter()
        .take(2000)
        .filter_map(|p| {
            let (ns, n) = p.job.as_str().split_once('/')?;
            Some((ns.to_string(), n.to_string()))
        })
        .collect();
    let explain = time_each(&ids, |(ns, name)| {
        let r = pb::ExplainJobRequest {
            namespace: ns.clone(),
            name: name.clone(),
        };
        service::explain_job(&c, &r).map(|_| ())
    })?;
    row("ExplainJob (a pending job)", &explain, cycle);
    let list = time_each(&vec![(); runs.max(1)], |_| {
        service::list_jobs(&c, &pb::ListJobsRequest::default());
        Ok(())
    })?;
    row("ListJobs (every job)", &list, cycle);
    let queues = time_each(&vec![(); runs.max(1)], |_| {
        service::list_queues(&c);
        Ok(())
    })?;
    row("ListQueues", &queues, cycle);
    // WhatIf: a pending gang resized to twice its pods.
    let resize: Vec<pb::WhatIfRequest> = ids
        .iter()
        .take(runs.max(1))
        .map(|(ns, name)| pb::WhatIfRequest {
            job: Some(pb::what_if_request::Job::Resize(pb::Resize {
                namespace: ns.clone(),
                name: name.clone(),
                pods: 2,
                ..Default::default()
            })),
        })
        .collect();
    let whatif = time_each(&resize, |r| {
        service::what_if(&view, &c, r.clone()).map(|_| ())
    })?;
    row("WhatIf (a pending job resized)", &whatif, cycle);
    let snapshot = time_each(&vec![(); runs.max(1)], |_| {
        snapshot::response(&c, objects.clone()).map(|_| ())
    })?;
    row(
        &format!("GetSnapshot ({} objects)", objects.len()),
        &snapshot,
        cycle,
    );
    dashboard_rows(&c, runs, cycle)?;
    // The cycle alone and with a reader beside it asking without pause,
    // in pairs, alternating which goes first, so that neither runs on a
    // colder heap or a quieter machine than the other.
    let reader = Reader::start(Arc::clone(&c), ids.clone(), objects);
    let (mut cycle_alone, mut cycle_beside, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs.max(1) {
        let mut pair = [Duration::ZERO; 2];
        for k in [i % 2, 1 - i % 2] {
            reader.set_active(k == 1);
            let t = Instant::now();
            let d = schedule(&snap, &cfg, now);
            pair[k] = t.elapsed();
            drop(d);
        }
        reader.set_active(false);
        cycle_alone.push(pair[0]);
        cycle_beside.push(pair[1]);
        ratios.push(pair[1].as_secs_f64() / pair[0].as_secs_f64().max(1e-9));
    }
    let calls = reader.stop()?;
    let cycle = median(cycle_alone);
    let beside = median(cycle_beside);
    // The shell's part each cycle: the cycle published to the view (the
    // snapshot and decisions shared, the config copied), as
    // `serve::shell` does it.
    let publish = time_each(&vec![(); runs.max(1)], |_| {
        view.publish(CycleView {
            number: 2,
            now,
            snapshot: Arc::clone(&c.snapshot),
            decisions: Arc::clone(&c.decisions),
            config: Arc::new((*c.config).clone()),
            writes_in_flight: 0,
        });
        Ok(())
    })?;
    println!(
        "\n| cycle ({} pairs, alternating) | median | change (median of the pairs' ratios) |\n|---|---|---|\n| alone | {:.1} ms | |\n| with a reader calling ExplainJob, ListJobs and GetSnapshot without pause ({calls} calls) | {:.1} ms | {:+.1}% |\n| the shell publishing the cycle to the view (per cycle) | {:.1} µs | {:+.3}% of the cycle |",
        ratios.len(),
        ms(cycle),
        ms(beside),
        (median_f64(ratios) - 1.0) * 100.0,
        ms(median(publish.clone())) * 1e3,
        ms(median(publish)) / ms(cycle) * 100.0,
    );
    Ok(())
}

/// The dashboard's server side (`trainyard_api::ui`): the job list
/// printed as the page reads it, the GPU map (the core's accounting of
/// devices, then the JSON), and the record's work per cycle.
fn dashboard_rows(c: &CycleView, runs: usize, cycle: Duration) -> anyhow::Result<()> {
    use trainyard_api::ui::{gpus, record};
    let printer = trainyard_api::json::Printer::new(false)?;
    let all = service::list_jobs(c, &pb::ListJobsRequest::default());
    let once = vec![(); runs.max(1)];
    let print = time_each(&once, |_| {
        let text = trainyard_api::ui::print_jobs(&printer, Some(c), &all)
            .map_err(|e| trainyard_api::ApiError::Unavailable(e.message().to_string()))?;
        std::hint::black_box(text);
        Ok(())
    })?;
    row(
        &format!(
            "/ui/api/jobs: ListJobs printed as JSON with each job's placement ({} jobs)",
            all.jobs.len()
        ),
        &print,
        cycle,
    );
    let map = time_each(&once, |_| {
        let h = trainyard_sched::holdings(&c.snapshot, &c.config, c.now);
        let m = gpus::map(c, &h, &trainyard_api::auth::Visible::All, None);
        std::hint::black_box(m.to_string());
        Ok(())
    })?;
    row("/ui/api/gpus: the GPU map (holdings and JSON)", &map, cycle);
    let observe = time_each(&once, |_| {
        let mut r = record::Record::default();
        r.observe(c);
        std::hint::black_box(r.history());
        Ok(())
    })?;
    row(
        "the dashboard's record of one cycle (first)",
        &observe,
        cycle,
    );
    Ok(())
}

/// A thread calling ExplainJob (50 jobs), ListJobs and GetSnapshot in
/// a loop while active, parked while not.
struct Reader {
    shared: Arc<ReaderFlags>,
    thread: std::thread::JoinHandle<u64>,
}

#[derive(Default)]
struct ReaderFlags {
    active: AtomicBool,
    /// Set by the reader when it has seen `active` false and is about to
    /// park (it does no work until woken).
    idle: AtomicBool,
    stop: AtomicBool,
}

impl Reader {
    fn start(c: Arc<CycleView>, ids: Vec<(String, String)>, objects: Vec<Arc<Value>>) -> Self {
        let shared = Arc::new(ReaderFlags::default());
        let flags = Arc::clone(&shared);
        let thread = std::thread::spawn(move || {
            let mut calls = 0u64;
            while !flags.stop.load(Ordering::SeqCst) {
                if !flags.active.load(Ordering::SeqCst) {
                    flags.idle.store(true, Ordering::SeqCst);
                    std::thread::park();
                    continue;
                }
                for (ns, name) in ids.iter().take(50) {
                    let r = pb::ExplainJobRequest {
                        namespace: ns.clone(),
                        name: name.clone(),
                    };
                    let _ = service::explain_job(&c, &r);
                }
                let _ = service::list_jobs(&c, &pb::ListJobsRequest::default());
                let _ = snapshot::response(&c, objects.clone());
                calls += 52;
            }
            calls
        });
        Reader { shared, thread }
    }

    /// Starts the reader, or stops it and waits until it is idle.
    fn set_active(&self, on: bool) {
        if on {
            self.shared.idle.store(false, Ordering::SeqCst);
            self.shared.active.store(true, Ordering::SeqCst);
            self.thread.thread().unpark();
            return;
        }
        self.shared.active.store(false, Ordering::SeqCst);
        while !self.shared.idle.load(Ordering::SeqCst) {
            self.thread.thread().unpark();
            std::thread::yield_now();
        }
    }

    /// Ends the thread; the calls it made.
    fn stop(self) -> anyhow::Result<u64> {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.thread.thread().unpark();
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the reader thread panicked"))
    }
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(1.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    let i = (v.len() * 99).div_ceil(100).saturating_sub(1);
    v.get(i).copied().unwrap_or_default()
}

/// Runs `f` once per input, timing each call.
fn time_each<T>(
    inputs: &[T],
    mut f: impl FnMut(&T) -> Result<(), trainyard_api::ApiError>,
) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(inputs.len());
    for x in inputs {
        let t = Instant::now();
        f(x).map_err(|e| anyhow::anyhow!("{e}"))?;
        out.push(t.elapsed());
    }
    Ok(out)
}

fn row(call: &str, times: &[Duration], cycle: Duration) {
    let (m, p) = (median(times.to_vec()), p99(times.to_vec()));
    println!(
        "| {call} | {} | {:.2} ms | {:.2} ms | {:.2}× |",
        times.len(),
        ms(m),
        ms(p),
        ms(m) / ms(cycle).max(1e-9),
    );
}

/// The snapshot's nodes and pods as the watches would show them.
fn objects(snap: &Snapshot) -> Vec<Arc<Value>> {
    let mut out: Vec<Value> = snap
        .nodes
        .iter()
        .map(|n| {
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n.name, "labels": n.labels},
                "status": {"allocatable": {"cpu": "192", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"}}})
        })
        .collect();
    for job in &snap.jobs {
        for t in job.tasks.iter() {
            out.push(pod(
                &job.id,
                &t.key.namespace,
                &t.key.name,
                t.requests.gpu / 1000,
            ));
        }
    }
    out.into_iter().map(Arc::new).collect()
}

/// A training pod of job `job`.
fn pod(job: &str, namespace: &str, name: &str, gpus: u64) -> Value {
    let env: Vec<Value> = (0..12)
        .map(|i| json!({"name": format!("TRAINING_SETTING_{i}"), "value": format!("value-{i}")}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}"),
            "labels": {"trainyard.io/pod-group": job.rsplit('/').next().unwrap_or(job), "app": "train"},
            "creationTimestamp": "2026-11-22T09:00:00Z"},
        "spec": {"schedulerName": "trainyard", "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "registry.example.com/team/trainer:2026.11",
                "command": ["torchrun", "--nproc-per-node=8", "train.py"], "env": env,
                "resources": {"requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "shm", "mountPath": "/dev/shm"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
                        {"name": "shm", "emptyDir": {"medium": "Memory"}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "lastTransitionTime": "2026-11-22T09:00:01Z"}]}})
}
