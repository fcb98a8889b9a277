//! A watch as an outsider uses it (issue 30): mallory, registered but in no team, watches
//! alice's team blackboard key, a reserved key, and every key from revision 1. The aimed
//! watches are refused before any event is sent; the wide watch streams every other key
//! but never the team's row; an anonymous caller gets nothing, and waits on the cell's
//! applies only as a proven agent, learning an index and never the board. Nothing changes.

use futures::StreamExt;
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use crate::{registered, still_serving, target};

fn watch(key: &[u8], prefix: bool) -> pb::WatchRequest {
    pb::WatchRequest {
        key: key.to_vec(),
        prefix,
        from_revision: 1,
        cell: 0,
    }
}

async fn put(client: &CellClient, key: &str, value: &str) {
    let put = pb::KvPutRequest {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        ..Default::default()
    };
    client.kv_put(put).await.unwrap();
}

#[tokio::test]
async fn an_outsider_watches_only_what_it_may_read() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (alice, _) = registered(&dev, &operator, "alice", false).await;
    let (mallory, _) = registered(&dev, &operator, "mallory", false).await;
    let mallory = mallory.with_retry_for(std::time::Duration::ZERO);
    let team = pb::TeamCreateRequest {
        team: "web".into(),
        ..Default::default()
    };
    alice.team_create(team).await.unwrap();
    put(&alice, "doc/{web}/plan", "secret").await;
    put(&alice, "marker", "done").await;

    let aimed = mallory.watch(watch(b"doc/{web}/plan", false)).await;
    assert!(crate::is_not_member(&aimed), "{:?}", aimed.err());
    let team_prefix = mallory.watch(watch(b"doc/{web}/", true)).await;
    assert!(
        matches!(&team_prefix, Err(CellError::PermissionDenied(_)))
            || crate::is_not_member(&team_prefix),
        "{:?}",
        team_prefix.err()
    );
    let reserved = mallory.watch(watch(b"agents/{alice}", false)).await;
    assert!(reserved.is_err(), "a reserved key is watched");

    // Everything from revision 1: every key but the team's row, up to alice's marker.
    let mut wide = mallory.watch(watch(b"", true)).await.unwrap();
    let mut seen = Vec::new();
    while !seen.iter().any(|k: &Vec<u8>| k == b"marker") {
        let answer = tokio::time::timeout(std::time::Duration::from_secs(10), wide.next())
            .await
            .expect("the marker arrives")
            .expect("the stream stays open")
            .expect("an answer");
        seen.extend(answer.events.into_iter().map(|e| e.key));
    }
    assert!(seen.iter().any(|k| k == b"canary"), "{seen:?}");
    assert!(
        !seen.iter().any(|k| k.starts_with(b"doc/")),
        "a team row leaked: {seen:?}"
    );
    assert!(!seen.iter().any(|k| k.starts_with(b"agents/")), "{seen:?}");

    let anonymous = CellClient::connect_with(&[dev.member(0)], &crate::anonymous())
        .unwrap()
        .with_retry_for(std::time::Duration::ZERO);
    let refused = anonymous.watch(watch(b"", true)).await;
    assert!(refused.is_err(), "an anonymous caller watches");
    waits_learn_only_an_index(&anonymous, &mallory).await;

    let plan = alice
        .kv_get(pb::KvGetRequest {
            key: b"doc/{web}/plan".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(plan.value, b"secret", "nothing changed");
    still_serving(&operator).await;
}

/// The anonymous caller cannot wait on the cell's applies; mallory can, and learns an
/// apply index, never alice's board.
async fn waits_learn_only_an_index(anonymous: &CellClient, mallory: &CellClient) {
    let wait = pb::WaitAppliedRequest {
        subject: Some(pb::wait_applied_request::Subject::Board("web".into())),
        after_index: 0,
        timeout_ms: 0,
    };
    let refused = anonymous.wait_applied(wait.clone()).await;
    assert!(
        matches!(&refused, Err(CellError::Unauthenticated(_))),
        "an anonymous caller waits: {refused:?}"
    );
    // A member's wait learns an apply index, never the board: mallory may wait, and
    // reading the board is still refused.
    let index = mallory.wait_applied(wait).await.unwrap();
    assert!(index.hosted && index.applied_index > 0, "{index:?}");
    let board = pb::BoardListRequest {
        team: "web".into(),
        ..Default::default()
    };
    assert!(
        mallory.board_list(board).await.is_err(),
        "mallory reads the board"
    );
    let nameless = pb::WaitAppliedRequest::default();
    let refused = mallory.wait_applied(nameless).await;
    assert!(
        matches!(&refused, Err(CellError::InvalidArgument(_))),
        "{refused:?}"
    );
}
