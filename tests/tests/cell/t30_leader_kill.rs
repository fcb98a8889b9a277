//! Goal: killing the leader under load loses no acknowledged write, and a new leader serves
//! within 2 s. Method: 8 writers append to a ledger; the leader member is stopped mid-run;
//! afterwards every acknowledged sequence number must be in the ledger with its entry.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use whip_cell::StorageKind;
use whip_tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_kill_under_load_loses_nothing() {
    let mut cluster = Cluster::start(3, StorageKind::Redb).await;
    let old = cluster.wait_leader(Duration::from_secs(5)).await;
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let survivors: Vec<String> = (1..=3)
        .filter(|id| *id != old)
        .map(|id| cluster.addrs[&id].to_string())
        .collect();
    let mut writers = Vec::new();
    for w in 0..8u64 {
        // Writers start on all members; after the kill their client rotates to survivors.
        let mut addrs = cluster.running_addrs();
        addrs.extend(survivors.clone());
        let client = whip_cell::CellClient::connect(&addrs).unwrap();
        let (acked, stop) = (acked.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let value = w * 1_000_000 + n;
                if let Ok(r) = client.ledger_append(crate::append("load", value, "")).await {
                    acked.lock().await.push((r.seq, value));
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let before_kill = acked.lock().await.len();
    assert!(before_kill > 0, "no write was acknowledged before the kill");
    let killed_at = Instant::now();
    cluster.kill(old).await;
    let new = cluster.wait_leader(Duration::from_secs(5)).await;
    assert_ne!(new, old);
    // The first write acknowledged after the kill bounds the unavailability.
    let probe = cluster.client();
    probe
        .kv_put(crate::put("after-kill", "1"))
        .await
        .expect("write after the kill");
    let unavailable = killed_at.elapsed();
    assert!(
        unavailable < Duration::from_secs(2),
        "new leader served after {unavailable:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().await.clone();
    let stored = crate::entries(&cluster.client(), "load").await;
    let by_seq: std::collections::HashMap<u64, String> = stored
        .iter()
        .map(|e| (e.seq, String::from_utf8_lossy(&e.entry).to_string()))
        .collect();
    for (seq, value) in &acked {
        let entry = by_seq
            .get(seq)
            .unwrap_or_else(|| panic!("acknowledged seq {seq} is lost"));
        assert_eq!(
            entry,
            &format!("{{\"n\":{value}}}"),
            "seq {seq} holds another entry"
        );
    }
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=stored.len() as u64).collect::<Vec<_>>(),
        "ledger has a gap"
    );
    assert!(
        acked.len() > before_kill,
        "no write was acknowledged after the kill"
    );
    cluster.shutdown().await;
}
