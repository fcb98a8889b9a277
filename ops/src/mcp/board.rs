//! The board tools: post, claim (waiting woken by the board cell's applies), complete,
//! fail, release, extend. The worker of a claim is the proven agent.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use super::Agent;
use super::answer::{Answer, Refusal, seconds_ms, wait_ms};
use super::params::{BoardClaim, BoardComplete, BoardExtend, BoardFail, BoardPost, BoardRelease};
use crate::boardcmd::{claims_of, task_request};
use crate::primitives::code_name;

/// A claim call not answered yet. Dropped unanswered (the MCP client cancelled, or went
/// away, while an attempt was in flight or after it landed), it replays the last attempt by
/// its idempotency key, which answers what that attempt did without claiming again, and
/// releases a task it claimed: a cancelled wait takes nothing.
struct Unanswered {
    client: Arc<whip_cell::CellClient>,
    request: pb::BoardClaimRequest,
    last: Arc<Mutex<Option<String>>>,
    answered: bool,
}

impl Unanswered {
    fn new(agent: &Agent, request: &pb::BoardClaimRequest) -> Unanswered {
        Unanswered {
            client: Arc::clone(&agent.client),
            request: request.clone(),
            last: Arc::default(),
            answered: false,
        }
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        let key = self.last.lock().expect("claim key lock").take();
        let (false, Some(key)) = (self.answered, key) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (client, mut request) = (Arc::clone(&self.client), self.request.clone());
        request.idempotency_key = key;
        runtime.spawn(async move {
            let team = request.team.clone();
            let r = match client.board_claim(request).await {
                Ok(r) => r,
                Err(e) => return tracing::warn!(error = %e, "a cancelled claim was not checked"),
            };
            for (task, fence) in claims_of(&r) {
                let release = task_request(team.clone(), task.clone(), fence);
                match client.board_release(release).await {
                    Ok(_) => tracing::info!(task, "a cancelled claim gave its task back"),
                    Err(e) => tracing::warn!(task, error = %e, "not given back"),
                }
            }
        });
    }
}

/// A board answer, or its refusal.
fn accepted(r: pb::BoardResponse) -> Result<pb::BoardResponse, Refusal> {
    match r.code == Code::BoardRefused as i32 {
        true => Err(Refusal::answered(&r.refusal, &r.message)),
        false => Ok(r),
    }
}

pub(super) fn body_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into()))
}

/// A claimed task as a claim's answer shows it.
fn task_json(task: &pb::Task) -> Value {
    json!({"id": task.id, "body": body_json(&task.body),
        "delivery_count": task.delivery_count, "tier": task.tier})
}

/// A prefetch's answer: each claim with its own fence and deadline (none: an empty board).
fn prefetched(r: &pb::BoardResponse) -> Value {
    let claims: Vec<Value> = r
        .claims
        .iter()
        .map(|t| json!({"task": task_json(t), "fence": t.fence, "deadline_ms": t.deadline_ms}))
        .collect();
    let outcome = match claims.is_empty() {
        true => "empty",
        false => "claimed",
    };
    json!({"outcome": outcome, "claims": claims})
}

/// A write to a claimed task: its outcome, the task, and what the outcome adds.
fn changed(r: &pb::BoardResponse, task_id: &str) -> Value {
    let mut value = json!({"outcome": code_name(r.code), "task_id": task_id});
    if r.deadline_ms > 0 {
        value["deadline_ms"] = json!(r.deadline_ms);
    }
    if r.delivery_count > 0 {
        value["delivery_count"] = json!(r.delivery_count);
    }
    value
}

impl Agent {
    pub(super) async fn board_post(&self, p: BoardPost) -> Answer {
        let request = pb::BoardPostRequest {
            team: p.team,
            body: Value::Object(p.task).to_string().into_bytes(),
            ..Default::default()
        };
        let r = accepted(self.client.board_post(request).await?)?;
        Ok(json!({"outcome": code_name(r.code), "task_id": r.task_id, "tier": r.tier}))
    }

