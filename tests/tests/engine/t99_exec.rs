//! Goal: `exec` runs through the compute plane as the seed says: the command runs in the
//! instance's workspace and each outcome takes its branch (exit 0 `succeeds`, non-zero and
//! a spawn failure `fails`, a timeout `times out`), with evidence that names env variables
//! but never their values; without an executor (or with a wrong token, or a dead one) the
//! effect is `blocked` with the reason, recorded once per reason, and a worker with the
//! executor configured clears it; a worker killed mid-`exec` leaves the run to
//! `whip recover` and nothing runs twice; on a fabric, a worker on another node than the
//! run's clears the block. Method: a real `whip executor` process with a temp root, real
//! `whip run|worker` processes on the embedded store (and on three `whip node serve`
//! processes), `WHIP_EXECUTOR_URL` and `WHIP_EXECUTOR_TOKEN` in their environment.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use whip_tests::executor::ExecutorProcess;

use crate::{ok, run_id};

const TEMPLATE: &str = r#"use std.script

workflow Build

output result Done

class Done {
  note string
}

rule build when started => {
  exec ARGV CLAUSES as b
  after b succeeds {
    complete result { note "succeeded: {{ b.stdout }}" }
  }
  after b fails {
    complete result { note "failed {{ b.exit_code }}: {{ b.stderr }}{{ b.error }}" }
  }
  after b times out {
    complete result { note "timed out after {{ b.duration_ms }} ms" }
  }
}
"#;

/// Write `NAME.whip` running `argv` with `clauses`.
fn program(dir: &Path, name: &str, argv: &str, clauses: &str) -> String {
    let text = TEMPLATE.replace("ARGV", argv).replace("CLAUSES", clauses);
    std::fs::write(dir.join(format!("{name}.whip")), text).unwrap();
    format!("{name}.whip")
}

/// `whip ARGS` in `dir` on the embedded store, with exactly the executor settings given.
fn whip(dir: &Path, executor: Option<(&str, &str)>, args: &[&str]) -> Output {
    whip_at(dir, None, executor, args)
}

/// `whip ARGS` in `dir` on the embedded store or (`cell`) a fabric node.
fn whip_at(
    dir: &Path,
    cell: Option<&str>,
    executor: Option<(&str, &str)>,
    args: &[&str],
) -> Output {
    let mut cmd = Command::new(crate::bin());
    cmd.current_dir(dir)
        .args(args)
        .env_remove("WHIP_EXECUTOR_URL")
        .env_remove("WHIP_EXECUTOR_TOKEN")
        .env_remove("WHIP_CELL");
    if let Some(cell) = cell {
        cmd.args(["--cell", cell]);
    }
    if let Some((url, token)) = executor {
        cmd.env("WHIP_EXECUTOR_URL", url)
            .env("WHIP_EXECUTOR_TOKEN", token);
    }
    cmd.output().expect("run whip")
}

fn json(out: &Output) -> Value {
    serde_json::from_str(ok(out).trim()).expect("JSON")
}

fn evidence(dir: &Path, id: &str) -> Value {
    let all = json(&whip(dir, None, &["--json", "evidence", "instance", id]));
    all["effects"][0].clone()
}

fn conforms(dir: &Path, id: &str) {
    let trace = json(&whip(dir, None, &["--json", "trace", id, "--check"]));
    assert_eq!(trace["conformance"], "ok", "{trace}");
}

