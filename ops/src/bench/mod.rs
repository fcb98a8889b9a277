//! `whip bench cas|lease|ledger`: closed-loop clients against a cell, reporting ops/s and
//! latency percentiles. Only operations started after the warm-up count.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use clap::{Args, ValueEnum};
use serde_json::json;
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::Global;
use crate::connect::{cell_addrs, session};
use crate::output::{self, parse_duration_ms};

mod board;
mod mail;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Workload {
    /// Compare-and-set on shared keys; on a version mismatch learn the version and retry
    /// the same key.
    Cas,
    /// Acquire then release a one-slot lease on shared keys.
    Lease,
    /// Append to ledger partitions.
    Ledger,
    /// Linearizable reads of shared keys (each key is put once before the run).
    Get,
    /// Run a WhippleScript program (`--program FILE`) to completion, over and over:
    /// completed instances per second.
    Engine,
    /// Task board cycles: producers keep a bounded backlog of posted tasks, each client is
    /// a worker looping claim → complete; completed cycles per second, latency per cycle.
    Board,
    /// Mail cycles: each client sends a message to its own mailbox, reads it and
    /// acknowledges it; cycles per second, latency per cycle.
    Mail,
}

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    pub(crate) workload: Workload,
    /// Concurrent closed-loop clients.
    #[arg(long, default_value_t = 16)]
    pub(crate) clients: usize,
    /// Measured time.
    #[arg(long, default_value = "5s")]
    duration: String,
    /// Warm-up before measuring.
    #[arg(long, default_value = "1s")]
    warmup: String,
    /// Shared keys the clients contend on (0 = one private key per client).
    #[arg(long, default_value_t = 16)]
    keys: usize,
    /// gRPC connections shared by the clients.
    #[arg(long, default_value_t = 8)]
    pub(crate) conns: usize,
    /// Value size in bytes (CAS) or entry size (ledger).
    #[arg(long, default_value_t = 64)]
    value_bytes: usize,
    /// The program `bench engine` runs (each client is one runner).
    #[arg(long)]
    program: Option<std::path::PathBuf>,
    /// `bench mail`'s cycle: `take` (send, then one take that acknowledges the previous
    /// message and takes this one: two applies) or `read-ack` (send, read, acknowledge).
    #[arg(long, value_enum, default_value = "take")]
    pub(crate) mail_cycle: MailCycle,
    /// `bench board`'s worker holds up to this many claims: each call completes every held
    /// task and claims as many again in one write (1 = complete-and-claim-next).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub(crate) prefetch: u32,
    /// `bench mail --mail-cycle take`: each round sends this many messages in one write
    /// (`MailSendMany`), then one take acknowledges the last round's and takes these; each
    /// message is a cycle (1 = one send per cycle).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) send_batch: u32,
}

/// How `whip bench mail` drains its message.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum MailCycle {
    /// `MailTake` acknowledging the previous message: two applies per cycle.
    Take,
    /// A read, then `MailAck`: two applies and a linearizable read per cycle.
    ReadAck,
}

/// The session acting for the CLI's agent (registered on first use), and `conns` clients
/// carrying its identity.
pub(crate) async fn agent_clients(
    global: &Global,
    session: crate::connect::Session,
    conns: usize,
) -> Result<(crate::connect::Session, Vec<Arc<whip_cell::CellClient>>)> {
    let session = crate::agent::authenticate(global, session).await?;
    let (agent, token) = session
        .client
        .identity()
        .ok_or_else(|| anyhow::anyhow!("this bench needs an agent identity"))?;
    let plain = connect_clients(global, &session.client, conns.max(1)).await?;
    let clients = plain
        .into_iter()
        .map(|c| {
            let c = Arc::try_unwrap(c).unwrap_or_else(|_| unreachable!("fresh client"));
            Arc::new(c.with_identity(agent.clone(), token.clone()))
        })
        .collect();
    Ok((session, clients))
}

pub(crate) struct Worker {
    pub(crate) latencies_us: Vec<u32>,
    pub(crate) commits: u64,
    pub(crate) errors: u64,
}

