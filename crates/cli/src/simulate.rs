//! `trainyard simulate`: file I/O, policies in parallel, progress bars,
//! outputs. The simulation itself is `trainyard_sim::simulate`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use trainyard_ingest::{LoadOptions, Source};
use trainyard_model::{QueueSpec, QueueTree, Timestamp};
use trainyard_sched::Config;
use trainyard_sim::forecast::eval::{Evaluation, evaluate};
use trainyard_sim::openb::{
    ImportOptions, QueueRule, default_priority_by_qos, parse_priority_by_qos,
};
use trainyard_sim::preemption::{EvictionModel, LostWork, PreemptionSettings};
use trainyard_sim::spec::{Fault, Slowdown, parse_duration_ms};
use trainyard_sim::{SimInput, SimJob, SimOptions, SimOutput, Summary, output, report};

use crate::progress;
use crate::render::group_warnings;

/// What `trainyard simulate` prints on stdout.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SimFormat {
    /// The summary table (one column per policy) and each run's event count and wall time.
    Table,
    /// The summary metrics as a JSON array with one object per policy (jobs,
    /// completed, rejected, wait and JCT percentiles, GPU allocation, fairness,
    /// reclaims, preemptions, lost GPU-hours, ...), as comparison.json;
    /// each object is that policy's summary.json.
    Json,
}

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub mode: Option<Mode>,
    /// Cluster: a ClusterSpec YAML (node pools, faults) or an openb node list CSV.
    #[arg(long, value_name = "FILE", required = true)]
    cluster: Option<PathBuf>,
    /// Queue documents (the same `kind: Queue` files `trainyard schedule` reads).
    /// Without it, every queue a job names is created at the top level with no quota.
    #[arg(long, value_name = "FILE")]
    queues: Option<PathBuf>,
    /// Workload: a `Workload` job list, a `WorkloadGenerator`, or a Kubernetes
    /// object dump (`kubectl get pods,podgroups -A -o yaml`: Pods and their
    /// PodGroups, whose pending jobs are replayed) (YAML or JSON).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "trace",
        required_unless_present = "trace"
    )]
    workload: Option<PathBuf>,
    /// Run time of the jobs of a Kubernetes object dump that have no
    /// `trainyard.io/duration` annotation on their PodGroup or pods (e.g. 2h).
    #[arg(long, value_name = "DURATION", requires = "workload")]
    default_duration: Option<String>,
    /// An Alibaba openb pod list CSV (cluster-trace-gpu-v2023) to replay.
    #[arg(long, value_name = "CSV")]
    trace: Option<PathBuf>,
    /// How trace pods map to queues: `single:<queue>`, `hash:<q1>,<q2>,...`
    /// (stable hash of the pod name), or `qos:LS=<q>,Guaranteed=<q>,Burstable=<q>,BE=<q>`
    /// (an entry `default=<q>` catches other qos values).
    #[arg(
        long,
        value_name = "RULE",
        default_value = "qos:LS=prod,Guaranteed=prod,Burstable=research,BE=dev"
    )]
    queue_rule: String,
    /// Job priority of trace pods by their `qos`: `<qos>=<priority>,...`
    /// (an entry `default=<priority>` catches other qos values).
    #[arg(
        long,
        value_name = "MAP",
        default_value = "LS=1000,Guaranteed=800,Burstable=500,BE=100"
    )]
    qos_priority: String,
    /// Only the first N rows of the trace.
    #[arg(long, value_name = "N")]
    trace_rows: Option<usize>,
    /// For a trace without time columns (the openb `multigpu*` lists):
    /// take `gpu_spec`, `qos`, arrival and run time from this full list
    /// of the same trace (`openb_pod_list_default.csv`): by name for the
    /// pods it has, from hashed rows of the same GPU request for the
    /// others (docs/simulator.md, "Replaying openb in time").
    #[arg(long, value_name = "CSV")]
    trace_times: Option<PathBuf>,
    /// Divide every trace arrival time by X (a whole number; run times
    /// stay as recorded): the published trace fills its cluster to about
    /// 2%, so contention needs denser arrivals.
    #[arg(long, value_name = "X", default_value_t = 1)]
    trace_speedup: u32,
    /// Scheduler config(s) to compare; repeat to run the same workload under
    /// each (on all cores) and get one comparison table and report.
    /// Without it, the default config runs.
    #[arg(long = "policy", value_name = "FILE")]
    policies: Vec<PathBuf>,
    /// Scheduling cycle period: cycles run at multiples of it after a change.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    period: String,
    /// Stop at this simulated time (e.g. 7d).
    #[arg(long, value_name = "DURATION")]
    until: Option<String>,
    /// Communication slowdown model: a multi-node job runs
    /// 1 + X × spine_crossings / hops times longer. Overrides the cluster
    /// spec's `slowdown.perSpineCrossing`; 0 turns it off. Needs a topology.
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    slowdown_per_spine_crossing: Option<String>,
    /// Grace period of evicted pods: they keep their GPUs this long, then
    /// are removed (e.g. 30s, 0). Overrides the workload's
    /// `spec.preemption.graceSeconds`; default 30s.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    eviction_grace: Option<String>,
    /// What a killed job loses (evictions and node failures): `restart`
    /// (all work since its start) or `checkpoint:<interval>` (the work since
    /// its last checkpoint, e.g. checkpoint:30m). Overrides the workload's
    /// `spec.preemption.lostWork`; jobs that set their own keep it.
    #[arg(long, value_name = "MODEL", allow_hyphen_values = true)]
    lost_work: Option<String>,
    /// Give every job that declares no walltime one of its run time × X
    /// (1 to 1000; e.g. 2: users' walltimes overestimate runs twice).
    /// Reservations and backfill need walltimes (docs/scheduling.md).
    #[arg(long, value_name = "X")]
    walltime_factor: Option<f64>,
    /// Also measure start-time forecasts (docs/forecasts.md): at the first
    /// cycle that sees each job, and again at the first cycle an hour
    /// (--forecast-later) after its arrival if it still waits, forecast its
    /// start by running the engine forward from that cycle's snapshot (no
    /// later arrivals), then compare with when it really started. Prints
    /// the error table by size class; with --out also writes forecasts.csv
    /// (one row per job) and forecast-errors.md. Slower: each forecast is a
    /// simulation of its own.
    #[arg(long)]
    pub(crate) forecast_eval: bool,
    /// Sampled runs per forecast, for its p10–p90 range (only where some
    /// runtime is estimated from observed runtimes; walltimes are exact).
    #[arg(
        long,
        default_value_t = 4,
        value_name = "N",
        requires = "forecast_eval"
    )]
    pub(crate) forecast_samples: u32,
    /// How far a forecast looks ahead; later starts count as starting at
    /// the horizon's end.
    #[arg(
        long,
        default_value = "7d",
        value_name = "DURATION",
        requires = "forecast_eval"
    )]
    pub(crate) forecast_horizon: String,
    /// Cycles of a forecast grow apart with the look-ahead: at a lead L,
    /// about L / X apart (never closer than --period); 0: a cycle at every
    /// change, exact and slow.
    #[arg(
        long,
        default_value_t = 20,
        value_name = "X",
        requires = "forecast_eval"
    )]
    pub(crate) forecast_stretch: u32,
    /// When the second forecast of a job that still waits is taken.
    #[arg(
        long,
        default_value = "1h",
        value_name = "DURATION",
        requires = "forecast_eval"
    )]
    pub(crate) forecast_later: String,
    /// Write jobs.csv, queues.csv, summary.json, timing.json and report.html here
    /// (one sub-directory per policy when several, plus comparison files).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Output format on stdout.
    #[arg(long, short, value_enum, default_value_t = SimFormat::Table)]
    pub(crate) output: SimFormat,
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))
}

