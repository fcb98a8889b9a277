//! Goal: every block the runtime produces is persisted when a worker pass first observes
//! it, shown the same by `whip effects` and `whip status` (text and `--json`) as
//! `policy_block: {category, detail}`, listed on `whip run`'s idle line, recorded once as an
//! `effect.blocked` event, and lifted by a later pass once its cause is gone, with nobody
//! queueing the effect again: a `release` requested before its `acquire` settled
//! (`blocked_by_dependency`, `dependency`) runs once the lease is held; a child the work
//! registry has no room for (`blocked_by_capacity`, `capacity`) starts once its sibling
//! ends; a child the registry's depth policy refuses (`blocked`, `enforcement`) starts once
//! the operator raises the limit; a broken compute-plane binding (`blocked`,
//! `provider_config`, `credentials`, `provider_health`) never shows a secret in its detail.
//! Method: real `whip` processes on a fresh embedded store each, `whip work limits` as the
//! operator's lever, and polling with a bounded deadline for the state each step expects.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{ok, run_id};

/// The seed's `Ship`, with a `release` right after a waiting `acquire` in the same rule.
const RELEASE_EARLY: &str = r#"use std.coord

workflow Ship

output result Done

class Done {
  note string
}

class Deploy {
  service string
  env string
}

class Note {
  text string
}

lease deploy_slot {
  key Deploy
  slots 1
  ttl 10m
}

table deploys as Deploy [
  {
    service "api"
    env "prod"
  }
]

rule ship
  when Deploy as d
=> {
  done d
  acquire deploy_slot for d.env until ttl wait 60s as slot
  release slot
  after slot held {
    record Note { text "held" }
  }
  after slot contended {
    complete result { note "contended" }
  }
}
"#;

/// A claim and its finish in one rule: the finish is requested before the claim settles.
const FINISH_EARLY: &str = r#"use std.tracker

workflow Fin

output result Summary
failure error string

class Summary {
  note string
}

class Filed {
  id string
}

tracker backlog {
  provider builtin
}

rule open_ticket when started => {
  file issue into backlog { title "rotate keys" body "before Friday" } as filed
  after filed succeeds as issue {
    record Filed { id issue.id }
  }
  after filed fails {
    fail error "could not file"
  }
}

rule work
  when backlog has ready issue as item where item.title != ""
  when Filed as f
=> {
  done f
  claim item ttl 10m as held
  finish held { summary "rotated" } as finished
  after held fails {
    fail error "someone else took it"
  }
  after finished succeeds {
    complete result { note "finished" }
  }
  after finished fails {
    fail error "could not finish"
  }
}
"#;

/// A parent that starts two children at once; each child ends after a timer.
const TWO_CHILDREN: &str = r#"use std.coord

workflow Kid {
  input job Job
  output result Done

  rule go when Job as j => {
    done j
    timer 1s as t
    after t succeeds {
      complete result { note j.name }
    }
  }
}

workflow Parent {
  output result Done
  failure error string

  rule go when started => {
    invoke Kid { input { job { name "a" } } } as a
    invoke Kid { input { job { name "b" } } } as b
    after a succeeds {
      record Half { name "a" }
    }
    after b succeeds {
      record Half { name "b" }
    }
    after a fails {
      fail error "a failed"
    }
    after b fails {
      fail error "b failed"
    }
  }

  rule both
    when Half as x where x.name == "a"
    when Half as y where y.name == "b"
  => {
    complete result { note "both" }
  }
}

class Job {
  name string
}

class Done {
  note string
}

class Half {
  name string
}
"#;

const EXEC: &str = r#"use std.script

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

/// `whip ARGS` in `dir` on its embedded store, with `env` and no other engine settings.
fn whip(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(crate::bin());
    cmd.current_dir(dir)
        .args(args)
        .env_remove("WHIP_EXECUTOR_URL")
        .env_remove("WHIP_EXECUTOR_TOKEN")
        .env_remove("WHIP_CELL")
        .env_remove("WHIPPLESCRIPT_STORE")
        .env_remove("WHIPPLESCRIPT_WORKER_CONCURRENCY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run whip")
}

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let all = [&["--json"], args].concat();
    serde_json::from_str(ok(&whip(dir, &[], &all)).trim()).expect("JSON")
}

