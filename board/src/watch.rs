//! The history of client-key changes that watches read.
//!
//! Every put and delete of a client key (`kv::put`, `kv::delete`, `kv::txn`) records one
//! event in the same apply, under the command's fence as its revision. Rows live in two
//! server families no client command can name ([`keys::WATCH_EVENT`], [`keys::WATCH_META`]),
//! so the history is replicated, survives restarts and snapshots, and reads the same on
//! every member: a watch can be served by any replica that has applied far enough.
//!
//! Invariants:
//! - events are keyed by `(revision, key)`; revisions only grow, and one command's events
//!   share its revision (a transaction's writes arrive together);
//! - the history keeps at most [`WATCH_HISTORY_EVENTS_MAX`] events and
//!   [`WATCH_HISTORY_BYTES_MAX`] bytes; the oldest go first, and `compacted_below` rises
//!   past every revision with an event removed, so a read from below it is answered
//!   "compacted", never with a silent gap;
//! - a page ends on a whole revision: a reader resuming at `next_from` neither repeats nor
//!   skips an event.
//!
//! Must never: record engine rows, range imports or range drops (a moved key's events stay
//! on the cell that had it; the new owner's fences start above them).

pub use crate::vocab::watch::{EventKind, KvEvent, WatchPage};
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::keys;
use crate::limits::{
    WATCH_COMPACT_PER_WRITE_MAX, WATCH_HISTORY_BYTES_MAX, WATCH_HISTORY_EVENTS_MAX,
    WATCH_PAGE_BYTES_MAX, WATCH_SCAN_ROWS_MAX,
};
use crate::txn::Txn;

impl EventKind {
    /// The stored code.
    pub fn code(self) -> u8 {
        match self {
            EventKind::Put => 1,
            EventKind::Delete => 2,
        }
    }

    /// The kind of a stored code.
    pub fn from_code(code: u8) -> Option<EventKind> {
        match code {
            1 => Some(EventKind::Put),
            2 => Some(EventKind::Delete),
            _ => None,
        }
    }

    /// The name clients see (`put`, `delete`).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Put => "put",
            EventKind::Delete => "delete",
        }
    }
}

impl WatchPage {
    /// Whether a read from `from` missed events the history no longer has.
    pub fn compacted(&self, from: u64) -> bool {
        from < self.compacted_below
    }
}

/// What the history holds, in one row.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Meta {
    compacted_below: u64,
    head: u64,
    count: u64,
    bytes: u64,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    kind: u8,
    #[serde(with = "serde_bytes")]
    value: Vec<u8>,
    version: u64,
}

fn meta(txn: &impl Txn) -> Meta {
    txn.get(&[keys::WATCH_META])
        .map_or_else(Meta::default, |bytes| decode(&bytes))
}

fn event_key(revision: u64, key: &[u8]) -> Vec<u8> {
    let mut out = vec![keys::WATCH_EVENT];
    keys::push_u64(&mut out, revision);
    out.extend_from_slice(key);
    out
}

fn event_size(key: &[u8], value: &[u8]) -> u64 {
    (key.len() + value.len() + 16) as u64
}

/// Record that `key` changed at `revision` (the command's fence), then drop the oldest
/// events past the history's bounds.
pub(crate) fn record(txn: &mut impl Txn, revision: u64, key: &[u8], kind: EventKind, value: &[u8]) {
    let mut meta = meta(txn);
    let version = match kind {
        EventKind::Put => revision,
        EventKind::Delete => 0,
    };
    let stored = Stored {
        kind: kind.code(),
        value: value.to_vec(),
        version,
    };
    let row = event_key(revision, key);
    // One event per key and revision: a later change in the same apply (an expired key
    // written again) replaces the earlier one, as the key's state at that revision.
    if let Some(earlier) = txn.get(&row) {
        let earlier: Stored = decode(&earlier);
        meta.count = meta.count.saturating_sub(1);
        meta.bytes = meta.bytes.saturating_sub(event_size(key, &earlier.value));
    }
    txn.put(&row, &encode(&stored));
    meta.head = meta.head.max(revision);
    meta.count += 1;
    meta.bytes += event_size(key, value);
    for _ in 0..WATCH_COMPACT_PER_WRITE_MAX {
        let over = meta.count > WATCH_HISTORY_EVENTS_MAX || meta.bytes > WATCH_HISTORY_BYTES_MAX;
        if !over || !compact_oldest(txn, &mut meta) {
            break;
        }
    }
    txn.put(&[keys::WATCH_META], &encode(&meta));
}

