//! A team's blackboard: the rows of its document, frames and artifacts (CAS keys
//! `doc/{team}/…`, `frame/{team}/…`, `artifacts/{team}/…`) and its locks and other
//! resources (owner `team/{team}`). They route with the team (`route`), so the team's
//! cell holds them beside the team record, and membership guards them in the same apply
//! (writes) or the same snapshot (reads) as the data. `team dissolve` collects them.
//!
//! Only a member (or a member of an ancestor team) reaches them; servers act on their own
//! behalf. The operator, who is nobody's member, does not.

use crate::access::{Caller, team_of_key, team_of_owner};
use crate::query::Query;
use crate::team;
use crate::txn::Txn;
use crate::types::{BoardRefusal, Command, Outcome, ResourceId};

/// The teams whose blackboard `command` touches.
fn teams_of(command: &Command) -> Vec<&str> {
    match command {
        Command::KvPut { key, .. } | Command::KvDelete { key, .. } => {
            team_of_key(key).into_iter().collect()
        }
        Command::KvTxn {
            compares,
            puts,
            deletes,
        } => crate::vocab::kv::plain_txn_keys(compares, puts, deletes)
            .filter_map(team_of_key)
            .collect(),
        Command::KvKeepalive { key, .. } => team_of_key(key).into_iter().collect(),
        // A key attached to a team's lock needs a member for the key and for the lock.
        Command::KvPutAttached { key, attach, .. } => {
            let lease = match attach {
                crate::vocab::kv::KvAttach::Lease { lease, .. } => team_of_owner(&lease.owner),
                crate::vocab::kv::KvAttach::Ttl { .. } => None,
            };
            team_of_key(key).into_iter().chain(lease).collect()
        }
        Command::KvTxnIf {
            compares,
            success,
            failure,
        } => crate::vocab::kv::keys(compares, success, failure)
            .filter_map(team_of_key)
            .collect(),
        Command::LeaseAcquire { lease: id, .. }
        | Command::LeaseRenew { lease: id, .. }
        | Command::LeaseRelease { lease: id, .. }
        | Command::CounterConsume { counter: id, .. }
        | Command::LedgerAppend { ledger: id, .. } => {
            team_of_owner(&id.owner).into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// Refuse `caller` unless it may act on every team `team` names.
fn member_of(txn: &impl Txn, caller: &Caller, team: &str) -> Result<(), BoardRefusal> {
    let agent = match caller {
        Caller::Server => return Ok(()),
        Caller::Agent(agent) => agent.as_str(),
        // Nobody's member (not even of a team with an agent called "operator").
        Caller::Operator | Caller::Anonymous => {
            let agent = caller.name().to_string();
            let team = team.to_string();
            return Err(BoardRefusal::NotMember { agent, team });
        }
    };
    match team::member(txn, team, agent) {
        Ok(_) => Ok(()),
        Err(Outcome::BoardRefused { reason }) => Err(reason),
        Err(other) => unreachable!("membership refuses with a board refusal, got {other:?}"),
    }
}

/// Whether `caller` may reach resource `id`: anyone for a resource no team owns, a member
/// for a team's (its locks, counters and ledgers).
pub(crate) fn may_reach(txn: &impl Txn, caller: &Caller, id: &ResourceId) -> bool {
    team_of_owner(&id.owner).is_none_or(|team| member_of(txn, caller, team).is_ok())
}

/// The team a listing of resources by `owner/name` display prefix aims at (`team/T/…`, or
/// `team/T` itself).
fn team_of_display(prefix: &str) -> Option<&str> {
    let rest = prefix.strip_prefix(crate::access::TEAM_OWNER_PREFIX)?;
    let team = rest.split('/').next()?;
    (!team.is_empty()).then_some(team)
}

/// A write of a team's blackboard needs a member of the team.
pub(crate) fn guard(txn: &impl Txn, caller: &Caller, command: &Command) -> Result<(), Outcome> {
    for team in teams_of(command) {
        member_of(txn, caller, team).map_err(|reason| Outcome::BoardRefused { reason })?;
    }
    Ok(())
}

/// A read of a team's blackboard needs a member of the team; so does a read of its board
/// (a tracker's board is open to every proven caller and reads as empty before its first
/// issue).
pub(crate) fn guard_read(
    txn: &impl Txn,
    caller: &Caller,
    query: &Query,
) -> Result<(), BoardRefusal> {
    let team = match query {
        Query::KvGet { key } => team_of_key(key),
        Query::KvRange { prefix, .. } => team_of_key(prefix),
        Query::KvWatch { key, .. } => team_of_key(key),
        Query::LeaseList { prefix, .. } | Query::CounterList { prefix, .. } => {
            team_of_display(prefix)
        }
        Query::LedgerList { owner, .. } => team_of_owner(owner),
        Query::BoardList { team, .. }
        | Query::BoardTask { team, .. }
        | Query::BoardStats { team }
        | Query::BoardDeadLetters { team, .. } => match crate::is_tracker_team(team) {
            true => None,
            false => Some(team.as_str()),
        },
        _ => None,
    };
    match team {
        Some(team) => member_of(txn, caller, team),
        None => Ok(()),
    }
}

/// Whether a scan not aimed at one team returns this row (no: blackboard rows are read
/// through their team).
pub(crate) fn listed(key: &[u8]) -> bool {
    team_of_key(key).is_none()
}
