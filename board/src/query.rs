//! Read-only views of the state machine (served after a linearizable read barrier).

pub use crate::vocab::kv::KvEntry;
use serde::{Deserialize, Serialize};

use crate::types::{
    BoardSettings, ElectionLeader, LeaseHolder, ResourceId, TaskState, TaskView, Tier,
};

/// A read of the state machine. Reads never change state; `now_ms` (supplied by the
/// serving cell) hides holders and waiters whose deadline has passed but whose expiry tick
/// has not yet applied.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Query {
    /// One CAS key.
    KvGet {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
    /// Leases whose `owner/name` starts with `prefix` (empty = all), with live holders.
    LeaseList {
        /// Prefix of `owner/name` (empty = all).
        prefix: String,
        /// Most leases returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// Counters whose `owner/name` starts with `prefix` (empty = all).
    CounterList {
        /// Prefix of `owner/name` (empty = all).
        prefix: String,
        /// Most counters returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// Ledger entries of `owner/name`, one partition or all, with `seq > after_seq`.
    LedgerList {
        /// Ledger owner.
        owner: String,
        /// Ledger name.
        name: String,
        /// One partition, or all when `None`.
        partition: Option<String>,
        /// Only entries with a greater sequence number.
        after_seq: u64,
        /// Most entries returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// The earliest pending deadline (for the leader's tick loop).
    NextDeadline,
    /// CAS keys starting with `prefix` and greater than `after_key`, in key order.
    KvRange {
        /// Key prefix (may be empty: every key).
        #[serde(with = "serde_bytes")]
        prefix: Vec<u8>,
        /// Only keys strictly greater than this (empty = from the start of the prefix).
        #[serde(with = "serde_bytes")]
        after_key: Vec<u8>,
        /// Most keys returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// The live leader of one election group.
    ElectionLeader {
        /// The election group.
        group: String,
    },
    /// Election groups starting with `prefix` (empty = all) that have a live leader.
    ElectionList {
        /// Prefix of the group (empty = all).
        prefix: String,
        /// Most leaders returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// Schedules whose name starts with `prefix` (empty = all), with their last firing.
    ScheduleList {
        /// Prefix of the schedule name (empty = all).
        prefix: String,
        /// Most schedules returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// A keyed read sent by a router: answered only when this cell serves the query's point
    /// at `epoch` (else `WrongRange`). Lists inside it see only served ranges.
    Routed {
        /// The router's epoch for the point.
        epoch: u64,
        /// The read.
        query: Box<Query>,
    },
    /// The ranges this cell owns.
    Ranges,
    /// Stored rows of range `[start, last]` after `after_key` (a move copies them).
    RangeExport {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// Only rows with a greater key (empty = from the start).
        #[serde(with = "serde_bytes")]
        after_key: Vec<u8>,
        /// Most rows returned.
        limit: u32,
    },
    /// On a move's source: the rows of `[start, last]` changed since the move's copy began
    /// (`Command::RangeTrack`), as the cell holds them now, after `after_key`.
    RangeChanges {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// Only changed keys greater than this (empty = from the start).
        #[serde(with = "serde_bytes")]
        after_key: Vec<u8>,
        /// Most rows returned.
        limit: u32,
    },
    /// On a move's source before its freeze: a page of the rows of `[start, last]` its
    /// record holds, as the cell holds them now, with the record's change count and size
    /// (a catch-up sends them, then `Command::RangeDrained`).
    RangePending {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
        /// Only changed keys greater than this (empty = from the start).
        #[serde(with = "serde_bytes")]
        after_key: Vec<u8>,
        /// Most rows returned.
        limit: u32,
    },
    /// On a move's source: the target its record of `[start, last]` is for and how far
    /// that target holds a clean copy (`Command::RangeCopied`).
    RangeCopy {
        /// First point.
        start: u64,
        /// Last point (inclusive).
        last: u64,
    },
    /// This cell's follow-up outbox after `after_seq` (`crate::next`).
    FollowUps {
        /// Only follow-ups with a greater sequence number.
        after_seq: u64,
        /// Most returned.
        limit: u32,
    },
    /// One team: supervisor, members, parent and settings.
    Team {
        /// The team.
        team: String,
    },
    /// Tasks of the team's local board in post order, all or in one state.
    BoardList {
        /// The team.
        team: String,
        /// Only tasks in this state (`None` = all).
        state: Option<TaskState>,
        /// Most tasks returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// One task reached through the team (its own, or on this cell's cell tier); the
    /// answer is `Tasks` with zero or one task.
    BoardTask {
        /// The team.
        team: String,
        /// The task.
        task_id: String,
    },
    /// Counts of the team's local board and of this cell's ready cell-tier tasks.
    BoardStats {
        /// The team.
        team: String,
    },
    /// Dead-lettered tasks posted by the team: those on its local board, then those that
    /// died on the cell tier.
    BoardDeadLetters {
        /// The team.
        team: String,
        /// Most tasks returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// Ready tasks of this cell's cell-tier board, oldest spill first (cell-local: every
    /// cell answers for its own board).
    BoardCellReady {
        /// Most tasks returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// Messages of `agent`'s mailbox kept by `team`, with `seq > after_seq`. A mailbox
    /// lives with the team whose board wrote it (a supervisor's dead-letter notices are
    /// written on the team's cell), so it is read through the team and routes by it.
    Mailbox {
        /// The team that keeps the mailbox.
        team: String,
        /// The agent.
        agent: String,
        /// Only messages with a greater sequence number.
        after_seq: u64,
        /// Most messages returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// What the channel to `to_cell` seals next: (sequence, previous hash).
    OutboxHead {
        /// The receiving cell.
        to_cell: u64,
    },
    /// Unacknowledged envelopes to `to_cell` from `from_seq` on.
    OutboxPending {
        /// The receiving cell.
        to_cell: u64,
        /// The first sequence wanted.
        from_seq: u64,
        /// Most envelopes returned.
        limit: u32,
    },
    /// Receiving cells with unacknowledged envelopes.
    OutboxChannels,
    /// Alarms this cell raised (forks, broken chains, failed handoffs).
    Alarms,
    /// A client's `query` for the `caller` the server proved: refused (`Refused`) when the
    /// caller may not read it ([`crate::admit::admit_query`]: nobody anonymous, no
    /// reserved key; a team's board and blackboard for its members only), decided in the
    /// same snapshot as the read; scans leave out reserved rows and blackboard rows not
    /// asked for by team.
    By {
        /// Who reads.
        caller: crate::vocab::access::Caller,
        /// The read.
        query: Box<Query>,
    },
    /// Live work entries: children of `parent`, or every entry this cell holds.
    WorkList {
        /// Only children of this entry (routes by its root).
        parent: Option<String>,
        /// Most entries returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// One live work entry (routes by its root).
    WorkEntry {
        /// The entry.
        id: String,
    },
    /// This cell's audit ledger of control-plane actions after `after_seq`.
    WorkAudit {
        /// Only rows with a greater sequence.
        after_seq: u64,
        /// Most rows returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// This cell's live entries and quota (for the quota loop).
    WorkQuota,
    /// The admission limits this cell holds.
    WorkLimits,
    /// Messages of an agent, team or entry mailbox ([`crate::mail`]), read through
    /// [`Query::By`]: only the mailbox's readers get them.
    MailInbox {
        /// The mailbox.
        address: crate::vocab::mail::Address,
        /// Only messages with a greater sequence number.
        after_seq: u64,
        /// Most messages returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
        /// The quarantined messages instead of the deliverable ones.
        quarantined: bool,
    },
    /// The figures an operator watches on this cell (a server's own read, for metrics and
    /// the dashboard): board, mailbox and lease depths, handoffs, alarms, the registry.
    Gauges,
    /// One proposal with its rules and result ([`crate::vote`]).
    VoteProposal {
        /// The proposal's id.
        proposal: String,
    },
    /// A proposal's ballots in sequence order.
    VoteBallots {
        /// The proposal's id.
        proposal: String,
        /// Only ballots with a greater sequence number.
        after_seq: u64,
        /// Most ballots returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// A team's proposals, oldest first.
    VoteList {
        /// The team.
        team: String,
        /// Most proposals returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// One row of the engine's instance state (`crate::instance`).
    EngineGet {
        /// The engine key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
    /// Engine rows starting with `prefix` and greater than `after_key`, in key order; a
    /// client's read keeps only rows of instances it may operate.
    EngineRange {
        /// Key prefix (may be empty).
        #[serde(with = "serde_bytes")]
        prefix: Vec<u8>,
        /// Only keys strictly greater than this.
        #[serde(with = "serde_bytes")]
        after_key: Vec<u8>,
        /// Most rows returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
    /// Changes of one client key, or of every key under a prefix, from a revision
    /// ([`crate::watch`]). A client's read keeps only keys it may read.
    KvWatch {
        /// The key, or the prefix.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// Every key starting with `key`.
        prefix: bool,
        /// The first revision wanted; 0 = from now.
        from: u64,
    },
    /// Live path reservations (`crate::reservation`): of `repo` (every holder's, or only
    /// `holder`'s), or, without a repository, `holder`'s everywhere (a fabric gathers them
    /// from every cell). Every proven caller may read them: the guard needs everyone's.
    PathsList {
        /// The repository; `None` needs `holder`.
        repo: Option<String>,
        /// Only this holder's (an agent's name, or `operator`).
        holder: Option<String>,
        /// Most rows returned (capped by `limits::LIST_ROWS_MAX`).
        limit: u32,
    },
}

crate::codes::stable_codes! {
    Query {
        0 => KvGet,
        1 => LeaseList,
        2 => CounterList,
        3 => LedgerList,
        4 => NextDeadline,
        5 => KvRange,
        6 => ElectionLeader,
        7 => ElectionList,
        8 => ScheduleList,
        9 => Routed,
        10 => Ranges,
        11 => RangeExport,
        12 => Team,
        13 => BoardList,
        14 => BoardTask,
        15 => BoardStats,
        16 => BoardDeadLetters,
        17 => BoardCellReady,
        18 => Mailbox,
        19 => OutboxHead,
        20 => OutboxPending,
        21 => OutboxChannels,
        22 => Alarms,
        23 => By,
        24 => WorkList,
        25 => WorkEntry,
        26 => WorkAudit,
        27 => WorkQuota,
        28 => WorkLimits,
        29 => MailInbox,
        30 => Gauges,
        31 => VoteProposal,
        32 => VoteBallots,
        33 => VoteList,
        34 => EngineGet,
        35 => EngineRange,
        36 => KvWatch,
        37 => PathsList,
        38 => RangeChanges,
        39 => FollowUps,
        40 => RangeCopy,
        41 => RangePending,
    }
}

/// Why a client's read was refused.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(remote = "Self")]
pub enum ReadRefusal {
    /// The caller may not read this at all (anonymous, reserved state).
    #[error("{0}")]
    Access(crate::vocab::access::AccessRefusal),
    /// The caller is not a member of the team whose board or blackboard this is.
    #[error("{}: {refusal}", refusal.code())]
    Board {
        /// The board's refusal.
        refusal: crate::types::BoardRefusal,
    },
    /// The caller may not read the mailbox.
    #[error("{}: {refusal}", refusal.code())]
    Mail {
        /// The mail refusal.
        refusal: crate::vocab::mail::MailRefusal,
    },
}

crate::codes::stable_codes! {
    ReadRefusal {
        0 => Access,
        1 => Board,
        2 => Mail,
    }
}

/// The answer to a [`Query`].
///
/// (`Query` variants added later sit at the end: postcard encodes the variant index.)
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum QueryResult {
    /// A CAS key: `None` when absent.
    Kv(Option<KvEntry>),
    /// Leases with at least one live holder or waiter.
    Leases(Vec<LeaseView>),
    /// Counters.
    Counters(Vec<CounterView>),
    /// Ledger entries in partition then sequence order.
    LedgerEntries(Vec<LedgerEntryView>),
    /// The earliest pending deadline in ms, if any.
    NextDeadline(Option<u64>),
    /// CAS keys of a range read, in key order, with their values and revisions.
    KvRange(KvPage),
    /// Changes of watched keys ([`Query::KvWatch`]).
    KvEvents(crate::vocab::watch::WatchPage),
    /// The live leader of an election group: `None` when it has none.
    ElectionLeader(Option<ElectionLeader>),
    /// Live election leaders in group order.
    Elections(Vec<ElectionLeader>),
    /// Schedules in name order, with their last firing.
    Schedules(Vec<ScheduleView>),
    /// This cell does not serve the read's point at the router's epoch.
    WrongRange {
        /// The epoch this cell knows for the point (0 = not owned here).
        epoch: u64,
    },
    /// The ranges this cell owns.
    Ranges(Vec<RangeView>),
    /// Exported rows and where the next page starts (`None` = done).
    RangeRows {
        /// Raw stored rows.
        rows: Vec<(Vec<u8>, Vec<u8>)>,
        /// The key after which the next page starts.
        next: Option<Vec<u8>>,
    },
    /// A page of the changes a move's source recorded (`Query::RangeChanges`).
    RangeChanges {
        /// The target the record is for; `None` when the cell holds no complete record of
        /// this range (none began, or it outgrew `RANGE_CHANGED_KEYS_MAX`): the whole range
        /// must be copied.
        to_cell: Option<u64>,
        /// Changed rows as the cell holds them now.
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        /// Changed rows the cell no longer holds.
        deletes: Vec<Vec<u8>>,
        /// The key after which the next page starts.
        next: Option<Vec<u8>>,
    },
    /// A page of a move's record on its source, before the freeze (`Query::RangePending`).
    RangePending {
        /// The target the record is for; `None` when the cell holds no complete record of
        /// this range (none began, or it outgrew `RANGE_CHANGED_KEYS_MAX`).
        to_cell: Option<u64>,
        /// The record's change count when this page was read.
        seq: u64,
        /// How many keys the record holds.
        changed: u32,
        /// Recorded rows as the cell holds them now.
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        /// Recorded rows the cell no longer holds.
        deletes: Vec<Vec<u8>>,
        /// The key after which the next page starts.
        next: Option<Vec<u8>>,
    },
    /// A move's copy as its source records it (`Query::RangeCopy`).
    RangeCopy {
        /// The target of the cell's complete record of the range; `None`: no complete
        /// record (none began, or it outgrew `RANGE_CHANGED_KEYS_MAX`).
        to_cell: Option<u64>,
        /// With a complete record: the last raw key the target holds a clean copy of
        /// (empty: cleared, nothing copied yet); `None`: the target must be cleared first.
        copied_after: Option<Vec<u8>>,
    },
    /// Follow-ups still in the outbox, in sequence order (`Query::FollowUps`).
    FollowUps(Vec<crate::vocab::next::Next>),
    /// A team: `None` when it does not exist (or is dissolving).
    Team(Option<TeamView>),
    /// Tasks of a board list, dead-letter list or cell-tier list.
    Tasks(Vec<TaskView>),
    /// A team board's counts: `None` when the team does not exist (or is dissolving).
    BoardStats(Option<BoardStatsView>),
    /// Mailbox messages in sequence order.
    Mailbox(Vec<MailboxMessage>),
    /// The next sequence and previous hash of a handoff channel.
    OutboxHead {
        /// The next sequence to seal.
        seq: u64,
        /// The hash the next envelope must name as previous.
        prev_hash: Vec<u8>,
    },
    /// Unacknowledged envelopes: (sequence, signed bytes).
    Envelopes(Vec<(u64, Vec<u8>)>),
    /// Cell ids.
    Cells(Vec<u64>),
    /// Alarms: (time, text), oldest first.
    Alarms(Vec<(u64, String)>),
    /// The read was refused.
    Refused(ReadRefusal),
    /// Work entries.
    WorkEntries(Vec<crate::vocab::work::WorkEntryView>),
    /// Audit rows.
    WorkAudit(Vec<crate::vocab::work::AuditView>),
    /// A cell's live entries and quota.
    WorkQuota(crate::vocab::work::QuotaView),
    /// Admission limits.
    WorkLimits(crate::vocab::work::WorkLimits),
    /// Mail in sequence order.
    Mail(Vec<crate::vocab::mail::MailView>),
    /// A cell's gauges.
    Gauges(crate::vocab::gauges::GaugesView),
    /// One proposal, if it exists.
    Proposal(Option<Box<crate::vocab::vote::ProposalView>>),
    /// Ballots in sequence order.
    Ballots(Vec<crate::vocab::vote::BallotView>),
    /// Proposals, oldest first.
    Proposals(Vec<crate::vocab::vote::ProposalView>),
    /// Live path reservations, by repository, pattern, holder.
    Reservations(Vec<crate::vocab::paths::ReservationView>),
}

crate::codes::stable_codes! {
    QueryResult {
        0 => Kv,
        1 => Leases,
        2 => Counters,
        3 => LedgerEntries,
        4 => NextDeadline,
        5 => KvRange,
        6 => KvEvents,
        7 => ElectionLeader,
        8 => Elections,
        9 => Schedules,
        10 => WrongRange,
        11 => Ranges,
        12 => RangeRows,
        13 => Team,
        14 => Tasks,
        15 => BoardStats,
        16 => Mailbox,
        17 => OutboxHead,
        18 => Envelopes,
        19 => Cells,
        20 => Alarms,
        21 => Refused,
        22 => WorkEntries,
        23 => WorkAudit,
        24 => WorkQuota,
        25 => WorkLimits,
        26 => Mail,
        27 => Gauges,
        28 => Proposal,
        29 => Ballots,
        30 => Proposals,
        31 => Reservations,
        32 => RangeChanges,
        33 => FollowUps,
        34 => RangeCopy,
        35 => RangePending,
    }
}

/// One ring range owned by a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeView {
    /// First point.
    pub start: u64,
    /// Last point (inclusive).
    pub last: u64,
    /// The range's epoch.
    pub epoch: u64,
    /// Frozen: a move is under way and the cell no longer serves it.
    pub frozen: bool,
    /// A frozen range's move target (0: not frozen, or frozen by a version-1 freeze).
    pub to_cell: u64,
    /// Until when (stamp ms) the frozen range's move holds it (0: no hold).
    pub until_ms: u64,
}

/// One lease with its live holders and waiters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseView {
    /// Which lease.
    pub lease: ResourceId,
    /// Declared slots at the last acquire.
    pub slots: u32,
    /// Live holders, by fence.
    pub holders: Vec<LeaseHolder>,
    /// Queued waiters in FIFO order: (holder, wait deadline).
    pub waiters: Vec<(String, u64)>,
}

/// One counter's state in its current period.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterView {
    /// Which counter.
    pub counter: ResourceId,
    /// Consumed in `period`.
    pub consumed: u64,
    /// Cap at the last consume.
    pub cap: u64,
    /// Period label of the last consume (e.g. `2026-07-21`).
    pub period: String,
}

/// One ledger entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntryView {
    /// Ledger and partition (`key`).
    pub ledger: ResourceId,
    /// Gap-free sequence in the partition, from 1.
    pub seq: u64,
    /// The entry bytes (JSON from the CLI and engine).
    #[serde(with = "serde_bytes")]
    pub entry: Vec<u8>,
    /// Identity of the appender.
    pub appended_by: String,
    /// Stamp time of the append.
    pub at_ms: u64,
}

/// One schedule's last firing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleView {
    /// The schedule's name.
    pub name: String,
    /// The spec of the last firing.
    pub spec: String,
    /// The IANA time zone of the last firing.
    pub timezone: String,
    /// The latest due time fired (ms since the Unix epoch).
    pub last_due_ms: u64,
    /// Who fired it.
    pub claimant: String,
    /// The fence of that firing.
    pub fence: u64,
}

/// One team.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamView {
    /// The team's name.
    pub team: String,
    /// Its supervisor (the creator).
    pub supervisor: String,
    /// Its members in join order (the supervisor first).
    pub members: Vec<String>,
    /// Its parent team, if any.
    pub parent: Option<String>,
    /// Its board's settings.
    pub settings: BoardSettings,
}

/// Counts of one team's board, and of this cell's cell-tier board.
///
/// `ready`, `claimed` and `dead` count the tasks in that state on a board now (a claim
/// whose window passed counts as claimed until the tick redelivers it); `done` counts every
/// task completed on it, also those already pruned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardStatsView {
    /// Ready tasks.
    pub ready: u64,
    /// Claimed tasks.
    pub claimed: u64,
    /// Tasks completed, ever.
    pub done: u64,
    /// Dead-lettered tasks (the dead-letter depth).
    pub dead: u64,
    /// The tier of the team's board (always `Local`).
    pub tier: Tier,
    /// Ready tasks on this cell's cell-tier board.
    pub cell_ready: u64,
    /// Claimed tasks on the cell tier.
    pub cell_claimed: u64,
    /// Tasks completed on the cell tier, ever.
    pub cell_done: u64,
    /// Dead-lettered tasks on the cell tier.
    pub cell_dead: u64,
}

/// What a mailbox message is about (a closed set: an unknown kind does not decode).
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum MessageKind {
    /// A task posted by the team was dead-lettered.
    DeadLetter {
        /// The task.
        task_id: String,
        /// Deliveries made before it died.
        delivery_count: u32,
    },
}

crate::codes::stable_codes! {
    MessageKind {
        0 => DeadLetter,
    }
}

/// One message of an agent's mailbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailboxMessage {
    /// Gap-free sequence per mailbox, from 1.
    pub seq: u64,
    /// Who sent it (`board/{team}` for a board's notices).
    pub from: String,
    /// What it is about.
    pub kind: MessageKind,
    /// Human-readable text.
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
    /// Stamp time of the send.
    pub at_ms: u64,
}

/// One page of a range read: the rows, and where the next page starts when this one
/// stopped early (at its row limit or at `limits::LIST_BYTES_MAX` of keys and values). A
/// client pages on `resume_after`, never on the row count: a caller's read leaves out rows
/// it may not see, so a short page is not the end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvPage {
    /// The rows, in key order.
    pub rows: Vec<(Vec<u8>, KvEntry)>,
    /// The last key this page looked at, when more follow; `None` at the end.
    pub resume_after: Option<Vec<u8>>,
}
