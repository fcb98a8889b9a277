//! Mailboxes: numbered messages to one agent, kept by the team whose board sent them.
//!
//! A mailbox lives with its team (family, team, agent), so a board's notice to the team's
//! supervisor is written on the team's cell in the same apply that caused it, and moves
//! with the team's range. Sequence numbers are gap-free per mailbox, from 1; the head
//! record outlives pruned messages, so a sequence number is never reused. At most
//! `limits::MAILBOX_MESSAGES_MAX` messages are kept: a send beyond it drops the oldest.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::keys::{self, MAIL, MAIL_HEAD};
use crate::limits::{LIST_ROWS_MAX, MAILBOX_MESSAGES_MAX};
use crate::query::{MailboxMessage, MessageKind};
use crate::txn::Txn;

#[derive(Serialize, Deserialize)]
struct Head {
    /// Sequence of the next message.
    next_seq: u64,
    /// Sequence of the oldest kept message (`== next_seq` when none is kept).
    oldest_seq: u64,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    from: String,
    kind: MessageKind,
    #[serde(with = "serde_bytes")]
    body: Vec<u8>,
    at_ms: u64,
}

/// One message to send.
pub(crate) struct Outgoing {
    /// The sender.
    pub(crate) from: String,
    /// What it is about.
    pub(crate) kind: MessageKind,
    /// Human-readable text.
    pub(crate) body: String,
    /// Stamp time.
    pub(crate) at_ms: u64,
}

fn message_key(team: &str, agent: &str, seq: u64) -> Vec<u8> {
    let mut out = keys::mailbox(MAIL, team, agent);
    keys::push_u64(&mut out, seq);
    out
}

/// Append `message` to `agent`'s mailbox kept by `team`; returns its sequence number.
pub(crate) fn send(txn: &mut impl Txn, team: &str, agent: &str, message: Outgoing) -> u64 {
    let head_key = keys::mailbox(MAIL_HEAD, team, agent);
    let mut head = txn.get(&head_key).map_or(
        Head {
            next_seq: 1,
            oldest_seq: 1,
        },
        |bytes| decode(&bytes),
    );
    let seq = head.next_seq;
    let stored = Stored {
        from: message.from,
        kind: message.kind,
        body: message.body.into_bytes(),
        at_ms: message.at_ms,
    };
    txn.put(&message_key(team, agent, seq), &encode(&stored));
    head.next_seq += 1;
    if head.next_seq - head.oldest_seq > MAILBOX_MESSAGES_MAX {
        txn.delete(&message_key(team, agent, head.oldest_seq));
        head.oldest_seq += 1;
    }
    txn.put(&head_key, &encode(&head));
    seq
}

/// Messages of `agent`'s mailbox kept by `team` with `seq > after_seq`, in order.
pub(crate) fn list(
    txn: &impl Txn,
    team: &str,
    agent: &str,
    after_seq: u64,
    limit: usize,
) -> Vec<MailboxMessage> {
    let prefix = keys::mailbox(MAIL, team, agent);
    let start = message_key(team, agent, after_seq.saturating_add(1));
    let end = keys::prefix_end(&prefix);
    txn.scan(&start, &end, limit.min(LIST_ROWS_MAX))
        .into_iter()
        .map(|(key, value)| {
            let seq_bytes: [u8; 8] = key[key.len() - 8..].try_into().expect("seq is a u64");
            let stored: Stored = decode(&value);
            MailboxMessage {
                seq: u64::from_be_bytes(seq_bytes),
                from: stored.from,
                kind: stored.kind,
                body: stored.body,
                at_ms: stored.at_ms,
            }
        })
        .collect()
}

/// Delete up to `budget` mailbox rows kept by `team` (messages first, then heads);
/// returns the rows deleted and whether none is left.
pub(crate) fn purge(txn: &mut impl Txn, team: &str, budget: usize) -> (u32, bool) {
    let mut removed = 0usize;
    for family in [MAIL, MAIL_HEAD] {
        let start = keys::named(family, team);
        for (key, _) in txn.scan(&start, &keys::prefix_end(&start), budget - removed) {
            txn.delete(&key);
            removed += 1;
        }
    }
    let left = [MAIL, MAIL_HEAD].into_iter().any(|family| {
        let start = keys::named(family, team);
        !txn.scan(&start, &keys::prefix_end(&start), 1).is_empty()
    });
    (u32::try_from(removed).expect("budget fits u32"), !left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn notice(at_ms: u64) -> Outgoing {
        Outgoing {
            from: "board/t".into(),
            kind: MessageKind::DeadLetter {
                task_id: "t-1".into(),
                delivery_count: 1,
            },
            body: "dead".into(),
            at_ms,
        }
    }

    #[test]
    fn sequences_are_gap_free_and_the_oldest_goes_first() {
        let mut txn = MemTxn::default();
        let total = MAILBOX_MESSAGES_MAX + 2;
        for at in 1..=total {
            assert_eq!(send(&mut txn, "t", "sup", notice(at)), at);
        }
        let kept = list(&txn, "t", "sup", 0, LIST_ROWS_MAX);
        assert_eq!(kept.len() as u64, MAILBOX_MESSAGES_MAX);
        assert_eq!(kept[0].seq, 3);
        assert_eq!(list(&txn, "t", "sup", total - 1, 10).len(), 1);
        assert!(list(&txn, "t", "other", 0, 10).is_empty());
        let (removed, done) = purge(&mut txn, "t", 10);
        assert_eq!((removed, done), (10, false));
        let (_, done) = purge(&mut txn, "t", LIST_ROWS_MAX);
        assert!(done);
        assert!(txn.map.is_empty(), "left {:?}", txn.map);
    }
}
