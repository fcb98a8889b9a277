//! The admin API (init, membership, status) and the Raft transport of hosted cells.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tonic::{Request as GrpcRequest, Response, Status};
use whip_board::{Query, Request};
use whip_proto::v1 as pb;
use whip_proto::v1::{admin_server, raft_server};

use super::{Cells, GrpcResult, hosted};
use crate::runtime::Cell;
use crate::types::{decode, encode};

pub(super) struct AdminApi {
    pub(super) cells: Arc<dyn Cells>,
}

#[tonic::async_trait]
impl admin_server::Admin for AdminApi {
    async fn init(&self, req: GrpcRequest<pb::InitRequest>) -> GrpcResult<pb::AdminResponse> {
        let req = req.into_inner();
        let cell = hosted(self.cells.as_ref(), req.cell)?;
        let members: BTreeMap<u64, String> =
            req.members.into_iter().map(|m| (m.id, m.addr)).collect();
        if members.is_empty() {
            return Err(Status::invalid_argument("init needs at least one member"));
        }
        let count = members.len();
        cell.initialize(members).await?;
        Ok(Response::new(pb::AdminResponse {
            message: format!("initialized with {count} voters"),
        }))
    }

    async fn add_learner(
        &self,
        req: GrpcRequest<pb::AddLearnerRequest>,
    ) -> GrpcResult<pb::AdminResponse> {
        let req = req.into_inner();
        let cell = hosted(self.cells.as_ref(), req.cell)?;
        let member = req
            .member
            .ok_or_else(|| Status::invalid_argument("member is required"))?;
        cell.add_learner(member.id, member.addr.clone()).await?;
        Ok(Response::new(pb::AdminResponse {
            message: format!("learner {} at {} caught up", member.id, member.addr),
        }))
    }

    async fn change_membership(
        &self,
        req: GrpcRequest<pb::ChangeMembershipRequest>,
    ) -> GrpcResult<pb::AdminResponse> {
        let req = req.into_inner();
        let cell = hosted(self.cells.as_ref(), req.cell)?;
        let voters: BTreeSet<u64> = req.voters.into_iter().collect();
        if voters.is_empty() {
            return Err(Status::invalid_argument("a cell needs at least one voter"));
        }
        cell.change_membership(voters.clone(), req.retain).await?;
        Ok(Response::new(pb::AdminResponse {
            message: format!("voters are now {voters:?}"),
        }))
    }
}

pub(super) struct RaftApi {
    pub(super) cells: Arc<dyn Cells>,
}

impl RaftApi {
    /// The hosted cell a blob is for and its decoded message.
    fn open<T: for<'de> serde::Deserialize<'de>>(
        &self,
        req: GrpcRequest<pb::Blob>,
    ) -> Result<(Cell, T), Status> {
        let blob = req.into_inner();
        let cell = hosted(self.cells.as_ref(), blob.cell)?;
        let message = decode(&blob.data)
            .map_err(|e| Status::invalid_argument(format!("malformed message: {e}")))?;
        Ok((cell, message))
    }
}

fn blob<T: serde::Serialize>(value: &T) -> GrpcResult<pb::Blob> {
    Ok(Response::new(pb::Blob {
        data: encode(value),
        cell: 0,
    }))
}

#[tonic::async_trait]
impl raft_server::Raft for RaftApi {
    async fn append_entries(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, rpc) = self.open(req)?;
        blob(&cell.raft().append_entries(rpc).await)
    }

    async fn vote(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, rpc) = self.open(req)?;
        blob(&cell.raft().vote(rpc).await)
    }

    async fn install_snapshot(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, rpc) = self.open(req)?;
        blob(&cell.raft().install_snapshot(rpc).await)
    }

    async fn forward(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, requests): (Cell, Vec<Request>) = self.open(req)?;
        let results =
            futures::future::join_all(requests.into_iter().map(|r| cell.submit_forwarded(r))).await;
        blob(&results)
    }

    async fn read(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, query): (Cell, Query) = self.open(req)?;
        blob(&cell.read_forwarded(query).await)
    }
}
