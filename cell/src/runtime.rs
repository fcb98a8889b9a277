//! A running cell member: Raft, storage, the proposal batcher, forwarding and the tick loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ServerState, SnapshotPolicy};
use tokio::sync::{Semaphore, mpsc, oneshot};
use whip_board::{Command, Outcome, Query, QueryResult, Request};
use whip_proto::v1::Blob;

use crate::election_pause::ElectionPause;
use crate::error::CellError;
use crate::limits;
use crate::network::{Network, Peers};
use crate::stages::{Stage, Stages};
use crate::storage::{LogStore, SmStore, StateMachineView, StorageKind, open_backend_on};
use crate::types::{Batch, NodeId, Raft, decode, encode};

fn raft_config(config: &CellConfig) -> openraft::Config {
    openraft::Config {
        cluster_name: "whip-cell".to_string(),
        heartbeat_interval: config.heartbeat_ms,
        enable_heartbeat: config.own_heartbeat,
        election_timeout_min: config.election_timeout_min_ms,
        election_timeout_max: config.election_timeout_min_ms * 2,
        max_payload_entries: limits::APPEND_ENTRIES_MAX,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_after_entries),
        max_in_snapshot_log_to_keep: config.snapshot_after_entries.min(1000),
        snapshot_max_chunk_size: limits::SNAPSHOT_CHUNK_BYTES,
        install_snapshot_timeout: limits::SNAPSHOT_CHUNK_TIMEOUT_MS,
        lease_read_ms: crate::lease_read::lease_read_ms(
            config.lease_reads,
            config.election_timeout_min_ms,
        ),
        ..Default::default()
    }
}

/// How to run one cell member.
#[derive(Clone, Debug)]
pub struct CellConfig {
    /// This member's id (unique in the cell, > 0). On a fabric node, the node id.
    pub id: NodeId,
    /// Which cell of a fabric this member belongs to (0 for a standalone cell and for the
    /// meta cell); Raft messages carry it so one node can host many cells.
    pub cell_id: u64,
    /// The address other members and clients reach this member at (`host:port`).
    pub advertise: String,
    /// The data directory (log, state machine, snapshot).
    pub data_dir: PathBuf,
    /// Storage engine.
    pub storage: StorageKind,
    /// Largest CAS value or ledger entry accepted, in bytes.
    pub value_bytes_max: usize,
    /// Build a snapshot after this many log entries.
    pub snapshot_after_entries: u64,
    /// Test-only offset added to this member's wall clock (clock-skew faults); shared, so a
    /// fault test can jump it while the member runs.
    pub clock_offset: crate::ClockOffset,
    /// Test-only disk faults injected under the log store (none unless a fault test sets
    /// them); shared by the cells of a process.
    pub disk_faults: crate::DiskFaults,
    /// How often the leader heartbeats its followers.
    pub heartbeat_ms: u64,
    /// A follower hearing no leader for a random time in `[min, 2 × min)` campaigns.
    pub election_timeout_min_ms: u64,
    /// Whether the leader serves linearizable reads under its lease (`lease_read.rs`).
    pub lease_reads: crate::LeaseReads,
    /// Run this member's own tick loop. A node hosting many cells turns it off and drives
    /// every cell's [`Cell::tick_due`] / [`Cell::tick_round`] from one loop instead.
    pub own_tick_loop: bool,
    /// Heartbeat on openraft's own timer. A node hosting many cells turns it off and calls
    /// [`Cell::heartbeat`] on all of them at once, so the heartbeats for one peer go out
    /// together (`heartbeats.rs`).
    pub own_heartbeat: bool,
    /// How this member serves and reaches its peers: TLS with its node credential, or
    /// plaintext on loopback behind `--insecure`.
    pub transport: crate::tls::Transport,
    /// Where the member's own gRPC server counts the calls it answers (members of one
    /// process may share one; a fabric node counts in its own instead).
    pub rpc_stats: crate::metrics::RpcStats,
    /// The node's one log, when the node keeps every cell's log there (`--log node`);
    /// `None`: the cell keeps its own.
    pub node_log: Option<Arc<crate::storage::NodeLog>>,
}

impl CellConfig {
    /// Defaults for member `id` at `advertise` with data in `data_dir`.
    pub fn new(id: NodeId, advertise: impl Into<String>, data_dir: impl Into<PathBuf>) -> Self {
        CellConfig {
            id,
            cell_id: 0,
            advertise: advertise.into(),
            data_dir: data_dir.into(),
            storage: StorageKind::Redb,
            value_bytes_max: limits::VALUE_BYTES_MAX_DEFAULT,
            snapshot_after_entries: limits::SNAPSHOT_AFTER_ENTRIES_DEFAULT,
            clock_offset: crate::ClockOffset::default(),
            disk_faults: crate::DiskFaults::default(),
            heartbeat_ms: limits::HEARTBEAT_MS,
            election_timeout_min_ms: limits::ELECTION_TIMEOUT_MIN_MS,
            lease_reads: crate::LeaseReads::On,
            own_tick_loop: true,
            own_heartbeat: true,
            transport: crate::tls::Transport::Insecure,
            rpc_stats: crate::metrics::RpcStats::default(),
            node_log: None,
        }
    }
}

