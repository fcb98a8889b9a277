//! # whip-board: the coordination state machine
//!
//! Owns the meaning of every coordination command: CAS keys, leases, counters, ledgers,
//! election leases and schedule firings (later task boards, registry, mailboxes, ballots).
//! [`apply`] is a pure function of the current bytes, a [`Stamp`] and a [`Request`];
//! [`query`] reads.
//!
//! Invariants: replaying the same log over the same starting bytes yields byte-identical
//! state; a lease never has more live holders than its slots; an election group never has
//! more than one live leader; a schedule fires each due time at most once, and never an
//! older one after a later one; a counter never passes its cap within a period; a ledger
//! partition has no gaps; fences only grow.
//!
//! Must never: read a clock, draw randomness, spawn threads, touch files, sockets, Raft,
//! sled, redb or tokio. Everything it knows comes in through the stamp and the command.
//!
//! ```
//! use whip_board::{Command, MemTxn, Outcome, Request, Stamp, apply};
//! let mut txn = MemTxn::default();
//! let put = Command::KvPut { key: b"a".to_vec(), value: b"x".to_vec(), expect_version: Some(0) };
//! let request = Request::new(Some("client-1/1".into()), put);
//! let stamp = Stamp { index: 1, position: 0, time_ms: 1_000 };
//! let written = apply(&mut txn, stamp, &request);
//! assert_eq!(written, Outcome::KvWritten { version: stamp.fence(), fence: stamp.fence() });
//! // A retry with the same idempotency key returns the recorded outcome.
//! let later = Stamp { index: 2, position: 0, time_ms: 2_000 };
//! assert_eq!(apply(&mut txn, later, &request), written);
//! ```
#![deny(missing_docs, unreachable_pub)]

mod codec;
mod counter;
mod deadline;
mod election;
mod idempotency;
mod keys;
mod kv;
mod lease;
mod ledger;
pub mod limits;
pub mod query;
mod range;
pub mod route;
mod schedule;
pub mod txn;
pub mod types;
mod validate;

pub use query::{Query, QueryResult, RangeView};
pub use schedule::{ScheduleSpec, latest_due};
pub use txn::{MemTxn, Txn};
pub use types::{Command, ElectionLeader, LeaseHolder, Outcome, Request, Reset, ResourceId, Stamp};
pub use validate::validate;

use deadline::Item;
use limits::{LIST_ROWS_MAX, TICK_WORK_MAX, VALUE_BYTES_MAX};

/// Apply one request at `stamp`. Records the outcome under the request's idempotency key;
/// a repeat within the window returns the recorded outcome without applying again.
///
/// An invalid request (see [`validate`]) changes nothing and is not recorded: validation
/// depends only on the request, so a retry gets the same `Invalid` again.
///
/// In a fabric (the cell owns ranges) a keyed command runs only when its point lies in a
/// range this cell serves at the request's epoch; otherwise it answers `WrongRange` and
/// records nothing. Fences include the cell's offset (see [`range`]), so they keep growing
/// when a range arrives from another cell.
pub fn apply(txn: &mut impl Txn, stamp: Stamp, request: &Request) -> Outcome {
    let key = request.idempotency_key.as_deref();
    let valid = key.map_or(Ok(()), validate::idempotency_key);
    if let Err(reason) = valid.and_then(|()| validate(&request.command, VALUE_BYTES_MAX)) {
        return Outcome::Invalid { reason };
    }
    let point = match route::command_point(&request.command) {
        Ok(point) => point,
        // A standalone cell runs transactions over any keys.
        Err(_) if range::serving(txn).is_none() => None,
        Err(reason) => return Outcome::Invalid { reason },
    };
    if let Some(outcome) = key.and_then(|key| idempotency::recorded(txn, stamp.time_ms, key)) {
        return outcome;
    }
    if let Some(point) = point
        && let Err(refusal) = range::admit(txn, point, request.epoch)
    {
        return refusal;
    }
    let stamp = range::shift(txn, stamp);
    let outcome = apply_command(txn, stamp, &request.command);
    if let Some(key) = key {
        idempotency::record(txn, stamp.time_ms, key, &outcome, point);
    }
    outcome
}

