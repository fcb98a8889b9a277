//! The replicated state machine (openraft `RaftStateMachine`): `whip_board::apply` inside
//! one storage commit per applied batch of entries, together with the last-applied log id.

use std::cell::RefCell;
use std::io::Cursor;
use std::path::PathBuf;
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    EntryPayload, ErrorSubject, ErrorVerb, RaftSnapshotBuilder, SnapshotMeta, StoredMembership,
};
use serde::{Deserialize, Serialize};
use whip_board::{Outcome, Stamp, Txn};

use super::{Backend, BackendError, BackendResult, SmRead, WriteSet, blocking};
use crate::limits;
use crate::stages::{Stage, Stages};
use crate::types::{BatchOutcome, Entry, LogId, NodeId, StorageError, TypeConfig, decode, encode};

/// Where the state machine records what it has applied, inside its own keyspace. Board keys
/// never start with 0xff, so this key is out of their way and commits with their writes.
const APPLIED_KEY: &[u8] = b"\xff\xffapplied";
pub(crate) const SNAPSHOT_FILE: &str = "snapshot.bin";

/// What the state machine has applied: stored atomically with every commit.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Applied {
    log_id: Option<LogId>,
    membership: StoredMembership<NodeId, openraft::BasicNode>,
    /// The last stamp time applied; stamps never go below it.
    time_ms: u64,
}

/// A snapshot as stored on disk and sent to followers.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<NodeId, openraft::BasicNode>,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A read-only view of the applied state, shared with the service for reads and ticks.
#[derive(Clone)]
pub struct StateMachineView {
    backend: Arc<dyn Backend>,
    applied: Arc<tokio::sync::watch::Sender<u64>>,
}

impl StateMachineView {
    /// Answer a board query against the applied state at `now_ms`.
    pub async fn query(
        &self,
        now_ms: u64,
        query: whip_board::Query,
    ) -> BackendResult<whip_board::QueryResult> {
        let backend = self.backend.clone();
        blocking(move || {
            let txn = Overlay::new(backend.as_ref());
            let result = whip_board::query(&txn, now_ms, &query);
            txn.finish().map(|_| result)
        })
        .await
    }

    /// Changes after each applied batch (and after an installed snapshot) to the last
    /// applied log index, which every replica of the cell reaches in the same order: what
    /// watches and waits wait on instead of polling.
    pub fn applied(&self) -> tokio::sync::watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// The last applied stamp time.
    pub async fn applied_time_ms(&self) -> BackendResult<u64> {
        let backend = self.backend.clone();
        blocking(move || Ok(read_applied(backend.as_ref())?.time_ms)).await
    }
}

