//! The typed AST. Every node carries the byte span it came from.

use serde::Serialize;

use crate::diag::Span;

/// A name with its span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ident {
    /// The text.
    pub name: String,
    /// Where.
    pub span: Span,
}

/// One parsed file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct File {
    /// Top-level items in source order.
    pub items: Vec<Item>,
    /// Names of declarations that failed to parse: references to them are not reported.
    pub poisoned: Vec<Ident>,
}

/// A top-level (or workflow-block) item with its tags.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// `@service`, `@external`, `@private`.
    pub tags: Vec<Ident>,
    /// What it declares.
    pub kind: ItemKind,
    /// From the first tag or keyword to the end.
    pub span: Span,
    /// True when the parser had to recover inside this item (its checks are muted).
    pub recovered: bool,
    /// `description "…"` written before it (metadata only).
    pub description: Option<String>,
}

/// The kinds of item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ItemKind {
    /// `use std.coord`
    Use(Vec<Ident>),
    /// `include "lib.whip"`
    Include(StrLit, Span),
    /// `workflow Name …`
    Workflow(Workflow),
    /// `input|output|failure name …`
    Contract(Contract),
    /// `class Name { … }`
    Class(ClassDecl),
    /// `enum Name { … }`
    Enum(EnumDecl),
    /// `table name as Class [ … ]`
    Table(Table),
    /// `rule name when … => { … }`
    Rule(Rule),
    /// `assert expr`
    Assert(Expr),
    /// `lease NAME { … }`
    Lease(LeaseDecl),
    /// `counter NAME { … }`
    Counter(CounterDecl),
    /// `ledger NAME { … }`
    Ledger(LedgerDecl),
    /// `tracker NAME [{ provider … }]`
    Tracker(TrackerDecl),
    /// `channel NAME { provider fabric [to …] }`
    Channel(ChannelDecl),
    /// `agent NAME [{ … }]`
    Agent(AgentDecl),
    /// `coerce NAME(p Type, …) -> Type "prompt"`
    Coerce(CoerceDecl),
}

/// `agent NAME [{ provider KIND; profile "P"; capacity N; tools [..]; capabilities [..];
/// skills [..] }]`: an agent turns are told to. A bare `agent NAME` is complete.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentDecl {
    /// Its name.
    pub name: Ident,
    /// `provider KIND` (each one written, so a second is reported).
    pub providers: Vec<Ident>,
    /// `profile "P"`.
    pub profile: Option<(String, Span)>,
    /// `capacity N`.
    pub capacity: Option<IntLit>,
    /// `tools [W, …]`: `@tool` workflows granted to its turns.
    pub tools: Vec<Ident>,
    /// `capabilities ["c", …]`.
    pub capabilities: Vec<(String, Span)>,
    /// `skills ["s", …]`.
    pub skills: Vec<(String, Span)>,
}

/// `coerce NAME(p Type, …) -> Type (STRING | { [provider NAME] prompt STRING })`: a typed
/// call to a model whose answer is checked against the output type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoerceDecl {
    /// Its name.
    pub name: Ident,
    /// Its parameters (`name Type`, no colon).
    pub params: Vec<FieldDecl>,
    /// The type of its answer.
    pub output: TypeExpr,
    /// `provider NAME` of the block form.
    pub provider: Option<Ident>,
    /// The prompt template.
    pub prompt: StrLit,
}

/// A workflow declaration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workflow {
    /// Its name.
    pub name: Ident,
    /// Optional signature.
    pub sig: Option<Signature>,
    /// `Some` for the block form; `None` for the header form (the rest of the file).
    pub body: Option<Vec<Item>>,
}

/// `(a: T, …) -> Out ! Err`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signature {
    /// Inputs.
    pub params: Vec<FieldDecl>,
    /// Output contract `result`.
    pub output: Option<TypeExpr>,
    /// Failure contract `error`.
    pub failure: Option<TypeExpr>,
}

/// Which side of a workflow a contract describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ContractKind {
    /// `input`
    Input,
    /// `output`
    Output,
    /// `failure`
    Failure,
}

/// `output result Done` or `input req { id string }`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contract {
    /// Input, output or failure.
    pub kind: ContractKind,
    /// The terminal or input name.
    pub name: Ident,
    /// Its type or inline fields.
    pub shape: Shape,
}

