//! `whip vote …` and `whip team role`: the voting plane. Opening, casting and closing act
//! for the CLI's agent (`--agent`); the server stamps it as the opener or voter, and the
//! board decides who may vote. `show` and `list` read as the operator unless `--agent`
//! names a member.

use std::process::ExitCode;

use anyhow::{Result, anyhow};
use clap::{Subcommand, ValueEnum};
use serde_json::{Value, json};
use whip_board::vote::ProposalView;
use whip_cell::{CellClient, vote_wire};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::Global;
use crate::output::{self, Table, parse_duration_ms, time_cell, time_text};

/// How ballots are counted.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum MethodArg {
    /// One option per ballot.
    Plurality,
    /// A set of options per ballot.
    Approval,
    /// A ranking per ballot, positional points.
    Borda,
    /// A ranking per ballot, instant-runoff.
    Irv,
    /// A ranking per ballot, Condorcet by Schulze's method.
    Schulze,
}

impl MethodArg {
    fn code(self) -> &'static str {
        match self {
            MethodArg::Plurality => "plurality",
            MethodArg::Approval => "approval",
            MethodArg::Borda => "borda",
            MethodArg::Irv => "irv",
            MethodArg::Schulze => "schulze",
        }
    }
}

/// A member's role in its team.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum RoleArg {
    /// Votes on the team's proposals.
    Coordinator,
    /// Votes only where a proposal's electorate names workers.
    Worker,
}

