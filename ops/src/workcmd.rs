//! `whip work …` (the live work registry) and `whip work audit` (its control-plane
//! actions; also `whip ledger audit`). Registering, renewing, signalling and revoking act
//! for the CLI's agent (`--agent`); setting limits is the operator's (the call carries no
//! agent).

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Subcommand;
use serde_json::{Value, json};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::Global;
use crate::connect::session;
use crate::output::{self, Table, parse_duration_ms, time_cell, time_text};

#[derive(Subcommand, Debug)]
pub(crate) enum WorkCommand {
    /// Register a session, run, sub-agent, shell or job (admission is decided here; a
    /// refusal by a limit prints the limit and exits 0).
    Register {
        /// session, run, subagent, shell or job.
        #[arg(long)]
        kind: String,
        /// The parent entry (you must own it or one of its ancestors).
        #[arg(long)]
        parent: Option<String>,
        /// Resource class (default `default`).
        #[arg(long)]
        class: Option<String>,
        /// The lease (e.g. 30s); renew within it.
        #[arg(long)]
        ttl: String,
        /// Run the entry as this agent (a sub-agent you enrolled) instead of yourself.
        #[arg(long)]
        owner: Option<String>,
    },
    /// Renew an entry's lease; prints the signal in force (run, pause, stop).
    Renew {
        id: String,
        /// The lease from now (default 30s).
        #[arg(long, default_value = "30s")]
        ttl: String,
    },
    /// Set an entry's signal (its parent's or an ancestor's owner only).
    Signal {
        id: String,
        /// run, pause or stop.
        #[arg(long = "set")]
        signal: String,
    },
    /// Remove an entry and its subtree; agents you enrolled for them are revoked.
    Revoke { id: String },
    /// Change an entry's resource class and/or budget (its parent's or an ancestor's
    /// owner only).
    Scope {
        id: String,
        #[arg(long)]
        class: Option<String>,
        #[arg(long)]
        budget: Option<u64>,
    },
    /// Live entries (of one parent, or of the whole fabric).
    List {
        #[arg(long)]
        parent: Option<String>,
    },
    /// The registry's control-plane actions (register, signal, revoke, limits) with the
    /// acting agent, the target and the outcome, fabric-wide (as `whip ledger audit`).
    Audit,
    /// Show or set the admission limits (setting is the operator's).
    Limits {
        /// The fabric's population ceiling.
        #[arg(long)]
        fabric_max: Option<u64>,
        /// Live entries per cell.
        #[arg(long)]
        cell_max: Option<u64>,
        /// Deepest lineage (a root has depth 0).
        #[arg(long)]
        depth_max: Option<u32>,
        /// Live children per entry.
        #[arg(long)]
        children_max: Option<u32>,
        /// A resource class and its per-cell maximum (`NAME=MAX`, repeatable).
        #[arg(long = "class")]
        classes: Vec<String>,
        /// Live entries one agent may hold on one cell (its share of the ceiling).
        #[arg(long)]
        owner_max: Option<u64>,
    },
}

fn entry_json(e: &pb::WorkEntry) -> Value {
    json!({
        "id": e.id, "kind": e.kind, "owner": e.owner,
        "parent": (!e.parent.is_empty()).then_some(&e.parent),
        "lineage": e.lineage, "depth": e.depth, "class": e.class, "signal": e.signal,
        "created": time_text(e.created_ms), "expires": time_text(e.expires_ms),
        "expires_ms": e.expires_ms, "children": e.children, "budget": e.budget,
    })
}

