//! Goal: the servers' settings merge flags > environment > file > defaults, `whip config show`
//! says which layer each came from, a file key the server lacks is refused by name, and a
//! served node really runs with a value it only found in its data directory's whip.toml.
//! Method: `whip config show --json` with a file, `WHIP_…` variables and flags set so that
//! each layer wins one setting; then a real `whip node serve --data DIR` whose id and listen
//! address come from DIR/whip.toml, initialized as a one-node fabric through that address.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use whip_tests::whip_binary;

use super::{json_of, whip};

fn whip_env(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(whip_binary())
        .current_dir(dir)
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("run whip")
}

#[test]
fn config_show_json_exits_zero_with_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let shown = json_of(&whip(dir.path(), &["config", "show", "--json"]));
    assert_eq!(shown["server"], "node");
    assert_eq!(shown["file"], Value::Null);
    assert_eq!(shown["settings"]["storage"], "redb");
    assert_eq!(shown["sources"]["storage"], "default");
    assert_eq!(shown["sources"]["id"], "unset");
    // A validator that does not answer quarantines by default (issue 28).
    assert_eq!(shown["settings"]["mail-screen-fail"], "closed");
    assert_eq!(shown["sources"]["mail-screen-fail"], "default");
}

#[test]
fn precedence_flags_then_env_then_file_then_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = concat!(
        "id = 1\nlisten = \"127.0.0.1:7101\"\nheartbeat-ms = 150\n",
        "election-timeout-ms = 900\nstorage = \"sled\"\n",
    );
    std::fs::write(dir.path().join("whip.toml"), file).unwrap();
    let data = dir.path().to_str().unwrap();
    let env = [
        ("WHIP_ID", "2"),
        ("WHIP_HEARTBEAT_MS", "160"),
        ("WHIP_LISTEN", "127.0.0.1:7102"),
    ];
    let args = ["config", "show", "--json", "--data", data, "--id", "3"];
    let shown = json_of(&whip_env(dir.path(), &env, &args));
    let expect = [
        ("id", Value::from(3), "flag"),
        ("data", Value::from(data), "flag"),
        ("heartbeat-ms", Value::from(160), "env"),
        ("listen", Value::from("127.0.0.1:7102"), "env"),
        ("election-timeout-ms", Value::from(900), "file"),
        ("storage", Value::from("sled"), "file"),
        ("clock-offset-ms", Value::from(0), "default"),
        ("advertise", Value::Null, "unset"),
    ];
    for (key, value, source) in expect {
        assert_eq!(shown["settings"][key], value, "{key}");
        assert_eq!(shown["sources"][key], source, "{key}");
    }
    let file_path = dir.path().join("whip.toml");
    assert_eq!(shown["file"], file_path.to_str().unwrap());
    // The readable table says the same.
    let table = whip_env(dir.path(), &env, &["config", "show", "--data", data]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("heartbeat-ms"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("storage") && l.trim_end().ends_with("file")),
        "{text}"
    );
}

#[test]
fn unknown_key_in_the_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.toml");
    std::fs::write(&file, "id = 1\nheartbeat = 100\n").unwrap();
    let file = file.to_str().unwrap();
    let out = whip(dir.path(), &["config", "show", "--config", file]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown key `heartbeat`"), "{err}");
    assert!(err.contains("did you mean `heartbeat-ms`?"), "{err}");
    // The server refuses to start on it too, before it binds anything.
    let serve = whip(
        dir.path(),
        &["node", "serve", "--config", file, "--insecure"],
    );
    assert_eq!(serve.status.code(), Some(1));
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(err.contains("unknown key `heartbeat`"), "{err}");
}

#[test]
fn a_required_setting_missing_everywhere_says_how_to_give_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let out = whip(
        dir.path(),
        &["node", "serve", "--data", data, "--id", "1", "--insecure"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("listen is not set: pass --listen, set WHIP_LISTEN"),
        "{err}"
    );
}

/// Kills the node when the test ends, however it ends.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_served_node_runs_with_its_data_dirs_file() {
    let dir = tempfile::tempdir().unwrap();
    let (data, creds) = (dir.path().join("node"), dir.path().join("whip-config"));
    std::fs::create_dir_all(&data).unwrap();
    let addr = whip_tests::free_addrs(1)[0].to_string();
    let file = format!("id = 7\nlisten = \"{addr}\"\nheartbeat-ms = 150\n");
    std::fs::write(data.join("whip.toml"), file).unwrap();
    let env = [("WHIP_CONFIG_DIR", creds.to_str().unwrap())];
    let node = Command::new(whip_binary())
        .args(["node", "serve", "--data"])
        .arg(&data)
        .envs(env)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn whip node serve");
    let _node = Served(node);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "the node never listened on {addr} (from the file)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let member = format!("7={addr}");
    let args = [
        "fabric", "init", "--node", &member, "--cells", "1", "--cell", &addr, "--json",
    ];
    let status = json_of(&whip_env(dir.path(), &env, &args));
    let nodes = status["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 1, "{status}");
    assert_eq!(
        nodes[0]["id"], 7,
        "the node's id came from the file: {status}"
    );
    assert_eq!(nodes[0]["addr"], addr.as_str());
}

/// Values out of range are refused before anything starts (issue 28: `heartbeat-ms = 0`
/// once panicked a task of a running node): from a flag or from the file, the node exits 1
/// naming the setting and its range, and its data directory stays empty.
#[test]
fn out_of_range_timings_are_refused_before_the_node_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let data = data.to_str().unwrap();
    let base = [
        "node",
        "serve",
        "--id",
        "1",
        "--listen",
        "127.0.0.1:1",
        "--data",
        data,
    ];
    for (extra, named) in [
        (&["--heartbeat-ms", "0"][..], "heartbeat-ms"),
        (&["--election-timeout-ms", "5"][..], "election-timeout-ms"),
        (
            &["--mail-screen-timeout-ms", "0"][..],
            "mail-screen-timeout-ms",
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = whip(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(stderr.contains(named), "{extra:?}: {stderr}");
    }
    std::fs::write(dir.path().join("data/whip.toml"), "heartbeat-ms = 0\n").unwrap();
    let out = whip(dir.path(), &base);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("heartbeat-ms is 0"));
    let left: Vec<_> = std::fs::read_dir(data)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["whip.toml"], "nothing started");
}

/// The CLI refuses `--insecure` off loopback as servers do (issue 28): a token would cross
/// the network in plaintext. Nothing is dialed: the refusal comes before any connection.
#[test]
fn the_cli_dials_plaintext_only_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    for cell in [
        "198.18.0.1:7001",
        "example.com:7001",
        "127.0.0.1:7001,10.0.0.1:7001",
    ] {
        let out = whip(
            dir.path(),
            &["--insecure", "kv", "get", "k", "--cell", cell],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cell}: {stderr}");
        assert!(
            stderr.contains("--insecure dials only loopback"),
            "{cell}: {stderr}"
        );
    }
}
