//! A range move's copy: the rows of the range go from its source cell to its target, page
//! by page, first while the source still serves the range (the source records what changes
//! meanwhile, `whip_board`'s `range_track`), then, once frozen, only what changed.
//!
//! A copy before the freeze resumes: a driver that stopped half-way (killed, paused, its
//! range-admin lease lost) leaves the source's record going on and a mark of how far the
//! target holds a clean copy (`Command::RangeCopied`, after each page the target took). The
//! next driver of the same move copies on from that mark instead of clearing the target
//! and starting over, so a large range's move finishes under faults that stop every driver
//! before a whole copy would (found by `whip chaos`, seed 30: moves of 23–68 s never
//! finished while faults came every 5–10 s).
//!
//! Must never: write a row the target could hold from before the record began (without a
//! mark the target is cleared first), or mark a page the target has not taken.

use whip_board::{Command, Outcome, Query, QueryResult};
use whip_cell::CellError;

use crate::admin::{AdminLease, source_row};
use crate::limits;
use crate::map::{FabricMap, RangeEntry};
use crate::node::{retrying, unexpected};
use crate::range_change::Reporting;

/// One move's copy: what every step of it works with.
pub(crate) struct Copying<'m> {
    /// The driver's range-admin lease (every step is fenced by it).
    pub(crate) lease: &'m AdminLease<'m>,
    /// The map the move read.
    pub(crate) map: &'m FabricMap,
    /// The range, on its source cell.
    pub(crate) range: RangeEntry,
    /// The target cell.
    pub(crate) to_cell: u64,
    /// The node's report of the change.
    pub(crate) report: &'m Reporting<'m>,
}

/// Where a copy before the freeze starts.
#[derive(Debug, PartialEq, Eq)]
enum Start {
    /// The target may hold rows from before the record began: clear it, then copy all.
    Afresh,
    /// The target holds a clean copy through this raw key (empty: of nothing yet).
    After(Vec<u8>),
}

