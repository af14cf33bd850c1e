//! The service's Prometheus metrics (prometheus-client), exported on
//! `/metrics` ([`crate::http`]). Names follow Prometheus' conventions:
//! the `trainyard_` prefix, base units in the name (`_seconds`), `_total`
//! on counters. Per-resource gauges carry the resource and its unit as
//! labels (`resource="nvidia.com/gpu",unit="device"`), as
//! kube-state-metrics does, since one family holds several units.
//!
//! The table of every metric, with its labels and meaning, is in
//! docs/operations.md; `crates/serve/tests/observability.rs` checks the
//! exposition with `promtool check metrics`, and
//! `tests/tests/observability.rs` that the dashboard and alerts in
//! `deploy/` name only metrics exported here.
//!
//! The label values known in advance (cycle phases, reload results) exist
//! from the start at zero, so `rate()` and `increase()` see their first
//! step. A replica that stops leading clears its per-cycle gauges (pending
//! jobs, queues): only the leader reports the cluster's state.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use trainyard_model::{ResourceName, Snapshot, Timestamp};
use trainyard_sched::Decisions;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionLabels {
    /// `reclaim`, `preempt`, `incomplete_gang` or `walltime`.
    pub kind: &'static str,
    /// `evicted`, or why not (`pdb`, `not_found`, ...; see [`reason_of`]).
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueResourceLabels {
    pub queue: String,
    pub resource: String,
    pub unit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UsageLabels {
    pub queue: String,
    pub namespace: String,
    pub resource: String,
    pub unit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `get`, `list`, `watch`, `create`, `patch`, `update`, `delete`.
    pub verb: String,
    /// `pods`, `pods/binding`, `queues/status`, ...
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestCodeLabels {
    pub verb: String,
    pub resource: String,
    /// The HTTP status, or `error` when no response came.
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok` or `invalid`.
    pub result: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;

/// Every metric the service exports.
pub struct Metrics {
    registry: Registry,
    pub cycles: Counter,
    pub cycle_duration: Family<PhaseLabels, Histogram>,
    pub scheduling_latency: Histogram,
    pub binds: Counter,
    pub bind_failures: Family<ReasonLabels, Counter>,
    pub evictions: Family<EvictionLabels, Counter>,
    pub nominations: Counter,
    pub nomination_withdrawals: Counter,
    pub writes_in_flight: Gauge,
    pub events_dropped: Counter,
    pub pending_gangs: Family<ReasonLabels, Gauge>,
    pub queue_quota: Family<QueueResourceLabels, FloatGauge>,
    pub queue_fair_share: Family<QueueResourceLabels, FloatGauge>,
    pub queue_allocated: Family<QueueResourceLabels, FloatGauge>,
    /// 1 per Queue left out of the tree (its `Ready` condition says why).
    pub queue_invalid: Family<QueueLabels, Gauge>,
    pub queue_demand: Family<QueueResourceLabels, FloatGauge>,
    pub queue_oldest_pending: Family<QueueLabels, Gauge>,
    /// Runtimes a leaf queue's jobs ran to their own end, kept for the
    /// reservations' runtime estimate.
    pub queue_observed_runtimes: Family<QueueLabels, Gauge>,
    /// Gangs of a queue holding a reservation after the last cycle.
    pub queue_reserved_gangs: Family<QueueLabels, Gauge>,
    /// Nodes held for reservations after the last cycle.
    pub reserved_nodes: Gauge,
    /// Running jobs past their walltime at the last cycle (whether or not
    /// `enforceWalltime` ends them).
    pub jobs_past_walltime: Gauge,
    pub api_duration: Family<RequestLabels, Histogram>,
    pub api_requests: Family<RequestCodeLabels, Counter>,
    pub leader: Gauge,
    /// The store could not be read at start and was moved aside.
    pub store_rebuilt: Counter,
    /// Accounting: what each (leaf queue, namespace) used, resource·seconds
    /// in the resource's unit, counted as usage buckets close.
    pub usage: Family<UsageLabels, FloatCounter>,
    pub config_reloads: Family<ResultLabels, Counter>,
    /// The label sets set by the last cycle, to clear those that went.
    last: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    reasons: Vec<ReasonLabels>,
    queue_resources: Vec<QueueResourceLabels>,
    queues: Vec<QueueLabels>,
}

fn seconds_buckets() -> impl Iterator<Item = f64> {
    // 1 ms to about 65 s.
    exponential_buckets(0.001, 2.0, 17)
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("trainyard");
        let m = Metrics {
            cycles: Counter::default(),
            cycle_duration: Family::new_with_constructor(|| Histogram::new(seconds_buckets())),
            scheduling_latency: Histogram::new(exponential_buckets(0.01, 2.0, 16)),
            binds: Counter::default(),
            bind_failures: Family::default(),
            evictions: Family::default(),
            nominations: Counter::default(),
            nomination_withdrawals: Counter::default(),
            writes_in_flight: Gauge::default(),
            events_dropped: Counter::default(),
            pending_gangs: Family::default(),
            queue_quota: Family::default(),
            queue_fair_share: Family::default(),
            queue_allocated: Family::default(),
            queue_invalid: Family::default(),
            queue_demand: Family::default(),
            queue_oldest_pending: Family::default(),
            queue_observed_runtimes: Family::default(),
            queue_reserved_gangs: Family::default(),
            reserved_nodes: Gauge::default(),
            jobs_past_walltime: Gauge::default(),
            api_duration: Family::new_with_constructor(|| Histogram::new(seconds_buckets())),
            api_requests: Family::default(),
            leader: Gauge::default(),
            store_rebuilt: Counter::default(),
            usage: Family::default(),
            config_reloads: Family::default(),
            last: Mutex::new(Seen::default()),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register("cycles", "Scheduling cycles run", m.cycles.clone());
        r.register(
            "cycle_duration_seconds",
            "Duration of a cycle's phases: snapshot, schedule (the core), assume, write (handing writes over and status), total",
            m.cycle_duration.clone(),
        );
        r.register(
            "pod_scheduling_latency_seconds",
            "From a job's submission to the bind of each of its pods",
            m.scheduling_latency.clone(),
        );
        r.register("binds", "Pods bound", m.binds.clone());
        r.register(
            "bind_failures",
            "Binds that failed, by reason",
            m.bind_failures.clone(),
        );
        r.register(
            "evictions",
            "Evictions asked through the Eviction API, by kind (reclaim, preempt, incomplete_gang) and outcome",
            m.evictions.clone(),
        );
        r.register(
            "nominations",
            "Preemptors' nominations written (status.nominatedNodeName and its annotations); gang members nominated just before their binds are not counted",
            m.nominations.clone(),
        );
        r.register(
            "nomination_withdrawals",
            "status.nominatedNodeName cleared: nominations of pending pods a cycle did not keep",
            m.nomination_withdrawals.clone(),
        );
        r.register(
            "writes_in_flight",
            "Binds, evictions, nominations and withdrawals handed to the writer and not yet done",
            m.writes_in_flight.clone(),
        );
        r.register(
            "events_dropped",
            "Events dropped because the Event queue was full",
            m.events_dropped.clone(),
        );
        r.register(
            "pending_gangs",
            "Pending jobs after the last cycle, by the core's reason code",
            m.pending_gangs.clone(),
        );
        r.register(
            "queue_quota",
            "A queue's quota (deserved share), per resource, in the unit label's unit",
            m.queue_quota.clone(),
        );
        r.register(
            "queue_fair_share",
            "A queue's fair share after the last cycle, per resource",
            m.queue_fair_share.clone(),
        );
        r.register(
            "queue_invalid",
            "1 for each Queue left out of scheduling as invalid (its Ready condition says why)",
            m.queue_invalid.clone(),
        );
        r.register(
            "queue_allocated",
            "What a queue holds after the last cycle, per resource",
            m.queue_allocated.clone(),
        );
        r.register(
            "queue_pending_demand",
            "What a queue's pending jobs ask for (demand above allocation, capped by its limit), per resource",
            m.queue_demand.clone(),
        );
        r.register(
            "queue_oldest_pending_gang_age_seconds",
            "How long the oldest pending job of a queue has waited",
            m.queue_oldest_pending.clone(),
        );
        r.register(
            "queue_observed_runtimes",
            "How many runtimes of a leaf queue's jobs that ended on their own the reservations' runtime estimate holds (it estimates from runtimeEstimate.minSamples; 0 for parent queues)",
            m.queue_observed_runtimes.clone(),
        );
        r.register(
            "queue_reserved_gangs",
            "Starving gangs of a queue holding a reservation after the last cycle (scheduler.reservations)",
            m.queue_reserved_gangs.clone(),
        );
        r.register(
            "reserved_nodes",
            "Nodes held for reservations after the last cycle: they take only jobs that end before the reservation starts",
            m.reserved_nodes.clone(),
        );
        r.register(
            "jobs_past_walltime",
            "Running jobs that have run their walltime (declared, or their queue's default or maximum) at the last cycle; service.enforceWalltime ends them",
            m.jobs_past_walltime.clone(),
        );
        r.register(
            "api_request_duration_seconds",
            "API requests' time to response headers, by verb and resource",
            m.api_duration.clone(),
        );
        r.register(
            "api_requests",
            "API requests by verb, resource and HTTP status (error: no response)",
            m.api_requests.clone(),
        );
        r.register(
            "queue_usage_seconds",
            "Accounting: resource-seconds used by the bound pods of each leaf queue and namespace (resource in its unit: core, device, byte), counted when a usage bucket closes (at most hourly)",
            m.usage.clone(),
        );
        r.register(
            "store_rebuilt",
            "Times the persisted state could not be read at start and was moved aside",
            m.store_rebuilt.clone(),
        );
        r.register(
            "leader",
            "1 while this replica holds the leader lease (or runs without leader election)",
            m.leader.clone(),
        );
        r.register(
            "config_reloads",
            "Configuration reloads, by result (ok, invalid)",
            m.config_reloads.clone(),
        );
        for phase in ["snapshot", "schedule", "assume", "write", "total"] {
            let _ = m.cycle_duration.get_or_create(&PhaseLabels { phase });
        }
        for result in ["ok", "invalid"] {
            let _ = m.config_reloads.get_or_create(&ResultLabels { result });
        }
        let info: Family<Vec<(String, String)>, Gauge> = Family::default();
        info.get_or_create(&vec![("version".into(), env!("CARGO_PKG_VERSION").into())])
            .set(1);
        r.register("build_info", "The running build (value 1)", info);
        Metrics { registry, ..m }
    }

    /// The exposition in the OpenMetrics text format.
    /// Counts closed usage buckets into the accounting counters.
    pub fn record_usage(&self, closed: &[trainyard_cluster::usage::ClosedBucket]) {
        for b in closed {
            for (name, v) in b.used.iter() {
                let name = ResourceName::parse(name);
                let (unit, scale) = match &name {
                    ResourceName::Cpu => ("core", 1000.0),
                    ResourceName::Gpu => ("device", 1000.0),
                    ResourceName::Memory => ("byte", 1.0),
                    ResourceName::Extended(_) => ("integer", 1.0),
                };
                let l = UsageLabels {
                    queue: b.queue.clone(),
                    namespace: b.user.clone(),
                    resource: name.to_string(),
                    unit,
                };
                // Exported as a float, as every Prometheus sample is; the
                // amounts themselves are integers until here.
                self.usage.get_or_create(&l).inc_by(v as f64 / scale);
            }
        }
    }

    pub fn openmetrics(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The exposition in Prometheus' text format 0.0.4 (what `promtool
    /// check metrics` and scrapers that do not ask for OpenMetrics read).
    pub fn prometheus_text(&self) -> String {
        to_prometheus_text(&self.openmetrics())
    }

    /// Clears the per-cycle gauges (pending jobs by reason, the queues'):
    /// a replica that no longer leads does not report the cluster's state.
    pub fn clear_cycle_gauges(&self) {
        self.pending_gangs.clear();
        self.queue_oldest_pending.clear();
        self.queue_observed_runtimes.clear();
        self.queue_reserved_gangs.clear();
        self.queue_invalid.clear();
        self.reserved_nodes.set(0);
        self.jobs_past_walltime.set(0);
        for family in [
            &self.queue_quota,
            &self.queue_fair_share,
            &self.queue_allocated,
            &self.queue_demand,
        ] {
            family.clear();
        }
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Seen::default();
    }

    /// After a cycle: the Queues left out as invalid, by name.
    pub fn observe_invalid_queues(&self, invalid: &BTreeMap<String, String>) {
        self.queue_invalid.clear();
        for name in invalid.keys() {
            let l = QueueLabels {
                queue: name.clone(),
            };
            self.queue_invalid.get_or_create(&l).set(1);
        }
    }

    /// After a cycle: pending jobs by reason, and per queue its quota, fair
    /// share, allocation, pending demand, the age of its oldest pending
    /// job, the observed runtimes the snapshot carried and its gangs holding
    /// a reservation; the nodes held for reservations. Label sets of the last cycle that are gone are removed.
    pub fn observe_cycle(&self, snapshot: &Snapshot, decisions: &Decisions, now: Timestamp) {
        let mut reasons: BTreeMap<&'static str, i64> = BTreeMap::new();
        let mut oldest: BTreeMap<String, i64> = BTreeMap::new();
        let submitted: BTreeMap<&str, Timestamp> = snapshot
            .jobs
            .iter()
            .map(|j| (j.id.as_str(), j.submit_time))
            .collect();
        for p in &decisions.pending {
            *reasons.entry(p.reason.code()).or_default() += 1;
            if let Some(t) = submitted.get(p.job.as_str()) {
                let age = (now.0 - t.0).max(0) / 1000;
                let e = oldest.entry(p.queue.clone()).or_default();
                *e = (*e).max(age);
            }
        }
        let mut reserved: BTreeMap<&str, i64> = BTreeMap::new();
        let mut held: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        for r in &decisions.reservations {
            *reserved.entry(r.queue.as_str()).or_default() += 1;
            held.extend(r.nodes.iter().map(|n| n.as_str()));
        }
        self.reserved_nodes
            .set(i64::try_from(held.len()).unwrap_or(i64::MAX));
        let past = snapshot
            .jobs
            .iter()
            .filter(|j| crate::walltime::past_walltime(snapshot, j, now).is_some())
            .count();
        self.jobs_past_walltime
            .set(i64::try_from(past).unwrap_or(i64::MAX));
        let mut seen = Seen::default();
        for (reason, n) in reasons {
            let l = ReasonLabels {
                reason: reason.to_string(),
            };
            self.pending_gangs.get_or_create(&l).set(n);
            seen.reasons.push(l);
        }
        for q in &decisions.queues {
            let ql = QueueLabels {
                queue: q.queue.clone(),
            };
            self.queue_oldest_pending
                .get_or_create(&ql)
                .set(oldest.get(&q.queue).copied().unwrap_or(0));
            let runtimes = snapshot.runtimes.get(&q.queue).map_or(0, |r| r.len());
            self.queue_observed_runtimes
                .get_or_create(&ql)
                .set(i64::try_from(runtimes).unwrap_or(i64::MAX));
            self.queue_reserved_gangs
                .get_or_create(&ql)
                .set(reserved.get(q.queue.as_str()).copied().unwrap_or(0));
            seen.queues.push(ql);
            let mut demand = q.demand.clone();
            demand.saturating_sub(&q.allocated);
            let families = [
                (&self.queue_quota, &q.quota),
                (&self.queue_fair_share, &q.fair_share),
                (&self.queue_allocated, &q.allocated),
                (&self.queue_demand, &demand),
            ];
            // Every resource any of the four names (GPUs always) is set in
            // all four, zero where the queue has none: a queue whose last
            // job went reads 0 allocated, never its old amount.
            let mut names: Vec<ResourceName> = vec![ResourceName::Gpu];
            for (_, resources) in &families {
                for (name, _) in resources.iter() {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            for name in &names {
                let (unit, _) = in_unit(name, 0);
                let l = QueueResourceLabels {
                    queue: q.queue.clone(),
                    resource: name.to_string(),
                    unit,
                };
                for (family, resources) in &families {
                    let (_, v) = in_unit(name, resources.get(name));
                    family.get_or_create(&l).set(v);
                }
                seen.queue_resources.push(l);
            }
        }
        // A poisoned lock only means a panic mid-update elsewhere; the
        // lists are still lists.
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        for l in last.reasons.iter().filter(|l| !seen.reasons.contains(l)) {
            self.pending_gangs.remove(l);
        }
        for l in last.queues.iter().filter(|l| !seen.queues.contains(l)) {
            self.queue_oldest_pending.remove(l);
            self.queue_observed_runtimes.remove(l);
            self.queue_reserved_gangs.remove(l);
        }
        for l in last
            .queue_resources
            .iter()
            .filter(|l| !seen.queue_resources.contains(l))
        {
            for family in [
                &self.queue_quota,
                &self.queue_fair_share,
                &self.queue_allocated,
                &self.queue_demand,
            ] {
                family.remove(l);
            }
        }
        *last = seen;
    }
}

/// A resource amount in its unit: CPU in cores and GPUs in devices (from
/// milli-units), memory in bytes, other resources as counts.
fn in_unit(name: &ResourceName, value: u64) -> (&'static str, f64) {
    match name {
        ResourceName::Cpu => ("core", value as f64 / 1000.0),
        ResourceName::Gpu => ("device", value as f64 / 1000.0),
        ResourceName::Memory => ("byte", value as f64),
        ResourceName::Extended(_) => ("integer", value as f64),
    }
}

/// A short reason for a failed request, for labels: the HTTP status'
/// name, `fenced` (not the leader), or `transport`.
pub fn reason_of(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => match s.code {
            400 => "bad_request".into(),
            403 => "forbidden".into(),
            404 => "not_found".into(),
            409 => "conflict".into(),
            422 => "invalid".into(),
            429 => "too_many_requests".into(),
            500..=599 => "server_error".into(),
            c => format!("http_{c}"),
        },
        kube::Error::Service(inner) if inner.downcast_ref::<crate::conn::Fenced>().is_some() => {
            "fenced".into()
        }
        _ => "transport".into(),
    }
}

/// Rewrites an OpenMetrics text exposition as Prometheus text 0.0.4:
/// a counter family `x` whose samples are `x_total` is declared as
/// `x_total`, and `# UNIT` and `# EOF` lines go.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut counters: Vec<String> = Vec::new();
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some(name) = rest.strip_suffix(" counter")
        {
            counters.push(name.to_string());
        }
    }
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let rewritten = ["# TYPE ", "# HELP "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .iter()
                .any(|c| c == name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(rewritten.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_usage_buckets_count_into_the_accounting_counters() {
        use trainyard_cluster::usage::ClosedBucket;
        use trainyard_model::{Resources, Usage};
        let m = Metrics::new();
        let bucket = |gpus: u64| ClosedBucket {
            queue: "org/ml".into(),
            user: "team-a".into(),
            start_s: 0,
            width_s: 3600,
            used: Usage::of(&Resources::new(500, 1 << 30, 0).with_gpus(gpus), 3600),
        };
        m.record_usage(&[bucket(2), bucket(6)]);
        let text = m.prometheus_text();
        for line in [
            "trainyard_queue_usage_seconds_total{queue=\"org/ml\",namespace=\"team-a\",resource=\"nvidia.com/gpu\",unit=\"device\"} 28800.0\n",
            "trainyard_queue_usage_seconds_total{queue=\"org/ml\",namespace=\"team-a\",resource=\"cpu\",unit=\"core\"} 3600.0\n",
            "trainyard_queue_usage_seconds_total{queue=\"org/ml\",namespace=\"team-a\",resource=\"memory\",unit=\"byte\"} 7730941132800.0\n",
        ] {
            assert!(text.contains(line), "{line} not in {text}");
        }
    }

    #[test]
    fn reservations_are_counted_per_queue_with_the_nodes_they_hold() {
        use crate::testkit::{NODE, decide, pod};
        // n1 runs an 8-GPU pod with an hour left of its deadline: the
        // pending 8-GPU pod reserves n1 from its end.
        let running = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: r, namespace: ml}\nspec: {schedulerName: trainyard, nodeName: n1, activeDeadlineSeconds: 3600, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]}\nstatus: {phase: Running, startTime: '2027-01-15T08:00:00Z'}\n";
        let (snapshot, d) = decide(&format!("{NODE}{running}{}", pod("p", 8)));
        assert_eq!(d.reservations.len(), 1, "{d:?}");
        let queue = d.reservations[0].queue.clone();
        let m = Metrics::new();
        m.observe_cycle(&snapshot, &d, Timestamp::from_secs(1_800_000_000));
        let text = m.prometheus_text();
        assert!(text.contains("trainyard_reserved_nodes 1\n"), "{text}");
        assert!(
            text.contains(&format!(
                "trainyard_queue_reserved_gangs{{queue=\"{queue}\"}} 1\n"
            )),
            "{text}"
        );
        // Off the next cycle: none.
        let (snapshot, d) = decide(&format!("{NODE}{running}"));
        m.observe_cycle(&snapshot, &d, Timestamp::from_secs(1_800_000_000));
        let text = m.prometheus_text();
        assert!(text.contains("trainyard_reserved_nodes 0\n"), "{text}");
        assert!(
            text.contains(&format!(
                "trainyard_queue_reserved_gangs{{queue=\"{queue}\"}} 0\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn a_queue_whose_last_job_went_reads_zero_allocated_not_its_old_amount() {
        use crate::testkit::{NODE, decide};
        let running = "---\napiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: team}\nspec: {quota: {nvidia.com/gpu: 8}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: r, namespace: ml, labels: {trainyard.io/queue: team}}\nspec: {schedulerName: trainyard, nodeName: n1, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8', cpu: '2'}}}]}\n";
        let (snapshot, d) = decide(&format!("{NODE}{running}"));
        let m = Metrics::new();
        m.observe_cycle(&snapshot, &d, Timestamp::from_secs(1_800_000_000));
        let gpu =
            "trainyard_queue_allocated{queue=\"team\",resource=\"nvidia.com/gpu\",unit=\"device\"}";
        let cpu = "trainyard_queue_allocated{queue=\"team\",resource=\"cpu\",unit=\"core\"}";
        let text = m.prometheus_text();
        assert!(text.contains(&format!("{gpu} 8.0\n")), "{text}");
        assert!(text.contains(&format!("{cpu} 2.0\n")), "{text}");
        // The pod is gone; the queue (its quota names GPUs) stays.
        let (snapshot, d) = decide(&format!(
            "{NODE}---\napiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {{name: team}}\nspec: {{quota: {{nvidia.com/gpu: 8}}}}\n"
        ));
        m.observe_cycle(&snapshot, &d, Timestamp::from_secs(1_800_000_060));
        let text = m.prometheus_text();
        assert!(text.contains(&format!("{gpu} 0.0\n")), "{text}");
        assert!(
            !text.contains(cpu),
            "a resource no gauge names any more goes: {text}"
        );
    }

    #[test]
    fn jobs_past_their_walltime_are_counted_whether_or_not_they_are_ended() {
        use crate::testkit::{NODE, decide};
        // Started 08:00 with a one-hour deadline.
        let running = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: r, namespace: ml}\nspec: {schedulerName: trainyard, nodeName: n1, activeDeadlineSeconds: 3600, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]}\nstatus: {phase: Running, startTime: '2027-01-15T08:00:00Z'}\n";
        let (snapshot, d) = decide(&format!("{NODE}{running}"));
        let m = Metrics::new();
        let eight = 1_800_000_000; // 2027-01-15T08:00:00Z
        m.observe_cycle(&snapshot, &d, Timestamp::from_secs(eight + 1800));
        assert!(
            m.prometheus_text()
                .contains("trainyard_jobs_past_walltime 0\n"),
            "{}",
            m.prometheus_text()
        );
        m.observe_cycle(&snapshot, &d, Timestamp::from_secs(eight + 7200));
        assert!(
            m.prometheus_text()
                .contains("trainyard_jobs_past_walltime 1\n"),
            "{}",
            m.prometheus_text()
        );
        m.clear_cycle_gauges();
        assert!(
            m.prometheus_text()
                .contains("trainyard_jobs_past_walltime 0\n")
        );
    }

    #[test]
    fn counters_are_renamed_for_the_text_format() {
        let m = Metrics::new();
        m.binds.inc();
        m.bind_failures
            .get_or_create(&ReasonLabels {
                reason: "conflict".into(),
            })
            .inc();
        let om = m.openmetrics();
        assert!(om.contains("# TYPE trainyard_binds counter"), "{om}");
        assert!(om.ends_with("# EOF\n"), "{om}");
        let text = m.prometheus_text();
        assert!(
            text.contains("# TYPE trainyard_binds_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP trainyard_binds_total Pods bound.\n"),
            "{text}"
        );
        assert!(text.contains("trainyard_binds_total 1\n"), "{text}");
        assert!(
            text.contains("trainyard_bind_failures_total{reason=\"conflict\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        assert!(text.contains("trainyard_build_info{version="), "{text}");
    }
}
