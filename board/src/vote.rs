//! The voting plane: proposals of a team, append-only ballots and the tally at the close,
//! with eligibility decided in the apply of each ballot.
//!
//! Everything a decision needs sits on the team's cell (every row here routes by the
//! team): the team record (its supervisor and members), the team's coordinators, the
//! proposal with its frozen rules and electorate, and its ballots.
//!
//! - **Roles.** A team's supervisor is always a coordinator of it; the supervisor makes
//!   other members coordinators or workers (`TeamRole`). Every other member is a worker.
//! - **Proposals.** A coordinator opens one: title, 2 to `VOTE_OPTIONS_MAX` options, the
//!   method, the electorate's roles (coordinators unless it names workers), quorum,
//!   threshold, how long it stays open and whether it closes once everyone voted. Its id
//!   is `{team}#{fence}`, never reused; its rules never change.
//! - **Electorate, fail-closed.** The members holding an electorate role when the proposal
//!   opens are its electorate, a snapshot: a member who joins later never votes on it. A
//!   ballot is admitted only when, in that apply, the caller is an agent of the snapshot,
//!   still a member, still holds one of the roles, and its identity is registered and not
//!   revoked. A cell that keeps the identity record (a standalone cell, or the range of
//!   `agents/{name}` in a fabric) reads it; in a fabric whose identity record lives on
//!   another cell the token check of the server that proved the caller stands for it, and
//!   a revocation removes the agent from every team (`TeamLeaveAll`) and so from the
//!   electorate here. Anything that cannot be established refuses the ballot
//!   (`not_eligible`, with why).
//! - **Ballots are appended, never edited.** A voter votes again by casting again; the
//!   last ballot before the close counts, and every ballot stays listed with its sequence.
//! - **The close happens once, in apply:** a tick at the closing time (the deadline index),
//!   the opener's close, or the last missing ballot when the proposal closes once everyone
//!   voted. A closed proposal is never counted again, so a tick repeated after a leader
//!   change finds it closed. The tally ([`crate::tally`]) is stored in the proposal,
//!   appended to the team's `votes` ledger and published as the team signal `vote`.
//!
//! Quorum is the share of the electorate with a counted ballot (at least the fraction);
//! the threshold is measured on the winner's support ([`crate::tally`]). The outcome is
//! `passed` (the winner), `failed` (no option reached the threshold) or `no_quorum`.

pub use crate::vocab::vote::{
    BallotView, CloseReason, Ineligible, ProposalState, ProposalView, Role, Rules, VoteOutcome,
    VoteRefusal, VoteResult,
};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::access::{self, Caller};
use crate::codec::{decode, encode};
use crate::deadline::{self, Item};
use crate::keys::{self, BALLOT, PROPOSAL, VOTE_TEAM};
use crate::limits::{
    LIST_ROWS_MAX, NAME_BYTES_MAX, VOTE_BALLOTS_MAX, VOTE_DURATION_MS_MAX, VOTE_OPEN_PER_TEAM_MAX,
    VOTE_OPTION_BYTES_MAX, VOTE_OPTIONS_MAX, VOTE_OPTIONS_MIN, VOTE_RESULT_RETAIN_MS,
    VOTE_TITLE_BYTES_MAX, VOTE_VOTER_BALLOTS_MAX,
};
use crate::tally::{self, Fraction, Round, Threshold};
use crate::txn::Txn;
use crate::types::{Command, Outcome, ResourceId, Stamp};
use crate::{kv, ledger, range_row, route, team};

pub use crate::vocab::vote::{VOTE_LEDGER, VOTE_SIGNAL_TOPIC};

impl Role {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Worker => "worker",
        }
    }

    /// The role a code names.
    pub fn parse(text: &str) -> Option<Role> {
        [Role::Coordinator, Role::Worker]
            .into_iter()
            .find(|role| role.code() == text)
    }
}

impl Ineligible {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            Ineligible::NotAnAgent => "not_an_agent",
            Ineligible::NotInElectorate => "not_in_electorate",
            Ineligible::NotMember => "not_member",
            Ineligible::RoleLost => "role_lost",
            Ineligible::TeamUnknown => "team_unknown",
            Ineligible::IdentityUnknown => "identity_unknown",
            Ineligible::IdentityRevoked => "identity_revoked",
        }
    }
}

