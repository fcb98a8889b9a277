//! The `watch` workload: writers put numbered values under a prefix while one watcher
//! follows the prefix from the first revision; after the final heal the watcher gets a
//! bounded time to catch up, then the history is checked.
//!
//! Writer `w` puts `"w{w}:{n}"` for n = 1, 2, … on its own keys (`chaoswatch/w{w}/k{j}`),
//! one at a time; a put whose outcome is unknown is not retried (the next put has a new
//! value). The watcher ([`whip_cell::CellClient::follow`]: on a fabric one stream per data
//! cell, each reopened at its cursor across kills, partitions and moves) records every
//! event it is sent. A follow that gives up (no member answered for the reconnect bound)
//! starts a new session from the first revision; repeats across sessions are expected and
//! not counted.
//!
//! History, on the key `watch/{key}`: `put` (ok: the revision), `event` (the cell, the
//! revision, the value, the session), and one `final` on [`FINAL_KEY`] once the watcher
//! caught up or its bound passed. The checks ([`check_watch`]):
//!
//! 1. **None lost.** Every acknowledged put arrives as an event of its key at the revision
//!    the put answered, with its value.
//! 2. **No phantom.** Every put event's value was put on that key (acknowledged or unknown).
//! 3. **None repeated.** In one session, no (cell, revision, key) arrives twice.
//! 4. **In order.** In one session, each cell's revisions arrive in order, and so do each
//!    key's revisions from one cell. A fabric's prefix watch is one stream per cell, so a
//!    key whose range moved may have its new cell's events arrive before the old cell's
//!    last ones (a key watch keeps the key's order across a move: `fabric/t22_watch`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};
use whip_cell::client::{WatchBatch, WatchEnd};
use whip_proto::v1 as pb;

use super::history::{Kind, Op, Recorder, format_ops};
use super::invariants::Violation;
use super::workload::{Done, Shared, Worker, error_done};

/// Writers of the workload.
pub const WATCH_WRITERS: usize = 3;
/// Keys per writer.
pub const WATCH_KEYS_PER_WRITER: u64 = 4;
/// The client keys' prefix.
pub const WATCH_PREFIX: &str = "chaoswatch/";
/// The history key of the watcher's final record.
pub const FINAL_KEY: &str = "watch/final";
/// How long after the final heal the watcher may take to deliver every acknowledged put.
pub const WATCH_CATCH_UP_MS: u64 = 30_000;
/// How long the watcher keeps following after the run stopped (it ends on its own).
const WATCHER_AFTER_STOP_MS: u64 = 120_000;

fn history_key(key: &[u8]) -> String {
    format!("watch/{}", String::from_utf8_lossy(key))
}

/// Start the watcher (detached: it outlives the writers, so that events delayed by a fault
/// still arrive after the final heal), then run the writers until the stop flag.
pub(super) async fn run(shared: Shared, seed: u64) -> Result<(), String> {
    let watcher = Worker::new(shared.clone(), seed)?;
    tokio::spawn(follow_all(watcher));
    let mut writers = Vec::new();
    for w in 0..WATCH_WRITERS {
        let worker = Worker::new(shared.clone(), seed ^ ((w as u64 + 1) << 40))?;
        writers.push(writer(worker, w));
    }
    futures::future::join_all(writers).await;
    Ok(())
}

