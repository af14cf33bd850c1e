//! Trainyard's persisted scheduler state: what no Kubernetes object holds
//! (usage history per queue and user, pending gangs' places, the gang
//! bind journal) kept in an embedded store on the leader's disk.
//!
//! Rule: this crate alone knows the on-disk format. It has its own
//! versioned record types ([`records`]), never the model's serde derives,
//! and never imports the scheduling core.
//!
//! One trait, [`Store`], with two backends behind it: [`redb`] (the
//! default; stable, ACID, maintained) and [`sled`] (the design card's
//! choice; 0.34 is from 2021). Both keep the same logical tables
//! ([`Table`]); a commit ([`Store::commit`]) applies a list of [`Op`]s
//! atomically and durably. Typed reads and writes over those tables are
//! [`Records`], provided for every store.
//!
//! Opening ([`open`]) checks the schema version the store records: a
//! store written by a newer Trainyard is refused with a message that says
//! so, never misread. [`open_or_recover`] is the service's way in: a
//! store that cannot be opened is moved aside and a new one created, and
//! the [`Recovery`] says what happened, for a metric and an Event.

mod backends;
pub mod records;

use std::path::{Path, PathBuf};

pub use backends::{RedbStore, SledStore};
pub use records::{
    Batch, CompactStats, GangRecord, JobRecord, JournalBind, JournalRecord, JournalState, Records,
    UsageKey, UsageRecord,
};

/// The schema version this build writes and reads. 2 added the `jobs`
/// table (an older store is migrated at open: the table starts empty).
pub const SCHEMA_VERSION: u32 = 2;

/// The logical tables, the same in every backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// The store's own facts: schema version, format name.
    Meta,
    /// Usage history: one record per (queue, user, time bucket).
    Usage,
    /// Pending gangs: enqueue time, starvation, backoff, nomination.
    Gangs,
    /// The gang bind journal: one intent per gang being bound.
    Journal,
    /// Accounting: one record per job, from when it first held something
    /// until it held nothing (schema version 2).
    Jobs,
}

impl Table {
    pub const ALL: [Table; 5] = [
        Table::Meta,
        Table::Usage,
        Table::Gangs,
        Table::Journal,
        Table::Jobs,
    ];

    /// The table's name on disk (redb table name; sled key prefix).
    pub fn name(self) -> &'static str {
        match self {
            Table::Meta => "meta",
            Table::Usage => "usage",
            Table::Gangs => "gangs",
            Table::Journal => "journal",
            Table::Jobs => "jobs",
        }
    }

    /// One byte that prefixes the table's keys where a backend keeps all
    /// tables in one key space (sled).
    pub(crate) fn tag(self) -> u8 {
        match self {
            Table::Meta => b'm',
            Table::Usage => b'u',
            Table::Gangs => b'g',
            Table::Journal => b'j',
            Table::Jobs => b'J',
        }
    }
}

/// One change of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        table: Table,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        table: Table,
        key: Vec<u8>,
    },
}

/// The embedded engine behind a [`Store`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// redb: the default (docs/persistence.md says why).
    #[default]
    Redb,
    /// sled 0.34.
    Sled,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Redb => "redb",
            Backend::Sled => "sled",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "redb" => Ok(Backend::Redb),
            "sled" => Ok(Backend::Sled),
            other => Err(format!(
                "unknown store backend {other:?}: expected \"redb\" or \"sled\""
            )),
        }
    }
}

/// What can go wrong with a store. Every variant names the store's path.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: cannot open: {detail}")]
    Open { path: PathBuf, detail: String },
    #[error("store {path}: the file is damaged: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "store {path}: written with schema version {found}, this Trainyard reads up to {supported}; upgrade Trainyard or move the store aside (it is rebuilt from the API server and the last checkpoint)"
    )]
    NewerSchema {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("store {path}: not a Trainyard store ({detail})")]
    Foreign { path: PathBuf, detail: String },
    #[error("store {path}: table {table}, key {key}: {detail}")]
    Record {
        path: PathBuf,
        table: &'static str,
        key: String,
        detail: String,
    },
    #[error("store {path}: {detail}")]
    Io { path: PathBuf, detail: String },
}

/// (key, value) pairs of a scan, in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A key-value store with Trainyard's tables. Backends implement the
/// four raw operations; [`Records`] adds the typed ones.
pub trait Store: Send {
    /// Which engine this is.
    fn backend(&self) -> Backend;
    /// Where it lives.
    fn path(&self) -> &Path;
    /// Applies every op or none, durably: when this returns `Ok`, a crash
    /// of the process does not lose the commit.
    fn commit(&mut self, ops: &[Op]) -> Result<(), StoreError>;
    /// One value.
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Every (key, value) of a table whose key starts with `prefix`, in
    /// key order.
    fn scan(&self, table: Table, prefix: &[u8]) -> Result<Entries, StoreError>;
    /// Bytes the store takes on disk.
    fn size_on_disk(&self) -> Result<u64, StoreError>;
    /// Gives back to the file system the space that deleted records left
    /// (redb: `compact`, which rewrites the file's free pages away; sled
    /// reclaims its segments by itself). Slow: run it after a usage
    /// compaction, not every cycle.
    fn shrink(&mut self) -> Result<(), StoreError>;
}

