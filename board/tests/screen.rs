//! Goal: the screen's verdicts on a corpus of hostile and of ordinary mail stay what they
//! were reviewed to be. Method: read `tests/screen_corpus/hostile.jsonl` (each line a
//! message with its expected verdict and the exact sorted set of finding kinds) and
//! `tests/screen_corpus/ordinary.jsonl` (each line a message that must come out clean,
//! with no findings), screen every line and report each disagreement with its line.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use whip_board::limits::SCREEN_DETAIL_CHARS_MAX;
use whip_board::screen::{FindingKind, SCREEN_RULES_VERSION, Screen, Verdict, screen};

#[derive(Deserialize)]
struct Hostile {
    text: String,
    payload: Option<String>,
    verdict: String,
    findings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ordinary {
    text: String,
    payload: Option<String>,
}

/// The non-empty lines of a corpus file, with their numbers (from 1).
fn corpus(name: &str) -> Vec<(usize, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/screen_corpus")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(at, line)| (at + 1, line.to_string()))
        .collect()
}

fn kinds(result: &Screen) -> BTreeSet<&'static str> {
    result.findings.iter().map(|f| f.kind.code()).collect()
}

#[test]
fn hostile_mail_gets_its_verdict_and_findings() {
    let lines = corpus("hostile.jsonl");
    assert!(lines.len() >= 30, "hostile.jsonl has {} lines", lines.len());
    let mut failures = Vec::new();
    for (number, line) in lines {
        let case: Hostile =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("hostile.jsonl:{number}: {e}"));
        let expected = Verdict::parse(&case.verdict)
            .unwrap_or_else(|| panic!("hostile.jsonl:{number}: verdict {:?}", case.verdict));
        for code in &case.findings {
            assert!(
                FindingKind::parse(code).is_some(),
                "hostile.jsonl:{number}: kind {code:?}"
            );
        }
        let mut sorted = case.findings.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted, case.findings,
            "hostile.jsonl:{number}: findings not a sorted set"
        );
        assert_ne!(
            expected,
            Verdict::Clean,
            "hostile.jsonl:{number}: expects clean"
        );
        let result = screen(&case.text, case.payload.as_deref());
        assert_eq!(result.rules_version, SCREEN_RULES_VERSION);
        let found = kinds(&result);
        let wanted: BTreeSet<&str> = case.findings.iter().map(String::as_str).collect();
        if result.verdict != expected || found != wanted {
            failures.push(format!(
                "hostile.jsonl:{number}: expected {} {wanted:?}, got {} {:?}",
                expected.code(),
                result.verdict.code(),
                result.findings
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn ordinary_mail_is_clean() {
    let lines = corpus("ordinary.jsonl");
    assert!(
        lines.len() >= 30,
        "ordinary.jsonl has {} lines",
        lines.len()
    );
    let mut failures = Vec::new();
    for (number, line) in lines {
        let case: Ordinary =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("ordinary.jsonl:{number}: {e}"));
        let result = screen(&case.text, case.payload.as_deref());
        if result.verdict != Verdict::Clean || !result.findings.is_empty() {
            failures.push(format!(
                "ordinary.jsonl:{number}: got {} {:?}",
                result.verdict.code(),
                result.findings
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn verdicts_and_findings_are_bounded_and_repeatable() {
    for name in ["hostile.jsonl", "ordinary.jsonl"] {
        for (number, line) in corpus(name) {
            let case: Ordinary = match serde_json::from_str::<Hostile>(&line) {
                Ok(hostile) => Ordinary {
                    text: hostile.text,
                    payload: hostile.payload,
                },
                Err(_) => {
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{name}:{number}: {e}"))
                }
            };
            let first = screen(&case.text, case.payload.as_deref());
            assert_eq!(
                first,
                screen(&case.text, case.payload.as_deref()),
                "{name}:{number}"
            );
            for finding in &first.findings {
                let chars = finding.detail.chars().count();
                assert!(
                    chars <= SCREEN_DETAIL_CHARS_MAX,
                    "{name}:{number}: detail of {chars} chars"
                );
            }
        }
    }
}
