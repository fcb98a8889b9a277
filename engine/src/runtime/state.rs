//! The rows of one instance and the event fold that produces them.
//!
//! Every change to an instance is an [`Event`]; [`State::apply`] folds one event into the
//! rows. The stepper and the worker only ever change state by appending events and folding
//! them, so the stored rows (facts, effects, firings, continuations, runs, header) are by
//! construction a projection of the log, and [`State::rebuild`] can recompute them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use super::effect::{
    Args, BlockCategory, ContState, EffectKind, EffectState, PolicyBlock, RunState, Terminal,
};

/// An instance's lifecycle state.
///
/// Stored (the header row, the index row, `instance.transitioned` events) as its code:
/// each variant names its code explicitly, so a renamed variant keeps its bytes
/// (`status_codes_are_pinned` holds them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Status {
    /// Stepping and running effects.
    #[default]
    #[serde(rename = "running")]
    Running,
    /// Steps and new effect starts are refused until resumed.
    #[serde(rename = "paused")]
    Paused,
    /// Terminal: a rule ran `complete`.
    #[serde(rename = "completed")]
    Completed,
    /// Terminal: a rule ran `fail` (or a failure went unobserved).
    #[serde(rename = "failed")]
    Failed,
    /// Terminal: an operator ran `cancel`.
    #[serde(rename = "cancelled")]
    Cancelled,
}

impl Status {
    /// Every status, in lifecycle order.
    pub const ALL: [Status; 5] = [
        Status::Running,
        Status::Paused,
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
    ];

    /// The stable code (what is stored and shown).
    pub fn code(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    /// The status of `code`, if it is one.
    pub fn from_code(code: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.code() == code)
    }

    /// True for completed, failed and cancelled.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    /// Whether an operator may move an instance from this status to `to` (`pause`,
    /// `resume`, `cancel`).
    pub fn may_become(self, to: Status) -> bool {
        matches!(
            (self, to),
            (Status::Running, Status::Paused)
                | (Status::Paused, Status::Running)
                | (Status::Running | Status::Paused, Status::Cancelled)
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// The instance header.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// `ins_…`
    pub id: String,
    /// Workflow name.
    pub workflow: String,
    /// Program version id (`pv_…`).
    pub program: String,
    /// Lifecycle status.
    pub status: Status,
    /// Revision epoch (0 until `revise`).
    pub epoch: u64,
    /// Creation time (ms).
    pub created_ms: u64,
    /// Time of the last event (ms).
    pub updated_ms: u64,
    /// Input payload.
    pub input: Value,
    /// Terminal name and payload once terminal.
    pub terminal: Option<(String, Value)>,
    /// Why the instance failed when no rule said so.
    pub reason: Option<String>,
    /// Parent instance and effect, for a child.
    pub parent: Option<(String, String)>,
    /// Sequence of the last event.
    pub last_seq: u64,
    /// Next fact, effect, continuation and run numbers.
    pub next: [u64; 4],
    /// The instance's `run` entry in the live work registry (a child's is under its
    /// parent's), renewed by the worker that drives it.
    #[serde(default)]
    pub work: Option<String>,
}

/// A fact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// `f000001`
    pub id: String,
    /// Class name.
    pub class: String,
    /// Field values.
    pub value: Value,
    /// False once consumed by `done`.
    pub live: bool,
}

/// An effect. Its row is stored as [`EffectRow`] (the shape rows always had); its
/// arguments are decoded by kind when read (see [`super::effect`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "EffectRow", into = "EffectRow")]
pub struct Effect {
    /// `x000001`
    pub id: String,
    /// Stable id from its firing (`rule/eN@firing`): the idempotency key derives from it.
    pub stable: String,
    /// The rule that requested it.
    pub rule: String,
    /// The binding `after` blocks name.
    pub binding: Option<String>,
    /// Evaluated arguments, typed by kind (the kind is theirs: [`Effect::kind`]).
    pub args: Args,
    /// Where it is in its lifecycle.
    pub state: EffectState,
    /// The value `after` blocks read once settled.
    pub output: Option<Value>,
    /// Operator retries (part of the idempotency key).
    pub attempt: u32,
    /// Worker passes that found a lease wait still pending.
    pub pass: u32,
    /// Not claimable before this time (timers, lease wait retries).
    pub not_before_ms: u64,
    /// The run executing it, with its lease deadline.
    pub run: Option<(String, u64)>,
    /// Why it is blocked.
    pub policy_block: Option<PolicyBlock>,
    /// The effect it acts on, when that one had not settled as it was requested (a
    /// `release`, `renew` or `finish` of a binding): it is not claimable before that one
    /// settles (`blocked_by_dependency` meanwhile).
    pub depends_on: Option<String>,
    /// The program version that requested it, once a revision moved the instance on
    /// (`None`: the instance's version).
    pub program: Option<String>,
    /// A revision with `--cancel running` asked its run to stop (a request, not a result).
    pub cancel_requested: bool,
}

impl Effect {
    /// A new queued effect with `args` (its kind is theirs).
    pub fn queued(id: String, stable: String, rule: String, args: Args) -> Effect {
        Effect {
            id,
            stable,
            rule,
            binding: None,
            args,
            state: EffectState::Queued,
            output: None,
            attempt: 0,
            pass: 0,
            not_before_ms: 0,
            run: None,
            policy_block: None,
            depends_on: None,
            program: None,
            cancel_requested: false,
        }
    }

