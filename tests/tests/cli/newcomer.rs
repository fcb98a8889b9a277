//! Issue 30's item 8: what a new user hit in the output, each held as behaviour of real
//! `whip` processes. The embedded store makes no CA or operator credential; a server's
//! error names its cause once; `election renew` says it renewed and until when; client
//! listings leave the server's `~…` resources out; alarms print RFC 3339 times; a stopped
//! dev cell says nothing at ERROR and nothing in colour when stderr is a file; a ledger
//! named like a subcommand, and a `shared` one, are reachable.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;
use whip_tests::whip_binary;

use super::{DevCli, json_of};

/// `whip ARGS` in `dir` with its whip config in `config` and its home in `home`.
fn whip_in(dir: &Path, config: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(whip_binary())
        .current_dir(dir)
        .env("WHIP_CONFIG_DIR", config)
        .env("HOME", home)
        .env_remove("WHIP_CREDENTIALS")
        .args(args)
        .output()
        .expect("run whip")
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "whip failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Only servers make the cluster CA: commands on the embedded store (in process or over its
/// socket) never dial an address, so they leave the whip config without `ca.json` and
/// `operator.json`. An agent's token goes to the whip config too, not to `~/.config`.
#[test]
fn the_embedded_store_makes_no_ca_or_operator_credential() {
    let dir = tempfile::tempdir().unwrap();
    let (config, home) = (dir.path().join("config"), dir.path().join("home"));
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let whip = |args: &[&str]| ok(whip_in(dir.path(), &config, &home, args));
    whip(&["kv", "put", "k", "v"]);
    assert_eq!(whip(&["kv", "get", "k"]).split(' ').next(), Some("v"));
    let program = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../engine/tests/check/valid/seed_ledger_decisions.whip");
    whip(&["run", program.to_str().unwrap()]);
    for made in ["ca.json", "ca.pem", "operator.json"] {
        assert!(!config.join(made).exists(), "{made} made by a client");
    }
    whip(&["team", "create", "t"]);
    assert!(config.join("credentials.json").exists(), "the token file");
    assert!(
        !home.join(".config").exists(),
        "nothing in the user's ~/.config"
    );
}

/// A server's `unavailable` reaches the user as `unavailable: ADDR: CAUSE`, the code once.
#[test]
fn a_servers_error_names_its_cause_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let node = runtime.block_on(whip_tests::fabric::ProcessFabric::start(1));
    let dir = tempfile::tempdir().unwrap();
    let out = super::whip(dir.path(), &["kv", "get", "k", "--cell", &node.addrs[0]]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not part of an initialized fabric"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("unavailable").count(), 1, "{stderr}");
}

/// `whip election renew` answers `renewed` with the new deadline, later than the first.
#[test]
fn election_renew_says_it_renewed_and_until_when() {
    let cli = DevCli::start();
    let campaign = json_of(&cli.run(&[
        "election",
        "campaign",
        "g",
        "--candidate",
        "c1",
        "--ttl",
        "10s",
        "--json",
    ]));
    assert_eq!(campaign["outcome"], "elected", "{campaign}");
    let fence = campaign["fence"].as_u64().unwrap().to_string();
    let renew = [
        "election",
        "renew",
        "g",
        "--candidate",
        "c1",
        "--fence",
        &fence,
    ];
    let renewed = json_of(&cli.run(&[&renew[..], &["--ttl", "60s", "--json"]].concat()));
    assert_eq!(renewed["outcome"], "renewed", "{renewed}");
    let until = renewed["expires_at_ms"].as_u64().unwrap();
    assert!(
        until > campaign["expires_at_ms"].as_u64().unwrap(),
        "{renewed}"
    );
    assert_eq!(
        renewed["expires_at"].as_str().map(str::len),
        Some(24),
        "RFC 3339 with milliseconds: {renewed}"
    );
    let line = ok(cli.run(&[&renew[..], &["--ttl", "60s"]].concat()));
    assert!(
        line.starts_with(&format!("renewed fence={fence} until 20")),
        "{line}"
    );
}

/// Enrolling spends the enroller's `~enroll` budget, a server counter: neither listing of
/// counters (nor of leases) shows a `~…` resource, while the user's own counter is there.
#[test]
fn client_listings_leave_server_resources_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let creds = d.join("credentials.json");
    let run = |args: &[&str]| ok(super::whip_with_credentials(d, &creds, args));
    run(&["agent", "register", "--agent", "bob"]);
    run(&["agent", "enroll", "carl", "--agent", "bob"]);
    run(&[
        "counter", "consume", "tokens", "core", "--amount", "1", "--cap", "5", "--reset", "daily",
    ]);
    run(&[
        "lease", "acquire", "deploy", "prod", "--holder", "a", "--ttl", "30s",
    ]);
    for args in [
        &["counters"][..],
        &["counter", "list"],
        &["--json", "counters"],
        &["--json", "counter", "list"],
        &["leases"],
        &["lease", "list"],
        &["--json", "lease", "list"],
    ] {
        let listed = run(args);
        assert!(
            !listed.contains('~'),
            "{args:?} lists a server resource: {listed}"
        );
        let own = ["tokens", "deploy"]
            .iter()
            .any(|name| listed.contains(name));
        assert!(own, "{args:?} lost the user's own: {listed}");
    }
}

