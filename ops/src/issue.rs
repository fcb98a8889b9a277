//! `whip issue new|list|show|ready|claim|renew|release|assign|finish`: the builtin tracker
//! from the command line. One line per issue:
//! `<id> <status> <owner>::<tracker> "<title>" [assignee=<a>] [claimed_by=<c> fence=<n>
//! expires=<YYYY-MM-DD HH:MM:SS>]`; refusals exit 1 and change nothing.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use whip_cell::CellClient;
use whip_engine::runtime::tracker::{ClaimOutcome, Issue, IssueOp};
use whip_engine::runtime::{Engine, RuntimeError, fresh_id, now_ms};

use crate::Global;
use crate::connect::session;
use crate::output::{self, Table, parse_duration_ms};

type Eng = Engine<CellClient>;

/// Who the command acts as, and the fence it presents.
#[derive(Args, Debug, Clone)]
pub(crate) struct Caller {
    /// Claimant identity.
    #[arg(long = "as", default_value = "operator")]
    claimant: String,
    /// The fence the claim returned; a stale one is refused.
    #[arg(long)]
    fence: Option<u64>,
}

#[derive(Subcommand, Debug, Clone)]
pub(crate) enum IssueCommand {
    /// File an issue into a tracker.
    New {
        tracker: String,
        #[arg(long)]
        title: String,
        #[arg(long, default_value = "")]
        body: String,
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Owner namespace (default: the one program that declared the tracker, else
        /// `shared`).
        #[arg(long)]
        owner: Option<String>,
    },
    /// Every issue (of one tracker).
    List { tracker: Option<String> },
    /// One issue in full.
    Show { id: String },
    /// Open issues nobody holds a live claim on.
    Ready { tracker: Option<String> },
    /// Claim an issue (exactly one live claimant); prints the fence.
    Claim {
        id: String,
        #[arg(long = "as", default_value = "operator")]
        claimant: String,
        /// How long the claim lives unless renewed.
        #[arg(long, default_value = "10m")]
        ttl: String,
    },
    /// Extend the caller's claim.
    Renew {
        id: String,
        #[command(flatten)]
        caller: Caller,
        #[arg(long, default_value = "10m")]
        ttl: String,
    },
    /// Give the caller's claim back.
    Release {
        id: String,
        #[command(flatten)]
        caller: Caller,
    },
    /// Set who should work the issue.
    Assign { id: String, assignee: String },
    /// Close an issue the caller has claimed.
    Finish {
        id: String,
        #[command(flatten)]
        caller: Caller,
        #[arg(long)]
        summary: Option<String>,
    },
}

/// Reconnects a command makes when the embedded store's holder exits under it.
const RECONNECTS_MAX: usize = 50;

/// Run one `whip issue` command. On the embedded store, a process that reached the store
/// through another process's socket reconnects when that process exits and tries again;
/// the operations are safe to repeat (a repeated claim by the same claimant re-enters).
pub(crate) async fn run(global: &Global, cmd: IssueCommand) -> Result<ExitCode> {
    let idem = fresh_id("cli_");
    let mut session = session(global).await?;
    for _ in 0..RECONNECTS_MAX {
        let engine = Engine::new(Arc::clone(&session.client));
        let result = dispatch(global, &engine, &cmd, &idem).await;
        let unavailable = result.as_ref().is_err_and(|e| {
            matches!(e.downcast_ref(), Some(RuntimeError::Fabric(_))) && session.is_guest(global)
        });
        if !unavailable {
            session.close().await;
            return result;
        }
        session.close().await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        session = crate::run::session_retry(global).await?;
    }
    session.close().await;
    bail!("the embedded store kept going away; try again")
}

fn err(e: RuntimeError) -> anyhow::Error {
    anyhow::Error::new(e)
}

async fn dispatch(
    global: &Global,
    engine: &Eng,
    cmd: &IssueCommand,
    idem: &str,
) -> Result<ExitCode> {
    let cmd = cmd.clone();
    match cmd {
        IssueCommand::New {
            tracker,
            title,
            body,
            labels,
            owner,
        } => {
            let owner = match owner {
                Some(o) => o,
                None => default_owner(engine, &tracker).await?,
            };
            let fields = json!({"title": title, "body": body, "labels": labels});
            let issue = engine
                .issue_file(&owner, &tracker, &fields, "cli", idem)
                .await
                .map_err(err)?;
            let text = format!("{} filed into {}", issue.id, issue.tracker);
            print(global, row(&issue), vec![text])
        }
        IssueCommand::List { tracker } => list(global, engine, tracker, false).await,
        IssueCommand::Ready { tracker } => list(global, engine, tracker, true).await,
        IssueCommand::Show { id } => {
            let issue = engine.issue_read(&id).await.map_err(err)?;
            print(global, row(&issue), show_lines(&issue))
        }
        IssueCommand::Claim { id, claimant, ttl } => {
            let ttl_ms = parse_duration_ms(&ttl).map_err(anyhow::Error::msg)?;
            match engine
                .issue_claim(&id, &claimant, ttl_ms, idem)
                .await
                .map_err(err)?
            {
                ClaimOutcome::Claimed { issue, .. } => {
                    let text = format!("{} claimed by {}", issue.id, claim_text(&issue));
                    print(global, row(&issue), vec![text])
                }
                ClaimOutcome::Contended { issue } => {
                    bail!(
                        "issue {} is already claimed by {}",
                        issue.id,
                        claim_text(&issue)
                    )
                }
            }
        }
        IssueCommand::Renew { id, caller, ttl } => {
            let ttl_ms = parse_duration_ms(&ttl).map_err(anyhow::Error::msg)?;
            let op = IssueOp::Renew { ttl_ms };
            let issue = apply(engine, &id, &caller, op, idem).await?;
            let text = format!("{} renewed by {}", issue.id, claim_text(&issue));
            print(global, row(&issue), vec![text])
        }
        IssueCommand::Release { id, caller } => {
            let issue = apply(engine, &id, &caller, IssueOp::Release, idem).await?;
            let text = format!("{} released by {}", issue.id, caller.claimant);
            print(global, row(&issue), vec![text])
        }
        IssueCommand::Assign { id, assignee } => {
            let caller = Caller {
                claimant: "operator".into(),
                fence: None,
            };
            let op = IssueOp::Assign {
                assignee: assignee.clone(),
            };
            let issue = apply(engine, &id, &caller, op, idem).await?;
            let text = format!("{} assigned to {assignee}", issue.id);
            print(global, row(&issue), vec![text])
        }
        IssueCommand::Finish {
            id,
            caller,
            summary,
        } => {
            let summary = summary.map_or(Value::Null, |s| json!({"summary": s}));
            let op = IssueOp::Finish { summary };
            let issue = apply(engine, &id, &caller, op, idem).await?;
            let text = format!("{} closed by {}", issue.id, caller.claimant);
            print(global, row(&issue), vec![text])
        }
    }
}

async fn apply(engine: &Eng, id: &str, c: &Caller, op: IssueOp, idem: &str) -> Result<Issue> {
    engine
        .issue_apply(id, &c.claimant, c.fence, op, idem)
        .await
        .map_err(err)
}

/// The owner of a tracker named on the command line: the only declaring owner. None is
/// refused with a hint (filing into an owner no workflow reads would lose the issue from
/// the workflow's sight), as are several.
async fn default_owner(engine: &Eng, tracker: &str) -> Result<String> {
    let owners = engine.tracker_owners(tracker).await.map_err(err)?;
    match owners.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "no program has declared tracker `{tracker}` in this store yet: start the program \
             that declares it first (`whip start FILE`), or name the owner with --owner \
             (`local/<Workflow>`, or `shared` for a shared tracker)"
        ),
        many => bail!(
            "tracker `{tracker}` is declared by {}; choose one with --owner",
            many.join(", ")
        ),
    }
}

