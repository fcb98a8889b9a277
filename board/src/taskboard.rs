//! Task boards: teams post tasks, workers claim each delivery exactly once, and a task
//! that poisons every worker is dead-lettered.
//!
//! Tiers. A task is posted to its team's local board (there is no way to post above
//! local). A local task that was never claimed spills after the team's `spill_after_ms`
//! to this cell's cell-tier board, keeping its id and origin team; a claimed task never
//! spills. A task is visible only at its current tier: a claim takes the oldest ready task
//! of the team's board, and only when that is empty the oldest of the cell tier that the
//! claimant's lineage reaches: a spilled task stays its origin team's, seen and claimed only
//! by members of that team or of a team above it (the seed: access is scoped by lineage).
//! The fabric tier is filled by a later cross-cell handoff and is not stored here.
//!
//! Claims. One claim passes two gates in one apply, and both are recorded: the claim
//! record of delivery `n` (written once; a second claimant of the same delivery is a bug
//! and panics) and the lock on the task (the claim's fence, the stamp's fence, and its
//! deadline, `reclaim_ms` later, in the deadline index). Complete, fail and extend must
//! present the live lock's fence: a preempted worker finishing late is refused and
//! overwrites nothing. A claim whose deadline is at or before the stamp is not held, even
//! before the tick: it is refused as expired. Redelivery itself happens at the `Tick` of
//! the deadline (the leader proposes one when a deadline is due); until then reads still
//! show the task claimed, with its passed `deadline_ms`.
//!
//! A worker's loop. Complete-and-claim completes one held task and claims the next in one
//! apply; a prefetching claim ([`claim_many`]) completes every held claim it presents (all
//! checked before any changes: all or none) and claims up to `CLAIM_PREFETCH_MAX` tasks,
//! the `k`-th under the command's `k`-th fence (`Stamp::nth_fence`), each with its own
//! deadline in the deadline index, so each lapses and is redelivered on its own.
//!
//! Failures. A failed or lapsed delivery is appended to the task's failure metadata and the
//! task is ready again at its tier, keeping its place in post order, or dead-lettered once
//! its deliveries reach the delivery limit; dead-lettering notifies the origin team's
//! supervisor by mailbox. A redrive makes a dead task ready with its delivery count reset
//! (its failures stay). Done tasks keep their result for `limits::TASK_DONE_RETAIN_MS`,
//! then a tick prunes them; the board's `done` count keeps counting them.
//!
//! Rows. Local tasks, their ready index and claim records are keyed by team and move with
//! the team's range; cell-tier tasks, their ready index (in spill order), claim records
//! and the cell board's head belong to the cell and stay when a team moves. Task ids are
//! `{team}-{seq}`: the sequence has no `-`, so the id alone names the origin team.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::deadline::{self, Item};
use crate::keys::{self, CELL_BOARD, CELL_CLAIM, CELL_READY, CELL_TASK, CLAIM, READY, TASK};
use crate::limits::{
    CELL_CLAIM_SCAN_MAX, CELL_TASKS_MAX, LIST_ROWS_MAX, TASK_DONE_RETAIN_MS, TASK_FAILURES_MAX,
    TEAM_TASKS_MAX,
};
use crate::mailbox::{self, Outgoing};
use crate::query::{BoardStatsView, MessageKind};
use crate::team::{self, Counts};
use crate::txn::Txn;
use crate::types::{
    BoardRefusal, BoardSettings, Claimed, Completion, Failure, Outcome, Stamp, TaskState, TaskView,
    Tier,
};

/// One task as stored (at the key of its tier).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Task {
    /// The origin team.
    team: String,
    /// Its sequence in the origin team.
    seq: u64,
    tier: Tier,
    state: TaskState,
    #[serde(with = "serde_bytes")]
    body: Vec<u8>,
    /// The origin team's settings at post time (the team may be elsewhere later).
    settings: BoardSettings,
    delivery_count: u32,
    worker: Option<String>,
    fence: u64,
    deadline_ms: u64,
    posted_ms: u64,
    /// When a never-claimed local task spills (0 = not scheduled).
    spill_at_ms: u64,
    /// Its place in the cell tier's ready order (0 while local).
    spill_seq: u64,
    failures: Vec<Failure>,
    #[serde(with = "serde_bytes")]
    result: Vec<u8>,
    /// When a done task is pruned.
    prune_at_ms: u64,
}

/// The first gate: who claimed one delivery of a task.
#[derive(Serialize, Deserialize)]
struct ClaimRecord {
    worker: String,
    caller: String,
    fence: u64,
    at_ms: u64,
}

/// The cell tier's head: spill order and counts.
#[derive(Default, Serialize, Deserialize)]
struct CellBoard {
    last_spill_seq: u64,
    counts: Counts,
}

pub use crate::access::{
    FABRIC_QUEUE_PREFIX, RESERVED_TEAM_PREFIX, TRACKER_TEAM_PREFIX, fabric_queue_team,
    has_fabric_queue, is_reserved_team, is_tracker_team,
};

/// The tier a task shows: local rows of a fabric queue's team are the fabric tier.
fn shown_tier(team: &str, tier: Tier) -> Tier {
    if tier == Tier::Local && team.starts_with(FABRIC_QUEUE_PREFIX) {
        Tier::Fabric
    } else {
        tier
    }
}

fn task_id(team: &str, seq: u64) -> String {
    format!("{team}-{seq}")
}

