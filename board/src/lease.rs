//! Leases: up to `slots` holders per resource, each with a fence and a deadline, and a FIFO
//! queue of waiters.
//!
//! A holder whose deadline is at or before the stamp is dead, and a waiter whose wait ran
//! out is gone, even before the `Tick` that removes them: every command that touches a lease
//! first settles it (drops the dead, then promotes live waiters into free slots with the
//! current stamp's fence). After a settle, waiters exist only while the lease is full.
//!
//! Slots bound grants, not holders already granted: a command naming fewer `slots` than the
//! lease has holders keeps every holder (revoking a live holder's grant would break the
//! fence it was given) and grants nothing until releases and expiries bring the holders
//! below the new count.
//!
//! State per lease is one record; each holder and waiter also has a deadline index entry
//! and a holder index entry (`holder` → lease) that `LeaseReleaseAll` walks.

use serde::{Deserialize, Serialize};

use crate::access::Caller;
use crate::codec::{decode, encode};
use crate::deadline::{self, Item};
use crate::keys::{self, LEASE};
use crate::limits::{LEASE_WAITERS_MAX, LIST_ROWS_MAX};
use crate::query::LeaseView;
use crate::txn::Txn;
use crate::types::{LeaseHolder, Outcome, ResourceId, Stamp};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Record {
    slots: u32,
    holders: Vec<LeaseHolder>,
    waiters: Vec<Waiter>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Waiter {
    holder: String,
    wait_until_ms: u64,
    ttl_ms: u64,
}

/// One touched lease: its id, its record and the stamp of the touching command.
struct Lease<'a, T: Txn> {
    txn: &'a mut T,
    id: &'a ResourceId,
    stamp: Stamp,
    record: Record,
}

/// What a settle removed.
#[derive(Default)]
struct Settled {
    removed: u32,
    expired_waiters: Vec<String>,
}

fn holder_item(id: &ResourceId, holder: &str) -> Item {
    Item::Holder {
        lease: id.clone(),
        holder: holder.to_string(),
    }
}

fn waiter_item(id: &ResourceId, holder: &str) -> Item {
    Item::Waiter {
        lease: id.clone(),
        holder: holder.to_string(),
    }
}

impl<'a, T: Txn> Lease<'a, T> {
    fn open(txn: &'a mut T, id: &'a ResourceId, stamp: Stamp) -> Option<Self> {
        let bytes = txn.get(&keys::listed(LEASE, id))?;
        Some(Lease {
            txn,
            id,
            stamp,
            record: decode(&bytes),
        })
    }

    fn open_or_new(txn: &'a mut T, id: &'a ResourceId, stamp: Stamp, slots: u32) -> Self {
        let record = Record {
            slots,
            ..Record::default()
        };
        let bytes = txn.get(&keys::listed(LEASE, id));
        let record = bytes.map_or(record, |bytes| decode(&bytes));
        Lease {
            txn,
            id,
            stamp,
            record,
        }
    }

    fn now(&self) -> u64 {
        self.stamp.time_ms
    }

    /// Write the record back, or delete it when nobody holds or waits.
    fn close(self) {
        let key = keys::listed(LEASE, self.id);
        if self.record.holders.is_empty() && self.record.waiters.is_empty() {
            self.txn.delete(&key);
        } else {
            self.txn.put(&key, &encode(&self.record));
        }
    }

    fn holder_index(&self, holder: &str) -> Vec<u8> {
        keys::holder(holder, self.id)
    }

    fn add_holder(&mut self, holder: &str, ttl_ms: u64) -> LeaseHolder {
        let granted = LeaseHolder {
            holder: holder.to_string(),
            fence: self.stamp.fence(),
            expires_at_ms: self.now().saturating_add(ttl_ms),
        };
        deadline::insert(
            self.txn,
            granted.expires_at_ms,
            &holder_item(self.id, holder),
        );
        self.txn.put(&self.holder_index(holder), &encode(self.id));
        self.record.holders.push(granted.clone());
        granted
    }

