//! Recorded outcomes per idempotency key, kept for `limits::IDEMPOTENCY_WINDOW_MS`.
//!
//! A record whose window has passed counts as absent even before the `Tick` that prunes
//! it, so whether a retry is answered from the record depends only on the stamps.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::deadline::{self, Item};
use crate::keys;
use crate::limits::IDEMPOTENCY_WINDOW_MS;
use crate::txn::Txn;
use crate::types::Outcome;

#[derive(Serialize, Deserialize)]
struct Record {
    outcome: Outcome,
    expires_at_ms: u64,
    /// The routing point of the command, so the record moves with its range.
    point: Option<u64>,
}

/// Whether `value` is a record: an imported row's value must be one before
/// [`point_of`] reads it.
pub(crate) fn decodes(value: &[u8]) -> bool {
    crate::codec::try_decode::<Record>(value).is_some()
}

/// The routing point of a stored record (`None` for commands no range owns).
pub(crate) fn point_of(value: &[u8]) -> Option<u64> {
    decode::<Record>(value).point
}

fn load(txn: &impl Txn, key: &str) -> Option<Record> {
    txn.get(&keys::idempotency(key)).map(|bytes| decode(&bytes))
}

/// The outcome recorded for `key`, if its window has not passed at `now_ms`.
pub(crate) fn recorded(txn: &impl Txn, now_ms: u64, key: &str) -> Option<Outcome> {
    load(txn, key)
        .filter(|record| record.expires_at_ms > now_ms)
        .map(|record| record.outcome)
}

/// Record `outcome` for `key` at `now_ms`, replacing an expired record.
pub(crate) fn record(
    txn: &mut impl Txn,
    now_ms: u64,
    key: &str,
    outcome: &Outcome,
    point: Option<u64>,
) {
    let item = Item::Idempotency {
        key: key.to_string(),
        point,
    };
    if let Some(old) = load(txn, key) {
        deadline::remove(txn, old.expires_at_ms, &item);
    }
    let expires_at_ms = now_ms.saturating_add(IDEMPOTENCY_WINDOW_MS);
    let record = Record {
        outcome: outcome.clone(),
        expires_at_ms,
        point,
    };
    txn.put(&keys::idempotency(key), &encode(&record));
    deadline::insert(txn, expires_at_ms, &item);
}

/// Prune the record of `key` if its window has passed; returns how many were pruned.
pub(crate) fn prune(txn: &mut impl Txn, now_ms: u64, key: &str) -> u32 {
    match load(txn, key) {
        Some(old) if old.expires_at_ms <= now_ms => {
            txn.delete(&keys::idempotency(key));
            deadline::remove(
                txn,
                old.expires_at_ms,
                &Item::Idempotency {
                    key: key.to_string(),
                    point: old.point,
                },
            );
            1
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    #[test]
    fn recorded_until_window_passes_then_pruned() {
        let mut txn = MemTxn::default();
        record(&mut txn, 100, "c1", &Outcome::LeaseReleased, None);
        let end = 100 + IDEMPOTENCY_WINDOW_MS;
        assert_eq!(recorded(&txn, end - 1, "c1"), Some(Outcome::LeaseReleased));
        assert_eq!(recorded(&txn, end, "c1"), None);
        assert_eq!(deadline::next(&txn), Some(end));
        assert_eq!(prune(&mut txn, end - 1, "c1"), 0);
        assert_eq!(prune(&mut txn, end, "c1"), 1);
        assert!(txn.map.is_empty());
    }

    #[test]
    fn re_recording_moves_the_deadline() {
        let mut txn = MemTxn::default();
        record(&mut txn, 100, "c1", &Outcome::LeaseReleased, None);
        record(&mut txn, 200, "c1", &Outcome::LeaseNotHeld, None);
        assert_eq!(deadline::next(&txn), Some(200 + IDEMPOTENCY_WINDOW_MS));
        assert_eq!(txn.map.len(), 2);
    }
}
