//! Between the wire (`whip.v1` protobuf) and the board's commands, outcomes and views.
//! One function per shape; a shape that cannot occur is a bug, reported as `internal`.

use tonic::Status;
use whip_board::query::{CounterView, LeaseView, LedgerEntryView};
use whip_board::types::{BoardSettings, TaskState, TaskView};
use whip_board::{Command, ElectionLeader, LeaseHolder, Outcome, QueryResult, Reset, ResourceId};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

fn unexpected<T: std::fmt::Debug>(what: &T) -> Status {
    Status::internal(format!("unexpected answer {what:?}"))
}

/// A primitive's outcome that is not one of its answers: a team's blackboard refused a
/// non-member (`not_member: …`), or a bug.
fn not_an_answer(outcome: &Outcome) -> Status {
    match outcome {
        Outcome::BoardRefused { reason } => {
            Status::permission_denied(format!("{}: {reason}", reason.code()))
        }
        other => unexpected(other),
    }
}

/// Refuse an empty required field.
pub(crate) fn non_empty(field: &str, value: &[u8]) -> Result<(), Status> {
    if value.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{field} must not be empty"
        )));
    }
    Ok(())
}

/// A list limit: 0 means the maximum.
pub(crate) fn limit(requested: u32) -> u32 {
    let max = whip_board::limits::LIST_ROWS_MAX as u32;
    if requested == 0 {
        max
    } else {
        requested.min(max)
    }
}

/// A required resource id.
pub(crate) fn resource(id: Option<pb::ResourceId>, what: &str) -> Result<ResourceId, Status> {
    let id = id.ok_or_else(|| Status::invalid_argument(format!("{what} is required")))?;
    Ok(ResourceId {
        owner: id.owner,
        name: id.name,
        key: id.key,
    })
}

fn resource_pb(id: ResourceId) -> pb::ResourceId {
    pb::ResourceId {
        owner: id.owner,
        name: id.name,
        key: id.key,
    }
}

/// A reset period from its wire code.
pub(crate) fn reset(code: i32) -> Result<Reset, Status> {
    match pb::Reset::try_from(code) {
        Ok(pb::Reset::Hourly) => Ok(Reset::Hourly),
        Ok(pb::Reset::Daily) => Ok(Reset::Daily),
        Ok(pb::Reset::Weekly) => Ok(Reset::Weekly),
        Ok(pb::Reset::Monthly) => Ok(Reset::Monthly),
        _ => Err(Status::invalid_argument(format!(
            "reset must be hourly, daily, weekly or monthly (got code {code})"
        ))),
    }
}

fn holder_pb(h: LeaseHolder) -> pb::LeaseHolder {
    pb::LeaseHolder {
        holder: h.holder,
        fence: h.fence,
        expires_at_ms: h.expires_at_ms,
    }
}

/// The key space a KV call names; a number outside the enum is refused.
pub(crate) fn key_space(space: i32) -> Result<pb::KeySpace, Status> {
    pb::KeySpace::try_from(space)
        .map_err(|_| Status::invalid_argument(format!("unknown key space {space}")))
}

pub(crate) fn kv_get_response(result: QueryResult) -> Result<pb::KvGetResponse, Status> {
    match result {
        QueryResult::Kv(Some(e)) => Ok(pb::KvGetResponse {
            found: true,
            value: e.value,
            version: e.version,
        }),
        QueryResult::Kv(None) => Ok(pb::KvGetResponse::default()),
        other => Err(unexpected(&other)),
    }
}

pub(crate) fn kv_write_response(outcome: Outcome) -> Result<pb::KvWriteResponse, Status> {
    let mut r = pb::KvWriteResponse::default();
    match outcome {
        Outcome::KvWritten { version, fence } => {
            r.set_code(Code::KvWritten);
            (r.version, r.fence) = (version, fence);
        }
        Outcome::KvDeleted { version } => {
            r.set_code(Code::KvDeleted);
            r.version = version;
        }
        Outcome::KvVersionMismatch { current } => {
            r.set_code(Code::KvVersionMismatch);
            r.current_version = current;
        }
        Outcome::KvKeptAlive {
            version,
            expires_at_ms,
        } => {
            r.set_code(Code::KvKeptAlive);
            (r.version, r.expires_at_ms) = (version, expires_at_ms);
        }
        Outcome::KvRefused { refusal } => {
            r.set_code(Code::KvRefused);
            (r.refusal, r.message) = (refusal.code().to_string(), refusal.to_string());
        }
        Outcome::Invalid { reason } => return Err(Status::invalid_argument(reason)),
        other => return Err(not_an_answer(&other)),
    }
    Ok(r)
}

