//! The program model: declarations resolved, items assigned to workflows.

use std::collections::{BTreeMap, BTreeSet};

use crate::check::suggest;
use crate::check::types::{PRIMITIVES, Ty, primitive};
use crate::diag::{Diag, Span};
use crate::syntax::ast::*;

/// A class (or the inline shape of a contract).
#[derive(Debug, Clone)]
pub struct Class {
    /// Fields in declaration order.
    pub fields: Vec<(String, Ty)>,
    /// The declaration.
    pub span: Span,
}

/// A contract of a workflow: an input, output or failure.
#[derive(Debug, Clone)]
pub struct Terminal {
    /// The name (`result`, `error`, an input name).
    pub name: String,
    /// Its type.
    pub ty: Ty,
    /// The declaration.
    pub span: Span,
}

/// A coordination resource or tracker as one workflow sees it.
#[derive(Debug, Clone)]
pub struct Resource<T> {
    /// The declaration.
    pub decl: T,
    /// `local/<Workflow>` or `shared`.
    pub owner: String,
}

/// One workflow with everything it owns or sees.
#[derive(Debug, Clone)]
pub struct Wf {
    /// Its name.
    pub name: Ident,
    /// Its tags (`service`, `private`).
    pub tags: Vec<String>,
    /// Inputs (signature parameters and `input` contracts).
    pub inputs: Vec<Terminal>,
    /// Output terminals.
    pub outputs: Vec<Terminal>,
    /// Failure terminals.
    pub failures: Vec<Terminal>,
    /// Leases by name.
    pub leases: BTreeMap<String, Resource<LeaseDecl>>,
    /// Counters by name.
    pub counters: BTreeMap<String, Resource<CounterDecl>>,
    /// Ledgers by name.
    pub ledgers: BTreeMap<String, Resource<LedgerDecl>>,
    /// Trackers by name.
    pub trackers: BTreeMap<String, Resource<TrackerDecl>>,
    /// Mail channels by name.
    pub channels: BTreeMap<String, Resource<ChannelDecl>>,
    /// Tables.
    pub tables: Vec<Table>,
    /// Rules with their tags and whether the parser recovered inside them.
    pub rules: Vec<(Vec<String>, Rule, bool)>,
    /// Assertions.
    pub asserts: Vec<Expr>,
    /// Items not yet sorted (filled while building).
    items: Vec<Item>,
}

impl Wf {
    /// True when tagged `@name`.
    pub fn has_tag(&self, name: &str) -> bool {
        self.tags.iter().any(|t| t == name)
    }
}

/// The whole checked program.
#[derive(Debug, Default)]
pub struct Model {
    /// Classes by key (inline contract shapes are keyed `Workflow::name`).
    pub classes: BTreeMap<String, Class>,
    /// Enums and their variants.
    pub enums: BTreeMap<String, Vec<String>>,
    /// Workflows in declaration order.
    pub workflows: Vec<Wf>,
    /// Index of the root workflow, when one could be determined.
    pub root: Option<usize>,
    /// Names of declarations that failed to parse; references to them stay silent.
    pub poisoned: BTreeSet<String>,
    /// The modules the program's files `use` (`std.script`, …).
    pub uses: BTreeSet<String>,
    /// Declared agents by name (program-wide, wherever declared).
    pub agents: BTreeMap<String, Agent>,
    /// Declared coerce functions by name (program-wide).
    pub coerces: BTreeMap<String, Coerce>,
}

/// A declared agent with the language's defaults written in.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The declaration as written.
    pub decl: AgentDecl,
    /// Its provider kind (the first `provider`, or `owned`).
    pub provider: String,
    /// Its profile (or `no-repo`).
    pub profile: String,
    /// Turns of it that run at once per instance (at least 1).
    pub capacity: u32,
}

/// A declared coerce function with its types resolved.
#[derive(Debug, Clone)]
pub struct Coerce {
    /// The declaration as written.
    pub decl: CoerceDecl,
    /// Its parameters' names and types.
    pub params: Vec<(String, Ty)>,
    /// The type of its answer.
    pub output: Ty,
}

impl Model {
    /// The workflow named `name`.
    pub fn workflow(&self, name: &str) -> Option<&Wf> {
        self.workflows.iter().find(|w| w.name.name == name)
    }

    /// Names of user classes (not inline shapes), for suggestions.
    pub fn class_names(&self) -> impl Iterator<Item = &str> {
        self.classes
            .keys()
            .filter(|k| !k.contains("::"))
            .map(String::as_str)
    }
}

