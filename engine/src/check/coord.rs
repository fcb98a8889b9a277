//! `after` blocks, coordination statements and the discipline of §4: outcomes handled,
//! no lease held forever, one lease per progression, failures observed.

use crate::check::cx::{AfterUse, Bind, Cx, EffectKind, Implicit};
use crate::check::ops::literal_of;
use crate::check::suggest;
use crate::check::types::Ty;
use crate::check::values::ObjCtx;
use crate::diag::{Diag, Span};
use crate::syntax::ast::*;

const PREDICATES: &[&str] = &[
    "succeeds",
    "fails",
    "completes",
    "times out",
    "cancelled",
    "held",
    "contended",
    "ok",
    "over",
    "replied",
    "passed",
    "failed",
    "no_quorum",
];

const PREDICATES_HELP: &str = "predicates are `succeeds`, `fails`, `completes`, `times out`, \
    `cancelled`, for coordination `held`, `contended`, `ok`, `over`, and for a vote `passed`, \
    `failed`, `no_quorum`";

/// The methods a `vote` counts by.
const VOTE_METHODS: &[&str] = &["plurality", "approval", "borda", "irv", "schulze"];

impl Cx<'_> {
    pub(crate) fn after(&mut self, a: &After, span: Span) {
        let target = match self.lookup(&a.target.name) {
            Some(Bind::Effect(i)) => Some(*i),
            None if self.rule_effects.contains(&a.target.name) => {
                // Started in another `after` block of this rule: checked at the rule's end,
                // once every effect of the rule is declared.
                return self.deferred.push((a.clone(), span));
            }
            _ => None,
        };
        let pred = a.predicate.name.as_str();
        match target {
            None => {
                let names: Vec<String> = self.effects.iter().map(|e| e.name.clone()).collect();
                let msg = format!(
                    "{} has `after` block for unknown effect binding `{}`",
                    self.subject, a.target.name
                );
                let help = suggest::help(
                    &a.target.name,
                    names.iter().map(String::as_str),
                    "bind the effect first, such as `timer 5s as t`, then `after t completes`",
                );
                self.err("after.unknown_binding", a.target.span, msg, help);
            }
            Some(_) if !PREDICATES.contains(&pred) => {
                let msg = format!(
                    "{} has unsupported `after` predicate `{pred}`",
                    self.subject
                );
                let help = suggest::help(pred, PREDICATES.iter().copied(), PREDICATES_HELP);
                self.err("after.unknown_predicate", a.predicate.span, msg, help);
            }
            Some(i) if !predicate_fits(self.effects[i].kind, pred) => {
                let msg = format!(
                    "{} has unsupported `after` dependency predicate",
                    self.subject
                );
                let help = format!(
                    "`{pred}` does not apply to a `{}` effect; {}",
                    kind_word(self.effects[i].kind),
                    fitting(self.effects[i].kind)
                );
                self.err("after.predicate_mismatch", a.predicate.span, msg, help);
            }
            Some(_) => {}
        }
        self.scopes.push(Vec::new());
        if let Some(b) = &a.binding {
            let ty = target.map_or(Ty::Any, |i| self.output_type(i, pred));
            if b.name == a.target.name {
                // `after x succeeds as x` (what `then` makes) shadows the effect binding.
                self.scopes
                    .last_mut()
                    .expect("a scope")
                    .push((b.name.clone(), Bind::Value(ty)));
            } else {
                self.bind(b, Bind::Value(ty));
            }
        }
        if let Some(i) = target {
            self.open_afters.push(i);
        }
        self.block_public(&a.body);
        if let Some(i) = target {
            self.open_afters.pop();
            let releases_or_ends = releases_or_ends(&a.body.stmts, &a.target.name);
            self.afters.push(AfterUse {
                effect: i,
                predicate: pred.to_string(),
                span,
                from_then: a.from_then,
                releases_or_ends,
            });
        }
        self.scopes.pop();
    }

    pub(crate) fn output_type(&self, i: usize, pred: &str) -> Ty {
        let e = &self.effects[i];
        if matches!(e.kind, EffectKind::Exec | EffectKind::Coerce) && pred == "succeeds" {
            return e.result.clone();
        }
        if e.kind != EffectKind::Invoke {
            return Ty::Any;
        }
        let Some(child) = self.m.workflow(&e.target) else {
            return Ty::Any;
        };
        let list = if pred == "fails" {
            &child.failures
        } else {
            &child.outputs
        };
        match list.as_slice() {
            [one] => one.ty.clone(),
            _ => Ty::Any,
        }
    }

    /// `vote in TEAM { … } closes D as v`: a bound team, a title, options, known methods.
    pub(crate) fn vote(&mut self, v: &Vote, span: Span) {
        self.requires_as("vote", &v.binding, span);
        self.infer(&v.team, Implicit::None);
        let mut seen = (false, false);
        for (k, value) in &v.body.fields {
            match k.name.as_str() {
                "title" => seen.0 = true,
                "options" => seen.1 = true,
                "method" => self.vote_method(value),
                "quorum" | "threshold" | "electorate" => {}
                other => {
                    let msg = format!("{} gives a vote unknown field `{other}`", self.subject);
                    let help = "a vote has `title` and `options`, and optionally `method`, \
                                `quorum`, `threshold` and `electorate`";
                    self.err("vote.field", k.span, msg, help);
                    continue;
                }
            }
            self.infer(value, Implicit::None);
        }
        if !(seen.0 && seen.1) {
            let msg = format!(
                "{} opens a vote without a `title` and `options`",
                self.subject
            );
            let help = "write `{ title \"…\" options [\"a\", \"b\"] }`";
            self.err("vote.incomplete", v.body.span, msg, help);
        }
    }

    fn vote_method(&mut self, value: &Expr) {
        if let Some(method) = literal_of(value)
            && !VOTE_METHODS.contains(&method.as_str())
        {
            let msg = format!(
                "{} counts a vote by unknown method `{method}`",
                self.subject
            );
            let help = suggest::help(
                &method,
                VOTE_METHODS.iter().copied(),
                "the methods are plurality, approval, borda, irv and schulze",
            );
            self.err("vote.method", value.span, msg, help);
        }
    }

    pub(crate) fn acquire(&mut self, a: &Acquire, span: Span) {
        self.requires_as("acquire", &a.binding, span);
        if !self.wf.leases.contains_key(&a.lease.name) && !self.m.poisoned.contains(&a.lease.name) {
            let msg = format!(
                "{} acquires undeclared lease `{}`",
                self.subject, a.lease.name
            );
            let names = self.wf.leases.keys().map(String::as_str);
            let help = suggest::help(
                &a.lease.name,
                names,
                format!(
                    "declare it: `lease {} {{ key Class ttl 10m }}`",
                    a.lease.name
                ),
            );
            self.err("lease.undeclared", a.lease.span, msg, help);
        }
        self.infer(&a.key, Implicit::None);
        let acquires = self
            .effects
            .iter()
            .filter(|e| e.kind == EffectKind::Acquire);
        if acquires.take_while(|e| e.span != span).count() >= 1 {
            let msg = format!(
                "{} acquires more than one lease in a single progression",
                self.subject
            );
            let help = "hold one lease at a time: record a fact and acquire the next lease in \
                        another rule";
            self.err("lease.nested_acquire", span, msg, help);
        }
    }

    pub(crate) fn release(&mut self, x: &Ident) {
        let ok = matches!(self.lookup(&x.name), Some(Bind::Effect(i))
            if matches!(self.effects[*i].kind, EffectKind::Acquire | EffectKind::Claim));
        if !ok {
            let msg = format!(
                "{} releases unbound coordination item `{}`",
                self.subject, x.name
            );
            let help = "`release` frees a lease bound by `acquire … as name` or a claim bound by \
                        `claim … as name`";
            self.err("lease.release_unbound", x.span, msg, help);
        }
    }

    pub(crate) fn consume(&mut self, c: &Consume, span: Span) {
        self.requires_as("consume", &c.binding, span);
        if !self.wf.counters.contains_key(&c.counter.name)
            && !self.m.poisoned.contains(&c.counter.name)
        {
            let msg = format!(
                "{} consumes undeclared counter `{}`",
                self.subject, c.counter.name
            );
            let names = self.wf.counters.keys().map(String::as_str);
            let help = suggest::help(
                &c.counter.name,
                names,
                format!(
                    "declare it: `counter {} {{ key Class cap 100 reset daily }}`",
                    c.counter.name
                ),
            );
            self.err("counter.undeclared", c.counter.span, msg, help);
        }
        self.infer(&c.key, Implicit::None);
        let t = self.infer(&c.amount, Implicit::None);
        if !matches!(t, Ty::Int | Ty::Any) {
            let msg = format!("{} consumes a non-integer amount", self.subject);
            let help = format!("the amount is `{t}`; counters count whole units");
            self.err("counter.amount", c.amount.span, msg, help);
        }
    }

    pub(crate) fn append(&mut self, c: &Ident, obj: &ObjectLit, l: &Ident) {
        let ledger = self.wf.ledgers.get(&l.name).map(|r| r.decl.clone());
        if ledger.is_none() && !self.m.poisoned.contains(&l.name) {
            let msg = format!("{} appends to undeclared ledger `{}`", self.subject, l.name);
            let names = self.wf.ledgers.keys().map(String::as_str);
            let help = suggest::help(
                &l.name,
                names,
                format!(
                    "declare it: `ledger {} {{ entry Class partition by field retain 90d }}`",
                    l.name
                ),
            );
            self.err("ledger.undeclared", l.span, msg, help);
        }
        if !self.m.classes.contains_key(&c.name) {
            if !self.m.poisoned.contains(&c.name) {
                let msg = format!("{} appends unknown entry class `{}`", self.subject, c.name);
                let names: Vec<&str> = self.m.class_names().collect();
                let help = suggest::help(
                    &c.name,
                    names,
                    "append an instance of the ledger's entry class",
                );
                self.err("ledger.unknown_entry", c.span, msg, help);
            }
            return;
        }
        if let Some(entry) = ledger.and_then(|d| d.entry).filter(|e| e.name != c.name) {
            let msg = format!(
                "{} appends `{}` to ledger `{}`, which records `{}`",
                self.subject, c.name, l.name, entry.name
            );
            let help = format!("append a `{}` entry", entry.name);
            self.err("ledger.entry_mismatch", c.span, msg, help);
        }
        self.object(obj, &c.name, ObjCtx::Entry);
    }

    pub(crate) fn file_issue(&mut self, t: &Ident, obj: &ObjectLit) {
        self.tracker(t);
        let mut has_title = false;
        for (k, v) in &obj.fields {
            let slot = match k.name.as_str() {
                "title" => {
                    has_title = true;
                    Ty::String
                }
                "body" => Ty::String,
                "labels" => Ty::Array(Box::new(Ty::String)),
                _ => {
                    let msg = format!("file issue has unknown field `{}`", k.name);
                    let help = suggest::help(
                        &k.name,
                        ["title", "body", "labels"],
                        "an issue has `title`, `body` and `labels`",
                    );
                    self.err("tracker.issue_field", k.span, msg, help);
                    continue;
                }
            };
            self.value(v, &slot, &format!("issue.{}", k.name));
        }
        if !has_title {
            let msg = "file issue is missing required field `title`".to_string();
            self.err("tracker.issue_title", obj.span, msg, "add `title \"…\"`");
        }
    }

    pub(crate) fn finish(&mut self, x: &Ident, obj: Option<&ObjectLit>) {
        let ok = matches!(self.lookup(&x.name), Some(Bind::Issue))
            || matches!(self.lookup(&x.name), Some(Bind::Effect(i))
                if self.effects[*i].kind == EffectKind::Claim);
        if !ok {
            let msg = format!("{} finishes unbound claim `{}`", self.subject, x.name);
            let help = "finish a claim bound by `claim issue as name` or an issue bound by \
                        `when tracker has ready issue as name`";
            self.err("tracker.finish_unbound", x.span, msg, help);
        }
        for (k, v) in obj.map_or(&[][..], |o| &o.fields[..]) {
            if k.name != "summary" {
                let msg = format!("finish has unknown field `{}`", k.name);
                self.err(
                    "tracker.finish_field",
                    k.span,
                    msg,
                    "`finish` takes `{ summary \"…\" }`",
                );
                continue;
            }
            self.value(v, &Ty::String, "finish.summary");
        }
    }
}

