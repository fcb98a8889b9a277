//! The security regression suite, each test written as the attacker: a gRPC client built
//! from the proto, with no certificate, another cluster's certificate, or a certificate of
//! the wrong kind, against a real 3-voter `whip cell dev` (separate process, TLS on). Every
//! attack must be refused with a typed error, the cell keeps serving, and a canary written
//! before is read back after. The compute-plane sidecar (`whip executor`) is attacked the
//! same way over hand-written HTTP (t80).

mod t10_transport;
mod t20_raft_input;
mod t30_reserved;
mod t35_engine_space;
mod t36_meta_cell;
mod t40_identity;
mod t41_principal_names;
mod t50_resources;
mod t52_connections;
mod t55_listing;
mod t56_watch;
mod t60_registry;
mod t65_team_state;
mod t65_team_state_prefetch;
mod t66_act_for;
mod t70_mail;
mod t80_executor;
mod t80_vote;
mod t85_idempotency;
mod t90_credentials;
mod t95_snapshot;

use std::path::Path;
use std::process::{Command, Output};

use whip_cell::tls::{self, Principal, Transport};
use whip_proto::v1 as pb;
use whip_tests::{DevCell, whip_binary};

/// Run the `whip` CLI in `dir`.
pub(crate) fn whip(dir: &Path, args: &[&str]) -> Output {
    Command::new(whip_binary())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run whip")
}

/// The CLI in `dir` with the test's own credentials file there (parallel tests share
/// `HOME`), no agent or cell from the environment.
pub(crate) fn cli(dir: &Path, args: &[&str]) -> Output {
    Command::new(whip_binary())
        .current_dir(dir)
        .env("WHIP_CREDENTIALS", dir.join("credentials.json"))
        .env_remove("WHIP_AGENT")
        .env_remove("WHIP_CELL")
        .args(args)
        .output()
        .expect("run whip")
}

/// A dev cell with canary key `canary` = `alive` written through the operator's client.
pub(crate) async fn target(dir: &Path) -> (DevCell, whip_cell::CellClient) {
    whip_tests::install_client();
    let dev = DevCell::start(dir);
    let client = whip_cell::CellClient::connect(&[dev.member(0), dev.member(1)]).unwrap();
    write_canary(&client).await;
    (dev, client)
}

/// Write the canary `canary` = `alive` that [`still_serving`] reads back.
pub(crate) async fn write_canary(client: &whip_cell::CellClient) {
    client
        .kv_put(pb::KvPutRequest {
            key: b"canary".to_vec(),
            value: b"alive".to_vec(),
            ..Default::default()
        })
        .await
        .expect("the canary is written");
}

/// The canary is still there and the cell still takes writes.
pub(crate) async fn still_serving(client: &whip_cell::CellClient) {
    let got = client
        .kv_get(pb::KvGetRequest {
            key: b"canary".to_vec(),
            ..Default::default()
        })
        .await
        .expect("the cell still answers");
    assert_eq!(got.value, b"alive", "the canary survived");
    client
        .kv_put(pb::KvPutRequest {
            key: b"after".to_vec(),
            value: b"ok".to_vec(),
            ..Default::default()
        })
        .await
        .expect("the cell still takes writes");
}

/// A credential of this user's cluster CA (the one the dev cell's certificates come from).
pub(crate) fn ours(role: Principal) -> Transport {
    let authority = tls::Authority::load(&tls::config_dir())
        .unwrap()
        .expect("the dev cell made the CA");
    Transport::tls(authority.credentials(role).unwrap())
}

/// TLS that trusts our CA but presents no certificate.
pub(crate) fn anonymous() -> Transport {
    whip_tests::ca_only_transport()
}

/// Register `name` (by the operator, or enrolled by `by`) and return its client (to member
/// 1, without a certificate) and token.
pub(crate) async fn registered(
    dev: &DevCell,
    by: &whip_cell::CellClient,
    name: &str,
    enroll: bool,
) -> (whip_cell::CellClient, String) {
    let made = by
        .agent_register(pb::AgentRegisterRequest {
            agent: name.into(),
            token: String::new(),
            enroll,
        })
        .await
        .unwrap();
    let client = whip_cell::CellClient::connect_with(&[dev.member(1)], &anonymous())
        .unwrap()
        .with_identity(name, made.token.clone());
    (client, made.token)
}

/// Call `path` with `message` as `agent` (its token in the metadata, no certificate): a
/// forger's request, which may carry fields the server's message does not have.
pub(crate) async fn forged_call<Req, Resp>(
    addr: &str,
    agent: (&str, &str),
    path: &'static str,
    message: Req,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    call_as(addr, Some(agent), None, (path, message)).await
}

/// Call `path` with `message` as `agent` (token in the metadata, no certificate), or with
/// this process's operator credential when `None`, naming `route` (`<cell>.<epoch>`) in the
/// `whip-route` header when given.
pub(crate) async fn call_as<Req, Resp>(
    addr: &str,
    agent: Option<(&str, &str)>,
    route: Option<&str>,
    (path, message): (&'static str, Req),
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    use tonic::metadata::MetadataValue;
    let mut request = tonic::Request::new(message);
    let headers = request.metadata_mut();
    let header = |v: &str| MetadataValue::try_from(v).expect("ascii metadata");
    if let Some(route) = route {
        headers.insert(whip_cell::direct::ROUTE_HEADER, header(route));
    }
    let transport = match agent {
        Some((agent, token)) => {
            headers.insert(whip_cell::identity::AGENT_HEADER, header(agent));
            headers.insert(whip_cell::identity::TOKEN_HEADER, header(token));
            anonymous()
        }
        None => whip_cell::tls::client_default(),
    };
    whip_tests::raw_request(addr, &transport, path, request).await
}

/// Send `body` to `path` as one unary call over `transport`.
pub(crate) async fn raw_call(
    addr: &str,
    transport: &Transport,
    path: &'static str,
    body: pb::Blob,
) -> Result<pb::Blob, tonic::Status> {
    whip_tests::raw_unary(addr, transport, path, body).await
}

/// Whether `answer` is the typed `not_member` refusal (a status detail, not message text).
pub(crate) fn is_not_member<T>(answer: &Result<T, whip_cell::CellError>) -> bool {
    matches!(
        answer,
        Err(whip_cell::CellError::Refused {
            code: whip_board::RefusalCode::NotMember,
            ..
        })
    )
}
