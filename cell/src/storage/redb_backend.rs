//! The redb backend (default): the state machine in `sm.redb`, the Raft log and its
//! metadata apart from it.
//!
//! `sm.redb` holds the state machine; its commits are mostly non-durable because the log is
//! the source of truth. The log lives in preallocated segment files under `log/`
//! ([`SegmentLog`], one `fdatasync` per durable append), or, for data directories made
//! before those existed and for `--storage redb-log`, in `log.redb` with durable
//! (`Durability::Immediate`) commits. Keeping log and state apart means a log sync writes
//! only log bytes, not the state machine's dirty pages, which is most of the cost of an
//! acknowledged write.

use std::path::Path;
use std::time::Duration;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::node_log::CellLog;
use super::segment_log::SegmentLog;
use super::{Backend, BackendError, BackendResult, LogRows, SmRead, WriteSet};
use crate::disk_fault::DiskFaults;

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const SM: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sm");

/// A cell's storage: the state machine in redb, the log in segments or in redb.
pub struct RedbBackend {
    log: LogFiles,
    sm: Database,
}

/// Where the Raft log and its metadata live.
enum LogFiles {
    /// `log.redb`: directories made before the segment log, or `--storage redb-log`.
    Redb(Database),
    /// `log/`: preallocated segment files (the default for a new directory).
    Segments(SegmentLog),
    /// This cell's records in its node's one log (`whip node serve --log node`).
    Node(CellLog),
}

/// The directory of the segment log inside a data directory.
const SEGMENT_DIR: &str = "log";
/// The redb log file inside a data directory.
const LOG_FILE: &str = "log.redb";
/// The file that says a data directory's log is in its node's log: opening it with a log
/// of its own would start an empty log and forget the member's vote.
const NODE_LOG_MARK: &str = "log.node";

/// Mark `dir` as keeping its log in the node's log, durably.
fn mark_node_log(dir: &Path) -> BackendResult<()> {
    let io = |context: &'static str| move |e: std::io::Error| BackendError::new(context, e);
    let file = std::fs::File::create(dir.join(NODE_LOG_MARK)).map_err(io("mark node log"))?;
    file.sync_all().map_err(io("mark node log"))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("mark node log"))
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

/// Whether the state table exists in `db` (a read: no commit).
fn has_table(db: &Database) -> BackendResult<bool> {
    let txn = db
        .begin_read()
        .map_err(|e| BackendError::new("open state", e))?;
    match txn.open_table(SM) {
        Ok(_) => Ok(true),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(false),
        Err(e) => Err(BackendError::new("open state", e)),
    }
}

impl RedbBackend {
    /// Open or create the storage in `dir`. The log goes to segment files unless
    /// `redb_log` asks for `log.redb`, or the directory already keeps its log there.
    pub fn open(dir: &Path, redb_log: bool) -> BackendResult<Self> {
        RedbBackend::open_with(dir, redb_log, DiskFaults::default())
    }

    /// [`RedbBackend::open`], the segment log's appends failing as `faults` says (a test
    /// switch; the redb log takes no faults).
    pub fn open_with(dir: &Path, redb_log: bool, faults: DiskFaults) -> BackendResult<Self> {
        RedbBackend::open_on(dir, redb_log, faults, None)
    }

    /// [`RedbBackend::open_with`], the log in the node's one log (`node_log`) unless the
    /// directory already keeps a log of its own (made before, or with `--log cell`).
    pub fn open_on(
        dir: &Path,
        redb_log: bool,
        faults: DiskFaults,
        node_log: Option<CellLog>,
    ) -> BackendResult<Self> {
        let existing_redb_log = dir.join(LOG_FILE).exists() && !dir.join(SEGMENT_DIR).exists();
        let own_log = redb_log || dir.join(LOG_FILE).exists() || dir.join(SEGMENT_DIR).exists();
        let marked = dir.join(NODE_LOG_MARK).exists();
        let log = if let (Some(node_log), false) = (node_log, own_log) {
            if !marked {
                // Records of this cell without the mark: the directory was replaced (a
                // restore) after they were written; they are not this directory's log.
                if node_log.holds_any() {
                    node_log.reset()?;
                }
                mark_node_log(dir)?;
            }
            LogFiles::Node(node_log)
        } else if marked {
            let what = format!(
                "{}: this cell's log is in its node's log; start the node with --log node",
                dir.display()
            );
            return Err(BackendError::new("open log", what));
        } else if redb_log || existing_redb_log {
            let log = open_db(&dir.join(LOG_FILE))?;
            write(&log, true, "open log", |txn| {
                txn.open_table(LOG)?;
                txn.open_table(META)?;
                Ok(())
            })?;
            LogFiles::Redb(log)
        } else {
            LogFiles::Segments(SegmentLog::open(&dir.join(SEGMENT_DIR), faults)?)
        };
        let sm = open_db(&dir.join("sm.redb"))?;
        // Only a new file needs its table made (durably); a store opened again costs no
        // commit (two fsyncs on every `whip run`).
        if !has_table(&sm)? {
            write(&sm, true, "open state", |txn| {
                txn.open_table(SM)?;
                Ok(())
            })?;
        }
        Ok(RedbBackend { log, sm })
    }
}

