//! Ledgers: append-only entries with a gap-free sequence per partition, from 1.
//!
//! Each partition has a head record (`next_seq`, `oldest_seq`) that outlives its entries, so
//! pruning never changes the next sequence number. Retention prunes oldest first: the
//! partition has one deadline index entry, at the oldest retained entry's `at_ms +
//! retain_ms`, so the retained entries always form one contiguous range. An entry whose
//! own retention ends before an older entry's stays until that older one is pruned.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::deadline::{self, Item};
use crate::keys;
use crate::limits::LIST_ROWS_MAX;
use crate::query::LedgerEntryView;
use crate::txn::Txn;
use crate::types::{Outcome, ResourceId};

#[derive(Serialize, Deserialize)]
struct Head {
    /// Sequence of the next append.
    next_seq: u64,
    /// Sequence of the oldest retained entry (`== next_seq` when none is retained).
    oldest_seq: u64,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    #[serde(with = "serde_bytes")]
    entry: Vec<u8>,
    appended_by: String,
    at_ms: u64,
    retain_ms: u64,
}

impl Entry {
    fn prune_at_ms(&self) -> u64 {
        self.at_ms.saturating_add(self.retain_ms)
    }
}

fn load_head(txn: &impl Txn, ledger: &ResourceId) -> Option<Head> {
    txn.get(&keys::ledger_head(ledger))
        .map(|bytes| decode(&bytes))
}

fn load_entry(txn: &impl Txn, ledger: &ResourceId, seq: u64) -> Entry {
    let bytes = txn.get(&keys::ledger_entry(ledger, seq));
    decode(&bytes.unwrap_or_else(|| panic!("ledger entry {seq} is missing")))
}

/// The request of one append.
pub(crate) struct Append<'a> {
    /// Ledger and partition.
    pub(crate) ledger: &'a ResourceId,
    /// Entry bytes.
    pub(crate) entry: &'a [u8],
    /// Identity of the appender.
    pub(crate) appended_by: &'a str,
    /// Retention after the append.
    pub(crate) retain_ms: u64,
}

/// Append at the partition's next sequence number.
pub(crate) fn append(txn: &mut impl Txn, now_ms: u64, request: &Append<'_>) -> Outcome {
    let ledger = request.ledger;
    let mut head = load_head(txn, ledger).unwrap_or(Head {
        next_seq: 1,
        oldest_seq: 1,
    });
    let seq = head.next_seq;
    let entry = Entry {
        entry: request.entry.to_vec(),
        appended_by: request.appended_by.to_string(),
        at_ms: now_ms,
        retain_ms: request.retain_ms,
    };
    if head.oldest_seq == seq {
        let item = Item::Ledger {
            ledger: ledger.clone(),
        };
        deadline::insert(txn, entry.prune_at_ms(), &item);
    }
    txn.put(&keys::ledger_entry(ledger, seq), &encode(&entry));
    head.next_seq = seq.checked_add(1).expect("ledger sequence overflows u64");
    txn.put(&keys::ledger_head(ledger), &encode(&head));
    Outcome::LedgerAppended { seq }
}

/// Prune due entries of one partition, oldest first, at most `budget`; returns how many.
pub(crate) fn prune(txn: &mut impl Txn, now_ms: u64, ledger: &ResourceId, budget: u32) -> u32 {
    let Some(mut head) = load_head(txn, ledger) else {
        return 0;
    };
    if head.oldest_seq == head.next_seq {
        return 0;
    }
    let item = Item::Ledger {
        ledger: ledger.clone(),
    };
    let first = load_entry(txn, ledger, head.oldest_seq);
    deadline::remove(txn, first.prune_at_ms(), &item);
    let mut pruned = 0;
    let mut oldest = Some(first);
    while let Some(entry) = oldest.take() {
        if pruned >= budget || entry.prune_at_ms() > now_ms {
            deadline::insert(txn, entry.prune_at_ms(), &item);
            break;
        }
        txn.delete(&keys::ledger_entry(ledger, head.oldest_seq));
        head.oldest_seq += 1;
        pruned += 1;
        if head.oldest_seq < head.next_seq {
            oldest = Some(load_entry(txn, ledger, head.oldest_seq));
        }
    }
    txn.put(&keys::ledger_head(ledger), &encode(&head));
    pruned
}

/// The request of one list.
pub(crate) struct List<'a> {
    /// Ledger owner.
    pub(crate) owner: &'a str,
    /// Ledger name.
    pub(crate) name: &'a str,
    /// One partition, or all.
    pub(crate) partition: Option<&'a str>,
    /// Only sequence numbers above this.
    pub(crate) after_seq: u64,
    /// Most rows.
    pub(crate) limit: usize,
}