/// Effect `id` of instance `ins` as `whip --json effects` shows it.
fn effect(dir: &Path, ins: &str, id: &str) -> Value {
    let all = json_of(dir, &["effects", ins]);
    let found = all.as_array().unwrap().iter().find(|e| e["id"] == id);
    found
        .cloned()
        .unwrap_or_else(|| panic!("no effect {id}: {all}"))
}

/// `effect.blocked` events of `ins` for effect `id`.
fn blocked_events(dir: &Path, ins: &str, id: &str) -> Vec<Value> {
    let log = json_of(dir, &["log", ins]);
    let events = log.as_array().unwrap().iter();
    let mine = events.filter(|e| e["kind"] == "effect.blocked" && e["data"]["id"] == id);
    mine.map(|e| e["data"].clone()).collect()
}

/// Assert that effect `id` of `ins` is in `state` with `block`, in every view that shows
/// it: `whip effects` and `whip status`, as text and as JSON.
fn shows_block(dir: &Path, ins: &str, (id, kind): (&str, &str), state: &str, block: &Value) {
    let e = effect(dir, ins, id);
    assert_eq!(
        (&e["state"], &e["policy_block"]),
        (&json!(state), block),
        "{e}"
    );
    let status = json_of(dir, &["status", ins]);
    let listed = json!([{"id": id, "kind": kind, "state": state, "policy_block": block}]);
    assert_eq!(status["blocked"], listed, "{status}");
    assert_eq!(status["counts"]["blocked_effects"], 1, "{status}");
    let shown_block = format!(
        "policy_block: {{ category: {}, detail: {} }}",
        block["category"].as_str().unwrap(),
        block["detail"]
    );
    let (head, tail) = (format!("{id} {kind} {state} "), format!(" {shown_block}"));
    let effects = ok(&whip(dir, &[], &["effects", ins]));
    let line = effects.lines().find(|l| l.starts_with(&head));
    assert!(line.is_some_and(|l| l.ends_with(&tail)), "{effects}");
    let status = ok(&whip(dir, &[], &["status", ins]));
    let shown = format!("\n  {head}{shown_block}\n");
    assert!(status.contains(&shown), "{status}");
}

/// Run `pass` until effect `id` of `ins` is in `state`, or fail after a minute.
fn until_state(dir: &Path, ins: &str, id: &str, state: &str, mut pass: impl FnMut()) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let e = effect(dir, ins, id);
        if e["state"] == state {
            return e;
        }
        assert!(Instant::now() < deadline, "{id} never got {state}: {e}");
        pass();
    }
}

fn conforms(dir: &Path, ins: &str) {
    let trace = json_of(dir, &["trace", ins, "--check"]);
    assert_eq!(trace["conformance"], "ok", "{trace}");
}

/// The operator's registry entry of the one root run (the parent instance).
fn root_entry(dir: &Path) -> String {
    let entries = json_of(dir, &["work", "list"]);
    let roots: Vec<&Value> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["parent"].is_null())
        .collect();
    assert_eq!(roots.len(), 1, "{entries}");
    roots[0]["id"].as_str().unwrap().to_string()
}