#[test]
fn exec_runs_in_the_workspace_and_each_outcome_takes_its_branch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let executor = ExecutorProcess::start(d, "tok-branches");
    let config = Some((executor.url(), executor.token.clone()));
    let config = config.as_ref().map(|(u, t)| (u.as_str(), t.as_str()));
    let argv = r#"["sh", "-c", "echo built > result.txt; echo hello $WHO"]"#;
    let good = program(
        d,
        "good",
        argv,
        r#"cwd "out" env { WHO "world" } timeout 30s"#,
    );
    let out = ok(&whip(d, config, &["run", &good]));
    assert!(out.contains("status completed"), "{out}");
    assert!(
        out.contains(r#"{"note":"succeeded: hello world\n"}"#),
        "{out}"
    );
    let id = run_id(&out);
    let written = executor.workspace(&id).join("out/result.txt");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "built\n");
    let e = evidence(d, &id);
    assert_eq!(e["state"], "completed");
    let provider = &e["diagnostics"]["provider"];
    assert_eq!(provider["exit_code"], 0);
    assert_eq!(provider["env_names"], serde_json::json!(["WHO"]));
    assert_eq!(provider["correlation_id"], format!("{id}/r000001"));
    assert!(
        !e.to_string().contains("world"),
        "an env value in evidence: {e}"
    );
    conforms(d, &id);

    let bad = program(d, "bad", r#"["sh", "-c", "echo broken >&2; exit 3"]"#, "");
    let out = ok(&whip(d, config, &["run", &bad]));
    assert!(
        out.contains(r#"{"note":"failed 3: broken\nexited with code 3"}"#),
        "{out}"
    );
    let e = evidence(d, &run_id(&out));
    assert_eq!(
        (e["state"].clone(), e["diagnostics"]["reason"].clone()),
        ("failed".into(), "exit_nonzero".into())
    );
    assert_eq!(e["diagnostics"]["provider"]["stderr_tail"], "broken\n");

    let started = Instant::now();
    let slow = program(d, "slow", r#"["sleep", "30"]"#, "timeout 1s");
    let out = ok(&whip(d, config, &["run", &slow]));
    assert!(out.contains("timed out after"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the timeout did not kill it"
    );
    let id = run_id(&out);
    let effects = json(&whip(d, None, &["--json", "effects", &id]));
    assert_eq!(effects[0]["state"], "timed_out");
    let e = evidence(d, &id);
    assert_eq!(e["diagnostics"]["timed_out"], true);
    let reason = e["diagnostics"]["provider"]["timeout_reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("timeout of 1000 ms"), "{reason}");
    conforms(d, &id);

    let missing = program(d, "missing", r#"["/nonexistent/tool"]"#, "");
    let out = ok(&whip(d, config, &["run", &missing]));
    assert!(out.contains("cannot start `/nonexistent/tool`"), "{out}");
}

/// `whip --json effects ID`'s first effect.
fn first_effect(dir: &Path, id: &str) -> Value {
    json(&whip(dir, None, &["--json", "effects", id]))[0].clone()
}

fn blocked_events(dir: &Path, id: &str) -> usize {
    let log = json(&whip(dir, None, &["--json", "log", id]));
    let events = log.as_array().unwrap();
    events
        .iter()
        .filter(|e| e["kind"] == "effect.blocked")
        .count()
}

#[test]
fn without_an_executor_exec_is_blocked_until_one_is_configured() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = program(d, "build", r#"["sh", "-c", "echo ran > ran.txt"]"#, "");
    let out = ok(&whip(d, None, &["run", &file]));
    assert!(out.contains("status running"), "{out}");
    let id = run_id(&out);
    let e = first_effect(d, &id);
    assert_eq!(e["state"], "blocked");
    let unconfigured = serde_json::json!({"category": "provider_config",
        "detail": "executor not configured"});
    assert_eq!(e["policy_block"], unconfigured);
    let status = ok(&whip(d, None, &["status", &id]));
    assert!(status.contains(" blocked_effects=1 "), "{status}");
    // Every pass looks again, but records the same reason only once.
    ok(&whip(d, None, &["worker", &id]));
    assert_eq!(blocked_events(d, &id), 1);

    let executor = ExecutorProcess::start(d, "tok-right");
    let url = executor.url();
    ok(&whip(d, Some((&url, "not-the-token")), &["worker", &id]));
    let e = first_effect(d, &id);
    assert_eq!(e["policy_block"]["category"], "credentials", "{e}");
    assert_eq!(e["policy_block"]["detail"], "executor refused the token");
    let dead = format!("http://{}", whip_tests::free_addrs(1)[0]);
    ok(&whip(d, Some((&dead, "tok-right")), &["worker", &id]));
    let e = first_effect(d, &id);
    assert_eq!(e["policy_block"]["category"], "provider_health", "{e}");
    let text = ok(&whip(d, None, &["effects", &id]));
    assert!(!text.contains("not-the-token"), "the token leaked: {text}");
    assert_eq!(blocked_events(d, &id), 3);

    let out = ok(&whip(d, Some((&url, "tok-right")), &["worker", &id]));
    assert!(out.contains("settled=1"), "{out}");
    let status = ok(&whip(d, None, &["status", &id]));
    assert!(status.contains(" completed "), "{status}");
    let e = first_effect(d, &id);
    assert!(e["policy_block"].is_null(), "{e}");
    assert!(executor.workspace(&id).join("ran.txt").exists());
    conforms(d, &id);
}

/// Poll `what` until it is true or `secs` pass.
fn wait_for(secs: u64, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_worker_killed_mid_exec_leaves_the_run_for_recover_and_nothing_runs_twice() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let executor = ExecutorProcess::start(d, "tok-kill");
    let url = executor.url();
    let config = Some((url.as_str(), "tok-kill"));
    let argv = r#"["sh", "-c", "echo started >> runs.txt; sleep 2; echo done >> runs.txt"]"#;
    let file = program(d, "once", argv, "timeout 30s");
    let started = ok(&whip(d, None, &["start", &file]));
    let id = started.trim().strip_prefix("started ").unwrap().to_string();
    ok(&whip(d, None, &["step", &id]));
    let mut worker = Command::new(crate::bin())
        .current_dir(d)
        .args(["worker", &id])
        .env("WHIP_EXECUTOR_URL", &url)
        .env("WHIP_EXECUTOR_TOKEN", "tok-kill")
        .spawn()
        .unwrap();
    let runs = executor.workspace(&id).join("runs.txt");
    wait_for(30, "the run to start", || runs.exists());
    worker.kill().unwrap();
    worker.wait().unwrap();
    // The run goes on without its worker, and its answer is kept.
    let path = format!("/v1/runs/{id}/r000001");
    wait_for(30, "the run to finish", || {
        executor.call("GET", &path, None).1["state"] == "finished"
    });
    let (_, record) = executor.call("GET", &path, None);
    assert_eq!(record["answer"]["exit_code"], 0, "{record}");
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "started\ndone\n");
    // Nobody settles it or runs it again: it waits for `whip recover`.
    assert_eq!(first_effect(d, &id)["state"], "running");
    ok(&whip(d, config, &["worker", &id]));
    assert_eq!(first_effect(d, &id)["state"], "running");
    // The same run asked again is answered from its record.
    let body = serde_json::json!({"instance": id, "effect": "x000001", "run": "r000001",
        "argv": ["sh", "-c", "echo again >> runs.txt"]});
    let (status, again) = executor.call("POST", "/v1/exec", Some(&body.to_string()));
    assert_eq!(
        (status, again["exit_code"].clone()),
        (200, 0.into()),
        "{again}"
    );
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "started\ndone\n");
    conforms(d, &id);
}

#[test]
fn on_a_fabric_a_worker_on_another_node_clears_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let fabric = runtime.block_on(whip_tests::fabric::ProcessFabric::start(3));
    crate::init_fabric(d, &fabric);
    let (first, second, third) = (
        Some(fabric.addrs[0].as_str()),
        Some(fabric.addrs[1].as_str()),
        Some(fabric.addrs[2].as_str()),
    );
    let file = program(d, "build", r#"["sh", "-c", "echo on the fabric"]"#, "");
    let out = ok(&whip_at(d, first, None, &["run", &file]));
    assert!(out.contains("status running"), "{out}");
    let id = run_id(&out);
    let effects = json(&whip_at(d, second, None, &["--json", "effects", &id]));
    assert_eq!(
        effects[0]["policy_block"]["detail"],
        "executor not configured"
    );
    let executor = ExecutorProcess::start(d, "tok-fabric");
    let config = Some((executor.url(), executor.token.clone()));
    let config = config.as_ref().map(|(u, t)| (u.as_str(), t.as_str()));
    ok(&whip_at(d, third, config, &["worker", &id]));
    let status = json(&whip_at(d, second, None, &["--json", "status", &id]));
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(
        status["terminal"]["payload"]["note"],
        "succeeded: on the fabric\n"
    );
    let trace = json(&whip_at(
        d,
        first,
        None,
        &["--json", "trace", &id, "--check"],
    ));
    assert_eq!(trace["conformance"], "ok", "{trace}");
}

/// Seed G2: four `exec` effects of one instance start at once and race to make its
/// workspace; every one runs and the instance completes (before, the loser of the race got
/// "File exists", stayed `running`, and `run --wait` never returned).
#[test]
fn a_fan_out_of_exec_effects_shares_one_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let executor = ExecutorProcess::start(d, "tok-fan-out");
    let url = executor.url();
    std::fs::write(d.join("fan.whip"), FAN_OUT).unwrap();
    for round in 0..3 {
        // Bounded: before the fix this run never returned.
        let out = Command::new("timeout")
            .current_dir(d)
            .args(["120", crate::bin().to_str().unwrap()])
            .args(["--json", "run", "fan.whip", "--wait"])
            .env_remove("WHIP_CELL")
            .env("WHIP_EXECUTOR_URL", &url)
            .env("WHIP_EXECUTOR_TOKEN", "tok-fan-out")
            .output()
            .expect("run whip");
        let out = ok(&out);
        let report: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(report["status"], "completed", "round {round}: {report}");
        assert_eq!(
            report["terminal"]["payload"]["note"], "all four ran",
            "{report}"
        );
    }
}

const FAN_OUT: &str = r#"use std.script

workflow Fan

output result Done

class Done {
  note string
}

rule fan when started => {
  exec ["sh", "-c", "echo a > a.txt"] cwd "w" timeout 30s as a
  exec ["sh", "-c", "echo b > b.txt"] cwd "w" timeout 30s as b
  exec ["sh", "-c", "echo c > c.txt"] cwd "w" timeout 30s as c
  exec ["sh", "-c", "echo d > d.txt"] cwd "w" timeout 30s as e
  after a succeeds {
    after b succeeds {
      after c succeeds {
        after e succeeds {
          complete result { note "all four ran" }
        }
      }
    }
  }
}
"#;
