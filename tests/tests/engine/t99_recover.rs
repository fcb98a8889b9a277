//! Goal: `whip recover` reconciles an `exec` run whose worker was SIGKILLed mid-run, as the
//! seed says, and nothing runs twice: with the executor's durable answer the run resolves
//! from that evidence and its `succeeds` branch runs; when the executor lost the run too
//! (killed and restarted) there is no evidence, so the effect ends `failed` with the run's
//! `runtime.recovery_uncertain`, the `fails` branch reacts, and a later worker does not run
//! it again. Method: real `whip executor` and `whip worker` processes, SIGKILLed, on the
//! embedded store.

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use whip_tests::executor::ExecutorProcess;

use crate::ok;

const PROGRAM: &str = r#"use std.script

workflow Once

output result Done

class Done {
  note string
}

rule once when started => {
  exec ["sh", "-c", "echo started >> runs.txt; sleep SECS; echo done >> runs.txt"] timeout 60s as b
  after b succeeds {
    complete result { note "ran once" }
  }
  after b fails {
    complete result { note "failed: {{ b.reason }}" }
  }
}
"#;

fn whip(dir: &Path, executor: &ExecutorProcess, args: &[&str]) -> Output {
    Command::new(crate::bin())
        .current_dir(dir)
        .args(args)
        .env("WHIP_EXECUTOR_URL", executor.url())
        .env("WHIP_EXECUTOR_TOKEN", &executor.token)
        .env_remove("WHIP_CELL")
        .output()
        .expect("run whip")
}

fn json(out: &Output) -> Value {
    serde_json::from_str(ok(out).trim()).expect("json")
}

fn wait_for(secs: u64, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Start an instance of the program (its command sleeps `secs`), step it, and start a
/// worker on it; returns the instance and the worker, once the command has started.
fn started_run(d: &Path, executor: &ExecutorProcess, secs: u64) -> (String, Child) {
    std::fs::write(
        d.join("once.whip"),
        PROGRAM.replace("SECS", &secs.to_string()),
    )
    .unwrap();
    let id = json(&whip(d, executor, &["--json", "start", "once.whip"]))["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&whip(d, executor, &["step", &id]));
    let worker = Command::new(crate::bin())
        .current_dir(d)
        .args(["worker", &id])
        .env("WHIP_EXECUTOR_URL", executor.url())
        .env("WHIP_EXECUTOR_TOKEN", &executor.token)
        .spawn()
        .unwrap();
    let runs = executor.workspace(&id).join("runs.txt");
    wait_for(30, "the command to start", || runs.exists());
    (id, worker)
}

fn status(d: &Path, executor: &ExecutorProcess, id: &str) -> Value {
    json(&whip(d, executor, &["--json", "status", id]))
}

#[test]
fn a_run_with_evidence_is_resolved_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let executor = ExecutorProcess::start(d, "tok-evidence");
    let (id, mut worker) = started_run(d, &executor, 1);
    worker.kill().unwrap();
    worker.wait().unwrap();
    let path = format!("/v1/runs/{id}/r000001");
    wait_for(30, "the run to finish at the executor", || {
        executor.call("GET", &path, None).1["state"] == "finished"
    });
    let report = json(&whip(d, &executor, &["--json", "recover", &id]));
    assert_eq!(report["runs"][0]["resolution"], "from_evidence", "{report}");
    assert_eq!(report["runs"][0]["state"], "completed", "{report}");
    let st = status(d, &executor, &id);
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(st["terminal"]["payload"]["note"], "ran once");
    let runs = std::fs::read_to_string(executor.workspace(&id).join("runs.txt")).unwrap();
    assert_eq!(runs, "started\ndone\n", "run exactly once");
    let trace = json(&whip(d, &executor, &["--json", "trace", &id, "--check"]));
    assert_eq!(trace["conformance"], "ok", "{trace}");
}

#[test]
fn a_run_without_evidence_ends_uncertain_and_is_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut executor = ExecutorProcess::start(d, "tok-lost");
    let (id, mut worker) = started_run(d, &executor, 30);
    // The worker and the executor die mid-run: nobody holds its answer.
    worker.kill().unwrap();
    worker.wait().unwrap();
    executor.kill();
    let (addr, root) = (executor.addr.clone(), executor.root.clone());
    drop(executor);
    let executor = ExecutorProcess::start_at(d, &addr, &root, "tok-lost").expect("restarts");
    let report = json(&whip(d, &executor, &["--json", "recover", &id]));
    let run = &report["runs"][0];
    assert_eq!(
        (run["resolution"].as_str(), run["state"].as_str()),
        (Some("uncertain"), Some("failed")),
        "{report}"
    );
    let st = status(d, &executor, &id);
    assert_eq!(
        st["terminal"]["payload"]["note"], "failed: recovery_uncertain",
        "{st}"
    );
    let runs = json(&whip(d, &executor, &["--json", "runs", &id]));
    assert_eq!(
        runs[0]["diagnostic"], "runtime.recovery_uncertain",
        "{runs}"
    );
    // A later worker and a second recover change nothing: it never runs again silently.
    ok(&whip(d, &executor, &["worker", &id]));
    let again = json(&whip(d, &executor, &["--json", "recover", &id]));
    assert_eq!(again["runs"], Value::Array(vec![]), "{again}");
    let text = std::fs::read_to_string(executor.workspace(&id).join("runs.txt")).unwrap();
    assert_eq!(text.matches("started").count(), 1, "{text}");
    let trace = json(&whip(d, &executor, &["--json", "trace", &id, "--check"]));
    assert_eq!(trace["conformance"], "ok", "{trace}");
}

const WRITES: &str = r#"use std.script

workflow Writes

output result Done

class Done {
  note string
}

rule write when started => {
  exec ["sh", "-c", "echo one > a.txt"] as w
  after w succeeds {
    timer 60s as hold
    after hold completes {
      complete result { note "held" }
    }
  }
}
"#;

#[test]
fn checkpoint_and_restore_rewind_the_workspace_files_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let executor = ExecutorProcess::start(d, "tok-cut");
    std::fs::write(d.join("writes.whip"), WRITES).unwrap();
    let id = json(&whip(d, &executor, &["--json", "start", "writes.whip"]))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let cut = json(&whip(
        d,
        &executor,
        &["--json", "checkpoint", &id, "--cut-id", "c0"],
    ));
    assert_eq!(cut["files"]["files"], 0, "an empty workspace: {cut}");
    for _ in 0..3 {
        ok(&whip(d, &executor, &["worker", &id]));
    }
    let written = executor.workspace(&id).join("a.txt");
    assert!(written.exists(), "the exec wrote its file");
    let restored = json(&whip(d, &executor, &["--json", "restore", &id, "c0"]));
    assert_eq!(restored["restored"], "c0", "{restored}");
    assert!(!written.exists(), "the files plane is back at the cut");
    let trace = json(&whip(d, &executor, &["--json", "trace", &id, "--check"]));
    assert_eq!(trace["conformance"], "ok", "{trace}");
    // The head before the restore is a cut too: its files come back with it.
    let auto = restored["auto_checkpoint"].as_str().unwrap();
    json(&whip(d, &executor, &["--json", "restore", &id, auto]));
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "one\n");
}
