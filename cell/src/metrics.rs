//! What a server exports to Prometheus (`GET /metrics` of [`crate::http`]), in the text
//! format of the `prometheus-client` crate.
//!
//! Two kinds of figure. RPC counts and latencies are recorded as calls pass the caller
//! gate ([`RpcStats`], one per server). Everything else is read when Prometheus scrapes:
//! each hosted member's Raft metrics and stage histograms (memory only), and, on the
//! members that lead, one bounded local read of the state machine ([`Query::Gauges`]), so
//! an idle cell costs nothing between scrapes and a follower never double counts a board.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use whip_board::gauges::GaugesView;
use whip_board::{Query, QueryResult};

use crate::limits;
use crate::runtime::Cell;
use crate::stages::StageHistogram;

/// Labels of one sample: (name, value) pairs.
type Labels = Vec<(&'static str, String)>;

/// One gauge family to write: name, help, samples.
type GaugeFamily = (&'static str, &'static str, Vec<(Labels, i64)>);

fn histogram_of_rpc() -> Histogram {
    // 100 µs to about 13 s.
    Histogram::new(exponential_buckets(0.000_1, 2.0, 18))
}

struct RpcInner {
    calls: Family<Labels, Counter>,
    seconds: Family<Labels, Histogram>,
    forwarded: Family<Labels, Counter>,
    /// Methods given their own label so far; later ones count as `other`.
    methods: Mutex<BTreeSet<String>>,
}

/// RPC counts and latencies of one server, by method and gRPC code. Cheap to clone.
#[derive(Clone)]
pub struct RpcStats {
    inner: Arc<RpcInner>,
}

impl Default for RpcStats {
    fn default() -> Self {
        RpcStats {
            inner: Arc::new(RpcInner {
                calls: Family::default(),
                seconds: Family::new_with_constructor(histogram_of_rpc),
                forwarded: Family::default(),
                methods: Mutex::new(BTreeSet::new()),
            }),
        }
    }
}

impl std::fmt::Debug for RpcStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RpcStats")
    }
}

impl RpcStats {
    /// Count one call of `path` (`/package.Service/Method`) answered `code` after `took`.
    pub fn record(&self, path: &str, code: tonic::Code, took: Duration) {
        let labels = vec![
            ("method", self.method_label(path)),
            ("code", code_name(code).to_string()),
        ];
        self.inner.calls.get_or_create(&labels).inc();
        self.inner
            .seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// How many calls of `path` this server answered `ok` so far.
    pub fn answered_ok(&self, path: &str) -> u64 {
        let labels = vec![
            ("method", self.method_label(path)),
            ("code", code_name(tonic::Code::Ok).to_string()),
        ];
        self.inner.calls.get_or_create(&labels).get()
    }

    /// Count `requests` this server sent on to another node: a member to its cell's leader,
    /// or a router to a cell it does not host. A client routing by the range map makes
    /// none.
    pub fn forwarded(&self, kind: Forwarded, requests: usize) {
        let labels = vec![("kind", kind.code().to_string())];
        let counter = self.inner.forwarded.get_or_create(&labels);
        counter.inc_by(requests as u64);
    }

    /// A path of ours keeps its name until [`limits::RPC_METHOD_LABELS_MAX`] are named;
    /// anything else (a caller can send any path) is `other`, so labels stay bounded.
    fn method_label(&self, path: &str) -> String {
        let ours = path.starts_with("/whip.v1.") || path.starts_with("/grpc.reflection.");
        if !ours || path.len() > limits::RPC_METHOD_BYTES_MAX {
            return "other".into();
        }
        let mut methods = self.inner.methods.lock().expect("methods lock");
        if methods.contains(path) || methods.len() < limits::RPC_METHOD_LABELS_MAX {
            methods.insert(path.to_string());
            return path.to_string();
        }
        "other".into()
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "whip_rpc_calls",
            "gRPC calls this server answered, by method and code",
            self.inner.calls.clone(),
        );
        registry.register(
            "whip_rpc_duration_seconds",
            "time from a gRPC call's arrival to its response head, by method and code",
            self.inner.seconds.clone(),
        );
        registry.register(
            "whip_forwarded_requests",
            "requests this server sent on to another node (to a cell's leader or to a cell \
             hosted elsewhere), by kind",
            self.inner.forwarded.clone(),
        );
    }
}

