//! Goal: `whip check` accepts every valid program of the corpus and refuses every invalid one
//! with exactly the expected diagnostics.
//!
//! Method: each `tests/check/{valid,invalid}/NAME.whip` is checked through `cli::check` (valid
//! programs with `--explain`, so their lowering is pinned too); stdout, stderr and the exit
//! code must equal `NAME.expected` next to it. `REWRITE=1 cargo test -p whip-engine --test
//! check` regenerates the expectations; review the diff.

use std::path::{Path, PathBuf};

use whip_engine::cli::{CheckOptions, check};

fn corpus(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "whip"))
        .collect();
    files.sort();
    files
}

/// A first line `# whip-check: --root W` passes `--root W`.
fn root_of(path: &Path) -> Option<String> {
    let text = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&text);
    let first = text.lines().next()?;
    first
        .strip_prefix("# whip-check: --root ")
        .map(|r| r.trim().to_string())
}

fn run(path: &Path, explain: bool) -> String {
    let opts = CheckOptions {
        files: vec![path.to_path_buf()],
        root: root_of(path),
        json: false,
        explain,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = check(&opts, &mut out, &mut err);
    format!(
        "exit: {code}\n--- stdout\n{}--- stderr\n{}",
        String::from_utf8(out).expect("utf-8"),
        String::from_utf8(err).expect("utf-8")
    )
}

fn compare(path: &Path, actual: &str) -> Option<String> {
    let expected_path = path.with_extension("expected");
    if std::env::var_os("REWRITE").is_some() {
        std::fs::write(&expected_path, actual).expect("write expectation");
        return None;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    (expected != actual).then(|| {
        format!(
            "{}:\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        )
    })
}

#[test]
fn valid_programs_check_clean() {
    let mut failures = Vec::new();
    let files = corpus("tests/check/valid");
    assert!(files.len() >= 3, "the corpus lost its seed programs");
    for path in files {
        let actual = run(&path, true);
        assert!(
            actual.starts_with("exit: 0\n"),
            "{} must check clean:\n{actual}",
            path.display()
        );
        assert!(
            !actual.contains("\nerror: "),
            "{}: {actual}",
            path.display()
        );
        failures.extend(compare(&path, &actual));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn invalid_programs_report_expected_diagnostics() {
    let mut failures = Vec::new();
    for path in corpus("tests/check/invalid") {
        let actual = run(&path, false);
        assert!(
            actual.starts_with("exit: 1\n"),
            "{} must fail:\n{actual}",
            path.display()
        );
        failures.extend(compare(&path, &actual));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
