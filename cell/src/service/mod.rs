//! The gRPC face of a cell member: the typed client API (`whip.v1.Cell`), the admin API and
//! the Raft transport, all on one port. This file holds the client API's handlers; `access`
//! proves callers and maps board refusals to statuses, `raft` the admin API and Raft
//! transport.
//!
//! A handler only translates: decode, build the `Request` with the proven caller, submit
//! or read once through the dispatch, encode the answer. It holds no loop (a stream's
//! later answers come from `crate::push`, accepting connections from `crate::listen`),
//! reads no wall clock, and decides nothing board decides. One handler still writes twice:
//! an enrollment charges the enrolling agent's hourly count (a counter on its own cell)
//! before the registration's apply.

use std::net::SocketAddr;
use std::sync::Arc;

use tonic::{Request as GrpcRequest, Response, Status};
use whip_board::access::Caller;
use whip_board::{Command, Outcome, Query, QueryResult, Request};
use whip_proto::v1 as pb;
use whip_proto::v1::{admin_server, cell_server, raft_server};

mod access;
mod mail;
mod paths;
mod raft;
mod vote;
mod wait;
mod work;

use crate::listen as incoming;
use crate::push::streams::{self, observe_loop, signal_loop};
use crate::push::watch;
pub(crate) use access::read_refused;
use access::task_team;
pub use access::{ENGINE_CALLER, signal_ledger};
pub use raft::AdminApi;
use raft::RaftApi;

use crate::convert;
use crate::direct::Direct;
use crate::error::CellError;
use crate::limits;
use crate::runtime::Cell;

type GrpcResult<T> = Result<Response<T>, Status>;

/// What the typed client API runs on: one cell ([`Cell`]) or a fabric node's router, which
/// sends each request to the cell owning its key.
#[tonic::async_trait]
pub trait Dispatch: Send + Sync + 'static {
    /// Apply one request and return its outcome.
    async fn submit(&self, request: Request) -> Result<Outcome, CellError>;
    /// Answer one read, linearizably.
    async fn read(&self, query: Query) -> Result<QueryResult, CellError>;
    /// What `whip cell status` shows, for hosted cell `cell` (a single cell ignores it).
    async fn status(&self, cell: u64) -> Result<pb::StatusResponse, CellError>;
    /// Apply a keyed request its sender sent straight to cell `to.cell` at `to.epoch`,
    /// without forwarding. A single cell has no ranges and applies it as any other.
    async fn submit_direct(&self, to: Direct, request: Request) -> Result<Outcome, CellError> {
        let _ = to;
        self.submit(request).await
    }
    /// The range map and the cells' leaders, for clients that route by them (`reload`:
    /// read the map afresh). A single cell has none and answers no ranges.
    async fn routes(&self, reload: bool) -> Result<pb::RoutesResponse, CellError> {
        let _ = reload;
        Ok(pb::RoutesResponse::default())
    }
    /// This server's member that serves a watch of `key` (a prefix when `prefix`): the
    /// standalone cell itself; in a fabric, the hosted member of `cell`, or of the cell
    /// owning `key` when `cell` is 0. A dispatch without members has none.
    async fn watch_member(&self, key: &[u8], prefix: bool, cell: u64) -> Result<Cell, CellError> {
        let _ = (key, prefix, cell);
        Err(CellError::Unavailable(
            "no member here serves watches".into(),
        ))
    }
    /// The apply signal ([`Cell::applied_signal`]) of this server's member of the cell that
    /// owns routing point `point` (a standalone cell: its own); `None` when none is hosted
    /// here (and for a dispatch without members).
    async fn applied_signal(&self, point: u64) -> Option<tokio::sync::watch::Receiver<u64>> {
        let _ = point;
        None
    }
}

#[tonic::async_trait]
impl Dispatch for Cell {
    async fn submit(&self, request: Request) -> Result<Outcome, CellError> {
        Cell::submit(self, request).await
    }

    async fn read(&self, query: Query) -> Result<QueryResult, CellError> {
        Cell::read(self, query).await
    }

    async fn status(&self, _cell: u64) -> Result<pb::StatusResponse, CellError> {
        Ok(crate::status::status(self))
    }

    async fn watch_member(&self, _key: &[u8], _prefix: bool, cell: u64) -> Result<Cell, CellError> {
        match cell == 0 || cell == self.cell_id() {
            true => Ok(self.clone()),
            false => Err(CellError::Unavailable(format!(
                "cell {cell} is not served here (this is cell {})",
                self.cell_id()
            ))),
        }
    }

    async fn applied_signal(&self, _point: u64) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(Cell::applied_signal(self))
    }
}

/// The cells a server hosts, by cell id: Raft messages, forwarded requests and admin calls
/// name the cell they are for.
pub trait Cells: Send + Sync + 'static {
    /// The hosted member of cell `id`, if this server hosts one.
    fn cell(&self, id: u64) -> Option<Cell>;
    /// Where this server counts the calls it answers (`/metrics`).
    fn rpc_stats(&self) -> crate::metrics::RpcStats;
    /// The transport this server serves with (its credential is replaced by the operator's
    /// `InstallCredential`).
    fn transport(&self) -> crate::tls::Transport;
    /// The signing key of hosted cell `id`, which an operator's backup carries (a fabric
    /// node's cells have one; a standalone cell has none).
    fn identity_secret(&self, id: u64) -> Result<Option<[u8; 32]>, CellError> {
        let _ = id;
        Ok(None)
    }
    /// A random id of this run of the server, which its answers to node pings carry (0:
    /// none; a standalone cell is pinged by no node).
    fn boot_id(&self) -> u64 {
        0
    }
}

