//! Routing: any node serves any key and the command runs on the owning cell; transactions
//! must stay on one cell; lists are gathered from every cell; stale epochs, unknown cells
//! and malformed internal messages get typed refusals and the node keeps serving.

use std::collections::BTreeSet;

use whip_board::{Command, Outcome, Request, route};
use whip_cell::CellError;
use whip_proto::v1 as pb;
use whip_tests::fabric::Fabric;

use crate::{get, put};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_spread_over_cells_and_any_node_serves_them() {
    let fabric = Fabric::start(3, 4).await;
    let map = fabric.node(1).map().await.expect("map");
    let writer = fabric.client_of(1);
    let mut owners = BTreeSet::new();
    for i in 0..120 {
        let key = format!("spread-{i}");
        owners.insert(map.locate(route::kv_point(key.as_bytes())).cell);
        put(&writer, &key, &i.to_string(), Some(0)).await;
    }
    assert_eq!(owners.len(), 4, "120 keys land on all four cells");
    for via in [2, 3] {
        let reader = fabric.client_of(via);
        for i in (0..120).step_by(7) {
            let got = get(&reader, &format!("spread-{i}")).await;
            assert_eq!(got.map(|(v, _)| v), Some(i.to_string()));
        }
    }
    // Each cell holds only its own keys.
    for cell in 1..=4u64 {
        let member = fabric.node(2).hosted(cell).expect("hosted");
        let rows = member
            .read(whip_board::Query::KvRange {
                prefix: b"spread-".to_vec(),
                after_key: Vec::new(),
                limit: 0,
            })
            .await
            .expect("range read");
        let whip_board::QueryResult::KvRange(rows) = rows else {
            panic!("range answer")
        };
        for (key, _) in rows.rows {
            assert_eq!(map.locate(route::kv_point(&key)).cell, cell);
        }
    }
    // A scan through a node gathers every cell's keys in order.
    let scan = fabric
        .client_of(3)
        .kv_range(pb::KvRangeRequest {
            prefix: b"spread-".to_vec(),
            after_key: Vec::new(),
            limit: 0,
            ..Default::default()
        })
        .await
        .expect("scan");
    assert_eq!(scan.entries.len(), 120);
    let keys: Vec<&Vec<u8>> = scan.entries.iter().map(|e| &e.key).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "merged in key order");
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactions_stay_on_one_cell_and_lists_gather() {
    let fabric = Fabric::start(3, 4).await;
    let client = fabric.client_of(2);
    let txn = |keys: &[&str]| pb::KvTxnRequest {
        puts: keys
            .iter()
            .map(|k| pb::KvPair {
                key: k.as_bytes().to_vec(),
                value: b"1".to_vec(),
            })
            .collect(),
        ..Default::default()
    };
    let tagged = client
        .kv_txn(txn(&["wf/{inst-9}/a", "wf/{inst-9}/b", "idx/{inst-9}"]))
        .await
        .expect("tagged transaction");
    assert_eq!(tagged.code, pb::OutcomeCode::KvTxnCommitted as i32);
    let map = fabric.node(1).map().await.expect("map");
    let (a, b) = (0..)
        .map(|i| (format!("x{i}"), format!("y{i}")))
        .find(|(a, b)| {
            map.locate(route::kv_point(a.as_bytes())).cell
                != map.locate(route::kv_point(b.as_bytes())).cell
        })
        .expect("two keys on different cells");
    let spanning = client.kv_txn(txn(&[&a, &b])).await;
    assert!(
        matches!(&spanning, Err(CellError::InvalidArgument(m)) if m.contains("different cells")),
        "{spanning:?}"
    );
    for i in 0..30 {
        let r = client
            .lease_acquire(crate::singleton(&format!("list-{i}"), "h", 60_000))
            .await
            .expect("acquire");
        assert!(crate::held(&r));
    }
    let listed = fabric
        .client_of(3)
        .lease_list(pb::LeaseListRequest {
            prefix: "singleton/list-".into(),
            limit: 0,
        })
        .await
        .expect("list");
    assert_eq!(listed.leases.len(), 30, "gathered from every cell");
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_epochs_unknown_cells_and_garbage_are_refused() {
    let fabric = Fabric::start(3, 4).await;
    let map = fabric.node(1).map().await.expect("map");
    let key = b"victim".to_vec();
    let owner = map.locate(route::kv_point(&key)).cell;
    // Straight to the owning cell's leader, as a malicious or confused client could.
    let leader = fabric
        .node(1)
        .hosted(owner)
        .expect("hosted")
        .leader_addr()
        .expect("leader known");
    let mut raw = fabric.node(1).peers().raft_client(&leader);
    let forged = Request {
        idempotency_key: Some("forged-1".into()),
        command: Command::KvPut {
            key: key.clone(),
            value: b"evil".to_vec(),
            expect_version: None,
        },
        epoch: 999,
        caller: whip_board::access::Caller::Operator,
    };
    let answer = raw
        .forward(pb::Blob {
            data: whip_cell::types::encode(&vec![forged.clone()]),
            cell: owner,
        })
        .await
        .expect("forward answers");
    let results: Vec<Result<Outcome, CellError>> =
        whip_cell::types::decode(&answer.into_inner().data).expect("decode");
    assert_eq!(results, vec![Err(CellError::WrongRange { epoch: 1 })]);
    let unrouted = Request { epoch: 0, ..forged };
    let answer = raw
        .forward(pb::Blob {
            data: whip_cell::types::encode(&vec![unrouted]),
            cell: owner,
        })
        .await
        .expect("forward answers");
    let results: Vec<Result<Outcome, CellError>> =
        whip_cell::types::decode(&answer.into_inner().data).expect("decode");
    assert!(
        matches!(results[0], Err(CellError::WrongRange { .. })),
        "unrouted refused"
    );
    let unknown = raw
        .forward(pb::Blob {
            data: whip_cell::types::encode(&Vec::<Request>::new()),
            cell: 77,
        })
        .await;
    assert_eq!(
        unknown.expect_err("unknown cell").code(),
        tonic::Code::NotFound
    );
    let garbage = raw
        .forward(pb::Blob {
            data: vec![0xff, 0xfe, 0x01],
            cell: owner,
        })
        .await;
    assert_eq!(
        garbage.expect_err("garbage").code(),
        tonic::Code::InvalidArgument
    );
    let client = fabric.client_of(2);
    assert_eq!(
        get(&client, "victim").await,
        None,
        "nothing forged was applied"
    );
    put(&client, "victim", "fine", Some(0)).await;
    assert_eq!(
        get(&client, "victim").await.map(|(v, _)| v).as_deref(),
        Some("fine")
    );
    fabric.shutdown().await;
}
