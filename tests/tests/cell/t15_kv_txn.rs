//! Goal: a multi-key `KvTxn` applies all or nothing through any member, and a prefix
//! `KvRange` reads one prefix in key order. Method: commit a txn through a follower, then
//! race two txns guarded by the same version (one wins), then page through a range.

use std::time::Duration;

use whip_cell::StorageKind;
use whip_proto::v1 as pb;
use whip_tests::Cluster;

fn txn(compares: &[(&str, u64)], puts: &[(&str, &str)], deletes: &[&str]) -> pb::KvTxnRequest {
    pb::KvTxnRequest {
        compares: compares
            .iter()
            .map(|(k, v)| pb::KvCompare {
                key: k.as_bytes().to_vec(),
                expect_version: *v,
            })
            .collect(),
        puts: puts
            .iter()
            .map(|(k, v)| pb::KvPair {
                key: k.as_bytes().to_vec(),
                value: v.as_bytes().to_vec(),
            })
            .collect(),
        deletes: deletes.iter().map(|k| k.as_bytes().to_vec()).collect(),
        idempotency_key: String::new(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kv_txn_is_atomic_and_guarded() {
    let cluster = Cluster::start(3, StorageKind::Redb).await;
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    let follower = cluster.running().into_iter().find(|id| *id != leader);
    let client = cluster.client_of(follower.expect("a follower"));
    let first = client
        .kv_txn(txn(
            &[("x/1/seq", 0)],
            &[("x/1/seq", "1"), ("x/1/f/1", "x")],
            &[],
        ))
        .await
        .unwrap();
    assert_eq!(first.code, pb::OutcomeCode::KvTxnCommitted as i32);
    let version = first.fence;
    // Two writers guarded by the same version: exactly one commits.
    let a = client.kv_txn(txn(&[("x/1/seq", version)], &[("x/1/seq", "2a")], &[]));
    let b = client.kv_txn(txn(
        &[("x/1/seq", version)],
        &[("x/1/seq", "2b")],
        &["x/1/f/1"],
    ));
    let (a, b) = tokio::join!(a, b);
    let (a, b) = (a.unwrap(), b.unwrap());
    let committed = [&a, &b]
        .iter()
        .filter(|r| r.code == pb::OutcomeCode::KvTxnCommitted as i32)
        .count();
    assert_eq!(committed, 1, "{a:?} {b:?}");
    let failed = if a.code == pb::OutcomeCode::KvTxnFailed as i32 {
        &a
    } else {
        &b
    };
    assert_eq!(failed.failed_key, b"x/1/seq".to_vec());
    assert!(failed.current_version > version);
    let range = |after: &str, limit| pb::KvRangeRequest {
        prefix: b"x/1/".to_vec(),
        after_key: after.as_bytes().to_vec(),
        limit,
        ..Default::default()
    };
    let rows = client.kv_range(range("", 0)).await.unwrap().entries;
    let keys: Vec<String> = rows
        .iter()
        .map(|e| String::from_utf8_lossy(&e.key).to_string())
        .collect();
    // The winner decides whether the fact survived.
    if b.code == pb::OutcomeCode::KvTxnCommitted as i32 {
        assert_eq!(keys, vec!["x/1/seq"]);
    } else {
        assert_eq!(keys, vec!["x/1/f/1", "x/1/seq"]);
        let page = client.kv_range(range("x/1/f/1", 1)).await.unwrap().entries;
        assert_eq!(page.len(), 1);
        assert_eq!(page[0].key, b"x/1/seq".to_vec());
    }
    let bad = client
        .kv_txn(txn(&[], &[("k", "1")], &["k"]))
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("puts and deletes"), "{bad}");
    cluster.shutdown().await;
}
