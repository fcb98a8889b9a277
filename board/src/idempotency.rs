//! Recorded outcomes per idempotency key, kept for `limits::IDEMPOTENCY_WINDOW_MS`.
//!
//! A record whose window has passed counts as absent even before the `Tick` that prunes
//! it, so whether a retry is answered from the record depends only on the stamps.
//!
//! A record carries the digest of the request it answered (its caller and its command's
//! variant), so the key answers only that caller's retries of that command: another
//! command or another caller under the same key gets [`Outcome::KeyReused`], never the
//! recorded outcome (which could carry another caller's fences). Records written before
//! digests existed (encoding version 1) have none and answer any retry, as they did; they
//! leave within one window.

use serde::{Deserialize, Serialize};

use crate::access::Caller;
use crate::codec::{encode_versioned, versioned};
use crate::deadline::{self, Item};
use crate::keys;
use crate::limits::IDEMPOTENCY_WINDOW_MS;
use crate::txn::Txn;
use crate::types::{Command, Outcome, Request};

/// A record written before digests (encoding version 1).
#[derive(Serialize, Deserialize)]
struct RecordV1 {
    outcome: Outcome,
    expires_at_ms: u64,
    /// The routing point of the command, so the record moves with its range.
    point: Option<u64>,
}

/// The encoding version of [`Record`].
const RECORD_VERSION: u8 = 2;

#[derive(Serialize, Deserialize)]
struct Record {
    outcome: Outcome,
    expires_at_ms: u64,
    /// The routing point of the command, so the record moves with its range.
    point: Option<u64>,
    /// The digest of the request answered ([`digest`]); `None` for a version 1 record.
    digest: Option<[u8; 32]>,
}

/// What identifies a request under its key: blake3 over its proven caller and its
/// command's variant. Not the command's fields: servers fill some per attempt (the mail
/// screen verdict, a router's quota-retry flag), so a retry may carry other values, and a
/// keyed retry has always been answered from the record whatever its arguments. The
/// variant keeps an answer of one command's type from reaching another's (a `MailGrant`
/// answered `KvWritten`); the caller keeps one caller from reading another's outcome.
pub(crate) fn digest(request: &Request) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    let caller = postcard::to_stdvec(&request.caller).expect("postcard encodes a caller");
    hasher.update(&(caller.len() as u64).to_be_bytes());
    hasher.update(&caller);
    hasher.update(&variant(&request.command));
    *hasher.finalize().as_bytes()
}

/// The command's variant as postcard writes it: the leading varint of its encoding (the
/// variant's pinned code, `crate::codes`, which stored digests depend on). Encoded into a
/// buffer just big enough for the varint, so the encoding stops at the command's first
/// field (a keyed write pays for five bytes, not for its value); an encoding that overflows
/// the buffer has still written the varint whole.
fn variant(command: &Command) -> Vec<u8> {
    let mut buf = [0u8; VARINT_U32_BYTES_MAX];
    let _complete_or_cut_short = postcard::to_slice(command, &mut buf);
    let end = buf
        .iter()
        .position(|b| b & 0x80 == 0)
        .map_or(buf.len(), |i| i + 1);
    buf[..end].to_vec()
}

/// The longest varint postcard writes for a `u32` (an enum's variant index).
const VARINT_U32_BYTES_MAX: usize = 5;

/// `key` in the space of `caller`'s keys: a code for the kind of caller, the agent's name,
/// a zero byte, then the key. Two callers' keys never meet, so no caller can record an
/// outcome under a key another caller (a server's registration, say) will use.
pub(crate) fn scoped(caller: &Caller, key: &str) -> String {
    let scope = match caller {
        Caller::Anonymous => "n",
        Caller::Agent(_) => "a",
        Caller::Operator => "o",
        Caller::Server => "s",
    };
    format!("{scope}{}\0{key}", caller.agent().unwrap_or_default())
}

