//! Processes: three `whip node serve --log node` (`WHIP_NODE_LOG=node`: one group-committed
//! log per node for the five cells it hosts) and `whip fabric init` with four data cells;
//! eight writers busy on keys spread over the ring; SIGKILL of every node at once, a power cut in
//! the middle of the load. After the restart every acknowledged write of every cell reads
//! back, and each node keeps one log, not one per cell.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_tests::fabric::ProcessFabric;
use whip_tests::wait_for;

const WRITERS: usize = 8;
/// Acknowledged writes before the power cut.
const ACKED_BEFORE_CUT: usize = 400;

/// Write distinct keys until `stop`; each acknowledged key goes into `acked`.
async fn writer(
    client: Arc<CellClient>,
    w: usize,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<String>>>,
) {
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let key = format!("w{w}-{i}");
        let put = pb::KvPutRequest {
            key: key.as_bytes().to_vec(),
            value: b"v".to_vec(),
            expect_version: Some(0),
            ..Default::default()
        };
        match client.kv_put(put).await {
            Ok(_) => acked.lock().expect("acked").push(key),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
        i += 1;
    }
}

/// Read `key`, retrying transient errors while the restarted cells elect.
async fn read_back(client: &CellClient, key: &str) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let get = pb::KvGetRequest {
            key: key.as_bytes().to_vec(),
            ..Default::default()
        };
        match client.kv_get(get).await {
            Ok(found) => return found.found,
            Err(e) if tokio::time::Instant::now() >= deadline => panic!("get {key}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_power_cut_under_load_loses_no_acknowledged_write_of_any_cell() {
    let mut fabric = ProcessFabric::start_with_env(3, &[("WHIP_NODE_LOG", "node")]).await;
    fabric.init(4);
    let client = Arc::new(CellClient::connect(&fabric.addrs).expect("client"));
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(writer(client.clone(), w, stop.clone(), acked.clone())))
        .collect();
    let counted = acked.clone();
    wait_for("writes under load", Duration::from_secs(120), || {
        let counted = counted.clone();
        async move { counted.lock().expect("acked").len() >= ACKED_BEFORE_CUT }
    })
    .await;
    for id in 1..=3 {
        fabric.kill(id);
    }
    stop.store(true, Ordering::SeqCst);
    for handle in writers {
        handle.await.expect("writer");
    }
    let acked: Vec<String> = acked.lock().expect("acked").clone();
    for id in 1..=3 {
        let data = fabric.dir.path().join(format!("node-{id}"));
        assert!(data.join("node-log").is_dir(), "node {id} keeps one log");
        for cell in std::fs::read_dir(data.join("cells"))
            .expect("cells")
            .flatten()
        {
            let dir = cell.path();
            assert!(
                !dir.join("log").exists(),
                "{} has no log of its own",
                dir.display()
            );
            assert!(dir.join("log.node").exists(), "{} is marked", dir.display());
        }
    }
    for id in 1..=3 {
        fabric.spawn(id);
    }
    let client = CellClient::connect(&fabric.addrs).expect("client");
    let mut lost = Vec::new();
    for key in &acked {
        if !read_back(&client, key).await {
            lost.push(key.clone());
        }
    }
    assert!(
        lost.is_empty(),
        "lost {} of {}: {lost:?}",
        lost.len(),
        acked.len()
    );
}
