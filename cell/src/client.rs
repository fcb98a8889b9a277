//! A typed client of a cell: any member's address (or the embedded store's local socket),
//! retries while leadership moves, and an idempotency key on every write so a retry never
//! applies twice. Given a [`Router`] (a fabric's range map, from `whip-fabric`), it sends
//! each plain keyed write straight to the node the router picks, naming the route
//! ([`crate::direct`]), and tells the router what that node answered.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};
use tonic::{Response, Status};
use whip_board::Command;
use whip_proto::v1 as pb;
use whip_proto::v1::admin_client::AdminClient;
use whip_proto::v1::cell_client::CellClient as GrpcCellClient;

use crate::convert;
use crate::direct::Direct;
use crate::error::CellError;
use crate::limits;
use crate::network::endpoint;
use crate::runtime::Cell;
use crate::service::CellApi;
use whip_proto::v1::cell_server::Cell as CellService;

/// Where a client connects.
#[derive(Clone, Debug)]
pub enum Target {
    /// One or more members' `host:port`; requests rotate to the next one when one fails.
    Tcp(Vec<String>),
    /// The local socket of an embedded cell held by another process.
    Unix(PathBuf),
}

mod wait;
mod watch;
pub use wait::Waiter;
pub use watch::{WatchBatch, WatchEnd, WatchStream};

/// A stream of election leader changes (see [`CellClient::observe`]).
pub type LeaderStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<pb::LeaderResponse, Status>> + Send + 'static>,
>;

/// A stream of team signals (see [`CellClient::signal_subscribe`]).
pub type SignalStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<pb::LedgerEntry, Status>> + Send + 'static>,
>;

/// Where a client sends a keyed write when it knows more than its member list (a fabric's
/// range map): the node hosting the leader of the cell owning the command's key, and the
/// route the request names there. The client reports each failed pick, so the router can
/// look again.
#[tonic::async_trait]
pub trait Router: Send + Sync + 'static {
    /// Where to send `command`, or `None` for the client's own path (any member).
    async fn pick(&self, client: &CellClient, command: &Command) -> Option<Pick>;
    /// A picked call failed with `err` (`NotLeader`, `WrongRange` or `Unavailable`).
    fn failed(&self, pick: &Pick, err: &CellError);
}

/// A [`Router`]'s choice for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pick {
    /// The node to call (`host:port`).
    pub addr: String,
    /// The cell and epoch the request names there.
    pub route: Direct,
}

/// How long a call keeps retrying an unavailable cell before giving up.
pub const RETRY_FOR_MS: u64 = 10_000;

/// Who a client's calls act for: an agent proven by its token, and the agent it acts for
/// without its token (the operator's credential acting for an instance's owner).
#[derive(Clone, Debug, Default)]
struct Credentials {
    agent: Option<(String, String)>,
    act_for: Option<String>,
}

/// A typed, retrying client of one cell.
pub struct CellClient {
    channels: Vec<Channel>,
    /// The address of each channel (empty for a local socket), to follow a leader hint.
    addrs: Vec<String>,
    /// A cell in this process: calls go straight to its service handlers (same validation,
    /// same Raft path) without a transport.
    local: Option<Arc<CellApi>>,
    next: AtomicUsize,
    client_id: u64,
    seq: AtomicU64,
    retry_for: Duration,
    attempt_timeout: Duration,
    /// The agent this client acts for (with its token, or named for the operator's
    /// credential), sent as metadata on every call.
    identity: Credentials,
    /// Picks the node for plain keyed writes; `None`: any member.
    router: Option<Arc<dyn Router>>,
    /// Channels to the nodes the router picked, by address.
    direct: std::sync::Mutex<HashMap<String, Channel>>,
    /// The transport of [`CellClient::connect_with`]; `None`: the process's default.
    transport: Option<crate::tls::Transport>,
}

