//! The one writer of a cell's Raft log: a dedicated OS thread that takes log writes in
//! submission order (FIFO), commits them durably and then reports each one.
//!
//! Appends return to openraft as soon as they are queued and their entries sit in the
//! [`Tail`], where reads find them at once; the writer commits every append already queued
//! in one durable commit (group commit) and calls their flush callbacks in submission
//! order. Votes, truncations and purges go through the same queue, so a write never
//! overtakes an earlier one: when an append's callback fires, every write submitted before
//! it is on disk.
//!
//! Invariants:
//! - the tail is contiguous and ends at the last submitted entry; everything below its
//!   first index is in the backend (or purged);
//! - an entry leaves the tail only once it is durable (eviction skips pending entries);
//! - after one failed commit the writer refuses everything that follows (poisoned), so
//!   nothing acknowledged can sit behind a hole.
//!
//! A failed commit is fatal to the Raft core (openraft stops on a log I/O error), so the
//! backend retries a file open that fails only because the process is out of descriptors
//! before it reports anything (`descriptors.rs`): the writer then just waits.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use openraft::storage::LogFlushed;

use super::{Backend, BackendError, BackendResult};
use crate::limits;
use crate::stages::{Stage, Stages};
use crate::types::{Entry, LogId, TypeConfig};

/// One cached log entry and whether it is durable yet.
struct Cached {
    entry: Entry,
    durable: bool,
}

/// The newest log entries: every entry not yet durable, plus up to
/// `limits::LOG_CACHE_ENTRIES_MAX` durable ones, so replication reads what was just appended
/// without going to disk.
#[derive(Default)]
pub(super) struct Tail {
    entries: BTreeMap<u64, Cached>,
}

impl Tail {
    /// Add entries just submitted (not yet durable).
    pub(super) fn submit(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            let index = entry.log_id.index;
            let cached = Cached {
                entry,
                durable: false,
            };
            self.entries.insert(index, cached);
        }
    }

    /// Drop entries with index `>= from` (a truncation).
    pub(super) fn truncate(&mut self, from: u64) {
        self.entries.split_off(&from);
    }

    /// Drop entries with index `<= upto` (a purge).
    pub(super) fn purge(&mut self, upto: u64) {
        self.entries = self.entries.split_off(&upto.saturating_add(1));
    }

    /// The first cached index and clones of the cached entries in `from..to`.
    pub(super) fn range(&self, from: u64, to: u64) -> (Option<u64>, Vec<Entry>) {
        let first = self.entries.keys().next().copied();
        let from = first.map_or(from, |f| from.max(f));
        if from >= to {
            return (first, Vec::new());
        }
        let entries = self.entries.range(from..to).map(|(_, c)| c.entry.clone());
        (first, entries.collect())
    }

    /// The last submitted log id, if any entry is cached.
    pub(super) fn last(&self) -> Option<LogId> {
        self.entries.values().next_back().map(|c| c.entry.log_id)
    }

    fn mark_durable(&mut self, ids: &[LogId]) {
        for id in ids {
            if let Some(cached) = self.entries.get_mut(&id.index)
                && cached.entry.log_id == *id
            {
                cached.durable = true;
            }
        }
        while self.entries.len() > limits::LOG_CACHE_ENTRIES_MAX {
            match self.entries.first_entry() {
                Some(first) if first.get().durable => {
                    first.remove();
                }
                _ => break,
            }
        }
    }
}

/// A queued append: the encoded rows and the callback to call once they are durable.
pub(super) struct Append {
    pub(super) rows: Vec<(u64, Vec<u8>)>,
    pub(super) ids: Vec<LogId>,
    pub(super) callback: LogFlushed<TypeConfig>,
    pub(super) submitted: Instant,
    /// The thread that submitted it (the `log_flushed` stage's hops).
    pub(super) submitted_on: std::thread::ThreadId,
}

/// A write to run on the writer thread against the backend.
pub(super) type MetaWork = Box<dyn FnOnce(&dyn Backend) -> BackendResult<()> + Send>;

/// A queued metadata write (vote, truncation, purge) and who waits for it.
pub(super) struct MetaWrite {
    pub(super) work: MetaWork,
    pub(super) done: tokio::sync::oneshot::Sender<BackendResult<()>>,
}

/// One write in the FIFO.
pub(super) enum Op {
    Append(Append),
    Meta(MetaWrite),
}

/// The writer thread's state.
pub(super) struct Writer {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) tail: Arc<Mutex<Tail>>,
    pub(super) stages: Arc<Stages>,
    pub(super) poisoned: Option<String>,
}

impl Writer {
    /// Run until every sender is gone.
    pub(super) fn run(mut self, rx: Receiver<Op>) {
        let mut held: Option<Op> = None;
        loop {
            let op = match held.take() {
                Some(op) => op,
                None => match rx.recv() {
                    Ok(op) => op,
                    Err(_) => return,
                },
            };
            match op {
                Op::Meta(meta) => {
                    let result = self
                        .check()
                        .and_then(|()| (meta.work)(self.backend.as_ref()));
                    self.note(&result);
                    let _ = meta.done.send(result);
                }
                Op::Append(first) => {
                    let mut batch = vec![first];
                    while batch.len() < limits::LOG_GROUP_APPENDS_MAX {
                        match rx.try_recv() {
                            Ok(Op::Append(next)) => batch.push(next),
                            Ok(other) => {
                                held = Some(other);
                                break;
                            }
                            Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                        }
                    }
                    self.commit(batch);
                }
            }
        }
    }

    fn check(&self) -> BackendResult<()> {
        match &self.poisoned {
            Some(first) => Err(BackendError::new("log writer stopped after", first)),
            None => Ok(()),
        }
    }

    fn note(&mut self, result: &BackendResult<()>) {
        if let (Err(e), None) = (result, &self.poisoned) {
            tracing::error!(error = %e, "log write failed; refusing further log writes");
            self.poisoned = Some(e.to_string());
            crate::disk_fault::log_failed(&e.to_string());
        }
    }

    /// Commit a group of appends durably, then call their callbacks in order.
    fn commit(&mut self, mut batch: Vec<Append>) {
        let rows: Vec<(u64, Vec<u8>)> = batch
            .iter_mut()
            .flat_map(|a| std::mem::take(&mut a.rows))
            .collect();
        let result = self.check().and_then(|()| self.backend.log_append(&rows));
        self.note(&result);
        if result.is_ok() {
            let mut tail = self.tail.lock().expect("log tail lock");
            for append in &batch {
                tail.mark_durable(&append.ids);
            }
        }
        for append in batch {
            self.stages
                .record(Stage::LogFlushed, append.submitted.elapsed());
            let switches = crate::stages::switched(append.submitted_on);
            self.stages.hop(Stage::LogFlushed, switches);
            let outcome = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            };
            append.callback.log_io_completed(outcome);
        }
    }
}

/// Start the writer thread for `backend`; the thread ends when `tx` and its clones drop.
pub(super) fn start(
    backend: Arc<dyn Backend>,
    tail: Arc<Mutex<Tail>>,
    stages: Arc<Stages>,
) -> std::io::Result<(Sender<Op>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = Writer {
        backend,
        tail,
        stages,
        poisoned: None,
    };
    let handle = std::thread::Builder::new()
        .name("whip-log".into())
        .spawn(move || writer.run(rx))?;
    Ok((tx, handle))
}
