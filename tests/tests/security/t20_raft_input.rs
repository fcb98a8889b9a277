//! Raft input from a peer holding a valid node certificate (a compromised or buggy node):
//! senders that are not members and absurd terms are refused before the openraft core,
//! typed and counted, and never panic it (openraft 0.9.25 panicked on a `u64::MAX` term and
//! persisted the vote, so the cell never elected a leader again).

use openraft::Vote;
use openraft::raft::{AppendEntriesRequest, VoteRequest};
use whip_cell::tls::Principal;
use whip_cell::types::{TypeConfig, encode};
use whip_proto::v1 as pb;

use crate::{ours, raw_call, still_serving, target};

fn append(term: u64, leader: u64) -> pb::Blob {
    let rpc: AppendEntriesRequest<TypeConfig> = AppendEntriesRequest {
        vote: Vote::new_committed(term, leader),
        prev_log_id: None,
        entries: Vec::new(),
        leader_commit: None,
    };
    pb::Blob {
        data: encode(&rpc),
        cell: 0,
    }
}

fn vote(term: u64, candidate: u64) -> pb::Blob {
    let rpc: VoteRequest<u64> = VoteRequest::new(Vote::new(term, candidate), None);
    pb::Blob {
        data: encode(&rpc),
        cell: 0,
    }
}

#[tokio::test]
async fn absurd_terms_and_strangers_are_refused_and_the_cell_keeps_its_leader() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    let before = client.status(pb::StatusRequest::default()).await.unwrap();
    let node = ours(Principal::Node);
    for i in 0..3u16 {
        let addr = dev.member(i);
        // A member's id with a term no election reaches: the panic of openraft 0.9.25.
        let status = raw_call(
            &addr,
            &node,
            "/whip.v1.Raft/AppendEntries",
            append(u64::MAX, 2),
        )
        .await
        .expect_err("term u64::MAX");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("term_absurd"), "{status:?}");
        // A leader that is not a member, a little ahead: it deposed the real leader before.
        let ahead = before.term + 5;
        let status = raw_call(
            &addr,
            &node,
            "/whip.v1.Raft/AppendEntries",
            append(ahead, 9),
        )
        .await
        .expect_err("fake leader 9");
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
        assert!(status.message().contains("not_member"), "{status:?}");
        let status = raw_call(&addr, &node, "/whip.v1.Raft/Vote", vote(ahead, 9))
            .await
            .expect_err("a stranger's vote request");
        assert!(status.message().contains("not_member"), "{status:?}");
    }
    still_serving(&client).await;
    let after = client.status(pb::StatusRequest::default()).await.unwrap();
    assert_eq!(
        (after.leader, after.term),
        (before.leader, before.term),
        "no leader change, no term change"
    );
    let mut refused = 0;
    for i in 0..3u16 {
        let one = whip_cell::CellClient::connect(&[dev.member(i)]).unwrap();
        refused += one.member_status(0).await.unwrap().raft_refused;
    }
    assert_eq!(refused, 9, "every refusal is counted");
}
