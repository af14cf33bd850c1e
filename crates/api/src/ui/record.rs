//! What the dashboard shows that no cycle holds alone: the queues'
//! allocation over the last hours, the recent evictions (who took what
//! from whom), and each job's events. Kept in memory from the cycles the
//! service publishes, bounded; [`Record::observe`] is pure (a cycle in,
//! the record updated), so it is tested on plain cycles.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;
use trainyard_serve::view::CycleView;

/// One history sample per this many milliseconds.
pub const STEP_MS: i64 = 60_000;
/// Samples kept: six hours.
pub const SAMPLES: usize = 360;
/// Evictions kept.
pub const EVICTIONS: usize = 1_000;
/// Events kept per job.
pub const EVENTS_PER_JOB: usize = 100;
/// Jobs whose events are kept; the oldest-touched are forgotten first.
pub const JOBS_TRACKED: usize = 100_000;

/// A queue's amounts of one resource at one sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Amounts {
    pub allocated: u64,
    pub fair_share: u64,
    pub pending_demand: u64,
}

/// The queues at one step: queue -> resource -> amounts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// The step's start (ms).
    pub step_ms: i64,
    /// The time of the cycle it was taken from (ms).
    pub time_ms: i64,
    pub queues: BTreeMap<String, BTreeMap<String, (String, Amounts)>>,
}

/// One eviction the scheduler decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionRecord {
    pub time_ms: i64,
    pub cycle: u64,
    pub job: String,
    pub queue: String,
    pub pod: String,
    pub node: String,
    pub kind: String,
    pub preemptor: String,
    pub preemptor_queue: String,
    pub message: String,
}

/// Something that happened to a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub time_ms: i64,
    pub cycle: u64,
    /// `Pending`, `Bound`, `Evicted`, `Evicting`, `Nominated`, `Reserved`.
    pub kind: &'static str,
    pub message: String,
    /// Other jobs the message names (a preemptor, victims).
    #[serde(skip)]
    pub names: Vec<String>,
    /// The message without them, for a caller who may not see one.
    #[serde(skip)]
    pub redacted: String,
}

impl Event {
    /// The event as a caller seeing `v` may read it.
    pub fn shown(mut self, v: &crate::auth::Visible) -> Event {
        if self.names.iter().any(|j| !v.shows_job(j)) {
            self.message = std::mem::take(&mut self.redacted);
        }
        self.names.clear();
        self
    }
}

impl EvictionRecord {
    /// The eviction as a caller seeing `v` may read it: a side it may not
    /// see is named by its queue only (and the message, which names both,
    /// is left out).
    pub fn shown(mut self, v: &crate::auth::Visible) -> EvictionRecord {
        if !v.shows_job(&self.job) {
            self.job.clear();
            self.pod.clear();
            self.message.clear();
        }
        if !v.shows_job(&self.preemptor) {
            self.preemptor.clear();
            self.message.clear();
        }
        self
    }
}

/// The dashboard's memory.
#[derive(Debug, Default)]
pub struct Record {
    pub samples: VecDeque<Sample>,
    /// Newest last.
    pub evictions: VecDeque<EvictionRecord>,
    /// Per job: the cycle count it was last touched at, its events.
    events: HashMap<String, (u64, VecDeque<Event>)>,
    /// Events kept over every job.
    events_kept: usize,
    /// Each pending job's last message, to tell a change.
    reasons: HashMap<String, String>,
    /// Reservations last seen, by job (their nodes and start).
    reserved: HashMap<String, (Vec<String>, i64)>,
    /// Time (ms) of the last sample taken.
    sampled_at: Option<i64>,
    /// Cycles observed.
    pub cycles: u64,
}

/// Events kept over every job, at most.
pub const EVENTS: usize = 200_000;

/// The cycle's time of a sample is refreshed at most this often (a queue
/// list is a walk over every job).
const SAMPLE_EVERY_MS: i64 = 5_000;

impl Record {
    /// Takes in cycle `c` (its queue sample made here when one is due).
    pub fn observe(&mut self, c: &CycleView) {
        let sample = self.sample_due(c).then(|| sample_of(c));
        self.take(c, sample);
    }

