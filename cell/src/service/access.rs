//! Who may act on a team's board: the proven caller, lineage checks, tracker boards
//! open to the engine, fabric queues admitting current members, and the team a task id
//! names.

use std::sync::Arc;

use tonic::{Request as GrpcRequest, Status};
use whip_board::access::Caller;
use whip_board::{Command, Outcome, Query, QueryResult};
use whip_proto::v1 as pb;

use super::{CellApi, Dispatch};
use crate::limits;

/// The caller of a tracker board call made without an agent identity (the engine).
pub const ENGINE_CALLER: &str = "engine";

/// Team and board requests name their team.
pub(super) trait Scoped {
    fn team(&self) -> &str;
}

macro_rules! scoped {
    ($($t:ty),*) => {$(
        impl Scoped for $t {
            fn team(&self) -> &str {
                &self.team
            }
        }
    )*};
}

scoped!(
    pb::TeamCreateRequest,
    pb::TeamJoinRequest,
    pb::TeamDissolveRequest,
    pb::BoardPostRequest,
    pb::BoardClaimRequest,
    pb::BoardTaskRequest,
    pb::BoardGetRequest,
    pb::BoardListRequest,
    pb::BoardStatsRequest
);

impl CellApi {
    pub(crate) fn new(dispatch: Arc<dyn Dispatch>) -> Self {
        CellApi {
            dispatch,
            verifier: crate::identity::Verifier::default(),
            streams: Arc::default(),
            watches: Arc::default(),
        }
    }

    /// The agent a call acts for, proven by its metadata (never taken from the body).
    pub(super) async fn caller<T>(&self, req: &GrpcRequest<T>) -> Result<String, Status> {
        match self.caller_of(req).await? {
            Caller::Agent(agent) => Ok(agent),
            // No agent: the verifier says what the call lacks.
            _ => self.verified(req).await,
        }
    }

    /// The agent the call's token proves, checked by the verifier (which knows the
    /// caller's remote address, to refuse one that failed too many token checks).
    async fn verified<T>(&self, req: &GrpcRequest<T>) -> Result<String, Status> {
        let peer = req.remote_addr().map(|a| a.ip());
        self.verifier
            .caller(self.dispatch.as_ref(), req.metadata(), peer)
            .await
    }

    /// The caller as the transport proved it: an agent by its token, else the operator (or
    /// a node, or the local user) by its certificate, else nobody.
    async fn proven<T>(&self, req: &GrpcRequest<T>) -> Result<Caller, Status> {
        if req.metadata().get(crate::identity::AGENT_HEADER).is_some() {
            return Ok(Caller::Agent(self.verified(req).await?));
        }
        match crate::tls::principal(req.extensions()).is_operator() {
            true => Ok(Caller::Operator),
            false => Ok(Caller::Anonymous),
        }
    }

    /// The caller of a call: the proven caller, or the agent it acts for
    /// ([`crate::identity::ACT_FOR_HEADER`]) when the board lets it.
    pub(super) async fn caller_of<T>(&self, req: &GrpcRequest<T>) -> Result<Caller, Status> {
        let proven = self.proven(req).await?;
        let Some(named) = req.metadata().get(crate::identity::ACT_FOR_HEADER) else {
            return Ok(proven);
        };
        let agent = named.to_str().map_err(|_| {
            Status::invalid_argument(format!(
                "{} must be an agent name",
                crate::identity::ACT_FOR_HEADER
            ))
        })?;
        whip_board::access::acting_for(&proven, agent).map_err(|refusal| match refusal {
            whip_board::access::AccessRefusal::Anonymous => {
                Status::unauthenticated(refusal.to_string())
            }
            _ => Status::permission_denied(refusal.to_string()),
        })
    }

    /// The proven caller of a call that acts for an agent, and the agent.
    pub(super) async fn agent_caller<T>(
        &self,
        req: &GrpcRequest<T>,
    ) -> Result<(Caller, String), Status> {
        let agent = self.caller(req).await?;
        Ok((Caller::Agent(agent.clone()), agent))
    }

    /// The caller of a team or board call: the proven agent; the operator on a tracker's
    /// reserved team acts as [`ENGINE_CALLER`] (trackers are the engine's boards, also when
    /// its worker acts for an instance's owner; the claimant is named in the command).
    /// Anybody else is refused.
    pub(super) async fn board_caller<T: Scoped>(
        &self,
        req: &GrpcRequest<T>,
    ) -> Result<(Caller, String), Status> {
        let tracker = whip_board::is_tracker_team(req.get_ref().team());
        if tracker && self.proven(req).await? == Caller::Operator {
            return Ok((Caller::Operator, ENGINE_CALLER.to_string()));
        }
        match self.caller_of(req).await? {
            Caller::Agent(agent) => Ok((Caller::Agent(agent.clone()), agent)),
            Caller::Operator | Caller::Server | Caller::Anonymous => {
                Err(Status::unauthenticated(format!(
                    "anonymous_refused: this call acts for an agent: send {} and {} (the CLI \
                     does: --agent, or WHIP_AGENT)",
                    crate::identity::AGENT_HEADER,
                    crate::identity::TOKEN_HEADER
                )))
            }
        }
    }

