//! The lowered program the runtime executes: rules with their join plan, statements as
//! effects with stable ids, `then` already desugared, resources with their owners.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;

use crate::check::model::{Model, Wf};
use crate::syntax::ast::*;

/// A lowered program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Program {
    /// The workflow `whip run` starts.
    pub root: Option<String>,
    /// Every workflow (children included).
    pub workflows: Vec<Workflow>,
    /// Declared agents (`provider=… profile=… capacity=…`) and coerce functions, as
    /// resources owned by the program.
    pub agents: Vec<Resource>,
}

/// A lowered workflow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workflow {
    /// Its name.
    pub name: String,
    /// `service`, `private`.
    pub tags: Vec<String>,
    /// `name: type` of each input, output and failure terminal.
    pub inputs: Vec<String>,
    /// Output terminals.
    pub outputs: Vec<String>,
    /// Failure terminals.
    pub failures: Vec<String>,
    /// Coordination resources and trackers with their owners.
    pub resources: Vec<Resource>,
    /// Facts seeded at start: (class, rows as source text).
    pub tables: Vec<TableSeed>,
    /// Rules in declaration order (the stepper's evaluation order).
    pub rules: Vec<RulePlan>,
    /// Assertions, as source text.
    pub asserts: Vec<String>,
}

/// A declared lease, counter, ledger or tracker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resource {
    /// `lease`, `counter`, `ledger`, `tracker`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// `local/<Workflow>` or `shared`.
    pub owner: String,
    /// Its clauses, as `key=value` pairs in a fixed order.
    pub params: Vec<(String, String)>,
}

/// Rows seeded by a table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableSeed {
    /// The table's name.
    pub name: String,
    /// The class of the rows.
    pub class: String,
    /// Each row as an object literal.
    pub rows: Vec<String>,
}

/// A rule with its join plan and body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RulePlan {
    /// Its name.
    pub name: String,
    /// `external`, `service`.
    pub tags: Vec<String>,
    /// The sources joined, in order, with the guards evaluated at each step.
    pub join: Vec<JoinStep>,
    /// The body: facts, terminals, effects and `after` continuations.
    pub body: Vec<Node>,
}

/// One source of a join.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JoinStep {
    /// `started`, `fact Class`, `ready issue in tracker`, `runtime timer.fired`.
    pub source: String,
    /// The binding, if any.
    pub binding: Option<String>,
    /// Guards evaluated once this step is bound (all their bindings are available).
    pub guards: Vec<String>,
    /// True when the body consumes this fact with `done`.
    pub consumed: bool,
}

/// A lowered statement.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "node", rename_all = "snake_case")]
pub enum Node {
    /// `record` (a new fact) or `done` (consume a bound fact).
    Fact {
        /// `record` or `done`.
        op: String,
        /// The statement in source form.
        detail: String,
    },
    /// `complete` or `fail`: a workflow terminal.
    Terminal {
        /// `complete` or `fail`.
        op: String,
        /// The terminal name.
        name: String,
        /// The payload in source form.
        payload: String,
    },
    /// An effect with a stable id (`rule/eN`), from which its idempotency key derives.
    Effect {
        /// Stable id.
        id: String,
        /// `timer`, `invoke`, `acquire`, `release`, …
        kind: String,
        /// The binding `after` blocks name.
        binding: Option<String>,
        /// Arguments in source form.
        detail: String,
    },
    /// Runs when effect `upstream` settles with `predicate`.
    After {
        /// Id of the upstream effect (`?` if unknown).
        upstream: String,
        /// The binding waited on.
        target: String,
        /// `succeeds`, `held`, …
        predicate: String,
        /// `as y`
        binding: Option<String>,
        /// Made from a `then` step.
        from_then: bool,
        /// The continuation.
        body: Vec<Node>,
    },
    /// `case PATH { … }`: the first arm that matches runs.
    Case {
        /// The scrutinee in source form.
        scrutinee: String,
        /// Each arm: its pattern (with `as y` and `where …` as written) and its body.
        arms: Vec<(String, Vec<Node>)>,
    },
}

/// Lowers a checked model.
pub fn lower(m: &Model) -> Program {
    Program {
        root: m.root.map(|i| m.workflows[i].name.name.clone()),
        workflows: m.workflows.iter().map(workflow).collect(),
        agents: agent_resources(m),
    }
}