    pub(super) async fn board_claim(&self, p: BoardClaim) -> Answer {
        let wait = wait_ms(p.wait_s)?;
        let request = pb::BoardClaimRequest {
            team: p.team,
            worker: self.name.clone(),
            idempotency_key: format!("mcp-claim/{}", whip_cell::identity::new_token()),
            max: p.max.unwrap_or(0),
            ..Default::default()
        };
        let mut unanswered = Unanswered::new(self, &request);
        let last = Arc::clone(&unanswered.last);
        let sending = move |key: &str| *last.lock().expect("claim key lock") = Some(key.into());
        let r = match wait {
            Some(ms) => {
                let c = &self.client;
                crate::boardcmd::claim_waiting(c, request, ms, false, &sending).await?
            }
            None => {
                sending(&request.idempotency_key);
                self.client.board_claim(request).await?
            }
        };
        unanswered.answered = true;
        let r = accepted(r)?;
        if p.max.is_some() {
            return Ok(prefetched(&r));
        }
        let Some(task) = r.task.filter(|_| r.code == Code::TaskClaimed as i32) else {
            return Ok(json!({"outcome": code_name(r.code), "task": null, "fence": 0}));
        };
        Ok(
            json!({"outcome": "claimed", "task": task_json(&task), "fence": r.fence,
            "deadline_ms": r.deadline_ms}),
        )
    }

    pub(super) async fn board_complete(&self, p: BoardComplete) -> Answer {
        let result = p.result.unwrap_or(Value::Null);
        let request = pb::BoardTaskRequest {
            result: result.to_string().into_bytes(),
            ..task_request(p.team, p.task_id.clone(), p.fence)
        };
        let r = accepted(self.client.board_complete(request).await?)?;
        Ok(changed(&r, &p.task_id))
    }

    pub(super) async fn board_fail(&self, p: BoardFail) -> Answer {
        let request = pb::BoardTaskRequest {
            error: p.error,
            ..task_request(p.team, p.task_id.clone(), p.fence)
        };
        let r = accepted(self.client.board_fail(request).await?)?;
        let mut value = changed(&r, &p.task_id);
        // A failed task goes back to ready (another delivery) or to the dead letters.
        value["outcome"] = match Code::try_from(r.code) {
            Ok(Code::TaskDeadLettered) => json!("dead_lettered"),
            _ => json!("failed"),
        };
        Ok(value)
    }

    pub(super) async fn board_release(&self, p: BoardRelease) -> Answer {
        let request = task_request(p.team, p.task_id.clone(), p.fence);
        let r = accepted(self.client.board_release(request).await?)?;
        Ok(changed(&r, &p.task_id))
    }

    pub(super) async fn board_extend(&self, p: BoardExtend) -> Answer {
        let request = pb::BoardTaskRequest {
            extend_ms: seconds_ms("by_s", p.by_s)?,
            ..task_request(p.team, p.task_id.clone(), p.fence)
        };
        let r = accepted(self.client.board_extend(request).await?)?;
        Ok(changed(&r, &p.task_id))
    }

    /// The team's board counts.
    pub(super) async fn board_stats(&self, team: &str) -> Answer {
        let request = pb::BoardStatsRequest {
            team: team.to_string(),
        };
        let s = self.client.board_stats(request).await?;
        Ok(
            json!({"team": team, "ready": s.ready, "claimed": s.claimed, "done": s.done,
            "dead": s.dead, "tier": s.tier, "cell_ready": s.cell_ready}),
        )
    }

    /// The caller's live claims on the team's board, at most `max`.
    pub(super) async fn claims(&self, team: &str, max: usize) -> Result<Vec<Value>, Refusal> {
        let request = pb::BoardListRequest {
            team: team.to_string(),
            state: "claimed".into(),
            limit: 0,
        };
        let tasks = self.client.board_list(request).await?.tasks;
        let mine = tasks
            .into_iter()
            .filter(|t| t.worker.as_deref() == Some(self.name.as_str()));
        Ok(mine
            .take(max)
            .map(|t| {
                json!({"kind": "claim", "team": team, "task_id": t.id, "fence": t.fence,
                    "deadline_ms": t.deadline_ms})
            })
            .collect())
    }
}
