//! Goal: the leader sends entries to its followers before its own fsync finishes (the
//! patched openraft core, `vendor/openraft/PATCH.md`) and the log writer returns from
//! `append` before the data is durable. SIGKILL of the leader while writes stream, so its
//! log writer is nearly always inside a group commit, must still lose no acknowledged write,
//! and the restarted leader must not resume its old term with a shorter log.
//! Method: 16 writers append unique entries without pause; three times, the leader process
//! is killed mid-stream and restarted. Every acknowledged entry must be readable exactly
//! once at the end, and every member must converge on the same log.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use whip_tests::{ProcessCluster, wait_for};

const WRITERS: u64 = 16;
const ROUNDS: usize = 3;

async fn current_leader(cluster: &ProcessCluster) -> u64 {
    for _ in 0..500 {
        if let Some(leader) = cluster.leader().await {
            return leader;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no leader within 10 s");
}

/// One writer: append `writer * 1_000_000 + n` for n = 0, 1, … until told to stop; record
/// each acknowledged number. Errors (the leader just died) are retried with a new number:
/// an unacknowledged append may or may not have applied, and is not checked.
fn writer(
    client: whip_cell::CellClient,
    writer: u64,
    acked: Arc<Mutex<BTreeSet<u64>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let value = writer * 1_000_000 + n;
            n += 1;
            // Keyed, so a client retry can never apply one entry twice.
            let key = format!("flush-{value}");
            if client
                .ledger_append(crate::append("flush", value, &key))
                .await
                .is_ok()
            {
                acked.lock().unwrap().insert(value);
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_of_the_leader_mid_flush_loses_no_acknowledged_write() {
    let mut cluster = ProcessCluster::start(3).await;
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| writer(cluster.client(), w, acked.clone(), stop.clone()))
        .collect();
    for round in 0..ROUNDS {
        let before = acked.lock().unwrap().len();
        wait_for("writes to stream", Duration::from_secs(20), || {
            let acked = acked.clone();
            async move { acked.lock().unwrap().len() >= before + 200 }
        })
        .await;
        let leader = current_leader(&cluster).await;
        cluster.kill(leader);
        tracing::info!(round, leader, "killed the leader mid-stream");
        let after_kill = acked.lock().unwrap().len();
        wait_for("writes to resume", Duration::from_secs(20), || {
            let acked = acked.clone();
            async move { acked.lock().unwrap().len() >= after_kill + 100 }
        })
        .await;
        cluster.spawn(leader);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.expect("writer task");
    }
    let client = cluster.client();
    let stored = crate::entries(&client, "flush").await;
    assert!(stored.len() < 10_000, "one page holds the whole partition");
    let mut seen = BTreeSet::new();
    for e in &stored {
        let v: serde_json::Value = serde_json::from_slice(&e.entry).expect("entry json");
        let n = v["n"].as_u64().expect("n");
        assert!(seen.insert(n), "entry {n} stored twice");
    }
    let acked = acked.lock().unwrap().clone();
    let lost: Vec<_> = acked.difference(&seen).take(10).collect();
    assert!(
        lost.is_empty(),
        "acknowledged entries lost: {lost:?} (of {})",
        acked.len()
    );
    converge(&cluster).await;
}

/// Every member reaches the same applied index and the same last log index.
async fn converge(cluster: &ProcessCluster) {
    let clients: Arc<Vec<_>> = Arc::new(
        (0..cluster.addrs.len())
            .map(|i| whip_cell::CellClient::connect(&cluster.addrs[i..=i]).unwrap())
            .collect(),
    );
    wait_for("every member to converge", Duration::from_secs(20), || {
        let clients = clients.clone();
        async move {
            let mut seen = BTreeSet::new();
            for c in clients.iter() {
                match c.member_status(0).await {
                    Ok(s) if s.last_applied == s.last_log_index => {
                        seen.insert(s.last_log_index);
                    }
                    _ => return false,
                }
            }
            seen.len() == 1
        }
    })
    .await;
}