/// A named type or an inline field list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Shape {
    /// `Done`, `string`, …
    Type(TypeExpr),
    /// `{ note string }`
    Fields(Vec<FieldDecl>),
}

/// `name Type`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDecl {
    /// Field name.
    pub name: Ident,
    /// Field type.
    pub ty: TypeExpr,
}

/// `class Name { … }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassDecl {
    /// Its name.
    pub name: Ident,
    /// Its fields.
    pub fields: Vec<FieldDecl>,
}

/// `enum Name { A B }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnumDecl {
    /// Its name.
    pub name: Ident,
    /// Its variants.
    pub variants: Vec<Ident>,
}

/// A type expression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TypeExpr {
    /// Its shape.
    pub kind: TypeKind,
    /// Where.
    pub span: Span,
}

/// The shapes of a type expression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum TypeKind {
    /// `string`, `Deploy`, …
    Named(String),
    /// `"open"`
    Literal(String),
    /// `T[]`
    Array(Box<TypeExpr>),
    /// `T?`
    Optional(Box<TypeExpr>),
    /// `map<T>`
    Map(Box<TypeExpr>),
    /// `A | B`
    Union(Vec<TypeExpr>),
    /// `AgentRef<a | b>`: one of the declared agents named.
    AgentRef(Vec<Ident>),
}

/// `table name as Class [ {…} … ]`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    /// Its name.
    pub name: Ident,
    /// The class of its rows.
    pub class: Ident,
    /// The rows.
    pub rows: Vec<ObjectLit>,
}

/// A duration literal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Duration {
    /// In seconds.
    pub seconds: u64,
    /// Where.
    pub span: Span,
}

/// An integer with its span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IntLit {
    /// The value.
    pub value: i64,
    /// Where.
    pub span: Span,
}

/// `lease NAME { [shared] key Class [slots N] ttl D }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseDecl {
    /// Its name.
    pub name: Ident,
    /// Declared `shared`.
    pub shared: bool,
    /// `key`
    pub key: Option<Ident>,
    /// `slots`
    pub slots: Option<IntLit>,
    /// `ttl`
    pub ttl: Option<Duration>,
}

/// `counter NAME { [shared] key C cap N reset P [timezone "Z"] }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterDecl {
    /// Its name.
    pub name: Ident,
    /// Declared `shared`.
    pub shared: bool,
    /// `key`
    pub key: Option<Ident>,
    /// `cap`
    pub cap: Option<IntLit>,
    /// `reset`
    pub reset: Option<Ident>,
    /// `timezone` with the span of its string.
    pub timezone: Option<(String, Span)>,
}

/// `ledger NAME { [shared] entry C partition by F retain D }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerDecl {
    /// Its name.
    pub name: Ident,
    /// Declared `shared`.
    pub shared: bool,
    /// `entry`
    pub entry: Option<Ident>,
    /// `partition by`
    pub partition: Option<Ident>,
    /// `retain`
    pub retain: Option<Duration>,
}

/// `channel NAME { provider fabric [to agent|team|entry "X"] }`: a mail channel. Without a
/// `to` it only receives (the instance's own mailbox).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelDecl {
    /// Its name.
    pub name: Ident,
    /// `provider`, when given (`local`, `stdio`, `fixture`, `desktop` or `fabric`).
    pub provider: Option<Ident>,
    /// `agent`, `team` or `entry`, and the name (a `fabric` channel's recipient).
    pub to: Option<(Ident, StrLit)>,
    /// `destination "…"`: where an outside provider delivers (recorded in the receipt).
    pub destination: Option<StrLit>,
    /// `workspace IDENT`: metadata, recorded only.
    pub workspace: Option<Ident>,
}

impl ChannelDecl {
    /// The provider's name: the declared one, else `fabric` for a channel with a recipient
    /// (`to …`, ours), else `local` (LANGUAGE-AGENTS.md §1).
    pub fn provider_name(&self) -> &str {
        match (&self.provider, &self.to) {
            (Some(p), _) => &p.name,
            (None, Some(_)) => "fabric",
            (None, None) => "local",
        }
    }
}

/// `tracker NAME [{ provider P }]`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrackerDecl {
    /// Its name.
    pub name: Ident,
    /// `provider`, when given.
    pub provider: Option<Ident>,
}