fn agent_resources(m: &Model) -> Vec<Resource> {
    let mut out = Vec::new();
    for (name, a) in &m.agents {
        let mut params = vec![
            ("provider".to_string(), a.provider.clone()),
            ("profile".to_string(), a.profile.clone()),
            ("capacity".to_string(), a.capacity.to_string()),
        ];
        let tools: Vec<&str> = a.decl.tools.iter().map(|t| t.name.as_str()).collect();
        if !tools.is_empty() {
            params.push(("tools".into(), tools.join(",")));
        }
        out.push(resource("agent", name, "program", params));
    }
    for (name, c) in &m.coerces {
        let params: Vec<String> = c.params.iter().map(|(p, t)| format!("{p} {t}")).collect();
        let params = vec![
            ("params".to_string(), params.join(",")),
            ("output".to_string(), c.output.to_string()),
        ];
        out.push(resource("coerce", name, "program", params));
    }
    out
}

fn terminal_list(list: &[crate::check::model::Terminal]) -> Vec<String> {
    list.iter()
        .map(|t| format!("{}: {}", t.name, t.ty))
        .collect()
}

fn workflow(wf: &Wf) -> Workflow {
    let mut resources = Vec::new();
    for (name, r) in &wf.leases {
        let mut params = vec![];
        push_opt(
            &mut params,
            "key",
            r.decl.key.as_ref().map(|k| k.name.clone()),
        );
        params.push((
            "slots".into(),
            r.decl.slots.map_or(1, |s| s.value).to_string(),
        ));
        push_opt(&mut params, "ttl", r.decl.ttl.map(|d| duration(d.seconds)));
        resources.push(resource("lease", name, &r.owner, params));
    }
    for (name, r) in &wf.counters {
        let mut params = vec![];
        push_opt(
            &mut params,
            "key",
            r.decl.key.as_ref().map(|k| k.name.clone()),
        );
        push_opt(&mut params, "cap", r.decl.cap.map(|c| c.value.to_string()));
        push_opt(
            &mut params,
            "reset",
            r.decl.reset.as_ref().map(|k| k.name.clone()),
        );
        let zone = r
            .decl
            .timezone
            .as_ref()
            .map_or("UTC".to_string(), |z| z.0.clone());
        params.push(("timezone".into(), zone));
        resources.push(resource("counter", name, &r.owner, params));
    }
    for (name, r) in &wf.ledgers {
        let mut params = vec![];
        push_opt(
            &mut params,
            "entry",
            r.decl.entry.as_ref().map(|k| k.name.clone()),
        );
        push_opt(
            &mut params,
            "partition_by",
            r.decl.partition.as_ref().map(|k| k.name.clone()),
        );
        push_opt(
            &mut params,
            "retain",
            r.decl.retain.map(|d| duration(d.seconds)),
        );
        resources.push(resource("ledger", name, &r.owner, params));
    }
    tracker_and_channel_resources(wf, &mut resources);
    Workflow {
        name: wf.name.name.clone(),
        tags: wf.tags.clone(),
        inputs: terminal_list(&wf.inputs),
        outputs: terminal_list(&wf.outputs),
        failures: terminal_list(&wf.failures),
        resources,
        tables: wf
            .tables
            .iter()
            .map(|t| TableSeed {
                name: t.name.name.clone(),
                class: t.class.name.clone(),
                rows: t.rows.iter().map(object).collect(),
            })
            .collect(),
        rules: wf.rules.iter().map(|(tags, r, _)| rule(tags, r)).collect(),
        asserts: wf.asserts.iter().map(expr).collect(),
    }
}

fn tracker_and_channel_resources(wf: &Wf, resources: &mut Vec<Resource>) {
    for (name, r) in &wf.trackers {
        let provider = r
            .decl
            .provider
            .as_ref()
            .map_or("builtin".into(), |p| p.name.clone());
        let params = vec![("provider".into(), provider)];
        resources.push(resource("tracker", name, &r.owner, params));
    }
    for (name, r) in &wf.channels {
        let mut params = vec![("provider".into(), r.decl.provider_name().to_string())];
        if let Some((kind, to)) = &r.decl.to {
            params.push(("to".into(), format!("{}:{}", kind.name, to.value)));
        }
        resources.push(resource("channel", name, &r.owner, params));
    }
}

fn push_opt(params: &mut Vec<(String, String)>, key: &str, v: Option<String>) {
    if let Some(v) = v {
        params.push((key.to_string(), v));
    }
}

