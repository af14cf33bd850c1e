//! The pod list: rows checked one by one, counted skips, jobs out.

use super::*;

/// A pod row that passed every check.
pub(super) struct PodRow<'r> {
    pub(super) name: &'r str,
    pub(super) requests: Resources,
    /// Allowed GPU models, sorted and deduplicated; empty = any.
    pub(super) models: Vec<String>,
    pub(super) qos: std::borrow::Cow<'r, str>,
    pub(super) submit: Timestamp,
    pub(super) duration_ms: u64,
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
pub(super) fn check_pod_row<'r>(
    f: &'r csv::StringRecord,
    has_times: bool,
    seen: &mut BTreeSet<String>,
    times: Option<&TraceTimes>,
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
        let Some(times) = times else {
            return Err(SKIP_NO_TIME_COLUMNS.to_string());
        };
        let (models, qos, submit, duration_ms) = times.lend(name, gpu)?;
        return Ok(PodRow {
            name,
            requests: Resources::new(cpu, memory, gpu),
            models,
            qos: qos.into(),
            submit,
            duration_ms,
        });
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
        qos: qos.into(),
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
    parse_pods_in_time(text, source, opts, &InTime::default())
}

/// How a pod list is laid out in time beyond its own columns
/// ([`times`](self::times) module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InTime {
    /// Columns for a list without times (the `multigpu*` files).
    pub times: Option<TraceTimes>,
    /// Every arrival time divided by this (1: as recorded).
    pub arrival_speedup: u32,
}

impl Default for InTime {
    fn default() -> Self {
        InTime {
            times: None,
            arrival_speedup: 1,
        }
    }
}

/// [`parse_pods`], with time columns borrowed for a list without them and
/// arrivals sped up ([`InTime`]).
pub fn parse_pods_in_time(
    text: &str,
    source: &str,
    opts: &ImportOptions,
    in_time: &InTime,
) -> Result<Import, OpenbError> {
    if in_time.arrival_speedup == 0 {
        return Err(OpenbError::Options {
            input: source.to_string(),
            problem: "the arrival speed-up must be 1 or more".to_string(),
        });
    }
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
        let pod = match check_pod_row(&row.fields, has_times, &mut seen, in_time.times.as_ref()) {
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
            .queue_for(pod.name, &pod.qos)
            .ok_or_else(|| unmapped("queue", opts.queue_rule.to_string()))?;
        let priority = *opts
            .priority_by_qos
            .get(pod.qos.as_ref())
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
            submit: Timestamp(pod.submit.0 / i64::from(in_time.arrival_speedup)),
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
            walltime_seconds: None,
            rejected: None,
        });
        report.imported += 1;
    }
    jobs.sort_by(|a, b| (a.submit, &a.id).cmp(&(b.submit, &b.id)));
    Ok(Import { jobs, report })
}
