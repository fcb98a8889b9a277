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

/// Instance lifecycle states.
pub const RUNNING: &str = "running";
/// Paused: steps and new effect starts are refused until resumed.
pub const PAUSED: &str = "paused";
/// Terminal: a rule ran `complete`.
pub const COMPLETED: &str = "completed";
/// Terminal: a rule ran `fail` (or a failure went unobserved).
pub const FAILED: &str = "failed";
/// Terminal: an operator ran `cancel`.
pub const CANCELLED: &str = "cancelled";

/// True for completed, failed and cancelled.
pub fn is_terminal(status: &str) -> bool {
    matches!(status, COMPLETED | FAILED | CANCELLED)
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
    pub status: String,
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

/// One entry of the append-only event log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the instance's log, from 1.
    pub seq: u64,
    /// Wall time of the commit (ms).
    pub at_ms: u64,
    /// `external.started`, `rule.committed`, `fact.derived`, …
    pub kind: String,
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
        match ev.kind.as_str() {
            "external.started" => self.header = parse(&d["header"]),
            "fact.derived" => {
                let fact: Fact = parse(&d["fact"]);
                self.header.next[0] += 1;
                self.dirty.insert(format!("f/{}", fact.id));
                self.facts.insert(fact.id.clone(), fact);
            }
            "fact.consumed" => {
                let id = d["id"].as_str().unwrap_or_default();
                if let Some(f) = self.facts.get_mut(id) {
                    f.live = false;
                    self.dirty.insert(format!("f/{id}"));
                }
            }
            "rule.committed" => {
                if let Some(firing) = d.get("firing").filter(|f| !f.is_null()) {
                    let firing: Firing = parse(firing);
                    self.dirty.insert(format!("k/{}", firing.key));
                    self.firings.insert(firing.key.clone(), firing);
                }
                if let Some(id) = d["after"].as_str() {
                    self.set_cont(id, ContState::Done);
                }
            }
            "after.registered" => {
                let cont: Cont = parse(&d["after"]);
                self.header.next[2] += 1;
                self.dirty.insert(format!("c/{}", cont.id));
                self.conts.insert(cont.id.clone(), cont);
            }
            "after.dropped" | "after.revived" => self.cont_event(ev),
            "effect.requested" => {
                let effect: Effect = parse(&d["effect"]);
                self.header.next[1] += 1;
                self.dirty.insert(format!("x/{}", effect.id));
                self.effects.insert(effect.id.clone(), effect);
            }
            "effect.run_started" => self.run_started(ev),
            "effect.terminal" => self.effect_terminal(ev),
            "effect.waiting" => self.effect_waiting(ev),
            "effect.blocked"
            | "effect.cancelled"
            | "effect.retried"
            | "effect.cancel_requested"
            | "effect.recovered" => self.effect_changed(ev),
            "context.checkpoint" => {
                let cut = Cut {
                    seq: ev.seq,
                    ..parse(&d["cut"])
                };
                self.dirty.insert(format!("u/{}", cut.id));
                self.cuts.insert(cut.id.clone(), cut);
            }
            // The rows of a restore are the cut's: [`State::rewind`] sets them, from the
            // log (see [`State::rebuild`]); the marker itself changes only the header.
            "context.restored" => {}
            "workflow.revision_activated" => self.revised(ev),
            "instance.transitioned" => {
                self.header.status = d["to"].as_str().unwrap_or(RUNNING).into();
            }
            "workflow.completed" | "workflow.failed" => {
                let status = if ev.kind == "workflow.completed" {
                    COMPLETED
                } else {
                    FAILED
                };
                self.header.status = status.into();
                let name = d["name"].as_str().unwrap_or_default().to_string();
                self.header.terminal = Some((name, d["payload"].clone()));
                self.header.reason = d["reason"].as_str().map(str::to_string);
            }
            _ => {}
        }
        self.header.last_seq = ev.seq;
        self.header.updated_ms = ev.at_ms;
        self.dirty.insert("h".into());
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
        match ev.kind.as_str() {
            "effect.blocked" => {
                e.state = parse(&d["state"]);
                e.policy_block = Some(parse(&d["policy_block"]));
            }
            "effect.cancelled" => {
                e.state = EffectState::Cancelled;
                e.run = None;
                e.policy_block = None;
            }
            "effect.retried" => {
                e.state = EffectState::Queued;
                e.attempt = parse(&d["attempt"]);
                e.output = None;
                e.run = None;
                e.pass = 0;
                e.policy_block = None;
            }
            "effect.recovered" => self.recovered(ev),
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
        let state = match ev.kind.as_str() {
            "after.revived" => ContState::Pending,
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
            if ev.kind == "context.restored" {
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
