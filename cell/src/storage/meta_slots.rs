//! The segment log's metadata (the vote, the last purged id) in two slots overwritten in
//! turn, so that saving it costs one `fdatasync`.
//!
//! Each slot is a file of `limits::LOG_META_SLOT_BYTES` (`log/meta.0`, `log/meta.1`),
//! preallocated when made, holding one record at offset 0:
//!
//! ```text
//! len: u32 LE | crc32: u32 LE | seq: u64 LE | payload: len bytes (the postcard map)
//! ```
//!
//! The crc covers the sequence number and the payload. Save number `seq` goes to slot
//! `seq % 2` with one `pwrite` and one `fdatasync`: the file's size does not change, so the
//! data sync needs no metadata journal commit, and there is no rename whose directory
//! must be synced (the write-and-rename it replaces cost two syncs per save).
//!
//! Invariants:
//! - the metadata in force is the valid slot with the higher `seq`; a save torn by a crash
//!   leaves its slot invalid and the other slot, the save before, in force: a save counts
//!   only once its `fdatasync` returned, which is when Raft may act on it;
//! - a save never writes the slot in force, so a torn write cannot lose it;
//! - a store of the earlier layout (one `log/meta` file replaced by rename) is read when
//!   no slot is valid, and its file is removed once the first slot save is durable.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::descriptors::opening;
use super::segment_log::{io, sync_dir};
use super::{BackendError, BackendResult};
use crate::limits::LOG_META_SLOT_BYTES;

const HEADER_BYTES: usize = 16;
/// The file of the earlier layout, replaced by rename on each save.
const LEGACY_FILE: &str = "meta";

/// The metadata map.
pub(super) type Meta = BTreeMap<String, Vec<u8>>;

/// The two slots of one log directory.
pub(super) struct MetaSlots {
    dir: PathBuf,
    slots: [File; 2],
    /// The sequence number of the save in force (0: none yet).
    seq: u64,
    /// The earlier layout's file, still on disk until the first slot save.
    legacy: bool,
}

fn slot_name(slot: usize) -> String {
    format!("meta.{slot}")
}

