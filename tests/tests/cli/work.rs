//! Issue 13's contract lines on a 3-voter dev cell: `whip work …`, `whip ledger audit`,
//! and a non-member's `whip doc put` refused with `not_member`.

use std::process::Output;

use serde_json::Value;

use super::{json_of, whip_with_credentials};

/// `whip … --cell ADDR --json` against a dev cell.
struct Cli(super::DevCli);

impl Cli {
    fn start() -> Cli {
        Cli(super::DevCli::start())
    }

    fn run(&self, args: &[&str]) -> Output {
        self.0.run(&[args, &["--json"]].concat())
    }

    fn register(&self, agent: &str, parent: Option<&str>) -> Value {
        let mut args = vec!["work", "register", "--kind", "run", "--ttl", "30s"];
        args.extend(parent.map(|p| ["--parent", p]).into_iter().flatten());
        args.extend(["--agent", agent]);
        json_of(&self.run(&args))
    }
}

/// Limits, registrations admitted and refused (exit 0, naming the limit), signal, renew.
fn admit_and_steer(cli: &Cli) -> (String, String) {
    let limits = json_of(&cli.run(&["work", "limits", "--fabric-max", "2", "--depth-max", "1"]));
    assert_eq!(
        (limits["fabric_max"].as_u64(), limits["depth_max"].as_u64()),
        (Some(2), Some(1))
    );
    let root = cli.register("alice", None);
    assert_eq!(root["outcome"], "admitted", "{root}");
    assert_eq!(
        (root["depth"].as_u64(), root["lineage"].clone()),
        (Some(0), Value::Array(vec![]))
    );
    let id = root["id"].as_str().unwrap().to_string();
    let child = cli.register("alice", Some(&id));
    assert_eq!(child["lineage"][0], id.as_str());
    assert_eq!(child["peers"], Value::Array(vec![]));
    let child_id = child["id"].as_str().unwrap().to_string();
    let deep = cli.register("alice", Some(&child_id));
    assert_eq!(
        (deep["outcome"].as_str(), deep["limit"].as_str()),
        (Some("refused"), Some("depth"))
    );
    let full = cli.register("bob", None);
    assert_eq!(full["limit"], "fabric", "{full}");
    assert!(
        full["reason"].as_str().unwrap().contains("ceiling is 2"),
        "{full}"
    );
    let signal = cli.run(&["work", "signal", &id, "--set", "pause", "--agent", "alice"]);
    assert_eq!(json_of(&signal)["signal"], "pause");
    let renewed = json_of(&cli.run(&["work", "renew", &child_id, "--agent", "alice"]));
    let answer = (renewed["signal"].as_str(), renewed["reason"].as_str());
    assert_eq!(answer, (Some("pause"), Some("ancestor")));
    (id, child_id)
}

#[test]
fn the_work_registry_contract_lines() {
    let cli = Cli::start();
    let (id, child_id) = admit_and_steer(&cli);
    let listed = json_of(&cli.run(&["work", "list"]));
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let children = json_of(&cli.run(&["work", "list", "--parent", &id]));
    assert_eq!(children[0]["id"], child_id.as_str());
    let stranger = cli.run(&["work", "revoke", &id, "--agent", "mallory"]);
    assert_eq!(stranger.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&stranger.stderr).contains("not_authorized"));
    let revoked = json_of(&cli.run(&["work", "revoke", &id, "--agent", "alice"]));
    assert_eq!(revoked["removed"], 2);
    let audit = json_of(&cli.run(&["ledger", "audit"]));
    let outcomes: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["outcome"].as_str().unwrap())
        .collect();
    let expected = [
        "set",
        "admitted",
        "admitted",
        "refused_depth",
        "refused_fabric",
        "signalled",
        "not_authorized",
        "revoked",
    ];
    assert_eq!(outcomes, expected);
    assert_eq!(audit[1]["actor"], "alice");
}

#[test]
fn bad_registry_input_is_a_typed_error_and_the_cell_keeps_serving() {
    let cli = Cli::start();
    for bad in [
        &["work", "register", "--kind", "daemon", "--ttl", "30s"][..],
        &["work", "register", "--kind", "run", "--ttl", "0s"],
        &[
            "work", "register", "--kind", "run", "--ttl", "30s", "--class", "gpu",
        ],
        &[
            "work", "register", "--kind", "run", "--ttl", "30s", "--parent", "nope",
        ],
        &["work", "limits", "--depth-max", "1000"],
    ] {
        let out = cli.run(bad);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        assert!(!out.stderr.is_empty(), "{bad:?}");
    }
    assert_eq!(json_of(&cli.run(&["work", "list"])), Value::Array(vec![]));
    assert_eq!(cli.register("alice", None)["outcome"], "admitted");
}

#[test]
fn a_non_members_doc_put_is_refused_with_not_member() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let creds = d.join("credentials.json");
    let dev = whip_tests::DevCell::start(d);
    let cell = dev.member(0);
    let run = |agent: &str, args: &[&str]| -> Output {
        let args = [args, &["--agent", agent, "--cell", cell.as_str()]].concat();
        whip_with_credentials(d, &creds, &args)
    };
    assert!(run("sup", &["team", "create", "crew"]).status.success());
    let put = [
        "doc", "put", "crew", "manifest", "--value", "{}", "--expect", "0",
    ];
    let outsider = run("mallory", &put);
    assert_eq!(outsider.status.code(), Some(1));
    let message = String::from_utf8_lossy(&outsider.stderr);
    assert!(message.contains("not_member"), "{message}");
    assert!(message.contains("crew"), "{message}");
    assert!(run("sup", &put).status.success());
    let read = run("mallory", &["doc", "get", "crew", "manifest"]);
    assert_eq!(read.status.code(), Some(1));
    let lock = ["lock", "acquire", "crew", "--repo", "--holder", "m"];
    assert_eq!(run("mallory", &lock).status.code(), Some(1));
}
