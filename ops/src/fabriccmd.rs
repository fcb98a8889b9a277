//! `whip node serve` and `whip fabric init|status|move|split|backup|restore`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Subcommand;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use whip_fabric::limits as fabric_limits;
use whip_fabric::{Node, NodeConfig};
use whip_proto::v1 as pb;
use whip_proto::v1::node_client::NodeClient;

use crate::Global;
use crate::config::{Serve, ServeCommon};
use crate::connect::cell_addrs;
use crate::output::{self, Table};
use crate::progress::{awaiting, awaiting_with};

#[derive(Subcommand, Debug)]
pub(crate) enum NodeCommand {
    /// Run a node hosting any number of cells on one port, until interrupted. Settings come
    /// from flags, then `WHIP_…` variables, then the config file, then defaults.
    Serve(NodeServe),
}

/// The settings of `whip node serve`. Each field is one setting: its flag, its environment
/// variable and (the flag's name) its key in the config file (see `config.rs`).
#[derive(clap::Args, Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub(crate) struct NodeServe {
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) common: ServeCommon,
    /// Raft heartbeat of hosted cells, in ms (idle cells cost one message per follower per
    /// heartbeat).
    #[arg(long, env = "WHIP_HEARTBEAT_MS", default_value_t = fabric_limits::NODE_HEARTBEAT_MS)]
    pub(crate) heartbeat_ms: u64,
    /// Lower bound of the election timeout of hosted cells, in ms.
    #[arg(long, env = "WHIP_ELECTION_TIMEOUT_MS",
        default_value_t = fabric_limits::NODE_ELECTION_TIMEOUT_MIN_MS)]
    pub(crate) election_timeout_ms: u64,
    /// Where hosted cells keep their Raft logs: `node` (the default: one group-committed
    /// log for every cell of the node, in DATA/node-log) or `cell` (each cell its own, for
    /// A/B runs). A cell made with its own log keeps it; a cell made on the node log
    /// refuses to start with `--log cell`.
    #[arg(long = "log", env = "WHIP_NODE_LOG", default_value = "node")]
    #[serde(with = "crate::config::by_name")]
    pub(crate) log: whip_cell::storage::LogLayout,
    /// Whether idle hosted cells hibernate: `on` (the default: a cell with nothing to do
    /// for 2 s stops its heartbeats and election timer until work or a peer's death wakes
    /// it) or `off` (every cell heartbeats, for A/B runs).
    #[arg(long = "hibernate", env = "WHIP_HIBERNATE", default_value = "on")]
    #[serde(with = "crate::config::by_name")]
    pub(crate) hibernate: whip_fabric::hibernate::Hibernate,
}

impl NodeServe {
    /// Every timing within its range, before anything starts (a flag, a variable or the
    /// config file may have set it).
    pub(crate) fn check(&self) -> Result<()> {
        use crate::limits::{ELECTION_TIMEOUT_MS_MAX, HEARTBEAT_MS_MAX, HEARTBEAT_MS_MIN};
        let heartbeat = self.heartbeat_ms;
        if !(HEARTBEAT_MS_MIN..=HEARTBEAT_MS_MAX).contains(&heartbeat) {
            bail!(
                "heartbeat-ms is {heartbeat}, it must be {HEARTBEAT_MS_MIN} to {HEARTBEAT_MS_MAX}"
            );
        }
        let election = self.election_timeout_ms;
        if election <= heartbeat || election > ELECTION_TIMEOUT_MS_MAX {
            bail!(
                "election-timeout-ms is {election}, it must be above heartbeat-ms ({heartbeat}) \
                 and at most {ELECTION_TIMEOUT_MS_MAX}"
            );
        }
        self.common.check()
    }
}

impl Serve for NodeServe {
    fn common(&self) -> &ServeCommon {
        &self.common
    }

