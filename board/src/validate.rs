//! Input checks shared by the cell (before proposing) and `apply` (before changing state).

use chrono_tz::Tz;

use crate::counter;
use crate::ephemeral::KvAttach;
use crate::limits::{
    BOARD_POST_BATCH_MAX, DELIVERY_LIMIT_MAX, DURATION_MS_MAX, ELECTION_ENDPOINT_BYTES_MAX,
    ELECTION_ENDPOINTS_MAX, HANDOFF_BATCH_BYTES_MAX, HANDOFF_BATCH_MAX, KV_TTL_MS_MAX,
    KV_TTL_MS_MIN, KV_TXN_BYTES_MAX, KV_TXN_OPS_MAX, LEASE_SLOTS_MAX, NAME_BYTES_MAX,
    RANGE_ROWS_PER_COMMAND_MAX, SCHEDULE_SPEC_BYTES_MAX, TASK_ERROR_BYTES_MAX, TEAM_ANCESTORS_MAX,
    VALUE_BYTES_MAX,
};
use crate::schedule::ScheduleSpec;
use crate::types::{BoardSettings, Command, Family, ResourceId};

fn name(what: &str, bytes: usize) -> Result<(), String> {
    if bytes == 0 {
        return Err(format!("{what} is empty"));
    }
    if bytes > NAME_BYTES_MAX {
        return Err(format!(
            "{what} is {bytes} bytes, limit is {NAME_BYTES_MAX}"
        ));
    }
    Ok(())
}

fn value(what: &str, bytes: usize, value_bytes_max: usize) -> Result<(), String> {
    if bytes > value_bytes_max {
        return Err(format!(
            "{what} is {bytes} bytes, limit is {value_bytes_max}"
        ));
    }
    Ok(())
}

fn duration(what: &str, ms: u64) -> Result<(), String> {
    if ms > DURATION_MS_MAX {
        return Err(format!("{what} is {ms}, limit is {DURATION_MS_MAX}"));
    }
    Ok(())
}

fn positive(what: &str, n: u64) -> Result<(), String> {
    if n == 0 {
        return Err(format!("{what} must be at least 1"));
    }
    Ok(())
}

/// Owner and name must be non-empty; the key may be empty (a resource with one pool).
fn resource(id: &ResourceId) -> Result<(), String> {
    name("owner", id.owner.len())?;
    name("name", id.name.len())?;
    if id.key.len() > NAME_BYTES_MAX {
        return Err(format!(
            "key is {} bytes, limit is {NAME_BYTES_MAX}",
            id.key.len()
        ));
    }
    Ok(())
}

fn zone(timezone: &str) -> Result<Tz, String> {
    counter::zone(timezone).ok_or_else(|| format!("unknown time zone {timezone:?}"))
}

/// At most `ELECTION_ENDPOINTS_MAX` endpoints, each non-empty and bounded.
fn endpoints(endpoints: &[String]) -> Result<(), String> {
    if endpoints.len() > ELECTION_ENDPOINTS_MAX {
        return Err(format!(
            "{} endpoints, limit is {ELECTION_ENDPOINTS_MAX}",
            endpoints.len()
        ));
    }
    for endpoint in endpoints {
        if endpoint.is_empty() {
            return Err("endpoint is empty".into());
        }
        if endpoint.len() > ELECTION_ENDPOINT_BYTES_MAX {
            return Err(format!(
                "endpoint is {} bytes, limit is {ELECTION_ENDPOINT_BYTES_MAX}",
                endpoint.len()
            ));
        }
    }
    Ok(())
}

fn ttl(ttl_ms: u64) -> Result<(), String> {
    positive("ttl_ms", ttl_ms)?;
    duration("ttl_ms", ttl_ms)
}

