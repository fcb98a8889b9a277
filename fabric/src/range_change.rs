//! The range change this node runs now, as `Node/RangeProgress` reports it: which range,
//! which phase, how many rows copied. A move of a large range copies page after page for a
//! long time; `whip fabric move` shows these figures while it waits.
//!
//! Range changes are serialized fabric-wide by the range-admin lease, so a node runs at
//! most one at a time. The report is this node's memory only: it is not replicated, and a
//! node that restarts mid-change reports none (the change itself stopped with it).

use std::sync::Mutex;

use whip_proto::v1 as pb;

/// The steps of a range change, in order (a split is one step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangePhase {
    /// The driver reads the range map and the source's row of the range, and reserves the
    /// move's epoch in the map.
    Preparing,
    /// Rows go to the target while the source still serves the range and records what
    /// changes meanwhile.
    Precopying,
    /// The source cell stops serving the range (a new epoch).
    Freezing,
    /// Rows go from the source to the target, page by page.
    Copying,
    /// The target cell takes the range, its fences above the source's.
    Assigning,
    /// The new range map goes to the meta cell.
    Publishing,
    /// The source deletes its copy, page by page.
    Dropping,
    /// The owning cell cuts the range in two.
    Splitting,
}

impl RangePhase {
    /// The stable code on the wire.
    pub fn code(self) -> &'static str {
        match self {
            RangePhase::Preparing => "preparing",
            RangePhase::Precopying => "precopying",
            RangePhase::Freezing => "freezing",
            RangePhase::Copying => "copying",
            RangePhase::Assigning => "assigning",
            RangePhase::Publishing => "publishing",
            RangePhase::Dropping => "dropping",
            RangePhase::Splitting => "splitting",
        }
    }

    /// The phase of a wire code (None: a code this build does not know).
    pub fn from_code(code: &str) -> Option<RangePhase> {
        RangePhase::ALL.into_iter().find(|p| p.code() == code)
    }

    /// Every phase.
    pub const ALL: [RangePhase; 8] = [
        RangePhase::Preparing,
        RangePhase::Precopying,
        RangePhase::Freezing,
        RangePhase::Copying,
        RangePhase::Assigning,
        RangePhase::Publishing,
        RangePhase::Dropping,
        RangePhase::Splitting,
    ];
}

/// What kind of change, with its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeChangeKind {
    /// A move to cell `to_cell`.
    Move {
        /// The target cell.
        to_cell: u64,
    },
    /// A split at point `at`.
    Split {
        /// The first point of the upper half.
        at: u64,
    },
}

/// One range change under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeChange {
    /// The first point of the range changed.
    pub start: u64,
    /// A move or a split.
    pub kind: RangeChangeKind,
    /// Where it is now.
    pub phase: RangePhase,
    /// Rows copied to the target so far.
    pub rows: u64,
    /// Pages copied (or dropped, while dropping) so far.
    pub pages: u64,
}

impl RangeChange {
    /// The wire form.
    pub fn to_pb(&self) -> pb::RangeChange {
        let (kind, to_cell, at) = match self.kind {
            RangeChangeKind::Move { to_cell } => ("move", to_cell, 0),
            RangeChangeKind::Split { at } => ("split", 0, at),
        };
        pb::RangeChange {
            kind: kind.into(),
            start: self.start,
            to_cell,
            at,
            phase: self.phase.code().into(),
            rows: self.rows,
            pages: self.pages,
        }
    }
}

/// The node's report of its change under way.
#[derive(Default)]
pub(crate) struct Tracker {
    now: Mutex<Option<RangeChange>>,
}

impl Tracker {
    /// Report a change of the range at `start`, now in its first `phase`, until the
    /// returned guard drops (the change ended, either way).
    pub(crate) fn begin(
        &self,
        start: u64,
        kind: RangeChangeKind,
        phase: RangePhase,
    ) -> Reporting<'_> {
        let change = RangeChange {
            start,
            kind,
            phase,
            rows: 0,
            pages: 0,
        };
        *self.now.lock().expect("range change lock") = Some(change);
        Reporting { tracker: self }
    }

    /// The change under way, if any.
    pub(crate) fn current(&self) -> Option<RangeChange> {
        *self.now.lock().expect("range change lock")
    }
}

/// Updates the report of one change; clears it when dropped.
pub(crate) struct Reporting<'a> {
    tracker: &'a Tracker,
}

impl Reporting<'_> {
    /// Enter `phase` (the page count starts again).
    pub(crate) fn phase(&self, phase: RangePhase) {
        self.update(|c| {
            c.phase = phase;
            c.pages = 0;
        });
    }

    /// The change became `kind` (a move that first finishes a stalled one), now in `phase`.
    pub(crate) fn retarget(&self, kind: RangeChangeKind, phase: RangePhase) {
        self.update(|c| {
            c.kind = kind;
            c.phase = phase;
            c.pages = 0;
        });
    }

    /// One more page done, of `rows` rows copied (0 while dropping or clearing).
    pub(crate) fn page(&self, rows: u64) {
        self.update(|c| {
            c.pages += 1;
            c.rows += rows;
        });
    }

    fn update(&self, change: impl FnOnce(&mut RangeChange)) {
        if let Some(now) = self.tracker.now.lock().expect("range change lock").as_mut() {
            change(now);
        }
    }
}

impl Drop for Reporting<'_> {
    fn drop(&mut self) {
        *self.tracker.now.lock().expect("range change lock") = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_follows_its_change_and_ends_with_it() {
        let tracker = Tracker::default();
        assert_eq!(tracker.current(), None);
        {
            let move_to_3 = RangeChangeKind::Move { to_cell: 3 };
            let report = tracker.begin(7, move_to_3, RangePhase::Preparing);
            // A driver that first finishes a stalled move to cell 2 reports that move.
            let move_to_2 = RangeChangeKind::Move { to_cell: 2 };
            report.retarget(move_to_2, RangePhase::Preparing);
            let now = tracker.current().expect("under way");
            assert_eq!((now.kind, now.phase), (move_to_2, RangePhase::Preparing));
            report.retarget(move_to_3, RangePhase::Freezing);
            report.phase(RangePhase::Copying);
            report.page(2_048);
            report.page(100);
            let now = tracker.current().expect("under way");
            assert_eq!(
                (now.phase, now.rows, now.pages),
                (RangePhase::Copying, 2_148, 2)
            );
            report.phase(RangePhase::Dropping);
            report.page(0);
            let wire = tracker.current().expect("under way").to_pb();
            assert_eq!(
                (
                    wire.kind.as_str(),
                    wire.to_cell,
                    wire.phase.as_str(),
                    wire.rows,
                    wire.pages
                ),
                ("move", 3, "dropping", 2_148, 1)
            );
        }
        assert_eq!(tracker.current(), None, "the report ends with the change");
    }

    #[test]
    fn every_phase_reads_back_from_its_code() {
        for phase in RangePhase::ALL {
            assert_eq!(RangePhase::from_code(phase.code()), Some(phase));
        }
        assert_eq!(RangePhase::from_code("teleporting"), None);
    }
}
