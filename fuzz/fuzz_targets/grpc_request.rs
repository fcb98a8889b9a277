//! Every gRPC request message of whip fabric, decoded from arbitrary bytes.
//!
//! The input is a run of calls `[method: u8][caller: u8][length: u16 LE][message bytes]`.
//! Calls to the client API (`whip.v1.Cell`, every unary method) go through the real tonic
//! service (`whip_cell::service::client_api`): tonic's codec decodes the message, the handler
//! converts it to a board command or query for the proven caller, and the board applies it
//! on an in-memory store (`board::apply` on `MemTxn`, the state machine every cell runs).
//! The calls of one input share that store, so a post can be claimed and completed. Two
//! agents (`alice`, `bob`) are registered first with known tokens. A call must never answer
//! `internal` (convert.rs: an answer the wire cannot carry is a bug). The peer and node APIs'
//! messages (`Admin`, `Raft` blobs with their postcard payloads, `Node`) are decoded and
//! re-encoded (prost round trip); forwarded requests and reads apply to the same store.
//! `Admin/InstallCredential` goes through the real Admin service on a node whose TLS
//! settings hold a fixed CA (`fixtures/ca-a.json`, a second CA in `ca-b.json` for a
//! rotation): a credential that does not parse, chain or share a CA is refused, never
//! `internal`.
//!
//! `WHIP_FUZZ_SEEDS=DIR` writes the seed corpus into DIR and exits.
#![no_main]

use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tonic::codegen::Service;
use whip_board::{MemTxn, Outcome, Query, QueryResult, Request, Stamp};
use whip_cell::CellError;
use whip_cell::service::{Cells, Dispatch, admin_api, client_api};
use whip_cell::tls::{Authority, Credentials, Principal, Tls, Transport};
use whip_proto::v1 as pb;

/// The unary methods of `whip.v1.Cell` (the streaming `Observe` and `SignalSubscribe` wait
/// for changes and have their own tests).
const CELL_METHODS: &[&str] = &[
    "KvGet",
    "KvPut",
    "KvDelete",
    "LeaseAcquire",
    "LeaseRenew",
    "LeaseRelease",
    "LeaseReleaseAll",
    "LeaseList",
    "CounterConsume",
    "CounterList",
    "LedgerAppend",
    "LedgerList",
    "Status",
    "KvTxn",
    "KvRange",
    "Campaign",
    "Proclaim",
    "Resign",
    "ElectionRenew",
    "Leader",
    "ScheduleFire",
    "AgentRegister",
    "TeamCreate",
    "TeamJoin",
    "TeamDissolve",
    "BoardPost",
    "BoardClaim",
    "BoardComplete",
    "BoardFail",
    "BoardExtend",
    "BoardRedrive",
    "BoardRelease",
    "BoardGet",
    "BoardList",
    "BoardDeadLetters",
    "BoardStats",
    "Mailbox",
    "SignalPublish",
    "WorkRegister",
    "WorkRenew",
    "WorkSignal",
    "WorkRevoke",
    "WorkScope",
    "WorkList",
    "WorkLimits",
    "WorkAudit",
    "MailSend",
    "MailInbox",
    "MailAck",
    "MailTake",
    "MailGrant",
    "MailRelease",
];

/// The peer and node APIs' requests, decoded only (selectors after the client API's).
const PEER_MESSAGES: &[&str] = &[
    "Admin/Init",
    "Admin/AddLearner",
    "Admin/ChangeMembership",
    "Raft/AppendEntries",
    "Raft/Vote",
    "Raft/InstallSnapshot",
    "Raft/Forward",
    "Raft/Read",
    "Node/CreateCell",
    "Node/FabricInit",
    "Node/FabricStatus",
    "Node/RangeMove",
    "Node/RangeSplit",
    "Node/Deliver",
    "Node/ChannelReset",
];

/// Methods added after the first corpus was made. Their selectors follow the peer
/// messages', so a selector byte below the first tables' total keeps its meaning.
const ADDED_CELL_METHODS: &[&str] = &[
    "Routes",
    "TeamRole",
    "VoteOpen",
    "VoteCast",
    "VoteClose",
    "VoteShow",
    "VoteBallots",
    "VoteList",
    "KvKeepalive",
    "KvTxnIf",
    "PathsReserve",
    "PathsRelease",
    "PathsList",
    "WaitApplied",
];
const ADDED_PEER_MESSAGES: &[&str] = &[
    "Admin/InstallCredential",
    "Node/RangeProgress",
    "Raft/AppendBatch",
    "Admin/SnapshotSave",
    "Node/RestoreCell",
    "Node/FabricRestore",
];

