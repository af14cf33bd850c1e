//! Importer for the Alibaba GPU cluster traces "openb"
//! (`cluster-trace-gpu-v2023`, published with Weng et al., "Beware of
//! Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
//! Gradient Descent", USENIX ATC 2023).
//!
//! Two kinds of CSV file:
//!
//! * the node list (`openb_node_list_gpu_node.csv`), columns
//!   `sn,cpu_milli,memory_mib,gpu,model`, read by [`parse_nodes`];
//! * the pod lists (`openb_pod_list_*.csv`), columns
//!   `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`
//!   (the four `multigpu*` files have only the first five), read by
//!   [`parse_pods`].
//!
//! Like the rest of the library this module does no I/O: every function
//! takes the file's text plus a source name (usually the path) that error
//! messages and reports quote.
//!
//! # Pods → jobs
//!
//! Every usable pod row becomes one [`SimJob`] with one [`SimTask`]
//! (`count` 1, `min_member` 1):
//!
//! | job field | from |
//! |---|---|
//! | `id` | `name` |
//! | `submit` | `creation_time` (seconds from the start of the trace) × 1000 ms |
//! | `duration_ms` | (`deletion_time` − `scheduled_time`) × 1000 |
//! | requests `cpu` | `cpu_milli` (millicores) |
//! | requests `memory` | `memory_mib` × 2²⁰ bytes |
//! | requests GPU | `num_gpu` ≥ 1 and `gpu_milli` = 1000: `num_gpu` whole GPUs; `num_gpu` = 1 and `gpu_milli` < 1000: `gpu_milli` milli-GPU (a GPU-sharing pod); `num_gpu` = 0: none |
//! | constraints | `gpu_spec` empty: none; otherwise required node affinity `nvidia.com/gpu.product In [models]` (the `\|`-separated models, sorted, duplicates removed; jobs with the same model set share one `Arc`) |
//! | `priority` | [`ImportOptions::priority_by_qos`] of `qos` |
//! | `queue` | [`ImportOptions::queue_rule`] (the trace has no users or teams) |
//!
//! Jobs come out sorted by (`submit`, `id`).
//!
//! Run time is measured from `scheduled_time` (when the pod was bound) to
//! `deletion_time`: the queueing the original cluster did is not replayed.
//! Pods whose phase was `Failed` or `Succeeded` at collection time ran and
//! are kept. Pods still `Running` when the trace was collected carry the end
//! of the trace as `deletion_time` (12,902,960 s in `default`, 34 pods);
//! they are kept too, with their run time truncated at the end of the
//! trace.
//!
//! # Rows that are not imported
//!
//! Rows the importer cannot use are never dropped silently: each is counted
//! in [`ImportReport::skipped`] under one reason, the first that applies in
//! this order:
//!
//! 1. `malformed row: <detail>` ([`SKIP_MALFORMED_PREFIX`]): wrong column
//!    count, empty name, a number column that is not a (non-negative)
//!    integer or does not fit, empty `qos`, an empty model in `gpu_spec`;
//! 2. [`SKIP_DUPLICATE`]: a name already seen on an earlier well-formed row;
//! 3. [`SKIP_GPU_WITHOUT_NUM`], [`SKIP_GPU_MILLI_RANGE`],
//!    [`SKIP_MULTI_FRACTIONAL`]: GPU requests the trace's rules exclude;
//! 4. [`SKIP_NO_TIME_COLUMNS`]: the file has no time columns (the
//!    `multigpu*` files): every otherwise well-formed row lands here, so
//!    such a file imports no jobs but still gets a full report, unless
//!    [`parse_pods_in_time`] is given a [`TraceTimes`] to borrow them
//!    from ([`times`] module; then [`SKIP_NO_TIME_SOURCE`] and the time
//!    source's own reasons apply);
//! 5. [`SKIP_NO_CREATION`], [`SKIP_NOT_SCHEDULED`] (the pod never ran: the
//!    `Pending` rows, 897 in `default`), [`SKIP_NO_DELETION`];
//! 6. [`SKIP_NEGATIVE_DURATION`], [`SKIP_ZERO_DURATION`].
//!
//! So `imported + Σ skipped == rows` always holds. On the published trace
//! only two reasons occur: `default` imports 7,255 of its 8,152 rows and
//! skips 897 as never scheduled (every non-`multigpu` list behaves alike);
//! the `multigpu*` lists skip all their rows for missing times. Problems that are not
//! about one row are errors ([`OpenbError`]): an empty input, a header
//! that is not one of the expected ones, CSV syntax, and a `qos` value the
//! options do not map (to a queue or a priority).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use trainyard_crd::keys::NODE_GPU_PRODUCT;
use trainyard_crd::names::dns1123_subdomain_problem;
use trainyard_model::{
    LabelSelectorOperator, Node, NodeSelectorRequirement, NodeSelectorTerm, PlacementConstraints,
    Resources, Timestamp,
};