/// `rule name when… => { … }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    /// Its name.
    pub name: Ident,
    /// The joined `when` lines.
    pub whens: Vec<When>,
    /// The body.
    pub body: Block,
}

/// One `when` line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct When {
    /// What it matches.
    pub kind: WhenKind,
    /// Optional binding.
    pub binding: Option<Ident>,
    /// Optional `where` guard.
    pub guard: Option<Expr>,
    /// The whole line.
    pub span: Span,
}

/// What a `when` line matches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum WhenKind {
    /// `when started`
    Started,
    /// `when Class`
    Fact(Ident),
    /// `when tracker has ready issue`
    ReadyIssue(Ident),
    /// `when fact timer.fired`
    Runtime(Vec<Ident>),
    /// `when message from CHANNEL`
    Message(Ident),
    /// `when AGENT completed turn`: an `agent.turn.completed` fact of that agent.
    CompletedTurn(Ident),
    /// `when AGENT is available` or `when PATH is available` (PATH an `AgentRef`): the
    /// agent's unsettled turns of this instance are fewer than its capacity.
    Available(Vec<Ident>),
}

/// `{ statement* }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Block {
    /// Statements in source order (order does not sequence effects).
    pub stmts: Vec<Stmt>,
    /// From `{` to `}`.
    pub span: Span,
}

/// A rule-body statement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stmt {
    /// What it does.
    pub kind: StmtKind,
    /// The statement (for blocks: up to the opening brace).
    pub span: Span,
}

/// Rule-body statements.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum StmtKind {
    /// `record Class { … }`
    Record(Ident, ObjectLit),
    /// `record Class from x [{ … }]`: a fact of `Class` whose fields come from the object
    /// `x`, with the fields of the optional object literal given over them.
    RecordFrom(RecordFrom),
    /// `cancel x`: cancel the effect bound as `x` (queued or blocked: cancelled; running: a
    /// cancel request; settled: nothing).
    Cancel(Ident),
    /// `done x [-> record Class {…}]`
    Done(Ident, Option<(Ident, ObjectLit)>),
    /// `complete NAME payload`
    Complete(Ident, Expr),
    /// `fail NAME payload`
    Fail(Ident, Expr),
    /// `timer D as t`
    Timer(Duration, Option<Ident>),
    /// `timer until ("ISO-8601 instant" | time path) as t`: due at the instant (a past one
    /// fires on the next pass).
    TimerUntil(Expr, Option<Ident>),
    /// `invoke Workflow { input {…} } as c`
    Invoke(Ident, ObjectLit, Option<Ident>),
    /// `after x PREDICATE [as y] { … }`
    After(After),
    /// `then y <- EFFECT` (removed by desugaring before checking)
    Then(Ident, Box<Stmt>),
    /// `acquire LEASE for KEY [until ttl] [wait D] as x`
    Acquire(Acquire),
    /// `release x`
    Release(Ident),
    /// `renew x [until D] as y`
    Renew(Ident, Option<Duration>, Option<Ident>),
    /// `consume COUNTER for KEY amount N as x`
    Consume(Consume),
    /// `append Class {…} to LEDGER [as x]`
    Append(Ident, ObjectLit, Ident, Option<Ident>),
    /// `file issue into TRACKER {…} [as x]`
    FileIssue(Ident, ObjectLit, Option<Ident>),
    /// `claim x [ttl D] as h`
    Claim(Ident, Option<Duration>, Option<Ident>),
    /// `finish x [{…}] [as y]`
    Finish(Ident, Option<ObjectLit>, Option<Ident>),
    /// `send via CHANNEL [ask|directive] { text … } [within D] [as x]`
    Send(Send),
    /// `exec ARGV [cwd DIR] [env { NAME value … }] [timeout D] as x` (`use std.script`)
    Exec(Exec),
    /// `vote in TEAM { title … options […] … } closes D as v`
    Vote(Vote),
    /// `tell TARGET [as x] [timeout D] [requires [..]] PROMPT`
    Tell(Tell),
    /// `coerce NAME(expr, …) [as x] [timeout D]`
    Coerce(CoerceCall),
    /// `case PATH { PATTERN [as y] [where expr] => { … } … }`
    Case(Case),
}