/// Every selector's table in order: (names, whether they are client API methods).
const TABLES: [(&[&str], bool); 4] = [
    (CELL_METHODS, true),
    (PEER_MESSAGES, false),
    (ADDED_CELL_METHODS, true),
    (ADDED_PEER_MESSAGES, false),
];

/// What a call's selector byte names.
enum Call {
    /// A client API method (`whip.v1.Cell/NAME`).
    Cell(&'static str),
    /// A peer or node API message (`Service/Method`).
    Peer(&'static str),
}

fn call_of(selector: u8) -> Call {
    let total: usize = TABLES.iter().map(|(t, _)| t.len()).sum();
    let mut at = usize::from(selector) % total;
    for (table, cell) in TABLES {
        if at < table.len() {
            return if cell {
                Call::Cell(table[at])
            } else {
                Call::Peer(table[at])
            };
        }
        at -= table.len();
    }
    unreachable!("the selector is below the tables' total")
}

fn selector_of(name: &str) -> u8 {
    let all = TABLES.iter().flat_map(|(t, _)| t.iter());
    let at = all
        .clone()
        .position(|n| *n == name)
        .expect("a known method");
    u8::try_from(at).expect("fewer than 256 methods")
}

/// Most calls one input makes.
const CALLS_MAX: usize = 24;
const START_MS: u64 = 1_784_000_000_000;
const AGENTS: [(&str, &str); 2] = [
    ("alice", "alice-token-0123456789abcdef0123456789"),
    ("bob", "bob-token-0123456789abcdef0123456789abc"),
];

/// A cell's state machine without Raft: each request applies at the next log index.
#[derive(Default)]
struct Board {
    state: Mutex<(MemTxn, u64)>,
}

impl Board {
    fn apply(&self, request: &Request) -> Outcome {
        let mut state = self.state.lock().expect("board lock");
        let (txn, index) = &mut *state;
        *index += 1;
        let stamp = Stamp {
            index: *index,
            position: 0,
            time_ms: START_MS + *index * 250,
        };
        whip_board::apply(txn, stamp, request).outcome
    }

    fn query(&self, query: &Query) -> QueryResult {
        let state = self.state.lock().expect("board lock");
        whip_board::query(&state.0, START_MS + state.1 * 250, query)
    }
}

#[tonic::async_trait]
impl Dispatch for Board {
    /// As a cell answers: the board's refusals of the request itself become errors.
    async fn submit(&self, request: Request) -> Result<Outcome, CellError> {
        CellError::answer(self.apply(&request))
    }

    async fn read(&self, query: Query) -> Result<QueryResult, CellError> {
        Ok(self.query(&query))
    }

    async fn status(&self, _cell: u64) -> Result<pb::StatusResponse, CellError> {
        Ok(pb::StatusResponse::default())
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    })
}

/// One gRPC frame: uncompressed flag, big-endian length, message.
fn frame(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    Bytes::from(out)
}

/// A gRPC request for `path` carrying `message`, as `caller` (0 operator, 1 local, 2 node,
/// 3 anonymous, 4.. an agent by its token).
fn grpc_request(path: &str, caller: u8, message: &[u8]) -> http::Request<Body> {
    let body = http_body_util::Full::new(frame(message));
    let mut request = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    let principal = match caller % 6 {
        0 => Principal::Operator,
        1 => Principal::Local,
        2 => Principal::Node,
        _ => Principal::Anonymous,
    };
    if let Some((agent, token)) = AGENTS.get(usize::from(caller % 6).saturating_sub(4)) {
        if caller % 6 >= 4 {
            request = request
                .header("x-whip-agent", *agent)
                .header("x-whip-token", *token);
        }
    }
    let mut request = request.body(body).expect("a well-formed request");
    request.extensions_mut().insert(principal);
    request
}

type Body = http_body_util::Full<Bytes>;

/// The answer's gRPC status code (None: OK); an `internal` answer is a bug.
fn status_of<B>(path: &str, response: &http::Response<B>) -> Option<String> {
    let status = response
        .headers()
        .get("grpc-status")?
        .to_str()
        .ok()?
        .to_string();
    if status == "13" {
        let message = response.headers().get("grpc-message");
        panic!("{path} answered internal: {message:?}");
    }
    Some(status)
}

/// Call `method` of the client API with `message` for `caller`; the answer's status code.
async fn call(board: &Arc<Board>, method: &str, caller: u8, message: &[u8]) -> Option<String> {
    let path = format!("/whip.v1.Cell/{method}");
    let request = grpc_request(&path, caller, message);
    let mut api = client_api(board.clone());
    let response = api.call(request).await.expect("tonic answers every call");
    status_of(&path, &response)
}

/// A node serving with the fixed CA A's trust bundle and a node certificate of it.
struct Server {
    transport: Transport,
}

impl Cells for Server {
    fn cell(&self, _id: u64) -> Option<whip_cell::Cell> {
        None
    }