fn apply_command(txn: &mut impl Txn, stamp: Stamp, command: &Command) -> Outcome {
    let now_ms = stamp.time_ms;
    match command {
        Command::KvPut {
            key,
            value,
            expect_version,
        } => kv::put(txn, stamp, key, value, *expect_version),
        Command::KvDelete {
            key,
            expect_version,
        } => kv::delete(txn, key, *expect_version),
        Command::LeaseAcquire {
            lease,
            holder,
            slots,
            ttl_ms,
            wait_ms,
        } => {
            let request = lease::Acquire {
                lease,
                holder,
                slots: *slots,
                ttl_ms: *ttl_ms,
                wait_ms: *wait_ms,
            };
            lease::acquire(txn, stamp, &request)
        }
        Command::LeaseRenew {
            lease,
            holder,
            ttl_ms,
        } => lease::renew(txn, stamp, lease, holder, *ttl_ms),
        Command::LeaseRelease { lease, holder } => lease::release(txn, stamp, lease, holder),
        Command::LeaseReleaseAll { holder } => lease::release_all(txn, stamp, holder),
        Command::CounterConsume {
            counter,
            amount,
            cap,
            reset,
            timezone,
        } => {
            let tz = counter::zone(timezone).expect("validated time zone");
            let request = counter::Consume {
                counter,
                amount: *amount,
                cap: *cap,
                reset: *reset,
                tz,
            };
            counter::consume(txn, now_ms, &request)
        }
        Command::LedgerAppend {
            ledger,
            entry,
            appended_by,
            retain_ms,
        } => {
            let request = ledger::Append {
                ledger,
                entry,
                appended_by,
                retain_ms: *retain_ms,
            };
            ledger::append(txn, now_ms, &request)
        }
        Command::Tick => tick(txn, stamp),
        Command::KvTxn {
            compares,
            puts,
            deletes,
        } => kv::txn(txn, stamp, compares, puts, deletes),
        Command::RangeAssign {
            start,
            last,
            epoch,
            fence_above,
        } => {
            let range = RangeView {
                start: *start,
                last: *last,
                epoch: *epoch,
                frozen: false,
            };
            range::assign(txn, stamp, range, *fence_above)
        }
        Command::RangeFreeze { start, last, epoch } => {
            range::freeze(txn, stamp, *start, *last, *epoch)
        }
        Command::RangeSplit {
            start,
            last,
            at,
            epoch,
        } => range::split(txn, *start, *last, *at, *epoch),
        Command::RangeImport { rows } => range::import(txn, rows),
        Command::RangeDrop { start, last } => range::drop_rows(txn, *start, *last),
        Command::Campaign { .. }
        | Command::Proclaim { .. }
        | Command::Resign { .. }
        | Command::ElectionRenew { .. }
        | Command::ScheduleFire { .. } => apply_coordination(txn, stamp, command),
    }
}

/// Election and schedule commands (split from `apply_command` to keep each match short).
fn apply_coordination(txn: &mut impl Txn, stamp: Stamp, command: &Command) -> Outcome {
    let now_ms = stamp.time_ms;
    match command {
        Command::Campaign {
            group,
            candidate,
            endpoints,
            ttl_ms,
        } => {
            let request = election::Campaign {
                group,
                candidate,
                endpoints,
                ttl_ms: *ttl_ms,
            };
            election::campaign(txn, stamp, &request)
        }
        Command::Proclaim {
            group,
            candidate,
            fence,
            endpoints,
        } => election::proclaim(txn, now_ms, &term(group, candidate, *fence), endpoints),
        Command::Resign {
            group,
            candidate,
            fence,
        } => election::resign(txn, now_ms, &term(group, candidate, *fence)),
        Command::ElectionRenew {
            group,
            candidate,
            fence,
            ttl_ms,
        } => election::renew(txn, now_ms, &term(group, candidate, *fence), *ttl_ms),
        Command::ScheduleFire {
            name,
            spec,
            timezone,
            due_ms,
            claimant,
        } => {
            let request = schedule::Fire {
                name,
                spec,
                timezone,
                due_ms: *due_ms,
                claimant,
            };
            schedule::fire(txn, stamp, &request)
        }
        other => unreachable!("{other:?} is not an election or schedule command"),
    }
}

fn term<'a>(group: &'a str, candidate: &'a str, fence: u64) -> election::Term<'a> {
    election::Term {
        group,
        candidate,
        fence,
    }
}

