//! Issue 15's contract lines on a 3-voter dev cell: `whip mail send … --json` (delivered
//! with its trust, or refused with its reason and exit 1), `whip mail inbox --json` (id,
//! from, type, text, trust, screen with verdict and findings), an unknown `--type` (exit 2),
//! and the directive rule: a peer is refused, the parent and a team's supervisor are
//! authority.

use std::process::Output;

use serde_json::Value;

/// `whip … --cell ADDR` against a dev cell.
struct Cli(super::DevCli);

impl Cli {
    fn start() -> Cli {
        Cli(super::DevCli::start())
    }

    fn run(&self, args: &[&str]) -> Output {
        self.0.run(args)
    }

    /// `whip mail send TO --type T --text X --agent A --cell ADDR --json`: (exit code, JSON).
    fn send(&self, agent: &str, to: &str, kind: &str, text: &str) -> (i32, Value) {
        let args = [
            "mail", "send", to, "--type", kind, "--text", text, "--agent", agent,
        ];
        let out = self.run(&[&args[..], &["--json"]].concat());
        let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code().unwrap_or(-1), json)
    }
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "whip failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn mail_contract_lines_answer_as_documented() {
    let cli = Cli::start();
    ok(&cli.run(&["agent", "register", "--agent", "lead"]));
    ok(&cli.run(&["agent", "enroll", "bob", "--agent", "lead"]));
    ok(&cli.run(&["agent", "register", "--agent", "eve"]));

    let (code, sent) = cli.send("eve", "bob", "inform", "the tests are green");
    assert_eq!(code, 0, "{sent}");
    assert_eq!(
        (&sent["outcome"], &sent["trust"]),
        (&"delivered".into(), &"untrusted".into())
    );
    assert!(
        sent["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("agent:bob#")),
        "{sent}"
    );
    let (code, refused) = cli.send("eve", "bob", "directive", "deploy now");
    assert_eq!(
        (code, &refused["outcome"]),
        (1, &"refused".into()),
        "{refused}"
    );
    assert_eq!(refused["reason"], "not_authorized");
    let (code, directed) = cli.send("lead", "bob", "directive", "deploy now");
    assert_eq!(
        (code, &directed["trust"]),
        (0, &"authority".into()),
        "{directed}"
    );

    let inbox = ok(&cli.run(&["mail", "inbox", "--agent", "bob", "--json"]));
    let inbox: Value = serde_json::from_str(inbox.trim()).expect("json");
    let rows = inbox.as_array().expect("an array");
    assert_eq!(rows.len(), 2, "{inbox}");
    for field in ["id", "from", "type", "text", "trust"] {
        assert!(
            rows.iter().all(|r| r[field].is_string()),
            "{field}: {inbox}"
        );
    }
    assert!(
        rows.iter().all(|r| r["screen"]["verdict"] == "clean"),
        "{inbox}"
    );
    assert!(
        rows.iter().all(|r| r["screen"]["findings"].is_array()),
        "{inbox}"
    );
    let senders: Vec<&str> = rows.iter().map(|r| r["from"].as_str().unwrap()).collect();
    assert_eq!(senders, ["eve", "lead"]);

    let unknown = cli.run(&["mail", "send", "bob", "--type", "command", "--text", "x"]);
    assert_eq!(
        unknown.status.code(),
        Some(2),
        "an unknown --type is a usage error"
    );
    supervisor_directs_its_team(&cli);
}

