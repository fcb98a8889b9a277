//! The access plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

/// Who a request acts for, as the server proved it.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Caller {
    /// Nobody proven: no agent token, no operator or node certificate.
    #[default]
    Anonymous,
    /// An agent, proven by its token.
    Agent(String),
    /// The operator (or the local user, or a node acting for a client), proven by its
    /// certificate, acting for no agent.
    Operator,
    /// A server on its own behalf (its tick loop, fabric administration, handoffs, identity
    /// registration after it checked the caller's credential).
    Server,
}

crate::codes::stable_codes! {
    Caller {
        0 => Anonymous,
        1 => Agent,
        2 => Operator,
        3 => Server,
    }
}

/// Why a client request was refused before it ran.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum AccessRefusal {
    /// The key is reserved state.
    Reserved {
        /// The key, lossily as text.
        key: String,
    },
    /// The command is sent only by nodes.
    ServerOnly {
        /// The command's name.
        command: String,
    },
    /// The command is the operator's.
    OperatorOnly {
        /// The command's name.
        command: String,
    },
    /// The caller is not proven and the command writes.
    Anonymous,
    /// The caller may not operate `what` (an engine instance, a written-once row).
    NotAuthorized {
        /// What was refused.
        what: String,
        /// Its owner, as the refusal names it.
        owner: String,
    },
    /// The request reached the fabric's meta cell, which serves no client.
    MetaCell,
}

crate::codes::stable_codes! {
    AccessRefusal {
        0 => Reserved,
        1 => ServerOnly,
        2 => OperatorOnly,
        3 => Anonymous,
        4 => NotAuthorized,
        5 => MetaCell,
    }
}