async fn writer(mut w: Worker, me: usize) {
    let mut n = 0u64;
    while !w.stopped() {
        n += 1;
        let key = format!("{WATCH_PREFIX}w{me}/k{}", n % WATCH_KEYS_PER_WRITER).into_bytes();
        let value = format!("w{me}:{n}");
        let request = pb::KvPutRequest {
            key: key.clone(),
            value: value.clone().into_bytes(),
            ..Default::default()
        };
        let client = w.client.clone();
        let input = json!({ "value": value });
        w.run("put", &history_key(&key), input, async move {
            match client.kv_put(request).await {
                Ok(r) if r.code == pb::OutcomeCode::KvWritten as i32 => {
                    Done::Ok(json!({ "revision": r.version }))
                }
                Ok(r) => Done::Fail(json!({ "code": r.code })),
                Err(e) => error_done(&e, false),
            }
        })
        .await;
        let pause = w.rng.random_range(0..20);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Follow the prefix in sessions until a while after the stop flag.
async fn follow_all(w: Worker) {
    let recorder = w.recorder();
    let mut stopped_at = None;
    let mut session = 0u64;
    loop {
        session += 1;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<WatchBatch>(1024);
        let client = w.client.clone();
        let prefix = (WATCH_PREFIX.as_bytes().to_vec(), true);
        let mut follow = tokio::spawn(async move { client.follow(prefix, 1, tx).await });
        let process = recorder.new_process();
        loop {
            if w.stopped() && stopped_at.is_none() {
                stopped_at = Some(Instant::now());
            }
            let over = Duration::from_millis(WATCHER_AFTER_STOP_MS);
            if stopped_at.is_some_and(|at| at.elapsed() > over) {
                follow.abort();
                return;
            }
            tokio::select! {
                batch = rx.recv() => match batch {
                    Some(batch) => record_batch(&recorder, process, session, batch),
                    None => break,
                },
                ended = &mut follow => {
                    let why = match ended {
                        Ok(Err(WatchEnd::Compacted { cell, oldest })) => {
                            format!("compacted below {oldest} on cell {cell}")
                        }
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(())) => "ended".into(),
                        Err(e) => e.to_string(),
                    };
                    recorder.record(process, Kind::Invoke, "restart", FINAL_KEY, Value::Null);
                    recorder.record(process, Kind::Info, "restart", FINAL_KEY, json!(why));
                    break;
                }
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn record_batch(recorder: &Recorder, process: u64, session: u64, batch: WatchBatch) {
    for event in batch.events {
        let key = history_key(&event.key);
        let output = json!({
            "cell": batch.cell, "revision": event.revision, "session": session,
            "kind": event.kind, "value": String::from_utf8_lossy(&event.value),
        });
        recorder.record(process, Kind::Invoke, "event", &key, Value::Null);
        recorder.record(process, Kind::Ok, "event", &key, output);
    }
}

/// After the final heal: wait (at most [`WATCH_CATCH_UP_MS`]) until every acknowledged put
/// arrived, then record `final` with how many had not.
pub async fn final_watch(recorder: &Recorder, process: u64, ops: &[Op]) {
    if !ops
        .iter()
        .any(|op| op.f == "put" && op.key.starts_with("watch/"))
    {
        return;
    }
    let deadline = Instant::now() + Duration::from_millis(WATCH_CATCH_UP_MS);
    let missing = loop {
        let ops = super::history::pair(&recorder.finish());
        let missing = unseen(&ops).len();
        if missing == 0 || Instant::now() >= deadline {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    recorder.record(process, Kind::Invoke, "final", FINAL_KEY, Value::Null);
    recorder.record(
        process,
        Kind::Ok,
        "final",
        FINAL_KEY,
        json!({ "missing": missing }),
    );
}

/// The acknowledged puts no event delivered: (history key, revision, value).
fn unseen(ops: &[Op]) -> Vec<&Op> {
    let seen: BTreeSet<(&str, u64, &str)> = ops
        .iter()
        .filter(|op| op.f == "event" && op.kind == Kind::Ok)
        .filter_map(|op| {
            let revision = op.output["revision"].as_u64()?;
            Some((op.key.as_str(), revision, op.output["value"].as_str()?))
        })
        .collect();
    ops.iter()
        .filter(|op| op.f == "put" && op.kind == Kind::Ok)
        .filter(|op| {
            let revision = op.output["revision"].as_u64().unwrap_or(0);
            let value = op.input["value"].as_str().unwrap_or("");
            !seen.contains(&(op.key.as_str(), revision, value))
        })
        .collect()
}

fn violation(key: &str, message: String, ops: &[&Op]) -> Violation {
    Violation {
        workload: "watch".into(),
        key: key.to_string(),
        message,
        history: format_ops(ops),
    }
}

/// Check the `watch` history (see the module docs).
pub fn check_watch(ops: &[Op]) -> Vec<Violation> {
    let mut found: Vec<Violation> = unseen(ops)
        .into_iter()
        .map(|op| violation(&op.key, "an acknowledged put never arrived".into(), &[op]))
        .collect();
    let mut attempted: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for op in ops.iter().filter(|op| op.f == "put") {
        if let Some(value) = op.input["value"].as_str() {
            attempted.entry(op.key.as_str()).or_default().insert(value);
        }
    }
    let events: Vec<&Op> = ops
        .iter()
        .filter(|op| op.f == "event" && op.kind == Kind::Ok)
        .collect();
    for op in &events {
        let value = op.output["value"].as_str().unwrap_or("");
        let put = op.output["kind"].as_i64() == Some(pb::watch_event::Kind::Put as i64);
        if put
            && !attempted
                .get(op.key.as_str())
                .is_some_and(|v| v.contains(value))
        {
            found.push(violation(
                &op.key,
                format!("a phantom value {value:?}"),
                &[op],
            ));
        }
    }
    found.extend(check_sessions(&events));
    found
}

/// Repeats and order within each session.
fn check_sessions(events: &[&Op]) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    let mut cell_last: BTreeMap<(u64, u64), (u64, &Op)> = BTreeMap::new();
    let mut key_last: BTreeMap<(u64, u64, &str), (u64, &Op)> = BTreeMap::new();
    for &op in events {
        let (session, cell) = (op.output["session"].as_u64(), op.output["cell"].as_u64());
        let revision = op.output["revision"].as_u64();
        let (Some(session), Some(cell), Some(revision)) = (session, cell, revision) else {
            found.push(violation(&op.key, "a malformed event".into(), &[op]));
            continue;
        };
        if !seen.insert((session, cell, revision, op.key.as_str())) {
            found.push(violation(&op.key, "an event arrived twice".into(), &[op]));
        }
        if let Some((last, before)) = cell_last.insert((session, cell), (revision, op))
            && last > revision
        {
            let message = format!("cell {cell} sent revision {revision} after {last}");
            found.push(violation(&op.key, message, &[before, op]));
        }
        let key = (session, cell, op.key.as_str());
        if let Some((last, before)) = key_last.insert(key, (revision, op))
            && last >= revision
        {
            let message = format!("the key's revision {revision} came after {last}");
            found.push(violation(&op.key, message, &[before, op]));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(f: &str, key: &str, kind: Kind, input: Value, output: Value) -> Op {
        Op {
            process: 1,
            kind,
            f: f.into(),
            key: key.into(),
            input,
            output,
            call: 0,
            ret: 0,
        }
    }

    fn put(key: &str, value: &str, revision: u64) -> Op {
        let input = json!({ "value": value });
        op("put", key, Kind::Ok, input, json!({ "revision": revision }))
    }

    fn event(key: &str, value: &str, revision: u64, session: u64) -> Op {
        let output = json!({
            "cell": 1, "revision": revision, "session": session, "kind": 1, "value": value,
        });
        op("event", key, Kind::Ok, Value::Null, output)
    }

    #[test]
    fn a_clean_history_passes() {
        let ops = [put("watch/a", "w0:1", 5), event("watch/a", "w0:1", 5, 1)];
        assert!(check_watch(&ops).is_empty());
    }

    #[test]
    fn lost_phantom_repeated_and_reordered_events_are_each_found() {
        let lost = [put("watch/a", "w0:1", 5)];
        let phantom = [event("watch/a", "w9:9", 7, 1)];
        let repeated = [
            put("watch/a", "w0:1", 5),
            event("watch/a", "w0:1", 5, 1),
            event("watch/a", "w0:1", 5, 1),
        ];
        let reordered = [
            put("watch/a", "w0:1", 5),
            put("watch/b", "w1:1", 6),
            event("watch/b", "w1:1", 6, 1),
            event("watch/a", "w0:1", 5, 1),
        ];
        let messages = |ops: &[Op]| -> Vec<String> {
            check_watch(ops).into_iter().map(|v| v.message).collect()
        };
        assert_eq!(messages(&lost), ["an acknowledged put never arrived"]);
        assert_eq!(messages(&phantom), ["a phantom value \"w9:9\""]);
        assert!(messages(&repeated).contains(&"an event arrived twice".to_string()));
        assert_eq!(messages(&reordered), ["cell 1 sent revision 5 after 6"]);
    }

    #[test]
    fn a_new_session_may_repeat_what_an_earlier_one_sent() {
        let ops = [
            put("watch/a", "w0:1", 5),
            event("watch/a", "w0:1", 5, 1),
            event("watch/a", "w0:1", 5, 2),
        ];
        assert!(check_watch(&ops).is_empty());
    }
}
