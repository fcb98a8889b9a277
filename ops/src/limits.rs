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
