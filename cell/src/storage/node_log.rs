//! One Raft log for every cell a node hosts: the records of all its cells in one stream of
//! preallocated segment files, group-committed (one `pwrite` and one `fdatasync` for every
//! write queued across cells), each record tagged with its cell.
//!
//! A segment is a file `{first sequence:020}.seg` under the node's log directory, holding
//! records back to back:
//!
//! ```text
//! len: u32 LE | crc32: u32 LE | seq: u64 LE | kind: u8 | cell: u64 LE | body
//! ```
//!
//! `seq` numbers the records of the node (not a cell's log index); the crc covers `seq`,
//! kind, cell and body, seeded with the previous record's crc in the same segment, as in
//! the per-cell [`super::segment_log`]. The kinds (pinned codes, [`Kind`]):
//! - `1` entry: `index: u64 LE | payload` (an entry at an index the cell already holds
//!   replaces it and everything after it, as an openraft append over a conflict does);
//! - `2` truncate: `from: u64 LE` (the cell's entries `>= from` are gone);
//! - `3` purge: `upto: u64 LE | meta` (entries `<= upto` are gone, and the metadata
//!   value, the last purged log id, is stored in the same record);
//! - `4` meta: `name_len: u16 LE | name | value` (vote, committed: the cell's Raft state);
//! - `5` reset: no body (the cell's entries and metadata are gone: its data directory was
//!   replaced, by a restore, since its records were written);
//! - `6` rewrite: as an entry, but it replaces only its own index: a live entry copied to
//!   the tail so that the old segment holding it can go.
//!
//! Each cell keeps its own index of entries and its own metadata; truncation, purge and
//! snapshots stay per cell. A segment is deleted once no cell has a live entry in it and
//! every older segment is gone: before that, the purge mark and metadata of every cell are
//! written again at the tail (a checkpoint), so a replay never needs a deleted record. An
//! idle cell that never purges would pin the oldest segment, and every later one behind
//! it: past `NODE_LOG_SEGMENTS_SOFT_MAX` segments, the oldest one's few live entries are
//! rewritten at the tail (`NODE_LOG_REWRITE_BYTES_MAX` at most per commit).
//!
//! Invariants:
//! - records are contiguous by `seq` across segments in file order, and a record counts
//!   only if its length fits, its `seq` follows and its chained crc matches: the first that
//!   fails ends the log (a torn group write is cut off at open, all of it after the tear);
//! - a write is acknowledged only after the `fdatasync` of the group holding it; after one
//!   failed write the log refuses every later one (poisoned), so nothing acknowledged can
//!   sit behind a hole;
//! - one group commits at a time; reads take the index lock only, never wait for a sync.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::segment_log::{
    Loc, create_segment, io, list_segments, open_segment, read_at, segment_name, sync_dir,
};
use super::{BackendError, BackendResult, LogRows};
use crate::disk_fault::DiskFaults;
use crate::limits;

/// The node log's directory inside a node's data directory.
pub const NODE_LOG_DIR: &str = "node-log";

const HEADER_BYTES: u64 = 16;
/// Kind and cell, in front of every record's body.
const TAG_BYTES: usize = 9;

/// What a record says (its stored code is pinned: never renumber).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Entry,
    Truncate,
    Purge,
    Meta,
    Reset,
    Rewrite,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Entry => 1,
            Kind::Truncate => 2,
            Kind::Purge => 3,
            Kind::Meta => 4,
            Kind::Reset => 5,
            Kind::Rewrite => 6,
        }
    }

    fn from_code(code: u8) -> Option<Kind> {
        match code {
            1 => Some(Kind::Entry),
            2 => Some(Kind::Truncate),
            3 => Some(Kind::Purge),
            4 => Some(Kind::Meta),
            5 => Some(Kind::Reset),
            6 => Some(Kind::Rewrite),
            _ => None,
        }
    }
}

/// One write of one cell, as queued and as replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Entries(Vec<(u64, Vec<u8>)>),
    Truncate(u64),
    Purge(u64, String, Vec<u8>),
    Meta(String, Vec<u8>),
    Reset,
    Rewrite(Vec<(u64, Vec<u8>)>),
}

/// One segment file. Reads and the group's write share the file through the `Arc`.
struct Segment {
    file: Arc<File>,
    path: PathBuf,
    /// Write offset: the end of the last valid record.
    end: u64,
    capacity: u64,
}

