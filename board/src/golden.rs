//! Goal: no stored encoding changes unnoticed, and a store written by an older build stays
//! readable. Method: every stored enum (the list in `stored_enums!`) has one deterministic
//! sample per variant (`crate::sample`), encoded as the codec stores it (version byte, then
//! postcard).
//!
//! - `testdata/encoding/golden.txt` holds those bytes as this build must write them, one
//!   line per variant of every pinned enum (`crate::codes`); a changed byte, a variant
//!   without a line or a line without a variant fails. Change a line only with a new
//!   encoding version that keeps reading the old bytes.
//! - `testdata/encoding/v1.txt` is frozen: the same samples as written by the build before
//!   explicit variant codes (its ignored test `print_v1_fixture` printed it). This build
//!   must decode every line of it to the sample of that variant.
//!
//! `board/src` may not touch files (`tests/purity.rs`), so both files are compiled in and a
//! new line is taken from the failure message (or from the ignored `print_golden`).

use std::fmt::Write as _;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::codec;
use crate::codes::StableCodes;
use crate::sample;

const GOLDEN: &str = include_str!("../testdata/encoding/golden.txt");
const V1: &str = include_str!("../testdata/encoding/v1.txt");

const GOLDEN_HEADER: &str = "\
# Encoded samples of every variant of every pinned enum, as this build stores them.
# A change here is a change of stored bytes: bump the encoding version, keep reading the
# old one, and only then update the line. See docs/ARCHITECTURE.md, Stored encodings.
# enum code variant hex(version byte + postcard)
";

/// The advice every failure repeats.
const BUMP: &str = "a stored encoding changed: bump codec::VERSION (and the cell's \
    ENCODING_VERSION), keep reading the old version, and never reuse a code";

trait Pinned: StableCodes + Serialize + DeserializeOwned + std::fmt::Debug + PartialEq {}

impl<T: StableCodes + Serialize + DeserializeOwned + std::fmt::Debug + PartialEq> Pinned for T {}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex {text:?}");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digits"))
        .collect()
}

/// The sample of `T`'s variant stored under `code`, checked to be that variant.
fn sample_of<T: Pinned>(code: u32) -> T {
    let value: T = sample::nth(code)
        .unwrap_or_else(|e| panic!("{} has no sample of code {code}: {e}", T::ENUM));
    assert_eq!(value.stable_code(), code, "the sample {value:?}");
    value
}

/// The Rust name of a value's variant: its `Debug` starts with it (the serde name of a
/// renamed variant differs).
fn variant_of<T: Pinned>(value: &T) -> String {
    let debug = format!("{value:?}");
    debug
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The golden lines of every variant of `T`, by code.
fn lines_of<T: Pinned>(out: &mut String) {
    let mut codes: Vec<u32> = T::CODES.iter().map(|(code, _)| *code).collect();
    codes.sort_unstable();
    for code in codes {
        let value: T = sample_of(code);
        let bytes = hex(&codec::encode(&value));
        writeln!(out, "{} {code} {} {bytes}", T::ENUM, variant_of(&value)).expect("a string");
    }
    let past = T::CODES.iter().map(|(code, _)| code + 1).max().unwrap_or(0);
    assert!(
        sample::nth::<T>(past).is_err(),
        "{} decodes code {past}, which it does not list",
        T::ENUM
    );
}

/// Decodes one `v1.txt` line of `T` and compares it with this build's sample.
fn read_v1<T: Pinned>(code: u32, variant: &str, bytes: &[u8]) {
    let stored: T = codec::decode(bytes);
    assert_eq!(variant_of(&stored), variant, "v1 {} code {code}", T::ENUM);
    let expected: T = sample_of(code);
    assert_eq!(
        stored,
        expected,
        "v1 {}::{variant} reads as another value",
        T::ENUM
    );
}

/// Calls `$f!(args; Name = path, ...)` with every enum the board stores or carries in its
/// Raft log: rows, deadline entries, idempotency records, events, commands and outcomes,
/// and everything they contain. Each is pinned by `crate::codes::stable_codes!`.
macro_rules! stored_enums {
    ($f:ident, $($args:tt)*) => {
        $f!($($args)*;
            Caller = crate::access::Caller,
            AccessRefusal = crate::access::AccessRefusal,
            HandoffRefusal = crate::chain::HandoffRefusal,
            Item = crate::deadline::Item,
            KvAttach = crate::ephemeral::KvAttach,
            KvRefusal = crate::ephemeral::KvRefusal,
            Attachment = crate::ephemeral::Attachment,
            CompareOp = crate::kv_txn::CompareOp,
            CompareTarget = crate::kv_txn::CompareTarget,
            TxnOp = crate::kv_txn::TxnOp,
            TxnOpResult = crate::kv_txn::TxnOpResult,
            MailType = crate::mail::MailType,
            Address = crate::mail::Address,
            Trust = crate::mail::Trust,
            ExternalScreen = crate::mail::ExternalScreen,
            MailRefusal = crate::mail::MailRefusal,
            Query = crate::query::Query,
            ReadRefusal = crate::query::ReadRefusal,
            QueryResult = crate::query::QueryResult,
            MessageKind = crate::query::MessageKind,
            FollowUp = crate::next::FollowUp,
            RangeRefusal = crate::range::RangeRefusal,
            PathRefusal = crate::reservation::PathRefusal,
            Verdict = crate::screen::Verdict,
            FindingKind = crate::screen::FindingKind,
            Method = crate::tally::Method,
            Threshold = crate::tally::Threshold,
            RoundKind = crate::tally::RoundKind,
            Reset = crate::types::Reset,
            Command = crate::types::Command,
            Outcome = crate::types::Outcome,
            Tier = crate::types::Tier,
            TaskState = crate::types::TaskState,
            BoardRefusal = crate::types::BoardRefusal,
            AgentRefusal = crate::register::AgentRefusal,
            Role = crate::vote::Role,
            Ineligible = crate::vote::Ineligible,
            VoteRefusal = crate::vote::VoteRefusal,
            VoteOutcome = crate::vote::VoteOutcome,
            CloseReason = crate::vote::CloseReason,
            ProposalState = crate::vote::ProposalState,
            EventKind = crate::watch::EventKind,
            WorkKind = crate::work::WorkKind,
            Signal = crate::work::Signal,
            SignalReason = crate::work::SignalReason,
            WorkLimit = crate::work::WorkLimit,
            WorkRefusal = crate::work::WorkRefusal,
            AuditAction = crate::work::AuditAction,
        )
    };
}

macro_rules! render_all {
    ($out:expr; $($name:ident = $path:path,)*) => {
        $(
            assert_eq!(<$path as StableCodes>::ENUM, stringify!($name));
            lines_of::<$path>($out);
        )*
    };
}

macro_rules! read_line {
    ($line:expr; $($name:ident = $path:path,)*) => {
        match $line {
            $((stringify!($name), code, variant, bytes) => {
                read_v1::<$path>(code, variant, bytes)
            })*
            (other, ..) => panic!("v1.txt names {other}, which is not a stored enum"),
        }
    };
}

fn render() -> String {
    let mut text = String::from(GOLDEN_HEADER);
    stored_enums!(render_all, &mut text);
    text
}

/// `(enum code variant, hex)` of every line of a fixture.
fn entries(text: &str) -> Vec<(String, String)> {
    let lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty());
    lines
        .map(|line| {
            let (head, hex) = line.rsplit_once(' ').expect("a line ends in its hex");
            (head.to_string(), hex.to_string())
        })
        .collect()
}