impl RoleArg {
    fn code(self) -> &'static str {
        match self {
            RoleArg::Coordinator => "coordinator",
            RoleArg::Worker => "worker",
        }
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum VoteCommand {
    /// Open a proposal in TEAM (a coordinator of it only); prints its id.
    Open {
        team: String,
        #[arg(long)]
        title: String,
        /// An option (2 to 64, in order: the order breaks ties).
        #[arg(long = "option", required = true)]
        options: Vec<String>,
        #[arg(long, value_enum, default_value = "plurality")]
        method: MethodArg,
        /// The share of the electorate that must vote (0.5, 2/3).
        #[arg(long, default_value = "0.5")]
        quorum: String,
        /// The support the winner needs: majority, two_thirds, three_quarters or a
        /// fraction (2/3, 0.6: at least that share).
        #[arg(long, default_value = "majority")]
        threshold: String,
        /// How long it stays open (10m, 1h).
        #[arg(long)]
        closes: String,
        /// The roles that vote (default: coordinator; `--electorate worker` too lets
        /// workers vote).
        #[arg(long = "electorate", value_enum)]
        electorate: Vec<RoleArg>,
        /// Close as soon as every voter of the electorate voted.
        #[arg(long)]
        until_all_voted: bool,
    },
    /// Cast a ballot: `--choice` once (plurality), a set (approval) or a ranking, best
    /// first. Casting again replaces your ballot; every ballot stays listed.
    Cast {
        proposal: String,
        #[arg(long = "choice", required = true)]
        choices: Vec<String>,
    },
    /// Close a proposal before its closing time (its opener only) and count it.
    Close { proposal: String },
    /// A proposal: state, outcome, winner, ballots and the count's rounds.
    Show {
        proposal: String,
        /// Also list every ballot with its sequence.
        #[arg(long)]
        ballots: bool,
    },
    /// The proposals of TEAM, oldest first.
    List { team: String },
}

pub(crate) async fn vote(global: &Global, cmd: VoteCommand) -> Result<ExitCode> {
    let session = crate::connect::session(global).await?;
    let reads = matches!(cmd, VoteCommand::Show { .. } | VoteCommand::List { .. });
    let session = match reads && global.agent.is_none() {
        true => session,
        false => crate::agent::authenticate(global, session).await?,
    };
    let result = vote_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

async fn vote_on(global: &Global, c: &CellClient, cmd: VoteCommand) -> Result<ExitCode> {
    let r = match cmd {
        VoteCommand::Open {
            team,
            title,
            options,
            method,
            quorum,
            threshold,
            closes,
            electorate,
            until_all_voted,
        } => {
            let request = pb::VoteOpenRequest {
                team,
                title,
                options,
                method: method.code().into(),
                electorate: electorate.iter().map(|r| r.code().to_string()).collect(),
                quorum,
                threshold,
                duration_ms: parse_duration_ms(&closes).map_err(anyhow::Error::msg)?,
                until_all_voted,
                idempotency_key: String::new(),
            };
            c.vote_open(request).await?
        }
        VoteCommand::Cast { proposal, choices } => {
            let request = pb::VoteCastRequest {
                proposal,
                choice: choices,
                idempotency_key: String::new(),
            };
            c.vote_cast(request).await?
        }
        VoteCommand::Close { proposal } => {
            let request = pb::VoteCloseRequest {
                proposal,
                idempotency_key: String::new(),
            };
            c.vote_close(request).await?
        }
        VoteCommand::Show { proposal, ballots } => return show(global, c, proposal, ballots).await,
        VoteCommand::List { team } => return list(global, c, team).await,
    };
    Ok(answer(global, &r))
}

/// `whip team role TEAM --member A --role R`: the supervisor gives a member a role.
pub(crate) async fn role(
    global: &Global,
    c: &CellClient,
    team: String,
    (member, role): (String, RoleArg),
) -> Result<ExitCode> {
    let request = pb::TeamRoleRequest {
        team: team.clone(),
        member: member.clone(),
        role: role.code().into(),
        idempotency_key: String::new(),
    };
    let r = c.team_role(request).await?;
    if r.code() == Code::VoteRefused {
        return Ok(refused(global, &r));
    }
    let value = json!({"outcome": "set", "team": team, "member": member, "role": role.code()});
    print(
        global,
        value,
        format!("{member} is a {} of {team}", role.code()),
    );
    Ok(ExitCode::SUCCESS)
}

/// A refusal: a typed reason, exit code 1.
fn refused(global: &Global, r: &pb::VoteResponse) -> ExitCode {
    if global.json {
        output::json(&json!({"outcome": "refused", "reason": r.reason, "error": r.message}));
    }
    eprintln!("refused ({}): {}", r.reason, r.message);
    ExitCode::from(1)
}

fn print(global: &Global, value: Value, text: String) {
    match global.json {
        true => output::json(&value),
        false => output::line(&text),
    }
}

/// The answer of an open, cast or close.
fn answer(global: &Global, r: &pb::VoteResponse) -> ExitCode {
    let (value, text) = match r.code() {
        Code::VoteRefused => return refused(global, r),
        Code::VoteOpened => (
            json!({"proposal": r.proposal, "closes_at_ms": r.closes_at_ms,
                   "electorate": r.electorate}),
            format!(
                "{} open until {} ({} voters)",
                r.proposal,
                time_text(r.closes_at_ms),
                r.electorate
            ),
        ),
        Code::VoteAccepted => (
            json!({"outcome": "accepted", "seq": r.seq, "closed": r.closed}),
            format!("ballot {} accepted", r.seq),
        ),
        _ => (
            json!({"outcome": r.outcome, "proposal": r.proposal, "result": r.result,
                   "winner": r.winner}),
            format!(
                "{} closed: {} {}",
                r.proposal,
                r.result,
                r.winner.as_deref().unwrap_or("")
            ),
        ),
    };
    print(global, value, text);
    ExitCode::SUCCESS
}

pub(crate) fn view(p: pb::VoteProposal) -> Result<ProposalView> {
    vote_wire::proposal_view(p).map_err(|e| anyhow!(e))
}

/// A proposal as `show` and `list` print it.
pub(crate) fn proposal_json(p: &ProposalView) -> Value {
    let result = p.result.as_ref();
    let name = |i: u16| p.rules.options.get(usize::from(i)).cloned();
    json!({
        "proposal": p.id, "team": p.team, "title": p.rules.title, "opener": p.opener,
        "state": p.state.code(), "method": p.rules.method.code(), "options": p.rules.options,
        "quorum": p.rules.quorum.to_string(), "threshold": p.rules.threshold.code(),
        "electorate": p.electorate, "closes_at_ms": p.closes_at_ms,
        "outcome": result.map(|r| r.outcome.code()), "winner": p.winner(),
        "leader": result.and_then(|r| r.leader).and_then(name),
        "ballots": p.ballots, "voters": result.map(|r| r.voters),
        "support": result.map(|r| r.support), "base": result.map(|r| r.base),
        "closed_by": result.map(|r| r.reason.code()),
        "rounds": result.map_or_else(
            || json!([]),
            |r| whip_board::vote::rounds_json(&p.rules.options, &r.rounds),
        ),
    })
}

/// The listing of `vote list` (and the one-row head of `vote show`).
fn proposal_table(views: &[ProposalView]) -> Table {
    let header = [
        "proposal", "state", "outcome", "winner", "ballots", "closes", "title",
    ];
    let mut table = Table::new(&header);
    for p in views {
        let outcome = p.result.as_ref().map_or("-", |r| r.outcome.code());
        table.row(vec![
            p.id.clone(),
            p.state.code().to_string(),
            outcome.to_string(),
            p.winner().unwrap_or("-").to_string(),
            p.ballots.to_string(),
            time_cell(p.closes_at_ms),
            p.rules.title.clone(),
        ]);
    }
    table
}

async fn show(
    global: &Global,
    c: &CellClient,
    proposal: String,
    ballots: bool,
) -> Result<ExitCode> {
    let request = pb::VoteShowRequest {
        proposal: proposal.clone(),
    };
    let Some(found) = c.vote_show(request).await?.proposal else {
        return Err(anyhow!("no proposal {proposal}"));
    };
    let p = view(found)?;
    let mut value = proposal_json(&p);
    let mut text = proposal_table(std::slice::from_ref(&p))
        .lines_or("")
        .join("\n");
    if ballots {
        let listed = all_ballots(c, &proposal).await?;
        let name = |i: &u32| {
            p.rules
                .options
                .get(*i as usize)
                .cloned()
                .unwrap_or_default()
        };
        let mut table = Table::new(&["ballot", "voter", "at", "choice"]);
        let rows: Vec<Value> = listed
            .iter()
            .map(|b| {
                let choice: Vec<String> = b.choice.iter().map(name).collect();
                let (seq, at) = (format!("#{}", b.seq), time_cell(b.at_ms));
                table.row(vec![seq, b.voter.clone(), at, choice.join(" > ")]);
                json!({"seq": b.seq, "voter": b.voter, "at_ms": b.at_ms, "choice": choice})
            })
            .collect();
        text = [text, table.lines_or("no ballots").join("\n")].join("\n\n");
        value["ballot_list"] = Value::Array(rows);
    }
    print(global, value, text);
    Ok(ExitCode::SUCCESS)
}

/// Every ballot of `proposal`, page by page.
async fn all_ballots(c: &CellClient, proposal: &str) -> Result<Vec<pb::VoteBallot>> {
    let mut out: Vec<pb::VoteBallot> = Vec::new();
    loop {
        let request = pb::VoteBallotsRequest {
            proposal: proposal.to_string(),
            after_seq: out.last().map_or(0, |b| b.seq),
            limit: 0,
        };
        let page = c.vote_ballots(request).await?.ballots;
        if page.is_empty() {
            return Ok(out);
        }
        out.extend(page);
    }
}

async fn list(global: &Global, c: &CellClient, team: String) -> Result<ExitCode> {
    let request = pb::VoteListRequest { team, limit: 0 };
    let proposals = c.vote_list(request).await?.proposals;
    let views = proposals
        .into_iter()
        .map(view)
        .collect::<Result<Vec<_>>>()?;
    let value = json!({"proposals": views.iter().map(proposal_json).collect::<Vec<_>>()});
    let text = proposal_table(&views).lines_or("no proposals").join("\n");
    print(global, value, text);
    Ok(ExitCode::SUCCESS)
}
