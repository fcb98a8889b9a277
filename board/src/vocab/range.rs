//! The range plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

/// Why a range step was refused; nothing changed but the cell's admin floor.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(remote = "Self")]
pub enum RangeRefusal {
    /// The step's driver holds a range-admin lease older than one whose steps this cell
    /// already ran: another driver took its change over.
    #[error("superseded: the step's admin fence {fence} is below this cell's {floor}")]
    Superseded {
        /// The step's fence.
        fence: u64,
        /// The highest fence this cell saw.
        floor: u64,
    },
    /// The range is frozen by a move whose driver holds it until `until_ms`.
    #[error("freeze held: the range's move holds it until {until_ms} ms")]
    FreezeHeld {
        /// When the hold ends (stamp ms).
        until_ms: u64,
    },
}

crate::codes::stable_codes! {
    RangeRefusal {
        0 => Superseded,
        1 => FreezeHeld,
    }
}
