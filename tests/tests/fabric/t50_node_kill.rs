//! Processes: `whip node serve` × 3, `whip fabric init` and `fabric status --json` as an
//! operator runs them; a singleton from the CLI; SIGKILL of a node → every cell still serves
//! through the others, status raises an alarm, and the restarted node rejoins.

use std::time::Duration;

use whip_cell::CellClient;
use whip_tests::fabric::ProcessFabric;
use whip_tests::{wait_for, whip_json as whip};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_fabric_survives_a_node_kill() {
    let mut fabric = ProcessFabric::start(3).await;
    let via = fabric.addrs[1].clone();
    let mut init = args(&["fabric", "init", "--cells", "4", "--cell", &via, "--json"]);
    init.extend(fabric.node_args());
    let (ok, status, err) = whip(&init);
    assert!(ok, "fabric init: {err}");
    assert_eq!(status["cells"].as_array().map(Vec::len), Some(5));
    let status_args = |addr: &str| args(&["fabric", "status", "--cell", addr, "--json"]);
    let (ok, status, err) = whip(&status_args(&fabric.addrs[2]));
    assert!(ok, "{err}");
    assert_eq!(status["nodes"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        status["alarms"].as_array().map(Vec::len),
        Some(0),
        "{status}"
    );
    for cell in status["cells"].as_array().expect("cells") {
        assert!(cell["id"].is_u64() && cell["leader"].is_u64(), "{cell}");
        assert_eq!(cell["voters"].as_array().map(Vec::len), Some(3));
        assert!(cell["ranges"].is_array());
    }
    let acquire = |holder: &str, addr: &str| {
        args(&[
            "lease",
            "acquire",
            "--singleton",
            "nightly-report",
            "--holder",
            holder,
            "--ttl",
            "30s",
            "--cell",
            addr,
            "--json",
        ])
    };
    let (ok, first, err) = whip(&acquire("a", &fabric.addrs[0]));
    assert!(ok, "{err}");
    assert_eq!(first["outcome"], "held");
    assert!(first["fence"].as_u64().is_some_and(|f| f > 0));
    let (ok, second, _) = whip(&acquire("b", &fabric.addrs[2]));
    assert!(ok);
    assert_eq!(second["outcome"], "contended");

    // Keys on every cell, then kill node 1 (a voter of every cell, leader of some).
    let client = CellClient::connect(&fabric.addrs[1..2]).expect("client");
    for i in 0..40 {
        crate::put(&client, &format!("before-{i}"), "v", Some(0)).await;
    }
    fabric.kill(1);
    let started = std::time::Instant::now();
    for i in 0..40 {
        crate::put(&client, &format!("after-{i}"), "v", Some(0)).await;
    }
    let recovered = started.elapsed();
    assert!(
        recovered < Duration::from_secs(10),
        "writes resumed in {recovered:?}"
    );
    for i in 0..40 {
        let got = crate::get(&client, &format!("before-{i}")).await;
        assert!(got.is_some(), "acknowledged before-{i} survives the kill");
    }
    let (ok, status, err) = whip(&status_args(&fabric.addrs[2]));
    assert!(ok, "{err}");
    let alarms = status["alarms"].to_string();
    assert!(
        alarms.contains("node 1") && alarms.contains("unreachable"),
        "{alarms}"
    );

    fabric.spawn(1);
    let addr = fabric.addrs[2].clone();
    wait_for(
        "alarms to clear after the restart",
        Duration::from_secs(20),
        || {
            let addr = addr.clone();
            async move {
                let (ok, status, _) = whip(&status_args(&addr));
                ok && status["alarms"].as_array().is_some_and(Vec::is_empty)
            }
        },
    )
    .await;
    let back = CellClient::connect(&fabric.addrs[0..1]).expect("client");
    for i in (0..40).step_by(5) {
        assert!(crate::get(&back, &format!("after-{i}")).await.is_some());
    }
}
