//! Fabrics for tests: nodes hosting many cells, in this process ([`Fabric`]) or as
//! `whip node serve` processes killed with SIGKILL ([`ProcessFabric`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Child;
use std::time::Duration;

use whip_cell::CellClient;
use whip_fabric::{Node, NodeConfig};
use whip_proto::v1 as pb;

use crate::process::{kill_child, server_command};
use crate::{free_addrs, init_tracing, wait_for};

struct Running {
    node: Node,
    server: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
}

/// Nodes in this process, each with its own gRPC server and data directory.
pub struct Fabric {
    /// The data root (each node under `node-<id>`).
    pub dir: tempfile::TempDir,
    /// Node id → address.
    pub addrs: BTreeMap<u64, SocketAddr>,
    nodes: BTreeMap<u64, Running>,
    /// Applied to every node's config before it starts.
    adjust: fn(&mut NodeConfig),
}

impl Fabric {
    /// Start `nodes` nodes and initialize a fabric of `cells` data cells through node 1.
    pub async fn start(nodes: usize, cells: u32) -> Fabric {
        Fabric::start_with(nodes, cells, |_| {}).await
    }

    /// Like [`Fabric::start`], adjusting every node's config first.
    pub async fn start_with(nodes: usize, cells: u32, adjust: fn(&mut NodeConfig)) -> Fabric {
        let mut fabric = Fabric::start_uninitialized(0).await;
        fabric.adjust = adjust;
        fabric.addrs = free_addrs(nodes)
            .into_iter()
            .enumerate()
            .map(|(i, a)| (i as u64 + 1, a))
            .collect();
        for id in 1..=nodes as u64 {
            fabric.start_node(id).await;
        }
        let members = fabric
            .addrs
            .iter()
            .map(|(id, a)| (*id, a.to_string()))
            .collect();
        whip_fabric::admin::init(fabric.node(1), members, cells, 0)
            .await
            .expect("fabric init");
        fabric.wait_leaders(Duration::from_secs(10)).await;
        fabric
    }

    /// Start `nodes` nodes hosting nothing yet.
    pub async fn start_uninitialized(nodes: usize) -> Fabric {
        init_tracing();
        let addrs = free_addrs(nodes)
            .into_iter()
            .enumerate()
            .map(|(i, a)| (i as u64 + 1, a))
            .collect();
        let mut fabric = Fabric {
            dir: tempfile::tempdir().expect("temp dir"),
            addrs,
            nodes: BTreeMap::new(),
            adjust: |_| {},
        };
        for id in 1..=nodes as u64 {
            fabric.start_node(id).await;
        }
        fabric
    }

    /// Start (or restart) node `id` from its data directory.
    pub async fn start_node(&mut self, id: u64) {
        let addr = self.addrs[&id];
        let dir = self.dir.path().join(format!("node-{id}"));
        let mut config = NodeConfig::new(id, addr.to_string(), dir);
        config.transport = crate::node_transport();
        (self.adjust)(&mut config);
        let node = Node::start(config).await.expect("start node");
        let listener = whip_cell::service::bind(addr)
            .await
            .expect("bind node address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = node.clone();
        let server = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            let _ = served.serve(listener, shutdown).await;
        });
        self.nodes.insert(id, Running { node, server, stop });
    }

    /// Stop node `id` abruptly: its server stops answering and every hosted cell stops.
    pub async fn kill(&mut self, id: u64) {
        let running = self.nodes.remove(&id).expect("node is running");
        let _ = running.stop.send(());
        running.server.abort();
        let _ = running.server.await;
        running.node.shutdown().await;
    }

    /// The running node `id`.
    pub fn node(&self, id: u64) -> &Node {
        &self.nodes[&id].node
    }

    /// Ids of running nodes.
    pub fn running(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// A client bound to node `id` only.
    pub fn client_of(&self, id: u64) -> CellClient {
        CellClient::connect(&[self.addrs[&id].to_string()]).expect("client")
    }

    /// Kill the node leading `cell` (as node 1 sees it), keep it down for `down`, start it
    /// again and wait until every cell has a leader; returns the node.
    pub async fn bounce_leader(&mut self, cell: u64, down: Duration) -> u64 {
        let leader = self
            .node(1)
            .hosted(cell)
            .and_then(|m| m.raft().metrics().borrow().current_leader)
            .expect("a leader");
        self.kill(leader).await;
        tokio::time::sleep(down).await;
        self.start_node(leader).await;
        self.wait_leaders(Duration::from_secs(20)).await;
        leader
    }

    /// A client of every node (it moves on when the one it uses stops answering).
    pub fn client_of_all(&self) -> CellClient {
        let addrs: Vec<String> = self.addrs.values().map(ToString::to_string).collect();
        CellClient::connect(&addrs).expect("client")
    }

    /// Wait until every cell hosted by a running node knows a running leader.
    pub async fn wait_leaders(&self, timeout: Duration) {
        let nodes: Vec<Node> = self.nodes.values().map(|r| r.node.clone()).collect();
        let running = self.running();
        wait_for("every cell to have a leader", timeout, || {
            let nodes = nodes.clone();
            let running = running.clone();
            async move {
                nodes.iter().all(|n| {
                    n.hosted_ids().into_iter().all(|c| {
                        let cell = n.hosted(c).expect("hosted");
                        let leader = cell.raft().metrics().borrow().current_leader;
                        leader.is_some_and(|l| running.contains(&l))
                    })
                })
            }
        })
        .await;
    }

    /// The fabric status as node `via` reports it.
    pub async fn status(&self, via: u64) -> pb::FabricStatusResponse {
        whip_fabric::admin::status(self.node(via))
            .await
            .expect("fabric status")
    }

    /// Stop every node.
    pub async fn shutdown(mut self) {
        for id in self.running() {
            self.kill(id).await;
        }
    }
}

