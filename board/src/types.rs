//! Commands, outcomes and stamps: the public vocabulary of the state machine.

pub use crate::vocab::lease::ResourceId;
use serde::{Deserialize, Serialize};

/// The leader's stamp on one command: where it sits in the log and what time it is.
///
/// `index` is the Raft log index of the entry, `position` the first fence position of the
/// command inside the entry's batch (its place times `FENCES_PER_COMMAND`,
/// [`Stamp::of_request`]), `time_ms` the leader's monotonic wall clock when it proposed
/// the entry (milliseconds since the Unix epoch). Apply never reads a clock: every deadline is
/// compared with `time_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp {
    /// Raft log index of the entry carrying the command.
    pub index: u64,
    /// The command's first fence position inside the entry's batch.
    pub position: u32,
    /// Leader time in milliseconds since the Unix epoch.
    pub time_ms: u64,
}

impl Stamp {
    /// The fence granted by this command: strictly increasing over the log, since it packs
    /// the entry index above the batch position (`index << 16 | position`).
    pub fn fence(&self) -> u64 {
        // Release builds too: a position past 16 bits would hand out a fence twice.
        assert!(
            self.position < crate::limits::BATCH_COMMANDS_MAX,
            "batch position {} does not fit the fence's 16 bits",
            self.position
        );
        (self.index << 16) | u64::from(self.position)
    }

    /// The stamp of request `request` of entry `index`: each request owns
    /// [`FENCES_PER_COMMAND`](crate::limits::FENCES_PER_COMMAND) fence positions.
    pub fn of_request(index: u64, request: u32, time_ms: u64) -> Self {
        Stamp {
            index,
            position: request * crate::limits::FENCES_PER_COMMAND,
            time_ms,
        }
    }

    /// The `k`-th fence this command grants (`k = 0` is [`Stamp::fence`]): a command that
    /// hands out several claims gives each its own. Panics when `k` is not below
    /// [`FENCES_PER_COMMAND`](crate::limits::FENCES_PER_COMMAND): the next request's
    /// fences start there.
    pub fn nth_fence(&self, k: u32) -> u64 {
        assert!(
            k < crate::limits::FENCES_PER_COMMAND,
            "fence {k} of one command is past its {} positions",
            crate::limits::FENCES_PER_COMMAND
        );
        Stamp {
            position: self.position + k,
            ..*self
        }
        .fence()
    }
}

/// When a counter's consumption resets.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(remote = "Self")]
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

crate::codes::stable_codes! {
    Reset {
        0 => Hourly,
        1 => Daily,
        2 => Weekly,
        3 => Monthly,
    }
}

/// A mutating command with its idempotency key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Idempotency key (client id + sequence, or an engine effect id). A retry with the same
    /// key inside the idempotency window returns the first recorded outcome and applies once.
    pub idempotency_key: Option<String>,
    /// The command itself.
    pub command: Command,
    /// The range epoch the router saw for the command's point (0 = not routed). A cell in
    /// a fabric runs a keyed command only when this matches the epoch of its range.
    pub epoch: u64,
    /// Who the request acts for, as the server proved it ([`crate::access`]). Only
    /// [`Request::server`] sets `Server`.
    pub caller: crate::vocab::access::Caller,
}

impl Request {
    /// A request of the operator that is not routed (a standalone cell, or a command every
    /// cell runs).
    pub fn new(idempotency_key: Option<String>, command: Command) -> Self {
        Request::by(
            crate::vocab::access::Caller::Operator,
            idempotency_key,
            command,
        )
    }

    /// A request for `caller`, as the server proved it.
    pub fn by(
        caller: crate::vocab::access::Caller,
        idempotency_key: Option<String>,
        command: Command,
    ) -> Self {
        Request {
            idempotency_key,
            command,
            epoch: 0,
            caller,
        }
    }

    /// A request a server makes on its own behalf (ticks, fabric administration, handoffs,
    /// identity rows): the only way to reach reserved state and server-only commands.
    pub fn server(idempotency_key: Option<String>, command: Command) -> Self {
        Request::by(
            crate::vocab::access::Caller::Server,
            idempotency_key,
            command,
        )
    }
}

