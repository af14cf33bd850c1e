//! Each verb that asks the running scheduler: its flags (with the
//! connection's, [`ConnectArgs`]) and what it prints.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use trainyard_api::pb;

use super::{ConnectArgs, Format, Session, block_on, output, show};
use crate::render::terminal_width;

/// The verbs, flattened into `trainyard`'s commands.
#[derive(clap::Subcommand, Debug)]
pub enum RemoteCommand {
    /// Show the queue tree of the running scheduler.
    ///
    /// One row per queue and resource: weight, running and pending jobs,
    /// quota, limit (- for none), fair share, allocated, pending demand
    /// (what pending jobs ask beyond what the queue holds) and the
    /// time-decayed usage the fair share weighs, in resource-hours (GPU-
    /// hours, core-hours, GiB-hours). Amounts are Kubernetes quantities
    /// (GPUs, cores or 500m, 512Gi). Children are indented under their
    /// parent, in the tree's order.
    ///
    /// Examples:
    ///
    ///   trainyard queues
    ///
    ///   trainyard queues -o json | jq '.queues[] | {path, running: .runningJobs}'
    ///
    ///   kubectl trainyard queues --context gpu-lab
    #[command(verbatim_doc_comment)]
    Queues(QueuesArgs),
    /// List the jobs the running scheduler sees.
    ///
    /// Columns: NAME, QUEUE, STATE (Pending, Partial, Running,
    /// Terminating, Rejected), PODS (bound/all), GPUS (held/asked), AGE,
    /// REASON (the core's reason code; `trainyard explain` says more).
    /// Sorted by namespace, then name. Like kubectl, the namespace is -n,
    /// else the kubeconfig context's, else `default`; -A shows every
    /// namespace.
    ///
    /// Examples:
    ///
    ///   trainyard jobs -A
    ///
    ///   trainyard jobs -n ml --state pending
    ///
    ///   trainyard jobs -A --queue org/research     # the queue and every queue below it
    ///
    ///   trainyard jobs -A -o json | jq -r '.jobs[] | select(.reason != "") | .name'
    #[command(verbatim_doc_comment)]
    Jobs(JobsArgs),
    /// Explain why a job waits, as the scheduler decided it.
    ///
    /// The core's reason and message (the FailedScheduling Event's), the
    /// cause it falls under (room, quota, fair share, topology, gang,
    /// reservation, preemption, request), the nodes that refused it
    /// grouped by reason (as kube-scheduler says `0/50 nodes are
    /// available: ...`), what would have to change for it to fit, and its
    /// reservation when it holds one. A job that does not exist is
    /// refused with the names that come closest.
    ///
    /// Examples:
    ///
    ///   trainyard explain ml/llm-70b
    ///
    ///   trainyard explain llm-70b -n ml -o yaml
    #[command(verbatim_doc_comment)]
    Explain(ExplainArgs),
    /// Ask where a job would go now, and whom it would evict.
    ///
    /// Either a new job from a file (a PodGroup with its pods, or pods, as
    /// kubectl apply -f takes them; pods that name no schedulerName get the
    /// scheduler's), or an existing job with other sizes (taken as submitted
    /// again: its running pods count as pending). The scheduler runs its
    /// core on a copy of its latest cycle: nothing is created, bound or
    /// evicted. Prints the binds, the pods nominated once evictions are
    /// done, the evictions, and other jobs whose placement would change.
    ///
    /// Examples:
    ///
    ///   trainyard whatif -f job.yaml
    ///
    ///   trainyard whatif ml/llm-70b --gpus 4          # 4 GPUs per pod instead
    ///
    ///   trainyard whatif ml/llm-70b --pods 8 --min-member 8
    #[command(verbatim_doc_comment)]
    Whatif(WhatifArgs),
    /// Forecast when a job starts, and where.
    ///
    /// The scheduler runs its own core forward in time from its latest
    /// cycle (the simulator's engine): running jobs end at their walltimes
    /// (activeDeadlineSeconds, the PodGroup's walltime) or, without one, at
    /// their queue's observed runtimes, and nothing new arrives. Prints the
    /// expected start, a range (10th-90th percentile over the estimated
    /// runtimes), the nodes, the running jobs that must end first, and the
    /// core's reason now. A job submitted later with a higher rank can
    /// still start first: a forecast is not a promise (docs/forecasts.md).
    /// Either a job the scheduler knows, or a new one from a file (as
    /// `whatif -f` takes it, as if submitted now).
    ///
    /// Examples:
    ///
    ///   trainyard forecast ml/llm-70b
    ///
    ///   trainyard forecast -f job.yaml --horizon 48h -o json
    #[command(verbatim_doc_comment)]
    Forecast(ForecastArgs),
    /// Save what the running scheduler sees, for `trainyard schedule`.
    ///
    /// Writes the objects the scheduler watches (nodes, pods, queues,
    /// pod groups, ...) as one YAML `kind: List`, the format `trainyard
    /// schedule` and `trainyard simulate --cluster` read, and with
    /// --config-out the scheduler config in force. Says on stderr how to
    /// replay it: `trainyard schedule --now TIME [--config FILE] FILE`
    /// gives the cycle's decisions (the usage history, which the fair
    /// share decays, is not in it).
    ///
    /// Examples:
    ///
    ///   trainyard snapshot -o snap.yaml --config-out config.yaml
    ///
    ///   trainyard snapshot | grep -c 'kind: Node'
    #[command(verbatim_doc_comment)]
    Snapshot(SnapshotArgs),
    /// Stream the scheduler's decisions as they happen.
    ///
    /// One line per decision: `TIME cycle N bind JOB POD -> NODE`,
    /// `evict ...`, `pending JOB (queue Q) REASON: MESSAGE` when a job's
    /// reason changes, `waits-no-more JOB` when it stops waiting. The
    /// latest cycle first (its pending reasons all), unless --only-new.
    /// Stops on Ctrl-C, or after --cycles messages.
    ///
    /// Examples:
    ///
    ///   trainyard watch
    ///
    ///   trainyard watch -o json --only-new | jq -c '.binds[]'
    #[command(verbatim_doc_comment)]
    Watch(WatchArgs),
}

