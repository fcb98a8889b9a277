//! The lexer: bytes to tokens with spans, newline flags and bracket depth.

use crate::diag::{Diag, Span};
use crate::limits;
use crate::syntax::ast::{StrLit, StrPart};

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A word; keywords are contextual, so every word is an identifier here.
    Ident,
    /// An integer literal.
    Int(i64),
    /// A decimal literal.
    Float(f64),
    /// A duration literal, in seconds.
    Duration(u64),
    /// A string literal (plain or triple-quoted) with its template parts.
    Str(StrLit),
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `,`
    Comma,
    /// `:`
    Colon,
    /// `.`
    Dot,
    /// `->`
    Arrow,
    /// `=>`
    FatArrow,
    /// `<-`
    LArrow,
    /// `@`
    At,
    /// `!`
    Bang,
    /// `!=`
    Ne,
    /// `==`
    EqEq,
    /// `=`
    Eq,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Star,
    /// `/`
    Slash,
    /// `|`
    Pipe,
    /// `?`
    Question,
    /// `&&`
    AndAnd,
    /// `||`
    OrOr,
    /// Something the lexer already reported; the parser recovers silently.
    Error,
    /// End of input.
    Eof,
}

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// Kind and value.
    pub tok: Tok,
    /// Where.
    pub span: Span,
    /// True when a newline separates this token from the previous one.
    pub nl_before: bool,
    /// Open brackets before this token; a closing bracket has the depth of its opener.
    pub depth: u32,
}

struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
    file: u32,
    toks: Vec<Token>,
    diags: &'a mut Vec<Diag>,
    nl: bool,
    depth: u32,
    errors: usize,
}

/// Lexes `src`; lexical errors go to `diags` and become [`Tok::Error`] tokens.
pub fn lex(src: &str, file: u32, diags: &mut Vec<Diag>) -> Vec<Token> {
    let mut lx = Lexer {
        src,
        b: src.as_bytes(),
        i: 0,
        file,
        toks: Vec::with_capacity(src.len() / 4),
        diags,
        nl: true,
        depth: 0,
        errors: 0,
    };
    lx.run();
    lx.toks
}

