//! Effects as types: what an effect does ([`EffectKind`]), where it is in its lifecycle
//! ([`EffectState`]), how a run of it ended ([`RunState`]), and its arguments, typed per
//! kind ([`Args`]).
//!
//! The stored row keeps the shape it always had (`"kind": "acquire"`, `"state": "queued"`,
//! `"args": {…}`), so rows written before these types still read and every CLI and
//! `--json` output prints the same strings. The arguments are decoded by kind when a row
//! is read; a row whose arguments do not decode keeps its raw value as
//! [`Args::Malformed`] with the decoder's message, and the worker fails that effect with the
//! message (`runtime.malformed_args`) instead of running it on defaults. Every default the
//! language gives (a lease's ttl, a claim's ttl, a ledger's retention, …) is applied once,
//! when the stepper creates the effect, from a named constant in `limits.rs`, so the stored
//! row always carries the value the worker uses.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::executor::effect::ExecArgs;

/// What an effect does. The code is the row's `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectKind {
    /// `timer D`: completes at its time.
    Timer,
    /// `acquire LEASE for KEY`.
    Acquire,
    /// `release x` of a lease or a claim.
    Release,
    /// `renew x` of a lease or a claim.
    Renew,
    /// `consume COUNTER for KEY amount N`.
    Consume,
    /// `append CLASS {…} to LEDGER`.
    Append,
    /// `invoke WORKFLOW {…}`: a child instance.
    Invoke,
    /// `file TRACKER {…}`.
    FileIssue,
    /// `claim issue`.
    Claim,
    /// `finish x`.
    Finish,
    /// `send via CHANNEL` (inform or directive).
    #[serde(rename = "message.send")]
    MessageSend,
    /// `ask via CHANNEL`: waits for a reply.
    #[serde(rename = "message.ask")]
    MessageAsk,
    /// `vote in TEAM`.
    Vote,
    /// `exec [argv]` through the compute plane.
    Exec,
    /// `tell AGENT … PROMPT`: an agent turn run by a provider.
    #[serde(rename = "agent.tell")]
    AgentTell,
    /// `coerce NAME(…)`: a typed model call run by a provider.
    #[serde(rename = "schema.coerce")]
    SchemaCoerce,
}

impl EffectKind {
    /// The stable code (the row's `kind`).
    pub fn code(self) -> &'static str {
        match self {
            EffectKind::Timer => "timer",
            EffectKind::Acquire => "acquire",
            EffectKind::Release => "release",
            EffectKind::Renew => "renew",
            EffectKind::Consume => "consume",
            EffectKind::Append => "append",
            EffectKind::Invoke => "invoke",
            EffectKind::FileIssue => "file_issue",
            EffectKind::Claim => "claim",
            EffectKind::Finish => "finish",
            EffectKind::MessageSend => "message.send",
            EffectKind::MessageAsk => "message.ask",
            EffectKind::Vote => "vote",
            EffectKind::Exec => "exec",
            EffectKind::AgentTell => "agent.tell",
            EffectKind::SchemaCoerce => "schema.coerce",
        }
    }
}

impl std::fmt::Display for EffectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// Where an effect is: `queued → running → completed | failed | timed_out | cancelled`, or
/// one of the blocks, which are never terminal: the worker looks at a blocked effect again
/// on every pass and claims it once its cause is gone, with nobody queueing it by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectState {
    /// Waiting for a worker (and its `not_before_ms`).
    Queued,
    /// A run holds it.
    Running,
    /// Settled: it did what it asked (its outcome may still say `contended` or `over`).
    Completed,
    /// Settled: it could not.
    Failed,
    /// Settled: its time ran out.
    TimedOut,
    /// Settled: cancelled by the operator or the instance's end.
    Cancelled,
    /// A binding-time block: the provider's binding is unconfigured, lacks or is refused its
    /// credential, is unhealthy, or an enforcement point refuses the effect.
    Blocked,
    /// It acts on an effect that has not settled yet (a `release`, `renew` or `finish` of
    /// a binding requested before its `acquire` or `claim` settled).
    BlockedByDependency,
    /// A capacity bound defers it (the work registry has no room for a child instance).
    BlockedByCapacity,
    /// A capability it needs is not registered.
    BlockedByCapability,
    /// A profile it needs is not registered.
    BlockedByProfile,
}

