//! Goal: a watch neither loses nor repeats an event while the members it reads from die.
//! Method: a prefix watch from the first write's revision follows 3 member processes while
//! a writer puts and deletes keys; each member is SIGKILLed and restarted in turn (so the
//! member serving the watch and the leader both die). Every acknowledged write must arrive
//! once, in revision order, with its value; nothing else under the prefix may arrive (and
//! `before`, written just ahead of the watch's start revision, is outside it).

use std::time::Duration;

use whip_cell::client::WatchBatch;
use whip_proto::v1 as pb;
use whip_tests::ProcessCluster;

const WRITES: u64 = 120;

/// What the writer was told, in order: (key, value; empty for a delete). The writer is
/// sequential, so this is also revision order.
type Acked = Vec<(Vec<u8>, Vec<u8>)>;

async fn write(client: &whip_cell::CellClient, n: u64, acked: &mut Acked) {
    let key = format!("watched/{}", n % 7).into_bytes();
    if n % 5 == 4 {
        let del = pb::KvDeleteRequest {
            key: key.clone(),
            ..Default::default()
        };
        let r = client.kv_delete(del).await.expect("delete");
        if r.code == pb::OutcomeCode::KvDeleted as i32 {
            acked.push((key, Vec::new()));
        }
        return;
    }
    let value = format!("v{n}").into_bytes();
    let put = pb::KvPutRequest {
        key: key.clone(),
        value: value.clone(),
        ..Default::default()
    };
    let r = client.kv_put(put).await.expect("put");
    assert_eq!(r.code, pb::OutcomeCode::KvWritten as i32, "{r:?}");
    acked.push((key, value));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_follows_member_kills_without_loss_or_repeat() {
    whip_tests::init_tracing();
    let mut cluster = ProcessCluster::start(3).await;
    let writer = cluster.client();
    let mut acked = Acked::new();
    let first = writer
        .kv_put(pb::KvPutRequest {
            key: b"before".to_vec(),
            value: b"x".to_vec(),
            ..Default::default()
        })
        .await
        .expect("a first write")
        .version;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<WatchBatch>(1024);
    let watcher = cluster.client();
    let follow = tokio::spawn(async move {
        watcher
            .follow((b"watched/".to_vec(), true), first, tx)
            .await
    });
    for n in 1..WRITES {
        if n % 30 == 0 {
            let victim = n / 30;
            cluster.kill(victim);
            write(&writer, n, &mut acked).await;
            cluster.spawn(victim);
        } else {
            write(&writer, n, &mut acked).await;
        }
    }
    let mut seen = Vec::new();
    while seen.len() < acked.len() {
        let batch = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the watch reaches the last write within 60 s")
            .expect("the watch is still following");
        for e in batch.events {
            seen.push((e.revision, e.key, e.value));
        }
    }
    follow.abort();
    let revisions: Vec<u64> = seen.iter().map(|(r, ..)| *r).collect();
    let mut sorted = revisions.clone();
    sorted.dedup();
    assert_eq!(revisions, sorted, "events in order, none repeated");
    let got: Acked = seen.into_iter().map(|(_, k, v)| (k, v)).collect();
    assert_eq!(
        got, acked,
        "every acknowledged write once, in order, nothing else"
    );
}
