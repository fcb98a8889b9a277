//! Whether this server's member of a cell may go on serving a follow stream (a watch).
//!
//! A watch reads the local member's applied state, so a member that stopped receiving the
//! cell's log serves a stream that stays open and silent: removed from the cell, cut off
//! from its leader, or a deposed leader no quorum answers. The decision is a pure function
//! of what the member observes ([`Observed`]) and the time (an input); the watch loop asks
//! it on every heartbeat and ends a stale stream `unavailable`, and the client reopens it
//! on another node.

use crate::limits::WATCH_STALE_MS;
use crate::runtime::Cell;

/// What one member observes of its cell, read from its Raft metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    /// This node is a voter or a learner of the cell's membership.
    pub member: bool,
    /// This member leads the cell.
    pub leading: bool,
    /// This member knows a leader (itself or another).
    pub knows_leader: bool,
    /// As leader: how long since a quorum last acknowledged it (`None`: never).
    pub quorum_ack_ms: Option<u64>,
    /// The member hibernates: its leader is settled and every voter's node answers pings
    /// (`crate::hibernation`), so a quiet quorum is expected.
    pub hibernating: bool,
}

/// Why a member may not serve a follow stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stale {
    /// The member is no longer in the cell's membership.
    NotMember,
    /// The member has known no leader for this long.
    Leaderless { for_ms: u64 },
    /// The member leads, but no quorum acknowledged it for this long.
    Unconfirmed { for_ms: u64 },
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stale::NotMember => write!(f, "this node's member left the cell"),
            Stale::Leaderless { for_ms } => write!(f, "this member knew no leader for {for_ms} ms"),
            Stale::Unconfirmed { for_ms } => {
                write!(f, "no quorum acknowledged this leader for {for_ms} ms")
            }
        }
    }
}

/// The watch loop's memory between two looks: since when the member knows no leader.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Look {
    leaderless_since_ms: Option<u64>,
}

impl Look {
    /// Decide at `now_ms` from `seen`: `Ok` while the member may serve.
    pub(crate) fn judge(&mut self, seen: Observed, now_ms: u64) -> Result<(), Stale> {
        if !seen.member {
            return Err(Stale::NotMember);
        }
        if seen.knows_leader {
            self.leaderless_since_ms = None;
        } else {
            let since = *self.leaderless_since_ms.get_or_insert(now_ms);
            let for_ms = now_ms.saturating_sub(since);
            if for_ms >= WATCH_STALE_MS {
                return Err(Stale::Leaderless { for_ms });
            }
        }
        match (seen.leading, seen.hibernating, seen.quorum_ack_ms) {
            (true, false, Some(for_ms)) if for_ms >= WATCH_STALE_MS => {
                Err(Stale::Unconfirmed { for_ms })
            }
            _ => Ok(()),
        }
    }
}

/// What `member` observes now.
pub(crate) fn observe(member: &Cell) -> Observed {
    let metrics = member.raft().metrics();
    let m = metrics.borrow();
    let me = member.id();
    let in_membership = m.membership_config.membership().get_node(&me).is_some();
    Observed {
        member: in_membership,
        leading: m.current_leader == Some(me),
        knows_leader: m.current_leader.is_some(),
        quorum_ack_ms: m.millis_since_quorum_ack,
        hibernating: member.hibernating(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn follower() -> Observed {
        Observed {
            member: true,
            leading: false,
            knows_leader: true,
            quorum_ack_ms: None,
            hibernating: false,
        }
    }

    #[test]
    fn a_removed_member_is_stale_at_once() {
        let seen = Observed {
            member: false,
            ..follower()
        };
        assert_eq!(Look::default().judge(seen, 5), Err(Stale::NotMember));
    }

    #[test]
    fn a_leaderless_member_serves_through_an_election_then_is_stale() {
        let mut look = Look::default();
        let lost = Observed {
            knows_leader: false,
            ..follower()
        };
        assert_eq!(look.judge(lost, 1_000), Ok(()));
        assert_eq!(look.judge(lost, 1_000 + WATCH_STALE_MS - 1), Ok(()));
        assert_eq!(
            look.judge(lost, 1_000 + WATCH_STALE_MS),
            Err(Stale::Leaderless {
                for_ms: WATCH_STALE_MS
            })
        );
        // A leader found again clears the memory: the next loss counts from its own start.
        assert_eq!(look.judge(follower(), 9_000), Ok(()));
        assert_eq!(look.judge(lost, 9_500), Ok(()));
    }

    #[test]
    fn a_leader_no_quorum_answers_is_stale_unless_it_hibernates() {
        let leader = Observed {
            leading: true,
            quorum_ack_ms: Some(WATCH_STALE_MS),
            ..follower()
        };
        let for_ms = WATCH_STALE_MS;
        assert_eq!(
            Look::default().judge(leader, 0),
            Err(Stale::Unconfirmed { for_ms })
        );
        let asleep = Observed {
            hibernating: true,
            ..leader
        };
        assert_eq!(Look::default().judge(asleep, 0), Ok(()));
        let confirmed = Observed {
            quorum_ack_ms: Some(40),
            ..leader
        };
        assert_eq!(Look::default().judge(confirmed, 0), Ok(()));
    }
}
