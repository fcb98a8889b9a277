//! # whip-fabric: many cells as one fabric
//!
//! Owns:
//! - the [`Node`]: one gRPC server hosting many cells (multi-Raft; Raft messages carry the
//!   cell id), started again from its data directory after a restart;
//! - the [`FabricMap`] in the meta cell (cell 0): nodes, cell placement, and the 64-bit hash
//!   ring cut into ranges, each with an owning cell and an epoch;
//! - the router (a node's client API): each keyed request goes to the cell owning its key
//!   with the range's epoch; `WrongRange` and `NotLeader` answers refresh the cached map and
//!   leader hints; lists are gathered from every cell; a claim that found its team's local
//!   and cell tiers empty goes on to the team's fabric queue (the tier chain's last step);
//! - the work registry's cross-cell steps (`quota`): each node renews, for the data cells
//!   it leads, the quota of the population ceiling the meta cell lends them, and runs one
//!   quota round when a registration was refused for lack of it; limit changes go to every
//!   cell, registry listings and the audit ledger are gathered from all;
//! - the routing client ([`client::MapRouter`]): a client that learned the routes (ranges,
//!   cells, epochs, leaders) from any node sends each plain keyed write straight to the node
//!   hosting the owning cell's leader, which serves it without forwarding;
//! - [`admin`]: `fabric init`, `fabric status`, range moves and splits (copy while the
//!   source serves and records changes, freeze, send the changes, assign on the target
//!   with a fence floor, publish, drop); each step a bounded try, alternating between this
//!   node's member and another voter; the copy itself (`move_copy`) resumes from the
//!   source's mark when an earlier driver of the same move stopped half-way;
//! - hibernation (`hibernate`): pings of peer nodes, and the rounds that put idle hosted
//!   cells to sleep and wake them (a peer's death, a peer's return);
//! - the follow-up executor (`follow`): for every data cell a node leads, carries out what
//!   board wrote to the cell's follow-up outbox and acknowledges it;
//! - [`restore`]: a new fabric from `whip fabric backup` on empty nodes: each cell's voters
//!   made from its snapshot (node ids, ranges and epochs kept, the meta cell's map
//!   re-addressed before it starts), then the meta learners;
//! - [`FabricClient`]: the only view the WhippleScript engine has of the store (CAS keys,
//!   leases, counters, ledgers, and the task boards its trackers live on), implemented
//!   for [`whip_cell::CellClient`] (a cell or a node, embedded or remote) and for
//!   [`MemFabric`] (the board on a `BTreeMap`, for tests);
//! - [`identity`]: each cell's ed25519 signing key (`identity.key`, mode 0600, in its data
//!   directory) and the [`KeyRegistry`] of public keys kept in the meta cell;
//! - [`envelope`]: signed, hash-chained envelopes handing work from cell to cell; the pure
//!   [`envelope::verify`] and [`envelope::receive`] checks (typed [`Refusal`]s for every bad
//!   envelope; gap → resend, duplicate → ack again, fork → refuse and alarm). The chain
//!   rule is the board's one [`whip_board::chain::check`], also run by the receiving cell's
//!   apply; outboxes and chain heads live in the cells' replicated state.
//!
//! - cell identities ([`identity`]: one ed25519 key per cell, generated at `fabric init`,
//!   installed 0600 on every voter, public key in the map) and [`envelope`]s (signed,
//!   blake3 hash-chained, bounded in size, hops and clock skew);
//! - the spill mover: hands due cell-tier tasks to the team's fabric queue in envelopes;
//!   `Deliver` verifies them on the receiving side, whose cell checks the chain;
//! - what a node shows on its observation listener (`observe`: the node is a
//!   [`whip_cell::http::Observed`]): its members for `/metrics` and `/readyz`, and the
//!   fabric overview of the dashboard, built when asked from local state and bounded probes.
//!
//! Must never: decide the meaning of a command (that is `whip-board`) or talk Raft
//! internals of a single group (that is `whip-cell`).
#![deny(missing_docs, unreachable_pub)]

pub mod admin;
mod cell;
pub mod client;
pub mod envelope;
mod follow;
pub mod hibernate;
pub mod identity;
pub mod limits;
pub mod map;
mod mem;
mod move_copy;
mod mover;
pub mod node;
mod observe;
mod quota;
pub mod range_change;
pub mod restore;
mod router;
mod takeover;
mod test_hooks;

use std::future::Future;