pub(crate) struct Pending {
    request: Request,
    /// When the runtime accepted it (for the `queue` and `replied` stages), and on which
    /// thread (for their hops).
    accepted: std::time::Instant,
    accepted_on: std::thread::ThreadId,
    /// False for requests forwarded to us: we answer `NotLeader` instead of forwarding again.
    forwardable: bool,
    reply: oneshot::Sender<Result<Outcome, CellError>>,
}

impl Pending {
    /// Answer the request's caller (who may have gone: then nobody waits).
    pub(crate) fn answer(self, answer: Result<Outcome, CellError>) {
        let _ = self.reply.send(answer);
    }

    /// A request accepted now, and where its caller waits for the answer.
    #[cfg(test)]
    pub(crate) fn accepted(
        request: Request,
    ) -> (Self, oneshot::Receiver<Result<Outcome, CellError>>) {
        let (reply, rx) = oneshot::channel();
        let pending = Pending {
            request,
            accepted: std::time::Instant::now(),
            accepted_on: crate::stages::here(),
            forwardable: true,
            reply,
        };
        (pending, rx)
    }
}

/// A running cell member. Cheap to clone.
#[derive(Clone)]
pub struct Cell {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    config: CellConfig,
    raft: Raft,
    view: StateMachineView,
    peers: Peers,
    proposals: mpsc::Sender<Pending>,
    last_stamp_ms: AtomicU64,
    ticks: std::sync::Mutex<TickMemo>,
    /// Raft messages refused before the core (non-member sender, absurd term).
    raft_refused: AtomicU64,
    /// Per-stage write latencies on this member.
    stages: Arc<Stages>,
    /// Elections off while a snapshot arrives.
    election_pause: Arc<ElectionPause>,
    /// Whether this member's tick is off while its cell is idle (`hibernation.rs`).
    hibernation: crate::hibernation::Hibernation,
}

/// What the tick check remembers between rounds, so an idle cell costs a clock read.
#[derive(Default)]
struct TickMemo {
    /// (term, last applied) when the next deadline was last read.
    seen: Option<(u64, u64)>,
    /// That next deadline.
    next_due: Option<u64>,
    /// A round is running.
    busy: bool,
}

impl Cell {
    /// Open storage and start Raft, the proposal batcher and the tick loop. The member
    /// serves nothing until [`crate::serve`] runs its gRPC service.
    pub async fn start(config: CellConfig) -> Result<Cell, CellError> {
        let peers = Peers::new(config.transport.clone());
        Self::start_with_peers(config, peers).await
    }

    /// Like [`Cell::start`], sharing `peers` (one connection per remote node) with the other
    /// cells of this node.
    pub async fn start_with_peers(config: CellConfig, peers: Peers) -> Result<Cell, CellError> {
        let fatal = |e: &dyn std::fmt::Display| CellError::Fatal(e.to_string());
        crate::backup::finish_pending(&config.data_dir, config.id, &config.advertise)
            .map_err(|e| fatal(&e))?;
        let faults = config.disk_faults.clone();
        let node_log = config.node_log.as_ref().map(|log| log.cell(config.cell_id));
        let backend = open_backend_on(config.storage, &config.data_dir, faults, node_log)
            .map_err(|e| fatal(&e))?;
        let stages = Arc::new(Stages::default());
        let log = LogStore::new(backend.clone(), stages.clone()).map_err(|e| fatal(&e))?;
        let sm = SmStore::open(backend, config.data_dir.clone())
            .await
            .map_err(|e| fatal(&e))?
            .with_stages(stages.clone());
        let view = sm.view();
        let raft_config = Arc::new(raft_config(&config).validate().map_err(|e| fatal(&e))?);
        let network = Network::new(peers.clone(), config.cell_id, stages.clone());
        let raft = Raft::new(config.id, raft_config, network, log, sm)
            .await
            .map_err(|e| fatal(&e))?;
        let (tx, rx) = mpsc::channel(limits::PROPOSAL_QUEUE_MAX);
        let inner = Arc::new(Inner {
            config,
            raft,
            view,
            peers,
            proposals: tx,
            last_stamp_ms: AtomicU64::new(0),
            ticks: std::sync::Mutex::new(TickMemo::default()),
            raft_refused: AtomicU64::new(0),
            stages,
            election_pause: Arc::default(),
            hibernation: Default::default(),
        });
        tokio::spawn(proposer_loop(Arc::downgrade(&inner), rx));
        tokio::spawn(crate::role_log::watch(
            inner.config.cell_id,
            inner.raft.clone(),
        ));
        if inner.config.own_tick_loop {
            tokio::spawn(tick_loop(Arc::downgrade(&inner)));
            // A standalone cell carries out its own follow-ups (a fabric node runs one
            // executor over the cells it leads).
            tokio::spawn(crate::follow::executor_loop(Arc::downgrade(&inner)));
        }
        Ok(Cell { inner })
    }

