//! The CAS register with versions: reads, unconditional writes, compare-and-set.

use serde_json::{Value, json};

use crate::{fails, op, passes};

const K: &str = "cas/k0";

fn write(
    p: u64,
    value: &str,
    version: u64,
    call: u64,
    ret: Option<u64>,
) -> whip_tests::chaos::history::Op {
    op(
        p,
        "write",
        K,
        json!({"value": value}),
        json!({"version": version}),
        call,
        ret,
    )
}

fn cas(
    p: u64,
    expect: u64,
    value: &str,
    version: u64,
    call: u64,
    ret: Option<u64>,
) -> whip_tests::chaos::history::Op {
    op(
        p,
        "cas",
        K,
        json!({"expect": expect, "value": value}),
        json!({"version": version}),
        call,
        ret,
    )
}

fn read(
    p: u64,
    value: Option<&str>,
    version: u64,
    call: u64,
    ret: u64,
) -> whip_tests::chaos::history::Op {
    op(
        p,
        "read",
        K,
        Value::Null,
        json!({"value": value, "version": version}),
        call,
        Some(ret),
    )
}

#[test]
fn sequential_history_passes() {
    passes(&[
        read(1, None, 0, 0, 1),
        write(1, "a", 5, 2, Some(3)),
        read(2, Some("a"), 5, 4, 5),
        cas(2, 5, "b", 9, 6, Some(7)),
        read(1, Some("b"), 9, 8, 9),
    ]);
}

#[test]
fn concurrent_read_may_see_old_or_new() {
    passes(&[
        write(1, "a", 5, 0, Some(1)),
        write(1, "b", 7, 10, Some(20)),
        read(2, Some("a"), 5, 11, 12),
        read(3, Some("b"), 7, 13, 14),
        read(2, Some("b"), 7, 15, 16),
    ]);
}

#[test]
fn stale_read_after_acknowledged_write_fails() {
    let v = fails(&[
        write(1, "a", 5, 0, Some(1)),
        write(1, "b", 7, 2, Some(3)),
        read(2, Some("a"), 5, 4, 5),
    ]);
    assert!(v[0].message.contains("not linearizable"));
}

#[test]
fn two_cas_from_one_version_both_succeeding_fails() {
    fails(&[
        write(1, "a", 5, 0, Some(1)),
        cas(2, 5, "b", 7, 2, Some(4)),
        cas(3, 5, "c", 8, 3, Some(5)),
    ]);
}

#[test]
fn unknown_write_may_take_effect_later_or_never() {
    passes(&[
        write(1, "a", 5, 0, Some(1)),
        write(2, "x", 0, 2, None),
        read(3, Some("a"), 5, 10, 11),
        read(3, Some("x"), 6, 20, 21),
        cas(3, 6, "y", 9, 22, Some(23)),
    ]);
    passes(&[
        write(1, "a", 5, 0, Some(1)),
        write(2, "x", 0, 2, None),
        read(3, Some("a"), 5, 10, 11),
    ]);
}

#[test]
fn read_of_a_value_never_written_fails() {
    fails(&[
        write(1, "a", 5, 0, Some(1)),
        write(2, "x", 0, 2, None),
        read(3, Some("zz"), 6, 10, 11),
    ]);
}

#[test]
fn versions_going_backward_fail() {
    fails(&[write(1, "a", 5, 0, Some(1)), write(1, "b", 3, 2, Some(3))]);
}

#[test]
fn failed_cas_takes_no_effect() {
    let mut mismatch = cas(2, 4, "b", 0, 2, Some(3));
    mismatch.kind = whip_tests::chaos::history::Kind::Fail;
    mismatch.output = json!({"current": 5});
    passes(&[
        write(1, "a", 5, 0, Some(1)),
        mismatch,
        read(1, Some("a"), 5, 4, 5),
    ]);
}

/// A compare-and-set refused with the key's current version `current`.
fn refused_cas(
    p: u64,
    expect: u64,
    current: u64,
    call: u64,
    ret: u64,
) -> whip_tests::chaos::history::Op {
    let mut refused = cas(p, expect, "x", 0, call, Some(ret));
    refused.kind = whip_tests::chaos::history::Kind::Fail;
    refused.output = json!({"current": current});
    refused
}

#[test]
fn refused_cas_may_report_a_version_held_in_its_window() {
    passes(&[
        write(1, "a", 5, 0, Some(1)),
        // Concurrent with the write of version 9: either 5 or 9 may be current.
        refused_cas(2, 4, 5, 2, 10),
        refused_cas(3, 4, 9, 2, 10),
        write(1, "b", 9, 3, Some(4)),
        // Absent before anything was written.
        refused_cas(4, 3, 0, 0, 0),
    ]);
}

#[test]
fn refused_cas_reporting_a_version_the_key_never_held_fails() {
    let found = fails(&[
        write(1, "a", 5, 0, Some(1)),
        refused_cas(2, 4, 7, 2, 3),
        write(1, "b", 9, 4, Some(5)),
    ]);
    assert!(found[0].history.contains("\"current\":7"), "{found:?}");
}

#[test]
fn refused_cas_reporting_an_overwritten_version_fails() {
    // Version 5 was replaced by 9 before the refusal was called: 5 is stale.
    fails(&[
        write(1, "a", 5, 0, Some(1)),
        write(1, "b", 9, 2, Some(3)),
        refused_cas(2, 4, 5, 4, 5),
    ]);
}

#[test]
fn refused_cas_reporting_its_own_expected_version_fails() {
    // A refusal says the key was not at `expect`; reporting `expect` contradicts it.
    fails(&[write(1, "a", 5, 0, Some(1)), refused_cas(2, 5, 5, 2, 3)]);
}

#[test]
fn violation_shrinks_to_the_stale_read() {
    let mut ops = Vec::new();
    let mut t = 0;
    let mut version = 0;
    for i in 0..40u64 {
        version += 2;
        let value = format!("v{i}");
        ops.push(write(1, &value, version, t, Some(t + 1)));
        ops.push(read(2, Some(&value), version, t + 2, t + 3));
        t += 4;
        if i == 20 {
            // A stale read: sees v19 after v20 was acknowledged and read.
            ops.push(read(3, Some("v19"), version - 2, t, t + 1));
            t += 2;
        }
    }
    let v = fails(&ops);
    let lines = v[0].history.lines().count();
    assert!(
        lines <= 6,
        "sub-history should be 2-3 operations:\n{}",
        v[0].history
    );
    assert!(v[0].history.contains("v19"), "{}", v[0].history);
}
