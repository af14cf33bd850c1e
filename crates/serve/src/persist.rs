//! The persisted state's edge: the usage history to and from the store
//! (`trainyard-store`, docs/persistence.md).
//!
//! At start, the leader's store is opened (or moved aside and made anew
//! when it cannot be read) and the usage history rebuilt from the closed
//! buckets it kept. Every cycle the buckets that closed are handed to a
//! thread of the store's own, which commits them, so a slow disk never
//! holds a cycle; once a day of bucket time it compacts (hourly buckets
//! older than two days into days, buckets older than eight half-lives
//! dropped) and shrinks the file.
//!
//! The same thread keeps the gang bind journal ([`crate::journal`]): an
//! intent is committed before a gang's binds are issued (the writer waits
//! for that commit) and removed when they are done.
//!
//! Conversions between the cluster state's `Usage` and the store's
//! `UsageRecord` are here, the one place that knows both.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;

use trainyard_cluster::usage::{ClosedBucket, JobUsage, UsageHistory};
use trainyard_model::{ResourceName, Usage};
use trainyard_store::{
    Backend, Batch, JobRecord, JournalRecord, Records, Recovery, Store, StoreError, UsageKey,
    UsageRecord,
};

/// The half-life the usage history decays by when the time-decayed fair
/// share is off (`trainyard_cluster::usage::ACCOUNTING_HALF_LIFE_S`).
pub use trainyard_cluster::usage::ACCOUNTING_HALF_LIFE_S;

/// The store's record of one usage amount.
pub fn record_of(used: &Usage, width_s: u32) -> UsageRecord {
    let mut r = UsageRecord {
        width_s,
        ..UsageRecord::default()
    };
    for (name, v) in used.iter() {
        match ResourceName::parse(name) {
            ResourceName::Cpu => r.cpu = v,
            ResourceName::Memory => r.memory = v,
            ResourceName::Gpu => r.gpu = v,
            ResourceName::Extended(n) => {
                r.extended.insert(n, v);
            }
        }
    }
    r
}

/// The usage a store record holds.
pub fn usage_of(r: &UsageRecord) -> Usage {
    let mut u = Usage::new();
    u.add_to(ResourceName::Cpu.as_str(), r.cpu);
    u.add_to(ResourceName::Memory.as_str(), r.memory);
    u.add_to(ResourceName::Gpu.as_str(), r.gpu);
    for (n, v) in &r.extended {
        u.add_to(n, *v);
    }
    u
}

/// The commit of some closed buckets. A queue or user name with a NUL
/// byte cannot be a key: it is skipped and named in the log.
pub fn batch_of(closed: &[ClosedBucket]) -> Batch {
    let mut b = Batch::default();
    for c in closed {
        let key = UsageKey {
            queue: c.queue.clone(),
            user: c.user.clone(),
            start_s: c.start_s,
        };
        if let Err(e) = b.usage(&key, &record_of(&c.used, c.width_s)) {
            tracing::warn!("usage of {}/{} not stored: {e}", c.queue, c.user);
        }
    }
    b
}

/// The history a store kept, decaying by `half_life_s`.
pub fn restore(store: &dyn Store, half_life_s: u64) -> Result<UsageHistory, StoreError> {
    let buckets = store.usage(None)?.into_iter().map(|(k, r)| ClosedBucket {
        queue: k.queue,
        user: k.user,
        start_s: k.start_s,
        width_s: r.width_s,
        used: usage_of(&r),
    });
    Ok(UsageHistory::restore(half_life_s, buckets))
}

/// How `trainyard usage` groups its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageBy {
    Queue,
    Namespace,
    /// One row per (queue, namespace).
    Both,
    /// One row per job record (a job that ended, was evicted or deleted
    /// in the window), and, asked of a running service, one per job still
    /// running.
    Job,
}

impl UsageBy {
    /// Every grouping, as `/usage?by=` and `--by` spell them.
    pub const ALL: [(&'static str, UsageBy); 4] = [
        ("queue", UsageBy::Queue),
        ("namespace", UsageBy::Namespace),
        ("both", UsageBy::Both),
        ("job", UsageBy::Job),
    ];

    pub fn parse(s: &str) -> Option<UsageBy> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, b)| *b)
    }

    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("queue", |(n, _)| n)
    }
}