/// Remove the oldest event; false when there is none.
fn compact_oldest(txn: &mut impl Txn, meta: &mut Meta) -> bool {
    let start = [keys::WATCH_EVENT];
    let end = keys::prefix_end(&start);
    let Some((row, stored)) = txn.scan(&start, &end, 1).pop() else {
        return false;
    };
    let (revision, key) = split_row(&row);
    let value: Stored = decode(&stored);
    txn.delete(&row);
    meta.count = meta.count.saturating_sub(1);
    meta.bytes = meta.bytes.saturating_sub(event_size(key, &value.value));
    meta.compacted_below = meta.compacted_below.max(revision + 1);
    true
}

fn split_row(row: &[u8]) -> (u64, &[u8]) {
    let revision = u64::from_be_bytes(row[1..9].try_into().expect("a watch row has 8 bytes"));
    (revision, &row[9..])
}

/// What a watch reads: one key or every key under a prefix, from a revision.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reading<'a> {
    /// The key, or the prefix.
    pub(crate) key: &'a [u8],
    /// Match every key starting with `key`.
    pub(crate) prefix: bool,
    /// The first revision wanted; 0 means "from now": no events, `next_from` past the head.
    pub(crate) from: u64,
}

impl Reading<'_> {
    fn matches(&self, key: &[u8]) -> bool {
        match self.prefix {
            true => key.starts_with(self.key),
            false => key == self.key,
        }
    }
}

/// Events matching `reading` from its revision, up to the page bounds.
pub(crate) fn page(txn: &impl Txn, reading: Reading<'_>) -> WatchPage {
    let meta = meta(txn);
    let mut page = WatchPage {
        compacted_below: meta.compacted_below,
        serving: true,
        ..WatchPage::default()
    };
    if reading.from == 0 {
        page.next_from = meta.head + 1;
        return page;
    }
    page.next_from = reading.from.max(1);
    if page.compacted(reading.from) {
        return page;
    }
    let mut start = vec![keys::WATCH_EVENT];
    keys::push_u64(&mut start, reading.from);
    let end = keys::prefix_end(&[keys::WATCH_EVENT]);
    let rows = txn.scan(&start, &end, WATCH_SCAN_ROWS_MAX + 1);
    let stopped = rows.len() > WATCH_SCAN_ROWS_MAX;
    let (events, last, cut) = collect(&rows[..rows.len().min(WATCH_SCAN_ROWS_MAX)], reading);
    page.events = events;
    page.more = stopped || cut;
    page.next_from = match (page.more, last) {
        // Stopped early: `last` is the first revision not wholly read.
        (true, Some(last)) => last,
        _ => page.next_from.max(meta.head + 1),
    };
    page
}

