//! `whip cell serve|init|status|dev|add-learner|voters|snapshot`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Subcommand;
use serde_json::json;
use whip_cell::{Cell, CellClient, CellConfig, StorageKind};
use whip_proto::v1 as pb;

use crate::Global;
use crate::config::ServeCommon;
use crate::connect::cell_addrs;
use crate::output::{self, Table};

#[derive(Subcommand, Debug)]
pub(crate) enum CellCommand {
    /// Run one cell member until interrupted. Settings come from flags, then `WHIP_…`
    /// variables, then the config file, then defaults.
    Serve(Box<ServeCommon>),
    /// Make a new cell of the given voters (sent to the first one, or to --cell).
    Init {
        /// A voter as ID=ADDR; repeat for each.
        #[arg(long = "member", required = true)]
        members: Vec<String>,
    },
    /// Leader, term, members, last applied and per-voter lag.
    Status,
    /// Run a whole cell of N voters on loopback in this process (demos and tests).
    Dev {
        #[arg(long, default_value_t = 3)]
        voters: u64,
        #[arg(long, default_value_t = 7000)]
        base_port: u16,
        #[arg(long, default_value = ".whipplescript/dev")]
        data: PathBuf,
        #[arg(long, default_value = "redb")]
        storage: StorageKind,
        #[command(flatten)]
        http: crate::observe::HttpArgs,
        /// Serve the MCP tools over Streamable HTTP (`POST /mcp`) on this loopback address.
        #[arg(long, value_name = "ADDR")]
        mcp: Option<SocketAddr>,
        /// Whether the leader serves reads under its lease (`on`, the default, or `off`).
        #[arg(long = "lease-reads", env = "WHIP_LEASE_READS", default_value = "on")]
        lease_reads: whip_cell::LeaseReads,
    },
    /// Add a non-voting learner (ID=ADDR) and wait until it caught up.
    AddLearner {
        #[arg(long)]
        member: String,
    },
    /// Set the voter set (promote learners, remove voters), e.g. `--voters 1,2,4`.
    Voters {
        #[arg(long, value_delimiter = ',', required = true)]
        voters: Vec<u64>,
        /// Keep removed voters as learners.
        #[arg(long)]
        retain: bool,
    },
    /// Back up a running cell (`save`) and make a new cell's data directory from the
    /// backup (`restore`).
    #[command(subcommand)]
    Snapshot(crate::snapshot::SnapshotCommand),
}

pub(crate) async fn run(global: &Global, cmd: CellCommand) -> Result<ExitCode> {
    match cmd {
        CellCommand::Serve(args) => {
            let (global, settings) = crate::config::for_serve(global, *args)?;
            let (id, listen, data) = settings.required()?;
            settings.check()?;
            settings.install_screen()?;
            let transport = crate::security::server_transport(&global, &data)?;
            let mut config = CellConfig::new(id, settings.advertised(listen), data);
            config.transport = transport;
            config.storage = settings.storage;
            config.lease_reads = settings.lease_reads;
            config.clock_offset = settings.clock_offset();
            config.disk_faults = settings.disk_faults();
            let http = crate::observe::HttpArgs {
                http: settings.http,
            };
            let mcp = (settings.mcp, settings.advertised(listen));
            serve(&global, config, listen, (http, mcp)).await
        }
        CellCommand::Init { members } => init(global, members).await,
        CellCommand::Status => status(global).await,
        CellCommand::Dev {
            voters,
            base_port,
            data,
            storage,
            http,
            mcp,
            lease_reads,
        } => {
            let dev_cell = DevArgs {
                voters,
                base_port,
                data,
                storage,
                mcp,
                lease_reads,
            };
            dev(global, dev_cell, http).await
        }
        CellCommand::AddLearner { member } => {
            let (id, addr) = parse_member(&member)?;
            let r = remote(global)?.add_learner(pb::Member { id, addr }).await?;
            done(global, r.message)
        }
        CellCommand::Voters { voters, retain } => {
            let r = remote(global)?.change_membership(voters, retain).await?;
            done(global, r.message)
        }
        CellCommand::Snapshot(cmd) => crate::snapshot::run(global, cmd).await,
    }
}

fn remote(global: &Global) -> Result<CellClient> {
    let spec = global
        .cell
        .as_deref()
        .ok_or_else(|| anyhow!("this command needs --cell ADDR"))?;
    Ok(CellClient::connect(&cell_addrs(spec))?)
}

