//! Goal: a retried command with the same idempotency key after a leader change returns the
//! first outcome and applies once. Method: append with key K, kill the leader, append with
//! K again through a survivor: same sequence, one entry.

use std::time::Duration;

use whip_cell::StorageKind;
use whip_proto::v1 as pb;
use whip_tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retry_after_leader_change_applies_once() {
    let mut cluster = Cluster::start(3, StorageKind::Redb).await;
    let first = cluster
        .client()
        .ledger_append(crate::append("idem", 1, "job-42"))
        .await
        .unwrap();
    let counter = pb::CounterConsumeRequest {
        counter: Some(pb::ResourceId {
            owner: "t".into(),
            name: "tokens".into(),
            key: "core".into(),
        }),
        amount: 60,
        cap: 100,
        reset: pb::Reset::Daily as i32,
        timezone: "America/New_York".into(),
        idempotency_key: "charge-7".into(),
    };
    let charged = cluster
        .client()
        .counter_consume(counter.clone())
        .await
        .unwrap();
    assert_eq!(charged.code, pb::OutcomeCode::CounterOk as i32);
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    cluster.kill(leader).await;
    cluster.wait_leader(Duration::from_secs(5)).await;
    let client = cluster.client();
    let retried = client
        .ledger_append(crate::append("idem", 1, "job-42"))
        .await
        .unwrap();
    assert_eq!(
        retried.seq, first.seq,
        "retry answered with a different outcome"
    );
    assert_eq!(
        crate::entries(&client, "idem").await.len(),
        1,
        "retry applied twice"
    );
    let recharged = client.counter_consume(counter).await.unwrap();
    assert_eq!(recharged, charged, "retried consume charged again");
    cluster.shutdown().await;
}