use crate::job::{SimJob, SimTask};

/// Columns of the node list, in order.
pub const NODE_COLUMNS: [&str; 5] = ["sn", "cpu_milli", "memory_mib", "gpu", "model"];

/// Columns of a pod list, in order.
pub const POD_COLUMNS: [&str; 11] = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
];

/// Columns of the `multigpu*` pod lists: the first five of [`POD_COLUMNS`].
pub const POD_COLUMNS_NO_TIMES: [&str; 5] =
    ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"];

/// Device memory of the trace's GPU models, in GiB. `G1`, `G2` and `G3` are
/// undisclosed internal models: their memory is unknown and recorded as 0,
/// like any model not in this table.
pub const GPU_MEMORY_GIB: [(&str, u64); 5] = [
    ("T4", 16),
    ("P100", 16),
    ("V100M16", 16),
    ("V100M32", 32),
    ("A10", 24),
];

/// Most GPUs one node may declare (guards against absurd counts).
pub const MAX_GPUS_PER_NODE: u32 = 1024;

/// Skip reason: the file has no time columns (the `multigpu*` files).
pub const SKIP_NO_TIME_COLUMNS: &str = "missing times (multigpu files have no time columns)";
/// Skip reason: `scheduled_time` is empty; the pod never ran (`Pending`).
pub const SKIP_NOT_SCHEDULED: &str = "never scheduled (scheduled_time empty)";
/// Skip reason: `creation_time` is empty.
pub const SKIP_NO_CREATION: &str = "creation_time empty";
/// Skip reason: `deletion_time` is empty.
pub const SKIP_NO_DELETION: &str = "deletion_time empty";
/// Skip reason: negative run time.
pub const SKIP_NEGATIVE_DURATION: &str = "deletion_time before scheduled_time";
/// Skip reason: `deletion_time == scheduled_time`.
pub const SKIP_ZERO_DURATION: &str = "zero duration";
/// Skip reason: `gpu_milli` above 1000, or 0 on a GPU pod.
pub const SKIP_GPU_MILLI_RANGE: &str = "gpu_milli out of range (1..=1000 for GPU pods)";
/// Skip reason: a share of a GPU asked for on several GPUs.
pub const SKIP_MULTI_FRACTIONAL: &str = "num_gpu > 1 with fractional gpu_milli";
/// Skip reason: `gpu_milli` > 0 with `num_gpu` = 0.
pub const SKIP_GPU_WITHOUT_NUM: &str = "gpu_milli > 0 with num_gpu 0";
/// Skip reason: a pod name repeated.
pub const SKIP_DUPLICATE: &str = "duplicate pod name";
/// Prefix of the skip reasons for rows that do not parse.
pub const SKIP_MALFORMED_PREFIX: &str = "malformed row: ";

