//! CAS keys: a value with a modification revision (the fence of the write that stored it).
//!
//! Because the revision is a fence, a key deleted and written again never returns to an
//! old revision, so a compare-and-set cannot suffer ABA.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::keys;
use crate::query::KvEntry;
use crate::txn::Txn;
use crate::types::{Outcome, Stamp};

#[derive(Serialize, Deserialize)]
struct Record {
    value: Vec<u8>,
    version: u64,
}

/// The current value and revision of `key`.
pub(crate) fn get(txn: &impl Txn, key: &[u8]) -> Option<KvEntry> {
    txn.get(&keys::kv(key)).map(|bytes| {
        let record: Record = decode(&bytes);
        KvEntry {
            value: record.value,
            version: record.version,
        }
    })
}

fn current(txn: &impl Txn, key: &[u8]) -> u64 {
    get(txn, key).map_or(0, |entry| entry.version)
}

/// Write `value` if the revision matches `expect_version` (`None` = any, `Some(0)` = absent).
pub(crate) fn put(
    txn: &mut impl Txn,
    stamp: Stamp,
    key: &[u8],
    value: &[u8],
    expect_version: Option<u64>,
) -> Outcome {
    let current = current(txn, key);
    if expect_version.is_some_and(|expected| expected != current) {
        return Outcome::KvVersionMismatch { current };
    }
    let fence = stamp.fence();
    assert!(
        fence > current,
        "fence {fence} does not pass revision {current}"
    );
    txn.put(
        &keys::kv(key),
        &encode(&Record {
            value: value.to_vec(),
            version: fence,
        }),
    );
    Outcome::KvWritten {
        version: fence,
        fence,
    }
}

/// Delete `key` if the revision matches `expect_version` (`None` = any). Deleting an
/// absent key is a mismatch with `current: 0`, whatever was expected: nothing was deleted.
pub(crate) fn delete(txn: &mut impl Txn, key: &[u8], expect_version: Option<u64>) -> Outcome {
    let current = current(txn, key);
    if current == 0 || expect_version.is_some_and(|expected| expected != current) {
        return Outcome::KvVersionMismatch { current };
    }
    txn.delete(&keys::kv(key));
    Outcome::KvDeleted { version: current }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn stamp(index: u64) -> Stamp {
        Stamp {
            index,
            position: 0,
            time_ms: 0,
        }
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
            delete(&mut txn, b"a", Some(v1)),
            Outcome::KvVersionMismatch { current: v3 }
        );
        assert_eq!(
            delete(&mut txn, b"a", None),
            Outcome::KvDeleted { version: v3 }
        );
        assert_eq!(
            delete(&mut txn, b"a", None),
            Outcome::KvVersionMismatch { current: 0 }
        );
        assert_eq!(get(&txn, b"a"), None);
    }

    #[test]
    fn recreate_gets_a_new_revision() {
        let mut txn = MemTxn::default();
        put(&mut txn, stamp(1), b"a", b"x", None);
        delete(&mut txn, b"a", None);
        put(&mut txn, stamp(3), b"a", b"x", None);
        assert_eq!(get(&txn, b"a").map(|e| e.version), Some(stamp(3).fence()));
    }
}