/// Open (or make) slot `slot` under `dir`: the file, and whether it was just made.
fn open_slot(dir: &Path, slot: usize) -> BackendResult<(File, bool)> {
    let path = dir.join(slot_name(slot));
    let open = || OpenOptions::new().read(true).write(true).open(&path);
    match opening("log meta slot", open) {
        Ok(file) => return Ok((file, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(BackendError::new("open log meta slot", e)),
    }
    let create = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
    };
    let file = opening("log meta slot", create).map_err(io("create log meta slot"))?;
    rustix::fs::fallocate(
        &file,
        rustix::fs::FallocateFlags::empty(),
        0,
        LOG_META_SLOT_BYTES,
    )
    .map_err(|e| BackendError::new("preallocate log meta slot", e))?;
    file.sync_all().map_err(io("sync new log meta slot"))?;
    Ok((file, true))
}

/// The record of a slot: its `seq` and map, or `None` when it holds no valid record (never
/// written, torn, or too short).
fn read_slot(file: &File) -> BackendResult<Option<(u64, Meta)>> {
    let mut bytes = vec![0u8; LOG_META_SLOT_BYTES as usize];
    let read = file
        .read_at(&mut bytes, 0)
        .map_err(io("read log meta slot"))?;
    bytes.truncate(read);
    if bytes.len() < HEADER_BYTES {
        return Ok(None);
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let (len, sum) = (word(0) as usize, word(4));
    let seq = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let Some(payload) = bytes.get(HEADER_BYTES..HEADER_BYTES + len) else {
        return Ok(None);
    };
    if seq == 0 || checksum(seq, payload) != sum {
        return Ok(None);
    }
    let meta =
        postcard::from_bytes(payload).map_err(|e| BackendError::new("decode log meta", e))?;
    Ok(Some((seq, meta)))
}

fn checksum(seq: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seq.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// The map of the earlier layout's file, if there is one.
fn read_legacy(dir: &Path) -> BackendResult<Option<Meta>> {
    match std::fs::read(dir.join(LEGACY_FILE)) {
        Ok(bytes) => postcard::from_bytes(&bytes)
            .map(Some)
            .map_err(|e| BackendError::new("decode log meta", e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(BackendError::new("read log meta", e)),
    }
}

impl MetaSlots {
    /// Open the slots of `dir` (making them when missing) and the metadata in force.
    pub(super) fn open(dir: &Path) -> BackendResult<(MetaSlots, Meta)> {
        let (first, made_first) = open_slot(dir, 0)?;
        let (second, made_second) = open_slot(dir, 1)?;
        if made_first || made_second {
            sync_dir(dir)?;
        }
        let a = read_slot(&first)?;
        let b = read_slot(&second)?;
        let newest = [a, b].into_iter().flatten().max_by_key(|(seq, _)| *seq);
        let legacy = read_legacy(dir)?;
        let slots = MetaSlots {
            dir: dir.to_path_buf(),
            slots: [first, second],
            seq: newest.as_ref().map_or(0, |(seq, _)| *seq),
            legacy: legacy.is_some(),
        };
        let meta = match (newest, legacy) {
            (Some((_, meta)), _) => meta,
            (None, Some(meta)) => meta,
            (None, None) => Meta::new(),
        };
        Ok((slots, meta))
    }

    /// Save `meta` durably in the slot not in force.
    pub(super) fn save(&mut self, meta: &Meta) -> BackendResult<()> {
        let payload = postcard::to_allocvec(meta).map_err(|e| BackendError::new("log meta", e))?;
        let room = LOG_META_SLOT_BYTES as usize - HEADER_BYTES;
        if payload.len() > room {
            let why = format!("{} bytes, a slot holds {room}", payload.len());
            return Err(BackendError::new("log meta too large", why));
        }
        let seq = self.seq + 1;
        let len = u32::try_from(payload.len()).expect("a slot is smaller than 4 GiB");
        let mut record = Vec::with_capacity(HEADER_BYTES + payload.len());
        record.extend_from_slice(&len.to_le_bytes());
        record.extend_from_slice(&checksum(seq, &payload).to_le_bytes());
        record.extend_from_slice(&seq.to_le_bytes());
        record.extend_from_slice(&payload);
        let slot = &self.slots[(seq % 2) as usize];
        slot.write_all_at(&record, 0)
            .map_err(io("write log meta slot"))?;
        slot.sync_data().map_err(io("sync log meta slot"))?;
        self.seq = seq;
        if std::mem::take(&mut self.legacy) {
            std::fs::remove_file(self.dir.join(LEGACY_FILE)).map_err(io("remove log meta"))?;
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &[u8])]) -> Meta {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_vec()))
            .collect()
    }

    #[test]
    fn the_latest_save_is_in_force_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut slots, meta) = MetaSlots::open(dir.path()).unwrap();
        assert!(meta.is_empty());
        for n in 0..5u8 {
            slots.save(&map(&[("vote", &[n])])).unwrap();
        }
        drop(slots);
        let (_, meta) = MetaSlots::open(dir.path()).unwrap();
        assert_eq!(meta, map(&[("vote", &[4])]));
    }

    /// A save torn by a crash (its slot left half written) leaves the save before it in
    /// force, and the next save goes to the same slot.
    #[test]
    fn a_torn_save_leaves_the_one_before_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let (mut slots, _) = MetaSlots::open(dir.path()).unwrap();
        slots.save(&map(&[("vote", b"one")])).unwrap();
        slots.save(&map(&[("vote", b"two")])).unwrap();
        drop(slots);
        // Save 3 would go to slot 1: tear it (its record half over save 1's).
        let torn = OpenOptions::new()
            .write(true)
            .open(dir.path().join(slot_name(1)))
            .unwrap();
        torn.write_all_at(&[0xff; 9], 4).unwrap();
        drop(torn);
        let (mut slots, meta) = MetaSlots::open(dir.path()).unwrap();
        assert_eq!(meta, map(&[("vote", b"two")]));
        slots.save(&map(&[("vote", b"three")])).unwrap();
        drop(slots);
        let (_, meta) = MetaSlots::open(dir.path()).unwrap();
        assert_eq!(meta, map(&[("vote", b"three")]));
    }

    /// A store of the earlier layout keeps its metadata: read from `log/meta` until the
    /// first save, which removes that file.
    #[test]
    fn the_earlier_layout_is_read_then_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let old = map(&[("vote", b"old"), ("purged", b"7")]);
        std::fs::write(
            dir.path().join(LEGACY_FILE),
            postcard::to_allocvec(&old).unwrap(),
        )
        .unwrap();
        let (mut slots, meta) = MetaSlots::open(dir.path()).unwrap();
        assert_eq!(meta, old);
        let new = map(&[("vote", b"new"), ("purged", b"7")]);
        slots.save(&new).unwrap();
        assert!(!dir.path().join(LEGACY_FILE).exists());
        drop(slots);
        assert_eq!(MetaSlots::open(dir.path()).unwrap().1, new);
    }

    /// The slot record's layout is a stored encoding: pinned byte for byte (len, crc over
    /// seq and payload, seq, the postcard map), in slot `seq % 2`.
    #[test]
    fn the_slot_record_is_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let (mut slots, _) = MetaSlots::open(dir.path()).unwrap();
        slots.save(&map(&[("vote", &[1, 2])])).unwrap();
        let bytes = std::fs::read(dir.path().join(slot_name(1))).unwrap();
        let hex: String = bytes[..25].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, GOLDEN_SLOT_RECORD, "the layout of log/meta.N changed");
        assert_eq!(bytes.len() as u64, LOG_META_SLOT_BYTES);
        assert!(bytes[25..].iter().all(|b| *b == 0));
    }

    /// `{"vote": [1, 2]}` saved as the first save.
    const GOLDEN_SLOT_RECORD: &str = "09000000e4bd595f01000000000000000104766f7465020102";

    #[test]
    fn a_map_larger_than_a_slot_is_refused_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut slots, _) = MetaSlots::open(dir.path()).unwrap();
        slots.save(&map(&[("vote", b"kept")])).unwrap();
        let huge = vec![7u8; LOG_META_SLOT_BYTES as usize];
        let refused = slots.save(&map(&[("vote", &huge)])).unwrap_err();
        assert!(refused.to_string().contains("too large"), "{refused}");
        drop(slots);
        assert_eq!(
            MetaSlots::open(dir.path()).unwrap().1,
            map(&[("vote", b"kept")])
        );
    }
}
