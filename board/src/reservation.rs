//! Path reservations: a holder's exclusive or shared claim on paths and globs of a
//! repository, with a time to live and a fence, decided in one apply on the repository's
//! cell.
//!
//! **What it owns.** Three server families no client key can name: the reservations
//! (`keys::PATH_RESERVATION`: repository, pattern, holder → [`Held`]), an index by holder
//! (`keys::PATH_HOLDER`: holder, repository, pattern) for "what do I hold", and one head
//! row per repository (`keys::PATH_REPO`) with the last fence it gave. Every row routes by
//! the repository's name (`route::repo_point`), so one apply sees all of a repository's
//! reservations, and a range move carries them together.
//!
//! **The rule.** Two reservations conflict when their holders differ, at least one is
//! exclusive, and some path matches both patterns ([`crate::path_glob::overlap`]). A
//! holder's own reservations never conflict with each other. A reserve is decided **per
//! path**: each path is granted or listed with the reservations it conflicts with, in the
//! same answer; a grant never waits. Only three things refuse a whole call, and then
//! nothing changes: a presented fence that is not the current one (`stale_fence`), a
//! release of a path another holder holds (`not_holder`), and a repository already at
//! `PATH_RESERVATIONS_PER_REPO_MAX` (`repo_full`).
//!
//! **Fences.** Each reserve that grants anything takes the repository's next fence (the
//! head row, kept for good, counts up by one), and every path newly granted in that call
//! carries it, so a later grant of a path always has a larger fence than any earlier one.
//! Reserving a path again in the same mode renews it: its deadline moves to `stamp +
//! ttl_ms` (never earlier) and it keeps its fence. Reserving it in the other mode is a
//! new grant with the new fence. A reserve or release that presents a fence is refused
//! `stale_fence` unless every path it names is the caller's at exactly that fence.
//!
//! **Time.** A reservation is gone at its deadline for every command and read, before the
//! `Tick` that deletes it (each command settles the repository first; reads leave it out).
//! Deadlines are stamps ([`crate::deadline::Item::Reservation`]).
//!
//! **The holder** is always the request's proven caller, never a field of the command.
//! Reservations are not attached to work entries: an entry routes by its lineage, a
//! repository by its name, so the two live on different cells of a fabric and no one
//! apply could free both. A holder whose session ends lets its reservations run out.
//!
//! Must never: read a clock, trust a holder named in a request, or leave an index or
//! deadline entry behind the reservation it names.

pub use crate::vocab::paths::{PathConflict, PathGrant, PathRefusal, ReservationView};
use serde::{Deserialize, Serialize};

use crate::access::Caller;
use crate::codec::{decode, encode};
use crate::deadline::{self, Item};
use crate::keys;
use crate::limits::{PATH_RESERVATION_TTL_MS_MAX, PATH_RESERVATION_TTL_MS_MIN};
use crate::limits::{PATH_RESERVATIONS_PER_REPO_MAX, PATHS_PER_CALL_MAX, REPO_NAME_BYTES_MAX};
use crate::path_glob;
use crate::txn::Txn;
use crate::types::{Command, Outcome, Stamp};

impl PathRefusal {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            PathRefusal::StaleFence { .. } => "stale_fence",
            PathRefusal::NotHolder { .. } => "not_holder",
            PathRefusal::RepoFull { .. } => "repo_full",
        }
    }
}

/// A stored reservation (the row's value; repository, pattern and holder are its key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Held {
    holder: Caller,
    exclusive: bool,
    fence: u64,
    expires_at_ms: u64,
}

/// One live row of a repository.
#[derive(Clone, Debug)]
struct Row {
    path: String,
    holder: String,
    held: Held,
}

impl Row {
    fn view(&self, repo: &str) -> ReservationView {
        ReservationView {
            repo: repo.to_string(),
            path: self.path.clone(),
            holder: self.holder.clone(),
            exclusive: self.held.exclusive,
            fence: self.held.fence,
            expires_at_ms: self.held.expires_at_ms,
        }
    }
}

