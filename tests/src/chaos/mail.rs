//! The `mail` workload: agents mail numbered messages to a few agents' mailboxes while one
//! reader per mailbox drains it; afterwards every mailbox is read in full.
//!
//! The team is fixed ([`MAIL_SENDERS`] senders, [`MAIL_RECIPIENTS`] recipients with one
//! reader each; `--concurrency` does not change it), every member an agent of its own that
//! calls with its token. Sender `s` sends the text `"{s}:{n}"` for n = 1, 2, … to a
//! recipient picked at random, the attempt in the payload (`{"attempt": a}`). Each attempt
//! has its own idempotency key; a send whose outcome is unknown is retried with the same key
//! until it answers (so it applies at most once). A refusal (`mailbox_full`) is definite:
//! the sender tries again with a new attempt, at most [`MAIL_ATTEMPTS`] in all, then moves
//! on. A reader reads its inbox after the last sequence it took and acks through the last
//! message read, retrying the ack with the same key until it answers; only an answered ack
//! counts the messages as taken. Now and then a reader takes a break long enough for its
//! mailbox to fill, so sends meet `mailbox_full`.
//!
//! One round in four, a sender sends 2 or 3 consecutive numbers in one batched send
//! (`MailSendMany`, attempt 0, retried with its key until it answers); a refused message of
//! a batch is not sent again.
//!
//! History, on the key `mail/{recipient}`: `send` (ok: delivered, with its id; fail:
//! refused), `send_batch` (read as one `send` per message by the checks), `inbox`, `ack`
//! (its input carries the messages it takes), and one `final` per mailbox with everything
//! still in it (deliverable and quarantined). The checks
//! ([`check_mail`]), against the drained messages and the final mailboxes:
//!
//! 1. **None lost.** Every send acknowledged `delivered` is drained or still in its mailbox,
//!    under the id the acknowledgement named.
//! 2. **None duplicated.** No (sender, n) is stored twice, and no message an answered ack
//!    took is still in the mailbox.
//! 3. **The proven sender.** Each message's stored `from` is the agent named in its text.
//! 4. **Sender order.** In one mailbox, a sender's messages have increasing n by sequence.
//! 5. **No phantom.** Every message found was sent to that mailbox (by that attempt) by a
//!    send that was acknowledged or whose outcome is unknown, never one definitely refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::join_all;
use rand::Rng;
use serde_json::{Value, json};
use whip_cell::CellClient;
use whip_proto::v1 as pb;

use super::history::{Kind, Op, Recorder, format_ops};
use super::invariants::Violation;
use super::workload::{Done, Shared, Worker, error_done};

/// Senders of the team.
pub const MAIL_SENDERS: usize = 4;
/// Recipients of the team (one reader each).
pub const MAIL_RECIPIENTS: usize = 2;
/// Attempts (fresh idempotency keys) at one message refused before the sender moves on.
pub const MAIL_ATTEMPTS: u64 = 3;
/// Messages per inbox page of a reader.
pub const MAIL_PAGE: u32 = 64;
/// How long a reader still retries its last ack after the run stopped.
pub const MAIL_ACK_GRACE_MS: u64 = 20_000;
/// A sender's pause after a refusal.
pub const MAIL_REFUSED_PAUSE_MS: u64 = 100;
/// A reader's break now and then, long enough for its mailbox to fill (`mailbox_full`).
pub const MAIL_READER_BREAK_MS: u64 = 5_000;
/// The chance a reader takes a break after a drain.
pub const MAIL_READER_BREAK_P: f64 = 0.005;

fn sender_name(i: usize) -> String {
    format!("chaos-mail-s{i}")
}

fn recipient_name(i: usize) -> String {
    format!("chaos-mail-r{i}")
}

fn token_of(name: &str) -> String {
    format!("{name}-token-0123456789abcdefghijklmnop")
}

fn address_of(recipient: &str) -> String {
    format!("agent:{recipient}")
}