fn resource(kind: &str, name: &str, owner: &str, params: Vec<(String, String)>) -> Resource {
    Resource {
        kind: kind.into(),
        name: name.into(),
        owner: owner.into(),
        params,
    }
}

fn rule(tags: &[String], r: &Rule) -> RulePlan {
    let mut consumed = BTreeSet::new();
    done_bindings(&r.body.stmts, &mut consumed);
    let mut join: Vec<JoinStep> = r
        .whens
        .iter()
        .map(|w| JoinStep {
            source: match &w.kind {
                WhenKind::Started => "started".into(),
                WhenKind::Fact(c) => format!("fact {}", c.name),
                WhenKind::ReadyIssue(t) => format!("ready issue in {}", t.name),
                WhenKind::Runtime(p) => format!("runtime {}", dotted(p)),
                WhenKind::Message(c) => format!("message from {}", c.name),
                WhenKind::CompletedTurn(a) => format!("completed turn of {}", a.name),
                WhenKind::Available(p) => format!("available {}", dotted(p)),
            },
            binding: w.binding.as_ref().map(|b| b.name.clone()),
            guards: Vec::new(),
            consumed: w
                .binding
                .as_ref()
                .is_some_and(|b| consumed.contains(&b.name)),
        })
        .collect();
    // A guard runs at the earliest step that binds every name it reads.
    for w in &r.whens {
        let Some(g) = &w.guard else { continue };
        let mut names = BTreeSet::new();
        read_names(g, &mut names);
        let step = join
            .iter()
            .enumerate()
            .filter(|(_, s)| s.binding.as_ref().is_some_and(|b| names.contains(b)))
            .map(|(i, _)| i)
            .max()
            .unwrap_or(0);
        join[step].guards.push(expr(g));
    }
    let mut counter = 0;
    let mut ids = Vec::new();
    let mut body = lower_block(&r.name.name, &r.body.stmts, &mut counter, &mut ids);
    let mut started = Vec::new();
    effect_ids(&body, &mut started);
    resolve_hoisted(&mut body, &started);
    RulePlan {
        name: r.name.name.clone(),
        tags: tags.to_vec(),
        join,
        body,
    }
}

fn done_bindings(stmts: &[Stmt], out: &mut BTreeSet<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Done(x, _) => {
                out.insert(x.name.clone());
            }
            k => {
                for b in k.child_blocks() {
                    done_bindings(&b.stmts, out);
                }
            }
        }
    }
}

fn read_names(e: &Expr, out: &mut BTreeSet<String>) {
    match &e.kind {
        ExprKind::Path(p) => {
            out.insert(p[0].name.clone());
        }
        ExprKind::Unary(_, x) => read_names(x, out),
        ExprKind::Binary(_, l, r) => {
            read_names(l, out);
            read_names(r, out);
        }
        ExprKind::Call(_, args) | ExprKind::Array(args) => {
            args.iter().for_each(|a| read_names(a, out))
        }
        ExprKind::Query(_, Some(g)) | ExprKind::EffectQuery(_, _, Some(g)) => read_names(g, out),
        ExprKind::Index(base, key) => {
            read_names(base, out);
            read_names(key, out);
        }
        _ => {}
    }
}

/// Every effect's (binding, id) in the lowered body, nested blocks included.
fn effect_ids(nodes: &[Node], out: &mut Vec<(String, String)>) {
    for n in nodes {
        match n {
            Node::Effect {
                id,
                binding: Some(b),
                ..
            } => out.push((b.clone(), id.clone())),
            Node::After { body, .. } => effect_ids(body, out),
            Node::Case { arms, .. } => arms.iter().for_each(|(_, body)| effect_ids(body, out)),
            _ => {}
        }
    }
}

/// An `after` on an effect started in another `after` block of the rule names that effect.
fn resolve_hoisted(nodes: &mut [Node], started: &[(String, String)]) {
    for n in nodes {
        if let Node::After {
            upstream,
            target,
            body,
            ..
        } = n
        {
            if upstream == "?"
                && let Some((_, id)) = started.iter().rev().find(|(b, _)| b == target)
            {
                *upstream = id.clone();
            }
            resolve_hoisted(body, started);
        }
        if let Node::Case { arms, .. } = n {
            for (_, body) in arms {
                resolve_hoisted(body, started);
            }
        }
    }
}

