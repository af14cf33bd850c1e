//! The FGD experiment (Weng et al., ATC'23) on the openb traces: an
//! arrival-only replay with one-shot placement, as specified in
//! `openb/FGD-EXPERIMENT.md`.
//!
//! Per run (workload, policy, seed): sort the pods by name, shuffle them,
//! inflate the workload to 130% of the cluster's GPU capacity by resampling
//! (or trim it), give every node a random but fixed tie-break rank, then
//! place pods one by one through the core's [`Placer`]; a pod that fits
//! nowhere fails for good. After every arrival the allocated GPU and the
//! cluster's fragmentation are recorded and binned by arrived load.
//!
//! Ranks are applied the way the paper's artifact does it: node `n` is
//! renamed `"{rank:04}-{name}"`, and the core breaks ties by node name.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainyard_model::{Node, PlacementConstraints, Resources};
use trainyard_sched::fragmentation::{DEFAULT_COVERAGE_PERCENT, TypicalPod, TypicalPods};
use trainyard_sched::placer::Placer;
use trainyard_sched::{GpuScorerConfig, GpuStrategy, ScorerConfig, ScoringConfig, Strategy};

use crate::openb::{OpenbError, joined, read_csv};

/// One pod row of an openb pod list, as the experiment reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FgdPod {
    pub name: String,
    /// Millicores.
    pub cpu: u64,
    pub memory_bytes: u64,
    /// Devices: 0 (CPU-only), 1 (shared or one whole GPU), or k whole GPUs.
    pub gpus: u32,
    /// Milli-GPU per device: 0 for CPU-only pods, 1..=999 shared, 1000 whole.
    pub milli: u16,
    /// The `gpu_spec` models re-joined with `|` (order and duplicates kept).
    pub spec: String,
}

impl FgdPod {
    /// Total milli-GPU requested (`k × u`).
    pub fn gpu_total(&self) -> u64 {
        self.gpus as u64 * self.milli as u64
    }
}

const REQUIRED: [&str; 5] = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"];

/// Parses an openb pod list for the experiment. Columns are found by
/// header name: `name`, `cpu_milli`, `memory_mib`, `num_gpu` are required,
/// `gpu_milli` (missing: 1000) and `gpu_spec` are optional, others are
/// ignored. Rules of §1.2: a pod without GPUs asks for no milli-GPU;
/// `gpu_milli` is clamped to 0..=1000; a GPU pod with 0 milli-GPU and a
/// multi-GPU pod with less than 1000 per device are errors.
pub fn parse_pods(text: &str, source: &str) -> Result<Vec<FgdPod>, OpenbError> {
    let expected = REQUIRED.join(",") + "[,gpu_spec,...]";
    let (header, rows) = read_csv(text, source, &expected)?;
    let col = |name: &str| header.fields.iter().position(|h| h == name);
    let missing: Vec<&str> = REQUIRED[..4]
        .iter()
        .copied()
        .filter(|c| col(c).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(OpenbError::Header {
            input: source.to_string(),
            line: header.line,
            expected: format!(
                "the columns {} (missing: {})",
                REQUIRED[..4].join(", "),
                missing.join(", ")
            ),
            found: joined(&header.fields),
        });
    }
    // Checked just above: the four required columns exist.
    let idx: Vec<usize> = REQUIRED[..4].iter().map(|c| col(c).unwrap_or(0)).collect();
    let milli_col = col("gpu_milli");
    let spec_col = col("gpu_spec");
    let mut pods = Vec::new();
    for row in rows {
        let row = row?;
        let f = &row.fields;
        if f.len() == 1 && f.get(0) == Some("") {
            continue;
        }
        let field_err = |column: usize, what: &str| OpenbError::Field {
            input: source.to_string(),
            line: row.line,
            column: header.fields.get(column).unwrap_or_default().to_string(),
            expected: what.to_string(),
            found: f.get(column).unwrap_or_default().to_string(),
        };
        let get = |column: usize| -> Result<&str, OpenbError> {
            f.get(column).ok_or_else(|| OpenbError::ColumnCount {
                input: source.to_string(),
                line: row.line,
                expected: header.fields.len(),
                found: f.len(),
                columns: joined(&header.fields),
            })
        };
        let name = get(idx[0])?;
        if name.is_empty() {
            return Err(field_err(idx[0], "a pod name"));
        }
        let cpu: u64 = get(idx[1])?
            .parse()
            .map_err(|_| field_err(idx[1], "a non-negative integer (millicores)"))?;
        let memory_bytes = get(idx[2])?
            .parse::<u64>()
            .ok()
            .and_then(|mib| mib.checked_mul(1 << 20))
            .ok_or_else(|| field_err(idx[2], "a non-negative integer (MiB) below 2^44"))?;
        let gpus: u32 = get(idx[3])?
            .parse()
            .ok()
            .filter(|g| *g <= 1024)
            .ok_or_else(|| field_err(idx[3], "a GPU count, an integer from 0 to 1024"))?;
        let raw_milli: i64 = match milli_col {
            Some(c) => get(c)?
                .parse()
                .map_err(|_| field_err(c, "an integer (milli-GPU per device)"))?,
            None => 1000,
        };
        let milli = if gpus == 0 {
            0
        } else {
            raw_milli.clamp(0, 1000) as u16
        };
        if gpus > 0 && milli == 0 {
            return Err(field_err(
                milli_col.unwrap_or(idx[3]),
                "a positive gpu_milli for a pod with num_gpu > 0",
            ));
        }
        if gpus > 1 && milli < 1000 {
            return Err(field_err(
                milli_col.unwrap_or(idx[3]),
                "1000 (whole devices) for a multi-GPU pod; sharing applies to one device only",
            ));
        }
        let spec = if gpus == 0 {
            String::new()
        } else {
            match spec_col {
                Some(c) => f
                    .get(c)
                    .unwrap_or_default()
                    .split('|')
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join("|"),
                None => String::new(),
            }
        };
        pods.push(FgdPod {
            name: name.to_string(),
            cpu,
            memory_bytes,
            gpus,
            milli,
            spec,
        });
    }
    Ok(pods)
}

