//! The checker: every static check of LANGUAGE.md §4 and its appendix.
//!
//! Input: parsed files (the root file first, then included libraries). Output: diagnostics
//! sorted by position, and the [`Model`] the lowering reads. Declarations that failed to
//! parse are *poisoned*: references to them stay silent, so one bad declaration yields one
//! error.
//!
//! The words of every diagnostic the language page lists are pinned by `tests/appendix.rs`,
//! which maps each one to the golden program under `tests/check/` that triggers it.

mod agents;
mod case;
mod coord;
mod corners;
mod cx;
pub mod desugar;
mod finite;
pub mod instant;
pub mod model;
mod ops;
mod rules;
mod script;
pub mod shape;
pub mod suggest;
mod tool;
pub mod types;
mod values;

use std::collections::{BTreeMap, BTreeSet};

use crate::check::cx::{Cx, Implicit};
use crate::check::model::{Model, Wf};
use crate::check::types::Ty;
use crate::check::values::ObjCtx;
use crate::diag::{Diag, Span};
use crate::syntax::ast::*;

pub use model::Model as CheckedModel;

/// Modules `use` may name.
/// `std.agent` and `std.coercion` are ambient (LANGUAGE-AGENTS.md §1): accepted, never
/// required, and they enable nothing this engine does not already run.
pub const STD_MODULES: &[&str] = &[
    "std.coord",
    "std.tracker",
    "std.messaging",
    "std.script",
    "std.agent",
    "std.coercion",
];

/// Checks a program; `files[0]` is the root file. Rules in the returned model are desugared.
pub fn check(files: &[File], root: Option<&str>) -> (Model, Vec<Diag>) {
    let mut diags = Vec::new();
    let mut m = model::build(files, root, &mut diags);
    let takes_input_named_input: BTreeSet<String> = m
        .workflows
        .iter()
        .filter(|w| w.inputs.iter().any(|i| i.name == "input"))
        .map(|w| w.name.name.clone())
        .collect();
    let wraps = |child: &str| !takes_input_named_input.contains(child);
    for wf in &mut m.workflows {
        for (_, rule, _) in &mut wf.rules {
            rule.body = desugar::block(&rule.body);
            desugar::invoke_inputs(&mut rule.body, &wraps);
        }
    }
    for f in files {
        uses_and_tags(&f.items, &mut diags);
        collect_uses(&f.items, &mut m.uses);
    }
    declarations(&m, files, &mut diags);
    agents::declarations(&m, &mut diags);
    let mut edges: BTreeMap<String, Vec<(String, Span)>> = BTreeMap::new();
    for wf in &m.workflows {
        let invokes = workflow(&m, wf, &mut diags);
        edges.insert(wf.name.name.clone(), invokes);
    }
    recursion(&edges, &mut diags);
    agent_values(&mut m);
    diags.sort_by_key(|d| (d.span.file, d.span.start, d.span.end));
    diags.dedup();
    (m, diags)
}

/// Bare agent names written as values become strings in the model the runtime reads (a
/// binding of the same name shadows the agent and stays a path).
fn agent_values(m: &mut Model) {
    let agents: BTreeSet<String> = m.agents.keys().cloned().collect();
    let is_agent = |n: &str| agents.contains(n);
    for wf in &mut m.workflows {
        for t in &mut wf.tables {
            for row in &mut t.rows {
                desugar::object_values(row, &is_agent);
            }
        }
        for (_, rule, _) in &mut wf.rules {
            let bound: BTreeSet<String> = rule
                .whens
                .iter()
                .filter_map(|w| w.binding.as_ref().map(|b| b.name.clone()))
                .collect();
            let free = |n: &str| is_agent(n) && !bound.contains(n);
            desugar::agent_values(&mut rule.body, &free);
        }
    }
}

