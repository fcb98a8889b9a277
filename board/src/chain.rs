//! The chain check of a cross-cell handoff channel: one rule, used by the receiving cell's
//! apply of [`crate::Command::HandoffReceive`] and by the fabric's pure envelope check
//! alike, with one typed refusal ([`HandoffRefusal`]) whose
//! [`code`](HandoffRefusal::code) is stable.
//!
//! A channel's envelopes are numbered from 1 and each names the hash of the one before it
//! (all zero for the first). The receiver keeps a [`Head`]: the last sequence it applied
//! and that envelope's hash (sequence 0 and no hash before the first). Against the head an
//! envelope ([`Link`]) is, checked in this order:
//!
//! 1. sequence 0: malformed whatever the head ([`HandoffRefusal::ZeroSequence`], no alarm);
//! 2. at the head's sequence with another hash: a fork (alarm);
//! 3. at or below the head otherwise: a duplicate, answered again and applied once (the
//!    head keeps no older hashes, so below it a different envelope is not told from a
//!    replay; it is never applied all the same);
//! 4. more than one past the head: a gap (the sender resends from the head);
//! 5. next but naming another previous hash than the head's: a broken chain (alarm);
//! 6. next and linked: accepted.
//!
//! Pure: no clock, no keys (signatures and bounds are checked before, by the node).
//!
//! ```
//! use whip_board::chain::{self, ChainStep, HandoffRefusal, Head, Link};
//! let empty = Head { seq: 0, hash: &[] };
//! let first = Link { seq: 1, prev_hash: &[0; 32], hash: &[1; 32] };
//! assert_eq!(chain::check(empty, first), Ok(ChainStep::Accept));
//! let zero = Link { seq: 0, ..first };
//! assert_eq!(chain::check(empty, zero), Err(HandoffRefusal::ZeroSequence));
//! assert_eq!(HandoffRefusal::ZeroSequence.code(), "zero_sequence");
//! ```

use serde::{Deserialize, Serialize};

/// Bytes of a channel hash.
pub const HASH_BYTES: usize = 32;

/// What the first envelope of a channel names as previous.
const ZERO_HASH: [u8; HASH_BYTES] = [0; HASH_BYTES];

/// Where the receiver of a channel stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head<'a> {
    /// The last sequence applied (0 before the first).
    pub seq: u64,
    /// Its hash; empty (or all zero) before the first.
    pub hash: &'a [u8],
}

impl Head<'_> {
    /// The sequence the receiver can accept next.
    pub fn next_seq(&self) -> u64 {
        self.seq.saturating_add(1)
    }

    /// The head's hash, the zero hash before the first envelope.
    fn hash_or_zero(&self) -> &[u8] {
        if self.hash.is_empty() {
            &ZERO_HASH
        } else {
            self.hash
        }
    }
}

/// An arriving envelope's place on its channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link<'a> {
    /// Its channel sequence.
    pub seq: u64,
    /// The hash of the envelope it follows.
    pub prev_hash: &'a [u8],
    /// Its own hash.
    pub hash: &'a [u8],
}

/// What to do with an envelope the chain admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainStep {
    /// Next in line: apply it; the head becomes its sequence and hash.
    Accept,
    /// Applied before: acknowledge again, apply nothing.
    Duplicate,
}

/// Why an envelope does not extend its channel's chain. Nothing is applied on a refusal;
/// a fork or a broken chain means the two cells disagree about the channel's history and
/// raises an alarm ([`HandoffRefusal::raises_alarm`]).
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(remote = "Self")]
pub enum HandoffRefusal {
    /// Envelopes are missing before this one: the sender resends from `expected_seq`.
    #[error("gap: expected sequence {expected_seq}, got {got_seq}")]
    Gap {
        /// The next sequence the receiver can accept.
        expected_seq: u64,
        /// The envelope's sequence.
        got_seq: u64,
    },
    /// Another envelope was applied at this sequence (the head's).
    #[error("fork at sequence {seq}: another envelope was applied there")]
    Fork {
        /// The sequence.
        seq: u64,
    },
    /// The envelope is next in line but names another previous hash than the head's.
    #[error("broken chain at sequence {seq}: the previous hash is not the last applied one's")]
    BrokenChain {
        /// The envelope's sequence.
        seq: u64,
    },
    /// Sequence 0: channels number their envelopes from 1, so nothing can precede it.
    #[error("sequence 0: channel sequences start at 1")]
    ZeroSequence,
}