pub use envelope::{Envelope, EnvelopeKind, Refusal};
pub use identity::{CellIdentity, KeyRegistry};
pub use map::{FabricMap, RangeEntry};
pub use mem::MemFabric;
pub use mover::SpillPayload;
pub use node::{Node, NodeConfig};
pub use whip_board::query::{CounterView, KvEntry, KvPage, LeaseView, LedgerEntryView};
pub use whip_board::work;
pub use whip_board::{
    Command, Outcome, Query, QueryResult, RefusalCode, Reset, ResourceId, TRACKER_TEAM_PREFIX,
    TaskState, TaskView,
};
pub use whip_board::{access, mail, screen, tally, vote};

/// An operating failure talking to the fabric (business results are [`Outcome`]s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FabricError {
    /// The request was refused as malformed; retrying will not help.
    Invalid(String),
    /// The fabric could not answer (unavailable, stopping, an unexpected answer).
    Unavailable(String),
    /// The caller may not do this (reserved state, a server-only command, a credential it
    /// does not hold) or did not prove who it is; retrying will not help.
    PermissionDenied(String),
    /// The core refused the call for a reason the caller may act on: match on `code`,
    /// never on `message` (which is for people).
    Refused {
        /// The typed reason.
        code: whip_board::RefusalCode,
        /// What to print.
        message: String,
    },
}

impl FabricError {
    /// A refusal the board answered in band (`refusal`), typed.
    pub fn board_refused(refusal: &whip_board::BoardRefusal) -> FabricError {
        FabricError::Refused {
            code: refusal.refusal_code(),
            message: refusal.to_string(),
        }
    }

    /// A refusal a server answered in band: its wire `code` (typed when this build knows
    /// it) and its message.
    pub fn refused_in_band(code: &str, message: String) -> FabricError {
        match whip_board::RefusalCode::from_code(code) {
            Some(code) => FabricError::Refused { code, message },
            None => FabricError::Invalid(message),
        }
    }
}

impl std::fmt::Display for FabricError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FabricError::Invalid(m) => write!(f, "{m}"),
            FabricError::Unavailable(m) => write!(f, "fabric unavailable: {m}"),
            FabricError::PermissionDenied(m) => write!(f, "permission denied: {m}"),
            FabricError::Refused { message, .. } => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for FabricError {}

/// Result of a fabric call.
pub type FabricResult<T> = Result<T, FabricError>;

/// The operations of one multi-key transaction (see `whip_board::Command::KvTxn`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnOps {
    /// `(key, expected revision)`; 0 = absent.
    pub compares: Vec<(Vec<u8>, u64)>,
    /// Keys written once every compare passed.
    pub puts: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keys deleted once every compare passed.
    pub deletes: Vec<Vec<u8>>,
}

/// How a [`TxnOps`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnResult {
    /// Applied; every put key has revision `fence`.
    Committed {
        /// The fence of the commit.
        fence: u64,
    },
    /// A compare failed; nothing changed.
    Failed {
        /// The key that did not match.
        key: Vec<u8>,
        /// Its current revision.
        current: u64,
    },
}

/// A lease request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRequest {
    /// Which lease.
    pub lease: ResourceId,
    /// The holder (an instance id).
    pub holder: String,
    /// Declared slots.
    pub slots: u32,
    /// Time to live of a grant.
    pub ttl_ms: u64,
    /// How long to queue when full (0 = do not wait).
    pub wait_ms: u64,
}

/// A counter consume request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumeRequest {
    /// Which counter.
    pub counter: ResourceId,
    /// How much to spend.
    pub amount: u64,
    /// Cap per period.
    pub cap: u64,
    /// Reset period.
    pub reset: Reset,
    /// IANA zone of the period.
    pub timezone: String,
}

/// A ledger append request (`ledger.key` is the partition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendRequest {
    /// Which ledger and partition.
    pub ledger: ResourceId,
    /// Entry bytes (JSON).
    pub entry: Vec<u8>,
    /// The appender (an instance id).
    pub appended_by: String,
    /// Retention.
    pub retain_ms: u64,
}

/// How a claimed task is settled (see [`FabricClient::board_settle`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settle {
    /// Done, with its result bytes.
    Complete {
        /// The result.
        result: Vec<u8>,
    },
    /// Given back unfinished (no failure recorded).
    Release,
    /// The claim's window moved to now + `by_ms` (never backward).
    Extend {
        /// New window from now.
        by_ms: u64,
    },
}

/// How a registry call ended, as the engine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkAnswer {
    /// Registered: the new entry's id.
    Admitted {
        /// The entry.
        id: String,
    },
    /// An admission limit refused it.
    Refused {
        /// `fabric`, `cell`, `depth` or `children`.
        limit: String,
        /// The limit with its numbers.
        reason: String,
    },
    /// Renewed: the signal in force.
    Renewed {
        /// `run`, `pause` or `stop`.
        signal: whip_board::work::Signal,
    },
    /// Revoked.
    Revoked,
    /// The entry is gone (lapsed, revoked, never registered).
    Gone,
}