    /// Free holder `at`'s slot, and with it every client key attached to the slot.
    fn remove_holder(&mut self, at: usize) {
        let gone = self.record.holders.remove(at);
        deadline::remove(
            self.txn,
            gone.expires_at_ms,
            &holder_item(self.id, &gone.holder),
        );
        self.txn.delete(&self.holder_index(&gone.holder));
        crate::ephemeral::release_holder(self.txn, self.stamp, self.id, &gone.holder);
    }

    fn add_waiter(&mut self, holder: &str, wait_ms: u64, ttl_ms: u64) -> Waiter {
        let waiter = Waiter {
            holder: holder.to_string(),
            wait_until_ms: self.now().saturating_add(wait_ms),
            ttl_ms,
        };
        deadline::insert(
            self.txn,
            waiter.wait_until_ms,
            &waiter_item(self.id, holder),
        );
        self.txn.put(&self.holder_index(holder), &encode(self.id));
        self.record.waiters.push(waiter.clone());
        waiter
    }

    /// Dequeue the waiter at `at`; its holder index entry stays when it is promoted.
    fn take_waiter(&mut self, at: usize, keep_index: bool) -> Waiter {
        let gone = self.record.waiters.remove(at);
        deadline::remove(
            self.txn,
            gone.wait_until_ms,
            &waiter_item(self.id, &gone.holder),
        );
        if !keep_index {
            self.txn.delete(&self.holder_index(&gone.holder));
        }
        gone
    }

    /// Move holder `at`'s deadline to `now + ttl_ms` unless that is earlier.
    fn extend(&mut self, at: usize, ttl_ms: u64) -> LeaseHolder {
        let now = self.now();
        let current = self.record.holders[at].clone();
        let expires_at_ms = current.expires_at_ms.max(now.saturating_add(ttl_ms));
        let item = holder_item(self.id, &current.holder);
        deadline::reschedule(self.txn, current.expires_at_ms, expires_at_ms, &item);
        self.record.holders[at].expires_at_ms = expires_at_ms;
        self.record.holders[at].clone()
    }

    /// Drop dead holders and expired waiters, then promote waiters into free slots.
    fn settle(&mut self) -> Settled {
        let now = self.now();
        let mut settled = Settled::default();
        while let Some(at) = self
            .record
            .holders
            .iter()
            .position(|h| h.expires_at_ms <= now)
        {
            self.remove_holder(at);
            settled.removed += 1;
        }
        while let Some(at) = self
            .record
            .waiters
            .iter()
            .position(|w| w.wait_until_ms <= now)
        {
            let gone = self.take_waiter(at, false);
            settled.expired_waiters.push(gone.holder);
            settled.removed += 1;
        }
        self.promote();
        settled
    }

    /// Grant free slots to waiters in FIFO order, with this command's fence.
    fn promote(&mut self) {
        while self.record.holders.len() < self.record.slots as usize
            && !self.record.waiters.is_empty()
        {
            let waiter = self.take_waiter(0, true);
            self.add_holder(&waiter.holder, waiter.ttl_ms);
        }
    }

    fn holder_at(&self, holder: &str) -> Option<usize> {
        self.record.holders.iter().position(|h| h.holder == holder)
    }

    fn waiter_at(&self, holder: &str) -> Option<usize> {
        self.record.waiters.iter().position(|w| w.holder == holder)
    }

    fn contended(&self) -> Outcome {
        Outcome::LeaseContended {
            holders: self.record.holders.clone(),
        }
    }

    /// Give back `holder`'s slot or queue place; true when it had one.
    fn release(&mut self, holder: &str) -> bool {
        if let Some(at) = self.holder_at(holder) {
            self.remove_holder(at);
            self.promote();
            true
        } else if let Some(at) = self.waiter_at(holder) {
            self.take_waiter(at, false);
            true
        } else {
            false
        }
    }
}

/// The request of one acquire.
pub(crate) struct Acquire<'a> {
    /// Which lease.
    pub(crate) lease: &'a ResourceId,
    /// Who asks.
    pub(crate) holder: &'a str,
    /// Declared slots (stored; the latest acquire wins).
    pub(crate) slots: u32,
    /// Time to live of a grant.
    pub(crate) ttl_ms: u64,
    /// How long to wait when full (0 = do not wait).
    pub(crate) wait_ms: u64,
}