/// Lowers a block; effects are numbered in pre-order so ids are stable across runs.
fn lower_block(
    rule: &str,
    stmts: &[Stmt],
    counter: &mut usize,
    ids: &mut Vec<(String, String)>,
) -> Vec<Node> {
    let mut nodes = Vec::new();
    let scope_len = ids.len();
    // Effects first get their ids so an `after` anywhere in the block can name them.
    let mut pending = Vec::new();
    for s in stmts {
        if let Some((kind, binding, detail)) = effect_parts(&s.kind) {
            *counter += 1;
            let id = format!("{rule}/e{counter}");
            if let Some(b) = &binding {
                ids.push((b.clone(), id.clone()));
            }
            pending.push(Some(Node::Effect {
                id,
                kind,
                binding,
                detail,
            }));
        } else {
            pending.push(None);
        }
    }
    for (s, effect) in stmts.iter().zip(pending) {
        if let Some(n) = effect {
            nodes.push(n);
            continue;
        }
        if let Some(n) = lower_statement(s) {
            nodes.push(n);
            continue;
        }
        nodes.push(match &s.kind {
            StmtKind::After(a) => {
                let upstream = ids
                    .iter()
                    .rev()
                    .find(|(b, _)| *b == a.target.name)
                    .map_or("?".to_string(), |(_, id)| id.clone());
                Node::After {
                    upstream,
                    target: a.target.name.clone(),
                    predicate: a.predicate.name.clone(),
                    binding: a.binding.as_ref().map(|b| b.name.clone()),
                    from_then: a.from_then,
                    body: lower_block(rule, &a.body.stmts, counter, ids),
                }
            }
            StmtKind::Case(c) => Node::Case {
                scrutinee: expr(&c.scrutinee),
                arms: c
                    .arms
                    .iter()
                    .map(|arm| {
                        let body = lower_block(rule, &arm.body.stmts, counter, ids);
                        (arm_text(arm), body)
                    })
                    .collect(),
            },
            _ => continue,
        });
    }
    ids.truncate(scope_len);
    nodes
}

/// A statement that is neither an effect nor an `after`: a fact or a terminal node.
fn lower_statement(s: &Stmt) -> Option<Node> {
    Some(match &s.kind {
        StmtKind::Record(c, o) => fact("record", format!("{} {}", c.name, object(o))),
        StmtKind::RecordFrom(r) => {
            let over = r
                .overrides
                .as_ref()
                .map_or(String::new(), |o| format!(" {}", object(o)));
            fact(
                "record",
                format!("{} from {}{over}", r.class.name, expr(&r.source)),
            )
        }
        StmtKind::Cancel(x) => fact("cancel", x.name.clone()),
        StmtKind::Done(x, None) => fact("done", x.name.clone()),
        StmtKind::Done(x, Some((c, o))) => fact(
            "done",
            format!("{} -> record {} {}", x.name, c.name, object(o)),
        ),
        StmtKind::Complete(n, p) | StmtKind::Fail(n, p) => Node::Terminal {
            op: if matches!(s.kind, StmtKind::Complete(..)) {
                "complete"
            } else {
                "fail"
            }
            .into(),
            name: n.name.clone(),
            payload: expr(p),
        },
        _ => return None,
    })
}

/// A case arm's head as written: pattern, `as y`, `where …`.
fn arm_text(arm: &CaseArm) -> String {
    let mut t = arm.pattern.text();
    if let Some(b) = &arm.binding {
        let _ = write!(t, " as {}", b.name);
    }
    if let Some(g) = &arm.guard {
        let _ = write!(t, " where {}", expr(g));
    }
    t
}

fn fact(op: &str, detail: String) -> Node {
    Node::Fact {
        op: op.into(),
        detail,
    }
}

