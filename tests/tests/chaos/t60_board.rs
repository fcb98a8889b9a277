//! Board histories against the final listing: lost and phantom tasks, double completion,
//! a completion acknowledged with a stale fence, a result nobody sent.

use serde_json::{Value, json};
use whip_tests::chaos::history::{Kind, Op};

use crate::{fails, op, passes};

const K: &str = "board/k0";

fn post(p: u64, body: &str, task: &str, call: u64, ret: Option<u64>) -> Op {
    op(
        p,
        "post",
        K,
        json!({"body": body}),
        json!({"task_id": task}),
        call,
        ret,
    )
}

fn claim(p: u64, task: &str, fence: u64, call: u64, ret: Option<u64>) -> Op {
    let output = json!({"task_id": task, "fence": fence, "deadline_ms": 0});
    op(
        p,
        "claim",
        K,
        json!({"worker": format!("p{p}")}),
        output,
        call,
        ret,
    )
}

fn complete(p: u64, task: &str, fence: u64, token: &str, call: u64, ret: Option<u64>) -> Op {
    let input = json!({"task_id": task, "fence": fence, "token": token});
    op(p, "complete", K, input, Value::Null, call, ret)
}

fn refused(mut op: Op) -> Op {
    op.kind = Kind::Fail;
    op
}

fn list(tasks: &[(&str, &str, &str, &str)]) -> Op {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(id, state, body, result)| {
            json!({"id": id, "state": state, "fence": 0, "body": body, "result": result})
        })
        .collect();
    op(
        99,
        "list",
        K,
        Value::Null,
        json!({"tasks": tasks}),
        1000,
        Some(1001),
    )
}

#[test]
fn a_clean_history_passes() {
    passes(&[
        post(1, "a", "t-1", 0, Some(1)),
        post(2, "b", "t-2", 0, None),
        claim(1, "t-1", 10, 2, Some(3)),
        complete(1, "t-1", 10, "r1", 4, Some(5)),
        // A late completion with the old fence is refused: recorded as a failure.
        claim(2, "t-2", 20, 6, Some(7)),
        claim(3, "t-2", 30, 9, Some(10)),
        refused(complete(2, "t-2", 20, "late", 11, Some(12))),
        list(&[("t-1", "done", "a", "r1"), ("t-2", "claimed", "b", "")]),
    ]);
}

#[test]
fn a_lost_post_fails() {
    fails(&[post(1, "a", "t-1", 0, Some(1)), list(&[])]);
}

#[test]
fn a_task_nobody_posted_fails() {
    fails(&[list(&[("t-9", "ready", "zzz", "")])]);
}

#[test]
fn two_completions_of_one_task_fail() {
    fails(&[
        post(1, "a", "t-1", 0, Some(1)),
        claim(1, "t-1", 10, 2, Some(3)),
        complete(1, "t-1", 10, "r1", 4, Some(5)),
        complete(2, "t-1", 10, "r2", 6, Some(7)),
        list(&[("t-1", "done", "a", "r1")]),
    ]);
}

#[test]
fn a_completion_with_a_stale_fence_fails() {
    fails(&[
        post(1, "a", "t-1", 0, Some(1)),
        claim(1, "t-1", 10, 2, Some(3)),
        claim(2, "t-1", 20, 4, Some(5)),
        complete(1, "t-1", 10, "late", 6, Some(7)),
        list(&[("t-1", "done", "a", "late")]),
    ]);
}

#[test]
fn one_fence_twice_fails() {
    fails(&[
        post(1, "a", "t-1", 0, Some(1)),
        post(1, "b", "t-2", 0, Some(1)),
        claim(1, "t-1", 10, 2, Some(3)),
        claim(2, "t-2", 10, 2, Some(3)),
        list(&[("t-1", "claimed", "a", ""), ("t-2", "claimed", "b", "")]),
    ]);
}

#[test]
fn a_result_nobody_sent_fails() {
    fails(&[
        post(1, "a", "t-1", 0, Some(1)),
        list(&[("t-1", "done", "a", "ghost")]),
    ]);
}

#[test]
fn an_acknowledged_completion_missing_from_the_board_fails() {
    fails(&[
        post(1, "a", "t-1", 0, Some(1)),
        claim(1, "t-1", 10, 2, Some(3)),
        complete(1, "t-1", 10, "r1", 4, Some(5)),
        list(&[("t-1", "ready", "a", "")]),
    ]);
}
