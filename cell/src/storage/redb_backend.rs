//! The redb backend (default): one database file, three tables.

use std::path::Path;
use std::time::Duration;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Backend, BackendError, BackendResult, WriteSet};

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const SM: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sm");

/// A cell's storage in one redb file.
pub struct RedbBackend {
    db: Database,
}

fn err(context: &'static str) -> impl Fn(redb::Error) -> BackendError {
    move |e| BackendError::new(context, e)
}

impl RedbBackend {
    /// Open or create the database at `path`. Retries briefly while a previous owner in this
    /// process is still releasing it (TRAPS.md 14).
    pub fn open(path: &Path) -> BackendResult<Self> {
        let mut attempt = 0;
        let db = loop {
            match Database::create(path) {
                Ok(db) => break db,
                Err(redb::DatabaseError::DatabaseAlreadyOpen) if attempt < 50 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(BackendError::new("open redb", e)),
            }
        };
        let txn = db
            .begin_write()
            .map_err(|e| BackendError::new("open redb", e))?;
        {
            txn.open_table(LOG)
                .map_err(|e| BackendError::new("open log table", e))?;
            txn.open_table(META)
                .map_err(|e| BackendError::new("open meta table", e))?;
            txn.open_table(SM)
                .map_err(|e| BackendError::new("open sm table", e))?;
        }
        txn.commit()
            .map_err(|e| BackendError::new("open redb", e))?;
        Ok(RedbBackend { db })
    }

    fn write(
        &self,
        durable: bool,
        context: &'static str,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
    ) -> BackendResult<()> {
        let mut txn = self
            .db
            .begin_write()
            .map_err(|e| BackendError::new(context, e))?;
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        txn.set_durability(durability)
            .map_err(|e| BackendError::new(context, e))?;
        f(&txn).map_err(err(context))?;
        txn.commit().map_err(|e| BackendError::new(context, e))
    }

    fn read<T>(
        &self,
        context: &'static str,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<T, redb::Error>,
    ) -> BackendResult<T> {
        let txn = self
            .db
            .begin_read()
            .map_err(|e| BackendError::new(context, e))?;
        f(&txn).map_err(err(context))
    }
}

impl Backend for RedbBackend {
    fn log_append(&self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        self.write(true, "append log", |txn| {
            let mut table = txn.open_table(LOG)?;
            for (index, bytes) in entries {
                table.insert(*index, bytes.as_slice())?;
            }
            Ok(())
        })
    }

    fn log_range(&self, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        if from >= to {
            return Ok(Vec::new());
        }
        self.read("read log", |txn| {
            let table = txn.open_table(LOG)?;
            let mut out = Vec::new();
            for row in table.range(from..to)? {
                let (k, v) = row?;
                out.push((k.value(), v.value().to_vec()));
            }
            Ok(out)
        })
    }

    fn log_last(&self) -> BackendResult<Option<(u64, Vec<u8>)>> {
        self.read("read last log", |txn| {
            let table = txn.open_table(LOG)?;
            Ok(table.last()?.map(|(k, v)| (k.value(), v.value().to_vec())))
        })
    }

    fn log_truncate(&self, from: u64) -> BackendResult<()> {
        self.write(true, "truncate log", |txn| {
            let mut table = txn.open_table(LOG)?;
            table.retain_in(from.., |_, _| false)?;
            Ok(())
        })
    }

    fn log_purge(&self, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()> {
        self.write(true, "purge log", |txn| {
            let mut table = txn.open_table(LOG)?;
            table.retain_in(..=upto, |_, _| false)?;
            let mut meta_table = txn.open_table(META)?;
            meta_table.insert(meta.0, meta.1.as_slice())?;
            Ok(())
        })
    }

    fn meta_get(&self, name: &str) -> BackendResult<Option<Vec<u8>>> {
        self.read("read meta", |txn| {
            let table = txn.open_table(META)?;
            Ok(table.get(name)?.map(|v| v.value().to_vec()))
        })
    }

    fn meta_put(&self, name: &str, value: Vec<u8>) -> BackendResult<()> {
        self.write(true, "write meta", |txn| {
            let mut table = txn.open_table(META)?;
            table.insert(name, value.as_slice())?;
            Ok(())
        })
    }

    fn sm_get(&self, key: &[u8]) -> BackendResult<Option<Vec<u8>>> {
        self.read("read state", |txn| {
            let table = txn.open_table(SM)?;
            Ok(table.get(key)?.map(|v| v.value().to_vec()))
        })
    }

    fn sm_scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> BackendResult<Vec<(Vec<u8>, Vec<u8>)>> {
        if start >= end {
            return Ok(Vec::new());
        }
        self.read("scan state", |txn| {
            let table = txn.open_table(SM)?;
            let mut out = Vec::new();
            for row in table.range(start..end)?.take(limit) {
                let (k, v) = row?;
                out.push((k.value().to_vec(), v.value().to_vec()));
            }
            Ok(out)
        })
    }

    fn sm_commit(&self, writes: WriteSet, durable: bool) -> BackendResult<()> {
        self.write(durable, "commit state", |txn| {
            let mut table = txn.open_table(SM)?;
            for (key, value) in &writes {
                match value {
                    Some(v) => table.insert(key.as_slice(), v.as_slice())?,
                    None => table.remove(key.as_slice())?,
                };
            }
            Ok(())
        })
    }

    fn sm_replace(&self, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> BackendResult<()> {
        self.write(true, "install state", |txn| {
            txn.delete_table(SM)?;
            let mut table = txn.open_table(SM)?;
            for (k, v) in &pairs {
                table.insert(k.as_slice(), v.as_slice())?;
            }
            Ok(())
        })
    }

    fn sm_dump(&self) -> BackendResult<Vec<(Vec<u8>, Vec<u8>)>> {
        self.read("dump state", |txn| {
            let table = txn.open_table(SM)?;
            let mut out = Vec::new();
            for row in table.iter()? {
                let (k, v) = row?;
                out.push((k.value().to_vec(), v.value().to_vec()));
            }
            Ok(out)
        })
    }
}
