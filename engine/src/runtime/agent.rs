//! Agent turns and coercions as effects (LANGUAGE-AGENTS.md §2, §3): their arguments, built
//! by the stepper from the program; the gates that hold a turn back (its profile, the
//! agent's capacity); the values `after` blocks bind; and the runtime facts a settling
//! derives (`agent.turn.completed|failed|timed_out|cancelled`,
//! `schema.coerce.succeeded|failed|timed_out`).
//!
//! The capacity gate is decided inside the worker's claim: the claim's draft counts the
//! instance's `running` turns of the agent and either starts the turn or blocks it, and the
//! draft commits as one transaction guarded by the instance's sequence key on its home cell.
//! Two workers (on any nodes) that both counted room cannot both commit, so at most
//! `capacity` turns of an agent run at once per instance.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::Draft;
use super::effect::{Args, BlockCategory, EffectKind, EffectState, PolicyBlock};
use super::eval::{Scope, text};
use super::state::{Effect, Env, EventKind, Fact, State};
use crate::check::model::Model;
use crate::check::shape::Shape;
use crate::syntax::ast::{CoerceCall, ExprKind, Ident, StrLit, StrPart, Tell};

/// `tell AGENT … PROMPT`, with the agent's declaration written in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TellArgs {
    /// The agent told.
    pub agent: String,
    /// Its provider kind (`owned`, `fixture`, `command`).
    pub provider: String,
    /// Its profile.
    pub profile: String,
    /// Its turns that may run at once in this instance.
    pub capacity: u32,
    /// The prompt, rendered when the rule committed.
    pub prompt: String,
    /// The content type the prompt's `"""` opener named.
    pub prompt_content_type: Option<String>,
    /// The rule that told it.
    pub rule: String,
    /// The rule's bindings when it committed.
    pub bindings: Value,
    /// `timeout D`, in ms: a longer turn ends `timed_out`.
    pub timeout_ms: Option<u64>,
    /// `requires [..]`.
    pub requires: Vec<String>,
}

/// `coerce NAME(args…)`, with the declaration written in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoerceArgs {
    /// The coerce function.
    pub function: String,
    /// Its `provider`, when it names one.
    pub provider: Option<String>,
    /// The prompt, rendered.
    pub prompt: String,
    /// Each parameter's value.
    pub args: Value,
    /// The shape the answer must have.
    pub output: Shape,
    /// The output type as written (`Decision`).
    pub output_type: String,
    /// `timeout D`, in ms.
    pub timeout_ms: Option<u64>,
}

/// `{{ ctx.output_format }}`'s first line; the output's JSON Schema follows on the next.
pub const OUTPUT_FORMAT_HEAD: &str = "Respond with a single JSON value matching this JSON Schema:";

/// Renders a prompt: `{{ path }}` whose root `values` binds becomes the value's text; any
/// other placeholder stays as it was written.
pub fn render(s: &StrLit, values: &Map<String, Value>) -> String {
    let mut out = String::new();
    for part in &s.parts {
        match part {
            StrPart::Lit(t) => out.push_str(t),
            StrPart::Path(path) => match values.get(&path[0]) {
                Some(root) => {
                    let v = path[1..].iter().fold(root.clone(), |v, seg| {
                        v.get(seg).cloned().unwrap_or(Value::Null)
                    });
                    out.push_str(&text(&v));
                }
                None => {
                    out.push_str("{{ ");
                    out.push_str(&path.join("."));
                    out.push_str(" }}");
                }
            },
        }
    }
    cut(out)
}

fn cut(mut s: String) -> String {
    let max = crate::limits::PROMPT_BYTES_MAX;
    if s.len() > max {
        let mut start = s.len() - max;
        while !s.is_char_boundary(start) {
            start += 1;
        }
        s = s.split_off(start);
    }
    s
}

/// The agent a tell target names: a bare declared agent, or the value of an `AgentRef`
/// path (a string naming a declared agent).
fn target_agent(t: &Tell, scope: &Scope<'_>, m: &Model) -> Result<String, String> {
    let shown = crate::ir::expr(&t.target);
    let ExprKind::Path(segs) = &t.target.kind else {
        return Err(format!("tell target `{shown}` is not an agent"));
    };
    if segs.len() == 1 && !scope.env.values.contains_key(&segs[0].name) {
        return Ok(segs[0].name.clone());
    }
    match scope.eval(&t.target) {
        Value::String(a) if m.agents.contains_key(&a) => Ok(a),
        other => Err(format!(
            "tell target `{shown}` is {other}, which names no declared agent"
        )),
    }
}

