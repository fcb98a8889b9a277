//! Every bound of the front end, in one place.
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
/// (`WHIPPLESCRIPT_RUN_LEASE_MS` overrides).
pub const RUN_LEASE_MS: u64 = 30_000;
/// How often a lease wait is retried on worker passes.
pub const LEASE_WAIT_POLL_MS: u64 = 200;
/// How often a `vote` effect looks at its open proposal (it wakes at the closing time too).
pub const VOTE_POLL_MS: u64 = 2_000;
/// Longest sleep of `whip run --wait` between passes.
pub const WAIT_SLEEP_MS_MAX: u64 = 1_000;
/// Ready issues of one tracker a step observes for `has ready issue` (the oldest first);
/// the rest show up as those are claimed.
pub const READY_ISSUES_OBSERVED_MAX: u32 = 1_000;
/// Messages one drain admits into an instance before a step (the rest wait for the next).
pub const MAIL_DRAIN_MAX: u32 = 64;
/// How often `whip run --wait` looks at the mailbox of an instance that declares channels.
pub const MAIL_WAIT_LOOK_MS: u64 = 250;
/// How long a drain waits for the instance's mailbox before the step goes on without it.
pub const MAIL_DRAIN_WAIT_MS: u64 = 2_000;