/// The history key of a recipient's mailbox.
pub fn mailbox_key(recipient: &str) -> String {
    format!("mail/{recipient}")
}

fn recipient_of(key: &str) -> &str {
    key.strip_prefix("mail/").unwrap_or(key)
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Register every agent of the team, then run the senders and readers until the stop flag.
pub(super) async fn run_team(shared: Shared, seed: u64) -> Result<(), String> {
    let lead = Worker::new(shared.clone(), seed)?;
    let senders: Vec<String> = (0..MAIL_SENDERS).map(sender_name).collect();
    let recipients: Vec<String> = (0..MAIL_RECIPIENTS).map(recipient_name).collect();
    for name in senders.iter().chain(&recipients) {
        if !register(&lead, name).await {
            return Ok(());
        }
    }
    let mut role = 0u64;
    let mut agent = |name: &str| -> Result<(Worker, Arc<CellClient>), String> {
        role += 1;
        let w = Worker::new(shared.clone(), seed ^ (role << 40))?;
        let client = w.connect().ok_or("cannot connect")?;
        Ok((w, Arc::new(client.with_identity(name, token_of(name)))))
    };
    let mut sending = Vec::new();
    for name in &senders {
        let (w, client) = agent(name)?;
        sending.push(sender(w, client, name.clone(), recipients.clone()));
    }
    let mut reading = Vec::new();
    for name in &recipients {
        let (w, client) = agent(name)?;
        reading.push(reader(w, client, name.clone()));
    }
    let (sending, reading) = (join_all(sending), join_all(reading));
    futures::future::join(sending, reading).await;
    Ok(())
}

/// Register `name` through the operator's client until it answers; false if the run ended.
async fn register(lead: &Worker, name: &str) -> bool {
    let request = pb::AgentRegisterRequest {
        agent: name.to_string(),
        token: token_of(name),
        enroll: false,
    };
    while !lead.stopped() {
        if lead.client.agent_register(request.clone()).await.is_ok() {
            return true;
        }
        sleep_ms(200).await;
    }
    false
}

async fn sender(mut w: Worker, me: Arc<CellClient>, name: String, recipients: Vec<String>) {
    let mut n = 0;
    while !w.stopped() {
        let to = recipients[w.rng.random_range(0..recipients.len())].clone();
        // One round in four sends 2 or 3 numbered messages in one write.
        match w.rng.random_range(0..4) {
            0 => {
                let count = w.rng.random_range(2..=3);
                send_batch(&mut w, &me, (&name, n + 1..=n + count), &to).await;
                n += count;
            }
            _ => {
                n += 1;
                send_message(&mut w, &me, (&name, n), &to).await;
            }
        }
        let pause = w.rng.random_range(0..20);
        sleep_ms(pause).await;
    }
}

/// Send messages `numbers` to `to` in one `MailSendMany` (attempt 0, one key), retried with
/// that key until it answers; a refused message of the batch is not sent again. History:
/// one `send_batch` op (input `messages`, output `results`), which the checker reads as one
/// `send` per message ([`expand_batches`]).
async fn send_batch(
    w: &mut Worker,
    me: &Arc<CellClient>,
    (name, numbers): (&str, std::ops::RangeInclusive<u64>),
    to: &str,
) {
    let key = me.next_idempotency_key();
    let texts: Vec<(u64, String)> = numbers.map(|n| (n, format!("{name}:{n}"))).collect();
    let item = |text: &String| pb::MailSendItem {
        r#type: pb::MailType::Inform as i32,
        text: text.clone(),
        payload: Some(json!({ "attempt": 0 }).to_string()),
        ..Default::default()
    };
    let request = pb::MailSendManyRequest {
        to: address_of(to),
        messages: texts.iter().map(|(_, t)| item(t)).collect(),
        idempotency_key: key.clone(),
    };
    let messages: Vec<Value> = texts
        .iter()
        .map(|(n, text)| json!({ "n": n, "text": text, "attempt": 0 }))
        .collect();
    let input = json!({ "from": name, "messages": messages, "key": key });
    loop {
        let (client, request) = (me.clone(), request.clone());
        w.run("send_batch", &mailbox_key(to), input.clone(), async move {
            match client.mail_send_many(request).await {
                Ok(r) => {
                    let results: Vec<Value> = r.results.iter().map(batch_result).collect();
                    Done::Ok(json!({ "results": results }))
                }
                Err(e) => error_done(&e, false),
            }
        })
        .await;
        if w.last == Kind::Ok || w.stopped() {
            return;
        }
    }
}

/// One message's answer in a batch: its id, or the reason it was refused.
fn batch_result(r: &pb::MailSendResponse) -> Value {
    match r.outcome.as_str() {
        "delivered" => json!({ "id": r.id, "trust": r.trust }),
        _ => json!({ "reason": r.reason, "message": r.message }),
    }
}

/// Send message `n` until it is delivered, refused [`MAIL_ATTEMPTS`] times, or the run
/// stops; an unknown outcome is retried with the attempt's key.
async fn send_message(w: &mut Worker, me: &Arc<CellClient>, (name, n): (&str, u64), to: &str) {
    for attempt in 0..MAIL_ATTEMPTS {
        let key = me.next_idempotency_key();
        loop {
            match send_once(w, me, (name, n, attempt), to, &key).await {
                Kind::Ok => return,
                Kind::Fail => break,
                _ if w.stopped() => return,
                _ => {}
            }
        }
        if w.stopped() {
            return;
        }
        sleep_ms(MAIL_REFUSED_PAUSE_MS).await;
    }
}

async fn send_once(
    w: &mut Worker,
    me: &Arc<CellClient>,
    (name, n, attempt): (&str, u64, u64),
    to: &str,
    key: &str,
) -> Kind {
    let text = format!("{name}:{n}");
    let request = pb::MailSendRequest {
        to: address_of(to),
        r#type: pb::MailType::Inform as i32,
        text: text.clone(),
        payload: Some(json!({ "attempt": attempt }).to_string()),
        idempotency_key: key.to_string(),
        ..Default::default()
    };
    let input = json!({ "from": name, "n": n, "attempt": attempt, "text": text, "key": key });
    let client = me.clone();
    w.run("send", &mailbox_key(to), input, async move {
        match client.mail_send(request).await {
            Ok(r) if r.outcome == "delivered" => Done::Ok(json!({ "id": r.id, "trust": r.trust })),
            Ok(r) if r.outcome == "refused" => {
                Done::Fail(json!({ "reason": r.reason, "message": r.message }))
            }
            Ok(r) => Done::Info(json!({ "outcome": r.outcome })),
            Err(e) => error_done(&e, false),
        }
    })
    .await;
    w.last
}

async fn reader(mut w: Worker, me: Arc<CellClient>, name: String) {
    let mut after = 0;
    while !w.stopped() {
        let messages = inbox(&mut w, &me, &name, after).await;
        let Some(last) = messages.last().and_then(|m| m["seq"].as_u64()) else {
            let pause = w.rng.random_range(10..50);
            sleep_ms(pause).await;
            continue;
        };
        if ack(&mut w, &me, &name, last, &messages).await {
            after = last;
        }
        if w.rng.random_bool(MAIL_READER_BREAK_P) {
            let until = Instant::now() + Duration::from_millis(MAIL_READER_BREAK_MS);
            while !w.stopped() && Instant::now() < until {
                sleep_ms(100).await;
            }
        }
    }
}

/// One stored message as the history records it.
fn message_json(m: &pb::MailMessage) -> Value {
    let attempt = m
        .payload
        .as_deref()
        .and_then(|p| serde_json::from_str::<Value>(p).ok())
        .and_then(|p| p["attempt"].as_u64());
    let verdict = m.screen.as_ref().map(|s| s.verdict.clone());
    json!({
        "id": m.id, "seq": m.seq, "from": m.from, "text": m.text, "attempt": attempt,
        "trust": m.trust, "verdict": verdict,
    })
}

/// Read the inbox after `after`; the messages read (none if the read failed).
async fn inbox(w: &mut Worker, me: &Arc<CellClient>, name: &str, after: u64) -> Vec<Value> {
    let request = pb::MailInboxRequest {
        address: address_of(name),
        after_seq: after,
        limit: MAIL_PAGE,
        quarantined: false,
    };
    let read = Arc::new(Mutex::new(Vec::new()));
    let (client, sink) = (me.clone(), read.clone());
    let input = json!({ "after_seq": after });
    w.run("inbox", &mailbox_key(name), input, async move {
        match client.mail_inbox(request).await {
            Ok(r) => {
                let last = r.messages.last().map(|m| m.seq);
                let messages: Vec<Value> = r.messages.iter().map(message_json).collect();
                let out = json!({ "count": messages.len(), "last_seq": last });
                *sink.lock().expect("inbox sink") = messages;
                Done::Ok(out)
            }
            Err(e) => error_done(&e, true),
        }
    })
    .await;
    std::mem::take(&mut *read.lock().expect("inbox sink"))
}

/// Ack through `through` with one key until it answers (after the run stopped, for at most
/// [`MAIL_ACK_GRACE_MS`]); whether the messages were taken.
async fn ack(
    w: &mut Worker,
    me: &Arc<CellClient>,
    name: &str,
    through: u64,
    messages: &[Value],
) -> bool {
    let key = me.next_idempotency_key();
    let mut grace: Option<Instant> = None;
    loop {
        let request = pb::MailAckRequest {
            address: address_of(name),
            through_seq: through,
            idempotency_key: key.clone(),
        };
        let input = json!({ "through_seq": through, "key": key, "messages": messages });
        let client = me.clone();
        w.run("ack", &mailbox_key(name), input, async move {
            match client.mail_ack(request).await {
                Ok(r) if r.outcome == "acked" => Done::Ok(json!({ "removed": r.removed })),
                Ok(r) if r.outcome == "refused" => {
                    Done::Fail(json!({ "reason": r.reason, "message": r.message }))
                }
                Ok(r) => Done::Info(json!({ "outcome": r.outcome })),
                Err(e) => error_done(&e, false),
            }
        })
        .await;
        match w.last {
            Kind::Ok => return true,
            Kind::Fail => return false,
            Kind::Info | Kind::Invoke => {}
        }
        if w.stopped() {
            let grace_ms = Duration::from_millis(MAIL_ACK_GRACE_MS);
            if Instant::now() >= *grace.get_or_insert_with(|| Instant::now() + grace_ms) {
                return false;
            }
        }
    }
}

/// Every mailbox the history touched, read in full (deliverable and quarantined messages)
/// without acking, as one `final` operation each.
pub(super) async fn final_mail(recorder: &Recorder, process: u64, client: &CellClient, ops: &[Op]) {
    let keys: BTreeSet<&str> = ops
        .iter()
        .filter(|o| o.key.starts_with("mail/") && (o.f == "send" || o.f == "inbox"))
        .map(|o| o.key.as_str())
        .collect();
    for key in keys {
        recorder.record(process, Kind::Invoke, "final", key, Value::Null);
        match read_mailbox(client, recipient_of(key)).await {
            Ok(messages) => {
                let output = json!({ "messages": messages });
                recorder.record(process, Kind::Ok, "final", key, output);
            }
            Err(e) => {
                recorder.record(process, Kind::Fail, "final", key, json!({ "error": e }));
            }
        }
    }
}

async fn read_mailbox(client: &CellClient, recipient: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for quarantined in [false, true] {
        let mut after = 0;
        loop {
            let request = pb::MailInboxRequest {
                address: address_of(recipient),
                after_seq: after,
                limit: 1_000,
                quarantined,
            };
            let page = client
                .mail_inbox(request)
                .await
                .map_err(|e| e.to_string())?;
            let Some(last) = page.messages.last() else {
                break;
            };
            after = last.seq;
            out.extend(page.messages.iter().map(message_json));
        }
    }
    Ok(out)
}

/// A message the history shows: taken by a reader, read by an ack whose answer was lost,
/// or still in the final mailbox.
#[derive(Clone, Copy)]
struct Seen<'a> {
    id: &'a str,
    seq: u64,
    from: &'a str,
    text: &'a str,
    attempt: Option<u64>,
    /// The `ack` or `final` operation that shows it.
    op: &'a Op,
}

