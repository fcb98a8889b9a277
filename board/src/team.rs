//! Teams: a supervisor, members, a parent and the settings of the team's task board.
//!
//! Access is scoped by lineage: an agent may act on a team's board when it is a member of
//! the team or of one of its ancestor teams. A tracker's reserved team
//! ([`crate::access::TRACKER_TEAM_PREFIX`]) is open to every registered agent. The ancestors'
//! members come in the create command (the server reads the parent chain, which may live
//! on other cells), so they are a snapshot taken at creation. Identities are the `caller`
//! the server resolved from the authenticated call, never a field the client chose.
//!
//! State per team is one record, which also holds the board's task sequence and its
//! counts. Dissolving marks the record first (from then on the team refuses new work and
//! reads as absent), then deletes the board a bounded part per command, the record last.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::keys::{self, TEAM};
use crate::limits::TEAM_MEMBERS_MAX;
use crate::query::TeamView;
use crate::txn::Txn;
use crate::types::{BoardRefusal, BoardSettings, Outcome, TaskState};

/// The settings every tracker board gets, whatever its creator asked for.
pub(crate) fn tracker_settings() -> BoardSettings {
    // Every setting is fixed: whoever creates a tracker's team first cannot give it hostile
    // ones (a one-byte task limit, a one-millisecond claim window).
    BoardSettings {
        delivery_limit: u32::MAX,
        spill_after_ms: 0,
        ..BoardSettings::default()
    }
}

/// Tasks of one board by state. `done` counts every completion, also pruned ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Counts {
    pub(crate) ready: u64,
    pub(crate) claimed: u64,
    pub(crate) done: u64,
    pub(crate) dead: u64,
}

impl Counts {
    /// Tasks that hold a place on the board: ready, claimed or dead.
    pub(crate) fn open(&self) -> u64 {
        self.ready + self.claimed + self.dead
    }

    fn slot(&mut self, state: TaskState) -> &mut u64 {
        match state {
            TaskState::Ready => &mut self.ready,
            TaskState::Claimed => &mut self.claimed,
            TaskState::Done => &mut self.done,
            TaskState::Dead => &mut self.dead,
        }
    }

    /// A task leaves state `from` (if any) for `to` (if any). A done task leaving the
    /// board (pruned) stays counted as done.
    pub(crate) fn shift(&mut self, from: Option<TaskState>, to: Option<TaskState>) {
        if let Some(from) = from.filter(|state| *state != TaskState::Done || to.is_some()) {
            let slot = self.slot(from);
            // A count below zero means a task changed state twice: corrupt state or a bug.
            assert!(*slot > 0, "no {from} task to move on this board");
            *slot -= 1;
        }
        if let Some(to) = to {
            *self.slot(to) += 1;
        }
    }
}

/// One team as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Team {
    pub(crate) supervisor: String,
    pub(crate) members: Vec<String>,
    pub(crate) parent: Option<String>,
    pub(crate) ancestors: Vec<String>,
    pub(crate) settings: BoardSettings,
    /// Sequence of the latest posted task (task ids are `{team}-{seq}`).
    pub(crate) last_seq: u64,
    /// The supervisor began dissolving the team: it refuses new work.
    pub(crate) dissolving: bool,
    /// The local board's counts.
    pub(crate) counts: Counts,
}

impl Team {
    /// Whether `agent` may act on the team: a member, or a member of an ancestor team.
    pub(crate) fn admits(&self, agent: &str) -> bool {
        self.members
            .iter()
            .chain(&self.ancestors)
            .any(|m| m == agent)
    }
}

/// The stored team, dissolving or not.
pub(crate) fn load(txn: &impl Txn, team: &str) -> Option<Team> {
    txn.get(&keys::named(TEAM, team))
        .map(|bytes| decode(&bytes))
}

/// Write the team back.
pub(crate) fn store(txn: &mut impl Txn, team: &str, record: &Team) {
    txn.put(&keys::named(TEAM, team), &encode(record));
}

fn refused(reason: BoardRefusal) -> Outcome {
    Outcome::BoardRefused { reason }
}

