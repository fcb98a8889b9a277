//! The member's clock offset, a test-only fault: 0 in every normal run. Fault tests skew a
//! member by starting it with an offset, and jump its clock while it runs by pointing it at
//! a file (`--clock-offset-file`) that they rewrite; the member re-reads the file every
//! [`limits::CLOCK_OFFSET_FILE_POLL_MS`]. Stamps stay monotonic whatever the offset does:
//! the leader never stamps below its last stamp.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::limits;

/// Milliseconds added to the wall clock, shared by every cell of a process.
#[derive(Clone, Debug, Default)]
pub struct ClockOffset(Arc<AtomicI64>);

impl ClockOffset {
    /// An offset of `offset_ms`.
    pub fn new(offset_ms: i64) -> ClockOffset {
        ClockOffset(Arc::new(AtomicI64::new(offset_ms)))
    }

    /// The offset now, ms.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Change the offset (a clock jump).
    pub fn set(&self, offset_ms: i64) {
        self.0.store(offset_ms, Ordering::Relaxed);
    }

    /// Follow `path`: whenever it holds an integer other than the offset, jump to it. A
    /// missing or unreadable file leaves the offset as it is. Needs a tokio runtime.
    pub fn follow_file(&self, path: PathBuf) -> tokio::task::JoinHandle<()> {
        let offset = self.clone();
        tokio::spawn(async move {
            let every = Duration::from_millis(limits::CLOCK_OFFSET_FILE_POLL_MS);
            loop {
                let text = tokio::fs::read_to_string(&path).await.unwrap_or_default();
                if let Ok(next) = text.trim().parse::<i64>() {
                    let before = offset.get();
                    if next != before {
                        offset.set(next);
                        tracing::warn!(before, after = next, "clock offset jumped (test fault)");
                    }
                }
                tokio::time::sleep(every).await;
            }
        })
    }
}