impl EffectState {
    /// Every state, in lifecycle order.
    pub const ALL: [EffectState; 11] = [
        EffectState::Queued,
        EffectState::Running,
        EffectState::Completed,
        EffectState::Failed,
        EffectState::TimedOut,
        EffectState::Cancelled,
        EffectState::Blocked,
        EffectState::BlockedByDependency,
        EffectState::BlockedByCapacity,
        EffectState::BlockedByCapability,
        EffectState::BlockedByProfile,
    ];

    /// The stable code (the row's `state`).
    pub fn code(self) -> &'static str {
        match self {
            EffectState::Queued => "queued",
            EffectState::Running => "running",
            EffectState::Completed => "completed",
            EffectState::Failed => "failed",
            EffectState::TimedOut => "timed_out",
            EffectState::Cancelled => "cancelled",
            EffectState::Blocked => "blocked",
            EffectState::BlockedByDependency => "blocked_by_dependency",
            EffectState::BlockedByCapacity => "blocked_by_capacity",
            EffectState::BlockedByCapability => "blocked_by_capability",
            EffectState::BlockedByProfile => "blocked_by_profile",
        }
    }

    /// Nothing more happens to the effect.
    pub fn settled(self) -> bool {
        matches!(
            self,
            EffectState::Completed
                | EffectState::Failed
                | EffectState::TimedOut
                | EffectState::Cancelled
        )
    }

    /// One of the blocks.
    pub fn blocked(self) -> bool {
        matches!(
            self,
            EffectState::Blocked
                | EffectState::BlockedByDependency
                | EffectState::BlockedByCapacity
                | EffectState::BlockedByCapability
                | EffectState::BlockedByProfile
        )
    }

    /// Failed or timed out: what `retry` takes.
    pub fn unsuccessful(self) -> bool {
        matches!(self, EffectState::Failed | EffectState::TimedOut)
    }
}

impl std::fmt::Display for EffectState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// Why an effect is blocked: the seed's categories, schedule-time first (the scheduler sees
/// them before it claims the effect), then binding-time (the provider's binding refuses).
/// Stored in `policy_block.category` by [`BlockCategory::code`], never by position: the
/// order of the variants means nothing, and a code once written is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum BlockCategory {
    /// A capability the effect needs is not registered.
    Capability,
    /// A profile the effect needs is not registered.
    Profile,
    /// A capacity bound defers it (it starts once the bound has room).
    Capacity,
    /// It waits for another effect to settle.
    Dependency,
    /// The provider's binding is not configured.
    ProviderConfig,
    /// The provider's credential is missing or refused.
    Credentials,
    /// An enforcement point refuses it (a policy the operator can change).
    Enforcement,
    /// The provider cannot be reached or answers wrongly.
    ProviderHealth,
}

impl BlockCategory {
    /// Every category.
    pub const ALL: [BlockCategory; 8] = [
        BlockCategory::Capability,
        BlockCategory::Profile,
        BlockCategory::Capacity,
        BlockCategory::Dependency,
        BlockCategory::ProviderConfig,
        BlockCategory::Credentials,
        BlockCategory::Enforcement,
        BlockCategory::ProviderHealth,
    ];

