//! # whip-tests: integration and fault tests
//!
//! Owns the helpers that start real clusters — real gRPC on 127.0.0.1, real storage in temp
//! directories, real Raft with 3 voters — and the tests under `tests/`. [`Cluster`] runs the
//! members inside the test process (a kill stops a member's Raft and its server and drops
//! its storage handles); [`ProcessCluster`] runs each member as a `whip cell serve` process
//! and kills it with SIGKILL; [`fabric`] does the same for multi-cell nodes. [`chaos`] is
//! the fault and linearizability harness behind `whip chaos` (members in network
//! namespaces, seeded nemeses, recorded histories, a Wing–Gong checker). [`executor`] runs a
//! `whip executor` process and speaks raw HTTP to it. Must never: mock
//! a component of our own.
#![deny(missing_docs, unreachable_pub)]

pub mod browser;
pub mod chaos;
pub mod executor;
pub mod fabric;
pub mod model_stub;
mod process;
pub mod table;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::OnceLock;

use whip_cell::tls::{self, Principal, Transport};
use whip_cell::{Cell, CellClient, CellConfig, StorageKind};

pub use process::{DevCell, ProcessCluster, whip_binary, whip_json, whip_json_in};

/// The node credential in-process members serve with: issued (in memory) by this user's
/// cluster CA, the one `whip` processes started by the tests use too.
pub fn node_transport() -> Transport {
    static NODE: OnceLock<Transport> = OnceLock::new();
    NODE.get_or_init(|| {
        let authority = tls::Authority::load_or_create(&tls::config_dir()).expect("cluster CA");
        Transport::tls(
            authority
                .credentials(Principal::Node)
                .expect("node credential"),
        )
    })
    .clone()
}

/// A TLS client of this user's cluster without a certificate (a machine that has only the
/// CA's `ca.pem`): anonymous unless an agent's token proves who calls.
pub fn ca_only_transport() -> Transport {
    let authority = tls::Authority::load_or_create(&tls::config_dir()).expect("cluster CA");
    Transport::tls(tls::Credentials {
        ca: authority.cert_pem().to_string(),
        identity: None,
    })
}

/// One unary gRPC call of `path` with `message`, made by hand over `transport` (the
/// attacker's way: a raw client that sends what it likes as whoever its certificate says).
pub async fn raw_unary<Req, Resp>(
    addr: &str,
    transport: &Transport,
    path: &'static str,
    message: Req,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    raw_request(addr, transport, path, tonic::Request::new(message)).await
}

/// [`raw_unary`] with a request made by the caller (metadata of its choosing).
pub async fn raw_request<Req, Resp>(
    addr: &str,
    transport: &Transport,
    path: &'static str,
    request: tonic::Request<Req>,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let channel = whip_cell::network::endpoint_with(addr, transport)
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("connect: {e:?}")))?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("ready: {e}")))?;
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    let path = http::uri::PathAndQuery::from_static(path);
    grpc.unary(request, path, codec)
        .await
        .map(tonic::Response::into_inner)
}

/// Make every client of this test process connect as the operator of this user's cluster
/// CA (as the `whip` CLI does), once.
pub fn install_client() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let credentials =
            tls::operator_credentials(&tls::config_dir()).expect("operator credential");
        tls::set_client_default(Transport::tls(credentials));
    });
}