impl CellClient {
    /// A client of `target`; connections open lazily on first use.
    pub fn new(target: Target) -> Result<Self, CellError> {
        let (channels, addrs) = match target {
            Target::Tcp(addrs) if addrs.is_empty() => {
                return Err(CellError::InvalidArgument("no cell address given".into()));
            }
            Target::Tcp(addrs) => {
                let channels = addrs.iter().map(|a| endpoint(a).connect_lazy()).collect();
                (channels, addrs)
            }
            Target::Unix(path) => (vec![unix_channel(path)], vec![String::new()]),
        };
        Ok(CellClient::of_channels(channels, addrs))
    }

    fn of_channels(channels: Vec<Channel>, addrs: Vec<String>) -> Self {
        let client_id = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        CellClient {
            channels,
            addrs,
            local: None,
            next: AtomicUsize::new(0),
            client_id,
            seq: AtomicU64::new(0),
            retry_for: Duration::from_millis(RETRY_FOR_MS),
            attempt_timeout: Duration::from_millis(limits::CLIENT_ATTEMPT_TIMEOUT_MS),
            identity: Credentials::default(),
            router: None,
            direct: std::sync::Mutex::new(HashMap::new()),
            transport: None,
        }
    }

    /// A client of a cell running in this process (the embedded store's holder). It dials
    /// nothing, so it never asks for the process's client transport (and so never makes
    /// credentials for it).
    pub fn local(cell: Cell) -> Self {
        let mut client = CellClient::of_channels(Vec::new(), vec!["local".to_string()]);
        client.local = Some(Arc::new(CellApi::new(Arc::new(cell))));
        client
    }

    /// The first channel, or an error for an in-process client (which has none).
    fn first_channel(&self) -> Result<Channel, CellError> {
        self.channels
            .first()
            .cloned()
            .ok_or_else(|| CellError::InvalidArgument("not available on an in-process cell".into()))
    }

    /// A client of the members at `addrs`, over this process's default transport.
    pub fn connect(addrs: &[String]) -> Result<Self, CellError> {
        CellClient::new(Target::Tcp(addrs.to_vec()))
    }

    /// A client of the members at `addrs` over `transport` (another credential than the
    /// process's default).
    pub fn connect_with(
        addrs: &[String],
        transport: &crate::tls::Transport,
    ) -> Result<Self, CellError> {
        let mut client = CellClient::new(Target::Tcp(addrs.to_vec()))?;
        client.channels = addrs
            .iter()
            .map(|a| crate::network::endpoint_with(a, transport).connect_lazy())
            .collect();
        client.transport = Some(transport.clone());
        Ok(client)
    }

    /// Change how long calls retry while the cell is unavailable.
    pub fn with_retry_for(mut self, retry_for: Duration) -> Self {
        self.retry_for = retry_for;
        self
    }

    /// Change how long one attempt may take before the call moves to the next member.
    pub fn with_attempt_timeout(mut self, attempt_timeout: Duration) -> Self {
        self.attempt_timeout = attempt_timeout;
        self
    }