/// What the log knows of one cell.
#[derive(Default)]
struct CellState {
    index: BTreeMap<u64, Loc>,
    meta: BTreeMap<String, Vec<u8>>,
    /// The last purged index and its metadata value, re-logged by a checkpoint.
    purged: Option<(u64, String, Vec<u8>)>,
}

/// The segments and every cell's index.
struct Files {
    dir: PathBuf,
    segments: BTreeMap<u64, Segment>,
    cells: BTreeMap<u64, CellState>,
    /// Live entries per segment (by first sequence).
    live: BTreeMap<u64, usize>,
    last_crc: u32,
    next_seq: u64,
    faults: DiskFaults,
    poisoned: Option<String>,
    /// Data syncs so far (one per group).
    syncs: u64,
    /// `limits::NODE_LOG_SEGMENTS_SOFT_MAX` (a test lowers it).
    segments_soft_max: usize,
}

/// Writes waiting for the next group, and the groups' results.
#[derive(Default)]
struct Queue {
    pending: Vec<(u64, u64, Op)>,
    next_ticket: u64,
    results: BTreeMap<u64, Result<(), String>>,
    busy: bool,
}

/// The node's log. Cells reach it through [`CellLog`] handles.
pub struct NodeLog {
    queue: Mutex<Queue>,
    done: Condvar,
    files: Mutex<Files>,
}

impl std::fmt::Debug for NodeLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeLog")
    }
}

/// One cell's view of the node's log: the calls of the per-cell segment log.
#[derive(Clone)]
pub struct CellLog {
    log: Arc<NodeLog>,
    cell: u64,
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn put_named(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    let len = u16::try_from(name.len()).expect("a metadata name is short");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(value);
}

fn named(bytes: &[u8]) -> Option<(String, Vec<u8>)> {
    let len = usize::from(u16::from_le_bytes(bytes.get(0..2)?.try_into().ok()?));
    let name = std::str::from_utf8(bytes.get(2..2 + len)?).ok()?;
    Some((name.to_string(), bytes[2 + len..].to_vec()))
}

/// The records of one op of `cell`: `(kind, body)`, where an entry's body starts with its
/// index (the payload follows at `TAG_BYTES + 8` into the record's data).
fn bodies(op: &Op) -> Vec<(Kind, Vec<u8>)> {
    match op {
        Op::Entries(entries) => entry_bodies(Kind::Entry, entries),
        Op::Rewrite(entries) => entry_bodies(Kind::Rewrite, entries),
        Op::Truncate(from) => vec![(Kind::Truncate, from.to_le_bytes().to_vec())],
        Op::Purge(upto, name, value) => {
            let mut body = upto.to_le_bytes().to_vec();
            put_named(&mut body, name, value);
            vec![(Kind::Purge, body)]
        }
        Op::Meta(name, value) => {
            let mut body = Vec::new();
            put_named(&mut body, name, value);
            vec![(Kind::Meta, body)]
        }
        Op::Reset => vec![(Kind::Reset, Vec::new())],
    }
}

fn entry_bodies(kind: Kind, entries: &[(u64, Vec<u8>)]) -> Vec<(Kind, Vec<u8>)> {
    let body = |(index, payload): &(u64, Vec<u8>)| {
        let mut body = index.to_le_bytes().to_vec();
        body.extend_from_slice(payload);
        (kind, body)
    };
    entries.iter().map(body).collect()
}

/// Decode a record's data (`kind | cell | body`) back into its op.
fn decode(data: &[u8]) -> Option<(u64, Op)> {
    let kind = Kind::from_code(*data.first()?)?;
    let cell = u64_at(data, 1)?;
    let body = &data[TAG_BYTES..];
    let op = match kind {
        Kind::Entry => Op::Entries(vec![(u64_at(body, 0)?, body[8..].to_vec())]),
        Kind::Rewrite => Op::Rewrite(vec![(u64_at(body, 0)?, body[8..].to_vec())]),
        Kind::Truncate => Op::Truncate(u64_at(body, 0)?),
        Kind::Purge => {
            let (name, value) = named(body.get(8..)?)?;
            Op::Purge(u64_at(body, 0)?, name, value)
        }
        Kind::Meta => {
            let (name, value) = named(body)?;
            Op::Meta(name, value)
        }
        Kind::Reset => Op::Reset,
    };
    Some((cell, op))
}

fn crc(prev: u32, seq: u64, data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(prev);
    hasher.update(&seq.to_le_bytes());
    hasher.update(data);
    hasher.finalize()
}

/// Append one record to `out`; returns its crc (the next record's seed).
fn encode_record(
    prev: u32,
    seq: u64,
    kind: Kind,
    cell: u64,
    body: &[u8],
    out: &mut Vec<u8>,
) -> u32 {
    let mut data = Vec::with_capacity(TAG_BYTES + body.len());
    data.push(kind.code());
    data.extend_from_slice(&cell.to_le_bytes());
    data.extend_from_slice(body);
    let len = u32::try_from(data.len()).expect("a log record is smaller than 4 GiB");
    let sum = crc(prev, seq, &data);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&data);
    sum
}

