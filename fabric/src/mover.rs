//! The spill mover: hands ready cell-tier tasks that waited long enough to the fabric tier,
//! in signed, hash-chained envelopes, and delivers queued envelopes until acknowledged.
//!
//! Each node runs one mover loop over the data cells it leads. For a due task it reads the
//! channel's outbox head, seals an envelope with the cell's identity and proposes
//! `HandoffSend`, which takes the task off the cell tier and queues the envelope in one
//! apply. Delivery sends every queued envelope to a node of the receiving cell (`Deliver`),
//! which verifies it and proposes `HandoffReceive`; the cell runs the board's chain check,
//! whose typed refusal comes back with its stable code as the verdict. An accepted or
//! duplicate answer is acknowledged with `HandoffAck`, a gap resends from where the
//! receiver is. A leader change on either side loses nothing (outbox and chain heads are
//! replicated) and applies nothing twice (the chain dedups). A cell without a signing key
//! records the handoff as failed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use whip_board::types::{BoardSettings, TaskView};
use whip_board::{Command, Outcome, Query, QueryResult, Request, route};
use whip_cell::CellError;
use whip_proto::v1 as pb;
use whip_proto::v1::node_client::NodeClient;

use crate::envelope::{Envelope, EnvelopeKind, Limits};
use crate::limits;
use crate::map::{FabricMap, META_CELL};
use crate::node::{Inner, Node};

/// What a task-spill envelope carries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpillPayload {
    /// The fabric queue (the origin team's name).
    pub queue: String,
    /// The task.
    pub task: TaskView,
    /// The origin team's board settings.
    pub settings: BoardSettings,
    /// Agents admitted to the queue (the origin team's members).
    pub admitted: Vec<String>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// Tasks whose failed handoff was already recorded (no alarm storm every round).
type Recorded = Arc<Mutex<HashSet<String>>>;

/// Per channel (sending, receiving cell): the last refusal verdict and how many rounds in a
/// row it came back, so a poisoned channel logs at rounds 1, 2, 4, 8, … and not every round.
#[derive(Default)]
struct Refusals(Mutex<HashMap<(u64, u64), (String, u64)>>);

impl Refusals {
    /// Count `verdict` for the channel; whether to log it now (and how often it came back).
    fn count(&self, channel: (u64, u64), verdict: Option<&str>) -> Option<u64> {
        let mut seen = self.0.lock().expect("refusals lock");
        let Some(verdict) = verdict else {
            seen.remove(&channel);
            return None;
        };
        let entry = seen
            .entry(channel)
            .or_insert_with(|| (verdict.to_string(), 0));
        if entry.0 != verdict {
            *entry = (verdict.to_string(), 0);
        }
        entry.1 += 1;
        entry.1.is_power_of_two().then_some(entry.1)
    }
}

pub(crate) async fn mover_loop(inner: Weak<Inner>) {
    let recorded: Recorded = Arc::default();
    let refusals = Refusals::default();
    let looks = Looks::default();
    loop {
        tokio::time::sleep(Duration::from_millis(limits::MOVER_INTERVAL_MS)).await;
        let Some(inner) = inner.upgrade() else { return };
        let node = Node { inner };
        // Load the map when this node has not needed it yet (it may lead cells all the
        // same); a node outside an initialized fabric has nothing to move.
        let Ok(map) = node.map().await else {
            continue;
        };
        for cell in node.hosted_ids() {
            if cell == META_CELL || !node.leads(cell) {
                continue;
            }
            let Some(applied) = node.applied_index(cell) else {
                continue;
            };
            // An idle cell costs no read: nothing can have become due since the last look.
            if looks.skip(cell, applied, now_ms()) {
                continue;
            }
            let spill = spill_round(&node, &map, cell, &recorded)
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(cell, error = %e, "spill");
                    NextLook::NextRound
                });
            let deliver = match deliver_cell(&node, &map, cell, &refusals).await {
                Ok(false) => NextLook::AfterApply,
                Ok(true) => NextLook::NextRound,
                Err(e) => {
                    tracing::debug!(cell, error = %e, "deliver");
                    NextLook::NextRound
                }
            };
            looks.record(cell, applied, spill.min(deliver));
        }
    }
}

