//! Goal: every nemesis really happens in a real `whip chaos` run and the run still passes.
//! Method: run the `whip-chaos` binary (as root, in network namespaces) for a short time
//! with one nemesis at a time, require exit 0 and a PASS verdict, and read `nemesis.jsonl`
//! for the events that prove the fault was injected. The runs take a lock so that only one
//! runs at a time on a small machine. Without root or `ip` they are skipped, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// How long each run's faults and workloads last.
const RUN_DURATION: &str = "20s";

/// Holds an exclusive lock on a file for its lifetime: chaos runs of parallel test
/// processes take turns.
struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    fn take() -> RunLock {
        let path = std::env::temp_dir().join("whip-chaos-nemesis-tests.lock");
        let file = std::fs::File::create(&path).expect("lock file");
        // SAFETY: flock(2) on a descriptor this struct owns; no memory is shared.
        let r = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) };
        assert_eq!(r, 0, "flock {}", path.display());
        RunLock { _file: file }
    }
}

/// Can this machine run the harness (root, `ip`)?
fn can_run() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if !(root && ip) {
        eprintln!("skipped: whip chaos needs root and iproute2");
    }
    root && ip
}

/// A finished run: its output directory and its nemesis events.
struct Run {
    out: PathBuf,
    events: Vec<Value>,
}

impl Run {
    /// Events named `name`.
    fn named(&self, name: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == name).collect()
    }
}

/// Run `whip-chaos ARGS --seed SEED --out DIR --duration RUN_DURATION`; panic unless it
/// exits 0 with a PASS verdict and no violation.
fn chaos(name: &str, seed: u64, args: &[&str]) -> Run {
    let _lock = RunLock::take();
    let out = std::env::temp_dir().join(format!("whip-chaos-{name}-{}", std::process::id()));
    let whip = whip_tests::whip_binary();
    let output = Command::new(env!("CARGO_BIN_EXE_whip-chaos"))
        .args(args)
        .args(["--duration", RUN_DURATION, "--seed", &seed.to_string()])
        .arg("--out")
        .arg(&out)
        .arg("--whip")
        .arg(&whip)
        .output()
        .expect("run whip-chaos");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "whip chaos {args:?} seed {seed} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("verdict: PASS"), "{stdout}\n{stderr}");
    let verdict = read_json(&out.join("verdict.json"));
    assert_eq!(verdict["violations"], Value::Array(vec![]), "{verdict}");
    let events = std::fs::read_to_string(out.join("nemesis.jsonl"))
        .expect("nemesis.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("nemesis line is JSON"))
        .collect();
    Run { out, events }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).expect("JSON")
}

impl Drop for Run {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.out);
        }
    }
}

#[test]
fn unknown_nemesis_is_refused_naming_the_known_ones() {
    let output = Command::new(env!("CARGO_BIN_EXE_whip-chaos"))
        .args(["--nemesis", "partition,flood", "--duration", "1s"])
        .output()
        .expect("run whip-chaos");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown nemesis \"flood\""), "{stderr}");
    assert!(stderr.contains("oneway"), "{stderr}");
}

#[test]
fn move_needs_a_fabric() {
    let output = Command::new(env!("CARGO_BIN_EXE_whip-chaos"))
        .args(["--nemesis", "move", "--duration", "1s"])
        .output()
        .expect("run whip-chaos");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--fabric-cells"), "{stderr}");
}