/// The key a client sent, without its caller's scope ([`scoped`]).
fn unscoped(key: &str) -> &str {
    key.split_once('\0').map_or(key, |(_, key)| key)
}

/// How a [`Outcome::KeyReused`] is told to a client (one wording for every shell).
pub fn reused_reason(key: &str) -> String {
    format!("idempotency key {key:?} was used by another request (another command or caller)")
}

fn read(value: &[u8]) -> Option<Record> {
    match versioned(value)? {
        (1, body) => {
            let old: RecordV1 = postcard::from_bytes(body).ok()?;
            Some(Record {
                outcome: old.outcome,
                expires_at_ms: old.expires_at_ms,
                point: old.point,
                digest: None,
            })
        }
        (RECORD_VERSION, body) => postcard::from_bytes(body).ok(),
        _ => None,
    }
}

/// Whether `value` is a record: an imported row's value must be one before
/// [`point_of`] reads it.
pub(crate) fn decodes(value: &[u8]) -> bool {
    read(value).is_some()
}

/// The routing point of a stored record (`None` for commands no range owns).
pub(crate) fn point_of(value: &[u8]) -> Option<u64> {
    stored(value).point
}

/// A record this cell wrote (or imported after [`decodes`]): one that does not decode is
/// corrupt state, so it panics as every stored value's decode does.
fn stored(value: &[u8]) -> Record {
    read(value).expect("stored idempotency record does not decode")
}

fn load(txn: &impl Txn, key: &str) -> Option<Record> {
    txn.get(&keys::idempotency(key)).map(|bytes| stored(&bytes))
}

/// The answer recorded for `key` at `now_ms`, if its window has not passed: the outcome
/// when the record answered this request (same digest, or a record without one),
/// [`Outcome::KeyReused`] when it answered another.
pub(crate) fn recorded(
    txn: &impl Txn,
    now_ms: u64,
    key: &str,
    digest: &[u8; 32],
) -> Option<Outcome> {
    let record = load(txn, key).filter(|record| record.expires_at_ms > now_ms)?;
    match record.digest {
        Some(recorded) if recorded != *digest => Some(Outcome::KeyReused {
            key: unscoped(key).into(),
        }),
        _ => Some(record.outcome),
    }
}

/// Record `outcome` for `key` at `now_ms`, replacing an expired record.
pub(crate) fn record(
    txn: &mut impl Txn,
    now_ms: u64,
    key: &str,
    digest: [u8; 32],
    outcome: &Outcome,
    point: Option<u64>,
) {
    let item = Item::Idempotency {
        key: key.to_string(),
        point,
    };
    if let Some(old) = load(txn, key) {
        deadline::remove(txn, old.expires_at_ms, &item);
    }
    let expires_at_ms = now_ms.saturating_add(IDEMPOTENCY_WINDOW_MS);
    let record = Record {
        outcome: outcome.clone(),
        expires_at_ms,
        point,
        digest: Some(digest),
    };
    txn.put(
        &keys::idempotency(key),
        &encode_versioned(RECORD_VERSION, &record),
    );
    deadline::insert(txn, expires_at_ms, &item);
}

