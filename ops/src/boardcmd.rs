//! `whip team …` and `whip board …`: teams and their task boards. Every call acts for the
//! CLI's agent (`--agent`, registered on first use); `--worker` names which worker of that
//! agent claims.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use serde_json::{Value, json};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::Global;
use crate::connect::session;
use crate::output::{self, parse_duration_ms, time_text};
use crate::primitives::code_name;

#[derive(Subcommand, Debug)]
pub(crate) enum TeamCommand {
    /// Create a team (you become its supervisor) with its local task board.
    Create {
        team: String,
        /// The parent team: its members (and their ancestors') may use this board too.
        #[arg(long)]
        parent: Option<String>,
        /// Claim window: past it a claimed task is redelivered (e.g. 30s).
        #[arg(long, default_value = "30s")]
        reclaim: String,
        /// Deliveries before a task is dead-lettered.
        #[arg(long, default_value_t = 5)]
        delivery_limit: u32,
        /// Unclaimed tasks spill to the cell tier after this long (default: never).
        #[arg(long)]
        spill_after: Option<String>,
    },
    /// Add an agent to the team (a member or the supervisor adds it; an agent this CLI has
    /// no registration for yet is registered first, by the operator or enrolled by you).
    Join {
        team: String,
        /// The agent to add (not `--agent`, which names who acts).
        #[arg(long)]
        member: String,
    },
    /// Give a member a role (supervisor only): coordinators vote on proposals, workers
    /// only where a proposal's electorate names them.
    Role {
        team: String,
        #[arg(long)]
        member: String,
        #[arg(long, value_enum)]
        role: crate::votecmd::RoleArg,
    },
    /// Dissolve the team (supervisor only): its board is garbage-collected.
    Dissolve { team: String },
}

#[derive(Subcommand, Debug)]
pub(crate) enum BoardCommand {
    /// Post a task (JSON) to the team's local board.
    Post {
        team: String,
        #[arg(long)]
        task: String,
    },
    /// Claim the oldest ready task (local board first, then the cell tier, then the
    /// team's fabric queue), or with `--task` that one task.
    Claim {
        team: String,
        #[arg(long)]
        worker: String,
        /// Claim this task (ready, or lapsed), or re-enter the worker's own claim.
        #[arg(long = "task", value_name = "TASK_ID")]
        task_id: Option<String>,
        /// This claim's window (default: the team's reclaim window), e.g. `10m`.
        #[arg(long = "for", value_name = "DURATION")]
        window: Option<String>,
    },
    /// Complete a claimed task; refused (exit 1) when the fence is stale.
    Complete {
        team: String,
        task_id: String,
        #[arg(long)]
        fence: u64,
        /// The result (JSON).
        #[arg(long, default_value = "null")]
        result: String,
        /// Also claim the next task for this worker, in the same write.
        #[arg(long, value_name = "WORKER")]
        claim_next: Option<String>,
    },
    /// Give a claimed task back with an error (redelivered, or dead-lettered at the limit).
    Fail {
        team: String,
        task_id: String,
        #[arg(long)]
        fence: u64,
        #[arg(long)]
        error: String,
    },
    /// Give a claim back unfinished (no failure recorded): the task is ready again.
    Release {
        team: String,
        task_id: String,
        #[arg(long)]
        fence: u64,
    },
    /// Extend a claim's window (never shortens it).
    Extend {
        team: String,
        task_id: String,
        #[arg(long)]
        fence: u64,
        #[arg(long = "by")]
        by: String,
    },
    /// Tasks of the board (`--state ready|claimed|done|dead`).
    List {
        team: String,
        #[arg(long, default_value = "")]
        state: String,
    },
    /// Dead-lettered tasks with their failures.
    Dlq { team: String },
    /// Put a dead-lettered task back on the board.
    Redrive { team: String, task_id: String },
    /// Ready, claimed, done and dead counts, and the tier.
    Stats { team: String },
    /// The supervisor's mailbox (dead-letter notices).
    Mailbox {
        team: String,
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
}

async fn client(global: &Global) -> Result<crate::connect::Session> {
    let session = session(global).await?;
    crate::agent::authenticate(global, session).await
}

pub(crate) async fn team(global: &Global, cmd: TeamCommand) -> Result<ExitCode> {
    let session = client(global).await?;
    let result = team_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

async fn team_on(global: &Global, c: &CellClient, cmd: TeamCommand) -> Result<ExitCode> {
    let r = match cmd {
        TeamCommand::Create {
            team,
            parent,
            reclaim,
            delivery_limit,
            spill_after,
        } => {
            let ms = |text: &str| parse_duration_ms(text).map_err(anyhow::Error::msg);
            let settings = pb::BoardSettings {
                reclaim_ms: ms(&reclaim)?,
                delivery_limit,
                spill_after_ms: spill_after.as_deref().map(ms).transpose()?.unwrap_or(0),
                task_bytes_max: 0,
            };
            let request = pb::TeamCreateRequest {
                team,
                parent,
                settings: Some(settings),
                idempotency_key: String::new(),
            };
            c.team_create(request).await?
        }
        TeamCommand::Join { team, member } => {
            crate::agent::enroll(c, &member).await;
            let request = pb::TeamJoinRequest {
                team,
                agent: member,
                idempotency_key: String::new(),
            };
            c.team_join(request).await?
        }
        TeamCommand::Role { team, member, role } => {
            return crate::votecmd::role(global, c, team, (member, role)).await;
        }
        TeamCommand::Dissolve { team } => {
            let request = pb::TeamDissolveRequest {
                team,
                idempotency_key: String::new(),
            };
            c.team_dissolve(request).await?
        }
    };
    if r.code == Code::BoardRefused as i32 {
        return Ok(refused(global, &r.refusal, &r.message));
    }
    let mut value = json!({"outcome": code_name(r.code), "message": r.message});
    if r.code == Code::TeamDissolved as i32 {
        value["removed"] = json!(r.removed);
        value["done"] = json!(r.done);
    }
    print(global, value, r.message);
    Ok(ExitCode::SUCCESS)
}

/// A refusal: a typed reason, exit code 1.
fn refused(global: &Global, reason: &str, message: &str) -> ExitCode {
    if global.json {
        output::json(&json!({"outcome": "refused", "reason": reason, "error": message}));
    }
    eprintln!("refused ({reason}): {message}");
    ExitCode::from(1)
}

fn print(global: &Global, value: Value, text: String) {
    if global.json {
        output::json(&value);
    } else {
        output::line(&text);
    }
}

fn body_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into()))
}