/// Names, spec and zone of a fire, and that `due_ms` is a due time of the spec. The due
/// check depends only on the command, so it belongs here rather than in `apply`.
fn schedule_fire(
    schedule: &str,
    spec: &str,
    timezone: &str,
    due_ms: u64,
    claimant: &str,
) -> Result<(), String> {
    name("name", schedule.len())?;
    name("claimant", claimant.len())?;
    if spec.len() > SCHEDULE_SPEC_BYTES_MAX {
        return Err(format!(
            "spec is {} bytes, limit is {SCHEDULE_SPEC_BYTES_MAX}",
            spec.len()
        ));
    }
    let parsed = ScheduleSpec::parse(spec).map_err(|e| format!("spec {spec:?}: {e}"))?;
    let tz = zone(timezone)?;
    // 0 claims whatever fell due last before the apply's stamp (`schedule::fire`).
    if due_ms != 0 && parsed.latest_due_at_or_before(due_ms, tz) != Some(due_ms) {
        return Err(format!(
            "due_ms {due_ms} is not a due time of {spec:?} in {timezone}"
        ));
    }
    Ok(())
}

/// A board's settings: a claim window and a delivery limit of at least 1, durations within
/// `DURATION_MS_MAX`, tasks no larger than a value.
fn settings(settings: &BoardSettings, value_bytes_max: usize) -> Result<(), String> {
    positive("reclaim_ms", settings.reclaim_ms)?;
    duration("reclaim_ms", settings.reclaim_ms)?;
    positive("delivery_limit", u64::from(settings.delivery_limit))?;
    if settings.delivery_limit > DELIVERY_LIMIT_MAX {
        return Err(format!(
            "delivery_limit is {}, limit is {DELIVERY_LIMIT_MAX}",
            settings.delivery_limit
        ));
    }
    duration("spill_after_ms", settings.spill_after_ms)?;
    positive("task_bytes_max", u64::from(settings.task_bytes_max))?;
    if settings.task_bytes_max as usize > value_bytes_max {
        return Err(format!(
            "task_bytes_max is {}, limit is {value_bytes_max}",
            settings.task_bytes_max
        ));
    }
    Ok(())
}

/// The names of a team creation, its ancestors and its settings.
fn team_create(command: &Command, value_bytes_max: usize) -> Result<(), String> {
    let Command::TeamCreate {
        team,
        caller,
        parent,
        ancestors,
        settings: board,
    } = command
    else {
        unreachable!("{command:?} is not a team creation");
    };
    name("team", team.len())?;
    if crate::taskboard::is_reserved_team(team) && !crate::taskboard::is_tracker_team(team) {
        return Err(format!(
            "team names starting with ~ are reserved (fabric queues, trackers), got {team:?}"
        ));
    }
    name("caller", caller.len())?;
    if let Some(parent) = parent {
        name("parent", parent.len())?;
    }
    if ancestors.len() > TEAM_ANCESTORS_MAX {
        return Err(format!(
            "{} ancestors, limit is {TEAM_ANCESTORS_MAX}",
            ancestors.len()
        ));
    }
    for ancestor in ancestors {
        name("ancestor", ancestor.len())?;
    }
    settings(board, value_bytes_max)
}

/// Team and task board commands (split from `validate` to keep each match short).
fn board(command: &Command, value_bytes_max: usize) -> Result<(), String> {
    let (team, caller) = match command {
        Command::TeamCreate { .. } => return team_create(command, value_bytes_max),
        Command::TeamJoin {
            team,
            caller,
            agent,
        } => {
            name("agent", agent.len())?;
            (team, caller)
        }
        Command::TeamDissolve { team, .. } if crate::taskboard::is_tracker_team(team) => {
            return Err(format!(
                "{team:?} is a tracker's board: it lives as long as the store"
            ));
        }
        Command::TeamDissolve { team, caller } => (team, caller),
        Command::BoardPost { team, caller, body } => {
            value("body", body.len(), value_bytes_max)?;
            (team, caller)
        }
        Command::BoardPostMany {
            team,
            caller,
            bodies,
        } => {
            if bodies.is_empty() || bodies.len() > BOARD_POST_BATCH_MAX {
                return Err(format!(
                    "a batch posts 1 to {BOARD_POST_BATCH_MAX} tasks, got {}",
                    bodies.len()
                ));
            }
            let total: usize = bodies.iter().map(Vec::len).sum();
            value("batch", total, KV_TXN_BYTES_MAX)?;
            for body in bodies {
                value("body", body.len(), value_bytes_max)?;
            }
            (team, caller)
        }
        Command::BoardClaim {
            team,
            caller,
            worker,
        } => {
            name("worker", worker.len())?;
            (team, caller)
        }
        Command::BoardClaimMany { .. } => claim_many(command, value_bytes_max)?,
        Command::BoardClaimTask {
            team,
            caller,
            worker,
            task_id,
            claim_ms,
        } => {
            name("worker", worker.len())?;
            name("task_id", task_id.len())?;
            duration("claim_ms", *claim_ms)?;
            (team, caller)
        }
        _ => task_names(command, value_bytes_max)?,
    };
    name("team", team.len())?;
    name("caller", caller.len())
}

