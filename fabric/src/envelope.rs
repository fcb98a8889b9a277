//! Envelopes: work handed from one cell to another, signed by the sender and hash-chained
//! per channel.
//!
//! A channel is one ordered pair (sending cell, receiving cell). Its envelopes are numbered
//! from 1 (`channel_seq`), and each carries the blake3 hash of the one before it
//! (`prev_hash`, all zero for the first), so the receiver can tell a resend from a gap, a
//! duplicate from a fork. Both halves of a channel live in the cells' replicated state (the
//! board's outbox and chain heads), so that a leader change in either cell neither loses
//! nor duplicates a handoff.
//!
//! [`verify`] is every check but the chain's: version, recipient and channel, sequence 0,
//! payload size, hops, sender key and signature, clock skew, in that order, answering a typed
//! [`Refusal`]. The chain itself has one rule, [`whip_board::chain::check`], which the
//! receiving cell's apply runs; [`receive`] is both in one pure function (time comes in as
//! an argument), and a chain refusal is a [`Refusal::Chain`] carrying the board's
//! [`HandoffRefusal`] with its stable code (`gap`, `fork`, `broken_chain`,
//! `zero_sequence`).
//!
//! # Canonical encoding
//!
//! The signed bytes and the wire bytes share one fixed layout, written by hand rather than
//! derived so that it never changes under us. Integers are little-endian.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 1 | version ([`ENVELOPE_VERSION`]) |
//! | 1 | 8 | `from_cell` |
//! | 9 | 8 | `to_cell` |
//! | 17 | 8 | `channel_seq` |
//! | 25 | 32 | `prev_hash` |
//! | 57 | 8 | `sent_at_ms` |
//! | 65 | 4 | `hops` |
//! | 69 | 1 | kind tag ([`EnvelopeKind::tag`]) |
//! | 70 | 4 | payload length `n` |
//! | 74 | n | payload |
//!
//! The signature is ed25519 over [`SIGNING_CONTEXT`] followed by that layout
//! ([`Envelope::signing_bytes`]); the context keeps a cell key's envelope signatures apart
//! from anything else it might sign one day. The wire form ([`Envelope::to_bytes`]) is the
//! layout followed by the 64-byte signature, and an envelope's hash ([`Envelope::hash`]) is
//! the blake3 hash of its wire form, so the chain links whole signed envelopes. Serde
//! encodes an envelope as its wire form too.
//!
//! # Example
//!
//! ```
//! use whip_board::chain::{ChainStep, Head, HandoffRefusal};
//! use whip_fabric::envelope::{receive, Envelope, EnvelopeKind, Limits, Refusal};
//! use whip_fabric::identity::{CellIdentity, KeyRegistry};
//!
//! let sender = CellIdentity::from_secret(&[9; 32]);
//! let mut registry = KeyRegistry::new();
//! registry.insert(1, sender.public_key()).unwrap();
//! let limits = Limits::default();
//!
//! let kind = EnvelopeKind::TaskHandoff;
//! let first = Envelope::seal(&sender, 1, 2, 1, [0; 32], 1_000, 0, kind, b"task".to_vec());
//! let empty = Head { seq: 0, hash: &[] };
//! let step = receive(&registry, 2, empty, &first, 1_000, &limits);
//! assert_eq!(step, Ok(ChainStep::Accept));
//! let head = Head { seq: 1, hash: &first.hash() };
//! assert_eq!(receive(&registry, 2, head, &first, 1_000, &limits), Ok(ChainStep::Duplicate));
//! let third = Envelope::seal(&sender, 1, 2, 3, [7; 32], 1_000, 0, kind, Vec::new());
//! let gap = receive(&registry, 2, head, &third, 1_000, &limits).unwrap_err();
//! assert_eq!(gap, Refusal::Chain(HandoffRefusal::Gap { expected_seq: 2, got_seq: 3 }));
//! assert_eq!(gap.code(), "gap");
//! ```

