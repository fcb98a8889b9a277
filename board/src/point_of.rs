//! The point a command or a read runs at (`crate::route` gives the point of each name):
//! the one place that knows which field of every command and query is its routing key.
//! A router looks a command's point up in its range map; a cell checks it against the
//! ranges it owns.
//!
//! Must never: be imported by a plane; it reads every plane's commands, so it sits above
//! them.

use crate::query::Query;
use crate::route::{
    election_point, fabric_queue_point, kv_point, kv_routing_key, repo_point, resource_point,
    schedule_point, team_point, work_point,
};
use crate::types::{Command, ResourceId};

/// The point of a proposal: its team's.
pub fn proposal_point(proposal: &str) -> Result<u64, String> {
    crate::vote::parse_id(proposal).map(|(team, _)| team_point(&team))
}

/// The point a command must run at: `Ok(None)` for commands every cell runs on its own
/// (`Tick`, range management, `LeaseReleaseAll`, which a router sends to each cell);
/// `Err` for a `KvTxn` whose keys route to different points.
pub fn command(command: &Command) -> Result<Option<u64>, String> {
    if command.is_kv() {
        return kv_command_point(command);
    }
    Ok(match command {
        Command::LeaseAcquire { lease, .. }
        | Command::LeaseRenew { lease, .. }
        | Command::LeaseRelease { lease, .. } => Some(resource_point(lease)),
        Command::CounterConsume { counter, .. } => Some(resource_point(counter)),
        Command::LedgerAppend { ledger, .. } => Some(resource_point(ledger)),
        Command::Campaign { group, .. }
        | Command::Proclaim { group, .. }
        | Command::Resign { group, .. }
        | Command::ElectionRenew { group, .. } => Some(election_point(group)),
        Command::ScheduleFire { name, .. } => Some(schedule_point(name)),
        Command::TeamCreate { team, .. }
        | Command::TeamJoin { team, .. }
        | Command::TeamDissolve { team, .. }
        | Command::BoardPost { team, .. }
        | Command::BoardPostMany { team, .. }
        | Command::BoardClaim { team, .. }
        | Command::BoardClaimTask { team, .. }
        | Command::BoardRelease { team, .. }
        | Command::BoardComplete { team, .. }
        | Command::BoardCompleteAndClaim { team, .. }
        | Command::BoardClaimMany { team, .. }
        | Command::BoardFail { team, .. }
        | Command::BoardExtend { team, .. }
        | Command::BoardRedrive { team, .. } => Some(team_point(team)),
        Command::WorkRegister { root, .. } => Some(work_point(root)),
        Command::WorkRenew { id, .. }
        | Command::WorkSignal { id, .. }
        | Command::WorkScope { id, .. }
        | Command::WorkRevoke { id } => Some(work_point(crate::work::root_of(id))),
        Command::AgentRevoke { agent, .. } | Command::AgentRegister { agent, .. } => {
            Some(kv_point(&crate::access::agent_key(agent)))
        }
        Command::MailSend { to: address, .. }
        | Command::MailSendMany { to: address, .. }
        | Command::MailAck { address, .. }
        | Command::MailTake { address, .. }
        | Command::MailGrant { address, .. }
        | Command::MailRelease { address, .. } => Some(address.point()),
        Command::TeamRole { team, .. } | Command::VoteOpen { team, .. } => Some(team_point(team)),
        Command::VoteCast { proposal, .. } | Command::VoteClose { proposal } => {
            Some(proposal_point(proposal)?)
        }
        // Cell-local: the router sends them to the cells they are for.
        Command::WorkLimitsSet { .. } | Command::TeamLeaveAll { .. } => None,
        quota if quota.is_quota_step() => None,
        Command::PathsReserve { repo, .. } | Command::PathsRelease { repo, .. } => {
            Some(repo_point(repo))
        }
        Command::FabricPurge { queue } => Some(fabric_queue_point(queue)),
        Command::EngineTxn {
            compares,
            puts,
            deletes,
        } => {
            let keys = compares
                .iter()
                .map(|(k, _)| k)
                .chain(puts.iter().map(|(k, _)| k))
                .chain(deletes.iter());
            keys_point(keys.map(Vec::as_slice))?
        }
        _ => None,
    })
}

/// The point of a client CAS key command (`Command::is_kv`).
fn kv_command_point(command: &Command) -> Result<Option<u64>, String> {
    Ok(match command {
        Command::KvPut { key, .. }
        | Command::KvDelete { key, .. }
        | Command::KvKeepalive { key, .. } => Some(kv_point(key)),
        Command::KvPutAttached { key, attach, .. } => Some(attached_point(key, attach)?),
        Command::KvTxnIf {
            compares,
            success,
            failure,
        } => keys_point(crate::kv_txn::keys(compares, success, failure))?,
        Command::KvTxn {
            compares,
            puts,
            deletes,
        } => keys_point(crate::vocab::kv::plain_txn_keys(compares, puts, deletes))?,
        other => unreachable!("{other:?} is not a CAS key command"),
    })
}

