//! WhippleScript commands: `whip run|start|step|worker|instances|status|log|facts|effects|
//! runs|diagnostics|pause|resume|cancel|retry|leases|counters|ledger NAME`. Each parses,
//! connects (embedded store or `--cell`), calls the engine and prints one line per row
//! (LANGUAGE.md §6 shapes) or JSON with `--json`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use whip_cell::CellClient;
use whip_engine::limits::FIXTURE_TURN_MS_MAX;
use whip_engine::runtime::state::Status;
use whip_engine::runtime::{Engine, InstanceRow, Owner, Program, RunReport, RuntimeError, State};
use whip_fabric::FabricClient;

use crate::Global;
use crate::connect::session;
use crate::output;

/// `whip evidence …`.
#[derive(Subcommand, Debug)]
pub(crate) enum EvidenceCommand {
    /// Effects, runs and provider diagnostics of one instance (no arguments, no secrets).
    Instance { id: String },
}

/// `whip evidence instance ID`, or `whip evidence ID` as the seed's incident loop runs it.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct EvidenceArgs {
    #[command(subcommand)]
    command: Option<EvidenceCommand>,
    /// The instance.
    id: Option<String>,
}

/// The engine's subcommands (flattened into the top-level command list).
#[derive(Subcommand, Debug)]
pub(crate) enum EngineCommand {
    /// Start an instance of a program and drive it until idle (`--wait`: until terminal).
    Run(RunArgs),
    /// Create an instance (seed inputs and tables) without stepping it.
    Start(StartArgs),
    /// Evaluate ready rules of an instance and commit their firings.
    Step { id: String },
    /// Run ready effects of one instance, or (`--all`) work every instance as a daemon.
    Worker(WorkerArgs),
    /// Instances with their status, in id order (filtered by `--status`, `--workflow`,
    /// `--owner`; at most `--limit`).
    Instances(InstancesArgs),
    /// One instance's status and counts.
    Status { id: String },
    /// An instance's event log.
    Log { id: String },
    /// An instance's facts.
    Facts { id: String },
    /// An instance's effects.
    Effects { id: String },
    /// An instance's runs (worker attempts at effects).
    Runs { id: String },
    /// Failures and blocks of an instance's effects.
    Diagnostics { id: String },
    /// An instance's lifecycle, event by event; `--check` verifies it against the rules
    /// (`conformance=ok` or `violation at #N: …`, exit 1).
    Trace {
        id: String,
        #[arg(long)]
        check: bool,
    },
    /// Evidence for an incident report: `whip --json evidence [instance] ID`.
    Evidence(EvidenceArgs),
    /// Block new steps and effect starts.
    Pause { id: String },
    /// Undo `pause`.
    Resume { id: String },
    /// End an instance (terminal): frees its leases and cancels its open effects.
    Cancel { id: String },
    /// Queue a failed or timed-out effect again with a new attempt.
    Retry { id: String, effect: String },
    /// Capture a coherent cut of an instance: its event-log position and its workspace
    /// files (`--cut-id` names it).
    Checkpoint {
        id: String,
        #[arg(long)]
        cut_id: Option<String>,
    },
    /// Rewind an instance to a cut, append-only: checkpoints the head first, releases the
    /// leases and claims taken after the cut, keeps counter spends and ledger entries.
    Restore { id: String, cut: String },
    /// Move a running instance to a new version of its program (same root workflow):
    /// `--dry-run` prints the compatibility report, `--cancel keep|queued|running` applies
    /// it (what happens to the old version's queued and running work).
    Revise(crate::operate::ReviseArgs),
    /// Reconcile runs whose worker stopped: an `exec` from the executor's evidence, or as
    /// an uncertain failure (`runtime.recovery_uncertain`) when there is none; idempotent
    /// effects queued again. Nothing is run again silently.
    Recover { id: String },
    /// Send a message to an instance on its channel CHANNEL and admit it at once as a
    /// `message.received` fact (`when message from CHANNEL`): a local channel's inbox line
    /// or fabric mail.
    Message(MessageArgs),
    /// Live leases and their holders (instances or any other holder):
    /// `<owner>::<lease>/<key> held by <holder> (expires …)`.
    Leases { name: Option<String> },
    /// Counters: `<owner>::<counter>/<key> consumed=<n> period=<p>`.
    Counters { name: Option<String> },
}

/// `whip message ID --channel C --text T [--by S] [--program F] [--directive]`.
#[derive(clap::Args, Debug)]
pub(crate) struct MessageArgs {
    id: String,
    #[arg(long)]
    channel: String,
    #[arg(long)]
    text: String,
    /// A directive (delivered only from the instance's authority: its owner's parent
    /// entries' owners or the operator) instead of an inform.
    #[arg(long)]
    directive: bool,
    /// The sender label of a local channel's line (refused on a fabric channel, whose
    /// sender is who you are).
    #[arg(long)]
    by: Option<String>,
    /// The program file the instance runs: a different source is refused.
    #[arg(long)]
    program: Option<PathBuf>,
}