pub(crate) async fn run(global: &Global, args: BenchArgs) -> Result<ExitCode> {
    if args.clients == 0 {
        bail!("--clients must be at least 1");
    }
    let duration =
        Duration::from_millis(parse_duration_ms(&args.duration).map_err(anyhow::Error::msg)?);
    let warmup =
        Duration::from_millis(parse_duration_ms(&args.warmup).map_err(anyhow::Error::msg)?);
    if let Workload::Engine = args.workload {
        let Some(program) = &args.program else {
            bail!("`whip bench engine` needs --program FILE");
        };
        return crate::run::bench_engine(global, program, args.clients, warmup, duration).await;
    }
    let session = session(global).await?;
    match args.workload {
        Workload::Board => return board::run(global, session, args, warmup, duration).await,
        Workload::Mail => return mail::run(global, session, args, warmup, duration).await,
        _ => {}
    }
    let clients = connect_clients(global, &session.client, args.conns.max(1)).await?;
    if let Workload::Get = args.workload {
        put_read_keys(&clients[0], &args).await?;
    }
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let args = Arc::new(args);
    let mut tasks = Vec::new();
    for i in 0..args.clients {
        let client = clients[i % clients.len()].clone();
        let args = args.clone();
        tasks.push(tokio::spawn(async move {
            client_loop(&client, &args, i, measure_from, end).await
        }));
    }
    let progress = tokio::spawn(progress(start, end));
    let mut workers = Vec::new();
    for t in tasks {
        workers.push(t.await.map_err(|e| anyhow!("bench client panicked: {e}"))?);
    }
    progress.abort();
    session.close().await;
    report(global, &args, duration, workers)
}

/// The keys a `get` run reads, each put once.
async fn put_read_keys(client: &CellClient, args: &BenchArgs) -> Result<()> {
    let keys: Vec<String> = match args.keys {
        0 => (0..args.clients)
            .map(|i| format!("bench/own/{i}"))
            .collect(),
        n => (0..n).map(|slot| format!("bench/{slot}")).collect(),
    };
    for key in keys {
        let req = pb::KvPutRequest {
            key: key.into_bytes(),
            value: vec![b'x'; args.value_bytes],
            ..Default::default()
        };
        client.kv_put(req).await?;
    }
    Ok(())
}

/// Clients go straight to the leader (found through any member), as a well-behaved client
/// library would; through fabric nodes, straight to the leader of the cell owning each key
/// (one range map shared by every client); the embedded store has one member.
pub(crate) async fn connect_clients(
    global: &Global,
    first: &CellClient,
    conns: usize,
) -> Result<Vec<Arc<CellClient>>> {
    let Some(spec) = &global.cell else {
        return Ok(vec![Arc::new(CellClient::new(
            whip_cell::client::Target::Unix(
                global
                    .store
                    .clone()
                    .unwrap_or_else(|| ".whipplescript".into())
                    .join("cell.sock"),
            ),
        )?)]);
    };
    let status = first.status(pb::StatusRequest::default()).await?;
    let leader = status
        .leader
        .and_then(|l| status.members.iter().find(|m| m.id == l))
        .map(|m| m.addr.clone());
    let mut addrs = cell_addrs(spec);
    if let Some(leader) = leader {
        addrs.retain(|a| *a != leader);
        addrs.insert(0, leader);
    }
    let router: Arc<dyn whip_cell::client::Router> =
        Arc::new(whip_fabric::client::MapRouter::new());
    (0..conns)
        .map(|_| {
            Ok(Arc::new(
                CellClient::connect(&addrs)?.with_router(router.clone()),
            ))
        })
        .collect()
}

