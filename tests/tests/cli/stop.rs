//! SIGINT and SIGTERM end a waiting command and give back what it waited for (issue 30,
//! item 6). `whip lease acquire --wait` queued behind a holder leaves the wait queue when
//! interrupted; `whip run --wait` on an instance waiting on a long timer ends on SIGTERM.
//! Each process must be gone well before its own wait would have ended.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use whip_tests::whip_binary;

use super::{DevCli, json_of};

pub(super) fn spawn(cli: &DevCli, args: &[&str]) -> Child {
    Command::new(whip_binary())
        .current_dir(&cli.dir)
        .env("WHIP_CREDENTIALS", cli.dir.join("credentials.json"))
        .args(args)
        .args(["--cell", cli.cell.as_str()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn whip")
}

/// Send `signal` and wait for the exit, bounded far below the command's own wait.
pub(super) fn stop(child: &mut Child, signal: i32) -> std::process::ExitStatus {
    let early = child.try_wait().unwrap();
    assert!(
        early.is_none(),
        "the command ended before the signal: {early:?}"
    );
    // SAFETY: kill(2) on our own child's pid; no memory is shared.
    unsafe { libc::kill(child.id() as i32, signal) };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "still running after the signal");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn waiters(cli: &DevCli) -> Vec<Value> {
    let list = json_of(&cli.run(&["lease", "list", "--json"]));
    let leases = list["leases"].as_array().cloned().unwrap_or_default();
    leases
        .iter()
        .flat_map(|l| l["waiters"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn an_interrupted_lease_wait_leaves_the_queue() {
    let cli = DevCli::start();
    let held = cli.run(&[
        "lease", "acquire", "deploy", "prod", "--holder", "a", "--ttl", "60s",
    ]);
    assert!(
        held.status.success(),
        "{}",
        String::from_utf8_lossy(&held.stderr)
    );
    let mut waiting = spawn(
        &cli,
        &[
            "lease", "acquire", "deploy", "prod", "--holder", "b", "--ttl", "60s", "--wait", "120s",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !waiters(&cli).iter().any(|w| w["holder"] == "b") {
        assert!(Instant::now() < deadline, "b never queued");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = stop(&mut waiting, libc::SIGINT);
    assert!(!status.success(), "an interrupted wait is no success");
    let mut stderr = String::new();
    std::io::Read::read_to_string(waiting.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("left the wait queue"), "{stderr}");
    assert!(
        waiters(&cli).is_empty(),
        "b left the queue: {:?}",
        waiters(&cli)
    );
}

#[test]
fn a_terminated_run_wait_ends() {
    let cli = DevCli::start();
    let program = cli.dir.join("slow.whip");
    std::fs::write(&program, SLOW).unwrap();
    let mut run = spawn(&cli, &["run", program.to_str().unwrap(), "--wait"]);
    // The instance exists (and waits on its timer) once `instances` lists it running.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = json_of(&cli.run(&["--json", "instances", "--status", "running"]));
        if rows.as_array().is_some_and(|r| !r.is_empty()) {
            break;
        }
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = stop(&mut run, libc::SIGTERM);
    assert!(
        !status.success(),
        "a stopped wait is no success: {status:?}"
    );
}

const SLOW: &str = r#"use std.coord

workflow Slow

output result { note string }

rule wait when started => {
  timer 10m as long
  after long completes { complete result { note "done" } }
}
"#;