/// `tell TARGET MOD* PROMPT MOD*`: an agent turn (`agent.tell`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tell {
    /// An agent name or an `AgentRef` path.
    pub target: Expr,
    /// The prompt template.
    pub prompt: StrLit,
    /// `timeout D`: a longer turn ends `timed_out`.
    pub timeout: Option<Duration>,
    /// `requires ["c", …]`: capabilities the agent must declare.
    pub requires: Vec<(String, Span)>,
    /// `as x`
    pub binding: Option<Ident>,
}

/// `coerce NAME(expr, …) [as x] [timeout D]` (`schema.coerce`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoerceCall {
    /// The coerce declaration called.
    pub function: Ident,
    /// Its arguments, in parameter order.
    pub args: Vec<Expr>,
    /// `timeout D`
    pub timeout: Option<Duration>,
    /// `as x`
    pub binding: Option<Ident>,
}

/// `case PATH { arm … }`: the first arm whose pattern matches and whose guard holds runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Case {
    /// What is matched.
    pub scrutinee: Expr,
    /// The arms in order.
    pub arms: Vec<CaseArm>,
}

/// `PATTERN [as y] [where expr] => { … }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseArm {
    /// What it matches.
    pub pattern: Pattern,
    /// `as y`
    pub binding: Option<Ident>,
    /// `where expr`
    pub guard: Option<Expr>,
    /// The block.
    pub body: Block,
    /// The pattern (up to `=>`).
    pub span: Span,
}

/// A case pattern.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Pattern {
    /// `_` or `default`: anything.
    Wildcard,
    /// `"merge"`
    Str(String),
    /// `true` / `false`
    Bool(bool),
    /// A name: an enum variant, an agent, `None`, or a terminal tag (`Completed`, …).
    Name(String),
    /// `Some x`: an optional that holds a value, bound as `x`.
    Some(Ident),
}

impl Pattern {
    /// The pattern as written.
    pub fn text(&self) -> String {
        match self {
            Pattern::Wildcard => "_".into(),
            Pattern::Str(s) => format!("{s:?}"),
            Pattern::Bool(b) => b.to_string(),
            Pattern::Name(n) => n.clone(),
            Pattern::Some(x) => format!("Some {}", x.name),
        }
    }
}

/// `record Class from x [{ field value … }]`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordFrom {
    /// The class of the new fact.
    pub class: Ident,
    /// Where its fields come from: an object (a fact, an output, a nested value).
    pub source: Expr,
    /// Fields given over the source's.
    pub overrides: Option<ObjectLit>,
}

/// `exec ARGV [cwd DIR] [env { NAME value … }] [timeout D] [-> Type] as x`: a command run
/// through the compute plane (`whip executor`) in the instance's workspace. ARGV is an
/// array of strings or one command string (split into words, no shell).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exec {
    /// The program and its arguments: an array of strings.
    pub argv: Expr,
    /// A directory inside the workspace.
    pub cwd: Option<Expr>,
    /// Environment variables on top of the executor's fixed base.
    pub env: Option<ObjectLit>,
    /// Kill the run after this long.
    pub timeout: Option<Duration>,
    /// `-> Type`: the run's stdout is JSON of this type, the value `after x succeeds as v`
    /// binds.
    pub result: Option<TypeExpr>,
    /// `as x`
    pub binding: Option<Ident>,
}

/// `vote in TEAM { title "…" options ["a", "b"] [method "irv"] [quorum "1/2"]
/// [threshold "2/3"] [electorate ["coordinator", "worker"]] } closes D as v`: open a
/// proposal in the team and wait for its result (`passed`, `failed`, `no_quorum`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vote {
    /// The team (a string).
    pub team: Expr,
    /// The proposal's title, options and rules.
    pub body: ObjectLit,
    /// How long the proposal stays open.
    pub closes: Duration,
    /// `as v`
    pub binding: Option<Ident>,
}

/// What a `send` asks of its recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SendKind {
    /// Information (the default).
    Inform,
    /// A question awaiting a correlated reply (`after x replied`, `after x times out`).
    Ask,
    /// Re-tasks the recipient (delivered only from its authority).
    Directive,
}

/// `send via CHANNEL [ask|directive] { text … } [within D] [as x]`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Send {
    /// The channel.
    pub channel: Ident,
    /// Inform, ask or directive.
    pub kind: SendKind,
    /// `text`, `payload`, `thread`.
    pub body: ObjectLit,
    /// How long an ask waits for its reply.
    pub within: Option<Duration>,
    /// `as x`
    pub binding: Option<Ident>,
}

