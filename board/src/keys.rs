//! Layout of the one ordered keyspace.
//!
//! Each family starts with one byte. String components are escaped (`0x00` becomes
//! `0x00 0xFF`) and terminated with `0x00 0x01`, so components never run into each other
//! (`a/b` + `c` differs from `a` + `b/c`) and byte order follows string order. Numbers are
//! big-endian `u64`, so byte order is numeric order.
//!
//! Lease and counter keys start with the display name `owner/name` so that a list by
//! display prefix is one range scan; the owner and name follow as separate components.

use crate::types::ResourceId;

/// CAS keys: family, raw key bytes.
pub(crate) const KV: u8 = b'k';
/// Lease records: family, display, owner, name, key.
pub(crate) const LEASE: u8 = b'l';
/// Holder index: family, holder, owner, name, key (value: the lease id).
pub(crate) const HOLDER: u8 = b'h';
/// Counter records: family, display, owner, name, key.
pub(crate) const COUNTER: u8 = b'c';
/// Ledger partition heads: family, owner, name, partition.
pub(crate) const LEDGER_HEAD: u8 = b'g';
/// Ledger entries: family, owner, name, partition, sequence.
pub(crate) const LEDGER_ENTRY: u8 = b'e';
/// Idempotency records: family, raw idempotency key.
pub(crate) const IDEMPOTENCY: u8 = b'i';
/// Deadline index: family, deadline, kind, identity.
pub(crate) const DEADLINE: u8 = b'd';
/// Handoff outbox heads: family, receiving cell (cell-local).
pub(crate) const OUTBOX: u8 = b'p';
/// Unacknowledged handoff envelopes: family, receiving cell, sequence (cell-local).
pub(crate) const OUTBOX_ITEM: u8 = b'z';
/// Handoff chain heads: family, sending cell (cell-local).
pub(crate) const INBOX: u8 = b'j';
/// Alarms this cell raised: family, sequence (cell-local).
pub(crate) const ALARM: u8 = b'A';
/// The last alarm sequence (cell-local).
pub(crate) const ALARM_HEAD: u8 = b'B';
/// Owned key ranges of this cell (fabric mode): family, start (big-endian).
pub(crate) const RANGE: u8 = b'r';
/// The fence offset of this cell (raised when a range arrives from another cell).
pub(crate) const FENCE_OFFSET: u8 = b'f';
/// Present once the cell was ever assigned a range: it is in a fabric for good, also after
/// it gave every range away.
pub(crate) const FABRIC_MODE: u8 = b'm';
/// Election leaders: family, group (value: the leader record).
pub(crate) const ELECTION: u8 = b'v';
/// Schedule fire records: family, schedule name (value: the last fire).
pub(crate) const SCHEDULE: u8 = b's';
/// Team records: family, team.
pub(crate) const TEAM: u8 = b't';
/// Tasks of team boards (local tier): family, team, sequence.
pub(crate) const TASK: u8 = b'b';
/// Ready index of team boards: family, team, sequence (value empty).
pub(crate) const READY: u8 = b'q';
/// Claim records of local tasks: family, team, sequence, delivery.
pub(crate) const CLAIM: u8 = b'a';
/// Mailbox heads: family, team, agent.
pub(crate) const MAIL_HEAD: u8 = b'n';
/// Mailbox messages: family, team, agent, sequence.
pub(crate) const MAIL: u8 = b'o';
/// Agent mail heads: family, address (`agent:…`, `team:…`, `entry:…`).
pub(crate) const MBOX_HEAD: u8 = b'M';
/// Agent mail messages: family, address, sequence.
pub(crate) const MBOX_MSG: u8 = b'N';
/// Agent mail's take windows (`crate::mail_take`): family, address.
pub(crate) const MBOX_TAKE: u8 = b'6';
/// Tasks of this cell's cell-tier board (cell-local): family, origin team, sequence.
pub(crate) const CELL_TASK: u8 = b'x';
/// Ready index of the cell tier (cell-local): family, spill sequence, origin team,
/// sequence (value empty).
pub(crate) const CELL_READY: u8 = b'y';
/// Claim records of cell-tier tasks (cell-local): family, origin team, sequence, delivery.
pub(crate) const CELL_CLAIM: u8 = b'u';
/// The cell-tier board's head (cell-local): family only.
pub(crate) const CELL_BOARD: u8 = b'w';
/// Work registry entries: family, lineage root, id (routes by the root).
pub(crate) const WORK_ENTRY: u8 = b'W';
/// The registry's counts, quota and audit sequence (cell-local): family only.
pub(crate) const WORK_CELL: u8 = b'C';
/// The admission limits (cell-local: every cell keeps a copy): family only.
pub(crate) const WORK_LIMITS: u8 = b'L';
/// The audit ledger (cell-local): family, sequence.
pub(crate) const WORK_AUDIT: u8 = b'U';
/// Quotas lent by the meta cell (cell-local): family, borrowing cell.
pub(crate) const WORK_GRANT: u8 = b'G';
/// What raised an open alarm (`cause`, alarm sequence): the alarm clears when its cause
/// goes away (a failed handoff later made, a reset channel carrying envelopes again).
pub(crate) const ALARM_CAUSE: u8 = b'K';
/// A team's voting state (its coordinators, open proposals): family, team.
pub(crate) const VOTE_TEAM: u8 = b'R';
/// Proposals: family, team, fence of the opening.
pub(crate) const PROPOSAL: u8 = b'P';
/// Ballots: family, team, fence of the proposal, sequence.
pub(crate) const BALLOT: u8 = b'Q';