/// What a forwarded request was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forwarded {
    /// A write (one request of a forwarded batch).
    Write,
    /// A linearizable read.
    Read,
}

impl Forwarded {
    /// A stable snake_case code (the `kind` label).
    pub fn code(self) -> &'static str {
        match self {
            Forwarded::Write => "write",
            Forwarded::Read => "read",
        }
    }
}

/// The stable snake_case name of a gRPC code.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "ok",
        C::Cancelled => "cancelled",
        C::Unknown => "unknown",
        C::InvalidArgument => "invalid_argument",
        C::DeadlineExceeded => "deadline_exceeded",
        C::NotFound => "not_found",
        C::AlreadyExists => "already_exists",
        C::PermissionDenied => "permission_denied",
        C::ResourceExhausted => "resource_exhausted",
        C::FailedPrecondition => "failed_precondition",
        C::Aborted => "aborted",
        C::OutOfRange => "out_of_range",
        C::Unimplemented => "unimplemented",
        C::Internal => "internal",
        C::Unavailable => "unavailable",
        C::DataLoss => "data_loss",
        C::Unauthenticated => "unauthenticated",
    }
}

/// One hosted member as a scrape sees it.
#[derive(Clone, Debug)]
pub struct CellFigures {
    /// The cell.
    pub cell: u64,
    /// This member's id (a node's id on a fabric node).
    pub member: u64,
    /// The Raft term this member is in.
    pub term: u64,
    /// The leader this member knows.
    pub leader: Option<u64>,
    /// Whether this member leads.
    pub is_leader: bool,
    /// Last index in this member's log.
    pub last_log_index: u64,
    /// Last index applied here.
    pub applied_index: u64,
    /// Highest index a quorum of voters holds (leaders only: followers do not know it).
    pub commit_index: Option<u64>,
    /// Entries each other member lacks of the leader's log (leaders only): (member, lag).
    pub replication_lag: Vec<(u64, u64)>,
    /// Raft messages refused before the core.
    pub raft_refused: u64,
    /// Per-stage write latencies.
    pub stages: Vec<(&'static str, StageHistogram)>,
    /// The state machine's gauges (leaders only; `None` when the read failed).
    pub gauges: Option<GaugesView>,
}

impl CellFigures {
    /// The figures of `member`; `gauges` reads the state machine (locally, no Raft round).
    pub async fn of(member: &Cell, gauges: bool) -> CellFigures {
        let status = crate::status::status(member);
        let is_leader = status.leader == Some(status.id);
        let voters: Vec<(u64, u64)> = status
            .members
            .iter()
            .filter(|m| m.voter)
            .map(|m| (m.id, m.matched_index.unwrap_or(0)))
            .collect();
        let commit_index = is_leader.then(|| quorum_index(&voters));
        let replication_lag = match is_leader {
            true => status
                .members
                .iter()
                .filter(|m| m.id != status.id)
                .map(|m| (m.id, m.lag.unwrap_or(status.last_log_index)))
                .collect(),
            false => Vec::new(),
        };
        let gauges = match gauges && is_leader {
            true => read_gauges(member).await,
            false => None,
        };
        CellFigures {
            cell: member.cell_id(),
            member: status.id,
            term: status.term,
            leader: status.leader,
            is_leader,
            last_log_index: status.last_log_index,
            applied_index: status.last_applied,
            commit_index,
            replication_lag,
            raft_refused: status.raft_refused,
            stages: member
                .stages()
                .export()
                .into_iter()
                .map(|(stage, h)| (stage.name(), h))
                .collect(),
            gauges,
        }
    }