#[test]
fn a_release_waits_for_its_acquire_and_runs_once_the_lease_is_held() {
    let dir = crate::workdir();
    let d = dir.path();
    std::fs::write(d.join("early.whip"), RELEASE_EARLY).unwrap();
    // Another instance holds the deploy slot, so the acquire waits for it.
    let holder = run_id(&ok(&whip(d, &[], &["run", "deploys.whip"])));
    let out = ok(&whip(d, &[], &["run", "early.whip"]));
    assert!(out.contains("status running"), "{out}");
    assert!(
        out.contains("\nidle, blocked: x000002 release dependency\n"),
        "{out}"
    );
    let ins = run_id(&out);
    let block = json!({"category": "dependency",
        "detail": "waits for acquire x000001 `slot` to settle"});
    shows_block(
        d,
        &ins,
        ("x000002", "release"),
        "blocked_by_dependency",
        &block,
    );
    // A later pass still finds the acquire waiting: the block stays, recorded once.
    ok(&whip(d, &[], &["worker", &ins]));
    assert_eq!(effect(d, &ins, "x000001")["state"], "queued");
    shows_block(
        d,
        &ins,
        ("x000002", "release"),
        "blocked_by_dependency",
        &block,
    );
    assert_eq!(blocked_events(d, &ins, "x000002").len(), 1);
    // The holder goes away: the acquire is held, then the release runs by itself.
    ok(&whip(d, &[], &["cancel", &holder]));
    let released = until_state(d, &ins, "x000002", "completed", || {
        ok(&whip(d, &[], &["worker", &ins]));
    });
    assert_eq!(released["output"]["outcome"], "released", "{released}");
    assert!(released["policy_block"].is_null(), "{released}");
    assert_eq!(effect(d, &ins, "x000001")["output"]["outcome"], "held");
    assert_eq!(ok(&whip(d, &[], &["leases"])), "no leases held\n");
    let status = json_of(d, &["status", &ins]);
    assert_eq!(status["blocked"], json!([]), "{status}");
    conforms(d, &ins);
}

/// Regression: a `finish` requested in the rule of its `claim` ran before the claim
/// settled and failed with "the claim did not succeed" although the claim succeeded.
#[test]
fn a_finish_in_its_claims_rule_waits_for_the_claim_and_finishes_the_issue() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("fin.whip"), FINISH_EARLY).unwrap();
    let out = ok(&whip(d, &[], &["run", "fin.whip"]));
    assert!(out.contains("status completed"), "{out}");
    assert!(out.contains(r#"result {"note":"finished"}"#), "{out}");
    let ins = run_id(&out);
    let block = json!({"category": "dependency",
        "detail": "waits for claim x000002 `held` to settle"});
    let events = blocked_events(d, &ins, "x000003");
    let first = json!({"id": "x000003", "state": "blocked_by_dependency",
        "policy_block": block});
    assert_eq!(events, vec![first]);
    let finished = effect(d, &ins, "x000003");
    assert_eq!(finished["output"]["status"], "closed", "{finished}");
    let claimed = effect(d, &ins, "x000002");
    assert_eq!(finished["args"]["held"], claimed["output"], "{finished}");
    conforms(d, &ins);
}

#[test]
fn a_child_without_room_waits_for_its_sibling_and_starts_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("kids.whip"), TWO_CHILDREN).unwrap();
    let limits = json_of(d, &["work", "limits", "--children-max", "1"]);
    assert_eq!(limits["children_max"], 1, "{limits}");
    let out = ok(&whip(d, &[], &["run", "kids.whip", "--root", "Parent"]));
    assert!(
        out.contains("\nidle, blocked: x000002 invoke capacity\n"),
        "{out}"
    );
    let ins = run_id(&out);
    let detail = format!(
        "work admission refused: children limit: {} has 1 live children, the limit is 1",
        root_entry(d)
    );
    let block = json!({"category": "capacity", "detail": detail});
    shows_block(
        d,
        &ins,
        ("x000002", "invoke"),
        "blocked_by_capacity",
        &block,
    );
    assert_eq!(effect(d, &ins, "x000001")["state"], "running");
    // Workers drive the first child to its end; the second starts without anyone's help.
    until_state(d, &ins, "x000002", "completed", || {
        ok(&whip(d, &[], &["worker", "--all", "--duration", "1s"]));
    });
    let status = until_status(d, &ins, "completed");
    assert_eq!(status["terminal"]["payload"]["note"], "both", "{status}");
    assert_eq!(effect(d, &ins, "x000002")["output"]["note"], "b");
    assert_eq!(blocked_events(d, &ins, "x000002").len(), 1);
    assert!(effect(d, &ins, "x000002")["policy_block"].is_null());
    conforms(d, &ins);
}

