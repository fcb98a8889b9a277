//! Spill up to the fabric tier in signed, hash-chained envelopes: a team's unclaimed tasks
//! go local → cell after `spill_after`, then cell → the team's fabric queue (owned by
//! whichever cell holds the queue's name) after as long again; a held task never spills.
//! Across stops of the sending and the receiving cells' leaders, 10,000 tasks each arrive
//! exactly once.

use std::collections::BTreeMap;
use std::time::Duration;

use whip_board::route;
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_tests::fabric::Fabric;
use whip_tests::wait_for;

async fn lead(fabric: &Fabric, node: u64) -> CellClient {
    let token = "lead-secret-token-0123456789-abcdefghij".to_string();
    let client = fabric.client_of(node);
    client
        .agent_register(pb::AgentRegisterRequest {
            agent: "lead".into(),
            token: token.clone(),
            enroll: false,
        })
        .await
        .expect("register");
    client.with_identity("lead", token)
}

async fn create(c: &CellClient, team: &str, spill_after_ms: u64) {
    let request = pb::TeamCreateRequest {
        team: team.into(),
        parent: None,
        settings: Some(pb::BoardSettings {
            reclaim_ms: 60_000,
            delivery_limit: 5,
            spill_after_ms,
            task_bytes_max: 0,
        }),
        idempotency_key: String::new(),
    };
    assert_eq!(
        c.team_create(request).await.unwrap().code,
        Code::TeamCreated as i32
    );
}

/// Post `n` tasks (`{"n": i}`) in batches of 100, each batch one write.
async fn post_many(c: &CellClient, team: &str, n: usize) {
    let batches: Vec<Vec<usize>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(100)
        .map(<[usize]>::to_vec)
        .collect();
    let calls = batches.into_iter().map(|batch| {
        let request = pb::BoardPostRequest {
            team: team.into(),
            bodies: batch
                .iter()
                .map(|i| format!("{{\"n\":{i}}}").into_bytes())
                .collect(),
            ..Default::default()
        };
        let expected = batch.len();
        async move {
            let r = c.board_post(request).await.expect("post");
            assert_eq!(
                (r.code, r.task_ids.len()),
                (Code::TaskPosted as i32, expected)
            );
        }
    });
    futures::future::join_all(calls).await;
}

async fn stats(c: &CellClient, team: &str) -> pb::BoardStatsResponse {
    c.board_stats(pb::BoardStatsRequest { team: team.into() })
        .await
        .expect("stats")
}

