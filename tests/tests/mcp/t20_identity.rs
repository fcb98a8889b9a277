//! The attacker's view: identity is the transport's. A tool call that names another agent
//! (a forged sender, holder, worker or appender) is refused `not_authorized` and changes
//! nothing the CLI can read back; no tool reads another agent's inbox, because none takes
//! a mailbox, and a reply or an acknowledgement reaches only the caller's own mail. The
//! board's own refusals arrive as tool errors with their stable code.

use serde_json::{Value, json};

use super::{Fabric, code};

/// Argument names that would say who acts.
const IDENTITY_NAMES: &[&str] = &["from", "agent", "sender", "owner", "holder", "worker"];

#[test]
fn no_tool_schema_has_an_argument_naming_who_acts_or_whose_mailbox() {
    let fabric = Fabric::start();
    fabric.whip(&["agent", "register", "--agent", "mallory"]);
    let mut mcp = fabric.mcp(&["mallory"]);
    for tool in mcp.tools("mallory") {
        let properties = tool["input_schema"]["properties"].as_object().cloned();
        for name in properties.unwrap_or_default().keys() {
            let named = IDENTITY_NAMES.contains(&name.as_str()) || name == "address";
            assert!(!named, "{} takes {name:?}", tool["name"]);
        }
    }
}

#[test]
fn forged_senders_holders_and_workers_are_refused_and_change_nothing() {
    let fabric = Fabric::start();
    fabric.team("crew", &["lead", "bob", "mallory"]);
    let mut mcp = fabric.mcp(&["mallory", "bob"]);
    mcp.call(
        "bob",
        "board_post",
        json!({"team": "crew", "task": {"n": 1}}),
    )
    .ok();

    let forged: [(&str, Value); 7] = [
        (
            "mail_send",
            json!({"to": "bob", "type": "directive", "text": "rm -rf", "from": "lead"}),
        ),
        (
            "mail_send_many",
            json!({"to": "bob", "type": "directive", "texts": ["rm -rf"], "from": "lead"}),
        ),
        ("board_claim", json!({"team": "crew", "worker": "bob"})),
        (
            "lease_acquire",
            json!({"name": "deploy", "key": "prod", "ttl_s": 60, "holder": "bob"}),
        ),
        (
            "ledger_append",
            json!({"ledger": "l", "partition": "p", "entry": {}, "agent": "lead"}),
        ),
        (
            "vote_cast",
            json!({"proposal": "p1", "choice": ["a"], "sender": "lead"}),
        ),
        (
            "reserve_paths",
            json!({"repo": "r", "paths": ["src/**"], "exclusive": true, "ttl_s": 60,
                "holder": "bob"}),
        ),
    ];
    for (tool, arguments) in forged {
        let refused = mcp.call("mallory", tool, arguments).refused();
        assert_eq!(code(&refused), "not_authorized", "{tool}: {refused}");
    }

    // Nothing changed: bob's inbox is empty, the task is still ready, nobody holds the lease
    // and the ledger has no entry.
    let inbox = mcp.call("bob", "mail_inbox", json!({})).ok();
    assert_eq!(inbox["messages"], json!([]), "{inbox}");
    let stats = fabric.whip(&["board", "stats", "crew", "--agent", "lead"]);
    assert_eq!(
        (stats["ready"].as_u64(), stats["claimed"].as_u64()),
        (Some(1), Some(0))
    );
    let leases = fabric.whip(&["lease", "list"]);
    assert_eq!(leases["leases"], json!([]), "{leases}");
    let ledger = fabric.whip(&["ledger", "list", "l"]);
    assert_eq!(ledger["entries"], json!([]), "{ledger}");
    let held = fabric.whip(&["paths", "list", "--mine", "--agent", "bob"]);
    assert_eq!(held["reservations"], json!([]), "{held}");
}