/// Everything that can change the state machine.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Command {
    /// Write `value` under `key` if the key's version equals `expect_version`
    /// (`Some(0)` = the key must be absent, `None` = unconditional).
    KvPut {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The bytes to store.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// The version the key must have (`Some(0)` = absent, `None` = any).
        expect_version: Option<u64>,
    },
    /// Delete `key` if its version equals `expect_version` (`None` = unconditional).
    KvDelete {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The version the key must have (`None` = any).
        expect_version: Option<u64>,
    },
    /// Take one of `slots` slots of a lease for `holder`, for `ttl_ms` from the stamp.
    /// With `wait_ms > 0` a full lease queues the holder FIFO until `stamp + wait_ms`.
    LeaseAcquire {
        /// Which lease.
        lease: ResourceId,
        /// Who takes the slot.
        holder: String,
        /// Declared slots of the lease.
        slots: u32,
        /// Time to live of the slot from the stamp.
        ttl_ms: u64,
        /// How long to queue when the lease is full (0 = do not wait).
        wait_ms: u64,
    },
    /// Move the holder's deadline to `stamp + ttl_ms` (never backward).
    LeaseRenew {
        /// Which lease.
        lease: ResourceId,
        /// The current holder.
        holder: String,
        /// New time to live from the stamp.
        ttl_ms: u64,
    },
    /// Give back the holder's slot (and drop it from the wait queue).
    LeaseRelease {
        /// Which lease.
        lease: ResourceId,
        /// The holder or waiter.
        holder: String,
    },
    /// Release every slot and wait-queue place of `holder`, in any lease.
    LeaseReleaseAll {
        /// The holder or waiter.
        holder: String,
    },
    /// Spend `amount` of a counter capped at `cap` per period.
    CounterConsume {
        /// Which counter.
        counter: ResourceId,
        /// How much to spend (0 reads the period without charging).
        amount: u64,
        /// Most that may be consumed in one period.
        cap: u64,
        /// When consumption resets.
        reset: Reset,
        /// IANA time zone anchoring the period (e.g. `America/New_York`).
        timezone: String,
    },
    /// Append an entry to a ledger partition (`counter.key` is the partition).
    LedgerAppend {
        /// Which ledger; `key` is the partition.
        ledger: ResourceId,
        /// The entry bytes.
        #[serde(with = "serde_bytes")]
        entry: Vec<u8>,
        /// Identity of the appender.
        appended_by: String,
        /// How long the entry is kept after its append.
        retain_ms: u64,
    },
    /// Process every deadline that is due at the stamp (lease expiry, waiter expiry,
    /// ledger retention, idempotency-window pruning, election terms), at most
    /// `limits::TICK_WORK_MAX` items.
    Tick,
    /// Compare several CAS keys and, when every compare passes, apply every put and delete
    /// atomically with one fence (all written keys get the same new revision). A failed
    /// compare changes nothing. A key may not be both put and deleted.
    KvTxn {
        /// `(key, expected revision)`; 0 = the key must be absent.
        compares: Vec<(Vec<u8>, u64)>,
        /// `(key, value)` written unconditionally once the compares pass.
        #[serde(with = "pairs_as_bytes")]
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        /// Keys deleted once the compares pass (absent keys are skipped).
        deletes: Vec<Vec<u8>>,
    },
    /// Take ownership of ring range `[start, last]` at `epoch` (fabric mode); every fence
    /// granted afterwards is above `fence_above` (the previous owner's high-water mark).
    RangeAssign {
        /// First point of the range.
        start: u64,
        /// Last point of the range (inclusive).
        last: u64,
        /// The range's epoch (> 0).
        epoch: u64,
        /// Fences granted from now on exceed this.
        fence_above: u64,
    },
    /// `RangeAssign` at the end of a move: also raises the cell's time floor to the time of
    /// the range's freeze at its source (`crate::range::shift`), so the range's stamps never
    /// go back when the target's clock is behind the source's.
    RangeAssignAt {
        /// First point of the range.
        start: u64,
        /// Last point of the range (inclusive).
        last: u64,
        /// The range's epoch (> 0).
        epoch: u64,
        /// Fences granted from now on exceed this.
        fence_above: u64,
        /// Stamps from now on are at least this (the source's `RangeFrozenAt.time_ms`).
        time_above_ms: u64,
    },
    /// Stop serving owned range `[start, last]` and move it to `epoch` (a move begins).
    RangeFreeze {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// The new epoch (above the current one).
        epoch: u64,
    },
    /// Cut owned range `[start, last]` at `at` (first point of the upper half); both halves
    /// get `epoch`.
    RangeSplit {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// First point of the upper half.
        at: u64,
        /// The new epoch of both halves.
        epoch: u64,
    },
    /// Write rows exported from another cell's frozen range.
    RangeImport {
        /// Raw stored rows.
        #[serde(with = "pairs_as_bytes")]
        rows: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Delete the rows of frozen range `[start, last]` (a bounded amount per command) and,
    /// once none is left, forget the range.
    RangeDrop {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
    },
    /// Become the leader of `group` for `ttl_ms` from the stamp when it has no live leader;
    /// the leader campaigning again keeps its fence and extends its deadline (never
    /// backward). Either way the leader's endpoints become `endpoints`.
    Campaign {
        /// The election group.
        group: String,
        /// Who campaigns (an instance id).
        candidate: String,
        /// Where the candidate can be reached once it leads (`host:port`, URLs).
        endpoints: Vec<String>,
        /// Time to live of the leadership from the stamp.
        ttl_ms: u64,
    },
    /// The leader of `group` with `fence` replaces its published endpoints.
    Proclaim {
        /// The election group.
        group: String,
        /// The leader.
        candidate: String,
        /// The fence of its election.
        fence: u64,
        /// The new endpoints.
        endpoints: Vec<String>,
    },
    /// The leader of `group` with `fence` steps down; its endpoints are withdrawn.
    Resign {
        /// The election group.
        group: String,
        /// The leader.
        candidate: String,
        /// The fence of its election.
        fence: u64,
    },
    /// Move the deadline of the leader of `group` with `fence` to `stamp + ttl_ms` (never
    /// backward).
    ElectionRenew {
        /// The election group.
        group: String,
        /// The leader.
        candidate: String,
        /// The fence of its election.
        fence: u64,
        /// New time to live from the stamp.
        ttl_ms: u64,
    },
    /// Claim the firing of schedule `name` at its due time `due_ms`: the first claim of a
    /// due time fires, every later claim of it (or of an older one) learns who fired.
    ScheduleFire {
        /// The schedule's name (the dedup key).
        name: String,
        /// Cron spec (`m h dom mon dow`, `@daily`, `@every 30s`).
        spec: String,
        /// IANA time zone the spec is read in (e.g. `America/New_York`).
        timezone: String,
        /// The due time claimed (ms since the Unix epoch); must be a due time of the spec.
        /// 0: the latest due time at or before the apply's stamp.
        due_ms: u64,
        /// Who claims the firing.
        claimant: String,
    },
    /// Create team `team` with `caller` as its supervisor and first member. Creating an
    /// existing team again with the same caller changes nothing and succeeds.
    TeamCreate {
        /// The team's name (its board routes by it).
        team: String,
        /// The creating agent, resolved by the server from the authenticated call.
        caller: String,
        /// The parent team, if any (recorded; the server checks the caller's lineage).
        parent: Option<String>,
        /// Members of every ancestor team, read by the server along the parent chain; they
        /// may act on this team's board too.
        ancestors: Vec<String>,
        /// The team board's settings (fixed at creation).
        settings: BoardSettings,
    },
    /// A member (or ancestor member) adds `agent` to the team.
    TeamJoin {
        /// The team.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The agent joining.
        agent: String,
    },
    /// The supervisor dissolves the team: from the first call on the team refuses new
    /// work, and each call deletes a bounded part of its board; repeat until `done`.
    TeamDissolve {
        /// The team.
        team: String,
        /// The acting agent, resolved by the server (must be the supervisor).
        caller: String,
    },
    /// Post a task to the team's local board (there is no way to post above local).
    BoardPost {
        /// The team.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The task's bytes (at most the team's `task_bytes_max`).
        #[serde(with = "serde_bytes")]
        body: Vec<u8>,
    },
    /// Claim the oldest ready task of the team's local board, else of this cell's cell-tier
    /// board, for `reclaim_ms` of the task's team settings.
    BoardClaim {
        /// The team.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The worker that will run the task.
        worker: String,
    },
    /// Claim one named task of the team's board: a ready task (or one whose claim window
    /// passed, which is redelivered first), or the worker's own live claim again (re-entry:
    /// same fence, the window pushed out). The window is `claim_ms` (0 = the team's
    /// `reclaim_ms`).
    BoardClaimTask {
        /// The team.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The worker that will run the task.
        worker: String,
        /// The task.
        task_id: String,
        /// This claim's window (0 = the team's `reclaim_ms`).
        claim_ms: u64,
    },
    /// Give a claimed task back unfinished, without recording a failure: ready again at
    /// its tier (the delivery still counts toward the limit).
    BoardRelease {
        /// The team the task was claimed through.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The task.
        task_id: String,
        /// The fence of the claim.
        fence: u64,
    },
    /// Complete a claimed task; refused unless `fence` is its live claim's fence.
    BoardComplete {
        /// The team the task was claimed through.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The task.
        task_id: String,
        /// The fence of the claim.
        fence: u64,
        /// The result bytes (kept with the done task).
        #[serde(with = "serde_bytes")]
        result: Vec<u8>,
    },
    /// Give a claimed task back as failed: ready again, or dead-lettered at its delivery
    /// limit.
    BoardFail {
        /// The team the task was claimed through.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The task.
        task_id: String,
        /// The fence of the claim.
        fence: u64,
        /// What went wrong (kept in the task's failure metadata).
        error: String,
    },
    /// Move a live claim's deadline to `stamp + extend_ms` (never backward).
    BoardExtend {
        /// The team the task was claimed through.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The task.
        task_id: String,
        /// The fence of the claim.
        fence: u64,
        /// New time to live of the claim from the stamp.
        extend_ms: u64,
    },
    /// Put a dead-lettered task of the team back to ready with its delivery count reset.
    BoardRedrive {
        /// The task's team.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The task.
        task_id: String,
    },
    /// Queue a sealed envelope to `to_cell` carrying cell-tier task `task_id`, taking the
    /// task off the cell tier in the same apply (cell-internal; see `handoff`).
    HandoffSend {
        /// The receiving cell.
        to_cell: u64,
        /// The envelope's channel sequence (must be the outbox's next).
        seq: u64,
        /// The previous envelope's hash (must be the outbox's last).
        #[serde(with = "serde_bytes")]
        prev_hash: Vec<u8>,
        /// The envelope's hash.
        #[serde(with = "serde_bytes")]
        hash: Vec<u8>,
        /// The signed envelope.
        #[serde(with = "serde_bytes")]
        envelope: Vec<u8>,
        /// The task it carries.
        task_id: String,
        /// The task's delivery count when the envelope was sealed.
        delivery_count: u32,
    },
    /// Spill due cell-tier task `task_id` onto its team's fabric queue when the queue lives
    /// on this same cell: one apply takes it off the cell tier and puts it on the queue (no
    /// envelope: no channel runs from a cell to itself). Answered `HandoffAccepted` with
    /// sequence 0, or `HandoffSkipped` when the task changed or is not due.
    HandoffLocal {
        /// The task.
        task_id: String,
        /// The task's delivery count when the mover saw it.
        delivery_count: u32,
    },
    /// The receiver has everything up to `seq` on the channel to `to_cell`.
    HandoffAck {
        /// The receiving cell.
        to_cell: u64,
        /// The highest sequence it applied.
        seq: u64,
    },
    /// Apply an envelope from `from_cell` (verified by the node) if it extends the chain.
    HandoffReceive {
        /// The sending cell.
        from_cell: u64,
        /// Its channel sequence.
        seq: u64,
        /// The previous hash it names.
        #[serde(with = "serde_bytes")]
        prev_hash: Vec<u8>,
        /// Its hash.
        #[serde(with = "serde_bytes")]
        hash: Vec<u8>,
        /// The fabric queue the task joins.
        queue: String,
        /// The task.
        task: Box<TaskView>,
        /// The origin team's board settings.
        settings: BoardSettings,
        /// Agents admitted to the queue (the origin team's members and ancestors).
        admitted: Vec<String>,
    },
    /// Complete a claimed task and, in the same apply, claim the next one for `worker`: a
    /// worker's loop in one write. A refused completion claims nothing and answers the
    /// refusal; otherwise the answer is the claim's (`TaskClaimed` or `BoardEmpty`).
    BoardCompleteAndClaim {
        /// The board the task lives on (also the one claimed from).
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The task being completed.
        task_id: String,
        /// Its live claim's fence.
        fence: u64,
        /// The result.
        #[serde(with = "serde_bytes")]
        result: Vec<u8>,
        /// Who claims the next task.
        worker: String,
    },
    /// A prefetching worker's loop in one write: complete every claim of `completes` (all
    /// or none: one refused completion changes nothing and answers its refusal), then claim
    /// up to `max` ready tasks of the team's board (local tier first, then the cell tier),
    /// each with its own fence and a window of `claim_ms` (0 = the team's `reclaim_ms`).
    BoardClaimMany {
        /// The board the tasks live on (also the one claimed from).
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// Who claims the next tasks.
        worker: String,
        /// Held claims to complete first, in order.
        completes: Vec<Completion>,
        /// Most tasks to claim (0 only completes).
        max: u32,
        /// Each claim's window (0 = the team's `reclaim_ms`).
        claim_ms: u64,
    },
    /// Several handoff sends or receives of one channel, applied in order in one write; the
    /// batch stops at the first item that neither queued, skipped, applied nor repeated.
    HandoffBatch {
        /// `HandoffSend` or `HandoffReceive` commands (no other kind, no nesting).
        commands: Vec<Command>,
    },
    /// Post several tasks to the team's local board at once, all or none.
    BoardPostMany {
        /// The team.
        team: String,
        /// The acting agent, resolved by the server.
        caller: String,
        /// The task bodies, posted in order.
        #[serde(with = "vecs_as_bytes")]
        bodies: Vec<Vec<u8>>,
    },
    /// Delete a bounded part of fabric queue `queue` (the team `~fabric/{queue}` and its
    /// tasks); repeat until `done`. Sent by a server only once the origin team `queue` was
    /// dissolved by its supervisor, so a team's fabric tier goes with its board.
    FabricPurge {
        /// The origin team (the queue's name).
        queue: String,
    },
    /// Record a handoff that could not be made (e.g. the cell has no signing key).
    HandoffFailed {
        /// The task that stays where it is.
        task_id: String,
        /// Why.
        reason: String,
    },
    /// The operator's repair of a poisoned channel: set this (receiving) cell's head of the
    /// channel from `from_cell` to `seq` / `hash`, the sender's view (the last envelope it
    /// knows was delivered), so its next envelope is accepted. Recorded as an alarm.
    HandoffReset {
        /// The sending cell.
        from_cell: u64,
        /// The sequence the sender's next envelope follows.
        seq: u64,
        /// The hash that envelope names as previous.
        #[serde(with = "serde_bytes")]
        hash: Vec<u8>,
    },
    /// Register a work entry for the caller (see [`crate::work`]): a root when `parent`
    /// is `None` (its id is `root`, chosen by the server), else a child of `parent`
    /// (`root` is then the parent's root). Admission is decided here.
    WorkRegister {
        /// The lineage root: the new root's id, or the parent's root.
        root: String,
        /// The parent entry.
        parent: Option<String>,
        /// What the entry stands for.
        kind: crate::vocab::work::WorkKind,
        /// Its resource class.
        class: String,
        /// Its lease.
        ttl_ms: u64,
        /// The agent it runs as (default the caller).
        owner: Option<String>,
        /// Set by a fabric router that retries a refusal for lack of quota after a quota
        /// round: such a refusal is not audited (the retry's outcome is).
        quota_retry: bool,
    },
    /// Renew an entry's lease; the answer carries the signal in force.
    WorkRenew {
        /// The entry.
        id: String,
        /// The lease from now.
        ttl_ms: u64,
    },
    /// Set an entry's supervision signal (its parent's or an ancestor's owner only).
    WorkSignal {
        /// The entry.
        id: String,
        /// The signal.
        signal: crate::vocab::work::Signal,
    },
    /// Change an entry's resource class and/or budget (its parent's or an ancestor's owner
    /// only).
    WorkScope {
        /// The entry.
        id: String,
        /// The new resource class.
        class: Option<String>,
        /// The new budget (what the entry may spend; its owner's tools read it).
        budget: Option<u64>,
    },
    /// Remove an entry and its subtree (its parent's or an ancestor's owner only).
    WorkRevoke {
        /// The entry.
        id: String,
    },
    /// The operator changes the admission limits (sent to every cell).
    WorkLimitsSet {
        /// What changes.
        update: crate::vocab::work::LimitsUpdate,
    },
    /// On the meta cell: lend `cell` a quota of up to `want` entries of the ceiling.
    WorkQuotaLend {
        /// The borrowing cell.
        cell: u64,
        /// The quota it would like.
        want: u64,
        /// The grant's lease.
        ttl_ms: u64,
    },
    /// On the meta cell: lend `cell` a quota of up to `want` entries of the ceiling, as
    /// `WorkQuotaLend`, knowing it holds `live` entries (the grant counts for at least
    /// that many until one that fits them is confirmed).
    WorkQuotaAsk {
        /// The borrowing cell.
        cell: u64,
        /// The quota it would like.
        want: u64,
        /// The live entries it holds.
        live: u64,
        /// The grant's lease.
        ttl_ms: u64,
    },
    /// On a data cell a move takes work entries from, before the drop: refuse every grant
    /// the meta cell lent at or before `version` (the lend of the move's target that
    /// reported the entries it took).
    WorkQuotaFloor {
        /// The target's lend.
        version: u64,
    },
    /// On the meta cell: `cell` installed grant `version`.
    WorkQuotaAck {
        /// The cell.
        cell: u64,
        /// The grant it installed.
        version: u64,
    },
    /// On a data cell: install a grant the meta cell lent it.
    WorkQuotaInstall {
        /// The grant.
        quota: crate::vocab::work::Quota,
        /// Its lease (bounds the expiry by this cell's clock too).
        ttl_ms: u64,
    },
    /// Revoke agent `agent`'s identity (its token stops working) if `by` enrolled it.
    AgentRevoke {
        /// The agent.
        agent: String,
        /// Who revokes it.
        by: String,
    },
    /// Register agent `agent` for the request's caller (`crate::register`): the operator
    /// registers, an agent enrolls another, an agent re-registering itself is a no-op.
    AgentRegister {
        /// The agent's name.
        agent: String,
        /// `register::token_proof` of its token (the token never enters the log).
        proof: [u8; 32],
        /// A fresh salt for its record.
        salt: [u8; 32],
    },
    /// Remove `agent` from every team this cell keeps (after its identity was revoked).
    TeamLeaveAll {
        /// The agent.
        agent: String,
    },
    /// Deliver a message from the request's caller ([`crate::mail`]): the sender is never a
    /// field.
    MailSend {
        /// The mailbox.
        to: crate::vocab::mail::Address,
        /// Its type (a `notice` only from a server).
        kind: crate::vocab::mail::MailType,
        /// What it says.
        body: crate::vocab::mail::MailBody,
        /// The server's external validator's answer (set by the server that called it).
        external: Option<crate::vocab::mail::ExternalScreen>,
    },
    /// Several messages from one sender to one mailbox in one write, sent in order; each is
    /// delivered or refused on its own, as that many sends would be.
    MailSendMany {
        /// The mailbox.
        to: crate::vocab::mail::Address,
        /// The messages, in order.
        sends: Vec<crate::vocab::mail::MailItem>,
    },
    /// A reader took the mailbox's messages through `through_seq`.
    MailAck {
        /// The mailbox.
        address: crate::vocab::mail::Address,
        /// The last sequence taken.
        through_seq: u64,
    },
    /// A reader acknowledges its mail through `ack_through` and takes the next messages
    /// in one apply; each taken one is hidden from other takes for `visibility_ms`
    /// ([`crate::mail_take`]).
    MailTake {
        /// The mailbox.
        address: crate::vocab::mail::Address,
        /// Acknowledge (remove) every message up to this sequence first.
        ack_through: Option<u64>,
        /// At most this many messages.
        max: u32,
        /// How long the taken messages stay hidden from other takes.
        visibility_ms: u64,
    },
    /// The mailbox's authority allows (or stops) `sender` directing it.
    MailGrant {
        /// The mailbox.
        address: crate::vocab::mail::Address,
        /// The agent allowed or stopped.
        sender: String,
        /// Allow (`true`) or revoke.
        allow: bool,
    },
    /// The mailbox's authority releases a quarantined message (`deliver`) or drops it.
    MailRelease {
        /// The mailbox.
        address: crate::vocab::mail::Address,
        /// The message.
        seq: u64,
        /// Release it into the mailbox (`true`) or drop it.
        deliver: bool,
    },
    /// The team's supervisor (the request's caller) gives a member a role ([`crate::vote`]).
    TeamRole {
        /// The team.
        team: String,
        /// The member.
        member: String,
        /// Its role from now on.
        role: crate::vocab::vote::Role,
    },
    /// A coordinator of the team (the request's caller) opens a proposal.
    VoteOpen {
        /// The team.
        team: String,
        /// Its rules, frozen from now on.
        rules: crate::vocab::vote::Rules,
    },
    /// The request's caller casts a ballot: option names, one, a set or a ranking.
    VoteCast {
        /// The proposal's id.
        proposal: String,
        /// The chosen options.
        choice: Vec<String>,
    },
    /// The opener (the request's caller) closes its proposal before the closing time.
    VoteClose {
        /// The proposal's id.
        proposal: String,
    },
    /// A `KvTxn` over the engine's instance state (`crate::instance`), never over client
    /// keys: every key must be an engine row, and the caller must be allowed to operate
    /// every instance it touches (the instance's owner, or the operator). The first commit
    /// of an instance makes its caller the owner.
    EngineTxn {
        /// `(key, expected revision)`; 0 = the row must be absent.
        compares: Vec<(Vec<u8>, u64)>,
        /// `(key, value)` written once the compares pass.
        #[serde(with = "pairs_as_bytes")]
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        /// Rows deleted once the compares pass (absent rows are skipped).
        deletes: Vec<Vec<u8>>,
    },
    /// Mark this cell as the fabric's meta cell (fabric initialization, a server's own
    /// command): from then on it serves no client's keyed command or read.
    MetaCellMark,
    /// Freeze owned range `[start, last]` at `epoch` for a move to `to_cell`, held for
    /// `RANGE_FREEZE_MS` (the same freeze again renews the hold); a later epoch takes a
    /// stalled move's frozen range over once its hold has passed.
    RangeFreezeTo {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// The new epoch (above the current one).
        epoch: u64,
        /// The move's target cell.
        to_cell: u64,
    },
    /// Begin a move's copy of owned, serving range `[start, last]` to `to_cell` before the
    /// freeze: from now until the freeze the cell records every key of the range it changes
    /// (`crate::range_track`), so the frozen range sends only those. A complete record of
    /// the same range for the same target goes on (a copy under it resumes); any other
    /// record of this cell is forgotten.
    RangeTrack {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// The move's target cell.
        to_cell: u64,
    },
    /// On a move's target, before its copy: delete rows of `[start, last]` left by an
    /// earlier copy that never finished (a bounded amount per command). Refused when the
    /// cell owns any part of the range.
    RangeClear {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
    },
    /// On a move's target: the rows of the frozen range changed since its copy began, each
    /// written (`puts`) or deleted (`deletes`) as the source holds it now.
    RangePatch {
        /// Rows as the source holds them.
        #[serde(with = "pairs_as_bytes")]
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        /// Rows the source no longer holds.
        deletes: Vec<Vec<u8>>,
    },
    /// On a move's source: the target `to_cell` now holds a clean copy of every row of
    /// `[start, last]` up to raw key `after_key` (empty: it was cleared, nothing copied
    /// yet), each read after the record began, so a later driver resumes the copy there.
    /// Answers `RangeTracked` while that record goes on, else `RangeUnknown`.
    RangeCopied {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// The move's target cell.
        to_cell: u64,
        /// The last raw key the target holds a copy of.
        #[serde(with = "serde_bytes")]
        after_key: Vec<u8>,
    },
    /// On a move's source, before its freeze: the target took the recorded keys of
    /// `[start, last]` in `(after_key, through_key]` as the cell held them when its record
    /// had counted `upto_seq` changes (`Query::RangePending`); drop the markers of those not
    /// changed since (`crate::range_track::drained`). Answers `RangeTracked` while the
    /// complete record for `to_cell` goes on, else `RangeUnknown`.
    RangeDrained {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// The move's target cell.
        to_cell: u64,
        /// Only keys greater than this (empty = from the start).
        #[serde(with = "serde_bytes")]
        after_key: Vec<u8>,
        /// Only keys up to this one (inclusive).
        #[serde(with = "serde_bytes")]
        through_key: Vec<u8>,
        /// The record's change count when the page was read.
        upto_seq: u64,
    },
    /// Acknowledge follow-up `seq` of this cell's outbox: it was carried out
    /// (`crate::next`; a server's own command, again a no-op).
    FollowUpDone {
        /// Its sequence number.
        seq: u64,
    },
    /// One range step (`RangeFreezeTo`, `RangeImport`, `RangeAssign[At]`, `RangeDrop`,
    /// `RangeSplit`, `RangeTrack`, `RangeCopied`, `RangeDrained`, `RangeClear`, `RangePatch`)
    /// of the driver holding the range-admin lease granted at `fence`: refused `superseded`
    /// once the cell ran a step of a later holder.
    RangeFenced {
        /// The driver's range-admin lease fence.
        fence: u64,
        /// The step.
        step: Box<Command>,
    },
    /// Write `value` under `key` (at `expect_version` when given, as `KvPut`), attached to
    /// its own deadline or to a lease holder's slot (`crate::ephemeral`): the key is deleted
    /// when the deadline passes or in the apply that frees the slot.
    KvPutAttached {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The bytes to store.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// The version the key must have (`Some(0)` = absent, `None` = any).
        expect_version: Option<u64>,
        /// What the key lives and dies with.
        attach: crate::vocab::kv::KvAttach,
    },
    /// Move the deadline of a key with its own deadline to `stamp + ttl_ms` (never earlier).
    KvKeepalive {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// New time to live from the stamp.
        ttl_ms: u64,
    },
    /// An etcd-like transaction (`crate::kv_txn`): when every compare holds, run `success`,
    /// else `failure`, in one apply.
    KvTxnIf {
        /// Compares on keys' versions or values.
        compares: Vec<crate::vocab::kv::Compare>,
        /// Operations run when every compare holds.
        success: Vec<crate::vocab::kv::TxnOp>,
        /// Operations run otherwise.
        failure: Vec<crate::vocab::kv::TxnOp>,
    },
    /// The request's caller reserves `paths` (patterns, `crate::path_glob`) of `repo` for
    /// `ttl_ms`, each granted or listed with its conflicts (`crate::reservation`).
    PathsReserve {
        /// The repository's name.
        repo: String,
        /// The patterns, relative to the repository's top directory.
        paths: Vec<String>,
        /// Exclusive (`true`) or shared.
        exclusive: bool,
        /// Time to live from the stamp.
        ttl_ms: u64,
        /// A renewal's fence: every path must be the caller's at exactly this fence.
        fence: Option<u64>,
    },
    /// The request's caller releases its reservations of `paths` of `repo` (every one of
    /// its reservations there when empty); with a fence, only those granted at it.
    PathsRelease {
        /// The repository's name.
        repo: String,
        /// The patterns, as reserved; empty = all of the caller's.
        paths: Vec<String>,
        /// The fence the reservations must have.
        fence: Option<u64>,
    },
}

