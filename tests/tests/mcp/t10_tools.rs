//! The tool set and the work an agent does through it: `tools/list` names the tools with
//! their schemas; a task posted, claimed and completed through MCP is done on the board the
//! CLI reads; a stale fence is a tool error with its code; `start_session` registers the
//! agent's session entry and answers its inbox, holds and board; without `--cell` the
//! server holds the embedded store, where the CLI then reads what the tools wrote.

use serde_json::json;

use super::{Fabric, code};

/// Tools every agent relies on (the list).
const REQUIRED_TOOLS: &[&str] = &[
    "start_session",
    "board_post",
    "board_claim",
    "board_complete",
    "mail_send",
    "mail_inbox",
    "budget_consume",
    "vote_cast",
];

#[test]
fn tools_list_names_the_agent_tools_each_with_a_closed_schema() {
    let fabric = Fabric::start();
    fabric.whip(&["agent", "register", "--agent", "alice"]);
    let mut mcp = fabric.mcp(&["alice"]);
    let tools = mcp.tools("alice");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for required in REQUIRED_TOOLS {
        assert!(
            names.contains(required),
            "{required} missing from {names:?}"
        );
    }
    for tool in &tools {
        let schema = &tool["input_schema"];
        assert_eq!(schema["type"], "object", "{tool}");
        assert_eq!(schema["additionalProperties"], false, "{tool}");
        let name = tool["name"].as_str().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{name}"
        );
    }
}

#[test]
fn a_task_posted_claimed_and_completed_through_mcp_is_done_on_the_board() {
    let fabric = Fabric::start();
    fabric.team("build", &["lead", "worker"]);
    let mut mcp = fabric.mcp(&["lead", "worker"]);
    let posted = mcp
        .call(
            "lead",
            "board_post",
            json!({"team": "build", "task": {"file": "a.rs"}}),
        )
        .ok();
    let task_id = posted["task_id"].as_str().unwrap().to_string();

    let claimed = mcp
        .call("worker", "board_claim", json!({"team": "build"}))
        .ok();
    assert_eq!(claimed["task"]["id"], task_id.as_str(), "{claimed}");
    assert_eq!(claimed["task"]["body"], json!({"file": "a.rs"}));
    let fence = claimed["fence"].as_u64().unwrap();
    // The board names the proven agent as the task's worker.
    let listed = fabric.whip(&["board", "list", "build", "--agent", "lead"]);
    assert_eq!(listed[0]["worker"], "worker", "{listed}");

    let stale = json!({"team": "build", "task_id": task_id, "fence": fence + 1});
    let refused = mcp.call("worker", "board_complete", stale).refused();
    assert_eq!(code(&refused), "stale_fence", "{refused}");

    let done = json!({"team": "build", "task_id": task_id, "fence": fence, "result": {"ok": 1}});
    let completed = mcp.call("worker", "board_complete", done).ok();
    assert_eq!(completed["outcome"], "completed", "{completed}");
    let stats = fabric.whip(&["board", "stats", "build", "--agent", "lead"]);
    assert_eq!(
        (stats["done"].as_u64(), stats["ready"].as_u64()),
        (Some(1), Some(0))
    );

    let empty = mcp
        .call("worker", "board_claim", json!({"team": "build"}))
        .ok();
    assert_eq!((&empty["task"], &empty["fence"]), (&json!(null), &json!(0)));
}

