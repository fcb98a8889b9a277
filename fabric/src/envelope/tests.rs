//! Goal: every bad envelope is refused with its own typed reason, and a channel applies each
//! envelope exactly once and in order whatever the network does. Method: hand-made cases for
//! each refusal, then a property that drives a sender's envelopes through `receive` (and so
//! through the board's one chain check) with random drops, duplicates, reorders, lost acks
//! and resends.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::identity::to_hex;

const SENDER: u64 = 1;
const RECEIVER: u64 = 2;
/// Another registered cell.
const THIRD: u64 = 4;
const NOW_MS: u64 = 1_784_000_000_000;

fn sender() -> CellIdentity {
    CellIdentity::from_secret(&[11; 32])
}

fn registry() -> KeyRegistry {
    let mut registry = KeyRegistry::new();
    registry.insert(SENDER, sender().public_key()).unwrap();
    registry
        .insert(RECEIVER, CellIdentity::from_secret(&[22; 32]).public_key())
        .unwrap();
    registry
        .insert(THIRD, CellIdentity::from_secret(&[33; 32]).public_key())
        .unwrap();
    registry
}

/// A receiver of one channel: its head (sequence and hash) and what it applied.
#[derive(Default)]
struct Receiver {
    head: (u64, [u8; 32]),
    applied: Vec<u64>,
}

impl Receiver {
    fn take(&mut self, envelope: &Envelope) -> Result<ChainStep, Refusal> {
        self.take_at(envelope, NOW_MS)
    }

    fn take_at(&mut self, envelope: &Envelope, now_ms: u64) -> Result<ChainStep, Refusal> {
        let head = Head {
            seq: self.head.0,
            hash: &self.head.1,
        };
        let step = receive(
            &registry(),
            RECEIVER,
            head,
            envelope,
            now_ms,
            &Limits::default(),
        )?;
        if step == ChainStep::Accept {
            self.head = (envelope.channel_seq, envelope.hash());
            self.applied.push(envelope.channel_seq);
        }
        Ok(step)
    }
}

/// The sending half of one channel as the board's outbox keeps it: the next sequence, the
/// hash to chain from, and the envelopes not yet acknowledged, oldest first.
struct Outbox {
    next_seq: u64,
    last_hash: [u8; 32],
    pending: Vec<Envelope>,
}

impl Outbox {
    fn new() -> Self {
        Outbox {
            next_seq: 1,
            last_hash: [0; 32],
            pending: Vec::new(),
        }
    }

    /// Seal the channel's next envelope and keep it until acknowledged.
    fn send(&mut self, sent_at_ms: u64, kind: EnvelopeKind, payload: Vec<u8>) -> Envelope {
        let (seq, prev) = (self.next_seq, self.last_hash);
        let envelope = Envelope::seal(
            &sender(),
            SENDER,
            RECEIVER,
            seq,
            prev,
            sent_at_ms,
            0,
            kind,
            payload,
        );
        self.next_seq += 1;
        self.last_hash = envelope.hash();
        self.pending.push(envelope.clone());
        envelope
    }

    /// The receiver has everything up to `seq`.
    fn ack(&mut self, seq: u64) {
        let acknowledged = self.pending.partition_point(|e| e.channel_seq <= seq);
        self.pending.drain(..acknowledged);
    }

    /// The pending envelopes from `seq` on.
    fn resend_from(&self, seq: u64) -> &[Envelope] {
        let from = self.pending.partition_point(|e| e.channel_seq < seq);
        &self.pending[from..]
    }
}

/// `count` envelopes of one channel, sent one second apart ending at `NOW_MS`.
fn chain(count: u64) -> Vec<Envelope> {
    let mut outbox = Outbox::new();
    (1..=count)
        .map(|i| {
            let sent_at_ms = NOW_MS - (count - i) * 1_000;
            let payload = format!("task {i}").into_bytes();
            outbox.send(sent_at_ms, EnvelopeKind::TaskHandoff, payload)
        })
        .collect()
}

fn chained(refusal: HandoffRefusal) -> Refusal {
    Refusal::Chain(refusal)
}

