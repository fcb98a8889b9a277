//! What `whip cell status` shows: leader, term, members, per-voter lag and per-stage write
//! latencies.

use whip_proto::v1 as pb;

use crate::runtime::Cell;

/// A snapshot of this member's view of the cell.
pub fn status(cell: &Cell) -> pb::StatusResponse {
    let m = cell.raft().metrics().borrow().clone();
    let last_log_index = m.last_log_index.unwrap_or(0);
    let membership = m.membership_config.membership();
    let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
    let members = membership
        .nodes()
        .map(|(id, node)| {
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(id))
                .map(|l| l.map_or(0, |l| l.index));
            let matched = if *id == m.id {
                Some(last_log_index)
            } else {
                matched
            };
            pb::MemberStatus {
                id: *id,
                addr: node.addr.clone(),
                voter: voters.contains(id),
                matched_index: matched,
                lag: matched.map(|i| last_log_index.saturating_sub(i)),
            }
        })
        .collect();
    pb::StatusResponse {
        id: m.id,
        leader: m.current_leader,
        term: m.current_term,
        members,
        last_log_index,
        last_applied: m.last_applied.map_or(0, |l| l.index),
        state: format!("{:?}", m.state),
        storage: cell.config().storage.name().to_string(),
        raft_refused: cell.raft_refused(),
        stages: stages(cell),
        hibernating: cell.hibernating(),
        hops: hops(cell),
    }
}

fn hops(cell: &Cell) -> Vec<pb::StageHops> {
    cell.stages()
        .hops()
        .into_iter()
        .map(|(stage, h)| pb::StageHops {
            stage: stage.name().to_string(),
            samples: h.samples,
            thread_switches: h.switches,
        })
        .collect()
}

fn stages(cell: &Cell) -> Vec<pb::StageLatency> {
    cell.stages()
        .summaries()
        .into_iter()
        .map(|(stage, s)| pb::StageLatency {
            stage: stage.name().to_string(),
            count: s.count,
            p50_us: s.p50_us,
            p90_us: s.p90_us,
            p99_us: s.p99_us,
            max_us: s.max_us,
        })
        .collect()
}