impl VoteRefusal {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            VoteRefusal::NotEligible { .. } => "not_eligible",
            VoteRefusal::Closed { .. } => "closed",
            VoteRefusal::UnknownProposal { .. } => "unknown_proposal",
            VoteRefusal::UnknownTeam { .. } => "unknown_team",
            VoteRefusal::NotCoordinator { .. } => "not_coordinator",
            VoteRefusal::NotSupervisor { .. } => "not_supervisor",
            VoteRefusal::NotMember { .. } => "not_member",
            VoteRefusal::SupervisorRole { .. } => "supervisor_role",
            VoteRefusal::NotOpener { .. } => "not_opener",
            VoteRefusal::InvalidChoice { .. } => "invalid_choice",
            VoteRefusal::BallotsFull { .. } => "ballots_full",
            VoteRefusal::VoterBallotsFull { .. } => "voter_ballots_full",
            VoteRefusal::EmptyElectorate { .. } => "empty_electorate",
            VoteRefusal::ProposalsFull { .. } => "proposals_full",
        }
    }
}

impl std::fmt::Display for VoteRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VoteRefusal::NotEligible {
                voter,
                proposal,
                why,
            } => write!(f, "{voter} may not vote on {proposal}: {}", why.code()),
            VoteRefusal::Closed { proposal } => write!(f, "proposal {proposal} is closed"),
            VoteRefusal::UnknownProposal { proposal } => write!(f, "no proposal {proposal}"),
            VoteRefusal::UnknownTeam { team } => write!(f, "no team {team}"),
            VoteRefusal::NotCoordinator { agent, team } => {
                write!(f, "{agent} is not a coordinator of team {team}")
            }
            VoteRefusal::NotSupervisor { agent, team } => {
                write!(f, "{agent} is not the supervisor of team {team}")
            }
            VoteRefusal::NotMember { agent, team } => {
                write!(f, "{agent} is not a member of team {team}")
            }
            VoteRefusal::SupervisorRole { team } => {
                write!(f, "the supervisor of team {team} is always a coordinator")
            }
            VoteRefusal::NotOpener { agent, opener } => {
                write!(f, "{agent} did not open the proposal ({opener} did)")
            }
            VoteRefusal::InvalidChoice { reason } => write!(f, "invalid choice: {reason}"),
            VoteRefusal::BallotsFull { max } => write!(f, "the proposal holds {max} ballots"),
            VoteRefusal::VoterBallotsFull { max } => {
                write!(
                    f,
                    "the voter cast {max} ballots on this proposal, the limit"
                )
            }
            VoteRefusal::EmptyElectorate { team } => {
                write!(f, "no member of team {team} holds a role of the electorate")
            }
            VoteRefusal::ProposalsFull { max } => {
                write!(f, "the team has {max} open proposals, the limit")
            }
        }
    }
}

impl VoteOutcome {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            VoteOutcome::Passed { .. } => "passed",
            VoteOutcome::Failed => "failed",
            VoteOutcome::NoQuorum => "no_quorum",
        }
    }
}

impl CloseReason {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            CloseReason::Deadline => "deadline",
            CloseReason::Opener => "opener",
            CloseReason::AllVoted => "all_voted",
        }
    }
}

impl ProposalState {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            ProposalState::Open => "open",
            ProposalState::Closed => "closed",
        }
    }
}

impl ProposalView {
    /// The winning option's name, when the proposal passed.
    pub fn winner(&self) -> Option<&str> {
        match self.result.as_ref()?.outcome {
            VoteOutcome::Passed { option } => self
                .rules
                .options
                .get(usize::from(option))
                .map(String::as_str),
            _ => None,
        }
    }
}

/// A team's voting state: its coordinators (besides the supervisor) and open proposals.
#[derive(Default, Serialize, Deserialize)]
struct TeamVotes {
    coordinators: Vec<String>,
    open: u32,
}

fn team_key(team: &str) -> Vec<u8> {
    keys::named(VOTE_TEAM, team)
}

fn load_team_votes(txn: &impl Txn, team: &str) -> TeamVotes {
    txn.get(&team_key(team))
        .map_or_else(TeamVotes::default, |bytes| decode(&bytes))
}

