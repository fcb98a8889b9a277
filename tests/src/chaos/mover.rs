//! The `move` nemesis of a fabric: while the other faults run, it splits the ranges and
//! moves them between data cells through a node's admin service (`Node/RangeSplit` and
//! `Node/RangeMove`, the calls `whip fabric split|move` make). A fault may interrupt a
//! change half-way, its range frozen on the source and served by no cell; the mover then
//! runs it again through another node, as an operator would, until the range map shows it
//! done. While an attempt runs, every node's progress report is read; the attempt is given
//! up only when no driver moved on for `ATTEMPT_STALL_MS` (its node's admin service stops
//! a move whose caller went away, and the next driver copies on from the source's mark).
//! A change that makes no progress for `STALL_MS` (no driver on any node reports a
//! new phase, more rows copied or more pages cleared or dropped), or is not done within
//! `DONE_WITHIN_MS` at all, fails the run: a slow move of a large range is slow, not
//! stuck, and its time is reported. A stuck change's event names what each driver last
//! reported.

use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use serde_json::json;
use whip_proto::v1 as pb;
use whip_proto::v1::node_client::NodeClient;

use super::nemesis::EventLog;

/// Quiet time between two range changes, ms (range).
const QUIET_MS: (u64, u64) = (1_000, 3_000);
/// An attempt at a change through one node whose driver reported no progress for this
/// long is given up (a paused or cut-off node never answers), ms. An attempt that moves on
/// is never cut off: the node's admin service stops a move whose caller went away, and a
/// large range's move takes longer than any fixed bound.
const ATTEMPT_STALL_MS: u64 = 20_000;
/// How often the drivers' progress is read while an attempt runs, ms.
const LOOK_EVERY_MS: u64 = 2_000;
/// A fabric status read through one node, ms.
const STATUS_TIMEOUT_MS: u64 = 5_000;
/// Pause between attempts at one change, ms.
const RETRY_PAUSE_MS: u64 = 500;
/// A change no driver moved on for this long fails the run, ms (faults hold at most seconds
/// and the round heals them; a lost driver's lease lapses within 20 s, and the next one
/// starts reporting at once).
const STALL_MS: u64 = 120_000;
/// A change not done this long after its first attempt fails the run however it moves, ms.
const DONE_WITHIN_MS: u64 = 600_000;
/// No split once the ring is cut into this many ranges: only moves then.
const RANGES_MAX: usize = 24;

/// One range change.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// Cut the range starting at `start` in two at `at`.
    Split { start: u64, at: u64 },
    /// Move the range starting at `start` to data cell `to`.
    Move { start: u64, to: u64 },
}

impl Change {
    fn detail(self) -> serde_json::Value {
        match self {
            Change::Split { start, at } => {
                json!({ "kind": "split", "start": format!("{start:#x}"), "at": format!("{at:#x}") })
            }
            Change::Move { start, to } => {
                json!({ "kind": "move", "start": format!("{start:#x}"), "to_cell": to })
            }
        }
    }

    /// Does the range map in `status` show this change done?
    fn done_in(self, status: &pb::FabricStatusResponse) -> bool {
        let mut ranges = status.cells.iter().flat_map(|c| &c.ranges);
        match self {
            Change::Split { at, .. } => ranges.any(|r| r.start == at),
            Change::Move { start, to } => ranges.any(|r| r.start == start && r.cell == to),
        }
    }
}

/// Splits and moves ranges until told to stop; see the module docs.
pub struct Mover {
    addrs: Vec<String>,
    rng: StdRng,
    log: EventLog,
    /// Changes completed.
    pub changes: u64,
}

impl Mover {
    /// A mover reaching the nodes at `addrs`, its choices seeded by `rng`.
    pub fn new(addrs: Vec<String>, rng: StdRng, log: EventLog) -> Mover {
        Mover {
            addrs,
            rng,
            log,
            changes: 0,
        }
    }

    /// Change ranges until `until`; the change running then is finished first.
    pub async fn run(&mut self, until: Instant) -> Result<(), String> {
        loop {
            let quiet = self.rng.random_range(QUIET_MS.0..=QUIET_MS.1);
            tokio::time::sleep(Duration::from_millis(quiet)).await;
            if Instant::now() >= until {
                return Ok(());
            }
            let Some(status) = self.status().await else {
                continue;
            };
            if let Some(change) = self.choose(&status) {
                self.complete(change).await?;
            }
        }
    }

    /// A split of a random range at its middle while the ranges are few, else a move of a
    /// random range to another data cell.
    fn choose(&mut self, status: &pb::FabricStatusResponse) -> Option<Change> {
        let ranges: Vec<&pb::RangeInfo> = status.cells.iter().flat_map(|c| &c.ranges).collect();
        let data_cells: Vec<u64> = status
            .cells
            .iter()
            .map(|c| c.id)
            .filter(|&id| id != 0)
            .collect();
        let range = **ranges.choose(&mut self.rng)?;
        let split = ranges.len() < RANGES_MAX && self.rng.random_bool(0.5);
        if split && range.last > range.start {
            let at = range.start + (range.last - range.start) / 2 + 1;
            return Some(Change::Split {
                start: range.start,
                at,
            });
        }
        let others: Vec<u64> = data_cells
            .into_iter()
            .filter(|&c| c != range.cell)
            .collect();
        let to = *others.choose(&mut self.rng)?;
        Some(Change::Move {
            start: range.start,
            to,
        })
    }

