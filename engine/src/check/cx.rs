//! The checking context of one rule (or assertion, or table) and expression typing.

use std::collections::BTreeSet;

use crate::check::model::{Model, Wf};
use crate::check::suggest;
use crate::check::types::{Ty, display_class};
use crate::diag::{Diag, Span};
use crate::syntax::ast::*;

/// What a name in a rule is bound to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bind {
    /// A fact matched by a `when` line.
    Fact(String),
    /// An issue matched by `has ready issue`.
    Issue,
    /// A runtime fact such as `timer.fired`.
    Runtime,
    /// An effect of the rule (index into `Cx::effects`).
    Effect(usize),
    /// A value bound by `after … as y`.
    Value(Ty),
}

/// The kinds of effect a rule body starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EffectKind {
    Timer,
    Invoke,
    Acquire,
    Renew,
    Consume,
    Append,
    FileIssue,
    Claim,
    Finish,
    /// `send via` (inform or directive).
    Send,
    /// `send via … ask`.
    Ask,
    /// `exec [...] as x` (`use std.script`).
    Exec,
    /// `vote in TEAM { … } closes D`.
    Vote,
    /// `tell AGENT … "prompt"` (`agent.tell`).
    Tell,
    /// `coerce NAME(…)` (`schema.coerce`).
    Coerce,
}

impl EffectKind {
    /// True for lease, counter and ledger operations (their outcomes are branches).
    pub(crate) fn is_coordination(self) -> bool {
        matches!(
            self,
            EffectKind::Acquire | EffectKind::Renew | EffectKind::Consume | EffectKind::Append
        )
    }
}

/// One effect statement of a rule.
#[derive(Debug, Clone)]
pub(crate) struct Effect {
    pub(crate) kind: EffectKind,
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) until_ttl: bool,
    /// For invoke: the child workflow.
    pub(crate) target: String,
    /// The effects whose `after` blocks enclose the statement that starts it.
    pub(crate) chain: Vec<usize>,
    /// The names bound where it starts (an `after` on it elsewhere in the rule reads them).
    pub(crate) bound: Vec<(String, Bind)>,
    /// What `after x succeeds as v` binds, when known (a typed `exec … -> T`).
    pub(crate) result: Ty,
}

/// One `after` statement of a rule.
#[derive(Debug, Clone)]
pub(crate) struct AfterUse {
    pub(crate) effect: usize,
    pub(crate) predicate: String,
    pub(crate) span: Span,
    pub(crate) from_then: bool,
    /// The block releases the effect's binding or reaches a terminal.
    pub(crate) releases_or_ends: bool,
}

/// Where bare field names resolve (a `when` guard or a fact query).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Implicit<'a> {
    None,
    /// A `when Class` guard: bare names may be fields of the class.
    Guard(&'a str),
    /// A `Class where …` query: bare names must be fields of the class.
    Query(&'a str),
    /// An effect query: bare names are effect attributes, not checked.
    Effects,
}

/// State while checking one rule body (or one assertion).
pub(crate) struct Cx<'a> {
    pub(crate) m: &'a Model,
    pub(crate) wf: &'a Wf,
    /// `rule `r`` or `assertion`.
    pub(crate) subject: String,
    pub(crate) rule: String,
    pub(crate) diags: &'a mut Vec<Diag>,
    pub(crate) scopes: Vec<Vec<(String, Bind)>>,
    pub(crate) effects: Vec<Effect>,
    pub(crate) afters: Vec<AfterUse>,
    /// Effects whose `after` blocks enclose the statement being checked.
    pub(crate) open_afters: Vec<usize>,
    pub(crate) consumed: BTreeSet<String>,
    pub(crate) invokes: Vec<(String, Span)>,
    pub(crate) quiet: bool,
    /// Effect bindings started anywhere in the rule being checked.
    pub(crate) rule_effects: Vec<String>,
    /// `after` statements on an effect started in another block, checked at the rule's end.
    pub(crate) deferred: Vec<(After, Span)>,
}

impl<'a> Cx<'a> {
    pub(crate) fn new(m: &'a Model, wf: &'a Wf, subject: String, diags: &'a mut Vec<Diag>) -> Self {
        Cx {
            m,
            wf,
            rule: String::new(),
            subject,
            diags,
            scopes: vec![Vec::new()],
            effects: Vec::new(),
            afters: Vec::new(),
            open_afters: Vec::new(),
            consumed: BTreeSet::new(),
            invokes: Vec::new(),
            quiet: false,
            rule_effects: Vec::new(),
            deferred: Vec::new(),
        }
    }