crate::codes::stable_codes! {
    Command {
        0 => KvPut,
        1 => KvDelete,
        2 => LeaseAcquire,
        3 => LeaseRenew,
        4 => LeaseRelease,
        5 => LeaseReleaseAll,
        6 => CounterConsume,
        7 => LedgerAppend,
        8 => Tick,
        9 => KvTxn,
        10 => RangeAssign,
        11 => RangeFreeze,
        12 => RangeSplit,
        13 => RangeImport,
        14 => RangeDrop,
        15 => Campaign,
        16 => Proclaim,
        17 => Resign,
        18 => ElectionRenew,
        19 => ScheduleFire,
        20 => TeamCreate,
        21 => TeamJoin,
        22 => TeamDissolve,
        23 => BoardPost,
        24 => BoardClaim,
        25 => BoardClaimTask,
        26 => BoardRelease,
        27 => BoardComplete,
        28 => BoardFail,
        29 => BoardExtend,
        30 => BoardRedrive,
        31 => HandoffSend,
        32 => HandoffAck,
        33 => HandoffReceive,
        34 => BoardCompleteAndClaim,
        35 => HandoffBatch,
        36 => BoardPostMany,
        37 => FabricPurge,
        38 => HandoffFailed,
        39 => HandoffReset,
        40 => WorkRegister,
        41 => WorkRenew,
        42 => WorkSignal,
        43 => WorkScope,
        44 => WorkRevoke,
        45 => WorkLimitsSet,
        46 => WorkQuotaLend,
        47 => WorkQuotaAck,
        48 => WorkQuotaInstall,
        49 => AgentRevoke,
        50 => TeamLeaveAll,
        51 => MailSend,
        52 => MailAck,
        53 => MailGrant,
        54 => MailRelease,
        55 => TeamRole,
        56 => VoteOpen,
        57 => VoteCast,
        58 => VoteClose,
        59 => EngineTxn,
        60 => MetaCellMark,
        61 => RangeFreezeTo,
        62 => RangeFenced,
        63 => KvPutAttached,
        64 => KvKeepalive,
        65 => KvTxnIf,
        66 => PathsReserve,
        67 => PathsRelease,
        68 => RangeTrack,
        69 => RangeClear,
        70 => RangePatch,
        71 => FollowUpDone,
        72 => AgentRegister,
        73 => RangeAssignAt,
        74 => HandoffLocal,
        75 => RangeCopied,
        76 => RangeDrained,
        77 => WorkQuotaAsk,
        78 => WorkQuotaFloor,
        79 => MailTake,
        80 => BoardClaimMany,
        81 => MailSendMany,
    }
}

