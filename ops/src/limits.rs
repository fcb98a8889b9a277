//! The CLI's own bounds and pacing (the servers' bounds live in their crates' `limits.rs`).

/// How often `whip lease acquire --wait` asks again while it waits in the queue.
pub(crate) const LEASE_WAIT_POLL_MS: u64 = 200;
