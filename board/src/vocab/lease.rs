//! The lease plane's vocabulary (see `crate::vocab`).

use serde::{Deserialize, Serialize};

/// Who a coordination resource belongs to, and its name: `local/Ship::deploy_slot/prod`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceId {
    /// `local/<Workflow>`, `shared`, or any caller-chosen namespace.
    pub owner: String,
    /// The declared resource name (lease, counter or ledger name).
    pub name: String,
    /// The key value (a lease key, a counter key, a ledger partition).
    pub key: String,
}
