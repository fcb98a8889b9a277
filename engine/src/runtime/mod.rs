//! The WhippleScript runtime on the fabric: starter, stepper, worker and projection loops
//! (LANGUAGE.md §5) with every durable row in CAS keys of the fabric.
//!
//! Layout (one instance's rows share the prefix `e/{<instance>}/`; the braces are the
//! fabric's routing tag, so every row of an instance lives on one cell and a commit is a
//! single-cell transaction, while instances spread over cells by id):
//! - `p/<version>`: a program version (source text, path, root)
//! - `i/{<instance>}`: the instance index row (`whip instances`)
//! - `w/{<instance>}`: present while the instance may have work (`whip worker --all`)
//! - `e/{<instance>}/s/q`: the event-sequence key; every commit compares its revision
//! - `e/{<instance>}/s/{h,f/…,x/…,k/…,c/…,r/…}`: header, facts, effects, firings, `after`
//!   continuations, runs (projections of the log)
//! - `e/{<instance>}/l/<seq>`: the append-only event log
//! - `g/<kind>/<owner>/<name>`: coordination resources that programs declared
//! - `t/{tracker}/…`: the builtin tracker (one cell: its issue numbers are one sequence)
//!
//! A commit is one `KvTxn` guarded by the revision of the event-sequence key, so two
//! steppers (or a stepper and a worker) racing on one instance cannot both commit: the
//! loser re-reads and tries again.

pub mod agent;
pub use deliver::{Delivery, Message};
mod cut;
mod deliver;
pub mod effect;
pub mod egress;
mod eval;
pub mod gate;
mod inbox;
mod mail;
mod messaging;
pub mod program;
pub mod provider;
pub mod recover;
mod removal;
pub mod revise;
pub mod state;
mod stepper;
pub mod trace;
pub mod tracker;
mod views;
mod vote;
pub mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use whip_fabric::{FabricClient, FabricError, TxnOps, TxnResult};

pub use cut::{Checkpointed, Restored};
pub use program::{Program, Source};
pub use state::{Event, EventKind, State};
pub use views::*;

use state::{Fact, Header};

/// Rows read per range page.
const PAGE_ROWS: u32 = 10_000;
/// Commits a stepper retries after losing a race before giving up for this pass.
pub const CONFLICT_RETRIES_MAX: usize = 64;
/// Rounds one `step` commits at most (a runaway program stops here).
pub const ROUNDS_PER_STEP_MAX: usize = 10_000;
/// How an instance starts: its workflow (the root when `None`), its parent instance and
/// effect, the parent's registry entry, its id, and whether the first round rides along.
struct Start<'a> {
    workflow: Option<&'a str>,
    parent: Option<(String, String)>,
    under: Option<String>,
    id: Option<String>,
    step_first: bool,
    /// The registry entry the worker's admission gate already took for it.
    admitted: Option<String>,
}

impl Start<'_> {
    /// A root instance's start that commits its first round with it (what `whip run` does).
    fn root_stepped(id: Option<String>) -> Self {
        Start {
            workflow: None,
            parent: None,
            under: None,
            id,
            step_first: true,
            admitted: None,
        }
    }
}

/// The lease of an instance's registry entry.
pub const WORK_TTL_MS: u64 = 30_000;
/// How often the process driving an instance renews its entry.
pub const WORK_RENEW_MS: u64 = 10_000;

/// How an engine runs. The engine reads no environment: the CLI reads
/// `WHIPPLESCRIPT_WORKER_CONCURRENCY` and `WHIPPLESCRIPT_RUN_LEASE_MS` once and passes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Effects one worker pass claims and runs at once (at least 1).
    pub concurrency: usize,
    /// A run not finished within it may be reclaimed by another worker.
    pub run_lease_ms: u64,
}

impl Default for EngineConfig {
    /// One effect per CPU (at most `WORKER_CONCURRENCY_MAX`), the run lease `RUN_LEASE_MS`.
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        EngineConfig {
            concurrency: cpus.clamp(1, crate::limits::WORKER_CONCURRENCY_MAX),
            run_lease_ms: crate::limits::RUN_LEASE_MS,
        }
    }
}

