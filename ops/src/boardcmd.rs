//! `whip team …` and `whip board …`: teams and their task boards. Every call acts for the
//! CLI's agent (`--agent`, registered on first use); `--worker` names which worker of that
//! agent claims.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use serde_json::{Value, json};
use whip_cell::{CellClient, Waiter};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_proto::v1::wait_applied_request::Subject;

use crate::Global;
use crate::connect::session;
use crate::limits::DISSOLVE_ROUNDS_MAX;
use crate::output::{self, Table, parse_duration_ms, time_cell, time_text};
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
        /// Wait up to this long for a task when none is ready (e.g. `30s`), waking on the
        /// board cell's applies; an interrupted wait claims nothing.
        #[arg(long, value_name = "DURATION")]
        wait: Option<String>,
        /// First complete this task the worker holds (with `--fence`), in the same write
        /// as the claim of the next: both outcomes are printed.
        #[arg(long, value_name = "TASK_ID", requires = "fence",
            conflicts_with_all = ["task_id", "wait"])]
        complete: Option<String>,
        /// The fence of the task `--complete` names.
        #[arg(long, requires = "complete")]
        fence: Option<u64>,
        /// The result of the task `--complete` names (JSON).
        #[arg(long, requires = "complete", default_value = "null")]
        result: String,
        /// Claim up to this many tasks at once (a prefetch, at most 16), each with its own
        /// fence and window; with `--complete`, in the same write as the completion; with
        /// `--wait`, waiting for the first ready task when none is.
        #[arg(long, value_name = "N", conflicts_with = "task_id")]
        max: Option<u32>,
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
        TeamCommand::Dissolve { team } => return dissolve(global, c, team).await,
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

/// `whip team dissolve`: rounds (each one bounded apply on the team's cell) until the
/// team's board, mailboxes and fabric queue are gone, with progress on long work.
async fn dissolve(global: &Global, c: &CellClient, team: String) -> Result<ExitCode> {
    let mut shown = crate::progress::Progress::new("dissolve", DISSOLVE_ROUNDS_MAX, "rounds");
    let (mut removed, mut rounds) = (0u64, 0u64);
    loop {
        let request = pb::TeamDissolveRequest {
            team: team.clone(),
            idempotency_key: String::new(),
        };
        let r = c.team_dissolve(request).await?;
        if r.code == Code::BoardRefused as i32 {
            return Ok(refused(global, &r.refusal, &r.message));
        }
        rounds += 1;
        removed += u64::from(r.removed);
        shown.set(rounds);
        if r.done || r.code != Code::TeamDissolved as i32 || rounds >= DISSOLVE_ROUNDS_MAX {
            drop(shown);
            let value = json!({"outcome": code_name(r.code), "message": r.message,
                "removed": removed, "done": r.done, "rounds": rounds});
            let text = format!("{} ({removed} rows in {rounds} rounds)", r.message);
            print(global, value, text);
            return Ok(ExitCode::SUCCESS);
        }
    }
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

/// A request naming one task of `team` under `fence` (0: unfenced, for redrive).
pub(crate) fn task_request(team: String, task_id: String, fence: u64) -> pb::BoardTaskRequest {
    pb::BoardTaskRequest {
        team,
        task_id,
        fence,
        ..Default::default()
    }
}

/// The task a write names, and whether it is a `fail` (its `released` means "failed, back
/// to ready").
struct Asked(Option<String>, bool);

impl Asked {
    fn of(cmd: &BoardCommand) -> Asked {
        match cmd {
            BoardCommand::Fail { task_id, .. } => Asked(Some(task_id.clone()), true),
            BoardCommand::Extend { task_id, .. }
            | BoardCommand::Release { task_id, .. }
            | BoardCommand::Complete { task_id, .. }
            | BoardCommand::Redrive { task_id, .. } => Asked(Some(task_id.clone()), false),
            _ => Asked(None, false),
        }
    }
}

/// `board fail` and `board extend`: a change to a claimed task under its fence.
async fn task_change(c: &CellClient, cmd: BoardCommand) -> Result<pb::BoardResponse> {
    Ok(match cmd {
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
        _ => bail!("not a task change"),
    })
}

async fn board_on(global: &Global, c: &CellClient, cmd: BoardCommand) -> Result<ExitCode> {
    let asked = Asked::of(&cmd);
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
        cmd @ BoardCommand::Claim { .. } => return claim(global, c, cmd).await,
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
        cmd @ (BoardCommand::Fail { .. } | BoardCommand::Extend { .. }) => {
            task_change(c, cmd).await?
        }
        BoardCommand::Redrive { team, task_id } => {
            c.board_redrive(task_request(team, task_id, 0)).await?
        }
        other => return board_reads(global, c, other).await,
    };
    Ok(board_answer(global, &r, &asked))
}

