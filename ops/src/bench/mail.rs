//! `whip bench mail`: one message through a replicated mailbox and out again, the cycle the
//! NATS JetStream comparison measures (`peer-bench nats-board`: a publish acknowledged by a
//! replicated stream, a fetch, an acknowledged ack). Each client owns one mailbox (a work
//! entry's, registered under one root for the run) and loops. With `--mail-cycle take`
//! (the default): send a message to it (one apply), then take it with a take that
//! acknowledges the previous cycle's message (one apply); a cycle counts when the take
//! hands out its message. With `--mail-cycle read-ack`: send, read it (a linearizable
//! read), acknowledge it (one apply); a cycle counts when its ack is answered. Latency runs
//! from the send to the cycle's last answer. With `--send-batch N` (take cycle) a round
//! sends N messages in one write and takes them in one take: N cycles per two applies.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use whip_cell::CellClient;
use whip_proto::v1 as pb;

use super::{BenchArgs, MailCycle, Worker, agent_clients, progress, report};
use crate::Global;
use crate::connect::Session;

pub(super) async fn run(
    global: &Global,
    session: Session,
    args: BenchArgs,
    warmup: Duration,
    duration: Duration,
) -> Result<ExitCode> {
    let (session, clients) = agent_clients(global, session, args.conns).await?;
    let (root, mailboxes) = mailboxes(&session.client, args.clients).await?;
    let start = Instant::now();
    let (from, end) = (start + warmup, start + warmup + duration);
    let workers: Vec<_> = mailboxes
        .into_iter()
        .enumerate()
        .map(|(i, address)| {
            let c = clients[i % clients.len()].clone();
            let (kind, batch) = (args.mail_cycle, args.send_batch);
            tokio::spawn(async move { cycle(&c, &address, (kind, batch), (from, end)).await })
        })
        .collect();
    let ticker = tokio::spawn(progress(start, end));
    let mut results = Vec::new();
    for w in workers {
        results.push(w.await.map_err(|e| anyhow!("bench worker panicked: {e}"))?);
    }
    ticker.abort();
    let revoke = pb::WorkRevokeRequest {
        id: root,
        idempotency_key: String::new(),
    };
    session.client.work_revoke(revoke).await?;
    session.close().await;
    report(global, &args, duration, results)
}

/// One root entry for the run and one child entry per client: their mailboxes.
async fn mailboxes(c: &CellClient, clients: usize) -> Result<(String, Vec<String>)> {
    let register = |parent: &str| pb::WorkRegisterRequest {
        kind: "job".into(),
        parent: parent.into(),
        ttl_ms: 600_000,
        ..Default::default()
    };
    let root = c.work_register(register("")).await?;
    let Some(root) = root.entry.map(|e| e.id) else {
        bail!("the bench's root entry was refused: {}", root.reason);
    };
    let mut out = Vec::with_capacity(clients);
    for _ in 0..clients {
        let child = c.work_register(register(&root)).await?;
        let Some(child) = child.entry.map(|e| e.id) else {
            bail!("a bench entry was refused: {}", child.reason);
        };
        out.push(format!("entry:{child}"));
    }
    Ok((root, out))
}

async fn cycle(
    c: &CellClient,
    address: &str,
    (kind, batch): (MailCycle, u32),
    (from, end): (Instant, Instant),
) -> Worker {
    let mut w = Worker {
        latencies_us: Vec::new(),
        commits: 0,
        errors: 0,
    };
    let mut acked = None;
    while Instant::now() < end {
        let began = Instant::now();
        let cycles = match (kind, batch) {
            (MailCycle::Take, 1) => u32::from(round_take(c, address, &mut acked).await),
            (MailCycle::Take, n) => round_take_many(c, address, &mut acked, n).await,
            (MailCycle::ReadAck, _) => u32::from(round(c, address).await),
        };
        if began < from {
            continue;
        }
        if cycles == 0 {
            w.errors += 1;
        }
        let us = began.elapsed().as_micros().min(u128::from(u32::MAX));
        w.commits += u64::from(cycles);
        w.latencies_us
            .extend(std::iter::repeat_n(us as u32, cycles as usize));
    }
    w
}

/// Send `n` messages to `address` in one write, then take them while acknowledging the
/// last round's (`acked`): how many the take handed out (0 when a send was refused).
async fn round_take_many(c: &CellClient, address: &str, acked: &mut Option<u64>, n: u32) -> u32 {
    let item = pb::MailSendItem {
        r#type: pb::MailType::Inform.into(),
        text: "bench".into(),
        ..Default::default()
    };
    let send = pb::MailSendManyRequest {
        to: address.to_string(),
        messages: vec![item; n as usize],
        idempotency_key: String::new(),
    };
    let delivered = c
        .mail_send_many(send)
        .await
        .is_ok_and(|r| r.results.iter().all(|m| m.outcome == "delivered"));
    if !delivered {
        return 0;
    }
    let take = pb::MailTakeRequest {
        address: address.to_string(),
        ack_through: *acked,
        max: n,
        visibility_ms: 30_000,
        idempotency_key: String::new(),
    };
    match c.mail_take(take).await {
        Ok(r) => {
            if let Some(last) = r.messages.last() {
                *acked = Some(last.seq);
            }
            r.messages.len() as u32
        }
        Err(_) => 0,
    }
}

/// Send one message to `address`: true when it was delivered.
async fn send(c: &CellClient, address: &str) -> bool {
    let send = pb::MailSendRequest {
        to: address.to_string(),
        r#type: pb::MailType::Inform.into(),
        text: "bench".into(),
        ..Default::default()
    };
    c.mail_send(send)
        .await
        .is_ok_and(|r| r.outcome == "delivered")
}

/// Send, then take it while acknowledging the previous one (`acked`): true when the take
/// handed out a message.
async fn round_take(c: &CellClient, address: &str, acked: &mut Option<u64>) -> bool {
    if !send(c, address).await {
        return false;
    }
    let take = pb::MailTakeRequest {
        address: address.to_string(),
        ack_through: *acked,
        max: 1,
        visibility_ms: 30_000,
        idempotency_key: String::new(),
    };
    match c.mail_take(take).await {
        Ok(r) => match r.messages.first() {
            Some(m) => {
                *acked = Some(m.seq);
                true
            }
            None => false,
        },
        Err(_) => false,
    }
}

/// Send, read, acknowledge: true when all three answered as they should.
async fn round(c: &CellClient, address: &str) -> bool {
    if !send(c, address).await {
        return false;
    }
    let read = pb::MailInboxRequest {
        address: address.to_string(),
        limit: 1,
        ..Default::default()
    };
    let Some(seq) = c
        .mail_inbox(read)
        .await
        .ok()
        .and_then(|r| r.messages.first().map(|m| m.seq))
    else {
        return false;
    };
    let ack = pb::MailAckRequest {
        address: address.to_string(),
        through_seq: seq,
        idempotency_key: String::new(),
    };
    c.mail_ack(ack).await.is_ok_and(|r| r.outcome == "acked")
}
