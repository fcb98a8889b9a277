//! Path reservations through a fabric (issue 31): two agents race for overlapping globs
//! over real gRPC, through different nodes, and every exclusive grant goes to exactly one
//! of them, because one apply on the repository's cell decides each reserve. The loser
//! hears the winner's name; a release by the wrong agent changes nothing; a holder's own
//! list gathers its reservations from every cell.

use whip_board::route;
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_tests::fabric::Fabric;

use crate::agent;

fn reserve(repo: &str, paths: &[&str]) -> pb::PathsReserveRequest {
    pb::PathsReserveRequest {
        repo: repo.into(),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        exclusive: true,
        ttl_ms: 60_000,
        ..Default::default()
    }
}

async fn on(fabric: &Fabric, name: &str, node: u64) -> CellClient {
    let registered = agent(fabric, name).await;
    drop(registered);
    fabric
        .client_of(node)
        .with_identity(name, crate::token(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_agents_racing_for_overlapping_globs_get_each_grant_once() {
    let fabric = Fabric::start(3, 4).await;
    let alice = on(&fabric, "alice", 1).await;
    let bob = on(&fabric, "bob", 2).await;
    let rounds = 12;
    for round in 0..rounds {
        let repo = format!("race-{round}");
        // Every path of one side overlaps one of the other's.
        let a = reserve(&repo, &["src/**", "docs/a.md"]);
        let b = reserve(&repo, &["src/lib.rs", "docs/*.md"]);
        let (ra, rb) = tokio::join!(alice.paths_reserve(a), bob.paths_reserve(b));
        let (ra, rb) = (ra.expect("alice reserves"), rb.expect("bob reserves"));
        assert_eq!(
            (ra.outcome.as_str(), rb.outcome.as_str()),
            ("reserved", "reserved")
        );
        // One reserve applied first and took both paths; the other conflicts on both.
        let (winner, loser, name) = match ra.granted.len() {
            2 => (&ra, &rb, "alice"),
            _ => (&rb, &ra, "bob"),
        };
        assert_eq!(winner.granted.len(), 2, "{ra:?} {rb:?}");
        assert!(winner.conflicts.is_empty(), "{winner:?}");
        assert!(
            loser.granted.is_empty(),
            "both hold an overlapping path: {ra:?} {rb:?}"
        );
        assert!(!loser.conflicts.is_empty());
        assert!(
            loser
                .conflicts
                .iter()
                .all(|c| c.holder == name && c.exclusive)
        );
        let fences: Vec<u64> = winner.granted.iter().map(|g| g.fence).collect();
        assert_eq!(fences, [1, 1], "one call, one fence");
    }
    let map = fabric.node(1).map().await.expect("map");
    let cells: std::collections::BTreeSet<u64> = (0..rounds)
        .map(|r| map.locate(route::repo_point(&format!("race-{r}"))).cell)
        .collect();
    assert!(
        cells.len() > 1,
        "the repositories spread over cells: {cells:?}"
    );
    fabric.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_holder_releases_and_a_holder_lists_its_own_everywhere() {
    let fabric = Fabric::start(3, 4).await;
    let alice = on(&fabric, "alice", 1).await;
    let mallory = on(&fabric, "mallory", 3).await;
    for repo in ["one", "two", "three"] {
        let r = alice
            .paths_reserve(reserve(repo, &["src/a.rs"]))
            .await
            .expect("reserve");
        assert_eq!(r.granted.len(), 1, "{r:?}");
    }
    let steal = pb::PathsReleaseRequest {
        repo: "one".into(),
        paths: vec!["src/a.rs".into()],
        ..Default::default()
    };
    let refused = mallory.paths_release(steal.clone()).await.expect("release");
    assert_eq!(
        (refused.outcome.as_str(), refused.refusal.as_str()),
        ("refused", "not_holder")
    );
    let mine = pb::PathsListRequest {
        mine: true,
        ..Default::default()
    };
    let listed = alice.paths_list(mine.clone()).await.expect("list");
    let repos: Vec<&str> = listed
        .reservations
        .iter()
        .map(|r| r.repo.as_str())
        .collect();
    assert_eq!(repos, ["one", "three", "two"]);
    assert!(
        mallory
            .paths_list(mine)
            .await
            .expect("list")
            .reservations
            .is_empty()
    );
    let released = alice.paths_release(steal).await.expect("release");
    assert_eq!(released.released, ["src/a.rs"]);
    let repo = pb::PathsListRequest {
        repo: "one".into(),
        ..Default::default()
    };
    assert!(
        mallory
            .paths_list(repo)
            .await
            .expect("list")
            .reservations
            .is_empty()
    );
    fabric.shutdown().await;
}
