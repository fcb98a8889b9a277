//! Spans, diagnostics and their rendering (rustc-like text and a stable JSON shape).

use serde::Serialize;

use crate::limits;

/// A byte range in one source file of a [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
pub struct Span {
    /// Index of the file in its [`SourceMap`].
    pub file: u32,
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span of `file` from byte `start` to byte `end`.
    pub fn new(file: u32, start: usize, end: usize) -> Span {
        Span {
            file,
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering `self` and `other` (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// How bad a diagnostic is: errors fail `whip check`, warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The program is refused.
    Error,
    /// The program is accepted, but probably not what its author meant.
    Warning,
}

/// One finding about a program: a message users know, where, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diag {
    /// Error or warning.
    pub severity: Severity,
    /// Stable machine code, such as `lease.contended_unhandled`.
    pub code: &'static str,
    /// The message, word for word as LANGUAGE.md lists it where it lists it.
    pub message: String,
    /// Where; points at the offending statement or declaration.
    pub span: Span,
    /// The `= help:` line.
    pub help: String,
}

impl Diag {
    /// An error.
    pub fn error(code: &'static str, span: Span, message: impl Into<String>) -> Diag {
        Diag {
            severity: Severity::Error,
            code,
            message: message.into(),
            span,
            help: String::new(),
        }
    }

    /// A warning.
    pub fn warning(code: &'static str, span: Span, message: impl Into<String>) -> Diag {
        Diag {
            severity: Severity::Warning,
            ..Diag::error(code, span, message)
        }
    }

    /// Sets the help line.
    pub fn help(mut self, help: impl Into<String>) -> Diag {
        self.help = help.into();
        self
    }
}

/// The files of one checked program: the root file and what it includes.
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

#[derive(Debug)]
struct SourceFile {
    path: String,
    text: String,
    line_starts: Vec<usize>,
}

/// A resolved position: 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl SourceMap {
    /// Adds a file and returns its index.
    pub fn add(&mut self, path: impl Into<String>, text: String) -> u32 {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        self.files.push(SourceFile {
            path: path.into(),
            text,
            line_starts,
        });
        (self.files.len() - 1) as u32
    }

    /// The text of file `file`.
    pub fn text(&self, file: u32) -> &str {
        &self.files[file as usize].text
    }

    /// The path of file `file` as the user gave it.
    pub fn path(&self, file: u32) -> &str {
        &self.files[file as usize].path
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when no file was added.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Line and column of byte `offset` of `file`.
    pub fn position(&self, file: u32, offset: u32) -> Position {
        let f = &self.files[file as usize];
        let offset = (offset as usize).min(f.text.len());
        let line = f.line_starts.partition_point(|s| *s <= offset) - 1;
        let start = f.line_starts[line];
        let column = char_count(&f.text, start, offset) + 1;
        Position {
            line: line + 1,
            column,
        }
    }

    fn line_text(&self, file: u32, line: usize) -> &str {
        let f = &self.files[file as usize];
        let start = f.line_starts[line - 1];
        let end = f.line_starts.get(line).map_or(f.text.len(), |e| e - 1);
        f.text[start..end].trim_end_matches('\r')
    }

    /// Renders `d` in the rustc-like text shape of LANGUAGE.md §4.
    pub fn render(&self, d: &Diag) -> String {
        let kind = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let pos = self.position(d.span.file, d.span.start);
        let mut out = format!("{kind}: {}\n", d.message);
        out += &format!(
            "  --> {}:{}:{}\n",
            self.path(d.span.file),
            pos.line,
            pos.column
        );
        let line = self.line_text(d.span.file, pos.line);
        let line_chars = line.chars().count();
        let end = self.position(d.span.file, d.span.end);
        let caret_end = if end.line == pos.line {
            end.column
        } else {
            line_chars + 1
        };
        let width = caret_end.saturating_sub(pos.column).max(1);
        let (shown, shift) = window(line, pos.column - 1, width);
        let width = width.min(limits::SNIPPET_COLUMNS_MAX);
        let gutter = pos.line.to_string();
        let pad = " ".repeat(gutter.len());
        out += &format!("{pad} |\n{gutter} | {shown}\n");
        let lead = " ".repeat(pos.column - 1 - shift);
        out += &format!("{pad} | {lead}{}\n", "^".repeat(width));
        out += &format!("  = help: {}\n", d.help);
        out
    }

    /// The JSON shape of `d` (stable: fields are only ever added).
    pub fn to_json(&self, d: &Diag) -> serde_json::Value {
        let start = self.position(d.span.file, d.span.start);
        let end = self.position(d.span.file, d.span.end);
        serde_json::json!({
            "severity": d.severity,
            "code": d.code,
            "message": d.message,
            "help": d.help,
            "path": self.path(d.span.file),
            "line": start.line,
            "column": start.column,
            "end_line": end.line,
            "end_column": end.column,
            "byte_start": d.span.start,
            "byte_end": d.span.end,
        })
    }
}

fn char_count(text: &str, start: usize, end: usize) -> usize {
    let mut end = end;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[start..end].chars().count()
}

/// A slice of `line` of at most `SNIPPET_COLUMNS_MAX` characters that shows the caret
/// columns; returns the slice and how many characters were cut at the left.
fn window(line: &str, column: usize, width: usize) -> (String, usize) {
    let max = limits::SNIPPET_COLUMNS_MAX;
    let total = line.chars().count();
    if total <= max {
        return (line.replace('\t', " "), 0);
    }
    let shift = if column + width.min(max) <= max {
        0
    } else {
        column.saturating_sub(max / 4)
    };
    let shown: String = line.chars().skip(shift).take(max).collect();
    (shown.replace('\t', " "), shift)
}
