//! Envelope decoding and verification (`whip_fabric::envelope`). Two halves per input:
//!
//! 1. The input as wire bytes: `Envelope::from_bytes`; a decoded envelope re-encodes to the
//!    very same bytes (one canonical layout), and `receive` at cell 2 with the input's own
//!    chain head answers without panicking. The registry holds the seed envelopes' sender
//!    key, so the corpus reaches the signature and chain checks.
//! 2. The input as the fields of an envelope sealed with that key: `receive` then refuses
//!    it only for a reason the fields give (never the signature), and a one-bit change of
//!    its wire bytes is never accepted as the same envelope.
#![no_main]

use libfuzzer_sys::fuzz_target;
use whip_board::chain::{ChainStep, Head};
use whip_fabric::envelope::{Limits, receive};
use whip_fabric::{CellIdentity, Envelope, EnvelopeKind, KeyRegistry, Refusal};

const SENDER: u64 = 1;
const RECEIVER: u64 = 2;
const NOW_MS: u64 = 1_784_000_000_000;

fn sender() -> CellIdentity {
    CellIdentity::from_secret(&[11; 32])
}

/// An envelope of the channel SENDER → RECEIVER, signed with the sender's key.
fn seal(
    seq: u64,
    prev: [u8; 32],
    sent_at_ms: u64,
    hops: u32,
    kind: EnvelopeKind,
    payload: Vec<u8>,
) -> Envelope {
    Envelope::seal(
        &sender(),
        SENDER,
        RECEIVER,
        seq,
        prev,
        sent_at_ms,
        hops,
        kind,
        payload,
    )
}

fn registry() -> KeyRegistry {
    let mut registry = KeyRegistry::new();
    registry
        .insert(SENDER, sender().public_key())
        .expect("a fresh registry");
    registry
}

/// A chain head made of the input's last 40 bytes (sequence, hash), or the empty head.
fn head_of(data: &[u8]) -> (u64, [u8; 32]) {
    if data.len() < 40 {
        return (0, [0; 32]);
    }
    let tail = &data[data.len() - 40..];
    let seq = u64::from_le_bytes(tail[..8].try_into().expect("8"));
    (seq, tail[8..].try_into().expect("32"))
}

fn wire(data: &[u8], registry: &KeyRegistry) {
    let Ok(envelope) = Envelope::from_bytes(data) else {
        return;
    };
    assert_eq!(envelope.to_bytes(), data, "the wire layout is canonical");
    let (seq, hash) = head_of(data);
    let head = Head { seq, hash: &hash };
    let _ = receive(
        registry,
        RECEIVER,
        head,
        &envelope,
        NOW_MS,
        &Limits::default(),
    );
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = data.get(at + i).copied().unwrap_or(0);
    }
    u64::from_le_bytes(bytes)
}

fn sealed(data: &[u8], registry: &KeyRegistry) {
    let seq = u64_at(data, 0) % 4;
    let sent_at_ms = NOW_MS
        .wrapping_add(u64_at(data, 8) % 2_000_000)
        .wrapping_sub(1_000_000);
    let hops = (u64_at(data, 16) % 40) as u32;
    let kind = EnvelopeKind::from_tag(data.first().copied().unwrap_or(0) % 8)
        .unwrap_or(EnvelopeKind::from_tag(1).expect("tag 1 is a kind"));
    let payload = data.get(24..).unwrap_or_default().to_vec();
    let prev = [0u8; 32];
    let envelope = seal(seq, prev, sent_at_ms, hops, kind, payload);
    let head = Head {
        seq: 0,
        hash: &[0; 32],
    };
    let limits = Limits::default();
    match receive(registry, RECEIVER, head, &envelope, NOW_MS, &limits) {
        Ok(step) => assert_eq!(step, ChainStep::Accept, "the first envelope of a channel"),
        Err(Refusal::BadSignature { .. } | Refusal::UnknownSender { .. }) => {
            panic!("a sealed envelope's signature was refused")
        }
        Err(_) => {}
    }
    let bytes = envelope.to_bytes();
    let bit = (u64_at(data, 4) as usize) % (bytes.len() * 8);
    let mut flipped = bytes.clone();
    flipped[bit / 8] ^= 1 << (bit % 8);
    if let Ok(forged) = Envelope::from_bytes(&flipped) {
        let verdict = receive(registry, RECEIVER, head, &forged, NOW_MS, &limits);
        assert!(verdict.is_err(), "a changed bit was accepted: bit {bit}");
    }
}

fuzz_target!(
    init: whip_fuzz::write_seeds_if_asked(write_seeds),
    |data: &[u8]| {
        let registry = registry();
        wire(data, &registry);
        sealed(data, &registry);
    }
);

/// Sealed envelopes of the channel 1 → 2 (each kind, the first two of a chain), with the
/// receiver's head as the input's last 40 bytes where `wire` reads it.
fn write_seeds(dir: &std::path::Path) {
    let mut prev = [0u8; 32];
    for seq in 1..=2u64 {
        for tag in 0..8u8 {
            let Some(kind) = EnvelopeKind::from_tag(tag) else {
                continue;
            };
            let payload = format!("payload {seq} {tag}").into_bytes();
            let envelope = seal(seq, prev, NOW_MS, 0, kind, payload);
            let mut bytes = envelope.to_bytes();
            std::fs::write(dir.join(format!("seq{seq}-kind{tag}")), &bytes).expect("seed");
            bytes.extend_from_slice(&(seq - 1).to_le_bytes());
            bytes.extend_from_slice(&prev);
            std::fs::write(dir.join(format!("seq{seq}-kind{tag}-head")), &bytes).expect("seed");
            if tag == 1 && seq == 1 {
                prev = envelope.hash();
            }
        }
    }
}