fn effect_parts(k: &StmtKind) -> Option<(String, Option<String>, String)> {
    if let Some(parts) = agent_effect_parts(k) {
        return Some(parts);
    }
    let b = |x: &Option<Ident>| x.as_ref().map(|i| i.name.clone());
    Some(match k {
        StmtKind::Timer(d, x) => ("timer".into(), b(x), duration(d.seconds)),
        StmtKind::TimerUntil(at, x) => ("timer".into(), b(x), format!("until {}", expr(at))),
        StmtKind::Invoke(w, o, x) => ("invoke".into(), b(x), format!("{} {}", w.name, object(o))),
        StmtKind::Acquire(a) => {
            let mut d = format!("{} for {}", a.lease.name, expr(&a.key));
            if a.until_ttl {
                d += " until ttl";
            }
            if let Some(w) = a.wait {
                let _ = write!(d, " wait {}", duration(w.seconds));
            }
            ("acquire".into(), b(&a.binding), d)
        }
        StmtKind::Release(x) => ("release".into(), None, x.name.clone()),
        StmtKind::Renew(x, u, y) => {
            let until = u.map_or(String::new(), |d| format!(" until {}", duration(d.seconds)));
            ("renew".into(), b(y), format!("{}{until}", x.name))
        }
        StmtKind::Consume(c) => {
            let d = format!(
                "{} for {} amount {}",
                c.counter.name,
                expr(&c.key),
                expr(&c.amount)
            );
            ("consume".into(), b(&c.binding), d)
        }
        StmtKind::Append(c, o, l, x) => (
            "append".into(),
            b(x),
            format!("{} {} to {}", c.name, object(o), l.name),
        ),
        StmtKind::FileIssue(t, o, x) => (
            "file_issue".into(),
            b(x),
            format!("into {} {}", t.name, object(o)),
        ),
        StmtKind::Claim(i, ttl, x) => {
            let ttl = ttl.map_or(String::new(), |d| format!(" ttl {}", duration(d.seconds)));
            ("claim".into(), b(x), format!("{}{ttl}", i.name))
        }
        StmtKind::Finish(i, o, x) => {
            let o = o
                .as_ref()
                .map_or(String::new(), |o| format!(" {}", object(o)));
            ("finish".into(), b(x), format!("{}{o}", i.name))
        }
        StmtKind::Send(m) => {
            let (kind, word) = match m.kind {
                SendKind::Ask => ("message.ask", " ask"),
                SendKind::Directive => ("message.send", " directive"),
                SendKind::Inform => ("message.send", ""),
            };
            let within = m.within.map_or(String::new(), |d| {
                format!(" within {}", duration(d.seconds))
            });
            let detail = format!("via {}{word} {}{within}", m.channel.name, object(&m.body));
            (kind.into(), b(&m.binding), detail)
        }
        StmtKind::Exec(x) => ("exec".into(), b(&x.binding), exec_detail(x)),
        StmtKind::Vote(v) => ("vote".into(), b(&v.binding), vote_detail(v)),
        _ => return None,
    })
}

/// The parts of a `tell` (`agent.tell`) or a `coerce` call (`schema.coerce`).
fn agent_effect_parts(k: &StmtKind) -> Option<(String, Option<String>, String)> {
    let b = |x: &Option<Ident>| x.as_ref().map(|i| i.name.clone());
    Some(match k {
        StmtKind::Tell(t) => ("agent.tell".into(), b(&t.binding), tell_detail(t)),
        StmtKind::Coerce(c) => {
            let args: Vec<String> = c.args.iter().map(expr).collect();
            let mut d = format!("{}({})", c.function.name, args.join(", "));
            if let Some(t) = c.timeout {
                let _ = write!(d, " timeout {}", duration(t.seconds));
            }
            ("schema.coerce".into(), b(&c.binding), d)
        }
        _ => return None,
    })
}

/// A `tell`'s target, modifiers and prompt in source form.
fn tell_detail(t: &Tell) -> String {
    let mut d = expr(&t.target);
    if let Some(x) = t.timeout {
        let _ = write!(d, " timeout {}", duration(x.seconds));
    }
    if !t.requires.is_empty() {
        let names: Vec<String> = t.requires.iter().map(|(c, _)| format!("{c:?}")).collect();
        let _ = write!(d, " requires [{}]", names.join(", "));
    }
    let _ = write!(d, " {:?}", t.prompt.value);
    d
}

/// `exec`'s clauses in source form.
fn exec_detail(x: &Exec) -> String {
    let mut d = expr(&x.argv);
    if let Some(cwd) = &x.cwd {
        let _ = write!(d, " cwd {}", expr(cwd));
    }
    if let Some(env) = &x.env {
        let _ = write!(d, " env {}", object(env));
    }
    if let Some(t) = x.timeout {
        let _ = write!(d, " timeout {}", duration(t.seconds));
    }
    if let Some(t) = &x.result {
        let _ = write!(d, " -> {}", type_text(t));
    }
    d
}