impl<'a> Seen<'a> {
    fn all_of(op: &'a Op, messages: &'a Value) -> Vec<Seen<'a>> {
        let text = |m: &'a Value, f: &str| m[f].as_str().unwrap_or_default();
        messages
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| Seen {
                id: text(m, "id"),
                seq: m["seq"].as_u64().unwrap_or_default(),
                from: text(m, "from"),
                text: text(m, "text"),
                attempt: m["attempt"].as_u64(),
                op,
            })
            .collect()
    }

    /// The sender and number its text names.
    fn named(&self) -> Option<(&'a str, u64)> {
        let (agent, n) = self.text.rsplit_once(':')?;
        Some((agent, n.parse().ok()?))
    }
}

/// One mailbox's history: its sends, what was taken, read and left in it.
#[derive(Default)]
struct Mailbox<'a> {
    sends: Vec<&'a Op>,
    final_read: Option<&'a Op>,
    /// By id: taken by an answered ack.
    taken: BTreeMap<&'a str, Seen<'a>>,
    /// By id: every message found (taken, read by an unanswered ack, or left).
    found: BTreeMap<&'a str, Seen<'a>>,
    /// By id: left in the final mailbox.
    left: BTreeMap<&'a str, Seen<'a>>,
}

fn mailboxes(ops: &[Op]) -> BTreeMap<&str, Mailbox<'_>> {
    let mut boxes: BTreeMap<&str, Mailbox<'_>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.key.starts_with("mail/")) {
        let mailbox = boxes.entry(op.key.as_str()).or_default();
        let seen = match (op.f.as_str(), op.kind) {
            ("send", _) => {
                mailbox.sends.push(op);
                continue;
            }
            ("final", Kind::Ok) => {
                mailbox.final_read = Some(op);
                Seen::all_of(op, &op.output["messages"])
            }
            ("ack", _) => Seen::all_of(op, &op.input["messages"]),
            _ => continue,
        };
        for message in seen {
            match op.f.as_str() {
                "final" => mailbox.left.insert(message.id, message),
                _ if op.kind == Kind::Ok => mailbox.taken.insert(message.id, message),
                _ => None,
            };
            mailbox.found.entry(message.id).or_insert(message);
        }
    }
    boxes
}

