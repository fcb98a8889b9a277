//! The kv plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

use crate::vocab::lease::ResourceId;

/// One compare of a `KvTxnIf`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    /// The key.
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// What is compared, and the operand.
    pub target: CompareTarget,
    /// How.
    pub op: CompareOp,
}

/// One operation of a branch.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum TxnOp {
    /// Write `value` under `key`.
    Put {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
    },
    /// Delete `key` (an absent key is left as it is).
    Delete {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
    /// Read `key`.
    Get {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
}

crate::codes::stable_codes! {
    TxnOp {
        0 => Put,
        1 => Delete,
        2 => Get,
    }
}

/// The answer of one operation, in the order of its branch.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum TxnOpResult {
    /// The key was written at `version`.
    Put {
        /// Its new revision (the transaction's fence).
        version: u64,
    },
    /// The key was deleted (`version` it had) or was absent (`version` 0).
    Delete {
        /// The revision it had; 0 when nothing was deleted.
        version: u64,
    },
    /// The key's value and revision, if present.
    Get {
        /// The entry.
        entry: Option<KvEntry>,
    },
}

crate::codes::stable_codes! {
    TxnOpResult {
        0 => Put,
        1 => Delete,
        2 => Get,
    }
}

/// What a `KvPutAttached` attaches its key to.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum KvAttach {
    /// Its own deadline, `ttl_ms` after the stamp (moved on by `KvKeepalive`).
    Ttl {
        /// Time to live from the stamp.
        ttl_ms: u64,
    },
    /// `holder`'s slot of `lease`: the key is deleted in the apply that frees the slot.
    Lease {
        /// The lease.
        lease: ResourceId,
        /// The holder whose slot the key lives and dies with.
        holder: String,
    },
}

crate::codes::stable_codes! {
    KvAttach {
        0 => Ttl,
        1 => Lease,
    }
}

/// Why a command on an ephemeral key was refused; nothing changed.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum KvRefusal {
    /// The holder holds no live slot of the lease the put names.
    LeaseNotHeld {
        /// The lease.
        lease: ResourceId,
        /// The holder named.
        holder: String,
    },
    /// The key to keep alive does not exist (or its deadline already passed).
    KeyAbsent {
        /// The key, lossily as text.
        key: String,
    },
    /// The key to keep alive has no deadline of its own (a plain key, or one that lives
    /// with a lease slot: renew the lease instead).
    NoDeadline {
        /// The key, lossily as text.
        key: String,
    },
    /// The holder's slot already has the most keys attached.
    LeaseKeysFull {
        /// The bound (`KV_LEASE_KEYS_MAX`).
        max: u32,
    },
}

crate::codes::stable_codes! {
    KvRefusal {
        0 => LeaseNotHeld,
        1 => KeyAbsent,
        2 => NoDeadline,
        3 => LeaseKeysFull,
    }
}

/// How a compare relates the key's current version or value to its operand.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum CompareOp {
    /// Current `==` operand.
    Equal,
    /// Current `!=` operand.
    NotEqual,
    /// Current `<` operand (bytes compare lexicographically).
    Less,
    /// Current `>` operand.
    Greater,
}

crate::codes::stable_codes! {
    CompareOp {
        0 => Equal,
        1 => NotEqual,
        2 => Less,
        3 => Greater,
    }
}

/// What a compare reads of its key.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum CompareTarget {
    /// The key's version (its modification revision; 0 = absent).
    Version(u64),
    /// The key's value (an absent key fails every value compare).
    Value(#[serde(with = "serde_bytes")] Vec<u8>),
}

crate::codes::stable_codes! {
    CompareTarget {
        0 => Version,
        1 => Value,
    }
}

/// A CAS key's current value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvEntry {
    /// The stored bytes.
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    /// Modification revision (the fence of the write that stored it).
    pub version: u64,
}

impl TxnOp {
    /// The key the operation names.
    pub fn key(&self) -> &[u8] {
        match self {
            TxnOp::Put { key, .. } | TxnOp::Delete { key } | TxnOp::Get { key } => key,
        }
    }
}

/// Every key a transaction names: compares, then both branches.
pub fn keys<'a>(
    compares: &'a [Compare],
    success: &'a [TxnOp],
    failure: &'a [TxnOp],
) -> impl Iterator<Item = &'a [u8]> {
    let compared = compares.iter().map(|c| c.key.as_slice());
    compared.chain(success.iter().chain(failure).map(TxnOp::key))
}

/// Every key a plain transaction (`Command::KvTxn`) names: compares, puts, deletes.
pub(crate) fn plain_txn_keys<'a>(
    compares: &'a [(Vec<u8>, u64)],
    puts: &'a [(Vec<u8>, Vec<u8>)],
    deletes: &'a [Vec<u8>],
) -> impl Iterator<Item = &'a [u8]> {
    let compared = compares.iter().map(|(key, _)| key.as_slice());
    let put = puts.iter().map(|(key, _)| key.as_slice());
    compared.chain(put).chain(deletes.iter().map(Vec::as_slice))
}
