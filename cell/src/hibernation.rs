//! Idle cells hibernate: no heartbeats and no election timer while nothing happens.
//!
//! A node hosting a thousand cells spent most of a core on heartbeats and election timers
//! of cells that had nothing to do (BENCHMARKS.md, "Idle cells at 1,000 per node"). A
//! member whose cell made no progress (same term, leader, last log index and applied
//! index) for [`limits::HIBERNATE_QUIET_MS`] turns its openraft tick off: a follower stops
//! timing its leader out, a leader stops heartbeating (the node's heartbeat loop skips it,
//! [`crate::Cell::heartbeat`]).
//!
//! **Who decides.** Each member decides for itself from what it observes; nothing is sent.
//! A follower sleeps once it knows a leader whose node answers the node's pings and its
//! log, term and applied index have not moved for the quiet window. A leader sleeps
//! only when every voter holds its whole log, everything is applied, the next deadline has
//! been read (the tick memo is fresh), every voter's node answers, and it has been quiet
//! for [`limits::HIBERNATE_LEADER_LAG_MS`] longer: its followers saw the last entry (and
//! the commit index, one heartbeat later) no later than it did, so by then they sleep, and
//! none times the leader out when its heartbeats stop. A follower that checks late only
//! campaigns needlessly: a spurious election, safe as any other.
//!
//! **What wakes a cell.** Any progress: a client write appends an entry (replication is
//! event-driven, it needs no heartbeat), a due deadline makes the leader's tick loop
//! propose a `Tick`, a candidate's vote request changes the term. The member sees it at
//! its next round and turns its tick on again. The node also wakes cells itself
//! ([`crate::Cell::wake`]): a follower whose leader's node stopped answering pings (the
//! node liveness that stands in for the per-cell heartbeat), and a leader whose follower's
//! node came back or restarted (so the restarted member hears a leader before it times
//! out).
//!
//! **Reads.** A linearizable read on a hibernating leader still takes a read index: the
//! leader asks a quorum whether it still leads (one round trip, sent whatever the tick).
//! No lease is used: a lease renewed by node pings would rest on clocks and on the ping's
//! timing as well as on elections, and a read on an idle cell is rare enough to pay a
//! round trip. Hibernation changes no read.
//!
//! **Must never:** sleep while a snapshot arrives (the election pause owns that window),
//! sleep without knowing a live leader, or keep a member asleep after its cell moved.
//! Turning the tick on or off changes liveness only, never safety: every Raft rule still
//! holds for every message.

use std::sync::Mutex;

use openraft::ServerState;

use crate::limits;
use crate::runtime::Cell;
use crate::types::NodeId;

/// A member's role, as far as hibernation cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Leader,
    Follower,
    /// Candidate, learner, shut down: never sleeps.
    Other,
}

/// What one round observed of the member (the shell reads it from openraft's metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Progress {
    pub(crate) term: u64,
    pub(crate) leader: Option<NodeId>,
    pub(crate) last_log: u64,
    pub(crate) applied: u64,
}

/// Everything one round decides from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Observed {
    pub(crate) role: Role,
    pub(crate) progress: Progress,
    /// Leader: every voter matched the last log index and all of it is applied.
    pub(crate) settled: bool,
    /// Leader: the next deadline was read after the last apply (the tick memo is fresh).
    pub(crate) deadline_read: bool,
    /// Every node this member relies on answers pings: a leader's voters, a follower's
    /// leader.
    pub(crate) peers_alive: bool,
    /// A snapshot is arriving (the election pause is on).
    pub(crate) snapshot_arriving: bool,
}

/// What a round does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing changes.
    Stay,
    /// The member goes to sleep: its tick goes off.
    Sleep,
    /// The member woke up (its cell made progress): its tick goes on.
    Wake,
}

/// One member's hibernation state.
#[derive(Default)]
pub(crate) struct Hibernation {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// What the last round saw.
    seen: Option<Progress>,
    /// When that last changed (node clock, ms).
    since_ms: u64,
    asleep: bool,
}

impl Hibernation {
    /// Decide one round at `now_ms` (the node's monotonic clock).
    pub(crate) fn round(&self, observed: &Observed, now_ms: u64) -> Step {
        decide(&mut self.lock(), observed, now_ms)
    }