/// One dump of a cell's applied state: every pair, and the last applied log index they
/// hold (the pairs include the applied record, so a restore keeps its stamp time).
pub struct Dump {
    /// The last log index applied in `pairs` (0 for a cell that applied nothing).
    pub revision: u64,
    /// Every state-machine pair, in key order.
    pub pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl StateMachineView {
    /// Make the applied state durable now (the write-back layer's pending writes and the
    /// applied point in one durable commit): what a clean shutdown does, so the next start
    /// does not apply again what this run applied. Call it once Raft has stopped.
    pub async fn make_durable(&self) -> BackendResult<()> {
        let backend = self.backend.clone();
        blocking(move || backend.sm_commit(super::WriteSet::default(), true)).await
    }

    /// Dump the applied state at one applied point: the write-back layer hands its pending
    /// writes over and the engine is read under its write lock, so no apply lands between
    /// the first pair read and the last. Applies wait for the dump (as they do for a Raft
    /// snapshot build) and go on after it.
    pub async fn dump(&self) -> BackendResult<Dump> {
        let backend = self.backend.clone();
        blocking(move || {
            let pairs = backend.sm_dump()?;
            let revision = match pairs.iter().find(|(k, _)| k.as_slice() == APPLIED_KEY) {
                Some((_, v)) => decode::<Applied>(v)
                    .map_err(|e| BackendError::new("decode applied", e))?
                    .log_id
                    .map_or(0, |l| l.index),
                None => 0,
            };
            Ok(Dump { revision, pairs })
        })
        .await
    }
}

/// The bytes of `snapshot.bin` for a new cell restored from `pairs` dumped at `revision`:
/// the same state, at log index `revision` of term 0, with `voters` (id → address) as its
/// membership. A member opening a data directory holding only this file installs it
/// (`recover_from_snapshot`), and openraft purges its empty log up to `revision`, so the
/// cell's next entries, and with them every new fence, come after the old ones.
pub(crate) fn restored_snapshot(
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    revision: u64,
    voters: &std::collections::BTreeMap<NodeId, String>,
) -> Vec<u8> {
    let first = *voters
        .keys()
        .next()
        .expect("callers check a restored cell has a voter");
    let log_id = LogId::new(openraft::CommittedLeaderId::new(0, first), revision);
    let nodes: std::collections::BTreeMap<NodeId, openraft::BasicNode> = voters
        .iter()
        .map(|(id, addr)| (*id, openraft::BasicNode { addr: addr.clone() }))
        .collect();
    let ids = nodes.keys().copied().collect();
    let membership = openraft::Membership::new(vec![ids], nodes);
    let meta = SnapshotMeta {
        last_log_id: Some(log_id),
        last_membership: StoredMembership::new(Some(log_id), membership),
        snapshot_id: format!("restored-{revision}"),
    };
    encode(&SnapshotFile { meta, pairs })
}

/// The state machine of one cell.
pub struct SmStore {
    backend: Arc<dyn Backend>,
    dir: PathBuf,
    applied: Applied,
    /// When the state machine's own store was last made durable. Between those points a
    /// crash loses applied state, which replay from the log (or the snapshot) restores.
    last_durable: std::time::Instant,
    /// Where apply durations go (`applied` stage).
    stages: Arc<Stages>,
    /// The last applied log index, sent after every apply ([`StateMachineView::applied`]).
    applied_signal: Arc<tokio::sync::watch::Sender<u64>>,
}

fn read_applied(backend: &dyn Backend) -> BackendResult<Applied> {
    match backend.sm_reader()?.get(APPLIED_KEY)? {
        Some(bytes) => decode(&bytes).map_err(|e| BackendError::new("decode applied", e)),
        None => Ok(Applied::default()),
    }
}

fn sm_err(verb: ErrorVerb) -> impl Fn(BackendError) -> StorageError {
    move |e| {
        openraft::StorageIOError::new(
            ErrorSubject::StateMachine,
            verb,
            openraft::AnyError::new(&e),
        )
        .into()
    }
}

impl SmStore {
    /// Open the state machine over `backend`; `dir` holds the current snapshot file.
    pub async fn open(backend: Arc<dyn Backend>, dir: PathBuf) -> Result<Self, StorageError> {
        let b = backend.clone();
        let applied = blocking(move || read_applied(b.as_ref()))
            .await
            .map_err(sm_err(ErrorVerb::Read))?;
        let mut store = SmStore {
            backend,
            dir,
            applied,
            last_durable: std::time::Instant::now(),
            stages: Arc::default(),
            applied_signal: Arc::new(tokio::sync::watch::channel(0).0),
        };
        store.recover_from_snapshot().await?;
        store.signal_applied();
        Ok(store)
    }

    /// Record apply durations into `stages` (the runtime's, for `whip cell status`).
    pub fn with_stages(mut self, stages: Arc<Stages>) -> Self {
        self.stages = stages;
        self
    }

    /// After a crash the state machine's own store may be older than the durable snapshot
    /// (its commits are mostly non-durable, and the log below the snapshot may be purged):
    /// start from the snapshot then.
    async fn recover_from_snapshot(&mut self) -> Result<(), StorageError> {
        let Some(snapshot) = self.get_current_snapshot().await? else {
            return Ok(());
        };
        if snapshot.meta.last_log_id <= self.applied.log_id {
            return Ok(());
        }
        tracing::info!(snapshot = ?snapshot.meta.last_log_id, applied = ?self.applied.log_id,
            "state behind the snapshot; installing it");
        self.install_snapshot(&snapshot.meta, snapshot.snapshot)
            .await
    }

    /// Tell watches and waits that the state moved to the applied log index.
    fn signal_applied(&self) {
        let index = self.applied.log_id.map_or(0, |id| id.index);
        self.applied_signal.send_if_modified(|at| {
            let moved = *at != index;
            *at = index;
            moved
        });
    }

    /// A read-only view for queries.
    pub fn view(&self) -> StateMachineView {
        StateMachineView {
            backend: self.backend.clone(),
            applied: self.applied_signal.clone(),
        }
    }

    fn snapshot_path(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_FILE)
    }
}

