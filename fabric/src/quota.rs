//! The router's steps that span cells: the work registry's quotas of the fabric ceiling,
//! and the registry's fabric-wide commands.
//!
//! Every decision is made by a cell's state machine: the team's cell decides membership
//! and both of its tiers in one apply, the meta cell decides how much of the ceiling it
//! lends, each data cell decides admission within what it holds. This file only sequences
//! those applies.
//!
//! **Quotas.** Each node runs a loop over the data cells it leads (every sixth of the
//! quota's lease): read the cell's live
//! entries and the quota it wants ([`whip_board::work::QuotaView`]), ask the meta cell to
//! lend that much (never past the ceiling minus every other live grant), install the grant
//! on the cell (an older grant never replaces a newer one), then confirm it to the meta
//! cell, which from then on counts the grant at its new size. A registration refused for
//! lack of quota runs one round for its cell and tries once more.
//!
//! Each ask carries the cell's live entries (`Command::WorkQuotaAsk`): a move can bring a
//! cell entries no grant of its own covers, and the meta cell counts them until a grant
//! that fits them is confirmed. A move's driver runs a [`Round::Report`] for each target
//! before it drops the source's copy (`crate::admin`'s `report_arrivals`).

use std::time::Duration;

use whip_board::{Command, Outcome, Query, QueryResult, Request, Then};
use whip_cell::CellError;

use crate::map::META_CELL;
use crate::node::{Node, unexpected};

fn suffixed(key: &Option<String>, suffix: &str) -> Option<String> {
    key.as_ref().map(|key| format!("{key}/{suffix}"))
}

impl Node {
    /// Apply `request` on `cell`, with the in-request step board decides there: a
    /// registration short of quota gets one quota round for the cell and one more try
    /// ([`Then::QuotaRound`]).
    pub(crate) async fn submit_owner(
        &self,
        cell: u64,
        mut request: Request,
    ) -> Result<Outcome, CellError> {
        let Command::WorkRegister { quota_retry, .. } = &mut request.command else {
            return self.submit_cell(None, cell, request).await;
        };
        // A fabric node can run quota rounds, so a first refusal is not the last word.
        *quota_retry = true;
        let outcome = self.submit_cell(None, cell, request.clone()).await?;
        match whip_board::next::then(&request, &outcome) {
            Some(Then::QuotaRound { retry }) => {
                self.quota_round_retrying(cell).await;
                self.submit_cell(None, cell, retry).await
            }
            _ => Ok(outcome),
        }
    }

