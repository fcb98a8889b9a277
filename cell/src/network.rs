//! Raft transport between voters over tonic: one lazily connected channel per peer,
//! openraft messages as postcard blobs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use tonic::transport::{Channel, Endpoint};
use whip_proto::v1::Blob;
use whip_proto::v1::raft_client::RaftClient;

use crate::heartbeats::Coalescer;
use crate::limits;
use crate::stages::{Stage, Stages};
use crate::tls::Transport;
use crate::types::{NodeId, TypeConfig, decode, encode};

/// Channels to peers by address, shared by Raft replication and request forwarding, so each
/// peer costs one HTTP/2 connection (TRAPS.md 8). Peers connect with this server's node
/// credential: the other side answers Raft, forwarding and delivery only to a node.
#[derive(Clone)]
pub struct Peers {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    /// Heartbeats of this process's cells to each peer, sent together.
    coalescers: Arc<Mutex<HashMap<String, Arc<Coalescer>>>>,
    transport: Transport,
}

impl Peers {
    /// Peer channels made over `transport` (the node's own credential).
    pub fn new(transport: Transport) -> Peers {
        Peers {
            channels: Arc::default(),
            coalescers: Arc::default(),
            transport,
        }
    }

    /// The transport peer channels use (a node's credential also serves its listener).
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// The channel to `addr` (`host:port`), created on first use and connected lazily.
    pub fn channel(&self, addr: &str) -> Channel {
        let mut channels = self.channels.lock().expect("peer map lock");
        channels
            .entry(addr.to_string())
            .or_insert_with(|| peer_endpoint(addr, &self.transport).connect_lazy())
            .clone()
    }

    /// Where this process's empty AppendEntries (heartbeats) to `addr` queue.
    fn coalescer(&self, addr: &str) -> Arc<Coalescer> {
        let mut coalescers = self.coalescers.lock().expect("heartbeat map lock");
        coalescers
            .entry(addr.to_string())
            .or_insert_with(|| Coalescer::new(self.raft_client(addr)))
            .clone()
    }

    /// A Raft-service client for `addr`.
    pub fn raft_client(&self, addr: &str) -> RaftClient<Channel> {
        RaftClient::new(self.channel(addr))
            .max_decoding_message_size(limits::MESSAGE_BYTES_MAX)
            .max_encoding_message_size(limits::MESSAGE_BYTES_MAX)
    }
}

/// A peer channel's endpoint: a client's, pinging often ([`limits::PEER_KEEPALIVE_INTERVAL_MS`])
/// so that a connection the peer stopped answering is dropped and dialled again within
/// seconds instead of carrying timed-out Raft calls until the OS notices.
fn peer_endpoint(addr: &str, transport: &Transport) -> Dial {
    let mut dial = endpoint_with(addr, transport);
    dial.endpoint = dial
        .endpoint
        .http2_keep_alive_interval(Duration::from_millis(limits::PEER_KEEPALIVE_INTERVAL_MS))
        .keep_alive_timeout(Duration::from_millis(limits::PEER_KEEPALIVE_TIMEOUT_MS))
        .keep_alive_while_idle(true);
    dial
}

/// The endpoint settings every client channel uses, over this process's default transport
/// ([`crate::tls::client_default`]).
pub fn endpoint(addr: &str) -> Dial {
    endpoint_with(addr, &crate::tls::client_default())
}

/// The endpoint settings every peer and client channel uses, over `transport`.
pub fn endpoint_with(addr: &str, transport: &Transport) -> Dial {
    // Over TLS the handshake is ours (the connector below), so tonic dials plain TCP; the
    // requests still name the https origin.
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .expect("peer address forms a valid URI")
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_millis(limits::CONNECT_TIMEOUT_MS))
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_while_idle(true);
    let endpoint = match transport {
        Transport::Tls(_) => endpoint.origin(
            format!("https://{addr}")
                .parse()
                .expect("peer address forms a valid URI"),
        ),
        Transport::Insecure => endpoint,
    };
    Dial {
        endpoint,
        tls: transport.live().cloned(),
    }
}

/// A channel to one address, not made yet: [`Dial::connect`] or [`Dial::connect_lazy`].
/// Over TLS every connection the channel makes (also a reconnect) uses the settings the
/// transport holds at that moment, so a replaced credential reaches reconnecting peers.
#[derive(Clone, Debug)]
pub struct Dial {
    endpoint: Endpoint,
    tls: Option<Arc<crate::tls::Tls>>,
}

impl Dial {
    /// A channel that connects on first use.
    pub fn connect_lazy(&self) -> Channel {
        match &self.tls {
            Some(tls) => self
                .endpoint
                .connect_with_connector_lazy(TlsConnector { tls: tls.clone() }),
            None => self.endpoint.connect_lazy(),
        }
    }

    /// A channel connected now.
    pub async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        match &self.tls {
            Some(tls) => {
                let connector = TlsConnector { tls: tls.clone() };
                self.endpoint.connect_with_connector(connector).await
            }
            None => self.endpoint.connect().await,
        }
    }
}