fn one(payload: Vec<u8>, hops: u32, sent_at_ms: u64) -> Envelope {
    Envelope::seal(
        &sender(),
        SENDER,
        RECEIVER,
        1,
        [0; 32],
        sent_at_ms,
        hops,
        EnvelopeKind::Message,
        payload,
    )
}

#[test]
fn a_chain_of_envelopes_is_accepted_in_order() {
    let envelopes = chain(5);
    let mut receiver = Receiver::default();
    for envelope in &envelopes {
        assert_eq!(receiver.take(envelope), Ok(ChainStep::Accept));
        assert_eq!(receiver.head, (envelope.channel_seq, envelope.hash()));
    }
    assert_eq!(receiver.applied, vec![1, 2, 3, 4, 5]);
    assert_eq!(envelopes[0].prev_hash, [0; 32]);
    for pair in envelopes.windows(2) {
        assert_eq!(
            pair[1].prev_hash,
            pair[0].hash(),
            "each links the one before"
        );
    }
}

#[test]
fn a_tampered_envelope_fails_its_signature() {
    let envelopes = chain(2);
    let mut tampered = envelopes[0].clone();
    tampered.payload[0] ^= 1;
    let mut receiver = Receiver::default();
    assert_eq!(receiver.take(&tampered), Err(Refusal::BadSignature));
    // Every signed field is covered, not only the payload.
    let edits: [fn(&mut Envelope); 6] = [
        |e| e.hops = 1,
        |e| e.sent_at_ms -= 1,
        |e| e.kind = EnvelopeKind::TaskSpill,
        |e| e.prev_hash[0] = 1,
        |e| e.channel_seq = 7,
        |e| e.signature[10] ^= 1,
    ];
    for edit in edits {
        let mut tampered = envelopes[0].clone();
        edit(&mut tampered);
        assert_eq!(receiver.take(&tampered), Err(Refusal::BadSignature));
    }
    // A message signed by the sender but relabelled as coming from another cell.
    let mut relabelled = envelopes[0].clone();
    relabelled.from_cell = THIRD;
    assert_eq!(receiver.take(&relabelled), Err(Refusal::BadSignature));
    // Relabelled as coming from the receiver itself: no channel runs there at all.
    relabelled.from_cell = RECEIVER;
    assert_eq!(
        receiver.take(&relabelled),
        Err(Refusal::NoChannel {
            from: RECEIVER,
            to: RECEIVER
        })
    );
    assert!(receiver.applied.is_empty());
    assert!(
        receiver.take(&envelopes[0]).is_ok(),
        "the original still passes"
    );
}