/// When a led cell next needs the mover, as far as its last look could tell. Ordered by
/// urgency: the sooner of two is the smaller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum NextLook {
    /// Something is pending, or the look saw only part of the cell: look next round.
    NextRound,
    /// Nothing is due before this time (ms) unless an apply changes the cell.
    At(u64),
    /// Nothing is due until an apply changes the cell (new tasks, new envelopes).
    AfterApply,
}

/// Per led cell: its applied index at the last look and what that look found. Due work
/// appears only through an apply on the cell or when a known deadline passes, so a cell
/// whose applied index has not moved since a quiet look is skipped without a read (each
/// read is a leadership round with the followers).
#[derive(Default)]
struct Looks(Mutex<HashMap<u64, (u64, NextLook)>>);

impl Looks {
    fn skip(&self, cell: u64, applied: u64, now_ms: u64) -> bool {
        match self.0.lock().expect("looks lock").get(&cell) {
            Some((seen, next)) if *seen == applied => match next {
                NextLook::NextRound => false,
                NextLook::At(due) => now_ms < *due,
                NextLook::AfterApply => true,
            },
            _ => false,
        }
    }

    fn record(&self, cell: u64, applied: u64, next: NextLook) {
        self.0
            .lock()
            .expect("looks lock")
            .insert(cell, (applied, next));
    }
}

/// Read the cell's ready cell-tier tasks, spill the due ones, and say when to look again.
async fn spill_round(
    node: &Node,
    map: &FabricMap,
    cell: u64,
    recorded: &Recorded,
) -> Result<NextLook, CellError> {
    let query = Query::BoardCellReady {
        limit: limits::SPILL_BATCH_MAX,
    };
    let QueryResult::Tasks(ready) = read(node, cell, query).await? else {
        return Ok(NextLook::NextRound);
    };
    let now = now_ms();
    let next = if ready.len() >= limits::SPILL_BATCH_MAX as usize {
        NextLook::NextRound
    } else {
        ready
            .iter()
            .filter(|t| t.spill_after_ms > 0)
            .map(spill_due)
            .map(|due| match due <= now {
                true => NextLook::NextRound,
                false => NextLook::At(due),
            })
            .min()
            .unwrap_or(NextLook::AfterApply)
    };
    spill_cell(node, map, cell, ready, recorded).await?;
    Ok(next)
}

/// When a ready cell-tier task spills up: twice its `spill_after_ms` after it was posted.
fn spill_due(task: &TaskView) -> u64 {
    task.posted_ms
        .saturating_add(task.spill_after_ms.saturating_mul(2))
}

async fn read(node: &Node, cell: u64, query: Query) -> Result<QueryResult, CellError> {
    node.read_cell(None, cell, query).await
}

async fn submit(node: &Node, cell: u64, command: Command) -> Result<Outcome, CellError> {
    node.submit_cell(None, cell, Request::server(None, command))
        .await
}

