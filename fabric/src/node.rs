//! A node: one process, one gRPC port, many cells.
//!
//! Every cell member the node hosts lives in `DATA/cells/<cell id>/` and is started again
//! when the node restarts. Raft messages, forwarded requests and admin calls name their
//! cell, so all cells share the port and one HTTP/2 connection per remote node. The node's
//! client API is the [`crate::router`]: a request reaches the cell owning its key, wherever
//! that cell's leader is.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use whip_board::{Query, QueryResult, Request};
use whip_cell::network::Peers;
use whip_cell::service::ServeError;
use whip_cell::storage::{LogLayout, NODE_LOG_DIR, NodeLog};
use whip_cell::types::{decode, encode};
use whip_cell::{Cell, CellConfig, CellError, StorageKind};
use whip_proto::v1::Blob;

use crate::limits;
use crate::map::{FabricMap, MAP_KEY, META_CELL};

/// Which member a call for one cell goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// This node's own member when it hosts the cell (it forwards to the leader), else
    /// another voter.
    Hosted,
    /// Another voter, even when this node hosts the cell: for a retry after this node's
    /// own member failed or did not answer in time.
    Peer,
}

/// How to run a node.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id (> 0); it is also its member id in every cell it hosts.
    pub id: u64,
    /// The address other nodes and clients reach this node at (`host:port`).
    pub advertise: String,
    /// The data directory; each hosted cell gets `cells/<id>/` inside it.
    pub data_dir: PathBuf,
    /// Storage engine of every hosted cell.
    pub storage: StorageKind,
    /// Where hosted cells keep their Raft logs: each its own, or one log for the node
    /// (`data_dir/node-log`, group-committed across cells; `redb` storage only).
    pub log: LogLayout,
    /// Raft heartbeat of hosted cells.
    pub heartbeat_ms: u64,
    /// Lower bound of the election timeout of hosted cells.
    pub election_timeout_min_ms: u64,
    /// Test-only: added to the clock of every hosted cell (fault tests skew a node, and
    /// jump its clock live); every hosted cell shares this one.
    pub clock_offset: whip_cell::ClockOffset,
    /// Test-only disk faults under every hosted cell's log store.
    pub disk_faults: whip_cell::DiskFaults,
    /// Time to live of the lease serializing range changes; renewed every third of it while
    /// a change runs (tests shorten it to show a slow move keeps it).
    pub range_admin_lease_ttl_ms: u64,
    /// How the node serves and reaches other nodes: TLS with its node credential, or
    /// plaintext on loopback behind `--insecure`.
    pub transport: whip_cell::tls::Transport,
    /// Time to live of the quotas of the fabric's work ceiling this node's cells borrow
    /// from the meta cell; renewed every sixth of it. A cell that cannot renew admits
    /// nothing once it lapses, and its entries lapse with it.
    pub work_quota_ttl_ms: u64,
    /// Whether idle hosted cells hibernate (`crate::hibernate`).
    pub hibernate: crate::hibernate::Hibernate,
    /// Whether hosted cells' leaders serve reads under their lease (`whip_cell::lease_read`).
    pub lease_reads: whip_cell::LeaseReads,
}

impl NodeConfig {
    /// Defaults for node `id` at `advertise` with data in `data_dir`. Hosted cells
    /// heartbeat less often than a standalone cell (`limits::NODE_HEARTBEAT_MS`): a node
    /// hosts hundreds of cells and idle ones must cost little (BENCHMARKS.md).
    pub fn new(id: u64, advertise: impl Into<String>, data_dir: impl Into<PathBuf>) -> Self {
        NodeConfig {
            id,
            advertise: advertise.into(),
            data_dir: data_dir.into(),
            storage: StorageKind::Redb,
            log: LogLayout::Node,
            heartbeat_ms: limits::NODE_HEARTBEAT_MS,
            election_timeout_min_ms: limits::NODE_ELECTION_TIMEOUT_MIN_MS,
            clock_offset: whip_cell::ClockOffset::default(),
            disk_faults: whip_cell::DiskFaults::default(),
            range_admin_lease_ttl_ms: limits::RANGE_ADMIN_LEASE_TTL_MS,
            transport: whip_cell::tls::Transport::Insecure,
            work_quota_ttl_ms: limits::WORK_QUOTA_TTL_MS,
            hibernate: crate::hibernate::Hibernate::On,
            lease_reads: whip_cell::LeaseReads::On,
        }
    }
}