/// The engine's instance state (`crate::instance`): family, raw engine key bytes. No client
/// KV command can name it: `KvPut`, `KvTxn`, `KvGet` and `KvRange` reach family `k` only.
pub(crate) const ENGINE: u8 = b'E';
/// Who owns an engine instance (`crate::instance`): family, instance id (routes by the id).
pub(crate) const INSTANCE_OWNER: u8 = b'O';
/// Present on the fabric's meta cell: it serves servers and the operator's fabric reads,
/// never a client's keyed command (cell-local).
pub(crate) const META_MODE: u8 = b'Z';

/// Live work entries per owning agent on this cell (cell-local): family, owner.
pub(crate) const WORK_OWNER: u8 = b'H';

/// The highest range-admin lease fence a range step on this cell carried (cell-local).
pub(crate) const ADMIN_FENCE: u8 = b'F';

/// The watch history's events (`crate::watch`): family, revision, client key bytes.
pub(crate) const WATCH_EVENT: u8 = b'V';
/// The watch history's bounds and head (`crate::watch`): one row.
pub(crate) const WATCH_META: u8 = b'Y';

/// What a client key is attached to (its own deadline, or a lease holder's slot):
/// family, raw key bytes (routes with the key; `crate::ephemeral`). No client key names it.
pub(crate) const KV_ATTACH: u8 = b'T';
/// Client keys attached to a lease holder's slot: family, lease (owner, name, key),
/// holder, raw key bytes (value empty; routes with the lease, which a fabric keeps on the
/// key's cell).
pub(crate) const KV_LEASED: u8 = b'X';

/// Path reservations (`crate::reservation`): family, repository, pattern, holder (routes
/// by the repository). No client key names it.
pub(crate) const PATH_RESERVATION: u8 = b'S';
/// Path reservations by holder: family, holder, repository, pattern (value empty; routes by
/// the repository).
pub(crate) const PATH_HOLDER: u8 = b'D';
/// A repository's last reservation fence: family, repository (kept for good, so fences
/// only grow; routes by the repository).
pub(crate) const PATH_REPO: u8 = b'J';

/// The range a move copies before freezing it, on its source (`crate::range_track`): one
/// row (cell-local).
pub(crate) const RANGE_TRACK: u8 = b'0';
/// Keys of that range changed since its copy began: family, raw stored key (value empty;
/// cell-local).
pub(crate) const RANGE_CHANGED: u8 = b'1';