/// `board claim`: the oldest ready task or a named one, waiting when asked, or with
/// `--complete` the held task completed and the next claimed in one write.
async fn claim(global: &Global, c: &CellClient, cmd: BoardCommand) -> Result<ExitCode> {
    if let Some(ask) = Prefetch::of(&cmd)? {
        return prefetch(global, c, ask).await;
    }
    let r = match cmd {
        BoardCommand::Claim {
            team,
            worker,
            complete: Some(done),
            fence,
            result,
            ..
        } => {
            let done = Finished {
                task_id: done,
                fence: fence.unwrap_or_default(),
                result,
            };
            return complete_and_claim(global, c, team, worker, done).await;
        }
        BoardCommand::Claim {
            team,
            worker,
            task_id,
            window,
            wait,
            ..
        } => {
            let claim_ms = window
                .map(|w| parse_duration_ms(&w).map_err(anyhow::Error::msg))
                .transpose()?;
            let wait_ms = wait
                .map(|w| parse_duration_ms(&w).map_err(anyhow::Error::msg))
                .transpose()?;
            let request = pb::BoardClaimRequest {
                team,
                worker,
                task_id: task_id.unwrap_or_default(),
                claim_ms: claim_ms.unwrap_or(0),
                ..Default::default()
            };
            match wait_ms {
                Some(wait_ms) => claim_waiting(c, request, wait_ms, true, &|_| {}).await?,
                None => c.board_claim(request).await?,
            }
        }
        _ => bail!("not a claim"),
    };
    Ok(board_answer(global, &r, &Asked(None, false)))
}

/// The task `board claim --complete` finishes.
struct Finished {
    task_id: String,
    fence: u64,
    result: String,
}

/// `board claim --complete`: complete one task and claim the next for `worker` in one
/// write (`BoardCompleteAndClaim`), and print both outcomes: `{"completed": {...},
/// "claimed": {...}}`. A refusal is the completion's (nothing was claimed) and exits 1.
async fn complete_and_claim(
    global: &Global,
    c: &CellClient,
    team: String,
    worker: String,
    done: Finished,
) -> Result<ExitCode> {
    let result = parse_json(&done.result, "--result")?;
    let request = pb::BoardTaskRequest {
        result: result.to_string().into_bytes(),
        claim_next: true,
        worker,
        ..task_request(team, done.task_id.clone(), done.fence)
    };
    let r = c.board_complete(request).await?;
    if Code::try_from(r.code) == Ok(Code::BoardRefused) {
        return Ok(refused(global, &r.refusal, &r.message));
    }
    let completed = json!({"outcome": "completed", "task_id": done.task_id, "fence": done.fence});
    let claimed = match Code::try_from(r.code) {
        Ok(Code::TaskClaimed) => json!({"outcome": code_name(r.code),
            "task": r.task.as_ref().map(task_json).unwrap_or(Value::Null),
            "fence": r.fence, "deadline_ms": r.deadline_ms, "tier": r.tier}),
        _ => json!({"outcome": "empty", "task": null, "fence": 0}),
    };
    let next = match r.task_id.is_empty() {
        true => "no ready task".to_string(),
        false => format!("claimed {} fence={}", r.task_id, r.fence),
    };
    let text = format!("completed {} (fence {}); {next}", done.task_id, done.fence);
    print(
        global,
        json!({"completed": completed, "claimed": claimed}),
        text,
    );
    Ok(ExitCode::SUCCESS)
}

/// What `board claim --max` asks.
struct Prefetch {
    team: String,
    worker: String,
    done: Option<Finished>,
    max: u32,
    claim_ms: u64,
    /// How long to wait for a ready task when none is (`--wait`; never with `--complete`).
    wait_ms: Option<u64>,
}

impl Prefetch {
    /// The prefetch `board claim` asks for: with `--max`, or `--complete` with `--for` (a
    /// window for the next claim needs the prefetching command; its `max` is then 1).
    fn of(cmd: &BoardCommand) -> Result<Option<Prefetch>> {
        let BoardCommand::Claim {
            team,
            worker,
            complete,
            fence,
            result,
            window,
            max,
            wait,
            ..
        } = cmd
        else {
            return Ok(None);
        };
        let max = match (max, complete, window) {
            (Some(max), _, _) => *max,
            (None, Some(_), Some(_)) => 1,
            _ => return Ok(None),
        };
        let done = complete.as_ref().map(|task_id| Finished {
            task_id: task_id.clone(),
            fence: fence.unwrap_or_default(),
            result: result.clone(),
        });
        let ms = |text: &Option<String>| {
            text.as_ref()
                .map(|w| parse_duration_ms(w).map_err(anyhow::Error::msg))
                .transpose()
        };
        Ok(Some(Prefetch {
            team: team.clone(),
            worker: worker.clone(),
            done,
            max,
            claim_ms: ms(window)?.unwrap_or(0),
            wait_ms: ms(wait)?,
        }))
    }
}