/// Apply `op` of one cell to its state; `locs` are where an `Entries` op's payloads sit.
fn apply(state: &mut CellState, live: &mut BTreeMap<u64, usize>, op: &Op, locs: &[Loc]) {
    let forget = |live: &mut BTreeMap<u64, usize>, gone: BTreeMap<u64, Loc>| {
        for loc in gone.values() {
            if let Some(count) = live.get_mut(&loc.segment) {
                *count = count.saturating_sub(1);
            }
        }
    };
    match op {
        Op::Entries(entries) => {
            if let Some((first, _)) = entries.first() {
                forget(live, state.index.split_off(first));
            }
            for ((index, _), loc) in entries.iter().zip(locs) {
                state.index.insert(*index, *loc);
                *live.entry(loc.segment).or_default() += 1;
            }
        }
        Op::Truncate(from) => forget(live, state.index.split_off(from)),
        Op::Purge(upto, name, value) => {
            let kept = state.index.split_off(&upto.saturating_add(1));
            forget(live, std::mem::replace(&mut state.index, kept));
            state.meta.insert(name.clone(), value.clone());
            state.purged = Some((*upto, name.clone(), value.clone()));
        }
        Op::Meta(name, value) => {
            state.meta.insert(name.clone(), value.clone());
        }
        Op::Rewrite(entries) => {
            for ((index, _), loc) in entries.iter().zip(locs) {
                let old = state.index.insert(*index, *loc);
                forget(live, old.map(|old| (*index, old)).into_iter().collect());
                *live.entry(loc.segment).or_default() += 1;
            }
        }
        Op::Reset => {
            forget(live, std::mem::take(&mut state.index));
            state.meta.clear();
            state.purged = None;
        }
    }
}

/// Where a scan of the segments stands.
struct Chain {
    expected: Option<u64>,
    last_crc: u32,
}

impl Files {
    fn open(dir: &Path, faults: DiskFaults) -> BackendResult<Files> {
        std::fs::create_dir_all(dir).map_err(io("create node log directory"))?;
        let mut files = Files {
            dir: dir.to_path_buf(),
            segments: BTreeMap::new(),
            cells: BTreeMap::new(),
            live: BTreeMap::new(),
            last_crc: 0,
            next_seq: 1,
            faults,
            poisoned: None,
            syncs: 0,
            segments_soft_max: limits::NODE_LOG_SEGMENTS_SOFT_MAX,
        };
        let mut chain = Chain {
            expected: None,
            last_crc: 0,
        };
        for first in list_segments(dir)? {
            if chain.expected.is_some_and(|e| e != first) {
                // A hole: nothing from here on was written after a complete log.
                files.remove_from(first)?;
                break;
            }
            let (file, path, capacity) = open_segment(dir, first)?;
            let segment = Segment {
                file: Arc::new(file),
                path,
                end: 0,
                capacity,
            };
            files.segments.insert(first, segment);
            chain.expected.get_or_insert(first);
            chain.last_crc = 0;
            files.scan(first, &mut chain)?;
        }
        files.last_crc = chain.last_crc;
        files.next_seq = chain.expected.unwrap_or(1);
        Ok(files)
    }

    /// Replay the valid records of segment `first`, continuing `chain`; the write offset
    /// lands behind the last valid record.
    fn scan(&mut self, first: u64, chain: &mut Chain) -> BackendResult<()> {
        let segment = &self.segments[&first];
        let (file, capacity) = (Arc::clone(&segment.file), segment.capacity);
        let mut offset = 0;
        while offset + HEADER_BYTES <= capacity {
            let header =
                read_at(&file, offset, HEADER_BYTES as usize).map_err(io("read node log"))?;
            let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
            let sum = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
            let seq = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
            let end = offset + HEADER_BYTES + u64::from(len);
            if (len as usize) < TAG_BYTES || end > capacity || Some(seq) != chain.expected {
                break;
            }
            let data =
                read_at(&file, offset + HEADER_BYTES, len as usize).map_err(io("read node log"))?;
            if crc(chain.last_crc, seq, &data) != sum {
                break;
            }
            let Some((cell, op)) = decode(&data) else {
                let what = format!("record {seq} of kind {} in {first}", data[0]);
                return Err(BackendError::new("unsupported node log record", what));
            };
            let loc = Loc {
                segment: first,
                offset: offset + HEADER_BYTES + TAG_BYTES as u64 + 8,
                len: len.saturating_sub(TAG_BYTES as u32 + 8),
            };
            let state = self.cells.entry(cell).or_default();
            apply(state, &mut self.live, &op, &[loc]);
            chain.expected = Some(seq + 1);
            chain.last_crc = sum;
            offset = end;
        }
        self.segments.get_mut(&first).expect("scanned").end = offset;
        Ok(())
    }
}

