//! The store's own record types and their encoding.
//!
//! Every value is one version byte, then the record in postcard (a
//! compact, stable serde format). The types here are the store's: they
//! change only with [`RECORD_VERSION`] (and the schema version when a
//! migration is needed), whatever happens to the model's types. Keys are
//! built so that byte order is the order a reader wants (queue, user,
//! time).
//!
//! Units are explicit and integer: times are seconds since the Unix
//! epoch; usage is resource·seconds in the resource's Kubernetes unit as
//! Trainyard counts it (millicores, bytes, milli-GPU, plain counts), as a
//! `u128` (a year of a petabyte of memory is 3·10²² byte·seconds).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::{Op, Store, StoreError, Table};

/// The version byte every value starts with.
pub const RECORD_VERSION: u8 = 1;

/// Usage of one (queue, user) in one time bucket `[start, start + width)`:
/// resource·seconds in Trainyard's unit for each resource. The three
/// common resources are fields (a bucket is written for every queue every
/// hour; names would be most of its bytes), the rest by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UsageRecord {
    /// Bucket width, seconds.
    pub width_s: u32,
    /// Millicore·seconds.
    pub cpu: u128,
    /// Byte·seconds.
    pub memory: u128,
    /// Milli-GPU·seconds.
    pub gpu: u128,
    /// Other resources by Kubernetes name: count·seconds.
    pub extended: BTreeMap<String, u128>,
}

impl UsageRecord {
    /// Adds `other`'s amounts (not its width).
    pub fn add(&mut self, other: &UsageRecord) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.gpu = self.gpu.saturating_add(other.gpu);
        for (r, v) in &other.extended {
            let e = self.extended.entry(r.clone()).or_default();
            *e = e.saturating_add(*v);
        }
    }

    /// Sum over every resource (for checks).
    pub fn total(&self) -> u128 {
        self.extended.values().fold(
            self.cpu
                .saturating_add(self.memory)
                .saturating_add(self.gpu),
            |a, v| a.saturating_add(*v),
        )
    }
}

/// Where a [`UsageRecord`] is kept: queue path, user ("" for the queue's
/// own total when no user is known), bucket start (seconds).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsageKey {
    pub queue: String,
    pub user: String,
    pub start_s: i64,
}

/// A pending gang's place in line: what must survive a restart so that
/// nobody loses their turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GangRecord {
    /// When the gang first waited, seconds.
    pub enqueued_s: i64,
    /// Since when it has been starving (waiting past the starvation
    /// threshold), if it is.
    pub starved_since_s: Option<i64>,
    /// No new attempt before this time, if backing off.
    pub backoff_until_s: Option<i64>,
    /// Attempts that failed so far.
    pub attempts: u32,
    /// (pod, node) nominations made for it.
    pub nominated: Vec<(String, String)>,
}

/// What one job used from when it first held something until it held
/// nothing: one accounting record (Slurm's job record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct JobRecord {
    /// The job (`namespace/name`).
    pub job: String,
    pub queue: String,
    /// The namespace.
    pub user: String,
    /// Seconds since the epoch.
    pub start_s: i64,
    pub end_s: i64,
    /// Millicore·seconds.
    pub cpu: u128,
    /// Byte·seconds.
    pub memory: u128,
    /// Milli-GPU·seconds.
    pub gpu: u128,
    /// Other resources by Kubernetes name: count·seconds.
    pub extended: BTreeMap<String, u128>,
}

/// The key of a job record: its end (8 bytes, big-endian, so records are
/// in end order), then the job's name, NUL, and a sequence number (a job
/// may have two records ending in the same second).
fn job_key(rec: &JobRecord, seq: u32) -> Vec<u8> {
    let mut k = (rec.end_s as u64 ^ (1 << 63)).to_be_bytes().to_vec();
    k.extend_from_slice(rec.job.as_bytes());
    k.push(0);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// One bind of a journal intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalBind {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The pod's UID: the bind's precondition.
    pub uid: String,
    pub node: String,
    /// GPU device indices on the node.
    pub gpus: Vec<u32>,
}

/// Where an intent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JournalState {
    /// Written before the binds are issued; not known to be complete.
    Open,
    /// Being undone: the bound members are being evicted.
    RollingBack,
}

