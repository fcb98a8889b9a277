//! Carrying out follow-ups: what `whip_board::next` decided must happen after an apply.
//!
//! Board decides every follow-up and writes it to the deciding cell's outbox in the same
//! apply. This module only carries them out: each follow-up's commands go, as the server,
//! under keys made from the follow-up's own key, so a follow-up carried out twice (by the
//! service that answered its request, then by the outbox's executor; or by an executor
//! that died after sending and one that took over) takes effect once. The follow-ups those
//! commands oblige in turn (board decides them the same way) are carried out after them.
//!
//! The executor: the leader of a cell reads its outbox ([`Query::FollowUps`]), carries out
//! each follow-up and acknowledges it (`Command::FollowUpDone`). A standalone cell runs
//! [`executor_loop`] itself; a fabric node runs `whip_fabric`'s over the cells it leads,
//! with the same [`drain`].
//!
//! This module never decides whether something follows: it must not look at an outcome
//! except through `whip_board::next`.

use std::time::Duration;

use whip_board::next::{FollowUp, Next, follow_up_key, follow_ups};
use whip_board::{Command, Outcome, Query, QueryResult, Request};

use crate::error::CellError;
use crate::limits;
use crate::runtime::Cell;
use crate::service::Dispatch;

/// One command a follow-up sent and what it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The follow-up the command belongs to.
    pub follow_up: FollowUp,
    /// The command's outcome.
    pub outcome: Outcome,
}

/// Carry out `follow_up` under `key`, then every follow-up its commands oblige: the
/// outcomes, in the order sent.
pub async fn carry_out(
    dispatch: &dyn Dispatch,
    key: &str,
    follow_up: &FollowUp,
) -> Result<Vec<Sent>, CellError> {
    let mut queue = vec![(key.to_string(), follow_up.clone())];
    let mut sent = Vec::new();
    while let Some((key, follow_up)) = queue.pop() {
        let mut page = 0usize;
        loop {
            let request = Request::server(Some(format!("{key}/{page}")), follow_up.command());
            let outcome = dispatch.submit(request.clone()).await?;
            let then = follow_ups(&request, &outcome);
            let keys = (0..then.len()).map(|i| follow_up_key(&request, None, i));
            queue.extend(keys.zip(then).rev());
            let done = follow_up.done_after(&outcome);
            sent.push(Sent {
                follow_up: follow_up.clone(),
                outcome,
            });
            page += 1;
            if done {
                break;
            }
            if page >= limits::FOLLOW_UP_COMMANDS_MAX {
                return Err(CellError::Fatal(format!(
                    "follow-up {follow_up:?} outgrew {} commands",
                    limits::FOLLOW_UP_COMMANDS_MAX
                )));
            }
        }
    }
    Ok(sent)
}

/// The cell whose outbox an executor drains: its reads and its own commands.
#[tonic::async_trait]
pub trait Outbox: Send + Sync {
    /// A read on the outbox's cell.
    async fn read_home(&self, query: Query) -> Result<QueryResult, CellError>;
    /// A command on the outbox's cell.
    async fn submit_home(&self, request: Request) -> Result<Outcome, CellError>;
}

/// Carry out and acknowledge every follow-up waiting in `outbox`, through `dispatch`:
/// how many were acknowledged. A follow-up that fails stays for the next drain.
pub async fn drain(outbox: &dyn Outbox, dispatch: &dyn Dispatch) -> Result<usize, CellError> {
    let query = Query::FollowUps {
        after_seq: 0,
        limit: limits::FOLLOW_UPS_PER_DRAIN_MAX,
    };
    let QueryResult::FollowUps(pending) = outbox.read_home(query).await? else {
        return Err(CellError::Fatal("the outbox answered another shape".into()));
    };
    let mut acknowledged = 0;
    for Next {
        seq,
        key,
        follow_up,
    } in pending
    {
        carry_out(dispatch, &key, &follow_up).await?;
        let done = Request::server(Some(format!("{key}/done")), Command::FollowUpDone { seq });
        outbox.submit_home(done).await?;
        acknowledged += 1;
    }
    Ok(acknowledged)
}

#[tonic::async_trait]
impl Outbox for Cell {
    async fn read_home(&self, query: Query) -> Result<QueryResult, CellError> {
        self.read(query).await
    }

    async fn submit_home(&self, request: Request) -> Result<Outcome, CellError> {
        self.submit(request).await
    }
}

/// A standalone cell's executor: while this member leads, drain the outbox whenever
/// something was applied since a drain that found it empty.
pub(crate) async fn executor_loop(cell: std::sync::Weak<crate::runtime::Inner>) {
    let every = Duration::from_millis(limits::FOLLOW_UP_LOOK_MS);
    let mut signal = None;
    let mut seen_empty_at = None;
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = cell.upgrade() else { return };
        let cell = Cell::from_inner(inner);
        if cell.stopped() {
            return;
        }
        let receiver = signal.get_or_insert_with(|| cell.applied_signal());
        let applied = *receiver.borrow_and_update();
        if !cell.is_leader() || seen_empty_at == Some(applied) {
            continue;
        }
        match drain(&cell, &cell).await {
            Ok(0) => seen_empty_at = Some(applied),
            Ok(_) => seen_empty_at = None,
            Err(e) => tracing::warn!(error = %e, "carrying out follow-ups"),
        }
    }
}