    /// What it does.
    pub fn kind(&self) -> EffectKind {
        self.args.kind()
    }
}

/// An effect as its row stores it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EffectRow {
    id: String,
    stable: String,
    /// `timer`, `acquire`, `release`, `renew`, `consume`, `append`, `invoke`, …
    kind: EffectKind,
    rule: String,
    binding: Option<String>,
    args: Value,
    /// queued, running, completed, failed, timed_out, cancelled, blocked_…
    state: EffectState,
    output: Option<Value>,
    attempt: u32,
    pass: u32,
    not_before_ms: u64,
    run: Option<(String, u64)>,
    /// `{category, detail}`.
    policy_block: Option<PolicyBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    depends_on: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    program: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    cancel_requested: bool,
}

impl From<EffectRow> for Effect {
    fn from(r: EffectRow) -> Effect {
        Effect {
            id: r.id,
            stable: r.stable,
            rule: r.rule,
            binding: r.binding,
            args: Args::decode(r.kind, r.args),
            state: r.state,
            output: r.output,
            attempt: r.attempt,
            pass: r.pass,
            not_before_ms: r.not_before_ms,
            run: r.run,
            policy_block: r.policy_block,
            depends_on: r.depends_on,
            program: r.program,
            cancel_requested: r.cancel_requested,
        }
    }
}

impl From<Effect> for EffectRow {
    fn from(e: Effect) -> EffectRow {
        EffectRow {
            kind: e.kind(),
            args: e.args.to_value(),
            id: e.id,
            stable: e.stable,
            rule: e.rule,
            binding: e.binding,
            state: e.state,
            output: e.output,
            attempt: e.attempt,
            pass: e.pass,
            not_before_ms: e.not_before_ms,
            run: e.run,
            policy_block: e.policy_block,
            depends_on: e.depends_on,
            program: e.program,
            cancel_requested: e.cancel_requested,
        }
    }
}

/// A committed firing of a rule on a combination of facts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Firing {
    /// `<rule index>:<fact ids>`
    pub key: String,
    /// Rule name.
    pub rule: String,
}

/// A registered `after` block waiting on an effect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cont {
    /// `c000001`
    pub id: String,
    /// Index of the rule in declaration order.
    pub rule: usize,
    /// Statement indices from the rule body to the `after` statement.
    pub path: Vec<usize>,
    /// Captured bindings.
    pub env: Env,
    /// The effect waited on.
    pub effect: String,
    /// `succeeds`, `held`, …
    pub predicate: String,
    /// Where it is.
    pub state: ContState,
    /// The program version whose rule it continues, once a revision moved the instance on
    /// (`None`: the instance's version). A pinned continuation finishes on its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
}

/// A run: one attempt of a worker at an effect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// `r000001`
    pub id: String,
    /// The effect.
    pub effect: String,
    /// Worker identity.
    pub worker: String,
    /// How it is or ended.
    pub state: RunState,
    /// Start time.
    pub started_ms: u64,
    /// End time.
    pub ended_ms: Option<u64>,
    /// What `whip recover` concluded of a run whose worker stopped
    /// (`runtime.recovery_uncertain`: nobody can confirm its side effect happened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
}

