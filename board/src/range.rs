//! Key ranges owned by this cell, when it is part of a fabric.
//!
//! A cell with no range rows is standalone: it runs every command. Once a range is assigned
//! the cell is in fabric mode and runs a keyed command only when the command's point lies in
//! a range it owns, that range is not frozen, and the command carries the range's epoch;
//! otherwise it answers `WrongRange` with the epoch it knows, so the router refreshes its
//! map. A move copies the range's rows to the target (`Import`) while the source still
//! serves it and records what changes (`crate::range_track`), freezes the range on the
//! source (new epoch; from then on the source refuses it), sends the recorded changes
//! (`Patch`), assigns it to the target with a fence floor above the source's high-water
//! mark, and finally drops it on the source.
//!
//! Fences stay monotonic across moves: this cell keeps an index offset, added to every
//! stamp's index before a command runs, raised on assignment so that every later fence is
//! above the fences the source granted.

pub use crate::vocab::range::RangeRefusal;

use crate::access::{AccessRefusal, Caller};
use crate::codec::{decode, encode, encode_versioned, try_decode};
use crate::deadline::Item;
use crate::keys::{self, ADMIN_FENCE, FABRIC_MODE, FENCE_OFFSET};
use crate::limits::{
    RANGE_EXPORT_BYTES_MAX, RANGE_FREEZE_MS, RANGE_ROWS_PER_COMMAND_MAX, RANGE_SCAN_ROWS_MAX,
    RANGES_PER_CELL_MAX,
};
use crate::query::RangeView;
use crate::range_row::{ROW_VERSION, Row, containing, row_key};
pub(crate) use crate::range_row::{
    changeable, in_fabric, is_meta, rows, serves, serves_unfrozen, serving,
};
use crate::route;
use crate::txn::Txn;
use crate::types::{Command, Outcome, Stamp};

/// Raw stored rows.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

fn put_row(txn: &mut impl Txn, view: &RangeView) {
    txn.put(&[FABRIC_MODE], &encode(&true));
    let row = Row {
        last: view.last,
        epoch: view.epoch,
        frozen: view.frozen,
        to_cell: view.to_cell,
        until_ms: view.until_ms,
    };
    txn.put(&row_key(view.start), &encode_versioned(ROW_VERSION, &row));
}

/// Mark this cell as the meta cell (fabric initialization; idempotent).
pub(crate) fn mark_meta(txn: &mut impl Txn) -> Outcome {
    txn.put(&[keys::META_MODE], &[]);
    Outcome::RangeMarkedMeta
}

/// The meta cell serves servers only, and the operator's change of the work limits (every
/// cell keeps a copy, the meta cell's ceiling among them): no client's keyed command, routed
/// or not, runs there.
pub(crate) fn admit_meta(
    txn: &impl Txn,
    caller: &Caller,
    command: &Command,
) -> Result<(), AccessRefusal> {
    let allowed = match caller {
        Caller::Server => true,
        Caller::Operator => matches!(command, Command::WorkLimitsSet { .. }),
        Caller::Agent(_) | Caller::Anonymous => false,
    };
    match allowed || !is_meta(txn) {
        true => Ok(()),
        false => Err(AccessRefusal::MetaCell),
    }
}

/// A client's read on the meta cell: only the work limits (which the meta cell keeps for
/// the fabric's ceiling).
pub(crate) fn admit_meta_read(
    txn: &impl Txn,
    caller: &Caller,
    query: &crate::query::Query,
) -> Result<(), AccessRefusal> {
    let allowed = *caller == Caller::Server || *query == crate::query::Query::WorkLimits;
    match allowed || !is_meta(txn) {
        true => Ok(()),
        false => Err(AccessRefusal::MetaCell),
    }
}

/// Whether a command at `point` carrying `epoch` may run here; the refusal otherwise.
pub(crate) fn admit(txn: &impl Txn, point: u64, epoch: u64) -> Result<(), Outcome> {
    if !in_fabric(txn) {
        return Ok(());
    }
    let rows = rows(txn);
    match containing(&rows, point) {
        Some(r) if !r.frozen && r.epoch == epoch => Ok(()),
        Some(r) => Err(Outcome::WrongRange { epoch: r.epoch }),
        None => Err(Outcome::WrongRange { epoch: 0 }),
    }
}

/// The stamp commands see: its index raised by this cell's fence offset, its time by the
/// cell's time floor. A range that arrives from another cell brings the time of its
/// freeze there ([`assign`]): the source's leader clock may run ahead of this one's, and
/// the range's stamps, like its fences, must never go back (found by `whip chaos`, seed
/// 30, with clock jumps and moves: a lease granted after a move carried an earlier time
/// than one granted before it).
pub(crate) fn shift(txn: &impl Txn, stamp: Stamp) -> Stamp {
    let offset = offset(txn);
    Stamp {
        index: stamp.index + offset,
        time_ms: stamp.time_ms.max(time_floor(txn)),
        ..stamp
    }
}

fn time_floor(txn: &impl Txn) -> u64 {
    txn.get(&[keys::TIME_FLOOR])
        .map_or(0, |bytes| decode(&bytes))
}

