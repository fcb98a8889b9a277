//! Trackers of the builtin provider: durable work items in CAS keys of the fabric.
//!
//! Layout:
//! - `t/n`: the issue sequence of the store (`WS-1`, `WS-2`, …), its value the last number
//! - `t/i/<id>`: one issue ([`Issue`], JSON)
//! - `t/k/<hash>`: the issue a filing with that idempotency key created (a retried filing
//!   finds it instead of filing twice)
//! - `g/tracker/<owner>/<name>`: trackers that programs declared (`whip issue new` finds
//!   the owner of a tracker name here)
//!
//! Every change is one `KvTxn` guarded by the revision of the issue key, so two claimants
//! racing for one issue cannot both win: the loser's compare fails, it re-reads, and sees
//! the winner's live claim. A claim carries a fence that grows with every new claim of
//! the issue; renew, release and finish must present the current claimant (and, when
//! given, the current fence), so a claimant whose claim expired and was taken over is
//! refused with `fence N is stale, current is M`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use whip_fabric::{FabricClient, TxnOps, TxnResult};

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
    /// Grows with every new claim of the issue.
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
    /// The current or last claim.
    pub claim: Option<Claim>,
    /// The last fence handed out (the next claim gets one more).
    pub fence: u64,
    /// Who filed it (an instance id or `cli`).
    pub filed_by: String,
    /// Who finished it, with the summary it was finished with.
    pub closed_by: Option<String>,
    /// Summary given at `finish`.
    pub summary: Value,
    /// Creation time (ms).
    pub created_ms: u64,
    /// Last change (ms).
    pub updated_ms: u64,
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
        self.id
            .strip_prefix("WS-")
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX)
    }
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

/// Tracker rows share the routing tag `{tracker}`: issue numbers come from one sequence
/// key, so a filing (sequence, issue, dedupe key) is a single-cell transaction.
const TRACKER_ISSUES: &str = "t/{tracker}/i/";
/// The issue-number sequence.
const TRACKER_SEQUENCE: &str = "t/{tracker}/n";
/// Filing dedupe keys (hash of the idempotency key → issue id).
const TRACKER_DEDUPE: &str = "t/{tracker}/k/";

fn issue_key(id: &str) -> Vec<u8> {
    key(&[TRACKER_ISSUES, id])
}

fn decode(bytes: &[u8]) -> Result<Issue> {
    serde_json::from_slice(bytes)
        .map_err(|e| RuntimeError::Invalid(format!("issue row unreadable: {e}")))
}

fn encode(issue: &Issue) -> Vec<u8> {
    serde_json::to_vec(issue).expect("issue encodes")
}

