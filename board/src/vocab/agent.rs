//! The agent plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

/// Why a registration was refused.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(remote = "Self")]
pub enum AgentRefusal {
    /// Another token holds the name.
    #[error("agent name {agent:?} is taken")]
    NameTaken {
        /// The name asked for.
        agent: String,
    },
    /// The name differs from an existing agent's only in ways people cannot see.
    #[error("reserved_name: {agent:?} looks like the existing agent {existing:?}")]
    ReservedName {
        /// The name asked for.
        agent: String,
        /// The existing agent's name.
        existing: String,
    },
}

crate::codes::stable_codes! {
    AgentRefusal {
        0 => NameTaken,
        1 => ReservedName,
    }
}