impl Cells for Cell {
    fn cell(&self, id: u64) -> Option<Cell> {
        (id == self.cell_id()).then(|| self.clone())
    }

    fn rpc_stats(&self) -> crate::metrics::RpcStats {
        self.config().rpc_stats.clone()
    }

    fn transport(&self) -> crate::tls::Transport {
        Cell::transport(self).clone()
    }
}

fn hosted(cells: &dyn Cells, id: u64) -> Result<Cell, Status> {
    cells
        .cell(id)
        .ok_or_else(|| Status::not_found(format!("cell {id} is not hosted on this node")))
}

/// A server's services behind the caller gate ([`crate::tls::GateLayer`]).
pub type Services = tonic::transport::server::Router<
    tower::layer::util::Stack<crate::tls::GateLayer, tower::layer::util::Identity>,
>;

/// Why a server could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The transport settings were refused (plaintext off loopback, no certificate).
    #[error(transparent)]
    Transport(#[from] crate::tls::TransportError),
    /// The listener failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// tonic failed.
    #[error(transparent)]
    Tonic(#[from] tonic::transport::Error),
}

/// The router serving every service of `cell` without TLS (the embedded store's local
/// socket: only the local user reaches it), with gRPC reflection so tools such as grpcurl
/// can list and call the API without the .proto file.
pub fn router(cell: Cell) -> Services {
    services(Arc::new(cell.clone()), Arc::new(cell))
}

/// The router of a server whose client API runs on `dispatch` and which hosts `cells`.
/// Every call passes the caller gate first. TLS is the listener's ([`serve_router`]).
pub fn services(dispatch: Arc<dyn Dispatch>, cells: Arc<dyn Cells>) -> Services {
    // Reflection lists the client API only: the peer services are nobody else's business.
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(whip_proto::FILE_DESCRIPTOR_SET)
        .with_service_name("whip.v1.Cell")
        .build_v1()
        .expect("the compiled descriptor set is valid");
    let builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_millis(
            limits::KEEPALIVE_INTERVAL_MS,
        )))
        .http2_keepalive_timeout(Some(std::time::Duration::from_millis(
            limits::KEEPALIVE_TIMEOUT_MS,
        )))
        .tcp_keepalive(Some(std::time::Duration::from_millis(
            limits::KEEPALIVE_INTERVAL_MS,
        )))
        .max_concurrent_streams(Some(limits::STREAMS_PER_CONNECTION_MAX))
        .http2_max_pending_accept_reset_streams(Some(limits::PENDING_RESET_STREAMS_MAX))
        .concurrency_limit_per_connection(limits::STREAMS_PER_CONNECTION_MAX as usize);
    builder
        .layer(crate::tls::GateLayer::new(cells.rpc_stats()))
        .add_service(reflection)
        .add_service(client_api(dispatch))
        .add_service(admin_api(cells.clone()))
        .add_service(
            raft_server::RaftServer::new(RaftApi { cells })
                .max_decoding_message_size(limits::MESSAGE_BYTES_MAX)
                .max_encoding_message_size(limits::MESSAGE_BYTES_MAX),
        )
}

/// The typed client API (`whip.v1.Cell`) on `dispatch`, as [`services`] mounts it: tonic's
/// codec decodes every request with the server's size limits. Without the caller gate: the
/// caller is the [`crate::tls::Principal`] in the request's extensions, else anonymous. The
/// fuzz target `grpc_request` drives it with raw request bytes.
pub fn client_api(dispatch: Arc<dyn Dispatch>) -> cell_server::CellServer<CellApi> {
    cell_server::CellServer::new(CellApi::new(dispatch))
        .max_decoding_message_size(limits::CLIENT_MESSAGE_BYTES_MAX)
        .max_encoding_message_size(limits::MESSAGE_BYTES_MAX)
}

/// The peer and operator API (`whip.v1.Admin`) of a server hosting `cells`, as
/// [`services`] mounts it, without the caller gate (as [`client_api`]). The fuzz target
/// `grpc_request` drives its `InstallCredential` with raw request bytes.
pub fn admin_api(cells: Arc<dyn Cells>) -> admin_server::AdminServer<AdminApi> {
    admin_server::AdminServer::new(AdminApi { cells })
        .max_decoding_message_size(limits::CLIENT_MESSAGE_BYTES_MAX)
}

/// Serve `router` on `listener` over `transport` (TCP, with TCP_NODELAY: TRAPS.md 9; at
/// most [`limits::CONNECTIONS_MAX`] connections) until `shutdown` resolves. Over TLS every
/// connection is accepted with the settings the transport holds when it arrives, so a
/// credential installed later ([`crate::tls::Tls::install`]) serves the next connection.
pub async fn serve_router(
    router: Services,
    listener: tokio::net::TcpListener,
    transport: &crate::tls::Transport,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    transport.server_config(&listener.local_addr()?)?;
    match transport.live() {
        Some(tls) => {
            let incoming = incoming::tls(listener, tls.clone());
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await?;
        }
        None => {
            let incoming = incoming::limited(listener);
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await?;
        }
    }
    Ok(())
}

/// Serve `cell` on `listener` over the cell's transport until `shutdown` resolves.
pub async fn serve(
    cell: Cell,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let transport = cell.transport().clone();
    let router = services(Arc::new(cell.clone()), Arc::new(cell));
    serve_router(router, listener, &transport, shutdown).await
}

/// Bind `addr` for [`serve`].
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// The typed client API ([`client_api`]). The in-process client calls it directly.
pub struct CellApi {
    dispatch: Arc<dyn Dispatch>,
    verifier: crate::identity::Verifier,
    streams: Arc<streams::StreamSlots>,
    watches: Arc<streams::Watches>,
}

