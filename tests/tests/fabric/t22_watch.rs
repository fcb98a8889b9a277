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