/// Apply `entries` on top of `applied`, all in one write set.
fn apply_entries(
    backend: &dyn Backend,
    mut applied: Applied,
    entries: Vec<Entry>,
    durable: bool,
) -> BackendResult<(Applied, Vec<BatchOutcome>)> {
    let mut txn = Overlay::new(backend);
    let mut responses = Vec::with_capacity(entries.len());
    for entry in entries {
        // Every stamp (and so every fence) is derived from the index: an entry applied at
        // or below the last applied index would hand out a fence again.
        assert!(
            applied
                .log_id
                .is_none_or(|last| entry.log_id.index > last.index),
            "apply of log index {} after {:?}: the log index must grow",
            entry.log_id.index,
            applied.log_id
        );
        applied.log_id = Some(entry.log_id);
        let response = match entry.payload {
            EntryPayload::Blank => BatchOutcome::default(),
            EntryPayload::Membership(m) => {
                applied.membership = StoredMembership::new(Some(entry.log_id), m);
                BatchOutcome::default()
            }
            EntryPayload::Normal(batch) => {
                applied.time_ms = applied.time_ms.max(batch.time_ms);
                let outcomes: Vec<Outcome> = batch
                    .requests
                    .iter()
                    .enumerate()
                    .map(|(position, request)| {
                        let position = u32::try_from(position).expect("batch length is bounded");
                        let stamp =
                            Stamp::of_request(entry.log_id.index, position, applied.time_ms);
                        // Follow-ups are in the cell's outbox by now; its executor
                        // finds them there (`crate::follow`).
                        whip_board::apply(&mut txn, stamp, request).outcome
                    })
                    .collect();
                BatchOutcome { outcomes }
            }
        };
        responses.push(response);
    }
    txn.put(APPLIED_KEY, &encode(&applied));
    let writes = txn.finish()?;
    backend.sm_commit(writes, durable)?;
    Ok((applied, responses))
}

/// Builds one snapshot from a dump taken while no apply ran, so the pairs and the applied
/// log id agree even though openraft builds snapshots concurrently with apply.
pub struct SnapshotBuilder {
    path: PathBuf,
    applied: Applied,
    pairs: BackendResult<Vec<(Vec<u8>, Vec<u8>)>>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let pairs =
            std::mem::replace(&mut self.pairs, Ok(Vec::new())).map_err(sm_err(ErrorVerb::Read))?;
        let last = self.applied.log_id;
        let snapshot_id = match last {
            Some(l) => format!("{}-{}", l.leader_id.term, l.index),
            None => "0-0".to_string(),
        };
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: self.applied.membership.clone(),
            snapshot_id,
        };
        let bytes = encode(&SnapshotFile {
            meta: meta.clone(),
            pairs,
        });
        write_durably(self.path.clone(), bytes.clone())
            .await
            .map_err(sm_err(ErrorVerb::Write))?;
        tracing::info!(
            index = last.map(|l| l.index),
            bytes = bytes.len(),
            "snapshot built"
        );
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

/// Write a file, fsync it and rename it into place, so a crash never leaves half of one
/// (TRAPS.md 4: the log is purged once a snapshot exists).
async fn write_durably(path: PathBuf, bytes: Vec<u8>) -> BackendResult<()> {
    blocking(move || {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let create = || {
            std::os::unix::fs::OpenOptionsExt::mode(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true),
                0o600,
            )
            .open(&tmp)
        };
        let mut file = super::descriptors::opening("snapshot", create)
            .map_err(|e| BackendError::new("write snapshot", e))?;
        file.write_all(&bytes)
            .map_err(|e| BackendError::new("write snapshot", e))?;
        file.sync_all()
            .map_err(|e| BackendError::new("sync snapshot", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| BackendError::new("rename snapshot", e))?;
        if let Some(dir) = path.parent() {
            super::descriptors::opening("snapshot directory", || std::fs::File::open(dir))
                .and_then(|d| d.sync_all())
                .map_err(|e| BackendError::new("sync dir", e))?;
        }
        Ok(())
    })
    .await
}