fn store_team_votes(txn: &mut impl Txn, team: &str, votes: &TeamVotes) {
    txn.put(&team_key(team), &encode(votes));
}

fn proposal_key(team: &str, fence: u64) -> Vec<u8> {
    let mut key = keys::named(PROPOSAL, team);
    keys::push_u64(&mut key, fence);
    key
}

fn ballot_prefix(team: &str, fence: u64) -> Vec<u8> {
    let mut key = keys::named(BALLOT, team);
    keys::push_u64(&mut key, fence);
    key
}

fn ballot_key(team: &str, fence: u64, seq: u64) -> Vec<u8> {
    let mut key = ballot_prefix(team, fence);
    keys::push_u64(&mut key, seq);
    key
}

/// The id of the proposal opened at `fence` in `team`.
pub fn proposal_id(team: &str, fence: u64) -> String {
    format!("{team}#{fence}")
}

/// Split a proposal id into its team and fence.
pub fn parse_id(id: &str) -> Result<(String, u64), String> {
    let (team, fence) = id
        .rsplit_once('#')
        .filter(|(team, _)| !team.is_empty())
        .ok_or_else(|| format!("proposal id {id:?} is not TEAM#NUMBER"))?;
    let fence = fence
        .parse::<u64>()
        .map_err(|_| format!("proposal id {id:?} does not end in a number"))?;
    Ok((team.to_string(), fence))
}

fn load(txn: &impl Txn, team: &str, fence: u64) -> Option<ProposalView> {
    txn.get(&proposal_key(team, fence))
        .map(|bytes| decode(&bytes))
}

fn store(txn: &mut impl Txn, fence: u64, proposal: &ProposalView) {
    txn.put(&proposal_key(&proposal.team, fence), &encode(proposal));
}

fn refused(refusal: VoteRefusal) -> Outcome {
    Outcome::VoteRefused { refusal }
}

/// The role `agent` holds in `team` now: `None` unless a member of the live team.
fn role_of(team: &team::Team, votes: &TeamVotes, agent: &str) -> Option<Role> {
    if !team.members.iter().any(|m| m == agent) {
        return None;
    }
    let coordinator = team.supervisor == agent || votes.coordinators.iter().any(|c| c == agent);
    Some(match coordinator {
        true => Role::Coordinator,
        false => Role::Worker,
    })
}

/// The agent's identity where this cell keeps it: registered and not revoked.
fn identity(txn: &impl Txn, agent: &str) -> Result<(), Ineligible> {
    let key = access::agent_key(agent);
    if !range_row::serves(&range_row::serving(txn), route::kv_point(&key)) {
        // Another cell keeps it: the server's token check proved the caller, and a
        // revocation reaches this cell as `TeamLeaveAll`.
        return Ok(());
    }
    match kv::get(txn, &key) {
        None => Err(Ineligible::IdentityUnknown),
        Some(record) if access::is_revoked(&record.value) => Err(Ineligible::IdentityRevoked),
        Some(_) => Ok(()),
    }
}

fn live_team(txn: &impl Txn, team: &str) -> Option<team::Team> {
    team::load(txn, team).filter(|record| !record.dissolving)
}

/// The supervisor gives `member` a role in `team`.
pub(crate) fn set_role(
    txn: &mut impl Txn,
    caller: &Caller,
    team: &str,
    (member, role): (&str, Role),
) -> Outcome {
    let Some(record) = live_team(txn, team) else {
        return refused(VoteRefusal::UnknownTeam { team: team.into() });
    };
    if caller.agent() != Some(record.supervisor.as_str()) {
        return refused(VoteRefusal::NotSupervisor {
            agent: caller.name().into(),
            team: team.into(),
        });
    }
    if !record.members.iter().any(|m| m == member) {
        return refused(VoteRefusal::NotMember {
            agent: member.into(),
            team: team.into(),
        });
    }
    if member == record.supervisor && role != Role::Coordinator {
        return refused(VoteRefusal::SupervisorRole { team: team.into() });
    }
    let mut votes = load_team_votes(txn, team);
    votes.coordinators.retain(|c| c != member);
    if role == Role::Coordinator && member != record.supervisor {
        let at = votes.coordinators.partition_point(|c| c.as_str() < member);
        votes.coordinators.insert(at, member.to_string());
    }
    store_team_votes(txn, team, &votes);
    Outcome::RoleSet {
        team: team.into(),
        member: member.into(),
        role,
    }
}

