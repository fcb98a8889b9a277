//! Waiting for a subject's next change without polling: [`Waiter`] marks the apply index
//! of the cell holding a board, a mailbox, a lease's queue or a key, and waits until that
//! cell applies past the mark ([`CellClient::wait_applied`]).
//!
//! The pattern is mark, read, wait: a read made after a mark sees every change the next
//! wait would answer for, so nothing that lands between the read and the wait is missed.
//! A wake says only that the cell applied something; the caller reads again to learn what.

use std::time::Duration;

use whip_proto::v1 as pb;
use whip_proto::v1::wait_applied_request::Subject;

use super::CellClient;
use crate::error::CellError;
use crate::limits::{WAIT_APPLIED_CALL_MS, WAIT_UNHOSTED_PAUSE_MS};

/// A mark on the apply index of one subject's cell (see the module docs).
pub struct Waiter<'a> {
    client: &'a CellClient,
    subject: Subject,
    after: u64,
}

impl<'a> Waiter<'a> {
    /// Mark the subject's cell as it is now; read the subject after this.
    pub async fn mark(client: &'a CellClient, subject: Subject) -> Result<Self, CellError> {
        let mut waiter = Waiter {
            client,
            subject,
            after: 0,
        };
        waiter.after = waiter.ask(0, Duration::ZERO).await?.applied_index;
        Ok(waiter)
    }

    /// Wait until the subject's cell applies past the mark, or `left` passes, and move the
    /// mark; true when the cell applied something (read the subject again). A server that
    /// hosts no member of the cell cannot wake the client: it waits by time, at most
    /// [`WAIT_UNHOSTED_PAUSE_MS`].
    pub async fn next(&mut self, left: Duration) -> Result<bool, CellError> {
        let ask = left.min(Duration::from_millis(WAIT_APPLIED_CALL_MS));
        let answer = self.ask(self.after, ask).await?;
        if !answer.hosted {
            let pause = left.min(Duration::from_millis(WAIT_UNHOSTED_PAUSE_MS));
            tokio::time::sleep(pause).await;
            return Ok(true);
        }
        let moved = answer.applied_index != self.after;
        self.after = answer.applied_index;
        Ok(moved)
    }

    async fn ask(&self, after: u64, wait: Duration) -> Result<pb::WaitAppliedResponse, CellError> {
        let request = pb::WaitAppliedRequest {
            subject: Some(self.subject.clone()),
            after_index: after,
            timeout_ms: wait.as_millis() as u64,
        };
        self.client.wait_applied(request).await
    }
}
