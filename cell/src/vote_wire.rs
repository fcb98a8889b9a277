//! The voting plane between the board's types and the wire (`whip.v1`): one place for
//! every conversion, used by the service, the fabric's client and the CLI. An unknown
//! method, role, state, outcome or round kind is an error, never a default.

use whip_board::tally::{Fraction, Method, Round, RoundKind, Threshold};
use whip_board::vote::{
    BallotView, CloseReason, ProposalState, ProposalView, Role, Rules, VoteOutcome, VoteRefusal,
    VoteResult,
};
use whip_board::{Outcome, QueryResult};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::convert::answered;

fn malformed(what: &str, value: &str) -> String {
    format!("the server answered an unknown {what} {value:?}")
}

/// The rules a client asked for; `Err` names the malformed field.
pub fn rules(req: &pb::VoteOpenRequest) -> Result<Rules, String> {
    let method = Method::parse(&req.method).ok_or_else(|| {
        format!(
            "method {:?} is not one of plurality, approval, borda, irv, schulze",
            req.method
        )
    })?;
    let mut electorate = req
        .electorate
        .iter()
        .map(|r| Role::parse(r).ok_or_else(|| format!("role {r:?} is not coordinator or worker")))
        .collect::<Result<Vec<Role>, String>>()?;
    if electorate.is_empty() {
        electorate.push(Role::Coordinator);
    }
    Ok(Rules {
        title: req.title.clone(),
        options: req.options.clone(),
        method,
        electorate,
        quorum: Fraction::parse(&req.quorum).map_err(|e| format!("quorum: {e}"))?,
        threshold: Threshold::parse(&req.threshold).map_err(|e| format!("threshold: {e}"))?,
        duration_ms: req.duration_ms,
        until_all_voted: req.until_all_voted,
    })
}

/// A refusal on the wire.
pub fn refused(refusal: &VoteRefusal) -> pb::VoteResponse {
    let (code, outcome) = answered(Code::VoteRefused);
    pb::VoteResponse {
        code,
        outcome,
        reason: refusal.code().into(),
        message: refusal.to_string(),
        ..Default::default()
    }
}

/// A vote command's outcome on the wire; `None` for an outcome of another family.
pub fn response(outcome: Outcome) -> Option<pb::VoteResponse> {
    let mut r = pb::VoteResponse::default();
    match outcome {
        Outcome::RoleSet { .. } => (r.code, r.outcome) = answered(Code::RoleSet),
        Outcome::VoteOpened {
            proposal,
            closes_at_ms,
            electorate,
        } => {
            (r.code, r.outcome) = answered(Code::VoteOpened);
            r.proposal = proposal;
            (r.closes_at_ms, r.electorate) = (closes_at_ms, electorate);
        }
        Outcome::BallotAccepted {
            proposal,
            seq,
            closed,
        } => {
            (r.code, r.outcome) = answered(Code::VoteAccepted);
            (r.proposal, r.seq, r.closed) = (proposal, seq, closed);
        }
        Outcome::VoteClosed {
            proposal,
            outcome,
            winner,
        } => {
            (r.code, r.outcome) = answered(Code::VoteClosed);
            (r.proposal, r.closed) = (proposal, true);
            (r.result, r.winner) = (outcome.code().into(), winner);
        }
        Outcome::VoteRefused { refusal } => r = refused(&refusal),
        _ => return None,
    }
    Some(r)
}

fn round_pb(round: Round) -> pb::VoteRound {
    pb::VoteRound {
        kind: round.kind.code().into(),
        counts: round.counts,
        matrix: round
            .matrix
            .into_iter()
            .map(|cells| pb::VoteRow { cells })
            .collect(),
        eliminated: round.eliminated.map(u32::from),
        exhausted: round.exhausted,
    }
}

fn result_pb(result: VoteResult) -> pb::VoteResult {
    let winner = match result.outcome {
        VoteOutcome::Passed { option } => Some(u32::from(option)),
        _ => None,
    };
    pb::VoteResult {
        closed_at_ms: result.closed_at_ms,
        reason: result.reason.code().into(),
        electorate: result.electorate,
        voters: result.voters,
        outcome: result.outcome.code().into(),
        winner,
        leader: result.leader.map(u32::from),
        support: result.support,
        base: result.base,
        rounds: result.rounds.into_iter().map(round_pb).collect(),
    }
}