/// Replace `rows` by `past`, marking what changed and what left (`kind/id` row keys).
fn rewind_rows<T: PartialEq>(
    rows: &mut BTreeMap<String, T>,
    past: BTreeMap<String, T>,
    kind: &str,
    dirty: &mut BTreeSet<String>,
    removed: &mut BTreeSet<String>,
) {
    for id in rows.keys().filter(|id| !past.contains_key(*id)) {
        let rel = format!("{kind}/{id}");
        dirty.remove(&rel);
        removed.insert(rel);
    }
    for (id, row) in &past {
        if rows.get(id) != Some(row) {
            let rel = format!("{kind}/{id}");
            removed.remove(&rel);
            dirty.insert(rel);
        }
    }
    *rows = past;
}

/// Bindings captured by a firing: values, the fact behind a binding, the effect behind one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Env {
    /// Readable values.
    pub values: BTreeMap<String, Value>,
    /// Binding → fact id (for `done`).
    pub facts: BTreeMap<String, String>,
    /// Binding → effect id (for `after`, `release`, `renew`, `claim`, `finish`).
    pub effects: BTreeMap<String, String>,
}

/// What the files plane of a cut holds: the instance's workspace as the executor copied it.
pub use crate::executor::protocol::WorkspaceDigest;

/// A checkpoint: a coherent cut of an instance (`context.checkpoint`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    /// The cut id (`whip restore ID CUT`).
    pub id: String,
    /// The event-log position of the cut: the sequence of its `context.checkpoint` event.
    pub seq: u64,
    /// When it was taken (ms).
    pub at_ms: u64,
    /// The files plane, when the instance has a workspace with the executor.
    pub files: Option<WorkspaceDigest>,
    /// Taken by a restore of the head before it rewound.
    pub auto: bool,
}

