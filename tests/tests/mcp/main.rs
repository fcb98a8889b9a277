//! `whip mcp` as agents run it: one server per agent, started and driven over stdio by the
//! official MCP Python client (PyPI `mcp`, in the venv `scripts/mcp-venv.sh` makes), against
//! a 3-voter dev cell. Each test registers its agents and team with the `whip` CLI, then
//! calls tools through `tests/mcp/bridge.py` and checks the answers and what the fabric
//! holds afterwards (read back with the CLI, as the operator or a member). `t40_http` does
//! the same over Streamable HTTP on the dev cell's `--mcp` listener.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use whip_tests::whip_binary;

mod t10_tools;
mod t20_identity;
mod t30_waits;
mod t40_http;
mod t50_paths;
mod t55_resources;
mod t60_team;

/// How long a test waits for one answer of the bridge (a server start, a tool call).
const ANSWER_WAIT_MS: u64 = 60_000;

/// The repository's root (the tests crate's parent).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
        .to_path_buf()
}

/// The Python of the MCP test venv, made (once, under a lock) if missing.
fn python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(make_venv).clone()
}

fn make_venv() -> PathBuf {
    let script = repo_root().join("scripts/mcp-venv.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/mcp-venv.sh");
    assert!(out.status.success(), "scripts/mcp-venv.sh failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A dev cell, and the `whip` CLI against it with this test's credentials.
struct Fabric {
    // The dev cell stops before its directory goes (fields drop in order).
    dev: whip_tests::DevCell,
    dir: tempfile::TempDir,
}

impl Fabric {
    fn start() -> Fabric {
        let dir = tempfile::tempdir().unwrap();
        let dev = whip_tests::DevCell::start(dir.path());
        Fabric { dev, dir }
    }

    fn cell(&self) -> String {
        self.dev.member(0)
    }

    fn credentials(&self) -> PathBuf {
        self.dir.path().join("credentials.json")
    }

    /// `whip ARGS --cell ADDR --json`, which must succeed: its JSON answer.
    fn whip(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "whip {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    fn run(&self, args: &[&str]) -> Output {
        let cell = self.cell();
        Command::new(whip_binary())
            .current_dir(self.dir.path())
            .env("WHIP_CREDENTIALS", self.credentials())
            .args(args)
            .args(["--cell", cell.as_str(), "--json"])
            .output()
            .expect("run whip")
    }

    /// Register `agents`, and create `team` (supervised by the first) with the others as
    /// members.
    fn team(&self, team: &str, agents: &[&str]) {
        for agent in agents {
            self.whip(&["agent", "register", "--agent", agent]);
        }
        self.whip(&["team", "create", team, "--agent", agents[0]]);
        for member in &agents[1..] {
            self.whip(&[
                "team", "join", team, "--member", member, "--agent", agents[0],
            ]);
        }
    }

    /// One `whip mcp` per agent, driven through the Python client.
    fn mcp(&self, agents: &[&str]) -> Bridge {
        let args = json!(["mcp", "--cell", self.cell()]);
        let servers: serde_json::Map<String, Value> = agents
            .iter()
            .map(|a| (a.to_string(), args.clone()))
            .collect();
        let config = json!({
            "whip": whip_binary(), "cwd": self.dir.path(), "agents": servers,
            "env": {"WHIP_CREDENTIALS": self.credentials(), "WHIP_LOG": "warn"},
        });
        Bridge::start(&config)
    }
}

/// A tool's answer: its result, or the text of its tool error.
#[derive(Debug)]
enum Reply {
    Ok(Value),
    Refused(String),
}

impl Reply {
    fn ok(self) -> Value {
        match self {
            Reply::Ok(value) => value,
            Reply::Refused(text) => panic!("refused: {text}"),
        }
    }

    fn refused(self) -> String {
        match self {
            Reply::Refused(text) => text,
            Reply::Ok(value) => panic!("expected a refusal, got {value}"),
        }
    }
}

/// `tests/mcp/bridge.py`: MCP sessions with one `whip mcp` per agent.
struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: mpsc::Receiver<Value>,
    next_id: u64,
}

impl Bridge {
    fn start(config: &Value) -> Bridge {
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/mcp/bridge.py"))
            .arg(config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the MCP bridge");
        let stdin = child.stdin.take();
        let answers = read_lines(child.stdout.take().expect("piped stdout"));
        let mut bridge = Bridge {
            child,
            stdin,
            answers,
            next_id: 0,
        };
        let ready = bridge.answer();
        assert!(ready.get("ready").is_some(), "bridge said {ready}");
        bridge
    }

    fn answer(&mut self) -> Value {
        let wait = Duration::from_millis(ANSWER_WAIT_MS);
        self.answers
            .recv_timeout(wait)
            .unwrap_or_else(|_| panic!("no answer from the MCP bridge within {wait:?}"))
    }

    fn send(&mut self, mut request: Value) -> u64 {
        self.next_id += 1;
        request["id"] = json!(self.next_id);
        let stdin = self.stdin.as_mut().expect("the bridge is open");
        writeln!(stdin, "{request}").expect("write to the bridge");
        stdin.flush().expect("flush the bridge");
        self.next_id
    }

    /// The tools `agent`'s server lists, with their input schemas.
    fn tools(&mut self, agent: &str) -> Vec<Value> {
        self.send(json!({"agent": agent, "method": "list_tools"}));
        let answer = self.answer();
        answer["tools"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("{answer}"))
    }

    /// The resource addresses and templates `agent`'s server lists.
    fn resources(&mut self, agent: &str) -> Value {
        self.send(json!({"agent": agent, "method": "list_resources"}));
        self.answer()
    }

    /// Read the resource at `uri` as `agent`: its JSON, or the error the client raised.
    fn read(&mut self, agent: &str, uri: &str) -> Result<Value, String> {
        self.send(json!({"agent": agent, "method": "read_resource", "uri": uri}));
        let answer = self.answer();
        match answer.get("exception") {
            Some(e) => Err(e.as_str().unwrap_or_default().to_string()),
            None => Ok(answer["contents"][0].clone()),
        }
    }

    /// Call `tool` as `agent` and give up after `timeout_s` (the client cancels the
    /// request); what the client raised.
    fn call_cancelled(
        &mut self,
        agent: &str,
        tool: &str,
        arguments: Value,
        timeout_s: f64,
    ) -> String {
        let request = json!({"agent": agent, "method": "call", "tool": tool,
            "arguments": arguments, "timeout_s": timeout_s});
        self.send(request);
        let answer = self.answer();
        match answer.get("exception") {
            Some(e) => e.as_str().unwrap_or_default().to_string(),
            None => panic!("the call was answered before it was cancelled: {answer}"),
        }
    }

    /// Call `tool` as `agent`.
    fn call(&mut self, agent: &str, tool: &str, arguments: Value) -> Reply {
        self.call_all(&[(agent, tool, arguments)]).remove(0)
    }

    /// Send every call before reading any answer (so they run at once); the answers in the
    /// calls' order.
    fn call_all(&mut self, calls: &[(&str, &str, Value)]) -> Vec<Reply> {
        let sent = self.send_calls(calls);
        self.collect(sent)
    }

    /// Send `calls` without reading their answers; how many were sent.
    fn send_calls(&mut self, calls: &[(&str, &str, Value)]) -> usize {
        for (agent, tool, arguments) in calls {
            let request = json!({"agent": agent, "method": "call", "tool": tool,
                "arguments": arguments});
            self.send(request);
        }
        calls.len()
    }

    /// The answers of the last `count` calls sent, in the order they were sent.
    fn collect(&mut self, count: usize) -> Vec<Reply> {
        let mut answers: Vec<Value> = (0..count).map(|_| self.answer()).collect();
        answers.sort_by_key(|a| a["id"].as_u64());
        answers.into_iter().map(reply).collect()
    }
}

fn reply(answer: Value) -> Reply {
    if let Some(e) = answer.get("exception") {
        panic!("the MCP client raised {e}");
    }
    match answer["is_error"].as_bool() {
        Some(false) => Reply::Ok(answer["structured"].clone()),
        _ => Reply::Refused(answer["text"].as_str().unwrap_or_default().to_string()),
    }
}

/// Each line of `stdout` as JSON, on a channel.
fn read_lines(stdout: ChildStdout) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let value = serde_json::from_str(&line).unwrap_or(json!({"unparsed": line}));
            if tx.send(value).is_err() {
                return;
            }
        }
    });
    rx
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // End of input closes every MCP session, which ends every `whip mcp`.
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A refusal's stable code (the text before the first `: `).
fn code(text: &str) -> &str {
    text.split_once(": ").map_or("", |(code, _)| code)
}
