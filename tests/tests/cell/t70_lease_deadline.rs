//! Goal: a lease deadline survives a leader change: it is an absolute stamp, not a TTL
//! restarted by the new leader (etcd resets TTLs on leader change; we do not). Also: slots,
//! contention and expiry driven by the leader's tick. Method: acquire, kill the leader,
//! inspect the holder's deadline through the new leader.

use std::time::Duration;

use whip_cell::StorageKind;
use whip_proto::v1 as pb;
use whip_tests::{Cluster, wait_for};

fn acquire(holder: &str, slots: u32, ttl_ms: u64) -> pb::LeaseAcquireRequest {
    pb::LeaseAcquireRequest {
        lease: Some(pb::ResourceId {
            owner: "t".into(),
            name: "deploy".into(),
            key: "prod".into(),
        }),
        holder: holder.into(),
        slots,
        ttl_ms,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lease_deadline_survives_leader_change() {
    let mut cluster = Cluster::start(3, StorageKind::Redb).await;
    let held = cluster
        .client()
        .lease_acquire(acquire("a", 1, 30_000))
        .await
        .unwrap();
    assert_eq!(held.code, pb::OutcomeCode::LeaseHeld as i32);
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    cluster.kill(leader).await;
    cluster.wait_leader(Duration::from_secs(5)).await;
    let contended = cluster
        .client()
        .lease_acquire(acquire("b", 1, 30_000))
        .await
        .unwrap();
    assert_eq!(contended.code, pb::OutcomeCode::LeaseContended as i32);
    assert_eq!(contended.holders.len(), 1);
    assert_eq!(
        contended.holders[0].expires_at_ms, held.expires_at_ms,
        "deadline moved on leader change"
    );
    assert_eq!(contended.holders[0].fence, held.fence);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expired_holder_frees_its_slot_through_a_tick() {
    let cluster = Cluster::start(3, StorageKind::Redb).await;
    let client = cluster.client();
    let a = client.lease_acquire(acquire("a", 2, 300)).await.unwrap();
    let b = client.lease_acquire(acquire("b", 2, 300)).await.unwrap();
    assert_eq!(
        (a.code, b.code),
        (
            pb::OutcomeCode::LeaseHeld as i32,
            pb::OutcomeCode::LeaseHeld as i32
        )
    );
    let c = client.lease_acquire(acquire("c", 2, 300)).await.unwrap();
    assert_eq!(
        c.code,
        pb::OutcomeCode::LeaseContended as i32,
        "a third holder on two slots"
    );
    // Nobody touches the lease: only the leader's tick can remove the expired holders.
    wait_for(
        "the tick to expire both holders",
        Duration::from_secs(5),
        || async {
            let list = client
                .lease_list(pb::LeaseListRequest {
                    prefix: String::new(),
                    limit: 0,
                })
                .await
                .unwrap();
            list.leases.is_empty()
        },
    )
    .await;
    // Only idempotency records (kept for minutes) may stay due; the lease deadlines must
    // leave the index once the tick applied, on every member.
    let member = cluster.member(1).clone();
    wait_for(
        "the expiry tick to reach member 1",
        Duration::from_secs(5),
        || {
            let member = member.clone();
            async move {
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as u64;
                match member
                    .local_query(whip_board::Query::NextDeadline)
                    .await
                    .unwrap()
                {
                    whip_board::QueryResult::NextDeadline(Some(at)) => at > now_ms + 60_000,
                    whip_board::QueryResult::NextDeadline(None) => true,
                    other => panic!("unexpected {other:?}"),
                }
            }
        },
    )
    .await;
    cluster.shutdown().await;
}
