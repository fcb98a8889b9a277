//! Goal: the front end never panics and never loops, whatever the input.
//!
//! Method: proptest feeds random text built from WhippleScript tokens, random bytes, and
//! seed programs with random deletions, insertions and swaps through `check_source`
//! (lexer, parser, checker, lowering). Fixed cases cover megabyte lines, deep nesting and
//! unterminated strings. Each case must finish; proptest prints the failing seed.

use proptest::prelude::*;
use whip_engine::cli::check_source;

const SEEDS: &[&str] = &[
    include_str!("check/valid/seed_lease_ship.whip"),
    include_str!("check/valid/seed_counter_budget.whip"),
    include_str!("check/valid/seed_ledger_decisions.whip"),
    include_str!("check/valid/then_chain_child.whip"),
    include_str!("check/valid/tracker_backlog.whip"),
];

const WORDS: &[&str] = &[
    "workflow",
    "rule",
    "when",
    "=>",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "after",
    "then",
    "<-",
    "as",
    "where",
    "acquire",
    "for",
    "held",
    "contended",
    "done",
    "->",
    "record",
    "class",
    "string",
    "lease",
    "ttl",
    "10m",
    "0s",
    "1.5h",
    "\"",
    "\"\"\"",
    "{{",
    "}}",
    "x",
    "y.z",
    "==",
    "and",
    "not",
    "in",
    "count(",
    "@service",
    "\n",
    " ",
    "#",
    "//",
    "complete",
    "result",
    "table",
    "enum",
    "counter",
    "ledger",
    "tracker",
    "has",
    "ready",
    "issue",
    "fact",
    "started",
    "-",
];

fn run(src: &str) {
    let report = check_source("fuzz.whip", src, None);
    for d in &report.diags {
        let _ = report.sources.render(d);
        let _ = report.sources.to_json(d);
    }
    if let Some(ir) = &report.ir {
        let _ = ir.explain();
    }
}

fn mutate(seed: &str, edits: &[(usize, u8, u8)]) -> String {
    let mut bytes = seed.as_bytes().to_vec();
    for &(at, op, byte) in edits {
        if bytes.is_empty() {
            break;
        }
        let i = at % bytes.len();
        match op % 3 {
            0 => {
                bytes.remove(i);
            }
            1 => bytes.insert(i, byte),
            _ => {
                let j = (i * 7 + 3) % bytes.len();
                bytes.swap(i, j);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_tokens_never_panic(picks in prop::collection::vec(0..WORDS.len(), 0..200)) {
        let src: String = picks.iter().map(|i| WORDS[*i]).collect::<Vec<_>>().join(" ");
        run(&src);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        run(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_seeds_never_panic(
        seed in 0..SEEDS.len(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..12),
    ) {
        run(&mutate(SEEDS[seed], &edits));
    }
}

#[test]
fn megabyte_line_gets_a_diagnostic() {
    let line = "x".repeat(1 << 20);
    let report = check_source("big.whip", &line, None);
    assert!(report.errors() > 0);
    let rendered = report.sources.render(&report.diags[0]);
    assert!(rendered.len() < 1000, "snippets are windowed");
    let string = format!("workflow W\nclass A {{ s \"{} }}", "y".repeat(1 << 20));
    let report = check_source("big.whip", &string, None);
    assert!(
        report
            .diags
            .iter()
            .any(|d| d.message == "unterminated string")
    );
}

#[test]
fn deep_nesting_gets_a_diagnostic() {
    let blocks = "after t held {\n".repeat(100_000);
    let src = format!("workflow W\nrule r\n when started\n=> {{\n timer 1s as t\n{blocks}}}\n");
    let report = check_source("deep.whip", &src, None);
    assert!(report.diags.iter().any(|d| d.message.contains("nesting")));
    for open in ["(", "[", "{", "not ", "-"] {
        let src = format!(
            "workflow W\nrule r\n when started\n=> {{\n complete result {}\n}}\n",
            open.repeat(100_000)
        );
        let report = check_source("deep.whip", &src, None);
        assert!(report.errors() > 0, "{open}");
        if open != "{" {
            assert!(
                report.diags.iter().any(|d| d.message.contains("nesting")),
                "{open}"
            );
        }
    }
}

#[test]
fn many_errors_are_capped() {
    let src = "workflow W\n".to_string() + &"rule r\n when started\n=> { bogus }\n".repeat(1000);
    let report = check_source("many.whip", &src, None);
    assert!(report.diags.len() <= whip_engine::limits::DIAGNOSTICS_PER_FILE_MAX + 1);
}