    /// A quota round for a refused registration, tried again while a cell it needs is
    /// electing or slow (within `QUOTA_ROUND_TRIES`); a round that still fails leaves the
    /// registration refused (fail-closed).
    async fn quota_round_retrying(&self, cell: u64) {
        let mut backoff = Duration::from_millis(crate::limits::ROUTE_BACKOFF_MIN_MS);
        for attempt in 1..=crate::limits::QUOTA_ROUND_TRIES {
            match self.quota_round(cell, Round::Short).await {
                Ok(_) => return,
                Err(e @ (CellError::Unavailable(_) | CellError::NotLeader { .. }))
                    if attempt < crate::limits::QUOTA_ROUND_TRIES =>
                {
                    tracing::debug!(cell, attempt, error = %e, "quota round failed, again");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2)
                        .min(Duration::from_millis(crate::limits::ROUTE_BACKOFF_MAX_MS));
                }
                Err(e) => {
                    tracing::debug!(cell, error = %e, "quota round for a registration failed");
                    return;
                }
            }
        }
    }

    /// One quota round for data cell `cell` (see the module doc); rounds for one cell
    /// from this node run one at a time. The version of the grant the meta cell lent, or
    /// `None` when the round had nothing to do.
    pub async fn quota_round(&self, cell: u64, round: Round) -> Result<Option<u64>, CellError> {
        let lock = {
            let mut rounds = self.inner.quota_rounds.lock().expect("quota rounds lock");
            rounds.entry(cell).or_default().clone()
        };
        let _one_at_a_time = lock.lock().await;
        let view = match self.read_cell(None, cell, Query::WorkQuota).await? {
            QueryResult::WorkQuota(view) => view,
            other => return Err(unexpected(&other)),
        };
        let ttl_ms = self.config().work_quota_ttl_ms;
        let Some(want) = round.want(&view) else {
            return Ok(None);
        };
        let live = view.live;
        let lend = Command::WorkQuotaAsk {
            cell,
            want,
            live,
            ttl_ms,
        };
        let quota = match self.submit_meta(server(lend)).await? {
            Outcome::WorkQuotaLent { quota } => quota,
            other => return Err(CellError::Fatal(format!("unexpected outcome {other:?}"))),
        };
        let install = Command::WorkQuotaInstall { quota, ttl_ms };
        let fits = match self.submit_cell(None, cell, server(install)).await? {
            Outcome::WorkQuotaInstalled { installed, live } => installed && live <= quota.total,
            other => return Err(CellError::Fatal(format!("unexpected outcome {other:?}"))),
        };
        // A cell that admitted past the new total meanwhile keeps its old share counted
        // at the meta cell until a later round fits.
        if fits {
            let ack = Command::WorkQuotaAck {
                cell,
                version: quota.version,
            };
            self.submit_meta(server(ack)).await?;
        }
        Ok(Some(quota.version))
    }

    /// Apply `request` on the meta cell, retrying while it elects a leader (at most
    /// `META_READ_RETRY_MS`).
    async fn submit_meta(&self, request: Request) -> Result<Outcome, CellError> {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(crate::limits::META_READ_RETRY_MS);
        let mut backoff = Duration::from_millis(crate::limits::ROUTE_BACKOFF_MIN_MS);
        loop {
            match self.submit_cell(None, META_CELL, request.clone()).await {
                Err(CellError::Unavailable(_) | CellError::NotLeader { .. })
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(backoff).await;
                    let max = Duration::from_millis(crate::limits::ROUTE_BACKOFF_MAX_MS);
                    backoff = (backoff * 2).min(max);
                }
                other => return other,
            }
        }
    }

    /// `WorkLimitsSet` on the meta cell and every data cell (each keeps a copy); the
    /// answer is the meta cell's.
    pub(crate) async fn set_limits_everywhere(
        &self,
        request: Request,
    ) -> Result<Outcome, CellError> {
        let map = self.map().await?;
        let mut answer = None;
        for cell in std::iter::once(META_CELL).chain(map.data_cells()) {
            let mut request = request.clone();
            request.idempotency_key = suffixed(&request.idempotency_key, &cell.to_string());
            let outcome = self.submit_cell(Some(&map), cell, request).await?;
            answer.get_or_insert(outcome);
        }
        answer.ok_or_else(|| CellError::Fatal("the fabric has no meta cell".into()))
    }

    /// A server command every data cell runs for itself (`TeamLeaveAll`); the answers
    /// are summed.
    pub(crate) async fn on_every_cell(&self, request: Request) -> Result<Outcome, CellError> {
        let map = self.map().await?;
        let mut teams = 0u32;
        for cell in map.data_cells() {
            let mut request = request.clone();
            request.idempotency_key = suffixed(&request.idempotency_key, &cell.to_string());
            match self.submit_cell(Some(&map), cell, request).await? {
                Outcome::TeamsLeft { teams: n } => teams = teams.saturating_add(n),
                other => return Err(CellError::Fatal(format!("unexpected outcome {other:?}"))),
            }
        }
        Ok(Outcome::TeamsLeft { teams })
    }

    /// The registry's fabric-wide reads: every data cell's entries or audit rows, merged
    /// (audit rows carry the cell that decided), or the meta cell's limits.
    pub(crate) async fn gather_work(&self, query: Query) -> Result<QueryResult, CellError> {
        let map = self.map().await?;
        let audit_read = match &query {
            Query::By { query, .. } => matches!(**query, Query::WorkAudit { .. }),
            query => matches!(query, Query::WorkAudit { .. }),
        };
        let limits_read = match &query {
            Query::By { query, .. } => **query == Query::WorkLimits,
            query => *query == Query::WorkLimits,
        };
        if limits_read {
            return self.read_cell(Some(&map), META_CELL, query).await;
        }
        let mut entries = Vec::new();
        let mut audit = Vec::new();
        for cell in map.data_cells() {
            match self.read_cell(Some(&map), cell, query.clone()).await? {
                QueryResult::WorkEntries(rows) => entries.extend(rows),
                QueryResult::WorkAudit(rows) => {
                    audit.extend(
                        rows.into_iter()
                            .map(|row| whip_board::work::AuditView { cell, ..row }),
                    );
                }
                QueryResult::Refused(refusal) => return Ok(QueryResult::Refused(refusal)),
                other => return Err(unexpected(&other)),
            }
        }
        let cap = whip_board::limits::LIST_ROWS_MAX;
        Ok(match audit_read {
            true => {
                audit.sort_by_key(|row| (row.time_ms, row.cell, row.seq));
                audit.truncate(cap);
                QueryResult::WorkAudit(audit)
            }
            false => {
                entries.sort_by(|a, b| a.id.cmp(&b.id));
                // A range on the move is on two cells until the old one drops it.
                entries.dedup_by(|a, b| a.id == b.id);
                entries.truncate(cap);
                QueryResult::WorkEntries(entries)
            }
        })
    }
}

/// Why a quota round runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// A registration was refused for lack of quota: grow by a chunk.
    Short,
    /// The periodic renewal: keep what the live entries need plus a chunk.
    Renew,
    /// A move brought the cell entries: report them to the meta cell (as a renewal, but
    /// only when the cell holds live entries).
    Report,
}

impl Round {
    /// The quota to ask for, or `None` when nothing needs doing: a standalone cell needs
    /// none, and a cell without live entries lets its quota lapse back to the meta cell
    /// instead of renewing it (an idle cell writes nothing).
    fn want(self, view: &whip_board::work::QuotaView) -> Option<u64> {
        if !view.in_fabric {
            return None;
        }
        let held = view.quota.map_or(0, |q| q.total);
        match self {
            Round::Short => Some(
                held.max(view.live)
                    .saturating_add(whip_board::limits::WORK_QUOTA_CHUNK),
            ),
            Round::Renew | Round::Report if view.live == 0 => None,
            Round::Renew | Round::Report => Some(view.want),
        }
    }
}

fn server(command: Command) -> Request {
    Request::server(None, command)
}

/// One loop per node renews the quotas of the data cells it leads.
pub(crate) async fn quota_loop(inner: std::sync::Weak<crate::node::Inner>) {
    let Some(every) = inner.upgrade().map(|inner| {
        let node = Node { inner };
        Duration::from_millis((node.config().work_quota_ttl_ms / 6).max(100))
    }) else {
        return;
    };
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let node = Node { inner };
        let led: Vec<u64> = node
            .hosted_ids()
            .into_iter()
            .filter(|&cell| cell != META_CELL && node.leads(cell))
            .collect();
        for cell in led {
            if let Err(e) = node.quota_round(cell, Round::Renew).await {
                tracing::debug!(cell, error = %e, "quota round failed");
            }
        }
    }
}