fn violation(key: &str, message: String, ops: &[&Op]) -> Violation {
    Violation {
        workload: "mail".into(),
        key: key.to_string(),
        message,
        history: format_ops(ops),
    }
}

/// The history with each `send_batch` read as one `send` per message: same process and
/// times, the message's `n`, `text` and `attempt`; acknowledged with its id, refused with
/// its reason, or unknown when the batch's outcome is.
fn expand_batches(ops: &[Op]) -> Vec<Op> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        if op.f != "send_batch" {
            out.push(op.clone());
            continue;
        }
        let messages = op.input["messages"].as_array().into_iter().flatten();
        for (i, m) in messages.enumerate() {
            let result = &op.output["results"][i];
            let kind = match op.kind {
                Kind::Ok if result["id"].is_string() => Kind::Ok,
                Kind::Ok => Kind::Fail,
                other => other,
            };
            let mut input = m.clone();
            input["from"] = op.input["from"].clone();
            input["key"] = op.input["key"].clone();
            out.push(Op {
                f: "send".into(),
                kind,
                input,
                output: result.clone(),
                ..op.clone()
            });
        }
    }
    out
}

/// Check a mail history (see the module doc).
pub fn check_mail(ops: &[Op]) -> Vec<Violation> {
    let expanded = expand_batches(ops);
    let ops = expanded.as_slice();
    let boxes = mailboxes(ops);
    let mut found = Vec::new();
    for (key, mailbox) in &boxes {
        let Some(final_read) = mailbox.final_read else {
            let message = "the final read of the mailbox never succeeded".to_string();
            found.push(violation(key, message, &[]));
            continue;
        };
        found.extend(check_lost(key, mailbox, final_read));
        found.extend(check_taken_twice(key, mailbox));
        found.extend(check_senders(key, mailbox));
        found.extend(check_order(key, mailbox));
        found.extend(check_phantoms(key, mailbox));
    }
    found.extend(check_duplicates(&boxes));
    found
}