#[test]
fn ranges_split_and_move_under_kills_and_pauses() {
    if !can_run() {
        return;
    }
    let run = chaos(
        "move",
        3,
        &[
            "--nodes",
            "3",
            "--fabric-cells",
            "4",
            "--nemesis",
            "kill,pause,move",
            "--workload",
            "cas,board,ledger,registry",
        ],
    );
    let done = run.named("range-change-done");
    let kind = |e: &&Value| {
        e["detail"]["change"]["kind"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(
        done.iter().any(|e| kind(e) == "move"),
        "no move in {:#?}",
        run.events
    );
    assert!(run.named("range-change-stuck").is_empty());
    assert!(!run.named("kill").is_empty() || !run.named("pause").is_empty());
}

/// The `follow` workload on a fabric under kills: helpers are enrolled, some of their
/// entries revoked, teams dissolved, and after the run every acknowledged revoke's helper
/// is refused (the follow-ups ran from the outbox, whichever node died), every other
/// helper still proves itself (the checker, `follow::check_follow`).
#[test]
fn follow_ups_finish_under_kills() {
    if !can_run() {
        return;
    }
    let run = chaos(
        "follow",
        7,
        &[
            "--nodes",
            "3",
            "--fabric-cells",
            "4",
            "--nemesis",
            "kill,partition",
            "--workload",
            "follow",
        ],
    );
    let history = std::fs::read_to_string(run.out.join("history.jsonl")).expect("history");
    let lines: Vec<Value> = (history.lines())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let count = |f: &str, kind: &str| {
        (lines.iter())
            .filter(|l| l["f"] == f && l["type"] == kind)
            .count()
    };
    assert!(count("revoke", "ok") > 0, "no revoke was acknowledged");
    assert!(count("dissolve", "ok") > 0, "no dissolve was acknowledged");
    let refused = (lines.iter())
        .filter(|l| l["f"] == "final" && l["type"] == "ok" && l["value"]["accepted"] == false)
        .count();
    assert!(refused > 0, "no helper was probed as refused");
    assert!(!run.named("kill").is_empty(), "no node was killed");
}

#[test]
fn kills_aim_at_the_node_leading_the_most_data_cells() {
    if !can_run() {
        return;
    }
    let run = chaos(
        "aimed",
        4,
        &[
            "--nodes",
            "3",
            "--fabric-cells",
            "4",
            "--nemesis",
            "kill",
            "--workload",
            "cas",
        ],
    );
    let kills = run.named("kill");
    let aimed: Vec<_> = kills
        .iter()
        .filter(|e| e["detail"]["aimed"] == true)
        .collect();
    assert!(!aimed.is_empty(), "no aimed kill in {kills:#?}");
    assert!(
        aimed.iter().all(|e| e["detail"]["leader"] == true),
        "an aimed kill missed every data-cell leader: {aimed:#?}"
    );
}

#[test]
fn oneway_partitions_cut_one_direction() {
    if !can_run() {
        return;
    }
    let run = chaos(
        "oneway",
        5,
        &[
            "--nodes",
            "3",
            "--nemesis",
            "oneway",
            "--workload",
            "cas,lease,ledger",
        ],
    );
    let cuts = run.named("oneway");
    assert!(!cuts.is_empty(), "no one-way cut in {:#?}", run.events);
    assert!(
        cuts.iter()
            .all(|e| e["detail"]["from"] != e["detail"]["to"])
    );
}

#[test]
fn voters_leave_and_come_back_under_load() {
    if !can_run() {
        return;
    }
    let run = chaos(
        "member",
        6,
        &[
            "--nodes",
            "3",
            "--nemesis",
            "member",
            "--workload",
            "cas,lease,counter,ledger",
        ],
    );
    let removed = run.named("member-remove");
    let restored = run.named("member-restore");
    assert!(!removed.is_empty(), "no voter removed in {:#?}", run.events);
    assert_eq!(removed.len(), restored.len(), "{:#?}", run.events);
}

/// On a fabric, `member` takes a node out of one data cell's voters (its other cells keep
/// it) and brings it back at the heal; the checkers hold across.
#[test]
fn a_data_cells_voters_change_under_load() {
    if !can_run() {
        return;
    }
    let run = chaos(
        "member-fabric",
        7,
        &[
            "--nodes",
            "3",
            "--fabric-cells",
            "2",
            "--nemesis",
            "member,kill",
            "--workload",
            "cas,board,ledger",
        ],
    );
    let removed = run.named("member-remove");
    let restored = run.named("member-restore");
    assert!(!removed.is_empty(), "no voter removed in {:#?}", run.events);
    assert!(
        removed
            .iter()
            .all(|e| e["detail"]["cell"].as_u64().is_some_and(|c| c >= 1))
    );
    assert_eq!(removed.len(), restored.len(), "{:#?}", run.events);
}

#[test]
fn five_nodes_get_the_ring_partition() {
    if !can_run() {
        return;
    }
    // Seed 7 draws the ring in the second round.
    let run = chaos(
        "ring",
        7,
        &[
            "--nodes",
            "5",
            "--nemesis",
            "partition",
            "--workload",
            "cas,ledger",
        ],
    );
    let kinds: Vec<String> = run
        .named("partition")
        .iter()
        .map(|e| e["detail"]["kind"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        kinds.iter().any(|k| k.starts_with("ring")),
        "no ring in {kinds:?}"
    );
}

#[test]
fn clocks_jump_inside_running_nodes() {
    if !can_run() {
        return;
    }
    let run = chaos(
        "clock",
        8,
        &[
            "--nodes",
            "3",
            "--nemesis",
            "clock",
            "--workload",
            "cas,lease,counter,ledger",
        ],
    );
    let jumps = run.named("clock");
    assert!(!jumps.is_empty(), "no clock jump in {:#?}", run.events);
    // The node itself saw the jump while it ran (its log), not only at a restart.
    for jump in jumps {
        let node = jump["detail"]["node"].as_u64().expect("node");
        let offset = jump["detail"]["offset_ms"].as_i64().expect("offset");
        let log = run.out.join("data").join(format!("node-{node}.log"));
        let log = without_colours(&std::fs::read_to_string(&log).expect("node log"));
        let seen = "clock offset jumped (test fault) before=";
        assert!(
            log.lines()
                .any(|l| l.contains(seen) && l.ends_with(&format!("after={offset}"))),
            "node {node} never jumped to {offset}:\n{log}"
        );
    }
}

/// `text` without its terminal colour sequences (`ESC [ … m`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

/// Disk faults under the log store: a node with an fsync error or a full disk stops
/// (exit 74, counted as the fault's loss, not a crash), a torn tail is cut at restart, and
/// the histories still check.
#[test]
fn disk_faults_stop_the_node_or_are_cut_off_and_the_checkers_hold() {
    if !can_run() {
        return;
    }
    let run = chaos(
        "disk",
        8,
        &[
            "--nodes",
            "3",
            "--nemesis",
            "disk",
            "--workload",
            "cas,ledger",
        ],
    );
    let disks = run.named("disk");
    assert!(!disks.is_empty(), "no disk fault in {:#?}", run.events);
    for fault in &disks {
        let detail = &fault["detail"];
        match detail["kind"].as_str() {
            Some("fsync" | "enospc") => {
                assert_eq!(detail["stopped"], true, "the node did not stop: {fault}")
            }
            Some("torn-tail") => assert!(detail["torn"].is_string(), "nothing torn: {fault}"),
            other => panic!("unknown disk fault {other:?}"),
        }
    }
    assert!(run.named("node-exited").is_empty(), "{:#?}", run.events);
}
