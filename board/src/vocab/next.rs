//! The follow-up outbox's vocabulary (see `crate::vocab`; the logic is `crate::next`).

use serde::{Deserialize, Serialize};

/// One follow-up an apply decided, with where it waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Next {
    /// Its sequence number in the deciding cell's outbox.
    pub seq: u64,
    /// The idempotency key its commands carry (`crate::next::follow_up_key`).
    pub key: String,
    /// What must happen.
    pub follow_up: FollowUp,
}

/// What must happen after an apply. Each variant says what comes before it.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum FollowUp {
    /// Purge the fabric queue of `team` (`Command::FabricPurge`, page by page until done),
    /// on the cell owning the queue's name. Before: the team's dissolve finished on its
    /// own cell, so no task of it spills into the queue again.
    PurgeFabricQueue {
        /// The dissolved team (its queue's name).
        team: String,
    },
    /// Revoke `agent`'s identity on its own cell in the name of `by`
    /// (`Command::AgentRevoke`; that cell decides whether `by` may). Before: a work revoke
    /// took down the entries that named the agent.
    RevokeIdentity {
        /// The agent.
        agent: String,
        /// Who revokes it (the revoking agent, or the operator).
        by: String,
    },
    /// Take `agent` out of every team of every data cell (`Command::TeamLeaveAll`). Before:
    /// its identity was revoked on its cell, so it cannot join again.
    LeaveAllTeams {
        /// The agent.
        agent: String,
    },
}

crate::codes::stable_codes! {
    FollowUp {
        0 => PurgeFabricQueue,
        1 => RevokeIdentity,
        2 => LeaveAllTeams,
    }
}