/// A running node. Cheap to clone.
#[derive(Clone)]
pub struct Node {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    config: NodeConfig,
    peers: Peers,
    cells: RwLock<BTreeMap<u64, Cell>>,
    creating: tokio::sync::Mutex<()>,
    map: RwLock<Option<Arc<FabricMap>>>,
    /// Last known leader address per cell not hosted here.
    hints: Mutex<HashMap<u64, String>>,
    /// One quota round at a time per cell from this node (`crate::quota`).
    pub(crate) quota_rounds: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<()>>>>,
    /// The calls this node's gRPC server answered.
    rpc: whip_cell::metrics::RpcStats,
    /// The range change this node runs now (`Node/RangeProgress`).
    pub(crate) range_change: crate::range_change::Tracker,
    /// The one log of every hosted cell (`LogLayout::Node`).
    node_log: Option<Arc<NodeLog>>,
    /// Which peer nodes answer this node's pings (`crate::hibernate`).
    pub(crate) liveness: crate::hibernate::Liveness,
    /// A random id of this run of the node, which its ping answers carry: a peer tells a
    /// restart from it.
    boot: u64,
}

impl Inner {
    /// Every hosted member.
    pub(crate) fn members(&self) -> Vec<Cell> {
        self.cells
            .read()
            .expect("cells lock")
            .values()
            .cloned()
            .collect()
    }
}