/// Check a reserve or release before anything is read: names, patterns, counts, TTL.
pub(crate) fn check(command: &Command) -> Result<(), String> {
    let (repo, paths) = match command {
        Command::PathsReserve {
            repo,
            paths,
            ttl_ms,
            ..
        } => {
            check_ttl(*ttl_ms)?;
            if paths.is_empty() {
                return Err("a reserve names at least one path".into());
            }
            (repo, paths)
        }
        Command::PathsRelease { repo, paths, .. } => (repo, paths),
        other => unreachable!("{other:?} is not a reservation command"),
    };
    check_repo(repo)?;
    if paths.len() > PATHS_PER_CALL_MAX {
        return Err(format!(
            "{} paths in one call, the limit is {PATHS_PER_CALL_MAX}",
            paths.len()
        ));
    }
    paths.iter().try_for_each(|p| path_glob::check(p))
}

/// A repository's name: not empty, at most `REPO_NAME_BYTES_MAX` bytes, no control
/// characters.
pub fn check_repo(repo: &str) -> Result<(), String> {
    if repo.is_empty() {
        return Err("the repository name is empty".into());
    }
    if repo.len() > REPO_NAME_BYTES_MAX {
        return Err(format!(
            "the repository name is longer than {REPO_NAME_BYTES_MAX} bytes"
        ));
    }
    if repo.chars().any(char::is_control) {
        return Err(format!(
            "the repository name {repo:?} holds a control character"
        ));
    }
    Ok(())
}

fn check_ttl(ttl_ms: u64) -> Result<(), String> {
    let (min, max) = (PATH_RESERVATION_TTL_MS_MIN, PATH_RESERVATION_TTL_MS_MAX);
    if ttl_ms < min || ttl_ms > max {
        return Err(format!(
            "ttl_ms is {ttl_ms}, a reservation lives {min} ms to {max} ms"
        ));
    }
    Ok(())
}

fn item(repo: &str, path: &str, holder: &str) -> Item {
    Item::Reservation {
        repo: repo.to_string(),
        path: path.to_string(),
        holder: holder.to_string(),
    }
}

fn store(txn: &mut impl Txn, repo: &str, row: &Row) {
    let key = keys::path_reservation(repo, &row.path, &row.holder);
    txn.put(&key, &encode(&row.held));
    txn.put(&keys::path_holder(&row.holder, repo, &row.path), &[]);
}

/// Delete a reservation with its index and deadline entries.
fn remove(txn: &mut impl Txn, repo: &str, row: &Row) {
    txn.delete(&keys::path_reservation(repo, &row.path, &row.holder));
    txn.delete(&keys::path_holder(&row.holder, repo, &row.path));
    let due = item(repo, &row.path, &row.holder);
    deadline::remove(txn, row.held.expires_at_ms, &due);
}

/// Every stored row of `repo`, live or not, in key order (pattern, then holder).
fn rows(txn: &impl Txn, repo: &str) -> Vec<Row> {
    let start = keys::path_repo_prefix(repo);
    let end = keys::prefix_end(&start);
    let stored = txn.scan(&start, &end, PATH_RESERVATIONS_PER_REPO_MAX + 1);
    assert!(
        stored.len() <= PATH_RESERVATIONS_PER_REPO_MAX,
        "repository {repo:?} holds more than {PATH_RESERVATIONS_PER_REPO_MAX} reservations"
    );
    stored
        .into_iter()
        .map(|(key, value)| {
            let (parts, rest) =
                keys::split_first(&key[start.len()..], 2).expect("reservation key is well formed");
            assert!(rest.is_empty(), "reservation key has three components");
            let text = |b: &Vec<u8>| String::from_utf8(b.clone()).expect("key is utf-8");
            Row {
                path: text(&parts[0]),
                holder: text(&parts[1]),
                held: decode(&value),
            }
        })
        .collect()
}

/// Delete the rows of `repo` that ran out at the stamp; the live rows are returned.
fn settle(txn: &mut impl Txn, now_ms: u64, repo: &str) -> Vec<Row> {
    let (live, dead): (Vec<Row>, Vec<Row>) = rows(txn, repo)
        .into_iter()
        .partition(|row| row.held.expires_at_ms > now_ms);
    for row in &dead {
        remove(txn, repo, row);
    }
    live
}

/// The next fence of `repo` (its head row counts up and is kept for good).
fn next_fence(txn: &mut impl Txn, repo: &str) -> u64 {
    let key = keys::path_repo(repo);
    let last: u64 = txn.get(&key).map_or(0, |bytes| decode(&bytes));
    let next = last
        .checked_add(1)
        .expect("a repository's fences do not run out");
    txn.put(&key, &encode(&next));
    next
}

