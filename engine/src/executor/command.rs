//! `exec "make all"`: a command line split into argv the way a user reads it, without a
//! shell. Words are separated by unquoted whitespace; `'…'` quotes everything, `"…"` quotes
//! all but `\"` and `\\`, and outside quotes `\` escapes the next character. A `{{ path }}`
//! value is one piece of the word it sits in and is never split or unquoted, so a value
//! cannot add arguments. Shell syntax (pipes, redirections, `;`, `&`, `$`, backquotes,
//! globs, `~`) is refused rather than passed on literally: nothing would run it.

/// A piece of a command template: literal text, or an interpolated value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Source text, split and unquoted.
    Text(&'a str),
    /// An interpolated value, taken verbatim.
    Value(String),
}

/// Why a command line cannot become an argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// A quote that is never closed.
    UnclosedQuote(char),
    /// A character only a shell gives a meaning to.
    ShellSyntax(char),
    /// No words at all.
    Empty,
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::UnclosedQuote(q) => write!(f, "the quote {q} is never closed"),
            CommandError::ShellSyntax(c) => write!(f, "shell syntax `{c}`"),
            CommandError::Empty => write!(f, "no program"),
        }
    }
}

/// Characters a shell would interpret outside quotes.
const SHELL_SYNTAX: &[char] = &['|', '&', ';', '<', '>', '(', ')', '$', '`', '*', '?', '~'];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

/// Splits `pieces` into argv.
pub fn split(pieces: &[Piece<'_>]) -> Result<Vec<String>, CommandError> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = Quote::None;
    for piece in pieces {
        let text = match piece {
            Piece::Value(v) => {
                word.get_or_insert_with(String::new).push_str(v);
                continue;
            }
            Piece::Text(t) => *t,
        };
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Quote::None, c) if c.is_whitespace() => words.extend(word.take()),
                (Quote::None, '\'') => {
                    word.get_or_insert_with(String::new);
                    quote = Quote::Single;
                }
                (Quote::None, '"') => {
                    word.get_or_insert_with(String::new);
                    quote = Quote::Double;
                }
                (Quote::Single, '\'') | (Quote::Double, '"') => quote = Quote::None,
                (Quote::None, '\\') | (Quote::Double, '\\') => {
                    // A backslash that ends the text stands for itself.
                    let next = chars.next().unwrap_or('\\');
                    let keep = quote == Quote::Double && !matches!(next, '"' | '\\');
                    let w = word.get_or_insert_with(String::new);
                    if keep {
                        w.push('\\');
                    }
                    w.push(next);
                }
                (Quote::None, c) if SHELL_SYNTAX.contains(&c) => {
                    return Err(CommandError::ShellSyntax(c));
                }
                (Quote::Double, c @ ('$' | '`')) => return Err(CommandError::ShellSyntax(c)),
                (_, c) => word.get_or_insert_with(String::new).push(c),
            }
        }
    }
    match quote {
        Quote::Single => return Err(CommandError::UnclosedQuote('\'')),
        Quote::Double => return Err(CommandError::UnclosedQuote('"')),
        Quote::None => {}
    }
    words.extend(word);
    if words.is_empty() {
        return Err(CommandError::Empty);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Result<Vec<String>, CommandError> {
        split(&[Piece::Text(s)])
    }

    #[test]
    fn words_quotes_and_escapes_split_as_a_user_reads_them() {
        assert_eq!(words("make  all").unwrap(), ["make", "all"]);
        assert_eq!(
            words(r#"git commit -m "fix the build" 'it''s'"#).unwrap(),
            ["git", "commit", "-m", "fix the build", "its"]
        );
        assert_eq!(
            words(r#"echo a\ b "q\"x" """#).unwrap(),
            ["echo", "a b", "q\"x", ""]
        );
    }

    #[test]
    fn a_value_is_one_piece_of_its_word_and_never_split() {
        let pieces = [
            Piece::Text("make TARGET="),
            Piece::Value("a b; rm -rf /".into()),
            Piece::Text(" go"),
        ];
        assert_eq!(
            split(&pieces).unwrap(),
            ["make", "TARGET=a b; rm -rf /", "go"]
        );
    }

    #[test]
    fn shell_syntax_unclosed_quotes_and_empty_commands_are_refused() {
        assert_eq!(words("ls | wc"), Err(CommandError::ShellSyntax('|')));
        assert_eq!(words("echo \"$HOME\""), Err(CommandError::ShellSyntax('$')));
        assert_eq!(words("echo 'a|b' \"x;y\"").unwrap(), ["echo", "a|b", "x;y"]);
        assert_eq!(words("echo 'oops"), Err(CommandError::UnclosedQuote('\'')));
        assert_eq!(words("   "), Err(CommandError::Empty));
    }
}