/// Raise the time floor to `time_ms` (never lower it).
fn raise_time_floor(txn: &mut impl Txn, time_ms: u64) {
    if time_ms > time_floor(txn) {
        txn.put(&[keys::TIME_FLOOR], &encode(&time_ms));
    }
}

fn offset(txn: &impl Txn) -> u64 {
    txn.get(&[FENCE_OFFSET]).map_or(0, |bytes| decode(&bytes))
}

/// Raise the offset so that every fence granted after `stamp` (already shifted) is above
/// `fence_above`.
fn raise_floor(txn: &mut impl Txn, stamp: Stamp, fence_above: u64) {
    let needed_index = (fence_above >> 16) + 1;
    if stamp.index >= needed_index {
        return;
    }
    let raised = offset(txn) + (needed_index - stamp.index);
    txn.put(&[FENCE_OFFSET], &encode(&raised));
}

/// The row of a range assigned to this cell: serving, not frozen.
pub(crate) fn assigned(start: u64, last: u64, epoch: u64) -> RangeView {
    RangeView {
        start,
        last,
        epoch,
        frozen: false,
        to_cell: 0,
        until_ms: 0,
    }
}

/// Take ownership of `[start, last]` at `epoch`; fences from now on exceed `fence_above`,
/// and stamps are at least `time_above_ms` (`above`).
pub(crate) fn assign(
    txn: &mut impl Txn,
    stamp: Stamp,
    range: RangeView,
    (fence_above, time_above_ms): (u64, u64),
) -> Outcome {
    if range.start > range.last || range.epoch == 0 {
        return invalid(format!(
            "range {:#x}..={:#x} at epoch {} is empty or has epoch 0",
            range.start, range.last, range.epoch
        ));
    }
    let rows = rows(txn);
    let same = rows
        .iter()
        .find(|r| r.start == range.start && r.last == range.last && !r.frozen);
    if let Some(same) = same
        && same.epoch == range.epoch
    {
        return Outcome::RangeAssigned { epoch: same.epoch };
    }
    // An earlier attempt of the same move assigned the range here, and its driver stopped
    // before the map named this cell (found by `whip chaos`, seed 30: every retry was
    // refused as an overlap and the range stayed frozen at its source). No client reached
    // the row at that unpublished epoch; the retry takes it over at its own, later epoch.
    let retried = same.is_some_and(|same| same.epoch < range.epoch);
    if let Some(other) = rows
        .iter()
        .filter(|_| !retried)
        .find(|r| r.start <= range.last && range.start <= r.last)
    {
        return invalid(format!(
            "range {:#x}..={:#x} overlaps owned range {:#x}..={:#x}",
            range.start, range.last, other.start, other.last
        ));
    }
    if !retried && rows.len() >= RANGES_PER_CELL_MAX {
        return invalid(format!("cell owns {RANGES_PER_CELL_MAX} ranges, the limit"));
    }
    raise_floor(txn, stamp, fence_above);
    raise_time_floor(txn, time_above_ms);
    put_row(
        txn,
        &RangeView {
            frozen: false,
            to_cell: 0,
            until_ms: 0,
            ..range
        },
    );
    Outcome::RangeAssigned { epoch: range.epoch }
}

fn exact(txn: &impl Txn, start: u64, last: u64) -> Result<RangeView, Outcome> {
    rows(txn)
        .into_iter()
        .find(|r| r.start == start && r.last == last)
        .ok_or(Outcome::RangeUnknown { start, last })
}

/// Stop serving `[start, last]` (a move begins) and move it to `epoch` (the freeze of
/// version 1: no target, no deadline).
pub(crate) fn freeze(
    txn: &mut impl Txn,
    stamp: Stamp,
    start: u64,
    last: u64,
    epoch: u64,
) -> Outcome {
    let row = match exact(txn, start, last) {
        Ok(row) => row,
        Err(outcome) => return outcome,
    };
    if row.frozen && row.epoch == epoch {
        return frozen(stamp, epoch);
    }
    if epoch <= row.epoch {
        return Outcome::WrongRange { epoch: row.epoch };
    }
    let held = RangeView {
        epoch,
        frozen: true,
        to_cell: 0,
        until_ms: 0,
        ..row
    };
    put_row(txn, &held);
    frozen(stamp, epoch)
}

fn frozen(stamp: Stamp, epoch: u64) -> Outcome {
    Outcome::RangeFrozenAt {
        epoch,
        fence_high: stamp.fence(),
        time_ms: stamp.time_ms,
    }
}

