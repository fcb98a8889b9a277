//! Issue 17's defects a new user hits, each held as behaviour on a 3-voter dev cell: a
//! refusal of who you are is `permission denied`, not `unavailable`; a wrong `--cell` names
//! the address; a version mismatch is an answer for `doc put` as for `kv cas`;
//! `lease acquire --wait` blocks until held; board writes say what happened to which task;
//! human lines carry no JSON quotes.

use std::process::Output;

use serde_json::Value;

use super::{DevCli, json_of};

fn text(out: &Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn refusals_and_answers_say_what_they_are() {
    let cli = DevCli::start();
    let (code, _, err) = text(&cli.run(&["kv", "put", "agents/mallory", "x"]));
    assert_eq!(code, Some(1));
    assert!(err.contains("permission denied: "), "{err}");
    assert!(!err.contains("unavailable"), "{err}");

    let wrong = super::whip(&cli.dir, &["kv", "get", "k", "--cell", "127.0.0.1:1"]);
    let (code, _, err) = text(&wrong);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("127.0.0.1:1"),
        "the failed address is named: {err}"
    );

    json_of(&cli.run(&["team", "create", "web", "--agent", "alice", "--json"]));
    let put = |expect: &str| {
        cli.run(&[
            "doc", "put", "web", "plan", "--value", "{}", "--expect", expect, "--agent", "alice",
            "--json",
        ])
    };
    assert_eq!(json_of(&put("0"))["outcome"], "written");
    let stale = json_of(&put("0"));
    assert_eq!(
        stale["outcome"], "version_mismatch",
        "an answer, exit 0: {stale}"
    );
    assert!(stale["current_version"].as_u64().unwrap() > 0);
}

#[test]
fn lease_wait_blocks_until_held() {
    let cli = DevCli::start();
    let held = json_of(&cli.run(&[
        "lease", "acquire", "deploy", "prod", "--holder", "alice", "--ttl", "2s", "--json",
    ]));
    assert_eq!(held["outcome"], "held");
    let waited = std::time::Instant::now();
    let bob = json_of(&cli.run(&[
        "lease", "acquire", "deploy", "prod", "--holder", "bob", "--ttl", "10s", "--wait", "20s",
        "--json",
    ]));
    assert_eq!(
        bob["outcome"], "held",
        "bob waited until alice's lease lapsed: {bob}"
    );
    assert!(
        waited.elapsed() >= std::time::Duration::from_millis(500),
        "it did wait"
    );
}

#[test]
fn board_and_schedule_lines_name_what_happened() {
    let cli = DevCli::start();

    let agent = ["--agent", "alice"];
    let run = |args: &[&str]| cli.run(&[args, &agent].concat());
    json_of(&run(&["team", "create", "ops", "--json"]));
    json_of(&run(&[
        "board",
        "post",
        "ops",
        "--task",
        "{\"n\":1}",
        "--json",
    ]));
    let claim = json_of(&run(&["board", "claim", "ops", "--worker", "w1", "--json"]));
    let fence = claim["fence"].as_u64().unwrap().to_string();
    let (_, out, _) = text(&run(&[
        "board", "extend", "ops", "ops-1", "--fence", &fence, "--by", "30s",
    ]));
    assert!(out.starts_with("extended ops-1 until "), "{out}");
    let (_, out, _) = text(&run(&[
        "board", "fail", "ops", "ops-1", "--fence", &fence, "--error", "boom",
    ]));
    assert!(out.starts_with("failed ops-1: back to ready"), "{out}");
    let (_, out, _) = text(&run(&["board", "mailbox", "ops"]));
    assert!(
        !out.trim_start().starts_with('{') && !out.trim_start().starts_with('['),
        "{out}"
    );

    let fire = [
        "schedule",
        "fire",
        "nightly",
        "--spec",
        "0 0 * * *",
        "--claimant",
    ];
    let (code, out, err) = text(&cli.run(&[&fire[..], &["c1"]].concat()));
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.contains('"'), "no JSON quotes in a human line: {out}");
    let json: Value = json_of(&cli.run(&[&fire[..], &["c2", "--json"]].concat()));
    assert!(json["outcome"].is_string());
    let gone = json_of(&run(&["team", "dissolve", "ops", "--json"]));
    assert_eq!(gone["done"], true, "one command runs every round: {gone}");
    assert!(gone["rounds"].as_u64().unwrap() >= 1, "{gone}");
}
