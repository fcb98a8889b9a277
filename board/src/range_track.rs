//! A range move's copy before its freeze: the source records what changes meanwhile.
//!
//! A move used to freeze its range first and copy every row while clients waited. Now the
//! driver first asks the source to record the range's changes (`Command::RangeTrack`),
//! copies the range while the source still serves it, and only then freezes it. Once
//! frozen, the source sends only the rows it recorded (`Query::RangeChanges`), each as it
//! holds it now or as deleted, and the target writes them (`Command::RangePatch`), so the
//! range is frozen for one short page instead of a whole copy.
//!
//! Why the target ends exact: every row of the range the source changed after the record
//! began is in the record (the record is kept by [`Tracked`], through which `crate::apply`
//! writes, so no write escapes it); every other row has the value it had when the record
//! began, which the copy read afterwards. The frozen source changes nothing more, so
//! sending the record's rows again is harmless: a driver that stops mid-patch is finished
//! by the next one sending the same rows.
//!
//! Resuming: a driver that stops mid-copy (killed, paused, its lease lost) leaves its
//! record going on. The next driver's `RangeTrack` for the same range and target keeps a
//! complete record instead of starting over, and the source keeps how far the target holds
//! a clean copy (`Command::RangeCopied`, written after each page the target took), so the
//! next driver copies on from there: the rows already there were read after the record
//! began, which is all the argument above needs. Without that mark the target is cleared
//! first (the mark of an empty key says it was).
//!
//! Bounds: the record holds at most `RANGE_CHANGED_KEYS_MAX` keys; past it the record is
//! marked incomplete and the move copies the whole frozen range again, after deleting the
//! target's copy (`Command::RangeClear`). Only one range change runs fabric-wide at a time,
//! so a cell keeps one record; a new record forgets the old one in the same apply.
//!
//! Invariants: the record only grows while its range is owned and not frozen here (the
//! freeze ends it; the drop of the moved range forgets it); its rows are the cell's own and
//! never move; no client request names them.

use serde::{Deserialize, Serialize};

use crate::codec::{encode_versioned, versioned};
use crate::keys::{RANGE_CHANGED, RANGE_COPIED, RANGE_TRACK};
use crate::limits::{RANGE_CHANGED_KEYS_MAX, RANGE_EXPORT_BYTES_MAX, RANGE_ROWS_PER_COMMAND_MAX};
use crate::query::QueryResult;
use crate::range;
use crate::txn::Txn;
use crate::types::{Command, Outcome};

/// The record of one range's changes, on its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Track {
    start: u64,
    last: u64,
    to_cell: u64,
    /// Keys recorded.
    changed: u32,
    /// More keys changed than the record holds: it is no longer complete.
    overflow: bool,
    /// The record's change count: each recorded change takes the next one, and its key's
    /// marker holds it, so a catch-up can tell which keys changed after it read them.
    seq: u64,
}

/// [`Track`] as version 1 stored it (no change count: its markers are empty).
#[derive(Deserialize)]
struct TrackV1 {
    start: u64,
    last: u64,
    to_cell: u64,
    changed: u32,
    overflow: bool,
}

/// The encoding versions of [`Track`]: 2 adds `seq` (1 is still read).
const TRACK_VERSION_V1: u8 = 1;
const TRACK_VERSION: u8 = 2;

fn read_track(txn: &impl Txn) -> Option<Track> {
    let bytes = txn.get(&[RANGE_TRACK])?;
    match versioned(&bytes) {
        Some((TRACK_VERSION, body)) => Some(postcard::from_bytes(body).expect("track decodes")),
        Some((TRACK_VERSION_V1, body)) => {
            let v1: TrackV1 = postcard::from_bytes(body).expect("track v1 decodes");
            Some(Track {
                start: v1.start,
                last: v1.last,
                to_cell: v1.to_cell,
                changed: v1.changed,
                overflow: v1.overflow,
                seq: 0,
            })
        }
        other => panic!(
            "range track row of unknown version {:?}",
            other.map(|v| v.0)
        ),
    }
}

/// The change count a key's marker holds: when the record last saw the key change. A
/// version-1 marker is empty and counts as changed last of all (a catch-up never drops it).
fn marker_seq(value: &[u8]) -> u64 {
    match <[u8; 8]>::try_from(value) {
        Ok(bytes) => u64::from_be_bytes(bytes),
        Err(_) if value.is_empty() => u64::MAX,
        Err(_) => panic!("range change marker of {} bytes", value.len()),
    }
}

fn put_track(txn: &mut impl Txn, track: &Track) {
    txn.put(&[RANGE_TRACK], &encode_versioned(TRACK_VERSION, track));
}

fn changed_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.push(RANGE_CHANGED);
    out.extend_from_slice(key);
    out
}

