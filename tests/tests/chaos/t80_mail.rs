//! Mail histories against the drained messages and the final mailboxes: a lost, duplicated,
//! misattributed, reordered or phantom message; and a brief run of the mail workload on a
//! cell of three members that must pass with messages delivered and drained.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use whip_cell::StorageKind;
use whip_tests::Cluster;
use whip_tests::chaos::check::check_all;
use whip_tests::chaos::history::{Kind, Op, Recorder, pair};
use whip_tests::chaos::linear::Bounds;
use whip_tests::chaos::workload::{Shared, Workload, final_reads, run_worker};

use crate::{fails, judge, op, passes};

const K: &str = "mail/chaos-mail-r0";

/// Message `seq` of the mailbox: `text` (`"{agent}:{n}"`) from `from`, by `attempt`.
fn msg(seq: u64, from: &str, text: &str, attempt: u64) -> Value {
    json!({
        "id": format!("agent:chaos-mail-r0#{seq}"), "seq": seq, "from": from, "text": text,
        "attempt": attempt, "trust": "untrusted", "verdict": "clean",
    })
}

/// A send of `text` by `attempt`, acknowledged delivered as message `seq`
/// (`ret: None`: outcome unknown).
fn send(p: u64, text: &str, attempt: u64, seq: u64, call: u64, ret: Option<u64>) -> Op {
    let (from, n) = text.rsplit_once(':').expect("agent:n");
    let input = json!({
        "from": from, "n": n.parse::<u64>().expect("n"), "attempt": attempt, "text": text,
        "key": format!("k-{text}-{attempt}"),
    });
    let id = format!("agent:chaos-mail-r0#{seq}");
    let output = json!({"id": id, "trust": "untrusted"});
    op(p, "send", K, input, output, call, ret)
}

/// A send of `text` by `attempt` refused `mailbox_full`.
fn refused(p: u64, text: &str, attempt: u64, call: u64) -> Op {
    let mut send = send(p, text, attempt, 0, call, Some(call + 1));
    send.kind = Kind::Fail;
    send.output = json!({"reason": "mailbox_full", "message": "full"});
    send
}

/// An ack of `messages` (`ret: None`: its answer was lost).
fn ack(p: u64, messages: &[Value], call: u64, ret: Option<u64>) -> Op {
    let through = messages
        .last()
        .map_or(0, |m| m["seq"].as_u64().unwrap_or(0));
    let input = json!({"through_seq": through, "key": "ack", "messages": messages});
    let output = json!({"removed": messages.len()});
    op(p, "ack", K, input, output, call, ret)
}

fn final_read(messages: &[Value]) -> Op {
    let output = json!({"messages": messages});
    op(99, "final", K, Value::Null, output, 1000, Some(1001))
}

#[test]
fn drained_and_left_messages_of_every_acknowledged_send_pass() {
    let ops = [
        send(1, "chaos-mail-s0:1", 0, 1, 10, Some(11)),
        send(2, "chaos-mail-s1:1", 0, 2, 12, Some(13)),
        ack(
            3,
            &[
                msg(1, "chaos-mail-s0", "chaos-mail-s0:1", 0),
                msg(2, "chaos-mail-s1", "chaos-mail-s1:1", 0),
            ],
            20,
            Some(21),
        ),
        send(1, "chaos-mail-s0:2", 0, 3, 30, Some(31)),
        // An unknown outcome that applied, and one that did not.
        send(4, "chaos-mail-s0:3", 0, 4, 40, None),
        send(2, "chaos-mail-s1:2", 0, 5, 41, None),
        // Refused once, delivered by the second attempt.
        refused(5, "chaos-mail-s1:3", 0, 50),
        send(5, "chaos-mail-s1:3", 1, 5, 60, Some(61)),
        // An ack whose answer was lost: its message may be gone or left.
        ack(
            6,
            &[msg(3, "chaos-mail-s0", "chaos-mail-s0:2", 0)],
            70,
            None,
        ),
        final_read(&[
            msg(3, "chaos-mail-s0", "chaos-mail-s0:2", 0),
            msg(4, "chaos-mail-s0", "chaos-mail-s0:3", 0),
            msg(5, "chaos-mail-s1", "chaos-mail-s1:3", 1),
        ]),
    ];
    passes(&ops);
    let (result, _) = judge(&ops);
    assert_eq!((result.ok, result.fail, result.unknown), (5, 1, 3));
}

#[test]
fn an_acknowledged_message_nowhere_to_be_found_is_lost() {
    let found = fails(&[
        send(1, "chaos-mail-s0:1", 0, 1, 10, Some(11)),
        final_read(&[]),
    ]);
    assert!(found[0].message.contains("(lost)"), "{found:?}");
}

#[test]
fn a_message_taken_and_still_left_or_stored_twice_is_duplicated() {
    let m = msg(1, "chaos-mail-s0", "chaos-mail-s0:1", 0);
    let left = fails(&[
        send(1, "chaos-mail-s0:1", 0, 1, 10, Some(11)),
        ack(2, std::slice::from_ref(&m), 20, Some(21)),
        final_read(std::slice::from_ref(&m)),
    ]);
    assert!(left[0].message.contains("still in the final"), "{left:?}");
    let twice = fails(&[
        send(1, "chaos-mail-s0:1", 0, 1, 10, Some(11)),
        final_read(&[m.clone(), msg(2, "chaos-mail-s0", "chaos-mail-s0:1", 0)]),
    ]);
    assert_eq!(twice.len(), 1, "{twice:?}");
    assert!(twice[0].message.contains("stored 2 times"), "{twice:?}");
}