/// A prefetching claim's bounds: at most [`CLAIM_PREFETCH_MAX`] claims to take and as many
/// to complete, each task named once, something to do, the results within the bounds.
fn claim_many(command: &Command, value_bytes_max: usize) -> Result<(&String, &String), String> {
    use crate::limits::CLAIM_PREFETCH_MAX;
    let Command::BoardClaimMany {
        team,
        caller,
        worker,
        completes,
        max,
        claim_ms,
    } = command
    else {
        unreachable!("{command:?} is not a prefetching claim")
    };
    let max = *max;
    name("worker", worker.len())?;
    duration("claim_ms", *claim_ms)?;
    if max > CLAIM_PREFETCH_MAX || completes.len() > CLAIM_PREFETCH_MAX as usize {
        return Err(format!(
            "a claim takes and completes at most {CLAIM_PREFETCH_MAX} tasks each, got max {max} \
             and {} completions",
            completes.len()
        ));
    }
    if max == 0 && completes.is_empty() {
        return Err("a claim takes at least one task or completes one".to_string());
    }
    let total: usize = completes.iter().map(|c| c.result.len()).sum();
    value("results", total, KV_TXN_BYTES_MAX)?;
    for (i, done) in completes.iter().enumerate() {
        name("task_id", done.task_id.len())?;
        value("result", done.result.len(), value_bytes_max)?;
        if completes[..i].iter().any(|c| c.task_id == done.task_id) {
            return Err(format!("task {:?} is completed twice", done.task_id));
        }
    }
    Ok((team, caller))
}

/// The team and caller of a command that names a task, its other fields checked.
fn task_names(command: &Command, value_bytes_max: usize) -> Result<(&String, &String), String> {
    Ok(match command {
        Command::BoardRelease {
            team,
            caller,
            task_id,
            ..
        } => {
            name("task_id", task_id.len())?;
            (team, caller)
        }
        Command::BoardComplete {
            team,
            caller,
            task_id,
            result,
            ..
        } => {
            name("task_id", task_id.len())?;
            value("result", result.len(), value_bytes_max)?;
            (team, caller)
        }
        Command::BoardCompleteAndClaim {
            team,
            caller,
            task_id,
            result,
            worker,
            ..
        } => {
            name("task_id", task_id.len())?;
            name("worker", worker.len())?;
            value("result", result.len(), value_bytes_max)?;
            (team, caller)
        }
        Command::BoardFail {
            team,
            caller,
            task_id,
            error,
            ..
        } => {
            name("task_id", task_id.len())?;
            value("error", error.len(), TASK_ERROR_BYTES_MAX)?;
            (team, caller)
        }
        Command::BoardExtend {
            team,
            caller,
            task_id,
            extend_ms,
            ..
        } => {
            name("task_id", task_id.len())?;
            positive("extend_ms", *extend_ms)?;
            duration("extend_ms", *extend_ms)?;
            (team, caller)
        }
        Command::BoardRedrive {
            team,
            caller,
            task_id,
        } => {
            name("task_id", task_id.len())?;
            (team, caller)
        }
        other => unreachable!("{other:?} is not a team or board command"),
    })
}