/// Prints the golden file as this build writes it:
/// `cargo test -p whip-board --lib print_golden -- --ignored --nocapture`.
#[test]
#[ignore = "writes the golden file to stdout"]
fn print_golden() {
    print!("{}", render());
}

#[test]
fn every_stored_variant_encodes_to_its_golden_bytes() {
    let golden = entries(GOLDEN);
    let ours = entries(&render());
    let mut failures = Vec::new();
    for (head, hex) in &ours {
        match golden.iter().find(|(h, _)| h == head) {
            Some((_, old)) if old == hex => {}
            Some((_, old)) => failures.push(format!("{head}: golden {old}, now {hex}")),
            None => failures.push(format!("{head}: no golden line; add `{head} {hex}`")),
        }
    }
    for (head, _) in &golden {
        if !ours.iter().any(|(h, _)| h == head) {
            failures.push(format!(
                "{head}: golden line of no variant (codes are never reused)"
            ));
        }
    }
    assert!(failures.is_empty(), "{BUMP}:\n{}", failures.join("\n"));
}

#[test]
fn a_store_written_before_explicit_codes_reads_the_same_values() {
    let entries = entries(V1);
    assert!(
        entries.len() > 400,
        "v1.txt holds every variant of its time"
    );
    for (head, hex) in &entries {
        let mut words = head.split(' ');
        let (name, code, variant) = (words.next(), words.next(), words.next());
        let code: u32 = code.and_then(|c| c.parse().ok()).expect("a code");
        let line = (
            name.expect("an enum"),
            code,
            variant.expect("a variant"),
            &unhex(hex)[..],
        );
        stored_enums!(read_line, line);
    }
}

#[test]
fn an_unknown_code_is_refused_not_misread() {
    use crate::types::{Command, Outcome};
    let past = |codes: &[(u32, &str)]| codes.iter().map(|(c, _)| c + 1).max().unwrap();
    let command = [codec::VERSION, past(Command::CODES) as u8];
    let error = codec::decode_checked::<Command>(&command).unwrap_err();
    assert!(
        matches!(error, codec::DecodeError::Malformed { .. }),
        "{error}"
    );
    let outcome = [codec::VERSION, past(Outcome::CODES) as u8];
    assert!(codec::try_decode::<Outcome>(&outcome).is_none());
}

/// The fence layout is part of what apply derives from the log, not of any stored row: a
/// member replaying an entry (after a restart, or catching up) must hand out the very
/// fences the leader's apply did, so `Stamp::of_request` and `Stamp::nth_fence` may never
/// change for an entry already written. A change of `FENCES_PER_COMMAND` or of the
/// position's 16 bits needs a new encoding of the cell's `Batch` that keeps the old layout
/// for entries of the old encoding.
#[test]
fn the_fence_layout_of_an_entry_is_pinned() {
    use crate::Stamp;
    assert_eq!(crate::limits::FENCES_PER_COMMAND, 16, "{BUMP}");
    assert_eq!(crate::limits::BATCH_COMMANDS_MAX, 1 << 16, "{BUMP}");
    let cases: [(u64, u32, u32, u64); 5] = [
        (1, 0, 0, 0x1_0000),
        (1, 1, 0, 0x1_0010),
        (7, 3, 2, 0x7_0032),
        (0x1234, 4095, 15, 0x1234_ffff),
        (u64::MAX >> 16, 0, 1, 0xffff_ffff_ffff_0001),
    ];
    for (index, request, k, fence) in cases {
        let stamp = Stamp::of_request(index, request, 0);
        assert_eq!(
            stamp.nth_fence(k),
            fence,
            "entry {index} request {request} fence {k}"
        );
    }
}
