//! Goal: the harness cannot miss a dead node or a recovery that never comes, and a saved run
//! rechecks to the same verdict. Method: real `whip chaos` runs (root, network namespaces)
//! with no nemesis, tampered with from outside through the pid files the harness writes
//! (`DIR/data/node-N.pid`): one node SIGKILLed behind its back, or one node SIGSTOPped
//! until the final heal's catch-up bound (shortened by the hidden `--recovery-bound`) has
//! passed. Each run must FAIL naming what happened; `--check-only DIR` must then print the
//! same JSON verdict. A third run with partitions and kills on a small fabric checks
//! `--check-only` on per-cell failover figures. Every wait is on a condition with a deadline.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a short run may take from start to verdict (start-up, the run, the final heal,
/// the final reads and the clean-up), on two busy cores.
const RUN_DEADLINE: Duration = Duration::from_secs(240);
/// How long the harness may take to have nodes up and operations recorded.
const STARTED_DEADLINE: Duration = Duration::from_secs(90);
/// Poll interval of the waits below.
const POLL: Duration = Duration::from_millis(100);

/// A running `whip chaos`; interrupted (so it cleans up) if the test fails first.
struct Run {
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(root, "whip chaos needs root (network namespaces)");
        let dir = tempfile::tempdir().expect("temp dir");
        let child = Command::new(env!("CARGO_BIN_EXE_whip-chaos"))
            .arg("--whip")
            .arg(whip_tests::whip_binary())
            .args(args)
            .arg("--out")
            .arg(dir.path())
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start whip-chaos");
        Run {
            child: Some(child),
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The pid of node `id`, once the run recorded operations (the workload is under way).
    fn node_pid(&self, id: usize) -> i32 {
        wait_for(STARTED_DEADLINE, "operations recorded", || {
            lines(&self.path("history.jsonl")) >= 100
        });
        let pid = std::fs::read_to_string(self.path(&format!("data/node-{id}.pid")));
        pid.expect("pid file").trim().parse().expect("a pid")
    }

    /// Wait for the run to end: its exit code and its JSON verdict.
    fn verdict(mut self) -> (i32, Value, tempfile::TempDir) {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + RUN_DEADLINE;
        let status = loop {
            if let Some(status) = child.try_wait().expect("poll whip-chaos") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "whip chaos ran over {RUN_DEADLINE:?}"
            );
            std::thread::sleep(POLL);
        };
        let mut out = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut out)
            .expect("read the verdict");
        let verdict = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"));
        (status.code().expect("exited"), verdict, dir)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGINT: the harness removes its namespaces and nodes on the way out.
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let _ = child.wait();
        }
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

fn wait_for(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within {within:?}");
        std::thread::sleep(POLL);
    }
}

fn signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) on a node process of the run under test.
    assert_eq!(
        unsafe { libc::kill(pid, signal) },
        0,
        "signal {signal} to {pid}"
    );
}

/// `whip-chaos --check-only DIR --json`: its exit code and verdict.
fn check_only(dir: &Path) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_whip-chaos"))
        .arg("--check-only")
        .arg(dir)
        .arg("--json")
        .output()
        .expect("run --check-only");
    let verdict = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().expect("exited"), verdict)
}

#[test]
fn a_node_killed_outside_the_nemesis_fails_the_run_naming_it() {
    let run = Run::start(&[
        "--nodes",
        "3",
        "--duration",
        "10s",
        "--nemesis",
        "none",
        "--workload",
        "cas",
        "--seed",
        "91",
    ]);
    signal(run.node_pid(2), libc::SIGKILL);
    let (code, verdict, dir) = run.verdict();
    assert_eq!(code, 1, "{verdict:#}");
    assert_eq!(verdict["verdict"], "FAIL", "{verdict:#}");
    let exits = verdict["node_exits"].as_array().expect("node_exits");
    assert_eq!(exits.len(), 1, "{verdict:#}");
    assert_eq!(exits[0]["node"], 2, "{verdict:#}");
    let status = exits[0]["status"].as_str().expect("status");
    assert!(status.contains("signal: 9"), "{status}");
    assert!(
        !exits[0]["log_tail"]
            .as_array()
            .expect("log tail")
            .is_empty(),
        "{verdict:#}"
    );
    assert_eq!(check_only(dir.path()), (code, verdict));
}

#[test]
fn a_heal_that_never_catches_up_fails_the_run_as_unrecovered() {
    let run = Run::start(&[
        "--nodes",
        "3",
        "--duration",
        "6s",
        "--nemesis",
        "none",
        "--workload",
        "cas",
        "--seed",
        "92",
        "--recovery-bound",
        "3s",
    ]);
    let pid = run.node_pid(3);
    signal(pid, libc::SIGSTOP);
    // Held stopped until the final heal gave up on it, then let go so the final reads and
    // the clean-up run as usual.
    let log = run.path("nemesis.jsonl");
    wait_for(RUN_DEADLINE, "unrecovered event", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("\"unrecovered\""))
    });
    // The harness may already have ended the node (its clean-up resumes and kills every
    // node), so a SIGCONT that finds no process is fine.
    // SAFETY: kill(2) on a node process of the run under test.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let (code, verdict, dir) = run.verdict();
    assert_eq!(code, 1, "{verdict:#}");
    assert_eq!(verdict["verdict"], "FAIL", "{verdict:#}");
    let unrecovered = verdict["unrecovered"].as_array().expect("unrecovered");
    assert!(
        unrecovered
            .iter()
            .any(|u| u["kind"] == "heal-catchup" && u["cell"] == 0),
        "{verdict:#}"
    );
    for field in ["cell", "kind", "at_ms", "why"] {
        assert!(
            unrecovered[0].get(field).is_some(),
            "{field} in {verdict:#}"
        );
    }
    assert!(verdict["node_exits"].as_array().expect("exits").is_empty());
    assert_eq!(check_only(dir.path()), (code, verdict));
}

#[test]
fn check_only_prints_the_verdict_of_the_live_fabric_run() {
    let run = Run::start(&[
        "--nodes",
        "3",
        "--fabric-cells",
        "2",
        "--duration",
        "12s",
        "--nemesis",
        "partition,kill",
        "--workload",
        "cas,ledger",
        "--seed",
        "93",
    ]);
    let (code, verdict, dir) = run.verdict();
    let failover = verdict["failover"].as_object().expect("failover");
    assert_eq!(failover.len(), 2, "a figure per data cell: {verdict:#}");
    assert!(verdict["meta_failover"].is_object(), "{verdict:#}");
    assert!(verdict["unavailability_ms"]["longest_by_cell"].is_object());
    assert_eq!(check_only(dir.path()), (code, verdict));
}
