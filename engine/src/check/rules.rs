//! Rules: `when` lines, body statements, and the coordination discipline.

use crate::check::cx::{Bind, Cx, Effect, EffectKind, Implicit};
use crate::check::suggest;
use crate::check::types::Ty;
use crate::check::values::ObjCtx;
use crate::diag::Span;
use crate::syntax::ast::*;

/// Runtime facts a rule may match with `when fact …`.
pub(crate) const RUNTIME_FACTS: &[&str] = &[
    "timer.fired",
    "effect.completed",
    "effect.failed",
    "effect.timed_out",
    "effect.cancelled",
    "workflow.completed",
    "workflow.failed",
    "issue.filed",
    "issue.closed",
    "agent.turn.completed",
    "agent.turn.failed",
    "agent.turn.timed_out",
    "agent.turn.cancelled",
    "schema.coerce.succeeded",
    "schema.coerce.failed",
    "schema.coerce.timed_out",
    "capability.call.succeeded",
];

/// Prefixes of in-turn observations: evidence, never matchable.
const EVIDENCE_PREFIXES: &[&str] = &["turn", "evidence", "observation", "tool", "agent"];

impl Cx<'_> {
    /// Checks a whole rule (already desugared).
    pub(crate) fn rule(&mut self, rule: &Rule, service: bool, muted: bool) {
        self.rule = rule.name.name.clone();
        for w in &rule.whens {
            self.when(w);
        }
        for w in &rule.whens {
            if let Some(g) = &w.guard {
                let imp = match &w.kind {
                    WhenKind::Fact(c) => Implicit::Guard(&c.name),
                    _ => Implicit::None,
                };
                self.guard(g, imp);
            }
        }
        self.rule_effects = rule.body.effect_names();
        self.scopes.push(Vec::new());
        self.block_statements(&rule.body);
        self.deferred_afters();
        self.scopes.pop();
        if muted {
            return;
        }
        self.coordination();
        self.preserved_triggers(rule);
        if !service {
            self.unhandled_failures();
        }
    }

    fn when(&mut self, w: &When) {
        let bind = match &w.kind {
            WhenKind::Started => None,
            WhenKind::Fact(c) => {
                if !self.m.classes.contains_key(&c.name) && !self.m.poisoned.contains(&c.name) {
                    self.report(crate::check::model::unknown_schema(self.m, &c.name, c.span));
                }
                Some(Bind::Fact(c.name.clone()))
            }
            WhenKind::ReadyIssue(t) => {
                self.tracker(t);
                Some(Bind::Issue)
            }
            WhenKind::Runtime(path) => {
                self.runtime_fact(path, w.span);
                Some(Bind::Runtime)
            }
            WhenKind::Message(c) => {
                self.channel("when message from", c);
                self.inbound(c);
                Some(Bind::Runtime)
            }
            WhenKind::CompletedTurn(_) => {
                self.agent_when(&w.kind);
                Some(Bind::Runtime)
            }
            WhenKind::Available(_) => {
                self.agent_when(&w.kind);
                None
            }
        };
        if let (Some(b), Some(name)) = (bind, &w.binding) {
            self.bind(name, b);
        }
    }

    fn runtime_fact(&mut self, path: &[Ident], span: Span) {
        let name: Vec<&str> = path.iter().map(|p| p.name.as_str()).collect();
        let name = name.join(".");
        if RUNTIME_FACTS.contains(&name.as_str()) {
            return;
        }
        if EVIDENCE_PREFIXES.contains(&path[0].name.as_str()) {
            let msg = format!(
                "{} matches evidence-only fact `{name}`: in-turn observations are evidence, not \
                 rule-matchable facts",
                self.subject
            );
            let help = "record a fact from an `after` block instead, and match that class";
            self.err("rule.evidence_fact", span, msg, help);
        } else if !RUNTIME_FACTS.contains(&name.as_str()) {
            let msg = format!("{} matches unknown runtime fact `{name}`", self.subject);
            let help = suggest::help(
                &name,
                RUNTIME_FACTS.iter().copied(),
                format!(
                    "runtime facts are {}",
                    crate::check::cx::list(
                        &RUNTIME_FACTS
                            .iter()
                            .map(|s| s.to_string())
                            .collect::<Vec<_>>()
                    )
                ),
            );
            self.err("rule.unknown_runtime_fact", span, msg, help);
        }
    }

    /// Channel `c`, named after `word` (`send via`, `when message from`), must be declared
    /// (LANGUAGE-AGENTS.md §5: "`send via C` names an unknown channel").
    pub(crate) fn channel(&mut self, word: &str, c: &Ident) {
        if !self.wf.channels.contains_key(&c.name) && !self.m.poisoned.contains(&c.name) {
            let msg = format!("`{word} {}` names an unknown channel", c.name);
            let names = self.wf.channels.keys().map(String::as_str);
            let help = format!("declare it: `channel {} {{ provider fabric }}`", c.name);
            let help = suggest::help(&c.name, names, help);
            self.err("channel.undeclared", c.span, msg, help);
        }
    }

    /// `when message from C`: C's provider must deliver inbound messages.
    fn inbound(&mut self, c: &Ident) {
        let Some(ch) = self.wf.channels.get(&c.name) else {
            return;
        };
        let provider = crate::messaging::MessagingProvider::from_code(ch.decl.provider_name());
        if provider.is_some_and(|p| !p.receives()) {
            let msg = format!(
                "`when message from {}` observes a channel whose provider `{}` is outbound-only \
                 (its capability report cannot deliver inbound messages)",
                c.name,
                ch.decl.provider_name()
            );
            let help = "observe a channel of provider `local`, `stdio`, `fixture` or `fabric`";
            self.err("channel.outbound_only", c.span, msg, help);
        }
    }

    pub(crate) fn tracker(&mut self, t: &Ident) {
        if !self.wf.trackers.contains_key(&t.name) && !self.m.poisoned.contains(&t.name) {
            let msg = format!("{} uses undeclared tracker `{}`", self.subject, t.name);
            let names = self.wf.trackers.keys().map(String::as_str);
            let help = suggest::help(&t.name, names, format!("declare it: `tracker {}`", t.name));
            self.err("tracker.undeclared", t.span, msg, help);
        }
    }

    /// A `where` guard: boolean, and no statically unsatisfiable finite-domain constraint.
    pub(crate) fn guard(&mut self, g: &Expr, imp: Implicit<'_>) {
        let t = self.infer(g, imp);
        let ok =
            matches!(t, Ty::Bool | Ty::Any) || matches!(&t, Ty::Optional(b) if **b == Ty::Bool);
        if !ok {
            let msg = format!("{} has non-boolean `where` guard", self.subject);
            let help = format!("the guard is `{t}`; compare a value, such as `x.n > 0`");
            self.err("rule.non_boolean_guard", g.span, msg, help);
            return;
        }
        self.satisfiable(g, imp);
    }

    pub(crate) fn block_checked(&mut self, b: &Block) {
        self.scopes.push(Vec::new());
        self.block_statements(b);
        self.scopes.pop();
    }

    /// Checks `after x …` statements deferred because `x` is started in another block of
    /// the rule. Each is checked as if it sat where `x` starts: it reads the names bound
    /// there and the values of the `after` blocks on `x`'s chain, and nothing else.
    fn deferred_afters(&mut self) {
        while let Some((a, span)) = self.deferred.pop() {
            let Some(i) = self.effects.iter().rposition(|e| e.name == a.target.name) else {
                continue;
            };
            let mut bound = self.effects[i].bound.clone();
            bound.push((a.target.name.clone(), Bind::Effect(i)));
            let open = std::mem::replace(&mut self.open_afters, self.effects[i].chain.clone());
            let scopes = std::mem::replace(&mut self.scopes, vec![bound]);
            self.after(&a, span);
            self.scopes = scopes;
            self.open_afters = open;
        }
    }

    fn block_statements(&mut self, b: &Block) {
        let mut indices = Vec::with_capacity(b.stmts.len());
        for s in &b.stmts {
            indices.push(self.declare_effect(s));
        }
        for (s, idx) in b.stmts.iter().zip(indices) {
            self.stmt(s, idx);
        }
    }

    fn declare_effect(&mut self, s: &Stmt) -> Option<usize> {
        let (kind, binding, until_ttl, target) = match &s.kind {
            StmtKind::Timer(_, b) | StmtKind::TimerUntil(_, b) => {
                (EffectKind::Timer, b, false, String::new())
            }
            StmtKind::Invoke(w, _, b) => (EffectKind::Invoke, b, false, w.name.clone()),
            StmtKind::Acquire(a) => (
                EffectKind::Acquire,
                &a.binding,
                a.until_ttl,
                a.lease.name.clone(),
            ),
            StmtKind::Renew(_, _, b) => (EffectKind::Renew, b, false, String::new()),
            StmtKind::Consume(c) => (
                EffectKind::Consume,
                &c.binding,
                false,
                c.counter.name.clone(),
            ),
            StmtKind::Append(_, _, l, b) => (EffectKind::Append, b, false, l.name.clone()),
            StmtKind::FileIssue(t, _, b) => (EffectKind::FileIssue, b, false, t.name.clone()),
            StmtKind::Claim(_, _, b) => (EffectKind::Claim, b, false, String::new()),
            StmtKind::Finish(_, _, b) => (EffectKind::Finish, b, false, String::new()),
            StmtKind::Send(x) => (send_kind(x), &x.binding, false, x.channel.name.clone()),
            StmtKind::Exec(x) => (EffectKind::Exec, &x.binding, false, String::new()),
            StmtKind::Vote(v) => (EffectKind::Vote, &v.binding, false, String::new()),
            StmtKind::Tell(t) => (EffectKind::Tell, &t.binding, false, String::new()),
            StmtKind::Coerce(c) => (
                EffectKind::Coerce,
                &c.binding,
                false,
                c.function.name.clone(),
            ),
            _ => return None,
        };
        let name = binding.as_ref().map_or(String::new(), |b| b.name.clone());
        let idx = self.effects.len();
        let bound = self.scopes.iter().flatten().cloned().collect();
        self.effects.push(Effect {
            kind,
            name,
            span: s.span,
            until_ttl,
            target,
            chain: self.open_afters.clone(),
            bound,
            result: self.result_type(s),
        });
        if let Some(b) = binding {
            self.bind(b, Bind::Effect(idx));
        }
        Some(idx)
    }

    /// The type a typed `exec … -> T` binds on success (its name errors are reported once,
    /// by the `exec` check).
    fn result_type(&self, s: &Stmt) -> Ty {
        match &s.kind {
            StmtKind::Exec(Exec {
                result: Some(t), ..
            }) => crate::check::model::resolve_type(self.m, t, &mut Vec::new()),
            StmtKind::Coerce(c) => self
                .m
                .coerces
                .get(&c.function.name)
                .map_or(Ty::Any, |f| f.output.clone()),
            _ => Ty::Any,
        }
    }

    pub(crate) fn requires_as(&mut self, word: &str, binding: &Option<Ident>, span: Span) {
        if binding.is_none() {
            let msg = format!("`{word}` requires an `as` binding");
            let help = "end the statement with `as name` and observe it with `after name …`";
            self.err("rule.missing_binding", span, msg, help);
        }
    }
}

