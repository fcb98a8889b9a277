//! The voting plane in a fabric: a team's proposal and ballots live on the team's cell,
//! while its voters' identity records sit on other cells. The proposal's closing time
//! falls while the team cell's leader is stopped; the tick of the new leader (or of the
//! old one, back) closes it, and it closes once: one result in the proposal, one entry in
//! the team's `votes` ledger and one `vote` signal.

use std::time::{Duration, Instant};

use whip_board::{Query, QueryResult, route};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_tests::fabric::Fabric;

use crate::agent;

/// Entries of the team's ledger `name`, partition `partition`, read as a server on
/// whichever node answers for `cell`.
async fn ledger(fabric: &Fabric, cell: u64, name: &str, partition: &str) -> usize {
    let query = Query::LedgerList {
        owner: "team/senate".into(),
        name: name.into(),
        partition: Some(partition.into()),
        after_seq: 0,
        limit: 0,
    };
    for id in fabric.running() {
        let Some(member) = fabric.node(id).hosted(cell) else {
            continue;
        };
        if let Ok(QueryResult::LedgerEntries(rows)) = member.read(query.clone()).await {
            return rows.len();
        }
    }
    panic!("no member of cell {cell} answered");
}

async fn open(lead: &CellClient, duration_ms: u64) -> String {
    let open = pb::VoteOpenRequest {
        team: "senate".into(),
        title: "budget".into(),
        options: vec!["raise".into(), "hold".into(), "cut".into()],
        method: "schulze".into(),
        quorum: "2/3".into(),
        threshold: "majority".into(),
        duration_ms,
        ..Default::default()
    };
    let opened = lead.vote_open(open).await.expect("open");
    assert_eq!(
        (opened.code(), opened.outcome.as_str()),
        (Code::VoteOpened, "opened"),
        "{opened:?}"
    );
    opened.proposal
}

/// Team `senate`: `voters[0]` supervises, the others are coordinators; their clients.
async fn senate(fabric: &Fabric, voters: &[String]) -> Vec<CellClient> {
    let mut clients = Vec::new();
    for name in voters {
        clients.push(agent(fabric, name).await);
    }
    let lead = &clients[0];
    let create = pb::TeamCreateRequest {
        team: "senate".into(),
        ..Default::default()
    };
    lead.team_create(create).await.expect("team");
    for name in &voters[1..] {
        let join = pb::TeamJoinRequest {
            team: "senate".into(),
            agent: name.clone(),
            ..Default::default()
        };
        lead.team_join(join).await.expect("join");
        let role = pb::TeamRoleRequest {
            team: "senate".into(),
            member: name.clone(),
            role: "coordinator".into(),
            ..Default::default()
        };
        let set = lead.team_role(role).await.expect("role");
        assert_eq!((set.code(), set.outcome.as_str()), (Code::RoleSet, "set"));
    }
    clients
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proposal_closing_during_a_leader_change_closes_once() {
    let mut fabric = Fabric::start(3, 4).await;
    let map = fabric.node(1).map().await.expect("map");
    let team_cell = map.locate(route::team_point("senate")).cell;
    let identity_cell = |name: &str| {
        let key = whip_board::access::agent_key(name);
        map.locate(route::kv_point(&key)).cell
    };
    let voters: Vec<String> = (0..)
        .map(|i| format!("senator-{i}"))
        .filter(|name| identity_cell(name) != team_cell)
        .take(4)
        .collect();
    let clients = senate(&fabric, &voters).await;
    let lead = &clients[0];
    let proposal = open(lead, 4_000).await;
    let opened_at = Instant::now();
    for (client, ranking) in
        clients
            .iter()
            .zip([["hold", "raise"], ["hold", "cut"], ["raise", "hold"]])
    {
        let cast = pb::VoteCastRequest {
            proposal: proposal.clone(),
            choice: ranking.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let answer = client.vote_cast(cast).await.expect("cast");
        assert_eq!(
            (answer.code(), answer.outcome.as_str()),
            (Code::VoteAccepted, "accepted"),
            "{answer:?}"
        );
    }
    // Stop the team cell's leader just before the closing time, for past it.
    tokio::time::sleep(Duration::from_millis(3_500).saturating_sub(opened_at.elapsed())).await;
    fabric
        .bounce_leader(team_cell, Duration::from_millis(2_000))
        .await;

    let deadline = Instant::now() + Duration::from_secs(30);
    let shown = loop {
        let show = pb::VoteShowRequest {
            proposal: proposal.clone(),
        };
        if let Ok(r) = lead.vote_show(show).await
            && let Some(p) = r.proposal.filter(|p| p.state == "closed")
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the proposal never closed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let result = shown.result.expect("a result");
    assert_eq!(
        (result.outcome.as_str(), result.reason.as_str()),
        ("passed", "deadline")
    );
    assert_eq!(result.winner, Some(1), "hold beats raise 2–1 and cut 3–0");
    assert_eq!((result.voters, result.electorate), (3, 4));
    // A few more ticks pass; still one record of it.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(ledger(&fabric, team_cell, "votes", &proposal).await, 1);
    assert_eq!(ledger(&fabric, team_cell, "signals", "vote").await, 1);
    fabric.shutdown().await;
}
