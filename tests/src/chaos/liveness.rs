//! Liveness as part of the verdict. A run fails, not only on a violation, when
//!
//! - a node process exits on its own (not killed by the nemesis): the harness polls its
//!   children while it waits ([`Nemesis::watch_until`]) and at the end, and reports the
//!   node, its exit status and the tail of its log;
//! - a leader loss does not recover within [`LEADER_LOSS_RECOVERY_MAX_MS`] of the fault, or
//!   a heal's voters do not catch up within [`HEAL_CATCHUP_MAX_MS`]: an [`Unrecovered`]
//!   entry names the cell, the kind, when and why.
//!
//! Failover is sampled per cell: after a fault takes a node away, each cell it led is
//! timed from the fault to the first write of a probe key that cell owns (the keys are
//! mapped to cells through the fabric's routes; a plain cell is cell 0). A fabric's meta
//! cell, which the probe keys never touch, is timed apart: from the fault to another node
//! answering as its leader (or the same node, restarted, at a higher term).
//!
//! Every figure is also an event in `nemesis.jsonl`, so `whip chaos --check-only DIR`
//! rebuilds the same [`Recovery`] from the log ([`recovery_of_log`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use whip_board::route::{self, RangeEntry};
use whip_cell::CellClient;
use whip_proto::v1 as pb;

use super::nemesis::{Nemesis, Recovery, first_write};
use super::nodes::Nodes;

/// A leader loss whose cells are not all written again this long after the fault fails
/// the run, ms.
pub const LEADER_LOSS_RECOVERY_MAX_MS: u64 = 15_000;
/// A heal whose voters have not all applied the leader's log this long after it fails the
/// run, ms.
pub const HEAL_CATCHUP_MAX_MS: u64 = 30_000;
/// How often the harness polls its node processes while it waits, ms.
pub const LIVENESS_POLL_MS: u64 = 200;
/// Lines of a node's log shown when it exited on its own.
pub const NODE_LOG_TAIL_LINES: usize = 20;
/// Bytes read from the end of a node's log for its tail.
pub const NODE_LOG_TAIL_BYTES: u64 = 16 * 1024;
/// How long one status or routes question may take, ms.
const ASK_TIMEOUT_MS: u64 = 300;
/// Pause between two rounds of asking for the meta cell's leader, ms.
const META_POLL_MS: u64 = 20;

/// A recovery that did not happen within its bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unrecovered {
    /// The cell (0: a plain cell or a fabric's meta cell).
    pub cell: u64,
    /// `leader-loss`, `meta-leader-loss`, `heal-catchup`, `member` (a voter change that did
    /// not go through) or `range-change` (a move or split
    /// with no progress for its bound, or not done within its cap; `at_ms` is then the
    /// start of the mover).
    pub kind: String,
    /// When the fault or heal happened, ms since the run started.
    pub at_ms: u64,
    /// What was still missing at the bound.
    pub why: String,
}

/// A node process that exited on its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeExit {
    /// The node.
    pub node: usize,
    /// Its exit status (`exit status: 1`, `signal: 9 (SIGKILL)`).
    pub status: String,
    /// When the harness saw it, ms since the run started.
    pub at_ms: u64,
    /// The last lines of its log.
    pub log_tail: Vec<String>,
}

/// Failover figures of one cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failover {
    /// Leader losses sampled.
    pub samples: u64,
    /// Median sample, ms.
    pub median_ms: Option<u64>,
    /// Largest sample, ms.
    pub max_ms: Option<u64>,
}

impl Failover {
    /// The figures of `samples`.
    pub fn of(samples: &[u64]) -> Failover {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Failover {
            samples: sorted.len() as u64,
            median_ms: sorted.get(sorted.len() / 2).copied(),
            max_ms: sorted.last().copied(),
        }
    }
}

/// The last [`NODE_LOG_TAIL_LINES`] lines of the log at `path`.
pub fn log_tail(path: &Path) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let read = || -> std::io::Result<String> {
        let mut file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(NODE_LOG_TAIL_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(NODE_LOG_TAIL_LINES);
            lines[from..].iter().map(|l| l.to_string()).collect()
        }
        Err(e) => vec![format!("cannot read {}: {e}", path.display())],
    }
}

fn ms_since(start: Instant, at: Instant) -> u64 {
    at.saturating_duration_since(start).as_millis() as u64
}