/// How far a move's target holds a clean copy of the range recorded on this source
/// (`crate::range_track`): one row (cell-local), forgotten with the record.
pub(crate) const RANGE_COPIED: u8 = b'5';

/// The follow-up outbox (`crate::next`): family, sequence number (cell-local).
pub(crate) const FOLLOW_UP: u8 = b'2';
/// The follow-up outbox's next sequence number: one row (cell-local).
pub(crate) const FOLLOW_HEAD: u8 = b'3';

/// The time floor of this cell (raised when a range arrives from another cell whose clock
/// was ahead, `crate::range::shift`): one row (cell-local).
pub(crate) const TIME_FLOOR: u8 = b'4';

/// Every family above: a row of any other first byte is no row of this state machine.
#[rustfmt::skip]
pub(crate) const FAMILIES: [u8; 58] = [
    KV, LEASE, HOLDER, COUNTER, LEDGER_HEAD, LEDGER_ENTRY, IDEMPOTENCY, DEADLINE, OUTBOX,
    OUTBOX_ITEM, INBOX, ALARM, ALARM_HEAD, RANGE, FENCE_OFFSET, FABRIC_MODE, ELECTION, SCHEDULE,
    TEAM, TASK, READY, CLAIM, MAIL_HEAD, MAIL, MBOX_HEAD, MBOX_MSG, CELL_TASK, CELL_READY,
    CELL_CLAIM, CELL_BOARD, WORK_ENTRY, WORK_CELL, WORK_LIMITS, WORK_AUDIT, WORK_GRANT,
    ALARM_CAUSE, VOTE_TEAM, PROPOSAL, BALLOT, ENGINE, INSTANCE_OWNER, META_MODE,
    WORK_OWNER, WATCH_EVENT, WATCH_META, ADMIN_FENCE, KV_ATTACH, KV_LEASED, PATH_RESERVATION,
    PATH_HOLDER, PATH_REPO, RANGE_TRACK, RANGE_CHANGED, FOLLOW_UP, FOLLOW_HEAD, TIME_FLOOR,
    RANGE_COPIED, MBOX_TAKE,
];

/// Append `s` escaped but without its terminator (a prefix of every longer string's form).
pub(crate) fn push_open(out: &mut Vec<u8>, s: &[u8]) {
    for &byte in s {
        out.push(byte);
        if byte == 0 {
            out.push(0xFF);
        }
    }
}

/// Append `s` escaped and terminated.
pub(crate) fn push_str(out: &mut Vec<u8>, s: &[u8]) {
    push_open(out, s);
    out.extend_from_slice(&[0, 1]);
}

/// Append a big-endian number.
pub(crate) fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_be_bytes());
}

/// Split escaped, terminated components; `None` when the bytes are not well formed.
pub(crate) fn split(mut bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut parts = Vec::new();
    while !bytes.is_empty() {
        let (mut first, rest) = split_first(bytes, 1)?;
        parts.append(&mut first);
        bytes = rest;
    }
    Some(parts)
}

/// A resource id from three components (owner, name, key).
pub(crate) fn resource_of(parts: &[Vec<u8>]) -> Option<ResourceId> {
    let text = |bytes: &Vec<u8>| String::from_utf8(bytes.clone()).ok();
    Some(ResourceId {
        owner: text(parts.first()?)?,
        name: text(parts.get(1)?)?,
        key: text(parts.get(2)?)?,
    })
}

/// The first `n` escaped components of `bytes` and the bytes after them.
pub(crate) fn split_first(mut bytes: &[u8], n: usize) -> Option<(Vec<Vec<u8>>, &[u8])> {
    let mut parts = Vec::with_capacity(n);
    while parts.len() < n {
        let mut part = Vec::new();
        loop {
            match bytes {
                [0, 0xFF, rest @ ..] => {
                    part.push(0);
                    bytes = rest;
                }
                [0, 1, rest @ ..] => {
                    bytes = rest;
                    break;
                }
                [byte, rest @ ..] if *byte != 0 => {
                    part.push(*byte);
                    bytes = rest;
                }
                _ => return None,
            }
        }
        parts.push(part);
    }
    Some((parts, bytes))
}

