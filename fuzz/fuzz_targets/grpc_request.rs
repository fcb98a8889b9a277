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
use whip_cell::service::{Dispatch, client_api};
use whip_cell::tls::Principal;
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
        whip_board::apply(txn, stamp, request)
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

/// Call `method` of the client API with `message` for `caller` (0 operator, 1 local,
/// 2 node, 3 anonymous, 4.. an agent by its token); the answer's gRPC status code.
async fn call(board: &Arc<Board>, method: &str, caller: u8, message: &[u8]) -> Option<String> {
    let body = http_body_util::Full::new(frame(message));
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("/whip.v1.Cell/{method}"))
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
    let mut api = client_api(board.clone());
    let response = api.call(request).await.expect("tonic answers every call");
    let status = response
        .headers()
        .get("grpc-status")?
        .to_str()
        .ok()?
        .to_string();
    if status == "13" {
        let message = response.headers().get("grpc-message");
        panic!("{method} answered internal: {message:?}");
    }
    Some(status)
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
        _ => drop(round_trip::<pb::ChannelResetRequest>(bytes)),
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
            let selector = usize::from(selector) % (CELL_METHODS.len() + PEER_MESSAGES.len());
            match CELL_METHODS.get(selector) {
                Some(method) => drop(call(&board, method, caller, message).await),
                None => peer(
                    &board,
                    PEER_MESSAGES[selector - CELL_METHODS.len()],
                    message,
                ),
            }
        }
    });
}

fuzz_target!(
    init: whip_fuzz::write_seeds_if_asked(write_seeds),
    |data: &[u8]| run(data)
);

fn encode_call(out: &mut Vec<u8>, method: &str, caller: u8, message: &impl Message) {
    let selector = CELL_METHODS
        .iter()
        .position(|m| *m == method)
        .expect("a client method");
    let bytes = message.encode_to_vec();
    out.push(selector as u8);
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

/// A team's life as alice (caller 4): create, post, claim, then mail bob.
fn team_seed() -> Vec<u8> {
    let mut out = Vec::new();
    let team = "crew".to_string();
    let create = pb::TeamCreateRequest {
        team: team.clone(),
        ..Default::default()
    };
    encode_call(&mut out, "TeamCreate", 4, &create);
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
    };
    encode_call(&mut out, "KvPut", 0, &put);
    encode_call(
        &mut out,
        "KvGet",
        0,
        &pb::KvGetRequest { key: b"a".to_vec() },
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

fn write_seeds(dir: &std::path::Path) {
    std::fs::write(dir.join("team"), team_seed()).expect("seed file");
    std::fs::write(dir.join("primitives"), primitives_seed()).expect("seed file");
    // One empty message per method and caller kind: every handler from the start.
    for (selector, method) in CELL_METHODS.iter().enumerate() {
        let calls: Vec<u8> = (0..6u8).flat_map(|c| [selector as u8, c, 0, 0]).collect();
        std::fs::write(dir.join(format!("empty-{method}")), calls).expect("seed file");
    }
}
