//! The live work registry on a 3-node × 4-cell fabric: the population ceiling holds under
//! 300 concurrent registrations spread over every node and cell (each cell admits only
//! within the quota the meta cell lent it), and keeps holding with a node down; depth and
//! child limits; revoke removes a subtree, the agents the revoker enrolled lose their
//! tokens and memberships, and every control-plane action is in the audit ledger.

use std::collections::BTreeSet;
use std::time::Duration;

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_tests::fabric::Fabric;

const CEILING: u64 = 100;
const REGISTRATIONS: usize = 300;

fn token(agent: &str) -> String {
    format!("{agent}-registry-token-0123456789-abcdefghij")
}

/// A client of node `node` acting for `agent`, registered by the operator.
async fn agent(fabric: &Fabric, node: u64, agent: &str) -> CellClient {
    let client = fabric.client_of(node);
    let register = pb::AgentRegisterRequest {
        agent: agent.into(),
        token: token(agent),
        enroll: false,
    };
    client.agent_register(register).await.expect("register");
    client.with_identity(agent, token(agent))
}

fn register(kind: &str, parent: Option<&str>) -> pb::WorkRegisterRequest {
    pb::WorkRegisterRequest {
        kind: kind.into(),
        parent: parent.unwrap_or_default().into(),
        ttl_ms: 60_000,
        ..Default::default()
    }
}

async fn limits(client: &CellClient, request: pb::WorkLimitsRequest) -> pb::WorkLimitsResponse {
    client.work_limits(request).await.expect("limits")
}

async fn live(client: &CellClient, parent: Option<&str>) -> Vec<pb::WorkEntry> {
    let request = pb::WorkListRequest {
        parent: parent.unwrap_or_default().into(),
        limit: 0,
    };
    client.work_list(request).await.expect("list").entries
}

/// Register `n` roots concurrently through every node; the admitted ids and every answer.
/// Each registration has its own idempotency key, and one that got no answer in time is
/// sent again under it (as any client does), so an unknown outcome becomes an answer.
async fn register_many(
    clients: &[CellClient],
    round: &str,
    n: usize,
) -> (Vec<String>, Vec<pb::WorkResponse>) {
    let calls = (0..n).map(|i| {
        let client = &clients[i % clients.len()];
        let request = pb::WorkRegisterRequest {
            idempotency_key: format!("t97-{round}-{i}"),
            ..register("run", None)
        };
        async move {
            let mut answer = client.work_register(request.clone()).await;
            for _ in 0..3 {
                match answer {
                    Err(CellError::Unavailable(_)) => {
                        answer = client.work_register(request.clone()).await;
                    }
                    _ => break,
                }
            }
            answer
        }
    });
    let answers: Vec<pb::WorkResponse> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|answer| answer.expect("an answer, admitted or refused"))
        .collect();
    let admitted = answers
        .iter()
        .filter(|a| a.outcome == "admitted")
        .map(|a| a.entry.as_ref().expect("entry").id.clone())
        .collect();
    (admitted, answers)
}

