//! Goal (issue 36, item 3): `agent X { capacity N }` holds fabric-wide, however many
//! workers on however many nodes drive the instance. Method: three `whip node serve`
//! processes (four data cells); one instance with twelve turns of an agent of capacity 2;
//! three workers, each a loop of `whip worker ID --fixture-turn-ms 250` processes through
//! its own node, until the instance is terminal. The instance's event log is one order of
//! commits, so walking it (+1 at each turn's `effect.run_started`, −1 at its
//! `effect.terminal`) gives how many turns ran at once, exactly, whatever the machine's
//! load: never more than 2, and all twelve completed once.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

const TURNS: usize = 12;
const CAPACITY: i64 = 2;

fn program() -> String {
    let mut text = String::from(
        "workflow Twelve\noutput result Done\nclass Done { n int }\nclass Wrote { id string }\n\
         agent w { provider fixture capacity 2 }\n\nrule go when started => {\n",
    );
    for i in 1..=TURNS {
        text.push_str(&format!("  tell w \"turn {i}\" as t{i}\n"));
    }
    for i in 1..=TURNS {
        text.push_str(&format!(
            "  after t{i} completes {{ record Wrote {{ id \"{i}\" }} }}\n"
        ));
    }
    text.push_str(&format!(
        "}}\n\nrule finish when Wrote as x where count(Wrote) == {TURNS} => {{\n  \
         complete result {{ n {TURNS} }}\n}}\n"
    ));
    text
}

fn status(dir: &Path, cell: &str, id: &str) -> String {
    let out = crate::ok(&crate::whip(dir, Some(cell), &["status", id, "--json"]));
    let v: Value = serde_json::from_str(&out).expect("status json");
    v["status"].as_str().expect("a status").to_string()
}

/// One worker: `whip worker ID` through `cell`, again and again, until the instance ends.
fn worker(dir: &Path, cell: &str, id: &str, deadline: Instant) {
    while status(dir, cell, id) == "running" {
        assert!(Instant::now() < deadline, "the instance never finished");
        let args = ["worker", id, "--fixture-turn-ms", "250"];
        crate::ok(&crate::whip(dir, Some(cell), &args));
    }
}

/// The most turns (`ids`) running at once, walking the log in commit order.
fn most_at_once(events: &[Value], ids: &BTreeSet<String>) -> (i64, usize) {
    let (mut running, mut most, mut started) = (0i64, 0i64, 0usize);
    for e in events {
        let id = e["data"]["id"].as_str().unwrap_or_default();
        if !ids.contains(id) {
            continue;
        }
        match e["kind"].as_str() {
            Some("effect.run_started") => {
                running += 1;
                started += 1;
                most = most.max(running);
            }
            Some("effect.terminal") => running -= 1,
            _ => {}
        }
    }
    (most, started)
}

#[test]
fn three_workers_on_three_nodes_run_at_most_capacity_turns() {
    let dir = crate::workdir();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let fabric = runtime.block_on(whip_tests::fabric::ProcessFabric::start(3));
    crate::init_fabric(dir.path(), &fabric);
    std::fs::write(dir.path().join("twelve.whip"), program()).unwrap();
    let started = crate::ok(&crate::whip(
        dir.path(),
        Some(&fabric.addrs[0]),
        &["start", "twelve.whip", "--json"],
    ));
    let v: Value = serde_json::from_str(&started).expect("start json");
    let id = v["id"].as_str().expect("an id").to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    std::thread::scope(|s| {
        for addr in &fabric.addrs {
            let (dir, id) = (dir.path(), id.as_str());
            s.spawn(move || worker(dir, addr, id, deadline));
        }
    });
    assert_eq!(status(dir.path(), &fabric.addrs[1], &id), "completed");
    let effects: Value = serde_json::from_str(&crate::ok(&crate::whip(
        dir.path(),
        Some(&fabric.addrs[2]),
        &["effects", &id, "--json"],
    )))
    .expect("effects json");
    let turns: BTreeSet<String> = (effects.as_array().expect("effects").iter())
        .filter(|e| e["kind"] == "agent.tell")
        .map(|e| e["id"].as_str().expect("an effect id").to_string())
        .collect();
    assert_eq!(turns.len(), TURNS);
    let log: Value = serde_json::from_str(&crate::ok(&crate::whip(
        dir.path(),
        Some(&fabric.addrs[0]),
        &["log", &id, "--json"],
    )))
    .expect("log json");
    let events = log.as_array().expect("events");
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "the log is in commit order"
    );
    let (most, runs) = most_at_once(events, &turns);
    assert_eq!(runs, TURNS, "each turn ran once");
    assert!(
        most <= CAPACITY,
        "{most} turns ran at once (capacity {CAPACITY})"
    );
    assert_eq!(most, CAPACITY, "the workers filled the capacity");
    let workers: BTreeSet<&str> = (events.iter())
        .filter(|e| e["kind"] == "effect.run_started")
        .filter_map(|e| e["data"]["worker"].as_str())
        .collect();
    assert!(
        workers.len() >= 2,
        "more than one worker ran turns: {workers:?}"
    );
}
