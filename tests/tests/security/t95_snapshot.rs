//! Attack: take a snapshot of the whole cell (every agent's state) without being the
//! operator. An anonymous TLS client, a registered agent with its token, a node's
//! certificate, and the operator's own connection carrying an agent's token are each
//! refused before a byte is streamed; the cell keeps serving with its canary, and the
//! operator's own save still works afterwards.

use tonic::Code;
use whip_cell::tls::{Principal, Transport};
use whip_proto::v1 as pb;
use whip_proto::v1::admin_client::AdminClient;

use crate::{anonymous, ours, registered, still_serving, target};

/// Ask `addr` for a snapshot over `transport`, with `agent`'s token in the metadata when
/// given: the refusal, or the number of chunks streamed.
async fn snapshot(
    addr: &str,
    transport: &Transport,
    agent: Option<(&str, &str)>,
) -> Result<usize, tonic::Status> {
    let channel = whip_cell::network::endpoint_with(addr, transport)
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("connect: {e:?}")))?;
    let mut request = tonic::Request::new(pb::SnapshotSaveRequest { cell: 0 });
    if let Some((agent, token)) = agent {
        let value = |v: &str| v.parse().expect("ascii metadata");
        let headers = request.metadata_mut();
        headers.insert(whip_cell::identity::AGENT_HEADER, value(agent));
        headers.insert(whip_cell::identity::TOKEN_HEADER, value(token));
    }
    let mut stream = AdminClient::new(channel)
        .max_decoding_message_size(whip_cell::limits::MESSAGE_BYTES_MAX)
        .snapshot_save(request)
        .await?
        .into_inner();
    let mut chunks = 0;
    while stream.message().await?.is_some() {
        chunks += 1;
    }
    Ok(chunks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_operator_takes_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (_mallory, token) = registered(&dev, &operator, "mallory", false).await;
    let leader = dev.member(0);
    // Every member: a follower must refuse before it would point at the leader.
    for i in 0..3 {
        let addr = dev.member(i);
        let anon = snapshot(&addr, &anonymous(), None).await.unwrap_err();
        assert_eq!(anon.code(), Code::Unauthenticated, "anonymous: {anon:?}");
        let agent = snapshot(&addr, &anonymous(), Some(("mallory", &token)))
            .await
            .unwrap_err();
        assert_eq!(agent.code(), Code::Unauthenticated, "agent: {agent:?}");
        let node = snapshot(&addr, &ours(Principal::Node), None)
            .await
            .unwrap_err();
        assert_eq!(node.code(), Code::PermissionDenied, "node: {node:?}");
        let operator_as_agent =
            snapshot(&addr, &ours(Principal::Operator), Some(("mallory", &token)))
                .await
                .unwrap_err();
        assert_eq!(
            operator_as_agent.code(),
            Code::PermissionDenied,
            "an agent's token on the operator's connection: {operator_as_agent:?}"
        );
        assert!(
            operator_as_agent.message().contains("operator"),
            "{operator_as_agent:?}"
        );
    }
    still_serving(&operator).await;
    // The operator's own save works: from whichever member leads.
    let mut saved = None;
    for i in 0..3 {
        match snapshot(&dev.member(i), &ours(Principal::Operator), None).await {
            Ok(chunks) => saved = Some(chunks),
            Err(status) => assert!(
                status.message().contains("leader"),
                "a follower points at the leader: {status:?}"
            ),
        }
    }
    assert!(
        saved.is_some_and(|chunks| chunks > 0),
        "no member saved ({leader})"
    );
}