/// The smallest key greater than every key starting with `prefix`.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    // Every prefix starts with a family byte below 0xFF, so this is unreachable.
    panic!("prefix {prefix:?} has no end")
}

/// `owner/name`: how users see a resource without its key.
pub(crate) fn display(id: &ResourceId) -> String {
    format!("{}/{}", id.owner, id.name)
}

/// Owner, name and key, each escaped: the identity of a resource inside a family.
pub(crate) fn push_resource(out: &mut Vec<u8>, id: &ResourceId) {
    push_str(out, id.owner.as_bytes());
    push_str(out, id.name.as_bytes());
    push_str(out, id.key.as_bytes());
}

/// Key of a listed resource (lease or counter): family, display, owner, name, key.
pub(crate) fn listed(family: u8, id: &ResourceId) -> Vec<u8> {
    let mut out = vec![family];
    push_str(&mut out, display(id).as_bytes());
    push_resource(&mut out, id);
    out
}

/// Range start of listed resources whose display starts with `prefix`.
pub(crate) fn listed_prefix(family: u8, prefix: &str) -> Vec<u8> {
    let mut out = vec![family];
    push_open(&mut out, prefix.as_bytes());
    out
}

/// Decode a listed key back into its resource id.
pub(crate) fn parse_listed(key: &[u8]) -> ResourceId {
    let parts = split(&key[1..]).expect("listed key is well formed");
    assert_eq!(parts.len(), 4, "listed key has four components");
    let text = |bytes: &Vec<u8>| String::from_utf8(bytes.clone()).expect("key is utf-8");
    ResourceId {
        owner: text(&parts[1]),
        name: text(&parts[2]),
        key: text(&parts[3]),
    }
}

/// Key of one CAS key.
pub(crate) fn kv(key: &[u8]) -> Vec<u8> {
    in_family(KV, key)
}

/// `family` followed by the raw bytes of `key` (CAS keys and engine rows).
pub(crate) fn in_family(family: u8, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.push(family);
    out.extend_from_slice(key);
    out
}

/// Key of the attachment row of client key `key`.
pub(crate) fn kv_attach(key: &[u8]) -> Vec<u8> {
    in_family(KV_ATTACH, key)
}

/// Prefix of the keys attached to `holder`'s slot of `lease`.
pub(crate) fn kv_leased_prefix(lease: &ResourceId, holder: &str) -> Vec<u8> {
    let mut out = vec![KV_LEASED];
    push_resource(&mut out, lease);
    push_str(&mut out, holder.as_bytes());
    out
}

/// Key of the index entry of client key `key` attached to `holder`'s slot of `lease`.
pub(crate) fn kv_leased(lease: &ResourceId, holder: &str, key: &[u8]) -> Vec<u8> {
    let mut out = kv_leased_prefix(lease, holder);
    out.extend_from_slice(key);
    out
}

/// Prefix of every reservation of `repo`.
pub(crate) fn path_repo_prefix(repo: &str) -> Vec<u8> {
    named(PATH_RESERVATION, repo)
}

/// Key of `holder`'s reservation of `pattern` in `repo`.
pub(crate) fn path_reservation(repo: &str, pattern: &str, holder: &str) -> Vec<u8> {
    let mut out = path_repo_prefix(repo);
    push_str(&mut out, pattern.as_bytes());
    push_str(&mut out, holder.as_bytes());
    out
}

/// Prefix of every holder index entry of `holder`.
pub(crate) fn path_holder_prefix(holder: &str) -> Vec<u8> {
    named(PATH_HOLDER, holder)
}

/// Key of the holder index entry of `holder`'s reservation of `pattern` in `repo`.
pub(crate) fn path_holder(holder: &str, repo: &str, pattern: &str) -> Vec<u8> {
    let mut out = path_holder_prefix(holder);
    push_str(&mut out, repo.as_bytes());
    push_str(&mut out, pattern.as_bytes());
    out
}

