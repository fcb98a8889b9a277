//! Task boards on a 3-node × 4-cell fabric: 32 workers (each its own agent, joined to the
//! team) on 3 nodes race for 10,000 tasks — every task completed exactly once; a worker
//! that dies holding a task has it redelivered and its late completion refused. Poison
//! tasks reach the dead-letter queue with a supervisor notice; only unclaimed tasks spill
//! to the cell tier, and only after `spill_after`. Identity comes from the token.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_tests::fabric::Fabric;

const TASKS: usize = 10_000;
const WORKERS: usize = 32;

/// A client of node `node` acting for `agent` (registered on first use).
async fn agent(fabric: &Fabric, node: u64, agent: &str) -> CellClient {
    let token = format!("{agent}-secret-token-0123456789-abcdefghij");
    let client = fabric.client_of(node);
    client
        .agent_register(pb::AgentRegisterRequest {
            agent: agent.into(),
            token: token.clone(),
            enroll: false,
        })
        .await
        .expect("register");
    client.with_identity(agent, token)
}

fn team(
    name: &str,
    reclaim_ms: u64,
    delivery_limit: u32,
    spill_after_ms: u64,
) -> pb::TeamCreateRequest {
    pb::TeamCreateRequest {
        team: name.into(),
        parent: None,
        settings: Some(pb::BoardSettings {
            reclaim_ms,
            delivery_limit,
            spill_after_ms,
            task_bytes_max: 0,
        }),
        idempotency_key: String::new(),
    }
}

async fn post(c: &CellClient, team: &str, body: String) -> String {
    let r = c
        .board_post(pb::BoardPostRequest {
            team: team.into(),
            body: body.into_bytes(),
            ..Default::default()
        })
        .await
        .expect("post");
    assert_eq!(r.code, Code::TaskPosted as i32, "{r:?}");
    r.task_id
}

async fn claim(c: &CellClient, team: &str, worker: &str) -> pb::BoardResponse {
    c.board_claim(pb::BoardClaimRequest {
        team: team.into(),
        worker: worker.into(),
        ..Default::default()
    })
    .await
    .expect("claim")
}

async fn complete(c: &CellClient, team: &str, task_id: &str, fence: u64) -> pb::BoardResponse {
    c.board_complete(pb::BoardTaskRequest {
        team: team.into(),
        task_id: task_id.into(),
        fence,
        result: b"{}".to_vec(),
        ..Default::default()
    })
    .await
    .expect("complete")
}

/// Claim and complete `swarm` tasks as `name` until the board stays empty for a while,
/// noting each completion in `done`.
async fn work_until_idle(c: CellClient, name: String, done: Arc<Mutex<Vec<(String, String)>>>) {
    let mut idle = 0;
    while idle < 100 {
        let r = claim(&c, "swarm", &name).await;
        if r.code != Code::TaskClaimed as i32 {
            idle += 1;
            tokio::time::sleep(Duration::from_millis(30)).await;
            continue;
        }
        idle = 0;
        let answer = complete(&c, "swarm", &r.task_id, r.fence).await;
        // A completion after the claim window (a loaded machine) is refused, as it should
        // be: the task is redelivered, and this worker moves on, as a user's worker would.
        // Exactly-once is judged on the completions.
        if lost_claim(&answer) {
            continue;
        }
        assert_eq!(answer.code, Code::TaskCompleted as i32, "{answer:?}");
        done.lock().unwrap().push((r.task_id.clone(), name.clone()));
    }
}

/// A refused completion whose claim was no longer this worker's (expired, or already
/// redelivered to another).
fn lost_claim(answer: &pb::BoardResponse) -> bool {
    answer.code == Code::BoardRefused as i32
        && ["claim_expired", "stale_fence", "not_claimed"].contains(&answer.refusal.as_str())
}

