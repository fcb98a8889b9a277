//! Fabric administration: bootstrap, status, range moves and splits, and the
//! `whip.v1.Node` gRPC service that exposes them on every node.
//!
//! Range changes are serialized by a lease in the meta cell, so two operators cannot move
//! the same range at once. A move never lets two cells serve a range: the source freezes it
//! (new epoch; it refuses the range from then on) before the target is assigned it, and the
//! target's fences start above the source's high-water mark.

use std::collections::BTreeMap;
use std::time::Duration;

use tonic::{Request as GrpcRequest, Response, Status};
use whip_board::{Command, Outcome, Query, QueryResult, RangeView, Request, ResourceId};
use whip_cell::CellError;
use whip_proto::v1 as pb;
use whip_proto::v1::admin_client::AdminClient;
use whip_proto::v1::cell_client::CellClient as GrpcCellClient;
use whip_proto::v1::node_client::NodeClient;
use whip_proto::v1::node_server;

use crate::limits;
use crate::map::{FabricMap, MAP_KEY, META_CELL, RangeEntry};
use crate::move_copy::Copying;
use crate::node::{Node, retrying, unexpected};
use crate::range_change::{RangeChange, RangeChangeKind, RangePhase, Reporting};

fn invalid(message: impl Into<String>) -> CellError {
    CellError::InvalidArgument(message.into())
}

/// Apply an internal command on `cell` (unrouted), retrying while it is unavailable.
async fn on_cell(
    node: &Node,
    map: &FabricMap,
    cell: u64,
    key: String,
    command: Command,
) -> Result<Outcome, CellError> {
    let what = format!("cell {cell}");
    retrying(&what, limits::INIT_WAIT_MS, |via| {
        let request = Request::server(Some(key.clone()), command.clone());
        node.submit_cell_via(Some(map), cell, request, via)
    })
    .await
}

/// Bootstrap a fabric from `node`: host every cell on its nodes, initialize each cell's
/// Raft group, give each data cell its range and publish the map in the meta cell.
pub async fn init(
    node: &Node,
    nodes: BTreeMap<u64, String>,
    cells: u32,
    replicas: u32,
) -> Result<FabricMap, CellError> {
    let mut map = FabricMap::plan(nodes, cells, replicas).map_err(CellError::InvalidArgument)?;
    if map.addr(node.id()) != Some(node.addr()) {
        return Err(invalid(format!(
            "the node receiving init (node {} at {}) is not in the node list",
            node.id(),
            node.addr()
        )));
    }
    if let Some(meta) = node.hosted(META_CELL)
        && meta
            .raft()
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .count()
            > 0
    {
        return Err(invalid("this fabric is already initialized"));
    }
    // One identity per cell, generated here and installed on each of its members.
    let mut secrets = BTreeMap::new();
    for &cell in map.cells.keys() {
        let identity = crate::identity::CellIdentity::generate()
            .map_err(|e| CellError::Fatal(format!("generating cell {cell}'s identity: {e}")))?;
        map.keys
            .insert(cell, identity.public_key())
            .map_err(CellError::Fatal)?;
        secrets.insert(cell, identity.secret());
    }
    for (&id, addr) in &map.nodes {
        let mut hosted = map.cells_on(id);
        if !hosted.contains(&META_CELL) {
            hosted.insert(0, META_CELL);
        }
        for cell in hosted {
            // Meta learners do not sign; voters of a cell get its identity.
            let secret = map.cells[&cell].contains(&id).then(|| secrets[&cell]);
            create_on(node, id, addr, cell, secret).await?;
        }
    }
    for (&cell, voters) in &map.cells {
        let members = voters
            .iter()
            .map(|&id| pb::Member {
                id,
                addr: map.nodes[&id].clone(),
            })
            .collect();
        let first = &map.nodes[&voters[0]];
        let mut admin = AdminClient::new(node.peers().channel(first));
        admin
            .init(pb::InitRequest { members, cell })
            .await
            .map_err(|s| invalid(format!("init of cell {cell} on {first}: {}", s.message())))?;
    }
    add_meta_learners(node, &map).await?;
    for range in &map.ranges {
        let key = format!("fabric-init/range/{:x}", range.start);
        let assign = Command::RangeAssign {
            start: range.start,
            last: range.last,
            epoch: range.epoch,
            fence_above: 0,
        };
        match on_cell(node, &map, range.cell, key, assign).await? {
            Outcome::RangeAssigned { .. } => {}
            other => return Err(CellError::Fatal(format!("range assign answered {other:?}"))),
        }
    }
    publish(node, &map, 0, 0).await?;
    tracing::info!(
        nodes = map.nodes.len(),
        cells = map.cells.len(),
        "fabric initialized"
    );
    Ok(map)
}