/// An alarm's time is RFC 3339, like every other time the CLI prints.
#[test]
fn alarms_print_rfc3339_times() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let node = runtime.block_on(whip_tests::fabric::ProcessFabric::start(1));
    let dir = tempfile::tempdir().unwrap();
    let addr = node.addrs[0].as_str();
    let whip = |args: &[&str]| ok(super::whip(dir.path(), &[args, &["--cell", addr]].concat()));
    let member = format!("1={addr}");
    whip(&[
        "fabric",
        "init",
        "--node",
        &member,
        "--cells",
        "2",
        "--replicas",
        "1",
    ]);
    // The operator's reset of a channel is an alarm until the channel carries an envelope.
    whip(&["fabric", "channel", "reset", "1", "2"]);
    let status = whip(&["fabric", "status"]);
    let alarm = status
        .lines()
        .find(|l| l.starts_with("ALARM cell 2 at "))
        .unwrap_or_else(|| panic!("no alarm: {status}"));
    let at = &alarm["ALARM cell 2 at ".len()..];
    let (time, _) = at.split_once(": ").expect("ALARM cell N at TIME: TEXT");
    assert!(
        chrono::DateTime::parse_from_rfc3339(time).is_ok(),
        "not RFC 3339: {alarm}"
    );
}

/// Stopping a dev cell that clients are using is orderly: nothing at ERROR, and its
/// stderr (a file here) carries no colour codes.
#[test]
fn a_stopped_dev_cell_logs_no_errors_and_no_colour() {
    let dir = tempfile::tempdir().unwrap();
    let stderr_path = dir.path().join("dev.err");
    let (mut dev, base) = (0..5)
        .find_map(|_| start_dev(dir.path(), &stderr_path))
        .expect("whip cell dev never became ready");
    let cell = format!("127.0.0.1:{}", base + 1);
    // A watch holds a stream open through the stop; writes keep the leader replicating.
    let mut watch = Command::new(whip_binary())
        .current_dir(dir.path())
        .args(["kv", "watch", "k", "--cell", &cell])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for i in 0..5 {
        let value = i.to_string();
        ok(super::whip(
            dir.path(),
            &["kv", "put", "k", &value, "--cell", &cell],
        ));
    }
    // What it logged while it ran (a replication timeout on a loaded machine) is not the
    // stop's: only what follows the signal counts.
    let before_stop = std::fs::metadata(&stderr_path).unwrap().len() as usize;
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(dev.id() as i32, libc::SIGINT) };
    let status = dev.wait().unwrap();
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(status.success(), "{status:?}");
    let stderr = std::fs::read(&stderr_path).unwrap();
    assert!(!stderr.contains(&0x1b), "colour in a file: {stderr:?}");
    let stopping = String::from_utf8_lossy(&stderr[before_stop..]);
    assert!(!stopping.contains("ERROR"), "{stopping}");
}

/// `whip cell dev` on fresh ports with stderr into `stderr_path`, once it printed its ready
/// line; `None` when it did not (another process took one of its three ports).
fn start_dev(dir: &Path, stderr_path: &Path) -> Option<(Child, u16)> {
    let base = whip_tests::free_addrs(1)[0].port().max(20_000);
    let mut dev = Command::new(whip_binary())
        .current_dir(dir)
        .args([
            "cell",
            "dev",
            "--voters",
            "3",
            "--base-port",
            &base.to_string(),
        ])
        .args(["--data", &format!("dev-{base}")])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    let stdout = dev.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready).unwrap();
    if ready.contains("ready") {
        return Some((dev, base));
    }
    let _ = dev.kill();
    let _ = dev.wait();
    None
}

/// Logs go to stderr without colour when it is not a terminal (here: a pipe).
#[test]
fn logs_to_a_pipe_have_no_colour() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(whip_binary())
        .current_dir(dir.path())
        .env("WHIP_LOG", "debug")
        .args(["kv", "put", "k", "v"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DEBUG"), "nothing logged: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "colour in a pipe: {stderr:?}");
}

/// The ledger `audit` that scripts/demo.sh writes is `whip ledger list audit`, while
/// `whip ledger audit` and `whip work audit` are the registry's; a `shared` ledger shows in
/// `whip ledger NAME` as the ones programs declared do.
#[test]
fn ledgers_named_like_subcommands_and_shared_ones_are_reachable() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let whip = |args: &[&str]| ok(super::whip(d, args));
    let entry = r#"{"choice":"ship"}"#;
    whip(&["ledger", "append", "audit", "deploys", "--entry", entry]);
    whip(&["ledger", "append", "notes", "p", "--entry", entry]);
    let listed: Value =
        serde_json::from_str(&whip(&["ledger", "list", "audit", "--json"])).unwrap();
    assert_eq!(listed["entries"][0]["ledger"], "audit", "{listed}");
    assert_eq!(listed["entries"][0]["entry"]["choice"], "ship", "{listed}");
    for registry in [
        &["ledger", "audit", "--json"][..],
        &["work", "audit", "--json"],
    ] {
        let rows: Value = serde_json::from_str(&whip(registry)).unwrap();
        assert!(rows.is_array(), "{registry:?}: {rows}");
    }
    let shared = whip(&["ledger", "notes"]);
    assert_eq!(
        shared.trim_end(),
        format!("shared::notes#1 [p] by cli: {entry}"),
        "{shared}"
    );
    let json: Value = serde_json::from_str(&whip(&["ledger", "notes", "--json"])).unwrap();
    assert_eq!(json[0]["owner"], "shared", "{json}");
}