impl Files {
    /// Write the records of `ops` with one write and one data sync, then apply them.
    fn commit(&mut self, ops: &[(u64, Op)]) -> BackendResult<()> {
        if let Some(first) = &self.poisoned {
            return Err(BackendError::new("node log stopped after", first));
        }
        let result = self.write(ops).and_then(|()| self.reclaim());
        if let Err(e) = &result {
            tracing::error!(error = %e, "node log write failed; refusing further log writes");
            self.poisoned = Some(e.to_string());
            crate::disk_fault::log_failed(&e.to_string());
        }
        result
    }

    fn write(&mut self, ops: &[(u64, Op)]) -> BackendResult<()> {
        let records: Vec<(u64, Kind, Vec<u8>)> = ops
            .iter()
            .flat_map(|(cell, op)| bodies(op).into_iter().map(|(k, b)| (*cell, k, b)))
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        let bytes: u64 = records
            .iter()
            .map(|(_, _, body)| HEADER_BYTES + (TAG_BYTES + body.len()) as u64)
            .sum();
        let fits = self
            .segments
            .values()
            .next_back()
            .is_some_and(|s| s.end + bytes <= s.capacity);
        if !fits {
            self.roll(bytes)?;
        }
        let (&first, segment) = self.segments.last_key_value().expect("a segment to write");
        let mut buf = Vec::with_capacity(bytes as usize);
        let mut locs: Vec<Loc> = Vec::new();
        let (mut last_crc, mut seq) = (self.last_crc, self.next_seq);
        for (cell, kind, body) in &records {
            let at = segment.end + buf.len() as u64 + HEADER_BYTES + TAG_BYTES as u64 + 8;
            let len = (body.len() as u32).saturating_sub(8);
            if matches!(kind, Kind::Entry | Kind::Rewrite) {
                locs.push(Loc {
                    segment: first,
                    offset: at,
                    len,
                });
            }
            last_crc = encode_record(last_crc, seq, *kind, *cell, body, &mut buf);
            seq += 1;
        }
        self.faults.before_write().map_err(io("write node log"))?;
        let file = Arc::clone(&segment.file);
        file.write_all_at(&buf, segment.end)
            .map_err(io("write node log"))?;
        self.faults.before_sync().map_err(io("sync node log"))?;
        file.sync_data().map_err(io("sync node log"))?;
        self.syncs += 1;
        self.segments.get_mut(&first).expect("written").end += buf.len() as u64;
        (self.last_crc, self.next_seq) = (last_crc, seq);
        let mut locs = locs.as_slice();
        for (cell, op) in ops {
            let count = match op {
                Op::Entries(entries) | Op::Rewrite(entries) => entries.len(),
                _ => 0,
            };
            let state = self.cells.entry(*cell).or_default();
            apply(state, &mut self.live, op, &locs[..count]);
            locs = &locs[count..];
        }
        Ok(())
    }

    /// Start a new segment, named by the next record's sequence, big enough for `bytes`.
    /// Sizes double from `SEGMENT_BYTES_MIN` up to `SEGMENT_BYTES_MAX`.
    fn roll(&mut self, bytes: u64) -> BackendResult<()> {
        let last = self.segments.values().next_back().map_or(0, |s| s.capacity);
        let grown = last
            .saturating_mul(2)
            .clamp(limits::SEGMENT_BYTES_MIN, limits::SEGMENT_BYTES_MAX);
        let capacity = grown.max(bytes);
        let first = self.next_seq;
        let (file, path) = create_segment(&self.dir, first, capacity)?;
        let segment = Segment {
            file: Arc::new(file),
            path,
            end: 0,
            capacity,
        };
        self.segments.insert(first, segment);
        self.last_crc = 0;
        Ok(())
    }