/// Hand off the due ready tasks of `cell`'s tier. Team records and outbox heads are read
/// once per round; after each queued envelope the head moves on locally (the cell refuses a
/// send that does not continue its real head, so a stale guess costs a round, never a fork).
async fn spill_cell(
    node: &Node,
    map: &FabricMap,
    cell: u64,
    ready: Vec<TaskView>,
    recorded: &Recorded,
) -> Result<(), CellError> {
    let now = now_ms();
    let mut teams: HashMap<String, (BoardSettings, Vec<String>)> = HashMap::new();
    let mut heads: HashMap<u64, (u64, [u8; 32])> = HashMap::new();
    let mut batches: HashMap<u64, Vec<Command>> = HashMap::new();
    for task in ready {
        if task.spill_after_ms == 0 || spill_due(&task) > now {
            continue;
        }
        let queue = task.team.clone();
        let target = map.locate(route::fabric_queue_point(&queue)).cell;
        if target == cell {
            // The queue lives here: one apply moves the task, no envelope needed.
            let local = Command::HandoffLocal {
                task_id: task.id.clone(),
                delivery_count: task.delivery_count,
            };
            batches.entry(cell).or_default().push(local);
            continue;
        }
        let Some(identity) = node.identity(cell)? else {
            record_keyless(node, cell, &task.id, recorded).await?;
            continue;
        };
        let (settings, admitted) = match teams.get(&queue) {
            Some(team) => team.clone(),
            None => {
                let team = team_of(node, cell, &queue).await?;
                teams.insert(queue.clone(), team.clone());
                team
            }
        };
        let (seq, prev) = match heads.get(&target) {
            Some(head) => *head,
            None => outbox_head(node, cell, target).await?,
        };
        let (task_id, delivery_count) = (task.id.clone(), task.delivery_count);
        let payload = SpillPayload {
            queue,
            task,
            settings,
            admitted,
        };
        let bytes = postcard::to_stdvec(&payload).expect("payload encodes");
        let kind = EnvelopeKind::TaskSpill;
        let envelope = Envelope::seal(&identity, cell, target, seq, prev, now, 0, kind, bytes);
        let hash = envelope.hash();
        let send = Command::HandoffSend {
            to_cell: target,
            seq,
            prev_hash: prev.to_vec(),
            hash: hash.to_vec(),
            envelope: envelope.to_bytes(),
            task_id,
            delivery_count,
        };
        let batch = batches.entry(target).or_default();
        let bytes: usize = batch.iter().map(whip_board::handoff_bytes).sum();
        if bytes + whip_board::handoff_bytes(&send) > limits::HANDOFF_BATCH_BYTES {
            continue; // next round
        }
        heads.insert(target, (seq + 1, hash));
        batch.push(send);
    }
    submit_batches(node, cell, batches).await
}

/// One write per channel: the cell queues the envelopes in order and stops at the first
/// that does not continue its outbox (a stale guess of ours: the next round re-reads).
async fn submit_batches(
    node: &Node,
    cell: u64,
    batches: HashMap<u64, Vec<Command>>,
) -> Result<(), CellError> {
    for (_, commands) in batches {
        match submit(node, cell, Command::HandoffBatch { commands }).await? {
            Outcome::HandoffBatch { .. } => {}
            other => return Err(CellError::Fatal(format!("handoff answered {other:?}"))),
        }
    }
    Ok(())
}

/// Record once that `task_id` cannot be handed off: the cell has no signing key.
async fn record_keyless(
    node: &Node,
    cell: u64,
    task_id: &str,
    recorded: &Recorded,
) -> Result<(), CellError> {
    if recorded
        .lock()
        .expect("recorded lock")
        .insert(task_id.to_string())
    {
        let failed = Command::HandoffFailed {
            task_id: task_id.to_string(),
            reason: format!("cell {cell} has no signing key"),
        };
        submit(node, cell, failed).await?;
    }
    Ok(())
}

/// The next sequence and previous hash of the channel from `cell` to `target`.
async fn outbox_head(node: &Node, cell: u64, target: u64) -> Result<(u64, [u8; 32]), CellError> {
    match read(node, cell, Query::OutboxHead { to_cell: target }).await? {
        QueryResult::OutboxHead { seq, prev_hash } => {
            Ok((seq, prev_hash.as_slice().try_into().unwrap_or([0; 32])))
        }
        other => Err(CellError::Fatal(format!("unexpected answer {other:?}"))),
    }
}