    fn rpc_stats(&self) -> whip_cell::metrics::RpcStats {
        whip_cell::metrics::RpcStats::default()
    }

    fn transport(&self) -> Transport {
        self.transport.clone()
    }
}

/// The fixed CAs: `a` is trusted now, `b` is the one a rotation moves to.
fn authority(name: &str) -> &'static Authority {
    static A: OnceLock<Authority> = OnceLock::new();
    static B: OnceLock<Authority> = OnceLock::new();
    let cell = if name == "a" { &A } else { &B };
    cell.get_or_init(|| {
        let path = format!("{}/fixtures/ca-{name}.json", env!("CARGO_MANIFEST_DIR"));
        Authority::load_file(std::path::Path::new(&path))
            .expect("the fixture CA loads")
            .expect("the fixture CA exists")
    })
}

fn node_credentials() -> &'static Credentials {
    static NODE: OnceLock<Credentials> = OnceLock::new();
    NODE.get_or_init(|| {
        authority("a")
            .credentials(Principal::Node)
            .expect("a node credential")
    })
}

/// `Admin/InstallCredential` with `message` on a fresh node of CA A (no kept file).
async fn install_credential(message: &[u8]) {
    let tls = Tls::new(node_credentials().clone(), None).expect("the fixture credential serves");
    let server = Server {
        transport: Transport::Tls(Arc::new(tls)),
    };
    let path = "/whip.v1.Admin/InstallCredential";
    let mut api = admin_api(Arc::new(server));
    let response = api
        .call(grpc_request(path, 0, message))
        .await
        .expect("tonic answers every call");
    status_of(path, &response);
}

fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Option<M> {
    let message = M::decode(bytes).ok()?;
    let again = M::decode(message.encode_to_vec().as_slice()).expect("re-encoded bytes decode");
    assert_eq!(again, message, "prost round trip");
    Some(message)
}

/// A Raft blob's payload, decoded as the receiving handler does.
fn blob<T: for<'de> serde::Deserialize<'de>>(bytes: &[u8]) -> Option<T> {
    let blob: pb::Blob = round_trip(bytes)?;
    whip_cell::types::decode(&blob.data).ok()
}

fn peer(board: &Board, name: &str, bytes: &[u8]) {
    use whip_cell::types::TypeConfig;
    match name {
        "Admin/Init" => drop(round_trip::<pb::InitRequest>(bytes)),
        "Admin/AddLearner" => drop(round_trip::<pb::AddLearnerRequest>(bytes)),
        "Admin/ChangeMembership" => drop(round_trip::<pb::ChangeMembershipRequest>(bytes)),
        "Raft/AppendEntries" => drop(blob::<openraft::raft::AppendEntriesRequest<TypeConfig>>(
            bytes,
        )),
        "Raft/Vote" => drop(blob::<openraft::raft::VoteRequest<u64>>(bytes)),
        "Raft/InstallSnapshot" => drop(blob::<openraft::raft::InstallSnapshotRequest<TypeConfig>>(
            bytes,
        )),
        "Raft/Forward" => {
            for request in blob::<Vec<Request>>(bytes).unwrap_or_default() {
                board.apply(&request);
            }
        }
        "Raft/Read" => drop(blob::<Query>(bytes).map(|q| board.query(&q))),
        "Node/CreateCell" => drop(round_trip::<pb::CreateCellRequest>(bytes)),
        "Node/FabricInit" => drop(round_trip::<pb::FabricInitRequest>(bytes)),
        "Node/FabricStatus" => drop(round_trip::<pb::FabricStatusRequest>(bytes)),
        "Node/RangeMove" => drop(round_trip::<pb::RangeMoveRequest>(bytes)),
        "Node/RangeSplit" => drop(round_trip::<pb::RangeSplitRequest>(bytes)),
        "Node/Deliver" => {
            let deliver = round_trip::<pb::DeliverRequest>(bytes).unwrap_or_default();
            for envelope in std::iter::once(&deliver.envelope).chain(&deliver.envelopes) {
                let _ = whip_fabric::Envelope::from_bytes(envelope);
            }
        }
        "Node/ChannelReset" => drop(round_trip::<pb::ChannelResetRequest>(bytes)),
        "Node/RangeProgress" => drop(round_trip::<pb::RangeProgressRequest>(bytes)),
        "Admin/SnapshotSave" => drop(round_trip::<pb::SnapshotSaveRequest>(bytes)),
        "Node/RestoreCell" => drop(round_trip::<pb::RestoreCellChunk>(bytes)),
        "Node/FabricRestore" => drop(round_trip::<pb::FabricRestoreRequest>(bytes)),
        "Raft/AppendBatch" => {
            let batch = round_trip::<pb::BlobBatch>(bytes).unwrap_or_default();
            for blob in batch.blobs {
                let rpc: Option<openraft::raft::AppendEntriesRequest<TypeConfig>> =
                    whip_cell::types::decode(&blob.data).ok();
                drop(rpc);
            }
        }
        other => unreachable!("{other} is not a decoded-only message"),
    }
}