/// Install a quiet tracing subscriber and the operator's client credential once (set
/// `WHIP_LOG` to see more).
pub fn init_tracing() {
    install_client();
    let filter = tracing_subscriber::EnvFilter::try_from_env("WHIP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,openraft=error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// Wait until `check` holds, polling every 20 ms, or panic with `what` after `timeout`.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Free loopback addresses, reserved by binding port 0.
pub fn free_addrs(n: usize) -> Vec<SocketAddr> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr"))
        .collect()
}

struct Member {
    cell: Cell,
    server: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
}

/// A cell of several members in this process, each with its own gRPC server and storage.
pub struct Cluster {
    /// The data root (each member under `member-<id>`).
    pub dir: tempfile::TempDir,
    /// Member id → address.
    pub addrs: BTreeMap<u64, SocketAddr>,
    members: BTreeMap<u64, Member>,
    configs: BTreeMap<u64, CellConfig>,
}

impl Cluster {
    /// Start `n` voters on `storage`, initialize them as one cell and wait for a leader.
    pub async fn start(n: usize, storage: StorageKind) -> Cluster {
        Cluster::start_with(n, storage, |_| {}).await
    }

    /// Like [`Cluster::start`], adjusting each member's config first.
    pub async fn start_with(
        n: usize,
        storage: StorageKind,
        adjust: impl Fn(&mut CellConfig),
    ) -> Cluster {
        init_tracing();
        let dir = tempfile::tempdir().expect("temp dir");
        let addrs: BTreeMap<u64, SocketAddr> = free_addrs(n)
            .into_iter()
            .enumerate()
            .map(|(i, a)| (i as u64 + 1, a))
            .collect();
        let mut cluster = Cluster {
            dir,
            addrs: addrs.clone(),
            members: BTreeMap::new(),
            configs: BTreeMap::new(),
        };
        for id in addrs.keys() {
            let mut config = CellConfig::new(
                *id,
                addrs[id].to_string(),
                cluster.dir.path().join(format!("member-{id}")),
            );
            config.storage = storage;
            config.transport = node_transport();
            adjust(&mut config);
            cluster.configs.insert(*id, config);
            cluster.start_member(*id).await;
        }
        let members = addrs.iter().map(|(id, a)| (*id, a.to_string())).collect();
        cluster
            .member(1)
            .initialize(members)
            .await
            .expect("initialize");
        cluster.wait_leader(Duration::from_secs(10)).await;
        cluster
    }

    /// Start (or restart) member `id` from its data directory.
    pub async fn start_member(&mut self, id: u64) {
        let config = self.configs[&id].clone();
        let listener = whip_cell::service::bind(self.addrs[&id])
            .await
            .expect("bind member address");
        let cell = Cell::start(config).await.expect("start member");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = cell.clone();
        let server = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            let _ = whip_cell::service::serve(served, listener, shutdown).await;
        });
        self.members.insert(id, Member { cell, server, stop });
    }

    /// Stop member `id` abruptly: its server stops answering and its Raft stops.
    pub async fn kill(&mut self, id: u64) {
        let member = self.members.remove(&id).expect("member is running");
        let _ = member.stop.send(());
        member.server.abort();
        let _ = member.server.await;
        member.cell.shutdown().await;
    }

    /// The running member `id`.
    pub fn member(&self, id: u64) -> &Cell {
        &self.members[&id].cell
    }

    /// Wait until running member `id` has applied at least `index` (panics after `timeout`).
    pub async fn wait_applied(&self, id: u64, index: u64, timeout: Duration) {
        let member = self.member(id).clone();
        wait_for(
            &format!("member {id} to apply index {index}"),
            timeout,
            || {
                let member = member.clone();
                async move {
                    let applied = member.raft().metrics().borrow().last_applied;
                    applied.map_or(0, |l| l.index) >= index
                }
            },
        )
        .await;
    }

    /// Ids of running members.
    pub fn running(&self) -> Vec<u64> {
        self.members.keys().copied().collect()
    }

    /// The leader as seen by the running members, once they agree on one that is running.
    pub async fn wait_leader(&self, timeout: Duration) -> u64 {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let seen: Vec<Option<u64>> = self
                .members
                .values()
                .map(|m| m.cell.raft().metrics().borrow().current_leader)
                .collect();
            if let Some(Some(l)) = seen.first()
                && seen.iter().all(|s| *s == Some(*l))
                && self.members.contains_key(l)
            {
                return *l;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no agreed leader within {timeout:?}: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Addresses of the running members.
    pub fn running_addrs(&self) -> Vec<String> {
        self.members
            .keys()
            .map(|id| self.addrs[id].to_string())
            .collect()
    }

    /// A client that may use any running member.
    pub fn client(&self) -> CellClient {
        CellClient::connect(&self.running_addrs()).expect("client")
    }

    /// A client bound to member `id` only.
    pub fn client_of(&self, id: u64) -> CellClient {
        CellClient::connect(&[self.addrs[&id].to_string()]).expect("client")
    }

    /// The data directory of member `id`.
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.configs[&id].data_dir.clone()
    }

    /// Stop every member.
    pub async fn shutdown(mut self) {
        for id in self.running() {
            self.kill(id).await;
        }
    }
}
