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
//! Catching up before the freeze: a busy range changes while it is copied, and the record of
//! a large one (found by `whip chaos`, seed 30: 248,444 rows) outgrew its bound, so the
//! freeze copied the whole range again while clients waited 15–45 s. Now, during the copy
//! and after it, the driver sends what the record holds while the source still serves the
//! range (`Query::RangePending`, `Command::RangePatch`), and the source drops the markers of
//! the keys that did not change again since the page was read (`Command::RangeDrained`).
//! Rounds run until the record holds at most `MOVE_FROZEN_KEYS_MAX` keys, so the freeze
//! sends about one page. A record that outgrew its bound anyway starts over with a fresh
//! copy, a bounded number of times, before the freeze copies the whole range.
//!
//! Must never: write a row the target could hold from before the record began (without a
//! mark the target is cleared first), mark a page the target has not taken, or drop a
//! marker the target has not taken the key of.

use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Catch-up rounds run so far (each round's steps take their own keys).
    pub(crate) rounds: AtomicU64,
}

/// A page of a move's record on its source (`QueryResult::RangePending`).
struct Pending {
    /// The record's change count when the page was read.
    seq: u64,
    puts: Vec<(Vec<u8>, Vec<u8>)>,
    deletes: Vec<Vec<u8>>,
    /// The key after which the next page starts.
    next: Option<Vec<u8>>,
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

    /// Before the freeze, after [`Copying::precopy`]: run catch-up rounds while the
    /// source's record holds more than `MOVE_FROZEN_KEYS_MAX` keys (at most
    /// `MOVE_CATCH_UP_ROUNDS_MAX`), and copy again while the record outgrew its bound (at
    /// most `MOVE_PRECOPY_ATTEMPTS_MAX` copies in all). The rows sent.
    pub(crate) async fn settle(&self, key_prefix: &str) -> Result<u64, CellError> {
        let (mut rows, mut rounds, mut copies) = (0, 0, 1);
        loop {
            match self.record_size().await? {
                Some(size) if size <= limits::MOVE_FROZEN_KEYS_MAX => return Ok(rows),
                Some(_) if rounds < limits::MOVE_CATCH_UP_ROUNDS_MAX => {
                    rounds += 1;
                    rows += self.catch_up(key_prefix).await?;
                }
                None if copies < limits::MOVE_PRECOPY_ATTEMPTS_MAX => {
                    copies += 1;
                    tracing::info!(
                        start = self.range.start,
                        to_cell = self.to_cell,
                        copies,
                        "a range move's record outgrew its bound: copying again"
                    );
                    rows += self
                        .precopy(&format!("{key_prefix}/again/{copies}"))
                        .await?;
                }
                size => {
                    tracing::info!(
                        start = self.range.start,
                        recorded = size,
                        "a range move freezes with more changes than one page"
                    );
                    return Ok(rows);
                }
            }
        }
    }

    /// How many keys the source's complete record of the range holds (`None`: it holds
    /// no complete record for this target).
    async fn record_size(&self) -> Result<Option<u32>, CellError> {
        let query = self.pending_page(Vec::new(), 1);
        let answer = self.read_source("record size", query).await?;
        let QueryResult::RangePending {
            to_cell, changed, ..
        } = answer
        else {
            return Err(unexpected(&answer));
        };
        Ok((to_cell == Some(self.to_cell)).then_some(changed))
    }

    fn pending_page(&self, after_key: Vec<u8>, limit: u32) -> Query {
        Query::RangePending {
            start: self.range.start,
            last: self.range.last,
            after_key,
            limit,
        }
    }

    /// A page of the source's record after `after_key`, with the rows as it holds them
    /// now; `None` when it holds no complete record of the range for this target.
    async fn record_page(&self, after_key: Vec<u8>) -> Result<Option<Pending>, CellError> {
        let query = self.pending_page(after_key, limits::MOVE_PAGE_ROWS);
        let answer = self.read_source("recorded changes", query).await?;
        let QueryResult::RangePending {
            to_cell,
            seq,
            puts,
            deletes,
            next,
            ..
        } = answer
        else {
            return Err(unexpected(&answer));
        };
        Ok((to_cell == Some(self.to_cell)).then_some(Pending {
            seq,
            puts,
            deletes,
            next,
        }))
    }