/// Freeze `[start, last]` at `epoch` for a move to `to_cell`, held until
/// `RANGE_FREEZE_MS` past the stamp. The same freeze again renews the hold (its driver is
/// alive). A freeze at a later epoch takes a frozen range over from a stalled move only
/// once that move's hold has passed; before, it is refused `freeze_held`.
pub(crate) fn freeze_to(
    txn: &mut impl Txn,
    stamp: Stamp,
    (start, last): (u64, u64),
    epoch: u64,
    to_cell: u64,
) -> Outcome {
    let row = match exact(txn, start, last) {
        Ok(row) => row,
        Err(outcome) => return outcome,
    };
    let until_ms = stamp.time_ms.saturating_add(RANGE_FREEZE_MS);
    if row.frozen && row.epoch == epoch {
        if row.to_cell != to_cell {
            return invalid(format!(
                "range {start:#x} is frozen at epoch {epoch} for cell {}, not {to_cell}",
                row.to_cell
            ));
        }
        let renewed = RangeView {
            until_ms: until_ms.max(row.until_ms),
            ..row
        };
        put_row(txn, &renewed);
        return frozen(stamp, epoch);
    }
    if epoch <= row.epoch {
        return Outcome::WrongRange { epoch: row.epoch };
    }
    if row.frozen && stamp.time_ms < row.until_ms {
        let refusal = RangeRefusal::FreezeHeld {
            until_ms: row.until_ms,
        };
        return Outcome::RangeRefused { refusal };
    }
    let held = RangeView {
        epoch,
        frozen: true,
        to_cell,
        until_ms,
        ..row
    };
    put_row(txn, &held);
    frozen(stamp, epoch)
}

/// The highest range-admin fence a range step on this cell carried (0: none yet).
fn admin_floor(txn: &impl Txn) -> u64 {
    txn.get(&[ADMIN_FENCE]).map_or(0, |bytes| decode(&bytes))
}

/// Admit one range step of the driver holding the range-admin lease granted at `fence`. A
/// later holder's step raised this cell's floor: an earlier holder's steps are refused
/// `superseded`, so a driver that stalled and came back cannot act on a move another
/// driver took over. The floor rises before the step runs, even when the step refuses.
pub(crate) fn admit_fence(txn: &mut impl Txn, fence: u64) -> Result<(), Outcome> {
    let floor = admin_floor(txn);
    if fence < floor {
        let refusal = RangeRefusal::Superseded { fence, floor };
        return Err(Outcome::RangeRefused { refusal });
    }
    if fence > floor {
        txn.put(&[ADMIN_FENCE], &encode(&fence));
    }
    Ok(())
}

/// Cut an owned range in two at `at` (the first point of the upper half), both at `epoch`.
pub(crate) fn split(txn: &mut impl Txn, start: u64, last: u64, at: u64, epoch: u64) -> Outcome {
    let row = match exact(txn, start, last) {
        Ok(row) => row,
        Err(outcome) => return outcome,
    };
    if row.frozen || epoch <= row.epoch {
        return Outcome::WrongRange { epoch: row.epoch };
    }
    if at <= start || at > last {
        return invalid(format!(
            "split point {at:#x} is not inside {start:#x}..={last:#x}"
        ));
    }
    if rows(txn).len() >= RANGES_PER_CELL_MAX {
        return invalid(format!("cell owns {RANGES_PER_CELL_MAX} ranges, the limit"));
    }
    // A record of the whole range's changes would name a range that no longer exists.
    crate::range_track::forget_range(txn, start, last);
    put_row(
        txn,
        &RangeView {
            start,
            last: at - 1,
            epoch,
            frozen: false,
            to_cell: 0,
            until_ms: 0,
        },
    );
    put_row(
        txn,
        &RangeView {
            start: at,
            last,
            epoch,
            frozen: false,
            to_cell: 0,
            until_ms: 0,
        },
    );
    Outcome::RangeAssigned { epoch }
}

/// Families whose rows belong to the cell itself and never move: the registry's cell
/// counts, limits, audit, grants and owner counts; the cell-tier board; range rows, the
/// fence offset, the modes and the admin fence; handoff channels and alarms; the watch
/// history (`crate::watch`); a move's record of changes (`crate::range_track`); the
/// follow-up outbox (`crate::next`); the time floor.
#[rustfmt::skip]
const CELL_OWN: [u8; 28] = [
    keys::WORK_CELL, keys::WORK_LIMITS, keys::WORK_AUDIT, keys::WORK_GRANT, keys::WORK_OWNER,
    keys::CELL_TASK, keys::CELL_READY, keys::CELL_CLAIM, keys::CELL_BOARD,
    keys::RANGE, keys::FENCE_OFFSET, keys::FABRIC_MODE, keys::META_MODE, keys::ADMIN_FENCE,
    keys::OUTBOX, keys::OUTBOX_ITEM, keys::INBOX, keys::ALARM, keys::ALARM_HEAD,
    keys::ALARM_CAUSE, keys::WATCH_EVENT, keys::WATCH_META,
    keys::RANGE_TRACK, keys::RANGE_CHANGED, keys::FOLLOW_UP, keys::FOLLOW_HEAD,
    keys::TIME_FLOOR, keys::RANGE_COPIED,
];

