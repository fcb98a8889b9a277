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

use super::fresh;
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

/// The first read, made before the stream opens so that a refusal is the call's error; a
/// member that left the cell or leads unconfirmed refuses `unavailable` (the client opens
/// the stream on another node).
pub(crate) async fn first_page(
    member: &Cell,
    caller: &Caller,
    req: &pb::WatchRequest,
) -> Result<WatchPage, Status> {
    if let Err(stale) = fresh::Look::default().judge(fresh::observe(member), 0) {
        return Err(Status::unavailable(stale.to_string()));
    }
    read(member, caller, req, req.from_revision).await
}

/// Send `first`, then every later page after each apply, until the caller hangs up, the
/// history is compacted past the cursor or the key's range leaves this cell. Every
/// [`WATCH_PROGRESS_MS`] without an apply the loop looks at the member ([`fresh`]): a
/// fresh one sends a progress answer (the client knows the stream lives), a stale one ends
/// the stream `unavailable`.
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
    let began = std::time::Instant::now();
    let mut told: Option<std::time::Instant> = None;
    let mut look = fresh::Look::default();
    loop {
        let tell = told.is_none_or(|at| at.elapsed().as_millis() >= u128::from(WATCH_PROGRESS_MS));
        if tell {
            told = Some(std::time::Instant::now());
        }
        if let Sent::Ended = send_page(&tx, (cell, tell), from, &page).await {
            return;
        }
        from = page.next_from;
        if !page.more {
            let now_ms = || began.elapsed().as_millis() as u64;
            match wait_apply(
                &member,
                &tx,
                (cell, from),
                (&mut applied, &mut look),
                now_ms,
            )
            .await
            {
                Waited::Applied { beat } => told = beat.or(told),
                Waited::Ended => return,
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

enum Waited {
    /// The member applied; `beat` is when the last heartbeat went out, if one did.
    Applied {
        beat: Option<std::time::Instant>,
    },
    Ended,
}

/// Wait for the member's next apply, sending a heartbeat every [`WATCH_PROGRESS_MS`]
/// meanwhile: a progress answer at the cursor while the member is fresh; a stale member's
/// stream ends `unavailable`.
async fn wait_apply(
    member: &Cell,
    tx: &Sender,
    (cell, from): (u64, u64),
    (applied, look): (&mut tokio::sync::watch::Receiver<u64>, &mut fresh::Look),
    now_ms: impl Fn() -> u64,
) -> Waited {
    let beat = std::time::Duration::from_millis(WATCH_PROGRESS_MS);
    let mut last_beat = None;
    loop {
        tokio::select! {
            changed = applied.changed() => return match changed {
                Ok(()) => Waited::Applied { beat: last_beat },
                Err(_) => Waited::Ended,
            },
            _ = tx.closed() => return Waited::Ended,
            () = tokio::time::sleep(beat) => {}
        }
        let answer = match look.judge(fresh::observe(member), now_ms()) {
            Ok(()) => pb::WatchResponse {
                next_from: from,
                cell,
                ..Default::default()
            },
            Err(stale) => {
                tracing::debug!(cell, %stale, "a watch stream ends on a stale member");
                let _ = tx.send(Err(Status::unavailable(stale.to_string()))).await;
                return Waited::Ended;
            }
        };
        if tx.send(Ok(answer)).await.is_err() {
            return Waited::Ended;
        }
        last_beat = Some(std::time::Instant::now());
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
    // A told page without events always answers: the first one tells the client the stream
    // is served, a later one that the cursor moved past other keys' events.
    if (moved || tell && page.events.is_empty()) && tx.send(Ok(progress)).await.is_err() {
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
