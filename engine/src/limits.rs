//! Every bound of the engine, in one place: the front end, the runtime and the compute
//! plane.
//!
//! Bad input (binary files, megabyte lines, deep nesting) must end in a diagnostic, never in
//! a panic, a stack overflow or a hang; these numbers are what make that true.

/// Largest source file accepted, in bytes.
pub const SOURCE_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Deepest nesting of blocks, brackets and unary operators the parser follows.
pub const NESTING_DEPTH_MAX: u32 = 64;
/// Diagnostics reported per file before the rest are dropped with one note.
pub const DIAGNOSTICS_PER_FILE_MAX: usize = 100;
/// Lexical errors reported per file; later ones are counted but not reported.
pub const LEX_ERRORS_MAX: usize = 20;
/// Files pulled in through `include`, transitively, per checked program.
pub const INCLUDED_FILES_MAX: usize = 64;
/// Widest slice of a source line shown under a diagnostic, in characters.
pub const SNIPPET_COLUMNS_MAX: usize = 100;
/// Longest name for which "did you mean" suggestions are computed, in bytes.
pub const SUGGESTION_NAME_BYTES_MAX: usize = 64;
/// Longest identifier accepted, in bytes (names appear in messages, so they stay short).
pub const IDENT_BYTES_MAX: usize = 256;
/// Fact combinations one rule's join examines in one round.
pub const JOIN_COMBINATIONS_MAX: usize = 100_000;
/// Default run lease: a run not finished within it may be reclaimed by another worker
/// (the CLI's `WHIPPLESCRIPT_RUN_LEASE_MS` overrides).
pub const RUN_LEASE_MS: u64 = 30_000;
/// Most effects one worker pass runs at once by default (one per CPU up to this; the CLI's
/// `WHIPPLESCRIPT_WORKER_CONCURRENCY` sets another number).
pub const WORKER_CONCURRENCY_MAX: usize = 16;
/// Registry entries of finished instances one engine takes out at once in the background
/// (`runtime::removal`); a terminal past this waits for one of them to end.
pub const REMOVALS_PENDING_MAX: usize = 64;

// ---- the language's defaults, written into an effect's row when it is created ----------

/// Holders of a lease that declares no `slots`.
pub const LEASE_SLOTS_DEFAULT: u32 = 1;
/// How long a hold of a lease that declares no `ttl` lasts.
pub const LEASE_TTL_MS_DEFAULT: u64 = 60_000;
/// How long a `claim` without `for D` lasts.
pub const CLAIM_TTL_MS_DEFAULT: u64 = 600_000;
/// How long a ledger that declares no `retain` keeps an entry (90 days).
pub const LEDGER_RETAIN_MS_DEFAULT: u64 = 90 * 86_400_000;
/// The timezone of a counter that declares none (its reset boundaries anchor to UTC).
pub const COUNTER_TIMEZONE_DEFAULT: &str = "UTC";
/// The owner of a tracker a `file` names when the workflow does not declare it (the
/// builtin shared tracker).
pub const TRACKER_OWNER_DEFAULT: &str = "shared";
/// A `vote` without `method`.
pub const VOTE_METHOD_DEFAULT: &str = "plurality";
/// A `vote` without `quorum`.
pub const VOTE_QUORUM_DEFAULT: &str = "1/2";
/// A `vote` without `threshold`.
pub const VOTE_THRESHOLD_DEFAULT: &str = "majority";
/// Who votes in a `vote` without `electorate`.
pub const VOTE_ELECTORATE_DEFAULT: &str = "coordinator";
/// How often a lease wait is retried on worker passes.
pub const LEASE_WAIT_POLL_MS: u64 = 200;
/// How often a `vote` effect looks at its open proposal (it wakes at the closing time too).
pub const VOTE_POLL_MS: u64 = 2_000;
/// Longest wait of `whip run --wait` between passes: it wakes on the first apply of the
/// instance's cell; this bounds what no apply there announces (timers, other cells).
pub const WAIT_SLEEP_MS_MAX: u64 = 1_000;
/// Ready issues of one tracker a step observes for `has ready issue` (the oldest first);
/// the rest show up as those are claimed.
pub const READY_ISSUES_OBSERVED_MAX: u32 = 1_000;
/// Messages one drain admits into an instance before a step (the rest wait for the next).
pub const MAIL_DRAIN_MAX: u32 = 64;
/// The longest line of a `local` channel's inbox file that is admitted (the fabric's mail
/// text bound); a longer line is refused, not cut.
pub const LOCAL_INBOX_LINE_BYTES_MAX: usize = 16 << 10;
/// How often `whip run --wait` looks at the mailbox of an instance that declares channels.
pub const MAIL_WAIT_LOOK_MS: u64 = 250;
/// How long a drain waits for the instance's mailbox before the step goes on without it.
pub const MAIL_DRAIN_WAIT_MS: u64 = 2_000;

// ---- the compute plane (`exec` and `whip executor`) ------------------------------------