/// The business result of one command. Codes are stable and mirrored in proto.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Outcome {
    /// A channel's head was set by the operator's reset.
    HandoffReset {
        /// The sending cell.
        from_cell: u64,
        /// The head's sequence before.
        before_seq: u64,
        /// The head's sequence now.
        seq: u64,
    },
    /// A key was written; `version` is the key's modification revision (= `fence`).
    KvWritten {
        /// The key's new revision.
        version: u64,
        /// The fence of the write (equal to `version`).
        fence: u64,
    },
    /// A key was deleted; `version` was its revision before the delete.
    KvDeleted {
        /// The revision the key had before the delete.
        version: u64,
    },
    /// The expected version did not match; `current` is the key's revision (0 = absent).
    KvVersionMismatch {
        /// The key's current revision (0 = absent).
        current: u64,
    },
    /// The holder holds a slot (new grant or re-entry).
    LeaseHeld {
        /// The fence of the grant.
        fence: u64,
        /// When the slot expires unless renewed.
        expires_at_ms: u64,
        /// The holder already held the slot.
        reentered: bool,
    },
    /// The lease is full and the caller did not wait, or its wait ran out.
    LeaseContended {
        /// The live holders.
        holders: Vec<LeaseHolder>,
    },
    /// The lease is full and the holder is queued at `position` (0 = next).
    LeaseWaiting {
        /// Place in the FIFO queue (0 = next).
        position: u32,
        /// When the wait runs out.
        wait_until_ms: u64,
    },
    /// The holder's deadline is now `expires_at_ms`.
    LeaseRenewed {
        /// The fence of the holder's grant.
        fence: u64,
        /// The new deadline.
        expires_at_ms: u64,
    },
    /// The holder's slot (or queue place) was given back.
    LeaseReleased,
    /// The holder held nothing on this lease.
    LeaseNotHeld,
    /// `released` slots and queue places of one holder were given back.
    LeaseReleasedAll {
        /// Slots and queue places given back.
        released: u32,
    },
    /// The counter was charged.
    CounterOk {
        /// Consumed in the period after the charge.
        consumed: u64,
        /// Cap minus consumed.
        remaining: u64,
        /// The period label used.
        period: String,
    },
    /// Charging would pass the cap; nothing was charged.
    CounterOver {
        /// Consumed in the period (unchanged).
        consumed: u64,
        /// Cap minus consumed.
        remaining: u64,
        /// The period label used.
        period: String,
    },
    /// The entry was appended at `seq` (gap-free per partition, from 1).
    LedgerAppended {
        /// The entry's sequence number.
        seq: u64,
    },
    /// A tick processed `processed` due items.
    Ticked {
        /// Due items processed (including stale index entries removed).
        processed: u32,
    },
    /// A client request touched reserved state or a server-only command; nothing changed.
    Forbidden {
        /// What was refused.
        refusal: crate::vocab::access::AccessRefusal,
    },
    /// The command was refused as invalid; nothing changed.
    Invalid {
        /// Why, lowercase, with the numbers.
        reason: String,
    },
    /// Every compare of a `KvTxn` passed and its writes were applied; every put key now has
    /// revision `fence`.
    KvTxnCommitted {
        /// The fence (and new revision of every put key).
        fence: u64,
    },
    /// A compare of a `KvTxn` failed (the first in order); nothing changed.
    KvTxnFailed {
        /// The key whose revision did not match.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// Its current revision (0 = absent).
        current: u64,
    },
    /// This cell does not serve the command's point at the request's epoch: it owns no
    /// such range (`epoch` 0), the range is moving, or the router's map is stale.
    WrongRange {
        /// The epoch this cell knows for the point (0 = not owned here).
        epoch: u64,
    },
    /// A range is owned and served at `epoch`.
    RangeAssigned {
        /// The range's epoch.
        epoch: u64,
    },
    /// A range is frozen at `epoch`; every fence this cell granted is below `fence_high`,
    /// and every stamp time is at most `time_ms` (what freezes answer now; `RangeFrozen` is
    /// kept for answers recorded before).
    RangeFrozenAt {
        /// The new epoch.
        epoch: u64,
        /// The cell's high-water fence.
        fence_high: u64,
        /// The freeze's stamp time.
        time_ms: u64,
    },
    /// A range is frozen at `epoch`; every fence this cell granted is below `fence_high`.
    /// (Answers of builds before `RangeFrozenAt`.)
    RangeFrozen {
        /// The new epoch.
        epoch: u64,
        /// The cell's high-water fence.
        fence_high: u64,
    },
    /// No owned range is exactly `[start, last]`.
    RangeUnknown {
        /// First point asked for.
        start: u64,
        /// Last point asked for.
        last: u64,
    },
    /// Exported rows were written.
    RangeImported {
        /// How many.
        rows: u32,
    },
    /// A follow-up left the outbox (`Command::FollowUpDone`).
    FollowUpDone {
        /// Its sequence number.
        seq: u64,
        /// Whether it was still there (false: acknowledged before).
        was_pending: bool,
    },
    /// The source records the changes of the range a move copies (`Command::RangeTrack`).
    RangeTracked {
        /// The move's target cell.
        to_cell: u64,
    },
    /// Rows of a frozen range were deleted; `done` once the range is gone.
    RangeDropped {
        /// Rows deleted by this command.
        removed: u32,
        /// The range and all its rows are gone.
        done: bool,
    },
    /// The candidate leads the group (a new term, or the leader campaigning or renewing).
    Elected {
        /// The fence of the leader's term (unchanged by re-entry and renewal).
        fence: u64,
        /// When the leadership ends unless renewed.
        expires_at_ms: u64,
    },
    /// Another candidate leads the group; nothing changed.
    ElectionLost {
        /// The live leader.
        leader: ElectionLeader,
    },
    /// The caller is not the live leader with that fence; nothing changed.
    ElectionNotLeader {
        /// The live leader, if any.
        current: Option<ElectionLeader>,
    },
    /// The leader's endpoints were replaced.
    Proclaimed {
        /// The fence of the leader's term.
        fence: u64,
    },
    /// The leader stepped down and its endpoints were withdrawn.
    Resigned,
    /// This claim fired the schedule at `due_ms`.
    ScheduleFired {
        /// The due time fired.
        due_ms: u64,
        /// The fence of the firing.
        fence: u64,
    },
    /// The schedule already fired at `due_ms` (the claimed due time, or a later one when an
    /// older due time was claimed); nothing changed.
    ScheduleAlreadyFired {
        /// The latest due time fired.
        due_ms: u64,
        /// Who fired it.
        claimant: String,
        /// The fence of that firing.
        fence: u64,
    },
    /// The claimed due time is after the stamp; nothing changed.
    ScheduleNotDue {
        /// The claimed due time.
        due_ms: u64,
        /// The stamp time.
        now_ms: u64,
    },
    /// The team exists with the caller as its supervisor (new, or created again).
    TeamCreated {
        /// The team.
        team: String,
    },
    /// The agent is a member of the team (new, or already).
    TeamJoined {
        /// The team.
        team: String,
        /// The member.
        agent: String,
    },
    /// Part of a dissolving team's board was deleted; `done` once the team is gone.
    TeamDissolved {
        /// Tasks, claim records, mailbox rows and the team record deleted by this command
        /// (their index and deadline entries go with them, uncounted).
        removed: u32,
        /// The team and its whole board are gone.
        done: bool,
    },
    /// A task was posted (always at the local tier).
    TaskPosted {
        /// The task's id (`{team}-{n}`).
        task_id: String,
        /// Where it was posted.
        tier: Tier,
    },
    /// The caller claimed a task until `deadline_ms` under `fence`.
    TaskClaimed {
        /// The task as claimed (boxed: it carries the body, and outcomes stay small).
        task: Box<TaskView>,
        /// The fence of the claim (present it to complete, fail or extend).
        fence: u64,
        /// When the claim lapses unless extended.
        deadline_ms: u64,
        /// The board it came from.
        tier: Tier,
    },
    /// Neither the team's board nor the cell tier holds a ready task.
    BoardEmpty,
    /// The task is done.
    TaskCompleted {
        /// The task.
        task_id: String,
    },
    /// The failed task is ready again.
    TaskReleased {
        /// The task.
        task_id: String,
        /// Deliveries so far.
        delivery_count: u32,
    },
    /// The failed task reached its delivery limit and was dead-lettered.
    TaskDeadLettered {
        /// The task.
        task_id: String,
        /// Deliveries made.
        delivery_count: u32,
    },
    /// The claim's deadline is now `deadline_ms`.
    TaskExtended {
        /// The new deadline.
        deadline_ms: u64,
    },
    /// The dead-lettered task is ready again with its delivery count reset.
    TaskRedriven {
        /// The task.
        task_id: String,
    },
    /// A board or team command was refused; nothing changed.
    BoardRefused {
        /// Why.
        reason: BoardRefusal,
    },
    /// The envelope is queued at `seq` and its task left the cell tier.
    HandoffQueued {
        /// Its sequence.
        seq: u64,
    },
    /// The outbox moved on (another leader sealed first) or is full: seal again at
    /// `next_seq`.
    HandoffConflict {
        /// The outbox's next sequence.
        next_seq: u64,
    },
    /// The task may not be handed off (claimed meanwhile, not due, gone).
    HandoffSkipped {
        /// Why.
        reason: String,
    },
    /// Acknowledged envelopes were dropped from the outbox.
    HandoffAcked {
        /// How many.
        dropped: u32,
    },
    /// The envelope was applied: its task is on the fabric queue as `task_id` (sequence 0:
    /// spilled within one cell, `Command::HandoffLocal`, with no envelope).
    HandoffAccepted {
        /// Its sequence.
        seq: u64,
        /// The task's id at the fabric tier.
        task_id: String,
    },
    /// The envelope was applied before: acknowledged again, nothing applied.
    HandoffDuplicate {
        /// Its sequence.
        seq: u64,
    },
    /// The envelope does not extend the chain: resend from `expected_seq` (a gap), a
    /// contradiction that raised an alarm (a fork or a broken chain), or sequence 0.
    HandoffRefused {
        /// Why (its [`code`](crate::HandoffRefusal::code) is the `Deliver` verdict).
        refusal: crate::HandoffRefusal,
        /// The sequence the receiver expects next.
        expected_seq: u64,
    },
    /// The outcomes of a handoff batch's items, in order, up to where it stopped.
    HandoffBatch {
        /// One outcome per applied item.
        outcomes: Vec<Outcome>,
    },
    /// A batched send's answer: one `MailDelivered` or `MailRefused` per message, in order.
    MailSentMany {
        /// The messages' outcomes.
        outcomes: Vec<Outcome>,
    },
    /// A prefetching claim's answer: the tasks it completed, then the ones it claimed (none
    /// when the board had no ready task).
    TasksClaimed {
        /// The completed tasks' ids, in the order presented.
        completed: Vec<String>,
        /// The claims, oldest task first, each with its own fence and deadline.
        claims: Vec<Claimed>,
    },
    /// Several tasks were posted, in order.
    TasksPosted {
        /// Their ids.
        task_ids: Vec<String>,
    },
    /// A handoff that could not be made was recorded (with an alarm).
    HandoffFailed {
        /// Why.
        reason: String,
    },
    /// A work entry was admitted.
    WorkAdmitted {
        /// The new entry.
        entry: Box<crate::vocab::work::WorkEntryView>,
        /// Its siblings' ids.
        peers: Vec<String>,
    },
    /// A registry command was refused.
    WorkRefused {
        /// Why.
        refusal: crate::vocab::work::WorkRefusal,
    },
    /// An entry's lease was renewed (or, with `quota_lapsed`, could not be).
    WorkRenewed {
        /// The signal in force.
        signal: crate::vocab::work::Signal,
        /// Why that signal.
        reason: crate::vocab::work::SignalReason,
        /// When the lease lapses now.
        expires_ms: u64,
        /// The entry's budget, if its parent set one.
        budget: Option<u64>,
    },
    /// An entry's class or budget changed.
    WorkScoped {
        /// The entry.
        id: String,
        /// Its class now.
        class: String,
        /// Its budget now.
        budget: Option<u64>,
    },
    /// An entry's signal was set.
    WorkSignalled {
        /// The entry.
        id: String,
        /// Its signal.
        signal: crate::vocab::work::Signal,
    },
    /// An entry and its subtree were removed.
    WorkRevoked {
        /// Entries removed.
        removed: u32,
        /// Agents whose identities the server revokes next.
        agents: Vec<String>,
    },
    /// The limits were set.
    WorkLimitsSet {
        /// The limits in force.
        limits: crate::vocab::work::WorkLimits,
    },
    /// The meta cell lent a quota (its expiry in the meta cell's time).
    WorkQuotaLent {
        /// The grant.
        quota: crate::vocab::work::Quota,
    },
    /// The meta cell heard a cell installed a grant.
    WorkQuotaAcked {
        /// Whether it was the current grant.
        current: bool,
    },
    /// A cell installed (or, being older, ignored) a grant.
    WorkQuotaInstalled {
        /// Whether it was installed.
        installed: bool,
        /// Live entries on the cell.
        live: u64,
    },
    /// A cell refuses grants lent at or before `version` (`Command::WorkQuotaFloor`).
    WorkQuotaFloored {
        /// The version of the quota it holds now.
        version: u64,
    },
    /// An agent's identity was revoked (or not: `by` did not enroll it).
    AgentRevoked {
        /// The agent.
        agent: String,
        /// Whether its token stopped working.
        revoked: bool,
    },
    /// An agent's identity record was written (`created`), or held it already.
    AgentRegistered {
        /// The agent.
        agent: String,
        /// Whether this registration wrote the record.
        created: bool,
    },
    /// A registration was refused (`crate::register`).
    AgentRefused {
        /// Why.
        refusal: crate::vocab::agent::AgentRefusal,
    },
    /// An agent left every team of this cell.
    TeamsLeft {
        /// Teams it left.
        teams: u32,
    },
    /// The message is in the mailbox (a quarantined one too: the sender is not told).
    MailDelivered {
        /// Its id, `{address}#{seq}`.
        id: String,
        /// Its sequence in the mailbox.
        seq: u64,
        /// How far the recipient may rely on it.
        trust: crate::vocab::mail::Trust,
    },
    /// Mail was refused; nothing changed.
    MailRefused {
        /// Why.
        refusal: crate::vocab::mail::MailRefusal,
    },
    /// A reader's messages were taken out of the mailbox.
    MailAcked {
        /// The mailbox.
        address: String,
        /// Messages removed.
        removed: u32,
    },
    /// A reader's take: what it acknowledged and the messages it got.
    MailTaken {
        /// The mailbox.
        address: String,
        /// Messages the take's acknowledgement removed.
        removed: u32,
        /// The messages taken, in sequence order.
        messages: Vec<crate::vocab::mail::MailView>,
        /// When they come back to other takes if not acknowledged (0: none taken).
        visible_until_ms: u64,
    },
    /// A grant was made or revoked.
    MailGranted {
        /// The mailbox.
        address: String,
        /// The sender.
        sender: String,
        /// Allowed (`true`) or revoked.
        allow: bool,
    },
    /// A quarantined message was released or dropped.
    MailReleased {
        /// The message.
        id: String,
        /// Released into the mailbox (`true`) or dropped.
        delivered: bool,
    },
    /// A member's role was set.
    RoleSet {
        /// The team.
        team: String,
        /// The member.
        member: String,
        /// Its role now.
        role: crate::vocab::vote::Role,
    },
    /// A proposal was opened.
    VoteOpened {
        /// Its id, `{team}#{fence}`.
        proposal: String,
        /// When it closes at the latest.
        closes_at_ms: u64,
        /// Voters in its electorate.
        electorate: u32,
    },
    /// A ballot was appended.
    BallotAccepted {
        /// The proposal.
        proposal: String,
        /// The ballot's sequence in the proposal.
        seq: u64,
        /// This ballot closed the proposal (everyone voted).
        closed: bool,
    },
    /// A proposal was closed and counted.
    VoteClosed {
        /// The proposal.
        proposal: String,
        /// How it ended.
        outcome: crate::vocab::vote::VoteOutcome,
        /// The winning option, when it passed.
        winner: Option<String>,
    },
    /// A vote command was refused; nothing changed.
    VoteRefused {
        /// Why.
        refusal: crate::vocab::vote::VoteRefusal,
    },
    /// The request's idempotency key holds, inside its window, the outcome of a different
    /// command or of another caller: nothing changed and the recorded outcome is not shown.
    KeyReused {
        /// The key.
        key: String,
    },
    /// This cell is now marked as the fabric's meta cell.
    RangeMarkedMeta,
    /// A range step was refused; nothing changed but the cell's range-admin floor.
    RangeRefused {
        /// Why.
        refusal: crate::vocab::range::RangeRefusal,
    },
    /// A command on an ephemeral key was refused; nothing changed.
    KvRefused {
        /// Why.
        refusal: crate::vocab::kv::KvRefusal,
    },
    /// A key's own deadline is now `expires_at_ms`; its value and revision are unchanged.
    KvKeptAlive {
        /// The key's revision.
        version: u64,
        /// Its deadline.
        expires_at_ms: u64,
    },
    /// A `KvTxnIf` ran the branch its compares chose.
    KvTxnDone {
        /// Every compare held (the `success` branch ran; else `failure`).
        succeeded: bool,
        /// The fence of the transaction (the revision of every key it put).
        fence: u64,
        /// One answer per operation of the branch that ran, in order.
        responses: Vec<crate::vocab::kv::TxnOpResult>,
    },
    /// A reserve's answer: the paths granted, and the reservations of others that kept the
    /// rest from being granted.
    PathsReserved {
        /// Paths granted (or renewed) to the caller.
        granted: Vec<crate::vocab::paths::PathGrant>,
        /// Each path not granted, once per reservation it conflicts with.
        conflicts: Vec<crate::vocab::paths::PathConflict>,
    },
    /// A release's answer.
    PathsReleased {
        /// Paths released.
        released: Vec<String>,
        /// Paths named that nobody held.
        not_held: Vec<String>,
    },
    /// A reserve or release was refused as a whole; nothing changed.
    PathsRefused {
        /// Why.
        refusal: crate::vocab::paths::PathRefusal,
    },
}