/// A `KvTxnIf`'s answer: which branch ran and one result per operation.
pub(crate) fn kv_txn_if_response(outcome: Outcome) -> Result<pb::KvTxnIfResponse, Status> {
    use whip_board::kv_txn::TxnOpResult;
    use whip_proto::v1::kv_txn_op_result::Result as Answer;
    let (succeeded, fence, responses) = match outcome {
        Outcome::KvTxnDone {
            succeeded,
            fence,
            responses,
        } => (succeeded, fence, responses),
        Outcome::Invalid { reason } => return Err(Status::invalid_argument(reason)),
        other => return Err(not_an_answer(&other)),
    };
    let answer = |result: TxnOpResult| match result {
        TxnOpResult::Put { version } => Answer::PutVersion(version),
        TxnOpResult::Delete { version } => Answer::DeleteVersion(version),
        TxnOpResult::Get { entry } => {
            Answer::Get(kv_get_response(QueryResult::Kv(entry)).expect("a kv entry"))
        }
    };
    let responses = (responses.into_iter())
        .map(|r| pb::KvTxnOpResult {
            result: Some(answer(r)),
        })
        .collect();
    Ok(pb::KvTxnIfResponse {
        code: Code::KvTxnDone as i32,
        succeeded,
        fence,
        responses,
    })
}

pub(crate) fn lease_response(outcome: Outcome) -> Result<pb::LeaseResponse, Status> {
    let mut r = pb::LeaseResponse::default();
    match outcome {
        Outcome::LeaseHeld {
            fence,
            expires_at_ms,
            reentered,
        } => {
            r.set_code(Code::LeaseHeld);
            (r.fence, r.expires_at_ms, r.reentered) = (fence, expires_at_ms, reentered);
        }
        Outcome::LeaseContended { holders } => {
            r.set_code(Code::LeaseContended);
            r.holders = holders.into_iter().map(holder_pb).collect();
        }
        Outcome::LeaseWaiting {
            position,
            wait_until_ms,
        } => {
            r.set_code(Code::LeaseWaiting);
            (r.position, r.wait_until_ms) = (position, wait_until_ms);
        }
        Outcome::LeaseRenewed {
            fence,
            expires_at_ms,
        } => {
            r.set_code(Code::LeaseRenewed);
            (r.fence, r.expires_at_ms) = (fence, expires_at_ms);
        }
        Outcome::LeaseReleased => r.set_code(Code::LeaseReleased),
        Outcome::LeaseNotHeld => r.set_code(Code::LeaseNotHeld),
        Outcome::LeaseReleasedAll { released } => {
            r.set_code(Code::LeaseReleasedAll);
            r.released = released;
        }
        other => return Err(not_an_answer(&other)),
    }
    Ok(r)
}

pub(crate) fn counter_response(outcome: Outcome) -> Result<pb::CounterResponse, Status> {
    let (code, consumed, remaining, period) = match outcome {
        Outcome::CounterOk {
            consumed,
            remaining,
            period,
        } => (Code::CounterOk, consumed, remaining, period),
        Outcome::CounterOver {
            consumed,
            remaining,
            period,
        } => (Code::CounterOver, consumed, remaining, period),
        other => return Err(not_an_answer(&other)),
    };
    Ok(pb::CounterResponse {
        code: code as i32,
        consumed,
        remaining,
        period,
    })
}

pub(crate) fn ledger_append_response(outcome: Outcome) -> Result<pb::LedgerAppendResponse, Status> {
    match outcome {
        Outcome::LedgerAppended { seq } => Ok(pb::LedgerAppendResponse {
            code: Code::LedgerAppended as i32,
            seq,
        }),
        other => Err(not_an_answer(&other)),
    }
}

fn lease_view_pb(v: LeaseView) -> pb::LeaseView {
    pb::LeaseView {
        lease: Some(resource_pb(v.lease)),
        slots: v.slots,
        holders: v.holders.into_iter().map(holder_pb).collect(),
        waiters: v
            .waiters
            .into_iter()
            .map(|(holder, wait_until_ms)| pb::LeaseWaiter {
                holder,
                wait_until_ms,
            })
            .collect(),
    }
}

