//! The `registry` workload: agents register work under a small fabric ceiling, renew it,
//! signal it, revoke it or let it lapse; afterwards the live entries are listed.
//!
//! Every operation is on the one history key `registry/all`. The checks
//! ([`check_registry`]) need no clock of the servers, so they hold under clock skew:
//!
//! - **Never over the ceiling.** An entry is certainly live from its admission's completion
//!   to the invoke of its last renewal that extended it (alive at both applies, and an entry
//!   that lapsed never comes back). No instant may have more such entries than the ceiling.
//! - **No child outliving a revoked parent.** No renewal of an entry, or of an entry under it,
//!   is acknowledged after a revoke of it was acknowledged; the final listing holds nothing
//!   revoked and nothing under a revoked entry.
//! - **No phantom.** Every listed entry was admitted (when no registration's answer was
//!   lost), and the listing is within the ceiling.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use super::history::{Kind, Op, Recorder};
use super::invariants::Violation;
use super::workload::{Done, Worker, error_done};

/// The fabric's ceiling during a run: small, so workers meet it.
pub const REGISTRY_CEILING: u64 = 6;
/// An entry's lease.
pub const REGISTRY_TTL_MS: u64 = 2_000;
/// The history key of every registry operation.
pub const REGISTRY_KEY: &str = "registry/all";

fn work_error(e: &CellError) -> Done {
    // A refusal (unknown entry, not authorized) certainly changed nothing.
    let refused =
        matches!(e, CellError::PermissionDenied(_)) || e.to_string().contains("unknown_entry");
    match refused {
        true => Done::Fail(json!({ "error": e.to_string() })),
        false => error_done(e, false),
    }
}

/// The worker's agent client, registered on first use, and the ceiling set.
async fn agent(w: &mut Worker) -> Option<Arc<CellClient>> {
    if let Some(client) = &w.agent {
        return Some(client.clone());
    }
    let name = format!("chaos-reg-{}", w.seed);
    let token = format!("{name}-token-0123456789abcdefghijklmnop");
    let register = pb::AgentRegisterRequest {
        agent: name.clone(),
        token: token.clone(),
        enroll: false,
    };
    w.client.agent_register(register).await.ok()?;
    let limits = pb::WorkLimitsRequest {
        fabric_max: Some(REGISTRY_CEILING),
        ..Default::default()
    };
    let client = w.client.clone();
    let input = json!({ "fabric_max": REGISTRY_CEILING });
    w.run("limits", REGISTRY_KEY, input, async move {
        match client.work_limits(limits).await {
            Ok(r) => Done::Ok(json!({ "fabric_max": r.fabric_max })),
            Err(e) => error_done(&e, false),
        }
    })
    .await?;
    let client = w.connect()?.with_identity(name, token);
    w.agent = Some(Arc::new(client));
    w.agent.clone()
}

async fn register(w: &mut Worker, c: &Arc<CellClient>, parent: Option<&str>) -> Option<String> {
    let request = pb::WorkRegisterRequest {
        kind: "run".into(),
        parent: parent.unwrap_or_default().into(),
        ttl_ms: REGISTRY_TTL_MS,
        idempotency_key: c.next_idempotency_key(),
        ..Default::default()
    };
    let client = c.clone();
    let input = json!({ "parent": parent });
    let got = w
        .run("register", REGISTRY_KEY, input, async move {
            match client.work_register(request).await {
                Ok(r) => Done::Ok(json!({
                    "outcome": r.outcome, "limit": r.limit,
                    "id": r.entry.map(|e| e.id),
                })),
                Err(e) => work_error(&e),
            }
        })
        .await?;
    got.get("id")?.as_str().map(str::to_string)
}

async fn steer(w: &mut Worker, c: &Arc<CellClient>, f: &'static str, id: &str) {
    let client = c.clone();
    let key = c.next_idempotency_key();
    let id_owned = id.to_string();
    w.run(f, REGISTRY_KEY, json!({ "id": id }), async move {
        let answer = match f {
            "renew" => {
                let request = pb::WorkRenewRequest {
                    id: id_owned,
                    ttl_ms: REGISTRY_TTL_MS,
                    idempotency_key: key,
                };
                client.work_renew(request).await
            }
            "revoke" => {
                let request = pb::WorkRevokeRequest {
                    id: id_owned,
                    idempotency_key: key,
                };
                client.work_revoke(request).await
            }
            _ => {
                let request = pb::WorkSignalRequest {
                    id: id_owned,
                    signal: "stop".into(),
                    idempotency_key: key,
                };
                client.work_signal(request).await
            }
        };
        match answer {
            Ok(r) => Done::Ok(json!({
                "outcome": r.outcome, "signal": r.signal, "reason": r.signal_reason,
                "removed": r.removed,
            })),
            Err(e) => work_error(&e),
        }
    })
    .await;
}

/// Register a root (and sometimes a child), renew a few times, then revoke, stop or let
/// it lapse.
pub(super) async fn registry_round(w: &mut Worker) {
    let Some(c) = agent(w).await else {
        tokio::time::sleep(Duration::from_millis(200)).await;
        return;
    };
    let Some(root) = register(w, &c, None).await else {
        tokio::time::sleep(Duration::from_millis(REGISTRY_TTL_MS / 4)).await;
        return;
    };
    let child = match w.rng.random_bool(0.5) {
        true => register(w, &c, Some(&root)).await,
        false => None,
    };
    for _ in 0..w.rng.random_range(1..4) {
        tokio::time::sleep(Duration::from_millis(REGISTRY_TTL_MS / 3)).await;
        steer(w, &c, "renew", &root).await;
        if let Some(child) = &child {
            steer(w, &c, "renew", child).await;
        }
    }
    match w.rng.random_range(0..10) {
        0..=3 => steer(w, &c, "revoke", &root).await,
        4..=5 => steer(w, &c, "signal", &root).await,
        _ => {}
    }
    // A revoked root's child must be gone: try renewing it once more.
    if let Some(child) = &child {
        steer(w, &c, "renew", child).await;
    }
}

