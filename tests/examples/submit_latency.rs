//! Calibration: latency of one write submitted directly on the leader of an in-process
//! 3-voter cell (no client RPC), versus through the gRPC client.
//! `cargo run --release -p whip-tests --example submit_latency`

use std::time::{Duration, Instant};

use whip_board::{Command, Request};
use whip_cell::StorageKind;
use whip_tests::Cluster;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let voters: usize = std::env::var("VOTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let storage = if std::env::var("SLED").is_ok() {
        StorageKind::Sled
    } else {
        StorageKind::Redb
    };
    let cluster = Cluster::start(voters, storage).await;
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    let cell = cluster.member(leader).clone();
    let mut direct = Vec::new();
    for i in 0..2000u64 {
        let request = Request::new(
            None,
            Command::KvPut {
                key: b"k".to_vec(),
                value: i.to_be_bytes().to_vec(),
                expect_version: None,
            },
        );
        let t = Instant::now();
        cell.submit(request).await.expect("submit");
        direct.push(t.elapsed().as_micros());
    }
    direct.sort_unstable();
    println!(
        "direct submit on leader: p50 {} us p99 {} us",
        direct[1000], direct[1980]
    );
    if std::env::var("TRACE_ONE").is_ok() {
        tracing::info!("==== one traced write");
        let request = Request::new(
            None,
            Command::KvPut {
                key: b"t".to_vec(),
                value: vec![1],
                expect_version: None,
            },
        );
        cell.submit(request).await.expect("submit");
        tracing::info!("==== done");
    }
    let mut raw = Vec::new();
    for i in 0..2000u64 {
        let batch = whip_cell::types::Batch {
            time_ms: 1,
            requests: vec![Request::new(
                None,
                Command::KvPut {
                    key: b"r".to_vec(),
                    value: i.to_be_bytes().to_vec(),
                    expect_version: None,
                },
            )],
        };
        let t = Instant::now();
        cell.raft().client_write(batch).await.expect("client_write");
        raw.push(t.elapsed().as_micros());
    }
    raw.sort_unstable();
    println!(
        "raw client_write on leader: p50 {} us p99 {} us",
        raw[1000], raw[1980]
    );
    let client = cluster.client_of(leader);
    let mut rpc = Vec::new();
    for i in 0..2000u64 {
        let t = Instant::now();
        client
            .kv_put(whip_proto::v1::KvPutRequest {
                key: b"k".to_vec(),
                value: i.to_be_bytes().to_vec(),
                ..Default::default()
            })
            .await
            .expect("put");
        rpc.push(t.elapsed().as_micros());
    }
    rpc.sort_unstable();
    println!(
        "gRPC put to leader: p50 {} us p99 {} us",
        rpc[1000], rpc[1980]
    );
    let mut status = Vec::new();
    for _ in 0..2000u64 {
        let t = Instant::now();
        client.member_status(0).await.expect("status");
        status.push(t.elapsed().as_micros());
    }
    status.sort_unstable();
    println!(
        "gRPC status round trip: p50 {} us p99 {} us",
        status[1000], status[1980]
    );
    cluster.shutdown().await;
}
