//! `whip bench board`: the task-board cycle the Redis Streams comparison measures
//! (`peer-bench redis-board`: one producer pipelines XADD in batches of 64 while fewer than
//! 10,000 entries are posted and not yet completed; workers loop XREADGROUP COUNT 1 →
//! XACK). Here the same: one producer posts batches of `POST_BATCH_MAX` tasks (one write
//! each) to a fresh team's board while fewer than `BACKLOG` are open, and each client is a
//! worker that claims a task and then completes each one claiming the next in the same
//! write (the board's complete-and-claim). A cycle counts when its completion is
//! acknowledged; its latency runs from the claim to the completion. With `--prefetch N` a
//! worker holds up to N claims and each call completes them all and claims up to N more
//! (`BoardClaimMany`): N cycles per write.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use super::{BenchArgs, Worker, agent_clients, progress, report};
use crate::Global;
use crate::connect::Session;

/// Posted-but-uncompleted tasks the producer allows (peer-bench's `--backlog` default).
const BACKLOG: i64 = 10_000;

pub(super) async fn run(
    global: &Global,
    session: Session,
    args: BenchArgs,
    warmup: Duration,
    duration: Duration,
) -> Result<ExitCode> {
    let (session, clients) = agent_clients(global, session, args.conns).await?;
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
    let start = Instant::now();
    let (from, end) = (start + warmup, start + warmup + duration);
    let backlog = Arc::new(AtomicI64::new(0));
    let producer = {
        let c = clients[0].clone();
        let (team, backlog) = (team.clone(), backlog.clone());
        tokio::spawn(async move { produce(&c, &team, &backlog, BACKLOG, end).await })
    };
    let workers: Vec<_> = (0..args.clients)
        .map(|i| {
            let c = clients[i % clients.len()].clone();
            let (team, backlog) = (team.clone(), backlog.clone());
            let (worker, prefetch) = (format!("w{i}"), args.prefetch);
            tokio::spawn(async move {
                let span = Span { from, end };
                match prefetch {
                    1 => work(&c, &team, &worker, &backlog, span).await,
                    n => work_prefetch(&c, (&team, &worker), n, &backlog, span).await,
                }
            })
        })
        .collect();
    let ticker = tokio::spawn(progress(start, end));
    let mut results = Vec::new();
    for w in workers {
        results.push(w.await.map_err(|e| anyhow!("bench worker panicked: {e}"))?);
    }
    producer
        .await
        .map_err(|e| anyhow!("bench producer panicked: {e}"))?;
    ticker.abort();
    session.close().await;
    report(global, &args, duration, results)
}

/// Tasks the producer posts in one write (the Redis producer pipelines 64 XADDs).
const POST_BATCH: i64 = 64;

/// Like peer-bench's producer: a whole batch whenever fewer than `limit` tasks are open
/// (the backlog may go up to a batch past it), else wait a millisecond.
async fn produce(c: &CellClient, team: &str, backlog: &AtomicI64, limit: i64, end: Instant) {
    while Instant::now() < end {
        if backlog.load(Ordering::Relaxed) >= limit {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        let room = POST_BATCH;
        backlog.fetch_add(room, Ordering::Relaxed);
        let post = pb::BoardPostRequest {
            team: team.to_string(),
            bodies: (0..room).map(|_| br#"{"job":"bench"}"#.to_vec()).collect(),
            ..Default::default()
        };
        if c.board_post(post).await.is_err() {
            backlog.fetch_sub(room, Ordering::Relaxed);
        }
    }
}

/// The measured part of a run: cycles that start at `from` or later count, and the loop
/// stops at `end`.
#[derive(Clone, Copy)]
struct Span {
    from: Instant,
    end: Instant,
}

/// A prefetching worker: each call completes every task it holds and claims up to
/// `prefetch` more in one write (`BoardClaimMany`). Each completed task is a cycle, its
/// latency from its claim's call to its completion's answer.
async fn work_prefetch(
    c: &CellClient,
    (team, worker): (&str, &str),
    prefetch: u32,
    backlog: &AtomicI64,
    span: Span,
) -> Worker {
    let mut w = Worker {
        latencies_us: Vec::new(),
        commits: 0,
        errors: 0,
    };
    // (task, fence, when the call that claimed it started)
    let mut held: Vec<(String, u64, Instant)> = Vec::new();
    while Instant::now() < span.end {
        let sent = Instant::now();
        let completes = held.iter().map(|(task_id, fence, _)| pb::BoardCompletion {
            task_id: task_id.clone(),
            fence: *fence,
            result: b"{}".to_vec(),
        });
        let claim = pb::BoardClaimRequest {
            team: team.to_string(),
            worker: worker.to_string(),
            max: prefetch,
            completes: completes.collect(),
            ..Default::default()
        };
        let r = match c.board_claim(claim).await {
            Ok(r) if r.code == Code::TasksClaimed as i32 => r,
            _ => {
                w.errors += u64::from(sent >= span.from);
                held.clear();
                continue;
            }
        };
        backlog.fetch_sub(r.completed.len() as i64, Ordering::Relaxed);
        for (_, _, claimed_at) in held.drain(..).filter(|(_, _, at)| *at >= span.from) {
            w.commits += 1;
            let us = claimed_at.elapsed().as_micros().min(u128::from(u32::MAX));
            w.latencies_us.push(us as u32);
        }
        held = r
            .claims
            .into_iter()
            .map(|t| (t.id, t.fence, sent))
            .collect();
        if held.is_empty() {
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }
    w
}

async fn work(c: &CellClient, team: &str, worker: &str, backlog: &AtomicI64, span: Span) -> Worker {
    let Span { from, end } = span;
    let mut w = Worker {
        latencies_us: Vec::new(),
        commits: 0,
        errors: 0,
    };
    // The task this worker holds: completing it claims the next in the same write.
    let mut held: Option<(String, u64)> = None;
    let mut cycle_start = Instant::now();
    while Instant::now() < end {
        let answer = match held.take() {
            None => {
                cycle_start = Instant::now();
                let claim = pb::BoardClaimRequest {
                    team: team.to_string(),
                    worker: worker.to_string(),
                    ..Default::default()
                };
                c.board_claim(claim).await
            }
            Some((task_id, fence)) => {
                let done = pb::BoardTaskRequest {
                    team: team.to_string(),
                    task_id,
                    fence,
                    result: b"{}".to_vec(),
                    claim_next: true,
                    worker: worker.to_string(),
                    ..Default::default()
                };
                let answer = c.board_complete(done).await;
                let completed = answer
                    .as_ref()
                    .is_ok_and(|r| r.code != Code::BoardRefused as i32);
                if completed {
                    backlog.fetch_sub(1, Ordering::Relaxed);
                    if cycle_start >= from {
                        w.commits += 1;
                        let us = cycle_start.elapsed().as_micros().min(u128::from(u32::MAX));
                        w.latencies_us.push(us as u32);
                    }
                    cycle_start = Instant::now();
                }
                answer
            }
        };
        match answer {
            Ok(r) if r.code == Code::TaskClaimed as i32 => held = Some((r.task_id, r.fence)),
            Ok(r) if r.code == Code::BoardEmpty as i32 => {
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
            Ok(_) | Err(_) if cycle_start >= from => w.errors += 1,
            Ok(_) | Err(_) => {}
        }
    }
    w
}