    /// Entries appended here and not yet applied.
    pub fn apply_lag(&self) -> u64 {
        self.last_log_index.saturating_sub(self.applied_index)
    }
}

/// This member's gauges, read from its applied state without a barrier.
pub async fn read_gauges(member: &Cell) -> Option<GaugesView> {
    match member.local_query(Query::Gauges).await {
        Ok(QueryResult::Gauges(view)) => Some(view),
        Ok(other) => {
            tracing::warn!(answer = ?other, "gauges read answered something else");
            None
        }
        Err(e) => {
            tracing::debug!(error = %e, "gauges read failed");
            None
        }
    }
}

/// The highest index held by a majority of `voters` ((id, matched index)).
fn quorum_index(voters: &[(u64, u64)]) -> u64 {
    let mut matched: Vec<u64> = voters.iter().map(|(_, i)| *i).collect();
    matched.sort_unstable_by(|a, b| b.cmp(a));
    matched.get(matched.len() / 2).copied().unwrap_or(0)
}

/// The figures of one scrape, encoded when the registry is.
#[derive(Debug)]
struct Scrape {
    cells: Vec<CellFigures>,
}

/// The metrics text of a server hosting `cells`, with its `rpc` counts.
pub fn render(cells: Vec<CellFigures>, rpc: &RpcStats) -> String {
    let mut registry = Registry::default();
    rpc.register(&mut registry);
    registry.register_collector(Box::new(Scrape { cells }));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    out
}

/// The content type of [`render`]'s text (OpenMetrics, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn cell_label(c: &CellFigures) -> Labels {
    vec![
        ("cell", c.cell.to_string()),
        ("member", c.member.to_string()),
    ]
}

fn with(mut labels: Labels, name: &'static str, value: impl ToString) -> Labels {
    labels.push((name, value.to_string()));
    labels
}