use ed25519_dalek::{Signature, VerifyingKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
pub use whip_board::chain::HandoffRefusal;
use whip_board::chain::{self, ChainStep, Head, Link};

use crate::identity::{CellIdentity, KeyRegistry};
use crate::limits::{
    ENVELOPE_AGE_MS_MAX, ENVELOPE_CLOCK_SKEW_MS_MAX, ENVELOPE_HOPS_MAX, ENVELOPE_PAYLOAD_BYTES_MAX,
};

/// The version this build writes and reads.
pub const ENVELOPE_VERSION: u8 = 1;
/// Bytes signed before the canonical layout.
pub const SIGNING_CONTEXT: &[u8] = b"whip-fabric envelope\0";
/// Bytes of the canonical layout before the payload.
pub const HEADER_BYTES: usize = 74;
/// Bytes of a signature.
pub const SIGNATURE_BYTES: usize = 64;

/// What an envelope carries. The set is closed: an unknown tag fails to decode rather than
/// being passed through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EnvelopeKind {
    /// An unclaimed task spilling up to the fabric tier.
    TaskSpill,
    /// A task moved to the cell now responsible for it.
    TaskHandoff,
    /// A message between cells.
    Message,
    /// An acknowledgement of envelopes received.
    Ack,
}

impl EnvelopeKind {
    /// The kind's byte in the canonical layout. Tags are never reused.
    pub fn tag(self) -> u8 {
        match self {
            EnvelopeKind::TaskSpill => 1,
            EnvelopeKind::TaskHandoff => 2,
            EnvelopeKind::Message => 3,
            EnvelopeKind::Ack => 4,
        }
    }

    /// The kind with this tag, if any.
    pub fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            1 => Some(EnvelopeKind::TaskSpill),
            2 => Some(EnvelopeKind::TaskHandoff),
            3 => Some(EnvelopeKind::Message),
            4 => Some(EnvelopeKind::Ack),
            _ => None,
        }
    }
}

/// One signed handoff from `from_cell` to `to_cell`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Encoding version ([`ENVELOPE_VERSION`]).
    pub version: u8,
    /// The sending cell.
    pub from_cell: u64,
    /// The receiving cell.
    pub to_cell: u64,
    /// Position on the (from, to) channel, from 1.
    pub channel_seq: u64,
    /// Hash of the previous envelope on the channel; all zero for sequence 1.
    pub prev_hash: [u8; 32],
    /// The sender's clock when it sealed the envelope.
    pub sent_at_ms: u64,
    /// Cell boundaries the carried work has crossed before this one.
    pub hops: u32,
    /// What the payload is.
    pub kind: EnvelopeKind,
    /// The carried bytes.
    pub payload: Vec<u8>,
    /// ed25519 signature over [`Envelope::signing_bytes`].
    pub signature: [u8; 64],
}

impl Envelope {
    /// Build and sign an envelope with `identity`. Panics if the payload does not fit the
    /// layout's 32-bit length (far above any payload limit).
    #[allow(clippy::too_many_arguments)] // One argument per signed field, in layout order.
    pub fn seal(
        identity: &CellIdentity,
        from_cell: u64,
        to_cell: u64,
        channel_seq: u64,
        prev_hash: [u8; 32],
        sent_at_ms: u64,
        hops: u32,
        kind: EnvelopeKind,
        payload: Vec<u8>,
    ) -> Envelope {
        assert!(
            u32::try_from(payload.len()).is_ok(),
            "payload of {} bytes does not fit an envelope",
            payload.len()
        );
        let mut envelope = Envelope {
            version: ENVELOPE_VERSION,
            from_cell,
            to_cell,
            channel_seq,
            prev_hash,
            sent_at_ms,
            hops,
            kind,
            payload,
            signature: [0; 64],
        };
        envelope.signature = identity.sign(&envelope.signing_bytes());
        envelope
    }

    /// The fixed-layout header (everything before the payload).
    fn header(&self) -> [u8; HEADER_BYTES] {
        let payload_len =
            u32::try_from(self.payload.len()).expect("payload length checked when sealed");
        let mut out = [0u8; HEADER_BYTES];
        out[0] = self.version;
        out[1..9].copy_from_slice(&self.from_cell.to_le_bytes());
        out[9..17].copy_from_slice(&self.to_cell.to_le_bytes());
        out[17..25].copy_from_slice(&self.channel_seq.to_le_bytes());
        out[25..57].copy_from_slice(&self.prev_hash);
        out[57..65].copy_from_slice(&self.sent_at_ms.to_le_bytes());
        out[65..69].copy_from_slice(&self.hops.to_le_bytes());
        out[69] = self.kind.tag();
        out[70..74].copy_from_slice(&payload_len.to_le_bytes());
        out
    }