/// The origin team and sequence of a task id; `None` unless it is exactly `{team}-{seq}`.
fn parse_id(task_id: &str) -> Option<(&str, u64)> {
    let (team, seq) = task_id.rsplit_once('-')?;
    let parsed: u64 = seq.parse().ok()?;
    (!team.is_empty() && seq == parsed.to_string()).then_some((team, parsed))
}

/// The task and claim families of a tier.
fn families(tier: Tier) -> (u8, u8) {
    match tier {
        Tier::Local => (TASK, CLAIM),
        Tier::Cell => (CELL_TASK, CELL_CLAIM),
        Tier::Fabric => panic!("fabric-tier tasks are not stored on a cell"),
    }
}

/// The value of a ready index entry (the key says everything).
fn marker() -> Vec<u8> {
    encode(&())
}

/// The origin team and sequence of a cell-tier ready index key.
fn cell_ready_task(key: &[u8]) -> (String, u64) {
    let (parts, _) = keys::split_first(&key[9..], 1).expect("cell ready key is well formed");
    let origin = String::from_utf8(parts[0].clone()).expect("team is utf-8");
    (origin, tail_u64(key))
}

fn tail_u64(key: &[u8]) -> u64 {
    let bytes: [u8; 8] = key[key.len() - 8..]
        .try_into()
        .expect("key ends with a u64");
    u64::from_be_bytes(bytes)
}

impl Task {
    fn id(&self) -> String {
        task_id(&self.team, self.seq)
    }

    fn key(&self) -> Vec<u8> {
        keys::task(families(self.tier).0, &self.team, self.seq)
    }

    fn claim_key(&self, delivery: u32) -> Vec<u8> {
        keys::claim(families(self.tier).1, &self.team, self.seq, delivery)
    }

    fn ready_key(&self) -> Vec<u8> {
        match self.tier {
            Tier::Local => keys::task(READY, &self.team, self.seq),
            _ => keys::cell_ready(self.spill_seq, &self.team, self.seq),
        }
    }

    fn claim_item(&self) -> Item {
        Item::TaskClaim {
            team: self.team.clone(),
            seq: self.seq,
            tier: self.tier,
        }
    }

    fn spill_item(&self) -> Item {
        Item::TaskSpill {
            team: self.team.clone(),
            seq: self.seq,
        }
    }

    fn done_item(&self) -> Item {
        Item::TaskDone {
            team: self.team.clone(),
            seq: self.seq,
            tier: self.tier,
        }
    }

    fn view(&self) -> TaskView {
        TaskView {
            id: self.id(),
            team: self.team.clone(),
            tier: shown_tier(&self.team, self.tier),
            state: self.state,
            body: self.body.clone(),
            delivery_count: self.delivery_count,
            worker: self.worker.clone(),
            fence: self.fence,
            deadline_ms: self.deadline_ms,
            posted_ms: self.posted_ms,
            failures: self.failures.clone(),
            result: self.result.clone(),
            spill_after_ms: self.settings.spill_after_ms,
        }
    }
}

fn load(txn: &impl Txn, tier: Tier, team: &str, seq: u64) -> Option<Task> {
    let key = keys::task(families(tier).0, team, seq);
    txn.get(&key).map(|bytes| decode(&bytes))
}

/// A task a tick may touch: a local one only while its team's record is here too.
fn load_live(txn: &impl Txn, tier: Tier, team: &str, seq: u64) -> Option<Task> {
    if tier == Tier::Local && team::load(txn, team).is_none() {
        return None;
    }
    load(txn, tier, team, seq)
}

fn store(txn: &mut impl Txn, task: &Task) {
    txn.put(&task.key(), &encode(task));
}

fn cell_board(txn: &impl Txn) -> CellBoard {
    txn.get(&[CELL_BOARD])
        .map_or_else(CellBoard::default, |bytes| decode(&bytes))
}

/// Move `task` from state `from` to `to` in the counts of its board (its team's record
/// for a local task, the cell board's head for a cell-tier one).
fn recount(txn: &mut impl Txn, task: &Task, from: Option<TaskState>, to: Option<TaskState>) {
    if task.tier == Tier::Local {
        let mut record = team::load(txn, &task.team).expect("a local task's team is here");
        record.counts.shift(from, to);
        team::store(txn, &task.team, &record);
    } else {
        let mut cell = cell_board(txn);
        cell.counts.shift(from, to);
        txn.put(&[CELL_BOARD], &encode(&cell));
    }
}

fn refused(reason: BoardRefusal) -> Outcome {
    Outcome::BoardRefused { reason }
}

/// Put `task` in its board's ready order; a never-claimed local task is scheduled to
/// spill when its team spills.
fn make_ready(txn: &mut impl Txn, now_ms: u64, task: &mut Task) {
    task.state = TaskState::Ready;
    task.worker = None;
    txn.put(&task.ready_key(), &marker());
    let spills = task.tier == Tier::Local && task.delivery_count == 0;
    if spills && task.settings.spill_after_ms > 0 {
        task.spill_at_ms = now_ms.saturating_add(task.settings.spill_after_ms);
        deadline::insert(txn, task.spill_at_ms, &task.spill_item());
    }
}

/// Post `body` to the team's local board.
/// Posts reach a local board only: a fabric queue is filled by spilling.
fn local_board(team_name: &str) -> Result<(), Outcome> {
    match team_name.starts_with(FABRIC_QUEUE_PREFIX) {
        true => Err(refused(BoardRefusal::NotLocal {
            team: team_name.to_string(),
        })),
        false => Ok(()),
    }
}

