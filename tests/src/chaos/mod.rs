//! # The fault and linearizability harness behind `whip chaos`
//!
//! Starts N `whip cell serve` processes, each in its own network namespace on a bridge the
//! harness creates ([`net`], [`nodes`]), runs client workers that record every operation as
//! invoke and completion ([`workload`], [`history`]) while a seeded nemesis partitions,
//! kills, pauses and skews the nodes ([`nemesis`]), heals everything, reads the final
//! state, and judges the history: a Wing–Gong search per key for the register and lease
//! models ([`linear`], [`models`]), direct invariants for counter and ledger
//! ([`invariants`]). Everything it created is removed on the way out, also on failure or
//! Ctrl-C; leftovers of a killed run are removed at the next start.

pub mod check;
pub mod history;
pub mod invariants;
pub mod linear;
pub mod mail;
pub mod models;
pub mod mover;
pub mod nemesis;
pub mod net;
pub mod nodes;
pub mod progress;
pub mod registry;
pub mod vote;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use check::WorkloadResult;
use history::{Kind, Op, Recorder};
use invariants::Violation;
use nemesis::{Fault, Nemesis, Recovery, Timing};
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
    /// Violations with their smallest failing sub-histories.
    #[serde(skip)]
    pub violations: Vec<Violation>,
}

impl Report {
    /// Total violations.
    pub fn violation_count(&self) -> u64 {
        self.workloads.iter().map(|w| w.violations).sum()
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
        let u = &self.unavailability_ms;
        let show = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{v} ms"));
        s += &format!("longest unavailability: {} ms\n", u.longest);
        s += &format!(
            "leader loss -> first write: median {}, max {} ({} samples)\n",
            show(u.leader_loss_median),
            show(u.leader_loss_max),
            u.leader_loss_samples.len()
        );
        s += &format!(
            "heal -> all voters caught up: median {}, max {}\n",
            show(u.heal_catchup_median),
            show(u.heal_catchup_max)
        );
        s += &format!("faults: {}  seed: {}\n", self.faults, self.seed);
        s += &format!(
            "verdict: {}\n",
            if self.violation_count() == 0 {
                "PASS"
            } else {
                "FAIL"
            }
        );
        s
    }

    /// The JSON form.
    pub fn json(&self) -> serde_json::Value {
        json!({
            "workloads": self.workloads,
            "unavailability_ms": self.unavailability_ms,
            "seed": self.seed,
            "faults": self.faults,
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
    let worked: Vec<&Op> = ops
        .iter()
        .filter(|o| o.f != "list" && o.f != "final")
        .collect();
    let Some(first) = worked.iter().map(|o| o.call).min() else {
        return 0;
    };
    let mut done: Vec<u64> = worked
        .iter()
        .filter(|o| o.kind == Kind::Ok)
        .map(|o| o.ret)
        .collect();
    done.sort_unstable();
    let mut last = first;
    let mut longest = 0;
    for t in done.into_iter().chain(std::iter::once(end_ns)) {
        longest = longest.max(t.saturating_sub(last));
        last = last.max(t);
    }
    longest / 1_000_000
}

/// Judge a recorded history (also used by `whip chaos --check FILE`).
pub fn judge(ops: &[Op], seed: u64, recovery: &Recovery, end_ns: u64) -> Report {
    let (workloads, violations) = check::check_all(ops, linear::Bounds::default());
    Report {
        workloads,
        unavailability_ms: Unavailability {
            longest: longest_gap_ms(ops, end_ns),
            leader_loss_median: median(&recovery.leader_loss_ms),
            leader_loss_max: recovery.leader_loss_ms.iter().max().copied(),
            leader_loss_samples: recovery.leader_loss_ms.clone(),
            heal_catchup_median: median(&recovery.heal_catchup_ms),
            heal_catchup_max: recovery.heal_catchup_ms.iter().max().copied(),
        },
        seed,
        faults: recovery.faults,
        violations,
    }
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
    if nemesis::caught_up(&nodes, Duration::from_secs(20))
        .await
        .is_none()
    {
        return Err("the cell elected no leader within 20 s".into());
    }
    eprintln!("cell of {} nodes up at {:?}", nodes.len(), nodes.addrs);
    let recorder = Recorder::new(Some(&options.out.join("history.jsonl")), start)
        .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = tokio::task::JoinSet::new();
    for (w, workload) in options.workloads.iter().enumerate() {
        let shared = workload::Shared {
            recorder: recorder.clone(),
            addrs: nodes.addrs.clone(),
            stop: stop.clone(),
            rotation: Default::default(),
        };
        for i in 0..workload.workers(options.concurrency) {
            let seed = options.seed.wrapping_mul(1_000_003) ^ ((w as u64) << 32 | i as u64);
            workers.spawn(workload::run_worker(*workload, shared.clone(), seed));
        }
    }
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
    let recovery = nemesis.recovery.clone();
    let ops = history::pair(&recorder.finish());
    workload::final_reads(&recorder, &nodes.addrs, &ops).await?;
    drop(nodes);
    drop(net);
    let ops = history::pair(&recorder.finish());
    let report = judge(&ops, options.seed, &recovery, end_ns);
    let verdict = serde_json::to_string_pretty(&report.json()).expect("report encodes");
    std::fs::write(options.out.join("verdict.json"), verdict).map_err(|e| e.to_string())?;
    Ok(report)
}

fn data_dir(path: &Path) -> Result<PathBuf, String> {
    // A fresh cell each run: node data of an earlier run in the same directory goes.
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    std::fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}