    /// This member's id.
    pub fn id(&self) -> NodeId {
        self.inner.config.id
    }

    /// This member's configuration.
    pub fn config(&self) -> &CellConfig {
        &self.inner.config
    }

    /// The Raft handle (metrics, membership).
    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// Take one chunk of a snapshot from the leader: elections stay off on this member
    /// while a snapshot arrives (`election_pause.rs`).
    pub async fn install_snapshot(
        &self,
        rpc: openraft::raft::InstallSnapshotRequest<crate::types::TypeConfig>,
    ) -> Result<
        openraft::raft::InstallSnapshotResponse<NodeId>,
        openraft::error::RaftError<NodeId, openraft::error::InstallSnapshotError>,
    > {
        let raft = &self.inner.raft;
        let pause = &self.inner.election_pause;
        let last = rpc.done;
        pause.chunk_arrived(raft);
        let answer = raft.install_snapshot(rpc).await;
        if last || answer.is_err() {
            pause.finished(raft);
        }
        answer
    }

    /// Heartbeat the followers now if this member leads (a node calls it on every hosted
    /// cell each heartbeat interval when [`CellConfig::own_heartbeat`] is off).
    pub async fn heartbeat(&self) {
        if self.inner.hibernation.asleep() {
            return;
        }
        let leads = self.inner.raft.metrics().borrow().current_leader == Some(self.inner.config.id);
        if !leads {
            return;
        }
        if let Err(e) = self.inner.raft.trigger().heartbeat().await {
            tracing::debug!(error = %e, "heartbeat");
        }
    }

    /// The shared peer channels.
    pub fn peers(&self) -> &Peers {
        &self.inner.peers
    }

    /// Per-stage write latencies on this member since it started.
    pub fn stages(&self) -> &Stages {
        &self.inner.stages
    }

    /// Apply one request through Raft (batched with others, forwarded to the leader when
    /// needed) and return its outcome once applied.
    pub async fn submit(&self, request: Request) -> Result<Outcome, CellError> {
        self.submit_inner(request, true).await
    }

    /// Like [`Cell::submit`] for a request another member forwarded, or one its client sent
    /// straight to this leader ([`crate::direct`]): never forwards, answers `NotLeader`.
    pub async fn submit_forwarded(&self, request: Request) -> Result<Outcome, CellError> {
        self.submit_inner(request, false).await
    }

    async fn submit_inner(
        &self,
        request: Request,
        forwardable: bool,
    ) -> Result<Outcome, CellError> {
        whip_board::validate(&request.command, self.inner.config.value_bytes_max)
            .map_err(CellError::InvalidArgument)?;
        let (reply, rx) = oneshot::channel();
        let accepted = std::time::Instant::now();
        let accepted_on = crate::stages::here();
        let pending = Pending {
            request,
            accepted,
            accepted_on,
            forwardable,
            reply,
        };
        self.inner
            .proposals
            .send(pending)
            .await
            .map_err(|_| stopped())?;
        let answer = rx.await.map_err(|_| stopped())?;
        self.inner.stages.record(Stage::Replied, accepted.elapsed());
        let stages = &self.inner.stages;
        stages.hop(Stage::Replied, crate::stages::switched(accepted_on));
        CellError::answer(answer?)
    }

    /// A linearizable read: the leader confirms its leadership, under its lease without a
    /// round (`lease_read.rs`) or else with a quorum (read index), and waits until it has
    /// applied that far; a follower forwards the read to the leader.
    pub async fn read(&self, query: Query) -> Result<QueryResult, CellError> {
        self.read_inner(query, true).await
    }

    /// Like [`Cell::read`] for a read another member forwarded.
    pub async fn read_forwarded(&self, query: Query) -> Result<QueryResult, CellError> {
        self.read_inner(query, false).await
    }

    async fn read_inner(&self, query: Query, forwardable: bool) -> Result<QueryResult, CellError> {
        let leader = self.inner.wait_leader().await?;
        if leader != self.id() {
            if !forwardable {
                return Err(CellError::NotLeader {
                    hint: self.inner.addr_of(leader),
                });
            }
            return self.inner.forward_read(leader, &query).await;
        }
        // openraft 0.9 takes max(committed, this term's first entry) as the read index. A
        // leader restarted after kill -9 resumes its old term at once (Engine::startup) with
        // `committed` reset to its state machine's last durable apply, so that index can be
        // older than writes it acknowledged before the crash: `whip chaos` (seed 3) saw
        // stale reads. Every acknowledged write is in this leader's log, so reading after
        // applying its whole log as of now is linearizable.
        self.barrier().await?;
        self.local_query(query).await
    }

