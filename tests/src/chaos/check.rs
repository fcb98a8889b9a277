//! Judge a whole history: per workload, the counts and the violations. The register and
//! lease are searched for a linearization per key; ledger and counter get direct checks.

use std::collections::BTreeMap;

use serde::Serialize;

use super::history::{Kind, Op, format_ops};
use super::invariants::{self, Violation};
use super::linear::{self, Bounds, Entry, Model, Verdict};
use super::models::{LeaseModel, Register, RegisterModel, lease_entries, register_entries};

/// Counts and verdict of one workload.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorkloadResult {
    /// The workload.
    pub workload: String,
    /// Operations invoked (final reads excluded).
    pub ops: u64,
    /// Completed ok.
    pub ok: u64,
    /// Completed and certainly without effect.
    pub fail: u64,
    /// Outcome unknown.
    pub unknown: u64,
    /// Violations found.
    pub violations: u64,
    /// Keys whose search hit a bound (neither passed nor failed).
    pub undecided_keys: u64,
}

/// The operations of each workload, keyed by the workload name (the key's prefix before `/`).
pub fn workload_of(op: &Op) -> &str {
    op.key.split('/').next().unwrap_or("")
}

/// Check every workload found in `ops`.
pub fn check_all(ops: &[Op], bounds: Bounds) -> (Vec<WorkloadResult>, Vec<Violation>) {
    let mut groups: BTreeMap<String, Vec<Op>> = BTreeMap::new();
    for op in ops {
        groups
            .entry(workload_of(op).to_string())
            .or_default()
            .push(op.clone());
    }
    let mut results = Vec::new();
    let mut violations = Vec::new();
    for (workload, ops) in groups {
        let mut result = counts(&workload, &ops);
        let (found, undecided) = match workload.as_str() {
            "cas" => search_keys(&workload, &ops, bounds, register_check),
            "lease" => {
                let (mut found, undecided) = search_keys(&workload, &ops, bounds, lease_check);
                found.extend(invariants::check_lease_slots(&ops));
                (found, undecided)
            }
            "counter" => (invariants::check_counter(&ops), 0),
            "ledger" => (invariants::check_ledger(&ops), 0),
            "board" => (invariants::check_board(&ops), 0),
            "registry" => (super::registry::check_registry(&ops), 0),
            "mail" => (super::mail::check_mail(&ops), 0),
            "vote" => (super::vote::check_vote(&ops), 0),
            "watch" => (super::watch::check_watch(&ops), 0),
            "follow" => (super::follow::check_follow(&ops), 0),
            "turns" => (super::turns::check_turns(&ops), 0),
            _ => (Vec::new(), 0),
        };
        result.violations = found.len() as u64;
        result.undecided_keys = undecided;
        violations.extend(found);
        results.push(result);
    }
    (results, violations)
}

fn counts(workload: &str, ops: &[Op]) -> WorkloadResult {
    let mut r = WorkloadResult {
        workload: workload.to_string(),
        ..WorkloadResult::default()
    };
    let counted = |op: &&Op| !matches!(op.f.as_str(), "list" | "final" | "event" | "restart");
    for op in ops.iter().filter(counted) {
        r.ops += 1;
        match op.kind {
            Kind::Ok => r.ok += 1,
            Kind::Fail => r.fail += 1,
            Kind::Info | Kind::Invoke => r.unknown += 1,
        }
    }
    r
}

type KeyCheck = fn(&str, &str, &[&Op], Bounds) -> Result<Option<Violation>, String>;

fn search_keys(
    workload: &str,
    ops: &[Op],
    bounds: Bounds,
    check: KeyCheck,
) -> (Vec<Violation>, u64) {
    let mut keys: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        keys.entry(op.key.as_str()).or_default().push(op);
    }
    let mut found = Vec::new();
    let mut undecided = 0;
    for (key, ops) in keys {
        match check(workload, key, &ops, bounds) {
            Ok(Some(v)) => found.push(v),
            Ok(None) => {}
            Err(reason) => {
                eprintln!("{workload} {key}: undecided: {reason}");
                undecided += 1;
            }
        }
    }
    (found, undecided)
}

fn register_check(
    workload: &str,
    key: &str,
    ops: &[&Op],
    bounds: Bounds,
) -> Result<Option<Violation>, String> {
    let entries = register_entries(ops)?;
    judge(
        workload,
        key,
        ops,
        &RegisterModel,
        Some(Register::Any),
        entries,
        bounds,
    )
}

fn lease_check(
    workload: &str,
    key: &str,
    ops: &[&Op],
    bounds: Bounds,
) -> Result<Option<Violation>, String> {
    let entries = lease_entries(ops)?;
    judge(workload, key, ops, &LeaseModel, None, entries, bounds)
}

/// Search one key; on a violation, shrink it to the smallest failing sub-history.
pub fn judge<M: Model>(
    workload: &str,
    key: &str,
    ops: &[&Op],
    model: &M,
    loose: Option<M::State>,
    indexed: Vec<(usize, Entry<M::Op>)>,
    bounds: Bounds,
) -> Result<Option<Violation>, String>
where
    M::Op: Clone,
{
    let (index, entries): (Vec<usize>, Vec<Entry<M::Op>>) = indexed.into_iter().unzip();
    match linear::check(model, &entries, bounds) {
        Verdict::Linearizable => Ok(None),
        Verdict::Unknown(reason) => Err(reason),
        Verdict::Violation => {
            let kept = linear::shrink(model, loose, &entries, bounds);
            let shown: Vec<&Op> = kept.iter().map(|&i| ops[index[i]]).collect();
            Ok(Some(Violation {
                workload: workload.to_string(),
                key: key.to_string(),
                message: format!(
                    "not linearizable: {} of {} operations form the smallest failing sub-history",
                    shown.len(),
                    entries.len()
                ),
                history: format_ops(&shown),
            }))
        }
    }
}