/// 1: every acknowledged delivery is found under the id it was acknowledged with.
fn check_lost(key: &str, mailbox: &Mailbox<'_>, final_read: &Op) -> Vec<Violation> {
    let mut found = Vec::new();
    for send in mailbox.sends.iter().filter(|o| o.kind == Kind::Ok) {
        let id = send.output["id"].as_str().unwrap_or_default();
        let text = send.input["text"].as_str().unwrap_or_default();
        match mailbox.found.get(id) {
            None => {
                let message = format!(
                    "{text} was acknowledged delivered as {id} but is neither drained nor in \
                     the final mailbox (lost)"
                );
                found.push(violation(key, message, &[send, final_read]));
            }
            Some(seen) if seen.text != text => {
                let message = format!(
                    "{text} was acknowledged delivered as {id}, but {id} holds {}",
                    seen.text
                );
                found.push(violation(key, message, &[send, seen.op]));
            }
            Some(_) => {}
        }
    }
    found
}

/// 2 (within a mailbox): a message an answered ack took is not left in the mailbox.
fn check_taken_twice(key: &str, mailbox: &Mailbox<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (id, left) in &mailbox.left {
        if let Some(taken) = mailbox.taken.get(id) {
            let message = format!(
                "{id} ({}) was taken by an answered ack but is still in the final mailbox \
                 (duplicated)",
                left.text
            );
            found.push(violation(key, message, &[taken.op, left.op]));
        }
    }
    found
}

