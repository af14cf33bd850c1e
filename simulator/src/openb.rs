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
//!    such a file imports no jobs but still gets a full report;
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
// Queue assignment

/// How pods are assigned to queues. The trace has no users, teams or
/// namespaces, so the queue is made up; pick the rule that fits the
/// experiment.
///
/// CLI syntax ([`FromStr`], and [`fmt::Display`] writes it back):
///
/// * `single:<queue>`: every pod in one queue.
/// * `qos:LS=prod,Guaranteed=prod,Burstable=research,BE=dev`: by the pod's
///   `qos` value. An entry `default=<queue>` catches values not listed;
///   without it an unlisted value is an error ([`OpenbError::UnmappedQos`]).
/// * `hash:team-a,team-b,team-c`: by [`fnv1a64`] of the pod name modulo the
///   number of queues: a stable, roughly even spread, identical on every
///   platform. A queue listed twice gets twice the share.
///
/// Queue names must be DNS-1123 subdomains (lowercase letters, digits, `-`
/// and `.`), like the names of Queue documents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueRule {
    Single(String),
    ByQos(BTreeMap<String, String>),
    Hash { queues: Vec<String> },
}

/// The `qos` key of [`QueueRule::ByQos`] and of
/// [`ImportOptions::priority_by_qos`] that catches unlisted values.
pub const QOS_DEFAULT_KEY: &str = "default";

impl QueueRule {
    /// The queue of a pod, or `None` when the rule does not say (a `qos`
    /// with no entry and no `default`, or a hash rule with no queues).
    pub fn queue_for(&self, pod_name: &str, qos: &str) -> Option<&str> {
        match self {
            QueueRule::Single(q) => Some(q),
            QueueRule::ByQos(map) => map
                .get(qos)
                .or_else(|| map.get(QOS_DEFAULT_KEY))
                .map(String::as_str),
            QueueRule::Hash { queues } => {
                if queues.is_empty() {
                    return None;
                }
                let n = queues.len() as u64;
                let i = fnv1a64(pod_name.as_bytes()) % n;
                queues.get(usize::try_from(i).ok()?).map(String::as_str)
            }
        }
    }
}

impl Default for QueueRule {
    /// `single:default`.
    fn default() -> Self {
        QueueRule::Single("default".to_string())
    }
}

impl fmt::Display for QueueRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueRule::Single(q) => write!(f, "single:{q}"),
            QueueRule::ByQos(map) => {
                f.write_str("qos:")?;
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                Ok(())
            }
            QueueRule::Hash { queues } => write!(f, "hash:{}", queues.join(",")),
        }
    }
}

/// Why a [`QueueRule`] string did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid queue rule `{input}`: {problem}; expected `single:<queue>`, `qos:<qos>=<queue>,...` or `hash:<queue>,<queue>,...`"
)]
pub struct ParseQueueRuleError {
    pub input: String,
    pub problem: String,
}

fn check_queue_name(name: &str) -> Result<(), String> {
    match dns1123_subdomain_problem(name) {
        None => Ok(()),
        Some(p) => Err(format!("queue name {p}")),
    }
}

impl FromStr for QueueRule {
    type Err = ParseQueueRuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |problem: String| ParseQueueRuleError {
            input: s.to_string(),
            problem,
        };
        let Some((kind, rest)) = s.trim().split_once(':') else {
            return Err(err("no `:` after the kind".to_string()));
        };
        match kind.trim() {
            "single" => {
                let q = rest.trim();
                check_queue_name(q).map_err(err)?;
                Ok(QueueRule::Single(q.to_string()))
            }
            "qos" => {
                let mut map = BTreeMap::new();
                for entry in rest.split(',') {
                    let Some((k, v)) = entry.split_once('=') else {
                        return Err(err(format!(
                            "entry `{}` is not `<qos>=<queue>`",
                            entry.trim()
                        )));
                    };
                    let (k, v) = (k.trim(), v.trim());
                    if k.is_empty() || k.chars().any(char::is_whitespace) {
                        return Err(err(format!(
                            "entry `{}`: the qos value must be non-empty without spaces",
                            entry.trim()
                        )));
                    }
                    check_queue_name(v).map_err(err)?;
                    if map.insert(k.to_string(), v.to_string()).is_some() {
                        return Err(err(format!("qos `{k}` is mapped twice")));
                    }
                }
                Ok(QueueRule::ByQos(map))
            }
            "hash" => {
                let mut queues = Vec::new();
                for q in rest.split(',') {
                    let q = q.trim();
                    check_queue_name(q).map_err(err)?;
                    queues.push(q.to_string());
                }
                Ok(QueueRule::Hash { queues })
            }
            other => Err(err(format!("unknown kind `{other}`"))),
        }
    }
}

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

// ---------------------------------------------------------------------------
// Pods

/// A pod row that passed every check.
struct PodRow<'r> {
    name: &'r str,
    requests: Resources,
    /// Allowed GPU models, sorted and deduplicated; empty = any.
    models: Vec<String>,
    qos: &'r str,
    submit: Timestamp,
    duration_ms: u64,
}