#[test]
fn start_session_registers_the_entry_and_answers_inbox_holds_and_board() {
    let fabric = Fabric::start();
    fabric.team("ops", &["lead", "bob"]);
    let mut mcp = fabric.mcp(&["lead", "bob"]);
    let team = json!({"team": "ops", "task": {"n": 1}});
    mcp.call("lead", "board_post", team).ok();
    let claimed = mcp.call("bob", "board_claim", json!({"team": "ops"})).ok();
    let lease = json!({"name": "deploy", "key": "prod", "ttl_s": 60});
    mcp.call("bob", "lease_acquire", lease).ok();
    let note = json!({"to": "bob", "type": "inform", "text": "ship it"});
    mcp.call("lead", "mail_send", note).ok();

    let session = mcp
        .call("bob", "start_session", json!({"team": "ops"}))
        .ok();
    assert_eq!(session["agent"], "bob");
    let entry = session["entry"]["id"].as_str().unwrap().to_string();
    assert_eq!(session["entry"]["kind"], "session");
    let messages = session["inbox"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{session}");
    assert_eq!(
        (&messages[0]["from"], &messages[0]["trust"]),
        (&json!("lead"), &json!("untrusted"))
    );
    let holds = session["holds"].as_array().unwrap();
    let kinds: Vec<&str> = holds.iter().filter_map(|h| h["kind"].as_str()).collect();
    assert_eq!(kinds, ["lease", "claim"], "{session}");
    assert_eq!(holds[1]["task_id"], claimed["task"]["id"]);
    assert_eq!(session["board"]["claimed"], 1);

    // The entry is in the registry, owned by the proven agent; a second call resumes it.
    let entries = fabric.whip(&["work", "list"]);
    let listed = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == entry.as_str());
    assert_eq!(
        listed.map(|e| &e["owner"]),
        Some(&json!("bob")),
        "{entries}"
    );
    let again = mcp
        .call("bob", "start_session", json!({"team": "ops"}))
        .ok();
    assert_eq!(again["entry"]["id"], entry.as_str());
}

#[test]
fn without_cell_the_server_uses_the_embedded_store_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials.json");
    let config = json!({
        "whip": whip_tests::whip_binary(), "cwd": dir.path(), "agents": {"solo": ["mcp"]},
        "env": {"WHIP_CREDENTIALS": credentials, "WHIP_LOG": "warn"},
    });
    let mut mcp = super::Bridge::start(&config);
    let note = json!({"to": "solo", "type": "inform", "text": "note to self"});
    mcp.call("solo", "mail_send", note).ok();
    let inbox = mcp.call("solo", "mail_inbox", json!({})).ok();
    assert_eq!(inbox["messages"][0]["text"], "note to self", "{inbox}");
    let entry = json!({"ledger": "notes", "partition": "p", "entry": {"n": 1}});
    mcp.call("solo", "ledger_append", entry).ok();
    drop(mcp);

    // The entry is in the store under the directory, where the CLI reads it.
    let out = std::process::Command::new(whip_tests::whip_binary())
        .current_dir(dir.path())
        .env("WHIP_CREDENTIALS", &credentials)
        .args(["ledger", "list", "notes", "--json"])
        .output()
        .expect("run whip");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(listed["entries"][0]["appended_by"], "solo", "{listed}");
}

/// A vote opened through MCP carries the method and electorate it was given: a ballot by
/// a worker counts, and the proposal reads back with the method's stable code and the
/// workers as its electorate.
#[test]
fn a_vote_opened_through_mcp_keeps_its_method_and_electorate() {
    let fabric = Fabric::start();
    fabric.team("crew", &["lead", "w1"]);
    let mut mcp = fabric.mcp(&["lead", "w1"]);
    let open = json!({"team": "crew", "title": "ship?", "options": ["yes", "no"],
        "method": "borda", "electorate": ["worker"], "closes_s": 600});
    let opened = mcp.call("lead", "vote_open", open).ok();
    let proposal = opened["proposal"]
        .as_str()
        .expect("a proposal id")
        .to_string();
    let cast = json!({"proposal": proposal, "choice": ["yes", "no"]});
    mcp.call("w1", "vote_cast", cast).ok();
    let shown = mcp
        .call("lead", "vote_show", json!({"proposal": proposal}))
        .ok();
    assert_eq!(shown["method"], "borda", "{shown}");
    // The workers, resolved by the board: the lead (the team's coordinator) is not one.
    assert_eq!(shown["electorate"], json!(["w1"]), "{shown}");
    assert_eq!(shown["ballots"], 1, "{shown}");
}

