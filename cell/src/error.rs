//! The errors of a cell call: typed, with one mapping to gRPC status.

use serde::{Deserialize, Serialize};

/// Why a cell could not give an outcome. Business results (held, contended, over) are
/// outcomes, not errors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum CellError {
    /// The request is malformed or out of bounds; retrying will not help.
    #[error("{0}")]
    InvalidArgument(String),
    /// This member is not the leader and did not forward; `hint` is the leader's address.
    #[error("not the leader, leader is {}", hint.as_deref().unwrap_or("unknown"))]
    NotLeader {
        /// The leader's address, if known.
        hint: Option<String>,
    },
    /// No leader could serve the request in time; retry (with the same idempotency key).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The cell's storage failed or it hit a bug (a stopping member is `Unavailable`).
    #[error("fatal: {0}")]
    Fatal(String),
    /// This cell does not serve the key's range at the caller's epoch (fabric mode): the
    /// range moved or is moving, or the caller's range map is stale.
    #[error("wrong range: this cell knows epoch {epoch} for the key")]
    WrongRange {
        /// The epoch the cell knows for the key's point (0 = not owned here).
        epoch: u64,
    },
    /// The caller may not do this: reserved state, a server-only command, or a call that
    /// needs a credential the caller does not hold. Retrying will not help.
    #[error("{0}")]
    PermissionDenied(String),
    /// The caller did not prove who it is (no token, a wrong token, no certificate).
    #[error("{0}")]
    Unauthenticated(String),
    /// What the call names does not exist (an unknown team, a lapsed work entry).
    /// Retrying will not help.
    #[error("{0}")]
    NotFound(String),
}

const WRONG_RANGE_PREFIX: &str = "wrong range: this cell knows epoch ";

impl From<CellError> for tonic::Status {
    fn from(err: CellError) -> Self {
        match &err {
            CellError::InvalidArgument(m) => tonic::Status::invalid_argument(m.clone()),
            CellError::NotLeader { .. } | CellError::Unavailable(_) => {
                tonic::Status::unavailable(err.to_string())
            }
            CellError::Fatal(_) => tonic::Status::internal(err.to_string()),
            CellError::WrongRange { .. } => tonic::Status::failed_precondition(err.to_string()),
            CellError::PermissionDenied(m) => tonic::Status::permission_denied(m.clone()),
            CellError::Unauthenticated(m) => tonic::Status::unauthenticated(m.clone()),
            CellError::NotFound(m) => tonic::Status::not_found(m.clone()),
        }
    }
}

impl From<tonic::Status> for CellError {
    fn from(status: tonic::Status) -> Self {
        match status.code() {
            tonic::Code::InvalidArgument => {
                CellError::InvalidArgument(status.message().to_string())
            }
            tonic::Code::Internal => CellError::Fatal(status.message().to_string()),
            tonic::Code::PermissionDenied => {
                CellError::PermissionDenied(status.message().to_string())
            }
            tonic::Code::Unauthenticated => {
                CellError::Unauthenticated(status.message().to_string())
            }
            tonic::Code::NotFound => CellError::NotFound(status.message().to_string()),
            tonic::Code::FailedPrecondition if status.message().starts_with(WRONG_RANGE_PREFIX) => {
                let rest = &status.message()[WRONG_RANGE_PREFIX.len()..];
                let epoch = rest
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                CellError::WrongRange { epoch }
            }
            _ => CellError::Unavailable(status.message().to_string()),
        }
    }
}
