//! Agents and coercion (LANGUAGE-AGENTS.md §1, §2, §5): `agent` and `coerce` declarations,
//! `AgentRef<…>` types, the `tell` and `coerce` statements and the agent `when` lines, with
//! the diagnostics of §5 word for word.

use crate::check::cx::{Bind, Cx, Implicit};
use crate::check::model::{Agent, Coerce, Model, Wf, resolve_type};
use crate::check::suggest;
use crate::check::types::Ty;
use crate::diag::{Diag, Span};
use crate::limits::{AGENT_CAPACITY_DEFAULT, AGENT_PROFILE_DEFAULT, AGENT_PROVIDER_DEFAULT};
use crate::syntax::ast::*;

/// The agent provider kinds this engine knows (§4.2): its own harness, the fixture, and
/// `command` (which runs only on the fixture).
pub(crate) const PROVIDER_KINDS: &[&str] = &["owned", "fixture", "command"];

/// A declaration with the language's defaults written in.
pub(crate) fn declared(d: &AgentDecl) -> Agent {
    let capacity = d.capacity.map_or(AGENT_CAPACITY_DEFAULT, |c| {
        u32::try_from(c.value.max(1)).unwrap_or(u32::MAX)
    });
    Agent {
        decl: d.clone(),
        provider: d
            .providers
            .first()
            .map_or(AGENT_PROVIDER_DEFAULT.to_string(), |p| p.name.clone()),
        profile: d
            .profile
            .as_ref()
            .map_or(AGENT_PROFILE_DEFAULT.to_string(), |p| p.0.clone()),
        capacity,
    }
}

/// Resolves every `coerce` declaration's parameter and output types.
pub(crate) fn declare_coerces(items: &[Item], m: &mut Model, diags: &mut Vec<Diag>) {
    for item in items {
        let ItemKind::Coerce(d) = &item.kind else {
            continue;
        };
        let mut params: Vec<(String, Ty)> = Vec::new();
        for p in &d.params {
            if params.iter().any(|(n, _)| *n == p.name.name) {
                let msg = format!(
                    "coerce `{}` declares parameter `{}` more than once",
                    d.name.name, p.name.name
                );
                let help = "give each parameter its own name";
                diags.push(Diag::error("coerce.duplicate_param", p.name.span, msg).help(help));
                continue;
            }
            params.push((p.name.name.clone(), resolve_type(m, &p.ty, diags)));
        }
        let output = resolve_type(m, &d.output, diags);
        let coerce = Coerce {
            decl: d.clone(),
            params,
            output,
        };
        m.coerces.insert(d.name.name.clone(), coerce);
    }
}

/// `AgentRef<a | b>`: each name a declared agent, none twice.
pub(crate) fn agent_ref(m: &Model, agents: &[Ident], diags: &mut Vec<Diag>) -> Ty {
    let mut names: Vec<String> = Vec::new();
    for a in agents {
        if !m.agents.contains_key(&a.name) && !m.poisoned.contains(&a.name) {
            let msg = format!("AgentRef references unknown agent `{}`", a.name);
            let help = suggest::help(&a.name, m.agents.keys().map(String::as_str), AGENT_DECL);
            diags.push(Diag::error("agent.unknown", a.span, msg).help(help));
        }
        if names.contains(&a.name) {
            let msg = format!("AgentRef lists agent `{}` more than once", a.name);
            let help = "name each agent once";
            diags.push(Diag::error("agent.ref_duplicate", a.span, msg).help(help));
            continue;
        }
        names.push(a.name.clone());
    }
    Ty::AgentRef(names)
}

const AGENT_DECL: &str = "declare it: `agent name`";

/// The checks of every `agent` declaration: one provider of a known kind, a capacity above
/// zero, nothing listed twice, tools that are `@tool` workflows of the program.
pub(crate) fn declarations(m: &Model, diags: &mut Vec<Diag>) {
    for agent in m.agents.values() {
        let d = &agent.decl;
        let a = &d.name.name;
        if let Some(second) = d.providers.get(1) {
            let msg = format!("agent `{a}` declares provider more than once");
            let help = "keep one `provider` line";
            diags.push(Diag::error("agent.provider_twice", second.span, msg).help(help));
        }
        if let Some(p) = d.providers.first()
            && !PROVIDER_KINDS.contains(&p.name.as_str())
        {
            let msg = format!(
                "agent `{a}` uses unknown provider kind `{}`: no known package manifest \
                 contributes it (missing package)",
                p.name
            );
            let help = "the provider kinds are `owned` (the default), `fixture` and `command`";
            diags.push(Diag::error("agent.provider_kind", p.span, msg).help(help));
        }
        if let Some(c) = d.capacity.filter(|c| c.value < 1) {
            let msg = format!("agent `{a}` capacity must be greater than zero");
            let help = "write `capacity 1` or more";
            diags.push(Diag::error("agent.capacity", c.span, msg).help(help));
        }
        twice(a, "attaches skill", &d.skills, diags);
        twice(a, "declares capability", &d.capabilities, diags);
        let tools: Vec<(String, Span)> = d.tools.iter().map(|t| (t.name.clone(), t.span)).collect();
        twice(a, "grants tool", &tools, diags);
        for t in &d.tools {
            granted(m, a, t, diags);
        }
    }
}