pub(crate) fn lease_list_response(result: QueryResult) -> Result<pb::LeaseListResponse, Status> {
    match result {
        QueryResult::Leases(views) => Ok(pb::LeaseListResponse {
            leases: views.into_iter().map(lease_view_pb).collect(),
        }),
        other => Err(unexpected(&other)),
    }
}

fn counter_view_pb(v: CounterView) -> pb::CounterView {
    pb::CounterView {
        counter: Some(resource_pb(v.counter)),
        consumed: v.consumed,
        cap: v.cap,
        period: v.period,
    }
}

pub(crate) fn counter_list_response(
    result: QueryResult,
) -> Result<pb::CounterListResponse, Status> {
    match result {
        QueryResult::Counters(views) => Ok(pb::CounterListResponse {
            counters: views.into_iter().map(counter_view_pb).collect(),
        }),
        other => Err(unexpected(&other)),
    }
}

fn ledger_entry_pb(v: LedgerEntryView) -> pb::LedgerEntry {
    pb::LedgerEntry {
        ledger: Some(resource_pb(v.ledger)),
        seq: v.seq,
        entry: v.entry,
        appended_by: v.appended_by,
        at_ms: v.at_ms,
    }
}

pub(crate) fn ledger_list_response(result: QueryResult) -> Result<pb::LedgerListResponse, Status> {
    match result {
        QueryResult::LedgerEntries(entries) => Ok(pb::LedgerListResponse {
            entries: entries.into_iter().map(ledger_entry_pb).collect(),
        }),
        other => Err(unexpected(&other)),
    }
}

pub(crate) fn kv_txn_response(outcome: Outcome) -> Result<pb::KvTxnResponse, Status> {
    let mut r = pb::KvTxnResponse::default();
    match outcome {
        Outcome::KvTxnCommitted { fence } => {
            r.set_code(Code::KvTxnCommitted);
            r.fence = fence;
        }
        Outcome::KvTxnFailed { key, current } => {
            r.set_code(Code::KvTxnFailed);
            (r.failed_key, r.current_version) = (key, current);
        }
        Outcome::Invalid { reason } => return Err(Status::invalid_argument(reason)),
        other => return Err(not_an_answer(&other)),
    }
    Ok(r)
}

pub(crate) fn kv_range_response(result: QueryResult) -> Result<pb::KvRangeResponse, Status> {
    match result {
        QueryResult::KvRange(page) => Ok(pb::KvRangeResponse {
            entries: page
                .rows
                .into_iter()
                .map(|(key, e)| pb::KvRangeEntry {
                    key,
                    value: e.value,
                    version: e.version,
                })
                .collect(),
            resume_after: page.resume_after.unwrap_or_default(),
        }),
        other => Err(unexpected(&other)),
    }
}

fn election_leader_pb(l: ElectionLeader) -> pb::ElectionLeader {
    pb::ElectionLeader {
        group: l.group,
        candidate: l.candidate,
        fence: l.fence,
        endpoints: l.endpoints,
        expires_at_ms: l.expires_at_ms,
    }
}

pub(crate) fn election_response(outcome: Outcome) -> Result<pb::ElectionResponse, Status> {
    let mut r = pb::ElectionResponse::default();
    match outcome {
        Outcome::Elected {
            fence,
            expires_at_ms,
        } => {
            r.code = Code::Elected as i32;
            r.fence = fence;
            r.expires_at_ms = expires_at_ms;
        }
        Outcome::ElectionLost { leader } => {
            r.code = Code::ElectionLost as i32;
            r.leader = Some(election_leader_pb(leader));
        }
        Outcome::ElectionNotLeader { current } => {
            r.code = Code::ElectionNotLeader as i32;
            r.leader = current.map(election_leader_pb);
        }
        Outcome::Proclaimed { fence } => {
            r.code = Code::Proclaimed as i32;
            r.fence = fence;
        }
        Outcome::Resigned => r.code = Code::Resigned as i32,
        other => return Err(unexpected(&other)),
    }
    Ok(r)
}

pub(crate) fn leader_response(result: QueryResult) -> Result<pb::LeaderResponse, Status> {
    match result {
        QueryResult::ElectionLeader(leader) => Ok(pb::LeaderResponse {
            leader: leader.map(election_leader_pb),
        }),
        other => Err(unexpected(&other)),
    }
}

