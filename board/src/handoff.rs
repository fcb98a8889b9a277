//! Handoff of work between cells: the replicated halves of a signed, hash-chained channel.
//!
//! The sending cell keeps, per receiving cell, an outbox head (the next channel sequence and
//! the hash of the last envelope sealed) and the envelopes not yet acknowledged. Sending is
//! one command: it takes the task off the cell tier *and* queues the envelope, so a task is
//! either still here or in the outbox, never both and never neither. The receiving cell
//! keeps, per sending cell, a chain head (the last sequence applied and its hash): an
//! envelope extending the head is applied, one at or below it is a duplicate (answered
//! again, applied once), one further ahead is a gap (the sender resends from the head), one
//! that contradicts the chain (another hash at the head's sequence, or a previous hash that
//! is not the head's) is refused and raises an alarm, and sequence 0 is refused as
//! malformed. That rule is [`crate::chain`]'s, the one the fabric's envelope check uses
//! too; a refusal is answered as a typed [`HandoffRefusal`] with a stable code.
//!
//! Signatures and bounds (size, hops, clock skew) are checked by the node before it
//! proposes a receive (the board cannot hold keys); everything that must survive a leader
//! change (outbox, chain heads, alarms) is here. The board never reads the envelope bytes.

use serde::{Deserialize, Serialize};

use crate::chain::{self, ChainStep, HandoffRefusal};
use crate::codec::{decode, encode};
use crate::keys::{self, ALARM, ALARM_CAUSE, ALARM_HEAD, INBOX, OUTBOX, OUTBOX_ITEM};
use crate::limits::{ALARMS_KEPT_MAX, OUTBOX_PENDING_MAX};
use crate::taskboard;
use crate::txn::Txn;
use crate::types::{BoardSettings, Outcome, TaskView};

#[derive(Clone, Default, Serialize, Deserialize)]
struct Head {
    /// Outbox: the next sequence to seal. Inbox: the last sequence applied.
    seq: u64,
    /// The hash of the last envelope sealed (outbox) or applied (inbox).
    #[serde(with = "serde_bytes")]
    hash: Vec<u8>,
}

impl Head {
    fn hash_or_zero(&self) -> Vec<u8> {
        if self.hash.is_empty() {
            vec![0; chain::HASH_BYTES]
        } else {
            self.hash.clone()
        }
    }
}

fn head_key(family: u8, cell: u64) -> Vec<u8> {
    let mut key = vec![family];
    keys::push_u64(&mut key, cell);
    key
}

fn item_key(to_cell: u64, seq: u64) -> Vec<u8> {
    let mut key = head_key(OUTBOX_ITEM, to_cell);
    keys::push_u64(&mut key, seq);
    key
}

fn head(txn: &impl Txn, family: u8, cell: u64) -> Head {
    txn.get(&head_key(family, cell))
        .map_or_else(Head::default, |bytes| decode(&bytes))
}

/// What the sender seals next on the channel to `to_cell`: (sequence, previous hash).
pub(crate) fn outbox_head(txn: &impl Txn, to_cell: u64) -> (u64, Vec<u8>) {
    let h = head(txn, OUTBOX, to_cell);
    (h.seq.max(1), h.hash_or_zero())
}

/// One sealed envelope to queue.
pub(crate) struct Send<'a> {
    /// The receiving cell.
    pub(crate) to_cell: u64,
    /// Its channel sequence.
    pub(crate) seq: u64,
    /// The hash of the previous envelope on the channel.
    pub(crate) prev_hash: &'a [u8],
    /// Its own hash.
    pub(crate) hash: &'a [u8],
    /// The signed envelope bytes (opaque here).
    pub(crate) envelope: &'a [u8],
    /// The cell-tier task it carries.
    pub(crate) task_id: &'a str,
    /// The delivery count the sender saw.
    pub(crate) delivery_count: u32,
}