/// Take a slot, re-enter, queue or report contention.
pub(crate) fn acquire(txn: &mut impl Txn, stamp: Stamp, request: &Acquire<'_>) -> Outcome {
    let mut lease = Lease::open_or_new(txn, request.lease, stamp, request.slots);
    lease.record.slots = request.slots;
    let settled = lease.settle();
    let outcome = decide_acquire(&mut lease, &settled, request);
    lease.close();
    outcome
}

fn decide_acquire<T: Txn>(
    lease: &mut Lease<'_, T>,
    settled: &Settled,
    request: &Acquire<'_>,
) -> Outcome {
    let holder = request.holder;
    if let Some(at) = lease.holder_at(holder) {
        let held = lease.extend(at, request.ttl_ms);
        return Outcome::LeaseHeld {
            fence: held.fence,
            expires_at_ms: held.expires_at_ms,
            reentered: true,
        };
    }
    if settled.expired_waiters.iter().any(|w| w == holder) {
        return lease.contended();
    }
    if let Some(at) = lease.waiter_at(holder) {
        let waiter = &lease.record.waiters[at];
        let position = u32::try_from(at).expect("waiters are capped");
        return Outcome::LeaseWaiting {
            position,
            wait_until_ms: waiter.wait_until_ms,
        };
    }
    if lease.record.holders.len() < lease.record.slots as usize {
        let granted = lease.add_holder(holder, request.ttl_ms);
        return Outcome::LeaseHeld {
            fence: granted.fence,
            expires_at_ms: granted.expires_at_ms,
            reentered: false,
        };
    }
    let queued = lease.record.waiters.len();
    if request.wait_ms == 0 || queued >= LEASE_WAITERS_MAX as usize {
        return lease.contended();
    }
    let waiter = lease.add_waiter(holder, request.wait_ms, request.ttl_ms);
    let position = u32::try_from(queued).expect("waiters are capped");
    Outcome::LeaseWaiting {
        position,
        wait_until_ms: waiter.wait_until_ms,
    }
}

/// Extend a live holder's deadline (never backward).
pub(crate) fn renew(
    txn: &mut impl Txn,
    stamp: Stamp,
    id: &ResourceId,
    holder: &str,
    ttl_ms: u64,
) -> Outcome {
    let Some(mut lease) = Lease::open(txn, id, stamp) else {
        return Outcome::LeaseNotHeld;
    };
    lease.settle();
    let outcome = match lease.holder_at(holder) {
        Some(at) => {
            let held = lease.extend(at, ttl_ms);
            Outcome::LeaseRenewed {
                fence: held.fence,
                expires_at_ms: held.expires_at_ms,
            }
        }
        None => Outcome::LeaseNotHeld,
    };
    lease.close();
    outcome
}

/// Give back one holder's slot or queue place on one lease.
pub(crate) fn release(txn: &mut impl Txn, stamp: Stamp, id: &ResourceId, holder: &str) -> Outcome {
    if release_one(txn, stamp, id, holder) {
        Outcome::LeaseReleased
    } else {
        Outcome::LeaseNotHeld
    }
}

fn release_one(txn: &mut impl Txn, stamp: Stamp, id: &ResourceId, holder: &str) -> bool {
    let Some(mut lease) = Lease::open(txn, id, stamp) else {
        return false;
    };
    lease.settle();
    let released = lease.release(holder);
    lease.close();
    released
}

/// Give back every slot and queue place of `holder`, through the holder index.
pub(crate) fn release_all(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    holder: &str,
) -> Outcome {
    let mut start = keys::holder_prefix(holder);
    let end = keys::prefix_end(&start);
    let mut released = 0u32;
    loop {
        let rows = txn.scan(&start, &end, LIST_ROWS_MAX);
        let Some((last, _)) = rows.last() else {
            break;
        };
        // The next pass starts past this one: slots the caller may not free stay indexed.
        let mut next = last.clone();
        next.push(0);
        for (key, value) in rows {
            let id: ResourceId = decode(&value);
            // A team's locks are its members' to free (`crate::blackboard`).
            if !crate::blackboard::may_reach(txn, caller, &id) {
                continue;
            }
            if release_one(txn, stamp, &id, holder) {
                released += 1;
            }
            // A dead holder's entry was removed by the settle; make sure it is gone.
            txn.delete(&key);
        }
        start = next;
    }
    Outcome::LeaseReleasedAll { released }
}

