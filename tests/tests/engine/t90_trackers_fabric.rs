//! Goal: a tracker is a task board of the fabric, so it works across a multi-cell fabric
//! with many workers. Method: three `whip node serve` processes with four data cells;
//! issues filed from one node; six `whip run` workers of one `@service` program, two per
//! node, race for them; then every issue is closed exactly once (one delivery each, the
//! board counts them done), a claim whose holder went away lapses after its ttl and is
//! taken over with a greater fence, and the old holder's late finish is refused.

use std::process::Stdio;

use serde_json::Value;

use crate::{bin, ok, whip};

const ISSUES: usize = 40;
const WORKERS: usize = 6;

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(ok(out).trim()).expect("json output")
}

#[test]
fn many_workers_on_every_node_close_each_issue_exactly_once() {
    let dir = crate::workdir();
    let d = dir.path();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/data");
    std::fs::copy(src.join("swarm.whip"), d.join("swarm.whip")).unwrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let fabric = runtime.block_on(whip_tests::fabric::ProcessFabric::start(3));
    let node = |i: usize| fabric.addrs[i % 3].as_str();
    crate::init_fabric(d, &fabric);

    // The first run stores the program (declaring the tracker) and finds nothing to do.
    ok(&whip(d, Some(node(0)), &["run", "swarm.whip"]));
    for n in 1..=ISSUES {
        let title = format!("task {n}");
        let filed = ok(&whip(
            d,
            Some(node(n)),
            &["issue", "new", "backlog", "--title", &title],
        ));
        assert_eq!(filed, format!("WS-{n} filed into backlog\n"));
    }

    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            std::process::Command::new(bin())
                .current_dir(d)
                .args(["run", "swarm.whip", "--cell", node(i)])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a worker")
        })
        .collect();
    for worker in workers {
        let out = worker.wait_with_output().expect("worker exits");
        ok(&out);
    }

    let issues = json(&whip(d, Some(node(2)), &["--json", "issue", "list"]));
    let issues = issues.as_array().expect("a list of issues");
    assert_eq!(issues.len(), ISSUES, "{issues:?}");
    for issue in issues {
        assert_eq!(issue["status"], "closed", "{issue}");
        assert_eq!(issue["deliveries"], 1, "claimed exactly once: {issue}");
        let by = issue["closed_by"].as_str().unwrap_or_default();
        assert!(
            by.starts_with("ins_"),
            "closed by a worker instance: {issue}"
        );
    }
    let closers: std::collections::BTreeSet<&str> = issues
        .iter()
        .filter_map(|i| i["closed_by"].as_str())
        .collect();
    assert!(!closers.is_empty());
    let team = "~tracker/local/Swarm/backlog";
    let stats = json(&whip(d, Some(node(1)), &["board", "stats", team, "--json"]));
    assert_eq!(
        (&stats["done"], &stats["ready"], &stats["claimed"]),
        (&Value::from(ISSUES), &Value::from(0), &Value::from(0)),
        "the tracker is a board: {stats}"
    );

    // A holder that went away: its claim lapses after the ttl and another takes over.
    let last = format!("WS-{}", ISSUES + 1);
    ok(&whip(
        d,
        Some(node(0)),
        &["issue", "new", "backlog", "--title", "orphan"],
    ));
    let claim = [
        "--json", "issue", "claim", &last, "--as", "gone", "--ttl", "5s",
    ];
    let claimed_at = std::time::Instant::now();
    let first = json(&whip(d, Some(node(1)), &claim));
    let old = first["fence"].as_u64().expect("a fence");
    // The rescuer is refused while the claim lives, and gets the issue once it lapsed.
    let claim = ["--json", "issue", "claim", &last, "--as", "rescuer"];
    let second = loop {
        let out = whip(d, Some(node(2)), &claim);
        if out.status.success() {
            break json(&out);
        }
        let waited = claimed_at.elapsed();
        assert!(
            waited < std::time::Duration::from_secs(30),
            "the claim never lapsed"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(
        claimed_at.elapsed() >= std::time::Duration::from_secs(5),
        "taken over before the 5 s ttl passed"
    );
    let current = second["fence"].as_u64().expect("a fence");
    assert!(current > old, "{current} > {old}");
    let late = [
        "issue",
        "finish",
        &last,
        "--as",
        "gone",
        "--fence",
        &old.to_string(),
    ];
    let late = whip(d, Some(node(0)), &late);
    assert_eq!(late.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert!(
        stderr.contains(&format!("fence {old} is stale, current is {current}")),
        "{stderr}"
    );
    let current = current.to_string();
    let finish = [
        "issue", "finish", &last, "--as", "rescuer", "--fence", &current,
    ];
    assert_eq!(
        ok(&whip(d, Some(node(1)), &finish)),
        format!("{last} closed by rescuer\n")
    );
}