    pub(crate) fn report(&mut self, d: Diag) {
        if !self.quiet {
            self.diags.push(d);
        }
    }

    pub(crate) fn err(
        &mut self,
        code: &'static str,
        span: Span,
        msg: String,
        help: impl Into<String>,
    ) {
        self.report(Diag::error(code, span, msg).help(help));
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<&Bind> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .find(|(n, _)| n == name)
            .map(|(_, b)| b)
    }

    pub(crate) fn bind(&mut self, name: &Ident, b: Bind) {
        if self.lookup(&name.name).is_some() {
            let msg = format!("{} binds `{}` twice", self.subject, name.name);
            self.err(
                "rule.duplicate_binding",
                name.span,
                msg,
                "give each binding its own name",
            );
        }
        self.scopes
            .last_mut()
            .expect("a scope")
            .push((name.name.clone(), b));
    }

    fn binding_names(&self) -> Vec<String> {
        self.scopes
            .iter()
            .flat_map(|s| s.iter().map(|(n, _)| n.clone()))
            .collect()
    }

    pub(crate) fn class(&self, key: &str) -> Option<&'a crate::check::model::Class> {
        self.m.classes.get(key)
    }

    // ---- expressions --------------------------------------------------------------------

    /// The type of `e`, reporting what is wrong inside it.
    pub(crate) fn infer(&mut self, e: &Expr, imp: Implicit<'_>) -> Ty {
        match &e.kind {
            ExprKind::Path(segs) => self.path(segs, e.span, imp),
            ExprKind::Str(s) => {
                self.template(s, e.span, imp);
                match s.parts.as_slice() {
                    [StrPart::Lit(v)] => Ty::Lit(v.clone()),
                    _ => Ty::String,
                }
            }
            ExprKind::Int(_) => Ty::Int,
            ExprKind::Float(_) => Ty::Float,
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Null => Ty::Null,
            ExprKind::Duration(_) => Ty::Duration,
            ExprKind::Array(items) => {
                let tys: Vec<Ty> = items.iter().map(|i| self.infer(i, imp)).collect();
                let first = tys.into_iter().find(|t| *t != Ty::Any).unwrap_or(Ty::Any);
                Ty::Array(Box::new(widen(first)))
            }
            ExprKind::Object(o) => {
                for (_, v) in &o.fields {
                    self.infer(v, imp);
                }
                Ty::Any
            }
            ExprKind::Unary(UnOp::Not, inner) => {
                let t = self.infer(inner, imp);
                self.expect_bool(&t, inner.span, "not");
                Ty::Bool
            }
            ExprKind::Unary(UnOp::Neg, inner) => self.infer(inner, imp),
            ExprKind::Binary(op, l, r) => self.binary(*op, l, r, e.span, imp),
            ExprKind::Call(f, args) => self.call(f, args, e.span, imp),
            ExprKind::Query(class, guard) => self.query(class, guard.as_deref(), e.span),
            ExprKind::Index(base, key) => self.index(base, key, imp),
            ExprKind::EffectQuery(kind, _, guard) => self.effect_query(kind, guard.as_deref()),
        }
    }

    /// `effect kind K [where …]`: a query over the instance's effects. `K` is a short kind
    /// (`acquire`) or a dotted one (`lease.acquire`), see [`crate::ir::EFFECT_KIND_NAMES`].
    fn effect_query(&mut self, kind: &Ident, guard: Option<&Expr>) -> Ty {
        if crate::ir::effect_kind_code(&kind.name).is_none() {
            let msg = format!(
                "{} queries unknown effect kind `{}`",
                self.subject, kind.name
            );
            let names = crate::ir::EFFECT_KIND_NAMES.iter().map(|(n, _)| *n);
            let help = suggest::help(
                &kind.name,
                names,
                "effect kinds are dotted, such as `timer.wait`, `lease.acquire`, \
                `counter.consume`, `ledger.append`, `workflow.invoke`, `tracker.file`, \
                `message.send`, `script.exec` (or short: `timer`, `acquire`, …)",
            );
            self.err("expr.unknown_effect_kind", kind.span, msg, help);
        }
        if let Some(g) = guard {
            self.infer(g, Implicit::Effects);
        }
        Ty::Query("effect".into())
    }

    /// `m["k"]`: the map's value type (a missing key reads as null at run time).
    fn index(&mut self, base: &Expr, key: &Expr, imp: Implicit<'_>) -> Ty {
        let k = self.infer(key, imp);
        if !matches!(k, Ty::String | Ty::Lit(_) | Ty::Any) {
            let msg = format!("{} indexes a map with a non-string `{k}`", self.subject);
            self.err(
                "expr.index_key",
                key.span,
                msg,
                "map keys are strings: `m[\"key\"]`",
            );
        }
        match self.infer(base, imp) {
            Ty::Map(value) => *value,
            Ty::Optional(inner) if matches!(*inner, Ty::Map(_)) => match *inner {
                Ty::Map(value) => Ty::Optional(value),
                _ => Ty::Any,
            },
            Ty::Any | Ty::Class(_) => Ty::Any,
            other => {
                let msg = format!("{} indexes a `{other}`, which is not a map", self.subject);
                self.err(
                    "expr.index_base",
                    base.span,
                    msg,
                    "only `map<T>` values are indexed",
                );
                Ty::Any
            }
        }
    }

    fn expect_bool(&mut self, t: &Ty, span: Span, op: &str) {
        if !matches!(t, Ty::Bool | Ty::Any) && !matches!(t, Ty::Optional(b) if **b == Ty::Bool) {
            let msg = format!(
                "{} applies `{op}` to a non-boolean `{t}` value",
                self.subject
            );
            self.err(
                "expr.not_boolean",
                span,
                msg,
                "combine comparisons or boolean fields",
            );
        }
    }

    fn template(&mut self, s: &StrLit, span: Span, imp: Implicit<'_>) {
        for part in &s.parts {
            if let StrPart::Path(p) = part {
                self.template_path(p, span, imp);
            }
        }
    }

    /// One `{{ a.b }}` of a string, resolved as a path at the string's span.
    pub(crate) fn template_path(&mut self, p: &[String], span: Span, imp: Implicit<'_>) -> Ty {
        let segs: Vec<Ident> = p
            .iter()
            .map(|n| Ident {
                name: n.clone(),
                span,
            })
            .collect();
        self.path(&segs, span, imp)
    }

    /// Resolves a path: a binding, a bare field of the implicit class, a class (a query of
    /// its live facts) or `Enum.Variant`.
    pub(crate) fn path(&mut self, segs: &[Ident], span: Span, imp: Implicit<'_>) -> Ty {
        let head = &segs[0];
        let implicit_class = match imp {
            Implicit::Guard(c) | Implicit::Query(c) => Some(c),
            _ => None,
        };
        let field_ty = implicit_class.and_then(|c| {
            self.class(c)?
                .fields
                .iter()
                .find(|(n, _)| *n == head.name)
                .map(|(_, t)| t.clone())
        });
        let base = if let Some(b) = self.lookup(&head.name).cloned() {
            self.bound(&b, head)
        } else if let Some(t) = field_ty {
            t
        } else if matches!(imp, Implicit::Effects) {
            return Ty::Any;
        } else if segs.len() == 1 && self.m.classes.contains_key(&head.name) {
            return Ty::Query(head.name.clone());
        } else if let Some(variants) = self.m.enums.get(&head.name) {
            return self.variant(&head.name, variants, segs, span);
        } else {
            self.unknown_name(head, imp);
            return Ty::Any;
        };
        self.fields(base, segs, span)
    }

    fn bound(&mut self, b: &Bind, head: &Ident) -> Ty {
        match b {
            Bind::Fact(c) => Ty::Class(c.clone()),
            Bind::Issue | Bind::Runtime => Ty::Any,
            Bind::Value(t) => t.clone(),
            Bind::Effect(i) => {
                if !self.open_afters.contains(i) {
                    let msg = format!(
                        "{} uses effect output `{}` outside a matching `after {} ...` block",
                        self.subject, head.name, head.name
                    );
                    let help = format!(
                        "read it inside `after {} succeeds {{ … }}` (an effect's value exists \
                         only once it settles)",
                        head.name
                    );
                    self.err("rule.effect_output_outside_after", head.span, msg, help);
                }
                Ty::Any
            }
        }
    }

    fn variant(&mut self, e: &str, variants: &[String], segs: &[Ident], span: Span) -> Ty {
        if segs.len() != 2 {
            let msg = format!("{} uses enum `{e}` as a value", self.subject);
            let help = format!(
                "name a variant, such as `{e}.{}`",
                variants.first().map_or("A", |v| v)
            );
            self.err("expr.enum_value", span, msg, help);
        } else if !variants.contains(&segs[1].name) {
            let msg = format!("enum `{e}` has no variant `{}`", segs[1].name);
            let help = suggest::help(
                &segs[1].name,
                variants.iter().map(String::as_str),
                format!("variants of `{e}` are {}", list(variants)),
            );
            self.err("type.unknown_variant", segs[1].span, msg, help);
        }
        Ty::Enum(e.to_string())
    }

    fn unknown_name(&mut self, head: &Ident, imp: Implicit<'_>) {
        if self.m.poisoned.contains(&head.name) {
            return;
        }
        if let Implicit::Query(c) = imp {
            let fields: Vec<&str> = self.class(c).map_or(vec![], |k| {
                k.fields.iter().map(|(n, _)| n.as_str()).collect()
            });
            let msg = format!(
                "{} fact query `{}` has unknown field `{}`",
                self.subject,
                display_class(c),
                head.name
            );
            let help = suggest::help(
                &head.name,
                fields,
                format!(
                    "`{}` has fields {}",
                    display_class(c),
                    list_str(self.class(c).map_or(&[][..], |k| &k.fields[..]))
                ),
            );
            return self.err("query.unknown_field", head.span, msg, help);
        }
        let names = self.binding_names();
        let msg = format!("{} uses unknown name `{}`", self.subject, head.name);
        let help = suggest::help(
            &head.name,
            names.iter().map(String::as_str),
            "bind it with `when Class as name` or `after effect succeeds as name`",
        );
        self.err("expr.unknown_name", head.span, msg, help);
    }

    /// Follows `segs[1..]` through class fields, optionals and maps.
    fn fields(&mut self, base: Ty, segs: &[Ident], span: Span) -> Ty {
        let mut ty = base;
        let mut optional = false;
        for seg in &segs[1..] {
            while let Ty::Optional(inner) = ty {
                optional = true;
                ty = *inner;
            }
            ty = match &ty {
                Ty::Any => return Ty::Any,
                Ty::Map(v) => (**v).clone(),
                Ty::Class(c) => {
                    let Some(class) = self.class(c) else {
                        return Ty::Any;
                    };
                    match class.fields.iter().find(|(n, _)| *n == seg.name) {
                        Some((_, t)) => t.clone(),
                        None => {
                            let names = class.fields.iter().map(|(n, _)| n.as_str());
                            let help = suggest::help(
                                &seg.name,
                                names,
                                format!(
                                    "`{}` has fields {}",
                                    display_class(c),
                                    list_str(&class.fields)
                                ),
                            );
                            self.bad_path(segs, span, display_class(c), &seg.name, help);
                            return Ty::Any;
                        }
                    }
                }
                other => {
                    let help = format!("a `{other}` value has no fields");
                    self.bad_path(segs, span, &other.to_string(), &seg.name, help);
                    return Ty::Any;
                }
            };
        }
        if optional && !ty.is_optional() {
            Ty::Optional(Box::new(ty))
        } else {
            ty
        }
    }

    fn bad_path(&mut self, segs: &[Ident], span: Span, schema: &str, field: &str, help: String) {
        let path: Vec<&str> = segs.iter().map(|s| s.name.as_str()).collect();
        let msg = format!(
            "{} has invalid field path `{}`: schema `{schema}` has no field `{field}`",
            self.subject,
            path.join(".")
        );
        self.err("expr.invalid_field_path", span, msg, help);
    }
}

/// `a`, `b` and `c` for help lines.
pub(crate) fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.len() {
        0 => "none".into(),
        1 => quoted[0].clone(),
        n => format!("{} and {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    }
}

fn list_str(fields: &[(String, Ty)]) -> String {
    let names: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
    list(&names)
}

/// The type of an array literal element: string literals widen to `string`.
fn widen(t: Ty) -> Ty {
    match t {
        Ty::Lit(_) => Ty::String,
        t => t,
    }
}