impl CellApi {
    /// Submit a client's command for its proven `caller` (refused by `board` if it touches
    /// reserved state, is a server-only command or the caller may not run it).
    async fn submit(
        &self,
        caller: &Caller,
        idempotency_key: String,
        command: Command,
    ) -> Result<Outcome, Status> {
        let idempotency_key = (!idempotency_key.is_empty()).then_some(idempotency_key);
        let request = Request::by(caller.clone(), idempotency_key, command);
        Ok(self.dispatch.submit(request).await?)
    }

    /// Submit a client's command, then carry out at once the follow-ups board decided for
    /// it (`whip_board::next`; the outbox's executor finishes them if this server stops
    /// first): the outcome and every command the follow-ups sent. A request without a key
    /// gets one, so that both carry the follow-ups out under the same keys.
    async fn submit_following(
        &self,
        caller: &Caller,
        idempotency_key: String,
        command: Command,
    ) -> Result<(Outcome, Vec<crate::follow::Sent>), Status> {
        let key = match idempotency_key.is_empty() {
            true => fresh_key(),
            false => idempotency_key,
        };
        let request = Request::by(caller.clone(), Some(key), command);
        let outcome = self.dispatch.submit(request.clone()).await?;
        let then = whip_board::next::follow_ups(&request, &outcome);
        if !then.is_empty() {
            crate::test_hooks::crash_at("follow_up");
        }
        let mut sent = Vec::new();
        for (index, follow_up) in then.iter().enumerate() {
            let key = whip_board::next::follow_up_key(&request, None, index);
            let dispatch = self.dispatch.as_ref();
            sent.extend(crate::follow::carry_out(dispatch, &key, follow_up).await?);
        }
        Ok((outcome, sent))
    }

    /// A plain keyed write: its proven caller, its route when its sender sent it straight
    /// to its cell ([`Direct`]), its command (`convert::command`), then the outcome.
    async fn keyed<T>(
        &self,
        req: GrpcRequest<T>,
        take_key: fn(&mut T) -> String,
        command_of: fn(T) -> Result<Command, Status>,
    ) -> Result<Outcome, Status> {
        let caller = self.caller_of(&req).await?;
        let direct = Direct::of(req.metadata())?;
        let mut req = req.into_inner();
        let key = take_key(&mut req);
        let idempotency_key = (!key.is_empty()).then_some(key);
        let request = Request::by(caller, idempotency_key, command_of(req)?);
        Ok(match direct {
            None => self.dispatch.submit(request).await?,
            Some(to) => self.dispatch.submit_direct(to, request).await?,
        })
    }

    /// Submit a command this server makes on its own behalf, after it proved what the
    /// command needs (identity rows, fabric-queue admission and purge).
    async fn submit_server(
        &self,
        idempotency_key: String,
        command: Command,
    ) -> Result<Outcome, Status> {
        let idempotency_key = (!idempotency_key.is_empty()).then_some(idempotency_key);
        Ok(self
            .dispatch
            .submit(Request::server(idempotency_key, command))
            .await?)
    }

    /// A client's read for its proven `caller`: the board decides what the caller may read
    /// in the same snapshot as the read ([`Query::By`]).
    async fn read(&self, caller: &Caller, query: Query) -> Result<QueryResult, Status> {
        let query = Query::By {
            caller: caller.clone(),
            query: Box::new(query),
        };
        match self.read_server(query).await? {
            QueryResult::Refused(refusal) => Err(access::read_refused(refusal)),
            result => Ok(result),
        }
    }

    /// A read this server makes on its own behalf (token hashes, team records).
    async fn read_server(&self, query: Query) -> Result<QueryResult, Status> {
        Ok(self.dispatch.read(query).await?)
    }
}

