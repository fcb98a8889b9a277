//! CAS keys: a value with a modification revision (the fence of the write that stored it).
//!
//! Because the revision is a fence, a key deleted and written again never returns to an
//! old revision, so a compare-and-set cannot suffer ABA.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::ephemeral::{self, Attachment};
use crate::keys;
use crate::limits::LIST_BYTES_MAX;
use crate::query::{KvEntry, KvPage};
use crate::txn::Txn;
use crate::types::{Outcome, Stamp};
use crate::watch::{self, EventKind};

#[derive(Serialize, Deserialize)]
struct Record {
    #[serde(with = "serde_bytes")]
    value: Vec<u8>,
    version: u64,
}

/// Whether `value` is a stored key's record (a range import checks rows before it
/// writes them: every read of the key decodes it).
pub(crate) fn decodes(value: &[u8]) -> bool {
    crate::codec::try_decode::<Record>(value).is_some()
}

/// Offline, for a restore: rewrite the value of client key `key` among `pairs` (a cell's
/// dumped rows) with `rewrite`, keeping its version, so a compare-and-set on the version
/// read before the backup still holds. Fails when the key is absent or its row does not
/// decode; `pairs` is unchanged then.
pub fn restore_rewrite(
    pairs: &mut [(Vec<u8>, Vec<u8>)],
    key: &[u8],
    rewrite: impl FnOnce(&[u8]) -> Result<Vec<u8>, String>,
) -> Result<(), String> {
    let stored = keys::kv(key);
    let row = pairs
        .iter_mut()
        .find(|(k, _)| *k == stored)
        .ok_or_else(|| {
            format!(
                "key {:?} is not in the snapshot",
                String::from_utf8_lossy(key)
            )
        })?;
    let record: Record = crate::codec::try_decode(&row.1)
        .ok_or_else(|| format!("key {:?} does not decode", String::from_utf8_lossy(key)))?;
    let value = rewrite(&record.value)?;
    row.1 = encode(&Record {
        value,
        version: record.version,
    });
    Ok(())
}

/// Which family of CAS-shaped rows a command reaches: the clients' keys, or the engine's
/// instance state. One command reaches one space, fixed by its variant, never by its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    /// Client CAS keys (`KvPut`, `KvTxn`, `KvGet`, `KvRange`).
    Client,
    /// The engine's rows (`EngineTxn`, `EngineGet`, `EngineRange`; `crate::instance`).
    Engine,
}

impl Space {
    fn key(self, key: &[u8]) -> Vec<u8> {
        match self {
            Space::Client => keys::kv(key),
            Space::Engine => keys::in_family(keys::ENGINE, key),
        }
    }
}

/// The current value and revision of `key`, whatever it is attached to (a server's own
/// read: identities, roles). A client's read goes through [`get_live`].
pub(crate) fn get(txn: &impl Txn, key: &[u8]) -> Option<KvEntry> {
    get_in(txn, Space::Client, key)
}

/// `key` as a client reads it at `now_ms`: absent once its deadline or its lease holder's
/// slot ran out, even before the apply that deletes it (`crate::ephemeral`).
pub(crate) fn get_live(txn: &impl Txn, now_ms: u64, key: &[u8]) -> Option<KvEntry> {
    get(txn, key).filter(|_| ephemeral::live(txn, now_ms, key))
}

/// The current value and revision of `key` in `space`.
pub(crate) fn get_in(txn: &impl Txn, space: Space, key: &[u8]) -> Option<KvEntry> {
    txn.get(&space.key(key)).map(|bytes| {
        let record: Record = decode(&bytes);
        KvEntry {
            value: record.value,
            version: record.version,
        }
    })
}

/// The revision of client key `key` (0 = absent).
pub(crate) fn current(txn: &impl Txn, key: &[u8]) -> u64 {
    current_in(txn, Space::Client, key)
}

fn current_in(txn: &impl Txn, space: Space, key: &[u8]) -> u64 {
    get_in(txn, space, key).map_or(0, |entry| entry.version)
}

