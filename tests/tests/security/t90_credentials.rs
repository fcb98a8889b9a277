//! Replacing a server's credential (`Admin/InstallCredential`, what `whip fabric
//! rotate-certs` calls): only the operator's own certificate may; a node's certificate, no
//! certificate, an agent's token and another cluster's certificate are refused before the
//! request is read. A credential the operator sends that would not serve (garbage, a key
//! without its certificate, an operator certificate, a certificate of a CA the bundle does
//! not hold, a bundle sharing no CA with the current one) is refused and changes nothing:
//! the member still presents its certificate and the cell keeps serving.

use whip_cell::tls::{self, Principal, Transport};
use whip_proto::v1 as pb;
use whip_proto::v1::admin_client::AdminClient;

use crate::{anonymous, ours, registered, still_serving, target};

const PATH: &str = "/whip.v1.Admin/InstallCredential";

/// Send `request` to `addr` over `transport`; a failed connection is `Unavailable`.
async fn install(
    addr: &str,
    transport: &Transport,
    request: pb::InstallCredentialRequest,
    metadata: Option<(&str, &str)>,
) -> Result<pb::InstallCredentialResponse, tonic::Status> {
    let channel = whip_cell::network::endpoint_with(addr, transport)
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("connect: {e:?}")))?;
    let mut request = tonic::Request::new(request);
    if let Some((agent, token)) = metadata {
        let value = |v: &str| v.parse().expect("ascii metadata");
        let headers = request.metadata_mut();
        headers.insert(whip_cell::identity::AGENT_HEADER, value(agent));
        headers.insert(whip_cell::identity::TOKEN_HEADER, value(token));
    }
    AdminClient::new(channel)
        .install_credential(request)
        .await
        .map(tonic::Response::into_inner)
}

/// A well-formed request: a fresh node certificate of our CA.
fn valid() -> pb::InstallCredentialRequest {
    let authority = tls::Authority::load(&tls::config_dir()).unwrap().unwrap();
    let issued = authority.issue(Principal::Node).unwrap();
    pb::InstallCredentialRequest {
        ca: authority.cert_pem().to_string(),
        cert: issued.cert,
        key: issued.key,
    }
}

#[tokio::test]
async fn only_the_operator_may_replace_a_credential() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    let addr = dev.member(0);
    let status = install(&addr, &anonymous(), valid(), None)
        .await
        .expect_err("no certificate");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    let (_, token) = registered(&dev, &client, "mallory", false).await;
    let status = install(&addr, &anonymous(), valid(), Some(("mallory", &token)))
        .await
        .expect_err("an agent's token is not the operator");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    // A node of this very cluster must not replace another node's credential.
    let status = install(&addr, &ours(Principal::Node), valid(), None)
        .await
        .expect_err("a node certificate");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains(PATH), "{status:?}");
    let foreign = tls::Authority::generate().unwrap();
    let theirs = Transport::tls(foreign.credentials(Principal::Operator).unwrap());
    let status = install(&addr, &theirs, valid(), None)
        .await
        .expect_err("another cluster's operator");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    still_serving(&client).await;
}

/// Requests the operator may send that must be refused, each with what is wrong with it.
fn refused(
    ours_ca: &tls::Authority,
    foreign: &tls::Authority,
) -> Vec<(&'static str, pb::InstallCredentialRequest)> {
    let theirs = foreign.issue(Principal::Node).unwrap();
    let as_operator = ours_ca.issue(Principal::Operator).unwrap();
    vec![
        (
            "garbage",
            pb::InstallCredentialRequest {
                ca: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
                ..valid()
            },
        ),
        (
            "a certificate without its key",
            pb::InstallCredentialRequest {
                key: String::new(),
                ..valid()
            },
        ),
        (
            "another key",
            pb::InstallCredentialRequest {
                key: valid().key,
                ..valid()
            },
        ),
        (
            "an operator certificate",
            pb::InstallCredentialRequest {
                cert: as_operator.cert,
                key: as_operator.key,
                ..valid()
            },
        ),
        (
            "a CA the bundle does not hold",
            pb::InstallCredentialRequest {
                cert: theirs.cert.clone(),
                key: theirs.key.clone(),
                ..valid()
            },
        ),
        (
            "a bundle sharing no CA with the current one",
            pb::InstallCredentialRequest {
                ca: foreign.cert_pem().to_string(),
                cert: theirs.cert,
                key: theirs.key,
            },
        ),
        (
            "our certificate, not in a foreign-only bundle",
            pb::InstallCredentialRequest {
                ca: foreign.cert_pem().to_string(),
                ..Default::default()
            },
        ),
    ]
}

#[tokio::test]
async fn a_credential_that_would_not_serve_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, client) = target(dir.path()).await;
    let addr = dev.member(1);
    let operator = ours(Principal::Operator);
    let foreign = tls::Authority::generate().unwrap();
    let ours_ca = tls::Authority::load(&tls::config_dir()).unwrap().unwrap();
    let both = tls::bundle(&[ours_ca.cert_pem(), foreign.cert_pem()]).unwrap();
    for (what, request) in refused(&ours_ca, &foreign) {
        let status = install(&addr, &operator, request, None)
            .await
            .expect_err(what);
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{what}: {status:?}"
        );
    }
    // Nothing changed: a new connection trusting only our CA still reaches that member
    // (the agent's client connects to member 1 without a certificate).
    let (agent, _) = registered(&dev, &client, "checker", false).await;
    still_serving(&agent).await;
    // Trusting a second CA beside ours is a valid install (the first step of a rotation).
    let answer = install(
        &addr,
        &operator,
        pb::InstallCredentialRequest {
            ca: both,
            ..Default::default()
        },
        None,
    )
    .await
    .expect("the operator may add a CA");
    assert_eq!(answer.trusted.len(), 2, "{answer:?}");
    still_serving(&client).await;
}
