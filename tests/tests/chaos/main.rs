//! The chaos checker on small hand-made histories: each model and invariant has histories
//! that must pass and histories that must fail, so a checker that cannot fail is caught.
//! Times are in milliseconds for readability (the checker only compares them).
//! `t90_harness` runs the harness itself (root): a dead node or a recovery that never comes
//! must fail the run. `t90_nemesis` runs the real harness, one nemesis at a time (root only).

mod t10_register;
mod t20_lease;
mod t30_ledger;
mod t40_counter;
mod t50_history;
mod t60_board;
mod t70_registry;
mod t80_mail;
mod t85_follow;
mod t90_harness;
mod t90_nemesis;

use serde_json::Value;
use whip_tests::chaos::check::{WorkloadResult, check_all};
use whip_tests::chaos::history::{Kind, Op};
use whip_tests::chaos::invariants::Violation;
use whip_tests::chaos::linear::Bounds;

/// An operation of `process` on `key` between `call` and `ret` (`None`: unknown outcome).
pub(crate) fn op(
    process: u64,
    f: &str,
    key: &str,
    input: Value,
    output: Value,
    call: u64,
    ret: Option<u64>,
) -> Op {
    Op {
        process,
        kind: if ret.is_some() { Kind::Ok } else { Kind::Info },
        f: f.to_string(),
        key: key.to_string(),
        input,
        output: if ret.is_some() { output } else { Value::Null },
        call,
        ret: ret.unwrap_or(u64::MAX),
    }
}

/// Check `ops` and return the one workload's result and the violations.
pub(crate) fn judge(ops: &[Op]) -> (WorkloadResult, Vec<Violation>) {
    let (mut results, violations) = check_all(ops, Bounds::default());
    assert_eq!(results.len(), 1, "one workload in {results:?}");
    (results.remove(0), violations)
}

/// Assert the history passes.
pub(crate) fn passes(ops: &[Op]) {
    let (result, violations) = judge(ops);
    assert!(
        violations.is_empty(),
        "unexpected violation: {violations:#?}"
    );
    assert_eq!(result.undecided_keys, 0);
}

/// Assert the history fails; returns the violations.
pub(crate) fn fails(ops: &[Op]) -> Vec<Violation> {
    let (result, violations) = judge(ops);
    assert!(
        !violations.is_empty(),
        "a violation was expected in {ops:#?}"
    );
    assert_eq!(result.violations, violations.len() as u64);
    violations
}