/// The live team when `caller` may act on it; else the refusal.
pub(crate) fn member(txn: &impl Txn, team: &str, caller: &str) -> Result<Team, Outcome> {
    let record = load(txn, team)
        .filter(|record| !record.dissolving)
        .ok_or_else(|| {
            refused(BoardRefusal::UnknownTeam {
                team: team.to_string(),
            })
        })?;
    if !crate::access::is_tracker_team(team) && !record.admits(caller) {
        return Err(refused(BoardRefusal::NotMember {
            agent: caller.to_string(),
            team: team.to_string(),
        }));
    }
    Ok(record)
}

/// The request of one team creation.
pub(crate) struct Create<'a> {
    /// The team.
    pub(crate) team: &'a str,
    /// The creator, who becomes supervisor and first member.
    pub(crate) caller: &'a str,
    /// The parent team.
    pub(crate) parent: Option<&'a String>,
    /// Members of the ancestor teams.
    pub(crate) ancestors: &'a [String],
    /// The board's settings.
    pub(crate) settings: BoardSettings,
}

/// The supervisor of every tracker's team: no agent (names start with a letter or digit).
const TRACKER_SUPERVISOR: &str = "~engine";

/// Create the team, or confirm the caller's existing one (its first settings stay).
pub(crate) fn create(txn: &mut impl Txn, request: &Create<'_>) -> Outcome {
    let team = request.team.to_string();
    // A child team is made by a member of its parent (or of an ancestor).
    if request.parent.is_some() && !request.ancestors.iter().any(|m| m == request.caller) {
        return refused(BoardRefusal::NotMember {
            agent: request.caller.to_string(),
            team: request.parent.cloned().unwrap_or_default(),
        });
    }
    let tracker = crate::access::is_tracker_team(request.team);
    match load(txn, request.team) {
        Some(existing)
            if (tracker || existing.supervisor == request.caller) && !existing.dissolving =>
        {
            Outcome::TeamCreated { team }
        }
        Some(_) => refused(BoardRefusal::TeamExists { team }),
        None => {
            // A tracker's team is the engine's: no agent supervises it (no agent name starts
            // with `~`), so nobody who created it first can dissolve it or steer its joins.
            let supervisor = match tracker {
                true => TRACKER_SUPERVISOR.to_string(),
                false => request.caller.to_string(),
            };
            let record = Team {
                members: vec![request.caller.to_string()],
                supervisor,
                parent: request.parent.cloned(),
                ancestors: request.ancestors.to_vec(),
                settings: match tracker {
                    true => tracker_settings(),
                    false => request.settings,
                },
                last_seq: 0,
                dissolving: false,
                counts: Counts::default(),
            };
            store(txn, request.team, &record);
            Outcome::TeamCreated { team }
        }
    }
}

/// The supervisor (or a member of an ancestor team) adds `agent`; joining twice changes
/// nothing.
pub(crate) fn join(txn: &mut impl Txn, team: &str, caller: &str, agent: &str) -> Outcome {
    match member(txn, team, caller) {
        // The control plane goes through the parent: the supervisor, or a member of an
        // ancestor team, adds members; a member cannot stuff the team (or a vote's
        // electorate) with agents it enrolled.
        Ok(record)
            if record.supervisor != caller && !record.ancestors.iter().any(|a| a == caller) =>
        {
            refused(BoardRefusal::NotSupervisor {
                agent: caller.to_string(),
                supervisor: record.supervisor,
            })
        }
        Ok(mut record) => add_member(txn, team, &mut record, agent),
        Err(refusal) => refusal,
    }
}

/// Add `agent` to the live team `team` (a fabric queue) on the server's word; adding a
/// member twice changes nothing.
pub(crate) fn admit(txn: &mut impl Txn, team: &str, agent: &str) -> Outcome {
    match load(txn, team).filter(|record| !record.dissolving) {
        Some(mut record) => add_member(txn, team, &mut record, agent),
        None => refused(BoardRefusal::UnknownTeam {
            team: team.to_string(),
        }),
    }
}