impl Copying<'_> {
    /// Copy the range to the target while its source still serves it: the source records
    /// the range's changes (a record of this move already going on is kept), then every
    /// page the target lacks goes over. The rows copied.
    pub(crate) async fn precopy(&self, key_prefix: &str) -> Result<u64, CellError> {
        let track = Command::RangeTrack {
            start: self.range.start,
            last: self.range.last,
            to_cell: self.to_cell,
        };
        let key = format!("{key_prefix}/track");
        match self.on_source(key, track).await? {
            Outcome::RangeTracked { .. } => {}
            other => return Err(CellError::Fatal(format!("track answered {other:?}"))),
        }
        match self.start().await? {
            Start::After(after) => {
                tracing::info!(
                    start = self.range.start,
                    to_cell = self.to_cell,
                    "resuming a range move's copy"
                );
                self.copy_rows(&format!("{key_prefix}/import"), after, true)
                    .await
            }
            Start::Afresh => self.clear_and_copy(key_prefix, true).await,
        }
    }

    /// Bring the target level with the frozen source: send the changes the source recorded
    /// since the copy before the freeze, or, when it holds no complete record for this
    /// target (it outgrew its bound, or a move from before records began), copy the whole
    /// range again over a cleared target. The rows sent.
    pub(crate) async fn finish(&self, key_prefix: &str) -> Result<u64, CellError> {
        if let Some(rows) = self.send_changes(key_prefix).await? {
            return Ok(rows);
        }
        // An earlier attempt assigned the range there (unpublished): it copied everything.
        if self.target_holds().await? {
            return Ok(0);
        }
        self.clear_and_copy(key_prefix, false).await
    }

    /// Where the copy before the freeze starts, from the source's record.
    async fn start(&self) -> Result<Start, CellError> {
        let query = Query::RangeCopy {
            start: self.range.start,
            last: self.range.last,
        };
        let answer = self.read_source("copy mark", query).await?;
        let QueryResult::RangeCopy {
            to_cell,
            copied_after,
        } = answer
        else {
            return Err(unexpected(&answer));
        };
        Ok(match (to_cell, copied_after) {
            (Some(to), Some(after)) if to == self.to_cell => Start::After(after),
            _ => Start::Afresh,
        })
    }

    /// Delete what an unfinished copy left on the target, then copy the whole range there
    /// (marking each page on the source when `marked`).
    async fn clear_and_copy(&self, key_prefix: &str, marked: bool) -> Result<u64, CellError> {
        self.clear_target(&format!("{key_prefix}/clear")).await?;
        if marked {
            self.mark(&format!("{key_prefix}/cleared"), Vec::new())
                .await?;
        }
        self.copy_rows(&format!("{key_prefix}/import"), Vec::new(), marked)
            .await
    }

    /// Send the frozen source's recorded changes to the target, page by page; `None` when
    /// the source holds no complete record of this range for that target.
    async fn send_changes(&self, key_prefix: &str) -> Result<Option<u64>, CellError> {
        let (range, mut after, mut sent) = (self.range, Vec::new(), 0u64);
        for page in 0u64.. {
            let changes = Query::RangeChanges {
                start: range.start,
                last: range.last,
                after_key: after.clone(),
                limit: limits::MOVE_PAGE_ROWS,
            };
            let answer = self.read_source("changes", changes).await?;
            let QueryResult::RangeChanges {
                to_cell: recorded,
                puts,
                deletes,
                next,
            } = answer
            else {
                return Err(unexpected(&answer));
            };
            if recorded != Some(self.to_cell) {
                return Ok(None);
            }
            let rows = (puts.len() + deletes.len()) as u64;
            if rows > 0 {
                let patch = Command::RangePatch { puts, deletes };
                match self
                    .on_target(format!("{key_prefix}/patch/{page}"), patch)
                    .await?
                {
                    Outcome::RangeImported { .. } => {}
                    other => return Err(CellError::Fatal(format!("patch answered {other:?}"))),
                }
                sent += rows;
                self.report.page(rows);
            }
            match next {
                Some(key) => after = key,
                None => return Ok(Some(sent)),
            }
        }
        unreachable!("the pages never run out")
    }

    /// Whether the target already owns exactly this range, serving (an earlier attempt of
    /// the same move assigned it there and stopped before publishing).
    async fn target_holds(&self) -> Result<bool, CellError> {
        let target = RangeEntry {
            cell: self.to_cell,
            ..self.range
        };
        let row = source_row(self.lease.node(), self.map, target).await?;
        Ok(row.is_some_and(|row| !row.frozen))
    }

    /// Delete, on the target, what an unfinished copy of the range left there.
    async fn clear_target(&self, key_prefix: &str) -> Result<(), CellError> {
        for page in 0u64.. {
            let clear = Command::RangeClear {
                start: self.range.start,
                last: self.range.last,
            };
            match self
                .on_target(format!("{key_prefix}/{page}"), clear)
                .await?
            {
                Outcome::RangeDropped { done: true, .. } => return Ok(()),
                Outcome::RangeDropped { .. } => self.report.page(0),
                other => return Err(CellError::Fatal(format!("clear answered {other:?}"))),
            }
        }
        unreachable!("the pages never run out")
    }

    /// Copy the range's rows after raw key `after` from the source to the target, page by
    /// page, marking each page on the source when `marked` (before the freeze the source
    /// records what changes meanwhile; after it, nothing changes).
    async fn copy_rows(
        &self,
        key_prefix: &str,
        mut after: Vec<u8>,
        marked: bool,
    ) -> Result<u64, CellError> {
        let mut copied = 0u64;
        for page in 0u64.. {
            let export = Query::RangeExport {
                start: self.range.start,
                last: self.range.last,
                after_key: after.clone(),
                limit: limits::MOVE_PAGE_ROWS,
            };
            let answer = self.read_source("export", export).await?;
            let QueryResult::RangeRows { rows, next } = answer else {
                return Err(unexpected(&answer));
            };
            if let Some((last_key, _)) = rows.last() {
                let (last_key, in_page) = (last_key.clone(), rows.len() as u64);
                let import = Command::RangeImport { rows };
                match self
                    .on_target(format!("{key_prefix}/{page}"), import)
                    .await?
                {
                    Outcome::RangeImported { .. } => {}
                    other => return Err(CellError::Fatal(format!("import answered {other:?}"))),
                }
                if marked {
                    self.mark(&format!("{key_prefix}/{page}/mark"), last_key)
                        .await?;
                }
                copied += in_page;
                self.report.page(in_page);
            }
            match next {
                Some(key) => after = key,
                None => return Ok(copied),
            }
        }
        unreachable!("the pages never run out")
    }

    /// Mark on the source that the target holds a clean copy through `after_key`. A
    /// record that no longer goes on (it outgrew its bound) takes no mark: the copy goes
    /// on, and the freeze finds the record incomplete and copies again.
    async fn mark(&self, key: &str, after_key: Vec<u8>) -> Result<(), CellError> {
        let copied = Command::RangeCopied {
            start: self.range.start,
            last: self.range.last,
            to_cell: self.to_cell,
            after_key,
        };
        match self.on_source(key.to_string(), copied).await? {
            Outcome::RangeTracked { .. } | Outcome::RangeUnknown { .. } => Ok(()),
            other => Err(CellError::Fatal(format!("copy mark answered {other:?}"))),
        }
    }

    async fn on_source(&self, key: String, step: Command) -> Result<Outcome, CellError> {
        self.lease.step(self.map, self.range.cell, key, step).await
    }

    async fn on_target(&self, key: String, step: Command) -> Result<Outcome, CellError> {
        self.lease.step(self.map, self.to_cell, key, step).await
    }

    /// A linearizable read of the source cell, retried while it is unavailable.
    async fn read_source(&self, what: &str, query: Query) -> Result<QueryResult, CellError> {
        let (node, cell) = (self.lease.node(), self.range.cell);
        let what = format!("{what} from cell {cell}");
        retrying(&what, limits::INIT_WAIT_MS, |via| {
            node.read_cell_via(Some(self.map), cell, query.clone(), via)
        })
        .await
    }
}