/// The origin team's board settings and members (admitted to its fabric queue).
async fn team_of(
    node: &Node,
    cell: u64,
    team: &str,
) -> Result<(BoardSettings, Vec<String>), CellError> {
    let query = Query::Team {
        team: team.to_string(),
    };
    Ok(match read(node, cell, query).await? {
        QueryResult::Team(Some(view)) => (view.settings, view.members),
        _ => (BoardSettings::default(), Vec::new()),
    })
}

/// Deliver every queued envelope of `cell` until acknowledged.
async fn deliver_cell(
    node: &Node,
    map: &FabricMap,
    cell: u64,
    refusals: &Refusals,
) -> Result<bool, CellError> {
    let QueryResult::Cells(channels) = read(node, cell, Query::OutboxChannels).await? else {
        return Ok(true);
    };
    let pending = !channels.is_empty();
    for to_cell in channels {
        let answer = deliver_channel(node, map, cell, to_cell).await?;
        let refused = answer
            .as_ref()
            .map(|a| a.verdict.as_str())
            .filter(|v| !matches!(*v, "accepted" | "gap" | "duplicate"));
        if let (Some(rounds), Some(answer)) = (refusals.count((cell, to_cell), refused), answer) {
            tracing::warn!(
                cell,
                to_cell,
                rounds,
                verdict = %answer.verdict,
                message = %answer.message,
                "handoff refused"
            );
        }
    }
    Ok(pending)
}

/// Deliver the pending envelopes of one channel; the receiver's answer, if any were sent.
async fn deliver_channel(
    node: &Node,
    map: &FabricMap,
    cell: u64,
    to_cell: u64,
) -> Result<Option<pb::DeliverResponse>, CellError> {
    let query = Query::OutboxPending {
        to_cell,
        from_seq: 0,
        limit: limits::SPILL_BATCH_MAX,
    };
    let QueryResult::Envelopes(pending) = read(node, cell, query).await? else {
        return Ok(None);
    };
    if pending.is_empty() {
        return Ok(None);
    }
    let mut total = 0;
    let envelopes: Vec<Vec<u8>> = pending
        .into_iter()
        .map(|(_, bytes)| bytes)
        .take_while(|bytes| {
            total += bytes.len();
            total <= limits::HANDOFF_BATCH_BYTES || total == bytes.len()
        })
        .collect();
    let answer = deliver_to(node, map, to_cell, envelopes).await?;
    if answer.applied_through > 0 {
        let ack = Command::HandoffAck {
            to_cell,
            seq: answer.applied_through,
        };
        submit(node, cell, ack).await?;
    }
    Ok(Some(answer))
}

/// Send one envelope to a node of `to_cell` (here when this node hosts it).
async fn deliver_to(
    node: &Node,
    map: &FabricMap,
    to_cell: u64,
    envelopes: Vec<Vec<u8>>,
) -> Result<pb::DeliverResponse, CellError> {
    if node.hosted(to_cell).is_some() {
        return deliver(node, envelopes).await;
    }
    let voters = map.cells.get(&to_cell).cloned().unwrap_or_default();
    let mut last = CellError::Unavailable(format!("cell {to_cell} has no reachable voter"));
    for voter in voters {
        let Some(addr) = map.addr(voter) else {
            continue;
        };
        let mut client = NodeClient::new(node.peers().channel(addr));
        let call = client.deliver(pb::DeliverRequest {
            envelope: Vec::new(),
            envelopes: envelopes.clone(),
        });
        match tokio::time::timeout(Duration::from_millis(limits::REMOTE_CALL_TIMEOUT_MS), call)
            .await
        {
            Ok(Ok(answer)) => return Ok(answer.into_inner()),
            Ok(Err(status)) => last = CellError::from(status),
            Err(_) => last = CellError::Unavailable(format!("{addr} did not answer")),
        }
    }
    Err(last)
}

