//! Goal: the dashboard shows every cell's leader and, after the leader node of a cell is
//! killed, the new leader within 5 s. Method: a 3-node process fabric with `--http`, the
//! page of a node that survives loaded in headless Chromium (chromedriver, W3C
//! WebDriver), its table read by script while it polls; SIGKILL of the leader's process;
//! a screenshot kept under `target/test-artifacts/`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use whip_tests::browser::{Browser, artifacts_dir, get};
use whip_tests::wait_for;

use crate::observed_fabric;

const CELLS: u32 = 4;

/// The leaders the page shows, by cell (`None`: the page says none), and its poll count.
fn shown(browser: &Browser) -> (BTreeMap<u64, Option<u64>>, u64) {
    let answer = browser.execute(
        "const rows = document.querySelectorAll('#cells tbody tr[data-cell]');\
         return { polls: Number(document.getElementById('status').dataset.polls),\
                  cells: Array.from(rows).map(r => [Number(r.dataset.cell), r.dataset.leader]) };",
    );
    let cells = answer["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|pair| {
            let leader = pair[1].as_str().and_then(|l| l.parse().ok());
            (pair[0].as_u64().expect("cell id"), leader)
        })
        .collect();
    (cells, answer["polls"].as_u64().unwrap_or(0))
}

fn every_leader(cells: &BTreeMap<u64, Option<u64>>) -> bool {
    cells.len() == CELLS as usize + 1 && cells.values().all(Option::is_some)
}

/// The leader of `cell_id` as the page shows it, served by a node other than that leader
/// (leadership may move between two reads under load: take it from one observation).
async fn leader_shown_elsewhere(
    http_addrs: &[String],
    browser: &Browser,
    cell_id: u64,
    mut viewer: u64,
) -> u64 {
    loop {
        browser.open(&format!("http://{}/", http_addrs[(viewer - 1) as usize]));
        wait_for(
            "the page to show every cell's leader",
            Duration::from_secs(10),
            || {
                let ok = every_leader(&shown(browser).0);
                async move { ok }
            },
        )
        .await;
        let leader = shown(browser).0[&cell_id].expect("every leader is shown");
        if leader != viewer {
            return leader;
        }
        viewer = (1..=3u64).find(|n| *n != leader).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_dashboard_follows_a_leader_change() {
    let mut fabric = observed_fabric(CELLS).await;
    // Pick a data cell, its leader, and a node that survives to watch from.
    let (_, overview) = get(&fabric.http_addrs[0], "/api/overview");
    let overview: Value = serde_json::from_str(&overview).expect("overview JSON");
    let cell = &overview["cells"][1];
    let cell_id = cell["id"].as_u64().unwrap();
    let viewer = (1..=3u64)
        .find(|n| Some(*n) != cell["leader"].as_u64())
        .unwrap();
    let browser = Browser::start().await;
    let leader = leader_shown_elsewhere(&fabric.http_addrs, &browser, cell_id, viewer).await;

    fabric.kill(leader);
    let killed = Instant::now();
    wait_for(
        "the page to show cell's new leader",
        Duration::from_secs(5),
        || {
            let now = shown(&browser).0;
            let moved = now[&cell_id].is_some_and(|l| l != leader);
            async move { moved }
        },
    )
    .await;
    let took = killed.elapsed();
    println!("the dashboard showed cell {cell_id}'s new leader {took:?} after the kill");
    wait_for(
        "the page to show the node unreachable",
        Duration::from_secs(10),
        || {
            let down = browser.execute(&format!(
                "const r = document.querySelector('#nodes tr[data-node=\"{leader}\"] \
             [data-field=state]'); return r ? r.textContent : null;"
            ));
            async move { down == "unreachable" }
        },
    )
    .await;
    // A fast failover may show by the second poll: a later poll shows every leader.
    wait_for(
        "a later poll to show every cell's leader",
        Duration::from_secs(10),
        || {
            let (cells, polls) = shown(&browser);
            async move { every_leader(&cells) && polls > 2 }
        },
    )
    .await;
    let path = artifacts_dir().join("dashboard-leader-change.png");
    browser.screenshot(&path);
    println!("screenshot: {}", path.display());
}