/// Retained entries in partition then sequence order.
pub(crate) fn list(txn: &impl Txn, request: &List<'_>) -> Vec<LedgerEntryView> {
    let partitions: Vec<String> = match request.partition {
        Some(partition) => vec![partition.to_string()],
        None => partitions(txn, request.owner, request.name),
    };
    let mut rows = Vec::new();
    for partition in partitions {
        let ledger = ResourceId {
            owner: request.owner.to_string(),
            name: request.name.to_string(),
            key: partition,
        };
        let prefix = keys::ledger_entries(&ledger);
        let start = keys::ledger_entry(&ledger, request.after_seq.saturating_add(1));
        let left = request.limit - rows.len();
        for (key, value) in txn.scan(&start, &keys::prefix_end(&prefix), left) {
            let seq_bytes: [u8; 8] = key[prefix.len()..].try_into().expect("seq is a u64");
            let entry: Entry = decode(&value);
            rows.push(LedgerEntryView {
                ledger: ledger.clone(),
                seq: u64::from_be_bytes(seq_bytes),
                entry: entry.entry,
                appended_by: entry.appended_by,
                at_ms: entry.at_ms,
            });
        }
        if rows.len() >= request.limit {
            break;
        }
    }
    rows
}

fn partitions(txn: &impl Txn, owner: &str, name: &str) -> Vec<String> {
    let prefix = keys::ledger_heads(owner, name);
    let rows = txn.scan(&prefix, &keys::prefix_end(&prefix), LIST_ROWS_MAX);
    rows.into_iter()
        .map(|(key, _)| {
            let parts = keys::split(&key[prefix.len()..]).expect("head key is well formed");
            String::from_utf8(parts[0].clone()).expect("partition is utf-8")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn id(partition: &str) -> ResourceId {
        ResourceId {
            owner: "o".into(),
            name: "n".into(),
            key: partition.into(),
        }
    }

    fn add(txn: &mut MemTxn, now_ms: u64, partition: &str, retain_ms: u64) -> Outcome {
        let ledger = id(partition);
        append(
            txn,
            now_ms,
            &Append {
                ledger: &ledger,
                entry: b"{}",
                appended_by: "i",
                retain_ms,
            },
        )
    }

    fn seqs(txn: &MemTxn, partition: Option<&str>) -> Vec<u64> {
        let request = List {
            owner: "o",
            name: "n",
            partition,
            after_seq: 0,
            limit: 100,
        };
        list(txn, &request).iter().map(|row| row.seq).collect()
    }

    #[test]
    fn gap_free_per_partition() {
        let mut txn = MemTxn::default();
        assert_eq!(
            add(&mut txn, 1, "a", 10),
            Outcome::LedgerAppended { seq: 1 }
        );
        assert_eq!(
            add(&mut txn, 2, "b", 10),
            Outcome::LedgerAppended { seq: 1 }
        );
        assert_eq!(
            add(&mut txn, 3, "a", 10),
            Outcome::LedgerAppended { seq: 2 }
        );
        assert_eq!(seqs(&txn, Some("a")), vec![1, 2]);
        assert_eq!(seqs(&txn, None), vec![1, 2, 1]);
    }

    #[test]
    fn pruning_keeps_numbering_and_is_oldest_first() {
        let mut txn = MemTxn::default();
        add(&mut txn, 0, "a", 100);
        add(&mut txn, 10, "a", 5);
        add(&mut txn, 20, "a", 100);
        assert_eq!(deadline::next(&txn), Some(100));
        // Entry 2 is due at 15 but waits behind entry 1.
        assert_eq!(prune(&mut txn, 99, &id("a"), 10), 0);
        assert_eq!(prune(&mut txn, 100, &id("a"), 10), 2);
        assert_eq!(seqs(&txn, Some("a")), vec![3]);
        assert_eq!(deadline::next(&txn), Some(120));
        assert_eq!(prune(&mut txn, 500, &id("a"), 10), 1);
        assert_eq!(deadline::next(&txn), None);
        assert_eq!(
            add(&mut txn, 600, "a", 5),
            Outcome::LedgerAppended { seq: 4 }
        );
    }

    #[test]
    fn prune_respects_budget() {
        let mut txn = MemTxn::default();
        for at in 0..5 {
            add(&mut txn, at, "a", 1);
        }
        assert_eq!(prune(&mut txn, 100, &id("a"), 2), 2);
        assert_eq!(deadline::next(&txn), Some(3));
        assert_eq!(prune(&mut txn, 100, &id("a"), 10), 3);
    }
}