/// An idempotency key must be non-empty and at most `NAME_BYTES_MAX` bytes.
pub(crate) fn idempotency_key(key: &str) -> Result<(), String> {
    name("idempotency key", key.len())
}

/// Roughly how many bytes a handoff item adds to a batch (its envelope or its task).
pub fn handoff_bytes(command: &Command) -> usize {
    match command {
        Command::HandoffSend { envelope, .. } => envelope.len(),
        Command::HandoffReceive { task, .. } => task.body.len() + task.result.len(),
        _ => 0,
    }
}

/// Check `command` against the limits; the error is the reason for `Outcome::Invalid`.
///
/// ```
/// use whip_board::{Command, validate};
/// let put = Command::KvPut { key: b"a".to_vec(), value: vec![0; 10], expect_version: None };
/// assert_eq!(validate(&put, 4), Err("value is 10 bytes, limit is 4".to_string()));
/// ```
pub fn validate(command: &Command, value_bytes_max: usize) -> Result<(), String> {
    match (command.family(), command) {
        (Family::Primitive, _) => primitive(command, value_bytes_max),
        (Family::Tick, _) => Ok(()),
        (Family::Range, Command::RangeImport { rows })
            if rows.len() > RANGE_ROWS_PER_COMMAND_MAX =>
        {
            Err(format!(
                "range import has {} rows, limit is {RANGE_ROWS_PER_COMMAND_MAX}",
                rows.len()
            ))
        }
        (Family::Range, Command::RangePatch { puts, deletes })
            if puts.len() + deletes.len() > RANGE_ROWS_PER_COMMAND_MAX =>
        {
            Err(format!(
                "range patch has {} rows, limit is {RANGE_ROWS_PER_COMMAND_MAX}",
                puts.len() + deletes.len()
            ))
        }
        (Family::Range, Command::RangeFenced { step, .. }) => match step.as_ref() {
            Command::RangeFenced { .. } => Err("a fenced range step holds one step".into()),
            step => validate(step, value_bytes_max),
        },
        (Family::Range, _) => Ok(()),
        (Family::Coordination, _) => coordination(command),
        (Family::Board, Command::FabricPurge { queue }) => name("queue", queue.len()),
        (Family::Board, _) => board(command, value_bytes_max),
        (Family::Handoff, _) => handoff(command, value_bytes_max),
        (Family::Work, _) => work(command),
        (Family::Mail, _) => crate::mail::check(command),
        (Family::Vote, _) => crate::vote::check(command),
        (
            Family::Engine,
            Command::EngineTxn {
                compares,
                puts,
                deletes,
            },
        ) => kv_txn(compares, puts, deletes, value_bytes_max),
        (Family::Engine, other) => unreachable!("{other:?} is not an engine command"),
        (Family::Paths, _) => crate::reservation::check(command),
    }
}

/// A lease of a work entry: 1 ms to `WORK_TTL_MS_MAX`.
fn work_ttl(ttl_ms: u64) -> Result<(), String> {
    let max = crate::limits::WORK_TTL_MS_MAX;
    match ttl_ms {
        0 => Err("ttl_ms must be positive".into()),
        t if t > max => Err(format!("ttl_ms is {t}, the limit is {max}")),
        _ => Ok(()),
    }
}

