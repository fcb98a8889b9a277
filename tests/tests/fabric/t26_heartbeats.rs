//! Goal: the cells a node leads heartbeat another node in one call, not one call each, so
//! an idle fabric of many cells costs a few calls per heartbeat per node pair; a peer
//! without the cluster's certificate cannot send that call. Method: three `whip node
//! serve` processes (TLS, `--http`) as a fabric of 16 data cells, every node hosting every
//! cell. After the fabric settles, every node's `whip_rpc_calls_total` for the Raft
//! append methods is scraped twice, 3 s apart. Seventeen cells led a third per node would
//! cost each node one AppendEntries call per heartbeat for each of the 11 or so cells it
//! follows (about 75 a second at the 150 ms heartbeat); batched, each node gets a few
//! batches per heartbeat interval from each of its two peers, under half of that. Then
//! every cell still takes a write, and an anonymous raw gRPC client's `Raft/AppendBatch`
//! is refused `unauthenticated`.

use std::time::{Duration, Instant};

use whip_proto::v1 as pb;
use whip_tests::fabric::ProcessFabric;
use whip_tests::whip_json as whip;

/// Raft append calls (AppendEntries, AppendBatch) the nodes at `http` answered so far.
fn append_calls(http: &[String]) -> (u64, u64) {
    let (mut single, mut batched) = (0, 0);
    for addr in http {
        let (status, text) = whip_tests::browser::get(addr, "/metrics");
        assert_eq!(status, 200, "{text}");
        for line in text
            .lines()
            .filter(|l| l.starts_with("whip_rpc_calls_total{"))
        {
            let value = line.rsplit(' ').next().expect("a sample has a value");
            let value = value.parse::<f64>().expect("a number") as u64;
            if line.contains("method=\"/whip.v1.Raft/AppendEntries\"") {
                single += value;
            } else if line.contains("method=\"/whip.v1.Raft/AppendBatch\"") {
                batched += value;
            }
        }
    }
    (single, batched)
}

/// An anonymous caller (the CA's certificate, none of its own) sends a heartbeat batch.
async fn batch_without_a_certificate(addr: &str) -> Result<pb::BlobAnswers, tonic::Status> {
    let batch = pb::BlobBatch {
        blobs: vec![pb::Blob {
            data: vec![0; 8],
            cell: 1,
        }],
    };
    let anonymous = whip_tests::ca_only_transport();
    whip_tests::raw_unary(addr, &anonymous, "/whip.v1.Raft/AppendBatch", batch).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_node_heartbeats_each_peer_in_batches() {
    const CELLS: u64 = 16;
    let fabric = ProcessFabric::start_observed(3, true).await;
    let mut init = vec!["fabric".to_string(), "init".into(), "--cells".into()];
    init.extend([CELLS.to_string(), "--cell".into(), fabric.addrs[0].clone()]);
    init.extend(fabric.node_args());
    init.push("--json".into());
    let (ok, _, err) = whip(&init);
    assert!(ok, "fabric init: {err}");
    // Every cell has a leader before the count starts (elections and their first appends
    // are not heartbeats).
    let status = vec![
        "fabric".to_string(),
        "status".into(),
        "--cell".into(),
        fabric.addrs[0].clone(),
        "--json".into(),
    ];
    whip_tests::wait_for(
        "every cell to have a leader",
        Duration::from_secs(30),
        || {
            let status = status.clone();
            async move {
                let (ok, out, _) = whip(&status);
                let cells = out["cells"].as_array().cloned().unwrap_or_default();
                ok && cells.len() as u64 == CELLS + 1 && cells.iter().all(|c| c["leader"].is_u64())
            }
        },
    )
    .await;

    let http = fabric.http_addrs.clone();
    let before = append_calls(&http);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = append_calls(&http);
    let seconds = started.elapsed().as_secs_f64();
    let single = (after.0 - before.0) as f64 / seconds / 3.0;
    let batched = (after.1 - before.1) as f64 / seconds / 3.0;
    eprintln!("per node per second: {single:.1} AppendEntries, {batched:.1} AppendBatch");
    assert!(batched > 0.0, "no heartbeat batch in {seconds:.1} s");
    // Unbatched, each node answers one call per heartbeat for each of the cells it follows
    // (two thirds of them); batched, a few per peer per heartbeat interval.
    let heartbeats_per_second = 1000.0 / whip_fabric::limits::NODE_HEARTBEAT_MS as f64;
    let unbatched = (CELLS + 1) as f64 * 2.0 / 3.0 * heartbeats_per_second;
    assert!(
        single + batched < unbatched / 2.0,
        "per node per second: {single:.1} AppendEntries and {batched:.1} AppendBatch calls, \
         where one call per heartbeat would be about {unbatched:.0}"
    );

    let client = whip_cell::CellClient::connect(&fabric.addrs).expect("client");
    for i in 0..(4 * CELLS) {
        crate::put(&client, &format!("after-batching/{i}"), "v", Some(0)).await;
    }
    let refused = batch_without_a_certificate(&fabric.addrs[1]).await;
    let status = refused.expect_err("an anonymous caller sends no heartbeats");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
}