fn answer_json(r: &pb::WorkResponse) -> Value {
    match r.code() {
        Code::WorkAdmitted => {
            let entry = r.entry.clone().unwrap_or_default();
            json!({
                "outcome": "admitted", "id": entry.id, "depth": entry.depth,
                "lineage": entry.lineage, "peers": r.peers, "kind": entry.kind,
                "owner": entry.owner, "class": entry.class, "expires_ms": entry.expires_ms,
            })
        }
        Code::WorkRefused => json!({
            "outcome": "refused", "limit": r.limit, "reason": r.reason,
            "max": r.max, "current": r.current,
        }),
        Code::WorkRenewed => json!({
            "outcome": "renewed", "signal": r.signal, "reason": r.signal_reason,
            "expires_ms": r.expires_ms, "expires": time_text(r.expires_ms), "budget": r.budget,
        }),
        Code::WorkSignalled => json!({"outcome": "signalled", "signal": r.signal}),
        Code::WorkScoped => json!({"outcome": "scoped", "class": r.class, "budget": r.budget}),
        Code::WorkRevoked => json!({
            "outcome": "revoked", "removed": r.removed, "revoked_agents": r.revoked_agents,
        }),
        _ => json!({"outcome": r.outcome, "code": r.code}),
    }
}

fn answer_text(r: &pb::WorkResponse) -> String {
    match r.code() {
        Code::WorkAdmitted => {
            let entry = r.entry.clone().unwrap_or_default();
            format!(
                "admitted {} (depth {}, peers {:?})",
                entry.id, entry.depth, r.peers
            )
        }
        Code::WorkRefused => format!("refused by the {} limit: {}", r.limit, r.reason),
        Code::WorkRenewed => format!(
            "{} ({}) until {}",
            r.signal,
            r.signal_reason,
            time_text(r.expires_ms)
        ),
        Code::WorkSignalled => format!("signal set to {}", r.signal),
        Code::WorkScoped => format!("class {}, budget {:?}", r.class, r.budget),
        Code::WorkRevoked => format!(
            "{} entries removed, revoked {:?}",
            r.removed, r.revoked_agents
        ),
        _ => format!("{} (code {})", r.outcome, r.code),
    }
}

fn show(global: &Global, value: &Value, text: &str) {
    match global.json {
        true => output::json(value),
        false => output::line(text),
    }
}

fn classes(specs: &[String]) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for spec in specs {
        let Some((name, max)) = spec.split_once('=') else {
            bail!("--class takes NAME=MAX, got {spec:?}");
        };
        let max: u64 = max
            .parse()
            .map_err(|_| anyhow::anyhow!("--class {spec:?}: MAX"))?;
        out.insert(name.to_string(), max);
    }
    Ok(out)
}