/// Key of `repo`'s fence head.
pub(crate) fn path_repo(repo: &str) -> Vec<u8> {
    named(PATH_REPO, repo)
}

/// Key of the owner record of engine instance `id`.
pub(crate) fn instance_owner(id: &str) -> Vec<u8> {
    let mut out = vec![INSTANCE_OWNER];
    push_str(&mut out, id.as_bytes());
    out
}

/// Key of the holder index entry of `holder` on `lease`.
pub(crate) fn holder(holder: &str, lease: &ResourceId) -> Vec<u8> {
    let mut out = holder_prefix(holder);
    push_resource(&mut out, lease);
    out
}

/// Prefix of every holder index entry of `holder`.
pub(crate) fn holder_prefix(holder: &str) -> Vec<u8> {
    let mut out = vec![HOLDER];
    push_str(&mut out, holder.as_bytes());
    out
}

/// Prefix of every ledger head of `owner/name`.
pub(crate) fn ledger_heads(owner: &str, name: &str) -> Vec<u8> {
    let mut out = vec![LEDGER_HEAD];
    push_str(&mut out, owner.as_bytes());
    push_str(&mut out, name.as_bytes());
    out
}

/// Key of one ledger partition's head.
pub(crate) fn ledger_head(ledger: &ResourceId) -> Vec<u8> {
    let mut out = vec![LEDGER_HEAD];
    push_resource(&mut out, ledger);
    out
}

/// Prefix of every entry of one ledger partition.
pub(crate) fn ledger_entries(ledger: &ResourceId) -> Vec<u8> {
    let mut out = vec![LEDGER_ENTRY];
    push_resource(&mut out, ledger);
    out
}

/// Key of one ledger entry.
pub(crate) fn ledger_entry(ledger: &ResourceId, seq: u64) -> Vec<u8> {
    let mut out = ledger_entries(ledger);
    push_u64(&mut out, seq);
    out
}

/// Key of one idempotency record.
pub(crate) fn idempotency(key: &str) -> Vec<u8> {
    let mut out = vec![IDEMPOTENCY];
    out.extend_from_slice(key.as_bytes());
    out
}

/// Key of a record named by one string (an election group, a schedule name).
pub(crate) fn named(family: u8, name: &str) -> Vec<u8> {
    let mut out = vec![family];
    push_str(&mut out, name.as_bytes());
    out
}

/// Range start of named records whose name starts with `prefix`.
pub(crate) fn named_prefix(family: u8, prefix: &str) -> Vec<u8> {
    let mut out = vec![family];
    push_open(&mut out, prefix.as_bytes());
    out
}

/// Decode a named key back into its name.
pub(crate) fn parse_named(key: &[u8]) -> String {
    let parts = split(&key[1..]).expect("named key is well formed");
    assert_eq!(parts.len(), 1, "named key has one component");
    String::from_utf8(parts[0].clone()).expect("key is utf-8")
}

/// Key of one task of a board family (`TASK`, `READY`, `CELL_TASK`): family, team, seq.
pub(crate) fn task(family: u8, team: &str, seq: u64) -> Vec<u8> {
    let mut out = named(family, team);
    push_u64(&mut out, seq);
    out
}

/// Key of the claim record of `delivery` of a task (`CLAIM` or `CELL_CLAIM`).
pub(crate) fn claim(family: u8, team: &str, seq: u64, delivery: u32) -> Vec<u8> {
    let mut out = task(family, team, seq);
    push_u64(&mut out, u64::from(delivery));
    out
}

/// Key of a cell-tier ready index entry.
pub(crate) fn cell_ready(spill_seq: u64, team: &str, seq: u64) -> Vec<u8> {
    let mut out = vec![CELL_READY];
    push_u64(&mut out, spill_seq);
    push_str(&mut out, team.as_bytes());
    push_u64(&mut out, seq);
    out
}

