//! The node processes, each inside its own namespace (`ip netns exec` execs in place, so
//! the child's pid is the node's): `whip cell serve`, one voter each of one cell, or with
//! `fabric_cells > 0` `whip node serve` processes made a fabric of that many data cells
//! (`whip fabric init`; status and leader are then the meta cell's). Kill is SIGKILL, pause
//! is SIGSTOP/SIGCONT, skew restarts a node with `--clock-offset-ms`, and a clock jump
//! rewrites the file each node follows for its offset (`--clock-offset-file`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use whip_cell::CellClient;
use whip_proto::v1 as pb;

use super::net::Net;

/// The port every node listens on inside its namespace.
pub const PORT: u16 = 7400;

/// How long one membership change may keep failing before the run fails, ms.
const MEMBERSHIP_WITHIN_MS: u64 = 60_000;
/// One attempt at a membership change, ms (adding a learner waits for its catch-up).
const MEMBERSHIP_ATTEMPT_MS: u64 = 20_000;
/// Pause between attempts at a membership change, ms.
const MEMBERSHIP_RETRY_PAUSE_MS: u64 = 300;

/// The nodes' log filter unless the harness runs with `WHIP_LOG` set: the node default
/// (warnings, openraft's errors) and every cell's role changes.
const NODE_LOG_FILTER: &str = "warn,openraft=error,whip_cell::role_log=info";

struct Node {
    child: Option<Child>,
    paused: bool,
    clock_offset_ms: i64,
    /// The offset before a live clock jump, to jump back to at the heal.
    jumped_from_ms: Option<i64>,
    /// A disk fault was switched on in this process: its exit with `EXIT_LOG_FAILED` is the
    /// fault's doing, not a crash.
    disk_faulted: bool,
}

/// The running nodes of one cell.
pub struct Nodes {
    whip: PathBuf,
    dir: PathBuf,
    /// Node addresses (`198.18.x.n:PORT`), index = id - 1.
    pub addrs: Vec<String>,
    namespaces: Vec<String>,
    nodes: Vec<Node>,
    /// Data cells of a fabric (0: the nodes are one plain cell).
    fabric_cells: u32,
    /// Nodes found exited on their own (not killed by the harness), not yet reported.
    exited: Vec<(usize, ExitStatus)>,
    /// The voter the `member` nemesis took out of the cell, until it is back.
    /// A voter the `member` fault took out: its cell (0: the plain cell), its node, and
    /// the cell's voters before.
    removed_voter: Option<(u64, usize, Vec<u64>)>,
}