    /// Wake the member whatever it observed (the node saw a peer die or come back).
    /// Returns whether it was asleep. The quiet window starts again at `now_ms`.
    pub(crate) fn wake(&self, now_ms: u64) -> bool {
        let mut state = self.lock();
        state.since_ms = now_ms;
        std::mem::replace(&mut state.asleep, false)
    }

    pub(crate) fn asleep(&self) -> bool {
        self.lock().asleep
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("hibernation lock")
    }
}

impl Cell {
    /// One hibernation round of this member at `now_ms` (the node's monotonic clock), with
    /// `alive` telling which nodes answer the node's pings. A fabric node runs it on every
    /// hosted member each round; a standalone cell never hibernates.
    pub fn hibernation_round(&self, now_ms: u64, alive: &dyn Fn(NodeId) -> bool) -> Step {
        let observed = self.observe(alive);
        let step = self.inner_hibernation().round(&observed, now_ms);
        match step {
            Step::Sleep => {
                self.raft().runtime_config().tick(false);
                tracing::debug!(cell = self.cell_id(), role = ?observed.role, "hibernating");
            }
            Step::Wake => {
                self.raft().runtime_config().tick(true);
                tracing::debug!(cell = self.cell_id(), "awake: the cell made progress");
            }
            Step::Stay => {}
        }
        step
    }

    /// Wake this member whatever it observed: its tick goes on and, with `campaign`, it
    /// campaigns at once (its leader's node stopped answering). Returns whether it slept.
    pub fn wake(&self, now_ms: u64, campaign: bool) -> bool {
        let slept = self.inner_hibernation().wake(now_ms);
        if slept {
            let raft = self.raft();
            raft.runtime_config().tick(true);
            if campaign {
                let raft = raft.clone();
                tokio::spawn(async move {
                    if let Err(e) = raft.trigger().elect().await {
                        tracing::debug!(error = %e, "campaign after a leader's node died");
                    }
                });
            }
        }
        slept
    }

    /// Whether this member hibernates now (its tick is off).
    pub fn hibernating(&self) -> bool {
        self.inner_hibernation().asleep()
    }

    /// The cell's leader as this member knows it, and the voters of its membership.
    pub fn leader_and_voters(&self) -> (Option<NodeId>, Vec<NodeId>) {
        let metrics = self.raft().metrics();
        let m = metrics.borrow();
        let voters = m.membership_config.membership().voter_ids().collect();
        (m.current_leader, voters)
    }

    fn observe(&self, alive: &dyn Fn(NodeId) -> bool) -> Observed {
        let metrics = self.raft().metrics();
        let m = metrics.borrow();
        let progress = Progress {
            term: m.current_term,
            leader: m.current_leader,
            last_log: m.last_log_index.unwrap_or(0),
            applied: m.last_applied.map_or(0, |l| l.index),
        };
        let role = match m.state {
            ServerState::Leader => Role::Leader,
            ServerState::Follower => Role::Follower,
            _ => Role::Other,
        };
        let membership = m.membership_config.membership();
        let (settled, peers_alive) = match role {
            Role::Leader => {
                let matched = |id: &NodeId| {
                    *id == m.id
                        || (m.replication.as_ref().and_then(|r| r.get(id)))
                            .is_some_and(|l| l.map(|l| l.index) == m.last_log_index)
                };
                let voters: Vec<NodeId> = membership.voter_ids().collect();
                let settled = progress.applied == progress.last_log && voters.iter().all(matched);
                let alive = voters.iter().all(|id| *id == m.id || alive(*id));
                (settled, alive)
            }
            _ => (true, progress.leader.is_some_and(alive)),
        };
        let deadline_read = self.deadline_read_at(progress.term, progress.applied);
        Observed {
            role,
            progress,
            settled,
            deadline_read,
            peers_alive,
            snapshot_arriving: self.snapshot_arriving(),
        }
    }
}

