//! The stepper: declaration-order rounds, each committing at most one firing (a new join
//! combination or a pinned `after` continuation whose effect settled).

use std::sync::Arc;

use serde_json::{Value, json};
use whip_fabric::FabricClient;

use super::effect::{
    AppendArgs, ClaimArgs, ClaimUpstream, ConsumeArgs, FileIssueArgs, FinishArgs, InvokeArgs,
    LeaseArgs, MailArgs, MailWord, TimerArgs, Upstream, VoteArgs,
};
use super::eval::{Scope, text, truthy};
use super::program::{Program, is_effect};
use super::state::{
    self, Args, Cont, ContState, Effect, EffectKind, EffectState, Env, EventKind, Fact, Firing,
    State,
};
use super::{CONFLICT_RETRIES_MAX, Draft, Engine, Loaded, ROUNDS_PER_STEP_MAX, Result, now_ms};
use crate::check::model::Wf;
use crate::syntax::ast::{Block, RecordFrom, Rule, Stmt, StmtKind, WhenKind};

/// Does an effect in `state` with `output` satisfy `after … predicate`?
pub(crate) fn matches(predicate: &str, effect: &Effect) -> bool {
    let outcome = effect
        .output
        .as_ref()
        .and_then(|o| o.get("outcome"))
        .and_then(Value::as_str);
    match predicate {
        "succeeds" => effect.state == EffectState::Completed,
        // `completes` observes the effect settling, whichever way.
        "completes" => effect.state.settled(),
        "fails" => effect.state == EffectState::Failed,
        "times" | "times out" | "times_out" => effect.state == EffectState::TimedOut,
        "cancelled" => effect.state == EffectState::Cancelled,
        "held" | "contended" | "ok" | "over" | "replied" | "passed" | "failed" | "no_quorum" => {
            effect.state == EffectState::Completed && outcome == Some(predicate)
        }
        _ => false,
    }
}

impl<F: FabricClient> Engine<F> {
    /// Step an instance until no rule can fire, acting as its owner; returns the rounds
    /// committed.
    pub async fn step(&self, id: &str) -> Result<usize> {
        if let Some(owned) = self.for_owner(id).await? {
            return Box::pin(owned.step(id)).await;
        }
        let mut loaded = self.load(id).await?;
        self.step_loaded(&mut loaded).await
    }

    /// Step an already loaded instance (the copy is kept current).
    pub async fn step_loaded(&self, loaded: &mut Loaded) -> Result<usize> {
        let program = self.program(&loaded.state.header.program).await?;
        let wf = program
            .workflow(&loaded.state.header.workflow)
            .map_err(super::RuntimeError::Invalid)?;
        let mut rounds = 0;
        let mut conflicts = 0;
        if loaded.state.header.status == state::Status::Running {
            rounds += self.observe_trackers(wf, loaded).await?;
            rounds += self.drain_mail(wf, loaded).await?;
            rounds += self.drain_local(wf, loaded).await?;
        }
        let olds = self.pinned_programs(&loaded.state).await?;
        let pinned = pinned_of(&olds, &loaded.state.header.workflow);
        while rounds < ROUNDS_PER_STEP_MAX {
            let h = &loaded.state.header;
            if h.status != state::Status::Running {
                break;
            }
            let Some(draft) = round_with(&program, wf, &pinned, &loaded.state) else {
                break;
            };
            let terminal = draft.state.header.status.is_terminal();
            if self.commit(loaded, draft).await? {
                rounds += 1;
                if terminal {
                    self.after_terminal_of(&loaded.state).await?;
                }
            } else {
                conflicts += 1;
                if conflicts > CONFLICT_RETRIES_MAX {
                    break;
                }
                *loaded = self.load(&loaded.state.header.id).await?;
            }
        }
        Ok(rounds)
    }

    /// Fold into `draft` the round a step would run first once `draft` is committed, so
    /// that one commit carries both; whether the instance ended in that round. Only for a
    /// running instance whose workflow observes nothing between rounds (no tracker, issue
    /// fact or channel): a step's observations would then add nothing before its first
    /// round, and the events are the ones the step would have committed after this draft.
    pub(crate) async fn ride_round(&self, draft: &mut Draft) -> Result<bool> {
        let header = &draft.state.header;
        if header.status != state::Status::Running || draft.events.is_empty() {
            return Ok(false);
        }
        let program = self.program(&header.program).await?;
        let wf = program
            .workflow(&header.workflow)
            .map_err(super::RuntimeError::Invalid)?;
        if !observes_nothing(wf) {
            return Ok(false);
        }
        let olds = self.pinned_programs(&draft.state).await?;
        let pinned = pinned_of(&olds, &draft.state.header.workflow);
        let Some(round) = round_with(&program, wf, &pinned, &draft.state) else {
            return Ok(false);
        };
        draft.absorb(round);
        Ok(draft.state.header.status.is_terminal())
    }

    /// The older program versions pending continuations are pinned to (after a revision).
    async fn pinned_programs(&self, st: &State) -> Result<Vec<Arc<Program>>> {
        let versions: std::collections::BTreeSet<&str> = st
            .conts
            .values()
            .filter(|c| c.state == ContState::Pending)
            .filter_map(|c| c.program.as_deref())
            .filter(|v| *v != st.header.program)
            .collect();
        let mut out = Vec::new();
        for v in versions {
            out.push(self.program(v).await?);
        }
        Ok(out)
    }

