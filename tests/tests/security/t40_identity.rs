//! Registering an agent: only the operator, or an existing agent who enrolls it (limited
//! per hour); tokens are long and made with entropy; names from a narrow character set.

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use crate::{anonymous, still_serving, target};

fn register(agent: &str, token: &str) -> pb::AgentRegisterRequest {
    pb::AgentRegisterRequest {
        agent: agent.into(),
        token: token.into(),
        enroll: false,
    }
}

const TOKEN: &str = "0123456789abcdef0123456789abcdef-alice";

#[tokio::test]
async fn anonymous_callers_cannot_register_and_agents_enroll_within_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let stranger = CellClient::connect_with(&[dev.member(1)], &anonymous()).unwrap();
    let refused = stranger.agent_register(register("cli-victim", TOKEN)).await;
    assert!(
        matches!(refused, Err(CellError::Unauthenticated(_))),
        "{refused:?}"
    );
    // The operator registers alice; a server-made token comes back when none is given.
    let made = operator
        .agent_register(register("alice", ""))
        .await
        .unwrap();
    assert!(made.created && made.token.len() >= 32, "{made:?}");
    // Alice enrolls bob over a connection without any certificate.
    let alice = CellClient::connect_with(&[dev.member(1)], &anonymous())
        .unwrap()
        .with_identity("alice", made.token.clone());
    let bob = alice.agent_register(register("bob", TOKEN)).await.unwrap();
    assert!(bob.created);
    // Bob, now registered, acts (creates a team), proven by his token alone.
    let bob_client = CellClient::connect_with(&[dev.member(2)], &anonymous())
        .unwrap()
        .with_identity("bob", TOKEN);
    let team = bob_client
        .team_create(pb::TeamCreateRequest {
            team: "bobs".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(team.code, pb::OutcomeCode::TeamCreated as i32, "{team:?}");
    // Re-registering oneself with one's own token is a no-op, a taken name is refused.
    re_registers_as_a_no_op(&bob_client).await;
    a_taken_name_is_refused_typed_and_unchanged(&dev, &alice, &bob_client).await;
    // Alice's enrollments are counted: the hundred-and-first in an hour is refused.
    let mut refusal = None;
    for i in 0..110 {
        let name = format!("helper-{i}");
        match alice.agent_register(register(&name, TOKEN)).await {
            Ok(_) => {}
            Err(e) => {
                refusal = Some((i, e));
                break;
            }
        }
    }
    let (at, error) = refusal.expect("the enrollment limit holds");
    assert!(at <= 100, "refused after {at} enrollments");
    assert!(error.to_string().contains("limit is 100"), "{error}");
    still_serving(&operator).await;
}

#[tokio::test]
async fn weak_tokens_and_lookalike_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_dev, operator) = target(dir.path()).await;
    for (agent, token) in [
        ("carol", "short-token"),
        ("carol", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ("ca\u{200b}rol", TOKEN),
        ("carol\u{202e}", TOKEN),
        ("cаrol", TOKEN),
        ("-carol", TOKEN),
        ("carol{x}", TOKEN),
    ] {
        let refused = operator.agent_register(register(agent, token)).await;
        assert!(
            matches!(refused, Err(CellError::InvalidArgument(_))),
            "{agent:?} / {token:?}: {refused:?}"
        );
    }
    still_serving(&operator).await;
}

/// Alice tries to register bob's name with another token: refused with a typed
/// `name_taken`, and bob's record is untouched (his token proves him, the other does not).
async fn a_taken_name_is_refused_typed_and_unchanged(
    dev: &whip_tests::DevCell,
    alice: &CellClient,
    bob_client: &CellClient,
) {
    let stolen = alice
        .agent_register(register("bob", "another-token-0123456789abcdefghijkl"))
        .await;
    match stolen {
        Err(CellError::Refused { code, .. }) => {
            assert_eq!(code, whip_board::RefusalCode::NameTaken)
        }
        other => panic!("expected a typed name_taken refusal, got {other:?}"),
    }
    let impostor = CellClient::connect_with(&[dev.member(2)], &anonymous())
        .unwrap()
        .with_identity("bob", "another-token-0123456789abcdefghijkl");
    let forged = impostor
        .team_create(pb::TeamCreateRequest {
            team: "not-bobs".into(),
            ..Default::default()
        })
        .await;
    assert!(forged.is_err(), "{forged:?}");
    re_registers_as_a_no_op(bob_client).await;
}

/// Bob re-registers himself with his own token: a no-op.
async fn re_registers_as_a_no_op(bob_client: &CellClient) {
    let again = bob_client.agent_register(register("bob", TOKEN)).await;
    assert!(!again.unwrap().created);
}
