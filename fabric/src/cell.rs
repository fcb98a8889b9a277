//! [`FabricClient`] for one cell through its typed gRPC client: pb answers are turned back
//! into the board's outcomes and views.

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::*;

fn error(e: CellError) -> FabricError {
    match e {
        CellError::InvalidArgument(m) => FabricError::Invalid(m),
        CellError::PermissionDenied(m) => FabricError::PermissionDenied(m),
        CellError::Refused { code, message } => FabricError::Refused { code, message },
        CellError::Unauthenticated(m) => {
            FabricError::PermissionDenied(format!("not authenticated: {m}"))
        }
        other => FabricError::Unavailable(other.to_string()),
    }
}

fn resource_pb(id: ResourceId) -> Option<pb::ResourceId> {
    Some(pb::ResourceId {
        owner: id.owner,
        name: id.name,
        key: id.key,
    })
}

fn resource(id: Option<pb::ResourceId>) -> ResourceId {
    let id = id.unwrap_or_default();
    ResourceId {
        owner: id.owner,
        name: id.name,
        key: id.key,
    }
}

fn holder(h: pb::LeaseHolder) -> whip_board::LeaseHolder {
    whip_board::LeaseHolder {
        holder: h.holder,
        fence: h.fence,
        expires_at_ms: h.expires_at_ms,
    }
}

fn work_answer(r: pb::WorkResponse) -> FabricResult<WorkAnswer> {
    Ok(match Code::try_from(r.code) {
        Ok(Code::WorkAdmitted) => WorkAnswer::Admitted {
            id: r.entry.map(|e| e.id).ok_or_else(|| code_error(r.code))?,
        },
        Ok(Code::WorkRefused) => WorkAnswer::Refused {
            limit: r.limit,
            reason: r.reason,
        },
        Ok(Code::WorkRenewed) => WorkAnswer::Renewed {
            signal: whip_board::work::Signal::parse(&r.signal)
                .ok_or_else(|| FabricError::Unavailable(format!("signal {:?}", r.signal)))?,
        },
        Ok(Code::WorkRevoked) => WorkAnswer::Revoked,
        _ => return Err(code_error(r.code)),
    })
}

fn code_error(code: i32) -> FabricError {
    FabricError::Unavailable(format!("unexpected outcome code {code}"))
}

fn lease_outcome(r: pb::LeaseResponse) -> FabricResult<Outcome> {
    Ok(match Code::try_from(r.code) {
        Ok(Code::LeaseHeld) => Outcome::LeaseHeld {
            fence: r.fence,
            expires_at_ms: r.expires_at_ms,
            reentered: r.reentered,
        },
        Ok(Code::LeaseContended) => Outcome::LeaseContended {
            holders: r.holders.into_iter().map(holder).collect(),
        },
        Ok(Code::LeaseWaiting) => Outcome::LeaseWaiting {
            position: r.position,
            wait_until_ms: r.wait_until_ms,
        },
        Ok(Code::LeaseRenewed) => Outcome::LeaseRenewed {
            fence: r.fence,
            expires_at_ms: r.expires_at_ms,
        },
        Ok(Code::LeaseReleased) => Outcome::LeaseReleased,
        Ok(Code::LeaseNotHeld) => Outcome::LeaseNotHeld,
        Ok(Code::LeaseReleasedAll) => Outcome::LeaseReleasedAll {
            released: r.released,
        },
        _ => return Err(code_error(r.code)),
    })
}

fn reset_pb(reset: Reset) -> pb::Reset {
    match reset {
        Reset::Hourly => pb::Reset::Hourly,
        Reset::Daily => pb::Reset::Daily,
        Reset::Weekly => pb::Reset::Weekly,
        Reset::Monthly => pb::Reset::Monthly,
    }
}

async fn get_in(
    client: &CellClient,
    key: Vec<u8>,
    space: pb::KeySpace,
) -> FabricResult<Option<KvEntry>> {
    let request = pb::KvGetRequest {
        key,
        space: space.into(),
    };
    let r = CellClient::kv_get(client, request).await.map_err(error)?;
    Ok(r.found.then_some(KvEntry {
        value: r.value,
        version: r.version,
    }))
}

