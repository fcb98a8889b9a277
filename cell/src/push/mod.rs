//! Server push: the long-lived loops behind streaming calls (key watches, election
//! observers, team signals) and the bounded per-caller slots they hold.
//!
//! Owns: what a stream sends after its first answer, woken by the local member's applies
//! (never polling the state), until the caller hangs up or the stream ends; a quiet watch
//! stream's heartbeat, and whether the local member is fresh enough to serve it
//! ([`fresh`]).
//!
//! Invariants: every answer a loop sends is what `whip_board` answered for the caller in
//! one read (`Query::By`); a loop never writes. A stream holds one of its caller's slots
//! for its whole life ([`streams::StreamSlots`]).
//!
//! Never: decide who may read what (board does, in the read), or run in the request path
//! of `crate::service`, which only translates one request into one submit or read and
//! hands a stream's first answer here.

pub(crate) mod fresh;
pub(crate) mod streams;
pub(crate) mod watch;

/// Wait until `applied` passes `after_index` (0: answer at once) or `deadline` passes: the
/// applied index then. A member that stopped is `unavailable`.
pub(crate) async fn applied_past(
    applied: &mut tokio::sync::watch::Receiver<u64>,
    after_index: u64,
    deadline: tokio::time::Instant,
) -> Result<u64, tonic::Status> {
    loop {
        let index = *applied.borrow_and_update();
        if after_index == 0 || index > after_index {
            return Ok(index);
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() {
                return Err(tonic::Status::unavailable("the cell's member stopped"));
            },
            () = tokio::time::sleep_until(deadline) => return Ok(index),
        }
    }
}