/// The typical pod mix of a workload: every original row counts once,
/// keyed by (CPU, milli-GPU per device, devices, spec string).
pub fn typical_pods(pods: &[FgdPod]) -> TypicalPods {
    TypicalPods::from_classes(
        pods.iter()
            .map(|p| TypicalPod::new(p.cpu, p.milli, p.gpus, &p.spec, 1)),
        DEFAULT_COVERAGE_PERCENT,
    )
}

/// Number of arrived-load bins: 0%, 1%, ..., 130%.
pub const BINS: usize = 131;

/// Inflation target, percent of GPU capacity.
pub const TUNE_PERCENT: u64 = 130;

/// The per-bin curves of one run (`None` where no arrival fell near the bin).
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    pub policy: GpuStrategy,
    pub seed: u64,
    /// Pods replayed (after inflation).
    pub pods: u64,
    /// Pods that fit nowhere.
    pub failed: u64,
    /// Unallocated GPU, percent of all GPUs.
    pub unallocated: Vec<Option<f64>>,
    /// Fragmented GPU, percent of all GPUs.
    pub frag_pct: Vec<Option<f64>>,
    /// Fragmented GPU, percent of idle GPU.
    pub frag_ratio: Vec<Option<f64>>,
}

/// Per-bin sums of one run.
#[derive(Clone, Copy, Default)]
struct Acc {
    alloc: f64,
    frag: f64,
    ratio: f64,
    n: u64,
}

/// An experiment: one cluster and one workload, runnable for any policy
/// and seed.
pub struct Experiment {
    /// Nodes in name order.
    nodes: Vec<Node>,
    /// Pods in name order (`P_sorted`).
    pods: Vec<FgdPod>,
    typical: TypicalPods,
    /// Number of GPUs.
    gpus: u64,
}

impl Experiment {
    pub fn new(mut nodes: Vec<Node>, mut pods: Vec<FgdPod>) -> Experiment {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        for n in &mut nodes {
            // The artifact's node objects allow 1001 pods.
            n.max_pods = Some(1001);
        }
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        let typical = typical_pods(&pods);
        let gpus = nodes.iter().map(|n| n.gpus.len() as u64).sum();
        Experiment {
            nodes,
            pods,
            typical,
            gpus,
        }
    }

    pub fn typical(&self) -> &TypicalPods {
        &self.typical
    }

    pub fn gpus(&self) -> u64 {
        self.gpus
    }