/// The calls of an input: (selector, caller, message).
fn calls(mut data: &[u8]) -> Vec<(u8, u8, &[u8])> {
    let mut out = Vec::new();
    while out.len() < CALLS_MAX && data.len() >= 4 {
        let len = usize::from(u16::from_le_bytes([data[2], data[3]])).min(data.len() - 4);
        out.push((data[0], data[1], &data[4..4 + len]));
        data = &data[4 + len..];
    }
    out
}

async fn register_agents(board: &Arc<Board>) {
    for (agent, token) in AGENTS {
        let register = pb::AgentRegisterRequest {
            agent: agent.into(),
            token: token.into(),
            enroll: false,
        };
        let status = call(board, "AgentRegister", 0, &register.encode_to_vec()).await;
        assert_eq!(status, None, "registering {agent} succeeds");
    }
}

fn run(data: &[u8]) {
    let board = Arc::new(Board::default());
    runtime().block_on(async {
        register_agents(&board).await;
        for (selector, caller, message) in calls(data) {
            match call_of(selector) {
                Call::Cell(method) => drop(call(&board, method, caller, message).await),
                Call::Peer("Admin/InstallCredential") => install_credential(message).await,
                Call::Peer(name) => peer(&board, name, message),
            }
        }
    });
}

fuzz_target!(
    init: whip_fuzz::write_seeds_if_asked(write_seeds),
    |data: &[u8]| run(data)
);

fn encode_call(out: &mut Vec<u8>, method: &str, caller: u8, message: &impl Message) {
    let bytes = message.encode_to_vec();
    out.push(selector_of(method));
    out.push(caller);
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(&bytes);
}

fn resource(owner: &str, name: &str) -> Option<pb::ResourceId> {
    Some(pb::ResourceId {
        owner: owner.into(),
        name: name.into(),
        key: "k".into(),
    })
}

/// Alice (caller 4) creates the team `crew`: the first call of the team seeds.
fn crew_created() -> Vec<u8> {
    let mut out = Vec::new();
    let create = pb::TeamCreateRequest {
        team: "crew".into(),
        ..Default::default()
    };
    encode_call(&mut out, "TeamCreate", 4, &create);
    out
}

/// A team's life as alice: create, post, claim, then mail bob.
fn team_seed() -> Vec<u8> {
    let mut out = crew_created();
    let team = "crew".to_string();
    let post = pb::BoardPostRequest {
        team: team.clone(),
        body: b"{}".to_vec(),
        ..Default::default()
    };
    encode_call(&mut out, "BoardPost", 4, &post);
    let claim = pb::BoardClaimRequest {
        team,
        worker: "alice".into(),
        ..Default::default()
    };
    encode_call(&mut out, "BoardClaim", 4, &claim);
    let mail = pb::MailSendRequest {
        to: "agent:bob".into(),
        text: "hi".into(),
        ..Default::default()
    };
    encode_call(&mut out, "MailSend", 4, &mail);
    out
}

