//! Checks of `record Class from x` and `cancel x`.

use crate::check::cx::{Bind, Cx, Implicit, list};
use crate::check::suggest;
use crate::check::types::{Ty, display_class};
use crate::syntax::ast::*;

impl Cx<'_> {
    /// `record C from x [{ … }]`: `x` is an object whose fields (with the overrides) give
    /// every required field of `C`. A class-typed `x` is checked field by field; an untyped
    /// one (an effect's output) is checked when the rule runs.
    pub(crate) fn record_from(&mut self, r: &RecordFrom) {
        let c = &r.class;
        let declared = self.m.classes.contains_key(&c.name) && !c.name.contains("::");
        if !declared {
            if !self.m.poisoned.contains(&c.name) {
                let msg = format!("{} records unknown class `{}`", self.subject, c.name);
                let names: Vec<&str> = self.m.class_names().collect();
                let help =
                    suggest::help(&c.name, names, "declare the class with `class Name { … }`");
                self.err("rule.record_unknown_class", c.span, msg, help);
            }
            self.infer(&r.source, Implicit::None);
            return;
        }
        let given = self.overrides(&c.name, r.overrides.as_ref());
        match self.infer(&r.source, Implicit::None) {
            Ty::Any => {}
            Ty::Class(k) => self.fields_from(&c.name, &k, &given, r.source.span),
            other => {
                let msg = format!(
                    "{} records `{}` from a `{other}` value, which is not an object",
                    self.subject, c.name
                );
                let help = "`record Class from x` copies the fields of an object, such as a \
                            fact binding or a class-typed output";
                self.err("rule.record_from_type", r.source.span, msg, help);
            }
        }
    }

    /// Checks the overrides against class `c`; returns the fields they give.
    fn overrides(&mut self, c: &str, o: Option<&ObjectLit>) -> Vec<String> {
        let Some(o) = o else { return Vec::new() };
        let Some(class) = self.class(c) else {
            return Vec::new();
        };
        let mut given = Vec::new();
        for (name, value) in &o.fields {
            given.push(name.name.clone());
            match class.fields.iter().find(|(n, _)| *n == name.name) {
                Some((_, ty)) => self.value(value, ty, &format!("{c}.{}", name.name)),
                None => {
                    let msg = format!("class `{c}` has no field `{}`", name.name);
                    let fields: Vec<String> = class.fields.iter().map(|(n, _)| n.clone()).collect();
                    let help = suggest::help(
                        &name.name,
                        fields.iter().map(String::as_str),
                        format!("`{c}` has fields {}", list(&fields)),
                    );
                    self.err("value.unknown_field", name.span, msg, help);
                }
            }
        }
        given
    }

    /// Every field of `c` not in `given` must come from class `k`, with a fitting type.
    fn fields_from(&mut self, c: &str, k: &str, given: &[String], span: crate::diag::Span) {
        let (Some(target), Some(source)) = (self.class(c), self.class(k)) else {
            return;
        };
        let shown = display_class(k);
        for (field, ty) in &target.fields {
            if given.contains(field) {
                continue;
            }
            match source.fields.iter().find(|(n, _)| n == field) {
                Some((_, from)) if !from.assignable_to(ty) => {
                    let msg = format!("field `{c}.{field}` expects `{ty}`");
                    let help =
                        format!("`{shown}.{field}` is `{from}`; give `{field}` after `from`");
                    self.err("value.type", span, msg, help);
                }
                Some(_) => {}
                None if ty.is_optional() => {}
                None => {
                    let msg = format!("record of `{c}` is missing required field `{c}.{field}`");
                    let help = format!(
                        "`{shown}` has no field `{field}`; add `{{ {field} <{ty}> }}` after \
                         `from …`"
                    );
                    self.err("value.missing_field", span, msg, help);
                }
            }
        }
    }

    /// `cancel x`: `x` must name an effect of the rule (ours: the public tool accepts any
    /// name and does nothing).
    pub(crate) fn cancel(&mut self, x: &Ident) {
        if matches!(self.lookup(&x.name), Some(Bind::Effect(_))) {
            return;
        }
        let msg = format!(
            "{} cancels unknown effect binding `{}`",
            self.subject, x.name
        );
        let names: Vec<String> = self.effects.iter().map(|e| e.name.clone()).collect();
        let help = suggest::help(
            &x.name,
            names.iter().map(String::as_str),
            "cancel an effect bound in this rule, such as `timer 1h as reminder`",
        );
        self.err("rule.cancel_unbound", x.span, msg, help);
    }
}

impl Cx<'_> {
    /// `timer until T`: T is an ISO-8601 literal or a `time` path.
    pub(crate) fn timer_until(&mut self, at: &Expr) {
        if let ExprKind::Str(s) = &at.kind
            && s.parts.iter().all(|p| matches!(p, StrPart::Lit(_)))
        {
            if crate::check::instant::parse_ms(&s.value).is_none() {
                let msg = format!("invalid time literal `{}`", s.value);
                let help = "write an ISO-8601 instant such as `2026-01-01T09:00:00Z`";
                self.err("time.invalid_literal", at.span, msg, help);
            }
            return;
        }
        let shown = crate::ir::expr(at);
        if let ExprKind::Path(segs) = &at.kind
            && let [head, field, ..] = segs.as_slice()
            && let Some(Bind::Fact(c)) = self.lookup(&head.name)
            && let Some(class) = self.class(c)
            && !class.fields.iter().any(|(n, _)| *n == field.name)
        {
            let msg = format!(
                "{} has invalid `timer until` operand `{shown}`: schema `{}` has no field `{}`",
                self.subject,
                display_class(c),
                field.name
            );
            let fields: Vec<String> = class.fields.iter().map(|(n, _)| n.clone()).collect();
            let help = suggest::help(
                &field.name,
                fields.iter().map(String::as_str),
                format!("`{}` has fields {}", display_class(c), list(&fields)),
            );
            return self.err("time.until_field", field.span, msg, help);
        }
        let t = self.infer(at, Implicit::None);
        let time = matches!(t, Ty::Time | Ty::Any)
            || matches!(&t, Ty::Optional(inner) if **inner == Ty::Time);
        if !time {
            let msg = format!(
                "{} uses non-time operand `{shown}` in `timer until`",
                self.subject
            );
            let help = format!("the operand is `{t}`; `timer until` takes a `time` value");
            self.err("time.until_type", at.span, msg, help);
        }
    }
}