// Rule-level analyses, run once the body was walked.
impl Cx<'_> {
    pub(crate) fn coordination(&mut self) {
        for i in 0..self.effects.len() {
            let e = self.effects[i].clone();
            let afters: Vec<AfterUse> = self
                .afters
                .iter()
                .filter(|a| a.effect == i)
                .cloned()
                .collect();
            let has = |p: &str| afters.iter().any(|a| a.predicate == p);
            match e.kind {
                EffectKind::Vote if !e.name.is_empty() => {
                    for outcome in ["passed", "failed", "no_quorum"] {
                        if !has(outcome) {
                            self.unhandled(&e.name, outcome, "vote", e.span);
                        }
                    }
                }
                EffectKind::Acquire => {
                    for a in afters.iter().filter(|a| a.predicate == "succeeds") {
                        let msg = format!(
                            "{} observes acquire `{}` with `succeeds`, which also \
                            matches a Contended outcome (the acquire op completes either way)",
                            self.subject, e.name
                        );
                        let help = format!(
                            "observe `after {0} held {{ … }}` and `after {0} \
                                            contended {{ … }}`",
                            e.name
                        );
                        self.err("lease.succeeds", a.span, msg, help);
                    }
                    if e.until_ttl || e.name.is_empty() {
                        continue;
                    }
                    for outcome in ["held", "contended"] {
                        if !has(outcome) {
                            self.unhandled(&e.name, outcome, "lease", e.span);
                        }
                    }
                    for a in afters
                        .iter()
                        .filter(|a| a.predicate == "held" && !a.releases_or_ends)
                    {
                        let msg = format!(
                            "{} can hold lease `{}` forever: the `held` branch \
                            neither releases it nor reaches a workflow terminal",
                            self.subject, e.name
                        );
                        let help = format!(
                            "add `release {}` (or `complete`/`fail`) inside the \
                                            `held` branch, or acquire `until ttl`",
                            e.name
                        );
                        self.err("lease.held_forever", a.span, msg, help);
                    }
                }
                EffectKind::Consume => self.consume_outcomes(&e, &afters),
                EffectKind::Ask => {
                    for outcome in ["replied", "times out"] {
                        if !has(outcome) && !e.name.is_empty() {
                            self.unhandled(&e.name, outcome, "ask", e.span);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn consume_outcomes(&mut self, e: &crate::check::cx::Effect, afters: &[AfterUse]) {
        for a in afters.iter().filter(|a| a.predicate == "succeeds") {
            let msg = format!(
                "{} observes counter consume `{}` with `succeeds`, which \
                also matches an Over outcome (the consume op completes either way)",
                self.subject, e.name
            );
            let help = format!(
                "observe `after {0} ok {{ … }}` and `after {0} over {{ … }}`",
                e.name
            );
            self.err("counter.succeeds", a.span, msg, help);
        }
        if e.name.is_empty() {
            return;
        }
        for outcome in ["ok", "over"] {
            if !afters.iter().any(|a| a.predicate == outcome) {
                self.unhandled(&e.name, outcome, "counter consume", e.span);
            }
        }
    }

    fn unhandled(&mut self, name: &str, outcome: &str, what: &str, span: Span) {
        let msg = format!(
            "{} does not handle the `{outcome}` outcome of {what} `{name}`",
            self.subject
        );
        let help = format!("add `after {name} {outcome} {{ … }}`");
        let code = match what {
            "lease" => "lease.unhandled_outcome",
            "vote" => "vote.unhandled_outcome",
            _ => "counter.unhandled_outcome",
        };
        self.err(code, span, msg, help);
    }

    /// An effectful rule must consume each fact trigger, or it fires again and again.
    pub(crate) fn preserved_triggers(&mut self, rule: &Rule) {
        if self.effects.is_empty() {
            return;
        }
        for w in &rule.whens {
            let WhenKind::Fact(c) = &w.kind else { continue };
            let consumed = w
                .binding
                .as_ref()
                .is_some_and(|b| self.consumed.contains(&b.name));
            // Only a new fact of the trigger's class fires the rule again, effects and all.
            if !consumed && records_class(&rule.body.stmts, &c.name) {
                let msg = format!(
                    "effectful rule `{}` preserves trigger fact `schema:{}`",
                    self.rule, c.name
                );
                let help = match &w.binding {
                    Some(b) => format!(
                        "a rule with effects must consume or change its trigger: \
                                        add `done {}`",
                        b.name
                    ),
                    None => "a rule with effects must consume or change its trigger: bind it \
                             with `as x` and add `done x`"
                        .to_string(),
                };
                self.err("rule.preserves_trigger", w.span, msg, help);
            }
        }
    }

    pub(crate) fn unhandled_failures(&mut self) {
        for i in 0..self.effects.len() {
            let e = &self.effects[i];
            let observable = matches!(
                e.kind,
                EffectKind::Invoke
                    | EffectKind::FileIssue
                    | EffectKind::Claim
                    | EffectKind::Finish
                    | EffectKind::Send
                    | EffectKind::Ask
                    | EffectKind::Exec
                    | EffectKind::Tell
                    | EffectKind::Coerce
            );
            if !observable || e.name.is_empty() || e.kind.is_coordination() {
                continue;
            }
            let afters: Vec<&AfterUse> = self.afters.iter().filter(|a| a.effect == i).collect();
            if afters.iter().any(|a| a.from_then) {
                continue;
            }
            if afters
                .iter()
                .any(|a| matches!(a.predicate.as_str(), "fails" | "completes"))
            {
                continue;
            }
            let msg = format!(
                "effect `{}`'s failure is unhandled in rule `{}`; if it fails or \
                times out, the instance will auto-fail with a generic reason",
                e.name, self.rule
            );
            let help = format!(
                "add `after {} fails {{ … }}` to decide what a failure means",
                e.name
            );
            let span = e.span;
            self.report(Diag::warning("effect.unhandled_failure", span, msg).help(help));
        }
    }

    fn block_public(&mut self, b: &Block) {
        self.block_checked(b);
    }
}

/// True when `stmts` (or a nested `after`) releases `name` or reaches a terminal.
/// Whether the statements (or an `after` block among them) record a fact of `class`.
fn records_class(stmts: &[Stmt], class: &str) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Record(c, _)
        | StmtKind::Done(_, Some((c, _)))
        | StmtKind::RecordFrom(RecordFrom { class: c, .. }) => c.name == class,
        k => k
            .child_blocks()
            .into_iter()
            .any(|b| records_class(&b.stmts, class)),
    })
}

fn releases_or_ends(stmts: &[Stmt], name: &str) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Release(x) => x.name == name,
        StmtKind::Complete(..) | StmtKind::Fail(..) => true,
        k => k
            .child_blocks()
            .into_iter()
            .any(|b| releases_or_ends(&b.stmts, name)),
    })
}

