//! [`MemFabric`]: the board applied to a `BTreeMap` under a mutex, with a wall-clock stamp.
//! Same semantics as a cell (idempotency, fences, lease expiry at read), no Raft, no disk:
//! for engine tests.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use whip_board::access::Caller;
use whip_board::{BoardSettings, Command, MemTxn, Query, QueryResult, Request, Stamp};

use crate::*;

/// An in-memory fabric (one process). Its calls act as the operator, or as the agent
/// [`FabricClient::acting_for`] names.
pub struct MemFabric {
    state: Arc<Mutex<(MemTxn, u64, u64)>>,
    caller: Caller,
    /// The last applied index, sent after every apply ([`FabricClient::wait_change`]).
    applied: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for MemFabric {
    fn default() -> Self {
        MemFabric {
            state: Arc::default(),
            caller: Caller::Operator,
            applied: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl MemFabric {
    /// An empty fabric.
    pub fn new() -> Self {
        MemFabric::default()
    }

    /// Apply `command` as this fabric's caller (under idempotency key `key` unless empty).
    pub fn apply(&self, command: Command, key: String) -> FabricResult<Outcome> {
        self.apply_as(self.caller.clone(), command, key)
    }

    /// Apply `command` for `caller` (a test sets up what an agent would).
    pub fn apply_as(&self, caller: Caller, command: Command, key: String) -> FabricResult<Outcome> {
        let mut state = self.state.lock().expect("mem fabric lock");
        let (txn, index, time) = &mut *state;
        *index += 1;
        *time = (*time).max(wall_ms());
        let stamp = Stamp {
            index: *index,
            position: 0,
            time_ms: *time,
        };
        let request = Request::by(caller, (!key.is_empty()).then_some(key), command);
        let applied = whip_board::apply(txn, stamp, &request);
        self.applied.send_replace(*index);
        drop(state);
        // One cell: its follow-ups are carried out here and now, then acknowledged.
        for next in &applied.next {
            self.carry_out(next);
        }
        match applied.outcome {
            Outcome::Invalid { reason } => Err(FabricError::Invalid(reason)),
            Outcome::KeyReused { key } => {
                Err(FabricError::Invalid(whip_board::key_reused_reason(&key)))
            }
            outcome => Ok(outcome),
        }
    }

    /// Carry out follow-up `next` (as `whip_cell::follow` does on a cell) and acknowledge
    /// it; those its commands oblige are carried out by the applies that decide them.
    fn carry_out(&self, next: &whip_board::Next) {
        for page in 0..whip_cell::limits::FOLLOW_UP_COMMANDS_MAX {
            let command = next.follow_up.command();
            let key = format!("{}/{page}", next.key);
            let Ok(outcome) = self.apply_as(Caller::Server, command, key) else {
                return;
            };
            if next.follow_up.done_after(&outcome) {
                break;
            }
        }
        let done = Command::FollowUpDone { seq: next.seq };
        let _answered = self.apply_as(Caller::Server, done, format!("{}/done", next.key));
    }

    /// Answer `query` as the store's owner, or as the agent this fabric acts for.
    pub fn read(&self, query: Query) -> QueryResult {
        let state = self.state.lock().expect("mem fabric lock");
        let query = match &self.caller {
            Caller::Agent(_) => Query::By {
                caller: self.caller.clone(),
                query: Box::new(query),
            },
            _ => query,
        };
        whip_board::query(&state.0, wall_ms().max(state.2), &query)
    }
}

fn mem_work_answer(outcome: Outcome) -> FabricResult<WorkAnswer> {
    use whip_board::work::WorkRefusal;
    Ok(match outcome {
        Outcome::WorkAdmitted { entry, .. } => WorkAnswer::Admitted { id: entry.id },
        Outcome::WorkRefused {
            refusal: refusal @ WorkRefusal::Limit { limit, .. },
        } => WorkAnswer::Refused {
            limit: limit.code().into(),
            reason: refusal.to_string(),
        },
        Outcome::WorkRefused {
            refusal: WorkRefusal::UnknownEntry { .. },
        } => WorkAnswer::Gone,
        Outcome::WorkRenewed { signal, .. } => WorkAnswer::Renewed { signal },
        Outcome::WorkRevoked { .. } => WorkAnswer::Revoked,
        other => return Err(unexpected(other)),
    })
}

fn unexpected<T: std::fmt::Debug>(what: T) -> FabricError {
    FabricError::Unavailable(format!("unexpected answer {what:?}"))
}

/// One key's answer (a `KvGet` or an `EngineGet`).
fn entry_of(result: QueryResult) -> FabricResult<Option<KvEntry>> {
    match result {
        QueryResult::Kv(entry) => Ok(entry),
        other => Err(unexpected(other)),
    }
}

/// A scan's rows (a `KvRange` or an `EngineRange`).
fn rows_of(result: QueryResult) -> FabricResult<KvPage> {
    match result {
        QueryResult::KvRange(page) => Ok(page),
        other => Err(unexpected(other)),
    }
}

/// A transaction's answer (a `KvTxn` or an `EngineTxn`).
fn txn_of(outcome: Outcome) -> FabricResult<TxnResult> {
    match outcome {
        Outcome::KvTxnCommitted { fence } => Ok(TxnResult::Committed { fence }),
        Outcome::KvTxnFailed { key, current } => Ok(TxnResult::Failed { key, current }),
        other => Err(unexpected(other)),
    }
}

impl FabricClient for MemFabric {
    fn acting_for(&self, agent: &str) -> Self {
        MemFabric {
            state: self.state.clone(),
            caller: Caller::Agent(agent.to_string()),
            applied: self.applied.clone(),
        }
    }

    async fn engine_get(&self, key: Vec<u8>) -> FabricResult<Option<KvEntry>> {
        entry_of(self.read(Query::EngineGet { key }))
    }

    async fn wait_change(
        &self,
        _key: Vec<u8>,
        after: u64,
        timeout_ms: u64,
    ) -> FabricResult<Option<u64>> {
        let mut applied = self.applied.subscribe();
        let deadline = std::time::Duration::from_millis(timeout_ms);
        let moved = applied.wait_for(|index| after == 0 || *index > after);
        let _ = tokio::time::timeout(deadline, moved).await;
        let index = *applied.borrow();
        Ok(Some(index))
    }

    async fn engine_txn(&self, ops: TxnOps, key: String) -> FabricResult<TxnResult> {
        let (compares, puts, deletes) = (ops.compares, ops.puts, ops.deletes);
        let command = Command::EngineTxn {
            compares,
            puts,
            deletes,
        };
        txn_of(self.apply(command, key)?)
    }

    async fn engine_range(
        &self,
        prefix: Vec<u8>,
        after_key: Vec<u8>,
        limit: u32,
    ) -> FabricResult<KvPage> {
        rows_of(self.read(Query::EngineRange {
            prefix,
            after_key,
            limit,
        }))
    }

    async fn kv_get(&self, key: Vec<u8>) -> FabricResult<Option<KvEntry>> {
        entry_of(self.read(Query::KvGet { key }))
    }

    async fn kv_txn(&self, ops: TxnOps, key: String) -> FabricResult<TxnResult> {
        let (compares, puts, deletes) = (ops.compares, ops.puts, ops.deletes);
        let command = Command::KvTxn {
            compares,
            puts,
            deletes,
        };
        txn_of(self.apply(command, key)?)
    }

    async fn kv_range(
        &self,
        prefix: Vec<u8>,
        after_key: Vec<u8>,
        limit: u32,
    ) -> FabricResult<KvPage> {
        rows_of(self.read(Query::KvRange {
            prefix,
            after_key,
            limit,
        }))
    }

    async fn lease_acquire(&self, r: LeaseRequest, key: String) -> FabricResult<Outcome> {
        let command = Command::LeaseAcquire {
            lease: r.lease,
            holder: r.holder,
            slots: r.slots,
            ttl_ms: r.ttl_ms,
            wait_ms: r.wait_ms,
        };
        self.apply(command, key)
    }

    async fn lease_renew(
        &self,
        lease: ResourceId,
        holder: String,
        ttl_ms: u64,
        key: String,
    ) -> FabricResult<Outcome> {
        let command = Command::LeaseRenew {
            lease,
            holder,
            ttl_ms,
        };
        self.apply(command, key)
    }

    async fn lease_release(
        &self,
        lease: ResourceId,
        holder: String,
        key: String,
    ) -> FabricResult<Outcome> {
        self.apply(Command::LeaseRelease { lease, holder }, key)
    }

    async fn lease_release_all(&self, holder: String, key: String) -> FabricResult<Outcome> {
        self.apply(Command::LeaseReleaseAll { holder }, key)
    }

    async fn counter_consume(&self, r: ConsumeRequest, key: String) -> FabricResult<Outcome> {
        let command = Command::CounterConsume {
            counter: r.counter,
            amount: r.amount,
            cap: r.cap,
            reset: r.reset,
            timezone: r.timezone,
        };
        self.apply(command, key)
    }

    async fn ledger_append(&self, r: AppendRequest, key: String) -> FabricResult<Outcome> {
        let command = Command::LedgerAppend {
            ledger: r.ledger,
            entry: r.entry,
            appended_by: r.appended_by,
            retain_ms: r.retain_ms,
        };
        self.apply(command, key)
    }

    async fn lease_list(&self, prefix: String) -> FabricResult<Vec<LeaseView>> {
        match self.read(Query::LeaseList { prefix, limit: 0 }) {
            QueryResult::Leases(rows) => Ok(rows),
            other => Err(unexpected(other)),
        }
    }

    async fn counter_list(&self, prefix: String) -> FabricResult<Vec<CounterView>> {
        match self.read(Query::CounterList { prefix, limit: 0 }) {
            QueryResult::Counters(rows) => Ok(rows),
            other => Err(unexpected(other)),
        }
    }

    async fn ledger_list(
        &self,
        owner: String,
        name: String,
        partition: Option<String>,
        after_seq: u64,
        limit: u32,
    ) -> FabricResult<Vec<LedgerEntryView>> {
        let query = Query::LedgerList {
            owner,
            name,
            partition,
            after_seq,
            limit,
        };
        match self.read(query) {
            QueryResult::LedgerEntries(rows) => Ok(rows),
            other => Err(unexpected(other)),
        }
    }

    async fn team_ensure(&self, team: String) -> FabricResult<()> {
        let command = Command::TeamCreate {
            team,
            caller: MEM_CALLER.into(),
            parent: None,
            ancestors: Vec::new(),
            settings: BoardSettings::default(),
        };
        match self.apply(command, String::new())? {
            Outcome::TeamCreated { .. } => Ok(()),
            Outcome::BoardRefused { reason } => Err(FabricError::board_refused(&reason)),
            other => Err(unexpected(other)),
        }
    }

    async fn board_post(&self, team: String, body: Vec<u8>, key: String) -> FabricResult<String> {
        let command = Command::BoardPost {
            team,
            caller: MEM_CALLER.into(),
            body,
        };
        match self.apply(command, key)? {
            Outcome::TaskPosted { task_id, .. } => Ok(task_id),
            Outcome::BoardRefused { reason } => Err(FabricError::board_refused(&reason)),
            other => Err(unexpected(other)),
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
        let command = Command::BoardClaimTask {
            team,
            caller: MEM_CALLER.into(),
            worker,
            task_id,
            claim_ms,
        };
        board_answer(self.apply(command, key)?)
    }

    async fn board_settle(
        &self,
        team: String,
        task_id: String,
        fence: u64,
        settle: Settle,
        key: String,
    ) -> FabricResult<BoardAnswer> {
        let caller = MEM_CALLER.to_string();
        let command = match settle {
            Settle::Complete { result } => Command::BoardComplete {
                team,
                caller,
                task_id,
                fence,
                result,
            },
            Settle::Release => Command::BoardRelease {
                team,
                caller,
                task_id,
                fence,
            },
            Settle::Extend { by_ms } => Command::BoardExtend {
                team,
                caller,
                task_id,
                fence,
                extend_ms: by_ms,
            },
        };
        board_answer(self.apply(command, key)?)
    }

    async fn board_get(&self, team: String, task_id: String) -> FabricResult<Option<TaskView>> {
        match self.read(Query::BoardTask { team, task_id }) {
            QueryResult::Tasks(mut tasks) => Ok(tasks.pop()),
            other => Err(unexpected(other)),
        }
    }

    async fn board_list(
        &self,
        team: String,
        state: Option<TaskState>,
        limit: u32,
    ) -> FabricResult<Vec<TaskView>> {
        match self.read(Query::BoardList { team, state, limit }) {
            QueryResult::Tasks(tasks) => Ok(tasks),
            other => Err(unexpected(other)),
        }
    }

    async fn work_register(
        &self,
        kind: whip_board::work::WorkKind,
        parent: Option<String>,
        ttl_ms: u64,
        key: String,
    ) -> FabricResult<WorkAnswer> {
        let root = match &parent {
            Some(parent) => whip_board::work::root_of(parent).to_string(),
            None => whip_board::work::derived_root(&key),
        };
        let command = Command::WorkRegister {
            root,
            parent,
            kind,
            class: whip_board::work::DEFAULT_CLASS.into(),
            ttl_ms,
            owner: None,
            quota_retry: false,
        };
        mem_work_answer(self.apply(command, key)?)
    }

    async fn work_renew(&self, id: String, ttl_ms: u64, key: String) -> FabricResult<WorkAnswer> {
        mem_work_answer(self.apply(Command::WorkRenew { id, ttl_ms }, key)?)
    }

    async fn work_revoke(&self, id: String, key: String) -> FabricResult<WorkAnswer> {
        mem_work_answer(self.apply(Command::WorkRevoke { id }, key)?)
    }

    async fn mail_send(
        &self,
        to: whip_board::mail::Address,
        kind: whip_board::mail::MailType,
        body: whip_board::mail::MailBody,
        key: String,
    ) -> FabricResult<MailAnswer> {
        let send = Command::MailSend {
            to,
            kind,
            body,
            external: None,
        };
        match self.apply(send, key)? {
            Outcome::MailDelivered { id, trust, .. } => Ok(MailAnswer::Delivered { id, trust }),
            Outcome::MailRefused { refusal } => Ok(MailAnswer::Refused {
                reason: refusal.code().into(),
                message: refusal.to_string(),
            }),
            other => Err(unexpected(other)),
        }
    }

    async fn mail_inbox(
        &self,
        address: whip_board::mail::Address,
        after_seq: u64,
        limit: u32,
    ) -> FabricResult<Vec<whip_board::mail::MailView>> {
        let query = Query::MailInbox {
            address,
            after_seq,
            limit,
            quarantined: false,
        };
        match self.read(query) {
            QueryResult::Mail(mail) => Ok(mail),
            other => Err(unexpected(other)),
        }
    }

    async fn mail_ack(
        &self,
        address: whip_board::mail::Address,
        through_seq: u64,
        key: String,
    ) -> FabricResult<()> {
        let ack = Command::MailAck {
            address,
            through_seq,
        };
        match self.apply(ack, key)? {
            Outcome::MailAcked { .. } => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    async fn vote_open(
        &self,
        team: String,
        rules: whip_board::vote::Rules,
        key: String,
    ) -> FabricResult<VoteAnswer> {
        let caller = Caller::Agent(MEM_CALLER.into());
        match self.apply_as(caller, Command::VoteOpen { team, rules }, key)? {
            Outcome::VoteOpened {
                proposal,
                closes_at_ms,
                ..
            } => Ok(VoteAnswer::Opened {
                proposal,
                closes_at_ms,
            }),
            Outcome::VoteRefused { refusal } => Ok(VoteAnswer::Refused {
                reason: refusal.code().into(),
                message: refusal.to_string(),
            }),
            other => Err(unexpected(other)),
        }
    }

    async fn vote_show(
        &self,
        proposal: String,
    ) -> FabricResult<Option<whip_board::vote::ProposalView>> {
        match self.read(Query::VoteProposal { proposal }) {
            QueryResult::Proposal(view) => Ok(view.map(|v| *v)),
            other => Err(unexpected(other)),
        }
    }
}

/// The agent every board call of a [`MemFabric`] acts as (there is no authentication).
const MEM_CALLER: &str = "engine";

/// A board write's outcome as the engine sees it.
fn board_answer(outcome: Outcome) -> FabricResult<BoardAnswer> {
    Ok(match outcome {
        Outcome::TaskClaimed {
            task,
            fence,
            deadline_ms,
            ..
        } => BoardAnswer::Claimed {
            task: *task,
            fence,
            deadline_ms,
        },
        Outcome::TaskCompleted { .. } | Outcome::TaskReleased { .. } => {
            BoardAnswer::Settled { deadline_ms: 0 }
        }
        Outcome::TaskExtended { deadline_ms } => BoardAnswer::Settled { deadline_ms },
        Outcome::BoardRefused { reason } => BoardAnswer::refused(&reason),
        other => return Err(unexpected(other)),
    })
}