    /// Whether cycle `c` should give a queue sample.
    pub fn sample_due(&self, c: &CycleView) -> bool {
        let now = c.now.0;
        self.sampled_at
            .is_none_or(|t| now - t >= SAMPLE_EVERY_MS || now < t)
    }

    /// Takes in cycle `c` with its queue sample, if one was made
    /// ([`sample_of`], which walks every job: made outside any lock).
    pub fn take(&mut self, c: &CycleView, sample: Option<Sample>) {
        self.cycles += 1;
        if let Some(sample) = sample {
            self.sampled_at = Some(sample.time_ms);
            match self.samples.back_mut() {
                Some(last) if last.step_ms == sample.step_ms => *last = sample,
                _ => {
                    self.samples.push_back(sample);
                    while self.samples.len() > SAMPLES {
                        self.samples.pop_front();
                    }
                }
            }
        }
        self.binds(c);
        self.evictions(c);
        self.plans(c);
        self.reasons(c);
        if self.cycles.is_multiple_of(600) {
            self.forget_gone(c);
        }
        if self.events_kept > EVENTS || self.events.len() > JOBS_TRACKED {
            self.prune();
        }
    }

    fn event(&mut self, job: &str, e: Event) {
        let n = self.cycles;
        let entry = self
            .events
            .entry(job.to_string())
            .or_insert_with(|| (n, VecDeque::new()));
        entry.0 = n;
        entry.1.push_back(e);
        self.events_kept += 1;
        while entry.1.len() > EVENTS_PER_JOB {
            entry.1.pop_front();
            self.events_kept -= 1;
        }
    }

    /// An event of cycle `c` naming `names` besides its own job.
    fn at(c: &CycleView, kind: &'static str, message: String) -> Event {
        Event {
            time_ms: c.now.0,
            cycle: c.number,
            kind,
            redacted: message.clone(),
            message,
            names: Vec::new(),
        }
    }

    /// Binds, one event per job.
    fn binds(&mut self, c: &CycleView) {
        let mut bound: BTreeMap<&str, (u32, Vec<&str>)> = BTreeMap::new();
        for b in &c.decisions.binds {
            let e = bound.entry(b.job.as_str()).or_default();
            e.0 += 1;
            if !e.1.contains(&b.node.as_str()) {
                e.1.push(b.node.as_str());
            }
        }
        for (job, (pods, nodes)) in bound {
            let m = format!("{pods} pod(s) bound on {}", nodes.join(", "));
            self.event(job, Self::at(c, "Bound", m));
            self.reasons.remove(job);
        }
    }

    /// Evictions: kept, and an event on the victim's and the preemptor's
    /// side, each naming the other.
    fn evictions(&mut self, c: &CycleView) {
        let d = &c.decisions;
        if d.evictions.is_empty() {
            return;
        }
        let queue_of: HashMap<&str, &str> = c
            .snapshot
            .jobs
            .iter()
            .map(|j| (j.id.as_str(), j.queue.as_str()))
            .collect();
        let queue = |id: &str| queue_of.get(id).unwrap_or(&"").to_string();
        let mut by_preemptor: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for e in &d.evictions {
            let kind = crate::convert::victim(e).kind;
            let m = format!(
                "pod {} evicted from {} ({kind}): {}",
                e.task, e.node, e.message
            );
            let mut event = Self::at(c, "Evicted", m);
            let whom = match queue(e.preemptor.as_str()) {
                q if q.is_empty() => "for another job".to_string(),
                q => format!("for a job of queue {q}"),
            };
            event.redacted = format!("pod {} evicted from {} ({kind}) {whom}", e.task, e.node);
            event.names = vec![e.preemptor.to_string()];
            self.event(e.job.as_str(), event);
            by_preemptor
                .entry(e.preemptor.as_str())
                .or_default()
                .push(e.job.as_str());
            self.evictions.push_back(EvictionRecord {
                time_ms: c.now.0,
                cycle: c.number,
                job: e.job.to_string(),
                queue: queue(e.job.as_str()),
                pod: e.task.to_string(),
                node: e.node.to_string(),
                kind,
                preemptor: e.preemptor.to_string(),
                preemptor_queue: queue(e.preemptor.as_str()),
                message: e.message.clone(),
            });
        }
        while self.evictions.len() > EVICTIONS {
            self.evictions.pop_front();
        }
        for (p, mut victims) in by_preemptor {
            let pods = victims.len();
            victims.dedup();
            let m = format!(
                "evicting {pods} pod(s) of {} to make room for it",
                victims.join(", ")
            );
            let mut event = Self::at(c, "Evicting", m);
            event.redacted = format!("evicting {pods} pod(s) of other jobs to make room for it");
            event.names = victims.iter().map(|v| v.to_string()).collect();
            self.event(p, event);
        }
    }