impl RaftStateMachine<TypeConfig> for SmStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<NodeId, openraft::BasicNode>), StorageError> {
        Ok((self.applied.log_id, self.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<BatchOutcome>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let (backend, applied) = (self.backend.clone(), self.applied.clone());
        let interval = std::time::Duration::from_millis(limits::STATE_DURABLE_EVERY_MS);
        let durable = self.last_durable.elapsed() >= interval;
        let (started, started_on) = (std::time::Instant::now(), crate::stages::here());
        let run = move || {
            apply_entries(backend.as_ref(), applied, entries, durable)
                .map(|(applied, responses)| (applied, responses, crate::stages::here()))
        };
        // A batch that only gathers in memory (the write-back layer) is CPU work of a few
        // hundred µs: it runs here, on the state machine's task, when the layer says it will
        // neither wait for a lock nor hand its writes to the engine. The periodic durable
        // commit, and any apply that might wait, go to the blocking pool (TRAPS.md 13).
        let quick = !durable && self.backend.sm_quick();
        let ran = if quick { run() } else { blocking(run).await };
        let (applied, responses, applied_on) = ran.map_err(sm_err(ErrorVerb::Write))?;
        self.stages.record(Stage::Applied, started.elapsed());
        // There to the blocking thread and back, when it went there.
        let switches = u64::from(applied_on != started_on) + crate::stages::switched(applied_on);
        self.stages.hop(Stage::Applied, switches);
        if durable {
            self.last_durable = std::time::Instant::now();
        }
        self.applied = applied;
        self.signal_applied();
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        let backend = self.backend.clone();
        let pairs = blocking(move || backend.sm_dump()).await;
        SnapshotBuilder {
            path: self.snapshot_path(),
            applied: self.applied.clone(),
            pairs,
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        let file: SnapshotFile = decode(&bytes)
            .map_err(|e| sm_err(ErrorVerb::Read)(BackendError::new("decode snapshot", e)))?;
        let mut pairs = file.pairs;
        let mut applied = pairs
            .iter()
            .find(|(k, _)| k.as_slice() == APPLIED_KEY)
            .map(|(_, v)| decode::<Applied>(v))
            .transpose()
            .map_err(|e| sm_err(ErrorVerb::Read)(BackendError::new("decode snapshot", e)))?
            .unwrap_or_default();
        applied.log_id = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        pairs.retain(|(k, _)| k.as_slice() != APPLIED_KEY);
        pairs.push((APPLIED_KEY.to_vec(), encode(&applied)));
        write_durably(self.snapshot_path(), bytes)
            .await
            .map_err(sm_err(ErrorVerb::Write))?;
        let backend = self.backend.clone();
        blocking(move || backend.sm_replace(pairs))
            .await
            .map_err(sm_err(ErrorVerb::Write))?;
        self.applied = applied;
        self.signal_applied();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let path = self.snapshot_path();
        let read = move || super::descriptors::opening("snapshot", || std::fs::read(&path));
        let bytes = blocking(move || match read() {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(BackendError::new("read snapshot", e)),
        })
        .await
        .map_err(sm_err(ErrorVerb::Read))?;
        let Some(bytes) = bytes else { return Ok(None) };
        let file: SnapshotFile = decode(&bytes)
            .map_err(|e| sm_err(ErrorVerb::Read)(BackendError::new("decode snapshot", e)))?;
        Ok(Some(Snapshot {
            meta: file.meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}

/// The first `limit` rows of `base` (stored, sorted) overlaid with `pending` (sorted
/// writes: `None` deletes), in key order.
fn merge(
    base: Vec<(Vec<u8>, Vec<u8>)>,
    pending: &[(&Vec<u8>, &Option<Vec<u8>>)],
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::with_capacity(limit.min(base.len() + pending.len()));
    let mut base = base.into_iter().peekable();
    let mut pending = pending.iter().peekable();
    while out.len() < limit {
        let order = match (base.peek(), pending.peek()) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((b, _)), Some((p, _))) => b.cmp(p),
        };
        if order == std::cmp::Ordering::Equal {
            // The pending write replaces (or deletes) the stored row.
            base.next();
        }
        if order == std::cmp::Ordering::Less {
            out.extend(base.next());
        } else if let Some((k, Some(v))) = pending.next() {
            out.push(((*k).clone(), v.clone()));
        }
    }
    out
}

/// A board [`Txn`] over the backend: reads go to the backend, writes gather in a write set
/// that commits atomically at the end. The first backend error poisons the overlay, so a
/// batch decided on a failed read is never committed.
struct Overlay<'a> {
    reader: Option<Box<dyn SmRead + 'a>>,
    writes: WriteSet,
    error: RefCell<Option<BackendError>>,
    /// Per scanned `start`: the last key of the run of stored rows from `start` on that
    /// all have a pending write (a write set entry never goes away, so the run stays
    /// shadowed for the overlay's life). A queue's head scan (a batch of claims, each
    /// deleting the head it took) then reads past the taken rows instead of reading all
    /// of them again: linear work per batch instead of quadratic.
    shadowed: RefCell<std::collections::HashMap<Vec<u8>, Vec<u8>>>,
}

impl<'a> Overlay<'a> {
    fn new(backend: &'a dyn Backend) -> Self {
        let (reader, error) = match backend.sm_reader() {
            Ok(reader) => (Some(reader), None),
            Err(e) => (None, Some(e)),
        };
        Overlay {
            reader,
            writes: WriteSet::new(),
            error: RefCell::new(error),
            shadowed: RefCell::default(),
        }
    }

    fn read<T: Default>(&self, f: impl FnOnce(&dyn SmRead) -> BackendResult<T>) -> T {
        match &self.reader {
            Some(reader) => self.note(f(reader.as_ref())),
            None => T::default(),
        }
    }

    fn note<T: Default>(&self, result: BackendResult<T>) -> T {
        result.unwrap_or_else(|e| {
            self.error.borrow_mut().get_or_insert(e);
            T::default()
        })
    }

    fn finish(self) -> BackendResult<WriteSet> {
        match self.error.into_inner() {
            Some(e) => Err(e),
            None => Ok(self.writes),
        }
    }
}

impl Txn for Overlay<'_> {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        match self.writes.get(key) {
            Some(value) => value.clone(),
            None => self.read(|r| r.get(key)),
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
    }

    fn delete(&mut self, key: &[u8]) {
        self.writes.insert(key.to_vec(), None);
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        if start >= end || limit == 0 {
            return Vec::new();
        }
        let pending: Vec<_> = self.writes.range(start.to_vec()..end.to_vec()).collect();
        // Stored rows up to the memo's key all have pending writes: read after it.
        let from = match self.shadowed.borrow().get(start) {
            Some(last) => [last.as_slice(), &[0]].concat(),
            None => start.to_vec(),
        };
        // Pending deletes can hide at most that many stored rows, so reading that many
        // more than `limit` is enough to fill `limit` after merging.
        let deletes = pending
            .iter()
            .filter(|(k, v)| v.is_none() && k.as_slice() >= from.as_slice())
            .count();
        let base = match from.as_slice() < end {
            true => self.read(|r| r.scan(&from, end, limit.saturating_add(deletes))),
            false => Vec::new(),
        };
        let run = base
            .iter()
            .take_while(|(k, _)| self.writes.contains_key(k))
            .last()
            .map(|(k, _)| k.clone());
        if let Some(last) = run {
            self.shadowed.borrow_mut().insert(start.to_vec(), last);
        }
        merge(base, &pending, limit)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use whip_board::Txn;

    use super::*;
    use crate::storage::{StorageKind, open_backend};

    #[derive(Clone, Debug)]
    enum Op {
        Put(u8, u8),
        Delete(u8),
        Scan(u8, u8, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..24u8, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
            (0..24u8).prop_map(Op::Delete),
            (0..24u8, 0..26u8, 0..6usize).prop_map(|(a, b, n)| Op::Scan(a, b, n)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// An overlay's scans (repeated, as a batch of claims makes them) see exactly the
        /// stored rows overlaid with the pending writes.
        #[test]
        fn overlay_scans_agree_with_the_merged_view(
            stored in proptest::collection::btree_map(0..24u8, any::<u8>(), 0..20),
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let backend = open_backend(StorageKind::Redb, dir.path()).unwrap();
            let rows: WriteSet = stored.iter().map(|(k, v)| (vec![*k], Some(vec![*v]))).collect();
            backend.sm_commit(rows, false).unwrap();
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> =
                stored.iter().map(|(k, v)| (vec![*k], vec![*v])).collect();
            let mut overlay = Overlay::new(backend.as_ref());
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        overlay.put(&[k], &[v]);
                        model.insert(vec![k], vec![v]);
                    }
                    Op::Delete(k) => {
                        overlay.delete(&[k]);
                        model.remove(&vec![k]);
                    }
                    Op::Scan(a, b, n) => {
                        let want: Vec<_> = model
                            .range(vec![a]..)
                            .take_while(|(k, _)| k.as_slice() < [b].as_slice())
                            .take(n)
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        prop_assert_eq!(overlay.scan(&[a], &[b], n), want);
                    }
                }
            }
        }
    }
}
