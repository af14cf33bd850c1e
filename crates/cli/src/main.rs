//! The `trainyard` command.

mod about;
mod fgd;
mod forecast_eval;
mod progress;
mod remote;
mod render;
mod serve;
mod simulate;
mod usage;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use trainyard_ingest::{LoadError, LoadOptions, Source};
use trainyard_model::Timestamp;
use trainyard_sched::Config;

/// Trainyard: a batch scheduler for GPU training clusters.
///
/// Gangs placed all-or-nothing, hierarchical queues shared by weighted DRF,
/// GPUs tracked device by device. `trainyard schedule` runs one scheduling
/// cycle offline on a snapshot of a cluster and explains every decision.
#[derive(Parser, Debug)]
#[command(name = "trainyard", version, propagate_version = true)]
struct Cli {
    /// More log output on stderr (-v info, -vv debug). TRAINYARD_LOG (or RUST_LOG)
    /// overrides, e.g. TRAINYARD_LOG=info,trainyard_serve=debug.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log lines on stderr as text for people, or as one JSON object per
    /// line for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one scheduling cycle on a snapshot and print the decisions.
    ///
    /// A snapshot is any number of YAML or JSON files (or directories of
    /// them) holding Kubernetes `Node`, `Pod`, `PriorityClass` and `List`
    /// objects exactly as `kubectl get nodes,pods -o yaml` prints them, plus
    /// Trainyard `Queue` and `PodGroup` documents. Pods with
    /// `schedulerName: trainyard` are scheduled; bound pods of other
    /// schedulers count as used capacity.
    ///
    /// Prints the binds (pod → node, GPU indices), the reason every pending
    /// job is pending, and the fair-share table (per queue and resource:
    /// quota, fair share, allocated, demand, limit).
    ///
    /// Examples:
    ///
    ///   trainyard schedule examples/snapshot.yaml
    ///
    ///   kubectl get nodes,pods -A -o yaml > cluster.yaml
    ///   trainyard schedule cluster.yaml queues.yaml --output json | jq '.pending'
    #[command(verbatim_doc_comment)]
    Schedule(ScheduleArgs),
    /// Replay a workload through the scheduling core on a virtual clock.
    ///
    /// Runs the same scheduling cycle as production on a simulated cluster:
    /// jobs arrive (from a job list, a seeded generator, or the Alibaba openb
    /// trace), cycles place them, tasks finish, nodes fail and recover. Prints
    /// a summary table; with --out writes jobs.csv, queues.csv, summary.json,
    /// timing.json and a self-contained report.html with plots. Repeat
    /// --policy to compare scheduler configs side by side on the same
    /// workload. Same inputs and seed give byte-identical files (wall-clock
    /// numbers go to timing.json only).
    ///
    /// Examples:
    ///
    ///   trainyard simulate --cluster examples/sim/cluster.yaml --queues examples/sim/queues.yaml \
    ///       --workload examples/sim/workload.yaml --out out/
    ///
    ///   trainyard simulate --cluster examples/sim/cluster.yaml --queues examples/sim/queues.yaml \
    ///       --workload examples/sim/workload.yaml \
    ///       --policy examples/sim/binpack.yaml --policy examples/sim/spread.yaml --out out/compare
    ///
    ///   trainyard simulate --cluster ../shared/data/openb/openb_node_list_gpu_node.csv \
    ///       --trace ../shared/data/openb/openb_pod_list_default.csv --queue-rule hash:a,b,c --out out/openb
    #[command(verbatim_doc_comment)]
    Simulate(Box<simulate::SimulateArgs>),
    /// Print the CustomResourceDefinitions of Trainyard's API.
    ///
    /// Queue, PodGroup and Topology (trainyard.io/v1alpha1), generated from
    /// the same types the scheduler reads, with status subresources, short
    /// names (tyq, typg, tytopo), printer columns and validation. The files
    /// in deploy/crds/ are exactly this output (a test checks it).
    ///
    /// Examples:
    ///
    ///   trainyard crds | kubectl apply -f -
    ///
    ///   trainyard crds --out-dir deploy/crds     # one file per CRD
    #[command(verbatim_doc_comment)]
    Crds(CrdsArgs),
    /// Run the scheduler on a cluster.
    ///
    /// Watches Nodes, Pods, PriorityClasses and Trainyard's (and KAI's,
    /// Volcano's) Queues, PodGroups and Topology; schedules the pods with
    /// `schedulerName: trainyard` every cycle with the same core as
    /// `trainyard schedule` and `trainyard simulate`; binds them (gangs
    /// whole), evicts for reclaim and preemption, and nominates. Connects
    /// as kubectl does: --kubeconfig, else KUBECONFIG, else ~/.kube/config,
    /// else the in-cluster service account; --context picks a context.
    /// Serves /metrics, /healthz, /readyz and /usage on --http-address
    /// (service.httpAddress; default 127.0.0.1:8080, this machine only).
    /// With service.leaderElection.enabled, replicas elect a leader on a
    /// Lease and only the leader writes. Stops on SIGTERM or Ctrl-C: no new
    /// cycles, the writes in flight get --drain-seconds, the lease is
    /// released.
    ///
    /// Examples:
    ///
    ///   kubectl apply -f deploy/crds/
    ///   trainyard serve --leader-elect=false
    ///
    ///   trainyard serve --kubeconfig ~/.kube/lab --context gpu-lab --config serve.yaml -v
    ///
    ///   trainyard serve --http-address 0.0.0.0:8080    # Prometheus scrapes from elsewhere
    #[command(verbatim_doc_comment)]
    Serve(serve::ServeArgs),
    #[command(flatten)]
    Remote(remote::verbs::RemoteCommand),
    /// Report GPU-, CPU- and memory-hours per queue and namespace.
    ///
    /// Reads the usage history the scheduler keeps in its store
    /// (service.store.path): what the bound pods of each leaf queue and
    /// namespace held, in buckets of an hour (a day, after two days).
    /// Buckets that straddle the window's ends count in proportion. Ask a
    /// running scheduler with --server (its /usage adds the hour still open
    /// and the jobs still running); the store is locked while a scheduler
    /// holds it, so --store reads a copy, or where a stopped replica left
    /// it (closed hours only). Live totals are on /metrics as
    /// trainyard_queue_usage_seconds_total.
    ///
    /// Examples:
    ///
    ///   kubectl -n trainyard-system port-forward pod/$(kubectl -n trainyard-system \
    ///       get lease trainyard -o jsonpath='{.spec.holderIdentity}') 8080 &
    ///   trainyard usage --server http://127.0.0.1:8080 --since 1d --by job
    ///
    ///   trainyard usage --store /var/lib/trainyard/state.redb --since 7d
    ///
    ///   trainyard usage --store state.redb --since 30d --by both --output csv > usage.csv
    ///
    ///   trainyard usage --store state.redb --since 1d --until 2026-11-22T00:00:00Z --output json
    #[command(verbatim_doc_comment)]
    Usage(usage::UsageArgs),
    /// Print this build's version.
    ///
    /// The crate's version, and the git commit when the build was told it
    /// (TRAINYARD_GIT_COMMIT=$(git rev-parse HEAD) cargo build --release).
    ///
    /// Examples:
    ///
    ///   trainyard version
    ///
    ///   trainyard version -o json | jq -r .version
    #[command(verbatim_doc_comment)]
    Version(about::VersionArgs),
    /// Print a shell completion script for trainyard.
    ///
    /// Completes commands, flags and their values (--output table|json,
    /// --by queue|namespace|both|job, ...). Load it into the running shell,
    /// or install it where the shell looks for completions and start a new
    /// shell:
    ///
    ///   bash:  source <(trainyard completion bash)
    ///          mkdir -p ~/.local/share/bash-completion/completions
    ///          trainyard completion bash > ~/.local/share/bash-completion/completions/trainyard
    ///          (needs the bash-completion package)
    ///
    ///   zsh:   mkdir -p ~/.zfunc
    ///          trainyard completion zsh > ~/.zfunc/_trainyard
    ///          and in ~/.zshrc, before compinit:  fpath=(~/.zfunc $fpath); autoload -U compinit; compinit
    ///
    ///   fish:  trainyard completion fish > ~/.config/fish/completions/trainyard.fish
    #[command(verbatim_doc_comment)]
    Completion(about::CompletionArgs),
}