fn uses_and_tags(items: &[Item], diags: &mut Vec<Diag>) {
    for item in items {
        for tag in &item.tags {
            let allowed: &[&str] = match &item.kind {
                ItemKind::Workflow(_) => &["service", "private", "tool"],
                ItemKind::Rule(_) => &["external", "service"],
                _ => &[],
            };
            if !allowed.contains(&tag.name.as_str()) {
                let msg = format!("tag `@{}` does not apply here", tag.name);
                let help =
                    "`@service`, `@private` and `@tool` tag workflows; `@external` tags rules";
                diags.push(Diag::error("decl.tag", tag.span, msg).help(help));
            }
        }
        match &item.kind {
            ItemKind::Use(path) => {
                let name: Vec<&str> = path.iter().map(|p| p.name.as_str()).collect();
                let name = name.join(".");
                if !STD_MODULES.contains(&name.as_str()) {
                    let span = path[0].span.to(path[path.len() - 1].span);
                    let help = suggest::help(
                        &name,
                        STD_MODULES.iter().copied(),
                        "the modules are `std.coord`, `std.tracker`, `std.messaging`, \
                         `std.script`, `std.agent` and `std.coercion`",
                    );
                    diags.push(
                        Diag::error(
                            "decl.unknown_module",
                            span,
                            format!("unknown module `{name}`"),
                        )
                        .help(help),
                    );
                }
            }
            ItemKind::Workflow(Workflow {
                body: Some(body), ..
            }) => uses_and_tags(body, diags),
            _ => {}
        }
    }
}

/// The modules `items` (and the workflow blocks among them) `use`.
fn collect_uses(items: &[Item], out: &mut BTreeSet<String>) {
    for item in items {
        match &item.kind {
            ItemKind::Use(path) => {
                let name: Vec<&str> = path.iter().map(|p| p.name.as_str()).collect();
                out.insert(name.join("."));
            }
            ItemKind::Workflow(Workflow {
                body: Some(body), ..
            }) => collect_uses(body, out),
            _ => {}
        }
    }
}

/// Resource declarations: mandatory clauses, key and entry types, zones, providers.
fn declarations(m: &Model, files: &[File], diags: &mut Vec<Diag>) {
    let mut all = Vec::new();
    for f in files {
        collect_decls(&f.items, &mut all);
    }
    let first_channel = all.iter().find_map(|item| match &item.kind {
        ItemKind::Channel(d) => Some(d.name.span),
        _ => None,
    });
    if let Some(span) = first_channel.filter(|_| !m.uses.contains("std.messaging")) {
        let msg = "a `channel` declaration requires `use std.messaging` \
                   (security.package_import_required): the import is the program's explicit \
                   opt-in to this authority";
        let help = "add `use std.messaging` at the top of the file";
        diags.push(Diag::error("channel.missing_use", span, msg).help(help));
    }
    for item in all {
        if item.recovered {
            continue;
        }
        match &item.kind {
            ItemKind::Lease(d) => lease(m, d, diags),
            ItemKind::Counter(d) => counter(m, d, diags),
            ItemKind::Ledger(d) => ledger(m, d, diags),
            ItemKind::Tracker(d) => {
                if let Some(p) = d.provider.as_ref().filter(|p| p.name != "builtin") {
                    let msg = format!(
                        "tracker `{}` uses unavailable provider `{}`",
                        d.name.name, p.name
                    );
                    let help = "the available provider is `builtin`";
                    diags.push(Diag::error("tracker.provider", p.span, msg).help(help));
                }
            }
            ItemKind::Channel(d) => channel(d, diags),
            _ => {}
        }
    }
}

fn collect_decls<'a>(items: &'a [Item], out: &mut Vec<&'a Item>) {
    for item in items {
        match &item.kind {
            ItemKind::Workflow(Workflow {
                body: Some(body), ..
            }) => collect_decls(body, out),
            _ => out.push(item),
        }
    }
}

fn key_type(m: &Model, kind: &str, name: &str, key: &Ident, what: &str, diags: &mut Vec<Diag>) {
    let known = m.classes.contains_key(&key.name)
        || m.enums.contains_key(&key.name)
        || types::primitive(&key.name).is_some()
        || m.poisoned.contains(&key.name);
    if !known {
        let msg = format!(
            "{kind} `{name}` {what} undeclared {} `{}`",
            if what == "records" {
                "entry type"
            } else {
                "type"
            },
            key.name
        );
        let names: Vec<&str> = m
            .class_names()
            .chain(m.enums.keys().map(String::as_str))
            .collect();
        let help = suggest::help(
            &key.name,
            names,
            "declare the class, or name a declared one",
        );
        diags.push(Diag::error("decl.undeclared_type", key.span, msg).help(help));
    }
}