/// Write one gauge family (nothing when it has no samples).
fn gauges(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: Vec<(Labels, i64)>,
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        family.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Scrape {
    /// One sample per cell of `value` (cells where it is `None` are left out).
    fn per_cell(&self, value: impl Fn(&CellFigures) -> Option<u64>) -> Vec<(Labels, i64)> {
        self.cells
            .iter()
            .filter_map(|c| value(c).map(|v| (cell_label(c), as_i64(v))))
            .collect()
    }

    /// Samples from the gauges of the cells this server leads.
    fn per_leader(
        &self,
        rows: impl Fn(Labels, &GaugesView) -> Vec<(Labels, i64)>,
    ) -> Vec<(Labels, i64)> {
        self.cells
            .iter()
            .filter_map(|c| c.gauges.as_ref().map(|g| rows(cell_label(c), g)))
            .flatten()
            .collect()
    }

    fn encode_raft(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let families: [GaugeFamily; 7] = [
            (
                "whip_cell_term",
                "Raft term",
                self.per_cell(|c| Some(c.term)),
            ),
            (
                "whip_cell_leader",
                "the leader's member id as this member knows it (0: none)",
                self.per_cell(|c| Some(c.leader.unwrap_or(0))),
            ),
            (
                "whip_cell_is_leader",
                "1 when this member leads its cell",
                self.per_cell(|c| Some(u64::from(c.is_leader))),
            ),
            (
                "whip_cell_last_log_index",
                "last index of this member's log",
                self.per_cell(|c| Some(c.last_log_index)),
            ),
            (
                "whip_cell_commit_index",
                "highest index a quorum of voters holds (reported by leaders)",
                self.per_cell(|c| c.commit_index),
            ),
            (
                "whip_cell_applied_index",
                "last index applied by this member",
                self.per_cell(|c| Some(c.applied_index)),
            ),
            (
                "whip_cell_apply_lag",
                "entries in this member's log not yet applied",
                self.per_cell(|c| Some(c.apply_lag())),
            ),
        ];
        for (name, help, rows) in families {
            gauges(encoder, name, help, rows)?;
        }
        let lag = self
            .cells
            .iter()
            .flat_map(|c| {
                c.replication_lag
                    .iter()
                    .map(move |(peer, lag)| (with(cell_label(c), "peer", peer), as_i64(*lag)))
            })
            .collect();
        let help = "entries of the leader's log a member lacks (reported by leaders)";
        gauges(encoder, "whip_cell_replication_lag", help, lag)
    }

    fn encode_counters(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let help = "Raft messages refused before the core (non-member sender, absurd term)";
        let mut family =
            encoder.encode_descriptor("whip_cell_raft_refused", help, None, MetricType::Counter)?;
        for c in &self.cells {
            family
                .encode_family(&cell_label(c))?
                .encode_counter::<NoLabelSet, u64, f64>(&c.raft_refused, None)?;
        }
        Ok(())
    }

    fn encode_stages(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let help = "write latency per stage on this member (queue, log_flushed, \
                    follower_acked, committed, applied, replied)";
        let mut family = encoder.encode_descriptor(
            "whip_cell_write_stage_seconds",
            help,
            None,
            MetricType::Histogram,
        )?;
        for c in &self.cells {
            // A stage without samples (every stage of an idle cell) is left out.
            for (stage, h) in c.stages.iter().filter(|(_, h)| h.count > 0) {
                let labels = with(cell_label(c), "stage", stage);
                let buckets = histogram_buckets(h);
                family
                    .encode_family(&labels)?
                    .encode_histogram::<NoLabelSet>(
                        h.sum_us as f64 / 1e6,
                        h.count,
                        &buckets,
                        None,
                    )?;
            }
        }
        Ok(())
    }

    fn encode_boards(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let boards = self.per_leader(|labels, g| {
            let mut rows = Vec::new();
            let all = std::iter::once(("cell", &g.cell_tier))
                .chain(g.boards.iter().map(|b| ("local", b)));
            for (tier, b) in all {
                let board = with(with(labels.clone(), "tier", tier), "team", &b.team);
                for (state, n) in [("ready", b.ready), ("claimed", b.claimed), ("dead", b.dead)] {
                    rows.push((with(board.clone(), "state", state), as_i64(n)));
                }
            }
            rows
        });
        let help = "tasks on a board by state (tier cell: the cell tier; local: a team's)";
        gauges(encoder, "whip_board_tasks", help, boards)?;
        let mail = self.per_leader(|labels, g| {
            g.mailboxes
                .iter()
                .map(|(address, n)| (with(labels.clone(), "mailbox", address), as_i64(*n)))
                .collect()
        });
        gauges(
            encoder,
            "whip_mailbox_depth",
            "messages waiting in a mailbox",
            mail,
        )?;
        let handoffs = self.per_leader(|labels, g| {
            g.handoffs_pending
                .iter()
                .map(|(to, n)| (with(labels.clone(), "to_cell", to), as_i64(*n)))
                .collect()
        });
        let help = "handoff envelopes sent to another cell and not yet acknowledged";
        gauges(encoder, "whip_handoff_pending", help, handoffs)
    }

    fn encode_leader_gauges(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let of = |value: fn(&GaugesView) -> Option<u64>| {
            self.per_leader(move |labels, g| {
                value(g).map(|v| (labels, as_i64(v))).into_iter().collect()
            })
        };
        let families: [GaugeFamily; 7] = [
            (
                "whip_leases_held",
                "leases with a live holder",
                of(|g| Some(g.leases.len() as u64)),
            ),
            (
                "whip_alarms",
                "alarms the cell holds",
                of(|g| Some(g.alarms.len() as u64)),
            ),
            (
                "whip_work_entries",
                "live work registry entries on the cell",
                of(|g| Some(g.work_live)),
            ),
            (
                "whip_work_quota",
                "share of the fabric ceiling the cell holds",
                of(|g| g.work_quota),
            ),
            (
                "whip_work_ceiling",
                "live entries the whole fabric may hold",
                of(|g| Some(g.work_fabric_max)),
            ),
            (
                "whip_work_cell_max",
                "live entries one cell may hold",
                of(|g| Some(g.work_cell_max)),
            ),
            (
                "whip_gauges_truncated",
                "1 when a list of the cell's gauges was cut",
                of(|g| Some(u64::from(g.truncated))),
            ),
        ];
        for (name, help, rows) in families {
            gauges(encoder, name, help, rows)?;
        }
        Ok(())
    }
}

/// Per-bucket counts (the encoder adds them up) with the `+Inf` bucket last.
fn histogram_buckets(h: &StageHistogram) -> Vec<(f64, u64)> {
    let mut out = Vec::with_capacity(h.buckets.len() + 1);
    let mut before = 0;
    for (bound_us, cumulative) in &h.buckets {
        out.push((*bound_us as f64 / 1e6, cumulative - before));
        before = *cumulative;
    }
    out.push((f64::MAX, h.count - before));
    out
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        self.encode_raft(&mut encoder)?;
        self.encode_counters(&mut encoder)?;
        self.encode_stages(&mut encoder)?;
        self.encode_boards(&mut encoder)?;
        self.encode_leader_gauges(&mut encoder)?;
        encode_process(&mut encoder)
    }
}