pub(crate) fn post(
    txn: &mut impl Txn,
    now_ms: u64,
    team_name: &str,
    caller: &str,
    body: &[u8],
) -> Outcome {
    if let Err(refusal) = local_board(team_name) {
        return refusal;
    }
    let mut record = match team::member(txn, team_name, caller) {
        Ok(record) => record,
        Err(refusal) => return refusal,
    };
    let settings = record.settings;
    if body.len() > settings.task_bytes_max as usize {
        let reason = format!(
            "body is {} bytes, limit is {}",
            body.len(),
            settings.task_bytes_max
        );
        return Outcome::Invalid { reason };
    }
    let open = record.counts.open();
    if open >= TEAM_TASKS_MAX {
        return refused(BoardRefusal::BoardFull {
            open,
            open_max: TEAM_TASKS_MAX,
        });
    }
    record.last_seq += 1;
    team::store(txn, team_name, &record);
    let mut task = Task {
        team: team_name.to_string(),
        seq: record.last_seq,
        tier: Tier::Local,
        state: TaskState::Ready,
        body: body.to_vec(),
        settings,
        delivery_count: 0,
        worker: None,
        fence: 0,
        deadline_ms: 0,
        posted_ms: now_ms,
        spill_at_ms: 0,
        spill_seq: 0,
        failures: Vec::new(),
        result: Vec::new(),
        prune_at_ms: 0,
    };
    make_ready(txn, now_ms, &mut task);
    store(txn, &task);
    recount(txn, &task, None, Some(TaskState::Ready));
    Outcome::TaskPosted {
        task_id: task.id(),
        tier: Tier::Local,
    }
}

fn oldest_local(txn: &impl Txn, team_name: &str) -> Option<Task> {
    oldest_locals(txn, team_name, 1).pop()
}

/// The `n` oldest ready tasks of the team's board, oldest first (one scan of its ready
/// index: a prefetch takes them in this order, and taking one adds no ready task).
fn oldest_locals(txn: &impl Txn, team_name: &str, n: usize) -> Vec<Task> {
    let start = keys::named(READY, team_name);
    let rows = txn.scan(&start, &keys::prefix_end(&start), n);
    rows.into_iter()
        .map(|(key, _)| {
            let task = load(txn, Tier::Local, team_name, tail_u64(&key));
            task.expect("a ready index entry has its task")
        })
        .collect()
}

/// Whether `agent` is in the lineage of team `origin`: a member of it or of a team above
/// it. A spilled task stays its origin's: only its lineage sees or claims it.
pub(crate) fn in_lineage(txn: &impl Txn, origin: &str, agent: &str) -> bool {
    team::load(txn, origin).is_some_and(|record| record.admits(agent))
}

/// Whether `caller` may see `task`: a local task is seen through its own team (membership
/// is checked before), a cell-tier task only by its origin team's lineage.
pub(crate) fn visible(txn: &impl Txn, caller: &crate::access::Caller, task: &TaskView) -> bool {
    match caller {
        crate::access::Caller::Agent(agent) if task.tier == Tier::Cell => {
            in_lineage(txn, &task.team, agent)
        }
        _ => true,
    }
}

/// The oldest ready cell-tier task in `agent`'s lineage, among the first
/// [`CELL_CLAIM_SCAN_MAX`] of the cell tier.
fn oldest_cell(txn: &impl Txn, agent: &str) -> Option<Task> {
    let rows = txn.scan(&[CELL_READY], &[CELL_READY + 1], CELL_CLAIM_SCAN_MAX);
    let mut admitted: Vec<(String, bool)> = Vec::new();
    rows.into_iter().find_map(|(key, _)| {
        let (origin, seq) = cell_ready_task(&key);
        let known = admitted
            .iter()
            .find(|(team, _)| *team == origin)
            .map(|e| e.1);
        let admits = known.unwrap_or_else(|| in_lineage(txn, &origin, agent));
        if known.is_none() {
            admitted.push((origin.clone(), admits));
        }
        admits.then(|| {
            let task = load(txn, Tier::Cell, &origin, seq);
            task.expect("a cell ready index entry has its task")
        })
    })
}

/// Claim the oldest ready task of the team's board, else of the cell tier.
pub(crate) fn claim(
    txn: &mut impl Txn,
    stamp: Stamp,
    team_name: &str,
    caller: &str,
    worker: &str,
) -> Outcome {
    if let Err(refusal) = team::member(txn, team_name, caller) {
        return refusal;
    }
    let oldest = oldest_local(txn, team_name).or_else(|| oldest_cell(txn, caller));
    let Some(mut task) = oldest else {
        return Outcome::BoardEmpty;
    };
    let window_ms = task.settings.reclaim_ms;
    take(txn, stamp, &mut task, (caller, worker), window_ms)
}