/// A type expression as written.
fn type_text(t: &TypeExpr) -> String {
    match &t.kind {
        TypeKind::Named(n) => n.clone(),
        TypeKind::Literal(s) => format!("{s:?}"),
        TypeKind::Array(i) => format!("{}[]", type_text(i)),
        TypeKind::Optional(i) => format!("{}?", type_text(i)),
        TypeKind::Map(i) => format!("map<{}>", type_text(i)),
        TypeKind::Union(ms) => ms.iter().map(type_text).collect::<Vec<_>>().join(" | "),
        TypeKind::AgentRef(agents) => {
            let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
            format!("AgentRef<{}>", names.join(" | "))
        }
    }
}

/// How `--explain` shows a `vote`: `in TEAM { … } closes D`.
fn vote_detail(v: &crate::syntax::ast::Vote) -> String {
    format!(
        "in {} {} closes {}",
        expr(&v.team),
        object(&v.body),
        duration(v.closes.seconds)
    )
}

/// A duration in its largest exact unit (`600` → `10m`).
pub fn duration(seconds: u64) -> String {
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if seconds.is_multiple_of(n) {
            return format!("{}{unit}", seconds / n);
        }
    }
    format!("{seconds}s")
}

fn dotted(p: &[Ident]) -> String {
    p.iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(".")
}

fn object(o: &ObjectLit) -> String {
    let fields: Vec<String> = o
        .fields
        .iter()
        .map(|(k, v)| format!("{} {}", k.name, expr(v)))
        .collect();
    if fields.is_empty() {
        "{}".into()
    } else {
        format!("{{ {} }}", fields.join(", "))
    }
}

/// An expression in canonical source form (fully parenthesized binary operations).
pub fn expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Path(p) => dotted(p),
        ExprKind::Str(s) => format!("{:?}", s.value),
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(v) => format!("{v:?}"),
        ExprKind::Bool(v) => v.to_string(),
        ExprKind::Null => "null".into(),
        ExprKind::Duration(s) => duration(*s),
        ExprKind::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(expr).collect::<Vec<_>>().join(", ")
            )
        }
        ExprKind::Object(o) => object(o),
        ExprKind::Unary(UnOp::Not, x) => format!("not {}", expr(x)),
        ExprKind::Unary(UnOp::Neg, x) => format!("-{}", expr(x)),
        ExprKind::Binary(op, l, r) => format!("({} {} {})", expr(l), op.text(), expr(r)),
        ExprKind::Call(f, args) => {
            format!(
                "{}({})",
                f.name,
                args.iter().map(expr).collect::<Vec<_>>().join(", ")
            )
        }
        ExprKind::Query(c, g) => match g {
            Some(g) => format!("{} where {}", c.name, expr(g)),
            None => c.name.clone(),
        },
        ExprKind::Index(base, key) => format!("{}[{}]", expr(base), expr(key)),
        ExprKind::EffectQuery(k, p, g) => {
            let mut s = format!("effect {}", k.name);
            if !p.is_empty() {
                s += &format!(" {}", dotted(p));
            }
            if let Some(g) = g {
                s += &format!(" where {}", expr(g));
            }
            s
        }
    }
}

impl Program {
    /// The text `whip check --explain` prints.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        for r in &self.agents {
            let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "{} {} {}", r.kind, r.name, params.join(" "));
        }
        for wf in &self.workflows {
            let root = if self.root.as_deref() == Some(&wf.name) {
                " (root)"
            } else {
                ""
            };
            let _ = writeln!(out, "workflow {}{root}", wf.name);
            for t in &wf.tags {
                let _ = writeln!(out, "  tag @{t}");
            }
            for (label, list) in [
                ("input", &wf.inputs),
                ("output", &wf.outputs),
                ("failure", &wf.failures),
            ] {
                for t in list {
                    let _ = writeln!(out, "  {label} {t}");
                }
            }
            for r in &wf.resources {
                let params: Vec<String> =
                    r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = writeln!(
                    out,
                    "  {} {} owner={} {}",
                    r.kind,
                    r.name,
                    r.owner,
                    params.join(" ")
                );
            }
            for t in &wf.tables {
                let _ = writeln!(
                    out,
                    "  table {} seeds {} x{}",
                    t.name,
                    t.class,
                    t.rows.len()
                );
            }
            for (i, r) in wf.rules.iter().enumerate() {
                explain_rule(&mut out, i, r);
            }
            for a in &wf.asserts {
                let _ = writeln!(out, "  assert {a}");
            }
        }
        out
    }
}