    /// A fresh idempotency key: this client's random id and a sequence number.
    pub fn next_idempotency_key(&self) -> String {
        format!(
            "c{:016x}-{}",
            self.client_id,
            self.seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Send plain keyed writes where `router` picks (see [`Router`]).
    pub fn with_router(mut self, router: Arc<dyn Router>) -> Self {
        self.router = Some(router);
        self
    }

    /// Act for `agent`, proven by `token` (see [`crate::identity`]).
    pub fn with_identity(mut self, agent: impl Into<String>, token: impl Into<String>) -> Self {
        self.identity.agent = Some((agent.into(), token.into()));
        self
    }

    /// A client of the same members and credential that acts for `agent` without its
    /// token ([`crate::identity::ACT_FOR_HEADER`]): the operator's worker acting as the
    /// owner of an instance. The server lets only the operator, a node or the agent itself.
    pub fn acting_for(&self, agent: &str) -> CellClient {
        let client_id = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        CellClient {
            channels: self.channels.clone(),
            addrs: self.addrs.clone(),
            local: self.local.clone(),
            next: AtomicUsize::new(self.next.load(Ordering::Relaxed)),
            client_id,
            seq: AtomicU64::new(0),
            retry_for: self.retry_for,
            attempt_timeout: self.attempt_timeout,
            identity: Credentials {
                agent: self.identity.agent.clone(),
                act_for: Some(agent.to_string()),
            },
            router: self.router.clone(),
            direct: std::sync::Mutex::new(HashMap::new()),
            transport: self.transport.clone(),
        }
    }

    /// The agent and token this client acts for, if any.
    pub fn identity(&self) -> Option<(String, String)> {
        self.identity.agent.clone()
    }

    /// `req` as a gRPC request carrying this client's identity metadata.
    fn request<T>(identity: &Credentials, req: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(req);
        let metadata = request.metadata_mut();
        if let Some((agent, token)) = &identity.agent
            && let (Ok(agent), Ok(token)) = (agent.parse(), token.parse())
        {
            metadata.insert(crate::identity::AGENT_HEADER, agent);
            metadata.insert(crate::identity::TOKEN_HEADER, token);
        }
        if let Some(Ok(agent)) = identity.act_for.as_ref().map(|a| a.parse()) {
            metadata.insert(crate::identity::ACT_FOR_HEADER, agent);
        }
        request
    }

    /// `req` for the in-process service: the caller is the local user (an extension, which
    /// no transport carries).
    fn local_request<T>(identity: &Credentials, req: T) -> tonic::Request<T> {
        let mut request = Self::request(identity, req);
        request
            .extensions_mut()
            .insert(crate::tls::Principal::Local);
        request
    }

    fn key_or_new(&self, key: &mut String) {
        if key.is_empty() {
            *key = self.next_idempotency_key();
        }
    }

    /// Run `call` against the current member, rotating members and backing off while the
    /// cell answers `unavailable`, up to the retry bound. The same request (and so the same
    /// idempotency key) is sent every time.
    async fn call<T, F, Fut>(&self, call: F) -> Result<T, CellError>
    where
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        if self.channels.is_empty() {
            return Err(CellError::InvalidArgument(
                "not available on an in-process cell".into(),
            ));
        }
        let deadline = tokio::time::Instant::now() + self.retry_for;
        // Short, capped pauses: a new leader is usually elected within one election timeout,
        // and the client should be among the first to reach it.
        let mut backoff = Duration::from_millis(10);
        let mut followed_hint = false;
        loop {
            let index = self.next.load(Ordering::Relaxed) % self.channels.len();
            let attempt =
                tokio::time::timeout(self.attempt_timeout, call(self.channels[index].clone()));
            let result = attempt.await.unwrap_or_else(|_| {
                Err(Status::unavailable(format!(
                    "no answer within {} ms",
                    self.attempt_timeout.as_millis()
                )))
            });
            match result {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) if retryable(&status) && tokio::time::Instant::now() < deadline => {
                    tracing::debug!(member = index, error = %status.message(), "retrying");
                    // A member that names the leader: go straight there, once without a pause.
                    match self.leader_hint(&status) {
                        Some(leader) if leader != index => {
                            self.next.store(leader, Ordering::Relaxed);
                            if followed_hint {
                                tokio::time::sleep(backoff).await;
                            }
                            followed_hint = true;
                        }
                        _ => {
                            self.next.store(index + 1, Ordering::Relaxed);
                            tokio::time::sleep(backoff).await;
                        }
                    }
                    backoff = (backoff * 2).min(Duration::from_millis(100));
                }
                Err(status) => return Err(self.failed_at(index, status)),
            }
        }
    }