pub(crate) fn duration(s: &str, flag: &str) -> Result<u64> {
    parse_duration_ms(&serde_json::Value::String(s.to_string()))
        .map_err(|e| anyhow::anyhow!("{flag} {s:?}: {e}"))
}

/// One policy's run: its output, wall seconds, and the forecasts'
/// evaluation when asked for.
type Run = (SimOutput, f64, Option<Evaluation>);

struct Policy {
    name: String,
    config: Config,
}

fn policies(paths: &[PathBuf]) -> Result<Vec<Policy>> {
    if paths.is_empty() {
        return Ok(vec![Policy {
            name: "default".into(),
            config: Config::default(),
        }]);
    }
    let mut out: Vec<Policy> = Vec::new();
    for p in paths {
        let name = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("policy")
            .to_string();
        if out.iter().any(|o| o.name == name) {
            bail!(
                "{}: two policies named {name:?}; policy names come from file names",
                p.display()
            );
        }
        out.push(Policy {
            name,
            config: crate::load_config(p)?,
        });
    }
    Ok(out)
}

/// Other simulation modes.
#[derive(clap::Subcommand, Debug)]
pub enum Mode {
    /// Reproduce the FGD paper's GPU-sharing experiment (ATC'23) on openb traces.
    ///
    /// Arrival-only replay as in `openb/FGD-EXPERIMENT.md`: for every workload,
    /// policy and seed, the pods are shuffled, inflated by resampling to 130% of
    /// the cluster's GPU capacity, and placed one by one (a pod that fits nowhere
    /// fails; nothing leaves). Prints "unallocated GPU % at 100% arrived, mean ± sd
    /// over seeds" per workload and policy, next to the published values when
    /// --reference is given. With --out writes results.md, runs.csv (one row per
    /// run), curves.csv (unallocated and fragmented GPU % per arrived-% bin:
    /// median and quartiles over seeds), summary.json and report.html (plots).
    /// Runs are spread over all cores.
    ///
    /// Examples:
    ///
    ///   trainyard simulate fgd --workload ../shared/data/openb/openb_pod_list_default.csv \
    ///       --policy fgd --policy trainyard --seeds 42..51
    ///
    ///   trainyard simulate fgd --workload ../shared/data/openb/openb_pod_list_*.csv \
    ///       --policy all --seeds 42..51 --reference ../shared/data/fgd-reference.md --out results/fgd
    #[command(verbatim_doc_comment)]
    Fgd(crate::fgd::FgdArgs),
}

