//! `whip chaos --wake-storm`: what an idle fabric of many cells costs, and how fast it
//! comes back when the node leading most of them dies.
//!
//! The nodes start in their namespaces as for any fabric run (`--fabric-cells`, typically
//! 1,000 on 3 nodes: every node hosts every cell). Once every cell has a leader and the
//! fabric has been idle for [`SETTLE`] (its cells hibernate), the CPU time and resident
//! memory of every node process are read over [`IDLE_WINDOW`]: the cost per idle cell.
//! Then the node leading the most data cells is SIGKILLed, and one probe key per data cell
//! (found by the routes, so every cell owns exactly one) is written through the survivors
//! until it lands: the time from the kill to that write is the cell's time to be writable
//! again. The cells the dead node led are the storm (each needs an election); the others
//! show what the storm costs them. At most [`IN_FLIGHT`] probes are in flight at once, as
//! a crowd of clients would be. Finally the killed node restarts and every cell must have
//! a leader again within [`REJOIN_WITHIN`].
//!
//! The run passes when every cell was written within [`WRITABLE_WITHIN`] and the restarted
//! node's cells came back; the figures (median and largest per group) go to the verdict
//! and to `storm.json` in the output directory.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use whip_board::route;
use whip_cell::CellClient;
use whip_proto::v1 as pb;

use super::liveness::{Failover, ranges_of};
use super::nodes::Nodes;
use super::{Options, data_dir, net};

/// How long the fabric idles before its cost is read (its cells hibernate within 3 s).
pub const SETTLE: Duration = Duration::from_secs(10);
/// How long the idle cost is read over.
pub const IDLE_WINDOW: Duration = Duration::from_secs(20);
/// Every cell must take a write within this long of the kill.
pub const WRITABLE_WITHIN: Duration = Duration::from_secs(30);
/// Probes in flight at once.
pub const IN_FLIGHT: usize = 128;
/// One probe write's attempt.
const ATTEMPT: Duration = Duration::from_millis(500);
/// The restarted node's cells must all have a leader again within this long.
pub const REJOIN_WITHIN: Duration = Duration::from_secs(60);

/// What one node process cost while the fabric idled.
#[derive(Clone, Debug, Serialize)]
pub struct IdleCost {
    /// The node's id.
    pub node: usize,
    /// Cells it hosts (data cells and the meta cell).
    pub cells: u64,
    /// Its CPU time over the window, in % of one core.
    pub cpu_pct: f64,
    /// The same per hosted cell.
    pub cpu_pct_per_cell: f64,
    /// Its resident memory at the end of the window.
    pub rss_mib: f64,
    /// The same per hosted cell.
    pub rss_mib_per_cell: f64,
}

/// The verdict of a storm run.
#[derive(Clone, Debug, Serialize)]
pub struct StormReport {
    /// Data cells of the fabric.
    pub data_cells: u32,
    /// Nodes.
    pub nodes: usize,
    /// What each node cost while the fabric idled.
    pub idle: Vec<IdleCost>,
    /// The node killed.
    pub killed: usize,
    /// How many data cells it led.
    pub killed_led: u64,
    /// Kill → first write, the cells the killed node led.
    pub led_writable: Failover,
    /// Kill → first write, every data cell.
    pub all_writable: Failover,
    /// Data cells not written within [`WRITABLE_WITHIN`].
    pub unwritten: Vec<u64>,
    /// Restart of the killed node → every cell with a leader again (`None`: not within
    /// [`REJOIN_WITHIN`]).
    pub rejoined_ms: Option<u64>,
}

impl StormReport {
    /// Every cell written in time and the restarted node back.
    pub fn passed(&self) -> bool {
        self.unwritten.is_empty() && self.rejoined_ms.is_some()
    }
}