#[derive(clap::Args, Debug)]
pub struct QueuesArgs {
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Args, Debug)]
pub struct JobsArgs {
    /// Only this namespace (default: the kubeconfig context's, else `default`).
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// Every namespace.
    #[arg(long, short = 'A', conflicts_with = "namespace")]
    all_namespaces: bool,
    /// Only jobs of this queue, by path (`org/team`): a parent's path matches every job below it.
    #[arg(long, value_name = "QUEUE")]
    queue: Option<String>,
    /// Only jobs in this state.
    #[arg(long, value_enum, value_name = "STATE")]
    state: Option<StateArg>,
    /// Only this user's jobs: the user as the fair share counts users (the job's namespace).
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum StateArg {
    Pending,
    Partial,
    Running,
    Terminating,
    Rejected,
}

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// The job: NAMESPACE/NAME, or NAME with -n.
    #[arg(value_name = "NS/NAME")]
    job: String,
    /// The job's namespace when JOB has none (default: the kubeconfig context's, else `default`).
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// The job a what-if or a forecast is of: new (a file) or known (a name).
#[derive(clap::Args, Debug)]
pub struct JobOrFile {
    /// A new job: YAML or JSON with a PodGroup and its pods (or pods); `-` reads stdin.
    #[arg(
        long,
        short = 'f',
        value_name = "FILE",
        conflicts_with = "job",
        required_unless_present = "job"
    )]
    filename: Option<PathBuf>,
    /// A job the scheduler knows, NAMESPACE/NAME (or NAME with -n); `whatif`
    /// resizes it by --pods, --min-member, --gpus.
    #[arg(value_name = "NS/NAME")]
    job: Option<String>,
    /// The job's namespace when NS/NAME has none.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
}