/// Whether `holder` holds a live slot of lease `id` at `now_ms`.
pub(crate) fn holds(txn: &impl Txn, now_ms: u64, id: &ResourceId, holder: &str) -> bool {
    let Some(bytes) = txn.get(&keys::listed(LEASE, id)) else {
        return false;
    };
    let record: Record = decode(&bytes);
    (record.holders.iter()).any(|h| h.holder == holder && h.expires_at_ms > now_ms)
}

/// Settle a lease whose deadline fell due; returns how many holders and waiters it removed.
pub(crate) fn expire(txn: &mut impl Txn, stamp: Stamp, id: &ResourceId) -> u32 {
    let Some(mut lease) = Lease::open(txn, id, stamp) else {
        return 0;
    };
    let settled = lease.settle();
    lease.close();
    settled.removed
}

/// Leases whose `owner/name` starts with `prefix`, with their live holders and waiters.
pub(crate) fn list(txn: &impl Txn, now_ms: u64, prefix: &str, limit: usize) -> Vec<LeaseView> {
    let mut start = keys::listed_prefix(LEASE, prefix);
    let end = keys::prefix_end(&start);
    let mut views = Vec::new();
    while views.len() < limit {
        let rows = txn.scan(&start, &end, LIST_ROWS_MAX);
        let Some((last, _)) = rows.last() else { break };
        start = last.clone();
        start.push(0);
        for (key, value) in rows {
            if let Some(view) = view(keys::parse_listed(&key), decode(&value), now_ms) {
                views.push(view);
                if views.len() == limit {
                    break;
                }
            }
        }
    }
    views
}

