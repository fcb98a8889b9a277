//! Goal: a client that routes by the range map sends each keyed write straight to the node
//! hosting the owning cell's leader, so no node forwards it, and keeps writing exactly once
//! through a leader's death and a range move. Method: three `whip node serve` processes
//! (TLS, `--http`) as a fabric of four data cells; every node's
//! `whip_forwarded_requests_total{kind="write"}` is scraped before and after batches of
//! ledger appends (one entry per acknowledged write, so a lost or doubled write shows in
//! the count). A plain client's batch is forwarded; the routing client's is not. Then the
//! node leading cell 1 is SIGKILLed and cell 1's range is moved to cell 2: the routing
//! client keeps writing, goes direct again once it has learned the routes afresh, and every
//! partition ends with exactly the acknowledged entries. An attacker without a certificate
//! asks a node for the routes with a raw gRPC client and gets nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use whip_cell::CellClient;
use whip_fabric::client::MapRouter;
use whip_proto::v1 as pb;
use whip_tests::fabric::ProcessFabric;
use whip_tests::{wait_for, whip_json as whip};

const PARTITIONS: usize = 16;

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Write requests the nodes at `http` forwarded so far, summed.
fn forwarded(http: &[String]) -> u64 {
    let mut total = 0;
    for addr in http {
        let (status, text) = whip_tests::browser::get(addr, "/metrics");
        assert_eq!(status, 200, "{text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("whip_forwarded_requests_total{kind=\"write\"}"));
        // No sample yet: this node forwarded nothing.
        total += line.map_or(0, |l| {
            let value = l.rsplit(' ').next().expect("a sample has a value");
            value.parse::<f64>().expect("a number") as u64
        });
    }
    total
}

/// The append of entry `n` to partition `p`.
fn append(p: usize, n: usize) -> pb::LedgerAppendRequest {
    pb::LedgerAppendRequest {
        ledger: Some(pb::ResourceId {
            owner: "direct".into(),
            name: "log".into(),
            key: format!("p{p}"),
        }),
        entry: format!("{{\"n\":{n}}}").into_bytes(),
        appended_by: "t25".into(),
        retain_ms: 3_600_000,
        idempotency_key: String::new(),
    }
}

/// Writes through one client, with what each partition acknowledged.
struct Writer {
    client: CellClient,
    acked: BTreeMap<usize, usize>,
    next: usize,
}

impl Writer {
    /// `count` appends spread over the partitions; each must be acknowledged.
    async fn batch(&mut self, count: usize) {
        for _ in 0..count {
            let p = self.next % PARTITIONS;
            self.client
                .ledger_append(append(p, self.next))
                .await
                .unwrap_or_else(|e| panic!("append {}: {e}", self.next));
            *self.acked.entry(p).or_default() += 1;
            self.next += 1;
        }
    }

    /// Batches until one is served without a forward (the client has learned the routes).
    async fn until_direct(&mut self, http: &[String], what: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let before = forwarded(http);
            self.batch(PARTITIONS).await;
            if forwarded(http) == before {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: the routing client still goes through forwards after 30 s"
            );
        }
    }
}

/// A raw client without a certificate asks for the routes.
async fn routes_without_a_certificate(addr: &str) -> Result<pb::RoutesResponse, tonic::Status> {
    let anonymous = whip_tests::ca_only_transport();
    let request = pb::RoutesRequest { reload: true };
    whip_tests::raw_unary(addr, &anonymous, "/whip.v1.Cell/Routes", request).await
}

fn leader_of(status: &serde_json::Value, cell: u64) -> u64 {
    let cells = status["cells"].as_array().expect("cells");
    let entry = cells.iter().find(|c| c["id"] == cell).expect("the cell");
    entry["leader"].as_u64().expect("a leader")
}