/// The arguments of a `tell` in rule `rule` with bindings `env`.
pub(crate) fn tell_args(m: &Model, rule: &str, t: &Tell, scope: &Scope<'_>) -> Args {
    let agent = match target_agent(t, scope, m) {
        Ok(a) => a,
        Err(e) => return Args::refused(EffectKind::AgentTell, e),
    };
    let Some(decl) = m.agents.get(&agent) else {
        let error = format!("agent `{agent}` is not declared");
        return Args::refused(EffectKind::AgentTell, error);
    };
    let bindings: Map<String, Value> = scope.env.values.clone().into_iter().collect();
    Args::AgentTell(TellArgs {
        agent,
        provider: decl.provider.clone(),
        profile: decl.profile.clone(),
        capacity: decl.capacity,
        prompt: render(&t.prompt, &bindings),
        prompt_content_type: t.prompt.content_type.clone(),
        rule: rule.to_string(),
        bindings: Value::Object(bindings),
        timeout_ms: t.timeout.map(|d| d.seconds * 1000),
        requires: t.requires.iter().map(|(c, _)| c.clone()).collect(),
    })
}

/// The arguments of a `coerce` call: its parameters bound to the argument values, the
/// prompt rendered over them (and `ctx.output_format`), the output's shape.
pub(crate) fn coerce_args(m: &Model, c: &CoerceCall, scope: &Scope<'_>) -> Args {
    let Some(f) = m.coerces.get(&c.function.name) else {
        let error = format!("coerce `{}` is not declared", c.function.name);
        return Args::refused(EffectKind::SchemaCoerce, error);
    };
    let mut args = Map::new();
    for ((name, _), e) in f.params.iter().zip(&c.args) {
        args.insert(name.clone(), scope.eval(e));
    }
    let output = Shape::of(m, &f.output);
    let format = format!(
        "{OUTPUT_FORMAT_HEAD}\n{}",
        serde_json::to_string(&output.json_schema()).expect("a schema encodes")
    );
    let mut values = args.clone();
    values.insert("ctx".into(), json!({ "output_format": format }));
    Args::SchemaCoerce(CoerceArgs {
        function: c.function.name.clone(),
        provider: f.decl.provider.as_ref().map(|p| p.name.clone()),
        prompt: render(&f.decl.prompt, &values),
        args: Value::Object(args),
        output,
        output_type: f.output.to_string(),
        timeout_ms: c.timeout.map(|d| d.seconds * 1000),
    })
}

/// The profile gate: a turn of an agent whose profile is not registered is blocked
/// (`blocked_by_profile`) until it is.
pub fn profile_block(e: &Effect) -> Option<PolicyBlock> {
    let Args::AgentTell(t) = &e.args else {
        return None;
    };
    if crate::limits::AGENT_PROFILES_REGISTERED.contains(&t.profile.as_str()) {
        return None;
    }
    let detail = format!("profile `{}` is not registered", t.profile);
    Some(PolicyBlock::new(BlockCategory::Profile, detail))
}

/// The capacity gate, decided in the claim's draft `st`: a turn whose agent already has
/// `capacity` running turns in the instance is blocked (`blocked_by_capacity`) and tried
/// again on the next pass. Not a failure.
pub fn capacity_block(e: &Effect, st: &State) -> Option<PolicyBlock> {
    let Args::AgentTell(t) = &e.args else {
        return None;
    };
    let running = st
        .effects
        .values()
        .filter(|x| x.id != e.id && x.state == EffectState::Running)
        .filter(|x| matches!(&x.args, Args::AgentTell(o) if o.agent == t.agent))
        .count();
    if running < t.capacity as usize {
        return None;
    }
    let detail = format!(
        "agent `{}` capacity exhausted ({running}/{} running)",
        t.agent, t.capacity
    );
    Some(PolicyBlock::new(BlockCategory::Capacity, detail))
}

/// `when A is available`: the instance's unsettled turns of `agent` are fewer than its
/// capacity.
pub fn available(st: &State, agent: &str, capacity: u32) -> bool {
    let open = st
        .effects
        .values()
        .filter(|x| !x.state.settled())
        .filter(|x| matches!(&x.args, Args::AgentTell(o) if o.agent == agent))
        .count();
    open < capacity as usize
}

/// The agent a `when … is available` line names in `env`: a bare declared agent, or the
/// string an `AgentRef` path holds.
pub(crate) fn available_agent(m: &Model, path: &[Ident], env: &Env, st: &State) -> Option<String> {
    if path.len() == 1 && !env.values.contains_key(&path[0].name) {
        return m
            .agents
            .contains_key(&path[0].name)
            .then(|| path[0].name.clone());
    }
    let names: Vec<String> = path.iter().map(|p| p.name.clone()).collect();
    let scope = Scope { env, state: st };
    match scope.lookup(&names) {
        Value::String(a) if m.agents.contains_key(&a) => Some(a),
        _ => None,
    }
}