    /// Run `call` at the node the router picks for `command`, naming the route; look again
    /// after each `NotLeader`, `WrongRange` or unreachable node, up to
    /// `CLIENT_DIRECT_ATTEMPTS_MAX` tries, then through any member as [`CellClient::call`]
    /// does. The same request (and idempotency key) goes out every time, so a try that
    /// applied without answering is answered from its record by the next.
    async fn call_routed<T, F, Fut>(
        &self,
        command: Option<Command>,
        call: F,
    ) -> Result<T, CellError>
    where
        F: Fn(Channel, Option<Direct>) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        if let (Some(router), Some(command)) = (&self.router, command) {
            let mut backoff = Duration::from_millis(10);
            for _ in 0..limits::CLIENT_DIRECT_ATTEMPTS_MAX {
                let Some(pick) = router.pick(self, &command).await else {
                    break;
                };
                let channel = self.direct_channel(&pick.addr);
                let attempt =
                    tokio::time::timeout(self.attempt_timeout, call(channel, Some(pick.route)));
                let status = match attempt.await {
                    Ok(Ok(response)) => return Ok(response.into_inner()),
                    Ok(Err(status)) => status,
                    Err(_) => Status::unavailable(format!("{}: no answer in time", pick.addr)),
                };
                let err = CellError::from(status);
                router.failed(&pick, &err);
                match err {
                    CellError::NotLeader { .. } | CellError::WrongRange { .. } => {}
                    CellError::Unavailable(_) => {
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                    }
                    other => return Err(other),
                }
            }
        }
        self.call(|channel| call(channel, None)).await
    }

    /// The channel to `addr`, a node the router picked.
    fn direct_channel(&self, addr: &str) -> Channel {
        let mut channels = self.direct.lock().expect("direct channels lock");
        if channels.len() >= limits::CLIENT_DIRECT_CHANNELS_MAX && !channels.contains_key(addr) {
            channels.clear();
        }
        let endpoint = |addr: &str| match &self.transport {
            Some(transport) => crate::network::endpoint_with(addr, transport),
            None => endpoint(addr),
        };
        channels
            .entry(addr.to_string())
            .or_insert_with(|| endpoint(addr).connect_lazy())
            .clone()
    }

    /// The error of a call that gave up on member `index`; a member that could not be
    /// reached is named, so a mistyped `--cell` says which address failed.
    fn failed_at(&self, index: usize, status: Status) -> CellError {
        match CellError::from(status) {
            CellError::Unavailable(m) => {
                let addr = self.addrs.get(index).map_or("?", String::as_str);
                CellError::Unavailable(format!("{addr}: {m}"))
            }
            other => other,
        }
    }

    /// The channel of the leader a `NotLeader` status names, if it is one of ours.
    fn leader_hint(&self, status: &Status) -> Option<usize> {
        match crate::error::from_detail(status)? {
            CellError::NotLeader { hint: Some(addr) } => self.addrs.iter().position(|a| *a == addr),
            _ => None,
        }
    }

    fn cell(channel: Channel) -> GrpcCellClient<Channel> {
        GrpcCellClient::new(channel)
            .max_decoding_message_size(limits::MESSAGE_BYTES_MAX)
            .max_encoding_message_size(limits::MESSAGE_BYTES_MAX)
    }
}

fn retryable(status: &Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::Cancelled
            | tonic::Code::DeadlineExceeded
    )
}

/// Answer from the in-process cell's service, when this client is one (the same
/// validation and Raft path, no transport).
macro_rules! local_answer {
    ($client:expr, $name:ident, $req:ident) => {
        if let Some(api) = &$client.local {
            let request = Self::local_request(&$client.identity, $req);
            return Ok(CellService::$name(api.as_ref(), request)
                .await?
                .into_inner());
        }
    };
}

/// Generate one typed method per unary RPC of the Cell service. Writes get an idempotency
/// key when the caller did not set one.
macro_rules! reads {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {$(
        #[doc = concat!(
            "Call `", stringify!($name), "` on the cell, retrying while it is unavailable."
        )]
        pub async fn $name(&self, req: $req) -> Result<$resp, CellError> {
            local_answer!(self, $name, req);
            let identity = &self.identity;
            self.call(|ch| {
                let request = Self::request(identity, req.clone());
                async move { Self::cell(ch).$name(request).await }
            })
            .await
        }
    )*};
}

macro_rules! writes {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {$(
        #[doc = concat!(
            "Call `", stringify!($name),
            "` on the cell with an idempotency key, retrying while it is unavailable."
        )]
        pub async fn $name(&self, mut req: $req) -> Result<$resp, CellError> {
            self.key_or_new(&mut req.idempotency_key);
            local_answer!(self, $name, req);
            let identity = &self.identity;
            self.call(|ch| {
                let request = Self::request(identity, req.clone());
                async move { Self::cell(ch).$name(request).await }
            })
            .await
        }
    )*};
}

