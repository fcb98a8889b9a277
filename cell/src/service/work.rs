//! The work registry's RPCs: translate between `whip.v1` and the board's registry
//! commands. Admission, authority and limits are decided in `whip_board::work`; this file
//! chooses a new root's id before routing and, after a revoke, sends the revocations of
//! the identities the state machine named.

use tonic::{Request as GrpcRequest, Response, Status};
use whip_board::access::Caller;
use whip_board::work::{
    AuditView, LimitsUpdate, Signal, WorkEntryView, WorkKind, WorkLimits, WorkRefusal, check_id,
    root_of,
};
use whip_board::{Command, Outcome, Query, QueryResult};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::convert::answered;

use super::{CellApi, GrpcResult};

/// The id of a new lineage root: derived from the caller and its idempotency key (a retry
/// lands on the same root), or random without a key.
fn root_id(caller: &Caller, idempotency_key: &str) -> String {
    match idempotency_key.is_empty() {
        true => whip_board::work::derived_root(&crate::identity::new_token()),
        false => whip_board::work::derived_root(&format!("{}\0{idempotency_key}", caller.name())),
    }
}

fn kind(text: &str) -> Result<WorkKind, Status> {
    WorkKind::parse(text).ok_or_else(|| {
        Status::invalid_argument(format!(
            "work kind {text:?} is unknown (session, run, subagent, shell, job)"
        ))
    })
}

fn signal(text: &str) -> Result<Signal, Status> {
    Signal::parse(text).ok_or_else(|| {
        Status::invalid_argument(format!("signal {text:?} is unknown (run, pause, stop)"))
    })
}

fn id(text: &str) -> Result<String, Status> {
    check_id(text).map_err(Status::invalid_argument)?;
    Ok(text.to_string())
}

/// An entry on the wire.
pub(crate) fn entry_pb(entry: WorkEntryView) -> pb::WorkEntry {
    pb::WorkEntry {
        id: entry.id,
        kind: entry.kind.code().into(),
        owner: entry.owner,
        parent: entry.parent.unwrap_or_default(),
        lineage: entry.lineage,
        depth: entry.depth,
        class: entry.class,
        signal: entry.signal.code().into(),
        created_ms: entry.created_ms,
        expires_ms: entry.expires_ms,
        children: entry.children,
        budget: entry.budget,
    }
}

/// A refusal that is not an admission answer, as a gRPC error with its code in front.
fn refusal_status(refusal: WorkRefusal) -> Status {
    let message = format!("{}: {refusal}", refusal.code());
    match refusal {
        WorkRefusal::UnknownEntry { .. } => Status::not_found(message),
        WorkRefusal::NotAuthorized { .. } => Status::permission_denied(refusal.to_string()),
        WorkRefusal::AnonymousRefused => Status::unauthenticated(refusal.to_string()),
        WorkRefusal::UnknownClass { .. } => Status::invalid_argument(message),
        WorkRefusal::Limit { .. } => Status::internal(message),
    }
}

/// A registry outcome on the wire.
pub(crate) fn work_response(outcome: Outcome) -> Result<pb::WorkResponse, Status> {
    let mut r = pb::WorkResponse::default();
    match outcome {
        Outcome::WorkAdmitted { entry, peers } => {
            (r.code, r.outcome) = answered(Code::WorkAdmitted);
            r.entry = Some(entry_pb(*entry));
            r.peers = peers;
        }
        Outcome::WorkRefused {
            refusal:
                refusal @ WorkRefusal::Limit {
                    limit,
                    max,
                    current,
                    ..
                },
        } => {
            (r.code, r.outcome) = answered(Code::WorkRefused);
            r.limit = limit.code().into();
            r.max = max;
            r.current = current;
            r.reason = refusal.to_string();
        }
        Outcome::WorkRefused { refusal } => return Err(refusal_status(refusal)),
        Outcome::WorkRenewed {
            signal,
            reason,
            expires_ms,
            budget,
        } => {
            (r.code, r.outcome) = answered(Code::WorkRenewed);
            r.signal = signal.code().into();
            r.signal_reason = reason.code().into();
            r.expires_ms = expires_ms;
            r.budget = budget;
        }
        Outcome::WorkScoped {
            id: _,
            class,
            budget,
        } => {
            (r.code, r.outcome) = answered(Code::WorkScoped);
            r.class = class;
            r.budget = budget;
        }
        Outcome::WorkSignalled { id: _, signal } => {
            (r.code, r.outcome) = answered(Code::WorkSignalled);
            r.signal = signal.code().into();
        }
        Outcome::WorkRevoked { removed, agents } => {
            (r.code, r.outcome) = answered(Code::WorkRevoked);
            r.removed = removed;
            r.revoked_agents = agents;
        }
        other => return Err(Status::internal(format!("unexpected answer {other:?}"))),
    }
    Ok(r)
}

fn limits_pb(limits: WorkLimits) -> pb::WorkLimitsResponse {
    pb::WorkLimitsResponse {
        fabric_max: limits.fabric_max,
        cell_max: limits.cell_max,
        depth_max: limits.depth_max,
        children_max: limits.children_max,
        classes: limits.classes.into_iter().collect(),
        owner_max: limits.owner_max,
    }
}

fn audit_pb(row: AuditView) -> pb::AuditRow {
    pb::AuditRow {
        seq: row.seq,
        time_ms: row.time_ms,
        actor: row.actor,
        action: row.action.code().into(),
        target: row.target,
        outcome: row.outcome,
        detail: row.detail,
        cell: row.cell,
    }
}

