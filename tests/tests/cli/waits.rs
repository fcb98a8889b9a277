//! Waits that ride on the cell's applies (issue 30, item 1): `whip board claim --wait`
//! takes a task posted while it waits and, interrupted, claims nothing; `whip mail inbox
//! --follow` prints each message as it arrives and ends cleanly on SIGINT; `whip kv watch
//! --prefix --from REV --json` prints one line per change from that revision.

use std::io::{BufRead, BufReader};
use std::process::ChildStderr;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::stop::{spawn, stop};
use super::{DevCli, json_of};

fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "whip failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Read `stderr` until a line contains `text` (the process announced its wait).
fn await_line(stderr: &mut BufReader<ChildStderr>, text: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        let read = stderr.read_line(&mut line).expect("read stderr");
        assert!(read > 0, "stderr ended before {text:?}");
        if line.contains(text) {
            return;
        }
    }
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "still waiting after the task was posted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_claim_wait_takes_a_task_posted_while_it_waits() {
    let cli = DevCli::start();
    ok(&cli.run(&["team", "create", "crew"]));
    let args = [
        "board", "claim", "crew", "--worker", "w1", "--wait", "120s", "--json",
    ];
    let mut waiting = spawn(&cli, &args);
    let mut stderr = BufReader::new(waiting.stderr.take().unwrap());
    await_line(&mut stderr, "waiting up to");
    ok(&cli.run(&["board", "post", "crew", "--task", r#"{"job":7}"#]));
    let status = wait_exit(&mut waiting);
    assert!(status.success(), "{status:?}");
    let out: Value = serde_json::from_reader(waiting.stdout.take().unwrap()).unwrap();
    assert_eq!(out["outcome"], "claimed", "{out}");
    assert_eq!(out["task"]["body"]["job"], 7, "{out}");
    let stats = json_of(&cli.run(&["board", "stats", "crew", "--json"]));
    assert_eq!((&stats["ready"], &stats["claimed"]), (&0.into(), &1.into()));
}

/// `board claim --max N --wait D`: a prefetch that finds the board empty waits for the
/// first ready task like a single claim, then answers its claims.
#[test]
fn a_prefetch_wait_takes_what_is_posted_while_it_waits() {
    let cli = DevCli::start();
    ok(&cli.run(&["team", "create", "crew"]));
    let args = [
        "board", "claim", "crew", "--worker", "w1", "--max", "4", "--wait", "120s", "--json",
    ];
    let mut waiting = spawn(&cli, &args);
    let mut stderr = BufReader::new(waiting.stderr.take().unwrap());
    await_line(&mut stderr, "waiting up to");
    ok(&cli.run(&["board", "post", "crew", "--task", r#"{"job":7}"#]));
    let status = wait_exit(&mut waiting);
    assert!(status.success(), "{status:?}");
    let out: Value = serde_json::from_reader(waiting.stdout.take().unwrap()).unwrap();
    let claims = out["claims"].as_array().expect("claims");
    assert_eq!(claims.len(), 1, "{out}");
    assert_eq!(claims[0]["task"]["body"]["job"], 7, "{out}");
    let stats = json_of(&cli.run(&["board", "stats", "crew", "--json"]));
    assert_eq!((&stats["ready"], &stats["claimed"]), (&0.into(), &1.into()));
}

#[test]
fn an_interrupted_claim_wait_claims_nothing() {
    let cli = DevCli::start();
    ok(&cli.run(&["team", "create", "crew"]));
    let args = ["board", "claim", "crew", "--worker", "w1", "--wait", "120s"];
    let mut waiting = spawn(&cli, &args);
    let mut stderr = BufReader::new(waiting.stderr.take().unwrap());
    await_line(&mut stderr, "waiting up to");
    let status = stop(&mut waiting, libc::SIGINT);
    assert!(!status.success(), "an interrupted wait is no success");
    let mut rest = String::new();
    std::io::Read::read_to_string(stderr.get_mut(), &mut rest).unwrap();
    assert!(rest.contains("interrupted"), "{rest}");
    ok(&cli.run(&["board", "post", "crew", "--task", r#"{"job":1}"#]));
    let stats = json_of(&cli.run(&["board", "stats", "crew", "--json"]));
    assert_eq!(
        (&stats["ready"], &stats["claimed"]),
        (&1.into(), &0.into()),
        "the stopped waiter took nothing: {stats}"
    );
}

#[test]
fn a_followed_inbox_prints_mail_as_it_arrives() {
    let cli = DevCli::start();
    ok(&cli.run(&["agent", "register", "--agent", "lead"]));
    ok(&cli.run(&["agent", "enroll", "bob", "--agent", "lead"]));
    ok(&cli.run(&["agent", "register", "--agent", "eve"]));
    let send = |text: &str| {
        let args = ["mail", "send", "bob", "--text", text, "--agent", "eve"];
        ok(&cli.run(&args));
    };
    send("before");
    let args = ["mail", "inbox", "--follow", "--agent", "bob", "--json"];
    let mut follow = spawn(&cli, &args);
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let mut next = || -> Value {
        let line = lines.next().expect("a line").expect("read stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    assert_eq!(next()["text"], "before");
    send("while following");
    assert_eq!(next()["text"], "while following");
    send("and again");
    let third = next();
    assert_eq!(
        (&third["text"], &third["from"]),
        (&"and again".into(), &"eve".into())
    );
    let status = stop(&mut follow, libc::SIGINT);
    assert!(status.success(), "SIGINT ends a follow cleanly: {status:?}");
}

/// Read one JSON line from `lines`.
fn json_line(lines: &mut std::io::Lines<BufReader<std::process::ChildStdout>>) -> Value {
    let line = lines.next().expect("a line").expect("read stdout");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn kv_watch_prints_one_json_line_per_change_and_ends_on_sigint() {
    let cli = DevCli::start();
    let first = json_of(&cli.run(&["kv", "put", "app/a", "0", "--json"]));
    let from = first["version"].as_u64().expect("a version").to_string();
    ok(&cli.run(&["kv", "put", "app/b", "1"]));
    let args = [
        "kv",
        "watch",
        "app/",
        "--prefix",
        "--from",
        from.as_str(),
        "--json",
    ];
    let mut watch = spawn(&cli, &args);
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    // From the first put's revision: the two earlier writes come first, in order.
    let a = json_line(&mut lines);
    assert_eq!(
        (&a["type"], &a["key"], &a["value"]),
        (&"put".into(), &"app/a".into(), &"0".into())
    );
    assert_eq!(a["revision"].to_string(), from);
    assert_eq!(json_line(&mut lines)["key"], "app/b");
    ok(&cli.run(&["kv", "del", "app/a"]));
    ok(&cli.run(&["kv", "put", "other", "x"]));
    ok(&cli.run(&["kv", "put", "app/c", "2"]));
    let deleted = json_line(&mut lines);
    assert_eq!(
        (&deleted["type"], &deleted["key"]),
        (&"delete".into(), &"app/a".into())
    );
    let c = json_line(&mut lines);
    assert_eq!(
        (&c["key"], &c["value"]),
        (&"app/c".into(), &"2".into()),
        "`other` is not under app/"
    );
    assert!(c["revision"].as_u64() > deleted["revision"].as_u64());
    let status = stop(&mut watch, libc::SIGINT);
    assert!(status.success(), "SIGINT ends a watch cleanly: {status:?}");
}

/// The sequences of a `whip mail take --json` answer's messages.
fn taken_seqs(answer: &Value) -> Vec<u64> {
    let messages = answer["messages"].as_array().expect("messages");
    messages.iter().filter_map(|m| m["seq"].as_u64()).collect()
}

/// Issue 35's contract line: `whip mail take [ADDRESS] [--ack-through SEQ] [--max N]
/// [--wait 10s] [--visibility 30s]` acknowledges and takes in one call; what is not
/// acknowledged comes back after its window; a waiting take returns the message sent while
/// it waits; a peer cannot take another's mail.
#[test]
fn mail_take_acknowledges_takes_redelivers_and_waits() {
    let cli = DevCli::start();
    ok(&cli.run(&["agent", "register", "--agent", "bob"]));
    ok(&cli.run(&["agent", "register", "--agent", "eve"]));
    for text in ["one", "two", "three"] {
        ok(&cli.run(&["mail", "send", "bob", "--text", text, "--agent", "eve"]));
    }
    let take = |extra: &[&str]| {
        let args = [&["mail", "take", "--agent", "bob", "--json"][..], extra].concat();
        json_of(&cli.run(&args))
    };
    let first = take(&["--max", "2"]);
    assert_eq!(taken_seqs(&first), vec![1, 2], "{first}");
    assert_eq!(
        (&first["removed"], &first["outcome"]),
        (&0.into(), &"taken".into())
    );
    assert!(
        first["visible_until_ms"].as_u64().is_some_and(|t| t > 0),
        "{first}"
    );
    let second = take(&["--ack-through", "2", "--max", "5", "--visibility", "1s"]);
    assert_eq!(
        (taken_seqs(&second), &second["removed"]),
        (vec![3], &2.into())
    );
    // Not acknowledged: message 3 comes back once its 1 s window ends, to a waiting take.
    let again = take(&["--wait", "20s"]);
    assert_eq!(taken_seqs(&again), vec![3], "{again}");

    a_peer_cannot_take(&cli);

    // A take that waits returns the message sent while it waits.
    let args = [
        "mail",
        "take",
        "--agent",
        "bob",
        "--ack-through",
        "3",
        "--wait",
        "30s",
        "--json",
    ];
    let mut waiting = spawn(&cli, &args);
    ok(&cli.run(&["mail", "send", "bob", "--text", "four", "--agent", "eve"]));
    let status = wait_exit(&mut waiting);
    assert!(status.success(), "{status:?}");
    let mut out = String::new();
    std::io::Read::read_to_string(waiting.stdout.as_mut().unwrap(), &mut out).unwrap();
    let answer: Value = serde_json::from_str(out.trim()).expect("one JSON answer");
    assert_eq!(
        (taken_seqs(&answer), &answer["removed"]),
        (vec![4], &1.into()),
        "{answer}"
    );
}

/// A peer cannot take bob's mail, nor acknowledge it.
fn a_peer_cannot_take(cli: &DevCli) {
    let peer = cli.run(&[
        "mail",
        "take",
        "agent:bob",
        "--ack-through",
        "3",
        "--agent",
        "eve",
    ]);
    assert_eq!(peer.status.code(), Some(1), "{peer:?}");
    assert!(
        String::from_utf8_lossy(&peer.stderr).contains("not_reader"),
        "{peer:?}"
    );
}