    /// Nominations (one event per job) and reservations made or moved.
    fn plans(&mut self, c: &CycleView) {
        let d = &c.decisions;
        let mut nominated: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for nd in &d.nominations {
            let e = nominated.entry(nd.job.as_str()).or_default();
            if !e.contains(&nd.node.as_str()) {
                e.push(nd.node.as_str());
            }
        }
        for (job, nodes) in nominated {
            let m = format!("nominated to {} while its victims leave", nodes.join(", "));
            self.event(job, Self::at(c, "Nominated", m));
        }
        let mut seen = HashMap::new();
        for r in &d.reservations {
            let nodes: Vec<String> = r.nodes.iter().map(|n| n.to_string()).collect();
            let key = (nodes.clone(), r.start.0);
            if self.reserved.get(r.job.as_str()) != Some(&key) {
                let m = format!(
                    "capacity reserved on {} from {}",
                    nodes.join(", "),
                    trainyard_serve::report::rfc3339(r.start)
                );
                self.event(r.job.as_str(), Self::at(c, "Reserved", m));
            }
            seen.insert(r.job.to_string(), key);
        }
        self.reserved = seen;
    }

    /// Pending reasons that changed. A message that changed under the
    /// same reason (its counts, say) replaces the job's last event when
    /// that is its reason's, so a long wait is one event, kept current.
    fn reasons(&mut self, c: &CycleView) {
        for p in &c.decisions.pending {
            let id = p.job.as_str();
            let last = self.reasons.get(id);
            if last == Some(&p.message) {
                continue;
            }
            let code = p.reason.code();
            let m = format!("{code}: {}", p.message);
            let same_reason = last.is_some()
                && self
                    .events
                    .get(id)
                    .and_then(|(_, e)| e.back())
                    .is_some_and(|e| {
                        e.kind == "Pending" && e.message.split(':').next() == Some(code)
                    });
            let event = Self::at(c, "Pending", m);
            match self.events.get_mut(id).and_then(|(_, e)| e.back_mut()) {
                Some(back) if same_reason => *back = event,
                _ => self.event(id, event),
            }
            self.reasons.insert(id.to_string(), p.message.clone());
        }
    }

    /// Forgets the reasons of jobs no longer in the snapshot.
    fn forget_gone(&mut self, c: &CycleView) {
        let live: std::collections::HashSet<&str> =
            c.snapshot.jobs.iter().map(|j| j.id.as_str()).collect();
        self.reasons.retain(|id, _| live.contains(id.as_str()));
    }

    /// Forgets the events of the jobs touched longest ago until at most
    /// 90% of [`EVENTS`] and of [`JOBS_TRACKED`] are kept.
    fn prune(&mut self) {
        let mut order: Vec<(u64, String)> = self
            .events
            .iter()
            .map(|(id, (n, _))| (*n, id.clone()))
            .collect();
        order.sort();
        for (_, id) in order {
            if self.events_kept <= EVENTS / 10 * 9 && self.events.len() <= JOBS_TRACKED / 10 * 9 {
                break;
            }
            if let Some((_, e)) = self.events.remove(&id) {
                self.events_kept -= e.len();
            }
        }
    }

