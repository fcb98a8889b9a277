//! The `disk` nemesis's faults under a node's log store: an `fsync` error or a full disk
//! (`enospc`) switched on in the running node through its `--disk-fault-file`, which must
//! stop the node non-zero (exit 74) before anything unsynced is acknowledged; and a torn
//! tail, written into a stopped node's last log segment before it restarts, which the
//! node's open must cut off.
//!
//! The torn tail is a partial record written right behind the last record of the segment:
//! what a crash in the middle of an append leaves. The record behind it was synced and may
//! have been acknowledged, so the tear never touches it (a disk that loses acknowledged
//! writes breaks every consensus protocol; that is not the fault modelled here).

use std::path::{Path, PathBuf};

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

/// The exit status of a node whose log store failed (`EX_IOERR`, `whip … serve`).
pub const EXIT_LOG_FAILED: i32 = 74;

/// Bytes of a segment record's header: length, chained crc, index.
const HEADER_BYTES: usize = 16;
/// Payload bytes the torn record claims; fewer are written.
const TORN_CLAIMED_BYTES: u32 = 96;
/// Payload bytes of the torn record actually written.
const TORN_WRITTEN_BYTES: usize = 40;

/// The fault of one `disk` round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskKind {
    /// The node's next log sync fails.
    Fsync,
    /// The node's next log write finds the disk full.
    Enospc,
    /// The node is killed and its log gets a torn tail before it restarts.
    Torn,
}

impl DiskKind {
    /// Pick one.
    pub fn choose(rng: &mut StdRng) -> DiskKind {
        *[DiskKind::Fsync, DiskKind::Enospc, DiskKind::Torn]
            .choose(rng)
            .expect("kinds")
    }

    /// The word the node's fault file takes (`None` for the torn tail).
    pub fn switch(self) -> Option<&'static str> {
        match self {
            DiskKind::Fsync => Some("fsync"),
            DiskKind::Enospc => Some("enospc"),
            DiskKind::Torn => None,
        }
    }

    /// The name in the nemesis log.
    pub fn name(self) -> &'static str {
        self.switch().unwrap_or("torn-tail")
    }
}

/// Every segment-log directory under `data` (a cell's `…/log` or a node's `node-log`, holding
/// `*.seg` files: both write `len | crc | sequence` headers).
fn log_dirs(data: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(data) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let has_segments = path
            .file_name()
            .is_some_and(|n| n == "log" || n == "node-log")
            && last_segment(&path).is_some();
        if has_segments {
            out.push(path);
        } else {
            log_dirs(&path, out);
        }
    }
}

fn last_segment(dir: &Path) -> Option<PathBuf> {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segments.sort();
    segments.pop()
}

/// Where the records of `bytes` end, and the last record's index (`None`: no record).
fn records_end(bytes: &[u8]) -> (usize, Option<u64>) {
    let (mut at, mut last) = (0usize, None);
    while at + HEADER_BYTES <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let index = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().expect("8 bytes"));
        let end = at + HEADER_BYTES + len;
        let follows = last.is_none_or(|l: u64| index == l + 1);
        if len == 0 || end > bytes.len() || !follows {
            break;
        }
        (at, last) = (end, Some(index));
    }
    (at, last)
}

/// Write a torn record behind the last record of one of the log segments under `data`
/// (a stopped node's data directory); what was torn, or `None` when no segment has room.
pub fn tear_tail(data: &Path, rng: &mut StdRng) -> Result<Option<String>, String> {
    use std::os::unix::fs::FileExt;
    let mut dirs = Vec::new();
    log_dirs(data, &mut dirs);
    dirs.sort();
    let Some(dir) = dirs.choose(rng) else {
        return Ok(None);
    };
    let segment = last_segment(dir).expect("a log directory with segments");
    let bytes = std::fs::read(&segment).map_err(|e| format!("{}: {e}", segment.display()))?;
    let (end, last) = records_end(&bytes);
    if end + HEADER_BYTES + TORN_WRITTEN_BYTES > bytes.len() {
        return Ok(None);
    }
    let mut torn = Vec::with_capacity(HEADER_BYTES + TORN_WRITTEN_BYTES);
    torn.extend_from_slice(&TORN_CLAIMED_BYTES.to_le_bytes());
    torn.extend_from_slice(&rng.random::<u32>().to_le_bytes());
    torn.extend_from_slice(&last.map_or(1, |l| l + 1).to_le_bytes());
    torn.extend((0..TORN_WRITTEN_BYTES).map(|_| rng.random::<u8>()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .map_err(|e| format!("{}: {e}", segment.display()))?;
    file.write_all_at(&torn, end as u64)
        .and_then(|()| file.sync_data())
        .map_err(|e| format!("{}: {e}", segment.display()))?;
    Ok(Some(format!(
        "{} at byte {end} after index {last:?}",
        segment.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&7u32.to_le_bytes());
        out.extend_from_slice(&index.to_le_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn the_records_end_where_the_zeros_or_the_index_chain_stop() {
        let mut bytes = record(5, b"abc");
        bytes.extend(record(6, b"defg"));
        let end = bytes.len();
        bytes.extend(record(9, b"stale"));
        bytes.extend(vec![0; 64]);
        assert_eq!(records_end(&bytes), (end, Some(6)));
        assert_eq!(records_end(&[0; 32]), (0, None));
    }
}