/// Run the storm (see the module docs).
pub async fn run(options: &Options) -> Result<StormReport, String> {
    crate::install_client();
    if options.fabric_cells == 0 {
        return Err("--wake-storm needs a fabric (--fabric-cells)".into());
    }
    std::fs::create_dir_all(&options.out).map_err(|e| format!("{}: {e}", options.out.display()))?;
    let net = net::Net::create(options.nodes)?;
    let data = options.out.join("data");
    let mut nodes =
        Nodes::start(&options.whip, &data_dir(&data)?, &net, options.fabric_cells).await?;
    let leaders = wait_leaders(&nodes, Duration::from_secs(120)).await?;
    eprintln!("every cell has a leader; idling {SETTLE:?}, then reading the cost");
    tokio::time::sleep(SETTLE).await;
    let idle = idle_cost(&nodes, options.fabric_cells).await?;
    let probes = probe_keys(&nodes, options.fabric_cells).await?;
    let (killed, killed_led) = busiest(&leaders);
    eprintln!("killing node {killed}, leader of {killed_led} data cells");
    let kill = Instant::now();
    nodes.kill(killed);
    let survivors: Vec<String> = (1..=nodes.len())
        .filter(|id| *id != killed)
        .map(|id| nodes.addrs[id - 1].clone())
        .collect();
    let written = write_each(&survivors, &probes, kill).await;
    let report = judge(options, idle, &leaders, killed, &written);
    nodes.spawn(killed)?;
    let restarted = Instant::now();
    let rejoined = wait_leaders(&nodes, REJOIN_WITHIN).await.ok();
    let report = StormReport {
        rejoined_ms: rejoined.map(|_| restarted.elapsed().as_millis() as u64),
        ..report
    };
    let text = serde_json::to_string_pretty(&report).expect("report encodes");
    std::fs::write(options.out.join("storm.json"), text).map_err(|e| e.to_string())?;
    drop(nodes);
    drop(net);
    Ok(report)
}

fn judge(
    options: &Options,
    idle: Vec<IdleCost>,
    leaders: &BTreeMap<u64, usize>,
    killed: usize,
    written: &BTreeMap<u64, Option<u64>>,
) -> StormReport {
    let led: Vec<u64> = (leaders.iter())
        .filter(|(_, l)| **l == killed)
        .filter_map(|(cell, _)| written.get(cell).copied().flatten())
        .collect();
    let all: Vec<u64> = written.values().filter_map(|ms| *ms).collect();
    StormReport {
        data_cells: options.fabric_cells,
        nodes: options.nodes,
        idle,
        killed,
        killed_led: leaders.values().filter(|l| **l == killed).count() as u64,
        led_writable: Failover::of(&led),
        all_writable: Failover::of(&all),
        unwritten: (written.iter())
            .filter(|(_, ms)| ms.is_none())
            .map(|(cell, _)| *cell)
            .collect(),
        rejoined_ms: None,
    }
}