/// The point of a stored row, or `None` for rows that belong to the cell itself
/// ([`CELL_OWN`], cell-local deadline entries and idempotency records).
pub(crate) fn row_point(key: &[u8], value: &[u8]) -> Option<u64> {
    let (&family, rest) = key.split_first()?;
    match family {
        // A key's attachment moves with the key; its lease index entry with the lease (on
        // the key's cell, `point_of::command`).
        keys::KV | keys::KV_ATTACH => Some(route::kv_point(rest)),
        keys::KV_LEASED => {
            let (parts, _) = keys::split_first(rest, 3)?;
            keys::resource_of(&parts).map(|id| route::resource_point(&id))
        }
        keys::LEASE | keys::COUNTER => {
            let (parts, _) = keys::split_first(rest, 4)?;
            keys::resource_of(&parts[1..]).map(|id| route::resource_point(&id))
        }
        keys::HOLDER => {
            let (parts, _) = keys::split_first(rest, 4)?;
            keys::resource_of(&parts[1..]).map(|id| route::resource_point(&id))
        }
        keys::LEDGER_HEAD | keys::LEDGER_ENTRY => {
            let (parts, _) = keys::split_first(rest, 3)?;
            keys::resource_of(&parts).map(|id| route::resource_point(&id))
        }
        keys::DEADLINE => decode::<Item>(value).point(),
        keys::ELECTION | keys::SCHEDULE => {
            let (parts, _) = keys::split_first(rest, 1)?;
            let name = String::from_utf8(parts.into_iter().next()?).ok()?;
            Some(match family {
                keys::ELECTION => route::election_point(&name),
                _ => route::schedule_point(&name),
            })
        }
        keys::IDEMPOTENCY => crate::idempotency::point_of(value),
        // A team's record, board, claims and the mailboxes it keeps move with the team.
        keys::TEAM | keys::TASK | keys::READY | keys::CLAIM | keys::MAIL_HEAD | keys::MAIL => {
            keys::first_name(key).map(|team| route::team_point(&team))
        }
        // A team's roles, proposals and ballots move with the team.
        keys::VOTE_TEAM | keys::PROPOSAL | keys::BALLOT => {
            keys::first_name(key).map(|team| route::team_point(&team))
        }
        keys::WORK_ENTRY => crate::work::row_point(key),
        // A repository's reservations, their holder index and its fence head move with it.
        keys::PATH_RESERVATION | keys::PATH_REPO => {
            keys::first_name(key).map(|repo| route::repo_point(&repo))
        }
        keys::PATH_HOLDER => {
            let (parts, _) = keys::split_first(rest, 2)?;
            let repo = String::from_utf8(parts.into_iter().nth(1)?).ok()?;
            Some(route::repo_point(&repo))
        }
        keys::MBOX_HEAD | keys::MBOX_MSG | keys::MBOX_TAKE => crate::mail::row_point(key),
        // An instance's rows and its owner record move with the instance's tag.
        keys::ENGINE => Some(route::kv_point(rest)),
        keys::INSTANCE_OWNER => crate::instance::owner_row_point(key),
        family if CELL_OWN.contains(&family) => None,
        other => panic!("stored row of unknown family {other:#x}"),
    }
}

fn in_range(key: &[u8], value: &[u8], start: u64, last: u64) -> bool {
    row_point(key, value).is_some_and(|p| start <= p && p <= last)
}

/// Rows of `[start, last]` after `after_key`: at most `limit` rows, examining at most
/// `RANGE_SCAN_ROWS_MAX`; `next` is where the next page starts (`None` when done).
pub(crate) fn export(
    txn: &impl Txn,
    start: u64,
    last: u64,
    after_key: &[u8],
    limit: usize,
) -> (Rows, Option<Vec<u8>>) {
    let mut from = after_key.to_vec();
    from.push(0);
    let scanned = txn.scan(&from, &[0xFF], RANGE_SCAN_ROWS_MAX);
    let exhausted = scanned.len() < RANGE_SCAN_ROWS_MAX;
    let mut rows = Vec::new();
    let mut bytes = 0usize;
    let mut last_key = None;
    for (key, value) in scanned {
        let full =
            rows.len() >= limit.min(RANGE_ROWS_PER_COMMAND_MAX) || bytes >= RANGE_EXPORT_BYTES_MAX;
        if full {
            return (rows, last_key);
        }
        if in_range(&key, &value, start, last) {
            bytes += key.len() + value.len();
            rows.push((key.clone(), value));
        }
        last_key = Some(key);
    }
    (rows, if exhausted { None } else { last_key })
}

/// Whether a row another cell exported can be read here: a known family, and a value that
/// decodes wherever its point or its arrival reads it. A certified peer sends these rows, but
/// a bad one must be refused: a panic in apply would stop every replica at this entry.
fn importable(key: &[u8], value: &[u8]) -> bool {
    match key.first().copied() {
        Some(keys::KV | keys::ENGINE) => crate::kv::decodes(value),
        Some(keys::INSTANCE_OWNER) => crate::instance::decode_owner(value).is_some(),
        Some(keys::DEADLINE) => try_decode::<Item>(value).is_some(),
        Some(keys::KV_ATTACH) => crate::ephemeral::decodes(value),
        Some(keys::IDEMPOTENCY) => crate::idempotency::decodes(value),
        Some(keys::WORK_ENTRY) => try_decode::<crate::work::WorkEntryView>(value).is_some(),
        Some(keys::PATH_RESERVATION) => crate::reservation::decodes(value),
        Some(keys::PATH_REPO) => try_decode::<u64>(value).is_some(),
        Some(family) => keys::FAMILIES.contains(&family),
        None => false,
    }
}

