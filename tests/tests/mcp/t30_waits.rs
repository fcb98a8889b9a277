//! Concurrency and waits through MCP: agents claiming at once never get the same task; a
//! claim waiting on an empty board and an inbox waiting for mail are woken by the write
//! that gives them something (the cell's applies), long before their wait runs out.

use std::time::{Duration, Instant};

use serde_json::json;

use super::Fabric;

/// How long the waits of these tests may last; a wake must come well before.
const WAIT_S: u64 = 30;
/// How long after the waits the writes that end them are sent.
const WRITE_AFTER: Duration = Duration::from_millis(1_500);

#[test]
fn agents_claiming_at_once_get_distinct_tasks() {
    let fabric = Fabric::start();
    let agents = ["lead", "w1", "w2", "w3"];
    fabric.team("pool", &agents);
    let mut mcp = fabric.mcp(&agents);
    let tasks = 6;
    for n in 0..tasks {
        mcp.call(
            "lead",
            "board_post",
            json!({"team": "pool", "task": {"n": n}}),
        )
        .ok();
    }
    let mut seen = std::collections::BTreeSet::new();
    // Two rounds of three claims sent together: every claim gets its own task.
    for _ in 0..2 {
        let calls: Vec<_> = agents[1..]
            .iter()
            .map(|w| (*w, "board_claim", json!({"team": "pool"})))
            .collect();
        for reply in mcp.call_all(&calls) {
            let claimed = reply.ok();
            let id = claimed["task"]["id"].as_str().expect("a task").to_string();
            assert!(seen.insert(id.clone()), "{id} claimed twice");
        }
    }
    assert_eq!(seen.len(), tasks);
    let stats = fabric.whip(&["board", "stats", "pool", "--agent", "lead"]);
    assert_eq!(stats["claimed"].as_u64(), Some(tasks as u64), "{stats}");
}

#[test]
fn a_waiting_claim_and_a_waiting_inbox_wake_on_the_write_that_feeds_them() {
    let fabric = Fabric::start();
    fabric.team("queue", &["lead", "worker"]);
    let mut mcp = fabric.mcp(&["lead", "worker"]);
    let started = Instant::now();
    let waits = [
        (
            "worker",
            "board_claim",
            json!({"team": "queue", "wait_s": WAIT_S}),
        ),
        ("worker", "mail_inbox", json!({"wait_s": WAIT_S})),
    ];
    let writes = [
        (
            "lead",
            "board_post",
            json!({"team": "queue", "task": {"job": "build"}}),
        ),
        (
            "lead",
            "mail_send",
            json!({"to": "worker", "type": "inform", "text": "posted"}),
        ),
    ];
    // The waits start on an empty board and inbox; the writes follow a moment later.
    let sent = mcp.send_calls(&waits);
    std::thread::sleep(WRITE_AFTER);
    let sent = sent + mcp.send_calls(&writes);
    let replies = mcp.collect(sent);
    let waited = started.elapsed();
    let mut replies = replies.into_iter().map(|r| r.ok());
    let claimed = replies.next().unwrap();
    assert_eq!(
        claimed["task"]["body"],
        json!({"job": "build"}),
        "{claimed}"
    );
    let inbox = replies.next().unwrap();
    assert_eq!(inbox["messages"][0]["text"], "posted", "{inbox}");
    assert!(
        waited < Duration::from_secs(WAIT_S / 2),
        "the waits took {waited:?}: they were not woken by the writes"
    );
}

#[test]
fn a_wait_past_the_limit_is_refused_and_an_empty_wait_ends_empty() {
    let fabric = Fabric::start();
    fabric.team("idle", &["lead"]);
    let mut mcp = fabric.mcp(&["lead"]);
    let long = mcp.call(
        "lead",
        "board_claim",
        json!({"team": "idle", "wait_s": 100_000}),
    );
    assert!(long.refused().starts_with("invalid_argument: wait_s"));
    let started = Instant::now();
    let empty = mcp
        .call("lead", "board_claim", json!({"team": "idle", "wait_s": 1}))
        .ok();
    assert_eq!(empty["task"], json!(null), "{empty}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

/// A claim whose client cancels it mid-wait takes nothing: the task posted afterwards goes
/// to the next agent that waits for one, and the canceller holds no claim.
#[test]
fn a_cancelled_claim_wait_takes_nothing() {
    let fabric = Fabric::start();
    let agents = ["lead", "quitter", "worker"];
    fabric.team("pool", &agents);
    let mut mcp = fabric.mcp(&agents);
    let wait = json!({"team": "pool", "wait_s": WAIT_S});
    let raised = mcp.call_cancelled("quitter", "board_claim", wait.clone(), 1.0);
    assert!(!raised.is_empty());
    // The quitter's next call follows its cancel on the same session, so the server has
    // read the cancel before the task exists.
    mcp.call("quitter", "mail_inbox", json!({})).ok();
    let post = json!({"team": "pool", "task": {"n": 1}});
    let posted = mcp.call("lead", "board_post", post).ok();
    let claimed = mcp.call("worker", "board_claim", wait).ok();
    assert_eq!(claimed["task"]["id"], posted["task_id"], "{claimed}");
    let listed = fabric.whip(&["board", "list", "pool", "--agent", "lead"]);
    let holders: Vec<_> = (listed.as_array().unwrap().iter())
        .filter(|t| t["state"] == "claimed")
        .map(|t| t["worker"].clone())
        .collect();
    assert_eq!(holders, [json!("worker")], "{listed}");
}

/// A waiting call tells a client that asked for progress how long it has waited.
#[test]
fn a_waiting_claim_reports_progress() {
    let fabric = Fabric::start();
    fabric.team("idle", &["lead", "worker"]);
    let mut mcp = fabric.mcp(&["lead", "worker"]);
    let wait_s = 4;
    mcp.send(
        json!({"agent": "worker", "method": "call", "tool": "board_claim",
        "arguments": {"team": "idle", "wait_s": wait_s}, "progress": true}),
    );
    let answer = mcp.answer();
    assert_eq!(answer["structured"]["outcome"], "empty", "{answer}");
    let progress = answer["progress"].as_array().expect("progress notes");
    assert!(
        !progress.is_empty(),
        "a {wait_s} s wait reported no progress: {answer}"
    );
    let firsts: Vec<f64> = progress
        .iter()
        .filter_map(|p| p["progress"].as_f64())
        .collect();
    assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{answer}");
    assert!(
        progress.iter().all(|p| p["total"] == json!(wait_s as f64)),
        "{answer}"
    );
}