    /// The bytes the signature covers: [`SIGNING_CONTEXT`], then the canonical layout.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SIGNING_CONTEXT.len() + HEADER_BYTES + self.payload.len());
        out.extend_from_slice(SIGNING_CONTEXT);
        out.extend_from_slice(&self.header());
        out.extend_from_slice(&self.payload);
        out
    }

    /// The wire form: the canonical layout, then the signature.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.payload.len() + SIGNATURE_BYTES);
        out.extend_from_slice(&self.header());
        out.extend_from_slice(&self.payload);
        out.extend_from_slice(&self.signature);
        out
    }

    /// Read the wire form. The signature is not checked here (that is [`receive`]).
    pub fn from_bytes(bytes: &[u8]) -> Result<Envelope, DecodeError> {
        let min = HEADER_BYTES + SIGNATURE_BYTES;
        if bytes.is_empty() {
            return Err(DecodeError::Truncated { bytes: 0, min });
        }
        if bytes[0] != ENVELOPE_VERSION {
            return Err(DecodeError::UnsupportedVersion { version: bytes[0] });
        }
        if bytes.len() < min {
            return Err(DecodeError::Truncated {
                bytes: bytes.len(),
                min,
            });
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
        let kind =
            EnvelopeKind::from_tag(bytes[69]).ok_or(DecodeError::UnknownKind { tag: bytes[69] })?;
        let declared = u32_at(70) as usize;
        let actual = bytes.len() - min;
        if declared != actual {
            return Err(DecodeError::PayloadLength { declared, actual });
        }
        let payload_end = HEADER_BYTES + actual;
        Ok(Envelope {
            version: bytes[0],
            from_cell: u64_at(1),
            to_cell: u64_at(9),
            channel_seq: u64_at(17),
            prev_hash: bytes[25..57].try_into().expect("32"),
            sent_at_ms: u64_at(57),
            hops: u32_at(65),
            kind,
            payload: bytes[HEADER_BYTES..payload_end].to_vec(),
            signature: bytes[payload_end..].try_into().expect("64"),
        })
    }

    /// blake3 of the wire form: what the next envelope on the channel names as `prev_hash`.
    pub fn hash(&self) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.header());
        hasher.update(&self.payload);
        hasher.update(&self.signature);
        *hasher.finalize().as_bytes()
    }
}

impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.to_bytes())
    }
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes = serde_bytes::ByteBuf::deserialize(deserializer)?;
        Envelope::from_bytes(&bytes).map_err(serde::de::Error::custom)
    }
}

/// Why bytes are not an envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than a header and a signature.
    Truncated {
        /// Bytes given.
        bytes: usize,
        /// Bytes at least needed.
        min: usize,
    },
    /// A version this build cannot read.
    UnsupportedVersion {
        /// The version byte.
        version: u8,
    },
    /// A kind tag outside [`EnvelopeKind`].
    UnknownKind {
        /// The tag byte.
        tag: u8,
    },
    /// The declared payload length disagrees with the bytes present.
    PayloadLength {
        /// Length in the header.
        declared: usize,
        /// Bytes between the header and the signature.
        actual: usize,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated { bytes, min } => {
                write!(f, "envelope has {bytes} bytes, at least {min} needed")
            }
            DecodeError::UnsupportedVersion { version } => write!(
                f,
                "envelope version {version} is not supported, expected {ENVELOPE_VERSION}"
            ),
            DecodeError::UnknownKind { tag } => write!(f, "envelope kind {tag} is unknown"),
            DecodeError::PayloadLength { declared, actual } => write!(
                f,
                "envelope declares {declared} payload bytes but carries {actual}"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Bounds a receiver enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload.
    pub payload_bytes_max: usize,
    /// Most hops.
    pub hops_max: u32,
    /// How far `sent_at_ms` may be ahead of the receiver's clock (a sender clock running
    /// ahead would push deadlines computed from it).
    pub clock_skew_ms_max: u64,
    /// How far `sent_at_ms` may be behind the receiver's clock. Much larger than the skew:
    /// an envelope keeps its bytes (its hash is chained) while it waits in the outbox, so a
    /// resend after a receiver outage is old but sound, and the chain answers replays.
    pub age_ms_max: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            payload_bytes_max: ENVELOPE_PAYLOAD_BYTES_MAX,
            hops_max: ENVELOPE_HOPS_MAX,
            clock_skew_ms_max: ENVELOPE_CLOCK_SKEW_MS_MAX,
            age_ms_max: ENVELOPE_AGE_MS_MAX,
        }
    }
}

