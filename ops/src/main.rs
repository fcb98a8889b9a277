//! # whip: the command line of whip fabric
//!
//! Owns the `whip` binary: argument parsing (clap), the embedded single-voter store under
//! `.whipplescript/`, cell administration, the primitive commands, benchmarks and (through
//! `whip-engine`) the WhippleScript commands, the servers' settings (flags > `WHIP_…`
//! variables > `whip.toml` > defaults: [`config`]) and shell completions. Exit codes: 0 ok,
//! 1 failure, 2 usage. Human output has one shape ([`output`]): listings are aligned tables
//! with a header row, times are RFC 3339 in UTC, progress goes to stderr ([`progress`]).
//! `whip mcp` serves the same primitives to an agent's MCP client over stdio ([`mcp`]): it
//! acts as the CLI's agent, proven by its token, and no tool argument names who acts.
//!
//! Must never: implement coordination semantics (that is `whip-board`) or Raft (that is
//! `whip-cell`); it only parses, connects and prints.

mod agent;
mod backup;
mod bench;
mod boardcmd;
mod broker;
mod cellcmd;
mod config;
mod connect;
mod coord;
mod executorcmd;
mod fabriccmd;
mod issue;
mod kvtxn;
mod limits;
mod logging;
mod mailcmd;
mod mailtake;
mod mcp;
mod observe;
mod operate;
mod output;
mod paths;
mod primitives;
mod progress;
#[cfg(test)]
mod readme_commands;
mod rotate;
mod run;
mod security;
mod signals;
mod snapshot;
mod structures;
mod votecmd;
mod watch;
mod workcmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// whip fabric: shared state for agent teams that stays correct under crashes and partitions.
#[derive(Parser, Debug)]
#[command(name = "whip", version, about)]
struct Cli {
    /// Talk to this cell member (`host:port`, or several comma-separated) instead of the
    /// embedded store.
    #[arg(long, global = true, env = "WHIP_CELL")]
    cell: Option<String>,
    /// Directory of the embedded store (default `.whipplescript`).
    #[arg(long, global = true, env = "WHIPPLESCRIPT_STORE")]
    store: Option<PathBuf>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    json: bool,
    /// Act as this agent (team and board calls); its token lives in the credentials file.
    #[arg(long, global = true, env = "WHIP_AGENT")]
    agent: Option<String>,
    /// Plaintext instead of TLS, for servers and clients (refused off loopback).
    #[arg(long, global = true, env = "WHIP_INSECURE")]
    insecure: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run, join and inspect cells.
    #[command(subcommand)]
    Cell(cellcmd::CellCommand),
    /// Run a node hosting many cells of a fabric.
    #[command(subcommand)]
    Node(fabriccmd::NodeCommand),
    /// Bootstrap and inspect a multi-cell fabric; move and split ranges.
    #[command(subcommand)]
    Fabric(fabriccmd::FabricCommand),
    /// Election leases that publish endpoints: campaign, proclaim, renew, resign, observe.
    #[command(subcommand)]
    Election(coord::ElectionCommand),
    /// Schedules whose every due time fires once fabric-wide: fire, watch.
    #[command(subcommand)]
    Schedule(coord::ScheduleCommand),
    /// The CLI's agent identity (`--agent`, `WHIP_AGENT`): `whip agent register`.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Credentials of this user's cluster CA: `whip credential issue --role node --out FILE`.
    #[command(subcommand)]
    Credential(CredentialCommand),
    /// Teams: create (you supervise), join, role, dissolve.
    #[command(subcommand)]
    Team(boardcmd::TeamCommand),
    /// Typed mail: send (inform, ask, reply, directive), inbox, drain, reply, grant,
    /// revoke, quarantine.
    #[command(subcommand)]
    Mail(mailcmd::MailCommand),
    /// Collective decisions of a team: open, cast, close, show, list (coordinators vote).
    #[command(subcommand)]
    Vote(votecmd::VoteCommand),
    /// Task boards: post, claim, complete, fail, extend, list, dlq, redrive, stats, mailbox.
    #[command(subcommand)]
    Board(boardcmd::BoardCommand),
    /// A team's JSON document (manifest) with versioned compare-and-set.
    #[command(subcommand)]
    Doc(structures::DocCommand),
    /// Path reservations of a repository: reserve (exclusive or shared, with a TTL and a
    /// fence), release, list.
    #[command(subcommand)]
    Paths(paths::PathsCommand),
    /// Git hooks refusing a commit or push that touches another agent's exclusive
    /// reservation: install, check.
    #[command(subcommand)]
    Guard(paths::GuardCommand),
    /// A team's columnar frame: one row per file, build/test status columns.
    #[command(subcommand)]
    Frame(structures::FrameCommand),
    /// A team's shared artifacts: name → reference.
    #[command(subcommand)]
    Artifacts(structures::ArtifactsCommand),
    /// Team signals: publish, subscribe (follow).
    #[command(subcommand)]
    Signal(structures::SignalCommand),
    /// Per-path edit locks and the repository run lock (fenced, with a TTL).
    #[command(subcommand)]
    Lock(structures::LockCommand),
    /// CAS keys with versions and fences.
    #[command(subcommand)]
    Kv(primitives::KvCommand),
    /// Leases with slots, TTL, re-entry and waiting.
    #[command(subcommand)]
    Lease(primitives::LeaseCommand),
    /// Counters with a cap per period.
    #[command(subcommand)]
    Counter(primitives::CounterCommand),
    /// The live work registry: register, renew, signal, revoke, list, limits.
    #[command(subcommand)]
    Work(workcmd::WorkCommand),
    /// Append-only partitioned ledgers: `whip ledger NAME [--partition P]`, `append`,
    /// `list NAME` (any ledger, also one named `audit`), `audit` (the registry's
    /// control-plane actions, as `whip work audit`).
    Ledger(run::LedgerArgs),
    /// Serve the fabric's tools to an agent's MCP client over stdio, acting as `--agent`
    /// (its token in the credentials file) against `--cell` or the embedded store.
    Mcp,
    /// Measure throughput and latency against a cell.
    Bench(bench::BenchArgs),
    /// Work items of the builtin tracker: `new|list|show|ready|claim|renew|release|assign|finish`.
    #[command(subcommand)]
    Issue(issue::IssueCommand),
    /// Check WhippleScript programs.
    Check(CheckArgs),
    /// The compute-plane sidecar that runs `exec` effects (`whip-executor/1`); needs
    /// `WHIP_EXECUTOR_TOKEN`. Workers reach it through `WHIP_EXECUTOR_URL`.
    Executor(executorcmd::ExecutorArgs),
    /// The model broker: keeps provider keys and injects them into workers' model calls
    /// (`whip broker --bind ADDR`, `secret set NAME`, `token issue --worker W`).
    Broker(broker::BrokerArgs),
    /// The servers' settings: `whip config show [cell] [--config FILE] [--data DIR]`.
    #[command(subcommand)]
    Config(Box<config::ConfigCommand>),
    /// Print a shell completion script: `whip completions bash|zsh|fish` (also elvish,
    /// powershell). Bash: `source <(whip completions bash)`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Fault and linearizability harness (runs `whip-chaos` next to this binary; as root).
    #[command(disable_help_flag = true)]
    Chaos {
        /// Arguments passed to `whip-chaos` (`whip chaos --help` lists them).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    #[command(flatten)]
    Engine(run::EngineCommand),
}

/// `whip agent …`.
#[derive(Subcommand, Debug)]
enum AgentCommand {
    /// Register the agent (idempotent) and keep its token in the credentials file.
    Register,
    /// Enroll NAME as a sub-agent of `--agent` (you become its parent: the authority that
    /// may send it directives); its token goes into the credentials file.
    Enroll { name: String },
}

/// `whip credential …`.
#[derive(Subcommand, Debug)]
enum CredentialCommand {
    /// Issue a node or operator credential (JSON with CA, certificate and key; 0600).
    Issue {
        /// `node` or `operator`.
        #[arg(long)]
        role: String,
        /// Where to write it (must not exist).
        #[arg(long)]
        out: PathBuf,
    },
}

/// `whip check FILE… [--root W] [--explain]`.
#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// Programs to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The workflow to run when a file declares several.
    #[arg(long)]
    root: Option<String>,
    /// Print the lowered program (what `then` and `after` became).
    #[arg(long, alias = "ir")]
    explain: bool,
}

