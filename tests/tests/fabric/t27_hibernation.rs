//! Goal: idle cells hibernate (no heartbeats, no election timers) and lose nothing by it: a
//! hibernating cell takes writes and linearizable reads at once, every cell whose leader's
//! node is killed while it sleeps elects a new leader through the nodes' pings, and the
//! killed node's cells hibernate again after it restarts. Method: three `whip node serve`
//! processes (TLS) as a fabric of 12 data cells, every node hosting every cell; `whip fabric
//! status --json` and `whip cell status --json` as an operator reads them; SIGKILL of the
//! node leading the most cells. The node ping is an empty `Raft/AppendBatch`: an anonymous
//! raw gRPC client's one is refused, so a node's boot id reaches only nodes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use whip_proto::v1 as pb;
use whip_tests::fabric::ProcessFabric;
use whip_tests::{wait_for, whip_json as whip};

const CELLS: u64 = 12;

fn status_args(addr: &str) -> Vec<String> {
    ["fabric", "status", "--cell", addr, "--json"]
        .map(String::from)
        .to_vec()
}

/// Every cell of the status through `addr`: id → (leader, hibernating), once all have one.
async fn cells_via(addr: &str) -> Option<BTreeMap<u64, (u64, bool)>> {
    let (ok, out, _) = whip(&status_args(addr));
    let cells = out["cells"].as_array().filter(|_| ok)?;
    let seen: BTreeMap<u64, (u64, bool)> = (cells.iter())
        .filter_map(|c| {
            let leader = c["leader"].as_u64()?;
            Some((c["id"].as_u64()?, (leader, c["hibernating"].as_bool()?)))
        })
        .collect();
    (seen.len() as u64 == CELLS + 1).then_some(seen)
}

/// Wait until every cell, as the member on the node at `addr` sees it, hibernates.
async fn all_hibernate(addr: &str, why: &str) -> BTreeMap<u64, (u64, bool)> {
    let addr = addr.to_string();
    wait_for(why, Duration::from_secs(60), || {
        let addr = addr.clone();
        async move {
            cells_via(&addr)
                .await
                .is_some_and(|c| c.values().all(|(_, asleep)| *asleep))
        }
    })
    .await;
    cells_via(&addr).await.expect("every cell has a leader")
}

/// Write `round` to 8 keys per cell (spread by the hash ring) and read each back.
async fn write_and_read(client: &whip_cell::CellClient, round: &str) {
    for i in 0..(8 * CELLS) {
        let key = format!("idle/{i}");
        let written = crate::put(client, &key, round, None).await;
        assert!(written.version > 0, "{key}: {written:?}");
        let read = crate::get(client, &key).await;
        assert_eq!(read.map(|r| r.0).as_deref(), Some(round), "{key}");
    }
}

/// The node leading the most cells, and how many it leads.
fn busiest_leader(cells: &BTreeMap<u64, (u64, bool)>) -> (u64, u64) {
    let mut led: BTreeMap<u64, u64> = BTreeMap::new();
    for (leader, _) in cells.values() {
        *led.entry(*leader).or_default() += 1;
    }
    let (victim, count) = led.into_iter().max_by_key(|(_, n)| *n).expect("leaders");
    (victim, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_cells_hibernate_serve_and_fail_over() {
    let mut fabric = ProcessFabric::start(3).await;
    fabric.init(CELLS as u32);
    let cells = all_hibernate(&fabric.addrs[0], "every cell to hibernate").await;

    // A member says so in its own status too (the `whip cell status` contract).
    let member = ["cell", "status", "--cell", &fabric.addrs[1], "--json"].map(String::from);
    let (ok, own, err) = whip(&member);
    assert!(ok, "{err}");
    assert_eq!(own["hibernating"], Value::Bool(true), "{own}");

    // Hibernating cells take writes and reads at once, and go back to sleep.
    let client = whip_cell::CellClient::connect(&fabric.addrs).expect("client");
    write_and_read(&client, "first").await;
    all_hibernate(&fabric.addrs[0], "every cell to hibernate again").await;

    // Kill the node leading the most cells while every cell sleeps.
    let (victim, count) = busiest_leader(&cells);
    let survivor = fabric.addrs[if victim == 1 { 1 } else { 0 }].clone();
    fabric.kill(victim);
    let killed = Instant::now();
    wait_for(
        "every cell to lead again on a survivor",
        Duration::from_secs(60),
        || {
            let survivor = survivor.clone();
            async move {
                cells_via(&survivor)
                    .await
                    .is_some_and(|c| c.values().all(|(leader, _)| *leader != victim))
            }
        },
    )
    .await;
    let elected = killed.elapsed();
    let survivors: Vec<String> = (1..=3u64)
        .filter(|id| *id != victim)
        .map(|id| fabric.addrs[(id - 1) as usize].clone())
        .collect();
    let client = whip_cell::CellClient::connect(&survivors).expect("client");
    write_and_read(&client, "after-kill").await;
    eprintln!(
        "node {victim} led {count} sleeping cells: new leaders after {elected:?}, \
         every cell written after {:?}",
        killed.elapsed()
    );

    // The killed node comes back; its members catch up and every cell sleeps again.
    fabric.spawn(victim);
    let back = fabric.addrs[(victim - 1) as usize].clone();
    all_hibernate(&back, "the restarted node's cells to hibernate").await;
    let client = whip_cell::CellClient::connect(std::slice::from_ref(&back)).expect("client");
    for i in 0..(8 * CELLS) {
        let read = crate::get(&client, &format!("idle/{i}")).await;
        assert_eq!(read.map(|r| r.0).as_deref(), Some("after-kill"), "idle/{i}");
    }

    // The ping carries a node's boot id: only a node may send it.
    let anonymous = whip_tests::ca_only_transport();
    let ping = pb::BlobBatch { blobs: Vec::new() };
    let refused = whip_tests::raw_unary::<_, pb::BlobAnswers>(
        &back,
        &anonymous,
        "/whip.v1.Raft/AppendBatch",
        ping,
    )
    .await
    .expect_err("an anonymous caller cannot ping a node");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
}
