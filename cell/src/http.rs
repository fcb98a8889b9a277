//! The observation listener a server opens with `--http ADDR` (off unless asked):
//!
//! - `GET /metrics`: Prometheus text ([`crate::metrics`]);
//! - `GET /healthz`: 200 while the process serves;
//! - `GET /readyz`: 200 when every hosted cell has a leader and this server applied its
//!   log (else 503 with the reasons, one a line);
//! - `GET /`: the dashboard, one HTML page with its script embedded in the binary, which
//!   polls `GET /api/overview` (JSON, [`Overview`]) every second.
//!
//! Plain HTTP without authentication: it shows team, lease and mailbox names to whoever
//! reaches it, so operators bind it to loopback or a private network. It changes nothing.
//! `/metrics` and `/api/overview` answer only a `Host` that names this listener (an IP
//! literal, `localhost`, the machine's host name), so a web page whose name was rebound
//! to a private address cannot read them through a browser (421 otherwise). Connections
//! come out of the process's connection budget and are closed when idle.
//! Every answer is computed when asked (no loop runs for it) and bounded: at most
//! [`limits::HTTP_REQUESTS_MAX`] requests at once, each cut after
//! [`limits::HTTP_REQUEST_TIMEOUT_MS`].

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper::body::Incoming;
use serde::Serialize;
use whip_board::gauges::GaugesView;
use whip_proto::v1 as pb;

use crate::budget::Budget;
use crate::limits;
use crate::metrics::{CellFigures, RpcStats};
use crate::runtime::Cell;

/// The dashboard page (HTML, CSS and script in one file, no network needed).
pub const DASHBOARD_HTML: &str = include_str!("http/dashboard.html");

/// What a server shows on its observation listener.
#[tonic::async_trait]
pub trait Observed: Send + Sync + 'static {
    /// The members this server hosts now.
    fn members(&self) -> Vec<Cell>;
    /// The RPC counts of this server's gRPC listener.
    fn rpc_stats(&self) -> RpcStats;
    /// What the dashboard draws.
    async fn overview(&self) -> Overview;
}

/// One node (a server) of the overview.
#[derive(Clone, Debug, Serialize)]
pub struct NodeRow {
    /// Node (member) id.
    pub id: u64,
    /// Its address.
    pub addr: String,
    /// Whether it answered (`None`: not asked).
    pub reachable: Option<bool>,
}

/// One cell of the overview.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CellRow {
    /// The cell.
    pub id: u64,
    /// Its leader, if known.
    pub leader: Option<u64>,
    /// The Raft term.
    pub term: u64,
    /// Its voters.
    pub voters: Vec<u64>,
    /// Last index applied by the member that answered.
    pub applied: u64,
    /// The largest lag of a member behind the leader's log (known from the leader).
    pub lag_max: Option<u64>,
    /// Its ranges of the ring, as `start..=last@epoch` in hex.
    pub ranges: Vec<String>,
    /// Whether this server hosts a member of it.
    pub hosted: bool,
}

impl CellRow {
    /// The row of `cell` from a member's status.
    pub fn from_status(cell: u64, status: &pb::StatusResponse, hosted: bool) -> CellRow {
        let leads = status.leader == Some(status.id);
        CellRow {
            id: cell,
            leader: status.leader,
            term: status.term,
            voters: status
                .members
                .iter()
                .filter(|m| m.voter)
                .map(|m| m.id)
                .collect(),
            applied: status.last_applied,
            lag_max: leads
                .then(|| status.members.iter().filter_map(|m| m.lag).max())
                .flatten(),
            ranges: Vec::new(),
            hosted,
        }
    }
}

/// Depths of one board.
#[derive(Clone, Debug, Serialize)]
pub struct BoardRow {
    /// The cell holding it.
    pub cell: u64,
    /// `local` (a team's board) or `cell` (the cell tier).
    pub tier: &'static str,
    /// The team (empty for the cell tier).
    pub team: String,
    /// Ready tasks.
    pub ready: u64,
    /// Claimed tasks.
    pub claimed: u64,
    /// Dead letters.
    pub dead: u64,
}

/// One lease held.
#[derive(Clone, Debug, Serialize)]
pub struct LeaseRow {
    /// The cell holding it.
    pub cell: u64,
    /// `owner/name[/key]`.
    pub lease: String,
    /// Live holders.
    pub holders: u32,
    /// Slots.
    pub slots: u32,
    /// Waiters.
    pub waiters: u32,
}

/// One mailbox with messages waiting.
#[derive(Clone, Debug, Serialize)]
pub struct MailboxRow {
    /// The cell holding it.
    pub cell: u64,
    /// Its address (`agent:NAME`, `team:NAME`, `entry:ID`).
    pub mailbox: String,
    /// Messages waiting.
    pub depth: u64,
}

/// The live work registry against its limits.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Population {
    /// Live entries in the cells read.
    pub live: u64,
    /// Quotas those cells hold.
    pub quota: u64,
    /// The fabric's ceiling.
    pub ceiling: u64,
}