/// `after x PREDICATE [as y] { … }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct After {
    /// The effect binding it waits on.
    pub target: Ident,
    /// `succeeds`, `held`, `times out`, …
    pub predicate: Ident,
    /// `as y`
    pub binding: Option<Ident>,
    /// The block.
    pub body: Block,
    /// Made by desugaring a `then` step.
    pub from_then: bool,
}

/// `acquire LEASE for KEY [until ttl] [wait D] as x`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Acquire {
    /// The lease.
    pub lease: Ident,
    /// The key.
    pub key: Expr,
    /// `until ttl`
    pub until_ttl: bool,
    /// `wait D`
    pub wait: Option<Duration>,
    /// `as x`
    pub binding: Option<Ident>,
}

/// `consume COUNTER for KEY amount N as x`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consume {
    /// The counter.
    pub counter: Ident,
    /// The key.
    pub key: Expr,
    /// The amount.
    pub amount: Expr,
    /// `as x`
    pub binding: Option<Ident>,
}

/// A string literal with its `{{ path }}` parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrLit {
    /// The decoded (and for `"""` blocks, dedented) text.
    pub value: String,
    /// Literal text and interpolations.
    pub parts: Vec<StrPart>,
    /// First-line content type of a `"""` block, such as `markdown`.
    pub content_type: Option<String>,
}

/// A piece of a string literal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum StrPart {
    /// Plain text.
    Lit(String),
    /// `{{ a.b }}`
    Path(Vec<String>),
}

/// `{ field value … }`
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectLit {
    /// Fields in source order.
    pub fields: Vec<(Ident, Expr)>,
    /// From `{` to `}`.
    pub span: Span,
}

/// An expression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expr {
    /// Its shape.
    pub kind: ExprKind,
    /// Where.
    pub span: Span,
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum UnOp {
    /// `not` / `!`
    Not,
    /// `-`
    Neg,
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BinOp {
    /// `or` / `||`
    Or,
    /// `and` / `&&`
    And,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `in`
    In,
    /// `not in`
    NotIn,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

impl BinOp {
    /// The operator as written.
    pub fn text(self) -> &'static str {
        match self {
            BinOp::Or => "or",
            BinOp::And => "and",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::In => "in",
            BinOp::NotIn => "not in",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }
}

/// Expression shapes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ExprKind {
    /// `a.b.c`
    Path(Vec<Ident>),
    /// A string.
    Str(StrLit),
    /// An integer.
    Int(i64),
    /// A decimal.
    Float(f64),
    /// `true` / `false`
    Bool(bool),
    /// `null`
    Null,
    /// A duration, in seconds.
    Duration(u64),
    /// `[a, b]`
    Array(Vec<Expr>),
    /// `{ a 1 }`
    Object(ObjectLit),
    /// `not x`, `-x`
    Unary(UnOp, Box<Expr>),
    /// `a op b`
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `count(x)`
    Call(Ident, Vec<Expr>),
    /// `Class where expr` (live facts)
    Query(Ident, Option<Box<Expr>>),
    /// `effect kind [a.b] [where expr]` (effects of the instance)
    EffectQuery(Ident, Vec<Ident>, Option<Box<Expr>>),
    /// `m["k"]`: a map (or object) indexed by a string.
    Index(Box<Expr>, Box<Expr>),
}

impl StmtKind {
    /// The `as x` binding of an effect statement (`None` for other statements, and for an
    /// effect written without one).
    pub fn effect_binding(&self) -> Option<&Ident> {
        let binding = match self {
            StmtKind::Timer(_, b) | StmtKind::Invoke(_, _, b) | StmtKind::Renew(_, _, b) => b,
            StmtKind::TimerUntil(_, b) => b,
            StmtKind::Append(_, _, _, b) | StmtKind::FileIssue(_, _, b) => b,
            StmtKind::Claim(_, _, b) | StmtKind::Finish(_, _, b) => b,
            StmtKind::Acquire(a) => &a.binding,
            StmtKind::Consume(c) => &c.binding,
            StmtKind::Exec(x) => &x.binding,
            StmtKind::Vote(v) => &v.binding,
            StmtKind::Send(x) => &x.binding,
            StmtKind::Tell(t) => &t.binding,
            StmtKind::Coerce(c) => &c.binding,
            _ => return None,
        };
        binding.as_ref()
    }

    /// The binding slot of an effect statement (`None` for other statements).
    pub fn effect_binding_mut(&mut self) -> Option<&mut Option<Ident>> {
        Some(match self {
            StmtKind::Timer(_, b) | StmtKind::Invoke(_, _, b) | StmtKind::Renew(_, _, b) => b,
            StmtKind::TimerUntil(_, b) => b,
            StmtKind::Append(_, _, _, b) | StmtKind::FileIssue(_, _, b) => b,
            StmtKind::Claim(_, _, b) | StmtKind::Finish(_, _, b) => b,
            StmtKind::Acquire(a) => &mut a.binding,
            StmtKind::Consume(c) => &mut c.binding,
            StmtKind::Exec(x) => &mut x.binding,
            StmtKind::Vote(v) => &mut v.binding,
            StmtKind::Send(x) => &mut x.binding,
            StmtKind::Tell(t) => &mut t.binding,
            StmtKind::Coerce(c) => &mut c.binding,
            _ => return None,
        })
    }

    /// The blocks nested in this statement, in order: an `after`'s body, or each arm of a
    /// `case`. Walkers descend through these (and the effect numbering follows this order).
    pub fn child_blocks(&self) -> Vec<&Block> {
        match self {
            StmtKind::After(a) => vec![&a.body],
            StmtKind::Case(c) => c.arms.iter().map(|arm| &arm.body).collect(),
            _ => Vec::new(),
        }
    }
}

/// An `after x …` whose effect `x` no enclosing block starts: it waits on an effect started
/// inside another `after` block of the same rule (LANGUAGE-AGENTS.md §2: "`after x …` may
/// sit in any block of the rule").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoistedAfter {
    /// Statement indices from the rule body down to the `after` statement; a `case` adds
    /// its statement index and then the arm's index.
    pub path: Vec<usize>,
    /// The effect binding it waits on.
    pub target: String,
}

