//! Identity and the fabric's key registry are not KV rows a client reaches, and the data on
//! disk is the user's alone.

use std::os::unix::fs::PermissionsExt;

use crate::{still_serving, target, whip};

#[tokio::test]
async fn reserved_keys_are_refused_and_hidden_from_scans() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    let cell = dev.member(0);
    // A board call registers the CLI's agent: its row exists from now on.
    let out = whip(dir.path(), &["team", "create", "web", "--cell", &cell]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for args in [
        vec!["kv", "put", "agents/{mallory}", "X", "--cell", &cell],
        vec!["kv", "get", "fabric/map", "--cell", &cell],
        vec!["kv", "del", "agents/{cli-root}", "--cell", &cell],
    ] {
        let out = whip(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("reserved"), "{args:?}: {stderr}");
    }
    let rows = client
        .kv_range(whip_proto::v1::KvRangeRequest {
            prefix: Vec::new(),
            after_key: Vec::new(),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!rows.entries.is_empty(), "the canary is listed");
    for row in &rows.entries {
        assert!(
            !row.key.starts_with(b"agents/") && !row.key.starts_with(b"fabric/"),
            "a scan shows reserved row {:?}",
            String::from_utf8_lossy(&row.key)
        );
    }
    still_serving(&client).await;
}

#[tokio::test]
async fn data_files_have_no_group_or_other_bits() {
    let dir = tempfile::tempdir().unwrap();
    let (_dev, client) = target(dir.path()).await;
    still_serving(&client).await;
    let mut seen = 0;
    let mut stack = vec![dir.path().join("dev")];
    while let Some(path) = stack.pop() {
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o077,
            0,
            "{} is {:o}",
            path.display(),
            meta.permissions().mode()
        );
        seen += 1;
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(
        seen > 6,
        "the voters' directories, logs, state and credentials"
    );
}
