//! `case` (LANGUAGE-AGENTS.md §2, §5): on an enum, a literal union, a bool, an optional or an
//! `AgentRef`, and the terminal-output form on an effect inside `after x completes`.
//! Exhaustive unless `_` (or `default`); guarded arms do not count.

use crate::check::cx::{Bind, Cx, Implicit};
use crate::check::types::Ty;
use crate::diag::Span;
use crate::syntax::ast::*;

/// The tags of the terminal-output form, in the order a missing list names them.
pub(crate) const TERMINAL_TAGS: &[&str] = &["Completed", "Failed", "TimedOut", "Cancelled"];

/// What a case's patterns are drawn from.
enum Domain {
    /// Enum variants, string literals or agent names (patterns are names or strings).
    Values(Vec<String>),
    /// `true`, `false`.
    Bool,
    /// `None`, `Some x`.
    Optional,
}

impl Cx<'_> {
    /// Checks a `case` statement.
    pub(crate) fn case(&mut self, c: &Case) {
        let shown = crate::ir::expr(&c.scrutinee);
        let ExprKind::Path(segs) = &c.scrutinee.kind else {
            return self.untyped_scrutinee(&shown, c.scrutinee.span, c);
        };
        if let [one] = segs.as_slice()
            && let Some(Bind::Effect(i)) = self.lookup(&one.name).cloned()
        {
            self.infer(&c.scrutinee, Implicit::None);
            return self.terminal_case(c, i);
        }
        let ty = self.infer(&c.scrutinee, Implicit::None);
        let domain = match &ty {
            Ty::Optional(_) => Some(Domain::Optional),
            Ty::Bool => Some(Domain::Bool),
            Ty::Any => return self.untyped_scrutinee(&shown, c.scrutinee.span, c),
            t => crate::check::ops::domain(self.m, t)
                .filter(|_| !matches!(t, Ty::Lit(_)))
                .map(Domain::Values),
        };
        let Some(domain) = domain else {
            for arm in &c.arms {
                let msg = format!("{} cannot pattern-match this scrutinee type", self.subject);
                let help = format!(
                    "`{shown}` is `{ty}`; case matches an enum, a literal union, a bool, an \
                     optional or an AgentRef"
                );
                self.err("case.scrutinee_type", arm.span, msg, help);
            }
            return self.arms(c, &ty, None);
        };
        self.patterns(c, &domain);
        self.arms(c, &ty, None);
    }

    fn untyped_scrutinee(&mut self, shown: &str, span: Span, c: &Case) {
        let msg = format!(
            "{} has case scrutinee `{shown}` that is not a typed path",
            self.subject
        );
        let help = "match a typed field path, such as `d.verdict`";
        self.err("case.scrutinee", span, msg, help);
        self.arms(c, &Ty::Any, None);
    }

    /// Each pattern in the domain, no unguarded pattern twice, every value covered.
    fn patterns(&mut self, c: &Case, domain: &Domain) {
        let mut covered: Vec<String> = Vec::new();
        let mut wildcard = false;
        for arm in &c.arms {
            let value = match (&arm.pattern, domain) {
                (Pattern::Wildcard, _) => {
                    wildcard |= arm.guard.is_none();
                    continue;
                }
                (Pattern::Str(v) | Pattern::Name(v), Domain::Values(vs)) if vs.contains(v) => {
                    v.clone()
                }
                (Pattern::Bool(b), Domain::Bool) => b.to_string(),
                (Pattern::Name(n), Domain::Optional) if n == "None" => "None".into(),
                (Pattern::Some(_), Domain::Optional) => "Some".into(),
                (p, _) => {
                    let shown = match p {
                        Pattern::Str(s) => s.clone(),
                        p => p.text(),
                    };
                    let msg = format!("{} case pattern cannot be `{shown}`", self.subject);
                    let help = format!("the patterns here are {}", allowed(domain));
                    self.err("case.pattern", arm.span, msg, help);
                    continue;
                }
            };
            if arm.guard.is_some() {
                continue;
            }
            if covered.contains(&value) {
                let msg = format!(
                    "{} has duplicate unguarded case pattern `{}`",
                    self.subject,
                    arm.pattern.text()
                );
                let help = "the first arm always wins: drop this one, or give it a `where` guard";
                self.err("case.duplicate", arm.span, msg, help);
            }
            covered.push(value);
        }
        let all = values(domain);
        let missing = all
            .iter()
            .map(String::as_str)
            .filter(|v| !covered.iter().any(|c| c == v));
        if !wildcard {
            self.non_exhaustive(c, "case", missing.collect());
        }
    }

    /// `R has non-exhaustive [terminal-output] case; missing a, b` when anything is missing.
    fn non_exhaustive(&mut self, c: &Case, what: &str, missing: Vec<&str>) {
        if missing.is_empty() {
            return;
        }
        let msg = format!(
            "{} has non-exhaustive {what}; missing {}",
            self.subject,
            missing.join(", ")
        );
        let help = "add an arm for each missing one, or a `_ => { … }` arm";
        let code = match what {
            "case" => "case.non_exhaustive",
            _ => "case.terminal_exhaustive",
        };
        self.err(code, c.scrutinee.span, msg, help);
    }

    /// `case x { Completed as v … Failed as f … TimedOut as t … Cancelled as c … }` on the
    /// effect `x` (index `i`).
    fn terminal_case(&mut self, c: &Case, i: usize) {
        let mut covered: Vec<&str> = Vec::new();
        let mut wildcard = false;
        for arm in &c.arms {
            let tag = match &arm.pattern {
                Pattern::Wildcard => {
                    wildcard |= arm.guard.is_none();
                    continue;
                }
                Pattern::Name(n) => n.as_str(),
                p => {
                    let msg = format!(
                        "{} terminal-output case pattern cannot be `{}`",
                        self.subject,
                        p.text()
                    );
                    self.err("case.terminal_pattern", arm.span, msg, TERMINAL_HELP);
                    continue;
                }
            };
            let Some(known) = TERMINAL_TAGS.iter().find(|t| **t == tag) else {
                let msg = format!(
                    "{} terminal-output case pattern cannot be `{tag}`",
                    self.subject
                );
                self.err("case.terminal_pattern", arm.span, msg, TERMINAL_HELP);
                continue;
            };
            if arm.binding.is_none() {
                let msg = format!(
                    "{} has malformed terminal-output case pattern `{tag}`",
                    self.subject
                );
                let help = format!("bind the outcome: `{tag} as name => {{ … }}`");
                self.err("case.terminal_binding", arm.span, msg, help);
            }
            if arm.guard.is_none() {
                covered.push(known);
            }
        }
        let missing = TERMINAL_TAGS
            .iter()
            .copied()
            .filter(|t| !covered.contains(t));
        if !wildcard {
            self.non_exhaustive(c, "terminal-output case", missing.collect());
        }
        self.arms(c, &Ty::Any, Some(i));
    }

    /// Each arm's bindings, guard and block.
    fn arms(&mut self, c: &Case, ty: &Ty, effect: Option<usize>) {
        for arm in &c.arms {
            self.scopes.push(Vec::new());
            let bound = match (&arm.pattern, effect) {
                (Pattern::Name(tag), Some(i)) if tag == "Completed" => {
                    self.output_type(i, "succeeds")
                }
                (_, Some(_)) => Ty::Any,
                (Pattern::Some(_), None) => match ty {
                    Ty::Optional(inner) => (**inner).clone(),
                    t => t.clone(),
                },
                _ => ty.clone(),
            };
            if let Pattern::Some(x) = &arm.pattern {
                self.bind(x, Bind::Value(bound.clone()));
            }
            if let Some(b) = &arm.binding {
                self.bind(b, Bind::Value(bound));
            }
            if let Some(g) = &arm.guard {
                self.guard(g, Implicit::None);
            }
            self.block_checked(&arm.body);
            self.scopes.pop();
        }
    }
}

const TERMINAL_HELP: &str =
    "the patterns are `Completed as v`, `Failed as f`, `TimedOut as t` and `Cancelled as c`";

fn values(domain: &Domain) -> Vec<String> {
    match domain {
        Domain::Values(vs) => vs.clone(),
        Domain::Bool => vec!["true".into(), "false".into()],
        Domain::Optional => vec!["None".into(), "Some".into()],
    }
}

fn allowed(domain: &Domain) -> String {
    crate::check::cx::list(&values(domain))
}