#[test]
fn an_envelope_signed_by_another_key_fails_its_signature() {
    let impostor = CellIdentity::from_secret(&[99; 32]);
    let envelope = Envelope::seal(
        &impostor,
        SENDER,
        RECEIVER,
        1,
        [0; 32],
        NOW_MS,
        0,
        EnvelopeKind::TaskHandoff,
        b"task".to_vec(),
    );
    assert_eq!(
        Receiver::default().take(&envelope),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn an_unregistered_sender_is_unknown() {
    let stranger = CellIdentity::from_secret(&[33; 32]);
    let envelope = Envelope::seal(
        &stranger,
        3,
        RECEIVER,
        1,
        [0; 32],
        NOW_MS,
        0,
        EnvelopeKind::Message,
        Vec::new(),
    );
    assert_eq!(
        Receiver::default().take(&envelope),
        Err(Refusal::UnknownSender { cell: 3 })
    );
}

#[test]
fn a_replay_is_acknowledged_again_and_not_applied() {
    let envelopes = chain(3);
    let mut receiver = Receiver::default();
    for envelope in &envelopes {
        receiver.take(envelope).unwrap();
    }
    assert_eq!(
        receiver.take(&envelopes[2]),
        Ok(ChainStep::Duplicate),
        "the head"
    );
    // The receiver keeps only its head's hash, and still applies nothing twice.
    assert_eq!(
        receiver.take(&envelopes[0]),
        Ok(ChainStep::Duplicate),
        "below the head"
    );
    assert_eq!(receiver.applied, vec![1, 2, 3], "applied once each");
}

#[test]
fn an_envelope_ahead_of_its_turn_asks_for_a_resend() {
    let envelopes = chain(3);
    let mut receiver = Receiver::default();
    receiver.take(&envelopes[0]).unwrap();
    let gap = chained(HandoffRefusal::Gap {
        expected_seq: 2,
        got_seq: 3,
    });
    assert_eq!(receiver.take(&envelopes[2]), Err(gap.clone()));
    assert_eq!(gap.code(), "gap");
    assert!(!gap.raises_alarm());
    let mut fresh = Receiver::default();
    assert_eq!(
        fresh.take(&envelopes[1]),
        Err(chained(HandoffRefusal::Gap {
            expected_seq: 1,
            got_seq: 2
        }))
    );
    receiver.take(&envelopes[1]).unwrap();
    receiver.take(&envelopes[2]).unwrap();
    assert_eq!(receiver.applied, vec![1, 2, 3]);
}

#[test]
fn another_envelope_at_the_head_is_a_fork() {
    let envelopes = chain(3);
    let mut receiver = Receiver::default();
    for envelope in &envelopes {
        receiver.take(envelope).unwrap();
    }
    let forge = |at: u64| {
        let original = &envelopes[at as usize - 1];
        Envelope::seal(
            &sender(),
            SENDER,
            RECEIVER,
            at,
            original.prev_hash,
            original.sent_at_ms,
            0,
            EnvelopeKind::TaskHandoff,
            b"something else".to_vec(),
        )
    };
    let refusal = receiver.take(&forge(3)).unwrap_err();
    assert_eq!(refusal, chained(HandoffRefusal::Fork { seq: 3 }));
    assert_eq!(refusal.code(), "fork");
    assert!(refusal.raises_alarm());
    // Below the head the receiver keeps no hash: acknowledged, never applied.
    assert_eq!(receiver.take(&forge(1)), Ok(ChainStep::Duplicate));
    assert_eq!(receiver.applied, vec![1, 2, 3]);
}

#[test]
fn an_envelope_not_linked_to_the_head_breaks_the_chain() {
    let envelopes = chain(2);
    let mut receiver = Receiver::default();
    receiver.take(&envelopes[0]).unwrap();
    let unlinked = Envelope::seal(
        &sender(),
        SENDER,
        RECEIVER,
        2,
        [7; 32],
        NOW_MS,
        0,
        EnvelopeKind::TaskHandoff,
        b"task 2".to_vec(),
    );
    let refusal = receiver.take(&unlinked).unwrap_err();
    assert_eq!(refusal, chained(HandoffRefusal::BrokenChain { seq: 2 }));
    assert_eq!(refusal.code(), "broken_chain");
    assert!(refusal.raises_alarm());
    let first_with_a_past = Envelope::seal(
        &sender(),
        SENDER,
        RECEIVER,
        1,
        [7; 32],
        NOW_MS,
        0,
        EnvelopeKind::TaskHandoff,
        Vec::new(),
    );
    assert_eq!(
        Receiver::default().take(&first_with_a_past),
        Err(chained(HandoffRefusal::BrokenChain { seq: 1 }))
    );
}

#[test]
fn sequence_zero_is_refused_on_an_empty_head_and_on_a_later_one() {
    let mut receiver = Receiver::default();
    let zero = Envelope::seal(
        &sender(),
        SENDER,
        RECEIVER,
        0,
        [0; 32],
        NOW_MS,
        0,
        EnvelopeKind::TaskHandoff,
        Vec::new(),
    );
    let refusal = receiver.take(&zero).unwrap_err();
    assert_eq!(
        refusal,
        chained(HandoffRefusal::ZeroSequence),
        "sequences start at 1"
    );
    assert_eq!(refusal.code(), "zero_sequence");
    assert!(!refusal.raises_alarm(), "malformed, not a disagreement");
    receiver.take(&chain(1)[0]).unwrap();
    assert_eq!(receiver.take(&zero), Err(refusal));
    // Found before any signature work, like the other shape checks.
    let mut unsigned = zero.clone();
    unsigned.signature = [0; 64];
    assert_eq!(
        Receiver::default().take(&unsigned),
        Err(chained(HandoffRefusal::ZeroSequence))
    );
    assert_eq!(receiver.applied, vec![1]);
}

#[test]
fn an_oversized_payload_is_refused() {
    let max = ENVELOPE_PAYLOAD_BYTES_MAX;
    let at_limit = one(vec![0; max], 0, NOW_MS);
    assert!(Receiver::default().take(&at_limit).is_ok());
    let over = one(vec![0; max + 1], 0, NOW_MS);
    assert_eq!(
        Receiver::default().take(&over),
        Err(Refusal::PayloadTooLarge {
            bytes: max + 1,
            max
        })
    );
}

#[test]
fn too_many_hops_are_refused() {
    assert!(
        Receiver::default()
            .take(&one(Vec::new(), 8, NOW_MS))
            .is_ok()
    );
    assert_eq!(
        Receiver::default().take(&one(Vec::new(), 9, NOW_MS)),
        Err(Refusal::TooManyHops { hops: 9, max: 8 })
    );
}

#[test]
fn a_skewed_clock_is_refused_either_way() {
    let (ahead, age) = (ENVELOPE_CLOCK_SKEW_MS_MAX, ENVELOPE_AGE_MS_MAX);
    // A resend after an outage is old but sound: only a far older one is refused.
    for sent_at_ms in [NOW_MS - ahead - 1, NOW_MS - age, NOW_MS + ahead] {
        assert!(
            Receiver::default()
                .take(&one(Vec::new(), 0, sent_at_ms))
                .is_ok()
        );
    }
    for (sent_at_ms, max_ms) in [
        (NOW_MS - age - 1, age),
        (NOW_MS + ahead + 1, ahead),
        (0, age),
        (u64::MAX, ahead),
    ] {
        assert_eq!(
            Receiver::default().take(&one(Vec::new(), 0, sent_at_ms)),
            Err(Refusal::ClockSkew {
                sent_at_ms,
                now_ms: NOW_MS,
                max_ms
            })
        );
    }
}

#[test]
fn an_envelope_for_another_cell_is_refused() {
    let mut elsewhere = chain(1).remove(0);
    elsewhere.to_cell = 5;
    assert_eq!(
        Receiver::default().take(&elsewhere),
        Err(Refusal::WrongRecipient {
            expected: RECEIVER,
            got: 5
        })
    );
}

#[test]
fn an_unknown_version_is_refused() {
    let mut future = chain(1).remove(0);
    future.version = 2;
    assert_eq!(
        Receiver::default().take(&future),
        Err(Refusal::UnsupportedVersion { version: 2 })
    );
}

#[test]
fn checks_run_cheapest_first() {
    // Oversized, too many hops, skewed and badly signed: the size is reported, found
    // before any signature work.
    let mut envelope = one(vec![0; ENVELOPE_PAYLOAD_BYTES_MAX + 1], 9, 0);
    envelope.signature = [0; 64];
    assert!(matches!(
        Receiver::default().take(&envelope),
        Err(Refusal::PayloadTooLarge { .. })
    ));
    // Skewed and out of order: the skew is reported.
    let late = &chain(3)[2];
    assert!(matches!(
        Receiver::default().take_at(late, NOW_MS + ENVELOPE_AGE_MS_MAX + 1),
        Err(Refusal::ClockSkew { .. })
    ));
}

#[test]
fn the_wire_form_round_trips_and_unknown_kinds_fail_to_decode() {
    let envelope = chain(2).remove(1);
    let bytes = envelope.to_bytes();
    assert_eq!(
        bytes.len(),
        HEADER_BYTES + envelope.payload.len() + SIGNATURE_BYTES
    );
    assert_eq!(Envelope::from_bytes(&bytes), Ok(envelope.clone()));
    assert_eq!(envelope.hash(), *blake3::hash(&bytes).as_bytes());
    let postcard_bytes = postcard::to_allocvec(&envelope).unwrap();
    assert_eq!(
        postcard::from_bytes::<Envelope>(&postcard_bytes).unwrap(),
        envelope
    );
    let json = serde_json::to_string(&envelope).unwrap();
    assert_eq!(serde_json::from_str::<Envelope>(&json).unwrap(), envelope);

    let mut unknown = bytes.clone();
    unknown[69] = 200;
    assert_eq!(
        Envelope::from_bytes(&unknown),
        Err(DecodeError::UnknownKind { tag: 200 })
    );
    let mut zero_kind = bytes.clone();
    zero_kind[69] = 0;
    assert_eq!(
        Envelope::from_bytes(&zero_kind),
        Err(DecodeError::UnknownKind { tag: 0 })
    );
    let unknown_in_postcard = postcard::to_allocvec(serde_bytes::Bytes::new(&unknown)).unwrap();
    assert!(postcard::from_bytes::<Envelope>(&unknown_in_postcard).is_err());
    assert!(serde_json::from_str::<EnvelopeKind>("\"Telegram\"").is_err());
    for tag in 0..=u8::MAX {
        if let Some(kind) = EnvelopeKind::from_tag(tag) {
            assert_eq!(kind.tag(), tag);
        }
    }
}

#[test]
fn malformed_wire_bytes_fail_to_decode() {
    let bytes = chain(1).remove(0).to_bytes();
    let min = HEADER_BYTES + SIGNATURE_BYTES;
    assert_eq!(
        Envelope::from_bytes(&[]),
        Err(DecodeError::Truncated { bytes: 0, min })
    );
    assert_eq!(
        Envelope::from_bytes(&bytes[..min - 1]),
        Err(DecodeError::Truncated {
            bytes: min - 1,
            min
        })
    );
    let payload = bytes.len() - min;
    assert_eq!(
        Envelope::from_bytes(&bytes[..bytes.len() - 1]),
        Err(DecodeError::PayloadLength {
            declared: payload,
            actual: payload - 1
        })
    );
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        Envelope::from_bytes(&longer),
        Err(DecodeError::PayloadLength { .. })
    ));
    let mut future = bytes.clone();
    future[0] = 2;
    assert_eq!(
        Envelope::from_bytes(&future),
        Err(DecodeError::UnsupportedVersion { version: 2 })
    );
}

