//! Applied writes kept in memory in front of a storage engine's state machine, handed to
//! the engine in one commit when the state machine is made durable (every
//! `STATE_DURABLE_EVERY_MS`), when they exceed `STATE_WRITE_BACK_BYTES_MAX`, or before a
//! dump.
//!
//! Why: the engine's commit per applied batch (a redb write transaction, non-durable) was
//! about half of the apply time, and every member of a cell pays it for every batch. A
//! non-durable commit already reverts on a crash (the log replays what it lost, from the
//! applied log id stored with the state), so keeping the same writes in memory until the
//! durable commit loses nothing a crash did not already lose.
//!
//! Invariants:
//! - A reader holds the pending writes' read lock for its whole life and opens the engine's
//!   reader under it, so the engine's state and the pending writes it sees belong together:
//!   a hand-off to the engine takes the write lock.
//! - The scan memo records, per scan start, a key up to which the merged view (pending
//!   writes over the engine) has no live row: the rows a queue's consumers deleted. A
//!   commit that puts a key inside a recorded range drops that record; a hand-off leaves
//!   the merged view as it was, so the records stay true.
//!
//! Never: answer a read from the engine alone, or drop pending writes except by handing
//! them to the engine or replacing the whole state.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};

use super::{Backend, BackendResult, LogRows, SmRead, WriteSet};
use crate::limits;

/// State-machine rows, in key order.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// A [`Backend`] whose state-machine commits gather in memory (see the module docs); the
/// log and metadata go straight to the engine.
pub struct WriteBack {
    inner: Box<dyn Backend>,
    pending: RwLock<Pending>,
    memo: ScanMemo,
}

#[derive(Default)]
struct Pending {
    writes: WriteSet,
    /// Bytes of keys and values merged since the last hand-off (overwrites counted again).
    bytes: usize,
    /// A hand-off since the last durable commit was not durable: a durable commit with no
    /// pending writes still has something to make durable.
    undurable: bool,
}

impl WriteBack {
    /// Put a write-back layer in front of `inner`'s state machine.
    pub fn new(inner: Box<dyn Backend>) -> Self {
        WriteBack {
            inner,
            pending: RwLock::default(),
            memo: ScanMemo::default(),
        }
    }

    fn write_lock(&self) -> std::sync::RwLockWriteGuard<'_, Pending> {
        self.pending.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hand every pending write to the engine in one commit (the write lock held, so no
    /// reader sees the engine without them). A failed commit is a storage error that stops
    /// the cell's Raft, as a failed commit of one batch did before this layer.
    fn hand_off(&self, pending: &mut Pending, durable: bool) -> BackendResult<()> {
        let writes = std::mem::take(&mut pending.writes);
        pending.bytes = 0;
        // Nothing pending and nothing handed over undurably: an idle cell's shutdown (or a
        // dump) costs no commit.
        if writes.is_empty() && !(durable && pending.undurable) {
            return Ok(());
        }
        self.inner.sm_commit(writes, durable)?;
        pending.undurable = !durable;
        Ok(())
    }
}

impl Backend for WriteBack {
    fn log_append(&self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        self.inner.log_append(entries)
    }

    fn log_range(&self, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        self.inner.log_range(from, to)
    }

    fn log_try_range(&self, from: u64, to: u64) -> Option<BackendResult<LogRows>> {
        self.inner.log_try_range(from, to)
    }

    fn sm_quick(&self) -> bool {
        // Nobody holding the lock (a dump, a hand-off, a reader), and room for a batch
        // below the hand-off bound: the apply will neither wait nor write to the engine.
        let room = limits::STATE_WRITE_BACK_BYTES_MAX - limits::STATE_APPLY_INLINE_ROOM_BYTES;
        match self.pending.try_write() {
            Ok(pending) => pending.bytes < room,
            Err(_) => false,
        }
    }

    fn log_last(&self) -> BackendResult<Option<(u64, Vec<u8>)>> {
        self.inner.log_last()
    }