/// Registry commands.
fn work(command: &Command) -> Result<(), String> {
    use crate::work::{check_class, check_id, root_of};
    match command {
        Command::WorkRegister {
            root,
            parent,
            class,
            ttl_ms,
            owner,
            ..
        } => {
            check_id(root)?;
            if root_of(root) != root {
                return Err(format!("root {root:?} is not a root id"));
            }
            if let Some(parent) = parent {
                check_id(parent)?;
                if root_of(parent) != root {
                    return Err(format!("parent {parent:?} is not under root {root:?}"));
                }
            }
            if let Some(owner) = owner {
                crate::access::check_agent_name(owner)?;
            }
            check_class(class)?;
            work_ttl(*ttl_ms)
        }
        Command::WorkRenew { id, ttl_ms } => {
            check_id(id)?;
            work_ttl(*ttl_ms)
        }
        Command::WorkSignal { id, .. } | Command::WorkRevoke { id } => check_id(id),
        Command::WorkScope { id, class, budget } => {
            check_id(id)?;
            if class.is_none() && budget.is_none() {
                return Err("a scope change names a class, a budget or both".into());
            }
            class.as_deref().map_or(Ok(()), check_class)
        }
        Command::WorkLimitsSet { update } => {
            update
                .classes
                .keys()
                .try_for_each(|name| check_class(name))?;
            update.applied(&crate::work::WorkLimits::default()).check()
        }
        Command::WorkQuotaLend { ttl_ms, .. }
        | Command::WorkQuotaAsk { ttl_ms, .. }
        | Command::WorkQuotaInstall { ttl_ms, .. } => work_ttl(*ttl_ms),
        Command::TeamLeaveAll { agent } | Command::AgentRegister { agent, .. } => {
            crate::access::check_agent_name(agent)
        }
        Command::AgentRevoke { agent, by } => {
            crate::access::check_agent_name(agent)?;
            match by == crate::access::OPERATOR_REVOKER {
                true => Ok(()),
                false => crate::access::check_agent_name(by),
            }
        }
        _ => Ok(()),
    }
}

/// CAS keys, leases, counters and ledgers (split from `validate` to keep each match short).
fn primitive(command: &Command, value_bytes_max: usize) -> Result<(), String> {
    match command {
        command if command.is_kv() => kv_command(command, value_bytes_max),
        Command::LeaseAcquire {
            lease,
            holder,
            slots,
            ttl_ms,
            wait_ms,
        } => {
            resource(lease)?;
            name("holder", holder.len())?;
            positive("slots", u64::from(*slots))?;
            if *slots > LEASE_SLOTS_MAX {
                return Err(format!("slots is {slots}, limit is {LEASE_SLOTS_MAX}"));
            }
            positive("ttl_ms", *ttl_ms)?;
            duration("ttl_ms", *ttl_ms)?;
            duration("wait_ms", *wait_ms)
        }
        Command::LeaseRenew {
            lease,
            holder,
            ttl_ms,
        } => {
            resource(lease)?;
            name("holder", holder.len())?;
            positive("ttl_ms", *ttl_ms)?;
            duration("ttl_ms", *ttl_ms)
        }
        Command::LeaseRelease { lease, holder } => {
            resource(lease)?;
            name("holder", holder.len())
        }
        Command::LeaseReleaseAll { holder } => name("holder", holder.len()),
        Command::CounterConsume {
            counter,
            cap,
            timezone,
            ..
        } => {
            resource(counter)?;
            positive("cap", *cap)?;
            zone(timezone).map(|_| ())
        }
        Command::LedgerAppend {
            ledger,
            entry,
            appended_by,
            retain_ms,
        } => {
            resource(ledger)?;
            value("entry", entry.len(), value_bytes_max)?;
            name("appended_by", appended_by.len())?;
            positive("retain_ms", *retain_ms)?;
            duration("retain_ms", *retain_ms)
        }
        other => unreachable!("{other:?} is not a primitive"),
    }
}

