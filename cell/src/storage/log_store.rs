//! The durable Raft log (openraft `RaftLogStorage`) over a [`Backend`]: appends return once
//! queued, one writer thread (`log_writer`) makes them durable in submission order.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, RaftLogReader, Vote};

use super::log_writer::{self, Append, MetaWrite, Op, Tail};
use super::{Backend, BackendError, BackendResult, blocking};
use crate::limits;
use crate::stages::Stages;
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig, decode, encode};

const VOTE: &str = "vote";
const PURGED: &str = "last_purged";

/// The Raft log of one cell. Cheap to clone: clones share the backend, the tail and the
/// writer (`log_writer`), whose thread ends when the last clone drops.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

struct Shared {
    backend: Arc<dyn Backend>,
    tail: Arc<Mutex<Tail>>,
    writer: Mutex<Option<Sender<Op>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Shared {
    /// Close the queue and wait for the writer, so the backend's files are closed (and can
    /// be reopened) once the last clone of the store is gone.
    fn drop(&mut self) {
        self.writer.lock().expect("log writer lock").take();
        if let Some(thread) = self.thread.lock().expect("log thread lock").take() {
            let _ = thread.join();
        }
    }
}

impl LogStore {
    /// A log store over `backend`, recording its flush latencies into `stages`.
    pub fn new(backend: Arc<dyn Backend>, stages: Arc<Stages>) -> std::io::Result<Self> {
        let tail = Arc::<Mutex<Tail>>::default();
        let (tx, thread) = log_writer::start(backend.clone(), tail.clone(), stages)?;
        let shared = Shared {
            backend,
            tail,
            writer: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        };
        Ok(LogStore {
            shared: Arc::new(shared),
        })
    }

    fn tail(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.shared.tail.lock().expect("log tail lock")
    }

    fn send(&self, op: Op) -> Result<(), BackendError> {
        let writer = self.shared.writer.lock().expect("log writer lock");
        let sent = writer.as_ref().map(|tx| tx.send(op));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(BackendError::new("log writer", "stopped")),
        }
    }

    /// Queue a metadata write behind every earlier log write and wait until it is durable.
    async fn meta_write(
        &self,
        work: impl FnOnce(&dyn Backend) -> BackendResult<()> + Send + 'static,
    ) -> Result<(), StorageError> {
        let (done, wait) = tokio::sync::oneshot::channel();
        let work = Box::new(work);
        self.send(Op::Meta(MetaWrite { work, done }))
            .map_err(write_err)?;
        let result = wait
            .await
            .map_err(|_| write_err(BackendError::new("log writer", "stopped")))?;
        result.map_err(write_err)
    }

    async fn meta<T: for<'de> serde::Deserialize<'de> + Send + 'static>(
        &self,
        name: &'static str,
    ) -> Result<Option<T>, StorageError> {
        let backend = self.shared.backend.clone();
        let bytes = blocking(move || backend.meta_get(name))
            .await
            .map_err(read_err)?;
        bytes
            .map(|b| decode(&b).map_err(|e| read_err(BackendError::new("decode meta", e))))
            .transpose()
    }
}

fn read_err(e: BackendError) -> StorageError {
    openraft::StorageIOError::new(
        ErrorSubject::Logs,
        ErrorVerb::Read,
        openraft::AnyError::new(&e),
    )
    .into()
}

fn write_err(e: BackendError) -> StorageError {
    openraft::StorageIOError::new(
        ErrorSubject::Logs,
        ErrorVerb::Write,
        openraft::AnyError::new(&e),
    )
    .into()
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(x) => *x,
        Bound::Excluded(x) => x.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(x) => x.saturating_add(1),
        Bound::Excluded(x) => *x,
        Bound::Unbounded => u64::MAX,
    };
    (from, to)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (from, to) = bounds(&range);
        // The tail first: below its first index everything is durable in the backend.
        let (first, cached) = self.tail().range(from, to);
        let below = first.map_or(to, |f| f.min(to));
        if from >= below {
            return Ok(cached);
        }
        let backend = self.shared.backend.clone();
        let short = below - from <= limits::LOG_READ_INLINE_ENTRIES_MAX;
        let rows = match short.then(|| backend.log_try_range(from, below)).flatten() {
            Some(rows) => rows,
            None => blocking(move || backend.log_range(from, below)).await,
        }
        .map_err(read_err)?;
        let mut entries = rows
            .iter()
            .map(|(_, b)| decode(b).map_err(|e| read_err(BackendError::new("decode entry", e))))
            .collect::<Result<Vec<Entry>, _>>()?;
        entries.extend(cached);
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged = self.meta::<Option<LogId>>(PURGED).await?.flatten();
        let submitted = self.tail().last();
        let last_log_id = match submitted {
            Some(id) => Some(id),
            None => {
                let backend = self.shared.backend.clone();
                let last = blocking(move || backend.log_last())
                    .await
                    .map_err(read_err)?;
                match last {
                    Some((_, bytes)) => Some(
                        decode::<Entry>(&bytes)
                            .map_err(|e| read_err(BackendError::new("decode entry", e)))?
                            .log_id,
                    ),
                    None => last_purged,
                }
            }
        };
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let bytes = encode(vote);
        self.meta_write(move |b| b.meta_put(VOTE, bytes)).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        self.meta(VOTE).await
    }

    /// Queue the entries and return: they are readable at once, and the writer calls
    /// `callback` once they (and every write queued before them) are durable. openraft
    /// counts an entry toward a quorum, and answers a leader's follower, only after that
    /// callback, so nothing is acknowledged before it is on disk.
    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let rows = entries
            .iter()
            .map(|e| (e.log_id.index, encode(e)))
            .collect();
        let ids = entries.iter().map(|e| e.log_id).collect();
        let append = Append {
            rows,
            ids,
            callback,
            submitted: std::time::Instant::now(),
            submitted_on: crate::stages::here(),
        };
        // Into the tail before the queue, so a read right after this call finds them.
        self.tail().submit(entries);
        self.send(Op::Append(append)).map_err(write_err)
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.tail().truncate(log_id.index);
        self.meta_write(move |b| b.log_truncate(log_id.index)).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.tail().purge(log_id.index);
        let bytes = encode(&Some(log_id));
        self.meta_write(move |b| b.log_purge(log_id.index, (PURGED, bytes)))
            .await
    }
}
