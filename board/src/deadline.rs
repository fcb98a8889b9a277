//! The deadline index: every pending deadline, ordered by time.
//!
//! Keys are `d`, the deadline (big-endian), a kind byte and the item's identity; the value
//! names the item. The index is kept exact: whoever moves or removes a deadline moves or
//! removes its entry, so [`next`] is the earliest real pending deadline. A `Tick` still
//! treats an entry whose item no longer matches as stale and deletes it, so it always
//! makes progress.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::keys::{self, DEADLINE};
use crate::txn::Txn;
use crate::types::{ResourceId, Tier};

/// What falls due at a deadline.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub(crate) enum Item {
    /// A lease holder's slot expires.
    Holder {
        /// The lease.
        lease: ResourceId,
        /// The holder.
        holder: String,
    },
    /// A lease waiter's wait runs out.
    Waiter {
        /// The lease.
        lease: ResourceId,
        /// The waiter.
        holder: String,
    },
    /// The oldest retained entry of a ledger partition may be pruned.
    Ledger {
        /// The ledger partition.
        ledger: ResourceId,
    },
    /// An idempotency record leaves its window.
    Idempotency {
        /// The idempotency key.
        key: String,
        /// The routing point of the recorded command (the entry moves with its range).
        point: Option<u64>,
    },
    /// An election leader's term ends.
    Election {
        /// The election group.
        group: String,
    },
    /// A task's claim window passes (Tick redelivers or dead-letters it).
    TaskClaim {
        /// The task's team (its origin).
        team: String,
        /// The task's sequence in its team.
        seq: u64,
        /// The board holding it.
        tier: Tier,
    },
    /// A never-claimed local task spills to the cell tier.
    TaskSpill {
        /// The task's team.
        team: String,
        /// The task's sequence in its team.
        seq: u64,
    },
    /// A work entry's lease lapses.
    Work {
        /// Its lineage root (the routing key).
        root: String,
        /// The entry.
        id: String,
    },
    /// A proposal's closing time (Tick counts it unless it closed already).
    VoteClose {
        /// The proposal's team.
        team: String,
        /// The fence of its opening.
        fence: u64,
    },
    /// A done task's retention ends (Tick deletes it).
    TaskDone {
        /// The task's team (its origin).
        team: String,
        /// The task's sequence in its team.
        seq: u64,
        /// The board holding it.
        tier: Tier,
    },
    /// A client key with its own deadline is deleted (`crate::ephemeral`).
    KvExpiry {
        /// The client key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
    /// A path reservation runs out (`crate::reservation`).
    Reservation {
        /// The repository (the routing key).
        repo: String,
        /// The pattern.
        path: String,
        /// The holder.
        holder: String,
    },
}

crate::codes::stable_codes! {
    Item {
        0 => Holder,
        1 => Waiter,
        2 => Ledger,
        3 => Idempotency,
        4 => Election,
        5 => TaskClaim,
        6 => TaskSpill,
        7 => Work,
        8 => VoteClose,
        9 => TaskDone,
        10 => KvExpiry,
        11 => Reservation,
    }
}

impl Item {
    /// The routing point of the item's resource; `None` for cell-local items.
    pub(crate) fn point(&self) -> Option<u64> {
        match self {
            Item::Holder { lease, .. } | Item::Waiter { lease, .. } => {
                Some(crate::route::resource_point(lease))
            }
            Item::Ledger { ledger } => Some(crate::route::resource_point(ledger)),
            Item::Idempotency { point, .. } => *point,
            Item::Election { group } => Some(crate::route::election_point(group)),
            Item::Work { root, .. } => Some(crate::route::work_point(root)),
            Item::VoteClose { team, .. } => Some(crate::route::team_point(team)),
            Item::KvExpiry { key } => Some(crate::route::kv_point(key)),
            Item::Reservation { repo, .. } => Some(crate::route::repo_point(repo)),
            // Cell-tier tasks belong to the cell; local ones move with their team.
            Item::TaskClaim { tier, .. } | Item::TaskDone { tier, .. } if *tier != Tier::Local => {
                None
            }
            Item::TaskClaim { team, .. }
            | Item::TaskSpill { team, .. }
            | Item::TaskDone { team, .. } => Some(crate::route::team_point(team)),
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Item::Holder { .. } => 1,
            Item::Waiter { .. } => 2,
            Item::Ledger { .. } => 3,
            Item::Idempotency { .. } => 4,
            Item::Election { .. } => 5,
            Item::TaskClaim { .. } => 6,
            Item::TaskSpill { .. } => 7,
            Item::TaskDone { .. } => 8,
            Item::Work { .. } => 9,
            Item::VoteClose { .. } => 10,
            Item::KvExpiry { .. } => 11,
            Item::Reservation { .. } => 12,
        }
    }
}