crate::codes::stable_codes! {
    Outcome {
        0 => HandoffReset,
        1 => KvWritten,
        2 => KvDeleted,
        3 => KvVersionMismatch,
        4 => LeaseHeld,
        5 => LeaseContended,
        6 => LeaseWaiting,
        7 => LeaseRenewed,
        8 => LeaseReleased,
        9 => LeaseNotHeld,
        10 => LeaseReleasedAll,
        11 => CounterOk,
        12 => CounterOver,
        13 => LedgerAppended,
        14 => Ticked,
        15 => Forbidden,
        16 => Invalid,
        17 => KvTxnCommitted,
        18 => KvTxnFailed,
        19 => WrongRange,
        20 => RangeAssigned,
        21 => RangeFrozen,
        22 => RangeUnknown,
        23 => RangeImported,
        24 => RangeDropped,
        25 => Elected,
        26 => ElectionLost,
        27 => ElectionNotLeader,
        28 => Proclaimed,
        29 => Resigned,
        30 => ScheduleFired,
        31 => ScheduleAlreadyFired,
        32 => ScheduleNotDue,
        33 => TeamCreated,
        34 => TeamJoined,
        35 => TeamDissolved,
        36 => TaskPosted,
        37 => TaskClaimed,
        38 => BoardEmpty,
        39 => TaskCompleted,
        40 => TaskReleased,
        41 => TaskDeadLettered,
        42 => TaskExtended,
        43 => TaskRedriven,
        44 => BoardRefused,
        45 => HandoffQueued,
        46 => HandoffConflict,
        47 => HandoffSkipped,
        48 => HandoffAcked,
        49 => HandoffAccepted,
        50 => HandoffDuplicate,
        51 => HandoffRefused,
        52 => HandoffBatch,
        53 => TasksPosted,
        54 => HandoffFailed,
        55 => WorkAdmitted,
        56 => WorkRefused,
        57 => WorkRenewed,
        58 => WorkScoped,
        59 => WorkSignalled,
        60 => WorkRevoked,
        61 => WorkLimitsSet,
        62 => WorkQuotaLent,
        63 => WorkQuotaAcked,
        64 => WorkQuotaInstalled,
        65 => AgentRevoked,
        66 => TeamsLeft,
        67 => MailDelivered,
        68 => MailRefused,
        69 => MailAcked,
        70 => MailGranted,
        71 => MailReleased,
        72 => RoleSet,
        73 => VoteOpened,
        74 => BallotAccepted,
        75 => VoteClosed,
        76 => VoteRefused,
        77 => KeyReused,
        78 => RangeMarkedMeta,
        79 => RangeRefused,
        80 => KvRefused,
        81 => KvKeptAlive,
        82 => KvTxnDone,
        83 => PathsReserved,
        84 => PathsReleased,
        85 => PathsRefused,
        86 => RangeTracked,
        87 => FollowUpDone,
        88 => AgentRegistered,
        89 => AgentRefused,
        90 => RangeFrozenAt,
        91 => WorkQuotaFloored,
        92 => MailTaken,
        93 => TasksClaimed,
        94 => MailSentMany,
    }
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

/// The leader of an election group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectionLeader {
    /// The election group.
    pub group: String,
    /// The leading candidate.
    pub candidate: String,
    /// The fence of its term (granted when it won; kept by re-entry and renewal).
    pub fence: u64,
    /// Where the leader can be reached.
    pub endpoints: Vec<String>,
    /// When the leadership ends unless renewed.
    pub expires_at_ms: u64,
}