    /// The stable code (`policy_block.category`).
    pub fn code(self) -> &'static str {
        match self {
            BlockCategory::Capability => "capability",
            BlockCategory::Profile => "profile",
            BlockCategory::Capacity => "capacity",
            BlockCategory::Dependency => "dependency",
            BlockCategory::ProviderConfig => "provider_config",
            BlockCategory::Credentials => "credentials",
            BlockCategory::Enforcement => "enforcement",
            BlockCategory::ProviderHealth => "provider_health",
        }
    }

    /// The category of `code` (`None`: no category has it).
    pub fn parse(code: &str) -> Option<BlockCategory> {
        BlockCategory::ALL.into_iter().find(|c| c.code() == code)
    }

    /// The state an effect blocked for this reason is in: each schedule-time category has
    /// its own (`blocked_by_…`), every binding-time one is `blocked`.
    pub fn state(self) -> EffectState {
        match self {
            BlockCategory::Capability => EffectState::BlockedByCapability,
            BlockCategory::Profile => EffectState::BlockedByProfile,
            BlockCategory::Capacity => EffectState::BlockedByCapacity,
            BlockCategory::Dependency => EffectState::BlockedByDependency,
            BlockCategory::ProviderConfig
            | BlockCategory::Credentials
            | BlockCategory::Enforcement
            | BlockCategory::ProviderHealth => EffectState::Blocked,
        }
    }
}

impl From<BlockCategory> for String {
    fn from(c: BlockCategory) -> String {
        c.code().to_string()
    }
}

impl TryFrom<String> for BlockCategory {
    type Error = String;
    fn try_from(code: String) -> Result<BlockCategory, String> {
        BlockCategory::parse(&code).ok_or_else(|| format!("unknown block category `{code}`"))
    }
}

impl std::fmt::Display for BlockCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// `policy_block: {category, detail}`: why an effect is blocked. The detail is for the
/// operator and never holds a secret (a token, a credential, a password in a URL).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyBlock {
    /// The category.
    pub category: BlockCategory,
    /// What is wrong, for the operator.
    pub detail: String,
}

impl PolicyBlock {
    /// A block of `category` saying `detail`.
    pub fn new(category: BlockCategory, detail: impl Into<String>) -> PolicyBlock {
        PolicyBlock {
            category,
            detail: detail.into(),
        }
    }

    /// The state of an effect this block holds.
    pub fn state(&self) -> EffectState {
        self.category.state()
    }
}

/// `policy_block: { category: credentials, detail: "…" }`: the form `whip effects` and
/// `whip status` print (the detail JSON-quoted, so a brace in it cannot end the block).
impl std::fmt::Display for PolicyBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let detail = Value::String(self.detail.clone());
        write!(
            f,
            "policy_block: {{ category: {}, detail: {detail} }}",
            self.category.code()
        )
    }
}

/// How an effect settled (the `state` of an `effect.terminal` event).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Terminal {
    /// It did what it asked.
    Completed,
    /// It could not.
    Failed,
    /// Its time ran out.
    TimedOut,
    /// It was cancelled.
    Cancelled,
}

impl From<Terminal> for EffectState {
    fn from(t: Terminal) -> EffectState {
        match t {
            Terminal::Completed => EffectState::Completed,
            Terminal::Failed => EffectState::Failed,
            Terminal::TimedOut => EffectState::TimedOut,
            Terminal::Cancelled => EffectState::Cancelled,
        }
    }
}

impl std::fmt::Display for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(EffectState::from(*self).code())
    }
}

/// How a run is or ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Its worker holds the effect.
    Running,
    /// It found the effect not done yet; a later pass looks again.
    Waiting,
    /// Its worker stopped (another run reclaimed it, or `whip recover` requeued it).
    Abandoned,
    /// The effect completed.
    Completed,
    /// The effect failed.
    Failed,
    /// The effect timed out.
    TimedOut,
    /// The effect was cancelled.
    Cancelled,
}

impl From<Terminal> for RunState {
    fn from(t: Terminal) -> RunState {
        match t {
            Terminal::Completed => RunState::Completed,
            Terminal::Failed => RunState::Failed,
            Terminal::TimedOut => RunState::TimedOut,
            Terminal::Cancelled => RunState::Cancelled,
        }
    }
}