/// Check envelopes for a cell hosted here (one channel, in order) and propose them to that
/// cell in one write; the cell checks the chain. Envelopes after the first one that fails
/// the checks are not proposed; a batch naming more than one channel proposes nothing.
pub(crate) async fn deliver(
    node: &Node,
    envelopes: Vec<Vec<u8>>,
) -> Result<pb::DeliverResponse, CellError> {
    let mut answer = pb::DeliverResponse {
        verdict: "accepted".into(),
        ..Default::default()
    };
    let map = node.map().await?;
    let mut channel = None;
    let mut commands = Vec::new();
    for bytes in envelopes {
        match receive_command(node, &map, &bytes) {
            Ok((pair, command)) if channel.is_none_or(|c| c == pair) => {
                channel = Some(pair);
                commands.push(command);
            }
            Ok(_) => {
                refuse(
                    &mut answer,
                    "mixed_channels",
                    "a batch is for one channel (one sending and one receiving cell)".into(),
                );
                return Ok(answer);
            }
            Err((verdict, message)) => {
                refuse(&mut answer, verdict, message);
                break;
            }
        }
    }
    let to_cell = channel.map(|(_, to)| to);
    let Some(to_cell) = to_cell else {
        return Ok(answer);
    };
    let request = Request::server(None, Command::HandoffBatch { commands });
    let outcomes = match node.submit_cell(Some(&map), to_cell, request).await? {
        Outcome::HandoffBatch { outcomes } => outcomes,
        other => return Err(CellError::Fatal(format!("unexpected answer {other:?}"))),
    };
    let applied = read_outcomes(&mut answer, outcomes)?;
    if answer.verdict == "accepted" && !applied {
        // Every envelope was applied before: acknowledged again, nothing applied.
        answer.verdict = "duplicate".into();
    }
    Ok(answer)
}

/// Fill `answer` from the receiving cell's outcomes; true when any envelope was applied. A
/// refusal's verdict is its stable code (`gap`, `fork`, `broken_chain`, `zero_sequence`).
fn read_outcomes(
    answer: &mut pb::DeliverResponse,
    outcomes: Vec<Outcome>,
) -> Result<bool, CellError> {
    let mut applied = false;
    for outcome in outcomes {
        match outcome {
            Outcome::HandoffAccepted { seq, .. } => {
                applied = true;
                answer.applied_through = seq;
            }
            Outcome::HandoffDuplicate { seq } => answer.applied_through = seq,
            Outcome::HandoffRefused {
                refusal,
                expected_seq,
            } => {
                refuse(answer, refusal.code(), refusal.to_string());
                answer.expected_seq = expected_seq;
            }
            other => return Err(CellError::Fatal(format!("unexpected answer {other:?}"))),
        }
    }
    Ok(applied)
}

fn refuse(answer: &mut pb::DeliverResponse, verdict: &str, message: String) {
    answer.verdict = verdict.to_string();
    answer.message = message;
}