/// Settings of a team's board, fixed when the team is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardSettings {
    /// The claim window: a claim lapses this long after it was taken (or extended).
    pub reclaim_ms: u64,
    /// Deliveries of one task before it is dead-lettered (at least 1).
    pub delivery_limit: u32,
    /// A never-claimed local task spills to the cell tier after this long (0 = never).
    pub spill_after_ms: u64,
    /// Bytes of one task body or result.
    pub task_bytes_max: u32,
}

impl Default for BoardSettings {
    /// A 30 s claim window, 5 deliveries, no spill, 64 KiB tasks.
    fn default() -> Self {
        BoardSettings {
            reclaim_ms: 30_000,
            delivery_limit: 5,
            spill_after_ms: 0,
            task_bytes_max: 64 << 10,
        }
    }
}

/// Where a task board sits. Tasks are posted locally and only ever move up (spill); a task
/// is visible only at its current tier.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Tier {
    /// The team's own board.
    Local,
    /// The board of one cell, holding tasks spilled from local boards of its teams.
    Cell,
    /// The fabric-wide board (filled by a cross-cell handoff; not stored by this crate yet).
    Fabric,
}

crate::codes::stable_codes! {
    Tier {
        0 => Local,
        1 => Cell,
        2 => Fabric,
    }
}