/// Claim the named task of the team's board for `worker` for `claim_ms` (0 = the team's
/// window): a ready task, a lapsed claim (redelivered first), or the worker's own live
/// claim again (same fence, window pushed out).
pub(crate) fn claim_task(
    txn: &mut impl Txn,
    stamp: Stamp,
    team_name: &str,
    who: (&str, &str),
    task_id: &str,
    claim_ms: u64,
) -> Outcome {
    let (caller, worker) = who;
    let now_ms = stamp.time_ms;
    if let Err(refusal) = team::member(txn, team_name, caller) {
        return refusal;
    }
    let Some(mut task) = locate(txn, team_name, task_id, Some(caller)) else {
        let task_id = task_id.to_string();
        return refused(BoardRefusal::UnknownTask { task_id });
    };
    let window_ms = match claim_ms {
        0 => task.settings.reclaim_ms,
        ms => ms,
    };
    if task.state == TaskState::Claimed && task.deadline_ms <= now_ms {
        let error = format!("reclaim window passed at {}", task.deadline_ms);
        deadline::remove(txn, task.deadline_ms, &task.claim_item());
        release_or_bury(txn, now_ms, &mut task, error);
    }
    match task.state {
        TaskState::Ready => take(txn, stamp, &mut task, who, window_ms),
        TaskState::Claimed if task.worker.as_deref() == Some(worker) => {
            let deadline_ms = task.deadline_ms.max(now_ms.saturating_add(window_ms));
            deadline::reschedule(txn, task.deadline_ms, deadline_ms, &task.claim_item());
            task.deadline_ms = deadline_ms;
            store(txn, &task);
            Outcome::TaskClaimed {
                task: Box::new(task.view()),
                fence: task.fence,
                deadline_ms,
                tier: shown_tier(&task.team, task.tier),
            }
        }
        TaskState::Claimed => refused(BoardRefusal::Taken {
            task_id: task.id(),
            worker: task.worker.clone().unwrap_or_default(),
        }),
        state => refused(BoardRefusal::NotReady {
            task_id: task.id(),
            state,
        }),
    }
}

/// Pass both gates for the next delivery of ready `task`, held for `window_ms`.
fn take(
    txn: &mut impl Txn,
    stamp: Stamp,
    task: &mut Task,
    who: (&str, &str),
    window_ms: u64,
) -> Outcome {
    let claimed = take_fenced(txn, (stamp.fence(), stamp.time_ms), task, who, window_ms);
    Outcome::TaskClaimed {
        task: Box::new(claimed.task),
        fence: claimed.fence,
        deadline_ms: claimed.deadline_ms,
        tier: claimed.tier,
    }
}

/// [`take`] under `fence` at `now_ms` (a prefetching claim grants several fences).
fn take_fenced(
    txn: &mut impl Txn,
    (fence, now_ms): (u64, u64),
    task: &mut Task,
    who: (&str, &str),
    window_ms: u64,
) -> Claimed {
    let (caller, worker) = who;
    assert_eq!(
        task.state,
        TaskState::Ready,
        "task {} is taken twice",
        task.id()
    );
    txn.delete(&task.ready_key());
    if task.spill_at_ms > 0 {
        deadline::remove(txn, task.spill_at_ms, &task.spill_item());
        task.spill_at_ms = 0;
    }
    // Fences only grow: a stale worker must never hold a fence equal to a later claim's.
    assert!(
        fence > task.fence,
        "fence {fence} does not pass {}",
        task.fence
    );
    task.delivery_count += 1;
    let claim_key = task.claim_key(task.delivery_count);
    assert!(
        txn.get(&claim_key).is_none(),
        "delivery {} of task {} already has a claimant",
        task.delivery_count,
        task.id()
    );
    let record = ClaimRecord {
        worker: worker.to_string(),
        caller: caller.to_string(),
        fence,
        at_ms: now_ms,
    };
    txn.put(&claim_key, &encode(&record));
    task.state = TaskState::Claimed;
    task.worker = Some(worker.to_string());
    task.fence = fence;
    task.deadline_ms = now_ms.saturating_add(window_ms);
    deadline::insert(txn, task.deadline_ms, &task.claim_item());
    store(txn, task);
    recount(txn, task, Some(TaskState::Ready), Some(TaskState::Claimed));
    Claimed {
        task: task.view(),
        fence,
        deadline_ms: task.deadline_ms,
        tier: shown_tier(&task.team, task.tier),
    }
}

/// A task reached through `team` by its id: the team's own local task, else a cell-tier
/// task whose origin team's lineage admits `agent` (when one is named).
fn locate(txn: &impl Txn, team_name: &str, id: &str, agent: Option<&str>) -> Option<Task> {
    let (origin, seq) = parse_id(id)?;
    let local = if origin == team_name {
        load(txn, Tier::Local, origin, seq)
    } else {
        None
    };
    let lineage = || agent.is_none_or(|agent| in_lineage(txn, origin, agent));
    local.or_else(|| load(txn, Tier::Cell, origin, seq).filter(|_| lineage()))
}

/// A worker presenting a claim.
pub(crate) struct Presented<'a> {
    /// The team it acts through.
    pub(crate) team: &'a str,
    /// The acting agent.
    pub(crate) caller: &'a str,
    /// The task.
    pub(crate) task_id: &'a str,
    /// The fence of its claim.
    pub(crate) fence: u64,
}

/// The task when `presented` holds its live claim; else the refusal.
fn held(txn: &impl Txn, now_ms: u64, presented: &Presented<'_>) -> Result<Task, Outcome> {
    team::member(txn, presented.team, presented.caller)?;
    let task_id = presented.task_id.to_string();
    let Some(task) = locate(txn, presented.team, &task_id, Some(presented.caller)) else {
        return Err(refused(BoardRefusal::UnknownTask { task_id }));
    };
    if task.state != TaskState::Claimed {
        let state = task.state;
        return Err(refused(BoardRefusal::NotClaimed { task_id, state }));
    }
    if presented.fence != task.fence {
        return Err(refused(BoardRefusal::StaleFence {
            presented: presented.fence,
            current: task.fence,
        }));
    }
    if task.deadline_ms <= now_ms {
        return Err(refused(BoardRefusal::ClaimExpired {
            deadline_ms: task.deadline_ms,
            now_ms,
        }));
    }
    let claim = txn.get(&task.claim_key(task.delivery_count));
    let claim: ClaimRecord = decode(&claim.expect("a claimed task has its claim record"));
    assert_eq!(
        claim.fence, task.fence,
        "task {task_id} lock and claim disagree"
    );
    Ok(task)
}

