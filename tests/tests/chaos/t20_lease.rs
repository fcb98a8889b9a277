//! The lease with slots: fences, deadlines, contention and release.

use serde_json::{Value, json};
use whip_tests::chaos::history::Op;
use whip_tests::chaos::invariants::check_lease_slots;

use crate::{fails, op, passes};

const K: &str = "lease/k0";
const TTL: u64 = 1000;

fn held(p: u64, holder: &str, slots: u32, fence: u64, stamp: u64, call: u64, ret: u64) -> Op {
    op(
        p,
        "acquire",
        K,
        json!({"holder": holder, "slots": slots, "ttl_ms": TTL}),
        json!({"held": true, "fence": fence, "expires_at_ms": stamp + TTL, "reentered": false}),
        call,
        Some(ret),
    )
}

fn contended(p: u64, holder: &str, slots: u32, holders: Value, call: u64, ret: u64) -> Op {
    op(
        p,
        "acquire",
        K,
        json!({"holder": holder, "slots": slots, "ttl_ms": TTL}),
        json!({"held": false, "holders": holders}),
        call,
        Some(ret),
    )
}

fn release(p: u64, holder: &str, released: bool, call: u64, ret: u64) -> Op {
    op(
        p,
        "release",
        K,
        json!({"holder": holder}),
        json!({"released": released}),
        call,
        Some(ret),
    )
}

#[test]
fn two_slots_two_holders_then_contended_passes() {
    passes(&[
        held(1, "a", 2, 10, 5000, 0, 1),
        held(2, "b", 2, 20, 5010, 2, 3),
        contended(
            3,
            "c",
            2,
            json!([
                {"holder": "a", "fence": 10, "expires_at_ms": 6000},
                {"holder": "b", "fence": 20, "expires_at_ms": 6010},
            ]),
            4,
            5,
        ),
        release(1, "a", true, 6, 7),
        held(3, "c", 2, 30, 5050, 8, 9),
    ]);
}

#[test]
fn three_live_holders_with_two_slots_fails() {
    let ops = [
        held(1, "a", 2, 10, 5000, 0, 1),
        held(2, "b", 2, 20, 5010, 2, 3),
        held(3, "c", 2, 30, 5020, 4, 5),
    ];
    fails(&ops);
    let direct = check_lease_slots(&ops);
    assert_eq!(direct.len(), 1, "{direct:#?}");
    assert!(direct[0].message.contains("3 live holders with 2 slots"));
}

#[test]
fn grant_after_expiry_passes() {
    passes(&[
        held(1, "a", 1, 10, 5000, 0, 1),
        held(2, "b", 1, 20, 6000, 2, 3),
    ]);
}

#[test]
fn grant_before_expiry_with_one_slot_fails() {
    fails(&[
        held(1, "a", 1, 10, 5000, 0, 1),
        held(2, "b", 1, 20, 5999, 2, 3),
    ]);
}

#[test]
fn fence_going_backward_fails() {
    fails(&[
        held(1, "a", 1, 50, 5000, 0, 1),
        held(2, "b", 1, 40, 7000, 2, 3),
    ]);
}

#[test]
fn released_holder_listed_later_fails() {
    fails(&[
        held(1, "a", 1, 10, 5000, 0, 1),
        release(1, "a", true, 2, 3),
        contended(
            2,
            "b",
            1,
            json!([{"holder": "a", "fence": 10, "expires_at_ms": 6000}]),
            4,
            5,
        ),
    ]);
}

#[test]
fn unknown_acquire_may_hold_a_slot() {
    let unknown = op(
        2,
        "acquire",
        K,
        json!({"holder": "b", "slots": 1, "ttl_ms": TTL}),
        Value::Null,
        2,
        None,
    );
    passes(&[
        held(1, "a", 1, 10, 5000, 0, 1),
        release(1, "a", true, 2, 3),
        unknown,
        contended(
            3,
            "c",
            1,
            json!([{"holder": "b", "fence": 30, "expires_at_ms": 6100}]),
            4,
            5,
        ),
    ]);
}

#[test]
fn release_concurrent_with_a_grant_may_come_first() {
    let ops = [
        held(1, "a", 1, 10, 5000, 0, 1),
        release(1, "a", true, 2, 6),
        held(2, "b", 1, 20, 5100, 4, 8),
    ];
    passes(&ops);
    assert!(check_lease_slots(&ops).is_empty());
}