fn lease(m: &Model, d: &LeaseDecl, diags: &mut Vec<Diag>) {
    if d.key.is_none() || d.ttl.is_none() {
        let msg = format!(
            "lease `{}` must declare a `key` type and a `ttl` backstop",
            d.name.name
        );
        let help = "add `key Class` and `ttl 10m` (the TTL frees the slot if a holder crashes)";
        diags.push(Diag::error("lease.incomplete", d.name.span, msg).help(help));
    }
    if let Some(k) = &d.key {
        key_type(m, "lease", &d.name.name, k, "keys on", diags);
    }
    if let Some(s) = d.slots.filter(|s| s.value < 1) {
        let msg = format!(
            "lease `{}` declares `slots {}`; a lease needs at least one slot",
            d.name.name, s.value
        );
        diags.push(Diag::error("lease.slots", s.span, msg).help("write `slots 1` or more"));
    }
}

fn counter(m: &Model, d: &CounterDecl, diags: &mut Vec<Diag>) {
    let name = &d.name.name;
    if d.key.is_none() || d.cap.is_none() || d.reset.is_none() {
        let msg = format!("counter `{name}` must declare `key`, `cap`, and `reset`");
        let help = "add `key Class`, `cap 100` and `reset daily`";
        diags.push(Diag::error("counter.incomplete", d.name.span, msg).help(help));
    }
    if let Some(k) = &d.key {
        key_type(m, "counter", name, k, "keys on", diags);
    }
    if let Some(c) = d.cap.filter(|c| c.value < 1) {
        let msg = format!(
            "counter `{name}` declares `cap {}`; a cap must be positive",
            c.value
        );
        diags.push(Diag::error("counter.cap", c.span, msg).help("write `cap 1` or more"));
    }
    const PERIODS: &[&str] = &["hourly", "daily", "weekly", "monthly"];
    if let Some(r) = &d.reset {
        if !PERIODS.contains(&r.name.as_str()) {
            let msg = format!("unknown reset period `{}`", r.name);
            let help = suggest::help(
                &r.name,
                PERIODS.iter().copied(),
                "reset periods are `hourly`, `daily`, `weekly` and `monthly`",
            );
            diags.push(Diag::error("counter.reset", r.span, msg).help(help));
        } else if d.timezone.is_none() {
            let msg = format!(
                "counter `{name}` declares no `timezone`; its `{}` reset boundary \
                               anchors to UTC",
                r.name
            );
            let help = "declare `timezone \"<IANA zone>\"` (e.g. `timezone \"America/New_York\"`) \
                        to anchor the period locally";
            diags.push(Diag::warning("counter.no_timezone", d.name.span, msg).help(help));
        }
    }
    if let Some((zone, span)) = &d.timezone
        && zone.parse::<chrono_tz::Tz>().is_err()
    {
        let msg = format!("counter `{name}` declares unknown time zone `{zone}`");
        let names = chrono_tz::TZ_VARIANTS.iter().map(|z| z.name());
        let help = suggest::help(
            zone,
            names,
            "name an IANA zone such as `Europe/Paris` or `UTC`",
        );
        diags.push(Diag::error("counter.timezone", *span, msg).help(help));
    }
}