async fn txn_in(
    client: &CellClient,
    ops: TxnOps,
    key: String,
    space: pb::KeySpace,
) -> FabricResult<TxnResult> {
    let request = pb::KvTxnRequest {
        space: space.into(),
        compares: ops
            .compares
            .into_iter()
            .map(|(key, expect_version)| pb::KvCompare {
                key,
                expect_version,
            })
            .collect(),
        puts: ops
            .puts
            .into_iter()
            .map(|(key, value)| pb::KvPair { key, value })
            .collect(),
        deletes: ops.deletes,
        idempotency_key: key,
    };
    let r = CellClient::kv_txn(client, request).await.map_err(error)?;
    match Code::try_from(r.code) {
        Ok(Code::KvTxnCommitted) => Ok(TxnResult::Committed { fence: r.fence }),
        Ok(Code::KvTxnFailed) => Ok(TxnResult::Failed {
            key: r.failed_key,
            current: r.current_version,
        }),
        _ => Err(code_error(r.code)),
    }
}

async fn range_in(
    client: &CellClient,
    (prefix, after_key): (Vec<u8>, Vec<u8>),
    limit: u32,
    space: pb::KeySpace,
) -> FabricResult<KvPage> {
    let request = pb::KvRangeRequest {
        prefix,
        after_key,
        limit,
        space: space.into(),
    };
    let r = CellClient::kv_range(client, request).await.map_err(error)?;
    let rows = r
        .entries
        .into_iter()
        .map(|e| {
            let entry = KvEntry {
                value: e.value,
                version: e.version,
            };
            (e.key, entry)
        })
        .collect();
    let resume_after = (!r.resume_after.is_empty()).then_some(r.resume_after);
    Ok(KvPage { rows, resume_after })
}

impl FabricClient for CellClient {
    fn acting_for(&self, agent: &str) -> Self {
        CellClient::acting_for(self, agent)
    }

    async fn engine_get(&self, key: Vec<u8>) -> FabricResult<Option<KvEntry>> {
        get_in(self, key, pb::KeySpace::Engine).await
    }

    async fn wait_change(
        &self,
        key: Vec<u8>,
        after: u64,
        timeout_ms: u64,
    ) -> FabricResult<Option<u64>> {
        let request = pb::WaitAppliedRequest {
            subject: Some(pb::wait_applied_request::Subject::Key(key)),
            after_index: after,
            timeout_ms,
        };
        let r = CellClient::wait_applied(self, request)
            .await
            .map_err(error)?;
        Ok(r.hosted.then_some(r.applied_index))
    }

    async fn engine_txn(&self, ops: TxnOps, key: String) -> FabricResult<TxnResult> {
        txn_in(self, ops, key, pb::KeySpace::Engine).await
    }

    async fn engine_range(
        &self,
        prefix: Vec<u8>,
        after_key: Vec<u8>,
        limit: u32,
    ) -> FabricResult<KvPage> {
        range_in(self, (prefix, after_key), limit, pb::KeySpace::Engine).await
    }

    async fn kv_get(&self, key: Vec<u8>) -> FabricResult<Option<KvEntry>> {
        get_in(self, key, pb::KeySpace::Client).await
    }

    async fn kv_txn(&self, ops: TxnOps, key: String) -> FabricResult<TxnResult> {
        txn_in(self, ops, key, pb::KeySpace::Client).await
    }

    async fn kv_range(
        &self,
        prefix: Vec<u8>,
        after_key: Vec<u8>,
        limit: u32,
    ) -> FabricResult<KvPage> {
        range_in(self, (prefix, after_key), limit, pb::KeySpace::Client).await
    }

    async fn lease_acquire(&self, r: LeaseRequest, key: String) -> FabricResult<Outcome> {
        let request = pb::LeaseAcquireRequest {
            lease: resource_pb(r.lease),
            holder: r.holder,
            slots: r.slots,
            ttl_ms: r.ttl_ms,
            wait_ms: r.wait_ms,
            idempotency_key: key,
            fail_open: false,
        };
        lease_outcome(
            CellClient::lease_acquire(self, request)
                .await
                .map_err(error)?,
        )
    }

    async fn lease_renew(
        &self,
        lease: ResourceId,
        holder: String,
        ttl_ms: u64,
        key: String,
    ) -> FabricResult<Outcome> {
        let request = pb::LeaseRenewRequest {
            lease: resource_pb(lease),
            holder,
            ttl_ms,
            idempotency_key: key,
        };
        lease_outcome(
            CellClient::lease_renew(self, request)
                .await
                .map_err(error)?,
        )
    }