impl Nemesis<'_> {
    /// Wait until `until`, polling the node processes every [`LIVENESS_POLL_MS`].
    pub async fn watch_until(&mut self, until: Instant) {
        loop {
            self.watch_nodes();
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(Duration::from_millis(LIVENESS_POLL_MS))).await;
        }
    }

    /// Record every node process that exited on its own since the last look.
    pub fn watch_nodes(&mut self) {
        for (node, status) in self.nodes.reap_exited() {
            let exit = NodeExit {
                node,
                status: status.to_string(),
                at_ms: ms_since(self.log.start(), Instant::now()),
                log_tail: log_tail(&self.nodes.log_path(node)),
            };
            tracing::error!(node, status = %exit.status, "a node process exited on its own");
            self.event("node-exited", json!(exit));
            self.recovery.node_exits.push(exit);
        }
    }

    /// Record a recovery of `kind` on `cell` that did not happen (the fault or heal was at
    /// `since`).
    pub(super) fn unrecovered(&mut self, cell: u64, kind: &str, since: Instant, why: String) {
        let entry = Unrecovered {
            cell,
            kind: kind.to_string(),
            at_ms: ms_since(self.log.start(), since),
            why,
        };
        tracing::error!(cell, kind, why = %entry.why, "not recovered");
        self.event("unrecovered", json!(entry));
        self.recovery.unrecovered.push(entry);
    }

    /// A fault just took node `lost` away; `by_cell` were the probed cells' leaders and
    /// `meta_leader` the plain or meta cell's leader before it. Time each cell it led back
    /// to a write, and a fabric's meta cell back to a leader, within the bound.
    pub(super) async fn sample_failover(
        &mut self,
        lost: usize,
        by_cell: &BTreeMap<u64, usize>,
        meta_leader: Option<usize>,
    ) {
        let cells: Vec<u64> = (by_cell.iter())
            .filter(|&(_, &leader)| leader == lost)
            .map(|(&cell, _)| cell)
            .collect();
        let meta_lost = self.nodes.fabric_cells() > 0 && meta_leader == Some(lost);
        if cells.is_empty() && !meta_lost {
            return;
        }
        let injected = Instant::now();
        let within = Duration::from_millis(self.timing.leader_loss_max_ms);
        let nodes: &Nodes = self.nodes;
        let data = async {
            match cells.is_empty() {
                true => None,
                false => Some(first_write(&nodes.addrs, within, nodes.probe_keys()).await),
            }
        };
        let meta = async {
            match meta_lost {
                true => Some(meta_leader_back(nodes, lost, within).await),
                false => None,
            }
        };
        let (per_probe, meta) = tokio::join!(data, meta);
        if let Some(per_probe) = per_probe {
            self.record_probes(lost, &cells, injected, per_probe).await;
        }
        match meta {
            Some(Ok(ms)) => {
                self.recovery.meta_failover_ms.push(ms);
                self.event("meta-leader-recovered", json!({ "after_ms": ms }));
            }
            Some(Err(why)) => self.unrecovered(0, "meta-leader-loss", injected, why),
            None => {}
        }
    }

    /// Per cell: the slowest of its probe keys, or an [`Unrecovered`] entry when one of
    /// them was not written within the bound.
    async fn record_probes(
        &mut self,
        lost: usize,
        lost_cells: &[u64],
        injected: Instant,
        per_probe: Vec<Option<u64>>,
    ) {
        let owners = probe_cells(self.nodes, per_probe.len()).await;
        let mut per_cell: BTreeMap<u64, Option<u64>> = BTreeMap::new();
        let mut unwritten: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for (probe, ms) in per_probe.iter().enumerate() {
            let (cell, start) = match &owners {
                Some(owners) => owners[probe],
                // Without the routes, a probe is charged to the first cell lost.
                None => (lost_cells[0], None),
            };
            let slowest = per_cell.entry(cell).or_insert(Some(0));
            *slowest = slowest.zip(*ms).map(|(a, b)| a.max(b));
            if ms.is_none() {
                let range = start.map_or(String::new(), |s| format!(" (range {s:#x})"));
                (unwritten.entry(cell).or_default()).push(format!("probe/leader/{probe}{range}"));
            }
        }
        let recovered: BTreeMap<u64, u64> = (per_cell.iter())
            .filter(|(cell, _)| lost_cells.contains(cell))
            .filter_map(|(&cell, ms)| ms.map(|ms| (cell, ms)))
            .collect();
        for (&cell, &ms) in &recovered {
            self.recovery
                .cell_failover_ms
                .entry(cell)
                .or_default()
                .push(ms);
        }
        let all: Option<Vec<u64>> = per_probe.iter().copied().collect();
        let detail = json!({ "per_probe_ms": per_probe, "per_cell_ms": recovered });
        let Some(all) = all else {
            self.event("leader-loss-not-recovered", detail);
            for (cell, keys) in unwritten {
                let why = format!(
                    "no probe key of cell {cell} written within {} ms of losing node {lost}: {}",
                    self.timing.leader_loss_max_ms,
                    keys.join(", ")
                );
                self.unrecovered(cell, "leader-loss", injected, why);
            }
            return;
        };
        let ms = all.iter().copied().max().unwrap_or(0);
        self.recovery.leader_loss_ms.push(ms);
        let mut detail = detail;
        detail["after_ms"] = json!(ms);
        self.event("leader-loss-recovered", detail);
    }
}