/// A runtime error: bad input (exit 1, nothing changed) or the fabric failing.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeError {
    /// Bad input: unknown ids, illegal transitions, malformed input.
    Invalid(String),
    /// The fabric failed.
    Fabric(FabricError),
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeError::Invalid(m) => write!(f, "{m}"),
            RuntimeError::Fabric(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

impl From<FabricError> for RuntimeError {
    fn from(e: FabricError) -> Self {
        RuntimeError::Fabric(e)
    }
}

/// Result of a runtime call.
pub type Result<T> = std::result::Result<T, RuntimeError>;

pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T> {
    Err(RuntimeError::Invalid(msg.into()))
}

/// Wall clock in ms (the runtime, unlike the board, may read it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A fresh random-looking id with `prefix` (time, process and a counter, hashed).
pub fn fresh_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let seed = std::collections::hash_map::RandomState::new();
    let salt = std::hash::BuildHasher::hash_one(&seed, (nanos, n, std::process::id()));
    let hash = program::fnv64(&[
        &nanos.to_le_bytes(),
        &n.to_le_bytes(),
        &std::process::id().to_le_bytes(),
        &salt.to_le_bytes(),
    ]);
    format!("{prefix}{hash:016x}")
}

/// Every engine row under `prefix` (the caller's), page by page, at most
/// `limits::SCAN_ROWS_MAX`.
pub(crate) async fn scan_all<F: FabricClient>(
    fabric: &F,
    prefix: &[u8],
) -> Result<Vec<(Vec<u8>, whip_fabric::KvEntry)>> {
    let mut rows = Vec::new();
    let mut after = Vec::new();
    loop {
        let page = fabric
            .engine_range(prefix.to_vec(), after, PAGE_ROWS)
            .await?;
        rows.extend(page.rows);
        match page.resume_after {
            Some(next) if rows.len() < crate::limits::SCAN_ROWS_MAX => after = next,
            _ => return Ok(rows),
        }
    }
}

pub(crate) fn key(parts: &[&str]) -> Vec<u8> {
    parts.concat().into_bytes()
}

/// The routing tag of an instance's rows: `{<instance>}`.
pub(crate) fn tag(id: &str) -> String {
    format!("{{{id}}}")
}

/// The instance id inside a tagged key segment (`{id}` → `id`).
pub(crate) fn untag(segment: &str) -> &str {
    segment
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(segment)
}

/// One instance as read from the fabric: its rows and the revision of its sequence key.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The rows.
    pub state: State,
    /// Revision of `e/<id>/s/q` (0 = absent).
    pub version: u64,
}

/// A batch of events about to be committed for one instance.
pub(crate) struct Draft {
    pub(crate) state: State,
    pub(crate) events: Vec<Event>,
    pub(crate) at_ms: u64,
}

impl Draft {
    /// Put `next`, a round computed on this draft's state, on top of this draft: one
    /// commit then carries the events of both and every row either changed.
    pub(crate) fn absorb(&mut self, next: Draft) {
        let mut dirty = std::mem::take(&mut self.state.dirty);
        let mut removed = std::mem::take(&mut self.state.removed);
        self.state = next.state;
        dirty.append(&mut self.state.dirty);
        removed.append(&mut self.state.removed);
        self.state.dirty = dirty;
        self.state.removed = removed;
        self.events.extend(next.events);
    }

    /// A draft on `state` whose events are stamped `at_ms` (time is the caller's input:
    /// the runtime reads the clock where it starts a step, not here).
    pub(crate) fn new(state: &State, at_ms: u64) -> Draft {
        let mut state = state.clone();
        state.dirty.clear();
        state.removed.clear();
        Draft {
            state,
            events: Vec::new(),
            at_ms,
        }
    }

    /// Append an event and fold it.
    /// The first events of a new instance: its start, then its seed facts.
    fn started(header: &Header, input: &Value, facts: Vec<(String, Value)>) -> Draft {
        let mut draft = Draft::new(&State::default(), 1_000);
        let start = json!({"header": header, "input": input});
        draft.emit(EventKind::ExternalStarted, start);
        for (class, value) in facts {
            let id = draft.next_id(0, "f");
            let fact = Fact {
                id,
                class,
                value,
                live: true,
            };
            draft.emit(
                EventKind::FactDerived,
                json!({"fact": fact, "source": "start"}),
            );
        }
        draft
    }