/// Arguments of one `exec` (the program included).
pub const EXEC_ARGV_COUNT_MAX: usize = 256;
/// Bytes of all arguments of one `exec` together.
pub const EXEC_ARGV_BYTES_MAX: usize = 64 * 1024;
/// Environment entries one `exec` may set (besides the fixed base).
pub const EXEC_ENV_ENTRIES_MAX: usize = 64;
/// Bytes of all environment names and values of one `exec` together.
pub const EXEC_ENV_BYTES_MAX: usize = 64 * 1024;
/// Bytes of a `cwd` (relative to the instance's workspace).
pub const EXEC_CWD_BYTES_MAX: usize = 1024;
/// Longest run of one `exec`: its process group is killed at this timeout.
pub const EXEC_TIMEOUT_MS_MAX: u64 = 3_600_000;
/// The timeout of an `exec` that names none.
pub const EXEC_TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// Bytes of stdout, and of stderr, an answer carries (the tail is kept).
pub const EXEC_OUTPUT_BYTES_MAX: usize = 64 * 1024;
/// Bytes of stderr kept in an effect's evidence (the tail).
pub const EXEC_STDERR_EVIDENCE_BYTES_MAX: usize = 2 * 1024;
/// How long, after its process ended or was killed, a run waits for its output pipes to
/// close (a grandchild that left the process group may hold them open).
pub const EXEC_PIPE_GRACE_MS: u64 = 1_000;
/// Runs one executor executes at once; past it a new run is refused `busy`.
pub const EXEC_RUNS_CONCURRENT_MAX: usize = 16;
/// The search path every run starts with (the executor's own is never passed on).
pub const EXEC_BASE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// A worker waits this much longer than an `exec`'s timeout for the executor's answer, and
/// an `exec` run's lease lasts this much longer than its timeout.
pub const EXEC_ANSWER_MARGIN_MS: u64 = 30_000;
/// When the executor is busy, a worker queues the effect again this much later.
pub const EXEC_BUSY_RETRY_MS: u64 = 1_000;
/// Bytes of an instance, effect, run or cut id in the executor protocol.
pub const EXECUTOR_ID_BYTES_MAX: usize = 128;
/// Bytes of a request body the executor reads.
pub const EXECUTOR_BODY_BYTES_MAX: usize = 256 * 1024;
/// Bytes of an answer a client reads (two bounded outputs and their framing fit).
pub const EXECUTOR_ANSWER_BYTES_MAX: usize = 1024 * 1024;
/// How long a connection to the executor may take to send its request head, and how long
/// a kept-alive one may wait idle for its next request, before it is closed. (How many
/// connections it holds is the process's connection budget: `whip_cell::budget`.)
pub const EXECUTOR_HEADER_READ_TIMEOUT_MS: u64 = 5_000;
/// How long a client waits to connect to the executor.
pub const EXECUTOR_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// How long a client waits for an answer to a call other than `exec` (a checkpoint copies
/// a workspace).
pub const EXECUTOR_CALL_TIMEOUT_MS: u64 = 120_000;
/// Files (and symbolic links) of one workspace a checkpoint or restore copies.
pub const WORKSPACE_FILES_MAX: u64 = 100_000;
/// Bytes of one workspace a checkpoint or restore copies.
pub const WORKSPACE_BYTES_MAX: u64 = 1024 * 1024 * 1024;
/// Directory depth of a workspace a checkpoint follows.
pub const WORKSPACE_DEPTH_MAX: usize = 64;
/// Instance owners one engine process remembers (an owner never changes; past this many the
/// memory starts over).
pub const OWNERS_CACHED_MAX: usize = 65_536;
/// Engine rows one listing (`whip instances`, the worker's `w/` markers, the tracker's
/// index) reads at most, page by page.
pub const SCAN_ROWS_MAX: usize = 1_000_000;

/// How often a worker process asks the work registry again to admit a child whose admission
/// was refused, while nothing happened in its parent instance (an event there, such as a
/// sibling child settling, makes the next pass ask at once).
pub const ADMISSION_RETRY_MS: u64 = 1_000;
/// Refused admissions a worker process remembers the time of (then it forgets them all).
pub const ADMISSION_TRIES_KEPT_MAX: usize = 65_536;

/// How deep a typed `exec` result's shape follows nested classes; deeper (or recursive)
/// classes are checked as any value.
pub const RESULT_SHAPE_DEPTH_MAX: usize = 16;

// ---- agents and coercion (LANGUAGE-AGENTS.md) --------------------------------------------

/// Turns of an agent that declares no `capacity` running at once per instance.
pub const AGENT_CAPACITY_DEFAULT: u32 = 1;
/// The profile of an agent that declares none.
pub const AGENT_PROFILE_DEFAULT: &str = "no-repo";
/// The provider kind of an agent that declares none (our harness).
pub const AGENT_PROVIDER_DEFAULT: &str = "owned";
/// The profiles registered with this engine; a turn of an agent on another one is blocked
/// (`blocked_by_profile`) until it is registered.
pub const AGENT_PROFILES_REGISTERED: &[&str] = &[
    "no-repo",
    "repo-reader",
    "repo-writer",
    "internet-research",
    "issue-triager",
    "release-operator",
    "permissive",
];
/// Longest rendered prompt an `agent.tell` or `schema.coerce` effect carries, in bytes (the
/// tail is cut).
pub const PROMPT_BYTES_MAX: usize = 256 * 1024;
/// How deep the fixture provider builds a value of a nested class for a `coerce` (deeper
/// fields are left out, as a recursive class would never end).
pub const FIXTURE_VALUE_DEPTH_MAX: usize = 16;
/// Longest a coercion's answer may be (LANGUAGE-AGENTS.md §4.4: 16 MiB).
pub const COERCE_ANSWER_BYTES_MAX: usize = 16 * 1024 * 1024;
/// A coercion's token bound unless `WHIPPLESCRIPT_COERCE_MAX_TOKENS` says otherwise.
pub const COERCE_MAX_TOKENS_DEFAULT: u64 = 4_096;
/// How long one coercion call may take unless `WHIPPLESCRIPT_COERCE_TIMEOUT_SECS` says.
pub const COERCE_TIMEOUT_SECS_DEFAULT: u64 = 120;
/// How long the gate waits for the model broker's health answer.
pub const BROKER_HEALTH_WAIT_MS: u64 = 2_000;
/// Longest a fixture agent turn may be told to take (`--fixture-turn-ms`).
pub const FIXTURE_TURN_MS_MAX: u64 = 60_000;
