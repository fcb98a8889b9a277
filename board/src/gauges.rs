//! One cheap read of the figures an operator watches on a cell: board depths, mailbox
//! depths, leases held, handoffs waiting, alarms and the registry against its limits
//! ([`Query::Gauges`](crate::Query::Gauges)). Every list is capped at
//! [`GAUGE_ROWS_MAX`], so a scrape of a cell costs a bounded read however much it holds.

pub use crate::vocab::gauges::{BoardGauge, GaugesView, LeaseGauge};

use crate::keys::{self, TEAM};
use crate::limits::{GAUGE_ROWS_MAX, OUTBOX_PENDING_MAX};
use crate::txn::Txn;

/// The gauges of this cell at `now_ms` (leases whose holders all lapsed count as free).
pub(crate) fn read(txn: &impl Txn, now_ms: u64) -> GaugesView {
    let boards = boards(txn);
    let mailboxes = crate::mail::depths(txn, GAUGE_ROWS_MAX);
    let leases: Vec<LeaseGauge> = crate::lease::list(txn, now_ms, "", GAUGE_ROWS_MAX)
        .into_iter()
        .filter(|v| !v.holders.is_empty())
        .map(|v| LeaseGauge {
            lease: format!(
                "{}/{}{}",
                v.lease.owner,
                v.lease.name,
                key_suffix(&v.lease.key)
            ),
            holders: u32::try_from(v.holders.len()).unwrap_or(u32::MAX),
            slots: v.slots,
            waiters: u32::try_from(v.waiters.len()).unwrap_or(u32::MAX),
        })
        .collect();
    let handoffs_pending = crate::handoff::channels(txn)
        .into_iter()
        .take(GAUGE_ROWS_MAX)
        .map(|to| {
            let pending = crate::handoff::pending(txn, to, 0, OUTBOX_PENDING_MAX);
            (to, pending.len() as u64)
        })
        .collect::<Vec<_>>();
    let quota = crate::work::quota_view(txn);
    let limits = crate::work::limits(txn);
    let truncated = [boards.len(), mailboxes.len(), handoffs_pending.len()]
        .iter()
        .any(|n| *n >= GAUGE_ROWS_MAX);
    GaugesView {
        boards,
        cell_tier: cell_tier(txn),
        mailboxes,
        leases,
        handoffs_pending,
        alarms: crate::handoff::alarms(txn),
        work_live: quota.live,
        work_quota: quota.quota.map(|q| q.total),
        work_fabric_max: limits.fabric_max,
        work_cell_max: limits.cell_max,
        truncated,
    }
}

fn key_suffix(key: &str) -> String {
    match key.is_empty() {
        true => String::new(),
        false => format!("/{key}"),
    }
}

/// Team boards in name order, at most [`GAUGE_ROWS_MAX`].
fn boards(txn: &impl Txn) -> Vec<BoardGauge> {
    let start = [TEAM];
    txn.scan(&start, &keys::prefix_end(&start), GAUGE_ROWS_MAX)
        .into_iter()
        .filter_map(|(key, _)| {
            let team = keys::parse_named(&key);
            let counts = crate::team::load(txn, &team)
                .filter(|record| !record.dissolving)?
                .counts;
            Some(BoardGauge {
                team,
                ready: counts.ready,
                claimed: counts.claimed,
                dead: counts.dead,
                done: counts.done,
            })
        })
        .collect()
}

fn cell_tier(txn: &impl Txn) -> BoardGauge {
    let counts = crate::taskboard::cell_counts(txn);
    BoardGauge {
        team: String::new(),
        ready: counts.ready,
        claimed: counts.claimed,
        dead: counts.dead,
        done: counts.done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;
    use crate::{Command, Outcome, Request, ResourceId, Stamp, apply};

    #[test]
    fn an_empty_cell_reads_zero_and_a_lease_shows_up_held() {
        let mut txn = MemTxn::default();
        assert_eq!(
            read(&txn, 1_000),
            GaugesView {
                work_fabric_max: crate::limits::WORK_FABRIC_MAX_DEFAULT,
                work_cell_max: crate::limits::WORK_CELL_MAX_DEFAULT,
                ..GaugesView::default()
            }
        );
        let acquire = Command::LeaseAcquire {
            lease: ResourceId {
                owner: "o".into(),
                name: "n".into(),
                key: String::new(),
            },
            holder: "h".into(),
            slots: 2,
            ttl_ms: 5_000,
            wait_ms: 0,
        };
        let stamp = Stamp {
            index: 1,
            position: 0,
            time_ms: 1_000,
        };
        let outcome = apply(&mut txn, stamp, &Request::server(None, acquire)).outcome;
        assert!(matches!(outcome, Outcome::LeaseHeld { .. }), "{outcome:?}");
        let held = read(&txn, 2_000).leases;
        assert_eq!(
            held,
            vec![LeaseGauge {
                lease: "o/n".into(),
                holders: 1,
                slots: 2,
                waiters: 0,
            }]
        );
        assert!(
            read(&txn, 7_000).leases.is_empty(),
            "a lapsed holder is not held"
        );
    }
}
