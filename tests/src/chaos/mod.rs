//! # The fault and linearizability harness behind `whip chaos`
//!
//! Starts N `whip cell serve` processes, each in its own network namespace on a bridge the
//! harness creates ([`net`], [`nodes`]), runs client workers that record every operation as
//! invoke and completion ([`workload`], [`history`]) while a seeded nemesis partitions,
//! kills, pauses and skews the nodes ([`nemesis`]), heals everything, reads the final
//! state, and judges the history: a Wing–Gong search per key for the register and lease
//! models ([`linear`], [`models`]), direct invariants for counter and ledger
//! ([`invariants`]). Liveness is part of the verdict ([`liveness`]): a node process that
//! exits on its own, a leader loss that does not recover and a heal that does not catch up
//! within their bounds fail the run too. Everything it created is removed on the way out,
//! also on failure or Ctrl-C; leftovers of a killed run are removed at the next start.

pub mod check;
pub mod disk;
pub mod follow;
pub mod history;
pub mod invariants;
pub mod linear;
pub mod liveness;
pub mod mail;
pub mod models;
pub mod mover;
pub mod nemesis;
pub mod net;
pub mod nodes;
pub mod progress;
pub mod registry;
pub mod storm;
pub mod turns;
pub mod vote;
pub mod watch;
pub mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use check::WorkloadResult;
use history::{Kind, Op, Recorder};
use invariants::Violation;
use liveness::{Failover, NodeExit, RunEnd, Unrecovered};
use nemesis::{Fault, Nemesis, Recovery, Timing};
use whip_board::route::{self, RangeEntry};
use workload::Workload;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Voters.
    pub nodes: usize,
    /// How long faults and workloads run.
    pub duration: Duration,
    /// Enabled faults.
    pub faults: Vec<Fault>,
    /// Workloads.
    pub workloads: Vec<Workload>,
    /// Seed of the fault schedule and the workers' choices.
    pub seed: u64,
    /// Output directory (history, nemesis log, node logs, verdict).
    pub out: PathBuf,
    /// Workers per workload.
    pub concurrency: usize,
    /// The `whip` binary.
    pub whip: PathBuf,
    /// Fault timing.
    pub timing: Timing,
    /// Run the nodes as a fabric of this many data cells (`whip node serve`, `whip fabric
    /// init`); 0: one plain cell of `whip cell serve` voters.
    pub fabric_cells: u32,
}

/// Unavailability figures of a run, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Unavailability {
    /// Longest stretch without any successful operation while workers ran.
    pub longest: u64,
    /// Per cell, the longest stretch in which an operation was in flight and none
    /// succeeded, counting the operations whose cell is known (every operation in a plain
    /// cell; in a fabric those of cas, lease, counter and ledger, by the routes at the end
    /// of the run).
    pub longest_by_cell: BTreeMap<String, u64>,
    /// Median of leader loss → first successful write.
    pub leader_loss_median: Option<u64>,
    /// Largest leader loss → first successful write.
    pub leader_loss_max: Option<u64>,
    /// Every leader-loss sample.
    pub leader_loss_samples: Vec<u64>,
    /// Median of heal → all voters caught up.
    pub heal_catchup_median: Option<u64>,
    /// Largest heal → all voters caught up.
    pub heal_catchup_max: Option<u64>,
}

/// The verdict of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Per workload counts.
    pub workloads: Vec<WorkloadResult>,
    /// Unavailability figures.
    pub unavailability_ms: Unavailability,
    /// The seed.
    pub seed: u64,
    /// Faults injected.
    pub faults: u64,
    /// Leader loss → first write per cell (a plain cell is cell 0; a fabric's data cells).
    pub failover: BTreeMap<String, Failover>,
    /// A fabric's meta cell: leader loss → a new leader answering (`None`: a plain cell).
    pub meta_failover: Option<Failover>,
    /// Recoveries that did not happen within their bounds (each fails the run).
    pub unrecovered: Vec<Unrecovered>,
    /// Node processes that exited on their own (each fails the run).
    pub node_exits: Vec<NodeExit>,
    /// Violations with their smallest failing sub-histories.
    #[serde(skip)]
    pub violations: Vec<Violation>,
}

