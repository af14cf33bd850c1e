//! The `trainyard` command.

mod fgd;
mod render;
mod simulate;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use trainyard_model::Timestamp;
use trainyard_sched::Config;
use trainyard_snapshot::{LoadOptions, Source};

/// Trainyard: a batch scheduler for GPU training clusters.
///
/// Gangs placed all-or-nothing, hierarchical queues shared by weighted DRF,
/// GPUs tracked device by device. `trainyard schedule` runs one scheduling
/// cycle offline on a snapshot of a cluster and explains every decision.
#[derive(Parser, Debug)]
#[command(name = "trainyard", version, propagate_version = true)]
struct Cli {
    /// More log output on stderr (-v info, -vv debug). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
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

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Output {
    /// Aligned columns for people.
    Table,
    /// Machine-readable: binds, pending (with structured reasons), queues, warnings, stats.
    Json,
}

fn main() {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let result = match cli.command {
        Command::Schedule(args) => cmd_schedule(args),
        Command::Simulate(args) => simulate::run(*args),
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

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
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

/// Reads and validates a scheduler config file.
pub(crate) fn load_config(path: &Path) -> Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    parse_config(&text, &path.display().to_string())
}

fn parse_config(text: &str, name: &str) -> Result<Config> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| anyhow::anyhow!("{name}: not valid YAML: {e}"))?;
    let value = if value.is_null() {
        serde_json::json!({})
    } else {
        value
    };
    let cfg: Config = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        anyhow::anyhow!("{name}: field {path}: {}", e.into_inner())
    })?;
    cfg.validate().map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(cfg)
}

fn parse_now(s: Option<&str>) -> Result<Timestamp> {
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
            trainyard_api::parse_rfc3339(s).map_err(|e| {
                anyhow::anyhow!("--now {s:?}: expected RFC 3339 time or Unix seconds: {e}")
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
    let opts = LoadOptions {
        default_queue: args.default_queue.clone(),
        scheduler_name: args.scheduler_name.clone(),
    };
    let loaded = trainyard_snapshot::load(&sources, &opts)
        .map_err(|e| anyhow::anyhow!("{} problem(s) in the snapshot:\n{e}", e.0.len()))?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let mut decisions = trainyard_sched::schedule(&loaded.snapshot, &config, now);
    let mut warnings = loaded.warnings;
    warnings.append(&mut decisions.warnings);
    decisions.warnings = warnings;
    let mut stdout = std::io::stdout().lock();
    match args.output {
        Output::Json => {
            serde_json::to_writer_pretty(&mut stdout, &decisions)?;
            writeln!(stdout)?;
        }
        Output::Table => write!(stdout, "{}", render::render(&decisions))?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_file_and_field() {
        let e = parse_config("scoring:\n  gpu: {strategy: bnpack, weight: 1}\n  cpuMemory: {strategy: spread, weight: 1}\n", "cfg.yaml").unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.starts_with("cfg.yaml: field scoring.gpu.strategy: unknown variant `bnpack`"),
            "{msg}"
        );
        let e = parse_config("gangStarvationSecs: 5\n", "cfg.yaml").unwrap_err();
        assert!(
            format!("{e:#}").contains("unknown field `gangStarvationSecs`"),
            "{e:#}"
        );
        let e = parse_config("scoring:\n  gpu: {strategy: spread, weight: 1000}\n  cpuMemory: {strategy: spread, weight: 1}\n", "cfg.yaml").unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "cfg.yaml: config field scoring.gpu.weight: expected 0..=100, got 1000"
        );
        assert_eq!(parse_config("", "empty.yaml").unwrap(), Config::default());
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
