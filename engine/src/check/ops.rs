//! Operators, calls, queries and finite-domain checks.

use crate::check::cx::{Cx, Implicit};
use crate::check::suggest;
use crate::check::types::{Ty, display_class};
use crate::diag::Span;
use crate::syntax::ast::*;

/// The values a finite-domain type allows (enum variants or string literals).
pub(crate) fn domain(m: &crate::check::model::Model, t: &Ty) -> Option<Vec<String>> {
    match t {
        Ty::Enum(e) => m.enums.get(e).cloned(),
        Ty::Lit(s) => Some(vec![s.clone()]),
        Ty::AgentRef(agents) => Some(agents.clone()),
        Ty::Optional(inner) => domain(m, inner),
        Ty::Union(ms) => {
            let mut out = Vec::new();
            for member in ms {
                match member {
                    Ty::Null => {}
                    other => out.extend(domain(m, other)?),
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// The literal a value expression denotes for a finite-domain comparison: a string literal,
/// or a bare name (an enum variant written without its enum).
pub(crate) fn literal_of(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Str(s) => match s.parts.as_slice() {
            [StrPart::Lit(v)] => Some(v.clone()),
            _ => None,
        },
        _ => None,
    }
}

impl Cx<'_> {
    pub(crate) fn binary(
        &mut self,
        op: BinOp,
        l: &Expr,
        r: &Expr,
        span: Span,
        imp: Implicit<'_>,
    ) -> Ty {
        match op {
            BinOp::And | BinOp::Or => {
                let lt = self.infer(l, imp);
                let rt = self.infer(r, imp);
                let word = op.text();
                self.expect_bool_operand(&lt, l.span, word);
                self.expect_bool_operand(&rt, r.span, word);
                Ty::Bool
            }
            BinOp::Eq | BinOp::Ne => {
                let (l_bare, r_bare) = (self.bare_unbound(l, imp), self.bare_unbound(r, imp));
                let lt = (!l_bare).then(|| self.infer(l, imp));
                let rt = (!r_bare).then(|| self.infer(r, imp));
                match (lt, rt) {
                    (Some(lt), Some(rt)) => {
                        self.compare(&lt, &rt, literal_of(l), literal_of(r), span)
                    }
                    (Some(t), None) if matches!(t, Ty::Enum(_)) => {
                        self.compare(&t, &t, None, bare_name(r), span)
                    }
                    (None, Some(t)) if matches!(t, Ty::Enum(_)) => {
                        self.compare(&t, &t, bare_name(l), None, span)
                    }
                    _ => {
                        for side in [l, r] {
                            if self.bare_unbound(side, imp) {
                                self.infer(side, imp);
                            }
                        }
                    }
                }
                Ty::Bool
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let lt = self.infer(l, imp);
                let rt = self.infer(r, imp);
                if !lt.is_orderable() || !rt.is_orderable() {
                    let msg = format!("{} orders non-orderable expression values", self.subject);
                    let help = format!(
                        "`{}` orders numbers, strings, times and durations; here \
                                        the values are `{lt}` and `{rt}`",
                        op.text()
                    );
                    self.err("expr.not_orderable", span, msg, help);
                } else if !lt.comparable(&rt) {
                    self.incompatible(&lt, &rt, span);
                }
                Ty::Bool
            }
            BinOp::In | BinOp::NotIn => {
                self.in_list(l, r, span, imp);
                Ty::Bool
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
                let lt = self.infer(l, imp);
                let rt = self.infer(r, imp);
                arithmetic(op, &lt, &rt).unwrap_or_else(|| {
                    let msg = format!(
                        "{} applies `{}` to `{lt}` and `{rt}`",
                        self.subject,
                        op.text()
                    );
                    let help =
                        "arithmetic works on numbers (and `+` on strings, times and durations)";
                    self.err("expr.arithmetic", span, msg, help);
                    Ty::Any
                })
            }
        }
    }

    /// `l in r`: a string literal on the left is an ordinary string, not a one-value finite
    /// domain (`"x" in ["a", "b"]` is a membership test, false at run time).
    fn in_list(&mut self, l: &Expr, r: &Expr, span: Span, imp: Implicit<'_>) {
        let lt = match (self.infer(l, imp), &l.kind) {
            (Ty::Lit(_), ExprKind::Str(_)) => Ty::String,
            (lt, _) => lt,
        };
        self.membership(&lt, r, span, imp);
    }

    /// A single unbound name that is no class, enum or implicit field.
    pub(crate) fn bare_unbound(&self, e: &Expr, imp: Implicit<'_>) -> bool {
        let ExprKind::Path(segs) = &e.kind else {
            return false;
        };
        let name = &segs[0].name;
        let implicit_field = match imp {
            Implicit::Guard(c) | Implicit::Query(c) => self
                .m
                .classes
                .get(c)
                .is_some_and(|k| k.fields.iter().any(|(n, _)| n == name)),
            Implicit::Effects => true,
            Implicit::None => false,
        };
        segs.len() == 1
            && self.lookup(name).is_none()
            && !self.m.classes.contains_key(name)
            && !self.m.enums.contains_key(name)
            && !implicit_field
    }

    fn expect_bool_operand(&mut self, t: &Ty, span: Span, word: &str) {
        let ok = matches!(t, Ty::Bool | Ty::Any) || matches!(t, Ty::Optional(b) if **b == Ty::Bool);
        if !ok {
            let msg = format!(
                "{} combines a non-boolean `{t}` value with `{word}`",
                self.subject
            );
            self.err(
                "expr.not_boolean",
                span,
                msg,
                "compare the value, such as `x.n > 0`",
            );
        }
    }

    fn incompatible(&mut self, lt: &Ty, rt: &Ty, span: Span) {
        let msg = format!("{} compares incompatible expression types", self.subject);
        let help = format!("the left side is `{lt}` and the right side is `{rt}`");
        self.err("expr.incompatible", span, msg, help);
    }

    fn compare(
        &mut self,
        lt: &Ty,
        rt: &Ty,
        llit: Option<String>,
        rlit: Option<String>,
        span: Span,
    ) {
        for (t, lit) in [(lt, &rlit), (rt, &llit)] {
            if let (Some(d), Some(v)) = (domain(self.m, t), lit)
                && !matches!(t, Ty::Lit(_))
                && !d.contains(v)
            {
                let msg = format!(
                    "{} compares finite-domain value to unknown `{v}`",
                    self.subject
                );
                let help = suggest::help(
                    v,
                    d.iter().map(String::as_str),
                    format!("`{t}` allows {}", crate::check::cx::list(&d)),
                );
                return self.err("expr.unknown_domain_value", span, msg, help);
            }
        }
        if !lt.comparable(rt) {
            self.incompatible(lt, rt, span);
        }
    }

    fn membership(&mut self, lt: &Ty, r: &Expr, span: Span, imp: Implicit<'_>) {
        if let (Some(d), ExprKind::Array(items)) = (domain(self.m, lt), &r.kind) {
            for item in items {
                let lit = if let ExprKind::Path(s) = &item.kind
                    && s.len() == 1
                    && self.lookup(&s[0].name).is_none()
                    && matches!(lt, Ty::Enum(_))
                {
                    Some(s[0].name.clone())
                } else {
                    self.infer(item, imp);
                    literal_of(item)
                };
                if let Some(v) = lit.filter(|v| !d.contains(v)) {
                    let msg = format!(
                        "{} compares finite-domain value to unknown `{v}`",
                        self.subject
                    );
                    let help = suggest::help(
                        &v,
                        d.iter().map(String::as_str),
                        format!("`{lt}` allows {}", crate::check::cx::list(&d)),
                    );
                    self.err("expr.unknown_domain_value", item.span, msg, help);
                }
            }
            return;
        }
        let rt = self.infer(r, imp);
        let ok = match &rt {
            Ty::Any => true,
            Ty::Array(el) => lt.comparable(el),
            Ty::Map(_) | Ty::String => lt.comparable(&Ty::String),
            Ty::Optional(inner) => {
                matches!(**inner, Ty::Array(_) | Ty::Map(_) | Ty::String | Ty::Any)
            }
            _ => false,
        };
        if !ok {
            self.incompatible(lt, &rt, span);
        }
    }

    pub(crate) fn call(&mut self, f: &Ident, args: &[Expr], span: Span, imp: Implicit<'_>) -> Ty {
        const FUNCTIONS: &[&str] = &["count", "exists", "empty"];
        if !FUNCTIONS.contains(&f.name.as_str()) {
            let msg = format!("{} calls unknown function `{}`", self.subject, f.name);
            let help = suggest::help(
                &f.name,
                FUNCTIONS.iter().copied(),
                "the functions are `count(x)`, `exists(x)` and `empty(x)`",
            );
            self.err("expr.unknown_function", f.span, msg, help);
            for a in args {
                self.infer(a, imp);
            }
            return Ty::Any;
        }
        if args.len() != 1 {
            let msg = format!(
                "{} calls `{}` with {} arguments, expected 1",
                self.subject,
                f.name,
                args.len()
            );
            let help = format!(
                "write `{}(x)` with one array, map, string, optional or query",
                f.name
            );
            self.err("expr.arity", span, msg, help);
            for a in args {
                self.infer(a, imp);
            }
        } else if let Some(class) = self.unknown_class_arg(&args[0], imp) {
            self.query(class, None, args[0].span);
        } else {
            let t = self.infer(&args[0], imp);
            self.collection_arg(&f.name, &t, args[0].span);
        }
        if f.name == "count" { Ty::Int } else { Ty::Bool }
    }

    /// `count(Jobz)`: a bare capitalised name that is nothing in scope is read as a query of
    /// the facts of a class, the way `count(Job)` is, so it is reported as an unknown fact
    /// schema rather than an unknown name.
    fn unknown_class_arg<'e>(&self, arg: &'e Expr, imp: Implicit<'_>) -> Option<&'e Ident> {
        let ExprKind::Path(segs) = &arg.kind else {
            return None;
        };
        let head = &segs[0];
        let capitalised = head.name.starts_with(|c: char| c.is_ascii_uppercase());
        (segs.len() == 1 && capitalised && self.bare_unbound(arg, imp)).then_some(head)
    }

    fn collection_arg(&mut self, f: &str, t: &Ty, span: Span) {
        // `count` counts the items of a collection; a string is text, not a collection (its
        // emptiness is `empty(s)`), so only `exists` and `empty` take strings.
        let strings = f != "count";
        let supported = |t: &Ty| {
            matches!(t, Ty::Any | Ty::Array(_) | Ty::Map(_) | Ty::Query(_))
                || (strings && matches!(t, Ty::String | Ty::Lit(_)))
        };
        match t {
            Ty::Optional(inner) if !supported(inner) => {
                let msg = format!(
                    "{} calls `{f}` with unsupported optional argument type `{t}`",
                    self.subject
                );
                let help =
                    "pass an array, a map, a string, an optional of one of those, or a query";
                self.err("expr.argument_type", span, msg, help);
            }
            Ty::Optional(_) => {}
            t if !supported(t) => {
                let msg = format!(
                    "{} calls `{f}` with unsupported argument type `{t}`",
                    self.subject
                );
                let help = if strings {
                    "pass an array, a map, a string, an optional, or a query such as \
                    `Class where field == value`"
                } else {
                    "`count` counts the items of an array, a map or a query such as \
                    `Class where field == value`; test a string with `empty(s)`"
                };
                self.err("expr.argument_type", span, msg, help);
            }
            _ => {}
        }
    }

    pub(crate) fn query(&mut self, class: &Ident, guard: Option<&Expr>, span: Span) -> Ty {
        let _ = span;
        if !self.m.classes.contains_key(&class.name) {
            if !self.m.poisoned.contains(&class.name) {
                let msg = format!(
                    "{} queries unknown fact schema `{}`",
                    self.subject, class.name
                );
                let names: Vec<&str> = self.m.class_names().collect();
                let help = suggest::help(&class.name, names, "query a declared class");
                self.err("query.unknown_schema", class.span, msg, help);
            }
            return Ty::Any;
        }
        if let Some(g) = guard {
            let t = self.infer(g, Implicit::Query(&class.name));
            let ok =
                matches!(t, Ty::Bool | Ty::Any) || matches!(&t, Ty::Optional(b) if **b == Ty::Bool);
            if !ok {
                let msg = format!(
                    "{} fact query `{}` has non-boolean `where` expression",
                    self.subject,
                    display_class(&class.name)
                );
                let help = format!(
                    "the `where` expression is `{t}`; compare a field, such as \
                                    `status == \"open\"`"
                );
                self.err("query.non_boolean", g.span, msg, help);
            } else {
                self.satisfiable(g, Implicit::Query(&class.name));
            }
        }
        Ty::Query(class.name.clone())
    }
}

fn arithmetic(op: BinOp, l: &Ty, r: &Ty) -> Option<Ty> {
    Some(match (l, r) {
        (Ty::Any, _) | (_, Ty::Any) => Ty::Any,
        (Ty::Int, Ty::Int) => Ty::Int,
        (Ty::Int | Ty::Float, Ty::Int | Ty::Float) => Ty::Float,
        (Ty::Duration, Ty::Duration) if matches!(op, BinOp::Add | BinOp::Sub) => Ty::Duration,
        (Ty::Duration, Ty::Int) | (Ty::Int, Ty::Duration) if matches!(op, BinOp::Mul) => {
            Ty::Duration
        }
        (Ty::Time, Ty::Duration) if matches!(op, BinOp::Add | BinOp::Sub) => Ty::Time,
        (Ty::Time, Ty::Time) if op == BinOp::Sub => Ty::Duration,
        (Ty::String | Ty::Lit(_), Ty::String | Ty::Lit(_)) if op == BinOp::Add => Ty::String,
        _ => return None,
    })
}

fn bare_name(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Path(segs) => Some(segs[0].name.clone()),
        _ => None,
    }
}