async fn create_on(
    node: &Node,
    id: u64,
    addr: &str,
    cell: u64,
    secret: Option<[u8; 32]>,
) -> Result<(), CellError> {
    if id == node.id() {
        node.create_cell(cell, secret).await?;
        return Ok(());
    }
    let mut client = NodeClient::new(node.peers().channel(addr));
    let request = pb::CreateCellRequest {
        cell,
        voters: Vec::new(),
        identity_secret: secret.map(|s| s.to_vec()).unwrap_or_default(),
    };
    client
        .create_cell(request)
        .await
        .map_err(|s| CellError::Unavailable(format!("node {id} at {addr}: {}", s.message())))?;
    Ok(())
}

/// Nodes that are not meta voters follow the meta cell as learners, so every node reads
/// the map from a local member.
pub(crate) async fn add_meta_learners(node: &Node, map: &FabricMap) -> Result<(), CellError> {
    let voters = &map.cells[&META_CELL];
    for (&id, addr) in &map.nodes {
        if voters.contains(&id) {
            continue;
        }
        retrying("meta learner", limits::INIT_WAIT_MS, |_| async {
            let meta = node
                .hosted(META_CELL)
                .ok_or_else(|| CellError::Fatal("meta cell not hosted".into()))?;
            let leader = meta
                .leader_addr()
                .ok_or_else(|| CellError::Unavailable("meta cell has no leader yet".into()))?;
            let member = pb::Member {
                id,
                addr: addr.clone(),
            };
            AdminClient::new(node.peers().channel(&leader))
                .add_learner(pb::AddLearnerRequest {
                    member: Some(member),
                    cell: META_CELL,
                })
                .await
                .map(|_| ())
                .map_err(CellError::from)
        })
        .await?;
    }
    Ok(())
}

/// Write `map` to the meta cell if its key still has `version` (0 = absent).
/// `fence` is the publishing driver's range-admin lease fence (0 at init): the write's
/// idempotency key, so two drivers never share one. Returns the map's new version.
pub(crate) async fn publish(
    node: &Node,
    map: &FabricMap,
    version: u64,
    fence: u64,
) -> Result<u64, CellError> {
    if version == 0 {
        // The first map makes cell 0 the meta cell: from then on it serves no client.
        let key = "fabric-init/meta".to_string();
        match on_cell(node, map, META_CELL, key, Command::MetaCellMark).await? {
            Outcome::RangeMarkedMeta => {}
            other => return Err(CellError::Fatal(format!("meta mark answered {other:?}"))),
        }
    }
    let put = Command::KvPut {
        key: MAP_KEY.to_vec(),
        value: map.to_bytes(),
        expect_version: Some(version),
    };
    let key = format!("fabric-map/{}/{version}/{fence}", map.epoch_high);
    match on_cell(node, map, META_CELL, key, put).await? {
        Outcome::KvWritten { version, .. } => {
            node.set_map(map.clone());
            Ok(version)
        }
        Outcome::KvVersionMismatch { current } => Err(CellError::Unavailable(format!(
            "the range map changed underneath (version {current}, expected {version})"
        ))),
        other => Err(CellError::Fatal(format!("map write answered {other:?}"))),
    }
}

/// The fabric as the meta cell and the cells see it now.
pub async fn status(node: &Node) -> Result<pb::FabricStatusResponse, CellError> {
    let mut alarms = Vec::new();
    let (map, version) = match node.load_map().await {
        Ok(loaded) => loaded,
        // Status matters most when things are broken: show the last map this node knew.
        Err(e) => match node.cached_map() {
            Some(map) => {
                alarms.push(format!(
                    "the meta cell cannot answer ({e}); showing the cached map"
                ));
                (map, 0)
            }
            None => return Err(e),
        },
    };
    let mut nodes = Vec::new();
    for (&id, addr) in &map.nodes {
        let reachable = id == node.id() || probe(node, addr, META_CELL).await.is_some();
        if !reachable {
            alarms.push(format!("node {id} at {addr} is unreachable"));
        }
        nodes.push(pb::NodeInfo {
            id,
            addr: addr.clone(),
            reachable,
        });
    }
    let mut cells = Vec::new();
    for (&id, voters) in &map.cells {
        let status = cell_status(node, &map, id).await;
        let leader = status.as_ref().and_then(|s| s.leader);
        if leader.is_none() {
            alarms.push(format!("cell {id} has no leader"));
        }
        let ranges: Vec<pb::RangeInfo> = map
            .ranges
            .iter()
            .filter(|r| r.cell == id)
            .map(range_info)
            .collect();
        alarms.extend(range_alarms(node, id, &ranges).await);
        alarms.extend(cell_alarms(node, &map, id).await);
        cells.push(pb::CellInfo {
            id,
            leader,
            voters: voters.clone(),
            ranges,
            term: status.as_ref().map_or(0, |s| s.term),
            last_applied: status.as_ref().map_or(0, |s| s.last_applied),
            hibernating: status.as_ref().is_some_and(|s| s.hibernating),
            public_key: map
                .keys
                .get(id)
                .map(|k| crate::identity::public_key_to_hex(&k))
                .unwrap_or_default(),
        });
    }
    Ok(pb::FabricStatusResponse {
        nodes,
        cells,
        alarms,
        map_version: version,
    })
}