crate::codes::stable_codes! {
    HandoffRefusal {
        0 => Gap,
        1 => Fork,
        2 => BrokenChain,
        3 => ZeroSequence,
    }
}

impl HandoffRefusal {
    /// A stable snake_case name of the refusal (the `Deliver` verdict, metrics).
    pub fn code(&self) -> &'static str {
        match self {
            HandoffRefusal::Gap { .. } => "gap",
            HandoffRefusal::Fork { .. } => "fork",
            HandoffRefusal::BrokenChain { .. } => "broken_chain",
            HandoffRefusal::ZeroSequence => "zero_sequence",
        }
    }

    /// The cells disagree about the channel's history (an operator must look), not merely
    /// an envelope late, lost or malformed.
    pub fn raises_alarm(&self) -> bool {
        match self {
            HandoffRefusal::Fork { .. } | HandoffRefusal::BrokenChain { .. } => true,
            HandoffRefusal::Gap { .. } | HandoffRefusal::ZeroSequence => false,
        }
    }
}

/// The rule on the sequence alone: 0 is refused. Cheap, so a receiver can run it before
/// any signature work; [`check`] runs it first too.
pub fn check_seq(seq: u64) -> Result<(), HandoffRefusal> {
    match seq {
        0 => Err(HandoffRefusal::ZeroSequence),
        _ => Ok(()),
    }
}

