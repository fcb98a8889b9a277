//! Fail-open and fail-closed leases: with the quorum of a lease's cell gone, a fail-open
//! acquire answers `held_degraded` (and says why) within its bound, a fail-closed acquire
//! fails as unavailable; once the quorum is back, both are granted normally.

use std::time::{Duration, Instant};

use whip_cell::CellError;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_tests::fabric::Fabric;

fn acquire(holder: &str, fail_open: bool) -> pb::LeaseAcquireRequest {
    pb::LeaseAcquireRequest {
        lease: Some(pb::ResourceId {
            owner: "shared".into(),
            name: if fail_open { "cache-warm" } else { "deploy" }.into(),
            key: "prod".into(),
        }),
        holder: holder.into(),
        slots: 1,
        ttl_ms: 30_000,
        fail_open,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quorum_loss_degrades_fail_open_and_refuses_fail_closed() {
    let mut fabric = Fabric::start(3, 2).await;
    let client = fabric
        .client_of(1)
        .with_retry_for(Duration::from_millis(500));
    let ok = client
        .lease_acquire(acquire("w1", true))
        .await
        .expect("acquire");
    assert_eq!(
        ok.code,
        Code::LeaseHeld as i32,
        "with quorum a fail-open lease is held"
    );
    fabric.kill(2).await;
    fabric.kill(3).await;
    let started = Instant::now();
    let degraded = client
        .lease_acquire(acquire("w2", true))
        .await
        .expect("answer");
    assert_eq!(
        degraded.code,
        Code::LeaseHeldDegraded as i32,
        "{degraded:?}"
    );
    assert!(!degraded.degraded_reason.is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let closed = client.lease_acquire(acquire("w3", false)).await;
    assert!(
        matches!(closed, Err(CellError::Unavailable(_))),
        "{closed:?}"
    );
    fabric.start_node(2).await;
    fabric.start_node(3).await;
    fabric.wait_leaders(Duration::from_secs(15)).await;
    let patient = fabric.client_of(1);
    let back = patient
        .lease_acquire(acquire("w4", false))
        .await
        .expect("acquire");
    assert_eq!(back.code, Code::LeaseHeld as i32, "{back:?}");
    fabric.shutdown().await;
}