impl EngineCommand {
    /// Commands that only read the store.
    fn reads_only(&self) -> bool {
        use EngineCommand::*;
        matches!(
            self,
            Instances(_)
                | Status { .. }
                | Log { .. }
                | Facts { .. }
                | Effects { .. }
                | Runs { .. }
                | Diagnostics { .. }
                | Trace { .. }
                | Evidence(_)
                | Leases { .. }
                | Counters { .. }
        )
    }
}

#[derive(Args, Debug)]
pub(crate) struct StartArgs {
    /// The program.
    file: PathBuf,
    /// The workflow to start when the file declares several.
    #[arg(long)]
    root: Option<String>,
    /// Input payload as a JSON object (`{"name": value}`).
    #[arg(long)]
    input: Option<String>,
}

/// The provider that runs agent turns and coercions (`agent.tell`, `schema.coerce`).
#[derive(Args, Debug, Clone)]
pub(crate) struct ProviderArgs {
    /// The provider (the deterministic fixture; `owned` agents run on it too).
    #[arg(long, value_enum, default_value_t = ProviderChoice::Fixture)]
    provider: ProviderChoice,
    /// Force every provider effect to fail.
    #[arg(long, conflicts_with_all = ["timeout", "cancel"])]
    fail: bool,
    /// Force every provider effect to time out.
    #[arg(long, conflicts_with = "cancel")]
    timeout: bool,
    /// Force every provider effect to be cancelled.
    #[arg(long)]
    cancel: bool,
    /// Each fixture agent turn takes this long before it answers, in ms (at most 60000):
    /// turns then overlap visibly, and an agent's capacity holds the rest back.
    #[arg(long, value_name = "MS", default_value_t = 0,
        value_parser = clap::value_parser!(u64).range(0..=FIXTURE_TURN_MS_MAX))]
    fixture_turn_ms: u64,
    /// Provider bindings for coercions over HTTP (`{"bindings": [{"provider_id",
    /// "provider_kind", "model", "base_url", "credentials_ref"}]}`). With it, or with
    /// `WHIPPLESCRIPT_COERCE_PROVIDER` set, coercions go to a model (through the broker
    /// when `WHIP_MODEL_BROKER_URL` is set); agent turns stay on the fixture.
    #[arg(long, value_name = "FILE")]
    provider_config: Option<PathBuf>,
}

/// The providers `--provider` names.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ProviderChoice {
    /// In process, no subprocess, the same answer every time (LANGUAGE-AGENTS.md §4.1).
    Fixture,
}

impl ProviderArgs {
    /// The provider these flags (and the coercion and broker variables) choose.
    fn provider(&self) -> Result<Arc<dyn whip_engine::runtime::provider::Provider>> {
        use whip_engine::runtime::egress::{EgressConfig, HttpProvider};
        use whip_engine::runtime::provider::{FixtureProvider, Forced};
        let forced = match (self.fail, self.timeout, self.cancel) {
            (true, _, _) => Some(Forced::Fail),
            (_, true, _) => Some(Forced::Timeout),
            (_, _, true) => Some(Forced::Cancel),
            _ => None,
        };
        let fixture = match self.provider {
            ProviderChoice::Fixture => {
                FixtureProvider::new(forced).with_turn_ms(self.fixture_turn_ms)
            }
        };
        let config = EgressConfig {
            env: coerce_env()?,
            bindings: self.bindings()?,
            broker: broker_config()?,
        };
        if config.env.provider.is_none() && config.bindings.is_empty() {
            return Ok(Arc::new(fixture));
        }
        Ok(Arc::new(HttpProvider::new(fixture, config)))
    }

    fn bindings(&self) -> Result<Vec<whip_engine::runtime::egress::Binding>> {
        let Some(path) = &self.provider_config else {
            return Ok(Vec::new());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let file: whip_engine::runtime::egress::Bindings = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a provider config", path.display()))?;
        Ok(file.bindings)
    }
}

/// `WHIPPLESCRIPT_COERCE_*` (LANGUAGE-AGENTS.md §4.3), read once.
fn coerce_env() -> Result<whip_engine::runtime::egress::CoerceEnv> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let number = |name: &str| -> Result<u64> {
        var(name).map_or(Ok(0), |v| {
            v.parse()
                .with_context(|| format!("{name} is not a number: {v}"))
        })
    };
    Ok(whip_engine::runtime::egress::CoerceEnv {
        provider: var("WHIPPLESCRIPT_COERCE_PROVIDER"),
        model: var("WHIPPLESCRIPT_COERCE_MODEL"),
        base_url: var("WHIPPLESCRIPT_COERCE_BASE_URL"),
        max_tokens: number("WHIPPLESCRIPT_COERCE_MAX_TOKENS")?,
        timeout_secs: number("WHIPPLESCRIPT_COERCE_TIMEOUT_SECS")?,
    })
}

/// `WHIP_MODEL_BROKER_URL` and `WHIP_MODEL_BROKER_TOKEN`: both or neither.
fn broker_config() -> Result<Option<whip_engine::runtime::egress::BrokerConfig>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (var("WHIP_MODEL_BROKER_URL"), var("WHIP_MODEL_BROKER_TOKEN")) {
        (Some(url), Some(token)) => Ok(Some(whip_engine::runtime::egress::BrokerConfig {
            url,
            token,
        })),
        (None, None) => Ok(None),
        _ => bail!("WHIP_MODEL_BROKER_URL and WHIP_MODEL_BROKER_TOKEN go together"),
    }
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    start: StartArgs,
    #[command(flatten)]
    providers: ProviderArgs,
    /// Sleep until the next timer or lease-wait deadline and continue until terminal.
    #[arg(long)]
    wait: bool,
}