/// `whip work …`.
pub(crate) async fn work(global: &Global, cmd: WorkCommand) -> Result<ExitCode> {
    let operator_call = matches!(
        cmd,
        WorkCommand::Limits { .. } | WorkCommand::List { .. } | WorkCommand::Audit
    );
    let session = session(global).await?;
    let session = match operator_call && global.agent.is_none() {
        true => session,
        false => crate::agent::authenticate(global, session).await?,
    };
    let result = work_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

async fn work_on(global: &Global, c: &CellClient, cmd: WorkCommand) -> Result<ExitCode> {
    let ms = |text: &str| parse_duration_ms(text).map_err(anyhow::Error::msg);
    let answer = match cmd {
        WorkCommand::Register {
            kind,
            parent,
            class,
            ttl,
            owner,
        } => {
            let request = pb::WorkRegisterRequest {
                kind,
                parent: parent.unwrap_or_default(),
                class: class.unwrap_or_default(),
                ttl_ms: ms(&ttl)?,
                owner: owner.unwrap_or_default(),
                idempotency_key: String::new(),
            };
            c.work_register(request).await?
        }
        WorkCommand::Renew { id, ttl } => {
            let ttl_ms = ms(&ttl)?;
            let request = pb::WorkRenewRequest {
                id,
                ttl_ms,
                idempotency_key: String::new(),
            };
            c.work_renew(request).await?
        }
        WorkCommand::Signal { id, signal } => {
            let request = pb::WorkSignalRequest {
                id,
                signal,
                idempotency_key: String::new(),
            };
            c.work_signal(request).await?
        }
        WorkCommand::Scope { id, class, budget } => {
            let request = pb::WorkScopeRequest {
                id,
                class: class.unwrap_or_default(),
                budget,
                idempotency_key: String::new(),
            };
            c.work_scope(request).await?
        }
        WorkCommand::Revoke { id } => {
            let request = pb::WorkRevokeRequest {
                id,
                idempotency_key: String::new(),
            };
            c.work_revoke(request).await?
        }
        WorkCommand::List { parent } => return list(global, c, parent).await,
        WorkCommand::Audit => return audit_on(global, c).await,
        limits @ WorkCommand::Limits { .. } => return set_limits(global, c, limits).await,
    };
    show(global, &answer_json(&answer), &answer_text(&answer));
    Ok(ExitCode::SUCCESS)
}

async fn list(global: &Global, c: &CellClient, parent: Option<String>) -> Result<ExitCode> {
    let request = pb::WorkListRequest {
        parent: parent.unwrap_or_default(),
        limit: 0,
    };
    let entries = c.work_list(request).await?.entries;
    let value = Value::Array(entries.iter().map(entry_json).collect());
    let mut table = Table::new(&["id", "kind", "owner", "signal", "expires"]);
    for e in &entries {
        table.row(vec![
            e.id.clone(),
            e.kind.clone(),
            e.owner.clone(),
            e.signal.clone(),
            time_cell(e.expires_ms),
        ]);
    }
    let mut text = format!("{} live entries", entries.len());
    if !entries.is_empty() {
        text = [text, table.lines_or("").join("\n")].join("\n");
    }
    show(global, &value, &text);
    Ok(ExitCode::SUCCESS)
}

async fn set_limits(global: &Global, c: &CellClient, cmd: WorkCommand) -> Result<ExitCode> {
    let WorkCommand::Limits {
        fabric_max,
        cell_max,
        depth_max,
        children_max,
        classes: specs,
        owner_max,
    } = cmd
    else {
        unreachable!("only limits are set here")
    };
    let request = pb::WorkLimitsRequest {
        fabric_max,
        cell_max,
        depth_max,
        children_max,
        classes: classes(&specs)?.into_iter().collect(),
        idempotency_key: String::new(),
        owner_max,
    };
    let r = c.work_limits(request).await?;
    let classes: BTreeMap<_, _> = r.classes.iter().collect();
    let value = json!({
        "fabric_max": r.fabric_max, "cell_max": r.cell_max, "depth_max": r.depth_max,
        "children_max": r.children_max, "classes": classes, "owner_max": r.owner_max,
    });
    let text = format!(
        "fabric ceiling {}, per cell {}, per owner and cell {}, depth {}, children {}, \
         classes {classes:?}",
        r.fabric_max, r.cell_max, r.owner_max, r.depth_max, r.children_max
    );
    show(global, &value, &text);
    Ok(ExitCode::SUCCESS)
}

/// `whip work audit` (and `whip ledger audit`): every control-plane action of the registry,
/// oldest first.
pub(crate) async fn audit_on(global: &Global, c: &CellClient) -> Result<ExitCode> {
    let request = pb::WorkAuditRequest {
        after_seq: 0,
        limit: 0,
    };
    let rows = c.work_audit(request).await?.rows;
    let value = Value::Array(
        rows.iter()
            .map(|r| {
                json!({
                    "seq": r.seq, "cell": r.cell, "time": time_text(r.time_ms),
                    "time_ms": r.time_ms, "actor": r.actor, "action": r.action,
                    "target": r.target, "outcome": r.outcome, "detail": r.detail,
                })
            })
            .collect(),
    );
    let header = ["time", "actor", "action", "target", "outcome", "detail"];
    let mut table = Table::new(&header);
    for r in &rows {
        table.row(vec![
            time_cell(r.time_ms),
            r.actor.clone(),
            r.action.clone(),
            r.target.clone(),
            r.outcome.clone(),
            r.detail.clone(),
        ]);
    }
    let mut text = format!("{} control-plane actions", rows.len());
    if !rows.is_empty() {
        text = [text, table.lines_or("").join("\n")].join("\n");
    }
    show(global, &value, &text);
    Ok(ExitCode::SUCCESS)
}
