//! Fabric behaviour: nodes hosting many cells, real gRPC on 127.0.0.1, real storage in temp
//! directories, 3 voters per cell on distinct nodes. Ordered from bootstrap to faults.

mod t10_init;
mod t20_routing;
mod t21_ephemeral;
mod t22_watch;
mod t25_direct;
mod t26_heartbeats;
mod t27_hibernation;
mod t30_singletons;
mod t40_moves;
mod t42_stalled_move;
mod t50_node_kill;
mod t51_node_log_kill;
mod t60_elections;
mod t70_schedules;
mod t80_fail_open;
mod t90_boards;
mod t92_rotate_certs;
mod t93_backup;
mod t95_handoff;
mod t96_follow_crash;
mod t97_registry;
mod t98_mail;
mod t99_mail_drain;
mod t99_paths;
mod t99_vote;

use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

/// The token a fabric test gives agent `agent`.
pub(crate) fn token(agent: &str) -> String {
    format!("{agent}-secret-token-0123456789-abcdefghij")
}

/// A client of every node acting for `name`, registered by the operator.
pub(crate) async fn agent(fabric: &whip_tests::fabric::Fabric, name: &str) -> CellClient {
    let client = fabric.client_of_all();
    let register = pb::AgentRegisterRequest {
        agent: name.into(),
        token: token(name),
        enroll: false,
    };
    client.agent_register(register).await.expect("register");
    client.with_identity(name, token(name))
}

/// Put `value` under `key` at `expect` (None = unconditional) through `client`.
pub(crate) async fn put(
    client: &CellClient,
    key: &str,
    value: &str,
    expect: Option<u64>,
) -> pb::KvWriteResponse {
    client
        .kv_put(pb::KvPutRequest {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            expect_version: expect,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("put {key}: {e}"))
}

/// Read `key` through `client`: `(value, version)` or None.
pub(crate) async fn get(client: &CellClient, key: &str) -> Option<(String, u64)> {
    let r = client
        .kv_get(pb::KvGetRequest {
            key: key.as_bytes().to_vec(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("get {key}: {e}"));
    r.found
        .then(|| (String::from_utf8(r.value).expect("utf-8"), r.version))
}

/// A singleton lease acquire of `scope` for `holder`.
pub(crate) fn singleton(scope: &str, holder: &str, ttl_ms: u64) -> pb::LeaseAcquireRequest {
    pb::LeaseAcquireRequest {
        lease: Some(pb::ResourceId {
            owner: "singleton".into(),
            name: scope.into(),
            key: String::new(),
        }),
        holder: holder.into(),
        slots: 1,
        ttl_ms,
        ..Default::default()
    }
}

/// Whether a lease answer is a grant.
pub(crate) fn held(r: &pb::LeaseResponse) -> bool {
    r.code == Code::LeaseHeld as i32
}