impl Report {
    /// Total violations.
    pub fn violation_count(&self) -> u64 {
        self.workloads.iter().map(|w| w.violations).sum()
    }

    /// True when nothing failed: no violation, no unrecovered loss, no node exited.
    pub fn passed(&self) -> bool {
        self.violation_count() == 0 && self.unrecovered.is_empty() && self.node_exits.is_empty()
    }

    /// The cell with the largest failover, and its figures.
    pub fn worst_failover(&self) -> Option<(&str, &Failover)> {
        (self.failover.iter())
            .filter(|(_, f)| f.samples > 0)
            .max_by_key(|(_, f)| f.max_ms)
            .map(|(cell, f)| (cell.as_str(), f))
    }

    /// The verdict table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<10} {:>8} {:>8} {:>6} {:>8} {:>11} {:>10}\n",
            "workload", "ops", "ok", "fail", "unknown", "violations", "undecided"
        );
        for w in &self.workloads {
            s += &format!(
                "{:<10} {:>8} {:>8} {:>6} {:>8} {:>11} {:>10}\n",
                w.workload, w.ops, w.ok, w.fail, w.unknown, w.violations, w.undecided_keys
            );
        }
        s += &self.figures();
        s += &self.failures();
        s += &format!("faults: {}  seed: {}\n", self.faults, self.seed);
        let verdict = if self.passed() { "PASS" } else { "FAIL" };
        s += &format!("verdict: {verdict}\n");
        s
    }

    /// The unavailability and failover lines of the table.
    fn figures(&self) -> String {
        let u = &self.unavailability_ms;
        let show = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{v} ms"));
        let mut s = format!("longest unavailability: {} ms", u.longest);
        if let Some((cell, ms)) = u.longest_by_cell.iter().max_by_key(|(_, ms)| **ms) {
            s += &format!(" (worst cell {cell}: {ms} ms)");
        }
        s += &format!(
            "\nleader loss -> first write: median {}, max {} ({} samples)\n",
            show(u.leader_loss_median),
            show(u.leader_loss_max),
            u.leader_loss_samples.len()
        );
        if let Some((cell, f)) = self.worst_failover() {
            s += &format!(
                "failover, worst cell {cell}: median {}, max {} ({} samples)\n",
                show(f.median_ms),
                show(f.max_ms),
                f.samples
            );
        }
        if let Some(f) = &self.meta_failover {
            s += &format!(
                "meta cell failover: median {}, max {} ({} samples)\n",
                show(f.median_ms),
                show(f.max_ms),
                f.samples
            );
        }
        s += &format!(
            "heal -> all voters caught up: median {}, max {}\n",
            show(u.heal_catchup_median),
            show(u.heal_catchup_max)
        );
        s
    }

    /// The lines naming each unrecovered loss and each node that exited.
    fn failures(&self) -> String {
        let mut s = String::new();
        for u in &self.unrecovered {
            s += &format!(
                "UNRECOVERED cell {} {} at {} ms: {}\n",
                u.cell, u.kind, u.at_ms, u.why
            );
        }
        for exit in &self.node_exits {
            s += &format!(
                "NODE EXITED node {} ({}) at {} ms; its log ends:\n",
                exit.node, exit.status, exit.at_ms
            );
            for line in &exit.log_tail {
                s += &format!("  | {line}\n");
            }
        }
        s
    }

    /// The JSON form.
    pub fn json(&self) -> serde_json::Value {
        json!({
            "workloads": self.workloads,
            "unavailability_ms": self.unavailability_ms,
            "seed": self.seed,
            "faults": self.faults,
            "failover": self.failover,
            "meta_failover": self.meta_failover,
            "unrecovered": self.unrecovered,
            "node_exits": self.node_exits,
            "verdict": if self.passed() { "PASS" } else { "FAIL" },
            "violations": self.violations.iter().map(|v| json!({
                "workload": v.workload, "key": v.key, "message": v.message,
                "history": v.history,
            })).collect::<Vec<_>>(),
        })
    }
}