/// Like `writes!`, for the plain keyed writes a [`Router`] may send straight to the cell
/// owning the key: the router sees the same board command the service will build
/// (`convert::command`).
macro_rules! routed_writes {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {$(
        #[doc = concat!(
            "Call `", stringify!($name),
            "` with an idempotency key, at the node the router picks (else any member), \
             retrying while the cell is unavailable."
        )]
        pub async fn $name(&self, mut req: $req) -> Result<$resp, CellError> {
            self.key_or_new(&mut req.idempotency_key);
            local_answer!(self, $name, req);
            let identity = &self.identity;
            // Only a router needs the command (the point of its key).
            let command = (self.router.as_ref())
                .and_then(|_| convert::command::$name(req.clone()).ok());
            self.call_routed(command, |ch, route| {
                let mut request = Self::request(identity, req.clone());
                if let Some(route) = route {
                    route.stamp(request.metadata_mut());
                }
                async move { Self::cell(ch).$name(request).await }
            })
            .await
        }
    )*};
}

impl CellClient {
    reads! {
        kv_get(pb::KvGetRequest) -> pb::KvGetResponse;
        lease_list(pb::LeaseListRequest) -> pb::LeaseListResponse;
        counter_list(pb::CounterListRequest) -> pb::CounterListResponse;
        ledger_list(pb::LedgerListRequest) -> pb::LedgerListResponse;
        status(pb::StatusRequest) -> pb::StatusResponse;
        routes(pb::RoutesRequest) -> pb::RoutesResponse;
        kv_range(pb::KvRangeRequest) -> pb::KvRangeResponse;
        leader(pb::LeaderRequest) -> pb::LeaderResponse;
        agent_register(pb::AgentRegisterRequest) -> pb::AgentRegisterResponse;
        board_list(pb::BoardListRequest) -> pb::BoardListResponse;
        board_dead_letters(pb::BoardListRequest) -> pb::BoardListResponse;
        board_stats(pb::BoardStatsRequest) -> pb::BoardStatsResponse;
        board_get(pb::BoardGetRequest) -> pb::BoardListResponse;
        mailbox(pb::MailboxRequest) -> pb::MailboxResponse;
        work_list(pb::WorkListRequest) -> pb::WorkListResponse;
        work_audit(pb::WorkAuditRequest) -> pb::WorkAuditResponse;
        mail_inbox(pb::MailInboxRequest) -> pb::MailInboxResponse;
        vote_show(pb::VoteShowRequest) -> pb::VoteShowResponse;
        vote_ballots(pb::VoteBallotsRequest) -> pb::VoteBallotsResponse;
        vote_list(pb::VoteListRequest) -> pb::VoteListResponse;
        paths_list(pb::PathsListRequest) -> pb::PathsListResponse;
        wait_applied(pb::WaitAppliedRequest) -> pb::WaitAppliedResponse;
    }

    routed_writes! {
        kv_put(pb::KvPutRequest) -> pb::KvWriteResponse;
        kv_delete(pb::KvDeleteRequest) -> pb::KvWriteResponse;
        lease_acquire(pb::LeaseAcquireRequest) -> pb::LeaseResponse;
        lease_renew(pb::LeaseRenewRequest) -> pb::LeaseResponse;
        lease_release(pb::LeaseReleaseRequest) -> pb::LeaseResponse;
        counter_consume(pb::CounterConsumeRequest) -> pb::CounterResponse;
        ledger_append(pb::LedgerAppendRequest) -> pb::LedgerAppendResponse;
        kv_txn(pb::KvTxnRequest) -> pb::KvTxnResponse;
        kv_keepalive(pb::KvKeepaliveRequest) -> pb::KvWriteResponse;
        kv_txn_if(pb::KvTxnIfRequest) -> pb::KvTxnIfResponse;
        campaign(pb::CampaignRequest) -> pb::ElectionResponse;
        proclaim(pb::ElectionTermRequest) -> pb::ElectionResponse;
        resign(pb::ElectionTermRequest) -> pb::ElectionResponse;
        election_renew(pb::ElectionTermRequest) -> pb::ElectionResponse;
        paths_reserve(pb::PathsReserveRequest) -> pb::PathsResponse;
        paths_release(pb::PathsReleaseRequest) -> pb::PathsResponse;
    }