/// Complete the presented claim's task with `result`.
pub(crate) fn complete(
    txn: &mut impl Txn,
    now_ms: u64,
    presented: &Presented<'_>,
    result: &[u8],
) -> Outcome {
    match completable(txn, now_ms, presented, result) {
        Ok(task) => finish(txn, now_ms, task, result),
        Err(refusal) => refusal,
    }
}

/// The task when `presented` holds its live claim and `result` fits its board; else the
/// refusal (nothing changed).
fn completable(
    txn: &impl Txn,
    now_ms: u64,
    presented: &Presented<'_>,
    result: &[u8],
) -> Result<Task, Outcome> {
    let task = held(txn, now_ms, presented)?;
    let limit = task.settings.task_bytes_max;
    if result.len() > limit as usize {
        let reason = format!("result is {} bytes, limit is {limit}", result.len());
        return Err(Outcome::Invalid { reason });
    }
    Ok(task)
}

/// Complete `task`, checked by [`completable`], with `result`.
fn finish(txn: &mut impl Txn, now_ms: u64, mut task: Task, result: &[u8]) -> Outcome {
    deadline::remove(txn, task.deadline_ms, &task.claim_item());
    task.state = TaskState::Done;
    task.result = result.to_vec();
    // A tracker keeps its closed issues; other boards prune done tasks after a while.
    if !is_tracker_team(&task.team) {
        task.prune_at_ms = now_ms.saturating_add(TASK_DONE_RETAIN_MS);
        deadline::insert(txn, task.prune_at_ms, &task.done_item());
    }
    store(txn, &task);
    recount(txn, &task, Some(TaskState::Claimed), Some(TaskState::Done));
    Outcome::TaskCompleted { task_id: task.id() }
}

/// Give the presented claim's task back as failed with `error`.
pub(crate) fn fail(
    txn: &mut impl Txn,
    now_ms: u64,
    presented: &Presented<'_>,
    error: &str,
) -> Outcome {
    let mut task = match held(txn, now_ms, presented) {
        Ok(task) => task,
        Err(refusal) => return refusal,
    };
    deadline::remove(txn, task.deadline_ms, &task.claim_item());
    release_or_bury(txn, now_ms, &mut task, error.to_string())
}

/// Move the presented claim's deadline to `now + extend_ms` (never backward).
pub(crate) fn extend(
    txn: &mut impl Txn,
    now_ms: u64,
    presented: &Presented<'_>,
    extend_ms: u64,
) -> Outcome {
    let mut task = match held(txn, now_ms, presented) {
        Ok(task) => task,
        Err(refusal) => return refusal,
    };
    let deadline_ms = task.deadline_ms.max(now_ms.saturating_add(extend_ms));
    deadline::reschedule(txn, task.deadline_ms, deadline_ms, &task.claim_item());
    task.deadline_ms = deadline_ms;
    store(txn, &task);
    Outcome::TaskExtended { deadline_ms }
}

/// Give the presented claim's task back unfinished: ready again, no failure recorded.
pub(crate) fn release(txn: &mut impl Txn, now_ms: u64, presented: &Presented<'_>) -> Outcome {
    let mut task = match held(txn, now_ms, presented) {
        Ok(task) => task,
        Err(refusal) => return refusal,
    };
    deadline::remove(txn, task.deadline_ms, &task.claim_item());
    make_ready(txn, now_ms, &mut task);
    store(txn, &task);
    recount(txn, &task, Some(TaskState::Claimed), Some(TaskState::Ready));
    Outcome::TaskReleased {
        task_id: task.id(),
        delivery_count: task.delivery_count,
    }
}

/// One task reached through `team` by its id (see [`locate`]), for a member's read.
pub(crate) fn get(txn: &impl Txn, team_name: &str, task_id: &str) -> Option<TaskView> {
    live_team(txn, team_name)?;
    locate(txn, team_name, task_id, None).map(|task| task.view())
}

/// Record the failed delivery of claimed `task` (its claim deadline entry already gone),
/// then make it ready again or dead-letter it at its delivery limit.
fn release_or_bury(txn: &mut impl Txn, now_ms: u64, task: &mut Task, error: String) -> Outcome {
    task.failures.push(Failure {
        delivery: task.delivery_count,
        worker: task.worker.take().unwrap_or_default(),
        error,
        at_ms: now_ms,
    });
    if task.failures.len() > TASK_FAILURES_MAX {
        task.failures.remove(0);
    }
    let (task_id, delivery_count) = (task.id(), task.delivery_count);
    if delivery_count >= task.settings.delivery_limit {
        task.state = TaskState::Dead;
        store(txn, task);
        recount(txn, task, Some(TaskState::Claimed), Some(TaskState::Dead));
        notify_dead(txn, now_ms, task);
        return Outcome::TaskDeadLettered {
            task_id,
            delivery_count,
        };
    }
    make_ready(txn, now_ms, task);
    store(txn, task);
    recount(txn, task, Some(TaskState::Claimed), Some(TaskState::Ready));
    Outcome::TaskReleased {
        task_id,
        delivery_count,
    }
}