/// Settings every command shares.
#[derive(Clone, Debug)]
pub(crate) struct Global {
    pub(crate) cell: Option<String>,
    pub(crate) store: Option<PathBuf>,
    pub(crate) json: bool,
    pub(crate) agent: Option<String>,
    pub(crate) insecure: bool,
    /// The compute plane for `exec` effects (`WHIP_EXECUTOR_URL`, `WHIP_EXECUTOR_TOKEN`).
    pub(crate) executor: Option<whip_engine::executor::ExecutorConfig>,
    /// How this process's engines run (`WHIPPLESCRIPT_WORKER_CONCURRENCY`,
    /// `WHIPPLESCRIPT_RUN_LEASE_MS`).
    pub(crate) engine: whip_engine::runtime::EngineConfig,
    /// Which layer (flag, environment, default) each argument of the command came from: the
    /// servers' settings merge them with the config file (`config.rs`).
    pub(crate) arg_sources: config::ArgSources,
}

fn main() -> ExitCode {
    // Everything whip writes (stores, data directories, credentials, sockets) is this
    // user's alone, whatever the inherited umask.
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe { libc::umask(0o077) };
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    logging::init();
    let engine = match engine_config() {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let global = Global {
        cell: cli.cell,
        store: cli.store,
        json: cli.json,
        agent: cli.agent,
        insecure: cli.insecure,
        executor: executor_config(),
        engine,
        arg_sources: config::arg_sources(&matches),
    };
    // The commands that need no runtime and no client credentials.
    match cli.command {
        Command::Check(args) => check(&global, args),
        Command::Chaos { args } => chaos(&global, args),
        Command::Completions { shell } => completions(shell),
        Command::Config(cmd) => {
            config::run(&global, *cmd).unwrap_or_else(|e| output::fail(&global, &e))
        }
        command => run_async(global, command),
    }
}

/// Run `command` on a tokio runtime with this process's client credentials. SIGINT or
/// SIGTERM ends it within [`limits::STOP_GRACE_MS`]: a command that watches for the signal
/// gives back what it waited for and ends itself; any other is dropped at the grace's end
/// (exit 130). Servers end themselves, flushing as they go.
fn run_async(global: Global, command: Command) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => return output::fail(&global, &anyhow::anyhow!("cannot start runtime: {e}")),
    };
    if let Err(e) = security::check_insecure(&global) {
        return output::fail(&global, &e);
    }
    security::install_client_default(&global);
    let serves = serves_until_stopped(&command);
    let result = runtime.block_on(async {
        signals::watch();
        let work = dispatch(&global, command);
        match serves {
            true => work.await,
            false => signals::interruptible(work).await,
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(code) => code,
        Err(e) => output::fail(&global, &e),
    }
}

/// Servers, which end themselves on a stop signal (their shutdown may take longer than the
/// grace: storage flushes, Raft stops).
fn serves_until_stopped(command: &Command) -> bool {
    matches!(
        command,
        Command::Cell(cellcmd::CellCommand::Serve(_) | cellcmd::CellCommand::Dev { .. })
            | Command::Node(fabriccmd::NodeCommand::Serve(_))
            | Command::Executor(_)
            | Command::Mcp
            | Command::Broker(_)
    )
}

/// The command's work, on the runtime.
async fn dispatch(global: &Global, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Cell(cmd) => cellcmd::run(global, cmd).await,
        Command::Node(cmd) => fabriccmd::node(global, cmd).await,
        Command::Fabric(cmd) => fabriccmd::fabric(global, cmd).await,
        Command::Election(cmd) => coord::election(global, cmd).await,
        Command::Agent(AgentCommand::Register) => agent::register(global).await,
        Command::Agent(AgentCommand::Enroll { name }) => agent::enroll_cmd(global, &name).await,
        Command::Mail(cmd) => mailcmd::mail(global, cmd).await,
        Command::Vote(cmd) => votecmd::vote(global, cmd).await,
        Command::Credential(CredentialCommand::Issue { role, out }) => {
            security::issue(global, &role, &out)
        }
        Command::Team(cmd) => boardcmd::team(global, cmd).await,
        Command::Board(cmd) => boardcmd::board(global, cmd).await,
        Command::Doc(cmd) => structures::doc(global, cmd).await,
        Command::Paths(cmd) => paths::paths(global, cmd).await,
        Command::Guard(cmd) => paths::guard(global, cmd).await,
        Command::Frame(cmd) => structures::frame(global, cmd).await,
        Command::Artifacts(cmd) => structures::artifacts(global, cmd).await,
        Command::Signal(cmd) => structures::signal(global, cmd).await,
        Command::Lock(cmd) => structures::lock(global, cmd).await,
        Command::Schedule(cmd) => coord::schedule(global, cmd).await,
        Command::Kv(cmd) => primitives::kv(global, cmd).await,
        Command::Lease(cmd) => primitives::lease(global, cmd).await,
        Command::Counter(cmd) => primitives::counter(global, cmd).await,
        Command::Ledger(args) => run::ledger(global, args).await,
        Command::Work(cmd) => workcmd::work(global, cmd).await,
        Command::Engine(cmd) => run::run(global, cmd).await,
        Command::Issue(cmd) => issue::run(global, cmd).await,
        Command::Mcp => mcp::run(global).await,
        Command::Bench(args) => bench::run(global, args).await,
        Command::Executor(args) => executorcmd::serve(global, args).await,
        Command::Broker(args) => broker::run(global, args).await,
        Command::Check(_)
        | Command::Chaos { .. }
        | Command::Completions { .. }
        | Command::Config(_) => unreachable!("handled in main"),
    }
}

