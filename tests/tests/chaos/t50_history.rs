//! Histories round-trip through JSON lines and pair invoke with completion.

use whip_tests::chaos::history::{Kind, Recorder, pair, parse};

#[test]
fn recorded_history_round_trips_and_pairs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.jsonl");
    let recorder = Recorder::new(Some(&path), std::time::Instant::now()).expect("recorder");
    let p = recorder.new_process();
    let q = recorder.new_process();
    recorder.record(
        p,
        Kind::Invoke,
        "write",
        "cas/k0",
        serde_json::json!({"value": "a"}),
    );
    recorder.record(q, Kind::Invoke, "read", "cas/k0", serde_json::Value::Null);
    recorder.record(
        p,
        Kind::Ok,
        "write",
        "cas/k0",
        serde_json::json!({"version": 3}),
    );
    recorder.record(
        q,
        Kind::Info,
        "read",
        "cas/k0",
        serde_json::json!({"error": "timeout"}),
    );
    let events = recorder.finish();
    let text = std::fs::read_to_string(&path).expect("history file");
    assert_eq!(parse(&text).expect("parses"), events);
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    for field in ["process", "type", "f", "key", "value", "time"] {
        assert!(line.get(field).is_some(), "missing {field} in {line}");
    }
    let ops = pair(&events);
    assert_eq!(ops.len(), 2);
    assert_eq!(ops[0].kind, Kind::Ok);
    assert!(ops[0].ret > ops[0].call);
    assert_eq!(ops[1].kind, Kind::Info);
    assert_eq!(ops[1].ret, u64::MAX);
}
