//! The nemesis: a seeded schedule of faults. Each round waits a quiet interval, injects one
//! fault (partition, kill -9, SIGSTOP pause or clock skew), holds it, heals it and measures
//! recovery: leader loss → first successful write, and heal → every voter caught up.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::json;
use whip_cell::CellClient;
use whip_proto::v1 as pb;

use super::disk::{DiskKind, tear_tail};
use super::mover::Mover;
use super::net::Net;
use super::nodes::Nodes;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Network partitions: isolate the leader, majority/minority, bridge, ring.
    Partition,
    /// SIGKILL a node (the one leading the most data cells half the time), restart it later.
    Kill,
    /// SIGSTOP a node, SIGCONT it later.
    Pause,
    /// Restart a node with a clock offset.
    Skew,
    /// Split ranges and move them between the data cells of a fabric, beside the other
    /// faults ([`super::mover`]).
    Move,
    /// Cut traffic between two nodes in one direction only.
    Oneway,
    /// Take a voter out of a plain cell; at the heal add it back as a learner and promote
    /// it (the membership API of `whip cell add-learner|voters`).
    Member,
    /// Jump a running node's clock forwards or backwards; the heal jumps it back.
    Clock,
    /// A disk fault under a node's log store: an fsync error or a full disk, which must
    /// stop the node, or a torn tail at its restart ([`super::disk`]).
    Disk,
}

/// How long a node with a disk fault switched on may take to stop, ms (its next log append
/// fails; under load one comes within milliseconds).
const DISK_STOP_WITHIN_MS: u64 = 5_000;

/// How far a live clock jump goes, ms (range; forwards or backwards).
const CLOCK_JUMP_MS: (i64, i64) = (1_000, 8_000);

/// Every nemesis name, in the order of the contract.
const NAMES: &[(&str, Fault)] = &[
    ("partition", Fault::Partition),
    ("kill", Fault::Kill),
    ("pause", Fault::Pause),
    ("skew", Fault::Skew),
    ("move", Fault::Move),
    ("oneway", Fault::Oneway),
    ("member", Fault::Member),
    ("clock", Fault::Clock),
    ("disk", Fault::Disk),
];

impl Fault {
    /// Parse a nemesis name.
    pub fn parse(name: &str) -> Result<Fault, String> {
        match NAMES.iter().find(|(n, _)| *n == name) {
            Some(&(_, fault)) => Ok(fault),
            None => {
                let names: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
                Err(format!("unknown nemesis {name:?} ({})", names.join(", ")))
            }
        }
    }

    /// Can this fault run against `nodes` nodes, as a fabric of `fabric_cells` data cells
    /// (0: one plain cell)? An error says why not.
    pub fn fits(self, nodes: usize, fabric_cells: u32) -> Result<(), String> {
        match self {
            Fault::Move if fabric_cells < 2 => Err(format!(
                "nemesis move needs a fabric of 2 or more data cells (--fabric-cells), \
                 not {fabric_cells}"
            )),
            Fault::Oneway if nodes < 2 => Err("nemesis oneway needs 2 or more nodes".into()),
            Fault::Member if nodes < 3 => Err("nemesis member needs 3 or more nodes".into()),
            _ => Ok(()),
        }
    }
}

/// Recovery times measured during a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Recovery {
    /// Leader lost (killed, paused, isolated or restarted) → first successful write, ms.
    pub leader_loss_ms: Vec<u64>,
    /// Heal → every voter applied the leader's log as of the heal, ms.
    pub heal_catchup_ms: Vec<u64>,
    /// Faults injected.
    pub faults: u64,
    /// Per cell whose leader was lost (a plain cell is cell 0; in a fabric, data cells):
    /// leader loss → first write of a probe key the cell owns, ms.
    pub cell_failover_ms: BTreeMap<u64, Vec<u64>>,
    /// A fabric's meta cell: its leader lost → another node answers as its leader, ms.
    pub meta_failover_ms: Vec<u64>,
    /// Leader losses and heals that did not recover within their bounds.
    pub unrecovered: Vec<super::liveness::Unrecovered>,
    /// Node processes that exited on their own (not by the nemesis).
    pub node_exits: Vec<super::liveness::NodeExit>,
    /// Range splits and moves completed by the `move` nemesis.
    pub range_changes: u64,
}

