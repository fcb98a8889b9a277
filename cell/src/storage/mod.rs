//! Durable storage of a cell: one backend (redb or sled) holding the Raft log, the Raft
//! metadata (vote, committed, purged) and the state machine's keyspace. With redb, the log
//! may instead be the cell's part of its node's one log ([`NodeLog`], group-committed
//! across every cell the node hosts).
//!
//! Both backends sit behind [`Backend`], so the openraft log store and state machine are one
//! concrete type each (TRAPS.md 7) and both backends pass the same suites. Backend calls are
//! synchronous; any that may wait (a lock, the disk) runs on the blocking pool (TRAPS.md
//! 13), never on a tokio worker. Two run on the caller's task only when the backend says
//! they will not wait: a short log read ([`Backend::log_try_range`]) and an apply that only
//! gathers in memory ([`Backend::sm_quick`]).
//! [`open_backend`] puts a [`WriteBack`] in front of either engine: applied state-machine
//! writes gather in memory and reach the engine in one commit once a second or every
//! `STATE_WRITE_BACK_BYTES_MAX`, instead of one engine commit per applied batch.

mod descriptors;
mod log_store;
mod log_writer;
mod meta_slots;
mod node_log;
mod redb_backend;
mod segment_log;
mod sled_backend;
mod state_machine;
mod write_back;

use std::path::Path;
use std::sync::Arc;

pub(crate) use descriptors::retries as open_retries;
pub use log_store::LogStore;
pub use node_log::{CellLog, NODE_LOG_DIR, NodeLog};
pub use redb_backend::RedbBackend;
pub use sled_backend::SledBackend;
pub use state_machine::{Dump, SmStore, SnapshotBuilder, StateMachineView};
pub(crate) use state_machine::{SNAPSHOT_FILE, restored_snapshot};
pub use write_back::WriteBack;

/// Which storage engine a cell uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StorageKind {
    /// The default: the Raft log in preallocated segment files (one `fdatasync` per
    /// durable append), the state machine in redb.
    #[default]
    Redb,
    /// Everything in redb, the log with `Durability::Immediate` commits (the layout before
    /// the segment log; kept to measure against it).
    RedbLog,
    /// sled 0.34.7: selectable; calls run off the tokio workers (TRAPS.md 11).
    Sled,
}

impl StorageKind {
    /// The name used on the command line and in status.
    pub fn name(self) -> &'static str {
        match self {
            StorageKind::Redb => "redb",
            StorageKind::RedbLog => "redb-log",
            StorageKind::Sled => "sled",
        }
    }
}

impl std::str::FromStr for StorageKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "redb" => Ok(StorageKind::Redb),
            "redb-log" => Ok(StorageKind::RedbLog),
            "sled" => Ok(StorageKind::Sled),
            other => Err(format!(
                "unknown storage {other:?}, expected redb, redb-log or sled"
            )),
        }
    }
}

/// Where a node's cells keep their Raft logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogLayout {
    /// Each cell its own segment log under its data directory.
    Cell,
    /// One group-committed log for every cell of the node ([`NodeLog`]): the default.
    #[default]
    Node,
}

impl LogLayout {
    /// The name used on the command line and in status.
    pub fn name(self) -> &'static str {
        match self {
            LogLayout::Cell => "cell",
            LogLayout::Node => "node",
        }
    }
}

impl std::str::FromStr for LogLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cell" => Ok(LogLayout::Cell),
            "node" => Ok(LogLayout::Node),
            other => Err(format!(
                "unknown log layout {other:?}, expected node or cell"
            )),
        }
    }
}

/// An I/O failure of a backend, with what it was doing.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {message}")]
pub struct BackendError {
    /// What the backend was doing.
    pub context: &'static str,
    /// The engine's error text.
    pub message: String,
}

impl BackendError {
    pub(crate) fn new(context: &'static str, err: impl std::fmt::Display) -> Self {
        BackendError {
            context,
            message: err.to_string(),
        }
    }
}

/// Result of a backend call.
pub type BackendResult<T> = Result<T, BackendError>;

/// A set of state-machine writes to commit atomically: `None` deletes.
pub type WriteSet = std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Log entries as stored: (index, encoded entry), in index order.
pub type LogRows = Vec<(u64, Vec<u8>)>;

/// A consistent read view of the state machine, held for the length of one apply or query
/// so a batch of lookups costs one read transaction, not one per key.
pub trait SmRead {
    /// A state-machine value.
    fn get(&self, key: &[u8]) -> BackendResult<Option<Vec<u8>>>;
    /// State-machine pairs with `start <= key < end`, at most `limit`.
    fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> BackendResult<Vec<(Vec<u8>, Vec<u8>)>>;
}