pub(crate) fn schedule_response(outcome: Outcome) -> Result<pb::ScheduleResponse, Status> {
    Ok(match outcome {
        Outcome::ScheduleFired { due_ms, fence } => pb::ScheduleResponse {
            code: Code::ScheduleFired as i32,
            due_ms,
            fence,
            claimant: String::new(),
        },
        Outcome::ScheduleAlreadyFired {
            due_ms,
            claimant,
            fence,
        } => pb::ScheduleResponse {
            code: Code::ScheduleAlreadyFired as i32,
            due_ms,
            fence,
            claimant,
        },
        Outcome::ScheduleNotDue { due_ms, .. } => pb::ScheduleResponse {
            code: Code::ScheduleNotDue as i32,
            due_ms,
            ..Default::default()
        },
        other => return Err(unexpected(&other)),
    })
}

/// A fail-open acquire the cell could not confirm in time.
pub(crate) fn lease_degraded(reason: String) -> pb::LeaseResponse {
    pb::LeaseResponse {
        code: Code::LeaseHeldDegraded as i32,
        degraded_reason: reason,
        ..Default::default()
    }
}

// ---------------------------------------------------------------- teams and task boards

pub(crate) fn task_pb(t: TaskView) -> pb::Task {
    pb::Task {
        id: t.id,
        team: t.team,
        tier: t.tier.to_string(),
        state: t.state.to_string(),
        body: t.body,
        delivery_count: t.delivery_count,
        worker: t.worker,
        fence: t.fence,
        deadline_ms: t.deadline_ms,
        posted_ms: t.posted_ms,
        failures: t
            .failures
            .into_iter()
            .map(|f| pb::Failure {
                delivery: f.delivery,
                worker: f.worker,
                error: f.error,
                at_ms: f.at_ms,
            })
            .collect(),
        result: t.result,
    }
}

/// The word an answer's code reads as (the `outcome` fields, the CLI's and the MCP tools'
/// JSON): its name in lower case without its family, `WORK_ADMITTED` → `admitted`.
pub fn outcome_word(code: Code) -> String {
    let lower = code.as_str_name().to_ascii_lowercase();
    match lower.split_once('_') {
        Some((_, rest)) => rest.to_string(),
        None => lower,
    }
}

/// An answer's numbered code and its word, for the registry, mail, vote and path answers.
pub(crate) fn answered(code: Code) -> (i32, String) {
    (code as i32, outcome_word(code))
}

pub(crate) fn team_response(outcome: Outcome) -> Result<pb::TeamResponse, Status> {
    let mut r = pb::TeamResponse::default();
    match outcome {
        Outcome::TeamCreated { team } => {
            r.code = Code::TeamCreated as i32;
            r.message = format!("team {team} created");
        }
        Outcome::TeamJoined { team, agent } => {
            r.code = Code::TeamJoined as i32;
            r.message = format!("{agent} joined team {team}");
        }
        Outcome::TeamDissolved { removed, done } => {
            r.code = Code::TeamDissolved as i32;
            r.removed = removed;
            r.done = done;
            r.message = format!(
                "removed {removed} rows{}",
                if done { ", done" } else { ", more to go" }
            );
        }
        Outcome::BoardRefused { reason } => {
            r.code = Code::BoardRefused as i32;
            r.refusal = reason.code().into();
            r.message = reason.to_string();
        }
        other => return Err(unexpected(&other)),
    }
    Ok(r)
}

/// A prefetching claim's command (`BoardClaimRequest` with `max` or `completes`); it names
/// no task of its own.
pub(crate) fn claim_many(req: pb::BoardClaimRequest, caller: String) -> Result<Command, Status> {
    if !req.task_id.is_empty() {
        return Err(Status::invalid_argument(
            "a claim names one task (task_id) or prefetches (max, completes), not both",
        ));
    }
    let completes = req
        .completes
        .into_iter()
        .map(|c| whip_board::Completion {
            task_id: c.task_id,
            fence: c.fence,
            result: c.result,
        })
        .collect();
    Ok(Command::BoardClaimMany {
        team: req.team,
        caller,
        worker: req.worker,
        completes,
        max: req.max,
        claim_ms: req.claim_ms,
    })
}

