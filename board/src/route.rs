//! Where a command runs in a fabric: every keyed command has a routing key, hashed to a
//! point on a 64-bit ring; the cell owning the range holding that point applies it.
//!
//! The point of a key is the first 8 bytes (big-endian) of its blake3 hash. A CAS key may
//! name its routing key in braces (`wf/{instance-7}/events`): only the text inside the first
//! `{…}` is hashed, so keys sharing a tag live on one cell and may share a `KvTxn`. Leases,
//! counters and ledgers route by their whole resource id (owner, name, key), so every slot
//! of a lease and every entry of a ledger partition is on one cell. A team routes by its
//! name: its record, its board, its claims, the mailboxes it keeps and its blackboard
//! (CAS keys `doc/{team}/…`, `frame/{team}/…`, `artifacts/{team}/…` and resources owned by
//! `team/{team}`) are on one cell (the cell-tier board belongs to the cell itself and has
//! no point).

use serde::{Deserialize, Serialize};

use crate::query::Query;
use crate::types::{Command, ResourceId};

/// The point of `routing_key` on the ring.
pub fn point(routing_key: &[u8]) -> u64 {
    let hash = blake3::hash(routing_key);
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_be_bytes(first)
}

/// The part of a CAS key that is hashed: the text of its first `{…}` tag when it has a
/// non-empty one, else the whole key.
pub fn kv_routing_key(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The routing key of a lease, counter or ledger partition.
pub fn resource_routing_key(id: &ResourceId) -> Vec<u8> {
    let mut out = Vec::with_capacity(id.owner.len() + id.name.len() + id.key.len() + 2);
    out.extend_from_slice(id.owner.as_bytes());
    out.push(0);
    out.extend_from_slice(id.name.as_bytes());
    out.push(0);
    out.extend_from_slice(id.key.as_bytes());
    out
}

/// The point of an election group.
pub fn election_point(group: &str) -> u64 {
    tagged_point(b"election", group)
}

/// The point of a schedule (its firings dedup on one cell).
pub fn schedule_point(name: &str) -> u64 {
    tagged_point(b"schedule", name)
}

/// The point of a team: its record, its board, its claims and the mailboxes it keeps.
pub fn team_point(team: &str) -> u64 {
    tagged_point(b"team", team)
}

/// The point of a work lineage: every entry under root `root` lives there.
pub fn work_point(root: &str) -> u64 {
    tagged_point(b"work", root)
}

/// The point of a repository: all of its path reservations live there.
pub fn repo_point(repo: &str) -> u64 {
    tagged_point(b"repo", repo)
}

fn tagged_point(family: &[u8], name: &str) -> u64 {
    let mut key = family.to_vec();
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    point(&key)
}

/// One range of the ring and the cell owning it at an epoch: a fabric's range map holds
/// them in ring order, and so does a client that routes by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeEntry {
    /// First point.
    pub start: u64,
    /// Last point (inclusive).
    pub last: u64,
    /// The range's epoch (every command for it carries this).
    pub epoch: u64,
    /// The owning cell.
    pub cell: u64,
}

/// The range holding `point`, in `ranges` that passed [`check_ranges`].
pub fn locate(ranges: &[RangeEntry], point: u64) -> &RangeEntry {
    let at = ranges.partition_point(|r| r.start <= point);
    &ranges[at.checked_sub(1).expect("ranges cover the ring from 0")]
}

/// `ranges` are sorted and cover the whole ring without gaps or overlaps.
pub fn check_ranges(ranges: &[RangeEntry]) -> Result<(), String> {
    let mut expect = Some(0u64);
    for r in ranges {
        if Some(r.start) != expect || r.last < r.start {
            return Err(format!(
                "range {:#x}..={:#x} leaves a gap or overlaps",
                r.start, r.last
            ));
        }
        expect = r.last.checked_add(1);
    }
    if expect.is_some() {
        return Err("ranges do not reach the end of the ring".into());
    }
    Ok(())
}

