//! `exec` (`use std.script`): a command run through the compute plane. The checks that
//! need no run: the module is used, the effect is bound, argv is an array of strings or a
//! command string without shell syntax, a result type names declared types, a
//! literal cwd stays inside the workspace, env names and values are environment shaped,
//! and the timeout is within the executor's bound.

use crate::check::cx::{Cx, Implicit};
use crate::check::types::Ty;
use crate::diag::Span;
use crate::executor::protocol::{check_cwd, is_env_name};
use crate::limits::{EXEC_ENV_ENTRIES_MAX, EXEC_TIMEOUT_MS_MAX};
use crate::syntax::ast::*;

/// Text-like types: what an argument or an environment value may be.
fn text_like(t: &Ty) -> bool {
    match t {
        Ty::Any | Ty::String | Ty::Lit(_) | Ty::Int | Ty::Float | Ty::Bool | Ty::Enum(_) => true,
        Ty::Union(members) => members.iter().all(text_like),
        _ => false,
    }
}

impl Cx<'_> {
    /// `exec ARGV [cwd DIR] [env { … }] [timeout D] as x`.
    pub(crate) fn exec(&mut self, x: &Exec, span: Span) {
        if !self.m.uses.contains("std.script") {
            let msg = format!("{} runs `exec` without `use std.script`", self.subject);
            let help = "add `use std.script` at the top of the file: `exec` runs commands \
                        through the compute plane (`whip executor`)";
            self.err("exec.missing_use", span, msg, help);
        }
        self.requires_as("exec", &x.binding, span);
        self.exec_argv(&x.argv);
        if let Some(t) = &x.result {
            crate::check::model::resolve_type(self.m, t, self.diags);
        }
        if let Some(cwd) = &x.cwd {
            self.exec_cwd(cwd);
        }
        if let Some(env) = &x.env {
            self.exec_env(env);
        }
        if let Some(d) = x.timeout.filter(|d| d.seconds * 1000 > EXEC_TIMEOUT_MS_MAX) {
            let msg = format!(
                "{} gives `exec` a timeout of {}; the longest is {}",
                self.subject,
                crate::ir::duration(d.seconds),
                crate::ir::duration(EXEC_TIMEOUT_MS_MAX / 1000)
            );
            let help = "split the work into shorter runs, or run it outside the workflow";
            self.err("exec.timeout", d.span, msg, help);
        }
    }

    fn exec_argv(&mut self, argv: &Expr) {
        let help = "write `exec [\"program\", \"arg\"] as run` (no shell: one string per \
                    argument)";
        if let ExprKind::Array(items) = &argv.kind
            && items.is_empty()
        {
            let msg = format!("{} runs `exec` with an empty argv", self.subject);
            return self.err("exec.argv", argv.span, msg, help);
        }
        let t = self.infer(argv, Implicit::None);
        if let ExprKind::Str(s) = &argv.kind {
            return self.exec_command(s, argv.span);
        }
        let ok = match &t {
            Ty::Any => true,
            Ty::Array(item) => text_like(item),
            _ => false,
        };
        if !ok {
            let msg = format!(
                "{} runs `exec` with a `{t}` argv, not an array of strings or a command string",
                self.subject
            );
            self.err("exec.argv", argv.span, msg, help);
        }
    }

    /// `exec "make all"`: the command splits into words without a shell; shell syntax, an
    /// unclosed quote or no program at all is refused here (each `{{ path }}` stands for
    /// one piece of a word, whatever its value).
    fn exec_command(&mut self, s: &StrLit, span: Span) {
        use crate::executor::command::{CommandError, Piece, split};
        let pieces: Vec<Piece<'_>> = s
            .parts
            .iter()
            .map(|p| match p {
                StrPart::Lit(t) => Piece::Text(t),
                StrPart::Path(_) => Piece::Value("value".into()),
            })
            .collect();
        let (msg, help) = match split(&pieces) {
            Ok(_) => return,
            Err(CommandError::Empty) => (
                format!("{} runs `exec` with an empty argv", self.subject),
                "write `exec \"program arg\" as run`".to_string(),
            ),
            Err(CommandError::UnclosedQuote(q)) => (
                format!("{} runs `exec` with an unclosed quote `{q}`", self.subject),
                format!("close the quote: a quoted argument is `{q}…{q}`"),
            ),
            Err(CommandError::ShellSyntax(c)) => (
                format!(
                    "{} runs `exec` with shell syntax `{c}`; the command runs without a shell",
                    self.subject
                ),
                "quote the character to pass it literally, or put the pipeline in a script \
                 and run that: `exec \"./build.sh\" as run`"
                    .to_string(),
            ),
        };
        self.err("exec.argv", span, msg, help);
    }

    fn exec_cwd(&mut self, cwd: &Expr) {
        let t = self.infer(cwd, Implicit::None);
        if !matches!(t, Ty::Any | Ty::String | Ty::Lit(_)) {
            let msg = format!("{} gives `exec` a `{t}` cwd, not a string", self.subject);
            let help = "a cwd is a directory inside the instance's workspace, such as \"build\"";
            return self.err("exec.cwd", cwd.span, msg, help);
        }
        if let ExprKind::Str(s) = &cwd.kind
            && s.parts.iter().all(|p| matches!(p, StrPart::Lit(_)))
            && check_cwd(Some(&s.value)).is_err()
        {
            let msg = format!(
                "{} gives `exec` cwd {:?}, which leaves the instance's workspace",
                self.subject, s.value
            );
            let help = "a cwd is relative to the workspace and has no `..`";
            self.err("exec.cwd", cwd.span, msg, help);
        }
    }

    fn exec_env(&mut self, env: &ObjectLit) {
        if env.fields.len() > EXEC_ENV_ENTRIES_MAX {
            let msg = format!(
                "{} gives `exec` {} environment variables; the most is {EXEC_ENV_ENTRIES_MAX}",
                self.subject,
                env.fields.len()
            );
            self.err("exec.env", env.span, msg, "pass fewer variables, or a file");
        }
        for (name, value) in &env.fields {
            if !is_env_name(&name.name) {
                let msg = format!(
                    "{} gives `exec` env `{}`, which is not a variable name",
                    self.subject, name.name
                );
                let help = "variable names are letters, digits and `_`, not starting with a digit";
                self.err("exec.env", name.span, msg, help);
            }
            let t = self.infer(value, Implicit::None);
            if !text_like(&t) {
                let msg = format!(
                    "{} gives env `{}` a `{t}` value; environment values are text",
                    self.subject, name.name
                );
                let help = "pass a string, a number or a boolean";
                self.err("exec.env", value.span, msg, help);
            }
        }
    }
}