/// The cell owning each probe key (`probe/leader/<n>`) and the start of its range: all
/// cell 0 in a plain cell; in a fabric, by the routes a serving node answers (`None` if
/// none answers).
async fn probe_cells(nodes: &Nodes, probes: usize) -> Option<Vec<(u64, Option<u64>)>> {
    if nodes.fabric_cells() == 0 {
        return Some(vec![(0, None); probes]);
    }
    let ranges = ranges_of(nodes).await?;
    let owner = |probe: usize| {
        let key = format!("probe/leader/{probe}");
        let range = route::locate(&ranges, route::kv_point(key.as_bytes()));
        (range.cell, Some(range.start))
    };
    Some((0..probes).map(owner).collect())
}

/// The fabric's ranges as the first serving node answers them (`None`: a plain cell, or
/// no node answered).
pub async fn ranges_of(nodes: &Nodes) -> Option<Vec<RangeEntry>> {
    for id in (1..=nodes.len()).filter(|&id| nodes.is_serving(id)) {
        let Ok(client) = CellClient::connect(&nodes.addrs[id - 1..id]) else {
            continue;
        };
        let ask = client.routes(pb::RoutesRequest { reload: true });
        let Ok(Ok(routes)) = tokio::time::timeout(Duration::from_millis(ASK_TIMEOUT_MS), ask).await
        else {
            continue;
        };
        match whip_fabric::client::ranges_of(&routes) {
            Ok(ranges) => return Some(ranges),
            Err(e) => tracing::warn!(node = id, error = %e, "malformed routes"),
        }
    }
    None
}

/// Milliseconds until a node answers as the meta cell's leader: another node than `lost`,
/// or `lost` itself (restarted) at a term above every term seen when the wait began.
async fn meta_leader_back(nodes: &Nodes, lost: usize, within: Duration) -> Result<u64, String> {
    let started = Instant::now();
    let ask = Duration::from_millis(ASK_TIMEOUT_MS);
    let mut term_lost = 0;
    for id in (1..=nodes.len()).filter(|&id| id != lost && nodes.is_serving(id)) {
        if let Some(s) = nodes.status(id, ask).await {
            term_lost = term_lost.max(s.term);
        }
    }
    while started.elapsed() < within {
        for id in (1..=nodes.len()).filter(|&id| nodes.is_serving(id)) {
            let Some(s) = nodes.status(id, ask).await else {
                continue;
            };
            if s.state == "Leader" && (id != lost || s.term > term_lost) {
                return Ok(started.elapsed().as_millis() as u64);
            }
        }
        tokio::time::sleep(Duration::from_millis(META_POLL_MS)).await;
    }
    Err(format!(
        "no node answered as the meta cell's leader within {} ms of losing node {lost}",
        within.as_millis()
    ))
}

/// How a run ended, as its last nemesis event (`run-end`) records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    /// The seed.
    pub seed: u64,
    /// When the workers stopped, ns since the run started.
    pub end_ns: u64,
    /// Faults injected.
    pub faults: u64,
}

/// The [`Recovery`] and [`RunEnd`] a run's `nemesis.jsonl` records.
pub fn recovery_of_log(text: &str) -> Result<(Recovery, RunEnd), String> {
    let mut recovery = Recovery::default();
    let mut end = None;
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let at = |e: String| format!("nemesis.jsonl line {}: {e}", n + 1);
        let event: Value = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        let detail = &event["detail"];
        match event["event"]
            .as_str()
            .ok_or_else(|| at("no event name".into()))?
        {
            "leader-loss-recovered" | "leader-loss-not-recovered" => {
                if let Some(ms) = detail.get("after_ms") {
                    recovery.leader_loss_ms.push(number(ms).map_err(at)?);
                }
                let per_cell: BTreeMap<u64, u64> =
                    serde_json::from_value(detail["per_cell_ms"].clone())
                        .map_err(|e| at(format!("per_cell_ms: {e}")))?;
                for (cell, ms) in per_cell {
                    recovery.cell_failover_ms.entry(cell).or_default().push(ms);
                }
            }
            "meta-leader-recovered" => {
                recovery
                    .meta_failover_ms
                    .push(number(&detail["after_ms"]).map_err(at)?);
            }
            "caught-up" => {
                recovery
                    .heal_catchup_ms
                    .push(number(&detail["after_ms"]).map_err(at)?);
            }
            "unrecovered" => recovery
                .unrecovered
                .push(serde_json::from_value(detail.clone()).map_err(|e| at(e.to_string()))?),
            "node-exited" => recovery
                .node_exits
                .push(serde_json::from_value(detail.clone()).map_err(|e| at(e.to_string()))?),
            "run-end" => {
                end = Some(serde_json::from_value(detail.clone()).map_err(|e| at(e.to_string()))?)
            }
            _ => {}
        }
    }
    let end: RunEnd = end.ok_or("nemesis.jsonl has no run-end event (an unfinished run)")?;
    recovery.faults = end.faults;
    Ok((recovery, end))
}

fn number(v: &Value) -> Result<u64, String> {
    v.as_u64()
        .ok_or_else(|| format!("expected a number of ms, found {v}"))
}