/// How far the record's target holds a clean copy (see the module docs).
#[derive(Serialize, Deserialize)]
struct Copied {
    /// The last raw key copied (empty: the target was cleared, nothing copied yet).
    #[serde(with = "serde_bytes")]
    after_key: Vec<u8>,
}

/// The encoding version of [`Copied`].
const COPIED_VERSION: u8 = 1;

fn read_copied(txn: &impl Txn) -> Option<Vec<u8>> {
    let bytes = txn.get(&[RANGE_COPIED])?;
    match versioned(&bytes) {
        Some((COPIED_VERSION, body)) => {
            let copied: Copied = postcard::from_bytes(body).expect("copy mark decodes");
            Some(copied.after_key)
        }
        other => panic!("copy mark of unknown version {:?}", other.map(|v| v.0)),
    }
}

/// The complete record of exactly `[start, last]`, if this cell keeps one.
fn complete(txn: &impl Txn, (start, last): (u64, u64)) -> Option<Track> {
    read_track(txn).filter(|t| t.start == start && t.last == last && !t.overflow)
}

/// Delete the record, its copy mark and every key it holds (at most
/// `RANGE_CHANGED_KEYS_MAX`).
fn forget(txn: &mut impl Txn) {
    let rows = txn.scan(
        &[RANGE_CHANGED],
        &[RANGE_CHANGED + 1],
        RANGE_CHANGED_KEYS_MAX + 1,
    );
    for (key, _) in rows {
        txn.delete(&key);
    }
    txn.delete(&[RANGE_COPIED]);
    txn.delete(&[RANGE_TRACK]);
}

/// Apply one step of a move's copy (`RangeTrack`, `RangeCopied`, `RangeDrained`,
/// `RangeClear`, `RangePatch`).
pub(crate) fn apply(txn: &mut impl Txn, command: &Command) -> Outcome {
    match command {
        Command::RangeTrack {
            start,
            last,
            to_cell,
        } => track(txn, *start, *last, *to_cell),
        Command::RangeCopied {
            start,
            last,
            to_cell,
            after_key,
        } => copied(txn, (*start, *last), *to_cell, after_key),
        Command::RangeDrained {
            start,
            last,
            to_cell,
            after_key,
            through_key,
            upto_seq,
        } => {
            let keys = (after_key.as_slice(), through_key.as_slice());
            drained(txn, (*start, *last), *to_cell, keys, *upto_seq)
        }
        Command::RangeClear { start, last } => clear(txn, *start, *last),
        Command::RangePatch { puts, deletes } => patch(txn, puts, deletes),
        other => unreachable!("{other:?} is not a step of a move's copy"),
    }
}

/// Begin recording the changes of owned, serving range `[start, last]` for a move to
/// `to_cell` (`Command::RangeTrack`). A complete record of the same range for the same
/// target goes on, with its copy mark; any other record is forgotten.
pub(crate) fn track(txn: &mut impl Txn, start: u64, last: u64, to_cell: u64) -> Outcome {
    let serving = range::rows(txn)
        .into_iter()
        .find(|r| r.start == start && r.last == last);
    match serving {
        None => return Outcome::RangeUnknown { start, last },
        Some(row) if row.frozen => return Outcome::WrongRange { epoch: row.epoch },
        Some(_) => {}
    }
    if complete(txn, (start, last)).is_some_and(|t| t.to_cell == to_cell) {
        return Outcome::RangeTracked { to_cell };
    }
    // The change count goes on across records, so a catch-up's drop for an older record
    // never matches a newer record's markers.
    let seq = read_track(txn).map_or(0, |t| t.seq);
    forget(txn);
    let track = Track {
        start,
        last,
        to_cell,
        changed: 0,
        overflow: false,
        seq,
    };
    put_track(txn, &track);
    Outcome::RangeTracked { to_cell }
}

/// Mark that `to_cell` holds a clean copy of `[start, last]` through `after_key`
/// (`Command::RangeCopied`): `RangeTracked` while the complete record for that target goes
/// on, else `RangeUnknown` and nothing changes. The mark only moves forward.
pub(crate) fn copied(
    txn: &mut impl Txn,
    (start, last): (u64, u64),
    to_cell: u64,
    after_key: &[u8],
) -> Outcome {
    if complete(txn, (start, last)).is_none_or(|t| t.to_cell != to_cell) {
        return Outcome::RangeUnknown { start, last };
    }
    if read_copied(txn).is_none_or(|before| before.as_slice() < after_key) {
        let copied = Copied {
            after_key: after_key.to_vec(),
        };
        txn.put(&[RANGE_COPIED], &encode_versioned(COPIED_VERSION, &copied));
    }
    Outcome::RangeTracked { to_cell }
}

/// The target of the complete record of `[start, last]` and its copy mark
/// (`Query::RangeCopy`).
pub(crate) fn copy_state(txn: &impl Txn, range: (u64, u64)) -> QueryResult {
    let to_cell = complete(txn, range).map(|t| t.to_cell);
    QueryResult::RangeCopy {
        to_cell,
        copied_after: to_cell.and_then(|_| read_copied(txn)),
    }
}