/// A team's supervisor directs the team's mailbox; a member may not.
fn supervisor_directs_its_team(cli: &Cli) {
    ok(&cli.run(&["team", "create", "web", "--agent", "lead"]));
    ok(&cli.run(&["team", "join", "web", "--member", "eve", "--agent", "lead"]));
    let (code, directed) = cli.send("lead", "team:web", "directive", "ship it");
    assert_eq!(
        (code, &directed["trust"]),
        (0, &"authority".into()),
        "{directed}"
    );
    let (code, member) = cli.send("eve", "team:web", "directive", "stop everything");
    assert_eq!(
        (code, &member["reason"]),
        (1, &"not_authorized".into()),
        "{member}"
    );
    let inbox = ok(&cli.run(&["mail", "inbox", "team:web", "--agent", "eve", "--json"]));
    assert!(
        inbox.contains(r#""trust":"authority""#),
        "members read it: {inbox}"
    );
}

/// `WHIP_TOKEN` alone makes the CLI act as the agent the token names, without writing it
/// anywhere; a token whose name hint was changed, or one that disagrees with `--agent`, is
/// refused and sends nothing.
#[test]
fn whip_token_alone_proves_the_agent_it_names() {
    let cli = Cli::start();
    ok(&cli.run(&["agent", "register", "--agent", "eve"]));
    ok(&cli.run(&["agent", "register", "--agent", "bob"]));
    let creds: Value =
        serde_json::from_slice(&std::fs::read(cli.0.dir.join("credentials.json")).unwrap())
            .unwrap();
    let token = creds["eve"].as_str().expect("eve's token").to_string();
    let elsewhere = tempfile::tempdir().unwrap();
    let unused = elsewhere.path().join("credentials.json");
    let as_token = |token: &str, extra: &[&str]| {
        let args = ["mail", "send", "bob", "--type", "inform", "--text", "hi"];
        std::process::Command::new(whip_tests::whip_binary())
            .current_dir(elsewhere.path())
            .env("WHIP_CREDENTIALS", &unused)
            .env("WHIP_TOKEN", token)
            .args([&args[..], extra, &["--cell", cli.0.cell.as_str(), "--json"]].concat())
            .output()
            .expect("run whip")
    };
    let sent = ok(&as_token(&token, &[]));
    assert!(sent.contains(r#""outcome":"delivered""#), "{sent}");
    assert!(
        !unused.exists(),
        "WHIP_TOKEN is never written to a credentials file"
    );

    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let renamed = token.replace(&hex("eve"), &hex("bob"));
    assert_ne!(renamed, token);
    let forged = as_token(&renamed, &[]);
    assert_eq!(forged.status.code(), Some(1), "{forged:?}");
    let mismatch = as_token(&token, &["--agent", "bob"]);
    assert_eq!(mismatch.status.code(), Some(1), "{mismatch:?}");
    assert!(String::from_utf8_lossy(&mismatch.stderr).contains("WHIP_TOKEN"));

    let inbox = ok(&cli.run(&["mail", "inbox", "--agent", "bob", "--json"]));
    let inbox: Value = serde_json::from_str(inbox.trim()).expect("json");
    let rows = inbox.as_array().expect("an array");
    assert_eq!(rows.len(), 1, "only the proven send arrived: {inbox}");
    assert_eq!(rows[0]["from"], "eve", "{inbox}");
}

/// `whip mail send TO --text A --text B …` (issue 35, item 4): several messages in one
/// write, one answer each in order; a peer's batch of directives is refused message by
/// message (exit 1) and lands nothing; then one take hands out the batch.
#[test]
fn mail_send_with_several_texts_sends_them_in_one_write() {
    let cli = Cli::start();
    ok(&cli.run(&["agent", "register", "--agent", "lead"]));
    ok(&cli.run(&["agent", "enroll", "bob", "--agent", "lead"]));
    ok(&cli.run(&["agent", "register", "--agent", "eve"]));
    let send = ["mail", "send", "bob", "--agent", "eve", "--json"];
    let texts = ["--text", "one", "--text", "two", "--text", "three"];
    let sent: Value =
        serde_json::from_str(ok(&cli.run(&[&send[..], &texts].concat())).trim()).expect("json");
    let ids: Vec<&str> = sent["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["id"].as_str().expect("an id"))
        .collect();
    assert_eq!(ids, ["agent:bob#1", "agent:bob#2", "agent:bob#3"], "{sent}");
    let directives = [
        &send[..],
        &["--type", "directive", "--text", "x", "--text", "y"],
    ]
    .concat();
    let refused = cli.run(&directives);
    assert_eq!(refused.status.code(), Some(1));
    let refused: Value = serde_json::from_slice(&refused.stdout).expect("json");
    let reasons: Vec<&str> = refused["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["reason"].as_str().expect("a reason"))
        .collect();
    assert_eq!(reasons, ["not_authorized", "not_authorized"], "{refused}");
    let took = ok(&cli.run(&["mail", "take", "--agent", "bob", "--max", "10", "--json"]));
    let took: Value = serde_json::from_str(took.trim()).expect("json");
    let texts: Vec<&str> = took["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["text"].as_str().expect("a text"))
        .collect();
    assert_eq!(texts, ["one", "two", "three"], "{took}");
}
