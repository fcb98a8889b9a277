//! An agent team, run for real (issue 31): a 3-node fabric whose nodes serve MCP over
//! Streamable HTTP, 8 agent processes that are MCP clients through the official Python SDK
//! (four start `whip mcp` over stdio, four reach a node's `/mcp`), and a backlog of 400
//! tasks, each naming one of 40 files. An agent claims a task, reserves its file
//! exclusively, changes it in its own clone of a scratch git repository, commits through
//! the hook `whip guard install` wrote, completes the task under its fence, releases the
//! file and mails a peer (`tests/mcp/team_agent.py`). Mid-run node 2 is killed and later
//! restarted.
//!
//! Checked from the fabric and the agents' own logs: every task done exactly once, no two
//! agents ever holding the same file at once (and each file's fences rising), every commit
//! made under its author's reservation while the guard refused each agent's commit of a
//! file the lead held, every mail with a forged sender refused, and every mail delivered
//! once with its proven sender.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use whip_tests::fabric::ProcessFabric;
use whip_tests::whip_binary;

const AGENTS: usize = 8;
const TASKS: usize = 400;
const FILES: usize = 40;
const TEAM: &str = "crew";
const REPO: &str = "team-repo";
/// The file the lead holds for the whole run: every agent's commit of it is refused.
const LOCKED: &str = "locked.txt";
/// The run must end within this long (debug build, two cores, a node killed).
const RUN_MAX: Duration = Duration::from_secs(900);

/// The test's world: the fabric, its CLI settings, the scratch repositories.
struct Team {
    fabric: ProcessFabric,
    dir: tempfile::TempDir,
    cell: String,
}

impl Team {
    fn creds(&self) -> PathBuf {
        self.dir.path().join("credentials.json")
    }

    /// The environment every `whip` the test starts (the CLI, `whip mcp`, the hooks) needs.
    fn env(&self, agent: &str) -> Value {
        let mut env = json!({"WHIP_CELL": self.cell, "WHIP_AGENT": agent,
            "WHIP_CREDENTIALS": self.creds(), "WHIP_LOG": "warn"});
        if let Ok(config) = std::env::var("WHIP_CONFIG_DIR") {
            env["WHIP_CONFIG_DIR"] = json!(config);
        }
        env
    }

    /// `whip ARGS --json` as `agent`, which must succeed.
    fn whip(&self, agent: &str, args: &[&str]) -> Value {
        let out = Command::new(whip_binary())
            .args(args)
            .args(["--agent", agent, "--cell", &self.cell, "--json"])
            .env("WHIP_CREDENTIALS", self.creds())
            .output()
            .expect("run whip");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "whip {args:?}: {stderr}");
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    fn token(&self, agent: &str) -> String {
        let file = std::fs::read(self.creds()).expect("credentials");
        let tokens: Value = serde_json::from_slice(&file).unwrap();
        tokens[agent].as_str().expect("a token").to_string()
    }

    fn stats(&self) -> Value {
        self.whip("lead", &["board", "stats", TEAM])
    }
}

