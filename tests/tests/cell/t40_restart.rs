//! Goal: restarting every voter keeps all state. Method: write keys, a lease, a counter and
//! a ledger; stop all three members; start them from their data directories; read back.

use std::time::Duration;

use whip_cell::StorageKind;
use whip_proto::v1 as pb;
use whip_tests::Cluster;

async fn restart_all_keeps_state(storage: StorageKind) {
    let mut cluster = Cluster::start(3, storage).await;
    let client = cluster.client();
    let mut versions = Vec::new();
    for i in 0..20 {
        versions.push(
            client
                .kv_put(crate::put(&format!("k{i}"), &format!("v{i}")))
                .await
                .unwrap()
                .version,
        );
    }
    let lease = Some(pb::ResourceId {
        owner: "t".into(),
        name: "deploy".into(),
        key: "prod".into(),
    });
    let held = client
        .lease_acquire(pb::LeaseAcquireRequest {
            lease: lease.clone(),
            holder: "a".into(),
            slots: 1,
            ttl_ms: 600_000,
            ..Default::default()
        })
        .await
        .unwrap();
    client
        .ledger_append(crate::append("r", 1, ""))
        .await
        .unwrap();
    for id in 1..=3 {
        cluster.kill(id).await;
    }
    for id in 1..=3 {
        cluster.start_member(id).await;
    }
    cluster.wait_leader(Duration::from_secs(10)).await;
    let client = cluster.client();
    for (i, version) in versions.iter().enumerate() {
        let key = format!("k{i}").into_bytes();
        let get = pb::KvGetRequest {
            key,
            ..Default::default()
        };
        let got = client.kv_get(get).await.unwrap();
        assert!(got.found, "k{i} lost across restart");
        assert_eq!(
            (got.value, got.version),
            (format!("v{i}").into_bytes(), *version)
        );
    }
    let other = client
        .lease_acquire(pb::LeaseAcquireRequest {
            lease,
            holder: "b".into(),
            slots: 1,
            ttl_ms: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        other.code,
        pb::OutcomeCode::LeaseContended as i32,
        "lease forgotten across restart"
    );
    assert_eq!(other.holders[0].fence, held.fence);
    assert_eq!(crate::entries(&client, "r").await.len(), 1);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_every_voter_redb() {
    restart_all_keeps_state(StorageKind::Redb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_every_voter_sled() {
    restart_all_keeps_state(StorageKind::Sled).await;
}