    pub(crate) fn emit(&mut self, kind: EventKind, data: Value) {
        let ev = Event {
            seq: self.state.header.last_seq + 1,
            at_ms: self.at_ms,
            kind,
            data,
        };
        self.state.apply(&ev);
        self.events.push(ev);
    }

    pub(crate) fn next_id(&self, slot: usize, prefix: &str) -> String {
        format!("{prefix}{:06}", self.state.header.next[slot] + 1)
    }
}

/// The runtime over one fabric client.
pub struct Engine<F: FabricClient> {
    /// The fabric as the principal this engine acts for: the process's own credential, or
    /// (in an [`Engine::for_owner`] view) the owner of the instance it drives, so that an
    /// instance's leases, registry entries, mail and votes are its owner's.
    fabric: Arc<F>,
    /// The fabric as this process's own credential: the built-in tracker (the engine's,
    /// written by the operator's engine only) and the stepper leases.
    home: Arc<F>,
    programs: Arc<Mutex<HashMap<String, Arc<Program>>>>,
    /// Program versions (and `team:` tracker boards) this process knows are stored.
    stored: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Identity of this process's worker (run records, stepper leases).
    pub worker_id: String,
    /// How this engine runs (concurrency, run lease).
    pub config: EngineConfig,
    /// When this process last renewed each instance's registry entry, and the signal.
    supervised: Arc<Mutex<HashMap<String, (std::time::Instant, whip_fabric::work::Signal)>>>,
    /// Instances whose last mail drain failed (recorded once until a drain succeeds).
    drain_failed: Arc<Mutex<std::collections::HashSet<String>>>,
    /// The owners of instances this process read (an owner never changes).
    owners: Arc<Mutex<HashMap<String, Option<Owner>>>>,
    /// The compute plane `exec` effects run on (unconfigured unless given).
    executor: crate::executor::ExecutorClient,
    /// When this process last asked the registry to admit a blocked child, per
    /// `instance/effect`, and the instance's last event then (see [`gate`]).
    admission_tries: Arc<Mutex<HashMap<String, (std::time::Instant, u64)>>>,
    /// What runs agent turns and coercions (the fixture unless given).
    provider: Arc<dyn provider::Provider>,
    /// The embedded store's directory, where `local` channels write (`None` on a cell or
    /// a fabric: their sends are blocked `provider_config`).
    local_messaging: Option<std::path::PathBuf>,
    /// Finished instances' registry entries being taken out (shared with owner views).
    removals: removal::Removals,
}

impl<F: FabricClient> Engine<F> {
    /// An engine on `fabric` with the default [`EngineConfig`].
    pub fn new(fabric: Arc<F>) -> Self {
        Engine {
            home: fabric.clone(),
            fabric,
            programs: Arc::default(),
            stored: Arc::default(),
            worker_id: fresh_id("wkr_"),
            config: EngineConfig::default(),
            supervised: Arc::default(),
            drain_failed: Arc::default(),
            owners: Arc::default(),
            executor: crate::executor::ExecutorClient::new(None),
            admission_tries: Arc::default(),
            provider: Arc::new(provider::FixtureProvider::default()),
            local_messaging: None,
            removals: removal::Removals::default(),
        }
    }

    /// This engine acting as the owner of instance `id` (its caches shared): the same
    /// engine (`None`) for an instance the operator owns or for a view already acting for
    /// its owner, or a view whose calls act for the owning agent. The store decides
    /// whether this process may act for it (the operator's worker may; an agent's only
    /// for itself).
    pub async fn for_owner(&self, id: &str) -> Result<Option<Engine<F>>> {
        if !Arc::ptr_eq(&self.fabric, &self.home) {
            // Already a view acting for an owner.
            return Ok(None);
        }
        let known = self.owners.lock().expect("owners lock").get(id).cloned();
        let owner = match known {
            Some(owner) => owner,
            None => {
                let owner = self.owner(id).await?;
                let mut owners = self.owners.lock().expect("owners lock");
                if owners.len() >= crate::limits::OWNERS_CACHED_MAX {
                    owners.clear();
                }
                owners.insert(id.to_string(), owner.clone());
                owner
            }
        };
        let Some(Owner::Agent(agent)) = owner else {
            return Ok(None);
        };
        Ok(Some(Engine {
            fabric: Arc::new(self.home.acting_for(&agent)),
            home: self.home.clone(),
            programs: self.programs.clone(),
            stored: self.stored.clone(),
            worker_id: self.worker_id.clone(),
            config: self.config,
            supervised: self.supervised.clone(),
            drain_failed: self.drain_failed.clone(),
            owners: self.owners.clone(),
            executor: self.executor.clone(),
            admission_tries: self.admission_tries.clone(),
            provider: self.provider.clone(),
            local_messaging: self.local_messaging.clone(),
            removals: self.removals.clone(),
        }))
    }