pub fn run(args: SimulateArgs) -> Result<()> {
    match args.mode {
        Some(Mode::Fgd(a)) => return crate::fgd::run(a),
        None => {}
    }
    let wall = Instant::now();
    // Cluster (required by clap when no mode is given).
    let cluster = args.cluster.clone().context("--cluster is required")?;
    let cluster_text = read(&cluster)?;
    let cluster_name = cluster.display().to_string();
    let (nodes, faults, topology, mut slowdown): (Vec<_>, Vec<Fault>, _, Slowdown) =
        if cluster.extension().is_some_and(|e| e == "csv") {
            (
                trainyard_sim::openb::parse_nodes(&cluster_text, &cluster_name)?,
                Vec::new(),
                None,
                Slowdown::default(),
            )
        } else {
            let c = trainyard_sim::spec::parse_cluster(&cluster_text, &cluster_name)?;
            for w in group_warnings(&c.warnings) {
                eprintln!("warning: {w}");
            }
            (c.nodes, c.faults, c.topology, c.slowdown)
        };
    if let Some(x) = &args.slowdown_per_spine_crossing {
        slowdown = Slowdown::parse(&serde_json::Value::String(x.clone()))
            .map_err(|e| anyhow::anyhow!("--slowdown-per-spine-crossing {x:?}: {e}"))?;
        if topology.is_none() && !slowdown.is_off() {
            bail!(
                "--slowdown-per-spine-crossing: {} has no network topology (add spec.topology)",
                cluster.display()
            );
        }
    }
    if let Some(t) = &topology {
        tracing::info!(
            "topology: levels {} (widest first)",
            t.level_names().join(", ")
        );
    }
    // Workload.
    let mut settings = PreemptionSettings::default();
    let mut jobs: Vec<SimJob> = match (&args.workload, &args.trace) {
        (Some(w), _) => {
            let text = read(w)?;
            let name = w.display().to_string();
            if trainyard_sim::objects::is_object_dump(&text, &name) {
                let default = args
                    .default_duration
                    .as_deref()
                    .map(|d| duration(d, "--default-duration"))
                    .transpose()?;
                let dump = trainyard_sim::objects::parse_objects(&text, &name, default)?;
                for w in group_warnings(&dump.warnings) {
                    eprintln!("warning: {w}");
                }
                dump.jobs
            } else {
                if args.default_duration.is_some() {
                    bail!(
                        "--default-duration: {name} is a Workload or WorkloadGenerator, whose jobs give their own durations; the option is for Kubernetes object dumps"
                    );
                }
                let spec = trainyard_sim::workload::parse_workload_spec(&text, &name)?;
                settings = spec.preemption;
                spec.jobs
            }
        }
        (None, Some(t)) => {
            let rule: QueueRule = args
                .queue_rule
                .parse()
                .map_err(|e| anyhow::anyhow!("--queue-rule: {e}"))?;
            let priority_by_qos: BTreeMap<String, i32> = if args.qos_priority.trim().is_empty() {
                default_priority_by_qos()
            } else {
                parse_priority_by_qos(&args.qos_priority).map_err(|e| {
                    anyhow::anyhow!(
                        "--qos-priority {:?}: {e}; expected `<qos>=<priority>,...` such as `LS=1000,BE=100,default=0`",
                        args.qos_priority
                    )
                })?
            };
            let opts = ImportOptions {
                queue_rule: rule,
                priority_by_qos,
                limit_rows: args.trace_rows,
            };
            let times = match &args.trace_times {
                Some(p) => Some(trainyard_sim::openb::TraceTimes::parse(
                    &read(p)?,
                    &p.display().to_string(),
                )?),
                None => None,
            };
            let in_time = trainyard_sim::openb::InTime {
                times,
                arrival_speedup: args.trace_speedup,
            };
            let import = trainyard_sim::openb::parse_pods_in_time(
                &read(t)?,
                &t.display().to_string(),
                &opts,
                &in_time,
            )?;
            eprintln!("{}: {}", t.display(), import.report);
            import.jobs
        }
        (None, None) => bail!("give --workload or --trace"),
    };
    if let Some(x) = args.walltime_factor {
        let x = trainyard_sim::workload::check_walltime_factor(x)
            .map_err(|e| anyhow::anyhow!("--walltime-factor: {e}"))?;
        trainyard_sim::workload::set_walltimes(&mut jobs, x);
    }
    // Queues.
    let queues = match &args.queues {
        Some(q) => {
            let text = read(q)?;
            if crate::is_blank_yaml(&text) {
                bail!(
                    "{}: is empty; expected Queue documents (apiVersion: trainyard.io/v1alpha1, kind: Queue), or leave out --queues to create one top-level queue per queue the workload names",
                    q.display()
                );
            }
            let loaded = trainyard_ingest::load(
                &[Source::new(q.display().to_string(), text)],
                &LoadOptions::default(),
            )
            .map_err(|e| anyhow::anyhow!("{} problem(s) in the queues:\n{e}", e.0.len()))?;
            for w in group_warnings(&loaded.warnings) {
                eprintln!("warning: {w}");
            }
            let tree = loaded.snapshot.queues;
            if tree.is_empty() {
                bail!(
                    "{}: has no Queue documents; expected Queue documents (apiVersion: trainyard.io/v1alpha1, kind: Queue)",
                    q.display()
                );
            }
            warn_unknown_queues(&jobs, &tree, &q.display().to_string());
            std::sync::Arc::unwrap_or_clone(tree)
        }
        None => {
            let mut names: Vec<&str> = jobs.iter().map(|j| j.queue.as_str()).collect();
            names.sort();
            names.dedup();
            tracing::info!(
                "no --queues: creating {} top-level queue(s) without quota",
                names.len()
            );
            QueueTree::build(names.into_iter().map(QueueSpec::new).collect()).map_err(|e| {
                anyhow::anyhow!(
                    "queues named by the workload: {}",
                    trainyard_model::queue::QueueTreeErrors(e)
                )
            })?
        }
    };
    let period = duration(&args.period, "--period")?;
    let until = args
        .until
        .as_deref()
        .map(|u| duration(u, "--until"))
        .transpose()?;
    if let Some(g) = &args.eviction_grace {
        settings.grace_ms = Some(duration(g, "--eviction-grace")?);
    }
    if let Some(l) = &args.lost_work {
        settings.lost_work =
            Some(LostWork::parse_str(l).map_err(|e| anyhow::anyhow!("--lost-work {l:?}: {e}"))?);
    }
    let eviction = settings.over(EvictionModel::default());
    let policies = policies(&args.policies)?;

    let input = SimInput {
        nodes: &nodes,
        queues: &queues,
        jobs: &jobs,
        faults: &faults,
    };
    // Hidden at first: short runs never show a bar; a watcher reveals the
    // bars once a run has taken 1.5 s.
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
    let done = std::sync::atomic::AtomicBool::new(false);
    let style = ProgressStyle::with_template("{prefix:>12} [{bar:30}] {percent:>3}% {msg}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    let total_jobs = jobs.len() as u64;
    let eval = args
        .forecast_eval
        .then(|| crate::forecast_eval::options(&args))
        .transpose()?;
    let results: Vec<Run> = std::thread::scope(|scope| {
        let (multi_ref, done_ref) = (&multi, &done);
        scope.spawn(move || {
            let start = Instant::now();
            while !done_ref.load(std::sync::atomic::Ordering::Relaxed) {
                if start.elapsed() > std::time::Duration::from_millis(1500) {
                    multi_ref.set_draw_target(ProgressDrawTarget::stderr());
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        let handles: Vec<_> = policies
            .iter()
            .map(|p| {
                let bar = multi.add(ProgressBar::new(total_jobs.max(1)));
                bar.set_style(style.clone());
                bar.set_prefix(p.name.clone());
                // Shown only on runs long enough to need it.
                bar.enable_steady_tick(std::time::Duration::from_millis(250));
                let opts = SimOptions {
                    policy: p.name.clone(),
                    cycle_period_ms: period,
                    until: until.map(|u| Timestamp(u as i64)),
                    topology: topology.clone(),
                    slowdown,
                    eviction,
                };
                let config = &p.config;
                let lines = progress::Lines::for_stderr();
                let name = p.name.clone();
                let eval = eval.clone();
                scope.spawn(move || {
                    let t = Instant::now();
                    let mut evaluation = None;
                    let mut progress = |pr: &trainyard_sim::Progress| {
                        let day = pr.now.0 as f64 / 86_400_000.0;
                        bar.set_position(pr.jobs_finished);
                        bar.set_message(format!("day {day:.1}, {} events", pr.events));
                        lines.tick(|| {
                            format!(
                                "progress: {name}: {}/{total_jobs} jobs finished ({}%), simulated day {day:.1}, {} events, {:.0} s",
                                pr.jobs_finished,
                                pr.jobs_finished * 100 / total_jobs.max(1),
                                pr.events,
                                t.elapsed().as_secs_f64()
                            )
                        });
                    };
                    let out = match &eval {
                        Some(e) => {
                            let r = evaluate(input, config, &opts, e, &mut progress);
                            let out = r.sim.clone();
                            evaluation = Some(r);
                            out
                        }
                        None => trainyard_sim::simulate(input, config, &opts, &mut progress),
                    };
                    bar.finish_and_clear();
                    (out, t.elapsed().as_secs_f64(), evaluation)
                })
            })
            .collect();
        // A panic in a simulation thread is a bug: re-raise it here.
        let results: Vec<Run> = handles
            .into_iter()
            .map(|h| h.join().expect("simulation thread panicked"))
            .collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        results
    });
    let (results, evaluations): (Vec<(SimOutput, f64)>, Vec<Option<Evaluation>>) = results
        .into_iter()
        .map(|(o, secs, e)| ((o, secs), e))
        .unzip();
    let summaries: Vec<Summary> = results.iter().map(|(o, _)| o.summary()).collect();

    if let Some(dir) = &args.out {
        write_outputs(dir, &results, &summaries, &args)?;
    }
    match args.output {
        SimFormat::Table => {
            print!("{}", output::summary_table(&summaries));
            for ((o, secs), _) in results.iter().zip(&summaries) {
                println!(
                    "{}: {} events, {} cycles in {:.2} s wall ({:.0} events/s)",
                    o.policy,
                    o.events,
                    o.cycles,
                    secs,
                    o.events as f64 / secs.max(1e-9)
                );
            }
            if let Some(dir) = &args.out {
                println!("wrote {}", dir.join("report.html").display());
            }
        }
        SimFormat::Json => println!("{}", output::comparison_json(&summaries)),
    }
    crate::forecast_eval::report(&results, &evaluations, &args)?;
    tracing::info!("total wall time {:.2} s", wall.elapsed().as_secs_f64());
    Ok(())
}

/// Warns, once per queue, about jobs whose queue the queue file does not
/// define as a leaf: the simulator rejects them at submission.
fn warn_unknown_queues(jobs: &[SimJob], tree: &QueueTree, file: &str) {
    let mut missing: BTreeMap<&str, usize> = BTreeMap::new();
    for j in jobs {
        if !tree.get(&j.queue).is_some_and(|id| tree.is_leaf(id)) {
            *missing.entry(j.queue.as_str()).or_insert(0) += 1;
        }
    }
    if missing.is_empty() {
        return;
    }
    let total: usize = missing.values().sum();
    let list: Vec<String> = missing
        .iter()
        .map(|(q, n)| format!("{q} ({n} job(s))"))
        .collect();
    eprintln!(
        "warning: {file}: {total} of {} job(s) name a queue it does not define as a leaf queue, and will be rejected: {}",
        jobs.len(),
        list.join(", ")
    );
}

fn write(path: PathBuf, text: &str) -> Result<()> {
    std::fs::write(&path, text).with_context(|| format!("{}: cannot write", path.display()))
}

fn timing_json(o: &SimOutput, secs: f64) -> String {
    format!(
        "{{\n  \"policy\": {},\n  \"wallSeconds\": {:.3},\n  \"events\": {},\n  \"eventsPerSecond\": {:.0},\n  \"cycles\": {}\n}}\n",
        serde_json::Value::String(o.policy.clone()),
        secs,
        o.events,
        o.events as f64 / secs.max(1e-9),
        o.cycles
    )
}

fn write_outputs(
    dir: &Path,
    results: &[(SimOutput, f64)],
    summaries: &[Summary],
    args: &SimulateArgs,
) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot create directory", dir.display()))?;
    let several = results.len() > 1;
    for ((o, secs), s) in results.iter().zip(summaries) {
        let d = if several {
            dir.join(&o.policy)
        } else {
            dir.to_path_buf()
        };
        std::fs::create_dir_all(&d)
            .with_context(|| format!("{}: cannot create directory", d.display()))?;
        write(d.join("jobs.csv"), &output::jobs_csv(o))?;
        write(d.join("queues.csv"), &output::queues_csv(o))?;
        write(d.join("summary.json"), &output::summary_json(s))?;
        write(d.join("timing.json"), &timing_json(o, *secs))?;
    }
    if several {
        write(
            dir.join("comparison.json"),
            &output::comparison_json(summaries),
        )?;
    }
    let workload = args
        .workload
        .as_ref()
        .or(args.trace.as_ref())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let cluster = args
        .cluster
        .as_ref()
        .map(|c| c.display().to_string())
        .unwrap_or_default();
    let title = format!("Trainyard simulation: {workload} on {cluster}");
    let runs: Vec<(&SimOutput, &Summary)> = results.iter().map(|(o, _)| o).zip(summaries).collect();
    write(dir.join("report.html"), &report::report_html(&runs, &title))?;
    Ok(())
}
