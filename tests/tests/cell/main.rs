//! Cell behaviour on real clusters: 3 voters, real gRPC on 127.0.0.1, real storage in temp
//! directories. Files are ordered by behaviour, from election to bad input.

mod t10_elect;
mod t15_kv_txn;
mod t16_watch;
mod t20_follower;
mod t22_lease_reads;
mod t30_leader_kill;
mod t35_process_kill;
mod t36_process_pause;
mod t37_kill_mid_flush;
mod t40_restart;
mod t50_snapshot;
mod t55_big_snapshot;
mod t60_idempotency;
mod t70_lease_deadline;
mod t80_bad_input;
mod t90_membership;
mod t95_backup;

use whip_proto::v1 as pb;

/// A ledger append request on `partition` with `n` in the entry.
pub(crate) fn append(partition: &str, n: u64, key: &str) -> pb::LedgerAppendRequest {
    pb::LedgerAppendRequest {
        ledger: Some(pb::ResourceId {
            owner: "test".into(),
            name: "audit".into(),
            key: partition.into(),
        }),
        entry: format!("{{\"n\":{n}}}").into_bytes(),
        appended_by: "test".into(),
        retain_ms: 86_400_000,
        idempotency_key: key.into(),
    }
}

/// Every entry of `partition` (a linearizable read).
pub(crate) async fn entries(
    client: &whip_cell::CellClient,
    partition: &str,
) -> Vec<pb::LedgerEntry> {
    let req = pb::LedgerListRequest {
        owner: "test".into(),
        name: "audit".into(),
        partition: Some(partition.into()),
        after_seq: 0,
        limit: 0,
    };
    client.ledger_list(req).await.expect("ledger list").entries
}

/// A put of `value` under `key`.
pub(crate) fn put(key: &str, value: &str) -> pb::KvPutRequest {
    pb::KvPutRequest {
        key: key.into(),
        value: value.into(),
        ..Default::default()
    }
}