fn malformed(detail: impl fmt::Display) -> String {
    format!("{SKIP_MALFORMED_PREFIX}{detail}")
}

fn parse_u64(f: &csv::StringRecord, column: usize) -> Result<u64, String> {
    f.get(column).unwrap_or_default().parse().map_err(|_| {
        malformed(format!(
            "{} is not a non-negative integer",
            POD_COLUMNS[column]
        ))
    })
}

/// An optional time column: `None` when empty.
fn parse_time(f: &csv::StringRecord, column: usize) -> Result<Option<i64>, String> {
    let s = f.get(column).unwrap_or_default();
    if s.is_empty() {
        return Ok(None);
    }
    s.parse()
        .map(Some)
        .map_err(|_| malformed(format!("{} is not an integer", POD_COLUMNS[column])))
}

/// Checks one pod row; `Err` holds the skip reason.
fn check_pod_row<'r>(
    f: &'r csv::StringRecord,
    has_times: bool,
    seen: &mut BTreeSet<String>,
) -> Result<PodRow<'r>, String> {
    let columns = if has_times {
        POD_COLUMNS.len()
    } else {
        POD_COLUMNS_NO_TIMES.len()
    };
    if f.len() != columns {
        return Err(malformed(format!(
            "wrong column count (expected {columns})"
        )));
    }
    // 1. Syntax.
    let name = f.get(0).unwrap_or_default();
    if name.is_empty() {
        return Err(malformed("empty name"));
    }
    let cpu = parse_u64(f, 1)?;
    let memory = parse_u64(f, 2)?
        .checked_mul(1 << 20)
        .ok_or_else(|| malformed("memory_mib out of range"))?;
    let num_gpu = parse_u64(f, 3)?;
    let gpu_milli = parse_u64(f, 4)?;
    let mut models = Vec::new();
    let mut qos = "";
    let (mut creation, mut deletion, mut scheduled) = (None, None, None);
    if has_times {
        let spec = f.get(5).unwrap_or_default();
        if !spec.is_empty() {
            for m in spec.split('|') {
                let m = m.trim();
                if m.is_empty() {
                    return Err(malformed("empty model in gpu_spec"));
                }
                models.push(m.to_string());
            }
            models.sort();
            models.dedup();
        }
        qos = f.get(6).unwrap_or_default();
        if qos.is_empty() {
            return Err(malformed("empty qos"));
        }
        creation = parse_time(f, 8)?;
        deletion = parse_time(f, 9)?;
        scheduled = parse_time(f, 10)?;
    }
    // 2. Identity.
    if !seen.insert(name.to_string()) {
        return Err(SKIP_DUPLICATE.to_string());
    }
    // 3. GPU request.
    let gpu = if num_gpu == 0 {
        if gpu_milli != 0 {
            return Err(SKIP_GPU_WITHOUT_NUM.to_string());
        }
        0
    } else if gpu_milli == 0 || gpu_milli > 1000 {
        return Err(SKIP_GPU_MILLI_RANGE.to_string());
    } else if gpu_milli == 1000 {
        num_gpu
            .checked_mul(1000)
            .ok_or_else(|| malformed("num_gpu out of range"))?
    } else if num_gpu == 1 {
        gpu_milli
    } else {
        return Err(SKIP_MULTI_FRACTIONAL.to_string());
    };
    // 4. Times.
    if !has_times {
        return Err(SKIP_NO_TIME_COLUMNS.to_string());
    }
    let creation = creation.ok_or_else(|| SKIP_NO_CREATION.to_string())?;
    let scheduled = scheduled.ok_or_else(|| SKIP_NOT_SCHEDULED.to_string())?;
    let deletion = deletion.ok_or_else(|| SKIP_NO_DELETION.to_string())?;
    let run_secs = i128::from(deletion) - i128::from(scheduled);
    if run_secs < 0 {
        return Err(SKIP_NEGATIVE_DURATION.to_string());
    }
    if run_secs == 0 {
        return Err(SKIP_ZERO_DURATION.to_string());
    }
    let duration_ms =
        u64::try_from(run_secs * 1000).map_err(|_| malformed("run time out of range"))?;
    let submit_ms = creation
        .checked_mul(1000)
        .ok_or_else(|| malformed("creation_time out of range"))?;
    Ok(PodRow {
        name,
        requests: Resources::new(cpu, memory, gpu),
        models,
        qos,
        submit: Timestamp(submit_ms),
        duration_ms,
    })
}