    /// The same engine configured by `config`.
    pub fn with_config(mut self, config: EngineConfig) -> Self {
        self.config = config;
        self
    }

    /// The same engine with the executor `config` names for `exec` effects (`None`: not
    /// configured, so an `exec` effect is blocked with `provider_config`).
    pub fn with_executor(mut self, config: Option<crate::executor::ExecutorConfig>) -> Self {
        self.executor = crate::executor::ExecutorClient::new(config);
        self
    }

    /// The same engine with `local` channels writing under `dir` (the embedded store's
    /// directory; `None`: they are blocked `provider_config`).
    pub fn with_local_messaging(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.local_messaging = dir;
        self
    }

    /// The same engine with `provider` running its agent turns and coercions (the
    /// deterministic fixture unless given).
    pub fn with_provider(mut self, provider: Arc<dyn provider::Provider>) -> Self {
        self.provider = provider;
        self
    }

    /// The client of the compute plane (`whip recover`, `checkpoint` and `restore` use it).
    pub fn executor(&self) -> &crate::executor::ExecutorClient {
        &self.executor
    }

    /// The fabric client.
    pub fn fabric(&self) -> &F {
        &self.fabric
    }

    /// Register a checked program with this engine (it is stored at the first start).
    pub fn add_program(&self, program: Program) -> Arc<Program> {
        let program = Arc::new(program);
        self.programs
            .lock()
            .expect("programs lock")
            .insert(program.version.clone(), program.clone());
        program
    }

    /// A program version, from the cache or the fabric.
    pub async fn program(&self, version: &str) -> Result<Arc<Program>> {
        if let Some(p) = self.programs.lock().expect("programs lock").get(version) {
            return Ok(p.clone());
        }
        let Some(entry) = self.fabric.engine_get(key(&["p/", version])).await? else {
            return invalid(format!("unknown program version {version}"));
        };
        let source: Source = serde_json::from_slice(&entry.value)
            .map_err(|e| RuntimeError::Invalid(format!("program {version} unreadable: {e}")))?;
        if program::version_of(&source) != version {
            return invalid(format!(
                "program {version}: the stored source is not that version's (refused)"
            ));
        }
        let program = Program::check(source).map_err(RuntimeError::Invalid)?;
        Ok(self.add_program(program))
    }

    /// Read every row of an instance (`Invalid` when unknown).
    pub async fn load(&self, id: &str) -> Result<Loaded> {
        let prefix = key(&["e/", &tag(id), "/s/"]);
        let mut after = Vec::new();
        let mut state = State::default();
        let mut version = 0;
        loop {
            let page = self
                .fabric
                .engine_range(prefix.clone(), after.clone(), PAGE_ROWS)
                .await?;
            for (k, entry) in &page.rows {
                let rel = String::from_utf8_lossy(&k[prefix.len()..]).to_string();
                if rel == "q" {
                    version = entry.version;
                    continue;
                }
                put_row(&mut state, &rel, &entry.value).map_err(|e| {
                    RuntimeError::Invalid(format!("instance {id}: row {rel} is unreadable: {e}"))
                })?;
            }
            match page.resume_after {
                Some(k) => after = k,
                None => break,
            }
        }
        if version == 0 {
            return invalid(format!("unknown instance {id}"));
        }
        Ok(Loaded { state, version })
    }

