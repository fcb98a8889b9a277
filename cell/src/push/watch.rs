//! Watch streams: a key's or a prefix's changes from a revision, read from this server's
//! member of the cell and woken by its applies (no polling).
//!
//! The board decides everything a watch answers ([`whip_board::watch`]): which events the
//! caller may see, where the next read starts, whether the history was compacted below the
//! wanted revision, and whether a key's range left the cell. This loop only reads the local
//! member's applied state after each apply and sends what the board answered. Events are
//! committed facts, so any replica may serve them; a lagging follower is only late.

use tonic::Status;
use whip_board::access::Caller;
use whip_board::watch::{EventKind, KvEvent, WatchPage};
use whip_board::{Query, QueryResult};
use whip_proto::v1 as pb;

use super::streams::StreamSlot;
use crate::error::CellError;
use crate::limits::WATCH_PROGRESS_MS;
use crate::runtime::Cell;
use crate::service::read_refused;

type Sender = tokio::sync::mpsc::Sender<Result<pb::WatchResponse, Status>>;

/// One read of the watch history for `caller` from `from`.
async fn read(
    member: &Cell,
    caller: &Caller,
    req: &pb::WatchRequest,
    from: u64,
) -> Result<WatchPage, Status> {
    let query = Query::By {
        caller: caller.clone(),
        query: Box::new(Query::KvWatch {
            key: req.key.clone(),
            prefix: req.prefix,
            from,
        }),
    };
    match member.local_query(query).await.map_err(Status::from)? {
        QueryResult::KvEvents(page) => Ok(page),
        QueryResult::Refused(refusal) => Err(read_refused(refusal)),
        other => Err(Status::from(CellError::Fatal(format!(
            "a watch read answered {other:?}"
        )))),
    }
}

/// The first read, made before the stream opens so that a refusal is the call's error.
pub(crate) async fn first_page(
    member: &Cell,
    caller: &Caller,
    req: &pb::WatchRequest,
) -> Result<WatchPage, Status> {
    read(member, caller, req, req.from_revision).await
}

/// Send `first`, then every later page after each apply, until the caller hangs up, the
/// history is compacted past the cursor or the key's range leaves this cell.
pub(crate) async fn watch_loop(
    member: Cell,
    caller: Caller,
    req: pb::WatchRequest,
    first: WatchPage,
    (tx, _slot): (Sender, StreamSlot),
) {
    let mut applied = member.applied_signal();
    // The first page was read before this subscription: an apply between that read and
    // now would be marked seen already and never wake the loop (found by the Python
    // client's watch test: a put right after the watch opened was never sent). Count it
    // as unseen, so the first wait reads once more.
    applied.mark_changed();
    let cell = member.cell_id();
    let mut from = req.from_revision;
    let mut page = first;
    let mut told = std::time::Instant::now();
    loop {
        let tell = from == 0 || told.elapsed().as_millis() >= u128::from(WATCH_PROGRESS_MS);
        if tell {
            told = std::time::Instant::now();
        }
        match send_page(&tx, (cell, tell), from, &page).await {
            Sent::Continue => {}
            Sent::Ended => return,
        }
        from = page.next_from;
        if !page.more {
            tokio::select! {
                changed = applied.changed() => if changed.is_err() { return },
                _ = tx.closed() => return,
            }
        }
        // Reading after marking the signal seen: an apply during the read wakes us again.
        applied.borrow_and_update();
        page = match read(&member, &caller, &req, from).await {
            Ok(page) => page,
            Err(status) => {
                let _ = tx.send(Err(status)).await;
                return;
            }
        };
    }
}

enum Sent {
    Continue,
    Ended,
}

/// Send one page as one answer per revision; a compacted or moved page ends the stream.
/// With `tell`, a page that moved the cursor without events says so (a resuming client
/// then skips what was looked at).
async fn send_page(tx: &Sender, (cell, tell): (u64, bool), from: u64, page: &WatchPage) -> Sent {
    if page.compacted(from) {
        let answer = pb::WatchResponse {
            next_from: from,
            compacted_below: page.compacted_below,
            cell,
            ..Default::default()
        };
        let _ = tx.send(Ok(answer)).await;
        return Sent::Ended;
    }
    for (revision, events) in by_revision(&page.events) {
        let answer = pb::WatchResponse {
            events: events.iter().map(event).collect(),
            next_from: revision + 1,
            cell,
            ..Default::default()
        };
        if tx.send(Ok(answer)).await.is_err() {
            return Sent::Ended;
        }
    }
    let moved = !page.serving && !page.more;
    let progress = pb::WatchResponse {
        next_from: page.next_from,
        moved,
        cell,
        ..Default::default()
    };
    let quiet = page.events.is_empty() && page.next_from > from;
    if (moved || tell && quiet) && tx.send(Ok(progress)).await.is_err() {
        return Sent::Ended;
    }
    match moved {
        true => Sent::Ended,
        false => Sent::Continue,
    }
}

fn by_revision(events: &[KvEvent]) -> Vec<(u64, &[KvEvent])> {
    events
        .chunk_by(|a, b| a.revision == b.revision)
        .map(|chunk| (chunk[0].revision, chunk))
        .collect()
}

fn event(event: &KvEvent) -> pb::WatchEvent {
    let kind = match event.kind {
        EventKind::Put => pb::watch_event::Kind::Put,
        EventKind::Delete => pb::watch_event::Kind::Delete,
    };
    pb::WatchEvent {
        kind: kind as i32,
        key: event.key.clone(),
        value: event.value.clone(),
        revision: event.revision,
        version: event.version,
    }
}
