//! Issue 30's ephemeral keys and `kv txn`, as the contract's command lines run them against
//! a real 3-voter dev cell: a key with `--ttl` is gone after its deadline (and not before),
//! `kv keepalive` keeps one alive, a key attached to a lease slot goes in the apply that
//! releases the slot, an outsider can neither keep a team's key alive nor attach a key to
//! the team's lock (and nothing changes), and `kv txn` runs its success or failure branch.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{DevCli, json_of, now_ms};

/// How long a key may take to disappear after its deadline (a tick round, a busy machine).
const GONE_WITHIN: Duration = Duration::from_secs(20);

fn refused(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn found(cli: &DevCli, key: &str, agent: &[&str]) -> bool {
    let args = [&["kv", "get", key, "--json"][..], agent].concat();
    json_of(&cli.run(&args))["found"] == true
}

/// Poll `kv get` until `key` is absent; the time it was first seen absent.
fn wait_gone(cli: &DevCli, key: &str, agent: &[&str]) -> u64 {
    let deadline = Instant::now() + GONE_WITHIN;
    while found(cli, key, agent) {
        assert!(Instant::now() < deadline, "{key} still there");
        std::thread::sleep(Duration::from_millis(100));
    }
    now_ms()
}

#[test]
fn a_ttl_key_goes_at_its_deadline_and_keepalive_keeps_one() {
    let cli = DevCli::start();
    let before = now_ms();
    for key in ["presence/a", "presence/b"] {
        let put = json_of(&cli.run(&["kv", "put", key, "up", "--ttl", "2s", "--json"]));
        assert_eq!(put["outcome"], "written", "{put}");
    }
    let kept = json_of(&cli.run(&["kv", "keepalive", "presence/b", "--ttl", "60s", "--json"]));
    assert_eq!(kept["outcome"], "kept_alive", "{kept}");
    assert!(
        kept["expires_at_ms"].as_u64().unwrap() >= before + 60_000,
        "{kept}"
    );
    assert!(found(&cli, "presence/a", &[]), "alive before its deadline");
    let gone = wait_gone(&cli, "presence/a", &[]);
    assert!(
        gone >= before + 2_000,
        "gone {} ms after the put",
        gone - before
    );
    assert!(
        found(&cli, "presence/b", &[]),
        "kept alive past the deadline"
    );
    let absent = refused(&cli.run(&["kv", "keepalive", "presence/a", "--ttl", "5s", "--json"]));
    assert_eq!(absent["reason"], "key_absent", "{absent}");
    json_of(&cli.run(&["kv", "put", "plain", "v", "--json"]));
    let plain = refused(&cli.run(&["kv", "keepalive", "plain", "--ttl", "5s", "--json"]));
    assert_eq!(plain["reason"], "no_deadline", "{plain}");
    let short = cli.run(&["kv", "put", "k", "v", "--ttl", "1ms"]);
    assert_eq!(
        short.status.code(),
        Some(1),
        "a TTL below the minimum is refused"
    );
    assert!(!found(&cli, "k", &[]), "and writes nothing");
}

#[test]
fn a_key_attached_to_a_lease_slot_goes_with_its_release() {
    let cli = DevCli::start();
    let held = json_of(&cli.run(&[
        "lease", "acquire", "deploy", "prod", "--holder", "alice", "--ttl", "60s", "--json",
    ]));
    assert_eq!(held["outcome"], "held");
    let put = json_of(&cli.run(&[
        "kv",
        "put",
        "svc/alice",
        "10.0.0.1",
        "--lease",
        "deploy/prod",
        "--holder",
        "alice",
        "--json",
    ]));
    assert_eq!(put["outcome"], "written", "{put}");
    let stranger = refused(&cli.run(&[
        "kv",
        "put",
        "svc/bob",
        "10.0.0.2",
        "--lease",
        "deploy/prod",
        "--holder",
        "bob",
        "--json",
    ]));
    assert_eq!(stranger["reason"], "lease_not_held", "{stranger}");
    assert!(!found(&cli, "svc/bob", &[]), "a refused put writes nothing");
    assert!(found(&cli, "svc/alice", &[]));
    let released = json_of(&cli.run(&[
        "lease", "release", "deploy", "prod", "--holder", "alice", "--json",
    ]));
    assert_eq!(released["outcome"], "released", "{released}");
    // The release's own apply deleted the key: no wait.
    assert!(!found(&cli, "svc/alice", &[]), "the key went with the slot");
}

/// mallory, in no team, reaches for alice's team: she keeps alice's presence key alive
/// and attaches a key of her own to alice's lock. Both are refused `not_member`, her key
/// is not written, and alice's key still dies at its first deadline.
#[test]
fn an_outsider_neither_keeps_a_teams_key_alive_nor_attaches_to_its_lock() {
    let cli = DevCli::start();
    let alice = ["--agent", "alice"];
    let mallory = ["--agent", "mallory"];
    let run = |args: &[&str], who: &[&str]| cli.run(&[args, who].concat());
    json_of(&run(&["team", "create", "web", "--json"], &alice));
    let lock = [
        "lease", "acquire", "locks", "deploy", "--owner", "team/web", "--holder", "alice-h",
        "--ttl", "60s", "--json",
    ];
    assert_eq!(json_of(&run(&lock, &alice))["outcome"], "held");
    let key = "doc/{web}/presence";
    let put = ["kv", "put", key, "alice", "--ttl", "3s", "--json"];
    let before = now_ms();
    assert_eq!(json_of(&run(&put, &alice))["outcome"], "written");
    let keepalive = ["kv", "keepalive", key, "--ttl", "1h", "--json"];
    let attach = [
        "kv",
        "put",
        "mallory/ears",
        "on",
        "--lease",
        "locks/deploy",
        "--lease-owner",
        "team/web",
        "--holder",
        "alice-h",
        "--json",
    ];
    for args in [&keepalive[..], &attach] {
        let out = run(args, &mallory);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not_member"), "{stderr}");
    }
    assert!(!found(&cli, "mallory/ears", &mallory), "nothing written");
    let gone = wait_gone(&cli, key, &alice);
    assert!(
        gone < before + 3_000 + GONE_WITHIN.as_millis() as u64,
        "the refused keepalive did not extend the deadline"
    );
}

#[test]
fn kv_txn_runs_the_success_or_the_failure_branch() {
    let cli = DevCli::start();
    let create = r#"{"compare":[{"key":"cfg","version":0}],
        "success":[{"put":{"key":"cfg","value":"v1"}},{"get":{"key":"cfg"}}],
        "failure":[{"get":{"key":"cfg"}}]}"#;
    let first = json_of(&cli.run(&["kv", "txn", "--json", create]));
    assert_eq!(first["succeeded"], true, "{first}");
    let version = first["responses"][0]["put"]["version"].as_u64().unwrap();
    assert_eq!(version, first["fence"].as_u64().unwrap());
    let got = &first["responses"][1]["get"];
    assert_eq!(
        (&got["found"], &got["value"]),
        (&Value::Bool(true), &Value::from("v1"))
    );
    let again = json_of(&cli.run(&["kv", "txn", "--json", create]));
    assert_eq!(again["succeeded"], false, "{again}");
    let responses = again["responses"].as_array().unwrap();
    assert_eq!(responses.len(), 1, "only the failure branch ran: {again}");
    assert_eq!(responses[0]["get"]["value"], "v1");
    assert_eq!(responses[0]["get"]["version"].as_u64(), Some(version));
    let swap = r#"{"compare":[{"key":"cfg","value":"v1"},{"key":"cfg","version":1,"op":">"}],
        "success":[{"delete":{"key":"cfg"}},{"put":{"key":"cfg.old","value":"v1"}}]}"#;
    let swapped = json_of(&cli.run(&["kv", "txn", "--json", swap]));
    assert_eq!(swapped["succeeded"], true, "{swapped}");
    let deleted = &swapped["responses"][0]["delete"];
    assert_eq!(
        (&deleted["deleted"], deleted["version"].as_u64()),
        (&Value::Bool(true), Some(version))
    );
    assert!(!found(&cli, "cfg", &[]) && found(&cli, "cfg.old", &[]));
    for bad in [
        "{not json",
        r#"{"compare":[{"key":"cfg.old","value":"v1","version":3}],"success":[]}"#,
        r#"{"success":[{"put":{"key":"cfg.old","value":"x"}},{"delete":{"key":"cfg.old"}}]}"#,
        r#"{"success":[{"rename":{"key":"cfg.old"}}]}"#,
    ] {
        let out = cli.run(&["kv", "txn", "--json", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        assert!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["error"].is_string());
    }
    let kept = json_of(&cli.run(&["kv", "get", "cfg.old", "--json"]));
    assert_eq!(kept["value"], "v1", "bad transactions changed nothing");
}
