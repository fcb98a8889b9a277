//! Goal: a worker killed between the cell's apply and the run's terminal does not append
//! twice when another worker reclaims the run. Method: `whip start` and `whip step`, then a
//! `whip worker ID` that exits right after the ledger append (test hook), then, after its
//! short run lease ran out, a second `whip worker ID`: one ledger entry, instance completed.
//! The same for a `whip run` killed after the append its start claimed ahead.
//! The hook is whip-engine's `test-hooks` feature, which this crate turns on for the
//! workspace build of the binary.

use std::process::Command;
use std::time::Duration;

use crate::{ok, whip};

#[test]
fn a_killed_worker_does_not_append_twice() {
    let dir = crate::workdir();
    let started = ok(&whip(dir.path(), None, &["start", "decisions.whip"]));
    let id = started.trim().strip_prefix("started ").unwrap().to_string();
    ok(&whip(dir.path(), None, &["step", &id]));
    let crashed = Command::new(crate::bin())
        .current_dir(dir.path())
        .args(["worker", &id])
        .env("WHIP_TEST_CRASH_AFTER_APPLY", "1")
        .env("WHIPPLESCRIPT_RUN_LEASE_MS", "300")
        .output()
        .unwrap();
    assert_eq!(
        crashed.status.code(),
        Some(3),
        "the test hook did not fire: build the binary with the tests crate's features \
         (`cargo build --workspace --bins`, as scripts/test.sh does), not `-p whip` alone"
    );
    let one = ok(&whip(dir.path(), None, &["ledger", "decisions"]));
    assert_eq!(one.lines().count(), 1, "{one}");
    let effects = ok(&whip(dir.path(), None, &["effects", &id]));
    assert!(effects.contains("append running"), "{effects}");
    std::thread::sleep(Duration::from_millis(400));
    ok(&whip(dir.path(), None, &["worker", &id]));
    let status = ok(&whip(dir.path(), None, &["status", &id]));
    assert!(status.contains(" completed "), "{status}");
    let ledger = ok(&whip(dir.path(), None, &["ledger", "decisions"]));
    assert_eq!(ledger.lines().count(), 1, "appended twice: {ledger}");
    let runs = ok(&whip(dir.path(), None, &["runs", &id]));
    assert!(runs.contains("abandoned"), "{runs}");
}

/// The same through `whip run`, whose start commit claims the append with the start: a run
/// killed between the append's apply and its terminal leaves the claim under its run lease,
/// and a worker after the lease reclaims it without appending twice.
#[test]
fn a_run_killed_after_its_start_claimed_does_not_append_twice() {
    let dir = crate::workdir();
    let crashed = Command::new(crate::bin())
        .current_dir(dir.path())
        .args(["run", "decisions.whip"])
        .env("WHIP_TEST_CRASH_AFTER_APPLY", "1")
        .env("WHIPPLESCRIPT_RUN_LEASE_MS", "300")
        .output()
        .unwrap();
    assert_eq!(crashed.status.code(), Some(3), "the test hook did not fire");
    let instances = ok(&whip(dir.path(), None, &["instances"]));
    let id = instances
        .split_whitespace()
        .next()
        .expect("the started instance")
        .to_string();
    let effects = ok(&whip(dir.path(), None, &["effects", &id]));
    assert!(effects.contains("append running"), "{effects}");
    let one = ok(&whip(dir.path(), None, &["ledger", "decisions"]));
    assert_eq!(one.lines().count(), 1, "{one}");
    // A worker reclaims the run once its lease ran out; before that, it leaves it alone.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        ok(&whip(dir.path(), None, &["worker", &id]));
        let status = ok(&whip(dir.path(), None, &["status", &id]));
        if status.contains(" completed ") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never completed: {status}"
        );
    }
    let ledger = ok(&whip(dir.path(), None, &["ledger", "decisions"]));
    assert_eq!(ledger.lines().count(), 1, "appended twice: {ledger}");
    let runs = ok(&whip(dir.path(), None, &["runs", &id]));
    assert!(runs.contains("abandoned"), "{runs}");
}
