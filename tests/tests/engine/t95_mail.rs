//! Goal: a workflow talks to agents through the fabric's mail. Method: three `whip node
//! serve` processes with four data cells (an instance's mailbox is its registry entry's,
//! on whichever cell owns the entry; an agent's is on the cell owning its name). An
//! instance asks agent `bob` and waits; bob finds the ask in his inbox and answers with
//! `whip mail reply`; the reply resumes the instance's `after q replied` with bob's text.
//! An ask nobody answers ends `times out`. An instance waiting on `when message from`
//! completes with the text an operator sent it (`whip message`), and it is admitted once.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{bin, ok, run_id};

/// `whip ARGS --cell CELL` in `dir`, with the credentials file in `dir`.
fn whip(dir: &Path, cell: &str, args: &[&str]) -> Output {
    command(dir, cell, args).output().expect("run whip")
}

fn command(dir: &Path, cell: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.current_dir(dir)
        .env("WHIP_CREDENTIALS", dir.join("credentials.json"))
        .args(args)
        .args(["--cell", cell]);
    cmd
}

fn copy(dir: &Path, name: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/data");
    std::fs::copy(src.join(name), dir.join(name)).unwrap();
}

/// Bob's inbox, once it holds something.
fn inbox_when_full(dir: &Path, cell: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = ok(&whip(
            dir,
            cell,
            &["--agent", "bob", "--json", "mail", "inbox"],
        ));
        let mail: Vec<Value> = serde_json::from_str(out.trim()).expect("json");
        if !mail.is_empty() || Instant::now() > deadline {
            return mail;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_instance_asks_an_agent_and_resumes_with_the_reply() {
    let dir = crate::workdir();
    let d = dir.path();
    for file in ["ask.whip", "quiet.whip", "listen.whip"] {
        copy(d, file);
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let fabric = runtime.block_on(whip_tests::fabric::ProcessFabric::start(3));
    let node = |i: usize| fabric.addrs[i % 3].clone();
    crate::init_fabric(d, &fabric);
    ok(&whip(d, &node(1), &["--agent", "bob", "agent", "register"]));

    let asking = command(d, &node(0), &["run", "ask.whip", "--wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the asking run");
    let mail = inbox_when_full(d, &node(2));
    assert_eq!(mail.len(), 1, "{mail:?}");
    let ask = &mail[0];
    assert_eq!(
        (&ask["type"], &ask["trust"]),
        (&"ask".into(), &"untrusted".into())
    );
    let reply_to = ask["reply_to"]
        .as_str()
        .expect("the ask names its instance's mailbox");
    assert!(reply_to.starts_with("entry:w"), "{ask}");
    let id = ask["id"].as_str().unwrap();
    forge_a_reply(d, &node(1), reply_to, id);
    let sent = ok(&whip(
        d,
        &node(1),
        &[
            "--agent",
            "bob",
            "--json",
            "mail",
            "reply",
            id,
            "--text",
            "yes, ship it",
        ],
    ));
    assert!(sent.contains(r#""outcome":"delivered""#), "{sent}");
    let out = asking.wait_with_output().expect("the asking run ends");
    let out = ok(&out);
    assert!(out.contains("status completed"), "{out}");
    assert!(out.contains(r#"result {"text":"yes, ship it"}"#), "{out}");
    let facts = ok(&whip(d, &node(2), &["facts", &run_id(&out)]));
    assert_eq!(facts.matches("message.received").count(), 2, "{facts}");

    let quiet = ok(&whip(d, &node(2), &["run", "quiet.whip", "--wait"]));
    assert!(quiet.contains(r#"result {"text":"no answer"}"#), "{quiet}");
    listening_instance_hears_the_operator(d, &node(0), &node(1));
    drop(fabric);
}

/// Eve names bob's ask in a reply of her own: it is admitted as a message, but only bob
/// answers an ask to bob, so the instance keeps waiting.
fn forge_a_reply(d: &Path, cell: &str, mailbox: &str, ask: &str) {
    ok(&whip(d, cell, &["--agent", "eve", "agent", "register"]));
    let args = [
        "--agent", "eve", "--json", "mail", "send", mailbox, "--type", "reply",
    ];
    let more = ["--text", "no, stop everything", "--in-reply-to", ask];
    let sent = ok(&whip(d, cell, &[&args[..], &more[..]].concat()));
    assert!(sent.contains(r#""outcome":"delivered""#), "{sent}");
}

/// A `when message from inbox` instance completes with the text `whip message` sent it.
fn listening_instance_hears_the_operator(d: &Path, one: &str, other: &str) {
    let listening = command(d, one, &["run", "listen.whip", "--wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the listening run");
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        let listed = ok(&whip(d, other, &["instances"]));
        let running = listed
            .lines()
            .find(|l| l.contains(" running ") && !l.is_empty())
            .map(|l| l.split(' ').next().unwrap().to_string());
        if let Some(id) = running {
            break id;
        }
        assert!(Instant::now() < deadline, "no running instance: {listed}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // As the attacker: no argument names the sender of fabric mail.
    let forged = [
        "message",
        &id,
        "--channel",
        "inbox",
        "--text",
        "x",
        "--by",
        "operator",
    ];
    let refused = whip(d, other, &forged);
    assert!(
        !refused.status.success(),
        "--by is refused on a fabric channel"
    );
    let args = [
        "--json",
        "message",
        &id,
        "--channel",
        "inbox",
        "--text",
        "hello listener",
    ];
    let sent = ok(&whip(d, other, &args));
    assert!(sent.contains(r#""outcome":"delivered""#), "{sent}");
    let out = ok(&listening
        .wait_with_output()
        .expect("the listening run ends"));
    assert!(out.contains(r#"result {"text":"hello listener"}"#), "{out}");
}

/// `whip ARGS` on the embedded store in `dir`, with the credentials file in `dir`.
fn embedded(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .env("WHIP_CREDENTIALS", dir.join("credentials.json"))
        .args(args)
        .output()
        .expect("run whip")
}

/// A send to an agent nobody registered yet fails and its `fails` branch runs; once the
/// agent exists, `whip retry` re-runs the send and the rule's `succeeds` branch, which was
/// dropped when the send failed, completes the instance.
#[test]
fn a_retried_send_resumes_the_branch_its_failure_dropped() {
    let dir = crate::workdir();
    let d = dir.path();
    copy(d, "tell.whip");
    let first = ok(&embedded(d, &["run", "tell.whip"]));
    assert!(first.contains("status running"), "{first}");
    let id = run_id(&first);
    let effects = ok(&embedded(d, &["effects", &id]));
    assert!(effects.contains("message.send failed"), "{effects}");
    assert!(effects.contains("unknown_recipient"), "{effects}");
    ok(&embedded(d, &["--agent", "carol", "agent", "register"]));
    let retried = ok(&embedded(d, &["retry", &id, "x000001"]));
    assert!(
        retried.starts_with(&format!("{id} updated at event #")),
        "{retried}"
    );
    ok(&embedded(d, &["worker", &id]));
    ok(&embedded(d, &["step", &id]));
    let status = ok(&embedded(d, &["status", &id]));
    assert!(status.contains(" completed "), "{status}");
    assert!(status.contains(r#"result={"text":"sent"}"#), "{status}");
    let inbox = ok(&embedded(
        d,
        &["--agent", "carol", "--json", "mail", "inbox"],
    ));
    assert!(inbox.contains(r#""text":"hi carol""#), "{inbox}");
}