/// The layout is a stored and signed format: it must not drift.
#[test]
fn the_canonical_layout_is_pinned() {
    let envelope = Envelope::seal(
        &sender(),
        0x0102030405060708,
        0x1112131415161718,
        0x2122232425262728,
        [0xaa; 32],
        0x3132333435363738,
        0x41424344,
        EnvelopeKind::Ack,
        b"xyz".to_vec(),
    );
    let signed = envelope.signing_bytes();
    assert_eq!(&signed[..SIGNING_CONTEXT.len()], SIGNING_CONTEXT);
    let layout = &signed[SIGNING_CONTEXT.len()..];
    let mut expected = vec![ENVELOPE_VERSION];
    expected.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
    expected.extend_from_slice(&[0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11]);
    expected.extend_from_slice(&[0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21]);
    expected.extend_from_slice(&[0xaa; 32]);
    expected.extend_from_slice(&[0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31]);
    expected.extend_from_slice(&[0x44, 0x43, 0x42, 0x41]);
    expected.push(4);
    expected.extend_from_slice(&[3, 0, 0, 0]);
    expected.extend_from_slice(b"xyz");
    assert_eq!(layout, &expected[..]);
    assert_eq!(&envelope.to_bytes()[..layout.len()], layout);
    // ed25519 signatures are deterministic, so the whole envelope's hash is fixed too.
    assert_eq!(
        to_hex(&envelope.hash()),
        PINNED_HASH,
        "the canonical encoding or signing changed"
    );
}

