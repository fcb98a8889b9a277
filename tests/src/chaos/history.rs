//! Histories: every operation as an invoke event and a completion event (ok, fail or info),
//! with monotonic times in nanoseconds since the run started, written as JSON lines
//! (`process`, `type`, `f`, `key`, `value`, `time`) so outside checkers can read them.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What an event says about its operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The operation started.
    Invoke,
    /// It completed and took effect with the recorded result.
    Ok,
    /// It completed and certainly took no effect.
    Fail,
    /// Its outcome is unknown: it may or may not have taken effect (timeout, lost leader).
    Info,
}

/// One line of a history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The logical process; a process whose operation ended `info` is retired.
    pub process: u64,
    /// Invoke or completion kind.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// The operation (`read`, `write`, `cas`, `acquire`, `release`, `consume`, `append`, ...).
    pub f: String,
    /// The key (register, lease, counter or ledger partition) the operation touches.
    pub key: String,
    /// Arguments on invoke, result on completion.
    pub value: Value,
    /// Nanoseconds since the run started (monotonic).
    pub time: u64,
}

/// An operation paired from its invoke and completion events.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    /// The process that ran it.
    pub process: u64,
    /// Completion kind (`Info` also when no completion was recorded).
    pub kind: Kind,
    /// The operation name.
    pub f: String,
    /// The key.
    pub key: String,
    /// Arguments.
    pub input: Value,
    /// Result (`Null` for info).
    pub output: Value,
    /// Invoke time.
    pub call: u64,
    /// Completion time; `u64::MAX` when the outcome is unknown.
    pub ret: u64,
}

/// Pair invoke and completion events per process, in invoke order.
pub fn pair(events: &[Event]) -> Vec<Op> {
    let mut open: BTreeMap<u64, Op> = BTreeMap::new();
    let mut done = Vec::new();
    for e in events {
        if e.kind == Kind::Invoke {
            if let Some(previous) = open.remove(&e.process) {
                done.push(previous);
            }
            open.insert(
                e.process,
                Op {
                    process: e.process,
                    kind: Kind::Info,
                    f: e.f.clone(),
                    key: e.key.clone(),
                    input: e.value.clone(),
                    output: Value::Null,
                    call: e.time,
                    ret: u64::MAX,
                },
            );
        } else if let Some(mut op) = open.remove(&e.process) {
            op.kind = e.kind;
            op.output = e.value.clone();
            if e.kind != Kind::Info {
                op.ret = e.time;
            }
            done.push(op);
        }
    }
    done.extend(open.into_values());
    done.sort_by_key(|op| (op.call, op.process));
    done
}

/// Parse a JSON-lines history.
pub fn parse(text: &str) -> Result<Vec<Event>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(n, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", n + 1)))
        .collect()
}

/// Events of a finished operation, for printing a sub-history.
pub fn events_of(op: &Op) -> Vec<Event> {
    let mut out = vec![Event {
        process: op.process,
        kind: Kind::Invoke,
        f: op.f.clone(),
        key: op.key.clone(),
        value: op.input.clone(),
        time: op.call,
    }];
    if op.ret != u64::MAX || op.kind == Kind::Info {
        out.push(Event {
            process: op.process,
            kind: op.kind,
            f: op.f.clone(),
            key: op.key.clone(),
            value: op.output.clone(),
            time: if op.ret == u64::MAX { op.call } else { op.ret },
        });
    }
    out
}

/// Format ops as JSON lines, invoke and completion events sorted by time.
pub fn format_ops(ops: &[&Op]) -> String {
    let mut events: Vec<Event> = ops.iter().flat_map(|op| events_of(op)).collect();
    events.sort_by_key(|e| e.time);
    events
        .iter()
        .map(|e| serde_json::to_string(e).expect("event encodes"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Records events in memory and appends them to a JSON-lines file. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Mutex<RecorderInner>>,
    start: Instant,
}

struct RecorderInner {
    events: Vec<Event>,
    file: Option<std::io::BufWriter<std::fs::File>>,
    next_process: u64,
    completed: u64,
}

impl Recorder {
    /// A recorder writing to `path` (or memory only), with times relative to `start`.
    pub fn new(path: Option<&std::path::Path>, start: Instant) -> std::io::Result<Recorder> {
        let file = match path {
            Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p)?)),
            None => None,
        };
        Ok(Recorder {
            inner: Arc::new(Mutex::new(RecorderInner {
                events: Vec::new(),
                file,
                next_process: 0,
                completed: 0,
            })),
            start,
        })
    }

    /// Nanoseconds since the run started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// A fresh process id.
    pub fn new_process(&self) -> u64 {
        let mut inner = self.inner.lock().expect("recorder lock");
        inner.next_process += 1;
        inner.next_process
    }

    /// Record an event now.
    pub fn record(&self, process: u64, kind: Kind, f: &str, key: &str, value: Value) {
        let mut inner = self.inner.lock().expect("recorder lock");
        // The time is taken under the lock so the file is in time order.
        let event = Event {
            process,
            kind,
            f: f.to_string(),
            key: key.to_string(),
            value,
            time: self.now(),
        };
        if let Some(file) = inner.file.as_mut() {
            let line = serde_json::to_string(&event).expect("event encodes");
            let _ = writeln!(file, "{line}");
        }
        if kind != Kind::Invoke {
            inner.completed += 1;
        }
        inner.events.push(event);
    }

    /// Operations completed so far (ok, fail or info), for progress.
    pub fn completed(&self) -> u64 {
        self.inner.lock().expect("recorder lock").completed
    }

    /// Flush the file and return every event so far.
    pub fn finish(&self) -> Vec<Event> {
        let mut inner = self.inner.lock().expect("recorder lock");
        if let Some(file) = inner.file.as_mut() {
            let _ = file.flush();
        }
        inner.events.clone()
    }
}
