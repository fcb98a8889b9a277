//! Takes over range moves whose driver stalled (paused, partitioned away or dead).
//!
//! A move freezes its range on the source for `whip_board::limits::RANGE_FREEZE_MS` past
//! its driver's last renewal, and the driver renews that hold with the range-admin lease.
//! Each node looks at the data cells it leads: a frozen range whose hold has passed (by the
//! node's clock, a hint only: the cell's board decides with its stamp) is taken over by
//! acquiring the range-admin lease and finishing the move to the target its freeze names.
//! Finishing is always safe: the source served nothing of the range since the freeze, so a
//! full copy under a fresh epoch reproduces exactly what the stalled driver was copying,
//! and the fresh epoch is reserved in the map first, so the stalled driver's own map write
//! can no longer go through. A move already published only has the source's copy left to
//! drop. The stalled driver, when it comes back, is refused `superseded` by every cell the
//! new holder touched.

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use whip_board::{Query, QueryResult, RangeView};
use whip_cell::CellError;

use crate::admin::{self, AdminLease};
use crate::limits;
use crate::map::{META_CELL, RangeEntry};
use crate::node::{Inner, Node};
use crate::range_change::{RangeChangeKind, RangePhase};

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) async fn takeover_loop(inner: Weak<Inner>) {
    // Per led cell: the applied index of the last look that found nothing frozen. Frozen
    // rows appear only through an apply, so an unchanged index needs no new read.
    let mut quiet: HashMap<u64, u64> = HashMap::new();
    loop {
        tokio::time::sleep(Duration::from_millis(limits::STALLED_MOVE_LOOK_MS)).await;
        let Some(inner) = inner.upgrade() else { return };
        let node = Node { inner };
        for cell in node.hosted_ids() {
            if cell == META_CELL || !node.leads(cell) {
                continue;
            }
            let Some(applied) = node.applied_index(cell) else {
                continue;
            };
            if quiet.get(&cell) == Some(&applied) {
                continue;
            }
            let Ok(QueryResult::Ranges(rows)) = node.read_cell(None, cell, Query::Ranges).await
            else {
                continue;
            };
            let frozen: Vec<RangeView> = rows
                .into_iter()
                .filter(|r| r.frozen && r.to_cell != 0)
                .collect();
            if frozen.is_empty() {
                quiet.insert(cell, applied);
                continue;
            }
            quiet.remove(&cell);
            for row in frozen.into_iter().filter(|r| now_ms() >= r.until_ms) {
                take_over(&node, cell, row).await;
            }
        }
    }
}

/// Take the stalled move of `row` (frozen on `cell`) over, if the range-admin lease is
/// free; a held lease means a live driver is at work, which will meet the freeze itself.
async fn take_over(node: &Node, cell: u64, row: RangeView) {
    let lease = match AdminLease::acquire(node).await {
        Ok(lease) => lease,
        Err(e) => {
            tracing::debug!(cell, start = row.start, error = %e, "stalled move not taken over");
            return;
        }
    };
    let result = lease.hold_while(resolve(&lease, cell, row)).await;
    lease.release().await;
    match result {
        Ok(()) => {}
        Err(e) => tracing::warn!(cell, start = row.start, error = %e, "taking over a move"),
    }
}

/// Finish the stalled move of `row` on `cell` under `lease` (see the module docs).
async fn resolve(lease: &AdminLease<'_>, cell: u64, row: RangeView) -> Result<(), CellError> {
    let node = lease.node();
    let (map, _) = node.load_map().await?;
    let entry = RangeEntry {
        start: row.start,
        last: row.last,
        epoch: row.epoch,
        cell,
    };
    let overlapping: Vec<&RangeEntry> = map
        .ranges
        .iter()
        .filter(|r| r.start <= row.last && row.start <= r.last)
        .collect();
    if overlapping.iter().all(|r| r.cell != cell) {
        tracing::warn!(
            cell,
            start = row.start,
            "dropping a published move's stalled copy"
        );
        let kind = RangeChangeKind::Move {
            to_cell: row.to_cell,
        };
        let change = &node.inner.range_change;
        let report = change.begin(row.start, kind, RangePhase::Dropping);
        let key = format!("fabric-drop/{:x}/{}/{}", row.start, row.epoch, lease.fence);
        return admin::drop_copy(lease, &map, entry, &key, &report).await;
    }
    let still = admin::source_row(node, &map, entry).await?;
    let exact = overlapping.len() == 1 && overlapping[0].start == row.start;
    match still {
        Some(now) if exact && now.frozen && now.epoch == row.epoch => {
            tracing::warn!(
                cell,
                start = row.start,
                to_cell = row.to_cell,
                epoch = row.epoch,
                "taking over a stalled range move"
            );
            let kind = RangeChangeKind::Move {
                to_cell: row.to_cell,
            };
            let change = &node.inner.range_change;
            let report = change.begin(row.start, kind, RangePhase::Preparing);
            admin::run_move(lease, row.start, row.to_cell, &report).await?;
            Ok(())
        }
        // Another holder resolved it meanwhile, or the map cut the range: nothing to do.
        _ => Ok(()),
    }
}
