//! The CLI's own bounds and pacing (the servers' bounds live in their crates' `limits.rs`).

/// How often long work prints a plain progress line when stderr is not a terminal.
pub(crate) const PROGRESS_LINE_MS: u64 = 5_000;
/// How often long work whose size only a server knows asks it how far it is (a range
/// move's rows copied).
pub(crate) const PROGRESS_POLL_MS: u64 = 500;
/// How often a spinner (work of unknown size, on a terminal) redraws.
pub(crate) const SPINNER_TICK_MS: u64 = 120;
/// Rounds `whip team dissolve` runs at most before it says the team is still dissolving.
pub(crate) const DISSOLVE_ROUNDS_MAX: u64 = 10_000;
/// How long `whip fabric rotate-certs` waits for one node to install a credential.
pub(crate) const ROTATE_CALL_TIMEOUT_MS: u64 = 10_000;
/// Shortest Raft heartbeat a node accepts, in ms (0 would spin a task and panic it).
pub(crate) const HEARTBEAT_MS_MIN: u64 = 10;
/// Longest Raft heartbeat a node accepts, in ms.
pub(crate) const HEARTBEAT_MS_MAX: u64 = 10_000;
/// Longest election timeout a node accepts, in ms.
pub(crate) const ELECTION_TIMEOUT_MS_MAX: u64 = 60_000;
/// Longest time a node lets the external mail validator take, in ms.
pub(crate) const MAIL_SCREEN_TIMEOUT_MS_MAX: u64 = 60_000;
/// How long a command may take to end itself after SIGINT or SIGTERM (giving back what it
/// waited for) before it is dropped; the whole stop stays under a second.
pub const STOP_GRACE_MS: u64 = 700;
/// Revisions a `kv watch` holds between the stream and the terminal.
pub const WATCH_QUEUE_MAX: usize = 256;
/// Leader hints `whip cell snapshot save` (and `whip fabric backup`, per cell) follows at
/// most before it gives up.
pub(crate) const SNAPSHOT_HINTS_MAX: usize = 3;
/// How long `whip fabric init` waits for the nodes it names to listen (they may just have
/// been started), and how often it looks.
pub(crate) const INIT_NODES_WAIT_MS: u64 = 10_000;
pub(crate) const INIT_NODES_POLL_MS: u64 = 100;
/// How long `whip fabric restore` waits for every restored cell to elect a leader.
pub(crate) const RESTORE_LEADERS_WAIT_MS: u64 = 30_000;
/// The exit status of a server whose log store failed (a write or its sync): `EX_IOERR`.
pub(crate) const EXIT_LOG_FAILED: i32 = 74;
/// Longest wait one MCP tool call may ask for (`wait_s` of `board_claim`, `mail_inbox`,
/// `lease_acquire`), in ms: a client's request timeout is usually shorter.
pub(crate) const MCP_WAIT_MS_MAX: u64 = 300_000;
/// How often a waiting MCP call tells a client that asked for progress how long it waited.
pub(crate) const MCP_PROGRESS_EVERY_MS: u64 = 1_000;
/// Bytes of JSON one MCP tool result carries at most (a page of a listing stops before
/// it): about 12,000 tokens, well under the 25,000 a client accepts.
pub(crate) const MCP_RESULT_BYTES_MAX: usize = 48 << 10;
/// Items one page of an MCP listing holds at most (and its default page size).
pub(crate) const MCP_PAGE_ITEMS_MAX: u32 = 100;
/// Messages `start_session` shows of the caller's inbox (the rest through `mail_inbox`).
pub(crate) const MCP_SESSION_INBOX_ITEMS_MAX: u32 = 20;
/// Leases and claims `start_session` lists of what the caller holds.
pub(crate) const MCP_SESSION_HOLDS_MAX: usize = 100;
/// The lease of the work entry `start_session` registers; the server renews it at a third
/// of this while it runs, so it lapses within this long after the server ends.
pub(crate) const MCP_SESSION_TTL_MS: u64 = 60_000;
/// Requests the MCP listener (`--mcp`) answers at once; past it, 503.
pub(crate) const MCP_HTTP_REQUESTS_MAX: usize = 64;
/// Proven agents the MCP listener keeps a connection for (more are served, not kept).
pub(crate) const MCP_HTTP_AGENTS_MAX: usize = 1_024;

/// Longest a model call the broker relays may take (`whip broker`).
pub const BROKER_RELAY_TIMEOUT_MS: u64 = 120_000;
/// Largest request the broker reads, and largest answer it relays (LANGUAGE-AGENTS.md §4.4).
pub const BROKER_BODY_BYTES_MAX: usize = 16 * 1024 * 1024;
