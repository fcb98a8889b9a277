//! The watch plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

/// One page of a watch read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchPage {
    /// Matching events in revision order, ending on a whole revision.
    pub events: Vec<KvEvent>,
    /// Where the next read starts: every event below it has been looked at.
    pub next_from: u64,
    /// Events below this revision are gone; a read from below it is `compacted`.
    pub compacted_below: u64,
    /// The read stopped at its scan bound: read again at once from `next_from`.
    pub more: bool,
    /// This cell still holds the watched key's range (always for a prefix or a standalone
    /// cell): a key whose range moved away is followed on its new cell.
    pub serving: bool,
}

/// One change of a client key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvEvent {
    /// The fence of the command that made the change.
    pub revision: u64,
    /// The client key.
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// Put or delete.
    pub kind: EventKind,
    /// The value written (empty for a delete).
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    /// The key's version after the change (0 after a delete).
    pub version: u64,
}

/// What happened to a key. Stored as its [`EventKind::code`]; codes never change.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum EventKind {
    /// The key was written.
    Put,
    /// The key was deleted.
    Delete,
}

crate::codes::stable_codes! {
    EventKind {
        0 => Put,
        1 => Delete,
    }
}
