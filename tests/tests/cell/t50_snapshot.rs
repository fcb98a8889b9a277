//! Goal: a voter that missed more than the kept log catches up by snapshot. Method: snapshot
//! every 50 entries; stop a follower; write 400 entries so the leader purges its log; start
//! the follower again and read its own state (local, no forwarding).

use std::time::Duration;

use whip_board::{Query, QueryResult};
use whip_cell::StorageKind;
use whip_tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lagging_voter_catches_up_by_snapshot() {
    let mut cluster =
        Cluster::start_with(3, StorageKind::Redb, |c| c.snapshot_after_entries = 50).await;
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    let lagging = (1..=3).find(|id| *id != leader).unwrap();
    cluster.kill(lagging).await;
    let client = cluster.client();
    for i in 0..400 {
        client
            .kv_put(crate::put(&format!("s{i}"), "x"))
            .await
            .unwrap();
    }
    let leader_status = cluster.client_of(leader).member_status(0).await.unwrap();
    cluster.start_member(lagging).await;
    let member = cluster.member(lagging).clone();
    cluster
        .wait_applied(lagging, leader_status.last_applied, Duration::from_secs(15))
        .await;
    let snapshot = member.raft().metrics().borrow().snapshot;
    assert!(snapshot.is_some(), "the voter caught up without a snapshot");
    assert!(
        cluster.data_dir(lagging).join("snapshot.bin").exists(),
        "snapshot not stored durably"
    );
    for i in [0, 199, 399] {
        let got = member
            .local_query(Query::KvGet {
                key: format!("s{i}").into_bytes(),
            })
            .await
            .unwrap();
        assert!(
            matches!(got, QueryResult::Kv(Some(_))),
            "s{i} missing on the caught-up voter"
        );
    }
    cluster.shutdown().await;
}