#[derive(Args, Debug)]
pub(crate) struct InstancesArgs {
    /// Only instances in this status.
    #[arg(long, value_enum)]
    status: Option<InstanceStatus>,
    /// Only instances of this workflow.
    #[arg(long)]
    workflow: Option<String>,
    /// Only instances this agent owns (`operator`: the operator's).
    #[arg(long)]
    owner: Option<String>,
    /// At most this many.
    #[arg(long)]
    limit: Option<usize>,
}

/// The statuses `whip instances --status` filters on.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum InstanceStatus {
    Running,
    Paused,
    Completed,
    Failed,
    Cancelled,
}

impl InstanceStatus {
    fn status(self) -> Status {
        match self {
            InstanceStatus::Running => Status::Running,
            InstanceStatus::Paused => Status::Paused,
            InstanceStatus::Completed => Status::Completed,
            InstanceStatus::Failed => Status::Failed,
            InstanceStatus::Cancelled => Status::Cancelled,
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct WorkerArgs {
    /// The instance to work (omit with `--all`).
    id: Option<String>,
    /// Step and work every instance with ready work, until stopped.
    #[arg(long)]
    all: bool,
    /// With `--all`: one pass over every instance, then exit.
    #[arg(long)]
    once: bool,
    /// With `--all`: stop after this long (e.g. 30s).
    #[arg(long)]
    duration: Option<String>,
    #[command(flatten)]
    providers: ProviderArgs,
}

/// `whip ledger NAME [--partition P]` (the view) next to `whip ledger append|list`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct LedgerArgs {
    #[command(subcommand)]
    pub(crate) command: Option<crate::primitives::LedgerCommand>,
    /// Ledger name: the ledgers programs declared with that name and the `shared` one
    /// (`whip ledger append`'s); omitted, every ledger a program declared. A ledger named
    /// like a subcommand (`audit`, `list`, `append`) is read with `whip ledger list NAME`.
    pub(crate) name: Option<String>,
    /// Only this partition.
    #[arg(long)]
    pub(crate) partition: Option<String>,
}

pub(crate) type Eng = Engine<CellClient>;

/// An engine on `client` with the compute plane the binary was configured with.
pub(crate) fn engine(global: &Global, client: &Arc<CellClient>) -> Eng {
    // `local` channels write beside the embedded store; against a cell they are blocked.
    let local = match global.cell {
        None => Some(
            global
                .store
                .clone()
                .unwrap_or_else(|| ".whipplescript".into()),
        ),
        Some(_) => None,
    };
    Engine::new(Arc::clone(client))
        .with_config(global.engine)
        .with_executor(global.executor.clone())
        .with_local_messaging(local)
}

pub(crate) fn engine_error(e: RuntimeError) -> anyhow::Error {
    anyhow!("{e}")
}

/// Run one engine command.
pub(crate) async fn run(global: &Global, cmd: EngineCommand) -> Result<ExitCode> {
    if let EngineCommand::Run(args) = cmd {
        return run_program(global, args).await;
    }
    let session = if cmd.reads_only() {
        crate::connect::read_session(global).await?
    } else {
        session(global).await?
    };
    let session = crate::agent::act_as_flag(global, session).await?;
    let mut engine = engine(global, &session.client);
    if let EngineCommand::Worker(args) = &cmd {
        engine = engine.with_provider(args.providers.provider()?);
    }
    let result = dispatch(global, &engine, cmd).await;
    // What the command finished leaves the registry before the process goes.
    engine.settle_removals().await;
    session.close().await;
    result
}

/// `whip ledger [NAME] [--partition P]`.
pub(crate) async fn ledger(global: &Global, args: LedgerArgs) -> Result<ExitCode> {
    if let Some(cmd) = args.command {
        return crate::primitives::ledger(global, cmd).await;
    }
    let session = crate::connect::read_session(global).await?;
    let session = crate::agent::act_as_flag(global, session).await?;
    let engine = Engine::new(Arc::clone(&session.client));
    let result = ledger_view(global, &engine, args.name, args.partition).await;
    session.close().await;
    result
}

fn load_program(args: &StartArgs) -> Result<(Program, Value)> {
    let program = Program::load(&args.file, args.root.as_deref()).map_err(|e| anyhow!("{e}"))?;
    let input = match &args.input {
        None => Value::Null,
        Some(text) => {
            let v: Value = serde_json::from_str(text)
                .map_err(|e| anyhow!("--input is not valid JSON: {e}"))?;
            if !v.is_object() {
                bail!("--input must be a JSON object");
            }
            v
        }
    };
    Ok((program, input))
}

/// Reconnects `whip run` makes when the embedded store's holder goes away under it.
const RECONNECTS_MAX: usize = 50;

/// `whip run`: start, then drive. A process that reached the embedded store through
/// another process's socket takes the store over when that process exits, and goes on.
async fn run_program(global: &Global, args: RunArgs) -> Result<ExitCode> {
    let (program, input) = load_program(&args.start)?;
    let source = program.source.clone();
    let mut session = crate::agent::act_as_flag(global, session(global).await?).await?;
    let provider = args.providers.provider()?;
    let mut engine = engine(global, &session.client).with_provider(provider.clone());
    let started = engine.add_program(program);
    let id = whip_engine::runtime::fresh_id("ins_");
    let mut reconnects = 0;
    // A retried run is safe: the start commit only applies while the instance is absent,
    // and a retry drives what is stored.
    loop {
        let run = engine.run_id(&started, input.clone(), Some(id.clone()), args.wait);
        match run.await {
            Ok(report) => {
                // A finished instance's entry is out of the registry when this reports.
                engine.settle_removals().await;
                session.close().await;
                return Ok(print_run(global, &report));
            }
            Err(RuntimeError::Fabric(e))
                if session.is_guest(global) && reconnects < RECONNECTS_MAX =>
            {
                tracing::debug!(error = %e, "store holder went away; reconnecting");
                reconnects += 1;
                session.close().await;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                session = session_retry(global).await?;
                engine = self::engine(global, &session.client).with_provider(provider.clone());
                let program = Program::check(source.clone()).map_err(|e| anyhow!("{e}"))?;
                engine.add_program(program);
            }
            Err(e) => {
                session.close().await;
                return Err(engine_error(e));
            }
        }
    }
}

pub(crate) async fn session_retry(global: &Global) -> Result<crate::connect::Session> {
    let mut last = None;
    for _ in 0..20 {
        match session(global).await {
            Ok(s) => return crate::agent::act_as_flag(global, s).await,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Err(last.unwrap_or_else(|| anyhow!("cannot reopen the store")))
}

async fn dispatch(global: &Global, engine: &Eng, cmd: EngineCommand) -> Result<ExitCode> {
    match cmd {
        EngineCommand::Run(_) => unreachable!("handled by run_program"),
        EngineCommand::Start(args) => {
            let (program, input) = load_program(&args)?;
            let program = engine.add_program(program);
            let id = engine
                .start(&program, None, input, None, None)
                .await
                .map_err(engine_error)?;
            print(global, json!({"id": id}), vec![format!("started {id}")])
        }
        EngineCommand::Step { id } => {
            let rounds = engine.step(&id).await.map_err(engine_error)?;
            let st = engine.load(&id).await.map_err(engine_error)?.state;
            let status = st.header.status;
            let text = format!("{id} rounds={rounds} status={status}");
            print(
                global,
                json!({"id": id, "rounds": rounds, "status": status}),
                vec![text],
            )
        }
        EngineCommand::Worker(args) => worker(global, engine, args).await,
        EngineCommand::Instances(args) => instances(global, engine, args).await,
        EngineCommand::Status { id } => status(global, engine, &id).await,
        EngineCommand::Log { id } => log(global, engine, &id).await,
        EngineCommand::Facts { id } => facts(global, engine, &id).await,
        EngineCommand::Effects { id } => effects(global, engine, &id).await,
        EngineCommand::Runs { id } => runs(global, engine, &id).await,
        EngineCommand::Diagnostics { id } => diagnostics(global, engine, &id).await,
        EngineCommand::Trace { id, check } => trace(global, engine, &id, check).await,
        EngineCommand::Evidence(args) => evidence(global, engine, args).await,
        EngineCommand::Pause { id } => transition(global, engine, &id, Status::Paused).await,
        EngineCommand::Resume { id } => transition(global, engine, &id, Status::Running).await,
        EngineCommand::Cancel { id } => transition(global, engine, &id, Status::Cancelled).await,
        EngineCommand::Message(args) => message(global, engine, args).await,
        EngineCommand::Retry { id, effect } => {
            let seq = engine.retry(&id, &effect).await.map_err(engine_error)?;
            let text = format!("{id} updated at event #{seq}");
            print(
                global,
                json!({"id": id, "effect": effect, "event": seq}),
                vec![text],
            )
        }
        EngineCommand::Checkpoint { id, cut_id } => {
            crate::operate::checkpoint(global, engine, &id, cut_id.as_deref()).await
        }
        EngineCommand::Restore { id, cut } => {
            crate::operate::restore(global, engine, &id, &cut).await
        }
        EngineCommand::Revise(args) => crate::operate::revise(global, engine, args).await,
        EngineCommand::Recover { id } => crate::operate::recover(global, engine, &id).await,
        EngineCommand::Leases { name } => leases(global, engine, name).await,
        EngineCommand::Counters { name } => counters(global, engine, name).await,
    }
}

/// `whip evidence [instance] ID`: effects, runs and provider diagnostics, pretty JSON.
async fn evidence(global: &Global, engine: &Eng, args: EvidenceArgs) -> Result<ExitCode> {
    let id = match (args.command, args.id) {
        (Some(EvidenceCommand::Instance { id }), _) | (None, Some(id)) => id,
        (None, None) => bail!("`whip evidence` needs an instance id"),
    };
    let st = state_of(engine, &id).await?;
    let evidence = whip_engine::runtime::trace::evidence(&st);
    let text = serde_json::to_string_pretty(&evidence)?;
    print(global, evidence, vec![text])
}

pub(crate) fn print(global: &Global, value: Value, lines: Vec<String>) -> Result<ExitCode> {
    if global.json {
        output::json(&value);
    } else {
        for l in lines {
            output::line(&l);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_run(global: &Global, r: &RunReport) -> ExitCode {
    let terminal = r
        .terminal
        .as_ref()
        .map(|(n, p)| json!({"name": n, "payload": p}));
    if global.json {
        output::json(&json!({
            "id": r.id, "workflow": r.workflow, "iterations": r.iterations,
            "status": r.status, "terminal": terminal, "reason": r.reason,
            "blocked": r.blocked,
        }));
    } else {
        output::line(&format!("run {}", r.id));
        output::line(&format!("workflow {}", r.workflow));
        output::line(&format!("iterations {}", r.iterations));
        output::line(&status_line(r));
        if let Some((name, payload)) = &r.terminal {
            output::line(&format!("{name} {payload}"));
        }
        if let Some(line) = idle_line(r) {
            output::line(&line);
            for b in &r.blocked {
                output::line(&blocked_detail_line(b));
            }
        }
    }
    if r.status == Status::Failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `status S`, and for a run that went idle short of a terminal with effects blocked
/// (LANGUAGE-AGENTS.md §6): `status running (idle, not terminal — 1 blocked effect; run
/// \`whip effects ID\` for detail)`.
fn status_line(r: &RunReport) -> String {
    if r.terminal.is_some() || r.blocked.is_empty() {
        return format!("status {}", r.status);
    }
    let n = r.blocked.len();
    let effects = if n == 1 { "effect" } else { "effects" };
    format!(
        "status {} (idle, not terminal — {n} blocked {effects}; run `whip effects {}` for \
         detail)",
        r.status, r.id
    )
}

/// `  x000002 agent.tell blocked_by_capacity: agent \`w\` capacity exhausted (1/1 running)`
/// under `whip run`'s idle status (LANGUAGE-AGENTS.md §6).
fn blocked_detail_line(b: &whip_engine::runtime::BlockedEffect) -> String {
    let detail = b.policy_block.as_ref().map_or("", |p| p.detail.as_str());
    format!("  {} {} {}: {detail}", b.id, b.kind, b.state.code())
}

/// `idle, blocked: x000001 exec provider_config, …` when the run stopped short of a terminal
/// with effects blocked (id, kind, the reason's category, or the block itself without one).
fn idle_line(r: &RunReport) -> Option<String> {
    if r.terminal.is_some() || r.blocked.is_empty() {
        return None;
    }
    let effects: Vec<String> = r
        .blocked
        .iter()
        .map(|b| {
            let reason = b
                .policy_block
                .as_ref()
                .map_or(b.state.code(), |p| p.category.code());
            format!("{} {} {reason}", b.id, b.kind)
        })
        .collect();
    Some(format!("idle, blocked: {}", effects.join(", ")))
}

/// `YYYY-MM-DD HH:MM:SS` in local time: the one time shape LANGUAGE.md §6 fixes (`whip
/// leases`' `(expires …)`), kept for that seed line only; everything else prints
/// [`output::time_text`].
pub(crate) fn local_time(ms: u64) -> String {
    use chrono::TimeZone;
    chrono::Local
        .timestamp_millis_opt(ms as i64)
        .single()
        .map_or_else(
            || ms.to_string(),
            |t| t.format("%Y-%m-%d %H:%M:%S").to_string(),
        )
}

async fn worker(global: &Global, engine: &Eng, args: WorkerArgs) -> Result<ExitCode> {
    if !args.all {
        let Some(id) = args.id else {
            bail!("`whip worker` needs an instance id, or `--all`");
        };
        let pass = engine.work(&id).await.map_err(engine_error)?;
        let rounds = engine.step(&id).await.map_err(engine_error)?;
        let text = format!("{id} settled={} rounds={rounds}", pass.settled);
        return print(
            global,
            json!({"id": id, "settled": pass.settled, "rounds": rounds}),
            vec![text],
        );
    }
    let until = match &args.duration {
        Some(d) => {
            let ms = output::parse_duration_ms(d).map_err(anyhow::Error::msg)?;
            Some(std::time::Instant::now() + std::time::Duration::from_millis(ms))
        }
        None => None,
    };
    let mut total = 0;
    loop {
        let n = engine.work_all_once().await.map_err(engine_error)?;
        total += n;
        if args.once || until.is_some_and(|u| std::time::Instant::now() >= u) {
            break;
        }
        if n == 0 {
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                _ = tokio::signal::ctrl_c() => break,
            }
        }
    }
    print(
        global,
        json!({"progress": total}),
        vec![format!("worker done progress={total}")],
    )
}

/// The instances `args` selects, in id order: status and workflow from the index row, the
/// owner read for the rows that pass those.
async fn selected(engine: &Eng, args: &InstancesArgs) -> Result<Vec<InstanceRow>> {
    let mut rows = engine.instances().await.map_err(engine_error)?;
    if let Some(status) = args.status {
        rows.retain(|r| r.status == status.status());
    }
    if let Some(workflow) = &args.workflow {
        rows.retain(|r| &r.workflow == workflow);
    }
    let limit = args.limit.unwrap_or(usize::MAX);
    let Some(owner) = &args.owner else {
        rows.truncate(limit);
        return Ok(rows);
    };
    // A value, not a name: no agent may be called `operator`.
    let want = match owner.as_str() {
        "operator" => Owner::Operator,
        agent => Owner::Agent(agent.to_string()),
    };
    let mut kept = Vec::new();
    for row in rows {
        if kept.len() >= limit {
            break;
        }
        if engine.owner(&row.id).await.map_err(engine_error)? == Some(want.clone()) {
            kept.push(row);
        }
    }
    Ok(kept)
}

async fn instances(global: &Global, engine: &Eng, args: InstancesArgs) -> Result<ExitCode> {
    let rows = selected(engine, &args).await?;
    let lines = rows
        .iter()
        .map(|r| {
            format!(
                "{} {} workflow_version={} epoch={} updated={}",
                r.id,
                r.status,
                r.program,
                r.epoch,
                output::time_text(r.updated_ms)
            )
        })
        .collect::<Vec<_>>();
    let lines = match lines.is_empty() {
        true => vec!["no instances".to_string()],
        false => lines,
    };
    print(global, serde_json::to_value(&rows)?, lines)
}

async fn state_of(engine: &Eng, id: &str) -> Result<State> {
    Ok(engine.load(id).await.map_err(engine_error)?.state)
}

async fn status(global: &Global, engine: &Eng, id: &str) -> Result<ExitCode> {
    let st = state_of(engine, id).await?;
    let owner = engine.owner(id).await.map_err(engine_error)?;
    let owner = owner.as_ref().map(|o| o.name().to_string());
    let h = &st.header;
    let c = st.counts();
    let mut line = format!(
        "instance {} {} workflow={} workflow_version={} epoch={} facts={} queued_effects={} \
         blocked_effects={} running_effects={} events={}",
        h.id,
        h.status,
        h.workflow,
        h.program,
        h.epoch,
        c["facts"],
        c["queued_effects"],
        c["blocked_effects"],
        c["running_effects"],
        c["events"]
    );
    if let Some((name, payload)) = &h.terminal {
        line += &format!(" {name}={payload}");
    }
    line += &format!(" owner={}", owner.as_deref().unwrap_or("-"));
    let blocked = whip_engine::runtime::blocked_effects(&st);
    let mut lines = vec![line];
    lines.extend(blocked.iter().map(blocked_line));
    let value = json!({
        "id": h.id, "status": h.status, "owner": owner, "workflow": h.workflow,
        "workflow_version": h.program,
        "epoch": h.epoch, "counts": c, "terminal": h.terminal.as_ref()
            .map(|(n, p)| json!({"name": n, "payload": p})),
        "reason": h.reason, "updated_ms": h.updated_ms, "parent": h.parent,
        "blocked": blocked,
    });
    print(global, value, lines)
}

/// `  x000002 invoke blocked_by_capacity policy_block: { category: …, detail: "…" }`: one
/// blocked effect under `whip status`, its block as `whip effects` prints it.
fn blocked_line(b: &whip_engine::runtime::BlockedEffect) -> String {
    let mut line = format!("  {} {} {}", b.id, b.kind, b.state);
    if let Some(p) = &b.policy_block {
        line += &format!(" {p}");
    }
    line
}

async fn log(global: &Global, engine: &Eng, id: &str) -> Result<ExitCode> {
    let events = engine.events(id).await.map_err(engine_error)?;
    let lines = events
        .iter()
        .map(|e| format!("#{} {} {}", e.seq, e.kind, e.data))
        .collect();
    print(global, serde_json::to_value(&events)?, lines)
}

async fn facts(global: &Global, engine: &Eng, id: &str) -> Result<ExitCode> {
    let st = state_of(engine, id).await?;
    let lines = st
        .facts
        .values()
        .map(|f| {
            let live = if f.live { "live" } else { "consumed" };
            format!("{} {} {} {live}", f.id, f.class, f.value)
        })
        .collect();
    let rows: Vec<&whip_engine::runtime::state::Fact> = st.facts.values().collect();
    print(global, serde_json::to_value(rows)?, lines)
}

async fn effects(global: &Global, engine: &Eng, id: &str) -> Result<ExitCode> {
    let st = state_of(engine, id).await?;
    let lines = st
        .effects
        .values()
        .map(|e| {
            let mut l = format!("{} {} {} rule={}", e.id, e.kind(), e.state, e.rule);
            if let Some(b) = &e.binding {
                l += &format!(" binding={b}");
            }
            if let Some(o) = &e.output {
                l += &format!(" output={o}");
            }
            if let Some(p) = &e.policy_block {
                l += &format!(" {p}");
            }
            l
        })
        .collect();
    let rows: Vec<&whip_engine::runtime::state::Effect> = st.effects.values().collect();
    print(global, serde_json::to_value(rows)?, lines)
}

async fn runs(global: &Global, engine: &Eng, id: &str) -> Result<ExitCode> {
    let st = state_of(engine, id).await?;
    let lines = st
        .runs
        .values()
        .map(|r| {
            format!(
                "{} effect={} {} worker={} started={}",
                r.id,
                r.effect,
                r.state,
                r.worker,
                output::time_text(r.started_ms)
            )
        })
        .collect();
    let rows: Vec<&whip_engine::runtime::state::Run> = st.runs.values().collect();
    print(global, serde_json::to_value(rows)?, lines)
}

async fn diagnostics(global: &Global, engine: &Eng, id: &str) -> Result<ExitCode> {
    let st = state_of(engine, id).await?;
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    if let Some(reason) = &st.header.reason {
        rows.push(json!({"instance": id, "diagnostic": reason}));
        lines.push(format!("{id} {}: {reason}", st.header.status));
    }
    for e in st.effects.values() {
        if e.state.unsuccessful() || e.policy_block.is_some() {
            rows.push(json!({"effect": e.id, "state": e.state, "output": e.output,
                "policy_block": e.policy_block}));
            lines.push(diagnostic_line(e));
        }
    }
    if lines.is_empty() {
        lines.push("no diagnostics".into());
    }
    print(global, Value::Array(rows), lines)
}

/// `x000003 exec failed (rule build): exit code 2` or `… blocked: provider_config: …`.
fn diagnostic_line(e: &whip_engine::runtime::state::Effect) -> String {
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    let mut line = format!("{} {} {} (rule {})", e.id, e.kind(), e.state, e.rule);
    if let Some(out) = &e.output {
        let why = ["error", "reason", "message"]
            .iter()
            .find_map(|k| out.get(*k).filter(|v| !v.is_null()));
        if let Some(why) = why {
            line += &format!(": {}", text(why));
        }
    }
    if let Some(b) = &e.policy_block {
        line += &format!(" {b}");
    }
    line
}

async fn transition(global: &Global, engine: &Eng, id: &str, to: Status) -> Result<ExitCode> {
    let seq = engine.transition(id, to).await.map_err(engine_error)?;
    let text = format!("{id} updated at event #{seq}");
    print(
        global,
        json!({"id": id, "status": to, "event": seq}),
        vec![text],
    )
}

async fn leases(global: &Global, engine: &Eng, name: Option<String>) -> Result<ExitCode> {
    let views = FabricClient::lease_list(engine.fabric(), String::new())
        .await
        .context("cannot list leases")?;
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for v in views {
        let l = &v.lease;
        if l.owner == "whip" || name.as_ref().is_some_and(|n| *n != l.name) {
            continue;
        }
        for h in &v.holders {
            lines.push(format!(
                "{}::{}/{} held by {} (expires {})",
                l.owner,
                l.name,
                l.key,
                h.holder,
                local_time(h.expires_at_ms)
            ));
            rows.push(json!({"owner": l.owner, "lease": l.name, "key": l.key,
                "holder": h.holder, "fence": h.fence, "expires_at_ms": h.expires_at_ms}));
        }
    }
    if lines.is_empty() {
        lines.push("no leases held".into());
    }
    print(global, Value::Array(rows), lines)
}

async fn counters(global: &Global, engine: &Eng, name: Option<String>) -> Result<ExitCode> {
    let views = FabricClient::counter_list(engine.fabric(), String::new())
        .await
        .context("cannot list counters")?;
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for v in views {
        let c = &v.counter;
        if name.as_ref().is_some_and(|n| *n != c.name) {
            continue;
        }
        lines.push(format!(
            "{}::{}/{} consumed={} period={}",
            c.owner, c.name, c.key, v.consumed, v.period
        ));
        rows.push(json!({"owner": c.owner, "counter": c.name, "key": c.key,
            "consumed": v.consumed, "cap": v.cap, "period": v.period}));
    }
    if lines.is_empty() {
        lines.push("no counters".into());
    }
    print(global, Value::Array(rows), lines)
}

/// The ledgers `whip ledger [NAME]` shows: those the stored programs declared (all, or
/// those named NAME) and, for a NAME, the `shared` ledger of that name (what
/// `whip ledger append` writes by default), which no program needs to declare.
async fn viewed_ledgers(engine: &Eng, name: Option<&str>) -> Result<Vec<(String, String)>> {
    let mut ledgers = engine.ledgers().await.map_err(engine_error)?;
    if let Some(name) = name {
        ledgers.retain(|(_, ledger)| ledger == name);
        let shared = (
            crate::primitives::DEFAULT_OWNER.to_string(),
            name.to_string(),
        );
        if !ledgers.contains(&shared) {
            ledgers.push(shared);
        }
    }
    Ok(ledgers)
}

async fn ledger_view(
    global: &Global,
    engine: &Eng,
    name: Option<String>,
    partition: Option<String>,
) -> Result<ExitCode> {
    let ledgers = viewed_ledgers(engine, name.as_deref()).await?;
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for (owner, ledger) in ledgers {
        let fabric = engine.fabric();
        let entries = FabricClient::ledger_list(
            fabric,
            owner.clone(),
            ledger.clone(),
            partition.clone(),
            0,
            0,
        )
        .await
        .context("cannot list the ledger")?;
        for e in entries {
            let entry = String::from_utf8_lossy(&e.entry).to_string();
            lines.push(format!(
                "{owner}::{ledger}#{} [{}] by {}: {entry}",
                e.seq, e.ledger.key, e.appended_by
            ));
            let parsed: Value = serde_json::from_str(&entry).unwrap_or(Value::String(entry));
            rows.push(json!({"owner": owner, "ledger": ledger, "seq": e.seq,
                "partition": e.ledger.key, "by": e.appended_by, "entry": parsed,
                "at_ms": e.at_ms}));
        }
    }
    if lines.is_empty() {
        lines.push("no ledger entries".into());
    }
    print(global, Value::Array(rows), lines)
}

/// `whip bench engine --program FILE`: `runners` closed loops, each `whip run` (start and
/// drive to idle) of the program again and again; completed instances per second.
pub(crate) async fn bench_engine(
    global: &Global,
    file: &std::path::Path,
    runners: usize,
    warmup: std::time::Duration,
    duration: std::time::Duration,
) -> Result<ExitCode> {
    use std::time::Instant;
    let program = Program::load(file, None).map_err(|e| anyhow!("{e}"))?;
    let session = session(global).await?;
    let engine = Arc::new(engine(global, &session.client));
    let program = engine.add_program(program);
    let measure_from = Instant::now() + warmup;
    let end = measure_from + duration;
    let mut tasks = Vec::new();
    for _ in 0..runners.max(1) {
        let (engine, program) = (Arc::clone(&engine), Arc::clone(&program));
        tasks.push(tokio::spawn(async move {
            let (mut completed, mut other, mut latencies) = (0u64, 0u64, Vec::new());
            while Instant::now() < end {
                let started = Instant::now();
                let report = engine.run(&program, Value::Null, false).await;
                if started < measure_from {
                    continue;
                }
                match report {
                    Ok(r) if r.status == Status::Completed => {
                        completed += 1;
                        latencies.push(started.elapsed().as_micros() as u64);
                    }
                    _ => other += 1,
                }
            }
            (completed, other, latencies)
        }));
    }
    let (mut completed, mut other, mut latencies) = (0, 0, Vec::new());
    for t in tasks {
        let (c, o, l) = t.await?;
        completed += c;
        other += o;
        latencies.extend(l);
    }
    session.close().await;
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let per_sec = completed as f64 / duration.as_secs_f64();
    let value = json!({
        "workload": "engine", "program": file.display().to_string(), "runners": runners,
        "completed": completed, "not_completed": other, "instances_per_sec": per_sec,
        "p50_us": pct(0.5), "p99_us": pct(0.99),
    });
    let text = format!(
        "engine {} runners={runners} completed={completed} instances/s={per_sec:.0} \
         p50={}us p99={}us",
        file.display(),
        pct(0.5),
        pct(0.99)
    );
    print(global, value, vec![text])
}

/// `whip message ID --channel C --text T`: mail into an instance's entry mailbox.
/// `whip message`: "delivered message on `C` to ID at event #N" (LANGUAGE-AGENTS.md §6).
async fn message(global: &Global, engine: &Eng, args: MessageArgs) -> Result<ExitCode> {
    let program = match &args.program {
        Some(path) => {
            let text = std::fs::read_to_string(path);
            Some(text.with_context(|| format!("read {}", path.display()))?)
        }
        None => None,
    };
    let (id, m) = (
        args.id.as_str(),
        whip_engine::runtime::Message {
            channel: args.channel,
            text: args.text,
            by: args.by,
            directive: args.directive,
            program,
        },
    );
    let answer = engine.deliver(id, &m).await.map_err(engine_error)?;
    match answer {
        whip_engine::runtime::Delivery::Delivered {
            id: mail,
            trust,
            event,
        } => {
            let channel = &m.channel;
            let text = match event {
                Some(n) => format!("delivered message on `{channel}` to {id} at event #{n}"),
                None => {
                    format!("delivered message on `{channel}` to {id} (admitted at its next step)")
                }
            };
            let value = json!({"outcome": "delivered", "id": mail, "trust": trust,
                "channel": channel, "instance": id, "event": event});
            print(global, value, vec![text])
        }
        whip_engine::runtime::Delivery::Refused { reason, message } => {
            if global.json {
                crate::output::json(&json!({"outcome": "refused", "reason": reason,
                    "error": message}));
            }
            eprintln!("refused ({reason}): {message}");
            Ok(ExitCode::from(1))
        }
    }
}

/// `whip trace ID [--check]`.
async fn trace(global: &Global, engine: &Eng, id: &str, check: bool) -> Result<ExitCode> {
    let events = engine.events(id).await.map_err(engine_error)?;
    if !check {
        let lines = events
            .iter()
            .map(|e| {
                format!(
                    "#{} {} {}",
                    e.seq,
                    e.kind,
                    crate::output::time_text(e.at_ms)
                )
            })
            .collect();
        return print(global, serde_json::to_value(&events)?, lines);
    }
    match whip_engine::runtime::trace::check(&events) {
        None => print(
            global,
            json!({"id": id, "conformance": "ok", "events": events.len()}),
            vec!["conformance=ok".into()],
        ),
        Some(v) => {
            let text = format!("violation at #{}: {}", v.seq, v.detail);
            print(
                global,
                json!({"id": id, "conformance": "violation", "at": v.seq, "detail": v.detail}),
                vec![text],
            )?;
            Ok(ExitCode::from(1))
        }
    }
}
