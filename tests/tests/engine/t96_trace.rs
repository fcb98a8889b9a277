//! Goal: `whip trace ID --check` holds every instance the seed programs and a retried send
//! leave behind (`conformance=ok`), and `whip --json evidence instance ID` reports each
//! effect with its runs and diagnostics and no arguments. Method: real `whip` processes on
//! the embedded store.

use std::path::Path;

use serde_json::Value;

use crate::{ok, whip};

fn instances(dir: &Path) -> Vec<String> {
    ok(&whip(dir, None, &["instances"]))
        .lines()
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_instance_conforms_and_has_evidence() {
    let dir = crate::workdir();
    let d = dir.path();
    for program in [
        "decisions.whip",
        "deploys.whip",
        "budget.whip",
        "deploys.whip",
    ] {
        ok(&whip(d, None, &["run", program]));
    }
    ok(&whip(d, None, &["worker", "--all", "--duration", "7s"]));
    let ids = instances(d);
    assert!(ids.len() >= 4, "{ids:?}");
    for id in &ids {
        let text = ok(&whip(d, None, &["trace", id, "--check"]));
        assert_eq!(text.trim(), "conformance=ok", "{id}");
        let json = ok(&whip(d, None, &["--json", "trace", id, "--check"]));
        let json: Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(json["conformance"], "ok");
        let evidence = ok(&whip(d, None, &["--json", "evidence", "instance", id]));
        let evidence: Value = serde_json::from_str(evidence.trim()).unwrap();
        assert_eq!(evidence["instance"], id.as_str());
        for effect in evidence["effects"].as_array().expect("effects") {
            assert!(effect["runs"].is_array() && effect["diagnostics"].is_object());
            assert!(
                effect.get("args").is_none(),
                "no arguments in evidence: {effect}"
            );
        }
    }
}

/// The seed's incident loop, as written there: six non-empty JSON files and the trace.
#[test]
fn the_incident_loop_of_the_seed_captures_six_json_views() {
    let dir = crate::workdir();
    let d = dir.path();
    ok(&whip(d, None, &["run", "deploys.whip"]));
    let id = instances(d).remove(0);
    for cmd in ["status", "log", "facts", "effects", "runs", "evidence"] {
        let out = ok(&whip(d, None, &["--json", cmd, &id]));
        let json: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        let empty = json.is_null()
            || json.as_array().is_some_and(Vec::is_empty)
            || json.as_object().is_some_and(serde_json::Map::is_empty);
        assert!(!empty, "incident-{cmd}.json is empty: {out}");
    }
    let trace = ok(&whip(d, None, &["--json", "trace", &id, "--check"]));
    let trace: Value = serde_json::from_str(trace.trim()).unwrap();
    assert_eq!(trace["conformance"], "ok");
}