fn done(global: &Global, message: String) -> Result<ExitCode> {
    if global.json {
        output::json(&json!({"ok": true, "message": message}))
    } else {
        output::line(&message)
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_member(text: &str) -> Result<(u64, String)> {
    let (id, addr) = text
        .split_once('=')
        .ok_or_else(|| anyhow!("member {text:?} is not ID=ADDR"))?;
    let id: u64 = id
        .parse()
        .map_err(|_| anyhow!("member id {id:?} is not a number"))?;
    if id == 0 {
        bail!("member ids start at 1");
    }
    Ok((id, addr.to_string()))
}

/// A running member: its cell, its gRPC server task and the switch that stops the server.
struct Member {
    cell: Cell,
    server: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Member {
    /// Stop Raft first (so peers stop sending), then give the server a bounded drain: open
    /// peer connections must not keep a stopping member alive.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.cell.shutdown().await;
        let mut server = self.server;
        if tokio::time::timeout(Duration::from_secs(2), &mut server)
            .await
            .is_err()
        {
            server.abort();
        }
    }
}

async fn start_member(config: CellConfig, listen: SocketAddr) -> Result<Member> {
    config.transport.server_config(&listen)?;
    let listener = whip_cell::service::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let cell = Cell::start(config).await?;
    let served = cell.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(e) = whip_cell::service::serve(served, listener, shutdown).await {
            tracing::error!(error = %e, "server stopped");
        }
    });
    Ok(Member { cell, server, stop })
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM (what service managers send), so a member stops
/// its server and Raft cleanly either way.
async fn stop_signal() {
    crate::signals::stopped().await;
}

/// `whip cell serve`: one member, with its observation listener (`http`) and its MCP
/// listener (`mcp`: the address, and this member's advertised address to reach it by).
async fn serve(
    global: &Global,
    config: CellConfig,
    listen: SocketAddr,
    (http, mcp): (crate::observe::HttpArgs, (Option<SocketAddr>, String)),
) -> Result<ExitCode> {
    let id = config.id;
    let observation = http.bind().await?;
    let mcp_listener = crate::mcp::http::bind(mcp.0).await?;
    let rpc = config.rpc_stats.clone();
    let member = start_member(config, listen).await?;
    let observing = observation.serve(std::sync::Arc::new(whip_cell::http::Standalone {
        members: vec![member.cell.clone()],
        rpc,
    }));
    let mcp_serving = mcp_listener.serve(vec![mcp.1], global);
    eprintln!("cell member {id} serving on {listen}");
    stop_signal().await;
    eprintln!("cell member {id} stopping");
    if let Some(serving) = mcp_serving {
        serving.stop().await;
    }
    if let Some(observing) = observing {
        observing.stop().await;
    }
    member.stop().await;
    Ok(ExitCode::SUCCESS)
}

async fn init(global: &Global, members: Vec<String>) -> Result<ExitCode> {
    let parsed: Vec<(u64, String)> = members
        .iter()
        .map(|m| parse_member(m))
        .collect::<Result<_>>()?;
    let first = match &global.cell {
        Some(spec) => cell_addrs(spec),
        None => vec![parsed[0].1.clone()],
    };
    let members = parsed
        .into_iter()
        .map(|(id, addr)| pb::Member { id, addr })
        .collect();
    let r = CellClient::connect(&first)?.init(members).await?;
    done(global, r.message)
}

/// `own`: the addressed member's own stages and hops (a follower's when it is one).
fn print_status_json(s: &pb::StatusResponse, stages_of: u64, own: &pb::StatusResponse) {
    let members: Vec<_> = s
        .members
        .iter()
        .map(|m| {
            json!({
                "id": m.id, "addr": m.addr, "voter": m.voter, "matched_index": m.matched_index,
                "lag": m.lag,
            })
        })
        .collect();
    output::json(&json!({
        "id": s.id, "leader": s.leader, "term": s.term, "members": members, "state": s.state,
        "last_log_index": s.last_log_index, "last_applied": s.last_applied,
        "hibernating": s.hibernating, "storage": s.storage, "stages": stages_json(&s.stages),
        "hops": hops_json(&s.hops), "stages_member": stages_of,
        "member_stages": stages_json(&own.stages), "member_hops": hops_json(&own.hops),
    }));
}

async fn status(global: &Global) -> Result<ExitCode> {
    let session = crate::connect::session(global).await?;
    let result = session.client.status(pb::StatusRequest::default()).await;
    session.close().await;
    let mut s = result?;
    let own = s.clone();
    let mut stages_of = s.id;
    // Only the leader knows how far each voter got: take the member list from it.
    if s.leader.is_some_and(|l| l != s.id)
        && let Some(addr) = s
            .members
            .iter()
            .find(|m| Some(m.id) == s.leader)
            .map(|m| m.addr.clone())
        && let Ok(leader) = CellClient::connect(&[addr])?.member_status(0).await
    {
        s.members = leader.members;
        // Writes are proposed on the leader: its stages are the ones that tell.
        stages_of = leader.id;
        s.stages = leader.stages;
        s.hops = leader.hops;
    }
    if global.json {
        print_status_json(&s, stages_of, &own);
        return Ok(ExitCode::SUCCESS);
    }
    let leader = s.leader.map_or("none".to_string(), |l| l.to_string());
    output::line(&format!(
        "member {} ({}), leader {leader}, term {}",
        s.id, s.state, s.term
    ));
    output::line(&format!(
        "last log {}, last applied {}, storage {}{}",
        s.last_log_index,
        s.last_applied,
        s.storage,
        if s.hibernating { ", hibernating" } else { "" }
    ));
    let mut members = Table::new(&["member", "addr", "role", "lag"]);
    for m in &s.members {
        let role = if m.voter { "voter" } else { "learner" };
        let lag = m.lag.map_or("?".to_string(), |l| l.to_string());
        members.row(vec![m.id.to_string(), m.addr.clone(), role.into(), lag]);
    }
    members.print_or("no members");
    let mut stages = Table::new(&["stage", "count", "p50_us", "p99_us", "member"]);
    for st in s.stages.iter().filter(|st| st.count > 0) {
        stages.row(vec![
            st.stage.clone(),
            st.count.to_string(),
            st.p50_us.to_string(),
            st.p99_us.to_string(),
            stages_of.to_string(),
        ]);
    }
    if !s.stages.iter().all(|st| st.count == 0) {
        output::line("");
        stages.print_or("");
    }
    Ok(ExitCode::SUCCESS)
}

/// Per-stage latencies as `{"queue": {"count": …, "p50_us": …}, …}`, keyed by stage name.
fn stages_json(stages: &[pb::StageLatency]) -> serde_json::Value {
    let map = stages
        .iter()
        .map(|s| {
            let v = json!({
                "count": s.count, "p50_us": s.p50_us, "p90_us": s.p90_us, "p99_us": s.p99_us,
                "max_us": s.max_us,
            });
            (s.stage.clone(), v)
        })
        .collect::<serde_json::Map<_, _>>();
    serde_json::Value::Object(map)
}

/// Per stage: samples, thread switches and switches per write (null before any sample).
fn hops_json(hops: &[pb::StageHops]) -> serde_json::Value {
    let map = hops
        .iter()
        .map(|h| {
            let per_write = (h.samples > 0).then(|| h.thread_switches as f64 / h.samples as f64);
            let v = json!({
                "samples": h.samples, "thread_switches": h.thread_switches,
                "per_write": per_write,
            });
            (h.stage.clone(), v)
        })
        .collect::<serde_json::Map<_, _>>();
    serde_json::Value::Object(map)
}

/// What `whip cell dev` runs.
struct DevArgs {
    voters: u64,
    base_port: u16,
    data: PathBuf,
    storage: StorageKind,
    mcp: Option<SocketAddr>,
    lease_reads: whip_cell::LeaseReads,
}

async fn dev(global: &Global, args: DevArgs, http: crate::observe::HttpArgs) -> Result<ExitCode> {
    let DevArgs {
        voters,
        base_port,
        data,
        storage,
        mcp,
        lease_reads,
    } = args;
    if voters == 0 {
        bail!("--voters must be at least 1");
    }
    let observation = http.bind().await?;
    let mcp_listener = crate::mcp::http::bind(mcp).await?;
    // The voters' servers count their calls together: one process, one set of figures.
    let rpc = whip_cell::metrics::RpcStats::default();
    let addrs: BTreeMap<u64, String> = (1..=voters)
        .map(|i| (i, format!("127.0.0.1:{}", u64::from(base_port) + i - 1)))
        .collect();
    let mut members = Vec::new();
    for (id, addr) in &addrs {
        let dir = data.join(format!("voter-{id}"));
        let mut config = CellConfig::new(*id, addr.clone(), dir.clone());
        config.transport = crate::security::server_transport(global, &dir)?;
        config.storage = storage;
        config.lease_reads = lease_reads;
        config.rpc_stats = rpc.clone();
        members.push(start_member(config, addr.parse()?).await?);
    }
    let first = &members[0].cell;
    if !first.raft().is_initialized().await? {
        first.initialize(addrs.clone()).await?;
    }
    // Ready means every voter knows the leader, so any address printed serves at once.
    let mut leader = None;
    for member in &members {
        let seen = member
            .cell
            .raft()
            .wait(Some(Duration::from_secs(10)))
            .metrics(|m| m.current_leader.is_some(), "leader")
            .await
            .map_err(|_| anyhow!("no leader elected within 10s"))?;
        leader = seen.current_leader;
    }
    let list: Vec<&String> = addrs.values().collect();
    if global.json {
        output::json(&json!({"addresses": list, "leader": leader}));
    } else {
        output::line(&format!(
            "cell of {voters} voters ready: {}",
            addrs.values().cloned().collect::<Vec<_>>().join(",")
        ));
    }
    let observing = observation.serve(std::sync::Arc::new(whip_cell::http::Standalone {
        members: members.iter().map(|m| m.cell.clone()).collect(),
        rpc,
    }));
    let mcp_serving = mcp_listener.serve(addrs.values().cloned().collect(), global);
    stop_signal().await;
    if let Some(serving) = mcp_serving {
        serving.stop().await;
    }
    if let Some(observing) = observing {
        observing.stop().await;
    }
    // All voters at once: a voter that outlived the others would campaign against them.
    futures::future::join_all(members.into_iter().map(Member::stop)).await;
    Ok(ExitCode::SUCCESS)
}
