//! A range move whose driver stalls (the 30-minute chaos run's first finding).
//!
//! Frozen: the driver node is SIGSTOPped right after it froze the range, and the range must
//! serve again within the freeze's hold plus a bound, taken over by another node under the
//! range-admin lease and finished; every row arrives once, no cell keeps a copy the map does
//! not give it, and the old driver, resumed, is refused as superseded.
//!
//! Before the freeze: the driver is SIGSTOPped once it copied the range while the source
//! still serves it; the range keeps serving, keys change and go meanwhile, and a new move
//! to the same target resumes from the source's mark of the copy instead of copying the
//! range again, then sends what changed: no deleted key comes back.
//!
//! The driver's window is widened by the `test-hooks` feature's `WHIP_TEST_MOVE_HOLD`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use whip_board::route;
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::node_client::NodeClient;
use whip_tests::fabric::ProcessFabric;
use whip_tests::wait_for;

/// Rows loaded into the moving range (a few pages of `MOVE_PAGE_ROWS`).
const ROWS: usize = 8_000;
/// Loaders writing them.
const LOADERS: usize = 16;
/// Beyond the freeze's hold: the lease lapsing, the next look and the whole copy again.
const TAKEOVER_BOUND_MS: u64 = 15_000;

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

/// Wait until node 3, driving the move, reports phase `phase` with rows copied; then stop
/// it (the test hook holds the driver there).
async fn pause_in(fabric: &ProcessFabric, phase: &str) {
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
            .any(|c| c.phase == phase && c.rows > 0)
        {
            fabric.pause(3);
            return;
        }
        assert!(Instant::now() < deadline, "the move never copied a page");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A 3-node fabric of 2 cells whose node 3 holds its moves at `hold`
/// (`WHIP_TEST_MOVE_HOLD`), a client, the first range and the other cell.
async fn start_holding(hold: &str) -> (ProcessFabric, Arc<CellClient>, pb::RangeInfo, u64) {
    let fabric = ProcessFabric::start_with_node_env(3, 3, &[("WHIP_TEST_MOVE_HOLD", hold)]).await;
    fabric.init(2);
    let client = Arc::new(CellClient::connect(&fabric.addrs).expect("client"));
    let first = status(&fabric.addrs[0]).await;
    let ranges: Vec<pb::RangeInfo> = first.cells.iter().flat_map(|c| c.ranges.clone()).collect();
    let range = *ranges.iter().min_by_key(|r| r.start).expect("a range");
    let to_cell = (ranges.iter().find(|r| r.cell != range.cell))
        .expect("2 cells")
        .cell;
    (fabric, client, range, to_cell)
}

/// Start moving `range` to `to_cell` with node 3 as its driver.
fn move_on_node_3(
    fabric: &ProcessFabric,
    range: pb::RangeInfo,
    to_cell: u64,
) -> tokio::task::JoinHandle<MoveAnswer> {
    let channel = whip_cell::network::endpoint(&fabric.addrs[2]).connect_lazy();
    let mut driver = NodeClient::new(channel);
    let request = pb::RangeMoveRequest {
        start: range.start,
        to_cell,
    };
    tokio::spawn(async move { driver.range_move(request).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_whose_driver_stalls_is_taken_over_and_the_driver_refused() {
    let (fabric, client, range, to_cell) = start_holding("copying:10000").await;
    let survivors = fabric.addrs[..2].to_vec();
    let keys = keys_in(range.start, range.last, ROWS + 1);
    let (probe, keys) = keys.split_last().expect("keys");
    load(&client, keys).await;

    let moving = move_on_node_3(&fabric, range, to_cell);
    pause_in(&fabric, "copying").await;

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

/// Rows loaded for the stall before the freeze (one export page or two).
const PRECOPY_ROWS: usize = 3_000;
/// Keys deleted, rewritten and added while the first driver is stopped.
const CHANGED: usize = 200;
/// The longest a write of the range may wait while the driver is stopped before its freeze:
/// the range never stops serving, so only the elections of the cells the stopped node led.
const SERVING_BOUND_MS: u64 = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_stalled_before_its_freeze_leaves_the_range_serving_and_no_stale_copy() {
    let (fabric, client, range, to_cell) = start_holding("precopying:60000").await;
    let survivors = fabric.addrs[..2].to_vec();
    let keys = keys_in(range.start, range.last, PRECOPY_ROWS + CHANGED);
    let (loaded, added) = keys.split_at(PRECOPY_ROWS);
    load(&client, loaded).await;

    let moving = move_on_node_3(&fabric, range, to_cell);
    pause_held(&fabric, "precopying", PRECOPY_ROWS as u64).await;

    // The range still serves: its keys change and go while the stopped driver holds its
    // copy on the target.
    let (deleted, rewritten) = loaded[..2 * CHANGED].split_at(CHANGED);
    change_while_stalled(&survivors, deleted, rewritten, added).await;

    // A new move from node 1 (once the stopped driver's lease lapses) to the same target.
    let moved = move_from(&fabric.addrs[0], range.start, to_cell).await;
    assert_eq!(moved.ranges.first().map(|r| r.cell), Some(to_cell));
    // It copied on from the stopped driver's mark: what changed and the keys after the
    // mark, not the whole range again.
    assert!(
        moved.rows < PRECOPY_ROWS as u64,
        "the second move copied {} rows of {PRECOPY_ROWS}: it did not resume",
        moved.rows
    );
    fabric.resume(3);
    refused_as_superseded(moving).await;

    check_changed(&client, deleted, rewritten).await;
    check_rows(&client, &loaded[2 * CHANGED..]).await;
    check_rows(&client, added).await;
    wait_for("no range alarm", Duration::from_secs(20), || {
        let addr = fabric.addrs[0].clone();
        async move { status(&addr).await.alarms.is_empty() }
    })
    .await;
}

/// Delete `deleted`, rewrite `rewritten` and add `added` through `survivors`; each delete
/// after the first (which may wait for elections) within `SERVING_BOUND_MS`.
async fn change_while_stalled(
    survivors: &[String],
    deleted: &[String],
    rewritten: &[String],
    added: &[String],
) {
    let writer = Arc::new(
        CellClient::connect(survivors)
            .expect("client")
            .with_attempt_timeout(Duration::from_secs(2)),
    );
    for (n, key) in deleted.iter().enumerate() {
        let delete = pb::KvDeleteRequest {
            key: key.clone().into_bytes(),
            ..Default::default()
        };
        let took = Instant::now();
        writer
            .kv_delete(delete)
            .await
            .expect("delete while stalled");
        let bound = Duration::from_millis(SERVING_BOUND_MS);
        assert!(
            n == 0 || took.elapsed() < bound,
            "delete {n} waited {:?}",
            took.elapsed()
        );
    }
    load(&writer, added).await;
    for key in rewritten {
        let put = pb::KvPutRequest {
            key: key.clone().into_bytes(),
            value: b"rewritten".to_vec(),
            ..Default::default()
        };
        writer.kv_put(put).await.expect("rewrite while stalled");
    }
}

/// `deleted` stay gone and `rewritten` keep their last write.
async fn check_changed(client: &CellClient, deleted: &[String], rewritten: &[String]) {
    for key in deleted {
        let get = pb::KvGetRequest {
            key: key.clone().into_bytes(),
            ..Default::default()
        };
        let found = client.kv_get(get).await.expect("get");
        assert!(!found.found, "{key}, deleted before the move, came back");
    }
    for key in rewritten {
        let get = pb::KvGetRequest {
            key: key.clone().into_bytes(),
            ..Default::default()
        };
        let found = client.kv_get(get).await.expect("get");
        assert_eq!(found.value, b"rewritten", "{key} lost its last write");
    }
}

/// Wait until node 3's move is held by the test hook at the end of phase `phase`: at least
/// `rows` rows copied and no more copied for a second (the hook holds it far longer); then
/// stop it.
async fn pause_held(fabric: &ProcessFabric, phase: &str, rows: u64) {
    let channel = whip_cell::network::endpoint(&fabric.addrs[2]).connect_lazy();
    let mut driver = NodeClient::new(channel);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = (0, Instant::now());
    loop {
        let progress = (driver.range_progress(pb::RangeProgressRequest {}).await)
            .expect("progress")
            .into_inner();
        let copied = (progress.changes.iter())
            .find(|c| c.phase == phase)
            .map_or(0, |c| c.rows);
        if copied != seen.0 {
            seen = (copied, Instant::now());
        } else if copied >= rows && seen.1.elapsed() > Duration::from_secs(1) {
            fabric.pause(3);
            return;
        }
        assert!(Instant::now() < deadline, "the move never finished {phase}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Move the range at `start` to `to_cell` through the node at `addr`, retrying while
/// another driver's range-admin lease is still held.
async fn move_from(addr: &str, start: u64, to_cell: u64) -> pb::RangeMoveResponse {
    let channel = whip_cell::network::endpoint(addr).connect_lazy();
    let mut node = NodeClient::new(channel);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let request = pb::RangeMoveRequest { start, to_cell };
        match node.range_move(request).await {
            Ok(answer) => return answer.into_inner(),
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "the second move never ran: {e:?}"
                );
                eprintln!("second move: {e:?}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
