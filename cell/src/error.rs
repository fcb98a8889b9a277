//! The errors of a cell call: typed, with one mapping to gRPC status.

use prost::Message;
use serde::{Deserialize, Serialize};
use whip_proto::v1 as pb;

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
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The caller did not prove who it is (no token, a wrong token, no certificate).
    #[error("not authenticated: {0}")]
    Unauthenticated(String),
    /// What the call names does not exist (an unknown team, a lapsed work entry).
    /// Retrying will not help.
    #[error("{0}")]
    NotFound(String),
    /// A range change step came from a driver whose range-admin lease a later driver
    /// superseded (it took the change over): this driver must stop. Retrying will not help.
    #[error("{0}")]
    Superseded(String),
    /// The core refused the call for a reason the client may act on (a name held by
    /// another token, an unknown team): `code` is the typed reason, `message` for people.
    /// Retrying will not help.
    #[error("{message}")]
    Refused {
        /// The typed reason.
        code: whip_board::RefusalCode,
        /// What to print.
        message: String,
    },
}

impl CellError {
    /// A board outcome as a submit answers it: a request the board refused as such (invalid,
    /// forbidden, for another range's epoch) is an error, every other outcome an answer.
    pub fn answer(outcome: whip_board::Outcome) -> Result<whip_board::Outcome, CellError> {
        use whip_board::Outcome;
        match outcome {
            Outcome::Invalid { reason } => Err(CellError::InvalidArgument(reason)),
            Outcome::Forbidden { refusal } => Err(CellError::PermissionDenied(refusal.to_string())),
            Outcome::WrongRange { epoch } => Err(CellError::WrongRange { epoch }),
            Outcome::RangeRefused {
                refusal: refusal @ whip_board::RangeRefusal::Superseded { .. },
            } => Err(CellError::Superseded(refusal.to_string())),
            Outcome::KeyReused { key } => Err(CellError::InvalidArgument(
                whip_board::key_reused_reason(&key),
            )),
            outcome => Ok(outcome),
        }
    }
}

impl CellError {
    /// The typed detail a status carries for this error, if it has one.
    fn detail(&self) -> Option<pb::ErrorDetail> {
        let kind = match self {
            CellError::NotLeader { hint } => {
                pb::error_detail::Kind::NotLeader(pb::NotLeaderDetail {
                    leader_addr: hint.clone().unwrap_or_default(),
                })
            }
            CellError::WrongRange { epoch } => {
                pb::error_detail::Kind::WrongRange(pb::WrongRangeDetail { epoch: *epoch })
            }
            CellError::Refused { code, .. } => pb::error_detail::Kind::Refused(pb::RefusedDetail {
                code: code.as_str().to_string(),
            }),
            _ => return None,
        };
        Some(pb::ErrorDetail { kind: Some(kind) })
    }
}

impl From<CellError> for tonic::Status {
    fn from(err: CellError) -> Self {
        let message = err.to_string();
        match &err {
            CellError::InvalidArgument(m) => tonic::Status::invalid_argument(m.clone()),
            CellError::NotLeader { .. }
            | CellError::WrongRange { .. }
            | CellError::Refused { .. } => {
                let code = match &err {
                    CellError::NotLeader { .. } => tonic::Code::Unavailable,
                    CellError::Refused { code, .. } => refused_status_code(*code),
                    _ => tonic::Code::FailedPrecondition,
                };
                let detail = err
                    .detail()
                    .expect("a detail for these kinds")
                    .encode_to_vec();
                tonic::Status::with_details(code, message, detail.into())
            }
            // The status code says `unavailable` or `internal` already: the message carries
            // only the cause, or a client that prints both would say it twice.
            CellError::Unavailable(m) => tonic::Status::unavailable(m.clone()),
            CellError::Fatal(m) => tonic::Status::internal(m.clone()),
            CellError::PermissionDenied(m) => tonic::Status::permission_denied(m.clone()),
            CellError::Unauthenticated(m) => tonic::Status::unauthenticated(m.clone()),
            CellError::NotFound(m) => tonic::Status::not_found(m.clone()),
            CellError::Superseded(m) => tonic::Status::aborted(m.clone()),
        }
    }
}

