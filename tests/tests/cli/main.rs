//! The `whip` binary as users and outside checks run it: exact command lines of the issue's
//! interface contract, JSON field names, exit codes, the embedded store and its socket.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use whip_tests::whip_binary;

mod completions;
mod config;
mod ephemeral;
mod guard;
mod idle;
mod mail;
mod newcomer;
mod output;
mod readme;
mod stop;
mod ux;
mod vote;
mod waits;
mod work;

fn whip(dir: &Path, args: &[&str]) -> Output {
    Command::new(whip_binary())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run whip")
}

/// Run the `whip` CLI in `dir` with its agent tokens in `creds`.
fn whip_with_credentials(dir: &Path, creds: &Path, args: &[&str]) -> Output {
    Command::new(whip_binary())
        .current_dir(dir)
        .env("WHIP_CREDENTIALS", creds)
        .args(args)
        .output()
        .expect("run whip")
}

/// A 3-voter dev cell, and `whip … --cell ADDR` against it with this test's credentials.
struct DevCli {
    // The dev cell stops before its directory goes (fields drop in order).
    _dev: whip_tests::DevCell,
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
    cell: String,
}

impl DevCli {
    fn start() -> DevCli {
        let dir = tempfile::tempdir().unwrap();
        let dev = whip_tests::DevCell::start(dir.path());
        DevCli {
            dir: dir.path().to_path_buf(),
            cell: dev.member(0),
            _dev: dev,
            _dir: dir,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let args = [args, &["--cell", self.cell.as_str()]].concat();
        whip_with_credentials(&self.dir, &self.dir.join("credentials.json"), &args)
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "whip failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn embedded_store_serializes_two_processes_on_one_lease() {
    let dir = tempfile::tempdir().unwrap();
    let a = json_of(&whip(
        dir.path(),
        &[
            "lease", "acquire", "deploy", "prod", "--holder", "a", "--ttl", "30s", "--json",
        ],
    ));
    assert_eq!(a["outcome"], "held");
    assert!(a["fence"].as_u64().unwrap() > 0);
    assert!(a["expires_at"].is_string());
    let b = json_of(&whip(
        dir.path(),
        &[
            "--json", "lease", "acquire", "deploy", "prod", "--holder", "b", "--ttl", "30s",
        ],
    ));
    assert_eq!(b["outcome"], "contended");
    assert!(
        dir.path().join(".whipplescript").is_dir(),
        "embedded store not in .whipplescript/"
    );
    let list = whip(dir.path(), &["lease", "list"]);
    let rows = whip_tests::table::rows(&String::from_utf8_lossy(&list.stdout));
    assert_eq!(
        (rows[0]["LEASE"].as_str(), rows[0]["HOLDER"].as_str()),
        ("shared::deploy/prod", "a")
    );
}

#[test]
fn counter_and_ledger_contract_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let consume = [
        "counter",
        "consume",
        "tokens",
        "core",
        "--amount",
        "60",
        "--cap",
        "100",
        "--reset",
        "daily",
        "--timezone",
        "America/New_York",
        "--json",
    ];
    let ok = json_of(&whip(dir.path(), &consume));
    assert_eq!(
        (ok["outcome"].as_str(), ok["remaining"].as_u64()),
        (Some("ok"), Some(40))
    );
    assert!(
        ok["period"].as_str().unwrap().len() == 10,
        "daily period is a date: {}",
        ok["period"]
    );
    let over = json_of(&whip(dir.path(), &consume));
    assert_eq!(
        (over["outcome"].as_str(), over["remaining"].as_u64()),
        (Some("over"), Some(40))
    );
    let first = json_of(&whip(
        dir.path(),
        &[
            "ledger",
            "append",
            "decisions",
            "deploys",
            "--entry",
            r#"{"choice":"ship"}"#,
            "--json",
        ],
    ));
    let second = json_of(&whip(
        dir.path(),
        &[
            "ledger",
            "append",
            "decisions",
            "deploys",
            "--entry",
            r#"{"choice":"wait"}"#,
            "--json",
        ],
    ));
    assert_eq!(
        (first["seq"].as_u64(), second["seq"].as_u64()),
        (Some(1), Some(2))
    );
}

#[test]
fn bad_input_exits_1_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = whip(
        dir.path(),
        &[
            "counter",
            "consume",
            "c",
            "k",
            "--amount",
            "1",
            "--cap",
            "5",
            "--reset",
            "daily",
            "--timezone",
            "Mars/Olympus",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Mars/Olympus"));
    let out = whip(
        dir.path(),
        &["ledger", "append", "l", "p", "--entry", "{not json"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid JSON"));
    let out = whip(
        dir.path(),
        &[
            "lease", "acquire", "r", "k", "--holder", "h", "--ttl", "10x",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let out = whip(dir.path(), &["lease", "acquire"]);
    assert_eq!(out.status.code(), Some(2), "usage errors exit 2");
    let out = whip(
        dir.path(),
        &[
            "counter", "consume", "c", "k", "--amount", "-5", "--cap", "5", "--reset", "daily",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "a negative amount is a usage error"
    );
}

#[test]
fn second_process_talks_to_the_store_holder_over_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    // A long benchmark holds the embedded store for two seconds.
    let mut holder = Command::new(whip_binary())
        .current_dir(dir.path())
        .args([
            "bench",
            "cas",
            "--clients",
            "2",
            "--duration",
            "2s",
            "--warmup",
            "0s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.path().join(".whipplescript/cell.sock");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "store holder never opened its socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let put = json_of(&whip(
        dir.path(),
        &["kv", "put", "shared-key", "v", "--json"],
    ));
    assert_eq!(put["outcome"], "written");
    assert!(holder.wait().unwrap().success());
    let got = json_of(&whip(dir.path(), &["kv", "get", "shared-key", "--json"]));
    assert_eq!(got["value"], "v", "write made through the socket was lost");
}

/// Many processes that find a fresh store at the same instant: one opens it, the others
/// talk to it over its socket (or take it over when it exits first); every write lands.
#[test]
fn processes_racing_for_a_fresh_store_all_write() {
    let dir = tempfile::tempdir().unwrap();
    const RACERS: usize = 8;
    let racers: Vec<_> = (0..RACERS)
        .map(|i| {
            Command::new(whip_binary())
                .current_dir(dir.path())
                .args([
                    "kv",
                    "put",
                    &format!("racer-{i}"),
                    &format!("v{i}"),
                    "--json",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for racer in racers {
        let out = racer.wait_with_output().unwrap();
        assert_eq!(json_of(&out)["outcome"], "written");
    }
    for i in 0..RACERS {
        let key = format!("racer-{i}");
        let got = json_of(&whip(dir.path(), &["kv", "get", &key, "--json"]));
        assert_eq!(got["value"], format!("v{i}"), "{key} was lost");
    }
}

#[test]
fn cluster_contract_commands() {
    let dir = tempfile::tempdir().unwrap();
    let dev = whip_tests::DevCell::start(dir.path());
    let (base, line) = (dev.base, dev.ready_line.clone());
    let ports: Vec<u16> = (0..3).map(|i| base + i).collect();
    for p in &ports {
        assert!(
            line.contains(&format!("127.0.0.1:{p}")),
            "dev did not print voter address {p}: {line}"
        );
    }
    let cell = format!("127.0.0.1:{}", ports[1]);
    let status = json_of(&whip(
        dir.path(),
        &["cell", "status", "--cell", &cell, "--json"],
    ));
    assert!(status["leader"].is_u64());
    assert!(status["term"].is_u64());
    assert_eq!(status["members"].as_array().unwrap().len(), 3);
    let held = json_of(&whip(
        dir.path(),
        &[
            "lease", "acquire", "deploy", "prod", "--holder", "a", "--ttl", "30s", "--cell", &cell,
            "--json",
        ],
    ));
    assert_eq!(held["outcome"], "held");
    let other = format!("127.0.0.1:{}", ports[2]);
    let contended = json_of(&whip(
        dir.path(),
        &[
            "lease", "acquire", "deploy", "prod", "--holder", "b", "--ttl", "30s", "--cell",
            &other, "--json",
        ],
    ));
    assert_eq!(contended["outcome"], "contended");
    let released = json_of(&whip(
        dir.path(),
        &[
            "lease", "release", "deploy", "prod", "--holder", "a", "--cell", &cell, "--json",
        ],
    ));
    assert_eq!(released["outcome"], "released");
    let bench = json_of(&whip(
        dir.path(),
        &[
            "bench",
            "cas",
            "--cell",
            &cell,
            "--clients",
            "4",
            "--duration",
            "1s",
            "--warmup",
            "0s",
            "--json",
        ],
    ));
    for field in ["ops_per_sec", "p50_us", "p99_us", "p999_us"] {
        assert!(
            bench[field].is_number(),
            "bench JSON lacks {field}: {bench}"
        );
    }
    assert!(bench["ops_per_sec"].as_f64().unwrap() > 0.0);
    drop(dev);
}

#[test]
fn check_accepts_the_seed_programs() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/check/valid");
    let mut checked = 0;
    for entry in std::fs::read_dir(&seeds).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("seed") && name.ends_with(".whip") {
            let out = Command::new(whip_binary())
                .arg("check")
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stdout).starts_with("== "));
            checked += 1;
        }
    }
    assert!(checked >= 3);
}

/// The team structures beside the board: a document with versioned CAS, a frame merged row
/// by row, artifacts, signals followed after a sequence, and fenced path and run locks.
#[test]
fn blackboard_structures_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Signals are for the team's members: the CLI's agent creates (and so joins) team t.
    // SAFETY: set before any thread starts; the whip processes inherit it.
    unsafe { std::env::set_var("WHIP_CREDENTIALS", d.join("credentials.json")) };
    assert!(whip(d, &["team", "create", "t"]).status.success());
    let put = whip(
        d,
        &[
            "doc",
            "put",
            "t",
            "manifest",
            "--value",
            r#"{"files":["a.rs"]}"#,
            "--expect",
            "0",
            "--json",
        ],
    );
    assert!(put.status.success());
    let version = json_of(&put)["version"].as_u64().unwrap();
    let stale = whip(
        d,
        &[
            "doc", "put", "t", "manifest", "--value", "{}", "--expect", "0",
        ],
    );
    assert_eq!(stale.status.code(), Some(0)); // an answer
    assert!(String::from_utf8_lossy(&stale.stdout).contains(&format!("at version {version}")));
    let got = json_of(&whip(d, &["doc", "get", "t", "manifest", "--json"]));
    assert_eq!(got["doc"]["files"][0], "a.rs");
    assert!(
        whip(
            d,
            &[
                "frame",
                "set",
                "t",
                "ci",
                "src/a.rs",
                "--col",
                "build=ok",
                "--col",
                "test=failed"
            ]
        )
        .status
        .success()
    );
    assert!(
        whip(
            d,
            &["frame", "set", "t", "ci", "src/a.rs", "--col", "test=ok"]
        )
        .status
        .success()
    );
    let frame = json_of(&whip(d, &["frame", "show", "t", "ci", "--json"]));
    assert_eq!(
        frame["rows"]["src/a.rs"],
        serde_json::json!({"build": "ok", "test": "ok"})
    );
    assert!(
        whip(d, &["artifacts", "set", "t", "bin", "sha256:abc"])
            .status
            .success()
    );
    let artifacts = json_of(&whip(d, &["artifacts", "list", "t", "--json"]));
    assert_eq!(artifacts["artifacts"]["bin"], "sha256:abc");
    for n in 1..=2 {
        let body = format!(r#"{{"n":{n}}}"#);
        assert!(
            whip(d, &["signal", "publish", "t", "deploys", "--body", &body])
                .status
                .success()
        );
    }
    let follow = whip(
        d,
        &[
            "signal",
            "subscribe",
            "t",
            "deploys",
            "--after",
            "1",
            "--for",
            "200ms",
            "--json",
        ],
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&follow.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "only signals after #1");
    assert_eq!(lines[0]["body"]["n"], 2);
    // The sender is the proven caller; an agent outside the team cannot publish.
    assert!(lines[0]["from"].as_str().unwrap().starts_with("cli-"));
    let outsider = whip(
        d,
        &["signal", "publish", "t", "deploys", "--agent", "mallory"],
    );
    assert_eq!(outsider.status.code(), Some(1));
    let first = json_of(&whip(
        d,
        &[
            "lock", "acquire", "t", "src/a.rs", "--holder", "w1", "--json",
        ],
    ));
    assert_eq!(first["outcome"], "held");
    let second = json_of(&whip(
        d,
        &[
            "lock", "acquire", "t", "src/a.rs", "--holder", "w2", "--json",
        ],
    ));
    assert_eq!(second["outcome"], "contended");
    let run = json_of(&whip(
        d,
        &["lock", "acquire", "t", "--repo", "--holder", "w2", "--json"],
    ));
    assert_eq!(run["outcome"], "held");
    assert!(run["fence"].as_u64().unwrap() > first["fence"].as_u64().unwrap());
    assert!(
        whip(d, &["lock", "release", "t", "src/a.rs", "--holder", "w1"])
            .status
            .success()
    );
    let third = json_of(&whip(
        d,
        &[
            "lock", "acquire", "t", "src/a.rs", "--holder", "w2", "--json",
        ],
    ));
    assert_eq!(third["outcome"], "held");
}

/// A team `crew` with tasks crew-1 and crew-2 posted, crew-1 claimed by w1: its fence.
fn crew_with_a_claim(d: &std::path::Path, creds: &std::path::Path) -> String {
    let run = |args: &[&str]| whip_with_credentials(d, creds, args);
    assert!(run(&["team", "create", "crew"]).status.success());
    for job in 1..=2 {
        let task = format!(r#"{{"job":{job}}}"#);
        assert!(
            run(&["board", "post", "crew", "--task", &task])
                .status
                .success()
        );
    }
    let first = json_of(&run(&[
        "board", "claim", "crew", "--worker", "w1", "--json",
    ]));
    first["fence"].as_u64().unwrap().to_string()
}

/// `board claim crew --worker w1 --complete TASK --fence FENCE`, then `extra`, `--json`.
fn claim_completing(
    d: &std::path::Path,
    creds: &std::path::Path,
    (task, fence): (&str, &str),
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "board",
        "claim",
        "crew",
        "--worker",
        "w1",
        "--complete",
        task,
        "--fence",
        fence,
    ];
    args.extend_from_slice(extra);
    args.push("--json");
    whip_with_credentials(d, creds, &args)
}

/// `board claim --complete ID --fence N --result JSON` (issue 35's contract): the held task
/// completes and the next is claimed in one call, both outcomes printed.
#[test]
fn board_claim_completes_the_held_task_and_claims_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (d, creds) = (dir.path(), dir.path().join("credentials.json"));
    let run = |args: &[&str]| whip_with_credentials(d, &creds, args);
    let fence = crew_with_a_claim(d, &creds);
    let result = ["--result", r#"{"ok":true}"#];
    let both = json_of(&claim_completing(d, &creds, ("crew-1", &fence), &result));
    assert_eq!(both["completed"]["task_id"], "crew-1");
    assert_eq!(both["completed"]["outcome"], "completed");
    assert_eq!(both["claimed"]["task"]["id"], "crew-2");
    let stats = json_of(&run(&["board", "stats", "crew", "--json"]));
    assert_eq!(
        (&stats["done"], &stats["claimed"]),
        (&Value::from(1), &Value::from(1))
    );
    let done = json_of(&run(&[
        "board", "list", "crew", "--state", "done", "--json",
    ]));
    assert!(done.to_string().contains("crew-1"), "{done}");
    let fence = both["claimed"]["fence"].as_u64().unwrap().to_string();
    let last = json_of(&claim_completing(d, &creds, ("crew-2", &fence), &[]));
    assert_eq!(last["claimed"]["task"], Value::Null, "nothing left: {last}");
}

/// `board claim --max N` (issue 35, item 3): a prefetch of several claims in one write, each
/// with its own fence; with `--complete`, the held task completes in the same write; a
/// stale completion is refused and claims nothing.
#[test]
fn board_claim_max_prefetches_claims_each_with_its_own_fence() {
    let dir = tempfile::tempdir().unwrap();
    let (d, creds) = (dir.path(), dir.path().join("credentials.json"));
    let run = |args: &[&str]| whip_with_credentials(d, &creds, args);
    let fence = crew_with_a_claim(d, &creds);
    for job in 3..=5 {
        let task = format!(r#"{{"job":{job}}}"#);
        assert!(
            run(&["board", "post", "crew", "--task", &task])
                .status
                .success()
        );
    }
    let stale = claim_completing(d, &creds, ("crew-1", "1"), &["--max", "3"]);
    assert_eq!(stale.status.code(), Some(1), "a stale fence is refused");
    let stats = json_of(&run(&["board", "stats", "crew", "--json"]));
    assert_eq!(
        (&stats["ready"], &stats["claimed"]),
        (&Value::from(4), &Value::from(1))
    );
    let both = json_of(&claim_completing(
        d,
        &creds,
        ("crew-1", &fence),
        &["--max", "3"],
    ));
    assert_eq!(both["completed"], serde_json::json!(["crew-1"]), "{both}");
    let claims = both["claims"].as_array().expect("claims");
    let ids: Vec<&str> = claims
        .iter()
        .map(|c| c["task"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["crew-2", "crew-3", "crew-4"], "oldest first: {both}");
    let fences: Vec<u64> = claims
        .iter()
        .map(|c| c["fence"].as_u64().unwrap())
        .collect();
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "own fences: {fences:?}"
    );
    assert!(
        fences[0] > fence.parse::<u64>().unwrap(),
        "{fences:?} after {fence}"
    );
    let rest = json_of(&run(&[
        "board", "claim", "crew", "--worker", "w2", "--max", "4", "--json",
    ]));
    let ids: Vec<&str> = rest["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["task"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["crew-5"], "what is left: {rest}");
    let text = run(&["board", "claim", "crew", "--worker", "w2", "--max", "2"]);
    assert!(text.status.success());
    assert_eq!(
        String::from_utf8_lossy(&text.stdout).trim(),
        "no ready task"
    );
    let too_many = run(&["board", "claim", "crew", "--worker", "w2", "--max", "17"]);
    assert_ne!(too_many.status.code(), Some(0), "17 is past the bound");
    assert!(
        String::from_utf8_lossy(&too_many.stderr).contains("at most 16"),
        "{}",
        String::from_utf8_lossy(&too_many.stderr)
    );
}

/// `board claim --complete` with a stale fence is refused (exit 1) and claims nothing; it
/// does not combine with `--task`.
#[test]
fn board_claim_complete_refuses_a_stale_fence_and_claims_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (d, creds) = (dir.path(), dir.path().join("credentials.json"));
    crew_with_a_claim(d, &creds);
    let stale = claim_completing(d, &creds, ("crew-1", "1"), &[]);
    assert_eq!(stale.status.code(), Some(1));
    let refusal: Value = serde_json::from_slice(&stale.stdout).unwrap();
    assert_eq!(refusal["reason"], "stale_fence");
    let stats = json_of(&whip_with_credentials(
        d,
        &creds,
        &["board", "stats", "crew", "--json"],
    ));
    assert_eq!(
        (&stats["ready"], &stats["claimed"]),
        (&Value::from(1), &Value::from(1))
    );
    let conflicting = claim_completing(d, &creds, ("crew-1", "9"), &["--task", "crew-2"]);
    assert_eq!(
        conflicting.status.code(),
        Some(2),
        "--complete conflicts with --task"
    );
}

/// The board's interface contract on the embedded store: `team create`, `board post` →
/// `{"task_id"}`, `board claim` → `{"task": {"id", "body"}, "fence"}`, a stale completion
/// exits 1 with a typed reason, `board stats` → `{"ready","claimed","done","dead","tier"}`.
#[test]
fn board_contract_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let creds = d.join("credentials.json");
    let run = |args: &[&str]| whip_with_credentials(d, &creds, args);
    assert!(run(&["team", "create", "crew"]).status.success());
    let posted = json_of(&run(&[
        "board",
        "post",
        "crew",
        "--task",
        r#"{"job":1}"#,
        "--json",
    ]));
    assert_eq!(posted["task_id"], "crew-1");
    json_of(&run(&[
        "board",
        "post",
        "crew",
        "--task",
        r#"{"job":2}"#,
        "--json",
    ]));
    let claimed = json_of(&run(&[
        "board", "claim", "crew", "--worker", "w1", "--json",
    ]));
    assert_eq!(claimed["task"]["id"], "crew-1");
    assert_eq!(claimed["task"]["body"]["job"], 1);
    let fence = claimed["fence"].as_u64().unwrap();
    let stale = run(&[
        "board", "complete", "crew", "crew-1", "--fence", "1", "--json",
    ]);
    assert_eq!(stale.status.code(), Some(1));
    let refusal: Value = serde_json::from_slice(&stale.stdout).unwrap();
    assert_eq!(refusal["reason"], "stale_fence");
    let fence_text = fence.to_string();
    let next = json_of(&run(&[
        "board",
        "complete",
        "crew",
        "crew-1",
        "--fence",
        &fence_text,
        "--claim-next",
        "w1",
        "--json",
    ]));
    assert_eq!(
        next["task"]["id"], "crew-2",
        "completed and claimed the next in one call"
    );
    let stats = json_of(&run(&["board", "stats", "crew", "--json"]));
    assert_eq!(
        (
            &stats["ready"],
            &stats["claimed"],
            &stats["done"],
            &stats["dead"],
            &stats["tier"]
        ),
        (
            &Value::from(0),
            &Value::from(1),
            &Value::from(1),
            &Value::from(0),
            &Value::from("local")
        )
    );
    let empty = json_of(&run(&[
        "board", "claim", "crew", "--worker", "w2", "--json",
    ]));
    assert_eq!(empty["task"], Value::Null);
    // A named claim: w2 cannot take w1's task; w1 gives it back unfinished and w2 takes
    // exactly that task, with its own window.
    let held = next["fence"].as_u64().unwrap().to_string();
    let taken = run(&[
        "board", "claim", "crew", "--worker", "w2", "--task", "crew-2", "--json",
    ]);
    assert_eq!(taken.status.code(), Some(1));
    let refusal: Value = serde_json::from_slice(&taken.stdout).unwrap();
    assert_eq!(refusal["reason"], "taken");
    let released = json_of(&run(&[
        "board", "release", "crew", "crew-2", "--fence", &held, "--json",
    ]));
    assert_eq!(released["task_id"], "crew-2");
    let named = json_of(&run(&[
        "board", "claim", "crew", "--worker", "w2", "--task", "crew-2", "--for", "5m", "--json",
    ]));
    assert_eq!(named["task"]["id"], "crew-2");
    let window = named["deadline_ms"].as_u64().unwrap();
    assert!(window > now_ms() + 4 * 60_000, "a 5 minute window: {named}");
    let outsider = run(&[
        "board", "post", "crew", "--task", "{}", "--agent", "mallory",
    ]);
    assert_eq!(outsider.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&outsider.stderr).contains("not_member"));
}

/// The CLI grows a team: the supervisor adds B with `--member` (acting with `--agent`),
/// and B then claims from the board (issue 13's contract line for `team join`).
#[test]
fn the_supervisor_adds_a_member_who_then_claims() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let creds = d.join("credentials.json");
    let dev = whip_tests::DevCell::start(d);
    let cell = dev.member(0);
    let run = |args: &[&str]| whip_with_credentials(d, &creds, args);
    let sup = ["--agent", "sup", "--cell", cell.as_str()];
    let ok = |out: Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    ok(run(&[&["team", "create", "crew"][..], &sup].concat()));
    ok(run(&[
        &["board", "post", "crew", "--task", "{\"n\":1}"][..],
        &sup,
    ]
    .concat()));
    let outsider = run(&[
        "board", "claim", "crew", "--worker", "b", "--agent", "b", "--cell", &cell,
    ]);
    assert_eq!(outsider.status.code(), Some(1), "b is not a member yet");
    ok(run(
        &[&["team", "join", "crew", "--member", "b"][..], &sup].concat()
    ));
    let claimed = ok(run(&[
        "board", "claim", "crew", "--worker", "b", "--agent", "b", "--cell", &cell, "--json",
    ]));
    let claimed = json_of(&claimed);
    assert_eq!(claimed["outcome"], "claimed", "{claimed}");
}

/// `whip cell status --json` says where a write's time went, from the leader's view: every
/// stage is present with its percentiles, and the writes just made are counted.
#[test]
fn cell_status_shows_per_stage_latencies() {
    let dir = tempfile::tempdir().unwrap();
    let dev = whip_tests::DevCell::start(dir.path());
    let cell = format!("127.0.0.1:{}", dev.base + 2);
    for i in 0..5 {
        let put = json_of(&whip(
            dir.path(),
            &[
                "kv",
                "put",
                &format!("stage/{i}"),
                "v",
                "--cell",
                &cell,
                "--json",
            ],
        ));
        assert!(put["version"].is_u64(), "{put}");
    }
    let status = json_of(&whip(
        dir.path(),
        &["cell", "status", "--cell", &cell, "--json"],
    ));
    assert_eq!(status["stages_member"], status["leader"], "{status}");
    let stages = status["stages"].as_object().expect("stages object");
    let names = [
        "queue",
        "log_flushed",
        "follower_acked",
        "committed",
        "applied",
        "replied",
    ];
    for name in names {
        let stage = &stages[name];
        for field in ["count", "p50_us", "p90_us", "p99_us", "max_us"] {
            assert!(stage[field].is_u64(), "{name}.{field} in {status}");
        }
    }
    // Five writes through a follower: each was queued, committed and replied on the leader.
    for name in ["queue", "committed", "replied", "log_flushed"] {
        assert!(
            stages[name]["count"].as_u64().unwrap() >= 5,
            "{name}: {status}"
        );
    }
    let committed = &stages["committed"];
    assert!(committed["p50_us"].as_u64() <= committed["max_us"].as_u64());
    stage_hops_are_counted(&status, &names);
    a_followers_answers_are_counted(dir.path(), &status);
}

/// Addressed to a follower, `member_stages` and `member_hops` are that follower's own: it
/// answered the appends that carried the writes (`follower_answered`).
fn a_followers_answers_are_counted(dir: &std::path::Path, status: &Value) {
    let members = status["members"].as_array().expect("members");
    let follower = members
        .iter()
        .find(|m| m["id"] != status["leader"])
        .and_then(|m| m["addr"].as_str())
        .expect("a follower");
    let own = json_of(&whip(
        dir,
        &["cell", "status", "--cell", follower, "--json"],
    ));
    let answered = &own["member_stages"]["follower_answered"];
    assert!(answered["count"].as_u64() >= Some(1), "{own}");
    let hops = &own["member_hops"]["follower_answered"];
    assert!(hops["samples"].as_u64() >= Some(1), "{own}");
    assert!(hops["thread_switches"].is_u64(), "{own}");
}

/// Issue 35's `hops`: every stage with its samples and thread switches; the log writer is
/// its own thread, so every flushed append switched at least once.
fn stage_hops_are_counted(status: &Value, names: &[&str]) {
    let hops = status["hops"].as_object().expect("hops object");
    for name in names {
        let hop = &hops[*name];
        assert!(
            hop["samples"].is_u64() && hop["thread_switches"].is_u64(),
            "{name}: {hop}"
        );
    }
    let flushed = &hops["log_flushed"];
    let samples = flushed["samples"].as_u64().unwrap();
    assert!(samples >= 5, "{status}");
    assert!(
        flushed["thread_switches"].as_u64() >= Some(samples),
        "{status}"
    );
}

#[test]
fn a_program_that_does_not_check_is_reported_once_per_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let program = "workflow W\n\noutput result { note string }\n\n\
                   rule r when started => {\n  complete missing { note \"x\" }\n}\n";
    std::fs::write(dir.path().join("bad.whip"), program).unwrap();
    let out = whip(dir.path(), &["run", "bad.whip"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: rule `r` completes unknown"),
        "{stderr}"
    );
    assert!(!stderr.contains("error: error:"), "{stderr}");
}

#[test]
fn an_empty_store_says_it_has_no_instances_and_a_missing_one_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // A mistyped store is not silently created by a read: it is refused, and stays absent.
    for args in [
        &["--store", "mistyped", "instances"][..],
        &["--store", "mistyped", "leases"],
    ] {
        let out = whip(dir.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no store at mistyped"), "{stderr}");
    }
    assert!(!dir.path().join("mistyped").exists());
    json_of(&whip(dir.path(), &["--json", "kv", "put", "k", "v"]));
    let out = whip(dir.path(), &["instances"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no instances\n");
    let json = json_of(&whip(dir.path(), &["--json", "instances"]));
    assert_eq!(json, serde_json::json!([]));
}

/// `whip kv list PREFIX` (issue 30's contract): one page in key order with `more`, and the
/// next page after the last key listed; keys outside the prefix never appear.
#[test]
fn kv_list_pages_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (key, value) in [
        ("app/a", "1"),
        ("app/b", "2"),
        ("app/c", "3"),
        ("other", "x"),
    ] {
        assert!(whip(d, &["kv", "put", key, value]).status.success());
    }
    let first = json_of(&whip(d, &["kv", "list", "app/", "--limit", "2", "--json"]));
    assert_eq!(first["more"], true, "{first}");
    let items = first["items"].as_array().unwrap();
    let keys: Vec<&str> = items.iter().map(|i| i["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["app/a", "app/b"]);
    assert_eq!(
        (items[1]["value"].as_str(), items[1]["version"].is_u64()),
        (Some("2"), true)
    );
    let rest = json_of(&whip(
        d,
        &[
            "kv", "list", "app/", "--limit", "2", "--after", "app/b", "--json",
        ],
    ));
    assert_eq!(rest["more"], false, "{rest}");
    assert_eq!(rest["items"][0]["key"], "app/c");
    assert_eq!(rest["items"].as_array().unwrap().len(), 1);
    let all = json_of(&whip(d, &["kv", "list", "app/", "--json"]));
    assert_eq!(
        (all["items"].as_array().unwrap().len(), &all["more"]),
        (3, &Value::Bool(false))
    );
}

/// A team's artifacts are its members' alone (seed C6): an outsider neither reads nor
/// replaces them, and the reference reads back unchanged.
#[test]
fn team_artifacts_are_members_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let creds = d.join("credentials.json");
    let cli = |args: &[&str]| whip_with_credentials(d, &creds, args);
    assert!(cli(&["team", "create", "t"]).status.success());
    assert!(
        cli(&["artifacts", "set", "t", "bin", "sha256:abc"])
            .status
            .success()
    );
    let evil = [
        "artifacts",
        "set",
        "t",
        "bin",
        "sha256:evil",
        "--agent",
        "mallory",
    ];
    for args in [&["artifacts", "list", "t", "--agent", "mallory"][..], &evil] {
        let refused = cli(args);
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("not_member"), "{stderr}");
    }
    let artifacts = json_of(&cli(&["artifacts", "list", "t", "--json"]));
    assert_eq!(
        artifacts["artifacts"]["bin"], "sha256:abc",
        "nothing changed"
    );
}

/// `whip instances --status running --workflow W --json` (issue 30's contract): only the
/// instances the filters select, by status, workflow and owner, at most `--limit`.
#[test]
fn instances_filter_by_status_workflow_and_owner() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let valid = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/check/valid");
    let program = |name: &str| valid.join(name).to_string_lossy().into_owned();
    let (ship, decisions) = (
        program("seed_lease_ship.whip"),
        program("seed_ledger_decisions.whip"),
    );
    let run = |file: &str| json_of(&whip(d, &["--json", "run", file]))["id"].clone();
    let running = run(&ship);
    let done = run(&decisions);
    let list = |args: &[&str]| -> Vec<Value> {
        let mut all = vec!["--json", "instances"];
        all.extend_from_slice(args);
        let rows = json_of(&whip(d, &all));
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].clone())
            .collect()
    };
    assert_eq!(
        list(&["--status", "running", "--workflow", "Ship"]),
        [running]
    );
    assert_eq!(list(&["--status", "completed"]), [done]);
    assert!(list(&["--status", "running", "--workflow", "Decisions"]).is_empty());
    assert_eq!(list(&["--owner", "operator"]).len(), 2);
    assert!(list(&["--owner", "ann"]).is_empty());
    assert_eq!(list(&["--limit", "1"]).len(), 1);
    let bad = whip(d, &["instances", "--status", "sleeping"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown status is a usage error"
    );
}
