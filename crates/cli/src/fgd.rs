//! `trainyard simulate fgd`: the FGD paper's experiment, runs spread over
//! threads, a progress bar, the results table and files.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use comfy_table::{Cell as TCell, CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use trainyard_sched::GpuStrategy;
use trainyard_sim::fgd::{
    self, Cell, Experiment, PAPER_POLICIES, Reference, RunResult, paper_label,
};

use crate::progress;

/// What `trainyard simulate fgd` prints on stdout.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum FgdFormat {
    /// The results table (unallocated GPU % at 100% arrived, mean ± sd per
    /// workload and policy, with the published values when --reference is given).
    Table,
    /// The same results as JSON, per workload and policy: the headline mean
    /// and sd and the per-seed values (the content of summary.json).
    Json,
}

#[derive(clap::Args, Debug)]
pub struct FgdArgs {
    /// openb pod list CSV(s): one workload each (`openb_pod_list_<name>.csv`).
    #[arg(long, value_name = "CSV", required = true, num_args = 1..)]
    workload: Vec<PathBuf>,
    /// openb node list CSV. Default: `openb_node_list_gpu_node.csv` next to
    /// the first workload.
    #[arg(long, value_name = "CSV")]
    nodes: Option<PathBuf>,
    /// Placement policy; repeat or separate with commas. One of random,
    /// dotProd, clustering, packing, bestFit, fgd, trainyard, binpack,
    /// spread; `paper` = the paper's six; `all` = the six plus trainyard.
    #[arg(
        long = "policy",
        value_name = "NAME",
        default_value = "all",
        value_delimiter = ','
    )]
    policies: Vec<String>,
    /// Seeds: `A..B` (inclusive) or a comma-separated list.
    #[arg(long, default_value = "42..51", value_name = "SEEDS")]
    seeds: String,
    /// The published results (`fgd-reference.md`): adds them, the
    /// differences and the acceptance check to the table and files.
    #[arg(long, value_name = "MD")]
    reference: Option<PathBuf>,
    /// Write results.md, runs.csv, curves.csv, summary.json and report.html here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Worker threads. Default: all cores.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Output format on stdout.
    #[arg(long, short, value_enum, default_value_t = FgdFormat::Table)]
    output: FgdFormat,
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))
}

