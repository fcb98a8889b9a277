//! Trackers of the builtin provider: task boards of the fabric.
//!
//! A tracker `(owner, name)` is the board of the reserved team `~tracker/{owner}/{name}`
//! (see `whip_fabric::TRACKER_TEAM_PREFIX`): it routes by that name, so different trackers
//! spread over the fabric's cells, and every claim, renewal, release and finish is one
//! board command on the cell owning it. An issue is a task on that board; its claim is the
//! board's claim (claim record + fenced lock with a deadline), so exactly one claimant
//! holds it, a lapsed claim is redelivered, and a late finish with an old fence is
//! refused. Closed issues stay on the board.
//!
//! Issue ids (`WS-1`, `WS-2`, …) are one sequence per store, kept in CAS rows tagged
//! `{tracker}` (one cell):
//! - `t/{tracker}/n`: the last issue number
//! - `t/{tracker}/k/<hash>`: the issue a filing with that idempotency key numbered (a
//!   retried filing finds it instead of filing twice)
//! - `t/{tracker}/w/<id>`: the issue's index ([`IndexRow`]: its board team, its task id
//!   once posted, and the advisory assignee)
//! - `g/tracker/<owner>/<name>`: trackers that programs declared (`whip issue new` finds
//!   the owner of a tracker name here)
//!
//! A filing numbers the issue and writes its index (one transaction), posts the task
//! (idempotent by the filing's key), then records the task id in the index. A crash in
//! between is finished by the retry; until then the issue is unknown to claims.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use whip_fabric::{BoardAnswer, FabricClient, Settle, TaskState, TaskView, TxnOps, TxnResult};

use super::program::fnv64;
use super::{CONFLICT_RETRIES_MAX, Engine, Result, RuntimeError, invalid, key, now_ms};

/// Open: not finished (claimable when no live claim).
pub const OPEN: &str = "open";
/// Finished.
pub const CLOSED: &str = "closed";
/// Shown instead of `open` while a live claim holds the issue.
pub const IN_PROGRESS: &str = "in_progress";

/// A live (or expired) claim on an issue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// Who holds it (an instance id, or a name from `whip issue claim --as`).
    pub claimant: String,
    /// The board claim's fence (grows with every claim in the fabric).
    pub fence: u64,
    /// The claim lapses at this time (ms) unless renewed.
    pub deadline_ms: u64,
}

/// One work item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    /// `WS-<n>`.
    pub id: String,
    /// `local/<Workflow>` or `shared`.
    pub owner: String,
    /// Tracker name.
    pub tracker: String,
    /// Title.
    pub title: String,
    /// Body text.
    pub body: String,
    /// Labels.
    pub labels: Vec<String>,
    /// `open` or `closed`.
    pub status: String,
    /// Who should work it (advisory).
    pub assignee: Option<String>,
    /// The current claim (open issues only).
    pub claim: Option<Claim>,
    /// The fence of the latest claim (0 = never claimed).
    pub fence: u64,
    /// Who filed it (an instance id or `cli`).
    pub filed_by: String,
    /// Who finished it.
    pub closed_by: Option<String>,
    /// Summary given at `finish`.
    pub summary: Value,
    /// Creation time (ms).
    pub created_ms: u64,
    /// Last change seen (ms): the filing, or the latest claim's deadline.
    pub updated_ms: u64,
    /// The board task carrying the issue.
    pub task_id: String,
    /// Claims so far.
    pub deliveries: u32,
}

impl Issue {
    /// The claim when it is still live at `now`.
    pub fn live_claim(&self, now: u64) -> Option<&Claim> {
        self.claim.as_ref().filter(|c| c.deadline_ms > now)
    }

    /// `open`, `in_progress` (open with a live claim) or `closed`.
    pub fn shown_status(&self, now: u64) -> &str {
        if self.status == OPEN && self.live_claim(now).is_some() {
            IN_PROGRESS
        } else {
            &self.status
        }
    }

