//! `whip bench board`: the task-board cycle the Redis Streams comparison measures
//! (`peer-bench redis-board`: a producer keeps a bounded backlog with XADD, workers loop
//! XREADGROUP COUNT 1 → XACK). Here producers post to a fresh team's board keeping at most
//! `BACKLOG_PER_WORKER × clients` tasks ready, and each client is a worker looping
//! claim → complete. A cycle counts when its completion is acknowledged; its latency runs
//! from the claim to the completion.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use super::{BenchArgs, Worker, connect_clients, progress, report};
use crate::Global;
use crate::connect::Session;

/// Ready tasks kept per worker.
const BACKLOG_PER_WORKER: i64 = 4;

pub(super) async fn run(
    global: &Global,
    session: Session,
    args: BenchArgs,
    warmup: Duration,
    duration: Duration,
) -> Result<ExitCode> {
    let session = crate::agent::authenticate(global, session).await?;
    let (agent, token) = session
        .client
        .identity()
        .ok_or_else(|| anyhow!("bench board needs an agent identity"))?;
    let team = format!("bench-{:x}", rand::random::<u32>());
    let create = pb::TeamCreateRequest {
        team: team.clone(),
        parent: None,
        settings: Some(pb::BoardSettings {
            reclaim_ms: 60_000,
            ..Default::default()
        }),
        idempotency_key: String::new(),
    };
    let created = session.client.team_create(create).await?;
    if created.code != Code::TeamCreated as i32 {
        bail!("cannot create the bench team: {}", created.message);
    }
    let plain = connect_clients(global, &session.client, args.conns.max(1)).await?;
    let clients: Vec<Arc<CellClient>> = plain
        .into_iter()
        .map(|c| {
            let c = Arc::try_unwrap(c).unwrap_or_else(|_| unreachable!("fresh client"));
            Arc::new(c.with_identity(agent.clone(), token.clone()))
        })
        .collect();
    let start = Instant::now();
    let (from, end) = (start + warmup, start + warmup + duration);
    let backlog = Arc::new(AtomicI64::new(0));
    let limit = BACKLOG_PER_WORKER * args.clients as i64;
    let producers: Vec<_> = (0..(args.clients / 4).max(1))
        .map(|p| {
            let c = clients[p % clients.len()].clone();
            let (team, backlog) = (team.clone(), backlog.clone());
            tokio::spawn(async move { produce(&c, &team, &backlog, limit, end).await })
        })
        .collect();
    let workers: Vec<_> = (0..args.clients)
        .map(|i| {
            let c = clients[i % clients.len()].clone();
            let (team, backlog) = (team.clone(), backlog.clone());
            tokio::spawn(
                async move { work(&c, &team, &format!("w{i}"), &backlog, from, end).await },
            )
        })
        .collect();
    let ticker = tokio::spawn(progress(start, end));
    let mut results = Vec::new();
    for w in workers {
        results.push(w.await.map_err(|e| anyhow!("bench worker panicked: {e}"))?);
    }
    for p in producers {
        p.await
            .map_err(|e| anyhow!("bench producer panicked: {e}"))?;
    }
    ticker.abort();
    session.close().await;
    report(global, &args, duration, results)
}

async fn produce(c: &CellClient, team: &str, backlog: &AtomicI64, limit: i64, end: Instant) {
    while Instant::now() < end {
        if backlog.load(Ordering::Relaxed) >= limit {
            tokio::time::sleep(Duration::from_micros(200)).await;
            continue;
        }
        backlog.fetch_add(1, Ordering::Relaxed);
        let post = pb::BoardPostRequest {
            team: team.to_string(),
            body: br#"{"job":"bench"}"#.to_vec(),
            idempotency_key: String::new(),
        };
        if c.board_post(post).await.is_err() {
            backlog.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

async fn work(
    c: &CellClient,
    team: &str,
    worker: &str,
    backlog: &AtomicI64,
    from: Instant,
    end: Instant,
) -> Worker {
    let mut w = Worker {
        latencies_us: Vec::new(),
        commits: 0,
        errors: 0,
    };
    while Instant::now() < end {
        let t0 = Instant::now();
        let cycle = cycle(c, team, worker).await;
        let counted = t0 >= from;
        match cycle {
            Ok(true) => {
                backlog.fetch_sub(1, Ordering::Relaxed);
                if counted {
                    w.commits += 1;
                    w.latencies_us
                        .push(t0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                }
            }
            Ok(false) => tokio::time::sleep(Duration::from_micros(500)).await,
            Err(_) if counted => w.errors += 1,
            Err(_) => {}
        }
    }
    w
}

/// One claim → complete; `false` when the board was empty.
async fn cycle(c: &CellClient, team: &str, worker: &str) -> Result<bool> {
    let claim = pb::BoardClaimRequest {
        team: team.to_string(),
        worker: worker.to_string(),
        idempotency_key: String::new(),
    };
    let r = c.board_claim(claim).await?;
    if r.code != Code::TaskClaimed as i32 {
        return Ok(false);
    }
    let done = pb::BoardTaskRequest {
        team: team.to_string(),
        task_id: r.task_id,
        fence: r.fence,
        result: b"{}".to_vec(),
        ..Default::default()
    };
    let answer = c.board_complete(done).await?;
    if answer.code != Code::TaskCompleted as i32 {
        bail!("completion refused: {}", answer.message);
    }
    Ok(true)
}
