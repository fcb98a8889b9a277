//! Goal: human listings are aligned tables and print times one way (RFC 3339), while
//! `--json` keeps the fields earlier issues' contracts read.
//! Method: real `whip` processes on an embedded store: two leases, a board with a claimed
//! and a ready task, and seed instances (whose lines keep LANGUAGE.md §6's shape); each
//! listing's header and rows are read back by column offset, every time cell is parsed as
//! RFC 3339, and the JSON keys are compared with the contract's.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use whip_tests::table;

use super::{json_of, whip_with_credentials};

/// Every row's second column starts at the header's second column; returns the rows.
fn aligned(text: &str) -> Vec<table::Row> {
    let header = text.lines().next().expect("a header row");
    let columns = table::columns(header);
    assert!(columns.len() >= 2, "{text}");
    assert!(
        columns.iter().all(|(name, _)| name == &name.to_uppercase()),
        "{text}"
    );
    let second = columns[1].1;
    for line in text.lines().skip(1) {
        let chars: Vec<char> = line.chars().collect();
        assert!(
            chars.len() > second && chars[second - 1] == ' ' && chars[second] != ' ',
            "the second column does not start at offset {second}: {line:?} in\n{text}"
        );
    }
    table::rows(text)
}

/// `cell` is an RFC 3339 time with a zone, within a day of now.
fn rfc3339(cell: &str) {
    let at = chrono::DateTime::parse_from_rfc3339(cell)
        .unwrap_or_else(|e| panic!("{cell:?} is not RFC 3339: {e}"));
    let off = (chrono::Utc::now() - at.with_timezone(&chrono::Utc))
        .num_hours()
        .abs();
    assert!(off <= 24, "{cell} is not today");
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn run(&self, args: &[&str]) -> String {
        let out = whip_with_credentials(self.path(), &self.path().join("creds.json"), args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = whip_with_credentials(self.path(), &self.path().join("creds.json"), args);
        json_of(&out)
    }
}

fn store() -> Store {
    Store {
        dir: tempfile::tempdir().unwrap(),
    }
}

#[test]
fn lease_listings_are_aligned_with_rfc3339_times_and_the_same_json() {
    let s = store();
    let acquire = ["lease", "acquire", "--ttl", "30s", "--holder"];
    s.run(&[&acquire[..], &["a", "deploy", "prod"]].concat());
    s.run(
        &[
            &acquire[..],
            &["worker-with-a-long-name", "db-migration", "k"],
        ]
        .concat(),
    );
    let rows = aligned(&s.run(&["lease", "list"]));
    let names: BTreeSet<&str> = rows.iter().map(|r| r["LEASE"].as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from(["shared::db-migration/k", "shared::deploy/prod"])
    );
    for r in &rows {
        assert_eq!(r["STATE"], "held");
        rfc3339(&r["UNTIL"]);
    }
    let listed = s.json(&["lease", "list", "--json"]);
    let lease = &listed["leases"][0];
    let lease_keys = ["owner", "name", "key", "slots", "holders", "waiters"];
    assert_eq!(keys(lease), set(&lease_keys), "{listed}");
    let holder_keys = ["holder", "fence", "expires_at", "expires_at_ms"];
    assert_eq!(keys(&lease["holders"][0]), set(&holder_keys), "{listed}");
    assert!(lease["holders"][0]["expires_at_ms"].is_u64());
}

#[test]
fn board_list_is_aligned_with_rfc3339_times_and_the_same_json() {
    let s = store();
    s.run(&["team", "create", "crew"]);
    for n in 1..=3 {
        s.run(&["board", "post", "crew", "--task", &format!("{{\"n\":{n}}}")]);
    }
    s.run(&["board", "claim", "crew", "--worker", "w-with-a-long-name"]);
    let rows = aligned(&s.run(&["board", "list", "crew"]));
    let tasks: Vec<&str> = rows.iter().map(|r| r["TASK"].as_str()).collect();
    assert_eq!(tasks, ["crew-1", "crew-2", "crew-3"]);
    let claimed = &rows[0];
    assert_eq!(
        (claimed["STATE"].as_str(), claimed["WORKER"].as_str()),
        ("claimed", "w-with-a-long-name")
    );
    rfc3339(&claimed["DEADLINE"]);
    for r in &rows {
        rfc3339(&r["POSTED"]);
    }
    assert_eq!(rows[1]["WORKER"], "-");
    let listed = s.json(&["board", "list", "crew", "--json"]);
    let task_keys = [
        "id",
        "team",
        "tier",
        "state",
        "body",
        "delivery_count",
        "worker",
        "fence",
        "deadline_ms",
        "posted_ms",
        "failures",
    ];
    assert_eq!(keys(&listed[0]), set(&task_keys), "{listed}");
    assert_eq!(listed[0]["body"]["n"], 1);
}

/// `whip instances` is a seed command: its lines keep LANGUAGE.md §6's shape
/// (`<id> <status> workflow_version=<v> epoch=<n> updated=<ts>`) rather than a table; the
/// time in it is RFC 3339 like every other.
#[test]
fn instances_keep_the_seed_line_shape_with_rfc3339_times_and_the_same_json() {
    let s = store();
    s.run(&["kv", "put", "k", "v"]);
    assert_eq!(s.run(&["instances"]), "no instances\n");
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/check/valid");
    for program in ["seed_ledger_decisions.whip", "seed_counter_budget.whip"] {
        s.run(&["run", seeds.join(program).to_str().unwrap()]);
    }
    let listed = s.run(&["instances"]);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    for line in lines {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), 5, "{line}");
        assert!(
            words[0].starts_with("ins_") && words[1] == "completed",
            "{line}"
        );
        assert!(words[2].starts_with("workflow_version="), "{line}");
        assert!(words[3]["epoch=".len()..].parse::<u64>().is_ok(), "{line}");
        rfc3339(words[4].strip_prefix("updated=").expect("updated="));
    }
    let listed = s.json(&["instances", "--json"]);
    let row_keys = [
        "id",
        "status",
        "workflow",
        "program",
        "epoch",
        "updated_ms",
        "parent",
    ];
    assert_eq!(keys(&listed[0]), set(&row_keys), "{listed}");
}
