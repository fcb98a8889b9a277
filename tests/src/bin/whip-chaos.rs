//! `whip-chaos`: the fault and linearizability harness (`whip chaos` execs it).
//!
//! Exit codes: 0 no violation, 1 a violation or a failure, 2 usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use whip_tests::chaos::{self, Options, nemesis::Fault, nemesis::Recovery, workload::Workload};

/// Run N voters in network namespaces under partitions, kills, pauses and clock skew, record
/// every operation and check the history (linearizability and invariants).
#[derive(Parser, Debug)]
#[command(name = "whip chaos", version)]
struct Args {
    /// Voters, one process and namespace each.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// How long the workload and faults run (`60s`, `5m`, `1500ms`).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Faults: partition, kill, pause, skew, move, oneway, member, clock (comma-separated;
    /// `none` for none).
    #[arg(long, default_value = "partition,kill,pause,skew")]
    nemesis: String,
    /// Workloads: cas, lease, counter, ledger, board, registry, mail, vote.
    #[arg(long, default_value = "cas,lease,counter,ledger,board")]
    workload: String,
    /// Seed of the schedule (printed; replay with the same seed). Random when absent.
    #[arg(long)]
    seed: Option<u64>,
    /// Output directory: history.jsonl, nemesis.jsonl, node logs, verdict.json.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Workers per workload.
    #[arg(long, default_value_t = 3)]
    concurrency: usize,
    /// Run the nodes as a fabric (`whip node serve` + `whip fabric init`) of this many data
    /// cells; 0 (default): one cell of `whip cell serve` voters.
    #[arg(long, default_value_t = 0)]
    fabric_cells: u32,
    /// The `whip` binary (default: next to this executable).
    #[arg(long)]
    whip: Option<PathBuf>,
    /// Only check an existing history file (JSON lines) and print the verdict.
    #[arg(long)]
    check: Option<PathBuf>,
    /// Only recheck the saved run in DIR (its history.jsonl, nemesis.jsonl and routes.json)
    /// and print the same verdict the run printed.
    #[arg(long, value_name = "DIR", conflicts_with = "check")]
    check_only: Option<PathBuf>,
    /// Override both recovery bounds (leader loss and heal catch-up), for tests that block
    /// a recovery on purpose (`2s`, `1500ms`).
    #[arg(long, hide = true, value_parser = parse_duration)]
    recovery_bound: Option<Duration>,
    /// Instead of workloads and faults: let a fabric of --fabric-cells cells idle, read
    /// what each idle cell costs, SIGKILL the node leading the most cells and time every
    /// cell until it takes a write again, then restart it (`storm.json` in --out).
    #[arg(long)]
    wake_storm: bool,
    /// Print the verdict as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (number, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = number.parse().map_err(|_| format!("bad duration {s:?}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("bad duration unit in {s:?} (ms, s, m, h)")),
    }
}

fn list<T>(s: &str, parse: fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "none")
        .map(parse)
        .collect()
}

/// The faults and workloads `args` name, each fault able to run on the nodes asked for.
fn what_to_run(args: &Args) -> Result<(Vec<Fault>, Vec<Workload>), String> {
    let faults = list(&args.nemesis, Fault::parse)?;
    let workloads = list(&args.workload, Workload::parse)?;
    if workloads.is_empty() {
        return Err("no workload given".into());
    }
    if args.nodes == 0 || args.nodes > 9 {
        return Err("--nodes must be between 1 and 9".into());
    }
    for fault in &faults {
        fault.fits(args.nodes, args.fabric_cells)?;
    }
    Ok((faults, workloads))
}

fn usage(message: &str) -> ExitCode {
    eprintln!("whip chaos: {message}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        t.map(|d| d.as_nanos() as u64 % 1_000_000_000).unwrap_or(1)
    });
    if let Some(path) = &args.check {
        return check_file(path, seed, args.json);
    }
    if let Some(dir) = &args.check_only {
        return check_dir(dir, args.json);
    }
    let (faults, workloads) = match what_to_run(&args) {
        Ok(lists) => lists,
        Err(e) => return usage(&e),
    };
    let whip = match args.whip.clone().or_else(default_whip) {
        Some(w) => w,
        None => return usage("cannot find the whip binary next to whip-chaos: pass --whip"),
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("whip-chaos-{seed}")));
    eprintln!(
        "whip chaos: seed {seed}, out {} (replay: --seed {seed} --nodes {} --nemesis {} \
         --workload {} --duration {:?} --fabric-cells {})",
        out.display(),
        args.nodes,
        args.nemesis,
        args.workload,
        args.duration,
        args.fabric_cells
    );
    let options = Options {
        nodes: args.nodes,
        duration: args.duration,
        faults,
        workloads,
        seed,
        out,
        concurrency: args.concurrency.max(1),
        whip,
        timing: timing(args.recovery_bound),
        fabric_cells: args.fabric_cells,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build();
    if args.wake_storm {
        return wake_storm(runtime, &options, args.json);
    }
    let report = match runtime
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(chaos::run(options)))
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("whip chaos: {e}");
            return ExitCode::from(1);
        }
    };
    print_report(&report, args.json)
}

fn wake_storm(
    runtime: std::io::Result<tokio::runtime::Runtime>,
    options: &Options,
    json: bool,
) -> ExitCode {
    let run = |rt: tokio::runtime::Runtime| {
        rt.block_on(async {
            tokio::select! {
                r = chaos::storm::run(options) => r,
                _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
            }
        })
    };
    match runtime.map_err(|e| e.to_string()).and_then(run) {
        Ok(report) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("report encodes")
                );
            } else {
                print!("{}", chaos::storm::table(&report));
            }
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("whip chaos: {e}");
            ExitCode::from(1)
        }
    }
}

fn print_report(report: &chaos::Report, json: bool) -> ExitCode {
    for v in &report.violations {
        eprintln!(
            "VIOLATION {} {}: {}\nsmallest failing sub-history:\n{}\n",
            v.workload, v.key, v.message, v.history
        );
    }
    if json {
        println!("{}", report.json());
    } else {
        print!("{}", report.table());
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn check_dir(dir: &std::path::Path, json: bool) -> ExitCode {
    match chaos::check_dir(dir) {
        Ok(report) => print_report(&report, json),
        Err(e) => {
            eprintln!("whip chaos: {e}");
            ExitCode::from(1)
        }
    }
}

fn check_file(path: &std::path::Path, seed: u64, json: bool) -> ExitCode {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return usage(&format!("{}: {e}", path.display())),
    };
    let events = match chaos::history::parse(&text) {
        Ok(e) => e,
        Err(e) => return usage(&format!("{}: {e}", path.display())),
    };
    let end = events.iter().map(|e| e.time).max().unwrap_or(0);
    let ops = chaos::history::pair(&events);
    print_report(&chaos::judge(&ops, seed, &Recovery::default(), end), json)
}

fn timing(recovery_bound: Option<Duration>) -> chaos::nemesis::Timing {
    let mut timing = chaos::nemesis::Timing::default();
    if let Some(bound) = recovery_bound {
        timing.leader_loss_max_ms = bound.as_millis() as u64;
        timing.catchup_max_ms = bound.as_millis() as u64;
    }
    timing
}

fn default_whip() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.join("whip");
    bin.exists().then_some(bin)
}
