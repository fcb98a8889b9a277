//! The Raft log in preallocated segment files (the default log of the redb layout).
//!
//! A segment is a file `log/{first index:020}.seg`, preallocated with `fallocate` (1 MiB for
//! the first, doubling to 16 MiB: `limits::SEGMENT_BYTES_MIN`/`_MAX`), holding records
//! back to back:
//!
//! ```text
//! len: u32 LE | crc32: u32 LE | index: u64 LE | payload: len bytes
//! ```
//!
//! The crc covers the index and the payload and is seeded with the previous record's crc in
//! the same segment (0 for a segment's first record, so purging whole segments breaks no
//! chain): a record is valid only right behind the record it was written behind.
//!
//! A durable append writes its records with one `pwrite` and one `fdatasync`: the file's
//! size does not change, so the data sync needs no metadata journal commit. That is the
//! whole point: it measured about half of redb's durable commit (BENCHMARKS.md).
//!
//! Invariants:
//! - records of the log are contiguous by index across the segments, in file order;
//! - a record counts only if its length fits, its index follows the previous one and its
//!   chained crc matches; the first record that fails ends the log (a torn write is cut
//!   off at open). A stale record left behind a truncation or a torn group write cannot
//!   come back behind a new record: its crc is chained to the record it followed;
//! - a segment exists only once every record before it is durable, so a segment whose
//!   name is not the next expected index (a hole) ends the log and is removed;
//! - metadata (vote, last purged) lives in two slots overwritten in turn, one `fdatasync`
//!   per save (`super::meta_slots`).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::descriptors::opening;
use super::meta_slots::MetaSlots;
use super::{BackendError, BackendResult, LogRows};
use crate::disk_fault::DiskFaults;
use crate::limits;

const HEADER_BYTES: u64 = 16;
const SEGMENT_SUFFIX: &str = ".seg";

/// Where one entry sits in a segment file: this log locates its record, the node log
/// (`super::node_log`) its payload.
#[derive(Clone, Copy, Debug)]
pub(super) struct Loc {
    pub(super) segment: u64,
    pub(super) offset: u64,
    pub(super) len: u32,
}

/// One segment file.
struct Segment {
    file: File,
    path: PathBuf,
    /// Write offset: the end of the last valid record.
    end: u64,
    capacity: u64,
}

impl Segment {
    /// A segment of `capacity` bytes whose write offset is not known yet (0).
    fn empty(file: File, path: PathBuf, capacity: u64) -> Self {
        Segment {
            file,
            path,
            end: 0,
            capacity,
        }
    }
}

/// The Raft log and its metadata in segment files under one directory.
pub(super) struct SegmentLog {
    inner: Mutex<Segments>,
}

struct Segments {
    dir: PathBuf,
    /// By first index.
    segments: BTreeMap<u64, Segment>,
    index: BTreeMap<u64, Loc>,
    meta: BTreeMap<String, Vec<u8>>,
    /// Where `meta` is saved.
    slots: MetaSlots,
    /// The crc of the last record (the next record's seed).
    last_crc: u32,
    /// The index the next record must have: one past the last record in the files, which
    /// a purge may have dropped from `index`; `None` while the files hold no record.
    next: Option<u64>,
    /// Injected disk faults (test-only; none in a normal run).
    faults: DiskFaults,
}

/// Where a scan of the segments stands: the index the next record must have and the crc
/// it must be chained to.
#[derive(Default)]
struct Chain {
    expected: Option<u64>,
    last_crc: u32,
}

pub(super) fn io(context: &'static str) -> impl Fn(std::io::Error) -> BackendError {
    move |e| BackendError::new(context, e)
}

pub(super) fn segment_name(first: u64) -> String {
    format!("{first:020}{SEGMENT_SUFFIX}")
}