    /// Open and not claimed: what `has ready issue` matches.
    pub fn ready(&self, now: u64) -> bool {
        self.status == OPEN && self.live_claim(now).is_none()
    }

    /// The value a rule binds (`item.id`, `item.title`, …).
    pub fn view(&self, now: u64) -> Value {
        json!({
            "id": self.id, "tracker": self.tracker, "owner": self.owner, "title": self.title,
            "body": self.body, "labels": self.labels, "status": self.shown_status(now),
            "assignee": self.assignee, "summary": self.summary,
            "closed_by": self.closed_by,
        })
    }

    fn number(&self) -> u64 {
        issue_number(&self.id)
    }

    /// The issue a board task carries (`None` when the task is not a tracker issue).
    fn from_task(task: &TaskView, assignee: Option<String>) -> Option<Issue> {
        let posted: Posted = serde_json::from_slice(&task.body).ok()?;
        let done = task.state == TaskState::Done;
        let claim = (task.state == TaskState::Claimed).then(|| Claim {
            claimant: task.worker.clone().unwrap_or_default(),
            fence: task.fence,
            deadline_ms: task.deadline_ms,
        });
        let summary = match done {
            true => serde_json::from_slice(&task.result).unwrap_or(Value::Null),
            false => Value::Null,
        };
        Some(Issue {
            id: posted.id,
            owner: posted.owner,
            tracker: posted.tracker,
            title: posted.title,
            body: posted.body,
            labels: posted.labels,
            status: if done { CLOSED } else { OPEN }.into(),
            assignee,
            claim,
            fence: task.fence,
            filed_by: posted.filed_by,
            closed_by: done.then(|| task.worker.clone().unwrap_or_default()),
            summary,
            created_ms: task.posted_ms,
            updated_ms: task.posted_ms.max(task.deadline_ms.min(now_ms())),
            task_id: task.id.clone(),
            deliveries: task.delivery_count,
        })
    }
}

fn issue_number(id: &str) -> u64 {
    id.strip_prefix("WS-")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// What a filing posts to the board (the task body).
#[derive(Serialize, Deserialize)]
struct Posted {
    id: String,
    owner: String,
    tracker: String,
    title: String,
    body: String,
    labels: Vec<String>,
    filed_by: String,
}

/// The index row of one issue.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct IndexRow {
    /// The tracker's board team.
    team: String,
    /// The board task, once posted.
    task_id: Option<String>,
    /// Who should work it (advisory).
    assignee: Option<String>,
}

/// How a claim ended: the claim, or the live claim of someone else.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimOutcome {
    /// Held by the caller (`reentered` when the caller already held it).
    Claimed {
        /// The issue after the claim.
        issue: Issue,
        /// True when the caller held the claim already.
        reentered: bool,
    },
    /// Someone else holds a live claim.
    Contended {
        /// The issue as read.
        issue: Issue,
    },
}

/// What an operation on an existing issue does to it.
#[derive(Clone, Debug)]
pub enum IssueOp {
    /// Push the deadline of the caller's claim to now + ttl.
    Renew {
        /// New time to live.
        ttl_ms: u64,
    },
    /// Give the caller's claim back.
    Release,
    /// Close the issue under the caller's claim.
    Finish {
        /// The summary.
        summary: Value,
    },
    /// Set the assignee (no claim needed).
    Assign {
        /// Who.
        assignee: String,
    },
}

/// The issue-number sequence.
const TRACKER_SEQUENCE: &str = "t/{tracker}/n";
/// Filing dedupe keys (hash of the idempotency key → issue id).
const TRACKER_DEDUPE: &str = "t/{tracker}/k/";
/// Issue index rows.
const TRACKER_INDEX: &str = "t/{tracker}/w/";
/// Issues one board read returns at most.
const BOARD_READ_MAX: u32 = 10_000;

/// The board team of tracker `name` declared by `owner`.
pub fn tracker_team(owner: &str, name: &str) -> String {
    format!("{}{owner}/{name}", whip_fabric::TRACKER_TEAM_PREFIX)
}