/// What went wrong reading an openb file. Every variant names the source;
/// row-level variants also name the line (1-based, as editors count).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenbError {
    #[error("{input}: empty input; expected the header line `{expected}`")]
    Empty { input: String, expected: String },
    #[error("{input}:{line}: header is `{found}`; expected {expected}")]
    Header {
        input: String,
        line: u64,
        expected: String,
        found: String,
    },
    #[error("{input}:{line}: {found} columns; expected {expected} ({columns})")]
    ColumnCount {
        input: String,
        line: u64,
        expected: usize,
        found: usize,
        columns: String,
    },
    #[error("{input}:{line}: column `{column}`: expected {expected}, found `{found}`")]
    Field {
        input: String,
        line: u64,
        column: String,
        expected: String,
        found: String,
    },
    #[error("{input}:{line}: duplicate node `{name}` (first on line {first_line})")]
    DuplicateNode {
        input: String,
        line: u64,
        name: String,
        first_line: u64,
    },
    #[error(
        "{input}:{line}: qos `{qos}` is not in the {what} mapping `{mapping}`, which has no `default` entry; add `{qos}=<{what}>` or `default=<{what}>` to it ({})",
        setting_of(what)
    )]
    UnmappedQos {
        input: String,
        line: u64,
        qos: String,
        /// `queue` or `priority`.
        what: String,
        /// The mapping in use, as its option is written (`qos:LS=prod`,
        /// `BE=100,LS=1000`).
        mapping: String,
    },
    #[error("{input}: invalid import options: {problem}")]
    Options { input: String, problem: String },
    #[error("{input}:{line}: CSV syntax error: {message}")]
    Csv {
        input: String,
        line: u64,
        message: String,
    },
}

/// Where the mapping for `what` (`queue`, `priority`) is set: the option of
/// `trainyard simulate`.
fn setting_of(what: &str) -> &'static str {
    match what {
        "queue" => "--queue-rule qos:<qos>=<queue>,...",
        _ => "--qos-priority <qos>=<priority>,...",
    }
}

/// Device memory in bytes of a GPU model of the trace (see
/// [`GPU_MEMORY_GIB`]); 0 when unknown.
pub fn gpu_memory_bytes(model: &str) -> u64 {
    GPU_MEMORY_GIB
        .iter()
        .find(|(m, _)| *m == model)
        .map_or(0, |(_, gib)| gib << 30)
}

pub use trainyard_sched::scoring::fnv1a64;

// ---------------------------------------------------------------------------
// Options and report

/// How pod rows become jobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportOptions {
    /// Which queue each pod goes to. Default: `single:default`.
    pub queue_rule: QueueRule,
    /// Job priority by `qos` (higher runs first within a queue). A
    /// `default` entry catches unlisted values; without it an unlisted value
    /// is an error. Default ([`default_priority_by_qos`]): LS 1000,
    /// Guaranteed 800, Burstable 500, BE 100: latency-sensitive service
    /// pods first, best-effort last, following Kubernetes QoS order.
    pub priority_by_qos: BTreeMap<String, i32>,
    /// Read only the first this many data rows (for quick experiments);
    /// `None` reads all. The report covers exactly the rows read.
    pub limit_rows: Option<usize>,
}

/// Parses a priority mapping written `<qos>=<priority>,...` (e.g.
/// `LS=1000,Guaranteed=800,Burstable=500,BE=100,default=0`; priorities are
/// whole numbers, `default` catches unlisted values).
pub fn parse_priority_by_qos(s: &str) -> Result<BTreeMap<String, i32>, String> {
    let mut map = BTreeMap::new();
    for entry in s.split(',').map(str::trim) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err(format!("entry `{entry}` is not `<qos>=<priority>`"));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || k.contains(char::is_whitespace) {
            return Err(format!(
                "entry `{entry}`: the qos value must be non-empty without spaces"
            ));
        }
        let p: i32 = v.parse().map_err(|_| {
            format!(
                "entry `{entry}`: expected a whole number from {} to {}, found `{v}`",
                i32::MIN,
                i32::MAX
            )
        })?;
        if map.insert(k.to_string(), p).is_some() {
            return Err(format!("qos `{k}` is mapped twice"));
        }
    }
    Ok(map)
}

/// A priority mapping as [`parse_priority_by_qos`] reads it.
pub fn format_priority_by_qos(map: &BTreeMap<String, i32>) -> String {
    let entries: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
    entries.join(",")
}

/// LS 1000, Guaranteed 800, Burstable 500, BE 100.
pub fn default_priority_by_qos() -> BTreeMap<String, i32> {
    [
        ("LS", 1000),
        ("Guaranteed", 800),
        ("Burstable", 500),
        ("BE", 100),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            queue_rule: QueueRule::default(),
            priority_by_qos: default_priority_by_qos(),
            limit_rows: None,
        }
    }
}