/// The matching events of `rows`, dropping a trailing revision the rows may not hold whole;
/// returns the events, the first revision not wholly read (when the scan was cut or full)
/// and whether the byte bound cut it.
fn collect(rows: &[(Vec<u8>, Vec<u8>)], reading: Reading<'_>) -> (Vec<KvEvent>, Option<u64>, bool) {
    let mut events = Vec::new();
    let mut bytes = 0usize;
    let mut cut = false;
    let mut last = rows.last().map(|(row, _)| split_row(row).0);
    for (row, stored) in rows {
        let (revision, key) = split_row(row);
        let first_revision = events.first().map(|e: &KvEvent| e.revision);
        if bytes >= WATCH_PAGE_BYTES_MAX && first_revision.is_some_and(|r| r != revision) {
            cut = true;
            last = Some(revision);
            break;
        }
        if !reading.matches(key) {
            continue;
        }
        let stored: Stored = decode(stored);
        let Some(kind) = EventKind::from_code(stored.kind) else {
            panic!(
                "watch event of {key:?} at {revision} has unknown kind {}",
                stored.kind
            )
        };
        bytes += key.len() + stored.value.len();
        events.push(KvEvent {
            revision,
            key: key.to_vec(),
            kind,
            value: stored.value,
            version: stored.version,
        });
    }
    if !cut && rows.len() >= WATCH_SCAN_ROWS_MAX {
        // The scan may have stopped inside `last`: leave that revision to the next read.
        events.retain(|e| Some(e.revision) != last);
    }
    (events, last, cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemTxn;

    fn read(txn: &MemTxn, key: &[u8], prefix: bool, from: u64) -> WatchPage {
        page(txn, Reading { key, prefix, from })
    }

    #[test]
    fn kinds_keep_their_codes() {
        assert_eq!(EventKind::Put.code(), 1);
        assert_eq!(EventKind::Delete.code(), 2);
        for kind in [EventKind::Put, EventKind::Delete] {
            assert_eq!(EventKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(EventKind::from_code(0), None);
    }

    /// The stored shape of an event and of the history's head row, byte for byte.
    #[test]
    fn stored_rows_are_pinned() {
        let mut txn = MemTxn::default();
        record(&mut txn, 0x0102, b"k", EventKind::Put, b"v");
        assert_eq!(
            event_key(0x0102, b"k"),
            [b'V', 0, 0, 0, 0, 0, 0, 1, 2, b'k']
        );
        assert_eq!(keys::WATCH_META, b'Y');
        let row = txn.map.get(&event_key(0x0102, b"k")).expect("event row");
        assert_eq!(row, &vec![1, 1, 1, b'v', 0x82, 0x02]);
        let meta = txn.map.get(&vec![keys::WATCH_META]).expect("meta row");
        assert_eq!(meta, &vec![1, 0, 0x82, 0x02, 1, 18]);
    }

    #[test]
    fn a_key_reads_its_events_from_a_revision() {
        let mut txn = MemTxn::default();
        record(&mut txn, 10, b"a", EventKind::Put, b"1");
        record(&mut txn, 11, b"b", EventKind::Put, b"2");
        record(&mut txn, 12, b"a", EventKind::Delete, b"");
        let all = read(&txn, b"a", false, 1);
        let revisions: Vec<u64> = all.events.iter().map(|e| e.revision).collect();
        assert_eq!(revisions, [10, 12]);
        assert_eq!(all.events[1].kind, EventKind::Delete);
        assert_eq!(all.events[1].version, 0);
        assert_eq!(all.next_from, 13);
        let later = read(&txn, b"a", false, 11);
        assert_eq!(later.events.len(), 1);
        let prefix = read(&txn, b"", true, 11);
        assert_eq!(prefix.events.len(), 2);
        let now = read(&txn, b"a", false, 0);
        assert!(now.events.is_empty());
        assert_eq!(now.next_from, 13);
    }

    #[test]
    fn the_oldest_events_go_and_a_read_below_them_is_compacted() {
        let mut txn = MemTxn::default();
        let total = WATCH_HISTORY_EVENTS_MAX + 3;
        for revision in 1..=total {
            record(&mut txn, revision, b"k", EventKind::Put, b"v");
        }
        let meta = meta(&txn);
        assert_eq!(meta.count, WATCH_HISTORY_EVENTS_MAX);
        assert_eq!(meta.compacted_below, 4);
        let page = read(&txn, b"k", false, 3);
        assert!(page.compacted(3));
        assert!(page.events.is_empty());
        let page = read(&txn, b"k", false, 4);
        assert!(!page.compacted(4));
        assert_eq!(page.events.first().map(|e| e.revision), Some(4));
    }

    #[test]
    fn a_full_scan_ends_on_a_whole_revision() {
        let mut txn = MemTxn::default();
        let mut revision = 1;
        while (revision as usize) < WATCH_SCAN_ROWS_MAX {
            record(&mut txn, revision, b"k", EventKind::Put, b"v");
            revision += 1;
        }
        // One revision of three keys straddles the scan bound.
        for key in [b"x1", b"x2", b"x3"] {
            record(&mut txn, revision, key, EventKind::Put, b"v");
        }
        let first = read(&txn, b"", true, 1);
        assert!(first.more);
        assert_eq!(first.next_from, revision);
        assert!(first.events.iter().all(|e| e.revision < revision));
        let second = read(&txn, b"", true, first.next_from);
        assert_eq!(second.events.len(), 3);
        assert!(!second.more);
        assert_eq!(second.next_from, revision + 1);
    }
}