/// The storage engine under a cell. Three keyspaces: `log` (u64 index → entry bytes),
/// `meta` (Raft metadata by name) and `sm` (the state machine's ordered bytes).
pub trait Backend: Send + Sync + 'static {
    /// Append (or overwrite) log entries and make them durable before returning.
    fn log_append(&self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()>;
    /// Entries with `from <= index < to`, in order.
    fn log_range(&self, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>>;
    /// [`Backend::log_range`] when it can answer without waiting for a lock another thread
    /// holds (a writer's fsync); `None` means: ask `log_range` on the blocking pool
    /// (TRAPS.md 13). The caller may be a tokio worker.
    fn log_try_range(&self, from: u64, to: u64) -> Option<BackendResult<LogRows>> {
        let _ = (from, to);
        None
    }
    /// The last log entry, if any.
    fn log_last(&self) -> BackendResult<Option<(u64, Vec<u8>)>>;
    /// Delete entries with `index >= from` (durably).
    fn log_truncate(&self, from: u64) -> BackendResult<()>;
    /// Delete entries with `index <= upto` and record `meta` in the same commit (durably).
    fn log_purge(&self, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()>;
    /// A metadata value.
    fn meta_get(&self, name: &str) -> BackendResult<Option<Vec<u8>>>;
    /// Store a metadata value durably.
    fn meta_put(&self, name: &str, value: Vec<u8>) -> BackendResult<()>;
    /// A read view of the state machine as of the last commit.
    fn sm_reader(&self) -> BackendResult<Box<dyn SmRead + '_>>;
    /// Commit a write set atomically. Not necessarily durable on return: the log is the
    /// source of truth and a crash replays committed entries (`durable` forces it).
    fn sm_commit(&self, writes: WriteSet, durable: bool) -> BackendResult<()>;
    /// Whether a non-durable apply can run now without waiting for a lock or writing to
    /// the engine (the write-back layer uncontended, with room): then it may run on a
    /// tokio worker; `false` sends it to the blocking pool (TRAPS.md 13).
    fn sm_quick(&self) -> bool {
        false
    }
    /// Replace the whole state machine with `pairs`, durably (snapshot install).
    fn sm_replace(&self, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> BackendResult<()>;
    /// Every state-machine pair (snapshot build; called while no apply runs).
    fn sm_dump(&self) -> BackendResult<Vec<(Vec<u8>, Vec<u8>)>>;
}

/// Open the backend of `kind` under `dir` (created if missing).
pub fn open_backend(kind: StorageKind, dir: &Path) -> BackendResult<Arc<dyn Backend>> {
    open_backend_with(kind, dir, crate::DiskFaults::default())
}

/// [`open_backend`], the segment log's appends failing as `faults` says (test-only).
pub fn open_backend_with(
    kind: StorageKind,
    dir: &Path,
    faults: crate::DiskFaults,
) -> BackendResult<Arc<dyn Backend>> {
    open_backend_on(kind, dir, faults, None)
}

/// [`open_backend_with`], the Raft log kept in the node's one log when `node_log` is given
/// and the directory has no log of its own (`redb` storage only: `redb-log` and `sled`
/// keep their logs in their own files).
pub fn open_backend_on(
    kind: StorageKind,
    dir: &Path,
    faults: crate::DiskFaults,
    node_log: Option<CellLog>,
) -> BackendResult<Arc<dyn Backend>> {
    crate::tls::private_dir(dir).map_err(|e| BackendError::new("create data dir", e))?;
    descriptors::keep_reserve();
    let engine: Box<dyn Backend> = match kind {
        StorageKind::Redb => Box::new(RedbBackend::open_on(dir, false, faults, node_log)?),
        StorageKind::RedbLog => Box::new(RedbBackend::open(dir, true)?),
        StorageKind::Sled => Box::new(SledBackend::open(&dir.join("cell.sled"))?),
    };
    let backend: Arc<dyn Backend> = Arc::new(WriteBack::new(engine));
    make_private(dir, 0).map_err(|e| BackendError::new("restrict data dir", e))?;
    Ok(backend)
}

/// Directory levels [`make_private`] descends (sled keeps its files two levels down).
const PRIVATE_DEPTH_MAX: usize = 4;

/// Take group and other permission bits off everything under `dir` (the storage engines
/// create their files with the process umask): directories 0700, files 0600.
fn make_private(dir: &Path, depth: usize) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() && depth < PRIVATE_DEPTH_MAX {
            make_private(&entry.path(), depth + 1)?;
        } else if kind.is_file() {
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(())
}

/// Run a blocking backend call on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> BackendResult<T> + Send + 'static,
) -> BackendResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BackendError::new("blocking task", e))?
}