impl Block {
    /// The `after` statements of this rule body whose target no enclosing block binds.
    pub fn hoisted_afters(&self) -> Vec<HoistedAfter> {
        let mut out = Vec::new();
        hoisted_in(self, &mut Vec::new(), &mut Vec::new(), &mut out);
        out
    }

    /// Every effect binding started anywhere in this block, nested `after` blocks included.
    pub fn effect_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.stmts {
            if let Some(b) = s.kind.effect_binding() {
                out.push(b.name.clone());
            }
            for b in s.kind.child_blocks() {
                out.extend(b.effect_names());
            }
        }
        out
    }

    /// The statement at `path` (see [`Block::hoisted_afters`] for the path's form).
    pub fn stmt_at(&self, path: &[usize]) -> Option<&Stmt> {
        let (first, rest) = path.split_first()?;
        let stmt = self.stmts.get(*first)?;
        match (&stmt.kind, rest) {
            (_, []) => Some(stmt),
            (StmtKind::After(a), rest) => a.body.stmt_at(rest),
            (StmtKind::Case(c), [arm, rest @ ..]) => c.arms.get(*arm)?.body.stmt_at(rest),
            _ => None,
        }
    }
}

fn hoisted_in(
    b: &Block,
    path: &mut Vec<usize>,
    bound: &mut Vec<String>,
    out: &mut Vec<HoistedAfter>,
) {
    let mark = bound.len();
    bound.extend(
        b.stmts
            .iter()
            .filter_map(|s| s.kind.effect_binding().map(|i| i.name.clone())),
    );
    for (i, s) in b.stmts.iter().enumerate() {
        path.push(i);
        match &s.kind {
            StmtKind::After(a) => {
                if !bound.contains(&a.target.name) {
                    out.push(HoistedAfter {
                        path: path.clone(),
                        target: a.target.name.clone(),
                    });
                }
                hoisted_in(&a.body, path, bound, out);
            }
            StmtKind::Case(c) => {
                for (j, arm) in c.arms.iter().enumerate() {
                    path.push(j);
                    hoisted_in(&arm.body, path, bound, out);
                    path.pop();
                }
            }
            _ => {}
        }
        path.pop();
    }
    bound.truncate(mark);
}