/// Usage of one row of `trainyard usage` over `[from_s, to_s)`, in
/// resource·seconds of Trainyard's units (integers, as stored).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UsageRow {
    /// Leaf queue; empty when grouped by namespace only.
    pub queue: String,
    /// Namespace (the user); empty when grouped by queue only.
    pub namespace: String,
    /// The job (`namespace/name`), by job only; empty otherwise.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub job: String,
    /// When the job started and ended (seconds since the epoch), by job
    /// only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_s: Option<i64>,
    /// `None` for a job still running (`running`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_s: Option<i64>,
    /// The job still holds something (by job, from a running service):
    /// its amounts are up to when the report was asked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub running: bool,
    /// Milli-GPU·seconds.
    pub gpu_milli_seconds: u128,
    /// Millicore·seconds.
    pub cpu_milli_seconds: u128,
    /// Byte·seconds.
    pub memory_byte_seconds: u128,
}

/// What a running service used that its store does not hold yet, as of
/// when it was asked (`ClusterState::live_usage`): the buckets of the
/// period still open (from their start to then) and the jobs still
/// holding something (from their start to then).
#[derive(Clone, Debug, Default)]
pub struct Live {
    pub buckets: Vec<ClosedBucket>,
    pub running: Vec<JobUsage>,
}

/// `v` in proportion `num / den` (rounded down, without overflow).
fn part(v: u128, num: u128, den: u128) -> u128 {
    v / den * num + v % den * num / den
}

/// What each (queue, namespace) used in `[from_s, to_s)`, grouped `by`, in
/// name order: as the store kept it, plus what `live` adds (a running
/// service's open period and running jobs; `Live::default()` for a store
/// read on its own). A bucket or job that straddles an end of the window
/// counts in proportion to its overlap (rounded down): after compaction,
/// buckets older than two days are a day wide.
pub fn usage_report(
    store: &dyn Store,
    from_s: i64,
    to_s: i64,
    by: UsageBy,
    live: &Live,
) -> Result<Vec<UsageRow>, StoreError> {
    let overlap = |start: i64, end: i64| {
        let o = end.min(to_s) - start.max(from_s);
        (o > 0).then(|| (o as u128, (end - start).max(1) as u128))
    };
    if by == UsageBy::Job {
        let running = live.running.iter().map(|j| (job_record(j), true));
        let mut out = Vec::new();
        for (r, running) in store
            .jobs(from_s)?
            .into_iter()
            .map(|r| (r, false))
            .chain(running)
        {
            let end = r.end_s.max(r.start_s + 1);
            let Some((num, den)) = overlap(r.start_s, end) else {
                continue;
            };
            out.push(UsageRow {
                queue: r.queue,
                namespace: r.user,
                job: r.job,
                start_s: Some(r.start_s),
                end_s: (!running).then_some(r.end_s),
                running,
                gpu_milli_seconds: part(r.gpu, num, den),
                cpu_milli_seconds: part(r.cpu, num, den),
                memory_byte_seconds: part(r.memory, num, den),
            });
        }
        out.sort_by(|a, b| {
            let end = |r: &UsageRow| r.end_s.unwrap_or(i64::MAX);
            (&a.queue, &a.job, end(a)).cmp(&(&b.queue, &b.job, end(b)))
        });
        return Ok(out);
    }
    let live_buckets = live.buckets.iter().map(|b| {
        let key = UsageKey {
            queue: b.queue.clone(),
            user: b.user.clone(),
            start_s: b.start_s,
        };
        (key, record_of(&b.used, b.width_s))
    });
    let mut rows: BTreeMap<(String, String), UsageRow> = BTreeMap::new();
    for (k, r) in store.usage(None)?.into_iter().chain(live_buckets) {
        let Some((num, den)) = overlap(k.start_s, k.start_s + i64::from(r.width_s.max(1))) else {
            continue;
        };
        let (queue, namespace) = match by {
            UsageBy::Queue => (k.queue, String::new()),
            UsageBy::Namespace => (String::new(), k.user),
            UsageBy::Both | UsageBy::Job => (k.queue, k.user),
        };
        let row = rows
            .entry((queue.clone(), namespace.clone()))
            .or_insert_with(|| UsageRow {
                queue,
                namespace,
                ..UsageRow::default()
            });
        row.gpu_milli_seconds += part(r.gpu, num, den);
        row.cpu_milli_seconds += part(r.cpu, num, den);
        row.memory_byte_seconds += part(r.memory, num, den);
    }
    Ok(rows.into_values().collect())
}

