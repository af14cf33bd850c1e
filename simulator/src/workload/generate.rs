//! The workload generator (`kind: WorkloadGenerator`): jobs drawn from
//! templates with a seeded RNG (arrivals, gang sizes, run times).

use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GeneratorSpec {
    seed: u64,
    templates: Vec<TemplateDoc>,
    #[serde(default)]
    pub(super) preemption: Option<PreemptionDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TemplateDoc {
    name: String,
    queue: String,
    count: Bounded<0, MAX_JOBS_PER_TEMPLATE>,
    arrival: Arrival,
    #[serde(default)]
    start: Option<serde_json::Value>,
    #[serde(default = "one_pod")]
    pods: IntDist,
    pod_requests: BTreeMap<String, RawQuantity>,
    duration: DurationDist,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    node_selector: BTreeMap<String, String>,
    #[serde(default)]
    topology: Option<TopologyDoc>,
    #[serde(default)]
    preemptible: Option<bool>,
    #[serde(default)]
    lost_work: Option<serde_json::Value>,
    /// Every job's declared walltime (a duration).
    #[serde(default)]
    walltime: Option<serde_json::Value>,
    /// Every job's declared walltime as its own duration times this
    /// (at least 1: users overestimate, as Slurm's logs show); rounded up
    /// to whole seconds. Exclusive with `walltime`.
    #[serde(default)]
    walltime_factor: Option<f64>,
}

fn one_pod() -> IntDist {
    IntDist::Fixed(Bounded(1))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum Arrival {
    /// Exponential inter-arrival times.
    Poisson {
        #[serde(rename = "perHour")]
        per_hour: f64,
    },
    /// One job every interval.
    Every(serde_json::Value),
    /// Exactly these submission times (count is capped by their number).
    Times(Vec<serde_json::Value>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum IntDist {
    Fixed(TaskCount),
    Uniform {
        min: TaskCount,
        max: TaskCount,
    },
    Choice(Vec<TaskCount>),
    /// Rounded, at least 1, at most `max` when given.
    Exponential {
        mean: f64,
        #[serde(default)]
        max: Option<TaskCount>,
    },
    /// Rounded, at least 1, at most `max` when given.
    LogNormal {
        median: f64,
        sigma: f64,
        #[serde(default)]
        max: Option<TaskCount>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum DurationDist {
    Fixed(serde_json::Value),
    Uniform {
        min: serde_json::Value,
        max: serde_json::Value,
    },
    Exponential {
        mean: serde_json::Value,
    },
    LogNormal {
        median: serde_json::Value,
        sigma: f64,
    },
}

/// Standard normal sample (Box–Muller).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

pub(super) fn generate(spec: GeneratorSpec, source: &str) -> Result<Vec<SimJob>, SpecError> {
    let (mut all_jobs, mut all_tasks): (u64, u64) = (0, 0);
    let mut out = Vec::new();
    let mut cache = BTreeMap::new();
    let mut names = BTreeMap::new();
    for (ti, t) in spec.templates.iter().enumerate() {
        if let Some(prev) = names.insert(t.name.as_str(), ti) {
            return Err(SpecError::new(
                source,
                &format!("spec.templates[{ti}].name"),
                format!(
                    "template {:?} is also defined at spec.templates[{prev}]",
                    t.name
                ),
            ));
        }
        let f = |field: &str| format!("spec.templates[{ti}].{field}");
        let err = |field: &str, msg: String| SpecError::new(source, &f(field), msg);
        // One stream per template: the seed mixed with an FNV-1a hash of its name.
        let name_hash = crate::openb::fnv1a64(t.name.as_bytes());
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ name_hash);
        let count = t.count.0;
        all_jobs += u64::from(count);
        if all_jobs > u64::from(MAX_JOBS) {
            return Err(err(
                "count",
                format!(
                    "expected at most {MAX_JOBS} jobs in all templates together; the templates up to this one have {all_jobs}"
                ),
            ));
        }
        let requests = resources(&t.pod_requests, &f("podRequests"), source)?;
        let start = match &t.start {
            Some(v) => parse_duration_ms(v).map_err(|e| err("start", e))?,
            None => 0,
        };
        let dur =
            |v: &serde_json::Value, field: &str| parse_duration_ms(v).map_err(|e| err(field, e));
        let duration = match &t.duration {
            DurationDist::Fixed(v) => DurSampler::Fixed(dur(v, "duration.fixed")?),
            DurationDist::Uniform { min, max } => {
                let (a, b) = (
                    dur(min, "duration.uniform.min")?,
                    dur(max, "duration.uniform.max")?,
                );
                if a > b {
                    return Err(err(
                        "duration.uniform",
                        format!("min {a} ms is above max {b} ms"),
                    ));
                }
                DurSampler::Uniform(a, b)
            }
            DurationDist::Exponential { mean } => {
                DurSampler::Exp(dur(mean, "duration.exponential.mean")? as f64)
            }
            DurationDist::LogNormal { median, sigma } => {
                if !(sigma.is_finite() && *sigma >= 0.0) {
                    return Err(err(
                        "duration.logNormal.sigma",
                        format!("expected a non-negative number, got {sigma}"),
                    ));
                }
                DurSampler::LogNormal(dur(median, "duration.logNormal.median")? as f64, *sigma)
            }
        };
        match &t.pods {
            IntDist::Uniform { min, max } if min > max => {
                return Err(err(
                    "pods.uniform",
                    format!("expected min <= max, found {}..{}", min.0, max.0),
                ));
            }
            IntDist::Choice(c) if c.is_empty() => {
                return Err(err(
                    "pods.choice",
                    "expected a non-empty list of positive counts".into(),
                ));
            }
            IntDist::Exponential { mean, .. } if !(mean.is_finite() && *mean > 0.0) => {
                return Err(err(
                    "pods.exponential.mean",
                    format!("expected a positive number, got {mean}"),
                ));
            }
            IntDist::LogNormal { median, sigma, .. }
                if !(median.is_finite() && *median > 0.0 && sigma.is_finite() && *sigma >= 0.0) =>
            {
                return Err(err(
                    "pods.logNormal",
                    format!("expected median > 0 and sigma >= 0, got {median}, {sigma}"),
                ));
            }
            _ => {}
        }
        let times: Vec<u64> = match &t.arrival {
            Arrival::Poisson { per_hour } => {
                if !(per_hour.is_finite() && *per_hour > 0.0) {
                    return Err(err(
                        "arrival.poisson.perHour",
                        format!("expected a positive rate, got {per_hour}"),
                    ));
                }
                let mean_gap = 3_600_000.0 / per_hour;
                let mut now = start as f64;
                (0..count)
                    .map(|_| {
                        let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
                        now += -mean_gap * u.ln();
                        // Bounded like every other time (100 years).
                        now.round().min(MAX_DURATION_MS as f64) as u64
                    })
                    .collect()
            }
            Arrival::Every(v) => {
                let gap = dur(v, "arrival.every")?;
                let mut v = Vec::with_capacity(count as usize);
                for i in 0..u64::from(count) {
                    match i
                        .checked_mul(gap)
                        .and_then(|x| x.checked_add(start))
                        .filter(|x| *x <= MAX_DURATION_MS)
                    {
                        Some(x) => v.push(x),
                        None => {
                            return Err(err(
                                "arrival.every",
                                "arrivals would run past 100 years".into(),
                            ));
                        }
                    }
                }
                v
            }
            Arrival::Times(ts) => {
                let mut v = Vec::new();
                for (k, x) in ts.iter().enumerate().take(count as usize) {
                    let at = dur(x, &format!("arrival.times[{k}]"))?;
                    v.push((start + at).min(MAX_DURATION_MS));
                }
                v
            }
        };
        let constraints = constraints(&t.node_selector, &mut cache);
        let topology = TopologyDoc::constraint(t.topology.as_ref(), &f("topology"), source)?;
        let walltime = t
            .walltime
            .as_ref()
            .map(|v| walltime_s(v).map_err(|e| err("walltime", e)))
            .transpose()?;
        match (walltime, t.walltime_factor) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "walltimeFactor",
                    "expected either walltime or walltimeFactor, not both".into(),
                ));
            }
            (_, Some(x)) => {
                check_walltime_factor(x).map_err(|e| err("walltimeFactor", e))?;
            }
            _ => {}
        }
        let lost = t
            .lost_work
            .as_ref()
            .map(|v| lost_work(v, &f("lostWork"), source))
            .transpose()?;
        for (k, submit) in times.into_iter().enumerate() {
            let pods = match &t.pods {
                IntDist::Fixed(n) => n.0,
                IntDist::Uniform { min, max } => rng.random_range(min.0..=max.0),
                IntDist::Choice(c) => c[rng.random_range(0..c.len())].0,
                IntDist::Exponential { mean, max } => {
                    let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
                    clamp_pods(-mean * u.ln(), max.map(|m| m.0))
                }
                IntDist::LogNormal { median, sigma, max } => {
                    clamp_pods(median * (sigma * normal(&mut rng)).exp(), max.map(|m| m.0))
                }
            };
            all_tasks += u64::from(pods);
            if all_tasks > MAX_WORKLOAD_TASKS {
                return Err(err(
                    "pods",
                    format!(
                        "expected at most {MAX_WORKLOAD_TASKS} tasks (pods) in the whole workload; the jobs generated up to this template's job {k} have {all_tasks}"
                    ),
                ));
            }
            let duration_ms = duration.sample(&mut rng).clamp(1, MAX_DURATION_MS);
            out.push(SimJob {
                id: format!("{}/{}-{k:06}", t.queue, t.name),
                queue: t.queue.clone(),
                priority: t.priority,
                submit: Timestamp(submit as i64),
                duration_ms,
                min_member: pods,
                subgroups: Vec::new(),
                topology: topology.clone(),
                tasks: vec![SimTask {
                    count: pods,
                    requests: requests.clone(),
                    subgroup: None,
                    constraints: constraints.clone(),
                }],
                preemptible: t.preemptible.unwrap_or(default_preemptible(t.priority)),
                lost_work: lost,
                walltime_seconds: walltime
                    .or_else(|| t.walltime_factor.map(|x| walltime_of(duration_ms, x))),
                rejected: None,
            });
        }
    }
    Ok(out)
}

/// A sampled gang size: rounded, at least 1, at most `max`.
fn clamp_pods(v: f64, max: Option<u32>) -> u32 {
    let n = if v.is_finite() {
        v.round().clamp(1.0, u32::MAX as f64) as u32
    } else {
        1
    };
    n.min(max.unwrap_or(MAX_TASKS_PER_JOB).clamp(1, MAX_TASKS_PER_JOB))
}

enum DurSampler {
    Fixed(u64),
    Uniform(u64, u64),
    Exp(f64),
    LogNormal(f64, f64),
}

impl DurSampler {
    fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        match self {
            DurSampler::Fixed(v) => *v,
            DurSampler::Uniform(a, b) => rng.random_range(*a..=*b),
            DurSampler::Exp(mean) => {
                let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
                (-mean * u.ln()).round() as u64
            }
            DurSampler::LogNormal(median, sigma) => {
                (median * (sigma * normal(rng)).exp()).round() as u64
            }
        }
    }
}
