//! Goal: `whip cell snapshot save` backs up a running cell without stopping its writes, and
//! `whip cell snapshot restore` + `whip cell serve --id 1` bring the state back as a new
//! one-voter cell. Method: 3 `whip cell serve` processes under a writer doing acknowledged
//! puts; save through the CLI mid-load; restore into a fresh data directory and serve it on
//! a new port. Every put acknowledged before the save started is in the snapshot (the save
//! reads after a barrier), every acknowledged put at or below the snapshot's revision is
//! there with its value and version, none above it is, a ledger survives, and new writes
//! get fences above every old one. A damaged snapshot file is refused and creates nothing.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_tests::{ProcessCluster, wait_for, whip_binary, whip_json};

/// A `whip cell serve` process, killed when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(addr: &str, data: &std::path::Path) -> Served {
    let child = Command::new(whip_binary())
        .args(["cell", "serve", "--id", "1", "--listen", addr, "--data"])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn whip cell serve");
    Served(child)
}

fn text(path: &std::path::Path) -> String {
    path.display().to_string()
}

/// Acknowledged puts `w<i>` = `v<i>`: (i, version), in acknowledgement order.
type Acked = Arc<Mutex<Vec<(u64, u64)>>>;

async fn writer(client: CellClient, acked: Acked, stop: Arc<AtomicBool>) {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let r = client
            .kv_put(crate::put(&format!("w{i}"), &format!("v{i}")))
            .await
            .expect("a put under load");
        acked.lock().unwrap().push((i, r.version));
        i += 1;
    }
}

async fn count_at_least(acked: &Acked, n: usize) {
    wait_for("acknowledged puts", Duration::from_secs(30), || async {
        acked.lock().unwrap().len() >= n
    })
    .await;
}

/// Save through the CLI (off the runtime's workers, so a writer goes on): its revision,
/// after checking the printed size and blake3 against the file.
async fn save_under_load(cluster: &ProcessCluster, file: &std::path::Path) -> u64 {
    let args: Vec<String> = ["cell", "snapshot", "save", &text(file), "--cell"]
        .iter()
        .map(|s| s.to_string())
        .chain([cluster.addrs.join(","), "--json".to_string()])
        .collect();
    let (ok, saved, err) = tokio::task::spawn_blocking(move || whip_json(&args))
        .await
        .unwrap();
    assert!(ok, "snapshot save: {err}");
    let revision = saved["revision"].as_u64().expect("revision");
    let bytes = saved["bytes"].as_u64().expect("bytes");
    assert_eq!(std::fs::metadata(file).unwrap().len(), bytes);
    let on_disk = blake3::hash(&std::fs::read(file).unwrap())
        .to_hex()
        .to_string();
    assert_eq!(saved["blake3"].as_str(), Some(on_disk.as_str()));
    revision
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_snapshot_under_load_restores_every_acknowledged_write() {
    whip_tests::init_tracing();
    let cluster = ProcessCluster::start(3).await;
    let client = cluster.client();
    for n in 0..5 {
        client
            .ledger_append(crate::append("p", n, ""))
            .await
            .expect("append");
    }
    let acked: Acked = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(writer(cluster.client(), acked.clone(), stop.clone()));
    count_at_least(&acked, 200).await;
    let before = acked.lock().unwrap().len();
    let file = cluster.dir.path().join("cell.snap");
    let revision = save_under_load(&cluster, &file).await;
    // Writes went on during the save, and after it.
    count_at_least(&acked, before + 100).await;
    stop.store(true, Ordering::Relaxed);
    writing.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked[..before].iter().all(|(_, v)| v >> 16 <= revision),
        "a put acknowledged before the save is above its revision {revision}"
    );
    let data = cluster.dir.path().join("restored");
    let args = [
        "cell",
        "snapshot",
        "restore",
        &text(&file),
        "--data",
        &text(&data),
        "--json",
    ];
    let (ok, restored, err) = whip_json(&args.map(String::from));
    assert!(ok, "restore: {err}");
    assert_eq!(restored["revision"].as_u64(), Some(revision));
    let addr = whip_tests::free_addrs(1)[0].to_string();
    let served = serve(&addr, &data);
    let fresh = CellClient::connect(std::slice::from_ref(&addr)).unwrap();
    check_restored(&fresh, &acked, revision).await;
    assert!(!data.join(whip_cell::backup::PENDING_FILE).exists());
    // A restart serves its own state, not the snapshot again.
    drop(served);
    let _served = serve(&addr, &data);
    wait_for("the restarted cell", Duration::from_secs(15), || async {
        let got = fresh
            .kv_get(pb::KvGetRequest {
                key: b"w0".to_vec(),
                ..Default::default()
            })
            .await;
        got.is_ok_and(|g| g.value == b"again")
    })
    .await;
}