impl RunState {
    /// The stable code (the run row's `state`).
    pub fn code(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Waiting => "waiting",
            RunState::Abandoned => "abandoned",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::TimedOut => "timed_out",
            RunState::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// Where an `after` continuation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContState {
    /// Waiting for its effect.
    Pending,
    /// Its block ran.
    Done,
    /// Its effect settled another way.
    Dead,
}

/// `timer D` or `timer until T`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimerArgs {
    /// The delay the program wrote (0 for `timer until`).
    pub seconds: u64,
    /// `timer until`: the instant it is due (ms since the epoch). Absent in rows written
    /// before `timer until` existed, which were all `timer D`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
}

/// `acquire`: the lease as declared (owner, name, slots, ttl) and the program's key and
/// wait. A `release` or `renew` of it carries the same fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseArgs {
    /// The declaring owner.
    pub owner: String,
    /// The lease's name.
    pub name: String,
    /// The key.
    pub key: String,
    /// Holders at once (declared `slots`, or `LEASE_SLOTS_DEFAULT`).
    pub slots: u32,
    /// How long a hold lasts (declared `ttl`, `renew … until D`, or `LEASE_TTL_MS_DEFAULT`).
    pub ttl_ms: u64,
    /// `wait D` (0: no wait).
    pub wait_ms: u64,
    /// When the wait ends (creation time plus the wait).
    pub wait_until_ms: u64,
    /// `until ttl`.
    pub until_ttl: bool,
}

/// What a claim held once it succeeded (the claim effect's output): the issue and its
/// fence, and the rest of the output as it was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Held {
    /// The issue id.
    pub issue: String,
    /// The claim's fence.
    pub fence: Option<u64>,
    /// The rest of the claim's output.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// The issue a `claim` names: a tracker issue value with its id (kept whole).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub struct Issue(Value);

impl Issue {
    /// The issue's id.
    pub fn id(&self) -> &str {
        self.0["id"].as_str().expect("checked when decoded")
    }
}

impl TryFrom<Value> for Issue {
    type Error = String;
    fn try_from(v: Value) -> Result<Issue, String> {
        match v.get("id") {
            Some(Value::String(_)) => Ok(Issue(v)),
            _ => Err(format!("the claimed issue has no id: {v}")),
        }
    }
}

impl From<Issue> for Value {
    fn from(i: Issue) -> Value {
        i.0
    }
}

/// `claim issue [for D]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimArgs {
    /// The issue.
    pub issue: Issue,
    /// How long the claim lasts (`for D`, or `CLAIM_TTL_MS_DEFAULT`).
    pub ttl_ms: u64,
}

/// A `release` or `renew` of a claim: the claim's arguments and what it held.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimUpstream {
    /// The issue.
    pub issue: Issue,
    /// The claim's ttl, or the renewal's (`renew … until D`).
    pub ttl_ms: u64,
    /// What the claim held (`None` when it had not succeeded).
    pub held: Option<Held>,
}

/// What a `release` or `renew` acts on: the effect its binding names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "upstream_kind", rename_all = "snake_case")]
pub enum Upstream {
    /// A lease hold.
    Acquire(LeaseArgs),
    /// A tracker claim.
    Claim(ClaimUpstream),
}

/// How a counter resets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterReset {
    /// At the top of each local hour.
    Hourly,
    /// At local midnight.
    Daily,
    /// At local midnight starting an ISO week.
    Weekly,
    /// At local midnight on the first of the month.
    Monthly,
}

impl From<CounterReset> for whip_fabric::Reset {
    fn from(r: CounterReset) -> whip_fabric::Reset {
        match r {
            CounterReset::Hourly => whip_fabric::Reset::Hourly,
            CounterReset::Daily => whip_fabric::Reset::Daily,
            CounterReset::Weekly => whip_fabric::Reset::Weekly,
            CounterReset::Monthly => whip_fabric::Reset::Monthly,
        }
    }
}

