//! The parser: tokens to AST, recovering at the next statement or top-level item.
//!
//! Every parse function returns `Err(Fail)` after reporting exactly one diagnostic (or none,
//! when the lexer already reported the token at fault); the caller skips to a recovery point
//! at its own bracket depth, so one malformed declaration yields one error.

use crate::diag::{Diag, Span};
use crate::limits;
use crate::syntax::ast::*;
use crate::syntax::lexer::{Tok, Token};

mod agents;

/// A failure that was already reported.
#[derive(Debug)]
struct Fail;

type R<T> = Result<T, Fail>;

/// Words that start a top-level item.
pub const ITEM_KEYWORDS: &[&str] = &[
    "use",
    "include",
    "workflow",
    "input",
    "output",
    "failure",
    "class",
    "enum",
    "table",
    "assert",
    "rule",
    "lease",
    "counter",
    "ledger",
    "tracker",
    "channel",
    "description",
    "agent",
    "coerce",
];

/// The declarations a `description "…"` may precede (LANGUAGE-AGENTS.md §1).
const DESCRIBED: &[&str] = &["workflow", "rule", "table", "assert"];

/// Words that start a rule-body statement.
pub const STATEMENT_KEYWORDS: &[&str] = &[
    "record", "done", "complete", "fail", "timer", "invoke", "after", "then", "acquire", "release",
    "renew", "consume", "append", "file", "claim", "finish", "send", "exec", "vote", "cancel",
    "tell", "coerce", "case",
];

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    diags: &'a mut Vec<Diag>,
    nesting: u32,
    /// Set when the current item needed recovery.
    recovered: bool,
    /// Name of the item being parsed, once known.
    current_name: Option<Ident>,
    /// Names of items that failed to parse.
    poisoned: Vec<Ident>,
}

/// Parses a token stream produced by [`crate::syntax::lexer::lex`].
pub fn parse(src: &str, _file: u32, toks: Vec<Token>, diags: &mut Vec<Diag>) -> File {
    let mut p = Parser {
        src,
        toks,
        pos: 0,
        diags,
        nesting: 0,
        recovered: false,
        current_name: None,
        poisoned: Vec::new(),
    };
    let items = p.items(None);
    File {
        items,
        poisoned: p.poisoned,
    }
}