/// What the dashboard draws (`GET /api/overview`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Overview {
    /// The server answering.
    pub node: u64,
    /// The fabric's nodes (a standalone cell: its members).
    pub nodes: Vec<NodeRow>,
    /// Cells with their leaders.
    pub cells: Vec<CellRow>,
    /// Alarms, one line each.
    pub alarms: Vec<String>,
    /// Boards with something on them.
    pub boards: Vec<BoardRow>,
    /// Leases held.
    pub leases: Vec<LeaseRow>,
    /// Mailboxes with messages waiting.
    pub mailboxes: Vec<MailboxRow>,
    /// The registry against its ceiling.
    pub population: Population,
    /// Some list was cut at its bound.
    pub truncated: bool,
}

impl Overview {
    /// Add what cell `cell`'s gauges say.
    pub fn add_gauges(&mut self, cell: u64, g: &GaugesView) {
        let boards =
            std::iter::once(("cell", &g.cell_tier)).chain(g.boards.iter().map(|b| ("local", b)));
        for (tier, b) in boards {
            if b.ready + b.claimed + b.dead > 0 || tier == "local" {
                self.boards.push(BoardRow {
                    cell,
                    tier,
                    team: b.team.clone(),
                    ready: b.ready,
                    claimed: b.claimed,
                    dead: b.dead,
                });
            }
        }
        self.leases.extend(g.leases.iter().map(|l| LeaseRow {
            cell,
            lease: l.lease.clone(),
            holders: l.holders,
            slots: l.slots,
            waiters: l.waiters,
        }));
        self.mailboxes
            .extend(g.mailboxes.iter().map(|(mailbox, depth)| MailboxRow {
                cell,
                mailbox: mailbox.clone(),
                depth: *depth,
            }));
        self.alarms.extend(g.alarms.iter().map(|(at_ms, text)| {
            format!("cell {cell} at {}: {text}", whip_board::time_text(*at_ms))
        }));
        self.population.live += g.work_live;
        self.population.quota += g.work_quota.unwrap_or(0);
        self.population.ceiling = self.population.ceiling.max(g.work_fabric_max);
        self.truncated |= g.truncated;
    }
}

/// The members of one standalone cell served by this process (`whip cell serve` hosts
/// one, `whip cell dev` all of them), with the RPC counts of their servers.
pub struct Standalone {
    /// The members.
    pub members: Vec<Cell>,
    /// Their servers' RPC counts.
    pub rpc: RpcStats,
}

#[tonic::async_trait]
impl Observed for Standalone {
    fn members(&self) -> Vec<Cell> {
        self.members.clone()
    }

    fn rpc_stats(&self) -> RpcStats {
        self.rpc.clone()
    }

    async fn overview(&self) -> Overview {
        let Some(first) = self.members.first() else {
            return Overview::default();
        };
        // The leader knows every member's lag: answer from it when it is here.
        let statuses: Vec<_> = self.members.iter().map(crate::status::status).collect();
        let index = statuses
            .iter()
            .position(|s| s.leader == Some(s.id))
            .unwrap_or(0);
        let (member, status) = (&self.members[index], &statuses[index]);
        let hosted: Vec<u64> = statuses.iter().map(|s| s.id).collect();
        let mut overview = Overview {
            node: first.id(),
            nodes: status
                .members
                .iter()
                .map(|m| NodeRow {
                    id: m.id,
                    addr: m.addr.clone(),
                    reachable: hosted.contains(&m.id).then_some(true),
                })
                .collect(),
            cells: vec![CellRow::from_status(member.cell_id(), status, true)],
            ..Overview::default()
        };
        if status.leader.is_none() {
            overview
                .alarms
                .push(format!("cell {} has no leader", member.cell_id()));
        }
        if let Some(g) = crate::metrics::read_gauges(member).await {
            overview.add_gauges(member.cell_id(), &g);
        }
        overview
    }
}

struct Shared {
    observed: Arc<dyn Observed>,
    permits: tokio::sync::Semaphore,
    /// Names besides IP literals and `localhost` that a `Host` header may carry.
    own_names: Vec<String>,
}

type Served = State<Arc<Shared>>;

/// Serve the observation endpoints of `observed` on `listener` until `shutdown` resolves.
///
/// Every connection takes a slot of the process's connection budget ([`Budget::process`],
/// shared with the gRPC port) and must send a whole request head within
/// [`limits::HTTP_HEADER_READ_TIMEOUT_MS`], also between requests of a kept-alive
/// connection, so idle connections are closed instead of holding descriptors.
pub async fn serve(
    listener: tokio::net::TcpListener,
    observed: Arc<dyn Observed>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared {
        observed,
        permits: tokio::sync::Semaphore::new(limits::HTTP_REQUESTS_MAX),
        own_names: own_names(&listener.local_addr()?),
    });
    let router = axum::Router::new()
        .route("/", get(dashboard))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/overview", get(overview))
        .with_state(shared);
    let budget = Budget::process();
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = budget.accept(&listener, "http") => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer, slot) = accepted;
        let connection = connection(stream, router.clone(), closed.clone());
        connections.spawn(async move {
            let _slot = slot;
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "observation connection ended");
            }
        });
        while connections.try_join_next().is_some() {}
    }
    // Each connection finishes the request it is answering, then closes.
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Serve one connection with `router` until it closes, or until `closed` says the
/// listener stops (then after the request in flight).
async fn connection(
    stream: tokio::net::TcpStream,
    router: axum::Router,
    mut closed: tokio::sync::watch::Receiver<bool>,
) -> hyper::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt;
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        router.clone().oneshot(request)
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(limits::HTTP_HEADER_READ_TIMEOUT_MS))
        .max_buf_size(limits::HTTP_HEADER_BYTES_MAX)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(served);
    let stopping = async move {
        // The guard `wait_for` returns is not `Send`: drop it here.
        let _ = closed.wait_for(|stop| *stop).await.is_ok();
    };
    tokio::select! {
        result = served.as_mut() => result,
        () = stopping => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    }
}

