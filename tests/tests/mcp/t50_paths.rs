//! `reserve_paths` and `release_paths` between two agents, each through its own `whip mcp`:
//! an exclusive glob is granted with a fence and an expiry; the other agent's overlapping
//! reserve lists the holder and the expiry and gets nothing; the other agent can neither
//! release the path nor name a holder (`not_authorized`, nothing changes); a stale fence is
//! a `stale_fence` tool error; `start_session` lists the reservation among the holds; once
//! released, the other agent is granted the path.

use serde_json::json;

use super::{Fabric, code};

#[test]
fn two_agents_reserve_conflict_and_release_through_mcp() {
    let fabric = Fabric::start();
    for agent in ["alice", "bob"] {
        fabric.whip(&["agent", "register", "--agent", agent]);
    }
    let mut mcp = fabric.mcp(&["alice", "bob"]);
    let ask = json!({"repo": "whip", "paths": ["src/**"], "exclusive": true, "ttl_s": 600});
    let held = mcp.call("alice", "reserve_paths", ask).ok();
    assert_eq!(held["conflicts"], json!([]), "{held}");
    let grant = &held["granted"][0];
    assert_eq!(
        (&grant["path"], &grant["exclusive"]),
        (&json!("src/**"), &json!(true))
    );
    let fence = grant["fence"].as_u64().expect("a fence");
    assert!(
        grant["expires_at"].as_str().unwrap().ends_with('Z'),
        "{held}"
    );

    let mine = json!({"repo": "whip", "paths": ["src/a.rs"], "exclusive": false, "ttl_s": 60});
    let lost = mcp.call("bob", "reserve_paths", mine.clone()).ok();
    assert_eq!(lost["granted"], json!([]), "{lost}");
    let conflict = &lost["conflicts"][0];
    assert_eq!(
        (&conflict["holder"], &conflict["held"]),
        (&json!("alice"), &json!("src/**"))
    );
    assert_eq!(conflict["expires_at"], grant["expires_at"]);

    // Bob can neither release alice's path nor name her as the holder.
    let steal = json!({"repo": "whip", "paths": ["src/**"]});
    let refused = mcp.call("bob", "release_paths", steal).refused();
    assert_eq!(code(&refused), "not_holder", "{refused}");
    let forged = json!({"repo": "whip", "paths": ["src/**"], "holder": "alice"});
    let refused = mcp.call("bob", "release_paths", forged).refused();
    assert_eq!(code(&refused), "not_authorized", "{refused}");
    let stale = json!({"repo": "whip", "paths": ["src/**"], "fence": fence + 1});
    let refused = mcp.call("alice", "release_paths", stale).refused();
    assert_eq!(code(&refused), "stale_fence", "{refused}");
    let listed = fabric.whip(&["paths", "list", "--repo", ".", "--mine", "--agent", "alice"]);
    assert_eq!(listed["reservations"][0]["fence"], fence, "{listed}");

    let session = mcp.call("alice", "start_session", json!({})).ok();
    let holds = session["holds"].as_array().unwrap();
    let reservation = holds.iter().find(|h| h["kind"] == "reservation");
    let reservation = reservation.unwrap_or_else(|| panic!("no reservation in {session}"));
    assert_eq!(
        (&reservation["repo"], &reservation["path"]),
        (&json!("whip"), &json!("src/**"))
    );

    let released = mcp.call(
        "alice",
        "release_paths",
        json!({"repo": "whip", "fence": fence}),
    );
    assert_eq!(released.ok()["released"], json!(["src/**"]));
    let won = mcp.call("bob", "reserve_paths", mine).ok();
    assert_eq!(won["granted"][0]["path"], "src/a.rs", "{won}");
    assert!(
        won["granted"][0]["fence"].as_u64().unwrap() > fence,
        "{won}"
    );
}

#[test]
fn bad_reservations_are_invalid_arguments() {
    let fabric = Fabric::start();
    fabric.whip(&["agent", "register", "--agent", "alice"]);
    let mut mcp = fabric.mcp(&["alice"]);
    for arguments in [
        json!({"repo": "", "paths": ["a"], "exclusive": true, "ttl_s": 60}),
        json!({"repo": "r", "paths": ["/etc/passwd"], "exclusive": true, "ttl_s": 60}),
        json!({"repo": "r", "paths": ["a"], "exclusive": true, "ttl_s": 0}),
        json!({"repo": "r", "paths": ["a"], "exclusive": true}),
    ] {
        let refused = mcp
            .call("alice", "reserve_paths", arguments.clone())
            .refused();
        assert_eq!(code(&refused), "invalid_argument", "{arguments}: {refused}");
    }
}
