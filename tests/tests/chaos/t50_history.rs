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

#[test]
fn a_cell_is_unavailable_only_while_someone_waits() {
    use whip_tests::chaos::history::Op;
    let ms = 1_000_000;
    let op = |kind: Kind, call: u64, ret: u64| Op {
        process: 1,
        kind,
        f: "write".into(),
        key: "cas/k0".into(),
        input: serde_json::Value::Null,
        output: serde_json::Value::Null,
        call: call * ms,
        ret: if ret == u64::MAX { ret } else { ret * ms },
    };
    // Idle from 20 to 5,000 ms: nobody waited, so the cell was not unavailable.
    let idle = [op(Kind::Ok, 10, 20), op(Kind::Ok, 5_000, 5_010)];
    let refs: Vec<&Op> = idle.iter().collect();
    assert_eq!(whip_tests::chaos::longest_wait_ms(&refs, 6_000 * ms), 10);
    // A failed call from 100 to 900 ms, then an unknown one (given up after the operation
    // timeout) until the success at 3,000 ms: waiting from 100 ms on.
    let outage = [
        op(Kind::Ok, 10, 20),
        op(Kind::Fail, 100, 900),
        op(Kind::Info, 900, u64::MAX),
        op(Kind::Ok, 2_900, 3_000),
    ];
    let refs: Vec<&Op> = outage.iter().collect();
    assert_eq!(whip_tests::chaos::longest_wait_ms(&refs, 6_000 * ms), 2_900);
}