    /// Delete the oldest segments that hold no live entry (never the one being written),
    /// after writing every cell's purge mark and metadata again at the tail.
    fn reclaim(&mut self) -> BackendResult<()> {
        if self.segments.len() > self.segments_soft_max {
            self.rewrite_oldest()?;
        }
        let newest = self.segments.keys().next_back().copied();
        let dead: Vec<u64> = self
            .segments
            .keys()
            .copied()
            .take_while(|first| Some(*first) != newest)
            .take_while(|first| self.live.get(first).copied().unwrap_or(0) == 0)
            .collect();
        if dead.is_empty() {
            return Ok(());
        }
        let checkpoint: Vec<(u64, Op)> = self
            .cells
            .iter()
            .flat_map(|(cell, state)| {
                let purge = state
                    .purged
                    .clone()
                    .map(|(u, n, v)| (*cell, Op::Purge(u, n, v)));
                let meta = state
                    .meta
                    .iter()
                    .map(|(n, v)| (*cell, Op::Meta(n.clone(), v.clone())));
                purge.into_iter().chain(meta)
            })
            .collect();
        self.write(&checkpoint)?;
        for first in dead {
            let segment = self.segments.remove(&first).expect("listed segment");
            self.live.remove(&first);
            std::fs::remove_file(&segment.path).map_err(io("remove node log segment"))?;
        }
        sync_dir(&self.dir)
    }

    /// Write the live entries of the oldest segment again at the tail, when they are few.
    fn rewrite_oldest(&mut self) -> BackendResult<()> {
        let Some(oldest) = self.segments.keys().next().copied() else {
            return Ok(());
        };
        let mut live: Vec<(u64, u64, Loc)> = Vec::new();
        for (cell, state) in &self.cells {
            let here = state.index.iter().filter(|(_, loc)| loc.segment == oldest);
            live.extend(here.map(|(index, loc)| (*cell, *index, *loc)));
        }
        let bytes: u64 = live.iter().map(|(_, _, loc)| u64::from(loc.len)).sum();
        if live.is_empty() || bytes > limits::NODE_LOG_REWRITE_BYTES_MAX {
            return Ok(());
        }
        let mut ops: Vec<(u64, Op)> = Vec::new();
        for (cell, index, loc) in live {
            let payload = self.read(loc)?;
            match ops.last_mut() {
                Some((last, Op::Rewrite(entries))) if *last == cell => {
                    entries.push((index, payload));
                }
                _ => ops.push((cell, Op::Rewrite(vec![(index, payload)]))),
            }
        }
        self.write(&ops)
    }

    /// Delete every segment whose first sequence is `>= first` (open or not).
    fn remove_from(&mut self, first: u64) -> BackendResult<()> {
        self.segments.split_off(&first);
        for name in list_segments(&self.dir)?
            .into_iter()
            .filter(|f| *f >= first)
        {
            std::fs::remove_file(self.dir.join(segment_name(name)))
                .map_err(io("remove node log segment"))?;
        }
        sync_dir(&self.dir)
    }

    fn read(&self, loc: Loc) -> BackendResult<Vec<u8>> {
        let segment = self
            .segments
            .get(&loc.segment)
            .ok_or_else(|| BackendError::new("read node log", "segment missing"))?;
        read_at(&segment.file, loc.offset, loc.len as usize).map_err(io("read node log"))
    }
}

impl NodeLog {
    /// Open (or create) the node's log in `dir`, cutting off a torn tail.
    pub fn open(dir: &Path, faults: DiskFaults) -> BackendResult<Arc<NodeLog>> {
        Ok(Arc::new(NodeLog {
            queue: Mutex::new(Queue::default()),
            done: Condvar::new(),
            files: Mutex::new(Files::open(dir, faults)?),
        }))
    }

    /// Cell `cell`'s view of this log.
    pub fn cell(self: &Arc<Self>, cell: u64) -> CellLog {
        CellLog {
            log: Arc::clone(self),
            cell,
        }
    }

    /// The cells that have records in this log.
    pub fn cells(&self) -> Vec<u64> {
        self.files().cells.keys().copied().collect()
    }

    /// Data syncs since this log was opened: one per group of writes.
    pub fn syncs(&self) -> u64 {
        self.files().syncs
    }