pub(crate) async fn progress(start: Instant, end: Instant) {
    let total = end.duration_since(start).as_secs();
    // Dropped with this future when the bench ends: the bar leaves the screen.
    let mut shown = crate::progress::Progress::new("bench", total, "s");
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        shown.set(start.elapsed().as_secs());
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

async fn client_loop(
    client: &CellClient,
    args: &BenchArgs,
    i: usize,
    from: Instant,
    end: Instant,
) -> Worker {
    let mut w = Worker {
        latencies_us: Vec::new(),
        commits: 0,
        errors: 0,
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut versions = vec![0u64; args.keys.max(1)];
    let value = vec![b'x'; args.value_bytes];
    // A CAS that lost on the version retries the same key with the version it learned, as
    // peer-bench's etcd loop does; a new key is drawn only after a commit or an error.
    let mut retry: Option<usize> = None;
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            return w;
        }
        let slot = match retry.take() {
            Some(slot) => slot,
            None if args.keys == 0 => 0,
            None => (rng.next() % args.keys as u64) as usize,
        };
        let key = if args.keys == 0 {
            format!("bench/own/{i}")
        } else {
            format!("bench/{slot}")
        };
        let committed = match args.workload {
            Workload::Cas => cas(client, key, &value, &mut versions[slot]).await,
            Workload::Lease => lease(client, key, i).await,
            Workload::Ledger => ledger(client, i, &value).await,
            Workload::Get => get(client, key).await,
            Workload::Engine | Workload::Board | Workload::Mail => {
                unreachable!("runs in its own loop")
            }
        };
        if matches!(args.workload, Workload::Cas) && matches!(committed, Ok(false)) {
            retry = Some(slot);
        }
        if t0 >= from {
            w.latencies_us
                .push(t0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
            match committed {
                Ok(true) => w.commits += 1,
                Ok(false) => {}
                Err(_) => w.errors += 1,
            }
        }
    }
}

async fn cas(client: &CellClient, key: String, value: &[u8], version: &mut u64) -> Result<bool> {
    let req = pb::KvPutRequest {
        key: key.into_bytes(),
        value: value.to_vec(),
        expect_version: Some(*version),
        ..Default::default()
    };
    let r = client.kv_put(req).await?;
    if r.code == Code::KvWritten as i32 {
        *version = r.version;
        Ok(true)
    } else {
        *version = r.current_version;
        Ok(false)
    }
}

async fn get(client: &CellClient, key: String) -> Result<bool> {
    let req = pb::KvGetRequest {
        key: key.into_bytes(),
        ..Default::default()
    };
    Ok(client.kv_get(req).await?.found)
}

async fn lease(client: &CellClient, key: String, i: usize) -> Result<bool> {
    let lease = Some(pb::ResourceId {
        owner: "bench".into(),
        name: "lease".into(),
        key,
    });
    let holder = format!("client-{i}");
    let req = pb::LeaseAcquireRequest {
        lease: lease.clone(),
        holder: holder.clone(),
        slots: 1,
        ttl_ms: 30_000,
        ..Default::default()
    };
    let r = client.lease_acquire(req).await?;
    if r.code == Code::LeaseHeld as i32 {
        client
            .lease_release(pb::LeaseReleaseRequest {
                lease,
                holder,
                ..Default::default()
            })
            .await?;
        return Ok(true);
    }
    Ok(false)
}

async fn ledger(client: &CellClient, i: usize, value: &[u8]) -> Result<bool> {
    let ledger = Some(pb::ResourceId {
        owner: "bench".into(),
        name: "ledger".into(),
        key: format!("p{}", i % 16),
    });
    let entry = serde_json::to_vec(&json!({ "data": String::from_utf8_lossy(value) }))?;
    let req = pb::LedgerAppendRequest {
        ledger,
        entry,
        appended_by: format!("client-{i}"),
        retain_ms: 3_600_000,
        ..Default::default()
    };
    client.ledger_append(req).await?;
    Ok(true)
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn report(
    global: &Global,
    args: &BenchArgs,
    duration: Duration,
    workers: Vec<Worker>,
) -> Result<ExitCode> {
    let mut all: Vec<u32> = workers
        .iter()
        .flat_map(|w| w.latencies_us.iter().copied())
        .collect();
    all.sort_unstable();
    let commits: u64 = workers.iter().map(|w| w.commits).sum();
    let errors: u64 = workers.iter().map(|w| w.errors).sum();
    let secs = duration.as_secs_f64();
    let ops_per_sec = commits as f64 / secs;
    let (p50, p99, p999) = (
        percentile(&all, 50.0),
        percentile(&all, 99.0),
        percentile(&all, 99.9),
    );
    let workload = format!("{:?}", args.workload).to_lowercase();
    if global.json {
        output::json(&json!({
            "workload": workload, "clients": args.clients, "keys": args.keys,
            "ops_per_sec": (ops_per_sec * 10.0).round() / 10.0,
            "requests_per_sec": ((all.len() as f64 / secs) * 10.0).round() / 10.0,
            "p50_us": p50, "p99_us": p99, "p999_us": p999, "errors": errors,
        }));
    } else {
        output::line(&format!(
            "{workload}: {ops_per_sec:.0} ops/s ({:.0} requests/s), p50 {p50} us, \
             p99 {p99} us, p999 {p999} us, {errors} errors",
            all.len() as f64 / secs
        ));
    }
    Ok(if errors > 0 && commits == 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