fn median(v: &[u64]) -> Option<u64> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// The longest gap between successful operations (ms) while workers ran.
pub fn longest_gap_ms(ops: &[Op], end_ns: u64) -> u64 {
    longest_gap_of(ops.iter(), end_ns)
}

fn longest_gap_of<'a>(ops: impl Iterator<Item = &'a Op>, end_ns: u64) -> u64 {
    let mut first = None;
    let mut done = Vec::new();
    for o in ops.filter(|o| o.f != "list" && o.f != "final") {
        first = Some(first.map_or(o.call, |f: u64| f.min(o.call)));
        if o.kind == Kind::Ok {
            done.push(o.ret);
        }
    }
    let Some(first) = first else {
        return 0;
    };
    done.sort_unstable();
    let mut last = first;
    let mut longest = 0;
    for t in done.into_iter().chain(std::iter::once(end_ns)) {
        longest = longest.max(t.saturating_sub(last));
        last = last.max(t);
    }
    longest / 1_000_000
}

/// The cell an operation's key routes to: every key of a plain cell (`ranges` empty) is on
/// cell 0; in a fabric the cas, lease, counter and ledger keys are located in `ranges`, and
/// other workloads' keys (which do not name their routing key) are on no known cell.
pub fn cell_of(op: &Op, ranges: &[RangeEntry]) -> Option<u64> {
    if ranges.is_empty() {
        return Some(0);
    }
    let (name, key) = op.key.split_once('/')?;
    let point = match name {
        "cas" => route::kv_point(op.key.as_bytes()),
        "lease" | "counter" | "ledger" => route::resource_point(&whip_board::ResourceId {
            owner: "chaos".into(),
            name: name.into(),
            key: key.into(),
        }),
        _ => return None,
    };
    Some(route::locate(ranges, point).cell)
}

/// Longest unavailability per cell (see [`Unavailability::longest_by_cell`]).
fn longest_by_cell(ops: &[Op], end_ns: u64, ranges: &[RangeEntry]) -> BTreeMap<String, u64> {
    let mut by_cell: BTreeMap<u64, Vec<&Op>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.f != "list" && o.f != "final") {
        if let Some(cell) = cell_of(op, ranges) {
            by_cell.entry(cell).or_default().push(op);
        }
    }
    (by_cell.into_iter())
        .map(|(cell, ops)| (cell.to_string(), longest_wait_ms(&ops, end_ns)))
        .collect()
}

/// The longest stretch (ms) during which some operation was in flight and none succeeded.
/// Unlike the gap between successes, a stretch in which no operation was even tried does
/// not count: in a fabric a cell may simply have no key in use for a while.
pub fn longest_wait_ms(ops: &[&Op], end_ns: u64) -> u64 {
    // An operation of unknown outcome has no return time; the worker gave up on it after
    // at most OP_TIMEOUT_MS.
    let timeout_ns = workload::OP_TIMEOUT_MS * 1_000_000;
    let flight_end = |o: &Op| match o.ret {
        u64::MAX => o.call.saturating_add(timeout_ns),
        ret => ret,
    };
    let mut flights: Vec<(u64, u64)> = (ops.iter())
        .map(|o| (o.call, flight_end(o).min(end_ns).max(o.call)))
        .collect();
    flights.sort_unstable();
    let mut successes: Vec<u64> = (ops.iter())
        .filter(|o| o.kind == Kind::Ok)
        .map(|o| o.ret)
        .collect();
    successes.sort_unstable();
    let (mut longest, mut next) = (0, 0);
    let mut flights = flights.into_iter().peekable();
    while let Some((start, mut stop)) = flights.next() {
        // One stretch of the union of the flights, cut at every success inside it.
        while let Some(&(s, e)) = flights.peek()
            && s <= stop
        {
            stop = stop.max(e);
            flights.next();
        }
        let mut from = start;
        while next < successes.len() && successes[next] <= stop {
            let at = successes[next].max(from);
            longest = longest.max(at - from);
            from = at;
            next += 1;
        }
        longest = longest.max(stop - from);
    }
    longest / 1_000_000
}