/// What one event of the log records.
///
/// Stored (every event row) and shown (`whip log`, `whip trace`) as its code: each variant
/// names its code explicitly, so a renamed variant keeps its bytes (`event_kinds_are_pinned`
/// holds them). A new kind takes a new code; a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    /// The instance started: its header.
    #[serde(rename = "external.started")]
    ExternalStarted,
    /// A fact was derived (by a rule, an effect's outcome or an observation).
    #[serde(rename = "fact.derived")]
    FactDerived,
    /// A fact was consumed by `done`.
    #[serde(rename = "fact.consumed")]
    FactConsumed,
    /// A rule's firing committed (its firing row, the `after` it ran).
    #[serde(rename = "rule.committed")]
    RuleCommitted,
    /// An `after` continuation was registered.
    #[serde(rename = "after.registered")]
    AfterRegistered,
    /// An `after` continuation was dropped: its effect settled another way.
    #[serde(rename = "after.dropped")]
    AfterDropped,
    /// An `after` continuation waits again: its effect was retried.
    #[serde(rename = "after.revived")]
    AfterRevived,
    /// An effect was requested.
    #[serde(rename = "effect.requested")]
    EffectRequested,
    /// A run of an effect started.
    #[serde(rename = "effect.run_started")]
    EffectRunStarted,
    /// An effect settled.
    #[serde(rename = "effect.terminal")]
    EffectTerminal,
    /// An effect waits (a lease wait, a timer) until `not_before_ms`.
    #[serde(rename = "effect.waiting")]
    EffectWaiting,
    /// An effect was blocked by policy.
    #[serde(rename = "effect.blocked")]
    EffectBlocked,
    /// An effect was cancelled.
    #[serde(rename = "effect.cancelled")]
    EffectCancelled,
    /// An operator moved a failed effect back to the queue.
    #[serde(rename = "effect.retried")]
    EffectRetried,
    /// A running effect was asked to stop.
    #[serde(rename = "effect.cancel_requested")]
    EffectCancelRequested,
    /// A worker's lost run of an effect was recovered.
    #[serde(rename = "effect.recovered")]
    EffectRecovered,
    /// A checkpoint (`whip checkpoint`) was cut.
    #[serde(rename = "context.checkpoint")]
    ContextCheckpoint,
    /// The instance was restored to a checkpoint.
    #[serde(rename = "context.restored")]
    ContextRestored,
    /// A revision moved the instance to a new program version.
    #[serde(rename = "workflow.revision_activated")]
    RevisionActivated,
    /// An operator paused, resumed or cancelled the instance.
    #[serde(rename = "instance.transitioned")]
    InstanceTransitioned,
    /// A rule ran `complete`.
    #[serde(rename = "workflow.completed")]
    WorkflowCompleted,
    /// A rule ran `fail`, or a failure went unobserved.
    #[serde(rename = "workflow.failed")]
    WorkflowFailed,
    /// Draining the instance's inbox into facts failed.
    #[serde(rename = "mail.drain_failed")]
    MailDrainFailed,
    /// An agent turn (`tell`) completed.
    #[serde(rename = "agent.turn.completed")]
    AgentTurnCompleted,
    /// An agent turn failed.
    #[serde(rename = "agent.turn.failed")]
    AgentTurnFailed,
    /// An agent turn timed out.
    #[serde(rename = "agent.turn.timed_out")]
    AgentTurnTimedOut,
    /// An agent turn was cancelled.
    #[serde(rename = "agent.turn.cancelled")]
    AgentTurnCancelled,
    /// A coercion succeeded.
    #[serde(rename = "schema.coerce.succeeded")]
    CoerceSucceeded,
    /// A coercion failed.
    #[serde(rename = "schema.coerce.failed")]
    CoerceFailed,
    /// A coercion timed out.
    #[serde(rename = "schema.coerce.timed_out")]
    CoerceTimedOut,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 30] = [
        EventKind::ExternalStarted,
        EventKind::FactDerived,
        EventKind::FactConsumed,
        EventKind::RuleCommitted,
        EventKind::AfterRegistered,
        EventKind::AfterDropped,
        EventKind::AfterRevived,
        EventKind::EffectRequested,
        EventKind::EffectRunStarted,
        EventKind::EffectTerminal,
        EventKind::EffectWaiting,
        EventKind::EffectBlocked,
        EventKind::EffectCancelled,
        EventKind::EffectRetried,
        EventKind::EffectCancelRequested,
        EventKind::EffectRecovered,
        EventKind::ContextCheckpoint,
        EventKind::ContextRestored,
        EventKind::RevisionActivated,
        EventKind::InstanceTransitioned,
        EventKind::WorkflowCompleted,
        EventKind::WorkflowFailed,
        EventKind::MailDrainFailed,
        EventKind::AgentTurnCompleted,
        EventKind::AgentTurnFailed,
        EventKind::AgentTurnTimedOut,
        EventKind::AgentTurnCancelled,
        EventKind::CoerceSucceeded,
        EventKind::CoerceFailed,
        EventKind::CoerceTimedOut,
    ];

    /// The stable code (what is stored and shown).
    pub fn code(self) -> &'static str {
        match self {
            EventKind::ExternalStarted => "external.started",
            EventKind::FactDerived => "fact.derived",
            EventKind::FactConsumed => "fact.consumed",
            EventKind::RuleCommitted => "rule.committed",
            EventKind::AfterRegistered => "after.registered",
            EventKind::AfterDropped => "after.dropped",
            EventKind::AfterRevived => "after.revived",
            EventKind::EffectRequested => "effect.requested",
            EventKind::EffectRunStarted => "effect.run_started",
            EventKind::EffectTerminal => "effect.terminal",
            EventKind::EffectWaiting => "effect.waiting",
            EventKind::EffectBlocked => "effect.blocked",
            EventKind::EffectCancelled => "effect.cancelled",
            EventKind::EffectRetried => "effect.retried",
            EventKind::EffectCancelRequested => "effect.cancel_requested",
            EventKind::EffectRecovered => "effect.recovered",
            EventKind::ContextCheckpoint => "context.checkpoint",
            EventKind::ContextRestored => "context.restored",
            EventKind::RevisionActivated => "workflow.revision_activated",
            EventKind::InstanceTransitioned => "instance.transitioned",
            EventKind::WorkflowCompleted => "workflow.completed",
            EventKind::WorkflowFailed => "workflow.failed",
            EventKind::MailDrainFailed => "mail.drain_failed",
            EventKind::AgentTurnCompleted => "agent.turn.completed",
            EventKind::AgentTurnFailed => "agent.turn.failed",
            EventKind::AgentTurnTimedOut => "agent.turn.timed_out",
            EventKind::AgentTurnCancelled => "agent.turn.cancelled",
            EventKind::CoerceSucceeded => "schema.coerce.succeeded",
            EventKind::CoerceFailed => "schema.coerce.failed",
            EventKind::CoerceTimedOut => "schema.coerce.timed_out",
        }
    }

    /// The kind of `code`, if it is one.
    pub fn from_code(code: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.code() == code)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// One entry of the append-only event log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the instance's log, from 1.
    pub seq: u64,
    /// Wall time of the commit (ms).
    pub at_ms: u64,
    /// What it records (`external.started`, `rule.committed`, `fact.derived`, …).
    pub kind: EventKind,
    /// Kind-specific data.
    pub data: Value,
}

