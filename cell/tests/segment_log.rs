//! The segment log under faults a disk can produce: a segment cut short in the middle of a
//! record, a record whose bytes were only partly written, stale records behind a
//! truncation, a gap left by a purge. Every test reopens real files in a temp directory.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use whip_cell::storage::{Backend, StorageKind, open_backend};

fn payload(index: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (index as usize * 31 + i) as u8).collect()
}

fn rows(from: u64, to: u64, len: usize) -> Vec<(u64, Vec<u8>)> {
    (from..to).map(|i| (i, payload(i, len))).collect()
}

fn open(dir: &Path) -> std::sync::Arc<dyn Backend> {
    open_backend(StorageKind::Redb, dir).expect("open backend")
}

/// The segment files, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("log"))
        .expect("log dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    files.sort();
    files
}

fn indexes(backend: &dyn Backend) -> Vec<u64> {
    let all = backend.log_range(0, u64::MAX).expect("range");
    for (i, bytes) in &all {
        assert_eq!(
            *bytes,
            payload(*i, bytes.len()),
            "entry {i} came back altered"
        );
    }
    all.into_iter().map(|(i, _)| i).collect()
}

/// Header bytes before each record's payload.
const HEADER: u64 = 16;

#[test]
fn a_segment_cut_mid_record_keeps_every_whole_record() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = open(dir.path());
        for i in 1..=50 {
            b.log_append(&rows(i, i + 1, 100)).unwrap();
        }
    }
    // Cut the file in the middle of record 50: 49 whole records of 116 bytes, then 40 more.
    let seg = &segments(dir.path())[0];
    let file = std::fs::OpenOptions::new().write(true).open(seg).unwrap();
    file.set_len(49 * (HEADER + 100) + 40).unwrap();
    drop(file);
    let b = open(dir.path());
    assert_eq!(indexes(b.as_ref()), (1..=49).collect::<Vec<_>>());
    // The log goes on from the cut, and the continuation survives another reopen.
    b.log_append(&rows(50, 60, 100)).unwrap();
    drop(b);
    let b = open(dir.path());
    assert_eq!(indexes(b.as_ref()), (1..60).collect::<Vec<_>>());
}

#[test]
fn a_partly_written_record_ends_the_log_before_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = open(dir.path());
        b.log_append(&rows(1, 21, 64)).unwrap();
    }
    // Scribble over the payload of record 15 (a torn write inside one group append).
    let seg = &segments(dir.path())[0];
    let file = std::fs::OpenOptions::new().write(true).open(seg).unwrap();
    file.write_all_at(&[0xAB; 8], 14 * (HEADER + 64) + HEADER + 10)
        .unwrap();
    drop(file);
    let b = open(dir.path());
    assert_eq!(indexes(b.as_ref()), (1..15).collect::<Vec<_>>());
    assert_eq!(b.log_last().unwrap().map(|(i, _)| i), Some(14));
}

#[test]
fn records_behind_a_truncation_never_come_back() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = open(dir.path());
        b.log_append(&rows(1, 11, 50)).unwrap();
        b.log_truncate(5).unwrap();
        // A new entry 5 of exactly the old one's size: old 6..10 now sit right behind it.
        b.log_append(&[(5, vec![9u8; 50])]).unwrap();
    }
    let b = open(dir.path());
    let all = b.log_range(0, u64::MAX).unwrap();
    let got: Vec<u64> = all.iter().map(|(i, _)| *i).collect();
    assert_eq!(got, vec![1, 2, 3, 4, 5]);
    assert_eq!(all[4].1, vec![9u8; 50]);
}

#[test]
fn an_overwriting_append_replaces_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    b.log_append(&rows(1, 11, 30)).unwrap();
    b.log_append(&[(7, vec![1u8; 30]), (8, vec![2u8; 30])])
        .unwrap();
    drop(b);
    let b = open(dir.path());
    let got: Vec<u64> = b
        .log_range(0, 100)
        .unwrap()
        .iter()
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(got, (1..=8).collect::<Vec<_>>());
}

#[test]
fn a_purge_to_past_the_log_starts_a_new_segment_that_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = open(dir.path());
        b.log_append(&rows(1, 11, 30)).unwrap();
        // A snapshot up to 100 arrived: everything is purged, the log resumes at 101.
        b.log_purge(100, ("last_purged", vec![1, 2, 3])).unwrap();
        b.log_append(&rows(101, 111, 30)).unwrap();
    }
    let b = open(dir.path());
    assert_eq!(indexes(b.as_ref()), (101..111).collect::<Vec<_>>());
    assert_eq!(b.meta_get("last_purged").unwrap(), Some(vec![1, 2, 3]));
    assert_eq!(segments(dir.path()).len(), 1, "the purged segment is gone");
}

#[test]
fn appends_roll_over_into_new_segments_and_purge_drops_whole_ones() {
    let dir = tempfile::tempdir().unwrap();
    let big = 4 << 20;
    {
        let b = open(dir.path());
        for i in 1..=20 {
            b.log_append(&rows(i, i + 1, big)).unwrap();
        }
        assert!(
            segments(dir.path()).len() >= 3,
            "{:?}",
            segments(dir.path())
        );
        b.log_purge(12, ("last_purged", vec![12])).unwrap();
    }
    let b = open(dir.path());
    let got = b.log_range(13, 21).unwrap();
    assert_eq!(got.len(), 8);
    assert!(got.iter().all(|(i, p)| *p == payload(*i, big)));
    assert_eq!(b.log_last().unwrap().map(|(i, _)| i), Some(20));
    let first = b.log_range(0, 21).unwrap()[0].0;
    assert!(
        first <= 13,
        "entries after the purge point kept (first {first})"
    );
}

#[test]
fn an_old_directory_keeps_its_redb_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = open_backend(StorageKind::RedbLog, dir.path()).unwrap();
        b.log_append(&rows(1, 6, 10)).unwrap();
    }
    // Opened as the default now: the log found in log.redb is the one used.
    let b = open(dir.path());
    assert_eq!(indexes(b.as_ref()), (1..6).collect::<Vec<_>>());
    assert!(!dir.path().join("log").exists());
}
