//! Ledger appends against the final listing: gaps, duplicates, losses, order.

use serde_json::{Value, json};
use whip_tests::chaos::history::Op;

use crate::{fails, op, passes};

const P: &str = "ledger/p0";

fn append(p: u64, entry: &str, seq: u64, call: u64, ret: Option<u64>) -> Op {
    op(
        p,
        "append",
        P,
        json!({"entry": entry}),
        json!({"seq": seq}),
        call,
        ret,
    )
}

fn list(entries: Value) -> Op {
    op(
        99,
        "list",
        P,
        Value::Null,
        json!({"entries": entries}),
        1000,
        Some(1001),
    )
}

#[test]
fn complete_ledger_passes() {
    passes(&[
        append(1, "a", 1, 0, Some(1)),
        append(2, "b", 2, 2, Some(3)),
        append(3, "c", 0, 4, None),
        list(json!([[1, "a"], [2, "b"], [3, "c"]])),
    ]);
}

#[test]
fn unknown_append_may_be_missing() {
    passes(&[
        append(1, "a", 1, 0, Some(1)),
        append(3, "c", 0, 4, None),
        list(json!([[1, "a"]])),
    ]);
}

#[test]
fn lost_acknowledged_entry_fails() {
    let v = fails(&[
        append(1, "a", 1, 0, Some(1)),
        append(2, "b", 2, 2, Some(3)),
        list(json!([[1, "a"]])),
    ]);
    assert!(v[0].message.contains("lost"), "{}", v[0].message);
}

#[test]
fn gap_fails() {
    fails(&[
        append(1, "a", 1, 0, Some(1)),
        append(2, "b", 3, 2, Some(3)),
        list(json!([[1, "a"], [3, "b"]])),
    ]);
}

#[test]
fn duplicate_entry_fails() {
    let v = fails(&[
        append(1, "a", 1, 0, Some(1)),
        list(json!([[1, "a"], [2, "a"]])),
    ]);
    assert!(v[0].message.contains("twice"), "{}", v[0].message);
}

#[test]
fn entry_never_appended_fails() {
    fails(&[
        append(1, "a", 1, 0, Some(1)),
        list(json!([[1, "a"], [2, "zz"]])),
    ]);
}

#[test]
fn seq_against_real_time_order_fails() {
    fails(&[
        append(1, "a", 2, 0, Some(1)),
        append(2, "b", 1, 5, Some(6)),
        list(json!([[1, "b"], [2, "a"]])),
    ]);
}