/// A coordinator of `team` opens a proposal.
pub(crate) fn open(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    team: &str,
    rules: &Rules,
) -> Outcome {
    let Some(record) = live_team(txn, team) else {
        return refused(VoteRefusal::UnknownTeam { team: team.into() });
    };
    let mut votes = load_team_votes(txn, team);
    let coordinator = caller.agent().is_some_and(|agent| {
        role_of(&record, &votes, agent) == Some(Role::Coordinator) && identity(txn, agent).is_ok()
    });
    if !coordinator {
        return refused(VoteRefusal::NotCoordinator {
            agent: caller.name().into(),
            team: team.into(),
        });
    }
    if votes.open >= VOTE_OPEN_PER_TEAM_MAX {
        return refused(VoteRefusal::ProposalsFull {
            max: VOTE_OPEN_PER_TEAM_MAX,
        });
    }
    let mut electorate: Vec<String> = record
        .members
        .iter()
        .filter(|m| role_of(&record, &votes, m).is_some_and(|r| rules.electorate.contains(&r)))
        .filter(|m| identity(txn, m).is_ok())
        .cloned()
        .collect();
    electorate.sort();
    electorate.dedup();
    if electorate.is_empty() {
        return refused(VoteRefusal::EmptyElectorate { team: team.into() });
    }
    let fence = stamp.fence();
    let closes_at_ms = stamp.time_ms.saturating_add(rules.duration_ms);
    let proposal = ProposalView {
        id: proposal_id(team, fence),
        team: team.into(),
        opener: caller.name().into(),
        rules: rules.clone(),
        electorate,
        opened_at_ms: stamp.time_ms,
        closes_at_ms,
        state: ProposalState::Open,
        ballots: 0,
        cast: Vec::new(),
        result: None,
    };
    store(txn, fence, &proposal);
    deadline::insert(txn, closes_at_ms, &close_item(team, fence));
    votes.open += 1;
    store_team_votes(txn, team, &votes);
    Outcome::VoteOpened {
        proposal: proposal.id,
        closes_at_ms,
        electorate: u32::try_from(proposal.electorate.len()).expect("members fit u32"),
    }
}

fn close_item(team: &str, fence: u64) -> Item {
    Item::VoteClose {
        team: team.into(),
        fence,
    }
}

/// Whether `caller` may vote on `proposal` now (see the module doc).
fn eligible(txn: &impl Txn, caller: &Caller, proposal: &ProposalView) -> Result<(), Ineligible> {
    let agent = caller.agent().ok_or(Ineligible::NotAnAgent)?;
    if proposal
        .electorate
        .binary_search_by(|v| v.as_str().cmp(agent))
        .is_err()
    {
        return Err(Ineligible::NotInElectorate);
    }
    let record = live_team(txn, &proposal.team).ok_or(Ineligible::TeamUnknown)?;
    let votes = load_team_votes(txn, &proposal.team);
    let role = role_of(&record, &votes, agent).ok_or(Ineligible::NotMember)?;
    if !proposal.rules.electorate.contains(&role) {
        return Err(Ineligible::RoleLost);
    }
    identity(txn, agent)
}

/// The option indices of `choice` (names), checked against the proposal's method.
fn choice_of(proposal: &ProposalView, choice: &[String]) -> Result<Vec<u16>, VoteRefusal> {
    let options = &proposal.rules.options;
    let indices = choice
        .iter()
        .map(|name| {
            let at = options.iter().position(|o| o == name);
            at.map(|i| u16::try_from(i).expect("options fit u16"))
                .ok_or_else(|| format!("{name:?} is not an option"))
        })
        .collect::<Result<Vec<u16>, String>>();
    indices
        .and_then(|indices| proposal.rules.method.choice(options.len(), indices))
        .map_err(|reason| VoteRefusal::InvalidChoice { reason })
}