/// Days of per-job accounting records kept by default.
pub const DEFAULT_JOB_RETENTION_DAYS: u64 = 14;

/// The store's record of a finished job's use.
pub fn job_record(j: &JobUsage) -> JobRecord {
    let r = record_of(&j.used, 0);
    JobRecord {
        job: j.job.clone(),
        queue: j.queue.clone(),
        user: j.user.clone(),
        start_s: j.start_ms.div_euclid(1000),
        // A job shorter than a second still ends after it starts.
        end_s: (j.end_ms + 999).div_euclid(1000),
        cpu: r.cpu,
        memory: r.memory,
        gpu: r.gpu,
        extended: r.extended,
    }
}

/// What the store's thread is handed.
pub(crate) enum Msg {
    /// Usage buckets that closed.
    Closed(Vec<ClosedBucket>),
    /// Writes (or rewrites) intent `id` of the bind journal; `done` hears
    /// once it is durable, or why it is not.
    Intent {
        id: u64,
        rec: JournalRecord,
        done: Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
    },
    /// Removes intent `id`: its binds are done or undone.
    CloseIntent(u64),
    /// Jobs that stopped holding anything: accounting records.
    Jobs(Vec<JobUsage>),
    /// A `trainyard usage` question asked of the running service
    /// ([`Reports`]): answered from the store between two commits.
    Report {
        from_s: i64,
        to_s: i64,
        by: UsageBy,
        live: Live,
        reply: tokio::sync::oneshot::Sender<Result<Vec<UsageRow>, String>>,
    },
}

/// What the cycle loop holds: the sending side of the store's thread.
pub struct Persist {
    tx: mpsc::Sender<Msg>,
    thread: std::thread::JoinHandle<()>,
}

/// What [`Persist::start`] found and started.
pub struct Started {
    pub persist: Persist,
    /// The usage history rebuilt from the store.
    pub history: UsageHistory,
    pub recovery: Recovery,
    /// Bind journal intents left open by the last run, by id.
    pub intents: BTreeMap<u64, JournalRecord>,
}

/// Where and how the service keeps its state.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreSettings {
    /// The store's file (redb) or directory (sled); empty: nothing is
    /// kept, and the usage history starts empty at every start.
    pub path: String,
    /// `redb` (default) or `sled`.
    pub backend: Backend,
    /// How many days of usage history the store keeps (`trainyard usage`
    /// reaches that far back; a restart rebuilds the decayed usage from
    /// it); `None`: eight half-lives. At least four half-lives when the
    /// time-decayed fair share is on (checked at load).
    pub retention_days: Option<u32>,
    /// How many days of per-job accounting records the store keeps (as
    /// Slurm's `PurgeJobAfter`); `None`: 14, or `retentionDays` if that is
    /// shorter. A record is a few hundred bytes on disk: 10,000 jobs a day
    /// kept 14 days are about 35 MiB (docs/benchmarks.md).
    pub job_retention_days: Option<u32>,
    /// How often (seconds) the leader writes a checkpoint of the essential
    /// state (decayed usage per queue and user, open bind intents) to a
    /// ConfigMap in the lease's namespace; a new leader resumes from it
    /// when it is newer than its own store ([`crate::checkpoint`]). 0: none.
    pub checkpoint_seconds: u64,
    /// The checkpoint ConfigMap's name.
    pub checkpoint_name: String,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            path: String::new(),
            backend: Backend::Redb,
            retention_days: None,
            job_retention_days: None,
            checkpoint_seconds: 60,
            checkpoint_name: "trainyard-checkpoint".into(),
        }
    }
}