/// Tell the origin team's supervisor that `task` died. A cell-tier task whose team is no
/// longer on this cell (it moved or dissolved) dies without a notice.
fn notify_dead(txn: &mut impl Txn, now_ms: u64, task: &Task) {
    let Some(record) = team::load(txn, &task.team).filter(|r| !r.dissolving) else {
        return;
    };
    let last_error = task.failures.last().map_or("", |f| f.error.as_str());
    let body = format!(
        "task {} was dead-lettered at delivery {}: {last_error}",
        task.id(),
        task.delivery_count
    );
    let message = Outgoing {
        from: format!("board/{}", task.team),
        kind: MessageKind::DeadLetter {
            task_id: task.id(),
            delivery_count: task.delivery_count,
        },
        body,
        at_ms: now_ms,
    };
    mailbox::send(txn, &task.team, &record.supervisor, message);
}

/// Delete every claim record of `task`; returns how many.
fn delete_claims(txn: &mut impl Txn, task: &Task) -> u32 {
    let start = keys::task(families(task.tier).1, &task.team, task.seq);
    let end = keys::prefix_end(&start);
    let rows = txn.scan(&start, &end, task.delivery_count as usize + 1);
    for (key, _) in &rows {
        txn.delete(key);
    }
    u32::try_from(rows.len()).expect("claims fit u32")
}

/// Make a dead-lettered task of the team ready again at its tier, deliveries reset.
pub(crate) fn redrive(
    txn: &mut impl Txn,
    now_ms: u64,
    team_name: &str,
    caller: &str,
    id: &str,
) -> Outcome {
    if let Err(refusal) = team::member(txn, team_name, caller) {
        return refusal;
    }
    let own = parse_id(id).is_some_and(|(origin, _)| origin == team_name);
    let Some(mut task) = locate(txn, team_name, id, Some(caller)).filter(|_| own) else {
        let task_id = id.to_string();
        return refused(BoardRefusal::UnknownTask { task_id });
    };
    if task.state != TaskState::Dead {
        let (task_id, state) = (task.id(), task.state);
        return refused(BoardRefusal::NotDead { task_id, state });
    }
    // Delivery numbers start again, so the old claim records go.
    delete_claims(txn, &task);
    task.delivery_count = 0;
    make_ready(txn, now_ms, &mut task);
    store(txn, &task);
    recount(txn, &task, Some(TaskState::Dead), Some(TaskState::Ready));
    Outcome::TaskRedriven { task_id: task.id() }
}

/// Tick: the claim window of a task passed; returns 1 when it was redelivered or
/// dead-lettered.
pub(crate) fn expire_claim(txn: &mut impl Txn, now_ms: u64, item: (&str, u64, Tier)) -> u32 {
    let (team_name, seq, tier) = item;
    let Some(mut task) = load_live(txn, tier, team_name, seq) else {
        return 0;
    };
    if task.state != TaskState::Claimed || task.deadline_ms > now_ms {
        return 0;
    }
    let error = format!("reclaim window passed at {}", task.deadline_ms);
    deadline::remove(txn, task.deadline_ms, &task.claim_item());
    release_or_bury(txn, now_ms, &mut task, error);
    1
}

/// Tick: a never-claimed local task spills to this cell's cell tier; returns 1 when it
/// moved (or waits because the cell tier is full).
pub(crate) fn spill(txn: &mut impl Txn, now_ms: u64, team_name: &str, seq: u64) -> u32 {
    if team::load(txn, team_name).is_none_or(|record| record.dissolving) {
        return 0;
    }
    let Some(mut task) = load(txn, Tier::Local, team_name, seq) else {
        return 0;
    };
    let due = task.spill_at_ms > 0 && task.spill_at_ms <= now_ms;
    if task.state != TaskState::Ready || !due {
        return 0;
    }
    deadline::remove(txn, task.spill_at_ms, &task.spill_item());
    let mut cell = cell_board(txn);
    if cell.counts.open() >= CELL_TASKS_MAX {
        // The cell tier is full: try again after another spill window.
        task.spill_at_ms = now_ms.saturating_add(task.settings.spill_after_ms);
        deadline::insert(txn, task.spill_at_ms, &task.spill_item());
        store(txn, &task);
        return 1;
    }
    txn.delete(&task.key());
    txn.delete(&task.ready_key());
    recount(txn, &task, Some(TaskState::Ready), None);
    cell.last_spill_seq += 1;
    cell.counts.shift(None, Some(TaskState::Ready));
    txn.put(&[CELL_BOARD], &encode(&cell));
    task.tier = Tier::Cell;
    task.spill_seq = cell.last_spill_seq;
    task.spill_at_ms = 0;
    txn.put(&task.ready_key(), &marker());
    store(txn, &task);
    1
}

/// Tick: a done task's retention ended; returns the task and claim rows deleted.
pub(crate) fn prune(txn: &mut impl Txn, now_ms: u64, item: (&str, u64, Tier)) -> u32 {
    let (team_name, seq, tier) = item;
    match load_live(txn, tier, team_name, seq) {
        Some(task) if task.state == TaskState::Done && task.prune_at_ms <= now_ms => {
            remove(txn, &task)
        }
        _ => 0,
    }
}

/// Delete `task` with its index entries, deadlines and claim records; returns the task
/// and claim rows deleted.
fn remove(txn: &mut impl Txn, task: &Task) -> u32 {
    match task.state {
        TaskState::Ready => txn.delete(&task.ready_key()),
        TaskState::Claimed => deadline::remove(txn, task.deadline_ms, &task.claim_item()),
        TaskState::Done => deadline::remove(txn, task.prune_at_ms, &task.done_item()),
        TaskState::Dead => {}
    }
    if task.spill_at_ms > 0 {
        deadline::remove(txn, task.spill_at_ms, &task.spill_item());
    }
    let claims = delete_claims(txn, task);
    txn.delete(&task.key());
    recount(txn, task, Some(task.state), None);
    claims + 1
}