    /// One catch-up round while the source serves the range: each page of its record goes
    /// to the target, then the source drops the markers of the page's keys that did not
    /// change since it read them. Stops early when the record no longer goes on (the next
    /// size check sees it). The rows sent.
    async fn catch_up(&self, key_prefix: &str) -> Result<u64, CellError> {
        let round = self.rounds.fetch_add(1, Ordering::Relaxed);
        let (mut after, mut sent) = (Vec::new(), 0u64);
        for page in 0u64.. {
            let Some(Pending {
                seq,
                puts,
                deletes,
                next,
            }) = self.record_page(after.clone()).await?
            else {
                return Ok(sent);
            };
            let through = (puts.iter().map(|(key, _)| key))
                .chain(deletes.iter())
                .max()
                .cloned();
            if let Some(through_key) = through {
                let rows = (puts.len() + deletes.len()) as u64;
                let key = format!("{key_prefix}/catch/{round}/{page}");
                self.patch(format!("{key}/patch"), puts, deletes).await?;
                let drained = Command::RangeDrained {
                    start: self.range.start,
                    last: self.range.last,
                    to_cell: self.to_cell,
                    after_key: after.clone(),
                    through_key,
                    upto_seq: seq,
                };
                match self.on_source(format!("{key}/drained"), drained).await? {
                    Outcome::RangeTracked { .. } | Outcome::RangeUnknown { .. } => {}
                    other => return Err(CellError::Fatal(format!("drained answered {other:?}"))),
                }
                sent += rows;
                self.report.page(rows);
            }
            match next {
                Some(key) => after = key,
                None => return Ok(sent),
            }
        }
        unreachable!("the pages never run out")
    }

    /// Write rows of the source on the target as the source holds them.
    async fn patch(
        &self,
        key: String,
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        deletes: Vec<Vec<u8>>,
    ) -> Result<(), CellError> {
        match self
            .on_target(key, Command::RangePatch { puts, deletes })
            .await?
        {
            Outcome::RangeImported { .. } => Ok(()),
            other => Err(CellError::Fatal(format!("patch answered {other:?}"))),
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
        let (mut after, mut sent) = (Vec::new(), 0u64);
        for page in 0u64.. {
            let Some(Pending {
                puts,
                deletes,
                next,
                ..
            }) = self.record_page(after.clone()).await?
            else {
                return Ok(None);
            };
            let rows = (puts.len() + deletes.len()) as u64;
            if rows > 0 {
                self.patch(format!("{key_prefix}/patch/{page}"), puts, deletes)
                    .await?;
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
    /// records what changes meanwhile, and a copy whose record outgrew its bound stops
    /// early; after the freeze, nothing changes).
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
                    let Some(sent) = self.keep_small(key_prefix).await? else {
                        // The record outgrew its bound: this copy can no longer be
                        // finished by it, and `settle` starts a fresh one.
                        return Ok(copied + in_page);
                    };
                    copied += sent;
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

    /// During the copy before the freeze: run a catch-up round once the record holds
    /// `MOVE_CATCH_UP_AT_KEYS` keys, so a long copy of a busy range does not outgrow it.
    /// The rows sent; `None` when the record no longer goes on (it outgrew its bound).
    async fn keep_small(&self, key_prefix: &str) -> Result<Option<u64>, CellError> {
        match self.record_size().await? {
            None => Ok(None),
            Some(size) if size >= limits::MOVE_CATCH_UP_AT_KEYS => {
                self.catch_up(key_prefix).await.map(Some)
            }
            Some(_) => Ok(Some(0)),
        }
    }

    /// Mark on the source that the target holds a clean copy through `after_key`. A
    /// record that no longer goes on (it outgrew its bound) takes no mark: the copy stops
    /// after this page (`keep_small` sees it) and `settle` starts a fresh one.
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