// Statement checks live in their own impl block to keep each function short.
impl Cx<'_> {
    fn stmt(&mut self, s: &Stmt, _effect: Option<usize>) {
        match &s.kind {
            StmtKind::Record(c, obj) => self.record(c, obj),
            StmtKind::RecordFrom(r) => self.record_from(r),
            StmtKind::Cancel(x) => self.cancel(x),
            StmtKind::Done(x, rec) => self.done(x, rec.as_ref()),
            StmtKind::Complete(n, payload) => self.terminal(n, payload, true),
            StmtKind::Fail(n, payload) => self.terminal(n, payload, false),
            StmtKind::Timer(_, b) => self.requires_as("timer", b, s.span),
            StmtKind::TimerUntil(at, b) => {
                self.requires_as("timer", b, s.span);
                self.timer_until(at);
            }
            StmtKind::Invoke(w, obj, b) => {
                self.requires_as("invoke", b, s.span);
                self.invoke(w, obj, s.span);
            }
            StmtKind::After(a) => self.after(a, s.span),
            StmtKind::Then(..) => {}
            StmtKind::Acquire(a) => self.acquire(a, s.span),
            StmtKind::Release(x) => self.release(x),
            StmtKind::Renew(x, _, b) => {
                self.requires_as("renew", b, s.span);
                if !matches!(self.effect_of(x), Some(EffectKind::Acquire)) {
                    let msg = format!(
                        "{} renews unbound coordination binding `{}`",
                        self.subject, x.name
                    );
                    let help = "`renew` extends a lease bound by `acquire … as name`";
                    self.err("lease.renew_unbound", x.span, msg, help);
                }
            }
            StmtKind::Consume(c) => self.consume(c, s.span),
            StmtKind::Append(c, obj, l, _) => self.append(c, obj, l),
            StmtKind::FileIssue(t, obj, _) => self.file_issue(t, obj),
            StmtKind::Claim(x, _, b) => {
                self.requires_as("claim", b, s.span);
                let ok = matches!(self.lookup(&x.name), Some(Bind::Issue))
                    || matches!(self.effect_of(x), Some(EffectKind::FileIssue));
                if !ok {
                    let msg = format!("{} claims unbound issue `{}`", self.subject, x.name);
                    let help = "claim an issue bound by `when tracker has ready issue as name` or \
                                by `file issue … as name`";
                    self.err("tracker.claim_unbound", x.span, msg, help);
                }
            }
            StmtKind::Finish(x, obj, _) => self.finish(x, obj.as_ref()),
            StmtKind::Send(x) => self.send(x, s.span),
            StmtKind::Exec(x) => self.exec(x, s.span),
            StmtKind::Vote(v) => self.vote(v, s.span),
            StmtKind::Tell(t) => self.tell(t, s.span),
            StmtKind::Coerce(c) => self.coerce_call(c, s.span),
            StmtKind::Case(c) => self.case(c),
        }
    }

    fn done(&mut self, x: &Ident, rec: Option<&(Ident, ObjectLit)>) {
        match self.lookup(&x.name) {
            Some(Bind::Fact(_)) => {
                self.consumed.insert(x.name.clone());
            }
            _ => {
                let msg = format!(
                    "{} consumes unknown fact binding `{}`",
                    self.subject, x.name
                );
                let facts: Vec<String> = self
                    .scopes
                    .iter()
                    .flatten()
                    .filter(|(_, b)| matches!(b, Bind::Fact(_)))
                    .map(|(n, _)| n.clone())
                    .collect();
                let help = suggest::help(
                    &x.name,
                    facts.iter().map(String::as_str),
                    "`done` consumes a fact bound by `when Class as name`",
                );
                self.err("rule.unknown_fact_binding", x.span, msg, help);
            }
        }
        if let Some((c, obj)) = rec {
            self.record(c, obj);
        }
    }

    /// `send via CHANNEL [ask|directive] { text … payload … thread … } [within D] as x`.
    fn send(&mut self, x: &Send, span: Span) {
        self.channel("send via", &x.channel);
        if let Some(ch) = self.wf.channels.get(&x.channel.name)
            && ch.decl.to.is_none()
            && ch.decl.provider_name() == "fabric"
        {
            let msg = format!(
                "{} sends via channel `{}`, which only receives",
                self.subject, x.channel.name
            );
            let help = "give the channel a recipient: `to agent \"name\"`";
            self.err("channel.receive_only", x.channel.span, msg, help);
        }
        match (x.kind, x.within) {
            (SendKind::Ask, None) => {
                let msg = format!(
                    "{} asks via `{}` without `within`",
                    self.subject, x.channel.name
                );
                let help = "an ask waits a bounded time: add `within 10m` before `as`";
                self.err("send.ask_within", span, msg, help);
            }
            (SendKind::Inform | SendKind::Directive, Some(d)) => {
                let msg = format!(
                    "{} gives `within` to a send that is not an ask",
                    self.subject
                );
                let help = "only `send via … ask { … } within D` waits for a reply";
                self.err("send.within", d.span, msg, help);
            }
            _ => {}
        }
        // Every send is observed (LANGUAGE-AGENTS.md §5: "`send` requires an `as` binding").
        self.requires_as("send", &x.binding, span);
        let mut text = false;
        for (k, v) in &x.body.fields {
            match k.name.as_str() {
                "text" | "thread" => {
                    text |= k.name == "text";
                    self.infer(v, Implicit::None);
                }
                "payload" => {
                    self.infer(v, Implicit::None);
                }
                other => {
                    let msg = format!("{} sends unknown message field `{other}`", self.subject);
                    let help = "a message has `text`, and optionally `payload` and `thread`";
                    self.err("send.field", k.span, msg, help);
                }
            }
        }
        if !text {
            let msg = "`send` requires a `text` field".to_string();
            self.err("send.text", x.body.span, msg, "write `{ text \"…\" }`");
        }
    }

    fn effect_of(&self, x: &Ident) -> Option<EffectKind> {
        match self.lookup(&x.name) {
            Some(Bind::Effect(i)) => Some(self.effects[*i].kind),
            _ => None,
        }
    }

    fn record(&mut self, c: &Ident, obj: &ObjectLit) {
        if self.m.classes.contains_key(&c.name) && !c.name.contains("::") {
            self.object(obj, &c.name, ObjCtx::Record);
        } else if !self.m.poisoned.contains(&c.name) {
            let msg = format!("{} records unknown class `{}`", self.subject, c.name);
            let names: Vec<&str> = self.m.class_names().collect();
            let help = suggest::help(&c.name, names, "declare the class with `class Name { … }`");
            self.err("rule.record_unknown_class", c.span, msg, help);
        }
    }

    fn terminal(&mut self, n: &Ident, payload: &Expr, complete: bool) {
        let list = if complete {
            &self.wf.outputs
        } else {
            &self.wf.failures
        };
        let Some(t) = list.iter().find(|t| t.name == n.name).cloned() else {
            let names: Vec<String> = list.iter().map(|t| t.name.clone()).collect();
            let (verb, kw) = if complete {
                ("completes", "output")
            } else {
                ("fails", "failure")
            };
            let msg = format!(
                "{} {verb} unknown workflow terminal `{}`",
                self.subject, n.name
            );
            let help = suggest::help(
                &n.name,
                names.iter().map(String::as_str),
                format!("declare it: `{kw} {} Type`", n.name),
            );
            self.err("rule.unknown_terminal", n.span, msg, help);
            self.infer(payload, Implicit::None);
            return;
        };
        match (&payload.kind, &t.ty) {
            (ExprKind::Object(o), Ty::Class(c)) => self.object(o, c, ObjCtx::Terminal(&n.name)),
            _ => self.value(payload, &t.ty, &n.name),
        }
    }

    fn invoke(&mut self, w: &Ident, obj: &ObjectLit, span: Span) {
        self.invokes.push((w.name.clone(), span));
        let Some(child) = self.m.workflow(&w.name) else {
            let msg = format!("{} invokes unknown workflow `{}`", self.subject, w.name);
            let names = self.m.workflows.iter().map(|w| w.name.name.as_str());
            let help = suggest::help(&w.name, names, "declare the child workflow in this program");
            return self.err("invoke.unknown_workflow", w.span, msg, help);
        };
        if child.has_tag("private") && child.name.name != self.wf.name.name {
            let msg = format!("{} invokes private workflow `{}`", self.subject, w.name);
            let help = "a `@private` workflow may not be invoked by its siblings";
            self.err("invoke.private", w.span, msg, help);
        }
        let mut given = Vec::new();
        for (name, value) in &obj.fields {
            given.push(name.name.clone());
            match child.inputs.iter().find(|i| i.name == name.name) {
                Some(input) => self.value(value, &input.ty, &format!("{}.{}", w.name, name.name)),
                None => {
                    let msg = format!("workflow `{}` has no input `{}`", w.name, name.name);
                    let names = child.inputs.iter().map(|i| i.name.as_str());
                    let help = suggest::help(
                        &name.name,
                        names,
                        "pass only declared inputs: `invoke Child { field value … }`",
                    );
                    self.err("invoke.unknown_input", name.span, msg, help);
                }
            }
        }
        for input in &child.inputs {
            if !given.contains(&input.name) && !input.ty.is_optional() {
                let msg = format!(
                    "invocation of `{}` is missing required input `{}`",
                    w.name, input.name
                );
                let help = format!("add `{} <{}>` to the invocation", input.name, input.ty);
                self.err("invoke.missing_input", obj.span, msg, help);
            }
        }
    }
}

fn send_kind(x: &Send) -> EffectKind {
    match x.kind {
        SendKind::Ask => EffectKind::Ask,
        SendKind::Inform | SendKind::Directive => EffectKind::Send,
    }
}