/// `consume COUNTER for KEY amount N`: the counter as declared and the program's values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumeArgs {
    /// The declaring owner.
    pub owner: String,
    /// The counter's name.
    pub name: String,
    /// The key.
    pub key: String,
    /// The amount (a negative value was written as 0).
    pub amount: u64,
    /// The declared cap.
    pub cap: u64,
    /// The declared reset period.
    pub reset: CounterReset,
    /// The declared timezone (or `COUNTER_TIMEZONE_DEFAULT`).
    pub timezone: String,
}

/// `append CLASS {…} to LEDGER`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendArgs {
    /// The declaring owner.
    pub owner: String,
    /// The ledger's name.
    pub name: String,
    /// The entry's class.
    pub class: String,
    /// The partition (the entry's partition field as text).
    pub partition: String,
    /// The entry.
    pub entry: Value,
    /// How long the ledger keeps it (declared `retain`, or `LEDGER_RETAIN_MS_DEFAULT`).
    pub retain_ms: u64,
}

/// `invoke WORKFLOW {…}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvokeArgs {
    /// The child's workflow.
    pub workflow: String,
    /// Its input.
    pub input: Value,
}

/// `file TRACKER {…}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileIssueArgs {
    /// The tracker.
    pub tracker: String,
    /// Its owner.
    pub owner: String,
    /// The issue's fields.
    pub issue: Value,
}

/// `finish x [{…}]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinishArgs {
    /// The claim effect.
    pub claim: Option<String>,
    /// The binding the program named.
    pub binding: String,
    /// The summary (`null`: none).
    pub summary: Value,
    /// What the claim held (`None` when it had not succeeded).
    pub held: Option<Held>,
}

/// How a message is meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MailWord {
    /// `send` (inform).
    Inform,
    /// `send directive`.
    Directive,
    /// `ask`.
    Ask,
}

/// `send|ask via CHANNEL {…}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MailArgs {
    /// The channel.
    pub channel: String,
    /// The recipient the channel declares (`kind:name`).
    pub to: Option<String>,
    /// How it is meant.
    #[serde(rename = "type")]
    pub word: MailWord,
    /// The text.
    pub text: String,
    /// The payload (`null`: none).
    pub payload: Value,
    /// The conversation.
    pub thread: Option<String>,
    /// How long an ask waits for its reply (0 for a send).
    pub within_ms: u64,
    /// The channel's messaging provider when it is not `fabric` (`local`, `stdio`, …;
    /// absent in a fabric send's stored arguments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The channel's `destination`, when it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
}

/// `vote in TEAM {…} closes D`, with the language's defaults applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VoteArgs {
    /// The team.
    pub team: String,
    /// The title.
    pub title: String,
    /// The options.
    pub options: Vec<String>,
    /// The tally method.
    pub method: String,
    /// The quorum.
    pub quorum: String,
    /// The threshold.
    pub threshold: String,
    /// Who votes (roles).
    pub electorate: Vec<String>,
    /// How long it stays open.
    pub duration_ms: u64,
}

/// A stored row's arguments that do not decode for its kind.
#[derive(Clone, Debug, PartialEq)]
pub struct Malformed {
    /// The row's kind.
    pub kind: EffectKind,
    /// The arguments as stored (written back unchanged).
    pub raw: Value,
    /// Why they do not decode.
    pub error: String,
}