/// A gang's binds, written before any is issued and removed when all are
/// confirmed or undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRecord {
    /// The gang (`namespace/name` of its PodGroup or job).
    pub gang: String,
    /// When the intent was written, seconds.
    pub opened_s: i64,
    pub binds: Vec<JournalBind>,
    pub state: JournalState,
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    let out = vec![RECORD_VERSION];
    // Serializing these plain structs into a Vec cannot fail: postcard
    // fails only for unsupported types or a full fixed buffer.
    match postcard::to_extend(v, out) {
        Ok(v) => v,
        Err(e) => unreachable!("postcard into a Vec: {e}"),
    }
}

fn decode<T: DeserializeOwned>(
    path: &std::path::Path,
    table: Table,
    key: &[u8],
    bytes: &[u8],
) -> Result<T, StoreError> {
    let err = |detail: String| StoreError::Record {
        path: path.to_path_buf(),
        table: table.name(),
        key: String::from_utf8_lossy(key).into_owned(),
        detail,
    };
    match bytes.split_first() {
        None => Err(err("empty value".into())),
        Some((&RECORD_VERSION, rest)) => {
            postcard::from_bytes(rest).map_err(|e| err(format!("cannot decode the record: {e}")))
        }
        Some((v, _)) => Err(err(format!(
            "record version {v}, this Trainyard reads version {RECORD_VERSION}"
        ))),
    }
}

/// Order-preserving bytes of a signed time.
fn time_bytes(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

fn time_of(b: &[u8]) -> Option<i64> {
    let a: [u8; 8] = b.try_into().ok()?;
    Some((u64::from_be_bytes(a) ^ (1 << 63)) as i64)
}

impl UsageKey {
    /// `queue \0 user \0 start`: one queue's buckets are one range, and a
    /// user's buckets are in time order. Names never hold NUL (queue paths
    /// and user names are Kubernetes names); one that does is refused by
    /// [`Batch::usage`].
    pub fn encode(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.queue.len() + self.user.len() + 10);
        k.extend_from_slice(self.queue.as_bytes());
        k.push(0);
        k.extend_from_slice(self.user.as_bytes());
        k.push(0);
        k.extend_from_slice(&time_bytes(self.start_s));
        k
    }

    pub fn decode(k: &[u8]) -> Option<UsageKey> {
        let (names, time) = k.split_at_checked(k.len().checked_sub(8)?)?;
        let names = names.strip_suffix(&[0])?;
        let mut it = names.splitn(2, |&b| b == 0);
        let queue = std::str::from_utf8(it.next()?).ok()?.to_string();
        let user = std::str::from_utf8(it.next()?).ok()?.to_string();
        Some(UsageKey {
            queue,
            user,
            start_s: time_of(time)?,
        })
    }
}

/// The ops of one commit, built with typed calls.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Batch {
    pub ops: Vec<Op>,
}

/// A name that cannot be part of a key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{what} {name:?} holds a NUL byte and cannot be stored")]
pub struct BadName {
    pub what: &'static str,
    pub name: String,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Sets one usage bucket (replacing what the store had for it).
    pub fn usage(&mut self, key: &UsageKey, rec: &UsageRecord) -> Result<&mut Self, BadName> {
        for (what, name) in [("queue", &key.queue), ("user", &key.user)] {
            if name.as_bytes().contains(&0) {
                return Err(BadName {
                    what,
                    name: name.clone(),
                });
            }
        }
        self.ops.push(Op::Put {
            table: Table::Usage,
            key: key.encode(),
            value: encode(rec),
        });
        Ok(self)
    }

    pub fn remove_usage(&mut self, key: &UsageKey) -> &mut Self {
        self.ops.push(Op::Delete {
            table: Table::Usage,
            key: key.encode(),
        });
        self
    }

    pub fn gang(&mut self, gang: &str, rec: &GangRecord) -> &mut Self {
        self.ops.push(Op::Put {
            table: Table::Gangs,
            key: gang.as_bytes().to_vec(),
            value: encode(rec),
        });
        self
    }

    pub fn remove_gang(&mut self, gang: &str) -> &mut Self {
        self.ops.push(Op::Delete {
            table: Table::Gangs,
            key: gang.as_bytes().to_vec(),
        });
        self
    }

    /// Adds job record `rec`; `seq` tells apart records of one job that
    /// end in the same second.
    pub fn job(&mut self, rec: &JobRecord, seq: u32) -> Result<&mut Self, BadName> {
        if rec.job.as_bytes().contains(&0) {
            return Err(BadName {
                what: "job",
                name: rec.job.clone(),
            });
        }
        self.ops.push(Op::Put {
            table: Table::Jobs,
            key: job_key(rec, seq),
            value: encode(rec),
        });
        Ok(self)
    }