    /// Commit a draft guarded by the sequence key's revision; `Ok(false)` when another
    /// writer committed first (nothing changed).
    pub(crate) async fn commit(&self, loaded: &mut Loaded, draft: Draft) -> Result<bool> {
        if draft.events.is_empty() {
            return Ok(true);
        }
        let ops = commit_ops(loaded.version, &draft);
        let idem = format!(
            "{}/seq/{}/{}",
            draft.state.header.id, draft.state.header.last_seq, self.worker_id
        );
        match self.fabric.engine_txn(ops, idem).await? {
            TxnResult::Committed { fence } => {
                let mut state = draft.state;
                state.dirty.clear();
                state.removed.clear();
                *loaded = Loaded {
                    state,
                    version: fence,
                };
                Ok(true)
            }
            TxnResult::Failed { .. } => Ok(false),
        }
    }

    /// Every event of an instance, in order.
    pub async fn events(&self, id: &str) -> Result<Vec<Event>> {
        self.load(id).await?;
        let prefix = key(&["e/", &tag(id), "/l/"]);
        let mut after = Vec::new();
        let mut out = Vec::new();
        loop {
            let page = self
                .fabric
                .engine_range(prefix.clone(), after.clone(), PAGE_ROWS)
                .await?;
            for (k, entry) in &page.rows {
                let event = serde_json::from_slice::<Event>(&entry.value).map_err(|e| {
                    let k = String::from_utf8_lossy(k);
                    RuntimeError::Invalid(format!("instance {id}: event {k} is unreadable: {e}"))
                })?;
                out.push(event);
            }
            match page.resume_after {
                Some(k) => after = k,
                None => break,
            }
        }
        Ok(out)
    }

    /// Start an instance of `workflow` (the root when `None`) with `input`.
    pub async fn start(
        &self,
        program: &Arc<Program>,
        workflow: Option<&str>,
        input: Value,
        parent: Option<(String, String)>,
        id: Option<String>,
    ) -> Result<String> {
        let mut under = None;
        if let Some((parent, _)) = &parent {
            under = self
                .load(parent)
                .await
                .ok()
                .and_then(|p| p.state.header.work);
        }
        let start = Start {
            workflow,
            parent,
            under,
            id,
            step_first: false,
            admitted: None,
        };
        Ok(self.start_committed(program, input, start).await?.0)
    }

    /// Start a child of the instance whose header is `parent` from its effect `effect`,
    /// under the registry entry `admitted` when the worker's gate took one for it.
    pub(crate) async fn start_child(
        &self,
        program: &Arc<Program>,
        (workflow, input): (&str, Value),
        (parent, effect): (&Header, &str),
        id: String,
        admitted: Option<String>,
    ) -> Result<String> {
        let start = Start {
            workflow: Some(workflow),
            parent: Some((parent.id.clone(), effect.to_string())),
            under: parent.work.clone(),
            id: Some(id),
            step_first: false,
            admitted,
        };
        Ok(self.start_committed(program, input, start).await?.0)
    }

    /// Start, committing the first stepper round with the start, and with it the claims of
    /// the effects that round made whose gates read only the instance's own state; those
    /// run and are recorded before this returns (two writes fewer): what `whip run` does.
    pub async fn start_and_step(
        &self,
        program: &Arc<Program>,
        input: Value,
        id: Option<String>,
    ) -> Result<String> {
        let start = Start::root_stepped(id);
        Ok(self.start_committed(program, input, start).await?.0)
    }

    /// [`Engine::start_and_step`] of instance `id`, answering the state its start committed
    /// (after what it claimed ahead ran), or `None` when the instance was there already.
    pub(crate) async fn start_kept(
        &self,
        program: &Arc<Program>,
        input: Value,
        id: String,
    ) -> Result<Option<Loaded>> {
        let start = Start::root_stepped(Some(id));
        Ok(self.start_committed(program, input, start).await?.1)
    }

