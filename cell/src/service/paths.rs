//! Path reservations' RPCs: translate between `whip.v1` and the board's reservation
//! commands. Overlap, fences, expiry and who may release are decided in
//! `whip_board::reservation`, in the apply or the read snapshot; this file names the caller
//! the transport proved. No request field names a holder.

use tonic::{Request as GrpcRequest, Response, Status};
use whip_board::{Outcome, Query, QueryResult};
use whip_proto::v1 as pb;

use super::{CellApi, GrpcResult};
use crate::{convert, paths_wire};

fn answered(outcome: Outcome) -> Result<pb::PathsResponse, Status> {
    match outcome {
        Outcome::Invalid { reason } => Err(Status::invalid_argument(reason)),
        outcome => {
            let unexpected = format!("unexpected answer {outcome:?}");
            paths_wire::response(outcome).ok_or_else(|| Status::internal(unexpected))
        }
    }
}

impl CellApi {
    pub(super) async fn paths_reserve_rpc(
        &self,
        req: GrpcRequest<pb::PathsReserveRequest>,
    ) -> GrpcResult<pb::PathsResponse> {
        let key = |r: &mut pb::PathsReserveRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self
            .keyed(req, key, convert::command::paths_reserve)
            .await?;
        Ok(Response::new(answered(outcome)?))
    }

    pub(super) async fn paths_release_rpc(
        &self,
        req: GrpcRequest<pb::PathsReleaseRequest>,
    ) -> GrpcResult<pb::PathsResponse> {
        let key = |r: &mut pb::PathsReleaseRequest| std::mem::take(&mut r.idempotency_key);
        let outcome = self
            .keyed(req, key, convert::command::paths_release)
            .await?;
        Ok(Response::new(answered(outcome)?))
    }

    /// A repository's reservations, or (`mine` without a repository) the caller's own
    /// everywhere: `mine` filters by the proven caller's name, never by a request field.
    pub(super) async fn paths_list_rpc(
        &self,
        req: GrpcRequest<pb::PathsListRequest>,
    ) -> GrpcResult<pb::PathsListResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        if req.repo.is_empty() && !req.mine {
            return Err(Status::invalid_argument(
                "name a repository, or ask for your own reservations (mine)",
            ));
        }
        if !req.repo.is_empty() {
            whip_board::reservation::check_repo(&req.repo).map_err(Status::invalid_argument)?;
        }
        let query = Query::PathsList {
            repo: (!req.repo.is_empty()).then_some(req.repo),
            holder: req.mine.then(|| caller.name().to_string()),
            limit: convert::limit(req.limit),
        };
        match self.read(&caller, query).await? {
            QueryResult::Reservations(rows) => Ok(Response::new(pb::PathsListResponse {
                reservations: rows.into_iter().map(paths_wire::reservation_pb).collect(),
            })),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }
}
