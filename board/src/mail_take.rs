//! A mail cycle in one apply: `take` acknowledges what the reader handled and hands it the
//! next messages in the same command (`Command::MailTake`).
//!
//! Each take opens a **window**: the sequence range of the messages it returned, hidden
//! from other takes until the window's end. A message the reader does not acknowledge (by a
//! later take's `ack_through` or a `MailAck`) before then is taken again: delivery is at
//! least once, as with the read-then-ack path, and a reader admits each message id once.
//!
//! - Who may take: whoever may read the mailbox ([`crate::mail::guard_read`]); a refused
//!   take changes nothing (not even its acknowledgement).
//! - What a take returns: the deliverable messages (not quarantined, or released) after
//!   the acknowledged ones, skipping hidden ones, in sequence order, at most `max`, and
//!   never across a hidden window once it has one: so its own window holds no message of
//!   another open window.
//! - Windows live in one row per mailbox (`MBOX_TAKE`), beside the mailbox's head, and
//!   move with it. Ended windows are dropped at the next take. At most
//!   [`MAIL_TAKE_WINDOWS_MAX`] are open; past it the newest one widens to take the new
//!   messages in (they stay hidden a little longer, never shorter).
//! - Reading (`MailInbox`) and `MailAck` ignore windows: a read shows every waiting
//!   message, an acknowledgement removes whatever it names.
//!
//! The row's encoding is pinned: version byte 1, then the windows as postcard
//! `(first, last, until_ms)` triples (`the_window_row_is_pinned`).

use serde::{Deserialize, Serialize};

use crate::access::Caller;
use crate::codec::{decode, encode};
use crate::keys::{self, MBOX_MSG, MBOX_TAKE};
use crate::limits::{LIST_ROWS_MAX, MAIL_TAKE_MAX, MAIL_TAKE_WINDOWS_MAX, MAIL_VISIBILITY_MS_MAX};
use crate::mail::{self, Address, MailView};
use crate::txn::Txn;
use crate::types::Outcome;

/// What one take asks for.
pub(crate) struct Take {
    pub(crate) ack_through: Option<u64>,
    pub(crate) max: u32,
    pub(crate) visibility_ms: u64,
}

/// One open window: messages `first..=last` are hidden from takes until `until_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Window {
    first: u64,
    last: u64,
    until_ms: u64,
}

#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Windows {
    open: Vec<Window>,
}

impl Windows {
    /// The open window hiding `seq`, if any.
    fn hiding(&self, seq: u64) -> Option<&Window> {
        self.open.iter().find(|w| w.first <= seq && seq <= w.last)
    }

    fn add(&mut self, window: Window) {
        let full = self.open.len() >= MAIL_TAKE_WINDOWS_MAX;
        match self.open.last_mut() {
            Some(newest) if full => {
                newest.first = newest.first.min(window.first);
                newest.last = newest.last.max(window.last);
                newest.until_ms = newest.until_ms.max(window.until_ms);
            }
            _ => self.open.push(window),
        }
        self.open.sort_by_key(|w| w.first);
    }
}

/// A take's bounds, checked before it is proposed.
pub(crate) fn check(max: u32, visibility_ms: u64) -> Result<(), String> {
    if max == 0 || max > MAIL_TAKE_MAX {
        return Err(format!(
            "a take returns 1 to {MAIL_TAKE_MAX} messages, not {max}"
        ));
    }
    if visibility_ms == 0 || visibility_ms > MAIL_VISIBILITY_MS_MAX {
        return Err(format!(
            "a visibility window is 1 to {MAIL_VISIBILITY_MS_MAX} ms, not {visibility_ms}"
        ));
    }
    Ok(())
}

fn row_key(address: &Address) -> Vec<u8> {
    keys::named(MBOX_TAKE, &address.code())
}

/// Forget `address`'s windows (its mailbox is purged).
pub(crate) fn forget(txn: &mut impl Txn, address: &Address) {
    txn.delete(&row_key(address));
}

/// Acknowledge, then take (see the module docs).
pub(crate) fn take(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    address: &Address,
    take: &Take,
) -> Outcome {
    if let Err(refusal) = mail::guard_read(txn, now_ms, caller, address) {
        return Outcome::MailRefused { refusal };
    }
    let acked = take.ack_through.unwrap_or(0);
    let removed = match take.ack_through {
        Some(through) => mail::remove_through(txn, address, through),
        None => 0,
    };
    let key = row_key(address);
    let mut windows: Windows = txn.get(&key).map(|b| decode(&b)).unwrap_or_default();
    windows
        .open
        .retain(|w| w.until_ms > now_ms && w.last > acked);
    let messages = visible(txn, address, &windows, acked, take.max as usize);
    let visible_until_ms = match (messages.first(), messages.last()) {
        (Some(first), Some(last)) => {
            let until_ms = now_ms.saturating_add(take.visibility_ms);
            windows.add(Window {
                first: first.seq,
                last: last.seq,
                until_ms,
            });
            until_ms
        }
        _ => 0,
    };
    match windows.open.is_empty() {
        true => txn.delete(&key),
        false => txn.put(&key, &encode(&windows)),
    }
    Outcome::MailTaken {
        address: address.code(),
        removed,
        messages,
        visible_until_ms,
    }
}

/// Up to `max` deliverable messages after `acked` that no window hides, in order, never
/// across a hidden one once one is found.
fn visible(
    txn: &impl Txn,
    address: &Address,
    windows: &Windows,
    acked: u64,
    max: usize,
) -> Vec<MailView> {
    let end = keys::prefix_end(&keys::named(MBOX_MSG, &address.code()));
    let mut from = mail::message_key(address, acked.saturating_add(1));
    let mut out: Vec<MailView> = Vec::new();
    'scan: while out.len() < max {
        let rows = txn.scan(&from, &end, LIST_ROWS_MAX);
        let Some((last, _)) = rows.last() else { break };
        let full = rows.len() == LIST_ROWS_MAX;
        from = mail::after(last);
        for (key, value) in rows {
            let message = mail::view_of(address, &key, &value);
            if let Some(window) = windows.hiding(message.seq) {
                if !out.is_empty() {
                    break 'scan;
                }
                from = mail::message_key(address, window.last.saturating_add(1));
                continue 'scan;
            }
            if !message.quarantined() {
                out.push(message);
                if out.len() == max {
                    break 'scan;
                }
            }
        }
        if !full {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_row_is_pinned() {
        let windows = Windows {
            open: vec![Window {
                first: 3,
                last: 5,
                until_ms: 300,
            }],
        };
        assert_eq!(encode(&windows), vec![1, 1, 3, 5, 0xac, 0x02]);
        assert_eq!(decode::<Windows>(&[1, 1, 3, 5, 0xac, 0x02]), windows);
    }

    #[test]
    fn a_full_set_widens_its_newest_window() {
        let mut windows = Windows::default();
        for i in 0..MAIL_TAKE_WINDOWS_MAX as u64 {
            windows.add(Window {
                first: 10 * i,
                last: 10 * i + 1,
                until_ms: 100,
            });
        }
        let newest = windows.open[MAIL_TAKE_WINDOWS_MAX - 1];
        windows.add(Window {
            first: 9_000,
            last: 9_004,
            until_ms: 200,
        });
        assert_eq!(windows.open.len(), MAIL_TAKE_WINDOWS_MAX);
        let widened = windows.open[MAIL_TAKE_WINDOWS_MAX - 1];
        assert_eq!((widened.first, widened.last), (newest.first, 9_004));
        assert_eq!(widened.until_ms, 200);
        assert!(windows.hiding(9_002).is_some());
    }
}
