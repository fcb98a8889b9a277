//! Waits for the next apply: what a client waits on between two reads of a board, a
//! mailbox, a lease's queue or a key, instead of polling.
//!
//! The answer is a log index, never the subject's state: a waiter learns only that the
//! cell holding its subject applied something, then reads the subject as it always does
//! (so every read still passes the board's guards). A client that read after an answer of
//! index N and waits again with `after_index` N misses no change: the change applies at
//! an index above N on every replica.

use std::time::Duration;

use tonic::{Response, Status};
use whip_board::route;
use whip_proto::v1 as pb;

use super::{CellApi, GrpcRequest, GrpcResult, mail};
use crate::limits::WAIT_APPLIED_MAX_MS;
use crate::push::streams;

/// The routing point of a wait's subject.
fn subject_point(subject: Option<pb::wait_applied_request::Subject>) -> Result<u64, Status> {
    use pb::wait_applied_request::Subject;
    match subject {
        Some(Subject::Board(team)) => Ok(route::team_point(&team)),
        Some(Subject::Inbox(address)) => Ok(mail::address(&address)?.point()),
        Some(Subject::Lease(lease)) => {
            let lease = crate::convert::resource(Some(lease), "lease")?;
            Ok(route::resource_point(&lease))
        }
        Some(Subject::Key(key)) => Ok(route::kv_point(&key)),
        None => Err(Status::invalid_argument(
            "a wait names its subject: board, inbox, lease or key",
        )),
    }
}

impl CellApi {
    /// `WaitApplied`: answer once the member of the subject's cell hosted here applies past
    /// `after_index`, or when the (capped) timeout passes. Anonymous callers are refused;
    /// a waiting call holds one of the caller's stream slots.
    pub(super) async fn wait_applied_rpc(
        &self,
        req: GrpcRequest<pb::WaitAppliedRequest>,
    ) -> GrpcResult<pb::WaitAppliedResponse> {
        let caller = self.caller_of(&req).await?;
        whip_board::admit::admit_follow(&caller)
            .map_err(|refusal| Status::unauthenticated(refusal.to_string()))?;
        let _slot = (self.streams).take(streams::stream_caller(caller.agent(), &req))?;
        let req = req.into_inner();
        let point = subject_point(req.subject)?;
        let Some(mut applied) = self.dispatch.applied_signal(point).await else {
            return Ok(Response::new(pb::WaitAppliedResponse {
                applied_index: 0,
                hosted: false,
            }));
        };
        let timeout = Duration::from_millis(req.timeout_ms.min(WAIT_APPLIED_MAX_MS));
        let deadline = tokio::time::Instant::now() + timeout;
        let index = crate::push::applied_past(&mut applied, req.after_index, deadline).await?;
        Ok(answer(index))
    }
}

fn answer(index: u64) -> Response<pb::WaitAppliedResponse> {
    Response::new(pb::WaitAppliedResponse {
        applied_index: index,
        hosted: true,
    })
}