    /// Start: the instance's id, and the state the start committed (`None`: the id existed
    /// already, a retried start).
    async fn start_committed(
        &self,
        program: &Arc<Program>,
        input: Value,
        start: Start<'_>,
    ) -> Result<(String, Option<Loaded>)> {
        let Start {
            workflow,
            parent,
            under,
            id,
            step_first,
            admitted,
        } = start;
        let wf = match workflow {
            Some(w) => program.workflow(w).map_err(RuntimeError::Invalid)?,
            None => program.root().map_err(RuntimeError::Invalid)?,
        };
        let facts = seed_facts(program, wf, &input)?;
        let id = id.unwrap_or_else(|| fresh_id("ins_"));
        let work = self.entry_of(&id, under, admitted).await?;
        let header = Header {
            id: id.clone(),
            work,
            workflow: wf.name.name.clone(),
            program: program.version.clone(),
            status: state::Status::Running,
            input: input.clone(),
            parent: parent.clone(),
            created_ms: now_ms(),
            ..Header::default()
        };
        let mut draft = Draft::started(&header, &input, facts);
        let mut ahead = Vec::new();
        if step_first {
            // The first stepper round rides on the start's commit, and so do the claims of
            // the effects it made that a worker pass would claim at once: two writes fewer.
            if let Some(round) = stepper::round(program, wf, &draft.state) {
                draft.absorb(round);
            }
            if draft.state.header.status == state::Status::Running {
                ahead = self.claim_ahead(&mut draft, now_ms());
            }
        }
        self.store_program(program).await?;
        let ops = commit_ops(0, &draft);
        let idem = format!("{id}/start");
        let fence = match self.fabric.engine_txn(ops, idem).await? {
            TxnResult::Committed { fence } => fence,
            // The id exists already (a retried child start): the instance is there.
            TxnResult::Failed { .. } => return Ok((id, None)),
        };
        if draft.state.header.status.is_terminal() {
            // Finished in its first round: nothing to hold on to.
            self.after_terminal_of(&draft.state).await?;
        }
        let mut state = draft.state;
        state.dirty.clear();
        state.removed.clear();
        let mut loaded = Loaded {
            state,
            version: fence,
        };
        if !ahead.is_empty() {
            self.run_ahead(&mut loaded, ahead).await?;
        }
        Ok((id, Some(loaded)))
    }

    /// The registry entry instance `id` starts under: the one the worker's admission gate
    /// took for it, or one admitted now.
    async fn entry_of(
        &self,
        id: &str,
        under: Option<String>,
        admitted: Option<String>,
    ) -> Result<Option<String>> {
        match admitted {
            Some(entry) => {
                self.supervise(id);
                Ok(Some(entry))
            }
            None => self.register_work(id, under).await,
        }
    }

    /// Register instance `id` as a `run` entry (under its parent instance's entry): the
    /// registry's admission decides whether it may start at all.
    /// A refusal while this process still takes finished instances' entries out is asked
    /// again once they are out (a fresh key: the first refusal is recorded under its own).
    async fn register_work(&self, id: &str, under: Option<String>) -> Result<Option<String>> {
        let mut answer = self.admission(under.clone(), format!("{id}/work")).await?;
        if matches!(answer, whip_fabric::WorkAnswer::Refused { .. }) && self.removals.pending() {
            self.removals.settle().await;
            answer = self.admission(under, format!("{id}/work/settled")).await?;
        }
        match answer {
            whip_fabric::WorkAnswer::Admitted { id: entry } => {
                self.supervise(id);
                Ok(Some(entry))
            }
            whip_fabric::WorkAnswer::Refused { limit, reason } => {
                invalid(format!("work admission refused ({limit} limit): {reason}"))
            }
            other => invalid(format!("the work registry answered {other:?}")),
        }
    }

    /// Ask the work registry to admit a `run` entry under `under` (idempotency key `key`):
    /// its answer. A parent's entry that lapsed makes the entry a root.
    pub(crate) async fn admission(
        &self,
        under: Option<String>,
        key: String,
    ) -> Result<whip_fabric::WorkAnswer> {
        let kind = whip_fabric::work::WorkKind::Run;
        let answer = self
            .fabric
            .work_register(kind, under.clone(), WORK_TTL_MS, key.clone())
            .await?;
        if answer == whip_fabric::WorkAnswer::Gone && under.is_some() {
            // The parent's entry lapsed: the child runs as a root.
            let key = format!("{key}/root");
            return Ok(self
                .fabric
                .work_register(kind, None, WORK_TTL_MS, key)
                .await?);
        }
        Ok(answer)
    }

