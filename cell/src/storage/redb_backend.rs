//! The redb backend (default): two database files in the data directory.
//!
//! `log.redb` holds the Raft log and metadata; every commit there is durable
//! (`Durability::Immediate`). `sm.redb` holds the state machine; its commits are mostly
//! non-durable because the log is the source of truth. Keeping them apart means a log fsync
//! writes only log pages, not the state machine's dirty pages, which is most of the cost of
//! an acknowledged write.

use std::path::Path;
use std::time::Duration;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Backend, BackendError, BackendResult, SmRead, WriteSet};

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const SM: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sm");

/// A cell's storage in two redb files.
pub struct RedbBackend {
    log: Database,
    sm: Database,
}

fn err(context: &'static str) -> impl Fn(redb::Error) -> BackendError {
    move |e| BackendError::new(context, e)
}

/// Open or create one database. Retries briefly while a previous owner in this process is
/// still releasing it (TRAPS.md 14).
fn open_db(path: &Path) -> BackendResult<Database> {
    let mut attempt = 0;
    loop {
        match Database::create(path) {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen) if attempt < 50 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(BackendError::new("open redb", e)),
        }
    }
}

fn write(
    db: &Database,
    durable: bool,
    context: &'static str,
    f: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
) -> BackendResult<()> {
    let mut txn = db
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
    db: &Database,
    context: &'static str,
    f: impl FnOnce(&redb::ReadTransaction) -> Result<T, redb::Error>,
) -> BackendResult<T> {
    let txn = db.begin_read().map_err(|e| BackendError::new(context, e))?;
    f(&txn).map_err(err(context))
}

impl RedbBackend {
    /// Open or create the databases in `dir`.
    pub fn open(dir: &Path) -> BackendResult<Self> {
        let log = open_db(&dir.join("log.redb"))?;
        let sm = open_db(&dir.join("sm.redb"))?;
        write(&log, true, "open log", |txn| {
            txn.open_table(LOG)?;
            txn.open_table(META)?;
            Ok(())
        })?;
        write(&sm, true, "open state", |txn| {
            txn.open_table(SM)?;
            Ok(())
        })?;
        Ok(RedbBackend { log, sm })
    }
}

impl Backend for RedbBackend {
    fn log_append(&self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        write(&self.log, true, "append log", |txn| {
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
        read(&self.log, "read log", |txn| {
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
        read(&self.log, "read last log", |txn| {
            let table = txn.open_table(LOG)?;
            Ok(table.last()?.map(|(k, v)| (k.value(), v.value().to_vec())))
        })
    }

    fn log_truncate(&self, from: u64) -> BackendResult<()> {
        write(&self.log, true, "truncate log", |txn| {
            txn.open_table(LOG)?.retain_in(from.., |_, _| false)?;
            Ok(())
        })
    }

    fn log_purge(&self, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()> {
        write(&self.log, true, "purge log", |txn| {
            txn.open_table(LOG)?.retain_in(..=upto, |_, _| false)?;
            txn.open_table(META)?.insert(meta.0, meta.1.as_slice())?;
            Ok(())
        })
    }

    fn meta_get(&self, name: &str) -> BackendResult<Option<Vec<u8>>> {
        read(&self.log, "read meta", |txn| {
            let table = txn.open_table(META)?;
            Ok(table.get(name)?.map(|v| v.value().to_vec()))
        })
    }

    fn meta_put(&self, name: &str, value: Vec<u8>) -> BackendResult<()> {
        write(&self.log, true, "write meta", |txn| {
            txn.open_table(META)?.insert(name, value.as_slice())?;
            Ok(())
        })
    }

    fn sm_reader(&self) -> BackendResult<Box<dyn SmRead + '_>> {
        let txn = self
            .sm
            .begin_read()
            .map_err(|e| BackendError::new("read state", e))?;
        let table = txn
            .open_table(SM)
            .map_err(|e| BackendError::new("read state", e))?;
        Ok(Box::new(RedbReader { table }))
    }

    fn sm_commit(&self, writes: WriteSet, durable: bool) -> BackendResult<()> {
        write(&self.sm, durable, "commit state", |txn| {
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
        write(&self.sm, true, "install state", |txn| {
            txn.delete_table(SM)?;
            let mut table = txn.open_table(SM)?;
            for (k, v) in &pairs {
                table.insert(k.as_slice(), v.as_slice())?;
            }
            Ok(())
        })
    }

    fn sm_dump(&self) -> BackendResult<Vec<(Vec<u8>, Vec<u8>)>> {
        read(&self.sm, "dump state", |txn| {
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

/// One redb read transaction over the state-machine table.
struct RedbReader {
    table: redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl SmRead for RedbReader {
    fn get(&self, key: &[u8]) -> BackendResult<Option<Vec<u8>>> {
        let value = self
            .table
            .get(key)
            .map_err(|e| BackendError::new("read state", e))?;
        Ok(value.map(|v| v.value().to_vec()))
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
        let range = self
            .table
            .range(start..end)
            .map_err(|e| BackendError::new("scan state", e))?;
        range
            .take(limit)
            .map(|row| {
                let (k, v) = row.map_err(|e| BackendError::new("scan state", e))?;
                Ok((k.value().to_vec(), v.value().to_vec()))
            })
            .collect()
    }
}
