//! Goal: membership changes: add a learner (it catches up), promote it to voter, remove an
//! old voter; the cell keeps its data and serves throughout.

use std::time::Duration;

use whip_cell::{Cell, CellConfig, StorageKind};
use whip_proto::v1 as pb;
use whip_tests::{Cluster, free_addrs, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn add_learner_promote_and_remove() {
    let cluster = Cluster::start(3, StorageKind::Redb).await;
    let client = cluster.client();
    for i in 0..30 {
        client
            .kv_put(crate::put(&format!("m{i}"), "x"))
            .await
            .unwrap();
    }
    let addr = free_addrs(1)[0];
    let dir = tempfile::tempdir().unwrap();
    let mut config = CellConfig::new(4, addr.to_string(), dir.path());
    config.transport = whip_tests::node_transport();
    let cell = Cell::start(config).await.unwrap();
    let listener = whip_cell::service::bind(addr).await.unwrap();
    let served = cell.clone();
    let server = tokio::spawn(async move {
        let _ = whip_cell::service::serve(served, listener, std::future::pending()).await;
    });
    client
        .add_learner(pb::Member {
            id: 4,
            addr: addr.to_string(),
        })
        .await
        .expect("add learner");
    client
        .change_membership(vec![2, 3, 4], false)
        .await
        .expect("promote 4, remove 1");
    let status = client.status(pb::StatusRequest::default()).await.unwrap();
    let voters: Vec<u64> = status
        .members
        .iter()
        .filter(|m| m.voter)
        .map(|m| m.id)
        .collect();
    assert_eq!(voters, vec![2, 3, 4]);
    wait_for("member 4 to hold the data", Duration::from_secs(10), || {
        let cell = cell.clone();
        async move {
            let got = cell
                .local_query(whip_board::Query::KvGet {
                    key: b"m29".to_vec(),
                })
                .await
                .unwrap();
            matches!(got, whip_board::QueryResult::Kv(Some(_)))
        }
    })
    .await;
    let via_new = whip_cell::CellClient::connect(&[addr.to_string()]).unwrap();
    let w = via_new
        .kv_put(crate::put("after-change", "1"))
        .await
        .expect("write through the new voter");
    assert_eq!(w.code, pb::OutcomeCode::KvWritten as i32);
    server.abort();
    cell.shutdown().await;
    cluster.shutdown().await;
}
