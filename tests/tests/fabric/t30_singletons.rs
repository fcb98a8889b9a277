//! Node-converged singletons: every node of a 3-node × 4-cell fabric races for the same
//! 100 singletons at once; each has exactly one holder fabric-wide.

use std::collections::{BTreeMap, BTreeSet};

use whip_board::{ResourceId, route};
use whip_proto::v1 as pb;
use whip_tests::fabric::Fabric;

use crate::{held, singleton};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_singleton_has_exactly_one_holder() {
    let fabric = Fabric::start(3, 4).await;
    let mut racers = Vec::new();
    for node in [1u64, 2, 3] {
        for racer in 0..2 {
            let client = fabric.client_of(node);
            let holder = format!("node{node}-racer{racer}");
            racers.push(tokio::spawn(async move {
                let calls = (0..100).map(|i| {
                    let req = singleton(&format!("job-{i}"), &holder, 60_000);
                    let client = &client;
                    async move { (i, client.lease_acquire(req).await.expect("acquire")) }
                });
                let answers = futures::future::join_all(calls).await;
                (holder, answers)
            }));
        }
    }
    let mut winners: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for racer in racers {
        let (holder, answers) = racer.await.expect("racer");
        for (i, answer) in answers {
            if held(&answer) {
                winners.entry(i).or_default().push(holder.clone());
            }
        }
    }
    for i in 0..100 {
        assert_eq!(
            winners.get(&i).map(Vec::len),
            Some(1),
            "job-{i}: {winners:?}"
        );
    }
    let listed = fabric
        .client_of(2)
        .lease_list(pb::LeaseListRequest {
            prefix: "singleton/job-".into(),
            limit: 0,
        })
        .await
        .expect("list");
    assert_eq!(
        listed.leases.len(),
        100,
        "one row per singleton fabric-wide"
    );
    for lease in &listed.leases {
        assert_eq!(lease.holders.len(), 1);
        let name = lease.lease.as_ref().expect("id").name.clone();
        let i: u32 = name["job-".len()..].parse().expect("number");
        assert_eq!(lease.holders[0].holder, winners[&i][0]);
    }
    let map = fabric.node(3).map().await.expect("map");
    let cells: BTreeSet<u64> = (0..100)
        .map(|i| {
            let id = ResourceId {
                owner: "singleton".into(),
                name: format!("job-{i}"),
                key: String::new(),
            };
            map.locate(route::resource_point(&id)).cell
        })
        .collect();
    assert!(
        cells.len() > 1,
        "singletons spread over cells, one row each"
    );
    fabric.shutdown().await;
}
