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

/// A heartbeat batch sent with `transport`'s certificate.
async fn raw_batch(
    addr: &str,
    transport: &whip_cell::tls::Transport,
    batch: pb::BlobBatch,
) -> Result<pb::BlobAnswers, tonic::Status> {
    whip_tests::raw_unary(addr, transport, "/whip.v1.Raft/AppendBatch", batch).await
}

/// A batch gets the same checks per message as `AppendEntries`: each bad message is
/// refused on its own, typed, and the batch cannot be larger than the limit.
#[tokio::test]
async fn each_message_of_a_heartbeat_batch_is_checked_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    let before = client.status(pb::StatusRequest::default()).await.unwrap();
    let node = ours(Principal::Node);
    let garbled = pb::Blob {
        data: vec![0xff; 3],
        cell: 0,
    };
    let elsewhere = pb::Blob {
        cell: 77,
        ..append(before.term, 1)
    };
    let batch = pb::BlobBatch {
        blobs: vec![
            append(u64::MAX, 2),
            append(before.term + 5, 9),
            garbled,
            elsewhere,
        ],
    };
    let answers = raw_batch(&dev.member(1), &node, batch)
        .await
        .expect("a batch answer");
    let codes: Vec<(u32, bool)> = answers
        .answers
        .iter()
        .map(|a| {
            (
                a.code,
                a.message.contains("term_absurd") || a.message.contains("not_member"),
            )
        })
        .collect();
    let (invalid, denied, not_found) = (
        tonic::Code::InvalidArgument as u32,
        tonic::Code::PermissionDenied as u32,
        tonic::Code::NotFound as u32,
    );
    assert_eq!(
        codes,
        [
            (invalid, true),
            (denied, true),
            (invalid, false),
            (not_found, false)
        ],
        "{answers:?}"
    );
    let too_many = pb::BlobBatch {
        blobs: vec![append(before.term, 1); whip_cell::limits::HEARTBEAT_BATCH_MAX + 1],
    };
    let status = raw_batch(&dev.member(1), &node, too_many)
        .await
        .expect_err("too many");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    still_serving(&client).await;
    let after = client.status(pb::StatusRequest::default()).await.unwrap();
    assert_eq!(
        (after.leader, after.term),
        (before.leader, before.term),
        "no leader change"
    );
}

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