impl CellApi {
    pub(super) async fn work_register_rpc(
        &self,
        req: GrpcRequest<pb::WorkRegisterRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let parent = match req.parent.is_empty() {
            true => None,
            false => Some(id(&req.parent)?),
        };
        let root = match &parent {
            Some(parent) => root_of(parent).to_string(),
            None => root_id(&who, &req.idempotency_key),
        };
        let class = match req.class.is_empty() {
            true => whip_board::work::DEFAULT_CLASS.to_string(),
            false => req.class,
        };
        let command = Command::WorkRegister {
            root,
            parent,
            kind: kind(&req.kind)?,
            class,
            ttl_ms: req.ttl_ms,
            owner: (!req.owner.is_empty()).then_some(req.owner),
            quota_retry: false,
        };
        let outcome = self.submit(&who, req.idempotency_key, command).await?;
        Ok(Response::new(work_response(outcome)?))
    }

    pub(super) async fn work_renew_rpc(
        &self,
        req: GrpcRequest<pb::WorkRenewRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::WorkRenew {
            id: id(&req.id)?,
            ttl_ms: req.ttl_ms,
        };
        let outcome = self.submit(&who, req.idempotency_key, command).await?;
        Ok(Response::new(work_response(outcome)?))
    }

    pub(super) async fn work_signal_rpc(
        &self,
        req: GrpcRequest<pb::WorkSignalRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::WorkSignal {
            id: id(&req.id)?,
            signal: signal(&req.signal)?,
        };
        let outcome = self.submit(&who, req.idempotency_key, command).await?;
        Ok(Response::new(work_response(outcome)?))
    }

    pub(super) async fn work_scope_rpc(
        &self,
        req: GrpcRequest<pb::WorkScopeRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::WorkScope {
            id: id(&req.id)?,
            class: (!req.class.is_empty()).then_some(req.class),
            budget: req.budget,
        };
        let outcome = self.submit(&who, req.idempotency_key, command).await?;
        Ok(Response::new(work_response(outcome)?))
    }

    /// Revoke an entry's subtree, then carry out what board decided follows: the
    /// identities it named revoked on their own cells (each only if the revoker enrolled
    /// it, or the operator revokes: that cell decides), and the team memberships of those
    /// revoked. The answer names the agents whose identities stopped working.
    pub(super) async fn work_revoke_rpc(
        &self,
        req: GrpcRequest<pb::WorkRevokeRequest>,
    ) -> GrpcResult<pb::WorkResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::WorkRevoke { id: id(&req.id)? };
        let (outcome, sent) = self
            .submit_following(&who, req.idempotency_key, command)
            .await?;
        let Outcome::WorkRevoked { removed, .. } = outcome else {
            return Ok(Response::new(work_response(outcome)?));
        };
        let revoked: Vec<String> = (sent.into_iter())
            .filter_map(|sent| match sent.outcome {
                Outcome::AgentRevoked {
                    agent,
                    revoked: true,
                } => Some(agent),
                _ => None,
            })
            .collect();
        for agent in &revoked {
            self.verifier.forget(agent);
        }
        let outcome = Outcome::WorkRevoked {
            removed,
            agents: revoked,
        };
        Ok(Response::new(work_response(outcome)?))
    }

    pub(super) async fn work_list_rpc(
        &self,
        req: GrpcRequest<pb::WorkListRequest>,
    ) -> GrpcResult<pb::WorkListResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let parent = match req.parent.is_empty() {
            true => None,
            false => Some(id(&req.parent)?),
        };
        let query = Query::WorkList {
            parent,
            limit: super::convert::limit(req.limit),
        };
        match self.read(&who, query).await? {
            QueryResult::WorkEntries(rows) => Ok(Response::new(pb::WorkListResponse {
                entries: rows.into_iter().map(entry_pb).collect(),
            })),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }

    pub(super) async fn work_limits_rpc(
        &self,
        req: GrpcRequest<pb::WorkLimitsRequest>,
    ) -> GrpcResult<pb::WorkLimitsResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let update = LimitsUpdate {
            fabric_max: req.fabric_max,
            cell_max: req.cell_max,
            depth_max: req.depth_max,
            children_max: req.children_max,
            classes: req.classes.into_iter().collect(),
            owner_max: req.owner_max,
        };
        if update == LimitsUpdate::default() {
            return match self.read(&who, Query::WorkLimits).await? {
                QueryResult::WorkLimits(limits) => Ok(Response::new(limits_pb(limits))),
                other => Err(Status::internal(format!("unexpected answer {other:?}"))),
            };
        }
        let command = Command::WorkLimitsSet { update };
        match self.submit(&who, req.idempotency_key, command).await? {
            Outcome::WorkLimitsSet { limits } => Ok(Response::new(limits_pb(limits))),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }

    pub(super) async fn work_audit_rpc(
        &self,
        req: GrpcRequest<pb::WorkAuditRequest>,
    ) -> GrpcResult<pb::WorkAuditResponse> {
        let who = self.caller_of(&req).await?;
        let req = req.into_inner();
        let query = Query::WorkAudit {
            after_seq: req.after_seq,
            limit: super::convert::limit(req.limit),
        };
        match self.read(&who, query).await? {
            QueryResult::WorkAudit(rows) => Ok(Response::new(pb::WorkAuditResponse {
                rows: rows.into_iter().map(audit_pb).collect(),
            })),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }
}