/// Handoff commands (split from `validate` to keep each match short).
fn handoff(command: &Command, value_bytes_max: usize) -> Result<(), String> {
    match command {
        Command::HandoffSend {
            envelope, task_id, ..
        } => {
            name("task_id", task_id.len())?;
            value("envelope", envelope.len(), VALUE_BYTES_MAX + (64 << 10))
        }
        Command::HandoffLocal { task_id, .. } => name("task_id", task_id.len()),
        Command::HandoffReceive { queue, task, .. } => {
            name("queue", queue.len())?;
            value("task", task.body.len(), VALUE_BYTES_MAX)
        }
        Command::HandoffAck { .. } | Command::HandoffFailed { .. } => Ok(()),
        Command::HandoffReset { seq, hash, .. } => match (seq, hash.len()) {
            (0, 0) | (1.., 32) => Ok(()),
            _ => Err(format!(
                "a channel head is sequence 0 with no hash or a later one with a 32-byte \
                 hash, got {seq} with {} bytes",
                hash.len()
            )),
        },
        Command::HandoffBatch { commands } => {
            if commands.is_empty() || commands.len() > HANDOFF_BATCH_MAX {
                return Err(format!(
                    "a handoff batch carries 1 to {HANDOFF_BATCH_MAX} items, got {}",
                    commands.len()
                ));
            }
            let bytes: usize = commands.iter().map(handoff_bytes).sum();
            value("handoff batch", bytes, HANDOFF_BATCH_BYTES_MAX)?;
            for item in commands {
                match item {
                    Command::HandoffSend { .. }
                    | Command::HandoffLocal { .. }
                    | Command::HandoffReceive { .. } => {
                        validate(item, value_bytes_max)?;
                    }
                    other => {
                        return Err(format!("a handoff batch cannot carry {other:?}"));
                    }
                }
            }
            Ok(())
        }
        Command::FollowUpDone { .. } => Ok(()),
        other => unreachable!("{other:?} is not a handoff"),
    }
}

/// Election and schedule commands (split from `validate` to keep each match short).
fn coordination(command: &Command) -> Result<(), String> {
    match command {
        Command::Campaign {
            group,
            candidate,
            endpoints: published,
            ttl_ms,
        } => {
            name("group", group.len())?;
            name("candidate", candidate.len())?;
            ttl(*ttl_ms)?;
            endpoints(published)
        }
        Command::Proclaim {
            group,
            candidate,
            endpoints: published,
            ..
        } => {
            name("group", group.len())?;
            name("candidate", candidate.len())?;
            endpoints(published)
        }
        Command::Resign {
            group, candidate, ..
        } => {
            name("group", group.len())?;
            name("candidate", candidate.len())
        }
        Command::ElectionRenew {
            group,
            candidate,
            ttl_ms,
            ..
        } => {
            name("group", group.len())?;
            name("candidate", candidate.len())?;
            ttl(*ttl_ms)
        }
        Command::ScheduleFire {
            name: schedule,
            spec,
            timezone,
            due_ms,
            claimant,
        } => schedule_fire(schedule, spec, timezone, *due_ms, claimant),
        other => unreachable!("{other:?} is not an election or schedule command"),
    }
}

/// CAS key commands (split from `primitive` to keep each match short).
fn kv_command(command: &Command, value_bytes_max: usize) -> Result<(), String> {
    match command {
        Command::KvPut {
            key, value: bytes, ..
        } => {
            name("key", key.len())?;
            value("value", bytes.len(), value_bytes_max)
        }
        Command::KvDelete { key, .. } => name("key", key.len()),
        Command::KvTxn {
            compares,
            puts,
            deletes,
        } => kv_txn(compares, puts, deletes, value_bytes_max),
        Command::KvPutAttached {
            key,
            value: bytes,
            attach,
            ..
        } => {
            name("key", key.len())?;
            value("value", bytes.len(), value_bytes_max)?;
            match attach {
                KvAttach::Ttl { ttl_ms } => kv_ttl(*ttl_ms),
                KvAttach::Lease { lease, holder } => {
                    resource(lease)?;
                    name("holder", holder.len())
                }
            }
        }
        Command::KvKeepalive { key, ttl_ms } => {
            name("key", key.len())?;
            kv_ttl(*ttl_ms)
        }
        Command::KvTxnIf {
            compares,
            success,
            failure,
        } => crate::kv_txn::check((compares, success, failure), value_bytes_max, name),
        other => unreachable!("{other:?} is not a CAS key command"),
    }
}