/// How a mail send ended, as the engine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MailAnswer {
    /// In the mailbox.
    Delivered {
        /// The message's id (`{address}#{seq}`).
        id: String,
        /// How far the recipient may rely on it.
        trust: whip_board::mail::Trust,
    },
    /// Refused by the mailbox's cell.
    Refused {
        /// The refusal's stable code (`not_authorized`, `mailbox_full`, …).
        reason: String,
        /// Its text.
        message: String,
    },
}

/// How opening a proposal ended, as the engine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoteAnswer {
    /// Open.
    Opened {
        /// Its id (`{team}#{fence}`).
        proposal: String,
        /// When it closes at the latest.
        closes_at_ms: u64,
    },
    /// Refused by the team's cell.
    Refused {
        /// The refusal's stable code (`not_coordinator`, `unknown_team`, …).
        reason: String,
        /// Its text.
        message: String,
    },
}

/// How a board write ended, as the engine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoardAnswer {
    /// Claimed (or the worker's own claim re-entered).
    Claimed {
        /// The task as claimed.
        task: TaskView,
        /// The claim's fence.
        fence: u64,
        /// When the claim lapses.
        deadline_ms: u64,
    },
    /// Completed, released or extended.
    Settled {
        /// The claim's new deadline after an extension (0 otherwise).
        deadline_ms: u64,
    },
    /// Refused: `reason` is the stable snake_case name (`taken`, `stale_fence`, …).
    Refused {
        /// The reason's name.
        reason: String,
        /// What happened, for people.
        message: String,
    },
}

impl BoardAnswer {
    fn refused(reason: &whip_board::BoardRefusal) -> BoardAnswer {
        BoardAnswer::Refused {
            reason: reason.code().to_string(),
            message: reason.to_string(),
        }
    }
}

