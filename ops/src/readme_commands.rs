//! The README's command list parses (issue 30: lines that left out required flags).
//!
//! Method: every line of the first code block under `## Commands`, its continuation lines
//! joined and its comment cut, is spelled out into the command lines it stands for, and
//! clap must accept each one. `a | b` at the top level is another command beside the first
//! (`whip kv get KEY | put KEY VALUE`: `b` replaces the subcommand it names; a `--flag`
//! replaces the first's last flag); `x|y` in one word is each in turn; `[…]` is written
//! out (its first alternative; left out when it says `…`); a placeholder in capitals
//! (`KEY`, `ID=ADDR`, `WS-N`) is `1`.

use clap::{CommandFactory, Parser};

use crate::Cli;

/// The logical lines of the command list: continuations joined, comments cut.
fn command_lines(readme: &str) -> Vec<String> {
    let section = &readme[readme.find("\n## Commands\n").expect("a Commands section")..];
    let start = section.find("\n```\n").expect("a code block") + 5;
    let block = &section[start..start + section[start..].find("\n```").expect("its end")];
    let mut lines: Vec<String> = Vec::new();
    for line in block.lines() {
        let line = cut_comment(line);
        match (line.starts_with(char::is_whitespace), lines.last_mut()) {
            (true, Some(last)) => *last = format!("{last} {}", line.trim()),
            _ => lines.push(line.trim().to_string()),
        }
    }
    lines.retain(|l| !l.is_empty());
    lines
}

/// The line without its `# comment` or `   (remark)`.
fn cut_comment(line: &str) -> &str {
    let comment = line.find(" # ").or_else(|| line.find("   ("));
    comment.map_or(line, |at| &line[..at])
}

/// Split at ` | ` outside brackets and quotes.
fn segments(line: &str) -> Vec<String> {
    let (mut depth, mut quote, mut out, mut current) = (0, None, Vec::new(), String::new());
    let chars: Vec<char> = line.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '\'' | '"' if quote.is_none() => quote = Some(c),
            c if quote == Some(c) => quote = None,
            '[' if quote.is_none() => depth += 1,
            ']' if quote.is_none() => depth -= 1,
            '|' if quote.is_none() && depth == 0 && chars.get(i + 1) == Some(&' ') => {
                out.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current.trim().to_string());
    out
}