    fn log_truncate(&self, from: u64) -> BackendResult<()> {
        self.inner.log_truncate(from)
    }

    fn log_purge(&self, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()> {
        self.inner.log_purge(upto, meta)
    }

    fn meta_get(&self, name: &str) -> BackendResult<Option<Vec<u8>>> {
        self.inner.meta_get(name)
    }

    fn meta_put(&self, name: &str, value: Vec<u8>) -> BackendResult<()> {
        self.inner.meta_put(name, value)
    }

    fn sm_reader(&self) -> BackendResult<Box<dyn SmRead + '_>> {
        let pending = self.pending.read().unwrap_or_else(PoisonError::into_inner);
        let inner = self.inner.sm_reader()?;
        Ok(Box::new(Reader {
            pending,
            inner,
            memo: &self.memo,
        }))
    }

    fn sm_commit(&self, writes: WriteSet, durable: bool) -> BackendResult<()> {
        let mut pending = self.write_lock();
        self.memo.forget_revived(&writes);
        for (key, value) in writes {
            pending.bytes += key.len() + value.as_ref().map_or(0, Vec::len);
            pending.writes.insert(key, value);
        }
        if durable || pending.bytes >= limits::STATE_WRITE_BACK_BYTES_MAX {
            return self.hand_off(&mut pending, durable);
        }
        Ok(())
    }

    fn sm_replace(&self, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> BackendResult<()> {
        let mut pending = self.write_lock();
        *pending = Pending::default();
        self.memo.clear();
        self.inner.sm_replace(pairs)
    }

    fn sm_dump(&self) -> BackendResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut pending = self.write_lock();
        self.hand_off(&mut pending, false)?;
        self.inner.sm_dump()
    }
}

/// A read view: the pending writes over the engine's reader, both fixed for its life.
struct Reader<'a> {
    pending: RwLockReadGuard<'a, Pending>,
    inner: Box<dyn SmRead + 'a>,
    memo: &'a ScanMemo,
}

impl SmRead for Reader<'_> {
    fn get(&self, key: &[u8]) -> BackendResult<Option<Vec<u8>>> {
        match self.pending.writes.get(key) {
            Some(value) => Ok(value.clone()),
            None => self.inner.get(key),
        }
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> BackendResult<Rows> {
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        // Nothing is live from `start` through the recorded key: begin after it.
        let from = match self.memo.dead_through(start) {
            Some(last) if last.as_slice() < end => [last.as_slice(), &[0]].concat(),
            Some(_) => return Ok(Vec::new()),
            None => start.to_vec(),
        };
        let mut walk = Walk {
            pending: self
                .pending
                .writes
                .range(from.clone()..end.to_vec())
                .peekable(),
            stored: VecDeque::new(),
            cursor: Some(from),
            dead_through: None,
            found: false,
        };
        let mut out = Vec::new();
        while out.len() < limit {
            let want = (limit - out.len()).saturating_add(STORED_READ_AHEAD);
            match walk.next(|from, n| self.inner.scan(from, end, n), want)? {
                Some(row) => out.push(row),
                None => break,
            }
        }
        if let Some(last) = walk.dead_through {
            self.memo.record(start, last);
        }
        Ok(out)
    }
}

/// Stored rows read past what a scan still needs, so a run of rows deleted by pending
/// writes does not cost one engine read per row.
const STORED_READ_AHEAD: usize = 8;

/// One scan's merge of the pending writes (lazily, in key order) with the stored rows (read
/// in chunks), and the last key it stepped over before its first live row.
struct Walk<'a, I: Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>> {
    pending: std::iter::Peekable<I>,
    stored: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Where the next stored chunk starts; `None` once the stored rows are exhausted.
    cursor: Option<Vec<u8>>,
    /// The last key stepped over (deleted) before the first live row.
    dead_through: Option<Vec<u8>>,
    /// A live row was returned: keys stepped over from now on are not a dead prefix.
    found: bool,
}