/// A [`JobOrFile`] read: the file's objects, or the job's namespace and
/// name.
enum Chosen {
    Objects(String),
    Existing { namespace: String, name: String },
}

impl JobOrFile {
    async fn read(&self, verb: &str, connect: &ConnectArgs) -> Result<Chosen> {
        match (&self.filename, &self.job) {
            (Some(f), _) => Ok(Chosen::Objects(objects_file(f)?)),
            (None, Some(j)) => {
                let (namespace, name) = job_name(j, self.namespace.as_deref(), connect).await?;
                Ok(Chosen::Existing { namespace, name })
            }
            (None, None) => bail!("{verb} needs NS/NAME or -f FILE"),
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct WhatifArgs {
    #[command(flatten)]
    target: JobOrFile,
    /// Pods in all (copies of its last pod are added, or the last ones dropped).
    #[arg(long, value_name = "N", requires = "job")]
    pods: Option<u32>,
    /// The gang's minimum (at most --pods).
    #[arg(long, value_name = "N", requires = "job")]
    min_member: Option<u32>,
    /// Whole GPUs per pod.
    #[arg(long, value_name = "N", requires = "job")]
    gpus: Option<u32>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Args, Debug)]
pub struct ForecastArgs {
    #[command(flatten)]
    target: JobOrFile,
    /// How far ahead to look: `90m`, `48h`, `7d` (default 7d).
    #[arg(long, value_name = "DURATION")]
    horizon: Option<String>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Args, Debug)]
pub struct SnapshotArgs {
    /// Where to write the objects; `-` (the default) is stdout.
    #[arg(long, short = 'o', value_name = "FILE", default_value = "-")]
    output: PathBuf,
    /// Also write the scheduler config in force here (for `trainyard schedule --config`).
    #[arg(long, value_name = "FILE")]
    config_out: Option<PathBuf>,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    /// Start with the next cycle, not the latest one.
    #[arg(long)]
    only_new: bool,
    /// Stop after this many cycles' messages.
    #[arg(long, value_name = "N")]
    cycles: Option<u64>,
    /// Output format: lines (table), or one JSON object per cycle and line (json), or YAML
    /// documents (yaml).
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub fn run(cmd: RemoteCommand) -> Result<()> {
    block_on(async move {
        match cmd {
            RemoteCommand::Queues(a) => queues(a).await,
            RemoteCommand::Jobs(a) => jobs(a).await,
            RemoteCommand::Explain(a) => explain(a).await,
            RemoteCommand::Whatif(a) => whatif(a).await,
            RemoteCommand::Forecast(a) => forecast(a).await,
            RemoteCommand::Snapshot(a) => snapshot(a).await,
            RemoteCommand::Watch(a) => watch(a).await,
        }
    })?
}

/// Prints `text` to stdout.
fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// `message` as `format` says: `table` is `table(message)`.
fn emit<M: prost::Message>(
    format: Format,
    message: &M,
    name: &str,
    table: impl FnOnce(&M) -> String,
) -> Result<()> {
    let text = match format {
        Format::Table => table(message),
        Format::Json => output::json(message, name)?,
        Format::Yaml => output::yaml(message, name)?,
    };
    print(&text)
}

async fn queues(a: QueuesArgs) -> Result<()> {
    let mut s = Session::open(&a.connect).await?;
    let resp = s
        .client
        .list_queues(pb::ListQueuesRequest {})
        .await
        .map_err(|e| s.refused(&e))?
        .into_inner();
    emit(a.output, &resp, "ListQueuesResponse", |r| {
        show::queues(r, terminal_width())
    })
}

/// The namespace kubectl would use: the kubeconfig context's, else `default`.
async fn default_namespace(c: &ConnectArgs) -> String {
    match trainyard_serve::connect::kube_config(&c.cluster()).await {
        Ok(k) if !k.default_namespace.is_empty() => k.default_namespace,
        _ => "default".into(),
    }
}

async fn jobs(a: JobsArgs) -> Result<()> {
    let namespace = match (&a.namespace, a.all_namespaces) {
        (_, true) => String::new(),
        (Some(n), false) => n.clone(),
        (None, false) => default_namespace(&a.connect).await,
    };
    let state = a.state.map(|s| match s {
        StateArg::Pending => pb::JobState::Pending,
        StateArg::Partial => pb::JobState::Partial,
        StateArg::Running => pb::JobState::Running,
        StateArg::Terminating => pb::JobState::Terminating,
        StateArg::Rejected => pb::JobState::Rejected,
    });
    let req = pb::ListJobsRequest {
        queue: a.queue.clone().unwrap_or_default(),
        namespace: namespace.clone(),
        state: state.map_or(0, |s| s as i32),
        user: a.user.clone().unwrap_or_default(),
    };
    let mut s = Session::open(&a.connect).await?;
    let resp = s
        .client
        .list_jobs(req)
        .await
        .map_err(|e| s.refused(&e))?
        .into_inner();
    if a.output == Format::Table && resp.jobs.is_empty() {
        // As kubectl: on stderr, so a pipe reads nothing.
        if namespace.is_empty() {
            eprintln!("No jobs found.");
        } else {
            eprintln!("No jobs found in {namespace} namespace.");
        }
        return Ok(());
    }
    emit(a.output, &resp, "ListJobsResponse", |r| {
        show::jobs(r, a.all_namespaces, terminal_width())
    })
}

/// `NS/NAME`, or `NAME` in `namespace` (else kubectl's default).
async fn job_name(job: &str, namespace: Option<&str>, c: &ConnectArgs) -> Result<(String, String)> {
    if let Some((ns, name)) = job.split_once('/') {
        if ns.is_empty() || name.is_empty() || name.contains('/') {
            bail!("\"{job}\": expected NAMESPACE/NAME, or NAME with -n NAMESPACE");
        }
        if let Some(n) = namespace
            && n != ns
        {
            bail!("\"{job}\" names namespace {ns}, but -n says {n}: give one");
        }
        return Ok((ns.to_string(), name.to_string()));
    }
    let ns = match namespace {
        Some(n) => n.to_string(),
        None => default_namespace(c).await,
    };
    Ok((ns, job.to_string()))
}

async fn explain(a: ExplainArgs) -> Result<()> {
    let (namespace, name) = job_name(&a.job, a.namespace.as_deref(), &a.connect).await?;
    let mut s = Session::open(&a.connect).await?;
    let resp = s
        .client
        .explain_job(pb::ExplainJobRequest { namespace, name })
        .await
        .map_err(|e| s.refused(&e))?
        .into_inner();
    emit(a.output, &resp, "ExplainJobResponse", show::explain)
}

/// The objects of `-f FILE` (`-` is stdin).
fn objects_file(f: &std::path::Path) -> Result<String> {
    let text = if f.as_os_str() == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t).context("reading stdin")?;
        t
    } else {
        std::fs::read_to_string(f).with_context(|| format!("{}: cannot read", f.display()))?
    };
    if crate::is_blank_yaml(&text) {
        bail!(
            "{}: is empty; expected a PodGroup with its pods, or pods",
            f.display()
        );
    }
    Ok(text)
}