/// The executor workers use, read once from the environment: `WHIP_EXECUTOR_URL` (unset or
/// empty: none) and `WHIP_EXECUTOR_TOKEN`.
fn executor_config() -> Option<whip_engine::executor::ExecutorConfig> {
    let url = std::env::var("WHIP_EXECUTOR_URL")
        .ok()
        .filter(|u| !u.is_empty())?;
    let token = std::env::var("WHIP_EXECUTOR_TOKEN").unwrap_or_default();
    Some(whip_engine::executor::ExecutorConfig { url, token })
}

/// How engines run, read once from the environment: `WHIPPLESCRIPT_WORKER_CONCURRENCY`
/// (effects a worker pass runs at once, at least 1) and `WHIPPLESCRIPT_RUN_LEASE_MS` (a
/// run's lease); unset or empty keeps the engine's default, anything else that is not a
/// number is refused.
fn engine_config() -> std::result::Result<whip_engine::runtime::EngineConfig, String> {
    let number = |name: &str| -> std::result::Result<Option<u64>, String> {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => match v.parse::<u64>() {
                Ok(n) if n > 0 => Ok(Some(n)),
                _ => Err(format!(
                    "{name} must be a whole number of at least 1, not `{v}`"
                )),
            },
            _ => Ok(None),
        }
    };
    let mut config = whip_engine::runtime::EngineConfig::default();
    if let Some(n) = number("WHIPPLESCRIPT_WORKER_CONCURRENCY")? {
        config.concurrency = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(ms) = number("WHIPPLESCRIPT_RUN_LEASE_MS")? {
        config.run_lease_ms = ms;
    }
    Ok(config)
}