/// One `PathsReserve`, for its caller.
pub(crate) struct Reserve<'a> {
    /// The repository.
    pub(crate) repo: &'a str,
    /// The patterns.
    pub(crate) paths: &'a [String],
    /// Exclusive or shared.
    pub(crate) exclusive: bool,
    /// Time to live from the stamp.
    pub(crate) ttl_ms: u64,
    /// The fence a renewal presents.
    pub(crate) fence: Option<u64>,
}

/// Grant each path that conflicts with no other holder's live reservation; list the
/// conflicts of the others. See the module docs for what refuses the whole call.
pub(crate) fn reserve(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    r: &Reserve<'_>,
) -> Outcome {
    let now_ms = stamp.time_ms;
    let me = caller.name();
    let live = settle(txn, now_ms, r.repo);
    let paths = distinct(r.paths);
    if let Some(presented) = r.fence
        && let Err(refusal) = presented_everywhere(&live, me, &paths, presented)
    {
        return Outcome::PathsRefused { refusal };
    }
    let mut conflicts = Vec::new();
    let mut wanted = Vec::new();
    for path in &paths {
        let against = conflicts_of(&live, me, path, r.exclusive);
        match against.is_empty() {
            true => wanted.push(*path),
            false => conflicts.extend(against),
        }
    }
    let mine = |path: &str| live.iter().find(|row| row.holder == me && row.path == path);
    let new_rows = wanted.iter().filter(|p| mine(p).is_none()).count();
    if live.len() + new_rows > PATH_RESERVATIONS_PER_REPO_MAX {
        let max = u32::try_from(PATH_RESERVATIONS_PER_REPO_MAX).expect("bound fits u32");
        return Outcome::PathsRefused {
            refusal: PathRefusal::RepoFull { max },
        };
    }
    let renews = |p: &&str| mine(p).is_some_and(|row| row.held.exclusive == r.exclusive);
    let fence = match wanted.iter().all(renews) {
        true => 0,
        false => next_fence(txn, r.repo),
    };
    let expires_at_ms = now_ms.saturating_add(r.ttl_ms);
    let granted = wanted
        .iter()
        .map(|path| grant(txn, r, (caller, mine(path)), path, (fence, expires_at_ms)))
        .collect();
    Outcome::PathsReserved { granted, conflicts }
}

/// Write one grant: a renewal keeps its fence and never moves its deadline earlier; a new
/// grant (or one in the other mode) replaces whatever the caller held on the path.
fn grant(
    txn: &mut impl Txn,
    r: &Reserve<'_>,
    (caller, old): (&Caller, Option<&Row>),
    path: &str,
    (fence, expires_at_ms): (u64, u64),
) -> PathGrant {
    let renewed = old.is_some_and(|row| row.held.exclusive == r.exclusive);
    if let Some(old) = old {
        remove(txn, r.repo, old);
    }
    let held = match (renewed, old) {
        (true, Some(old)) => Held {
            expires_at_ms: old.held.expires_at_ms.max(expires_at_ms),
            ..old.held.clone()
        },
        _ => Held {
            holder: caller.clone(),
            exclusive: r.exclusive,
            fence,
            expires_at_ms,
        },
    };
    let row = Row {
        path: path.to_string(),
        holder: caller.name().to_string(),
        held,
    };
    store(txn, r.repo, &row);
    deadline::insert(
        txn,
        row.held.expires_at_ms,
        &item(r.repo, path, &row.holder),
    );
    PathGrant {
        path: row.path,
        exclusive: row.held.exclusive,
        fence: row.held.fence,
        expires_at_ms: row.held.expires_at_ms,
        renewed,
    }
}

/// The paths in order, each once.
fn distinct(paths: &[String]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::with_capacity(paths.len());
    for path in paths {
        if !out.contains(&path.as_str()) {
            out.push(path);
        }
    }
    out
}

/// Other holders' live reservations that conflict with `path` in the asked mode.
fn conflicts_of(live: &[Row], me: &str, path: &str, exclusive: bool) -> Vec<PathConflict> {
    live.iter()
        .filter(|row| row.holder != me && (exclusive || row.held.exclusive))
        .filter(|row| path_glob::overlap(path, &row.path).expect("stored patterns are valid"))
        .map(|row| PathConflict {
            path: path.to_string(),
            holder: row.holder.clone(),
            held: row.path.clone(),
            exclusive: row.held.exclusive,
            expires_at_ms: row.held.expires_at_ms,
        })
        .collect()
}

