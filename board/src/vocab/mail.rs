//! The mail plane's vocabulary: addresses, message types, bodies, refusals and views.
//! Data only: no logic of the plane lives here (that is `crate::mail`), and this module
//! imports no family module, so `crate::types` and `crate::query` compose it without a
//! cycle.

use serde::{Deserialize, Serialize};

use crate::screen::{Screen, Verdict};

/// What a message is (a closed set: an unknown type does not decode).
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum MailType {
    /// Information; the default.
    Inform,
    /// A question that expects a `reply` naming it in `in_reply_to`.
    Ask,
    /// The answer to an `ask`.
    Reply,
    /// Re-tasks the recipient: only from the recipient's authority.
    Directive,
    /// From a server only (a board's dead letter, …).
    Notice,
}

crate::codes::stable_codes! {
    MailType {
        0 => Inform,
        1 => Ask,
        2 => Reply,
        3 => Directive,
        4 => Notice,
    }
}

/// Where mail goes: an agent, a team or a work-registry entry.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Address {
    /// An agent's own mailbox.
    Agent(String),
    /// A team's mailbox (its members read it).
    Team(String),
    /// A work-registry entry's mailbox (a run, a session, …).
    Entry(String),
}

crate::codes::stable_codes! {
    Address {
        0 => Agent,
        1 => Team,
        2 => Entry,
    }
}

/// How far the recipient may rely on a message.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Trust {
    /// A peer's content: input, never instruction.
    Untrusted,
    /// A directive from the recipient's authority.
    Authority,
    /// A server's notice.
    Server,
}

crate::codes::stable_codes! {
    Trust {
        0 => Untrusted,
        1 => Authority,
        2 => Server,
    }
}

/// What a message says.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailBody {
    /// Its text.
    pub text: String,
    /// An optional JSON document.
    pub payload: Option<String>,
    /// The id of the message it answers (required for a `reply`).
    pub in_reply_to: Option<String>,
    /// Where the sender wants replies (default: its own agent mailbox); a workflow's ask
    /// names its instance's entry.
    pub reply_to: Option<Address>,
    /// A conversation name the sender chose (named on the wire in `cell::convert`).
    pub conversation: Option<String>,
}

/// One message of a batched send ([`crate::Command::MailSendMany`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailItem {
    /// Its type (a `notice` only from a server).
    pub kind: MailType,
    /// What it says.
    pub body: MailBody,
    /// The server's external validator's answer on it.
    pub external: Option<ExternalScreen>,
}

/// What the server's external validator said about a message, as the server that
/// called it puts it into the command (no client request carries it).
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum ExternalScreen {
    /// It answered.
    Verdict {
        /// Its verdict.
        verdict: Verdict,
        /// What it found, in its words (bounded by the server).
        findings: Vec<String>,
    },
    /// It did not answer in time, or its answer did not decode.
    Unavailable {
        /// Why.
        reason: String,
    },
    /// It did not answer, on a server whose setting `mail-screen-fail` is `closed`: the
    /// message is quarantined, never delivered as clean for want of an answer.
    UnavailableClosed {
        /// Why.
        reason: String,
    },
}

crate::codes::stable_codes! {
    ExternalScreen {
        0 => Verdict,
        1 => Unavailable,
        2 => UnavailableClosed,
    }
}

/// Why mail was refused.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum MailRefusal {
    /// The sender may not send this (a directive without authority; a grant, release or
    /// drop by someone who is not the recipient's authority).
    NotAuthorized {
        /// The proven caller.
        caller: String,
        /// The mailbox.
        address: String,
        /// What it tried.
        action: String,
    },
    /// The mailbox holds `MAIL_DEPTH_MAX` messages.
    MailboxFull {
        /// The mailbox.
        address: String,
        /// Messages waiting in it.
        pending: u64,
        /// The limit.
        max: u64,
    },
    /// No such agent (or it was revoked), team or live entry.
    UnknownRecipient {
        /// The mailbox.
        address: String,
    },
    /// The caller may not read or drain this mailbox.
    NotReader {
        /// The proven caller.
        caller: String,
        /// The mailbox.
        address: String,
    },
    /// No such message waits in the mailbox (or it is not quarantined).
    UnknownMessage {
        /// The message id.
        id: String,
    },
    /// The sender already has `MAIL_SENDER_PENDING_MAX` messages waiting in this mailbox.
    SenderQuota {
        /// The mailbox.
        address: String,
        /// The sender.
        sender: String,
        /// The limit.
        max: u64,
    },
    /// The mailbox already grants `MAIL_GRANTS_MAX` senders.
    GrantsFull {
        /// The mailbox.
        address: String,
        /// The limit.
        max: usize,
    },
}

crate::codes::stable_codes! {
    MailRefusal {
        0 => NotAuthorized,
        1 => MailboxFull,
        2 => UnknownRecipient,
        3 => NotReader,
        4 => UnknownMessage,
        5 => SenderQuota,
        6 => GrantsFull,
    }
}

/// One message as a reader sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailView {
    /// `{address}#{seq}`.
    pub id: String,
    /// Gap-free per mailbox, from 1.
    pub seq: u64,
    /// The mailbox (`agent:…`, `team:…`, `entry:…`).
    pub to: String,
    /// The proven sender (an agent's name, `operator` or `server`).
    pub from: String,
    /// Its type.
    pub kind: MailType,
    /// What it says.
    pub body: MailBody,
    /// How far the recipient may rely on it.
    pub trust: Trust,
    /// The screen's verdict at delivery.
    pub screen: Screen,
    /// Stamp time of the delivery.
    pub at_ms: u64,
    /// Who released it from quarantine.
    pub released_by: Option<String>,
}
