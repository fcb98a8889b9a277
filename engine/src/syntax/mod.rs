//! Syntax: source text to a typed AST with byte spans on every node.
//!
//! The lexer never fails (bad characters become error tokens after one diagnostic) and the
//! parser recovers at the next statement or top-level item, so one malformed declaration
//! yields one error.

pub mod ast;
pub mod lexer;
pub mod parser;

use crate::diag::Diag;

/// Lexes and parses one file; `file` is its index in the source map.
pub fn parse_file(src: &str, file: u32) -> (ast::File, Vec<Diag>) {
    let mut diags = Vec::new();
    let tokens = lexer::lex(src, file, &mut diags);
    let parsed = parser::parse(src, file, tokens, &mut diags);
    (parsed, diags)
}
