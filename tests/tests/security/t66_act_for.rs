//! Instances act as the principal that started them (issue 28, deliver 2). Agent ann starts
//! an instance with `whip --agent ann run`; the operator's worker drives it later, and the
//! message it sends is ann's, not the operator's. Acting for another agent is the
//! operator's alone: mallory's token naming ann in `x-whip-act-for`, an unproven caller
//! naming ann, and the operator naming a principal are refused, and nothing changed.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use crate::{anonymous, cli, registered, still_serving, target};

/// A program that waits one second, then tells bob (so the operator's worker, not the
/// `run` that started it, sends the message).
const HELLO: &str = r#"use std.coord
use std.messaging

workflow Hello

output result { text string }

channel bob { provider fabric to agent "bob" }

rule greet when started => {
  timer 1s as pause
  after pause completes {
    send via bob { text "hello from the instance" } as told
    after told succeeds {
      complete result { text "told" }
    }
    after told fails {
      complete result { text told.error }
    }
  }
}
"#;

fn json_ok(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn the_operators_worker_acts_as_the_instances_owner() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let cell = dev.member(0);
    let program = dir.path().join("hello.whip");
    std::fs::write(&program, HELLO).unwrap();
    // bob's mailbox exists once bob is registered (the CLI registers its agent).
    json_ok(&cli(
        dir.path(),
        &["--agent", "bob", "--json", "mail", "inbox", "--cell", &cell],
    ));
    let program = program.to_str().unwrap();
    let run = json_ok(&cli(
        dir.path(),
        &["--agent", "ann", "--json", "run", program, "--cell", &cell],
    ));
    assert_eq!(run["status"], "running", "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    // The operator's worker drives it until it ends (the timer first comes due).
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let out = cli(dir.path(), &["--json", "worker", &id, "--cell", &cell]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let status = json_ok(&cli(
            dir.path(),
            &["--json", "status", &id, "--cell", &cell],
        ));
        if status["status"] != "running" {
            break status;
        }
        assert!(Instant::now() < deadline, "still running: {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(status["owner"], "ann", "{status}");
    let inbox = json_ok(&cli(
        dir.path(),
        &["--agent", "bob", "--json", "mail", "inbox", "--cell", &cell],
    ));
    let messages = inbox.as_array().expect("an inbox is a list");
    assert_eq!(messages.len(), 1, "{inbox}");
    assert_eq!(
        messages[0]["from"], "ann",
        "the instance's owner sent it: {inbox}"
    );
    assert_eq!(messages[0]["text"], "hello from the instance");
    still_serving(&operator).await;
}

fn put(key: &str) -> pb::KvPutRequest {
    pb::KvPutRequest {
        key: key.as_bytes().to_vec(),
        value: b"forged".to_vec(),
        ..Default::default()
    }
}

fn refused(answer: Result<impl std::fmt::Debug, CellError>, code: &str) {
    match answer {
        Err(CellError::PermissionDenied(m) | CellError::Unauthenticated(m)) if m.contains(code) => {
        }
        other => panic!("expected {code}, got {other:?}"),
    }
}

#[tokio::test]
async fn only_the_operator_acts_for_another_agent() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (ann, _) = registered(&dev, &operator, "ann", false).await;
    let (mallory, _) = registered(&dev, &operator, "mallory", false).await;
    // ann's lease: what acting for her would reach.
    let lease = pb::LeaseAcquireRequest {
        lease: Some(pb::ResourceId {
            owner: "ann".into(),
            name: "deploy".into(),
            key: "prod".into(),
        }),
        holder: "ann-1".into(),
        slots: 1,
        ttl_ms: 600_000,
        ..Default::default()
    };
    ann.lease_acquire(lease).await.unwrap();
    // mallory's own token, naming ann.
    let forger = mallory.acting_for("ann");
    refused(forger.kv_put(put("ann-notes")).await, "not_authorized");
    let release = pb::LeaseReleaseAllRequest {
        holder: "ann-1".into(),
        ..Default::default()
    };
    refused(
        forger.lease_release_all(release.clone()).await,
        "not_authorized",
    );
    // No credential at all, naming ann.
    let stranger = CellClient::connect_with(&[dev.member(1)], &anonymous())
        .unwrap()
        .acting_for("ann");
    refused(stranger.kv_put(put("ann-notes")).await, "anonymous_refused");
    // The operator acts for agents, never for a principal or a look-alike of one.
    for principal in ["operator", "0perator", "server", "engine"] {
        let forged = operator.acting_for(principal);
        refused(
            forged.kv_put(put("principal-notes")).await,
            "not_authorized",
        );
    }
    // Nothing changed: no key written, ann's lease still held.
    for key in ["ann-notes", "principal-notes"] {
        let got = operator
            .kv_get(pb::KvGetRequest {
                key: key.as_bytes().to_vec(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(!got.found, "{key}: {got:?}");
    }
    let held = ann
        .lease_list(pb::LeaseListRequest::default())
        .await
        .unwrap();
    let holders = held.leases.iter().flat_map(|l| &l.holders);
    assert_eq!(
        holders.filter(|h| h.holder == "ann-1").count(),
        1,
        "{held:?}"
    );
    // The operator acting for ann is ann: her lease is hers to free.
    let released = operator.acting_for("ann").lease_release_all(release).await;
    assert!(released.is_ok(), "{released:?}");
    still_serving(&operator).await;
}