impl Nodes {
    /// Start `net`'s nodes (data and logs under `dir`) and initialize them as one cell, or
    /// as a fabric of `fabric_cells` data cells.
    pub async fn start(
        whip: &Path,
        dir: &Path,
        net: &Net,
        fabric_cells: u32,
    ) -> Result<Nodes, String> {
        let n = net.namespaces.len();
        let mut nodes = Nodes {
            whip: whip.to_path_buf(),
            dir: dir.to_path_buf(),
            addrs: (1..=n).map(|i| format!("{}:{PORT}", net.addr(i))).collect(),
            namespaces: net.namespaces.clone(),
            nodes: (0..n)
                .map(|_| Node {
                    child: None,
                    paused: false,
                    clock_offset_ms: 0,
                    jumped_from_ms: None,
                    disk_faulted: false,
                })
                .collect(),
            fabric_cells,
            exited: Vec::new(),
            removed_voter: None,
        };
        for id in 1..=n {
            nodes.spawn(id)?;
        }
        let members = (1..=n)
            .map(|id| pb::Member {
                id: id as u64,
                addr: nodes.addrs[id - 1].clone(),
            })
            .collect();
        let first = CellClient::connect(&nodes.addrs[..1]).map_err(|e| e.to_string())?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        for (i, addr) in nodes.addrs.iter().enumerate() {
            while tokio::net::TcpStream::connect(addr).await.is_err() {
                if tokio::time::Instant::now() > deadline {
                    return Err(format!("node {} did not listen within 20 s", i + 1));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        if fabric_cells > 0 {
            nodes.init_fabric()?;
        } else {
            first
                .init(members)
                .await
                .map_err(|e| format!("init: {e}"))?;
        }
        Ok(nodes)
    }

    /// `whip fabric init` over every node.
    fn init_fabric(&self) -> Result<(), String> {
        let mut init = Command::new(&self.whip);
        init.args(["fabric", "init", "--cells", &self.fabric_cells.to_string()]);
        for (i, addr) in self.addrs.iter().enumerate() {
            init.arg("--node").arg(format!("{}={addr}", i + 1));
        }
        let out = init
            .args(["--cell", &self.addrs[0]])
            .output()
            .map_err(|e| format!("fabric init: {e}"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(format!("fabric init: {stderr}"));
        }
        Ok(())
    }

    /// Keys a leader-loss probe writes: one for a plain cell; for a fabric enough that
    /// every data cell owns one of them (the ring is cut evenly; 32 random keys miss one of
    /// 4 cells with probability 4 · (3/4)^32 ≈ 0.004 %).
    pub fn probe_keys(&self) -> usize {
        match self.fabric_cells {
            0 => 1,
            cells => (cells as usize * 8).max(32),
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Start (or restart) node `id` with its current clock offset.
    pub fn spawn(&mut self, id: usize) -> Result<(), String> {
        let log_path = self.dir.join(format!("node-{id}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let node = &self.nodes[id - 1];
        self.write_clock_file(id, node.clock_offset_ms)?;
        self.write_disk_file(id, "")?;
        let mut command = Command::new("ip");
        // Each cell's role changes go to the node's log, so a slow failover can be read
        // from the logs afterwards (campaign, election, leader known, per cell).
        if std::env::var_os("WHIP_LOG").is_none() {
            command.env("WHIP_LOG", NODE_LOG_FILTER);
        }
        let child = command
            .args(["netns", "exec", &self.namespaces[id - 1]])
            .arg(&self.whip)
            .args(match self.fabric_cells {
                0 => ["cell", "serve"],
                _ => ["node", "serve"],
            })
            .args(["--id", &id.to_string(), "--listen"])
            .arg(&self.addrs[id - 1])
            .arg("--data")
            .arg(self.dir.join(format!("node-{id}")))
            .arg(format!("--clock-offset-ms={}", node.clock_offset_ms))
            .arg("--clock-offset-file")
            .arg(self.clock_file(id))
            .arg("--disk-fault-file")
            .arg(self.disk_file(id))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn node {id}: {e}"))?;
        // The pid, for tests that kill a node behind the harness's back.
        let pid_path = self.dir.join(format!("node-{id}.pid"));
        std::fs::write(&pid_path, child.id().to_string())
            .map_err(|e| format!("{}: {e}", pid_path.display()))?;
        self.nodes[id - 1].child = Some(child);
        self.nodes[id - 1].paused = false;
        self.nodes[id - 1].disk_faulted = false;
        Ok(())
    }

    /// The log file of node `id`.
    pub fn log_path(&self, id: usize) -> PathBuf {
        self.dir.join(format!("node-{id}.log"))
    }

    /// Data cells of the fabric (0: one plain cell).
    pub fn fabric_cells(&self) -> u32 {
        self.fabric_cells
    }

    /// The nodes that exited on their own since the last call, with their exit status. Their
    /// slots are emptied, so the next heal restarts them.
    pub fn reap_exited(&mut self) -> Vec<(usize, ExitStatus)> {
        let mut out = std::mem::take(&mut self.exited);
        for id in 1..=self.nodes.len() {
            if let Some(status) = self.exit_status(id) {
                self.nodes[id - 1].child = None;
                self.nodes[id - 1].paused = false;
                if !self.stopped_by_disk_fault(id, status) {
                    out.push((id, status));
                }
            }
        }
        out
    }

    /// Node `id`'s exit status if its process has exited (without reaping it from our view).
    fn exit_status(&mut self, id: usize) -> Option<ExitStatus> {
        let child = self.nodes[id - 1].child.as_mut()?;
        match child.try_wait() {
            Ok(status) => status,
            Err(e) => {
                tracing::warn!(node = id, error = %e, "cannot poll the node process");
                None
            }
        }
    }

    /// Did node `id` exit as its injected disk fault makes it (`EXIT_LOG_FAILED`)?
    fn stopped_by_disk_fault(&self, id: usize, status: ExitStatus) -> bool {
        self.nodes[id - 1].disk_faulted && status.code() == Some(super::disk::EXIT_LOG_FAILED)
    }

    /// Switch disk fault `word` (`fsync`, `enospc`) on in running node `id`; it must stop
    /// at its next log append. Wait up to `within` for it to exit: true when it stopped as
    /// the fault makes it (exit 74). A node still running then is killed (no append came;
    /// the loss is the nemesis's all the same); any other exit is a crash, reported as one.
    pub async fn disk_fault(&mut self, id: usize, word: &str, within: Duration) -> bool {
        if self.write_disk_file(id, word).is_err() || self.nodes[id - 1].child.is_none() {
            return false;
        }
        self.nodes[id - 1].disk_faulted = true;
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.exit_status(id) {
                self.nodes[id - 1].child = None;
                if self.stopped_by_disk_fault(id, status) {
                    return true;
                }
                self.exited.push((id, status));
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill(id);
        false
    }

    /// The file node `id` follows for its disk fault (`--disk-fault-file`).
    fn disk_file(&self, id: usize) -> PathBuf {
        self.dir.join(format!("node-{id}.disk-fault"))
    }

    fn write_disk_file(&self, id: usize, word: &str) -> Result<(), String> {
        let path = self.disk_file(id);
        let next = path.with_extension("next");
        std::fs::write(&next, word)
            .and_then(|()| std::fs::rename(&next, &path))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The data directory of node `id`.
    pub fn data_dir(&self, id: usize) -> PathBuf {
        self.dir.join(format!("node-{id}"))
    }

    /// SIGKILL node `id` and reap it. A node already exited on its own is recorded as such
    /// first, so a kill never hides a crash.
    pub fn kill(&mut self, id: usize) {
        if let Some(status) = self.exit_status(id) {
            self.exited.push((id, status));
        }
        let node = &mut self.nodes[id - 1];
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        node.paused = false;
    }

    /// The process id of node `id`, while it runs.
    pub fn pid(&self, id: usize) -> Option<u32> {
        self.nodes[id - 1].child.as_ref().map(Child::id)
    }

    /// Is node `id` running (possibly paused)?
    pub fn is_running(&self, id: usize) -> bool {
        self.nodes[id - 1].child.is_some()
    }

    /// SIGSTOP node `id`.
    pub fn pause(&mut self, id: usize) {
        self.signal(id, libc::SIGSTOP);
        self.nodes[id - 1].paused = true;
    }

    /// SIGCONT node `id`.
    pub fn resume(&mut self, id: usize) {
        self.signal(id, libc::SIGCONT);
        self.nodes[id - 1].paused = false;
    }

    fn signal(&self, id: usize, signal: i32) {
        if let Some(child) = &self.nodes[id - 1].child {
            // SAFETY: kill(2) on our own child's pid; no memory is shared.
            unsafe {
                libc::kill(child.id() as i32, signal);
            }
        }
    }

    /// Set node `id`'s clock offset; takes effect at its next (re)start.
    pub fn set_clock_offset(&mut self, id: usize, offset_ms: i64) {
        self.nodes[id - 1].clock_offset_ms = offset_ms;
    }

    /// Take voter `id` out of a cell (`Admin/ChangeMembership`, as `whip cell voters`
    /// does): the plain cell, or on a fabric the data cell `cell`, whose leader is asked for
    /// its voters (another voter than `id` if `id` is none of them). Its process keeps
    /// running, serving its other cells. The removed node, or `None` when the cell's voters
    /// were not known in time.
    pub async fn remove_voter(&mut self, id: usize, cell: u64) -> Result<Option<usize>, String> {
        let Some(voters) = self.cell_voters(cell).await else {
            return Ok(None);
        };
        let id = match voters.contains(&(id as u64)) {
            true => id,
            false => *voters.first().ok_or("a cell without voters")? as usize,
        };
        let rest: Vec<u64> = voters.iter().copied().filter(|&v| v != id as u64).collect();
        // Through every voter: the one removed may be the leader the others point at.
        let through = voters.clone();
        self.removed_voter = Some((cell, id, voters));
        self.membership("remove voter", &through, |c| {
            let rest = rest.clone();
            async move { c.change_membership_of(cell, rest, false).await }
        })
        .await?;
        Ok(Some(id))
    }

    /// The voters of `cell` as its leader reports them.
    async fn cell_voters(&self, cell: u64) -> Option<Vec<u64>> {
        let leader = self.cell_leader(cell).await?;
        let status = self
            .cell_status(leader, cell, Duration::from_millis(500))
            .await?;
        let voters: Vec<u64> = (status.members.iter())
            .filter(|m| m.voter)
            .map(|m| m.id)
            .collect();
        (!voters.is_empty()).then_some(voters)
    }

    /// Bring the removed voter back: add it as a learner of its cell (`Admin/AddLearner`,
    /// which waits until it caught up), then promote it to voter again.
    pub async fn restore_voter(&mut self) -> Result<Option<usize>, String> {
        let Some((cell, id, voters)) = self.removed_voter.clone() else {
            return Ok(None);
        };
        let member = pb::Member {
            id: id as u64,
            addr: self.addrs[id - 1].clone(),
        };
        let through: Vec<u64> = voters.iter().copied().filter(|&v| v != id as u64).collect();
        self.membership("add learner", &through, |c| {
            let member = member.clone();
            async move { c.add_learner_to(cell, member).await }
        })
        .await?;
        self.membership("promote learner", &through, |c| {
            let voters = voters.clone();
            async move { c.change_membership_of(cell, voters, false).await }
        })
        .await?;
        self.removed_voter = None;
        Ok(Some(id))
    }

    /// Run one membership call through the members `through` (the nodes hosting the
    /// cell: another node answers that it does not host it) until it succeeds, for at most
    /// `MEMBERSHIP_WITHIN_MS` (a leader may be electing).
    async fn membership<F, Fut>(&self, what: &str, through: &[u64], call: F) -> Result<(), String>
    where
        F: Fn(CellClient) -> Fut,
        Fut: std::future::Future<Output = Result<pb::AdminResponse, whip_cell::CellError>>,
    {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(MEMBERSHIP_WITHIN_MS);
        let attempt = Duration::from_millis(MEMBERSHIP_ATTEMPT_MS);
        loop {
            let addrs: Vec<String> = (through.iter())
                .map(|&id| self.addrs[id as usize - 1].clone())
                .collect();
            let client = CellClient::connect(&addrs).map_err(|e| e.to_string())?;
            let error = match tokio::time::timeout(attempt, call(client)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {MEMBERSHIP_ATTEMPT_MS} ms"),
            };
            if tokio::time::Instant::now() > deadline {
                return Err(format!("{what}: {error}"));
            }
            tracing::info!(what, error, "membership change, retrying");
            tokio::time::sleep(Duration::from_millis(MEMBERSHIP_RETRY_PAUSE_MS)).await;
        }
    }

    /// The file node `id` follows for its clock offset (`--clock-offset-file`).
    fn clock_file(&self, id: usize) -> PathBuf {
        self.dir.join(format!("node-{id}.clock-offset-ms"))
    }

    /// Write node `id`'s clock file whole (a new file renamed over the old one), so the node
    /// never reads half a number.
    fn write_clock_file(&self, id: usize, offset_ms: i64) -> Result<(), String> {
        let path = self.clock_file(id);
        let next = path.with_extension("next");
        std::fs::write(&next, offset_ms.to_string())
            .and_then(|()| std::fs::rename(&next, &path))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Jump running node `id`'s clock to `offset_ms` (it re-reads its clock file); the
    /// heal jumps it back.
    pub fn jump_clock(&mut self, id: usize, offset_ms: i64) -> Result<(), String> {
        let node = &mut self.nodes[id - 1];
        node.jumped_from_ms.get_or_insert(node.clock_offset_ms);
        node.clock_offset_ms = offset_ms;
        self.write_clock_file(id, offset_ms)
    }

    /// Resume paused nodes, jump jumped clocks back and restart dead nodes.
    pub fn heal(&mut self) -> Result<(), String> {
        for id in 1..=self.nodes.len() {
            if let Some(before) = self.nodes[id - 1].jumped_from_ms.take() {
                self.nodes[id - 1].clock_offset_ms = before;
                self.write_clock_file(id, before)?;
            }
            if self.nodes[id - 1].paused {
                self.resume(id);
            }
            if self.nodes[id - 1].child.is_none() {
                self.spawn(id)?;
            }
        }
        Ok(())
    }

    /// What node `id` reports about itself, within `timeout`.
    pub async fn status(&self, id: usize, timeout: Duration) -> Option<pb::StatusResponse> {
        self.cell_status(id, 0, timeout).await
    }

    /// Status of hosted cell `cell` on node `id` (0: the plain cell or the meta cell).
    pub(super) async fn cell_status(
        &self,
        id: usize,
        cell: u64,
        timeout: Duration,
    ) -> Option<pb::StatusResponse> {
        let client = CellClient::connect(&self.addrs[id - 1..id]).ok()?;
        tokio::time::timeout(timeout, client.member_cell_status(0, cell))
            .await
            .ok()?
            .ok()
    }

    /// How many of the cells the leader-loss probe writes to (a plain cell; in a fabric,
    /// its data cells: the probe's keys never touch the meta cell) each node leads; nodes
    /// leading none are left out.
    pub async fn leader_counts(&self) -> BTreeMap<usize, usize> {
        let mut counts = BTreeMap::new();
        for leader in self.leaders_by_cell().await.into_values() {
            *counts.entry(leader).or_default() += 1;
        }
        counts
    }

    /// The node leading the most data cells (of a plain cell: its leader), the smallest id
    /// among equals. Kills aimed at it take down as many data-cell leaders as one kill can.
    pub async fn busiest_leader(&self) -> Option<usize> {
        let counts = self.leader_counts().await;
        let most = counts.values().copied().max()?;
        counts
            .into_iter()
            .find(|&(_, n)| n == most)
            .map(|(id, _)| id)
    }

    /// The leader of each cell the probe writes to (see [`Nodes::leader_counts`]), by cell;
    /// a cell without a known leader is left out.
    pub async fn leaders_by_cell(&self) -> BTreeMap<u64, usize> {
        let cells = match self.fabric_cells {
            0 => 0..=0,
            n => 1..=u64::from(n),
        };
        let mut leaders = BTreeMap::new();
        for cell in cells {
            if let Some(leader) = self.cell_leader(cell).await {
                leaders.insert(cell, leader);
            }
        }
        leaders
    }

    /// Is node `id` running and not paused?
    pub fn is_serving(&self, id: usize) -> bool {
        self.is_running(id) && !self.nodes[id - 1].paused
    }

    /// The leader (of the plain cell, or a fabric's meta cell) as reported by the first
    /// node that knows one.
    pub async fn leader(&self) -> Option<usize> {
        self.cell_leader(0).await
    }

    /// Every cell a heal must bring back: the plain cell, or a fabric's meta cell and its
    /// data cells.
    pub fn cells(&self) -> Vec<u64> {
        (0..=u64::from(self.fabric_cells)).collect()
    }

    /// The leader of hosted cell `cell` as reported by the first running node that knows
    /// one.
    pub(super) async fn cell_leader(&self, cell: u64) -> Option<usize> {
        for id in 1..=self.nodes.len() {
            if !self.is_running(id) || self.nodes[id - 1].paused {
                continue;
            }
            let status = self.cell_status(id, cell, Duration::from_millis(300)).await;
            if let Some(pb::StatusResponse {
                leader: Some(l), ..
            }) = status
            {
                return Some(l as usize);
            }
        }
        None
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for id in 1..=self.nodes.len() {
            self.resume(id);
            self.kill(id);
        }
    }
}