    /// Instance `id` was just admitted with a fresh lease: its first renewal can wait.
    fn supervise(&self, id: &str) {
        let now = std::time::Instant::now();
        let mut supervised = self.supervised.lock().expect("supervised lock");
        supervised.insert(id.to_string(), (now, whip_fabric::work::Signal::Run));
    }

    /// The signal in force for a running instance: its entry is renewed at most every
    /// `WORK_RENEW_MS` by this process. An instance without an entry, or whose entry is
    /// gone, runs.
    pub(crate) async fn supervision(&self, header: &Header) -> Result<whip_fabric::work::Signal> {
        use whip_fabric::work::Signal;
        let Some(work) = &header.work else {
            return Ok(Signal::Run);
        };
        let fresh = std::time::Duration::from_millis(WORK_RENEW_MS);
        let known = self
            .supervised
            .lock()
            .expect("supervised lock")
            .get(&header.id)
            .copied();
        if let Some((_, signal)) = known.filter(|(at, _)| at.elapsed() < fresh) {
            return Ok(signal);
        }
        let answer = self
            .fabric
            .work_renew(work.clone(), WORK_TTL_MS, String::new())
            .await?;
        let signal = match answer {
            whip_fabric::WorkAnswer::Renewed { signal } => signal,
            _ => Signal::Run,
        };
        let mut supervised = self.supervised.lock().expect("supervised lock");
        supervised.insert(header.id.clone(), (std::time::Instant::now(), signal));
        Ok(signal)
    }

    /// Wait until the registry entries of the instances this engine finished are out: what
    /// a process does before it reports or exits (see [`removal`]).
    pub async fn settle_removals(&self) {
        self.removals.settle().await;
    }

    /// Forget what this process knew of a finished instance's supervision.
    pub(crate) fn forget_supervision(&self, id: &str) {
        self.supervised.lock().expect("supervised lock").remove(id);
    }

    /// Store the program version and the resources it declares, once per version and
    /// process. Each row is its own write: rows of different keys may live on different
    /// cells of a fabric, and every row is the same whoever writes it first.
    pub(crate) async fn store_program(&self, program: &Program) -> Result<()> {
        if self
            .stored
            .lock()
            .expect("stored lock")
            .contains(&program.version)
        {
            return Ok(());
        }
        let source = serde_json::to_vec(&program.source).expect("source encodes");
        let mut rows = vec![(key(&["p/", &program.version]), source)];
        for w in &program.model.workflows {
            for name in w.trackers.keys() {
                let owner = w.trackers[name].owner.as_str();
                rows.push((key(&["g/tracker/", owner, "/", name]), Vec::new()));
            }
            for (name, r) in &w.ledgers {
                let partition = r.decl.partition.as_ref().map_or("", |p| p.name.as_str());
                let k = key(&["g/ledger/", &r.owner, "/", name]);
                rows.push((k, partition.as_bytes().to_vec()));
            }
        }
        rows.sort();
        rows.dedup_by(|a, b| a.0 == b.0);
        for (i, row) in rows.into_iter().enumerate() {
            let ops = TxnOps {
                puts: vec![row],
                ..TxnOps::default()
            };
            let idem = format!("program/{}/{i}", program.version);
            self.fabric.engine_txn(ops, idem).await?;
        }
        self.stored
            .lock()
            .expect("stored lock")
            .insert(program.version.clone());
        Ok(())
    }
}

