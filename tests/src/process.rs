//! A cell whose members are separate `whip cell serve` processes, killed with SIGKILL.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use whip_cell::CellClient;
use whip_proto::v1 as pb;

/// The `whip` binary next to the test executable (`target/<profile>/whip`).
pub fn whip_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let bin = profile_dir.join("whip");
    assert!(
        bin.exists(),
        "{} not built: run `cargo build -p whip` first",
        bin.display()
    );
    bin
}

/// Run `whip ARGS…` to its end: (success, stdout parsed as JSON or `Null`, stderr).
pub fn whip_json(args: &[String]) -> (bool, serde_json::Value, String) {
    let mut command = Command::new(whip_binary());
    command.args(args);
    run_json(command)
}

/// [`whip_json`] with the whip config (`WHIP_CONFIG_DIR`) `config_dir` instead of this
/// user's.
pub fn whip_json_in(
    config_dir: &std::path::Path,
    args: &[&str],
) -> (bool, serde_json::Value, String) {
    let mut command = Command::new(whip_binary());
    command.env("WHIP_CONFIG_DIR", config_dir).args(args);
    run_json(command)
}

fn run_json(mut command: Command) -> (bool, serde_json::Value, String) {
    let out = command.output().expect("run whip");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.success(), json, stderr)
}

/// Start `whip <kind> serve --id ID --listen ADDR --data DATA [EXTRA…]` (`kind` is `cell`
/// or `node`), its output discarded.
pub(crate) fn spawn_server(
    kind: &str,
    id: u64,
    addr: &str,
    data: &std::path::Path,
    extra: &[String],
) -> Child {
    server_command(kind, id, addr, data, extra)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn whip {kind} serve: {e}"))
}

/// The command line of [`spawn_server`], to adjust before spawning. With
/// `WHIP_TEST_NODE_LOGS=DIR` set, each server's log goes to `DIR/KIND-ID.log` (appended,
/// so a restart keeps what came before), for reading after a failed test; else nowhere.
pub(crate) fn server_command(
    kind: &str,
    id: u64,
    addr: &str,
    data: &std::path::Path,
    extra: &[String],
) -> Command {
    let mut command = Command::new(whip_binary());
    command
        .args([kind, "serve", "--id", &id.to_string(), "--listen", addr])
        .arg("--data")
        .arg(data)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log_sink(kind, id));
    command
}

fn log_sink(kind: &str, id: u64) -> Stdio {
    let Some(dir) = std::env::var_os("WHIP_TEST_NODE_LOGS") else {
        return Stdio::null();
    };
    let path = std::path::Path::new(&dir).join(format!("{kind}-{id}.log"));
    let file = (std::fs::OpenOptions::new().create(true).append(true))
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    Stdio::from(file)
}

