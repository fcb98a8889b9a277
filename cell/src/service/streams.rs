//! Server streams: team signals and election observers.

use std::sync::Arc;

use tonic::Status;
use whip_board::Query;
use whip_proto::v1 as pb;

use super::{Dispatch, signal_ledger};
use crate::{convert, limits};

/// Send every signal after `after_seq`, then each new one, until the subscriber hangs up.
pub(super) async fn signal_loop(
    dispatch: Arc<dyn Dispatch>,
    req: pb::SignalSubscribeRequest,
    tx: tokio::sync::mpsc::Sender<Result<pb::LedgerEntry, Status>>,
) {
    let (owner, name) = signal_ledger(&req.team);
    let mut after = req.after_seq;
    let poll = std::time::Duration::from_millis(limits::OBSERVE_POLL_MS);
    loop {
        let query = Query::LedgerList {
            owner: owner.clone(),
            name: name.clone(),
            partition: Some(req.topic.clone()),
            after_seq: after,
            limit: convert::limit(0),
        };
        let read = dispatch.read(query).await;
        match read
            .map_err(Status::from)
            .and_then(convert::ledger_list_response)
        {
            Ok(list) => {
                for entry in list.entries {
                    after = after.max(entry.seq);
                    if tx.send(Ok(entry)).await.is_err() {
                        return;
                    }
                }
            }
            Err(status) => tracing::debug!(error = %status.message(), "signal read"),
        }
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = tx.closed() => return,
        }
    }
}

/// Send the group's leader, then each change, until the observer hangs up. Reads hide a
/// leader whose deadline passed, so a withdrawal shows within one poll of the expiry.
pub(super) async fn observe_loop(
    dispatch: Arc<dyn Dispatch>,
    group: String,
    tx: tokio::sync::mpsc::Sender<Result<pb::LeaderResponse, Status>>,
) {
    let mut last: Option<Option<(String, u64, Vec<String>)>> = None;
    let poll = std::time::Duration::from_millis(limits::OBSERVE_POLL_MS);
    loop {
        let read = dispatch
            .read(Query::ElectionLeader {
                group: group.clone(),
            })
            .await;
        match read
            .map_err(Status::from)
            .and_then(convert::leader_response)
        {
            Ok(answer) => {
                let seen = answer
                    .leader
                    .as_ref()
                    .map(|l| (l.candidate.clone(), l.fence, l.endpoints.clone()));
                if last.as_ref() != Some(&seen) {
                    last = Some(seen);
                    if tx.send(Ok(answer)).await.is_err() {
                        return;
                    }
                }
            }
            // The cell is electing or cut off: keep watching; the observer sees the next
            // answer once it comes.
            Err(status) => tracing::debug!(error = %status.message(), "observe read"),
        }
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = tx.closed() => return,
        }
    }
}