fn decide(state: &mut State, observed: &Observed, now_ms: u64) -> Step {
    if state.seen != Some(observed.progress) {
        state.seen = Some(observed.progress);
        state.since_ms = now_ms;
        if std::mem::replace(&mut state.asleep, false) {
            return Step::Wake;
        }
        return Step::Stay;
    }
    if state.asleep || !observed.peers_alive || observed.snapshot_arriving {
        return Step::Stay;
    }
    let quiet_ms = now_ms.saturating_sub(state.since_ms);
    let may_sleep = match observed.role {
        Role::Leader => {
            observed.settled
                && observed.deadline_read
                && quiet_ms >= limits::HIBERNATE_QUIET_MS + limits::HIBERNATE_LEADER_LAG_MS
        }
        Role::Follower => {
            observed.progress.leader.is_some() && quiet_ms >= limits::HIBERNATE_QUIET_MS
        }
        Role::Other => false,
    };
    if may_sleep {
        state.asleep = true;
        Step::Sleep
    } else {
        Step::Stay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUIET: u64 = limits::HIBERNATE_QUIET_MS;
    const LAG: u64 = limits::HIBERNATE_LEADER_LAG_MS;

    fn observed(role: Role, last_log: u64) -> Observed {
        Observed {
            role,
            progress: Progress {
                term: 3,
                leader: Some(1),
                last_log,
                applied: last_log,
            },
            settled: true,
            deadline_read: true,
            peers_alive: true,
            snapshot_arriving: false,
        }
    }

    /// Run rounds every 100 ms from `from` to `to`; the steps that were not `Stay`.
    fn rounds(h: &Hibernation, o: &Observed, from: u64, to: u64) -> Vec<(u64, Step)> {
        (from..=to)
            .step_by(100)
            .map(|t| (t, h.round(o, t)))
            .filter(|(_, s)| *s != Step::Stay)
            .collect()
    }

    #[test]
    fn a_follower_sleeps_after_the_quiet_window_and_a_leader_a_lag_later() {
        let follower = Hibernation::default();
        let leader = Hibernation::default();
        let f = observed(Role::Follower, 10);
        let l = observed(Role::Leader, 10);
        assert_eq!(rounds(&follower, &f, 0, 10_000), vec![(QUIET, Step::Sleep)]);
        assert_eq!(
            rounds(&leader, &l, 0, 10_000),
            vec![(QUIET + LAG, Step::Sleep)]
        );
        assert!(follower.asleep() && leader.asleep());
    }

    #[test]
    fn any_progress_wakes_and_restarts_the_window() {
        let h = Hibernation::default();
        let mut o = observed(Role::Follower, 10);
        assert_eq!(rounds(&h, &o, 0, QUIET), vec![(QUIET, Step::Sleep)]);
        o.progress.last_log = 11;
        assert_eq!(h.round(&o, QUIET + 100), Step::Wake);
        assert!(!h.asleep());
        assert_eq!(h.round(&o, QUIET + 200), Step::Stay);
        let again = 2 * QUIET + 100;
        assert_eq!(
            rounds(&h, &o, QUIET + 200, again),
            vec![(again, Step::Sleep)]
        );
        o.progress.term = 4;
        assert_eq!(h.round(&o, again + 100), Step::Wake);
    }

    type Change = fn(&mut Observed);

    #[test]
    fn nothing_unsettled_sleeps() {
        let cases: [(&str, Change); 6] = [
            ("a voter behind", |o| o.settled = false),
            ("a deadline not read", |o| o.deadline_read = false),
            ("a peer not answering", |o| o.peers_alive = false),
            ("a snapshot arriving", |o| o.snapshot_arriving = true),
            ("a candidate", |o| o.role = Role::Other),
            ("no known leader", |o| {
                o.role = Role::Follower;
                o.progress.leader = None
            }),
        ];
        for (why, change) in cases {
            let h = Hibernation::default();
            let mut o = observed(Role::Leader, 10);
            change(&mut o);
            assert_eq!(rounds(&h, &o, 0, 60_000), vec![], "{why}");
        }
    }

    #[test]
    fn a_woken_member_waits_a_whole_window_again() {
        let h = Hibernation::default();
        let o = observed(Role::Follower, 10);
        assert_eq!(rounds(&h, &o, 0, QUIET), vec![(QUIET, Step::Sleep)]);
        assert!(h.wake(QUIET + 50));
        assert!(!h.wake(QUIET + 60), "a second wake finds it awake");
        let until = 2 * QUIET;
        assert_eq!(rounds(&h, &o, QUIET + 100, until), vec![]);
        let at = QUIET + 60 + QUIET;
        assert_eq!(h.round(&o, at + 40), Step::Sleep);
    }
}