    /// Run `change` until the map shows it done, through a random node each attempt.
    async fn complete(&mut self, change: Change) -> Result<(), String> {
        let begun = Instant::now();
        let mut progress = Progress::new(begun);
        self.log.event("range-change", change.detail());
        for attempt in 1u64.. {
            let addr = self.addrs.choose(&mut self.rng).expect("nodes").clone();
            let error = self.attempt(&addr, change, &mut progress).await;
            let done = error.is_none()
                || self
                    .status()
                    .await
                    .is_some_and(|status| change.done_in(&status));
            let took_ms = begun.elapsed().as_millis() as u64;
            if done {
                self.changes += 1;
                let detail = json!({ "change": change.detail(), "attempts": attempt,
                    "took_ms": took_ms });
                self.log.event("range-change-done", detail);
                return Ok(());
            }
            let error = error.unwrap_or_default();
            progress.look(&self.addrs, change).await;
            let stalled_ms = progress.stalled_ms();
            if stalled_ms > STALL_MS || took_ms > DONE_WITHIN_MS {
                let detail = json!({ "change": change.detail(), "error": error,
                    "took_ms": took_ms, "stalled_ms": stalled_ms, "drivers": progress.seen() });
                self.log.event("range-change-stuck", detail);
                return Err(format!(
                    "range change {} stuck: no progress for {stalled_ms} ms ({took_ms} ms in \
                     all; bounds {STALL_MS} and {DONE_WITHIN_MS} ms): {error}",
                    change.detail()
                ));
            }
            let detail = json!({ "change": change.detail(), "via": addr, "error": error });
            self.log.event("range-change-retry", detail);
            tokio::time::sleep(Duration::from_millis(RETRY_PAUSE_MS)).await;
        }
        unreachable!("the attempts never run out")
    }

    /// One attempt at `change` through the node at `addr`, reading every node's progress
    /// report while it runs: given up once no driver moved on for `ATTEMPT_STALL_MS`
    /// since it began. The error, if it did not succeed.
    async fn attempt(&self, addr: &str, change: Change, progress: &mut Progress) -> Option<String> {
        let begun = Instant::now();
        let call = attempt_at(addr, change);
        tokio::pin!(call);
        loop {
            tokio::select! {
                answer = &mut call => return answer.err(),
                () = tokio::time::sleep(Duration::from_millis(LOOK_EVERY_MS)) => {}
            }
            progress.look(&self.addrs, change).await;
            let quiet_ms = progress.moved_at.max(begun).elapsed().as_millis() as u64;
            if quiet_ms > ATTEMPT_STALL_MS {
                return Some(format!(
                    "{addr}: no progress reported for {quiet_ms} ms (given up)"
                ));
            }
        }
    }

    /// The fabric's status with the range map read from the meta cell (not a node's cached
    /// copy), through the first node that answers.
    async fn status(&self) -> Option<pb::FabricStatusResponse> {
        for addr in &self.addrs {
            let mut client = node_client(addr);
            let call = client.fabric_status(pb::FabricStatusRequest {});
            let within = Duration::from_millis(STATUS_TIMEOUT_MS);
            if let Ok(Ok(answer)) = tokio::time::timeout(within, call).await {
                let status = answer.into_inner();
                if status.map_version != 0 {
                    return Some(status);
                }
            }
        }
        None
    }
}

/// One node's report of a change: its address, phase, rows copied and pages done.
type Report = (String, String, u64, u64);

/// What the drivers of one change last reported, and when that last moved on.
struct Progress {
    seen: Vec<Report>,
    moved_at: Instant,
}

impl Progress {
    fn new(begun: Instant) -> Progress {
        Progress {
            seen: Vec::new(),
            moved_at: begun,
        }
    }

    /// Read every node's report of `change` (`Node/RangeProgress`); a new phase or more rows
    /// on any node is progress.
    async fn look(&mut self, addrs: &[String], change: Change) {
        let start = match change {
            Change::Split { start, .. } | Change::Move { start, .. } => start,
        };
        let mut now = Vec::new();
        for addr in addrs {
            let mut client = node_client(addr);
            let call = client.range_progress(pb::RangeProgressRequest {});
            let within = Duration::from_millis(STATUS_TIMEOUT_MS);
            let Ok(Ok(answer)) = tokio::time::timeout(within, call).await else {
                continue;
            };
            let reports = answer.into_inner().changes.into_iter();
            now.extend(
                reports
                    .filter(|c| c.start == start)
                    .map(|c| (addr.clone(), c.phase, c.rows, c.pages)),
            );
        }
        let moved = now.iter().any(|report| {
            let before = self.seen.iter().find(|s| s.0 == report.0);
            before.is_none_or(|b| b.1 != report.1 || b.2 < report.2 || b.3 < report.3)
        });
        if moved {
            self.moved_at = Instant::now();
        }
        self.seen = now;
    }

    /// The last reports, for the run's log.
    fn seen(&self) -> serde_json::Value {
        let reports = self.seen.iter().map(|(addr, phase, rows, pages)| {
            json!({ "node": addr, "phase": phase, "rows": rows, "pages": pages })
        });
        serde_json::Value::Array(reports.collect())
    }

    fn stalled_ms(&self) -> u64 {
        self.moved_at.elapsed().as_millis() as u64
    }
}

fn node_client(addr: &str) -> NodeClient<tonic::transport::Channel> {
    NodeClient::new(whip_cell::network::endpoint(addr).connect_lazy())
}

/// One attempt at `change` through the node at `addr`.
async fn attempt_at(addr: &str, change: Change) -> Result<(), String> {
    let mut client = node_client(addr);
    let answer = match change {
        Change::Split { start, at } => {
            client
                .range_split(pb::RangeSplitRequest { start, at })
                .await
        }
        Change::Move { start, to } => {
            let request = pb::RangeMoveRequest { start, to_cell: to };
            client.range_move(request).await
        }
    };
    answer
        .map(|_| ())
        .map_err(|status| format!("{addr}: {}", status.message()))
}