fn predicate_fits(kind: EffectKind, pred: &str) -> bool {
    match pred {
        "held" | "contended" => kind == EffectKind::Acquire,
        "ok" | "over" => kind == EffectKind::Consume,
        "replied" => kind == EffectKind::Ask,
        "passed" | "failed" | "no_quorum" => kind == EffectKind::Vote,
        "succeeds" | "completes" => !matches!(kind, EffectKind::Ask | EffectKind::Vote),
        _ => true,
    }
}

fn kind_word(kind: EffectKind) -> &'static str {
    match kind {
        EffectKind::Timer => "timer",
        EffectKind::Invoke => "invoke",
        EffectKind::Acquire => "acquire",
        EffectKind::Renew => "renew",
        EffectKind::Consume => "consume",
        EffectKind::Append => "append",
        EffectKind::FileIssue => "file issue",
        EffectKind::Claim => "claim",
        EffectKind::Finish => "finish",
        EffectKind::Send => "send",
        EffectKind::Ask => "send … ask",
        EffectKind::Exec => "exec",
        EffectKind::Vote => "vote",
        EffectKind::Tell => "tell",
        EffectKind::Coerce => "coerce",
    }
}

fn fitting(kind: EffectKind) -> &'static str {
    match kind {
        EffectKind::Acquire => "observe `held` and `contended`",
        EffectKind::Consume => "observe `ok` and `over`",
        EffectKind::Ask => "observe `replied` and `times out` (or `fails`)",
        EffectKind::Vote => "observe `passed`, `failed` and `no_quorum` (or `fails`)",
        _ => "observe `succeeds`, `fails`, `completes`, `times out` or `cancelled`",
    }
}