/// The live entries after the run, as one `list` operation.
pub(super) async fn final_registry(recorder: &Recorder, process: u64, client: &CellClient) {
    recorder.record(process, Kind::Invoke, "list", REGISTRY_KEY, Value::Null);
    match client.work_list(pb::WorkListRequest::default()).await {
        Ok(r) => {
            let ids: Vec<String> = r.entries.into_iter().map(|e| e.id).collect();
            recorder.record(
                process,
                Kind::Ok,
                "list",
                REGISTRY_KEY,
                json!({ "ids": ids }),
            );
        }
        Err(e) => {
            let error = json!({ "error": e.to_string() });
            recorder.record(process, Kind::Fail, "list", REGISTRY_KEY, error);
        }
    }
}

fn id_of(op: &Op) -> Option<&str> {
    op.input.get("id").and_then(Value::as_str)
}

fn under(id: &str, revoked: &str) -> bool {
    id == revoked || id.starts_with(&format!("{revoked}."))
}

fn violation(message: String, ops: &[&Op]) -> Violation {
    Violation {
        workload: "registry".into(),
        key: REGISTRY_KEY.into(),
        message,
        history: super::history::format_ops(ops),
    }
}

/// The most entries certainly live at one instant (see the module doc).
fn most_certainly_live(ops: &[Op]) -> (usize, u64) {
    let mut spans: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for op in ops.iter().filter(|op| op.kind == Kind::Ok) {
        match op.f.as_str() {
            "register" => {
                if let Some(id) = op.output.get("id").and_then(Value::as_str) {
                    spans.insert(id, (op.ret, 0));
                }
            }
            "renew" if op.output["reason"] != "quota_lapsed" => {
                if let Some(span) = id_of(op).and_then(|id| spans.get_mut(id)) {
                    span.1 = span.1.max(op.call);
                }
            }
            _ => {}
        }
    }
    let mut edges: Vec<(u64, i64)> = spans
        .values()
        .filter(|(from, to)| from <= to)
        .flat_map(|&(from, to)| [(from, 1), (to, -1)])
        .collect();
    // At one instant, starts count before ends (both ends of a span are inclusive).
    edges.sort_by_key(|&(at, delta)| (at, -delta));
    let (mut live, mut most, mut when) = (0i64, 0i64, 0u64);
    for (at, delta) in edges {
        live += delta;
        if live > most {
            (most, when) = (live, at);
        }
    }
    (most as usize, when)
}

/// Check a registry history (see the module doc).
pub fn check_registry(ops: &[Op]) -> Vec<Violation> {
    let ops: Vec<Op> = ops
        .iter()
        .filter(|op| op.key == REGISTRY_KEY)
        .cloned()
        .collect();
    let mut found = Vec::new();
    let ceiling = ops
        .iter()
        .filter(|op| op.f == "limits")
        .filter_map(|op| op.input["fabric_max"].as_u64())
        .max()
        .unwrap_or(REGISTRY_CEILING) as usize;
    let (most, when) = most_certainly_live(&ops);
    if most > ceiling {
        let message =
            format!("{most} entries certainly live at {when} ns, the ceiling is {ceiling}");
        found.push(violation(message, &[]));
    }
    let revokes: Vec<&Op> = ops
        .iter()
        .filter(|op| op.f == "revoke" && op.kind == Kind::Ok)
        .collect();
    for renew in ops
        .iter()
        .filter(|op| op.f == "renew" && op.kind == Kind::Ok)
    {
        let id = id_of(renew).unwrap_or_default();
        let late = revokes
            .iter()
            .find(|r| under(id, id_of(r).unwrap_or_default()) && r.ret < renew.call);
        if let Some(revoke) = late {
            let message = format!("{id} was renewed after a revoke of it had returned");
            found.push(violation(message, &[revoke, renew]));
        }
    }
    found.extend(check_listing(&ops, &revokes, ceiling));
    found
}

fn check_listing(ops: &[Op], revokes: &[&Op], ceiling: usize) -> Vec<Violation> {
    let admitted: Vec<&str> = ops
        .iter()
        .filter(|op| op.f == "register" && op.kind == Kind::Ok)
        .filter_map(|op| op.output.get("id").and_then(Value::as_str))
        .collect();
    // A registration whose answer was lost may have admitted an entry we never heard of.
    let unknown = ops
        .iter()
        .any(|op| op.f == "register" && op.kind == Kind::Info);
    let mut found = Vec::new();
    for list in ops
        .iter()
        .filter(|op| op.f == "list" && op.kind == Kind::Ok)
    {
        let ids: Vec<&str> = list.output["ids"]
            .as_array()
            .map(|ids| ids.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if ids.len() > ceiling {
            let message = format!("{} entries listed, the ceiling is {ceiling}", ids.len());
            found.push(violation(message, &[list]));
        }
        for id in ids {
            let revoked = revokes
                .iter()
                .find(|r| under(id, id_of(r).unwrap_or_default()));
            if let Some(revoke) = revoked {
                let message = format!("{id} is listed after a revoke of it returned");
                found.push(violation(message, &[revoke, list]));
            } else if !unknown && !admitted.contains(&id) {
                let message = format!("{id} is listed but was never admitted");
                found.push(violation(message, &[list]));
            }
        }
    }
    found
}
