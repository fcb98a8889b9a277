//! Registry histories: more entries certainly live than the ceiling, a renewal after a
//! revoke had returned, a revoked or never admitted entry in the final listing.

use serde_json::{Value, json};
use whip_tests::chaos::history::Op;

use crate::{fails, op, passes};

const K: &str = "registry/all";

fn limits(ceiling: u64) -> Op {
    op(
        0,
        "limits",
        K,
        json!({"fabric_max": ceiling}),
        json!({}),
        0,
        Some(1),
    )
}

fn register(p: u64, id: &str, call: u64, ret: u64) -> Op {
    let output = json!({"outcome": "admitted", "id": id, "limit": ""});
    op(
        p,
        "register",
        K,
        json!({"parent": null}),
        output,
        call,
        Some(ret),
    )
}

fn renew(p: u64, id: &str, call: u64, ret: u64) -> Op {
    let output = json!({"outcome": "renewed", "signal": "run", "reason": "own"});
    op(p, "renew", K, json!({"id": id}), output, call, Some(ret))
}

fn revoke(p: u64, id: &str, call: u64, ret: u64) -> Op {
    op(
        p,
        "revoke",
        K,
        json!({"id": id}),
        json!({"outcome": "revoked"}),
        call,
        Some(ret),
    )
}

fn list(ids: &[&str]) -> Op {
    op(
        99,
        "list",
        K,
        Value::Null,
        json!({"ids": ids}),
        1000,
        Some(1001),
    )
}

#[test]
fn entries_within_the_ceiling_pass() {
    // Two live at once under a ceiling of 2; the third comes after the first lapsed.
    passes(&[
        limits(2),
        register(1, "wa", 10, 11),
        register(2, "wb", 12, 13),
        renew(1, "wa", 20, 21),
        renew(2, "wb", 22, 23),
        register(3, "wc", 30, 31),
        renew(3, "wc", 40, 41),
        list(&["wc"]),
    ]);
}

#[test]
fn three_certainly_live_under_a_ceiling_of_two_fail() {
    let found = fails(&[
        limits(2),
        register(1, "wa", 10, 11),
        register(2, "wb", 12, 13),
        register(3, "wc", 14, 15),
        renew(1, "wa", 20, 21),
        renew(2, "wb", 20, 21),
        renew(3, "wc", 20, 21),
    ]);
    assert!(
        found[0].message.contains("3 entries certainly live"),
        "{found:?}"
    );
}

#[test]
fn a_child_renewed_after_its_parent_was_revoked_fails() {
    let found = fails(&[
        limits(5),
        register(1, "wa", 10, 11),
        register(1, "wa.0", 12, 13),
        revoke(1, "wa", 20, 21),
        renew(2, "wa.0", 30, 31),
    ]);
    assert!(found[0].message.contains("after a revoke"), "{found:?}");
}

#[test]
fn a_revoked_or_phantom_entry_in_the_listing_fails() {
    let revoked = fails(&[
        limits(5),
        register(1, "wa", 10, 11),
        revoke(1, "wa", 20, 21),
        list(&["wa.0"]),
    ]);
    assert!(
        revoked[0].message.contains("listed after a revoke"),
        "{revoked:?}"
    );
    let phantom = fails(&[limits(5), register(1, "wa", 10, 11), list(&["wz"])]);
    assert!(phantom[0].message.contains("never admitted"), "{phantom:?}");
}
