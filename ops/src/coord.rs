//! `whip election …` and `whip schedule …`: leaders that publish endpoints, and schedules
//! whose every due time fires exactly once fabric-wide.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use clap::Subcommand;
use futures::StreamExt;
use serde_json::{Value, json};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::Global;
use crate::connect::session;
use crate::output::{self, parse_duration_ms, time_text};
use crate::primitives::code_name;

#[derive(Subcommand, Debug)]
pub(crate) enum ElectionCommand {
    /// Become the group's leader if it has none (or stay leader): elected or lost.
    Campaign {
        group: String,
        #[arg(long)]
        candidate: String,
        /// An endpoint to publish while leading (repeat for several).
        #[arg(long = "endpoint")]
        endpoints: Vec<String>,
        /// Leadership ends this long after the last campaign or renew (e.g. 10s).
        #[arg(long)]
        ttl: String,
    },
    /// Replace the published endpoints of the term with --fence.
    Proclaim {
        group: String,
        #[arg(long)]
        candidate: String,
        #[arg(long)]
        fence: u64,
        #[arg(long = "endpoint")]
        endpoints: Vec<String>,
    },
    /// Extend the term with --fence by --ttl.
    Renew {
        group: String,
        #[arg(long)]
        candidate: String,
        #[arg(long)]
        fence: u64,
        #[arg(long)]
        ttl: String,
    },
    /// Step down; the endpoints are withdrawn.
    Resign {
        group: String,
        #[arg(long)]
        candidate: String,
        #[arg(long)]
        fence: u64,
    },
    /// The group's live leader and its endpoints.
    Leader { group: String },
    /// Campaign until elected, then keep the term alive (renewing every third of --ttl) until
    /// interrupted, then resign. Killed, it stops renewing and the term expires after --ttl.
    Run {
        group: String,
        #[arg(long)]
        candidate: String,
        #[arg(long = "endpoint")]
        endpoints: Vec<String>,
        #[arg(long)]
        ttl: String,
    },
    /// Print the leader now and every change (one line each) until interrupted or --for.
    Observe {
        group: String,
        /// Stop after this long (e.g. 30s).
        #[arg(long = "for")]
        duration: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum ScheduleCommand {
    /// Claim the firing of the latest due time (or --due): fired, already_fired, not_due.
    Fire {
        name: String,
        /// `m h dom mon dow`, `@hourly`, `@daily`, `@weekly`, `@monthly`, `@every 30s`.
        #[arg(long)]
        spec: String,
        #[arg(long, default_value = "UTC")]
        timezone: String,
        #[arg(long)]
        claimant: String,
        /// A due time (RFC 3339) instead of the latest one.
        #[arg(long)]
        due: Option<String>,
    },
    /// Poll and claim every due time as it comes; print the firings this claimant won.
    Watch {
        name: String,
        #[arg(long)]
        spec: String,
        #[arg(long, default_value = "UTC")]
        timezone: String,
        #[arg(long)]
        claimant: String,
        /// Stop after this long (e.g. 1m); default: until interrupted.
        #[arg(long = "for")]
        duration: Option<String>,
        /// Poll interval.
        #[arg(long, default_value = "500ms")]
        poll: String,
    },
}

fn leader_json(l: &pb::ElectionLeader) -> Value {
    json!({
        "group": l.group, "candidate": l.candidate, "fence": l.fence,
        "endpoints": l.endpoints, "expires_at": time_text(l.expires_at_ms),
        "expires_at_ms": l.expires_at_ms,
    })
}

/// The answer of a campaign, proclaim, renew or resign. A renew that kept the term is
/// `renewed` with its new deadline (the cell answers it as `elected`, the state it leaves).
fn election_answer(global: &Global, r: pb::ElectionResponse, renewing: bool) -> ExitCode {
    let outcome = match renewing && r.code == Code::Elected as i32 {
        true => "renewed".to_string(),
        false => code_name(r.code),
    };
    let mut value = json!({"outcome": outcome});
    if r.fence > 0 {
        value["fence"] = json!(r.fence);
    }
    let mut until = String::new();
    if r.expires_at_ms > 0 {
        value["expires_at"] = json!(time_text(r.expires_at_ms));
        value["expires_at_ms"] = json!(r.expires_at_ms);
        until = format!(" until {}", time_text(r.expires_at_ms));
    }
    if let Some(l) = &r.leader {
        value["leader"] = leader_json(l);
    }
    if global.json {
        output::json(&value);
    } else {
        let leader = r.leader.as_ref().map_or(String::new(), |l| {
            format!(" (leader {} fence {})", l.candidate, l.fence)
        });
        output::line(&format!("{outcome} fence={}{until}{leader}", r.fence));
    }
    ExitCode::SUCCESS
}

fn print_leader(global: &Global, leader: Option<&pb::ElectionLeader>, group: &str) {
    if global.json {
        output::json(&json!({"group": group, "leader": leader.map(leader_json)}));
        return;
    }
    match leader {
        Some(l) => output::line(&format!(
            "{group}: {} fence={} endpoints={} until {}",
            l.candidate,
            l.fence,
            l.endpoints.join(","),
            time_text(l.expires_at_ms)
        )),
        None => output::line(&format!("{group}: no leader")),
    }
}

fn campaign(
    group: String,
    candidate: String,
    endpoints: Vec<String>,
    ttl: &str,
) -> Result<pb::CampaignRequest> {
    Ok(pb::CampaignRequest {
        group,
        candidate,
        endpoints,
        ttl_ms: ttl_ms(ttl)?,
        idempotency_key: String::new(),
    })
}

fn ttl_ms(text: &str) -> Result<u64> {
    parse_duration_ms(text).map_err(anyhow::Error::msg)
}

pub(crate) async fn election(global: &Global, cmd: ElectionCommand) -> Result<ExitCode> {
    let session = session(global).await?;
    let result = election_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

/// A request about the term `fence` of `candidate` in `group`.
fn term(group: String, candidate: String, fence: u64) -> pb::ElectionTermRequest {
    pb::ElectionTermRequest {
        group,
        candidate,
        fence,
        ..Default::default()
    }
}

async fn election_on(global: &Global, c: &CellClient, cmd: ElectionCommand) -> Result<ExitCode> {
    let renewing = matches!(cmd, ElectionCommand::Renew { .. });
    let answer = match cmd {
        ElectionCommand::Campaign {
            group,
            candidate,
            endpoints,
            ttl,
        } => {
            c.campaign(campaign(group, candidate, endpoints, &ttl)?)
                .await?
        }
        ElectionCommand::Proclaim {
            group,
            candidate,
            fence,
            endpoints,
        } => {
            let request = pb::ElectionTermRequest {
                endpoints,
                ..term(group, candidate, fence)
            };
            c.proclaim(request).await?
        }
        ElectionCommand::Renew {
            group,
            candidate,
            fence,
            ttl,
        } => {
            let request = pb::ElectionTermRequest {
                ttl_ms: ttl_ms(&ttl)?,
                ..term(group, candidate, fence)
            };
            c.election_renew(request).await?
        }
        ElectionCommand::Resign {
            group,
            candidate,
            fence,
        } => c.resign(term(group, candidate, fence)).await?,
        ElectionCommand::Leader { group } => {
            let r = c
                .leader(pb::LeaderRequest {
                    group: group.clone(),
                })
                .await?;
            print_leader(global, r.leader.as_ref(), &group);
            return Ok(ExitCode::SUCCESS);
        }
        ElectionCommand::Observe { group, duration } => {
            return observe(global, c, group, duration).await;
        }
        ElectionCommand::Run {
            group,
            candidate,
            endpoints,
            ttl,
        } => {
            let request = campaign(group, candidate, endpoints, &ttl)?;
            return run_candidate(global, c, request).await;
        }
    };
    Ok(election_answer(global, answer, renewing))
}

/// Campaign until elected, renew while leading, resign when stopped.
async fn run_candidate(
    global: &Global,
    c: &CellClient,
    request: pb::CampaignRequest,
) -> Result<ExitCode> {
    let pause = Duration::from_millis((request.ttl_ms / 3).max(50));
    let mut term: Option<u64> = None;
    loop {
        let answer = match term {
            None => c.campaign(request.clone()).await?,
            Some(fence) => {
                let renew = pb::ElectionTermRequest {
                    group: request.group.clone(),
                    candidate: request.candidate.clone(),
                    fence,
                    ttl_ms: request.ttl_ms,
                    ..Default::default()
                };
                c.election_renew(renew).await?
            }
        };
        let elected = answer.code == Code::Elected as i32;
        if elected && term != Some(answer.fence) {
            term = Some(answer.fence);
            election_answer(global, answer, false);
        } else if !elected && term.is_some() {
            // Our term ended (expired while we were cut off): campaign again.
            term = None;
            election_answer(global, answer, false);
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = crate::signals::stopped() => break,
        }
    }
    if let Some(fence) = term {
        let resign = pb::ElectionTermRequest {
            group: request.group.clone(),
            candidate: request.candidate.clone(),
            fence,
            ..Default::default()
        };
        c.resign(resign).await?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn observe(
    global: &Global,
    c: &CellClient,
    group: String,
    duration: Option<String>,
) -> Result<ExitCode> {
    let until = match duration {
        Some(text) => Some(tokio::time::Instant::now() + Duration::from_millis(ttl_ms(&text)?)),
        None => None,
    };
    let mut stream = c.observe(group.clone()).await?;
    loop {
        let next = match until {
            Some(at) => match tokio::time::timeout_at(at, stream.next()).await {
                Ok(next) => next,
                Err(_) => return Ok(ExitCode::SUCCESS),
            },
            None => stream.next().await,
        };
        match next {
            Some(Ok(change)) => print_leader(global, change.leader.as_ref(), &group),
            Some(Err(status)) => bail!("observe stopped: {}", status.message()),
            None => bail!("the cell closed the observe stream"),
        }
    }
}

pub(crate) async fn schedule(global: &Global, cmd: ScheduleCommand) -> Result<ExitCode> {
    let session = session(global).await?;
    let result = schedule_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

fn schedule_json(r: &pb::ScheduleResponse, claimant: &str) -> Value {
    let who = if r.code == Code::ScheduleFired as i32 {
        claimant
    } else {
        r.claimant.as_str()
    };
    json!({
        "outcome": code_name(r.code), "due": time_text(r.due_ms), "due_ms": r.due_ms,
        "fence": r.fence, "claimant": who,
    })
}

/// `fired 2026-12-01T00:00:00Z by c1` (no JSON quotes in a human line).
fn fire_line(value: &Value) -> String {
    let text = |k: &str| value[k].as_str().unwrap_or("-").to_string();
    format!(
        "{} {} by {}",
        text("outcome").replace('_', " "),
        text("due"),
        text("claimant")
    )
}

async fn schedule_on(global: &Global, c: &CellClient, cmd: ScheduleCommand) -> Result<ExitCode> {
    match cmd {
        ScheduleCommand::Fire {
            name,
            spec,
            timezone,
            claimant,
            due,
        } => {
            let due_ms = match due {
                Some(text) => chrono::DateTime::parse_from_rfc3339(&text)
                    .map_err(|e| anyhow!("--due {text:?} is not RFC 3339: {e}"))?
                    .timestamp_millis() as u64,
                None => 0,
            };
            let request = pb::ScheduleFireRequest {
                name,
                spec,
                timezone,
                due_ms,
                claimant: claimant.clone(),
                idempotency_key: String::new(),
            };
            let r = c.schedule_fire(request).await?;
            let value = schedule_json(&r, &claimant);
            if global.json {
                output::json(&value);
            } else {
                output::line(&fire_line(&value));
            }
        }
        ScheduleCommand::Watch {
            name,
            spec,
            timezone,
            claimant,
            duration,
            poll,
        } => {
            let until = match duration {
                Some(text) => {
                    Some(tokio::time::Instant::now() + Duration::from_millis(ttl_ms(&text)?))
                }
                None => None,
            };
            let poll = Duration::from_millis(ttl_ms(&poll)?.max(10));
            let mut last_due = 0;
            while until.is_none_or(|at| tokio::time::Instant::now() < at) {
                let request = pb::ScheduleFireRequest {
                    name: name.clone(),
                    spec: spec.clone(),
                    timezone: timezone.clone(),
                    due_ms: 0,
                    claimant: claimant.clone(),
                    idempotency_key: String::new(),
                };
                let r = c.schedule_fire(request).await?;
                if r.code == Code::ScheduleFired as i32 && r.due_ms > last_due {
                    last_due = r.due_ms;
                    let value = schedule_json(&r, &claimant);
                    if global.json {
                        output::json(&value);
                    } else {
                        output::line(&format!("fired {} fence={}", time_text(r.due_ms), r.fence));
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(poll) => {}
                    _ = crate::signals::stopped() => break,
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