/// Wait until every data cell has a leader: the leaders by cell.
async fn wait_leaders(nodes: &Nodes, within: Duration) -> Result<BTreeMap<u64, usize>, String> {
    let deadline = Instant::now() + within;
    loop {
        let leaders = nodes.leaders_by_cell().await;
        if leaders.len() == nodes.fabric_cells() as usize {
            return Ok(leaders);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {} data cells have a leader after {within:?}",
                leaders.len(),
                nodes.fabric_cells()
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The node leading the most cells (smallest id among equals), and how many it leads.
fn busiest(leaders: &BTreeMap<u64, usize>) -> (usize, u64) {
    let mut counts: BTreeMap<usize, u64> = BTreeMap::new();
    for leader in leaders.values() {
        *counts.entry(*leader).or_default() += 1;
    }
    let most = counts.values().copied().max().unwrap_or(0);
    let node = (counts.iter())
        .find(|(_, n)| **n == most)
        .map_or(1, |(id, _)| *id);
    (node, most)
}

/// One key per data cell, by the fabric's routes: `storm/<n>` for the first `n` landing in
/// each cell.
async fn probe_keys(nodes: &Nodes, cells: u32) -> Result<BTreeMap<u64, String>, String> {
    let ranges = ranges_of(nodes)
        .await
        .ok_or("no node answered its routes")?;
    let mut keys = BTreeMap::new();
    for n in 0..(cells as u64 * 64) {
        let key = format!("storm/{n}");
        let cell = route::locate(&ranges, route::kv_point(key.as_bytes())).cell;
        keys.entry(cell).or_insert(key);
        if keys.len() == cells as usize {
            return Ok(keys);
        }
    }
    Err(format!("found keys for {} of {cells} cells", keys.len()))
}

/// Write each cell's probe key through `addrs` until it lands: ms from `kill` by cell
/// (`None`: not within [`WRITABLE_WITHIN`]).
async fn write_each(
    addrs: &[String],
    probes: &BTreeMap<u64, String>,
    kill: Instant,
) -> BTreeMap<u64, Option<u64>> {
    let clients: Arc<Vec<CellClient>> = Arc::new(
        (addrs.iter())
            .filter_map(|a| CellClient::connect(std::slice::from_ref(a)).ok())
            .map(|c| c.with_retry_for(Duration::ZERO))
            .collect(),
    );
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    for (cell, key) in probes.clone() {
        let (clients, gate) = (clients.clone(), gate.clone());
        tasks.spawn(async move {
            let _held = gate.acquire_owned().await.expect("gate open");
            (cell, write_until(&clients, &key, kill).await)
        });
    }
    let mut done = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (cell, ms) = joined.expect("probe task");
        done.insert(cell, ms);
    }
    done
}

async fn write_until(clients: &[CellClient], key: &str, kill: Instant) -> Option<u64> {
    let mut attempt = 0usize;
    while kill.elapsed() < WRITABLE_WITHIN {
        let client = &clients[attempt % clients.len()];
        attempt += 1;
        let request = pb::KvPutRequest {
            key: key.as_bytes().to_vec(),
            value: attempt.to_string().into_bytes(),
            ..Default::default()
        };
        if let Ok(Ok(_)) = tokio::time::timeout(ATTEMPT, client.kv_put(request)).await {
            return Some(kill.elapsed().as_millis() as u64);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// CPU and memory of every node process over [`IDLE_WINDOW`].
async fn idle_cost(nodes: &Nodes, cells: u32) -> Result<Vec<IdleCost>, String> {
    let pids: Vec<(usize, u32)> = (1..=nodes.len())
        .filter_map(|id| nodes.pid(id).map(|pid| (id, pid)))
        .collect();
    let before: Vec<u64> = pids
        .iter()
        .map(|(_, pid)| cpu_ticks(*pid))
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    tokio::time::sleep(IDLE_WINDOW).await;
    let seconds = started.elapsed().as_secs_f64();
    let tick = clock_ticks_per_second();
    let hosted = u64::from(cells) * nodes.len().min(3) as u64 / nodes.len() as u64 + 1;
    let mut costs = Vec::new();
    for ((node, pid), before) in pids.into_iter().zip(before) {
        let used = cpu_ticks(pid)?.saturating_sub(before) as f64;
        let cpu_pct = 100.0 * used / tick / seconds;
        let rss_mib = rss_kib(pid)? as f64 / 1024.0;
        costs.push(IdleCost {
            node,
            cells: hosted,
            cpu_pct,
            cpu_pct_per_cell: cpu_pct / hosted as f64,
            rss_mib,
            rss_mib_per_cell: rss_mib / hosted as f64,
        });
    }
    Ok(costs)
}

fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    // Fields after the command name (which may hold spaces) start at its closing paren.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or(format!("{path}: no name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64, String> {
        (fields.get(i).and_then(|f| f.parse().ok())).ok_or(format!("{path}: field {i}"))
    };
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    Ok(field(11)? + field(12)?)
}

fn rss_kib(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    (text.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or(format!("{path}: no VmRSS"))
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the running system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// The report as the table `whip chaos` prints.
pub fn table(report: &StormReport) -> String {
    let mut out = String::new();
    for c in &report.idle {
        out += &format!(
            "idle node {}: {} cells, CPU {:.2} % ({:.4} %/cell), RSS {:.1} MiB ({:.2} MiB/cell)\n",
            c.node, c.cells, c.cpu_pct, c.cpu_pct_per_cell, c.rss_mib, c.rss_mib_per_cell
        );
    }
    let figures = |f: &Failover| {
        let ms = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{v} ms"));
        format!(
            "{} cells, median {}, max {}",
            f.samples,
            ms(f.median_ms),
            ms(f.max_ms)
        )
    };
    out += &format!(
        "killed node {} (leader of {} data cells)\nwritable again, its cells: {}\n\
         writable again, every cell: {}\n",
        report.killed,
        report.killed_led,
        figures(&report.led_writable),
        figures(&report.all_writable)
    );
    out += &format!(
        "not written within {WRITABLE_WITHIN:?}: {:?}\n",
        report.unwritten
    );
    let rejoined = report
        .rejoined_ms
        .map_or("NOT within the bound".into(), |ms| format!("{ms} ms"));
    out += &format!("restarted node: every cell led again after {rejoined}\n");
    out += if report.passed() { "PASS\n" } else { "FAIL\n" };
    out
}