/// An effect's arguments, typed per kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Args {
    /// [`EffectKind::Timer`].
    Timer(TimerArgs),
    /// [`EffectKind::Acquire`].
    Acquire(LeaseArgs),
    /// [`EffectKind::Release`].
    Release(Upstream),
    /// [`EffectKind::Renew`].
    Renew(Upstream),
    /// [`EffectKind::Consume`].
    Consume(ConsumeArgs),
    /// [`EffectKind::Append`].
    Append(AppendArgs),
    /// [`EffectKind::Invoke`].
    Invoke(InvokeArgs),
    /// [`EffectKind::FileIssue`].
    FileIssue(FileIssueArgs),
    /// [`EffectKind::Claim`].
    Claim(ClaimArgs),
    /// [`EffectKind::Finish`].
    Finish(FinishArgs),
    /// [`EffectKind::MessageSend`].
    MessageSend(MailArgs),
    /// [`EffectKind::MessageAsk`].
    MessageAsk(MailArgs),
    /// [`EffectKind::Vote`].
    Vote(VoteArgs),
    /// [`EffectKind::Exec`].
    Exec(ExecArgs),
    /// [`EffectKind::AgentTell`].
    AgentTell(crate::runtime::agent::TellArgs),
    /// [`EffectKind::SchemaCoerce`].
    SchemaCoerce(crate::runtime::agent::CoerceArgs),
    /// Arguments that do not decode for their kind: the effect fails when it runs.
    Malformed(Malformed),
}

fn decoded<T: serde::de::DeserializeOwned>(raw: &Value) -> Result<T, String> {
    T::deserialize(raw).map_err(|e| e.to_string())
}

impl Args {
    /// The arguments of a row of `kind`: typed, or [`Args::Malformed`] with the reason.
    pub fn decode(kind: EffectKind, raw: Value) -> Args {
        let typed = match kind {
            EffectKind::Timer => decoded(&raw).map(Args::Timer),
            EffectKind::Acquire => decoded(&raw).map(Args::Acquire),
            EffectKind::Release => decoded(&raw).map(Args::Release),
            EffectKind::Renew => decoded(&raw).map(Args::Renew),
            EffectKind::Consume => decoded(&raw).map(Args::Consume),
            EffectKind::Append => decoded(&raw).map(Args::Append),
            EffectKind::Invoke => decoded(&raw).map(Args::Invoke),
            EffectKind::FileIssue => decoded(&raw).map(Args::FileIssue),
            EffectKind::Claim => decoded(&raw).map(Args::Claim),
            EffectKind::Finish => decoded(&raw).map(Args::Finish),
            EffectKind::MessageSend => decoded(&raw).map(Args::MessageSend),
            EffectKind::MessageAsk => decoded(&raw).map(Args::MessageAsk),
            EffectKind::Vote => decoded(&raw).map(Args::Vote),
            EffectKind::Exec => ExecArgs::parse(&raw).map(Args::Exec),
            EffectKind::AgentTell => decoded(&raw).map(Args::AgentTell),
            EffectKind::SchemaCoerce => decoded(&raw).map(Args::SchemaCoerce),
        };
        typed.unwrap_or_else(|error| {
            Args::Malformed(Malformed {
                kind,
                raw,
                error: format!("malformed {kind} arguments: {error}"),
            })
        })
    }

    /// Arguments the stepper could not build (an undeclared resource, an unknown binding).
    pub fn refused(kind: EffectKind, error: String) -> Args {
        Args::Malformed(Malformed {
            kind,
            raw: Value::Null,
            error,
        })
    }

    /// The effect's kind.
    pub fn kind(&self) -> EffectKind {
        match self {
            Args::Timer(_) => EffectKind::Timer,
            Args::Acquire(_) => EffectKind::Acquire,
            Args::Release(_) => EffectKind::Release,
            Args::Renew(_) => EffectKind::Renew,
            Args::Consume(_) => EffectKind::Consume,
            Args::Append(_) => EffectKind::Append,
            Args::Invoke(_) => EffectKind::Invoke,
            Args::FileIssue(_) => EffectKind::FileIssue,
            Args::Claim(_) => EffectKind::Claim,
            Args::Finish(_) => EffectKind::Finish,
            Args::MessageSend(_) => EffectKind::MessageSend,
            Args::MessageAsk(_) => EffectKind::MessageAsk,
            Args::Vote(_) => EffectKind::Vote,
            Args::Exec(_) => EffectKind::Exec,
            Args::AgentTell(_) => EffectKind::AgentTell,
            Args::SchemaCoerce(_) => EffectKind::SchemaCoerce,
            Args::Malformed(m) => m.kind,
        }
    }

