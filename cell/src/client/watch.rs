//! Following a watch across member failures, leader changes and range moves.
//!
//! A watch stream ends when its member goes away, when a key's range moves to another
//! cell, or when the history was compacted below the cursor. [`CellClient::follow`] keeps
//! one cursor per cell (revisions are a cell's own) and reopens at it on any member that
//! answers, so no event is lost or repeated; it gives up only on a typed refusal, a
//! compacted history, or when no member answered for [`limits::WATCH_RECONNECT_FOR_MS`].
//!
//! A server beats every quiet stream once a second and ends it when its member is stale
//! (`crate::push::fresh`): a stream silent for [`limits::WATCH_SILENCE_MS`], or ended
//! `unavailable`, reopens on the next node. A prefix follow on a fabric opens a stream on
//! every data cell, with ranges under the prefix or not: a range may move in later.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use tonic::Status;
use whip_proto::v1 as pb;
use whip_proto::v1::cell_server::Cell as CellService;

use super::{CellClient, Credentials, retryable};
use crate::error::CellError;
use crate::limits;

/// A stream of watch answers (see [`CellClient::watch`]).
pub type WatchStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<pb::WatchResponse, Status>> + Send + 'static>,
>;

/// The events of one revision of one cell, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchBatch {
    /// The cell whose revision this is (0 on a standalone cell).
    pub cell: u64,
    /// The events, all of one revision.
    pub events: Vec<pb::WatchEvent>,
}

/// Why a followed watch ended.
#[derive(Debug, thiserror::Error)]
pub enum WatchEnd {
    /// Events from the wanted revision are gone: read the keys afresh and watch from the
    /// revision after the read.
    #[error("compacted: events below revision {oldest} of cell {cell} are gone")]
    Compacted {
        /// The cell.
        cell: u64,
        /// The oldest revision the cell still has.
        oldest: u64,
    },
    /// A refusal, a bad request, or no member answering in time.
    #[error(transparent)]
    Failed(#[from] CellError),
}

impl CellClient {
    /// Open one watch stream on the current member (rotating while members are
    /// unavailable).
    pub async fn watch(&self, request: pb::WatchRequest) -> Result<WatchStream, CellError> {
        if let Some(api) = &self.local {
            let local = Self::local_request(&Credentials::default(), request);
            let stream = CellService::watch(api.as_ref(), local).await?;
            return Ok(stream.into_inner());
        }
        let identity = &self.identity;
        let stream = self
            .call(|ch| {
                let request = Self::request(identity, request.clone());
                async move { Self::cell(ch).watch(request).await }
            })
            .await?;
        Ok(Box::pin(stream))
    }

    /// Follow `key` (every key under it with `prefix`) from `from` (0: from now), sending
    /// each revision's events to `out` until `out` closes or the watch ends. In a fabric a
    /// prefix is followed on every data cell, each with its own cursor.
    pub async fn follow(
        &self,
        (key, prefix): (Vec<u8>, bool),
        from: u64,
        out: tokio::sync::mpsc::Sender<WatchBatch>,
    ) -> Result<(), WatchEnd> {
        let cells = match prefix {
            true => self.data_cells().await?,
            false => vec![0],
        };
        let followers = cells.into_iter().map(|cell| {
            let request = pb::WatchRequest {
                key: key.clone(),
                prefix,
                from_revision: from,
                cell,
            };
            self.follow_one(request, out.clone())
        });
        futures::future::try_join_all(followers).await.map(|_| ())
    }

    /// A fabric's data cells, or `[0]` on a standalone cell.
    async fn data_cells(&self) -> Result<Vec<u64>, CellError> {
        let routes = self.routes(pb::RoutesRequest::default()).await?;
        // Every data cell, with ranges or not: a cell that owns nothing under the prefix
        // now may take a range by a move later, and its stream is open by then.
        let owners = routes.ranges.iter().map(|r| r.cell);
        let mut cells: Vec<u64> = routes.cells.iter().map(|c| c.cell).chain(owners).collect();
        cells.sort_unstable();
        cells.dedup();
        Ok(if cells.is_empty() { vec![0] } else { cells })
    }