    /// Before an operator's backup: on the leader, a read barrier (as [`Cell::read`]), so
    /// a [`Cell::dump`] after it holds every write acknowledged before the call. A follower
    /// answers `NotLeader` with the leader's address.
    pub async fn backup_barrier(&self) -> Result<(), CellError> {
        let leader = self.inner.wait_leader().await?;
        if leader != self.id() {
            return Err(CellError::NotLeader {
                hint: self.inner.addr_of(leader),
            });
        }
        self.barrier().await
    }

    /// One dump of this member's applied state at one applied point (writes go on: their
    /// applies wait for the dump, then continue).
    pub async fn dump(&self) -> Result<crate::storage::Dump, CellError> {
        self.inner
            .view
            .dump()
            .await
            .map_err(|e| CellError::Fatal(e.to_string()))
    }

    /// The leader's read barrier: confirm leadership (under the lease, or with a quorum),
    /// then apply the whole log as of now.
    async fn barrier(&self) -> Result<(), CellError> {
        let log_end = self.inner.raft.metrics().borrow().last_log_index;
        match self.inner.raft.ensure_linearizable().await {
            Ok(_) => {}
            Err(RaftError::APIError(e)) => return Err(CellError::Unavailable(e.to_string())),
            Err(RaftError::Fatal(e)) => return Err(fatal_error(e)),
        }
        if let Some(index) = log_end {
            self.inner
                .raft
                .wait(Some(Duration::from_millis(limits::LEADER_WAIT_MS)))
                .applied_index_at_least(Some(index), "read covers the leader's log")
                .await
                .map_err(|e| CellError::Unavailable(format!("read waits for apply: {e}")))?;
        }
        Ok(())
    }

    /// Changes after every batch this member applies (watches wait on it).
    pub fn applied_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.view.applied()
    }

    /// Read this member's applied state without a barrier (may be stale on a follower).
    pub async fn local_query(&self, query: Query) -> Result<QueryResult, CellError> {
        let now = self
            .inner
            .now_ms()
            .max(self.inner.last_stamp_ms.load(Ordering::Relaxed));
        let result = self
            .inner
            .view
            .query(now, query)
            .await
            .map_err(|e| CellError::Fatal(e.to_string()))?;
        match result {
            QueryResult::WrongRange { epoch } => Err(CellError::WrongRange { epoch }),
            result => Ok(result),
        }
    }

    /// Count one refused Raft message; the new total.
    pub(crate) fn count_raft_refusal(&self) -> u64 {
        self.inner.raft_refused.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Raft messages refused before they reached the core (non-member sender, absurd term).
    pub fn raft_refused(&self) -> u64 {
        self.inner.raft_refused.load(Ordering::Relaxed)
    }

    /// How this member serves and reaches its peers.
    pub fn transport(&self) -> &crate::tls::Transport {
        &self.inner.config.transport
    }

    /// Which cell of the fabric this member belongs to.
    pub fn cell_id(&self) -> u64 {
        self.inner.config.cell_id
    }

    /// Make this member the first of a new cell with `members` (id → address) as voters.
    pub async fn initialize(&self, members: BTreeMap<NodeId, String>) -> Result<(), CellError> {
        let nodes: BTreeMap<NodeId, BasicNode> = members
            .into_iter()
            .map(|(id, addr)| (id, BasicNode { addr }))
            .collect();
        self.inner
            .raft
            .initialize(nodes)
            .await
            .map_err(|e| match e {
                RaftError::APIError(e) => CellError::InvalidArgument(e.to_string()),
                RaftError::Fatal(e) => fatal_error(e),
            })
    }

    /// Add a non-voting learner and wait until it has caught up (snapshot or log).
    pub async fn add_learner(&self, id: NodeId, addr: String) -> Result<(), CellError> {
        let leader = self.inner.wait_leader().await?;
        if leader != self.id() {
            return Err(CellError::NotLeader {
                hint: self.inner.addr_of(leader),
            });
        }
        self.inner
            .raft
            .add_learner(id, BasicNode { addr }, true)
            .await
            .map(|_| ())
            .map_err(write_error)
    }

    /// Change the voter set to `voters` (joint consensus); `retain` keeps removed voters as
    /// learners.
    pub async fn change_membership(
        &self,
        voters: BTreeSet<NodeId>,
        retain: bool,
    ) -> Result<(), CellError> {
        let leader = self.inner.wait_leader().await?;
        if leader != self.id() {
            return Err(CellError::NotLeader {
                hint: self.inner.addr_of(leader),
            });
        }
        self.inner
            .raft
            .change_membership(voters, retain)
            .await
            .map(|_| ())
            .map_err(write_error)
    }

    /// The address of the current leader, if known.
    pub fn leader_addr(&self) -> Option<String> {
        let leader = self.inner.raft.metrics().borrow().current_leader?;
        self.inner.addr_of(leader)
    }

    /// Stop Raft, make the applied state durable (a short-lived process, `whip run` on the
    /// embedded store, would otherwise never reach the periodic durable commit, and every
    /// start would apply its predecessors' entries again) and release storage.
    pub async fn shutdown(&self) {
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
            return;
        }
        if let Err(e) = self.inner.view.make_durable().await {
            tracing::warn!(error = %e, "the applied state was not made durable at shutdown");
        }
    }
}