fn task_json(t: &pb::Task) -> Value {
    json!({
        "id": t.id, "team": t.team, "tier": t.tier, "state": t.state, "body": body_json(&t.body),
        "delivery_count": t.delivery_count, "worker": t.worker, "fence": t.fence,
        "deadline_ms": t.deadline_ms, "posted_ms": t.posted_ms,
        "failures": t.failures.iter().map(|f| json!({
            "delivery": f.delivery, "worker": f.worker, "error": f.error, "at": time_text(f.at_ms),
        })).collect::<Vec<_>>(),
    })
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).with_context(|| format!("{what} is not JSON"))
}

pub(crate) async fn board(global: &Global, cmd: BoardCommand) -> Result<ExitCode> {
    let session = client(global).await?;
    let result = board_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

fn task_request(team: String, task_id: String, fence: u64) -> pb::BoardTaskRequest {
    pb::BoardTaskRequest {
        team,
        task_id,
        fence,
        ..Default::default()
    }
}

async fn board_on(global: &Global, c: &CellClient, cmd: BoardCommand) -> Result<ExitCode> {
    let r = match cmd {
        BoardCommand::Post { team, task } => {
            let body = parse_json(&task, "--task")?;
            let request = pb::BoardPostRequest {
                team,
                body: body.to_string().into_bytes(),
                ..Default::default()
            };
            c.board_post(request).await?
        }
        BoardCommand::Claim {
            team,
            worker,
            task_id,
            window,
        } => {
            let claim_ms = window
                .map(|w| parse_duration_ms(&w).map_err(anyhow::Error::msg))
                .transpose()?;
            let request = pb::BoardClaimRequest {
                team,
                worker,
                task_id: task_id.unwrap_or_default(),
                claim_ms: claim_ms.unwrap_or(0),
                idempotency_key: String::new(),
            };
            c.board_claim(request).await?
        }
        BoardCommand::Release {
            team,
            task_id,
            fence,
        } => c.board_release(task_request(team, task_id, fence)).await?,
        BoardCommand::Complete {
            team,
            task_id,
            fence,
            result,
            claim_next,
        } => {
            let result = parse_json(&result, "--result")?;
            let request = pb::BoardTaskRequest {
                result: result.to_string().into_bytes(),
                claim_next: claim_next.is_some(),
                worker: claim_next.unwrap_or_default(),
                ..task_request(team, task_id, fence)
            };
            c.board_complete(request).await?
        }
        BoardCommand::Fail {
            team,
            task_id,
            fence,
            error,
        } => {
            let request = pb::BoardTaskRequest {
                error,
                ..task_request(team, task_id, fence)
            };
            c.board_fail(request).await?
        }
        BoardCommand::Extend {
            team,
            task_id,
            fence,
            by,
        } => {
            let request = pb::BoardTaskRequest {
                extend_ms: parse_duration_ms(&by).map_err(anyhow::Error::msg)?,
                ..task_request(team, task_id, fence)
            };
            c.board_extend(request).await?
        }
        BoardCommand::Redrive { team, task_id } => {
            c.board_redrive(task_request(team, task_id, 0)).await?
        }
        other => return board_reads(global, c, other).await,
    };
    Ok(board_answer(global, &r))
}

fn board_answer(global: &Global, r: &pb::BoardResponse) -> ExitCode {
    let outcome = code_name(r.code);
    match Code::try_from(r.code) {
        Ok(Code::BoardRefused) => return refused(global, &r.refusal, &r.message),
        Ok(Code::TaskClaimed) => {
            let task = r.task.as_ref().map(task_json).unwrap_or(Value::Null);
            let text = format!(
                "claimed {} fence={} until {} ({} tier, delivery {})",
                r.task_id,
                r.fence,
                time_text(r.deadline_ms),
                r.tier,
                r.delivery_count
            );
            let value = json!({"outcome": outcome, "task": task, "fence": r.fence,
                "deadline_ms": r.deadline_ms, "tier": r.tier});
            print(global, value, text);
        }
        Ok(Code::BoardEmpty) => {
            let value = json!({"outcome": "empty", "task": null, "fence": 0});
            print(global, value, "no ready task".into());
        }
        _ => {
            let mut value = json!({"outcome": outcome, "task_id": r.task_id});
            if !r.tier.is_empty() {
                value["tier"] = json!(r.tier);
            }
            if r.deadline_ms > 0 {
                value["deadline_ms"] = json!(r.deadline_ms);
            }
            if r.delivery_count > 0 {
                value["delivery_count"] = json!(r.delivery_count);
            }
            print(global, value, format!("{outcome} {}", r.task_id));
        }
    }
    ExitCode::SUCCESS
}

async fn board_reads(global: &Global, c: &CellClient, cmd: BoardCommand) -> Result<ExitCode> {
    match cmd {
        BoardCommand::List { team, state } => {
            let r = c
                .board_list(pb::BoardListRequest {
                    team,
                    state,
                    limit: 0,
                })
                .await?;
            print_tasks(global, &r.tasks);
        }
        BoardCommand::Dlq { team } => {
            let r = c
                .board_dead_letters(pb::BoardListRequest {
                    team,
                    state: String::new(),
                    limit: 0,
                })
                .await?;
            print_tasks(global, &r.tasks);
        }
        BoardCommand::Stats { team } => {
            let s = c.board_stats(pb::BoardStatsRequest { team }).await?;
            let value = json!({"ready": s.ready, "claimed": s.claimed, "done": s.done,
                "dead": s.dead, "tier": s.tier, "cell_ready": s.cell_ready});
            let text = format!(
                "ready {} claimed {} done {} dead {} ({} tier; {} ready at the cell tier)",
                s.ready, s.claimed, s.done, s.dead, s.tier, s.cell_ready
            );
            print(global, value, text);
        }
        BoardCommand::Mailbox { team, after } => {
            let r = c
                .mailbox(pb::MailboxRequest {
                    team,
                    after_seq: after,
                    limit: 0,
                })
                .await?;
            let rows: Vec<Value> = r
                .messages
                .iter()
                .map(|m| {
                    json!({"seq": m.seq, "from": m.from, "kind": m.kind,
                    "body": body_json(&m.body), "at": time_text(m.at_ms)})
                })
                .collect();
            let text = rows
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n");
            print(global, Value::Array(rows), text);
        }
        _ => bail!("not a read"),
    }
    Ok(ExitCode::SUCCESS)
}

fn print_tasks(global: &Global, tasks: &[pb::Task]) {
    let rows: Vec<Value> = tasks.iter().map(task_json).collect();
    let text = tasks
        .iter()
        .map(|t| {
            let worker = t.worker.as_deref().unwrap_or("-");
            format!(
                "{} {} {} deliveries={} worker={worker}",
                t.id, t.state, t.tier, t.delivery_count
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    print(
        global,
        Value::Array(rows),
        if text.is_empty() {
            "(none)".into()
        } else {
            text
        },
    );
}