/// Counts of this process, whatever cells it hosts: connections against the connection
/// budget, token checks and storage opens retried out of descriptors.
fn encode_process(encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    let budget = crate::budget::Budget::process();
    let counters = [
        (
            "whip_connections_refused",
            "connections closed at once: the connection budget or the address's share was used",
            budget.refused(),
        ),
        (
            "whip_token_store_reads",
            "agent token checks that read the store",
            crate::identity::token_store_reads(),
        ),
        (
            "whip_token_checks_throttled",
            "agent token checks refused unread: their address failed too many lately",
            crate::identity::token_checks_throttled(),
        ),
        (
            "whip_storage_open_retries",
            "storage file opens retried because the process was out of descriptors",
            crate::storage::open_retries(),
        ),
    ];
    for (name, help, value) in counters {
        encoder
            .encode_descriptor(name, help, None, MetricType::Counter)?
            .encode_counter::<NoLabelSet, u64, f64>(&value, None)?;
    }
    let open = as_i64(budget.held() as u64);
    let help = "connections open on every listener of this process";
    encoder
        .encode_descriptor("whip_connections_open", help, None, MetricType::Gauge)?
        .encode_gauge(&open)
}

/// Why this server is not ready, one line per reason; empty when it is: it hosts a cell,
/// every hosted cell has a leader, and every member applied its log to within
/// [`limits::READY_APPLY_LAG_MAX`] entries.
pub fn unready(cells: &[CellFigures]) -> Vec<String> {
    if cells.is_empty() {
        return vec!["hosts no cell yet".into()];
    }
    let mut reasons = Vec::new();
    for c in cells {
        if c.leader.is_none() {
            reasons.push(format!("cell {} has no leader", c.cell));
        }
        if c.apply_lag() > limits::READY_APPLY_LAG_MAX {
            reasons.push(format!(
                "cell {} has {} entries to apply (more than {})",
                c.cell,
                c.apply_lag(),
                limits::READY_APPLY_LAG_MAX
            ));
        }
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quorum_index_is_the_majority_s_lowest() {
        assert_eq!(quorum_index(&[(1, 10), (2, 7), (3, 3)]), 7);
        assert_eq!(quorum_index(&[(1, 10)]), 10);
        assert_eq!(quorum_index(&[(1, 5), (2, 9), (3, 9), (4, 1), (5, 2)]), 5);
    }

    #[test]
    fn unknown_paths_share_one_label() {
        let rpc = RpcStats::default();
        assert_eq!(
            rpc.method_label("/whip.v1.Cell/KvGet"),
            "/whip.v1.Cell/KvGet"
        );
        assert_eq!(rpc.method_label("/evil/x"), "other");
        for i in 0..limits::RPC_METHOD_LABELS_MAX {
            rpc.method_label(&format!("/whip.v1.Fake/M{i}"));
        }
        assert_eq!(rpc.method_label("/whip.v1.Cell/KvPut"), "other");
        assert_eq!(
            rpc.method_label("/whip.v1.Cell/KvGet"),
            "/whip.v1.Cell/KvGet"
        );
    }
}