/// A member that is shutting down is unavailable, not broken: whoever called it (a client,
/// another node forwarding a request) retries elsewhere with the same idempotency key.
fn stopped() -> CellError {
    CellError::Unavailable("this member is stopping".to_string())
}

/// openraft's fatal errors: `Stopped` means shutting down (retry elsewhere); the others
/// (storage failure, panic) are fatal.
fn fatal_error(e: openraft::error::Fatal<NodeId>) -> CellError {
    match e {
        openraft::error::Fatal::Stopped => stopped(),
        other => CellError::Fatal(other.to_string()),
    }
}

fn write_error<E: std::fmt::Display>(e: RaftError<NodeId, E>) -> CellError {
    match e {
        RaftError::APIError(e) => CellError::Unavailable(e.to_string()),
        RaftError::Fatal(e) => fatal_error(e),
    }
}

impl Inner {
    /// Batches the leader may have in flight: more when it is the cell's only voter.
    fn batches_in_flight_max(&self) -> usize {
        let metrics = self.raft.metrics();
        let one_voter = metrics
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .nth(1)
            .is_none();
        match one_voter {
            true => limits::BATCHES_IN_FLIGHT_MAX_ONE_VOTER,
            false => limits::BATCHES_IN_FLIGHT_MAX,
        }
    }