/// SIGKILL the child in `slot`, if any, and reap it.
pub(crate) fn kill_child(slot: &mut Option<Child>) {
    if let Some(mut child) = slot.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Members of one cell, each its own process.
pub struct ProcessCluster {
    /// Data root.
    pub dir: tempfile::TempDir,
    /// Member addresses, index = id - 1.
    pub addrs: Vec<String>,
    children: Vec<Option<Child>>,
}

impl ProcessCluster {
    /// Start `n` member processes and initialize the cell.
    pub async fn start(n: usize) -> ProcessCluster {
        crate::init_tracing();
        let dir = tempfile::tempdir().expect("temp dir");
        let addrs: Vec<String> = crate::free_addrs(n).iter().map(|a| a.to_string()).collect();
        let mut cluster = ProcessCluster {
            dir,
            addrs,
            children: (0..n).map(|_| None).collect(),
        };
        for id in 1..=n as u64 {
            cluster.spawn(id);
        }
        let members = cluster
            .addrs
            .iter()
            .enumerate()
            .map(|(i, a)| pb::Member {
                id: i as u64 + 1,
                addr: a.clone(),
            })
            .collect();
        let first = CellClient::connect(&cluster.addrs[..1]).expect("client");
        crate::wait_for(
            "first member to listen",
            Duration::from_secs(10),
            || async { first.member_status(0).await.is_ok() },
        )
        .await;
        first.init(members).await.expect("init cell");
        cluster
    }

    /// Start (or restart) member `id`'s process.
    pub fn spawn(&mut self, id: u64) {
        let index = (id - 1) as usize;
        let data = self.dir.path().join(format!("member-{id}"));
        self.children[index] = Some(spawn_server("cell", id, &self.addrs[index], &data, &[]));
    }

    /// SIGKILL member `id`.
    pub fn kill(&mut self, id: u64) {
        kill_child(&mut self.children[(id - 1) as usize]);
    }

    /// Send `signal` (e.g. `libc::SIGSTOP`, `libc::SIGCONT`) to member `id`'s process.
    pub fn signal(&self, id: u64, signal: i32) {
        if let Some(child) = &self.children[(id - 1) as usize] {
            // SAFETY: kill(2) on our own child's pid; no memory is shared.
            unsafe {
                libc::kill(child.id() as i32, signal);
            }
        }
    }

    /// A client of every member.
    pub fn client(&self) -> CellClient {
        CellClient::connect(&self.addrs).expect("client")
    }

    /// The leader id as reported by any answering member.
    pub async fn leader(&self) -> Option<u64> {
        for i in 0..self.addrs.len() {
            if self.children[i].is_none() {
                continue;
            }
            let client = CellClient::connect(&self.addrs[i..=i]).expect("client");
            if let Ok(pb::StatusResponse {
                leader: Some(l), ..
            }) = client.member_status(0).await
                && self.children[(l - 1) as usize].is_some()
            {
                return Some(l);
            }
        }
        None
    }

    /// Wait up to `timeout` until a running member reports a running leader: its id.
    pub async fn wait_leader(&self, timeout: Duration) -> u64 {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(leader) = self.leader().await {
                return leader;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no leader within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for id in 1..=self.children.len() as u64 {
            self.signal(id, libc::SIGCONT);
            self.kill(id);
        }
    }
}

/// A 3-voter `whip cell dev` process (voter i on 127.0.0.1:(base+i)), stopped with SIGINT
/// like a user's Ctrl-C when dropped.
pub struct DevCell {
    child: Child,
    /// Port of voter 1; voters 2 and 3 follow.
    pub base: u16,
    /// The line `whip cell dev` printed once every voter knew the leader.
    pub ready_line: String,
}

/// Times a dev cell is started on fresh ports before a test gives up.
const DEV_CELL_STARTS_MAX: usize = 5;

impl DevCell {
    /// Start the dev cell with its data under `dir/dev` and wait for its ready line.
    pub fn start(dir: &std::path::Path) -> DevCell {
        DevCell::start_with_descriptors(dir, None)
    }

    /// Like [`DevCell::start`], with the process's open-file limit set to `nofile`.
    ///
    /// Only the first of the three ports is known to be free when it is picked; another
    /// test may take the next two before the cell binds them. A cell that exits without
    /// its ready line is started again on other ports (a few times, then the test fails).
    pub fn start_with_descriptors(dir: &std::path::Path, nofile: Option<u32>) -> DevCell {
        DevCell::start_with_args(dir, nofile, "")
    }

    /// Like [`DevCell::start_with_descriptors`], with `extra` appended to the command line
    /// (e.g. `--http 127.0.0.1:P`).
    pub fn start_with_args(dir: &std::path::Path, nofile: Option<u32>, extra: &str) -> DevCell {
        let mut said = Vec::new();
        for attempt in 0..DEV_CELL_STARTS_MAX {
            // The first try keeps the data under `dir/dev` (a test reads it there).
            let data = match attempt {
                0 => "dev".to_string(),
                n => format!("dev{n}"),
            };
            match DevCell::try_start(dir, nofile, &format!("{data} {extra}")) {
                Ok(cell) => return cell,
                Err(line) => said.push(line),
            }
        }
        panic!("whip cell dev never became ready; it said {said:?}");
    }

    /// Start it with `rest` after `--data` (the data directory and any extra flags).
    fn try_start(
        dir: &std::path::Path,
        nofile: Option<u32>,
        rest: &str,
    ) -> Result<DevCell, String> {
        let base = crate::free_addrs(1)[0].port().max(20_000);
        let whip = whip_binary();
        let args = format!("cell dev --voters 3 --base-port {base} --data {rest}");
        let script = match nofile {
            Some(n) => format!("ulimit -n {n} && exec {} {args}", whip.display()),
            None => format!("exec {} {args}", whip.display()),
        };
        let mut child = Command::new("sh")
            .current_dir(dir)
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn whip cell dev");
        let mut ready_line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready_line)
            .expect("read the ready line");
        if !ready_line.contains("ready") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ready_line);
        }
        Ok(DevCell {
            child,
            base,
            ready_line,
        })
    }

    /// The address of voter `i` (0-based).
    pub fn member(&self, i: u16) -> String {
        format!("127.0.0.1:{}", self.base + i)
    }

    /// Whether the process is still running (it has not exited).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for DevCell {
    fn drop(&mut self) {
        // SAFETY: plain libc call on a child pid we own.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
    }
}