/// One proposal on the wire.
pub fn proposal_pb(view: ProposalView) -> pb::VoteProposal {
    let rules = view.rules;
    pb::VoteProposal {
        id: view.id,
        team: view.team,
        opener: view.opener,
        title: rules.title,
        options: rules.options,
        method: rules.method.code().into(),
        roles: rules.electorate.iter().map(|r| r.code().into()).collect(),
        quorum: rules.quorum.to_string(),
        threshold: rules.threshold.code(),
        duration_ms: rules.duration_ms,
        until_all_voted: rules.until_all_voted,
        electorate: view.electorate,
        opened_at_ms: view.opened_at_ms,
        closes_at_ms: view.closes_at_ms,
        state: view.state.code().into(),
        ballots: view.ballots,
        result: view.result.map(result_pb),
    }
}

fn option_index(n: u32) -> Result<u16, String> {
    u16::try_from(n).map_err(|_| malformed("option index", &n.to_string()))
}

fn round_view(round: pb::VoteRound) -> Result<Round, String> {
    Ok(Round {
        kind: RoundKind::parse(&round.kind).ok_or_else(|| malformed("round", &round.kind))?,
        counts: round.counts,
        matrix: round.matrix.into_iter().map(|row| row.cells).collect(),
        eliminated: round.eliminated.map(option_index).transpose()?,
        exhausted: round.exhausted,
    })
}

fn result_view(r: pb::VoteResult) -> Result<VoteResult, String> {
    let outcome = match (r.outcome.as_str(), r.winner) {
        ("passed", Some(option)) => VoteOutcome::Passed {
            option: option_index(option)?,
        },
        ("failed", None) => VoteOutcome::Failed,
        ("no_quorum", None) => VoteOutcome::NoQuorum,
        (other, _) => return Err(malformed("outcome", other)),
    };
    let reason = [
        CloseReason::Deadline,
        CloseReason::Opener,
        CloseReason::AllVoted,
    ]
    .into_iter()
    .find(|reason| reason.code() == r.reason)
    .ok_or_else(|| malformed("close reason", &r.reason))?;
    Ok(VoteResult {
        closed_at_ms: r.closed_at_ms,
        reason,
        electorate: r.electorate,
        voters: r.voters,
        outcome,
        leader: r.leader.map(option_index).transpose()?,
        support: r.support,
        base: r.base,
        rounds: r
            .rounds
            .into_iter()
            .map(round_view)
            .collect::<Result<_, _>>()?,
    })
}

/// A proposal as the server answered it (its per-voter counts are not on the wire).
pub fn proposal_view(p: pb::VoteProposal) -> Result<ProposalView, String> {
    let roles = p
        .roles
        .iter()
        .map(|r| Role::parse(r).ok_or_else(|| malformed("role", r)))
        .collect::<Result<Vec<Role>, String>>()?;
    let state = match p.state.as_str() {
        "open" => ProposalState::Open,
        "closed" => ProposalState::Closed,
        other => return Err(malformed("state", other)),
    };
    let rules = Rules {
        title: p.title,
        options: p.options,
        method: Method::parse(&p.method).ok_or_else(|| malformed("method", &p.method))?,
        electorate: roles,
        quorum: Fraction::parse(&p.quorum).map_err(|_| malformed("quorum", &p.quorum))?,
        threshold: Threshold::parse(&p.threshold)
            .map_err(|_| malformed("threshold", &p.threshold))?,
        duration_ms: p.duration_ms,
        until_all_voted: p.until_all_voted,
    };
    Ok(ProposalView {
        id: p.id,
        team: p.team,
        opener: p.opener,
        rules,
        electorate: p.electorate,
        opened_at_ms: p.opened_at_ms,
        closes_at_ms: p.closes_at_ms,
        state,
        ballots: p.ballots,
        cast: Vec::new(),
        result: p.result.map(result_view).transpose()?,
    })
}

/// One ballot on the wire.
pub fn ballot_pb(ballot: BallotView) -> pb::VoteBallot {
    pb::VoteBallot {
        seq: ballot.seq,
        voter: ballot.voter,
        at_ms: ballot.at_ms,
        choice: ballot.choice.into_iter().map(u32::from).collect(),
    }
}

/// A ballot as the server answered it.
pub fn ballot_view(b: pb::VoteBallot) -> Result<BallotView, String> {
    Ok(BallotView {
        seq: b.seq,
        voter: b.voter,
        at_ms: b.at_ms,
        choice: b
            .choice
            .into_iter()
            .map(option_index)
            .collect::<Result<_, _>>()?,
    })
}

/// A read's answer on the wire: `None` when it is not a vote read's.
pub fn show_response(result: QueryResult) -> Option<pb::VoteShowResponse> {
    match result {
        QueryResult::Proposal(view) => Some(pb::VoteShowResponse {
            proposal: view.map(|v| proposal_pb(*v)),
        }),
        _ => None,
    }
}