/// Judge a recorded history of a plain cell (also used by `whip chaos --check FILE`).
pub fn judge(ops: &[Op], seed: u64, recovery: &Recovery, end_ns: u64) -> Report {
    judge_run(ops, seed, recovery, end_ns, &[])
}

/// Judge a recorded history and the run's recovery figures; `ranges` are a fabric's routes
/// at the end of the run (empty: a plain cell).
pub fn judge_run(
    ops: &[Op],
    seed: u64,
    recovery: &Recovery,
    end_ns: u64,
    ranges: &[RangeEntry],
) -> Report {
    let (workloads, violations) = check::check_all(ops, linear::Bounds::default());
    let mut failover: BTreeMap<String, Failover> = BTreeMap::new();
    let cells = ranges.iter().map(|r| r.cell);
    for cell in cells.chain(ranges.is_empty().then_some(0)) {
        failover.insert(cell.to_string(), Failover::of(&[]));
    }
    for (cell, samples) in &recovery.cell_failover_ms {
        failover.insert(cell.to_string(), Failover::of(samples));
    }
    Report {
        workloads,
        unavailability_ms: Unavailability {
            longest: longest_gap_ms(ops, end_ns),
            longest_by_cell: longest_by_cell(ops, end_ns, ranges),
            leader_loss_median: median(&recovery.leader_loss_ms),
            leader_loss_max: recovery.leader_loss_ms.iter().max().copied(),
            leader_loss_samples: recovery.leader_loss_ms.clone(),
            heal_catchup_median: median(&recovery.heal_catchup_ms),
            heal_catchup_max: recovery.heal_catchup_ms.iter().max().copied(),
        },
        seed,
        faults: recovery.faults,
        failover,
        meta_failover: (!ranges.is_empty()).then(|| Failover::of(&recovery.meta_failover_ms)),
        unrecovered: recovery.unrecovered.clone(),
        node_exits: recovery.node_exits.clone(),
        violations,
    }
}

/// Recheck a saved run: `dir/history.jsonl` judged with the figures of `dir/nemesis.jsonl`
/// and the routes of `dir/routes.json`, as the live run judged them.
pub fn check_dir(dir: &Path) -> Result<Report, String> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let events = history::parse(&read("history.jsonl")?).map_err(|e| format!("history: {e}"))?;
    let (recovery, end) = liveness::recovery_of_log(&read("nemesis.jsonl")?)?;
    let ranges: Vec<RangeEntry> =
        serde_json::from_str(&read("routes.json")?).map_err(|e| format!("routes.json: {e}"))?;
    let ops = history::pair(&events);
    Ok(judge_run(&ops, end.seed, &recovery, end.end_ns, &ranges))
}