/// Every path is the caller's at exactly `presented`.
fn presented_everywhere(
    live: &[Row],
    me: &str,
    paths: &[&str],
    presented: u64,
) -> Result<(), PathRefusal> {
    for path in paths {
        let current = live
            .iter()
            .find(|row| row.holder == me && row.path == *path)
            .map(|row| row.held.fence);
        if current != Some(presented) {
            return Err(PathRefusal::StaleFence {
                path: path.to_string(),
                presented,
                current,
            });
        }
    }
    Ok(())
}

/// Release the caller's reservations: the named paths, or every one of the caller's in the
/// repository when none is named; with a fence, only reservations granted at it.
pub(crate) fn release(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    (repo, paths, fence): (&str, &[String], Option<u64>),
) -> Outcome {
    let me = caller.name();
    let live = settle(txn, stamp.time_ms, repo);
    let chosen = match choose(&live, me, &distinct(paths), fence) {
        Ok(chosen) => chosen,
        Err(refusal) => return Outcome::PathsRefused { refusal },
    };
    let (mut released, mut not_held) = (Vec::new(), Vec::new());
    for (path, row) in chosen {
        match row {
            Some(row) => {
                remove(txn, repo, row);
                released.push(path);
            }
            None => not_held.push(path),
        }
    }
    Outcome::PathsReleased { released, not_held }
}

/// What a release takes: each path with the caller's row on it (`None`: nobody's), or the
/// refusal of the whole call.
fn choose<'a>(
    live: &'a [Row],
    me: &str,
    paths: &[&str],
    fence: Option<u64>,
) -> Result<Vec<(String, Option<&'a Row>)>, PathRefusal> {
    if paths.is_empty() {
        let mine: Vec<_> = (live.iter())
            .filter(|row| row.holder == me && fence.is_none_or(|f| row.held.fence == f))
            .map(|row| (row.path.clone(), Some(row)))
            .collect();
        if let (Some(presented), true) = (fence, mine.is_empty()) {
            let path = "*".to_string();
            let current = None;
            return Err(PathRefusal::StaleFence {
                path,
                presented,
                current,
            });
        }
        return Ok(mine);
    }
    if let Some(presented) = fence {
        presented_everywhere(live, me, paths, presented)?;
    }
    let mut chosen = Vec::with_capacity(paths.len());
    for path in paths {
        let on_path = || live.iter().filter(|row| row.path == *path);
        let row = on_path().find(|row| row.holder == me);
        if let (None, Some(other)) = (row, on_path().next()) {
            return Err(PathRefusal::NotHolder {
                path: path.to_string(),
                holder: other.holder.clone(),
            });
        }
        chosen.push((path.to_string(), row));
    }
    Ok(chosen)
}

/// A reservation's deadline fell due (`Tick`): delete it if it ran out. Returns 1 when
/// it did, 0 for an entry whose reservation moved on.
pub(crate) fn expire(
    txn: &mut impl Txn,
    now_ms: u64,
    (repo, path, holder): (&str, &str, &str),
) -> u32 {
    let key = keys::path_reservation(repo, path, holder);
    let Some(bytes) = txn.get(&key) else {
        return 0;
    };
    let held: Held = decode(&bytes);
    if held.expires_at_ms > now_ms {
        return 0;
    }
    let row = Row {
        path: path.to_string(),
        holder: holder.to_string(),
        held,
    };
    remove(txn, repo, &row);
    1
}

/// Live reservations at `now_ms`: of `repo` (all holders, or only `holder`'s), or, with no
/// repository, `holder`'s in every repository of this cell. At most `limit` rows.
pub(crate) fn list(
    txn: &impl Txn,
    now_ms: u64,
    (repo, holder): (Option<&str>, Option<&str>),
    limit: usize,
) -> Vec<ReservationView> {
    let live = |view: &ReservationView| view.expires_at_ms > now_ms;
    let Some(repo) = repo else {
        let Some(holder) = holder else {
            return Vec::new();
        };
        return held_by(txn, holder, limit * 2)
            .into_iter()
            .filter(live)
            .take(limit)
            .collect();
    };
    rows(txn, repo)
        .iter()
        .filter(|row| holder.is_none_or(|h| row.holder == h))
        .map(|row| row.view(repo))
        .filter(live)
        .take(limit)
        .collect()
}

