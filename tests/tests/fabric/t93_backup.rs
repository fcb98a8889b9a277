//! Processes: a 3-node × 2-cell fabric (`whip node serve`, `whip fabric init`) under a
//! writer; `whip fabric backup` saves the meta cell and both data cells with a manifest;
//! three new nodes on other ports and directories (the old fabric still running) become a
//! new fabric by `whip fabric restore`, and every key acknowledged before the backup is
//! read back with its value and version through `--cell` of each new node. New writes get
//! versions above the old ones.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_tests::fabric::ProcessFabric;
use whip_tests::{wait_for, whip_json as whip};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Puts `k<i>` = `v<i>` until `stop`: (i, version) of each acknowledged one.
async fn writer(client: CellClient, acked: Arc<Mutex<Vec<(u64, u64)>>>, stop: Arc<AtomicBool>) {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let r = crate::put(&client, &format!("k{i}"), &format!("v{i}"), None).await;
        acked.lock().unwrap().push((i, r.version));
        i += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fabric_backup_restores_into_new_nodes() {
    let old = ProcessFabric::start(3).await;
    let mut init = args(&[
        "fabric",
        "init",
        "--cells",
        "2",
        "--cell",
        &old.addrs[0],
        "--json",
    ]);
    init.extend(old.node_args());
    let (ok, _, err) = whip(&init);
    assert!(ok, "fabric init: {err}");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let client = CellClient::connect(&old.addrs).unwrap();
    let writing = tokio::spawn(writer(client, acked.clone(), stop.clone()));
    wait_for(
        "puts before the backup",
        Duration::from_secs(30),
        || async { acked.lock().unwrap().len() >= 100 },
    )
    .await;
    let before: Vec<(u64, u64)> = acked.lock().unwrap().clone();
    let dir = old.dir.path().join("backup");
    let backup = args(&[
        "fabric",
        "backup",
        &dir.display().to_string(),
        "--cell",
        &old.addrs[1],
        "--json",
    ]);
    let (ok, saved, err) = tokio::task::spawn_blocking(move || whip(&backup))
        .await
        .unwrap();
    assert!(ok, "fabric backup: {err}");
    let during = acked.lock().unwrap().len();
    stop.store(true, Ordering::Relaxed);
    writing.await.unwrap();
    assert!(during > before.len(), "writes went on during the backup");
    let cells = saved["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 3, "the meta cell and two data cells: {saved}");
    check_manifest(&dir);

    let new = ProcessFabric::start(3).await;
    let mut restore = args(&["fabric", "restore", &dir.display().to_string(), "--json"]);
    restore.extend(new.node_args());
    let (ok, status, err) = tokio::task::spawn_blocking(move || whip(&restore))
        .await
        .unwrap();
    assert!(ok, "fabric restore: {err}");
    let addrs: Vec<&str> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["addr"].as_str().unwrap())
        .collect();
    assert_eq!(addrs, new.addrs, "the restored map names the new nodes");
    check_keys(&new, &before).await;
}

/// Every file the manifest in `dir` names hashes to the blake3 it records.
fn check_manifest(dir: &std::path::Path) {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    for cell in manifest["cells"].as_array().unwrap() {
        let file = dir.join(cell["file"].as_str().unwrap());
        let hash = blake3::hash(&std::fs::read(&file).unwrap())
            .to_hex()
            .to_string();
        assert_eq!(
            cell["blake3"].as_str(),
            Some(hash.as_str()),
            "{}",
            file.display()
        );
    }
}

/// Through each new node alone: every key in `before` with its value and version; then a
/// new write above the old version.
async fn check_keys(new: &ProcessFabric, before: &[(u64, u64)]) {
    for addr in &new.addrs {
        let client = CellClient::connect(std::slice::from_ref(addr)).unwrap();
        for (i, version) in before {
            let got = client
                .kv_get(pb::KvGetRequest {
                    key: format!("k{i}").into_bytes(),
                    ..Default::default()
                })
                .await
                .unwrap_or_else(|e| panic!("k{i} through {addr}: {e}"));
            assert!(got.found, "k{i} lost (through {addr})");
            assert_eq!(got.value, format!("v{i}").into_bytes());
            assert_eq!(got.version, *version, "k{i} kept its version");
        }
    }
    let client = CellClient::connect(&new.addrs).unwrap();
    let (i, version) = before[0];
    let again = crate::put(&client, &format!("k{i}"), "again", Some(version)).await;
    assert!(again.version > version, "{} after {version}", again.version);
}