/// Queue a sealed envelope carrying a cell-tier task, taking the task off the cell tier.
pub(crate) fn send(txn: &mut impl Txn, now_ms: u64, send: &Send<'_>) -> Outcome {
    let (next, last) = outbox_head(txn, send.to_cell);
    if send.seq != next || send.prev_hash != last.as_slice() {
        return Outcome::HandoffConflict { next_seq: next };
    }
    let pending = txn.scan(
        &head_key(OUTBOX_ITEM, send.to_cell),
        &keys::prefix_end(&head_key(OUTBOX_ITEM, send.to_cell)),
        OUTBOX_PENDING_MAX,
    );
    if pending.len() >= OUTBOX_PENDING_MAX {
        return Outcome::HandoffConflict { next_seq: next };
    }
    if let Err(reason) = taskboard::take_for_handoff(txn, now_ms, send.task_id, send.delivery_count)
    {
        return Outcome::HandoffSkipped { reason };
    }
    txn.put(
        &item_key(send.to_cell, send.seq),
        &encode(&send.envelope.to_vec()),
    );
    let advanced = Head {
        seq: send.seq + 1,
        hash: send.hash.to_vec(),
    };
    txn.put(&head_key(OUTBOX, send.to_cell), &encode(&advanced));
    clear(txn, &task_cause(send.task_id));
    Outcome::HandoffQueued { seq: send.seq }
}

/// Spill due cell-tier task `task_id` onto its team's fabric queue on this same cell, in one
/// apply: off the cell tier, onto the queue, which admits the team's members (as a handoff
/// would; the team's settings when it still exists, else the task's own).
pub(crate) fn spill_local(
    txn: &mut impl Txn,
    now_ms: u64,
    task_id: &str,
    delivery_count: u32,
) -> Outcome {
    let (task, task_settings) =
        match taskboard::take_for_handoff(txn, now_ms, task_id, delivery_count) {
            Ok(taken) => taken,
            Err(reason) => return Outcome::HandoffSkipped { reason },
        };
    let (settings, admitted) = match crate::team::load(txn, &task.team) {
        Some(team) => (team.settings, team.members),
        None => (task_settings, Vec::new()),
    };
    let task_id = taskboard::receive_fabric(txn, now_ms, &task.team, &task, settings, &admitted);
    clear(txn, &task_cause(&task.id));
    Outcome::HandoffAccepted { seq: 0, task_id }
}

/// The receiver applied (or already had) everything up to `seq`: forget those envelopes.
pub(crate) fn ack(txn: &mut impl Txn, to_cell: u64, seq: u64) -> Outcome {
    let start = head_key(OUTBOX_ITEM, to_cell);
    let end = item_key(to_cell, seq.saturating_add(1));
    let rows = txn.scan(&start, &end, OUTBOX_PENDING_MAX);
    for (key, _) in &rows {
        txn.delete(key);
    }
    Outcome::HandoffAcked {
        dropped: rows.len() as u32,
    }
}

/// Unacknowledged envelopes to `to_cell` from `from_seq` on, in order.
pub(crate) fn pending(
    txn: &impl Txn,
    to_cell: u64,
    from_seq: u64,
    limit: usize,
) -> Vec<(u64, Vec<u8>)> {
    txn.scan(
        &item_key(to_cell, from_seq),
        &keys::prefix_end(&head_key(OUTBOX_ITEM, to_cell)),
        limit,
    )
    .into_iter()
    .map(|(key, value)| {
        let seq = u64::from_be_bytes(key[9..17].try_into().expect("outbox key holds a seq"));
        (seq, decode(&value))
    })
    .collect()
}

/// Receiving cells with unacknowledged envelopes.
pub(crate) fn channels(txn: &impl Txn) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    let mut from = vec![OUTBOX_ITEM];
    loop {
        let Some((key, _)) = txn.scan(&from, &[OUTBOX_ITEM + 1], 1).pop() else {
            return out;
        };
        let cell = u64::from_be_bytes(key[1..9].try_into().expect("outbox key holds a cell"));
        out.push(cell);
        from = head_key(OUTBOX_ITEM, cell.saturating_add(1));
        if cell == u64::MAX {
            return out;
        }
    }
}

/// One envelope arriving, already verified by the node.
pub(crate) struct Receive<'a> {
    /// The sending cell.
    pub(crate) from_cell: u64,
    /// Its channel sequence.
    pub(crate) seq: u64,
    /// The previous hash it names.
    pub(crate) prev_hash: &'a [u8],
    /// Its hash.
    pub(crate) hash: &'a [u8],
    /// The fabric queue it goes to.
    pub(crate) queue: &'a str,
    /// The task.
    pub(crate) task: &'a TaskView,
    /// The origin team's board settings.
    pub(crate) settings: BoardSettings,
    /// Agents admitted to the queue (the origin team's members and ancestors).
    pub(crate) admitted: &'a [String],
}

