//! Goal: trackers of the builtin provider behave as users work them from the shell: a rule
//! files an issue, a person claims and finishes it with `whip issue`, and the rule that
//! waits on `issue.closed` completes the instance; racing claimants get exactly one win; a
//! stale fence or a foreign claimant cannot finish.
//! Method: each command is its own `whip` process on one embedded store.

use std::path::Path;
use std::process::Stdio;

use crate::{bin, ok, run_id, whip};

fn data(dir: &Path, name: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/data");
    std::fs::copy(src.join(name), dir.join(name)).unwrap();
}

fn refused(out: &std::process::Output, words: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "expected exit 1: {stderr}");
    assert!(stderr.contains(words), "expected `{words}` in: {stderr}");
}

#[test]
fn an_issue_filed_by_a_rule_is_worked_from_the_cli_and_the_rule_reacts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    data(d, "handoff.whip");
    let id = run_id(&ok(&whip(d, None, &["run", "handoff.whip"])));
    let ready = ok(&whip(d, None, &["issue", "ready"]));
    let rows: Vec<String> = whip_tests::table::rows(&ready)
        .iter()
        .map(|r| {
            ["ID", "STATUS", "TRACKER", "TITLE"]
                .map(|c| r[c].clone())
                .join(" ")
        })
        .collect();
    assert_eq!(
        rows,
        ["WS-1 open local/Handoff::backlog Rotate the API keys"],
        "{ready}"
    );
    let claim = ok(&whip(d, None, &["issue", "claim", "WS-1", "--as", "alice"]));
    let fence = claim
        .strip_prefix("WS-1 claimed by alice fence=")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{claim}"))
        .to_string();
    assert!(claim.contains(" (expires "), "{claim}");
    assert_eq!(ok(&whip(d, None, &["issue", "ready"])), "no ready issues\n");

    let foreign = whip(d, None, &["issue", "finish", "WS-1", "--as", "bob"]);
    refused(&foreign, "issue WS-1 is claimed by alice, not by bob");
    let stale = ["issue", "finish", "WS-1", "--as", "alice", "--fence", "0"];
    refused(
        &whip(d, None, &stale),
        &format!("fence 0 is stale, current is {fence}"),
    );
    refused(
        &whip(d, None, &["issue", "show", "WS-9"]),
        "unknown issue WS-9",
    );
    let shown = ok(&whip(d, None, &["issue", "show", "WS-1"]));
    assert!(
        shown.starts_with("WS-1 in_progress "),
        "nothing changed: {shown}"
    );

    let finish = [
        "issue", "finish", "WS-1", "--as", "alice", "--fence", &fence,
    ];
    assert_eq!(ok(&whip(d, None, &finish)), "WS-1 closed by alice\n");
    ok(&whip(d, None, &["worker", &id]));
    let status = ok(&whip(d, None, &["status", &id]));
    assert!(status.contains(" completed "), "{status}");
    assert!(
        status.contains(r#"result={"note":"closed WS-1"}"#),
        "{status}"
    );

    let json = ok(&whip(d, None, &["--json", "issue", "list"]));
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(rows[0]["status"], "closed");
    assert_eq!(rows[0]["closed_by"], "alice");
}

#[test]
fn two_claimants_race_for_one_issue_and_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No program declared `backlog` here: filing needs an owner, or it would land where no
    // workflow looks.
    let bare = whip(d, None, &["issue", "new", "backlog", "--title", "lost"]);
    assert_eq!(bare.status.code(), Some(1));
    let hint = String::from_utf8_lossy(&bare.stderr);
    assert!(
        hint.contains("no program has declared tracker `backlog`"),
        "{hint}"
    );
    let new = [
        "issue", "new", "backlog", "--title", "race me", "--owner", "shared",
    ];
    assert_eq!(ok(&whip(d, None, &new)), "WS-1 filed into backlog\n");
    let children: Vec<_> = ["alice", "bob"]
        .iter()
        .map(|who| {
            std::process::Command::new(bin())
                .current_dir(d)
                .args(["issue", "claim", "WS-1", "--as", who])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let wins = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(wins, 1, "{outs:?}");
    let loser = outs.iter().find(|o| !o.status.success()).unwrap();
    refused(loser, "issue WS-1 is already claimed by");
    let shown = ok(&whip(d, None, &["issue", "list"]));
    let rows = whip_tests::table::rows(&shown);
    assert!(
        rows[0]["STATUS"] == "in_progress" && rows[0]["FENCE"].parse::<u64>().is_ok(),
        "{shown}"
    );
}