#[test]
fn a_child_the_depth_policy_refuses_starts_once_the_operator_raises_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("kids.whip"), TWO_CHILDREN).unwrap();
    ok(&whip(d, &[], &["work", "limits", "--depth-max", "0"]));
    let args = ["--json", "run", "--wait", "kids.whip", "--root", "Parent"];
    let report: Value = serde_json::from_str(ok(&whip(d, &[], &args)).trim()).unwrap();
    assert_eq!(report["status"], "running", "{report}");
    let ins = report["id"].as_str().unwrap().to_string();
    let detail = format!(
        "work admission refused: depth limit: a child of {} would be at depth 1, the limit is 0",
        root_entry(d)
    );
    let block = json!({"category": "enforcement", "detail": detail});
    let listed: Vec<Value> = ["x000001", "x000002"]
        .iter()
        .map(|id| json!({"id": id, "kind": "invoke", "state": "blocked", "policy_block": block}))
        .collect();
    assert_eq!(report["blocked"], json!(listed), "{report}");
    let e = effect(d, &ins, "x000002");
    assert_eq!(
        (&e["state"], &e["policy_block"]),
        (&json!("blocked"), &block)
    );
    let status = json_of(d, &["status", &ins]);
    assert_eq!(status["blocked"], json!(listed), "{status}");
    // A pass under the same policy changes nothing; raising the limit lifts the block.
    ok(&whip(d, &[], &["worker", &ins]));
    assert_eq!(blocked_events(d, &ins, "x000001").len(), 1);
    ok(&whip(d, &[], &["work", "limits", "--depth-max", "8"]));
    until_state(d, &ins, "x000002", "completed", || {
        ok(&whip(d, &[], &["worker", "--all", "--duration", "1s"]));
    });
    let status = until_status(d, &ins, "completed");
    assert_eq!(status["terminal"]["payload"]["note"], "both", "{status}");
    conforms(d, &ins);
}

/// Drive every instance until `ins` has `status`, or fail after a minute.
fn until_status(dir: &Path, ins: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = json_of(dir, &["status", ins]);
        if now["status"] == status {
            return now;
        }
        assert!(Instant::now() < deadline, "never {status}: {now}");
        ok(&whip(dir, &[], &["worker", "--all", "--duration", "1s"]));
    }
}

#[test]
fn a_broken_binding_shows_in_status_and_its_detail_never_holds_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("build.whip"), EXEC).unwrap();
    let ins = run_id(&ok(&whip(d, &[], &["run", "build.whip"])));
    let unconfigured = json!({"category": "provider_config", "detail": "executor not configured"});
    shows_block(d, &ins, ("x000001", "exec"), "blocked", &unconfigured);
    let password = [("WHIP_EXECUTOR_URL", "http://bot:pa55word@127.0.0.1:9")];
    ok(&whip(d, &password, &["worker", &ins]));
    let detail = "executor URL `http://***@127.0.0.1:9` is not http://HOST:PORT";
    let bad_url = json!({"category": "provider_config", "detail": detail});
    shows_block(d, &ins, ("x000001", "exec"), "blocked", &bad_url);
    let dead = format!("http://{}", whip_tests::free_addrs(1)[0]);
    let token = [
        ("WHIP_EXECUTOR_URL", dead.as_str()),
        ("WHIP_EXECUTOR_TOKEN", "t0ken-s3cret"),
    ];
    ok(&whip(d, &token, &["worker", &ins]));
    let e = effect(d, &ins, "x000001");
    assert_eq!(e["policy_block"]["category"], "provider_health", "{e}");
    for view in ["effects", "status", "diagnostics", "log"] {
        for out in [
            ok(&whip(d, &[], &[view, &ins])),
            ok(&whip(d, &[], &["--json", view, &ins])),
        ] {
            assert!(!out.contains("pa55word"), "{view}: {out}");
            assert!(!out.contains("t0ken-s3cret"), "{view}: {out}");
        }
    }
    assert_eq!(blocked_events(d, &ins, "x000001").len(), 3);
}
