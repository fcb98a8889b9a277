//! A prefetching claim as an attacker reaches for another team's tasks (issue 35, item 3):
//! alice's team `ops` spills a task to the cell tier and alice claims it with a prefetch.
//! mallory, in a team of her own on the same cell, prefetches from her team (her claims
//! come back empty: the spilled task is not her lineage's), then presents a completion of
//! alice's claim with its very fence, through her own team and through `ops`. Each is
//! refused, and alice's claim is untouched: still claimed, same fence, and alice completes
//! it.

use whip_cell::CellClient;
use whip_proto::v1 as pb;

use crate::{registered, still_serving, target};

/// A prefetch of up to 4 tasks of `team`, completing `completes` first.
fn prefetch(
    team: &str,
    worker: &str,
    completes: Vec<pb::BoardCompletion>,
) -> pb::BoardClaimRequest {
    pb::BoardClaimRequest {
        team: team.into(),
        worker: worker.into(),
        max: 4,
        completes,
        ..Default::default()
    }
}

/// Each of alice (team `ops`) and mallory (team `mal`) creates a team that spills at once.
async fn two_spilling_teams(alice: &CellClient, mallory: &CellClient) {
    let spilling = pb::BoardSettings {
        spill_after_ms: 100,
        ..Default::default()
    };
    for (who, team) in [(alice, "ops"), (mallory, "mal")] {
        let create = pb::TeamCreateRequest {
            team: team.into(),
            settings: Some(spilling),
            ..Default::default()
        };
        who.team_create(create).await.unwrap();
    }
}

#[tokio::test]
async fn a_prefetching_claim_reaches_only_its_own_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (alice, _) = registered(&dev, &operator, "alice", false).await;
    let (mallory, _) = registered(&dev, &operator, "mallory", false).await;
    two_spilling_teams(&alice, &mallory).await;
    let post = pb::BoardPostRequest {
        team: "ops".into(),
        body: b"rotate the keys".to_vec(),
        ..Default::default()
    };
    let task_id = alice.board_post(post).await.unwrap().task_id;
    let get = pb::BoardGetRequest {
        team: "ops".into(),
        task_id: task_id.clone(),
    };
    crate::t65_team_state::spilled(&alice, get.clone()).await;
    let hers = mallory
        .board_claim(prefetch("mal", "m", Vec::new()))
        .await
        .unwrap();
    assert_eq!(hers.code, pb::OutcomeCode::TasksClaimed as i32, "{hers:?}");
    assert!(
        hers.claims.is_empty(),
        "mallory reached ops's task: {hers:?}"
    );
    let taken = alice
        .board_claim(prefetch("ops", "a", Vec::new()))
        .await
        .unwrap();
    assert_eq!(taken.claims.len(), 1, "{taken:?}");
    let fence = taken.claims[0].fence;
    let forged = || {
        vec![pb::BoardCompletion {
            task_id: task_id.clone(),
            fence,
            result: b"pwned".to_vec(),
        }]
    };
    let through_hers = mallory
        .board_claim(prefetch("mal", "m", forged()))
        .await
        .unwrap();
    assert_eq!(through_hers.refusal, "unknown_task", "{through_hers:?}");
    let through_ops = mallory
        .board_claim(prefetch("ops", "m", forged()))
        .await
        .unwrap();
    assert_eq!(through_ops.refusal, "not_member", "{through_ops:?}");
    let task = alice.board_get(get).await.unwrap().tasks;
    assert_eq!(
        (
            task[0].state.as_str(),
            task[0].fence,
            task[0].worker.as_deref()
        ),
        ("claimed", fence, Some("a")),
        "{task:?}"
    );
    let done = vec![pb::BoardCompletion {
        task_id: task_id.clone(),
        fence,
        result: b"rotated".to_vec(),
    }];
    let finished = alice.board_claim(prefetch("ops", "a", done)).await.unwrap();
    assert_eq!(finished.completed, vec![task_id], "{finished:?}");
    still_serving(&operator).await;
}
