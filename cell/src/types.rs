//! The openraft type configuration of a cell and the payload of its log entries.

use std::io::Cursor;

use serde::{Deserialize, Serialize};
use whip_board::{Outcome, Request};

/// The payload of one Raft entry: many client requests proposed together, stamped with the
/// leader's time. Apply gives the `i`-th request the stamp `(entry index, i, time)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Leader wall clock at proposal (ms since the Unix epoch). Apply uses
    /// `max(time_ms, last applied time)` so stamps never go backward across leaders.
    pub time_ms: u64,
    /// The requests, in proposal order.
    pub requests: Vec<Request>,
}

impl std::fmt::Display for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "batch of {} at {}", self.requests.len(), self.time_ms)
    }
}

/// The outcomes of one entry's requests, in the same order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchOutcome {
    /// One outcome per request.
    pub outcomes: Vec<Outcome>,
}

openraft::declare_raft_types!(
    /// openraft types of a cell: node ids are u64, nodes carry their gRPC address.
    pub TypeConfig:
        D = Batch,
        R = BatchOutcome,
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
        Responder = crate::answer::Answer,
);

/// A cell member's id.
pub type NodeId = u64;
/// A cell's Raft handle.
pub type Raft = openraft::Raft<TypeConfig>;
/// A storage error of a cell.
pub type StorageError = openraft::StorageError<NodeId>;
/// A log id.
pub type LogId = openraft::LogId<NodeId>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;

/// The first byte of every stored value and Raft payload: bump it when a shape changes and
/// keep reading the old one.
pub const ENCODING_VERSION: u8 = 1;

/// Encode `value` as a version byte followed by postcard.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![ENCODING_VERSION];
    out.extend(postcard::to_stdvec(value).expect("postcard encodes every in-memory value"));
    out
}

/// Decode a value written by [`encode`].
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, String> {
    match bytes.split_first() {
        Some((&ENCODING_VERSION, rest)) => postcard::from_bytes(rest).map_err(|e| e.to_string()),
        Some((v, _)) => Err(format!("unknown encoding version {v}")),
        None => Err("empty encoding".to_string()),
    }
}
