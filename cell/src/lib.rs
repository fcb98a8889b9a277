//! # whip-cell: one Raft group
//!
//! Owns everything about a single replicated cell: the openraft type configuration, the
//! durable log and state-machine store (redb by default, sled selectable, both behind one
//! [`storage::Backend`] trait), applying [`whip_board::apply`] inside one storage commit with
//! the applied log id, snapshots, the proposal batcher (many client requests per Raft
//! entry), leader time stamping, the tick loop that proposes expiry, request forwarding to
//! the leader, answering a batch's callers from the apply ([`answer`]), linearizable reads
//! (read index), membership changes, heartbeats of many
//! cells to one peer sent as one call (`heartbeats.rs`), a member's hibernation while its
//! cell is idle ([`hibernation`]: the decision; the node that hosts it drives the rounds and
//! the liveness that wakes it), per-stage latencies and thread switches ([`stages`]), a log
//! line per role change (`role_log.rs`), the gRPC service ([`service`]), a retrying typed
//! client ([`client`]), and carrying out the follow-ups board decided ([`follow`]: at once
//! by the server that answered the request, and by a standalone cell's outbox executor).
//!
//! Invariants: a write is acknowledged only after its entry is fsynced on a quorum and
//! applied; apply never reads a clock (the leader's stamp carries time); stamps never go
//! backward, also across leader changes; hibernation turns timers off and on, never a Raft
//! rule, so it can delay a failover but never make two leaders or lose a write.
//!
//! Must never: know about key ranges, other cells or the WhippleScript engine (that is
//! `whip-fabric` and above); decide the meaning of a command or who may run it (that is
//! `whip-board`: the service proves the caller, puts it in the request and translates the
//! answer; the reads it still makes before a write are listed in `docs/ARCHITECTURE.md`).
#![deny(missing_docs, unreachable_pub)]
// openraft's StorageError and RaftError are large by design and fixed by its traits.
#![allow(clippy::result_large_err)]

pub mod answer;
pub mod backup;
pub mod budget;
pub mod client;
pub mod clock;
mod convert;
pub mod direct;
pub mod disk_fault;
mod election_pause;
pub mod error;
pub mod follow;
mod heartbeats;
pub mod hibernation;
pub mod http;
pub mod identity;
pub mod lease_read;
pub mod limits;
pub mod listen;
pub mod mail_wire;
pub mod metrics;
pub mod network;
pub mod paths_wire;
mod push;
mod role_log;
pub mod runtime;
pub mod screen_hook;
pub mod service;
pub mod stages;
pub mod status;
pub mod storage;
pub mod test_hooks;
pub mod tls;
pub mod types;
pub mod vote_wire;

pub use client::{CellClient, Waiter};
pub use clock::ClockOffset;
pub use convert::outcome_word;
pub use disk_fault::{DiskFault, DiskFaults};
pub use error::CellError;
pub use lease_read::LeaseReads;
pub use runtime::{Cell, CellConfig};
pub use storage::StorageKind;