/// The schedule's timing.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Quiet time between faults, ms (range).
    pub quiet_ms: (u64, u64),
    /// How long a fault is held, ms (range).
    pub hold_ms: (u64, u64),
    /// A leader loss not recovered this long after the fault fails the run, ms.
    pub leader_loss_max_ms: u64,
    /// A heal whose voters have not caught up this long after it fails the run, ms.
    pub catchup_max_ms: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            quiet_ms: (1_500, 4_000),
            hold_ms: (2_000, 6_000),
            leader_loss_max_ms: super::liveness::LEADER_LOSS_RECOVERY_MAX_MS,
            catchup_max_ms: super::liveness::HEAL_CATCHUP_MAX_MS,
        }
    }
}

/// The nemesis log (`nemesis.jsonl`), shared by the fault rounds and the mover that runs
/// beside them: one JSON line per event, its time relative to the run's start.
#[derive(Clone)]
pub struct EventLog {
    file: Arc<Mutex<std::fs::File>>,
    start: Instant,
}

impl EventLog {
    /// A log writing to `file`, times counted from `start`.
    pub fn new(file: std::fs::File, start: Instant) -> EventLog {
        EventLog {
            file: Arc::new(Mutex::new(file)),
            start,
        }
    }

    /// When the run started (event times count from it).
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Record one event (also shown on stderr).
    pub fn event(&self, what: &str, detail: serde_json::Value) {
        let at_ms = self.start.elapsed().as_millis() as u64;
        let line = json!({ "time_ms": at_ms, "event": what, "detail": detail });
        if let Ok(mut file) = self.file.lock() {
            let _ = writeln!(file, "{line}");
        }
        eprintln!("[{:>7.1}s] nemesis {what} {detail}", at_ms as f64 / 1000.0);
    }
}

/// Runs faults against `net` and `nodes` until `until`.
pub struct Nemesis<'a> {
    /// The namespaces.
    pub net: &'a mut Net,
    /// The nodes.
    pub nodes: &'a mut Nodes,
    /// Enabled faults.
    pub faults: Vec<Fault>,
    /// The seeded schedule.
    pub rng: StdRng,
    /// Where events are logged (JSON lines).
    pub log: EventLog,
    /// Timing.
    pub timing: Timing,
    /// What was measured.
    pub recovery: Recovery,
}