    /// Free the leases and tracker claims of a terminal instance when it ever took one,
    /// and take its registry entry (with its children's) out.
    pub(crate) async fn after_terminal_of(&self, st: &State) -> Result<()> {
        let id = st.header.id.as_str();
        if let Some(work) = &st.header.work {
            // The terminal is committed: the entry goes in the background (`removal`); one
            // whose cell cannot take the revoke lapses with its lease (nobody renews a
            // finished instance's entry).
            let (fabric, work) = (Arc::clone(&self.fabric), work.clone());
            let (instance, key) = (id.to_string(), format!("{id}/terminal/work"));
            self.removals
                .start(async move {
                    if let Err(e) = fabric.work_revoke(work, key).await {
                        let why = "a finished instance's entry was not revoked; it lapses";
                        tracing::warn!(instance, error = %e, "{why}");
                    }
                })
                .await;
            self.forget_supervision(id);
        }
        if st.effects.values().any(|e| e.kind() == EffectKind::Acquire) {
            let key = format!("{id}/terminal/release-all");
            self.fabric.lease_release_all(id.to_string(), key).await?;
        }
        let claimed: Vec<String> = st
            .effects
            .values()
            .filter(|e| e.kind() == EffectKind::Claim)
            .filter_map(|e| {
                e.output
                    .as_ref()?
                    .get("issue")?
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        if !claimed.is_empty() {
            self.issue_release_claims(id, &claimed).await?;
        }
        Ok(())
    }

    /// Look at the trackers the workflow's rules watch: the ready issues of each tracker
    /// (kept on the loaded state for `has ready issue`), and the issues this instance filed,
    /// whose filing and closing become the runtime facts `issue.filed` and `issue.closed`.
    /// Returns 1 when a commit recorded new runtime facts.
    async fn observe_trackers(&self, wf: &Wf, loaded: &mut Loaded) -> Result<usize> {
        let watched = watched_trackers(wf);
        let runtime = wants_issue_facts(wf);
        if watched.is_empty() && !runtime {
            return Ok(0);
        }
        let now = now_ms();
        let mut ready = std::collections::BTreeMap::new();
        for t in watched {
            let Some(owner) = wf.trackers.get(&t).map(|r| r.owner.clone()) else {
                continue;
            };
            let list: Vec<(String, Value)> = self
                .ready_issues(&owner, &t)
                .await?
                .iter()
                .map(|i| (format!("issue:{}", i.id), i.view(now)))
                .collect();
            ready.insert(t, list);
        }
        loaded.state.ready_issues = ready.clone();
        if !runtime {
            return Ok(0);
        }
        let issues = self.filed_issues(&loaded.state).await?;
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut draft = Draft::new(&loaded.state, now_ms());
            issue_facts(&mut draft, &issues, now);
            if draft.events.is_empty() {
                return Ok(0);
            }
            if self.commit(loaded, draft).await? {
                return Ok(1);
            }
            *loaded = self.load(&loaded.state.header.id).await?;
            loaded.state.ready_issues = ready.clone();
        }
        Ok(0)
    }
}

impl<F: FabricClient> Engine<F> {
    /// The issues this instance filed that have not yet shown as closed.
    async fn filed_issues(&self, st: &State) -> Result<Vec<super::tracker::Issue>> {
        let mut out = Vec::new();
        for id in filed_ids(st) {
            let closed_seen = st
                .facts
                .values()
                .any(|f| f.class == "issue.closed" && f.value["id"] == json!(id));
            if !closed_seen {
                out.push(self.issue_read(&id).await?);
            }
        }
        Ok(out)
    }
}

/// Ids of the issues the instance's completed `file issue` effects filed.
fn filed_ids(st: &State) -> Vec<String> {
    st.effects
        .values()
        .filter(|e| e.kind() == EffectKind::FileIssue && e.state == EffectState::Completed)
        .filter_map(|e| e.output.as_ref()?.get("id")?.as_str().map(str::to_string))
        .collect()
}

/// Trackers some rule matches with `when T has ready issue`.
/// The workflow `workflow` of each older version, where it has one.
fn pinned_of<'a>(olds: &'a [Arc<Program>], workflow: &str) -> Vec<Pinned<'a>> {
    olds.iter()
        .filter_map(|old| Some((Arc::clone(old), old.workflow(workflow).ok()?)))
        .collect()
}

/// Whether a step of this workflow reads nothing before its rounds: no tracker it watches,
/// no issue facts, no channel to drain.
fn observes_nothing(wf: &Wf) -> bool {
    wf.channels.is_empty() && watched_trackers(wf).is_empty() && !wants_issue_facts(wf)
}

fn watched_trackers(wf: &Wf) -> Vec<String> {
    let mut out = Vec::new();
    for (_, rule, _) in &wf.rules {
        for w in &rule.whens {
            if let WhenKind::ReadyIssue(t) = &w.kind
                && !out.contains(&t.name)
            {
                out.push(t.name.clone());
            }
        }
    }
    out
}

/// True when some rule matches `when fact issue.filed` or `issue.closed`.
fn wants_issue_facts(wf: &Wf) -> bool {
    wf.rules.iter().any(|(_, rule, _)| {
        rule.whens.iter().any(|w| {
            matches!(&w.kind, WhenKind::Runtime(p) if p.first().is_some_and(|x| x.name == "issue"))
        })
    })
}

/// Record `issue.filed` / `issue.closed` facts for issues this instance filed.
fn issue_facts(draft: &mut Draft, issues: &[super::tracker::Issue], now: u64) {
    for id in filed_ids(&draft.state) {
        let Some(issue) = issues.iter().find(|i| i.id == id) else {
            continue;
        };
        let seen = |st: &State, class: &str| {
            st.facts
                .values()
                .any(|f| f.class == class && f.value["id"] == json!(id))
        };
        for (class, due) in [
            ("issue.filed", true),
            ("issue.closed", issue.status == super::tracker::CLOSED),
        ] {
            if due && !seen(&draft.state, class) {
                let fact = Fact {
                    id: draft.next_id(0, "f"),
                    class: class.into(),
                    value: issue.view(now),
                    live: true,
                };
                draft.emit(
                    EventKind::FactDerived,
                    json!({"fact": fact, "source": "tracker"}),
                );
            }
        }
    }
}

/// A program version an `after` continuation is pinned to, with its workflow.
pub(crate) type Pinned<'a> = (Arc<Program>, &'a Wf);

/// One round: the first ready firing in declaration order, as a draft.
pub(crate) fn round(program: &Arc<Program>, wf: &Wf, st: &State) -> Option<Draft> {
    round_with(program, wf, &[], st)
}