impl Backend for RedbBackend {
    fn log_append(&self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        match &self.log {
            LogFiles::Redb(db) => redb_log::append(db, entries),
            LogFiles::Segments(log) => log.append(entries),
            LogFiles::Node(log) => log.append(entries),
        }
    }

    fn log_range(&self, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        match &self.log {
            LogFiles::Redb(db) => redb_log::range(db, from, to),
            LogFiles::Segments(log) => log.range(from, to),
            LogFiles::Node(log) => log.range(from, to),
        }
    }

    fn log_try_range(&self, from: u64, to: u64) -> Option<BackendResult<LogRows>> {
        match &self.log {
            LogFiles::Redb(_) => None,
            LogFiles::Segments(log) => log.try_range(from, to),
            LogFiles::Node(log) => log.try_range(from, to),
        }
    }

    fn log_last(&self) -> BackendResult<Option<(u64, Vec<u8>)>> {
        match &self.log {
            LogFiles::Redb(db) => redb_log::last(db),
            LogFiles::Segments(log) => log.last(),
            LogFiles::Node(log) => log.last(),
        }
    }

    fn log_truncate(&self, from: u64) -> BackendResult<()> {
        match &self.log {
            LogFiles::Redb(db) => redb_log::truncate(db, from),
            LogFiles::Segments(log) => log.truncate(from),
            LogFiles::Node(log) => log.truncate(from),
        }
    }

    fn log_purge(&self, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()> {
        match &self.log {
            LogFiles::Redb(db) => redb_log::purge(db, upto, meta),
            LogFiles::Segments(log) => log.purge(upto, meta),
            LogFiles::Node(log) => log.purge(upto, meta),
        }
    }

    fn meta_get(&self, name: &str) -> BackendResult<Option<Vec<u8>>> {
        match &self.log {
            LogFiles::Redb(db) => redb_log::meta_get(db, name),
            LogFiles::Segments(log) => Ok(log.meta_get(name)),
            LogFiles::Node(log) => Ok(log.meta_get(name)),
        }
    }

    fn meta_put(&self, name: &str, value: Vec<u8>) -> BackendResult<()> {
        match &self.log {
            LogFiles::Redb(db) => redb_log::meta_put(db, name, value),
            LogFiles::Segments(log) => log.meta_put(name, value),
            LogFiles::Node(log) => log.meta_put(name, value),
        }
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

/// The Raft log and metadata in `log.redb`.
mod redb_log {
    use redb::{Database, ReadableTable};

    use super::{LOG, META, read, write};
    use crate::storage::BackendResult;

    pub(super) fn append(db: &Database, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        write(db, true, "append log", |txn| {
            let mut table = txn.open_table(LOG)?;
            for (index, bytes) in entries {
                table.insert(*index, bytes.as_slice())?;
            }
            Ok(())
        })
    }

    pub(super) fn range(db: &Database, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        if from >= to {
            return Ok(Vec::new());
        }
        read(db, "read log", |txn| {
            let table = txn.open_table(LOG)?;
            let mut out = Vec::new();
            for row in table.range(from..to)? {
                let (k, v) = row?;
                out.push((k.value(), v.value().to_vec()));
            }
            Ok(out)
        })
    }

    pub(super) fn last(db: &Database) -> BackendResult<Option<(u64, Vec<u8>)>> {
        read(db, "read last log", |txn| {
            let table = txn.open_table(LOG)?;
            Ok(table.last()?.map(|(k, v)| (k.value(), v.value().to_vec())))
        })
    }

    pub(super) fn truncate(db: &Database, from: u64) -> BackendResult<()> {
        write(db, true, "truncate log", |txn| {
            txn.open_table(LOG)?.retain_in(from.., |_, _| false)?;
            Ok(())
        })
    }

    pub(super) fn purge(db: &Database, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()> {
        write(db, true, "purge log", |txn| {
            txn.open_table(LOG)?.retain_in(..=upto, |_, _| false)?;
            txn.open_table(META)?.insert(meta.0, meta.1.as_slice())?;
            Ok(())
        })
    }

    pub(super) fn meta_get(db: &Database, name: &str) -> BackendResult<Option<Vec<u8>>> {
        read(db, "read meta", |txn| {
            let table = txn.open_table(META)?;
            Ok(table.get(name)?.map(|v| v.value().to_vec()))
        })
    }

    pub(super) fn meta_put(db: &Database, name: &str, value: Vec<u8>) -> BackendResult<()> {
        write(db, true, "write meta", |txn| {
            txn.open_table(META)?.insert(name, value.as_slice())?;
            Ok(())
        })
    }
}
