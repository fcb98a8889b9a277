//! Follow-ups cut short by a crash: the node that answered the deciding request exits right
//! after the apply, before it carried out anything (`WHIP_TEST_CRASH_AT`, a hook of the
//! `test-hooks` feature), and each follow-up still finishes, once.
//!
//! - **Mid-dissolve.** A dissolved team's fabric queue (its spilled tasks) is purged by the
//!   deciding cell's outbox executor.
//! - **Mid-revoke.** A work revoke's follow-ups revoke the helper it named (its token stops
//!   working); a helper no revoke named still proves itself.
//! - **Mid-fabric-claim.** A claim whose fabric tier claimed a task before the node died is
//!   found again by its retry under the same key, through another node: the same task and
//!   fence, one claim in the queue.

use std::time::Duration;

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_tests::fabric::ProcessFabric;
use whip_tests::wait_for;

/// The exit status of the crash hook.
const CRASHED: i32 = 3;
/// How long a follow-up may take once its deciding node died: a new leader's election and
/// a few of the executor's looks.
const FINISH_BOUND: Duration = Duration::from_secs(30);

fn token(agent: &str) -> String {
    format!("{agent}-secret-token-0123456789-abcdefghij")
}

/// A client of node `id` alone, acting for `agent`.
fn on_node(fabric: &ProcessFabric, id: u64, agent: &str) -> CellClient {
    let addr = fabric.addrs[(id - 1) as usize].clone();
    (CellClient::connect(&[addr]).expect("client"))
        .with_retry_for(Duration::from_secs(10))
        .with_identity(agent, token(agent))
}

async fn restart(fabric: &mut ProcessFabric, id: u64) {
    fabric.spawn(id);
    let addr = fabric.addrs[(id - 1) as usize].clone();
    wait_for("the node to listen", Duration::from_secs(10), || {
        let addr = addr.clone();
        async move { tokio::net::TcpStream::connect(&addr).await.is_ok() }
    })
    .await;
}

/// Node `id` ended by the crash hook (not by anything else).
async fn crashed(fabric: &mut ProcessFabric, id: u64) {
    let status = fabric.exited(id, Duration::from_secs(10)).await;
    assert_eq!(status.and_then(|s| s.code()), Some(CRASHED), "{status:?}");
}

async fn create(c: &CellClient, team: &str) {
    let request = pb::TeamCreateRequest {
        team: team.into(),
        settings: Some(pb::BoardSettings {
            reclaim_ms: 60_000,
            delivery_limit: 5,
            spill_after_ms: 200,
            task_bytes_max: 0,
        }),
        ..Default::default()
    };
    let created = c.team_create(request).await.expect("create");
    assert_eq!(created.code, Code::TeamCreated as i32, "{created:?}");
}

/// Post `n` tasks to `team` and wait until all of them spilled to its fabric queue.
async fn spill(c: &CellClient, team: &str, n: u64) {
    let request = pb::BoardPostRequest {
        team: team.into(),
        bodies: (0..n)
            .map(|i| format!("{{\"n\":{i}}}").into_bytes())
            .collect(),
        ..Default::default()
    };
    assert_eq!(
        c.board_post(request).await.expect("post").code,
        Code::TaskPosted as i32
    );
    let queue = whip_board::fabric_queue_team(team);
    wait_for("the tasks to reach the fabric queue", FINISH_BOUND, || {
        let request = pb::BoardStatsRequest {
            team: queue.clone(),
        };
        async move { c.board_stats(request).await.is_ok_and(|s| s.ready == n) }
    })
    .await;
}

/// Whether `team` is gone, as its creator reads it (`None`: no answer).
async fn gone(c: &CellClient, team: &str) -> Option<bool> {
    let request = pb::BoardStatsRequest { team: team.into() };
    match c.board_stats(request).await {
        Ok(_) => Some(false),
        Err(CellError::NotFound(_)) => Some(true),
        Err(CellError::Refused {
            code: whip_board::RefusalCode::UnknownTeam,
            ..
        }) => Some(true),
        Err(_) => None,
    }
}

/// Whether `agent`'s token still proves it (`None`: no answer).
async fn accepted(fabric: &ProcessFabric, agent: &str) -> Option<bool> {
    match on_node(fabric, 2, agent)
        .work_list(pb::WorkListRequest::default())
        .await
    {
        Ok(_) => Some(true),
        Err(CellError::Unauthenticated(_)) => Some(false),
        Err(_) => None,
    }
}

/// `lead` enrolls `helper` and registers an entry owned by it: the entry's id.
async fn helper_entry(lead: &CellClient, helper: &str) -> String {
    let enroll = pb::AgentRegisterRequest {
        agent: helper.into(),
        token: token(helper),
        enroll: true,
    };
    lead.agent_register(enroll).await.expect("enroll");
    let register = |kind: &str, parent: &str, owner: &str| pb::WorkRegisterRequest {
        kind: kind.into(),
        parent: parent.into(),
        owner: owner.into(),
        ttl_ms: 600_000,
        idempotency_key: format!("{helper}-{kind}"),
        ..Default::default()
    };
    let root = lead
        .work_register(register("session", "", ""))
        .await
        .expect("root");
    let root = root.entry.expect("root entry").id;
    let entry = lead
        .work_register(register("subagent", &root, helper))
        .await;
    entry.expect("entry").entry.expect("helper entry").id
}