fn index_key(id: &str) -> Vec<u8> {
    key(&[TRACKER_INDEX, id])
}

fn decode_index(bytes: &[u8]) -> Result<IndexRow> {
    serde_json::from_slice(bytes)
        .map_err(|e| RuntimeError::Invalid(format!("issue index row unreadable: {e}")))
}

fn encode_index(row: &IndexRow) -> Vec<u8> {
    serde_json::to_vec(row).expect("index row encodes")
}

fn text_field(fields: &Value, name: &str) -> String {
    match &fields[name] {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The refusal of an operation by `claimant` (with `fence` when given) on `issue` at `now`.
fn check_claim(issue: &Issue, claimant: &str, fence: Option<u64>, now: u64) -> Result<u64> {
    if issue.status != OPEN {
        return invalid(format!("issue {} is {}", issue.id, issue.status));
    }
    if let Some(f) = fence
        && f != issue.fence
    {
        let word = if f < issue.fence {
            "stale"
        } else {
            "not issued yet"
        };
        return invalid(format!("fence {f} is {word}, current is {}", issue.fence));
    }
    match issue.live_claim(now) {
        Some(c) if c.claimant == claimant => Ok(c.fence),
        Some(c) => invalid(format!(
            "issue {} is claimed by {}, not by {claimant}",
            issue.id, c.claimant
        )),
        None => invalid(format!(
            "issue {} is not claimed by {claimant} (no live claim)",
            issue.id
        )),
    }
}

/// A board refusal as the tracker words it.
fn refusal(issue: &str, reason: &str, message: &str) -> RuntimeError {
    let text = match reason {
        "taken" => format!("issue {issue} is claimed by someone else ({message})"),
        "not_ready" | "not_claimed" => format!("issue {issue} is not open: {message}"),
        "claim_expired" => format!("the claim on issue {issue} lapsed ({message})"),
        _ => message.to_string(),
    };
    RuntimeError::Invalid(text)
}

impl<F: FabricClient> Engine<F> {
    /// The index of issue `id` with its revision.
    async fn issue_index(&self, id: &str) -> Result<(IndexRow, u64)> {
        let Some(entry) = self.home.engine_get(index_key(id)).await? else {
            return invalid(format!("unknown issue {id}"));
        };
        Ok((decode_index(&entry.value)?, entry.version))
    }

    /// Where issue `id` lives: its board team and task id.
    async fn issue_task(&self, id: &str) -> Result<(IndexRow, String)> {
        let (row, _) = self.issue_index(id).await?;
        let Some(task_id) = row.task_id.clone() else {
            let text = format!("issue {id} is still being filed, try again");
            return Err(RuntimeError::Fabric(whip_fabric::FabricError::Unavailable(
                text,
            )));
        };
        Ok((row, task_id))
    }

    /// One issue as it is now.
    pub async fn issue_read(&self, id: &str) -> Result<Issue> {
        let (row, task_id) = self.issue_task(id).await?;
        let task = self.home.board_get(row.team.clone(), task_id).await?;
        task.as_ref()
            .and_then(|t| Issue::from_task(t, row.assignee.clone()))
            .ok_or_else(|| RuntimeError::Invalid(format!("unknown issue {id}")))
    }

    /// Every issue (of one tracker when `tracker` is given), in number order.
    pub async fn issues(&self, tracker: Option<&str>) -> Result<Vec<Issue>> {
        let rows = super::scan_all(self.home.as_ref(), TRACKER_INDEX.as_bytes()).await?;
        let mut teams = BTreeSet::new();
        let mut assignees = BTreeMap::new();
        for (_, entry) in &rows {
            let row = decode_index(&entry.value)?;
            if let Some(task_id) = &row.task_id {
                assignees.insert(task_id.clone(), row.assignee.clone());
            }
            let name = row.team.rsplit('/').next().unwrap_or_default();
            if tracker.is_none_or(|t| t == name) {
                teams.insert(row.team);
            }
        }
        let mut out = Vec::new();
        for team in teams {
            let all = (None, BOARD_READ_MAX);
            out.extend(self.board_issues(&team, all, &assignees).await?);
        }
        out.sort_by_key(Issue::number);
        Ok(out)
    }

    /// Issues on one tracker's board (in one state, at most `limit`), assignees from
    /// `assignees`.
    async fn board_issues(
        &self,
        team: &str,
        (state, limit): (Option<TaskState>, u32),
        assignees: &BTreeMap<String, Option<String>>,
    ) -> Result<Vec<Issue>> {
        let tasks = self.home.board_list(team.to_string(), state, limit).await?;
        Ok(tasks
            .iter()
            .filter_map(|t| Issue::from_task(t, assignees.get(&t.id).cloned().flatten()))
            .collect())
    }

    /// Open issues nobody holds a live claim on, of tracker `name` declared by `owner`.
    pub async fn ready_issues(&self, owner: &str, name: &str) -> Result<Vec<Issue>> {
        let team = tracker_team(owner, name);
        let now = now_ms();
        let limit = crate::limits::READY_ISSUES_OBSERVED_MAX;
        let none = BTreeMap::new();
        let ready = (Some(TaskState::Ready), limit);
        let mut out = self.board_issues(&team, ready, &none).await?;
        // A claim whose window passed is claimable before the board's tick redelivers it.
        let claimed = (Some(TaskState::Claimed), limit);
        let lapsed = self.board_issues(&team, claimed, &none).await?;
        out.extend(lapsed.into_iter().filter(|i| i.ready(now)));
        out.sort_by_key(Issue::number);
        out.truncate(limit as usize);
        Ok(out)
    }

    /// Owners that declared a tracker called `name` (from stored programs).
    pub async fn tracker_owners(&self, name: &str) -> Result<Vec<String>> {
        let rows = super::scan_all(self.home.as_ref(), b"g/tracker/").await?;
        let mut out = Vec::new();
        for (k, _) in rows {
            let text = String::from_utf8_lossy(&k["g/tracker/".len()..]).to_string();
            if let Some((owner, n)) = text.rsplit_once('/')
                && n == name
            {
                out.push(owner.to_string());
            }
        }
        Ok(out)
    }

    /// File an issue (`fields`: title, body, labels). A retry with the same idempotency
    /// key returns the issue the first filing created.
    pub async fn issue_file(
        &self,
        owner: &str,
        tracker: &str,
        fields: &Value,
        filed_by: &str,
        idem: &str,
    ) -> Result<Issue> {
        let team = tracker_team(owner, tracker);
        let id = self.issue_number_for(&team, idem).await?;
        let (row, version) = self.issue_index(&id).await?;
        let task_id = match row.task_id {
            Some(task_id) => task_id,
            None => {
                let labels = fields["labels"].as_array().map_or(Vec::new(), |a| {
                    a.iter()
                        .map(|l| l.as_str().unwrap_or_default().into())
                        .collect()
                });
                let posted = Posted {
                    id: id.clone(),
                    owner: owner.into(),
                    tracker: tracker.into(),
                    title: text_field(fields, "title"),
                    body: text_field(fields, "body"),
                    labels,
                    filed_by: filed_by.into(),
                };
                let body = serde_json::to_vec(&posted).expect("issue encodes");
                let task_id = self
                    .tracker_post(&team, body, &format!("{idem}/post"))
                    .await?;
                let row = IndexRow {
                    task_id: Some(task_id.clone()),
                    ..row
                };
                self.index_put(&id, &row, version, &format!("{idem}/index"))
                    .await?;
                task_id
            }
        };
        let task = self.home.board_get(team, task_id).await?;
        task.as_ref()
            .and_then(|t| Issue::from_task(t, None))
            .ok_or_else(|| RuntimeError::Invalid(format!("issue {id} was not posted")))
    }

    /// Post `body` to tracker board `team`, creating the board the first time this
    /// process posts to it (again if it was dissolved meanwhile).
    async fn tracker_post(&self, team: &str, body: Vec<u8>, idem: &str) -> Result<String> {
        let known = format!("team:{team}");
        for _ in 0..2 {
            if !self.stored.lock().expect("stored lock").contains(&known) {
                self.home.team_ensure(team.to_string()).await?;
                self.stored
                    .lock()
                    .expect("stored lock")
                    .insert(known.clone());
            }
            let posted = self
                .home
                .board_post(team.to_string(), body.clone(), idem.to_string())
                .await;
            match posted {
                Err(whip_fabric::FabricError::Refused {
                    code: whip_fabric::RefusalCode::UnknownTeam,
                    ..
                }) => {
                    self.stored.lock().expect("stored lock").remove(&known);
                }
                other => return Ok(other?),
            }
        }
        invalid(format!("tracker board {team} could not be created"))
    }

    /// The issue number of the filing `idem`: the one it got before, or the next one with
    /// its index row (task not yet posted).
    async fn issue_number_for(&self, team: &str, idem: &str) -> Result<String> {
        let dedupe = format!("{TRACKER_DEDUPE}{:016x}", fnv64(&[idem.as_bytes()])).into_bytes();
        for _ in 0..CONFLICT_RETRIES_MAX {
            if let Some(e) = self.home.engine_get(dedupe.clone()).await? {
                return Ok(String::from_utf8_lossy(&e.value).to_string());
            }
            let seq = self
                .home
                .engine_get(TRACKER_SEQUENCE.as_bytes().to_vec())
                .await?;
            let (last, version) = seq.map_or((0, 0), |e| {
                let n = String::from_utf8_lossy(&e.value).parse().unwrap_or(0);
                (n, e.version)
            });
            let id = format!("WS-{}", last + 1);
            let row = IndexRow {
                team: team.to_string(),
                task_id: None,
                assignee: None,
            };
            let ops = TxnOps {
                compares: vec![
                    (TRACKER_SEQUENCE.as_bytes().to_vec(), version),
                    (dedupe.clone(), 0),
                ],
                puts: vec![
                    (
                        TRACKER_SEQUENCE.as_bytes().to_vec(),
                        (last + 1).to_string().into_bytes(),
                    ),
                    (index_key(&id), encode_index(&row)),
                    (dedupe.clone(), id.clone().into_bytes()),
                ],
                deletes: Vec::new(),
            };
            let attempt = format!("{idem}/file/{version}");
            if let TxnResult::Committed { .. } = self.home.engine_txn(ops, attempt).await? {
                return Ok(id);
            }
        }
        invalid("the tracker is too busy to file an issue, try again")
    }

    /// Write index row `row` of issue `id` if it is still at `version`.
    async fn index_put(&self, id: &str, row: &IndexRow, version: u64, idem: &str) -> Result<()> {
        let k = index_key(id);
        let ops = TxnOps {
            compares: vec![(k.clone(), version)],
            puts: vec![(k, encode_index(row))],
            deletes: Vec::new(),
        };
        match self
            .home
            .engine_txn(ops, format!("{idem}/{version}"))
            .await?
        {
            TxnResult::Committed { .. } => Ok(()),
            TxnResult::Failed { .. } => invalid(format!("issue {id} changed meanwhile, try again")),
        }
    }

    /// Claim `id` for `claimant` until now + `ttl_ms`: exactly one live claimant.
    pub async fn issue_claim(
        &self,
        id: &str,
        claimant: &str,
        ttl_ms: u64,
        idem: &str,
    ) -> Result<ClaimOutcome> {
        let (row, task_id) = self.issue_task(id).await?;
        let before = self.home.board_get(row.team.clone(), task_id.clone());
        let held_before = before.await?.is_some_and(|t| {
            t.state == TaskState::Claimed
                && t.worker.as_deref() == Some(claimant)
                && t.deadline_ms > now_ms()
        });
        let answer = self
            .home
            .board_claim_task(
                row.team.clone(),
                task_id,
                claimant.into(),
                ttl_ms,
                idem.into(),
            )
            .await?;
        match answer {
            BoardAnswer::Claimed { task, .. } => {
                let issue = Issue::from_task(&task, row.assignee)
                    .ok_or_else(|| RuntimeError::Invalid(format!("unknown issue {id}")))?;
                Ok(ClaimOutcome::Claimed {
                    issue,
                    reentered: held_before,
                })
            }
            BoardAnswer::Refused { reason, .. } if reason == "taken" => {
                Ok(ClaimOutcome::Contended {
                    issue: self.issue_read(id).await?,
                })
            }
            BoardAnswer::Refused { reason, message } => Err(refusal(id, &reason, &message)),
            BoardAnswer::Settled { .. } => invalid(format!("claim of {id} answered oddly")),
        }
    }

    /// Renew, release, finish or assign an issue as `claimant` (fence checked when given).
    pub async fn issue_apply(
        &self,
        id: &str,
        claimant: &str,
        fence: Option<u64>,
        op: IssueOp,
        idem: &str,
    ) -> Result<Issue> {
        if let IssueOp::Assign { assignee } = &op {
            return self.issue_assign(id, assignee, idem).await;
        }
        let issue = self.issue_read(id).await?;
        if let Some(done) = already_applied(&issue, claimant, fence, &op) {
            return Ok(done);
        }
        let fence = check_claim(&issue, claimant, fence, now_ms())?;
        let settle = match op {
            IssueOp::Renew { ttl_ms } => Settle::Extend { by_ms: ttl_ms },
            IssueOp::Release => Settle::Release,
            IssueOp::Finish { summary } => Settle::Complete {
                result: serde_json::to_vec(&summary).expect("summary encodes"),
            },
            IssueOp::Assign { .. } => unreachable!("assigned above"),
        };
        let team = self.issue_index(id).await?.0.team;
        let answer = self
            .home
            .board_settle(team, issue.task_id, fence, settle, idem.into())
            .await?;
        match answer {
            BoardAnswer::Refused { reason, message } => Err(refusal(id, &reason, &message)),
            _ => self.issue_read(id).await,
        }
    }

    /// Set the advisory assignee of issue `id`.
    async fn issue_assign(&self, id: &str, assignee: &str, idem: &str) -> Result<Issue> {
        for attempt in 0..CONFLICT_RETRIES_MAX {
            let (mut row, version) = self.issue_index(id).await?;
            row.assignee = Some(assignee.to_string());
            let key = format!("{idem}/assign/{attempt}");
            if self.index_put(id, &row, version, &key).await.is_ok() {
                return self.issue_read(id).await;
            }
        }
        invalid(format!("issue {id} is too busy, try again"))
    }

    /// Give back the live claims `claimant` holds on issues `ids` (a terminal instance's
    /// claims, named by its claim effects); returns how many it released.
    pub async fn issue_release_claims(&self, claimant: &str, ids: &[String]) -> Result<usize> {
        let now = now_ms();
        let mut released = 0;
        for id in ids {
            let issue = self.issue_read(id).await?;
            let held = issue
                .live_claim(now)
                .is_some_and(|c| c.claimant == claimant);
            if !held || issue.status != OPEN {
                continue;
            }
            let idem = format!("{claimant}/terminal/release/{}/{}", issue.id, issue.fence);
            let released_one = self
                .issue_apply(&issue.id, claimant, None, IssueOp::Release, &idem)
                .await;
            if released_one.is_ok() {
                released += 1;
            }
        }
        Ok(released)
    }
}

/// A repeated finish by the claimant that closed the issue (a retried effect) succeeds
/// without writing again.
fn already_applied(
    issue: &Issue,
    claimant: &str,
    fence: Option<u64>,
    op: &IssueOp,
) -> Option<Issue> {
    let same_fence = fence.is_none_or(|f| f == issue.fence);
    match op {
        IssueOp::Finish { .. }
            if issue.status == CLOSED
                && issue.closed_by.as_deref() == Some(claimant)
                && same_fence =>
        {
            Some(issue.clone())
        }
        _ => None,
    }
}