/// Dials TCP (TCP_NODELAY) and makes the TLS handshake with the client settings current
/// at the dial, verifying the server as a node of the trust bundle.
#[derive(Clone)]
struct TlsConnector {
    tls: Arc<crate::tls::Tls>,
}

type Dialed = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

impl tower::Service<http::Uri> for TlsConnector {
    type Response = Dialed;
    type Error = std::io::Error;
    type Future = futures::future::BoxFuture<'static, std::io::Result<Dialed>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let config = self.tls.client_config();
        Box::pin(async move {
            let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "no host");
            let host = uri.host().ok_or_else(invalid)?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port = uri.port_u16().ok_or_else(invalid)?;
            let tcp = tokio::net::TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            let name = rustls_pki_types::ServerName::try_from(crate::tls::NODE_NAME)
                .expect("the node name is a DNS name");
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await?;
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}

/// Creates one [`Connection`] per target voter of one cell.
#[derive(Clone)]
pub struct Network {
    peers: Peers,
    cell_id: u64,
    stages: Arc<Stages>,
}

impl Network {
    /// A network of cell `cell_id` over a shared channel cache, timing appends into `stages`.
    pub fn new(peers: Peers, cell_id: u64, stages: Arc<Stages>) -> Self {
        Network {
            peers,
            cell_id,
            stages,
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            target,
            cell_id: self.cell_id,
            client: self.peers.raft_client(&node.addr),
            heartbeats: self.peers.coalescer(&node.addr),
            stages: self.stages.clone(),
        }
    }
}

/// The Raft transport to one voter.
pub struct Connection {
    target: NodeId,
    cell_id: u64,
    client: RaftClient<Channel>,
    heartbeats: Arc<Coalescer>,
    stages: Arc<Stages>,
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, E>>;

impl Connection {
    /// Send one postcard-encoded message and decode the remote `Result<T, E>`.
    async fn call<Req, T, E>(
        &mut self,
        kind: RpcKind,
        req: &Req,
        option: &RPCOption,
    ) -> RpcResult<T, E>
    where
        Req: serde::Serialize,
        T: for<'de> serde::Deserialize<'de>,
        E: for<'de> serde::Deserialize<'de> + std::error::Error,
    {
        let blob = Blob {
            data: encode(req),
            cell: self.cell_id,
        };
        if let RpcKind::Heartbeat = kind {
            let answer = self.heartbeats.send(blob).await;
            return self.answer(answer);
        }
        let mut request = tonic::Request::new(blob);
        request.set_timeout(option.hard_ttl());
        let response = match kind {
            RpcKind::Append | RpcKind::Heartbeat => self.client.append_entries(request).await,
            RpcKind::Vote => self.client.vote(request).await,
            RpcKind::Snapshot => self.client.install_snapshot(request).await,
        };
        self.answer(response.map(tonic::Response::into_inner))
    }

    /// The remote `Result<T, E>` of a call's answer.
    fn answer<T, E>(&self, response: Result<Blob, tonic::Status>) -> RpcResult<T, E>
    where
        T: for<'de> serde::Deserialize<'de>,
        E: for<'de> serde::Deserialize<'de> + std::error::Error,
    {
        let blob = response.map_err(|status| {
            // A peer that is down or cut off is unreachable: openraft then backs off.
            let err = std::io::Error::other(format!("to {}: {}", self.target, status.message()));
            match status.code() {
                tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::Cancelled => RPCError::Unreachable(Unreachable::new(&err)),
                _ => RPCError::Network(NetworkError::new(&err)),
            }
        })?;
        let result: Result<T, E> = decode(&blob.data)
            .map_err(|e| RPCError::Network(NetworkError::new(&std::io::Error::other(e))))?;
        result.map_err(|e| RPCError::RemoteError(openraft::error::RemoteError::new(self.target, e)))
    }
}

#[derive(Clone, Copy)]
enum RpcKind {
    Append,
    /// An AppendEntries without entries: a heartbeat or a leader's read-index check, sent
    /// with the others to the same peer ([`Coalescer`]).
    Heartbeat,
    Vote,
    Snapshot,
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, RaftError<NodeId>> {
        let carries_entries = !rpc.entries.is_empty();
        let kind = match carries_entries {
            true => RpcKind::Append,
            false => RpcKind::Heartbeat,
        };
        let (sent, sent_on) = (std::time::Instant::now(), crate::stages::here());
        let answer = self.call(kind, &rpc, &option).await;
        if carries_entries && answer.is_ok() {
            self.stages.record(Stage::FollowerAcked, sent.elapsed());
            let switches = crate::stages::switched(sent_on);
            self.stages.hop(Stage::FollowerAcked, switches);
        }
        answer
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        self.call(RpcKind::Snapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, RaftError<NodeId>> {
        self.call(RpcKind::Vote, &rpc, &option).await
    }

    /// Retry an unreachable peer at a steady pace without logging storms (TRAPS.md 6).
    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(Duration::from_millis(
            limits::PEER_BACKOFF_MS,
        )))
    }
}
