//! A team's state as a non-member reaches for it (issue 28, class 4): alice's team `web`
//! holds a lock (a lease owned by `team/web`), a budget counter and a notes ledger.
//! mallory, registered but in no team, lists the team's locks and counters (aimed at the
//! team and in a listing of everything), reads its ledger and frees every slot of the
//! lock's holder with one `LeaseReleaseAll`. Each aimed read is refused `not_member`, the
//! wide listings leave the team's rows out, the release frees nothing, and alice's lock is
//! still held afterwards.

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use crate::{registered, still_serving, target};

fn team_resource(name: &str, key: &str) -> Option<pb::ResourceId> {
    Some(pb::ResourceId {
        owner: "team/web".into(),
        name: name.into(),
        key: key.into(),
    })
}

/// alice's team with a held lock, a spent budget and a note.
async fn alices_team(alice: &CellClient) {
    let team = pb::TeamCreateRequest {
        team: "web".into(),
        ..Default::default()
    };
    alice.team_create(team).await.unwrap();
    let lock = pb::LeaseAcquireRequest {
        lease: team_resource("locks", "deploy"),
        holder: "alice-h".into(),
        slots: 1,
        ttl_ms: 600_000,
        ..Default::default()
    };
    let held = alice.lease_acquire(lock).await.unwrap();
    assert_eq!(held.code, pb::OutcomeCode::LeaseHeld as i32, "{held:?}");
    let spend = pb::CounterConsumeRequest {
        counter: team_resource("budget", ""),
        amount: 3,
        cap: 100,
        reset: pb::Reset::Daily as i32,
        timezone: "UTC".into(),
        ..Default::default()
    };
    alice.counter_consume(spend).await.unwrap();
    let note = pb::LedgerAppendRequest {
        ledger: team_resource("notes", "p"),
        entry: b"secret plan".to_vec(),
        appended_by: "alice".into(),
        retain_ms: 3_600_000,
        ..Default::default()
    };
    alice.ledger_append(note).await.unwrap();
}

fn not_member<T: std::fmt::Debug>(answer: Result<T, CellError>) {
    assert!(
        crate::is_not_member(&answer),
        "expected not_member, got {answer:?}"
    );
}

async fn alices_lock_holders(alice: &CellClient) -> Vec<String> {
    let list = pb::LeaseListRequest {
        prefix: "team/web".into(),
        limit: 0,
    };
    let leases = alice.lease_list(list).await.unwrap().leases;
    leases
        .iter()
        .flat_map(|l| l.holders.iter().map(|h| h.holder.clone()))
        .collect()
}

#[tokio::test]
async fn a_non_member_neither_reads_nor_frees_a_teams_locks_counters_or_ledgers() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (alice, _) = registered(&dev, &operator, "alice", false).await;
    let (mallory, _) = registered(&dev, &operator, "mallory", false).await;
    alices_team(&alice).await;
    assert_eq!(alices_lock_holders(&alice).await, ["alice-h"]);

    let aimed = |prefix: &str| pb::LeaseListRequest {
        prefix: prefix.into(),
        limit: 0,
    };
    not_member(mallory.lease_list(aimed("team/web")).await);
    not_member(mallory.lease_list(aimed("team/web/locks")).await);
    let counters = pb::CounterListRequest {
        prefix: "team/web".into(),
        limit: 0,
    };
    not_member(mallory.counter_list(counters).await);
    let ledger = pb::LedgerListRequest {
        owner: "team/web".into(),
        name: "notes".into(),
        ..Default::default()
    };
    not_member(mallory.ledger_list(ledger).await);
    // A listing of everything leaves the team's rows out.
    let all = mallory.lease_list(aimed("")).await.unwrap().leases;
    let owners: Vec<_> = all
        .iter()
        .filter_map(|l| l.lease.clone())
        .map(|l| l.owner)
        .collect();
    assert!(!owners.iter().any(|o| o.starts_with("team/")), "{owners:?}");
    let all = pb::CounterListRequest::default();
    let counters = mallory.counter_list(all).await.unwrap().counters;
    assert!(counters.is_empty(), "{counters:?}");
    // Releasing every slot of the lock's holder frees nothing of the team's.
    let release = pb::LeaseReleaseAllRequest {
        holder: "alice-h".into(),
        idempotency_key: String::new(),
    };
    let freed = mallory.lease_release_all(release).await.unwrap();
    assert_eq!(freed.code, pb::OutcomeCode::LeaseReleasedAll as i32);
    assert_eq!(
        alices_lock_holders(&alice).await,
        ["alice-h"],
        "the lock is held"
    );
    // The operator, nobody's member, frees nothing of it either.
    let release = pb::LeaseReleaseAllRequest {
        holder: "alice-h".into(),
        idempotency_key: String::new(),
    };
    operator.lease_release_all(release).await.unwrap();
    assert_eq!(
        alices_lock_holders(&alice).await,
        ["alice-h"],
        "the lock is held"
    );
    still_serving(&operator).await;
}