    fn files(&self) -> MutexGuard<'_, Files> {
        self.files.lock().expect("node log files lock")
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().expect("node log queue lock")
    }

    /// Queue `op` of `cell` and return once the group holding it is durable. The first
    /// waiter that finds no group committing commits every write queued so far (up to
    /// `LOG_GROUP_APPENDS_MAX` of them), whichever cells they come from; the others wait.
    fn submit(&self, cell: u64, op: Op) -> BackendResult<()> {
        let mut queue = self.queue();
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.pending.push((ticket, cell, op));
        loop {
            if let Some(result) = queue.results.remove(&ticket) {
                return result.map_err(|e| BackendError::new("node log write", e));
            }
            if queue.busy {
                queue = self.done.wait(queue).expect("node log queue lock");
                continue;
            }
            queue.busy = true;
            let take = queue.pending.len().min(limits::LOG_GROUP_APPENDS_MAX);
            let group: Vec<(u64, u64, Op)> = queue.pending.drain(..take).collect();
            drop(queue);
            let (tickets, ops): (Vec<u64>, Vec<(u64, Op)>) =
                group.into_iter().map(|(t, c, op)| (t, (c, op))).unzip();
            let result = self.files().commit(&ops).map_err(|e| e.to_string());
            queue = self.queue();
            for ticket in tickets {
                queue.results.insert(ticket, result.clone());
            }
            queue.busy = false;
            self.done.notify_all();
        }
    }
}

impl CellLog {
    /// Append (or overwrite from the first index on) and make durable.
    pub fn append(&self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.log.submit(self.cell, Op::Entries(entries.to_vec()))
    }

    /// Entries with `from <= index < to`, in order.
    pub fn range(&self, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        self.range_in(&self.log.files(), from, to)
    }

    /// [`CellLog::range`] unless a group commit holds the node log now (`None`).
    pub fn try_range(&self, from: u64, to: u64) -> Option<BackendResult<LogRows>> {
        let files = self.log.files.try_lock().ok()?;
        Some(self.range_in(&files, from, to))
    }

    fn range_in(&self, files: &Files, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        let Some(state) = files.cells.get(&self.cell) else {
            return Ok(Vec::new());
        };
        if from >= to {
            return Ok(Vec::new());
        }
        state
            .index
            .range(from..to)
            .map(|(index, loc)| Ok((*index, files.read(*loc)?)))
            .collect()
    }

    /// The last entry, if any.
    pub fn last(&self) -> BackendResult<Option<(u64, Vec<u8>)>> {
        let files = self.log.files();
        let last = files
            .cells
            .get(&self.cell)
            .and_then(|s| s.index.last_key_value());
        match last {
            Some((index, loc)) => Ok(Some((*index, files.read(*loc)?))),
            None => Ok(None),
        }
    }

    /// Delete entries with `index >= from`, durably.
    pub fn truncate(&self, from: u64) -> BackendResult<()> {
        self.log.submit(self.cell, Op::Truncate(from))
    }