/// The error a status's typed detail names, if it carries one that decodes.
pub(crate) fn from_detail(status: &tonic::Status) -> Option<CellError> {
    if status.details().is_empty() {
        return None;
    }
    let detail = pb::ErrorDetail::decode(status.details()).ok()?;
    match detail.kind? {
        pb::error_detail::Kind::NotLeader(d) => Some(CellError::NotLeader {
            hint: (!d.leader_addr.is_empty()).then_some(d.leader_addr),
        }),
        pb::error_detail::Kind::WrongRange(d) => Some(CellError::WrongRange { epoch: d.epoch }),
        // A code this build does not know (a newer server's) is not guessed at: the status
        // code decides, as for a status without a detail.
        pb::error_detail::Kind::Refused(d) => Some(CellError::Refused {
            code: whip_board::RefusalCode::from_code(&d.code)?,
            message: status.message().to_string(),
        }),
    }
}

/// The gRPC status code a refusal travels under (for clients that read only the code).
fn refused_status_code(code: whip_board::RefusalCode) -> tonic::Code {
    use whip_board::RefusalCode as R;
    match code {
        R::NameTaken | R::ReservedName | R::TeamExists | R::Taken => tonic::Code::AlreadyExists,
        R::UnknownTeam | R::UnknownTask => tonic::Code::NotFound,
        R::EnrollmentsExhausted | R::BoardFull => tonic::Code::ResourceExhausted,
        R::NotMember | R::NotSupervisor => tonic::Code::PermissionDenied,
        R::NotClaimed
        | R::StaleFence
        | R::ClaimExpired
        | R::NotReady
        | R::NotDead
        | R::NotLocal => tonic::Code::FailedPrecondition,
    }
}

impl From<tonic::Status> for CellError {
    fn from(status: tonic::Status) -> Self {
        if let Some(err) = from_detail(&status) {
            return err;
        }
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
            tonic::Code::Aborted => CellError::Superseded(status.message().to_string()),
            _ => CellError::Unavailable(status.message().to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_details_survive_the_wire_without_the_message_text() {
        for err in [
            CellError::NotLeader {
                hint: Some("10.0.0.2:7001".into()),
            },
            CellError::NotLeader { hint: None },
            CellError::WrongRange { epoch: 42 },
            CellError::Refused {
                code: whip_board::RefusalCode::NameTaken,
                message: "reworded by a proxy".into(),
            },
        ] {
            let status = tonic::Status::from(err.clone());
            // Only the details carry the fields: a client never parses the message.
            let bare = tonic::Status::with_details(
                status.code(),
                "reworded by a proxy",
                status.details().to_vec().into(),
            );
            assert_eq!(CellError::from(bare), err);
        }
    }

    #[test]
    fn a_cause_crosses_the_wire_once_without_its_code_in_the_message() {
        let cause = "node 1 is not part of an initialized fabric yet";
        for err in [
            CellError::Unavailable(cause.into()),
            CellError::Fatal(cause.into()),
        ] {
            let status = tonic::Status::from(err.clone());
            assert_eq!(status.message(), cause);
            // The client's error reads as the server's: `unavailable: CAUSE`, not twice.
            assert_eq!(CellError::from(status), err);
        }
    }

    #[test]
    fn a_status_without_a_valid_detail_maps_by_its_code() {
        let garbage = tonic::Status::with_details(
            tonic::Code::FailedPrecondition,
            "wrong range: this cell knows epoch 7 for the key",
            vec![0xff, 0xff, 0xff].into(),
        );
        assert!(matches!(
            CellError::from(garbage),
            CellError::Unavailable(_)
        ));
        let plain = tonic::Status::not_found("no such team");
        assert_eq!(
            CellError::from(plain),
            CellError::NotFound("no such team".into())
        );
    }
}
