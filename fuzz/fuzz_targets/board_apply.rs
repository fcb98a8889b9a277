//! `whip_board::apply` over arbitrary request sequences on the in-memory `MemTxn`.
//!
//! The input is a run of postcard items `(advance_ms: u16, request: Request,
//! query: Option<Query>)`: the clock moves on by `advance_ms`, the request applies at the
//! next log index, then the query (if any) reads. Checked on every input:
//! - nothing panics (a panic in apply is a crashed state machine on every replica);
//! - a retry of a request with an idempotency key, at the next index and the same time,
//!   answers the first outcome again and changes no byte (applied once);
//! - replaying the same sequence on a fresh store gives the same outcomes and the same
//!   bytes (every replica of a cell agrees).
//!
//! `WHIP_FUZZ_SEEDS=DIR` writes the seed corpus into DIR and exits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use whip_board::access::Caller;
use whip_board::{BoardSettings, Command, MemTxn, Outcome, Query, Request, Reset, ResourceId};
use whip_board::{Stamp, apply, query};

/// Most requests one input applies: enough for claim, expiry and redelivery chains.
const STEPS_MAX: usize = 64;
const START_MS: u64 = 1_784_000_000_000;

type Item = (u16, Request, Option<Query>);

fn items(mut data: &[u8]) -> Vec<Item> {
    let mut out = Vec::new();
    while out.len() < STEPS_MAX {
        match postcard::take_from_bytes::<Item>(data) {
            Ok((item, rest)) => {
                out.push(item);
                data = rest;
            }
            Err(_) => break,
        }
    }
    out
}

fn stamp(index: u64, time_ms: u64) -> Stamp {
    Stamp {
        index,
        position: 0,
        time_ms,
    }
}

/// Apply `items` to a fresh store; return the outcomes and the final store.
fn run(items: &[Item], retry: bool) -> (Vec<Outcome>, MemTxn) {
    let mut txn = MemTxn::default();
    let (mut index, mut time_ms) = (1u64, START_MS);
    let mut outcomes = Vec::new();
    for (advance_ms, request, read) in items {
        time_ms += u64::from(*advance_ms);
        let outcome = apply(&mut txn, stamp(index, time_ms), request).outcome;
        index += 1;
        // A keyed request takes two indexes either way, so fences agree between runs.
        if request.idempotency_key.is_some() {
            if retry {
                let before = txn.map.clone();
                let again = apply(&mut txn, stamp(index, time_ms), request).outcome;
                assert_eq!(again, outcome, "a retry answered differently: {request:?}");
                assert!(txn.map == before, "a retry changed the store: {request:?}");
            }
            index += 1;
        }
        if let Some(read) = read {
            let _ = query(&txn, time_ms, read);
        }
        outcomes.push(outcome);
    }
    (outcomes, txn)
}

fuzz_target!(
    init: whip_fuzz::write_seeds_if_asked(write_seeds),
    |data: &[u8]| {
        let items = items(data);
        let (first, _) = run(&items, true);
        let (again, txn) = run(&items, false);
        let (replayed, replica) = run(&items, false);
        assert_eq!(again, replayed, "two replicas answered differently");
        assert!(txn == replica, "two replicas hold different bytes");
        // The retries changed nothing: the first answers are the replicas' answers.
        assert_eq!(first, again, "retries changed later answers");
    }
);

fn res(owner: &str, name: &str, key: &str) -> ResourceId {
    ResourceId {
        owner: owner.into(),
        name: name.into(),
        key: key.into(),
    }
}

fn keyed(key: &str, caller: Caller, command: Command) -> Request {
    Request::by(caller, Some(key.into()), command)
}

fn primitives() -> Vec<Item> {
    let lease = res("o", "deploy", "prod");
    vec![
        (
            0,
            Request::new(
                None,
                Command::KvPut {
                    key: b"a".to_vec(),
                    value: b"1".to_vec(),
                    expect_version: Some(0),
                },
            ),
            Some(Query::KvGet { key: b"a".to_vec() }),
        ),
        (
            5,
            keyed(
                "c/1",
                Caller::Operator,
                Command::LeaseAcquire {
                    lease: lease.clone(),
                    holder: "h1".into(),
                    slots: 1,
                    ttl_ms: 1_000,
                    wait_ms: 0,
                },
            ),
            None,
        ),
        (
            5,
            keyed(
                "c/2",
                Caller::Operator,
                Command::LeaseAcquire {
                    lease: lease.clone(),
                    holder: "h2".into(),
                    slots: 1,
                    ttl_ms: 1_000,
                    wait_ms: 500,
                },
            ),
            None,
        ),
        (2_000, Request::new(None, Command::Tick), None),
        (
            1,
            Request::new(
                None,
                Command::CounterConsume {
                    counter: res("o", "tokens", "k"),
                    amount: 3,
                    cap: 10,
                    reset: Reset::Daily,
                    timezone: "UTC".into(),
                },
            ),
            None,
        ),
        (
            1,
            Request::new(
                None,
                Command::LedgerAppend {
                    ledger: res("o", "log", "p"),
                    entry: b"e".to_vec(),
                    appended_by: "me".into(),
                    retain_ms: 0,
                },
            ),
            None,
        ),
        (
            1,
            Request::new(
                None,
                Command::KvDelete {
                    key: b"a".to_vec(),
                    expect_version: None,
                },
            ),
            None,
        ),
    ]
}

fn board(caller: &str) -> Vec<Item> {
    let agent = Caller::Agent(caller.into());
    let team = "t".to_string();
    vec![
        (
            0,
            Request::by(
                agent.clone(),
                None,
                Command::TeamCreate {
                    team: team.clone(),
                    caller: caller.into(),
                    parent: None,
                    ancestors: vec![],
                    settings: BoardSettings::default(),
                },
            ),
            None,
        ),
        (
            1,
            keyed(
                "a/1",
                agent.clone(),
                Command::BoardPost {
                    team: team.clone(),
                    caller: caller.into(),
                    body: b"job".to_vec(),
                },
            ),
            None,
        ),
        (
            1,
            keyed(
                "a/2",
                agent.clone(),
                Command::BoardClaim {
                    team: team.clone(),
                    caller: caller.into(),
                    worker: caller.into(),
                },
            ),
            None,
        ),
        (40_000, Request::new(None, Command::Tick), None),
        (
            1,
            Request::by(
                agent,
                None,
                Command::BoardClaim {
                    team,
                    caller: caller.into(),
                    worker: caller.into(),
                },
            ),
            None,
        ),
    ]
}

fn write_seeds(dir: &std::path::Path) {
    let mut all = primitives();
    all.extend(board("alice"));
    let sets = [
        ("primitives", primitives()),
        ("board", board("alice")),
        ("all", all),
    ];
    for (name, items) in sets {
        let mut bytes = Vec::new();
        for item in &items {
            bytes.extend(postcard::to_stdvec(item).expect("seeds encode"));
        }
        std::fs::write(dir.join(name), bytes).expect("seed file");
    }
}
