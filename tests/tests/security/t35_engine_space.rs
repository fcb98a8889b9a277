//! A workflow instance as another agent reaches for it (issue 28, class 1 and 2): agent ann
//! starts an instance with `whip --agent ann run`; mallory, a registered agent in no team,
//! then tries every way in that got in before: client KV over `e/…` (read, rewrite an
//! effect's arguments, delete the sequence key), the engine's own space with her token
//! (scan, rewrite, delete, forge the owner row), and the CLI's instance commands. Each is
//! refused with its typed code, and the instance reads back unchanged; ann (its owner) and
//! the operator still operate it.

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use crate::{anonymous, cli, still_serving, target};

fn json_of(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn refused_with(out: &Output, code: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(code), "expected {code}: {stderr}");
}

fn denied(answer: Result<impl std::fmt::Debug, CellError>, code: &str) {
    match answer {
        Err(CellError::PermissionDenied(m)) if m.starts_with(code) => {}
        other => panic!("expected {code}, got {other:?}"),
    }
}

fn engine_txn(puts: &[(&str, &str)], deletes: &[&str]) -> pb::KvTxnRequest {
    pb::KvTxnRequest {
        puts: puts
            .iter()
            .map(|(k, v)| pb::KvPair {
                key: k.as_bytes().to_vec(),
                value: v.as_bytes().to_vec(),
            })
            .collect(),
        deletes: deletes.iter().map(|k| k.as_bytes().to_vec()).collect(),
        space: pb::KeySpace::Engine as i32,
        ..Default::default()
    }
}

fn scan(prefix: &str, space: pb::KeySpace) -> pb::KvRangeRequest {
    pb::KvRangeRequest {
        prefix: prefix.as_bytes().to_vec(),
        space: space as i32,
        ..Default::default()
    }
}

/// ann's instance of the lease seed: it holds the slot through a timer, so it stays
/// `running` for the whole test.
fn start_as_ann(dir: &Path, cell: &str) -> String {
    let program = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../engine/tests/check/valid/seed_lease_ship.whip");
    let program = program.to_str().unwrap();
    let out = cli(
        dir,
        &["--agent", "ann", "--json", "run", program, "--cell", cell],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = json_of(&out);
    assert_eq!(run["status"], "running", "{run}");
    run["id"].as_str().unwrap().to_string()
}

fn status(dir: &Path, cell: &str, id: &str) -> Value {
    let out = cli(dir, &["--json", "status", id, "--cell", cell]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

#[tokio::test]
async fn another_agent_cannot_read_rewrite_or_operate_an_instance() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let cell = dev.member(0);
    let id = start_as_ann(dir.path(), &cell);
    let before = status(dir.path(), &cell, &id);
    assert_eq!(before["owner"], "ann", "{before}");
    cli_attacks(dir.path(), &cell, &id);
    // Her raw client carries the token the CLI registered her with.
    let tokens: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("credentials.json")).unwrap())
            .unwrap();
    let token = tokens["mallory"].as_str().unwrap();
    let mallory = CellClient::connect_with(&[dev.member(1)], &anonymous())
        .unwrap()
        .with_identity("mallory", token);
    client_key_attacks(&mallory, &id).await;
    engine_space_attacks(&mallory, &id).await;
    // Nothing changed: the same state, events and owner.
    assert_eq!(status(dir.path(), &cell, &id), before);
    still_serving(&operator).await;
    // The owner still operates it.
    let out = cli(
        dir.path(),
        &["--agent", "ann", "cancel", &id, "--cell", &cell],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(status(dir.path(), &cell, &id)["status"], "cancelled");
}

/// The CLI as another agent: every instance command is refused, and its listing is empty.
fn cli_attacks(dir: &Path, cell: &str, id: &str) {
    for command in ["cancel", "pause", "status", "effects", "log"] {
        let out = cli(dir, &["--agent", "mallory", command, id, "--cell", cell]);
        refused_with(&out, "not_authorized");
    }
    let out = cli(
        dir,
        &["--agent", "mallory", "--json", "instances", "--cell", cell],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(id));
    // Client keys spelled like engine rows or server-made keys are reserved.
    let row = format!("e/{{{id}}}/s/h");
    for args in [
        vec!["kv", "get", row.as_str(), "--cell", cell],
        vec!["kv", "put", "program/pv_1/0", "x", "--cell", cell],
        vec!["kv", "put", "p/pv_1", "x", "--cell", cell],
    ] {
        refused_with(&cli(dir, &args), "reserved");
    }
}

/// Client KV: engine rows are not client keys, and their spellings are refused.
async fn client_key_attacks(mallory: &CellClient, id: &str) {
    denied(
        mallory.kv_range(scan("e/", pb::KeySpace::Client)).await,
        "reserved",
    );
    let everything = mallory
        .kv_range(scan("", pb::KeySpace::Client))
        .await
        .unwrap();
    assert!(
        everything.entries.iter().all(|e| !e.key.contains(&b'{')),
        "no instance row is a client key"
    );
    let effect = format!("e/{{{id}}}/s/x/x000001");
    let put = pb::KvPutRequest {
        key: effect.into_bytes(),
        value: br#"{"argv":["sh","-c","id"]}"#.to_vec(),
        ..Default::default()
    };
    denied(mallory.kv_put(put).await, "reserved");
}

/// The engine's space with another agent's token: reads and writes of the instance are
/// refused, listings leave it out, the owner row is nobody's to write.
async fn engine_space_attacks(mallory: &CellClient, id: &str) {
    let rows = format!("e/{{{id}}}/");
    denied(
        mallory.kv_range(scan(&rows, pb::KeySpace::Engine)).await,
        "not_authorized",
    );
    let index = mallory
        .kv_range(scan("i/", pb::KeySpace::Engine))
        .await
        .unwrap();
    assert!(index.entries.is_empty(), "{:?}", index.entries);
    let header = pb::KvGetRequest {
        key: format!("e/{{{id}}}/s/h").into_bytes(),
        space: pb::KeySpace::Engine as i32,
    };
    denied(mallory.kv_get(header).await, "not_authorized");
    let effect = format!("e/{{{id}}}/s/x/x000001");
    let rewrite = engine_txn(&[(&effect, r#"{"argv":["sh"]}"#)], &[]);
    denied(mallory.kv_txn(rewrite).await, "not_authorized");
    let sequence = format!("e/{{{id}}}/s/q");
    denied(
        mallory.kv_txn(engine_txn(&[], &[&sequence])).await,
        "not_authorized",
    );
    let owner = format!("o/{{{id}}}");
    let forged = mallory
        .kv_txn(engine_txn(&[(&owner, "mallory")], &[]))
        .await;
    assert!(
        matches!(forged, Err(CellError::InvalidArgument(_))),
        "{forged:?}"
    );
}