impl Node {
    /// Start every cell member found in the data directory.
    pub async fn start(config: NodeConfig) -> Result<Node, CellError> {
        if config.id == 0 {
            return Err(CellError::InvalidArgument("node ids start at 1".into()));
        }
        let cells_dir = config.data_dir.join("cells");
        whip_cell::tls::private_dir(&config.data_dir)
            .and_then(|()| whip_cell::tls::private_dir(&cells_dir))
            .map_err(|e| fatal(&cells_dir, std::io::Error::other(e)))?;
        let node_log = match config.log {
            LogLayout::Node => {
                let dir = config.data_dir.join(NODE_LOG_DIR);
                let log = NodeLog::open(&dir, config.disk_faults.clone())
                    .map_err(|e| fatal(&dir, std::io::Error::other(e)))?;
                Some(log)
            }
            LogLayout::Cell => None,
        };
        let node = Node {
            inner: Arc::new(Inner {
                node_log,
                peers: Peers::new(config.transport.clone()),
                config,
                cells: RwLock::new(BTreeMap::new()),
                creating: tokio::sync::Mutex::new(()),
                map: RwLock::new(None),
                hints: Mutex::new(HashMap::new()),
                quota_rounds: Mutex::new(HashMap::new()),
                rpc: whip_cell::metrics::RpcStats::default(),
                range_change: Default::default(),
                liveness: Default::default(),
                boot: rand_index() | 1,
            }),
        };
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&cells_dir).map_err(|e| fatal(&cells_dir, e))? {
            let entry = entry.map_err(|e| fatal(&cells_dir, e))?;
            if let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok())
            {
                found.push(id);
            }
        }
        for id in found {
            node.create_cell(id, None).await?;
        }
        tokio::spawn(tick_loop(Arc::downgrade(&node.inner)));
        let heartbeat_ms = node.inner.config.heartbeat_ms;
        tokio::spawn(heartbeat_loop(Arc::downgrade(&node.inner), heartbeat_ms));
        tokio::spawn(crate::mover::mover_loop(Arc::downgrade(&node.inner)));
        tokio::spawn(crate::takeover::takeover_loop(Arc::downgrade(&node.inner)));
        tokio::spawn(crate::follow::follow_loop(Arc::downgrade(&node.inner)));
        tokio::spawn(crate::quota::quota_loop(Arc::downgrade(&node.inner)));
        if node.inner.config.hibernate == crate::hibernate::Hibernate::On {
            tokio::spawn(crate::hibernate::hibernate_loop(Arc::downgrade(
                &node.inner,
            )));
        }
        tracing::info!(
            node = node.id(),
            cells = node.hosted_ids().len(),
            "node started"
        );
        Ok(node)
    }

    /// How this node runs.
    pub fn config(&self) -> &NodeConfig {
        &self.inner.config
    }

    /// This node's id.
    pub fn id(&self) -> u64 {
        self.inner.config.id
    }

    /// This node's advertised address.
    pub fn addr(&self) -> &str {
        &self.inner.config.advertise
    }

    /// The shared peer channels.
    pub fn peers(&self) -> &Peers {
        &self.inner.peers
    }

    /// The hosted member of `cell`, if any.
    pub fn hosted(&self, cell: u64) -> Option<Cell> {
        self.inner
            .cells
            .read()
            .expect("cells lock")
            .get(&cell)
            .cloned()
    }

    /// Ids of the hosted cells.
    pub fn hosted_ids(&self) -> Vec<u64> {
        self.inner
            .cells
            .read()
            .expect("cells lock")
            .keys()
            .copied()
            .collect()
    }

    /// Host a member of `cell` (idempotent): open or create its storage and start Raft;
    /// install the cell's identity when `identity_secret` is given. The member joins its
    /// cell when the cell is initialized or it is added as a learner.
    pub async fn create_cell(
        &self,
        cell: u64,
        identity_secret: Option<[u8; 32]>,
    ) -> Result<Cell, CellError> {
        let dir = self.cell_dir(cell);
        if let Some(secret) = identity_secret {
            std::fs::create_dir_all(&dir).map_err(|e| fatal(&dir, e))?;
            crate::identity::CellIdentity::load_or_install(&dir, &secret)
                .map_err(|e| fatal(&dir, e))?;
        }
        let _one_at_a_time = self.inner.creating.lock().await;
        if let Some(existing) = self.hosted(cell) {
            return Ok(existing);
        }
        let hosted = self.hosted_ids().len();
        if hosted >= limits::CELLS_PER_NODE_MAX {
            return Err(CellError::InvalidArgument(format!(
                "node hosts {hosted} cells, the limit"
            )));
        }
        let c = &self.inner.config;
        std::fs::create_dir_all(&dir).map_err(|e| fatal(&dir, e))?;
        let mut config = CellConfig::new(c.id, c.advertise.clone(), dir);
        config.cell_id = cell;
        config.storage = c.storage;
        config.heartbeat_ms = c.heartbeat_ms;
        config.election_timeout_min_ms = c.election_timeout_min_ms;
        config.lease_reads = c.lease_reads;
        config.clock_offset = c.clock_offset.clone();
        config.disk_faults = c.disk_faults.clone();
        config.transport = c.transport.clone();
        config.own_tick_loop = false;
        config.own_heartbeat = false;
        // The node's server counts what its members forward (`whip_forwarded_requests`).
        config.rpc_stats = self.inner.rpc.clone();
        config.node_log = self.inner.node_log.clone();
        let member = Cell::start_with_peers(config, self.inner.peers.clone()).await?;
        self.inner
            .cells
            .write()
            .expect("cells lock")
            .insert(cell, member.clone());
        Ok(member)
    }

    /// The last log index this node's member of `cell` applied, if it hosts one.
    pub(crate) fn applied_index(&self, cell: u64) -> Option<u64> {
        let member = self.hosted(cell)?;
        let applied = member.raft().metrics().borrow().last_applied;
        Some(applied.map_or(0, |l| l.index))
    }

    /// Whether this node's member of `cell` is its leader.
    pub fn leads(&self, cell: u64) -> bool {
        self.hosted(cell).is_some_and(|member| {
            let metrics = member.raft().metrics().borrow().clone();
            metrics.current_leader == Some(self.id())
        })
    }

    /// The address of the node hosting `cell`'s leader, as this node knows it: its
    /// member's view, or the last hint for a cell it does not host.
    pub fn leader_addr(&self, cell: u64) -> Option<String> {
        match self.hosted(cell) {
            Some(member) => member.leader_addr(),
            None => self
                .inner
                .hints
                .lock()
                .expect("hints lock")
                .get(&cell)
                .cloned(),
        }
    }

    /// The data directory of this node's member of `cell`.
    pub(crate) fn cell_dir(&self, cell: u64) -> PathBuf {
        self.inner
            .config
            .data_dir
            .join("cells")
            .join(cell.to_string())
    }

    /// The signing identity of hosted cell `cell`; `None` when it was created without one.
    pub fn identity(&self, cell: u64) -> Result<Option<crate::identity::CellIdentity>, CellError> {
        let dir = self.cell_dir(cell);
        crate::identity::CellIdentity::load(&dir).map_err(|e| fatal(&dir, e))
    }

    /// The gRPC router of this node: the routed client API, the admin and Raft services of
    /// every hosted cell, and the node service (fabric init, status, range changes).
    pub fn router(&self) -> whip_cell::service::Services {
        let node = Arc::new(self.clone());
        whip_cell::service::services(node.clone(), node).add_service(
            whip_proto::v1::node_server::NodeServer::new(crate::admin::NodeApi::new(self.clone()))
                .max_decoding_message_size(whip_cell::limits::MESSAGE_BYTES_MAX),
        )
    }

    /// Serve this node on `listener` over its transport until `shutdown` resolves.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let transport = &self.inner.config.transport;
        whip_cell::service::serve_router(self.router(), listener, transport, shutdown).await
    }

    /// Stop every hosted cell.
    ///
    /// The node lets go of every cell here (it hosts nothing afterwards), so their storage
    /// is released as soon as in-flight calls finish, even while clones of the node live on
    /// (open connections, the mover's round): a restart in the same process can reopen it.
    pub async fn shutdown(&self) {
        let cells = std::mem::take(&mut *self.inner.cells.write().expect("cells lock"));
        for cell in cells.into_values() {
            cell.shutdown().await;
        }
    }

    /// The cached range map, loaded from the meta cell when there is none.
    pub async fn map(&self) -> Result<Arc<FabricMap>, CellError> {
        if let Some(map) = self.inner.map.read().expect("map lock").clone() {
            return Ok(map);
        }
        Ok(self.load_map().await?.0)
    }

    /// Forget the cached map (a cell answered `WrongRange`).
    pub fn invalidate_map(&self) {
        *self.inner.map.write().expect("map lock") = None;
    }

    /// Read the map from the meta cell (linearizable), cache it, and return it with the
    /// version of its key.
    pub async fn load_map(&self) -> Result<(Arc<FabricMap>, u64), CellError> {
        let initialized = self.hosted(META_CELL).is_some_and(|meta| {
            let metrics = meta.raft().metrics().borrow().clone();
            metrics.membership_config.membership().nodes().count() > 0
        });
        if !initialized {
            return Err(CellError::Unavailable(format!(
                "node {} is not part of an initialized fabric yet (run `whip fabric init`)",
                self.id()
            )));
        }
        let query = Query::KvGet {
            key: MAP_KEY.to_vec(),
        };
        // The meta cell may be electing (its leader just died): retry for a while.
        let answer = retrying("the range map", limits::META_READ_RETRY_MS, |via| {
            self.read_cell_via(None, META_CELL, query.clone(), via)
        })
        .await?;
        let entry = match answer {
            QueryResult::Kv(Some(entry)) => entry,
            QueryResult::Kv(None) => {
                return Err(CellError::Unavailable(
                    "this fabric is not initialized yet (run `whip fabric init`)".into(),
                ));
            }
            other => return Err(unexpected(&other)),
        };
        let map = Arc::new(FabricMap::from_bytes(&entry.value).map_err(CellError::Fatal)?);
        *self.inner.map.write().expect("map lock") = Some(map.clone());
        Ok((map, entry.version))
    }

    /// The cached map, if any (status falls back to it when the meta cell cannot answer).
    pub fn cached_map(&self) -> Option<Arc<FabricMap>> {
        self.inner.map.read().expect("map lock").clone()
    }

    /// Cache `map` (after this node changed it).
    pub(crate) fn set_map(&self, map: FabricMap) {
        *self.inner.map.write().expect("map lock") = Some(Arc::new(map));
    }

    /// Apply `request` on `cell` as is (no routing): here when hosted, else on a member
    /// named by `map` (the last known leader first).
    pub async fn submit_cell(
        &self,
        map: Option<&FabricMap>,
        cell: u64,
        request: Request,
    ) -> Result<whip_board::Outcome, CellError> {
        self.submit_cell_via(map, cell, request, Via::Hosted).await
    }

    /// [`Node::submit_cell`] through the member `via` names.
    pub(crate) async fn submit_cell_via(
        &self,
        map: Option<&FabricMap>,
        cell: u64,
        request: Request,
        via: Via,
    ) -> Result<whip_board::Outcome, CellError> {
        if via == Via::Hosted
            && let Some(member) = self.hosted(cell)
        {
            return member.submit(request).await;
        }
        let addr = self.remote_member(map, cell)?;
        (self.inner.rpc).forwarded(whip_cell::metrics::Forwarded::Write, 1);
        let blob = Blob {
            data: encode(&vec![request]),
            cell,
        };
        let mut client = self.inner.peers.raft_client(&addr);
        let reply = tokio::time::timeout(remote_timeout(), client.forward(blob)).await;
        let results: Vec<Result<whip_board::Outcome, CellError>> = match reply {
            Ok(Ok(blob)) => decode(&blob.into_inner().data).map_err(CellError::Unavailable)?,
            Ok(Err(status)) => return Err(self.remote_failed(cell, CellError::from(status))),
            Err(_) => return Err(self.remote_failed(cell, timed_out(&addr))),
        };
        let result = results
            .into_iter()
            .next()
            .ok_or_else(|| CellError::Fatal("forward answered nothing".into()))?;
        result.map_err(|e| self.remote_failed(cell, e))
    }

    /// Answer `query` on `cell` as is (no routing), linearizably.
    pub async fn read_cell(
        &self,
        map: Option<&FabricMap>,
        cell: u64,
        query: Query,
    ) -> Result<QueryResult, CellError> {
        self.read_cell_via(map, cell, query, Via::Hosted).await
    }

    /// [`Node::read_cell`] through the member `via` names.
    pub(crate) async fn read_cell_via(
        &self,
        map: Option<&FabricMap>,
        cell: u64,
        query: Query,
        via: Via,
    ) -> Result<QueryResult, CellError> {
        if via == Via::Hosted
            && let Some(member) = self.hosted(cell)
        {
            return member.read(query).await;
        }
        let addr = self.remote_member(map, cell)?;
        (self.inner.rpc).forwarded(whip_cell::metrics::Forwarded::Read, 1);
        let blob = Blob {
            data: encode(&query),
            cell,
        };
        let mut client = self.inner.peers.raft_client(&addr);
        let reply = tokio::time::timeout(remote_timeout(), client.read(blob)).await;
        let result: Result<QueryResult, CellError> = match reply {
            Ok(Ok(blob)) => decode(&blob.into_inner().data).map_err(CellError::Unavailable)?,
            Ok(Err(status)) => Err(CellError::from(status)),
            Err(_) => Err(timed_out(&addr)),
        };
        match result {
            Ok(QueryResult::WrongRange { epoch }) => Err(CellError::WrongRange { epoch }),
            Ok(result) => Ok(result),
            Err(e) => Err(self.remote_failed(cell, e)),
        }
    }

    /// Where to send a call for `cell`, which this node does not host.
    /// Never this node itself: a call that comes here goes through the hosted member.
    fn remote_member(&self, map: Option<&FabricMap>, cell: u64) -> Result<String, CellError> {
        let hint = self
            .inner
            .hints
            .lock()
            .expect("hints lock")
            .get(&cell)
            .cloned();
        if let Some(hint) = hint.filter(|addr| addr != self.addr()) {
            return Ok(hint);
        }
        let cached;
        let map = match map {
            Some(map) => map,
            None => {
                cached = self
                    .inner
                    .map
                    .read()
                    .expect("map lock")
                    .clone()
                    .ok_or_else(|| {
                        CellError::Unavailable(format!("cell {cell} is not hosted here"))
                    })?;
                cached.as_ref()
            }
        };
        let voters = map
            .cells
            .get(&cell)
            .ok_or_else(|| CellError::InvalidArgument(format!("cell {cell} does not exist")))?;
        // Spread first attempts over the other voters; a NotLeader answer names the leader.
        let others: Vec<u64> = voters.iter().copied().filter(|v| *v != self.id()).collect();
        let Some(&pick) = others.get((rand_index() as usize) % others.len().max(1)) else {
            return Err(CellError::Unavailable(format!(
                "cell {cell} has no voter but this node"
            )));
        };
        map.addr(pick)
            .map(str::to_string)
            .ok_or_else(|| CellError::Fatal(format!("node {pick} has no address in the map")))
    }

    /// Remember the leader a remote member named, or forget a hint that failed.
    fn remote_failed(&self, cell: u64, err: CellError) -> CellError {
        let mut hints = self.inner.hints.lock().expect("hints lock");
        match &err {
            CellError::NotLeader { hint: Some(addr) } => {
                hints.insert(cell, addr.clone());
            }
            CellError::Unavailable(_) | CellError::NotLeader { hint: None } => {
                hints.remove(&cell);
            }
            _ => {}
        }
        err
    }
}