/// One claim of a prefetching claim, as a task whose fence, deadline and tier are the
/// claim's.
fn claimed_pb(claimed: whip_board::Claimed) -> pb::Task {
    let mut task = task_pb(claimed.task);
    task.fence = claimed.fence;
    task.deadline_ms = claimed.deadline_ms;
    task.tier = claimed.tier.to_string();
    task
}

pub(crate) fn board_response(outcome: Outcome) -> Result<pb::BoardResponse, Status> {
    let mut r = pb::BoardResponse::default();
    match outcome {
        Outcome::TaskPosted { task_id, tier } => {
            r.code = Code::TaskPosted as i32;
            r.task_id = task_id;
            r.tier = tier.to_string();
        }
        Outcome::TaskClaimed {
            task,
            fence,
            deadline_ms,
            tier,
        } => {
            r.code = Code::TaskClaimed as i32;
            r.task_id = task.id.clone();
            r.delivery_count = task.delivery_count;
            r.task = Some(task_pb(*task));
            r.fence = fence;
            r.deadline_ms = deadline_ms;
            r.tier = tier.to_string();
        }
        Outcome::BoardEmpty => r.code = Code::BoardEmpty as i32,
        Outcome::TasksClaimed { completed, claims } => {
            r.code = Code::TasksClaimed as i32;
            r.completed = completed;
            r.claims = claims.into_iter().map(claimed_pb).collect();
        }
        Outcome::TasksPosted { task_ids } => {
            r.code = Code::TaskPosted as i32;
            r.tier = "local".into();
            r.task_ids = task_ids;
        }
        Outcome::TaskCompleted { task_id } => {
            r.code = Code::TaskCompleted as i32;
            r.task_id = task_id;
        }
        Outcome::TaskReleased {
            task_id,
            delivery_count,
        } => {
            r.code = Code::TaskReleased as i32;
            r.task_id = task_id;
            r.delivery_count = delivery_count;
        }
        Outcome::TaskDeadLettered {
            task_id,
            delivery_count,
        } => {
            r.code = Code::TaskDeadLettered as i32;
            r.task_id = task_id;
            r.delivery_count = delivery_count;
        }
        Outcome::TaskExtended { deadline_ms } => {
            r.code = Code::TaskExtended as i32;
            r.deadline_ms = deadline_ms;
        }
        Outcome::TaskRedriven { task_id } => {
            r.code = Code::TaskRedriven as i32;
            r.task_id = task_id;
        }
        Outcome::BoardRefused { reason } => {
            r.code = Code::BoardRefused as i32;
            r.refusal = reason.code().into();
            r.message = reason.to_string();
        }
        other => return Err(unexpected(&other)),
    }
    Ok(r)
}

pub(crate) fn tasks_response(result: QueryResult) -> Result<pb::BoardListResponse, Status> {
    match result {
        QueryResult::Tasks(tasks) => Ok(pb::BoardListResponse {
            tasks: tasks.into_iter().map(task_pb).collect(),
        }),
        other => Err(unexpected(&other)),
    }
}

pub(crate) fn board_stats_response(result: QueryResult) -> Result<pb::BoardStatsResponse, Status> {
    match result {
        QueryResult::BoardStats(Some(s)) => Ok(pb::BoardStatsResponse {
            ready: s.ready,
            claimed: s.claimed,
            done: s.done,
            dead: s.dead,
            tier: s.tier.to_string(),
            cell_ready: s.cell_ready,
        }),
        QueryResult::BoardStats(None) => Err(Status::not_found("unknown team")),
        other => Err(unexpected(&other)),
    }
}

pub(crate) fn mailbox_response(result: QueryResult) -> Result<pb::MailboxResponse, Status> {
    match result {
        QueryResult::Mailbox(messages) => Ok(pb::MailboxResponse {
            messages: messages
                .into_iter()
                .map(|m| pb::MailboxMessage {
                    seq: m.seq,
                    from: m.from,
                    kind: match &m.kind {
                        whip_board::query::MessageKind::DeadLetter { .. } => "dead_letter".into(),
                    },
                    body: m.body,
                    at_ms: m.at_ms,
                })
                .collect(),
        }),
        other => Err(unexpected(&other)),
    }
}

