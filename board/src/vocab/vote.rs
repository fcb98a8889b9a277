//! The vote plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

use crate::tally::{Fraction, Method, Round, Threshold};

/// The ledger of a team's vote results (owner `team/{team}`, partition: the proposal).
pub const VOTE_LEDGER: &str = "votes";
/// The topic of the team signal announcing a result.
pub const VOTE_SIGNAL_TOPIC: &str = "vote";

/// What a member does in its team.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Role {
    /// Deliberates: votes on proposals (the supervisor always is one).
    Coordinator,
    /// Computes: votes only where a proposal's electorate names workers.
    Worker,
}

crate::codes::stable_codes! {
    Role {
        0 => Coordinator,
        1 => Worker,
    }
}

/// The rules of a proposal, frozen when it opens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// What is decided.
    pub title: String,
    /// The options, in order (the order breaks ties, [`crate::tally`]).
    pub options: Vec<String>,
    /// How ballots are counted.
    pub method: Method,
    /// The roles whose holders vote (default: coordinators).
    pub electorate: Vec<Role>,
    /// The share of the electorate that must vote.
    pub quorum: Fraction,
    /// The support the winner needs.
    pub threshold: Threshold,
    /// How long the proposal stays open after it opens.
    pub duration_ms: u64,
    /// Close as soon as every voter of the electorate has voted.
    pub until_all_voted: bool,
}

/// Why a vote command was refused; nothing changed.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum VoteRefusal {
    /// The caller may not vote on this proposal.
    NotEligible {
        /// The proven caller.
        voter: String,
        /// The proposal.
        proposal: String,
        /// Why.
        why: Ineligible,
    },
    /// The proposal is closed (or its closing time passed).
    Closed {
        /// The proposal.
        proposal: String,
    },
    /// No such proposal.
    UnknownProposal {
        /// The proposal.
        proposal: String,
    },
    /// No such live team.
    UnknownTeam {
        /// The team.
        team: String,
    },
    /// Only a coordinator of the team opens a proposal.
    NotCoordinator {
        /// The proven caller.
        agent: String,
        /// The team.
        team: String,
    },
    /// Only the team's supervisor gives roles.
    NotSupervisor {
        /// The proven caller.
        agent: String,
        /// The team.
        team: String,
    },
    /// A role goes only to a member of the team.
    NotMember {
        /// The agent.
        agent: String,
        /// The team.
        team: String,
    },
    /// The supervisor is always a coordinator of its team.
    SupervisorRole {
        /// The team.
        team: String,
    },
    /// Only the agent that opened the proposal closes it early.
    NotOpener {
        /// The proven caller.
        agent: String,
        /// The opener.
        opener: String,
    },
    /// The choice does not fit the proposal's options or method.
    InvalidChoice {
        /// What is wrong.
        reason: String,
    },
    /// The proposal holds `VOTE_BALLOTS_MAX` ballots.
    BallotsFull {
        /// The limit.
        max: u32,
    },
    /// The voter cast `VOTE_VOTER_BALLOTS_MAX` ballots on this proposal.
    VoterBallotsFull {
        /// The limit.
        max: u32,
    },
    /// No member holds a role of the electorate.
    EmptyElectorate {
        /// The team.
        team: String,
    },
    /// The team has `VOTE_OPEN_PER_TEAM_MAX` open proposals.
    ProposalsFull {
        /// The limit.
        max: u32,
    },
}

crate::codes::stable_codes! {
    VoteRefusal {
        0 => NotEligible,
        1 => Closed,
        2 => UnknownProposal,
        3 => UnknownTeam,
        4 => NotCoordinator,
        5 => NotSupervisor,
        6 => NotMember,
        7 => SupervisorRole,
        8 => NotOpener,
        9 => InvalidChoice,
        10 => BallotsFull,
        11 => VoterBallotsFull,
        12 => EmptyElectorate,
        13 => ProposalsFull,
    }
}

/// How a proposal ended.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum VoteOutcome {
    /// The option (its index) reached the threshold with a quorum.
    Passed {
        /// The winning option's index.
        option: u16,
    },
    /// A quorum voted, but no option reached the threshold.
    Failed,
    /// Too few of the electorate voted.
    NoQuorum,
}

crate::codes::stable_codes! {
    VoteOutcome {
        0 => Passed,
        1 => Failed,
        2 => NoQuorum,
    }
}

/// A proposal as stored and as readers see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposalView {
    /// `{team}#{fence}`.
    pub id: String,
    /// The team.
    pub team: String,
    /// Who opened it.
    pub opener: String,
    /// Its frozen rules.
    pub rules: Rules,
    /// The voters, sorted, as of the opening.
    pub electorate: Vec<String>,
    /// Stamp time of the opening.
    pub opened_at_ms: u64,
    /// When it closes at the latest.
    pub closes_at_ms: u64,
    /// Open or closed.
    pub state: ProposalState,
    /// Ballots cast (every one, superseded ones too).
    pub ballots: u32,
    /// Ballots per voter, by name.
    pub cast: Vec<(String, u32)>,
    /// The result, once closed.
    pub result: Option<VoteResult>,
}

/// One ballot as stored and listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BallotView {
    /// Gap-free per proposal, from 1.
    pub seq: u64,
    /// The proven voter.
    pub voter: String,
    /// Stamp time of the cast.
    pub at_ms: u64,
    /// Option indices: one, a set, or a ranking (best first).
    pub choice: Vec<u16>,
}

/// Why a ballot's caller may not vote.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Ineligible {
    /// The caller is not an agent (the operator, a server, nobody).
    NotAnAgent,
    /// Not in the electorate snapshot taken when the proposal opened.
    NotInElectorate,
    /// No longer a member of the team.
    NotMember,
    /// No longer holds a role of the electorate (demoted).
    RoleLost,
    /// The team is gone (dissolved or unknown here).
    TeamUnknown,
    /// No identity record for the agent where this cell keeps it.
    IdentityUnknown,
    /// The identity was revoked.
    IdentityRevoked,
}

crate::codes::stable_codes! {
    Ineligible {
        0 => NotAnAgent,
        1 => NotInElectorate,
        2 => NotMember,
        3 => RoleLost,
        4 => TeamUnknown,
        5 => IdentityUnknown,
        6 => IdentityRevoked,
    }
}

/// The recorded result of a closed proposal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteResult {
    /// Stamp time of the close.
    pub closed_at_ms: u64,
    /// What closed it.
    pub reason: CloseReason,
    /// Voters in the electorate.
    pub electorate: u32,
    /// Voters whose (last) ballot was counted.
    pub voters: u32,
    /// The outcome.
    pub outcome: VoteOutcome,
    /// The method's winner, also when it did not pass (none without ballots).
    pub leader: Option<u16>,
    /// The leader's support and what it is a share of ([`crate::tally`]).
    pub support: u64,
    /// The base of the support.
    pub base: u64,
    /// The count's rounds.
    pub rounds: Vec<Round>,
}

/// Open or closed.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum ProposalState {
    /// Takes ballots.
    Open,
    /// Counted.
    Closed,
}

crate::codes::stable_codes! {
    ProposalState {
        0 => Open,
        1 => Closed,
    }
}

/// What closed a proposal.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum CloseReason {
    /// Its closing time (a tick).
    Deadline,
    /// Its opener.
    Opener,
    /// The last voter of the electorate voted.
    AllVoted,
}

crate::codes::stable_codes! {
    CloseReason {
        0 => Deadline,
        1 => Opener,
        2 => AllVoted,
    }
}