/// Retry `call` while the cell is unavailable (electing, moving leaders, not hosted by the
/// member asked), up to `wait_ms`. Each try is bounded by `ADMIN_TRY_MS`, and a try that
/// failed or did not answer is followed by one through another voter, so a member of this
/// node that cannot answer (cut off, removed, paused behind a stale leader) holds no change
/// up. A retry that goes on for `ADMIN_RETRY_WARN_MS` says so, and again each as long.
pub(crate) async fn retrying<T, F, Fut>(what: &str, wait_ms: u64, call: F) -> Result<T, CellError>
where
    F: Fn(Via) -> Fut,
    Fut: std::future::Future<Output = Result<T, CellError>>,
{
    let begun = tokio::time::Instant::now();
    let deadline = begun + Duration::from_millis(wait_ms);
    let warn_every = Duration::from_millis(limits::ADMIN_RETRY_WARN_MS);
    let mut warn_at = begun + warn_every;
    let mut backoff = Duration::from_millis(limits::ROUTE_BACKOFF_MIN_MS);
    let mut via = Via::Hosted;
    loop {
        let try_for = Duration::from_millis(limits::ADMIN_TRY_MS);
        let answer = tokio::time::timeout(try_for, call(via))
            .await
            .unwrap_or_else(|_| {
                Err(CellError::Unavailable(format!(
                    "{via:?}: no answer in time"
                )))
            });
        match answer {
            // NotFound: the member asked does not host the cell now (a node starting or
            // stopping, a route gone stale): another try may reach one that does.
            Err(
                e @ (CellError::Unavailable(_)
                | CellError::NotLeader { .. }
                | CellError::NotFound(_)),
            ) if tokio::time::Instant::now() < deadline => {
                let now = tokio::time::Instant::now();
                if now >= warn_at {
                    let waited_ms = (now - begun).as_millis() as u64;
                    tracing::warn!(what, error = %e, waited_ms, "still retrying");
                    warn_at = now + warn_every;
                } else {
                    tracing::debug!(what, error = %e, ?via, "retrying");
                }
                via = match via {
                    Via::Hosted => Via::Peer,
                    Via::Peer => Via::Hosted,
                };
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(limits::ROUTE_BACKOFF_MAX_MS));
            }
            // A superseded driver stops as such (its caller tells it from a failure).
            Err(e @ CellError::Superseded(_)) => return Err(e),
            Err(e) => return Err(CellError::Unavailable(format!("{what}: {e}"))),
            ok => return ok,
        }
    }
}

