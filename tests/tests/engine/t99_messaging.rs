//! Goal (issue 36, item 5): the `local`, `stdio` and `fixture` messaging providers as a user
//! runs them (LANGUAGE-AGENTS.md §4.5, golden 6). Method: `whip run` of
//! `engine/tests/check/valid/messaging_providers.whip` on the embedded store prints the
//! stdio line and appends one line per run to `.whipplescript/mailbox.jsonl`, each with its
//! own message id; the same program against a 3-voter cell (`--cell`) still prints the
//! stdio line but blocks the `local` send `provider_config` (there is no store beside the
//! worker), leaving the instance running, not failed, and no mailbox file.

use std::path::Path;

use serde_json::Value;

const PROGRAM: &str = "messaging_providers.whip";
const STDIO_LINE: &str = "[messaging.stdio] channel=console text=hello";

fn copy_program(dir: &Path) {
    let valid = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/check/valid");
    std::fs::copy(valid.join(PROGRAM), dir.join(PROGRAM)).expect("copy the program");
}

/// The run's JSON (its last stdout line) and every line before it.
fn run_json(stdout: &str) -> (Value, Vec<&str>) {
    let mut lines: Vec<&str> = stdout.lines().collect();
    let last = lines.pop().expect("a JSON line");
    (serde_json::from_str(last).expect("run json"), lines)
}

#[test]
fn local_and_stdio_channels_deliver_on_the_embedded_store() {
    let dir = crate::workdir();
    copy_program(dir.path());
    let mut ids = Vec::new();
    for _ in 0..2 {
        let out = crate::ok(&crate::whip(
            dir.path(),
            None,
            &["run", PROGRAM, "--wait", "--json"],
        ));
        let (run, before) = run_json(&out);
        assert_eq!(before, [STDIO_LINE], "the stdio send prints once: {out}");
        assert_eq!(run["status"], "completed");
        let receipt = &run["terminal"]["payload"];
        assert_eq!(receipt["console"], "std.messaging.stdio");
        assert_eq!(receipt["outbox"], "std.messaging.local");
        ids.push(run["id"].as_str().expect("an id").to_string());
    }
    let mailbox = std::fs::read_to_string(dir.path().join(".whipplescript/mailbox.jsonl"))
        .expect("the local mailbox");
    let lines: Vec<Value> = (mailbox.lines())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "one line per run: {mailbox}");
    for line in &lines {
        assert_eq!(line["channel"], "outbox");
        assert_eq!(line["provider"], "local");
        assert_eq!(line["text"], "to the box");
        assert_eq!(line["message_id"], line["provider_message_id"]);
    }
    assert_ne!(
        lines[0]["message_id"], lines[1]["message_id"],
        "each send its own id"
    );
}

#[test]
fn a_local_channel_is_blocked_on_a_cell_and_nothing_fails() {
    let dir = crate::workdir();
    copy_program(dir.path());
    let dev = whip_tests::DevCell::start(dir.path());
    let cell = dev.member(0);
    let out = crate::ok(&crate::whip(
        dir.path(),
        Some(&cell),
        &["run", PROGRAM, "--json"],
    ));
    let (run, before) = run_json(&out);
    assert_eq!(before, [STDIO_LINE], "the stdio send still prints: {out}");
    assert_eq!(run["status"], "running", "a block is not a failure: {out}");
    let id = run["id"].as_str().expect("an id");
    let effects: Value = serde_json::from_str(&crate::ok(&crate::whip(
        dir.path(),
        Some(&cell),
        &["effects", id, "--json"],
    )))
    .expect("effects json");
    let outbox = (effects.as_array().expect("effects").iter())
        .find(|e| e["args"]["channel"] == "outbox")
        .expect("the outbox send");
    assert_eq!(outbox["state"], "blocked", "{outbox}");
    let block = &outbox["policy_block"];
    assert_eq!(block["category"], "provider_config", "{outbox}");
    assert!(
        block["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("embedded store"),
        "{block}"
    );
    assert!(!dir.path().join(".whipplescript/mailbox.jsonl").exists());
}