    writes! {
        mail_send(pb::MailSendRequest) -> pb::MailSendResponse;
        mail_send_many(pb::MailSendManyRequest) -> pb::MailSendManyResponse;
        mail_ack(pb::MailAckRequest) -> pb::MailResponse;
        mail_take(pb::MailTakeRequest) -> pb::MailTakeResponse;
        mail_grant(pb::MailGrantRequest) -> pb::MailResponse;
        mail_release(pb::MailReleaseRequest) -> pb::MailResponse;
        team_role(pb::TeamRoleRequest) -> pb::VoteResponse;
        vote_open(pb::VoteOpenRequest) -> pb::VoteResponse;
        vote_cast(pb::VoteCastRequest) -> pb::VoteResponse;
        vote_close(pb::VoteCloseRequest) -> pb::VoteResponse;
        lease_release_all(pb::LeaseReleaseAllRequest) -> pb::LeaseResponse;
        schedule_fire(pb::ScheduleFireRequest) -> pb::ScheduleResponse;
        team_create(pb::TeamCreateRequest) -> pb::TeamResponse;
        team_join(pb::TeamJoinRequest) -> pb::TeamResponse;
        team_dissolve(pb::TeamDissolveRequest) -> pb::TeamResponse;
        board_post(pb::BoardPostRequest) -> pb::BoardResponse;
        board_claim(pb::BoardClaimRequest) -> pb::BoardResponse;
        board_complete(pb::BoardTaskRequest) -> pb::BoardResponse;
        board_fail(pb::BoardTaskRequest) -> pb::BoardResponse;
        board_extend(pb::BoardTaskRequest) -> pb::BoardResponse;
        board_redrive(pb::BoardTaskRequest) -> pb::BoardResponse;
        board_release(pb::BoardTaskRequest) -> pb::BoardResponse;
        signal_publish(pb::SignalPublishRequest) -> pb::LedgerAppendResponse;
        work_register(pb::WorkRegisterRequest) -> pb::WorkResponse;
        work_renew(pb::WorkRenewRequest) -> pb::WorkResponse;
        work_signal(pb::WorkSignalRequest) -> pb::WorkResponse;
        work_revoke(pb::WorkRevokeRequest) -> pb::WorkResponse;
        work_scope(pb::WorkScopeRequest) -> pb::WorkResponse;
        work_limits(pb::WorkLimitsRequest) -> pb::WorkLimitsResponse;
    }

    /// A team's signals on `topic` after `after_seq`, then each new one, until the stream
    /// is dropped.
    pub async fn signal_subscribe(
        &self,
        team: String,
        topic: String,
        after_seq: u64,
    ) -> Result<SignalStream, CellError> {
        let request = pb::SignalSubscribeRequest {
            team,
            topic,
            after_seq,
        };
        if let Some(api) = &self.local {
            let request = Self::local_request(&self.identity, request);
            let stream = CellService::signal_subscribe(api.as_ref(), request).await?;
            return Ok(stream.into_inner());
        }
        let identity = &self.identity;
        let stream = self
            .call(|ch| {
                let request = Self::request(identity, request.clone());
                async move { Self::cell(ch).signal_subscribe(request).await }
            })
            .await?;
        Ok(Box::pin(stream))
    }

    /// The leader of `group` now, then every change, until the stream is dropped. Opens on
    /// the current member (rotating while members are unavailable).
    pub async fn observe(&self, group: String) -> Result<LeaderStream, CellError> {
        let request = pb::LeaderRequest { group };
        if let Some(api) = &self.local {
            let stream = CellService::observe(
                api.as_ref(),
                Self::local_request(&Credentials::default(), request),
            )
            .await?;
            return Ok(stream.into_inner());
        }
        let identity = &self.identity;
        let stream = self
            .call(|ch| {
                let request = Self::request(identity, request.clone());
                async move { Self::cell(ch).observe(request).await }
            })
            .await?;
        Ok(Box::pin(stream))
    }

