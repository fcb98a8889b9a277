//! Goal: a key watch in a fabric neither loses nor repeats an event while the key's range
//! moves to another cell and a node dies (issue 30, item 1).
//! Method: a writer puts one key sixty times in sequence; a watcher follows it from the
//! first write's revision. After twenty writes the key's range moves to the other data
//! cell (the watch's stream ends `moved` and the client finds the new owner); after forty,
//! node 3 is killed, and it comes back five writes later. Another writer puts other keys
//! all along. The watcher must see every
//! acknowledged value once, in order, with revisions that only grow across the move.

use std::time::Duration;

use whip_board::route;
use whip_cell::client::WatchBatch;
use whip_tests::fabric::Fabric;

use crate::{agent, put};

const KEY: &str = "moving-key";
const WRITES: u64 = 60;

/// Move the range holding [`KEY`] to the data cell that does not own it.
async fn move_key(fabric: &Fabric) {
    let node = fabric.node(1).clone();
    let map = node.map().await.expect("map");
    let range = *map.locate(route::kv_point(KEY.as_bytes()));
    let to = if range.cell == 1 { 2 } else { 1 };
    whip_fabric::admin::move_range(&node, range.start, to)
        .await
        .expect("move the key's range");
    let map = node.map().await.expect("map");
    assert_eq!(map.locate(route::kv_point(KEY.as_bytes())).cell, to);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_watch_follows_a_move_and_a_node_kill() {
    whip_tests::init_tracing();
    let mut fabric = Fabric::start(3, 2).await;
    let writer = agent(&fabric, "writer").await;
    let watcher = agent(&fabric, "watcher").await;
    let first = put(&writer, KEY, "v0", None).await.version;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<WatchBatch>(1024);
    let follow = tokio::spawn(async move {
        let key = (KEY.as_bytes().to_vec(), false);
        watcher.follow(key, first, tx).await
    });
    // Other keys keep every cell's head moving, during the move's freeze too: a resumed
    // watch must start from the key's own last event, not the old cell's head.
    let noise = {
        let client = agent(&fabric, "noise").await;
        tokio::spawn(async move {
            for i in 0u64.. {
                let _ = client
                    .kv_put(whip_proto::v1::KvPutRequest {
                        key: format!("noise-{}", i % 64).into_bytes(),
                        value: b"x".to_vec(),
                        ..Default::default()
                    })
                    .await;
            }
        })
    };
    let mut acked = vec!["v0".to_string()];
    for n in 1..=WRITES {
        match n {
            20 => move_key(&fabric).await,
            40 => fabric.kill(3).await,
            45 => fabric.start_node(3).await,
            _ => {}
        }
        let value = format!("v{n}");
        put(&writer, KEY, &value, None).await;
        acked.push(value);
    }
    let mut seen = Vec::new();
    while seen.len() < acked.len() {
        let batch = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the watch reaches the last write within 60 s")
            .expect("the watch is still following");
        for e in batch.events {
            assert_eq!(e.key, KEY.as_bytes());
            seen.push((e.revision, String::from_utf8(e.value).expect("utf-8")));
        }
    }
    follow.abort();
    noise.abort();
    let revisions: Vec<u64> = seen.iter().map(|(r, _)| *r).collect();
    assert!(
        revisions.windows(2).all(|w| w[0] < w[1]),
        "revisions only grow: {revisions:?}"
    );
    let values: Vec<String> = seen.into_iter().map(|(_, v)| v).collect();
    assert_eq!(values, acked, "every acknowledged value once, in order");
    fabric.shutdown().await;
}

/// The next batch of `rx`, within `bound`.
async fn next_batch(
    rx: &mut tokio::sync::mpsc::Receiver<WatchBatch>,
    bound: Duration,
) -> WatchBatch {
    tokio::time::timeout(bound, rx.recv())
        .await
        .expect("an event within the bound")
        .expect("the watch is still following")
}

/// Goal: a prefix watch follows a range into a cell that owned nothing when the watch
/// opened (the 16-cell chaos run's watch finding: such a cell had no stream).
/// Method: 2 data cells; every range of cell 2 moves to cell 1; a prefix follow opens; a
/// key under the prefix is put (cell 1 sends it), its range moves to the empty cell 2, and
/// the key is put again: cell 2's stream must send it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prefix_watch_follows_a_range_into_a_cell_that_owned_nothing() {
    whip_tests::init_tracing();
    let fabric = Fabric::start(3, 2).await;
    let node = fabric.node(1).clone();
    let map = node.map().await.expect("map");
    for range in map.ranges.iter().filter(|r| r.cell == 2) {
        whip_fabric::admin::move_range(&node, range.start, 1)
            .await
            .expect("empty cell 2");
    }
    assert!(
        node.map()
            .await
            .expect("map")
            .ranges
            .iter()
            .all(|r| r.cell == 1)
    );
    let writer = agent(&fabric, "writer").await;
    let watcher = agent(&fabric, "watcher").await;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<WatchBatch>(1024);
    let follow =
        tokio::spawn(async move { watcher.follow((b"into/".to_vec(), true), 1, tx).await });
    put(&writer, "into/key", "before", None).await;
    let before = next_batch(&mut rx, Duration::from_secs(30)).await;
    assert_eq!(
        (before.cell, before.events[0].value.as_slice()),
        (1, &b"before"[..])
    );

    let point = route::kv_point(b"into/key");
    let start = node.map().await.expect("map").locate(point).start;
    whip_fabric::admin::move_range(&node, start, 2)
        .await
        .expect("move into cell 2");
    put(&writer, "into/key", "after", None).await;
    let after = next_batch(&mut rx, Duration::from_secs(30)).await;
    assert_eq!(
        (after.cell, after.events[0].value.as_slice()),
        (2, &b"after"[..])
    );
    follow.abort();
    fabric.shutdown().await;
}

