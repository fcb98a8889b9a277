//! Opening files while the process is out of descriptors.
//!
//! A running cell opens files now and then: a new log segment, the log's directory to sync
//! it, the log metadata's temporary file, a snapshot. If one of those opens fails with
//! `EMFILE` or `ENFILE` the log writer would stop for good and openraft would shut the
//! Raft core down (a failed log write is fatal to it). Descriptors run out for reasons
//! outside the cell (connections, other cells of the node) and come back when those close,
//! so such an open is retried with backoff instead, for up to
//! [`limits::STORAGE_OPEN_RETRY_MS_MAX`]; only then does it fail.
//!
//! The process also keeps one spare descriptor (an open `/dev/null`, [`keep_reserve`]).
//! Before each retry it is closed, freeing one slot right before the open, and taken again
//! after it: so an open can succeed even while everything else holds the rest.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::limits;

/// The spare descriptor, when held.
static RESERVE: Mutex<Option<File>> = Mutex::new(None);
/// Opens retried because descriptors ran out (the log says so at powers of two).
static RETRIES: AtomicU64 = AtomicU64::new(0);

/// Whether `error` says the process (`EMFILE`) or the system (`ENFILE`) is out of
/// descriptors.
pub(crate) fn out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Take the spare descriptor if it is not held (called when a store opens).
pub(crate) fn keep_reserve() {
    let mut reserve = RESERVE.lock().unwrap_or_else(PoisonError::into_inner);
    if reserve.is_none() {
        *reserve = take_spare();
    }
}

fn take_spare() -> Option<File> {
    match File::open("/dev/null") {
        Ok(file) => Some(file),
        Err(error) => {
            tracing::debug!(%error, "no spare descriptor held for now");
            None
        }
    }
}

/// Storage opens retried because descriptors ran out, since the process started.
pub(crate) fn retries() -> u64 {
    RETRIES.load(Ordering::Relaxed)
}

/// Run `open` (`what` names it in the log); while it fails because descriptors ran out,
/// run it again with the spare descriptor freed, pausing longer each time, for up to
/// [`limits::STORAGE_OPEN_RETRY_MS_MAX`]. Blocks the calling thread: call it only where
/// storage work already runs (the log writer's thread, the blocking pool).
pub(crate) fn opening<T>(
    what: &'static str,
    mut open: impl FnMut() -> io::Result<T>,
) -> io::Result<T> {
    let first = open();
    match &first {
        Err(error) if out_of_descriptors(error) => {}
        _ => return first,
    }
    let started = Instant::now();
    let give_up = Duration::from_millis(limits::STORAGE_OPEN_RETRY_MS_MAX);
    let mut pause = Duration::from_millis(limits::STORAGE_OPEN_BACKOFF_MIN_MS);
    loop {
        let n = RETRIES.fetch_add(1, Ordering::Relaxed) + 1;
        let error = match with_spare_freed(&mut open) {
            Err(error) if out_of_descriptors(&error) => error,
            done => {
                tracing::info!(
                    what,
                    waited_ms = started.elapsed().as_millis() as u64,
                    "storage open succeeded after descriptors ran out"
                );
                return done;
            }
        };
        if started.elapsed() >= give_up {
            let waited_ms = limits::STORAGE_OPEN_RETRY_MS_MAX;
            let text = "storage open gave up: the process stayed out of descriptors";
            tracing::error!(what, %error, waited_ms, "{text}");
            return Err(error);
        }
        if n.is_power_of_two() {
            let text = "out of descriptors: retrying a storage open";
            tracing::warn!(what, %error, retries = n, "{text}");
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(limits::STORAGE_OPEN_BACKOFF_MAX_MS));
    }
}

/// Run `open` with the spare descriptor closed, then take the spare again.
fn with_spare_freed<T>(open: &mut impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut reserve = RESERVE.lock().unwrap_or_else(PoisonError::into_inner);
    drop(reserve.take());
    let result = open();
    *reserve = take_spare();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emfile() -> io::Error {
        io::Error::from_raw_os_error(libc::EMFILE)
    }

    #[test]
    fn an_open_out_of_descriptors_is_retried_until_it_succeeds() {
        let mut failures = 3;
        let before = retries();
        let opened = opening("test file", || match failures {
            0 => Ok("opened"),
            _ => {
                failures -= 1;
                Err(emfile())
            }
        });
        assert_eq!(opened.unwrap(), "opened");
        assert!(retries() >= before + 3);
    }

    #[test]
    fn other_errors_are_not_retried() {
        let mut calls = 0;
        let opened: io::Result<()> = opening("test file", || {
            calls += 1;
            Err(io::Error::from(io::ErrorKind::NotFound))
        });
        assert_eq!(opened.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(calls, 1);
    }

    #[test]
    fn the_spare_descriptor_is_freed_for_the_retry_and_taken_again() {
        keep_reserve();
        let held = || RESERVE.lock().unwrap().is_some();
        assert!(held());
        let mut first = true;
        let opened = opening("test file", || {
            if std::mem::take(&mut first) {
                return Err(emfile());
            }
            Ok(())
        });
        opened.unwrap();
        assert!(held(), "the spare is taken again after the retry");
    }
}
