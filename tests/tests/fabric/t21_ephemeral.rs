//! Ephemeral keys and `KvTxnIf` through a fabric node (issue 30): a key with its own
//! deadline is deleted by its owning cell's tick, a keepalive reaches that cell, a
//! transaction runs its branch on the keys' cell, and a key attached to a lease on
//! another cell is refused with a typed error before anything is written.

use std::time::{Duration, Instant};

use whip_board::route;
use whip_cell::CellError;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_tests::fabric::Fabric;

use crate::get;

fn ttl_put(key: &str, ttl_ms: u64) -> pb::KvPutRequest {
    pb::KvPutRequest {
        key: key.as_bytes().to_vec(),
        value: b"up".to_vec(),
        ttl_ms,
        ..Default::default()
    }
}

/// Put `cfg/{app}/a` if it is at `version`, else read `cfg/{app}/b`.
fn txn(version: u64) -> pb::KvTxnIfRequest {
    pb::KvTxnIfRequest {
        compares: vec![pb::KvTxnCompare {
            key: b"cfg/{app}/a".to_vec(),
            op: pb::KvCompareOp::KvCompareEqual as i32,
            target: Some(pb::kv_txn_compare::Target::Version(version)),
        }],
        success: vec![pb::KvTxnOp {
            op: Some(pb::kv_txn_op::Op::Put(pb::KvPair {
                key: b"cfg/{app}/a".to_vec(),
                value: b"1".to_vec(),
            })),
        }],
        failure: vec![pb::KvTxnOp {
            op: Some(pb::kv_txn_op::Op::Get(b"cfg/{app}/b".to_vec())),
        }],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ttl_keys_keepalive_and_transactions_route_to_the_owning_cell() {
    let fabric = Fabric::start(3, 4).await;
    let map = fabric.node(1).map().await.expect("map");
    let client = fabric.client_of(2);
    let (short, kept) = ("eph/short", "eph/kept");
    let cells = [short, kept].map(|k| map.locate(route::kv_point(k.as_bytes())).cell);
    for key in [short, kept] {
        let put = client.kv_put(ttl_put(key, 1_500)).await.expect("put");
        assert_eq!(put.code, Code::KvWritten as i32, "{put:?}");
    }
    let keep = pb::KvKeepaliveRequest {
        key: kept.as_bytes().to_vec(),
        ttl_ms: 120_000,
        ..Default::default()
    };
    let alive = client.kv_keepalive(keep).await.expect("keepalive");
    assert_eq!(alive.code, Code::KvKeptAlive as i32, "{alive:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(&client, short).await.is_some() {
        assert!(
            Instant::now() < deadline,
            "{short} (cell {}) never expired",
            cells[0]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        get(&client, kept).await.is_some(),
        "kept alive on cell {}",
        cells[1]
    );

    let done = client.kv_txn_if(txn(0)).await.expect("txn");
    assert!(done.succeeded, "{done:?}");
    let again = client.kv_txn_if(txn(0)).await.expect("txn");
    assert!(!again.succeeded && again.responses.len() == 1, "{again:?}");

    // A lease on another cell than the key: one apply could not free both.
    let attached = pb::KvPutRequest {
        key: b"svc/elsewhere".to_vec(),
        value: b"x".to_vec(),
        lease: Some(pb::ResourceId {
            owner: "shared".into(),
            name: "deploy".into(),
            key: "prod".into(),
        }),
        lease_holder: "h".into(),
        ..Default::default()
    };
    let refused = client.kv_put(attached).await;
    assert!(
        matches!(&refused, Err(CellError::InvalidArgument(m)) if m.contains("different cells")),
        "{refused:?}"
    );
    assert!(
        get(&client, "svc/elsewhere").await.is_none(),
        "nothing written"
    );
    fabric.shutdown().await;
}