/// Apply an envelope that extends the channel's chain; answer duplicates again; refuse
/// the rest with the [`chain`] check's typed refusal, raising an alarm on a fork or a
/// broken chain.
pub(crate) fn receive(txn: &mut impl Txn, now_ms: u64, r: &Receive<'_>) -> Outcome {
    let h = head(txn, INBOX, r.from_cell);
    let at = chain::Head {
        seq: h.seq,
        hash: &h.hash,
    };
    let link = chain::Link {
        seq: r.seq,
        prev_hash: r.prev_hash,
        hash: r.hash,
    };
    match chain::check(at, link) {
        Ok(ChainStep::Duplicate) => Outcome::HandoffDuplicate { seq: r.seq },
        Ok(ChainStep::Accept) => accept(txn, now_ms, r),
        Err(refusal) => {
            if refusal.raises_alarm() {
                let text = alarm_text(r.from_cell, h.seq, &refusal);
                raise(txn, now_ms, text, Some(&channel_cause(r.from_cell)));
            }
            Outcome::HandoffRefused {
                refusal,
                expected_seq: at.next_seq(),
            }
        }
    }
}

/// Put the envelope's task on its fabric queue and move the channel's head to it.
fn accept(txn: &mut impl Txn, now_ms: u64, r: &Receive<'_>) -> Outcome {
    let task_id = taskboard::receive_fabric(txn, now_ms, r.queue, r.task, r.settings, r.admitted);
    let advanced = Head {
        seq: r.seq,
        hash: r.hash.to_vec(),
    };
    txn.put(&head_key(INBOX, r.from_cell), &encode(&advanced));
    // The channel carries envelopes again: the operator's reset of it is done.
    clear(txn, &reset_cause(r.from_cell));
    Outcome::HandoffAccepted {
        seq: r.seq,
        task_id,
    }
}

/// The alarm a refusal raises on the channel from `from_cell`, whose head is at `head_seq`.
fn alarm_text(from_cell: u64, head_seq: u64, refusal: &HandoffRefusal) -> String {
    match refusal {
        HandoffRefusal::Fork { seq } => format!(
            "fork on the channel from cell {from_cell}: sequence {seq} arrived with another hash"
        ),
        HandoffRefusal::BrokenChain { seq } => format!(
            "broken chain on the channel from cell {from_cell}: sequence {seq} does not follow \
             {head_seq}"
        ),
        other => format!("{other} on the channel from cell {from_cell}"),
    }
}

/// Set the head of the channel from `from_cell` to (`seq`, `hash`): the operator's repair
/// of a channel a forged envelope poisoned. The reset itself is kept as an alarm.
pub(crate) fn reset(
    txn: &mut impl Txn,
    now_ms: u64,
    from_cell: u64,
    seq: u64,
    hash: &[u8],
) -> Outcome {
    let before = head(txn, INBOX, from_cell);
    let after = Head {
        seq,
        hash: hash.to_vec(),
    };
    txn.put(&head_key(INBOX, from_cell), &encode(&after));
    // The reset repairs what a fork or broken chain poisoned; it stays an alarm itself
    // until the channel carries an envelope again.
    clear(txn, &channel_cause(from_cell));
    let text = format!(
        "channel from cell {from_cell} reset by the operator: head {} -> {seq}",
        before.seq
    );
    raise(txn, now_ms, text, Some(&reset_cause(from_cell)));
    Outcome::HandoffReset {
        from_cell,
        before_seq: before.seq,
        seq,
    }
}

/// Record a handoff that could not be made (no signing key, …): never skipped silently.
pub(crate) fn failed(txn: &mut impl Txn, now_ms: u64, task_id: &str, reason: &str) -> Outcome {
    let text = format!("handoff of task {task_id} failed: {reason}");
    raise(txn, now_ms, text, Some(&task_cause(task_id)));
    Outcome::HandoffFailed {
        reason: reason.to_string(),
    }
}

#[derive(Serialize, Deserialize)]
struct Alarm {
    /// When it was last raised.
    at_ms: u64,
    text: String,
    /// How many times in a row it was raised.
    count: u64,
}

fn task_cause(task_id: &str) -> String {
    format!("task {task_id}")
}

fn channel_cause(from_cell: u64) -> String {
    format!("channel {from_cell}")
}

fn reset_cause(from_cell: u64) -> String {
    format!("reset {from_cell}")
}

fn cause_key(cause: &str, seq: Option<u64>) -> Vec<u8> {
    let mut key = vec![ALARM_CAUSE];
    keys::push_str(&mut key, cause.as_bytes());
    if let Some(seq) = seq {
        keys::push_u64(&mut key, seq);
    }
    key
}

