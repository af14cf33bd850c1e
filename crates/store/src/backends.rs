//! The two engines behind [`Store`]: redb (one file, one table per
//! [`Table`]) and sled (a directory, one tree, keys prefixed by the
//! table's tag). Neither decodes values: that is [`crate::records`].
//!
//! Both engines are asked to open whatever file they are given, and a
//! damaged file must come back as an error, never as a panic (sled 0.34
//! panics on some damage): opening and reading run under
//! `catch_unwind`, and a panic becomes [`StoreError::Corrupt`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, TableDefinition};

use crate::{Backend, Entries, Op, Store, StoreError, Table};

/// Runs `f`, turning a panic inside an engine into a `Corrupt` error.
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the engine panicked".into());
            Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("the engine failed while reading it: {detail}"),
            })
        }
    }
}

fn def(t: Table) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(t.name())
}

/// The redb backend: one file.
pub struct RedbStore {
    path: PathBuf,
    db: redb::Database,
}

impl RedbStore {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let p = path.to_path_buf();
        let err = |e: &dyn std::fmt::Display| StoreError::Corrupt {
            path: p.clone(),
            detail: e.to_string(),
        };
        guarded(path, || {
            let db = redb::Database::create(path).map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Open {
                    path: p.clone(),
                    detail: "another process has it open".into(),
                },
                redb::DatabaseError::Storage(redb::StorageError::Io(io)) => StoreError::Open {
                    path: p.clone(),
                    detail: io.to_string(),
                },
                other => err(&other),
            })?;
            // redb checks page checksums only when it recovers from an
            // unclean stop: check them at every open, so damage from
            // elsewhere (disk, a copy) is found before a record is read.
            let mut db = db;
            match db.check_integrity() {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(store = %p.display(), "redb found damage and repaired it")
                }
                Err(e) => return Err(err(&e)),
            }
            // Every table exists from the start, so reads never meet a
            // missing one.
            let w = db.begin_write().map_err(|e| err(&e))?;
            for t in Table::ALL {
                w.open_table(def(t)).map_err(|e| err(&e))?;
            }
            w.commit().map_err(|e| err(&e))?;
            Ok(RedbStore {
                path: path.to_path_buf(),
                db,
            })
        })
    }

    fn fail(&self, what: &str, e: impl std::fmt::Display) -> StoreError {
        io_error(&self.path, what, e)
    }
}

impl Store for RedbStore {
    fn backend(&self) -> Backend {
        Backend::Redb
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn commit(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        let w = self
            .db
            .begin_write()
            .map_err(|e| self.fail("begin write", e))?;
        for op in ops {
            match op {
                Op::Put { table, key, value } => {
                    let mut t = w
                        .open_table(def(*table))
                        .map_err(|e| self.fail("open", e))?;
                    t.insert(key.as_slice(), value.as_slice())
                        .map_err(|e| self.fail("insert", e))?;
                }
                Op::Delete { table, key } => {
                    let mut t = w
                        .open_table(def(*table))
                        .map_err(|e| self.fail("open", e))?;
                    t.remove(key.as_slice())
                        .map_err(|e| self.fail("remove", e))?;
                }
            }
        }
        // Default durability: persistent when commit returns.
        w.commit().map_err(|e| self.fail("commit", e))
    }
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        guarded(&self.path, || {
            let r = self
                .db
                .begin_read()
                .map_err(|e| self.fail("begin read", e))?;
            let t = r.open_table(def(table)).map_err(|e| self.fail("open", e))?;
            let v = t.get(key).map_err(|e| self.fail("get", e))?;
            Ok(v.map(|v| v.value().to_vec()))
        })
    }
    fn scan(&self, table: Table, prefix: &[u8]) -> Result<Entries, StoreError> {
        guarded(&self.path, || {
            let r = self
                .db
                .begin_read()
                .map_err(|e| self.fail("begin read", e))?;
            let t = r.open_table(def(table)).map_err(|e| self.fail("open", e))?;
            let mut out = Vec::new();
            for item in t.range(prefix..).map_err(|e| self.fail("range", e))? {
                let (k, v) = item.map_err(|e| self.fail("range", e))?;
                if !k.value().starts_with(prefix) {
                    break;
                }
                out.push((k.value().to_vec(), v.value().to_vec()));
            }
            Ok(out)
        })
    }
    fn size_on_disk(&self) -> Result<u64, StoreError> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|e| self.fail("size", e))
    }
    fn shrink(&mut self) -> Result<(), StoreError> {
        self.db
            .compact()
            .map(|_| ())
            .map_err(|e| self.fail("compact", e))
    }
}