/// Rows of one instance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// The header.
    pub header: Header,
    /// Facts by id.
    pub facts: BTreeMap<String, Fact>,
    /// Effects by id.
    pub effects: BTreeMap<String, Effect>,
    /// Firings by key.
    pub firings: BTreeMap<String, Firing>,
    /// Continuations by id.
    pub conts: BTreeMap<String, Cont>,
    /// Runs by id.
    pub runs: BTreeMap<String, Run>,
    /// Checkpoints (`whip checkpoint`) by cut id: never removed, not even by a restore.
    pub cuts: BTreeMap<String, Cut>,
    /// Row keys (relative, e.g. `f/f000001`) changed since the last commit.
    pub dirty: BTreeSet<String>,
    /// Row keys a restore took out of the projection since the last commit.
    pub removed: BTreeSet<String>,
    /// Ready issues per tracker name as `(issue id, view)`: an observation of the fabric
    /// made before stepping (never stored; `has ready issue` matches these).
    pub ready_issues: BTreeMap<String, Vec<(String, Value)>>,
}

fn parse<T: for<'de> Deserialize<'de>>(v: &Value) -> T {
    serde_json::from_value(v.clone()).expect("event data has the recorded shape")
}

impl State {
    /// Fold one event.
    pub fn apply(&mut self, ev: &Event) {
        let d = &ev.data;
        match ev.kind {
            EventKind::ExternalStarted => self.header = parse(&d["header"]),
            EventKind::FactDerived => self.fact_derived(parse(&d["fact"])),
            EventKind::FactConsumed => {
                let id = d["id"].as_str().unwrap_or_default();
                if let Some(f) = self.facts.get_mut(id) {
                    f.live = false;
                    self.dirty.insert(format!("f/{id}"));
                }
            }
            EventKind::RuleCommitted => self.rule_committed(ev),
            EventKind::AfterRegistered => {
                let cont: Cont = parse(&d["after"]);
                self.header.next[2] += 1;
                self.dirty.insert(format!("c/{}", cont.id));
                self.conts.insert(cont.id.clone(), cont);
            }
            EventKind::AfterDropped | EventKind::AfterRevived => self.cont_event(ev),
            EventKind::EffectRequested => {
                let effect: Effect = parse(&d["effect"]);
                self.header.next[1] += 1;
                self.dirty.insert(format!("x/{}", effect.id));
                self.effects.insert(effect.id.clone(), effect);
            }
            EventKind::EffectRunStarted => self.run_started(ev),
            EventKind::EffectTerminal => self.effect_terminal(ev),
            EventKind::EffectWaiting => self.effect_waiting(ev),
            EventKind::EffectBlocked
            | EventKind::EffectCancelled
            | EventKind::EffectRetried
            | EventKind::EffectCancelRequested
            | EventKind::EffectRecovered => self.effect_changed(ev),
            EventKind::ContextCheckpoint => {
                let cut = Cut {
                    seq: ev.seq,
                    ..parse(&d["cut"])
                };
                self.dirty.insert(format!("u/{}", cut.id));
                self.cuts.insert(cut.id.clone(), cut);
            }
            // The rows of a restore are the cut's: [`State::rewind`] sets them, from the
            // log (see [`State::rebuild`]); the marker itself changes only the header.
            EventKind::ContextRestored => {}
            EventKind::RevisionActivated => self.revised(ev),
            EventKind::InstanceTransitioned => self.header.status = parse(&d["to"]),
            EventKind::WorkflowCompleted => self.ended(Status::Completed, d),
            EventKind::WorkflowFailed => self.ended(Status::Failed, d),
            // Kept for the record (the trace, the operator), folding into no row.
            EventKind::MailDrainFailed
            | EventKind::AgentTurnCompleted
            | EventKind::AgentTurnFailed
            | EventKind::AgentTurnTimedOut
            | EventKind::AgentTurnCancelled
            | EventKind::CoerceSucceeded
            | EventKind::CoerceFailed
            | EventKind::CoerceTimedOut => {}
        }
        self.header.last_seq = ev.seq;
        self.header.updated_ms = ev.at_ms;
        self.dirty.insert("h".into());
    }

    fn fact_derived(&mut self, fact: Fact) {
        self.header.next[0] += 1;
        self.dirty.insert(format!("f/{}", fact.id));
        self.facts.insert(fact.id.clone(), fact);
    }

