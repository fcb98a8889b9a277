//! Who may connect: plaintext, no certificate, another cluster's certificate, an operator
//! certificate on a node-only service.

use whip_cell::tls::{self, Principal, Transport};
use whip_proto::v1 as pb;

use crate::{anonymous, ours, raw_call, still_serving, target};

/// Bytes that do not decode as any message: a service that decodes before it checks the
/// caller answers `InvalidArgument`.
fn garbage() -> pb::Blob {
    pb::Blob {
        data: vec![0xff; 64],
        cell: 0,
    }
}

/// The call failed in the transport (connect, TLS, HTTP/2): the server gave no gRPC answer.
fn transport_failure(status: &tonic::Status) -> bool {
    let from_transport = std::error::Error::source(status)
        .is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some());
    from_transport || status.message().starts_with("connect:")
}

const PEER_PATHS: [&str; 9] = [
    "/whip.v1.Raft/Vote",
    "/whip.v1.Raft/AppendEntries",
    "/whip.v1.Raft/AppendBatch",
    "/whip.v1.Raft/Forward",
    "/whip.v1.Raft/Read",
    "/whip.v1.Admin/AddLearner",
    "/whip.v1.Node/FabricStatus",
    "/whip.v1.Node/RangeProgress",
    "/whip.v1.Cell/Status",
];

#[tokio::test]
async fn plaintext_gets_no_grpc_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    for path in ["/whip.v1.Cell/KvGet", "/whip.v1.Raft/Vote"] {
        let answer = raw_call(&dev.member(0), &Transport::Insecure, path, garbage()).await;
        let status = answer.expect_err("plaintext must not be answered");
        assert!(
            transport_failure(&status),
            "{path}: a transport failure, not a gRPC answer: {status:?}"
        );
    }
    still_serving(&client).await;
}

#[tokio::test]
async fn tls_without_a_certificate_is_refused_before_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    for path in PEER_PATHS {
        let status = raw_call(&dev.member(1), &anonymous(), path, garbage())
            .await
            .expect_err("no certificate, no peer service");
        assert_eq!(
            status.code(),
            tonic::Code::Unauthenticated,
            "{path}: {status:?}"
        );
    }
    still_serving(&client).await;
}

#[tokio::test]
async fn an_operator_certificate_does_not_speak_raft() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    let operator = ours(Principal::Operator);
    for path in [
        "/whip.v1.Raft/Vote",
        "/whip.v1.Raft/AppendBatch",
        "/whip.v1.Raft/Forward",
        "/whip.v1.Raft/Read",
    ] {
        let status = raw_call(&dev.member(0), &operator, path, garbage())
            .await
            .expect_err("raft is for nodes");
        assert_eq!(
            status.code(),
            tonic::Code::PermissionDenied,
            "{path}: {status:?}"
        );
    }
    // The same certificate may run the cluster: a garbled admin call reaches decoding.
    let status = raw_call(
        &dev.member(0),
        &operator,
        "/whip.v1.Admin/AddLearner",
        garbage(),
    )
    .await
    .expect_err("garbage");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    still_serving(&client).await;
}

#[tokio::test]
async fn another_clusters_certificates_fail_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    let foreign = tls::Authority::generate().unwrap();
    // A node of another cluster: it does not trust our server, and we do not trust it.
    let theirs = Transport::tls(foreign.credentials(Principal::Node).unwrap());
    // Their node certificate presented to a client that trusts our CA: our server refuses it.
    let ours_ca = tls::Authority::load(&tls::config_dir()).unwrap().unwrap();
    let mixed = Transport::tls(tls::Credentials {
        ca: ours_ca.cert_pem().to_string(),
        identity: foreign.issue(Principal::Node).unwrap().into(),
    });
    for transport in [theirs, mixed] {
        for path in PEER_PATHS {
            let status = raw_call(&dev.member(2), &transport, path, garbage())
                .await
                .expect_err("another cluster's certificate");
            assert!(
                transport_failure(&status),
                "{path}: the handshake fails: {status:?}"
            );
        }
    }
    still_serving(&client).await;
}