/// The record `crate::apply` must keep now: one whose range is owned here and serving.
pub(crate) fn recording(txn: &impl Txn) -> Option<Track> {
    let track = read_track(txn).filter(|t| !t.overflow)?;
    let serving = range::rows(txn)
        .into_iter()
        .any(|r| r.start == track.start && r.last == track.last && !r.frozen);
    serving.then_some(track)
}

/// Forget the record of `[start, last]`, if this cell keeps it (its move's source dropped
/// the range).
pub(crate) fn forget_range(txn: &mut impl Txn, start: u64, last: u64) {
    if read_track(txn).is_some_and(|t| t.start == start && t.last == last) {
        forget(txn);
    }
}

/// A [`Txn`] that records every key of the tracked range written or deleted through it.
/// `crate::apply` runs every command through one.
pub(crate) struct Tracked<'t, T: Txn> {
    inner: &'t mut T,
    /// The cell kept a record of a range it serves when the apply began.
    recording: bool,
}

impl<'t, T: Txn> Tracked<'t, T> {
    /// Wrap `inner`, recording if it keeps a record of a range it serves.
    pub(crate) fn new(inner: &'t mut T) -> Self {
        let recording = recording(inner).is_some();
        Tracked { inner, recording }
    }

    /// Record `key` (holding `value`, or held before its delete) if it is in the range.
    /// The record is read afresh: a command of this apply may have changed it.
    fn note(&mut self, key: &[u8], value: &[u8]) {
        let Some(mut track) = read_track(self.inner).filter(|t| !t.overflow) else {
            return;
        };
        let inside = range::row_point(key, value)
            .is_some_and(|point| track.start <= point && point <= track.last);
        if !inside {
            return;
        }
        let marker = changed_key(key);
        if self.inner.get(&marker).is_none() {
            if track.changed as usize >= RANGE_CHANGED_KEYS_MAX {
                track.overflow = true;
                put_track(self.inner, &track);
                return;
            }
            track.changed += 1;
        }
        track.seq += 1;
        self.inner.put(&marker, &track.seq.to_be_bytes());
        put_track(self.inner, &track);
    }
}

impl<T: Txn> Txn for Tracked<'_, T> {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get(key)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        if self.recording {
            self.note(key, value);
        }
        self.inner.put(key, value);
    }

    fn delete(&mut self, key: &[u8]) {
        if self.recording
            && let Some(old) = self.inner.get(key)
        {
            self.note(key, &old);
        }
        self.inner.delete(key);
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.inner.scan(start, end, limit)
    }
}

/// The recorded changes of `[start, last]` after `after_key`, as the cell holds them now
/// (`Query::RangeChanges`): at most `limit` rows and about `RANGE_EXPORT_BYTES_MAX` bytes.
pub(crate) fn changes(
    txn: &impl Txn,
    (start, last): (u64, u64),
    after_key: &[u8],
    limit: usize,
) -> QueryResult {
    let complete = complete(txn, (start, last)).map(|t| t.to_cell);
    let Page {
        puts,
        deletes,
        next,
    } = match complete {
        Some(_) => page(txn, after_key, limit),
        None => Page::default(),
    };
    QueryResult::RangeChanges {
        to_cell: complete,
        puts,
        deletes,
        next,
    }
}

/// A page of the record of `[start, last]` while the source may still serve the range
/// (`Query::RangePending`): as [`changes`], with the record's change count and size read in
/// the same snapshot, so a catch-up can drop exactly the markers it sent
/// (`Command::RangeDrained`).
pub(crate) fn pending(
    txn: &impl Txn,
    range: (u64, u64),
    after_key: &[u8],
    limit: usize,
) -> QueryResult {
    let record = complete(txn, range);
    let Page {
        puts,
        deletes,
        next,
    } = match record {
        Some(_) => page(txn, after_key, limit),
        None => Page::default(),
    };
    QueryResult::RangePending {
        to_cell: record.map(|t| t.to_cell),
        seq: record.map_or(0, |t| t.seq),
        changed: record.map_or(0, |t| t.changed),
        puts,
        deletes,
        next,
    }
}

/// One page of recorded keys, as the cell holds them now.
#[derive(Default)]
struct Page {
    puts: Vec<(Vec<u8>, Vec<u8>)>,
    deletes: Vec<Vec<u8>>,
    next: Option<Vec<u8>>,
}

