//! The tools' arguments, with their JSON schemas. No argument names who acts: the caller
//! is the agent the server proved, and an argument that tries to name another one is
//! refused before any of these is read (see `IDENTITY_ARGUMENTS`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Arguments that would name who acts; the caller is the transport's credential, never an
/// argument, so a call carrying one of these is refused `not_authorized`.
pub(super) const IDENTITY_ARGUMENTS: &[&str] = &[
    "agent",
    "acting_for",
    "act_for",
    "appended_by",
    "as",
    "by",
    "caller",
    "from",
    "holder",
    "identity",
    "on_behalf_of",
    "opener",
    "owner",
    "principal",
    "sender",
    "token",
    "user",
    "voter",
    "worker",
];

/// `board_post`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardPost {
    /// The team whose board takes the task (you must be a member).
    pub(crate) team: String,
    /// The task, a JSON object (at most the team's task_bytes_max, 64 KiB by default).
    pub(crate) task: Map<String, Value>,
}

/// `board_claim`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardClaim {
    /// The team whose board to claim from.
    pub(crate) team: String,
    /// When no task is ready, wait up to this many seconds for one (at most 300), woken by
    /// the board's changes.
    pub(crate) wait_s: Option<u64>,
    /// Claim up to this many of the oldest ready tasks in one call (1 to 16), each with its
    /// own fence and deadline, answered as `claims`; complete each with `board_complete`.
    /// Without it, one task, answered as `task`.
    pub(crate) max: Option<u32>,
}

/// `board_complete`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardComplete {
    pub(crate) team: String,
    pub(crate) task_id: String,
    /// The fence `board_claim` answered.
    pub(crate) fence: u64,
    /// The task's result (any JSON; default null).
    pub(crate) result: Option<Value>,
}

/// `board_fail`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardFail {
    pub(crate) team: String,
    pub(crate) task_id: String,
    pub(crate) fence: u64,
    /// What went wrong (kept with the task's failures).
    pub(crate) error: String,
}

/// `board_release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardRelease {
    pub(crate) team: String,
    pub(crate) task_id: String,
    pub(crate) fence: u64,
}

/// `board_extend`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardExtend {
    pub(crate) team: String,
    pub(crate) task_id: String,
    pub(crate) fence: u64,
    /// Seconds from now the claim lasts (never shortens it).
    pub(crate) by_s: u64,
}

/// A message's type, as a client sends it.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MailKind {
    /// Information.
    Inform,
    /// A question; the recipient answers with `mail_reply`.
    Ask,
    /// An answer.
    Reply,
    /// Re-tasks the recipient: only its parent, supervisor, lineage or a grantee.
    Directive,
}

/// `mail_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailSend {
    /// The recipient: an agent name, `agent:NAME`, `team:NAME` or `entry:ID`.
    pub(crate) to: String,
    #[serde(rename = "type")]
    pub(crate) kind: MailKind,
    /// The message (at most 16 KiB).
    pub(crate) text: String,
    /// A JSON document carried with the text (at most 64 KiB).
    pub(crate) payload: Option<Value>,
    /// A key of your own for this send: a send retried with the same key (after a timeout
    /// or a lost answer) is delivered once, and answers the first send's id.
    pub(crate) idempotency_key: Option<String>,
}

/// `mail_send_many`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailSendMany {
    /// The recipient, as `mail_send`'s `to`: one mailbox for the whole batch.
    pub(crate) to: String,
    #[serde(rename = "type")]
    pub(crate) kind: MailKind,
    /// The messages, in order (at most 64, each at most 16 KiB).
    pub(crate) texts: Vec<String>,
    /// A key of your own for this batch: retried with the same key, it is delivered once
    /// and answers the first attempt's results.
    pub(crate) idempotency_key: Option<String>,
}

/// `mail_inbox`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailInbox {
    /// When the inbox holds nothing after `after`, wait up to this many seconds (at most
    /// 300) for a message.
    pub(crate) wait_s: Option<u64>,
    /// Only messages after this sequence number (the `next_after` of the page before).
    pub(crate) after: Option<u64>,
    /// Messages on this page at most (default and ceiling 100).
    pub(crate) limit: Option<u32>,
}

/// `mail_ack`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailAck {
    /// Acknowledge (remove) your messages up to and including this sequence number.
    pub(crate) through_seq: u64,
}

/// `mail_take`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailTake {
    /// First acknowledge (remove) your messages up to and including this sequence number.
    pub(crate) ack_through: Option<u64>,
    /// Messages to take at most (default 10, at most 100).
    pub(crate) max: Option<u32>,
    /// Seconds the taken messages stay hidden from your other takes before they come back
    /// unless acknowledged (default 30, at most 3600).
    pub(crate) visibility_s: Option<u64>,
    /// When nothing waits, wait up to this many seconds (at most 300) for a message.
    pub(crate) wait_s: Option<u64>,
}

