//! The WhippleScript runtime as users run it: real `whip` processes on the seed programs of
//! the coordination chapter, on the embedded store and against a 3-voter `whip cell dev`.
//! Files are ordered by behaviour.

mod t10_seeds_embedded;
mod t20_two_processes;
mod t30_seeds_cluster;
mod t40_worker_crash;
mod t50_trackers;
mod t60_ownership_and_invoke;
mod t70_worker_daemons;
mod t80_seeds_fabric;
mod t90_trackers_fabric;
mod t95_mail;
mod t96_trace;
mod t97_invoke_fabric;
mod t98_operate;
mod t99_blocked;
mod t99_broker;
mod t99_capacity_fabric;
mod t99_exec;
mod t99_messaging;
mod t99_recover;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use whip_tests::whip_binary;

/// A scratch directory holding copies of the seed programs (and a `wait 30s` variant).
pub(crate) fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/check/valid");
    for (seed, name) in [
        ("seed_lease_ship", "deploys.whip"),
        ("seed_counter_budget", "budget.whip"),
        ("seed_ledger_decisions", "decisions.whip"),
    ] {
        std::fs::copy(seeds.join(format!("{seed}.whip")), dir.path().join(name)).unwrap();
    }
    let ship = std::fs::read_to_string(dir.path().join("deploys.whip")).unwrap();
    let wait = ship.replace(
        "acquire deploy_slot for d.env as slot",
        "acquire deploy_slot for d.env wait 30s as slot",
    );
    assert_ne!(wait, ship);
    std::fs::write(dir.path().join("deploys_wait.whip"), wait).unwrap();
    dir
}

/// `whip fabric init --cells 4` over every node of `fabric`, through its first node.
pub(crate) fn init_fabric(dir: &Path, fabric: &whip_tests::fabric::ProcessFabric) {
    let mut init = vec![
        "fabric".to_string(),
        "init".into(),
        "--cells".into(),
        "4".into(),
    ];
    init.extend(fabric.node_args());
    let args: Vec<&str> = init.iter().map(String::as_str).collect();
    ok(&whip(dir, Some(&fabric.addrs[0]), &args));
}

/// Run `whip ARGS` in `dir` (with `--cell` when given).
pub(crate) fn whip(dir: &Path, cell: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(whip_binary());
    cmd.current_dir(dir).args(args);
    if let Some(cell) = cell {
        cmd.args(["--cell", cell]);
    }
    cmd.output().expect("run whip")
}

/// Stdout of a successful `whip` run.
pub(crate) fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "whip failed ({:?}): {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The instance id on the `run ins_…` line.
pub(crate) fn run_id(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .expect("a `run` line")
        .to_string()
}

/// The `whip` binary (for spawning).
pub(crate) fn bin() -> PathBuf {
    whip_binary()
}

/// Today's date in America/New_York, as the seed's counter period.
pub(crate) fn new_york_today() -> String {
    chrono::Utc::now()
        .with_timezone(&chrono_tz::America::New_York)
        .format("%Y-%m-%d")
        .to_string()
}

/// The seed scenarios, against the embedded store (`cell = None`) or a cluster.
pub(crate) fn seed_scenarios(dir: &Path, cell: Option<&str>) {
    // Ship twice quickly: the first holds through its work, the second skips.
    let first = ok(&whip(dir, cell, &["run", "deploys.whip"]));
    assert!(first.contains("workflow Ship\n"), "{first}");
    assert!(first.contains("status running"), "{first}");
    let a = run_id(&first);
    let leases = ok(&whip(dir, cell, &["leases"]));
    let held = format!("local/Ship::deploy_slot/prod held by {a} (expires ");
    assert!(leases.starts_with(&held), "{leases}");
    let second = ok(&whip(dir, cell, &["run", "deploys.whip"]));
    assert!(second.contains("status completed"), "{second}");
    assert!(second.contains("skipped: deploy slot busy"), "{second}");
    // Cancelling the holder frees the slot.
    let cancelled = ok(&whip(dir, cell, &["cancel", &a]));
    assert!(
        cancelled.starts_with(&format!("{a} updated at event #")),
        "{cancelled}"
    );
    assert_eq!(ok(&whip(dir, cell, &["leases"])), "no leases held\n");
    // Budget twice: 60 of 100 admitted, then nothing fits.
    let one = ok(&whip(dir, cell, &["run", "budget.whip"]));
    assert!(one.contains("budget applied"), "{one}");
    let counters = ok(&whip(dir, cell, &["counters"]));
    let line = format!(
        "local/Budget::tokens/core consumed=60 period={}\n",
        new_york_today()
    );
    assert_eq!(counters, line);
    let two = ok(&whip(dir, cell, &["run", "budget.whip"]));
    assert!(two.contains("nothing fit today's budget"), "{two}");
    // Decisions twice: #1 and #2 in partition `deploys`, by their instances.
    let d1 = run_id(&ok(&whip(dir, cell, &["run", "decisions.whip"])));
    let d2 = run_id(&ok(&whip(dir, cell, &["run", "decisions.whip"])));
    let ledger = ok(&whip(dir, cell, &["ledger", "decisions"]));
    let entry = r#"{"area":"deploys","choice":"ship api first"}"#;
    assert_eq!(
        ledger,
        format!(
            "local/Decisions::decisions#1 [deploys] by {d1}: {entry}\n\
             local/Decisions::decisions#2 [deploys] by {d2}: {entry}\n"
        )
    );
    let json = ok(&whip(
        dir,
        cell,
        &["ledger", "decisions", "--partition", "deploys", "--json"],
    ));
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
    // Views of one instance.
    let status = ok(&whip(dir, cell, &["status", &d1]));
    assert!(
        status.starts_with(&format!("instance {d1} completed ")),
        "{status}"
    );
    let instances = ok(&whip(dir, cell, &["instances"]));
    assert_eq!(instances.lines().count(), 6, "{instances}");
    assert!(instances.contains(&format!("{d1} completed workflow_version=pv_")));
    let log = ok(&whip(dir, cell, &["log", &d1]));
    assert!(log.starts_with("#1 external.started "), "{log}");
    for view in ["facts", "effects", "runs", "diagnostics"] {
        ok(&whip(dir, cell, &[view, &d1]));
        ok(&whip(dir, cell, &["--json", view, &d1]));
    }
    bad_input(dir, cell, &d1);
}

fn bad_input(dir: &Path, cell: Option<&str>, done: &str) {
    let fails = |args: &[&str], message: &str| {
        let out = whip(dir, cell, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(message), "{args:?}: {err}");
    };
    fails(&["status", "ins_unknown"], "unknown instance ins_unknown");
    fails(
        &["pause", done],
        "cannot transition instance from completed to paused",
    );
    fails(
        &["run", "decisions.whip", "--input", "{not json"],
        "--input is not valid JSON",
    );
    fails(
        &["run", "decisions.whip", "--input", "{\"x\":1}"],
        "has no input `x`",
    );
    fails(&["retry", done, "x000009"], "cannot be retried");
}
