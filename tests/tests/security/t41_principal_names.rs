//! Names that imitate a principal (issue 28, class 3): an agent enrolls `operator`,
//! `Server`, `0perator`, a look-alike of an existing agent, or another user's CLI default
//! identity; a caller presents a look-alike name with the real agent's token. Each is
//! refused (`reserved_name`, or unauthenticated), the real agent still acts, and an
//! agent called anything cannot become the operator.

use std::path::Path;
use std::process::{Command, Output};

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;
use whip_tests::whip_binary;

use crate::{anonymous, still_serving, target};

fn cli(dir: &Path, args: &[&str]) -> Output {
    Command::new(whip_binary())
        .current_dir(dir)
        .env("WHIP_CREDENTIALS", dir.join("credentials.json"))
        .env_remove("WHIP_AGENT")
        .args(args)
        .output()
        .expect("run whip")
}

#[tokio::test]
async fn names_that_imitate_a_principal_or_an_agent_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let cell = dev.member(0);
    let made = operator
        .agent_register(pb::AgentRegisterRequest {
            agent: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    for name in [
        "operator",
        "Server",
        "ANONYMOUS",
        "engine",
        "0perator",
        "a1ice",
        "ALICE",
    ] {
        let out = cli(dir.path(), &["agent", "enroll", name, "--cell", &cell]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains("reserved_name"), "{name}: {stderr}");
    }
    // An agent cannot take another user's CLI default identity.
    let alice = CellClient::connect_with(&[dev.member(1)], &anonymous())
        .unwrap()
        .with_identity("alice", made.token.clone());
    let squat = alice
        .agent_register(pb::AgentRegisterRequest {
            agent: "cli-bob".into(),
            enroll: true,
            ..Default::default()
        })
        .await;
    assert!(
        matches!(&squat, Err(CellError::InvalidArgument(m)) if m.starts_with("reserved_name")),
        "{squat:?}"
    );
    alice_alone(&dev, &alice, &made.token).await;
    let enrolled = cli(
        dir.path(),
        &["agent", "enroll", "helper-7", "--cell", &cell],
    );
    assert!(
        enrolled.status.success(),
        "{}",
        String::from_utf8_lossy(&enrolled.stderr)
    );
    still_serving(&operator).await;
}

/// A look-alike name with alice's own token is not alice; alice herself still acts.
async fn alice_alone(dev: &whip_tests::DevCell, alice: &CellClient, token: &str) {
    let twin = CellClient::connect_with(&[dev.member(2)], &anonymous())
        .unwrap()
        .with_identity("Alice", token);
    let acted = twin
        .team_create(pb::TeamCreateRequest {
            team: "twins".into(),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(acted, Err(CellError::Unauthenticated(_))),
        "{acted:?}"
    );
    // Nothing was registered: the refused names are still free of records, alice acts.
    let team = alice
        .team_create(pb::TeamCreateRequest {
            team: "alices".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(team.code, pb::OutcomeCode::TeamCreated as i32, "{team:?}");
}