/// Nodes as `whip node serve` processes.
pub struct ProcessFabric {
    /// Data root.
    pub dir: tempfile::TempDir,
    /// Node addresses, index = id - 1.
    pub addrs: Vec<String>,
    /// Observation listener addresses (`--http`), index = id - 1; empty when off.
    pub http_addrs: Vec<String>,
    /// MCP listener addresses (`--mcp`), index = id - 1; empty when off.
    pub mcp_addrs: Vec<String>,
    /// The whip config (`WHIP_CONFIG_DIR`: CA, operator credential) the nodes run with;
    /// `None`: this user's.
    pub config_dir: Option<std::path::PathBuf>,
    /// Environment set on one node's process (index = id - 1), for test hooks.
    node_env: Vec<Vec<(String, String)>>,
    children: Vec<Option<Child>>,
}

impl ProcessFabric {
    /// Start `n` node processes (not yet a fabric: run `whip fabric init`).
    pub async fn start(n: usize) -> ProcessFabric {
        ProcessFabric::start_observed(n, false).await
    }

    /// Like [`ProcessFabric::start`], each node serving `--http` on its own port when
    /// `http` is set ([`ProcessFabric::http_addrs`]).
    pub async fn start_observed(n: usize, http: bool) -> ProcessFabric {
        ProcessFabric::start_configured(n, http, None, false, vec![Vec::new(); n]).await
    }

    /// Like [`ProcessFabric::start`], each node serving MCP over Streamable HTTP (`--mcp`)
    /// on its own loopback port ([`ProcessFabric::mcp_addrs`]).
    pub async fn start_with_mcp(n: usize) -> ProcessFabric {
        ProcessFabric::start_configured(n, false, None, true, vec![Vec::new(); n]).await
    }

    /// Like [`ProcessFabric::start`], the nodes running with the whip config `config_dir`
    /// (their own cluster CA) instead of this user's.
    pub async fn start_in(n: usize, config_dir: &std::path::Path) -> ProcessFabric {
        let no_env = vec![Vec::new(); n];
        ProcessFabric::start_configured(n, false, Some(config_dir.to_path_buf()), false, no_env)
            .await
    }

