//! The `follow` workload: applies whose consequences are follow-ups carried out from the
//! deciding cell's outbox (`board::next`), run while nodes are killed and partitioned.
//!
//! Each round, a parent agent enrolls a helper agent, makes a team the helper joins, and
//! registers a work entry owned by the helper under one of its own. Then, at random:
//!
//! - it revokes the helper's entry, whose follow-ups revoke the helper's identity (its
//!   token stops working) and take it out of every team; or it leaves the entry be (the
//!   control group);
//! - it dissolves the team, whose follow-up purges the team's fabric queue.
//!
//! Every operation is on the history key `follow/all`. After the run, the harness probes
//! every helper's token and every dissolved team ([`final_follow`]); [`check_follow`] then
//! holds, with no clock of the servers:
//!
//! - **Finished.** A helper named by an acknowledged revoke has a refused token, and a team
//!   whose dissolve was acknowledged done is gone: a follow-up decided by an acknowledged
//!   apply is carried out, whichever node died between the apply and its execution.
//! - **Nothing unasked.** A helper whose entry no revoke touched still proves itself: a
//!   follow-up never reaches an agent its apply did not name.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use super::history::{Kind, Op, Recorder};
use super::invariants::Violation;
use super::workload::{Done, Shared, Worker, error_done};

/// The history key of every `follow` operation.
pub const FOLLOW_KEY: &str = "follow/all";
/// Helpers one parent enrolls before the next parent takes over (the enrollment limit is
/// 100 an hour per parent).
const ENROLLMENTS_PER_PARENT: u64 = 40;
/// Work entries' time to live: long enough to outlast a round.
const ENTRY_TTL_MS: u64 = 60_000;