impl<'a, I: Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>> Walk<'a, I> {
    /// The next live row of the merged view, or `None` at the end of the range.
    fn next(
        &mut self,
        read: impl Fn(&[u8], usize) -> BackendResult<Rows>,
        want: usize,
    ) -> BackendResult<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            if self.stored.is_empty()
                && let Some(from) = self.cursor.take()
            {
                let chunk = read(&from, want)?;
                if chunk.len() >= want
                    && let Some((last, _)) = chunk.last()
                {
                    self.cursor = Some([last.as_slice(), &[0]].concat());
                }
                self.stored = chunk.into();
            }
            let order = match (self.stored.front(), self.pending.peek()) {
                (None, None) => return Ok(None),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((s, _)), Some((p, _))) => s.cmp(p),
            };
            if order == std::cmp::Ordering::Less {
                let row = self.stored.pop_front().expect("peeked");
                return Ok(Some(self.live(row)));
            }
            if order == std::cmp::Ordering::Equal {
                // The pending write replaces (or deletes) the stored row.
                self.stored.pop_front();
            }
            let (key, value) = self.pending.next().expect("peeked");
            match value {
                Some(v) => return Ok(Some(self.live((key.clone(), v.clone())))),
                None if !self.found => self.dead_through = Some(key.clone()),
                None => {}
            }
        }
    }

    fn live(&mut self, row: (Vec<u8>, Vec<u8>)) -> (Vec<u8>, Vec<u8>) {
        self.found = true;
        row
    }
}

/// Per scan start, the last key of a range with no live row (see the module docs).
#[derive(Default)]
struct ScanMemo(Mutex<HashMap<Vec<u8>, Vec<u8>>>);

impl ScanMemo {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Vec<u8>>> {
        // A panic while holding it leaves records that are still true: ignore poisoning.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn dead_through(&self, start: &[u8]) -> Option<Vec<u8>> {
        self.map().get(start).cloned()
    }

    fn record(&self, start: &[u8], last: Vec<u8>) {
        let mut map = self.map();
        if map.len() >= limits::STATE_SCAN_MEMO_MAX && !map.contains_key(start) {
            map.clear();
        }
        map.insert(start.to_vec(), last);
    }

    /// Drop every record whose range `writes` puts a live row into.
    fn forget_revived(&self, writes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
        self.map().retain(|start, last| {
            !writes
                .range(start.clone()..=last.clone())
                .any(|(_, v)| v.is_some())
        });
    }