/// A task state named on the wire (empty = every state).
pub(crate) fn task_state(text: &str) -> Result<Option<TaskState>, Status> {
    match text {
        "" => Ok(None),
        text => text.parse().map(Some).map_err(Status::invalid_argument),
    }
}

/// Board settings from the wire: zero fields take the defaults.
pub(crate) fn board_settings(s: Option<pb::BoardSettings>) -> BoardSettings {
    let d = BoardSettings::default();
    let s = s.unwrap_or_default();
    let or = |v: u64, d: u64| if v == 0 { d } else { v };
    BoardSettings {
        reclaim_ms: or(s.reclaim_ms, d.reclaim_ms),
        delivery_limit: if s.delivery_limit == 0 {
            d.delivery_limit
        } else {
            s.delivery_limit
        },
        spill_after_ms: s.spill_after_ms,
        task_bytes_max: if s.task_bytes_max == 0 {
            d.task_bytes_max
        } else {
            s.task_bytes_max
        },
    }
}

/// The board commands of the client API's plain keyed writes, one function per method,
/// shared by the service's handlers and the client that routes by the command's point
/// ([`crate::client::Router`]). The idempotency key travels beside the command.
pub(crate) mod command {
    use tonic::Status;
    use whip_board::Command;
    use whip_board::ephemeral::KvAttach;
    use whip_board::kv_txn::{Compare, CompareOp, CompareTarget, TxnOp};
    use whip_proto::v1 as pb;

    pub(crate) fn kv_put(req: pb::KvPutRequest) -> Result<Command, Status> {
        let attach = match (req.ttl_ms, req.lease) {
            (0, None) => {
                return Ok(Command::KvPut {
                    key: req.key,
                    value: req.value,
                    expect_version: req.expect_version,
                });
            }
            (ttl_ms, None) => KvAttach::Ttl { ttl_ms },
            (0, Some(lease)) => KvAttach::Lease {
                lease: super::resource(Some(lease), "lease")?,
                holder: req.lease_holder,
            },
            (_, Some(_)) => {
                return Err(Status::invalid_argument(
                    "a key has its own deadline (ttl_ms) or lives with a lease slot, not both",
                ));
            }
        };
        Ok(Command::KvPutAttached {
            key: req.key,
            value: req.value,
            expect_version: req.expect_version,
            attach,
        })
    }

    pub(crate) fn paths_reserve(req: pb::PathsReserveRequest) -> Result<Command, Status> {
        Ok(Command::PathsReserve {
            repo: req.repo,
            paths: req.paths,
            exclusive: req.exclusive,
            ttl_ms: req.ttl_ms,
            fence: req.fence,
        })
    }

    pub(crate) fn paths_release(req: pb::PathsReleaseRequest) -> Result<Command, Status> {
        Ok(Command::PathsRelease {
            repo: req.repo,
            paths: req.paths,
            fence: req.fence,
        })
    }

    pub(crate) fn kv_keepalive(req: pb::KvKeepaliveRequest) -> Result<Command, Status> {
        Ok(Command::KvKeepalive {
            key: req.key,
            ttl_ms: req.ttl_ms,
        })
    }

    pub(crate) fn kv_txn_if(req: pb::KvTxnIfRequest) -> Result<Command, Status> {
        let compares = req.compares.into_iter().map(txn_compare);
        let ops = |ops: Vec<pb::KvTxnOp>| ops.into_iter().map(txn_op).collect::<Result<_, _>>();
        Ok(Command::KvTxnIf {
            compares: compares.collect::<Result<_, _>>()?,
            success: ops(req.success)?,
            failure: ops(req.failure)?,
        })
    }

    fn txn_compare(c: pb::KvTxnCompare) -> Result<Compare, Status> {
        let op = match pb::KvCompareOp::try_from(c.op) {
            Ok(pb::KvCompareOp::KvCompareEqual) => CompareOp::Equal,
            Ok(pb::KvCompareOp::KvCompareNotEqual) => CompareOp::NotEqual,
            Ok(pb::KvCompareOp::KvCompareLess) => CompareOp::Less,
            Ok(pb::KvCompareOp::KvCompareGreater) => CompareOp::Greater,
            Err(_) => {
                let op = c.op;
                return Err(Status::invalid_argument(format!("unknown compare op {op}")));
            }
        };
        let target = match c.target {
            Some(pb::kv_txn_compare::Target::Version(v)) => CompareTarget::Version(v),
            Some(pb::kv_txn_compare::Target::Value(v)) => CompareTarget::Value(v),
            None => {
                return Err(Status::invalid_argument(
                    "a compare needs a version or a value",
                ));
            }
        };
        Ok(Compare {
            key: c.key,
            target,
            op,
        })
    }