/// Add `agent` to `record` (at most `TEAM_MEMBERS_MAX` members) and store it.
fn add_member(txn: &mut impl Txn, team: &str, record: &mut Team, agent: &str) -> Outcome {
    let joined = Outcome::TeamJoined {
        team: team.to_string(),
        agent: agent.to_string(),
    };
    if record.members.iter().any(|m| m == agent) {
        return joined;
    }
    if record.members.len() >= TEAM_MEMBERS_MAX {
        return Outcome::Invalid {
            reason: format!("team has {TEAM_MEMBERS_MAX} members, the limit"),
        };
    }
    record.members.push(agent.to_string());
    store(txn, team, record);
    joined
}

/// The team as users see it: `None` when absent or dissolving.
pub(crate) fn view(txn: &impl Txn, team: &str) -> Option<TeamView> {
    let record = load(txn, team).filter(|record| !record.dissolving)?;
    Some(TeamView {
        team: team.to_string(),
        supervisor: record.supervisor,
        members: record.members,
        parent: record.parent,
        settings: record.settings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::TEAM_DISSOLVE_ROWS_MAX;
    use crate::taskboard;
    use crate::team_purge::dissolve;
    use crate::txn::MemTxn;
    use crate::types::Stamp;

    const STAMP: Stamp = Stamp {
        index: 9,
        position: 0,
        time_ms: 1_000,
    };

    fn create_team(txn: &mut MemTxn, team: &str, caller: &str, ancestors: &[String]) -> Outcome {
        let request = Create {
            team,
            caller,
            parent: None,
            ancestors,
            settings: BoardSettings::default(),
        };
        create(txn, &request)
    }

    #[test]
    fn counts_shift_and_keep_pruned_done() {
        let mut counts = Counts::default();
        counts.shift(None, Some(TaskState::Ready));
        counts.shift(Some(TaskState::Ready), Some(TaskState::Claimed));
        counts.shift(Some(TaskState::Claimed), Some(TaskState::Done));
        counts.shift(Some(TaskState::Done), None);
        assert_eq!((counts.open(), counts.done), (0, 1));
    }

    #[test]
    fn a_large_board_dissolves_over_several_commands() {
        let mut txn = MemTxn::default();
        create_team(&mut txn, "t", "sup", &[]);
        let tasks = TEAM_DISSOLVE_ROWS_MAX + 10;
        for _ in 0..tasks {
            taskboard::post(&mut txn, 5, "t", "sup", b"x");
        }
        assert_eq!(
            dissolve(&mut txn, STAMP, "t", "sup"),
            Outcome::TeamDissolved {
                removed: TEAM_DISSOLVE_ROWS_MAX as u32,
                done: false
            }
        );
        // The team refuses new work from the first dissolve on.
        assert!(matches!(
            taskboard::post(&mut txn, 6, "t", "sup", b"x"),
            Outcome::BoardRefused {
                reason: BoardRefusal::UnknownTeam { .. }
            }
        ));
        assert_eq!(view(&txn, "t"), None);
        assert_eq!(
            dissolve(&mut txn, STAMP, "t", "sup"),
            Outcome::TeamDissolved {
                removed: 11,
                done: true
            }
        );
        assert!(txn.map.is_empty(), "left {} rows", txn.map.len());
    }

    #[test]
    fn lineage_admits_members_and_ancestors_only() {
        let mut txn = MemTxn::default();
        let ancestors = vec!["boss".to_string()];
        create_team(&mut txn, "t", "sup", &ancestors);
        assert!(matches!(
            create_team(&mut txn, "t", "other", &[]),
            Outcome::BoardRefused {
                reason: BoardRefusal::TeamExists { .. }
            }
        ));
        assert!(member(&txn, "t", "boss").is_ok());
        assert!(member(&txn, "t", "w1").is_err());
        join(&mut txn, "t", "boss", "w1");
        assert_eq!(view(&txn, "t").map(|v| v.members.len()), Some(2));
        let Outcome::TeamDissolved { done: true, .. } = dissolve(&mut txn, STAMP, "t", "sup")
        else {
            panic!("an empty team dissolves in one command");
        };
        assert!(txn.map.is_empty(), "left {:?}", txn.map);
    }
}