/// Store `value` under `key` in `space` with this command's fence as its revision, attached
/// to `attach` (`None`: a plain key; whatever the key was attached to before is let go).
/// Every write of a client key row goes through here (and every engine row's).
pub(crate) fn store_row(
    txn: &mut impl Txn,
    stamp: Stamp,
    (space, key): (Space, &[u8]),
    value: &[u8],
    attach: Option<&Attachment>,
) -> u64 {
    let fence = stamp.fence();
    let current = current_in(txn, space, key);
    assert!(
        fence > current,
        "fence {fence} does not pass revision {current}"
    );
    if space == Space::Client {
        ephemeral::detach(txn, key);
    }
    let record = Record {
        value: value.to_vec(),
        version: fence,
    };
    txn.put(&space.key(key), &encode(&record));
    if space == Space::Client {
        watch::record(txn, fence, key, EventKind::Put, value);
    }
    if let Some(attach) = attach {
        assert_eq!(space, Space::Client, "only client keys are attached");
        ephemeral::attach(txn, key, attach);
    }
    fence
}

/// Delete `key` in `space` with what it was attached to, at `stamp` (the revision a
/// delete is known by); returns the revision it had, `None` when it was absent. Every
/// delete of a client key row goes through here (and every engine row's).
pub(crate) fn erase_row(txn: &mut impl Txn, stamp: Stamp, space: Space, key: &[u8]) -> Option<u64> {
    let current = get_in(txn, space, key).map(|entry| entry.version);
    if space == Space::Client {
        ephemeral::detach(txn, key);
    }
    if current.is_some() {
        txn.delete(&space.key(key));
        if space == Space::Client {
            watch::record(txn, stamp.fence(), key, EventKind::Delete, b"");
        }
    }
    current
}

/// Write `value` if the revision matches `expect_version` (`None` = any, `Some(0)` = absent).
/// A plain put lets go of whatever the key was attached to.
pub(crate) fn put(
    txn: &mut impl Txn,
    stamp: Stamp,
    key: &[u8],
    value: &[u8],
    expect_version: Option<u64>,
) -> Outcome {
    ephemeral::settle(txn, stamp, key);
    let current = current(txn, key);
    if expect_version.is_some_and(|expected| expected != current) {
        return Outcome::KvVersionMismatch { current };
    }
    let version = store_row(txn, stamp, (Space::Client, key), value, None);
    Outcome::KvWritten {
        version,
        fence: version,
    }
}

/// Delete `key` if the revision matches `expect_version` (`None` = any). Deleting an
/// absent key is a mismatch with `current: 0`, whatever was expected: nothing was deleted.
pub(crate) fn delete(
    txn: &mut impl Txn,
    stamp: Stamp,
    key: &[u8],
    expect_version: Option<u64>,
) -> Outcome {
    ephemeral::settle(txn, stamp, key);
    let current = current(txn, key);
    if current == 0 || expect_version.is_some_and(|expected| expected != current) {
        return Outcome::KvVersionMismatch { current };
    }
    erase_row(txn, stamp, Space::Client, key);
    Outcome::KvDeleted { version: current }
}

/// Compare every `(key, expected)` (0 = absent); when all pass, write every put with this
/// command's fence as the new revision and remove every delete. The first failing compare
/// is reported and nothing changes.
pub(crate) fn txn(
    txn: &mut impl Txn,
    stamp: Stamp,
    compares: &[(Vec<u8>, u64)],
    puts: &[(Vec<u8>, Vec<u8>)],
    deletes: &[Vec<u8>],
) -> Outcome {
    txn_in(txn, Space::Client, stamp, (compares, puts, deletes))
}

/// The compares, puts and deletes of one transaction.
pub(crate) type TxnParts<'a> = (
    &'a [(Vec<u8>, u64)],
    &'a [(Vec<u8>, Vec<u8>)],
    &'a [Vec<u8>],
);

/// [`txn`] in `space`.
pub(crate) fn txn_in(
    txn: &mut impl Txn,
    space: Space,
    stamp: Stamp,
    (compares, puts, deletes): TxnParts<'_>,
) -> Outcome {
    if space == Space::Client {
        let keys = compares.iter().map(|(k, _)| k);
        let keys = keys.chain(puts.iter().map(|(k, _)| k)).chain(deletes);
        for key in keys {
            ephemeral::settle(txn, stamp, key);
        }
    }
    for (key, expected) in compares {
        let current = current_in(txn, space, key);
        if current != *expected {
            return Outcome::KvTxnFailed {
                key: key.clone(),
                current,
            };
        }
    }
    for (key, value) in puts {
        store_row(txn, stamp, (space, key), value, None);
    }
    for key in deletes {
        erase_row(txn, stamp, space, key);
    }
    Outcome::KvTxnCommitted {
        fence: stamp.fence(),
    }
}