async fn stats(c: &CellClient, team: &str) -> pb::BoardStatsResponse {
    c.board_stats(pb::BoardStatsRequest { team: team.into() })
        .await
        .expect("stats")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_workers_complete_ten_thousand_tasks_exactly_once() {
    let fabric = Fabric::start(3, 4).await;
    let sup = agent(&fabric, 1, "supervisor").await;
    let created = sup
        .team_create(team("swarm", 1_500, 5, 0))
        .await
        .expect("create");
    assert_eq!(created.code, Code::TeamCreated as i32, "{created:?}");
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let name = format!("worker-{w}");
        // Only registered agents can be added to a team.
        let client = agent(&fabric, 1 + (w as u64 % 3), &name).await;
        let join = pb::TeamJoinRequest {
            team: "swarm".into(),
            agent: name.clone(),
            idempotency_key: String::new(),
        };
        assert_eq!(
            sup.team_join(join).await.unwrap().code,
            Code::TeamJoined as i32
        );
        workers.push((name.clone(), client));
    }
    // Posting, concurrently from the three nodes.
    let started = Instant::now();
    let mut posters = Vec::new();
    for p in 0..8usize {
        let c = agent(&fabric, 1 + (p as u64 % 3), "supervisor").await;
        posters.push(tokio::spawn(async move {
            for i in (p..TASKS).step_by(8) {
                post(&c, "swarm", format!("{{\"n\":{i}}}")).await;
            }
        }));
    }
    // A worker that claims a task and dies holding it.
    let (crash_name, crash) = workers.pop().expect("a worker");
    let held = loop {
        let r = claim(&crash, "swarm", &crash_name).await;
        if r.code == Code::TaskClaimed as i32 {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let done = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let mut running = Vec::new();
    for (name, c) in workers {
        running.push(tokio::spawn(work_until_idle(c, name, done.clone())));
    }
    for p in posters {
        p.await.expect("poster");
    }
    for w in running {
        w.await.expect("worker");
    }
    let elapsed = started.elapsed();
    let done = done.lock().unwrap().clone();
    let ids: BTreeSet<&String> = done.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), done.len(), "no task completed twice");
    assert_eq!(done.len(), TASKS, "every task completed");
    assert!(
        ids.contains(&held.task_id),
        "the dead worker's task was redelivered and completed"
    );
    let late = complete(&crash, "swarm", &held.task_id, held.fence).await;
    assert_eq!(
        late.code,
        Code::BoardRefused as i32,
        "the late completion is refused: {late:?}"
    );
    let per_worker: BTreeMap<&String, usize> =
        done.iter().fold(BTreeMap::new(), |mut m, (_, w)| {
            *m.entry(w).or_default() += 1;
            m
        });
    assert!(
        per_worker.len() > WORKERS / 2,
        "work spread over the workers: {per_worker:?}"
    );
    let s = stats(&sup, "swarm").await;
    assert_eq!(
        (s.ready, s.claimed, s.done, s.dead),
        (0, 0, TASKS as u64, 0),
        "{s:?}"
    );
    eprintln!(
        "{TASKS} tasks by {} workers in {elapsed:?}",
        per_worker.len()
    );
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_tasks_are_dead_lettered_and_only_unclaimed_tasks_spill() {
    let fabric = Fabric::start(3, 4).await;
    let sup = agent(&fabric, 2, "lead").await;
    sup.team_create(team("poison", 60_000, 2, 0))
        .await
        .expect("create");
    let id = post(&sup, "poison", "{\"bad\":true}".into()).await;
    for delivery in 1..=2 {
        let r = claim(&sup, "poison", "w").await;
        assert_eq!(r.task_id, id);
        let failed = sup
            .board_fail(pb::BoardTaskRequest {
                team: "poison".into(),
                task_id: id.clone(),
                fence: r.fence,
                error: format!("crashed on delivery {delivery}"),
                ..Default::default()
            })
            .await
            .expect("fail");
        let expected = if delivery == 2 {
            Code::TaskDeadLettered
        } else {
            Code::TaskReleased
        };
        assert_eq!(failed.code, expected as i32, "{failed:?}");
    }
    assert_eq!(
        claim(&sup, "poison", "w").await.code,
        Code::BoardEmpty as i32,
        "not handed out again"
    );
    let dlq = sup
        .board_dead_letters(pb::BoardListRequest {
            team: "poison".into(),
            state: String::new(),
            limit: 0,
        })
        .await
        .expect("dlq");
    assert_eq!(dlq.tasks.len(), 1);
    assert_eq!(dlq.tasks[0].failures.len(), 2, "failure metadata kept");
    let notices = sup
        .mailbox(pb::MailboxRequest {
            team: "poison".into(),
            after_seq: 0,
            limit: 0,
        })
        .await
        .expect("mailbox");
    assert_eq!(notices.messages.len(), 1);
    assert_eq!(notices.messages[0].kind, "dead_letter");
    assert_eq!(stats(&sup, "poison").await.dead, 1);
    let redriven = sup
        .board_redrive(pb::BoardTaskRequest {
            team: "poison".into(),
            task_id: id.clone(),
            ..Default::default()
        })
        .await
        .expect("redrive");
    assert_eq!(redriven.code, Code::TaskRedriven as i32);
    assert_eq!(
        claim(&sup, "poison", "w").await.task_id,
        id,
        "back on the board"
    );

    // Spill: one task held, one left alone; after spill_after only the unclaimed one moves.
    sup.team_create(team("spiller", 60_000, 5, 300))
        .await
        .expect("create");
    let first = post(&sup, "spiller", "{\"n\":1}".into()).await;
    let second = post(&sup, "spiller", "{\"n\":2}".into()).await;
    let held = claim(&sup, "spiller", "w").await;
    assert_eq!(held.task_id, first);
    let early = stats(&sup, "spiller").await;
    assert_eq!(
        (early.ready, early.cell_ready),
        (1, 0),
        "nothing spills before spill_after"
    );
    whip_tests::wait_for(
        "the unclaimed task to spill",
        Duration::from_secs(5),
        || {
            let sup = &sup;
            async move { stats(sup, "spiller").await.cell_ready == 1 }
        },
    )
    .await;
    let after = stats(&sup, "spiller").await;
    assert_eq!(
        (after.ready, after.claimed),
        (0, 1),
        "the claimed task stayed local"
    );
    let from_cell = claim(&sup, "spiller", "w2").await;
    assert_eq!(
        (from_cell.task_id.as_str(), from_cell.tier.as_str()),
        (second.as_str(), "cell")
    );
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn identity_comes_from_the_token_not_the_request() {
    let fabric = Fabric::start(3, 2).await;
    let owner = agent(&fabric, 1, "owner").await;
    owner
        .team_create(team("private", 60_000, 5, 0))
        .await
        .expect("create");
    let outsider = agent(&fabric, 2, "outsider").await;
    let refused = outsider
        .board_post(pb::BoardPostRequest {
            team: "private".into(),
            body: b"{}".to_vec(),
            ..Default::default()
        })
        .await
        .expect("answer");
    assert_eq!(
        (refused.code, refused.refusal.as_str()),
        (Code::BoardRefused as i32, "not_member")
    );
    // Claiming to be the owner without its token does not work.
    let forger = fabric
        .client_of(3)
        .with_identity("owner", "a-guessed-token-0000000000");
    let forged = forger
        .board_post(pb::BoardPostRequest {
            team: "private".into(),
            body: b"{}".to_vec(),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(
            forged,
            Err(CellError::Unauthenticated(ref m)) if m.contains("token does not match")
        ),
        "{forged:?}"
    );
    let anonymous = fabric
        .client_of(3)
        .board_stats(pb::BoardStatsRequest {
            team: "private".into(),
        })
        .await;
    assert!(anonymous.is_err(), "no identity, no access");
    let taken = fabric
        .client_of(2)
        .agent_register(pb::AgentRegisterRequest {
            agent: "owner".into(),
            token: "another-token-for-the-same-name-0123456789".into(),
            enroll: false,
        })
        .await;
    assert!(taken.is_err(), "an agent name cannot be registered twice");
    fabric.shutdown().await;
}