#[derive(clap::Args, Debug)]
struct CrdsArgs {
    /// Write one file per CRD (`<plural>.<group>.yaml`) into this directory
    /// instead of printing them all.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = CrdFormat::Yaml)]
    output: CrdFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum CrdFormat {
    /// Multi-document YAML, as kubectl apply reads it.
    Yaml,
    /// A Kubernetes `List` in JSON.
    Json,
}

#[derive(clap::Args, Debug)]
struct ScheduleArgs {
    /// Snapshot files or directories (*.yaml, *.yml, *.json inside, sorted by name). `-` reads stdin.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Scheduler configuration file (YAML). Defaults: GPU binpack (weight 10), CPU/memory binpack (weight 1).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// The cycle's time, RFC 3339 (e.g. 2026-11-22T10:00:00Z) or Unix seconds. Defaults to now.
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Queue for pods that name none; created at the top level if not defined.
    #[arg(long, default_value = "default", value_name = "QUEUE")]
    default_queue: String,
    /// `spec.schedulerName` of the pods Trainyard schedules.
    #[arg(long, default_value = "trainyard", value_name = "NAME")]
    scheduler_name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Output {
    /// Aligned columns for people.
    Table,
    /// Machine-readable: binds, pending (with structured reasons), queues, warnings, stats.
    Json,
}

fn main() {
    // First, before any thread starts (trainyard-runtime's docs).
    let allocator = trainyard_runtime::keep_freed_memory();
    let cli = parse_args();
    // A service logs what it does by default; the other commands warn only.
    let verbose = match cli.command {
        Command::Serve(_) => cli.verbose.max(1),
        _ => cli.verbose,
    };
    init_logging(verbose, cli.log_format);
    tracing::debug!(?allocator, "allocator settings");
    let result = match cli.command {
        Command::Schedule(args) => cmd_schedule(args),
        Command::Simulate(args) => simulate::run(*args),
        Command::Crds(args) => cmd_crds(args),
        Command::Serve(args) => serve::run(args),
        Command::Remote(cmd) => remote::verbs::run(cmd),
        Command::Version(args) => about::version(args),
        Command::Completion(args) => about::completion::<Cli>(args),
        Command::Usage(args) => {
            let until = args.until().map(str::to_string);
            usage::run(args, || parse_time("--until", until.as_deref()))
        }
    };
    if let Err(e) = result {
        // `trainyard ... | head`: the reader went away; that is not an error.
        if e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        }) {
            std::process::exit(0);
        }
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// The command line; installed as `kubectl-trainyard` (a link or a
/// copy of this binary), it is a kubectl plugin, and its help says
/// `kubectl trainyard`.
fn parse_args() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let plugin = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .is_some_and(|n| n == "kubectl-trainyard");
    let mut command = Cli::command();
    if plugin {
        command = command.bin_name("kubectl trainyard");
    }
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn init_logging(verbose: u8, format: LogFormat) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    // TRAINYARD_LOG (what the Helm chart sets), else RUST_LOG, else -v.
    let filter = tracing_subscriber::EnvFilter::try_from_env("TRAINYARD_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => fmt.json().with_current_span(false).init(),
    }
}

fn cmd_crds(args: CrdsArgs) -> Result<()> {
    use std::io::Write;
    let crds = trainyard_crd::crds();
    match (&args.out_dir, args.output) {
        (Some(dir), format) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("{}: cannot create directory", dir.display()))?;
            for crd in &crds {
                let (name, text) = match format {
                    CrdFormat::Yaml => (
                        trainyard_crd::resources::file_name(crd),
                        trainyard_crd::crd_yaml(crd).context("rendering a CRD as YAML")?,
                    ),
                    CrdFormat::Json => (
                        trainyard_crd::resources::file_name(crd).replace(".yaml", ".json"),
                        serde_json::to_string_pretty(crd)? + "\n",
                    ),
                };
                let path = dir.join(name);
                std::fs::write(&path, text)
                    .with_context(|| format!("{}: cannot write", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
        (None, CrdFormat::Yaml) => {
            let text = trainyard_crd::crds_yaml().context("rendering the CRDs as YAML")?;
            std::io::stdout().write_all(text.as_bytes())?;
        }
        (None, CrdFormat::Json) => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": crds});
            writeln!(
                std::io::stdout(),
                "{}",
                serde_json::to_string_pretty(&list)?
            )?;
        }
    }
    Ok(())
}

/// Expands directories into their YAML/JSON files, sorted by name.
fn collect_sources(paths: &[PathBuf]) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .context("reading stdin")?;
            sources.push(Source::new("<stdin>", text));
            continue;
        }
        let meta = std::fs::metadata(p).with_context(|| format!("{}: cannot read", p.display()))?;
        if meta.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("{}: cannot list directory", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    matches!(
                        f.extension().and_then(|e| e.to_str()),
                        Some("yaml" | "yml" | "json")
                    )
                })
                .collect();
            files.sort();
            if files.is_empty() {
                bail!(
                    "{}: directory has no .yaml, .yml or .json files",
                    p.display()
                );
            }
            for f in files {
                sources.push(read_source(&f)?);
            }
        } else {
            sources.push(read_source(p)?);
        }
    }
    Ok(sources)
}

