//! Goal: with each voter its own `whip cell serve` process, SIGKILL of the leader loses no
//! acknowledged write and a new leader serves within 2 s; the killed voter restarts and
//! catches up. Method: acknowledged appends before the kill must all be readable after it.

use std::time::{Duration, Instant};

use whip_tests::{ProcessCluster, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_leader_process() {
    whip_tests::init_tracing();
    let mut cluster = ProcessCluster::start(3).await;
    let client = cluster.client();
    let mut acked = Vec::new();
    for n in 0..50 {
        let r = client
            .ledger_append(crate::append("p", n, ""))
            .await
            .expect("append");
        acked.push(r.seq);
    }
    let old = cluster.wait_leader(Duration::from_secs(10)).await;
    let killed_at = Instant::now();
    cluster.kill(old);
    let r = client
        .ledger_append(crate::append("p", 50, ""))
        .await
        .expect("append after kill");
    let unavailable = killed_at.elapsed();
    assert!(
        unavailable < Duration::from_secs(2),
        "first write after SIGKILL took {unavailable:?}"
    );
    acked.push(r.seq);
    let stored = crate::entries(&client, "p").await;
    for seq in &acked {
        assert!(
            stored.iter().any(|e| e.seq == *seq),
            "acknowledged seq {seq} lost"
        );
    }
    cluster.spawn(old);
    let rejoined =
        whip_cell::CellClient::connect(&cluster.addrs[(old - 1) as usize..old as usize]).unwrap();
    wait_for(
        "the killed voter to catch up",
        Duration::from_secs(10),
        || async {
            match rejoined.member_status(0).await {
                Ok(s) => {
                    s.last_applied >= s.last_log_index && s.leader.is_some() && s.last_log_index > 0
                }
                Err(_) => false,
            }
        },
    )
    .await;
}
