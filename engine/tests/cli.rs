//! Goal: `whip check` keeps its CLI contract: `== FILE` on success, rustc-like diagnostics on
//! stderr, a stable JSON report, `--explain`, `--root`, and exit codes 0, 1 and 2.
//!
//! Method: call `cli::check` directly with files from the corpus and compare the outputs.

use whip_engine::cli::{CheckOptions, check};

fn run(files: &[&str], root: Option<&str>, json: bool, explain: bool) -> (i32, String, String) {
    let opts = CheckOptions {
        files: files.iter().map(Into::into).collect(),
        root: root.map(Into::into),
        json,
        explain,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = check(&opts, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

const SHIP: &str = "tests/check/valid/seed_lease_ship.whip";
const BAD: &str = "tests/check/invalid/lease_contended_unhandled.whip";

#[test]
fn success_prints_the_file_header() {
    let (code, out, err) = run(&[SHIP], None, false, false);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "== tests/check/valid/seed_lease_ship.whip\n", "")
    );
}

#[test]
fn errors_exit_one_with_rustc_like_text() {
    let (code, out, err) = run(&[SHIP, BAD], None, false, false);
    assert_eq!(code, 1);
    assert_eq!(out, format!("== {SHIP}\n"));
    assert!(
        err.starts_with(
            "error: rule `r` does not handle the `contended` outcome of lease `slot`\n"
        )
    );
    assert!(err.contains(&format!("  --> {BAD}:59:3\n")));
    assert!(err.contains("  = help: "));
}

#[test]
fn usage_errors_exit_two() {
    assert_eq!(run(&[], None, false, false).0, 2);
    assert_eq!(run(&[SHIP], Some(" "), false, false).0, 2);
}

#[test]
fn missing_file_is_an_error() {
    let (code, _, err) = run(&["tests/check/nope.whip"], None, false, false);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error: cannot read `tests/check/nope.whip`"),
        "{err}"
    );
}

#[test]
fn json_report_is_stable() {
    let (code, out, err) = run(&[BAD], None, true, false);
    assert_eq!((code, err.as_str()), (1, ""));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["ok"], false);
    assert_eq!(v["errors"], 1);
    let d = &v["files"][0]["diagnostics"][0];
    assert_eq!(d["code"], "lease.unhandled_outcome");
    assert_eq!(d["severity"], "error");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(59), Some(3))
    );
    assert!(d["help"].as_str().unwrap().contains("contended"));
}

#[test]
fn explain_shows_then_and_after() {
    let file = "tests/check/valid/then_chain_child.whip";
    let (code, out, _) = run(&[file], Some("Shop"), false, true);
    assert_eq!(code, 0);
    assert!(
        out.contains("after charge/e1 (pause) succeeds as pause (from then)"),
        "{out}"
    );
    let (_, json, _) = run(&[file], Some("Shop"), true, true);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["files"][0]["ir"]["root"], "Shop");
}

#[test]
fn root_must_name_a_workflow() {
    let file = "tests/check/valid/then_chain_child.whip";
    let (code, _, err) = run(&[file], Some("Shopp"), false, false);
    assert_eq!(code, 1);
    assert!(
        err.contains("root workflow `Shopp` is not declared"),
        "{err}"
    );
    assert!(err.contains("did you mean `Shop`?"), "{err}");
}

#[test]
fn includes_bring_declarations() {
    let dir = std::env::temp_dir().join(format!("whip-include-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lib.whip"), "class Done {\n  note string\n}\n").unwrap();
    let main = concat!(
        "include \"lib.whip\"\n\nworkflow W\n\noutput result Done\n\n",
        "rule r\n  when started\n=> {\n  complete result { note 1 }\n}\n",
    );
    std::fs::write(dir.join("main.whip"), main).unwrap();
    let path = dir.join("main.whip");
    let (code, _, err) = run(&[path.to_str().unwrap()], None, false, false);
    assert_eq!(code, 1);
    assert!(err.contains("field `Done.note` expects `string`"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Regression: `include "/dev/zero"` read forever (fs::read of an endless device) and an
/// include of a FIFO blocked in open. Both are refused as unreadable, at once.
#[test]
fn includes_of_devices_and_fifos_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.whip");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    for target in ["/dev/zero", fifo.to_str().unwrap()] {
        let main = dir.path().join("main.whip");
        std::fs::write(&main, format!("include \"{target}\"\n\nworkflow W\n")).unwrap();
        let started = std::time::Instant::now();
        let (code, _, err) = run(&[main.to_str().unwrap()], None, false, false);
        assert_eq!(code, 1, "{target}");
        assert!(err.contains("not a regular file"), "{target}: {err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{target}"
        );
    }
}