    /// Job `id`'s events, oldest first.
    pub fn events_of(&self, id: &str) -> Vec<Event> {
        self.events
            .get(id)
            .map(|(_, e)| e.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The evictions of job `id`'s pods and those made for it, newest first.
    pub fn evictions_of(&self, id: &str) -> Vec<EvictionRecord> {
        self.evictions
            .iter()
            .rev()
            .filter(|e| e.job == id || e.preemptor == id)
            .cloned()
            .collect()
    }

    /// The history as the dashboard reads it (docs/ui.md).
    pub fn history(&self) -> serde_json::Value {
        let times: Vec<i64> = self.samples.iter().map(|s| s.step_ms).collect();
        let mut queues: BTreeMap<&str, BTreeMap<&str, serde_json::Value>> = BTreeMap::new();
        let names: std::collections::BTreeSet<(&str, &str, &str)> = self
            .samples
            .iter()
            .flat_map(|s| {
                s.queues.iter().flat_map(|(q, rs)| {
                    rs.iter()
                        .map(move |(r, (unit, _))| (q.as_str(), r.as_str(), unit.as_str()))
                })
            })
            .collect();
        for (q, r, unit) in names {
            let series = |f: fn(&Amounts) -> u64| -> Vec<Option<u64>> {
                self.samples
                    .iter()
                    .map(|s| s.queues.get(q).and_then(|rs| rs.get(r)).map(|(_, a)| f(a)))
                    .collect()
            };
            queues.entry(q).or_default().insert(
                r,
                serde_json::json!({
                    "unit": unit,
                    "allocated": series(|a| a.allocated),
                    "fairShare": series(|a| a.fair_share),
                    "pendingDemand": series(|a| a.pending_demand),
                }),
            );
        }
        serde_json::json!({"stepMs": STEP_MS, "times": times, "queues": queues})
    }
}

/// Every queue's amounts in cycle `c`, as ListQueues gives them (a walk
/// over every job).
pub fn sample_of(c: &CycleView) -> Sample {
    let now = c.now.0;
    let queues = crate::service::list_queues(c)
        .queues
        .iter()
        .map(|q| {
            let r = q
                .resources
                .iter()
                .map(|r| {
                    let a = Amounts {
                        allocated: r.allocated,
                        fair_share: r.fair_share,
                        pending_demand: r.pending_demand,
                    };
                    (r.resource.clone(), (r.unit.clone(), a))
                })
                .collect();
            (q.name.clone(), r)
        })
        .collect();
    Sample {
        step_ms: now.div_euclid(STEP_MS) * STEP_MS,
        time_ms: now,
        queues,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::convert::tests::three_pods;
    use trainyard_model::{TaskKey, Timestamp};
    use trainyard_sched::{Eviction, EvictionKind};

    /// `c` at `secs` past its time, as cycle `number`.
    fn later(c: &CycleView, number: u64, secs: i64) -> CycleView {
        CycleView {
            number,
            now: Timestamp(c.now.0 + secs * 1000),
            snapshot: c.snapshot.clone(),
            decisions: c.decisions.clone(),
            config: c.config.clone(),
            writes_in_flight: 0,
        }
    }

    #[test]
    fn binds_reasons_and_evictions_become_events_and_history() {
        let first = three_pods();
        let mut r = Record::default();
        r.observe(&first);
        // `small` bound; the others pending, each with its reason once.
        let small = r.events_of("ml/small");
        assert_eq!(small.len(), 1);
        assert_eq!(small[0].kind, "Bound");
        assert_eq!(small[0].message, "1 pod(s) bound on n1");
        assert_eq!(r.events_of("ml/big")[0].kind, "Pending");
        // The same reasons again: no new event.
        r.observe(&later(&first, 8, 1));
        assert_eq!(r.events_of("ml/big").len(), 1);
        // An eviction of small's pod for wide: both sides told, and kept.
        let mut third = later(&first, 9, 2);
        let mut d = (*third.decisions).clone();
        d.binds.clear();
        d.evictions.push(Eviction {
            job: "ml/small".into(),
            task: TaskKey::named("ml/small"),
            node: "n1".into(),
            kind: EvictionKind::Preempt,
            preemptor: "ml/wide".into(),
            message: "preempted for ml/wide (priority 10 over 0)".into(),
        });
        third.decisions = Arc::new(d);
        r.observe(&third);
        let e = r.evictions_of("ml/wide");
        assert_eq!(e.len(), 1);
        assert_eq!(
            (e[0].job.as_str(), e[0].queue.as_str(), e[0].kind.as_str()),
            ("ml/small", "team", "preempt")
        );
        assert_eq!(e[0].preemptor_queue, "team");
        assert_eq!(r.evictions_of("ml/small"), e);
        let small = r.events_of("ml/small");
        assert_eq!(small.last().map(|e| e.kind), Some("Evicted"));
        assert_eq!(
            r.events_of("ml/wide").last().map(|e| e.message.as_str()),
            Some("evicting 1 pod(s) of ml/small to make room for it")
        );
        // History: one sample per minute, the last refreshed.
        assert_eq!(r.samples.len(), 1);
        r.observe(&later(&first, 10, 61));
        assert_eq!(r.samples.len(), 2);
        let h = r.history();
        assert_eq!(h["queues"]["team"]["nvidia.com/gpu"]["allocated"][1], 4000);
        assert_eq!(
            h["queues"]["team"]["nvidia.com/gpu"]["pendingDemand"][1],
            6000
        );
    }

    #[test]
    fn other_jobs_named_in_events_and_evictions_are_hidden_from_who_may_not_see_them() {
        let first = three_pods();
        let mut r = Record::default();
        let mut c = later(&first, 8, 1);
        let mut d = (*c.decisions).clone();
        d.evictions.push(Eviction {
            job: "ml/small".into(),
            task: TaskKey::named("ml/small"),
            node: "n1".into(),
            kind: EvictionKind::Reclaim,
            preemptor: "other/big".into(),
            message: "reclaimed for other/big (team-b): team above fair share".into(),
        });
        c.decisions = Arc::new(d);
        r.observe(&c);
        let only_ml = crate::auth::Visible::Only(["ml".to_string()].into());
        let evicted = r.events_of("ml/small").pop().expect("an event");
        assert_eq!(
            evicted.clone().shown(&crate::auth::Visible::All).message,
            "pod ml/small evicted from n1 (reclaim): reclaimed for other/big (team-b): team above fair share"
        );
        assert_eq!(
            evicted.shown(&only_ml).message,
            "pod ml/small evicted from n1 (reclaim) for another job"
        );
        let only_other = crate::auth::Visible::Only(["other".to_string()].into());
        let evicting = r.events_of("other/big").pop().expect("an event");
        assert_eq!(
            evicting.shown(&only_other).message,
            "evicting 1 pod(s) of other jobs to make room for it"
        );
        let e = r.evictions_of("ml/small").pop().expect("kept");
        let shown = e.shown(&only_ml);
        assert_eq!(
            (
                shown.job.as_str(),
                shown.preemptor.as_str(),
                shown.message.as_str()
            ),
            ("ml/small", "", "")
        );
        assert_eq!(shown.preemptor_queue, "");
    }

    #[test]
    fn a_message_that_changes_under_one_reason_is_one_event() {
        let first = three_pods();
        let mut r = Record::default();
        r.observe(&first);
        let before = r.events_of("ml/big");
        let mut c = later(&first, 8, 1);
        let mut d = (*c.decisions).clone();
        for p in d.pending.iter_mut().filter(|p| p.job == "ml/big") {
            p.message.push_str(" (again)");
        }
        c.decisions = Arc::new(d);
        r.observe(&c);
        let after = r.events_of("ml/big");
        assert_eq!(after.len(), before.len());
        assert!(after[after.len() - 1].message.ends_with("(again)"));
        assert_eq!(after[after.len() - 1].cycle, 8);
    }

    #[test]
    fn what_is_kept_is_bounded() {
        let first = three_pods();
        let mut r = Record::default();
        for i in 0..(SAMPLES as i64 + 10) {
            r.observe(&later(&first, i as u64 + 1, i * 60));
        }
        assert_eq!(r.samples.len(), SAMPLES);
        let mut c = later(&first, 1_000, 0);
        let mut d = (*c.decisions).clone();
        d.evictions = (0..EVICTIONS + 5)
            .map(|i| Eviction {
                job: "ml/small".into(),
                task: TaskKey::named(format!("ml/small-{i}")),
                node: "n1".into(),
                kind: EvictionKind::Reclaim,
                preemptor: "ml/wide".into(),
                message: String::new(),
            })
            .collect();
        c.decisions = Arc::new(d);
        r.observe(&c);
        assert_eq!(r.evictions.len(), EVICTIONS);
        assert!(r.events_of("ml/small").len() <= EVENTS_PER_JOB);
        // Over the budget of events, the jobs touched longest ago go.
        let kept: usize = r.events.values().map(|(_, e)| e.len()).sum();
        assert_eq!(kept, r.events_kept);
        r.events_kept = EVENTS + 1;
        r.prune();
        assert!(
            r.events.is_empty(),
            "every job's events counted over the budget"
        );
    }
}