fn crc(prev: u32, index: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(prev);
    hasher.update(&index.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// Append one record to `out`; returns its crc (the next record's seed).
fn encode_record(prev: u32, index: u64, payload: &[u8], out: &mut Vec<u8>) -> u32 {
    let len = u32::try_from(payload.len()).expect("a log entry is smaller than 4 GiB");
    let sum = crc(prev, index, payload);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    out.extend_from_slice(payload);
    sum
}

pub(super) fn sync_dir(dir: &Path) -> BackendResult<()> {
    opening("log directory", || File::open(dir))
        .and_then(|d| d.sync_all())
        .map_err(io("sync log directory"))
}

/// The bytes of `file` from `offset`, `len` long.
pub(super) fn read_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

impl SegmentLog {
    /// Open (or create) the log in `dir`, cutting off a torn tail.
    pub(super) fn open(dir: &Path, faults: DiskFaults) -> BackendResult<Self> {
        std::fs::create_dir_all(dir).map_err(io("create log directory"))?;
        let (slots, meta) = MetaSlots::open(dir)?;
        let mut segments = Segments {
            dir: dir.to_path_buf(),
            segments: BTreeMap::new(),
            index: BTreeMap::new(),
            meta,
            slots,
            last_crc: 0,
            next: None,
            faults,
        };
        let mut chain = Chain::default();
        for first in list_segments(dir)? {
            if chain.expected.is_some_and(|e| e != first) {
                // A hole: nothing from here on was written after a complete log.
                segments.remove_from(first)?;
                break;
            }
            let (file, path, capacity) = open_segment(dir, first)?;
            segments
                .segments
                .insert(first, Segment::empty(file, path, capacity));
            chain.expected.get_or_insert(first);
            chain.last_crc = 0;
            segments.scan(first, &mut chain)?;
        }
        segments.last_crc = chain.last_crc;
        segments.next = chain.expected;
        Ok(SegmentLog {
            inner: Mutex::new(segments),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Segments> {
        self.inner.lock().expect("segment log lock")
    }

    /// Append (or overwrite from the first index on) and make durable.
    pub(super) fn append(&self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        let Some((first, _)) = entries.first() else {
            return Ok(());
        };
        let mut s = self.lock();
        if s.index.contains_key(first) {
            s.truncate(*first)?;
        }
        s.append(entries)
    }

    /// Entries with `from <= index < to`, in order.
    pub(super) fn range(&self, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        self.lock().range(from, to)
    }

    /// [`SegmentLog::range`] unless the writer holds the log now (`None`).
    pub(super) fn try_range(&self, from: u64, to: u64) -> Option<BackendResult<LogRows>> {
        let s = self.inner.try_lock().ok()?;
        Some(s.range(from, to))
    }

    /// The last entry, if any.
    pub(super) fn last(&self) -> BackendResult<Option<(u64, Vec<u8>)>> {
        let s = self.lock();
        let Some((index, loc)) = s.index.last_key_value().map(|(i, l)| (*i, *l)) else {
            return Ok(None);
        };
        Ok(Some((index, s.read(loc)?)))
    }

    /// Delete entries with `index >= from`, durably.
    pub(super) fn truncate(&self, from: u64) -> BackendResult<()> {
        self.lock().truncate(from)
    }

    /// Delete entries with `index <= upto` (whole segments) and store `meta`, durably.
    pub(super) fn purge(&self, upto: u64, meta: (&str, Vec<u8>)) -> BackendResult<()> {
        let mut s = self.lock();
        s.meta.insert(meta.0.to_string(), meta.1);
        s.write_meta()?;
        s.index = s.index.split_off(&upto.saturating_add(1));
        s.purge_segments(upto)
    }

    /// A metadata value.
    pub(super) fn meta_get(&self, name: &str) -> Option<Vec<u8>> {
        self.lock().meta.get(name).cloned()
    }

    /// Store a metadata value durably.
    pub(super) fn meta_put(&self, name: &str, value: Vec<u8>) -> BackendResult<()> {
        let mut s = self.lock();
        s.meta.insert(name.to_string(), value);
        s.write_meta()
    }
}

/// Open the existing segment `first` under `dir`: the file, its path and its size.
pub(super) fn open_segment(dir: &Path, first: u64) -> BackendResult<(File, PathBuf, u64)> {
    let path = dir.join(segment_name(first));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io("open log segment"))?;
    let capacity = file.metadata().map_err(io("stat log segment"))?.len();
    Ok((file, path, capacity))
}

/// Create segment `first` under `dir`, preallocated to `capacity` bytes, durably (the file
/// and its directory entry synced).
pub(super) fn create_segment(
    dir: &Path,
    first: u64,
    capacity: u64,
) -> BackendResult<(File, PathBuf)> {
    let path = dir.join(segment_name(first));
    let create = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
    };
    let file = opening("log segment", create).map_err(io("create log segment"))?;
    rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, capacity)
        .map_err(|e| BackendError::new("preallocate log segment", e))?;
    file.sync_all().map_err(io("sync new log segment"))?;
    sync_dir(dir)?;
    Ok((file, path))
}

pub(super) fn list_segments(dir: &Path) -> BackendResult<Vec<u64>> {
    let mut firsts = Vec::new();
    let listing = opening("log directory", || std::fs::read_dir(dir));
    for entry in listing.map_err(io("list log segments"))? {
        let name = entry.map_err(io("list log segments"))?.file_name();
        let name = name.to_string_lossy();
        if let Some(stem) = name.strip_suffix(SEGMENT_SUFFIX) {
            let first = stem
                .parse::<u64>()
                .map_err(|e| BackendError::new("log segment name", format!("{name}: {e}")))?;
            firsts.push(first);
        }
    }
    firsts.sort_unstable();
    Ok(firsts)
}

impl Segments {
    /// Entries with `from <= index < to`, in order.
    fn range(&self, from: u64, to: u64) -> BackendResult<Vec<(u64, Vec<u8>)>> {
        if from >= to {
            return Ok(Vec::new());
        }
        let locs: Vec<(u64, Loc)> = self.index.range(from..to).map(|(i, l)| (*i, *l)).collect();
        locs.into_iter()
            .map(|(index, loc)| Ok((index, self.read(loc)?)))
            .collect()
    }

    /// Index the valid records of segment `first` from the start, continuing `chain`; the
    /// write offset lands behind the last valid record.
    fn scan(&mut self, first: u64, chain: &mut Chain) -> BackendResult<()> {
        let segment = self.segments.get_mut(&first).expect("segment just opened");
        let mut offset = 0;
        while offset + HEADER_BYTES <= segment.capacity {
            let header = read_at(&segment.file, offset, HEADER_BYTES as usize)
                .map_err(io("read log record"))?;
            let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
            let sum = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
            let index = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
            let body_end = offset + HEADER_BYTES + u64::from(len);
            if len == 0 || body_end > segment.capacity || Some(index) != chain.expected {
                break;
            }
            let payload = read_at(&segment.file, offset + HEADER_BYTES, len as usize)
                .map_err(io("read log record"))?;
            if crc(chain.last_crc, index, &payload) != sum {
                break;
            }
            let loc = Loc {
                segment: first,
                offset,
                len,
            };
            self.index.insert(index, loc);
            *chain = Chain {
                expected: Some(index + 1),
                last_crc: sum,
            };
            offset = body_end;
        }
        segment.end = offset;
        Ok(())
    }

    fn read(&self, loc: Loc) -> BackendResult<Vec<u8>> {
        let segment = self
            .segments
            .get(&loc.segment)
            .ok_or_else(|| BackendError::new("read log record", "segment missing"))?;
        read_at(&segment.file, loc.offset + HEADER_BYTES, loc.len as usize)
            .map_err(io("read log record"))
    }

    fn append(&mut self, entries: &[(u64, Vec<u8>)]) -> BackendResult<()> {
        let bytes: u64 = entries
            .iter()
            .map(|(_, p)| HEADER_BYTES + p.len() as u64)
            .sum();
        let first_index = entries[0].0;
        if self.next.is_some_and(|n| n != first_index) {
            // Only a purge (a snapshot) leaves a gap: what the files hold is all purged.
            if !self.index.is_empty() {
                let gap = format!("append at {first_index} after {:?}", self.next);
                return Err(BackendError::new("log append", gap));
            }
            self.remove_from(0)?;
            self.last_crc = 0;
        }
        let need_new = match self.segments.last_key_value() {
            Some((_, seg)) => seg.end + bytes > seg.capacity,
            None => true,
        };
        if need_new {
            self.roll(entries[0].0, bytes)?;
            self.last_crc = 0;
        }
        let (&first, segment) = self.segments.last_key_value().expect("a segment to write");
        let mut buf = Vec::with_capacity(bytes as usize);
        let mut locs = Vec::with_capacity(entries.len());
        let mut last_crc = self.last_crc;
        for (index, payload) in entries {
            let offset = segment.end + buf.len() as u64;
            let len = payload.len() as u32;
            locs.push((
                *index,
                Loc {
                    segment: first,
                    offset,
                    len,
                },
            ));
            last_crc = encode_record(last_crc, *index, payload, &mut buf);
        }
        self.faults
            .before_write()
            .map_err(io("write log records"))?;
        segment
            .file
            .write_all_at(&buf, segment.end)
            .map_err(io("write log records"))?;
        self.faults.before_sync().map_err(io("sync log segment"))?;
        segment.file.sync_data().map_err(io("sync log segment"))?;
        let segment = self.segments.get_mut(&first).expect("the segment written");
        segment.end += buf.len() as u64;
        self.index.extend(locs);
        self.last_crc = last_crc;
        self.next = entries.last().map(|(i, _)| i + 1);
        Ok(())
    }

    /// Start a new segment whose first record is `first`, big enough for `bytes`. Sizes
    /// double from `SEGMENT_BYTES_MIN` up to `SEGMENT_BYTES_MAX`, so an idle cell (a node
    /// hosts hundreds) reserves little disk and a busy log rolls rarely.
    fn roll(&mut self, first: u64, bytes: u64) -> BackendResult<()> {
        let last = self.segments.values().next_back().map_or(0, |s| s.capacity);
        let grown = last
            .saturating_mul(2)
            .clamp(limits::SEGMENT_BYTES_MIN, limits::SEGMENT_BYTES_MAX);
        let capacity = grown.max(bytes);
        let (file, path) = create_segment(&self.dir, first, capacity)?;
        self.segments
            .insert(first, Segment::empty(file, path, capacity));
        Ok(())
    }

    fn truncate(&mut self, from: u64) -> BackendResult<()> {
        let Some(loc) = self.index.get(&from).copied() else {
            return Ok(());
        };
        self.index.split_off(&from);
        self.remove_from(loc.segment.saturating_add(1))?;
        let segment = self
            .segments
            .get_mut(&loc.segment)
            .expect("segment of an entry");
        // The cut's header zeroed: the log ends here even before the next append.
        segment
            .file
            .write_all_at(&[0u8; HEADER_BYTES as usize], loc.offset)
            .map_err(io("cut log"))?;
        segment.file.sync_data().map_err(io("sync log segment"))?;
        segment.end = loc.offset;
        self.next = Some(from);
        self.last_crc = match self.index.last_key_value() {
            Some((_, prev)) if prev.segment == loc.segment => self.crc_of(*prev)?,
            _ => 0,
        };
        Ok(())
    }

    /// The stored crc of the record at `loc`.
    fn crc_of(&self, loc: Loc) -> BackendResult<u32> {
        let segment = self
            .segments
            .get(&loc.segment)
            .ok_or_else(|| BackendError::new("read log record", "segment missing"))?;
        let header = read_at(&segment.file, loc.offset, HEADER_BYTES as usize)
            .map_err(io("read log record"))?;
        Ok(u32::from_le_bytes(
            header[4..8].try_into().expect("4 bytes"),
        ))
    }

    /// Delete every segment whose first index is `>= first` (open or not).
    fn remove_from(&mut self, first: u64) -> BackendResult<()> {
        self.segments.split_off(&first);
        let mut removed = false;
        for name in list_segments(&self.dir)?
            .into_iter()
            .filter(|f| *f >= first)
        {
            std::fs::remove_file(self.dir.join(segment_name(name)))
                .map_err(io("remove log segment"))?;
            removed = true;
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Delete the segments every entry of which is `<= upto`.
    fn purge_segments(&mut self, upto: u64) -> BackendResult<()> {
        let firsts: Vec<u64> = self.segments.keys().copied().collect();
        let mut removed = false;
        for pair in firsts.windows(2) {
            if pair[1] <= upto.saturating_add(1) {
                let segment = self.segments.remove(&pair[0]).expect("listed segment");
                std::fs::remove_file(&segment.path).map_err(io("remove log segment"))?;
                removed = true;
            }
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    fn write_meta(&mut self) -> BackendResult<()> {
        self.slots.save(&self.meta)
    }
}