impl Persist {
    /// Opens the store (moving a damaged one aside), rebuilds the usage
    /// history from it and starts the thread that writes to it.
    pub fn start(settings: &StoreSettings, half_life_s: u64) -> Result<Started, StoreError> {
        let path = PathBuf::from(&settings.path);
        let (mut store, recovery) = trainyard_store::open_or_recover(&path, settings.backend)?;
        let history = restore(store.as_ref(), half_life_s)?;
        let intents = store.journal()?;
        let retention_s = match settings.retention_days {
            Some(d) => u64::from(d) * 86_400,
            None => half_life_s.saturating_mul(8),
        };
        let job_retention_s = settings
            .job_retention_days
            .map_or(DEFAULT_JOB_RETENTION_DAYS * 86_400, |d| {
                u64::from(d) * 86_400
            })
            .min(retention_s);
        let (tx, rx) = mpsc::channel::<Msg>();
        let thread = std::thread::Builder::new()
            .name("trainyard-store".into())
            .spawn(move || write_loop(store.as_mut(), rx, (retention_s, job_retention_s)))
            .map_err(|e| StoreError::Io {
                path: path.clone(),
                detail: format!("cannot start the store's thread: {e}"),
            })?;
        Ok(Started {
            persist: Persist { tx, thread },
            history,
            recovery,
            intents,
        })
    }

    /// Hands closed buckets to the store's thread (never blocks).
    pub fn closed(&self, buckets: Vec<ClosedBucket>) {
        if !buckets.is_empty() && self.tx.send(Msg::Closed(buckets)).is_err() {
            tracing::error!("the store's thread has stopped; usage history is not being kept");
        }
    }

    /// Hands finished jobs' accounting records to the store's thread
    /// (never blocks).
    pub fn jobs(&self, jobs: Vec<JobUsage>) {
        if !jobs.is_empty() && self.tx.send(Msg::Jobs(jobs)).is_err() {
            tracing::error!("the store's thread has stopped; job accounting is not being kept");
        }
    }

    /// Hands a usage question (`/usage`) to the store's thread, which
    /// answers on `reply` with [`usage_report`] over `[from_s, to_s)` and
    /// `live`: between two commits, after every record handed over before
    /// it, so a bucket is counted once, closed or live (never blocks).
    pub fn report(
        &self,
        (from_s, to_s, by): (i64, i64, UsageBy),
        live: Live,
        reply: tokio::sync::oneshot::Sender<Result<Vec<UsageRow>, String>>,
    ) {
        let msg = Msg::Report {
            from_s,
            to_s,
            by,
            live,
            reply,
        };
        if let Err(mpsc::SendError(Msg::Report { reply, .. })) = self.tx.send(msg) {
            let _ = reply.send(Err("the store's thread has stopped".into()));
        }
    }

    /// A handle on the bind journal, for the shell (the machine numbers
    /// the intents).
    pub fn journal(&self) -> crate::journal::Journal {
        crate::journal::Journal::new(self.tx.clone())
    }

    /// Waits until everything handed over is written and the store closed.
    pub fn close(self) {
        drop(self.tx);
        if self.thread.join().is_err() {
            tracing::error!("the store's thread panicked");
        }
    }
}

