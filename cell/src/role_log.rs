//! One log line each time a member's role in its cell changes: a campaign, a new leader, a
//! lost leader. An operator reading a node's log after a failover sees when each cell
//! noticed, campaigned and elected, without turning on openraft's debug output.
//!
//! The watch is openraft's server metrics, which change only with the vote, the role, the
//! leader or the membership, so an idle or busy cell costs nothing here between changes.

use openraft::ServerState;

use crate::types::{NodeId, Raft};

/// What a line reports: the parts of the server metrics that make a role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Role {
    state: ServerState,
    term: u64,
    leader: Option<NodeId>,
}

/// Log every role change of `raft` (member of cell `cell`) until the member shuts down.
pub(crate) async fn watch(cell: u64, raft: Raft) {
    let mut metrics = raft.server_metrics();
    drop(raft);
    let role_of = |m: &openraft::metrics::RaftServerMetrics<NodeId, openraft::BasicNode>| Role {
        state: m.state,
        term: m.vote.leader_id().term,
        leader: m.current_leader,
    };
    let mut last = role_of(&metrics.borrow_and_update());
    while metrics.changed().await.is_ok() {
        let now = role_of(&metrics.borrow_and_update());
        if now == last {
            continue;
        }
        match (now.state, now.leader) {
            (ServerState::Candidate, _) => tracing::info!(cell, term = now.term, "campaigning"),
            (ServerState::Leader, _) => tracing::info!(cell, term = now.term, "elected leader"),
            (_, Some(leader)) if last.leader != Some(leader) => {
                tracing::info!(cell, term = now.term, leader, "leader known")
            }
            (_, None) if last.leader.is_some() => {
                tracing::info!(cell, term = now.term, "leader lost")
            }
            _ => {}
        }
        last = now;
    }
}
