//! Goal: a voter that fell behind a purged log catches up by snapshot even when the state
//! is large (over one default 3 MB chunk), so one chunk, or the final install, takes longer
//! than openraft's default 200 ms snapshot RPC timeout. Regression for RELIABILITY.md
//! finding 5 (seed 5): the leader retried the transfer forever and the voter never rejoined.
//! Method: snapshot every 50 entries; stop a follower; write ~12 MB through 16 concurrent
//! clients; restart the follower; wait until it applied the leader's log.

use std::sync::Arc;
use std::time::Duration;

use whip_cell::StorageKind;
use whip_tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lagging_voter_catches_up_from_a_large_snapshot() {
    let mut cluster =
        Cluster::start_with(3, StorageKind::Redb, |c| c.snapshot_after_entries = 50).await;
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    let lagging = (1..=3).find(|id| *id != leader).unwrap();
    cluster.kill(lagging).await;
    let client = Arc::new(cluster.client());
    let value = "x".repeat(8 * 1024);
    let mut writers = Vec::new();
    for w in 0..16 {
        let (client, value) = (client.clone(), value.clone());
        writers.push(tokio::spawn(async move {
            for i in 0..96 {
                client
                    .kv_put(crate::put(&format!("big/{w}/{i}"), &value))
                    .await
                    .unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let target = cluster
        .client_of(leader)
        .member_status(0)
        .await
        .unwrap()
        .last_applied;
    let snapshot = cluster.data_dir(leader).join("snapshot.bin");
    let bytes = std::fs::metadata(&snapshot).map(|m| m.len()).unwrap_or(0);
    // More than one of openraft's default 3 MB chunks; the newest snapshot may predate the
    // last writes, so ask for a third of what was written.
    assert!(
        bytes > 4 << 20,
        "state too small to exercise the transfer: {bytes} bytes"
    );
    cluster.start_member(lagging).await;
    cluster
        .wait_applied(lagging, target, Duration::from_secs(60))
        .await;
    cluster.shutdown().await;
}