/// The recorded keys after `after_key`: at most `limit` rows and about
/// `RANGE_EXPORT_BYTES_MAX` bytes.
fn page(txn: &impl Txn, after_key: &[u8], limit: usize) -> Page {
    let mut out = Page::default();
    let mut from = changed_key(after_key);
    from.push(0);
    let limit = limit.clamp(1, RANGE_ROWS_PER_COMMAND_MAX);
    let markers = txn.scan(&from, &[RANGE_CHANGED + 1], limit + 1);
    let mut bytes = 0usize;
    for (index, (marker, _)) in markers.iter().enumerate() {
        if index == limit || bytes >= RANGE_EXPORT_BYTES_MAX {
            out.next = Some(markers[index - 1].0[1..].to_vec());
            break;
        }
        let key = marker[1..].to_vec();
        bytes += key.len();
        match txn.get(&key) {
            Some(value) => {
                bytes += value.len();
                out.puts.push((key, value));
            }
            None => out.deletes.push(key),
        }
    }
    out
}

/// Drop the markers of the keys in `(after_key, through_key]` whose last change the record
/// counted at most `upto_seq` (`Command::RangeDrained`): a catch-up before the freeze read
/// them at that count and the target took them, so it holds them unless they change again,
/// and then their markers hold a later count and stay. At most
/// `RANGE_ROWS_PER_COMMAND_MAX` markers per command. Answers `RangeTracked` while the
/// complete record for `to_cell` goes on, else `RangeUnknown` and nothing changes.
pub(crate) fn drained(
    txn: &mut impl Txn,
    (start, last): (u64, u64),
    to_cell: u64,
    (after_key, through_key): (&[u8], &[u8]),
    upto_seq: u64,
) -> Outcome {
    let Some(mut track) = complete(txn, (start, last)).filter(|t| t.to_cell == to_cell) else {
        return Outcome::RangeUnknown { start, last };
    };
    let mut from = changed_key(after_key);
    from.push(0);
    let mut end = changed_key(through_key);
    end.push(0);
    for (marker, value) in txn.scan(&from, &end, RANGE_ROWS_PER_COMMAND_MAX) {
        if marker_seq(&value) <= upto_seq {
            txn.delete(&marker);
            track.changed = track.changed.saturating_sub(1);
        }
    }
    put_track(txn, &track);
    Outcome::RangeTracked { to_cell }
}

/// Write a frozen range's changes on the move's target (`Command::RangePatch`). Rows of the
/// cell's own families, of no family, or whose values do not decode are refused, and then
/// nothing changes.
pub(crate) fn patch(
    txn: &mut impl Txn,
    puts: &[(Vec<u8>, Vec<u8>)],
    deletes: &[Vec<u8>],
) -> Outcome {
    if let Err(refused) = range::check_importable(puts) {
        return refused;
    }
    let held: Vec<(Vec<u8>, Vec<u8>)> = deletes
        .iter()
        .filter_map(|key| txn.get(key).map(|value| (key.clone(), value)))
        .collect();
    if let Err(refused) = range::check_importable(&held) {
        return refused;
    }
    for (key, value) in puts {
        range::write_arrived(txn, key, value);
    }
    for (key, value) in &held {
        range::erase_departed(txn, key, value);
    }
    Outcome::RangeImported {
        rows: (puts.len() + held.len()) as u32,
    }
}