/// The point of a key attached to `attach`: a lease must live on the key's cell (a team's
/// key with the team's lock, or a standalone cell), since one apply frees the slot and
/// deletes the key.
fn attached_point(key: &[u8], attach: &crate::ephemeral::KvAttach) -> Result<u64, String> {
    let at = kv_point(key);
    match attach {
        crate::ephemeral::KvAttach::Lease { lease, .. } if resource_point(lease) != at => {
            Err(format!(
                "key {:?} and lease {}::{}/{} route to different cells; attach a team's key \
                 (doc/{{team}}/…) to a lock of the same team (owner team/{{team}})",
                String::from_utf8_lossy(key),
                lease.owner,
                lease.name,
                lease.key
            ))
        }
        _ => Ok(at),
    }
}

/// The one point of every key of a transaction (a team's blackboard keys at the team's),
/// or `Err` when they route to different cells.
fn keys_point<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Result<Option<u64>, String> {
    let mut found: Option<(u64, &[u8])> = None;
    for key in keys {
        let at = kv_point(key);
        match found {
            None => found = Some((at, key)),
            Some((point, _)) if point == at => {}
            Some((_, first)) => {
                return Err(format!(
                    "transaction keys route to different cells ({:?} and {:?}); give them \
                     one {{tag}}",
                    String::from_utf8_lossy(first),
                    String::from_utf8_lossy(key)
                ));
            }
        }
    }
    Ok(found.map(|(at, _)| at))
}

/// The point a read must run at, or `None` for reads every cell answers for its own
/// ranges (lists and range scans, which a router gathers from each cell) or for itself
/// (`BoardCellReady`).
pub fn query(query: &Query) -> Option<u64> {
    match query {
        Query::KvGet { key }
        | Query::EngineGet { key }
        | Query::KvWatch {
            key, prefix: false, ..
        } => Some(kv_point(key)),
        Query::ElectionLeader { group } => Some(election_point(group)),
        Query::Team { team }
        | Query::BoardList { team, .. }
        | Query::BoardTask { team, .. }
        | Query::BoardStats { team }
        | Query::BoardDeadLetters { team, .. }
        | Query::Mailbox { team, .. } => Some(team_point(team)),
        Query::By { query: inner, .. } => self::query(inner),
        Query::MailInbox { address, .. } => Some(address.point()),
        Query::VoteProposal { proposal } | Query::VoteBallots { proposal, .. } => {
            proposal_point(proposal).ok()
        }
        Query::VoteList { team, .. } => Some(team_point(team)),
        Query::PathsList {
            repo: Some(repo), ..
        } => Some(repo_point(repo)),
        Query::WorkEntry { id }
        | Query::WorkList {
            parent: Some(id), ..
        } => Some(work_point(crate::work::root_of(id))),
        // A scan whose prefix holds a whole `{tag}` covers keys of that tag only.
        Query::KvRange { prefix, .. } | Query::EngineRange { prefix, .. }
            if kv_routing_key(prefix).len() < prefix.len() =>
        {
            Some(kv_point(prefix))
        }
        Query::LedgerList {
            owner,
            name,
            partition: Some(partition),
            ..
        } => Some(resource_point(&ResourceId {
            owner: owner.clone(),
            name: name.clone(),
            key: partition.clone(),
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_pick_the_hashed_part() {
        assert_eq!(kv_routing_key(b"wf/{i-7}/events"), b"i-7");
        assert_eq!(kv_routing_key(b"wf/{}/x"), b"wf/{}/x");
        assert_eq!(kv_routing_key(b"plain"), b"plain");
        assert_eq!(kv_routing_key(b"open{only"), b"open{only");
        assert_eq!(kv_point(b"a/{t}/1"), kv_point(b"b/{t}/2"));
        let scan = |prefix: &[u8]| Query::KvRange {
            prefix: prefix.to_vec(),
            after_key: Vec::new(),
            limit: 0,
        };
        assert_eq!(query(&scan(b"e/{i-7}/s/")), Some(kv_point(b"e/{i-7}/x")));
        assert_eq!(query(&scan(b"e/{i-7")), None, "an open tag gathers");
        assert_eq!(query(&scan(b"i/")), None);
    }

    #[test]
    fn team_commands_and_reads_route_by_team() {
        let claim = Command::BoardClaim {
            team: "t".into(),
            caller: "a".into(),
            worker: "w".into(),
        };
        assert_eq!(command(&claim), Ok(Some(team_point("t"))));
        assert_ne!(team_point("t"), election_point("t"));
        let mailbox = Query::Mailbox {
            team: "t".into(),
            agent: "sup".into(),
            after_seq: 0,
            limit: 0,
        };
        assert_eq!(query(&mailbox), Some(team_point("t")));
        assert_eq!(query(&Query::BoardCellReady { limit: 0 }), None);
    }

    #[test]
    fn transactions_must_share_a_point() {
        let txn = |keys: &[&[u8]]| Command::KvTxn {
            compares: Vec::new(),
            puts: keys.iter().map(|k| (k.to_vec(), Vec::new())).collect(),
            deletes: Vec::new(),
        };
        assert!(command(&txn(&[b"x/{a}", b"y/{a}"])).unwrap().is_some());
        assert!(command(&txn(&[b"x", b"y"])).is_err());
        assert_eq!(command(&txn(&[])).unwrap(), None);
    }
}