async fn list(global: &Global, e: &Eng, tracker: Option<String>, ready: bool) -> Result<ExitCode> {
    let now = now_ms();
    let issues: Vec<Issue> = e
        .issues(tracker.as_deref())
        .await
        .map_err(err)?
        .into_iter()
        .filter(|i| !ready || i.ready(now))
        .collect();
    let lines = table(&issues, now).lines_or(if ready {
        "no ready issues"
    } else {
        "no issues"
    });
    let rows: Vec<Value> = issues.iter().map(row).collect();
    print(global, Value::Array(rows), lines)
}

/// The listing of `issue list` and `issue ready`.
fn table(issues: &[Issue], now: u64) -> Table {
    let mut table = Table::new(&[
        "id",
        "status",
        "tracker",
        "assignee",
        "claimed_by",
        "fence",
        "expires",
        "title",
    ]);
    for issue in issues {
        let claim = issue.live_claim(now).filter(|_| issue.status == "open");
        table.row(vec![
            issue.id.clone(),
            issue.shown_status(now).to_string(),
            format!("{}::{}", issue.owner, issue.tracker),
            issue.assignee.clone().unwrap_or_else(|| "-".into()),
            claim.map_or_else(|| "-".into(), |c| c.claimant.clone()),
            claim.map_or_else(|| "-".into(), |c| c.fence.to_string()),
            claim.map_or_else(|| "-".into(), |c| output::time_text(c.deadline_ms)),
            issue.title.clone(),
        ]);
    }
    table
}

