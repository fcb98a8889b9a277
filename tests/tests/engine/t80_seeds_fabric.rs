//! Goal: the engine's store works unchanged on a multi-cell fabric. Method: three
//! `whip node serve` processes with four data cells, the seed scenarios through `--cell`
//! (one node), then the instances are read through another node and their rows are found
//! spread over more than one cell.

use std::collections::BTreeSet;

use whip_board::route;

#[test]
fn seed_scenarios_on_a_four_cell_fabric() {
    let dir = crate::workdir();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let fabric = runtime.block_on(whip_tests::fabric::ProcessFabric::start(3));
    crate::init_fabric(dir.path(), &fabric);
    crate::seed_scenarios(dir.path(), Some(&fabric.addrs[1]));
    let listed = crate::ok(&crate::whip(
        dir.path(),
        Some(&fabric.addrs[2]),
        &["instances", "--json"],
    ));
    let rows: serde_json::Value = serde_json::from_str(listed.trim()).expect("instances json");
    let ids: Vec<String> = rows
        .as_array()
        .or_else(|| rows["instances"].as_array())
        .expect("a list of instances")
        .iter()
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect();
    assert!(ids.len() >= 3, "the seeds started instances: {listed}");
    let points: BTreeSet<u64> = ids
        .iter()
        .map(|id| route::kv_point(format!("e/{{{id}}}/s/q").as_bytes()) >> 62)
        .collect();
    assert!(
        points.len() > 1,
        "instances spread over cells (ring quarters {points:?})"
    );
}
