//! The work registry as an attacker reaches it over the wire: without a certificate or a
//! token, with its own token against another agent's entry, and as an agent setting the
//! operator's limits. Every refusal is decided in the state machine; the cell serves on.

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::{anonymous, still_serving, target};

fn register(parent: &str) -> pb::WorkRegisterRequest {
    pb::WorkRegisterRequest {
        kind: "run".into(),
        parent: parent.into(),
        ttl_ms: 30_000,
        ..Default::default()
    }
}

async fn agent(dev: &whip_tests::DevCell, operator: &CellClient, name: &str) -> CellClient {
    crate::registered(dev, operator, name, false).await.0
}

#[tokio::test]
async fn strangers_and_other_agents_cannot_register_steer_or_set_limits() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let stranger = CellClient::connect_with(&[dev.member(1)], &anonymous()).unwrap();
    let refused = stranger.work_register(register("")).await;
    let anonymous_refused = "anonymous_refused";
    let denied =
        matches!(&refused, Err(CellError::PermissionDenied(m)) if m.contains(anonymous_refused));
    assert!(denied, "{refused:?}");
    let listed = stranger.work_list(pb::WorkListRequest::default()).await;
    assert!(
        matches!(listed, Err(CellError::Unauthenticated(_))),
        "{listed:?}"
    );

    let alice = agent(&dev, &operator, "alice").await;
    let mallory = agent(&dev, &operator, "mallory").await;
    let root = alice
        .work_register(register(""))
        .await
        .unwrap()
        .entry
        .unwrap()
        .id;
    let under = mallory.work_register(register(&root)).await;
    assert!(
        matches!(under, Err(CellError::PermissionDenied(ref m)) if m.contains("not_authorized")),
        "{under:?}"
    );
    let revoke = pb::WorkRevokeRequest {
        id: root.clone(),
        idempotency_key: String::new(),
    };
    assert!(matches!(
        mallory.work_revoke(revoke).await,
        Err(CellError::PermissionDenied(_))
    ));
    let limits = pb::WorkLimitsRequest {
        fabric_max: Some(1_000_000),
        ..Default::default()
    };
    let set = mallory.work_limits(limits.clone()).await;
    assert!(
        matches!(set, Err(CellError::PermissionDenied(ref m)) if m.contains("operator_only")),
        "{set:?}"
    );
    assert!(stranger.work_limits(limits).await.is_err());
    // Nothing changed: alice's root is there, the limits are the defaults.
    let live = operator
        .work_list(pb::WorkListRequest::default())
        .await
        .unwrap();
    assert_eq!(live.entries.len(), 1);
    assert_eq!(live.entries[0].id, root);
    let now = operator
        .work_limits(pb::WorkLimitsRequest::default())
        .await
        .unwrap();
    assert_eq!(now.fabric_max, 10_000);
    still_serving(&operator).await;
}

/// One agent cannot take the whole ceiling (issue 28, class 8): past its share of a cell
/// (`whip work limits --owner-max N`) its registrations are refused `owner`, while another
/// agent and the operator are still admitted; a lapsed or revoked entry gives the share back.
#[tokio::test]
async fn one_agent_holds_at_most_its_share_of_a_cell() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let cell = dev.member(0);
    let out = crate::whip(
        dir.path(),
        &[
            "--json",
            "work",
            "limits",
            "--owner-max",
            "2",
            "--cell",
            &cell,
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(shown["owner_max"], 2, "{shown}");
    let hog = agent(&dev, &operator, "hog").await;
    let other = agent(&dev, &operator, "other").await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let admitted = hog.work_register(register("")).await.unwrap();
        assert_eq!(
            (admitted.code(), admitted.outcome.as_str()),
            (Code::WorkAdmitted, "admitted"),
            "{admitted:?}"
        );
        held.push(admitted.entry.unwrap().id);
    }
    let third = hog.work_register(register("")).await.unwrap();
    assert_eq!(
        (third.outcome.as_str(), third.limit.as_str()),
        ("refused", "owner")
    );
    for someone in [&other, &operator] {
        let admitted = someone.work_register(register("")).await.unwrap();
        assert_eq!(
            (admitted.code(), admitted.outcome.as_str()),
            (Code::WorkAdmitted, "admitted"),
            "{admitted:?}"
        );
    }
    let revoke = pb::WorkRevokeRequest {
        id: held[0].clone(),
        idempotency_key: String::new(),
    };
    hog.work_revoke(revoke).await.unwrap();
    let again = hog.work_register(register("")).await.unwrap();
    assert_eq!(
        (again.code(), again.outcome.as_str()),
        (Code::WorkAdmitted, "admitted"),
        "{again:?}"
    );
    let live = operator
        .work_list(pb::WorkListRequest::default())
        .await
        .unwrap();
    let hogs = live.entries.iter().filter(|e| e.owner == "hog").count();
    assert_eq!(hogs, 2);
    still_serving(&operator).await;
}