impl Nemesis<'_> {
    /// A nemesis with a schedule seeded by `seed`.
    pub fn seeded(seed: u64) -> StdRng {
        StdRng::seed_from_u64(seed ^ 0x006e_656d_6573_6973)
    }

    pub(super) fn event(&mut self, what: &str, detail: serde_json::Value) {
        self.log.event(what, detail);
    }

    /// Inject faults until `until`, then heal everything. With `move` enabled, a
    /// [`Mover`] changes ranges all along, beside the rounds of the other faults.
    pub async fn run(&mut self, until: Instant) -> Result<(), String> {
        if !self.faults.contains(&Fault::Move) {
            return self.rounds(until).await;
        }
        let rng = StdRng::seed_from_u64(self.rng.random());
        let mut mover = Mover::new(self.nodes.addrs.clone(), rng, self.log.clone());
        let began = Instant::now();
        let (rounds, moved) = tokio::join!(self.rounds(until), mover.run(until));
        self.recovery.range_changes += mover.changes;
        // A change that never finished is a recovery that never came: it fails the run,
        // and the histories are still checked (the run goes on to its verdict).
        if let Err(why) = moved {
            self.unrecovered(0, "range-change", began, why);
        }
        rounds
    }

    /// One round after another of the faults other than `move`, until `until`.
    async fn rounds(&mut self, until: Instant) -> Result<(), String> {
        let faults: Vec<Fault> = self
            .faults
            .iter()
            .copied()
            .filter(|f| *f != Fault::Move)
            .collect();
        if faults.is_empty() {
            self.watch_until(until).await;
            return Ok(());
        }
        loop {
            let quiet = self
                .rng
                .random_range(self.timing.quiet_ms.0..=self.timing.quiet_ms.1);
            self.watch_until(Instant::now() + Duration::from_millis(quiet))
                .await;
            if Instant::now() >= until {
                break;
            }
            let fault = *faults.choose(&mut self.rng).expect("faults not empty");
            let hold = self
                .rng
                .random_range(self.timing.hold_ms.0..=self.timing.hold_ms.1);
            self.recovery.faults += 1;
            self.round(fault, Duration::from_millis(hold)).await?;
        }
        Ok(())
    }

    async fn round(&mut self, fault: Fault, hold: Duration) -> Result<(), String> {
        let leader = self.nodes.leader().await;
        let n = self.nodes.len();
        let target_leader = self.rng.random_bool(0.5);
        let random_node = self.rng.random_range(1..=n);
        // A kill aims at the node leading the most data cells: once one node leads them
        // all, aiming at the meta cell's leader would miss every data-cell failover.
        let aimed = match fault {
            Fault::Kill => self.nodes.busiest_leader().await.or(leader),
            _ => leader,
        };
        let target = match aimed {
            Some(l) if target_leader => l,
            _ => random_node,
        };
        // In a fabric the data cells' leaders are spread over the nodes: losing any node
        // that leads one is a failover, whether or not it leads the meta cell (which the
        // probe does not write to: losing only its leader is not sampled).
        let by_cell = self.nodes.leaders_by_cell().await;
        let aimed = target_leader && aimed.is_some();
        let lost = self
            .inject(fault, (target, aimed), leader, &by_cell)
            .await?;
        let hold_until = Instant::now() + hold;
        if let Some(lost) = lost {
            self.sample_failover(lost, &by_cell, leader).await;
        }
        self.watch_until(hold_until).await;
        self.heal().await
    }

    /// Inject `fault` (at `target` when it hits one node, `aimed` when chosen as a leader);
    /// returns the node whose leaderships the fault takes away, if any (a failover to
    /// sample).
    async fn inject(
        &mut self,
        fault: Fault,
        (target, aimed): (usize, bool),
        leader: Option<usize>,
        by_cell: &BTreeMap<u64, usize>,
    ) -> Result<Option<usize>, String> {
        let lost_leader = by_cell.values().any(|&l| l == target);
        let detail = json!({ "node": target, "leader": lost_leader, "aimed": aimed });
        match fault {
            Fault::Partition => {
                let (what, isolated) = self.partition(leader).await?;
                self.event("partition", json!({ "kind": what, "leader": leader }));
                Ok(isolated)
            }
            Fault::Kill => {
                self.nodes.kill(target);
                self.event("kill", detail);
                Ok(Some(target))
            }
            Fault::Pause => {
                self.nodes.pause(target);
                self.event("pause", detail);
                Ok(Some(target))
            }
            Fault::Skew => {
                let offset = if self.rng.random_bool(0.25) {
                    0
                } else {
                    self.rng.random_range(-4_000i64..=4_000)
                };
                self.nodes.set_clock_offset(target, offset);
                self.nodes.kill(target);
                self.nodes.spawn(target)?;
                let detail = json!({ "node": target, "offset_ms": offset, "leader": lost_leader });
                self.event("skew", detail);
                Ok(Some(target))
            }
            Fault::Oneway => {
                self.oneway(target, leader)?;
                Ok(None)
            }
            Fault::Member => self.member(target, lost_leader).await,
            Fault::Clock => {
                let size = self.rng.random_range(CLOCK_JUMP_MS.0..=CLOCK_JUMP_MS.1);
                let offset = if self.rng.random_bool(0.5) {
                    size
                } else {
                    -size
                };
                self.nodes.jump_clock(target, offset)?;
                let detail = json!({ "node": target, "offset_ms": offset, "leader": lost_leader });
                self.event("clock", detail);
                Ok(None)
            }
            Fault::Disk => self.disk(target, lost_leader).await,
            Fault::Move => unreachable!("the mover runs beside the rounds"),
        }
    }

    /// Take node `target` out of a cell's voters: the plain cell, or on a fabric one data
    /// cell (its other cells keep the node); the heal brings it back.
    async fn member(&mut self, target: usize, leader: bool) -> Result<Option<usize>, String> {
        let cell = match self.nodes.fabric_cells() {
            0 => 0,
            n => self.rng.random_range(1..=u64::from(n)),
        };
        let removed = match self.nodes.remove_voter(target, cell).await {
            Ok(Some(removed)) => removed,
            Ok(None) => {
                self.event("member-skipped", json!({ "cell": cell }));
                return Ok(None);
            }
            // A membership change that never went through is a recovery that never came:
            // it fails the run, which goes on to check its histories.
            Err(why) => {
                self.unrecovered(cell, "member", Instant::now(), why);
                return Ok(None);
            }
        };
        let detail = json!({ "node": removed, "cell": cell, "leader": leader });
        self.event("member-remove", detail);
        // A plain cell's failover is sampled; on a fabric only one cell changed, and the
        // other cells the node leads would add samples that lost nothing.
        Ok((cell == 0).then_some(removed))
    }

    /// A disk fault on node `target` ([`DiskKind`]); the node is lost either way until the
    /// heal restarts it.
    async fn disk(&mut self, target: usize, leader: bool) -> Result<Option<usize>, String> {
        let kind = DiskKind::choose(&mut self.rng);
        let mut detail = json!({ "node": target, "kind": kind.name(), "leader": leader });
        match kind.switch() {
            Some(word) => {
                let within = Duration::from_millis(DISK_STOP_WITHIN_MS);
                let stopped = self.nodes.disk_fault(target, word, within).await;
                detail["stopped"] = json!(stopped);
            }
            None => {
                self.nodes.kill(target);
                let torn = tear_tail(&self.nodes.data_dir(target), &mut self.rng)?;
                detail["torn"] = json!(torn);
            }
        }
        self.event("disk", detail);
        Ok(Some(target))
    }

    /// Cut one direction between the leader and another node: the leader's messages to it
    /// (it stops hearing heartbeats, yet the leader hears it), or its messages to the leader
    /// (it hears heartbeats, the leader never hears its answers).
    fn oneway(&mut self, target: usize, leader: Option<usize>) -> Result<(), String> {
        let n = self.nodes.len();
        let leader = leader.unwrap_or(target);
        let other = match target {
            t if t != leader => t,
            t => t % n + 1,
        };
        let (from, to) = if self.rng.random_bool(0.5) {
            (leader, other)
        } else {
            (other, leader)
        };
        self.net.block_one_way(from, to)?;
        self.event(
            "oneway",
            json!({ "from": from, "to": to, "leader": leader }),
        );
        Ok(())
    }

    /// Cut the network one of the ways possible for this many nodes; returns its name and
    /// the node isolated from everyone, if any.
    async fn partition(
        &mut self,
        leader: Option<usize>,
    ) -> Result<(String, Option<usize>), String> {
        let n = self.nodes.len();
        let mut ids: Vec<usize> = (1..=n).collect();
        ids.shuffle(&mut self.rng);
        let mut kinds = vec!["isolate-leader", "majority-minority", "bridge"];
        if n >= 4 {
            kinds.push("ring");
        }
        let kind = *kinds.choose(&mut self.rng).expect("kinds");
        match kind {
            "isolate-leader" => {
                let node = leader.unwrap_or(ids[0]);
                self.net.isolate(node)?;
                Ok((format!("isolate-leader node {node}"), Some(node)))
            }
            "majority-minority" => {
                let (minority, majority) = ids.split_at(n / 2);
                for a in minority {
                    for b in majority {
                        self.net.block(*a, *b)?;
                    }
                }
                let isolated = (minority.len() == 1).then(|| minority[0]);
                Ok((
                    format!("minority {minority:?} majority {majority:?}"),
                    isolated,
                ))
            }
            "bridge" => {
                let bridge = ids[0];
                let rest = &ids[1..];
                let (left, right) = rest.split_at(rest.len() / 2);
                for a in left {
                    for b in right {
                        self.net.block(*a, *b)?;
                    }
                }
                Ok((
                    format!("bridge {bridge} between {left:?} and {right:?}"),
                    None,
                ))
            }
            _ => {
                for i in 0..n {
                    for j in i + 2..n {
                        if !(i == 0 && j == n - 1) {
                            self.net.block(ids[i], ids[j])?;
                        }
                    }
                }
                Ok((format!("ring {ids:?}"), None))
            }
        }
    }

    /// Undo every cut and pause, restart dead nodes, and measure catch-up.
    pub async fn heal(&mut self) -> Result<(), String> {
        // A node that died on its own is reported before the heal restarts it.
        self.watch_nodes();
        let was_cut = self.net.is_cut();
        self.net.heal()?;
        self.nodes.heal()?;
        match self.nodes.restore_voter().await {
            Ok(Some(id)) => self.event("member-restore", json!({ "node": id })),
            Ok(None) => {}
            Err(why) => self.unrecovered(0, "member", Instant::now(), why),
        }
        let healed = Instant::now();
        self.event("heal", json!({ "network": was_cut }));
        let within_ms = self.timing.catchup_max_ms;
        match caught_up(self.nodes, Duration::from_millis(within_ms)).await {
            Ok(()) => {
                let ms = healed.elapsed().as_millis() as u64;
                self.recovery.heal_catchup_ms.push(ms);
                self.event("caught-up", json!({ "after_ms": ms }));
            }
            Err((cell, why)) => {
                let detail = json!({ "within_ms": within_ms, "cell": cell });
                self.event("not-caught-up", detail);
                self.unrecovered(cell, "heal-catchup", healed, why);
            }
        }
        Ok(())
    }
}