    /// A rule's firing committed: its firing row, and the `after` it ran is done.
    fn rule_committed(&mut self, ev: &Event) {
        if let Some(firing) = ev.data.get("firing").filter(|f| !f.is_null()) {
            let firing: Firing = parse(firing);
            self.dirty.insert(format!("k/{}", firing.key));
            self.firings.insert(firing.key.clone(), firing);
        }
        if let Some(id) = ev.data["after"].as_str() {
            self.set_cont(id, ContState::Done);
        }
    }

    /// A rule ran `complete` or `fail`: the instance is `status`, with its terminal.
    fn ended(&mut self, status: Status, d: &Value) {
        self.header.status = status;
        let name = d["name"].as_str().unwrap_or_default().to_string();
        self.header.terminal = Some((name, d["payload"].clone()));
        self.header.reason = d["reason"].as_str().map(str::to_string);
    }

    /// A revision: later commits use the new version; pending continuations and unsettled
    /// effects stay pinned to the version that made them.
    fn revised(&mut self, ev: &Event) {
        let d = &ev.data;
        let from = d["from_program"].as_str().unwrap_or_default().to_string();
        for c in self.conts.values_mut() {
            if c.state == ContState::Pending && c.program.is_none() {
                c.program = Some(from.clone());
                self.dirty.insert(format!("c/{}", c.id));
            }
        }
        for e in self.effects.values_mut() {
            if !e.state.settled() && e.program.is_none() {
                e.program = Some(from.clone());
                self.dirty.insert(format!("x/{}", e.id));
            }
        }
        let rekey: Vec<(String, String)> =
            serde_json::from_value(d["rekey"].clone()).unwrap_or_default();
        // Take every moved firing out first: two rules may swap places.
        let moved: Vec<(String, Firing)> = rekey
            .into_iter()
            .filter_map(|(from, to)| {
                let firing = self.firings.remove(&from)?;
                self.dirty.remove(&format!("k/{from}"));
                self.removed.insert(format!("k/{from}"));
                Some((to, firing))
            })
            .collect();
        for (to, mut firing) in moved {
            firing.key = to.clone();
            self.removed.remove(&format!("k/{to}"));
            self.dirty.insert(format!("k/{to}"));
            self.firings.insert(to, firing);
        }
        if let Some(to) = d["to_program"].as_str() {
            self.header.program = to.to_string();
        }
        self.header.epoch = d["epoch"].as_u64().unwrap_or(self.header.epoch + 1);
    }

    /// An operator or the scheduler changed one effect: blocked, cancelled, retried, or
    /// asked to stop.
    fn effect_changed(&mut self, ev: &Event) {
        let d = &ev.data;
        let Some(e) = self.effect_mut(d["id"].as_str().unwrap_or_default()) else {
            return;
        };
        match ev.kind {
            EventKind::EffectBlocked => {
                e.state = parse(&d["state"]);
                e.policy_block = Some(parse(&d["policy_block"]));
            }
            EventKind::EffectCancelled => {
                e.state = EffectState::Cancelled;
                e.run = None;
                e.policy_block = None;
            }
            EventKind::EffectRetried => {
                e.state = EffectState::Queued;
                e.attempt = parse(&d["attempt"]);
                e.output = None;
                e.run = None;
                e.pass = 0;
                e.policy_block = None;
            }
            EventKind::EffectRecovered => self.recovered(ev),
            _ => e.cancel_requested = true,
        }
    }

    fn effect_mut(&mut self, id: &str) -> Option<&mut Effect> {
        let e = self.effects.get_mut(id)?;
        self.dirty.insert(format!("x/{id}"));
        Some(e)
    }

    /// An `after` continuation dropped (its effect settled another way) or revived (its
    /// effect was retried: every continuation on it waits for the new outcome).
    fn cont_event(&mut self, ev: &Event) {
        let state = match ev.kind {
            EventKind::AfterRevived => ContState::Pending,
            _ => ContState::Dead,
        };
        self.set_cont(ev.data["id"].as_str().unwrap_or_default(), state);
    }

    fn set_cont(&mut self, id: &str, state: ContState) {
        if let Some(c) = self.conts.get_mut(id) {
            c.state = state;
            self.dirty.insert(format!("c/{id}"));
        }
    }