/// Run `round` on the hosted members every `every`, until the node is gone.
async fn each_round<F, Fut>(inner: std::sync::Weak<Inner>, every: Duration, mut round: F)
where
    F: FnMut(Vec<Cell>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let cells = inner.members();
        drop(inner);
        round(cells).await;
    }
}

/// One loop drives the ticks of every hosted cell (instead of one timer per cell): each
/// round checks every cell cheaply and runs the few that have work.
async fn tick_loop(inner: std::sync::Weak<Inner>) {
    let every = Duration::from_millis(whip_cell::limits::TICK_INTERVAL_MS);
    each_round(inner, every, |cells| async move {
        for cell in cells {
            if cell.tick_due() {
                tokio::spawn(async move { cell.tick_round().await });
            }
        }
    })
    .await;
}

/// One loop heartbeats every cell this node leads, all at once each heartbeat interval, so
/// the heartbeats for one peer node leave as one call (`whip_cell`'s `heartbeats.rs`).
async fn heartbeat_loop(inner: std::sync::Weak<Inner>, every_ms: u64) {
    each_round(inner, Duration::from_millis(every_ms), |cells| async move {
        for cell in &cells {
            cell.heartbeat().await;
        }
    })
    .await;
}

static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A name unique to this process and call: `<pid>-<sequence>`.
pub(crate) fn unique_suffix() -> String {
    let seq = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "{}-{seq}-{:x}",
        std::process::id(),
        rand_index() & 0xffff_ffff
    )
}