fn read_source(p: &Path) -> Result<Source> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()))?;
    Ok(Source::new(p.display().to_string(), text))
}

/// Whether a YAML text has no document: only blank lines, comments and
/// document markers.
pub(crate) fn is_blank_yaml(text: &str) -> bool {
    text.trim_start_matches('\u{feff}').lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    })
}

/// What a snapshot file holds, for "is empty" errors.
const SNAPSHOT_EXPECTED: &str = "Kubernetes objects (Node, Pod, List, as `kubectl get nodes,pods -A -o yaml` prints them) and Trainyard Queue/PodGroup documents";

/// Reads and validates a scheduler config file.
pub(crate) fn load_config(path: &Path) -> Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    parse_config(&text, &path.display().to_string())
}

/// A scheduler config, read like every other input: YAML 1.2 (`no` is a
/// string, not `false`; write `false`), errors naming the file, the
/// document, the field and what was expected, every type error at once.
/// An empty file means the defaults.
fn parse_config(text: &str, name: &str) -> Result<Config> {
    let docs = trainyard_ingest::parse_documents(&Source::new(name, text))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut present = trainyard_ingest::present_documents(docs);
    let Some((number, value)) = present.next() else {
        return Ok(Config::default());
    };
    if let Some((extra, _)) = present.next() {
        bail!(
            "{name}: document {extra}: expected one scheduler config per file, found a second document"
        );
    }
    let cfg: Config = trainyard_sim::spec::typed(&value, name, "")
        .map_err(|e| anyhow::anyhow!("{}", e.in_document(number)))?;
    cfg.validate().map_err(|e| {
        anyhow::anyhow!(
            "{}",
            LoadError {
                source_name: name.to_string(),
                document: Some(number),
                object: None,
                field: Some(e.field.to_string()),
                message: e.message,
            }
        )
    })?;
    Ok(cfg)
}