/// Node 1 crashes answering a dissolve: the executor on the deciding cell's (new) leader
/// still purges the team's fabric queue.
async fn mid_dissolve(fabric: &mut ProcessFabric, lead: &CellClient) {
    create(lead, "crashy").await;
    spill(lead, "crashy", 20).await;
    let dissolve = pb::TeamDissolveRequest {
        team: "crashy".into(),
        idempotency_key: "crash-dissolve".into(),
    };
    let cut = on_node(fabric, 1, "lead").team_dissolve(dissolve).await;
    assert!(cut.is_err(), "the node answered before its crash: {cut:?}");
    crashed(fabric, 1).await;
    let queue = whip_board::fabric_queue_team("crashy");
    for team in ["crashy", queue.as_str()] {
        wait_for("the team and its queue to go", FINISH_BOUND, || async {
            gone(lead, team).await == Some(true)
        })
        .await;
    }
}

/// Node 1 crashes answering a work revoke: the helper it named loses its identity, the
/// bystander keeps its own.
async fn mid_revoke(fabric: &mut ProcessFabric, doomed: String) {
    restart(fabric, 1).await;
    let revoke = pb::WorkRevokeRequest {
        id: doomed,
        idempotency_key: "crash-revoke".into(),
    };
    let cut = on_node(fabric, 1, "lead").work_revoke(revoke).await;
    assert!(cut.is_err(), "the node answered before its crash: {cut:?}");
    crashed(fabric, 1).await;
    wait_for(
        "the doomed helper's token to stop working",
        FINISH_BOUND,
        || async { accepted(fabric, "doomed").await == Some(false) },
    )
    .await;
    assert_eq!(accepted(fabric, "bystander").await, Some(true));
}

/// Node 1 crashes once a claim's fabric tier claimed a task: the retry through node 2,
/// under the same key, finds that claim, and the queue holds one claim, not two.
async fn mid_fabric_claim(fabric: &mut ProcessFabric, lead: &CellClient) {
    fabric.set_node_env(1, &[("WHIP_TEST_CRASH_AT", "fabric_claim")]);
    restart(fabric, 1).await;
    create(lead, "spilled").await;
    spill(lead, "spilled", 3).await;
    let claim = |key: &str| pb::BoardClaimRequest {
        team: "spilled".into(),
        worker: "w".into(),
        idempotency_key: key.into(),
        ..Default::default()
    };
    let cut = on_node(fabric, 1, "lead")
        .board_claim(claim("crash-claim"))
        .await;
    assert!(cut.is_err(), "the node answered before its crash: {cut:?}");
    crashed(fabric, 1).await;
    let first = lead.board_claim(claim("crash-claim")).await.expect("retry");
    assert_eq!(
        (first.code, first.tier.as_str()),
        (Code::TaskClaimed as i32, "fabric")
    );
    let again = lead
        .board_claim(claim("crash-claim"))
        .await
        .expect("retry again");
    assert_eq!((&again.task_id, again.fence), (&first.task_id, first.fence));
    let stats = pb::BoardStatsRequest {
        team: whip_board::fabric_queue_team("spilled"),
    };
    let queued = lead.board_stats(stats.clone()).await.expect("stats");
    assert_eq!(
        (queued.claimed, queued.ready),
        (1, 2),
        "one claim, made once"
    );
    let next = lead
        .board_claim(claim("another-claim"))
        .await
        .expect("next claim");
    assert_eq!(next.code, Code::TaskClaimed as i32);
    assert_ne!(next.task_id, first.task_id);
    let queued = lead.board_stats(stats).await.expect("stats");
    assert_eq!((queued.claimed, queued.ready), (2, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follow_ups_cut_short_by_a_crash_finish_once() {
    let crash_at = [("WHIP_TEST_CRASH_AT", "follow_up")];
    let mut fabric = ProcessFabric::start_with_node_env(3, 1, &crash_at).await;
    fabric.init(2);
    let operator = CellClient::connect(&fabric.addrs[1..2]).expect("operator");
    let register = pb::AgentRegisterRequest {
        agent: "lead".into(),
        token: token("lead"),
        enroll: false,
    };
    operator
        .agent_register(register)
        .await
        .expect("register lead");
    let lead = on_node(&fabric, 2, "lead");
    let doomed = helper_entry(&lead, "doomed").await;
    helper_entry(&lead, "bystander").await;
    mid_dissolve(&mut fabric, &lead).await;
    mid_revoke(&mut fabric, doomed).await;
    mid_fabric_claim(&mut fabric, &lead).await;
}