/// Milliseconds until a write of each of `probes` keys (`probe/leader/<n>`) succeeded
/// through any member, one figure per key (`None`: not within `within`). A fabric needs
/// several keys so that every data cell is written: the leader lost may lead any of them,
/// and the figures per key show which cell came back last.
pub(super) async fn first_write(
    addrs: &[String],
    within: Duration,
    probes: usize,
) -> Vec<Option<u64>> {
    let started = Instant::now();
    let clients: Vec<CellClient> = addrs
        .iter()
        .filter_map(|a| CellClient::connect(std::slice::from_ref(a)).ok())
        .map(|c| c.with_retry_for(Duration::ZERO))
        .collect();
    let mut pending: Vec<usize> = (0..probes).collect();
    let mut done_ms = vec![None; probes];
    let mut n = 0u64;
    while started.elapsed() < within {
        n += 1;
        let rounds = pending.iter().map(|&probe| {
            let attempts = clients.iter().map(move |c| {
                let request = pb::KvPutRequest {
                    key: format!("probe/leader/{probe}").into_bytes(),
                    value: n.to_string().into_bytes(),
                    expect_version: None,
                    ..Default::default()
                };
                Box::pin(async move {
                    match tokio::time::timeout(Duration::from_millis(400), c.kv_put(request)).await
                    {
                        Ok(Ok(_)) => Ok(()),
                        _ => Err(()),
                    }
                })
            });
            async move {
                let ok = futures::future::select_ok(attempts).await.is_ok();
                (probe, ok.then(|| started.elapsed().as_millis() as u64))
            }
        });
        let done = futures::future::join_all(rounds).await;
        pending.clear();
        for (probe, ok_ms) in done {
            match ok_ms {
                Some(ms) => done_ms[probe] = Some(ms),
                None => pending.push(probe),
            }
        }
        if pending.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done_ms
}

/// Wait until, in every cell (a fabric's meta and data cells), every voter has applied its
/// leader's last log index as of now; else the first cell that did not, and why.
pub async fn caught_up(nodes: &Nodes, within: Duration) -> Result<(), (u64, String)> {
    let deadline = Instant::now() + within;
    for cell in nodes.cells() {
        cell_caught_up(nodes, cell, deadline)
            .await
            .map_err(|why| (cell, why))?;
    }
    Ok(())
}

/// Wait until every voter of `cell` has applied its leader's last log index as of now.
async fn cell_caught_up(nodes: &Nodes, cell: u64, deadline: Instant) -> Result<(), String> {
    let ask = Duration::from_millis(500);
    let (target, voters) = loop {
        if let Some(l) = nodes.cell_leader(cell).await
            && let Some(s) = nodes.cell_status(l, cell, ask).await
            && s.state == "Leader"
        {
            let voters: Vec<usize> = (s.members.iter())
                .filter(|m| m.voter)
                .map(|m| m.id as usize)
                .collect();
            break (s.last_log_index, voters);
        }
        if Instant::now() > deadline {
            return Err(format!("cell {cell}: no leader known in time"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for id in voters {
        loop {
            let applied = nodes.cell_status(id, cell, ask).await;
            if applied.as_ref().is_some_and(|s| s.last_applied >= target) {
                break;
            }
            if Instant::now() > deadline {
                let at = applied.map_or("no answer".into(), |s| s.last_applied.to_string());
                return Err(format!(
                    "cell {cell}: node {id} applied {at} of index {target} in time"
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}