/// The index key of `item` due at `deadline_ms`.
pub(crate) fn key(deadline_ms: u64, item: &Item) -> Vec<u8> {
    let mut out = vec![DEADLINE];
    keys::push_u64(&mut out, deadline_ms);
    out.push(item.kind());
    match item {
        Item::Holder { lease, holder } | Item::Waiter { lease, holder } => {
            keys::push_resource(&mut out, lease);
            keys::push_str(&mut out, holder.as_bytes());
        }
        Item::Ledger { ledger } => keys::push_resource(&mut out, ledger),
        Item::Idempotency { key, .. } => out.extend_from_slice(key.as_bytes()),
        Item::Election { group } => keys::push_str(&mut out, group.as_bytes()),
        Item::Work { root, id } => {
            keys::push_str(&mut out, root.as_bytes());
            keys::push_str(&mut out, id.as_bytes());
        }
        Item::TaskClaim { team, seq, tier } | Item::TaskDone { team, seq, tier } => {
            keys::push_str(&mut out, team.as_bytes());
            keys::push_u64(&mut out, *seq);
            out.push(*tier as u8);
        }
        Item::TaskSpill { team, seq } | Item::VoteClose { team, fence: seq } => {
            keys::push_str(&mut out, team.as_bytes());
            keys::push_u64(&mut out, *seq);
        }
        Item::KvExpiry { key } => keys::push_str(&mut out, key),
        Item::Reservation { repo, path, holder } => {
            keys::push_str(&mut out, repo.as_bytes());
            keys::push_str(&mut out, path.as_bytes());
            keys::push_str(&mut out, holder.as_bytes());
        }
    }
    out
}

/// Index `item` at `deadline_ms`.
pub(crate) fn insert(txn: &mut impl Txn, deadline_ms: u64, item: &Item) {
    txn.put(&key(deadline_ms, item), &encode(item));
}

/// Remove the index entry of `item` at `deadline_ms`.
pub(crate) fn remove(txn: &mut impl Txn, deadline_ms: u64, item: &Item) {
    txn.delete(&key(deadline_ms, item));
}

/// Move `item` from one deadline to another.
pub(crate) fn reschedule(txn: &mut impl Txn, from_ms: u64, to_ms: u64, item: &Item) {
    if from_ms != to_ms {
        remove(txn, from_ms, item);
        insert(txn, to_ms, item);
    }
}

/// Up to `limit` index entries due at `now_ms` (deadline <= now), earliest first.
pub(crate) fn due(txn: &impl Txn, now_ms: u64, limit: usize) -> Vec<(Vec<u8>, Item)> {
    let start = [DEADLINE];
    let mut end = vec![DEADLINE];
    match now_ms.checked_add(1) {
        Some(after) => keys::push_u64(&mut end, after),
        None => end = vec![DEADLINE + 1],
    }
    txn.scan(&start, &end, limit)
        .into_iter()
        .map(|(k, v)| (k, decode(&v)))
        .collect()
}

/// The earliest pending deadline, if any.
pub(crate) fn next(txn: &impl Txn) -> Option<u64> {
    let rows = txn.scan(&[DEADLINE], &[DEADLINE + 1], 1);
    rows.first().map(|(key, _)| {
        let bytes: [u8; 8] = key[1..9].try_into().expect("deadline key holds a u64");
        u64::from_be_bytes(bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn idem(key: &str) -> Item {
        Item::Idempotency {
            key: key.into(),
            point: None,
        }
    }

    #[test]
    fn next_is_earliest_and_due_is_inclusive() {
        let mut txn = MemTxn::default();
        insert(&mut txn, 300, &idem("b"));
        insert(&mut txn, 20, &idem("a"));
        assert_eq!(next(&txn), Some(20));
        assert_eq!(due(&txn, 19, 10).len(), 0);
        assert_eq!(due(&txn, 20, 10).len(), 1);
        assert_eq!(due(&txn, u64::MAX, 10).len(), 2);
        assert_eq!(due(&txn, u64::MAX, 1)[0].1, idem("a"));
    }

    #[test]
    fn reschedule_moves_the_entry() {
        let mut txn = MemTxn::default();
        insert(&mut txn, 20, &idem("a"));
        reschedule(&mut txn, 20, 50, &idem("a"));
        assert_eq!(next(&txn), Some(50));
        remove(&mut txn, 50, &idem("a"));
        assert_eq!(next(&txn), None);
    }
}