fn agent_name(i: usize) -> String {
    format!("a{i}")
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("run git");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "git {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository of `FILES` files and the locked one; one clone per agent, the guard's
/// hooks installed in each.
fn repositories(team: &Team) -> (PathBuf, Vec<PathBuf>) {
    let base = team.dir.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    git(&base, &["init", "-q"]);
    for n in 0..FILES {
        std::fs::write(base.join(format!("f{n}.txt")), format!("file {n}\n")).unwrap();
    }
    std::fs::write(base.join(LOCKED), "the lead's\n").unwrap();
    let identity = [("user.name", "t"), ("user.email", "t@example.invalid")];
    for (key, value) in identity {
        git(&base, &["config", key, value]);
    }
    git(&base, &["add", "."]);
    git(&base, &["commit", "-q", "-m", "start"]);
    let clones = (1..=AGENTS)
        .map(|i| {
            let clone = team.dir.path().join(format!("clone-{i}"));
            let (from, to) = (base.to_str().unwrap(), clone.to_str().unwrap());
            git(team.dir.path(), &["clone", "-q", from, to]);
            for (key, value) in identity.iter().chain(&[("whip.repo", REPO)]) {
                git(&clone, &["config", key, value]);
            }
            team.whip(&agent_name(i), &["guard", "install", "--repo", to]);
            clone
        })
        .collect();
    git(&base, &["config", "whip.repo", REPO]);
    (base, clones)
}

/// Start the fabric, register the lead and the agents, make the team and its backlog.
async fn start() -> Team {
    let fabric = ProcessFabric::start_with_mcp(3).await;
    let cell = fabric.addrs.join(",");
    let team = Team {
        fabric,
        dir: tempfile::tempdir().unwrap(),
        cell,
    };
    let mut init = vec!["fabric", "init", "--cells", "4"];
    let nodes = team.fabric.node_args();
    init.extend(nodes.iter().map(String::as_str));
    let out = Command::new(whip_binary())
        .args(&init)
        .args(["--cell", &team.fabric.addrs[0]])
        .output()
        .expect("fabric init");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    team.whip("lead", &["agent", "register"]);
    team.whip("lead", &["team", "create", TEAM, "--reclaim", "20s"]);
    for i in 1..=AGENTS {
        let name = agent_name(i);
        team.whip(&name, &["agent", "register"]);
        team.whip("lead", &["team", "join", TEAM, "--member", &name]);
    }
    post_backlog(&team).await;
    team
}

/// The lead posts the backlog through the Rust client, 16 posts at a time.
async fn post_backlog(team: &Team) {
    let client = whip_cell::CellClient::connect(&team.fabric.addrs)
        .expect("client")
        .with_router(std::sync::Arc::new(whip_fabric::client::MapRouter::new()))
        .with_identity("lead", team.token("lead"));
    let client = std::sync::Arc::new(client);
    let posts = (0..TASKS).map(|n| {
        let client = client.clone();
        async move {
            let body = json!({"file": format!("f{}.txt", n % FILES), "n": n});
            let request = whip_proto::v1::BoardPostRequest {
                team: TEAM.into(),
                body: body.to_string().into_bytes(),
                ..Default::default()
            };
            client.board_post(request).await.expect("post a task");
        }
    });
    futures::stream::iter(posts)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

use futures::StreamExt;

/// Start agent `i` (`mode`: work or drain), logging to its own file.
fn agent(team: &Team, clones: &[PathBuf], i: usize, mode: &str) -> Child {
    let name = agent_name(i);
    let server = match i <= AGENTS / 2 {
        true => json!({"stdio": [whip_binary(), "mcp"], "env": team.env(&name)}),
        // Nodes 1 and 3 serve the HTTP agents; node 2 is the one killed.
        false => {
            let node = if i.is_multiple_of(2) { 0 } else { 2 };
            let url = format!("http://{}/mcp", team.fabric.mcp_addrs[node]);
            json!({"url": url, "token": team.token(&name)})
        }
    };
    let config = json!({
        "agent": name, "mode": mode, "server": server, "team": TEAM,
        "repo_dir": clones[i - 1], "repo": REPO, "git_env": team.env(&name),
        "peer": agent_name(i % AGENTS + 1), "forbidden": LOCKED,
        "log": team.dir.path().join(format!("{name}.log")),
    });
    Command::new(super::python())
        .arg(super::repo_root().join("tests/mcp/team_agent.py"))
        .arg(config.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start an agent")
}

/// Wait until the board has `done` tasks done, or fail at `deadline`.
async fn until_done(team: &Team, done: u64, deadline: Instant) {
    loop {
        let stats = team.stats();
        if stats["done"].as_u64().is_some_and(|d| d >= done) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{done} tasks never done: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Wait for every agent to exit; each must succeed.
fn finish(children: Vec<Child>) {
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait for an agent");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "agent {} failed: {stderr}", i + 1);
    }
}

/// Every agent's log lines, in one list.
fn history(team: &Team) -> Vec<Value> {
    (1..=AGENTS)
        .flat_map(|i| {
            let path = team.dir.path().join(format!("{}.log", agent_name(i)));
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<Value> = (text.lines())
                .map(|l| serde_json::from_str(l).expect("a log line"))
                .collect();
            lines
        })
        .collect()
}

fn events<'a>(history: &'a [Value], event: &'a str) -> impl Iterator<Item = &'a Value> {
    history.iter().filter(move |e| e["event"] == event)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_agents_work_a_backlog_through_mcp_across_a_node_kill() {
    let mut team = start().await;
    let (base, clones) = repositories(&team);
    let held = [
        "paths",
        "reserve",
        LOCKED,
        "--repo",
        base.to_str().unwrap(),
        "--ttl",
        "1h",
    ];
    team.whip("lead", &held);
    let deadline = Instant::now() + RUN_MAX;
    let workers: Vec<Child> = (1..=AGENTS)
        .map(|i| agent(&team, &clones, i, "work"))
        .collect();
    until_done(&team, TASKS as u64 / 4, deadline).await;
    team.fabric.kill(2);
    until_done(&team, TASKS as u64 / 2, deadline).await;
    team.fabric.spawn(2);
    tokio::task::block_in_place(|| finish(workers));
    let drains: Vec<Child> = (1..=AGENTS)
        .map(|i| agent(&team, &clones, i, "drain"))
        .collect();
    tokio::task::block_in_place(|| finish(drains));

    let stats = team.stats();
    let counts = (
        &stats["done"],
        &stats["ready"],
        &stats["claimed"],
        &stats["dead"],
    );
    assert_eq!(
        counts,
        (&json!(TASKS), &json!(0), &json!(0), &json!(0)),
        "{stats}"
    );
    let history = history(&team);
    exactly_once(&history);
    no_overlapping_holds(&history);
    guarded_commits(&history, &clones);
    proven_mail(&history);
}

/// No task is completed twice, and every task was completed (or its completion's answer
/// lost and the board shows it done, which the stats checked).
fn exactly_once(history: &[Value]) {
    let mut completed = BTreeSet::new();
    for e in events(history, "completed") {
        let task = e["task"].as_str().unwrap();
        assert!(completed.insert(task), "{task} completed twice");
    }
    let lost = events(history, "complete-refused").count();
    assert!(
        completed.len() + lost >= TASKS,
        "{} completed",
        completed.len()
    );
}

/// Per file, the agents' holds (grant answered to release sent) never overlap, and each
/// later grant has a larger fence.
fn no_overlapping_holds(history: &[Value]) {
    let mut holds: BTreeMap<&str, Vec<(f64, f64, u64, &str)>> = BTreeMap::new();
    let released: BTreeMap<(&str, &str), f64> = events(history, "release-sent")
        .map(|e| {
            (
                (e["agent"].as_str().unwrap(), e["task"].as_str().unwrap()),
                e["t"].as_f64().unwrap(),
            )
        })
        .collect();
    for e in events(history, "granted") {
        let (agent, task) = (e["agent"].as_str().unwrap(), e["task"].as_str().unwrap());
        let end = released
            .get(&(agent, task))
            .copied()
            .unwrap_or(f64::INFINITY);
        let hold = (
            e["t"].as_f64().unwrap(),
            end,
            e["fence"].as_u64().unwrap(),
            agent,
        );
        holds
            .entry(e["file"].as_str().unwrap())
            .or_default()
            .push(hold);
    }
    assert_eq!(holds.len(), FILES, "every file was worked");
    for (file, mut list) in holds {
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in list.windows(2) {
            let (first, next) = (pair[0], pair[1]);
            assert!(
                first.1 <= next.0,
                "{file}: {first:?} still held at {next:?}"
            );
            assert!(
                first.2 < next.2,
                "{file}: fence {} then {}",
                first.2,
                next.2
            );
        }
    }
}

/// Every agent's commit of the lead's file was refused by the guard and left no commit;
/// every other commit names a task its author held the file of.
fn guarded_commits(history: &[Value], clones: &[PathBuf]) {
    let refused: Vec<&Value> = events(history, "forbidden-commit").collect();
    assert_eq!(refused.len(), AGENTS);
    for e in &refused {
        assert_ne!(e["exit"], 0, "{e}");
        assert!(
            e["stderr"].as_str().unwrap().contains("lead"),
            "names the holder: {e}"
        );
    }
    let granted: BTreeSet<(&str, &str)> = events(history, "granted")
        .map(|e| (e["agent"].as_str().unwrap(), e["task"].as_str().unwrap()))
        .collect();
    for (i, clone) in clones.iter().enumerate() {
        let agent = agent_name(i + 1);
        let subjects = git(clone, &["log", "--format=%s"]);
        for subject in subjects.lines().filter(|s| *s != "start") {
            assert!(
                !subject.starts_with("forbidden"),
                "{agent} committed {subject}"
            );
            let task = subject.split(' ').next().unwrap();
            assert!(
                granted.contains(&(agent.as_str(), task)),
                "{agent}: {subject}"
            );
        }
    }
}

/// Forged senders refused; every mail sent arrives once, from its proven sender.
fn proven_mail(history: &[Value]) {
    let spoofs: Vec<&Value> = events(history, "spoof").collect();
    assert_eq!(spoofs.len(), AGENTS);
    assert!(
        spoofs.iter().all(|e| e["refused"] == "not_authorized"),
        "{spoofs:?}"
    );
    let mut received: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for e in events(history, "mail-received") {
        received
            .entry(e["id"].as_str().unwrap())
            .or_default()
            .push(e);
    }
    let sent: Vec<&Value> = events(history, "mail-sent").collect();
    assert!(sent.len() >= TASKS / 2, "{} mails sent", sent.len());
    for s in &sent {
        let got = received
            .get(s["id"].as_str().unwrap())
            .cloned()
            .unwrap_or_default();
        assert_eq!(got.len(), 1, "{s} received {got:?}");
        assert_eq!(got[0]["agent"], s["to"], "{s} reached {}", got[0]);
        assert_eq!(
            got[0]["sender"], s["agent"],
            "{s} arrived as from {}",
            got[0]
        );
    }
    assert_eq!(
        received.len(),
        sent.len(),
        "no mail arrived that was not sent"
    );
}