fn twice(agent: &str, verb: &str, items: &[(String, Span)], diags: &mut Vec<Diag>) {
    for (i, (name, span)) in items.iter().enumerate() {
        if items[..i].iter().any(|(n, _)| n == name) {
            let msg = format!("agent `{agent}` {verb} `{name}` more than once");
            let help = "list each one once";
            diags.push(Diag::error("agent.duplicate", *span, msg).help(help));
        }
    }
}

fn granted(m: &Model, agent: &str, tool: &Ident, diags: &mut Vec<Diag>) {
    let w = &tool.name;
    let why = match m.workflow(w) {
        None => "is not a workflow in this program",
        Some(wf) if !wf.has_tag("tool") => "is not tagged `@tool`",
        Some(_) => return,
    };
    let msg = format!("agent `{agent}` is granted `{w}`: `{w}` {why}");
    let help = "grant workflows tagged `@tool` that this program declares";
    diags.push(Diag::error("agent.tool", tool.span, msg).help(help));
}

/// `R: can never fire: no rule creates an agent turn`: a rule waits for a turn of an agent
/// (`when A completed turn`, `when fact agent.turn.completed`) and no rule tells one.
pub(crate) fn turn_waiters(wf: &Wf, diags: &mut Vec<Diag>) {
    let tells = wf.rules.iter().any(|(_, r, _)| tells(&r.body));
    if tells {
        return;
    }
    for (_, r, _) in &wf.rules {
        for w in &r.whens {
            let waits = match &w.kind {
                WhenKind::CompletedTurn(_) => true,
                WhenKind::Runtime(p) => p.first().is_some_and(|x| x.name == "agent"),
                _ => false,
            };
            if waits {
                let msg = format!(
                    "rule `{}` can never fire: no rule creates an agent turn",
                    r.name.name
                );
                let help = "`when worker completed turn` and `when fact agent.turn.completed` \
                            follow a `tell` of some rule";
                diags.push(Diag::error("rule.never_fires", w.span, msg).help(help));
            }
        }
    }
}

fn tells(b: &Block) -> bool {
    b.stmts.iter().any(|s| {
        matches!(s.kind, StmtKind::Tell(_)) || s.kind.child_blocks().into_iter().any(tells)
    })
}

