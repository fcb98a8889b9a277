use std::sync::Arc;

use maplit::btreeset;
use pretty_assertions::assert_eq;

use crate::engine::testing::UTConfig;
use crate::engine::Command;
use crate::engine::Engine;
use crate::engine::LogIdList;
use crate::raft_state::LogStateReader;
use crate::testing::log_id;
use crate::utime::UTime;
use crate::EffectiveMembership;
use crate::Membership;
use crate::ServerState;
use crate::TokioInstant;
use crate::Vote;

fn m_empty() -> Membership<u64, ()> {
    Membership::<u64, ()>::new(vec![btreeset! {}], None)
}

fn m23() -> Membership<u64, ()> {
    Membership::<u64, ()>::new(vec![btreeset! {2,3}], None)
}

fn m34() -> Membership<u64, ()> {
    Membership::<u64, ()>::new(vec![btreeset! {3,4}], None)
}

fn eng() -> Engine<UTConfig> {
    let mut eng = Engine::testing_default(0);
    eng.state.enable_validation(false);
    eng.config.id = 2;
    // This will be overridden
    eng.state.server_state = ServerState::default();
    eng
}

/// Asserts a restarted leader campaigned for a new term (whip patch, PATCH.md item 3):
/// stock 0.9 resumed its term as leader at once.
fn assert_campaigns_for_term_2(eng: &mut Engine<UTConfig>) {
    assert_eq!(ServerState::Candidate, eng.state.server_state);
    assert_eq!(&Vote::new(2, 2), eng.state.vote_ref());
    assert!(eng.leader.is_none(), "it leads nothing until elected");
    let commands = eng.output.take_commands();
    let saved = commands.iter().any(|c| matches!(c, Command::SaveVote { vote } if *vote == Vote::new(2, 2)));
    assert!(saved, "the new vote is saved: {:?}", commands);
    let asked = commands.iter().any(|c| matches!(c, Command::SendVote { .. }));
    assert!(asked, "votes are asked for: {:?}", commands);
    let led = commands.iter().any(|c| matches!(c, Command::BecomeLeader | Command::Replicate { .. }));
    assert!(!led, "nothing is replicated under the old term: {:?}", commands);
}

/// It was a Leader but had not yet appended any logs: it campaigns (whip patch).
#[test]
fn test_startup_as_leader_without_logs() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m23())));
    // Committed vote made it a leader before the restart.
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new_committed(1, 2));

    eng.startup();

    assert_campaigns_for_term_2(&mut eng);
    Ok(())
}

/// A leader that proposed logs and restarted campaigns too, keeping its logs (whip patch).
#[test]
fn test_startup_as_leader_with_proposed_logs() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m23())));
    // Fake existing log ids
    eng.state.log_ids = LogIdList::new([log_id(1, 1, 2), log_id(1, 2, 4), log_id(1, 2, 6)]);
    // Committed vote made it a leader before the restart.
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new_committed(1, 2));

    eng.startup();

    assert_campaigns_for_term_2(&mut eng);
    assert_eq!(Some(&log_id(1, 2, 6)), eng.state.last_log_id(), "its logs are kept");
    Ok(())
}

/// When starting up, a leader that is not a voter should not panic.
#[test]
fn test_startup_as_leader_not_voter_issue_920() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m_empty())));
    // Committed vote makes it a leader at startup.
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new_committed(1, 2));

    eng.startup();

    assert_eq!(ServerState::Learner, eng.state.server_state);
    assert_eq!(eng.output.take_commands(), vec![]);

    Ok(())
}

#[test]
fn test_startup_candidate_becomes_follower() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m23())));
    // Non-committed vote makes it a candidate at startup.
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new(1, 2));

    eng.startup();

    assert_eq!(ServerState::Follower, eng.state.server_state);
    assert_eq!(0, eng.output.take_commands().len());

    Ok(())
}
#[test]
fn test_startup_as_follower() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m23())));

    eng.startup();

    assert_eq!(ServerState::Follower, eng.state.server_state);
    assert_eq!(0, eng.output.take_commands().len());

    Ok(())
}

#[test]
fn test_startup_as_learner() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is not a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m34())));

    eng.startup();

    assert_eq!(ServerState::Learner, eng.state.server_state);
    assert_eq!(0, eng.output.take_commands().len());

    Ok(())
}

/// A follower that restarts with `boot_lease` (whip patch, PATCH.md item 11) refuses a
/// candidate within the leader lease after its start, as if it had just accepted a leader;
/// without it (stock) the same request is granted at once.
#[test]
fn test_startup_with_boot_lease_refuses_votes_within_the_lease() -> anyhow::Result<()> {
    use crate::raft::VoteRequest;
    use std::time::Duration;

    for boot_lease in [true, false] {
        let mut eng = eng();
        eng.config.boot_lease = boot_lease;
        eng.config.timer_config.leader_lease = Duration::from_secs(60);
        eng.state
            .membership_state
            .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(1, 1, 1)), m23())));
        // A follower of leader 3 in term 1, its vote loaded from storage with no time.
        eng.state.vote = UTime::without_utime(Vote::new_committed(1, 3));

        eng.startup();
        assert_eq!(ServerState::Follower, eng.state.server_state);

        let resp = eng.handle_vote_req(VoteRequest {
            vote: Vote::new(2, 3),
            last_log_id: Some(log_id(1, 1, 5)),
        });
        assert_eq!(!boot_lease, resp.vote_granted, "boot_lease {boot_lease}");
    }
    Ok(())
}