/// The life of a task.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum TaskState {
    /// Waiting for a worker.
    Ready,
    /// Held by a worker under a fence until a deadline.
    Claimed,
    /// Completed (kept for `limits::TASK_DONE_RETAIN_MS`).
    Done,
    /// Dead-lettered at its delivery limit (kept until redriven or the team dissolves).
    Dead,
}

crate::codes::stable_codes! {
    TaskState {
        0 => Ready,
        1 => Claimed,
        2 => Done,
        3 => Dead,
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TaskState::Ready => "ready",
            TaskState::Claimed => "claimed",
            TaskState::Done => "done",
            TaskState::Dead => "dead",
        })
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tier::Local => "local",
            Tier::Cell => "cell",
            Tier::Fabric => "fabric",
        })
    }
}

impl std::str::FromStr for TaskState {
    type Err = String;

    /// The inverse of `Display`.
    fn from_str(text: &str) -> Result<Self, String> {
        Ok(match text {
            "ready" => TaskState::Ready,
            "claimed" => TaskState::Claimed,
            "done" => TaskState::Done,
            "dead" => TaskState::Dead,
            other => {
                return Err(format!(
                    "state {other:?} is not ready, claimed, done or dead"
                ));
            }
        })
    }
}

impl std::str::FromStr for Tier {
    type Err = String;

    /// The inverse of `Display`.
    fn from_str(text: &str) -> Result<Self, String> {
        Ok(match text {
            "local" => Tier::Local,
            "cell" => Tier::Cell,
            "fabric" => Tier::Fabric,
            other => return Err(format!("tier {other:?} is not local, cell or fabric")),
        })
    }
}

/// One failed delivery of a task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Which delivery failed (from 1).
    pub delivery: u32,
    /// The worker that held it.
    pub worker: String,
    /// What went wrong (the worker's error, or the lapsed claim window).
    pub error: String,
    /// Stamp time of the failure.
    pub at_ms: u64,
}

/// One held claim a worker completes ([`Command::BoardClaimMany`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    /// The task.
    pub task_id: String,
    /// Its live claim's fence.
    pub fence: u64,
    /// The result.
    #[serde(with = "serde_bytes")]
    pub result: Vec<u8>,
}

/// One claim of a prefetching claim ([`Outcome::TasksClaimed`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimed {
    /// The task as claimed.
    pub task: TaskView,
    /// The fence of the claim (present it to complete, fail or extend).
    pub fence: u64,
    /// When the claim lapses unless extended.
    pub deadline_ms: u64,
    /// The board it came from.
    pub tier: Tier,
}

/// A task as stored on a board.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskView {
    /// The task's id: `{team}-{n}`, kept across tiers.
    pub id: String,
    /// The team that posted it (its origin, also after it spilled).
    pub team: String,
    /// The board it is on now.
    pub tier: Tier,
    /// Its state.
    pub state: TaskState,
    /// The posted bytes.
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
    /// Claims so far (reset by a redrive).
    pub delivery_count: u32,
    /// The worker holding the claim (or that completed it); `None` otherwise.
    pub worker: Option<String>,
    /// The fence of the latest claim (0 = never claimed).
    pub fence: u64,
    /// The deadline of the latest claim (0 = never claimed).
    pub deadline_ms: u64,
    /// Stamp time of the post.
    pub posted_ms: u64,
    /// Failed deliveries, oldest first (the latest `limits::TASK_FAILURES_MAX`).
    pub failures: Vec<Failure>,
    /// The result bytes of a done task (empty otherwise).
    #[serde(with = "serde_bytes")]
    pub result: Vec<u8>,
    /// The origin team's spill window (a cell-tier task is handed to the fabric tier once
    /// it waited twice this since it was posted; 0 = never).
    pub spill_after_ms: u64,
}

/// Why a board or team command was refused. Messages are lowercase, with the numbers.
///
/// ```
/// use whip_board::{BoardRefusal, TaskState};
/// let stale = BoardRefusal::StaleFence { presented: 41, current: 43 };
/// assert_eq!(stale.to_string(), "fence 41 is stale, current is 43");
/// let done = BoardRefusal::NotClaimed { task_id: "t-1".into(), state: TaskState::Done };
/// assert_eq!(done.to_string(), "task \"t-1\" is not claimed, it is done");
/// ```
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(remote = "Self")]
pub enum BoardRefusal {
    /// The team does not exist here (or is dissolving).
    #[error("team {team:?} is unknown")]
    UnknownTeam {
        /// The team named.
        team: String,
    },
    /// Another agent created a team of that name (or it is dissolving).
    #[error("team {team:?} already exists")]
    TeamExists {
        /// The team named.
        team: String,
    },
    /// The agent is neither a member of the team nor of an ancestor team.
    #[error("agent {agent:?} is not a member of team {team:?} or its ancestors")]
    NotMember {
        /// The agent.
        agent: String,
        /// The team.
        team: String,
    },
    /// Only the team's supervisor may do this.
    #[error("agent {agent:?} is not the supervisor {supervisor:?}")]
    NotSupervisor {
        /// The agent.
        agent: String,
        /// The supervisor.
        supervisor: String,
    },
    /// No such task on a board this command can reach.
    #[error("task {task_id:?} is unknown")]
    UnknownTask {
        /// The task named.
        task_id: String,
    },
    /// The task is not claimed (ready, done or dead).
    #[error("task {task_id:?} is not claimed, it is {state}")]
    NotClaimed {
        /// The task.
        task_id: String,
        /// Its state.
        state: TaskState,
    },
    /// The presented fence is not the live claim's.
    #[error("fence {presented} is stale, current is {current}")]
    StaleFence {
        /// The fence presented.
        presented: u64,
        /// The fence of the task's latest claim.
        current: u64,
    },
    /// The claim's window passed; the task is redelivered by the next tick.
    #[error("claim expired at {deadline_ms}, now is {now_ms}")]
    ClaimExpired {
        /// The claim's deadline.
        deadline_ms: u64,
        /// The stamp time.
        now_ms: u64,
    },
    /// The team's board holds `limits::TEAM_TASKS_MAX` open tasks.
    #[error("board holds {open} open tasks, limit is {open_max}")]
    BoardFull {
        /// Ready, claimed and dead tasks on the board.
        open: u64,
        /// The limit.
        open_max: u64,
    },
    /// A named claim found the task neither ready nor lapsed (done or dead).
    #[error("task {task_id:?} is not ready, it is {state}")]
    NotReady {
        /// The task.
        task_id: String,
        /// Its state.
        state: TaskState,
    },
    /// A named claim found another worker's live claim on the task.
    #[error("task {task_id:?} is claimed by {worker:?}")]
    Taken {
        /// The task.
        task_id: String,
        /// The worker holding it.
        worker: String,
    },
    /// Only a dead-lettered task may be redriven.
    #[error("task {task_id:?} is not dead-lettered, it is {state}")]
    NotDead {
        /// The task.
        task_id: String,
        /// Its state.
        state: TaskState,
    },
    /// A task is posted to its team's local board only: the fabric tier is filled by
    /// spilling, never by a post (the seed: spill up, never start up).
    #[error("{team:?} is a fabric queue: tasks reach it only by spilling from a local board")]
    NotLocal {
        /// The queue's team.
        team: String,
    },
}

crate::codes::stable_codes! {
    BoardRefusal {
        0 => UnknownTeam,
        1 => TeamExists,
        2 => NotMember,
        3 => NotSupervisor,
        4 => UnknownTask,
        5 => NotClaimed,
        6 => StaleFence,
        7 => ClaimExpired,
        8 => BoardFull,
        9 => NotReady,
        10 => Taken,
        11 => NotDead,
        12 => NotLocal,
    }
}