/// The open proposal `id` at `now_ms`, or the refusal.
fn open_proposal(txn: &impl Txn, now_ms: u64, id: &str) -> Result<(u64, ProposalView), Outcome> {
    let unknown = || {
        refused(VoteRefusal::UnknownProposal {
            proposal: id.into(),
        })
    };
    let (team, fence) = parse_id(id).map_err(|_| unknown())?;
    let proposal = load(txn, &team, fence).ok_or_else(unknown)?;
    if proposal.state == ProposalState::Closed || now_ms >= proposal.closes_at_ms {
        return Err(refused(VoteRefusal::Closed {
            proposal: id.into(),
        }));
    }
    Ok((fence, proposal))
}

/// Append a ballot of `caller` (see the module doc for who may vote).
pub(crate) fn cast(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    id: &str,
    choice: &[String],
) -> Outcome {
    let (fence, mut proposal) = match open_proposal(txn, stamp.time_ms, id) {
        Ok(found) => found,
        Err(refusal) => return refusal,
    };
    if let Err(why) = eligible(txn, caller, &proposal) {
        return refused(VoteRefusal::NotEligible {
            voter: caller.name().into(),
            proposal: id.into(),
            why,
        });
    }
    let choice = match choice_of(&proposal, choice) {
        Ok(choice) => choice,
        Err(refusal) => return refused(refusal),
    };
    if proposal.ballots >= VOTE_BALLOTS_MAX {
        return refused(VoteRefusal::BallotsFull {
            max: VOTE_BALLOTS_MAX,
        });
    }
    let voter = caller.name().to_string();
    let at = proposal.cast.partition_point(|(v, _)| *v < voter);
    match proposal.cast.get_mut(at) {
        Some((v, n)) if *v == voter && *n >= VOTE_VOTER_BALLOTS_MAX => {
            return refused(VoteRefusal::VoterBallotsFull {
                max: VOTE_VOTER_BALLOTS_MAX,
            });
        }
        Some((v, n)) if *v == voter => *n += 1,
        _ => proposal.cast.insert(at, (voter.clone(), 1)),
    }
    proposal.ballots += 1;
    let seq = u64::from(proposal.ballots);
    let ballot = BallotView {
        seq,
        voter,
        at_ms: stamp.time_ms,
        choice,
    };
    txn.put(&ballot_key(&proposal.team, fence, seq), &encode(&ballot));
    let everyone = proposal.cast.len() == proposal.electorate.len();
    if proposal.rules.until_all_voted && everyone {
        settle(
            txn,
            stamp.time_ms,
            fence,
            &mut proposal,
            CloseReason::AllVoted,
        );
    }
    store(txn, fence, &proposal);
    Outcome::BallotAccepted {
        proposal: id.into(),
        seq,
        closed: proposal.state == ProposalState::Closed,
    }
}

/// The opener closes its proposal before the closing time.
pub(crate) fn close(txn: &mut impl Txn, stamp: Stamp, caller: &Caller, id: &str) -> Outcome {
    let (fence, mut proposal) = match open_proposal(txn, stamp.time_ms, id) {
        Ok(found) => found,
        Err(refusal) => return refusal,
    };
    if caller.agent() != Some(proposal.opener.as_str()) {
        return refused(VoteRefusal::NotOpener {
            agent: caller.name().into(),
            opener: proposal.opener,
        });
    }
    settle(
        txn,
        stamp.time_ms,
        fence,
        &mut proposal,
        CloseReason::Opener,
    );
    store(txn, fence, &proposal);
    closed(&proposal)
}

fn closed(proposal: &ProposalView) -> Outcome {
    let result = proposal
        .result
        .as_ref()
        .expect("a closed proposal has a result");
    Outcome::VoteClosed {
        proposal: proposal.id.clone(),
        outcome: result.outcome,
        winner: proposal.winner().map(str::to_string),
    }
}

/// A tick at the closing time: count the proposal unless it is already closed (or gone).
/// Returns the rows it settled.
pub(crate) fn close_due(txn: &mut impl Txn, now_ms: u64, team: &str, fence: u64) -> u32 {
    match load(txn, team, fence) {
        Some(mut proposal) if proposal.state == ProposalState::Open => {
            settle(txn, now_ms, fence, &mut proposal, CloseReason::Deadline);
            store(txn, fence, &proposal);
            proposal.ballots + 1
        }
        _ => 0,
    }
}