/// The engine's view of the store. Every write takes an idempotency key: a retry with the
/// same key returns the recorded outcome and applies once.
pub trait FabricClient: Send + Sync + 'static {
    /// A client of the same store whose calls act as `agent` (the owner of an instance this
    /// process drives). The server decides who may: the operator or a node for any agent,
    /// an agent only for itself (`whip_board::access::acting_for`).
    fn acting_for(&self, agent: &str) -> Self
    where
        Self: Sized;
    /// One row of the engine's instance state (`whip_board::instance`): refused
    /// `not_authorized` unless the caller owns or operates its instance.
    fn engine_get(
        &self,
        key: Vec<u8>,
    ) -> impl Future<Output = FabricResult<Option<KvEntry>>> + Send;
    /// An atomic transaction over engine rows; the first commit of an instance makes the
    /// caller its owner.
    fn engine_txn(
        &self,
        ops: TxnOps,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<TxnResult>> + Send;
    /// Engine rows starting with `prefix` after `after_key`, at most `limit`, of the
    /// instances the caller may operate; a page that stopped early says where the next
    /// starts (`KvPage::resume_after`).
    fn engine_range(
        &self,
        prefix: Vec<u8>,
        after_key: Vec<u8>,
        limit: u32,
    ) -> impl Future<Output = FabricResult<KvPage>> + Send;
    /// Wait until the cell holding `key`'s rows applies past `after` (0: answer at once),
    /// or `timeout_ms` passes, and answer its applied index: what the next wait takes as
    /// `after`, after the caller read what it waits on. `None`: nothing here can wake the
    /// caller (a node hosting no member of the cell), which then waits by time.
    fn wait_change(
        &self,
        key: Vec<u8>,
        after: u64,
        timeout_ms: u64,
    ) -> impl Future<Output = FabricResult<Option<u64>>> + Send;
    /// One CAS key.
    fn kv_get(&self, key: Vec<u8>) -> impl Future<Output = FabricResult<Option<KvEntry>>> + Send;
    /// An atomic multi-key transaction.
    fn kv_txn(
        &self,
        ops: TxnOps,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<TxnResult>> + Send;
    /// Keys starting with `prefix` and greater than `after_key`, at most `limit` (one page:
    /// see `KvPage::resume_after`).
    fn kv_range(
        &self,
        prefix: Vec<u8>,
        after_key: Vec<u8>,
        limit: u32,
    ) -> impl Future<Output = FabricResult<KvPage>> + Send;
    /// Take a lease slot: `LeaseHeld`, `LeaseContended` or `LeaseWaiting`.
    fn lease_acquire(
        &self,
        request: LeaseRequest,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<Outcome>> + Send;
    /// Extend a held slot: `LeaseRenewed` or `LeaseNotHeld`.
    fn lease_renew(
        &self,
        lease: ResourceId,
        holder: String,
        ttl_ms: u64,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<Outcome>> + Send;
    /// Give a slot back: `LeaseReleased` or `LeaseNotHeld`.
    fn lease_release(
        &self,
        lease: ResourceId,
        holder: String,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<Outcome>> + Send;
    /// Give back every slot of `holder`: `LeaseReleasedAll`.
    fn lease_release_all(
        &self,
        holder: String,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<Outcome>> + Send;
    /// Spend from a counter: `CounterOk` or `CounterOver`.
    fn counter_consume(
        &self,
        request: ConsumeRequest,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<Outcome>> + Send;
    /// Append to a ledger: `LedgerAppended`.
    fn ledger_append(
        &self,
        request: AppendRequest,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<Outcome>> + Send;
    /// Live leases whose `owner/name` starts with `prefix`.
    fn lease_list(
        &self,
        prefix: String,
    ) -> impl Future<Output = FabricResult<Vec<LeaseView>>> + Send;
    /// Counters whose `owner/name` starts with `prefix`.
    fn counter_list(
        &self,
        prefix: String,
    ) -> impl Future<Output = FabricResult<Vec<CounterView>>> + Send;
    /// Create board team `team` (a tracker's reserved team: anyone may create it again).
    fn team_ensure(&self, team: String) -> impl Future<Output = FabricResult<()>> + Send;
    /// Post a task to the team's board; the new task's id.
    fn board_post(
        &self,
        team: String,
        body: Vec<u8>,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<String>> + Send;
    /// Claim one named task for `worker` for `claim_ms` (re-entry when it holds it).
    fn board_claim_task(
        &self,
        team: String,
        task_id: String,
        worker: String,
        claim_ms: u64,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<BoardAnswer>> + Send;
    /// Complete, release or extend the claim with `fence` on a task.
    fn board_settle(
        &self,
        team: String,
        task_id: String,
        fence: u64,
        settle: Settle,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<BoardAnswer>> + Send;
    /// One task of the team's board.
    fn board_get(
        &self,
        team: String,
        task_id: String,
    ) -> impl Future<Output = FabricResult<Option<TaskView>>> + Send;
    /// Tasks of the team's board in post order, all or in one state, at most `limit`.
    fn board_list(
        &self,
        team: String,
        state: Option<TaskState>,
        limit: u32,
    ) -> impl Future<Output = FabricResult<Vec<TaskView>>> + Send;
    /// Register a work entry of `kind` (under `parent`) for `ttl_ms`.
    fn work_register(
        &self,
        kind: whip_board::work::WorkKind,
        parent: Option<String>,
        ttl_ms: u64,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<WorkAnswer>> + Send;
    /// Renew entry `id` for `ttl_ms`: `Renewed` with the signal in force, or `Gone`.
    fn work_renew(
        &self,
        id: String,
        ttl_ms: u64,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<WorkAnswer>> + Send;
    /// Remove entry `id` and its subtree: `Revoked` or `Gone`.
    fn work_revoke(
        &self,
        id: String,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<WorkAnswer>> + Send;
    /// Deliver a message as the caller (the server stamps it as the sender).
    fn mail_send(
        &self,
        to: whip_board::mail::Address,
        kind: whip_board::mail::MailType,
        body: whip_board::mail::MailBody,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<MailAnswer>> + Send;
    /// Deliverable messages of `address` after `after_seq`, at most `limit`, in order.
    fn mail_inbox(
        &self,
        address: whip_board::mail::Address,
        after_seq: u64,
        limit: u32,
    ) -> impl Future<Output = FabricResult<Vec<whip_board::mail::MailView>>> + Send;
    /// Take the messages of `address` through `through_seq` out of it.
    fn mail_ack(
        &self,
        address: whip_board::mail::Address,
        through_seq: u64,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<()>> + Send;
    /// Open a proposal in `team` as the caller (a coordinator of the team).
    fn vote_open(
        &self,
        team: String,
        rules: whip_board::vote::Rules,
        idempotency_key: String,
    ) -> impl Future<Output = FabricResult<VoteAnswer>> + Send;
    /// The proposal `proposal`, with its result once closed; `None` when there is none.
    fn vote_show(
        &self,
        proposal: String,
    ) -> impl Future<Output = FabricResult<Option<whip_board::vote::ProposalView>>> + Send;
    /// Entries of one ledger (one partition or all) after `after_seq`.
    fn ledger_list(
        &self,
        owner: String,
        name: String,
        partition: Option<String>,
        after_seq: u64,
        limit: u32,
    ) -> impl Future<Output = FabricResult<Vec<LedgerEntryView>>> + Send;
}