#[tonic::async_trait]
impl cell_server::Cell for CellApi {
    async fn kv_get(&self, req: GrpcRequest<pb::KvGetRequest>) -> GrpcResult<pb::KvGetResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        convert::non_empty("key", &req.key)?;
        let query = match convert::key_space(req.space)? {
            pb::KeySpace::Client => Query::KvGet { key: req.key },
            pb::KeySpace::Engine => Query::EngineGet { key: req.key },
        };
        let result = self.read(&caller, query).await?;
        Ok(Response::new(convert::kv_get_response(result)?))
    }

    async fn kv_put(&self, req: GrpcRequest<pb::KvPutRequest>) -> GrpcResult<pb::KvWriteResponse> {
        let key = |r: &mut pb::KvPutRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::kv_put).await?;
        Ok(Response::new(convert::kv_write_response(outcome)?))
    }

    async fn kv_delete(
        &self,
        req: GrpcRequest<pb::KvDeleteRequest>,
    ) -> GrpcResult<pb::KvWriteResponse> {
        let key = |r: &mut pb::KvDeleteRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::kv_delete).await?;
        Ok(Response::new(convert::kv_write_response(outcome)?))
    }

    async fn lease_acquire(
        &self,
        req: GrpcRequest<pb::LeaseAcquireRequest>,
    ) -> GrpcResult<pb::LeaseResponse> {
        let fail_open = req.get_ref().fail_open;
        let key = |r: &mut pb::LeaseAcquireRequest| std::mem::take(&mut r.idempotency_key);
        let acquire = self.keyed(req, key, convert::command::lease_acquire);
        if !fail_open {
            return Ok(Response::new(convert::lease_response(acquire.await?)?));
        }
        // Fail-open: a cell without quorum cannot confirm in time; the caller hears so and
        // may go on with idempotent work. The request may still apply later (a retry with
        // the same idempotency key then returns what it recorded).
        let bound = std::time::Duration::from_millis(limits::FAIL_OPEN_WAIT_MS);
        match tokio::time::timeout(bound, acquire).await {
            Ok(Ok(outcome)) => Ok(Response::new(convert::lease_response(outcome)?)),
            Ok(Err(status)) if status.code() != tonic::Code::Unavailable => Err(status),
            Ok(Err(status)) => Ok(Response::new(convert::lease_degraded(format!(
                "the lease's cell could not confirm the grant: {}",
                status.message()
            )))),
            Err(_) => Ok(Response::new(convert::lease_degraded(format!(
                "the lease's cell did not confirm the grant within {} ms (no quorum?)",
                limits::FAIL_OPEN_WAIT_MS
            )))),
        }
    }

    async fn lease_renew(
        &self,
        req: GrpcRequest<pb::LeaseRenewRequest>,
    ) -> GrpcResult<pb::LeaseResponse> {
        let key = |r: &mut pb::LeaseRenewRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::lease_renew).await?;
        Ok(Response::new(convert::lease_response(outcome)?))
    }

    async fn lease_release(
        &self,
        req: GrpcRequest<pb::LeaseReleaseRequest>,
    ) -> GrpcResult<pb::LeaseResponse> {
        let key = |r: &mut pb::LeaseReleaseRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self
            .keyed(req, key, convert::command::lease_release)
            .await?;
        Ok(Response::new(convert::lease_response(outcome)?))
    }

    async fn lease_release_all(
        &self,
        req: GrpcRequest<pb::LeaseReleaseAllRequest>,
    ) -> GrpcResult<pb::LeaseResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let outcome = self
            .submit(
                &caller,
                req.idempotency_key,
                Command::LeaseReleaseAll { holder: req.holder },
            )
            .await?;
        Ok(Response::new(convert::lease_response(outcome)?))
    }

    async fn lease_list(
        &self,
        req: GrpcRequest<pb::LeaseListRequest>,
    ) -> GrpcResult<pb::LeaseListResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let result = self
            .read(
                &caller,
                Query::LeaseList {
                    prefix: req.prefix,
                    limit: convert::limit(req.limit),
                },
            )
            .await?;
        Ok(Response::new(convert::lease_list_response(result)?))
    }

    async fn counter_consume(
        &self,
        req: GrpcRequest<pb::CounterConsumeRequest>,
    ) -> GrpcResult<pb::CounterResponse> {
        let key = |r: &mut pb::CounterConsumeRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self
            .keyed(req, key, convert::command::counter_consume)
            .await?;
        Ok(Response::new(convert::counter_response(outcome)?))
    }

    async fn counter_list(
        &self,
        req: GrpcRequest<pb::CounterListRequest>,
    ) -> GrpcResult<pb::CounterListResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let query = Query::CounterList {
            prefix: req.prefix,
            limit: convert::limit(req.limit),
        };
        let result = self.read(&caller, query).await?;
        Ok(Response::new(convert::counter_list_response(result)?))
    }

    async fn ledger_append(
        &self,
        req: GrpcRequest<pb::LedgerAppendRequest>,
    ) -> GrpcResult<pb::LedgerAppendResponse> {
        let key = |r: &mut pb::LedgerAppendRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self
            .keyed(req, key, convert::command::ledger_append)
            .await?;
        Ok(Response::new(convert::ledger_append_response(outcome)?))
    }

    async fn ledger_list(
        &self,
        req: GrpcRequest<pb::LedgerListRequest>,
    ) -> GrpcResult<pb::LedgerListResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let query = Query::LedgerList {
            owner: req.owner,
            name: req.name,
            partition: req.partition,
            after_seq: req.after_seq,
            limit: convert::limit(req.limit),
        };
        let result = self.read(&caller, query).await?;
        Ok(Response::new(convert::ledger_list_response(result)?))
    }

    async fn kv_txn(&self, req: GrpcRequest<pb::KvTxnRequest>) -> GrpcResult<pb::KvTxnResponse> {
        let key = |r: &mut pb::KvTxnRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::kv_txn).await?;
        Ok(Response::new(convert::kv_txn_response(outcome)?))
    }

    async fn kv_keepalive(
        &self,
        req: GrpcRequest<pb::KvKeepaliveRequest>,
    ) -> GrpcResult<pb::KvWriteResponse> {
        let key = |r: &mut pb::KvKeepaliveRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::kv_keepalive).await?;
        Ok(Response::new(convert::kv_write_response(outcome)?))
    }

    async fn kv_txn_if(
        &self,
        req: GrpcRequest<pb::KvTxnIfRequest>,
    ) -> GrpcResult<pb::KvTxnIfResponse> {
        let key = |r: &mut pb::KvTxnIfRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::kv_txn_if).await?;
        Ok(Response::new(convert::kv_txn_if_response(outcome)?))
    }

    async fn kv_range(
        &self,
        req: GrpcRequest<pb::KvRangeRequest>,
    ) -> GrpcResult<pb::KvRangeResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let (prefix, after_key, limit) = (req.prefix, req.after_key, convert::limit(req.limit));
        let query = match convert::key_space(req.space)? {
            pb::KeySpace::Client => Query::KvRange {
                prefix,
                after_key,
                limit,
            },
            pb::KeySpace::Engine => Query::EngineRange {
                prefix,
                after_key,
                limit,
            },
        };
        // Reserved rows and blackboard rows not asked for by team are left out by the
        // board (Query::By).
        let result = self.read(&caller, query).await?;
        Ok(Response::new(convert::kv_range_response(result)?))
    }

    async fn campaign(
        &self,
        req: GrpcRequest<pb::CampaignRequest>,
    ) -> GrpcResult<pb::ElectionResponse> {
        let key = |r: &mut pb::CampaignRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::campaign).await?;
        Ok(Response::new(convert::election_response(outcome)?))
    }

    async fn proclaim(
        &self,
        req: GrpcRequest<pb::ElectionTermRequest>,
    ) -> GrpcResult<pb::ElectionResponse> {
        let key = |r: &mut pb::ElectionTermRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::proclaim).await?;
        Ok(Response::new(convert::election_response(outcome)?))
    }

    async fn resign(
        &self,
        req: GrpcRequest<pb::ElectionTermRequest>,
    ) -> GrpcResult<pb::ElectionResponse> {
        let key = |r: &mut pb::ElectionTermRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self.keyed(req, key, convert::command::resign).await?;
        Ok(Response::new(convert::election_response(outcome)?))
    }

    async fn election_renew(
        &self,
        req: GrpcRequest<pb::ElectionTermRequest>,
    ) -> GrpcResult<pb::ElectionResponse> {
        let key = |r: &mut pb::ElectionTermRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self
            .keyed(req, key, convert::command::election_renew)
            .await?;
        Ok(Response::new(convert::election_response(outcome)?))
    }

    async fn leader(&self, req: GrpcRequest<pb::LeaderRequest>) -> GrpcResult<pb::LeaderResponse> {
        let caller = self.caller_of(&req).await?;
        let group = req.into_inner().group;
        let result = self.read(&caller, Query::ElectionLeader { group }).await?;
        Ok(Response::new(convert::leader_response(result)?))
    }

    type ObserveStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<pb::LeaderResponse, Status>> + Send + 'static>,
    >;

    async fn observe(
        &self,
        req: GrpcRequest<pb::LeaderRequest>,
    ) -> GrpcResult<Self::ObserveStream> {
        let caller = self.caller_of(&req).await?;
        if caller == Caller::Anonymous {
            return Err(Status::unauthenticated(
                whip_board::access::AccessRefusal::Anonymous.to_string(),
            ));
        }
        // An agent's streams count as its own wherever it connects from.
        let slot = (self.streams).take(streams::stream_caller(caller.agent(), &req))?;
        let group = req.into_inner().group;
        if group.is_empty() {
            return Err(Status::invalid_argument("group must not be empty"));
        }
        let (tx, rx) = tokio::sync::mpsc::channel(limits::OBSERVE_QUEUE_MAX);
        let watches = self.watches.clone();
        tokio::spawn(observe_loop(
            watches,
            self.dispatch.clone(),
            group,
            tx,
            slot,
        ));
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(stream)))
    }

    type WatchStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<pb::WatchResponse, Status>> + Send + 'static>,
    >;

    async fn watch(&self, req: GrpcRequest<pb::WatchRequest>) -> GrpcResult<Self::WatchStream> {
        let caller = self.caller_of(&req).await?;
        whip_board::admit::admit_follow(&caller)
            .map_err(|refusal| Status::unauthenticated(refusal.to_string()))?;
        let slot = (self.streams).take(streams::stream_caller(caller.agent(), &req))?;
        let req = req.into_inner();
        let member = (self.dispatch)
            .watch_member(&req.key, req.prefix, req.cell)
            .await?;
        let first = watch::first_page(&member, &caller, &req).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(limits::OBSERVE_QUEUE_MAX);
        tokio::spawn(watch::watch_loop(member, caller, req, first, (tx, slot)));
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn wait_applied(
        &self,
        req: GrpcRequest<pb::WaitAppliedRequest>,
    ) -> GrpcResult<pb::WaitAppliedResponse> {
        self.wait_applied_rpc(req).await
    }

    async fn schedule_fire(
        &self,
        req: GrpcRequest<pb::ScheduleFireRequest>,
    ) -> GrpcResult<pb::ScheduleResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let timezone = if req.timezone.is_empty() {
            "UTC".to_string()
        } else {
            req.timezone
        };
        // A due time of 0 is the latest at or before the apply's stamp (board decides).
        let command = Command::ScheduleFire {
            name: req.name,
            spec: req.spec,
            timezone,
            due_ms: req.due_ms,
            claimant: req.claimant,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(convert::schedule_response(outcome)?))
    }

    async fn team_create(
        &self,
        req: GrpcRequest<pb::TeamCreateRequest>,
    ) -> GrpcResult<pb::TeamResponse> {
        let (who, caller) = self.board_caller(&req).await?;
        let req = req.into_inner();
        let ancestors = self.ancestors(req.parent.as_deref()).await?;
        let command = Command::TeamCreate {
            team: req.team,
            caller,
            parent: req.parent,
            ancestors,
            settings: convert::board_settings(req.settings),
        };
        let outcome = self.submit(&who, req.idempotency_key, command).await?;
        Ok(Response::new(convert::team_response(outcome)?))
    }

    async fn team_join(
        &self,
        req: GrpcRequest<pb::TeamJoinRequest>,
    ) -> GrpcResult<pb::TeamResponse> {
        crate::identity::check_agent_name(&req.get_ref().agent)?;
        // Only a registered agent joins: a name nobody holds yet cannot collect memberships
        // for whoever registers it first (registrations are never undone, so this read
        // cannot go stale before the join applies).
        self.registered(&req.get_ref().agent).await?;
        let outcome = self
            .act(req, |caller, r| {
                let command = Command::TeamJoin {
                    team: r.team,
                    caller,
                    agent: r.agent,
                };
                (r.idempotency_key, command)
            })
            .await?;
        Ok(Response::new(convert::team_response(outcome)?))
    }

    async fn team_dissolve(
        &self,
        req: GrpcRequest<pb::TeamDissolveRequest>,
    ) -> GrpcResult<pb::TeamResponse> {
        let (who, caller) = self.board_caller(&req).await?;
        let req = req.into_inner();
        let command = Command::TeamDissolve {
            team: req.team,
            caller,
        };
        let (outcome, sent) = self
            .submit_following(&who, req.idempotency_key, command)
            .await?;
        // The answer counts the fabric queue's tasks its follow-up purged.
        let outcome = match outcome {
            Outcome::TeamDissolved { removed, done } => Outcome::TeamDissolved {
                removed: (sent.iter()).fold(removed, |sum, sent| match sent.outcome {
                    Outcome::TeamDissolved { removed, .. } => sum.saturating_add(removed),
                    _ => sum,
                }),
                done,
            },
            outcome => outcome,
        };
        Ok(Response::new(convert::team_response(outcome)?))
    }

    async fn board_post(
        &self,
        req: GrpcRequest<pb::BoardPostRequest>,
    ) -> GrpcResult<pb::BoardResponse> {
        let outcome = self
            .act(req, |caller, r| {
                let command = if r.bodies.is_empty() {
                    Command::BoardPost {
                        team: r.team,
                        caller,
                        body: r.body,
                    }
                } else {
                    Command::BoardPostMany {
                        team: r.team,
                        caller,
                        bodies: r.bodies,
                    }
                };
                (r.idempotency_key, command)
            })
            .await?;
        Ok(Response::new(convert::board_response(outcome)?))
    }

    async fn board_claim(
        &self,
        req: GrpcRequest<pb::BoardClaimRequest>,
    ) -> GrpcResult<pb::BoardResponse> {
        let (who, caller) = self.board_caller(&req).await?;
        let mut req = req.into_inner();
        if req.max > 0 || !req.completes.is_empty() {
            let key = std::mem::take(&mut req.idempotency_key);
            let command = convert::claim_many(req, caller)?;
            let outcome = self.submit(&who, key, command).await?;
            return Ok(Response::new(convert::board_response(outcome)?));
        }
        if !req.task_id.is_empty() {
            let command = Command::BoardClaimTask {
                team: task_team(req.team, &req.task_id),
                caller,
                worker: req.worker,
                task_id: req.task_id,
                claim_ms: req.claim_ms,
            };
            let outcome = self.submit(&who, req.idempotency_key, command).await?;
            return Ok(Response::new(convert::board_response(outcome)?));
        }
        // Local, then cell tier, in one apply on the team's cell; a fabric node's router
        // goes on to the team's fabric queue when both are empty.
        let command = Command::BoardClaim {
            team: req.team,
            caller,
            worker: req.worker,
        };
        let outcome = self.submit(&who, req.idempotency_key, command).await?;
        Ok(Response::new(convert::board_response(outcome)?))
    }

    async fn board_complete(
        &self,
        req: GrpcRequest<pb::BoardTaskRequest>,
    ) -> GrpcResult<pb::BoardResponse> {
        let (who, caller) = self.board_caller(&req).await?;
        let req = req.into_inner();
        let team = task_team(req.team, &req.task_id);
        let command = if req.claim_next {
            Command::BoardCompleteAndClaim {
                team,
                caller,
                task_id: req.task_id,
                fence: req.fence,
                result: req.result,
                worker: req.worker,
            }
        } else {
            Command::BoardComplete {
                team,
                caller,
                task_id: req.task_id,
                fence: req.fence,
                result: req.result,
            }
        };
        let outcome = self.submit(&who, req.idempotency_key, command).await?;
        Ok(Response::new(convert::board_response(outcome)?))
    }

    async fn board_fail(
        &self,
        req: GrpcRequest<pb::BoardTaskRequest>,
    ) -> GrpcResult<pb::BoardResponse> {
        let outcome = self
            .act(req, |caller, r| {
                let command = Command::BoardFail {
                    team: task_team(r.team, &r.task_id),
                    caller,
                    task_id: r.task_id,
                    fence: r.fence,
                    error: r.error,
                };
                (r.idempotency_key, command)
            })
            .await?;
        Ok(Response::new(convert::board_response(outcome)?))
    }

    async fn board_extend(
        &self,
        req: GrpcRequest<pb::BoardTaskRequest>,
    ) -> GrpcResult<pb::BoardResponse> {
        let outcome = self
            .act(req, |caller, r| {
                let command = Command::BoardExtend {
                    team: task_team(r.team, &r.task_id),
                    caller,
                    task_id: r.task_id,
                    fence: r.fence,
                    extend_ms: r.extend_ms,
                };
                (r.idempotency_key, command)
            })
            .await?;
        Ok(Response::new(convert::board_response(outcome)?))
    }

    async fn board_redrive(
        &self,
        req: GrpcRequest<pb::BoardTaskRequest>,
    ) -> GrpcResult<pb::BoardResponse> {
        let outcome = self
            .act(req, |caller, r| {
                let command = Command::BoardRedrive {
                    team: task_team(r.team, &r.task_id),
                    caller,
                    task_id: r.task_id,
                };
                (r.idempotency_key, command)
            })
            .await?;
        Ok(Response::new(convert::board_response(outcome)?))
    }

    async fn board_release(
        &self,
        req: GrpcRequest<pb::BoardTaskRequest>,
    ) -> GrpcResult<pb::BoardResponse> {
        let outcome = self
            .act(req, |caller, r| {
                let command = Command::BoardRelease {
                    team: task_team(r.team, &r.task_id),
                    caller,
                    task_id: r.task_id,
                    fence: r.fence,
                };
                (r.idempotency_key, command)
            })
            .await?;
        Ok(Response::new(convert::board_response(outcome)?))
    }

    async fn board_get(
        &self,
        req: GrpcRequest<pb::BoardGetRequest>,
    ) -> GrpcResult<pb::BoardListResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let team = task_team(req.team, &req.task_id);
        let query = Query::BoardTask {
            team,
            task_id: req.task_id,
        };
        let result = self.read(&who, query).await?;
        Ok(Response::new(convert::tasks_response(result)?))
    }

    async fn board_list(
        &self,
        req: GrpcRequest<pb::BoardListRequest>,
    ) -> GrpcResult<pb::BoardListResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let query = Query::BoardList {
            team: req.team,
            state: convert::task_state(&req.state)?,
            limit: convert::limit(req.limit),
        };
        let result = self.read(&who, query).await?;
        Ok(Response::new(convert::tasks_response(result)?))
    }

    async fn board_dead_letters(
        &self,
        req: GrpcRequest<pb::BoardListRequest>,
    ) -> GrpcResult<pb::BoardListResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let query = Query::BoardDeadLetters {
            team: req.team,
            limit: convert::limit(req.limit),
        };
        let result = self.read(&who, query).await?;
        Ok(Response::new(convert::tasks_response(result)?))
    }

    async fn board_stats(
        &self,
        req: GrpcRequest<pb::BoardStatsRequest>,
    ) -> GrpcResult<pb::BoardStatsResponse> {
        let who = self.caller_of(&req).await?;
        let team = req.into_inner().team;
        let result = self.read(&who, Query::BoardStats { team }).await?;
        Ok(Response::new(convert::board_stats_response(result)?))
    }

    async fn signal_publish(
        &self,
        req: GrpcRequest<pb::SignalPublishRequest>,
    ) -> GrpcResult<pb::LedgerAppendResponse> {
        let (who, caller) = self.agent_caller(&req).await?;
        let req = req.into_inner();
        // Membership is decided in the apply of the append (the signal ledger lives on
        // the team's cell); the sender is the proven caller.
        let (owner, name) = signal_ledger(&req.team);
        let command = Command::LedgerAppend {
            ledger: whip_board::ResourceId {
                owner,
                name,
                key: req.topic,
            },
            entry: req.body,
            appended_by: caller,
            retain_ms: limits::SIGNAL_RETAIN_MS,
        };
        let outcome = self.submit(&who, req.idempotency_key, command).await?;
        Ok(Response::new(convert::ledger_append_response(outcome)?))
    }

    type SignalSubscribeStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<pb::LedgerEntry, Status>> + Send + 'static>,
    >;

    async fn signal_subscribe(
        &self,
        req: GrpcRequest<pb::SignalSubscribeRequest>,
    ) -> GrpcResult<Self::SignalSubscribeStream> {
        let (who, caller) = self.agent_caller(&req).await?;
        let slot = self
            .streams
            .take(streams::stream_caller(Some(&caller), &req))?;
        let req = req.into_inner();
        self.member_of(&who, &req.team).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(limits::OBSERVE_QUEUE_MAX);
        tokio::spawn(signal_loop(self.dispatch.clone(), req, tx, slot));
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn mailbox(
        &self,
        req: GrpcRequest<pb::MailboxRequest>,
    ) -> GrpcResult<pb::MailboxResponse> {
        let (who, caller) = self.agent_caller(&req).await?;
        let req = req.into_inner();
        let query = Query::Mailbox {
            team: req.team,
            agent: caller,
            after_seq: req.after_seq,
            limit: convert::limit(req.limit),
        };
        Ok(Response::new(convert::mailbox_response(
            self.read(&who, query).await?,
        )?))
    }

    /// Registering an agent needs the operator (or a node, or the local user), or an
    /// existing agent who enrolls it: its token proves it, and its enrollments are counted
    /// against [`limits::ENROLLMENTS_PER_HOUR_MAX`] in the state machine.
    async fn agent_register(
        &self,
        req: GrpcRequest<pb::AgentRegisterRequest>,
    ) -> GrpcResult<pb::AgentRegisterResponse> {
        let principal = crate::tls::principal(req.extensions());
        let caller = match principal.is_operator() && !req.get_ref().enroll {
            true => Caller::Operator,
            false => Caller::Agent(
                self.verifier
                    .caller(
                        self.dispatch.as_ref(),
                        req.metadata(),
                        req.remote_addr().map(|a| a.ip()),
                    )
                    .await
                    .map_err(|_| {
                        Status::unauthenticated(
                            "registering an agent needs the operator credential, or the token \
                             of an existing agent who enrolls it",
                        )
                    })?,
            ),
        };
        let mut req = req.into_inner();
        let by_operator = caller == Caller::Operator;
        // Board decides again in the apply; asked first so a refused name costs no
        // enrollment.
        whip_board::access::check_new_agent_name(&req.agent, by_operator)
            .map_err(Status::invalid_argument)?;
        let generated = req.token.is_empty();
        if generated {
            req.token = crate::identity::agent_token(&req.agent);
        }
        crate::identity::check_token(&req.token)?;
        if let Caller::Agent(parent) = &caller
            && *parent != req.agent
        {
            self.charge_enrollment(parent).await?;
        }
        let created = self.register(&caller, &req.agent, &req.token).await?;
        Ok(Response::new(pb::AgentRegisterResponse {
            created,
            token: if generated && created {
                req.token
            } else {
                String::new()
            },
        }))
    }

    async fn work_register(
        &self,
        req: GrpcRequest<pb::WorkRegisterRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        self.work_register_rpc(req).await
    }

    async fn work_renew(
        &self,
        req: GrpcRequest<pb::WorkRenewRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        self.work_renew_rpc(req).await
    }

    async fn work_signal(
        &self,
        req: GrpcRequest<pb::WorkSignalRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        self.work_signal_rpc(req).await
    }

    async fn work_revoke(
        &self,
        req: GrpcRequest<pb::WorkRevokeRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        self.work_revoke_rpc(req).await
    }

    async fn work_scope(
        &self,
        req: GrpcRequest<pb::WorkScopeRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        self.work_scope_rpc(req).await
    }

    async fn work_list(
        &self,
        req: GrpcRequest<pb::WorkListRequest>,
    ) -> GrpcResult<pb::WorkListResponse> {
        self.work_list_rpc(req).await
    }

    async fn work_limits(
        &self,
        req: GrpcRequest<pb::WorkLimitsRequest>,
    ) -> GrpcResult<pb::WorkLimitsResponse> {
        self.work_limits_rpc(req).await
    }

    async fn work_audit(
        &self,
        req: GrpcRequest<pb::WorkAuditRequest>,
    ) -> GrpcResult<pb::WorkAuditResponse> {
        self.work_audit_rpc(req).await
    }

    async fn mail_send(
        &self,
        req: GrpcRequest<pb::MailSendRequest>,
    ) -> GrpcResult<pb::MailSendResponse> {
        self.mail_send_rpc(req).await
    }

    async fn mail_send_many(
        &self,
        req: GrpcRequest<pb::MailSendManyRequest>,
    ) -> GrpcResult<pb::MailSendManyResponse> {
        self.mail_send_many_rpc(req).await
    }

    async fn mail_inbox(
        &self,
        req: GrpcRequest<pb::MailInboxRequest>,
    ) -> GrpcResult<pb::MailInboxResponse> {
        self.mail_inbox_rpc(req).await
    }

    async fn mail_ack(&self, req: GrpcRequest<pb::MailAckRequest>) -> GrpcResult<pb::MailResponse> {
        self.mail_ack_rpc(req).await
    }

    async fn mail_take(
        &self,
        req: GrpcRequest<pb::MailTakeRequest>,
    ) -> GrpcResult<pb::MailTakeResponse> {
        self.mail_take_rpc(req).await
    }

    async fn mail_grant(
        &self,
        req: GrpcRequest<pb::MailGrantRequest>,
    ) -> GrpcResult<pb::MailResponse> {
        self.mail_grant_rpc(req).await
    }

    async fn mail_release(
        &self,
        req: GrpcRequest<pb::MailReleaseRequest>,
    ) -> GrpcResult<pb::MailResponse> {
        self.mail_release_rpc(req).await
    }

    async fn team_role(
        &self,
        req: GrpcRequest<pb::TeamRoleRequest>,
    ) -> GrpcResult<pb::VoteResponse> {
        self.team_role_rpc(req).await
    }

    async fn vote_open(
        &self,
        req: GrpcRequest<pb::VoteOpenRequest>,
    ) -> GrpcResult<pb::VoteResponse> {
        self.vote_open_rpc(req).await
    }

    async fn vote_cast(
        &self,
        req: GrpcRequest<pb::VoteCastRequest>,
    ) -> GrpcResult<pb::VoteResponse> {
        self.vote_cast_rpc(req).await
    }

    async fn vote_close(
        &self,
        req: GrpcRequest<pb::VoteCloseRequest>,
    ) -> GrpcResult<pb::VoteResponse> {
        self.vote_close_rpc(req).await
    }

    async fn vote_show(
        &self,
        req: GrpcRequest<pb::VoteShowRequest>,
    ) -> GrpcResult<pb::VoteShowResponse> {
        self.vote_show_rpc(req).await
    }

    async fn vote_ballots(
        &self,
        req: GrpcRequest<pb::VoteBallotsRequest>,
    ) -> GrpcResult<pb::VoteBallotsResponse> {
        self.vote_ballots_rpc(req).await
    }

    async fn vote_list(
        &self,
        req: GrpcRequest<pb::VoteListRequest>,
    ) -> GrpcResult<pb::VoteListResponse> {
        self.vote_list_rpc(req).await
    }

    async fn paths_reserve(
        &self,
        req: GrpcRequest<pb::PathsReserveRequest>,
    ) -> GrpcResult<pb::PathsResponse> {
        self.paths_reserve_rpc(req).await
    }

    async fn paths_release(
        &self,
        req: GrpcRequest<pb::PathsReleaseRequest>,
    ) -> GrpcResult<pb::PathsResponse> {
        self.paths_release_rpc(req).await
    }

    async fn paths_list(
        &self,
        req: GrpcRequest<pb::PathsListRequest>,
    ) -> GrpcResult<pb::PathsListResponse> {
        self.paths_list_rpc(req).await
    }

    async fn status(&self, req: GrpcRequest<pb::StatusRequest>) -> GrpcResult<pb::StatusResponse> {
        let cell = req.into_inner().cell;
        Ok(Response::new(self.dispatch.status(cell).await?))
    }

    async fn routes(&self, req: GrpcRequest<pb::RoutesRequest>) -> GrpcResult<pb::RoutesResponse> {
        let caller = self.caller_of(&req).await?;
        whip_board::admit::admit_routes(&caller)
            .map_err(|refusal| Status::unauthenticated(refusal.to_string()))?;
        let reload = req.into_inner().reload;
        Ok(Response::new(self.dispatch.routes(reload).await?))
    }
}

/// A fresh idempotency key for a request its client sent without one.
fn fresh_key() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("server/{hex}")
}