fn range_info(r: &RangeEntry) -> pb::RangeInfo {
    pb::RangeInfo {
        start: r.start,
        last: r.last,
        epoch: r.epoch,
        cell: r.cell,
    }
}

/// Status of `cell` from the hosted member, else from the first voter that answers.
pub(crate) async fn cell_status(
    node: &Node,
    map: &FabricMap,
    cell: u64,
) -> Option<pb::StatusResponse> {
    if let Some(member) = node.hosted(cell) {
        return Some(whip_cell::status::status(&member));
    }
    for voter in &map.cells[&cell] {
        if let Some(addr) = map.addr(*voter)
            && let Some(status) = probe(node, addr, cell).await
        {
            return Some(status);
        }
    }
    None
}

pub(crate) async fn probe(node: &Node, addr: &str, cell: u64) -> Option<pb::StatusResponse> {
    let mut client = GrpcCellClient::new(node.peers().channel(addr));
    let call = client.status(pb::StatusRequest { cell });
    match tokio::time::timeout(Duration::from_millis(limits::STATUS_PROBE_MS), call).await {
        Ok(Ok(response)) => Some(response.into_inner()),
        _ => None,
    }
}

/// Alarms a cell raised itself (handoff forks and broken chains, failed handoffs).
async fn cell_alarms(node: &Node, map: &FabricMap, cell: u64) -> Vec<String> {
    match node.read_cell(Some(map), cell, Query::Alarms).await {
        Ok(QueryResult::Alarms(alarms)) => alarms
            .into_iter()
            .map(|(at_ms, text)| format!("cell {cell} at {}: {text}", whip_board::time_text(at_ms)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Alarms when a hosted cell's own ranges disagree with the map (an interrupted move).
async fn range_alarms(node: &Node, cell: u64, expected: &[pb::RangeInfo]) -> Vec<String> {
    if cell == META_CELL || node.hosted(cell).is_none() {
        return Vec::new();
    }
    let rows = match node.read_cell(None, cell, Query::Ranges).await {
        Ok(QueryResult::Ranges(rows)) => rows,
        _ => return Vec::new(),
    };
    let mut alarms = Vec::new();
    for row in &rows {
        let listed = expected
            .iter()
            .any(|r| r.start == row.start && r.last == row.last && r.epoch == row.epoch);
        if row.frozen || !listed {
            alarms.push(format!(
                "cell {cell} holds range {:#x}..={:#x} epoch {}{} that the map does not give \
                 it (a move or split was interrupted; run it again)",
                row.start,
                row.last,
                row.epoch,
                if row.frozen { " frozen" } else { "" }
            ));
        }
    }
    alarms
}

/// Holds the meta cell's range-admin lease for one range change. Every step of the change
/// carries the lease's fence ([`AdminLease::step`]): once a later holder's step ran on a
/// cell, this holder's steps there are refused `superseded`.
pub(crate) struct AdminLease<'a> {
    node: &'a Node,
    holder: String,
    ttl_ms: u64,
    /// The grant's fence.
    pub(crate) fence: u64,
    /// The freeze this holder renews with the lease, while its move runs.
    hold: std::sync::Mutex<Option<Hold>>,
}

/// A move's freeze: renewed with the lease so the freeze's deadline stays ahead of a live
/// driver and passes soon after a stalled one.
#[derive(Clone, Copy)]
struct Hold {
    cell: u64,
    start: u64,
    last: u64,
    epoch: u64,
    to_cell: u64,
}

/// The range-admin lease: a server resource (owner `~fabric`), which no client command can
/// take, renew or release.
fn admin_lease() -> ResourceId {
    ResourceId {
        owner: format!("{}fabric", whip_board::access::SERVER_OWNER_PREFIX),
        name: "range-admin".into(),
        key: String::new(),
    }
}

impl<'a> AdminLease<'a> {
    pub(crate) async fn acquire(node: &'a Node) -> Result<AdminLease<'a>, CellError> {
        let holder = format!("node-{}-{}", node.id(), crate::node::unique_suffix());
        let ttl_ms = node.config().range_admin_lease_ttl_ms;
        let acquire = Command::LeaseAcquire {
            lease: admin_lease(),
            holder: holder.clone(),
            slots: 1,
            ttl_ms,
            wait_ms: 0,
        };
        let request = Request::server(Some(format!("{holder}/acquire")), acquire);
        match node.submit_cell(None, META_CELL, request).await? {
            Outcome::LeaseHeld { fence, .. } => Ok(AdminLease {
                node,
                holder,
                ttl_ms,
                fence,
                hold: std::sync::Mutex::new(None),
            }),
            Outcome::LeaseContended { holders } => Err(CellError::Unavailable(format!(
                "another range change is running (held by {})",
                holders.first().map_or("?", |h| h.holder.as_str())
            ))),
            other => Err(CellError::Fatal(format!("admin lease answered {other:?}"))),
        }
    }

    /// Run `work` while renewing the lease every third of its time to live, so a change that
    /// outlasts the lease keeps it and no second change starts beside it. A renewal that
    /// finds the lease gone stops the work (re-running an interrupted change completes it).
    pub(crate) async fn hold_while<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, CellError>>,
    ) -> Result<T, CellError> {
        let every = Duration::from_millis((self.ttl_ms / 3).max(1));
        tokio::pin!(work);
        loop {
            tokio::select! {
                result = &mut work => return result,
                () = tokio::time::sleep(every) => self.renew().await?,
            }
        }
    }

    async fn renew(&self) -> Result<(), CellError> {
        let renew = Command::LeaseRenew {
            lease: admin_lease(),
            holder: self.holder.clone(),
            ttl_ms: self.ttl_ms,
        };
        let renewal = self
            .node
            .submit_cell(None, META_CELL, Request::server(None, renew));
        // Each step of a renewal is bounded by a third of the lease's time to live: a slow
        // meta cell or a slow source cell must not hold up the next renewal until the lease
        // lapses (found by `whip chaos`, seed 30: moves kept losing the lease).
        let step = self.renewal_step();
        let answer = tokio::time::timeout(step, renewal)
            .await
            .unwrap_or_else(|_| {
                Err(CellError::Unavailable(format!(
                    "no answer within {} ms",
                    step.as_millis()
                )))
            });
        match answer {
            Ok(Outcome::LeaseRenewed { .. }) => self.renew_freeze().await,
            // Another holder may have taken the change over: this driver stops as superseded.
            Ok(other) => Err(CellError::Superseded(format!(
                "superseded: the range-admin lease was lost during the change ({other:?})"
            ))),
            // The meta cell is electing: the lease has two more renewals of slack.
            Err(e) => {
                tracing::warn!(error = %e, "renewing the range-admin lease");
                Ok(())
            }
        }
    }

    /// Renew the freeze of the move under way (its deadline moves on); a refusal as
    /// superseded stops the change, any other failure waits for the next renewal.
    async fn renew_freeze(&self) -> Result<(), CellError> {
        let Some(hold) = *self.hold.lock().expect("hold lock") else {
            return Ok(());
        };
        let freeze = Command::RangeFreezeTo {
            start: hold.start,
            last: hold.last,
            epoch: hold.epoch,
            to_cell: hold.to_cell,
        };
        let fenced = self.fenced(freeze);
        let renewal = self
            .node
            .submit_cell(None, hold.cell, Request::server(None, fenced));
        let Ok(answer) = tokio::time::timeout(self.renewal_step(), renewal).await else {
            tracing::debug!(
                cell = hold.cell,
                "renewing a move's freeze: no answer in time"
            );
            return Ok(());
        };
        match answer {
            Ok(Outcome::RangeFrozenAt { .. }) => Ok(()),
            // The source already dropped the range: the move went past its freeze.
            Ok(Outcome::RangeUnknown { .. }) => {
                tracing::debug!(cell = hold.cell, "renewing a move's freeze: range gone");
                Ok(())
            }
            Err(e @ CellError::Superseded(_)) => Err(e),
            other => {
                tracing::warn!(answer = ?other, cell = hold.cell, "renewing a move's freeze");
                Ok(())
            }
        }
    }

    /// How long one step of a renewal may take: a third of the lease's time to live.
    fn renewal_step(&self) -> Duration {
        Duration::from_millis((self.ttl_ms / 3).max(1))
    }

    /// The node this lease is held from.
    pub(crate) fn node(&self) -> &'a Node {
        self.node
    }

    fn hold(&self, hold: Option<Hold>) {
        *self.hold.lock().expect("hold lock") = hold;
    }

    /// `step` under this lease's fence.
    fn fenced(&self, step: Command) -> Command {
        Command::RangeFenced {
            fence: self.fence,
            step: Box::new(step),
        }
    }

    /// Run range step `command` on `cell` under this lease's fence (see [`on_cell`]).
    pub(crate) async fn step(
        &self,
        map: &FabricMap,
        cell: u64,
        key: String,
        command: Command,
    ) -> Result<Outcome, CellError> {
        on_cell(self.node, map, cell, key, self.fenced(command)).await
    }

    pub(crate) async fn release(self) {
        let release = Command::LeaseRelease {
            lease: admin_lease(),
            holder: self.holder.clone(),
        };
        let request = Request::server(Some(format!("{}/release", self.holder)), release);
        if let Err(e) = self.node.submit_cell(None, META_CELL, request).await {
            tracing::warn!(error = %e, "releasing the range-admin lease (it expires by itself)");
        }
    }
}

/// Move the range starting at `start` to `to_cell`. A move of the range that stalled
/// (its driver paused or dead, its freeze's hold passed) is finished first.
pub async fn move_range(
    node: &Node,
    start: u64,
    to_cell: u64,
) -> Result<pb::RangeMoveResponse, CellError> {
    let lease = AdminLease::acquire(node).await?;
    let kind = RangeChangeKind::Move { to_cell };
    let report = (node.inner.range_change).begin(start, kind, RangePhase::Preparing);
    let result = lease
        .hold_while(move_locked(&lease, start, to_cell, &report))
        .await;
    drop(report);
    lease.release().await;
    result
}

async fn move_locked(
    lease: &AdminLease<'_>,
    start: u64,
    to_cell: u64,
    report: &Reporting<'_>,
) -> Result<pb::RangeMoveResponse, CellError> {
    let (map, _) = lease.node.load_map().await?;
    let range = *map
        .range_at(start)
        .ok_or_else(|| invalid(format!("no range starts at {start:#x}")))?;
    if let Some(row) = source_row(lease.node, &map, range).await?
        && row.frozen
        && row.to_cell != 0
    {
        tracing::warn!(
            start,
            cell = range.cell,
            to_cell = row.to_cell,
            epoch = row.epoch,
            "taking over a stalled range move"
        );
        let (moved, rows) = run_move(lease, start, row.to_cell, report).await?;
        if moved.cell == to_cell {
            return Ok(pb::RangeMoveResponse {
                ranges: vec![range_info(&moved)],
                rows,
            });
        }
    }
    let (moved, rows) = run_move(lease, start, to_cell, report).await?;
    Ok(pb::RangeMoveResponse {
        ranges: vec![range_info(&moved)],
        rows,
    })
}

/// The source cell's own row of `range` (`None`: the cell holds no such row).
pub(crate) async fn source_row(
    node: &Node,
    map: &FabricMap,
    range: RangeEntry,
) -> Result<Option<RangeView>, CellError> {
    let what = format!("ranges of cell {}", range.cell);
    let answer = retrying(&what, limits::INIT_WAIT_MS, |via| {
        node.read_cell_via(Some(map), range.cell, Query::Ranges, via)
    })
    .await?;
    let QueryResult::Ranges(rows) = answer else {
        return Err(unexpected(&answer));
    };
    Ok(rows
        .into_iter()
        .find(|r| r.start == range.start && r.last == range.last))
}

/// A move's start: the map it read, its range and the source's row of it, and the map
/// with the move's fresh epoch reserved, published at `version`.
struct Reserved {
    map: std::sync::Arc<FabricMap>,
    next: FabricMap,
    version: u64,
    range: RangeEntry,
    row: Option<RangeView>,
    epoch: u64,
}

/// Read the map and the source's row of the range at `start`, and reserve a fresh epoch
/// for its move to `to_cell` in the map.
async fn reserve(lease: &AdminLease<'_>, start: u64, to_cell: u64) -> Result<Reserved, CellError> {
    let node = lease.node;
    let (map, version) = node.load_map().await?;
    let range = *map
        .range_at(start)
        .ok_or_else(|| invalid(format!("no range starts at {start:#x}")))?;
    check_target(&map, range, to_cell)?;
    let row = source_row(node, &map, range).await?;
    let mut next = (*map).clone();
    next.epoch_high = next.epoch_high.max(row.map_or(0, |r| r.epoch));
    let epoch = next.next_epoch();
    let version = publish(node, &next, version, lease.fence).await?;
    Ok(Reserved {
        map,
        next,
        version,
        range,
        row,
        epoch,
    })
}

/// Move the range at `start` to `to_cell` under `lease`: reserve a fresh epoch in the map
/// (from then on no earlier driver's map write goes through), copy the range while its
/// source still serves it (the source records what changes meanwhile), freeze it (waiting
/// out a stalled move's hold), send what changed, assign it to the target, publish the map
/// and drop the source's copy. The moved range and the rows copied.
pub(crate) async fn run_move(
    lease: &AdminLease<'_>,
    start: u64,
    to_cell: u64,
    report: &Reporting<'_>,
) -> Result<(RangeEntry, u64), CellError> {
    let node = lease.node;
    report.retarget(RangeChangeKind::Move { to_cell }, RangePhase::Preparing);
    let Reserved {
        map,
        mut next,
        version,
        range,
        row,
        epoch,
    } = reserve(lease, start, to_cell).await?;
    report.phase(RangePhase::Precopying);
    let step = |name: &str| format!("fabric-move/{start:x}/{epoch}/{name}");
    let mut rows = 0;
    let copying = Copying {
        lease,
        map: &map,
        range,
        to_cell,
        report,
        rounds: Default::default(),
    };
    // A frozen source is a stalled move's: its copy before the freeze is done or not needed.
    if row.is_some_and(|r| !r.frozen) {
        rows += copying.precopy(&step("pre")).await?;
        rows += copying.settle(&step("pre")).await?;
        crate::test_hooks::hold(RangePhase::Precopying).await;
    }
    report.phase(RangePhase::Freezing);
    let (source, last) = (range.cell, range.last);
    let hold = Hold {
        cell: source,
        start,
        last,
        epoch,
        to_cell,
    };
    let frozen = freeze(lease, &map, hold).await?;
    lease.hold(Some(hold));
    report.phase(RangePhase::Copying);
    crate::test_hooks::hold(RangePhase::Copying).await;
    rows += copying.finish(&step("copy")).await?;
    let moved = RangeEntry {
        cell: to_cell,
        epoch,
        ..range
    };
    report.phase(RangePhase::Assigning);
    assign(lease, &map, hold, frozen, step("assign")).await?;
    for r in next.ranges.iter_mut().filter(|r| r.start == start) {
        *r = moved;
    }
    report.phase(RangePhase::Publishing);
    publish(node, &next, version, lease.fence).await?;
    report.phase(RangePhase::Dropping);
    drop_copy(lease, &next, range, &step("drop"), report).await?;
    lease.hold(None);
    tracing::info!(start, source, to_cell, epoch, rows, "range moved");
    Ok((moved, rows))
}

/// Assign the frozen range of `hold` to its target, with fences above the source's
/// high-water mark and stamps no earlier than the freeze's (`frozen`, as [`freeze`]
/// answered).
async fn assign(
    lease: &AdminLease<'_>,
    map: &FabricMap,
    hold: Hold,
    (fence_high, frozen_at_ms): (u64, u64),
    key: String,
) -> Result<(), CellError> {
    let assign = Command::RangeAssignAt {
        start: hold.start,
        last: hold.last,
        epoch: hold.epoch,
        fence_above: fence_high,
        time_above_ms: frozen_at_ms,
    };
    match lease.step(map, hold.to_cell, key, assign).await? {
        Outcome::RangeAssigned { .. } => Ok(()),
        other => Err(CellError::Fatal(format!("assign answered {other:?}"))),
    }
}

fn check_target(map: &FabricMap, range: RangeEntry, to_cell: u64) -> Result<(), CellError> {
    if to_cell == META_CELL || !map.cells.contains_key(&to_cell) {
        return Err(invalid(format!(
            "cell {to_cell} is not a data cell of this fabric"
        )));
    }
    if range.cell == to_cell {
        return Err(invalid(format!(
            "range {:#x} is already on cell {to_cell}",
            range.start
        )));
    }
    Ok(())
}

/// Freeze the move's range on its source; a stalled move's freeze still held is waited
/// out (at most `RANGE_FREEZE_MS` past the stalled driver's last renewal, plus slack). The
/// source's fence high-water mark and the freeze's stamp time there.
async fn freeze(
    lease: &AdminLease<'_>,
    map: &FabricMap,
    hold: Hold,
) -> Result<(u64, u64), CellError> {
    let freeze = Command::RangeFreezeTo {
        start: hold.start,
        last: hold.last,
        epoch: hold.epoch,
        to_cell: hold.to_cell,
    };
    let wait_ms = whip_board::limits::RANGE_FREEZE_MS + limits::INIT_WAIT_MS;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    for attempt in 0u64.. {
        let key = format!(
            "fabric-move/{:x}/{}/freeze/{attempt}",
            hold.start, hold.epoch
        );
        match lease.step(map, hold.cell, key, freeze.clone()).await? {
            Outcome::RangeFrozenAt {
                fence_high,
                time_ms,
                ..
            } => return Ok((fence_high, time_ms)),
            Outcome::RangeRefused { refusal } if tokio::time::Instant::now() < deadline => {
                tracing::debug!(%refusal, "waiting out a stalled move's freeze");
                tokio::time::sleep(Duration::from_millis(limits::FREEZE_WAIT_STEP_MS)).await;
            }
            other => return Err(CellError::Fatal(format!("freeze answered {other:?}"))),
        }
    }
    unreachable!("the attempts never run out")
}

/// Delete the moved range's rows from its old cell, page by page (`map` already sends the
/// range elsewhere).
pub(crate) async fn drop_copy(
    lease: &AdminLease<'_>,
    map: &FabricMap,
    range: RangeEntry,
    key_prefix: &str,
    report: &Reporting<'_>,
) -> Result<(), CellError> {
    report_arrivals(lease.node, map, range, key_prefix).await?;
    let (start, last) = (range.start, range.last);
    for page in 0u64.. {
        let drop = Command::RangeDrop { start, last };
        let key = format!("{key_prefix}/{page}");
        match lease.step(map, range.cell, key, drop).await? {
            Outcome::RangeDropped { done: true, .. } => break,
            Outcome::RangeDropped { .. } => report.page(0),
            other => return Err(CellError::Fatal(format!("drop answered {other:?}"))),
        }
    }
    Ok(())
}

/// Before the source's copy of `range` is dropped: each cell that now owns part of it
/// reports the work entries it holds to the meta cell (a quota round), and the source then
/// refuses every grant lent before that report (`Command::WorkQuotaFloor`). The drop takes
/// the moved entries' room from the source's quota (`whip_board::work::departed`), so
/// that room is lent again only where the meta cell counts the entries (found by
/// `whip chaos`: a registry of 8 live entries under a ceiling of 6).
async fn report_arrivals(
    node: &Node,
    map: &FabricMap,
    range: RangeEntry,
    key_prefix: &str,
) -> Result<(), CellError> {
    let targets: std::collections::BTreeSet<u64> = (map.ranges.iter())
        .filter(|r| r.start <= range.last && range.start <= r.last && r.cell != range.cell)
        .map(|r| r.cell)
        .collect();
    for to in targets {
        let what = format!("cell {to}'s report of the work entries it took");
        let lent = retrying(&what, limits::INIT_WAIT_MS, |_via| {
            node.quota_round(to, crate::quota::Round::Report)
        })
        .await?;
        let Some(version) = lent else {
            continue;
        };
        let floor = Command::WorkQuotaFloor { version };
        let key = format!("{key_prefix}/floor/{to}");
        match on_cell(node, map, range.cell, key, floor).await? {
            Outcome::WorkQuotaFloored { .. } => {}
            other => return Err(CellError::Fatal(format!("floor answered {other:?}"))),
        }
    }
    Ok(())
}

/// The range change `node` runs now, if any.
pub fn range_progress(node: &Node) -> pb::RangeProgressResponse {
    pb::RangeProgressResponse {
        changes: node
            .inner
            .range_change
            .current()
            .iter()
            .map(RangeChange::to_pb)
            .collect(),
    }
}

/// Cut the range starting at `start` in two at `at`; both halves stay on their cell.
pub async fn split_range(
    node: &Node,
    start: u64,
    at: u64,
) -> Result<pb::RangeMoveResponse, CellError> {
    let lease = AdminLease::acquire(node).await?;
    let result = lease.hold_while(split_locked(&lease, start, at)).await;
    lease.release().await;
    result
}

async fn split_locked(
    lease: &AdminLease<'_>,
    start: u64,
    at: u64,
) -> Result<pb::RangeMoveResponse, CellError> {
    let node = lease.node;
    let (map, version) = node.load_map().await?;
    let range = *map
        .range_at(start)
        .ok_or_else(|| invalid(format!("no range starts at {start:#x}")))?;
    if at <= range.start || at > range.last {
        return Err(invalid(format!(
            "split point {at:#x} is not inside {:#x}..={:#x}",
            range.start, range.last
        )));
    }
    let mut next = (*map).clone();
    let epoch = next.next_epoch();
    let kind = RangeChangeKind::Split { at };
    let report = node
        .inner
        .range_change
        .begin(start, kind, RangePhase::Splitting);
    let split = Command::RangeSplit {
        start,
        last: range.last,
        at,
        epoch,
    };
    let key = format!("fabric-split/{start:x}/{epoch}");
    match lease.step(&map, range.cell, key, split).await? {
        Outcome::RangeAssigned { .. } => {}
        other => return Err(CellError::Fatal(format!("split answered {other:?}"))),
    }
    let lower = RangeEntry {
        last: at - 1,
        epoch,
        ..range
    };
    let upper = RangeEntry {
        start: at,
        epoch,
        ..range
    };
    let index = next
        .ranges
        .iter()
        .position(|r| r.start == start)
        .expect("range is listed");
    next.ranges.splice(index..=index, [lower, upper]);
    report.phase(RangePhase::Publishing);
    publish(node, &next, version, lease.fence).await?;
    Ok(pb::RangeMoveResponse {
        ranges: vec![range_info(&lower), range_info(&upper)],
        rows: 0,
    })
}

/// The `whip.v1.Node` service of one node.
pub struct NodeApi {
    node: Node,
}

impl NodeApi {
    /// The service of `node`.
    pub fn new(node: Node) -> Self {
        NodeApi { node }
    }
}

#[tonic::async_trait]
impl node_server::Node for NodeApi {
    async fn create_cell(
        &self,
        req: GrpcRequest<pb::CreateCellRequest>,
    ) -> Result<Response<pb::AdminResponse>, Status> {
        let req = req.into_inner();
        let cell = req.cell;
        let secret = match req.identity_secret.len() {
            0 => None,
            32 => Some(req.identity_secret.as_slice().try_into().expect("32 bytes")),
            n => {
                return Err(Status::invalid_argument(format!(
                    "identity secret is {n} bytes, not 32"
                )));
            }
        };
        self.node.create_cell(cell, secret).await?;
        Ok(Response::new(pb::AdminResponse {
            message: format!("node {} hosts cell {cell}", self.node.id()),
        }))
    }

    async fn fabric_init(
        &self,
        req: GrpcRequest<pb::FabricInitRequest>,
    ) -> Result<Response<pb::FabricStatusResponse>, Status> {
        let req = req.into_inner();
        let mut nodes = BTreeMap::new();
        for m in req.nodes {
            if nodes.insert(m.id, m.addr).is_some() {
                return Err(Status::invalid_argument(format!(
                    "node {} is listed twice",
                    m.id
                )));
            }
        }
        init(&self.node, nodes, req.cells, req.replicas).await?;
        Ok(Response::new(status(&self.node).await?))
    }

    async fn fabric_status(
        &self,
        _req: GrpcRequest<pb::FabricStatusRequest>,
    ) -> Result<Response<pb::FabricStatusResponse>, Status> {
        Ok(Response::new(status(&self.node).await?))
    }

    async fn range_move(
        &self,
        req: GrpcRequest<pb::RangeMoveRequest>,
    ) -> Result<Response<pb::RangeMoveResponse>, Status> {
        let req = req.into_inner();
        Ok(Response::new(
            move_range(&self.node, req.start, req.to_cell).await?,
        ))
    }

    async fn range_progress(
        &self,
        _req: GrpcRequest<pb::RangeProgressRequest>,
    ) -> Result<Response<pb::RangeProgressResponse>, Status> {
        Ok(Response::new(range_progress(&self.node)))
    }

    async fn deliver(
        &self,
        req: GrpcRequest<pb::DeliverRequest>,
    ) -> Result<Response<pb::DeliverResponse>, Status> {
        let req = req.into_inner();
        let envelopes = if req.envelopes.is_empty() {
            vec![req.envelope]
        } else {
            req.envelopes
        };
        Ok(Response::new(
            crate::mover::deliver(&self.node, envelopes).await?,
        ))
    }

    async fn channel_reset(
        &self,
        req: GrpcRequest<pb::ChannelResetRequest>,
    ) -> Result<Response<pb::ChannelResetResponse>, Status> {
        let req = req.into_inner();
        Ok(Response::new(
            crate::mover::reset_channel(&self.node, req.from_cell, req.to_cell).await?,
        ))
    }

    async fn range_split(
        &self,
        req: GrpcRequest<pb::RangeSplitRequest>,
    ) -> Result<Response<pb::RangeMoveResponse>, Status> {
        let req = req.into_inner();
        Ok(Response::new(
            split_range(&self.node, req.start, req.at).await?,
        ))
    }

    async fn restore_cell(
        &self,
        req: GrpcRequest<tonic::Streaming<pb::RestoreCellChunk>>,
    ) -> Result<Response<pb::AdminResponse>, Status> {
        let restore = receive_restore(req.into_inner()).await?;
        let message = crate::restore::restore_cell(&self.node, restore).await?;
        Ok(Response::new(pb::AdminResponse { message }))
    }

    async fn fabric_restore(
        &self,
        req: GrpcRequest<pb::FabricRestoreRequest>,
    ) -> Result<Response<pb::FabricStatusResponse>, Status> {
        let nodes = members(req.into_inner().nodes)?;
        crate::restore::finish(&self.node, &nodes).await?;
        Ok(Response::new(status(&self.node).await?))
    }
}

/// Node id → address of `list`, each id once.
fn members(list: Vec<pb::Member>) -> Result<BTreeMap<u64, String>, Status> {
    let mut out = BTreeMap::new();
    for m in list {
        if out.insert(m.id, m.addr).is_some() {
            return Err(Status::invalid_argument(format!(
                "node {} is listed twice",
                m.id
            )));
        }
    }
    Ok(out)
}

/// A `RestoreCell` stream gathered: the first chunk names the cell, its voters and the
/// fabric's nodes; the file is at most [`limits::RESTORE_BYTES_MAX`] bytes.
async fn receive_restore(
    mut stream: tonic::Streaming<pb::RestoreCellChunk>,
) -> Result<crate::restore::RestoreCell, Status> {
    let first = stream
        .message()
        .await?
        .ok_or_else(|| Status::invalid_argument("an empty restore stream"))?;
    let mut restore = crate::restore::RestoreCell {
        cell: first.cell,
        voters: members(first.voters)?,
        nodes: members(first.nodes)?,
        file: first.data,
    };
    while let Some(chunk) = stream.message().await? {
        if (restore.file.len() + chunk.data.len()) as u64 > limits::RESTORE_BYTES_MAX {
            return Err(Status::invalid_argument(format!(
                "the snapshot is larger than {} bytes",
                limits::RESTORE_BYTES_MAX
            )));
        }
        restore.file.extend_from_slice(&chunk.data);
    }
    Ok(restore)
}