/// `mail_reply`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailReply {
    /// The id of a message in your inbox (`agent:you#7`).
    pub(crate) id: String,
    pub(crate) text: String,
    pub(crate) payload: Option<Value>,
}

/// When a budget's period starts again.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reset {
    Hourly,
    Daily,
    Weekly,
    Monthly,
}

/// `budget_consume`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BudgetConsume {
    /// The counter's name.
    pub(crate) counter: String,
    /// The key within the counter (one budget per key).
    pub(crate) key: String,
    pub(crate) amount: u64,
    /// The most the period may consume.
    pub(crate) cap: u64,
    pub(crate) reset: Reset,
    /// IANA time zone of the period's boundary (default UTC).
    pub(crate) timezone: Option<String>,
    /// A team's budget (its members only) instead of a shared one.
    pub(crate) team: Option<String>,
}

/// `lease_acquire`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseAcquire {
    /// The lease's name.
    pub(crate) name: String,
    /// The key within it (one pool of slots per key).
    pub(crate) key: String,
    /// Seconds until the slot lapses unless acquired again.
    pub(crate) ttl_s: u64,
    /// Slots of the pool (default 1).
    pub(crate) slots: Option<u32>,
    /// Queue up to this many seconds (at most 300) when every slot is taken.
    pub(crate) wait_s: Option<u64>,
    /// A team's lease (its members only) instead of a shared one.
    pub(crate) team: Option<String>,
}

/// `lease_release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseRelease {
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) team: Option<String>,
}

/// `ledger_append`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LedgerAppend {
    pub(crate) ledger: String,
    pub(crate) partition: String,
    /// The entry (any JSON).
    pub(crate) entry: Value,
    /// Seconds the entry is kept (default 90 days).
    pub(crate) retain_s: Option<u64>,
    /// A team's ledger (its members only) instead of a shared one.
    pub(crate) team: Option<String>,
}

/// How ballots are counted.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Method {
    Plurality,
    Approval,
    Borda,
    Irv,
    Schulze,
}

/// A role that votes.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    Coordinator,
    Worker,
}

/// `vote_open`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VoteOpen {
    pub(crate) team: String,
    pub(crate) title: String,
    /// 2 to 64 options, in order (the order breaks ties).
    pub(crate) options: Vec<String>,
    /// Default plurality.
    pub(crate) method: Option<Method>,
    /// The share of the electorate that must vote (0.5, 2/3; default 0.5).
    pub(crate) quorum: Option<String>,
    /// majority, two_thirds, three_quarters or a fraction (default majority).
    pub(crate) threshold: Option<String>,
    /// Seconds it stays open.
    pub(crate) closes_s: u64,
    /// The roles that vote (default coordinators).
    pub(crate) electorate: Option<Vec<Role>>,
    /// Close as soon as every voter voted.
    pub(crate) until_all_voted: Option<bool>,
}

/// `vote_cast`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VoteCast {
    pub(crate) proposal: String,
    /// One option (plurality), a set (approval) or a ranking, best first.
    pub(crate) choice: Vec<String>,
}

/// `vote_show`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VoteShow {
    pub(crate) proposal: String,
}

/// `doc_get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DocGet {
    pub(crate) team: String,
    /// The document's name within the team.
    pub(crate) name: String,
}

/// `doc_put`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DocPut {
    pub(crate) team: String,
    pub(crate) name: String,
    /// The new document (any JSON).
    pub(crate) doc: Value,
    /// Write only if the document is at this version (0: it must not exist yet).
    pub(crate) expect_version: u64,
}

/// `start_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartSession {
    /// Your team: its board's stats and your claims on it are included.
    pub(crate) team: Option<String>,
    /// The work entry to register under (you must own it or an ancestor).
    pub(crate) parent: Option<String>,
}

/// `reserve_paths`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReservePaths {
    /// The repository's name (its `git config whip.repo`, else its top directory's name).
    pub(crate) repo: String,
    /// Paths or globs relative to the repository's top (`*` and `?` within a segment, `**`
    /// a whole segment for any depth); at most 32.
    pub(crate) paths: Vec<String>,
    /// Exclusive (nobody else may hold an overlapping path) or shared (others may share it).
    pub(crate) exclusive: bool,
    /// Seconds until the reservation lapses unless reserved again (1 to 86400).
    pub(crate) ttl_s: u64,
    /// Renew only: every path must be yours at exactly this fence.
    pub(crate) fence: Option<u64>,
}

/// `release_paths`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReleasePaths {
    /// The repository's name.
    pub(crate) repo: String,
    /// The paths as reserved; all of yours in the repository when absent or empty.
    pub(crate) paths: Option<Vec<String>>,
    /// Only reservations granted at this fence.
    pub(crate) fence: Option<u64>,
}