    async fn lease_release(
        &self,
        lease: ResourceId,
        holder: String,
        key: String,
    ) -> FabricResult<Outcome> {
        let request = pb::LeaseReleaseRequest {
            lease: resource_pb(lease),
            holder,
            idempotency_key: key,
        };
        lease_outcome(
            CellClient::lease_release(self, request)
                .await
                .map_err(error)?,
        )
    }

    async fn lease_release_all(&self, holder: String, key: String) -> FabricResult<Outcome> {
        let request = pb::LeaseReleaseAllRequest {
            holder,
            idempotency_key: key,
        };
        let r = CellClient::lease_release_all(self, request)
            .await
            .map_err(error)?;
        lease_outcome(r)
    }

    async fn counter_consume(&self, r: ConsumeRequest, key: String) -> FabricResult<Outcome> {
        let request = pb::CounterConsumeRequest {
            counter: resource_pb(r.counter),
            amount: r.amount,
            cap: r.cap,
            reset: reset_pb(r.reset) as i32,
            timezone: r.timezone,
            idempotency_key: key,
        };
        let r = CellClient::counter_consume(self, request)
            .await
            .map_err(error)?;
        Ok(match Code::try_from(r.code) {
            Ok(Code::CounterOk) => Outcome::CounterOk {
                consumed: r.consumed,
                remaining: r.remaining,
                period: r.period,
            },
            Ok(Code::CounterOver) => Outcome::CounterOver {
                consumed: r.consumed,
                remaining: r.remaining,
                period: r.period,
            },
            _ => return Err(code_error(r.code)),
        })
    }

    async fn ledger_append(&self, r: AppendRequest, key: String) -> FabricResult<Outcome> {
        let request = pb::LedgerAppendRequest {
            ledger: resource_pb(r.ledger),
            entry: r.entry,
            appended_by: r.appended_by,
            retain_ms: r.retain_ms,
            idempotency_key: key,
        };
        let r = CellClient::ledger_append(self, request)
            .await
            .map_err(error)?;
        Ok(Outcome::LedgerAppended { seq: r.seq })
    }

    async fn lease_list(&self, prefix: String) -> FabricResult<Vec<LeaseView>> {
        let request = pb::LeaseListRequest { prefix, limit: 0 };
        let r = CellClient::lease_list(self, request).await.map_err(error)?;
        Ok(r.leases
            .into_iter()
            .map(|v| LeaseView {
                lease: resource(v.lease),
                slots: v.slots,
                holders: v.holders.into_iter().map(holder).collect(),
                waiters: v
                    .waiters
                    .into_iter()
                    .map(|w| (w.holder, w.wait_until_ms))
                    .collect(),
            })
            .collect())
    }

    async fn counter_list(&self, prefix: String) -> FabricResult<Vec<CounterView>> {
        let request = pb::CounterListRequest { prefix, limit: 0 };
        let r = CellClient::counter_list(self, request)
            .await
            .map_err(error)?;
        Ok(r.counters
            .into_iter()
            .map(|v| CounterView {
                counter: resource(v.counter),
                consumed: v.consumed,
                cap: v.cap,
                period: v.period,
            })
            .collect())
    }

    async fn ledger_list(
        &self,
        owner: String,
        name: String,
        partition: Option<String>,
        after_seq: u64,
        limit: u32,
    ) -> FabricResult<Vec<LedgerEntryView>> {
        let request = pb::LedgerListRequest {
            owner,
            name,
            partition,
            after_seq,
            limit,
        };
        let r = CellClient::ledger_list(self, request)
            .await
            .map_err(error)?;
        Ok(r.entries
            .into_iter()
            .map(|e| LedgerEntryView {
                ledger: resource(e.ledger),
                seq: e.seq,
                entry: e.entry,
                appended_by: e.appended_by,
                at_ms: e.at_ms,
            })
            .collect())
    }

    async fn team_ensure(&self, team: String) -> FabricResult<()> {
        let request = pb::TeamCreateRequest {
            team,
            ..Default::default()
        };
        let r = CellClient::team_create(self, request)
            .await
            .map_err(error)?;
        match Code::try_from(r.code) {
            Ok(Code::TeamCreated) => Ok(()),
            _ => Err(FabricError::refused_in_band(&r.refusal, r.message)),
        }
    }

    async fn board_post(&self, team: String, body: Vec<u8>, key: String) -> FabricResult<String> {
        let request = pb::BoardPostRequest {
            team,
            body,
            idempotency_key: key,
            ..Default::default()
        };
        let r = CellClient::board_post(self, request).await.map_err(error)?;
        match Code::try_from(r.code) {
            Ok(Code::TaskPosted) => Ok(r.task_id),
            _ => Err(FabricError::refused_in_band(&r.refusal, r.message)),
        }
    }