/// What an import did with every row: `imported + Σ skipped == rows`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportReport {
    /// Data rows read (header and blank lines excluded).
    pub rows: u64,
    /// Rows that became jobs.
    pub imported: u64,
    /// Rows not imported, by reason (see the module documentation).
    pub skipped: BTreeMap<String, u64>,
    /// Line number of the first row skipped for each reason.
    pub first_line: BTreeMap<String, u64>,
}

impl ImportReport {
    /// Total rows skipped.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }

    fn skip(&mut self, reason: String, line: u64) {
        self.first_line.entry(reason.clone()).or_insert(line);
        *self.skipped.entry(reason).or_insert(0) += 1;
    }
}

impl fmt::Display for ImportReport {
    /// ```text
    /// 8152 rows: 7255 imported, 897 skipped
    ///      897  never scheduled (scheduled_time empty) (first at line 63)
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rows: {} imported, {} skipped",
            self.rows,
            self.imported,
            self.skipped_total()
        )?;
        for (reason, n) in &self.skipped {
            write!(f, "\n  {n:>7}  {reason}")?;
            if let Some(line) = self.first_line.get(reason) {
                write!(f, " (first at line {line})")?;
            }
        }
        Ok(())
    }
}

/// The jobs of a pod list and the account of its rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    /// Sorted by (`submit`, `id`).
    pub jobs: Vec<SimJob>,
    pub report: ImportReport,
}

// ---------------------------------------------------------------------------
// CSV reading

/// One data record with its line number.
pub(crate) struct Row {
    pub(crate) line: u64,
    pub(crate) fields: csv::StringRecord,
}

/// The header record and an iterator over the data records of `text`.
pub(crate) fn read_csv<'t>(
    text: &'t str,
    input: &str,
    expected_header: &str,
) -> Result<(Row, impl Iterator<Item = Result<Row, OpenbError>> + 't), OpenbError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let input_owned = input.to_string();
    // Line numbers from byte offsets: the reader's own line count is one
    // short per CRLF line ending before the record.
    let lines = LineIndex::new(text);
    let line_of = move |p: Option<&csv::Position>| p.map_or(0, |p| lines.line(p.byte()));
    let mut records = reader.into_records().map(move |r| match r {
        Ok(fields) => Ok(Row {
            line: line_of(fields.position()),
            fields,
        }),
        Err(e) => Err(OpenbError::Csv {
            input: input_owned.clone(),
            line: line_of(e.position()),
            message: e.to_string(),
        }),
    });
    match records.next() {
        Some(header) => Ok((header?, records)),
        None => Err(OpenbError::Empty {
            input: input.to_string(),
            expected: expected_header.to_string(),
        }),
    }
}

/// Byte offset to 1-based line number (lines end at `\n`, so `\r\n`
/// and `\n` files count alike).
struct LineIndex {
    /// Byte offset of every `\n`.
    newlines: Vec<usize>,
    /// Byte offset of the first byte of each run of line-end bytes (`\r`,
    /// `\n`) → the offset just after the run.
    ends: Vec<(usize, usize)>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut newlines = Vec::new();
        let mut ends = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if matches!(bytes[i], b'\r' | b'\n') {
                let start = i;
                while i < bytes.len() && matches!(bytes[i], b'\r' | b'\n') {
                    if bytes[i] == b'\n' {
                        newlines.push(i);
                    }
                    i += 1;
                }
                ends.push((start, i));
            } else {
                i += 1;
            }
        }
        LineIndex { newlines, ends }
    }

    /// The line of the record the reader places at byte `offset`. The
    /// reader may place a record on the line-end bytes before it (the `\n`
    /// of a `\r\n`, blank lines): those are skipped first.
    fn line(&self, offset: u64) -> u64 {
        let mut at = usize::try_from(offset).unwrap_or(usize::MAX);
        let run = self.ends.partition_point(|&(start, _)| start <= at);
        if let Some(&(start, end)) = run.checked_sub(1).and_then(|r| self.ends.get(r))
            && (start..end).contains(&at)
        {
            at = end;
        }
        self.newlines.partition_point(|&n| n < at) as u64 + 1
    }
}