    fn clear(&self) {
        self.map().clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::storage::RedbBackend;

    #[derive(Clone, Debug)]
    enum Op {
        /// Commit puts (`Some`) and deletes of small keys; `true` makes it durable.
        Commit(Vec<(u8, Option<u8>)>, bool),
        Scan(u8, u8, usize),
        Get(u8),
        Dump,
    }

    fn op() -> impl Strategy<Value = Op> {
        let write = (0..24u8, proptest::option::of(any::<u8>()));
        prop_oneof![
            4 => (proptest::collection::vec(write, 1..6), proptest::bool::weighted(0.2))
                .prop_map(|(w, d)| Op::Commit(w, d)),
            4 => (0..24u8, 0..26u8, 1..6usize).prop_map(|(a, b, n)| Op::Scan(a, b, n)),
            1 => (0..24u8).prop_map(Op::Get),
            1 => Just(Op::Dump),
        ]
    }

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    fn expect_scan(model: &Model, a: u8, b: u8, n: usize) -> Rows {
        model
            .range(vec![a]..)
            .take_while(|(k, _)| k.as_slice() < [b].as_slice())
            .take(n)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn rows(model: &Model) -> Rows {
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    fn commit(backend: &WriteBack, model: &mut Model, writes: &[(u8, Option<u8>)], durable: bool) {
        let set: WriteSet = writes
            .iter()
            .map(|(k, v)| (vec![*k], v.map(|v| vec![v])))
            .collect();
        for (k, v) in &set {
            match v {
                Some(v) => model.insert(k.clone(), v.clone()),
                None => model.remove(k),
            };
        }
        backend.sm_commit(set, durable).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Reads through the write-back layer (gets, and scans repeated from the same
        /// starts so the dead-prefix records are used and revived) see exactly the merged
        /// state, before and after hand-offs to the engine, and the engine ends up with it.
        #[test]
        fn reads_agree_with_the_committed_state(
            stored in proptest::collection::btree_map(0..24u8, any::<u8>(), 0..20),
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let backend = WriteBack::new(Box::new(RedbBackend::open(dir.path(), false).unwrap()));
            let mut model = Model::new();
            let initial: Vec<_> = stored.iter().map(|(k, v)| (*k, Some(*v))).collect();
            commit(&backend, &mut model, &initial, true);
            for op in ops {
                match op {
                    Op::Commit(writes, durable) => commit(&backend, &mut model, &writes, durable),
                    Op::Scan(a, b, n) => {
                        let got = backend.sm_reader().unwrap().scan(&[a], &[b], n).unwrap();
                        prop_assert_eq!(got, expect_scan(&model, a, b, n));
                    }
                    Op::Get(k) => {
                        let got = backend.sm_reader().unwrap().get(&[k]).unwrap();
                        prop_assert_eq!(got, model.get(&vec![k]).cloned());
                    }
                    Op::Dump => prop_assert_eq!(backend.sm_dump().unwrap(), rows(&model)),
                }
            }
            prop_assert_eq!(backend.sm_dump().unwrap(), rows(&model));
            let engine = backend.inner.sm_reader().unwrap().scan(&[0], &[255], 99).unwrap();
            prop_assert_eq!(engine, rows(&model));
        }
    }

    /// What only sits in the layer's memory is lost with the process unless a durable
    /// commit hands it over: the empty durable commit of a clean shutdown does.
    #[test]
    fn an_empty_durable_commit_keeps_what_was_pending() {
        let dir = tempfile::tempdir().unwrap();
        let open = || WriteBack::new(Box::new(RedbBackend::open(dir.path(), false).unwrap()));
        let key = |k: u8| -> WriteSet { [(vec![k], Some(vec![k]))].into_iter().collect() };
        let read = |b: &WriteBack, k: u8| b.inner.sm_reader().unwrap().get(&[k]).unwrap();
        let backend = open();
        backend.sm_commit(key(1), false).unwrap();
        drop(backend);
        assert_eq!(
            read(&open(), 1),
            None,
            "a pending write dies with the process"
        );
        let backend = open();
        backend.sm_commit(key(2), false).unwrap();
        backend.sm_commit(WriteSet::default(), true).unwrap();
        drop(backend);
        assert_eq!(
            read(&open(), 2),
            Some(vec![2]),
            "the shutdown's commit kept it"
        );
    }

    /// A queue's consumers delete its head row by row: each scan for the head reads past
    /// the deleted rows once, not again at every scan.
    #[test]
    fn a_consumed_queue_head_is_stepped_over_once() {
        let dir = tempfile::tempdir().unwrap();
        let backend = WriteBack::new(Box::new(RedbBackend::open(dir.path(), false).unwrap()));
        let rows: WriteSet = (0..2_000u32)
            .map(|i| (i.to_be_bytes().to_vec(), Some(vec![1])))
            .collect();
        backend.sm_commit(rows, true).unwrap();
        let (start, end) = (0u32.to_be_bytes(), u32::MAX.to_be_bytes());
        for i in 0..2_000u32 {
            let head = backend.sm_reader().unwrap().scan(&start, &end, 1).unwrap();
            assert_eq!(head, vec![(i.to_be_bytes().to_vec(), vec![1])]);
            let delete: WriteSet = [(i.to_be_bytes().to_vec(), None)].into();
            backend.sm_commit(delete, false).unwrap();
        }
        assert!(
            backend
                .sm_reader()
                .unwrap()
                .scan(&start, &end, 1)
                .unwrap()
                .is_empty()
        );
        let memo = backend.memo.dead_through(&start);
        assert_eq!(memo, Some(1_999u32.to_be_bytes().to_vec()));
    }
}