const FORMAT_KEY: &[u8] = b"format";
const FORMAT: &[u8] = b"trainyard-store";
const SCHEMA_KEY: &[u8] = b"schema";

/// Opens (or creates) the store at `path` and checks its schema version.
pub fn open(path: &Path, backend: Backend) -> Result<Box<dyn Store>, StoreError> {
    let mut store: Box<dyn Store> = match backend {
        Backend::Redb => Box::new(RedbStore::open(path)?),
        Backend::Sled => Box::new(SledStore::open(path)?),
    };
    check_schema(store.as_mut())?;
    // Read every record once: damage shows at open, where the service
    // can move the store aside, not in the middle of a cycle.
    store.usage(None)?;
    store.gangs()?;
    store.journal()?;
    store.jobs(i64::MIN)?;
    Ok(store)
}

/// Stamps a new store; checks an existing one's format and version.
fn check_schema(store: &mut dyn Store) -> Result<(), StoreError> {
    let path = store.path().to_path_buf();
    let format = store.get(Table::Meta, FORMAT_KEY)?;
    let schema = store.get(Table::Meta, SCHEMA_KEY)?;
    match (format, schema) {
        (None, None) => {
            // A fresh store, unless some other table already has data.
            for t in [Table::Usage, Table::Gangs, Table::Journal, Table::Jobs] {
                if !store.scan(t, &[])?.is_empty() {
                    return Err(StoreError::Foreign {
                        path,
                        detail: format!("table {} has data but no schema version", t.name()),
                    });
                }
            }
            store.commit(&[
                Op::Put {
                    table: Table::Meta,
                    key: FORMAT_KEY.to_vec(),
                    value: FORMAT.to_vec(),
                },
                Op::Put {
                    table: Table::Meta,
                    key: SCHEMA_KEY.to_vec(),
                    value: SCHEMA_VERSION.to_le_bytes().to_vec(),
                },
            ])
        }
        (Some(f), _) if f != FORMAT => Err(StoreError::Foreign {
            path,
            detail: format!("its format is {:?}", String::from_utf8_lossy(&f)),
        }),
        (_, None) => Err(StoreError::Foreign {
            path,
            detail: "it has no schema version".into(),
        }),
        (_, Some(v)) => {
            let Ok(bytes) = <[u8; 4]>::try_from(v.as_slice()) else {
                return Err(StoreError::Corrupt {
                    path,
                    detail: format!("the schema version is {} bytes, expected 4", v.len()),
                });
            };
            let found = u32::from_le_bytes(bytes);
            if found > SCHEMA_VERSION {
                return Err(StoreError::NewerSchema {
                    path,
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
            if found == 0 {
                return Err(StoreError::Corrupt {
                    path,
                    detail: "schema version 0 was never written".into(),
                });
            }
            // Migrations, each in one commit with its new version number.
            // 1 → 2: the `jobs` table is new and starts empty (the engines
            // create their tables at open), so only the number changes.
            if found < SCHEMA_VERSION {
                tracing::info!(store = %path.display(), from = found, to = SCHEMA_VERSION, "store schema migrated");
                store.commit(&[Op::Put {
                    table: Table::Meta,
                    key: SCHEMA_KEY.to_vec(),
                    value: SCHEMA_VERSION.to_le_bytes().to_vec(),
                }])?;
            }
            Ok(())
        }
    }
}

/// What [`open_or_recover`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// The store opened as it was.
    Opened,
    /// The store could not be read; it was moved to `moved_to` and a new,
    /// empty store created. `reason` is the error, for the log and Event.
    Rebuilt { moved_to: PathBuf, reason: String },
}

/// Opens the store; when that fails for any reason but a newer schema,
/// moves the file (or directory) aside to `<path>.broken-<n>` and creates a
/// new one. A store from a newer Trainyard is refused, not moved: a
/// downgrade must not throw away what the newer version kept.
pub fn open_or_recover(
    path: &Path,
    backend: Backend,
) -> Result<(Box<dyn Store>, Recovery), StoreError> {
    match open(path, backend) {
        Ok(s) => Ok((s, Recovery::Opened)),
        Err(e @ StoreError::NewerSchema { .. }) => Err(e),
        Err(e) => {
            let reason = e.to_string();
            tracing::error!(store = %path.display(), error = %reason, "store unreadable; moving it aside and starting a new one");
            let moved_to = aside(path)?;
            let s = open(path, backend)?;
            Ok((s, Recovery::Rebuilt { moved_to, reason }))
        }
    }
}

/// Renames `path` to the first free `<path>.broken-<n>`.
fn aside(path: &Path) -> Result<PathBuf, StoreError> {
    let io = |e: std::io::Error| StoreError::Io {
        path: path.to_path_buf(),
        detail: format!("cannot move the store aside: {e}"),
    };
    for n in 1..10_000u32 {
        let mut name = path.as_os_str().to_os_string();
        name.push(format!(".broken-{n}"));
        let to = PathBuf::from(name);
        if !to.exists() {
            std::fs::rename(path, &to).map_err(io)?;
            return Ok(to);
        }
    }
    Err(StoreError::Io {
        path: path.to_path_buf(),
        detail: "10,000 stores were already moved aside; remove some".into(),
    })
}