/// Up to `limit` keys starting with `prefix` and greater than `after_key`, in key order,
/// as a client reads them at `now_ms` (keys whose deadline or lease ran out are left out;
/// the page still says where the next one starts).
pub(crate) fn range(
    txn: &impl Txn,
    now_ms: u64,
    (prefix, after_key): (&[u8], &[u8]),
    limit: usize,
) -> KvPage {
    let mut page = range_in(txn, Space::Client, (prefix, after_key), limit);
    page.rows
        .retain(|(key, _)| ephemeral::live(txn, now_ms, key));
    page
}

/// [`range`] in `space`: keys starting with `prefix` and greater than `after_key`.
pub(crate) fn range_in(
    txn: &impl Txn,
    space: Space,
    (prefix, after_key): (&[u8], &[u8]),
    limit: usize,
) -> KvPage {
    let start_prefix = space.key(prefix);
    let end = keys::prefix_end(&start_prefix);
    let start = if after_key > prefix {
        // The smallest key greater than `after_key`: the key with a zero byte appended.
        let mut start = space.key(after_key);
        start.push(0);
        start
    } else {
        start_prefix
    };
    if start >= end {
        return KvPage::default();
    }
    // One row past the limit tells whether more follow.
    let mut scanned = txn.scan(&start, &end, limit.saturating_add(1));
    let full = scanned.len() > limit;
    scanned.truncate(limit);
    let mut page = KvPage::default();
    let mut bytes = 0;
    let mut cut = false;
    for (key, stored) in scanned {
        if bytes >= LIST_BYTES_MAX {
            cut = true;
            break;
        }
        let record: Record = decode(&stored);
        bytes += key.len() + record.value.len();
        let entry = KvEntry {
            value: record.value,
            version: record.version,
        };
        page.rows.push((key[1..].to_vec(), entry));
    }
    if full || cut {
        page.resume_after = page.rows.last().map(|(key, _)| key.clone());
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn stamp(index: u64) -> Stamp {
        crate::testkit::stamp_at(index, 0)
    }

    /// A restore's rewrite changes the value and keeps the version; a missing key changes
    /// nothing.
    #[test]
    fn restore_rewrite_keeps_the_version() {
        let mut txn = MemTxn::default();
        put(&mut txn, stamp(7), b"map", b"old", None);
        let mut pairs: Vec<_> = txn.map.clone().into_iter().collect();
        restore_rewrite(&mut pairs, b"map", |old| {
            assert_eq!(old, b"old");
            Ok(b"new".to_vec())
        })
        .unwrap();
        let restored = MemTxn {
            map: pairs.iter().cloned().collect(),
        };
        let entry = get(&restored, b"map").unwrap();
        assert_eq!(
            (entry.value.as_slice(), entry.version),
            (&b"new"[..], stamp(7).fence())
        );
        let before = pairs.clone();
        assert!(restore_rewrite(&mut pairs, b"absent", |_| Ok(Vec::new())).is_err());
        assert_eq!(pairs, before);
    }

    #[test]
    fn cas_flow() {
        let mut txn = MemTxn::default();
        let v1 = stamp(1).fence();
        assert_eq!(
            put(&mut txn, stamp(1), b"a", b"x", Some(0)),
            Outcome::KvWritten {
                version: v1,
                fence: v1
            }
        );
        assert_eq!(
            put(&mut txn, stamp(2), b"a", b"y", Some(0)),
            Outcome::KvVersionMismatch { current: v1 }
        );
        let v3 = stamp(3).fence();
        assert_eq!(
            put(&mut txn, stamp(3), b"a", b"y", Some(v1)),
            Outcome::KvWritten {
                version: v3,
                fence: v3
            }
        );
        assert_eq!(
            get(&txn, b"a"),
            Some(KvEntry {
                value: b"y".to_vec(),
                version: v3
            })
        );
        assert_eq!(
            delete(&mut txn, stamp(4), b"a", Some(v1)),
            Outcome::KvVersionMismatch { current: v3 }
        );
        assert_eq!(
            delete(&mut txn, stamp(5), b"a", None),
            Outcome::KvDeleted { version: v3 }
        );
        assert_eq!(
            delete(&mut txn, stamp(6), b"a", None),
            Outcome::KvVersionMismatch { current: 0 }
        );
        assert_eq!(get(&txn, b"a"), None);
    }

    #[test]
    fn recreate_gets_a_new_revision() {
        let mut txn = MemTxn::default();
        put(&mut txn, stamp(1), b"a", b"x", None);
        delete(&mut txn, stamp(2), b"a", None);
        put(&mut txn, stamp(3), b"a", b"x", None);
        assert_eq!(get(&txn, b"a").map(|e| e.version), Some(stamp(3).fence()));
    }

    #[test]
    fn txn_applies_all_or_nothing() {
        let mut txn = MemTxn::default();
        put(&mut txn, stamp(1), b"a", b"x", None);
        let v1 = stamp(1).fence();
        let failed = super::txn(
            &mut txn,
            stamp(2),
            &[(b"a".to_vec(), v1), (b"b".to_vec(), 7)],
            &[(b"c".to_vec(), b"z".to_vec())],
            &[b"a".to_vec()],
        );
        assert_eq!(
            failed,
            Outcome::KvTxnFailed {
                key: b"b".to_vec(),
                current: 0
            }
        );
        assert_eq!(get(&txn, b"c"), None);
        assert!(get(&txn, b"a").is_some());
        let v3 = stamp(3).fence();
        let done = super::txn(
            &mut txn,
            stamp(3),
            &[(b"a".to_vec(), v1), (b"b".to_vec(), 0)],
            &[
                (b"b".to_vec(), b"y".to_vec()),
                (b"c".to_vec(), b"z".to_vec()),
            ],
            &[b"a".to_vec(), b"absent".to_vec()],
        );
        assert_eq!(done, Outcome::KvTxnCommitted { fence: v3 });
        assert_eq!(get(&txn, b"a"), None);
        assert_eq!(get(&txn, b"b").map(|e| e.version), Some(v3));
        assert_eq!(get(&txn, b"c").map(|e| e.value), Some(b"z".to_vec()));
    }

    #[test]
    fn range_reads_one_prefix_after_a_key() {
        let mut txn = MemTxn::default();
        for (i, key) in ["e/1/a", "e/1/b", "e/1/c", "e/10/a", "e/2/a", "f"]
            .iter()
            .enumerate()
        {
            put(&mut txn, stamp(i as u64 + 1), key.as_bytes(), b"v", None);
        }
        let keys_of = |page: KvPage| -> Vec<String> {
            page.rows
                .into_iter()
                .map(|(k, _)| String::from_utf8(k).unwrap())
                .collect()
        };
        assert_eq!(
            keys_of(range(&txn, 0, (b"e/1/", b""), 100)),
            vec!["e/1/a", "e/1/b", "e/1/c"]
        );
        assert_eq!(
            keys_of(range(&txn, 0, (b"e/1/", b"e/1/a"), 1)),
            vec!["e/1/b"]
        );
        assert_eq!(keys_of(range(&txn, 0, (b"", b"e/2/a"), 100)), vec!["f"]);
        assert_eq!(range(&txn, 0, (b"g", b""), 100), KvPage::default());
        // A full page says where the next one starts; the last page says nothing.
        let first = range(&txn, 0, (b"e/1/", b""), 2);
        assert_eq!(first.resume_after.as_deref(), Some(&b"e/1/b"[..]));
        let rest = range(&txn, 0, (b"e/1/", b"e/1/b"), 2);
        assert_eq!(
            (keys_of(rest.clone()), rest.resume_after),
            (vec!["e/1/c".into()], None)
        );
    }

    /// An answer stops at `LIST_BYTES_MAX` of keys and values (one row past it at most) and
    /// says where the next page starts: no range read holds gigabytes in memory.
    #[test]
    fn a_range_answer_is_capped_in_bytes_and_pages_on() {
        let mut txn = MemTxn::default();
        let value = vec![b'x'; 1 << 20];
        for i in 0..10u64 {
            let key = format!("big/{i}");
            put(&mut txn, stamp(i + 1), key.as_bytes(), &value, None);
        }
        let mut after = Vec::new();
        let mut seen = 0;
        let mut pages = 0;
        loop {
            let page = range(&txn, 0, (b"big/", &after), 100);
            let bytes: usize = page.rows.iter().map(|(k, e)| k.len() + e.value.len()).sum();
            assert!(bytes <= LIST_BYTES_MAX + (1 << 20) + 16, "{bytes}");
            seen += page.rows.len();
            pages += 1;
            match page.resume_after {
                Some(next) => after = next,
                None => break,
            }
        }
        assert_eq!(seen, 10, "every row once");
        assert!(pages >= 3, "{pages} pages");
    }
}
