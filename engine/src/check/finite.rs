//! Statically unsatisfiable finite-domain constraints in a `where` expression (a rule's
//! guard or a fact query's): `a == "x" and a == "y"`, `a in [..] and a not in [..]`, or
//! exclusions that rule out every variant of an enum or a literal union.

use std::collections::BTreeMap;

use crate::check::cx::{Cx, Implicit};
use crate::check::ops::{domain, literal_of};
use crate::check::types::Ty;
use crate::syntax::ast::*;

/// One conjunct's constraint on a finite-domain path.
enum Constraint {
    /// `p == v` or `p in [v, …]`: the value is one of these.
    OneOf(Vec<String>),
    /// `p != v` or `p not in [v, …]`: the value is none of these.
    NoneOf(Vec<String>),
}

/// Everything the conjuncts say about one path.
struct Known {
    /// Each positive constraint's allowed values.
    one_of: Vec<Vec<String>>,
    /// Every excluded value.
    none_of: Vec<String>,
    /// The path's type.
    ty: Ty,
}

/// How a path's constraints can never hold, if they cannot.
enum Unsatisfiable {
    /// The positive constraints leave no value.
    Equality,
    /// The exclusions rule out the whole domain.
    Exclusion,
}

impl Cx<'_> {
    /// Reports the conjuncts of `g` that no value of a finite-domain path can satisfy.
    pub(crate) fn satisfiable(&mut self, g: &Expr, imp: Implicit<'_>) {
        let mut conjuncts = Vec::new();
        flatten_and(g, &mut conjuncts);
        let mut known: BTreeMap<String, Known> = BTreeMap::new();
        for c in conjuncts {
            let Some((path, constraint)) = self.constraint(c, imp) else {
                continue;
            };
            self.quiet = true;
            let ty = self.path(path, c.span, imp);
            self.quiet = false;
            let key: Vec<&str> = path.iter().map(|s| s.name.as_str()).collect();
            let entry = known.entry(key.join(".")).or_insert_with(|| Known {
                one_of: Vec::new(),
                none_of: Vec::new(),
                ty,
            });
            match constraint {
                Constraint::OneOf(vs) => entry.one_of.push(vs),
                Constraint::NoneOf(vs) => entry.none_of.extend(vs),
            }
        }
        let verdicts: Vec<Unsatisfiable> = known.values().filter_map(|k| self.judge(k)).collect();
        for verdict in verdicts {
            self.unsatisfiable(verdict, g);
        }
    }

    fn judge(&self, k: &Known) -> Option<Unsatisfiable> {
        let d = domain(self.m, &k.ty)?;
        if let Some((first, rest)) = k.one_of.split_first() {
            let mut left: Vec<&String> = first.iter().collect();
            for set in rest {
                left.retain(|v| set.contains(v));
            }
            left.retain(|v| !k.none_of.contains(v));
            return left.is_empty().then_some(Unsatisfiable::Equality);
        }
        (!d.is_empty() && d.iter().all(|v| k.none_of.contains(v)))
            .then_some(Unsatisfiable::Exclusion)
    }

    fn unsatisfiable(&mut self, verdict: Unsatisfiable, g: &Expr) {
        let (word, code, help) = match verdict {
            Unsatisfiable::Equality => (
                "equality",
                "expr.unsatisfiable_equality",
                "a value cannot equal two different variants at once",
            ),
            Unsatisfiable::Exclusion => (
                "exclusion",
                "expr.unsatisfiable_exclusion",
                "the exclusions rule out every variant; drop one of them",
            ),
        };
        let msg = format!(
            "{} has statically unsatisfiable finite-domain {word}",
            self.subject
        );
        self.err(code, g.span, msg, help);
    }

    /// The path a conjunct constrains and how, when it compares a path with literals.
    fn constraint<'e>(&self, c: &'e Expr, imp: Implicit<'_>) -> Option<(&'e [Ident], Constraint)> {
        let ExprKind::Binary(op, l, r) = &c.kind else {
            return None;
        };
        match op {
            BinOp::Eq | BinOp::Ne => {
                let (path, v) = match (self.subject_path(l, imp), self.subject_path(r, imp)) {
                    (Some(p), _) => (p, self.named_variant(r, imp)?),
                    (None, Some(p)) => (p, self.named_variant(l, imp)?),
                    (None, None) => return None,
                };
                let vs = vec![v];
                let c = match op {
                    BinOp::Eq => Constraint::OneOf(vs),
                    _ => Constraint::NoneOf(vs),
                };
                Some((path, c))
            }
            BinOp::In | BinOp::NotIn => {
                let path = self.subject_path(l, imp)?;
                let ExprKind::Array(items) = &r.kind else {
                    return None;
                };
                let vs: Option<Vec<String>> =
                    items.iter().map(|i| self.named_variant(i, imp)).collect();
                let vs = vs?;
                let c = match op {
                    BinOp::In => Constraint::OneOf(vs),
                    _ => Constraint::NoneOf(vs),
                };
                Some((path, c))
            }
            _ => None,
        }
    }

    /// A path that names a value (a binding's field or an implicit field), not a variant.
    fn subject_path<'e>(&self, e: &'e Expr, imp: Implicit<'_>) -> Option<&'e [Ident]> {
        let ExprKind::Path(p) = &e.kind else {
            return None;
        };
        let enum_variant = p.len() == 2 && self.m.enums.contains_key(&p[0].name);
        (!enum_variant && !self.bare_unbound(e, imp)).then_some(p.as_slice())
    }

    /// The variant a literal expression names: `"open"`, a bare `Low` or `Level.Low`.
    fn named_variant(&self, e: &Expr, imp: Implicit<'_>) -> Option<String> {
        if let Some(v) = literal_of(e) {
            return Some(v);
        }
        let ExprKind::Path(p) = &e.kind else {
            return None;
        };
        match p.as_slice() {
            [bare] if self.bare_unbound(e, imp) => Some(bare.name.clone()),
            [en, v] if self.m.enums.contains_key(&en.name) => Some(v.name.clone()),
            _ => None,
        }
    }
}

fn flatten_and<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::Binary(BinOp::And, l, r) => {
            flatten_and(l, out);
            flatten_and(r, out);
        }
        _ => out.push(e),
    }
}
