//! Goal: any voter accepts any request; a read on one voter sees a write acknowledged by
//! another. Method: write through each follower, read through every other member.

use std::time::Duration;

use whip_cell::StorageKind;
use whip_proto::v1 as pb;
use whip_tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn write_to_follower_is_applied_and_visible_everywhere() {
    let cluster = Cluster::start(3, StorageKind::Redb).await;
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    for writer in (1..=3).filter(|id| *id != leader) {
        let key = format!("from-{writer}");
        let written = cluster
            .client_of(writer)
            .kv_put(crate::put(&key, "x"))
            .await
            .expect("put via follower");
        assert_eq!(written.code, pb::OutcomeCode::KvWritten as i32);
        for reader in 1..=3 {
            let got = cluster
                .client_of(reader)
                .kv_get(pb::KvGetRequest {
                    key: key.clone().into_bytes(),
                    ..Default::default()
                })
                .await
                .expect("get");
            assert!(
                got.found,
                "member {reader} does not see the write acknowledged by {writer}"
            );
            assert_eq!(got.version, written.version);
        }
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cas_refuses_a_stale_version() {
    let cluster = Cluster::start(3, StorageKind::Redb).await;
    let client = cluster.client();
    let first = client
        .kv_put(pb::KvPutRequest {
            expect_version: Some(0),
            ..crate::put("cas", "1")
        })
        .await
        .unwrap();
    assert_eq!(first.code, pb::OutcomeCode::KvWritten as i32);
    let again = client
        .kv_put(pb::KvPutRequest {
            expect_version: Some(0),
            ..crate::put("cas", "2")
        })
        .await
        .unwrap();
    assert_eq!(again.code, pb::OutcomeCode::KvVersionMismatch as i32);
    assert_eq!(again.current_version, first.version);
    let next = client
        .kv_put(pb::KvPutRequest {
            expect_version: Some(first.version),
            ..crate::put("cas", "3")
        })
        .await
        .unwrap();
    assert_eq!(next.code, pb::OutcomeCode::KvWritten as i32);
    assert!(
        next.fence > first.fence,
        "fences grow: {} then {}",
        first.fence,
        next.fence
    );
    cluster.shutdown().await;
}