    /// The arguments as the row stores them.
    pub fn to_value(&self) -> Value {
        fn value<T: Serialize>(t: &T) -> Value {
            serde_json::to_value(t).expect("effect arguments encode")
        }
        match self {
            Args::Timer(a) => value(a),
            Args::Acquire(a) => value(a),
            Args::Release(a) | Args::Renew(a) => value(a),
            Args::Consume(a) => value(a),
            Args::Append(a) => value(a),
            Args::Invoke(a) => value(a),
            Args::FileIssue(a) => value(a),
            Args::Claim(a) => value(a),
            Args::Finish(a) => value(a),
            Args::MessageSend(a) | Args::MessageAsk(a) => value(a),
            Args::Vote(a) => value(a),
            Args::Exec(a) => value(a),
            Args::AgentTell(a) => value(a),
            Args::SchemaCoerce(a) => value(a),
            Args::Malformed(m) => m.raw.clone(),
        }
    }

    /// The lease an `acquire`, or a `release` / `renew` of one, names.
    pub fn lease(&self) -> Option<&LeaseArgs> {
        match self {
            Args::Acquire(a)
            | Args::Release(Upstream::Acquire(a))
            | Args::Renew(Upstream::Acquire(a)) => Some(a),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease() -> Value {
        json!({"owner": "shared", "name": "deploy", "key": "prod", "slots": 1,
            "ttl_ms": 60_000, "wait_ms": 0, "wait_until_ms": 5, "until_ttl": false})
    }

    #[test]
    fn stored_rows_read_typed_and_write_back_unchanged() {
        let rows = [
            (EffectKind::Timer, json!({"seconds": 3})),
            (EffectKind::Acquire, lease()),
            (EffectKind::Release, {
                let mut v = lease();
                v["upstream_kind"] = json!("acquire");
                v
            }),
            (
                EffectKind::Renew,
                json!({"upstream_kind": "claim", "issue": {"id": "T-1", "title": "x"},
                    "ttl_ms": 600_000, "held": {"outcome": "claimed", "issue": "T-1",
                    "id": "T-1", "fence": 4, "deadline_ms": 9, "reentered": false}}),
            ),
            (
                EffectKind::MessageAsk,
                json!({"channel": "c", "to": "agent:bob", "type": "ask", "text": "hi",
                    "payload": null, "thread": null, "within_ms": 1000}),
            ),
        ];
        for (kind, raw) in rows {
            let args = Args::decode(kind, raw.clone());
            assert!(!matches!(args, Args::Malformed(_)), "{kind}: {args:?}");
            assert_eq!(args.kind(), kind);
            assert_eq!(args.to_value(), raw, "{kind} round trip");
        }
    }

    /// Golden: the stored code of every block category, and the state each one blocks in.
    /// A code once written is never changed or reused; the order of the variants means
    /// nothing.
    #[test]
    fn block_categories_keep_their_codes() {
        let categories = [
            (
                BlockCategory::Capability,
                "capability",
                EffectState::BlockedByCapability,
            ),
            (
                BlockCategory::Profile,
                "profile",
                EffectState::BlockedByProfile,
            ),
            (
                BlockCategory::Capacity,
                "capacity",
                EffectState::BlockedByCapacity,
            ),
            (
                BlockCategory::Dependency,
                "dependency",
                EffectState::BlockedByDependency,
            ),
            (
                BlockCategory::ProviderConfig,
                "provider_config",
                EffectState::Blocked,
            ),
            (
                BlockCategory::Credentials,
                "credentials",
                EffectState::Blocked,
            ),
            (
                BlockCategory::Enforcement,
                "enforcement",
                EffectState::Blocked,
            ),
            (
                BlockCategory::ProviderHealth,
                "provider_health",
                EffectState::Blocked,
            ),
        ];
        assert_eq!(categories.len(), BlockCategory::ALL.len());
        for (category, code, state) in categories {
            assert_eq!(category.code(), code);
            assert_eq!(serde_json::to_value(category).unwrap(), json!(code));
            assert_eq!(
                serde_json::from_value::<BlockCategory>(json!(code)).unwrap(),
                category
            );
            assert_eq!(category.state(), state, "{code}");
            assert!(state.blocked() && !state.settled(), "{code}");
        }
        let block = PolicyBlock::new(BlockCategory::Capacity, "full");
        assert_eq!(
            serde_json::to_value(&block).unwrap(),
            json!({"category": "capacity", "detail": "full"})
        );
        let quoted = PolicyBlock::new(BlockCategory::Credentials, "no secret `k` } here");
        assert_eq!(
            quoted.to_string(),
            r#"policy_block: { category: credentials, detail: "no secret `k` } here" }"#
        );
        assert!(serde_json::from_value::<BlockCategory>(json!("quota")).is_err());
    }

    /// Golden: the stored codes of every effect state.
    #[test]
    fn effect_states_keep_their_codes() {
        let states = [
            (EffectState::Queued, "queued"),
            (EffectState::Running, "running"),
            (EffectState::Completed, "completed"),
            (EffectState::Failed, "failed"),
            (EffectState::TimedOut, "timed_out"),
            (EffectState::Cancelled, "cancelled"),
            (EffectState::Blocked, "blocked"),
            (EffectState::BlockedByDependency, "blocked_by_dependency"),
            (EffectState::BlockedByCapacity, "blocked_by_capacity"),
            (EffectState::BlockedByCapability, "blocked_by_capability"),
            (EffectState::BlockedByProfile, "blocked_by_profile"),
        ];
        for (state, code) in states {
            assert_eq!(state.code(), code);
            assert_eq!(serde_json::to_value(state).unwrap(), json!(code));
            assert_eq!(
                serde_json::from_value::<EffectState>(json!(code)).unwrap(),
                state
            );
        }
    }

    #[test]
    fn arguments_of_the_wrong_shape_are_malformed_not_defaulted() {
        let mut no_ttl = lease();
        no_ttl.as_object_mut().unwrap().remove("ttl_ms");
        let cases = [
            (EffectKind::Acquire, no_ttl, "ttl_ms"),
            (
                EffectKind::Consume,
                json!({"owner": "o", "name": "n", "key": "k", "amount": 1,
                    "reset": "daily", "timezone": "UTC"}),
                "cap",
            ),
            (
                EffectKind::Consume,
                json!({"owner": "o", "name": "n", "key": "k", "amount": 1, "cap": 5,
                    "reset": "fortnightly", "timezone": "UTC"}),
                "fortnightly",
            ),
            (
                EffectKind::Claim,
                json!({"issue": {"title": "x"}, "ttl_ms": 5}),
                "no id",
            ),
            (
                EffectKind::Release,
                json!({"upstream_kind": "acquire"}),
                "owner",
            ),
            (EffectKind::Renew, Value::Null, "renew"),
        ];
        for (kind, raw, needle) in cases {
            let Args::Malformed(m) = Args::decode(kind, raw.clone()) else {
                panic!("{kind} {raw} decoded");
            };
            assert_eq!(m.kind, kind);
            assert_eq!(m.raw, raw, "the raw row is kept");
            assert!(m.error.contains(needle), "{kind}: {}", m.error);
            assert!(m.error.starts_with(&format!("malformed {kind} arguments")));
        }
    }
}