/// Why an envelope was refused. Nothing is applied on a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The sender has no key in the registry.
    UnknownSender {
        /// The sending cell.
        cell: u64,
    },
    /// The signature does not verify against the sender's registered key.
    BadSignature,
    /// The envelope is addressed to another cell.
    WrongRecipient {
        /// This cell.
        expected: u64,
        /// The envelope's `to_cell`.
        got: u64,
    },
    /// An encoding version this build cannot check.
    UnsupportedVersion {
        /// The envelope's version.
        version: u8,
    },
    /// The payload is over the limit.
    PayloadTooLarge {
        /// Payload bytes.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The envelope made too many hops.
    TooManyHops {
        /// Its hops.
        hops: u32,
        /// The limit.
        max: u32,
    },
    /// The sender's clock and ours disagree by more than the limit.
    ClockSkew {
        /// The envelope's send time.
        sent_at_ms: u64,
        /// The receiver's time.
        now_ms: u64,
        /// The limit.
        max_ms: u64,
    },
    /// The envelope does not extend its channel's chain (the board's one check): a gap,
    /// a fork, a broken chain or sequence 0.
    Chain(HandoffRefusal),
    /// The envelope is addressed to the cell that sent it, or to the meta cell: no channel
    /// runs there.
    NoChannel {
        /// The sending cell.
        from: u64,
        /// The receiving cell.
        to: u64,
    },
}

impl Refusal {
    /// A stable snake_case name of the refusal (wire verdicts, metrics).
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::UnknownSender { .. } => "unknown_sender",
            Refusal::BadSignature => "bad_signature",
            Refusal::WrongRecipient { .. } => "wrong_recipient",
            Refusal::UnsupportedVersion { .. } => "unsupported_version",
            Refusal::PayloadTooLarge { .. } => "payload_too_large",
            Refusal::TooManyHops { .. } => "too_many_hops",
            Refusal::ClockSkew { .. } => "clock_skew",
            Refusal::Chain(refusal) => refusal.code(),
            Refusal::NoChannel { .. } => "no_channel",
        }
    }
}

