//! Disk faults under the log store, a test-only switch: none in every normal run. The chaos
//! harness starts a server with `--disk-fault-file` and writes a fault's name to the file;
//! the server re-reads it every [`limits::DISK_FAULT_FILE_POLL_MS`]. From then on every
//! segment-log append of the process fails the way a failing disk makes it fail:
//!
//! - `fsync`: the records are written, then the data sync reports `EIO`;
//! - `enospc`: the write itself reports `ENOSPC`, nothing is written.
//!
//! Either way the append is not acknowledged, the log writer refuses every later write
//! (`storage::log_writer`), and a server that registered [`on_log_failure`] stops there.
//! An empty file (or any other text) clears the fault for appends that come after.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::limits;

/// A disk fault the switch can inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskFault {
    /// The data sync of an append fails (`EIO`) after its records were written.
    Fsync,
    /// An append's write fails with `ENOSPC` (the disk is full).
    Enospc,
}

impl DiskFault {
    /// The fault's name in the switch file.
    pub fn name(self) -> &'static str {
        match self {
            DiskFault::Fsync => "fsync",
            DiskFault::Enospc => "enospc",
        }
    }

    fn parse(text: &str) -> Option<DiskFault> {
        [DiskFault::Fsync, DiskFault::Enospc]
            .into_iter()
            .find(|f| f.name() == text.trim())
    }

    fn code(fault: Option<DiskFault>) -> u8 {
        match fault {
            None => 0,
            Some(DiskFault::Fsync) => 1,
            Some(DiskFault::Enospc) => 2,
        }
    }
}

/// The fault in force for a process's log appends, shared by all of its cells.
#[derive(Clone, Debug, Default)]
pub struct DiskFaults(Arc<AtomicU8>);

impl DiskFaults {
    /// The fault in force, if any.
    pub fn get(&self) -> Option<DiskFault> {
        match self.0.load(Ordering::Relaxed) {
            1 => Some(DiskFault::Fsync),
            2 => Some(DiskFault::Enospc),
            _ => None,
        }
    }

    /// Inject `fault` (`None` clears it).
    pub fn set(&self, fault: Option<DiskFault>) {
        self.0.store(DiskFault::code(fault), Ordering::Relaxed);
    }

    /// Follow `path`: whenever it names another fault than the one in force, switch to it.
    /// A missing file injects nothing. Needs a tokio runtime.
    pub fn follow_file(&self, path: PathBuf) -> tokio::task::JoinHandle<()> {
        let faults = self.clone();
        tokio::spawn(async move {
            let every = Duration::from_millis(limits::DISK_FAULT_FILE_POLL_MS);
            loop {
                let text = tokio::fs::read_to_string(&path).await.unwrap_or_default();
                let next = DiskFault::parse(&text);
                if next != faults.get() {
                    faults.set(next);
                    tracing::warn!(fault = ?next, "disk fault switched (test fault)");
                }
                tokio::time::sleep(every).await;
            }
        })
    }

    /// Before an append's write: `ENOSPC` under the `enospc` fault.
    pub(crate) fn before_write(&self) -> std::io::Result<()> {
        match self.get() {
            Some(DiskFault::Enospc) => Err(std::io::Error::from_raw_os_error(libc::ENOSPC)),
            _ => Ok(()),
        }
    }

    /// Before an append's data sync: `EIO` under the `fsync` fault.
    pub(crate) fn before_sync(&self) -> std::io::Result<()> {
        match self.get() {
            Some(DiskFault::Fsync) => Err(std::io::Error::from_raw_os_error(libc::EIO)),
            _ => Ok(()),
        }
    }
}

/// What a process does when a log write fails (set once, by a server binary).
static ON_LOG_FAILURE: OnceLock<fn(&str)> = OnceLock::new();

/// Have `handler` called, once, with the error of the first log write that fails in this
/// process. A server stops in it (nothing unsynced was acknowledged, and a member whose
/// log cannot be written can serve no further); without one the member refuses its
/// writes from then on and the process runs on.
pub fn on_log_failure(handler: fn(&str)) {
    let _ = ON_LOG_FAILURE.set(handler);
}

/// A log write failed with `error`: call the registered handler, if any.
pub(crate) fn log_failed(error: &str) {
    if let Some(handler) = ON_LOG_FAILURE.get() {
        handler(error);
    }
}
