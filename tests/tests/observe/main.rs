//! The observation listener of real `whip node serve --http` processes: `/metrics` parsed
//! by a Prometheus text parser, `/healthz` and `/readyz` around `fabric init`, and the
//! dashboard in headless Chromium following a leader change after a SIGKILL.

mod t10_metrics;
mod t20_dashboard;

use std::time::Duration;

use whip_tests::browser::get;
use whip_tests::fabric::ProcessFabric;
use whip_tests::wait_for;
pub(crate) use whip_tests::whip_json as whip;

/// Strings of `list`.
pub(crate) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Start 3 nodes with `--http`, check they are healthy and not ready, initialize a fabric
/// of `cells` data cells, and wait until every node answers `/readyz` 200.
pub(crate) async fn observed_fabric(cells: u32) -> ProcessFabric {
    let fabric = ProcessFabric::start_observed(3, true).await;
    for http in fabric.http_addrs.clone() {
        wait_for("the observation listener", Duration::from_secs(10), || {
            let http = http.clone();
            async move { std::net::TcpStream::connect(&http).is_ok() }
        })
        .await;
        assert_eq!(get(&http, "/healthz"), (200, "ok\n".to_string()));
        let (status, body) = get(&http, "/readyz");
        assert_eq!((status, body.as_str()), (503, "hosts no cell yet\n"));
    }
    let via = fabric.addrs[0].clone();
    let cells = cells.to_string();
    let mut init = args(&[
        "fabric", "init", "--cells", &cells, "--cell", &via, "--json",
    ]);
    init.extend(fabric.node_args());
    let (ok, _, err) = whip(&init);
    assert!(ok, "fabric init: {err}");
    for http in fabric.http_addrs.clone() {
        wait_for("/readyz to answer 200", Duration::from_secs(20), || {
            let http = http.clone();
            async move { get(&http, "/readyz").0 == 200 }
        })
        .await;
    }
    fabric
}