/// The last ballot of each voter, in voter order.
fn counted_ballots(txn: &impl Txn, team: &str, fence: u64) -> Vec<Vec<u16>> {
    let start = ballot_prefix(team, fence);
    let end = keys::prefix_end(&start);
    let limit = usize::try_from(VOTE_BALLOTS_MAX).expect("bound fits usize") + 1;
    let mut last: BTreeMap<String, Vec<u16>> = BTreeMap::new();
    for (_, value) in txn.scan(&start, &end, limit) {
        let ballot: BallotView = decode(&value);
        last.insert(ballot.voter, ballot.choice);
    }
    last.into_values().collect()
}

/// Count and close `proposal`: the result, the team's open count, the deadline entry, the
/// ledger record and the signal.
fn settle(
    txn: &mut impl Txn,
    now_ms: u64,
    fence: u64,
    proposal: &mut ProposalView,
    reason: CloseReason,
) {
    assert_eq!(
        proposal.state,
        ProposalState::Open,
        "a proposal closes once"
    );
    let ballots = counted_ballots(txn, &proposal.team, fence);
    let result = decide(
        &proposal.rules,
        proposal.electorate.len(),
        &ballots,
        (now_ms, reason),
    );
    proposal.state = ProposalState::Closed;
    proposal.result = Some(result);
    deadline::remove(
        txn,
        proposal.closes_at_ms,
        &close_item(&proposal.team, fence),
    );
    let mut votes = load_team_votes(txn, &proposal.team);
    votes.open = votes.open.saturating_sub(1);
    store_team_votes(txn, &proposal.team, &votes);
    record(txn, now_ms, proposal);
}

/// The result of counting `ballots` (one per voter) under `rules`.
pub fn decide(
    rules: &Rules,
    electorate: usize,
    ballots: &[Vec<u16>],
    (closed_at_ms, reason): (u64, CloseReason),
) -> VoteResult {
    let count = tally::count(rules.method, rules.options.len(), ballots);
    let voters = ballots.len() as u64;
    let quorate = electorate > 0 && rules.quorum.reached(voters, electorate as u64);
    let outcome = match (quorate, count.winner) {
        (false, _) => VoteOutcome::NoQuorum,
        (true, Some(option)) if rules.threshold.met(count.support, count.base) => {
            VoteOutcome::Passed { option }
        }
        (true, _) => VoteOutcome::Failed,
    };
    VoteResult {
        closed_at_ms,
        reason,
        electorate: u32::try_from(electorate).expect("members fit u32"),
        voters: u32::try_from(voters).expect("ballots fit u32"),
        outcome,
        leader: count.winner,
        support: count.support,
        base: count.base,
        rounds: count.rounds,
    }
}

/// The result as JSON: what the ledger and the signal carry.
pub fn result_json(proposal: &ProposalView) -> serde_json::Value {
    let result = proposal.result.as_ref();
    let name = |i: &u16| proposal.rules.options.get(usize::from(*i)).cloned();
    serde_json::json!({
        "proposal": proposal.id,
        "title": proposal.rules.title,
        "method": proposal.rules.method.code(),
        "outcome": result.map(|r| r.outcome.code()),
        "winner": proposal.winner(),
        "leader": result.and_then(|r| r.leader.as_ref().and_then(name)),
        "electorate": result.map(|r| r.electorate),
        "voters": result.map(|r| r.voters),
        "ballots": proposal.ballots,
        "support": result.map(|r| r.support),
        "base": result.map(|r| r.base),
        "closed_by": result.map(|r| r.reason.code()),
        "closed_at_ms": result.map(|r| r.closed_at_ms),
        "rounds": result.map(|r| rounds_json(&proposal.rules.options, &r.rounds)),
    })
}

/// Rounds as JSON, options by name.
pub fn rounds_json(options: &[String], rounds: &[Round]) -> serde_json::Value {
    let name = |i: usize| options.get(i).cloned().unwrap_or_default();
    let rounds = rounds.iter().map(|round| {
        let counts: serde_json::Map<String, serde_json::Value> = (round.counts.iter())
            .enumerate()
            .map(|(i, n)| (name(i), serde_json::json!(n)))
            .collect();
        serde_json::json!({
            "kind": round.kind.code(),
            "counts": counts,
            "matrix": round.matrix,
            "eliminated": round.eliminated.map(|i| name(usize::from(i))),
            "exhausted": round.exhausted,
        })
    });
    serde_json::Value::Array(rounds.collect())
}