/// Parses a pod list into jobs (see the module documentation for the
/// mapping and the skip reasons).
///
/// The header must be the 11 columns of [`POD_COLUMNS`] or the 5 of
/// [`POD_COLUMNS_NO_TIMES`] (the `multigpu*` files, whose rows are all
/// counted as [`SKIP_NO_TIME_COLUMNS`]). Errors: empty input, another
/// header, CSV syntax, and a usable row whose `qos` the options map to no
/// queue or no priority.
pub fn parse_pods(text: &str, source: &str, opts: &ImportOptions) -> Result<Import, OpenbError> {
    if let QueueRule::Hash { queues } = &opts.queue_rule
        && queues.is_empty()
    {
        return Err(OpenbError::Options {
            input: source.to_string(),
            problem: "the hash queue rule lists no queues".to_string(),
        });
    }
    let full = POD_COLUMNS.join(",");
    let short = POD_COLUMNS_NO_TIMES.join(",");
    let (header, rows) = read_csv(text, source, &full)?;
    let has_times = if header.fields.iter().eq(POD_COLUMNS) {
        true
    } else if header.fields.iter().eq(POD_COLUMNS_NO_TIMES) {
        false
    } else {
        return Err(OpenbError::Header {
            input: source.to_string(),
            line: header.line,
            expected: format!("`{full}` or (multigpu files) `{short}`"),
            found: joined(&header.fields),
        });
    };

    let mut report = ImportReport::default();
    let mut jobs = Vec::new();
    let mut seen = BTreeSet::new();
    let unconstrained = Arc::new(PlacementConstraints::default());
    let mut by_models: BTreeMap<Vec<String>, Arc<PlacementConstraints>> = BTreeMap::new();
    let limit = opts.limit_rows.map_or(u64::MAX, |n| n as u64);

    for row in rows {
        if report.rows >= limit {
            break;
        }
        let row = row?;
        report.rows += 1;
        let pod = match check_pod_row(&row.fields, has_times, &mut seen) {
            Ok(pod) => pod,
            Err(reason) => {
                report.skip(reason, row.line);
                continue;
            }
        };
        let unmapped = |what: &str, mapping: String| OpenbError::UnmappedQos {
            input: source.to_string(),
            line: row.line,
            qos: pod.qos.to_string(),
            what: what.to_string(),
            mapping,
        };
        let queue = opts
            .queue_rule
            .queue_for(pod.name, pod.qos)
            .ok_or_else(|| unmapped("queue", opts.queue_rule.to_string()))?;
        let priority = *opts
            .priority_by_qos
            .get(pod.qos)
            .or_else(|| opts.priority_by_qos.get(QOS_DEFAULT_KEY))
            .ok_or_else(|| unmapped("priority", format_priority_by_qos(&opts.priority_by_qos)))?;
        let constraints = if pod.models.is_empty() {
            Arc::clone(&unconstrained)
        } else {
            Arc::clone(by_models.entry(pod.models.clone()).or_insert_with(|| {
                Arc::new(PlacementConstraints {
                    required_affinity: vec![NodeSelectorTerm {
                        match_expressions: vec![NodeSelectorRequirement {
                            key: NODE_GPU_PRODUCT.to_string(),
                            operator: LabelSelectorOperator::In,
                            values: pod.models.clone(),
                        }],
                        match_fields: Vec::new(),
                    }],
                    ..PlacementConstraints::default()
                })
            }))
        };
        jobs.push(SimJob {
            id: pod.name.to_string(),
            queue: queue.to_string(),
            priority,
            submit: pod.submit,
            duration_ms: pod.duration_ms,
            min_member: 1,
            subgroups: Vec::new(),
            topology: Default::default(),
            tasks: vec![SimTask {
                count: 1,
                requests: pod.requests,
                subgroup: None,
                constraints,
            }],
            // The trace says nothing about preemptibility, and its QoS
            // priorities (100 and up) would make every pod non-preemptible
            // by the snapshot default, which runs only within quota.
            preemptible: true,
            lost_work: None,
        });
        report.imported += 1;
    }
    jobs.sort_by(|a, b| (a.submit, &a.id).cmp(&(b.submit, &b.id)));
    Ok(Import { jobs, report })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../tests/data/openb-sample.csv");
    const BAD: &str = include_str!("../tests/data/openb-bad.csv");
    const NODES: &str = include_str!("../tests/data/openb-nodes-sample.csv");

    /// Data lines of a CSV text split naively (the sample has no quoting).
    fn data_rows(text: &str) -> Vec<Vec<&str>> {
        text.lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split(',').collect())
            .collect()
    }

    fn job<'a>(import: &'a Import, id: &str) -> &'a SimJob {
        import
            .jobs
            .iter()
            .find(|j| j.id == id)
            .unwrap_or_else(|| panic!("job {id} not imported"))
    }

    fn affinity_values(j: &SimJob) -> Vec<&str> {
        let c = &j.tasks[0].constraints;
        assert_eq!(c.required_affinity.len(), 1);
        let term = &c.required_affinity[0];
        assert!(term.match_fields.is_empty());
        assert_eq!(term.match_expressions.len(), 1);
        let r = &term.match_expressions[0];
        assert_eq!(r.key, "nvidia.com/gpu.product");
        assert_eq!(r.operator, LabelSelectorOperator::In);
        r.values.iter().map(String::as_str).collect()
    }

    #[test]
    fn sample_counts_match_an_independent_count() {
        let rows = data_rows(SAMPLE);
        let pending = rows.iter().filter(|r| r[10].is_empty()).count() as u64;
        let import = parse_pods(SAMPLE, "openb-sample.csv", &ImportOptions::default()).unwrap();
        let r = &import.report;
        assert_eq!(r.rows, rows.len() as u64);
        assert_eq!(r.rows, 47);
        assert_eq!(pending, 4);
        assert_eq!(
            r.skipped,
            BTreeMap::from([(SKIP_NOT_SCHEDULED.to_string(), pending)])
        );
        assert_eq!(r.imported, r.rows - pending);
        assert_eq!(import.jobs.len() as u64, r.imported);
        assert_eq!(r.first_line[SKIP_NOT_SCHEDULED], 18, "openb-pod-0061");
        // The sample covers every qos, CPU-only, sharing and multi-GPU pods.
        for qos in ["LS", "BE", "Burstable", "Guaranteed"] {
            assert!(
                rows.iter().any(|r| r[6] == qos && !r[10].is_empty()),
                "{qos}"
            );
        }
        for num_gpu in ["0", "1", "2", "4", "8"] {
            assert!(rows.iter().any(|r| r[3] == num_gpu), "{num_gpu}");
        }
        // Totals over imported rows, computed from the text.
        let want_gpu: u64 = rows
            .iter()
            .filter(|r| !r[10].is_empty())
            .map(|r| {
                let n: u64 = r[3].parse().unwrap();
                let m: u64 = r[4].parse().unwrap();
                if n == 0 {
                    0
                } else if m == 1000 {
                    n * 1000
                } else {
                    m
                }
            })
            .sum();
        let got_gpu: u64 = import.jobs.iter().map(SimJob::gpu_milli).sum();
        assert_eq!(got_gpu, want_gpu);
        // Sorted by (submit, id); ids unique.
        assert!(
            import
                .jobs
                .windows(2)
                .all(|w| (w[0].submit, &w[0].id) < (w[1].submit, &w[1].id))
        );
        let text = r.to_string();
        assert_eq!(
            text,
            "47 rows: 43 imported, 4 skipped\n        4  never scheduled (scheduled_time empty) (first at line 18)"
        );
    }

    #[test]
    fn sample_field_conversions() {
        let import = parse_pods(SAMPLE, "openb-sample.csv", &ImportOptions::default()).unwrap();
        // openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
        // (GPU sharing, still running at the end of the trace: kept).
        let j = job(&import, "openb-pod-0001");
        assert_eq!(j.queue, "default");
        assert_eq!(j.priority, 1000);
        assert_eq!(j.submit, Timestamp(427_061_000));
        assert_eq!(j.duration_ms, (12_902_960 - 427_061) * 1000);
        assert_eq!(j.min_member, 1);
        assert!(j.subgroups.is_empty());
        assert_eq!(j.tasks.len(), 1);
        let t = &j.tasks[0];
        assert_eq!(t.count, 1);
        assert_eq!(t.subgroup, None);
        assert_eq!(t.requests, Resources::new(6000, 12288 << 20, 460));
        assert_eq!(*t.constraints, PlacementConstraints::default());

        // openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497
        let j = job(&import, "openb-pod-0017");
        assert_eq!(j.priority, 500);
        assert_eq!(
            j.tasks[0].requests,
            Resources::new(88000, 327_680 << 20, 8000)
        );
        assert_eq!(j.duration_ms, (10_769_854 - 9_437_497) * 1000);

        // openb-pod-0048,8000,30517,0,0,,BE,Running,9992086,10013821,9992086 (CPU only)
        let j = job(&import, "openb-pod-0048");
        assert_eq!(j.priority, 100);
        assert_eq!(j.tasks[0].requests, Resources::new(8000, 30517 << 20, 0));
        assert_eq!(j.gpu_milli(), 0);

        // openb-pod-0129,...,Guaranteed,... ; openb-pod-0012 scheduled 7338 s
        // after creation: submit is creation, duration runs from scheduling.
        assert_eq!(job(&import, "openb-pod-0129").priority, 800);
        let j = job(&import, "openb-pod-0012");
        assert_eq!(j.submit, Timestamp(6_588_193_000));
        assert_eq!(j.duration_ms, (10_959_245 - 6_595_531) * 1000);

        // gpu_spec → required affinity, sorted and deduplicated.
        assert_eq!(
            affinity_values(job(&import, "openb-pod-0021")),
            ["G2", "P100", "T4", "V100M16", "V100M32"]
        );
        assert_eq!(
            affinity_values(job(&import, "openb-pod-1444")),
            ["A10", "G2", "P100", "T4", "V100M16", "V100M32"]
        );
        assert_eq!(
            affinity_values(job(&import, "openb-pod-0449")),
            ["A10", "T4"]
        );
        assert_eq!(affinity_values(job(&import, "openb-pod-0012")), ["T4"]);
        // One Arc per distinct model set, one for all unconstrained jobs.
        assert!(Arc::ptr_eq(
            &job(&import, "openb-pod-0012").tasks[0].constraints,
            &job(&import, "openb-pod-0022").tasks[0].constraints
        ));
        assert!(Arc::ptr_eq(
            &job(&import, "openb-pod-0001").tasks[0].constraints,
            &job(&import, "openb-pod-0048").tasks[0].constraints
        ));
        assert!(!Arc::ptr_eq(
            &job(&import, "openb-pod-0012").tasks[0].constraints,
            &job(&import, "openb-pod-0013").tasks[0].constraints
        ));
        // The affinity matches nodes of the trace's node list.
        let nodes = parse_nodes(NODES, "nodes").unwrap();
        let c = &job(&import, "openb-pod-0012").tasks[0].constraints;
        let matching: Vec<&str> = nodes
            .iter()
            .filter(|n| c.affinity_matches(n))
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(matching, ["openb-node-0035", "openb-node-0036"]);
    }

    #[test]
    fn bad_rows_are_counted_by_reason() {
        let import = parse_pods(BAD, "openb-bad.csv", &ImportOptions::default()).unwrap();
        let r = &import.report;
        let expected: BTreeMap<String, u64> = [
            ("malformed row: wrong column count (expected 11)", 2),
            ("malformed row: cpu_milli is not a non-negative integer", 1),
            ("malformed row: memory_mib is not a non-negative integer", 1),
            ("malformed row: empty name", 1),
            ("malformed row: creation_time is not an integer", 1),
            ("malformed row: empty qos", 1),
            ("malformed row: empty model in gpu_spec", 1),
            (SKIP_GPU_MILLI_RANGE, 2),
            (SKIP_MULTI_FRACTIONAL, 1),
            (SKIP_GPU_WITHOUT_NUM, 1),
            (SKIP_NOT_SCHEDULED, 1),
            (SKIP_NO_CREATION, 1),
            (SKIP_NO_DELETION, 1),
            (SKIP_NEGATIVE_DURATION, 1),
            (SKIP_ZERO_DURATION, 1),
            (SKIP_DUPLICATE, 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(r.skipped, expected);
        assert_eq!(r.rows, data_rows(BAD).len() as u64);
        assert_eq!(r.rows, 20);
        assert_eq!(r.imported, 2);
        assert_eq!(r.imported + r.skipped_total(), r.rows);
        assert_eq!(r.first_line[SKIP_DUPLICATE], 20);
        assert_eq!(
            r.first_line["malformed row: wrong column count (expected 11)"],
            3
        );
        // Sorted by submit: bad-ok-2 (50 s) before bad-ok-1 (100 s); the
        // first bad-ok-1 row wins over its duplicate.
        let ids: Vec<&str> = import.jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, ["bad-ok-2", "bad-ok-1"]);
        assert_eq!(import.jobs[1].duration_ms, 50_000);
        assert_eq!(import.jobs[1].tasks[0].requests.gpu, 220);
    }

    #[test]
    fn multigpu_files_count_every_row_as_missing_times() {
        let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\
                    p0,12000,16384,1,1000\n\
                    p1,6000,12288,1,460\n\
                    p2,6000,12288,8,1000\n\
                    p3,6000,12288\n";
        let import = parse_pods(text, "multigpu20.csv", &ImportOptions::default()).unwrap();
        assert!(import.jobs.is_empty());
        assert_eq!(import.report.rows, 4);
        assert_eq!(
            import.report.skipped,
            BTreeMap::from([
                (SKIP_NO_TIME_COLUMNS.to_string(), 3),
                (
                    "malformed row: wrong column count (expected 5)".to_string(),
                    1
                ),
            ])
        );
    }

    #[test]
    fn limit_blank_lines_crlf_and_bom() {
        let opts = ImportOptions {
            limit_rows: Some(5),
            ..ImportOptions::default()
        };
        let import = parse_pods(SAMPLE, "s", &opts).unwrap();
        assert_eq!(import.report.rows, 5);
        assert_eq!(import.report.imported, 5);
        let zero = ImportOptions {
            limit_rows: Some(0),
            ..ImportOptions::default()
        };
        assert_eq!(parse_pods(SAMPLE, "s", &zero).unwrap().report.rows, 0);

        let crlf = format!("\u{feff}{}", SAMPLE.replace('\n', "\r\n\r\n"));
        let a = parse_pods(&crlf, "s", &ImportOptions::default()).unwrap();
        let b = parse_pods(SAMPLE, "s", &ImportOptions::default()).unwrap();
        assert_eq!(a.jobs, b.jobs);
        assert_eq!(a.report.rows, b.report.rows);
    }

    #[test]
    fn pod_file_errors() {
        let o = ImportOptions::default();
        assert_eq!(
            parse_pods("", "p.csv", &o).unwrap_err().to_string(),
            "p.csv: empty input; expected the header line `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`"
        );
        assert_eq!(
            parse_pods("sn,cpu_milli,memory_mib,gpu,model\n", "p.csv", &o)
                .unwrap_err()
                .to_string(),
            "p.csv:1: header is `sn,cpu_milli,memory_mib,gpu,model`; expected `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time` or (multigpu files) `name,cpu_milli,memory_mib,num_gpu,gpu_milli`"
        );
        // A qos the queue rule does not map.
        let by_qos = ImportOptions {
            queue_rule: "qos:LS=prod".parse().unwrap(),
            ..ImportOptions::default()
        };
        assert_eq!(
            parse_pods(SAMPLE, "s.csv", &by_qos).unwrap_err(),
            OpenbError::UnmappedQos {
                input: "s.csv".into(),
                line: 7,
                qos: "Burstable".into(),
                what: "queue".into(),
                mapping: "qos:LS=prod".into(),
            }
        );
        assert_eq!(
            parse_pods(SAMPLE, "s.csv", &by_qos)
                .unwrap_err()
                .to_string(),
            "s.csv:7: qos `Burstable` is not in the queue mapping `qos:LS=prod`, which has no `default` entry; add `Burstable=<queue>` or `default=<queue>` to it (--queue-rule qos:<qos>=<queue>,...)"
        );
        let no_prio = ImportOptions {
            priority_by_qos: BTreeMap::from([("LS".to_string(), 1)]),
            ..ImportOptions::default()
        };
        assert!(matches!(
            parse_pods(SAMPLE, "s.csv", &no_prio),
            Err(OpenbError::UnmappedQos { ref what, line: 7, .. }) if what == "priority"
        ));
        assert_eq!(
            parse_pods(SAMPLE, "s.csv", &no_prio)
                .unwrap_err()
                .to_string(),
            "s.csv:7: qos `Burstable` is not in the priority mapping `LS=1`, which has no `default` entry; add `Burstable=<priority>` or `default=<priority>` to it (--qos-priority <qos>=<priority>,...)"
        );
        let empty_hash = ImportOptions {
            queue_rule: QueueRule::Hash { queues: vec![] },
            ..ImportOptions::default()
        };
        assert_eq!(
            parse_pods(SAMPLE, "s.csv", &empty_hash)
                .unwrap_err()
                .to_string(),
            "s.csv: invalid import options: the hash queue rule lists no queues"
        );
        // Unterminated quote: a CSV error, not a panic.
        assert!(parse_pods("\"name", "q", &o).is_err());
    }

    #[test]
    fn queue_rules_assign_queues_and_priorities() {
        let opts = ImportOptions {
            queue_rule: "qos:LS=prod,Guaranteed=prod,Burstable=research,default=dev"
                .parse()
                .unwrap(),
            priority_by_qos: BTreeMap::from([("LS".to_string(), 7), ("default".to_string(), -1)]),
            limit_rows: None,
        };
        let import = parse_pods(SAMPLE, "s", &opts).unwrap();
        for j in &import.jobs {
            let row = SAMPLE
                .lines()
                .find(|l| l.starts_with(&format!("{},", j.id)))
                .unwrap();
            let qos = row.split(',').nth(6).unwrap();
            let (queue, prio) = match qos {
                "LS" => ("prod", 7),
                "Guaranteed" => ("prod", -1),
                "Burstable" => ("research", -1),
                _ => ("dev", -1),
            };
            assert_eq!((j.queue.as_str(), j.priority), (queue, prio), "{}", j.id);
        }
        let hashed = ImportOptions {
            queue_rule: "hash:team-a,team-b,team-c".parse().unwrap(),
            ..ImportOptions::default()
        };
        let import = parse_pods(SAMPLE, "s", &hashed).unwrap();
        let q = |id: &str| job(&import, id).queue.clone();
        assert_eq!(q("openb-pod-0000"), "team-c");
        assert_eq!(q("openb-pod-0001"), "team-a");
    }

    #[test]
    fn fnv_and_hash_rule_are_stable() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(fnv1a64(b"openb-pod-0000"), 0xdbe2_3dc8_fe81_855e);
        let rule: QueueRule = "hash:a,b,c".parse().unwrap();
        let got: Vec<&str> = (0..6)
            .map(|i| rule.queue_for(&format!("openb-pod-{i:04}"), "LS").unwrap())
            .collect();
        assert_eq!(got, ["c", "a", "a", "b", "a", "b"]);
        assert_eq!(rule.queue_for("", "LS"), Some("c"));
        assert_eq!(
            QueueRule::Hash { queues: vec![] }.queue_for("x", "LS"),
            None
        );
    }

    #[test]
    fn crlf_files_report_the_lines_an_editor_shows() {
        let h = POD_COLUMNS.join(",");
        let ok = "p1,1000,1024,1,1000,,LS,Succeeded,0,100,10";
        let pending = "p2,1000,1024,1,1000,,LS,Pending,0,100,";
        let odd_qos = "p3,1000,1024,1,1000,,XX,Succeeded,0,100,10";
        let broken = "p4,1000";
        let opts = ImportOptions {
            queue_rule: "single:q".parse().unwrap(),
            ..ImportOptions::default()
        };
        // Lines: 1 header, 2 p1, 3 p2, 4 p4, 5 p3 (and with a blank line
        // after each: 1, 3, 5, 7, 9).
        for (nl, step) in [("\n", 1), ("\r\n", 1), ("\r\n\r\n", 2), ("\n\n", 2)] {
            let text = format!("\u{feff}{h}{nl}{ok}{nl}{pending}{nl}{broken}{nl}{odd_qos}{nl}");
            let line = |n: u64| 1 + (n - 1) * step;
            let e = parse_pods(&text, "p.csv", &opts).unwrap_err();
            assert!(
                matches!(e, OpenbError::UnmappedQos { line: l, .. } if l == line(5)),
                "{nl:?}: {e}"
            );
            let fine = text.replace(odd_qos, ok.replace("p1", "p5").as_str());
            let r = parse_pods(&fine, "p.csv", &opts).unwrap().report;
            assert_eq!(
                (
                    r.first_line[SKIP_NOT_SCHEDULED],
                    r.first_line["malformed row: wrong column count (expected 11)"]
                ),
                (line(3), line(4)),
                "{nl:?}"
            );
            let nodes = format!(
                "sn,cpu_milli,memory_mib,gpu,model{nl}n1,1000,100,1,V100M16{nl}n2,x,100,1,V100M16{nl}"
            );
            assert!(
                matches!(parse_nodes(&nodes, "n.csv"), Err(OpenbError::Field { line: l, .. }) if l == line(3)),
                "{nl:?}"
            );
        }
        // CSV syntax errors too.
        let text = format!("{h}\r\n{ok}\r\n\"p6,1\r\n");
        let r = parse_pods(&text, "p.csv", &opts).unwrap().report;
        assert_eq!(
            r.first_line.values().copied().collect::<Vec<_>>(),
            vec![3],
            "{r}"
        );
    }

    #[test]
    fn priority_mapping_syntax() {
        let m = parse_priority_by_qos("LS=1000, BE=-5,default=0").unwrap();
        assert_eq!(format_priority_by_qos(&m), "BE=-5,LS=1000,default=0");
        assert_eq!(
            format_priority_by_qos(&default_priority_by_qos()),
            "BE=100,Burstable=500,Guaranteed=800,LS=1000"
        );
        assert_eq!(
            parse_priority_by_qos("LS").unwrap_err(),
            "entry `LS` is not `<qos>=<priority>`"
        );
        assert_eq!(
            parse_priority_by_qos("LS=high").unwrap_err(),
            "entry `LS=high`: expected a whole number from -2147483648 to 2147483647, found `high`"
        );
        assert_eq!(
            parse_priority_by_qos("LS=1,LS=2").unwrap_err(),
            "qos `LS` is mapped twice"
        );
    }

    #[test]
    fn queue_rule_syntax() {
        let parse = |s: &str| s.parse::<QueueRule>();
        assert_eq!(parse("single:prod"), Ok(QueueRule::Single("prod".into())));
        assert_eq!(
            parse(" single: prod "),
            Ok(QueueRule::Single("prod".into()))
        );
        let qos = parse("qos:LS=prod,Guaranteed=prod,Burstable=research,BE=dev").unwrap();
        assert_eq!(
            qos,
            QueueRule::ByQos(BTreeMap::from([
                ("BE".to_string(), "dev".to_string()),
                ("Burstable".to_string(), "research".to_string()),
                ("Guaranteed".to_string(), "prod".to_string()),
                ("LS".to_string(), "prod".to_string()),
            ]))
        );
        assert_eq!(qos.queue_for("x", "BE"), Some("dev"));
        assert_eq!(qos.queue_for("x", "Other"), None);
        assert_eq!(
            qos.to_string(),
            "qos:BE=dev,Burstable=research,Guaranteed=prod,LS=prod"
        );
        let hash = parse("hash:team-a,team-b,team-c").unwrap();
        assert_eq!(
            hash,
            QueueRule::Hash {
                queues: vec!["team-a".into(), "team-b".into(), "team-c".into()]
            }
        );
        for rule in [&qos, &hash, &QueueRule::default()] {
            assert_eq!(parse(&rule.to_string()).as_ref(), Ok(rule));
        }
        assert_eq!(QueueRule::default().to_string(), "single:default");

        let err = |s: &str| parse(s).unwrap_err().problem;
        assert_eq!(err("prod"), "no `:` after the kind");
        assert_eq!(err("users:a"), "unknown kind `users`");
        assert_eq!(err("qos:LS"), "entry `LS` is not `<qos>=<queue>`");
        assert_eq!(err("qos:LS=a,LS=b"), "qos `LS` is mapped twice");
        assert_eq!(
            err("qos:=a"),
            "entry `=a`: the qos value must be non-empty without spaces"
        );
        assert!(err("single:").starts_with("queue name must not be empty"));
        assert!(err("hash:a,,b").starts_with("queue name must not be empty"));
        assert!(err("single:Prod").contains("not a valid DNS-1123 subdomain"));
        assert_eq!(
            parse("nope").unwrap_err().to_string(),
            "invalid queue rule `nope`: no `:` after the kind; expected `single:<queue>`, `qos:<qos>=<queue>,...` or `hash:<queue>,<queue>,...`"
        );
    }

    #[test]
    fn nodes_sample() {
        let nodes = parse_nodes(NODES, "nodes.csv").unwrap();
        let rows = data_rows(NODES);
        assert_eq!(nodes.len(), rows.len());
        assert_eq!(nodes.len(), 12);
        for (n, r) in nodes.iter().zip(&rows) {
            assert_eq!(n.name, r[0]);
            let gpus: u64 = r[3].parse().unwrap();
            assert_eq!(n.allocatable.cpu, r[1].parse::<u64>().unwrap());
            assert_eq!(n.allocatable.memory, r[2].parse::<u64>().unwrap() << 20);
            assert_eq!(n.allocatable.gpu, gpus * 1000);
            assert_eq!(n.gpus.len() as u64, gpus);
            assert_eq!(n.max_pods, None);
            assert!(n.taints.is_empty() && !n.unschedulable);
            assert_eq!(
                n.labels,
                BTreeMap::from([("nvidia.com/gpu.product".to_string(), r[4].to_string())])
            );
            for (i, d) in n.gpus.iter().enumerate() {
                assert_eq!(d.index, i as u32);
                assert_eq!(d.model, r[4]);
            }
        }
        let mem = |name: &str| {
            nodes
                .iter()
                .find(|n| n.name == name)
                .map(|n| n.gpus[0].memory_bytes)
                .unwrap()
        };
        assert_eq!(mem("openb-node-0000"), 16 << 30, "P100");
        assert_eq!(mem("openb-node-0035"), 16 << 30, "T4");
        assert_eq!(mem("openb-node-0025"), 16 << 30, "V100M16");
        assert_eq!(mem("openb-node-0023"), 32 << 30, "V100M32");
        assert_eq!(mem("openb-node-1032"), 24 << 30, "A10");
        assert_eq!(mem("openb-node-0026"), 0, "G2");
        assert_eq!(mem("openb-node-0022"), 0, "G3");
        assert_eq!(gpu_memory_bytes("G1"), 0);

        // No GPUs: no devices, no label, model ignored.
        let n = parse_nodes(
            "sn,cpu_milli,memory_mib,gpu,model\ncpu-0,1000,1024,0,\n",
            "x",
        )
        .unwrap();
        assert_eq!(n[0].gpus.len(), 0);
        assert!(n[0].labels.is_empty());
        assert_eq!(n[0].allocatable, Resources::new(1000, 1 << 30, 0));
    }

    #[test]
    fn node_errors_name_line_column_and_expectation() {
        const H: &str = "sn,cpu_milli,memory_mib,gpu,model\n";
        let e = |body: &str| {
            parse_nodes(&format!("{H}{body}"), "nodes.csv")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e("n0,1000,1024,1,T4\nn1,lots,1024,1,T4\n"),
            "nodes.csv:3: column `cpu_milli`: expected a non-negative integer (millicores), found `lots`"
        );
        assert_eq!(
            e("n0,1000,-5,1,T4\n"),
            "nodes.csv:2: column `memory_mib`: expected a non-negative integer (MiB) below 2^44, found `-5`"
        );
        assert_eq!(
            e("n0,1000,1024,4000000000,T4\n"),
            "nodes.csv:2: column `gpu`: expected a GPU count, an integer from 0 to 1024, found `4000000000`"
        );
        assert_eq!(
            e("n0,1000,1024,2,\n"),
            "nodes.csv:2: column `model`: expected a GPU model (T4, P100, V100M16, V100M32, A10, G1, G2, G3, ...) on a node with GPUs, found ``"
        );
        assert_eq!(
            e(",1000,1024,2,T4\n"),
            "nodes.csv:2: column `sn`: expected a node name, found ``"
        );
        assert_eq!(
            e("n0,1000,1024,2\n"),
            "nodes.csv:2: 4 columns; expected 5 (sn,cpu_milli,memory_mib,gpu,model)"
        );
        assert_eq!(
            e("n0,1000,1024,2,T4\nn0,1000,1024,2,T4\n"),
            "nodes.csv:3: duplicate node `n0` (first on line 2)"
        );
        assert_eq!(
            parse_nodes("sn,cpu,memory_mib,gpu,model\n", "nodes.csv")
                .unwrap_err()
                .to_string(),
            "nodes.csv:1: header is `sn,cpu,memory_mib,gpu,model`; expected `sn,cpu_milli,memory_mib,gpu,model`"
        );
        assert_eq!(
            parse_nodes("", "nodes.csv").unwrap_err().to_string(),
            "nodes.csv: empty input; expected the header line `sn,cpu_milli,memory_mib,gpu,model`"
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(body in "[a-zA-Z0-9,|\"\\-\\n\\r. ]{0,400}") {
            let pods = format!("{}\n{body}", POD_COLUMNS.join(","));
            let _ = parse_pods(&pods, "p", &ImportOptions::default());
            let _ = parse_pods(&body, "p", &ImportOptions::default());
            let nodes = format!("{}\n{body}", NODE_COLUMNS.join(","));
            let _ = parse_nodes(&nodes, "n");
            let _ = body.parse::<QueueRule>();
        }

        #[test]
        fn report_accounts_for_every_row(
            lines in proptest::collection::vec(
                "[a-c]{1,2},[0-9]{1,3},[0-9]{1,3},[0-2],(0|500|1000|1500),(|T4|T4\\|G2),(LS|BE),Running,[0-9]{0,2},[0-9]{0,2},[0-9]{0,2}",
                0..40,
            )
        ) {
            let text = format!("{}\n{}", POD_COLUMNS.join(","), lines.join("\n"));
            let import = parse_pods(&text, "p", &ImportOptions::default()).unwrap();
            let r = &import.report;
            proptest::prop_assert_eq!(r.rows, lines.len() as u64);
            proptest::prop_assert_eq!(r.imported + r.skipped_total(), r.rows);
            proptest::prop_assert_eq!(import.jobs.len() as u64, r.imported);
        }
    }
}
