//! The agent constructs (LANGUAGE-AGENTS.md §1, §2): `agent` and `coerce` declarations, and
//! the `tell`, `coerce` and `case` statements.

use super::{Parser, R};
use crate::diag::Span;
use crate::syntax::ast::*;
use crate::syntax::lexer::Tok;

const AGENT_HELP: &str = "write `agent name` or `agent name { provider fixture profile \"no-repo\" \
                          capacity 2 tools [Tool] capabilities [\"c\"] skills [\"s\"] }`";
const COERCE_HELP: &str = "write `coerce name(text string) -> Type \"prompt {{ text }}\"`";
const TELL_HELP: &str =
    "write `tell agent [as turn] [timeout 10m] [requires [\"capability\"]] \"prompt\"`";
const CASE_HELP: &str = "write `case path { pattern [as y] [where guard] => { … } … }`";

/// Words of the public language this engine refuses (LANGUAGE-AGENTS.md §1): agent fields,
/// `tell` modifiers, items and statements outside the whip fabric subset.
pub(super) const OUTSIDE_SUBSET: &[&str] = &[
    "using",
    "delegated",
    "harness",
    "compaction",
    "settings",
    "thread",
    "requires",
    "with",
    "on",
    "prompt",
    "decide",
];

const OUTSIDE_HELP: &str = "whip fabric runs the subset of WhippleScript its language pages \
                            describe; write the program without it";

/// The fields an `agent` block may give.
const AGENT_FIELDS: &[&str] = &[
    "provider",
    "profile",
    "capacity",
    "tools",
    "capabilities",
    "skills",
];

