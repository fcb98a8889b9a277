//! The router: a node's client API sends each request to the cell owning its key.
//!
//! A keyed command gets the epoch of its range from the cached map and goes to the owning
//! cell (the hosted member forwards to the cell's leader; a cell hosted elsewhere is reached
//! through one of its voters, and a `NotLeader` answer names the leader for the next try).
//! `WrongRange` means the map is stale or the range is moving: the router reloads the map
//! from the meta cell and tries again, with backoff, for at most `ROUTE_RETRY_MS`. Every
//! write gets an idempotency key before its first try, so a retry never applies twice.
//! Lists and range scans are gathered from every data cell and merged.

use std::time::Duration;

use whip_board::point_of;
use whip_board::query::{CounterView, LeaseView, LedgerEntryView};
use whip_board::{Command, KvPage, Outcome, Query, QueryResult, Request, Then};
use whip_cell::CellError;
use whip_cell::direct::Direct;
use whip_proto::v1 as pb;

use crate::limits;
use crate::map::META_CELL;
use crate::node::{Node, unexpected};

impl Node {
    /// Apply `request` on the cell owning its key.
    pub async fn route_submit(&self, request: Request) -> Result<Outcome, CellError> {
        self.submit_routed(None, request).await
    }

    /// Apply a keyed `request` its sender sent straight here for cell `to.cell` at
    /// `to.epoch` (it routes by the range map, `crate::client`): served by this node's
    /// member of that cell only while it leads, never forwarded. `NotLeader` names the
    /// leader; `WrongRange` (the board's) also makes this node reload its map.
    pub async fn route_submit_direct(
        &self,
        to: Direct,
        request: Request,
    ) -> Result<Outcome, CellError> {
        self.submit_routed(Some(to), request).await
    }

    async fn submit_routed(
        &self,
        to: Option<Direct>,
        mut request: Request,
    ) -> Result<Outcome, CellError> {
        if request.idempotency_key.is_none() {
            let suffix = crate::node::unique_suffix();
            request.idempotency_key = Some(format!("n{}-{suffix}", self.id()));
        }
        let point = point_of::command(&request.command).map_err(CellError::InvalidArgument)?;
        match (point, &request.command) {
            (Some(point), _) => {
                let kept = whip_board::next::may_then(&request.command).then(|| request.clone());
                let outcome = self.submit_keyed(to, point, request).await?;
                // A quota round was the owner's step (`submit_owner`); what is left is
                // a claim's fabric tier, claimed by this server vouching for the caller.
                let Some(step) = kept.and_then(|kept| whip_board::next::then(&kept, &outcome))
                else {
                    return Ok(outcome);
                };
                match &step {
                    Then::ClaimFabricQueue { point, request, .. } => {
                        let answer = self.submit_at(*point, request.clone()).await?;
                        whip_cell::test_hooks::crash_at("fabric_claim");
                        Ok(step.settle(answer))
                    }
                    Then::QuotaRound { .. } => Ok(outcome),
                }
            }
            (None, _) if to.is_some() => Err(CellError::InvalidArgument(
                "only a keyed command may name its cell; send this one without a route".into(),
            )),
            (None, Command::LeaseReleaseAll { .. }) => self.release_everywhere(request).await,
            (None, Command::WorkLimitsSet { .. }) => self.set_limits_everywhere(request).await,
            (None, Command::TeamLeaveAll { .. }) => self.on_every_cell(request).await,
            (None, _) => Err(CellError::InvalidArgument(
                "this command is internal to a cell and not accepted by a fabric node".into(),
            )),
        }
    }

    /// A keyed request: by the map when its sender named no route, else on the named cell.
    async fn submit_keyed(
        &self,
        to: Option<Direct>,
        point: u64,
        request: Request,
    ) -> Result<Outcome, CellError> {
        let Some(to) = to else {
            return self.submit_at(point, request).await;
        };
        let mut request = request;
        request.epoch = to.epoch;
        let member = match self.hosted(to.cell) {
            Some(member) if self.leads(to.cell) => member,
            Some(member) => {
                return Err(CellError::NotLeader {
                    hint: member.leader_addr(),
                });
            }
            None => return Err(CellError::NotLeader { hint: None }),
        };
        let outcome = match &request.command {
            // A registration may need a quota round first (`crate::quota`).
            Command::WorkRegister { .. } => self.submit_owner(to.cell, request).await,
            // Never forwarded: if leadership moved meanwhile, the sender hears where to.
            _ => member.submit_forwarded(request).await,
        };
        if let Err(CellError::WrongRange { .. }) = &outcome {
            self.invalidate_map();
        }
        outcome
    }