impl Cx<'_> {
    /// `tell TARGET … PROMPT`: a declared agent or an `AgentRef` path, capabilities the
    /// agent declares, prompt paths that read bound names.
    pub(crate) fn tell(&mut self, t: &Tell, span: Span) {
        let agents = self.tell_target(&t.target);
        for (c, cspan) in &t.requires {
            for a in &agents {
                let declares = self
                    .m
                    .agents
                    .get(a)
                    .is_some_and(|x| x.decl.capabilities.iter().any(|(n, _)| n == c));
                if !declares {
                    let msg = format!(
                        "{} tells agent `{a}` requiring undeclared capability `{c}`",
                        self.subject
                    );
                    let help = format!("declare it: `agent {a} {{ capabilities [\"{c}\"] }}`");
                    self.err("agent.capability", *cspan, msg, help);
                }
            }
        }
        self.prompt(&t.prompt, span);
    }

    /// The agents a tell target may name (empty when it is wrong, after reporting it).
    fn tell_target(&mut self, target: &Expr) -> Vec<String> {
        let segs = match &target.kind {
            ExprKind::Path(segs) => segs,
            _ => {
                let msg = format!("{} uses a string literal as a tell target", self.subject);
                let help = "name the agent: `tell writer \"…\"`";
                self.err("agent.tell_string", target.span, msg, help);
                return Vec::new();
            }
        };
        let shown = crate::ir::expr(target);
        let head = &segs[0];
        if self.lookup(&head.name).is_none() {
            if segs.len() == 1 && self.m.agents.contains_key(&head.name) {
                return vec![head.name.clone()];
            }
            if self.m.poisoned.contains(&head.name) {
                return Vec::new();
            }
            if segs.len() == 1 {
                let msg = format!("{} tells unknown agent `{}`", self.subject, head.name);
                let names = self.m.agents.keys().map(String::as_str);
                let help = suggest::help(&head.name, names, AGENT_DECL);
                self.err("agent.unknown", head.span, msg, help);
            } else {
                let msg = format!(
                    "{} has unknown binding `{}` in tell target `{shown}`",
                    self.subject, head.name
                );
                let help = "bind it with `when Class as name`";
                self.err("agent.tell_binding", head.span, msg, help);
            }
            return Vec::new();
        }
        match self.infer(target, Implicit::None) {
            Ty::AgentRef(agents) => agents,
            Ty::Optional(inner) if matches!(*inner, Ty::AgentRef(_)) => match *inner {
                Ty::AgentRef(agents) => agents,
                _ => Vec::new(),
            },
            _ => {
                let msg = format!(
                    "{} uses non-AgentRef dynamic tell target `{shown}`",
                    self.subject
                );
                let help = "a dynamic target is a field of type `AgentRef<a | b>`";
                self.err("agent.tell_dynamic", target.span, msg, help);
                Vec::new()
            }
        }
    }

    /// `{{ path }}` in a prompt: a path whose root is bound is checked as a field path; any
    /// other stays text.
    pub(crate) fn prompt(&mut self, s: &StrLit, span: Span) {
        for part in &s.parts {
            let StrPart::Path(p) = part else { continue };
            if self.lookup(&p[0]).is_some() {
                self.template_path(p, span, Implicit::None);
            }
        }
    }

    /// `coerce NAME(args…)`: a declared function, its arity, each argument's type.
    pub(crate) fn coerce_call(&mut self, c: &CoerceCall, span: Span) {
        let name = &c.function.name;
        let Some(f) = self.m.coerces.get(name).cloned() else {
            if !self.m.poisoned.contains(name) {
                let msg = format!("{} calls unknown coerce function `{name}`", self.subject);
                let names = self.m.coerces.keys().map(String::as_str);
                let help = suggest::help(name, names, "declare it: `coerce name(p T) -> T \"…\"`");
                self.err("coerce.unknown", c.function.span, msg, help);
            }
            return;
        };
        if c.args.len() != f.params.len() {
            let msg = format!(
                "{} calls coerce `{name}` with {} argument(s), expected {}",
                self.subject,
                c.args.len(),
                f.params.len()
            );
            let help = format!("pass one value per parameter of `{name}`");
            self.err("coerce.arity", span, msg, help);
        }
        for (arg, (p, ty)) in c.args.iter().zip(&f.params) {
            if let ExprKind::Path(segs) = &arg.kind
                && self.bare_unbound(arg, Implicit::None)
                && !self.m.agents.contains_key(&segs[0].name)
            {
                let msg = format!(
                    "{} has unknown binding `{}` in coerce `{name}` argument",
                    self.subject, segs[0].name
                );
                let help = "bind it with `when Class as name` or pass a literal";
                self.err("coerce.binding", arg.span, msg, help);
                continue;
            }
            self.value(arg, ty, &format!("coerce `{name}`.{p}"));
        }
    }

    /// `when AGENT completed turn` / `when AGENT is available` / `when PATH is available`.
    pub(crate) fn agent_when(&mut self, kind: &WhenKind) {
        let path = match kind {
            WhenKind::CompletedTurn(a) => std::slice::from_ref(a),
            WhenKind::Available(p) => p.as_slice(),
            _ => return,
        };
        let head = &path[0];
        let bound = self.lookup(&head.name).cloned();
        if bound.is_none() && path.len() == 1 {
            if !self.m.agents.contains_key(&head.name) && !self.m.poisoned.contains(&head.name) {
                let msg = format!("{} checks unknown agent `{}`", self.subject, head.name);
                let names = self.m.agents.keys().map(String::as_str);
                let help = suggest::help(&head.name, names, AGENT_DECL);
                self.err("agent.unknown", head.span, msg, help);
            }
            return;
        }
        let span = head.span.to(path[path.len() - 1].span);
        let ty = self.path(path, span, Implicit::None);
        let agent_ref = matches!(&ty, Ty::AgentRef(_) | Ty::Any)
            || matches!(&ty, Ty::Optional(t) if matches!(**t, Ty::AgentRef(_)));
        if !agent_ref || matches!(bound, Some(Bind::Effect(_))) {
            let shown: Vec<&str> = path.iter().map(|p| p.name.as_str()).collect();
            let msg = format!(
                "{} checks availability for non-AgentRef `{}`",
                self.subject,
                shown.join(".")
            );
            let help = "name an agent, or a field of type `AgentRef<a | b>`";
            self.err("agent.available_type", span, msg, help);
        }
    }
}