/// The time to live of a key with its own deadline: `KV_TTL_MS_MIN` to `KV_TTL_MS_MAX`.
fn kv_ttl(ttl_ms: u64) -> Result<(), String> {
    if !(KV_TTL_MS_MIN..=KV_TTL_MS_MAX).contains(&ttl_ms) {
        return Err(format!(
            "ttl_ms is {ttl_ms}, it must be {KV_TTL_MS_MIN} to {KV_TTL_MS_MAX}"
        ));
    }
    Ok(())
}

fn kv_txn(
    compares: &[(Vec<u8>, u64)],
    puts: &[(Vec<u8>, Vec<u8>)],
    deletes: &[Vec<u8>],
    value_bytes_max: usize,
) -> Result<(), String> {
    let ops = compares.len() + puts.len() + deletes.len();
    if ops == 0 {
        return Err("kv txn is empty".into());
    }
    if ops > KV_TXN_OPS_MAX {
        return Err(format!(
            "kv txn has {ops} operations, limit is {KV_TXN_OPS_MAX}"
        ));
    }
    let mut bytes = 0usize;
    for (key, _) in compares {
        name("key", key.len())?;
        bytes += key.len();
    }
    for (key, bytes_of) in puts {
        name("key", key.len())?;
        value("value", bytes_of.len(), value_bytes_max)?;
        bytes += key.len() + bytes_of.len();
    }
    for key in deletes {
        name("key", key.len())?;
        bytes += key.len();
    }
    if bytes > KV_TXN_BYTES_MAX {
        return Err(format!(
            "kv txn is {bytes} bytes, limit is {KV_TXN_BYTES_MAX}"
        ));
    }
    let put_keys: std::collections::BTreeSet<&[u8]> =
        puts.iter().map(|(key, _)| key.as_slice()).collect();
    if put_keys.len() != puts.len() {
        return Err("kv txn puts one key twice".into());
    }
    if deletes.iter().any(|key| put_keys.contains(key.as_slice())) {
        return Err("kv txn puts and deletes the same key".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::VALUE_BYTES_MAX;
    use crate::types::Reset;

    fn id() -> ResourceId {
        ResourceId {
            owner: "o".into(),
            name: "n".into(),
            key: "k".into(),
        }
    }

    fn acquire(slots: u32, ttl_ms: u64, wait_ms: u64) -> Command {
        Command::LeaseAcquire {
            lease: id(),
            holder: "h".into(),
            slots,
            ttl_ms,
            wait_ms,
        }
    }

    fn check(command: &Command) -> Result<(), String> {
        validate(command, VALUE_BYTES_MAX)
    }

    #[test]
    fn lease_limits() {
        assert_eq!(check(&acquire(1, 1, 0)), Ok(()));
        assert_eq!(
            check(&acquire(0, 1, 0)),
            Err("slots must be at least 1".into())
        );
        assert_eq!(
            check(&acquire(10_001, 1, 0)),
            Err("slots is 10001, limit is 10000".into())
        );
        assert_eq!(
            check(&acquire(1, 0, 0)),
            Err("ttl_ms must be at least 1".into())
        );
        let too_long = DURATION_MS_MAX + 1;
        let reason = format!("wait_ms is {too_long}, limit is {DURATION_MS_MAX}");
        assert_eq!(check(&acquire(1, 1, too_long)), Err(reason));
    }

    #[test]
    fn names_and_values() {
        let put = Command::KvPut {
            key: vec![],
            value: vec![],
            expect_version: None,
        };
        assert_eq!(check(&put), Err("key is empty".into()));
        let put = Command::KvPut {
            key: vec![1],
            value: vec![0; 2_000_000],
            expect_version: None,
        };
        assert_eq!(
            check(&put),
            Err("value is 2000000 bytes, limit is 1048576".into())
        );
        let release = Command::LeaseReleaseAll {
            holder: "x".repeat(1025),
        };
        assert_eq!(
            check(&release),
            Err("holder is 1025 bytes, limit is 1024".into())
        );
        let mut lease = id();
        lease.owner.clear();
        let release = Command::LeaseRelease {
            lease,
            holder: "h".into(),
        };
        assert_eq!(check(&release), Err("owner is empty".into()));
    }

    #[test]
    fn counter_zone_and_cap() {
        let consume = |cap, timezone: &str| Command::CounterConsume {
            counter: id(),
            amount: 1,
            cap,
            reset: Reset::Daily,
            timezone: timezone.into(),
        };
        assert_eq!(check(&consume(1, "America/New_York")), Ok(()));
        assert_eq!(
            check(&consume(0, "UTC")),
            Err("cap must be at least 1".into())
        );
        let reason = Err("unknown time zone \"Mars/Olympus\"".into());
        assert_eq!(check(&consume(1, "Mars/Olympus")), reason);
    }

    fn campaign(group: &str, ttl_ms: u64, endpoints: Vec<String>) -> Command {
        Command::Campaign {
            group: group.into(),
            candidate: "a".into(),
            endpoints,
            ttl_ms,
        }
    }

    #[test]
    fn election_limits() {
        let one = vec!["h:1".to_string()];
        assert_eq!(check(&campaign("g", 1, one.clone())), Ok(()));
        assert_eq!(
            check(&campaign("", 1, one.clone())),
            Err("group is empty".into())
        );
        assert_eq!(
            check(&campaign("g", 0, one)),
            Err("ttl_ms must be at least 1".into())
        );
        assert_eq!(
            check(&campaign("g", 1, vec!["h".into(); 17])),
            Err("17 endpoints, limit is 16".into())
        );
        assert_eq!(
            check(&campaign("g", 1, vec![String::new()])),
            Err("endpoint is empty".into())
        );
        assert_eq!(
            check(&campaign("g", 1, vec!["h".repeat(257)])),
            Err("endpoint is 257 bytes, limit is 256".into())
        );
        let resign = Command::Resign {
            group: "g".into(),
            candidate: String::new(),
            fence: 1,
        };
        assert_eq!(check(&resign), Err("candidate is empty".into()));
        let renew = Command::ElectionRenew {
            group: "g".into(),
            candidate: "a".into(),
            fence: 1,
            ttl_ms: 0,
        };
        assert_eq!(check(&renew), Err("ttl_ms must be at least 1".into()));
        let proclaim = Command::Proclaim {
            group: "g".into(),
            candidate: "a".into(),
            fence: 1,
            endpoints: vec![String::new()],
        };
        assert_eq!(check(&proclaim), Err("endpoint is empty".into()));
    }

    fn fire(spec: &str, timezone: &str, due_ms: u64) -> Command {
        Command::ScheduleFire {
            name: "n".into(),
            spec: spec.into(),
            timezone: timezone.into(),
            due_ms,
            claimant: "c".into(),
        }
    }

    #[test]
    fn schedule_spec_zone_and_due_time() {
        let hour_ms = 3_600_000;
        assert_eq!(
            check(&fire("@hourly", "America/New_York", 5 * hour_ms)),
            Ok(())
        );
        assert_eq!(
            check(&fire("@hourly", "UTC", 5 * hour_ms + 1)),
            Err("due_ms 18000001 is not a due time of \"@hourly\" in UTC".into())
        );
        assert_eq!(
            check(&fire("0 0 31 2 *", "UTC", 60_000)),
            Err("due_ms 60000 is not a due time of \"0 0 31 2 *\" in UTC".into())
        );
        assert_eq!(
            check(&fire("61 * * * *", "UTC", 0)),
            Err("spec \"61 * * * *\": minute value 61 is out of range 0-59".into())
        );
        assert_eq!(
            check(&fire("@hourly", "Mars/Olympus", 0)),
            Err("unknown time zone \"Mars/Olympus\"".into())
        );
        assert_eq!(
            check(&fire(&"*".repeat(257), "UTC", 0)),
            Err("spec is 257 bytes, limit is 256".into())
        );
        let mut nameless = fire("@hourly", "UTC", 0);
        if let Command::ScheduleFire { name, .. } = &mut nameless {
            name.clear();
        }
        assert_eq!(check(&nameless), Err("name is empty".into()));
    }
}