impl Lexer<'_> {
    fn run(&mut self) {
        while self.i < self.b.len() {
            let c = self.b[self.i];
            match c {
                b'\n' => {
                    self.nl = true;
                    self.i += 1;
                }
                b' ' | b'\t' | b'\r' => self.i += 1,
                b'#' => self.skip_line(),
                b'/' if self.at(1) == Some(b'/') => self.skip_line(),
                b'"' => self.string(),
                b'0'..=b'9' => self.number(),
                c if c.is_ascii_alphabetic() || c == b'_' => {
                    let start = self.i;
                    while self.i < self.b.len()
                        && (self.b[self.i].is_ascii_alphanumeric() || self.b[self.i] == b'_')
                    {
                        self.i += 1;
                    }
                    if self.i - start > limits::IDENT_BYTES_MAX {
                        let msg = format!(
                            "identifier is longer than {} bytes",
                            limits::IDENT_BYTES_MAX
                        );
                        self.error(start, "syntax.identifier", msg, "use a shorter name");
                    } else {
                        self.push(Tok::Ident, start);
                    }
                }
                _ => self.punct(),
            }
        }
        let end = self.b.len();
        self.toks.push(Token {
            tok: Tok::Eof,
            span: Span::new(self.file, end, end),
            nl_before: true,
            depth: 0,
        });
    }

    fn at(&self, ahead: usize) -> Option<u8> {
        self.b.get(self.i + ahead).copied()
    }

    fn push(&mut self, tok: Tok, start: usize) {
        let depth = match tok {
            Tok::LBrace | Tok::LBracket | Tok::LParen => {
                self.depth += 1;
                self.depth - 1
            }
            Tok::RBrace | Tok::RBracket | Tok::RParen => {
                self.depth = self.depth.saturating_sub(1);
                self.depth
            }
            _ => self.depth,
        };
        let span = Span::new(self.file, start, self.i);
        self.toks.push(Token {
            tok,
            span,
            nl_before: self.nl,
            depth,
        });
        self.nl = false;
    }

    fn error(&mut self, start: usize, code: &'static str, msg: String, help: &str) {
        self.errors += 1;
        if self.errors <= limits::LEX_ERRORS_MAX {
            let span = Span::new(self.file, start, self.i.max(start + 1).min(self.b.len()));
            self.diags.push(Diag::error(code, span, msg).help(help));
        }
        self.push(Tok::Error, start);
    }

    fn skip_line(&mut self) {
        while self.i < self.b.len() && self.b[self.i] != b'\n' {
            self.i += 1;
        }
    }

    fn punct(&mut self) {
        let start = self.i;
        let two = [self.b[self.i], self.at(1).unwrap_or(0)];
        let tok2 = match &two {
            b"->" => Some(Tok::Arrow),
            b"=>" => Some(Tok::FatArrow),
            b"<-" => Some(Tok::LArrow),
            b"!=" => Some(Tok::Ne),
            b"==" => Some(Tok::EqEq),
            b"<=" => Some(Tok::Le),
            b">=" => Some(Tok::Ge),
            b"&&" => Some(Tok::AndAnd),
            b"||" => Some(Tok::OrOr),
            _ => None,
        };
        if let Some(t) = tok2 {
            self.i += 2;
            return self.push(t, start);
        }
        let tok = match self.b[self.i] {
            b'{' => Tok::LBrace,
            b'}' => Tok::RBrace,
            b'[' => Tok::LBracket,
            b']' => Tok::RBracket,
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b',' => Tok::Comma,
            b':' => Tok::Colon,
            b'.' => Tok::Dot,
            b'@' => Tok::At,
            b'!' => Tok::Bang,
            b'=' => Tok::Eq,
            b'<' => Tok::Lt,
            b'>' => Tok::Gt,
            b'+' => Tok::Plus,
            b'-' => Tok::Minus,
            b'*' => Tok::Star,
            b'/' => Tok::Slash,
            b'|' => Tok::Pipe,
            b'?' => Tok::Question,
            _ => return self.bad_chars(),
        };
        self.i += 1;
        self.push(tok, start);
    }

    /// One diagnostic for a whole run of characters that cannot start a token.
    fn bad_chars(&mut self) {
        let start = self.i;
        let first = self.src[start..].chars().next().unwrap_or('\u{fffd}');
        while self.i < self.b.len() {
            let c = self.b[self.i];
            let starts_token = c.is_ascii_alphanumeric()
                || c.is_ascii_whitespace()
                || b"_\"#{}[](),:.@!=<>+-*/|?&".contains(&c);
            if starts_token && self.i > start {
                break;
            }
            self.i += 1;
            while self.i < self.b.len() && !self.src.is_char_boundary(self.i) {
                self.i += 1;
            }
        }
        let msg = format!("unexpected character `{}`", first.escape_debug());
        self.error(
            start,
            "syntax.character",
            msg,
            "remove the character or put it in a string",
        );
    }

    fn number(&mut self) {
        let start = self.i;
        while self.at(0).is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if self.at(0) == Some(b'.') && self.at(1).is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
            while self.at(0).is_some_and(|c| c.is_ascii_digit()) {
                self.i += 1;
            }
        }
        while self
            .at(0)
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.i += 1;
        }
        let text = &self.src[start..self.i];
        match classify_number(text) {
            Some(tok) => self.push(tok, start),
            None if text.bytes().all(|c| c.is_ascii_digit()) => {
                let msg = format!("integer literal `{text}` is out of range");
                self.error(start, "syntax.number", msg, "integers are 64-bit signed");
            }
            None if text.bytes().any(|c| c.is_ascii_alphabetic()) => {
                // After `timeout` the words are LANGUAGE-AGENTS.md §5's.
                let after_timeout = (self.toks.last()).is_some_and(|t| {
                    t.tok == Tok::Ident
                        && &self.src[t.span.start as usize..t.span.end as usize] == "timeout"
                });
                let msg = match after_timeout {
                    true => format!("invalid timeout duration `{text}`"),
                    false => format!("invalid duration `{text}`"),
                };
                let help = "a duration is a whole number above zero with a unit `s`, `m`, `h` \
                            or `d`, such as `30s` or `10m`";
                self.error(start, "syntax.duration", msg, help);
            }
            None => {
                let msg = format!("invalid number `{text}`");
                self.error(start, "syntax.number", msg, "write an integer or a decimal")
            }
        }
    }

    fn string(&mut self) {
        let start = self.i;
        if self.b[self.i..].starts_with(b"\"\"\"") {
            return self.triple_string(start);
        }
        self.i += 1;
        let mut text = String::new();
        while let Some(c) = self.at(0) {
            match c {
                b'"' => {
                    self.i += 1;
                    return self.finish_string(start, text, None);
                }
                b'\n' => break,
                b'\\' => {
                    let esc = self.src[self.i + 1..].chars().next();
                    let Some(e) = esc.filter(|e| *e != '\n') else {
                        break;
                    };
                    text.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                    self.i += 1 + e.len_utf8();
                }
                _ => {
                    let ch = self.src[self.i..].chars().next().unwrap_or(' ');
                    text.push(ch);
                    self.i += ch.len_utf8();
                }
            }
        }
        let help = "close the string with `\"` on the same line, or use a `\"\"\"` block";
        self.error(
            start,
            "syntax.unterminated_string",
            "unterminated string".into(),
            help,
        );
    }

    fn triple_string(&mut self, start: usize) {
        self.i += 3;
        let Some(len) = self.src[self.i..].find("\"\"\"") else {
            self.i = self.b.len();
            let help = "close the block with `\"\"\"`";
            return self.error(
                start,
                "syntax.unterminated_string",
                "unterminated string".into(),
                help,
            );
        };
        let raw = &self.src[self.i..self.i + len];
        self.i += len + 3;
        let (first, rest) = raw.split_once('\n').unwrap_or((raw, ""));
        let first = first.trim();
        let ident_like = |s: &str| {
            s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"_-/".contains(&c))
        };
        let (content_type, body) = if rest.is_empty() && !raw.contains('\n') {
            (None, raw.to_string())
        } else if first.is_empty() {
            (None, dedent(rest))
        } else if ident_like(first) {
            (Some(first.to_string()), dedent(rest))
        } else {
            (None, dedent(raw))
        };
        self.finish_string(start, body, content_type);
    }

    fn finish_string(&mut self, start: usize, text: String, content_type: Option<String>) {
        match template_parts(&text) {
            Ok(parts) => {
                let lit = StrLit {
                    value: text,
                    parts,
                    content_type,
                };
                self.push(Tok::Str(lit), start);
            }
            Err(bad) => {
                let msg = format!("invalid template `{bad}`");
                let help = "write `{{ binding.field }}` with a bound name and a field path";
                self.error(start, "syntax.template", msg, help);
            }
        }
    }
}