/// Check `link` against the receiver's `head` (see the module docs for the order).
pub fn check(head: Head<'_>, link: Link<'_>) -> Result<ChainStep, HandoffRefusal> {
    check_seq(link.seq)?;
    if link.seq <= head.seq {
        if link.seq == head.seq && link.hash != head.hash_or_zero() {
            return Err(HandoffRefusal::Fork { seq: link.seq });
        }
        return Ok(ChainStep::Duplicate);
    }
    let expected_seq = head.next_seq();
    if link.seq > expected_seq {
        return Err(HandoffRefusal::Gap {
            expected_seq,
            got_seq: link.seq,
        });
    }
    if link.prev_hash != head.hash_or_zero() {
        return Err(HandoffRefusal::BrokenChain { seq: link.seq });
    }
    Ok(ChainStep::Accept)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: Head<'static> = Head { seq: 0, hash: &[] };
    const H1: [u8; 32] = [1; 32];
    const H2: [u8; 32] = [2; 32];
    const H3: [u8; 32] = [3; 32];

    /// The head after envelopes 1 and 2 (hashes `H1`, `H2`).
    fn at_two() -> Head<'static> {
        Head { seq: 2, hash: &H2 }
    }

    fn link<'a>(seq: u64, prev_hash: &'a [u8], hash: &'a [u8]) -> Link<'a> {
        Link {
            seq,
            prev_hash,
            hash,
        }
    }

    #[test]
    fn the_next_linked_envelope_is_accepted() {
        assert_eq!(
            check(EMPTY, link(1, &ZERO_HASH, &H1)),
            Ok(ChainStep::Accept)
        );
        let zeros = Head {
            seq: 0,
            hash: &ZERO_HASH,
        };
        assert_eq!(
            check(zeros, link(1, &ZERO_HASH, &H1)),
            Ok(ChainStep::Accept)
        );
        assert_eq!(check(at_two(), link(3, &H2, &H3)), Ok(ChainStep::Accept));
    }

    #[test]
    fn an_envelope_at_or_below_the_head_is_a_duplicate() {
        assert_eq!(check(at_two(), link(2, &H1, &H2)), Ok(ChainStep::Duplicate));
        assert_eq!(
            check(at_two(), link(1, &ZERO_HASH, &H1)),
            Ok(ChainStep::Duplicate)
        );
        // Below the head no hash is kept: a different envelope there is not told apart.
        assert_eq!(check(at_two(), link(1, &H3, &H3)), Ok(ChainStep::Duplicate));
    }

    #[test]
    fn an_envelope_past_the_next_is_a_gap() {
        let gap = HandoffRefusal::Gap {
            expected_seq: 3,
            got_seq: 5,
        };
        assert_eq!(check(at_two(), link(5, &H3, &H3)), Err(gap.clone()));
        assert_eq!(
            check(EMPTY, link(2, &H1, &H2)),
            Err(HandoffRefusal::Gap {
                expected_seq: 1,
                got_seq: 2
            })
        );
        assert_eq!(gap.code(), "gap");
        assert!(!gap.raises_alarm());
        assert_eq!(gap.to_string(), "gap: expected sequence 3, got 5");
    }

    #[test]
    fn another_hash_at_the_head_is_a_fork() {
        let fork = HandoffRefusal::Fork { seq: 2 };
        assert_eq!(check(at_two(), link(2, &H1, &H3)), Err(fork.clone()));
        assert_eq!(fork.code(), "fork");
        assert!(fork.raises_alarm());
        assert_eq!(
            fork.to_string(),
            "fork at sequence 2: another envelope was applied there"
        );
    }

    #[test]
    fn a_next_envelope_not_linked_to_the_head_breaks_the_chain() {
        let broken = HandoffRefusal::BrokenChain { seq: 3 };
        assert_eq!(check(at_two(), link(3, &H1, &H3)), Err(broken.clone()));
        assert_eq!(
            check(EMPTY, link(1, &H3, &H1)),
            Err(HandoffRefusal::BrokenChain { seq: 1 }),
            "the first names the zero hash"
        );
        assert_eq!(broken.code(), "broken_chain");
        assert!(broken.raises_alarm());
        assert_eq!(
            broken.to_string(),
            "broken chain at sequence 3: the previous hash is not the last applied one's"
        );
    }

    #[test]
    fn sequence_zero_is_refused_on_an_empty_head_and_on_a_later_one() {
        let zero = HandoffRefusal::ZeroSequence;
        // On an empty head it would otherwise pass for the head itself (a duplicate).
        assert_eq!(check(EMPTY, link(0, &ZERO_HASH, &[])), Err(zero.clone()));
        assert_eq!(check(EMPTY, link(0, &ZERO_HASH, &H1)), Err(zero.clone()));
        assert_eq!(check(at_two(), link(0, &ZERO_HASH, &H2)), Err(zero.clone()));
        assert_eq!(check_seq(0), Err(zero.clone()));
        assert_eq!(check_seq(1), Ok(()));
        assert_eq!(zero.code(), "zero_sequence");
        assert!(!zero.raises_alarm());
        assert_eq!(zero.to_string(), "sequence 0: channel sequences start at 1");
    }

    #[test]
    fn a_head_at_the_last_sequence_does_not_overflow() {
        let last = Head {
            seq: u64::MAX,
            hash: &H1,
        };
        assert_eq!(last.next_seq(), u64::MAX);
        assert_eq!(
            check(last, link(u64::MAX, &H3, &H1)),
            Ok(ChainStep::Duplicate)
        );
    }

    #[test]
    fn refusals_survive_their_stored_encoding() {
        let refusals = [
            HandoffRefusal::Gap {
                expected_seq: 3,
                got_seq: 5,
            },
            HandoffRefusal::Fork { seq: 2 },
            HandoffRefusal::BrokenChain { seq: 3 },
            HandoffRefusal::ZeroSequence,
        ];
        for refusal in refusals {
            let bytes = crate::codec::encode(&refusal);
            assert_eq!(crate::codec::decode::<HandoffRefusal>(&bytes), refusal);
        }
    }
}