    fn now_ms(&self) -> u64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as i64;
        (wall + self.config.clock_offset.get()).max(0) as u64
    }

    /// The stamp time for the next proposal: the wall clock, never below the last one.
    fn next_stamp_ms(&self) -> u64 {
        let now = self.now_ms();
        self.last_stamp_ms
            .fetch_max(now, Ordering::Relaxed)
            .max(now)
    }

    fn addr_of(&self, id: NodeId) -> Option<String> {
        let metrics = self.raft.metrics().borrow().clone();
        let config = metrics.membership_config;
        config.membership().get_node(&id).map(|n| n.addr.clone())
    }

    /// The current leader, waiting up to `LEADER_WAIT_MS` for one to be elected.
    async fn wait_leader(&self) -> Result<NodeId, CellError> {
        let mut metrics = self.raft.metrics();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(limits::LEADER_WAIT_MS);
        loop {
            if let Some(leader) = metrics.borrow().current_leader {
                return Ok(leader);
            }
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(stopped()),
                Err(_) => return Err(CellError::Unavailable("no leader elected yet".to_string())),
            }
        }
    }

    async fn forward_read(&self, leader: NodeId, query: &Query) -> Result<QueryResult, CellError> {
        let addr = self
            .addr_of(leader)
            .ok_or_else(|| CellError::Unavailable("leader address unknown".into()))?;
        (self.config.rpc_stats).forwarded(crate::metrics::Forwarded::Read, 1);
        let mut client = self.peers.raft_client(&addr);
        let read = client.read(Blob {
            data: encode(query),
            cell: self.config.cell_id,
        });
        let blob = tokio::time::timeout(forward_timeout(), read)
            .await
            .map_err(|_| forward_timed_out(leader))?
            .map_err(CellError::from)?;
        let result: Result<QueryResult, CellError> =
            decode(&blob.into_inner().data).map_err(CellError::Unavailable)?;
        result
    }

    /// Forward a batch to `leader` and answer each request. When the leader cannot be
    /// reached (down, paused, cut off), the batch comes back with the reason, unanswered.
    async fn forward_writes(
        &self,
        leader: NodeId,
        batch: Vec<Pending>,
    ) -> Result<(), (Vec<Pending>, CellError)> {
        let Some(addr) = self.addr_of(leader) else {
            return Err((
                batch,
                CellError::Unavailable("leader address unknown".into()),
            ));
        };
        let requests: Vec<&Request> = batch.iter().map(|p| &p.request).collect();
        let stats = &self.config.rpc_stats;
        stats.forwarded(crate::metrics::Forwarded::Write, requests.len());
        let mut client = self.peers.raft_client(&addr);
        let forward = client.forward(Blob {
            data: encode(&requests),
            cell: self.config.cell_id,
        });
        let reply = tokio::time::timeout(forward_timeout(), forward).await;
        let results: Vec<Result<Outcome, CellError>> = match reply {
            Ok(Ok(blob)) => match decode(&blob.into_inner().data) {
                Ok(results) => results,
                Err(e) => return Err((batch, CellError::Unavailable(e))),
            },
            Ok(Err(status)) => return Err((batch, CellError::from(status))),
            // The leader may still apply the batch: callers retry with the same idempotency
            // key, so the outcome is recorded once and returned to the retry.
            Err(_) => return Err((batch, forward_timed_out(leader))),
        };
        if results.len() != batch.len() {
            let err = CellError::Fatal("forwarded batch answered out of shape".into());
            fail_all(batch, err);
            return Ok(());
        }
        for (p, r) in batch.into_iter().zip(results) {
            let _ = p.reply.send(r);
        }
        Ok(())
    }

    /// Wait up to `LEADER_WAIT_MS` for a leader other than `old`.
    async fn wait_new_leader(&self, old: NodeId) -> Option<NodeId> {
        let mut metrics = self.raft.metrics();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(limits::LEADER_WAIT_MS);
        loop {
            if let Some(leader) = metrics.borrow().current_leader
                && leader != old
            {
                return Some(leader);
            }
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => {}
                _ => return None,
            }
        }
    }

    /// Propose one batch on this member (the leader): its requests are answered from the
    /// apply (`crate::answer`); this waits until they are, or takes the batch back when
    /// Raft could not apply it.
    async fn propose(self: &Arc<Self>, batch: Vec<Pending>) {
        let requests = batch.iter().map(|p| p.request.clone()).collect();
        let proposed = std::time::Instant::now();
        let proposed_on = crate::stages::here();
        for p in &batch {
            self.stages.record(Stage::Queue, proposed - p.accepted);
            self.stages
                .hop(Stage::Queue, u64::from(p.accepted_on != proposed_on));
        }
        let (done, handback) = oneshot::channel();
        let waiting = crate::answer::Proposed::new(batch, self.stages.clone(), done);
        let entry = Batch {
            time_ms: self.next_stamp_ms(),
            requests,
        };
        let answer = crate::answer::Answer::Requests(Box::new(waiting));
        // Raft refuses only once its core has stopped (or died): the refusal drops the
        // responder, which fails the batch as stopping, and callers retry elsewhere.
        let _ = self.raft.client_write_responding(entry, answer).await;
        // Answered (`None`), or dropped unanswered (already failed): nothing left to do.
        let Ok(Some((batch, error))) = handback.await else {
            return;
        };
        match error {
            ClientWriteError::ForwardToLeader(f) => {
                // Leadership moved between our check and the proposal: the entry was not
                // appended, so forwarding cannot apply anything twice.
                match f.leader_id {
                    Some(leader) => self.route(leader, batch).await,
                    None => fail_all(
                        batch,
                        CellError::Unavailable("leadership is changing".into()),
                    ),
                }
            }
            e => fail_all(batch, write_error(RaftError::APIError(e))),
        }
    }

    /// Send a batch to `leader`: propose it here or forward what may be forwarded.
    async fn route(self: &Arc<Self>, leader: NodeId, batch: Vec<Pending>) {
        if leader == self.config.id {
            return Box::pin(self.propose(batch)).await;
        }
        let (forward, refuse): (Vec<_>, Vec<_>) = batch.into_iter().partition(|p| p.forwardable);
        fail_all(
            refuse,
            CellError::NotLeader {
                hint: self.addr_of(leader),
            },
        );
        if forward.is_empty() {
            return;
        }
        let Err((batch, err)) = self.forward_writes(leader, forward).await else {
            return;
        };
        // The leader is unreachable. Once another member leads, send it the requests that
        // carry an idempotency key (a repeat of one the old leader did apply returns the
        // recorded outcome); a request without one may have applied, so it fails instead.
        let (keyed, unkeyed): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|p| p.request.idempotency_key.is_some());
        fail_all(unkeyed, err.clone());
        if keyed.is_empty() {
            return;
        }
        match self.wait_new_leader(leader).await {
            Some(new) if new == self.config.id => Box::pin(self.propose(keyed)).await,
            Some(new) => {
                if let Err((batch, err)) = self.forward_writes(new, keyed).await {
                    fail_all(batch, err);
                }
            }
            None => fail_all(keyed, err),
        }
    }
}

fn forward_timeout() -> Duration {
    Duration::from_millis(limits::FORWARD_TIMEOUT_MS)
}

fn forward_timed_out(leader: NodeId) -> CellError {
    CellError::Unavailable(format!(
        "leader {leader} did not answer within {} ms",
        limits::FORWARD_TIMEOUT_MS
    ))
}

