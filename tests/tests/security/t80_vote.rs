//! The voting plane as an attacker reaches it over the wire: a stranger without a token,
//! an outsider and a worker casting, a forged voter field, a worker promoting itself or
//! opening a proposal, an outsider reading one, and a demoted coordinator casting. Every
//! refusal is decided in the ballot's apply; no refused ballot is listed; the cell serves
//! on.

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::{anonymous, still_serving, target};

/// A cast as a forger writes it: the real fields plus a voter the server does not have.
#[derive(Clone, PartialEq, prost::Message)]
struct ForgedCast {
    #[prost(string, tag = "1")]
    proposal: String,
    #[prost(string, repeated, tag = "2")]
    choice: Vec<String>,
    /// Not a field of `VoteCastRequest`: decoding skips it.
    #[prost(string, tag = "20")]
    voter: String,
}

async fn raw_cast(addr: &str, caller: (&str, &str), forged: ForgedCast) -> pb::VoteResponse {
    let path = "/whip.v1.Cell/VoteCast";
    crate::forged_call(addr, caller, path, forged)
        .await
        .expect("answered")
}

async fn agent(dev: &whip_tests::DevCell, by: &CellClient, name: &str) -> (CellClient, String) {
    crate::registered(dev, by, name, false).await
}

fn cast(proposal: &str, choice: &str) -> pb::VoteCastRequest {
    pb::VoteCastRequest {
        proposal: proposal.into(),
        choice: vec![choice.into()],
        ..Default::default()
    }
}

fn reason(r: &pb::VoteResponse) -> (&str, &str) {
    (r.outcome.as_str(), r.reason.as_str())
}

/// Team `jury`: `lead` supervises, `cora` is a coordinator, `will` a worker.
async fn jury(lead: &CellClient, members: &[&str]) -> String {
    let create = pb::TeamCreateRequest {
        team: "jury".into(),
        ..Default::default()
    };
    lead.team_create(create).await.unwrap();
    for member in members {
        let join = pb::TeamJoinRequest {
            team: "jury".into(),
            agent: member.to_string(),
            ..Default::default()
        };
        lead.team_join(join).await.unwrap();
    }
    let role = |member: &str, role: &str| pb::TeamRoleRequest {
        team: "jury".into(),
        member: member.into(),
        role: role.into(),
        ..Default::default()
    };
    assert_eq!(
        lead.team_role(role("cora", "coordinator"))
            .await
            .unwrap()
            .outcome,
        "set"
    );
    let open = pb::VoteOpenRequest {
        team: "jury".into(),
        title: "verdict".into(),
        options: vec!["guilty".into(), "innocent".into()],
        method: "plurality".into(),
        quorum: "0.5".into(),
        threshold: "majority".into(),
        duration_ms: 600_000,
        ..Default::default()
    };
    let opened = lead.vote_open(open).await.unwrap();
    assert_eq!(
        (opened.code(), opened.outcome.as_str()),
        (Code::VoteOpened, "opened"),
        "{opened:?}"
    );
    opened.proposal
}

#[tokio::test]
async fn only_the_electorate_votes_and_nobody_votes_as_another() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (lead, _) = agent(&dev, &operator, "lead").await;
    let (cora, _) = agent(&dev, &operator, "cora").await;
    let (will, will_token) = agent(&dev, &operator, "will").await;
    let (mallory, _) = agent(&dev, &operator, "mallory").await;
    let proposal = jury(&lead, &["cora", "will"]).await;

    let stranger = CellClient::connect_with(&[dev.member(1)], &anonymous()).unwrap();
    let refused = stranger.vote_cast(cast(&proposal, "guilty")).await;
    assert!(
        matches!(&refused, Err(CellError::PermissionDenied(m)) if m.contains("anonymous_refused")),
        "{refused:?}"
    );
    let outsider = mallory.vote_cast(cast(&proposal, "guilty")).await.unwrap();
    assert_eq!(
        reason(&outsider),
        ("refused", "not_eligible"),
        "{outsider:?}"
    );
    let worker = will.vote_cast(cast(&proposal, "guilty")).await.unwrap();
    assert_eq!(reason(&worker), ("refused", "not_eligible"), "{worker:?}");
    // The worker names the supervisor as the voter: the field does not exist.
    let forged = ForgedCast {
        proposal: proposal.clone(),
        choice: vec!["guilty".into()],
        voter: "lead".into(),
    };
    let answer = raw_cast(&dev.member(1), ("will", &will_token), forged).await;
    assert_eq!(reason(&answer), ("refused", "not_eligible"), "{answer:?}");

    worker_has_no_say(&will, &mallory, &proposal).await;
    demoted_cannot_cast(&lead, &cora, &proposal).await;
    let ballots = lead
        .vote_ballots(pb::VoteBallotsRequest {
            proposal,
            ..Default::default()
        })
        .await
        .unwrap()
        .ballots;
    let voters: Vec<&str> = ballots.iter().map(|b| b.voter.as_str()).collect();
    assert_eq!(voters, ["cora"], "only the eligible ballot is listed");
    still_serving(&operator).await;
}

/// Cora votes as a coordinator, is demoted, and her next ballot is refused.
async fn demoted_cannot_cast(lead: &CellClient, cora: &CellClient, proposal: &str) {
    let first = cora.vote_cast(cast(proposal, "innocent")).await.unwrap();
    assert_eq!(
        (first.outcome.as_str(), first.seq),
        ("accepted", 1),
        "{first:?}"
    );
    let demote = pb::TeamRoleRequest {
        team: "jury".into(),
        member: "cora".into(),
        role: "worker".into(),
        ..Default::default()
    };
    lead.team_role(demote).await.unwrap();
    let again = cora.vote_cast(cast(proposal, "guilty")).await.unwrap();
    assert_eq!(reason(&again), ("refused", "not_eligible"), "{again:?}");
    assert!(again.message.contains("role_lost"), "{again:?}");
}

/// The worker cannot promote itself or open a proposal; the outsider cannot read one.
async fn worker_has_no_say(will: &CellClient, mallory: &CellClient, proposal: &str) {
    // The worker cannot promote itself, open a proposal, or read as an outsider.
    let promote = pb::TeamRoleRequest {
        team: "jury".into(),
        member: "will".into(),
        role: "coordinator".into(),
        ..Default::default()
    };
    assert_eq!(
        reason(&will.team_role(promote).await.unwrap()).1,
        "not_supervisor"
    );
    let open = pb::VoteOpenRequest {
        team: "jury".into(),
        title: "coup".into(),
        options: vec!["a".into(), "b".into()],
        method: "plurality".into(),
        quorum: "0".into(),
        threshold: "majority".into(),
        duration_ms: 1_000,
        ..Default::default()
    };
    assert_eq!(
        reason(&will.vote_open(open).await.unwrap()).1,
        "not_coordinator"
    );
    let peek = pb::VoteShowRequest {
        proposal: proposal.to_string(),
    };
    let read = mallory.vote_show(peek).await;
    assert!(crate::is_not_member(&read), "{read:?}");
}
