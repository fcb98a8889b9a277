//! Goal: several `whip worker --all` daemons on different members of a 3-voter cell share
//! the work without stepping one instance twice at once. Method: create 24 Decisions
//! instances with `whip start` (not stepped), run two daemons at the same time through
//! different members, then check that every instance completed and the ledger holds exactly
//! one entry per instance, gap-free: a double step or a double effect run would append twice.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};

use serde_json::Value;

const INSTANCES: usize = 24;

#[test]
fn two_worker_daemons_share_instances_without_double_work() {
    let dir = crate::workdir();
    let dev = whip_tests::DevCell::start(dir.path());
    let member = |i: u16| dev.member(i);
    let mut started = BTreeSet::new();
    for _ in 0..INSTANCES {
        let out = crate::whip(
            dir.path(),
            Some(&member(0)),
            &["start", "decisions.whip", "--json"],
        );
        let v: Value = serde_json::from_str(&crate::ok(&out)).unwrap();
        started.insert(v["id"].as_str().unwrap().to_string());
    }
    let daemons: Vec<_> = [1, 2]
        .into_iter()
        .map(|i| {
            Command::new(crate::bin())
                .current_dir(dir.path())
                .args(["worker", "--all", "--duration", "8s", "--cell", &member(i)])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut d in daemons {
        assert!(d.wait().unwrap().success(), "a worker daemon failed");
    }
    let instances: Value = serde_json::from_str(&crate::ok(&crate::whip(
        dir.path(),
        Some(&member(0)),
        &["instances", "--json"],
    )))
    .unwrap();
    let completed: BTreeSet<String> = instances
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == "completed")
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(completed, started, "every started instance completes");
    let ledger: Value = serde_json::from_str(&crate::ok(&crate::whip(
        dir.path(),
        Some(&member(0)),
        &["ledger", "decisions", "--json"],
    )))
    .unwrap();
    let entries = ledger.as_array().unwrap();
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=INSTANCES as u64).collect::<Vec<_>>(),
        "one gap-free entry each"
    );
    let appenders: BTreeSet<String> = entries
        .iter()
        .map(|e| e["by"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(appenders, started, "each instance appended exactly once");
}