const PINNED_HASH: &str = "fbe0d1ac3528039bad87fd6a56bfa3d3ce422b15573b16e58b75b2e064414e41";

#[test]
fn refusals_read_as_lowercase_sentences_with_their_numbers() {
    let cases = [
        (
            Refusal::UnknownSender { cell: 7 },
            "cell 7 has no registered key",
        ),
        (Refusal::BadSignature, "envelope signature does not verify"),
        (
            Refusal::WrongRecipient {
                expected: 2,
                got: 5,
            },
            "envelope is for cell 5, this is cell 2",
        ),
        (
            Refusal::UnsupportedVersion { version: 3 },
            "envelope version 3 is not supported, expected 1",
        ),
        (
            Refusal::PayloadTooLarge { bytes: 10, max: 4 },
            "payload is 10 bytes, max is 4",
        ),
        (
            Refusal::TooManyHops { hops: 9, max: 8 },
            "envelope made 9 hops, max is 8",
        ),
        (
            Refusal::ClockSkew {
                sent_at_ms: 100,
                now_ms: 40_100,
                max_ms: 30_000,
            },
            "envelope sent at 100 ms is 40000 ms from now (40100 ms), max skew is 30000 ms",
        ),
        (
            Refusal::NoChannel { from: 2, to: 2 },
            "no channel runs from cell 2 to cell 2 (to itself or the meta cell)",
        ),
        (
            chained(HandoffRefusal::Gap {
                expected_seq: 2,
                got_seq: 3,
            }),
            "gap: expected sequence 2, got 3",
        ),
        (
            chained(HandoffRefusal::Fork { seq: 3 }),
            "fork at sequence 3: another envelope was applied there",
        ),
        (
            chained(HandoffRefusal::BrokenChain { seq: 4 }),
            "broken chain at sequence 4: the previous hash is not the last applied one's",
        ),
        (
            chained(HandoffRefusal::ZeroSequence),
            "sequence 0: channel sequences start at 1",
        ),
    ];
    for (refusal, text) in cases {
        assert_eq!(refusal.to_string(), text);
        let alarm = matches!(
            refusal,
            Refusal::Chain(HandoffRefusal::Fork { .. } | HandoffRefusal::BrokenChain { .. })
        );
        assert_eq!(refusal.raises_alarm(), alarm, "{refusal}");
        if let Refusal::Chain(chain) = &refusal {
            assert_eq!(refusal.code(), chain.code(), "the board's code, unchanged");
        }
    }
}

