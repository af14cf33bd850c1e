//! `trainyard usage`: what each queue, namespace and job used, from the
//! scheduler's store, or from a running scheduler's `/usage` (which asks
//! its store) (docs/persistence.md, "Accounting").

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::ValueEnum;
use trainyard_serve::persist::{UsageBy, UsageRow, usage_report};
use trainyard_store::Backend;

#[derive(clap::Args, Debug)]
pub struct UsageArgs {
    /// The scheduler's store: its `service.store.path` (a redb file, or a
    /// sled directory with --backend sled). A store a running scheduler
    /// holds is locked: ask that scheduler with --server instead.
    #[arg(long, value_name = "PATH", conflicts_with = "server")]
    store: Option<PathBuf>,
    /// A running scheduler: its HTTP address (`service.httpAddress`), e.g.
    /// `http://127.0.0.1:8080` after `kubectl port-forward`: its `/usage`
    /// answers from the store it holds, with the hour still open and the
    /// jobs still running (ask the leader: a standby's store holds only
    /// what was recorded while it led); or its gRPC API's socket,
    /// `unix:///tmp/trainyard-api.sock`: each queue's time-decayed usage
    /// now, as the fair share weighs it. Without --store and --server:
    /// the API at TRAINYARD_SERVER when it is set.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// The store's engine.
    #[arg(long, value_enum, default_value_t = BackendArg::Redb)]
    backend: BackendArg,
    /// How far back from --until: `90m`, `36h`, `7d`, `4w`.
    #[arg(long, default_value = "7d", value_name = "DURATION")]
    since: String,
    /// End of the window, RFC 3339 (e.g. 2026-11-22T10:00:00Z) or Unix seconds. Defaults to now.
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// One row per leaf queue, per namespace, per (queue, namespace), or
    /// per job (jobs that held resources in the window: ended, evicted or
    /// deleted, and, with --server, those still running, END "running").
    #[arg(long, value_enum, default_value_t = ByArg::Queue)]
    by: ByArg,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = UsageOutput::Table)]
    output: UsageOutput,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BackendArg {
    Redb,
    Sled,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ByArg {
    Queue,
    Namespace,
    Both,
    Job,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum UsageOutput {
    /// Aligned columns for people, with a total.
    Table,
    /// One row per line, a header first; hours with three decimals.
    Csv,
    /// The window and the rows in integer units (milli-GPU·s, millicore·s, byte·s).
    Json,
}

impl UsageArgs {
    pub fn until(&self) -> Option<&str> {
        self.until.as_deref()
    }
}

/// `v` thousandths as a decimal with three places.
fn thousandths(v: u128) -> String {
    format!("{}.{:03}", v / 1000, v % 1000)
}

/// GPU-hours, CPU core-hours and memory GiB-hours of a row, each to the
/// thousandth (rounded down), from its integer amounts.
fn hours(r: &UsageRow) -> [String; 3] {
    [
        thousandths(r.gpu_milli_seconds / 3600),
        thousandths(r.cpu_milli_seconds / 3600),
        thousandths(r.memory_byte_seconds * 1000 / (3600 << 30)),
    ]
}

pub fn run(
    args: UsageArgs,
    now: impl FnOnce() -> Result<trainyard_model::Timestamp>,
) -> Result<()> {
    let since_ms =
        trainyard_sim::spec::parse_duration_ms(&serde_json::Value::String(args.since.clone()))
            .map_err(|e| anyhow::anyhow!("--since {:?}: {e}", args.since))?;
    let until = now()?;
    let to_s = until.0.div_euclid(1000);
    let from_s = to_s.saturating_sub(i64::try_from(since_ms / 1000).unwrap_or(i64::MAX));
    let backend = match args.backend {
        BackendArg::Redb => Backend::Redb,
        BackendArg::Sled => Backend::Sled,
    };
    let by = match args.by {
        ByArg::Queue => UsageBy::Queue,
        ByArg::Namespace => UsageBy::Namespace,
        ByArg::Both => UsageBy::Both,
        ByArg::Job => UsageBy::Job,
    };
    let live = match args.output {
        UsageOutput::Table => crate::remote::usage::LiveFormat::Table,
        UsageOutput::Csv => crate::remote::usage::LiveFormat::Csv,
        UsageOutput::Json => crate::remote::usage::LiveFormat::Json,
    };
    match (&args.store, &args.server) {
        (None, Some(s)) if s.starts_with("unix://") || s.starts_with('/') => {
            return crate::remote::usage::live(Some(s.clone()), live);
        }
        (None, None) if std::env::var_os("TRAINYARD_SERVER").is_some() => {
            return crate::remote::usage::live(None, live);
        }
        _ => {}
    }
    let rows = match (&args.store, &args.server) {
        (None, None) => bail!("{NO_SOURCE}"),
        (_, Some(server)) => {
            let (rows, leading) = ask_server(server, from_s, to_s, by)?;
            if !leading {
                eprintln!(
                    "note: {server} is not the leader; its store holds only the usage recorded while it led"
                );
            }
            rows
        }
        (Some(path), None) => {
            if !path.exists() {
                bail!(
                    "--store {}: no such file or directory; expected the scheduler's store (service.store.path), or a copy of it; a running scheduler is asked with --server URL instead ({PORT_FORWARD})",
                    path.display()
                );
            }
            let store = trainyard_store::open(path, backend).map_err(|e| {
                anyhow::anyhow!(
                    "{e}\n(a store a running scheduler holds is locked: ask that scheduler with --server, or read a copy of the store)"
                )
            })?;
            usage_report(
                store.as_ref(),
                from_s,
                to_s,
                by,
                &trainyard_serve::persist::Live::default(),
            )?
        }
    };
    let by_job = by == UsageBy::Job;
    let time = |s: Option<i64>| {
        s.map(|s| trainyard_serve::report::rfc3339(trainyard_model::Timestamp::from_secs(s)))
            .unwrap_or_default()
    };
    let mut out = std::io::stdout().lock();
    use std::io::Write;
    match args.output {
        UsageOutput::Json => {
            let v = serde_json::json!({
                "from": trainyard_serve::report::rfc3339(trainyard_model::Timestamp::from_secs(from_s)),
                "to": trainyard_serve::report::rfc3339(trainyard_model::Timestamp::from_secs(to_s)),
                "rows": rows,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        }
        UsageOutput::Csv => {
            let mut w = csv::Writer::from_writer(out);
            let mut header = vec!["queue", "namespace"];
            if by_job {
                header.extend(["job", "start", "end"]);
            }
            header.extend(["gpu_hours", "cpu_core_hours", "memory_gib_hours"]);
            w.write_record(header)?;
            for r in &rows {
                let mut cells = vec![r.queue.clone(), r.namespace.clone()];
                if by_job {
                    cells.extend([r.job.clone(), time(r.start_s), time(r.end_s)]);
                }
                cells.extend(hours(r));
                w.write_record(cells)?;
            }
            w.flush()?;
        }
        UsageOutput::Table => {
            writeln!(
                out,
                "usage from {} to {}",
                trainyard_serve::report::rfc3339(trainyard_model::Timestamp::from_secs(from_s)),
                trainyard_serve::report::rfc3339(trainyard_model::Timestamp::from_secs(to_s)),
            )?;
            if rows.is_empty() {
                writeln!(out, "no usage recorded in this window")?;
                if args.store.is_some() {
                    writeln!(
                        out,
                        "(a store holds whole hours: the hour still open and the jobs still running are in the running scheduler; ask it with --server URL)"
                    )?;
                }
                return Ok(());
            }
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::NOTHING);
            let mut header = Vec::new();
            if !matches!(by, UsageBy::Namespace) {
                header.push("QUEUE");
            }
            if !matches!(by, UsageBy::Queue) {
                header.push("NAMESPACE");
            }
            if by_job {
                header.extend(["JOB", "START", "END"]);
            }
            header.extend(["GPU-HOURS", "CPU CORE-HOURS", "MEMORY GIB-HOURS"]);
            t.set_header(header);
            let mut total = UsageRow::default();
            for r in &rows {
                total.gpu_milli_seconds += r.gpu_milli_seconds;
                total.cpu_milli_seconds += r.cpu_milli_seconds;
                total.memory_byte_seconds += r.memory_byte_seconds;
                let mut cells = Vec::new();
                if !matches!(by, UsageBy::Namespace) {
                    cells.push(r.queue.clone());
                }
                if !matches!(by, UsageBy::Queue) {
                    cells.push(r.namespace.clone());
                }
                if by_job {
                    let end = if r.running {
                        "running".to_string()
                    } else {
                        time(r.end_s)
                    };
                    cells.extend([r.job.clone(), time(r.start_s), end]);
                }
                cells.extend(hours(r));
                t.add_row(cells);
            }
            let mut cells = vec!["TOTAL".to_string()];
            let blanks = match by {
                UsageBy::Both => 1,
                UsageBy::Job => 4,
                UsageBy::Queue | UsageBy::Namespace => 0,
            };
            cells.extend(std::iter::repeat_n(String::new(), blanks));
            cells.extend(hours(&total));
            t.add_row(cells);
            for i in t.column_count().saturating_sub(3)..t.column_count() {
                if let Some(c) = t.column_mut(i) {
                    c.set_cell_alignment(comfy_table::CellAlignment::Right);
                }
            }
            writeln!(
                out,
                "{}",
                crate::render::fit(&mut t, crate::render::terminal_width())
            )?;
        }
    }
    Ok(())
}

/// What to say when neither --store nor --server is given.
const NO_SOURCE: &str = "trainyard usage needs where the usage history is:
  --server URL  a running scheduler's /usage, with the hour still open and the jobs still running;
                for the leader in the cluster (docs/persistence.md, \"Accounting\"):
                  kubectl -n trainyard-system port-forward pod/$(kubectl -n trainyard-system get lease trainyard -o jsonpath='{.spec.holderIdentity}') 8080 &
                  trainyard usage --server http://127.0.0.1:8080
  --store PATH  a store file: the scheduler's service.store.path (a copy, or a stopped replica's)
  --server unix:///tmp/trainyard-api.sock  the scheduler's gRPC API: each queue's time-decayed usage now
                (also taken from TRAINYARD_SERVER when it is set)";

/// How to reach the leader's `/usage` from a workstation.
const PORT_FORWARD: &str = "kubectl -n trainyard-system port-forward pod/<the leader> 8080, then --server http://127.0.0.1:8080";

/// Asks `server`'s `/usage` ([`trainyard_serve::http::ask_usage`]).
fn ask_server(server: &str, from_s: i64, to_s: i64, by: UsageBy) -> Result<(Vec<UsageRow>, bool)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let a = rt
        .block_on(trainyard_serve::http::ask_usage(server, from_s, to_s, by))
        .map_err(|e| {
            let hint = if e.starts_with("cannot connect") {
                format!(
                    "; is the scheduler running there ({PORT_FORWARD})? Its store file can be read with --store PATH instead"
                )
            } else {
                String::new()
            };
            anyhow::anyhow!("--server {server}: {e}{hint}")
        })?;
    Ok((a.rows, a.leading))
}