    /// Delete entries with `index <= upto` and store `meta`, durably, in one record.
    pub fn purge(&self, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()> {
        let op = Op::Purge(upto, meta.0.to_string(), meta.1);
        self.log.submit(self.cell, op)
    }

    /// A metadata value.
    pub fn meta_get(&self, name: &str) -> Option<Vec<u8>> {
        let files = self.log.files();
        files.cells.get(&self.cell)?.meta.get(name).cloned()
    }

    /// Store a metadata value durably.
    pub fn meta_put(&self, name: &str, value: Vec<u8>) -> BackendResult<()> {
        self.log
            .submit(self.cell, Op::Meta(name.to_string(), value))
    }

    /// Whether this log holds anything of the cell (entries or metadata).
    pub fn holds_any(&self) -> bool {
        let files = self.log.files();
        files
            .cells
            .get(&self.cell)
            .is_some_and(|s| !s.index.is_empty() || !s.meta.is_empty())
    }

    /// Forget the cell's entries and metadata, durably: its data directory was replaced.
    pub fn reset(&self) -> BackendResult<()> {
        self.log.submit(self.cell, Op::Reset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> Arc<NodeLog> {
        NodeLog::open(dir, DiskFaults::default()).expect("open node log")
    }

    fn entries(from: u64, to: u64, tag: &str) -> Vec<(u64, Vec<u8>)> {
        (from..to)
            .map(|i| (i, format!("{tag}{i}").into_bytes()))
            .collect()
    }

    fn indexes(log: &CellLog) -> Vec<u64> {
        let all = log.range(0, u64::MAX).expect("range");
        all.into_iter().map(|(i, _)| i).collect()
    }

    /// Three cells interleave appends, an overwrite, a truncation, a purge and metadata;
    /// each cell reads back exactly its own log, before and after a reopen.
    #[test]
    fn cells_share_one_log_and_keep_their_own_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let check = |log: &Arc<NodeLog>| {
            let (a, b, c) = (log.cell(1), log.cell(2), log.cell(7));
            assert_eq!(indexes(&a), (4..9).collect::<Vec<_>>());
            assert_eq!(a.range(4, 5).expect("range"), vec![(4, b"a4".to_vec())]);
            assert_eq!(a.meta_get("purged"), Some(b"3".to_vec()));
            assert_eq!(indexes(&b), vec![1, 2, 3]);
            assert_eq!(b.last().expect("last"), Some((3, b"B3".to_vec())));
            assert_eq!(b.meta_get("vote"), Some(b"v2".to_vec()));
            assert_eq!(indexes(&c), Vec::<u64>::new());
            assert_eq!(log.cell(9).last().expect("last"), None);
        };
        {
            let log = open(dir.path());
            let (a, b, c) = (log.cell(1), log.cell(2), log.cell(7));
            a.append(&entries(1, 6, "a")).expect("append");
            b.append(&entries(1, 5, "b")).expect("append");
            c.append(&entries(1, 3, "c")).expect("append");
            a.append(&entries(6, 9, "a")).expect("append");
            b.append(&entries(3, 4, "B")).expect("overwrite from 3");
            c.truncate(1).expect("truncate");
            a.purge(3, ("purged", b"3".to_vec())).expect("purge");
            b.meta_put("vote", b"v1".to_vec()).expect("meta");
            b.meta_put("vote", b"v2".to_vec()).expect("meta");
            check(&log);
        }
        let log = open(dir.path());
        check(&log);
        let mut cells = log.cells();
        cells.sort_unstable();
        assert_eq!(cells, vec![1, 2, 7]);
    }

    /// A group write torn in its middle (a crash between the write and its sync) is cut
    /// off at open from the tear on; every record before the tear stays (a whole record of
    /// the torn group too: written but never acknowledged, as Raft allows), and the log
    /// goes on from there.
    #[test]
    fn a_torn_tail_is_cut_off_and_nothing_before_it_is_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (segment, end, seq, last_crc) = {
            let log = open(dir.path());
            log.cell(1).append(&entries(1, 4, "a")).expect("append");
            log.cell(2).append(&entries(1, 3, "b")).expect("append");
            let files = log.files();
            let (first, segment) = files.segments.last_key_value().expect("a segment");
            let path = dir.path().join(segment_name(*first));
            (path, segment.end, files.next_seq, files.last_crc)
        };
        // The next group: cell 1's entry 4 landed whole, cell 2's entry 3 only in part.
        let mut group = Vec::new();
        let body = |index: u64, payload: &[u8]| [&index.to_le_bytes()[..], payload].concat();
        let sum = encode_record(last_crc, seq, Kind::Entry, 1, &body(4, b"a4"), &mut group);
        let whole = group.len();
        let torn = body(3, &[7u8; 64]);
        encode_record(sum, seq + 1, Kind::Entry, 2, &torn, &mut group);
        group.truncate(whole + 30);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&segment)
            .expect("open");
        file.write_all_at(&group, end).expect("tear");
        let log = open(dir.path());
        assert_eq!(indexes(&log.cell(1)), vec![1, 2, 3, 4]);
        assert_eq!(indexes(&log.cell(2)), vec![1, 2]);
        log.cell(2)
            .append(&entries(3, 5, "b"))
            .expect("append after the tear");
        drop(log);
        let log = open(dir.path());
        assert_eq!(log.cell(2).range(1, 5).expect("range"), entries(1, 5, "b"));
        assert_eq!(indexes(&log.cell(1)), vec![1, 2, 3, 4]);
    }