    fn run_started(&mut self, ev: &Event) {
        let d = &ev.data;
        let id = d["id"].as_str().unwrap_or_default().to_string();
        let run = d["run"].as_str().unwrap_or_default().to_string();
        let until = d["lease_until_ms"].as_u64().unwrap_or(u64::MAX);
        // A reclaimed run ends the previous one.
        let previous = self.effects.get(&id).and_then(|e| e.run.clone());
        if let Some((old, _)) = previous {
            self.end_run(Some(&old), RunState::Abandoned, ev.at_ms);
        }
        if let Some(e) = self.effect_mut(&id) {
            e.state = EffectState::Running;
            e.run = Some((run.clone(), until));
            // A block ends when a run starts.
            e.policy_block = None;
            // An effect that waited for its dependency runs on what that one produced.
            if let Some(args) = d.get("args") {
                e.args = Args::decode(e.kind(), args.clone());
            }
        }
        self.header.next[3] += 1;
        self.dirty.insert(format!("r/{run}"));
        self.runs.insert(
            run.clone(),
            Run {
                id: run,
                effect: id,
                worker: d["worker"].as_str().unwrap_or_default().into(),
                state: RunState::Running,
                started_ms: ev.at_ms,
                ended_ms: None,
                diagnostic: None,
            },
        );
    }

    /// `whip recover` looked at a run whose worker stopped: requeued (an idempotent effect
    /// runs again under the same key), or resolved (its `effect.terminal` follows), with
    /// the run's diagnostic.
    fn recovered(&mut self, ev: &Event) {
        let d = &ev.data;
        let id = d["id"].as_str().unwrap_or_default().to_string();
        let run = d["run"].as_str().map(str::to_string);
        if let Some(r) = run.as_ref().and_then(|r| self.runs.get_mut(r)) {
            r.diagnostic = d["diagnostic"].as_str().map(str::to_string);
            self.dirty.insert(format!("r/{}", r.id));
        }
        if d["resolution"] == "requeued" {
            if let Some(e) = self.effect_mut(&id) {
                e.state = EffectState::Queued;
                e.run = None;
            }
            self.end_run(run.as_deref(), RunState::Abandoned, ev.at_ms);
        }
    }

    fn end_run(&mut self, run: Option<&str>, state: RunState, at_ms: u64) {
        let Some(run) = run else { return };
        if let Some(r) = self.runs.get_mut(run) {
            r.state = state;
            r.ended_ms = Some(at_ms);
            self.dirty.insert(format!("r/{run}"));
        }
    }

    /// A run found the effect not done yet: queued again for a later pass (an ask keeps the
    /// id of the message it sent as its output).
    fn effect_waiting(&mut self, ev: &Event) {
        let d = &ev.data;
        let id = d["id"].as_str().unwrap_or_default();
        if let Some(e) = self.effect_mut(id) {
            e.state = EffectState::Queued;
            e.pass = parse(&d["pass"]);
            e.not_before_ms = parse(&d["not_before_ms"]);
            e.run = None;
            if let Some(output) = d.get("output") {
                e.output = Some(output.clone());
            }
        }
        self.end_run(d["run"].as_str(), RunState::Waiting, ev.at_ms);
    }

    fn effect_terminal(&mut self, ev: &Event) {
        let d = &ev.data;
        let id = d["id"].as_str().unwrap_or_default().to_string();
        let state: Terminal = parse(&d["state"]);
        if let Some(e) = self.effect_mut(&id) {
            e.state = state.into();
            e.output = Some(d["output"].clone());
            e.run = None;
            e.policy_block = None;
        }
        self.end_run(d["run"].as_str(), state.into(), ev.at_ms);
    }

    /// Recompute every row from the log alone. A `context.restored` marker folds as the
    /// rows of its cut, recomputed from the events up to the cut.
    pub fn rebuild(events: &[Event]) -> State {
        let mut state = State::default();
        for ev in events {
            state.apply(ev);
            if ev.kind == EventKind::ContextRestored {
                let upto = ev.data["cut_seq"].as_u64().unwrap_or(0) as usize;
                let past = State::rebuild(&events[..upto.min(events.len())]);
                state.rewind(past);
            }
        }
        state.dirty.clear();
        state.removed.clear();
        state
    }