/// Splits items into workflows and declarations and resolves every declaration.
pub(crate) fn build(files: &[File], root: Option<&str>, diags: &mut Vec<Diag>) -> Model {
    let mut m = Model::default();
    for f in files {
        m.poisoned.extend(f.poisoned.iter().map(|i| i.name.clone()));
    }
    let mut global = Vec::new();
    split_items(&files[0].items, &mut m, &mut global);
    for f in &files[1..] {
        for item in &f.items {
            if !matches!(item.kind, ItemKind::Workflow(_) | ItemKind::Rule(_)) {
                global.push(item.clone());
            }
        }
    }
    pick_root(&mut m, root, diags);
    let all: Vec<Item> = global
        .iter()
        .chain(m.workflows.iter().flat_map(|w| w.items.iter()))
        .cloned()
        .collect();
    for item in &all {
        if let ItemKind::Agent(d) = &item.kind {
            m.agents
                .insert(d.name.name.clone(), crate::check::agents::declared(d));
        }
    }
    declare_types(&all, &mut m, diags);
    crate::check::agents::declare_coerces(&all, &mut m, diags);
    let (global_decls, global_rest): (Vec<Item>, Vec<Item>) =
        global.into_iter().partition(|i| is_resource(&i.kind));
    if let Some(target) = m.root.or(if m.workflows.is_empty() {
        None
    } else {
        Some(0)
    }) {
        m.workflows[target].items.extend(global_rest);
    }
    declare_inline_shapes(&mut m, diags);
    for i in 0..m.workflows.len() {
        let items = std::mem::take(&mut m.workflows[i].items);
        let mut wf = m.workflows[i].clone();
        sort_items(&m, &mut wf, &global_decls, &items, diags);
        m.workflows[i] = wf;
    }
    m
}

fn is_resource(k: &ItemKind) -> bool {
    matches!(
        k,
        ItemKind::Lease(_)
            | ItemKind::Counter(_)
            | ItemKind::Ledger(_)
            | ItemKind::Tracker(_)
            | ItemKind::Channel(_)
    )
}

