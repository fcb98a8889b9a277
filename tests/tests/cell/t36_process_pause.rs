//! Goal (regression of the first `whip chaos` finding, seed 2): SIGSTOP of the leader
//! process must not stall writes sent to a follower. Before the fix, a batch forwarded to
//! the stopped leader had no deadline and held the follower's only proposal slot until
//! HTTP/2 keepalive gave up (~25 s). Method: stop the leader, write through one follower
//! only, and require an answer within 6 s; then resume the old leader.

use std::time::{Duration, Instant};

use whip_cell::CellClient;
use whip_tests::ProcessCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigstop_leader_does_not_stall_follower_writes() {
    whip_tests::init_tracing();
    let cluster = ProcessCluster::start(3).await;
    let client = cluster.client();
    client
        .ledger_append(crate::append("p", 0, ""))
        .await
        .expect("append before the pause");
    let old = cluster.wait_leader(Duration::from_secs(10)).await;
    let follower: usize = if old == 1 { 2 } else { 1 };
    let through_follower = CellClient::connect(&cluster.addrs[follower - 1..follower])
        .expect("client")
        .with_retry_for(Duration::from_secs(20));
    cluster.signal(old, libc::SIGSTOP);
    let paused_at = Instant::now();
    let result = through_follower
        .ledger_append(crate::append("p", 1, ""))
        .await;
    let took = paused_at.elapsed();
    cluster.signal(old, libc::SIGCONT);
    result.expect("append through a follower while the leader is stopped");
    assert!(
        took < Duration::from_secs(6),
        "write through a follower took {took:?} with the leader stopped"
    );
}