/// The sled backend: a directory, one tree.
pub struct SledStore {
    path: PathBuf,
    db: sled::Db,
}

fn tagged(table: Table, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(table.tag());
    k.extend_from_slice(key);
    k
}

impl SledStore {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let p = path.to_path_buf();
        guarded(path, || {
            // sled's flusher thread lets go of the file lock a moment after
            // the last handle of the same process is dropped: a reopen
            // right after a close waits for it, a bounded while (another
            // process holding the store is still refused, after it).
            let mut tries = 0;
            let opened = loop {
                match sled::Config::new().path(path).open() {
                    // sled reports it as `Other` with this text.
                    Err(sled::Error::Io(io))
                        if io.to_string().starts_with("could not acquire lock") && tries < 100 =>
                    {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    other => break other,
                }
            };
            let db = opened.map_err(|e| match e {
                sled::Error::Io(io) => StoreError::Open {
                    path: p.clone(),
                    detail: io.to_string(),
                },
                other => StoreError::Corrupt {
                    path: p.clone(),
                    detail: other.to_string(),
                },
            })?;
            // sled reads lazily: walk everything once so damage shows now,
            // not in the middle of a cycle.
            for item in db.iter() {
                item.map_err(|e| StoreError::Corrupt {
                    path: p.clone(),
                    detail: e.to_string(),
                })?;
            }
            Ok(SledStore {
                path: path.to_path_buf(),
                db,
            })
        })
    }

    fn fail(&self, what: &str, e: impl std::fmt::Display) -> StoreError {
        io_error(&self.path, what, e)
    }
}

impl Store for SledStore {
    fn backend(&self) -> Backend {
        Backend::Sled
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn commit(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        for op in ops {
            match op {
                Op::Put { table, key, value } => {
                    batch.insert(tagged(*table, key), value.as_slice());
                }
                Op::Delete { table, key } => batch.remove(tagged(*table, key)),
            }
        }
        // One tree: a batch is atomic; flush makes it durable.
        self.db
            .apply_batch(batch)
            .map_err(|e| self.fail("apply batch", e))?;
        self.db.flush().map_err(|e| self.fail("flush", e))?;
        Ok(())
    }
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        guarded(&self.path, || {
            self.db
                .get(tagged(table, key))
                .map(|v| v.map(|v| v.to_vec()))
                .map_err(|e| self.fail("get", e))
        })
    }
    fn scan(&self, table: Table, prefix: &[u8]) -> Result<Entries, StoreError> {
        guarded(&self.path, || {
            let mut out = Vec::new();
            for item in self.db.scan_prefix(tagged(table, prefix)) {
                let (k, v) = item.map_err(|e| self.fail("scan", e))?;
                out.push((k[1..].to_vec(), v.to_vec()));
            }
            Ok(out)
        })
    }
    fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db.size_on_disk().map_err(|e| self.fail("size", e))
    }
    fn shrink(&mut self) -> Result<(), StoreError> {
        // sled rewrites and frees its segments in the background; a flush
        // is all it takes to make that visible.
        self.db
            .flush()
            .map(|_| ())
            .map_err(|e| self.fail("flush", e))
    }
}

/// An engine's error as the store's: the file, what was being done, why.
fn io_error(path: &Path, what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        detail: format!("{what}: {e}"),
    }
}