    async fn board_claim_task(
        &self,
        team: String,
        task_id: String,
        worker: String,
        claim_ms: u64,
        key: String,
    ) -> FabricResult<BoardAnswer> {
        let request = pb::BoardClaimRequest {
            team,
            worker,
            idempotency_key: key,
            task_id,
            claim_ms,
            ..Default::default()
        };
        let r = CellClient::board_claim(self, request)
            .await
            .map_err(error)?;
        board_answer(r)
    }

    async fn board_settle(
        &self,
        team: String,
        task_id: String,
        fence: u64,
        settle: Settle,
        key: String,
    ) -> FabricResult<BoardAnswer> {
        let mut request = pb::BoardTaskRequest {
            team,
            task_id,
            fence,
            idempotency_key: key,
            ..Default::default()
        };
        let r = match settle {
            Settle::Complete { result } => {
                request.result = result;
                CellClient::board_complete(self, request).await
            }
            Settle::Release => CellClient::board_release(self, request).await,
            Settle::Extend { by_ms } => {
                request.extend_ms = by_ms;
                CellClient::board_extend(self, request).await
            }
        };
        board_answer(r.map_err(error)?)
    }

    async fn board_get(&self, team: String, task_id: String) -> FabricResult<Option<TaskView>> {
        let request = pb::BoardGetRequest { team, task_id };
        let r = CellClient::board_get(self, request).await.map_err(error)?;
        r.tasks.into_iter().next().map(task_view).transpose()
    }

    async fn board_list(
        &self,
        team: String,
        state: Option<TaskState>,
        limit: u32,
    ) -> FabricResult<Vec<TaskView>> {
        let request = pb::BoardListRequest {
            team,
            state: state.map(|s| s.to_string()).unwrap_or_default(),
            limit,
        };
        let r = CellClient::board_list(self, request).await.map_err(error)?;
        r.tasks.into_iter().map(task_view).collect()
    }

    async fn work_register(
        &self,
        kind: whip_board::work::WorkKind,
        parent: Option<String>,
        ttl_ms: u64,
        key: String,
    ) -> FabricResult<WorkAnswer> {
        let request = pb::WorkRegisterRequest {
            kind: kind.code().into(),
            parent: parent.unwrap_or_default(),
            ttl_ms,
            idempotency_key: key,
            ..Default::default()
        };
        let r = CellClient::work_register(self, request)
            .await
            .map_err(error)?;
        work_answer(r)
    }

    async fn work_renew(&self, id: String, ttl_ms: u64, key: String) -> FabricResult<WorkAnswer> {
        let request = pb::WorkRenewRequest {
            id,
            ttl_ms,
            idempotency_key: key,
        };
        match CellClient::work_renew(self, request).await {
            Err(CellError::NotFound(_)) => Ok(WorkAnswer::Gone),
            answer => work_answer(answer.map_err(error)?),
        }
    }

    async fn work_revoke(&self, id: String, key: String) -> FabricResult<WorkAnswer> {
        let request = pb::WorkRevokeRequest {
            id,
            idempotency_key: key,
        };
        match CellClient::work_revoke(self, request).await {
            Err(CellError::NotFound(_)) => Ok(WorkAnswer::Gone),
            answer => work_answer(answer.map_err(error)?),
        }
    }

    async fn mail_send(
        &self,
        to: whip_board::mail::Address,
        kind: whip_board::mail::MailType,
        body: whip_board::mail::MailBody,
        key: String,
    ) -> FabricResult<MailAnswer> {
        let request = pb::MailSendRequest {
            to: to.code(),
            r#type: whip_cell::mail_wire::mail_type_pb(kind).into(),
            text: body.text,
            payload: body.payload,
            in_reply_to: body.in_reply_to,
            thread: body.conversation,
            idempotency_key: key,
            reply_to: body.reply_to.map(|a| a.code()),
        };
        let r = CellClient::mail_send(self, request).await.map_err(error)?;
        match Code::try_from(r.code) {
            Ok(Code::MailDelivered) => Ok(MailAnswer::Delivered {
                id: r.id,
                trust: whip_board::mail::Trust::parse(&r.trust).ok_or_else(|| {
                    FabricError::Unavailable(format!("the server answered trust {:?}", r.trust))
                })?,
            }),
            Ok(Code::MailRefused) => Ok(MailAnswer::Refused {
                reason: r.reason,
                message: r.message,
            }),
            _ => Err(code_error(r.code)),
        }
    }

