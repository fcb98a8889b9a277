//! Bootstrap: `fabric init` places every cell on distinct nodes, cuts the ring, publishes
//! the map; status agrees from every node; a second init and bad plans are refused; a
//! restart of every node brings the fabric back with its data.

use std::time::Duration;

use whip_cell::CellError;
use whip_tests::fabric::Fabric;

use crate::{get, put};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn init_places_cells_and_status_agrees_everywhere() {
    let fabric = Fabric::start(3, 4).await;
    for via in [1, 2, 3] {
        let status = fabric.status(via).await;
        assert_eq!(status.nodes.len(), 3);
        assert!(status.nodes.iter().all(|n| n.reachable));
        assert_eq!(status.cells.len(), 5, "meta cell and four data cells");
        assert!(status.alarms.is_empty(), "no alarms: {:?}", status.alarms);
        let mut covered: u128 = 0;
        for cell in &status.cells {
            assert!(cell.leader.is_some(), "cell {} has a leader", cell.id);
            let mut voters = cell.voters.clone();
            voters.sort();
            voters.dedup();
            assert_eq!(voters.len(), 3, "three distinct voters");
            for r in &cell.ranges {
                assert_eq!(r.epoch, 1);
                covered += u128::from(r.last - r.start) + 1;
            }
        }
        assert_eq!(covered, 1u128 << 64, "the ranges cover the ring once");
    }
    // Each cell has one identity: its public key is in the map, and every voter holds the
    // same private key in a 0600 file of its own data directory.
    let status = fabric.status(1).await;
    for cell in &status.cells {
        assert_eq!(
            cell.public_key.len(),
            64,
            "cell {} has a public key",
            cell.id
        );
        for voter in &cell.voters {
            let identity = fabric
                .node(*voter)
                .identity(cell.id)
                .expect("key file readable")
                .expect("the voter holds the cell's key");
            assert_eq!(identity.public_key_hex(), cell.public_key);
            let file = fabric
                .dir
                .path()
                .join(format!("node-{voter}/cells/{}/identity.key", cell.id));
            let mode = std::fs::metadata(&file).expect("key file").permissions();
            assert_eq!(
                std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
                0o600
            );
        }
    }
    let again = whip_fabric::admin::init(fabric.node(2), members(&fabric), 4, 0).await;
    assert!(
        matches!(&again, Err(CellError::InvalidArgument(m)) if m.contains("already initialized")),
        "second init refused: {again:?}"
    );
    fabric.shutdown().await;
}

fn members(fabric: &Fabric) -> std::collections::BTreeMap<u64, String> {
    fabric
        .addrs
        .iter()
        .map(|(id, a)| (*id, a.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_plans_are_refused_and_the_node_keeps_serving() {
    let fabric = Fabric::start_uninitialized(3).await;
    let node = fabric.node(1);
    let zero = whip_fabric::admin::init(node, members(&fabric), 0, 0).await;
    assert!(matches!(zero, Err(CellError::InvalidArgument(m)) if m.contains("cells is 0")));
    let too_many = whip_fabric::admin::init(node, members(&fabric), 2, 5).await;
    assert!(matches!(too_many, Err(CellError::InvalidArgument(m)) if m.contains("replicas")));
    let mut others = members(&fabric);
    others.remove(&1);
    let elsewhere = whip_fabric::admin::init(node, others, 2, 0).await;
    assert!(matches!(
        elsewhere,
        Err(CellError::InvalidArgument(m)) if m.contains("not in the node list")
    ));
    let before = fabric.client_of(2);
    let impatient = fabric
        .client_of(2)
        .with_retry_for(Duration::from_millis(200));
    let unready = impatient
        .kv_get(whip_proto::v1::KvGetRequest {
            key: b"k".to_vec(),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(&unready, Err(CellError::Unavailable(m)) if m.contains("whip fabric init")),
        "no fabric yet: {unready:?}"
    );
    whip_fabric::admin::init(node, members(&fabric), 2, 0)
        .await
        .expect("a good plan still works");
    put(&before, "k", "v", Some(0)).await;
    assert_eq!(
        get(&before, "k").await.map(|(v, _)| v).as_deref(),
        Some("v")
    );
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_node_restarts_with_its_cells_and_data() {
    let mut fabric = Fabric::start(3, 4).await;
    let client = fabric.client_of(1);
    for i in 0..40 {
        put(&client, &format!("key-{i}"), &format!("v{i}"), Some(0)).await;
    }
    for id in [1, 2, 3] {
        fabric.kill(id).await;
    }
    for id in [1, 2, 3] {
        fabric.start_node(id).await;
    }
    fabric.wait_leaders(Duration::from_secs(15)).await;
    assert_eq!(fabric.node(3).hosted_ids(), vec![0, 1, 2, 3, 4]);
    let client = fabric.client_of(3);
    for i in 0..40 {
        let got = get(&client, &format!("key-{i}")).await;
        assert_eq!(got.map(|(v, _)| v), Some(format!("v{i}")));
    }
    let status = fabric.status(2).await;
    assert!(status.alarms.is_empty(), "{:?}", status.alarms);
    fabric.shutdown().await;
}
