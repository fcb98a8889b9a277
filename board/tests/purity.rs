//! Goal: `board/src` stays a pure state machine. Method: strip comments from every source
//! file and look for names that would bring in clocks, randomness, threads, files,
//! sockets or storage engines; any hit fails with file and line.

use std::path::Path;

/// Identifiers that must not appear in code.
const FORBIDDEN_WORDS: &[&str] = &[
    "SystemTime",
    "Instant",
    "rand",
    "thread_rng",
    "OsRng",
    "tokio",
    "sled",
    "redb",
    "thread",
    "spawn",
    "File",
    "TcpStream",
    "UdpSocket",
    "openraft",
];

/// Paths that must not appear in code.
const FORBIDDEN_PATHS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::env",
    "std::process",
    "std::thread",
    "Utc::now",
    // chrono's `Local` reads the clock and the host's time zone; every way to name or use
    // it is listed, so that other names ending in `Local` (`Tier::Local`) stay allowed.
    "chrono::Local",
    "Local::now",
    "Local::today",
    "Local.",
    "<Local>",
    "&Local",
    "(Local",
];

fn code_of(line: &str) -> &str {
    match line.find("//") {
        Some(at) => &line[..at],
        None => line,
    }
}

fn hits(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = code_of(line);
        let words = code.split(|c: char| !(c.is_alphanumeric() || c == '_'));
        for word in words.filter(|w| FORBIDDEN_WORDS.contains(w)) {
            found.push((number + 1, word.to_string()));
        }
        for path in FORBIDDEN_PATHS.iter().filter(|p| code.contains(**p)) {
            found.push((number + 1, path.to_string()));
        }
    }
    found
}

#[test]
fn board_src_has_no_forbidden_names() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut failures = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&src).expect("board/src is readable") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            files += 1;
            let text = std::fs::read_to_string(&path).expect("source is readable");
            for (line, name) in hits(&text) {
                failures.push(format!("{}:{line}: {name}", path.display()));
            }
        }
    }
    assert!(
        files >= 10,
        "found only {files} source files in {}",
        src.display()
    );
    assert!(
        failures.is_empty(),
        "forbidden names in board/src:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_check_catches_names_in_code_but_not_in_comments() {
    assert_eq!(hits("// reads no SystemTime").len(), 0);
    assert_eq!(hits("let t = std::time::SystemTime::now();").len(), 1);
    assert_eq!(hits("use std::fs::read;").len(), 1);
    assert_eq!(hits("let r = rand::random();").len(), 1);
    assert_eq!(hits("let operand = brand;").len(), 0);
    assert_eq!(hits("use chrono::Local;").len(), 1);
    assert_eq!(hits("let now = Local::now();").len(), 1);
    assert_eq!(hits("let t = at.with_timezone(&Local);").len(), 1);
    assert_eq!(hits("let t = Local.timestamp_millis_opt(0);").len(), 1);
    assert_eq!(hits("if task.tier == Tier::Local {").len(), 0);
}
