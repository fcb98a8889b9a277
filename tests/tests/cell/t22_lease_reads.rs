//! Leader-lease reads (issue 35, item 2; `cell/src/lease_read.rs`).
//!
//! Goal 1: under a live lease a linearizable read takes no heartbeat round. Method: three
//! voters on loopback (real gRPC, real storage); 400 reads in sequence through the leader,
//! counting the `AppendEntries` calls its followers answered meanwhile. A read-index round
//! costs one per follower per read (800 here); the lease leaves only the heartbeats the
//! elapsed time explains, and the bound below allows a quarter of the reads a round.
//!
//! Goal 2 (the safety side): a leader whose followers stopped answering stops serving reads
//! once its lease lapsed. Method: three `whip cell serve` processes; both followers are
//! SIGSTOPped; a read through the leader started after the election timeout (longer than
//! any lease) must fail, never answer from the isolated leader's state.

use std::time::{Duration, Instant};

use whip_cell::{CellClient, StorageKind};
use whip_proto::v1 as pb;
use whip_tests::{Cluster, ProcessCluster};

const READS: u64 = 400;
const APPEND: &str = "/whip.v1.Raft/AppendEntries";

fn get(key: &str) -> pb::KvGetRequest {
    pb::KvGetRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_under_the_lease_take_no_round() {
    let cluster = Cluster::start(3, StorageKind::Redb).await;
    let leader = cluster.wait_leader(Duration::from_secs(10)).await;
    let client = cluster.client_of(leader);
    client.kv_put(crate::put("leased", "v")).await.expect("put");
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let appends = || -> u64 {
        (followers.iter())
            .map(|id| cluster.member(*id).config().rpc_stats.answered_ok(APPEND))
            .sum()
    };
    let before = appends();
    let began = Instant::now();
    for _ in 0..READS {
        let got = client.kv_get(get("leased")).await.expect("get");
        assert!(got.found);
    }
    let elapsed_ms = began.elapsed().as_millis() as u64;
    let sent = appends() - before;
    let heartbeats = 2 * (elapsed_ms / whip_cell::limits::HEARTBEAT_MS + 2);
    let bound = heartbeats + READS / 2;
    assert!(
        sent <= bound,
        "{sent} AppendEntries for {READS} reads in {elapsed_ms} ms (bound {bound})"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_isolated_leader_stops_reading_after_its_lease() {
    whip_tests::init_tracing();
    let cluster = ProcessCluster::start(3).await;
    let client = cluster.client();
    client
        .kv_put(crate::put("fenced", "v1"))
        .await
        .expect("put");
    let leader = cluster.wait_leader(Duration::from_secs(10)).await;
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let through_leader = CellClient::connect(&cluster.addrs[leader as usize - 1..leader as usize])
        .expect("client")
        .with_retry_for(Duration::ZERO);
    let read = through_leader
        .kv_get(get("fenced"))
        .await
        .expect("a read under the lease");
    assert_eq!(read.value, b"v1");
    for id in &followers {
        cluster.signal(*id, libc::SIGSTOP);
    }
    // Past any lease: the election timeout bounds it from above.
    tokio::time::sleep(Duration::from_millis(
        whip_cell::limits::ELECTION_TIMEOUT_MIN_MS,
    ))
    .await;
    let late = through_leader.kv_get(get("fenced")).await;
    for id in &followers {
        cluster.signal(*id, libc::SIGCONT);
    }
    assert!(
        late.is_err(),
        "an isolated leader answered a read: {late:?}"
    );
    let back = cluster
        .client()
        .kv_get(get("fenced"))
        .await
        .expect("a read after");
    assert_eq!(back.value, b"v1");
}