fn explain_rule(out: &mut String, i: usize, r: &RulePlan) {
    let tags: String = r.tags.iter().map(|t| format!(" @{t}")).collect();
    let _ = writeln!(out, "  rule #{i} {}{tags}", r.name);
    for (n, s) in r.join.iter().enumerate() {
        let b = s
            .binding
            .as_ref()
            .map_or(String::new(), |b| format!(" as {b}"));
        let c = if s.consumed { " (consumed)" } else { "" };
        let _ = writeln!(out, "    join {}: {}{b}{c}", n + 1, s.source);
        for g in &s.guards {
            let _ = writeln!(out, "      guard {g}");
        }
    }
    explain_nodes(out, &r.body, 4);
}

fn explain_nodes(out: &mut String, nodes: &[Node], indent: usize) {
    let pad = " ".repeat(indent);
    for n in nodes {
        match n {
            Node::Fact { op, detail } => {
                let _ = writeln!(out, "{pad}{op} {detail}");
            }
            Node::Terminal { op, name, payload } => {
                let _ = writeln!(out, "{pad}{op} {name} {payload}");
            }
            Node::Effect {
                id,
                kind,
                binding,
                detail,
            } => {
                let b = binding
                    .as_ref()
                    .map_or(String::new(), |b| format!(" as {b}"));
                let _ = writeln!(out, "{pad}effect {id} {kind} {detail}{b}");
            }
            Node::After {
                upstream,
                target,
                predicate,
                binding,
                from_then,
                body,
            } => {
                let b = binding
                    .as_ref()
                    .map_or(String::new(), |b| format!(" as {b}"));
                let t = if *from_then { " (from then)" } else { "" };
                let _ = writeln!(out, "{pad}after {upstream} ({target}) {predicate}{b}{t}");
                explain_nodes(out, body, indent + 2);
            }
            Node::Case { scrutinee, arms } => {
                let _ = writeln!(out, "{pad}case {scrutinee}");
                for (pattern, body) in arms {
                    let _ = writeln!(out, "{pad}  arm {pattern}");
                    explain_nodes(out, body, indent + 4);
                }
            }
        }
    }
}

/// The kinds a program may name in `effect kind K` queries, each with the runtime's code of
/// the rows it selects. Programs of the public language write dotted kinds (`lease.acquire`,
/// `timer.wait`); our own short names (`acquire`, `timer`) keep working. Several names may
/// select the same rows: a lease release and a tracker claim's release are one runtime kind.
/// `capability.call` is a known name whose statement (`send` on a messaging provider) this
/// engine does not run yet, so its queries select nothing.
pub const EFFECT_KIND_NAMES: &[(&str, &str)] = &[
    ("timer", "timer"),
    ("timer.wait", "timer"),
    ("invoke", "invoke"),
    ("workflow.invoke", "invoke"),
    ("acquire", "acquire"),
    ("lease.acquire", "acquire"),
    ("renew", "renew"),
    ("lease.renew", "renew"),
    ("release", "release"),
    ("lease.release", "release"),
    ("consume", "consume"),
    ("counter.consume", "consume"),
    ("append", "append"),
    ("ledger.append", "append"),
    ("file", "file_issue"),
    ("file_issue", "file_issue"),
    ("tracker.file", "file_issue"),
    ("claim", "claim"),
    ("tracker.claim", "claim"),
    ("tracker.release", "release"),
    ("tracker.renew", "renew"),
    ("finish", "finish"),
    ("tracker.finish", "finish"),
    ("send", "message.send"),
    ("message.send", "message.send"),
    ("ask", "message.ask"),
    ("message.ask", "message.ask"),
    ("vote", "vote"),
    ("exec", "exec"),
    ("script.exec", "exec"),
    ("agent.tell", "agent.tell"),
    ("schema.coerce", "schema.coerce"),
    ("capability.call", "capability.call"),
];

/// The runtime code of the effect kind a program writes, or `None` for an unknown name.
pub fn effect_kind_code(written: &str) -> Option<&'static str> {
    EFFECT_KIND_NAMES
        .iter()
        .find(|(name, _)| *name == written)
        .map(|(_, code)| *code)
}