/// Goal: a followed watch whose serving node stops answering (SIGSTOP: its connections stay
/// open and say nothing) reopens on another node without losing an event.
/// Method: three `whip node serve` processes, one data cell; the watcher reaches node 1
/// first, so node 1 serves its stream. After the first event node 1 is stopped, and puts
/// through nodes 2 and 3 must still reach the watcher (the stream's heartbeat stops, the
/// client drops it after its silence bound and reopens at its cursor elsewhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_leaves_a_node_that_went_silent() {
    whip_tests::init_tracing();
    let fabric = whip_tests::fabric::ProcessFabric::start(3).await;
    fabric.init(1);
    let watcher = whip_cell::CellClient::connect(&fabric.addrs).expect("client");
    let writer =
        std::sync::Arc::new(whip_cell::CellClient::connect(&fabric.addrs[1..]).expect("client"));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<WatchBatch>(1024);
    let follow =
        tokio::spawn(async move { watcher.follow((b"quiet/".to_vec(), true), 1, tx).await });
    let write = |value: &'static str| {
        let writer = writer.clone();
        async move {
            let request = whip_proto::v1::KvPutRequest {
                key: b"quiet/key".to_vec(),
                value: value.as_bytes().to_vec(),
                ..Default::default()
            };
            writer
                .kv_put(request)
                .await
                .expect("put through nodes 2 and 3");
        }
    };
    write("first").await;
    let first = next_batch(&mut rx, Duration::from_secs(30)).await;
    assert_eq!(first.events[0].value, b"first");
    fabric.pause(1);
    write("second").await;
    write("third").await;
    let mut values = Vec::new();
    while values.len() < 2 {
        // The silence bound, a reopen, and a new leader if node 1 led the cell.
        let batch = next_batch(&mut rx, Duration::from_secs(30)).await;
        values.extend(batch.events.into_iter().map(|e| e.value));
    }
    assert_eq!(
        values,
        [b"second".to_vec(), b"third".to_vec()],
        "none lost, none repeated"
    );
    fabric.resume(1);
    follow.abort();
}