/// Run the harness and judge the history.
pub async fn run(options: Options) -> Result<Report, String> {
    // The members serve TLS with node credentials of this user's CA; the harness's clients
    // connect as its operator.
    crate::install_client();
    std::fs::create_dir_all(&options.out).map_err(|e| format!("{}: {e}", options.out.display()))?;
    let start = Instant::now();
    let mut net = net::Net::create(options.nodes)?;
    std::fs::write(options.out.join("names.txt"), net.names().join("\n"))
        .map_err(|e| e.to_string())?;
    let data = options.out.join("data");
    let mut nodes =
        nodes::Nodes::start(&options.whip, &data_dir(&data)?, &net, options.fabric_cells).await?;
    if let Err((_, why)) = nemesis::caught_up(&nodes, Duration::from_secs(20)).await {
        return Err(format!("the cells were not all up within 20 s: {why}"));
    }
    eprintln!("cell of {} nodes up at {:?}", nodes.len(), nodes.addrs);
    let recorder = Recorder::new(Some(&options.out.join("history.jsonl")), start)
        .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = spawn_workers(&options, &recorder, &nodes.addrs, &stop);
    let log =
        std::fs::File::create(options.out.join("nemesis.jsonl")).map_err(|e| e.to_string())?;
    let mut nemesis = Nemesis {
        net: &mut net,
        nodes: &mut nodes,
        faults: options.faults.clone(),
        rng: Nemesis::seeded(options.seed),
        log: nemesis::EventLog::new(log, start),
        timing: options.timing,
        recovery: Recovery::default(),
    };
    let begun = Instant::now();
    let shown = progress::show(recorder.clone(), begun, options.duration);
    tokio::select! {
        (r, ()) = async { tokio::join!(nemesis.run(begun + options.duration), shown) } => r?,
        _ = tokio::signal::ctrl_c() => return Err("interrupted".into()),
    }
    stop.store(true, Ordering::Relaxed);
    while let Some(r) = workers.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    let end_ns = recorder.now();
    nemesis.heal().await?;
    let (recovery, ranges) = finish(&mut nemesis, &recorder, &options, end_ns).await?;
    drop(nodes);
    drop(net);
    let ops = history::pair(&recorder.finish());
    let report = judge_run(&ops, options.seed, &recovery, end_ns, &ranges);
    let verdict = serde_json::to_string_pretty(&report.json()).expect("report encodes");
    std::fs::write(options.out.join("verdict.json"), verdict).map_err(|e| e.to_string())?;
    Ok(report)
}

/// Start every workload's workers.
fn spawn_workers(
    options: &Options,
    recorder: &Recorder,
    addrs: &[String],
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinSet<Result<(), String>> {
    let mut workers = tokio::task::JoinSet::new();
    for (w, workload) in options.workloads.iter().enumerate() {
        let shared = workload::Shared {
            recorder: recorder.clone(),
            addrs: addrs.to_vec(),
            stop: stop.clone(),
            rotation: Default::default(),
        };
        for i in 0..workload.workers(options.concurrency) {
            let seed = options.seed.wrapping_mul(1_000_003) ^ ((w as u64) << 32 | i as u64);
            workers.spawn(workload::run_worker(*workload, shared.clone(), seed));
        }
    }
    workers
}

/// After the final heal: read the final state, look at the node processes a last time,
/// save the routes (`routes.json`, `[]` for a plain cell) and log how the run ended, so
/// `--check-only` judges the same.
async fn finish(
    nemesis: &mut Nemesis<'_>,
    recorder: &Recorder,
    options: &Options,
    end_ns: u64,
) -> Result<(Recovery, Vec<RangeEntry>), String> {
    let addrs = nemesis.nodes.addrs.clone();
    let ops = history::pair(&recorder.finish());
    workload::final_reads(recorder, &addrs, &ops).await?;
    nemesis.watch_nodes();
    let ranges = match options.fabric_cells {
        0 => Vec::new(),
        _ => liveness::ranges_of(nemesis.nodes)
            .await
            .ok_or("no node answered the fabric's routes at the end of the run")?,
    };
    let routes = serde_json::to_string(&ranges).expect("routes encode");
    std::fs::write(options.out.join("routes.json"), routes).map_err(|e| e.to_string())?;
    let end = RunEnd {
        seed: options.seed,
        end_ns,
        faults: nemesis.recovery.faults,
    };
    nemesis.event("run-end", serde_json::json!(end));
    Ok((nemesis.recovery.clone(), ranges))
}

fn data_dir(path: &Path) -> Result<PathBuf, String> {
    // A fresh cell each run: node data of an earlier run in the same directory goes.
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    std::fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}