/// `holder`'s reservations through the holder index (live or not).
fn held_by(txn: &impl Txn, holder: &str, limit: usize) -> Vec<ReservationView> {
    let start = keys::path_holder_prefix(holder);
    let end = keys::prefix_end(&start);
    let mut out = Vec::new();
    for (key, _) in txn.scan(&start, &end, limit) {
        let (parts, _) =
            keys::split_first(&key[start.len()..], 2).expect("index key is well formed");
        let text = |b: &Vec<u8>| String::from_utf8(b.clone()).expect("key is utf-8");
        let (repo, path) = (text(&parts[0]), text(&parts[1]));
        let bytes = txn
            .get(&keys::path_reservation(&repo, &path, holder))
            .expect("an index entry names a stored reservation");
        let row = Row {
            path,
            holder: holder.to_string(),
            held: decode(&bytes),
        };
        out.push(row.view(&repo));
    }
    out
}

/// The reservations of another holder that stop `me` from committing `paths`: exclusive
/// ones of a different holder whose pattern matches a path. Pairs of (path, reservation),
/// in the order of `paths`. The guard (`whip guard check`) decides with this, on a read of
/// the repository's live reservations; `Err` for an empty path.
pub fn blocking<'a>(
    reservations: &'a [ReservationView],
    me: &str,
    paths: &[String],
) -> Result<Vec<(String, &'a ReservationView)>, String> {
    let mut out = Vec::new();
    for path in paths {
        for view in reservations {
            if view.holder != me && view.exclusive && path_glob::matches(&view.path, path)? {
                out.push((path.clone(), view));
            }
        }
    }
    Ok(out)
}