    /// The range map and where each data cell's leader is, for clients that route by them:
    /// the cached map (read afresh when `reload`), and the leaders this node's members
    /// know, or the hints it keeps for cells it does not host.
    pub async fn routes(&self, reload: bool) -> Result<pb::RoutesResponse, CellError> {
        let map = match reload {
            true => self.load_map().await?.0,
            false => self.map().await?,
        };
        let ranges = (map.ranges.iter())
            .map(|r| pb::RangeRoute {
                start: r.start,
                last: r.last,
                epoch: r.epoch,
                cell: r.cell,
            })
            .collect();
        let cells = (map.data_cells().into_iter())
            .map(|cell| pb::CellRoute {
                cell,
                leader_addr: self.leader_addr(cell).unwrap_or_default(),
            })
            .collect();
        Ok(pb::RoutesResponse { ranges, cells })
    }

    /// Apply `request` on the owner of `point` at the epoch the map gives it.
    pub(crate) async fn submit_at(
        &self,
        point: u64,
        request: Request,
    ) -> Result<Outcome, CellError> {
        self.with_route(point, |node, cell, epoch| {
            let mut request = request.clone();
            request.epoch = epoch;
            async move { node.submit_owner(cell, request).await }
        })
        .await
    }

    /// Answer `query` from the cell owning its key, or gather a list from every data cell.
    pub async fn route_read(&self, query: Query) -> Result<QueryResult, CellError> {
        if let Some(point) = point_of::query(&query) {
            return self
                .with_route(point, |node, cell, epoch| {
                    let routed = Query::Routed {
                        epoch,
                        query: Box::new(query.clone()),
                    };
                    async move { node.read_cell(None, cell, routed).await }
                })
                .await;
        }
        // A client's read comes wrapped with its caller; the cells decide on it.
        let inner = match &query {
            Query::By { query, .. } => query.as_ref(),
            query => query,
        };
        match inner {
            Query::LeaseList { limit, .. }
            | Query::CounterList { limit, .. }
            | Query::KvRange { limit, .. }
            | Query::EngineRange { limit, .. }
            | Query::LedgerList { limit, .. } => {
                let limit = *limit;
                self.gather(query, limit).await
            }
            Query::WorkList { .. } | Query::WorkAudit { .. } | Query::WorkLimits => {
                self.gather_work(query).await
            }
            Query::PathsList { repo: None, .. } => self.gather_reservations(query).await,
            _ => Err(CellError::InvalidArgument(
                "this read is internal to a cell and not accepted by a fabric node".into(),
            )),
        }
    }

    /// Run `call(cell, epoch)` against the owner of `point`, refreshing the map on
    /// `WrongRange` and retrying unavailable cells, within `ROUTE_RETRY_MS`.
    async fn with_route<T, F, Fut>(&self, point: u64, call: F) -> Result<T, CellError>
    where
        F: Fn(Node, u64, u64) -> Fut,
        Fut: std::future::Future<Output = Result<T, CellError>>,
    {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(limits::ROUTE_RETRY_MS);
        let mut backoff = Duration::from_millis(limits::ROUTE_BACKOFF_MIN_MS);
        loop {
            let map = self.map().await?;
            let range = *map.locate(point);
            let err = match call(self.clone(), range.cell, range.epoch).await {
                Err(CellError::WrongRange { epoch }) => {
                    tracing::debug!(
                        point,
                        cell = range.cell,
                        epoch,
                        "wrong range, reloading map"
                    );
                    self.invalidate_map();
                    CellError::WrongRange { epoch }
                }
                Err(e @ (CellError::Unavailable(_) | CellError::NotLeader { .. })) => e,
                other => return other,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(CellError::Unavailable(format!(
                    "cell {} (owner of point {point:#x}) did not serve the request within \
                     {} ms: {err}",
                    range.cell,
                    limits::ROUTE_RETRY_MS
                )));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(limits::ROUTE_BACKOFF_MAX_MS));
        }
    }