/// Table rows and inputs as facts.
fn seed_facts(
    program: &Program,
    wf: &crate::check::model::Wf,
    input: &Value,
) -> Result<Vec<(String, Value)>> {
    let mut facts = Vec::new();
    let state = State::default();
    let env = state::Env::default();
    let scope = eval::Scope {
        env: &env,
        state: &state,
    };
    for table in &wf.tables {
        for row in &table.rows {
            facts.push((table.class.name.clone(), scope.object(row)));
        }
    }
    let fields = match input {
        Value::Null => serde_json::Map::new(),
        Value::Object(m) => m.clone(),
        _ => return invalid("--input must be a JSON object"),
    };
    for (name, value) in fields {
        let Some(decl) = wf.inputs.iter().find(|t| t.name == name) else {
            let known: Vec<&str> = wf.inputs.iter().map(|t| t.name.as_str()).collect();
            return invalid(format!(
                "workflow `{}` has no input `{name}` (inputs: {})",
                wf.name.name,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        };
        let class = match &decl.ty {
            crate::check::types::Ty::Class(c) => crate::check::types::display_class(c).to_string(),
            _ => name.clone(),
        };
        facts.push((class, value));
    }
    let _ = program;
    Ok(facts)
}

/// Put one stored row into `state`; a row that does not decode is an error (an instance is
/// never read with a row silently missing).
fn put_row(state: &mut State, rel: &str, bytes: &[u8]) -> std::result::Result<(), String> {
    fn row<T: for<'de> serde::Deserialize<'de>>(bytes: &[u8]) -> std::result::Result<T, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }
    let (kind, _) = rel.split_once('/').unwrap_or((rel, ""));
    match kind {
        "h" => state.header = row(bytes)?,
        "f" => {
            let f: Fact = row(bytes)?;
            state.facts.insert(f.id.clone(), f);
        }
        "x" => {
            let x: state::Effect = row(bytes)?;
            state.effects.insert(x.id.clone(), x);
        }
        "k" => {
            let k: state::Firing = row(bytes)?;
            state.firings.insert(k.key.clone(), k);
        }
        "c" => {
            let c: state::Cont = row(bytes)?;
            state.conts.insert(c.id.clone(), c);
        }
        "r" => {
            let r: state::Run = row(bytes)?;
            state.runs.insert(r.id.clone(), r);
        }
        "u" => {
            let u: state::Cut = row(bytes)?;
            state.cuts.insert(u.id.clone(), u);
        }
        _ => {}
    }
    Ok(())
}

fn row_bytes(state: &State, rel: &str) -> Option<Vec<u8>> {
    let (kind, id) = rel.split_once('/').unwrap_or((rel, ""));
    let value = match kind {
        "h" => serde_json::to_vec(&state.header),
        "f" => serde_json::to_vec(state.facts.get(id)?),
        "x" => serde_json::to_vec(state.effects.get(id)?),
        "k" => serde_json::to_vec(state.firings.get(id)?),
        "c" => serde_json::to_vec(state.conts.get(id)?),
        "r" => serde_json::to_vec(state.runs.get(id)?),
        "u" => serde_json::to_vec(state.cuts.get(id)?),
        _ => return None,
    };
    value.ok()
}

/// The writes of one commit: events, changed rows, sequence key, index and work marker.
fn commit_ops(version: u64, draft: &Draft) -> TxnOps {
    let h = &draft.state.header;
    let id = h.id.as_str();
    let tagged = tag(id);
    let seq_key = key(&["e/", &tagged, "/s/q"]);
    let mut ops = TxnOps {
        compares: vec![(seq_key.clone(), version)],
        ..TxnOps::default()
    };
    for ev in &draft.events {
        let k = format!("e/{tagged}/l/{:012}", ev.seq).into_bytes();
        ops.puts
            .push((k, serde_json::to_vec(ev).expect("event encodes")));
    }
    for rel in &draft.state.dirty {
        if let Some(bytes) = row_bytes(&draft.state, rel) {
            ops.puts.push((key(&["e/", &tagged, "/s/", rel]), bytes));
        }
    }
    for rel in &draft.state.removed {
        ops.deletes.push(key(&["e/", &tagged, "/s/", rel]));
    }
    ops.puts
        .push((seq_key, h.last_seq.to_string().into_bytes()));
    let index = json!({
        "id": id, "status": h.status, "workflow": h.workflow, "program": h.program,
        "epoch": h.epoch, "updated_ms": h.updated_ms, "parent": h.parent,
    });
    ops.puts
        .push((key(&["i/", &tagged]), index.to_string().into_bytes()));
    let work = key(&["w/", &tagged]);
    if h.status.is_terminal() || h.status == state::Status::Paused {
        ops.deletes.push(work);
    } else {
        ops.puts.push((work, Vec::new()));
    }
    ops
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod lang_tests;

#[cfg(test)]
mod agent_tests;