/// 2: no (sender, n) is stored under two ids (in one mailbox or across mailboxes).
fn check_duplicates(boxes: &BTreeMap<&str, Mailbox<'_>>) -> Vec<Violation> {
    let mut stored: BTreeMap<(&str, u64), Vec<(&str, Seen<'_>)>> = BTreeMap::new();
    for (key, mailbox) in boxes {
        for seen in mailbox.found.values() {
            if let Some(named) = seen.named() {
                stored.entry(named).or_default().push((key, *seen));
            }
        }
    }
    let mut found = Vec::new();
    for copies in stored.values().filter(|copies| copies.len() > 1) {
        let (key, first) = copies[0];
        let ids: Vec<&str> = copies.iter().map(|(_, seen)| seen.id).collect();
        let shown: Vec<&Op> = copies.iter().map(|(_, seen)| seen.op).collect();
        let message = format!(
            "{} is stored {} times: {} (duplicated)",
            first.text,
            copies.len(),
            ids.join(", ")
        );
        found.push(violation(key, message, &shown));
    }
    found
}

/// 3: each message's stored sender is the agent its text names.
fn check_senders(key: &str, mailbox: &Mailbox<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for seen in mailbox.found.values() {
        let Some((agent, _)) = seen.named() else {
            continue;
        };
        if seen.from != agent {
            let message = format!(
                "{} says {} but its stored sender is {:?}, not the caller that sent it",
                seen.id, seen.text, seen.from
            );
            found.push(violation(key, message, &[seen.op]));
        }
    }
    found
}

/// 4: in the mailbox, by sequence, each sender's n increases (an equal n is a duplicate,
/// reported by [`check_duplicates`]).
fn check_order(key: &str, mailbox: &Mailbox<'_>) -> Vec<Violation> {
    let mut by_seq: Vec<&Seen<'_>> = mailbox.found.values().collect();
    by_seq.sort_by_key(|seen| seen.seq);
    let mut last: BTreeMap<&str, &Seen<'_>> = BTreeMap::new();
    let mut found = Vec::new();
    for seen in by_seq {
        let Some((agent, n)) = seen.named() else {
            continue;
        };
        if let Some(before) = last.get(agent)
            && before.named().is_some_and(|(_, m)| m > n)
        {
            let message = format!(
                "{agent}'s messages are out of order: {} at seq {} before {} at seq {}",
                before.text, before.seq, seen.text, seen.seq
            );
            found.push(violation(key, message, &[before.op, seen.op]));
        }
        last.insert(agent, seen);
    }
    found
}

/// 5: every message found was sent here, by a send not definitely refused. The sends are
/// indexed by text once, so each message looks up only its own sends (a scan of every send
/// per message made the check quadratic: hours for a 30-minute fabric run).
fn check_phantoms(key: &str, mailbox: &Mailbox<'_>) -> Vec<Violation> {
    let mut by_text: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for send in &mailbox.sends {
        if let Some(text) = send.input["text"].as_str() {
            by_text.entry(text).or_default().push(send);
        }
    }
    let mut found = Vec::new();
    for seen in mailbox.found.values() {
        let sends: Vec<&Op> = by_text
            .get(seen.text)
            .into_iter()
            .flatten()
            .copied()
            .filter(|send| seen.attempt.is_none_or(|a| send.input["attempt"] == a))
            .collect();
        let message = if sends.is_empty() {
            format!(
                "{} ({}) was never sent to this mailbox (phantom)",
                seen.id, seen.text
            )
        } else if sends.iter().all(|send| send.kind == Kind::Fail) {
            format!(
                "{} ({}) is stored though every send of it was refused (phantom)",
                seen.id, seen.text
            )
        } else {
            continue;
        };
        let mut shown = sends;
        shown.push(seen.op);
        found.push(violation(key, message, &shown));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(f: &str, kind: Kind, input: Value, output: Value, call: u64) -> Op {
        Op {
            process: 1,
            kind,
            f: f.into(),
            key: "mail/r".into(),
            input,
            output,
            call,
            ret: call + 1,
        }
    }

    /// A batch of two, the first delivered and the second refused, and the final mailbox
    /// holding `left`.
    fn history(left: Value) -> Vec<Op> {
        let messages = json!([
            { "n": 1, "text": "s:1", "attempt": 0 },
            { "n": 2, "text": "s:2", "attempt": 0 },
        ]);
        let results = json!([{ "id": "agent:r#1" }, { "reason": "mailbox_full" }]);
        let input = json!({ "from": "s", "messages": messages, "key": "k" });
        let batch = op(
            "send_batch",
            Kind::Ok,
            input,
            json!({ "results": results }),
            10,
        );
        let last = op(
            "final",
            Kind::Ok,
            Value::Null,
            json!({ "messages": left }),
            20,
        );
        vec![batch, last]
    }

    fn stored(seq: u64) -> Value {
        json!({ "id": format!("agent:r#{seq}"), "seq": seq, "from": "s",
            "text": format!("s:{seq}"), "attempt": 0 })
    }

    /// Each message of a batch is checked as its own send: the delivered one must be
    /// found, the refused one must not be stored.
    #[test]
    fn a_batch_is_checked_message_by_message() {
        assert!(check_mail(&history(json!([stored(1)]))).is_empty());
        let lost = check_mail(&history(json!([])));
        assert!(
            lost.iter().any(|v| v.message.contains("s:1")),
            "{:?}",
            lost.iter().map(|v| &v.message).collect::<Vec<_>>()
        );
        let phantom = check_mail(&history(json!([stored(1), stored(2)])));
        assert!(
            phantom.iter().any(|v| v.message.contains("phantom")),
            "{:?}",
            phantom.iter().map(|v| &v.message).collect::<Vec<_>>()
        );
    }
}
