//! Goal: the voting plane through `apply` and `query`: roles, proposals, fail-closed
//! eligibility decided in the ballot's apply, append-only ballots, one close per proposal
//! (tick, opener or the last voter), the recorded result and its ledger and signal, and
//! byte-identical replays. Method: a `MemTxn` cell driven with proven callers; the
//! replay property drives random ballots through two cells and compares their bytes.

use proptest::prelude::*;
use whip_board::access::{Caller, agent_key};
use whip_board::tally::{Fraction, Method, Threshold};
use whip_board::vote::{
    BallotView, CloseReason, Ineligible, ProposalState, ProposalView, Role, Rules, VoteOutcome,
    VoteRefusal, decide,
};
use whip_board::{Command, MemTxn, Outcome, Query, QueryResult, Request, Stamp, apply, query};

struct Cell {
    txn: MemTxn,
    index: u64,
    now_ms: u64,
}

fn agent(name: &str) -> Caller {
    Caller::Agent(name.into())
}

fn rules(method: Method) -> Rules {
    Rules {
        title: "ship it?".into(),
        options: vec!["yes".into(), "no".into(), "later".into()],
        method,
        electorate: vec![Role::Coordinator],
        quorum: Fraction::parse("0.5").unwrap(),
        threshold: Threshold::Majority,
        duration_ms: 60_000,
        until_all_voted: false,
    }
}