    /// Writes (or rewrites) intent `id`.
    pub fn intent(&mut self, id: u64, rec: &JournalRecord) -> &mut Self {
        self.ops.push(Op::Put {
            table: Table::Journal,
            key: id.to_be_bytes().to_vec(),
            value: encode(rec),
        });
        self
    }

    /// Removes intent `id`: its binds were all confirmed or all undone.
    pub fn close_intent(&mut self, id: u64) -> &mut Self {
        self.ops.push(Op::Delete {
            table: Table::Journal,
            key: id.to_be_bytes().to_vec(),
        });
        self
    }
}

/// Typed reads and writes, for every [`Store`].
pub trait Records: Store {
    /// Commits a batch.
    fn apply(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.commit(&batch.ops)
    }

    /// Usage buckets of one queue (every queue when `None`), in key
    /// order: queue, user, time.
    fn usage(&self, queue: Option<&str>) -> Result<Vec<(UsageKey, UsageRecord)>, StoreError> {
        let prefix = match queue {
            Some(q) => {
                let mut p = q.as_bytes().to_vec();
                p.push(0);
                p
            }
            None => Vec::new(),
        };
        let mut out = Vec::new();
        for (k, v) in self.scan(Table::Usage, &prefix)? {
            let key = UsageKey::decode(&k).ok_or_else(|| StoreError::Record {
                path: self.path().to_path_buf(),
                table: Table::Usage.name(),
                key: String::from_utf8_lossy(&k).into_owned(),
                detail: "not a usage key (queue, NUL, user, NUL, 8-byte time)".into(),
            })?;
            out.push((key, decode(self.path(), Table::Usage, &k, &v)?));
        }
        Ok(out)
    }

    /// Every pending gang's record, by gang name.
    fn gangs(&self) -> Result<BTreeMap<String, GangRecord>, StoreError> {
        let mut out = BTreeMap::new();
        for (k, v) in self.scan(Table::Gangs, &[])? {
            let name = String::from_utf8(k.clone()).map_err(|_| StoreError::Record {
                path: self.path().to_path_buf(),
                table: Table::Gangs.name(),
                key: String::from_utf8_lossy(&k).into_owned(),
                detail: "the gang name is not UTF-8".into(),
            })?;
            out.insert(name, decode(self.path(), Table::Gangs, &k, &v)?);
        }
        Ok(out)
    }

    /// The job records that end at or after `from_s`, in end order.
    fn jobs(&self, from_s: i64) -> Result<Vec<JobRecord>, StoreError> {
        let mut out = Vec::new();
        let from = (from_s as u64) ^ (1 << 63);
        for (k, v) in self.scan(Table::Jobs, &[])? {
            let end = <[u8; 8]>::try_from(k.get(..8).unwrap_or_default())
                .map(u64::from_be_bytes)
                .map_err(|_| StoreError::Record {
                    path: self.path().to_path_buf(),
                    table: Table::Jobs.name(),
                    key: format!("{k:?}"),
                    detail: "a job key starts with its 8-byte end".into(),
                })?;
            if end < from {
                continue;
            }
            out.push(decode(self.path(), Table::Jobs, &k, &v)?);
        }
        Ok(out)
    }

    /// Drops the job records that ended before `before_s`; how many.
    fn drop_jobs_before(&mut self, before_s: i64) -> Result<usize, StoreError> {
        let limit = (before_s as u64) ^ (1 << 63);
        let mut batch = Batch::default();
        for (k, _) in self.scan(Table::Jobs, &[])? {
            let end = <[u8; 8]>::try_from(k.get(..8).unwrap_or_default()).map(u64::from_be_bytes);
            if end.is_ok_and(|e| e < limit) {
                batch.ops.push(Op::Delete {
                    table: Table::Jobs,
                    key: k,
                });
            }
        }
        let n = batch.ops.len();
        self.apply(&batch)?;
        Ok(n)
    }

    /// The journal's intents still open, by id.
    fn journal(&self) -> Result<BTreeMap<u64, JournalRecord>, StoreError> {
        let mut out = BTreeMap::new();
        for (k, v) in self.scan(Table::Journal, &[])? {
            let id = <[u8; 8]>::try_from(k.as_slice())
                .map(u64::from_be_bytes)
                .map_err(|_| StoreError::Record {
                    path: self.path().to_path_buf(),
                    table: Table::Journal.name(),
                    key: format!("{k:?}"),
                    detail: "an intent id is 8 bytes".into(),
                })?;
            out.insert(id, decode(self.path(), Table::Journal, &k, &v)?);
        }
        Ok(out)
    }