async fn forecast(a: ForecastArgs) -> Result<()> {
    let job = match a.target.read("forecast", &a.connect).await? {
        Chosen::Objects(text) => pb::forecast_start_request::Job::Objects(text),
        Chosen::Existing { namespace, name } => {
            pb::forecast_start_request::Job::Existing(pb::ExplainJobRequest { namespace, name })
        }
    };
    let horizon_seconds = match &a.horizon {
        None => 0,
        Some(h) => {
            let ms = crate::simulate::duration(h, "--horizon")?;
            if ms < 1000 {
                bail!("--horizon {h}: expected at least one second, such as 90m, 48h or 7d");
            }
            ms / 1000
        }
    };
    let mut s = Session::open(&a.connect).await?;
    let resp = s
        .client
        .forecast_start(pb::ForecastStartRequest {
            job: Some(job),
            horizon_seconds,
        })
        .await
        .map_err(|e| s.refused(&e))?
        .into_inner();
    emit(a.output, &resp, "ForecastStartResponse", show::forecast)
}

async fn whatif(a: WhatifArgs) -> Result<()> {
    let job = match a.target.read("whatif", &a.connect).await? {
        Chosen::Objects(text) => pb::what_if_request::Job::Objects(text),
        Chosen::Existing { namespace, name } => {
            if a.pods.is_none() && a.min_member.is_none() && a.gpus.is_none() {
                bail!(
                    "whatif {namespace}/{name}: say what changes: --pods N, --min-member N and/or --gpus N"
                );
            }
            let nonzero = |flag: &str, v: Option<u32>| match v {
                Some(0) => bail!("{flag} 0: expected at least 1"),
                v => Ok(v.unwrap_or(0)),
            };
            pb::what_if_request::Job::Resize(pb::Resize {
                namespace,
                name,
                pods: nonzero("--pods", a.pods)?,
                min_member: nonzero("--min-member", a.min_member)?,
                gpus_per_pod: nonzero("--gpus", a.gpus)?,
            })
        }
    };
    let mut s = Session::open(&a.connect).await?;
    let resp = s
        .client
        .what_if(pb::WhatIfRequest { job: Some(job) })
        .await
        .map_err(|e| s.refused(&e))?
        .into_inner();
    emit(a.output, &resp, "WhatIfResponse", show::whatif)
}