/// A member cannot add members (issue 28: a worker stuffed a workers' vote with agents it
/// enrolled): only the supervisor does, and the team's members read back unchanged.
#[tokio::test]
async fn a_member_cannot_add_members() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (alice, _) = registered(&dev, &operator, "alice", false).await;
    let (worker, _) = registered(&dev, &operator, "worker", false).await;
    let (sybil, _) = registered(&dev, &worker, "sybil", true).await;
    alices_team(&alice).await;
    let join = |caller_adds: &str| pb::TeamJoinRequest {
        team: "web".into(),
        agent: caller_adds.into(),
        ..Default::default()
    };
    let joined = alice.team_join(join("worker")).await.unwrap();
    assert_eq!(
        joined.code,
        pb::OutcomeCode::TeamJoined as i32,
        "{joined:?}"
    );
    let stuffed = worker.team_join(join("sybil")).await.unwrap();
    assert_eq!(stuffed.refusal, "not_supervisor", "{stuffed:?}");
    // sybil is no member: the board stays closed to it.
    let stats = pb::BoardStatsRequest { team: "web".into() };
    let read = sybil.board_stats(stats).await;
    assert!(crate::is_not_member(&read), "{read:?}");
    still_serving(&operator).await;
}

/// Wait until the leader's tick spilled the task `get` names (a condition, not a time).
pub(crate) async fn spilled(member: &CellClient, get: pb::BoardGetRequest) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let tasks = member.board_get(get.clone()).await.unwrap().tasks;
        if tasks.first().is_some_and(|t| t.tier == "cell") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never spilled: {tasks:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A spilled task stays its origin team's (issue 28, class 4): alice's team `ops` spills an
/// unclaimed task to the cell tier; mallory, in a team of her own on the same cell, neither
/// claims it (oldest-first or by its id) nor reads it, and alice still claims it there.
#[tokio::test]
async fn a_spilled_task_is_seen_and_claimed_only_by_its_origins_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (alice, _) = registered(&dev, &operator, "alice", false).await;
    let (mallory, _) = registered(&dev, &operator, "mallory", false).await;
    let spilling = pb::BoardSettings {
        spill_after_ms: 100,
        ..Default::default()
    };
    for (who, team) in [(&alice, "ops"), (&mallory, "mal")] {
        let create = pb::TeamCreateRequest {
            team: team.into(),
            settings: Some(spilling),
            ..Default::default()
        };
        who.team_create(create).await.unwrap();
    }
    let post = pb::BoardPostRequest {
        team: "ops".into(),
        body: b"rotate the keys".to_vec(),
        ..Default::default()
    };
    let task_id = alice.board_post(post).await.unwrap().task_id;
    let get = |team: &str| pb::BoardGetRequest {
        team: team.into(),
        task_id: task_id.clone(),
    };
    spilled(&alice, get("ops")).await;
    let claim = |task_id: &str| pb::BoardClaimRequest {
        team: "mal".into(),
        worker: "mallory-w".into(),
        task_id: task_id.into(),
        ..Default::default()
    };
    let oldest = mallory.board_claim(claim("")).await.unwrap();
    assert_eq!(
        oldest.code,
        pb::OutcomeCode::BoardEmpty as i32,
        "{oldest:?}"
    );
    let named = mallory.board_claim(claim(&task_id)).await.unwrap();
    assert_eq!(named.refusal, "unknown_task", "{named:?}");
    let seen = mallory.board_get(get("mal")).await.unwrap().tasks;
    assert!(seen.is_empty(), "{seen:?}");
    // Nothing changed: still ready on the cell tier, and alice's team claims it.
    let task = alice.board_get(get("ops")).await.unwrap().tasks;
    assert_eq!(
        (task[0].tier.as_str(), task[0].state.as_str()),
        ("cell", "ready")
    );
    let claim = pb::BoardClaimRequest {
        team: "ops".into(),
        worker: "alice-w".into(),
        ..Default::default()
    };
    let taken = alice.board_claim(claim).await.unwrap();
    assert_eq!(taken.task_id, task_id, "{taken:?}");
    assert_eq!(taken.tier, "cell", "{taken:?}");
    still_serving(&operator).await;
}