    /// Like [`ProcessFabric::start`], every node running with `env` set.
    pub async fn start_with_env(n: usize, env: &[(&str, &str)]) -> ProcessFabric {
        let env: Vec<(String, String)> = (env.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ProcessFabric::start_configured(n, false, None, false, vec![env; n]).await
    }

    /// Like [`ProcessFabric::start`], node `id` running with `env` set (a test hook of the
    /// `test-hooks` feature, which the test build turns on).
    pub async fn start_with_node_env(n: usize, id: u64, env: &[(&str, &str)]) -> ProcessFabric {
        let env: Vec<(String, String)> = (env.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut node_env = vec![Vec::new(); n];
        node_env[(id - 1) as usize] = env;
        ProcessFabric::start_configured(n, false, None, false, node_env).await
    }

    async fn start_configured(
        n: usize,
        http: bool,
        config_dir: Option<std::path::PathBuf>,
        mcp: bool,
        node_env: Vec<Vec<(String, String)>>,
    ) -> ProcessFabric {
        crate::init_tracing();
        let listeners = 1 + usize::from(http) + usize::from(mcp);
        let addrs: Vec<String> = (free_addrs(listeners * n).iter())
            .map(|a| a.to_string())
            .collect();
        let mut chunks = addrs.chunks(n).map(<[String]>::to_vec);
        let mut fabric = ProcessFabric {
            dir: tempfile::tempdir().expect("temp dir"),
            addrs: chunks.next().expect("node addresses"),
            http_addrs: match http {
                true => chunks.next().expect("--http addresses"),
                false => Vec::new(),
            },
            mcp_addrs: match mcp {
                true => chunks.next().expect("--mcp addresses"),
                false => Vec::new(),
            },
            config_dir,
            node_env,
            children: (0..n).map(|_| None).collect(),
        };
        for id in 1..=n as u64 {
            fabric.spawn(id);
        }
        for addr in fabric.addrs.clone() {
            let addr = addr.clone();
            wait_for("node to listen", Duration::from_secs(10), || {
                let addr = addr.clone();
                async move { tokio::net::TcpStream::connect(&addr).await.is_ok() }
            })
            .await;
        }
        fabric
    }

    /// Start (or restart) node `id`'s process.
    pub fn spawn(&mut self, id: u64) {
        let index = (id - 1) as usize;
        let data = self.dir.path().join(format!("node-{id}"));
        let mut extra = Vec::new();
        if let Some(http) = self.http_addrs.get(index) {
            extra.extend(["--http".to_string(), http.clone()]);
        }
        if let Some(mcp) = self.mcp_addrs.get(index) {
            extra.extend(["--mcp".to_string(), mcp.clone()]);
        }
        let mut command = server_command("node", id, &self.addrs[index], &data, &extra);
        if let Some(config) = &self.config_dir {
            command.env("WHIP_CONFIG_DIR", config);
        }
        command.envs(self.node_env[index].iter().cloned());
        let child = command.spawn().expect("spawn whip node serve");
        self.children[index] = Some(child);
    }

    /// Set the environment node `id` runs with from its next [`ProcessFabric::spawn`].
    pub fn set_node_env(&mut self, id: u64, env: &[(&str, &str)]) {
        self.node_env[(id - 1) as usize] = (env.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Wait up to `timeout` for node `id`'s process to exit by itself: its exit status, or
    /// `None` while it still runs (or was never started).
    pub async fn exited(&mut self, id: u64, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        let slot = &mut self.children[(id - 1) as usize];
        loop {
            let status = slot.as_mut()?.try_wait().expect("wait for a node");
            if let Some(status) = status {
                *slot = None;
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL node `id`.
    pub fn kill(&mut self, id: u64) {
        kill_child(&mut self.children[(id - 1) as usize]);
    }

    /// SIGSTOP node `id` (`resume` with SIGCONT); a stopped node is still killed on drop.
    pub fn pause(&self, id: u64) {
        self.signal(id, libc::SIGSTOP);
    }

    /// SIGCONT node `id`.
    pub fn resume(&self, id: u64) {
        self.signal(id, libc::SIGCONT);
    }

    fn signal(&self, id: u64, signal: i32) {
        let child = self.children[(id - 1) as usize]
            .as_ref()
            .expect("node running");
        // SAFETY: a plain signal to our own child's pid; the child is not reaped yet.
        let sent = unsafe { libc::kill(child.id() as i32, signal) };
        assert_eq!(sent, 0, "signal {signal} to node {id}");
    }

    /// Make the nodes a fabric of `cells` data cells (`whip fabric init` through node 1),
    /// panicking with the command's stderr if it fails.
    pub fn init(&self, cells: u32) {
        let mut args: Vec<String> = vec!["fabric".into(), "init".into(), "--cells".into()];
        args.extend([cells.to_string(), "--cell".into(), self.addrs[0].clone()]);
        args.extend(self.node_args());
        let mut command = std::process::Command::new(crate::whip_binary());
        if let Some(config) = &self.config_dir {
            command.env("WHIP_CONFIG_DIR", config);
        }
        let out = command.args(&args).output().expect("run whip fabric init");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "whip fabric init: {stderr}");
    }

    /// `--node ID=ADDR` arguments naming every node.
    pub fn node_args(&self) -> Vec<String> {
        self.addrs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| ["--node".to_string(), format!("{}={a}", i + 1)])
            .collect()
    }
}

impl Drop for ProcessFabric {
    fn drop(&mut self) {
        for id in 1..=self.children.len() as u64 {
            self.kill(id);
        }
    }
}