    /// The arrival list of a run: shuffled, then inflated (or trimmed) to
    /// [`TUNE_PERCENT`] of GPU capacity (§2.2–2.3). Also returns the node
    /// ranks (§2.4). Consumes `rng` in the spec's order.
    fn arrivals(&self, rng: &mut ChaCha8Rng) -> (Vec<usize>, Vec<usize>) {
        rng.next_u64();
        let mut order: Vec<usize> = (0..self.pods.len()).collect();
        order.shuffle(rng);
        let target = self.gpus * 1000 * TUNE_PERCENT / 100;
        let mut sum: u64 = order.iter().map(|&i| self.pods[i].gpu_total()).sum();
        if sum < target && !self.pods.is_empty() {
            loop {
                let i = rng.random_range(0..self.pods.len());
                let q = &self.pods[i];
                // The artifact tests the per-device share, then adds k × u.
                if sum + q.milli as u64 > target {
                    break;
                }
                order.push(i);
                sum += q.gpu_total();
            }
        } else {
            while sum > target && !order.is_empty() {
                let at = rng.random_range(0..order.len());
                let i = order.remove(at);
                sum -= self.pods[i].gpu_total();
            }
        }
        let mut ranks: Vec<usize> = (0..self.nodes.len()).collect();
        ranks.shuffle(rng);
        (order, ranks)
    }

    /// Runs one replay.
    pub fn run(&self, policy: GpuStrategy, seed: u64) -> RunResult {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (order, ranks) = self.arrivals(&mut rng);
        let width = self.nodes.len().saturating_sub(1).to_string().len().max(4);
        let renamed: Vec<Node> = self
            .nodes
            .iter()
            .zip(&ranks)
            .map(|(n, r)| {
                let mut n = n.clone();
                n.name = format!("{r:0width$}-{}", n.name);
                n
            })
            .collect();
        let scoring = ScoringConfig {
            gpu: GpuScorerConfig {
                strategy: policy,
                weight: 1,
            },
            cpu_memory: ScorerConfig {
                strategy: Strategy::Binpack,
                weight: 0,
            },
            random_seed: rng.next_u64(),
            ..ScoringConfig::default()
        };
        let mut placer = Placer::new(renamed, &scoring, self.typical.clone());

        // Fragmentation per node, kept current.
        let den = self.typical.denominator() as f64;
        let frag_of = |p: &Placer, n: usize| -> u64 {
            let st = p.state(n);
            self.typical
                .frag_numerator(&p.nodes()[n], st.free.cpu, &st.device_frees())
        };
        let mut frag: Vec<u64> = (0..placer.nodes().len())
            .map(|n| frag_of(&placer, n))
            .collect();
        let mut frag_total: u128 = frag.iter().map(|f| *f as u128).sum();
        let cap = self.gpus * 1000;

        let mut constraints: BTreeMap<&str, Arc<PlacementConstraints>> = BTreeMap::new();
        let mut acc: Vec<Acc> = Vec::new();
        let (mut arrived, mut used, mut failed) = (0u64, 0u64, 0u64);
        for (k, &i) in order.iter().enumerate() {
            let p = &self.pods[i];
            arrived += p.gpu_total();
            let c = constraints
                .entry(p.spec.as_str())
                .or_insert_with(|| {
                    let mut models: Vec<String> = p
                        .spec
                        .split('|')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect();
                    models.sort();
                    models.dedup();
                    Arc::new(PlacementConstraints {
                        gpu_models: models,
                        ..PlacementConstraints::default()
                    })
                })
                .clone();
            let req = Resources::new(p.cpu, p.memory_bytes, p.gpu_total());
            let placed = match placer.shape(&req, &c) {
                Ok(shape) => placer.place(shape, k as u64),
                Err(_) => None,
            };
            match placed {
                Some(pl) => {
                    used += p.gpu_total();
                    let f = frag_of(&placer, pl.node);
                    frag_total = frag_total - frag[pl.node] as u128 + f as u128;
                    frag[pl.node] = f;
                }
                None => failed += 1,
            }
            // Metrics row (§5), binned on the fly.
            let bin = round_half_even(arrived as u128 * 100, cap as u128) as usize;
            if acc.len() <= bin {
                acc.resize(bin + 1, Acc::default());
            }
            let al = round2(used as f64 * 100.0 / cap as f64);
            let frag_milli = frag_total as f64 / den;
            let idle = (cap - used) as f64;
            let a = &mut acc[bin];
            a.alloc += al;
            a.frag += frag_milli;
            a.ratio += if idle > 0.0 {
                100.0 * frag_milli / idle
            } else {
                0.0
            };
            a.n += 1;
        }

        let mut unallocated = vec![None; BINS];
        let mut frag_pct = vec![None; BINS];
        let mut frag_ratio = vec![None; BINS];
        for b in 0..BINS {
            let window = |lo: usize, hi: usize| {
                let mut s = Acc::default();
                for a in acc.iter().take(hi + 1).skip(lo) {
                    s.alloc += a.alloc;
                    s.frag += a.frag;
                    s.ratio += a.ratio;
                    s.n += a.n;
                }
                (s.n > 0).then_some(s)
            };
            let s = window(b, b).or_else(|| window(b.saturating_sub(1), b + 1));
            if let Some(s) = s {
                let n = s.n as f64;
                unallocated[b] = Some(100.0 - round2(s.alloc / n));
                frag_pct[b] = Some(round2(100.0 * (s.frag / n) / cap as f64));
                frag_ratio[b] = Some(s.ratio / n);
            }
        }
        RunResult {
            policy,
            seed,
            pods: order.len() as u64,
            failed,
            unallocated,
            frag_pct,
            frag_ratio,
        }
    }
}