/// The restored cell holds exactly the puts at or below `revision`, serves the ledger, and
/// stamps new writes above every old fence.
async fn check_restored(fresh: &CellClient, acked: &[(u64, u64)], revision: u64) {
    wait_for(
        "the restored cell to elect itself",
        Duration::from_secs(15),
        || async {
            let s = fresh.member_status(0).await;
            s.is_ok_and(|s| s.leader == Some(1))
        },
    )
    .await;
    let (mut kept, mut after) = (0, 0);
    for (i, version) in acked {
        let got = fresh
            .kv_get(pb::KvGetRequest {
                key: format!("w{i}").into_bytes(),
                ..Default::default()
            })
            .await
            .expect("read the restored cell");
        if version >> 16 <= revision {
            assert!(got.found, "w{i} (version {version}) lost");
            assert_eq!(got.value, format!("v{i}").into_bytes());
            assert_eq!(got.version, *version, "w{i} kept its version");
            kept += 1;
        } else {
            assert!(
                !got.found,
                "w{i} is above the snapshot's revision yet restored"
            );
            after += 1;
        }
    }
    assert!(kept >= 200 && after > 0, "kept {kept}, after {after}");
    assert_eq!(
        crate::entries(fresh, "p").await.len(),
        5,
        "the ledger survived"
    );
    // The restored cell forks at the snapshot: its fences pass every one the snapshot holds.
    let newest = acked
        .iter()
        .map(|(_, v)| *v)
        .filter(|v| v >> 16 <= revision)
        .max()
        .unwrap();
    let written = fresh.kv_put(crate::put("w0", "again")).await.unwrap();
    assert!(
        written.version > newest && written.version >> 16 > revision,
        "new version {} is not above the old ones ({newest}, revision {revision})",
        written.version
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_damaged_snapshot_is_refused_and_creates_nothing() {
    whip_tests::init_tracing();
    let cluster = ProcessCluster::start(1).await;
    let client = cluster.client();
    client.kv_put(crate::put("k", "v")).await.expect("put");
    let file = cluster.dir.path().join("cell.snap");
    save_under_load(&cluster, &file).await;
    let bytes = std::fs::read(&file).unwrap();
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x40;
    let damaged = [
        ("flipped", flipped, "checksum_mismatch"),
        ("truncated", bytes[..bytes.len() - 7].to_vec(), "truncated"),
        ("empty", Vec::new(), "not_a_snapshot"),
    ];
    for (name, content, code) in damaged {
        let path = cluster.dir.path().join(format!("{name}.snap"));
        std::fs::write(&path, content).unwrap();
        let data = cluster.dir.path().join(format!("data-{name}"));
        let args = [
            "cell",
            "snapshot",
            "restore",
            &text(&path),
            "--data",
            &text(&data),
        ];
        let (ok, answer, err) = whip_json(&args.map(String::from));
        assert!(!ok, "{name}: restore accepted a damaged file");
        assert!(err.contains(code), "{name}: {err}");
        assert!(answer.is_null(), "{name}: printed {answer}");
        assert!(!data.exists(), "{name}: {} was created", data.display());
    }
    let leftovers: Vec<_> = std::fs::read_dir(cluster.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("restoring"))
        .collect();
    assert!(leftovers.is_empty(), "staging left behind: {leftovers:?}");
    // A save never writes over a file.
    let args = [
        "cell",
        "snapshot",
        "save",
        &text(&file),
        "--cell",
        &cluster.addrs[0],
    ];
    let (ok, _, err) = whip_json(&args.map(String::from));
    assert!(!ok && err.contains("exists"), "{err}");
}