pub(crate) fn joined(fields: &csv::StringRecord) -> String {
    fields.iter().collect::<Vec<_>>().join(",")
}

// ---------------------------------------------------------------------------
// Nodes

/// Parses the node list (`sn,cpu_milli,memory_mib,gpu,model`).
///
/// Each row becomes a [`Node`] named `sn` with allocatable CPU `cpu_milli`
/// millicores, memory `memory_mib` MiB and `gpu` devices of `model`, each
/// with the memory of [`GPU_MEMORY_GIB`] (0 when unknown, as for
/// `G1`/`G2`/`G3`). Nodes with GPUs get the label `nvidia.com/gpu.product`
/// = `model`, which the pods' `gpu_spec` affinity matches. No pod limit, no
/// taints. A node with GPUs must name its model; `model` is ignored on a
/// node without GPUs. Any bad row is an error naming the line, column and
/// the expected value.
pub fn parse_nodes(text: &str, source: &str) -> Result<Vec<Node>, OpenbError> {
    let expected = NODE_COLUMNS.join(",");
    let (header, rows) = read_csv(text, source, &expected)?;
    if !header.fields.iter().eq(NODE_COLUMNS) {
        return Err(OpenbError::Header {
            input: source.to_string(),
            line: header.line,
            expected: format!("`{expected}`"),
            found: joined(&header.fields),
        });
    }
    let mut nodes = Vec::new();
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for row in rows {
        let row = row?;
        let line = row.line;
        let f = &row.fields;
        if f.len() != NODE_COLUMNS.len() {
            return Err(OpenbError::ColumnCount {
                input: source.to_string(),
                line,
                expected: NODE_COLUMNS.len(),
                found: f.len(),
                columns: expected,
            });
        }
        let field_err = |column: usize, what: &str| OpenbError::Field {
            input: source.to_string(),
            line,
            column: NODE_COLUMNS[column].to_string(),
            expected: what.to_string(),
            found: f.get(column).unwrap_or_default().to_string(),
        };
        let get = |column: usize| f.get(column).unwrap_or_default();
        let name = get(0);
        if name.is_empty() {
            return Err(field_err(0, "a node name"));
        }
        let cpu: u64 = get(1)
            .parse()
            .map_err(|_| field_err(1, "a non-negative integer (millicores)"))?;
        let memory = get(2)
            .parse::<u64>()
            .ok()
            .and_then(|mib| mib.checked_mul(1 << 20))
            .ok_or_else(|| field_err(2, "a non-negative integer (MiB) below 2^44"))?;
        let gpus = get(3)
            .parse::<u32>()
            .ok()
            .filter(|n| *n <= MAX_GPUS_PER_NODE)
            .ok_or_else(|| {
                field_err(
                    3,
                    &format!("a GPU count, an integer from 0 to {MAX_GPUS_PER_NODE}"),
                )
            })?;
        let model = get(4);
        if gpus > 0 && model.is_empty() {
            return Err(field_err(
                4,
                "a GPU model (T4, P100, V100M16, V100M32, A10, G1, G2, G3, ...) on a node with GPUs",
            ));
        }
        if let Some(first_line) = seen.insert(name.to_string(), line) {
            return Err(OpenbError::DuplicateNode {
                input: source.to_string(),
                line,
                name: name.to_string(),
                first_line,
            });
        }
        let mut node = Node::new(name, cpu, memory, gpus);
        if gpus > 0 {
            let memory_bytes = gpu_memory_bytes(model);
            for d in &mut node.gpus {
                d.model = model.to_string();
                d.memory_bytes = memory_bytes;
            }
            node.labels
                .insert(NODE_GPU_PRODUCT.to_string(), model.to_string());
        }
        nodes.push(node);
    }
    Ok(nodes)
}

mod pods;
mod queue_rule;
pub mod times;

pub use pods::*;
pub use queue_rule::*;
pub use times::{SKIP_NO_TIME_SOURCE, TraceTimes};

#[cfg(test)]
mod tests;