/// `num / den` rounded to an integer, exact halves to even (Python's `round`).
fn round_half_even(num: u128, den: u128) -> u128 {
    let q = num / den;
    let r = num % den;
    match (2 * r).cmp(&den) {
        std::cmp::Ordering::Less => q,
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal => q + (q % 2),
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Mean and sample standard deviation (n − 1); sd is 0 for one value.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// The q-quantile (0..=1) with linear interpolation (NumPy's default).
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// The paper's label of a policy.
pub fn paper_label(p: GpuStrategy) -> &'static str {
    match p {
        GpuStrategy::Random => "Random",
        GpuStrategy::DotProd => "DotProd",
        GpuStrategy::Clustering => "GpuClustering",
        GpuStrategy::Packing => "GpuPacking",
        GpuStrategy::BestFit => "BestFit",
        GpuStrategy::Fgd => "FGD",
        GpuStrategy::Trainyard => "Trainyard",
        GpuStrategy::Binpack => "Binpack",
        GpuStrategy::Spread => "Spread",
    }
}

/// The six policies of the paper, in its order.
pub const PAPER_POLICIES: [GpuStrategy; 6] = [
    GpuStrategy::Random,
    GpuStrategy::DotProd,
    GpuStrategy::Clustering,
    GpuStrategy::Packing,
    GpuStrategy::BestFit,
    GpuStrategy::Fgd,
];

/// Published values: (workload, policy label) → (mean, sd).
pub type Reference = BTreeMap<(String, String), (f64, f64)>;

/// Reads table A ("Unallocated GPU % at arrived workload = 100%") of
/// `fgd-reference.md`: a Markdown table whose header row is `| workload |
/// <policy> | ...` and whose cells are `mean ± sd`.
pub fn parse_reference(md: &str, source: &str) -> Result<Reference, String> {
    let mut out = Reference::new();
    let mut header: Option<Vec<String>> = None;
    let mut in_table_a = false;
    for (i, line) in md.lines().enumerate() {
        let line = line.trim();
        if line.starts_with("## ") {
            in_table_a = line.starts_with("## A.");
            header = None;
            continue;
        }
        if !in_table_a || !line.starts_with('|') {
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue;
        }
        match &header {
            None => header = Some(cells),
            Some(h) => {
                let workload = cells[0].trim_start_matches("openb_pod_list_").to_string();
                for (label, cell) in h.iter().zip(&cells).skip(1) {
                    let (m, s) = cell.split_once('±').ok_or_else(|| {
                        format!("{source}:{}: cell `{cell}`: expected `mean ± sd`", i + 1)
                    })?;
                    let parse = |x: &str| {
                        x.trim().parse::<f64>().map_err(|_| {
                            format!("{source}:{}: cell `{cell}`: expected numbers", i + 1)
                        })
                    };
                    out.insert((workload.clone(), label.clone()), (parse(m)?, parse(s)?));
                }
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{source}: no table under a heading starting `## A.` with `mean ± sd` cells"
        ));
    }
    Ok(out)
}

mod results;

pub use results::*;

#[cfg(test)]
mod tests;
