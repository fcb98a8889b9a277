//! # whip-board: the coordination state machine
//!
//! Owns the meaning of every coordination command: CAS keys, leases, counters and ledgers
//! (later task boards, registry, mailboxes, ballots). [`apply`] is a pure function of the
//! current bytes, a [`Stamp`] and a [`Request`]; [`query`] reads.
//!
//! Invariants: replaying the same log over the same starting bytes yields byte-identical
//! state; a lease never has more live holders than its slots; a counter never passes its
//! cap within a period; a ledger partition has no gaps; fences only grow.
//!
//! Must never: read a clock, draw randomness, spawn threads, touch files, sockets, Raft,
//! sled, redb or tokio. Everything it knows comes in through the stamp and the command.
#![deny(unreachable_pub)]

pub mod limits;
pub mod query;
pub mod txn;
pub mod types;

pub use query::{Query, QueryResult};
pub use txn::{MemTxn, Txn};
pub use types::{Command, LeaseHolder, Outcome, Request, Reset, ResourceId, Stamp};

/// Apply one request at `stamp`. Records the outcome under the request's idempotency key;
/// a repeat within the window returns the recorded outcome without applying again.
pub fn apply(txn: &mut impl Txn, stamp: Stamp, request: &Request) -> Outcome {
    let _ = (txn, stamp, request);
    unimplemented!("board::apply is being written")
}

/// Answer a read at `now_ms`.
pub fn query(txn: &impl Txn, now_ms: u64, query: &Query) -> QueryResult {
    let _ = (txn, now_ms, query);
    unimplemented!("board::query is being written")
}

/// Check a command's inputs before proposing it.
pub fn validate(command: &Command, value_bytes_max: usize) -> Result<(), String> {
    let _ = (command, value_bytes_max);
    Ok(())
}
