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
//! Conversions between the cluster state's `Usage` and the store's
//! `UsageRecord` are here, the one place that knows both.

use std::path::PathBuf;
use std::sync::mpsc;

use trainyard_cluster::usage::{ClosedBucket, UsageHistory};
use trainyard_model::{ResourceName, Usage};
use trainyard_store::{
    Backend, Batch, Records, Recovery, Store, StoreError, UsageKey, UsageRecord,
};

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

/// What the cycle loop holds: the sending side of the store's thread.
pub struct Persist {
    tx: mpsc::Sender<Vec<ClosedBucket>>,
    thread: std::thread::JoinHandle<()>,
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
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            path: String::new(),
            backend: Backend::Redb,
        }
    }
}

impl Persist {
    /// Opens the store (moving a damaged one aside), rebuilds the usage
    /// history from it and starts the thread that writes to it.
    pub fn start(
        settings: &StoreSettings,
        half_life_s: u64,
    ) -> Result<(Persist, UsageHistory, Recovery), StoreError> {
        let path = PathBuf::from(&settings.path);
        let (mut store, recovery) = trainyard_store::open_or_recover(&path, settings.backend)?;
        let history = restore(store.as_ref(), half_life_s)?;
        let (tx, rx) = mpsc::channel::<Vec<ClosedBucket>>();
        let thread = std::thread::Builder::new()
            .name("trainyard-store".into())
            .spawn(move || write_loop(store.as_mut(), rx, half_life_s))
            .map_err(|e| StoreError::Io {
                path: path.clone(),
                detail: format!("cannot start the store's thread: {e}"),
            })?;
        Ok((Persist { tx, thread }, history, recovery))
    }

    /// Hands closed buckets to the store's thread (never blocks).
    pub fn closed(&self, buckets: Vec<ClosedBucket>) {
        if !buckets.is_empty() && self.tx.send(buckets).is_err() {
            tracing::error!("the store's thread has stopped; usage history is not being kept");
        }
    }

    /// Waits until everything handed over is written and the store closed.
    pub fn close(self) {
        drop(self.tx);
        if self.thread.join().is_err() {
            tracing::error!("the store's thread panicked");
        }
    }
}

/// Commits what arrives; compacts once per day of bucket time.
fn write_loop(store: &mut dyn Store, rx: mpsc::Receiver<Vec<ClosedBucket>>, half_life_s: u64) {
    let mut last_day: Option<i64> = None;
    while let Ok(buckets) = rx.recv() {
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
            let window = (8 * half_life_s).min(i64::MAX as u64) as i64;
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
            };
            let hl = 7 * 86_400;
            let (p, mut h, rec) = Persist::start(&settings, hl).unwrap();
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
