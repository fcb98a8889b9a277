//! Commands, outcomes and stamps: the public vocabulary of the state machine.

use serde::{Deserialize, Serialize};

/// The leader's stamp on one command: where it sits in the log and what time it is.
///
/// `index` is the Raft log index of the entry, `position` the command's place inside the
/// entry's batch, `time_ms` the leader's monotonic wall clock when it proposed the entry
/// (milliseconds since the Unix epoch). Apply never reads a clock: every deadline is
/// compared with `time_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp {
    /// Raft log index of the entry carrying the command.
    pub index: u64,
    /// Position of the command inside the entry's batch.
    pub position: u32,
    /// Leader time in milliseconds since the Unix epoch.
    pub time_ms: u64,
}

impl Stamp {
    /// The fence granted by this command: strictly increasing over the log, since it packs
    /// the entry index above the batch position (`index << 16 | position`).
    pub fn fence(&self) -> u64 {
        debug_assert!(self.position < crate::limits::BATCH_COMMANDS_MAX);
        (self.index << 16) | u64::from(self.position)
    }
}

/// Who a coordination resource belongs to, and its name: `local/Ship::deploy_slot/prod`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceId {
    /// `local/<Workflow>`, `shared`, or any caller-chosen namespace.
    pub owner: String,
    /// The declared resource name (lease, counter or ledger name).
    pub name: String,
    /// The key value (a lease key, a counter key, a ledger partition).
    pub key: String,
}

/// When a counter's consumption resets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reset {
    /// At the top of each local hour.
    Hourly,
    /// At local midnight.
    Daily,
    /// At local midnight starting an ISO week (Monday).
    Weekly,
    /// At local midnight on the first of the month.
    Monthly,
}

/// A mutating command with its idempotency key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Idempotency key (client id + sequence, or an engine effect id). A retry with the same
    /// key inside the idempotency window returns the first recorded outcome and applies once.
    pub idempotency_key: Option<String>,
    /// The command itself.
    pub command: Command,
}

/// Everything that can change the state machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Write `value` under `key` if the key's version equals `expect_version`
    /// (`Some(0)` = the key must be absent, `None` = unconditional).
    KvPut { key: Vec<u8>, value: Vec<u8>, expect_version: Option<u64> },
    /// Delete `key` if its version equals `expect_version` (`None` = unconditional).
    KvDelete { key: Vec<u8>, expect_version: Option<u64> },
    /// Take one of `slots` slots of a lease for `holder`, for `ttl_ms` from the stamp.
    /// With `wait_ms > 0` a full lease queues the holder FIFO until `stamp + wait_ms`.
    LeaseAcquire { lease: ResourceId, holder: String, slots: u32, ttl_ms: u64, wait_ms: u64 },
    /// Move the holder's deadline to `stamp + ttl_ms` (never backward).
    LeaseRenew { lease: ResourceId, holder: String, ttl_ms: u64 },
    /// Give back the holder's slot (and drop it from the wait queue).
    LeaseRelease { lease: ResourceId, holder: String },
    /// Release every slot and wait-queue place of `holder`, in any lease.
    LeaseReleaseAll { holder: String },
    /// Spend `amount` of a counter capped at `cap` per period.
    CounterConsume { counter: ResourceId, amount: u64, cap: u64, reset: Reset, timezone: String },
    /// Append an entry to a ledger partition (`counter.key` is the partition).
    LedgerAppend { ledger: ResourceId, entry: Vec<u8>, appended_by: String, retain_ms: u64 },
    /// Process every deadline that is due at the stamp (lease expiry, waiter expiry,
    /// ledger retention, idempotency-window pruning), at most `limits::TICK_WORK_MAX` items.
    Tick,
}

/// The business result of one command. Codes are stable and mirrored in proto.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// A key was written; `version` is the key's modification revision (= `fence`).
    KvWritten { version: u64, fence: u64 },
    /// A key was deleted; `version` was its revision before the delete.
    KvDeleted { version: u64 },
    /// The expected version did not match; `current` is the key's revision (0 = absent).
    KvVersionMismatch { current: u64 },
    /// The holder holds a slot (new grant or re-entry).
    LeaseHeld { fence: u64, expires_at_ms: u64, reentered: bool },
    /// The lease is full and the caller did not wait, or its wait ran out.
    LeaseContended { holders: Vec<LeaseHolder> },
    /// The lease is full and the holder is queued at `position` (0 = next).
    LeaseWaiting { position: u32, wait_until_ms: u64 },
    /// The holder's deadline is now `expires_at_ms`.
    LeaseRenewed { fence: u64, expires_at_ms: u64 },
    /// The holder's slot (or queue place) was given back.
    LeaseReleased,
    /// The holder held nothing on this lease.
    LeaseNotHeld,
    /// `released` slots and queue places of one holder were given back.
    LeaseReleasedAll { released: u32 },
    /// The counter was charged.
    CounterOk { consumed: u64, remaining: u64, period: String },
    /// Charging would pass the cap; nothing was charged.
    CounterOver { consumed: u64, remaining: u64, period: String },
    /// The entry was appended at `seq` (gap-free per partition, from 1).
    LedgerAppended { seq: u64 },
    /// A tick processed `processed` due items.
    Ticked { processed: u32 },
    /// The command was refused as invalid; nothing changed.
    Invalid { reason: String },
}

/// One live holder of a lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseHolder {
    /// The holder's identity (an instance id, a worker name).
    pub holder: String,
    /// The fence of its grant.
    pub fence: u64,
    /// When the slot expires unless renewed.
    pub expires_at_ms: u64,
}