impl Parser<'_> {
    /// `agent NAME ["{" field* "}"]`.
    pub(super) fn agent(&mut self) -> R<AgentDecl> {
        self.bump();
        let name = self.named("an agent name", AGENT_HELP)?;
        let mut d = AgentDecl {
            name,
            providers: Vec::new(),
            profile: None,
            capacity: None,
            tools: Vec::new(),
            capabilities: Vec::new(),
            skills: Vec::new(),
        };
        if !self.eat(&Tok::LBrace) {
            return Ok(d);
        }
        while !self.eat(&Tok::RBrace) {
            self.agent_field(&mut d)?;
            self.eat(&Tok::Comma);
        }
        Ok(d)
    }

    fn agent_field(&mut self, d: &mut AgentDecl) -> R<()> {
        let field = self.ident("an agent field or `}`", AGENT_HELP)?;
        match field.name.as_str() {
            "provider" => d.providers.push(self.ident("a provider kind", AGENT_HELP)?),
            "profile" => d.profile = Some(self.string("a quoted profile", AGENT_HELP)?),
            "capacity" => d.capacity = Some(self.int_lit(AGENT_HELP)?),
            "tools" => d.tools = self.name_list(AGENT_HELP)?,
            "capabilities" => d.capabilities = self.string_list(AGENT_HELP)?,
            "skills" => d.skills = self.string_list(AGENT_HELP)?,
            other if OUTSIDE_SUBSET.contains(&other) => {
                return Err(self.outside(&field));
            }
            other => {
                let msg = format!("unknown agent field `{other}` on agent `{}`", d.name.name);
                let hint = crate::check::suggest::help(
                    other,
                    AGENT_FIELDS.iter().copied(),
                    "an agent has `provider`, `profile`, `capacity`, `tools`, `capabilities` \
                     and `skills` (the model is configuration, not a field)",
                );
                return Err(self.fail_at(field.span, "agent.unknown_field", msg, &hint));
            }
        }
        Ok(())
    }

    /// `coerce NAME "(" (p Type),* ")" "->" Type (STRING | "{" [provider P] prompt STRING "}")`.
    pub(super) fn coerce_decl(&mut self) -> R<CoerceDecl> {
        self.bump();
        let name = self.named("a coerce name", COERCE_HELP)?;
        self.expect(Tok::LParen, "`(`", COERCE_HELP)?;
        let mut params = Vec::new();
        while !self.eat(&Tok::RParen) {
            let p = self.ident("a parameter name", COERCE_HELP)?;
            params.push(FieldDecl {
                name: p,
                ty: self.type_expr()?,
            });
            if !self.eat(&Tok::Comma) && !self.at(&Tok::RParen) {
                return Err(self.expected("`,` or `)`", COERCE_HELP));
            }
        }
        self.expect(Tok::Arrow, "`->`", COERCE_HELP)?;
        let output = self.type_expr()?;
        let (provider, prompt) = if self.eat(&Tok::LBrace) {
            self.coerce_block(&name)?
        } else {
            (None, self.str_lit("a quoted prompt", COERCE_HELP)?)
        };
        Ok(CoerceDecl {
            name,
            params,
            output,
            provider,
            prompt,
        })
    }

    /// The block form of a coerce's body: `[provider NAME] prompt STRING }`.
    fn coerce_block(&mut self, name: &Ident) -> R<(Option<Ident>, StrLit)> {
        let (mut provider, mut prompt) = (None, None);
        while !self.eat(&Tok::RBrace) {
            let field = self.ident("`provider`, `prompt` or `}`", COERCE_HELP)?;
            match field.name.as_str() {
                "provider" => provider = Some(self.ident("a provider name", COERCE_HELP)?),
                "prompt" => prompt = Some(self.str_lit("a quoted prompt", COERCE_HELP)?),
                other => {
                    let msg = format!("unknown coerce field `{other}` on coerce `{}`", name.name);
                    let help = "a coerce block has `provider` and `prompt`";
                    return Err(self.fail_at(field.span, "coerce.unknown_field", msg, help));
                }
            }
        }
        match prompt {
            Some(prompt) => Ok((provider, prompt)),
            None => Err(self.expected("`prompt \"…\"`", COERCE_HELP)),
        }
    }

    /// `tell TARGET MOD* PROMPT MOD*`.
    pub(super) fn tell(&mut self) -> R<Tell> {
        let t = self.peek().clone();
        let target = match t.tok {
            Tok::Str(lit) => {
                self.bump();
                Expr {
                    kind: ExprKind::Str(lit),
                    span: t.span,
                }
            }
            _ => {
                let path = self.path()?;
                let span = path[0].span.to(path[path.len() - 1].span);
                Expr {
                    kind: ExprKind::Path(path),
                    span,
                }
            }
        };
        let mut tell = Tell {
            target,
            prompt: StrLit {
                value: String::new(),
                parts: Vec::new(),
                content_type: None,
            },
            timeout: None,
            requires: Vec::new(),
            binding: None,
        };
        self.tell_modifiers(&mut tell)?;
        tell.prompt = self.str_lit("a quoted prompt", TELL_HELP)?;
        self.tell_modifiers(&mut tell)?;
        Ok(tell)
    }

    fn tell_modifiers(&mut self, tell: &mut Tell) -> R<()> {
        loop {
            if self.at_kw("as") && !self.peek().nl_before {
                tell.binding = self.opt_as()?;
            } else if self.at_kw("timeout") && !self.peek().nl_before {
                self.bump();
                tell.timeout = Some(self.duration()?);
            } else if self.at_kw("requires") && !self.peek().nl_before {
                self.bump();
                tell.requires = self.string_list(TELL_HELP)?;
            } else if self.at_kw("with") && !self.peek().nl_before {
                // Reported, then read past, so the tell (and its binding) still stands.
                let word = self.ident("`with`", TELL_HELP)?;
                self.outside(&word);
                self.object()?;
            } else if self.at_kw("on") && !self.peek().nl_before {
                let word = self.ident("`on`", TELL_HELP)?;
                self.outside(&word);
                self.ident("`stream`", TELL_HELP)?;
            } else {
                return Ok(());
            }
        }
    }

    /// `coerce NAME(expr, …) [as x] [timeout D]`.
    pub(super) fn coerce_call(&mut self) -> R<CoerceCall> {
        let help = "write `coerce name(argument, …) as value [timeout 1m]`";
        let function = self.ident("a coerce name", help)?;
        self.expect(Tok::LParen, "`(`", help)?;
        let mut args = Vec::new();
        while !self.at(&Tok::RParen) {
            args.push(self.expr()?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RParen, "`)`", help)?;
        let mut call = CoerceCall {
            function,
            args,
            timeout: None,
            binding: None,
        };
        loop {
            if self.at_kw("as") {
                call.binding = self.opt_as()?;
            } else if self.eat_kw("timeout") {
                call.timeout = Some(self.duration()?);
            } else {
                return Ok(call);
            }
        }
    }

    /// `case PATH { PATTERN [as y] [where expr] => { … } … }`.
    pub(super) fn case(&mut self) -> R<Case> {
        let scrutinee = self.expr()?;
        self.expect(Tok::LBrace, "`{`", CASE_HELP)?;
        let mut arms = Vec::new();
        while !self.eat(&Tok::RBrace) {
            if self.at(&Tok::Eof) {
                return Err(self.expected("`}`", CASE_HELP));
            }
            arms.push(self.case_arm()?);
            self.eat(&Tok::Comma);
        }
        Ok(Case { scrutinee, arms })
    }

    fn case_arm(&mut self) -> R<CaseArm> {
        let t = self.peek().clone();
        let pattern = match t.tok {
            Tok::Str(lit) => {
                self.bump();
                Pattern::Str(lit.value)
            }
            Tok::Ident => {
                let word = self.text(&t).to_string();
                self.bump();
                match word.as_str() {
                    "_" | "default" => Pattern::Wildcard,
                    "true" | "false" => Pattern::Bool(word == "true"),
                    "Some" if self.at(&Tok::Ident) && !self.at_kw("as") && !self.at_kw("where") => {
                        Pattern::Some(self.ident("a binding name", CASE_HELP)?)
                    }
                    _ => Pattern::Name(word),
                }
            }
            // A number matches nothing a case can match; the checker says so.
            Tok::Int(_) | Tok::Float(_) => {
                self.bump();
                Pattern::Name(self.text(&t).to_string())
            }
            _ => return Err(self.expected("a case pattern", CASE_HELP)),
        };
        let binding = self.opt_as()?;
        let guard = if self.eat_kw("where") {
            Some(self.expr()?)
        } else {
            None
        };
        let span = t.span.to(self.prev_span());
        self.expect(Tok::FatArrow, "`=>`", CASE_HELP)?;
        let body = self.block()?;
        Ok(CaseArm {
            pattern,
            binding,
            guard,
            body,
            span,
        })
    }

    // ---- small pieces -------------------------------------------------------------------

    /// "`X` is outside the whip fabric subset", at `word`.
    pub(super) fn outside(&mut self, word: &Ident) -> super::Fail {
        let msg = format!("`{}` is outside the whip fabric subset", word.name);
        self.fail_at(word.span, "syntax.outside_subset", msg, OUTSIDE_HELP)
    }

    /// A string literal, or a failure naming `what`.
    pub(super) fn str_lit(&mut self, what: &str, help: &str) -> R<StrLit> {
        let t = self.peek().clone();
        let Tok::Str(lit) = t.tok else {
            return Err(self.expected(what, help));
        };
        self.bump();
        Ok(lit)
    }

    fn string(&mut self, what: &str, help: &str) -> R<(String, Span)> {
        let span = self.peek().span;
        Ok((self.str_lit(what, help)?.value, span))
    }

    /// `["a", "b"]`
    fn string_list(&mut self, help: &str) -> R<Vec<(String, Span)>> {
        self.list(help, |p| p.string("a quoted name", help))
    }

    /// `[A, B]`
    fn name_list(&mut self, help: &str) -> R<Vec<Ident>> {
        self.list(help, |p| p.item_name("a workflow name", help))
    }

    /// `[item, …]`, commas between the items.
    fn list<T>(&mut self, help: &str, mut item: impl FnMut(&mut Self) -> R<T>) -> R<Vec<T>> {
        self.expect(Tok::LBracket, "`[`", help)?;
        let mut out = Vec::new();
        while !self.eat(&Tok::RBracket) {
            out.push(item(self)?);
            if !self.eat(&Tok::Comma) && !self.at(&Tok::RBracket) {
                return Err(self.expected("`,` or `]`", help));
            }
        }
        Ok(out)
    }
}