/// Append the result to the team's `votes` ledger and publish it as the signal `vote`.
fn record(txn: &mut impl Txn, now_ms: u64, proposal: &ProposalView) {
    let entry = result_json(proposal).to_string().into_bytes();
    let owner = format!("{}{}", access::TEAM_OWNER_PREFIX, proposal.team);
    for (name, partition) in [
        (VOTE_LEDGER, proposal.id.as_str()),
        (access::SIGNAL_LEDGER, VOTE_SIGNAL_TOPIC),
    ] {
        let ledger = ResourceId {
            owner: owner.clone(),
            name: name.into(),
            key: partition.into(),
        };
        let append = ledger::Append {
            ledger: &ledger,
            entry: &entry,
            appended_by: Caller::Server.name(),
            retain_ms: VOTE_RESULT_RETAIN_MS,
        };
        ledger::append(txn, now_ms, &append);
    }
}

/// Whether `caller` may read `team`'s proposals: its members (and ancestors' members), the
/// operator and servers.
pub(crate) fn guard_read(
    txn: &impl Txn,
    caller: &Caller,
    team: &str,
) -> Result<(), crate::types::BoardRefusal> {
    let reads = match caller {
        Caller::Operator | Caller::Server => true,
        Caller::Anonymous => false,
        Caller::Agent(agent) => team::load(txn, team).is_some_and(|record| record.admits(agent)),
    };
    match reads {
        true => Ok(()),
        false => Err(crate::types::BoardRefusal::NotMember {
            agent: caller.name().into(),
            team: team.into(),
        }),
    }
}

/// The team a vote read is about.
pub(crate) fn read_team(query: &crate::query::Query) -> Option<String> {
    use crate::query::Query;
    match query {
        Query::VoteProposal { proposal } | Query::VoteBallots { proposal, .. } => {
            parse_id(proposal).ok().map(|(team, _)| team)
        }
        Query::VoteList { team, .. } => Some(team.clone()),
        _ => None,
    }
}

/// Answer a vote read; `cap` turns a list limit into rows.
pub(crate) fn answer(
    txn: &impl Txn,
    query: &crate::query::Query,
    cap: fn(u32) -> usize,
) -> crate::query::QueryResult {
    use crate::query::{Query, QueryResult};
    match query {
        Query::VoteProposal { proposal } => QueryResult::Proposal(get(txn, proposal).map(Box::new)),
        Query::VoteBallots {
            proposal,
            after_seq,
            limit,
        } => QueryResult::Ballots(ballots(txn, proposal, *after_seq, cap(*limit))),
        Query::VoteList { team, limit } => QueryResult::Proposals(list(txn, team, cap(*limit))),
        other => unreachable!("{other:?} is not a vote read"),
    }
}

/// The proposal `id`, if any.
fn get(txn: &impl Txn, id: &str) -> Option<ProposalView> {
    let (team, fence) = parse_id(id).ok()?;
    load(txn, &team, fence)
}

/// Ballots of proposal `id` after `after_seq`, in order.
fn ballots(txn: &impl Txn, id: &str, after_seq: u64, limit: usize) -> Vec<BallotView> {
    let Ok((team, fence)) = parse_id(id) else {
        return Vec::new();
    };
    let start = ballot_key(&team, fence, after_seq.saturating_add(1));
    let end = keys::prefix_end(&ballot_prefix(&team, fence));
    txn.scan(&start, &end, limit.min(LIST_ROWS_MAX))
        .into_iter()
        .map(|(_, value)| decode(&value))
        .collect()
}

/// Proposals of `team`, oldest first.
fn list(txn: &impl Txn, team: &str, limit: usize) -> Vec<ProposalView> {
    let start = keys::named(PROPOSAL, team);
    let end = keys::prefix_end(&start);
    txn.scan(&start, &end, limit.min(LIST_ROWS_MAX))
        .into_iter()
        .map(|(_, value)| decode(&value))
        .collect()
}