impl Parser<'_> {
    // ---- token access -------------------------------------------------------------------

    fn peek(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek_at(&self, n: usize) -> &Token {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)]
    }

    fn text(&self, t: &Token) -> &str {
        &self.src[t.span.start as usize..t.span.end as usize]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }

    fn at_kw(&self, kw: &str) -> bool {
        let t = self.peek();
        t.tok == Tok::Ident && self.text(t) == kw
    }

    fn at(&self, tok: &Tok) -> bool {
        &self.peek().tok == tok
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        let hit = self.at_kw(kw);
        if hit {
            self.bump();
        }
        hit
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        let hit = self.at(tok);
        if hit {
            self.bump();
        }
        hit
    }

    fn found(&self) -> String {
        let t = self.peek();
        match t.tok {
            Tok::Eof => "end of file".into(),
            Tok::Str(_) => "a string".into(),
            _ => {
                let text: String = self.text(t).chars().take(40).collect();
                format!("`{text}`")
            }
        }
    }

    // ---- errors -------------------------------------------------------------------------

    /// Reports at the current token unless the lexer already reported it.
    fn fail(&mut self, code: &'static str, msg: String, help: &str) -> Fail {
        let span = self.peek().span;
        self.fail_at(span, code, msg, help)
    }

    fn fail_at(&mut self, span: Span, code: &'static str, msg: String, help: &str) -> Fail {
        self.recovered = true;
        if self.peek().tok != Tok::Error {
            self.diags.push(Diag::error(code, span, msg).help(help));
        }
        Fail
    }

    fn expected(&mut self, what: &str, help: &str) -> Fail {
        let msg = format!("expected {what}, found {}", self.found());
        self.fail("syntax.expected", msg, help)
    }

    fn expect(&mut self, tok: Tok, what: &str, help: &str) -> R<Span> {
        if self.at(&tok) {
            Ok(self.bump().span)
        } else {
            Err(self.expected(what, help))
        }
    }

    fn expect_kw(&mut self, kw: &str, help: &str) -> R<Span> {
        if self.at_kw(kw) {
            Ok(self.bump().span)
        } else {
            Err(self.expected(&format!("`{kw}`"), help))
        }
    }

    fn ident(&mut self, what: &str, help: &str) -> R<Ident> {
        if self.at(&Tok::Ident) {
            let t = self.bump();
            Ok(Ident {
                name: self.text(&t).to_string(),
                span: t.span,
            })
        } else {
            Err(self.expected(what, help))
        }
    }

    /// A top-level name: an identifier that may also contain `-` (`deploy-api`).
    fn item_name(&mut self, what: &str, help: &str) -> R<Ident> {
        let mut id = self.ident(what, help)?;
        while self.at(&Tok::Minus)
            && self.peek().span.start == id.span.end
            && self.peek_at(1).tok == Tok::Ident
            && self.peek_at(1).span.start == self.peek().span.end
        {
            self.bump();
            let part = self.bump();
            id.name.push('-');
            id.name.push_str(self.text(&part));
            id.span = id.span.to(part.span);
        }
        Ok(id)
    }

    fn enter(&mut self) -> R<()> {
        self.nesting += 1;
        if self.nesting > limits::NESTING_DEPTH_MAX {
            let msg = format!(
                "nesting is deeper than {} levels",
                limits::NESTING_DEPTH_MAX
            );
            return Err(self.fail(
                "syntax.nesting",
                msg,
                "split the construct into smaller parts",
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting -= 1;
    }

    fn at_line_start_column_one(&self) -> bool {
        let start = self.peek().span.start as usize;
        start == 0 || self.src.as_bytes()[start - 1] == b'\n'
    }

    /// Skips to the next item keyword at `depth` (or at column one), or to the `}` that
    /// closes the enclosing block.
    fn recover_item(&mut self, depth: u32) {
        self.bump();
        loop {
            let t = self.peek();
            match t.tok {
                Tok::Eof => return,
                Tok::RBrace if t.depth < depth => return,
                Tok::Ident | Tok::At if t.nl_before => {
                    let word = self.text(t);
                    let starts = t.tok == Tok::At || ITEM_KEYWORDS.contains(&word);
                    if starts && (t.depth <= depth || self.at_line_start_column_one()) {
                        return;
                    }
                }
                _ => {}
            }
            self.bump();
        }
    }

    /// Skips to the next statement keyword on a new line inside the block at `depth`.
    fn recover_stmt(&mut self, depth: u32) {
        self.bump();
        loop {
            let t = self.peek();
            match t.tok {
                Tok::Eof => return,
                Tok::RBrace if t.depth < depth => return,
                Tok::Ident if t.nl_before && t.depth <= depth => {
                    let word = self.text(t);
                    if STATEMENT_KEYWORDS.contains(&word) || ITEM_KEYWORDS.contains(&word) {
                        return;
                    }
                }
                _ => {}
            }
            self.bump();
        }
    }

    // ---- items --------------------------------------------------------------------------

    /// Items until end of file, or until the `}` of a workflow block opened at `block`.
    fn items(&mut self, block: Option<Span>) -> Vec<Item> {
        let mut items = Vec::new();
        let depth = self.peek().depth;
        loop {
            match self.peek().tok {
                Tok::Eof => {
                    if let Some(open) = block {
                        let help = "add the closing `}` of the workflow block";
                        let msg = "unclosed workflow block".to_string();
                        self.diags
                            .push(Diag::error("syntax.unclosed", open, msg).help(help));
                    }
                    return items;
                }
                Tok::RBrace if block.is_some() => return items,
                _ => {}
            }
            if self.trailing_description() {
                continue;
            }
            let start = self.pos;
            self.recovered = false;
            self.current_name = None;
            match self.item() {
                Ok(item) => items.push(item),
                Err(Fail) => {
                    if let Some(name) = self.current_name.take() {
                        self.poisoned.push(name);
                    }
                    self.recover_item(depth);
                }
            }
            if self.pos == start {
                self.bump();
            }
        }
    }

    fn named(&mut self, what: &str, help: &str) -> R<Ident> {
        let name = self.item_name(what, help)?;
        self.current_name = Some(name.clone());
        Ok(name)
    }

    fn item(&mut self) -> R<Item> {
        let start = self.peek().span;
        let description = self.description()?;
        let mut tags = Vec::new();
        while self.at(&Tok::At) {
            let at = self.bump().span;
            let mut tag = self.ident(
                "a tag name",
                "tags are `@service`, `@external`, `@private`, `@tool`",
            )?;
            tag.span = at.to(tag.span);
            tags.push(tag);
        }
        let help = "a top-level item starts with `workflow`, `class`, `enum`, `rule`, `table`, \
                    `lease`, `counter`, `ledger`, `tracker`, `input`, `output`, `failure`, \
                    `assert`, `use` or `include`";
        if !self.at(&Tok::Ident) {
            return Err(self.expected("a declaration", help));
        }
        let kw = self.text(self.peek()).to_string();
        if let Some((_, span)) = &description
            && !DESCRIBED.contains(&kw.as_str())
        {
            let msg = format!("description cannot be attached to {kw}");
            let help = "a description goes right before a workflow, a rule, a table or an assert";
            let d = Diag::error("syntax.description", *span, msg).help(help);
            self.diags.push(d);
        }
        let kind = match kw.as_str() {
            "use" => self.use_item()?,
            "include" => self.include_item()?,
            "workflow" => ItemKind::Workflow(self.workflow()?),
            "input" | "output" | "failure" => ItemKind::Contract(self.contract()?),
            "class" => ItemKind::Class(self.class()?),
            "enum" => ItemKind::Enum(self.enum_decl()?),
            "table" => ItemKind::Table(self.table()?),
            "assert" => {
                self.bump();
                ItemKind::Assert(self.expr()?)
            }
            "rule" => ItemKind::Rule(self.rule()?),
            "lease" | "counter" | "ledger" => self.resource(&kw)?,
            "tracker" => ItemKind::Tracker(self.tracker()?),
            "channel" => ItemKind::Channel(self.channel()?),
            "agent" => ItemKind::Agent(self.agent()?),
            "coerce" => ItemKind::Coerce(self.coerce_decl()?),
            "harness" | "prompt" | "decide" => {
                let word = self.ident("a declaration", help)?;
                return Err(self.outside(&word));
            }
            _ => {
                let msg = format!("unknown declaration `{kw}`");
                let help = match crate::check::suggest::best(&kw, ITEM_KEYWORDS.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => help.to_string(),
                };
                return Err(self.fail("syntax.declaration", msg, &help));
            }
        };
        let span = start.to(self.prev_span());
        Ok(Item {
            tags,
            kind,
            span,
            recovered: self.recovered,
            description: description.map(|(text, _)| text),
        })
    }

    /// `description "…"` lines before a declaration: the last one is its description; an
    /// earlier one, or one that nothing follows, is attached to no declaration.
    fn description(&mut self) -> R<Option<(String, Span)>> {
        let mut found: Option<(String, Span)> = None;
        while self.at_kw("description") && matches!(self.peek_at(1).tok, Tok::Str(_)) {
            let start = self.bump().span;
            let t = self.bump().clone();
            let Tok::Str(lit) = t.tok else {
                unreachable!("peeked a string");
            };
            if let Some((_, earlier)) = found.replace((lit.value, start.to(t.span))) {
                self.description_unattached(earlier);
            }
        }
        Ok(found)
    }

    /// `description "…"` lines that end the file or a workflow block describe nothing:
    /// reported and skipped, so the end is read as usual.
    fn trailing_description(&mut self) -> bool {
        let mut n = 0;
        loop {
            let t = self.peek_at(n);
            let description = t.tok == Tok::Ident && self.text(t) == "description";
            if !(description && matches!(self.peek_at(n + 1).tok, Tok::Str(_))) {
                break;
            }
            n += 2;
        }
        if n == 0 || !matches!(self.peek_at(n).tok, Tok::Eof | Tok::RBrace) {
            return false;
        }
        for _ in 0..n / 2 {
            let start = self.bump().span;
            let end = self.bump().span;
            self.description_unattached(start.to(end));
        }
        true
    }

    fn description_unattached(&mut self, span: Span) {
        let msg = "description is not attached to a declaration".to_string();
        let help = "keep one `description \"…\"` line right before the declaration it describes";
        let d = Diag::error("syntax.description", span, msg).help(help);
        self.diags.push(d);
    }

    fn use_item(&mut self) -> R<ItemKind> {
        self.bump();
        let mut path =
            vec![self.ident("a module path such as `std.coord`", "write `use std.coord`")?];
        while self.eat(&Tok::Dot) {
            path.push(self.ident("a module name", "write `use std.coord`")?);
        }
        Ok(ItemKind::Use(path))
    }

    fn include_item(&mut self) -> R<ItemKind> {
        self.bump();
        let t = self.peek().clone();
        match t.tok {
            Tok::Str(lit) => {
                self.bump();
                Ok(ItemKind::Include(lit, t.span))
            }
            _ => Err(self.expected("a quoted path", "write `include \"lib.whip\"`")),
        }
    }

    fn workflow(&mut self) -> R<Workflow> {
        self.bump();
        let help = "write `workflow Name` or `workflow Name { … }`";
        let name = self.named("a workflow name", help)?;
        let sig = if self.at(&Tok::LParen) {
            Some(self.signature()?)
        } else {
            None
        };
        let body = if self.at(&Tok::LBrace) {
            let open = self.bump().span;
            let items = self.items(Some(open));
            self.expect(Tok::RBrace, "`}`", "close the workflow block")?;
            Some(items)
        } else {
            None
        };
        Ok(Workflow { name, sig, body })
    }

    fn signature(&mut self) -> R<Signature> {
        let help = "a signature is `(name: Type, …) -> Output ! Failure`";
        self.bump();
        let mut params = Vec::new();
        while !self.eat(&Tok::RParen) {
            let name = self.ident("a parameter name", help)?;
            self.expect(Tok::Colon, "`:`", help)?;
            params.push(FieldDecl {
                name,
                ty: self.type_expr()?,
            });
            if !self.eat(&Tok::Comma) && !self.at(&Tok::RParen) {
                return Err(self.expected("`,` or `)`", help));
            }
        }
        let output = if self.eat(&Tok::Arrow) {
            Some(self.type_expr()?)
        } else {
            None
        };
        let failure = if self.eat(&Tok::Bang) {
            Some(self.type_expr()?)
        } else {
            None
        };
        Ok(Signature {
            params,
            output,
            failure,
        })
    }

    fn contract(&mut self) -> R<Contract> {
        let kw = self.bump();
        let kind = match self.text(&kw) {
            "input" => ContractKind::Input,
            "output" => ContractKind::Output,
            _ => ContractKind::Failure,
        };
        let help = "write `output result Done` or `input request { id string }`";
        let name = self.named("a contract name", help)?;
        let shape = if self.at(&Tok::LBrace) {
            Shape::Fields(self.field_block()?)
        } else {
            Shape::Type(self.type_expr()?)
        };
        Ok(Contract { kind, name, shape })
    }

    fn class(&mut self) -> R<ClassDecl> {
        self.bump();
        let name = self.named("a class name", "write `class Name { field Type … }`")?;
        let fields = self.field_block()?;
        Ok(ClassDecl { name, fields })
    }

    /// `{ (name Type ,?)* }`, recovering per field line.
    fn field_block(&mut self) -> R<Vec<FieldDecl>> {
        let help = "a field is `name Type`, such as `service string`";
        self.expect(Tok::LBrace, "`{`", help)?;
        let depth = self.peek().depth;
        let mut fields = Vec::new();
        while !self.eat(&Tok::RBrace) {
            if self.at(&Tok::Eof) {
                return Err(self.expected("`}`", "close the field block"));
            }
            let start = self.pos;
            match self.field_decl(help) {
                Ok(f) => fields.push(f),
                Err(Fail) => self.skip_line(depth),
            }
            self.eat(&Tok::Comma);
            if self.pos == start {
                self.bump();
            }
        }
        Ok(fields)
    }

    fn field_decl(&mut self, help: &str) -> R<FieldDecl> {
        let name = self.ident("a field name", help)?;
        self.eat(&Tok::Colon);
        Ok(FieldDecl {
            name,
            ty: self.type_expr()?,
        })
    }

    /// Skips the rest of the current line inside a block at `depth`.
    fn skip_line(&mut self, depth: u32) {
        self.bump();
        while !self.at(&Tok::Eof) {
            let t = self.peek();
            if (t.nl_before && t.depth <= depth) || (t.tok == Tok::RBrace && t.depth < depth) {
                return;
            }
            self.bump();
        }
    }

    fn enum_decl(&mut self) -> R<EnumDecl> {
        self.bump();
        let help = "write `enum Name { VariantA VariantB }`";
        let name = self.named("an enum name", help)?;
        self.expect(Tok::LBrace, "`{`", help)?;
        let mut variants = Vec::new();
        while !self.eat(&Tok::RBrace) {
            variants.push(self.ident("a variant name", help)?);
            self.eat(&Tok::Comma);
        }
        Ok(EnumDecl { name, variants })
    }

    fn table(&mut self) -> R<Table> {
        self.bump();
        let help = "write `table name as Class [ { field value … } … ]`";
        let name = self.named("a table name", help)?;
        self.expect_kw("as", help)?;
        let class = self.ident("a class name", help)?;
        self.expect(Tok::LBracket, "`[`", help)?;
        let mut rows = Vec::new();
        while !self.eat(&Tok::RBracket) {
            if !self.at(&Tok::LBrace) {
                return Err(self.expected("`{` or `]`", help));
            }
            rows.push(self.object()?);
            self.eat(&Tok::Comma);
        }
        Ok(Table { name, class, rows })
    }

    fn tracker(&mut self) -> R<TrackerDecl> {
        self.bump();
        let help = "write `tracker name` or `tracker name { provider builtin }`";
        let name = self.named("a tracker name", help)?;
        let mut provider = None;
        if self.eat(&Tok::LBrace) {
            while !self.eat(&Tok::RBrace) {
                let field = self.ident("`provider`", help)?;
                if field.name != "provider" {
                    let msg = format!("unknown tracker field `{}`", field.name);
                    return Err(self.fail_at(field.span, "decl.unknown_field", msg, help));
                }
                provider = Some(self.ident("a provider name", help)?);
            }
        }
        Ok(TrackerDecl { name, provider })
    }

    fn channel(&mut self) -> R<ChannelDecl> {
        self.bump();
        let help = concat!(
            "write `channel name`, `channel name { provider local|stdio|fixture }` or ",
            "`channel name { provider fabric to agent \"name\" }` (or `to team`, `to entry`; ",
            "a fabric channel without `to` only receives)"
        );
        let name = self.named("a channel name", help)?;
        let mut decl = ChannelDecl {
            name,
            provider: None,
            to: None,
            destination: None,
            workspace: None,
        };
        // A bare `channel NAME` is complete.
        if !self.eat(&Tok::LBrace) {
            return Ok(decl);
        }
        while !self.eat(&Tok::RBrace) {
            let field = self.ident("`provider`, `destination`, `workspace` or `to`", help)?;
            match field.name.as_str() {
                "provider" => decl.provider = Some(self.ident("a provider name", help)?),
                "workspace" => decl.workspace = Some(self.ident("a workspace name", help)?),
                "destination" => {
                    decl.destination = Some(self.str_lit("a quoted destination", help)?)
                }
                "to" => {
                    let kind = self.ident("`agent`, `team` or `entry`", help)?;
                    decl.to = Some((kind, self.str_lit("a quoted name", help)?));
                }
                _ => {
                    let msg = format!("unknown channel field `{}`", field.name);
                    return Err(self.fail_at(field.span, "decl.unknown_field", msg, help));
                }
            }
        }
        Ok(decl)
    }

    // ---- coordination declarations ----------------------------------------------------

    fn resource(&mut self, kw: &str) -> R<ItemKind> {
        self.bump();
        let help = resource_help(kw);
        let name = self.named(&format!("a {kw} name"), help)?;
        self.expect(Tok::LBrace, "`{`", help)?;
        let depth = self.peek().depth;
        let mut clauses: Vec<(Ident, Clause)> = Vec::new();
        while !self.eat(&Tok::RBrace) {
            if self.at(&Tok::Eof) {
                return Err(self.expected("`}`", help));
            }
            let start = self.pos;
            match self.clause(kw, &name, &clauses) {
                Ok(c) => clauses.push(c),
                Err(Fail) => self.skip_line(depth),
            }
            if self.pos == start {
                self.bump();
            }
        }
        Ok(build_resource(kw, name, clauses))
    }

    fn clause(&mut self, kw: &str, name: &Ident, seen: &[(Ident, Clause)]) -> R<(Ident, Clause)> {
        let help = resource_help(kw);
        let field = self.ident("a declaration clause", help)?;
        let allowed = match kw {
            "lease" => &["shared", "key", "slots", "ttl"][..],
            "counter" => &["shared", "key", "cap", "reset", "timezone"][..],
            _ => &["shared", "entry", "partition", "retain"][..],
        };
        if !allowed.contains(&field.name.as_str()) {
            let msg = format!("unknown {kw} field `{}`", field.name);
            let hint = match crate::check::suggest::best(&field.name, allowed.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => help.to_string(),
            };
            return Err(self.fail_at(field.span, "decl.unknown_field", msg, &hint));
        }
        if seen.iter().any(|(f, _)| f.name == field.name) {
            let msg = format!("{kw} `{}` declares `{}` twice", name.name, field.name);
            let help = "keep one of the two clauses";
            return Err(self.fail_at(field.span, "decl.duplicate_clause", msg, help));
        }
        let clause = match field.name.as_str() {
            "shared" => Clause::Shared,
            "key" => Clause::Name(self.ident("a key type", help)?),
            "entry" => Clause::Name(self.ident("an entry class", help)?),
            "reset" => Clause::Name(self.ident("a reset period", help)?),
            "partition" => {
                self.expect_kw("by", "write `partition by field`")?;
                Clause::Name(self.ident("a field name", help)?)
            }
            "slots" | "cap" => Clause::Int(self.int_lit(help)?),
            "timezone" => {
                let t = self.peek().clone();
                let Tok::Str(lit) = t.tok else {
                    return Err(self.expected("a quoted IANA zone", "write `timezone \"UTC\"`"));
                };
                self.bump();
                Clause::Zone(lit.value, t.span)
            }
            _ => Clause::Duration(self.duration()?),
        };
        Ok((field, clause))
    }

    fn int_lit(&mut self, help: &str) -> R<IntLit> {
        let t = self.peek().clone();
        match t.tok {
            Tok::Int(value) => {
                self.bump();
                Ok(IntLit {
                    value,
                    span: t.span,
                })
            }
            _ => Err(self.expected("a whole number", help)),
        }
    }

    fn duration(&mut self) -> R<Duration> {
        let t = self.peek().clone();
        match t.tok {
            Tok::Duration(seconds) => {
                self.bump();
                Ok(Duration {
                    seconds,
                    span: t.span,
                })
            }
            Tok::Int(_) | Tok::Float(_) => {
                let msg = format!("invalid duration `{}`", self.text(&t));
                Err(self.fail("syntax.duration", msg, DURATION_HELP))
            }
            _ => Err(self.expected("a duration such as `10m`", DURATION_HELP)),
        }
    }

    // ---- rules --------------------------------------------------------------------------

    fn rule(&mut self) -> R<Rule> {
        self.bump();
        let help = "a rule is `rule name`, one or more `when …` lines, then `=> { … }`";
        let name = self.named("a rule name", help)?;
        let mut whens = Vec::new();
        while self.at_kw("when") {
            whens.push(self.when()?);
        }
        if whens.is_empty() {
            return Err(self.expected("`when`", help));
        }
        self.expect(Tok::FatArrow, "`=>` or another `when` line", help)?;
        let body = self.block()?;
        Ok(Rule { name, whens, body })
    }

    fn when(&mut self) -> R<When> {
        let start = self.bump().span;
        let help = "write `when started`, `when Class as x [where …]`, \
                    `when tracker has ready issue as x`, `when message from channel as m` or \
                    `when fact timer.fired as t`";
        let runtime = self.at_kw("fact")
            && self.peek_at(1).tok == Tok::Ident
            && !matches!(self.text(self.peek_at(1)), "as" | "where");
        let message = self.at_kw("message") && self.text(self.peek_at(1)) == "from";
        let kind = if self.eat_kw("started") {
            WhenKind::Started
        } else if message {
            self.bump();
            self.bump();
            WhenKind::Message(self.ident("a channel name", help)?)
        } else if runtime {
            self.bump();
            let mut path = vec![self.ident("a runtime fact name", help)?];
            while self.eat(&Tok::Dot) {
                path.push(self.ident("a runtime fact name", help)?);
            }
            WhenKind::Runtime(path)
        } else {
            let id = self.ident("a class, a tracker, `started` or `fact`", help)?;
            self.when_named(id, help)?
        };
        let binding = self.opt_as()?;
        let guard = if self.eat_kw("where") {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(When {
            kind,
            binding,
            guard,
            span: start.to(self.prev_span()),
        })
    }

    /// What follows the first name of a `when` line: `has ready issue`, `completed turn`,
    /// `[.field…] is available`, or nothing (a class).
    fn when_named(&mut self, id: Ident, help: &str) -> R<WhenKind> {
        if self.eat_kw("has") {
            self.expect_kw("ready", help)?;
            self.expect_kw("issue", help)?;
            return Ok(WhenKind::ReadyIssue(id));
        }
        if self.at_kw("completed") && self.text(self.peek_at(1)) == "turn" {
            self.bump();
            self.bump();
            return Ok(WhenKind::CompletedTurn(id));
        }
        let mut path = vec![id];
        while self.at(&Tok::Dot) && self.peek_at(1).tok == Tok::Ident {
            self.bump();
            path.push(self.ident("a field name", help)?);
        }
        if self.at_kw("is") && self.text(self.peek_at(1)) == "available" {
            self.bump();
            self.bump();
            return Ok(WhenKind::Available(path));
        }
        if path.len() > 1 {
            return Err(self.expected("`is available`", help));
        }
        Ok(WhenKind::Fact(path.remove(0)))
    }

    fn opt_as(&mut self) -> R<Option<Ident>> {
        if self.eat_kw("as") {
            Ok(Some(self.ident("a binding name", "write `as name`")?))
        } else {
            Ok(None)
        }
    }

    fn block(&mut self) -> R<Block> {
        self.enter()?;
        let r = self.block_inner();
        self.leave();
        r
    }

    fn block_inner(&mut self) -> R<Block> {
        let open_tok = self.peek().clone();
        let open = self.expect(Tok::LBrace, "`{`", "a rule body is a block `{ … }`")?;
        let depth = open_tok.depth + 1;
        let mut stmts = Vec::new();
        while !self.at(&Tok::RBrace) {
            let t = self.peek();
            let item_start = t.tok == Tok::Ident
                && t.nl_before
                && ITEM_KEYWORDS.contains(&self.text(t))
                && self.at_line_start_column_one();
            if self.at(&Tok::Eof) || item_start {
                let help = "close the block with `}`";
                return Err(self.expected("`}`", help));
            }
            let start = self.pos;
            match self.stmt() {
                Ok(stmt) => stmts.push(stmt),
                Err(Fail) => self.recover_stmt(depth),
            }
            if self.pos == start {
                self.bump();
            }
        }
        let close = self.bump().span;
        Ok(Block {
            stmts,
            span: open.to(close),
        })
    }

    fn stmt(&mut self) -> R<Stmt> {
        let t = self.peek().clone();
        if t.tok != Tok::Ident {
            let msg = "expected a rule body statement".to_string();
            return Err(self.fail("syntax.statement", msg, STATEMENT_HELP));
        }
        let kw = self.text(&t).to_string();
        if kw == "after" {
            return self.after_stmt();
        }
        if kw == "then" {
            return self.then_stmt();
        }
        if matches!(kw.as_str(), "prompt" | "decide" | "harness") {
            let word = self.ident("a statement", STATEMENT_HELP)?;
            return Err(self.outside(&word));
        }
        if !STATEMENT_KEYWORDS.contains(&kw.as_str()) {
            let msg = format!("unknown rule body statement `{kw}`");
            let help = match crate::check::suggest::best(&kw, STATEMENT_KEYWORDS.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => STATEMENT_HELP.to_string(),
            };
            return Err(self.fail("syntax.statement", msg, &help));
        }
        self.bump();
        let kind = self.stmt_body(&kw)?;
        Ok(Stmt {
            kind,
            span: t.span.to(self.prev_span()),
        })
    }

    fn stmt_body(&mut self, kw: &str) -> R<StmtKind> {
        let help = statement_help(kw);
        Ok(match kw {
            "record" => self.record(help)?,
            "cancel" => StmtKind::Cancel(self.ident("an effect binding", help)?),
            "done" => {
                let x = self.ident("a fact binding", help)?;
                let rec = if self.eat(&Tok::Arrow) {
                    self.expect_kw("record", help)?;
                    Some((self.ident("a class name", help)?, self.object()?))
                } else {
                    None
                };
                StmtKind::Done(x, rec)
            }
            "complete" => StmtKind::Complete(self.ident("a terminal name", help)?, self.expr()?),
            "fail" => StmtKind::Fail(self.ident("a terminal name", help)?, self.expr()?),
            "timer" if self.eat_kw("until") => StmtKind::TimerUntil(self.expr()?, self.opt_as()?),
            "timer" => StmtKind::Timer(self.duration()?, self.opt_as()?),
            "invoke" => {
                let w = self.item_name("a workflow name", help)?;
                StmtKind::Invoke(w, self.object()?, self.opt_as()?)
            }
            "acquire" => StmtKind::Acquire(self.acquire()?),
            "release" => StmtKind::Release(self.ident("a binding", help)?),
            "renew" => self.renew(help)?,
            "consume" => StmtKind::Consume(self.consume(help)?),
            "append" => {
                let class = self.ident("an entry class", help)?;
                let fields = self.object()?;
                self.expect_kw("to", help)?;
                let ledger = self.ident("a ledger name", help)?;
                StmtKind::Append(class, fields, ledger, self.opt_as()?)
            }
            "file" => {
                self.expect_kw("issue", help)?;
                self.expect_kw("into", help)?;
                let tracker = self.ident("a tracker name", help)?;
                StmtKind::FileIssue(tracker, self.object()?, self.opt_as()?)
            }
            "claim" => self.claim(help)?,
            "send" => StmtKind::Send(self.send()?),
            "exec" => StmtKind::Exec(self.exec()?),
            "vote" => StmtKind::Vote(self.vote()?),
            "tell" => StmtKind::Tell(self.tell()?),
            "coerce" => StmtKind::Coerce(self.coerce_call()?),
            "case" => StmtKind::Case(self.case()?),
            _ => {
                let x = self.ident("a claim binding", help)?;
                let fields = if self.at(&Tok::LBrace) {
                    Some(self.object()?)
                } else {
                    None
                };
                StmtKind::Finish(x, fields, self.opt_as()?)
            }
        })
    }

    /// `record Class { … }` or `record Class from x [{ … }]`.
    fn record(&mut self, help: &str) -> R<StmtKind> {
        let class = self.ident("a class name", help)?;
        if !self.eat_kw("from") {
            return Ok(StmtKind::Record(class, self.object()?));
        }
        let source = self.expr()?;
        let overrides = if self.at(&Tok::LBrace) {
            Some(self.object()?)
        } else {
            None
        };
        Ok(StmtKind::RecordFrom(RecordFrom {
            class,
            source,
            overrides,
        }))
    }

    fn renew(&mut self, help: &str) -> R<StmtKind> {
        let x = self.ident("a lease binding", help)?;
        let until = if self.eat_kw("until") {
            Some(self.duration()?)
        } else {
            None
        };
        Ok(StmtKind::Renew(x, until, self.opt_as()?))
    }

    /// `exec ARGV [cwd DIR] [env { … }] [timeout D] as x`, its clauses in any order.
    fn exec(&mut self) -> R<Exec> {
        let help = statement_help("exec");
        let argv = self.expr()?;
        let (mut cwd, mut env, mut timeout) = (None, None, None);
        loop {
            let t = self.peek().clone();
            let word = if t.tok == Tok::Ident {
                self.text(&t).to_string()
            } else {
                String::new()
            };
            let taken = match word.as_str() {
                "cwd" => cwd.is_some(),
                "env" => env.is_some(),
                "timeout" => timeout.is_some(),
                _ => break,
            };
            if taken {
                let msg = format!("`exec` gives `{word}` twice");
                return Err(self.fail_at(t.span, "syntax.exec", msg, help));
            }
            self.bump();
            match word.as_str() {
                "cwd" => cwd = Some(self.expr()?),
                "env" => env = Some(self.object()?),
                _ => timeout = Some(self.duration()?),
            }
        }
        let result = if self.eat(&Tok::Arrow) {
            Some(self.type_expr()?)
        } else {
            None
        };
        Ok(Exec {
            argv,
            cwd,
            env,
            timeout,
            result,
            binding: self.opt_as()?,
        })
    }

    fn claim(&mut self, help: &str) -> R<StmtKind> {
        let x = self.ident("an issue binding", help)?;
        let ttl = if self.eat_kw("ttl") {
            Some(self.duration()?)
        } else {
            None
        };
        Ok(StmtKind::Claim(x, ttl, self.opt_as()?))
    }

    fn send(&mut self) -> R<Send> {
        let help = statement_help("send");
        self.expect_kw("via", help)?;
        let channel = self.ident("a channel name", help)?;
        let kind = if self.eat_kw("ask") {
            SendKind::Ask
        } else if self.eat_kw("directive") {
            SendKind::Directive
        } else {
            SendKind::Inform
        };
        let body = self.object()?;
        let within = if self.eat_kw("within") {
            Some(self.duration()?)
        } else {
            None
        };
        Ok(Send {
            channel,
            kind,
            body,
            within,
            binding: self.opt_as()?,
        })
    }

    fn consume(&mut self, help: &str) -> R<Consume> {
        let counter = self.ident("a counter name", help)?;
        self.expect_kw("for", help)?;
        let key = self.expr()?;
        self.expect_kw("amount", help)?;
        let amount = self.expr()?;
        Ok(Consume {
            counter,
            key,
            amount,
            binding: self.opt_as()?,
        })
    }

    fn vote(&mut self) -> R<Vote> {
        let help = statement_help("vote");
        self.expect_kw("in", help)?;
        let team = self.expr()?;
        let body = self.object()?;
        self.expect_kw("closes", help)?;
        let closes = self.duration()?;
        Ok(Vote {
            team,
            body,
            closes,
            binding: self.opt_as()?,
        })
    }

    fn acquire(&mut self) -> R<Acquire> {
        let help = statement_help("acquire");
        let lease = self.ident("a lease name", help)?;
        self.expect_kw("for", help)?;
        let key = self.expr()?;
        let (mut until_ttl, mut wait) = (false, None);
        loop {
            if self.eat_kw("until") {
                self.expect_kw("ttl", "write `until ttl`")?;
                until_ttl = true;
            } else if self.eat_kw("wait") {
                wait = Some(self.duration()?);
            } else {
                break;
            }
        }
        Ok(Acquire {
            lease,
            key,
            until_ttl,
            wait,
            binding: self.opt_as()?,
        })
    }

    fn after_stmt(&mut self) -> R<Stmt> {
        let start = self.bump().span;
        let help = "write `after binding predicate [as name] { … }`, such as `after t completes`";
        let target = self.ident("an effect binding", help)?;
        let mut predicate = self.ident("an `after` predicate such as `succeeds`", help)?;
        if predicate.name == "times" {
            let out = self.expect_kw("out", "write `times out`")?;
            predicate = Ident {
                name: "times out".into(),
                span: predicate.span.to(out),
            };
        }
        let binding = self.opt_as()?;
        let span = start.to(self.prev_span());
        let body = self.block()?;
        Ok(Stmt {
            kind: StmtKind::After(After {
                target,
                predicate,
                binding,
                body,
                from_then: false,
            }),
            span,
        })
    }

    fn then_stmt(&mut self) -> R<Stmt> {
        let start = self.bump().span;
        let help = "write `then name <- EFFECT`, such as `then t <- timer 5s`";
        let name = self.ident("a binding name", help)?;
        self.expect(Tok::LArrow, "`<-`", help)?;
        let effect_kw = self.peek().clone();
        let effect = self.stmt()?;
        let effectful = !matches!(effect.kind, StmtKind::Send(_));
        let mut probe = effect.kind.clone();
        let binding = match probe.effect_binding_mut() {
            Some(b) if effectful => b,
            _ => {
                let msg = format!("`then` step `{}` is not an effect", name.name);
                let help = "a `then` step runs an effect: timer, invoke, acquire, consume, \
                            renew, append, file issue, claim, finish, exec, tell or coerce";
                return Err(self.fail_at(effect_kw.span, "syntax.then", msg, help));
            }
        };
        if let Some(b) = binding {
            let msg = format!(
                "`then` step `{}` already binds its effect as `{}`",
                name.name, b.name
            );
            let help = "drop the `as` clause: `then name <- EFFECT` binds the effect";
            return Err(self.fail_at(b.span, "syntax.then", msg, help));
        }
        Ok(Stmt {
            kind: StmtKind::Then(name, Box::new(effect)),
            span: start.to(self.prev_span()),
        })
    }
}

const AGENT_REF_HELP: &str = "write `AgentRef<alice | bob>`, naming declared agents";

const DURATION_HELP: &str =
    "a duration is a whole number above zero with a unit `s`, `m`, `h` or `d`, such as `30s`";

const STATEMENT_HELP: &str = "statements are `record`, `done`, `complete`, `fail`, `timer`, \
                              `invoke`, `after`, `then`, `acquire`, `release`, `renew`, \
                              `consume`, `append`, `file issue`, `claim`, `finish`, `send`, \
                              `exec`, `vote`, `cancel`, `tell`, `coerce` and `case`";

fn statement_help(kw: &str) -> &'static str {
    match kw {
        "record" => "write `record Class { field value … }` or `record Class from x`",
        "cancel" => "write `cancel x`, where `x` is an effect binding",
        "done" => "write `done x` or `done x -> record Class { … }`",
        "complete" => "write `complete result { field value … }` or `complete result value`",
        "fail" => "write `fail error { field value … }` or `fail error value`",
        "timer" => "write `timer 5s as t` or `timer until \"2026-01-01T09:00:00Z\" as t`",
        "invoke" => "write `invoke Workflow { name value … } as child`, keyed by its inputs",
        "acquire" => "write `acquire lease for key.path [until ttl] [wait 30s] as slot`",
        "release" => "write `release slot`",
        "renew" => "write `renew slot [until 300s] as renewed`",
        "consume" => "write `consume counter for key.path amount n as spend`",
        "append" => "write `append Class { … } to ledger [as entry]`",
        "file" => "write `file issue into tracker { title \"…\" body \"…\" } [as issue]`",
        "claim" => "write `claim issue [ttl 10m] as claim`",
        "exec" => {
            "write `exec [\"program\", \"arg\"] [cwd \"dir\"] [env { NAME \"value\" }] \
                   [timeout 10m] [-> Type] as run`"
        }
        "tell" => "write `tell agent [as turn] [timeout 10m] [requires [\"c\"]] \"prompt\"`",
        "coerce" => "write `coerce name(argument, …) as value [timeout 1m]`",
        "case" => "write `case path { pattern [as y] [where guard] => { … } … }`",
        "vote" => {
            "write `vote in \"team\" { title \"…\" options [\"a\", \"b\"] method \"irv\" } \
             closes 10m as v`"
        }
        "send" => {
            "write `send via channel { text \"…\" } as sent` or \
                   `send via channel ask { text \"…\" } within 10m as question`"
        }
        _ => "write `finish claim [{ summary \"…\" }] [as finished]`",
    }
}

fn resource_help(kw: &str) -> &'static str {
    match kw {
        "lease" => "write `lease name { [shared] key Class [slots N] ttl 10m }`",
        "counter" => {
            "write `counter name { [shared] key Class cap N reset daily [timezone \"Zone\"] }`"
        }
        _ => "write `ledger name { [shared] entry Class partition by field retain 90d }`",
    }
}

/// A parsed clause of a lease, counter or ledger declaration.
enum Clause {
    Shared,
    Name(Ident),
    Int(IntLit),
    Duration(Duration),
    Zone(String, Span),
}

fn build_resource(kw: &str, name: Ident, clauses: Vec<(Ident, Clause)>) -> ItemKind {
    let shared = clauses.iter().any(|(_, c)| matches!(c, Clause::Shared));
    let find_name = |f: &str| {
        clauses
            .iter()
            .find(|(k, _)| k.name == f)
            .and_then(|(_, c)| match c {
                Clause::Name(n) => Some(n.clone()),
                _ => None,
            })
    };
    let find_int = |f: &str| {
        clauses
            .iter()
            .find(|(k, _)| k.name == f)
            .and_then(|(_, c)| match c {
                Clause::Int(n) => Some(*n),
                _ => None,
            })
    };
    let find_duration = |f: &str| {
        clauses
            .iter()
            .find(|(k, _)| k.name == f)
            .and_then(|(_, c)| match c {
                Clause::Duration(d) => Some(*d),
                _ => None,
            })
    };
    match kw {
        "lease" => ItemKind::Lease(LeaseDecl {
            name,
            shared,
            key: find_name("key"),
            slots: find_int("slots"),
            ttl: find_duration("ttl"),
        }),
        "counter" => {
            let timezone = clauses.iter().find_map(|(_, c)| match c {
                Clause::Zone(z, s) => Some((z.clone(), *s)),
                _ => None,
            });
            ItemKind::Counter(CounterDecl {
                name,
                shared,
                key: find_name("key"),
                cap: find_int("cap"),
                reset: find_name("reset"),
                timezone,
            })
        }
        _ => ItemKind::Ledger(LedgerDecl {
            name,
            shared,
            entry: find_name("entry"),
            partition: find_name("partition"),
            retain: find_duration("retain"),
        }),
    }
}

// ---- expressions, objects and types ------------------------------------------------------

impl Parser<'_> {
    fn expr(&mut self) -> R<Expr> {
        self.expr_bp(0)
    }

    fn binop(&self) -> Option<(BinOp, u8, usize)> {
        let t = self.peek();
        let word = if t.tok == Tok::Ident {
            self.text(t)
        } else {
            ""
        };
        Some(match (&t.tok, word) {
            (Tok::OrOr, _) | (_, "or") => (BinOp::Or, 1, 1),
            (Tok::AndAnd, _) | (_, "and") => (BinOp::And, 2, 1),
            (Tok::EqEq, _) => (BinOp::Eq, 3, 1),
            (Tok::Ne, _) => (BinOp::Ne, 3, 1),
            (Tok::Lt, _) => (BinOp::Lt, 3, 1),
            (Tok::Le, _) => (BinOp::Le, 3, 1),
            (Tok::Gt, _) => (BinOp::Gt, 3, 1),
            (Tok::Ge, _) => (BinOp::Ge, 3, 1),
            (_, "in") => (BinOp::In, 3, 1),
            (_, "not") => {
                let next = self.peek_at(1);
                if next.tok == Tok::Ident && self.text(next) == "in" {
                    (BinOp::NotIn, 3, 2)
                } else {
                    return None;
                }
            }
            (Tok::Plus, _) => (BinOp::Add, 4, 1),
            (Tok::Minus, _) => (BinOp::Sub, 4, 1),
            (Tok::Star, _) => (BinOp::Mul, 5, 1),
            (Tok::Slash, _) => (BinOp::Div, 5, 1),
            _ => return None,
        })
    }

    fn expr_bp(&mut self, min: u8) -> R<Expr> {
        let mut lhs = self.unary()?;
        while let Some((op, prec, len)) = self.binop() {
            if prec < min {
                break;
            }
            for _ in 0..len {
                self.bump();
            }
            let rhs = self.expr_bp(prec + 1)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> R<Expr> {
        self.enter()?;
        let r = self.unary_inner();
        self.leave();
        r
    }

    fn unary_inner(&mut self) -> R<Expr> {
        let start = self.peek().span;
        let op = if self.at(&Tok::Bang) || self.at_kw("not") {
            Some(UnOp::Not)
        } else if self.at(&Tok::Minus) {
            Some(UnOp::Neg)
        } else {
            None
        };
        // `exists x` is `exists(x)`, binding tighter than `&&`.
        if op.is_none() && self.at_kw("exists") && self.peek_at(1).tok != Tok::LParen {
            let name = self.ident("`exists`", "write `exists x.field`")?;
            let inner = self.unary()?;
            let span = start.to(inner.span);
            return Ok(Expr {
                kind: ExprKind::Call(name, vec![inner]),
                span,
            });
        }
        let Some(op) = op else { return self.primary() };
        self.bump();
        let inner = self.unary()?;
        let span = start.to(inner.span);
        Ok(Expr {
            kind: ExprKind::Unary(op, Box::new(inner)),
            span,
        })
    }

    fn primary(&mut self) -> R<Expr> {
        let t = self.peek().clone();
        let lit = match &t.tok {
            Tok::Int(v) => Some(ExprKind::Int(*v)),
            Tok::Float(v) => Some(ExprKind::Float(*v)),
            Tok::Duration(v) => Some(ExprKind::Duration(*v)),
            Tok::Str(s) => Some(ExprKind::Str(s.clone())),
            Tok::Ident => match self.text(&t) {
                "true" => Some(ExprKind::Bool(true)),
                "false" => Some(ExprKind::Bool(false)),
                "null" => Some(ExprKind::Null),
                _ => None,
            },
            _ => None,
        };
        if let Some(kind) = lit {
            self.bump();
            return Ok(Expr { kind, span: t.span });
        }
        match t.tok {
            Tok::LBracket => self.array(),
            Tok::LBrace => {
                let obj = self.object()?;
                let span = obj.span;
                Ok(Expr {
                    kind: ExprKind::Object(obj),
                    span,
                })
            }
            Tok::LParen => {
                self.bump();
                let inner = self.expr()?;
                self.expect(Tok::RParen, "`)`", "close the parenthesis")?;
                Ok(inner)
            }
            Tok::Ident if self.text(&t) == "effect" && self.peek_at(1).tok == Tok::Ident => {
                self.effect_query()
            }
            Tok::Ident => self.path_or_call(),
            _ => Err(self.expected(
                "an expression",
                "write a value, a path such as `d.env`, \
                                    or a call such as `count(x)`",
            )),
        }
    }

    fn array(&mut self) -> R<Expr> {
        let open = self.bump().span;
        let mut items = Vec::new();
        while !self.at(&Tok::RBracket) {
            items.push(self.expr()?);
            self.eat(&Tok::Comma);
        }
        let close = self.expect(Tok::RBracket, "`]`", "close the array with `]`")?;
        Ok(Expr {
            kind: ExprKind::Array(items),
            span: open.to(close),
        })
    }

    fn path(&mut self) -> R<Vec<Ident>> {
        let help = "a path is `name.field.field`";
        let mut segments = vec![self.ident("a name", help)?];
        while self.at(&Tok::Dot) && self.peek_at(1).tok == Tok::Ident {
            self.bump();
            segments.push(self.ident("a field name", help)?);
        }
        Ok(segments)
    }

    fn path_or_call(&mut self) -> R<Expr> {
        let segments = self.path()?;
        let start = segments[0].span;
        if segments.len() == 1 && self.at(&Tok::LParen) {
            self.bump();
            let mut args = Vec::new();
            while !self.at(&Tok::RParen) {
                args.push(self.call_arg()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            let close = self.expect(Tok::RParen, "`)`", "close the call with `)`")?;
            let name = segments.into_iter().next().expect("one segment");
            return Ok(Expr {
                kind: ExprKind::Call(name, args),
                span: start.to(close),
            });
        }
        let span = start.to(segments[segments.len() - 1].span);
        let mut e = Expr {
            kind: ExprKind::Path(segments),
            span,
        };
        // `m["k"]`, also chained; a `[` on a later line starts something else.
        while self.at(&Tok::LBracket) && !self.peek().nl_before {
            self.bump();
            let key = self.expr()?;
            let close = self.expect(Tok::RBracket, "`]`", "close the index with `]`")?;
            e = Expr {
                span: e.span.to(close),
                kind: ExprKind::Index(Box::new(e), Box::new(key)),
            };
        }
        Ok(e)
    }

    /// A call argument; `Class where expr` becomes a fact query.
    fn call_arg(&mut self) -> R<Expr> {
        let arg = self.expr()?;
        if !self.at_kw("where") {
            return Ok(arg);
        }
        let ExprKind::Path(segments) = &arg.kind else {
            return Ok(arg);
        };
        if segments.len() != 1 {
            return Ok(arg);
        }
        self.bump();
        let guard = self.expr()?;
        let span = arg.span.to(guard.span);
        Ok(Expr {
            kind: ExprKind::Query(segments[0].clone(), Some(Box::new(guard))),
            span,
        })
    }

    fn effect_query(&mut self) -> R<Expr> {
        let start = self.bump().span;
        if self.at_kw("kind") && self.peek_at(1).tok == Tok::Ident {
            return self.effect_kind_query(start);
        }
        if !self.at(&Tok::Ident) {
            self.ident("an effect kind", "write `effect kind [binding] [where …]`")?;
        }
        let kind = dotted_ident(self.path()?);
        let path = if self.at(&Tok::Ident) && !self.at_kw("where") {
            self.path()?
        } else {
            vec![]
        };
        let guard = if self.eat_kw("where") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        let span = start.to(self.prev_span());
        Ok(Expr {
            kind: ExprKind::EffectQuery(kind, path, guard),
            span,
        })
    }

    /// `effect kind K[.K…] [where …]`: effects of a (possibly dotted) kind.
    fn effect_kind_query(&mut self, start: Span) -> R<Expr> {
        self.bump();
        let kind = dotted_ident(self.path()?);
        let guard = if self.eat_kw("where") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        Ok(Expr {
            kind: ExprKind::EffectQuery(kind, Vec::new(), guard),
            span: start.to(self.prev_span()),
        })
    }

    fn object(&mut self) -> R<ObjectLit> {
        self.enter()?;
        let r = self.object_inner();
        self.leave();
        r
    }

    fn object_inner(&mut self) -> R<ObjectLit> {
        let help = "an object is `{ field value … }`";
        let open = self.expect(Tok::LBrace, "`{`", help)?;
        let mut fields = Vec::new();
        while !self.at(&Tok::RBrace) {
            let t = self.peek().clone();
            let key = match &t.tok {
                Tok::Str(s) => {
                    self.bump();
                    Ident {
                        name: s.value.clone(),
                        span: t.span,
                    }
                }
                _ => self.ident("a field name or `}`", help)?,
            };
            self.eat(&Tok::Colon);
            fields.push((key, self.expr()?));
            self.eat(&Tok::Comma);
        }
        let close = self.bump().span;
        Ok(ObjectLit {
            fields,
            span: open.to(close),
        })
    }

    fn type_expr(&mut self) -> R<TypeExpr> {
        self.enter()?;
        let r = self.type_union();
        self.leave();
        r
    }

    fn type_union(&mut self) -> R<TypeExpr> {
        let first = self.type_postfix()?;
        if !self.at(&Tok::Pipe) {
            return Ok(first);
        }
        let mut members = vec![first];
        while self.eat(&Tok::Pipe) {
            members.push(self.type_postfix()?);
        }
        let span = members[0].span.to(members[members.len() - 1].span);
        Ok(TypeExpr {
            kind: TypeKind::Union(members),
            span,
        })
    }

    fn type_postfix(&mut self) -> R<TypeExpr> {
        let mut ty = self.type_atom()?;
        loop {
            if self.at(&Tok::LBracket) && self.peek_at(1).tok == Tok::RBracket {
                self.bump();
                let close = self.bump().span;
                let span = ty.span.to(close);
                ty = TypeExpr {
                    kind: TypeKind::Array(Box::new(ty)),
                    span,
                };
            } else if self.at(&Tok::Question) {
                let q = self.bump().span;
                let span = ty.span.to(q);
                ty = TypeExpr {
                    kind: TypeKind::Optional(Box::new(ty)),
                    span,
                };
            } else {
                return Ok(ty);
            }
        }
    }

    fn type_atom(&mut self) -> R<TypeExpr> {
        let help = "a type is `string`, `int`, `float`, `bool`, `time`, `duration`, `null`, \
                    a class or enum name, a string literal, `map<T>`, `T[]`, `T?` or `A | B`";
        let t = self.peek().clone();
        match &t.tok {
            Tok::Str(s) => {
                self.bump();
                Ok(TypeExpr {
                    kind: TypeKind::Literal(s.value.clone()),
                    span: t.span,
                })
            }
            Tok::Ident if self.text(&t) == "map" && self.peek_at(1).tok == Tok::Lt => {
                self.bump();
                self.bump();
                let inner = self.type_expr()?;
                let close = self.expect(Tok::Gt, "`>`", help)?;
                Ok(TypeExpr {
                    kind: TypeKind::Map(Box::new(inner)),
                    span: t.span.to(close),
                })
            }
            Tok::Ident if self.text(&t) == "AgentRef" && self.peek_at(1).tok == Tok::Lt => {
                self.bump();
                self.bump();
                let mut agents = vec![self.ident("an agent name", AGENT_REF_HELP)?];
                while self.eat(&Tok::Pipe) {
                    agents.push(self.ident("an agent name", AGENT_REF_HELP)?);
                }
                let close = self.expect(Tok::Gt, "`>`", AGENT_REF_HELP)?;
                Ok(TypeExpr {
                    kind: TypeKind::AgentRef(agents),
                    span: t.span.to(close),
                })
            }
            Tok::Ident => {
                self.bump();
                let name = self.text(&t).to_string();
                Ok(TypeExpr {
                    kind: TypeKind::Named(name),
                    span: t.span,
                })
            }
            _ => Err(self.expected("a type", help)),
        }
    }
}

/// `lease.acquire` as one name spanning its parts (a path has at least one part).
fn dotted_ident(parts: Vec<Ident>) -> Ident {
    let name: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
    Ident {
        name: name.join("."),
        span: parts[0].span.to(parts[parts.len() - 1].span),
    }
}
