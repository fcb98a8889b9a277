//! What goes when a team or an agent does. Dissolving a team marks its record, then
//! purges a bounded part of every plane's rows of it per command (its board, mailboxes,
//! team mail, blackboard with its locks, votes); the record goes last. A revoked agent
//! leaves every team this cell keeps and every vote's electorate.
//!
//! This sits above the planes it purges: `crate::team` keeps the records and membership
//! that those planes ask, and must not call back into them.

use crate::codec::{decode, encode};
use crate::keys::{self, TEAM};
use crate::limits::TEAM_DISSOLVE_ROWS_MAX;
use crate::mailbox;
use crate::taskboard;
use crate::team::{Team, load, store};
use crate::txn::Txn;
use crate::types::{BoardRefusal, Outcome, ResourceId, Stamp};

fn refused(reason: BoardRefusal) -> Outcome {
    Outcome::BoardRefused { reason }
}

/// Remove `agent` from every team this cell keeps (members and ancestor snapshots): its
/// identity was revoked. Examines at most `LIST_ROWS_MAX` teams.
pub(crate) fn leave_all(txn: &mut impl Txn, agent: &str) -> Outcome {
    let rows = txn.scan(&[TEAM], &[TEAM + 1], crate::limits::LIST_ROWS_MAX);
    let mut teams = 0u32;
    for (key, value) in rows {
        let mut record: Team = decode(&value);
        let before = record.members.len() + record.ancestors.len();
        record.members.retain(|m| m != agent);
        record.ancestors.retain(|m| m != agent);
        if record.members.len() + record.ancestors.len() != before {
            txn.put(&key, &encode(&record));
            teams += 1;
        }
    }
    crate::vote::forget(txn, agent);
    Outcome::TeamsLeft { teams }
}

/// The supervisor dissolves the team: mark it, then delete at most
/// `TEAM_DISSOLVE_ROWS_MAX` rows of its board and mailboxes; the record goes last.
pub(crate) fn dissolve(txn: &mut impl Txn, stamp: Stamp, team: &str, caller: &str) -> Outcome {
    let Some(mut record) = load(txn, team) else {
        return refused(BoardRefusal::UnknownTeam {
            team: team.to_string(),
        });
    };
    if record.supervisor != caller {
        return refused(BoardRefusal::NotSupervisor {
            agent: caller.to_string(),
            supervisor: record.supervisor,
        });
    }
    purge_marked(txn, stamp, team, &mut record)
}

/// Dissolve fabric queue team `team` without a supervisor check (see
/// `Command::FabricPurge`): the server checked the origin team's supervisor.
pub(crate) fn purge_queue(txn: &mut impl Txn, stamp: Stamp, team: &str) -> Outcome {
    let Some(mut record) = load(txn, team) else {
        return refused(BoardRefusal::UnknownTeam {
            team: team.to_string(),
        });
    };
    purge_marked(txn, stamp, team, &mut record)
}

/// Mark the team dissolving, then delete at most `TEAM_DISSOLVE_ROWS_MAX` rows of its
/// board, mailboxes and blackboard (giving back its locks); the record goes last.
fn purge_marked(txn: &mut impl Txn, stamp: Stamp, team: &str, record: &mut Team) -> Outcome {
    if !record.dissolving {
        record.dissolving = true;
        store(txn, team, record);
    }
    let (tasks, tasks_done) = taskboard::purge(txn, team, TEAM_DISSOLVE_ROWS_MAX);
    let budget = TEAM_DISSOLVE_ROWS_MAX.saturating_sub(tasks as usize);
    let (notices, notices_done) = mailbox::purge(txn, team, budget);
    let budget = budget.saturating_sub(notices as usize);
    let (team_mail, team_mail_done) = crate::mail::purge_team(txn, team, budget);
    let budget = budget.saturating_sub(team_mail as usize);
    let (mail, mail_done) = (notices + team_mail, notices_done && team_mail_done);
    let (rows, rows_done) = purge_blackboard(txn, stamp, team, budget);
    let budget = budget.saturating_sub(rows as usize);
    let (votes, votes_done) = crate::vote::purge_team(txn, team, budget);
    let mail = mail + rows + votes;
    let done = tasks_done && mail_done && rows_done && votes_done;
    if done {
        txn.delete(&keys::named(TEAM, team));
    }
    Outcome::TeamDissolved {
        removed: tasks + mail + u32::from(done),
        done,
    }
}

/// Delete up to `budget` blackboard rows of `team` and give back its locks' slots;
/// returns the rows removed and whether none is left.
fn purge_blackboard(txn: &mut impl Txn, stamp: Stamp, team: &str, budget: usize) -> (u32, bool) {
    let mut removed = 0usize;
    for kind in crate::access::TEAM_ROW_PREFIXES {
        let start = keys::kv(format!("{kind}{{{team}}}/").as_bytes());
        let end = keys::prefix_end(&start);
        for (key, _) in txn.scan(&start, &end, budget.saturating_sub(removed)) {
            crate::kv::erase_row(txn, stamp, crate::kv::Space::Client, &key[1..]);
            removed += 1;
        }
    }
    let owner = format!("{}{team}", crate::access::TEAM_OWNER_PREFIX);
    for view in crate::lease::list(txn, stamp.time_ms, &format!("{owner}/"), budget) {
        let id: &ResourceId = &view.lease;
        for holder in &view.holders {
            crate::lease::release(txn, stamp, id, &holder.holder);
            removed += 1;
        }
    }
    let left = crate::access::TEAM_ROW_PREFIXES.iter().any(|kind| {
        let start = keys::kv(format!("{kind}{{{team}}}/").as_bytes());
        !txn.scan(&start, &keys::prefix_end(&start), 1).is_empty()
    });
    (u32::try_from(removed).unwrap_or(u32::MAX), !left)
}
