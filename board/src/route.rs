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

use crate::vocab::lease::ResourceId;

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
    team_point(&crate::access::fabric_queue_team(team))
}