/// Commits what arrives; compacts once per day of bucket time, keeping
/// `retention_s` seconds of history.
fn write_loop(
    store: &mut dyn Store,
    rx: mpsc::Receiver<Msg>,
    (retention_s, job_retention_s): (u64, u64),
) {
    let mut last_day: Option<i64> = None;
    while let Ok(msg) = rx.recv() {
        let buckets = match msg {
            Msg::Closed(b) => b,
            Msg::Intent { id, rec, done } => {
                let mut batch = Batch::default();
                batch.intent(id, &rec);
                let result = store.apply(&batch).map_err(|e| e.to_string());
                if let Err(e) = &result {
                    tracing::error!("bind journal: intent {id} of {} not stored: {e}", rec.gang);
                }
                if let Some(done) = done {
                    // The writer may have stopped waiting (the service stops).
                    let _ = done.send(result);
                }
                continue;
            }
            Msg::Jobs(jobs) => {
                let mut batch = Batch::default();
                for (seq, j) in jobs.iter().enumerate() {
                    if let Err(e) = batch.job(&job_record(j), seq as u32) {
                        tracing::error!("job accounting: {e}");
                    }
                }
                if let Err(e) = store.apply(&batch) {
                    tracing::error!("job accounting not stored: {e}");
                }
                continue;
            }
            Msg::CloseIntent(id) => {
                let mut batch = Batch::default();
                batch.close_intent(id);
                if let Err(e) = store.apply(&batch) {
                    tracing::error!("bind journal: intent {id} not closed: {e}");
                }
                continue;
            }
            Msg::Report {
                from_s,
                to_s,
                by,
                live,
                reply,
            } => {
                let rows =
                    usage_report(&*store, from_s, to_s, by, &live).map_err(|e| e.to_string());
                // The asker may have gone (its connection closed).
                let _ = reply.send(rows);
                continue;
            }
        };
        let end = buckets
            .iter()
            .map(|b| b.start_s + i64::from(b.width_s))
            .max()
            .unwrap_or(0);
        if let Err(e) = store.apply(&batch_of(&buckets)) {
            tracing::error!("usage history not stored: {e}");
            continue;
        }
        let day = end.div_euclid(86_400);
        if last_day.is_some_and(|d| d != day) {
            let window = retention_s.min(i64::MAX as u64) as i64;
            let jobs_window = job_retention_s.min(i64::MAX as u64) as i64;
            if let Err(e) = store.drop_jobs_before(end.saturating_sub(jobs_window)) {
                tracing::error!("job accounting not trimmed: {e}");
            }
            match store.compact_usage(end - 2 * 86_400, 86_400, end.saturating_sub(window)) {
                Ok(st) => {
                    tracing::info!(
                        merged = st.merged,
                        dropped = st.dropped,
                        "usage history compacted"
                    );
                    if let Err(e) = store.shrink() {
                        tracing::warn!("store not shrunk: {e}");
                    }
                }
                Err(e) => tracing::error!("usage history not compacted: {e}"),
            }
        }
        last_day = Some(day);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use trainyard_model::{Resources, Timestamp};

    fn store_with(buckets: &[(&str, &str, i64, u32, u64)]) -> (tempfile::TempDir, Box<dyn Store>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store =
            trainyard_store::open(&dir.path().join("s.redb"), Backend::Redb).expect("opens");
        let closed: Vec<ClosedBucket> = buckets
            .iter()
            .map(|(q, u, start_s, width_s, gpus)| ClosedBucket {
                queue: q.to_string(),
                user: u.to_string(),
                start_s: *start_s,
                width_s: *width_s,
                used: Usage::of(&Resources::zero().with_gpus(*gpus), u64::from(*width_s)),
            })
            .collect();
        store.apply(&batch_of(&closed)).expect("commits");
        (dir, store)
    }

    #[test]
    fn the_usage_report_counts_the_window_and_prorates_its_edges() {
        let (_dir, store) = store_with(&[
            ("a", "ns1", 0, 86_400, 2),
            ("a", "ns2", 86_400, 3600, 8),
            ("b", "ns1", 90_000, 3600, 1),
            // Outside the window.
            ("b", "ns1", 200_000, 3600, 64),
        ]);
        // From noon of day 0 to the end of hour 25.
        let rows = usage_report(
            store.as_ref(),
            43_200,
            93_600,
            UsageBy::Both,
            &Live::default(),
        )
        .expect("reads");
        let got: Vec<(String, String, u128)> = rows
            .iter()
            .map(|r| (r.queue.clone(), r.namespace.clone(), r.gpu_milli_seconds))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".into(), "ns1".into(), 2000 * 43_200),
                ("a".into(), "ns2".into(), 8000 * 3600),
                ("b".into(), "ns1".into(), 1000 * 3600),
            ]
        );
        let by_ns = usage_report(
            store.as_ref(),
            43_200,
            93_600,
            UsageBy::Namespace,
            &Live::default(),
        )
        .expect("reads");
        assert_eq!(by_ns.len(), 2);
        assert_eq!(by_ns[0].gpu_milli_seconds, 2000 * 43_200 + 1000 * 3600);
        assert_eq!(by_ns[0].queue, "");
        let by_q = usage_report(
            store.as_ref(),
            0,
            1_000_000,
            UsageBy::Queue,
            &Live::default(),
        )
        .expect("reads");
        assert_eq!(
            by_q.iter().map(|r| r.gpu_milli_seconds).collect::<Vec<_>>(),
            vec![2000 * 86_400 + 8000 * 3600, 1000 * 3600 + 64_000 * 3600]
        );
    }

    /// A running service's report adds the period still open and the
    /// running jobs to what the store holds, prorated the same way.
    #[test]
    fn the_report_of_a_running_service_counts_the_open_period_and_running_jobs() {
        let (_dir, mut store) = store_with(&[("a", "ns1", 0, 3600, 2)]);
        let mut batch = Batch::default();
        let done = JobUsage {
            job: "ns1/done".into(),
            queue: "a".into(),
            user: "ns1".into(),
            start_ms: 0,
            end_ms: 3_600_000,
            used: Usage::of(&Resources::zero().with_gpus(2), 3600),
        };
        batch.job(&job_record(&done), 0).expect("a job");
        store.apply(&batch).expect("commits");
        // Five minutes of 60 GPUs in the hour still open, by a job still
        // running since the hour began.
        let gpus60 = Usage::of(&Resources::zero().with_gpus(60), 300);
        let live = Live {
            buckets: vec![ClosedBucket {
                queue: "b".into(),
                user: "ns2".into(),
                start_s: 3600,
                width_s: 300,
                used: gpus60.clone(),
            }],
            running: vec![JobUsage {
                job: "ns2/big".into(),
                queue: "b".into(),
                user: "ns2".into(),
                start_ms: 3_600_000,
                end_ms: 3_900_000,
                used: gpus60,
            }],
        };
        let q = usage_report(store.as_ref(), 0, 3900, UsageBy::Queue, &live).expect("reads");
        assert_eq!(
            q.iter()
                .map(|r| (r.queue.as_str(), r.gpu_milli_seconds))
                .collect::<Vec<_>>(),
            vec![("a", 2000 * 3600), ("b", 60_000 * 300)]
        );
        // Half of the live five minutes are in a window ending at 3750.
        let q = usage_report(store.as_ref(), 3600, 3750, UsageBy::Queue, &live).expect("reads");
        assert_eq!(q[0].gpu_milli_seconds, 60_000 * 150);
        let jobs = usage_report(store.as_ref(), 0, 3900, UsageBy::Job, &live).expect("reads");
        assert_eq!(
            jobs.iter()
                .map(|r| (r.job.as_str(), r.end_s, r.running, r.gpu_milli_seconds))
                .collect::<Vec<_>>(),
            vec![
                ("ns1/done", Some(3600), false, 2000 * 3600),
                ("ns2/big", None, true, 60_000 * 300),
            ]
        );
        let json = serde_json::to_value(&jobs[1]).expect("JSON");
        assert_eq!(json["running"], true);
        assert!(json.get("end_s").is_none(), "{json}");
        assert!(
            serde_json::to_value(&jobs[0])
                .expect("JSON")
                .get("running")
                .is_none()
        );
    }

    #[test]
    fn usage_and_records_convert_both_ways() {
        let mut u = Usage::of(&Resources::new(2000, 1 << 30, 0).with_gpus(3), 60);
        u.add_to("example.com/fpga", 7);
        let r = record_of(&u, 3600);
        assert_eq!((r.cpu, r.gpu, r.width_s), (120_000, 180_000, 3600));
        assert_eq!(
            r.extended,
            BTreeMap::from([("example.com/fpga".to_string(), 7)])
        );
        assert_eq!(usage_of(&r), u);
    }

    #[test]
    fn a_restart_keeps_the_decayed_usage() {
        for backend in [Backend::Redb, Backend::Sled] {
            let dir = tempfile::tempdir().unwrap();
            let settings = StoreSettings {
                path: dir.path().join("state").to_string_lossy().into_owned(),
                backend,
                ..StoreSettings::default()
            };
            let hl = 7 * 86_400;
            let Started {
                persist: p,
                history: mut h,
                recovery: rec,
                intents,
            } = Persist::start(&settings, hl).unwrap();
            assert!(intents.is_empty());
            assert_eq!(rec, Recovery::Opened);
            let held = BTreeMap::from([(
                ("team-a".to_string(), "ns".to_string()),
                Resources::zero().with_gpus(8),
            )]);
            // Ten hours held, then a sample on the next bucket boundary.
            h.sample(Timestamp(0), held);
            h.sample(Timestamp(10 * 3_600_000), BTreeMap::new());
            h.sample(Timestamp(11 * 3_600_000), BTreeMap::new());
            p.closed(h.take_closed());
            p.close();
            let later = Timestamp(20 * 3_600_000);
            let want = h.decayed(later);
            assert!(!want.is_empty());
            let s = trainyard_store::open(std::path::Path::new(&settings.path), backend).unwrap();
            let restored = restore(s.as_ref(), hl).unwrap();
            assert_eq!(restored.decayed(later), want, "{backend:?}");
        }
    }
}