#[test]
fn a_message_stored_with_another_sender_fails() {
    let found = fails(&[
        send(1, "chaos-mail-s0:1", 0, 1, 10, Some(11)),
        final_read(&[msg(1, "chaos-mail-s1", "chaos-mail-s0:1", 0)]),
    ]);
    assert!(found[0].message.contains("stored sender"), "{found:?}");
}

#[test]
fn a_senders_messages_out_of_order_fail() {
    let found = fails(&[
        send(1, "chaos-mail-s0:1", 0, 2, 10, Some(11)),
        send(1, "chaos-mail-s0:2", 0, 1, 20, Some(21)),
        final_read(&[
            msg(1, "chaos-mail-s0", "chaos-mail-s0:2", 0),
            msg(2, "chaos-mail-s0", "chaos-mail-s0:1", 0),
        ]),
    ]);
    assert!(found[0].message.contains("out of order"), "{found:?}");
}

#[test]
fn a_message_never_sent_or_only_refused_is_a_phantom() {
    let never = fails(&[final_read(&[msg(1, "chaos-mail-s0", "chaos-mail-s0:9", 0)])]);
    assert!(never[0].message.contains("never sent"), "{never:?}");
    let refused_only = fails(&[
        refused(1, "chaos-mail-s0:1", 0, 10),
        final_read(&[msg(1, "chaos-mail-s0", "chaos-mail-s0:1", 0)]),
    ]);
    assert!(
        refused_only[0].message.contains("was refused"),
        "{refused_only:?}"
    );
}

#[test]
fn a_mailbox_without_a_final_read_fails() {
    let found = fails(&[send(1, "chaos-mail-s0:1", 0, 1, 10, Some(11))]);
    assert!(found[0].message.contains("never succeeded"), "{found:?}");
}

/// Messages of the large history: enough that a checker comparing every message with
/// every send (10^10 steps) would not finish in CI, while a near-linear one takes seconds.
const LARGE_HISTORY_MESSAGES: u64 = 100_000;

/// A history of [`LARGE_HISTORY_MESSAGES`] sends: every one acknowledged, half drained by
/// acks of one page each, half left in the final mailbox; optionally one planted phantom.
fn large_history(phantom: bool) -> Vec<Op> {
    let mut ops = Vec::new();
    let (mut drained, mut left) = (Vec::new(), Vec::new());
    for seq in 1..=LARGE_HISTORY_MESSAGES {
        let sender = format!("chaos-mail-s{}", seq % 4);
        let text = format!("{sender}:{}", seq / 4 + 1);
        let t = seq * 10;
        ops.push(send(seq % 4, &text, 0, seq, t, Some(t + 1)));
        let m = msg(seq, &sender, &text, 0);
        if seq <= LARGE_HISTORY_MESSAGES / 2 {
            drained.push(m);
        } else {
            left.push(m);
        }
    }
    let mut t = LARGE_HISTORY_MESSAGES * 10 + 10;
    for page in drained.chunks(64) {
        ops.push(ack(10, page, t, Some(t + 1)));
        t += 2;
    }
    if phantom {
        left.push(msg(
            LARGE_HISTORY_MESSAGES + 1,
            "chaos-mail-s9",
            "chaos-mail-s9:1",
            0,
        ));
    }
    let mut last = final_read(&left);
    (last.call, last.ret) = (t, t + 1);
    ops.push(last);
    ops
}

#[test]
fn a_hundred_thousand_messages_are_checked_in_near_linear_time() {
    let started = Instant::now();
    passes(&large_history(false));
    let found = fails(&large_history(true));
    assert_eq!(found.len(), 1, "{:?}", found[0].message);
    assert!(found[0].message.contains("never sent"), "{found:?}");
    eprintln!(
        "two histories of {LARGE_HISTORY_MESSAGES} messages checked in {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_brief_mail_run_on_a_cell_passes() {
    let cluster = Cluster::start(3, StorageKind::Redb).await;
    let addrs = cluster.running_addrs();
    let recorder = Recorder::new(None, Instant::now()).expect("recorder");
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Shared {
        recorder: recorder.clone(),
        addrs: addrs.clone(),
        stop: stop.clone(),
        rotation: Default::default(),
    };
    let team = tokio::spawn(run_worker(Workload::Mail, shared, 80));
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    team.await.expect("team").expect("team runs");
    let ops = pair(&recorder.finish());
    final_reads(&recorder, &addrs, &ops)
        .await
        .expect("final reads");
    let ops = pair(&recorder.finish());
    let (results, violations) = check_all(&ops, Bounds::default());
    assert!(violations.is_empty(), "violations: {violations:#?}");
    let mail = results
        .iter()
        .find(|r| r.workload == "mail")
        .expect("mail ran");
    let ok = |f: &str| {
        ops.iter()
            .filter(|o| o.f == f && o.kind == Kind::Ok)
            .count()
    };
    assert!(
        ok("send") > 0 && ok("ack") > 0 && ok("final") == 2,
        "sends {}, acks {}, finals {} in {mail:?}",
        ok("send"),
        ok("ack"),
        ok("final")
    );
    cluster.shutdown().await;
}
