//! A range move whose driver stalls mid-copy (the 30-minute chaos run's first finding): the
//! driver node is SIGSTOPped while it copies, and the range must serve again within the
//! freeze's hold plus a bound, taken over by another node under the range-admin lease and
//! finished; every row arrives once, no cell keeps a copy the map does not give it, and the
//! old driver, resumed, is refused as superseded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use whip_board::route;
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::node_client::NodeClient;
use whip_tests::fabric::ProcessFabric;
use whip_tests::{wait_for, whip_binary};

/// Rows loaded into the moving range (a few pages of `MOVE_PAGE_ROWS`).
const ROWS: usize = 8_000;
/// Loaders writing them.
const LOADERS: usize = 16;
/// Beyond the freeze's hold: the lease lapsing, the next look and the whole copy again.
const TAKEOVER_BOUND_MS: u64 = 15_000;

fn init(fabric: &ProcessFabric) {
    let mut init: Vec<String> = ["fabric", "init", "--cells", "2", "--cell"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    init.push(fabric.addrs[0].clone());
    init.extend(fabric.node_args());
    let out = std::process::Command::new(whip_binary())
        .args(&init)
        .output()
        .expect("init");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
}

/// Keys whose points fall in `[start, last]`.
fn keys_in(start: u64, last: u64, count: usize) -> Vec<String> {
    (0u64..)
        .map(|i| format!("stall/{i}"))
        .filter(|k| (start..=last).contains(&route::kv_point(k.as_bytes())))
        .take(count)
        .collect()
}

async fn load(client: &Arc<CellClient>, keys: &[String]) {
    let keys = Arc::new(keys.to_vec());
    let mut loaders = Vec::new();
    for l in 0..LOADERS {
        let (client, keys) = (client.clone(), keys.clone());
        loaders.push(tokio::spawn(async move {
            for key in keys.iter().skip(l).step_by(LOADERS) {
                let put = pb::KvPutRequest {
                    key: key.clone().into_bytes(),
                    value: key.clone().into_bytes(),
                    ..Default::default()
                };
                client.kv_put(put).await.expect("load");
            }
        }));
    }
    for loader in loaders {
        loader.await.expect("loader");
    }
}

async fn status(addr: &str) -> pb::FabricStatusResponse {
    let channel = whip_cell::network::endpoint(addr).connect_lazy();
    let mut client = NodeClient::new(channel);
    let call = client.fabric_status(pb::FabricStatusRequest {});
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("status in time")
        .expect("status")
        .into_inner()
}

/// Wait until node 3, driving the move, reports copied rows; then stop it.
async fn pause_mid_copy(fabric: &ProcessFabric) {
    let channel = whip_cell::network::endpoint(&fabric.addrs[2]).connect_lazy();
    let mut driver = NodeClient::new(channel);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let progress = driver
            .range_progress(pb::RangeProgressRequest {})
            .await
            .expect("progress")
            .into_inner();
        if progress
            .changes
            .iter()
            .any(|c| c.phase == "copying" && c.rows > 0)
        {
            fabric.pause(3);
            return;
        }
        assert!(Instant::now() < deadline, "the move never copied a page");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_whose_driver_stalls_is_taken_over_and_the_driver_refused() {
    let fabric = ProcessFabric::start(3).await;
    init(&fabric);
    let survivors = fabric.addrs[..2].to_vec();
    let client = Arc::new(CellClient::connect(&fabric.addrs).expect("client"));
    let first = status(&fabric.addrs[0]).await;
    let ranges: Vec<pb::RangeInfo> = first.cells.iter().flat_map(|c| c.ranges.clone()).collect();
    let range = *ranges.iter().min_by_key(|r| r.start).expect("a range");
    let to_cell = ranges
        .iter()
        .find(|r| r.cell != range.cell)
        .expect("2 cells")
        .cell;
    let keys = keys_in(range.start, range.last, ROWS + 1);
    let (probe, keys) = keys.split_last().expect("keys");
    load(&client, keys).await;

    let channel = whip_cell::network::endpoint(&fabric.addrs[2]).connect_lazy();
    let mut driver = NodeClient::new(channel);
    let request = pb::RangeMoveRequest {
        start: range.start,
        to_cell,
    };
    let moving = tokio::spawn(async move { driver.range_move(request).await });
    pause_mid_copy(&fabric).await;

    // The range serves again through the other two nodes, taken over and moved.
    let took = served_again(&survivors, probe).await;
    eprintln!(
        "range served again {} ms after the driver stopped",
        took.as_millis()
    );

    let after = status(&survivors[0]).await;
    let moved = after
        .cells
        .iter()
        .flat_map(|c| &c.ranges)
        .find(|r| r.start == range.start);
    assert_eq!(moved.map(|r| r.cell), Some(to_cell), "{after:?}");

    fabric.resume(3);
    refused_as_superseded(moving).await;

    // Nothing the old driver did after it came back changed the map or a row.
    let last = status(&survivors[1]).await;
    let still = last
        .cells
        .iter()
        .flat_map(|c| &c.ranges)
        .find(|r| r.start == range.start);
    assert_eq!(
        still.map(|r| r.cell),
        Some(to_cell),
        "the old driver changed the map"
    );
    check_rows(&client, keys).await;
    // No cell holds a row of the range that the map does not give it (the source's frozen
    // copy was dropped): no key is owned twice.
    wait_for("no range alarm", Duration::from_secs(20), || {
        let addr = fabric.addrs[0].clone();
        async move { status(&addr).await.alarms.is_empty() }
    })
    .await;
}

/// Every loaded row reads back with its value.
async fn check_rows(client: &Arc<CellClient>, keys: &[String]) {
    let keys = Arc::new(keys.to_vec());
    let mut readers = Vec::new();
    for r in 0..LOADERS {
        let (client, keys) = (client.clone(), keys.clone());
        readers.push(tokio::spawn(async move {
            for key in keys.iter().skip(r).step_by(LOADERS) {
                let get = pb::KvGetRequest {
                    key: key.clone().into_bytes(),
                    ..Default::default()
                };
                let found = client.kv_get(get).await.expect("get");
                assert_eq!(found.value, key.as_bytes(), "{key} lost in the move");
            }
        }));
    }
    for reader in readers {
        reader.await.expect("reader");
    }
}

/// How long after now a write of `probe` went through one of `survivors`; fails past the
/// freeze's hold plus `TAKEOVER_BOUND_MS`.
async fn served_again(survivors: &[String], probe: &str) -> Duration {
    let paused = Instant::now();
    let writer = Arc::new(
        CellClient::connect(survivors)
            .expect("client")
            .with_attempt_timeout(Duration::from_secs(2)),
    );
    let bound = whip_board::limits::RANGE_FREEZE_MS + TAKEOVER_BOUND_MS;
    wait_for(
        "the range to serve again",
        Duration::from_millis(bound),
        || {
            let writer = writer.clone();
            let put = pb::KvPutRequest {
                key: probe.as_bytes().to_vec(),
                value: b"after".to_vec(),
                ..Default::default()
            };
            async move {
                let call = writer.kv_put(put);
                matches!(
                    tokio::time::timeout(Duration::from_secs(2), call).await,
                    Ok(Ok(_))
                )
            }
        },
    )
    .await;
    paused.elapsed()
}

type MoveAnswer = Result<tonic::Response<pb::RangeMoveResponse>, tonic::Status>;

/// The resumed old driver's move answers `ABORTED`, superseded.
async fn refused_as_superseded(moving: tokio::task::JoinHandle<MoveAnswer>) {
    let answer = tokio::time::timeout(Duration::from_secs(30), moving)
        .await
        .expect("the old driver answers once resumed")
        .expect("driver task");
    let refused = answer.expect_err("the old driver's move must be refused");
    assert_eq!(refused.code(), tonic::Code::Aborted, "{refused:?}");
    assert!(refused.message().contains("superseded"), "{refused:?}");
}
