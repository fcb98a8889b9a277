//! `KvTxnIf`: an etcd-like transaction over client keys, decided in one apply. Every
//! compare (a key's version or value against an operand) is evaluated; when all hold, the
//! `success` operations run in order, otherwise the `failure` ones. Operations put,
//! delete or get one key; every put of the transaction gets this command's fence as its
//! revision, and a get sees the writes before it in the same branch.
//!
//! A compare on the value of an absent key never holds (whatever its operator, as in
//! etcd); a version compare reads an absent key as version 0. A put here is a plain put:
//! it lets go of whatever the key was attached to. Keys whose deadline or lease ran out
//! are settled first, so the transaction sees them absent.

pub use crate::vocab::kv::{Compare, CompareOp, CompareTarget, TxnOp, TxnOpResult, keys};

use crate::kv::{self, Space};
use crate::limits::{KV_TXN_BYTES_MAX, KV_TXN_GETS_MAX, KV_TXN_OPS_MAX};
use crate::txn::Txn;
use crate::types::{Outcome, Stamp};

impl CompareOp {
    fn holds<T: Ord + ?Sized>(self, current: &T, operand: &T) -> bool {
        match self {
            CompareOp::Equal => current == operand,
            CompareOp::NotEqual => current != operand,
            CompareOp::Less => current < operand,
            CompareOp::Greater => current > operand,
        }
    }
}

fn compare_holds(txn: &impl Txn, compare: &Compare) -> bool {
    let entry = kv::get(txn, &compare.key);
    match (&compare.target, entry) {
        (CompareTarget::Version(operand), entry) => {
            let current = entry.map_or(0, |e| e.version);
            compare.op.holds(&current, operand)
        }
        (CompareTarget::Value(_), None) => false,
        (CompareTarget::Value(operand), Some(entry)) => {
            compare.op.holds(entry.value.as_slice(), operand.as_slice())
        }
    }
}

/// Evaluate every compare and run the branch it chooses, in one apply.
pub(crate) fn apply(
    txn: &mut impl Txn,
    stamp: Stamp,
    (compares, success, failure): (&[Compare], &[TxnOp], &[TxnOp]),
) -> Outcome {
    for key in keys(compares, success, failure) {
        crate::ephemeral::settle(txn, stamp, key);
    }
    let succeeded = compares.iter().all(|c| compare_holds(txn, c));
    let branch = if succeeded { success } else { failure };
    let responses = (branch.iter())
        .map(|op| match op {
            TxnOp::Put { key, value } => TxnOpResult::Put {
                version: kv::store_row(txn, stamp, (Space::Client, key), value, None),
            },
            TxnOp::Delete { key } => TxnOpResult::Delete {
                version: kv::erase_row(txn, stamp, Space::Client, key).unwrap_or(0),
            },
            TxnOp::Get { key } => TxnOpResult::Get {
                entry: kv::get(txn, key),
            },
        })
        .collect();
    Outcome::KvTxnDone {
        succeeded,
        fence: stamp.fence(),
        responses,
    }
}

/// A branch may not put one key twice, nor put and delete one key.
fn check_branch(name: &str, ops: &[TxnOp]) -> Result<(), String> {
    let mut puts = std::collections::BTreeSet::new();
    let mut deletes = std::collections::BTreeSet::new();
    for op in ops {
        let fresh = match op {
            TxnOp::Put { key, .. } => puts.insert(key.as_slice()),
            TxnOp::Delete { key } => deletes.insert(key.as_slice()),
            TxnOp::Get { .. } => true,
        };
        if !fresh || puts.intersection(&deletes).next().is_some() {
            return Err(format!(
                "kv txn {name} writes key {:?} twice",
                String::from_utf8_lossy(op.key())
            ));
        }
    }
    Ok(())
}