fn token_of(name: &str) -> String {
    format!("{name}-token-0123456789abcdefghijklmnop")
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

fn outcome(done: Result<pb::TeamResponse, CellError>) -> Done {
    match done {
        Ok(r) if r.refusal.is_empty() => Done::Ok(json!({ "code": r.code, "done": r.done })),
        Ok(r) => Done::Fail(json!({ "refusal": r.refusal, "message": r.message })),
        Err(e) => error_done(&e, false),
    }
}

/// One round's cast: the parent's client, the helper's name and its team.
struct Round {
    parent: Arc<CellClient>,
    parent_name: String,
    helper: String,
    team: String,
}

/// Register `name` as the operator (retried until answered or stopped).
async fn register_parent(w: &Worker, name: &str) -> Option<Arc<CellClient>> {
    let request = pb::AgentRegisterRequest {
        agent: name.to_string(),
        token: token_of(name),
        enroll: false,
    };
    while !w.stopped() {
        if w.client.agent_register(request.clone()).await.is_ok() {
            let client = w.connect()?.with_identity(name, token_of(name));
            return Some(Arc::new(client));
        }
        sleep_ms(200).await;
    }
    None
}

/// The parent enrolls the helper and makes the team the helper joins: each step recorded.
async fn cast(w: &mut Worker, round: &Round) -> Option<()> {
    let (parent, helper, team) = (round.parent.clone(), round.helper.clone(), &round.team);
    let input = json!({ "parent": round.parent_name, "agent": helper, "team": team });
    let enroll = pb::AgentRegisterRequest {
        agent: helper.clone(),
        token: token_of(&helper),
        enroll: true,
    };
    let client = parent.clone();
    w.run("enroll", FOLLOW_KEY, input, async move {
        match client.agent_register(enroll).await {
            Ok(r) => Done::Ok(json!({ "created": r.created })),
            Err(e) => error_done(&e, false),
        }
    })
    .await?;
    let create = pb::TeamCreateRequest {
        team: team.clone(),
        ..Default::default()
    };
    let client = parent.clone();
    w.run("create", FOLLOW_KEY, json!({ "team": team }), async move {
        outcome(client.team_create(create).await)
    })
    .await?;
    let join = pb::TeamJoinRequest {
        team: team.clone(),
        agent: helper.clone(),
        idempotency_key: parent.next_idempotency_key(),
    };
    let input = json!({ "team": team, "agent": helper });
    w.run("join", FOLLOW_KEY, input, async move {
        outcome(parent.team_join(join).await)
    })
    .await
    .map(|_| ())
}

/// The parent registers a root entry and one owned by the helper under it: the helper's id.
async fn spawn(w: &mut Worker, round: &Round) -> Option<String> {
    let register = |kind: &str, parent: &str, owner: &str| pb::WorkRegisterRequest {
        kind: kind.into(),
        parent: parent.into(),
        owner: owner.into(),
        ttl_ms: ENTRY_TTL_MS,
        idempotency_key: round.parent.next_idempotency_key(),
        ..Default::default()
    };
    let mut ids = Vec::new();
    for (kind, owner) in [("session", ""), ("subagent", round.helper.as_str())] {
        let request = register(kind, ids.last().map_or("", String::as_str), owner);
        let client = round.parent.clone();
        let input = json!({ "kind": kind, "owner": owner });
        let got = w
            .run("register", FOLLOW_KEY, input, async move {
                match client.work_register(request).await {
                    Ok(r) => Done::Ok(json!({ "id": r.entry.map(|e| e.id) })),
                    Err(e) => error_done(&e, false),
                }
            })
            .await?;
        ids.push(got.get("id")?.as_str()?.to_string());
    }
    ids.pop()
}

/// The parent revokes the helper's entry.
async fn revoke(w: &mut Worker, round: &Round, id: String) {
    let request = pb::WorkRevokeRequest {
        id: id.clone(),
        idempotency_key: round.parent.next_idempotency_key(),
    };
    let client = round.parent.clone();
    let input = json!({ "id": id, "agent": round.helper });
    w.run("revoke", FOLLOW_KEY, input, async move {
        match client.work_revoke(request).await {
            Ok(r) => Done::Ok(json!({ "agents": r.revoked_agents, "removed": r.removed })),
            Err(e) => error_done(&e, false),
        }
    })
    .await;
}

/// The parent dissolves the round's team.
async fn dissolve(w: &mut Worker, round: &Round) {
    let request = pb::TeamDissolveRequest {
        team: round.team.clone(),
        idempotency_key: round.parent.next_idempotency_key(),
    };
    let client = round.parent.clone();
    w.run(
        "dissolve",
        FOLLOW_KEY,
        json!({ "team": round.team }),
        async move { outcome(client.team_dissolve(request).await) },
    )
    .await;
}

/// Run rounds until the run stops.
pub(super) async fn run(shared: Shared, seed: u64) -> Result<(), String> {
    let mut w = Worker::new(shared, seed)?;
    let mut parent: Option<(String, Arc<CellClient>)> = None;
    let mut round_no = 0u64;
    while !w.stopped() {
        if round_no.is_multiple_of(ENROLLMENTS_PER_PARENT) || parent.is_none() {
            let name = format!("fol-{seed}-p{}", round_no / ENROLLMENTS_PER_PARENT);
            let Some(client) = register_parent(&w, &name).await else {
                return Ok(());
            };
            parent = Some((name, client));
        }
        let (parent_name, client) = parent.clone().expect("a parent");
        let round = Round {
            parent: client,
            parent_name,
            helper: format!("fol-{seed}-h{round_no}"),
            team: format!("fol-{seed}-t{round_no}"),
        };
        round_no += 1;
        if cast(&mut w, &round).await.is_none() {
            sleep_ms(200).await;
            continue;
        }
        if let Some(id) = spawn(&mut w, &round).await
            && w.rng.random_bool(0.6)
        {
            revoke(&mut w, &round, id).await;
        }
        if w.rng.random_bool(0.5) {
            dissolve(&mut w, &round).await;
        }
        sleep_ms(100).await;
    }
    Ok(())
}

/// Whether `client` (acting for an agent) still proves itself: a read every proven caller
/// may make. `None` when the fabric did not answer.
async fn token_accepted(client: &CellClient) -> Option<bool> {
    match client.work_list(pb::WorkListRequest::default()).await {
        Ok(_) => Some(true),
        Err(CellError::Unauthenticated(_)) => Some(false),
        Err(_) => None,
    }
}

/// Whether team `team` exists, read by `client` (its creator). `None`: no answer.
async fn team_exists(client: &CellClient, team: &str) -> Option<bool> {
    let request = pb::BoardStatsRequest { team: team.into() };
    match client.board_stats(request).await {
        Ok(_) => Some(true),
        Err(CellError::NotFound(_)) => Some(false),
        Err(CellError::Refused {
            code: whip_board::RefusalCode::UnknownTeam,
            ..
        }) => Some(false),
        Err(_) => None,
    }
}

/// A probe's answer recorded as one `final` operation.
fn record_probe(recorder: &Recorder, process: u64, input: Value, answer: Option<Value>) {
    recorder.record(process, Kind::Invoke, "final", FOLLOW_KEY, input);
    match answer {
        Some(value) => recorder.record(process, Kind::Ok, "final", FOLLOW_KEY, value),
        None => recorder.record(process, Kind::Fail, "final", FOLLOW_KEY, json!({})),
    }
}

/// After the run (faults healed): probe every enrolled helper's token and every team a
/// dissolve was sent for. The executors finish follow-ups within a few of their rounds, so
/// each probe waits for a settled answer up to `settle`.
pub(super) async fn final_follow(recorder: &Recorder, process: u64, addrs: &[String], ops: &[Op]) {
    let settle = Duration::from_secs(20);
    for op in acked(ops, "enroll") {
        let Some(agent) = op.input.get("agent").and_then(Value::as_str) else {
            continue;
        };
        let Ok(client) = CellClient::connect(addrs) else {
            continue;
        };
        let client = client
            .with_retry_for(Duration::from_secs(5))
            .with_identity(agent, token_of(agent));
        let expected = !revoke_acked(ops, agent);
        let answer = settled(settle, expected, || token_accepted(&client)).await;
        let value = answer.map(|accepted| json!({ "accepted": accepted }));
        record_probe(recorder, process, json!({ "agent": agent }), value);
    }
    for op in acked(ops, "dissolve").filter(|o| o.output.get("done") == Some(&json!(true))) {
        let team = op
            .input
            .get("team")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(parent) = parent_of_team(ops, team) else {
            continue;
        };
        let Ok(client) = CellClient::connect(addrs) else {
            continue;
        };
        let client = client
            .with_retry_for(Duration::from_secs(5))
            .with_identity(&parent, token_of(&parent));
        let answer = settled(settle, false, || team_exists(&client, team)).await;
        let value = answer.map(|exists| json!({ "exists": exists }));
        record_probe(recorder, process, json!({ "team": team }), value);
    }
}

/// The acknowledged operations named `f`.
fn acked<'a>(ops: &'a [Op], f: &'a str) -> impl Iterator<Item = &'a Op> {
    ops.iter().filter(move |o| o.f == f && o.kind == Kind::Ok)
}

/// Ask `probe` until it answers `expected` or `settle` passes: the last answer.
async fn settled<F, Fut>(settle: Duration, expected: bool, mut probe: F) -> Option<bool>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<bool>>,
{
    let until = tokio::time::Instant::now() + settle;
    loop {
        let answer = probe().await;
        if answer == Some(expected) || tokio::time::Instant::now() >= until {
            return answer;
        }
        sleep_ms(250).await;
    }
}

/// Whether a revoke naming `agent` was acknowledged with `agent` among its revoked agents.
fn revoke_acked(ops: &[Op], agent: &str) -> bool {
    ops.iter().any(|o| {
        o.f == "revoke"
            && o.kind == Kind::Ok
            && (o.output.get("agents").and_then(Value::as_array))
                .is_some_and(|agents| agents.iter().any(|a| a.as_str() == Some(agent)))
    })
}

/// The parent that enrolled the helper of `team`'s round.
fn parent_of_team(ops: &[Op], team: &str) -> Option<String> {
    ops.iter()
        .filter(|o| o.f == "enroll")
        .find(|o| o.input.get("team").and_then(Value::as_str) == Some(team))
        .and_then(|o| o.input.get("parent").and_then(Value::as_str))
        .map(str::to_string)
}

fn violation(message: String, ops: &[&Op]) -> Violation {
    Violation {
        workload: "follow".into(),
        key: FOLLOW_KEY.into(),
        message,
        history: super::history::format_ops(ops),
    }
}

/// The checks of the module docs over the recorded history.
pub fn check_follow(ops: &[Op]) -> Vec<Violation> {
    let mut found = Vec::new();
    let touched: BTreeSet<&str> = (ops.iter())
        .filter(|o| o.f == "revoke")
        .filter_map(|o| o.input.get("agent").and_then(Value::as_str))
        .collect();
    let probes: BTreeMap<&str, &Op> = (ops.iter())
        .filter(|o| o.f == "final" && o.kind == Kind::Ok)
        .filter_map(|o| Some((o.input.get("agent").and_then(Value::as_str)?, o)))
        .collect();
    for (agent, probe) in &probes {
        let accepted = probe.output.get("accepted") == Some(&json!(true));
        let revokes: Vec<&Op> = (ops.iter())
            .filter(|o| o.f == "revoke" && o.input.get("agent") == Some(&json!(agent)))
            .collect();
        if revoke_acked(ops, agent) && accepted {
            let mut shown = revokes.clone();
            shown.push(probe);
            let message = format!("agent {agent}'s revoke was acknowledged, its token works");
            found.push(violation(message, &shown));
        }
        if !touched.contains(agent) && !accepted {
            let message = format!("agent {agent} was never revoked, its token is refused");
            found.push(violation(message, &[probe]));
        }
    }
    for probe in ops.iter().filter(|o| o.f == "final" && o.kind == Kind::Ok) {
        if let Some(team) = probe.input.get("team").and_then(Value::as_str)
            && probe.output.get("exists") == Some(&json!(true))
        {
            let message = format!("team {team}'s dissolve was acknowledged, the team is there");
            found.push(violation(message, &[probe]));
        }
    }
    found
}