/// The host names of this machine a `Host` header may name besides IP literals and
/// `localhost`: its host name, when it has one.
fn own_names(local: &std::net::SocketAddr) -> Vec<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: gethostname writes at most `buffer.len()` bytes into the buffer we own.
    let read = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) } == 0;
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    let name = match std::str::from_utf8(&buffer[..end]) {
        Ok(name) if read && !name.is_empty() => vec![name.to_ascii_lowercase()],
        _ => Vec::new(),
    };
    tracing::debug!(%local, names = ?name, "observation listener host names");
    name
}

/// Whether a request's `Host` header names this listener: an IP literal, `localhost` or
/// one of `own_names`, with or without a port. A request without one is no browser's
/// (browsers always send it), so it cannot be a DNS-rebinding page and is let through.
fn host_allowed(host: Option<&header::HeaderValue>, own_names: &[String]) -> bool {
    let Some(host) = host else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    if host.parse::<std::net::SocketAddr>().is_ok() || host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    name.eq_ignore_ascii_case("localhost")
        || own_names.iter().any(|own| own.eq_ignore_ascii_case(name))
}

/// Refuse a request whose `Host` names another site (a DNS-rebinding page in a browser
/// reading the metrics or the overview as if they were its own site's).
fn misdirected(shared: &Shared, headers: &header::HeaderMap) -> Option<Response> {
    let host = headers.get(header::HOST);
    if host_allowed(host, &shared.own_names) {
        return None;
    }
    let named = host.and_then(|h| h.to_str().ok()).unwrap_or("(not text)");
    let text = format!(
        "host {named:?} is not this listener: name it by IP address, localhost or {:?}\n",
        shared.own_names
    );
    Some(
        (
            StatusCode::MISDIRECTED_REQUEST,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            text,
        )
            .into_response(),
    )
}

fn unavailable(text: String) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}

/// Run `answer` within the request bounds.
async fn bounded<F>(shared: &Shared, answer: F) -> Response
where
    F: std::future::Future<Output = Response>,
{
    let Ok(_permit) = shared.permits.try_acquire() else {
        return unavailable(format!(
            "busy: {} requests are being answered\n",
            limits::HTTP_REQUESTS_MAX
        ));
    };
    let bound = Duration::from_millis(limits::HTTP_REQUEST_TIMEOUT_MS);
    match tokio::time::timeout(bound, answer).await {
        Ok(response) => response,
        Err(_) => unavailable(format!(
            "no answer within {} ms\n",
            limits::HTTP_REQUEST_TIMEOUT_MS
        )),
    }
}

async fn figures(observed: &dyn Observed, gauges: bool) -> Vec<CellFigures> {
    let members = observed.members();
    let reads = members.iter().map(|m| CellFigures::of(m, gauges));
    futures::future::join_all(reads).await
}

async fn dashboard() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        DASHBOARD_HTML,
    )
        .into_response()
}

async fn metrics(State(shared): Served, headers: header::HeaderMap) -> Response {
    if let Some(refused) = misdirected(&shared, &headers) {
        return refused;
    }
    bounded(&shared, async {
        let cells = figures(shared.observed.as_ref(), true).await;
        let text = crate::metrics::render(cells, &shared.observed.rpc_stats());
        ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
    })
    .await
}

async fn healthz() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "ok\n",
    )
        .into_response()
}

async fn readyz(State(shared): Served) -> Response {
    bounded(&shared, async {
        let cells = figures(shared.observed.as_ref(), false).await;
        let reasons = crate::metrics::unready(&cells);
        if reasons.is_empty() {
            return (
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "ready\n",
            )
                .into_response();
        }
        unavailable(reasons.join("\n") + "\n")
    })
    .await
}

async fn overview(State(shared): Served, headers: header::HeaderMap) -> Response {
    if let Some(refused) = misdirected(&shared, &headers) {
        return refused;
    }
    bounded(&shared, async {
        let overview = shared.observed.overview().await;
        let body = serde_json::to_string(&overview).expect("the overview serializes");
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    })
    .await
}

/// Bind `addr` for [`serve`].
pub async fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the observation listener is plain HTTP without authentication");
    }
    Ok(listener)
}