fn claim_text(issue: &Issue) -> String {
    issue.claim.as_ref().map_or_else(String::new, |c| {
        format!(
            "{} fence={} (expires {})",
            c.claimant,
            c.fence,
            output::time_text(c.deadline_ms)
        )
    })
}

/// The one-line form of an issue.
fn line(issue: &Issue) -> String {
    let now = now_ms();
    let mut l = format!(
        "{} {} {}::{} {}",
        issue.id,
        issue.shown_status(now),
        issue.owner,
        issue.tracker,
        Value::String(issue.title.clone())
    );
    if let Some(a) = &issue.assignee {
        l += &format!(" assignee={a}");
    }
    if let Some(c) = issue.live_claim(now).filter(|_| issue.status == "open") {
        l += &format!(
            " claimed_by={} fence={} expires={}",
            c.claimant,
            c.fence,
            output::time_text(c.deadline_ms)
        );
    }
    l
}

fn show_lines(issue: &Issue) -> Vec<String> {
    let mut out = vec![line(issue)];
    out.push(format!("title: {}", issue.title));
    if !issue.labels.is_empty() {
        out.push(format!("labels: {}", issue.labels.join(", ")));
    }
    out.push(format!("filed_by: {}", issue.filed_by));
    out.push(format!("created: {}", output::time_text(issue.created_ms)));
    out.push(format!("updated: {}", output::time_text(issue.updated_ms)));
    if let Some(by) = &issue.closed_by {
        out.push(format!("closed_by: {by} summary={}", issue.summary));
    }
    if !issue.body.is_empty() {
        out.push("body:".into());
        out.extend(issue.body.lines().map(|l| format!("  {l}")));
    }
    out
}

/// The JSON form of an issue (the stored row plus the shown status and readiness).
fn row(issue: &Issue) -> Value {
    let now = now_ms();
    let mut v = serde_json::to_value(issue).unwrap_or(Value::Null);
    v["shown_status"] = json!(issue.shown_status(now));
    v["ready"] = json!(issue.ready(now));
    v
}

fn print(global: &Global, value: Value, lines: Vec<String>) -> Result<ExitCode> {
    if global.json {
        output::json(&value);
    } else {
        for l in lines {
            output::line(&l);
        }
    }
    Ok(ExitCode::SUCCESS)
}