    fn common_mut(&mut self) -> &mut ServeCommon {
        &mut self.common
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum FabricCommand {
    /// Bootstrap a fabric: host and start every cell, cut the ring, publish the map.
    Init {
        /// A node as ID=ADDR; repeat for each.
        #[arg(long = "node", required = true)]
        nodes: Vec<String>,
        /// Data cells (the meta cell comes on top).
        #[arg(long, default_value_t = 4)]
        cells: u32,
        /// Voters per cell (default: 3, or fewer nodes).
        #[arg(long, default_value_t = 0)]
        replicas: u32,
    },
    /// Nodes, cells with leaders and voters, ranges, alarms.
    Status,
    /// Move the range starting at --start to another cell.
    Move {
        /// First point of the range (hex like 0x4000000000000000, or decimal).
        #[arg(long)]
        start: String,
        /// The cell that takes it.
        #[arg(long)]
        to: u64,
    },
    /// Cut the range starting at --start in two at --at.
    Split {
        /// First point of the range.
        #[arg(long)]
        start: String,
        /// First point of the upper half.
        #[arg(long)]
        at: String,
    },
    /// Handoff channels between cells: `whip fabric channel reset FROM TO`.
    #[command(subcommand)]
    Channel(ChannelCommand),
    /// Roll every node onto new certificates while the fabric serves: to a new CA (trust
    /// both, new node certificates, drop the old CA), or `--keep-ca`. Run where the CA is.
    RotateCerts(crate::rotate::RotateArgs),
    /// Save every cell's snapshot (the meta cell and every data cell, each from its leader,
    /// writes going on) and a manifest of the range map and each file's blake3 into DIR.
    Backup {
        /// The directory to make (must not exist, or be empty).
        dir: std::path::PathBuf,
    },
    /// Bring a new fabric up from a backup on new, empty nodes (`whip node serve`), with
    /// the backup's node ids at the addresses given.
    Restore {
        /// The backup directory.
        dir: std::path::PathBuf,
        /// A node of the new fabric as ID=ADDR; repeat for each of the backup's node ids.
        #[arg(long = "node", required = true)]
        nodes: Vec<String>,
    },
}

/// `whip fabric channel …`.
#[derive(Subcommand, Debug)]
pub(crate) enum ChannelCommand {
    /// Repair a channel a forged envelope poisoned (a fork alarm that does not clear): the
    /// receiving cell takes the sender's view of the channel. Recorded as an alarm.
    Reset {
        /// The sending cell.
        from: u64,
        /// The receiving cell.
        to: u64,
    },
}

pub(crate) async fn node(global: &Global, cmd: NodeCommand) -> Result<ExitCode> {
    let NodeCommand::Serve(args) = cmd;
    let (global, settings) = crate::config::for_serve(global, args)?;
    let common = &settings.common;
    let (id, listen, data) = common.required()?;
    settings.check()?;
    common.install_screen()?;
    let transport = crate::security::server_transport(&global, &data)?;
    let http = crate::observe::HttpArgs { http: common.http };
    transport.server_config(&listen)?;
    let mut config = NodeConfig::new(id, common.advertised(listen), data);
    config.transport = transport;
    config.storage = common.storage;
    config.log = settings.log;
    config.hibernate = settings.hibernate;
    config.lease_reads = common.lease_reads;
    config.clock_offset = common.clock_offset();
    config.disk_faults = common.disk_faults();
    config.heartbeat_ms = settings.heartbeat_ms;
    config.election_timeout_min_ms = settings.election_timeout_ms;
    let listener = whip_cell::service::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let observation = http.bind().await?;
    let mcp_listener = crate::mcp::http::bind(common.mcp).await?;
    let advertised = common.advertised(listen);
    let node = Node::start(config).await?;
    let observing = observation.serve(std::sync::Arc::new(node.clone()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = node.clone();
    let mut server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(e) = served.serve(listener, shutdown).await {
            tracing::error!(error = %e, "server stopped");
        }
    });
    let mcp_serving = mcp_listener.serve(vec![advertised], &global);
    eprintln!(
        "node {id} serving on {listen} ({} cells)",
        node.hosted_ids().len()
    );
    crate::signals::stopped().await;
    eprintln!("node {id} stopping");
    if let Some(serving) = mcp_serving {
        serving.stop().await;
    }
    if let Some(observing) = observing {
        observing.stop().await;
    }
    let _ = stop.send(());
    node.shutdown().await;
    if tokio::time::timeout(Duration::from_secs(2), &mut server)
        .await
        .is_err()
    {
        server.abort();
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn node_client(global: &Global) -> Result<NodeClient<tonic::transport::Channel>> {
    let spec = global
        .cell
        .as_deref()
        .ok_or_else(|| anyhow!("this command needs --cell ADDR (any node of the fabric)"))?;
    let addr = cell_addrs(spec)
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("--cell names no address"))?;
    Ok(NodeClient::new(
        whip_cell::network::endpoint(&addr).connect_lazy(),
    ))
}

/// A ring point: `0x…` hex or decimal.
fn point(text: &str) -> Result<u64> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| anyhow!("{text:?} is not a ring point (0x… hex or decimal)"))
}

fn parse_node(text: &str) -> Result<pb::Member> {
    let (id, addr) = text
        .split_once('=')
        .ok_or_else(|| anyhow!("node {text:?} is not ID=ADDR"))?;
    let id: u64 = id
        .parse()
        .map_err(|_| anyhow!("node id {id:?} is not a number"))?;
    if id == 0 {
        bail!("node ids start at 1");
    }
    Ok(pb::Member {
        id,
        addr: addr.to_string(),
    })
}

/// Wait until every node of `nodes` accepts connections: `whip fabric init` usually
/// follows the `whip node serve` commands that started them at once. A node still silent
/// after [`limits::INIT_NODES_WAIT_MS`] is named.
async fn nodes_listening(nodes: &[pb::Member]) -> Result<()> {
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(crate::limits::INIT_NODES_WAIT_MS);
    for node in nodes {
        loop {
            let connected = tokio::time::timeout_at(
                deadline,
                tokio::net::TcpStream::connect(node.addr.as_str()),
            )
            .await;
            match connected {
                Ok(Ok(_)) => break,
                Ok(Err(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(node = node.id, error = %e, "waiting for the node");
                    let poll = Duration::from_millis(crate::limits::INIT_NODES_POLL_MS);
                    tokio::time::sleep(poll).await;
                }
                Ok(Err(e)) => bail!("node {} at {} does not listen: {e}", node.id, node.addr),
                Err(_) => bail!("node {} at {} does not listen", node.id, node.addr),
            }
        }
    }
    Ok(())
}

/// A node's refusal as a plain error: its message is already written for people.
fn refused(status: tonic::Status) -> anyhow::Error {
    anyhow!("{}", status.message())
}

pub(crate) async fn fabric(global: &Global, cmd: FabricCommand) -> Result<ExitCode> {
    match cmd {
        FabricCommand::RotateCerts(args) => crate::rotate::rotate(global, args).await,
        FabricCommand::Backup { dir } => crate::backup::backup(global, &dir).await,
        FabricCommand::Restore { dir, nodes } => {
            let nodes = nodes.iter().map(|n| parse_node(n)).collect::<Result<_>>()?;
            crate::backup::restore(global, &dir, nodes).await
        }
        cmd => through_node(global, cmd).await,
    }
}

/// The commands one node of the fabric (`--cell`) answers.
async fn through_node(global: &Global, cmd: FabricCommand) -> Result<ExitCode> {
    let mut client = node_client(global)?;
    match cmd {
        FabricCommand::Init {
            nodes,
            cells,
            replicas,
        } => {
            let nodes: Vec<pb::Member> =
                nodes.iter().map(|n| parse_node(n)).collect::<Result<_>>()?;
            nodes_listening(&nodes).await?;
            let request = pb::FabricInitRequest {
                nodes,
                cells,
                replicas,
            };
            let label = format!("fabric init: {cells} cells");
            let status = awaiting(&label, client.fabric_init(request))
                .await
                .map_err(refused)?
                .into_inner();
            print_status(global, &status, "fabric initialized");
        }
        FabricCommand::Status => {
            let status = client
                .fabric_status(pb::FabricStatusRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            print_status(global, &status, "fabric");
        }
        FabricCommand::Move { start, to } => {
            let request = pb::RangeMoveRequest {
                start: point(&start)?,
                to_cell: to,
            };
            let label = format!("fabric move {start} to cell {to}");
            let watcher = client.clone();
            let r = awaiting_with(&label, client.range_move(request), || {
                range_progress(watcher.clone())
            })
            .await
            .map_err(refused)?
            .into_inner();
            print_ranges(global, &r, &format!("moved {} rows", r.rows));
        }
        FabricCommand::Split { start, at } => {
            let request = pb::RangeSplitRequest {
                start: point(&start)?,
                at: point(&at)?,
            };
            let label = format!("fabric split {start} at {at}");
            let watcher = client.clone();
            let r = awaiting_with(&label, client.range_split(request), || {
                range_progress(watcher.clone())
            })
            .await
            .map_err(refused)?
            .into_inner();
            print_ranges(global, &r, "split");
        }
        FabricCommand::Channel(ChannelCommand::Reset { from, to }) => {
            channel_reset(global, &mut client, from, to).await?;
        }
        FabricCommand::RotateCerts(_)
        | FabricCommand::Backup { .. }
        | FabricCommand::Restore { .. } => unreachable!("handled above"),
    }
    Ok(ExitCode::SUCCESS)
}

/// How far the node's range change is, in words: `copying, 4096 rows (2 pages)`.
async fn range_progress(mut client: NodeClient<tonic::transport::Channel>) -> Option<String> {
    let answer = client
        .range_progress(pb::RangeProgressRequest {})
        .await
        .ok()?;
    let change = answer.into_inner().changes.into_iter().next()?;
    use whip_fabric::range_change::RangePhase;
    Some(match RangePhase::from_code(&change.phase) {
        Some(RangePhase::Precopying) => format!(
            "copying while the range still serves, {} rows ({} pages)",
            change.rows, change.pages
        ),
        Some(RangePhase::Copying) => {
            format!("copying, {} rows ({} pages)", change.rows, change.pages)
        }
        Some(RangePhase::Dropping) => {
            format!("dropping the old copy ({} rows moved)", change.rows)
        }
        _ => change.phase,
    })
}

/// `whip fabric channel reset FROM TO`.
async fn channel_reset(
    global: &Global,
    client: &mut NodeClient<tonic::transport::Channel>,
    from: u64,
    to: u64,
) -> Result<()> {
    let request = pb::ChannelResetRequest {
        from_cell: from,
        to_cell: to,
    };
    let r = client
        .channel_reset(request)
        .await
        .map_err(refused)?
        .into_inner();
    if global.json {
        output::json(&json!({"before_seq": r.before_seq, "seq": r.seq}));
    } else {
        output::line(&r.message);
    }
    Ok(())
}

fn range_json(r: &pb::RangeInfo) -> Value {
    json!({
        "start": format!("{:#018x}", r.start),
        "last": format!("{:#018x}", r.last),
        "epoch": r.epoch,
        "cell": r.cell,
    })
}

fn range_text(r: &pb::RangeInfo) -> String {
    format!("{:#018x}..={:#018x}", r.start, r.last)
}

fn print_ranges(global: &Global, r: &pb::RangeMoveResponse, what: &str) {
    if global.json {
        let ranges: Vec<Value> = r.ranges.iter().map(range_json).collect();
        output::json(&json!({"ok": true, "ranges": ranges, "rows": r.rows}));
        return;
    }
    output::line(what);
    range_table(r.ranges.iter()).print_or("no ranges");
}

/// Ranges as a table: where each starts and ends, its cell and epoch.
fn range_table<'a>(ranges: impl Iterator<Item = &'a pb::RangeInfo>) -> Table {
    let mut table = Table::new(&["range", "cell", "epoch"]);
    for r in ranges {
        table.row(vec![range_text(r), r.cell.to_string(), r.epoch.to_string()]);
    }
    table
}

pub(crate) fn print_status(global: &Global, s: &pb::FabricStatusResponse, title: &str) {
    if global.json {
        let nodes: Vec<Value> = s
            .nodes
            .iter()
            .map(|n| json!({"id": n.id, "addr": n.addr, "reachable": n.reachable}))
            .collect();
        let cells: Vec<Value> = s
            .cells
            .iter()
            .map(|c| {
                json!({
                    "id": c.id, "leader": c.leader, "voters": c.voters,
                    "ranges": c.ranges.iter().map(range_json).collect::<Vec<_>>(),
                    "term": c.term, "last_applied": c.last_applied, "public_key": c.public_key,
                    "hibernating": c.hibernating,
                })
            })
            .collect();
        output::json(&json!({
            "nodes": nodes, "cells": cells, "alarms": s.alarms, "map_version": s.map_version,
        }));
        return;
    }
    output::line(&format!(
        "{title}: {} nodes, {} cells, map version {}",
        s.nodes.len(),
        s.cells.len(),
        s.map_version
    ));
    let mut nodes = Table::new(&["node", "addr", "state"]);
    for n in &s.nodes {
        let state = if n.reachable { "up" } else { "UNREACHABLE" };
        nodes.row(vec![n.id.to_string(), n.addr.clone(), state.into()]);
    }
    let mut cells = Table::new(&["cell", "role", "leader", "voters", "term", "applied"]);
    for c in &s.cells {
        let voters: Vec<String> = c.voters.iter().map(u64::to_string).collect();
        cells.row(vec![
            c.id.to_string(),
            if c.id == 0 { "meta" } else { "data" }.into(),
            c.leader.map_or("none".to_string(), |l| format!("node {l}")),
            voters.join(","),
            c.term.to_string(),
            c.last_applied.to_string(),
        ]);
    }
    let ranges = range_table(s.cells.iter().flat_map(|c| &c.ranges));
    for (i, table) in [nodes, cells, ranges].iter().enumerate() {
        if i > 0 {
            output::line("");
        }
        table.print_or("none");
    }
    for a in &s.alarms {
        output::line(&format!("ALARM {a}"));
    }
}