    /// `LeaseReleaseAll` on every data cell: a holder's slots may be anywhere.
    async fn release_everywhere(&self, request: Request) -> Result<Outcome, CellError> {
        let map = self.map().await?;
        let calls = map.data_cells().into_iter().map(|cell| {
            let mut request = request.clone();
            // One idempotency key per cell: each cell records its own outcome.
            request.idempotency_key = request.idempotency_key.map(|k| format!("{k}@{cell}"));
            let map = map.clone();
            async move { self.submit_cell(Some(&map), cell, request).await }
        });
        let mut released = 0;
        for outcome in futures::future::join_all(calls).await {
            match outcome? {
                Outcome::LeaseReleasedAll { released: n } => released += n,
                other => return Err(CellError::Fatal(format!("unexpected outcome {other:?}"))),
            }
        }
        Ok(Outcome::LeaseReleasedAll { released })
    }

    /// `query` asked of every data cell at once (each answers for the ranges it serves),
    /// the answers in the map's cell order.
    async fn ask_every_data_cell(
        &self,
        query: Query,
    ) -> Result<Vec<Result<QueryResult, CellError>>, CellError> {
        let map = self.map().await?;
        let routed = Query::Routed {
            epoch: 0,
            query: Box::new(query),
        };
        let calls = map.data_cells().into_iter().map(|cell| {
            let routed = routed.clone();
            let map = map.clone();
            async move { self.read_cell(Some(&map), cell, routed).await }
        });
        Ok(futures::future::join_all(calls).await)
    }

    /// A holder's reservations from every data cell (each answers for the repositories it
    /// serves), in repository and pattern order.
    async fn gather_reservations(&self, query: Query) -> Result<QueryResult, CellError> {
        let mut rows = Vec::new();
        for answer in self.ask_every_data_cell(query).await? {
            match answer? {
                QueryResult::Reservations(found) => rows.extend(found),
                refused @ QueryResult::Refused(_) => return Ok(refused),
                other => return Err(unexpected(&other)),
            }
        }
        rows.sort_by(|a, b| (&a.repo, &a.path).cmp(&(&b.repo, &b.path)));
        rows.truncate(whip_board::limits::LIST_ROWS_MAX);
        Ok(QueryResult::Reservations(rows))
    }

    /// A list or scan from every data cell (each answers for the ranges it serves), merged
    /// in the order one cell would list them and cut to `limit`.
    async fn gather(&self, query: Query, limit: u32) -> Result<QueryResult, CellError> {
        let answers = self.ask_every_data_cell(query).await?;
        let cap = match limit as usize {
            0 => whip_board::limits::LIST_ROWS_MAX,
            n => n.min(whip_board::limits::LIST_ROWS_MAX),
        };
        merge(answers, cap)
    }
}