    /// Status of one specific member (no rotation): what that member sees.
    pub async fn member_status(&self, member: usize) -> Result<pb::StatusResponse, CellError> {
        self.member_cell_status(member, 0).await
    }

    /// Status of one hosted cell (`cell`; 0 is a plain cell or a fabric's meta cell) as one
    /// specific member sees it.
    pub async fn member_cell_status(
        &self,
        member: usize,
        cell: u64,
    ) -> Result<pb::StatusResponse, CellError> {
        let request = pb::StatusRequest { cell };
        if self.local.is_some() {
            return self.status(request).await;
        }
        let channel = self.channels[member % self.channels.len()].clone();
        let response = Self::cell(channel).status(request).await?;
        Ok(response.into_inner())
    }

    /// Initialize a new cell through the first member.
    pub async fn init(&self, members: Vec<pb::Member>) -> Result<pb::AdminResponse, CellError> {
        let response = AdminClient::new(self.first_channel()?)
            .init(pb::InitRequest { members, cell: 0 })
            .await?;
        Ok(response.into_inner())
    }

    /// Add a learner (through any member; retried until the leader answers).
    pub async fn add_learner(&self, member: pb::Member) -> Result<pb::AdminResponse, CellError> {
        self.add_learner_to(0, member).await
    }

    /// Add `member` as a learner of hosted cell `cell` (0: a plain cell, or a fabric's meta
    /// cell) and wait until it caught up.
    pub async fn add_learner_to(
        &self,
        cell: u64,
        member: pb::Member,
    ) -> Result<pb::AdminResponse, CellError> {
        self.admin_call(|mut admin| {
            let member = member.clone();
            async move {
                let request = pb::AddLearnerRequest {
                    member: Some(member),
                    cell,
                };
                admin.add_learner(request).await
            }
        })
        .await
    }

    /// Change the voter set.
    pub async fn change_membership(
        &self,
        voters: Vec<u64>,
        retain: bool,
    ) -> Result<pb::AdminResponse, CellError> {
        self.change_membership_of(0, voters, retain).await
    }

    /// Change the voter set of hosted cell `cell` (0: a plain cell, or a fabric's meta cell).
    pub async fn change_membership_of(
        &self,
        cell: u64,
        voters: Vec<u64>,
        retain: bool,
    ) -> Result<pb::AdminResponse, CellError> {
        self.admin_call(|mut admin| {
            let voters = voters.clone();
            async move {
                let request = pb::ChangeMembershipRequest {
                    voters,
                    retain,
                    cell,
                };
                admin.change_membership(request).await
            }
        })
        .await
    }

    /// Take a snapshot of hosted cell `cell` (0: a plain cell, or a fabric's meta cell)
    /// from its leader (through any member: a follower's `NotLeader` hint is followed).
    /// The stream's chunks make the body, in order; the last carries its blake3.
    pub async fn snapshot_save(
        &self,
        cell: u64,
    ) -> Result<tonic::Streaming<pb::SnapshotChunk>, CellError> {
        let stream = self
            .call(|ch| async move {
                AdminClient::new(ch)
                    .max_decoding_message_size(crate::limits::MESSAGE_BYTES_MAX)
                    .snapshot_save(pb::SnapshotSaveRequest { cell })
                    .await
            })
            .await?;
        Ok(stream)
    }

    async fn admin_call<F, Fut>(&self, call: F) -> Result<pb::AdminResponse, CellError>
    where
        F: Fn(AdminClient<Channel>) -> Fut,
        Fut: Future<Output = Result<Response<pb::AdminResponse>, Status>>,
    {
        self.call(|ch| call(AdminClient::new(ch))).await
    }
}

fn unix_channel(path: PathBuf) -> Channel {
    Endpoint::from_static("http://embedded.local").connect_with_connector_lazy(tower::service_fn(
        move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        },
    ))
}
