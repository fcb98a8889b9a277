//! The sled backend (selectable): one sled database, three trees. Every call is synchronous
//! and runs on the blocking pool, away from the tokio workers (TRAPS.md 11 and 13).

use std::path::Path;

use sled::{Batch, Db, Tree};

use super::{Backend, BackendError, BackendResult, SmRead, WriteSet};

/// A cell's storage in one sled database.
pub struct SledBackend {
    db: Db,
    log: Tree,
    meta: Tree,
    sm: Tree,
}

fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn index_of(key: &[u8]) -> u64 {
    let bytes: [u8; 8] = key.try_into().expect("log keys are 8 bytes");
    u64::from_be_bytes(bytes)
}

impl SledBackend {
    /// Open or create the database at `path`.
    pub fn open(path: &Path) -> BackendResult<Self> {
        let config = sled::Config::new()
            .path(path)
            .mode(sled::Mode::HighThroughput);
        // A previous owner in this process may still be releasing the file lock (TRAPS.md
        // 14): retry for a few seconds before giving up.
        let mut attempt = 0;
        let db = loop {
            match config.open() {
                Ok(db) => break db,
                Err(sled::Error::Io(e))
                    if e.to_string().contains("acquire lock") && attempt < 50 =>
                {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(e) => return Err(BackendError::new("open sled", e)),
            }
        };
        let tree = |name: &str| {
            db.open_tree(name)
                .map_err(|e| BackendError::new("open tree", e))
        };
        let (log, meta, sm) = (tree("log")?, tree("meta")?, tree("sm")?);
        Ok(SledBackend { db, log, meta, sm })
    }

    /// sled flushes every 500 ms on its own (TRAPS.md 12): an acknowledged write must not wait
    /// for that, so durable writes flush the whole database before returning.
    fn flush(&self, context: &'static str) -> BackendResult<()> {
        self.db
            .flush()
            .map(|_| ())
            .map_err(|e| BackendError::new(context, e))
    }
}

impl Backend for SledBackend {
    fn log_append(&self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        let mut batch = Batch::default();
        for (index, bytes) in entries {
            batch.insert(&index_key(*index), bytes.as_slice());
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| BackendError::new("append log", e))?;
        self.flush("append log")
    }

    fn log_range(&self, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        if from >= to {
            return Ok(Vec::new());
        }
        self.log
            .range(index_key(from)..index_key(to))
            .map(|row| {
                let (k, v) = row.map_err(|e| BackendError::new("read log", e))?;
                Ok((index_of(&k), v.to_vec()))
            })
            .collect()
    }

    fn log_last(&self) -> BackendResult<Option<(u64, Vec<u8>)>> {
        let last = self
            .log
            .last()
            .map_err(|e| BackendError::new("read last log", e))?;
        Ok(last.map(|(k, v)| (index_of(&k), v.to_vec())))
    }

    fn log_truncate(&self, from: u64) -> BackendResult<()> {
        let mut batch = Batch::default();
        for row in self.log.range(index_key(from)..) {
            let (k, _) = row.map_err(|e| BackendError::new("truncate log", e))?;
            batch.remove(k);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| BackendError::new("truncate log", e))?;
        self.flush("truncate log")
    }

    fn log_purge(&self, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()> {
        // Record the purge point first: a crash between the two leaves extra entries below
        // it, which openraft ignores, never a hole above it.
        self.meta
            .insert(meta.0, meta.1)
            .map_err(|e| BackendError::new("purge log", e))?;
        self.flush("purge log")?;
        let mut batch = Batch::default();
        for row in self.log.range(..=index_key(upto)) {
            let (k, _) = row.map_err(|e| BackendError::new("purge log", e))?;
            batch.remove(k);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| BackendError::new("purge log", e))?;
        self.flush("purge log")
    }

    fn meta_get(&self, name: &str) -> BackendResult<Option<Vec<u8>>> {
        let value = self
            .meta
            .get(name)
            .map_err(|e| BackendError::new("read meta", e))?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn meta_put(&self, name: &str, value: Vec<u8>) -> BackendResult<()> {
        self.meta
            .insert(name, value)
            .map_err(|e| BackendError::new("write meta", e))?;
        self.flush("write meta")
    }

    fn sm_reader(&self) -> BackendResult<Box<dyn SmRead + '_>> {
        Ok(Box::new(SledReader { tree: &self.sm }))
    }

    fn sm_commit(&self, writes: WriteSet, durable: bool) -> BackendResult<()> {
        let mut batch = Batch::default();
        for (key, value) in writes {
            match value {
                Some(v) => batch.insert(key, v),
                None => batch.remove(key),
            }
        }
        self.sm
            .apply_batch(batch)
            .map_err(|e| BackendError::new("commit state", e))?;
        if durable {
            self.flush("commit state")
        } else {
            Ok(())
        }
    }

    fn sm_replace(&self, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> BackendResult<()> {
        let mut batch = Batch::default();
        for row in self.sm.iter() {
            let (k, _) = row.map_err(|e| BackendError::new("install state", e))?;
            batch.remove(k);
        }
        for (k, v) in pairs {
            batch.insert(k, v);
        }
        self.sm
            .apply_batch(batch)
            .map_err(|e| BackendError::new("install state", e))?;
        self.flush("install state")
    }

    fn sm_dump(&self) -> BackendResult<Vec<(Vec<u8>, Vec<u8>)>> {
        self.sm
            .iter()
            .map(|row| {
                let (k, v) = row.map_err(|e| BackendError::new("dump state", e))?;
                Ok((k.to_vec(), v.to_vec()))
            })
            .collect()
    }
}

/// Reads of the state-machine tree. sled has no read snapshots; apply is the only writer
/// and runs serially, so reads inside one apply or query see one state.
struct SledReader<'a> {
    tree: &'a Tree,
}

impl SmRead for SledReader<'_> {
    fn get(&self, key: &[u8]) -> BackendResult<Option<Vec<u8>>> {
        let value = self
            .tree
            .get(key)
            .map_err(|e| BackendError::new("read state", e))?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> BackendResult<Vec<(Vec<u8>, Vec<u8>)>> {
        if start >= end {
            return Ok(Vec::new());
        }
        self.tree
            .range(start..end)
            .take(limit)
            .map(|row| {
                let (k, v) = row.map_err(|e| BackendError::new("scan state", e))?;
                Ok((k.to_vec(), v.to_vec()))
            })
            .collect()
    }
}
