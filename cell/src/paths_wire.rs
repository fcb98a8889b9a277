//! Path reservations between the board's types and the wire (`whip.v1`): one place for
//! every conversion, used by the service, the CLI and the MCP tools. The board decides;
//! these only translate.

use whip_board::Outcome;
use whip_board::reservation::{PathConflict, PathGrant, ReservationView};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::convert::answered;

/// A reserve's or release's outcome on the wire; `None` for an outcome of another family.
pub fn response(outcome: Outcome) -> Option<pb::PathsResponse> {
    let mut r = pb::PathsResponse::default();
    match outcome {
        Outcome::PathsReserved { granted, conflicts } => {
            (r.code, r.outcome) = answered(Code::PathsReserved);
            r.granted = granted.into_iter().map(grant_pb).collect();
            r.conflicts = conflicts.into_iter().map(conflict_pb).collect();
        }
        Outcome::PathsReleased { released, not_held } => {
            (r.code, r.outcome) = answered(Code::PathsReleased);
            (r.released, r.not_held) = (released, not_held);
        }
        Outcome::PathsRefused { refusal } => {
            (r.code, r.outcome) = answered(Code::PathsRefused);
            (r.refusal, r.message) = (refusal.code().into(), refusal.to_string());
        }
        _ => return None,
    }
    Some(r)
}

fn grant_pb(g: PathGrant) -> pb::PathGrant {
    pb::PathGrant {
        path: g.path,
        exclusive: g.exclusive,
        fence: g.fence,
        expires_at_ms: g.expires_at_ms,
        renewed: g.renewed,
    }
}

fn conflict_pb(c: PathConflict) -> pb::PathConflict {
    pb::PathConflict {
        path: c.path,
        holder: c.holder,
        held: c.held,
        exclusive: c.exclusive,
        expires_at_ms: c.expires_at_ms,
    }
}

/// One reservation on the wire.
pub fn reservation_pb(v: ReservationView) -> pb::PathReservation {
    pb::PathReservation {
        repo: v.repo,
        path: v.path,
        holder: v.holder,
        exclusive: v.exclusive,
        fence: v.fence,
        expires_at_ms: v.expires_at_ms,
    }
}

/// One reservation from the wire (the guard hands these to `reservation::blocking`).
pub fn reservation_view(r: pb::PathReservation) -> ReservationView {
    ReservationView {
        repo: r.repo,
        path: r.path,
        holder: r.holder,
        exclusive: r.exclusive,
        fence: r.fence,
        expires_at_ms: r.expires_at_ms,
    }
}