fn choice(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

impl Cell {
    /// Team `t`: supervisor `sup`, members `c1`, `c2` (coordinators) and `w1` (a worker),
    /// every one registered.
    fn new() -> Self {
        let mut cell = Cell {
            txn: MemTxn::default(),
            index: 0,
            now_ms: 1_000_000,
        };
        for name in ["sup", "c1", "c2", "w1", "late"] {
            cell.register(name);
        }
        let create = Command::TeamCreate {
            team: "t".into(),
            caller: "sup".into(),
            parent: None,
            ancestors: Vec::new(),
            settings: Default::default(),
        };
        assert!(matches!(
            cell.run(agent("sup"), create),
            Outcome::TeamCreated { .. }
        ));
        for member in ["c1", "c2", "w1"] {
            cell.join(member);
        }
        for member in ["c1", "c2"] {
            assert!(matches!(
                cell.role(agent("sup"), member, Role::Coordinator),
                Outcome::RoleSet { .. }
            ));
        }
        cell
    }

    fn register(&mut self, name: &str) {
        let put = Command::KvPut {
            key: agent_key(name),
            value: b"salt$hash".to_vec(),
            expect_version: None,
        };
        assert!(matches!(
            self.run(Caller::Server, put),
            Outcome::KvWritten { .. }
        ));
    }

    fn join(&mut self, member: &str) {
        let join = Command::TeamJoin {
            team: "t".into(),
            caller: "sup".into(),
            agent: member.into(),
        };
        assert!(matches!(
            self.run(agent("sup"), join),
            Outcome::TeamJoined { .. }
        ));
    }

    fn run(&mut self, caller: Caller, command: Command) -> Outcome {
        self.index += 1;
        let stamp = Stamp {
            index: self.index,
            position: 0,
            time_ms: self.now_ms,
        };
        apply(&mut self.txn, stamp, &Request::by(caller, None, command)).outcome
    }

    fn role(&mut self, caller: Caller, member: &str, role: Role) -> Outcome {
        let command = Command::TeamRole {
            team: "t".into(),
            member: member.into(),
            role,
        };
        self.run(caller, command)
    }

    fn open(&mut self, caller: Caller, rules: Rules) -> Result<String, Outcome> {
        match self.run(
            caller,
            Command::VoteOpen {
                team: "t".into(),
                rules,
            },
        ) {
            Outcome::VoteOpened { proposal, .. } => Ok(proposal),
            other => Err(other),
        }
    }

    fn cast(&mut self, voter: Caller, proposal: &str, names: &[&str]) -> Outcome {
        let cast = Command::VoteCast {
            proposal: proposal.into(),
            choice: choice(names),
        };
        self.run(voter, cast)
    }

    fn tick(&mut self) -> Outcome {
        self.run(Caller::Server, Command::Tick)
    }

    fn read(&self, caller: Caller, inner: Query) -> QueryResult {
        let by = Query::By {
            caller,
            query: Box::new(inner),
        };
        query(&self.txn, self.now_ms, &by)
    }

    fn show(&self, proposal: &str) -> ProposalView {
        match self.read(
            Caller::Operator,
            Query::VoteProposal {
                proposal: proposal.into(),
            },
        ) {
            QueryResult::Proposal(Some(view)) => *view,
            other => panic!("no proposal: {other:?}"),
        }
    }

    fn ballots(&self, proposal: &str) -> Vec<BallotView> {
        let inner = Query::VoteBallots {
            proposal: proposal.into(),
            after_seq: 0,
            limit: 0,
        };
        match self.read(Caller::Operator, inner) {
            QueryResult::Ballots(ballots) => ballots,
            other => panic!("no ballots: {other:?}"),
        }
    }

    fn ledger(&self, name: &str, partition: &str) -> Vec<String> {
        let list = Query::LedgerList {
            owner: "team/t".into(),
            name: name.into(),
            partition: Some(partition.into()),
            after_seq: 0,
            limit: 0,
        };
        match query(&self.txn, self.now_ms, &list) {
            QueryResult::LedgerEntries(rows) => rows
                .into_iter()
                .map(|r| String::from_utf8(r.entry).unwrap())
                .collect(),
            other => panic!("no ledger: {other:?}"),
        }
    }
}

fn refusal(outcome: Outcome) -> VoteRefusal {
    match outcome {
        Outcome::VoteRefused { refusal } => refusal,
        other => panic!("not refused: {other:?}"),
    }
}

fn why(outcome: Outcome) -> Ineligible {
    match refusal(outcome) {
        VoteRefusal::NotEligible { why, .. } => why,
        other => panic!("refused otherwise: {other:?}"),
    }
}

#[test]
fn only_the_supervisor_gives_roles_and_only_to_members() {
    let mut cell = Cell::new();
    let not_sup = refusal(cell.role(agent("c1"), "w1", Role::Coordinator));
    assert_eq!(not_sup.code(), "not_supervisor");
    let outsider = refusal(cell.role(agent("sup"), "late", Role::Coordinator));
    assert_eq!(outsider.code(), "not_member");
    let demote_sup = refusal(cell.role(agent("sup"), "sup", Role::Worker));
    assert_eq!(demote_sup.code(), "supervisor_role");
    let by_operator = refusal(cell.role(Caller::Operator, "w1", Role::Coordinator));
    assert_eq!(by_operator.code(), "not_supervisor");
}

#[test]
fn only_a_coordinator_opens_and_the_electorate_is_the_coordinators() {
    let mut cell = Cell::new();
    let worker = cell
        .open(agent("w1"), rules(Method::Plurality))
        .unwrap_err();
    assert_eq!(refusal(worker).code(), "not_coordinator");
    let operator = cell
        .open(Caller::Operator, rules(Method::Plurality))
        .unwrap_err();
    assert_eq!(refusal(operator).code(), "not_coordinator");
    let id = cell.open(agent("c1"), rules(Method::Plurality)).unwrap();
    assert!(id.starts_with("t#"), "{id}");
    let view = cell.show(&id);
    assert_eq!(view.electorate, vec!["c1", "c2", "sup"]);
    assert_eq!(view.state, ProposalState::Open);
    assert_eq!(view.closes_at_ms, cell.now_ms + 60_000);
    // An electorate that names workers takes them in too.
    let mut both = rules(Method::Plurality);
    both.electorate = vec![Role::Coordinator, Role::Worker];
    let id = cell.open(agent("sup"), both).unwrap();
    assert_eq!(cell.show(&id).electorate, vec!["c1", "c2", "sup", "w1"]);
}

#[test]
fn a_workers_ballot_is_refused() {
    let mut cell = Cell::new();
    let id = cell.open(agent("c1"), rules(Method::Plurality)).unwrap();
    assert_eq!(
        why(cell.cast(agent("w1"), &id, &["yes"])),
        Ineligible::NotInElectorate
    );
    assert_eq!(
        why(cell.cast(Caller::Operator, &id, &["yes"])),
        Ineligible::NotAnAgent
    );
    assert!(cell.ballots(&id).is_empty());
}

#[test]
fn a_coordinator_demoted_or_revoked_before_casting_is_refused() {
    let mut cell = Cell::new();
    let id = cell.open(agent("sup"), rules(Method::Plurality)).unwrap();
    cell.role(agent("sup"), "c1", Role::Worker);
    assert_eq!(
        why(cell.cast(agent("c1"), &id, &["yes"])),
        Ineligible::RoleLost
    );
    // A revoked identity: the record is marked, then the agent leaves every team.
    let revoke = Command::AgentRevoke {
        agent: "c2".into(),
        by: "~operator".into(),
    };
    assert!(matches!(
        cell.run(Caller::Server, revoke),
        Outcome::AgentRevoked { .. }
    ));
    assert_eq!(
        why(cell.cast(agent("c2"), &id, &["yes"])),
        Ineligible::IdentityRevoked
    );
    let leave = Command::TeamLeaveAll { agent: "c2".into() };
    cell.run(Caller::Server, leave);
    assert_eq!(
        why(cell.cast(agent("c2"), &id, &["yes"])),
        Ineligible::NotMember
    );
    assert!(matches!(
        cell.cast(agent("sup"), &id, &["yes"]),
        Outcome::BallotAccepted { .. }
    ));
}

#[test]
fn a_member_who_joined_after_opening_cannot_vote() {
    let mut cell = Cell::new();
    let id = cell.open(agent("sup"), rules(Method::Plurality)).unwrap();
    cell.join("late");
    cell.role(agent("sup"), "late", Role::Coordinator);
    assert_eq!(
        why(cell.cast(agent("late"), &id, &["yes"])),
        Ineligible::NotInElectorate
    );
}

#[test]
fn unknown_team_or_identity_refuses_the_ballot() {
    let mut cell = Cell::new();
    let id = cell.open(agent("sup"), rules(Method::Plurality)).unwrap();
    // The identity record is gone (never registered on this cell): not admitted.
    cell.txn.map.retain(|key, _| !key.ends_with(b"agents/{c2}"));
    assert_eq!(
        why(cell.cast(agent("c2"), &id, &["yes"])),
        Ineligible::IdentityUnknown
    );
    // The team began dissolving: nothing can establish membership any more.
    let dissolve = Command::TeamDissolve {
        team: "t".into(),
        caller: "sup".into(),
    };
    cell.run(agent("sup"), dissolve);
    let outcome = cell.cast(agent("c1"), &id, &["yes"]);
    assert!(
        matches!(&outcome, Outcome::VoteRefused { refusal }
            if matches!(refusal.code(), "not_eligible" | "unknown_proposal")),
        "{outcome:?}"
    );
    let missing = cell.cast(agent("c1"), "nosuch#7", &["yes"]);
    assert_eq!(refusal(missing).code(), "unknown_proposal");
}

#[test]
fn ballots_are_appended_and_the_last_one_counts() {
    let mut cell = Cell::new();
    let id = cell.open(agent("sup"), rules(Method::Plurality)).unwrap();
    for (voter, option) in [("c1", "no"), ("c2", "yes"), ("c1", "yes")] {
        cell.cast(agent(voter), &id, &[option]);
    }
    let bad = refusal(cell.cast(agent("sup"), &id, &["maybe"]));
    assert_eq!(bad.code(), "invalid_choice");
    let two = refusal(cell.cast(agent("sup"), &id, &["yes", "no"]));
    assert_eq!(two.code(), "invalid_choice");
    let listed: Vec<(u64, String, Vec<u16>)> = cell
        .ballots(&id)
        .into_iter()
        .map(|b| (b.seq, b.voter, b.choice))
        .collect();
    assert_eq!(
        listed,
        vec![
            (1, "c1".into(), vec![1]),
            (2, "c2".into(), vec![0]),
            (3, "c1".into(), vec![0])
        ]
    );
    cell.now_ms += 60_000;
    assert!(matches!(cell.tick(), Outcome::Ticked { processed } if processed >= 1));
    let view = cell.show(&id);
    let result = view.result.clone().unwrap();
    assert_eq!(result.outcome, VoteOutcome::Passed { option: 0 });
    assert_eq!((result.voters, result.electorate, view.ballots), (2, 3, 3));
    assert_eq!(result.reason, CloseReason::Deadline);
    assert_eq!(view.winner(), Some("yes"));
    let closed = refusal(cell.cast(agent("sup"), &id, &["no"]));
    assert_eq!(closed.code(), "closed");
}

#[test]
fn a_proposal_closes_once_with_one_result_in_the_ledger_and_signals() {
    let mut cell = Cell::new();
    let id = cell.open(agent("sup"), rules(Method::Plurality)).unwrap();
    cell.cast(agent("c1"), &id, &["no"]);
    let not_opener = refusal(cell.run(
        agent("c1"),
        Command::VoteClose {
            proposal: id.clone(),
        },
    ));
    assert_eq!(not_opener.code(), "not_opener");
    let closed = cell.run(
        agent("sup"),
        Command::VoteClose {
            proposal: id.clone(),
        },
    );
    assert_eq!(
        closed,
        Outcome::VoteClosed {
            proposal: id.clone(),
            outcome: VoteOutcome::NoQuorum,
            winner: None
        }
    );
    let again = refusal(cell.run(
        agent("sup"),
        Command::VoteClose {
            proposal: id.clone(),
        },
    ));
    assert_eq!(again.code(), "closed");
    // The deadline's tick (also one repeated after a leader change) counts nothing again.
    cell.now_ms += 120_000;
    cell.tick();
    cell.tick();
    let votes = cell.ledger("votes", &id);
    assert_eq!(votes.len(), 1, "{votes:?}");
    let record: serde_json::Value = serde_json::from_str(&votes[0]).unwrap();
    assert_eq!(record["outcome"], "no_quorum");
    assert_eq!(record["closed_by"], "opener");
    assert_eq!(cell.ledger("signals", "vote"), votes);
}

#[test]
fn until_all_voted_closes_with_the_last_ballot() {
    let mut cell = Cell::new();
    let mut all = rules(Method::Borda);
    all.until_all_voted = true;
    let id = cell.open(agent("sup"), all).unwrap();
    cell.cast(agent("c1"), &id, &["later", "yes"]);
    cell.cast(agent("c1"), &id, &["yes", "later"]);
    cell.cast(agent("c2"), &id, &["later", "no", "yes"]);
    let last = cell.cast(agent("sup"), &id, &["yes"]);
    assert!(
        matches!(
            last,
            Outcome::BallotAccepted {
                seq: 4,
                closed: true,
                ..
            }
        ),
        "{last:?}"
    );
    let result = cell.show(&id).result.unwrap();
    assert_eq!(result.reason, CloseReason::AllVoted);
    // Borda: yes 2 + 0 + 2 = 4, no 0 + 1 + 0 = 1, later 1 + 2 + 0 = 3, of 6 points.
    assert_eq!(result.rounds[0].counts, vec![4, 1, 3]);
    assert_eq!(result.outcome, VoteOutcome::Passed { option: 0 });
}

#[test]
fn reads_are_for_members_and_the_operator() {
    let mut cell = Cell::new();
    let id = cell.open(agent("sup"), rules(Method::Plurality)).unwrap();
    let outsider = cell.read(
        agent("late"),
        Query::VoteProposal {
            proposal: id.clone(),
        },
    );
    assert!(matches!(outsider, QueryResult::Refused(_)), "{outsider:?}");
    let member = cell.read(
        agent("w1"),
        Query::VoteList {
            team: "t".into(),
            limit: 0,
        },
    );
    assert!(
        matches!(member, QueryResult::Proposals(ref p) if p.len() == 1),
        "{member:?}"
    );
    // A client cannot forge a result into the team's votes ledger.
    let forge = Command::LedgerAppend {
        ledger: whip_board::ResourceId {
            owner: "team/t".into(),
            name: "votes".into(),
            key: id,
        },
        entry: b"{}".to_vec(),
        appended_by: "sup".into(),
        retain_ms: 1_000,
    };
    assert!(matches!(
        cell.run(agent("sup"), forge),
        Outcome::Forbidden { .. }
    ));
}

#[test]
fn a_team_dissolves_with_its_proposals() {
    let mut cell = Cell::new();
    let id = cell.open(agent("sup"), rules(Method::Plurality)).unwrap();
    cell.cast(agent("c1"), &id, &["yes"]);
    let dissolve = Command::TeamDissolve {
        team: "t".into(),
        caller: "sup".into(),
    };
    assert!(matches!(
        cell.run(agent("sup"), dissolve),
        Outcome::TeamDissolved { done: true, .. }
    ));
    let QueryResult::Proposal(None) =
        cell.read(Caller::Operator, Query::VoteProposal { proposal: id })
    else {
        panic!("the proposal went with its team");
    };
    cell.now_ms += 120_000;
    assert!(matches!(cell.tick(), Outcome::Ticked { .. }));
}

const VOTERS: [&str; 4] = ["sup", "c1", "c2", "w1"];
const METHODS: [Method; 5] = Method::ALL;

/// Run `casts` (voter, ranking of option indices, minutes later) on a fresh cell, then
/// close at the deadline; returns the cell.
fn replay(method: Method, casts: &[(usize, Vec<usize>, u64)]) -> (Cell, String) {
    let mut cell = Cell::new();
    let id = cell.open(agent("sup"), rules(method)).unwrap();
    let options = ["yes", "no", "later"];
    for (voter, ranking, later_ms) in casts {
        cell.now_ms += later_ms;
        let names: Vec<&str> = ranking.iter().map(|i| options[*i]).collect();
        let names = match method {
            Method::Plurality => &names[..1],
            _ => &names[..],
        };
        cell.cast(agent(VOTERS[*voter]), &id, names);
    }
    cell.now_ms += 120_000;
    cell.tick();
    (cell, id)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Replaying the same commands gives byte-identical state (tally included), and the
    /// recorded result equals the one recomputed from the listed ballots.
    #[test]
    fn replays_are_byte_identical_and_the_result_recomputes(
        method in 0usize..5,
        casts in proptest::collection::vec(
            (0usize..4, Just(vec![0usize, 1, 2]).prop_shuffle(), 0u64..30_000),
            0..12,
        ),
    ) {
        let method = METHODS[method];
        let (one, id) = replay(method, &casts);
        let (two, _) = replay(method, &casts);
        prop_assert_eq!(&one.txn.map, &two.txn.map);
        let view = one.show(&id);
        let recorded = view.result.clone().expect("closed at the deadline");
        let mut last = std::collections::BTreeMap::new();
        for ballot in one.ballots(&id) {
            prop_assert!(view.electorate.contains(&ballot.voter));
            last.insert(ballot.voter, ballot.choice);
        }
        let ballots: Vec<Vec<u16>> = last.into_values().collect();
        let again = decide(
            &view.rules,
            view.electorate.len(),
            &ballots,
            (recorded.closed_at_ms, recorded.reason),
        );
        prop_assert_eq!(recorded, again);
    }
}