fn parse_policies(names: &[String]) -> Result<Vec<GpuStrategy>> {
    let mut out = Vec::new();
    for n in names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let add: Vec<GpuStrategy> = match n {
            "paper" => PAPER_POLICIES.to_vec(),
            "all" => {
                let mut v = PAPER_POLICIES.to_vec();
                v.push(GpuStrategy::Trainyard);
                v
            }
            _ => vec![GpuStrategy::parse(n).with_context(|| {
                format!(
                    "--policy {n:?}: expected one of {}, paper, all",
                    GpuStrategy::ALL.map(|g| g.as_str()).join(", ")
                )
            })?],
        };
        for p in add {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    if out.is_empty() {
        bail!("--policy: no policy given");
    }
    Ok(out)
}

fn parse_seeds(s: &str) -> Result<Vec<u64>> {
    let bad = || format!("--seeds {s:?}: expected `A..B` (e.g. 42..51) or a list (e.g. 42,43)");
    if let Some((a, b)) = s.split_once("..") {
        let a: u64 = a.trim().parse().with_context(bad)?;
        let b: u64 = b.trim().parse().with_context(bad)?;
        if b < a || b - a >= 10_000 {
            bail!(
                "{}: the range must be ascending and at most 10,000 seeds",
                bad()
            );
        }
        return Ok((a..=b).collect());
    }
    let v: Vec<u64> = s
        .split(',')
        .map(|x| x.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .with_context(bad)?;
    if v.is_empty() {
        bail!(bad());
    }
    Ok(v)
}

/// `openb_pod_list_default.csv` → `default`.
fn workload_name(p: &Path) -> String {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    stem.strip_prefix("openb_pod_list_")
        .unwrap_or(&stem)
        .to_string()
}

pub fn run(args: FgdArgs) -> Result<()> {
    let wall = Instant::now();
    let policies = parse_policies(&args.policies)?;
    let seeds = parse_seeds(&args.seeds)?;
    let nodes_path = match &args.nodes {
        Some(p) => p.clone(),
        None => args.workload[0]
            .parent()
            .unwrap_or(Path::new("."))
            .join("openb_node_list_gpu_node.csv"),
    };
    let nodes =
        trainyard_sim::openb::parse_nodes(&read(&nodes_path)?, &nodes_path.display().to_string())?;
    let reference: Option<Reference> = match &args.reference {
        Some(p) => Some(
            fgd::parse_reference(&read(p)?, &p.display().to_string())
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let mut experiments = Vec::new();
    for w in &args.workload {
        let pods = fgd::parse_pods(&read(w)?, &w.display().to_string())?;
        if pods.is_empty() {
            bail!("{}: no pods", w.display());
        }
        experiments.push((workload_name(w), Experiment::new(nodes.clone(), pods)));
    }

    // Every (workload, policy, seed) is one job for the worker pool.
    let mut jobs: Vec<(usize, GpuStrategy, u64)> = Vec::new();
    for e in 0..experiments.len() {
        for p in &policies {
            for s in &seeds {
                jobs.push((e, *p, *s));
            }
        }
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let bar = ProgressBar::with_draw_target(Some(jobs.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} runs, {elapsed} (eta {eta}) {msg}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix("fgd");
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let lines = progress::Lines::for_stderr();
    let results: Mutex<Vec<Option<(RunResult, f64)>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(e, p, s)) = jobs.get(i) else { break };
                    let t = Instant::now();
                    let r = experiments[e].1.run(p, s);
                    let secs = t.elapsed().as_secs_f64();
                    bar.set_message(format!("{} {} seed {s}", experiments[e].0, p.as_str()));
                    bar.inc(1);
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    lines.tick(|| {
                        format!(
                            "progress: fgd: {finished}/{} runs ({}%), {:.0} s",
                            jobs.len(),
                            finished * 100 / jobs.len().max(1),
                            wall.elapsed().as_secs_f64()
                        )
                    });
                    if let Ok(mut v) = results.lock() {
                        v[i] = Some((r, secs));
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    let results = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?;

    let mut cells: Vec<Cell> = Vec::new();
    let mut run_secs: Vec<(String, GpuStrategy, f64)> = Vec::new();
    for (job, r) in jobs.iter().zip(results) {
        let (r, secs) = r.context("a run did not finish")?;
        let name = &experiments[job.0].0;
        run_secs.push((name.clone(), job.1, secs));
        match cells
            .iter_mut()
            .find(|c| c.workload == *name && c.policy == job.1)
        {
            Some(c) => c.runs.push(r),
            None => cells.push(Cell {
                workload: name.clone(),
                policy: job.1,
                runs: vec![r],
            }),
        }
    }
    let elapsed = wall.elapsed().as_secs_f64();

    match args.output {
        FgdFormat::Json => print!("{}", fgd::summary_json(&cells, reference.as_ref())),
        FgdFormat::Table => {
            println!("{}", table(&cells, reference.as_ref()));
            if let Some(r) = &reference {
                let checks = fgd::checks(&cells, r);
                let strict: Vec<_> = checks
                    .iter()
                    .filter(|c| fgd::STRICT.contains(&c.policy))
                    .collect();
                let pass = strict.iter().filter(|c| c.within_1pp()).count();
                if !strict.is_empty() {
                    println!(
                        "Random, BestFit, GpuPacking, FGD within 1 pp of the published mean: {pass} of {} cells",
                        strict.len()
                    );
                }
            }
            if let Some(o) = fgd::default_ordering(&cells) {
                println!("default, worst to best: {o}");
            }
        }
    }
    let mut per_policy: Vec<(GpuStrategy, f64, usize)> = Vec::new();
    for (_, p, s) in &run_secs {
        match per_policy.iter_mut().find(|x| x.0 == *p) {
            Some(x) => {
                x.1 = x.1.max(*s);
                x.2 += 1;
            }
            None => per_policy.push((*p, *s, 1)),
        }
    }
    eprintln!(
        "{} runs in {elapsed:.1} s on {threads} thread(s); slowest run per policy: {}",
        jobs.len(),
        per_policy
            .iter()
            .map(|(p, s, _)| format!("{} {s:.2} s", p.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    );

    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
        let command = format!(
            "trainyard simulate fgd --nodes {} --workload {} --policy {} --seeds {}{}",
            nodes_path.display(),
            args.workload
                .iter()
                .map(|w| w.display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
            policies
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(","),
            args.seeds,
            args.reference
                .as_ref()
                .map(|r| format!(" --reference {}", r.display()))
                .unwrap_or_default()
        );
        let write = |name: &str, text: &str| -> Result<()> {
            let p = dir.join(name);
            std::fs::write(&p, text).with_context(|| format!("{}: cannot write", p.display()))
        };
        write(
            "results.md",
            &fgd::results_markdown(&cells, reference.as_ref(), &command),
        )?;
        write("runs.csv", &fgd::runs_csv(&cells))?;
        write("curves.csv", &fgd::curves_csv(&cells))?;
        write(
            "summary.json",
            &fgd::summary_json(&cells, reference.as_ref()),
        )?;
        write(
            "report.html",
            &trainyard_sim::fgd_report::report_html(&cells, reference.as_ref()),
        )?;
        eprintln!(
            "wrote results.md, runs.csv, curves.csv, summary.json, report.html to {}",
            dir.display()
        );
    }
    Ok(())
}

fn table(cells: &[Cell], reference: Option<&Reference>) -> Table {
    let ws = fgd::workloads(cells);
    let ps = fgd::policies(cells);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec![TCell::new("unallocated GPU % @100%")];
    header.extend(ps.iter().map(|p| TCell::new(paper_label(*p))));
    t.set_header(header);
    for w in ws {
        let mut row = vec![TCell::new(w)];
        for p in &ps {
            let text = match cells.iter().find(|c| c.workload == w && c.policy == *p) {
                Some(c) => {
                    let (m, sd) = c.headline();
                    let mut s = format!("{m:.2} ± {sd:.2}");
                    if let Some((pm, _)) =
                        reference.and_then(|r| r.get(&(w.to_string(), paper_label(*p).to_string())))
                    {
                        s.push_str(&format!("\npub {pm:.2} ({:+.2})", m - pm));
                    }
                    s
                }
                None => String::new(),
            };
            row.push(TCell::new(text).set_alignment(CellAlignment::Right));
        }
        t.add_row(row);
    }
    t
}
