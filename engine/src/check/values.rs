//! Payloads: record, table, terminal, append and invoke values against their types.

use crate::check::cx::{Cx, Implicit, list};
use crate::check::ops::{domain, literal_of};
use crate::check::suggest;
use crate::check::types::{Ty, display_class};
use crate::syntax::ast::*;

/// What an object literal is checked as (decides the missing-field message).
#[derive(Debug, Clone, Copy)]
pub(crate) enum ObjCtx<'a> {
    /// `record` / `done -> record`
    Record,
    /// A table row.
    Table,
    /// A `complete`/`fail` payload of the named terminal.
    Terminal(&'a str),
    /// An `append` entry.
    Entry,
    /// A nested object inside another payload.
    Nested,
}

impl Cx<'_> {
    /// Checks `obj` against class `key`.
    pub(crate) fn object(&mut self, obj: &ObjectLit, key: &str, ctx: ObjCtx<'_>) {
        let Some(class) = self.class(key) else { return };
        let shown = display_class(key).to_string();
        let mut seen: Vec<&str> = Vec::new();
        for (name, value) in &obj.fields {
            if seen.contains(&name.name.as_str()) {
                let msg = format!("field `{shown}.{}` is given twice", name.name);
                self.err(
                    "value.duplicate_field",
                    name.span,
                    msg,
                    "keep one of the two values",
                );
                continue;
            }
            seen.push(&name.name);
            let Some((_, ty)) = class.fields.iter().find(|(n, _)| *n == name.name) else {
                let msg = format!("class `{shown}` has no field `{}`", name.name);
                let names = class.fields.iter().map(|(n, _)| n.as_str());
                let fields: Vec<String> = class.fields.iter().map(|(n, _)| n.clone()).collect();
                let help = suggest::help(
                    &name.name,
                    names,
                    format!("`{shown}` has fields {}", list(&fields)),
                );
                self.err("value.unknown_field", name.span, msg, help);
                self.infer(value, Implicit::None);
                continue;
            };
            self.value(value, ty, &format!("{shown}.{}", name.name));
        }
        let missing: Vec<&(String, Ty)> = class
            .fields
            .iter()
            .filter(|(f, ty)| !seen.contains(&f.as_str()) && !ty.is_optional())
            .collect();
        let Some((field, ty)) = missing.first() else {
            return;
        };
        let msg = match ctx {
            ObjCtx::Terminal(t) => {
                format!("workflow terminal `{t}` is missing required field `{shown}.{field}`")
            }
            ObjCtx::Record | ObjCtx::Nested => {
                format!("record of `{shown}` is missing required field `{shown}.{field}`")
            }
            ObjCtx::Table => {
                format!("table row of `{shown}` is missing required field `{shown}.{field}`")
            }
            ObjCtx::Entry => {
                format!("ledger entry `{shown}` is missing required field `{shown}.{field}`")
            }
        };
        let help = if missing.len() == 1 {
            format!("add `{field} <{ty}>` or declare the field optional")
        } else {
            let names: Vec<String> = missing.iter().map(|(f, _)| f.clone()).collect();
            format!("add the required fields {}", list(&names))
        };
        self.err("value.missing_field", obj.span, msg, help);
    }

    /// Checks one value against the type of slot `label` (`Class.field`).
    pub(crate) fn value(&mut self, e: &Expr, ty: &Ty, label: &str) {
        match (&e.kind, ty) {
            (_, Ty::Any) => {
                self.infer(e, Implicit::None);
            }
            (ExprKind::Null, t) if t.is_optional() => {}
            (_, Ty::Optional(inner)) => self.value(e, inner, label),
            (ExprKind::Object(o), Ty::Class(c)) => self.object(o, c, ObjCtx::Nested),
            (ExprKind::Object(o), Ty::Map(v)) => {
                for (k, item) in &o.fields {
                    self.value(item, v, &format!("{label}.{}", k.name));
                }
            }
            (ExprKind::Array(items), Ty::Array(el)) => {
                for item in items {
                    self.value(item, el, label);
                }
            }
            (ExprKind::Path(segs), Ty::AgentRef(agents))
                if segs.len() == 1 && self.lookup(&segs[0].name).is_none() =>
            {
                self.agent_value(label, &segs[0].name, agents, e);
            }
            (ExprKind::Str(s), Ty::AgentRef(_)) if literal_of(e).is_some() => {
                let msg = format!(
                    "field `{label}` expects an AgentRef value, not string `{}`",
                    s.value
                );
                let help = format!("write the agent's name bare: `{}`", s.value);
                self.err("value.agent_ref", e.span, msg, help);
            }
            (ExprKind::Path(segs), Ty::Enum(en))
                if segs.len() == 1 && self.lookup(&segs[0].name).is_none() =>
            {
                let variants = self.m.enums.get(en).cloned().unwrap_or_default();
                if !variants.contains(&segs[0].name) {
                    self.no_variant(en, &segs[0].name, &variants, e);
                }
            }
            _ => {
                let t = self.infer(e, Implicit::None);
                if let (Some(d), Some(v)) = (domain(self.m, ty), literal_of(e))
                    && !d.contains(&v)
                {
                    return match ty {
                        Ty::Enum(en) => self.no_variant(en, &v, &d, e),
                        _ => self.cannot_be(label, &v, &d, e),
                    };
                }
                if !t.assignable_to(ty) {
                    let msg = format!("field `{label}` expects `{ty}`");
                    let help = format!("the value is `{t}`");
                    self.err("value.type", e.span, msg, help);
                }
            }
        }
    }

    /// An enum literal (bare `Medium` or `"Medium"`) in a slot of enum type `en` that names
    /// no variant: the public wording names the enum, not the field.
    fn no_variant(&mut self, en: &str, v: &str, variants: &[String], e: &Expr) {
        let msg = format!("enum `{en}` has no variant `{v}`");
        let help = suggest::help(
            v,
            variants.iter().map(String::as_str),
            format!("variants of `{en}` are {}", list(variants)),
        );
        self.err("type.unknown_variant", e.span, msg, help);
    }

    /// A bare agent name in an `AgentRef` slot: one of the type's agents.
    fn agent_value(&mut self, label: &str, v: &str, agents: &[String], e: &Expr) {
        if agents.iter().any(|a| a == v) {
            return;
        }
        let help = format!("the agents are {}", list(agents));
        if self.m.agents.contains_key(v) {
            let msg = format!("field `{label}` cannot reference agent `{v}`");
            self.err("value.agent_ref", e.span, msg, help);
        } else {
            let msg = format!("AgentRef has no agent `{v}`");
            let help = suggest::help(v, agents.iter().map(String::as_str), help);
            self.err("value.agent_ref", e.span, msg, help);
        }
    }

    fn cannot_be(&mut self, label: &str, v: &str, allowed: &[String], e: &Expr) {
        let msg = format!("field `{label}` cannot be `{v}`");
        let help = suggest::help(
            v,
            allowed.iter().map(String::as_str),
            format!("allowed values are {}", list(allowed)),
        );
        self.err("value.domain", e.span, msg, help);
    }
}
