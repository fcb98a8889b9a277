//! Counter consumes against the cap and the final view.

use serde_json::{Value, json};
use whip_tests::chaos::history::Op;

use crate::{fails, op, passes};

const K: &str = "counter/k0";
const CAP: u64 = 3;

fn consume(p: u64, ok: bool, consumed: u64, call: u64, ret: Option<u64>) -> Op {
    op(
        p,
        "consume",
        K,
        json!({"amount": 1, "cap": CAP}),
        json!({
            "ok": ok, "consumed": consumed, "remaining": CAP.saturating_sub(consumed),
            "period": "h1"
        }),
        call,
        ret,
    )
}

fn final_view(consumed: u64) -> Op {
    op(
        99,
        "final",
        K,
        Value::Null,
        json!({"consumed": consumed, "period": "h1"}),
        1000,
        Some(1001),
    )
}

#[test]
fn charges_up_to_the_cap_pass() {
    passes(&[
        consume(1, true, 1, 0, Some(1)),
        consume(2, true, 2, 2, Some(3)),
        consume(1, false, 0, 4, None),
        consume(3, true, 3, 5, Some(6)),
        consume(2, false, 3, 7, Some(8)),
        final_view(3),
    ]);
}

#[test]
fn two_charges_at_one_count_fail() {
    fails(&[
        consume(1, true, 1, 0, Some(2)),
        consume(2, true, 1, 1, Some(3)),
        final_view(1),
    ]);
}

#[test]
fn over_the_cap_fails() {
    let mut over = consume(1, true, 4, 0, Some(1));
    over.output["remaining"] = json!(0);
    fails(&[over, final_view(4)]);
}

#[test]
fn lost_charge_fails() {
    fails(&[
        consume(1, true, 1, 0, Some(1)),
        consume(2, true, 2, 2, Some(3)),
        final_view(1),
    ]);
}

#[test]
fn phantom_charge_fails() {
    fails(&[consume(1, true, 1, 0, Some(1)), final_view(3)]);
}

#[test]
fn refusal_below_the_cap_fails() {
    fails(&[
        consume(1, true, 1, 0, Some(1)),
        consume(2, false, 1, 2, Some(3)),
        final_view(1),
    ]);
}