/// Whether every row of `rows` may be written by a move: rows of the cell's own families,
/// of no family, or whose values do not decode are refused.
pub(crate) fn check_importable(rows: &[(Vec<u8>, Vec<u8>)]) -> Result<(), Outcome> {
    match rows
        .iter()
        .find(|(key, value)| !importable(key, value) || row_point(key, value).is_none())
    {
        Some((key, _)) => Err(invalid(format!(
            "row of family {:?} cannot be imported",
            key.first()
        ))),
        None => Ok(()),
    }
}

/// Write one row a move brought here; a work entry is counted here (once: a row written
/// again replaces its count).
pub(crate) fn write_arrived(txn: &mut impl Txn, key: &[u8], value: &[u8]) {
    if key.first() != Some(&keys::WORK_ENTRY) {
        return txn.put(key, value);
    }
    if let Some(old) = txn.get(key) {
        crate::work::replaced(txn, &old);
    }
    let value = crate::work::arrived(txn, value);
    txn.put(key, &value);
}

/// Delete one row a move takes away (or a stale copy); a work entry stops counting here.
pub(crate) fn erase_departed(txn: &mut impl Txn, key: &[u8], value: &[u8]) {
    if key.first() == Some(&keys::WORK_ENTRY) {
        crate::work::departed(txn, value);
    }
    txn.delete(key);
}

/// Write rows exported by another cell. Rows of the cell's own families, of no family, or
/// whose values do not decode are refused.
pub(crate) fn import(txn: &mut impl Txn, rows: &[(Vec<u8>, Vec<u8>)]) -> Outcome {
    if let Err(refused) = check_importable(rows) {
        return refused;
    }
    for (key, value) in rows {
        write_arrived(txn, key, value);
    }
    Outcome::RangeImported {
        rows: rows.len() as u32,
    }
}

/// Delete the rows of `[start, last]`, at most `RANGE_ROWS_PER_COMMAND_MAX`: how many, and
/// whether none is left.
pub(crate) fn erase_rows(txn: &mut impl Txn, start: u64, last: u64) -> (u32, bool) {
    let mut removed = 0u32;
    let mut after = Vec::new();
    loop {
        let (rows, next) = export(txn, start, last, &after, RANGE_ROWS_PER_COMMAND_MAX);
        for (key, value) in &rows {
            erase_departed(txn, key, value);
            removed += 1;
        }
        if removed as usize >= RANGE_ROWS_PER_COMMAND_MAX {
            return (removed, false);
        }
        match next {
            Some(key) => after = key,
            None => return (removed, true),
        }
    }
}

/// Delete the data of frozen range `[start, last]`, at most `RANGE_ROWS_PER_COMMAND_MAX`
/// rows per command; once nothing is left, forget the range (and the record of its
/// changes a move kept, `crate::range_track`).
pub(crate) fn drop_rows(txn: &mut impl Txn, start: u64, last: u64) -> Outcome {
    let row = match exact(txn, start, last) {
        Ok(row) => row,
        Err(outcome) => return outcome,
    };
    if !row.frozen {
        return invalid(format!("range {start:#x}..={last:#x} is not frozen"));
    }
    let (removed, done) = erase_rows(txn, start, last);
    if done {
        txn.delete(&row_key(start));
        crate::range_track::forget_range(txn, start, last);
    }
    Outcome::RangeDropped { removed, done }
}

impl RangeRefusal {
    /// A stable snake_case name of the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            RangeRefusal::Superseded { .. } => "superseded",
            RangeRefusal::FreezeHeld { .. } => "freeze_held",
        }
    }
}