fn n_of(task: &pb::Task) -> u64 {
    let body: serde_json::Value = serde_json::from_slice(&task.body).expect("json body");
    body["n"].as_u64().expect("n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unclaimed_tasks_spill_to_the_fabric_queue_and_are_claimed_there() {
    let fabric = Fabric::start(3, 4).await;
    let c = lead(&fabric, 1).await;
    create(&c, "overflow", 200).await;
    post_many(&c, "overflow", 40).await;
    let claim = |worker: &str| pb::BoardClaimRequest {
        team: "overflow".into(),
        worker: worker.into(),
        ..Default::default()
    };
    let held = c.board_claim(claim("keeper")).await.expect("claim");
    assert_eq!(
        (held.code, held.tier.as_str()),
        (Code::TaskClaimed as i32, "local")
    );
    let queue = whip_board::fabric_queue_team("overflow");
    wait_for(
        "39 tasks to reach the fabric queue",
        Duration::from_secs(20),
        || {
            let c = &c;
            let queue = queue.clone();
            async move {
                c.board_stats(pb::BoardStatsRequest { team: queue })
                    .await
                    .is_ok_and(|s| s.ready == 39)
            }
        },
    )
    .await;
    let s = stats(&c, "overflow").await;
    assert_eq!(
        (s.ready, s.claimed, s.cell_ready),
        (0, 1, 0),
        "only the held task stayed"
    );
    assert_eq!(stats(&c, &queue).await.tier, "fabric");
    let map = fabric.node(1).map().await.expect("map");
    let team_cell = map.locate(route::team_point("overflow")).cell;
    let queue_cell = map.locate(route::team_point(&queue)).cell;
    eprintln!("team on cell {team_cell}, fabric queue on cell {queue_cell}");
    // Workers of the team find them at the fabric tier once local and cell tiers are empty,
    // also an agent that joined the team after the handoff (the queue admits it then).
    let newcomer = fabric.client_of(3);
    let token = "newcomer-secret-token-0123456789-abcdefghij";
    register(&newcomer, "newcomer", token).await;
    let newcomer = newcomer.with_identity("newcomer", token);
    let refused = newcomer.board_claim(claim("n")).await.expect("answer");
    assert_eq!(refused.code, Code::BoardRefused as i32, "not a member yet");
    let join = pb::TeamJoinRequest {
        team: "overflow".into(),
        agent: "newcomer".into(),
        idempotency_key: String::new(),
    };
    c.team_join(join).await.expect("join");
    let lead2 = fabric
        .client_of(2)
        .with_identity("lead", "lead-secret-token-0123456789-abcdefghij");
    let mut seen = BTreeMap::new();
    for i in 0..39 {
        let worker = if i == 0 { &newcomer } else { &lead2 };
        let r = worker.board_claim(claim("w")).await.expect("claim");
        assert_eq!(
            (r.code, r.tier.as_str()),
            (Code::TaskClaimed as i32, "fabric"),
            "{r:?}"
        );
        let task = r.task.expect("task");
        *seen.entry(n_of(&task)).or_insert(0) += 1;
        let done = pb::BoardTaskRequest {
            team: "overflow".into(),
            task_id: task.id.clone(),
            fence: r.fence,
            result: b"{}".to_vec(),
            ..Default::default()
        };
        assert_eq!(
            c.board_complete(done).await.unwrap().code,
            Code::TaskCompleted as i32
        );
    }
    assert_eq!(seen.len(), 39);
    assert!(seen.values().all(|&k| k == 1), "each task once");
    assert!(
        !seen.contains_key(&n_of(held.task.as_ref().unwrap())),
        "the held task never spilled"
    );
    let empty = c.board_claim(claim("w")).await.unwrap();
    assert_eq!(empty.code, Code::BoardEmpty as i32);
    let status = fabric.status(3).await;
    assert!(status.alarms.is_empty(), "{:?}", status.alarms);
    // Dissolving the team garbage-collects its fabric queue too (the done tasks there).
    let queued = stats(&c, &queue).await;
    assert_eq!(queued.done, 39);
    loop {
        let dissolve = pb::TeamDissolveRequest {
            team: "overflow".into(),
            idempotency_key: String::new(),
        };
        let r = c.team_dissolve(dissolve).await.expect("dissolve");
        assert_eq!(r.code, Code::TeamDissolved as i32, "{r:?}");
        if r.done {
            break;
        }
    }
    let gone = c.board_stats(pb::BoardStatsRequest { team: queue }).await;
    assert!(
        gone.is_err(),
        "the fabric queue went with the team: {gone:?}"
    );
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handoffs_arrive_exactly_once_across_leader_stops_on_both_sides() {
    const TASKS: usize = 10_000;
    let mut fabric = Fabric::start(3, 4).await;
    let c = lead(&fabric, 1).await;
    // A team whose fabric queue lives on another cell than the team itself.
    let map = fabric.node(1).map().await.expect("map");
    let team = (0..)
        .map(|i| format!("crew-{i}"))
        .find(|t| {
            let q = whip_board::fabric_queue_team(t);
            map.locate(route::team_point(t)).cell != map.locate(route::team_point(&q)).cell
        })
        .expect("a team whose queue is elsewhere");
    let queue = whip_board::fabric_queue_team(&team);
    let (source, target) = (
        map.locate(route::team_point(&team)).cell,
        map.locate(route::team_point(&queue)).cell,
    );
    create(&c, &team, 100).await;
    post_many(&c, &team, TASKS).await;
    // Stop the source cell's leader while handoffs run, bring it back, then the target's.
    for cell in [source, target] {
        wait_for("handoffs under way", Duration::from_secs(20), || {
            let c = &c;
            let queue = queue.clone();
            async move {
                c.board_stats(pb::BoardStatsRequest { team: queue })
                    .await
                    .is_ok_and(|s| s.ready > 0)
            }
        })
        .await;
        fabric
            .bounce_leader(cell, Duration::from_millis(1_500))
            .await;
    }
    let c = lead(&fabric, 1).await;
    // Handoffs are batched (one write per channel and round on each side); a loaded CI
    // machine gets plenty of time.
    wait_for(
        "every task at the fabric tier",
        Duration::from_secs(120),
        || {
            let c = &c;
            let queue = queue.clone();
            async move {
                c.board_stats(pb::BoardStatsRequest { team: queue })
                    .await
                    .is_ok_and(|s| s.ready >= TASKS as u64)
            }
        },
    )
    .await;
    let listed = c
        .board_list(pb::BoardListRequest {
            team: queue.clone(),
            state: String::new(),
            limit: 0,
        })
        .await
        .expect("list");
    let mut counts = BTreeMap::new();
    for task in &listed.tasks {
        assert_eq!(task.tier, "fabric");
        *counts.entry(n_of(task)).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), TASKS, "every task arrived");
    assert!(counts.values().all(|&k| k == 1), "no task arrived twice");
    let s = stats(&c, &team).await;
    assert_eq!((s.ready, s.claimed), (0, 0));
    let status = fabric.status(1).await;
    assert!(status.alarms.is_empty(), "{:?}", status.alarms);
    eprintln!("{TASKS} handoffs from cell {source} to cell {target}");
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_envelopes_are_refused_each_with_its_own_reason() {
    use whip_fabric::envelope::{Envelope, EnvelopeKind};
    use whip_fabric::identity::CellIdentity;
    use whip_proto::v1::node_client::NodeClient;

    let fabric = Fabric::start(3, 2).await;
    let node = fabric.node(1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let real = node
        .identity(1)
        .expect("readable")
        .expect("cell 1 has a key");
    let stranger = CellIdentity::generate().expect("key");
    let seal = |id: &CellIdentity, sent_at: u64, hops: u32, payload: Vec<u8>| {
        Envelope::seal(
            id,
            1,
            2,
            1,
            [0; 32],
            sent_at,
            hops,
            EnvelopeKind::TaskSpill,
            payload,
        )
    };
    let mut tampered = seal(&real, now, 0, b"payload".to_vec());
    tampered.payload = b"PAYLOAD".to_vec();
    let cases = [
        (
            seal(&stranger, now, 0, b"x".to_vec()).to_bytes(),
            "bad_signature",
        ),
        (tampered.to_bytes(), "bad_signature"),
        (
            seal(&real, now, 9, b"x".to_vec()).to_bytes(),
            "too_many_hops",
        ),
        (
            seal(&real, now + 120_000, 0, b"x".to_vec()).to_bytes(),
            "clock_skew",
        ),
        (
            seal(&real, now - 2 * 86_400_000, 0, b"x".to_vec()).to_bytes(),
            "clock_skew",
        ),
        (
            seal(&real, now, 0, vec![0; 2 << 20]).to_bytes(),
            "payload_too_large",
        ),
        (vec![1, 2, 3], "malformed"),
        (
            seal(&real, now, 0, b"not a task".to_vec()).to_bytes(),
            "malformed",
        ),
    ];
    let mut client = NodeClient::new(node.peers().channel(&fabric.addrs[&2].to_string()))
        .max_encoding_message_size(8 << 20);
    for (bytes, verdict) in cases {
        let answer = client
            .deliver(pb::DeliverRequest {
                envelope: bytes,
                ..Default::default()
            })
            .await
            .expect("an answer")
            .into_inner();
        assert_eq!(answer.verdict, verdict, "{}", answer.message);
    }
    let status = fabric.status(2).await;
    assert!(
        status.alarms.is_empty(),
        "refused envelopes change nothing: {:?}",
        status.alarms
    );
    fabric.shutdown().await;
}

/// A spill of task `crew-1` with `body`, sealed as sequence 1 of the channel 1 → 2 by
/// cell 1's own key (what a compromised holder of that key could send).
fn sealed_spill(fabric: &Fabric, now: u64, body: &str) -> Vec<u8> {
    use whip_board::types::{BoardSettings, TaskState, TaskView, Tier};
    use whip_fabric::envelope::{Envelope, EnvelopeKind};
    let identity = fabric
        .node(1)
        .identity(1)
        .expect("readable")
        .expect("cell 1 has a key");
    let task = TaskView {
        id: "crew-1".into(),
        team: "crew".into(),
        tier: Tier::Cell,
        state: TaskState::Ready,
        body: body.as_bytes().to_vec(),
        delivery_count: 0,
        worker: None,
        fence: 0,
        deadline_ms: 0,
        posted_ms: now,
        failures: Vec::new(),
        result: Vec::new(),
        spill_after_ms: 100,
    };
    let payload = whip_fabric::SpillPayload {
        queue: "crew".into(),
        task,
        settings: BoardSettings::default(),
        admitted: vec!["lead".into()],
    };
    let payload = postcard::to_stdvec(&payload).unwrap();
    Envelope::seal(
        &identity,
        1,
        2,
        1,
        [0; 32],
        now,
        0,
        EnvelopeKind::TaskSpill,
        payload,
    )
    .to_bytes()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Deliver `bytes` to node 3 as node 1 would; the verdict.
async fn deliver(fabric: &Fabric, bytes: Vec<u8>) -> String {
    use whip_proto::v1::node_client::NodeClient;
    let node = fabric.node(1);
    let mut client = NodeClient::new(node.peers().channel(&fabric.addrs[&3].to_string()));
    client
        .deliver(pb::DeliverRequest {
            envelope: bytes,
            ..Default::default()
        })
        .await
        .expect("an answer")
        .into_inner()
        .verdict
}

#[tokio::test]
async fn a_fork_is_refused_and_raises_an_alarm_in_fabric_status() {
    let fabric = Fabric::start(3, 2).await;
    let now = now_ms();
    assert_eq!(
        deliver(&fabric, sealed_spill(&fabric, now, "{\"n\":1}")).await,
        "accepted"
    );
    assert_eq!(
        deliver(&fabric, sealed_spill(&fabric, now, "{\"n\":1}")).await,
        "duplicate",
        "a replay is acknowledged again"
    );
    assert_eq!(
        deliver(&fabric, sealed_spill(&fabric, now, "{\"n\":2}")).await,
        "fork"
    );
    let status = fabric.status(2).await;
    let alarms = status.alarms.join("\n");
    assert!(
        alarms.contains("fork on the channel from cell 1"),
        "{alarms}"
    );
    fabric.shutdown().await;
}

#[tokio::test]
async fn the_operator_resets_a_poisoned_channel_and_the_sender_gets_through() {
    use whip_proto::v1::node_client::NodeClient;
    let fabric = Fabric::start(3, 2).await;
    let now = now_ms();
    // A forged sequence 1 lands first; the sender's own sequence 1 is a fork from then on,
    // on every round, and the alarm counts up instead of filling the list.
    assert_eq!(
        deliver(&fabric, sealed_spill(&fabric, now, "forged")).await,
        "accepted"
    );
    for _ in 0..3 {
        assert_eq!(
            deliver(&fabric, sealed_spill(&fabric, now, "real")).await,
            "fork"
        );
    }
    let alarms = fabric.status(2).await.alarms.join("\n");
    assert!(alarms.contains("(raised 3 times)"), "{alarms}");
    // The operator's repair, through any node: cell 2 takes cell 1's view of the channel.
    let mut operator =
        NodeClient::new(whip_cell::network::endpoint(&fabric.addrs[&2].to_string()).connect_lazy());
    let reset = operator
        .channel_reset(pb::ChannelResetRequest {
            from_cell: 1,
            to_cell: 2,
        })
        .await
        .expect("the operator may reset")
        .into_inner();
    assert_eq!((reset.before_seq, reset.seq), (1, 0), "{reset:?}");
    // The reset clears the fork's alarm and is an alarm itself until the channel carries
    // an envelope again.
    let alarms = fabric.status(2).await.alarms.join("\n");
    assert!(alarms.contains("reset by the operator"), "{alarms}");
    assert!(!alarms.contains("fork on the channel"), "{alarms}");
    assert_eq!(
        deliver(&fabric, sealed_spill(&fabric, now, "real")).await,
        "accepted"
    );
    let alarms = fabric.status(2).await.alarms;
    assert!(alarms.is_empty(), "every cause is gone: {alarms:?}");
    // Resetting is the operator's: a connection without a certificate is refused.
    let anonymous = whip_cell::tls::Transport::tls(whip_cell::tls::Credentials {
        ca: whip_cell::tls::Authority::load(&whip_cell::tls::config_dir())
            .unwrap()
            .unwrap()
            .cert_pem()
            .to_string(),
        identity: None,
    });
    let endpoint = whip_cell::network::endpoint_with(&fabric.addrs[&2].to_string(), &anonymous);
    let refused = NodeClient::new(endpoint.connect_lazy())
        .channel_reset(pb::ChannelResetRequest {
            from_cell: 1,
            to_cell: 2,
        })
        .await
        .expect_err("no certificate");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cell_without_a_signing_key_records_the_failed_handoff() {
    let fabric = Fabric::start(3, 2).await;
    let c = lead(&fabric, 1).await;
    create(&c, "keyless", 100).await;
    let map = fabric.node(1).map().await.expect("map");
    let cell = map.locate(route::team_point("keyless")).cell;
    for node in [1u64, 2, 3] {
        let key = fabric
            .dir
            .path()
            .join(format!("node-{node}/cells/{cell}/identity.key"));
        std::fs::remove_file(&key).expect("remove the key file");
    }
    post_many(&c, "keyless", 1).await;
    wait_for(
        "the failed handoff's alarm",
        Duration::from_secs(10),
        || {
            let fabric = &fabric;
            async move {
                fabric.status(1).await.alarms.iter().any(|a| {
                    a.contains("handoff of task keyless-1 failed") && a.contains("no signing key")
                })
            }
        },
    )
    .await;
    let s = stats(&c, "keyless").await;
    assert_eq!(
        s.cell_ready, 1,
        "the task stays at the cell tier, not skipped"
    );
    fabric.shutdown().await;
}

/// Register `agent` with `token` through `client`.
async fn register(client: &whip_cell::CellClient, agent: &str, token: &str) {
    let request = pb::AgentRegisterRequest {
        agent: agent.into(),
        token: token.into(),
        enroll: false,
    };
    client.agent_register(request).await.expect("register");
}

/// The node leading `cell` now.
fn leader_of(fabric: &Fabric, cell: u64) -> u64 {
    (fabric.running().into_iter())
        .find(|&id| fabric.node(id).leads(cell))
        .expect("the cell has a leader")
}

/// Wait until `cell`'s follow-up outbox is empty, read through node `via`.
pub(crate) async fn outbox_drained(fabric: &Fabric, via: u64, cell: u64) {
    wait_for(
        "the follow-up outbox to drain",
        Duration::from_secs(20),
        || {
            let node = fabric.node(via);
            async move {
                let query = whip_board::Query::FollowUps {
                    after_seq: 0,
                    limit: 10,
                };
                matches!(
                    node.read_cell(None, cell, query).await,
                    Ok(whip_board::QueryResult::FollowUps(pending)) if pending.is_empty()
                )
            }
        },
    )
    .await;
}

/// A dissolve applied through a node's router alone, as if the server that answered it died
/// right after the apply: nothing carries its purge out inline. The purge waits in the team
/// cell's outbox; that cell's leader is killed, and the executor of whichever node leads it
/// next purges the fabric queue and acknowledges the follow-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dissolve_whose_server_died_has_its_fabric_queue_purged_from_the_outbox() {
    use whip_cell::service::Dispatch;
    let mut fabric = Fabric::start(3, 4).await;
    let c = lead(&fabric, 1).await;
    create(&c, "orphan", 100).await;
    post_many(&c, "orphan", 30).await;
    let queue = whip_board::fabric_queue_team("orphan");
    wait_for(
        "30 tasks in the fabric queue",
        Duration::from_secs(20),
        || {
            let (c, queue) = (&c, queue.clone());
            async move {
                let asked = pb::BoardStatsRequest { team: queue };
                c.board_stats(asked).await.is_ok_and(|s| s.ready == 30)
            }
        },
    )
    .await;
    let map = fabric.node(1).map().await.expect("map");
    let team_cell = map.locate(route::team_point("orphan")).cell;
    let leader = leader_of(&fabric, team_cell);
    let survivor = (fabric.running().into_iter())
        .find(|&id| id != leader)
        .expect("3 nodes");
    let dissolve = whip_board::Request::by(
        whip_board::access::Caller::Agent("lead".into()),
        Some("dissolve-orphan".into()),
        whip_board::Command::TeamDissolve {
            team: "orphan".into(),
            caller: "lead".into(),
        },
    );
    let outcome = (fabric.node(survivor).submit(dissolve).await).expect("dissolve");
    assert!(
        matches!(
            outcome,
            whip_board::Outcome::TeamDissolved { done: true, .. }
        ),
        "{outcome:?}"
    );
    fabric.kill(leader).await;
    let c = fabric
        .client_of(survivor)
        .with_identity("lead", "lead-secret-token-0123456789-abcdefghij");
    wait_for(
        "the fabric queue to be purged",
        Duration::from_secs(20),
        || {
            let (c, queue) = (&c, queue.clone());
            async move {
                let asked = pb::BoardStatsRequest { team: queue };
                c.board_stats(asked).await.is_err()
            }
        },
    )
    .await;
    outbox_drained(&fabric, survivor, team_cell).await;
    fabric.shutdown().await;
}

/// A completion of `task_id` under `fence` for a prefetching claim.
fn completion(task_id: &str, fence: u64) -> pb::BoardCompletion {
    pb::BoardCompletion {
        task_id: task_id.into(),
        fence,
        result: b"{}".to_vec(),
    }
}

/// A prefetch on team `alone`, whose own tiers are empty, after the worker completed the
/// fabric-tier claims it `held`: the fabric queue's claims.
async fn fabric_prefetch(c: &CellClient, held: Vec<pb::BoardCompletion>) -> Vec<pb::Task> {
    // A prefetch finds the team's own tiers empty and goes on to the fabric queue. Its
    // completions are made on the team's cell, so a fabric-tier claim is not one of them
    // (refused, nothing claimed): those complete one by one, routed by their ids.
    let prefetch = |completes| pb::BoardClaimRequest {
        team: "alone".into(),
        worker: "w".into(),
        max: 16,
        completes,
        ..Default::default()
    };
    let refused = c
        .board_claim(prefetch(held.clone()))
        .await
        .expect("prefetch");
    assert_eq!(refused.refusal, "unknown_task", "{refused:?}");
    for done in held {
        let request = pb::BoardTaskRequest {
            team: "alone".into(),
            task_id: done.task_id,
            fence: done.fence,
            ..Default::default()
        };
        let r = c.board_complete(request).await.expect("complete");
        assert_eq!(r.code, Code::TaskCompleted as i32, "{r:?}");
    }
    let r = c.board_claim(prefetch(Vec::new())).await.expect("prefetch");
    assert_eq!(
        (r.code, r.claims.len()),
        (Code::TasksClaimed as i32, 6),
        "{r:?}"
    );
    r.claims
}

/// With one data cell, every team's fabric queue lives on the team's own cell: its tasks
/// spill there in one apply each (no channel runs from a cell to itself), once, and are
/// claimed at the fabric tier.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_spill_to_a_fabric_queue_on_their_own_cell() {
    let fabric = Fabric::start(3, 1).await;
    let c = lead(&fabric, 1).await;
    create(&c, "alone", 100).await;
    post_many(&c, "alone", 10).await;
    let queue = whip_board::fabric_queue_team("alone");
    let map = fabric.node(1).map().await.expect("map");
    let cells = [route::team_point("alone"), route::team_point(&queue)].map(|p| map.locate(p).cell);
    assert_eq!(cells[0], cells[1], "one data cell holds both");
    wait_for(
        "10 tasks to reach the fabric queue",
        Duration::from_secs(20),
        || {
            let (c, queue) = (&c, queue.clone());
            async move {
                let request = pb::BoardStatsRequest { team: queue };
                c.board_stats(request).await.is_ok_and(|s| s.ready == 10)
            }
        },
    )
    .await;
    let s = stats(&c, "alone").await;
    assert_eq!(
        (s.ready, s.cell_ready),
        (0, 0),
        "nothing left below the fabric tier"
    );
    let mut seen = BTreeMap::new();
    let mut held = Vec::new();
    for _ in 0..4 {
        let claim = pb::BoardClaimRequest {
            team: "alone".into(),
            worker: "w".into(),
            ..Default::default()
        };
        let r = c.board_claim(claim).await.expect("claim");
        assert_eq!(
            (r.code, r.tier.as_str()),
            (Code::TaskClaimed as i32, "fabric"),
            "{r:?}"
        );
        held.push(completion(&r.task_id, r.fence));
        *seen.entry(n_of(&r.task.expect("task"))).or_insert(0) += 1;
    }
    for task in &fabric_prefetch(&c, held).await {
        assert_eq!(task.tier, "fabric", "{task:?}");
        *seen.entry(n_of(task)).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 10);
    assert!(seen.values().all(|&k| k == 1), "each task once");
    let status = fabric.status(2).await;
    assert!(status.alarms.is_empty(), "{:?}", status.alarms);
    fabric.shutdown().await;
}