/// Delete up to `budget` vote rows of `team` (ballots, proposals, then its roles row);
/// returns the rows deleted and whether none is left.
pub(crate) fn purge_team(txn: &mut impl Txn, team: &str, budget: usize) -> (u32, bool) {
    let mut removed = 0usize;
    for family in [BALLOT, PROPOSAL] {
        let start = keys::named(family, team);
        let rows = txn.scan(&start, &keys::prefix_end(&start), budget - removed);
        removed += rows.len();
        for (key, _) in rows {
            txn.delete(&key);
        }
    }
    let left = [BALLOT, PROPOSAL].into_iter().any(|family| {
        let start = keys::named(family, team);
        !txn.scan(&start, &keys::prefix_end(&start), 1).is_empty()
    });
    if !left && removed < budget && txn.get(&team_key(team)).is_some() {
        txn.delete(&team_key(team));
        removed += 1;
    }
    let done = !left && txn.get(&team_key(team)).is_none();
    (u32::try_from(removed).expect("budget fits u32"), done)
}

/// Take `agent` out of every team's coordinators on this cell (its identity was revoked).
pub(crate) fn forget(txn: &mut impl Txn, agent: &str) {
    let rows = txn.scan(&[VOTE_TEAM], &[VOTE_TEAM + 1], LIST_ROWS_MAX);
    for (key, value) in rows {
        let mut votes: TeamVotes = decode(&value);
        let before = votes.coordinators.len();
        votes.coordinators.retain(|c| c != agent);
        if votes.coordinators.len() != before {
            txn.put(&key, &encode(&votes));
        }
    }
}

/// Whether a vote command is well formed.
pub(crate) fn check(command: &Command) -> Result<(), String> {
    match command {
        Command::TeamRole { team, member, .. } => {
            check_team(team)?;
            access::check_agent_name(member)
        }
        Command::VoteOpen { team, rules } => {
            check_team(team)?;
            check_rules(rules)
        }
        Command::VoteCast { proposal, choice } => {
            parse_id(proposal)?;
            if choice.len() > VOTE_OPTIONS_MAX {
                return Err(format!("a ballot names at most {VOTE_OPTIONS_MAX} options"));
            }
            choice.iter().try_for_each(|c| check_option(c))
        }
        Command::VoteClose { proposal } => parse_id(proposal).map(|_| ()),
        other => unreachable!("{other:?} is not a vote command"),
    }
}

fn check_team(team: &str) -> Result<(), String> {
    match team.len() {
        0 => Err("a team name is not empty".into()),
        n if n > NAME_BYTES_MAX => Err(format!("a team name has at most {NAME_BYTES_MAX} bytes")),
        _ => Ok(()),
    }
}

fn check_option(option: &str) -> Result<(), String> {
    match option.len() {
        0 => Err("an option is not empty".into()),
        n if n > VOTE_OPTION_BYTES_MAX => Err(format!(
            "an option has at most {VOTE_OPTION_BYTES_MAX} bytes, got {n}"
        )),
        _ => Ok(()),
    }
}

fn check_rules(rules: &Rules) -> Result<(), String> {
    if rules.title.is_empty() || rules.title.len() > VOTE_TITLE_BYTES_MAX {
        return Err(format!("a title has 1 to {VOTE_TITLE_BYTES_MAX} bytes"));
    }
    let n = rules.options.len();
    if !(VOTE_OPTIONS_MIN..=VOTE_OPTIONS_MAX).contains(&n) {
        return Err(format!(
            "a proposal has {VOTE_OPTIONS_MIN} to {VOTE_OPTIONS_MAX} options, got {n}"
        ));
    }
    rules.options.iter().try_for_each(|o| check_option(o))?;
    let mut sorted: Vec<&String> = rules.options.iter().collect();
    sorted.sort();
    if sorted.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err("the options are distinct".into());
    }
    let roles = &rules.electorate;
    if roles.is_empty() || (roles.len() == 2 && roles[0] == roles[1]) || roles.len() > 2 {
        return Err("the electorate names coordinators, workers or both, once each".into());
    }
    Fraction::new(rules.quorum.num, rules.quorum.den)?;
    if let Threshold::AtLeast(f) = rules.threshold {
        Fraction::new(f.num, f.den)?;
        if f.num == 0 {
            return Err("a threshold is more than 0".into());
        }
    }
    if rules.duration_ms == 0 || rules.duration_ms > VOTE_DURATION_MS_MAX {
        return Err(format!(
            "a proposal stays open 1 ms to {VOTE_DURATION_MS_MAX} ms"
        ));
    }
    Ok(())
}