/// Delete the tasks a team posted, on its board and on the cell tier, at most about
/// `budget` rows; returns the rows deleted and whether none is left.
pub(crate) fn purge(txn: &mut impl Txn, team_name: &str, budget: usize) -> (u32, bool) {
    let mut removed = 0usize;
    for family in [TASK, CELL_TASK] {
        let start = keys::named(family, team_name);
        let end = keys::prefix_end(&start);
        while removed < budget {
            let rows = txn.scan(&start, &end, budget - removed);
            if rows.is_empty() {
                break;
            }
            for (_, value) in rows {
                removed += remove(txn, &decode(&value)) as usize;
            }
        }
    }
    let left = [TASK, CELL_TASK].into_iter().any(|family| {
        let start = keys::named(family, team_name);
        !txn.scan(&start, &keys::prefix_end(&start), 1).is_empty()
    });
    (u32::try_from(removed).expect("purge fits u32"), !left)
}

/// Up to `limit` tasks under `prefix` that `keep` accepts, in key order.
fn scan_tasks(
    txn: &impl Txn,
    prefix: Vec<u8>,
    keep: impl Fn(&Task) -> bool,
    limit: usize,
) -> Vec<TaskView> {
    let end = keys::prefix_end(&prefix);
    let mut start = prefix;
    let mut views = Vec::new();
    while views.len() < limit {
        let rows = txn.scan(&start, &end, LIST_ROWS_MAX);
        let Some((last, _)) = rows.last() else { break };
        start = last.clone();
        start.push(0);
        for (_, value) in rows {
            let task: Task = decode(&value);
            if keep(&task) {
                views.push(task.view());
                if views.len() == limit {
                    break;
                }
            }
        }
    }
    views
}

fn live_team(txn: &impl Txn, team_name: &str) -> Option<team::Team> {
    team::load(txn, team_name).filter(|record| !record.dissolving)
}

/// Tasks of the team's local board in post order, all or in one state.
pub(crate) fn list(
    txn: &impl Txn,
    team_name: &str,
    state: Option<TaskState>,
    limit: usize,
) -> Vec<TaskView> {
    if live_team(txn, team_name).is_none() {
        return Vec::new();
    }
    let keep = |task: &Task| state.is_none_or(|state| task.state == state);
    scan_tasks(txn, keys::named(TASK, team_name), keep, limit)
}

/// Dead letters the team posted: on its local board, then on the cell tier.
pub(crate) fn dead_letters(txn: &impl Txn, team_name: &str, limit: usize) -> Vec<TaskView> {
    if live_team(txn, team_name).is_none() {
        return Vec::new();
    }
    let dead = |task: &Task| task.state == TaskState::Dead;
    let mut views = scan_tasks(txn, keys::named(TASK, team_name), dead, limit);
    let rest = limit - views.len();
    if rest > 0 {
        views.extend(scan_tasks(
            txn,
            keys::named(CELL_TASK, team_name),
            dead,
            rest,
        ));
    }
    views
}

/// Ready tasks of this cell's cell tier, oldest spill first.
pub(crate) fn cell_ready(txn: &impl Txn, limit: usize) -> Vec<TaskView> {
    txn.scan(&[CELL_READY], &[CELL_READY + 1], limit)
        .into_iter()
        .map(|(key, _)| {
            let (origin, seq) = cell_ready_task(&key);
            let task = load(txn, Tier::Cell, &origin, seq);
            task.expect("a cell ready index entry has its task").view()
        })
        .collect()
}

/// The counts of this cell's cell-tier board.
pub(crate) fn cell_counts(txn: &impl Txn) -> team::Counts {
    cell_board(txn).counts
}

/// The counts of the team's board and of this cell's ready cell-tier tasks.
pub(crate) fn stats(txn: &impl Txn, team_name: &str) -> Option<BoardStatsView> {
    let counts = live_team(txn, team_name)?.counts;
    let cell = cell_board(txn).counts;
    Some(BoardStatsView {
        ready: counts.ready,
        claimed: counts.claimed,
        done: counts.done,
        dead: counts.dead,
        tier: shown_tier(team_name, Tier::Local),
        cell_ready: cell.ready,
        cell_claimed: cell.claimed,
        cell_done: cell.done,
        cell_dead: cell.dead,
    })
}

/// Take ready cell-tier task `task_id` off the cell tier for a handoff to the fabric tier:
/// only an unclaimed task that has waited `2 × spill_after` since it was posted (its local
/// wait, then as long at the cell tier) goes, and only at the delivery count the sender saw.
pub(crate) fn take_for_handoff(
    txn: &mut impl Txn,
    now_ms: u64,
    task_id: &str,
    delivery_count: u32,
) -> Result<(TaskView, BoardSettings), String> {
    let (origin, seq) = parse_id(task_id).ok_or_else(|| format!("{task_id:?} is not a task id"))?;
    let task = load(txn, Tier::Cell, origin, seq)
        .ok_or_else(|| format!("task {task_id} is not at this cell's tier"))?;
    let due = task
        .posted_ms
        .saturating_add(task.settings.spill_after_ms.saturating_mul(2));
    if task.state != TaskState::Ready || task.delivery_count != delivery_count {
        return Err(format!("task {task_id} changed: it is {}", task.state));
    }
    if task.settings.spill_after_ms == 0 || due > now_ms {
        return Err(format!("task {task_id} is not due to spill until {due}"));
    }
    txn.delete(&task.key());
    txn.delete(&task.ready_key());
    recount(txn, &task, Some(TaskState::Ready), None);
    Ok((task.view(), task.settings))
}

