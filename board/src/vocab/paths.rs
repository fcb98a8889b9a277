//! The paths plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

/// A fence for a refusal's message.
fn show(current: Option<u64>) -> String {
    current.map_or_else(|| "none (not held)".to_string(), |f| f.to_string())
}

/// One path granted to the caller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathGrant {
    /// The pattern, as reserved.
    pub path: String,
    /// Exclusive (`true`) or shared.
    pub exclusive: bool,
    /// The grant's fence (kept by a renewal).
    pub fence: u64,
    /// When it runs out (stamp time).
    pub expires_at_ms: u64,
    /// The caller already held it in this mode: only its deadline moved.
    pub renewed: bool,
}

/// One path not granted, and a reservation of another holder it conflicts with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathConflict {
    /// The pattern asked for.
    pub path: String,
    /// Who holds the conflicting reservation.
    pub holder: String,
    /// The conflicting reservation's pattern.
    pub held: String,
    /// Whether that reservation is exclusive.
    pub exclusive: bool,
    /// When it runs out unless renewed.
    pub expires_at_ms: u64,
}

/// Why a reserve or release was refused as a whole; nothing changed.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(remote = "Self")]
pub enum PathRefusal {
    /// The presented fence is not the caller's current one on `path`.
    #[error("stale_fence: fence {presented} is stale for {path:?}, current is {}", show(*current))]
    StaleFence {
        /// The path.
        path: String,
        /// The fence presented.
        presented: u64,
        /// The caller's current fence on it; `None` when it holds it no longer.
        current: Option<u64>,
    },
    /// Only the holder releases a reservation, and the caller holds none on `path`.
    #[error("not_holder: {path:?} is held by {holder}, not by the caller")]
    NotHolder {
        /// The path.
        path: String,
        /// One of its holders.
        holder: String,
    },
    /// The repository already holds the most reservations.
    #[error("repo_full: the repository already holds {max} reservations")]
    RepoFull {
        /// The bound (`PATH_RESERVATIONS_PER_REPO_MAX`).
        max: u32,
    },
}

crate::codes::stable_codes! {
    PathRefusal {
        0 => StaleFence,
        1 => NotHolder,
        2 => RepoFull,
    }
}

/// One live reservation as a read shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationView {
    /// The repository.
    pub repo: String,
    /// The pattern.
    pub path: String,
    /// Who holds it (an agent's name, or `operator`).
    pub holder: String,
    /// Exclusive (`true`) or shared.
    pub exclusive: bool,
    /// Its fence.
    pub fence: u64,
    /// When it runs out unless renewed.
    pub expires_at_ms: u64,
}
