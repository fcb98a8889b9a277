//! Follow-up histories: a revoke acknowledged whose helper still proves itself, a helper
//! nobody revoked whose token is refused, a dissolved team still there.

use serde_json::{Value, json};
use whip_tests::chaos::history::Op;

use crate::{fails, op, passes};

const K: &str = "follow/all";

fn enroll(agent: &str, team: &str) -> Op {
    let input = json!({"parent": "p", "agent": agent, "team": team});
    op(1, "enroll", K, input, json!({"created": true}), 1, Some(2))
}

fn revoke(agent: &str, acked: bool) -> Op {
    let output = json!({"agents": [agent], "removed": 1});
    let ret = acked.then_some(11);
    op(
        1,
        "revoke",
        K,
        json!({"id": "e", "agent": agent}),
        output,
        10,
        ret,
    )
}

fn dissolve(team: &str) -> Op {
    let output = json!({"code": 0, "done": true});
    op(
        1,
        "dissolve",
        K,
        json!({"team": team}),
        output,
        20,
        Some(21),
    )
}

fn probe(input: Value, output: Value) -> Op {
    op(9, "final", K, input, output, 100, Some(101))
}

fn token(agent: &str, accepted: bool) -> Op {
    probe(json!({"agent": agent}), json!({"accepted": accepted}))
}

fn team(name: &str, exists: bool) -> Op {
    probe(json!({"team": name}), json!({"exists": exists}))
}

#[test]
fn finished_follow_ups_and_an_untouched_control_pass() {
    passes(&[
        enroll("h1", "t1"),
        enroll("h2", "t2"),
        enroll("h3", "t3"),
        revoke("h1", true),
        // Unknown outcome: the helper may or may not be revoked.
        revoke("h3", false),
        dissolve("t2"),
        token("h1", false),
        token("h2", true),
        token("h3", false),
        team("t2", false),
    ]);
}

#[test]
fn an_acknowledged_revoke_whose_helper_still_proves_itself_fails() {
    let found = fails(&[enroll("h1", "t1"), revoke("h1", true), token("h1", true)]);
    assert!(found[0].message.contains("token works"), "{found:?}");
}

#[test]
fn a_helper_nobody_revoked_whose_token_is_refused_fails() {
    let found = fails(&[enroll("h2", "t2"), token("h2", false)]);
    assert!(found[0].message.contains("never revoked"), "{found:?}");
}

#[test]
fn a_dissolved_team_still_there_fails() {
    let found = fails(&[enroll("h1", "t1"), dissolve("t1"), team("t1", true)]);
    assert!(found[0].message.contains("the team is there"), "{found:?}");
}