    fn txn_op(op: pb::KvTxnOp) -> Result<TxnOp, Status> {
        use pb::kv_txn_op::Op;
        match op.op {
            Some(Op::Put(pair)) => Ok(TxnOp::Put {
                key: pair.key,
                value: pair.value,
            }),
            Some(Op::Delete(key)) => Ok(TxnOp::Delete { key }),
            Some(Op::Get(key)) => Ok(TxnOp::Get { key }),
            None => Err(Status::invalid_argument(
                "an operation is a put, a delete or a get",
            )),
        }
    }

    pub(crate) fn kv_delete(req: pb::KvDeleteRequest) -> Result<Command, Status> {
        Ok(Command::KvDelete {
            key: req.key,
            expect_version: req.expect_version,
        })
    }

    pub(crate) fn kv_txn(req: pb::KvTxnRequest) -> Result<Command, Status> {
        let space = super::key_space(req.space)?;
        let compares = req.compares.into_iter();
        let compares = compares.map(|c| (c.key, c.expect_version)).collect();
        let puts = req.puts.into_iter().map(|p| (p.key, p.value)).collect();
        let deletes = req.deletes;
        Ok(match space {
            pb::KeySpace::Client => Command::KvTxn {
                compares,
                puts,
                deletes,
            },
            pb::KeySpace::Engine => Command::EngineTxn {
                compares,
                puts,
                deletes,
            },
        })
    }

    pub(crate) fn lease_acquire(req: pb::LeaseAcquireRequest) -> Result<Command, Status> {
        Ok(Command::LeaseAcquire {
            lease: super::resource(req.lease, "lease")?,
            holder: req.holder,
            slots: req.slots,
            ttl_ms: req.ttl_ms,
            wait_ms: req.wait_ms,
        })
    }

    pub(crate) fn lease_renew(req: pb::LeaseRenewRequest) -> Result<Command, Status> {
        Ok(Command::LeaseRenew {
            lease: super::resource(req.lease, "lease")?,
            holder: req.holder,
            ttl_ms: req.ttl_ms,
        })
    }

    pub(crate) fn lease_release(req: pb::LeaseReleaseRequest) -> Result<Command, Status> {
        Ok(Command::LeaseRelease {
            lease: super::resource(req.lease, "lease")?,
            holder: req.holder,
        })
    }

    pub(crate) fn counter_consume(req: pb::CounterConsumeRequest) -> Result<Command, Status> {
        Ok(Command::CounterConsume {
            counter: super::resource(req.counter, "counter")?,
            amount: req.amount,
            cap: req.cap,
            reset: super::reset(req.reset)?,
            timezone: req.timezone,
        })
    }

    pub(crate) fn ledger_append(req: pb::LedgerAppendRequest) -> Result<Command, Status> {
        Ok(Command::LedgerAppend {
            ledger: super::resource(req.ledger, "ledger")?,
            entry: req.entry,
            appended_by: req.appended_by,
            retain_ms: req.retain_ms,
        })
    }

    pub(crate) fn campaign(req: pb::CampaignRequest) -> Result<Command, Status> {
        Ok(Command::Campaign {
            group: req.group,
            candidate: req.candidate,
            endpoints: req.endpoints,
            ttl_ms: req.ttl_ms,
        })
    }

    pub(crate) fn proclaim(req: pb::ElectionTermRequest) -> Result<Command, Status> {
        Ok(Command::Proclaim {
            group: req.group,
            candidate: req.candidate,
            fence: req.fence,
            endpoints: req.endpoints,
        })
    }

    pub(crate) fn resign(req: pb::ElectionTermRequest) -> Result<Command, Status> {
        Ok(Command::Resign {
            group: req.group,
            candidate: req.candidate,
            fence: req.fence,
        })
    }

    pub(crate) fn election_renew(req: pb::ElectionTermRequest) -> Result<Command, Status> {
        Ok(Command::ElectionRenew {
            group: req.group,
            candidate: req.candidate,
            fence: req.fence,
            ttl_ms: req.ttl_ms,
        })
    }
}