/// Record an alarm, with the `cause` that clears it when it goes away. The same alarm
/// raised again right after the last one (a poisoned channel refused on every delivery
/// round) only counts up, so one stuck channel cannot push every other alarm out of the
/// list.
fn raise(txn: &mut impl Txn, now_ms: u64, text: String, cause: Option<&str>) {
    let last: u64 = txn.get(&[ALARM_HEAD]).map_or(0, |b| decode(&b));
    if last > 0
        && let Some(bytes) = txn.get(&head_key(ALARM, last))
    {
        let mut alarm: Alarm = decode(&bytes);
        if alarm.text == text {
            alarm.at_ms = now_ms;
            alarm.count = alarm.count.saturating_add(1);
            txn.put(&head_key(ALARM, last), &encode(&alarm));
            return;
        }
    }
    let seq = last + 1;
    txn.put(&[ALARM_HEAD], &encode(&seq));
    txn.put(
        &head_key(ALARM, seq),
        &encode(&Alarm {
            at_ms: now_ms,
            text,
            count: 1,
        }),
    );
    if let Some(cause) = cause {
        txn.put(&cause_key(cause, Some(seq)), &[]);
    }
    if seq > ALARMS_KEPT_MAX as u64 {
        txn.delete(&head_key(ALARM, seq - ALARMS_KEPT_MAX as u64));
    }
}

/// The cause went away: its open alarms leave the list.
fn clear(txn: &mut impl Txn, cause: &str) {
    let prefix = cause_key(cause, None);
    let end = keys::prefix_end(&prefix);
    for (key, _) in txn.scan(&prefix, &end, ALARMS_KEPT_MAX) {
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&key[key.len() - 8..]);
        txn.delete(&head_key(ALARM, u64::from_be_bytes(seq)));
        txn.delete(&key);
    }
}

