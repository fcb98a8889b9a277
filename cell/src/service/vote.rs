//! The voting plane's RPCs: translate between `whip.v1` and the board's vote commands. Who
//! may give roles, open, cast, close and read is decided in `whip_board::vote`, in the
//! apply or the read snapshot; this file only refuses what cannot be decoded (an unknown
//! method, role or fraction) and names the caller the transport proved. No request field
//! names a voter.

use tonic::{Request as GrpcRequest, Response, Status};
use whip_board::vote::Role;
use whip_board::{Command, Outcome, Query, QueryResult};
use whip_proto::v1 as pb;

use super::{CellApi, GrpcResult};
use crate::vote_wire;

fn answered(outcome: Outcome) -> Result<pb::VoteResponse, Status> {
    let unexpected = format!("unexpected answer {outcome:?}");
    vote_wire::response(outcome).ok_or_else(|| Status::internal(unexpected))
}

fn unexpected(result: QueryResult) -> Status {
    Status::internal(format!("unexpected answer {result:?}"))
}

impl CellApi {
    pub(super) async fn team_role_rpc(
        &self,
        req: GrpcRequest<pb::TeamRoleRequest>,
    ) -> GrpcResult<pb::VoteResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let role = Role::parse(&req.role).ok_or_else(|| {
            Status::invalid_argument(format!("role {:?} is not coordinator or worker", req.role))
        })?;
        let command = Command::TeamRole {
            team: req.team,
            member: req.member,
            role,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(answered(outcome)?))
    }

    pub(super) async fn vote_open_rpc(
        &self,
        req: GrpcRequest<pb::VoteOpenRequest>,
    ) -> GrpcResult<pb::VoteResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let rules = vote_wire::rules(&req).map_err(Status::invalid_argument)?;
        let command = Command::VoteOpen {
            team: req.team,
            rules,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(answered(outcome)?))
    }

    pub(super) async fn vote_cast_rpc(
        &self,
        req: GrpcRequest<pb::VoteCastRequest>,
    ) -> GrpcResult<pb::VoteResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::VoteCast {
            proposal: req.proposal,
            choice: req.choice,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(answered(outcome)?))
    }

    pub(super) async fn vote_close_rpc(
        &self,
        req: GrpcRequest<pb::VoteCloseRequest>,
    ) -> GrpcResult<pb::VoteResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::VoteClose {
            proposal: req.proposal,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(answered(outcome)?))
    }

    pub(super) async fn vote_show_rpc(
        &self,
        req: GrpcRequest<pb::VoteShowRequest>,
    ) -> GrpcResult<pb::VoteShowResponse> {
        let caller = self.caller_of(&req).await?;
        let proposal = req.into_inner().proposal;
        whip_board::vote::parse_id(&proposal).map_err(Status::invalid_argument)?;
        let result = self.read(&caller, Query::VoteProposal { proposal }).await?;
        let unexpected_answer = unexpected(result.clone());
        vote_wire::show_response(result)
            .map(Response::new)
            .ok_or(unexpected_answer)
    }

    pub(super) async fn vote_ballots_rpc(
        &self,
        req: GrpcRequest<pb::VoteBallotsRequest>,
    ) -> GrpcResult<pb::VoteBallotsResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        whip_board::vote::parse_id(&req.proposal).map_err(Status::invalid_argument)?;
        let query = Query::VoteBallots {
            proposal: req.proposal,
            after_seq: req.after_seq,
            limit: crate::convert::limit(req.limit),
        };
        match self.read(&caller, query).await? {
            QueryResult::Ballots(ballots) => Ok(Response::new(pb::VoteBallotsResponse {
                ballots: ballots.into_iter().map(vote_wire::ballot_pb).collect(),
            })),
            other => Err(unexpected(other)),
        }
    }

    pub(super) async fn vote_list_rpc(
        &self,
        req: GrpcRequest<pb::VoteListRequest>,
    ) -> GrpcResult<pb::VoteListResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let query = Query::VoteList {
            team: req.team,
            limit: crate::convert::limit(req.limit),
        };
        match self.read(&caller, query).await? {
            QueryResult::Proposals(proposals) => Ok(Response::new(pb::VoteListResponse {
                proposals: proposals.into_iter().map(vote_wire::proposal_pb).collect(),
            })),
            other => Err(unexpected(other)),
        }
    }
}