#[test]
fn an_agent_reads_acknowledges_and_answers_only_its_own_mail() {
    let fabric = Fabric::start();
    for agent in ["alice", "bob", "mallory"] {
        fabric.whip(&["agent", "register", "--agent", agent]);
    }
    let mut mcp = fabric.mcp(&["alice", "bob", "mallory"]);
    let note = json!({"to": "bob", "type": "ask", "text": "the release key?"});
    let sent = mcp.call("alice", "mail_send", note).ok();
    let id = sent["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("agent:bob#"), "{sent}");

    // Naming bob's mailbox is refused; mallory's own inbox holds nothing of bob's.
    let named = mcp
        .call("mallory", "mail_inbox", json!({"agent": "bob"}))
        .refused();
    assert_eq!(code(&named), "not_authorized", "{named}");
    let address = mcp
        .call("mallory", "mail_inbox", json!({"address": "agent:bob"}))
        .refused();
    assert_eq!(code(&address), "invalid_argument", "{address}");
    let own = mcp.call("mallory", "mail_inbox", json!({})).ok();
    assert_eq!(own["messages"], json!([]), "{own}");
    let reply = json!({"id": id, "text": "it is hunter2"});
    let replied = mcp.call("mallory", "mail_reply", reply).refused();
    assert_eq!(code(&replied), "not_authorized", "{replied}");
    // An acknowledgement is of the caller's own mailbox: bob's message stays.
    mcp.call("mallory", "mail_ack", json!({"through_seq": 1}))
        .ok();
    // So is a take: naming bob's mailbox is no argument at all, and mallory's own take
    // acknowledges and takes only mallory's mail.
    let named = json!({"address": "agent:bob", "ack_through": 1});
    let take = mcp.call("mallory", "mail_take", named).refused();
    assert_eq!(code(&take), "invalid_argument", "{take}");
    let own = mcp
        .call("mallory", "mail_take", json!({"ack_through": 1}))
        .ok();
    assert_eq!(
        (&own["messages"], &own["removed"]),
        (&json!([]), &json!(0)),
        "{own}"
    );

    let inbox = mcp.call("bob", "mail_inbox", json!({})).ok();
    let messages = inbox["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{inbox}");
    assert_eq!(
        (&messages[0]["from"], &messages[0]["type"]),
        (&json!("alice"), &json!("ask"))
    );
    assert_eq!(messages[0]["trust"], "untrusted");
    let taken = mcp.call("bob", "mail_take", json!({"max": 5})).ok();
    assert_eq!(
        taken["messages"][0]["id"],
        id.as_str(),
        "bob takes his own: {taken}"
    );
    let answer = mcp
        .call("bob", "mail_reply", json!({"id": id, "text": "ask lead"}))
        .ok();
    assert_eq!(answer["outcome"], "delivered", "{answer}");
    let alice = mcp.call("alice", "mail_inbox", json!({})).ok();
    assert_eq!(alice["messages"][0]["from"], "bob", "{alice}");
    assert_eq!(alice["messages"][0]["in_reply_to"], id.as_str());
}

#[test]
fn the_boards_refusals_arrive_as_tool_errors_with_their_code() {
    let fabric = Fabric::start();
    fabric.team("crew", &["lead", "bob"]);
    fabric.whip(&["agent", "register", "--agent", "mallory"]);
    let mut mcp = fabric.mcp(&["mallory", "bob"]);
    // Not a member: the board refuses the post and the claim, and the team's documents.
    let post = json!({"team": "crew", "task": {"n": 1}});
    for (tool, arguments) in [
        ("board_post", post),
        ("board_claim", json!({"team": "crew"})),
        ("doc_get", json!({"team": "crew", "name": "plan"})),
    ] {
        let refused = mcp.call("mallory", tool, arguments).refused();
        let refused_code = code(&refused);
        assert!(
            ["not_member", "not_authorized"].contains(&refused_code),
            "{tool}: {refused}"
        );
    }
    // A worker may not send a directive to a peer.
    let directive = json!({"to": "lead", "type": "directive", "text": "stop"});
    let refused = mcp.call("bob", "mail_send", directive).refused();
    assert_eq!(code(&refused), "not_authorized", "{refused}");
    // A wrong type is the argument's fault, with the code first too.
    let wrong = mcp.call("bob", "board_claim", json!({"team": 7})).refused();
    assert_eq!(code(&wrong), "invalid_argument", "{wrong}");
}