/// The tag of a settled effect in the terminal-output form (`Completed`, `Failed`, …).
pub fn tag(state: EffectState) -> Option<&'static str> {
    Some(match state {
        EffectState::Completed => "Completed",
        EffectState::Failed => "Failed",
        EffectState::TimedOut => "TimedOut",
        EffectState::Cancelled => "Cancelled",
        _ => return None,
    })
}

/// The predicate whose binding a terminal-output arm of `tag` binds.
pub fn tag_predicate(tag: &str) -> &'static str {
    match tag {
        "Completed" => "succeeds",
        "Failed" => "fails",
        "TimedOut" => "times out",
        _ => "cancelled",
    }
}

/// What `after x PREDICATE as y` binds for an agent turn or a coercion: a coercion's value
/// on success; `{tag, status, summary, effect_id, run_id}` for `completes`; otherwise the
/// recorded outcome (`{summary, …}` or the failure binding), with a cancelled effect that
/// never ran given `{summary, effect_id, run_id}`. `None`: not an agent effect.
pub fn bound(effect: &Effect, predicate: &str) -> Option<Value> {
    if !matches!(
        effect.kind(),
        EffectKind::AgentTell | EffectKind::SchemaCoerce
    ) {
        return None;
    }
    let mut output = match effect.output.clone() {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    output.entry("effect_id").or_insert(json!(effect.id));
    output.entry("run_id").or_insert(Value::Null);
    if !output.contains_key("summary") {
        output.insert("summary".into(), json!(unran_summary(effect.state)));
    }
    if predicate == "completes" {
        return Some(json!({
            "tag": tag(effect.state), "status": effect.state, "summary": output["summary"],
            "effect_id": output["effect_id"], "run_id": output["run_id"],
        }));
    }
    if effect.kind() == EffectKind::SchemaCoerce && effect.state == EffectState::Completed {
        return Some(output.get("value").cloned().unwrap_or(Value::Null));
    }
    Some(Value::Object(output))
}

fn unran_summary(state: EffectState) -> &'static str {
    match state {
        EffectState::Cancelled => "cancelled by rule",
        _ => "",
    }
}

/// After effect `id` settled in `draft`: for an agent turn or a coercion, derive its runtime
/// fact (`agent.turn.completed`, `schema.coerce.failed`, …) and log an event of that name.
pub(crate) fn settled(draft: &mut Draft, id: &str) {
    let Some(effect) = draft.state.effects.get(id).cloned() else {
        return;
    };
    let Some(class) = fact_class(effect.kind(), effect.state) else {
        return;
    };
    let mut value = match bound(&effect, "fails") {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    if let Args::AgentTell(t) = &effect.args {
        value.insert("agent".into(), json!(t.agent));
    }
    if let Args::SchemaCoerce(c) = &effect.args {
        value.insert("function".into(), json!(c.function));
    }
    if let Some(b) = &effect.binding {
        value.insert("binding".into(), json!(b));
    }
    let fact = Fact {
        id: draft.next_id(0, "f"),
        class: class.code().to_string(),
        value: Value::Object(value.clone()),
        live: true,
    };
    draft.emit(
        EventKind::FactDerived,
        json!({"fact": fact, "source": "effect"}),
    );
    draft.emit(class, Value::Object(value));
}

/// The runtime fact (and event) a settled agent turn or coercion derives: its class is the
/// event kind's code.
fn fact_class(kind: EffectKind, state: EffectState) -> Option<EventKind> {
    Some(match (kind, state) {
        (EffectKind::AgentTell, EffectState::Completed) => EventKind::AgentTurnCompleted,
        (EffectKind::AgentTell, EffectState::Failed) => EventKind::AgentTurnFailed,
        (EffectKind::AgentTell, EffectState::TimedOut) => EventKind::AgentTurnTimedOut,
        (EffectKind::AgentTell, EffectState::Cancelled) => EventKind::AgentTurnCancelled,
        (EffectKind::SchemaCoerce, EffectState::Completed) => EventKind::CoerceSucceeded,
        (EffectKind::SchemaCoerce, EffectState::Failed) => EventKind::CoerceFailed,
        (EffectKind::SchemaCoerce, EffectState::TimedOut) => EventKind::CoerceTimedOut,
        _ => return None,
    })
}