/// Prune the record of `key` if its window has passed; returns how many were pruned.
pub(crate) fn prune(txn: &mut impl Txn, now_ms: u64, key: &str) -> u32 {
    match load(txn, key) {
        Some(old) if old.expires_at_ms <= now_ms => {
            txn.delete(&keys::idempotency(key));
            deadline::remove(
                txn,
                old.expires_at_ms,
                &Item::Idempotency {
                    key: key.to_string(),
                    point: old.point,
                },
            );
            1
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    const D: [u8; 32] = [7; 32];

    #[test]
    fn recorded_until_window_passes_then_pruned() {
        let mut txn = MemTxn::default();
        record(&mut txn, 100, "c1", D, &Outcome::LeaseReleased, None);
        let end = 100 + IDEMPOTENCY_WINDOW_MS;
        assert_eq!(
            recorded(&txn, end - 1, "c1", &D),
            Some(Outcome::LeaseReleased)
        );
        assert_eq!(recorded(&txn, end, "c1", &D), None);
        assert_eq!(deadline::next(&txn), Some(end));
        assert_eq!(prune(&mut txn, end - 1, "c1"), 0);
        assert_eq!(prune(&mut txn, end, "c1"), 1);
        assert!(txn.map.is_empty());
    }

    #[test]
    fn re_recording_moves_the_deadline() {
        let mut txn = MemTxn::default();
        record(&mut txn, 100, "c1", D, &Outcome::LeaseReleased, None);
        record(&mut txn, 200, "c1", D, &Outcome::LeaseNotHeld, None);
        assert_eq!(deadline::next(&txn), Some(200 + IDEMPOTENCY_WINDOW_MS));
        assert_eq!(txn.map.len(), 2);
    }

    #[test]
    fn another_request_under_the_key_is_told_so_not_shown_the_outcome() {
        let mut txn = MemTxn::default();
        record(&mut txn, 100, "c1", D, &Outcome::LeaseReleased, None);
        let reused = Some(Outcome::KeyReused { key: "c1".into() });
        assert_eq!(recorded(&txn, 101, "c1", &[8; 32]), reused);
    }

    /// A record of encoding version 1 (no digest) still reads, keeps its point and answers
    /// any retry, as before digests.
    #[test]
    fn a_version_one_record_still_answers() {
        let mut txn = MemTxn::default();
        let old = RecordV1 {
            outcome: Outcome::LeaseReleased,
            expires_at_ms: 500,
            point: Some(42),
        };
        let bytes = crate::codec::encode(&old);
        assert_eq!(bytes[0], 1);
        assert!(decodes(&bytes));
        assert_eq!(point_of(&bytes), Some(42));
        txn.put(&keys::idempotency("c1"), &bytes);
        assert_eq!(recorded(&txn, 499, "c1", &D), Some(Outcome::LeaseReleased));
    }

    /// The digest tells callers and command variants apart, not the arguments a server may
    /// fill differently per attempt.
    #[test]
    fn the_digest_covers_caller_and_command_variant() {
        let put = |caller: Caller, value: &[u8]| Request {
            idempotency_key: Some("c1".into()),
            command: Command::KvPut {
                key: b"k".to_vec(),
                value: value.to_vec(),
                expect_version: None,
            },
            epoch: 0,
            caller,
        };
        let alice = digest(&put(Caller::Agent("alice".into()), b"v"));
        assert_eq!(alice, digest(&put(Caller::Agent("alice".into()), b"w")));
        assert_ne!(alice, digest(&put(Caller::Agent("bob".into()), b"v")));
        let delete = Request {
            command: Command::KvDelete {
                key: b"k".to_vec(),
                expect_version: None,
            },
            ..put(Caller::Agent("alice".into()), b"v")
        };
        assert_ne!(alice, digest(&delete));
    }

    /// The short encoding reads the same variant bytes as the whole command's encoding
    /// (records already stored hold digests made from the whole encoding).
    #[test]
    fn the_variant_is_the_whole_encodings_leading_varint() {
        let commands = [
            Command::KvPut {
                key: vec![7; 300],
                value: vec![9; 4_000],
                expect_version: Some(3),
            },
            Command::KvDelete {
                key: b"k".to_vec(),
                expect_version: None,
            },
            Command::LeaseRelease {
                lease: crate::ResourceId {
                    owner: "o".into(),
                    name: "n".into(),
                    key: "k".into(),
                },
                holder: "h".into(),
            },
            Command::VoteClose {
                proposal: "crew#5".into(),
            },
        ];
        for command in commands {
            let whole = postcard::to_stdvec(&command).expect("encodes");
            let short = variant(&command);
            assert_eq!(short, whole[..short.len()], "{command:?}");
            assert_eq!(short.last().map(|b| b & 0x80), Some(0), "a whole varint");
        }
    }
}