/// The point of a CAS key; a team's blackboard rows (`doc/{team}/…`) are at the team's.
pub fn kv_point(key: &[u8]) -> u64 {
    match crate::access::team_of_key(key) {
        Some(team) => team_point(team),
        None => point(kv_routing_key(key)),
    }
}

/// The point of a resource; a team's resources (owner `team/{team}`) are at the team's.
pub fn resource_point(id: &ResourceId) -> u64 {
    match crate::access::team_of_owner(&id.owner) {
        Some(team) => team_point(team),
        None => point(&resource_routing_key(id)),
    }
}

/// The point of the fabric queue of team `team` (where its tasks spill to).
pub fn fabric_queue_point(team: &str) -> u64 {
    team_point(&crate::taskboard::fabric_queue_team(team))
}

/// The point of a proposal: its team's.
pub fn proposal_point(proposal: &str) -> Result<u64, String> {
    crate::vote::parse_id(proposal).map(|(team, _)| team_point(&team))
}

/// The point a command must run at: `Ok(None)` for commands every cell runs on its own
/// (`Tick`, range management, `LeaseReleaseAll`, which a router sends to each cell);
/// `Err` for a `KvTxn` whose keys route to different points.
pub fn command_point(command: &Command) -> Result<Option<u64>, String> {
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
        | Command::MailAck { address, .. }
        | Command::MailGrant { address, .. }
        | Command::MailRelease { address, .. } => Some(address.point()),
        Command::TeamRole { team, .. } | Command::VoteOpen { team, .. } => Some(team_point(team)),
        Command::VoteCast { proposal, .. } | Command::VoteClose { proposal } => {
            Some(proposal_point(proposal)?)
        }
        // Cell-local: the router sends them to the cells they are for.
        Command::WorkLimitsSet { .. }
        | Command::WorkQuotaLend { .. }
        | Command::WorkQuotaAck { .. }
        | Command::WorkQuotaInstall { .. }
        | Command::TeamLeaveAll { .. } => None,
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
        } => {
            let keys = compares.iter().map(|(k, _)| k);
            let keys = keys.chain(puts.iter().map(|(k, _)| k)).chain(deletes);
            keys_point(keys.map(Vec::as_slice))?
        }
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
pub fn query_point(query: &Query) -> Option<u64> {
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
        Query::By { query, .. } => query_point(query),
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
        assert_eq!(
            query_point(&scan(b"e/{i-7}/s/")),
            Some(kv_point(b"e/{i-7}/x"))
        );
        assert_eq!(query_point(&scan(b"e/{i-7")), None, "an open tag gathers");
        assert_eq!(query_point(&scan(b"i/")), None);
    }

    #[test]
    fn team_commands_and_reads_route_by_team() {
        let claim = Command::BoardClaim {
            team: "t".into(),
            caller: "a".into(),
            worker: "w".into(),
        };
        assert_eq!(command_point(&claim), Ok(Some(team_point("t"))));
        assert_ne!(team_point("t"), election_point("t"));
        let mailbox = Query::Mailbox {
            team: "t".into(),
            agent: "sup".into(),
            after_seq: 0,
            limit: 0,
        };
        assert_eq!(query_point(&mailbox), Some(team_point("t")));
        assert_eq!(query_point(&Query::BoardCellReady { limit: 0 }), None);
    }

    #[test]
    fn transactions_must_share_a_point() {
        let txn = |keys: &[&[u8]]| Command::KvTxn {
            compares: Vec::new(),
            puts: keys.iter().map(|k| (k.to_vec(), Vec::new())).collect(),
            deletes: Vec::new(),
        };
        assert!(
            command_point(&txn(&[b"x/{a}", b"y/{a}"]))
                .unwrap()
                .is_some()
        );
        assert!(command_point(&txn(&[b"x", b"y"])).is_err());
        assert_eq!(command_point(&txn(&[])).unwrap(), None);
    }
}