/// `[…]` written out: its content, or its first ` | ` alternative, or nothing for `[… …]`.
fn open_brackets(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let close = open + rest[open..].find(']').expect("a closed bracket");
        let inner = &rest[open + 1..close];
        if !inner.contains('…') {
            out.push_str(inner.split(" | ").next().unwrap_or(""));
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Shell words: (text without quotes, whether it was quoted).
fn words(text: &str) -> Vec<(String, bool)> {
    let (mut out, mut word, mut quote, mut quoted) = (Vec::new(), String::new(), None, false);
    for c in text.chars() {
        match c {
            '\'' | '"' if quote.is_none() => (quote, quoted) = (Some(c), true),
            c if quote == Some(c) => quote = None,
            c if c.is_whitespace() && quote.is_none() => {
                if !word.is_empty() || quoted {
                    out.push((std::mem::take(&mut word), quoted));
                }
                quoted = false;
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() || quoted {
        out.push((word, quoted));
    }
    out
}

/// A placeholder part (`KEY`, `WS-N`) is `1`, an address (`ADDR`) `127.0.0.1:7000`, a
/// time (`RFC3339`) one in RFC 3339; `ID=ADDR` is `1=127.0.0.1:7000`.
fn fill(word: &str) -> String {
    let placeholder = |part: &str| {
        part.starts_with(|c: char| c.is_ascii_uppercase())
            && part
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-')
    };
    let mut out = String::new();
    let mut part = String::new();
    for c in word.chars().chain(std::iter::once('\0')) {
        if matches!(c, '=' | '/' | ',' | '\0') {
            out.push_str(match part.as_str() {
                "ADDR" => "127.0.0.1:7000",
                "RFC3339" => "2026-12-01T00:00:00Z",
                part if placeholder(part) => "1",
                part => part,
            });
            part.clear();
            if c != '\0' {
                out.push(c);
            }
        } else {
            part.push(c);
        }
    }
    out
}

/// Every spelling of `words`: each `x|y` word in turn (a cartesian product).
fn spellings(words: &[(String, bool)]) -> Vec<Vec<String>> {
    let mut all = vec![Vec::new()];
    for (word, quoted) in words {
        let choices: Vec<String> = match quoted {
            true => vec![word.clone()],
            false => word.split('|').map(fill).collect(),
        };
        all = all
            .iter()
            .flat_map(|line| {
                choices.iter().map(move |c| {
                    let mut next = line.clone();
                    next.push(c.clone());
                    next
                })
            })
            .collect();
    }
    all
}

/// The words a later segment `rest` keeps of the first segment's `first`: up to the
/// command that has `rest`'s first word as a subcommand, or (for a `--flag`) all but
/// `first`'s last flag.
fn prefix_for(first: &[String], rest: &str) -> Vec<String> {
    if rest.starts_with("--") {
        let last_flag = first.iter().rposition(|w| w.starts_with("--"));
        return first[..last_flag.unwrap_or(first.len())].to_vec();
    }
    let name = rest.split([' ', '|']).next().unwrap_or("");
    // `command` is what `first[..depth]` names; the deepest that knows `name` wins.
    let mut command = Cli::command();
    let mut keep = None;
    for depth in 1..=first.len() {
        if command.find_subcommand(name).is_some() {
            keep = Some(depth);
        }
        match first.get(depth).and_then(|w| command.find_subcommand(w)) {
            Some(sub) => command = sub.clone(),
            None => break,
        }
    }
    let keep = keep.unwrap_or_else(|| panic!("no command has `{name}`: {first:?}"));
    first[..keep].to_vec()
}

/// The command lines one README line stands for.
fn expand(line: &str) -> Vec<Vec<String>> {
    let line = match line.split_once(' ') {
        Some((env, rest)) if env.contains('=') => rest,
        _ => line,
    };
    let mut lines = Vec::new();
    let mut first: Option<Vec<Vec<String>>> = None;
    for segment in segments(line) {
        let spelled = spellings(&words(&open_brackets(&segment)));
        match &first {
            None => {
                lines.extend(spelled.iter().cloned());
                first = Some(spelled);
            }
            Some(firsts) => {
                let prefix = prefix_for(&firsts[0], &segment);
                lines.extend(spelled.into_iter().map(|s| [prefix.clone(), s].concat()));
            }
        }
    }
    lines
}

#[test]
fn every_line_of_the_readme_command_list_parses() {
    let readme = include_str!("../../README.md");
    let lines = command_lines(readme);
    assert!(lines.len() > 40, "the command list: {lines:#?}");
    let mut failures = Vec::new();
    let mut parsed = 0;
    for line in &lines {
        for argv in expand(line) {
            parsed += 1;
            if let Err(e) = Cli::try_parse_from(&argv) {
                let first = e.to_string().lines().next().unwrap_or("").to_string();
                failures.push(format!("{line}\n    {argv:?}\n    {first}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "README command lines that do not parse:\n{}",
        failures.join("\n")
    );
    assert!(parsed > lines.len(), "alternatives are spelled out");
}

#[test]
fn lines_are_spelled_out_as_the_method_says() {
    let expand = |line: &str| -> Vec<String> { expand(line).iter().map(|a| a.join(" ")).collect() };
    assert_eq!(
        expand("whip kv get KEY | put KEY VALUE [--ttl 30s]"),
        ["whip kv get 1", "whip kv put 1 1 --ttl 30s"]
    );
    assert_eq!(
        expand("whip revise ID FILE --dry-run | --cancel keep|queued"),
        [
            "whip revise 1 1 --dry-run",
            "whip revise 1 1 --cancel keep",
            "whip revise 1 1 --cancel queued"
        ]
    );
    assert_eq!(
        expand("whip mail quarantine [ADDRESS] [--release ID | --drop ID] [--choice b …]"),
        ["whip mail quarantine 1 --release 1"]
    );
    assert_eq!(
        expand("WHIP_X=T whip cell add-learner --member ID=ADDR"),
        ["whip cell add-learner --member 1=127.0.0.1:7000"]
    );
    assert_eq!(cut_comment("whip a   # note"), "whip a  ");
}
