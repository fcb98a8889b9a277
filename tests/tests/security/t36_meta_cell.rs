//! The meta cell as an attacker reaches for it (issue 28, class 2): a registered agent (and
//! the operator's own client) sends keyed requests straight to the meta cell's leader with a
//! `whip-route: 0.<epoch>` header, and tries to take the range-admin lease through the
//! ordinary client API. Every try is refused `reserved`, nothing lands in the meta cell, and
//! the fabric still reshapes its ring (the range-admin lease stayed free).

use std::time::Duration;

use whip_board::{Query, QueryResult};
use whip_proto::v1 as pb;
use whip_tests::fabric::Fabric;

use crate::anonymous;

/// A keyed call to `addr` naming cell 0 in its route, as `agent` when given.
async fn to_meta<Req, Resp>(
    addr: &str,
    agent: Option<(&str, &str)>,
    path: &'static str,
    message: Req,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    crate::call_as(addr, agent, Some("0.1"), (path, message)).await
}

fn put(key: &str) -> pb::KvPutRequest {
    pb::KvPutRequest {
        key: key.as_bytes().to_vec(),
        value: b"squat".to_vec(),
        ..Default::default()
    }
}

fn admin_lease(owner: &str) -> pb::LeaseAcquireRequest {
    pb::LeaseAcquireRequest {
        lease: Some(pb::ResourceId {
            owner: owner.into(),
            name: "range-admin".into(),
            key: String::new(),
        }),
        holder: "mallory".into(),
        slots: 1,
        ttl_ms: 315_360_000_000,
        ..Default::default()
    }
}

fn reserved<T: std::fmt::Debug>(answer: Result<T, tonic::Status>) {
    match answer {
        Err(status) if status.message().starts_with("reserved") => {}
        other => panic!("expected reserved, got {other:?}"),
    }
}

#[tokio::test]
async fn no_client_request_is_served_by_the_meta_cell() {
    whip_tests::init_tracing();
    let fabric = Fabric::start(3, 2).await;
    let operator = fabric.client_of(1);
    let made = operator
        .agent_register(pb::AgentRegisterRequest {
            agent: "mallory".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let leader = fabric
        .node(1)
        .hosted(0)
        .unwrap()
        .raft()
        .metrics()
        .borrow()
        .current_leader;
    let addr = fabric.addrs[&leader.expect("the meta cell has a leader")].to_string();
    let mallory = Some(("mallory", made.token.as_str()));
    for caller in [mallory, None] {
        reserved(to_meta::<_, pb::KvWriteResponse>(&addr, caller, KV_PUT, put("squat")).await);
        let lease = admin_lease("~fabric");
        let taken = to_meta::<_, pb::LeaseResponse>(&addr, caller, LEASE_ACQUIRE, lease).await;
        reserved(taken);
        let old_owner =
            to_meta::<_, pb::LeaseResponse>(&addr, caller, LEASE_ACQUIRE, admin_lease("fabric"))
                .await;
        reserved(old_owner);
    }
    // Through the ordinary API (routed to a data cell) the server's lease is reserved too.
    let mallory_client =
        whip_cell::CellClient::connect_with(std::slice::from_ref(&addr), &anonymous())
            .unwrap()
            .with_identity("mallory", made.token.clone());
    let routed = mallory_client.lease_acquire(admin_lease("~fabric")).await;
    assert!(
        matches!(routed, Err(whip_cell::CellError::PermissionDenied(_))),
        "{routed:?}"
    );
    // Nothing landed in the meta cell.
    let meta = fabric.node(leader.unwrap()).read_cell(
        None,
        0,
        Query::KvGet {
            key: b"squat".to_vec(),
        },
    );
    assert_eq!(meta.await.unwrap(), QueryResult::Kv(None));
    // The ring still reshapes: the range-admin lease is free.
    let first = fabric.node(1).map().await.expect("map").ranges[0];
    let mid = first.start + (first.last - first.start) / 2 + 1;
    let split = tokio::time::timeout(
        Duration::from_secs(30),
        whip_fabric::admin::split_range(fabric.node(1), first.start, mid),
    );
    split
        .await
        .expect("the split finishes")
        .expect("the split is not refused");
    fabric.shutdown().await;
}

const KV_PUT: &str = "/whip.v1.Cell/KvPut";
const LEASE_ACQUIRE: &str = "/whip.v1.Cell/LeaseAcquire";