/// `board claim --max N [--complete ID --fence F]`: complete the held task, if named, and
/// claim up to `max` tasks in one write (`BoardClaimMany`), each with its own fence; print
/// `{"completed": [ids], "claims": [{task, fence, deadline_ms, tier}, ...]}`, one line per
/// claim in text. A refusal is the completion's (nothing was claimed) and exits 1.
async fn prefetch(global: &Global, c: &CellClient, ask: Prefetch) -> Result<ExitCode> {
    let completes = match ask.done {
        Some(done) => vec![pb::BoardCompletion {
            result: parse_json(&done.result, "--result")?
                .to_string()
                .into_bytes(),
            task_id: done.task_id,
            fence: done.fence,
        }],
        None => Vec::new(),
    };
    let request = pb::BoardClaimRequest {
        team: ask.team,
        worker: ask.worker,
        claim_ms: ask.claim_ms,
        max: ask.max,
        completes,
        ..Default::default()
    };
    let r = match ask.wait_ms {
        Some(wait_ms) => claim_waiting(c, request, wait_ms, true, &|_| {}).await?,
        None => c.board_claim(request).await?,
    };
    if Code::try_from(r.code) != Ok(Code::TasksClaimed) {
        return Ok(board_answer(global, &r, &Asked(None, false)));
    }
    let mut lines: Vec<String> = r
        .completed
        .iter()
        .map(|id| format!("completed {id}"))
        .collect();
    lines.extend(r.claims.iter().map(|t| {
        let until = time_text(t.deadline_ms);
        format!(
            "claimed {} fence={} until {until} ({} tier)",
            t.id, t.fence, t.tier
        )
    }));
    if r.claims.is_empty() {
        lines.push("no ready task".into());
    }
    let claims: Vec<Value> = r
        .claims
        .iter()
        .map(|t| {
            json!({"task": task_json(t),
        "fence": t.fence, "deadline_ms": t.deadline_ms, "tier": t.tier})
        })
        .collect();
    let value = json!({"outcome": code_name(r.code), "completed": r.completed, "claims": claims});
    print(global, value, lines.join("\n"));
    Ok(ExitCode::SUCCESS)
}

/// Claim, and while the board is empty wait up to `wait_ms` for a task, woken by the board
/// cell's applies. A wake claims again only when the board's counts moved (a claim of an
/// empty board is itself an apply); a lapsed claim, which no apply announces, is tried at
/// least every `WAIT_APPLIED_CALL_MS`. Interrupted, it claims nothing: a claim that lands
/// as the signal arrives is released before the command ends. `tell`: say on stderr that
/// it waits (the command line; the MCP server logs through tracing instead). A request with
/// an idempotency key sends attempt `n` as `KEY/n`, telling `sending` each key first (so a
/// caller that goes away mid-attempt can find what the attempt did).
pub(crate) async fn claim_waiting(
    c: &CellClient,
    request: pb::BoardClaimRequest,
    wait_ms: u64,
    tell: bool,
    sending: &(dyn Fn(&str) + Sync),
) -> Result<pb::BoardResponse> {
    let started = std::time::Instant::now();
    let wait = std::time::Duration::from_millis(wait_ms);
    let subject = Subject::Board(request.team.clone());
    let mut waiter = Waiter::mark(c, subject).await?;
    let mut seen = None;
    let mut told = !tell;
    for attempt in 0u64.. {
        let mut request = request.clone();
        if !request.idempotency_key.is_empty() {
            request.idempotency_key = format!("{}/{attempt}", request.idempotency_key);
            sending(&request.idempotency_key);
        }
        let r = c.board_claim(request.clone()).await?;
        if crate::signals::is_stopped() {
            return Err(give_back(c, &request.team, &r).await);
        }
        if !claimed_nothing(&r) {
            return Ok(r);
        }
        if !std::mem::replace(&mut told, true) {
            eprintln!("no ready task; waiting up to {wait_ms} ms");
        }
        loop {
            let left = wait.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Ok(r);
            }
            tokio::select! {
                waited = waiter.next(left) => if !waited? { break },
                () = crate::signals::stopped() => bail!("interrupted: claimed nothing"),
            }
            let stats = c.board_stats(pb::BoardStatsRequest {
                team: request.team.clone(),
            });
            let stats = stats.await?;
            let counts = (stats.ready, stats.claimed, stats.cell_ready);
            if seen.replace(counts) != Some(counts) || stats.ready + stats.cell_ready > 0 {
                break;
            }
        }
    }
    unreachable!("the attempts never run out")
}