/// Put a handed-off task on fabric queue `queue`'s board (its reserved team is created on
/// first use and admits the origin team's members and ancestors). Returns the new id.
pub(crate) fn receive_fabric(
    txn: &mut impl Txn,
    now_ms: u64,
    queue: &str,
    task: &TaskView,
    settings: BoardSettings,
    admitted: &[String],
) -> String {
    let name = fabric_queue_team(queue);
    let mut record = team::load(txn, &name).unwrap_or_else(|| team::Team {
        supervisor: String::new(),
        members: Vec::new(),
        parent: None,
        ancestors: Vec::new(),
        settings,
        last_seq: 0,
        dissolving: false,
        counts: team::Counts::default(),
    });
    for agent in admitted {
        if !record.members.contains(agent) {
            record.members.push(agent.clone());
        }
    }
    record.last_seq += 1;
    team::store(txn, &name, &record);
    let mut stored = Task {
        team: name,
        seq: record.last_seq,
        tier: Tier::Local,
        state: TaskState::Ready,
        body: task.body.clone(),
        settings: BoardSettings {
            spill_after_ms: 0,
            ..settings
        },
        delivery_count: task.delivery_count,
        worker: None,
        fence: 0,
        deadline_ms: 0,
        posted_ms: now_ms,
        spill_at_ms: 0,
        spill_seq: 0,
        failures: task.failures.clone(),
        result: Vec::new(),
        prune_at_ms: 0,
    };
    make_ready(txn, now_ms, &mut stored);
    store(txn, &stored);
    recount(txn, &stored, None, Some(TaskState::Ready));
    stored.id()
}

/// What a prefetching claim asks beyond its team and worker ([`claim_many`]).
pub(crate) struct Many<'a> {
    /// Held claims to complete first.
    pub(crate) completes: &'a [Completion],
    /// Most tasks to claim.
    pub(crate) max: u32,
    /// Each claim's window (0 = the team's `reclaim_ms`).
    pub(crate) claim_ms: u64,
}

/// A prefetching worker's loop in one apply: complete every held claim of `many` (all or
/// none: each is checked before any changes), then claim up to `many.max` of the oldest
/// ready tasks (the team's board, then the cell tier), the `k`-th under the command's
/// `k`-th fence (`Stamp::nth_fence`).
pub(crate) fn claim_many(
    txn: &mut impl Txn,
    stamp: Stamp,
    team_name: &str,
    who: (&str, &str),
    many: &Many<'_>,
) -> Outcome {
    let (caller, now_ms) = (who.0, stamp.time_ms);
    if let Err(refusal) = team::member(txn, team_name, caller) {
        return refusal;
    }
    let mut checked = Vec::with_capacity(many.completes.len());
    for done in many.completes {
        let presented = Presented {
            team: team_name,
            caller,
            task_id: &done.task_id,
            fence: done.fence,
        };
        match completable(txn, now_ms, &presented, &done.result) {
            Ok(task) => checked.push((task, &done.result)),
            Err(refusal) => return refusal,
        }
    }
    let completed = checked
        .into_iter()
        .map(|(task, result)| {
            let id = task.id();
            finish(txn, now_ms, task, result);
            id
        })
        .collect();
    let mut locals = oldest_locals(txn, team_name, many.max as usize).into_iter();
    let mut claims = Vec::new();
    for k in 0..many.max {
        let next = locals.next().or_else(|| oldest_cell(txn, caller));
        let Some(mut task) = next else { break };
        let window_ms = match many.claim_ms {
            0 => task.settings.reclaim_ms,
            ms => ms,
        };
        let at = (stamp.nth_fence(k), now_ms);
        claims.push(take_fenced(txn, at, &mut task, who, window_ms));
    }
    Outcome::TasksClaimed { completed, claims }
}

/// Post `bodies` in order, all or none: membership, sizes and room are checked first.
pub(crate) fn post_many(
    txn: &mut impl Txn,
    now_ms: u64,
    team_name: &str,
    caller: &str,
    bodies: &[Vec<u8>],
) -> Outcome {
    if let Err(refusal) = local_board(team_name) {
        return refusal;
    }
    let record = match team::member(txn, team_name, caller) {
        Ok(record) => record,
        Err(refusal) => return refusal,
    };
    let max = record.settings.task_bytes_max as usize;
    if let Some(body) = bodies.iter().find(|b| b.len() > max) {
        let reason = format!("body is {} bytes, limit is {max}", body.len());
        return Outcome::Invalid { reason };
    }
    let open = record.counts.open();
    if open + bodies.len() as u64 > TEAM_TASKS_MAX {
        return refused(BoardRefusal::BoardFull {
            open,
            open_max: TEAM_TASKS_MAX,
        });
    }
    let mut task_ids = Vec::with_capacity(bodies.len());
    for body in bodies {
        match post(txn, now_ms, team_name, caller, body) {
            Outcome::TaskPosted { task_id, .. } => task_ids.push(task_id),
            other => unreachable!("a checked post answered {other:?}"),
        }
    }
    Outcome::TasksPosted { task_ids }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_team_exactly() {
        assert_eq!(parse_id("a-b-12"), Some(("a-b", 12)));
        assert_eq!(parse_id("t-0"), Some(("t", 0)));
        assert_eq!(parse_id("t-012"), None);
        assert_eq!(parse_id("t-+1"), None);
        assert_eq!(parse_id("-1"), None);
        assert_eq!(parse_id("t1"), None);
        assert_eq!(task_id("a-b", 12), "a-b-12");
    }
}