    /// Follow one stream, reopening at its cursor until `out` closes or it ends for good.
    async fn follow_one(
        &self,
        mut request: pb::WatchRequest,
        out: tokio::sync::mpsc::Sender<WatchBatch>,
    ) -> Result<(), WatchEnd> {
        let mut since_answer = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(10);
        loop {
            let answered = match self.watch(request.clone()).await {
                Ok(stream) => match drain(stream, &mut request, &out).await? {
                    Drained::Silent(answered) | Drained::Refused(answered) => {
                        // The member went quiet or stale: the next try opens elsewhere.
                        self.next.fetch_add(1, Ordering::Relaxed);
                        answered
                    }
                    Drained::Ended(answered) => answered,
                },
                Err(err) if reopens(&err) => Answered::Nothing,
                Err(err) => return Err(err.into()),
            };
            match answered {
                Answered::OutClosed => return Ok(()),
                Answered::Something => {
                    since_answer = tokio::time::Instant::now();
                    backoff = Duration::from_millis(10);
                    continue;
                }
                Answered::Moved => {
                    // The key's range is frozen for a move or just moved: the node finds
                    // its owner again after a pause (a freeze holds for seconds).
                    since_answer = tokio::time::Instant::now();
                }
                Answered::Nothing => {}
            }
            let waited = since_answer.elapsed().as_millis();
            if waited >= u128::from(limits::WATCH_RECONNECT_FOR_MS) {
                return Err(CellError::Unavailable(format!(
                    "no member served the watch for {waited} ms"
                ))
                .into());
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(limits::WATCH_BACKOFF_MAX_MS));
        }
    }
}

enum Answered {
    OutClosed,
    Something,
    Moved,
    Nothing,
}

/// How a stream ended, and what it answered before.
enum Drained {
    /// It ended, or the caller's side closed.
    Ended(Answered),
    /// Nothing came for [`limits::WATCH_SILENCE_MS`] (a live stream beats every second).
    Silent(Answered),
    /// The member refused to go on (`unavailable`: stale, stopping, unreachable).
    Refused(Answered),
}

/// Read `stream` to its end, moving `request`'s cursor past every answer; a moved key's
/// request is re-aimed at whichever cell owns it now.
async fn drain(
    mut stream: WatchStream,
    request: &mut pb::WatchRequest,
    out: &tokio::sync::mpsc::Sender<WatchBatch>,
) -> Result<Drained, WatchEnd> {
    let mut answered = Answered::Nothing;
    let silence = Duration::from_millis(limits::WATCH_SILENCE_MS);
    loop {
        let Ok(item) = tokio::time::timeout(silence, stream.next()).await else {
            return Ok(Drained::Silent(answered));
        };
        let Some(item) = item else {
            return Ok(Drained::Ended(answered));
        };
        let answer = match item {
            Ok(answer) => answer,
            Err(status) if retryable(&status) => return Ok(Drained::Refused(answered)),
            Err(status) => return Err(CellError::from(status).into()),
        };
        if answer.compacted_below > 0 {
            return Err(WatchEnd::Compacted {
                cell: answer.cell,
                oldest: answer.compacted_below,
            });
        }
        answered = Answered::Something;
        request.from_revision = request.from_revision.max(answer.next_from);
        if !answer.events.is_empty() {
            let batch = WatchBatch {
                cell: answer.cell,
                events: answer.events,
            };
            if out.send(batch).await.is_err() {
                return Ok(Drained::Ended(Answered::OutClosed));
            }
        }
        if answer.moved {
            // The node locates the key's new cell; its fences start above this cursor.
            request.cell = 0;
            return Ok(Drained::Ended(Answered::Moved));
        }
    }
}

/// Whether opening a watch failed in a way another try may not.
fn reopens(err: &CellError) -> bool {
    matches!(
        err,
        CellError::Unavailable(_) | CellError::NotLeader { .. } | CellError::WrongRange { .. }
    )
}
