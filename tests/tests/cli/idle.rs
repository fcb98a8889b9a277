//! Goal: `whip run` says what an idle instance waits on, and the engine's settings from the
//! environment are checked, not defaulted. Method: a program whose only effect is an `exec`,
//! run with `--wait` and no executor configured (the effect is blocked, so the run goes
//! idle): its text idle line and its `--json` name the blocked effect, its kind and the
//! reason's category; then `whip run` with a malformed `WHIPPLESCRIPT_WORKER_CONCURRENCY`
//! and `WHIPPLESCRIPT_RUN_LEASE_MS` exits 2 naming the variable.

use std::path::Path;
use std::process::{Command, Output};

use whip_tests::whip_binary;

const PROGRAM: &str = r#"use std.script

workflow Build

output result Done

class Done {
  note string
}

rule build when started => {
  exec ["true"] as b
  after b succeeds { complete result { note "ran" } }
  after b fails { complete result { note "failed" } }
}
"#;

/// `whip ARGS` in `dir` on its embedded store, with no executor and `env` set.
fn whip(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(whip_binary());
    cmd.current_dir(dir)
        .env_remove("WHIP_EXECUTOR_URL")
        .env_remove("WHIP_EXECUTOR_TOKEN")
        .env_remove("WHIPPLESCRIPT_WORKER_CONCURRENCY")
        .env_remove("WHIPPLESCRIPT_RUN_LEASE_MS")
        .env("WHIPPLESCRIPT_STORE", dir.join("store"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args).output().expect("run whip")
}

#[test]
fn run_wait_lists_the_blocked_effects_it_waits_on() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("build.whip"), PROGRAM).unwrap();
    let out = whip(d, &[], &["run", "--wait", "build.whip"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("status running"), "{text}");
    let idle: Vec<&str> = text.lines().filter(|l| l.starts_with("idle")).collect();
    assert_eq!(
        idle,
        ["idle, blocked: x000001 exec provider_config"],
        "{text}"
    );
    // LANGUAGE-AGENTS.md §6: the status says why it stopped, each block its detail.
    let status = text
        .lines()
        .find(|l| l.starts_with("status"))
        .expect("a status line");
    assert!(
        status.starts_with(
            "status running (idle, not terminal — 1 blocked effect; run `whip \
                            effects ins_"
        ) && status.ends_with("` for detail)"),
        "{status}"
    );
    assert!(
        text.contains("\n  x000001 exec blocked: executor not configured\n"),
        "{text}"
    );

    let out = whip(d, &[], &["--json", "run", "--wait", "build.whip"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "running", "{report}");
    let blocked = &report["blocked"];
    assert_eq!(blocked.as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(blocked[0]["id"], "x000001");
    assert_eq!(blocked[0]["kind"], "exec");
    assert_eq!(blocked[0]["state"], "blocked");
    assert_eq!(
        blocked[0]["policy_block"],
        serde_json::json!({"category": "provider_config", "detail": "executor not configured"})
    );
}

#[test]
fn malformed_engine_settings_in_the_environment_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("build.whip"), PROGRAM).unwrap();
    for name in [
        "WHIPPLESCRIPT_WORKER_CONCURRENCY",
        "WHIPPLESCRIPT_RUN_LEASE_MS",
    ] {
        for bad in ["0", "many"] {
            let out = whip(d, &[(name, bad)], &["run", "build.whip"]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{name}={bad}: {err}");
            let want = format!("{name} must be a whole number of at least 1, not `{bad}`");
            assert!(err.contains(&want), "{err}");
        }
    }
    let out = whip(
        d,
        &[("WHIPPLESCRIPT_WORKER_CONCURRENCY", "2")],
        &["run", "build.whip"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
