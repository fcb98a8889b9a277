//! Goal: three voters elect exactly one leader and every member reports it.
//! Method: start a redb cell, ask each member's status over gRPC.

use std::time::Duration;

use whip_cell::StorageKind;
use whip_tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_voters_agree_on_one_leader() {
    let cluster = Cluster::start(3, StorageKind::Redb).await;
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    for id in 1..=3 {
        let status = cluster
            .client_of(id)
            .member_status(0)
            .await
            .expect("status");
        assert_eq!(
            status.leader,
            Some(leader),
            "member {id} sees leader {:?}",
            status.leader
        );
        assert_eq!(status.members.len(), 3);
        assert!(status.members.iter().all(|m| m.voter));
        assert!(status.term >= 1);
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sled_cell_elects_and_serves() {
    let cluster = Cluster::start(3, StorageKind::Sled).await;
    let client = cluster.client();
    let written = client.kv_put(crate::put("k", "v")).await.expect("put");
    let read = client
        .kv_get(whip_proto::v1::KvGetRequest {
            key: b"k".to_vec(),
            ..Default::default()
        })
        .await
        .expect("get");
    assert!(read.found);
    assert_eq!(read.version, written.version);
    cluster.shutdown().await;
}