/// The earlier of two resume points (`None`: that answer was complete).
fn earliest(a: Option<Vec<u8>>, b: Option<Vec<u8>>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Rows of several cells' pages as one page: in key order, none past the earliest point
/// where a cell stopped early (its later rows are unknown), cut to `cap`; the next page
/// starts after the last row kept, or after that point.
fn merge_pages(
    mut rows: Vec<(Vec<u8>, whip_board::query::KvEntry)>,
    resume: Option<Vec<u8>>,
    cap: usize,
) -> KvPage {
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(bound) = &resume {
        rows.retain(|(key, _)| key <= bound);
    }
    if rows.len() > cap {
        rows.truncate(cap);
        let resume_after = rows.last().map(|(key, _)| key.clone());
        return KvPage { rows, resume_after };
    }
    KvPage {
        rows,
        resume_after: resume,
    }
}

fn merge(
    answers: Vec<Result<QueryResult, CellError>>,
    cap: usize,
) -> Result<QueryResult, CellError> {
    let mut kv = Vec::new();
    let mut resume: Option<Vec<u8>> = None;
    let mut leases: Vec<LeaseView> = Vec::new();
    let mut counters: Vec<CounterView> = Vec::new();
    let mut entries: Vec<LedgerEntryView> = Vec::new();
    let mut kind = None;
    for answer in answers {
        let answer = answer?;
        kind = Some(std::mem::discriminant(&answer));
        match answer {
            QueryResult::KvRange(page) => {
                kv.extend(page.rows);
                resume = earliest(resume, page.resume_after);
            }
            QueryResult::Leases(rows) => leases.extend(rows),
            QueryResult::Counters(rows) => counters.extend(rows),
            QueryResult::LedgerEntries(rows) => entries.extend(rows),
            // Every cell refuses the same caller alike (anonymous, reserved).
            refused @ QueryResult::Refused(_) => return Ok(refused),
            other => return Err(unexpected(&other)),
        }
    }
    let display = |id: &whip_board::ResourceId| {
        (
            format!("{}/{}", id.owner, id.name),
            id.owner.clone(),
            id.name.clone(),
            id.key.clone(),
        )
    };
    Ok(match kind {
        Some(k) if k == std::mem::discriminant(&QueryResult::KvRange(KvPage::default())) => {
            QueryResult::KvRange(merge_pages(kv, resume, cap))
        }
        Some(k) if k == std::mem::discriminant(&QueryResult::Leases(Vec::new())) => {
            leases.sort_by_key(|v| display(&v.lease));
            leases.truncate(cap);
            QueryResult::Leases(leases)
        }
        Some(k) if k == std::mem::discriminant(&QueryResult::Counters(Vec::new())) => {
            counters.sort_by_key(|v| display(&v.counter));
            counters.truncate(cap);
            QueryResult::Counters(counters)
        }
        _ => {
            entries.sort_by(|a, b| (&a.ledger.key, a.seq).cmp(&(&b.ledger.key, b.seq)));
            entries.truncate(cap);
            QueryResult::LedgerEntries(entries)
        }
    })
}

#[tonic::async_trait]
impl whip_cell::service::Dispatch for Node {
    async fn submit(&self, request: Request) -> Result<Outcome, CellError> {
        self.route_submit(request).await
    }

    async fn read(&self, query: Query) -> Result<QueryResult, CellError> {
        self.route_read(query).await
    }

    async fn submit_direct(&self, to: Direct, request: Request) -> Result<Outcome, CellError> {
        self.route_submit_direct(to, request).await
    }

    async fn routes(&self, reload: bool) -> Result<pb::RoutesResponse, CellError> {
        Node::routes(self, reload).await
    }

    async fn watch_member(
        &self,
        key: &[u8],
        prefix: bool,
        cell: u64,
    ) -> Result<whip_cell::Cell, CellError> {
        let cell = match (cell, prefix) {
            (0, true) => {
                return Err(CellError::InvalidArgument(
                    "a prefix watch in a fabric names its cell: open one per data cell".into(),
                ));
            }
            (0, false) => {
                // A watch opens after a key's range moved: read the map afresh.
                self.invalidate_map();
                self.map()
                    .await?
                    .locate(whip_board::route::kv_point(key))
                    .cell
            }
            (cell, _) => cell,
        };
        if cell == META_CELL {
            return Err(CellError::InvalidArgument(
                "the meta cell holds no client keys to watch".into(),
            ));
        }
        self.hosted(cell).ok_or_else(|| {
            CellError::Unavailable(format!("cell {cell} is not hosted on node {}", self.id()))
        })
    }

    async fn applied_signal(&self, point: u64) -> Option<tokio::sync::watch::Receiver<u64>> {
        let cell = self.map().await.ok()?.locate(point).cell;
        self.hosted(cell).map(|member| member.applied_signal())
    }

    async fn status(&self, cell: u64) -> Result<pb::StatusResponse, CellError> {
        let member = self.hosted(cell).ok_or_else(|| {
            let which = if cell == META_CELL {
                "the meta cell".to_string()
            } else {
                format!("cell {cell}")
            };
            CellError::Unavailable(format!("{which} is not hosted on node {}", self.id()))
        })?;
        Ok(whip_cell::status::status(&member))
    }
}