fn new_wf(item: &Item, w: &Workflow) -> Wf {
    Wf {
        name: w.name.clone(),
        tags: item
            .tags
            .iter()
            .map(|t| t.name.trim_start_matches('@').to_string())
            .collect(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        failures: Vec::new(),
        leases: BTreeMap::new(),
        counters: BTreeMap::new(),
        ledgers: BTreeMap::new(),
        trackers: BTreeMap::new(),
        channels: BTreeMap::new(),
        tables: Vec::new(),
        rules: Vec::new(),
        asserts: Vec::new(),
        items: Vec::new(),
    }
}

/// Header-form workflows own the items after them; block-form ones own their block.
fn split_items(items: &[Item], m: &mut Model, global: &mut Vec<Item>) {
    let mut header: Option<usize> = None;
    for item in items {
        match &item.kind {
            ItemKind::Workflow(w) => {
                let mut wf = new_wf(item, w);
                wf.items.push(item.clone());
                match &w.body {
                    Some(body) => wf.items.extend(body.iter().cloned()),
                    None => header = Some(m.workflows.len()),
                }
                m.workflows.push(wf);
            }
            _ => match header {
                Some(h) => m.workflows[h].items.push(item.clone()),
                None => global.push(item.clone()),
            },
        }
    }
}

fn pick_root(m: &mut Model, root: Option<&str>, diags: &mut Vec<Diag>) {
    if let Some(name) = root {
        match m.workflows.iter().position(|w| w.name.name == name) {
            Some(i) => m.root = Some(i),
            None => {
                let names = m.workflows.iter().map(|w| w.name.name.as_str());
                let help =
                    suggest::help(name, names, "pass `--root` one of the declared workflows");
                let msg = format!("root workflow `{name}` is not declared");
                diags.push(Diag::error("program.unknown_root", Span::default(), msg).help(help));
            }
        }
        return;
    }
    match m.workflows.len() {
        0 => {
            let msg = "program declares no `workflow`";
            let help = "add `workflow Name` (a file without a workflow is a library for \
                        `include`)";
            diags.push(Diag::error("program.no_workflow", Span::default(), msg).help(help));
        }
        1 => m.root = Some(0),
        _ => {
            let span = m.workflows[1].name.span;
            let msg = "multiple workflow declarations require an explicit root";
            let help = "pass `--root <Workflow>` to choose the workflow `whip` starts";
            diags.push(Diag::error("program.multiple_workflows", span, msg).help(help));
        }
    }
}

fn declare_types(items: &[Item], m: &mut Model, diags: &mut Vec<Diag>) {
    let mut spans: BTreeMap<String, Span> = BTreeMap::new();
    let mut declare = |name: &Ident, kind: &str, diags: &mut Vec<Diag>| {
        if primitive(&name.name).is_some() || name.name == "map" {
            let msg = format!("{kind} `{}` shadows a built-in type", name.name);
            let help = "choose another name";
            diags.push(Diag::error("decl.builtin_name", name.span, msg).help(help));
            return false;
        }
        if spans.contains_key(&name.name) {
            let msg = format!("type `{}` is declared twice", name.name);
            let help = "rename or remove one of the two declarations";
            diags.push(Diag::error("decl.duplicate", name.span, msg).help(help));
            return false;
        }
        spans.insert(name.name.clone(), name.span);
        true
    };
    let mut classes = Vec::new();
    for item in items {
        match &item.kind {
            ItemKind::Class(c) if declare(&c.name, "class", diags) => classes.push(c),
            ItemKind::Enum(e) if declare(&e.name, "enum", diags) => {
                let variants = e.variants.iter().map(|v| v.name.clone()).collect();
                m.enums.insert(e.name.name.clone(), variants);
            }
            _ => {}
        }
    }
    for c in &classes {
        let placeholder = Class {
            fields: Vec::new(),
            span: c.name.span,
        };
        m.classes.insert(c.name.name.clone(), placeholder);
    }
    for c in classes {
        let fields = resolve_fields(m, &c.fields, diags);
        m.classes
            .get_mut(&c.name.name)
            .expect("declared above")
            .fields = fields;
    }
}

fn resolve_fields(m: &Model, fields: &[FieldDecl], diags: &mut Vec<Diag>) -> Vec<(String, Ty)> {
    let mut out: Vec<(String, Ty)> = Vec::new();
    for f in fields {
        if out.iter().any(|(n, _)| *n == f.name.name) {
            let msg = format!("field `{}` is declared twice", f.name.name);
            let help = "rename or remove one of the two fields";
            diags.push(Diag::error("decl.duplicate_field", f.name.span, msg).help(help));
            continue;
        }
        out.push((f.name.name.clone(), resolve_type(m, &f.ty, diags)));
    }
    out
}

/// Resolves a type expression; unknown names are reported and become `Any`.
pub(crate) fn resolve_type(m: &Model, t: &TypeExpr, diags: &mut Vec<Diag>) -> Ty {
    match &t.kind {
        TypeKind::Named(n) => {
            if let Some(p) = primitive(n) {
                p
            } else if m.classes.contains_key(n) {
                Ty::Class(n.clone())
            } else if m.enums.contains_key(n) {
                Ty::Enum(n.clone())
            } else {
                if !m.poisoned.contains(n) {
                    diags.push(unknown_schema(m, n, t.span));
                }
                Ty::Any
            }
        }
        TypeKind::Literal(s) => Ty::Lit(s.clone()),
        TypeKind::Array(i) => Ty::Array(Box::new(resolve_type(m, i, diags))),
        TypeKind::Optional(i) => Ty::Optional(Box::new(resolve_type(m, i, diags))),
        TypeKind::Map(i) => Ty::Map(Box::new(resolve_type(m, i, diags))),
        TypeKind::Union(ms) => Ty::Union(ms.iter().map(|i| resolve_type(m, i, diags)).collect()),
        TypeKind::AgentRef(agents) => crate::check::agents::agent_ref(m, agents, diags),
    }
}

/// `unknown schema reference `T`` with a suggestion.
pub(crate) fn unknown_schema(m: &Model, name: &str, span: Span) -> Diag {
    let names = m.class_names().chain(m.enums.keys().map(String::as_str));
    let names: Vec<&str> = names.chain(PRIMITIVES.iter().copied()).collect();
    let help = suggest::help(
        name,
        names,
        "declare it with `class` or `enum`, or include the \
                                           file that declares it",
    );
    Diag::error(
        "type.unknown_schema",
        span,
        format!("unknown schema reference `{name}`"),
    )
    .help(help)
}

fn sort_items(m: &Model, wf: &mut Wf, globals: &[Item], items: &[Item], diags: &mut Vec<Diag>) {
    let local = |i: &&Item| is_resource(&i.kind);
    for item in globals.iter().chain(items.iter().filter(local)) {
        add_resource(wf, item, diags);
    }
    for item in items {
        match &item.kind {
            ItemKind::Workflow(w) => {
                if let Some(sig) = &w.sig {
                    add_signature(m, wf, sig, diags);
                }
            }
            ItemKind::Contract(c) => add_contract(m, wf, c, diags),
            ItemKind::Table(t) => wf.tables.push(t.clone()),
            ItemKind::Rule(r) => {
                if wf.rules.iter().any(|(_, x, _)| x.name.name == r.name.name) {
                    let msg = format!("rule `{}` is declared twice", r.name.name);
                    let help = "rename one of the two rules";
                    diags.push(Diag::error("decl.duplicate_rule", r.name.span, msg).help(help));
                }
                let tags = item
                    .tags
                    .iter()
                    .map(|t| t.name.trim_start_matches('@').into());
                wf.rules.push((tags.collect(), r.clone(), item.recovered));
            }
            ItemKind::Assert(e) => wf.asserts.push(e.clone()),
            _ => {}
        }
    }
}

fn add_resource(wf: &mut Wf, item: &Item, diags: &mut Vec<Diag>) {
    let local = format!("local/{}", wf.name.name);
    let owner = |shared: bool| {
        if shared {
            "shared".to_string()
        } else {
            local.clone()
        }
    };
    let name = match &item.kind {
        ItemKind::Lease(d) => &d.name,
        ItemKind::Counter(d) => &d.name,
        ItemKind::Ledger(d) => &d.name,
        ItemKind::Tracker(d) => &d.name,
        ItemKind::Channel(d) => &d.name,
        _ => return,
    };
    let taken = wf.leases.contains_key(&name.name)
        || wf.counters.contains_key(&name.name)
        || wf.ledgers.contains_key(&name.name)
        || wf.trackers.contains_key(&name.name)
        || wf.channels.contains_key(&name.name);
    if taken {
        let msg = format!("resource `{}` is declared twice", name.name);
        let help = "leases, counters, ledgers and trackers share one namespace; rename one";
        diags.push(Diag::error("decl.duplicate_resource", name.span, msg).help(help));
        return;
    }
    let key = name.name.clone();
    match &item.kind {
        ItemKind::Lease(d) => drop(wf.leases.insert(key, resource(d, owner(d.shared)))),
        ItemKind::Counter(d) => drop(wf.counters.insert(key, resource(d, owner(d.shared)))),
        ItemKind::Ledger(d) => drop(wf.ledgers.insert(key, resource(d, owner(d.shared)))),
        ItemKind::Tracker(d) => drop(wf.trackers.insert(key, resource(d, owner(false)))),
        ItemKind::Channel(d) => drop(wf.channels.insert(key, resource(d, owner(false)))),
        _ => {}
    }
}

fn resource<T: Clone>(decl: &T, owner: String) -> Resource<T> {
    Resource {
        decl: decl.clone(),
        owner,
    }
}

fn add_signature(m: &Model, wf: &mut Wf, sig: &Signature, diags: &mut Vec<Diag>) {
    for p in &sig.params {
        let ty = resolve_type(m, &p.ty, diags);
        wf.inputs.push(Terminal {
            name: p.name.name.clone(),
            ty,
            span: p.name.span,
        });
    }
    if let Some(t) = &sig.output {
        let ty = resolve_type(m, t, diags);
        wf.outputs.push(Terminal {
            name: "result".into(),
            ty,
            span: t.span,
        });
    }
    if let Some(t) = &sig.failure {
        let ty = resolve_type(m, t, diags);
        wf.failures.push(Terminal {
            name: "error".into(),
            ty,
            span: t.span,
        });
    }
}

fn add_contract(m: &Model, wf: &mut Wf, c: &Contract, diags: &mut Vec<Diag>) {
    let ty = match &c.shape {
        Shape::Type(t) => resolve_type(m, t, diags),
        Shape::Fields(_) => Ty::Class(format!("{}::{}", wf.name.name, c.name.name)),
    };
    let list = match c.kind {
        ContractKind::Input => &mut wf.inputs,
        ContractKind::Output => &mut wf.outputs,
        ContractKind::Failure => &mut wf.failures,
    };
    if list.iter().any(|t| t.name == c.name.name) {
        let msg = format!("contract `{}` is declared twice", c.name.name);
        let help = "rename or remove one of the two contracts";
        diags.push(Diag::error("decl.duplicate_contract", c.name.span, msg).help(help));
        return;
    }
    list.push(Terminal {
        name: c.name.name.clone(),
        ty,
        span: c.name.span,
    });
}

/// Registers the inline shapes of contracts as classes keyed `Workflow::name`.
fn declare_inline_shapes(m: &mut Model, diags: &mut Vec<Diag>) {
    let mut shapes = Vec::new();
    for wf in &m.workflows {
        for item in &wf.items {
            if let ItemKind::Contract(c) = &item.kind
                && let Shape::Fields(fields) = &c.shape
            {
                let key = format!("{}::{}", wf.name.name, c.name.name);
                shapes.push((key, fields.clone(), c.name.span));
            }
        }
    }
    for (key, fields, span) in shapes {
        let resolved = resolve_fields(m, &fields, diags);
        m.classes.insert(
            key,
            Class {
                fields: resolved,
                span,
            },
        );
    }
}