/// Bounds of a `KvTxnIf`: at least one compare or operation, at most `KV_TXN_OPS_MAX`
/// of them and `KV_TXN_GETS_MAX` gets, keys of names' length, values within
/// `value_bytes_max` and all bytes within `KV_TXN_BYTES_MAX`.
pub(crate) fn check(
    (compares, success, failure): (&[Compare], &[TxnOp], &[TxnOp]),
    value_bytes_max: usize,
    name: impl Fn(&str, usize) -> Result<(), String>,
) -> Result<(), String> {
    let ops = compares.len() + success.len() + failure.len();
    if ops == 0 {
        return Err("kv txn is empty".into());
    }
    if ops > KV_TXN_OPS_MAX {
        return Err(format!(
            "kv txn has {ops} compares and operations, limit is {KV_TXN_OPS_MAX}"
        ));
    }
    let gets = (success.iter().chain(failure))
        .filter(|op| matches!(op, TxnOp::Get { .. }))
        .count();
    if gets > KV_TXN_GETS_MAX {
        return Err(format!(
            "kv txn has {gets} gets, limit is {KV_TXN_GETS_MAX}"
        ));
    }
    let mut bytes = 0usize;
    for key in keys(compares, success, failure) {
        name("key", key.len())?;
        bytes += key.len();
    }
    let values = (compares.iter()).filter_map(|c| match &c.target {
        CompareTarget::Value(value) => Some(value),
        CompareTarget::Version(_) => None,
    });
    let puts = (success.iter().chain(failure)).filter_map(|op| match op {
        TxnOp::Put { value, .. } => Some(value),
        _ => None,
    });
    for value in values.chain(puts) {
        if value.len() > value_bytes_max {
            return Err(format!(
                "value is {} bytes, limit is {value_bytes_max}",
                value.len()
            ));
        }
        bytes += value.len();
    }
    if bytes > KV_TXN_BYTES_MAX {
        return Err(format!(
            "kv txn is {bytes} bytes, limit is {KV_TXN_BYTES_MAX}"
        ));
    }
    check_branch("success", success)?;
    check_branch("failure", failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::KvEntry;
    use crate::txn::MemTxn;

    fn stamp(index: u64) -> Stamp {
        crate::testkit::stamp_at(index, 1_000)
    }

    fn compare(key: &str, target: CompareTarget, op: CompareOp) -> Compare {
        Compare {
            key: key.as_bytes().to_vec(),
            target,
            op,
        }
    }

    fn put(key: &str, value: &str) -> TxnOp {
        TxnOp::Put {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        }
    }

    fn get(key: &str) -> TxnOp {
        TxnOp::Get {
            key: key.as_bytes().to_vec(),
        }
    }

    fn del(key: &str) -> TxnOp {
        TxnOp::Delete {
            key: key.as_bytes().to_vec(),
        }
    }

    fn run(txn: &mut MemTxn, index: u64, compares: &[Compare], ops: [&[TxnOp]; 2]) -> Outcome {
        apply(txn, stamp(index), (compares, ops[0], ops[1]))
    }

    #[test]
    fn the_success_branch_runs_when_every_compare_holds() {
        let mut txn = MemTxn::default();
        let absent = compare("k", CompareTarget::Version(0), CompareOp::Equal);
        let first = run(&mut txn, 1, &[absent], [&[put("k", "a"), get("k")], &[]]);
        let fence = stamp(1).fence();
        let entry = KvEntry {
            value: b"a".to_vec(),
            version: fence,
        };
        assert_eq!(
            first,
            Outcome::KvTxnDone {
                succeeded: true,
                fence,
                responses: vec![
                    TxnOpResult::Put { version: fence },
                    TxnOpResult::Get { entry: Some(entry) }
                ],
            }
        );
        let is_a = compare("k", CompareTarget::Value(b"a".to_vec()), CompareOp::Equal);
        let newer = compare("k", CompareTarget::Version(fence - 1), CompareOp::Greater);
        let second = run(&mut txn, 2, &[is_a, newer], [&[del("k")], &[get("k")]]);
        assert!(
            matches!(&second, Outcome::KvTxnDone { succeeded: true, responses, .. }
                if responses == &[TxnOpResult::Delete { version: fence }]),
            "{second:?}"
        );
        assert_eq!(kv::get(&txn, b"k"), None);
    }

    #[test]
    fn the_failure_branch_runs_otherwise_and_the_success_branch_writes_nothing() {
        let mut txn = MemTxn::default();
        run(&mut txn, 1, &[], [&[put("k", "a")], &[]]);
        let not_b = compare("k", CompareTarget::Value(b"b".to_vec()), CompareOp::Equal);
        let failed = run(
            &mut txn,
            2,
            &[not_b],
            [&[put("k", "x")], &[get("k"), del("z")]],
        );
        let Outcome::KvTxnDone {
            succeeded: false,
            responses,
            ..
        } = failed
        else {
            panic!("{failed:?}");
        };
        assert!(matches!(&responses[0], TxnOpResult::Get { entry: Some(e) } if e.value == b"a"));
        assert_eq!(responses[1], TxnOpResult::Delete { version: 0 });
        assert_eq!(kv::get(&txn, b"k").map(|e| e.value), Some(b"a".to_vec()));
    }

    #[test]
    fn a_value_compare_on_an_absent_key_never_holds() {
        let mut txn = MemTxn::default();
        for op in [CompareOp::Equal, CompareOp::NotEqual, CompareOp::Less] {
            let c = compare("gone", CompareTarget::Value(b"x".to_vec()), op);
            let out = run(&mut txn, 1, &[c], [&[put("w", "1")], &[]]);
            assert!(matches!(
                out,
                Outcome::KvTxnDone {
                    succeeded: false,
                    ..
                }
            ));
        }
        assert_eq!(kv::get(&txn, b"w"), None);
    }

    #[test]
    fn check_refuses_empty_oversized_and_twice_written_transactions() {
        let name = |what: &str, n: usize| match n {
            0 => Err(format!("{what} is empty")),
            _ => Ok(()),
        };
        assert!(check((&[], &[], &[]), 10, name).is_err());
        let twice = [put("k", "a"), del("k")];
        assert!(check((&[], &twice, &[]), 10, name).is_err());
        assert!(check((&[], &[put("k", "12345678901")], &[]), 10, name).is_err());
        let gets: Vec<TxnOp> = (0..=KV_TXN_GETS_MAX).map(|_| get("k")).collect();
        assert!(check((&[], &gets, &[]), 10, name).is_err());
        // One key written in each branch is fine: only one branch runs.
        assert!(check((&[], &[put("k", "a")], &[del("k")]), 10, name).is_ok());
    }
}