fn parse_now(s: Option<&str>) -> Result<Timestamp> {
    parse_time("--now", s)
}

/// The time `flag` gives, RFC 3339 or Unix seconds; now when absent.
fn parse_time(flag: &str, s: Option<&str>) -> Result<Timestamp> {
    match s {
        None => {
            // The binary edge is the only place that reads the clock.
            let d = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            Ok(Timestamp(d.as_millis() as i64))
        }
        Some(s) => {
            if let Ok(secs) = s.parse::<i64>() {
                return Ok(Timestamp::from_secs(secs));
            }
            trainyard_crd::parse_rfc3339(s).map_err(|e| {
                anyhow::anyhow!("{flag} {s:?}: expected RFC 3339 time or Unix seconds: {e}")
            })
        }
    }
}

fn cmd_schedule(args: ScheduleArgs) -> Result<()> {
    let config = match &args.config {
        Some(p) => load_config(p)?,
        None => Config::default(),
    };
    let now = parse_now(args.now.as_deref())?;
    let sources = collect_sources(&args.files)?;
    for s in &sources {
        if is_blank_yaml(&s.text) {
            bail!("{}: is empty; expected {SNAPSHOT_EXPECTED}", s.name);
        }
    }
    let opts = LoadOptions {
        default_queue: args.default_queue.clone(),
        scheduler_name: args.scheduler_name.clone(),
        ..LoadOptions::default()
    };
    let loaded = trainyard_ingest::load(&sources, &opts)
        .map_err(|e| anyhow::anyhow!("{} problem(s) in the snapshot:\n{e}", e.0.len()))?;
    // The loaded objects become the world; the core sees its snapshot.
    let mut world = trainyard_cluster::ClusterState::from_snapshot(loaded.snapshot);
    let mut decisions = trainyard_sched::schedule(&world.snapshot(), &config, now);
    let mut warnings = loaded.warnings;
    warnings.append(&mut decisions.warnings);
    decisions.warnings = warnings;
    let mut stdout = std::io::stdout().lock();
    match args.output {
        Output::Json => {
            let out = render::WithUnits {
                decisions: &decisions,
                units: render::units(),
            };
            serde_json::to_writer_pretty(&mut stdout, &out)?;
            writeln!(stdout)?;
        }
        Output::Table => write!(
            stdout,
            "{}",
            render::render(&decisions, render::terminal_width())
        )?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_file_and_field() {
        let e = parse_config("scoring:\n  gpu: {strategy: bnpack, weight: 1}\n  cpuMemory: {strategy: spread, weight: 1}\n", "cfg.yaml").unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "cfg.yaml: document 1: scoring.gpu.strategy: unknown variant `bnpack`, expected one of `binpack`, `spread`, `random`, `dotProd`, `clustering`, `packing`, `bestFit`, `fgd`, `trainyard`"
        );
        let e = parse_config("reservation: 5\n", "cfg.yaml").unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "cfg.yaml: document 1: reservation: unknown field `reservation`, expected one of `scoring`, `reservations`, `gangStarvationSeconds`, `topology`, `preemption`, `fairShare`, `consolidation`"
        );
        // The replaced key says what to write instead.
        let e = parse_config("gangStarvationSeconds: 600\n", "cfg.yaml").unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "cfg.yaml: document 1: gangStarvationSeconds: replaced by `reservations` (docs/scheduling.md, section 2): write `reservations: {starvingAfterSeconds: N}` instead, with the same N; a starving gang now reserves nodes and lets only jobs that end in time use them, instead of blocking its queue"
        );
        // The half-life's range.
        let e = parse_config("fairShare: {usageHalfLifeSeconds: 5}\n", "cfg.yaml").unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "cfg.yaml: document 1: fairShare.usageHalfLifeSeconds: expected seconds from 60 (a minute) to 31622400 (a year), found 5"
        );
        // The range that holds, both for the type check and the value check.
        for weight in ["1000", "-1", "x"] {
            let e = parse_config(
                &format!("scoring:\n  gpu: {{strategy: spread, weight: {weight}}}\n"),
                "cfg.yaml",
            )
            .unwrap_err();
            let found = if weight == "x" { "\"x\"" } else { weight };
            assert_eq!(
                format!("{e:#}"),
                format!(
                    "cfg.yaml: document 1: scoring.gpu.weight: expected a whole number from 0 to 100, found {found}"
                )
            );
        }
        assert_eq!(
            format!(
                "{:#}",
                parse_config("scoring: {typicalPods: {coveragePercent: 0}}\n", "cfg.yaml")
                    .unwrap_err()
            ),
            "cfg.yaml: document 1: scoring.typicalPods.coveragePercent: expected a whole number from 1 to 100, found 0"
        );
        // The runtime estimate: defaults when named, ranges checked.
        let c = parse_config(
            "reservations: {runtimeEstimate: {percentile: 50}}\n",
            "cfg.yaml",
        )
        .unwrap();
        assert_eq!(
            c.reservations.runtime_estimate,
            Some(trainyard_sched::config::RuntimeEstimateConfig {
                percentile: 50,
                ..Default::default()
            })
        );
        let c = parse_config("reservations: {runtimeEstimate: null}\n", "cfg.yaml").unwrap();
        assert_eq!(c.reservations.runtime_estimate, None);
        assert_eq!(
            format!(
                "{:#}",
                parse_config(
                    "reservations: {runtimeEstimate: {samples: 5, minSamples: 6}}\n",
                    "cfg.yaml"
                )
                .unwrap_err()
            ),
            "cfg.yaml: document 1: reservations.runtimeEstimate.minSamples: expected at most `samples` (5), found 6"
        );
        assert_eq!(
            format!(
                "{:#}",
                parse_config(
                    "reservations: {runtimeEstimate: {percentile: 0, samples: 20000}}\n",
                    "cfg.yaml"
                )
                .unwrap_err()
            ),
            "cfg.yaml: document 1: reservations.runtimeEstimate.percentile: expected a whole number from 1 to 100, found 0\ncfg.yaml: document 1: reservations.runtimeEstimate.samples: expected a whole number from 1 to 10000, found 20000"
        );
        assert_eq!(parse_config("", "empty.yaml").unwrap(), Config::default());
        assert_eq!(
            parse_config("# defaults\n", "empty.yaml").unwrap(),
            Config::default()
        );
    }

    #[test]
    fn config_reports_every_type_error_in_plain_words() {
        let text = "scoring: {gpu: {strategy: pack, weight: x}, cpuMemory: {strategy: spread, weight: 1}}\npreemption: {reclaim: maybe, maxVictimJobs: -1}\nreservations: {maxGangs: lots, starvingAfterSeconds: soon}\n";
        assert_eq!(
            format!("{:#}", parse_config(text, "cfg.yaml").unwrap_err()),
            "cfg.yaml: document 1: preemption.maxVictimJobs: expected a whole number from 0 to 4294967295, found -1
cfg.yaml: document 1: preemption.reclaim: expected true or false, found \"maybe\"
cfg.yaml: document 1: reservations.maxGangs: expected a whole number from 0 to 1000, found \"lots\"
cfg.yaml: document 1: reservations.starvingAfterSeconds: expected a whole number from 0 to 18446744073709551615, found \"soon\"
cfg.yaml: document 1: scoring.gpu.strategy: unknown variant `pack`, expected one of `binpack`, `spread`, `random`, `dotProd`, `clustering`, `packing`, `bestFit`, `fgd`, `trainyard`
cfg.yaml: document 1: scoring.gpu.weight: expected a whole number from 0 to 100, found \"x\""
        );
        assert_eq!(
            format!(
                "{:#}",
                parse_config("preemption: {reclaim: true}\n---\n{}\n", "cfg.yaml").unwrap_err()
            ),
            "cfg.yaml: document 2: expected one scheduler config per file, found a second document"
        );
        assert_eq!(
            format!(
                "{:#}",
                parse_config("preemption: {reclaim: true\n", "cfg.yaml").unwrap_err()
            ),
            "cfg.yaml: invalid YAML: unclosed bracket '{' at line 1, column 13"
        );
    }

    #[test]
    fn config_takes_yaml_1_2_booleans_only() {
        // As the snapshot, cluster and workload readers: `no`, `yes`, `on`
        // and `off` are strings, so a boolean field refuses them.
        for word in ["no", "yes", "off", "on", "n", "Y"] {
            let e = parse_config(&format!("preemption: {{reclaim: {word}}}\n"), "cfg.yaml")
                .unwrap_err();
            assert_eq!(
                format!("{e:#}"),
                format!(
                    "cfg.yaml: document 1: preemption.reclaim: expected true or false, found \"{word}\""
                )
            );
        }
        let c = parse_config("preemption: {reclaim: false, preempt: true}\n", "cfg.yaml").unwrap();
        assert!(!c.preemption.reclaim && c.preemption.preempt);
    }

    #[test]
    fn blank_yaml() {
        for blank in ["", "\n", "  \n# c\n---\n...\n", "\u{feff}"] {
            assert!(is_blank_yaml(blank), "{blank:?}");
        }
        for not in ["{}", "a: 1", "~", "---\nkind: Pod\n"] {
            assert!(!is_blank_yaml(not), "{not:?}");
        }
    }

    #[test]
    fn now_accepts_rfc3339_and_seconds() {
        assert_eq!(
            parse_now(Some("1704067200")).unwrap(),
            Timestamp(1_704_067_200_000)
        );
        assert_eq!(
            parse_now(Some("2024-01-01T00:00:00Z")).unwrap(),
            Timestamp(1_704_067_200_000)
        );
        assert!(parse_now(Some("yesterday")).is_err());
    }
}
