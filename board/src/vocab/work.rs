//! The work plane's vocabulary (see `crate::vocab`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What an entry stands for.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum WorkKind {
    /// An interactive agent session.
    Session,
    /// A workflow run (a WhippleScript instance).
    Run,
    /// A sub-agent spawned by another entry.
    Subagent,
    /// A shell command.
    Shell,
    /// A background job.
    Job,
}

crate::codes::stable_codes! {
    WorkKind {
        0 => Session,
        1 => Run,
        2 => Subagent,
        3 => Shell,
        4 => Job,
    }
}

/// A supervision signal, weakest first.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Signal {
    /// Go on.
    Run,
    /// Hold: do no new work until `run`.
    Pause,
    /// Stop and let the lease lapse.
    Stop,
}

crate::codes::stable_codes! {
    Signal {
        0 => Run,
        1 => Pause,
        2 => Stop,
    }
}

/// Why a renewal answers the signal it does.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum SignalReason {
    /// The entry's own signal.
    Own,
    /// An ancestor's signal is stronger.
    Ancestor,
    /// An ancestor's lease lapsed or it was revoked.
    ParentLost,
    /// The cell's quota of the fabric ceiling lapsed: the lease was not extended.
    QuotaLapsed,
}

crate::codes::stable_codes! {
    SignalReason {
        0 => Own,
        1 => Ancestor,
        2 => ParentLost,
        3 => QuotaLapsed,
    }
}

/// Why a registry command was refused. Codes are stable.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(remote = "Self")]
pub enum WorkRefusal {
    /// An admission limit.
    #[error("{} limit: {detail}", limit.code())]
    Limit {
        /// Which limit.
        limit: WorkLimit,
        /// The limit's value.
        max: u64,
        /// What it counts now.
        current: u64,
        /// The limit with its numbers, in words.
        detail: String,
    },
    /// No live entry has this id.
    #[error("work entry {id:?} is unknown (never registered, lapsed or revoked)")]
    UnknownEntry {
        /// The id named.
        id: String,
    },
    /// The caller owns none of the entry's ancestors.
    #[error(
        "not_authorized: agent {caller:?} may not act on work entry {id:?}: only its \
         parent's or an ancestor's owner (for a root, its owner) or the operator may"
    )]
    NotAuthorized {
        /// The caller.
        caller: String,
        /// The entry.
        id: String,
    },
    /// The call carried no identity.
    #[error("anonymous_refused: registering and steering work needs an agent's token")]
    AnonymousRefused,
    /// The class is not configured.
    #[error("resource class {class:?} is not configured (known: {known})")]
    UnknownClass {
        /// The class named.
        class: String,
        /// The configured classes.
        known: String,
    },
}

crate::codes::stable_codes! {
    WorkRefusal {
        0 => Limit,
        1 => UnknownEntry,
        2 => NotAuthorized,
        3 => AnonymousRefused,
        4 => UnknownClass,
    }
}

/// The operator's admission limits. Every cell keeps a copy; the meta cell's
/// `fabric_max` is the one quotas are lent against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkLimits {
    /// Live entries in the whole fabric.
    pub fabric_max: u64,
    /// Live entries on one cell.
    pub cell_max: u64,
    /// Deepest lineage (a root has depth 0).
    pub depth_max: u32,
    /// Live children of one entry.
    pub children_max: u32,
    /// Resource classes with their per-cell maximum.
    pub classes: BTreeMap<String, u64>,
    /// Live entries one agent may hold on one cell (the operator's are not limited).
    pub owner_max: u64,
}

/// The operator's change of the limits: what is named changes, the rest stays.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsUpdate {
    /// New ceiling.
    pub fabric_max: Option<u64>,
    /// New per-cell maximum.
    pub cell_max: Option<u64>,
    /// New deepest lineage.
    pub depth_max: Option<u32>,
    /// New most children per entry.
    pub children_max: Option<u32>,
    /// Classes to add or change, with their per-cell maximum.
    pub classes: BTreeMap<String, u64>,
    /// New per-owner share.
    pub owner_max: Option<u64>,
}

/// One live entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkEntryView {
    /// Its id.
    pub id: String,
    /// What it stands for.
    pub kind: WorkKind,
    /// The agent that owns it.
    pub owner: String,
    /// Its parent, if any.
    pub parent: Option<String>,
    /// Ancestor ids, root first.
    pub lineage: Vec<String>,
    /// 0 for a root.
    pub depth: u32,
    /// Its resource class.
    pub class: String,
    /// The signal its parent (or the operator) set on it.
    pub signal: Signal,
    /// When it registered (ms since the Unix epoch).
    pub created_ms: u64,
    /// When its lease lapses unless renewed.
    pub expires_ms: u64,
    /// Its live children.
    pub children: u32,
    /// The sequence its next child gets.
    pub next_child: u64,
    /// The cell's quota generation it lives in (fabric cells; see [`Quota`]).
    pub generation: u64,
    /// What it may spend, if its parent set a budget.
    pub budget: Option<u64>,
}

/// One control-plane action on this cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditView {
    /// The cell's audit sequence.
    pub seq: u64,
    /// When it applied.
    pub time_ms: u64,
    /// Who acted (an agent, `operator`, `anonymous`).
    pub actor: String,
    /// What was done.
    pub action: AuditAction,
    /// The entry acted on (for a spawn, the parent or the new root).
    pub target: String,
    /// The outcome code (`admitted`, `signalled`, `revoked`, or a refusal's code).
    pub outcome: String,
    /// What changed (the signal, the entries removed, the limit that refused).
    pub detail: String,
    /// The cell that decided (0 as stored; a router listing a fabric fills it in).
    pub cell: u64,
}

/// A cell's quota of the fabric ceiling as the cell holds it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    /// The meta cell's version of the grant installed.
    pub version: u64,
    /// Entries this cell may hold.
    pub total: u64,
    /// When it lapses (cell time, already short of the meta cell's expiry by the skew).
    pub expires_ms: u64,
}

/// What the quota loop needs to know about a cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaView {
    /// Live entries on the cell.
    pub live: u64,
    /// The quota installed (none before the first).
    pub quota: Option<Quota>,
    /// The quota the cell would like: its live entries plus a chunk, within `cell_max`.
    pub want: u64,
    /// Whether the cell is in a fabric (a standalone cell needs no quota).
    pub in_fabric: bool,
}

/// Which admission limit refused a registration.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum WorkLimit {
    /// The fabric's population ceiling (or this cell's quota of it).
    Fabric,
    /// This cell's maximum, in all or for the class.
    Cell,
    /// The deepest lineage.
    Depth,
    /// The most live children of one parent.
    Children,
    /// The most live entries one agent holds on this cell (its share).
    Owner,
}

crate::codes::stable_codes! {
    WorkLimit {
        0 => Fabric,
        1 => Cell,
        2 => Depth,
        3 => Children,
        4 => Owner,
    }
}

/// What an audit row records.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum AuditAction {
    /// A registration (a child under a parent, or a root).
    Register,
    /// A signal set.
    Signal,
    /// A revoke.
    Revoke,
    /// A class change (with or without a budget).
    Scope,
    /// A budget change.
    Budget,
    /// The limits changed.
    Limits,
}

crate::codes::stable_codes! {
    AuditAction {
        0 => Register,
        1 => Signal,
        2 => Revoke,
        3 => Scope,
        4 => Budget,
        5 => Limits,
    }
}
