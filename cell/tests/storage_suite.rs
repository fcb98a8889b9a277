//! Goal: both storage backends behave the same and as openraft requires.
//! Method: openraft's own storage suite for the log (and the state machine's Raft duties)
//! on redb and on sled; then our state-machine suite: one deterministic command log applied
//! through the real store on each backend and through `whip_board` on the in-memory map must
//! leave the same bytes, and a snapshot built on one backend installs on the other.

use std::sync::Arc;

use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{Entry, EntryPayload, LogId, RaftSnapshotBuilder};
use whip_board::{Command, MemTxn, Request, Reset, ResourceId, Stamp};
use whip_cell::storage::{
    Backend, LogStore, NodeLog, SmStore, StorageKind, open_backend, open_backend_on,
};
use whip_cell::types::{Batch, StorageError, TypeConfig};

struct Builder(StorageKind);

impl StoreBuilder<TypeConfig, LogStore, SmStore, tempfile::TempDir> for Builder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, SmStore), StorageError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let backend = open_backend(self.0, dir.path()).expect("open backend");
        let sm = SmStore::open(backend.clone(), dir.path().to_path_buf()).await?;
        Ok((
            dir,
            LogStore::new(backend, Default::default()).expect("log writer"),
            sm,
        ))
    }
}

#[test]
fn openraft_suite_redb() {
    Suite::test_all(Builder(StorageKind::Redb)).expect("redb passes the openraft storage suite");
}

/// A cell whose log is its part of a node's one log, beside another cell's records.
struct NodeLogBuilder;

impl StoreBuilder<TypeConfig, LogStore, SmStore, tempfile::TempDir> for NodeLogBuilder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, SmStore), StorageError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let faults = whip_cell::DiskFaults::default();
        let node_log = NodeLog::open(&dir.path().join("node-log"), faults.clone()).expect("log");
        let neighbour: Vec<(u64, Vec<u8>)> = (1..50).map(|i| (i, vec![7u8; 40])).collect();
        node_log
            .cell(2)
            .append(&neighbour)
            .expect("a neighbour's entries");
        let cell_dir = dir.path().join("cells/1");
        let log = Some(node_log.cell(1));
        let backend = open_backend_on(StorageKind::Redb, &cell_dir, faults, log).expect("open");
        let sm = SmStore::open(backend.clone(), cell_dir).await?;
        Ok((
            dir,
            LogStore::new(backend, Default::default()).expect("log writer"),
            sm,
        ))
    }
}

#[test]
fn openraft_suite_node_log() {
    Suite::test_all(NodeLogBuilder).expect("the node log passes the openraft storage suite");
}

/// A cell directory made on the node log refuses to open with a log of its own (it would
/// start empty and forget its vote); a replaced directory (a restore) starts the cell's
/// part of the node log afresh.
#[test]
fn a_node_log_cell_keeps_to_the_node_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let faults = whip_cell::DiskFaults::default();
    let node_dir = dir.path().join("node-log");
    let cell_dir = dir.path().join("cells/1");
    let open_on = |log: &std::sync::Arc<NodeLog>| {
        open_backend_on(
            StorageKind::Redb,
            &cell_dir,
            faults.clone(),
            Some(log.cell(1)),
        )
        .expect("open on the node log")
    };
    {
        let log = NodeLog::open(&node_dir, faults.clone()).expect("log");
        let backend = open_on(&log);
        backend.meta_put("vote", b"v".to_vec()).expect("vote");
        backend.log_append(&[(1, b"e1".to_vec())]).expect("append");
    }
    let refused = open_backend(StorageKind::Redb, &cell_dir)
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("--log node"), "{refused}");
    let log = NodeLog::open(&node_dir, faults.clone()).expect("log");
    let backend = open_on(&log);
    assert_eq!(backend.meta_get("vote").expect("meta"), Some(b"v".to_vec()));
    assert_eq!(backend.log_last().expect("last").map(|(i, _)| i), Some(1));
    drop(backend);
    std::fs::remove_dir_all(&cell_dir).expect("replace the directory");
    let backend = open_on(&log);
    assert_eq!(backend.meta_get("vote").expect("meta"), None);
    assert_eq!(backend.log_last().expect("last"), None);
}