fn check_refusals(answers: &[pb::WorkResponse]) {
    for answer in answers.iter().filter(|a| a.outcome != "admitted") {
        assert_eq!(
            (answer.code(), answer.outcome.as_str()),
            (Code::WorkRefused, "refused"),
            "{answer:?}"
        );
        assert_eq!(answer.limit, "fabric", "{answer:?}");
        assert_eq!(answer.max, CEILING, "{answer:?}");
        assert!(answer.reason.contains("ceiling is 100"), "{answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ceiling_holds_under_concurrent_registrations_and_with_a_node_down() {
    whip_tests::init_tracing();
    let mut fabric = Fabric::start(3, 4).await;
    let operator = fabric.client_of(1);
    let set = pb::WorkLimitsRequest {
        fabric_max: Some(CEILING),
        ..Default::default()
    };
    assert_eq!(limits(&operator, set).await.fabric_max, CEILING);
    let mut clients = Vec::new();
    for node in 1..=3 {
        clients.push(agent(&fabric, node, &format!("runner-{node}")).await);
    }
    let (admitted, answers) = register_many(&clients, "first", REGISTRATIONS).await;
    check_refusals(&answers);
    let unique: BTreeSet<_> = admitted.iter().collect();
    assert_eq!(unique.len(), admitted.len(), "an id was admitted twice");
    assert!(
        admitted.len() as u64 <= CEILING,
        "{} admitted",
        admitted.len()
    );
    // Quotas are lent in chunks: on a quiet machine the cells reach the whole ceiling
    // (100 of 100 measured); under load a quota round may time out and its registration
    // is refused (fail-closed), so only progress is asserted here.
    assert!(!admitted.is_empty(), "nothing admitted");
    let listed = live(&operator, None).await;
    assert_eq!(listed.len(), admitted.len());

    // One node down: its cells elect elsewhere, their quotas are replicated state, and
    // the ceiling still holds exactly.
    fabric.kill(3).await;
    fabric.wait_leaders(Duration::from_secs(20)).await;
    // Runner 1 frees up to 30 of its own roots (a root's owner may revoke it).
    let freed: Vec<String> = answers
        .iter()
        .filter_map(|a| a.entry.as_ref())
        .filter(|e| e.owner == "runner-1")
        .take(30)
        .map(|e| e.id.clone())
        .collect();
    assert!(!freed.is_empty());
    for id in &freed {
        let revoke = pb::WorkRevokeRequest {
            id: id.clone(),
            idempotency_key: String::new(),
        };
        let revoked = clients[0].work_revoke(revoke).await.expect("revoke");
        assert!(revoked.revoked_agents.is_empty(), "{revoked:?}");
    }
    let (again, answers) = register_many(&clients[..2], "second", 100).await;
    check_refusals(&answers);
    assert!(
        !again.is_empty(),
        "the live cells admit nothing with a node down"
    );
    let listed = live(&operator, None).await;
    assert!(listed.len() as u64 <= CEILING, "{} live", listed.len());
    check_none_lost(&listed, &admitted, &freed);
    assert_eq!(listed.len(), admitted.len() - freed.len() + again.len());
    fabric.shutdown().await;
}

/// Every admitted entry not revoked is still listed.
fn check_none_lost(listed: &[pb::WorkEntry], admitted: &[String], freed: &[String]) {
    let listed: BTreeSet<&str> = listed.iter().map(|e| e.id.as_str()).collect();
    let lost: Vec<&String> = admitted
        .iter()
        .filter(|id| !freed.contains(id) && !listed.contains(id.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "{} admitted entries lost: {lost:?}",
        lost.len()
    );
}

fn refusal_limit(answer: &pb::WorkResponse) -> &str {
    assert_eq!(
        (answer.code(), answer.outcome.as_str()),
        (Code::WorkRefused, "refused"),
        "{answer:?}"
    );
    &answer.limit
}

/// Mallory can neither spawn under alice's session nor steer it; alice stops it and her
/// sub-agent hears the stop on its next renewal.
async fn steer(fabric: &Fabric, alice: &CellClient, root: &str, child: &str) {
    let mallory = agent(fabric, 3, "mallory").await;
    let spawn = mallory.work_register(register("run", Some(root))).await;
    let refused =
        matches!(spawn, Err(CellError::PermissionDenied(ref m)) if m.contains("not_authorized"));
    assert!(refused, "{spawn:?}");
    let stop = pb::WorkSignalRequest {
        id: root.to_string(),
        signal: "stop".into(),
        idempotency_key: String::new(),
    };
    assert!(mallory.work_signal(stop.clone()).await.is_err());
    alice
        .work_signal(stop)
        .await
        .expect("alice stops her session");
    let renew = pb::WorkRenewRequest {
        id: child.to_string(),
        ttl_ms: 60_000,
        idempotency_key: String::new(),
    };
    let renewed = alice.work_renew(renew).await.unwrap();
    let answer = (renewed.signal.as_str(), renewed.signal_reason.as_str());
    assert_eq!(answer, ("stop", "ancestor"));
}

/// One audit row per control-plane action, admitted or refused, in order.
async fn check_audit(operator: &CellClient) {
    let audit = operator
        .work_audit(pb::WorkAuditRequest::default())
        .await
        .unwrap()
        .rows;
    let actions: Vec<(&str, &str, &str)> = audit
        .iter()
        .map(|r| (r.actor.as_str(), r.action.as_str(), r.outcome.as_str()))
        .collect();
    let limits_rows = actions.iter().filter(|a| a.1 == "limits").count();
    assert_eq!(limits_rows, 4, "one limits row per data cell: {actions:?}");
    let rest: Vec<_> = actions.into_iter().filter(|a| a.1 != "limits").collect();
    let expected = [
        ("alice", "register", "admitted"),
        ("alice", "register", "admitted"),
        ("alice", "register", "refused_depth"),
        ("alice", "register", "admitted"),
        ("alice", "register", "refused_children"),
        ("mallory", "register", "not_authorized"),
        ("mallory", "signal", "not_authorized"),
        ("alice", "signal", "signalled"),
        ("alice", "revoke", "revoked"),
    ];
    assert_eq!(rest, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limits_lineage_revoke_and_the_audit_ledger() {
    whip_tests::init_tracing();
    let fabric = Fabric::start(3, 4).await;
    let operator = fabric.client_of(2);
    let set = pb::WorkLimitsRequest {
        depth_max: Some(1),
        children_max: Some(2),
        ..Default::default()
    };
    limits(&operator, set).await;
    let alice = agent(&fabric, 1, "alice").await;
    let root = alice
        .work_register(register("session", None))
        .await
        .unwrap();
    let root = root.entry.expect("root").id;
    let child = alice.work_register(register("subagent", Some(&root))).await;
    let child = child.unwrap().entry.expect("child");
    assert_eq!(
        (child.depth, child.lineage.clone()),
        (1, vec![root.clone()])
    );
    let deep = alice.work_register(register("job", Some(&child.id))).await;
    assert_eq!(refusal_limit(&deep.unwrap()), "depth");
    let second = alice
        .work_register(register("shell", Some(&root)))
        .await
        .unwrap();
    assert_eq!(second.peers, std::slice::from_ref(&child.id));
    let third = alice.work_register(register("shell", Some(&root))).await;
    assert_eq!(refusal_limit(&third.unwrap()), "children");
    steer(&fabric, &alice, &root, &child.id).await;
    let revoke = pb::WorkRevokeRequest {
        id: root.clone(),
        idempotency_key: String::new(),
    };
    let revoked = alice.work_revoke(revoke).await.unwrap();
    assert_eq!(revoked.removed, 3);
    assert!(live(&operator, None).await.is_empty());
    check_audit(&operator).await;
    fabric.shutdown().await;
}

/// Alice enrolls `helper` from a machine without the operator's credential (so the
/// identity records her as its enroller) and adds it to her team `crew`.
async fn enroll_helper(fabric: &Fabric, alice: &CellClient) {
    let addr = fabric.node(2).addr().to_string();
    let ca_only = CellClient::connect_with(&[addr], &whip_tests::ca_only_transport())
        .expect("client")
        .with_identity("alice", token("alice"));
    let enroll = pb::AgentRegisterRequest {
        agent: "helper".into(),
        token: token("helper"),
        enroll: false,
    };
    ca_only
        .agent_register(enroll)
        .await
        .expect("alice enrolls helper");
    let team = pb::TeamCreateRequest {
        team: "crew".into(),
        ..Default::default()
    };
    alice.team_create(team).await.expect("team");
    let join = pb::TeamJoinRequest {
        team: "crew".into(),
        agent: "helper".into(),
        idempotency_key: String::new(),
    };
    alice.team_join(join).await.expect("join");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revoking_a_subagent_revokes_the_agent_its_parent_enrolled() {
    whip_tests::init_tracing();
    let fabric = Fabric::start(3, 4).await;
    let alice = agent(&fabric, 1, "alice").await;
    enroll_helper(&fabric, &alice).await;
    let helper = std::sync::Arc::new(fabric.client_of(3).with_identity("helper", token("helper")));
    let crew = || pb::BoardStatsRequest {
        team: "crew".into(),
    };
    helper
        .board_stats(crew())
        .await
        .expect("helper is a member");
    let root = alice
        .work_register(register("session", None))
        .await
        .unwrap();
    let root = root.entry.unwrap().id;
    let mut spawn = register("subagent", Some(&root));
    spawn.owner = "helper".into();
    let sub = alice.work_register(spawn).await.unwrap().entry.unwrap();
    assert_eq!(sub.owner, "helper");
    let below = helper.work_register(register("shell", Some(&sub.id))).await;
    let below = below.unwrap();
    assert_eq!(
        (below.code(), below.outcome.as_str()),
        (Code::WorkAdmitted, "admitted")
    );

    let revoke = pb::WorkRevokeRequest {
        id: sub.id.clone(),
        idempotency_key: String::new(),
    };
    let revoked = alice.work_revoke(revoke).await.unwrap();
    assert_eq!(
        (revoked.removed, revoked.revoked_agents.clone()),
        (2, vec!["helper".into()])
    );
    // Every node's verifier forgets within its cache TTL (1 s).
    token_refused(&helper, Duration::from_secs(5)).await;
    alice
        .board_stats(crew())
        .await
        .expect("alice is still a member");
    // Alice's own session stays.
    assert_eq!(live(&alice, None).await.len(), 1);
    fabric.shutdown().await;
}

/// A work revoke applied through a node's router alone, as if the server that answered it
/// died right after the apply: the identity revocation waits in the entry cell's outbox;
/// that cell's leader is killed, and the next leader's executor revokes helper's token and
/// takes it out of its team, then acknowledges the follow-ups.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_revoke_whose_server_died_is_finished_from_the_outbox() {
    use whip_cell::service::Dispatch;
    let mut fabric = Fabric::start(3, 4).await;
    let alice = agent(&fabric, 1, "alice").await;
    enroll_helper(&fabric, &alice).await;
    let root = alice.work_register(register("session", None)).await;
    let root = root.unwrap().entry.unwrap().id;
    let mut spawn = register("subagent", Some(&root));
    spawn.owner = "helper".into();
    let sub = alice.work_register(spawn).await.unwrap().entry.unwrap();
    let revoke = whip_board::Command::WorkRevoke { id: sub.id.clone() };
    let point = whip_board::point_of::command(&revoke).expect("keyed");
    let map = fabric.node(1).map().await.expect("map");
    let entry_cell = map.locate(point.expect("a point")).cell;
    let leader = (fabric.running().into_iter())
        .find(|&id| fabric.node(id).leads(entry_cell))
        .expect("a leader");
    let survivor = (fabric.running().into_iter())
        .find(|&id| id != leader)
        .expect("3 nodes");
    let caller = whip_board::access::Caller::Agent("alice".into());
    let request = whip_board::Request::by(caller, Some("revoke-sub".into()), revoke);
    let outcome = fabric.node(survivor).submit(request).await.expect("revoke");
    let named = whip_board::Outcome::WorkRevoked {
        removed: 1,
        agents: vec!["helper".into()],
    };
    assert_eq!(outcome, named);
    fabric.kill(leader).await;
    let helper = fabric
        .client_of(survivor)
        .with_identity("helper", token("helper"));
    let helper = std::sync::Arc::new(helper);
    token_refused(&helper, Duration::from_secs(20)).await;
    let node = fabric.node(survivor);
    whip_tests::wait_for(
        "helper to leave crew",
        Duration::from_secs(20),
        || async move {
            let team = whip_board::Query::Team {
                team: "crew".into(),
            };
            let helper = "helper".to_string();
            matches!(
                node.read(team).await,
                Ok(whip_board::QueryResult::Team(Some(view))) if !view.members.contains(&helper)
            )
        },
    )
    .await;
    crate::t95_handoff::outbox_drained(&fabric, survivor, entry_cell).await;
    fabric.shutdown().await;
}

/// Wait until `helper`'s calls are refused as revoked, at most `within`.
async fn token_refused(helper: &std::sync::Arc<CellClient>, within: Duration) {
    whip_tests::wait_for("helper's token to be refused", within, || {
        let helper = helper.clone();
        async move {
            let list = helper.work_list(pb::WorkListRequest::default()).await;
            matches!(list, Err(CellError::Unauthenticated(ref m)) if m.contains("revoked"))
        }
    })
    .await;
}

/// A move carries live entries to another cell, and their room goes with them: the source
/// keeps serving the rest of its ranges and never admits into room the moved entries still
/// take (found by `whip chaos`: 8 live under a ceiling of 6). Invariant only: however far
/// the quota rounds got, no listing ever passes the ceiling and no admitted entry is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ceiling_holds_while_ranges_move_entries_between_cells() {
    const SMALL: u64 = 12;
    let fabric = Fabric::start(3, 2).await;
    let operator = fabric.client_of(1);
    let set = pb::WorkLimitsRequest {
        fabric_max: Some(SMALL),
        ..Default::default()
    };
    assert_eq!(limits(&operator, set).await.fabric_max, SMALL);
    let mut clients = Vec::new();
    for node in 1..=3 {
        clients.push(agent(&fabric, node, &format!("mover-{node}")).await);
    }
    let node = fabric.node(1).clone();
    let map = node.map().await.expect("map");
    let (first, second) = (map.ranges[0], map.ranges[1]);
    let mid = first.start + (first.last - first.start) / 2 + 1;
    whip_fabric::admin::split_range(&node, first.start, mid)
        .await
        .expect("split");
    let mut admitted = Vec::new();
    // Fill, move the upper half of cell 1's range to cell 2, fill again (cell 1 still
    // serves the lower half), then move it back and fill once more.
    for (round, change) in [(mid, second.cell), (mid, first.cell)]
        .into_iter()
        .enumerate()
    {
        let (ids, _) = register_many(&clients, &format!("fill-{round}"), 40).await;
        admitted.extend(ids);
        let listed = live(&operator, None).await;
        assert!(
            listed.len() as u64 <= SMALL,
            "{} live before move {round}",
            listed.len()
        );
        whip_fabric::admin::move_range(&node, change.0, change.1)
            .await
            .expect("move");
        let (ids, _) = register_many(&clients, &format!("after-{round}"), 40).await;
        admitted.extend(ids);
        let listed = live(&operator, None).await;
        assert!(
            listed.len() as u64 <= SMALL,
            "{} live after move {round}",
            listed.len()
        );
        check_none_lost(&listed, &admitted, &[]);
    }
    assert!(!admitted.is_empty(), "nothing admitted");
    fabric.shutdown().await;
}