    async fn mail_inbox(
        &self,
        address: whip_board::mail::Address,
        after_seq: u64,
        limit: u32,
    ) -> FabricResult<Vec<whip_board::mail::MailView>> {
        let request = pb::MailInboxRequest {
            address: address.code(),
            after_seq,
            limit,
            quarantined: false,
        };
        let r = CellClient::mail_inbox(self, request).await.map_err(error)?;
        r.messages
            .into_iter()
            .map(|m| whip_cell::mail_wire::message_view(m).map_err(FabricError::Unavailable))
            .collect()
    }

    async fn mail_ack(
        &self,
        address: whip_board::mail::Address,
        through_seq: u64,
        key: String,
    ) -> FabricResult<()> {
        let request = pb::MailAckRequest {
            address: address.code(),
            through_seq,
            idempotency_key: key,
        };
        let r = CellClient::mail_ack(self, request).await.map_err(error)?;
        match r.outcome.as_str() {
            "acked" => Ok(()),
            _ => Err(FabricError::Invalid(format!("{}: {}", r.reason, r.message))),
        }
    }

    async fn vote_open(
        &self,
        team: String,
        rules: whip_board::vote::Rules,
        key: String,
    ) -> FabricResult<VoteAnswer> {
        let request = vote_request(team, rules, key);
        let r = CellClient::vote_open(self, request).await.map_err(error)?;
        Ok(match Code::try_from(r.code) {
            Ok(Code::VoteOpened) => VoteAnswer::Opened {
                proposal: r.proposal,
                closes_at_ms: r.closes_at_ms,
            },
            Ok(Code::VoteRefused) => VoteAnswer::Refused {
                reason: r.reason,
                message: r.message,
            },
            _ => return Err(code_error(r.code)),
        })
    }

    async fn vote_show(
        &self,
        proposal: String,
    ) -> FabricResult<Option<whip_board::vote::ProposalView>> {
        let request = pb::VoteShowRequest { proposal };
        let r = CellClient::vote_show(self, request).await.map_err(error)?;
        r.proposal
            .map(|p| whip_cell::vote_wire::proposal_view(p).map_err(FabricError::Unavailable))
            .transpose()
    }
}

/// The wire's names of a proposal's rules.
fn vote_request(team: String, rules: whip_board::vote::Rules, key: String) -> pb::VoteOpenRequest {
    pb::VoteOpenRequest {
        team,
        title: rules.title,
        options: rules.options,
        method: rules.method.code().into(),
        electorate: rules.electorate.iter().map(|r| r.code().into()).collect(),
        quorum: rules.quorum.to_string(),
        threshold: rules.threshold.code(),
        duration_ms: rules.duration_ms,
        until_all_voted: rules.until_all_voted,
        idempotency_key: key,
    }
}

fn board_answer(r: pb::BoardResponse) -> FabricResult<BoardAnswer> {
    Ok(match Code::try_from(r.code) {
        Ok(Code::TaskClaimed) => {
            let task = r.task.ok_or_else(|| code_error(r.code))?;
            BoardAnswer::Claimed {
                task: task_view(task)?,
                fence: r.fence,
                deadline_ms: r.deadline_ms,
            }
        }
        Ok(Code::TaskCompleted | Code::TaskReleased | Code::TaskExtended) => BoardAnswer::Settled {
            deadline_ms: r.deadline_ms,
        },
        Ok(Code::BoardRefused) => BoardAnswer::Refused {
            reason: r.refusal,
            message: r.message,
        },
        _ => return Err(code_error(r.code)),
    })
}

fn task_view(t: pb::Task) -> FabricResult<TaskView> {
    let unreadable = |e: String| FabricError::Unavailable(format!("task {}: {e}", t.id));
    Ok(TaskView {
        tier: t.tier.parse().map_err(unreadable)?,
        state: t.state.parse().map_err(unreadable)?,
        id: t.id,
        team: t.team,
        body: t.body,
        delivery_count: t.delivery_count,
        worker: t.worker,
        fence: t.fence,
        deadline_ms: t.deadline_ms,
        posted_ms: t.posted_ms,
        failures: t
            .failures
            .into_iter()
            .map(|f| whip_board::Failure {
                delivery: f.delivery,
                worker: f.worker,
                error: f.error,
                at_ms: f.at_ms,
            })
            .collect(),
        result: t.result,
        spill_after_ms: 0,
    })
}