/// The primitives as the operator (caller 0).
fn primitives_seed() -> Vec<u8> {
    let mut out = Vec::new();
    let put = pb::KvPutRequest {
        key: b"a".to_vec(),
        value: b"1".to_vec(),
        expect_version: Some(0),
        idempotency_key: "c/1".into(),
        ..Default::default()
    };
    encode_call(&mut out, "KvPut", 0, &put);
    encode_call(
        &mut out,
        "KvGet",
        0,
        &pb::KvGetRequest {
            key: b"a".to_vec(),
            ..Default::default()
        },
    );
    let lease = pb::LeaseAcquireRequest {
        lease: resource("o", "deploy"),
        holder: "h".into(),
        slots: 1,
        ttl_ms: 10_000,
        ..Default::default()
    };
    encode_call(&mut out, "LeaseAcquire", 0, &lease);
    let counter = pb::CounterConsumeRequest {
        counter: resource("o", "tokens"),
        amount: 1,
        cap: 5,
        timezone: "UTC".into(),
        ..Default::default()
    };
    encode_call(&mut out, "CounterConsume", 0, &counter);
    out
}

/// A team's vote as alice, its supervisor: a role, a proposal, a ballot, a close.
fn vote_seed() -> Vec<u8> {
    let mut out = crew_created();
    let team = "crew".to_string();
    let role = pb::TeamRoleRequest {
        team: team.clone(),
        member: "alice".into(),
        role: "coordinator".into(),
        ..Default::default()
    };
    encode_call(&mut out, "TeamRole", 4, &role);
    let open = pb::VoteOpenRequest {
        team,
        title: "ship".into(),
        options: vec!["yes".into(), "no".into()],
        ..Default::default()
    };
    encode_call(&mut out, "VoteOpen", 4, &open);
    // Proposals are named `team#fence`; here the fence of the open (the fifth apply).
    let proposal = "crew#5".to_string();
    let cast = pb::VoteCastRequest {
        proposal: proposal.clone(),
        choice: vec!["yes".into()],
        ..Default::default()
    };
    encode_call(&mut out, "VoteCast", 4, &cast);
    let close = pb::VoteCloseRequest {
        proposal,
        ..Default::default()
    };
    encode_call(&mut out, "VoteClose", 4, &close);
    encode_call(&mut out, "Routes", 4, &pb::RoutesRequest::default());
    out
}

/// Installs on a node of CA A: the same bundle (keep the certificate), the bundle of both
/// CAs with a node certificate of B (a rotation's first steps), and B alone (refused).
fn install_seeds() -> Vec<(&'static str, pb::InstallCredentialRequest)> {
    let (a, b) = (authority("a"), authority("b"));
    let both = whip_cell::tls::bundle(&[a.cert_pem(), b.cert_pem()]).expect("a bundle");
    let of_b = b.issue(Principal::Node).expect("a node certificate of B");
    let install = |ca: &str, identity: Option<&whip_cell::tls::Pem>| pb::InstallCredentialRequest {
        ca: ca.to_string(),
        cert: identity.map(|p| p.cert.clone()).unwrap_or_default(),
        key: identity.map(|p| p.key.clone()).unwrap_or_default(),
    };
    vec![
        ("install-keep", install(a.cert_pem(), None)),
        ("install-rotate", install(&both, Some(&of_b))),
        ("install-other-ca", install(b.cert_pem(), Some(&of_b))),
    ]
}

fn write_seeds(dir: &std::path::Path) {
    std::fs::write(dir.join("team"), team_seed()).expect("seed file");
    std::fs::write(dir.join("primitives"), primitives_seed()).expect("seed file");
    std::fs::write(dir.join("vote"), vote_seed()).expect("seed file");
    for (name, request) in install_seeds() {
        let bytes = request.encode_to_vec();
        let mut call = vec![selector_of("Admin/InstallCredential"), 0];
        call.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        call.extend_from_slice(&bytes);
        std::fs::write(dir.join(name), call).expect("seed file");
    }
    // One empty message per method and caller kind: every handler from the start.
    let methods = CELL_METHODS.iter().chain(ADDED_CELL_METHODS);
    for method in methods {
        let selector = selector_of(method);
        let calls: Vec<u8> = (0..6u8).flat_map(|c| [selector, c, 0, 0]).collect();
        std::fs::write(dir.join(format!("empty-{method}")), calls).expect("seed file");
    }
}
