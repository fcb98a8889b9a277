//! Read-only resources: `resources/list` names the fixed views and the board template;
//! each view is the caller's own (its inbox, its leases), a board is readable by its
//! team's members only, reading the inbox acknowledges nothing, and an unknown address is
//! an error with its code.

use serde_json::json;

#[test]
fn resources_are_the_callers_own_views_and_boards_are_members_only() {
    let fabric = super::Fabric::start();
    fabric.team("web", &["lead", "worker"]);
    fabric.whip(&["agent", "register", "--agent", "eve"]);
    let mut mcp = fabric.mcp(&["lead", "worker", "eve"]);
    let listed = mcp.resources("worker");
    let uris = listed["resources"].as_array().unwrap();
    for uri in [
        "whip://inbox",
        "whip://leases",
        "whip://registry",
        "whip://reservations",
    ] {
        assert!(uris.contains(&json!(uri)), "{listed}");
    }
    assert_eq!(listed["templates"], json!(["whip://team/{team}/board"]));

    for n in 0..2 {
        let task = json!({"team": "web", "task": {"page": n}});
        mcp.call("lead", "board_post", task).ok();
    }
    let board = mcp.read("worker", "whip://team/web/board");
    let board = board.expect("a member reads");
    assert_eq!(board["counts"]["ready"], 2, "{board}");
    let ready = board["ready"].as_array().unwrap();
    assert_eq!(ready.len(), 2, "{board}");
    assert!(
        ready.iter().any(|t| t["body"] == json!({"page": 0})),
        "{board}"
    );
    let outsider = mcp.read("eve", "whip://team/web/board");
    let outsider = outsider.expect_err("eve is no member");
    assert!(outsider.contains("not_member"), "{outsider}");

    own_views(&mut mcp);
    let missing = mcp.read("worker", "whip://elsewhere");
    let missing = missing.expect_err("no such resource");
    assert!(missing.contains("not_found"), "{missing}");
}

/// The inbox, leases and registry views show the caller's own.
fn own_views(mcp: &mut super::Bridge) {
    let note = json!({"to": "worker", "type": "inform", "text": "ship it"});
    mcp.call("lead", "mail_send", note).ok();
    for _ in 0..2 {
        let inbox = mcp.read("worker", "whip://inbox").expect("own inbox");
        let messages = inbox["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "reading acknowledges nothing: {inbox}");
        assert_eq!(messages[0]["from"], "lead", "{inbox}");
        assert_eq!(inbox["agent"], "worker");
    }
    let eves = mcp.read("eve", "whip://inbox").expect("own inbox");
    assert_eq!(eves["messages"], json!([]), "only the caller's own: {eves}");

    let lease = json!({"name": "deploy", "key": "prod", "ttl_s": 60});
    let held = mcp.call("worker", "lease_acquire", lease).ok();
    let leases = mcp.read("worker", "whip://leases").expect("own leases");
    let listed = leases["leases"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{leases}");
    assert_eq!(listed[0]["fence"], held["fence"], "{leases} vs {held}");
    let none = mcp.read("lead", "whip://leases").expect("own leases");
    assert_eq!(none["leases"], json!([]), "{none}");

    let reserve = json!({"repo": "site", "paths": ["src/**"], "exclusive": true, "ttl_s": 60});
    let granted = mcp.call("worker", "reserve_paths", reserve).ok();
    let mine = mcp
        .read("worker", "whip://reservations")
        .expect("own reservations");
    let listed = mine["reservations"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{mine}");
    assert_eq!(listed[0]["fence"], granted["granted"][0]["fence"], "{mine}");
    let theirs = mcp
        .read("lead", "whip://reservations")
        .expect("own reservations");
    assert_eq!(theirs["reservations"], json!([]), "{theirs}");

    let session = mcp.call("worker", "start_session", json!({"team": "web"}));
    let session = session.ok();
    let registry = mcp.read("worker", "whip://registry").expect("the registry");
    let entries = registry["entries"].as_array().unwrap();
    let mine = entries.iter().find(|e| e["id"] == session["entry"]["id"]);
    assert_eq!(
        mine.map(|e| &e["owner"]),
        Some(&json!("worker")),
        "{registry}"
    );
}