#[test]
fn openraft_suite_sled() {
    Suite::test_all(Builder(StorageKind::Sled)).expect("sled passes the openraft storage suite");
}

/// A deterministic mix of every command over a few keys, holders and partitions.
fn command_log(len: usize) -> Vec<Request> {
    let mut x: u64 = 0x5eed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let id = |name: &str, key: u64| ResourceId {
        owner: "t".into(),
        name: name.into(),
        key: format!("k{key}"),
    };
    (0..len)
        .map(|i| {
            let r = next();
            let command = match r % 9 {
                0 => Command::KvPut {
                    key: format!("kv{}", r % 5).into_bytes(),
                    value: vec![i as u8],
                    expect_version: None,
                },
                1 => Command::KvDelete {
                    key: format!("kv{}", r % 5).into_bytes(),
                    expect_version: None,
                },
                2 | 3 => Command::LeaseAcquire {
                    lease: id("lease", r % 3),
                    holder: format!("h{}", (r >> 8) % 4),
                    slots: 2,
                    ttl_ms: 50 + (r >> 16) % 500,
                    wait_ms: (r >> 20) % 2 * 300,
                },
                4 => Command::LeaseRelease {
                    lease: id("lease", r % 3),
                    holder: format!("h{}", (r >> 8) % 4),
                },
                5 => Command::CounterConsume {
                    counter: id("budget", r % 2),
                    amount: (r >> 8) % 40,
                    cap: 100,
                    reset: Reset::Hourly,
                    timezone: "Europe/Berlin".into(),
                },
                6 => Command::LedgerAppend {
                    ledger: id("audit", r % 2),
                    entry: vec![b'x'; 8],
                    appended_by: "t".into(),
                    retain_ms: 2_000,
                },
                7 => Command::LeaseReleaseAll {
                    holder: format!("h{}", (r >> 8) % 4),
                },
                _ => Command::Tick,
            };
            let idempotency_key = (r % 4 == 0).then(|| format!("idem-{}", r % 50));
            Request::server(idempotency_key, command)
        })
        .collect()
}

/// Entries of `per_entry` requests each, 97 ms of leader time apart.
fn entries(log: &[Request], per_entry: usize) -> Vec<Entry<TypeConfig>> {
    log.chunks(per_entry)
        .enumerate()
        .map(|(i, chunk)| Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), i as u64 + 1),
            payload: EntryPayload::Normal(Batch {
                time_ms: 1_700_000_000_000 + i as u64 * 97,
                requests: chunk.to_vec(),
            }),
        })
        .collect()
}

fn model(log: &[Request], per_entry: usize) -> MemTxn {
    let mut txn = MemTxn::default();
    for (i, chunk) in log.chunks(per_entry).enumerate() {
        for (position, request) in chunk.iter().enumerate() {
            let time_ms = 1_700_000_000_000 + i as u64 * 97;
            let stamp = Stamp::of_request(i as u64 + 1, position as u32, time_ms);
            whip_board::apply(&mut txn, stamp, request);
        }
    }
    txn
}

/// Board bytes of a backend, without the store's own bookkeeping key (0xff prefix).
fn board_bytes(backend: &Arc<dyn Backend>) -> Vec<(Vec<u8>, Vec<u8>)> {
    backend
        .sm_dump()
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.first() != Some(&0xff))
        .collect()
}

