//! The range rows a cell in a fabric stores, read: whether the cell is in a fabric or is
//! the meta cell, which ranges it owns, and which it serves now (not frozen for a move).
//! Planes ask these before they act on a key (a vote's key, a work entry's fabric mode);
//! `crate::range` writes the rows and runs every range change.
//!
//! Must never: import a plane's module. It sits below every plane.

use serde::{Deserialize, Serialize};

use crate::codec::decode;
use crate::keys::{self, FABRIC_MODE, RANGE};
use crate::limits::RANGES_PER_CELL_MAX;
use crate::query::RangeView;
use crate::txn::Txn;

/// A range row as version 1 stored it (before moves recorded their target and deadline).
#[derive(Serialize, Deserialize)]
pub(crate) struct RowV1 {
    pub(crate) last: u64,
    pub(crate) epoch: u64,
    pub(crate) frozen: bool,
}

/// A range row. A frozen row names the move's target cell and the time (stamp ms) until
/// which its driver holds the freeze; past it the range-admin lease's next holder may take
/// the move over (a freeze of version 1 names no target and holds no time).
#[derive(Serialize, Deserialize)]
pub(crate) struct Row {
    pub(crate) last: u64,
    pub(crate) epoch: u64,
    pub(crate) frozen: bool,
    pub(crate) to_cell: u64,
    pub(crate) until_ms: u64,
}

/// The encoding version of [`Row`].
pub(crate) const ROW_VERSION: u8 = 2;

pub(crate) fn row_key(start: u64) -> Vec<u8> {
    let mut out = vec![RANGE];
    keys::push_u64(&mut out, start);
    out
}

/// Every range row of this cell, in ring order.
pub(crate) fn rows(txn: &impl Txn) -> Vec<RangeView> {
    txn.scan(&[RANGE], &[RANGE + 1], RANGES_PER_CELL_MAX)
        .into_iter()
        .map(|(key, value)| {
            let start = u64::from_be_bytes(key[1..9].try_into().expect("range key holds a u64"));
            let row = read_row(&value);
            RangeView {
                start,
                last: row.last,
                epoch: row.epoch,
                frozen: row.frozen,
                to_cell: row.to_cell,
                until_ms: row.until_ms,
            }
        })
        .collect()
}

pub(crate) fn read_row(value: &[u8]) -> Row {
    match crate::codec::versioned(value) {
        Some((ROW_VERSION, body)) => postcard::from_bytes(body).expect("range row decodes"),
        _ => {
            let old: RowV1 = decode(value);
            Row {
                last: old.last,
                epoch: old.epoch,
                frozen: old.frozen,
                to_cell: 0,
                until_ms: 0,
            }
        }
    }
}

pub(crate) fn containing(rows: &[RangeView], point: u64) -> Option<&RangeView> {
    rows.iter().find(|r| r.start <= point && point <= r.last)
}

/// Whether this cell is part of a fabric: it was assigned a range at least once. A cell
/// that gave every range away serves nothing keyed (it must not fall back to standalone).
pub(crate) fn in_fabric(txn: &impl Txn) -> bool {
    txn.get(&[FABRIC_MODE]).is_some()
}

/// Whether this cell is the fabric's meta cell ([`mark_meta`]).
pub(crate) fn is_meta(txn: &impl Txn) -> bool {
    txn.get(&[keys::META_MODE]).is_some()
}

/// Rows owned and serving here, or `None` for a standalone cell (everything is served).
pub(crate) fn serving(txn: &impl Txn) -> Option<Vec<RangeView>> {
    if !in_fabric(txn) {
        return None;
    }
    Some(rows(txn).into_iter().filter(|r| !r.frozen).collect())
}

/// Whether `point` lies in a range this cell serves, not frozen for a move (or the cell is
/// standalone): a watch of a key follows it here until a move freezes its range.
pub(crate) fn serves_unfrozen(txn: &impl Txn, point: u64) -> bool {
    !in_fabric(txn) || containing(&rows(txn), point).is_some_and(|range| !range.frozen)
}

/// The ranges this cell owns and may change, none frozen for a move (`None`: a standalone
/// cell, which changes everything): what a `Tick` may touch.
pub(crate) fn changeable(txn: &impl Txn) -> Option<Vec<RangeView>> {
    in_fabric(txn).then(|| {
        rows(txn)
            .into_iter()
            .filter(|range| !range.frozen)
            .collect()
    })
}

/// Whether `point` lies in one of `serving` (or the cell is standalone).
pub(crate) fn serves(serving: &Option<Vec<RangeView>>, point: u64) -> bool {
    serving
        .as_ref()
        .is_none_or(|rows| containing(rows, point).is_some())
}