/// One thing the network or the sender does next.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// The sender seals its next envelope and puts it on the wire.
    Send,
    /// The envelope at this index (modulo) arrives and leaves the wire.
    Deliver(usize),
    /// A copy of the envelope at this index arrives; the original stays on the wire.
    DeliverCopy(usize),
    /// The envelope at this index is lost.
    Drop(usize),
    /// The sender times out and puts every pending envelope on the wire again.
    Resend,
    /// The next acknowledgement (or resend request) is lost.
    LoseReply,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Send),
        4 => any::<usize>().prop_map(Step::Deliver),
        2 => any::<usize>().prop_map(Step::DeliverCopy),
        2 => any::<usize>().prop_map(Step::Drop),
        1 => Just(Step::Resend),
        1 => Just(Step::LoseReply),
    ]
}

/// What a run saw, for the coverage check.
#[derive(Default)]
struct Seen {
    accepts: usize,
    duplicates: usize,
    gaps: usize,
}

/// Play `steps`, then let the sender resend until every envelope is acknowledged. Every
/// envelope must be applied exactly once and in order, and no delivery may be refused for
/// anything but a gap.
fn run(total: u64, steps: &[Step]) -> Result<Seen, TestCaseError> {
    let mut outbox = Outbox::new();
    let mut receiver = Receiver::default();
    let mut wire: Vec<Envelope> = Vec::new();
    let mut seen = Seen::default();
    let mut lose_reply = false;
    let mut deliver = |envelope: &Envelope,
                       outbox: &mut Outbox,
                       receiver: &mut Receiver,
                       wire: &mut Vec<Envelope>,
                       lose_reply: &mut bool|
     -> Result<(), TestCaseError> {
        let verdict = receiver.take(envelope);
        let reply_lost = std::mem::take(lose_reply);
        match verdict {
            Ok(ChainStep::Accept) => seen.accepts += 1,
            Ok(ChainStep::Duplicate) => seen.duplicates += 1,
            Err(Refusal::Chain(HandoffRefusal::Gap { expected_seq, .. })) => {
                seen.gaps += 1;
                if !reply_lost {
                    wire.extend_from_slice(outbox.resend_from(expected_seq));
                }
                return Ok(());
            }
            Err(refusal) => {
                return Err(TestCaseError::fail(format!(
                    "envelope {} refused: {refusal}",
                    envelope.channel_seq
                )));
            }
        }
        if !reply_lost {
            outbox.ack(envelope.channel_seq);
        }
        Ok(())
    };
    let send = |outbox: &mut Outbox, wire: &mut Vec<Envelope>| {
        if outbox.next_seq <= total {
            let payload = outbox.next_seq.to_le_bytes().to_vec();
            wire.push(outbox.send(NOW_MS, EnvelopeKind::TaskSpill, payload));
        }
    };
    for &step in steps {
        match step {
            Step::Send => send(&mut outbox, &mut wire),
            Step::Deliver(at) if !wire.is_empty() => {
                let envelope = wire.remove(at % wire.len());
                deliver(
                    &envelope,
                    &mut outbox,
                    &mut receiver,
                    &mut wire,
                    &mut lose_reply,
                )?;
            }
            Step::DeliverCopy(at) if !wire.is_empty() => {
                let envelope = wire[at % wire.len()].clone();
                deliver(
                    &envelope,
                    &mut outbox,
                    &mut receiver,
                    &mut wire,
                    &mut lose_reply,
                )?;
            }
            Step::Drop(at) if !wire.is_empty() => {
                wire.remove(at % wire.len());
            }
            Step::Resend => wire.extend_from_slice(outbox.resend_from(1)),
            Step::LoseReply => lose_reply = true,
            Step::Deliver(_) | Step::DeliverCopy(_) | Step::Drop(_) => {}
        }
    }
    // The network heals: whatever is still on the wire arrives, then the sender sends the
    // rest and resends on every timeout until nothing is pending.
    for envelope in std::mem::take(&mut wire) {
        deliver(
            &envelope,
            &mut outbox,
            &mut receiver,
            &mut wire,
            &mut lose_reply,
        )?;
    }
    for _ in 0..=total {
        send(&mut outbox, &mut wire);
    }
    let mut rounds = 0;
    while !outbox.pending.is_empty() || !wire.is_empty() {
        rounds += 1;
        prop_assert!(rounds <= 2 * total + 4, "the channel does not drain");
        wire.extend_from_slice(outbox.resend_from(1));
        for envelope in std::mem::take(&mut wire) {
            deliver(
                &envelope,
                &mut outbox,
                &mut receiver,
                &mut wire,
                &mut lose_reply,
            )?;
        }
    }
    let expected: Vec<u64> = (1..=total).collect();
    prop_assert_eq!(&receiver.applied, &expected, "applied once each, in order");
    prop_assert_eq!(outbox.next_seq, total + 1);
    Ok(seen)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_channel_applies_each_envelope_once_and_in_order(
        total in 1u64..12,
        steps in prop::collection::vec(step(), 0..80),
    ) {
        run(total, &steps)?;
    }
}

/// The generator must reach duplicates and gaps, or the property proves little.
#[test]
fn generated_runs_reach_duplicates_and_gaps() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(step(), 60);
    let mut kinds = BTreeSet::new();
    for _ in 0..40 {
        let steps = strategy.new_tree(&mut runner).expect("generates").current();
        let seen = run(8, &steps).expect("the property holds");
        for (count, kind) in [
            (seen.accepts, "accept"),
            (seen.duplicates, "duplicate"),
            (seen.gaps, "gap"),
        ] {
            if count > 0 {
                kinds.insert(kind);
            }
        }
    }
    assert_eq!(kinds.len(), 3, "reached {kinds:?}");
}