fn ledger(m: &Model, d: &LedgerDecl, diags: &mut Vec<Diag>) {
    let name = &d.name.name;
    if d.entry.is_none() || d.partition.is_none() || d.retain.is_none() {
        let msg = format!("ledger `{name}` must declare `entry`, `partition by`, and `retain`");
        let help = "add `entry Class`, `partition by field` and `retain 90d`";
        diags.push(Diag::error("ledger.incomplete", d.name.span, msg).help(help));
    }
    let Some(entry) = &d.entry else { return };
    if !m.classes.contains_key(&entry.name) {
        return key_type(m, "ledger", name, entry, "records", diags);
    }
    if let Some(p) = &d.partition {
        let fields = &m.classes[&entry.name].fields;
        if !fields.iter().any(|(f, _)| *f == p.name) {
            let msg = format!(
                "ledger `{name}` partitions by `{}`, but entry class `{}` has no \
                               field `{}`",
                p.name, entry.name, p.name
            );
            let help = suggest::help(
                &p.name,
                fields.iter().map(|(f, _)| f.as_str()),
                format!("partition by a field of `{}`", entry.name),
            );
            diags.push(Diag::error("ledger.partition_field", p.span, msg).help(help));
        }
    }
}

/// Checks one workflow; returns the workflows its rules invoke.
fn workflow(m: &Model, wf: &Wf, diags: &mut Vec<Diag>) -> Vec<(String, Span)> {
    let service = wf.has_tag("service");
    let mut invokes = Vec::new();
    for t in &wf.tables {
        let subject = format!("table `{}`", t.name.name);
        let mut cx = Cx::new(m, wf, subject, diags);
        if m.classes.contains_key(&t.class.name) {
            for row in &t.rows {
                cx.object(row, &t.class.name, ObjCtx::Table);
            }
        } else if !m.poisoned.contains(&t.class.name) {
            cx.report(model::unknown_schema(m, &t.class.name, t.class.span));
        }
    }
    for (tags, rule, recovered) in &wf.rules {
        let subject = format!("rule `{}`", rule.name.name);
        let mut cx = Cx::new(m, wf, subject, diags);
        let rule_service = service || tags.iter().any(|t| t == "service");
        cx.rule(rule, rule_service, *recovered);
        invokes.append(&mut cx.invokes);
    }
    tool::check(wf, &invokes, diags);
    for a in &wf.asserts {
        let mut cx = Cx::new(m, wf, "assertion".into(), diags);
        let t = cx.infer(a, Implicit::None);
        if !matches!(t, Ty::Bool | Ty::Any) {
            let msg = "assertion is not a boolean expression".to_string();
            let help = format!(
                "the expression is `{t}`; assert a comparison such as \
                                `count(Done) == 1`"
            );
            cx.err("assert.not_boolean", a.span, msg, help);
        }
    }
    // A declaration that failed to parse may have been the terminal rule or the producer.
    let broken = !m.poisoned.is_empty() || wf.rules.iter().any(|(_, _, recovered)| *recovered);
    if broken {
        return invokes;
    }
    if !service
        && !wf
            .rules
            .iter()
            .any(|(_, r, _)| reaches_terminal(&r.body.stmts))
    {
        let msg = format!(
            "workflow `{}` has no rule that reaches `complete` or `fail`",
            wf.name.name
        );
        let help = "add a rule that runs `complete result …` or `fail error …`, or tag the \
                    workflow `@service` if it runs forever";
        diags.push(Diag::error("workflow.no_terminal", wf.name.span, msg).help(help));
    }
    producers(m, wf, diags);
    agents::turn_waiters(wf, diags);
    invokes
}

fn reaches_terminal(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Complete(..) | StmtKind::Fail(..) => true,
        k => k
            .child_blocks()
            .into_iter()
            .any(|b| reaches_terminal(&b.stmts)),
    })
}

fn recorded(stmts: &[Stmt], out: &mut BTreeSet<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Record(c, _)
            | StmtKind::Done(_, Some((c, _)))
            | StmtKind::RecordFrom(RecordFrom { class: c, .. }) => {
                out.insert(c.name.clone());
            }
            k => {
                for b in k.child_blocks() {
                    recorded(&b.stmts, out);
                }
            }
        }
    }
}

