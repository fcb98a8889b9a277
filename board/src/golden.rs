//! Goal: a store written by an older build stays readable. Method: `testdata/encoding/v1.txt`
//! holds, for every stored enum, one sample of each variant (`crate::sample`) as the build
//! before explicit variant codes encoded it (version byte 1, then postcard); the test checks
//! that this build still encodes every sample to exactly those bytes.
//! The ignored test `print_v1_fixture` printed the file once, from that older build.

use std::fmt::Write as _;

use crate::codec;
use crate::sample;

/// Lines `Enum code Variant hex` for every variant of `T`, the codes counted from 0.
fn lines_of<T>(name: &str, out: &mut String)
where
    T: for<'de> serde::Deserialize<'de> + serde::Serialize + std::fmt::Debug,
{
    let mut code = 0u32;
    loop {
        let value: T = match sample::nth(code) {
            Ok(value) => value,
            Err(error) => {
                let text = error.to_string();
                assert!(text.contains("variant"), "{name} {code}: {text}");
                assert!(code > 0, "{name} has no sample");
                return;
            }
        };
        let debug = format!("{value:?}");
        let variant: String = debug
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let hex: String = codec::encode(&value)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        writeln!(out, "{name} {code} {variant} {hex}").expect("writing to a string");
        code += 1;
    }
}

/// Calls `$f!(Name, path)` for every enum the board stores or carries in its log.
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
        $(lines_of::<$path>(stringify!($name), $out);)*
    };
}

/// The fixture, compiled in (`board/src` may not touch files, see `tests/purity.rs`).
const V1: &str = include_str!("../testdata/encoding/v1.txt");

const HEADER: &str = "\
# Encoded samples of every stored enum variant, written by the build before explicit
# variant codes (encoding version 1). Frozen: never rewrite; later builds must read it.
# enum code variant hex(version byte + postcard)
";

fn render() -> String {
    let mut text = String::from(HEADER);
    stored_enums!(render_all, &mut text);
    text
}

/// Prints the fixture as this build writes it (how `testdata/encoding/v1.txt` was made):
/// `cargo test -p whip-board --lib print_v1_fixture -- --ignored --nocapture`.
#[test]
#[ignore = "writes the fixture to stdout"]
fn print_v1_fixture() {
    print!("{}", render());
}

#[test]
fn v1_fixture_matches_this_build() {
    assert_eq!(V1, render(), "a stored encoding changed");
}