async fn apply_through_store(
    kind: StorageKind,
    dir: &std::path::Path,
    log: &[Request],
) -> (Arc<dyn Backend>, SmStore) {
    let backend = open_backend(kind, dir).unwrap();
    let mut sm = SmStore::open(backend.clone(), dir.to_path_buf())
        .await
        .unwrap();
    // Apply in several calls, as openraft does, to cross commit boundaries.
    let all = entries(log, 7);
    for chunk in all.chunks(13) {
        sm.apply(chunk.to_vec()).await.unwrap();
    }
    (backend, sm)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_machine_suite_backends_agree_with_the_model() {
    let log = command_log(3_000);
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model(&log, 7).map.into_iter().collect();
    assert!(!expected.is_empty());
    let mut snapshots = Vec::new();
    for kind in [StorageKind::Redb, StorageKind::Sled] {
        let dir = tempfile::tempdir().unwrap();
        let (backend, mut sm) = apply_through_store(kind, dir.path(), &log).await;
        assert_eq!(
            board_bytes(&backend),
            expected,
            "{kind:?} state differs from the model"
        );
        let mut builder = sm.get_snapshot_builder().await;
        snapshots.push((kind, builder.build_snapshot().await.unwrap(), dir));
    }
    // A snapshot from each backend installs on the other and gives the same bytes.
    for (from, snapshot, _dir) in snapshots {
        let to = if from == StorageKind::Redb {
            StorageKind::Sled
        } else {
            StorageKind::Redb
        };
        let dir = tempfile::tempdir().unwrap();
        let backend = open_backend(to, dir.path()).unwrap();
        let mut sm = SmStore::open(backend.clone(), dir.path().to_path_buf())
            .await
            .unwrap();
        sm.install_snapshot(&snapshot.meta, snapshot.snapshot)
            .await
            .unwrap();
        assert_eq!(
            board_bytes(&backend),
            expected,
            "snapshot {from:?} → {to:?} differs"
        );
        let (applied, _) = sm.applied_state().await.unwrap();
        assert_eq!(applied, snapshot.meta.last_log_id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_survives_reopen() {
    for kind in [StorageKind::Redb, StorageKind::Sled] {
        let dir = tempfile::tempdir().unwrap();
        let log = command_log(100);
        {
            let backend = open_backend(kind, dir.path()).unwrap();
            let rows: Vec<(u64, Vec<u8>)> = entries(&log, 10)
                .iter()
                .map(|e| (e.log_id.index, whip_cell::types::encode(e)))
                .collect();
            backend.log_append(&rows).unwrap();
        }
        let backend = open_backend(kind, dir.path()).unwrap();
        let mut store = LogStore::new(backend, Default::default()).expect("log writer");
        let state = store.get_log_state().await.unwrap();
        assert_eq!(
            state.last_log_id.map(|l| l.index),
            Some(10),
            "{kind:?} lost log entries on reopen"
        );
    }
}

/// A state machine whose own store is behind its durable snapshot (its commits are mostly
/// non-durable, so a power loss rolls it back) starts from the snapshot when it opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_recovers_state_from_a_newer_snapshot() {
    let log = command_log(500);
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model(&log, 7).map.into_iter().collect();
    for kind in [StorageKind::Redb, StorageKind::Sled] {
        let built = tempfile::tempdir().unwrap();
        let (_backend, mut sm) = apply_through_store(kind, built.path(), &log).await;
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        // A fresh store that lost everything but the durable snapshot file.
        let lost = tempfile::tempdir().unwrap();
        std::fs::copy(
            built.path().join("snapshot.bin"),
            lost.path().join("snapshot.bin"),
        )
        .unwrap();
        let backend = open_backend(kind, lost.path()).unwrap();
        let mut reopened = SmStore::open(backend.clone(), lost.path().to_path_buf())
            .await
            .unwrap();
        let (applied, _) = reopened.applied_state().await.unwrap();
        assert_eq!(
            applied, snapshot.meta.last_log_id,
            "{kind:?} did not start from the snapshot"
        );
        assert_eq!(
            board_bytes(&backend),
            expected,
            "{kind:?} state differs after recovery"
        );
    }
}

#[test]
fn openraft_suite_redb_log() {
    Suite::test_all(Builder(StorageKind::RedbLog))
        .expect("the all-redb layout passes the openraft storage suite");
}