/// The open alarms this cell raised, oldest first: (time last raised, text; an alarm
/// raised several times in a row says how often). An alarm whose cause went away is gone.
pub(crate) fn alarms(txn: &impl Txn) -> Vec<(u64, String)> {
    txn.scan(&[ALARM], &[ALARM + 1], ALARMS_KEPT_MAX)
        .into_iter()
        .map(|(_, value)| {
            let alarm: Alarm = decode(&value);
            match alarm.count {
                0 | 1 => (alarm.at_ms, alarm.text),
                n => (alarm.at_ms, format!("{} (raised {n} times)", alarm.text)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;
    use crate::types::{TaskState, Tier};

    const FROM: u64 = 3;
    const ZERO: [u8; 32] = [0; 32];

    fn task(id: &str) -> TaskView {
        TaskView {
            id: id.to_string(),
            team: "q".to_string(),
            tier: Tier::Cell,
            state: TaskState::Ready,
            body: b"body".to_vec(),
            delivery_count: 0,
            worker: None,
            fence: 0,
            deadline_ms: 0,
            posted_ms: 0,
            failures: Vec::new(),
            result: Vec::new(),
            spill_after_ms: 0,
        }
    }

    /// Receive envelope `seq` (previous hash `prev`, hash `hash`) from `FROM` at 1 s.
    fn take(txn: &mut MemTxn, seq: u64, prev: &[u8], hash: &[u8]) -> Outcome {
        let task = task(&format!("x-{seq}"));
        let r = Receive {
            from_cell: FROM,
            seq,
            prev_hash: prev,
            hash,
            queue: "q",
            task: &task,
            settings: BoardSettings::default(),
            admitted: &[],
        };
        receive(txn, 1_000, &r)
    }

    /// A channel from `FROM` that applied envelope 1 (hash `[1; 32]`).
    fn channel_at_one() -> MemTxn {
        let mut txn = MemTxn::default();
        let first = take(&mut txn, 1, &ZERO, &[1; 32]);
        assert!(
            matches!(first, Outcome::HandoffAccepted { seq: 1, .. }),
            "{first:?}"
        );
        txn
    }

    fn refused(refusal: HandoffRefusal, expected_seq: u64) -> Outcome {
        Outcome::HandoffRefused {
            refusal,
            expected_seq,
        }
    }

    #[test]
    fn a_fork_and_a_broken_chain_raise_alarms() {
        let mut txn = channel_at_one();
        let fork = take(&mut txn, 1, &ZERO, &[9; 32]);
        assert_eq!(fork, refused(HandoffRefusal::Fork { seq: 1 }, 2));
        let broken = take(&mut txn, 2, &[7; 32], &[2; 32]);
        assert_eq!(broken, refused(HandoffRefusal::BrokenChain { seq: 2 }, 2));
        let texts: Vec<String> = alarms(&txn).into_iter().map(|(_, text)| text).collect();
        assert_eq!(
            texts,
            [
                "fork on the channel from cell 3: sequence 1 arrived with another hash",
                "broken chain on the channel from cell 3: sequence 2 does not follow 1",
            ]
        );
        // Nothing was applied: the next linked envelope still goes through.
        let next = take(&mut txn, 2, &[1; 32], &[2; 32]);
        assert!(
            matches!(next, Outcome::HandoffAccepted { seq: 2, .. }),
            "{next:?}"
        );
    }

    #[test]
    fn a_gap_a_duplicate_and_sequence_zero_raise_no_alarm() {
        let mut txn = channel_at_one();
        let gap = HandoffRefusal::Gap {
            expected_seq: 2,
            got_seq: 4,
        };
        assert_eq!(take(&mut txn, 4, &[3; 32], &[4; 32]), refused(gap, 2));
        assert_eq!(
            take(&mut txn, 1, &ZERO, &[1; 32]),
            Outcome::HandoffDuplicate { seq: 1 }
        );
        let zero = refused(HandoffRefusal::ZeroSequence, 2);
        assert_eq!(take(&mut txn, 0, &ZERO, &[1; 32]), zero);
        assert!(alarms(&txn).is_empty(), "{:?}", alarms(&txn));
    }

    #[test]
    fn sequence_zero_on_a_fresh_channel_is_refused_not_a_duplicate() {
        let mut txn = MemTxn::default();
        let zero = refused(HandoffRefusal::ZeroSequence, 1);
        assert_eq!(take(&mut txn, 0, &ZERO, &[]), zero);
        assert_eq!(take(&mut txn, 0, &ZERO, &ZERO), zero);
        assert!(alarms(&txn).is_empty());
        let first = take(&mut txn, 1, &ZERO, &[1; 32]);
        assert!(
            matches!(first, Outcome::HandoffAccepted { seq: 1, .. }),
            "{first:?}"
        );
    }

    #[test]
    fn an_alarm_leaves_the_list_when_its_cause_goes_away() {
        let mut txn = channel_at_one();
        take(&mut txn, 1, &ZERO, &[9; 32]);
        failed(&mut txn, 2_000, "q-7", "no signing key");
        assert_eq!(alarms(&txn).len(), 2);
        // The operator's reset repairs the forked channel: the fork alarm goes, the reset
        // is an alarm until the channel carries an envelope again.
        reset(&mut txn, 3_000, FROM, 1, &[1; 32]);
        let texts: Vec<String> = alarms(&txn).into_iter().map(|(_, t)| t).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(
            texts[0].starts_with("handoff of task q-7 failed"),
            "{texts:?}"
        );
        assert!(texts[1].contains("reset by the operator"), "{texts:?}");
        let next = take(&mut txn, 2, &[1; 32], &[2; 32]);
        assert!(matches!(next, Outcome::HandoffAccepted { .. }), "{next:?}");
        assert_eq!(alarms(&txn).len(), 1);
        // The failed handoff was made later (what `send` records): nothing is left.
        clear(&mut txn, &task_cause("q-7"));
        assert!(alarms(&txn).is_empty(), "{:?}", alarms(&txn));
    }

    /// `HandoffLocal` is the spill mover's: an agent, the operator or an anonymous caller
    /// naming it is refused as server-only and the store is unchanged; a task that is not
    /// on the cell tier is skipped for the server, never invented.
    #[test]
    fn only_a_server_spills_locally() {
        let mut txn = MemTxn::default();
        let stamp = crate::testkit::stamp_at(1, 1_000);
        let command = crate::Command::HandoffLocal {
            task_id: "t-1".into(),
            delivery_count: 0,
        };
        let before = txn.clone();
        let callers = [
            crate::access::Caller::Agent("mallory".into()),
            crate::access::Caller::Operator,
            crate::access::Caller::Anonymous,
        ];
        for caller in callers {
            let request = crate::Request::by(caller, Some("k".into()), command.clone());
            let applied = crate::apply(&mut txn, stamp, &request);
            assert!(
                matches!(applied.outcome, Outcome::Forbidden { .. }),
                "{applied:?}"
            );
        }
        assert_eq!(txn, before, "a refused spill changes nothing");
        let server = crate::Request::server(None, command);
        let applied = crate::apply(&mut txn, stamp, &server);
        assert!(
            matches!(applied.outcome, Outcome::HandoffSkipped { .. }),
            "{applied:?}"
        );
    }
}