fn view(lease: ResourceId, record: Record, now_ms: u64) -> Option<LeaseView> {
    let mut holders: Vec<LeaseHolder> = record
        .holders
        .into_iter()
        .filter(|h| h.expires_at_ms > now_ms)
        .collect();
    holders.sort_by_key(|h| h.fence);
    let waiters: Vec<(String, u64)> = record
        .waiters
        .into_iter()
        .filter(|w| w.wait_until_ms > now_ms)
        .map(|w| (w.holder, w.wait_until_ms))
        .collect();
    if holders.is_empty() && waiters.is_empty() {
        return None;
    }
    Some(LeaseView {
        lease,
        slots: record.slots,
        holders,
        waiters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn id() -> ResourceId {
        ResourceId {
            owner: "o".into(),
            name: "n".into(),
            key: "k".into(),
        }
    }

    fn at(index: u64, time_ms: u64) -> Stamp {
        Stamp {
            index,
            position: 0,
            time_ms,
        }
    }

    fn take(txn: &mut MemTxn, stamp: Stamp, holder: &str, slots: u32, wait_ms: u64) -> Outcome {
        let lease = id();
        acquire(
            txn,
            stamp,
            &Acquire {
                lease: &lease,
                holder,
                slots,
                ttl_ms: 100,
                wait_ms,
            },
        )
    }

    fn held(stamp: Stamp, expires_at_ms: u64, reentered: bool) -> Outcome {
        Outcome::LeaseHeld {
            fence: stamp.fence(),
            expires_at_ms,
            reentered,
        }
    }

    #[test]
    fn slots_reentry_and_contention() {
        let mut txn = MemTxn::default();
        assert_eq!(
            take(&mut txn, at(1, 0), "a", 2, 0),
            held(at(1, 0), 100, false)
        );
        assert_eq!(
            take(&mut txn, at(2, 10), "b", 2, 0),
            held(at(2, 10), 110, false)
        );
        assert_eq!(
            take(&mut txn, at(3, 50), "a", 2, 0),
            held(at(1, 0), 150, true)
        );
        let Outcome::LeaseContended { holders } = take(&mut txn, at(4, 60), "c", 2, 0) else {
            panic!("expected contention");
        };
        assert_eq!(holders.len(), 2);
        // b is dead at 110 even before a tick; c takes its slot.
        assert_eq!(
            take(&mut txn, at(5, 110), "c", 2, 0),
            held(at(5, 110), 210, false)
        );
        assert!(txn.get(&keys::holder("b", &id())).is_none());
    }

    #[test]
    fn waiters_promote_fifo_on_release() {
        let mut txn = MemTxn::default();
        take(&mut txn, at(1, 0), "a", 1, 0);
        let waiting = |position, wait_until_ms| Outcome::LeaseWaiting {
            position,
            wait_until_ms,
        };
        assert_eq!(take(&mut txn, at(2, 1), "b", 1, 50), waiting(0, 51));
        assert_eq!(take(&mut txn, at(3, 2), "c", 1, 50), waiting(1, 52));
        assert_eq!(take(&mut txn, at(4, 3), "b", 1, 500), waiting(0, 51));
        assert_eq!(
            release(&mut txn, at(5, 10), &id(), "a"),
            Outcome::LeaseReleased
        );
        assert_eq!(
            take(&mut txn, at(6, 11), "b", 1, 0),
            held(at(5, 10), 111, true)
        );
        assert_eq!(take(&mut txn, at(7, 12), "c", 1, 50), waiting(0, 52));
        // c's wait runs out: it is contended, not queued again.
        let Outcome::LeaseContended { .. } = take(&mut txn, at(8, 52), "c", 1, 50) else {
            panic!("expected contention after the wait ran out");
        };
    }

    #[test]
    fn expiry_promotes_and_renew_never_moves_back() {
        let mut txn = MemTxn::default();
        take(&mut txn, at(1, 0), "a", 1, 0);
        take(&mut txn, at(2, 1), "b", 1, 500);
        let renewed = renew(&mut txn, at(3, 20), &id(), "a", 10);
        assert_eq!(
            renewed,
            Outcome::LeaseRenewed {
                fence: at(1, 0).fence(),
                expires_at_ms: 100
            }
        );
        assert_eq!(
            renew(&mut txn, at(4, 20), &id(), "b", 10),
            Outcome::LeaseNotHeld
        );
        assert_eq!(deadline::next(&txn), Some(100));
        assert_eq!(expire(&mut txn, at(5, 100), &id()), 1);
        let view = list(&txn, 100, "", 10);
        assert_eq!(
            view[0].holders,
            vec![LeaseHolder {
                holder: "b".into(),
                fence: at(5, 100).fence(),
                expires_at_ms: 200
            }]
        );
    }

    #[test]
    fn release_all_frees_slots_and_places() {
        let mut txn = MemTxn::default();
        take(&mut txn, at(1, 0), "a", 1, 0);
        take(&mut txn, at(2, 0), "b", 1, 100);
        let other = ResourceId {
            key: "k2".into(),
            ..id()
        };
        let request = Acquire {
            lease: &other,
            holder: "b",
            slots: 1,
            ttl_ms: 100,
            wait_ms: 0,
        };
        acquire(&mut txn, at(3, 0), &request);
        assert_eq!(
            release_all(&mut txn, at(4, 1), &Caller::Operator, "b"),
            Outcome::LeaseReleasedAll { released: 2 }
        );
        assert_eq!(
            release(&mut txn, at(5, 1), &id(), "a"),
            Outcome::LeaseReleased
        );
        assert!(txn.map.is_empty(), "left {:?}", txn.map);
    }

    #[test]
    fn lowered_slots_keep_holders_but_grant_nothing() {
        let mut txn = MemTxn::default();
        take(&mut txn, at(1, 0), "a", 2, 0);
        take(&mut txn, at(2, 0), "b", 2, 0);
        let Outcome::LeaseContended { .. } = take(&mut txn, at(3, 0), "c", 1, 0) else {
            panic!("expected contention");
        };
        release(&mut txn, at(4, 0), &id(), "a");
        let Outcome::LeaseContended { .. } = take(&mut txn, at(5, 0), "c", 1, 0) else {
            panic!("expected contention with one slot");
        };
        assert_eq!(list(&txn, 0, "o/", 10)[0].slots, 1);
    }
}
