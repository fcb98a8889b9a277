//! Goal: the seed's operating commands as users type them on the embedded store:
//! `checkpoint` → more work → `restore` continues from the cut with `trace --check` still
//! `conformance=ok` and the lease taken after the cut released; `revise --dry-run` reports
//! compatibility and `--cancel keep` applies it; each refuses what it must (an unknown cut,
//! another root workflow, a terminal instance). Method: real `whip` processes.

use std::path::Path;

use serde_json::Value;

use crate::{ok, whip};

fn json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(ok(&whip(dir, None, &all)).trim()).expect("json")
}

fn refused(dir: &Path, args: &[&str]) -> String {
    let out = whip(dir, None, args);
    assert_eq!(out.status.code(), Some(1), "{args:?} must fail");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn checkpoint_then_more_work_then_restore_continues_from_the_cut() {
    let dir = crate::workdir();
    let d = dir.path();
    let started = json(d, &["start", "deploys.whip"]);
    let id = started["id"].as_str().unwrap().to_string();
    let cut = json(d, &["checkpoint", &id, "--cut-id", "before-deploy"]);
    assert_eq!(cut["cut_id"], "before-deploy");
    // More work: the rule fires and the deploy slot is held.
    ok(&whip(d, None, &["worker", &id]));
    ok(&whip(d, None, &["worker", &id]));
    assert!(ok(&whip(d, None, &["leases"])).contains(&format!("held by {id}")));
    let err = refused(d, &["restore", &id, "no-such-cut"]);
    assert!(err.contains("has no cut no-such-cut"), "{err}");

    let restored = json(d, &["restore", &id, "before-deploy"]);
    assert_eq!(restored["restored"], "before-deploy");
    let auto = restored["auto_checkpoint"]
        .as_str()
        .expect("auto checkpoint");
    assert!(auto.starts_with("auto-"), "{restored}");
    assert_eq!(ok(&whip(d, None, &["leases"])).trim(), "no leases held");
    let trace = json(d, &["trace", &id, "--check"]);
    assert_eq!(trace["conformance"], "ok", "{trace}");
    let log = ok(&whip(d, None, &["log", &id]));
    assert!(log.contains("context.restored"), "{log}");
    // The instance continues from the cut: it takes the slot again.
    ok(&whip(d, None, &["worker", &id]));
    ok(&whip(d, None, &["worker", &id]));
    assert!(ok(&whip(d, None, &["leases"])).contains(&format!("held by {id}")));

    ok(&whip(d, None, &["cancel", &id]));
    let err = refused(d, &["checkpoint", &id]);
    assert!(
        err.contains("terminal instance cannot be checkpointed"),
        "{err}"
    );
    let err = refused(d, &["restore", &id, auto]);
    assert!(
        err.contains("terminal instance cannot be restored"),
        "{err}"
    );
}

#[test]
fn revise_reports_then_applies_and_refuses_another_root() {
    let dir = crate::workdir();
    let d = dir.path();
    let id = json(d, &["run", "deploys.whip"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ship = std::fs::read_to_string(d.join("deploys.whip")).unwrap();
    let v2 = ship.replace("note \"deployed\"", "note \"deployed (v2)\"");
    std::fs::write(d.join("deploys_v2.whip"), v2).unwrap();
    let dry = [
        "revise",
        &id,
        "deploys_v2.whip",
        "--root",
        "Ship",
        "--dry-run",
    ];
    let dry = json(d, &dry);
    assert_eq!(dry["compatible"], true, "{dry}");
    assert_eq!(dry["applied"], Value::Null);
    let applied = json(d, &["revise", &id, "deploys_v2.whip", "--cancel", "keep"]);
    assert_eq!(
        (applied["applied"].as_str(), applied["epoch"].as_u64()),
        (Some("keep"), Some(1))
    );
    assert_eq!(json(d, &["status", &id])["epoch"], 1);

    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/data/invoke.whip");
    std::fs::copy(data, d.join("invoke.whip")).unwrap();
    let other = [
        "revise",
        &id,
        "invoke.whip",
        "--root",
        "Parent",
        "--dry-run",
    ];
    let other = json(d, &other);
    assert_eq!(other["compatible"], false, "{other}");
    let reason = other["reasons"][0].as_str().unwrap();
    assert!(reason.contains("same root workflow"), "{reason}");
    let apply = [
        "revise",
        &id,
        "invoke.whip",
        "--root",
        "Parent",
        "--cancel",
        "keep",
    ];
    let err = refused(d, &apply);
    assert!(err.contains("revision refused"), "{err}");
}