/// Fail every request of `batch` as this member stopping (they retry elsewhere).
pub(crate) fn fail_stopped(batch: Vec<Pending>) {
    if !batch.is_empty() {
        fail_all(batch, stopped());
    }
}

fn fail_all(batch: Vec<Pending>, err: CellError) {
    for p in batch {
        let _ = p.reply.send(Err(err.clone()));
    }
}

/// Gather queued requests into batches: while `BATCHES_IN_FLIGHT_MAX` entries are in flight
/// (`BATCHES_IN_FLIGHT_MAX_ONE_VOTER` on a cell of one voter), new requests wait in the queue
/// and leave together in the next entry. This is what turns
/// one fsync per request into one fsync per batch.
/// Holds only a weak handle, so dropping the cell ends the loop and releases storage.
async fn proposer_loop(inner: std::sync::Weak<Inner>, mut rx: mpsc::Receiver<Pending>) {
    // A batch takes `slots_per_batch` of these: all of them while the cell is replicated
    // (`BATCHES_IN_FLIGHT_MAX` in flight), fewer while it has one voter.
    const SLOTS: usize = limits::BATCHES_IN_FLIGHT_MAX_ONE_VOTER * limits::BATCHES_IN_FLIGHT_MAX;
    let slots = Arc::new(Semaphore::new(SLOTS));
    // A request that did not fit the previous batch opens the next one.
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => break,
            },
        };
        let Some(cell) = inner.upgrade() else {
            return fail_all(vec![first], stopped());
        };
        let per_batch = SLOTS / cell.batches_in_flight_max();
        drop(cell);
        let Ok(permit) = slots.clone().acquire_many_owned(per_batch as u32).await else {
            break;
        };
        let Some(inner) = inner.upgrade() else {
            return fail_all(vec![first], stopped());
        };
        let mut bytes = payload_bytes(&first.request);
        let mut batch = vec![first];
        // Bounded by count and by bytes: one entry must replicate well inside openraft's
        // AppendEntries timeout (= the heartbeat interval, TRAPS.md 3).
        while batch.len() < limits::BATCH_REQUESTS_MAX {
            match rx.try_recv() {
                Ok(p) if bytes + payload_bytes(&p.request) > limits::BATCH_BYTES_MAX => {
                    carried = Some(p);
                    break;
                }
                Ok(p) => {
                    bytes += payload_bytes(&p.request);
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        tokio::spawn(async move {
            match inner.wait_leader().await {
                Ok(leader) => inner.route(leader, batch).await,
                Err(e) => fail_all(batch, e),
            }
            drop(permit);
        });
    }
}

/// Roughly how many bytes a request adds to a Raft entry (its keys and values).
fn payload_bytes(request: &Request) -> usize {
    const OVERHEAD: usize = 64;
    OVERHEAD + command_bytes(&request.command)
}

/// The bytes of a command's keys and values (a fenced range step's are its step's).
fn command_bytes(command: &Command) -> usize {
    match command {
        Command::KvPut { key, value, .. } | Command::KvPutAttached { key, value, .. } => {
            key.len() + value.len()
        }
        Command::KvTxnIf {
            compares,
            success,
            failure,
        } => txn_if_bytes(compares, success, failure),
        Command::LedgerAppend { entry, .. } => entry.len(),
        Command::RangeFenced { step, .. } => command_bytes(step),
        Command::RangeImport { rows } => rows.iter().map(|(k, v)| k.len() + v.len()).sum(),
        Command::RangePatch { puts, deletes } => {
            let puts: usize = puts.iter().map(|(k, v)| k.len() + v.len()).sum();
            puts + deletes.iter().map(Vec::len).sum::<usize>()
        }
        Command::BoardPostMany { bodies, .. } => bodies.iter().map(Vec::len).sum(),
        Command::HandoffBatch { commands } => commands.iter().map(whip_board::handoff_bytes).sum(),
        Command::BoardPost { body, .. } => body.len(),
        Command::KvTxn {
            puts,
            compares,
            deletes,
        } => {
            let puts: usize = puts.iter().map(|(k, v)| k.len() + v.len()).sum();
            let keys: usize = compares.iter().map(|(k, _)| k.len()).sum::<usize>()
                + deletes.iter().map(Vec::len).sum::<usize>();
            puts + keys
        }
        _ => 0,
    }
}

/// Roughly the bytes of a `KvTxnIf`'s keys and values.
fn txn_if_bytes(
    compares: &[whip_board::kv_txn::Compare],
    success: &[whip_board::kv_txn::TxnOp],
    failure: &[whip_board::kv_txn::TxnOp],
) -> usize {
    use whip_board::kv_txn::{CompareTarget, TxnOp};
    let compared: usize = (compares.iter())
        .map(|c| match &c.target {
            CompareTarget::Value(value) => c.key.len() + value.len(),
            CompareTarget::Version(_) => c.key.len(),
        })
        .sum();
    let ops: usize = (success.iter().chain(failure))
        .map(|op| match op {
            TxnOp::Put { key, value } => key.len() + value.len(),
            other => other.key().len(),
        })
        .sum();
    compared + ops
}

/// On the leader, propose a `Tick` whenever a deadline is due (lease expiry, waiter expiry,
/// retention, idempotency pruning). Followers only watch. Holds a weak handle so a dropped
/// cell stops its loop.
async fn tick_loop(inner: std::sync::Weak<Inner>) {
    let mut interval = tokio::time::interval(Duration::from_millis(limits::TICK_INTERVAL_MS));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let cell = Cell { inner };
        if cell.stopped() {
            return;
        }
        if cell.tick_due() {
            cell.tick_round().await;
        }
    }
}