/// The part of the board a command belongs to: `apply` and `validate` dispatch on it, so
/// each command's family is named once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// CAS keys, leases, counters, ledgers.
    Primitive,
    /// Expiry of due deadlines.
    Tick,
    /// Range ownership of a fabric.
    Range,
    /// Elections and schedules.
    Coordination,
    /// Teams, boards and fabric queues.
    Board,
    /// Cross-cell handoff channels.
    Handoff,
    /// The work registry, its quotas and the identities it revokes.
    Work,
    /// Agent mail.
    Mail,
    /// Roles, proposals and ballots.
    Vote,
    /// The engine's instance state.
    Engine,
    /// Path reservations.
    Paths,
}

impl Command {
    /// Whether the command reaches client CAS keys (`crate::kv`, `crate::ephemeral`,
    /// `crate::kv_txn`).
    pub(crate) fn is_kv(&self) -> bool {
        matches!(
            self,
            Command::KvPut { .. }
                | Command::KvDelete { .. }
                | Command::KvTxn { .. }
                | Command::KvPutAttached { .. }
                | Command::KvKeepalive { .. }
                | Command::KvTxnIf { .. }
        )
    }

    /// A step of the work registry's quota rounds, which the server runs on the cells it
    /// is for (`WorkQuotaLend`, `WorkQuotaAsk`, `WorkQuotaFloor`, `WorkQuotaAck`,
    /// `WorkQuotaInstall`).
    pub fn is_quota_step(&self) -> bool {
        matches!(
            self,
            Command::WorkQuotaLend { .. }
                | Command::WorkQuotaAsk { .. }
                | Command::WorkQuotaFloor { .. }
                | Command::WorkQuotaAck { .. }
                | Command::WorkQuotaInstall { .. }
        )
    }

    /// The command's [`Family`].
    #[rustfmt::skip]
    pub(crate) fn family(&self) -> Family {
        match self {
            Command::KvPut { .. } | Command::KvDelete { .. } | Command::KvTxn { .. }
            | Command::KvPutAttached { .. } | Command::KvKeepalive { .. }
            | Command::KvTxnIf { .. }
            | Command::LeaseAcquire { .. }
            | Command::LeaseRenew { .. }
            | Command::LeaseRelease { .. }
            | Command::LeaseReleaseAll { .. }
            | Command::CounterConsume { .. }
            | Command::LedgerAppend { .. } => Family::Primitive,
            Command::Tick => Family::Tick,
            Command::RangeAssign { .. } | Command::RangeAssignAt { .. }
            | Command::RangeFreeze { .. }
            | Command::RangeSplit { .. } | Command::RangeImport { .. }
            | Command::RangeDrop { .. } | Command::MetaCellMark
            | Command::RangeFreezeTo { .. } | Command::RangeTrack { .. }
            | Command::RangeCopied { .. } | Command::RangeClear { .. } | Command::RangePatch { .. }
            | Command::RangeDrained { .. } | Command::RangeFenced { .. } => Family::Range,
            Command::Campaign { .. }
            | Command::Proclaim { .. }
            | Command::Resign { .. }
            | Command::ElectionRenew { .. }
            | Command::ScheduleFire { .. } => Family::Coordination,
            Command::TeamCreate { .. }
            | Command::TeamJoin { .. }
            | Command::TeamDissolve { .. }
            | Command::BoardPost { .. }
            | Command::BoardPostMany { .. }
            | Command::BoardClaim { .. }
            | Command::BoardClaimTask { .. }
            | Command::BoardRelease { .. }
            | Command::BoardComplete { .. }
            | Command::BoardCompleteAndClaim { .. }
            | Command::BoardClaimMany { .. }
            | Command::BoardFail { .. }
            | Command::BoardExtend { .. }
            | Command::BoardRedrive { .. }
            | Command::FabricPurge { .. } => Family::Board,
            Command::WorkRegister { .. }
            | Command::WorkRenew { .. }
            | Command::WorkSignal { .. }
            | Command::WorkScope { .. }
            | Command::WorkRevoke { .. }
            | Command::WorkLimitsSet { .. }
            | Command::WorkQuotaLend { .. } | Command::WorkQuotaAsk { .. }
            | Command::WorkQuotaFloor { .. } | Command::WorkQuotaAck { .. }
            | Command::WorkQuotaInstall { .. }
            | Command::AgentRevoke { .. }
            | Command::AgentRegister { .. }
            | Command::TeamLeaveAll { .. } => Family::Work,
            Command::HandoffSend { .. }
            | Command::HandoffLocal { .. }
            | Command::HandoffAck { .. }
            | Command::HandoffReceive { .. }
            | Command::HandoffFailed { .. }
            | Command::HandoffBatch { .. }
            | Command::HandoffReset { .. }
            | Command::FollowUpDone { .. } => Family::Handoff,
            Command::MailSend { .. } | Command::MailSendMany { .. } | Command::MailAck { .. }
            | Command::MailTake { .. } | Command::MailGrant { .. }
            | Command::MailRelease { .. } => Family::Mail,
            Command::TeamRole { .. }
            | Command::VoteOpen { .. }
            | Command::VoteCast { .. }
            | Command::VoteClose { .. } => Family::Vote,
            Command::EngineTxn { .. } => Family::Engine,
            Command::PathsReserve { .. } | Command::PathsRelease { .. } => Family::Paths,
        }
    }
}

impl BoardRefusal {
    /// The refusal's wire code (what a client matches on).
    pub fn refusal_code(&self) -> crate::refusal::RefusalCode {
        use crate::refusal::RefusalCode;
        match self {
            BoardRefusal::UnknownTeam { .. } => RefusalCode::UnknownTeam,
            BoardRefusal::TeamExists { .. } => RefusalCode::TeamExists,
            BoardRefusal::NotMember { .. } => RefusalCode::NotMember,
            BoardRefusal::NotSupervisor { .. } => RefusalCode::NotSupervisor,
            BoardRefusal::UnknownTask { .. } => RefusalCode::UnknownTask,
            BoardRefusal::NotClaimed { .. } => RefusalCode::NotClaimed,
            BoardRefusal::StaleFence { .. } => RefusalCode::StaleFence,
            BoardRefusal::ClaimExpired { .. } => RefusalCode::ClaimExpired,
            BoardRefusal::BoardFull { .. } => RefusalCode::BoardFull,
            BoardRefusal::NotDead { .. } => RefusalCode::NotDead,
            BoardRefusal::NotLocal { .. } => RefusalCode::NotLocal,
            BoardRefusal::NotReady { .. } => RefusalCode::NotReady,
            BoardRefusal::Taken { .. } => RefusalCode::Taken,
        }
    }

    /// A stable snake_case name of the refusal (the wire's `refusal` field).
    pub fn code(&self) -> &'static str {
        self.refusal_code().as_str()
    }
}

/// `(key, value)` pairs with both sides as byte strings: postcard writes the same bytes as
/// for plain `Vec<u8>` (so stored data stays readable) but copies each in one go instead of
/// byte by byte, which matters for the engine's multi-key transactions.
/// A list of byte strings, each copied in one go (same postcard bytes as `Vec<Vec<u8>>`).
mod vecs_as_bytes {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    pub(super) fn serialize<S: Serializer>(
        items: &[Vec<u8>],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let borrowed: Vec<&Bytes> = items.iter().map(|v| Bytes::new(v)).collect();
        borrowed.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Vec<u8>>, D::Error> {
        let owned: Vec<ByteBuf> = Vec::deserialize(deserializer)?;
        Ok(owned.into_iter().map(ByteBuf::into_vec).collect())
    }
}

mod pairs_as_bytes {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
    use serde_bytes::{ByteBuf, Bytes};

    pub(super) fn serialize<S: Serializer>(
        pairs: &[(Vec<u8>, Vec<u8>)],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let borrowed: Vec<(&Bytes, &Bytes)> = pairs
            .iter()
            .map(|(k, v)| (Bytes::new(k), Bytes::new(v)))
            .collect();
        borrowed.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Pairs, D::Error> {
        let owned: Vec<(ByteBuf, ByteBuf)> = Vec::deserialize(deserializer)?;
        Ok(owned
            .into_iter()
            .map(|(k, v)| (k.into_vec(), v.into_vec()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte fields are declared as byte strings only for speed: their postcard encoding must
    /// stay exactly that of plain `Vec<u8>`, or stored logs and state would stop decoding.
    #[test]
    fn byte_fields_encode_as_plain_vectors() {
        let puts = vec![
            (b"key".to_vec(), vec![0, 1, 255]),
            (Vec::new(), b"v".to_vec()),
        ];
        let command = Command::KvTxn {
            compares: Vec::new(),
            puts: puts.clone(),
            deletes: Vec::new(),
        };
        let put = Command::KvPut {
            key: b"k".to_vec(),
            value: vec![7; 300],
            expect_version: None,
        };
        let ours = postcard::to_stdvec(&(command, put)).unwrap();
        let plain_txn =
            postcard::to_stdvec(&(Vec::<(Vec<u8>, u64)>::new(), &puts, Vec::<Vec<u8>>::new()))
                .unwrap();
        let plain_put = postcard::to_stdvec(&(b"k".to_vec(), vec![7u8; 300], None::<u64>)).unwrap();
        // Variant tag, then the fields in order, exactly as plain vectors would be written.
        assert_eq!(&ours[1..1 + plain_txn.len()], plain_txn.as_slice());
        assert_eq!(&ours[ours.len() - plain_put.len()..], plain_put.as_slice());
        let back: (Command, Command) = postcard::from_bytes(&ours).unwrap();
        assert!(matches!(back.0, Command::KvTxn { puts: p, .. } if p.len() == 2));
    }
}