fn invalid(reason: String) -> Outcome {
    Outcome::Invalid { reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;
    use crate::types::{BoardSettings, Command, Request, ResourceId};

    fn run(txn: &mut MemTxn, index: u64, time_ms: u64, command: Command) -> Outcome {
        let stamp = Stamp {
            index,
            position: 0,
            time_ms,
        };
        crate::apply(txn, stamp, &Request::server(None, command)).outcome
    }

    /// A board with every kind of row: a team, local tasks claimed, dead and ready, their
    /// claims and deadlines, a mailbox notice and a task spilled to the cell tier.
    fn busy_board() -> MemTxn {
        let mut txn = MemTxn::default();
        let settings = BoardSettings {
            delivery_limit: 1,
            spill_after_ms: 10,
            ..BoardSettings::default()
        };
        let team = || "t".to_string();
        let caller = || "sup".to_string();
        let commands = [
            Command::TeamCreate {
                team: team(),
                caller: caller(),
                parent: None,
                ancestors: Vec::new(),
                settings,
            },
            Command::BoardPost {
                team: team(),
                caller: caller(),
                body: b"spills".to_vec(),
            },
            Command::Tick,
            Command::BoardPost {
                team: team(),
                caller: caller(),
                body: b"dies".to_vec(),
            },
            Command::BoardClaim {
                team: team(),
                caller: caller(),
                worker: "w".into(),
            },
            Command::BoardFail {
                team: team(),
                caller: caller(),
                task_id: "t-2".into(),
                fence: 5 << 16,
                error: "boom".into(),
            },
            Command::BoardPost {
                team: team(),
                caller: caller(),
                body: b"held".to_vec(),
            },
            Command::BoardClaim {
                team: team(),
                caller: caller(),
                worker: "w".into(),
            },
            Command::BoardPost {
                team: team(),
                caller: caller(),
                body: b"waits".to_vec(),
            },
            Command::TeamCreate {
                team: "u".into(),
                caller: caller(),
                parent: None,
                ancestors: Vec::new(),
                settings,
            },
            // u's board is empty: it takes t-1 from the cell tier.
            Command::BoardClaim {
                team: "u".into(),
                caller: caller(),
                worker: "w".into(),
            },
        ];
        for (at, command) in commands.into_iter().enumerate() {
            let index = at as u64 + 1;
            let outcome = run(&mut txn, index, index * 10, command);
            assert!(
                !matches!(outcome, Outcome::BoardRefused { .. }),
                "{outcome:?}"
            );
        }
        txn
    }

    /// The point a row should have: its team's, except for the cell tier's rows.
    fn expected_point(key: &[u8], value: &[u8]) -> Option<u64> {
        let cell_local = [
            keys::CELL_TASK,
            keys::CELL_READY,
            keys::CELL_CLAIM,
            keys::CELL_BOARD,
        ];
        if cell_local.contains(&key[0]) {
            return None;
        }
        if key[0] != keys::DEADLINE {
            return keys::first_name(key).map(|team| route::team_point(&team));
        }
        match decode::<Item>(value) {
            Item::TaskClaim { tier, .. } if tier != crate::types::Tier::Local => None,
            Item::TaskClaim { team, .. } | Item::TaskSpill { team, .. } => {
                Some(route::team_point(&team))
            }
            other => panic!("unexpected deadline item {other:?}"),
        }
    }

    /// A move retried after its driver stopped between assigning the range here and
    /// publishing the map takes the range over at its own, later epoch; an older epoch
    /// than the one held, or an overlap with another range, is still refused.
    #[test]
    fn a_retried_move_takes_over_its_unpublished_assignment() {
        let mut txn = MemTxn::default();
        let stamp = |index| Stamp {
            index,
            position: 0,
            time_ms: 1,
        };
        let view = assigned;
        let first = assign(&mut txn, stamp(1), view(0x10, 0x1f, 5), (0, 0));
        assert_eq!(first, Outcome::RangeAssigned { epoch: 5 });
        let retried = assign(&mut txn, stamp(2), view(0x10, 0x1f, 7), (0, 0));
        assert_eq!(retried, Outcome::RangeAssigned { epoch: 7 });
        assert_eq!(rows(&txn), vec![view(0x10, 0x1f, 7)]);
        let stale = assign(&mut txn, stamp(3), view(0x10, 0x1f, 6), (0, 0));
        assert!(matches!(stale, Outcome::Invalid { .. }), "{stale:?}");
        let overlap = assign(&mut txn, stamp(4), view(0x18, 0x2f, 9), (0, 0));
        assert!(matches!(overlap, Outcome::Invalid { .. }), "{overlap:?}");
        assert_eq!(rows(&txn), vec![view(0x10, 0x1f, 7)], "nothing changed");
    }

    /// A two-slot acquire of one lease by `holder`, 1 s to live.
    fn lease(holder: &str) -> Command {
        Command::LeaseAcquire {
            lease: ResourceId {
                owner: "o".into(),
                name: "deploy".into(),
                key: "prod".into(),
            },
            holder: holder.into(),
            slots: 2,
            ttl_ms: 1_000,
            wait_ms: 0,
        }
    }

    /// Apply `command` as a server request routed at `epoch`.
    fn at_epoch(
        txn: &mut MemTxn,
        index: u64,
        time_ms: u64,
        epoch: u64,
        command: Command,
    ) -> Outcome {
        let mut request = Request::server(None, command);
        request.epoch = epoch;
        let stamp = Stamp {
            index,
            position: 0,
            time_ms,
        };
        crate::apply(txn, stamp, &request).outcome
    }

    /// A range moved from a cell whose clock ran ahead keeps its time: the target's stamps
    /// are at least the freeze's time at the source (`shift`), so a lease granted after the
    /// move never carries an earlier time than one granted before it.
    #[test]
    fn a_moved_range_stamps_no_earlier_than_its_freeze_at_the_source() {
        let (mut source, mut target) = (MemTxn::default(), MemTxn::default());
        let whole = |epoch| Command::RangeAssign {
            start: 0,
            last: u64::MAX,
            epoch,
            fence_above: 0,
        };
        run(&mut source, 1, 9_000, whole(1));
        let before = at_epoch(&mut source, 2, 9_000, 1, lease("a"));
        assert!(matches!(
            before,
            Outcome::LeaseHeld {
                expires_at_ms: 10_000,
                ..
            }
        ));
        let freeze = Command::RangeFreezeTo {
            start: 0,
            last: u64::MAX,
            epoch: 2,
            to_cell: 3,
        };
        let Outcome::RangeFrozenAt {
            fence_high,
            time_ms,
            ..
        } = run(&mut source, 3, 9_500, freeze)
        else {
            panic!("the freeze answers its fence and time");
        };
        assert_eq!(time_ms, 9_500);
        // The target's leader clock is 8 s behind the source's.
        let assign = Command::RangeAssignAt {
            start: 0,
            last: u64::MAX,
            epoch: 2,
            fence_above: fence_high,
            time_above_ms: time_ms,
        };
        assert_eq!(
            run(&mut target, 1, 1_500, assign),
            Outcome::RangeAssigned { epoch: 2 }
        );
        let after = at_epoch(&mut target, 2, 1_500, 2, lease("b"));
        let Outcome::LeaseHeld {
            fence,
            expires_at_ms,
            ..
        } = after
        else {
            panic!("{after:?}");
        };
        assert!(fence > fence_high, "fences grow across the move");
        assert_eq!(
            expires_at_ms, 10_500,
            "stamped at the floor, not the target's clock"
        );
        let later = at_epoch(&mut target, 3, 12_000, 2, lease("c"));
        assert!(matches!(
            later,
            Outcome::LeaseHeld {
                expires_at_ms: 13_000,
                ..
            }
        ));
    }

    /// A `Tick` leaves a frozen range alone: its lease holder's expiry waits for the range's
    /// next owner (the move's copy may already hold the row), and runs on an unfrozen one.
    #[test]
    fn a_tick_changes_nothing_in_a_frozen_range() {
        let tick = |txn: &mut MemTxn, index| run(txn, index, 60_000, Command::Tick);
        let mut frozen = MemTxn::default();
        let mut serving = MemTxn::default();
        for txn in [&mut frozen, &mut serving] {
            let assign = Command::RangeAssign {
                start: 0,
                last: u64::MAX,
                epoch: 1,
                fence_above: 0,
            };
            run(txn, 1, 1_000, assign);
            let acquire = Command::LeaseAcquire {
                lease: ResourceId {
                    owner: "o".into(),
                    name: "deploy".into(),
                    key: "prod".into(),
                },
                holder: "h".into(),
                slots: 1,
                ttl_ms: 1_000,
                wait_ms: 0,
            };
            let mut request = Request::server(None, acquire);
            request.epoch = 1;
            let stamp = Stamp {
                index: 2,
                position: 0,
                time_ms: 1_000,
            };
            let held = crate::apply(txn, stamp, &request).outcome;
            assert!(matches!(held, Outcome::LeaseHeld { .. }), "{held:?}");
        }
        let freeze = Command::RangeFreezeTo {
            start: 0,
            last: u64::MAX,
            epoch: 2,
            to_cell: 3,
        };
        let frozen_at = run(&mut frozen, 3, 1_500, fenced(7, freeze));
        assert!(
            matches!(frozen_at, Outcome::RangeFrozenAt { .. }),
            "{frozen_at:?}"
        );
        tick(&mut frozen, 4);
        tick(&mut serving, 3);
        let pending = |txn: &MemTxn| crate::deadline::due(txn, 60_000, 10).len();
        assert_eq!(pending(&frozen), 1, "the frozen range's expiry waits");
        assert_eq!(pending(&serving), 0, "a serving range's expiry runs");
    }

    fn fenced(fence: u64, step: Command) -> Command {
        Command::RangeFenced {
            fence,
            step: Box::new(step),
        }
    }

    fn freeze_to(epoch: u64, to_cell: u64) -> Command {
        Command::RangeFreezeTo {
            start: 0x10,
            last: 0x1f,
            epoch,
            to_cell,
        }
    }

    /// A move's freeze holds its range `RANGE_FREEZE_MS` past its last renewal: a takeover
    /// at a later epoch is refused `freeze_held` until then and runs after it.
    #[test]
    fn a_stalled_freeze_is_taken_over_only_past_its_hold() {
        let mut txn = MemTxn::default();
        let assign = Command::RangeAssign {
            start: 0x10,
            last: 0x1f,
            epoch: 1,
            fence_above: 0,
        };
        run(&mut txn, 1, 1_000, assign);
        let first = run(&mut txn, 2, 1_000, fenced(7, freeze_to(2, 3)));
        assert!(
            matches!(first, Outcome::RangeFrozenAt { epoch: 2, .. }),
            "{first:?}"
        );
        let renewed = run(&mut txn, 3, 2_000, fenced(7, freeze_to(2, 3)));
        assert!(matches!(renewed, Outcome::RangeFrozenAt { epoch: 2, .. }));
        let held_until = 2_000 + RANGE_FREEZE_MS;
        assert_eq!(rows(&txn)[0].until_ms, held_until);
        let early = run(&mut txn, 4, held_until - 1, fenced(9, freeze_to(3, 3)));
        let refusal = RangeRefusal::FreezeHeld {
            until_ms: held_until,
        };
        assert_eq!(early, Outcome::RangeRefused { refusal });
        let taken = run(&mut txn, 5, held_until, fenced(9, freeze_to(3, 2)));
        assert!(
            matches!(taken, Outcome::RangeFrozenAt { epoch: 3, .. }),
            "{taken:?}"
        );
        let row = rows(&txn)[0];
        assert_eq!((row.epoch, row.frozen, row.to_cell), (3, true, 2));
    }

    /// Once a later lease holder ran a step here, the earlier holder's steps are refused
    /// `superseded` and change nothing; a step that is not a range step is invalid.
    #[test]
    fn a_superseded_driver_is_refused() {
        let mut txn = MemTxn::default();
        let assign = |epoch| Command::RangeAssign {
            start: 0x10,
            last: 0x1f,
            epoch,
            fence_above: 0,
        };
        let later = run(&mut txn, 1, 1_000, fenced(9, assign(2)));
        assert_eq!(later, Outcome::RangeAssigned { epoch: 2 });
        let stale = run(&mut txn, 2, 1_000, fenced(7, freeze_to(3, 2)));
        let refusal = RangeRefusal::Superseded { fence: 7, floor: 9 };
        assert_eq!(stale, Outcome::RangeRefused { refusal });
        assert_eq!(refusal.code(), "superseded");
        let import = Command::RangeImport {
            rows: vec![(keys::kv(b"k"), Vec::new())],
        };
        let stale_import = run(&mut txn, 3, 1_000, fenced(8, import));
        assert!(matches!(stale_import, Outcome::RangeRefused { .. }));
        assert!(txn.get(&keys::kv(b"k")).is_none(), "a refused import wrote");
        assert!(!rows(&txn)[0].frozen, "a refused freeze froze");
        let not_a_step = run(&mut txn, 4, 1_000, fenced(9, Command::Tick));
        assert!(
            matches!(not_a_step, Outcome::Invalid { .. }),
            "{not_a_step:?}"
        );
    }

    /// `row_point` knows every family: a range export over any stored row answers instead
    /// of panicking (the fuzzer found the alarm causes missing).
    #[test]
    fn every_family_has_a_point_rule() {
        for family in keys::FAMILIES {
            let mut key = vec![family];
            keys::push_str(&mut key, b"team");
            keys::push_u64(&mut key, 1);
            let answered = std::panic::catch_unwind(|| row_point(&key, &[]));
            let message = answered.err().and_then(|panic| {
                let text = panic.downcast_ref::<String>().cloned();
                text.filter(|text| text.contains("unknown family"))
            });
            assert_eq!(message, None, "family {family:#x}");
        }
    }

    #[test]
    fn a_team_moves_with_its_board_and_the_cell_tier_stays() {
        let txn = busy_board();
        let mut families = std::collections::BTreeSet::new();
        for (key, value) in &txn.map {
            families.insert(key[0]);
            assert_eq!(row_point(key, value), expected_point(key, value), "{key:?}");
        }
        let every_family = [
            keys::TEAM,
            keys::TASK,
            keys::READY,
            keys::CLAIM,
            keys::MAIL_HEAD,
            keys::MAIL,
            keys::DEADLINE,
            keys::CELL_TASK,
            keys::CELL_CLAIM,
            keys::CELL_BOARD,
        ];
        for family in every_family {
            assert!(families.contains(&family), "no row of family {family}");
        }
        let t = route::team_point("t");
        let (rows, next) = export(&txn, t, t, &[], usize::MAX);
        assert_eq!(next, None);
        let of_t = txn
            .map
            .iter()
            .filter(|(k, v)| expected_point(k, v) == Some(t));
        assert_eq!(rows.len(), of_t.count());
        let mut target = MemTxn::default();
        assert_eq!(
            import(&mut target, &rows),
            Outcome::RangeImported {
                rows: rows.len() as u32
            }
        );
        // Cell-tier rows belong to the cell: they are never exported, nor imported.
        let cell_rows: Rows = txn
            .map
            .iter()
            .filter(|(key, _)| key[0] == keys::CELL_TASK)
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        assert!(matches!(
            import(&mut target, &cell_rows),
            Outcome::Invalid { .. }
        ));
    }

    /// Regression (fuzz target `board_apply`, fuzz/regressions/board_apply/): an import of a
    /// row of no known family panicked in `row_point` ("stored row of unknown family 0xd"),
    /// and one whose value does not decode panicked where its point is read; a committed
    /// entry like that would stop every replica. Both are refused, and nothing is written.
    #[test]
    fn import_refuses_rows_of_no_family_and_undecodable_values() {
        let bad = [
            vec![(vec![0x0d, 1, 2], b"x".to_vec())],
            vec![(vec![keys::DEADLINE, 1], vec![9, 9, 9])],
            vec![(vec![keys::IDEMPOTENCY, b'k'], Vec::new())],
            vec![(vec![keys::WORK_ENTRY, b'r', 0, 1], vec![1])],
            // A key whose record does not decode: a later range read of it panicked (the
            // fuzzer, 2026-12-02: range-import-undecodable-kv-value).
            vec![(keys::kv(b"k"), vec![1, 9])],
            vec![(Vec::new(), b"x".to_vec())],
        ];
        for rows in bad {
            let mut txn = MemTxn::default();
            let outcome = run(
                &mut txn,
                1,
                1_000,
                Command::RangeImport { rows: rows.clone() },
            );
            assert!(
                matches!(outcome, Outcome::Invalid { .. }),
                "{rows:?}: {outcome:?}"
            );
            assert!(txn.map.is_empty(), "{rows:?} wrote rows");
        }
        for family in 0..=u8::MAX {
            let known = keys::FAMILIES.contains(&family);
            let distinct = keys::FAMILIES.iter().filter(|f| **f == family).count();
            assert!(distinct <= 1, "family {family:#x} listed twice");
            if !known {
                assert!(!importable(&[family, 1], b"x"), "family {family:#x}");
            }
        }
    }
}