    /// Writes of eight cells queued while a group commits go out together: the next
    /// group holds all seven, with one data sync, and every write reads back.
    #[test]
    fn writes_queued_across_cells_share_one_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = open(dir.path());
        const CELLS: u64 = 8;
        let before = log.syncs();
        std::thread::scope(|scope| {
            // Holding the files stops the first group inside its commit.
            let held = log.files();
            for cell in 0..CELLS {
                let handle = log.cell(cell);
                scope.spawn(move || handle.append(&entries(1, 2, "x")).expect("append"));
            }
            while log.queue().pending.len() < CELLS as usize - 1 {
                std::thread::yield_now();
            }
            drop(held);
        });
        assert_eq!(
            log.syncs() - before,
            2,
            "one group of one, one group of seven"
        );
        drop(log);
        let log = open(dir.path());
        for cell in 0..CELLS {
            assert_eq!(indexes(&log.cell(cell)), vec![1]);
        }
    }

    /// Once every cell purged past a segment's entries, the segment goes; the cells' purge
    /// marks and metadata, written again at the tail, survive a reopen without it.
    #[test]
    fn purged_segments_are_deleted_and_metadata_survives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = |from: u64, to: u64| -> Vec<(u64, Vec<u8>)> {
            (from..to).map(|i| (i, vec![i as u8; 64 << 10])).collect()
        };
        {
            let log = open(dir.path());
            let (a, b) = (log.cell(1), log.cell(2));
            b.meta_put("vote", b"v".to_vec()).expect("meta");
            a.append(&big(1, 20)).expect("append");
            b.append(&big(1, 20)).expect("append");
            a.append(&big(20, 40)).expect("append");
            assert!(log.files().segments.len() >= 2, "the log rolled");
            a.purge(39, ("purged", b"a39".to_vec())).expect("purge");
            b.purge(19, ("purged", b"b19".to_vec())).expect("purge");
            a.append(&big(40, 41)).expect("append");
            assert_eq!(log.files().segments.len(), 1, "old segments went");
        }
        let log = open(dir.path());
        let (a, b) = (log.cell(1), log.cell(2));
        assert_eq!(indexes(&a), vec![40]);
        assert_eq!(indexes(&b), Vec::<u64>::new());
        assert_eq!(a.meta_get("purged"), Some(b"a39".to_vec()));
        assert_eq!(b.meta_get("purged"), Some(b"b19".to_vec()));
        assert_eq!(b.meta_get("vote"), Some(b"v".to_vec()));
    }

    /// An idle cell whose few entries sit in the oldest segment does not pin the log: past
    /// the soft bound its entries are written again at the tail and old segments go; they
    /// read back the same after a reopen, beside the busy cell's.
    #[test]
    fn an_idle_cell_does_not_pin_old_segments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = |from: u64, to: u64| -> Vec<(u64, Vec<u8>)> {
            (from..to).map(|i| (i, vec![i as u8; 128 << 10])).collect()
        };
        {
            let log = open(dir.path());
            log.files().segments_soft_max = 2;
            let (idle, busy) = (log.cell(1), log.cell(2));
            idle.append(&entries(1, 4, "idle")).expect("append");
            for round in 0..8u64 {
                busy.append(&big(round * 10 + 1, round * 10 + 11))
                    .expect("append");
                let meta = ("purged", format!("{}", round * 10 + 10).into_bytes());
                busy.purge(round * 10 + 10, meta).expect("purge");
            }
            let segments = log.files().segments.len();
            assert!(segments <= 3, "{segments} segments");
        }
        let log = open(dir.path());
        let idle = log.cell(1);
        assert_eq!(idle.range(1, 4).expect("range"), entries(1, 4, "idle"));
        assert_eq!(log.cell(2).meta_get("purged"), Some(b"80".to_vec()));
        assert_eq!(indexes(&log.cell(2)), Vec::<u64>::new());
    }

    /// A failed data sync fails the write and every later one: nothing after it is
    /// acknowledged, and the failed write is not read back after a reopen.
    #[test]
    fn a_failed_sync_refuses_every_later_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let faults = DiskFaults::default();
        let log = NodeLog::open(dir.path(), faults.clone()).expect("open");
        log.cell(1).append(&entries(1, 3, "a")).expect("append");
        faults.set(Some(crate::disk_fault::DiskFault::Fsync));
        assert!(log.cell(1).append(&entries(3, 4, "a")).is_err());
        faults.set(None);
        assert!(log.cell(2).append(&entries(1, 2, "b")).is_err(), "poisoned");
        assert_eq!(indexes(&log.cell(1)), vec![1, 2]);
    }

    /// The record kinds' stored codes are pinned.
    #[test]
    fn record_kinds_keep_their_codes() {
        let kinds = [
            Kind::Entry,
            Kind::Truncate,
            Kind::Purge,
            Kind::Meta,
            Kind::Reset,
            Kind::Rewrite,
        ];
        let codes: Vec<u8> = kinds.iter().map(|k| k.code()).collect();
        assert_eq!(codes, vec![1, 2, 3, 4, 5, 6]);
        for kind in kinds {
            assert_eq!(Kind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(Kind::from_code(0), None);
        assert_eq!(Kind::from_code(7), None);
    }
}