    /// Apply the command `build` makes from the proven caller and the request (with the
    /// request's idempotency key).
    pub(super) async fn act<T: Scoped>(
        &self,
        req: GrpcRequest<T>,
        build: impl FnOnce(String, T) -> (String, Command),
    ) -> Result<Outcome, Status> {
        let (who, caller) = self.board_caller(&req).await?;
        let (key, command) = build(caller, req.into_inner());
        self.submit(&who, key, command).await
    }

    /// The members of `parent` and of its ancestors (lineage), read from their teams.
    pub(super) async fn ancestors(&self, parent: Option<&str>) -> Result<Vec<String>, Status> {
        let mut members = Vec::new();
        let mut next = parent.map(str::to_string);
        for _ in 0..limits::TEAM_DEPTH_MAX {
            let Some(team) = next.take() else { break };
            match self.read_server(Query::Team { team: team.clone() }).await? {
                QueryResult::Team(Some(view)) => {
                    members.extend(view.members);
                    next = view.parent;
                }
                QueryResult::Team(None) => {
                    return Err(Status::not_found(format!(
                        "parent team {team:?} is unknown"
                    )));
                }
                other => return Err(Status::internal(format!("unexpected answer {other:?}"))),
            }
        }
        members.sort();
        members.dedup();
        Ok(members)
    }

    /// Refuse `who` unless it may read `team`'s board (the board's rule, [`Query::By`]).
    pub(super) async fn member_of(&self, who: &Caller, team: &str) -> Result<(), Status> {
        let probe = Query::BoardStats {
            team: team.to_string(),
        };
        self.read(who, probe).await?;
        Ok(())
    }
}

/// A read the board refused, as a gRPC error with the refusal's code in its message.
pub(crate) fn read_refused(refusal: whip_board::query::ReadRefusal) -> Status {
    use whip_board::access::AccessRefusal;
    use whip_board::query::ReadRefusal;
    let message = refusal.to_string();
    match refusal {
        ReadRefusal::Access(AccessRefusal::Anonymous) => Status::unauthenticated(message),
        ReadRefusal::Access(_) => Status::permission_denied(message),
        // Typed: the client matches the code (`unknown_team` travels as not found,
        // `not_member` as permission denied), never the message.
        ReadRefusal::Board { refusal } => crate::CellError::Refused {
            code: refusal.refusal_code(),
            message,
        }
        .into(),
        ReadRefusal::Mail { .. } => Status::permission_denied(message),
    }
}

/// The board a task lives on: its team's, or for a task at the fabric tier (its id starts
/// with the fabric queue's reserved name) that queue's.
pub(super) fn task_team(team: String, task_id: &str) -> String {
    if task_id.starts_with(whip_board::FABRIC_QUEUE_PREFIX)
        && let Some((queue, _)) = task_id.rsplit_once('-')
    {
        return queue.to_string();
    }
    team
}

/// The ledger of a team's signals (the topic is the partition).
pub fn signal_ledger(team: &str) -> (String, String) {
    (
        format!("team/{team}"),
        whip_board::access::SIGNAL_LEDGER.to_string(),
    )
}

impl CellApi {
    /// Refuse `agent` unless it is registered.
    pub(super) async fn registered(&self, agent: &str) -> Result<(), Status> {
        let key = crate::identity::agent_key(agent);
        match self.read_server(Query::KvGet { key }).await? {
            QueryResult::Kv(Some(_)) => Ok(()),
            _ => Err(Status::failed_precondition(format!(
                "agent {agent:?} is not registered: register it first (whip agent register)"
            ))),
        }
    }

    /// Count one enrollment by `parent`; refused past the hourly limit.
    pub(super) async fn charge_enrollment(&self, parent: &str) -> Result<(), Status> {
        let charge = Command::CounterConsume {
            counter: whip_board::ResourceId {
                owner: format!("{}enroll", whip_board::access::SERVER_OWNER_PREFIX),
                name: parent.to_string(),
                key: String::new(),
            },
            amount: 1,
            cap: limits::ENROLLMENTS_PER_HOUR_MAX,
            reset: whip_board::Reset::Hourly,
            timezone: "UTC".into(),
        };
        match self.submit_server(String::new(), charge).await? {
            Outcome::CounterOk { .. } => Ok(()),
            Outcome::CounterOver { consumed, .. } => Err(Status::resource_exhausted(format!(
                "agent {parent:?} enrolled {consumed} agents this hour, the limit is {}",
                limits::ENROLLMENTS_PER_HOUR_MAX
            ))),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Register `agent` with `token` for `caller` (the operator, or the agent enrolling
    /// it): board decides in one apply whether the name is free, held by the same token or
    /// taken (`whip_board::register`); true when this call wrote the record. No idempotency
    /// key: a retry of a lost answer finds the record and answers `false`.
    pub(super) async fn register(
        &self,
        caller: &Caller,
        agent: &str,
        token: &str,
    ) -> Result<bool, Status> {
        let command = Command::AgentRegister {
            agent: agent.to_string(),
            proof: whip_board::register::token_proof(token),
            salt: crate::identity::fresh_salt(),
        };
        match self.submit(caller, String::new(), command).await? {
            Outcome::AgentRegistered { created, .. } => Ok(created),
            Outcome::AgentRefused { refusal } => Err(crate::CellError::Refused {
                code: refusal.refusal_code(),
                message: refusal.to_string(),
            }
            .into()),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }
}