impl Cell {
    /// The cell of a live `inner` (a background task's handle).
    pub(crate) fn from_inner(inner: Arc<Inner>) -> Cell {
        Cell { inner }
    }

    /// Whether this member's Raft stopped (shut down or failed).
    pub(crate) fn stopped(&self) -> bool {
        self.inner.raft.metrics().borrow().running_state.is_err()
    }

    /// Whether this member is its cell's leader now.
    pub fn is_leader(&self) -> bool {
        self.inner.raft.metrics().borrow().state == ServerState::Leader
    }

    /// Whether [`Cell::tick_round`] has work: this member leads and either something was
    /// applied (or leadership changed) since the next deadline was last read, or that
    /// deadline has come. Cheap (no I/O): an idle cell costs a clock read per check.
    pub fn tick_due(&self) -> bool {
        let (leader, term, applied) = {
            let metrics = self.inner.raft.metrics();
            let m = metrics.borrow();
            let applied = m.last_applied.map_or(0, |l| l.index);
            (m.state == ServerState::Leader, m.current_term, applied)
        };
        let mut memo = self.inner.ticks.lock().expect("tick memo lock");
        if !leader {
            memo.seen = None;
            return false;
        }
        !memo.busy
            && (memo.seen != Some((term, applied))
                || memo.next_due.is_some_and(|at| at <= self.inner.now_ms()))
    }

    pub(crate) fn inner_hibernation(&self) -> &crate::hibernation::Hibernation {
        &self.inner.hibernation
    }

    /// Whether the next deadline was read at `(term, applied)` (nothing applied since).
    pub(crate) fn deadline_read_at(&self, term: u64, applied: u64) -> bool {
        let memo = self.inner.ticks.lock().expect("tick memo lock");
        !memo.busy && memo.seen == Some((term, applied))
    }

    /// Whether a snapshot is arriving (elections paused).
    pub(crate) fn snapshot_arriving(&self) -> bool {
        self.inner.election_pause.active()
    }

    /// Read the next deadline and propose a `Tick` if it is due. Rounds never overlap.
    pub async fn tick_round(&self) {
        let (term, applied) = {
            let metrics = self.inner.raft.metrics();
            let m = metrics.borrow();
            (m.current_term, m.last_applied.map_or(0, |l| l.index))
        };
        {
            let mut memo = self.inner.ticks.lock().expect("tick memo lock");
            if memo.busy {
                return;
            }
            memo.busy = true;
        }
        let next_due = match self.local_query(Query::NextDeadline).await {
            Ok(QueryResult::NextDeadline(next)) => Ok(next),
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        };
        let mut seen = Some((term, applied));
        if let Ok(Some(at)) = next_due
            && at <= self.inner.now_ms()
        {
            if let Err(e) = tick_once(self).await {
                tracing::debug!(error = %e, "tick");
            }
            // The tick applied (or failed): read the next deadline again next round.
            seen = None;
        }
        let mut memo = self.inner.ticks.lock().expect("tick memo lock");
        memo.busy = false;
        match next_due {
            Ok(next) => {
                memo.next_due = next;
                memo.seen = seen;
            }
            Err(e) => {
                tracing::debug!(error = %e, "next deadline");
                memo.seen = None;
            }
        }
    }
}

async fn tick_once(cell: &Cell) -> Result<(), CellError> {
    for _ in 0..limits::TICKS_PER_ROUND_MAX {
        let next = match cell.local_query(Query::NextDeadline).await? {
            QueryResult::NextDeadline(next) => next,
            _ => None,
        };
        let due = next.is_some_and(|at| at <= cell.inner.now_ms());
        if !due {
            return Ok(());
        }
        let tick = Request::server(None, Command::Tick);
        if let Outcome::Ticked { processed: 0 } = cell.submit(tick).await? {
            return Ok(());
        }
    }
    Ok(())
}