/// `board_claim` with `max` claims several tasks in one call, each with its own fence: each
/// completes under its own, another's fence is refused, and a `max` past the bound is a
/// tool error that claims nothing.
#[test]
fn board_claim_with_max_claims_tasks_each_under_its_own_fence() {
    let fabric = Fabric::start();
    fabric.team("batch", &["lead", "worker"]);
    let mut mcp = fabric.mcp(&["lead", "worker"]);
    for n in 0..3 {
        let post = json!({"team": "batch", "task": {"n": n}});
        mcp.call("lead", "board_post", post).ok();
    }
    let too_many = json!({"team": "batch", "max": 17});
    let refused = mcp.call("worker", "board_claim", too_many).refused();
    assert!(refused.contains("at most 16"), "{refused}");
    let stats = fabric.whip(&["board", "stats", "batch", "--agent", "lead"]);
    assert_eq!(
        stats["ready"], 3,
        "a refused prefetch claims nothing: {stats}"
    );

    let taken = mcp
        .call("worker", "board_claim", json!({"team": "batch", "max": 2}))
        .ok();
    assert_eq!(taken["outcome"], "claimed", "{taken}");
    let claims = taken["claims"].as_array().expect("claims").clone();
    let bodies: Vec<&serde_json::Value> = claims.iter().map(|c| &c["task"]["body"]).collect();
    assert_eq!(
        bodies,
        [&json!({"n": 0}), &json!({"n": 1})],
        "oldest first: {taken}"
    );
    let fences: Vec<u64> = claims
        .iter()
        .map(|c| c["fence"].as_u64().unwrap())
        .collect();
    assert_ne!(fences[0], fences[1], "each claim has its own fence");
    let crossed = json!({"team": "batch", "task_id": claims[0]["task"]["id"], "fence": fences[1]});
    let refused = mcp.call("worker", "board_complete", crossed).refused();
    assert_eq!(code(&refused), "stale_fence", "{refused}");
    for claim in &claims {
        let done = json!({"team": "batch", "task_id": claim["task"]["id"],
            "fence": claim["fence"]});
        let completed = mcp.call("worker", "board_complete", done).ok();
        assert_eq!(completed["outcome"], "completed", "{completed}");
    }
    let stats = fabric.whip(&["board", "stats", "batch", "--agent", "lead"]);
    assert_eq!((&stats["done"], &stats["ready"]), (&json!(2), &json!(1)));

    let rest = json!({"team": "batch", "max": 16});
    let rest = mcp.call("worker", "board_claim", rest).ok();
    assert_eq!(rest["claims"].as_array().map(Vec::len), Some(1), "{rest}");
    let empty = json!({"team": "batch", "max": 4});
    let empty = mcp.call("worker", "board_claim", empty).ok();
    assert_eq!(
        (&empty["outcome"], &empty["claims"]),
        (&json!("empty"), &json!([]))
    );
}

/// `mail_send_many` sends several messages to one mailbox in one call, as the caller: each
/// arrives in order with the proven sender, a directive the caller may not give is refused
/// alone, and a batch past the bound is a tool error that sends nothing.
#[test]
fn mail_send_many_delivers_each_message_as_its_own_send() {
    let fabric = Fabric::start();
    fabric.team("desk", &["lead", "ann", "bob"]);
    let mut mcp = fabric.mcp(&["ann", "bob"]);
    let batch = json!({"to": "bob", "type": "inform", "texts": ["one", "two", "three"]});
    let sent = mcp.call("ann", "mail_send_many", batch).ok();
    let results = sent["results"].as_array().expect("results").clone();
    let outcomes: Vec<&serde_json::Value> = results.iter().map(|r| &r["outcome"]).collect();
    assert_eq!(outcomes, [&json!("delivered"); 3], "{sent}");
    let inbox = mcp.call("bob", "mail_inbox", json!({})).ok();
    let messages = inbox["messages"].as_array().expect("messages");
    let texts: Vec<&serde_json::Value> = messages.iter().map(|m| &m["text"]).collect();
    assert_eq!(
        texts,
        [&json!("one"), &json!("two"), &json!("three")],
        "{inbox}"
    );
    assert!(messages.iter().all(|m| m["from"] == "ann"), "{inbox}");

    // A peer may not direct a peer: the directive is refused on its own, per message.
    let directives = json!({"to": "bob", "type": "directive", "texts": ["go", "stop"]});
    let answered = mcp.call("ann", "mail_send_many", directives).ok();
    let refused: Vec<&serde_json::Value> = answered["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| &r["outcome"])
        .collect();
    assert_eq!(refused, [&json!("refused"); 2], "{answered}");

    let texts: Vec<String> = (0..65).map(|n| format!("m{n}")).collect();
    let too_many = json!({"to": "bob", "type": "inform", "texts": texts});
    mcp.call("ann", "mail_send_many", too_many).refused();
    let inbox = mcp.call("bob", "mail_inbox", json!({"after": 0})).ok();
    let count = inbox["messages"].as_array().map(Vec::len);
    assert_eq!(count, Some(3), "nothing more arrived: {inbox}");
}
