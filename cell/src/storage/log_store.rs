//! The durable Raft log (openraft `RaftLogStorage`) over a [`Backend`].

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, RaftLogReader, Vote};

use super::{Backend, BackendError, blocking};
use crate::limits;
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig, decode, encode};

const VOTE: &str = "vote";
const PURGED: &str = "last_purged";

/// The Raft log of one cell. Cheap to clone: clones share the backend and the cache.
#[derive(Clone)]
pub struct LogStore {
    backend: Arc<dyn Backend>,
    /// The newest durable entries, so replication to followers (which reads what was just
    /// appended) does not go to disk. Holds at most `limits::LOG_CACHE_ENTRIES_MAX`.
    recent: Arc<Mutex<BTreeMap<u64, Entry>>>,
}

impl LogStore {
    /// A log store over `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        LogStore {
            backend,
            recent: Arc::default(),
        }
    }

    fn cached(&self, from: u64, to: u64) -> Option<Vec<Entry>> {
        let recent = self.recent.lock().expect("log cache lock");
        let first = *recent.keys().next()?;
        let last = *recent.keys().next_back()?;
        if from < first || from > last.saturating_add(1) {
            return None;
        }
        Some(recent.range(from..to).map(|(_, e)| e.clone()).collect())
    }

    fn remember(&self, entries: Vec<Entry>) {
        let mut recent = self.recent.lock().expect("log cache lock");
        for entry in entries {
            recent.insert(entry.log_id.index, entry);
        }
        while recent.len() > limits::LOG_CACHE_ENTRIES_MAX {
            recent.pop_first();
        }
    }

    fn forget(&self, range: impl RangeBounds<u64>) {
        let mut recent = self.recent.lock().expect("log cache lock");
        let doomed: Vec<u64> = recent.range(range).map(|(k, _)| *k).collect();
        for k in doomed {
            recent.remove(&k);
        }
    }

    async fn meta<T: for<'de> serde::Deserialize<'de> + Send + 'static>(
        &self,
        name: &'static str,
    ) -> Result<Option<T>, StorageError> {
        let backend = self.backend.clone();
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
        if let Some(entries) = self.cached(from, to) {
            return Ok(entries);
        }
        let backend = self.backend.clone();
        let rows = blocking(move || backend.log_range(from, to))
            .await
            .map_err(read_err)?;
        rows.iter()
            .map(|(_, b)| decode(b).map_err(|e| read_err(BackendError::new("decode entry", e))))
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let backend = self.backend.clone();
        let last = blocking(move || backend.log_last())
            .await
            .map_err(read_err)?;
        let last_purged = self.meta::<Option<LogId>>(PURGED).await?.flatten();
        let last_log_id = match last {
            Some((_, bytes)) => {
                let entry: Entry =
                    decode(&bytes).map_err(|e| read_err(BackendError::new("decode entry", e)))?;
                Some(entry.log_id)
            }
            None => last_purged,
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
        let (backend, bytes) = (self.backend.clone(), encode(vote));
        blocking(move || backend.meta_put(VOTE, bytes))
            .await
            .map_err(write_err)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        self.meta(VOTE).await
    }

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
        let rows: Vec<(u64, Vec<u8>)> = entries
            .iter()
            .map(|e| (e.log_id.index, encode(e)))
            .collect();
        let backend = self.backend.clone();
        // The append is durable (fsynced) before openraft hears it is flushed, so an entry is
        // on disk before it counts toward a quorum and before any client is acknowledged.
        //
        // Returning before the fsync and calling the callback later would gain nothing on
        // openraft 0.9: `RaftCore::append_to_log` awaits this call and then the callback's
        // receiver before it runs the next queued command, and the leader's `Replicate`
        // commands are queued after `AppendInputEntries`. The leader's flush therefore
        // precedes sending the entry to followers whatever this function does; overlapping
        // the two needs a Raft core with non-blocking log IO.
        let result = blocking(move || backend.log_append(&rows)).await;
        match result {
            Ok(()) => {
                self.remember(entries);
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let io = std::io::Error::other(e.to_string());
                callback.log_io_completed(Err(io));
                Err(write_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.forget(log_id.index..);
        let backend = self.backend.clone();
        blocking(move || backend.log_truncate(log_id.index))
            .await
            .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.forget(..=log_id.index);
        let (backend, bytes) = (self.backend.clone(), encode(&Some(log_id)));
        blocking(move || backend.log_purge(log_id.index, (PURGED, bytes)))
            .await
            .map_err(write_err)
    }
}