/// Three node processes (`--http`) made a fabric of four data cells by the CLI; an
/// anonymous caller asks one for the routes and is refused.
async fn fabric_of_four_cells() -> ProcessFabric {
    let fabric = ProcessFabric::start_observed(3, true).await;
    let mut init = args(&["fabric", "init", "--cells", "4", "--cell", &fabric.addrs[0]]);
    init.extend(fabric.node_args());
    init.push("--json".into());
    let (ok, _, err) = whip(&init);
    assert!(ok, "fabric init: {err}");
    let refused = routes_without_a_certificate(&fabric.addrs[1]).await;
    let status = refused.expect_err("an anonymous caller learns no routes");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    assert!(status.message().contains("anonymous_refused"), "{status:?}");
    fabric
}

/// SIGKILL the node leading cell 1 while `routed` writes; it goes direct again on the
/// survivors; then the node comes back.
async fn kill_the_leader_of_cell_1(fabric: &mut ProcessFabric, routed: &mut Writer) {
    let status = args(&["fabric", "status", "--cell", &fabric.addrs[0], "--json"]);
    let (ok, status, err) = whip(&status);
    assert!(ok, "{err}");
    let victim = leader_of(&status, 1);
    fabric.kill(victim);
    routed.batch(4 * PARTITIONS).await;
    let alive: Vec<String> = (1..=3u64)
        .filter(|&id| id != victim)
        .map(|id| fabric.http_addrs[(id - 1) as usize].clone())
        .collect();
    routed.until_direct(&alive, "after the kill").await;
    fabric.spawn(victim);
    let addr = fabric.addrs[(victim - 1) as usize].clone();
    wait_for(
        "the restarted node to listen",
        Duration::from_secs(10),
        || {
            let addr = addr.clone();
            async move { tokio::net::TcpStream::connect(&addr).await.is_ok() }
        },
    )
    .await;
}

/// Every partition holds exactly the entries `writer` saw acknowledged.
async fn none_lost_none_twice(writer: &Writer) {
    for (p, acked) in &writer.acked {
        let listed = writer
            .client
            .ledger_list(pb::LedgerListRequest {
                owner: "direct".into(),
                name: "log".into(),
                partition: Some(format!("p{p}")),
                after_seq: 0,
                limit: 0,
            })
            .await
            .expect("list");
        assert_eq!(listed.entries.len(), *acked, "partition p{p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_routing_client_writes_without_forwards_through_a_kill_and_a_move() {
    let mut fabric = fabric_of_four_cells().await;
    let http = fabric.http_addrs.clone();
    let mut plain = Writer {
        client: CellClient::connect(&fabric.addrs).expect("client"),
        acked: BTreeMap::new(),
        next: 0,
    };
    let before = forwarded(&http);
    plain.batch(3 * PARTITIONS).await;
    assert!(
        forwarded(&http) > before,
        "a plain client's writes are forwarded"
    );

    let router = Arc::new(MapRouter::new());
    let mut routed = Writer {
        client: CellClient::connect(&fabric.addrs)
            .expect("client")
            .with_router(router.clone()),
        acked: plain.acked.clone(),
        next: plain.next,
    };
    routed.until_direct(&http, "first use").await;
    let before = forwarded(&http);
    routed.batch(4 * PARTITIONS).await;
    assert_eq!(
        forwarded(&http),
        before,
        "the routing client's writes go direct"
    );
    assert!(!router.is_single_cell());

    kill_the_leader_of_cell_1(&mut fabric, &mut routed).await;

    // Move cell 1's range (it starts at 0) to cell 2: WrongRange, a fresh map, direct again.
    let (ok, _, err) = whip(&args(&[
        "fabric",
        "move",
        "--start",
        "0",
        "--to",
        "2",
        "--cell",
        &fabric.addrs[0],
        "--json",
    ]));
    assert!(ok, "fabric move: {err}");
    routed.batch(4 * PARTITIONS).await;
    routed.until_direct(&http, "after the move").await;
    none_lost_none_twice(&routed).await;
}
