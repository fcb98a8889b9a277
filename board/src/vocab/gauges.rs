//! The gauges plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

/// What [`Query::Gauges`](crate::Query::Gauges) answers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GaugesView {
    /// Team boards in name order (dissolving teams left out).
    pub boards: Vec<BoardGauge>,
    /// This cell's cell-tier board (`team` empty).
    pub cell_tier: BoardGauge,
    /// Mailboxes with messages waiting: (address, messages waiting), in address order.
    pub mailboxes: Vec<(String, u64)>,
    /// Leases with at least one live holder, in name order.
    pub leases: Vec<LeaseGauge>,
    /// Handoff channels with envelopes not yet acknowledged: (receiving cell, count; the
    /// count stops at the outbox's page size).
    pub handoffs_pending: Vec<(u64, u64)>,
    /// Alarms this cell holds: (time, text), oldest first.
    pub alarms: Vec<(u64, String)>,
    /// Live work entries on this cell.
    pub work_live: u64,
    /// The quota of the fabric's ceiling this cell holds now (`None`: none installed).
    pub work_quota: Option<u64>,
    /// The registry's limits: live entries in the fabric and on one cell.
    pub work_fabric_max: u64,
    /// Live entries one cell may hold.
    pub work_cell_max: u64,
    /// A list reached [`GAUGE_ROWS_MAX`] and was cut.
    pub truncated: bool,
}

/// Depths of one board.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardGauge {
    /// The team (empty for the cell tier).
    pub team: String,
    /// Ready tasks.
    pub ready: u64,
    /// Claimed tasks.
    pub claimed: u64,
    /// Dead-lettered tasks.
    pub dead: u64,
    /// Tasks completed, ever.
    pub done: u64,
}

/// One lease with live holders.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGauge {
    /// `owner/name` and key of the lease.
    pub lease: String,
    /// Live holders.
    pub holders: u32,
    /// Declared slots.
    pub slots: u32,
    /// Queued waiters.
    pub waiters: u32,
}