/// Whether a claim's answer took no task: an empty board, or a prefetch that found none.
fn claimed_nothing(r: &pb::BoardResponse) -> bool {
    match Code::try_from(r.code) {
        Ok(Code::BoardEmpty) => true,
        Ok(Code::TasksClaimed) => r.claims.is_empty(),
        _ => false,
    }
}

/// The task and fence of every claim a claim's answer took: one, each of a prefetch's, or
/// none.
pub(crate) fn claims_of(r: &pb::BoardResponse) -> Vec<(String, u64)> {
    match Code::try_from(r.code) {
        Ok(Code::TaskClaimed) => vec![(r.task_id.clone(), r.fence)],
        Ok(Code::TasksClaimed) => r.claims.iter().map(|t| (t.id.clone(), t.fence)).collect(),
        _ => Vec::new(),
    }
}

/// Interrupted as a claim landed: release what it took (each claim of a prefetch), then
/// say so.
async fn give_back(c: &CellClient, team: &str, r: &pb::BoardResponse) -> anyhow::Error {
    let held = claims_of(r);
    if held.is_empty() {
        return anyhow::anyhow!("interrupted: claimed nothing");
    }
    let mut released = Vec::new();
    for (task_id, fence) in held {
        let release = task_request(team.to_string(), task_id.clone(), fence);
        if let Err(e) = c.board_release(release).await {
            return anyhow::anyhow!("interrupted: could not release {task_id}: {e}");
        }
        released.push(task_id);
    }
    anyhow::anyhow!("interrupted: released {} unworked", released.join(", "))
}

/// The human line of a write that changed a task (`asked`: the task the command named,
/// when the answer does not repeat it).
fn task_line(r: &pb::BoardResponse, asked: Option<&str>, failing: bool) -> String {
    let id = if r.task_id.is_empty() {
        asked.unwrap_or("")
    } else {
        r.task_id.as_str()
    };
    match Code::try_from(r.code) {
        Ok(Code::TaskExtended) => format!("extended {id} until {}", time_text(r.deadline_ms)),
        Ok(Code::TaskReleased) if failing => {
            format!("failed {id}: back to ready for another delivery")
        }
        Ok(Code::TaskDeadLettered) if failing => {
            format!("failed {id}: out of deliveries, dead-lettered")
        }
        Ok(Code::TaskReleased) => format!("released {id}: back to ready"),
        _ => format!("{} {id}", code_name(r.code).replace('_', " ")),
    }
}

fn board_answer(global: &Global, r: &pb::BoardResponse, asked: &Asked) -> ExitCode {
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
            if r.task_id.is_empty()
                && let Some(id) = &asked.0
            {
                value["task_id"] = json!(id);
            }
            print(global, value, task_line(r, asked.0.as_deref(), asked.1));
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
        BoardCommand::Mailbox { team, after } => mailbox(global, c, team, after).await?,
        _ => bail!("not a read"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `whip board mailbox TEAM`: one line per notice.
async fn mailbox(global: &Global, c: &CellClient, team: String, after: u64) -> Result<()> {
    let request = pb::MailboxRequest {
        team,
        after_seq: after,
        limit: 0,
    };
    let r = c.mailbox(request).await?;
    let rows: Vec<Value> = r
        .messages
        .iter()
        .map(|m| {
            json!({"seq": m.seq, "from": m.from, "kind": m.kind,
            "body": body_json(&m.body), "at": time_text(m.at_ms)})
        })
        .collect();
    let mut table = Table::new(&["seq", "at", "kind", "from", "body"]);
    for m in &r.messages {
        let body = body_json(&m.body);
        let body = body
            .as_str()
            .map_or_else(|| body.to_string(), str::to_string);
        let (seq, at) = (format!("#{}", m.seq), time_cell(m.at_ms));
        table.row(vec![seq, at, m.kind.clone(), m.from.clone(), body]);
    }
    let text = table.lines_or("no messages").join("\n");
    print(global, Value::Array(rows), text);
    Ok(())
}

fn print_tasks(global: &Global, tasks: &[pb::Task]) {
    let rows: Vec<Value> = tasks.iter().map(task_json).collect();
    let header = [
        "task",
        "state",
        "tier",
        "deliveries",
        "worker",
        "deadline",
        "posted",
    ];
    let mut table = Table::new(&header);
    for t in tasks {
        table.row(vec![
            t.id.clone(),
            t.state.clone(),
            t.tier.clone(),
            t.delivery_count.to_string(),
            t.worker.clone().unwrap_or_else(|| "-".into()),
            time_cell(t.deadline_ms),
            time_cell(t.posted_ms),
        ]);
    }
    print(
        global,
        Value::Array(rows),
        table.lines_or("(none)").join("\n"),
    );
}