/// Key of a mailbox head (`MAIL_HEAD`) or prefix of its messages (`MAIL`).
pub(crate) fn mailbox(family: u8, team: &str, agent: &str) -> Vec<u8> {
    let mut out = named(family, team);
    push_str(&mut out, agent.as_bytes());
    out
}

/// The first string component after the family byte (the team of every team-scoped
/// family), or `None` when malformed.
pub(crate) fn first_name(key: &[u8]) -> Option<String> {
    let (parts, _) = split_first(key.get(1..)?, 1)?;
    String::from_utf8(parts.into_iter().next()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(owner: &str, name: &str, key: &str) -> ResourceId {
        ResourceId {
            owner: owner.into(),
            name: name.into(),
            key: key.into(),
        }
    }

    /// A family declared above but missing from `FAMILIES` is a row a range move cannot
    /// carry and a range export does not know: every `u8` constant of this file is listed.
    #[test]
    fn every_declared_family_is_listed() {
        let source = include_str!("keys.rs");
        let declared: Vec<&str> = source
            .lines()
            .filter(|line| line.starts_with("pub(crate) const ") && line.contains(": u8 = b'"))
            .collect();
        assert_eq!(declared.len(), FAMILIES.len(), "{declared:#?}");
        for line in declared {
            let byte = line
                .split_once("= b'")
                .and_then(|(_, rest)| rest.bytes().next());
            let byte = byte.unwrap_or_else(|| panic!("no byte literal in {line}"));
            assert!(FAMILIES.contains(&byte), "{line} is not in FAMILIES");
        }
    }

    #[test]
    fn components_never_collide() {
        assert_ne!(
            listed(LEASE, &id("a/b", "c", "k")),
            listed(LEASE, &id("a", "b/c", "k"))
        );
        let mut one = Vec::new();
        push_str(&mut one, b"a\0");
        push_str(&mut one, b"b");
        let mut two = Vec::new();
        push_str(&mut two, b"a");
        push_str(&mut two, b"\0b");
        assert_ne!(one, two);
    }

    #[test]
    fn escaped_order_follows_string_order() {
        let words: [&[u8]; 5] = [b"", b"\0", b"\0\0", b"a", b"ab"];
        let encoded: Vec<Vec<u8>> = words
            .iter()
            .map(|w| {
                let mut out = Vec::new();
                push_str(&mut out, w);
                out
            })
            .collect();
        let mut sorted = encoded.clone();
        sorted.sort();
        assert_eq!(encoded, sorted);
    }

    #[test]
    fn numbers_order_numerically() {
        assert!(ledger_entry(&id("o", "n", "p"), 2) < ledger_entry(&id("o", "n", "p"), 256));
    }

    #[test]
    fn listed_round_trips_and_prefix_matches() {
        let lease = id("local/Ship", "deploy\0slot", "prod");
        let key = listed(LEASE, &lease);
        assert_eq!(parse_listed(&key), lease);
        let start = listed_prefix(LEASE, "local/Sh");
        assert!(key.starts_with(&start));
        assert!(key < prefix_end(&start));
        assert!(!key.starts_with(&listed_prefix(LEASE, "local/Shx")));
    }

    #[test]
    fn named_round_trips_and_prefix_matches() {
        let key = named(ELECTION, "jobs\0/a");
        assert_eq!(parse_named(&key), "jobs\0/a");
        let start = named_prefix(ELECTION, "jobs");
        assert!(key.starts_with(&start) && key < prefix_end(&start));
        assert!(!key.starts_with(&named_prefix(ELECTION, "jobs\0/b")));
        assert!(!key.starts_with(&named_prefix(SCHEDULE, "")));
    }

    #[test]
    fn split_rejects_malformed() {
        assert_eq!(split(b"a\0"), None);
        assert_eq!(
            split(b"a\0\x01b\0\x01"),
            Some(vec![b"a".to_vec(), b"b".to_vec()])
        );
    }

    #[test]
    fn prefix_end_skips_ff() {
        assert_eq!(prefix_end(&[1, 0xFF, 0xFF]), vec![2]);
    }
}
