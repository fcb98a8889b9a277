//! Goal: two `whip run` processes share one embedded store: the first (`--wait`) holds the
//! store and the lease; the second talks to it over the socket and skips, or with `wait 30s`
//! waits and ships after the first releases. Method: spawn the first, poll `whip leases`
//! until it holds, run the second, wait for both, check the lease is free.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{bin, ok, whip};

fn spawn_wait(dir: &std::path::Path, file: &str) -> std::process::Child {
    Command::new(bin())
        .current_dir(dir)
        .args(["run", "--wait", file])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_held(dir: &std::path::Path) {
    // Let the first process take the store before polling, so the poll is the second
    // process (the case under test), not a racer for the store lock.
    let socket = dir.join(".whipplescript/cell.sock");
    let deadline = Instant::now() + Duration::from_secs(40);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "first run never opened the store"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    loop {
        // A poll may race the first process for the store; only a held lease counts.
        let out = whip(dir, None, &["leases"]);
        if String::from_utf8_lossy(&out.stdout).contains("held by") {
            return;
        }
        assert!(Instant::now() < deadline, "first run never held the lease");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn second_run_skips_while_the_first_holds_in_another_process() {
    let dir = crate::workdir();
    let first = spawn_wait(dir.path(), "deploys.whip");
    wait_held(dir.path());
    let second = ok(&whip(dir.path(), None, &["run", "deploys.whip"]));
    assert!(second.contains("skipped: deploy slot busy"), "{second}");
    let out = first.wait_with_output().unwrap();
    let first = String::from_utf8_lossy(&out.stdout);
    assert!(
        first.contains("status completed") && first.contains("deployed"),
        "{first}"
    );
    assert_eq!(ok(&whip(dir.path(), None, &["leases"])), "no leases held\n");
}

#[test]
fn with_wait_the_second_run_ships_after_the_first() {
    let dir = crate::workdir();
    let first = spawn_wait(dir.path(), "deploys_wait.whip");
    wait_held(dir.path());
    let started = Instant::now();
    let second = ok(&whip(
        dir.path(),
        None,
        &["run", "--wait", "deploys_wait.whip"],
    ));
    assert!(second.contains("status completed"), "{second}");
    assert!(second.contains("\"deployed\""), "{second}");
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "the second did not wait"
    );
    let out = first.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("deployed"));
    assert_eq!(ok(&whip(dir.path(), None, &["leases"])), "no leases held\n");
}