/// Process due deadlines in deadline order. `processed` counts removed holders, waiters,
/// ledger entries, idempotency records and election leaders, plus stale index entries; the
/// tick stops taking new index entries once it reaches `TICK_WORK_MAX` (settling one lease
/// may go past it).
fn tick(txn: &mut impl Txn, stamp: Stamp) -> Outcome {
    let now_ms = stamp.time_ms;
    let budget = u32::try_from(TICK_WORK_MAX).expect("tick budget fits u32");
    let mut processed = 0u32;
    for (key, item) in deadline::due(txn, now_ms, TICK_WORK_MAX) {
        if processed >= budget {
            break;
        }
        // Settling an earlier item may already have removed this one.
        if txn.get(&key).is_none() {
            continue;
        }
        // Drop the entry first: processing a live item re-indexes whatever stays pending,
        // and a stale entry (its item moved or went away) must not stop later ticks.
        txn.delete(&key);
        let removed = match &item {
            Item::Holder { lease, .. } | Item::Waiter { lease, .. } => {
                lease::expire(txn, stamp, lease)
            }
            Item::Ledger { ledger } => ledger::prune(txn, now_ms, ledger, budget - processed),
            Item::Idempotency { key, .. } => idempotency::prune(txn, now_ms, key),
            Item::Election { group } => election::expire(txn, now_ms, group),
        };
        processed += removed.max(1);
    }
    Outcome::Ticked { processed }
}

/// Answer a read at `now_ms`. A list `limit` of 0 means `limits::LIST_ROWS_MAX`; larger
/// limits are capped to it.
pub fn query(txn: &impl Txn, now_ms: u64, query: &Query) -> QueryResult {
    let cap = |limit: u32| match limit as usize {
        0 => LIST_ROWS_MAX,
        limit => limit.min(LIST_ROWS_MAX),
    };
    match query {
        Query::KvGet { key } => QueryResult::Kv(kv::get(txn, key)),
        Query::LeaseList { prefix, limit } => {
            QueryResult::Leases(lease::list(txn, now_ms, prefix, cap(*limit)))
        }
        Query::CounterList { prefix, limit } => {
            QueryResult::Counters(counter::list(txn, prefix, cap(*limit)))
        }
        Query::LedgerList {
            owner,
            name,
            partition,
            after_seq,
            limit,
        } => {
            let request = ledger::List {
                owner,
                name,
                partition: partition.as_deref(),
                after_seq: *after_seq,
                limit: cap(*limit),
            };
            QueryResult::LedgerEntries(ledger::list(txn, &request))
        }
        Query::NextDeadline => QueryResult::NextDeadline(deadline::next(txn)),
        Query::KvRange {
            prefix,
            after_key,
            limit,
        } => QueryResult::KvRange(kv::range(txn, prefix, after_key, cap(*limit))),
        Query::ElectionLeader { group } => {
            QueryResult::ElectionLeader(election::get(txn, now_ms, group))
        }
        Query::ElectionList { prefix, limit } => {
            QueryResult::Elections(election::list(txn, now_ms, prefix, cap(*limit)))
        }
        Query::ScheduleList { prefix, limit } => {
            QueryResult::Schedules(schedule::list(txn, prefix, cap(*limit)))
        }
        Query::Routed { epoch, query } => routed(txn, now_ms, *epoch, query),
        Query::Ranges => QueryResult::Ranges(range::rows(txn)),
        Query::RangeExport {
            start,
            last,
            after_key,
            limit,
        } => {
            let (rows, next) = range::export(txn, *start, *last, after_key, cap(*limit));
            QueryResult::RangeRows { rows, next }
        }
    }
}

/// A router's read: refused unless this cell serves its point at `epoch`; list results keep
/// only rows of served ranges (a frozen range's rows are already on their way elsewhere).
fn routed(txn: &impl Txn, now_ms: u64, epoch: u64, inner: &Query) -> QueryResult {
    if let Some(point) = route::query_point(inner)
        && let Err(Outcome::WrongRange { epoch }) = range::admit(txn, point, epoch)
    {
        return QueryResult::WrongRange { epoch };
    }
    let serving = range::serving(txn);
    let serves = |p: u64| range::serves(&serving, p);
    match query(txn, now_ms, inner) {
        QueryResult::KvRange(mut rows) => {
            rows.retain(|(key, _)| serves(route::kv_point(key)));
            QueryResult::KvRange(rows)
        }
        QueryResult::Leases(mut rows) => {
            rows.retain(|v| serves(route::resource_point(&v.lease)));
            QueryResult::Leases(rows)
        }
        QueryResult::Counters(mut rows) => {
            rows.retain(|v| serves(route::resource_point(&v.counter)));
            QueryResult::Counters(rows)
        }
        QueryResult::LedgerEntries(mut rows) => {
            rows.retain(|v| serves(route::resource_point(&v.ledger)));
            QueryResult::LedgerEntries(rows)
        }
        QueryResult::Elections(mut rows) => {
            rows.retain(|v| serves(route::election_point(&v.group)));
            QueryResult::Elections(rows)
        }
        QueryResult::Schedules(mut rows) => {
            rows.retain(|v| serves(route::schedule_point(&v.name)));
            QueryResult::Schedules(rows)
        }
        other => other,
    }
}