fn text_field(fields: &Value, name: &str) -> String {
    match &fields[name] {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Refuse an operation by `claimant` (with `fence` when given) on `issue` at `now`.
fn check_claim(issue: &Issue, claimant: &str, fence: Option<u64>, now: u64) -> Result<()> {
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
        Some(c) if c.claimant == claimant => Ok(()),
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

impl<F: FabricClient> Engine<F> {
    /// One issue with the revision of its key.
    pub async fn issue_read(&self, id: &str) -> Result<(Issue, u64)> {
        let Some(entry) = self.fabric.kv_get(issue_key(id)).await? else {
            return invalid(format!("unknown issue {id}"));
        };
        Ok((decode(&entry.value)?, entry.version))
    }

    /// Every issue (of one tracker when `tracker` is given), in number order.
    pub async fn issues(&self, tracker: Option<&str>) -> Result<Vec<Issue>> {
        let rows = self
            .fabric
            .kv_range(TRACKER_ISSUES.as_bytes().to_vec(), Vec::new(), 0)
            .await?;
        let mut out: Vec<Issue> = rows
            .iter()
            .filter_map(|(_, e)| decode(&e.value).ok())
            .filter(|i| tracker.is_none_or(|t| i.tracker == t))
            .collect();
        out.sort_by_key(Issue::number);
        Ok(out)
    }

    /// Owners that declared a tracker called `name` (from stored programs).
    pub async fn tracker_owners(&self, name: &str) -> Result<Vec<String>> {
        let rows = self
            .fabric
            .kv_range(b"g/tracker/".to_vec(), Vec::new(), 0)
            .await?;
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
        let dedupe = format!("{TRACKER_DEDUPE}{:016x}", fnv64(&[idem.as_bytes()])).into_bytes();
        for _ in 0..CONFLICT_RETRIES_MAX {
            if let Some(e) = self.fabric.kv_get(dedupe.clone()).await? {
                let id = String::from_utf8_lossy(&e.value).to_string();
                return Ok(self.issue_read(&id).await?.0);
            }
            let seq = self
                .fabric
                .kv_get(TRACKER_SEQUENCE.as_bytes().to_vec())
                .await?;
            let (last, version) = seq.map_or((0, 0), |e| {
                let n = String::from_utf8_lossy(&e.value).parse().unwrap_or(0);
                (n, e.version)
            });
            let now = now_ms();
            let labels = fields["labels"].as_array().map_or(Vec::new(), |a| {
                a.iter()
                    .map(|l| l.as_str().unwrap_or_default().into())
                    .collect()
            });
            let issue = Issue {
                id: format!("WS-{}", last + 1),
                owner: owner.into(),
                tracker: tracker.into(),
                title: text_field(fields, "title"),
                body: text_field(fields, "body"),
                labels,
                status: OPEN.into(),
                assignee: None,
                claim: None,
                fence: 0,
                filed_by: filed_by.into(),
                closed_by: None,
                summary: Value::Null,
                created_ms: now,
                updated_ms: now,
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
                    (issue_key(&issue.id), encode(&issue)),
                    (dedupe.clone(), issue.id.clone().into_bytes()),
                ],
                deletes: Vec::new(),
            };
            let attempt = format!("{idem}/file/{version}");
            if let TxnResult::Committed { .. } = self.fabric.kv_txn(ops, attempt).await? {
                return Ok(issue);
            }
        }
        invalid("the tracker is too busy to file an issue, try again")
    }

    /// Claim `id` for `claimant` until now + `ttl_ms`: exactly one live claimant.
    pub async fn issue_claim(
        &self,
        id: &str,
        claimant: &str,
        ttl_ms: u64,
        idem: &str,
    ) -> Result<ClaimOutcome> {
        for _ in 0..CONFLICT_RETRIES_MAX {
            let (mut issue, version) = self.issue_read(id).await?;
            let now = now_ms();
            if issue.status != OPEN {
                return invalid(format!("issue {id} is {}", issue.status));
            }
            let reentered = match issue.live_claim(now) {
                Some(c) if c.claimant == claimant => true,
                Some(_) => return Ok(ClaimOutcome::Contended { issue }),
                None => false,
            };
            if !reentered {
                issue.fence += 1;
            }
            issue.claim = Some(Claim {
                claimant: claimant.into(),
                fence: issue.fence,
                deadline_ms: now + ttl_ms,
            });
            issue.updated_ms = now;
            if self.issue_put(&issue, version, idem, "claim").await? {
                return Ok(ClaimOutcome::Claimed { issue, reentered });
            }
        }
        invalid(format!("issue {id} is too busy to claim, try again"))
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
        for _ in 0..CONFLICT_RETRIES_MAX {
            let (mut issue, version) = self.issue_read(id).await?;
            let now = now_ms();
            if let Some(done) = already_applied(&issue, claimant, fence, &op) {
                return Ok(done);
            }
            match &op {
                IssueOp::Assign { assignee } => issue.assignee = Some(assignee.clone()),
                IssueOp::Renew { ttl_ms } => {
                    check_claim(&issue, claimant, fence, now)?;
                    if let Some(c) = issue.claim.as_mut() {
                        c.deadline_ms = c.deadline_ms.max(now + ttl_ms);
                    }
                }
                IssueOp::Release => {
                    check_claim(&issue, claimant, fence, now)?;
                    issue.claim = None;
                }
                IssueOp::Finish { summary } => {
                    check_claim(&issue, claimant, fence, now)?;
                    issue.status = CLOSED.into();
                    issue.claim = None;
                    issue.closed_by = Some(claimant.into());
                    issue.summary = summary.clone();
                }
            }
            issue.updated_ms = now;
            if self.issue_put(&issue, version, idem, "apply").await? {
                return Ok(issue);
            }
        }
        invalid(format!("issue {id} is too busy, try again"))
    }

    /// Give back every live claim `claimant` holds (a terminal instance's claims).
    pub async fn issue_release_all(&self, claimant: &str) -> Result<usize> {
        let now = now_ms();
        let mut released = 0;
        for issue in self.issues(None).await? {
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

    /// Write `issue` if its key is still at `version`; `false` when someone wrote first.
    async fn issue_put(&self, issue: &Issue, version: u64, idem: &str, op: &str) -> Result<bool> {
        let k = issue_key(&issue.id);
        let ops = TxnOps {
            compares: vec![(k.clone(), version)],
            puts: vec![(k, encode(issue))],
            deletes: Vec::new(),
        };
        // The revision joins the key: a retry after losing the race is a new request.
        let attempt = format!("{idem}/{op}/{version}");
        Ok(matches!(
            self.fabric.kv_txn(ops, attempt).await?,
            TxnResult::Committed { .. }
        ))
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