async fn snapshot(a: SnapshotArgs) -> Result<()> {
    let mut s = Session::open(&a.connect).await?;
    let resp = s
        .client
        .get_snapshot(pb::GetSnapshotRequest {})
        .await
        .map_err(|e| s.refused(&e))?
        .into_inner();
    let to_stdout = a.output.as_os_str() == "-";
    if to_stdout {
        print(&resp.objects_yaml)?;
    } else {
        std::fs::write(&a.output, &resp.objects_yaml)
            .with_context(|| format!("{}: cannot write", a.output.display()))?;
    }
    if let Some(c) = &a.config_out {
        std::fs::write(c, &resp.config_yaml)
            .with_context(|| format!("{}: cannot write", c.display()))?;
    }
    let number = resp.cycle.as_ref().map_or(0, |c| c.number);
    let file = if to_stdout {
        "FILE".to_string()
    } else {
        a.output.display().to_string()
    };
    let config = a
        .config_out
        .as_ref()
        .map(|c| format!(" --config {}", c.display()))
        .unwrap_or_default();
    if !to_stdout {
        eprintln!("wrote {file} (cycle {number} at {})", resp.now);
    }
    if resp.writes_in_flight > 0 {
        eprintln!(
            "note: {} write(s) were in flight: their pods show unbound in the snapshot",
            resp.writes_in_flight
        );
    }
    eprintln!(
        "replay: trainyard schedule --now {}{config} {file}",
        resp.now
    );
    Ok(())
}

async fn watch(a: WatchArgs) -> Result<()> {
    let mut s = Session::open(&a.connect).await?;
    let mut stream = s
        .client
        .watch_decisions(pb::WatchDecisionsRequest {
            latest: !a.only_new,
        })
        .await
        .map_err(|e| s.refused(&e))?
        .into_inner();
    let mut seen = 0u64;
    while a.cycles.is_none_or(|n| seen < n) {
        let next = tokio::select! {
            m = stream.message() => m,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let Some(d) = next.map_err(|e| s.refused(&e))? else {
            bail!(
                "the scheduler at {} ended the stream (it stopped, or stepped down as leader)",
                s.address
            );
        };
        seen += 1;
        let text = match a.output {
            Format::Table => show::watch(&d),
            Format::Json => output::json_line(&d, "CycleDecisions")?,
            Format::Yaml => format!("---\n{}", output::yaml(&d, "CycleDecisions")?),
        };
        print(&text)?;
    }
    Ok(())
}