/// Whether `value` is a stored reservation (a range import checks rows before it writes).
pub(crate) fn decodes(value: &[u8]) -> bool {
    crate::codec::try_decode::<Held>(value).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::PATH_RESERVATIONS_PER_REPO_MAX;
    use crate::query::{Query, QueryResult};
    use crate::txn::MemTxn;

    use crate::testkit::Store;

    fn agent(name: &str) -> Caller {
        Caller::Agent(name.into())
    }

    fn reserve(paths: &[&str], exclusive: bool, ttl_ms: u64) -> Command {
        Command::PathsReserve {
            repo: "whip".into(),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            exclusive,
            ttl_ms,
            fence: None,
        }
    }

    fn release(paths: &[&str], fence: Option<u64>) -> Command {
        Command::PathsRelease {
            repo: "whip".into(),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            fence,
        }
    }

    /// This module's calls and reads of a test board.
    trait Paths {
        fn granted(&mut self, who: &str, time_ms: u64, command: Command) -> Vec<PathGrant>;
        fn conflicts(&mut self, who: &str, time_ms: u64, command: Command) -> Vec<PathConflict>;
        fn list(&self, now_ms: u64, holder: Option<&str>) -> Vec<ReservationView>;
    }

    impl Paths for Store {
        fn granted(&mut self, who: &str, time_ms: u64, command: Command) -> Vec<PathGrant> {
            match self.by(agent(who), time_ms, command) {
                Outcome::PathsReserved { granted, conflicts } if conflicts.is_empty() => granted,
                other => panic!("{who} was not granted everything: {other:?}"),
            }
        }

        fn conflicts(&mut self, who: &str, time_ms: u64, command: Command) -> Vec<PathConflict> {
            match self.by(agent(who), time_ms, command) {
                Outcome::PathsReserved { granted, conflicts } if granted.is_empty() => conflicts,
                other => panic!("{who} was granted something: {other:?}"),
            }
        }

        fn list(&self, now_ms: u64, holder: Option<&str>) -> Vec<ReservationView> {
            let query = Query::PathsList {
                repo: Some("whip".into()),
                holder: holder.map(str::to_string),
                limit: 0,
            };
            match crate::query(&self.txn, now_ms, &query) {
                QueryResult::Reservations(rows) => rows,
                other => panic!("{other:?}"),
            }
        }
    }

    /// Only the fence heads are left: no reservation, index or deadline row.
    fn nothing_but_heads(txn: &MemTxn) -> bool {
        let deadline = |k: &Vec<u8>| k[0] == keys::DEADLINE && k.get(9) == Some(&12);
        !txn.map
            .keys()
            .any(|k| [keys::PATH_RESERVATION, keys::PATH_HOLDER].contains(&k[0]) || deadline(k))
    }

    #[test]
    fn a_grant_carries_a_fence_and_a_deadline() {
        let mut s = Store::new();
        let granted = s.granted(
            "alice",
            1_000,
            reserve(&["src/a.rs", "docs/**"], true, 60_000),
        );
        assert_eq!(granted.len(), 2);
        for grant in &granted {
            assert_eq!((grant.fence, grant.expires_at_ms), (1, 61_000));
            assert!(grant.exclusive && !grant.renewed);
        }
        let rows = s.list(2_000, None);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.holder == "alice" && r.repo == "whip"));
        assert_eq!(crate::deadline::next(&s.txn), Some(61_000));
    }

    #[test]
    fn a_conflict_names_the_holder_and_its_expiry() {
        let mut s = Store::new();
        s.granted("alice", 1_000, reserve(&["src/**"], true, 60_000));
        let before = s.txn.clone();
        let conflicts = s.conflicts("bob", 2_000, reserve(&["src/x/y.rs"], false, 60_000));
        assert_eq!(
            conflicts,
            vec![PathConflict {
                path: "src/x/y.rs".into(),
                holder: "alice".into(),
                held: "src/**".into(),
                exclusive: true,
                expires_at_ms: 61_000,
            }]
        );
        assert_eq!(s.txn, before, "a path not granted writes nothing");
    }

    #[test]
    fn each_path_is_granted_or_listed_on_its_own() {
        let mut s = Store::new();
        s.granted("alice", 1_000, reserve(&["src/a.rs"], true, 60_000));
        let outcome = s.by(
            agent("bob"),
            2_000,
            reserve(&["src/*.rs", "README.md"], true, 60_000),
        );
        let Outcome::PathsReserved { granted, conflicts } = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(granted.len(), 1);
        assert_eq!(granted[0].path, "README.md");
        assert_eq!(conflicts.len(), 1);
        assert_eq!(
            (conflicts[0].path.as_str(), conflicts[0].held.as_str()),
            ("src/*.rs", "src/a.rs")
        );
    }

    #[test]
    fn shared_with_shared_is_fine_and_exclusive_is_not() {
        let mut s = Store::new();
        s.granted("alice", 1_000, reserve(&["src/**"], false, 60_000));
        s.granted("bob", 1_000, reserve(&["src/a.rs"], false, 60_000));
        let both = s.conflicts("carol", 1_000, reserve(&["src/*.rs"], true, 60_000));
        let holders: Vec<&str> = both.iter().map(|c| c.holder.as_str()).collect();
        assert_eq!(
            holders,
            ["alice", "bob"],
            "in the order of the held patterns"
        );
        s.granted("carol", 1_000, reserve(&["tests/*.rs"], true, 60_000));
        let shared = s.conflicts("dave", 1_000, reserve(&["tests/t.rs"], false, 60_000));
        assert_eq!(
            shared[0].holder, "carol",
            "a shared ask meets an exclusive hold"
        );
    }

    #[test]
    fn the_same_holder_renews_and_keeps_its_fence() {
        let mut s = Store::new();
        let first = s.granted("alice", 1_000, reserve(&["src/a.rs"], true, 10_000));
        assert_eq!(first[0].fence, 1);
        s.granted("alice", 1_000, reserve(&["src/**"], true, 10_000));
        let again = s.granted("alice", 5_000, reserve(&["src/a.rs"], true, 10_000));
        assert_eq!(again[0].fence, 1, "a renewal keeps the fence");
        assert!(again[0].renewed);
        assert_eq!(again[0].expires_at_ms, 15_000);
        let shorter = s.granted("alice", 6_000, reserve(&["src/a.rs"], true, 1_000));
        assert_eq!(shorter[0].expires_at_ms, 15_000, "never earlier");
        let shared = s.granted("alice", 6_000, reserve(&["src/a.rs"], false, 10_000));
        assert_eq!(
            (shared[0].fence, shared[0].renewed),
            (3, false),
            "another mode, new fence"
        );
        assert_eq!(s.list(6_000, Some("alice")).len(), 2);
    }

    #[test]
    fn a_later_grant_of_a_path_has_a_larger_fence() {
        let mut s = Store::new();
        let a = s.granted("alice", 1_000, reserve(&["src/a.rs"], true, 10_000));
        s.by(
            agent("alice"),
            2_000,
            release(&["src/a.rs"], Some(a[0].fence)),
        );
        let b = s.granted("bob", 3_000, reserve(&["src/a.rs"], true, 10_000));
        assert!(b[0].fence > a[0].fence);
        // Also after everything ran out and was deleted: the head row stays.
        s.tick(20_000);
        let c = s.granted("carol", 21_000, reserve(&["src/a.rs"], true, 10_000));
        assert!(c[0].fence > b[0].fence);
    }

    #[test]
    fn a_reservation_is_gone_at_its_deadline_before_the_tick() {
        let mut s = Store::new();
        s.granted("alice", 1_000, reserve(&["src/a.rs"], true, 5_000));
        assert_eq!(s.list(5_999, None).len(), 1);
        assert!(
            s.list(6_000, None).is_empty(),
            "reads leave it out at the stamp"
        );
        // No tick ran: bob's reserve at the deadline finds it gone.
        s.granted("bob", 6_000, reserve(&["src/a.rs"], true, 5_000));
        assert_eq!(s.tick(11_000), Outcome::Ticked { processed: 1 });
        assert!(nothing_but_heads(&s.txn), "{:?}", s.txn.map.keys());
    }

    #[test]
    fn the_tick_deletes_what_ran_out_and_nothing_else() {
        let mut s = Store::new();
        s.granted("alice", 1_000, reserve(&["a"], true, 5_000));
        s.granted("bob", 1_000, reserve(&["b"], true, 50_000));
        assert_eq!(s.tick(5_999), Outcome::Ticked { processed: 0 });
        assert_eq!(s.tick(6_000), Outcome::Ticked { processed: 1 });
        let left = s.list(6_000, None);
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].holder, "bob");
        let mine = crate::query(
            &s.txn,
            6_000,
            &Query::PathsList {
                repo: None,
                holder: Some("alice".into()),
                limit: 0,
            },
        );
        assert_eq!(mine, QueryResult::Reservations(Vec::new()));
    }

    #[test]
    fn a_stale_fence_is_refused_and_changes_nothing() {
        let mut s = Store::new();
        s.granted("alice", 1_000, reserve(&["src/a.rs"], true, 60_000));
        s.by(agent("alice"), 1_000, release(&["src/a.rs"], None));
        let now = s.granted("alice", 2_000, reserve(&["src/a.rs"], true, 60_000));
        assert_eq!(now[0].fence, 2);
        let before = s.txn.clone();
        let refused = s.by(agent("alice"), 3_000, release(&["src/a.rs"], Some(1)));
        let want = PathRefusal::StaleFence {
            path: "src/a.rs".into(),
            presented: 1,
            current: Some(2),
        };
        assert_eq!(
            refused,
            Outcome::PathsRefused {
                refusal: want.clone()
            }
        );
        assert_eq!(
            want.to_string(),
            "stale_fence: fence 1 is stale for \"src/a.rs\", current is 2"
        );
        let mut renew = reserve(&["src/a.rs"], true, 60_000);
        if let Command::PathsReserve { fence, .. } = &mut renew {
            *fence = Some(1);
        }
        let refused = s.by(agent("alice"), 3_000, renew.clone());
        assert!(
            matches!(refused, Outcome::PathsRefused { .. }),
            "{refused:?}"
        );
        assert_eq!(s.txn, before, "nothing changed");
        if let Command::PathsReserve { fence, .. } = &mut renew {
            *fence = Some(2);
        }
        assert_eq!(s.granted("alice", 3_000, renew)[0].fence, 2);
        let released = s.by(agent("alice"), 4_000, release(&[], Some(2)));
        assert_eq!(
            released,
            Outcome::PathsReleased {
                released: vec!["src/a.rs".into()],
                not_held: Vec::new()
            }
        );
    }

    #[test]
    fn only_the_holder_releases() {
        let mut s = Store::new();
        s.granted("alice", 1_000, reserve(&["src/a.rs", "b"], true, 60_000));
        let before = s.txn.clone();
        let refused = s.by(agent("mallory"), 2_000, release(&["src/a.rs"], None));
        let Outcome::PathsRefused { refusal } = refused else {
            panic!("{refused:?}");
        };
        assert_eq!(refusal.code(), "not_holder");
        assert_eq!(s.txn, before);
        // Releasing everything of one's own touches nobody else's.
        let own = s.by(agent("mallory"), 2_000, release(&[], None));
        let none = Outcome::PathsReleased {
            released: Vec::new(),
            not_held: Vec::new(),
        };
        assert_eq!(own, none);
        let missing = s.by(agent("mallory"), 2_000, release(&["nobody/holds"], None));
        assert!(matches!(missing, Outcome::PathsReleased { not_held, .. } if not_held.len() == 1));
        assert_eq!(s.list(2_000, Some("alice")).len(), 2);
        let all = s.by(agent("alice"), 2_000, release(&[], None));
        assert!(matches!(all, Outcome::PathsReleased { released, .. } if released.len() == 2));
        assert!(nothing_but_heads(&s.txn), "{:?}", s.txn.map.keys());
    }

    #[test]
    fn the_holder_is_the_proven_caller() {
        let mut s = Store::new();
        s.by(Caller::Operator, 1_000, reserve(&["ops/**"], true, 60_000));
        let conflicts = s.conflicts("alice", 1_000, reserve(&["ops/x"], true, 60_000));
        assert_eq!(conflicts[0].holder, "operator");
        let anonymous = s.by(Caller::Anonymous, 1_000, reserve(&["z"], true, 60_000));
        assert!(
            matches!(anonymous, Outcome::Forbidden { .. }),
            "{anonymous:?}"
        );
    }

    #[test]
    fn bad_input_is_invalid() {
        let mut s = Store::new();
        let cases = [
            (
                Command::PathsReserve {
                    repo: String::new(),
                    paths: vec!["a".into()],
                    exclusive: true,
                    ttl_ms: 60_000,
                    fence: None,
                },
                "repository name is empty",
            ),
            (reserve(&["a"], true, 0), "ttl_ms is 0"),
            (
                reserve(&["a"], true, PATH_RESERVATION_TTL_MS_MAX + 1),
                "ttl_ms",
            ),
            (reserve(&[], true, 60_000), "at least one path"),
            (reserve(&["/etc/passwd"], true, 60_000), "relative"),
            (reserve(&["a/../b"], true, 60_000), ". or .."),
            (reserve(&["*********/x"], true, 60_000), "wildcards"),
        ];
        for (command, expect) in cases {
            match s.by(agent("alice"), 1_000, command) {
                Outcome::Invalid { reason } => assert!(reason.contains(expect), "{reason}"),
                other => panic!("{other:?}"),
            }
        }
        let many: Vec<String> = (0..=PATHS_PER_CALL_MAX).map(|i| format!("f{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(matches!(
            s.by(agent("alice"), 1_000, reserve(&refs, true, 60_000)),
            Outcome::Invalid { .. }
        ));
        assert!(s.txn.map.is_empty());
    }

    #[test]
    fn a_repository_holds_at_most_its_bound() {
        let mut s = Store::new();
        for chunk in 0..PATH_RESERVATIONS_PER_REPO_MAX / PATHS_PER_CALL_MAX {
            let paths: Vec<String> = (0..PATHS_PER_CALL_MAX)
                .map(|i| format!("d{chunk}/f{i}"))
                .collect();
            let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
            s.granted("alice", 1_000, reserve(&refs, false, 60_000));
        }
        let before = s.txn.clone();
        let full = s.by(agent("bob"), 1_000, reserve(&["one/more"], false, 60_000));
        let Outcome::PathsRefused { refusal } = full else {
            panic!("{full:?}");
        };
        assert_eq!(refusal.code(), "repo_full");
        assert_eq!(s.txn, before);
        // A renewal is no new row; and once they run out there is room again.
        s.granted("alice", 2_000, reserve(&["d0/f0"], false, 60_000));
        s.granted("bob", 62_000, reserve(&["one/more"], false, 60_000));
    }

    #[test]
    fn the_guard_sees_only_other_holders_exclusive_reservations() {
        let view = |holder: &str, path: &str, exclusive: bool| ReservationView {
            repo: "whip".into(),
            path: path.into(),
            holder: holder.into(),
            exclusive,
            fence: 1,
            expires_at_ms: 9,
        };
        let held = [
            view("alice", "src/**", true),
            view("bob", "docs/*.md", false),
            view("me", "tests/**", true),
        ];
        let paths = ["src/a.rs", "docs/x.md", "tests/t.rs", "README.md"].map(String::from);
        let blocked = blocking(&held, "me", &paths).expect("valid paths");
        assert_eq!(blocked.len(), 1);
        assert_eq!(
            (blocked[0].0.as_str(), blocked[0].1.holder.as_str()),
            ("src/a.rs", "alice")
        );
        assert!(blocking(&held, "me", &[String::new()]).is_err());
    }
}