impl Refusal {
    /// The refusal means the two cells disagree about the channel's history (an operator
    /// must look), not merely that a message was late, lost or bad.
    pub fn raises_alarm(&self) -> bool {
        matches!(self, Refusal::Chain(refusal) if refusal.raises_alarm())
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::UnknownSender { cell } => write!(f, "cell {cell} has no registered key"),
            Refusal::BadSignature => write!(f, "envelope signature does not verify"),
            Refusal::WrongRecipient { expected, got } => {
                write!(f, "envelope is for cell {got}, this is cell {expected}")
            }
            Refusal::UnsupportedVersion { version } => write!(
                f,
                "envelope version {version} is not supported, expected {ENVELOPE_VERSION}"
            ),
            Refusal::PayloadTooLarge { bytes, max } => {
                write!(f, "payload is {bytes} bytes, max is {max}")
            }
            Refusal::TooManyHops { hops, max } => {
                write!(f, "envelope made {hops} hops, max is {max}")
            }
            Refusal::ClockSkew {
                sent_at_ms,
                now_ms,
                max_ms,
            } => write!(
                f,
                "envelope sent at {sent_at_ms} ms is {} ms from now ({now_ms} ms), max skew is \
                 {max_ms} ms",
                sent_at_ms.abs_diff(*now_ms)
            ),
            Refusal::Chain(refusal) => write!(f, "{refusal}"),
            Refusal::NoChannel { from, to } => write!(
                f,
                "no channel runs from cell {from} to cell {to} (to itself or the meta cell)"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// Check `envelope` as received by cell `me`, whose head of the envelope's channel is
/// `head`: every check of [`verify`], then the chain's ([`whip_board::chain::check`], the
/// rule the receiving cell's apply runs).
pub fn receive(
    registry: &KeyRegistry,
    me: u64,
    head: Head<'_>,
    envelope: &Envelope,
    now_ms: u64,
    limits: &Limits,
) -> Result<ChainStep, Refusal> {
    verify(registry, me, envelope, now_ms, limits)?;
    let hash = envelope.hash();
    let link = Link {
        seq: envelope.channel_seq,
        prev_hash: &envelope.prev_hash,
        hash: &hash,
    };
    chain::check(head, link).map_err(Refusal::Chain)
}

/// Every check but the chain's: version, recipient and channel, sequence 0 (the chain's own
/// rule, [`whip_board::chain::check_seq`], needing no head), size, hops, the sender's
/// signature against the registry, and clock skew. A receiver whose chain head lives in
/// replicated state (a cell) runs this before proposing, and the chain check in the apply.
pub fn verify(
    registry: &KeyRegistry,
    me: u64,
    envelope: &Envelope,
    now_ms: u64,
    limits: &Limits,
) -> Result<(), Refusal> {
    check_shape(me, envelope, limits)?;
    check_signature(registry, envelope)?;
    let (ahead, max_ms) = if envelope.sent_at_ms > now_ms {
        (envelope.sent_at_ms - now_ms, limits.clock_skew_ms_max)
    } else {
        (now_ms - envelope.sent_at_ms, limits.age_ms_max)
    };
    if ahead > max_ms {
        return Err(Refusal::ClockSkew {
            sent_at_ms: envelope.sent_at_ms,
            now_ms,
            max_ms,
        });
    }
    Ok(())
}

/// The checks that need no key: cheap, so a flood of junk costs no signature work.
fn check_shape(me: u64, envelope: &Envelope, limits: &Limits) -> Result<(), Refusal> {
    if envelope.version != ENVELOPE_VERSION {
        return Err(Refusal::UnsupportedVersion {
            version: envelope.version,
        });
    }
    if envelope.to_cell != me {
        return Err(Refusal::WrongRecipient {
            expected: me,
            got: envelope.to_cell,
        });
    }
    if envelope.from_cell == envelope.to_cell || envelope.to_cell == crate::map::META_CELL {
        return Err(Refusal::NoChannel {
            from: envelope.from_cell,
            to: envelope.to_cell,
        });
    }
    // Sequences start at 1: refused before any signature work or chain state, with the
    // chain's own rule and refusal.
    chain::check_seq(envelope.channel_seq).map_err(Refusal::Chain)?;
    check_bounds(envelope.payload.len(), envelope.hops, limits)
}

fn check_bounds(payload_bytes: usize, hops: u32, limits: &Limits) -> Result<(), Refusal> {
    if payload_bytes > limits.payload_bytes_max {
        return Err(Refusal::PayloadTooLarge {
            bytes: payload_bytes,
            max: limits.payload_bytes_max,
        });
    }
    if hops > limits.hops_max {
        return Err(Refusal::TooManyHops {
            hops,
            max: limits.hops_max,
        });
    }
    Ok(())
}

fn check_signature(registry: &KeyRegistry, envelope: &Envelope) -> Result<(), Refusal> {
    let key = registry
        .get(envelope.from_cell)
        .ok_or(Refusal::UnknownSender {
            cell: envelope.from_cell,
        })?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| Refusal::BadSignature)?;
    // Strict verification refuses malleable signatures: a second valid signature over the
    // same bytes would give the same envelope another hash and pass for a fork.
    key.verify_strict(
        &envelope.signing_bytes(),
        &Signature::from_bytes(&envelope.signature),
    )
    .map_err(|_| Refusal::BadSignature)
}

#[cfg(test)]
mod tests;