    /// Take the rows of `past` (the state at a cut): facts, effects, firings,
    /// continuations and runs become the cut's, rows born after it leave the projection.
    /// The header (identity, status, revision, id counters) and the cuts stay the head's:
    /// ids are never reused and no checkpoint is forgotten. An effect the cut holds
    /// unsettled that moved on after it starts a new attempt, so its idempotency key is
    /// fresh and the cells run it again instead of answering from the old attempt.
    pub fn rewind(&mut self, mut past: State) {
        for (id, e) in past.effects.iter_mut() {
            let Some(head) = self.effects.get(id) else {
                continue;
            };
            if head != e && !e.state.settled() {
                e.attempt = head.attempt + 1;
                e.run = None;
                e.state = EffectState::Queued;
                e.output = None;
                e.pass = 0;
            }
        }
        rewind_rows(
            &mut self.facts,
            past.facts,
            "f",
            &mut self.dirty,
            &mut self.removed,
        );
        rewind_rows(
            &mut self.effects,
            past.effects,
            "x",
            &mut self.dirty,
            &mut self.removed,
        );
        rewind_rows(
            &mut self.firings,
            past.firings,
            "k",
            &mut self.dirty,
            &mut self.removed,
        );
        rewind_rows(
            &mut self.conts,
            past.conts,
            "c",
            &mut self.dirty,
            &mut self.removed,
        );
        rewind_rows(
            &mut self.runs,
            past.runs,
            "r",
            &mut self.dirty,
            &mut self.removed,
        );
        self.dirty.insert("h".into());
    }

    /// Live facts of `class`.
    pub fn live(&self, class: &str) -> impl Iterator<Item = &Fact> {
        self.facts
            .values()
            .filter(move |f| f.live && f.class == class)
    }

    /// Counts for `whip status`.
    pub fn counts(&self) -> Value {
        let count = |s: EffectState| self.effects.values().filter(|e| e.state == s).count();
        let blocked = self.effects.values().filter(|e| e.state.blocked()).count();
        json!({
            "facts": self.facts.values().filter(|f| f.live).count(),
            "queued_effects": count(EffectState::Queued),
            "running_effects": count(EffectState::Running),
            "blocked_effects": blocked,
            "completed_effects": count(EffectState::Completed),
            "failed_effects": count(EffectState::Failed) + count(EffectState::TimedOut),
            "events": self.header.last_seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{EventKind, Status};

    /// The stored codes of every status: a change here misreads every stored instance.
    #[test]
    fn status_codes_are_pinned() {
        let stored: Vec<String> = (Status::ALL.iter())
            .map(|s| serde_json::to_string(s).expect("encodes"))
            .collect();
        let pinned = [
            "\"running\"",
            "\"paused\"",
            "\"completed\"",
            "\"failed\"",
            "\"cancelled\"",
        ];
        assert_eq!(stored, pinned);
        for status in Status::ALL {
            assert_eq!(
                format!("\"{status}\""),
                serde_json::to_string(&status).unwrap()
            );
            assert_eq!(Status::from_code(status.code()), Some(status));
        }
        assert_eq!(Status::from_code("Running"), None);
        assert!(serde_json::from_str::<Status>("\"done\"").is_err());
    }

    /// The stored code of every event kind: a change here misreads every stored log.
    #[test]
    fn event_kinds_are_pinned() {
        let pinned = [
            "external.started",
            "fact.derived",
            "fact.consumed",
            "rule.committed",
            "after.registered",
            "after.dropped",
            "after.revived",
            "effect.requested",
            "effect.run_started",
            "effect.terminal",
            "effect.waiting",
            "effect.blocked",
            "effect.cancelled",
            "effect.retried",
            "effect.cancel_requested",
            "effect.recovered",
            "context.checkpoint",
            "context.restored",
            "workflow.revision_activated",
            "instance.transitioned",
            "workflow.completed",
            "workflow.failed",
            "mail.drain_failed",
            "agent.turn.completed",
            "agent.turn.failed",
            "agent.turn.timed_out",
            "agent.turn.cancelled",
            "schema.coerce.succeeded",
            "schema.coerce.failed",
            "schema.coerce.timed_out",
        ];
        let stored: Vec<String> = (EventKind::ALL.iter())
            .map(|k| serde_json::from_str(&serde_json::to_string(k).unwrap()).unwrap())
            .collect();
        assert_eq!(stored, pinned);
        for kind in EventKind::ALL {
            assert_eq!(kind.to_string(), kind.code());
            assert_eq!(EventKind::from_code(kind.code()), Some(kind));
        }
        assert!(serde_json::from_str::<EventKind>("\"fact.invented\"").is_err());
    }
}
