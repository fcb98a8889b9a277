//! Goal: a child instance that `invoke` creates lives on whichever cell owns its id, and its
//! terminal resolves the parent's invocation across cells. Method: three `whip node serve`
//! processes with four data cells; `whip run` of a parent that invokes a child, through one
//! node, until a parent and its child land on different cells (ring quarters); both are read
//! back through another node.

use serde_json::Value;
use whip_board::route;

fn quarter(id: &str) -> u64 {
    route::kv_point(format!("e/{{{id}}}/s/q").as_bytes()) >> 62
}

#[test]
fn a_child_on_another_cell_resolves_its_parents_invocation() {
    let dir = crate::workdir();
    let d = dir.path();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/data");
    std::fs::copy(data.join("invoke.whip"), d.join("invoke.whip")).unwrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let fabric = runtime.block_on(whip_tests::fabric::ProcessFabric::start(3));
    crate::init_fabric(d, &fabric);
    let (entry, other) = (
        Some(fabric.addrs[0].as_str()),
        Some(fabric.addrs[2].as_str()),
    );
    let mut crossed = None;
    // Four cells by ring quarter: twelve parents all beside their child would be 4^-12.
    for _ in 0..12 {
        let out = crate::whip(
            d,
            entry,
            &["--json", "run", "invoke.whip", "--root", "Parent"],
        );
        let run: Value = serde_json::from_str(crate::ok(&out).trim()).unwrap();
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(
            run["terminal"]["payload"]["note"],
            "parent saw: child did build"
        );
        let parent = run["id"].as_str().unwrap().to_string();
        let listed = crate::ok(&crate::whip(d, other, &["--json", "instances"]));
        let rows: Value = serde_json::from_str(listed.trim()).unwrap();
        let child = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["parent"][0] == parent.as_str())
            .unwrap_or_else(|| panic!("the child of {parent} is listed: {listed}"));
        assert_eq!(child["status"], "completed", "{child}");
        let child = child["id"].as_str().unwrap().to_string();
        if quarter(&child) != quarter(&parent) {
            crossed = Some((parent, child));
            break;
        }
    }
    let (parent, child) = crossed.expect("some child landed on another cell than its parent");
    let status = crate::ok(&crate::whip(d, other, &["--json", "status", &child]));
    let status: Value = serde_json::from_str(status.trim()).unwrap();
    assert_eq!(status["parent"][0], parent.as_str(), "{status}");
    let trace = crate::ok(&crate::whip(
        d,
        other,
        &["--json", "trace", &parent, "--check"],
    ));
    assert!(trace.contains("\"conformance\":\"ok\""), "{trace}");
}