fn rand_index() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

fn remote_timeout() -> Duration {
    Duration::from_millis(limits::REMOTE_CALL_TIMEOUT_MS)
}

fn timed_out(addr: &str) -> CellError {
    CellError::Unavailable(format!(
        "{addr} did not answer within {} ms",
        limits::REMOTE_CALL_TIMEOUT_MS
    ))
}

fn fatal(path: &std::path::Path, e: std::io::Error) -> CellError {
    CellError::Fatal(format!("{}: {e}", path.display()))
}

pub(crate) fn unexpected(result: &QueryResult) -> CellError {
    CellError::Fatal(format!("unexpected answer {result:?}"))
}

impl whip_cell::service::Cells for Node {
    fn cell(&self, id: u64) -> Option<Cell> {
        self.hosted(id)
    }

    fn rpc_stats(&self) -> whip_cell::metrics::RpcStats {
        self.inner.rpc.clone()
    }

    fn transport(&self) -> whip_cell::tls::Transport {
        self.inner.config.transport.clone()
    }

    fn identity_secret(&self, id: u64) -> Result<Option<[u8; 32]>, CellError> {
        Ok(self.identity(id)?.map(|i| i.secret()))
    }

    fn boot_id(&self) -> u64 {
        self.inner.boot
    }
}