fn classify_number(text: &str) -> Option<Tok> {
    let digits = text.bytes().take_while(|c| c.is_ascii_digit()).count();
    if digits == text.len() {
        return text.parse().ok().map(Tok::Int);
    }
    let rest = &text[digits..];
    if rest.len() == 1 && b"smhd".contains(&rest.as_bytes()[0]) {
        let n: u64 = text[..digits].parse().ok()?;
        let unit = match rest {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            _ => 86_400,
        };
        return n.checked_mul(unit).filter(|s| *s > 0).map(Tok::Duration);
    }
    let is_decimal = rest.starts_with('.') && rest[1..].bytes().all(|c| c.is_ascii_digit());
    if is_decimal {
        text.parse().ok().map(Tok::Float)
    } else {
        None
    }
}

/// Removes the indentation common to every non-blank line.
fn dedent(body: &str) -> String {
    let body = body.strip_suffix('\n').unwrap_or(body);
    let lines: Vec<&str> = body.split('\n').collect();
    let last_blank = lines.last().is_some_and(|l| l.trim().is_empty());
    let lines = if last_blank {
        &lines[..lines.len() - 1]
    } else {
        &lines[..]
    };
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let cut: Vec<&str> = lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect();
    cut.join("\n")
}

/// Splits `{{ path }}` interpolations out of a string; `Err` names a malformed one.
fn template_parts(text: &str) -> Result<Vec<StrPart>, String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            parts.push(StrPart::Lit(rest[..open].to_string()));
        }
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(rest[open..].chars().take(40).collect());
        };
        let inner = after[..close].trim();
        let segments: Vec<String> = inner.split('.').map(|s| s.trim().to_string()).collect();
        let valid = |s: &String| {
            let mut cs = s.chars();
            cs.next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !segments.iter().all(valid) {
            return Err(format!("{{{{ {inner} }}}}"));
        }
        parts.push(StrPart::Path(segments));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(StrPart::Lit(rest.to_string()));
    }
    Ok(parts)
}