/// Delete what an unfinished copy left of `[start, last]` on a move's target, at most
/// `RANGE_ROWS_PER_COMMAND_MAX` rows per command (`Command::RangeClear`); refused when the
/// cell owns any part of the range.
pub(crate) fn clear(txn: &mut impl Txn, start: u64, last: u64) -> Outcome {
    if let Some(owned) = range::rows(txn)
        .into_iter()
        .find(|r| r.start <= last && start <= r.last)
    {
        return Outcome::Invalid {
            reason: format!(
                "cell owns range {:#x}..={:#x}, which overlaps {start:#x}..={last:#x}",
                owned.start, owned.last
            ),
        };
    }
    let (removed, done) = range::erase_rows(txn, start, last);
    Outcome::RangeDropped { removed, done }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Query;
    use crate::txn::MemTxn;
    use crate::types::{Command, Request, ResourceId, Stamp};

    const WHOLE: (u64, u64) = (0, u64::MAX);

    fn run_at(txn: &mut MemTxn, index: u64, command: Command, epoch: u64) -> Outcome {
        let stamp = Stamp {
            index,
            position: 0,
            time_ms: 1_000 + index,
        };
        let mut request = Request::server(None, command);
        request.epoch = epoch;
        crate::apply(txn, stamp, &request).outcome
    }

    /// A cell serving the whole ring at epoch 1.
    fn source() -> MemTxn {
        let mut txn = MemTxn::default();
        let assign = Command::RangeAssign {
            start: WHOLE.0,
            last: WHOLE.1,
            epoch: 1,
            fence_above: 0,
        };
        assert_eq!(
            run_at(&mut txn, 1, assign, 0),
            Outcome::RangeAssigned { epoch: 1 }
        );
        txn
    }

    /// One client write, chosen by `n`: keys put and deleted, leases taken and let go.
    fn client_write(n: u64) -> Command {
        let key = format!("k{}", n % 37).into_bytes();
        let lease = ResourceId {
            owner: "o".into(),
            name: format!("l{}", n % 5),
            key: String::new(),
        };
        match n % 5 {
            0 | 1 => Command::KvPut {
                key,
                value: n.to_be_bytes().to_vec(),
                expect_version: None,
            },
            2 => Command::KvDelete {
                key,
                expect_version: None,
            },
            3 => Command::LeaseAcquire {
                lease,
                holder: format!("h{}", n % 3),
                slots: 2,
                ttl_ms: 60_000,
                wait_ms: 0,
            },
            _ => Command::LeaseRelease {
                lease,
                holder: format!("h{}", n % 3),
            },
        }
    }

    /// `count` client writes on `src`, chosen by the generator state `n`, from `index` on.
    fn scribble(src: &mut MemTxn, n: &mut u64, index: &mut u64, count: u64) {
        for _ in 0..count {
            *n = n
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *index += 1;
            run_at(src, *index, client_write(*n >> 33), 1);
        }
    }

    fn export_all(txn: &MemTxn) -> Vec<(Vec<u8>, Vec<u8>)> {
        range::export(txn, WHOLE.0, WHOLE.1, &[], RANGE_ROWS_PER_COMMAND_MAX).0
    }

    fn ask(txn: &MemTxn, after_key: Vec<u8>, limit: u32) -> QueryResult {
        let query = Query::RangeChanges {
            start: WHOLE.0,
            last: WHOLE.1,
            after_key,
            limit,
        };
        crate::query(txn, 0, &query)
    }

    /// Send the source's recorded changes to the target, a few rows per page; the record's
    /// target, or `None` when the record was incomplete.
    fn send_changes(from: &MemTxn, to: &mut MemTxn, index: &mut u64) -> Option<u64> {
        let mut after = Vec::new();
        loop {
            let QueryResult::RangeChanges {
                to_cell,
                puts,
                deletes,
                next,
            } = ask(from, after.clone(), 3)
            else {
                panic!("changes answered another shape");
            };
            to_cell?;
            *index += 1;
            let patched = run_at(to, *index, Command::RangePatch { puts, deletes }, 0);
            assert!(
                matches!(patched, Outcome::RangeImported { .. }),
                "{patched:?}"
            );
            match next {
                Some(key) => after = key,
                None => return to_cell,
            }
        }
    }

    /// A source after 40 client writes chosen by `seed` (at indexes 2 to 41).
    fn written(seed: u64) -> MemTxn {
        let mut src = source();
        for n in 0..40 {
            run_at(&mut src, 2 + n, client_write(n * 7 + seed), 1);
        }
        src
    }

    /// Freeze the whole ring on `src`, send its record to `dst`: they then hold the same.
    fn freeze_and_send(src: &mut MemTxn, dst: &mut MemTxn, index: &mut u64, seed: u64) {
        *index += 1;
        let freeze = Command::RangeFreeze {
            start: WHOLE.0,
            last: WHOLE.1,
            epoch: 2,
        };
        run_at(src, *index, freeze, 0);
        assert_eq!(send_changes(src, dst, index), Some(2));
        assert_eq!(export_all(dst), export_all(src), "seed {seed}");
    }

    /// The protocol: record, copy page by page while clients keep writing, freeze, send the
    /// record. The target then holds exactly the source's rows, whatever the interleaving;
    /// the frozen source's record no longer grows.
    #[test]
    fn a_copy_made_while_serving_ends_exact_after_the_changes() {
        for seed in 0..20u64 {
            let mut src = source();
            let mut dst = MemTxn::default();
            let mut index = 2;
            for n in 0..40 {
                run_at(&mut src, index, client_write(n * 7 + seed), 1);
                index += 1;
            }
            let track = Command::RangeTrack {
                start: WHOLE.0,
                last: WHOLE.1,
                to_cell: 2,
            };
            let tracked = run_at(&mut src, index, track, 0);
            assert_eq!(tracked, Outcome::RangeTracked { to_cell: 2 });
            let mut after = Vec::new();
            let mut n = 1_000 + seed;
            loop {
                let (rows, next) = range::export(&src, WHOLE.0, WHOLE.1, &after, 2);
                index += 1;
                run_at(&mut dst, index, Command::RangeImport { rows }, 0);
                scribble(&mut src, &mut n, &mut index, seed % 4);
                match next {
                    Some(key) => after = key,
                    None => break,
                }
            }
            index += 1;
            let freeze = Command::RangeFreeze {
                start: WHOLE.0,
                last: WHOLE.1,
                epoch: 2,
            };
            assert!(matches!(
                run_at(&mut src, index, freeze, 0),
                Outcome::RangeFrozenAt { .. }
            ));
            let record = src.map.clone();
            assert_eq!(
                send_changes(&src, &mut dst, &mut index),
                Some(2),
                "seed {seed}"
            );
            assert_eq!(export_all(&dst), export_all(&src), "seed {seed}");
            assert_eq!(
                send_changes(&src, &mut dst, &mut index),
                Some(2),
                "sent again"
            );
            assert_eq!(
                export_all(&dst),
                export_all(&src),
                "seed {seed}, sent again"
            );
            let refused = run_at(&mut src, index + 1, client_write(0), 1);
            assert!(matches!(refused, Outcome::WrongRange { .. }), "{refused:?}");
            assert_eq!(src.map, record, "the frozen source changed");
        }
    }

    fn copy_state(txn: &MemTxn) -> (Option<u64>, Option<Vec<u8>>) {
        let query = Query::RangeCopy {
            start: WHOLE.0,
            last: WHOLE.1,
        };
        match crate::query(txn, 0, &query) {
            QueryResult::RangeCopy {
                to_cell,
                copied_after,
            } => (to_cell, copied_after),
            other => panic!("copy state answered {other:?}"),
        }
    }

    fn track_to(to_cell: u64) -> Command {
        Command::RangeTrack {
            start: WHOLE.0,
            last: WHOLE.1,
            to_cell,
        }
    }

    fn mark(to_cell: u64, after_key: &[u8]) -> Command {
        Command::RangeCopied {
            start: WHOLE.0,
            last: WHOLE.1,
            to_cell,
            after_key: after_key.to_vec(),
        }
    }

    /// A driver that stopped half-way: the next one's track keeps the record and its copy
    /// mark for the same target, copies on from the mark, and the target ends exact, for
    /// every interleaving of client writes; a track to another target starts afresh.
    #[test]
    fn a_copy_resumed_from_its_mark_ends_exact() {
        for seed in 0..20u64 {
            let (mut src, mut dst, mut index) = (written(seed), MemTxn::default(), 42);
            run_at(&mut src, index, track_to(2), 0);
            assert_eq!(copy_state(&src), (Some(2), None), "no mark before a clear");
            index += 1;
            run_at(&mut src, index, mark(2, &[]), 0);
            let (mut after, mut n) = (Vec::new(), 1_000 + seed);
            for driver in 0..2 {
                if driver == 1 {
                    // The next driver: the same track keeps the record and the mark.
                    index += 1;
                    let kept = run_at(&mut src, index, track_to(2), 0);
                    assert_eq!(kept, Outcome::RangeTracked { to_cell: 2 });
                    let (to_cell, mark) = copy_state(&src);
                    assert_eq!(to_cell, Some(2));
                    after = mark.expect("the first driver's mark");
                }
                // The first driver stops after `seed % 3 + 1` pages.
                for _ in 0..(if driver == 0 { seed % 3 + 1 } else { u64::MAX }) {
                    let (rows, next) = range::export(&src, WHOLE.0, WHOLE.1, &after, 2);
                    let Some((last_key, _)) = rows.last().cloned() else {
                        break;
                    };
                    index += 1;
                    run_at(&mut dst, index, Command::RangeImport { rows }, 0);
                    index += 1;
                    let marked = run_at(&mut src, index, mark(2, &last_key), 0);
                    assert_eq!(marked, Outcome::RangeTracked { to_cell: 2 });
                    scribble(&mut src, &mut n, &mut index, seed % 4);
                    match next {
                        Some(key) => after = key,
                        None => break,
                    }
                }
            }
            freeze_and_send(&mut src, &mut dst, &mut index, seed);
        }
    }

    /// A mark only moves forward and only while its record goes on; a track to another
    /// target forgets the record and its mark.
    #[test]
    fn a_copy_mark_follows_its_record() {
        let mut src = source();
        run_at(&mut src, 2, track_to(2), 0);
        run_at(&mut src, 3, mark(2, b"m"), 0);
        run_at(&mut src, 4, mark(2, b"c"), 0);
        assert_eq!(copy_state(&src), (Some(2), Some(b"m".to_vec())));
        let elsewhere = run_at(&mut src, 5, mark(3, b"z"), 0);
        assert_eq!(
            elsewhere,
            Outcome::RangeUnknown {
                start: WHOLE.0,
                last: WHOLE.1
            }
        );
        run_at(&mut src, 6, track_to(3), 0);
        assert_eq!(
            copy_state(&src),
            (Some(3), None),
            "a new record has no mark"
        );
        assert_eq!(
            run_at(&mut src, 7, mark(2, b"z"), 0),
            Outcome::RangeUnknown {
                start: WHOLE.0,
                last: WHOLE.1
            }
        );
        assert_eq!(copy_state(&src), (Some(3), None));
    }

    /// Past `RANGE_CHANGED_KEYS_MAX` keys the record says it is incomplete (the move copies
    /// the whole range); a new record starts empty and the drop of the range forgets it.
    #[test]
    fn an_outgrown_record_says_so_and_a_drop_forgets_it() {
        let mut src = source();
        let track = |to_cell| Command::RangeTrack {
            start: WHOLE.0,
            last: WHOLE.1,
            to_cell,
        };
        run_at(&mut src, 2, track(2), 0);
        for n in 0..=RANGE_CHANGED_KEYS_MAX as u64 {
            let put = Command::KvPut {
                key: format!("key-{n}").into_bytes(),
                value: Vec::new(),
                expect_version: None,
            };
            run_at(&mut src, 3 + n, put, 1);
        }
        let QueryResult::RangeChanges { to_cell, puts, .. } = ask(&src, Vec::new(), 10) else {
            panic!("changes answered another shape");
        };
        assert_eq!(
            (to_cell, puts.len()),
            (None, 0),
            "an outgrown record is incomplete"
        );
        let markers = |txn: &MemTxn| txn.scan(&[RANGE_CHANGED], &[RANGE_CHANGED + 1], 1 << 20);
        assert_eq!(markers(&src).len(), RANGE_CHANGED_KEYS_MAX);
        run_at(&mut src, 10_000, track(3), 0);
        assert!(markers(&src).is_empty(), "a new record starts empty");
        let QueryResult::RangeChanges { to_cell, .. } = ask(&src, Vec::new(), 10) else {
            panic!("changes answered another shape");
        };
        assert_eq!(to_cell, Some(3));
        let put = Command::KvPut {
            key: b"late".to_vec(),
            value: Vec::new(),
            expect_version: None,
        };
        run_at(&mut src, 10_001, put, 1);
        assert_eq!(markers(&src).len(), 1);
        let freeze = Command::RangeFreeze {
            start: WHOLE.0,
            last: WHOLE.1,
            epoch: 2,
        };
        run_at(&mut src, 10_002, freeze, 0);
        let mut index = 10_003;
        loop {
            let drop = Command::RangeDrop {
                start: WHOLE.0,
                last: WHOLE.1,
            };
            index += 1;
            if let Outcome::RangeDropped { done: true, .. } = run_at(&mut src, index, drop, 0) {
                break;
            }
        }
        assert!(markers(&src).is_empty() && src.get(&[RANGE_TRACK]).is_none());
    }

    fn pend(txn: &MemTxn, after_key: Vec<u8>, limit: u32) -> QueryResult {
        let query = Query::RangePending {
            start: WHOLE.0,
            last: WHOLE.1,
            after_key,
            limit,
        };
        crate::query(txn, 0, &query)
    }

    /// One catch-up round before the freeze, a few rows per page, with `writes` client
    /// writes between its steps: each page goes to the target, then the source drops the
    /// markers the page read. The record's size after the round.
    fn catch_up(src: &mut MemTxn, dst: &mut MemTxn, index: &mut u64, n: &mut u64, writes: u64) {
        let mut after = Vec::new();
        loop {
            let QueryResult::RangePending {
                to_cell: Some(2),
                seq,
                puts,
                deletes,
                next,
                ..
            } = pend(src, after.clone(), 3)
            else {
                panic!("the record goes on");
            };
            let through = puts
                .iter()
                .map(|(key, _)| key)
                .chain(deletes.iter())
                .max()
                .cloned();
            *index += 1;
            run_at(dst, *index, Command::RangePatch { puts, deletes }, 0);
            scribble(src, n, index, writes);
            if let Some(through_key) = through {
                let drained = Command::RangeDrained {
                    start: WHOLE.0,
                    last: WHOLE.1,
                    to_cell: 2,
                    after_key: after.clone(),
                    through_key,
                    upto_seq: seq,
                };
                *index += 1;
                let answer = run_at(src, *index, drained, 0);
                assert_eq!(answer, Outcome::RangeTracked { to_cell: 2 });
            }
            match next {
                Some(key) => after = key,
                None => return,
            }
        }
    }

    fn record_size(txn: &MemTxn) -> u32 {
        match pend(txn, Vec::new(), 1) {
            QueryResult::RangePending { changed, .. } => changed,
            other => panic!("pending answered {other:?}"),
        }
    }

    /// Catch-up rounds before the freeze: whatever the interleaving of client writes, the
    /// target ends exact after the frozen send, and a round with no writes meanwhile
    /// leaves the record empty.
    #[test]
    fn a_catch_up_before_the_freeze_keeps_what_changed_since() {
        for seed in 0..20u64 {
            let (mut src, mut dst, mut index) = (written(seed), MemTxn::default(), 42);
            run_at(&mut src, index, track_to(2), 0);
            let mut n = 1_000 + seed;
            let (rows, _) = range::export(&src, WHOLE.0, WHOLE.1, &[], 1 << 20);
            index += 1;
            run_at(&mut dst, index, Command::RangeImport { rows }, 0);
            scribble(&mut src, &mut n, &mut index, 30);
            for round in 0..3 {
                catch_up(&mut src, &mut dst, &mut index, &mut n, (seed + round) % 3);
            }
            if seed % 2 == 0 {
                catch_up(&mut src, &mut dst, &mut index, &mut n, 0);
                assert_eq!(
                    record_size(&src),
                    0,
                    "seed {seed}: a quiet round drains all"
                );
                assert_eq!(export_all(&dst), export_all(&src), "seed {seed}");
                scribble(&mut src, &mut n, &mut index, 5);
            }
            freeze_and_send(&mut src, &mut dst, &mut index, seed);
        }
    }

    /// A new record's change count goes on from the old one's: a late drop meant for the
    /// old record keeps every marker of the new one.
    #[test]
    fn a_late_drop_keeps_a_newer_records_markers() {
        let mut src = source();
        run_at(&mut src, 2, track_to(2), 0);
        let (mut n, mut index) = (7, 3);
        scribble(&mut src, &mut n, &mut index, 20);
        let QueryResult::RangePending { seq: old_seq, .. } = pend(&src, Vec::new(), 1) else {
            panic!("pending answered another shape");
        };
        assert!(old_seq > 0);
        index += 1;
        run_at(&mut src, index, track_to(3), 0);
        index += 1;
        run_at(&mut src, index, track_to(2), 0);
        scribble(&mut src, &mut n, &mut index, 20);
        let before = record_size(&src);
        assert!(before > 0);
        let late = Command::RangeDrained {
            start: WHOLE.0,
            last: WHOLE.1,
            to_cell: 2,
            after_key: Vec::new(),
            through_key: vec![0xff; 8],
            upto_seq: old_seq,
        };
        index += 1;
        assert_eq!(
            run_at(&mut src, index, late, 0),
            Outcome::RangeTracked { to_cell: 2 }
        );
        assert_eq!(record_size(&src), before);
        let elsewhere = Command::RangeDrained {
            start: WHOLE.0,
            last: WHOLE.1,
            to_cell: 3,
            after_key: Vec::new(),
            through_key: vec![0xff; 8],
            upto_seq: u64::MAX,
        };
        index += 1;
        let refused = run_at(&mut src, index, elsewhere, 0);
        assert!(
            matches!(refused, Outcome::RangeUnknown { .. }),
            "{refused:?}"
        );
        assert_eq!(record_size(&src), before);
    }

    /// The record row's stored bytes are pinned, and version 1 (no change count) still
    /// reads, its empty markers never dropped by a catch-up.
    #[test]
    fn the_record_row_is_pinned_and_version_one_reads() {
        let track = Track {
            start: 1,
            last: 2,
            to_cell: 3,
            changed: 4,
            overflow: false,
            seq: 5,
        };
        let mut txn = MemTxn::default();
        put_track(&mut txn, &track);
        let bytes = txn.get(&[RANGE_TRACK]).expect("written");
        assert_eq!(bytes, vec![2, 1, 2, 3, 4, 0, 5]);
        txn.put(&[RANGE_TRACK], &[1, 1, 2, 3, 4, 0]);
        assert_eq!(read_track(&txn), Some(Track { seq: 0, ..track }));
        assert_eq!(marker_seq(&[]), u64::MAX);
        assert_eq!(marker_seq(&7u64.to_be_bytes()), 7);
    }

    /// A client key's stored row, as a cell writes it.
    fn stored_value() -> Vec<u8> {
        let mut scratch = MemTxn::default();
        let put = Command::KvPut {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            expect_version: None,
        };
        run_at(&mut scratch, 1, put, 0);
        scratch
            .get(&crate::keys::kv(b"k"))
            .expect("the put wrote its row")
    }

    /// A target clears what an unfinished copy left only while it owns no part of the
    /// range; a patch of a row of the cell's own families is refused and writes nothing.
    #[test]
    fn a_clear_spares_owned_ranges_and_a_patch_refuses_cell_rows() {
        let mut dst = MemTxn::default();
        let rows = vec![(crate::keys::kv(b"left"), stored_value())];
        run_at(&mut dst, 1, Command::RangeImport { rows }, 0);
        let clear = Command::RangeClear {
            start: WHOLE.0,
            last: WHOLE.1,
        };
        let cleared = run_at(&mut dst, 2, clear.clone(), 0);
        assert_eq!(
            cleared,
            Outcome::RangeDropped {
                removed: 1,
                done: true
            }
        );
        assert!(export_all(&dst).is_empty());
        let mut owner = source();
        let refused = run_at(&mut owner, 2, clear, 0);
        assert!(matches!(refused, Outcome::Invalid { .. }), "{refused:?}");
        let cell_row = (vec![crate::keys::RANGE, 1], Vec::new());
        let patch = Command::RangePatch {
            puts: vec![(crate::keys::kv(b"k"), stored_value()), cell_row],
            deletes: Vec::new(),
        };
        let before = dst.map.clone();
        let refused = run_at(&mut dst, 3, patch, 0);
        assert!(matches!(refused, Outcome::Invalid { .. }), "{refused:?}");
        assert_eq!(dst.map, before, "a refused patch wrote");
    }
}