/// A channel: (sending cell, receiving cell).
type ChannelCells = (u64, u64);
/// A delivery refusal: (verdict code, message).
type RefusedVerdict = (&'static str, String);

/// The receive command for one signed envelope, after every check but the chain's, with
/// its channel (sending cell, receiving cell); or the verdict refusing it.
fn receive_command(
    node: &Node,
    map: &FabricMap,
    bytes: &[u8],
) -> Result<(ChannelCells, Command), RefusedVerdict> {
    let envelope = Envelope::from_bytes(bytes).map_err(|e| ("malformed", e.to_string()))?;
    // This node receives for the cells it hosts: anything else is misaddressed here.
    let me = match node.hosted(envelope.to_cell) {
        Some(_) => envelope.to_cell,
        None => 0,
    };
    crate::envelope::verify(&map.keys, me, &envelope, now_ms(), &Limits::default())
        .map_err(|refusal| (refusal.code(), refusal.to_string()))?;
    let payload: SpillPayload = postcard::from_bytes(&envelope.payload)
        .map_err(|e| ("malformed", format!("payload: {e}")))?;
    check_payload(map, envelope.from_cell, &payload)?;
    let command = Command::HandoffReceive {
        from_cell: envelope.from_cell,
        seq: envelope.channel_seq,
        prev_hash: envelope.prev_hash.to_vec(),
        hash: envelope.hash().to_vec(),
        queue: payload.queue,
        task: Box::new(payload.task),
        settings: payload.settings,
        admitted: payload.admitted,
    };
    Ok(((envelope.from_cell, envelope.to_cell), command))
}

/// A spill comes from the cell owning its team, and admits at most a team's worth of
/// members: a signed envelope cannot put tasks into another cell's team's queue, nor make
/// an unbounded list of agents members of it.
fn check_payload(
    map: &FabricMap,
    from_cell: u64,
    payload: &SpillPayload,
) -> Result<(), (&'static str, String)> {
    let owner = map
        .locate(whip_board::route::team_point(&payload.queue))
        .cell;
    if owner != from_cell {
        return Err((
            "not_owner",
            format!(
                "team {:?} is owned by cell {owner}, not by the sending cell {from_cell}",
                payload.queue
            ),
        ));
    }
    let members_max = whip_board::limits::TEAM_MEMBERS_MAX;
    if payload.admitted.len() > members_max {
        return Err((
            "too_many_admitted",
            format!(
                "{} admitted agents, a team has at most {members_max}",
                payload.admitted.len()
            ),
        ));
    }
    Ok(())
}

/// The operator's repair of the channel `from_cell` → `to_cell`: the receiving cell's head
/// is set to what the sender last sealed before its first unacknowledged envelope (or its
/// last sealed one, when nothing is pending), so the sender's envelopes are accepted again
/// after a forged one poisoned the channel. Kept as an alarm on the receiving cell.
pub(crate) async fn reset_channel(
    node: &Node,
    from_cell: u64,
    to_cell: u64,
) -> Result<pb::ChannelResetResponse, CellError> {
    let map = node.map().await?;
    let known = map.data_cells();
    if from_cell == to_cell || !known.contains(&from_cell) || !known.contains(&to_cell) {
        return Err(CellError::InvalidArgument(format!(
            "no channel runs from cell {from_cell} to cell {to_cell} (data cells: {known:?})"
        )));
    }
    let pending = Query::OutboxPending {
        to_cell,
        from_seq: 0,
        limit: 1,
    };
    let (seq, hash) = match node.read_cell(Some(&map), from_cell, pending).await? {
        QueryResult::Envelopes(list) if !list.is_empty() => {
            let envelope = Envelope::from_bytes(&list[0].1)
                .map_err(|e| CellError::Fatal(format!("pending envelope: {e}")))?;
            (envelope.channel_seq - 1, envelope.prev_hash.to_vec())
        }
        QueryResult::Envelopes(_) => {
            let head = Query::OutboxHead { to_cell };
            match node.read_cell(Some(&map), from_cell, head).await? {
                QueryResult::OutboxHead { seq, prev_hash } => (seq - 1, prev_hash),
                other => return Err(crate::node::unexpected(&other)),
            }
        }
        other => return Err(crate::node::unexpected(&other)),
    };
    let hash = if seq == 0 { Vec::new() } else { hash };
    let reset = Command::HandoffReset {
        from_cell,
        seq,
        hash,
    };
    match node
        .submit_cell(Some(&map), to_cell, Request::server(None, reset))
        .await?
    {
        Outcome::HandoffReset { before_seq, .. } => {
            tracing::warn!(
                from_cell,
                to_cell,
                before_seq,
                seq,
                "channel reset by the operator"
            );
            Ok(pb::ChannelResetResponse {
                before_seq,
                seq,
                message: format!(
                    "channel {from_cell} -> {to_cell}: head {before_seq} -> {seq} \
                     (the sender's next envelope is {})",
                    seq + 1
                ),
            })
        }
        other => Err(CellError::Fatal(format!("unexpected answer {other:?}"))),
    }
}