/// One round, continuations pinned to older versions (`pinned`, after a revision) first.
pub(crate) fn round_with(
    program: &Arc<Program>,
    wf: &Wf,
    pinned: &[Pinned<'_>],
    st: &State,
) -> Option<Draft> {
    let mut draft = Draft::new(st, now_ms());
    // A settled failure nobody observes fails the instance.
    if let Some(reason) = unhandled_failure(wf, st) {
        draft.emit(
            EventKind::WorkflowFailed,
            json!({"name": "error", "payload": reason, "reason": reason}),
        );
        cancel_queued(&mut draft);
        return Some(draft);
    }
    for (old, old_wf) in pinned.iter().filter(|(p, _)| p.version != program.version) {
        for ri in 0..old_wf.rules.len() {
            if settled_cont(old, old_wf, ri, Some(&old.version), st, &mut draft) {
                return Some(draft);
            }
        }
    }
    for (ri, (_, rule, _)) in wf.rules.iter().enumerate() {
        if settled_cont(program, wf, ri, None, st, &mut draft) {
            return Some(draft);
        }
        if let Some((key, ids, env)) = next_combination(&program.model, ri, rule, &draft.state) {
            let firing = Firing {
                key: key.clone(),
                rule: rule.name.name.clone(),
            };
            draft.emit(
                EventKind::RuleCommitted,
                json!({"rule": rule.name.name, "firing": firing, "facts": ids}),
            );
            let mut env = env;
            exec(program, wf, ri, &[], &rule.body, &mut env, &key, &mut draft);
            finish_firing(&mut draft);
            return Some(draft);
        }
    }
    (!draft.events.is_empty()).then_some(draft)
}

/// Fire the first pending continuation of rule `ri` (of `program`, pinned to `pin` or
/// unpinned) whose effect settled the way it waits for; drop those it settled otherwise.
/// True when one fired.
fn settled_cont(
    program: &Arc<Program>,
    wf: &Wf,
    ri: usize,
    pin: Option<&str>,
    st: &State,
    draft: &mut Draft,
) -> bool {
    let current = st.header.program.as_str();
    let on = |c: &Cont| match (c.program.as_deref(), pin) {
        (None, None) => true,
        (Some(v), None) => v == current,
        (c, pin) => c == pin,
    };
    let conts: Vec<Cont> = st
        .conts
        .values()
        .filter(|c| c.rule == ri && c.state == ContState::Pending && on(c))
        .cloned()
        .collect();
    let rule = &wf.rules[ri].1;
    for cont in conts {
        let Some(effect) = st.effects.get(&cont.effect) else {
            continue;
        };
        if !effect.state.settled() {
            continue;
        }
        if !matches(&cont.predicate, effect) {
            draft.emit(EventKind::AfterDropped, json!({"id": cont.id}));
            continue;
        }
        fire_cont(program, wf, ri, rule, &cont, effect, draft);
        return true;
    }
    false
}

fn unhandled_failure(wf: &Wf, st: &State) -> Option<String> {
    for e in st.effects.values() {
        // An agent turn or a coercion that timed out is no failure (`fails` matches
        // `failed` only): an unobserved one leaves the instance running.
        let agent = matches!(e.kind(), EffectKind::AgentTell | EffectKind::SchemaCoerce);
        let failure =
            e.state == EffectState::Failed || (e.state == EffectState::TimedOut && !agent);
        if !failure {
            continue;
        }
        let observed = st
            .conts
            .values()
            .any(|c| c.effect == e.id && matches(&c.predicate, e));
        if !observed {
            let name = e.binding.clone().unwrap_or_else(|| e.kind().to_string());
            let _ = wf;
            return Some(format!("unhandled failure of {name} in rule {}", e.rule));
        }
    }
    None
}

fn fire_cont(
    program: &Arc<Program>,
    wf: &Wf,
    ri: usize,
    rule: &Rule,
    cont: &Cont,
    effect: &Effect,
    draft: &mut Draft,
) {
    draft.emit(
        EventKind::RuleCommitted,
        json!({"rule": rule.name.name, "after": cont.id, "effect": effect.id}),
    );
    let Some(stmt) = rule.body.stmt_at(&cont.path) else {
        return;
    };
    let StmtKind::After(after) = &stmt.kind else {
        return;
    };
    let mut env = cont.env.clone();
    let output = effect.output.clone().unwrap_or(Value::Null);
    env.values.insert(after.target.name.clone(), output.clone());
    if let Some(b) = &after.binding {
        let value = super::agent::bound(effect, &cont.predicate)
            .unwrap_or_else(|| bound_value(effect, output));
        env.values.insert(b.name.clone(), value);
    }
    let origin = cont.id.clone();
    exec(
        program,
        wf,
        ri,
        &cont.path,
        &after.body,
        &mut env,
        &origin,
        draft,
    );
    finish_firing(draft);
}

/// What `after x … as y` binds: the output, except that a typed `exec … -> T` that
/// completed binds its result, the stdout parsed as a `T`.
fn bound_value(effect: &Effect, output: Value) -> Value {
    match (&effect.args, effect.state) {
        (Args::Exec(a), EffectState::Completed) if a.result.is_some() => output["value"].clone(),
        _ => output,
    }
}

/// A terminal in this firing cancels the instance's queued effects.
fn finish_firing(draft: &mut Draft) {
    if draft.state.header.status.is_terminal() {
        cancel_queued(draft);
    }
}

fn cancel_queued(draft: &mut Draft) {
    let queued: Vec<String> = draft
        .state
        .effects
        .values()
        .filter(|e| e.state == EffectState::Queued || e.state.blocked())
        .map(|e| e.id.clone())
        .collect();
    for id in queued {
        draft.emit(
            EventKind::EffectCancelled,
            json!({"id": id, "reason": "instance terminal"}),
        );
    }
}

/// What one `when` line draws from: live facts of its class, ready issues, runtime facts,
/// or the messages that arrived on a channel.
fn when_source(kind: &WhenKind, st: &State) -> Vec<(String, Value)> {
    if let WhenKind::CompletedTurn(a) = kind {
        return st
            .live("agent.turn.completed")
            .filter(|f| f.value["agent"] == json!(a.name))
            .map(|f| (f.id.clone(), f.value.clone()))
            .collect();
    }
    if let WhenKind::Available(path) = kind {
        // A gate, not a source: checked once the combination's bindings are known.
        let names: Vec<&str> = path.iter().map(|p| p.name.as_str()).collect();
        return vec![(format!("available:{}", names.join(".")), Value::Null)];
    }
    let live = |class: &str| -> Vec<(String, Value)> {
        st.live(class)
            .map(|f| (f.id.clone(), f.value.clone()))
            .collect()
    };
    match kind {
        WhenKind::Started => vec![("started".into(), Value::Null)],
        WhenKind::Fact(c) => live(&c.name),
        WhenKind::ReadyIssue(t) => st.ready_issues.get(&t.name).cloned().unwrap_or_default(),
        WhenKind::Runtime(path) => {
            let name: Vec<&str> = path.iter().map(|p| p.name.as_str()).collect();
            live(&name.join("."))
        }
        WhenKind::Message(c) => st
            .live(super::mail::MESSAGE_FACT)
            .filter(|f| f.value["channel"] == json!(c.name))
            .map(|f| (f.id.clone(), f.value.clone()))
            .collect(),
        WhenKind::CompletedTurn(_) | WhenKind::Available(_) => Vec::new(),
    }
}

/// The first combination of live facts (in fact order) that passes every guard and has
/// not fired yet.
fn next_combination(
    m: &crate::check::model::Model,
    ri: usize,
    rule: &Rule,
    st: &State,
) -> Option<(String, Vec<String>, Env)> {
    let sources: Vec<Vec<(String, Value)>> = rule
        .whens
        .iter()
        .map(|w| when_source(&w.kind, st))
        .collect();
    if sources.iter().any(Vec::is_empty) {
        return None;
    }
    let mut pick = vec![0usize; sources.len()];
    let mut tried = 0usize;
    loop {
        tried += 1;
        if tried > crate::limits::JOIN_COMBINATIONS_MAX {
            return None;
        }
        let ids: Vec<String> = pick
            .iter()
            .zip(&sources)
            .map(|(i, s)| s[*i].0.clone())
            .collect();
        let key = format!("{ri}:{}", ids.join(","));
        if !st.firings.contains_key(&key) {
            let mut env = Env::default();
            for ((i, s), w) in pick.iter().zip(&sources).zip(&rule.whens) {
                if let Some(b) = &w.binding {
                    env.values.insert(b.name.clone(), s[*i].1.clone());
                    env.facts.insert(b.name.clone(), s[*i].0.clone());
                }
            }
            let scope = Scope {
                env: &env,
                state: st,
            };
            let pass = rule
                .whens
                .iter()
                .filter_map(|w| w.guard.as_ref())
                .all(|g| truthy(&scope.eval(g)));
            if pass && available(m, rule, &env, st) {
                return Some((key, ids, env));
            }
        }
        // Advance the odometer (last source fastest).
        let mut at = sources.len();
        loop {
            if at == 0 {
                return None;
            }
            at -= 1;
            pick[at] += 1;
            if pick[at] < sources[at].len() {
                break;
            }
            pick[at] = 0;
        }
    }
}

/// `complete NAME payload` or `fail NAME payload` (the first terminal wins).
fn terminal(rule: &Rule, stmt: &Stmt, env: &Env, draft: &mut Draft) {
    let (StmtKind::Complete(name, payload) | StmtKind::Fail(name, payload)) = &stmt.kind else {
        return;
    };
    if draft.state.header.status.is_terminal() {
        return;
    }
    let payload = Scope {
        env,
        state: &draft.state,
    }
    .eval(payload);
    let kind = if matches!(stmt.kind, StmtKind::Complete(..)) {
        EventKind::WorkflowCompleted
    } else {
        EventKind::WorkflowFailed
    };
    draft.emit(
        kind,
        json!({"name": name.name, "payload": payload, "rule": rule.name.name}),
    );
}

/// Every `when … is available` line of `rule` holds with the bindings `env`.
fn available(m: &crate::check::model::Model, rule: &Rule, env: &Env, st: &State) -> bool {
    rule.whens.iter().all(|w| {
        let WhenKind::Available(path) = &w.kind else {
            return true;
        };
        let Some(agent) = super::agent::available_agent(m, path, env, st) else {
            return false;
        };
        let capacity = m.agents.get(&agent).map_or(0, |a| a.capacity);
        super::agent::available(st, &agent, capacity)
    })
}

/// Execute a block: effects first (so `after` can name them), then facts, terminals and
/// `after` registrations.
#[allow(clippy::too_many_arguments)]
fn exec(
    program: &Arc<Program>,
    wf: &Wf,
    ri: usize,
    path: &[usize],
    block: &Block,
    env: &mut Env,
    origin: &str,
    draft: &mut Draft,
) {
    let rule = &wf.rules[ri].1;
    start_effects(program, wf, ri, block, env, origin, draft);
    for (i, stmt) in block.stmts.iter().enumerate() {
        match &stmt.kind {
            StmtKind::Record(class, obj) => {
                let value = Scope {
                    env,
                    state: &draft.state,
                }
                .object(obj);
                record(draft, &class.name, value);
            }
            StmtKind::RecordFrom(r) => record_from(program, rule, r, env, draft),
            StmtKind::Cancel(x) => cancel(env, x, draft),
            StmtKind::Done(x, then) => {
                if let Some(id) = env.facts.get(&x.name)
                    && draft.state.facts.get(id).is_some_and(|f| f.live)
                {
                    draft.emit(
                        EventKind::FactConsumed,
                        json!({"id": id, "rule": rule.name.name}),
                    );
                }
                if let Some((class, obj)) = then {
                    let value = Scope {
                        env,
                        state: &draft.state,
                    }
                    .object(obj);
                    record(draft, &class.name, value);
                }
            }
            StmtKind::Complete(..) | StmtKind::Fail(..) => terminal(rule, stmt, env, draft),
            StmtKind::After(after) => {
                let Some(effect) = env.effects.get(&after.target.name).cloned() else {
                    continue;
                };
                let at = [path, &[i]].concat();
                register_after(program, (ri, at), env, effect, after, draft);
            }
            StmtKind::Case(c) => {
                let Some((arm, mut arm_env)) = case_arm(c, env, &draft.state) else {
                    continue;
                };
                let at = [path, &[i, arm]].concat();
                let body = &c.arms[arm].body;
                exec(program, wf, ri, &at, body, &mut arm_env, origin, draft);
            }
            _ => {}
        }
    }
}

/// Request the block's effects, then register every `after` of the rule that waits on one
/// of them from outside the blocks that start it (a rule-level `after b` on a `b` started in
/// another `after` block). Such an `after` runs with the bindings of the firing that started
/// its effect: the `when` bindings and the values of the `after` blocks on that effect's
/// chain (LANGUAGE-AGENTS.md §2, "values follow the chain"). It is registered whether or not
/// the blocks around it ever ran: LANGUAGE.md is silent there, and waiting on the effect is
/// what a user who wrote it there means.
fn start_effects(
    program: &Arc<Program>,
    wf: &Wf,
    ri: usize,
    block: &Block,
    env: &mut Env,
    origin: &str,
    draft: &mut Draft,
) {
    let rule = &wf.rules[ri].1;
    let mut started = Vec::new();
    for stmt in &block.stmts {
        if is_effect(&stmt.kind) {
            let n = program.effect_number(&wf.name.name, ri, stmt.span.start as usize);
            let stable = format!("{}/e{n}@{origin}", rule.name.name);
            request_effect((&program.model, wf), rule, stmt, stable, env, draft);
            started.extend(stmt.kind.effect_binding().map(|b| b.name.clone()));
        }
    }
    if started.is_empty() {
        return;
    }
    for hoisted in rule.body.hoisted_afters() {
        if !started.contains(&hoisted.target) {
            continue;
        }
        let (Some(effect), Some(stmt)) = (
            env.effects.get(&hoisted.target).cloned(),
            rule.body.stmt_at(&hoisted.path),
        ) else {
            continue;
        };
        if let StmtKind::After(after) = &stmt.kind {
            register_after(program, (ri, hoisted.path), env, effect, after, draft);
        }
    }
}

/// Register the `after` continuation at `path` of rule `ri` on `effect`.
fn register_after(
    program: &Program,
    (ri, path): (usize, Vec<usize>),
    env: &Env,
    effect: String,
    after: &crate::syntax::ast::After,
    draft: &mut Draft,
) {
    let cont = Cont {
        id: draft.next_id(2, "c"),
        rule: ri,
        path,
        env: env.clone(),
        effect,
        predicate: after.predicate.name.clone(),
        state: ContState::Pending,
        // A continuation registered by a pinned (older) version's rule stays on it.
        program: (program.version != draft.state.header.program).then(|| program.version.clone()),
    };
    draft.emit(EventKind::AfterRegistered, json!({"after": cont}));
}

/// `record C from x [{ … }]`. The checker proved a class-typed source fits; an untyped one
/// (an effect's output) that is no object or lacks a required field fails the instance
/// with the reason, rather than recording a fact its class does not describe.
fn record_from(program: &Program, rule: &Rule, r: &RecordFrom, env: &Env, draft: &mut Draft) {
    let scope = Scope {
        env,
        state: &draft.state,
    };
    let source = scope.eval(&r.source);
    let overrides = r.overrides.as_ref().map(|o| scope.object(o));
    let class = program.model.classes.get(&r.class.name);
    match fact_from(class, source, overrides) {
        Ok(value) => record(draft, &r.class.name, value),
        Err(why) if !draft.state.header.status.is_terminal() => {
            let reason = format!(
                "rule {} records {} from {why}",
                rule.name.name, r.class.name
            );
            draft.emit(
                EventKind::WorkflowFailed,
                json!({"name": "error", "payload": reason, "reason": reason}),
            );
        }
        Err(_) => {}
    }
}

/// The fact `record C from source { overrides }` makes: each field of `C` from the
/// overrides, else from the source; a required field found in neither is an error.
fn fact_from(
    class: Option<&crate::check::model::Class>,
    source: Value,
    overrides: Option<Value>,
) -> std::result::Result<Value, String> {
    let Some(class) = class else {
        return Err("an undeclared class".into());
    };
    let Value::Object(source) = source else {
        return Err(format!("a {} value, not an object", json_type(&source)));
    };
    let overrides = match overrides {
        Some(Value::Object(o)) => o,
        _ => serde_json::Map::new(),
    };
    let mut fact = serde_json::Map::new();
    for (field, ty) in &class.fields {
        match overrides.get(field).or_else(|| source.get(field)) {
            Some(v) => {
                fact.insert(field.clone(), v.clone());
            }
            None if ty.is_optional() => {}
            None => return Err(format!("a value without required field `{field}`")),
        }
    }
    Ok(Value::Object(fact))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `cancel x`: a queued or blocked effect is cancelled, a running one gets a cancel request
/// (its run still records how it ends), a settled one is left alone.
fn cancel(env: &Env, x: &crate::syntax::ast::Ident, draft: &mut Draft) {
    let Some(id) = env.effects.get(&x.name) else {
        return;
    };
    let Some(state) = draft.state.effects.get(id).map(|e| e.state) else {
        return;
    };
    let event = match state {
        s if s.settled() => return,
        EffectState::Running => EventKind::EffectCancelRequested,
        _ => EventKind::EffectCancelled,
    };
    draft.emit(event, json!({"id": id, "reason": "cancelled by rule"}));
    super::agent::settled(draft, id);
}

/// The arm of `case` that runs with the bindings `env`, and the bindings it runs with: the
/// first whose pattern matches and whose guard holds. On an effect binding (the
/// terminal-output form), the patterns are the tags of how it settled.
fn case_arm(c: &crate::syntax::ast::Case, env: &Env, st: &State) -> Option<(usize, Env)> {
    use crate::syntax::ast::{ExprKind, Pattern};
    let effect = match &c.scrutinee.kind {
        ExprKind::Path(segs) if segs.len() == 1 => env
            .effects
            .get(&segs[0].name)
            .and_then(|id| st.effects.get(id)),
        _ => None,
    };
    let value = Scope { env, state: st }.eval(&c.scrutinee);
    for (i, arm) in c.arms.iter().enumerate() {
        let mut arm_env = env.clone();
        let bound = match (&arm.pattern, effect) {
            (Pattern::Wildcard, _) => Some(value.clone()),
            (Pattern::Name(tag), Some(e)) => {
                (super::agent::tag(e.state) == Some(tag)).then(|| terminal_value(e, tag))
            }
            (_, Some(_)) => None,
            (Pattern::Str(s), None) => (value == json!(s)).then(|| value.clone()),
            (Pattern::Bool(b), None) => (value == json!(b)).then(|| value.clone()),
            (Pattern::Name(n), None) if n == "None" => value.is_null().then_some(Value::Null),
            (Pattern::Name(n), None) => (value == json!(n)).then(|| value.clone()),
            (Pattern::Some(x), None) => (!value.is_null()).then(|| {
                arm_env.values.insert(x.name.clone(), value.clone());
                value.clone()
            }),
        };
        let Some(bound) = bound else { continue };
        if let Some(b) = &arm.binding {
            arm_env.values.insert(b.name.clone(), bound);
        }
        let holds = arm.guard.as_ref().is_none_or(|g| {
            truthy(
                &Scope {
                    env: &arm_env,
                    state: st,
                }
                .eval(g),
            )
        });
        if holds {
            return Some((i, arm_env));
        }
    }
    None
}

/// What a terminal-output arm `TAG as v` binds: what the matching `after` predicate binds.
fn terminal_value(e: &Effect, tag: &str) -> Value {
    let predicate = super::agent::tag_predicate(tag);
    super::agent::bound(e, predicate)
        .unwrap_or_else(|| bound_value(e, e.output.clone().unwrap_or(Value::Null)))
}

fn record(draft: &mut Draft, class: &str, value: Value) {
    // Set semantics: the same content is the same fact.
    if draft.state.live(class).any(|f| f.value == value) {
        return;
    }
    let fact = Fact {
        id: draft.next_id(0, "f"),
        class: class.to_string(),
        value,
        live: true,
    };
    draft.emit(EventKind::FactDerived, json!({"fact": fact}));
}

/// A lease as declared, with the language's defaults written in.
fn lease_of(wf: &Wf, name: &str) -> Option<LeaseArgs> {
    use crate::limits::{LEASE_SLOTS_DEFAULT, LEASE_TTL_MS_DEFAULT};
    let r = wf.leases.get(name)?;
    let slots = r.decl.slots.map_or(LEASE_SLOTS_DEFAULT, |s| {
        u32::try_from(s.value.max(1)).unwrap_or(u32::MAX)
    });
    Some(LeaseArgs {
        owner: r.owner.clone(),
        name: name.to_string(),
        key: String::new(),
        slots,
        ttl_ms: r
            .decl
            .ttl
            .map_or(LEASE_TTL_MS_DEFAULT, |d| d.seconds * 1000),
        wait_ms: 0,
        wait_until_ms: 0,
        until_ttl: false,
    })
}

/// A `finish` of a claim binding, with what the claim held.
fn finish_args(
    scope: &Scope<'_>,
    x: &crate::syntax::ast::Ident,
    obj: Option<&crate::syntax::ast::ObjectLit>,
) -> Args {
    let upstream = scope.env.effects.get(&x.name).cloned();
    let held = upstream
        .as_ref()
        .and_then(|id| scope.state.effects.get(id))
        .and_then(|e| e.output.clone());
    let held = match held.map(serde_json::from_value).transpose() {
        Ok(held) => held,
        Err(e) => {
            let error = format!(
                "finish of `{}`: the claim's output is malformed: {e}",
                x.name
            );
            return Args::refused(EffectKind::Finish, error);
        }
    };
    Args::Finish(FinishArgs {
        claim: upstream,
        binding: x.name.clone(),
        summary: obj.map_or(Value::Null, |o| scope.object(o)),
        held,
    })
}

/// A `consume` effect's counter, key, amount and period.
fn consume_args(wf: &Wf, c: &crate::syntax::ast::Consume, scope: &Scope<'_>) -> Args {
    let refused = |what: &str| {
        let error = format!("counter `{}` {what}", c.counter.name);
        Args::refused(EffectKind::Consume, error)
    };
    let Some(r) = wf.counters.get(&c.counter.name) else {
        return refused("is not declared");
    };
    let Some(cap) = r.decl.cap else {
        return refused("declares no cap");
    };
    let reset = r.decl.reset.as_ref().map(|v| Value::String(v.name.clone()));
    let Some(Ok(reset)) = reset.map(serde_json::from_value) else {
        return refused("declares no known reset period");
    };
    let amount = scope.eval(&c.amount);
    let Some(amount) = amount.as_i64() else {
        return refused(&format!(
            "is consumed by {amount}, which is not a whole number"
        ));
    };
    Args::Consume(ConsumeArgs {
        owner: r.owner.clone(),
        name: c.counter.name.clone(),
        key: text(&scope.eval(&c.key)),
        amount: amount.max(0) as u64,
        cap: cap.value.max(0) as u64,
        reset,
        timezone: r.decl.timezone.as_ref().map_or_else(
            || crate::limits::COUNTER_TIMEZONE_DEFAULT.to_string(),
            |z| z.0.clone(),
        ),
    })
}

/// An `invoke` effect's workflow and input.
fn invoke_args(
    w: &crate::syntax::ast::Ident,
    obj: &crate::syntax::ast::ObjectLit,
    scope: &Scope<'_>,
) -> Args {
    // The checker lowered an `input { … }` wrapper away: the object's keys are the inputs.
    let input = scope.object(obj);
    Args::Invoke(InvokeArgs {
        workflow: w.name.clone(),
        input,
    })
}

/// A `vote` effect's team and rules, with the language's defaults written in (plurality,
/// quorum 1/2, majority, coordinators).
fn vote_args(v: &crate::syntax::ast::Vote, scope: &Scope<'_>) -> Args {
    use crate::limits::{
        VOTE_ELECTORATE_DEFAULT, VOTE_METHOD_DEFAULT, VOTE_QUORUM_DEFAULT, VOTE_THRESHOLD_DEFAULT,
    };
    let body = scope.object(&v.body);
    let word = |field: &str, default: &str| {
        body.get(field)
            .filter(|v| !v.is_null())
            .map_or(default.to_string(), text)
    };
    let list = |field: &str| -> Vec<String> {
        body.get(field)
            .and_then(Value::as_array)
            .map_or(Vec::new(), |items| items.iter().map(text).collect())
    };
    let mut electorate = list("electorate");
    if electorate.is_empty() {
        electorate.push(VOTE_ELECTORATE_DEFAULT.to_string());
    }
    Args::Vote(VoteArgs {
        team: text(&scope.eval(&v.team)),
        title: word("title", ""),
        options: list("options"),
        method: word("method", VOTE_METHOD_DEFAULT),
        quorum: word("quorum", VOTE_QUORUM_DEFAULT),
        threshold: word("threshold", VOTE_THRESHOLD_DEFAULT),
        electorate,
        duration_ms: v.closes.seconds * 1000,
    })
}

/// A `send via` effect: its binding and the message it sends.
fn send_args<'s>(
    wf: &Wf,
    m: &'s crate::syntax::ast::Send,
    scope: &Scope<'_>,
) -> (&'s Option<crate::syntax::ast::Ident>, Args) {
    use crate::syntax::ast::SendKind;
    let decl = wf.channels.get(&m.channel.name).map(|r| &r.decl);
    let to = decl.and_then(|d| {
        let (kind, name) = d.to.as_ref()?;
        Some(format!("{}:{}", kind.name, name.value))
    });
    let provider = decl
        .map(|d| d.provider_name())
        .filter(|p| *p != "fabric")
        .map(str::to_string);
    let destination = decl.and_then(|d| d.destination.as_ref().map(|s| s.value.clone()));
    let body = scope.object(&m.body);
    let word = match m.kind {
        SendKind::Inform => MailWord::Inform,
        SendKind::Directive => MailWord::Directive,
        SendKind::Ask => MailWord::Ask,
    };
    let args = MailArgs {
        channel: m.channel.name.clone(),
        to,
        word,
        text: text(&body["text"]),
        payload: body["payload"].clone(),
        thread: body.get("thread").map(text),
        within_ms: m.within.map_or(0, |d| d.seconds * 1000),
        provider,
        destination,
    };
    let args = match word {
        MailWord::Ask => Args::MessageAsk(args),
        _ => Args::MessageSend(args),
    };
    (&m.binding, args)
}

/// An `exec` effect's typed arguments: argv as text (empty when the value is not an array,
/// which the worker fails), cwd, env values as text, the timeout.
fn exec_args(
    model: &crate::check::model::Model,
    x: &crate::syntax::ast::Exec,
    scope: &Scope<'_>,
) -> Args {
    use crate::check::shape::Shape;
    use crate::executor::effect::{EXEC_ARGS_VERSION, ExecArgs};
    let argv = match command_argv(x, scope) {
        Ok(argv) => argv,
        Err(error) => return Args::refused(EffectKind::Exec, error),
    };
    let result = x.result.as_ref().map(|t| {
        // The checker reported an unknown name; here it resolves to any value.
        let ty = crate::check::model::resolve_type(model, t, &mut Vec::new());
        Shape::of(model, &ty)
    });
    let env = x.env.as_ref().map_or_else(Default::default, |o| {
        let fields = o.fields.iter();
        fields
            .map(|(k, v)| (k.name.clone(), text(&scope.eval(v))))
            .collect()
    });
    Args::Exec(ExecArgs {
        v: EXEC_ARGS_VERSION,
        argv,
        cwd: x.cwd.as_ref().map(|c| text(&scope.eval(c))),
        env,
        timeout_ms: x
            .timeout
            .map_or(crate::limits::EXEC_TIMEOUT_MS_DEFAULT, |d| d.seconds * 1000),
        result,
    })
}

/// An `exec`'s argv: an array's items, or a command string split into words without a
/// shell ([`crate::executor::command`]), its `{{ path }}` values never split.
fn command_argv(
    x: &crate::syntax::ast::Exec,
    scope: &Scope<'_>,
) -> std::result::Result<Vec<String>, String> {
    use crate::executor::command::{Piece, split};
    use crate::syntax::ast::{ExprKind, StrPart};
    let ExprKind::Str(s) = &x.argv.kind else {
        return match scope.eval(&x.argv) {
            Value::Array(items) => Ok(items.iter().map(text).collect()),
            other => Err(format!("exec argv is {other}, not an array of strings")),
        };
    };
    let pieces: Vec<Piece<'_>> = s
        .parts
        .iter()
        .map(|p| match p {
            StrPart::Lit(t) => Piece::Text(t),
            StrPart::Path(path) => Piece::Value(text(&scope.lookup(path))),
        })
        .collect();
    split(&pieces).map_err(|e| format!("exec command {:?}: {e}", s.value))
}

/// `timer until T`: due at the instant T names (a past one is due at once). A value that
/// is no ISO-8601 instant (a `time` field holding something else) fails the effect with
/// the reason, rather than firing at some default time.
fn timer_until_args(at: &crate::syntax::ast::Expr, scope: &Scope<'_>) -> (u64, Args) {
    let value = scope.eval(at);
    match crate::check::instant::parse_ms(&text(&value)) {
        Some(ms) => {
            // An instant before 1970 is in the past like any other: due at once.
            let due = u64::try_from(ms).unwrap_or(0);
            let args = TimerArgs {
                seconds: 0,
                until_ms: Some(due),
            };
            (due, Args::Timer(args))
        }
        None => {
            let error = format!("timer until {value}: not an ISO-8601 instant");
            (0, Args::refused(EffectKind::Timer, error))
        }
    }
}

/// An `acquire`: the lease as declared, the key, the wait from `now`.
fn acquire_args(wf: &Wf, a: &crate::syntax::ast::Acquire, scope: &Scope<'_>, now: u64) -> Args {
    let Some(mut lease) = lease_of(wf, &a.lease.name) else {
        let error = format!("lease `{}` is not declared", a.lease.name);
        return Args::refused(EffectKind::Acquire, error);
    };
    lease.key = text(&scope.eval(&a.key));
    lease.wait_ms = a.wait.map_or(0, |d| d.seconds * 1000);
    lease.wait_until_ms = now + lease.wait_ms;
    lease.until_ttl = a.until_ttl;
    Args::Acquire(lease)
}

/// A `release` or `renew` of binding `x`: the arguments of the effect it names (a lease
/// hold or a claim), with a renewal's ttl.
fn upstream_args(
    kind: EffectKind,
    x: &crate::syntax::ast::Ident,
    until: Option<crate::syntax::ast::Duration>,
    env: &Env,
    st: &State,
) -> Args {
    let upstream = env.effects.get(&x.name).and_then(|id| st.effects.get(id));
    let ttl = until.map(|d| d.seconds * 1000);
    let typed = match upstream.map(|e| (&e.args, e)) {
        Some((Args::Acquire(a), _)) => Ok(Upstream::Acquire(LeaseArgs {
            ttl_ms: ttl.unwrap_or(a.ttl_ms),
            ..a.clone()
        })),
        Some((Args::Claim(c), e)) => {
            let held = e.output.clone().map(serde_json::from_value).transpose();
            held.map_err(|err| format!("the claim's output is malformed: {err}"))
                .map(|held| {
                    Upstream::Claim(ClaimUpstream {
                        issue: c.issue.clone(),
                        ttl_ms: ttl.unwrap_or(c.ttl_ms),
                        held,
                    })
                })
        }
        Some((other, _)) => Err(format!("`{}` is a {} effect", x.name, other.kind())),
        None => Err(format!("`{}` names no lease hold or claim", x.name)),
    };
    match (typed, kind) {
        (Ok(u), EffectKind::Renew) => Args::Renew(u),
        (Ok(u), _) => Args::Release(u),
        (Err(e), _) => Args::refused(kind, format!("{kind} of an unknown lease binding: {e}")),
    }
}

fn request_effect(
    (model, wf): (&crate::check::model::Model, &Wf),
    rule: &Rule,
    stmt: &Stmt,
    stable: String,
    env: &mut Env,
    draft: &mut Draft,
) {
    let now = draft.at_ms;
    let scope = Scope {
        env,
        state: &draft.state,
    };
    let mut not_before_ms = 0;
    let (binding, args) = match &stmt.kind {
        StmtKind::Timer(d, b) => {
            not_before_ms = now + d.seconds * 1000;
            let args = TimerArgs {
                seconds: d.seconds,
                until_ms: None,
            };
            (b, Args::Timer(args))
        }
        StmtKind::TimerUntil(at, b) => {
            let (due, args) = timer_until_args(at, &scope);
            not_before_ms = due;
            (b, args)
        }
        StmtKind::Invoke(w, obj, b) => (b, invoke_args(w, obj, &scope)),
        StmtKind::Acquire(a) => (&a.binding, acquire_args(wf, a, &scope, now)),
        StmtKind::Release(x) => (
            &None,
            upstream_args(EffectKind::Release, x, None, env, &draft.state),
        ),
        StmtKind::Renew(x, until, y) => (
            y,
            upstream_args(EffectKind::Renew, x, *until, env, &draft.state),
        ),
        StmtKind::Consume(c) => (&c.binding, consume_args(wf, c, &scope)),
        StmtKind::Vote(v) => (&v.binding, vote_args(v, &scope)),
        StmtKind::Append(class, obj, ledger, b) => (b, append_args(wf, class, obj, ledger, &scope)),
        StmtKind::FileIssue(t, obj, b) => (b, file_issue_args(wf, t, obj, &scope)),
        StmtKind::Claim(x, ttl, b) => (b, claim_args(x, *ttl, &scope)),
        StmtKind::Finish(x, obj, b) => (b, finish_args(&scope, x, obj.as_ref())),
        StmtKind::Send(m) => send_args(wf, m, &scope),
        StmtKind::Exec(x) => (&x.binding, exec_args(model, x, &scope)),
        StmtKind::Tell(t) => (
            &t.binding,
            super::agent::tell_args(model, &rule.name.name, t, &scope),
        ),
        StmtKind::Coerce(c) => (&c.binding, super::agent::coerce_args(model, c, &scope)),
        _ => return,
    };
    let mut effect = Effect::queued(draft.next_id(1, "x"), stable, rule.name.name.clone(), args);
    effect.binding = binding.as_ref().map(|b| b.name.clone());
    effect.not_before_ms = not_before_ms;
    effect.depends_on = dependency_of(&stmt.kind, env, &draft.state);
    if let Some(b) = &effect.binding {
        env.effects.insert(b.clone(), effect.id.clone());
    }
    draft.emit(EventKind::EffectRequested, json!({"effect": effect}));
}

/// A `file issue into TRACKER {…}`: the tracker's owner (the builtin shared tracker when
/// the workflow does not declare it) and the issue's fields.
fn file_issue_args(
    wf: &Wf,
    t: &crate::syntax::ast::Ident,
    obj: &crate::syntax::ast::ObjectLit,
    scope: &Scope<'_>,
) -> Args {
    let owner = wf.trackers.get(&t.name).map_or_else(
        || crate::limits::TRACKER_OWNER_DEFAULT.to_string(),
        |r| r.owner.clone(),
    );
    Args::FileIssue(FileIssueArgs {
        tracker: t.name.clone(),
        owner,
        issue: scope.object(obj),
    })
}

/// The effect a `release`, `renew` or `finish` acts on, while it has not settled: the new
/// effect waits for it (a release before its acquire would free nothing, and a finish
/// before its claim would hold no issue).
fn dependency_of(kind: &StmtKind, env: &Env, st: &State) -> Option<String> {
    let x = match kind {
        StmtKind::Release(x) | StmtKind::Renew(x, ..) | StmtKind::Finish(x, ..) => x,
        _ => return None,
    };
    let id = env.effects.get(&x.name)?;
    let unsettled = st.effects.get(id).is_some_and(|e| !e.state.settled());
    unsettled.then(|| id.clone())
}

/// An `append` to a declared ledger.
fn append_args(
    wf: &Wf,
    class: &crate::syntax::ast::Ident,
    obj: &crate::syntax::ast::ObjectLit,
    ledger: &crate::syntax::ast::Ident,
    scope: &Scope<'_>,
) -> Args {
    let Some(r) = wf.ledgers.get(&ledger.name) else {
        let error = format!("ledger `{}` is not declared", ledger.name);
        return Args::refused(EffectKind::Append, error);
    };
    let entry = scope.object(obj);
    let field = r.decl.partition.as_ref().map_or("", |p| p.name.as_str());
    Args::Append(AppendArgs {
        owner: r.owner.clone(),
        name: ledger.name.clone(),
        class: class.name.clone(),
        partition: text(&entry[field]),
        entry,
        retain_ms: r
            .decl
            .retain
            .map_or(crate::limits::LEDGER_RETAIN_MS_DEFAULT, |d| {
                d.seconds * 1000
            }),
    })
}

/// A `claim` of the issue binding `x`.
fn claim_args(
    x: &crate::syntax::ast::Ident,
    ttl: Option<crate::syntax::ast::Duration>,
    scope: &Scope<'_>,
) -> Args {
    let issue = scope.eval(&crate::syntax::ast::Expr {
        kind: crate::syntax::ast::ExprKind::Path(vec![x.clone()]),
        span: x.span,
    });
    let ttl_ms = ttl.map_or(crate::limits::CLAIM_TTL_MS_DEFAULT, |d| d.seconds * 1000);
    match issue.clone().try_into() {
        Ok(issue) => Args::Claim(ClaimArgs { issue, ttl_ms }),
        Err(e) => Args::refused(EffectKind::Claim, format!("claim of `{}`: {e}", x.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Span;
    use crate::syntax::ast::Ident;

    /// `cancel x` on an effect in each state: the event it appends (if any).
    fn cancel_in(state: EffectState) -> (Vec<String>, EffectState, bool) {
        let args = Args::decode(EffectKind::Exec, Value::Null);
        let mut effect = Effect::queued("x000001".into(), "r/e1@0".into(), "r".into(), args);
        effect.state = state;
        let mut st = State::default();
        st.effects.insert(effect.id.clone(), effect);
        let mut env = Env::default();
        env.effects.insert("x".into(), "x000001".into());
        let x = Ident {
            name: "x".into(),
            span: Span::default(),
        };
        let mut draft = Draft::new(&st, now_ms());
        cancel(&env, &x, &mut draft);
        let kinds = draft
            .events
            .iter()
            .map(|e| e.kind.code().to_string())
            .collect();
        let after = &draft.state.effects["x000001"];
        (kinds, after.state, after.cancel_requested)
    }

    #[test]
    fn cancel_cancels_queued_and_blocked_requests_running_and_leaves_settled() {
        use EffectState::{Blocked, Completed, Failed, Queued, Running};
        for state in [Queued, Blocked] {
            let (kinds, after, _) = cancel_in(state);
            assert_eq!(
                (kinds, after),
                (vec!["effect.cancelled".into()], EffectState::Cancelled)
            );
        }
        let (kinds, after, requested) = cancel_in(Running);
        assert_eq!(kinds, ["effect.cancel_requested"]);
        assert_eq!(
            (after, requested),
            (Running, true),
            "a request, not a result"
        );
        for state in [Completed, Failed] {
            let (kinds, after, _) = cancel_in(state);
            assert!(kinds.is_empty(), "settled: no-op");
            assert_eq!(after, state);
        }
    }
}