/// `rule R can never fire: nothing produces C`.
fn producers(m: &Model, wf: &Wf, diags: &mut Vec<Diag>) {
    let mut produced: BTreeSet<String> = wf.tables.iter().map(|t| t.class.name.clone()).collect();
    for (_, r, _) in &wf.rules {
        recorded(&r.body.stmts, &mut produced);
    }
    for input in &wf.inputs {
        let mut ty = &input.ty;
        while let Ty::Array(inner) | Ty::Optional(inner) = ty {
            ty = inner;
        }
        if let Ty::Class(c) = ty {
            produced.insert(c.clone());
        }
    }
    for (tags, r, _) in &wf.rules {
        if tags.iter().any(|t| t == "external") {
            continue;
        }
        for w in &r.whens {
            let WhenKind::Fact(c) = &w.kind else { continue };
            if m.classes.contains_key(&c.name) && !produced.contains(&c.name) {
                let msg = format!(
                    "rule `{}` can never fire: nothing produces `{}`",
                    r.name.name, c.name
                );
                let help = format!(
                    "seed `{}` with a `table`, `record` it in a rule, take it as an \
                                    input, or tag the rule `@external`",
                    c.name
                );
                diags.push(Diag::error("rule.never_fires", w.span, msg).help(help));
            }
        }
    }
}

/// Invocation cycles, each reported once.
fn recursion(edges: &BTreeMap<String, Vec<(String, Span)>>, diags: &mut Vec<Diag>) {
    let mut reported: BTreeSet<Vec<String>> = BTreeSet::new();
    for start in edges.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()], None::<Span>)];
        let mut steps = 0usize;
        while let Some((node, path, _)) = stack.pop() {
            steps += 1;
            if steps > 10_000 {
                break;
            }
            for (next, span) in edges.get(&node).map_or(&[][..], |v| &v[..]) {
                if next == start {
                    let mut cycle = path.clone();
                    cycle.push(next.clone());
                    let mut key = path.clone();
                    key.sort();
                    if reported.insert(key) {
                        let msg = format!(
                            "recursive workflow invocation is not allowed \
                            (graph.unbounded_workflow_invocation_recursion): invocation cycle {}",
                            cycle.join(" -> ")
                        );
                        let help = "break the cycle: a child workflow may not invoke an ancestor";
                        diags.push(Diag::error("invoke.recursion", *span, msg).help(help));
                    }
                } else if !path.contains(next) && edges.contains_key(next) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p, Some(*span)));
                }
            }
        }
    }
}

/// A channel's provider is one of the messaging providers (LANGUAGE-AGENTS.md §4.5); only a
/// `fabric` channel has a recipient, an agent, a team or an entry with a valid name.
fn channel(d: &ChannelDecl, diags: &mut Vec<Diag>) {
    use crate::messaging::MessagingProvider;
    if let Some(p) = d.provider.as_ref()
        && MessagingProvider::from_code(&p.name).is_none()
    {
        let msg = format!(
            "channel `{}` names unknown messaging provider `{}`",
            d.name.name, p.name
        );
        let help = "the messaging providers are `local`, `stdio`, `fixture`, `desktop` and \
                    `fabric`";
        diags.push(Diag::error("channel.provider", p.span, msg).help(help));
        return;
    }
    if let (Some((kind, _)), Some(p)) = (&d.to, &d.provider)
        && p.name != "fabric"
    {
        let msg = format!(
            "channel `{}` names a recipient, which only provider `fabric` delivers to",
            d.name.name
        );
        let help = "write `provider fabric`, or drop `to`";
        diags.push(Diag::error("channel.recipient", kind.span, msg).help(help));
        return;
    }
    let Some((kind, name)) = &d.to else {
        return;
    };
    let address = match kind.name.as_str() {
        "agent" | "team" | "entry" => format!("{}:{}", kind.name, name.value),
        other => {
            let msg = format!("channel `{}` sends to unknown kind `{other}`", d.name.name);
            let help = "write `to agent \"name\"`, `to team \"name\"` or `to entry \"id\"`";
            diags.push(Diag::error("channel.recipient", kind.span, msg).help(help));
            return;
        }
    };
    if let Err(reason) = whip_fabric::mail::Address::parse(&address) {
        let msg = format!(
            "channel `{}` has an invalid recipient: {reason}",
            d.name.name
        );
        let help = "agent names use letters, digits and . _ - @ : +";
        diags.push(Diag::error("channel.recipient", kind.span, msg).help(help));
    }
}