fn check(global: &Global, args: CheckArgs) -> ExitCode {
    let options = whip_engine::cli::CheckOptions {
        files: args.files,
        root: args.root,
        json: global.json,
        explain: args.explain,
    };
    let code = whip_engine::cli::check(&options, &mut std::io::stdout(), &mut std::io::stderr());
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// `whip completions SHELL`: the completion script on stdout.
fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "whip", &mut script);
    output::line(String::from_utf8_lossy(&script).trim_end());
    ExitCode::SUCCESS
}

/// Run the `whip-chaos` harness found next to this executable with `args` (and `--json`).
fn chaos(global: &Global, mut args: Vec<String>) -> ExitCode {
    let exe = std::env::current_exe().ok();
    let harness = exe
        .as_deref()
        .and_then(std::path::Path::parent)
        .map(|d| d.join("whip-chaos"));
    let Some(harness) = harness.filter(|h| h.exists()) else {
        let e = anyhow::anyhow!(
            "whip-chaos not found next to whip: build it with `cargo build -p whip-tests`"
        );
        return output::fail(global, &e);
    };
    if global.json {
        args.push("--json".into());
    }
    match std::process::Command::new(&harness).args(&args).status() {
        Ok(status) => ExitCode::from(status.code().map_or(1, |c| u8::try_from(c).unwrap_or(1))),
        Err(e) => output::fail(
            global,
            &anyhow::anyhow!("cannot run {}: {e}", harness.display()),
        ),
    }
}
