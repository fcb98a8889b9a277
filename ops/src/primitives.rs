//! `whip kv|lease|counter|ledger …`: one request, one printed answer.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_proto::v1::wait_applied_request::Subject;

use whip_cell::{CellClient, Waiter};

use crate::Global;
use crate::connect::session;
use crate::output::{self, Table, parse_duration_ms, time_cell, time_text};

/// Owner namespace of resources named from the command line (engine resources use
/// `local/<Workflow>` or `shared`).
pub(crate) const DEFAULT_OWNER: &str = "shared";

#[derive(Subcommand, Debug)]
pub(crate) enum KvCommand {
    /// Read a key.
    Get { key: String },
    /// Write a key unconditionally. With `--ttl` the key has its own deadline (renew it
    /// with `kv keepalive`); with `--lease RESOURCE/KEY --holder H` it is deleted in the
    /// same apply that frees H's slot of that lease (release, release-all, expiry).
    Put {
        key: String,
        value: String,
        /// Delete the key this long after the write unless kept alive (e.g. 30s).
        #[arg(long, conflicts_with = "lease")]
        ttl: Option<String>,
        /// Attach the key to a lease slot: the lease's RESOURCE/KEY, as `lease acquire
        /// RESOURCE KEY` names it (split at the first `/`).
        #[arg(long, value_name = "RESOURCE/KEY", requires = "holder")]
        lease: Option<String>,
        /// The holder whose slot of `--lease` the key lives with (it must hold it now).
        #[arg(long, requires = "lease")]
        holder: Option<String>,
        /// Owner namespace of `--lease` (as `lease acquire --owner`).
        #[arg(long, default_value = DEFAULT_OWNER)]
        lease_owner: String,
    },
    /// Move a key's own deadline (set by `kv put --ttl`) to now + TTL (never earlier).
    Keepalive {
        key: String,
        #[arg(long)]
        ttl: String,
    },
    /// An etcd-like transaction, decided in one apply on the cell: BODY is
    /// `{"compare":[…],"success":[…],"failure":[…]}` (or `-` for stdin). A compare is
    /// `{"key":K,"version":N}` or `{"key":K,"value":V}` with `"op"` `=` (default), `!=`,
    /// `<` or `>`; an operation is `{"put":{"key":K,"value":V}}`, `{"delete":{"key":K}}`
    /// or `{"get":{"key":K}}`. With --json it answers
    /// `{"succeeded":bool,"fence":N,"responses":[…]}`, one response per operation run.
    Txn { body: String },
    /// Write a key only if its version is `--expect` (0 = the key must be absent).
    Cas {
        key: String,
        value: String,
        #[arg(long)]
        expect: u64,
    },
    /// Delete a key (only at version `--expect` when given).
    Del {
        key: String,
        #[arg(long)]
        expect: Option<u64>,
    },
    /// Keys starting with PREFIX, in key order, one page (`more`: the next page starts
    /// after the last key listed: pass it as `--after`).
    List {
        prefix: String,
        /// Keys on this page at most (default and ceiling: the server's page size).
        #[arg(long, default_value_t = 0)]
        limit: u32,
        /// Only keys after this one (the last key of the page before).
        #[arg(long, default_value = "")]
        after: String,
    },
    /// Print each change of KEY (every key under it with --prefix), one line per event,
    /// until stopped; follows member failures, leader changes and range moves.
    Watch {
        key: String,
        /// Watch every key starting with KEY.
        #[arg(long)]
        prefix: bool,
        /// Start at this revision (earlier events of a still-kept history are replayed;
        /// a compacted one is an error). Default: from now.
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
}

#[derive(Args, Debug)]
pub(crate) struct LeaseTarget {
    /// The lease (resource) name.
    #[arg(required_unless_present = "singleton", conflicts_with = "singleton")]
    resource: Option<String>,
    /// The key within the lease (one pool of slots per key).
    #[arg(required_unless_present = "singleton")]
    key: Option<String>,
    /// A singleton: one slot fabric-wide for SCOPE (a cron job, a service leader). Its
    /// scope routes to exactly one cell, so there is one row however many cells exist.
    #[arg(long, value_name = "SCOPE")]
    singleton: Option<String>,
    /// Holder identity.
    #[arg(long)]
    holder: String,
    /// Owner namespace.
    #[arg(long, default_value = DEFAULT_OWNER)]
    owner: String,
}

#[derive(Subcommand, Debug)]
pub(crate) enum LeaseCommand {
    /// Take a slot: held, contended, or waiting (with --wait).
    Acquire {
        #[command(flatten)]
        target: LeaseTarget,
        #[arg(long, default_value_t = 1)]
        slots: u32,
        /// Backstop if the holder dies (e.g. 30s).
        #[arg(long)]
        ttl: String,
        /// Queue up to this long when all slots are taken.
        #[arg(long)]
        wait: Option<String>,
        /// Fail-open (idempotent work only): when the lease's cell has no quorum, answer
        /// `held_degraded` instead of failing. Default: fail-closed.
        #[arg(long)]
        fail_open: bool,
    },
    /// Push the holder's deadline to now + TTL (never earlier).
    Renew {
        #[command(flatten)]
        target: LeaseTarget,
        #[arg(long)]
        ttl: String,
    },
    /// Give the slot back.
    Release {
        #[command(flatten)]
        target: LeaseTarget,
    },
    /// Live leases with their holders.
    List {
        #[arg(long, default_value = "")]
        prefix: String,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ResetArg {
    Hourly,
    Daily,
    Weekly,
    Monthly,
}

#[derive(Subcommand, Debug)]
pub(crate) enum CounterCommand {
    /// Spend from a capped budget: ok (charged) or over (nothing charged).
    Consume {
        counter: String,
        key: String,
        #[arg(long)]
        amount: u64,
        #[arg(long)]
        cap: u64,
        #[arg(long, value_enum)]
        reset: ResetArg,
        /// IANA time zone of the reset boundary.
        #[arg(long, default_value = "UTC")]
        timezone: String,
        #[arg(long, default_value = DEFAULT_OWNER)]
        owner: String,
    },
    /// Counters and their consumption in the current period.
    List {
        #[arg(long, default_value = "")]
        prefix: String,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum LedgerCommand {
    /// Append a JSON entry to a partition.
    Append {
        ledger: String,
        partition: String,
        /// The entry, as JSON.
        #[arg(long)]
        entry: String,
        /// Keep entries this long.
        #[arg(long, default_value = "90d")]
        retain: String,
        /// Appender identity.
        #[arg(long, default_value = "cli")]
        by: String,
        #[arg(long, default_value = DEFAULT_OWNER)]
        owner: String,
    },
    /// The work registry's control-plane actions (register, signal, revoke, limits) with
    /// the acting agent, the target and the outcome, fabric-wide (as `whip work audit`).
    Audit,
    /// Entries of one ledger in sequence order, any ledger by name (owner `shared` unless
    /// `--owner`): also one named like a subcommand (`whip ledger list audit`).
    List {
        ledger: String,
        #[arg(long)]
        partition: Option<String>,
        #[arg(long, default_value = DEFAULT_OWNER)]
        owner: String,
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
}

pub(crate) fn code_name(code: i32) -> String {
    // `lease_held` → `held`, `counter_over` → `over`, `kv_written` → `written`.
    Code::try_from(code).map_or_else(|_| "unknown".into(), whip_cell::outcome_word)
}

fn print(global: &Global, value: Value, text: String) -> ExitCode {
    if global.json {
        output::json(&value)
    } else {
        output::line(&text)
    }
    ExitCode::SUCCESS
}

pub(crate) async fn kv(global: &Global, cmd: KvCommand) -> Result<ExitCode> {
    let session = crate::agent::act_as_flag(global, session(global).await?).await?;
    let result = kv_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

async fn kv_on(global: &Global, c: &CellClient, cmd: KvCommand) -> Result<ExitCode> {
    Ok(match cmd {
        KvCommand::Get { key } => {
            let r = c
                .kv_get(pb::KvGetRequest {
                    key: key.into_bytes(),
                    ..Default::default()
                })
                .await?;
            let value = String::from_utf8_lossy(&r.value).to_string();
            let text = if r.found {
                format!("{value} (version {})", r.version)
            } else {
                "(absent)".into()
            };
            print(
                global,
                json!({"found": r.found, "value": value, "version": r.version}),
                text,
            )
        }
        KvCommand::Put {
            key,
            value,
            ttl,
            lease,
            holder,
            lease_owner,
        } => {
            let mut req = put(key, value, None);
            if let Some(ttl) = ttl {
                req.ttl_ms = parse_duration_ms(&ttl).map_err(anyhow::Error::msg)?;
            }
            if let (Some(lease), Some(holder)) = (lease, holder) {
                req.lease = Some(attached_lease(&lease, lease_owner)?);
                req.lease_holder = holder;
            }
            write(global, c.kv_put(req).await?)
        }
        KvCommand::Keepalive { key, ttl } => {
            let req = pb::KvKeepaliveRequest {
                key: key.into_bytes(),
                ttl_ms: parse_duration_ms(&ttl).map_err(anyhow::Error::msg)?,
                ..Default::default()
            };
            write(global, c.kv_keepalive(req).await?)
        }
        KvCommand::Txn { body } => crate::kvtxn::run(global, c, &body).await?,
        KvCommand::Cas { key, value, expect } => {
            write(global, c.kv_put(put(key, value, Some(expect))).await?)
        }
        KvCommand::Del { key, expect } => {
            let req = pb::KvDeleteRequest {
                key: key.into_bytes(),
                expect_version: expect,
                ..Default::default()
            };
            write(global, c.kv_delete(req).await?)
        }
        KvCommand::List {
            prefix,
            limit,
            after,
        } => list(global, c, (prefix, after), limit).await?,
        KvCommand::Watch { key, prefix, from } => {
            crate::watch::kv_watch(global, c, (key, prefix), from).await?
        }
    })
}

/// `whip kv list`: one page of keys, and whether more follow.
async fn list(
    global: &Global,
    c: &CellClient,
    (prefix, after): (String, String),
    limit: u32,
) -> Result<ExitCode> {
    let page = c
        .kv_range(pb::KvRangeRequest {
            prefix: prefix.into_bytes(),
            after_key: after.into_bytes(),
            limit,
            ..Default::default()
        })
        .await?;
    let more = !page.resume_after.is_empty();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let items: Vec<Value> = (page.entries.iter())
        .map(|e| json!({"key": text(&e.key), "value": text(&e.value), "version": e.version}))
        .collect();
    let mut lines: Vec<String> = (page.entries.iter())
        .map(|e| {
            format!(
                "{} = {} (version {})",
                text(&e.key),
                text(&e.value),
                e.version
            )
        })
        .collect();
    if more {
        let last = text(&page.resume_after);
        lines.push(format!("(more: --after {last})"));
    }
    let lines = if lines.is_empty() {
        vec!["(no keys)".to_string()]
    } else {
        lines
    };
    Ok(print(
        global,
        json!({"items": items, "more": more}),
        lines.join("\n"),
    ))
}

fn put(key: String, value: String, expect_version: Option<u64>) -> pb::KvPutRequest {
    pb::KvPutRequest {
        key: key.into_bytes(),
        value: value.into_bytes(),
        expect_version,
        ..Default::default()
    }
}

/// `--lease RESOURCE/KEY` of `kv put` as the lease `lease acquire RESOURCE KEY` names.
fn attached_lease(lease: &str, owner: String) -> Result<pb::ResourceId> {
    match lease.split_once('/') {
        Some((name, key)) if !name.is_empty() => Ok(pb::ResourceId {
            owner,
            name: name.into(),
            key: key.into(),
        }),
        _ => bail!("--lease {lease:?} must be RESOURCE/KEY, as `whip lease acquire RESOURCE KEY`"),
    }
}

fn write(global: &Global, r: pb::KvWriteResponse) -> ExitCode {
    let outcome = code_name(r.code);
    let text = match Code::try_from(r.code) {
        Ok(Code::KvVersionMismatch) => {
            format!("version mismatch: current version is {}", r.current_version)
        }
        Ok(Code::KvRefused) => {
            if global.json {
                output::json(&json!({"outcome": "refused", "reason": r.refusal,
                    "error": r.message}));
            }
            eprintln!("refused ({}): {}", r.refusal, r.message);
            return ExitCode::from(1);
        }
        Ok(Code::KvKeptAlive) => format!(
            "kept alive version={} until {}",
            r.version,
            time_text(r.expires_at_ms)
        ),
        _ => format!("{outcome} version={} fence={}", r.version, r.fence),
    };
    let mut value = json!({
        "outcome": outcome, "version": r.version, "fence": r.fence,
        "current_version": r.current_version
    });
    if r.code == Code::KvKeptAlive as i32 {
        value = json!({"outcome": outcome, "version": r.version,
            "expires_at_ms": r.expires_at_ms, "expires_at": time_text(r.expires_at_ms)});
    }
    print(global, value, text)
}

/// Owner namespace of singleton leases.
const SINGLETON_OWNER: &str = "singleton";

fn lease_id(t: &LeaseTarget) -> Option<pb::ResourceId> {
    if let Some(scope) = &t.singleton {
        return Some(pb::ResourceId {
            owner: SINGLETON_OWNER.into(),
            name: scope.clone(),
            key: String::new(),
        });
    }
    Some(pb::ResourceId {
        owner: t.owner.clone(),
        name: t.resource.clone().unwrap_or_default(),
        key: t.key.clone().unwrap_or_default(),
    })
}

pub(crate) async fn lease(global: &Global, cmd: LeaseCommand) -> Result<ExitCode> {
    let session = crate::agent::act_as_flag(global, session(global).await?).await?;
    let result = lease_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

async fn lease_on(global: &Global, c: &CellClient, cmd: LeaseCommand) -> Result<ExitCode> {
    Ok(match cmd {
        LeaseCommand::Acquire {
            target,
            slots,
            ttl,
            wait,
            fail_open,
        } => {
            let wait_ms = wait
                .as_deref()
                .map(parse_duration_ms)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            if target.singleton.is_some() && slots != 1 {
                bail!("a singleton has exactly one slot");
            }
            let req = pb::LeaseAcquireRequest {
                lease: lease_id(&target),
                holder: target.holder.clone(),
                slots,
                ttl_ms: parse_duration_ms(&ttl).map_err(anyhow::Error::msg)?,
                wait_ms: wait_ms.unwrap_or(0),
                fail_open,
                ..Default::default()
            };
            lease_answer(global, acquire_waiting(global, c, req).await?)
        }
        LeaseCommand::Renew { target, ttl } => {
            let ttl_ms = parse_duration_ms(&ttl).map_err(anyhow::Error::msg)?;
            let req = pb::LeaseRenewRequest {
                lease: lease_id(&target),
                holder: target.holder,
                ttl_ms,
                ..Default::default()
            };
            lease_answer(global, c.lease_renew(req).await?)
        }
        LeaseCommand::Release { target } => {
            let req = pb::LeaseReleaseRequest {
                lease: lease_id(&target),
                holder: target.holder,
                ..Default::default()
            };
            lease_answer(global, c.lease_release(req).await?)
        }
        LeaseCommand::List { prefix } => lease_list(
            global,
            c.lease_list(pb::LeaseListRequest { prefix, limit: 0 })
                .await?,
        ),
    })
}

/// Acquire, and with `--wait` block until the slot is held or the wait ran out (then the
/// cell answers `contended`): the caller keeps its place in the cell's FIFO queue by asking
/// again as the same holder.
pub(crate) async fn acquire_waiting(
    global: &Global,
    c: &CellClient,
    req: pb::LeaseAcquireRequest,
) -> Result<pb::LeaseResponse> {
    let started = std::time::Instant::now();
    let wait = std::time::Duration::from_millis(req.wait_ms);
    let mut told = None;
    let subject = Subject::Lease(req.lease.clone().unwrap_or_default());
    let mut waiter = Waiter::mark(c, subject).await?;
    loop {
        let left = wait.saturating_sub(started.elapsed());
        let ask = pb::LeaseAcquireRequest {
            wait_ms: left.as_millis() as u64,
            ..req.clone()
        };
        let r = c.lease_acquire(ask).await?;
        if r.code != Code::LeaseWaiting as i32 || left.is_zero() {
            return Ok(r);
        }
        if !global.json && told != Some(r.position) {
            eprintln!(
                "waiting at position {} (until held or the wait ends)",
                r.position
            );
            told = Some(r.position);
        }
        tokio::select! {
            waited = await_turn(c, &mut waiter, &req, left) => waited?,
            () = crate::signals::stopped() => return Err(leave_queue(c, &req).await),
        }
    }
}

/// Wait, woken by the lease cell's applies, until the holder's turn may have come: it
/// holds a slot or left the queue, as a read of the lease shows (asking again is a write,
/// which would wake the wait itself), or `WAIT_APPLIED_CALL_MS` passed without a change.
async fn await_turn(
    c: &CellClient,
    waiter: &mut Waiter<'_>,
    req: &pb::LeaseAcquireRequest,
    left: std::time::Duration,
) -> Result<()> {
    let lease = req.lease.clone().unwrap_or_default();
    let started = std::time::Instant::now();
    loop {
        let left = left.saturating_sub(started.elapsed());
        if left.is_zero() || !waiter.next(left).await? {
            return Ok(());
        }
        let prefix = format!("{}/{}", lease.owner, lease.name);
        let views = c
            .lease_list(pb::LeaseListRequest { prefix, limit: 0 })
            .await?;
        let view = views
            .leases
            .iter()
            .find(|v| v.lease.as_ref() == Some(&lease));
        let waiting = view.is_some_and(|v| {
            let queued = v.waiters.iter().any(|w| w.holder == req.holder);
            queued && !v.holders.iter().any(|h| h.holder == req.holder)
        });
        if !waiting {
            return Ok(());
        }
    }
}

/// Interrupted while waiting: leave the wait queue (or give back the slot granted since
/// the last look), then say so.
async fn leave_queue(c: &CellClient, req: &pb::LeaseAcquireRequest) -> anyhow::Error {
    let release = pb::LeaseReleaseRequest {
        lease: req.lease.clone(),
        holder: req.holder.clone(),
        ..Default::default()
    };
    match c.lease_release(release).await {
        Ok(_) => anyhow::anyhow!("interrupted: {} left the wait queue", req.holder),
        Err(e) => anyhow::anyhow!(
            "interrupted: {} could not leave the wait queue: {e}",
            req.holder
        ),
    }
}

fn waiter_json(w: &pb::LeaseWaiter) -> Value {
    json!({"holder": w.holder, "wait_until": time_text(w.wait_until_ms)})
}

fn holder_json(h: &pb::LeaseHolder) -> Value {
    json!({
        "holder": h.holder, "fence": h.fence, "expires_at": time_text(h.expires_at_ms),
        "expires_at_ms": h.expires_at_ms
    })
}

fn lease_answer(global: &Global, r: pb::LeaseResponse) -> ExitCode {
    let outcome = code_name(r.code);
    let mut value = json!({"outcome": outcome});
    let text = match Code::try_from(r.code) {
        Ok(Code::LeaseHeld | Code::LeaseRenewed) => {
            value["fence"] = json!(r.fence);
            value["expires_at"] = json!(time_text(r.expires_at_ms));
            value["expires_at_ms"] = json!(r.expires_at_ms);
            value["reentered"] = json!(r.reentered);
            format!(
                "{outcome} fence={} expires {}",
                r.fence,
                time_text(r.expires_at_ms)
            )
        }
        Ok(Code::LeaseHeldDegraded) => {
            value["degraded_reason"] = json!(r.degraded_reason);
            format!("{outcome}: {}", r.degraded_reason)
        }
        Ok(Code::LeaseContended) => {
            value["holders"] = r.holders.iter().map(holder_json).collect();
            let names: Vec<&str> = r.holders.iter().map(|h| h.holder.as_str()).collect();
            format!("contended: held by {}", names.join(", "))
        }
        Ok(Code::LeaseWaiting) => {
            value["position"] = json!(r.position);
            value["wait_until"] = json!(time_text(r.wait_until_ms));
            format!(
                "waiting at position {} until {}",
                r.position,
                time_text(r.wait_until_ms)
            )
        }
        Ok(Code::LeaseReleasedAll) => {
            value["released"] = json!(r.released);
            format!("released {}", r.released)
        }
        _ => outcome.replace('_', " "),
    };
    print(global, value, text)
}

fn lease_list(global: &Global, r: pb::LeaseListResponse) -> ExitCode {
    if global.json {
        let leases: Vec<Value> = r
            .leases
            .iter()
            .map(|l| {
                let id = l.lease.clone().unwrap_or_default();
                json!({"owner": id.owner, "name": id.name, "key": id.key, "slots": l.slots,
                       "holders": l.holders.iter().map(holder_json).collect::<Vec<_>>(),
                       "waiters": l.waiters.iter().map(waiter_json).collect::<Vec<_>>()})
            })
            .collect();
        output::json(&json!({ "leases": leases }));
        return ExitCode::SUCCESS;
    }
    let mut table = Table::new(&["lease", "holder", "state", "fence", "until"]);
    for l in &r.leases {
        let id = l.lease.clone().unwrap_or_default();
        let name = format!("{}::{}/{}", id.owner, id.name, id.key);
        for h in &l.holders {
            let (fence, until) = (h.fence.to_string(), time_cell(h.expires_at_ms));
            table.row(vec![
                name.clone(),
                h.holder.clone(),
                "held".into(),
                fence,
                until,
            ]);
        }
        for w in &l.waiters {
            let until = time_cell(w.wait_until_ms);
            table.row(vec![
                name.clone(),
                w.holder.clone(),
                "waiting".into(),
                "-".into(),
                until,
            ]);
        }
    }
    table.print_or("no leases held");
    ExitCode::SUCCESS
}

pub(crate) async fn counter(global: &Global, cmd: CounterCommand) -> Result<ExitCode> {
    let session = crate::agent::act_as_flag(global, session(global).await?).await?;
    let result = counter_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

async fn counter_on(global: &Global, c: &CellClient, cmd: CounterCommand) -> Result<ExitCode> {
    Ok(match cmd {
        CounterCommand::Consume {
            counter,
            key,
            amount,
            cap,
            reset,
            timezone,
            owner,
        } => {
            let reset = match reset {
                ResetArg::Hourly => pb::Reset::Hourly,
                ResetArg::Daily => pb::Reset::Daily,
                ResetArg::Weekly => pb::Reset::Weekly,
                ResetArg::Monthly => pb::Reset::Monthly,
            };
            let req = pb::CounterConsumeRequest {
                counter: Some(pb::ResourceId {
                    owner,
                    name: counter,
                    key,
                }),
                amount,
                cap,
                reset: reset as i32,
                timezone,
                ..Default::default()
            };
            let r = c.counter_consume(req).await?;
            let outcome = code_name(r.code);
            let value = json!({
                "outcome": outcome, "consumed": r.consumed, "remaining": r.remaining,
                "period": r.period
            });
            let text = format!(
                "{outcome} consumed={} remaining={} period={}",
                r.consumed, r.remaining, r.period
            );
            print(global, value, text)
        }
        CounterCommand::List { prefix } => {
            let r = c
                .counter_list(pb::CounterListRequest { prefix, limit: 0 })
                .await?;
            let rows: Vec<Value> = r
                .counters
                .iter()
                .map(|v| {
                    let id = v.counter.clone().unwrap_or_default();
                    json!({
                        "owner": id.owner, "name": id.name, "key": id.key, "consumed": v.consumed,
                        "cap": v.cap, "period": v.period
                    })
                })
                .collect();
            let mut table = Table::new(&["counter", "consumed", "cap", "period"]);
            for v in &r.counters {
                let id = v.counter.clone().unwrap_or_default();
                let name = format!("{}::{}/{}", id.owner, id.name, id.key);
                table.row(vec![
                    name,
                    v.consumed.to_string(),
                    v.cap.to_string(),
                    v.period.clone(),
                ]);
            }
            let text = table.lines_or("no counters").join("\n");
            print(global, json!({ "counters": rows }), text)
        }
    })
}

pub(crate) async fn ledger(global: &Global, cmd: LedgerCommand) -> Result<ExitCode> {
    let session = crate::agent::act_as_flag(global, session(global).await?).await?;
    let result = ledger_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

async fn ledger_on(global: &Global, c: &CellClient, cmd: LedgerCommand) -> Result<ExitCode> {
    Ok(match cmd {
        LedgerCommand::Audit => return crate::workcmd::audit_on(global, c).await,
        LedgerCommand::Append {
            ledger,
            partition,
            entry,
            retain,
            by,
            owner,
        } => {
            let parsed: Value = match serde_json::from_str(&entry) {
                Ok(v) => v,
                Err(e) => bail!("--entry is not valid JSON: {e}"),
            };
            let req = pb::LedgerAppendRequest {
                ledger: Some(pb::ResourceId {
                    owner,
                    name: ledger,
                    key: partition,
                }),
                entry: parsed.to_string().into_bytes(),
                appended_by: by,
                retain_ms: parse_duration_ms(&retain).map_err(anyhow::Error::msg)?,
                ..Default::default()
            };
            let r = c.ledger_append(req).await?;
            print(
                global,
                json!({"seq": r.seq}),
                format!("appended #{}", r.seq),
            )
        }
        LedgerCommand::List {
            ledger,
            partition,
            owner,
            after,
            limit,
        } => {
            let req = pb::LedgerListRequest {
                owner,
                name: ledger,
                partition,
                after_seq: after,
                limit,
            };
            return ledger_list_on(global, c, req).await;
        }
    })
}

/// `whip ledger list`.
async fn ledger_list_on(
    global: &Global,
    c: &CellClient,
    req: pb::LedgerListRequest,
) -> Result<ExitCode> {
    let r = c.ledger_list(req).await?;
    let rows: Vec<Value> = r
        .entries
        .iter()
        .map(|e| {
            let id = e.ledger.clone().unwrap_or_default();
            let entry: Value = serde_json::from_slice(&e.entry)
                .unwrap_or_else(|_| json!(String::from_utf8_lossy(&e.entry)));
            json!({
                "ledger": id.name, "partition": id.key, "seq": e.seq, "entry": entry,
                "appended_by": e.appended_by, "at": time_text(e.at_ms)
            })
        })
        .collect();
    let mut table = Table::new(&["entry", "partition", "by", "at", "body"]);
    for e in &r.entries {
        let id = e.ledger.clone().unwrap_or_default();
        table.row(vec![
            format!("{}::{}#{}", id.owner, id.name, e.seq),
            id.key,
            e.appended_by.clone(),
            time_cell(e.at_ms),
            String::from_utf8_lossy(&e.entry).into_owned(),
        ]);
    }
    let text = table.lines_or("no entries").join("\n");
    Ok(print(global, json!({ "entries": rows }), text))
}