    /// Merges the usage buckets that start before `before_s` into buckets
    /// `width_s` wide (aligned to multiples of it), and drops those that
    /// end before `drop_before_s`: retention stays bounded whatever the
    /// cycle rate. Totals are kept exactly. One commit.
    fn compact_usage(
        &mut self,
        before_s: i64,
        width_s: u32,
        drop_before_s: i64,
    ) -> Result<CompactStats, StoreError> {
        let w = i64::from(width_s.max(1));
        let mut merged: BTreeMap<UsageKey, UsageRecord> = BTreeMap::new();
        let mut batch = Batch::default();
        let mut stats = CompactStats::default();
        for (key, rec) in self.usage(None)? {
            if key.start_s + i64::from(rec.width_s) <= drop_before_s {
                batch.remove_usage(&key);
                stats.dropped += 1;
                continue;
            }
            if key.start_s >= before_s || rec.width_s >= width_s {
                continue;
            }
            let coarse = UsageKey {
                start_s: key.start_s.div_euclid(w) * w,
                ..key.clone()
            };
            let m = merged.entry(coarse.clone()).or_insert_with(|| UsageRecord {
                width_s,
                ..UsageRecord::default()
            });
            m.add(&rec);
            if coarse != key {
                batch.remove_usage(&key);
            }
            stats.merged += 1;
        }
        // A bucket may already exist at a coarse key (an earlier
        // compaction's, or one at least as wide that was left as it is):
        // add it in, unless it is one of the fine buckets just merged (they
        // are narrower) or was just dropped. The bucket written covers both.
        for (coarse, m) in &mut merged {
            if let Some(v) = self.get(Table::Usage, &coarse.encode())? {
                let old: UsageRecord = decode(self.path(), Table::Usage, &coarse.encode(), &v)?;
                let dropped = coarse.start_s + i64::from(old.width_s) <= drop_before_s;
                if old.width_s >= width_s && !dropped {
                    m.width_s = m.width_s.max(old.width_s);
                    m.add(&old);
                }
            }
            // Names came out of keys the store holds, so they have no NUL.
            let _ = batch.usage(coarse, m);
        }
        self.apply(&batch)?;
        Ok(stats)
    }
}

impl<S: Store + ?Sized> Records for S {}

/// What [`Records::compact_usage`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactStats {
    /// Fine buckets merged into coarse ones.
    pub merged: usize,
    /// Buckets dropped as older than the window.
    pub dropped: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_keys_round_trip_and_sort_by_queue_user_time() {
        let keys = [
            UsageKey {
                queue: "a".into(),
                user: "".into(),
                start_s: -5,
            },
            UsageKey {
                queue: "a".into(),
                user: "".into(),
                start_s: 7,
            },
            UsageKey {
                queue: "a".into(),
                user: "bob".into(),
                start_s: 0,
            },
            UsageKey {
                queue: "a/b".into(),
                user: "".into(),
                start_s: 0,
            },
        ];
        let enc: Vec<Vec<u8>> = keys.iter().map(UsageKey::encode).collect();
        let mut sorted = enc.clone();
        sorted.sort();
        assert_eq!(enc, sorted);
        for (k, e) in keys.iter().zip(&enc) {
            assert_eq!(UsageKey::decode(e).as_ref(), Some(k));
        }
        assert_eq!(UsageKey::decode(b"short"), None);
    }

    #[test]
    fn a_value_of_another_version_is_refused_with_its_place() {
        let mut v = encode(&GangRecord::default());
        v[0] = 9;
        let e = decode::<GangRecord>(std::path::Path::new("/s"), Table::Gangs, b"ns/g", &v)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "store /s: table gangs, key ns/g: record version 9, this Trainyard reads version 1"
        );
        let e = decode::<GangRecord>(std::path::Path::new("/s"), Table::Gangs, b"ns/g", &[1, 200])
            .unwrap_err();
        assert!(e.to_string().contains("cannot decode the record"), "{e}");
    }

    #[test]
    fn a_name_with_nul_is_refused() {
        let mut b = Batch::default();
        let e = b
            .usage(
                &UsageKey {
                    queue: "a\0b".into(),
                    user: "".into(),
                    start_s: 0,
                },
                &UsageRecord::default(),
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "queue \"a\\0b\" holds a NUL byte and cannot be stored"
        );
        assert!(b.is_empty());
    }
}
